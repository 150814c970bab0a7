"""One probe per database: an idle start-many sends per poll one max_lsn
and, when some table is behind it, one query telling which change tables
moved and one reading the start_lsn of the instances cleanup moved past a
position, whatever the number of tables; only the tables with new rows plan
a batch. The simulator counts the
requests it receives (EXEC sim.request_stats)."""
import json
import os
import re
import signal
import subprocess
import time
import urllib.request

from conftest import CLI

DB = "shop"
N_MAX = 50


def make_db(sim, n):
    sim.run(f"CREATE DATABASE {DB};")
    tables = [f"t{i}" for i in range(n)]
    sql = "".join(f"CREATE TABLE dbo.{t} (id INT NOT NULL PRIMARY KEY, v INT NULL);" for t in tables)
    sql += "EXEC sys.sp_cdc_enable_db;"
    sql += "".join(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{t}', "
                   "@role_name = NULL;" for t in tables)
    sim.run(sql, database=DB)
    # one change, so that max_lsn is not NULL and every stream starts
    sim.run("INSERT INTO dbo.t0 VALUES (1, 1);", database=DB)
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database=DB)


def start_many(sim, lake, n, extra=(), cs=None):
    return subprocess.Popen(
        [CLI, "start-many", "--connectionString", cs or sim.connection_string(DB),
         "--capture-instances", ",".join(f"dbo_t{i}" for i in range(n)),
         "--target", os.path.join(lake, "bronze_{ci}"), "--app-id", "{ci}-v1",
         "--checkpoint", os.path.join(lake, "ckpt", "{ci}"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def lags(port):
    """Every table's mssql_cdc_ingestion_lag_seconds from /metrics."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^mssql_cdc_ingestion_lag_seconds\{[^}]*capture_instance="([^"]+)"[^}]*\} (\S+)$', body,
        re.M)}


def probe_shared(port):
    """mssql_cdc_probe_shared of the database from /metrics (None: absent)."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    m = re.search(r'^mssql_cdc_probe_shared\{database="shop"\} (\d+)$', body, re.M)
    return int(m.group(1)) if m else None


def requests(sim):
    return sim.run("EXEC sim.request_stats;")[0][0]


def wait_started(lake, n, proc, timeout=60):
    """Until every stream committed its first batch (its checkpoint's
    commits/0 exists)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        done = sum(os.path.exists(os.path.join(lake, "ckpt", f"dbo_t{i}", "commits", "0"))
                   for i in range(n))
        if done == n:
            return
        time.sleep(0.1)
    raise AssertionError(f"only {done} of {n} streams started")


def wait_streamed(sim, lake, cis, proc, timeout=30):
    """Until every instance's bronze holds its change table's rows."""
    from test_start_many import bronze_keys, change_rows
    deadline = time.time() + timeout
    while time.time() < deadline and any(
            bronze_keys(lake, ci) != change_rows(sim, ci, database=DB) for ci in cis):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


def idle_rate(sim, lake, n, seconds=2.0):
    proc = start_many(sim, lake, n)
    try:
        wait_started(lake, n, proc)
        time.sleep(0.5)
        r0, t0 = requests(sim), time.time()
        time.sleep(seconds)
        r1, t1 = requests(sim), time.time()
    finally:
        stop(proc)
    return (r1 - r0 - 1) / (t1 - t0)  # the second stats request counts itself


def test_idle_queries_do_not_grow_with_the_number_of_tables(sim, workdir):
    make_db(sim, N_MAX)
    q20 = idle_rate(sim, os.path.join(workdir, "lake20"), 20)
    q50 = idle_rate(sim, os.path.join(workdir, "lake50"), N_MAX)
    # a default trigger polls every 10 ms: a max_lsn per table and poll
    # would be about 100 queries a second per table (2,000 and 5,000); one
    # probe per database is at most 3 queries per 10 ms slot, and one (its
    # max_lsn) while every table is caught up: about 100 a second (200
    # when each round read cdc.change_tables too)
    assert q20 <= 150, q20
    assert q50 <= 150, q50
    assert q50 <= 1.5 * q20 + 20, (q20, q50)


def test_only_the_tables_with_new_rows_plan_a_batch(sim, workdir):
    n = 20
    make_db(sim, n)
    lake = os.path.join(workdir, "lake")
    ready = os.path.join(workdir, "port")
    proc = start_many(sim, lake, n, ("--metrics-listen", "127.0.0.1:0", "--ready-file", ready,
                                     "--metrics-poll-seconds", "0.2"))
    try:
        wait_started(lake, n, proc)
        # max_lsn moves for the whole database; only t3 and t7 change. Each
        # change is captured on its own, so t7's can move the max while
        # t3 plans or commits its batch: t3 then polls from a position no
        # round has asked about yet, which must cost it no second batch
        for t in ("t3", "t7"):
            sim.run(f"INSERT INTO dbo.{t} VALUES (10, 10), (11, 11);", database=DB)
            sim.run("EXEC sim.run_capture @ignore_latency = 1;", database=DB)
        deadline = time.time() + 30
        while time.time() < deadline and not all(
                os.path.exists(os.path.join(lake, "ckpt", f"dbo_{t}", "commits", "1"))
                for t in ("t3", "t7")):
            time.sleep(0.1)
        time.sleep(0.5)  # a round's worth more for the others to (not) plan
        # the idle tables planned nothing, yet they are caught up: lag 0
        # for every table (their probe found nothing past their positions)
        with open(ready) as f:
            port = int(f.read().strip())
        deadline = time.time() + 10
        while time.time() < deadline and set(lags(port).values()) != {0.0}:
            time.sleep(0.2)
        got = lags(port)
        assert len(got) == n and set(got.values()) == {0.0}, got
        assert probe_shared(port) == 1  # sa may run the one probe
        # CDC cleanup up to max_lsn passes t5's position, behind max_lsn
        # since it planned nothing: its probe found no row there, so nothing
        # was lost, and its next change is read (no DataLossError)
        sim.run("DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn(); "
                "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_t5', "
                "@low_water_mark = @m, @threshold = 100000;", database=DB)
        sim.run("INSERT INTO dbo.t5 VALUES (20, 20);", database=DB)
        sim.run("EXEC sim.run_capture @ignore_latency = 1;", database=DB)
        deadline = time.time() + 30
        while time.time() < deadline and not os.path.exists(
                os.path.join(lake, "ckpt", "dbo_t5", "commits", "1")):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
    finally:
        err = stop(proc)
    batches = {m.group(1): int(m.group(2))
               for m in re.finditer(r"(dbo_t\d+): (\d+) batches", err)}
    assert len(batches) == n, err
    assert batches["dbo_t3"] == 2 and batches["dbo_t7"] == 2 and batches["dbo_t5"] == 2, batches
    # t0 holds the first change, read by its first batch; the others' max
    # moved past them, and their change tables have nothing new: no batch
    assert all(b == 1 for ci, b in batches.items() if ci not in ("dbo_t3", "dbo_t5", "dbo_t7")), \
        batches
    for t in ("t3", "t7"):
        rows = sim.run(f"SELECT COUNT(*) FROM cdc.dbo_{t}_CT", database=DB)[0][0]
        assert rows == 2


def test_a_login_that_may_not_read_cdc_change_tables_polls_per_table_and_says_so(sim, workdir):
    """The shared probe reads cdc.change_tables: a login granted its tables
    and their change tables only is refused it. Each stream then polls on its
    own: every table still streams to its change table, the metric and the
    status JSON say the probe is not shared, and the warning is logged once
    for the database, not per poll. Granted cdc.change_tables later, the
    probe is tried again after its back-off (2 s first) and serves them all
    again without a restart: the metric says so, and changes still stream."""
    from test_start_many import bronze_keys, change_rows
    n = 4
    make_db(sim, n)
    grants = "".join(f"GRANT SELECT ON dbo.t{i} TO reader; GRANT SELECT ON cdc.dbo_t{i}_CT TO "
                     "reader;" for i in range(n))
    sim.run("CREATE LOGIN reader WITH PASSWORD = 'Reader_Passw0rd1';")
    sim.run(f"CREATE USER reader FOR LOGIN reader; {grants}", database=DB)
    cs = sim.connection_string(DB, user="reader", password="Reader_Passw0rd1")
    lake = os.path.join(workdir, "lake")
    ready = os.path.join(workdir, "port")
    proc = start_many(sim, lake, n, ("--metrics-listen", "127.0.0.1:0", "--ready-file", ready,
                                     "--metrics-poll-seconds", "0.2"), cs=cs)
    cis = [f"dbo_t{i}" for i in range(n)]
    try:
        wait_started(lake, n, proc)
        for i in range(n):
            sim.run(f"INSERT INTO dbo.t{i} VALUES (10, 10), (11, 11); "
                    f"UPDATE dbo.t{i} SET v = 12 WHERE id = 10;", database=DB)
        sim.run("EXEC sim.run_capture @ignore_latency = 1;", database=DB)
        wait_streamed(sim, lake, cis, proc)
        with open(ready) as f:
            port = int(f.read().strip())
        assert probe_shared(port) == 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=10) as r:
            doc = json.loads(r.read())
        assert [d["probe_shared"] for d in doc["databases"]] == [False], doc["databases"]
        time.sleep(2.5)  # polls on their own go on, a retry refused: no warning more
        assert probe_shared(port) == 0
        sim.run("GRANT SELECT ON cdc.change_tables TO reader;", database=DB)
        deadline = time.time() + 30  # the back-off doubles: 4 s after the first retry
        while time.time() < deadline and probe_shared(port) != 1:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert probe_shared(port) == 1
        sim.run("INSERT INTO dbo.t1 VALUES (30, 30);", database=DB)
        sim.run("EXEC sim.run_capture @ignore_latency = 1;", database=DB)
        wait_streamed(sim, lake, cis, proc)
    finally:
        err = stop(proc)
    for ci in cis:
        got = bronze_keys(lake, ci)
        assert got == change_rows(sim, ci, database=DB) and len(got) >= 3, ci
    assert len(bronze_keys(lake, "dbo_t1")) >= 4
    assert err.count("the shared probe of this database was refused") == 1, err
    assert "Reader_Passw0rd1" not in err


def table_state(port, ci):
    """The state of ci in /status.json (None: not listed)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=10) as r:
        doc = json.loads(r.read())
    return next((t["state"] for t in doc["tables"] if t["capture_instance"] == ci), None)


def test_rows_purged_before_any_round_saw_them_are_data_loss(sim, workdir):
    """Rows captured and purged by CDC cleanup between two rounds of the
    probe: no round saw them, and the round after the cleanup finds t1's
    change table empty past its position. That proves nothing (cleanup
    moved t1's start_lsn past it): t1 plans a batch rather than sleep as
    caught up, and its retention guard reports the loss (DataLossError,
    exit 3). Without the start_lsn read after the change tables, that
    round counted as proof and the guard took the gap for an idle table's
    harmless cleanup: the rows were lost without a word."""
    n = 2
    make_db(sim, n)
    lake = os.path.join(workdir, "lake")
    ready = os.path.join(workdir, "port")
    proc = start_many(sim, lake, n, ("--metrics-listen", "127.0.0.1:0", "--ready-file", ready,
                                     "--metrics-poll-seconds", "60", "--json"))
    try:
        wait_started(lake, n, proc)
        with open(ready) as f:
            port = int(f.read().strip())
        # the probe's next request is held 3 s (a fault spares the session
        # that set it: the same connection runs the rest); meanwhile t1 gets
        # two rows, and a cleanup up to t0's later commit purges them
        conn = sim.connect(DB)
        try:
            cur = conn.cursor()
            cur.execute("EXEC sim.fault @kind = 'delay', @ms = 3000;")
            cur.execute("INSERT INTO dbo.t1 VALUES (10, 10), (11, 11); "
                        "EXEC sim.run_capture @ignore_latency = 1; "
                        "INSERT INTO dbo.t0 VALUES (10, 10); "
                        "EXEC sim.run_capture @ignore_latency = 1; "
                        "DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn(); "
                        "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_t1', "
                        "@low_water_mark = @m, @threshold = 100000;")
            cur.execute("SELECT COUNT(*) FROM cdc.dbo_t1_CT;")
            assert cur.fetchall()[0][0] == 0
        finally:
            conn.close()
        deadline = time.time() + 30
        while time.time() < deadline and table_state(port, "dbo_t1") != "failed":
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    result = json.loads(out)
    assert list(result["errors"]) == ["dbo_t1"], result
    assert result["errors"]["dbo_t1"]["kind"] == "DataLossError", result
    assert "purged by CDC cleanup" in err, err
