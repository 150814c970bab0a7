"""The reference's own T-SQL, as it builds it, against the real mssql-cdc-sim.

usage: sim_reference_sql.py PORT PASSWORD SIM_BIN   (run by sim_reference_sql.sh)

The reference package (mssql-cdc-pyspark 0.8.0, tests/requirements.txt) is
imported, not copied: its SqlCdcClient runs each query of reference.md §3.1
over its own MssqlPythonBackend (Microsoft's mssql-python, no Spark), so the
simulator sees the exact text and parameters the reference sends. Where a
query is only part of a method (the range offset, the fall-back drops), the
client's method that builds and runs it is called.

The expected values are not the simulator's answers read back: the scenario
sets the server clock and zone (sim.set_clock, sim.set_time_zone), so each
commit's UTC instant is known by construction; the rest comes from the rows
as stored (cdc.lsn_time_mapping, the change table), read as admin with
pymssql, and from the semantics of the SQL (NTILE, LAG, floor division,
zoneinfo for AT TIME ZONE). That is what SQL Server returns for this data.

Phases: UTC (metadata, LSN functions, change read, snapshot queries, DDL
history, permissions, SET prefixes); 'Pacific Standard Time' across the
2024-11-03 fall-back (commit times by the repeated hour's second pass, via
CROSS APPLY); a stable offset (one DATEADD for a range); and a server that
reports version 15 (the pre-2022 offset fallback).
Ends with "N passed, N failed".
"""
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from zoneinfo import ZoneInfo

import pymssql

from sim_check import Checks

try:
    from mssql_cdc import lsn as ref_lsn
    from mssql_cdc.client import MssqlPythonBackend, SqlCdcClient
    from mssql_cdc.client._protocols import CaptureInstance, DdlChange, SourceTable
except ImportError as e:  # a missing install is a failure, with what to do
    print(f"FAIL reference: cannot import the reference package ({e}); install it with"
          " .venv/bin/pip install --no-deps mssql-cdc-pyspark==0.8.0 (tests/requirements.txt)")
    print("0 passed, 1 failed")
    sys.exit(1)

PORT, PASSWORD, SIM_BIN = int(sys.argv[1]), sys.argv[2], sys.argv[3]
C = Checks("reference")
check = C.check
CI = "dbo_orders"
LA = ZoneInfo("America/Los_Angeles")  # the Windows zone 'Pacific Standard Time'
READER_PW = "Reader!Pw1"


def conn_str(port, db="refdb"):
    return f"Server=127.0.0.1,{port};Database={db};Encrypt=yes;TrustServerCertificate=yes"


class Admin:
    """sa over pymssql: the scenario's statements and reads of the stored rows."""

    def __init__(self, port, db=None):
        self.c = pymssql.connect(server="127.0.0.1", port=port, user="sa", password=PASSWORD, autocommit=True,
                                 **({"database": db} if db else {}))
        self.cur = self.c.cursor()

    def run(self, sql):
        self.cur.execute(sql)
        while True:  # drain every result of the batch
            if self.cur.description:
                self.cur.fetchall()
            if not self.cur.nextset():
                break

    def rows(self, sql):
        self.cur.execute(sql)
        return [tuple(r) for r in self.cur.fetchall()]


def hexlsn(i):
    return "0x%020X" % i


def lsn_int(h):
    return int(h, 16)


def ms_iso(t):
    return t.isoformat(timespec="milliseconds")


def parse126(s):
    """CONVERT(varchar(23), datetime, 126) text -> naive datetime."""
    return dt.datetime.fromisoformat(s)


def mapping(adm):
    """cdc.lsn_time_mapping as stored: [(lsn hex, local datetime, text 126, tran_id hex)]."""
    got = adm.rows("SELECT CONVERT(varchar(22), start_lsn, 1), CONVERT(varchar(23), tran_end_time, 126),"
                   " CONVERT(varchar(22), tran_id, 1) FROM cdc.lsn_time_mapping ORDER BY start_lsn")
    return [(l, parse126(t), t, tid) for l, t, tid in got]


