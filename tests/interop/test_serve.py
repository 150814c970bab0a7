"""mssql-cdc serve: the tables of a config file (two databases of the
simulator) as one service. availableNow brings every bronze equal to its
change table; a table added to the file and SIGHUP starts it, one removed
stops it, a file that is refused on SIGHUP keeps the running set; bad
config lines are refused before anything starts, naming the line; kill -9
and a restart lose and double nothing; the systemd unit is valid."""
import base64
import json
import os
import shutil
import signal
import struct
import subprocess
import time
import urllib.request

import pytest
from deltalake import DeltaTable

from conftest import CLI, ROOT, run_cli
from test_start_many import change_rows as many_change_rows
from test_start_many import reader
from test_start_many import write as many_write

DBS = {"shop": ["t1", "t2", "t3"], "crm": ["c1", "c2"]}


def make_dbs(sim, dbs=DBS):
    for db, tables in dbs.items():
        sim.run(f"CREATE DATABASE {db};")
        sql = "".join(f"CREATE TABLE dbo.{t} (id INT NOT NULL PRIMARY KEY, v NVARCHAR(40) NULL);"
                      for t in tables)
        sql += "EXEC sys.sp_cdc_enable_db;"
        sql += "".join(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', "
                       f"@source_name = N'{t}', @role_name = NULL;" for t in tables)
        sim.run(sql, database=db)


def write(sim, db, tables, first, n):
    many_write(sim, tables, first, n, database=db)


def change_rows(sim, db, ci):
    return many_change_rows(sim, ci, database=db)


def bronze_keys(lake, db, ci):
    path = os.path.join(lake, db, f"bronze_{ci}")
    if not os.path.exists(os.path.join(path, "_delta_log", "00000000000000000000.json")):
        return []  # not yet created (its first commit may be on its way)
    t = DeltaTable(path).to_pyarrow_table()
    return sorted(zip(t["_start_lsn"].to_pylist(), t["_seqval"].to_pylist(),
                      t["_operation"].to_pylist()))


def assert_equal(sim, lake, tables):
    for db, ci in tables:
        bronze = bronze_keys(lake, db, ci)
        assert len(bronze) == len(set(bronze)), f"{db}.{ci}: bronze holds a change twice"
        assert bronze == change_rows(sim, db, ci), f"{db}.{ci}: bronze differs from its CT"


def config(sim, workdir, tables, trigger="availableNow", extra_service="", extra="", cs=None):
    """The config file for tables [(db, ci)], mode 600 (it holds passwords);
    cs: the connection string of each database (default sa's)."""
    lake = os.path.join(workdir, "lake")
    lines = ["# a service over two databases; a = b ; c in a comment is a comment",
             "  ; so is this", "[service]",
             f"target = {lake}/{{db}}/bronze_{{ci}}", "app_id = {db}-{ci}",
             f"checkpoint = {workdir}/ckpt/{{db}}/{{ci}}", f"trigger = {trigger}",
             f"facts_table = {lake}/facts", extra_service, ""]
    for db in sorted({db for db, _ in tables}):
        conn = cs(db) if cs else sim.connection_string(db)
        lines += [f"[database {db}]", f"connectionString = {conn}", ""]
    for db, ci in tables:
        lines += [f"[table {db}.{ci}]", ""]
    path = os.path.join(workdir, "serve.ini")
    with open(path, "w") as f:
        f.write("\n".join(lines) + extra)
    os.chmod(path, 0o600)
    return path, lake


ALL = [(db, f"dbo_{t}") for db, ts in DBS.items() for t in ts]


def test_available_now_brings_every_table_of_two_databases_to_its_change_table(sim, workdir):
    make_dbs(sim)
    write(sim, "shop", DBS["shop"], 1, 2)
    write(sim, "crm", DBS["crm"], 1, 3)
    path, lake = config(sim, workdir, ALL)
    p = run_cli("serve", "--config", path, "--json", "--log-format", "json")
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}, result
    names = [t["name"] for t in result["tables"]]
    assert names == [f"{db}.{ci}" for db, ci in ALL], names
    assert all(t["state"] == "done" for t in result["tables"]), result
    assert_equal(sim, lake, ALL)
    # every batch is a JSON line on stdout naming its table
    batches = [json.loads(line) for line in p.stdout.splitlines()[:-1]]
    assert {b["query"] for b in batches} == set(names), batches
    # the service's own lines are JSON objects too
    for line in p.stderr.splitlines():
        if line.startswith("{"):
            assert "table" in json.loads(line), line
    # a rerun resumes: the new changes once
    write(sim, "crm", ["c1"], 100, 2)
    p = run_cli("serve", "--config", path, "--json")
    again = {t["name"]: t for t in json.loads(p.stdout.strip().splitlines()[-1])["tables"]}
    assert again["crm.dbo_c1"]["rows"] == 10, again
    assert all(again[n]["rows"] == 0 for n in names if n != "crm.dbo_c1"), again
    assert_equal(sim, lake, ALL)


def wait_for(pred, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def status(port):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=5) as r:
        return {t["capture_instance"]: t for t in json.loads(r.read())["tables"]}


