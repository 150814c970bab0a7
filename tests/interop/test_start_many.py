"""mssql-cdc start-many: a stream per capture instance in one process, on one
budget, sharing one facts table. Every bronze equals its change table, a
rerun resumes each from its checkpoint, one table's error stops that table
only, bad inputs are refused before anything is written, and SIGTERM stops
every stream after its batch."""
import json
import os
import signal
import subprocess
import threading
import time

import pytest
from deltalake import DeltaTable

from conftest import CLI, run_cli

DB = "shop"
TABLES = [f"t{i}" for i in range(1, 6)]
INSTANCES = [f"dbo_{t}" for t in TABLES]
READER_PASSWORD = "Reader_Passw0rd1"


def make_db(sim):
    sim.run(f"CREATE DATABASE {DB};")
    sql = "".join(f"CREATE TABLE dbo.{t} (id INT NOT NULL PRIMARY KEY, v NVARCHAR(40) NULL);"
                  for t in TABLES)
    sql += "EXEC sys.sp_cdc_enable_db;"
    sql += "".join(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{t}',"
                   " @role_name = NULL;" for t in TABLES)
    sim.run(sql, database=DB)


def reader(sim, database=DB, tables=TABLES, login=True):
    """A login that may read every table and change table of database (no
    VIEW DATABASE STATE), created unless login is False (a second database
    gives the login its user); its connection string."""
    grants = "".join(f"GRANT SELECT ON dbo.{t} TO reader; GRANT SELECT ON cdc.dbo_{t}_CT TO reader;"
                     for t in tables)
    if login:
        sim.run(f"CREATE LOGIN reader WITH PASSWORD = '{READER_PASSWORD}';")
    sim.run(f"CREATE USER reader FOR LOGIN reader; {grants}", database=database)
    return sim.connection_string(database, user="reader", password=READER_PASSWORD)


def write(sim, tables, first, n, database=DB):
    """n transactions on each table: an insert of two rows, an update, a delete."""
    for t in tables:
        for k in range(n):
            i = first + 2 * k
            sim.run(f"BEGIN TRAN; INSERT INTO dbo.{t} (id, v) VALUES ({i}, N'{t}-{i}'), "
                    f"({i + 1}, N'{t}-{i + 1}'); UPDATE dbo.{t} SET v = N'upd' WHERE id = {i}; "
                    f"DELETE FROM dbo.{t} WHERE id = {i + 1}; COMMIT;", database=database)
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database=database)


def change_rows(sim, ci, database=DB):
    rows = sim.run(f"SELECT CONVERT(varchar(22), __$start_lsn, 1), "
                   f"CONVERT(varchar(22), __$seqval, 1), __$operation FROM cdc.{ci}_CT",
                   database=database)
    return sorted(tuple(r) for r in rows)


def bronze_keys(lake, ci):
    t = DeltaTable(os.path.join(lake, f"bronze_{ci}")).to_pyarrow_table()
    return sorted(zip(t["_start_lsn"].to_pylist(), t["_seqval"].to_pylist(),
                      t["_operation"].to_pylist()))


def facts(lake):
    return DeltaTable(os.path.join(lake, "facts")).to_pyarrow_table().to_pylist()


def many_args(sim, lake, instances=INSTANCES, trigger="availableNow", cs=None, extra=()):
    return ["start-many", "--connectionString", cs or sim.connection_string(DB),
            "--capture-instances", ",".join(instances),
            "--target", os.path.join(lake, "bronze_{ci}"), "--app-id", "{ci}-v1",
            "--checkpoint", os.path.join(lake, "ckpt", "{ci}"),
            "--facts-table", os.path.join(lake, "facts"), "--trigger", trigger, *extra]


def assert_exactly_once(sim, lake, instances):
    rows = facts(lake)
    for ci in instances:
        source = change_rows(sim, ci)
        bronze = bronze_keys(lake, ci)
        assert len(bronze) == len(set(bronze)), f"{ci}: bronze holds a change twice"
        assert bronze == source, f"{ci}: bronze differs from its change table"
        mine = [r for r in rows if r["app_id"] == f"{ci}-v1" and r["event"] is None]
        ids = [r["batch_id"] for r in mine]
        assert len(ids) == len(set(ids)), f"{ci}: a batch has two facts rows"
        assert sorted(ids) == list(range(len(ids))), f"{ci}: batch ids {ids}"
        assert sum(r["rows"] for r in mine) == len(source), ci


