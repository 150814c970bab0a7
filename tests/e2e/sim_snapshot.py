"""SNAPSHOT isolation and base-table reads against the real mssql-cdc-sim,
through TDS with python-tds and pymssql (FreeTDS).

usage: sim_snapshot.py PORT PASSWORD (run by sim_fidelity.sh). A database
refuses SNAPSHOT until ALLOW_SNAPSHOT_ISOLATION is ON (3952); a reader under
SNAPSHOT neither waits for a writer nor sees its changes, a snapshot
transaction keeps its start, an update conflict is 3960; READ COMMITTED still
waits (1222). sim.bulk_load_table fills a table, and the snapshot reader's
query returns the same rows from the table store (the fast path) as from
the general path, on both drivers. Ends with "N passed, N failed".
"""
import hashlib
import sys
import threading
import time

import pymssql
import pytds

from sim_check import Checks

PORT, PASSWORD = int(sys.argv[1]), sys.argv[2]
C = Checks("snapshot")
check = C.check


def connect(db="snaplab", **kw):
    return pytds.connect("127.0.0.1", port=PORT, user="sa", password=PASSWORD, database=db, autocommit=True, **kw)


def number(e):
    return getattr(e, "number", None) or (e.args[0] if e.args and isinstance(e.args[0], int) else None)


def rows(cur, sql):
    cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()]


def isolation():
    setup = connect(None)
    setup.cursor().execute("CREATE DATABASE snaplab")
    setup.close()
    a, b, w = connect(), connect(), connect()
    ca, cb, cw = a.cursor(), b.cursor(), w.cursor()
    ca.execute("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v nvarchar(20) NULL)")
    ca.execute("INSERT INTO dbo.t VALUES (1, N'one'), (2, N'two'), (3, N'three')")
    cb.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
    try:
        cb.execute("SELECT COUNT(*) FROM dbo.t")
        cb.fetchall()
        check("SNAPSHOT without ALLOW_SNAPSHOT_ISOLATION -> 3952", False, "no error")
    except pytds.tds_base.Error as e:
        check("SNAPSHOT without ALLOW_SNAPSHOT_ISOLATION -> 3952", number(e) == 3952, repr(e))
    ca.execute("ALTER DATABASE snaplab SET ALLOW_SNAPSHOT_ISOLATION ON")
    check("sys.databases says ON", rows(ca, "SELECT snapshot_isolation_state, snapshot_isolation_state_desc FROM sys.databases"
                                           " WHERE name = 'snaplab'") == [(1, "ON")])
    ca.execute("BEGIN TRAN")
    ca.execute("UPDATE dbo.t SET v = N'ONE' WHERE id = 1")
    ca.execute("DELETE FROM dbo.t WHERE id = 2")
    ca.execute("INSERT INTO dbo.t VALUES (4, N'four')")
    t0 = time.monotonic()
    got = rows(cb, "SELECT id, v FROM dbo.t ORDER BY id")
    check("SNAPSHOT reads the committed rows at once", got == [(1, "one"), (2, "two"), (3, "three")] and
          time.monotonic() - t0 < 2, repr(got))
    cw.execute("SET LOCK_TIMEOUT 100")
    try:
        cw.execute("SELECT COUNT(*) FROM dbo.t")
        cw.fetchall()
        check("READ COMMITTED still waits -> 1222", False, "no error")
    except pytds.tds_base.Error as e:
        check("READ COMMITTED still waits -> 1222", number(e) == 1222, repr(e))
    # a snapshot transaction keeps the data as of its first read
    cb.execute("BEGIN TRAN")
    first = rows(cb, "SELECT COUNT(*) FROM dbo.t")
    ca.execute("COMMIT")
    check("after the writer's COMMIT, the transaction still sees its start",
          first == [(3,)] and rows(cb, "SELECT id FROM dbo.t ORDER BY id") == [(1,), (2,), (3,)])
    try:
        cb.execute("UPDATE dbo.t SET v = N'mine' WHERE id = 1")
        check("an update of a row changed since -> 3960", False, "no error")
    except pytds.tds_base.Error as e:
        check("an update of a row changed since -> 3960", number(e) == 3960, repr(e))
    check("... and the transaction is rolled back", rows(cb, "SELECT @@TRANCOUNT") == [(0,)])
    check("a new statement sees the commit", rows(cb, "SELECT id, v FROM dbo.t ORDER BY id") ==
          [(1, "ONE"), (3, "three"), (4, "four")])
    # FreeTDS: a SNAPSHOT reader in another thread while a writer holds rows
    ca.execute("BEGIN TRAN")
    ca.execute("UPDATE dbo.t SET v = N'held' WHERE id = 3")
    out = {}

    def reader():
        p = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, database="snaplab",
                            autocommit=True, timeout=5)
        pc = p.cursor()
        pc.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; SELECT v FROM dbo.t WHERE id = 3")
        out["v"] = pc.fetchall()
        p.close()

    th = threading.Thread(target=reader)
    th.start()
    th.join(10)
    check("pymssql: a SNAPSHOT read does not wait for the writer", out.get("v") == [("three",)], repr(out))
    ca.execute("ROLLBACK")
    for c in (a, b, w):
        c.close()


