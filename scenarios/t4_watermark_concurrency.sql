-- t4: a long transaction begun first and committed last gets the higher LSN
-- (LSN order = commit order); no change row appears below an observed max_lsn.
CREATE DATABASE t4lab
GO
USE t4lab
CREATE TABLE dbo.wm (id int NOT NULL PRIMARY KEY, who varchar(10) NULL)
CREATE TABLE dbo.t4_probe (k int NOT NULL PRIMARY KEY, max_lsn binary(10) NULL, rows_below int NULL)
EXEC sys.sp_cdc_enable_db
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'wm', @role_name = NULL
EXEC sim.run_capture -- sim only
GO
-- @session A
USE t4lab
BEGIN TRAN
INSERT INTO dbo.wm (id, who) VALUES (100, 'long')
GO
-- @session B
USE t4lab
INSERT INTO dbo.wm (id, who) VALUES (1, 'short')
INSERT INTO dbo.wm (id, who) VALUES (2, 'short')
EXEC sim.run_capture -- sim only
GO
WAITFOR DELAY '00:00:15' -- real only
INSERT INTO dbo.t4_probe (k, max_lsn, rows_below)
SELECT 1, sys.fn_cdc_get_max_lsn(), (SELECT COUNT(*) FROM cdc.[dbo_wm_CT] WHERE [__$start_lsn] <= sys.fn_cdc_get_max_lsn())
GO
-- @session A
COMMIT
EXEC sim.run_capture -- sim only
GO
WAITFOR DELAY '00:00:15' -- real only
-- rows at or below the observed max_lsn: unchanged
SELECT p.rows_below, (SELECT COUNT(*) FROM cdc.[dbo_wm_CT] WHERE [__$start_lsn] <= p.max_lsn) AS rows_now
FROM dbo.t4_probe AS p WHERE p.k = 1
-- commit order: the long transaction last
SELECT who, id FROM cdc.[dbo_wm_CT] ORDER BY [__$start_lsn], [__$seqval]
-- its change was logged before the short commits (seqval below their LSNs)
SELECT CASE WHEN (SELECT [__$seqval] FROM cdc.[dbo_wm_CT] WHERE id = 100)
                 < (SELECT MIN([__$start_lsn]) FROM cdc.[dbo_wm_CT] WHERE who = 'short') THEN 'begun_first' ELSE 'no' END AS long_tx
-- no commit with a higher LSN but an earlier time
SELECT COUNT(*) AS time_regressions
FROM (SELECT tran_end_time, LAG(tran_end_time) OVER (ORDER BY start_lsn) AS prev FROM cdc.lsn_time_mapping) AS x
WHERE tran_end_time < prev
GO