def test_five_tables_catch_up_in_one_process_and_a_rerun_resumes(sim, workdir):
    make_db(sim)
    write(sim, TABLES, 1, 3)
    lake = os.path.join(workdir, "lake")
    p = run_cli(*many_args(sim, lake, extra=("--json",)))
    result = json.loads(p.stdout)
    assert result["errors"] == {}
    assert [t["capture_instance"] for t in result["tables"]] == INSTANCES
    assert all(t["state"] == "done" and t["batches"] >= 1 for t in result["tables"])
    n = len(change_rows(sim, "dbo_t1"))
    assert n == 15 and all(t["rows"] == n for t in result["tables"]), result
    # every batch line names its table
    for ci in INSTANCES:
        assert f"{ci}: batch 0:" in p.stderr, p.stderr
        assert f"  {ci}: 1 batches, {n} rows, done" in p.stderr, p.stderr
    assert_exactly_once(sim, lake, INSTANCES)
    # five streams appended to the one facts table, each under its own txn
    log = DeltaTable(os.path.join(lake, "facts")).history()
    txns = [c for c in log if c.get("operation") == "WRITE"]
    assert len(txns) >= 5
    # a rerun resumes every table: the new changes once, nothing doubled
    write(sim, TABLES[:2], 100, 2)
    p = run_cli(*many_args(sim, lake, extra=("--json", "-o", "metricsPath=/nowhere")))
    # the library's messages name their table, each from its own stream's log function
    for ci in INSTANCES:
        assert f"mssql-cdc: {ci}: warning: " in p.stderr and "metricsPath" in p.stderr, p.stderr
    again = {t["capture_instance"]: t for t in json.loads(p.stdout)["tables"]}
    assert again["dbo_t1"]["rows"] == 10 and again["dbo_t2"]["rows"] == 10, again
    assert all(again[ci]["rows"] == 0 for ci in INSTANCES[2:]), again
    assert_exactly_once(sim, lake, INSTANCES)


@pytest.mark.parametrize("revoked", ["change-table", "both"])
def test_a_lost_grant_stops_that_table_only(sim, workdir, revoked):
    """Without SELECT on its change table the instance is still listed;
    without SELECT on its source table too it is not, and the source says it
    exists all the same: neither is refused as unknown, both stop alone."""
    make_db(sim)
    cs = reader(sim)
    write(sim, TABLES, 1, 2)
    lake = os.path.join(workdir, "lake")
    run_cli(*many_args(sim, lake, cs=cs))
    sim.run("REVOKE SELECT ON cdc.dbo_t3_CT FROM reader;", database=DB)
    if revoked == "both":
        sim.run("REVOKE SELECT ON dbo.t3 FROM reader;", database=DB)
    write(sim, TABLES, 100, 2)
    p = run_cli(*many_args(sim, lake, cs=cs, extra=("--json",)), check=False)
    assert p.returncode == 5, p.stderr
    hidden = "dbo_t3: warning: this login may not read its change table"
    assert (hidden in p.stderr) == (revoked == "both"), p.stderr
    result = json.loads(p.stdout)
    assert list(result["errors"]) == ["dbo_t3"], result
    assert result["errors"]["dbo_t3"]["kind"] == "PermissionError"
    assert result["errors"]["dbo_t3"]["exit_code"] == 5
    assert "GRANT SELECT ON cdc.[dbo_t3_CT]" in result["errors"]["dbo_t3"]["message"]
    assert "dbo_t3: 1 batches" not in p.stderr and "failed (PermissionError, exit 5)" in p.stderr
    others = [ci for ci in INSTANCES if ci != "dbo_t3"]
    assert all(t["state"] == "done" for t in result["tables"] if t["capture_instance"] in others)
    assert_exactly_once(sim, lake, others)
    # the grant back, a rerun brings t3 up to date too
    sim.run("GRANT SELECT ON cdc.dbo_t3_CT TO reader; GRANT SELECT ON dbo.t3 TO reader;",
            database=DB)
    run_cli(*many_args(sim, lake, cs=cs))
    assert_exactly_once(sim, lake, INSTANCES)


def bad_file(workdir, text):
    path = os.path.join(workdir, "instances.json")
    with open(path, "w") as f:
        f.write(text)
    return path


@pytest.mark.parametrize("case", ["no-ci", "one-target", "twice", "unknown", "bad-json",
                                  "bad-options", "unknown-option"])
def test_bad_inputs_are_refused_before_anything_is_written(sim, workdir, case):
    make_db(sim)
    lake = os.path.join(workdir, "lake")
    args = many_args(sim, lake)
    if case == "no-ci":
        args[args.index("--app-id") + 1] = "orders-v1"
        want = "--app-id 'orders-v1' must contain {ci}"
    elif case == "one-target":
        args[args.index("--target") + 1] = os.path.join(lake, "x", "{ci}", "..", "bronze")
        want = "would both write to " + os.path.join(lake, "x", "bronze")
    elif case == "twice":
        args[args.index("--capture-instances") + 1] = "dbo_t1,dbo_t2,DBO_T1"
        want = "'DBO_T1' is listed twice"
    elif case == "unknown":
        args[args.index("--capture-instances") + 1] = "dbo_t1,dbo_nope"
        want = "the source has no capture instance 'dbo_nope'"
    else:
        text = {"bad-json": '{"dbo_t1": {},\n "dbo_t2": {"numPartitions": 2,}}',
                "bad-options": '{"dbo_t1": {}, "dbo_t2": [1]}',
                "unknown-option": '{"dbo_t1": {"numPartition": 2}}'}[case]
        want = {"bad-json": "line 2", "bad-options": "'dbo_t2': its options must be a JSON object",
                "unknown-option": "'dbo_t1': 'numPartition' is no source option"}[case]
        i = args.index("--capture-instances")
        args[i:i + 2] = ["--capture-instances-file", bad_file(workdir, text)]
    p = run_cli(*args, check=False)
    assert p.returncode == 2, p.stderr
    assert want in p.stderr, p.stderr
    assert not os.path.exists(lake), os.listdir(lake)


