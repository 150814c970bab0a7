"""Schema changes and the capture instance switch over TDS against the real
mssql-cdc-sim (run by sim_schema.sh): the reader's queries of reference §3.1
rows 14, 15, 16 and 17 as a driver sends them (parameters bound), after ADD,
ALTER and DROP COLUMN on a captured table and with two capture instances;
DDL on a captured table while other sessions write to it and read its
changes, which SQL Server serializes and never fails; and the schema lock's
waits: DDL for other open transactions on its table, reads and writes for
an open transaction's DDL.

usage: sim_schema_ddl.py PORT PASSWORD. Ends with "N passed, N failed".
"""
import sys
import threading

import pymssql
import pytds

from sim_check import Checks

PORT, PASSWORD = int(sys.argv[1]), sys.argv[2]
C = Checks("schema")
check = C.check


def q(cur, sql, params=None):
    cur.execute(sql, params) if params is not None else cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()]


def main():
    c = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, autocommit=True)
    cur = c.cursor()
    for s in ("CREATE DATABASE sch", "USE sch", "EXEC sys.sp_cdc_enable_db",
              "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, a int NULL, b varchar(10) NULL, d AS (a + 1))",
              "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL",
              "EXEC sim.run_capture", "INSERT INTO dbo.t (id, a, b) VALUES (1, 1, 'x')",
              "ALTER TABLE dbo.t ADD c int NULL", "ALTER TABLE dbo.t ALTER COLUMN b varchar(30) NULL",
              "ALTER TABLE dbo.t DROP COLUMN c", "INSERT INTO dbo.t (id, a, b) VALUES (2, 2, 'y')",
              "EXEC sim.run_capture"):
        cur.execute(s)
    with pytds.connect("127.0.0.1", "sch", "sa", PASSWORD, port=PORT, autocommit=True) as t:
        tc = t.cursor()
        tc.execute("EXEC sys.sp_cdc_get_ddl_history @capture_instance = %s", ("dbo_t",))
        cols = [d[0] for d in tc.description]
        rows = tc.fetchall()
        check("ddl history columns", cols == ["source_schema", "source_table", "capture_instance", "required_column_update",
                                              "ddl_command", "ddl_lsn", "ddl_time"], cols)
        check("three DDL rows in LSN order", [r[4] for r in rows] == [
            "ALTER TABLE dbo.t ADD c int NULL", "ALTER TABLE dbo.t ALTER COLUMN b varchar(30) NULL",
            "ALTER TABLE dbo.t DROP COLUMN c"], rows)
        check("ddl_lsn is binary(10), increasing", all(isinstance(r[5], bytes) and len(r[5]) == 10 for r in rows)
              and [r[5] for r in rows] == sorted(r[5] for r in rows), rows)
        check("required_column_update a bit: only the ALTER", [bool(r[3]) for r in rows] == [False, True, False], rows)
        # the <= variant the reference uses for a DDL's time: the latest commit at or before it
        tc.execute("SELECT TOP (1) CONVERT(varchar(22), start_lsn, 1) FROM cdc.lsn_time_mapping WHERE start_lsn <="
                   " CONVERT(binary(10), %s, 1) ORDER BY start_lsn DESC", ("0x" + rows[0][5].hex().upper(),))
        got = tc.fetchall()
        check("a DDL's time: the commit before it", len(got) == 1, got)
        tc.execute("SELECT sys.fn_cdc_map_lsn_to_time(%s)", (rows[0][5],))
        check("a DDL's LSN maps to no time (no commit)", tc.fetchone()[0] is None)
        tc.execute("EXEC sys.sp_cdc_get_captured_columns @capture_instance = %s", ("dbo_t",))
        cc = {r[3]: r for r in tc.fetchall()}
        check("captured columns frozen: a, b, d listed; c never", sorted(cc) == ["a", "b", "d", "id"], sorted(cc))
        check("b's type followed the ALTER", cc["b"][6] == "varchar" and cc["b"][7] == 30, cc["b"])
        tc.execute("SELECT name, column_id, is_computed FROM sys.columns WHERE object_id = OBJECT_ID(QUOTENAME(%s) + '.' +"
                   " QUOTENAME(%s)) ORDER BY column_id", ("dbo", "t"))
        got = [tuple(r) for r in tc.fetchall()]
        check("sys.columns: computed d, no c", got == [("id", 1, False), ("a", 2, False), ("b", 3, False), ("d", 4, True)], got)
        tc.execute("SELECT __$operation, id, d FROM cdc.dbo_t_CT ORDER BY __$start_lsn")
        got = [tuple(r) for r in tc.fetchall()]
        check("the computed column is NULL in the change rows", got == [(2, 1, None), (2, 2, None)], got)
    # the switch
    for s in ("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL,"
              " @capture_instance = N'dbo_t_v2'", "EXEC sim.run_capture"):
        cur.execute(s)
    got = q(cur, "EXEC sys.sp_cdc_help_change_data_capture @source_schema = %s, @source_name = %s", ("dbo", "t"))
    check("two instances listed, oldest first", [r[2] for r in got] == ["dbo_t", "dbo_t_v2"], got)
    try:
        cur.execute("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL,"
                    " @capture_instance = N'dbo_t_v3'")
        check("a third instance refused", False, "no error")
    except pymssql.Error as e:
        check("a third instance refused with 22962", "22962" in str(e) and "at most two capture instances" in str(e), str(e))
    cur.execute("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N't', @capture_instance = N'dbo_t'")
    cur.execute("INSERT INTO dbo.t (id, a, b) VALUES (3, 3, 'z')")
    cur.execute("EXEC sim.run_capture")
    got = q(cur, "SELECT id FROM cdc.dbo_t_v2_CT ORDER BY __$start_lsn")
    check("the new instance goes on alone", got == [(3,)], got)
    c.close()