def test_sighup_adds_and_removes_tables_and_a_bad_file_keeps_the_running_set(sim, workdir):
    make_dbs(sim)
    write(sim, "shop", DBS["shop"], 1, 1)
    write(sim, "crm", DBS["crm"], 1, 1)
    first = [("shop", "dbo_t1"), ("shop", "dbo_t2"), ("crm", "dbo_c1")]
    path, lake = config(sim, workdir, first, trigger="processingTime=100ms",
                        extra_service="metrics_listen = 127.0.0.1:0")
    ready = os.path.join(workdir, "port")
    log = open(os.path.join(workdir, "serve.log"), "w+")
    proc = subprocess.Popen([CLI, "serve", "--config", path, "--ready-file", ready, "--json"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        wait_for(lambda: os.path.exists(ready) and open(ready).read().strip(), "the listener")
        port = int(open(ready).read())
        wait_for(lambda: all(bronze_keys(lake, db, ci) == change_rows(sim, db, ci)
                             for db, ci in first), "the first tables to catch up")
        assert set(status(port)) == {"shop.dbo_t1", "shop.dbo_t2", "crm.dbo_c1"}
        # a bad file on SIGHUP: refused, naming its line; the running set goes on
        good = open(path).read()
        with open(path, "a") as f:
            f.write("[table shop.dbo_t3]\nnumPartitons = 4\n")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "refused" in open(log.name).read(), "the refusal")
        text = open(log.name).read()
        bad_line = len(good.splitlines()) + 2
        assert f"{path}:{bad_line}: 'numPartitons' is no key" in text, text
        # a budget change needs a restart: refused as well
        with open(path, "w") as f:
            f.write(good.replace("[service]\n", "[service]\nmax_connections = 50\n"))
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "[service] max_connections changed, which needs a restart"
                 in open(log.name).read(), "the budget's refusal")
        write(sim, "shop", ["t1"], 100, 1)
        wait_for(lambda: bronze_keys(lake, "shop", "dbo_t1") == change_rows(sim, "shop", "dbo_t1"),
                 "shop.dbo_t1 to go on after the refused file")
        assert bronze_keys(lake, "shop", "dbo_t3") == []
        # add shop.dbo_t3 and crm.dbo_c2, remove shop.dbo_t2
        second = [("shop", "dbo_t1"), ("crm", "dbo_c1"), ("shop", "dbo_t3"), ("crm", "dbo_c2")]
        config(sim, workdir, second, trigger="processingTime=100ms",
               extra_service="metrics_listen = 127.0.0.1:0")
        batches_t1 = status(port)["shop.dbo_t1"]["batches"]
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: all(bronze_keys(lake, db, ci) == change_rows(sim, db, ci)
                             for db, ci in second), "the added tables to catch up")
        wait_for(lambda: "shop.dbo_t2" not in status(port), "shop.dbo_t2 to leave the page")
        text = open(log.name).read()
        assert "shop.dbo_t2: stopped (removed from the file)" in text, text
        assert "2 tables started, 1 stopped, 2 running on" in text, text
        # the kept tables were not restarted: their counts go on
        assert status(port)["shop.dbo_t1"]["batches"] >= batches_t1
        # the removed table writes no more
        write(sim, "shop", ["t2", "t3"], 200, 1)
        wait_for(lambda: bronze_keys(lake, "shop", "dbo_t3") == change_rows(sim, "shop", "dbo_t3"),
                 "shop.dbo_t3 to go on")
        assert bronze_keys(lake, "shop", "dbo_t2") != change_rows(sim, "shop", "dbo_t2")
        # a table whose settings change restarts; the others run on
        text = open(path).read().replace("[table crm.dbo_c2]\n",
                                          "[table crm.dbo_c2]\nmaxCommitsPerBatch = 7\n")
        with open(path, "w") as f:
            f.write(text)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "1 tables started, 1 stopped, 3 running on" in open(log.name).read(),
                 "the changed table's restart")
        assert "crm.dbo_c2: stopped (its settings changed" in open(log.name).read()
        write(sim, "crm", ["c2"], 300, 1)
        wait_for(lambda: bronze_keys(lake, "crm", "dbo_c2") == change_rows(sim, "crm", "dbo_c2"),
                 "crm.dbo_c2 to go on after its restart")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        log.close()
    assert proc.returncode == 0, open(log.name).read()
    result = json.loads(out.strip().splitlines()[-1])
    assert [t["name"] for t in result["tables"]] == [f"{db}.{ci}" for db, ci in second]
    assert all(t["state"] == "stopped" for t in result["tables"]), result


def test_kill_9_and_a_restart_lose_and_double_nothing(sim, workdir):
    make_dbs(sim)
    tables = [("shop", "dbo_t1"), ("shop", "dbo_t2"), ("crm", "dbo_c1")]
    path, lake = config(sim, workdir, tables, trigger="processingTime=10ms",
                        extra_service="max_batches = 1000")
    path_once, _ = path, lake
    for round_ in range(3):
        write(sim, "shop", ["t1", "t2"], 1000 * (round_ + 1), 3)
        write(sim, "crm", ["c1"], 1000 * (round_ + 1), 3)
        proc = subprocess.Popen([CLI, "serve", "--config", path_once],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3 + 0.25 * round_)
        proc.kill()
        proc.wait()
    config(sim, workdir, tables, trigger="availableNow")
    run_cli("serve", "--config", path)
    assert_equal(sim, lake, tables)
    rows = DeltaTable(os.path.join(lake, "facts")).to_pyarrow_table().to_pylist()
    for db, ci in tables:
        mine = [r for r in rows if r["app_id"] == f"{db}-{ci}" and r["event"] is None]
        ids = [r["batch_id"] for r in mine]
        assert len(ids) == len(set(ids)), f"{db}.{ci}: a batch has two facts rows"