def test_per_table_options_from_the_file(sim, workdir):
    make_db(sim)
    write(sim, TABLES[:2], 1, 4)
    lake = os.path.join(workdir, "lake")
    path = bad_file(workdir, json.dumps({"dbo_t1": {"maxCommitsPerBatch": 1},
                                         "dbo_t2": {"columns": "id INT"}}))
    args = many_args(sim, lake, extra=("--json",))
    i = args.index("--capture-instances")
    args[i:i + 2] = ["--capture-instances-file", path]
    p = run_cli(*args)
    tables = {t["capture_instance"]: t for t in json.loads(p.stdout)["tables"]}
    # maxCommitsPerBatch counts the database's commits (both tables' 8)
    assert tables["dbo_t1"]["batches"] >= 4 and tables["dbo_t2"]["batches"] == 1, tables
    cols = DeltaTable(os.path.join(lake, "bronze_dbo_t2")).to_pyarrow_table().column_names
    assert "id" in cols and "v" not in cols
    assert "v" in DeltaTable(os.path.join(lake, "bronze_dbo_t1")).to_pyarrow_table().column_names


def test_sigterm_stops_every_stream_after_its_batch_and_a_rerun_continues_once(sim, workdir):
    make_db(sim)
    write(sim, TABLES, 1, 2)
    lake = os.path.join(workdir, "lake")
    stop = threading.Event()

    def workload():
        i = 1000
        while not stop.is_set():
            write(sim, TABLES, i, 1)
            i += 2
            time.sleep(0.05)

    w = threading.Thread(target=workload)
    w.start()
    proc = subprocess.Popen([CLI, *many_args(sim, lake, trigger="processingTime=100ms",
                                             extra=("--json",))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        stop.set()
        w.join()
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["errors"] == {}
    assert all(t["state"] == "stopped" and t["batches"] >= 2 for t in result["tables"]), result
    assert "every stream finishes its batch and stops" in err
    write(sim, TABLES, 5000, 1)
    run_cli(*many_args(sim, lake))
    assert_exactly_once(sim, lake, INSTANCES)


def test_a_grant_revoked_mid_run_stops_that_table_while_the_others_keep_up(sim, workdir):
    make_db(sim)
    cs = reader(sim)
    write(sim, TABLES, 1, 1)
    lake = os.path.join(workdir, "lake")
    proc = subprocess.Popen([CLI, *many_args(sim, lake, cs=cs, trigger="processingTime=100ms",
                                             extra=("--json",))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        sim.run("REVOKE SELECT ON cdc.dbo_t3_CT FROM reader;", database=DB)
        for k in range(6):  # t3 fails on its next read; the others keep committing
            write(sim, TABLES, 100 + 2 * k, 1)
            time.sleep(0.3)
        others = [ci for ci in INSTANCES if ci != "dbo_t3"]
        deadline = time.time() + 30
        while time.time() < deadline and any(
                bronze_keys(lake, ci) != change_rows(sim, ci) for ci in others):
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 5, err
    result = json.loads(out)
    assert list(result["errors"]) == ["dbo_t3"] and \
        result["errors"]["dbo_t3"]["kind"] == "PermissionError", result
    states = {t["capture_instance"]: t["state"] for t in result["tables"]}
    assert states == {**{ci: "stopped" for ci in INSTANCES}, "dbo_t3": "failed"}, states
    assert_exactly_once(sim, lake, others)  # every change, the last ones too


def test_progress_names_each_tables_snapshot(sim, workdir):
    """--progress json: each table's bootstrap snapshot reports as the other
    commands' do, its line naming the table; none for a table's readiness."""
    make_db(sim)
    write(sim, TABLES[:3], 1, 2)
    lake = os.path.join(workdir, "lake")
    p = run_cli(*many_args(sim, lake, instances=INSTANCES[:3],
                           extra=("--bootstrap", "--progress", "json")),
                env={"MCDC_PROGRESS_JSON_MS": "1"})
    lines = [json.loads(line) for line in p.stderr.splitlines() if line.startswith('{"table"')]
    assert {r["table"] for r in lines} == set(INSTANCES[:3]), p.stderr
    assert all(r["progress"]["job"] == "snapshot" for r in lines), lines
    for ci in INSTANCES[:3]:
        ends = [r for r in lines if r["table"] == ci and r["progress"]["done"]]
        assert ends and ends[-1]["progress"]["rows"] == 2, (ci, ends)
    p = run_cli(*many_args(sim, lake, instances=INSTANCES[:3], extra=("--progress", "none")))
    assert '"progress"' not in p.stderr
    p = run_cli(*many_args(sim, lake, instances=INSTANCES[:1], extra=("--progress", "loud")),
                check=False)
    assert p.returncode == 2 and "--progress: expected auto, line, json or none" in p.stderr
