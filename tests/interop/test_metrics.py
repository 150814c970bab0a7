"""start-many --metrics-listen: /metrics parses as OpenMetrics and its rows
agree with the facts table, the capture job stopped in the simulator shows in
the capture health, the change tables' row counts agree with the tables, a
login without VIEW DATABASE STATE degrades to a metric,
/healthz and /readyz answer, /status.json and the status page list every
table with a failed one first."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import CLI
from test_start_many import (DB, INSTANCES, TABLES, bronze_keys, change_rows, facts, make_db,
                             many_args, reader, write)

OM_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def scrape(port):
    status, ctype, body = get(port, "/metrics")
    assert status == 200 and ctype == OM_TYPE, (status, ctype)
    assert body.endswith("# EOF\n")
    out = {}
    for fam in text_string_to_metric_families(body):  # raises on a malformed exposition
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def per_table(m, name, **labels):
    return {lab["capture_instance"]: v for lab, v in m.get(name, [])
            if all(lab.get(k) == x for k, x in labels.items())}


def one(m, name):
    [(labels, v)] = m[name]
    assert labels == {"database": DB}
    return v


def wait_for(pred, timeout=30, what=""):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Service:
    """start-many with a continuous trigger and a workload on every table."""

    def __init__(self, sim, workdir, cs=None, extra=()):
        self.sim, self.lake = sim, os.path.join(workdir, "lake")
        ready = os.path.join(workdir, "port")
        args = many_args(sim, self.lake, cs=cs, trigger="processingTime=100ms",
                         extra=("--metrics-listen", "127.0.0.1:0", "--ready-file", ready,
                                "--metrics-poll-seconds", "0.5", "--lag-problem-seconds", "60",
                                *extra))
        self.stop_w = threading.Event()
        self.proc = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.port = int(wait_for(lambda: os.path.exists(ready) and open(ready).read().strip(),
                                 10, "the ready file"))
        self.writer = threading.Thread(target=self.workload)
        self.writer.start()

    def workload(self):
        i = 1000
        while not self.stop_w.is_set():
            write(self.sim, TABLES, i, 1)
            i += 2
            time.sleep(0.1)

    def quiesce(self):
        self.stop_w.set()
        self.writer.join()

    def stop(self):
        self.quiesce()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.communicate(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def test_metrics_agree_with_facts_and_capture_stopped_shows(sim, workdir):
    make_db(sim)
    write(sim, TABLES, 1, 1)
    svc = Service(sim, workdir, extra=("--control-table", os.path.join(workdir, "lake", "control")))
    try:
        assert get(svc.port, "/healthz")[0] == 200
        wait_for(lambda: get(svc.port, "/readyz")[0] == 200, 30, "/readyz 200")
        m = wait_for(lambda: (lambda x: x if "mssql_cdc_capture_last_scan_end_timestamp_seconds"
                              in x else None)(scrape(svc.port)), 10, "capture health")
        assert one(m, "mssql_cdc_capture_health_visible") == 1
        assert one(m, "mssql_cdc_capture_probe_up") == 1
        if shutil.which("promtool"):
            # Prometheus' own text parser and naming lint: it reads the 0.0.4
            # format, where a counter's family is named with its _total, so
            # the OpenMetrics counters' HELP (on the family) is all it misses
            p = subprocess.run(["promtool", "check", "metrics"], input=get(svc.port, "/metrics")[2],
                               capture_output=True, text=True)
            lint = (p.stdout + p.stderr).splitlines()
            assert p.returncode in (0, 3) and "parsing error" not in p.stdout + p.stderr, lint
            assert sorted(lint) == ["mssql_cdc_batches_total no help text",
                                    "mssql_cdc_capture_probe_errors_total no help text",
                                    "mssql_cdc_rows_total no help text"], lint
        states = per_table(m, "mssql_cdc_table_state", state="running")
        assert states == {ci: 1 for ci in INSTANCES}, m["mssql_cdc_table_state"]
        # the capture job stopped: its newest scan ends no more, within one poll
        sim.run("EXEC sys.sp_cdc_stop_job @job_type = N'capture';", database=DB)
        time.sleep(1.2)  # two polls
        end1 = one(scrape(svc.port), "mssql_cdc_capture_last_scan_end_timestamp_seconds")
        time.sleep(1.5)
        m = scrape(svc.port)
        assert one(m, "mssql_cdc_capture_last_scan_end_timestamp_seconds") == end1
        assert one(m, "mssql_cdc_capture_last_scan_age_seconds") >= 1.4
        sim.run("EXEC sys.sp_cdc_start_job @job_type = N'capture';", database=DB)
        wait_for(lambda: one(scrape(svc.port),
                             "mssql_cdc_capture_last_scan_end_timestamp_seconds") > end1,
                 10, "scans again")
        # a failed scan: in the session counts and sys.dm_cdc_errors' rows
        assert one(scrape(svc.port), "mssql_cdc_capture_errors_listed") == 0
        sim.run("EXEC sim.fault @kind = 'capture_error';")
        m = wait_for(lambda: (lambda x: x if one(x, "mssql_cdc_capture_errors_listed") == 1
                              else None)(scrape(svc.port)), 10, "the capture error")
        assert one(m, "mssql_cdc_capture_session_errors") == 1
        assert one(m, "mssql_cdc_capture_failed_sessions") == 1
        # quiet source: every table catches up, lag 0, rows = the facts table's
        svc.quiesce()
        sim.run("EXEC sim.run_capture @ignore_latency = 1;", database=DB)
        wait_for(lambda: all(bronze_keys(svc.lake, ci) == change_rows(sim, ci) for ci in INSTANCES),
                 30, "bronze equal to the change tables")
        time.sleep(1.2)
        m = scrape(svc.port)
        rows = per_table(m, "mssql_cdc_rows_total")
        by_facts = {ci: sum(r["rows"] for r in facts(svc.lake)
                            if r["app_id"] == f"{ci}-v1" and r["event"] is None)
                    for ci in INSTANCES}
        assert rows == by_facts and all(v > 0 for v in rows.values()), (rows, by_facts)
        batches = per_table(m, "mssql_cdc_batches_total")
        assert set(batches) == set(INSTANCES) and all(v >= 1 for v in batches.values())
        assert per_table(m, "mssql_cdc_ingestion_lag_seconds") == {ci: 0 for ci in INSTANCES}
        # every change table's rows, as sys.dm_db_partition_stats counts them
        # (one query per database and poll), equal to a count of the table
        assert one(m, "mssql_cdc_change_table_rows_visible") == 1
        counts = {ci: len(change_rows(sim, ci)) for ci in INSTANCES}
        assert all(v > 0 for v in counts.values())
        assert wait_for(lambda: per_table(scrape(svc.port), "mssql_cdc_change_table_rows")
                        == counts, 5, "the change tables' row counts"), counts
        [(labels, _)] = [x for x in scrape(svc.port)["mssql_cdc_change_table_rows"]
                         if x[0]["capture_instance"] == "dbo_t1"]
        assert labels == {"database": DB, "capture_instance": "dbo_t1"}
        # a new instance's min_lsn has no commit time: no headroom known yet
        # (as the facts rows have none), so none is exported
        assert "mssql_cdc_retention_headroom_hours" not in m or \
            per_table(m, "mssql_cdc_retention_headroom_hours") == {}
        # with a control table: the verdict's age and how long it stood
        age = per_table(m, "mssql_cdc_verdict_age_seconds")
        still = per_table(m, "mssql_cdc_verdict_unmoved_seconds")
        assert set(age) == set(still) == set(INSTANCES), m.keys()
        assert all(v >= 0 for v in list(age.values()) + list(still.values()))
        # cleanup moves dbo_t1's min_lsn to a commit (it has read everything
        # up to it): its next batch knows its headroom, as its facts row does
        sim.run("DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn(); "
                "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_t1', "
                "@low_water_mark = @m, @threshold = 100000;", database=DB)
        write(sim, TABLES[:1], 9000, 1)
        headroom = wait_for(lambda: per_table(scrape(svc.port), "mssql_cdc_retention_headroom_hours"),
                            15, "dbo_t1's headroom")
        last = max((r for r in facts(svc.lake) if r["app_id"] == "dbo_t1-v1" and r["event"] is None
                    and r["retention_headroom_hours"] is not None), key=lambda r: r["batch_id"])
        assert list(headroom) == ["dbo_t1"] and headroom["dbo_t1"] >= 0, headroom
        assert abs(headroom["dbo_t1"] - last["retention_headroom_hours"]) < 0.01, (headroom, last)
    finally:
        out, err = svc.stop()
    assert svc.proc.returncode == 0, err
    assert "metrics: listening on http://127.0.0.1:" in err


CHROMIUM = shutil.which("chromium")


def five_hundred_tables(page, workdir):
    """The page over 500 tables (served with a status.json made up here):
    every row rendered, failed and stopped first, then those lagging more
    than the threshold, then by name."""
    import http.server
    import socketserver
    d = os.path.join(workdir, "page")
    os.makedirs(d)
    tables = [{"capture_instance": f"dbo_x{i:03d}", "state": "running", "rows": i, "batches": 1,
               "lag_seconds": 0, "headroom_hours": 70, "last_batch_seconds": 0.1,
               "verdict_age_seconds": None, "error": None, "snapshot": None} for i in range(500)]
    tables[321]["state"] = "stopped"
    tables[7].update(state="failed", error={"kind": "PermissionError", "message": "<grant>"})
    tables[250]["lag_seconds"] = 61
    tables[42]["snapshot"] = {"rows_done": 50, "rows_total": 200}
    status = {"database": "db", "now": 0, "ready": False, "lag_problem_seconds": 60,
              "capture": {"probe_up": True, "visible": False}, "tables": tables}
    with open(os.path.join(d, "index.html"), "w") as f:
        f.write(page)
    with open(os.path.join(d, "status.json"), "w") as f:
        json.dump(status, f)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=d, **k)

        def log_message(self, *a):
            pass

    with socketserver.TCPServer(("127.0.0.1", 0), Quiet) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        t0 = time.time()
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                              "--virtual-time-budget=5000", "--dump-dom",
                              f"http://127.0.0.1:{httpd.server_address[1]}/index.html"],
                             capture_output=True, text=True, timeout=60).stdout
        httpd.shutdown()
    rows = [seg.split('"', 1)[0] for seg in dom.split('<tr data-ci="')[1:]]
    assert len(rows) == 500 and rows[:3] == ["dbo_x007", "dbo_x321", "dbo_x250"], rows[:5]
    assert rows[3:] == sorted(rows[3:])
    assert "&lt;grant&gt;" in dom and "<grant>" not in dom  # messages escaped
    assert "25%" in dom and "500 tables (500 shown)" in dom
    assert time.time() - t0 < 30


def test_no_view_database_state_degrades_and_a_failed_table_shows_first(sim, workdir):
    make_db(sim)
    cs = reader(sim)
    write(sim, TABLES, 1, 1)
    svc = Service(sim, workdir, cs=cs)
    try:
        wait_for(lambda: get(svc.port, "/readyz")[0] == 200, 30, "/readyz 200")
        m = wait_for(lambda: (lambda x: x if "mssql_cdc_capture_health_visible" in x else None)(
            scrape(svc.port)), 10, "a poll")
        assert one(m, "mssql_cdc_capture_health_visible") == 0
        assert one(m, "mssql_cdc_capture_probe_up") == 1  # no error: the probe answers
        assert "mssql_cdc_capture_latency_seconds" not in m
        assert "mssql_cdc_source_max_commit_timestamp_seconds" in m
        # the change tables' row counts degrade the same way
        m = wait_for(lambda: (lambda x: x if "mssql_cdc_change_table_rows_visible" in x else None)(
            scrape(svc.port)), 10, "a row count poll")
        assert one(m, "mssql_cdc_change_table_rows_visible") == 0
        assert "mssql_cdc_change_table_rows" not in m
        sim.run("REVOKE SELECT ON cdc.dbo_t3_CT FROM reader;", database=DB)
        status = wait_for(lambda: (lambda s: s if any(t["state"] == "failed" for t in s["tables"])
                                   else None)(json.loads(get(svc.port, "/status.json")[2])),
                          30, "dbo_t3 failed")
        tables = {t["capture_instance"]: t for t in status["tables"]}
        assert list(tables) == INSTANCES
        assert tables["dbo_t3"]["state"] == "failed"
        assert tables["dbo_t3"]["error"]["kind"] == "PermissionError"
        assert all(tables[ci]["state"] == "running" and tables[ci]["error"] is None
                   for ci in INSTANCES if ci != "dbo_t3"), tables
        assert status["capture"]["visible"] is False
        code, _, body = get(svc.port, "/readyz")
        assert code == 503 and "1 stopped or failed" in body
        m = scrape(svc.port)
        assert per_table(m, "mssql_cdc_errors_total") == {"dbo_t3": 1}
        assert per_table(m, "mssql_cdc_table_state", state="failed")["dbo_t3"] == 1
        # the others go on
        before = per_table(m, "mssql_cdc_rows_total")
        wait_for(lambda: all(per_table(scrape(svc.port), "mssql_cdc_rows_total")[ci] > before[ci]
                             for ci in INSTANCES if ci != "dbo_t3"), 30, "the others go on")
        code, ctype, page = get(svc.port, "/")
        assert code == 200 and ctype.startswith("text/html") and "status.json" in page
        assert "http://" not in page and "https://" not in page  # nothing external
        if CHROMIUM:
            dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                                  "--virtual-time-budget=5000", "--dump-dom",
                                  f"http://127.0.0.1:{svc.port}/"],
                                 capture_output=True, text=True, timeout=60).stdout
            rows = [seg.split('"', 1)[0] for seg in dom.split('<tr data-ci="')[1:]]
            assert sorted(rows) == sorted(INSTANCES), dom[-2000:]
            assert rows[0] == "dbo_t3", rows  # the failed table first
            assert 'class="problem"' in dom.split('<tr data-ci="')[1]
            five_hundred_tables(page, workdir)
    finally:
        out, err = svc.stop()
    assert svc.proc.returncode == 5, err


def test_the_simulator_counts_rows_in_dm_db_partition_stats(sim):
    """sys.dm_db_partition_stats as SQL Server has it: a row per table and
    partition of its heap (index_id 0) or clustered index (1), row_count its
    rows now; VIEW DATABASE STATE needed."""
    make_db(sim)
    sim.run("CREATE TABLE dbo.heap (a INT NULL); INSERT INTO dbo.heap VALUES (1), (2), (3);",
            database=DB)
    write(sim, TABLES[:1], 1, 2)  # dbo.t1: 2 rows left
    ct = len(change_rows(sim, "dbo_t1"))
    assert ct > 2
    q = ("SELECT o.name, ps.index_id, ps.partition_number, ps.row_count "
         "FROM sys.dm_db_partition_stats AS ps JOIN sys.objects AS o ON o.object_id = ps.object_id "
         "WHERE o.name IN (N't1', N't2', N'heap', N'dbo_t1_CT') ORDER BY o.name")
    assert [tuple(r) for r in sim.run(q, database=DB)] == [
        ("dbo_t1_CT", 1, 1, ct), ("heap", 0, 1, 3), ("t1", 1, 1, 2), ("t2", 1, 1, 0)]
    reader(sim)
    import pymssql
    from test_start_many import READER_PASSWORD
    conn = sim.connect(DB, user="reader", password=READER_PASSWORD)
    try:
        with pytest.raises(pymssql.Error) as e:
            conn.cursor().execute("SELECT COUNT(*) FROM sys.dm_db_partition_stats")
        assert e.value.args[0] == 297, e.value  # SQL Server's last message after 262
    finally:
        conn.close()
    # the metrics' query joins cdc.change_tables, which needs its own grant
    sim.run("GRANT VIEW DATABASE STATE TO reader; GRANT SELECT ON cdc.change_tables TO reader;",
            database=DB)
    conn = sim.connect(DB, user="reader", password=READER_PASSWORD)
    try:
        cur = conn.cursor()
        cur.execute("SELECT ps.row_count FROM sys.dm_db_partition_stats AS ps "
                    "JOIN cdc.change_tables AS ct ON ct.object_id = ps.object_id "
                    "WHERE ct.capture_instance = N'dbo_t1'")
        assert cur.fetchall() == [(ct,)]
    finally:
        conn.close()


def test_a_bad_listen_address_is_refused_before_anything_starts(sim, workdir):
    make_db(sim)
    lake = os.path.join(workdir, "lake")
    for bad in ("localhost:9464", "127.0.0.1", "127.0.0.1:99999"):
        p = subprocess.run([CLI, *many_args(sim, lake, extra=("--metrics-listen", bad))],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "--metrics-listen" in p.stderr, p.stderr
    assert not os.path.exists(lake)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian: prometheus) absent")
def test_the_alert_rules_in_docs_pass_promtool(workdir):
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "metrics.md")).read()
    rules = os.path.join(workdir, "rules.yml")
    with open(rules, "w") as f:
        f.write(doc.split("```yaml\n", 1)[1].split("```", 1)[0])
    p = subprocess.run(["promtool", "check", "rules", rules], capture_output=True, text=True)
    assert p.returncode == 0 and "SUCCESS: 6 rules found" in p.stdout, p.stdout + p.stderr


def test_a_port_in_use_is_refused_before_anything_is_written(sim, workdir):
    import socket
    make_db(sim)
    lake = os.path.join(workdir, "lake")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run([CLI, *many_args(sim, lake, extra=(
            "--metrics-listen", f"127.0.0.1:{port}"))], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in p.stderr, p.stderr
    assert not os.path.exists(lake)  # not even the facts table


def test_the_probe_opens_on_a_table_it_can_read_when_the_first_is_not(sim, workdir):
    make_db(sim)
    cs = reader(sim)
    # without SELECT on the table and its change table the login does not see
    # the instance: a probe on dbo_t1's options cannot open
    sim.run("REVOKE SELECT ON cdc.dbo_t1_CT FROM reader; REVOKE SELECT ON dbo.t1 FROM reader;",
            database=DB)
    write(sim, TABLES, 1, 1)
    svc = Service(sim, workdir, cs=cs)
    try:
        m = wait_for(lambda: (lambda x: x if one(x, "mssql_cdc_capture_probe_up") == 1 else None)(
            scrape(svc.port)), 15, "the probe up on another table's options")
        assert one(m, "mssql_cdc_capture_health_visible") == 0
        assert "mssql_cdc_source_max_commit_timestamp_seconds" in m
        failed = {"dbo_t1": 1, **{ci: 0 for ci in INSTANCES[1:]}}
        wait_for(lambda: per_table(scrape(svc.port), "mssql_cdc_table_state",
                                   state="failed") == failed, 15, "dbo_t1 failed")
    finally:
        out, err = svc.stop()
    assert svc.proc.returncode == 5, err
    assert err.count("metrics: the capture probe failed") == 1, err  # logged once, not per poll
