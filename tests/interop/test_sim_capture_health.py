"""The simulator's side of capture health: sys.dm_cdc_log_scan_sessions and
sys.dm_cdc_errors as SQL Server fills them, sys.sp_cdc_stop_job /
sys.sp_cdc_start_job, VIEW DATABASE STATE, and many tables at once
(sim.create_tables, sim.workload @tables). Read with pymssql."""
import time

import pymssql
import pytest

from conftest import PASSWORD, start_sim

SESSION_COLS = ["session_id", "start_time", "end_time", "duration", "scan_phase", "error_count", "start_lsn",
                "current_lsn", "end_lsn", "tran_count", "last_commit_lsn", "last_commit_time", "log_record_count",
                "schema_change_count", "command_count", "first_begin_cdc_lsn", "last_commit_cdc_lsn",
                "last_commit_cdc_time", "latency", "empty_scan_count", "failed_sessions_count"]
ERROR_COLS = ["session_id", "phase_number", "entry_time", "error_number", "error_severity", "error_state",
              "error_message", "start_lsn", "begin_lsn", "sequence_value"]
SETUP = """
CREATE DATABASE h;
"""
TABLE = """
EXEC sys.sp_cdc_enable_db;
CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(20));
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL;
"""


@pytest.fixture
def hsim(workdir):
    s = start_sim(workdir, capture_poll_ms=0)  # scans only on sim.run_capture
    s.run(SETUP)
    s.run("EXEC sim.set_clock @utc = '2026-03-01 10:00:00', @frozen = 1;", "h")
    s.run(TABLE, "h")
    yield s
    s.stop()


def query(s, sql, database="h", user="sa", password=PASSWORD):
    conn = s.connect(database, user=user, password=password)
    try:
        cur = conn.cursor(as_dict=True)
        cur.execute(sql)
        return cur.fetchall()
    finally:
        conn.close()


def sessions(s):
    return query(s, "SELECT * FROM sys.dm_cdc_log_scan_sessions ORDER BY session_id")


def test_scan_sessions_columns_values_and_folded_empty_scans(hsim):
    hsim.run("EXEC sim.run_capture;", "h")  # picks up the instance: an empty scan
    for k in range(3):
        hsim.run(f"INSERT INTO dbo.t VALUES ({k}, N'a'); UPDATE dbo.t SET v = N'b' WHERE id = {k};", "h")
    hsim.run("EXEC sim.advance_clock @seconds = 7; EXEC sim.run_capture;", "h")
    for _ in range(4):
        hsim.run("EXEC sim.advance_clock @seconds = 1; EXEC sim.run_capture;", "h")  # empty: folded
    rows = sessions(hsim)
    assert list(rows[0].keys()) == SESSION_COLS
    assert [r["session_id"] for r in rows] == [0, 1, 2, 3]
    agg, first_empty, busy, empty = rows
    assert first_empty["tran_count"] == 0 and first_empty["empty_scan_count"] == 1
    assert busy["tran_count"] == 6 and busy["command_count"] == 9  # 3 inserts, 3 updates (before and after)
    assert busy["empty_scan_count"] == 0 and busy["scan_phase"] == "Done" and busy["error_count"] == 0
    assert busy["latency"] == 7  # the commits 7 s of the server's clock before the scan
    assert busy["last_commit_cdc_time"] == busy["last_commit_time"]
    assert busy["start_time"] == busy["end_time"]  # the clock stands still
    max_lsn = query(hsim, "SELECT sys.fn_cdc_get_max_lsn() AS m")[0]["m"].hex()
    assert busy["last_commit_cdc_lsn"] == f"{max_lsn[0:8]}:{max_lsn[8:16]}:{max_lsn[16:20]}"
    assert busy["first_begin_cdc_lsn"] < busy["last_commit_cdc_lsn"]
    assert len(busy["end_lsn"]) == 22
    # four empty scans in a row: one row counting them, latency 0
    assert empty["empty_scan_count"] == 4 and empty["tran_count"] == 0 and empty["latency"] == 0
    assert (empty["end_time"] - busy["end_time"]).total_seconds() == 4
    assert agg["scan_phase"] == "Aggregate"
    assert agg["tran_count"] == 6 and agg["command_count"] == 9
    assert agg["latency"] == 7 and agg["empty_scan_count"] == 5 and agg["failed_sessions_count"] == 0
    assert agg["end_time"] == empty["end_time"] and agg["last_commit_cdc_lsn"] == busy["last_commit_cdc_lsn"]
    assert agg["current_lsn"] == "00000000:00000000:0000"


