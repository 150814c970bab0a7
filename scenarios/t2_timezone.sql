-- t2: tran_end_time follows the server's local clock; no commit-time regressions.
EXEC sim.set_time_zone @zone = N'E. South America Standard Time' -- sim only
EXEC sim.set_clock @utc = '2024-06-01 12:00:00' -- sim only
GO
CREATE DATABASE t2lab
GO
USE t2lab
CREATE TABLE dbo.tz (id int NOT NULL PRIMARY KEY, at datetime2(3) NULL)
EXEC sys.sp_cdc_enable_db
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'tz', @role_name = NULL
EXEC sim.run_capture -- sim only
GO
INSERT INTO dbo.tz (id, at) VALUES (1, SYSDATETIME())
INSERT INTO dbo.tz (id, at) VALUES (2, SYSDATETIME())
INSERT INTO dbo.tz (id, at) VALUES (3, SYSDATETIME())
EXEC sim.run_capture -- sim only
GO
WAITFOR DELAY '00:00:10' -- real only
SELECT CASE WHEN ABS(DATEDIFF(second, MAX(tran_end_time), SYSDATETIME())) < 60 THEN 'local'
            WHEN ABS(DATEDIFF(second, MAX(tran_end_time), SYSUTCDATETIME())) < 60 THEN 'utc'
            ELSE 'other' END AS clock
FROM cdc.lsn_time_mapping
SELECT COUNT(*) AS regressions
FROM (SELECT tran_end_time, LAG(tran_end_time) OVER (ORDER BY start_lsn) AS prev FROM cdc.lsn_time_mapping) AS x
WHERE tran_end_time < prev
SELECT CURRENT_TIMEZONE_ID() AS zone, DATEPART(TZOFFSET, SYSDATETIMEOFFSET()) AS offset_min
GO
