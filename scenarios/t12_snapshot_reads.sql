-- t9: the queries a snapshot reader and a chunk planner send to a base
-- table, with exact results: the key extent (MIN and MAX in CASTs), counts
-- per slice of the key (GROUP BY a computed slice), keyset seeks with TOP and
-- ORDER BY over one and two key columns, UNION ALL of range pieces with
-- OFFSET/FETCH, COUNT_BIG, string keys under the case-insensitive collation,
-- NULL keys sorting first, datetime2(7) and date keys against CASTs of text,
-- and the snapshot reader's own SELECT.
CREATE DATABASE t9lab
GO
USE t9lab
CREATE TABLE dbo.k (id int NOT NULL PRIMARY KEY, code varchar(10) NULL, at datetime2(7) NULL, d date NULL, v int NULL)
INSERT INTO dbo.k (id, code, at, d, v) VALUES
 (1, 'apple', '2024-01-01T00:00:00', '2024-01-01', 10), (2, 'Banana', '2024-01-02T03:04:05.1234567', '2024-01-02', NULL),
 (3, NULL, '2024-01-02T03:04:05.123456', '2024-01-02', 30), (4, 'cherry', NULL, '2024-01-03', 40),
 (5, 'DATE', '2024-01-03T00:00:00', NULL, 50), (6, 'elder', '2024-01-04T00:00:00', '2024-01-03', 60),
 (7, 'Fig', '2024-01-05T00:00:00', '2024-01-05', 70), (8, 'grape', '2024-01-06T12:00:00', '2024-01-05', 80),
 (10, 'honeydew', '2024-01-07T00:00:00', '2024-01-07', 100), (12, 'Kiwi', '2024-01-08T00:00:00', '2024-01-08', 120)
GO
SELECT CAST(MIN(t.[id]) AS bigint) AS lo, CAST(MAX(t.[id]) AS bigint) AS hi FROM [dbo].[k] AS t
SELECT CAST(MIN(t.[id]) AS bigint) AS lo, CAST(MAX(t.[id]) AS bigint) AS hi FROM [dbo].[k] AS t WHERE t.[id] > 100
DECLARE @lo bigint = 1, @w bigint = 4
SELECT (t.[id] - @lo) / @w AS slice, COUNT_BIG(*) AS n FROM [dbo].[k] AS t WHERE t.[id] >= 1 AND t.[id] < 13
 GROUP BY (t.[id] - @lo) / @w ORDER BY slice
SELECT COUNT_BIG(*) FROM [dbo].[k] AS t
SELECT COUNT_BIG(*) FROM [dbo].[k] AS t WHERE t.[id] >= 3 AND t.[id] < 8
GO
DECLARE @x int = 4
SELECT TOP (3) t.[id] FROM [dbo].[k] AS t WHERE t.[id] > @x ORDER BY t.[id]
DECLARE @d date = '2024-01-02', @i int = 2
SELECT TOP (4) t.[d], t.[id] FROM [dbo].[k] AS t WHERE t.[d] > @d OR (t.[d] = @d AND t.[id] > @i) ORDER BY t.[d], t.[id]
SELECT TOP (3) t.[d], t.[id] FROM [dbo].[k] AS t ORDER BY t.[d], t.[id]
SELECT t.[id] FROM (SELECT * FROM (SELECT TOP (3) t.[id] FROM [dbo].[k] AS t WHERE t.[id] >= 2 AND t.[id] < 5 ORDER BY t.[id]) p
 UNION ALL SELECT * FROM (SELECT TOP (3) t.[id] FROM [dbo].[k] AS t WHERE t.[id] >= 5 ORDER BY t.[id]) q) AS t
 ORDER BY t.[id] OFFSET 3 ROWS FETCH NEXT 1 ROWS ONLY
GO
SELECT TOP (3) t.[code] FROM [dbo].[k] AS t WHERE t.[code] >= CAST('BANANA' AS varchar(10)) ORDER BY t.[code]
SELECT t.[id] FROM [dbo].[k] AS t WHERE t.[code] = CAST('CHERRY' AS varchar(10))
SELECT TOP (2) t.[code] FROM [dbo].[k] AS t WHERE t.[code] > CAST('daTE' COLLATE SQL_Latin1_General_CP1_CI_AS AS varchar(10)) ORDER BY t.[code]
SELECT TOP (3) t.[code], t.[id] FROM [dbo].[k] AS t ORDER BY t.[code], t.[id]
SELECT t.[id] FROM [dbo].[k] AS t WHERE (t.[code] < CAST('cherry' AS varchar(10)) OR t.[code] IS NULL) ORDER BY t.[id]
DECLARE @p nvarchar(40) = N'2024-01-02T03:04:05.123456'
SELECT t.[id] FROM [dbo].[k] AS t WHERE t.[at] >= CAST(@p AS datetime2(7)) AND t.[at] < CAST(N'2024-01-04T00:00:00.000000' AS datetime2(7))
 ORDER BY t.[at]
SELECT t.[id] FROM [dbo].[k] AS t WHERE t.[d] >= CAST(N'2024-01-03' AS date) AND t.[d] < CAST(N'2024-01-05' AS date) ORDER BY t.[id]
GO
SET TRANSACTION ISOLATION LEVEL READ COMMITTED; SELECT CAST('0x0000002A000001000001' AS varchar(22)) AS [_start_lsn],
 CAST(NULL AS varchar(22)) AS [_seqval], CAST(0 AS int) AS [_operation], CAST('2026-01-02T03:04:05.123456' AS datetime2(6)) AS [_commit_ts],
 t.[id] AS [id], t.[code] AS [code], CAST(NULL AS bigint) AS [gone] FROM [dbo].[k] AS t WHERE (t.[id] IS NULL OR (t.[id] < 3))
SELECT COUNT(*) FROM (SELECT t.[id] AS [id] FROM [dbo].[k] AS t WHERE t.[id] >= 3 AND t.[id] < 11) AS x
GO
