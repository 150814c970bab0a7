-- t5: decimal/money values compare, sort and sum by exact value (10.5 > 9.25,
-- 0.1 + 0.2 = 0.3); ROLLBACK undoes CREATE TABLE, ALTER TABLE and DROP TABLE.
CREATE DATABASE t5lab
GO
USE t5lab
CREATE TABLE dbo.amounts (id int NOT NULL PRIMARY KEY, amount decimal(10,2) NOT NULL, fee money NULL)
INSERT INTO dbo.amounts (id, amount, fee) VALUES (1, 10.5, 0.1), (2, 9.25, 0.2), (3, -1, NULL), (4, 100, 0.3)
GO
SELECT id FROM dbo.amounts WHERE amount < 9.5 ORDER BY id
SELECT id, amount FROM dbo.amounts ORDER BY amount DESC
SELECT SUM(amount), AVG(amount), MIN(amount), MAX(amount), SUM(fee) FROM dbo.amounts
DECLARE @limit decimal(10,2) = 10
SELECT COUNT(*) FROM dbo.amounts WHERE amount > @limit
GO
BEGIN TRAN
CREATE TABLE dbo.scratch (id int NULL)
INSERT INTO dbo.scratch (id) VALUES (1)
ALTER TABLE dbo.amounts ADD note nvarchar(10) NULL
UPDATE dbo.amounts SET note = N'x'
DROP TABLE dbo.amounts
ROLLBACK
GO
SELECT COUNT(*) FROM sys.tables WHERE name = N'scratch'
SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID(N'dbo.amounts')
SELECT COUNT(*), SUM(amount) FROM dbo.amounts
GO
