-- t6: READ COMMITTED between two sessions (no waiting: LOCK_TIMEOUT 0). A
-- reader of a table with another session's uncommitted insert gets 1222; a
-- NOLOCK read sees the row; a writer of another row is not blocked; after
-- COMMIT the reader sees it. Also: strings compare case-insensitively with
-- trailing spaces ignored, LIKE takes [sets].
CREATE DATABASE t6lab
GO
USE t6lab
CREATE TABLE dbo.acct (id int NOT NULL PRIMARY KEY, owner char(8) NOT NULL, bal decimal(10,2) NOT NULL)
INSERT INTO dbo.acct (id, owner, bal) VALUES (1, 'ann', 10.5), (2, 'Bob', 9.25)
GO
-- @session A
USE t6lab
BEGIN TRAN
INSERT INTO dbo.acct (id, owner, bal) VALUES (3, 'cid', 100)
GO
-- @session B
USE t6lab
SET LOCK_TIMEOUT 0
SELECT COUNT(*) FROM dbo.acct
GO
SELECT COUNT(*) FROM dbo.acct WITH (NOLOCK)
UPDATE dbo.acct SET bal = bal + 1 WHERE id = 1
GO
-- @session A
COMMIT
GO
-- @session B
SELECT COUNT(*), SUM(bal) FROM dbo.acct
SELECT id FROM dbo.acct WHERE owner = 'ANN'
SELECT id FROM dbo.acct WHERE owner LIKE '[a-b]%' ORDER BY id
GO
