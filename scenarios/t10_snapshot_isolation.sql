-- t7: SNAPSHOT isolation between two sessions. A database refuses it until
-- ALLOW_SNAPSHOT_ISOLATION is ON (3952); then a reader under SNAPSHOT never
-- waits for a writer (LOCK_TIMEOUT 0 and no 1222), never sees its
-- uncommitted changes, and inside a transaction keeps seeing the data as
-- committed at its first read; an update of a row another transaction
-- changed since is an update conflict (3960) that rolls the transaction
-- back. READ COMMITTED still waits for the writer.
CREATE DATABASE t7lab
GO
USE t7lab
CREATE TABLE dbo.acct (id int NOT NULL PRIMARY KEY, owner varchar(8) NOT NULL, bal decimal(10,2) NOT NULL)
INSERT INTO dbo.acct (id, owner, bal) VALUES (1, 'ann', 10.50), (2, 'bob', 9.25), (3, 'cid', 1.00)
SELECT snapshot_isolation_state, snapshot_isolation_state_desc FROM sys.databases WHERE name = 't7lab'
GO
-- @session B
USE t7lab
SET TRANSACTION ISOLATION LEVEL SNAPSHOT
SELECT COUNT(*) FROM dbo.acct
GO
-- @session A
ALTER DATABASE t7lab SET ALLOW_SNAPSHOT_ISOLATION ON
SELECT snapshot_isolation_state, snapshot_isolation_state_desc FROM sys.databases WHERE name = 't7lab'
BEGIN TRAN
UPDATE dbo.acct SET bal = bal - 5 WHERE id = 1
INSERT INTO dbo.acct (id, owner, bal) VALUES (4, 'dee', 40)
DELETE FROM dbo.acct WHERE id = 3
GO
-- @session B
SET LOCK_TIMEOUT 0
SELECT id, bal FROM dbo.acct ORDER BY id
SELECT COUNT(*), SUM(bal) FROM dbo.acct WHERE owner > 'b'
BEGIN TRAN
SELECT SUM(bal) FROM dbo.acct
GO
-- @session A
COMMIT
SELECT id, bal FROM dbo.acct ORDER BY id
GO
-- @session B
SELECT SUM(bal) FROM dbo.acct
UPDATE dbo.acct SET bal = 0 WHERE id = 1
GO
SELECT @@TRANCOUNT
SELECT id, bal FROM dbo.acct ORDER BY id
GO
-- @session A
BEGIN TRAN
UPDATE dbo.acct SET bal = 1 WHERE id = 2
GO
-- @session B
SELECT bal FROM dbo.acct WHERE id = 2
SET TRANSACTION ISOLATION LEVEL READ COMMITTED
SELECT bal FROM dbo.acct WHERE id = 2
GO
-- @session A
ROLLBACK
GO