def test_at_most_32_sessions_listed(hsim):
    for k in range(40):  # each scan takes a transaction: no folding
        hsim.run(f"INSERT INTO dbo.t VALUES ({k}, N'a'); EXEC sim.run_capture;", "h")
    rows = sessions(hsim)
    ids = [r["session_id"] for r in rows]
    assert ids[0] == 0 and len(ids) == 33 and ids[-1] - ids[1] == 31
    assert rows[0]["tran_count"] == 40  # row 0 counts every session since the start


def test_capture_error_in_dm_cdc_errors_and_nothing_moves(hsim):
    hsim.run("EXEC sim.run_capture; INSERT INTO dbo.t VALUES (1, N'a');", "h")
    hsim.run("EXEC sim.fault @kind = 'capture_error';")
    hsim.run("EXEC sim.run_capture;", "h")
    assert query(hsim, "SELECT count(*) AS n FROM cdc.dbo_t_CT")[0]["n"] == 0
    errs = query(hsim, "SELECT * FROM sys.dm_cdc_errors")
    assert len(errs) == 1 and list(errs[0].keys()) == ERROR_COLS
    e = errs[0]
    assert e["error_number"] == 22859 and e["error_severity"] == 16 and "Log Scan process failed" in e["error_message"]
    failed = sessions(hsim)[-1]
    assert e["session_id"] == failed["session_id"]
    assert failed["error_count"] == 1 and failed["failed_sessions_count"] == 1 and failed["tran_count"] == 0
    hsim.run("EXEC sim.run_capture;", "h")  # the fault fired once: the next scan takes the change
    assert query(hsim, "SELECT count(*) AS n FROM cdc.dbo_t_CT")[0]["n"] == 1
    agg = sessions(hsim)[0]
    assert agg["error_count"] == 1 and agg["failed_sessions_count"] == 1


def test_stop_job_freezes_capture_and_start_job_catches_up(workdir):
    s = start_sim(workdir, capture_poll_ms=20)
    try:
        s.run(SETUP)
        s.run(TABLE, "h")
        s.run("INSERT INTO dbo.t VALUES (0, N'a');", "h")
        deadline = time.time() + 10
        while query(s, "SELECT count(*) AS n FROM cdc.dbo_t_CT")[0]["n"] < 1 and time.time() < deadline:
            time.sleep(0.05)
        s.run("EXEC sys.sp_cdc_stop_job @job_type = N'capture';", "h")
        before = query(s, "SELECT sys.fn_cdc_get_max_lsn() AS m, (SELECT count(*) FROM cdc.lsn_time_mapping) AS n,"
                          " (SELECT max(session_id) FROM sys.dm_cdc_log_scan_sessions) AS sid")[0]
        for k in range(1, 21):
            s.run(f"INSERT INTO dbo.t VALUES ({k}, N'x');", "h")
        s.run("EXEC sim.advance_clock @seconds = 900; EXEC sim.run_capture;", "h")  # idle entries would be due
        time.sleep(0.3)
        after = query(s, "SELECT sys.fn_cdc_get_max_lsn() AS m, (SELECT count(*) FROM cdc.lsn_time_mapping) AS n,"
                         " (SELECT max(session_id) FROM sys.dm_cdc_log_scan_sessions) AS sid")[0]
        assert after == before
        assert query(s, "SELECT count(*) AS n FROM cdc.dbo_t_CT")[0]["n"] == 1
        with pytest.raises(pymssql.Error, match="not currently running"):
            s.run("EXEC sys.sp_cdc_stop_job;", "h")
        s.run("EXEC sys.sp_cdc_start_job;", "h")
        deadline = time.time() + 10
        while query(s, "SELECT count(*) AS n FROM cdc.dbo_t_CT")[0]["n"] < 21 and time.time() < deadline:
            time.sleep(0.05)
        assert query(s, "SELECT count(*) AS n FROM cdc.dbo_t_CT")[0]["n"] == 21
        assert query(s, "SELECT max(session_id) AS sid FROM sys.dm_cdc_log_scan_sessions")[0]["sid"] > before["sid"]
        with pytest.raises(pymssql.Error, match="already running"):
            s.run("EXEC sys.sp_cdc_start_job @job_type = N'capture';", "h")
        jobs = query(s, "EXEC sys.sp_cdc_help_jobs")
        assert sorted(j["job_type"] for j in jobs) == ["capture", "cleanup"]
        assert {j["job_name"] for j in jobs} == {"cdc.h_capture", "cdc.h_cleanup"}
    finally:
        s.stop()


