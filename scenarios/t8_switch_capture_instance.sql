-- t8: the capture instance switch of reference §2.5, as a DBA runs it after
-- a schema change: enable the new instance (it captures the new column),
-- grant SELECT on its change table, wait until capture lists both (the new
-- one's min LSN is 0x00.. until the capture process takes it up), let the
-- streams switch, disable the old instance. Both instances capture the
-- same changes while they overlap; the new one goes on alone after.
CREATE DATABASE t8lab
GO
USE t8lab
EXEC sys.sp_cdc_enable_db
CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount decimal(18,2) NULL)
CREATE LOGIN cdc_reader WITH PASSWORD = 'Reader_Passw0rd'
CREATE USER cdc_reader FOR LOGIN cdc_reader
GRANT SELECT ON dbo.orders TO cdc_reader
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL,
    @capture_instance = N'dbo_orders'
GO
WHILE sys.fn_cdc_get_min_lsn(N'dbo_orders') = 0x00000000000000000000
BEGIN
    WAITFOR DELAY '00:00:01' -- real only
    EXEC sim.run_capture -- sim only
END
GRANT SELECT ON cdc.dbo_orders_CT TO cdc_reader
INSERT INTO dbo.orders (id, amount) VALUES (1, 10.00)
GO
-- the schema change: a column the old instance will never capture
ALTER TABLE dbo.orders ADD region nvarchar(20) NULL
GO
-- 1. enable the new instance
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL,
    @capture_instance = N'dbo_orders_v2'
GO
-- 2. grant SELECT on its change table
GRANT SELECT ON cdc.dbo_orders_v2_CT TO cdc_reader
GO
-- 3. wait until both are listed with a start LSN
WHILE sys.fn_cdc_get_min_lsn(N'dbo_orders_v2') = 0x00000000000000000000
BEGIN
    WAITFOR DELAY '00:00:01' -- real only
    EXEC sim.run_capture -- sim only
END
GO
SELECT capture_instance, CASE WHEN start_lsn > 0x00000000000000000000 THEN 1 ELSE 0 END
FROM cdc.change_tables WHERE source_object_id = OBJECT_ID(N'dbo.orders') ORDER BY create_date, start_lsn
GO
-- while both exist, a change goes to both (the old one without region)
INSERT INTO dbo.orders (id, amount, region) VALUES (2, 20.00, N'north')
GO
WHILE (SELECT COUNT(*) FROM cdc.dbo_orders_v2_CT) < 1
BEGIN
    WAITFOR DELAY '00:00:01' -- real only
    EXEC sim.run_capture -- sim only
END
SELECT id, amount FROM cdc.dbo_orders_CT ORDER BY __$start_lsn
SELECT id, amount, region FROM cdc.dbo_orders_v2_CT ORDER BY __$start_lsn
-- the two rows of the same change share their LSN and sequence value
SELECT COUNT(*) FROM cdc.dbo_orders_CT a JOIN cdc.dbo_orders_v2_CT b
    ON a.__$start_lsn = b.__$start_lsn AND a.__$seqval = b.__$seqval AND a.__$operation = b.__$operation
GO
-- 4. (the streams have read past the new instance's start LSN) disable the old one
EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'orders', @capture_instance = N'dbo_orders'
GO
INSERT INTO dbo.orders (id, amount, region) VALUES (3, 30.00, N'south')
GO
WHILE (SELECT COUNT(*) FROM cdc.dbo_orders_v2_CT) < 2
BEGIN
    WAITFOR DELAY '00:00:01' -- real only
    EXEC sim.run_capture -- sim only
END
SELECT capture_instance FROM cdc.change_tables ORDER BY capture_instance
SELECT id, amount, region FROM cdc.dbo_orders_v2_CT ORDER BY __$start_lsn
SELECT HAS_PERMS_BY_NAME(N'cdc.dbo_orders_v2_CT', N'OBJECT', N'SELECT')
GO
