-- t1: idle mapping entries every ~305 s while the database is quiet; max_lsn moves.
CREATE DATABASE t1lab
GO
USE t1lab
CREATE TABLE dbo.beat (id int NOT NULL PRIMARY KEY, v varchar(20) NULL)
EXEC sys.sp_cdc_enable_db
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'beat', @role_name = NULL
EXEC sim.run_capture -- sim only
GO
INSERT INTO dbo.beat (id, v) VALUES (1, 'one')
EXEC sim.run_capture -- sim only
GO
CREATE TABLE dbo.t1_probe (k int NOT NULL PRIMARY KEY, max_lsn binary(10) NULL)
INSERT INTO dbo.t1_probe (k, max_lsn) VALUES (1, sys.fn_cdc_get_max_lsn())
GO
WAITFOR DELAY '00:11:00' -- real only
EXEC sim.advance_clock @seconds = 660 -- sim only
EXEC sim.run_capture -- sim only
GO
-- idle entries: mapping rows with no change rows
SELECT COUNT(*) AS idle_entries
FROM cdc.lsn_time_mapping AS m
WHERE NOT EXISTS (SELECT 1 FROM cdc.[dbo_beat_CT] AS c WHERE c.[__$start_lsn] = m.start_lsn)
SELECT DATEDIFF(second, LAG(tran_end_time) OVER (ORDER BY start_lsn), tran_end_time) AS gap_s
FROM cdc.lsn_time_mapping AS m
WHERE NOT EXISTS (SELECT 1 FROM cdc.[dbo_beat_CT] AS c WHERE c.[__$start_lsn] = m.start_lsn)
ORDER BY start_lsn
SELECT CASE WHEN sys.fn_cdc_get_max_lsn() > (SELECT max_lsn FROM dbo.t1_probe WHERE k = 1) THEN 'moved' ELSE 'stuck' END AS max_lsn
GO