def change_rows(adm):
    """The change table as stored, in the reader's order."""
    return adm.rows("SELECT CONVERT(varchar(22), __$start_lsn, 1), CONVERT(varchar(22), __$seqval, 1), __$operation,"
                    " __$command_id, id, code, amount, note, placed FROM cdc.[dbo_orders_CT]"
                    " ORDER BY __$start_lsn, __$command_id, __$seqval, __$operation")


def ntile(items, n):
    """SQL Server's NTILE(n) over ordered items: [(tile, item)], tiles from 1,
    the first len % n tiles one longer."""
    q, r = divmod(len(items), n)
    out, k = [], 0
    for g in range(1, n + 1):
        size = q + (1 if g <= r else 0)
        out += [(g, it) for it in items[k:k + size]]
        k += size
    return out


def batches_rows(it):
    return [r for b in it for r in b.to_pylist()]


def raises(f, kind):
    try:
        f()
        return None
    except kind as e:
        return e


def main():
    adm = Admin(PORT)
    # ---- phase UTC: the server clock at 2024-10-01 12:00 UTC -------------------
    adm.run("EXEC sim.set_clock @utc = '2024-10-01 12:00:00'")
    adm.run("CREATE DATABASE refdb")
    adm.run("USE refdb")
    adm.run("EXEC sys.sp_cdc_enable_db")
    adm.run("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, code varchar(20) NULL, amount decimal(10,2) NULL,"
            " note nvarchar(50) NULL, placed date NULL)")
    adm.run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL")
    adm.run("EXEC sim.run_capture")
    data = {}
    for i in range(1, 6):
        placed = dt.date(2024, 9, 1) + dt.timedelta(days=9 * i)
        adm.run(f"INSERT INTO dbo.orders VALUES ({i}, 'c{i}', {i}.25, N'n\u00e9{i}', '{placed.isoformat()}')")
        data[i] = (f"c{i}", Decimal(f"{i}.25"), f"n\u00e9{i}", placed)
        adm.run("EXEC sim.advance_clock @seconds = 1")
    adm.run("BEGIN TRAN; UPDATE dbo.orders SET amount = 9.99 WHERE id = 2; DELETE FROM dbo.orders WHERE id = 5; COMMIT")
    data[2] = (data[2][0], Decimal("9.99"), data[2][2], data[2][3])
    del data[5]
    adm.run("EXEC sim.run_capture")
    m = mapping(adm)
    ch = change_rows(adm)
    commits = sorted({r[0] for r in ch}, key=lsn_int)
    check("scenario: 6 commits captured, no idle mapping entries", len(commits) == 6 and len(m) == 6 and
          all(tid != "0x00000000000000000000" for _, _, _, tid in m), (commits, m))
    local_of = {l: t for l, t, _, _ in m}
    utc_of = {l: local_of[l] for l in commits}  # the server's zone is UTC

    b = MssqlPythonBackend(conn_str(PORT), 30, user="sa", password=PASSWORD)
    cl = SqlCdcClient(b, "auto")
    # row 9: version probe, then CURRENT_TIMEZONE_ID()
    check("row 9: zone detected by version probe + CURRENT_TIMEZONE_ID()", cl.timezone == "UTC", cl.timezone)
    # row 1
    want_max = max((l for l, _, _, _ in m), key=lsn_int)
    check("row 1: max_lsn is the mapping's last LSN", cl.max_lsn() == want_max, (cl.max_lsn(), want_max))
    # row 2
    want_min = adm.rows("SELECT CONVERT(varchar(22), start_lsn, 1) FROM cdc.change_tables"
                        f" WHERE capture_instance = '{CI}'")[0][0]
    check("row 2: min_lsn is the instance's low endpoint", cl.min_lsn(CI) == want_min, (cl.min_lsn(CI), want_min))
    e = raises(lambda: cl.min_lsn("dbo_nosuch"), ValueError)
    check("row 2: an unknown instance reads 0x00... -> ValueError", e is not None and "not found" in str(e), e)
    # row 3
    check("row 3: fn_cdc_increment_lsn", cl.increment_lsn(want_max) == hexlsn(lsn_int(want_max) + 1))
    check("row 3: fn_cdc_decrement_lsn", cl.decrement_lsn(want_max) == hexlsn(lsn_int(want_max) - 1))
    # row 4: lsn_to_time ("=") and the "<=" variant
    got = [cl.lsn_to_time(l) for l in commits]
    check("row 4: lsn_to_time of every commit (UTC, ms)", got == [ms_iso(utc_of[l]) for l in commits], got)
    seq_only = ch[0][1]  # a seqval: an LSN no commit has
    check("row 4: lsn_to_time of an LSN that is no commit is None", seq_only not in local_of and
          cl.lsn_to_time(seq_only) is None)
    before = max((l for l in commits if lsn_int(l) <= lsn_int(seq_only)), key=lsn_int, default=None)
    got = cl._commit_time_at_or_before(seq_only)
    check("row 4: '<=' variant gives the last commit at or before", got == (ms_iso(utc_of[before]) if before else None),
          (got, before))
    # row 5: time_to_lsn, whole seconds
    ts = utc_of[commits[2]] + dt.timedelta(milliseconds=1500)
    cut = ts.replace(microsecond=0)
    want = max((l for l in commits if utc_of[l] <= cut), key=lsn_int)
    check("row 5: time_to_lsn (largest less than or equal)", cl.time_to_lsn(ts) == want, (cl.time_to_lsn(ts), want))
    check("row 5: before every commit -> None", cl.time_to_lsn(dt.datetime(2024, 9, 1)) is None)
    # row 6: nth_commit_after
    all_lsns = [l for l, _, _, _ in m]
    got = cl.nth_commit_after(all_lsns[0], 3)
    check("row 6: nth_commit_after takes the 3rd entry after", got == all_lsns[3], (got, all_lsns))
    check("row 6: past the end -> the last", cl.nth_commit_after(all_lsns[-2], 5) == all_lsns[-1])
    # row 7: split_points
    lo, hi = want_min, want_max
    in_range = sorted((r[0] for r in ch if lsn_int(lo) <= lsn_int(r[0]) <= lsn_int(hi)), key=lsn_int)
    for n in (2, 3, 4):
        tiles = {}
        for g, l in ntile(in_range, n):
            tiles.setdefault(g, []).append(l)
        want = sorted(((max(v, key=lsn_int), hexlsn(lsn_int(max(v, key=lsn_int)) + 1), len(v)) for v in tiles.values()),
                      key=lambda t: lsn_int(t[0]))
        got = cl.split_points(CI, lo, hi, n)
        check(f"row 7: split_points n={n} (NTILE bounds, next starts, row counts)", got == want, (got, want))
    # row 8: iter_changes, with and without __$command_id
    cols = ["id", "code", "amount", "note", "placed"]
    for with_cmd in (True, False):
        got = batches_rows(cl.iter_changes(CI, lo, hi, cols, with_cmd, 3))
        want = []
        for r in ch:
            row = {"_start_lsn": r[0], "_seqval": r[1], "_operation": r[2]}
            if with_cmd:
                row["_command_id"] = r[3]
            row["_commit_ts"] = utc_of[r[0]]
            row.update(zip(cols, r[4:]))
            want.append(row)
        if not with_cmd:  # ordered by start LSN, seqval, operation
            want.sort(key=lambda x: (lsn_int(x["_start_lsn"]), lsn_int(x["_seqval"]), x["_operation"]))
        check(f"row 8: iter_changes (command id: {with_cmd}) rows, order, commit times", got == want,
              (got[:3], want[:3]))
    # row 12, 13
    p = cl.ping(3)
    check("row 12: ping (SELECT 1) times three", len(p) == 3 and all(isinstance(x, float) and x >= 0 for x in p), p)
    nw = cl.network_wait_ms()
    check("row 13: the session's ASYNC_NETWORK_IO wait is a number", isinstance(nw, int) and nw >= 0, nw)
    # rows 14, 15, 16: captured columns, the instance's table, sys.columns
    check("row 14: sp_cdc_get_captured_columns -> Spark schema",
          cl.captured_columns(CI) == "`id` INT, `code` STRING, `amount` DECIMAL(10,2), `note` STRING, `placed` DATE",
          cl.captured_columns(CI))
    check("row 15: sp_cdc_help_change_data_capture -> the source table and key",
          cl.source_table(CI) == SourceTable("dbo", "orders", ["id"], want_min), cl.source_table(CI))
    check("rows 14-16: capture_instances", cl.capture_instances(CI) == [CaptureInstance(
        CI, want_min, cols, ["INT", "STRING", "DECIMAL(10,2)", "STRING", "DATE"], ())], cl.capture_instances(CI))
    check("row 16: present_columns (sys.columns by OBJECT_ID(QUOTENAME...))",
          cl.present_columns(CI, cols + ["gone"]) == cols)
    got = cl.key_types(CI, ["id", "code", "amount", "placed"])
    check("row 16: key_types with the string key's collation",
          got == ["int", "varchar(20) COLLATE SQL_Latin1_General_CP1_CI_AS", "decimal(10,2)", "date"], got)
    # row 17: DDL history
    adm.run("ALTER TABLE dbo.orders ADD extra int NULL")
    adm.run("INSERT INTO dbo.orders (id, code) VALUES (6, 'c6')")
    adm.run("EXEC sim.run_capture")
    ddl = adm.rows("SELECT CONVERT(varchar(22), ddl_lsn, 1), ddl_command FROM cdc.ddl_history")
    m = mapping(adm)
    new_max = max((l for l, _, _, _ in m), key=lsn_int)
    prior = max((l for l, _, _, _ in m if lsn_int(l) <= lsn_int(ddl[0][0])), key=lsn_int)
    got = cl.ddl_history(CI, want_max, new_max)
    want = [DdlChange(ddl[0][0], ms_iso(utc_of[prior]), "ALTER TABLE dbo.orders ADD extra int NULL")]
    check("row 17: sp_cdc_get_ddl_history in (from, to], with the commit time before it", got == want, (got, want))
    check("row 17: outside the range: none", cl.ddl_history(CI, new_max, new_max) == [])
    # rows 18-24: the source table's snapshot queries (ids 1, 2, 3, 4, 6)
    ids = sorted(data) + [6]
    check("row 18: key_range", cl.key_range("dbo", "orders", "id") == (1, 6))
    check("row 18: key_range over [2, 4)", cl.key_range("dbo", "orders", "id", 2, 4) == (2, 3))
    check("row 18: key_range of an empty range", cl.key_range("dbo", "orders", "id", 50, 60) == (None, None))
    tiles = ntile(ids, 2)
    want = [(k,) for i, (g, k) in enumerate(tiles) if i and g != tiles[i - 1][0]]
    check("row 19: key_tiles (NTILE, first key of tiles 2..n)", cl.key_tiles("dbo", "orders", ["id"], 2) == want,
          cl.key_tiles("dbo", "orders", ["id"], 2))
    want = {}
    for k in ids:
        want.setdefault(k // 2, []).append(k)
    want = sorted((bk, len(v), Decimal(sum(v))) for bk, v in want.items())
    got = sorted(cl.key_buckets("dbo", "orders", "id", "int", 2))
    check("row 20: key_buckets over an int key (floor buckets, counts, sums)", got == want, (got, want))
    got = sorted(cl.key_buckets("dbo", "orders", "id", "int", 2, lo=2, hi=4))
    check("row 20: key_buckets over [2, 4)", got == [(1, 2, Decimal(5))], got)
    ords = {i: (data[i][3] - dt.date(1970, 1, 1)).days for i in data}
    want = {}
    for o in ords.values():
        want.setdefault(o // 7, []).append(o)
    want = sorted((bk, len(v), Decimal(sum(v))) for bk, v in want.items())
    got = sorted(cl.key_buckets("dbo", "orders", "placed", "date", 7))
    check("row 20: key_buckets over a date key (days since 1970, NULL keys left out)", got == want, (got, want))
    check("row 20: whole-table count", cl.key_buckets("dbo", "orders", None, None, 1) == [(0, len(ids), None)])
    got = batches_rows(cl.iter_table("dbo", "orders", ["id", "code"], ["id"], None, (2,), (4,), 10))
    check("row 21: iter_table over [2, 4) with inlined bounds", got == [{"id": 2, "code": "c2"}, {"id": 3, "code": "c3"}],
          got)
    types = ["int", "varchar(20) COLLATE SQL_Latin1_General_CP1_CI_AS"]
    got = batches_rows(cl.iter_table("dbo", "orders", ["id", "amount"], ["id", "code"], types, (2, "c2"), (4, "c4"), 10))
    check("row 21: iter_table over composite CAST bounds (UNION ALL of pieces)",
          sorted(r["id"] for r in got) == [2, 3] and {r["id"]: r["amount"] for r in got}[2] == Decimal("9.99"), got)
    check("row 22: sp_spaceused rows", cl.row_estimate("dbo", "orders") == len(ids), cl.row_estimate("dbo", "orders"))
    check("row 23: key_max", cl.key_max("dbo", "orders", ["id"]) == (6,))
    check("row 24: key_bound leaves n rows below it", cl.key_bound("dbo", "orders", ["id"], None, (1,), None, 2) == (3,))
    check("row 24: key_bound with composite typed bounds",
          cl.key_bound("dbo", "orders", ["id", "code"], types, (2, "c2"), (6, "c6"), 2) == (4, "c4"))
    check("row 24: key_bound past the end is None", cl.key_bound("dbo", "orders", ["id"], None, (4,), None, 5) is None)
    # row 26: SET TRANSACTION ISOLATION LEVEL SNAPSHOT; SET LOCK_TIMEOUT n; prefixes. A
    # database refuses SNAPSHOT (error 3952) until ALLOW_SNAPSHOT_ISOLATION is ON.
    cl2 = SqlCdcClient(MssqlPythonBackend(conn_str(PORT), 30, user="sa", password=PASSWORD), "auto", 300)
    e = raises(lambda: cl2.key_range("dbo", "orders", "id", isolation="snapshot"), Exception)
    check("row 26: SNAPSHOT without ALLOW_SNAPSHOT_ISOLATION fails (3952)",
          e is not None and "snapshot isolation is not allowed in this database" in str(e), e)
    adm.run("ALTER DATABASE refdb SET ALLOW_SNAPSHOT_ISOLATION ON")
    check("row 26: SNAPSHOT + LOCK_TIMEOUT prefixes run", cl2.key_range("dbo", "orders", "id", isolation="snapshot") ==
          (1, 6))
    w = Admin(PORT, "refdb")
    w.run("BEGIN TRAN; UPDATE dbo.orders SET note = N'held' WHERE id = 6")
    # the batch left cl2's session at SNAPSHOT: its reads take no lock a writer holds
    t0 = time.monotonic()
    check("row 26: a read under SNAPSHOT does not wait for the writer", cl2.key_range("dbo", "orders", "id") == (1, 6))
    check("row 26: ... at once", time.monotonic() - t0 < 2, time.monotonic() - t0)
    cl3 = SqlCdcClient(MssqlPythonBackend(conn_str(PORT), 30, user="sa", password=PASSWORD), "auto", 300)
    t0 = time.monotonic()
    e = raises(lambda: cl3.key_range("dbo", "orders", "id"), Exception)
    waited = time.monotonic() - t0
    check("row 26: LOCK_TIMEOUT 300 fails a READ COMMITTED read a writer blocks with error 1222",
          e is not None and "Lock request time out period exceeded" in str(e) and 0.2 < waited < 10, (e, waited))
    w.run("ROLLBACK")
    w.c.close()
    # row 25: the permission probe, as a login with SELECT on the table only
    adm.run(f"CREATE LOGIN reader WITH PASSWORD = '{READER_PW}'")
    adm.run("CREATE USER reader FOR LOGIN reader")
    adm.run("GRANT SELECT ON dbo.orders TO reader")
    check("row 25: sa may read the change table", cl._denied(CI) is False)
    rd = SqlCdcClient(MssqlPythonBackend(conn_str(PORT), 30, user="reader", password=READER_PW), "auto")
    check("row 2: the reader sees the instance's min LSN", rd.min_lsn(CI) == want_min)
    check("row 25: HAS_PERMS_BY_NAME says the reader lacks SELECT on cdc.[dbo_orders_CT]", rd._denied(CI) is True)
    e = raises(lambda: batches_rows(rd.iter_changes(CI, lo, hi, cols, True, 10)), PermissionError)
    check("row 8 + 25: a denied change-table read -> PermissionError naming the grant",
          e is not None and "GRANT SELECT ON cdc.[dbo_orders_CT]" in str(e), e)
    adm.run("GRANT SELECT ON cdc.[dbo_orders_CT] TO reader")
    check("row 25: after the grant the probe says allowed", rd._denied(CI) is False)
    check("row 8: the reader reads the change table after the grant",
          len(batches_rows(rd.iter_changes(CI, lo, hi, cols, True, 10))) == len(ch))

    # ---- phase 'Pacific Standard Time' across the 2024-11-03 fall-back ----------
    # A1 01:20 PDT, A2 01:50 PDT, then the clock goes back: B1 01:05 PST, B2 01:10 PST
    adm.run("EXEC sim.set_time_zone @zone = N'Pacific Standard Time'")
    adm.run("EXEC sim.set_clock @utc = '2024-11-03 08:20:00'")
    plan = [(10, 0, 7), (11, 1800, 7), (12, 900, 8), (13, 300, 8)]  # id, seconds advanced before, hours behind UTC
    before_p = {r[0] for r in change_rows(adm)}
    for i, adv, _ in plan:
        if adv:
            adm.run(f"EXEC sim.advance_clock @seconds = {adv}")
        adm.run(f"INSERT INTO dbo.orders (id, code, amount) VALUES ({i}, 'p{i}', {i}.5)")
    adm.run("EXEC sim.run_capture")
    ch = change_rows(adm)
    m = mapping(adm)
    local_of = {l: t for l, t, _, _ in m}
    text_of = {l: s for l, _, s, _ in m}
    new = sorted({r[0] for r in ch} - before_p, key=lsn_int)
    check("scenario: 4 commits across the fall-back, no idle entries", len(new) == 4 and
          all(tid != "0x00000000000000000000" for _, _, _, tid in m), new)
    by_id = {r[4]: r[0] for r in ch if r[0] in new}
    utc_p = {by_id[i]: local_of[by_id[i]] + dt.timedelta(hours=h) for i, _, h in plan}
    a1, b1, b2 = by_id[10], by_id[12], by_id[13]
    check("scenario: B1's server-clock time reads before A2's (the repeated hour)",
          local_of[b1] < local_of[by_id[11]] - dt.timedelta(minutes=1), (local_of[b1], local_of[by_id[11]]))
    cp = SqlCdcClient(MssqlPythonBackend(conn_str(PORT), 30, user="sa", password=PASSWORD), "auto")
    check("row 9: the named zone", cp.timezone == "Pacific Standard Time", cp.timezone)
    got = [cp.lsn_to_time(l) for l in new]
    check("rows 4 + 11: commit times follow LSN order across the fall-back (CROSS APPLY drops)",
          got == [ms_iso(utc_p[l]) for l in new], (got, [ms_iso(utc_p[l]) for l in new]))
    check("rows 4 + 11: UTC commit times never go back", got == sorted(got), got)
    check("row 4: '<=' variant in the second pass", cp._commit_time_at_or_before(hexlsn(lsn_int(b2) + 1)) ==
          ms_iso(utc_p[b2]))
    # row 10: the range's offset: none across the change
    check("row 10: no single offset across the fall-back", cp._range_offset(a1, b2) is None)
    # row 11: the drops of the range: B1 only (more than a minute before A2, in the repeated hour)
    _, drops = cp._range_utc(a1, b2)
    check("row 11: drops of the range (CROSS APPLY over the range's first commit)", drops == [b1, text_of[b1]],
          (drops, [b1, text_of[b1]]))
    got = batches_rows(cp.iter_changes(CI, a1, b2, ["id"], True, 10))
    want = [(r[0], utc_p[r[0]], r[4]) for r in ch if r[0] in new]
    check("row 8 + 11: _commit_ts of the change read across the fall-back (row by row, given drops)",
          [(r["_start_lsn"], r["_commit_ts"], r["id"]) for r in got] == want, (got, want))

    # row 5 in the repeated hour: the earlier of ts's clock time and the next hour's less an hour
    def server_clock(ts):
        u = ts.replace(microsecond=0, tzinfo=dt.timezone.utc)
        loc = u.astimezone(LA).replace(tzinfo=None)
        nxt = (u + dt.timedelta(hours=1)).astimezone(LA).replace(tzinfo=None) - dt.timedelta(hours=1)
        return min(loc, nxt)

    for label, ts in (("second pass", utc_p[b2] + dt.timedelta(seconds=1)),
                      ("first pass", utc_p[by_id[11]] + dt.timedelta(seconds=1))):
        clock = server_clock(ts)
        cands = [l for l, t, _, _ in m if t <= clock]
        want = max(cands, key=lsn_int) if cands else None
        got = cp.time_to_lsn(ts)
        check(f"row 5: time_to_lsn in the fall-back ({label})", got == want, (got, want, clock))

    # ---- a stable offset: one DATEADD for the range ------------------------------
    adm.run("EXEC sim.set_clock @utc = '2024-11-20 20:00:00'")
    adm.run("INSERT INTO dbo.orders (id, code) VALUES (20, 's20')")
    adm.run("EXEC sim.advance_clock @seconds = 61")
    adm.run("INSERT INTO dbo.orders (id, code) VALUES (21, 's21')")
    adm.run("EXEC sim.run_capture")
    m = mapping(adm)
    local_of = {l: t for l, t, _, _ in m}
    ch = change_rows(adm)
    s1, s2 = [r[0] for r in ch if r[4] in (20, 21) and r[2] == 2]
    check("row 10: one offset over a range in standard time", cp._range_offset(s1, s2) == -480, cp._range_offset(s1, s2))
    got = batches_rows(cp.iter_changes(CI, s1, s2, ["id"], False, 10))
    check("row 8 + 10: _commit_ts by one DATEADD", [r["_commit_ts"] for r in got] ==
          [local_of[s1] + dt.timedelta(hours=8), local_of[s2] + dt.timedelta(hours=8)], got)
    check("row 5: time_to_lsn in standard time",
          cp.time_to_lsn(local_of[s2] + dt.timedelta(hours=8, seconds=1)) == s2)
    check("row 9 (fallback query): DATEPART(TZOFFSET, SYSDATETIMEOFFSET())", cp._server_offset() == -480)
    adm.c.close()

    # ---- a server before 2022: the current offset for every commit ----------------
    with tempfile.TemporaryDirectory() as d:
        ready = os.path.join(d, "ready")
        proc = subprocess.Popen([SIM_BIN, "--port", "0", "--data", os.path.join(d, "data"), "--password", PASSWORD,
                                 "--ready-file", ready, "--capture-poll-ms", "0", "--version-major", "15",
                                 "--time-zone", "Pacific Standard Time", "--quiet"])
        try:
            for _ in range(100):
                if os.path.exists(ready) and open(ready).read().strip():
                    break
                time.sleep(0.1)
            port15 = int(open(ready).read())
            a15 = Admin(port15)
            a15.run("EXEC sim.set_clock @utc = '2024-11-20 20:00:00'")
            a15.run("CREATE DATABASE refdb")
            a15.run("USE refdb")
            a15.run("EXEC sys.sp_cdc_enable_db")
            a15.run("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY)")
            a15.run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL")
            a15.run("INSERT INTO dbo.orders VALUES (1)")
            a15.run("EXEC sim.run_capture")
            l15, t15, _, _ = mapping(a15)[-1]
            c15 = SqlCdcClient(MssqlPythonBackend(conn_str(port15), 30, user="sa", password=PASSWORD), "auto")
            check("row 9: before 2022 the zone is the server's current offset", c15.timezone == "UTC-08:00", c15.timezone)
            check("row 4: commit time by that offset", c15.lsn_to_time(l15) == ms_iso(t15 + dt.timedelta(hours=8)))
            a15.c.close()
        finally:
            proc.terminate()
            proc.wait(10)
    check("LSN text is the reference's canonical form", ref_lsn.normalize(want_max) == want_max)


C.run(main)
