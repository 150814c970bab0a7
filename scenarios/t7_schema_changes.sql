-- t7: schema changes on a captured table, as SQL Server records them.
-- cdc.ddl_history gets one row per DDL (ADD, ALTER, DROP COLUMN) when the
-- capture process reads it; the capture instance keeps the columns it was
-- enabled with: a column added later is not captured, a dropped one stays
-- and reads NULL after the drop, an ALTER COLUMN changes its type in the
-- change table and in sp_cdc_get_captured_columns; a rolled-back DDL leaves
-- no row; a computed column is captured and NULL in every change row.
CREATE DATABASE t7lab
GO
USE t7lab
EXEC sys.sp_cdc_enable_db
GO
CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY, qty int NULL, note varchar(10) NULL, price decimal(10,2) NULL,
    total AS (price * 2))
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', @role_name = NULL
GO
WHILE sys.fn_cdc_get_min_lsn(N'dbo_items') = 0x00000000000000000000
BEGIN
    WAITFOR DELAY '00:00:01' -- real only
    EXEC sim.run_capture -- sim only
END
GO
INSERT INTO dbo.items (id, qty, note, price) VALUES (1, 2, 'first', 1.50)
GO
ALTER TABLE dbo.items ADD extra int NULL
GO
INSERT INTO dbo.items (id, qty, note, price, extra) VALUES (2, 3, 'second', 2.00, 99)
GO
ALTER TABLE dbo.items ALTER COLUMN note varchar(40) NULL
GO
UPDATE dbo.items SET note = 'a note longer than ten' WHERE id = 2
GO
ALTER TABLE dbo.items DROP COLUMN qty
GO
INSERT INTO dbo.items (id, note, price) VALUES (3, 'third', 3.00)
GO
BEGIN TRAN
ALTER TABLE dbo.items ADD gone int NULL
ROLLBACK
GO
WHILE (SELECT COUNT(*) FROM cdc.dbo_items_CT) < 5 OR (SELECT COUNT(*) FROM cdc.ddl_history) < 3
BEGIN
    WAITFOR DELAY '00:00:01' -- real only
    EXEC sim.run_capture -- sim only
END
GO
-- the DDL in LSN order: ADD (0), ALTER (1: the change table's column changed), DROP (0)
SELECT required_column_update, CASE WHEN ddl_command LIKE '%ADD extra%' THEN 'add' WHEN ddl_command LIKE '%ALTER COLUMN note%'
    THEN 'alter' WHEN ddl_command LIKE '%DROP COLUMN qty%' THEN 'drop' ELSE ddl_command END
FROM cdc.ddl_history ORDER BY ddl_lsn
-- each DDL lies between the change rows of the commits around it
SELECT (SELECT COUNT(*) FROM cdc.dbo_items_CT c WHERE c.__$start_lsn < h.ddl_lsn) FROM cdc.ddl_history h ORDER BY h.ddl_lsn
-- the instance's columns: as enabled (no extra; qty kept), note's new type
EXEC sys.sp_cdc_get_captured_columns @capture_instance = N'dbo_items'
SELECT column_name, is_computed FROM cdc.captured_columns ORDER BY column_ordinal
SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID(N'cdc.dbo_items_CT') AND name = N'extra'
-- the change rows: qty NULL after the drop, the computed column NULL in each
SELECT __$operation, id, ISNULL(CAST(qty AS varchar(10)), 'NULL'), note, ISNULL(CAST(total AS varchar(20)), 'NULL')
FROM cdc.dbo_items_CT ORDER BY __$start_lsn, __$seqval, __$operation
-- the source table: computed values, no rolled-back column
SELECT id, note, total FROM dbo.items ORDER BY id
SELECT name, is_computed FROM sys.columns WHERE object_id = OBJECT_ID(N'dbo.items') ORDER BY column_id
GO