BAD = [
    ("unknown key", "[service]\nbogus = 1\n", 2, "'bogus' is no key of [service]"),
    ("key twice", "[service]\ntrigger = once\ntrigger = once\n", 3, "'trigger' is given twice"),
    ("no section", "trigger = once\n", 1, "before any section"),
    ("not ini", "[service]\nno equals sign here\n", 2, "not INI syntax"),
    ("bad section", "[tables shop.x]\n", 1, "is no section"),
    ("bad value", "[service]\nmax_batches = lots\n", 2, "max_batches"),
    ("inline comment", "[service]\ntrigger = once ; now\n", 2, "a ';' after a space"),
    ("table without database", "[table nowhere.dbo_t1]\n", 1, "no [database nowhere]"),
    ("captureInstance in a table", "[table shop.dbo_t1]\ncaptureInstance = x\n", 2,
     "'captureInstance' is no key of [table shop.dbo_t1]"),
    ("schedule without interval", "[table shop.dbo_t2]\napply = --keys id\n", 2,
     "apply and apply_every go together"),
    ("schedule placeholder", "[table shop.dbo_t2]\napply = --target {nope}\napply_every = 5\n",
     2, "a {placeholder} that is not one of"),
    ("schedule too often", "[table shop.dbo_t2]\nreconcile = --x\nreconcile_every = 0.5\n", 3,
     "'reconcile_every = 0.5': a number of seconds from 1"),
    ("backfill too often", "[table shop.dbo_t2]\nbackfill = 0.5\n", 2,
     "'backfill = 0.5': a number of seconds from 1"),
    ("backfill's own place", "[table shop.dbo_t2]\nbackfill = 60 --target ./x\n", 2,
     "'--target' is not a flag backfill takes here"),
    ("backfill bad number", "[table shop.dbo_t2]\nbackfill = 60 --max-waves 0\n", 2,
     "'--max-waves 0': a whole number from 1"),
]


@pytest.mark.parametrize("case,text,line,says", BAD, ids=[b[0] for b in BAD])
def test_a_bad_config_line_is_refused_naming_it(sim, workdir, case, text, line, says):
    make_dbs(sim, {"shop": ["t1"]})
    path, lake = config(sim, workdir, [("shop", "dbo_t1")])
    base = open(path).read()
    with open(path, "w") as f:
        f.write(text + base)
    p = run_cli("serve", "--config", path, check=False)
    assert p.returncode == 2, p.stderr
    assert f"{path}:{line}: " in p.stderr and says in p.stderr, p.stderr
    assert "nothing was started" in p.stderr
    assert not os.path.exists(lake), "a refused config wrote something"
    assert "Sim-Passw0rd" not in p.stderr + p.stdout


def test_config_errors_found_after_parsing_are_refused_too(sim, workdir):
    make_dbs(sim, {"shop": ["t1", "t2"]})
    lake = os.path.join(workdir, "lake")
    # a template without {ci}: the tables would share a target
    path, _ = config(sim, workdir, [("shop", "dbo_t1"), ("shop", "dbo_t2")])
    text = open(path).read().replace("bronze_{ci}", "bronze")
    open(path, "w").write(text)
    p = run_cli("serve", "--config", path, check=False)
    assert p.returncode == 2 and "must contain {ci}" in p.stderr, p.stderr
    # two tables at one target (their own templates)
    path, _ = config(sim, workdir, [("shop", "dbo_t1"), ("shop", "dbo_t2")])
    text = open(path).read().replace("[table shop.dbo_t2]\n",
                                     f"[table shop.dbo_t2]\ntarget = {lake}/shop/bronze_dbo_t1\n")
    open(path, "w").write(text)
    p = run_cli("serve", "--config", path, check=False)
    assert p.returncode == 2 and "would both write to" in p.stderr, p.stderr
    # an unknown capture instance: the source is asked before anything starts
    path, _ = config(sim, workdir, [("shop", "dbo_t1"), ("shop", "dbo_nope")])
    p = run_cli("serve", "--config", path, check=False)
    assert p.returncode == 2 and "no capture instance 'dbo_nope'" in p.stderr, p.stderr
    # the connection string in a file others may read
    path, _ = config(sim, workdir, [("shop", "dbo_t1")])
    os.chmod(path, 0o644)
    p = run_cli("serve", "--config", path, check=False)
    assert p.returncode == 2 and "chmod 600" in p.stderr, p.stderr
    assert "Sim-Passw0rd" not in p.stderr
    assert not os.path.exists(lake)


