-- t8: a table without a primary key or unique constraint (a heap) under
-- CDC. Net changes need a unique index (22939); without them the capture
-- instance has no index (index_name NULL, supports_net_changes 0) and its
-- change table holds every change, an update as its before and after rows.
CREATE DATABASE t8lab
GO
USE t8lab
EXEC sys.sp_cdc_enable_db
CREATE TABLE dbo.events (kind varchar(10) NOT NULL, n int NULL)
INSERT INTO dbo.events (kind, n) VALUES ('a', 1), ('a', 1), ('b', NULL)
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'events', @role_name = NULL, @supports_net_changes = 1
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'events', @role_name = NULL, @index_name = NULL, @supports_net_changes = 0
SELECT capture_instance, supports_net_changes, index_name FROM cdc.change_tables
SELECT COUNT(*) FROM cdc.index_columns
GO
UPDATE dbo.events SET n = 2 WHERE kind = 'a'
DELETE FROM dbo.events WHERE kind = 'b'
INSERT INTO dbo.events (kind, n) VALUES ('c', 3)
EXEC sim.run_capture @ignore_latency = 1 -- sim only
WAITFOR DELAY '00:00:10' -- real only
GO
SELECT __$operation, kind, n FROM cdc.dbo_events_CT ORDER BY __$start_lsn, __$seqval, __$operation
SELECT kind, n FROM dbo.events ORDER BY kind, n
GO