def test_view_database_state_needed_for_the_dmvs(hsim):
    hsim.run("CREATE LOGIN mon WITH PASSWORD = 'Mon_Passw0rd';")
    hsim.run("CREATE USER mon FOR LOGIN mon;", "h")
    for view in ("sys.dm_cdc_log_scan_sessions", "sys.dm_cdc_errors"):
        with pytest.raises(pymssql.Error) as e:
            query(hsim, f"SELECT * FROM {view}", user="mon", password="Mon_Passw0rd")
        # as SQL Server: 262 naming the permission (tests/unit/test_sim_cdc.c), then 297,
        # the one pymssql reports
        assert e.value.args[0] == 297
        assert "The user does not have permission to perform this action" in e.value.args[1].decode()
    with pytest.raises(pymssql.Error, match="EXECUTE permission was denied"):
        query(hsim, "EXEC sys.sp_cdc_stop_job", user="mon", password="Mon_Passw0rd")
    hsim.run("GRANT VIEW DATABASE STATE TO mon;", "h")
    hsim.run("EXEC sim.run_capture;", "h")
    rows = query(hsim, "SELECT session_id FROM sys.dm_cdc_log_scan_sessions", user="mon", password="Mon_Passw0rd")
    assert [r["session_id"] for r in rows] == [0, 1]
    assert query(hsim, "SELECT * FROM sys.dm_cdc_errors", user="mon", password="Mon_Passw0rd") == []
    hsim.run("REVOKE VIEW DATABASE STATE FROM mon;", "h")
    with pytest.raises(pymssql.Error, match="does not have permission"):
        query(hsim, "SELECT * FROM sys.dm_cdc_errors", user="mon", password="Mon_Passw0rd")


def test_fifty_tables_and_a_workload_across_them_in_seconds(hsim):
    t0 = time.time()
    hsim.run("EXEC sim.create_tables @count = 50, @prefix = N'm';", "h")
    cis = query(hsim, "SELECT capture_instance FROM cdc.change_tables WHERE capture_instance LIKE 'dbo_m%'")
    assert len(cis) == 50
    hsim.run("EXEC sim.workload @tables = N'dbo.m%', @tps = 1000, @seconds = 0.2, @max_statements = 1,"
             " @mix = 'insert=1', @wait = 1;", "h")
    hsim.run("EXEC sim.workload @tables = N'dbo.m1, dbo.m2', @tps = 1000, @seconds = 0.01, @mix = 'insert=1',"
             " @wait = 1;", "h")
    hsim.run("EXEC sim.run_capture @ignore_latency = 1;", "h")
    counts = query(hsim, " UNION ALL ".join(f"SELECT {k} AS k, count(*) AS n FROM dbo.m{k}" for k in range(1, 51)))
    assert all(r["n"] >= 4 for r in counts)  # 200 transactions in turn over 50 tables
    ct = query(hsim, "SELECT count(*) AS n FROM cdc.dbo_m1_CT")[0]["n"]
    assert ct == [r["n"] for r in counts if r["k"] == 1][0]
    assert time.time() - t0 < 20
    with pytest.raises(pymssql.Error, match="@count must be"):
        hsim.run("EXEC sim.create_tables @count = 0;", "h")


def test_no_sessions_before_the_first_capture_instance(sim):
    sim.run("CREATE DATABASE e;")
    sim.run("EXEC sys.sp_cdc_enable_db; EXEC sim.run_capture;", "e")
    assert query(sim, "SELECT * FROM sys.dm_cdc_log_scan_sessions", database="e") == []
    sim.run("EXEC sim.create_tables @count = 1; EXEC sim.run_capture;", "e")
    assert [r["session_id"] for r in query(sim, "SELECT session_id FROM sys.dm_cdc_log_scan_sessions",
                                           database="e")][:2] == [0, 1]