def test_the_connection_string_from_the_environment_or_a_file(sim, workdir):
    make_dbs(sim, {"shop": ["t1"], "crm": ["c1"]})
    write(sim, "shop", ["t1"], 1, 1)
    write(sim, "crm", ["c1"], 1, 1)
    path, lake = config(sim, workdir, [("shop", "dbo_t1"), ("crm", "dbo_c1")])
    secret = os.path.join(workdir, "crm.cs")
    with open(secret, "w") as f:
        f.write(sim.connection_string("crm") + "\n")
    os.chmod(secret, 0o600)
    text = open(path).read()
    text = text.replace(f"connectionString = {sim.connection_string('shop')}",
                        "connectionString_env = SHOP_CS")
    text = text.replace(f"connectionString = {sim.connection_string('crm')}",
                        f"connectionString_file = {secret}")
    open(path, "w").write(text)
    os.chmod(path, 0o644)  # no secret in it now: others may read it
    p = run_cli("serve", "--config", path, check=False)
    assert p.returncode == 2 and "SHOP_CS" in p.stderr, p.stderr
    run_cli("serve", "--config", path, env={"SHOP_CS": sim.connection_string("shop")})
    assert_equal(sim, lake, [("shop", "dbo_t1"), ("crm", "dbo_c1")])


def test_the_systemd_unit_is_valid(workdir):
    unit = os.path.join(ROOT, "docs", "mssql-cdc.service")
    text = open(unit).read()
    sections = {line.strip() for line in text.splitlines() if line.startswith("[")}
    assert {"[Unit]", "[Service]", "[Install]"} <= sections
    assert "ExecReload=/bin/kill -HUP $MAINPID" in text
    assert "serve --config" in text
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return
    # verify with the program at the path the unit names (a copy of ours)
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    program = exec_start.split("=", 1)[1].split()[0]
    copy = os.path.join(workdir, "mssql-cdc.service")
    shutil.copy(unit, copy)
    p = subprocess.run([analyze, "verify", "--man=no", copy], capture_output=True, text=True)
    # the program is not installed here: that line is the only complaint allowed
    errors = [line for line in (p.stdout + p.stderr).splitlines()
              if line.strip() and not (program in line and "is not executable" in line)]
    assert not errors, p.stdout + p.stderr


def test_help_names_serve():
    p = run_cli("serve", "--help")
    assert "--config FILE" in p.stdout and "SIGHUP" in p.stdout
    p = run_cli("--help", check=False)
    assert "serve" in p.stdout + p.stderr


def test_readyz_for_resumed_idle_tables_and_every_dashboard_metric_is_served(sim, workdir):
    """A restart with nothing new: every table resumes and is ready without
    a batch. The Grafana dashboard's every metric is one /metrics serves."""
    import re
    import urllib.error
    import urllib.request
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    make_dbs(sim)
    write(sim, "shop", DBS["shop"], 1, 1)
    write(sim, "crm", DBS["crm"], 1, 1)
    path, lake = config(sim, workdir, ALL,
                        extra_service=f"control_table = {workdir}/lake/control")
    run_cli("serve", "--config", path)
    config(sim, workdir, ALL, trigger="processingTime=200ms",
           extra_service=f"control_table = {workdir}/lake/control\nmetrics_poll_seconds = 0.2")
    ready = os.path.join(workdir, "port")
    proc = subprocess.Popen([CLI, "serve", "--config", path, "--metrics-listen", "127.0.0.1:0",
                             "--ready-file", ready], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)

    def get(p):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{p}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
    try:
        wait_for(lambda: os.path.exists(ready) and open(ready).read().strip(), "the listener")
        port = int(open(ready).read())
        wait_for(lambda: get("/readyz")[0] == 200, "/readyz 200 with nothing new")
        tables = status(port)
        assert set(tables) == {f"{db}.{ci}" for db, ci in ALL}
        assert all(t["state"] == "running" and t["batches"] == 0 for t in tables.values()), tables
        assert {t["database"] for t in tables.values()} == set(DBS)
        wait_for(lambda: "mssql_cdc_capture_last_scan_age_seconds" in get("/metrics")[1],
                 "the capture probe's first poll")
        body = get("/metrics")[1]
        served = set()
        for fam in text_string_to_metric_families(body):
            served.add(fam.name)
            served.update(s.name for s in fam.samples)
        dash = json.load(open(os.path.join(ROOT, "docs", "grafana-dashboard.json")))
        assert dash["panels"], "a dashboard of no panels"
        for panel in dash["panels"]:
            exprs = [t["expr"] for t in panel["targets"]]
            names = set(re.findall(r"\bmssql_cdc_[a-z_]+", " ".join(exprs)))
            assert names, f"panel {panel['title']!r} reads no metric"
            for name in names:
                family = name[:-len("_total")] if name.endswith("_total") else name
                assert name in served or family in served, \
                    f"panel {panel['title']!r}: {name} is not in /metrics"
        # a probe per database: each its own capture health and lag
        by_name = {}
        for fam in text_string_to_metric_families(body):
            for smp in fam.samples:
                if "capture_instance" not in smp.labels and "database" in smp.labels:
                    by_name.setdefault(smp.name, {})[smp.labels["database"]] = smp.value
        assert by_name["mssql_cdc_capture_probe_up"] == {"shop": 1, "crm": 1}, by_name
        assert set(by_name["mssql_cdc_capture_lag_seconds"]) == {"shop", "crm"}
        assert all(v >= -5 for v in by_name["mssql_cdc_capture_lag_seconds"].values())
        # each table's lag against its own database's max_lsn: 0 once caught up
        write(sim, "crm", ["c1"], 100, 2)
        write(sim, "shop", ["t1"], 100, 1)
        wait_for(lambda: all(bronze_keys(lake, db, ci) == change_rows(sim, db, ci)
                             for db, ci in ALL), "the new changes")
        wait_for(lambda: all(status(port)[n]["lag_seconds"] == 0
                             for n in ("crm.dbo_c1", "shop.dbo_t1")), "lag 0 in both databases")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def serve_listening(path, workdir):
    """serve with a metrics listener on a free port: the process, its log
    (stderr) and the ready file that will hold the port."""
    ready = os.path.join(workdir, "port")
    log = open(os.path.join(workdir, "serve.log"), "w+")
    proc = subprocess.Popen([CLI, "serve", "--config", path, "--metrics-listen", "127.0.0.1:0",
                             "--ready-file", ready], stdout=subprocess.DEVNULL, stderr=log)
    return proc, log, ready


