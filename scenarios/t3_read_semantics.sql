-- t3: one transaction insert, update, update, delete of another row -> 2,3,4,3,4,1;
-- a primary-key update reads as 1 and 2; an empty interval reads 0 rows;
-- cleanup to max_lsn empties the purged range and moves min_lsn.
CREATE DATABASE t3lab
GO
USE t3lab
CREATE TABLE dbo.sem (id int NOT NULL PRIMARY KEY, v nvarchar(20) NULL)
EXEC sys.sp_cdc_enable_db
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'sem', @role_name = NULL
EXEC sim.run_capture -- sim only
GO
INSERT INTO dbo.sem (id, v) VALUES (1, N'other')
GO
BEGIN TRAN
INSERT INTO dbo.sem (id, v) VALUES (2, N'a')
UPDATE dbo.sem SET v = N'b' WHERE id = 2
UPDATE dbo.sem SET v = N'c' WHERE id = 2
DELETE FROM dbo.sem WHERE id = 1
COMMIT
GO
UPDATE dbo.sem SET id = 3 WHERE id = 2
EXEC sim.run_capture -- sim only
GO
WAITFOR DELAY '00:00:15' -- real only
-- the multi-statement transaction: second commit
SELECT c.[__$operation], c.[__$command_id], c.id, c.v
FROM cdc.[dbo_sem_CT] AS c
WHERE c.[__$start_lsn] = (SELECT MIN(x.[__$start_lsn]) FROM cdc.[dbo_sem_CT] AS x WHERE x.[__$start_lsn] >
                           (SELECT MIN(y.[__$start_lsn]) FROM cdc.[dbo_sem_CT] AS y))
ORDER BY c.[__$start_lsn], c.[__$command_id], c.[__$seqval], c.[__$operation]
-- the primary-key update: last commit
SELECT c.[__$operation], c.id, c.v
FROM cdc.[dbo_sem_CT] AS c
WHERE c.[__$start_lsn] = (SELECT MAX(x.[__$start_lsn]) FROM cdc.[dbo_sem_CT] AS x)
ORDER BY c.[__$start_lsn], c.[__$command_id], c.[__$seqval], c.[__$operation]
-- empty interval (from > to)
SELECT COUNT(*) AS empty_interval
FROM cdc.[dbo_sem_CT]
WHERE [__$start_lsn] BETWEEN sys.fn_cdc_increment_lsn(sys.fn_cdc_get_max_lsn()) AND sys.fn_cdc_get_max_lsn()
GO
CREATE TABLE dbo.t3_probe (k int NOT NULL PRIMARY KEY, min_before binary(10) NULL, max_at binary(10) NULL)
INSERT INTO dbo.t3_probe VALUES (1, sys.fn_cdc_get_min_lsn(N'dbo_sem'), sys.fn_cdc_get_max_lsn())
GO
DECLARE @lw binary(10) = sys.fn_cdc_get_max_lsn()
EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_sem', @low_water_mark = @lw, @threshold = 5000
GO
SELECT CASE WHEN sys.fn_cdc_get_min_lsn(N'dbo_sem') > min_before THEN 'moved' ELSE 'stuck' END AS min_lsn,
       CASE WHEN sys.fn_cdc_get_min_lsn(N'dbo_sem') = max_at THEN 'at_max' ELSE 'elsewhere' END AS min_at
FROM dbo.t3_probe WHERE k = 1
SELECT COUNT(*) AS purged_rows_left
FROM cdc.[dbo_sem_CT] WHERE [__$start_lsn] < (SELECT max_at FROM dbo.t3_probe WHERE k = 1)
GO