SNAP_SQL = ("SET TRANSACTION ISOLATION LEVEL {iso}; SELECT CAST('0x0000002A000001000001' AS varchar(22)) AS [_start_lsn], "
            "CAST(NULL AS varchar(22)) AS [_seqval], CAST(0 AS int) AS [_operation], "
            "CAST('2026-01-02T03:04:05.123456' AS datetime2(6)) AS [_commit_ts], t.[id] AS [id], t.[big] AS [big], "
            "t.[amount] AS [amount], t.[name] AS [name], t.[at] AS [at], t.[flag] AS [flag], t.[raw] AS [raw], "
            "t.[g] AS [g], t.[note] AS [note], t.[d] AS [d], CAST(NULL AS bigint) AS [gone] FROM [dbo].[b] AS t{where}")


SLICE_SQL = ("SET TRANSACTION ISOLATION LEVEL {iso}; SELECT [__$b] AS b, COUNT_BIG(*) AS n FROM (SELECT CASE WHEN "
             "CAST([id] AS bigint) >= 0 THEN CAST([id] AS bigint) / CAST(1000 AS bigint) ELSE (CAST([id] AS bigint) + 1) / "
             "CAST(1000 AS bigint) - 1 END AS [__$b] FROM [dbo].[b] WHERE [id] IS NOT NULL AND [id] < 20001) AS x "
             "GROUP BY [__$b]")


def table_queries(cur):
    """Reads the simulator's table store served so far (sim.fast_path_stats)."""
    cur.execute("EXEC sim.fast_path_stats")
    return cur.fetchall()[0][2]


def digest(cur, sql):
    cur.execute(sql)
    h, n = hashlib.sha1(), 0
    while True:
        batch = cur.fetchmany(5000)
        if not batch:
            break
        for r in batch:
            h.update(repr(tuple(r)).encode())
            n += 1
    return n, h.hexdigest()