def ddl_under_load():
    """ALTER COLUMN (a rebuild of the table), ADD and DROP COLUMN, 40 rounds,
    while three sessions write the table, one reads its changes and one
    runs capture: every
    statement of every session succeeds, as SQL Server's would (a DDL waits
    for the table's schema lock, a write for the DDL)."""
    c = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, autocommit=True, database="sch")
    cur = c.cursor()
    for s in ("CREATE TABLE dbo.busy (id int NOT NULL PRIMARY KEY, v int NULL, s varchar(10) NULL)",
              "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'busy', @role_name = NULL"):
        cur.execute(s)
    stop, errors, done = threading.Event(), [], [0, 0]

    def session(name, body):
        """A session of its own running body(cursor, i) for i = 0, 1, ...
        until stop; each error is kept."""
        conn = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, autocommit=True,
                               database="sch")
        cur, i = conn.cursor(), 0
        while not stop.is_set():
            try:
                body(cur, i)
            except pymssql.Error as e:
                errors.append(f"{name}: {e}")
            i += 1
        conn.close()

    def writer(k):
        def body(wc, i):
            key, step = k * 1000000 + i % 50, i % 150  # insert 50 keys, update them, delete them
            if step < 50:
                wc.execute("INSERT INTO dbo.busy (id, v, s) VALUES (%d, %d, 'w')", (key, i))
            elif step < 100:
                wc.execute("UPDATE dbo.busy SET v = v + 1 WHERE id = %d", (key,))
            else:
                wc.execute("DELETE FROM dbo.busy WHERE id = %d", (key,))
            done[0] += 1
        return body

    def read(rc, i):
        for sql in ("SELECT count(*) FROM cdc.fn_cdc_get_all_changes_dbo_busy(sys.fn_cdc_get_min_lsn('dbo_busy'),"
                    " sys.fn_cdc_get_max_lsn(), N'all')", "SELECT * FROM dbo.busy WHERE id < 100",
                    "SELECT TOP (5) * FROM cdc.dbo_busy_CT ORDER BY __$start_lsn DESC"):
            rc.execute(sql)
            rc.fetchall()
        done[1] += 1

    bodies = [(f"writer {k}", writer(k)) for k in range(3)]
    bodies += [("reader", read), ("capture", lambda gc, i: gc.execute("EXEC sim.run_capture"))]
    threads = [threading.Thread(target=session, args=nb) for nb in bodies]
    for t in threads:
        t.start()
    ddl_failed = []
    try:
        for n in range(40):
            for s in (f"ALTER TABLE dbo.busy ALTER COLUMN s varchar({11 + n}) NULL", "ALTER TABLE dbo.busy ADD x int NULL",
                      "ALTER TABLE dbo.busy DROP COLUMN x"):
                try:
                    cur.execute(s)
                except pymssql.Error as e:
                    ddl_failed.append(f"{s}: {e}")
    finally:
        stop.set()
        for t in threads:
            t.join()
    check("120 DDL statements under load: none failed", not ddl_failed, ddl_failed[:3])
    check("the writers and the reader: no statement failed", not errors, errors[:3])
    check("the writers and the reader ran meanwhile", done[0] > 100 and done[1] > 10, done)
    cur.execute("EXEC sim.run_capture")
    got = q(cur, "EXEC sys.sp_cdc_get_ddl_history @capture_instance = %s", ("dbo_busy",))
    check("each DDL is in the DDL history once", len(got) == 120 and len({r[5] for r in got}) == 120, len(got))
    c.close()