def stop_serve(proc, log):
    """SIGTERM, the exit awaited, the log closed."""
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    log.close()


def metrics_samples(port):
    """Every sample of /metrics, parsed as OpenMetrics."""
    import urllib.request
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        body = r.read().decode()
    return [smp for fam in text_string_to_metric_families(body) for smp in fam.samples]


def test_a_database_added_by_sighup_is_probed_and_one_removed_is_not(sim, workdir):
    """A [database] section added by a reload gets its capture probe (its
    capture-health metrics, its tables' lag against its own max_lsn) without
    a restart; removed again, its metrics go."""
    make_dbs(sim)
    write(sim, "shop", ["t1"], 1, 1)
    write(sim, "crm", ["c1"], 1, 2)
    service = "metrics_poll_seconds = 0.2"
    one = [("shop", "dbo_t1")]
    path, lake = config(sim, workdir, one, trigger="processingTime=100ms", extra_service=service)
    proc, log, ready = serve_listening(path, workdir)

    def probed():
        """{family: {database: value}} of the per-database samples of /metrics."""
        out = {}
        for smp in metrics_samples(port):
            if "capture_instance" not in smp.labels and "database" in smp.labels:
                out.setdefault(smp.name, {})[smp.labels["database"]] = smp.value
        return out
    try:
        wait_for(lambda: os.path.exists(ready) and open(ready).read().strip(), "the listener")
        port = int(open(ready).read())
        wait_for(lambda: probed().get("mssql_cdc_capture_probe_up") == {"shop": 1},
                 "shop's probe")
        # crm and a table of it added: probed from the reload on
        two = one + [("crm", "dbo_c1")]
        config(sim, workdir, two, trigger="processingTime=100ms", extra_service=service)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: probed().get("mssql_cdc_capture_probe_up") == {"shop": 1, "crm": 1},
                 "the added database's probe")
        wait_for(lambda: "crm" in probed().get("mssql_cdc_capture_lag_seconds", {}),
                 "the added database's capture lag")
        assert "crm" in probed()["mssql_cdc_source_max_commit_timestamp_seconds"]
        write(sim, "crm", ["c1"], 100, 2)
        wait_for(lambda: bronze_keys(lake, "crm", "dbo_c1") == change_rows(sim, "crm", "dbo_c1"),
                 "crm.dbo_c1 to catch up")
        wait_for(lambda: status(port).get("crm.dbo_c1", {}).get("lag_seconds") == 0,
                 "crm.dbo_c1's lag 0 against crm's max_lsn")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=5) as r:
            dbs = {d["database"]: d for d in json.loads(r.read())["databases"]}
        assert set(dbs) == {"shop", "crm"} and dbs["crm"]["probe_up"], dbs
        # removed again: its rows go, shop's stay
        config(sim, workdir, one, trigger="processingTime=100ms", extra_service=service)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: probed().get("mssql_cdc_capture_probe_up") == {"shop": 1},
                 "the removed database's rows to go")
        assert all(set(v) == {"shop"} for v in probed().values()), probed()
        assert "crm.dbo_c1" not in status(port)
        text = open(log.name).read()
        assert "database crm: added, its capture probe starts" in text, text
        assert "database crm: removed from the file, no longer probed" in text, text
    finally:
        stop_serve(proc, log)
    assert proc.returncode == 0, open(log.name).read()


