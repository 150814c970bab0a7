"""The reconcile's queries on a million-row table, over TDS against the real
mssql-cdc-sim (run by sim_schema.sh): integer-key buckets with COUNT_BIG(*)
and SUM(CAST(k AS decimal(38,0))) (reference §3.1 row 20, its floor for
negative keys), NTILE key tiles (row 19), keyed point reads of thousands of
keys as WHERE k IN (...) and as a join with a VALUES list. Results are
checked exactly against arithmetic; each query must answer within a bound
(generous: the machine is shared), and its time is printed.

usage: sim_reconcile.py PORT PASSWORD [ROWS]. Ends with "N passed, N failed".
"""
import decimal
import sys
import time

import pytds

from sim_check import Checks

PORT, PASSWORD = int(sys.argv[1]), sys.argv[2]
ROWS = int(sys.argv[3]) if len(sys.argv) > 3 else 1000000
LO = -(ROWS // 2)  # keys LO .. LO + ROWS - 1, negative ones too
BOUND_S = 60.0
C = Checks("reconcile")
check = C.check


def timed(cur, name, sql, params=None):
    t0 = time.monotonic()
    cur.execute(sql, params) if params is not None else cur.execute(sql)
    rows = [tuple(r) for r in cur.fetchall()]
    dt = time.monotonic() - t0
    print(f"     {name}: {dt:.2f} s")
    check(f"{name} within {BOUND_S:.0f} s", dt < BOUND_S, f"{dt:.1f} s")
    return rows


def main():
    nd = len(str(ROWS - 1))  # digits enough for 0 .. ROWS - 1
    digits = " CROSS JOIN ".join(f"(VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d{i}(x)" for i in range(nd))
    num = " + ".join(f"{10 ** i} * d{i}.x" for i in range(nd))
    with pytds.connect("127.0.0.1", "master", "sa", PASSWORD, port=PORT, autocommit=True, timeout=600) as c:
        cur = c.cursor()
        cur.execute("CREATE DATABASE rec")
        cur.execute("USE rec")
        cur.execute("CREATE TABLE dbo.big (k bigint NOT NULL PRIMARY KEY, d date NULL, v nvarchar(20) NULL)")
        t0 = time.monotonic()
        cur.execute(f"INSERT INTO dbo.big (k, d, v) SELECT n + {LO}, DATEADD(day, n % 1000, CAST('20200101' AS date)), N'v'"
                    f" FROM (SELECT {num} AS n FROM {digits}) s WHERE n < {ROWS}")
        print(f"     load {ROWS} rows: {time.monotonic() - t0:.2f} s")
        check("rows loaded", timed(cur, "count", "SELECT COUNT_BIG(*) FROM dbo.big") == [(ROWS,)])
        width = ROWS // 10
        o = "CAST([k] AS bigint)"
        w = f"CAST({width} AS bigint)"
        got = timed(cur, "integer-key buckets",
                    "SELECT [__$b] AS b, COUNT_BIG(*) AS n, SUM(CAST([__$o] AS decimal(38,0))) AS s "
                    f"FROM (SELECT {o} AS [__$o], CASE WHEN {o} >= 0 THEN {o} / {w} ELSE ({o} + 1) / {w} - 1 END AS [__$b] "
                    "FROM [dbo].[big] WHERE [k] IS NOT NULL) x GROUP BY [__$b] ORDER BY b")
        want = {}
        for b in range(LO // width - 1, (LO + ROWS) // width + 1):
            lo, hi = max(b * width, LO), min((b + 1) * width, LO + ROWS)
            if lo < hi:
                want[b] = (hi - lo, decimal.Decimal((lo + hi - 1) * (hi - lo) // 2))
        check("buckets: floor(k / width), exact counts and decimal(38,0) sums",
              got == [(b, n, s) for b, (n, s) in sorted(want.items())], (got[:3], sorted(want.items())[:3]))
        got = timed(cur, "date-key buckets",
                    "SELECT [__$b], COUNT_BIG(*), SUM(CAST([__$o] AS decimal(38,0))) FROM (SELECT"
                    " CAST(DATEDIFF(day, CAST('19700101' AS date), [d]) AS bigint) AS [__$o], CAST(DATEDIFF(day,"
                    " CAST('19700101' AS date), [d]) AS bigint) / CAST(100 AS bigint) AS [__$b] FROM [dbo].[big]"
                    " WHERE [d] IS NOT NULL) x GROUP BY [__$b] ORDER BY 1")
        check("date buckets cover every row", sum(r[1] for r in got) == ROWS, got[:3])
        got = timed(cur, "NTILE key tiles",
                    "SELECT [k] FROM (SELECT [k], [__$tile], LAG([__$tile]) OVER (ORDER BY [k]) AS [__$prev] FROM ("
                    "SELECT [k], NTILE(8) OVER (ORDER BY [k]) AS [__$tile] FROM [dbo].[big]) a) b"
                    " WHERE [__$tile] <> [__$prev] ORDER BY [__$tile]")
        # NTILE: the first ROWS % 8 tiles have one row more
        size, extra, first, want_t = ROWS // 8, ROWS % 8, LO, []
        for t in range(8):
            first += size + (1 if t < extra else 0)
            if t < 7:
                want_t.append((first,))
        check("tiles: the first key of tiles 2..8", got == want_t, (got, want_t))
        keys = [LO + (i * 7919) % ROWS for i in range(5000)]
        inlist = ", ".join(str(k) for k in keys)
        got = timed(cur, "5000 keys IN (...)", f"SELECT k, v FROM dbo.big WHERE k IN ({inlist}) ORDER BY k")
        check("IN: every key found once", [r[0] for r in got] == sorted(set(keys)), len(got))
        values = ", ".join(f"({k})" for k in keys)
        got = timed(cur, "join with 5000 VALUES",
                    f"SELECT COUNT_BIG(*), SUM(CAST(t.k AS decimal(38,0))) FROM dbo.big t JOIN (VALUES {values}) v(k) ON t.k = v.k")
        check("join: count and sum", got == [(len(keys), decimal.Decimal(sum(keys)))], (got, len(keys), sum(keys)))
        got = timed(cur, "join with 5000 VALUES (rows)",
                    f"SELECT t.k, t.d FROM dbo.big t JOIN (VALUES {values}) v(k) ON t.k = v.k ORDER BY t.k")
        check("join: rows", [r[0] for r in got] == sorted(keys), len(got))


C.run(main)
