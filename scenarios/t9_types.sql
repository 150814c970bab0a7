-- t9: hierarchyid, geography, geometry, xml and sql_variant columns: stored,
-- read back losslessly as text and binary (ToString, STAsText, STAsBinary,
-- STSrid, CAST to varbinary and nvarchar, SQL_VARIANT_PROPERTY), ordered
-- where SQL Server orders them, and captured into the change table.
CREATE DATABASE t9lab
GO
USE t9lab
EXEC sys.sp_cdc_enable_db
CREATE TABLE dbo.shapes (id int NOT NULL PRIMARY KEY, node hierarchyid NULL, place geography NULL, path geometry NULL,
    doc xml NULL, tag sql_variant NULL)
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'shapes', @role_name = NULL
GO
WHILE sys.fn_cdc_get_min_lsn(N'dbo_shapes') = 0x00000000000000000000
BEGIN
    WAITFOR DELAY '00:00:01' -- real only
    EXEC sim.run_capture -- sim only
END
INSERT INTO dbo.shapes (id, node, place, path, doc, tag) VALUES (1, hierarchyid::Parse('/1/'),
    geography::Point(47.65, -122.35, 4326), geometry::STGeomFromText('LINESTRING (0 0, 3 4)', 0),
    '<order   id=''7''><line/></order>', CAST(42 AS int))
INSERT INTO dbo.shapes (id, node, place, path, doc, tag) VALUES (2, '/1/2/', geography::STGeomFromText('POINT (2.5 -1)', 4326),
    'POINT (10 20)', N'<?xml version="1.0"?><note>a &amp; b</note>', CAST(12.50 AS decimal(6,2)))
INSERT INTO dbo.shapes (id, node, tag) VALUES (3, hierarchyid::GetRoot(), N'text')
GO
SELECT id, node.ToString(), node.GetLevel(), CAST(node AS varbinary(16)) FROM dbo.shapes ORDER BY node
SELECT id, place.STAsText(), place.STSrid, place.Lat, place.Long, CAST(place AS varbinary(64)), place.STAsBinary()
FROM dbo.shapes WHERE place IS NOT NULL ORDER BY id
SELECT id, path.STAsText(), path.STGeometryType(), CAST(path AS varbinary(64)) FROM dbo.shapes WHERE path IS NOT NULL ORDER BY id
SELECT id, CAST(doc AS nvarchar(max)) FROM dbo.shapes WHERE doc IS NOT NULL ORDER BY id
SELECT id, CAST(SQL_VARIANT_PROPERTY(tag, 'BaseType') AS nvarchar(20)), CAST(SQL_VARIANT_PROPERTY(tag, 'Precision') AS int),
    CAST(SQL_VARIANT_PROPERTY(tag, 'Scale') AS int), CAST(tag AS nvarchar(20)) FROM dbo.shapes ORDER BY tag
SELECT id FROM dbo.shapes WHERE node.IsDescendantOf(hierarchyid::Parse('/1/')) = 1 ORDER BY id
GO
WHILE (SELECT COUNT(*) FROM cdc.dbo_shapes_CT) < 3
BEGIN
    WAITFOR DELAY '00:00:01' -- real only
    EXEC sim.run_capture -- sim only
END
SELECT __$operation, id, node.ToString(), place.STAsText(), path.STAsText(), CAST(doc AS nvarchar(max)), CAST(tag AS nvarchar(20))
FROM cdc.dbo_shapes_CT ORDER BY __$start_lsn, __$seqval
SELECT column_name, column_type FROM cdc.captured_columns ORDER BY column_ordinal
GO