class DevTools:
    """Headless Chromium driven over its DevTools protocol (a websocket)."""

    def __init__(self, url, workdir):
        import websocket
        profile = os.path.join(workdir, "chromium")
        self.proc = subprocess.Popen(
            [shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--remote-allow-origins=*", "--window-size=1200,900", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        active = os.path.join(profile, "DevToolsActivePort")
        wait_for(lambda: os.path.exists(active) and len(open(active).read().split()) == 2,
                 "Chromium's DevTools port")
        port = int(open(active).read().split()[0])
        import urllib.request

        def page():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                pages = [t for t in json.loads(r.read()) if t["type"] == "page"]
            return pages[0]["webSocketDebuggerUrl"] if pages else None
        wait_for(page, "the page's target")
        self.ws = websocket.create_connection(page(), timeout=10, suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg.get("result", {})

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        assert "exceptionDetails" not in r, r
        return r["result"].get("value")

    def rows(self):
        return self.eval("Array.from(document.querySelectorAll('#rows tr'))"
                         ".map(r => [r.dataset.ci, r.className])")

    def click(self, selector):
        box = self.eval(f"(() => {{ const b = document.querySelector({json.dumps(selector)})"
                        ".getBoundingClientRect(); return [b.x + b.width / 2, b.y + b.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left",
                      clickCount=1)

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium (Debian) absent")
def test_a_kept_database_whose_options_change_is_probed_with_the_new_ones(sim, workdir):
    """A reload that keeps a [database] but changes its connection string:
    the capture probe opens again with the new one (a login without VIEW
    DATABASE STATE, then sa's: the capture health becomes visible)."""
    make_dbs(sim, {"shop": ["t1"]})
    write(sim, "shop", ["t1"], 1, 1)
    sim.run("CREATE LOGIN reader WITH PASSWORD = 'Reader_Passw0rd1';")
    sim.run("CREATE USER reader FOR LOGIN reader; GRANT SELECT ON dbo.t1 TO reader; "
            "GRANT SELECT ON cdc.dbo_t1_CT TO reader;", database="shop")
    service = "metrics_poll_seconds = 0.2"
    one = [("shop", "dbo_t1")]
    as_reader = lambda db: sim.connection_string(db, user="reader", password="Reader_Passw0rd1")
    path, lake = config(sim, workdir, one, trigger="processingTime=100ms", extra_service=service,
                        cs=as_reader)
    proc, log, ready = serve_listening(path, workdir)

    def visible():
        return {smp.name: smp.value for smp in metrics_samples(port)
                if smp.name in ("mssql_cdc_capture_health_visible",
                                "mssql_cdc_change_table_rows_visible")}
    try:
        wait_for(lambda: os.path.exists(ready) and open(ready).read().strip(), "the listener")
        port = int(open(ready).read())
        wait_for(lambda: len(visible()) == 2, "the reader's probe")
        assert visible() == {"mssql_cdc_capture_health_visible": 0,
                             "mssql_cdc_change_table_rows_visible": 0}
        config(sim, workdir, one, trigger="processingTime=100ms", extra_service=service)  # sa's
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: visible() == {"mssql_cdc_capture_health_visible": 1,
                                       "mssql_cdc_change_table_rows_visible": 1},
                 "the probe on the new connection string")
        # the change tables' row counts, named as serve names its tables
        rows = {smp.labels["capture_instance"]: smp.value for smp in metrics_samples(port)
                if smp.name == "mssql_cdc_change_table_rows"}
        assert rows == {"shop.dbo_t1": len(change_rows(sim, "shop", "dbo_t1"))}, rows
        text = open(log.name).read()
        assert "database shop: its options changed, its capture probe opens again" in text, text
    finally:
        stop_serve(proc, log)
    assert proc.returncode == 0, open(log.name).read()


def test_the_status_page_filters_sorts_and_shows_a_failed_table_without_a_reload(sim, workdir):
    make_dbs(sim, {"shop": ["t1", "t2", "t3"]})
    cs = reader(sim, "shop", ["t1", "t2", "t3"])
    # rows differ by table, so that sorting by rows is not the names' order
    write(sim, "shop", ["t1"], 1, 3)
    write(sim, "shop", ["t2"], 1, 1)
    write(sim, "shop", ["t3"], 1, 2)
    tables = [("shop", "dbo_t1"), ("shop", "dbo_t2"), ("shop", "dbo_t3")]
    path, lake = config(sim, workdir, tables, trigger="processingTime=100ms",
                        cs=lambda db: cs)
    ready = os.path.join(workdir, "port")
    proc = subprocess.Popen([CLI, "serve", "--config", path, "--metrics-listen", "127.0.0.1:0",
                             "--ready-file", ready], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    browser = None
    try:
        wait_for(lambda: os.path.exists(ready) and open(ready).read().strip(), "the listener")
        port = int(open(ready).read())
        wait_for(lambda: all(t["rows"] > 0 for t in status(port).values()), "every table's rows")
        browser = DevTools(f"http://127.0.0.1:{port}/", workdir)
        names = ["shop.dbo_t1", "shop.dbo_t2", "shop.dbo_t3"]
        wait_for(lambda: [ci for ci, _ in browser.rows()] == names, "the rows, by name")
        browser.eval("window.notReloaded = true")
        # typing into the filter narrows the rows
        browser.eval("document.getElementById('filter').focus()")
        browser.call("Input.insertText", text="t2")
        assert [ci for ci, _ in browser.rows()] == ["shop.dbo_t2"]
        browser.eval("document.getElementById('filter').select()")
        browser.call("Input.dispatchKeyEvent", type="keyDown", key="Backspace",
                     windowsVirtualKeyCode=8)
        browser.call("Input.dispatchKeyEvent", type="keyUp", key="Backspace",
                     windowsVirtualKeyCode=8)
        wait_for(lambda: len(browser.rows()) == 3, "every row back")
        # a click on the rows header sorts by rows (t2: 5, t3: 10, t1: 15), again: reversed
        browser.click('th[data-k="rows"]')
        assert [ci for ci, _ in browser.rows()] == ["shop.dbo_t2", "shop.dbo_t3", "shop.dbo_t1"]
        browser.click('th[data-k="rows"]')
        assert [ci for ci, _ in browser.rows()] == ["shop.dbo_t1", "shop.dbo_t3", "shop.dbo_t2"]
        assert all(cls == "" for _, cls in browser.rows())
        # a table stops (its grant revoked): the page shows it first, as a problem
        sim.run("REVOKE SELECT ON cdc.dbo_t3_CT FROM reader;", database="shop")
        write(sim, "shop", ["t3"], 100, 1)
        wait_for(lambda: browser.rows()[0] == ["shop.dbo_t3", "problem"], "dbo_t3 as a problem",
                 timeout=40)
        assert browser.eval("window.notReloaded") is True  # the same page, not reloaded
        text = browser.eval("document.querySelector('#rows tr').innerText")
        assert "failed" in text and "PermissionError" in text, text
        # as drawn: the problem row's cells in the problem colour, and a
        # screenshot of the page (kept in the test's directory)
        assert browser.eval("getComputedStyle(document.querySelector('#rows tr td'))"
                            ".backgroundColor") == "rgb(253, 236, 234)"
        png = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
        with open(os.path.join(workdir, "status-page.png"), "wb") as f:
            f.write(png)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR", png[:16]
        assert list(struct.unpack(">II", png[16:24])) == \
            browser.eval("[window.innerWidth, window.innerHeight]")
    finally:
        if browser:
            browser.close()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 5, err


def test_apply_and_reconcile_schedules_keep_silver_current_and_proven(sim, workdir):
    make_dbs(sim, {"shop": ["t1"]})
    write(sim, "shop", ["t1"], 1, 2)
    opts = os.path.join(workdir, "shop.conf")
    with open(opts, "w") as f:
        f.write(f"connectionString = {sim.connection_string('shop')}\n")
    os.chmod(opts, 0o600)
    lake = os.path.join(workdir, "lake")
    silver = f"{lake}/{{db}}/silver_{{ci}}"
    path, _ = config(sim, workdir, [("shop", "dbo_t1")], trigger="processingTime=100ms",
                     extra_service=f"control_table = {lake}/control", extra=(
                         # long values go on indented lines that continue them
                         f"apply = --bronze {{target}} --target {silver}\n"
                         "  --control-table {control_table} --facts-table {facts_table}\n"
                         "  --keys id --capture-instance {ci} --progress none\n"
                         "apply_every = 1\n"
                         f"reconcile = --silver {silver} --bronze {{target}}\n"
                         "  --control-table {control_table} --captureInstance {ci}\n"
                         f"  --options-file '{opts}' --progress none\n"
                         "reconcile_every = 1\n"))
    log = open(os.path.join(workdir, "serve.log"), "w+")
    proc = subprocess.Popen([CLI, "serve", "--config", path, "--log-format", "json"],
                            stdout=subprocess.DEVNULL, stderr=log, text=True)

    def silver_rows():
        p = os.path.join(lake, "shop", "silver_dbo_t1")
        if not os.path.exists(os.path.join(p, "_delta_log")):
            return None
        t = DeltaTable(p).to_pyarrow_table()
        return sorted(zip(t["id"].to_pylist(), t["v"].to_pylist()))

    def source_rows():
        return sorted(tuple(r) for r in sim.run("SELECT id, v FROM dbo.t1", database="shop"))

    def proven():
        # complete lines only: the service may be writing the last one
        for line in open(log.name).read().split("\n")[:-1]:
            entry = json.loads(line) if line.startswith("{") else {}
            msg = entry.get("message", "")
            if entry.get("table") == "shop.dbo_t1" and msg.startswith("reconcile: {"):
                result = json.loads(msg[len("reconcile: "):])
                if result.get("differs") is False and result.get("verified") is True:
                    return True
        return False
    try:
        wait_for(lambda: silver_rows() == source_rows(), "silver equal to the source")
        write(sim, "shop", ["t1"], 100, 2)
        wait_for(lambda: silver_rows() == source_rows(), "silver current again")
        wait_for(proven, "a reconcile run proving silver", timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        log.close()
        print(open(log.name).read()[-3000:])
    text = open(log.name).read()
    assert proc.returncode == 0, text
    assert '"message":"apply: done"' in text, text
    assert "Sim-Passw0rd" not in text


def test_a_backfill_schedule_publishes_the_chunked_snapshots_progress(sim, workdir):
    """backfill = EVERY FLAGS runs 'mssql-cdc backfill' of the table's chunked
    snapshot on a timer; its status becomes the table's backfill figures,
    which agree with what backfill itself says when run afterwards. Once
    done it runs no more (idle), but once after a reload and again when the
    stream opens another chunked snapshot (on a switch to a newer capture
    instance). A reload keeps the figures of the table it keeps, and of one
    that had ended (trigger once) and starts again with the same settings."""
    make_dbs(sim, {"shop": ["t1", "t2"]})
    write(sim, "shop", ["t1"], 1, 20)
    write(sim, "shop", ["t2"], 1, 2)
    path, lake = config(sim, workdir, [("shop", "dbo_t2"), ("shop", "dbo_t1")],
                        trigger="processingTime=200ms",
                        extra_service="bootstrap = true\nsnapshot = chunked\n"
                                      "snapshot_on_switch = true",
                        extra="backfill = 1 --chunk-rows 4 --max-waves 1 "
                              "--target-wave-seconds 0 --isolation snapshot\n")
    # shop.dbo_t2 reads its change table once and ends
    text = open(path).read().replace("[table shop.dbo_t2]\n",
                                     "[table shop.dbo_t2]\ntrigger = once\nbootstrap = false\n")
    with open(path, "w") as f:
        f.write(text)
    proc, log, ready = serve_listening(path, workdir)
    runs = ("mssql_cdc_schedule_runs_total", "backfill")

    def figures():
        return {(s.name, s.labels.get("schedule")): s.value for s in metrics_samples(port)
                if s.labels.get("capture_instance") == "shop.dbo_t1"
                and s.name.startswith(("mssql_cdc_backfill_", "mssql_cdc_schedule_"))}

    def rows(ci):
        return {s.labels["capture_instance"]: s.value for s in metrics_samples(port)
                if s.name == "mssql_cdc_rows_total"}.get(ci)

    def done_at(snapshot=None):
        b = status(port)["shop.dbo_t1"]["backfill"]
        return b is not None and b["done"] and b["idle"] and snapshot in (None, b["snapshot"])
    try:
        wait_for(lambda: os.path.exists(ready) and open(ready).read().strip(), "the listener")
        port = int(open(ready).read())
        # snapshot isolation is off: the runs fail, counted; the figures stay
        # as the last valid status left them (none, or a run before the
        # stream opened the snapshot: nothing read)
        wait_for(lambda: figures().get(("mssql_cdc_schedule_errors_total", "backfill"), 0) >= 1,
                 "a failed backfill run")
        before = figures()
        assert before.get(("mssql_cdc_backfill_chunks_done", None), 0) == 0, before
        assert before.get(("mssql_cdc_backfill_done", None), 0) == 0, before
        shown = status(port)["shop.dbo_t1"]["backfill"]
        assert shown is None or shown["state"] == "no_snapshot", shown
        sim.run("ALTER DATABASE shop SET ALLOW_SNAPSHOT_ISOLATION ON;", database="shop")
        wait_for(done_at, "the backfill done", timeout=90)
        first = status(port)["shop.dbo_t1"]["backfill"]["snapshot"]
        # done: it runs no more (its interval is 1 s)
        idle, rows_t1 = figures(), rows("shop.dbo_t1")
        time.sleep(2.5)
        assert figures() == idle, (idle, figures())
        t2_rows = len(change_rows(sim, "shop", "dbo_t2"))
        wait_for(lambda: status(port)["shop.dbo_t2"]["state"] == "done", "shop.dbo_t2 done")
        assert rows("shop.dbo_t2") == t2_rows
        # a reload of the same file: shop.dbo_t1 is kept, its figures go on
        # and its backfill runs once more; shop.dbo_t2 had ended and starts
        # again, its figures going on: its rows count the new ones on top
        write(sim, "shop", ["t2"], 100, 1)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: figures().get(runs) == idle[runs] + 1, "one backfill run after SIGHUP")
        wait_for(lambda: rows("shop.dbo_t2") == len(change_rows(sim, "shop", "dbo_t2")),
                 "shop.dbo_t2's rows counting on")
        assert len(change_rows(sim, "shop", "dbo_t2")) > t2_rows
        time.sleep(1.5)
        assert figures() == {**idle, runs: idle[runs] + 1}, (idle, figures())
        assert rows("shop.dbo_t1") == rows_t1 and done_at(first)
        # the stream opens another chunked snapshot (a switch to a newer
        # instance): backfill reads it at its next time, then idles again
        sim.run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't1', "
                "@role_name = NULL, @capture_instance = N'dbo_t1_v2';", database="shop")
        sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
        write(sim, "shop", ["t1"], 500, 1)
        wait_for(lambda: done_at() and not done_at(first), "the newer snapshot read in",
                 timeout=90)
        served = figures()
        shown = status(port)["shop.dbo_t1"]["backfill"]
    finally:
        stop_serve(proc, log)
    text = open(log.name).read()
    assert proc.returncode == 0, text[-3000:]
    assert "Sim-Passw0rd" not in text
    assert f"backfill: the snapshot at {first} is in; no run more" in text, text[-3000:]
    assert "backfill: the stream opened a chunked snapshot at " in text, text[-3000:]
    own = json.loads(run_cli(
        "backfill", "--captureInstance", "dbo_t1", "--connectionString",
        sim.connection_string("shop"), "--target", f"{lake}/shop/bronze_dbo_t1", "--app-id",
        "shop-dbo_t1", "--facts-table", f"{lake}/facts").stdout)
    assert own["done"] is True and own["chunks_total"] > 1, own
    assert own["snapshot"] != first, own
    assert served[("mssql_cdc_backfill_chunks_done", None)] == own["chunks_done"], served
    assert served[("mssql_cdc_backfill_chunks_total", None)] == own["chunks_total"], served
    assert served[("mssql_cdc_backfill_paused", None)] == 0, served
    # the failed runs: counted, each a warning naming the table
    assert served[("mssql_cdc_schedule_errors_total", "backfill")] >= 1, served
    assert served[runs] > served[("mssql_cdc_schedule_errors_total", "backfill")], served
    assert any(line.startswith("mssql-cdc: shop.dbo_t1: ") and
               "backfill: it failed (exit " in line for line in text.splitlines()), text
    assert shown["snapshot"] == own["snapshot"] and shown["state"] == "done", shown
    assert shown["chunks_done"] == own["chunks_done"], shown
    # each run's status is logged under the table's name
    logged = [json.loads(line.split(": backfill: ", 1)[1]) for line in text.splitlines()
              if line.startswith("mssql-cdc: shop.dbo_t1: info: backfill: {")]
    assert logged and logged[-1] == own, (logged, own)