def table_reads():
    a = connect()
    ca = a.cursor()
    ca.execute("CREATE TABLE dbo.b (id int NOT NULL PRIMARY KEY, big bigint NULL, amount decimal(18,4) NULL,"
               " name nvarchar(50) NULL, at datetime2(7) NULL, flag bit NULL, raw varbinary(16) NULL,"
               " g uniqueidentifier NULL, note varchar(200) NULL, d date NULL)")
    ca.execute("EXEC sim.bulk_load_table @table = N'dbo.b', @rows = 20000, @seed = 3")
    check("sim.bulk_load_table loads the rows", rows(ca, "SELECT COUNT(*), MIN(id), MAX(id) FROM dbo.b") == [(20000, 1, 20000)])
    check("... and writes no change rows", rows(ca, "SELECT COUNT(*) FROM cdc.lsn_time_mapping") == [(0,)])
    # the predicates mcdc_key_select writes for an integer key: the first
    # range open below (NULL keys too), the last open above
    wheres = ["", " WHERE ([id] < 7001 OR [id] IS NULL)", " WHERE [id] >= 7001 AND ([id] < 14001 OR [id] IS NULL)",
              " WHERE [id] >= 14001"]
    p = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, database="snaplab", autocommit=True)
    pc = p.cursor()
    for iso in ("READ COMMITTED", "SNAPSHOT"):
        total = 0
        for wh in wheres:
            sql = SNAP_SQL.format(iso=iso, where=wh)
            ca.execute("EXEC sim.set_fast_path @on = 1")
            q0 = table_queries(ca)
            fast = digest(ca, sql)
            ffast = digest(pc, sql)
            served = table_queries(ca) - q0
            ca.execute("EXEC sim.set_fast_path @on = 0")
            general = digest(ca, sql)
            fgeneral = digest(pc, sql)
            ca.execute("EXEC sim.set_fast_path @on = 1")
            check(f"{iso}{wh or ' (whole table)'}: the table store's rows are the general path's (python-tds)",
                  fast == general and fast[0] > 0 and served == 2, (fast, general, served))
            check(f"{iso}{wh or ' (whole table)'}: ... and through FreeTDS", ffast == fgeneral, (ffast, fgeneral))
            if wh:
                total += fast[0]
        check(f"{iso}: the three ranges tile the table", total == 20000, total)
        # the chunk planner's counts per slice (mcdc_cdc_key_slices' text)
        sql = SLICE_SQL.format(iso=iso)
        q0 = table_queries(ca)
        fast = rows(ca, sql)
        served = table_queries(ca) - q0
        ca.execute("EXEC sim.set_fast_path @on = 0")
        general = rows(ca, sql)
        ca.execute("EXEC sim.set_fast_path @on = 1")
        check(f"{iso}: the slice counts come from the table store, the general path's",
              fast == general and served == 1 and sum(n for _, n in fast) == 20000 and len(fast) == 21,
              (fast[:3], general[:3], served))
    # keys bound as parameters (sp_executesql): text CAST to the key's type,
    # string keys under the case-insensitive collation
    ca.execute("CREATE TABLE dbo.k (id int NOT NULL PRIMARY KEY, code varchar(10) NULL, at datetime2(7) NULL, d date NULL)")
    ca.execute("INSERT INTO dbo.k VALUES (1, 'apple', '2024-01-02T03:04:05.1234567', '2024-01-02'),"
               " (2, 'Banana', '2024-01-02T03:04:05.123456', '2024-01-03'), (3, NULL, NULL, NULL), (4, 'cherry', '2024-01-05', '2024-01-05')")
    ca.execute("SELECT t.[id] FROM [dbo].[k] AS t WHERE t.[at] >= CAST(%s AS datetime2(7)) ORDER BY t.[at]",
               ("2024-01-02T03:04:05.123456",))
    check("a datetime2(7) key against CAST(? AS datetime2(7))", [r[0] for r in ca.fetchall()] == [2, 1, 4])
    ca.execute("SELECT t.[id] FROM [dbo].[k] AS t WHERE t.[d] >= CAST(%s AS date) AND t.[d] < CAST(%s AS date)"
               " ORDER BY t.[id]", ("2024-01-02", "2024-01-05"))
    check("a date key between CASTs of text", [r[0] for r in ca.fetchall()] == [1, 2])
    ca.execute("SELECT TOP (2) t.[code], t.[id] FROM [dbo].[k] AS t WHERE t.[code] > CAST(%s COLLATE"
               " SQL_Latin1_General_CP1_CI_AS AS varchar(10)) OR t.[code] IS NULL ORDER BY t.[code], t.[id]", ("APPLE",))
    check("a string key under the case-insensitive collation, NULL first", ca.fetchall() == [(None, 3), ("Banana", 2)])
    p.close()
    a.close()


C.run(isolation, table_reads)