def ddl_waits_for_open_transactions():
    """ALTER and DROP TABLE wait for another session's open transaction
    that changed the table, and reads and writes wait for another open
    transaction's DDL (SQL Server's schema lock): SET LOCK_TIMEOUT ends a
    wait with 1222, the end of the blocking transaction lets it run, and a
    wait cycle makes a deadlock victim (1205)."""
    def conn():
        return pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, autocommit=True,
                               database="sch")

    def fails_1222(cur, sql):
        cur.execute("SET LOCK_TIMEOUT 200")
        try:
            cur.execute(sql)
            return "ran"
        except pymssql.Error as e:
            return "1222" in str(e) or str(e)
        finally:
            cur.execute("SET LOCK_TIMEOUT -1")

    def in_thread(cur, sql):
        """Runs sql on cur in a thread: (thread, result list)."""
        out = []

        def run():
            try:
                cur.execute(sql)
                out.append("ok")
            except pymssql.Error as e:
                out.append(str(e))
        th = threading.Thread(target=run)
        th.start()
        return th, out

    def waits_for_end(cur, sql, holder, end, what):
        """sql on cur still waits after 0.3 s and runs once holder's
        transaction ends (end: COMMIT or ROLLBACK)."""
        th, out = in_thread(cur, sql)
        th.join(0.3)
        check(f"{what} still waits while the transaction is open", th.is_alive() and not out, out)
        holder.execute(end)
        th.join(10)
        check(f"{what} runs once the transaction ends ({end})", out == ["ok"], out)

    a, b = conn(), conn()
    ac, bc = a.cursor(), b.cursor()
    for s in ("CREATE TABLE dbo.w (id int NOT NULL PRIMARY KEY, v int NULL)", "INSERT INTO dbo.w (id, v) VALUES (1, 1)",
              "CREATE TABLE dbo.w2 (id int NOT NULL PRIMARY KEY, v int NULL)", "INSERT INTO dbo.w2 (id, v) VALUES (1, 1)"):
        ac.execute(s)
    # DDL waits for another transaction's rows
    ac.execute("BEGIN TRANSACTION")
    ac.execute("INSERT INTO dbo.w (id, v) VALUES (2, 2)")
    check("ALTER TABLE waits for an open insert: 1222", fails_1222(bc, "ALTER TABLE dbo.w ADD x int NULL") is True)
    check("DROP TABLE waits for an open insert: 1222", fails_1222(bc, "DROP TABLE dbo.w") is True)
    waits_for_end(bc, "ALTER TABLE dbo.w ADD x int NULL", ac, "COMMIT", "the ALTER")
    got = q(ac, "SELECT id, v, x FROM dbo.w ORDER BY id")
    check("the committed row and the new column", got == [(1, 1, None), (2, 2, None)], got)
    # reads and writes wait for another transaction's DDL
    ac.execute("BEGIN TRANSACTION")
    ac.execute("ALTER TABLE dbo.w ADD y int NULL")
    check("an INSERT waits for an open ALTER: 1222", fails_1222(bc, "INSERT INTO dbo.w (id, v) VALUES (3, 3)") is True)
    check("an UPDATE waits for an open ALTER: 1222", fails_1222(bc, "UPDATE dbo.w SET v = 9 WHERE id = 1") is True)
    check("a SELECT waits for an open ALTER: 1222", fails_1222(bc, "SELECT * FROM dbo.w") is True)
    check("a NOLOCK SELECT waits for an open ALTER too (Sch-S): 1222",
          fails_1222(bc, "SELECT * FROM dbo.w WITH (NOLOCK)") is True)
    bc.execute("SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
    check("so does a READ UNCOMMITTED SELECT: 1222", fails_1222(bc, "SELECT * FROM dbo.w") is True)
    bc.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
    waits_for_end(bc, "INSERT INTO dbo.w (id, v) VALUES (3, 3)", ac, "ROLLBACK", "the INSERT")
    got = q(bc, "SELECT name FROM sys.columns WHERE object_id = OBJECT_ID('dbo.w') ORDER BY column_id")
    check("the rolled-back column is gone", got == [("id",), ("v",), ("x",)], got)
    got = q(bc, "SELECT id, v FROM dbo.w ORDER BY id")
    check("the waiting INSERT's row is there once", got == [(1, 1), (2, 2), (3, 3)], got)
    # a cycle: a holds w and waits to alter w2, b holds w2 and then alters w
    ac.execute("BEGIN TRANSACTION")
    ac.execute("UPDATE dbo.w SET v = 10 WHERE id = 1")
    bc.execute("BEGIN TRANSACTION")
    bc.execute("UPDATE dbo.w2 SET v = 10 WHERE id = 1")
    th, out = in_thread(ac, "ALTER TABLE dbo.w2 ADD z int NULL")
    th.join(0.3)
    try:
        bc.execute("ALTER TABLE dbo.w ADD z int NULL")
        mine = "ok"
    except pymssql.Error as e:
        mine = str(e)
    th.join(10)
    # the session that closes the cycle is the victim: b, unless a's ALTER
    # had not begun to wait yet on a loaded machine (then a is)
    got = {"a": out[0] if out else "still waiting", "b": mine}
    victims = [k for k, v in got.items() if "1205" in v]
    check("one deadlock victim (1205); the other session's ALTER runs",
          len(victims) == 1 and got["b" if victims == ["a"] else "a"] == "ok", got)
    winner, kept, lost = (ac, "w", "w2") if victims == ["b"] else (bc, "w2", "w")
    winner.execute("COMMIT")
    got = [q(ac, f"SELECT v FROM dbo.{t} WHERE id = 1") for t in (kept, lost)]
    check("the winner's update kept, the victim's rolled back", got == [[(10,)], [(1,)]], got)
    got = q(ac, f"SELECT name FROM sys.columns WHERE object_id = OBJECT_ID('dbo.{lost}') ORDER BY column_id")
    check("the winner's column is there", got == {"w": [("id",), ("v",), ("x",), ("z",)],
                                                   "w2": [("id",), ("v",), ("z",)]}[lost], got)
    for s in ("DROP TABLE dbo.w", "DROP TABLE dbo.w2"):
        ac.execute(s)
    a.close()
    b.close()


C.run(main, ddl_under_load, ddl_waits_for_open_transactions)
