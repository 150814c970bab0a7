"""T-SQL shapes SQLite lacks, through TDS against the real mssql-cdc-sim.

usage: sim_tsql_shapes.py PORT PASSWORD (run by sim_fidelity.sh). CROSS and
OUTER APPLY (a one-row derived table on the left with a windowed applied
query, TOP (1) and aggregates on the right), derived tables with column
alias lists, with bound parameters (pymssql) and as prepared RPCs
(python-tds); a shape the simulator cannot translate exactly is refused
with error 50000. Ends with "N passed, N failed".
"""
import sys

import pymssql
import pytds

from sim_check import Checks

PORT, PASSWORD = int(sys.argv[1]), sys.argv[2]
C = Checks("tsql")
check = C.check


def rows(cur, sql, params=None):
    cur.execute(sql, params) if params is not None else cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()]


def main():
    c = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, autocommit=True)
    cur = c.cursor()
    cur.execute("CREATE DATABASE shapes")
    cur.execute("USE shapes")
    cur.execute("CREATE TABLE dbo.e (id int NOT NULL PRIMARY KEY, v int NULL, t datetime NULL)")
    cur.execute("INSERT INTO dbo.e VALUES (1, 10, '2024-11-03T00:50:00'), (2, 30, '2024-11-03T01:20:00'),"
                " (3, 20, '2024-11-03T01:05:00'), (4, 50, '2024-11-03T01:40:00'), (5, 40, '2024-11-03T01:10:00')")
    # the LAG runs over the applied rows only: the first row after the bound has none
    got = rows(cur, "SELECT d.id, d.prev FROM (SELECT %s AS lo) b CROSS APPLY (SELECT id, LAG(v) OVER (ORDER BY id)"
                    " AS prev FROM dbo.e WHERE id > b.lo) d ORDER BY d.id", (2,))
    check("CROSS APPLY after a one-row derived table, LAG per applied range", got == [(3, None), (4, 20), (5, 50)], got)
    # drops: a time more than a minute before the one before it, in LSN (id) order
    got = rows(cur, "SELECT d.id FROM (SELECT MIN(t) AS t0 FROM dbo.e WHERE id BETWEEN %s AND %s HAVING MIN(t) IS NOT NULL) r"
                    " CROSS APPLY (SELECT x.id FROM (SELECT r.t0 AS lo) b CROSS APPLY (SELECT id, t, LAG(t) OVER"
                    " (ORDER BY id) AS prev FROM dbo.e WHERE t >= b.lo) x WHERE x.t < DATEADD(minute, -1, x.prev)) d"
                    " ORDER BY d.id", (1, 5))
    check("nested CROSS APPLY over an aggregate with HAVING (the fall-back shape)", got == [(3,), (5,)], got)
    got = rows(cur, "SELECT d.id FROM (SELECT MIN(t) AS t0 FROM dbo.e WHERE id > 99 HAVING MIN(t) IS NOT NULL) r"
                    " CROSS APPLY (SELECT id FROM dbo.e WHERE t >= r.t0) d")
    check("an aggregate left side HAVING drops: no rows", got == [], got)
    got = rows(cur, "SELECT e.id, d.v FROM dbo.e OUTER APPLY (SELECT TOP (1) f.v FROM dbo.e AS f WHERE f.id > e.id"
                    " ORDER BY f.id) d ORDER BY e.id")
    check("OUTER APPLY of TOP (1): NULL where none", got == [(1, 30), (2, 20), (3, 50), (4, 40), (5, None)], got)
    check("the applied column keeps its name", [d[0] for d in cur.description] == ["id", "v"], cur.description)
    got = rows(cur, "SELECT e.id, d.n FROM dbo.e CROSS APPLY (SELECT COUNT(*) AS n FROM dbo.e AS f WHERE f.v > e.v) d"
                    " WHERE e.id <= 2 ORDER BY e.id")
    check("CROSS APPLY of an aggregate", got == [(1, 4), (2, 2)], got)
    got = rows(cur, "SELECT v.a, v.b FROM (VALUES (%s, N'x'), (2, N'y')) v(a, b) ORDER BY v.a", (1,))
    check("VALUES with a column alias list", got == [(1, "x"), (2, "y")], got)
    got = rows(cur, "SELECT MAX(x.w) FROM (SELECT id, v FROM dbo.e) AS x(k, w) WHERE x.k < 3")
    check("a SELECT with a column alias list", got == [(30,)], got)
    try:
        cur.execute("SELECT d.v FROM dbo.e CROSS APPLY (SELECT f.v FROM dbo.e AS f WHERE f.id = e.id) d")
        check("a shape it cannot translate exactly is refused", False, cur.fetchall())
    except pymssql.DatabaseError as e:
        check("a shape it cannot translate exactly is refused", e.args[0] == 50000 and b"CROSS APPLY" in e.args[1], e)
    cur.execute("SELECT 1")
    check("the connection serves the next batch", cur.fetchall() == [(1,)])
    c.close()
    # python-tds sends parameters as an RPC (sp_executesql)
    p = pytds.connect("127.0.0.1", port=PORT, user="sa", password=PASSWORD, database="shapes", autocommit=True)
    pc = p.cursor()
    pc.execute("SELECT MIN(x.v) FROM (VALUES (%s), (%s)) x(v)", (7, 3))
    got = pc.fetchall()
    check("python-tds: column alias list over RPC parameters", [tuple(r) for r in got] == [(3,)], got)
    pc.execute("SELECT b.lo, d.id FROM (SELECT %s AS lo) b OUTER APPLY (SELECT id FROM dbo.e WHERE id > b.lo) d", (9,))
    got = [tuple(r) for r in pc.fetchall()]
    check("python-tds: OUTER APPLY with no applied rows gives one row of NULLs", got == [(9, None)], got)
    p.close()


C.run(main)
