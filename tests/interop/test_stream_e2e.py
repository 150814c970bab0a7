"""The stream end to end: simulator -> mssql-cdc stream -> Delta tables read by
delta-rs. Exactly-once across crashes at every commit point, facts per batch,
the verdict never ahead of the data, data loss stopping the stream."""
import datetime as dt
import json
import os
import random
import shutil
import signal
import subprocess
import time

import pytest
from deltalake import DeltaTable

from conftest import CLI, run_cli

SETUP = """
CREATE DATABASE shop;
"""
TABLE = """
CREATE TABLE dbo.orders (
    order_id INT NOT NULL PRIMARY KEY,
    customer_id INT NULL,
    status NVARCHAR(20) NULL,
    amount DECIMAL(18,2) NULL,
    created_at DATETIME2(3) NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders',
     @role_name = NULL;
"""


def make_db(sim):
    sim.run(SETUP)
    sim.run(TABLE, database="shop")


def write_changes(sim, first_id, n_tx, rows_per_tx=3):
    """n_tx transactions, each an insert of rows_per_tx rows, an update and a delete."""
    for t in range(n_tx):
        base = first_id + t * rows_per_tx
        values = ",".join(
            f"({base + i}, {i % 7}, N'new-\u00e9{i}', {base + i}.25, '2025-01-0{1 + i % 9} 10:00:00')"
            for i in range(rows_per_tx))
        sim.run(f"""BEGIN TRAN;
INSERT INTO dbo.orders (order_id, customer_id, status, amount, created_at) VALUES {values};
UPDATE dbo.orders SET status = N'paid' WHERE order_id = {base};
DELETE FROM dbo.orders WHERE order_id = {base + 1};
COMMIT;""", database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def change_rows(sim):
    rows = sim.run("""SELECT CONVERT(varchar(22), __$start_lsn, 1), CONVERT(varchar(22), __$seqval, 1),
        __$operation FROM cdc.dbo_orders_CT ORDER BY 1, 2, 3""", database="shop")
    return [tuple(r) for r in rows]


def stream_args(sim, d, app_id="orders-v1", trigger="availableNow", extra=()):
    return ["stream", "--captureInstance", "dbo_orders",
            "--connectionString", sim.connection_string("shop"),
            "--target", os.path.join(d, "bronze"), "--app-id", app_id,
            "--checkpoint", os.path.join(d, "ckpt"),
            "--facts-table", os.path.join(d, "facts"),
            "--control-table", os.path.join(d, "control"),
            "--trigger", trigger, "--json", *extra]


def bronze_keys(d):
    t = DeltaTable(os.path.join(d, "bronze")).to_pyarrow_table()
    return sorted(zip(t["_start_lsn"].to_pylist(), t["_seqval"].to_pylist(),
                      t["_operation"].to_pylist()))


def facts_batches(d):
    t = DeltaTable(os.path.join(d, "facts")).to_pyarrow_table().to_pylist()
    return [r for r in t if r["event"] is None]


def verdict(d):
    rows = DeltaTable(os.path.join(d, "control")).to_pyarrow_table().to_pylist()
    return rows


def assert_exactly_once(sim, d):
    source = change_rows(sim)
    bronze = bronze_keys(d)
    assert len(bronze) == len(set(bronze)), "bronze holds a change twice"
    assert bronze == sorted(source), "bronze differs from the change table"
    batches = facts_batches(d)
    ids = [b["batch_id"] for b in batches]
    assert len(ids) == len(set(ids)), "a batch has two facts rows"
    assert sum(b["rows"] for b in batches) == len(source)
    # The verdict never claims a period whose changes are not all in bronze.
    for row in verdict(d):
        ends = [b["end_commit_ts"] for b in batches if b["end_commit_ts"] is not None]
        assert row["finalized_until"] <= max(ends)


def test_stream_reads_changes_exactly_once_and_reruns_read_nothing(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 5)
    p = run_cli(*stream_args(sim, workdir))
    assert '"batch_id":0' in p.stdout
    assert_exactly_once(sim, workdir)
    bronze = DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table()
    ops = sorted(bronze["_operation"].to_pylist())
    assert ops.count(2) == 15 and ops.count(1) == 5 and ops.count(3) == 5 and ops.count(4) == 5
    # column types as the reference maps them
    schema = {f.name: str(f.type) for f in bronze.schema}
    assert schema["amount"] == "decimal128(18, 2)"
    assert schema["_commit_ts"].startswith("timestamp[us]")
    assert schema["status"] in ("string", "large_string", "string_view")
    # a rerun with nothing new writes nothing
    before = len(facts_batches(workdir))
    run_cli(*stream_args(sim, workdir))
    assert len(facts_batches(workdir)) == before
    # new changes: exactly those are read
    write_changes(sim, 1000, 2)
    run_cli(*stream_args(sim, workdir))
    assert_exactly_once(sim, workdir)
    # DuckDB's delta extension reads the three tables as delta-rs does
    from conftest import duckdb_with_delta
    con = duckdb_with_delta()
    for name, key in (("bronze", "_start_lsn, _seqval, _operation"), ("facts", "batch_id"),
                      ("control", "table_name")):
        path = os.path.join(workdir, name)
        duck = con.execute(f"SELECT * FROM delta_scan('{path}') ORDER BY {key}").fetch_arrow_table()
        keys = [(k.strip(), "ascending") for k in key.split(",")]
        rs = DeltaTable(path).to_pyarrow_table().sort_by(keys)
        assert duck.select(rs.column_names).to_pylist() == rs.to_pylist(), name
    show = run_cli("finalization", "show", "--control-table", os.path.join(workdir, "control"),
                   "--table", os.path.join(workdir, "bronze"), "--json")
    assert "finalized_until" in show.stdout


def test_max_commits_per_batch_splits_batches(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 10, rows_per_tx=2)
    p = run_cli(*stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "3"]))
    assert p.stdout.count('"batch_id"') >= 4
    assert_exactly_once(sim, workdir)


@pytest.mark.parametrize("point", ["after_plan", "after_bronze", "after_facts", "after_commit",
                                   "during_verdict"])
def test_kill_at_each_commit_point_then_restart(sim, workdir, point):
    make_db(sim)
    write_changes(sim, 1, 4)
    p = run_cli(*stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "2"]),
                env={"MCDC_CRASH_AT": f"{point}:1"}, check=False)
    assert p.returncode == -signal.SIGKILL, p.stderr
    run_cli(*stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "2"]))
    assert_exactly_once(sim, workdir)


def test_random_kills_under_a_running_workload(sim, workdir):
    make_db(sim)
    rng = random.Random(7)
    next_id = 1
    args = stream_args(sim, workdir, trigger="processingTime=50ms",
                       extra=["--maxCommitsPerBatch", "3"])
    kills = int(os.environ.get("MCDC_RANDOM_KILLS", "30"))
    for _ in range(kills):
        write_changes(sim, next_id, 1, rows_per_tx=2)
        next_id += 2
        proc = subprocess.Popen([CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.01, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run_cli(*stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "3"]))
    assert_exactly_once(sim, workdir)


def test_sigterm_finishes_the_batch_and_exits_cleanly(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 3)
    proc = subprocess.Popen([CLI, *stream_args(sim, workdir, trigger="processingTime=100ms")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert_exactly_once(sim, workdir)


def test_latest_on_a_table_without_changes_reads_what_comes_after_the_start(sim, workdir):
    """startingLsn latest is max_lsn when the stream first plans: a change
    committed later is read by the running stream (it was skipped as "before
    latest" while no batch had committed, latest being re-read each trigger)."""
    make_db(sim)
    proc = subprocess.Popen([CLI, *stream_args(sim, workdir, trigger="processingTime=100ms",
                                               extra=["--startingLsn", "latest"])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        write_changes(sim, 1, 1)
        deadline = time.time() + 15
        # the table exists once its first commit is in the log (the directory
        # comes earlier: delta-rs refuses a log without commits)
        first = os.path.join(workdir, "bronze", "_delta_log", "00000000000000000000.json")
        while time.time() < deadline and not os.path.exists(first):
            time.sleep(0.1)
        while (time.time() < deadline and os.path.exists(first)
               and len(bronze_keys(workdir)) < len(change_rows(sim))):
            time.sleep(0.1)
        if not os.path.exists(first):
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
            raise AssertionError(f"the running stream missed them: {out[-2000:]} {err[-2000:]}")
        assert bronze_keys(workdir) == sorted(change_rows(sim)), "the running stream missed them"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert_exactly_once(sim, workdir)


def test_a_new_checkpoint_with_nothing_new_commits_one_empty_batch_0(sim, workdir):
    """As the reference (Spark runs a new checkpoint's batch 0 whatever its source
    says): batch 0 ends where it starts, reads nothing and writes its facts row (rows
    0) and no bronze commit; idle triggers after it commit nothing, and the first
    changes are batch 1, as they are there."""
    make_db(sim)
    write_changes(sim, 1, 2)
    p = run_cli(*stream_args(sim, workdir, extra=["--startingLsn", "latest"]))
    assert '"batch_id":0,"rows":0' in p.stdout, p.stdout
    rows = facts_batches(workdir)
    assert [(r["batch_id"], r["rows"], r["end_lsn"]) for r in rows] == [(0, 0, None)]
    assert not os.path.exists(os.path.join(workdir, "bronze", "_delta_log"))
    with open(os.path.join(workdir, "ckpt", "offsets", "0")) as f:
        planned = json.load(f)
    assert planned["start"]["lsn"] == planned["end"]["lsn"] == change_rows(sim)[-1][0]
    run_cli(*stream_args(sim, workdir, extra=["--startingLsn", "latest"]))
    assert len(facts_batches(workdir)) == 1
    # a running stream on another new checkpoint: one empty batch, not one per poll
    d = os.path.join(workdir, "polled")
    os.makedirs(d)
    proc = subprocess.Popen([CLI, *stream_args(sim, d, trigger="processingTime=50ms",
                                               extra=["--startingLsn", "latest"])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        assert [(r["batch_id"], r["rows"]) for r in facts_batches(d)] == [(0, 0)]
        write_changes(sim, 100, 1)
        deadline = time.time() + 15
        while time.time() < deadline and len(facts_batches(d)) < 2:
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    batches = sorted((r["batch_id"], r["rows"]) for r in facts_batches(d))
    assert batches == [(0, 0), (1, 6)], batches
    assert DeltaTable(os.path.join(d, "bronze")).transaction_version("orders-v1") == 1


def test_purged_changes_stop_the_stream_with_data_loss(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 2)
    run_cli(*stream_args(sim, workdir))
    write_changes(sim, 100, 2)
    sim.run("""DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn();
EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders',
     @low_water_mark = @m, @threshold = 5000;""", database="shop")
    p = run_cli(*stream_args(sim, workdir), check=False)
    assert p.returncode == 3, p.stderr
    assert "DataLossError" in p.stderr and "dbo_orders" in p.stderr
    assert "failOnDataLoss" in p.stderr
    # failOnDataLoss=false skips the gap and records it
    run_cli(*stream_args(sim, workdir, extra=["--failOnDataLoss", "false"]))
    facts = DeltaTable(os.path.join(workdir, "facts")).to_pyarrow_table().to_pylist()
    assert any(r["event"] == "data_skipped" for r in facts)


def test_a_dropped_connection_mid_range_is_retried_without_a_gap(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 20, rows_per_tx=5)
    sim.run("EXEC sim.fault @kind = 'drop_after_rows', @count = 7, @times = 1;")
    run_cli(*stream_args(sim, workdir))
    assert_exactly_once(sim, workdir)


def test_bad_options_fail_clearly_without_echoing_the_password(sim, workdir):
    p = run_cli("stream", "--captureInstance", "dbo_orders", "--connectionString",
                "Server=127.0.0.1,1;UID=sa;PWD=TopSecret1;", "--target", workdir + "/b",
                "--app-id", "a", "--checkpoint", workdir + "/c", "--maxCommitsPerBatch", "0",
                check=False)
    assert p.returncode == 2
    assert "maxCommitsPerBatch" in p.stderr
    assert "TopSecret1" not in p.stderr + p.stdout
    p = run_cli("stream", "--captureInstance", "dbo_orders", "--connectionString",
                f"Server=127.0.0.1,{sim.port};Database=shop;UID=sa;PWD=wrong-pw;",
                "--target", workdir + "/b", "--app-id", "a", "--checkpoint", workdir + "/c",
                "--trigger", "once", check=False)
    assert p.returncode == 13, p.stderr
    assert "18456" in p.stderr or "Login failed" in p.stderr
    assert "PermissionError" not in p.stderr
    assert "wrong-pw" not in p.stderr + p.stdout


def test_earliest_waits_until_capture_has_processed_the_enable(workdir):
    from conftest import Sim
    data = os.path.join(workdir, "sim0")
    os.makedirs(data)
    s = Sim(data, ["--capture-poll-ms", "0"])  # capture scans only on sim.run_capture
    try:
        s.run(SETUP)
        s.run(TABLE, database="shop")
        s.run("INSERT INTO dbo.orders (order_id) VALUES (1), (2);", database="shop")
        # capture has not run: min_lsn is zero, nothing can be read yet, and
        # that is no data loss
        p = run_cli(*stream_args(s, workdir))
        assert '"batch_id"' not in p.stdout
        s.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
        p = run_cli(*stream_args(s, workdir))
        assert '"batch_id":0' in p.stdout
        assert len(bronze_keys(workdir)) == 2
    finally:
        s.stop()


def test_a_deleted_checkpoint_under_the_same_app_id_is_refused(sim, workdir):
    import shutil
    make_db(sim)
    write_changes(sim, 1, 2)
    run_cli(*stream_args(sim, workdir))
    shutil.rmtree(os.path.join(workdir, "ckpt"))
    write_changes(sim, 100, 1)
    p = run_cli(*stream_args(sim, workdir), check=False)
    assert p.returncode == 9, p.stderr
    assert "deleted, rewound" in p.stderr and "new (or rebuilt) target" in p.stderr
    # a new checkpoint with a new app id and a new target is fine
    args = stream_args(sim, workdir, app_id="orders-v2")
    for flag, name in (("--checkpoint", "ckpt2"), ("--target", "bronze2"),
                       ("--facts-table", "facts2"), ("--control-table", "control2")):
        args[args.index(flag) + 1] = os.path.join(workdir, name)
    p = run_cli(*args)
    assert '"batch_id":0' in p.stdout


def test_a_refused_login_is_a_clear_error_and_the_rerun_has_no_gap(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 3)
    sim.run("EXEC sim.fault @kind = 'refuse_login', @times = 1;")
    p = run_cli(*stream_args(sim, workdir), check=False)
    assert p.returncode == 13, p.stderr
    assert "18456" in p.stderr or "Login failed" in p.stderr
    run_cli(*stream_args(sim, workdir))
    assert_exactly_once(sim, workdir)


def test_a_stalled_server_times_out_and_the_read_is_retried(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 3)
    sim.run("EXEC sim.fault @kind = 'stall', @ms = 60000, @times = 1;")
    t0 = time.monotonic()
    run_cli(*stream_args(sim, workdir, extra=["--queryTimeout", "1"]),
            env={"MCDC_RETRY_BACKOFF_MS": "50"})
    # the 60 s stall was cut short by the 1 s timeout, then read again
    assert time.monotonic() - t0 < 30
    assert_exactly_once(sim, workdir)


MAPPED_TABLE = """CREATE TABLE dbo.orders (order_id INT NOT NULL PRIMARY KEY, [Qty (kg)] INT NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL;
INSERT INTO dbo.orders VALUES (1, 2), (2, NULL);
UPDATE dbo.orders SET [Qty (kg)] = 7 WHERE order_id = 1;
EXEC sim.run_capture @ignore_latency = 1;"""

ALTER = ("ALTER TABLE delta.`{}` SET TBLPROPERTIES ('delta.columnMapping.mode'='name', "
         "'delta.minReaderVersion'='2', 'delta.minWriterVersion'='5')")


def mapped_bronze_rows(path):
    """Bronze through delta-rs' own scan (its pyarrow path refuses the
    columnMapping reader feature)."""
    from deltalake import QueryBuilder
    t = QueryBuilder().register("b", DeltaTable(path)).execute(
        'SELECT order_id, "Qty (kg)" AS qty, _operation FROM b').read_all()
    return sorted(zip(t["order_id"].to_pylist(), t["qty"].to_pylist(),
                      t["_operation"].to_pylist()), key=repr)


def test_a_column_name_that_needs_column_mapping_gets_a_mapped_bronze(sim, workdir):
    sim.run(SETUP)
    sim.run(MAPPED_TABLE, database="shop")
    run_cli(*stream_args(sim, workdir))
    bronze = os.path.join(workdir, "bronze")
    dt_ = DeltaTable(bronze)
    assert dt_.metadata().configuration.get("delta.columnMapping.mode") == "name"
    assert "Qty (kg)" in [f.name for f in dt_.schema().fields]
    # insert 1 (2), insert 2 (NULL), update 1: before (2) and after (7)
    assert mapped_bronze_rows(bronze) == sorted(
        [(1, 2, 2), (2, None, 2), (1, 2, 3), (1, 7, 4)], key=repr)
    # exactly once (assert_exactly_once reads bronze through pyarrow)
    from deltalake import QueryBuilder
    t = QueryBuilder().register("b", DeltaTable(bronze)).execute(
        "SELECT _start_lsn, _seqval, _operation FROM b").read_all()
    keys = sorted(zip(t["_start_lsn"].to_pylist(), t["_seqval"].to_pylist(),
                      t["_operation"].to_pylist()))
    assert keys == sorted(change_rows(sim))
    assert sum(b["rows"] for b in facts_batches(workdir)) == len(keys)
    # a rerun reads nothing and appends nothing
    v = DeltaTable(bronze).version()
    run_cli(*stream_args(sim, workdir))
    assert DeltaTable(bronze).version() == v


def test_an_unmapped_bronze_receiving_such_a_column_is_a_schema_change(sim, workdir):
    sim.run(SETUP)
    sim.run(MAPPED_TABLE, database="shop")
    run_cli(*stream_args(sim, workdir, extra=["--columns", "order_id INT"]))
    bronze = os.path.join(workdir, "bronze")
    assert "delta.columnMapping.mode" not in DeltaTable(bronze).metadata().configuration
    sim.run("INSERT INTO dbo.orders VALUES (3, 4); EXEC sim.run_capture @ignore_latency = 1;",
            database="shop")
    p = run_cli(*stream_args(sim, workdir), check=False)
    assert p.returncode == 4, (p.stdout, p.stderr)
    out = p.stdout + p.stderr
    assert "Qty (kg)" in out and ALTER.format(bronze) in out, out
    # the library never enables it itself
    assert "delta.columnMapping.mode" not in DeltaTable(bronze).metadata().configuration


def test_bronze_gains_columns_by_schema_evolution(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 2)
    run_cli(*stream_args(sim, workdir, extra=["--columns", "order_id INT, status STRING"]))
    first = DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table()
    assert "amount" not in first.column_names
    write_changes(sim, 100, 2)
    run_cli(*stream_args(sim, workdir))
    t = DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table()
    assert {"amount", "customer_id", "created_at"} <= set(t.column_names)
    rows = t.to_pylist()
    old = [r for r in rows if r["_batch_id"] == 0]
    new = [r for r in rows if r["_batch_id"] == 1]
    assert old and all(r["amount"] is None for r in old)
    assert any(r["amount"] is not None for r in new if r["_operation"] == 2)
    assert_exactly_once(sim, workdir)
    # the metadata columns keep their comments through the evolution
    fields = {f.name: f.metadata for f in DeltaTable(os.path.join(workdir, "bronze")).schema().fields}
    assert all(fields[c].get("comment") for c in ("_start_lsn", "_operation", "_batch_id"))


def test_tables_describe_themselves_and_their_columns(sim, workdir):
    """Every column mssql-cdc defines has a comment and each table a description, as
    the reference's tables do (the words are ours); captured columns have none."""
    make_db(sim)
    write_changes(sim, 1, 2)
    run_cli(*stream_args(sim, workdir))
    for name in ("bronze", "facts", "control"):
        dt = DeltaTable(os.path.join(workdir, name))
        assert len(dt.metadata().description or "") > 40, name
        for f in dt.schema().fields:
            captured = name == "bronze" and not f.name.startswith("_")
            assert bool(f.metadata.get("comment")) != captured, (name, f.name, f.metadata)


@pytest.mark.skipif(not os.path.exists(os.path.join(os.path.dirname(CLI), "..", "build-tsan",
                                                    "mssql-cdc")),
                    reason="build-tsan/ not built (make SAN=thread)")
def test_parallel_ranges_under_thread_sanitizer(sim, workdir):
    """Several reader threads and the writer meet in the bounded queue: TSan
    watches that the stream with four partitions has no data race."""
    tsan_cli = os.path.join(os.path.dirname(CLI), "..", "build-tsan", "mssql-cdc")
    make_db(sim)
    sim.run("EXEC sim.bulk_load @capture_instance = N'dbo_orders', @transactions = 2000, "
            "@rows_per_tx = 100, @seed = 3;", database="shop")
    args = stream_args(sim, workdir, extra=["--numPartitions", "4"])
    e = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66")
    p = subprocess.run([tsan_cli, *args], capture_output=True, text=True, env=e, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "ThreadSanitizer" not in p.stderr
    assert_exactly_once(sim, workdir)


@pytest.mark.parametrize("backend", ["freetds", "native"])
def test_both_tds_backends_stream_the_same_rows(sim, workdir, backend):
    make_db(sim)
    write_changes(sim, 1, 6)
    run_cli(*stream_args(sim, workdir, extra=["--backend", backend, "--numPartitions", "2"]))
    assert_exactly_once(sim, workdir)


@pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind not installed")
def test_the_stream_is_valgrind_clean(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 3)
    args = stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "2", "--numPartitions", "2"])
    p = subprocess.run(["valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
                        "--errors-for-leak-kinds=definite", CLI, *args],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "definitely lost" not in p.stderr and "Invalid" not in p.stderr
    assert_exactly_once(sim, workdir)


def test_a_captured_column_with_a_reserved_name_is_refused(sim, workdir):
    sim.run(SETUP)
    sim.run("""CREATE TABLE dbo.orders (order_id INT NOT NULL PRIMARY KEY, _Batch_Id INT NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL;
INSERT INTO dbo.orders VALUES (1, 2);
EXEC sim.run_capture @ignore_latency = 1;""", database="shop")
    p = run_cli(*stream_args(sim, workdir), check=False)
    assert p.returncode == 2, p.stderr
    assert "_Batch_Id" in p.stderr and "reserves" in p.stderr
    assert not os.path.exists(os.path.join(workdir, "bronze", "_delta_log"))


def test_a_verdict_left_behind_by_a_crash_catches_up_on_restart(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 2)
    p = run_cli(*stream_args(sim, workdir), env={"MCDC_CRASH_AT": "during_verdict:0"},
                check=False)
    assert p.returncode == -signal.SIGKILL
    assert not os.path.exists(os.path.join(workdir, "control", "_delta_log"))
    # nothing new to read, and still the verdict reaches the committed batch
    run_cli(*stream_args(sim, workdir))
    rows = verdict(workdir)
    batches = facts_batches(workdir)
    assert len(rows) == 1 and len(batches) == 1
    end = batches[0]["end_commit_ts"]
    assert rows[0]["finalized_until"] == end.replace(minute=0, second=0, microsecond=0)


def test_a_sql_variant_column_streams_and_columns_can_leave_it_out(sim, workdir):
    """The reference refuses sql_variant at load; here it reads as "<base type>:<value>"
    (docs/tables.md; every type: test_types_e2e.py), and a stream whose columns option
    leaves it out reads the other columns."""
    sim.run(SETUP)
    sim.run("""CREATE TABLE dbo.orders (order_id INT NOT NULL PRIMARY KEY, qty INT NULL,
    extra SQL_VARIANT NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL;
INSERT INTO dbo.orders (order_id, qty, extra) VALUES (1, 2, NULL), (3, 4, CAST(7 AS int));
EXEC sim.run_capture @ignore_latency = 1;""", database="shop")
    run_cli(*stream_args(sim, workdir))
    t = DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table().to_pylist()
    assert sorted((r["order_id"], r["extra"]) for r in t) == [(1, None), (3, "int:7")]
    left_out = os.path.join(workdir, "left-out")
    run_cli(*stream_args(sim, left_out, extra=["--columns", "order_id INT, qty INT"]))
    t = DeltaTable(os.path.join(left_out, "bronze")).to_pyarrow_table()
    assert "extra" not in t.column_names
    assert sorted(t["order_id"].to_pylist()) == [1, 3]


def test_reader_warnings_reach_the_first_batch_row(workdir):
    """Before SQL Server 2022 commit times are converted with the server's current UTC
    offset: the first batch's detail says so, with the unknown options, as the
    reference's does; later batches do not repeat them."""
    import json
    from conftest import Sim
    data = os.path.join(workdir, "sim2019")
    os.makedirs(data)
    old = Sim(data, ["--capture-poll-ms", "50", "--capture-latency-ms", "0",
                     "--version-major", "15"])
    try:
        make_db(old)
        write_changes(old, 1, 2)
        args = stream_args(old, workdir, extra=["-o", "notAnOption=1",
                                                "--maxCommitsPerBatch", "1"])
        p = run_cli(*args)
        assert "CURRENT_TIMEZONE_ID" in p.stderr
        rows = sorted(facts_batches(workdir), key=lambda r: r["batch_id"])
        first = json.loads(rows[0]["detail"])["warnings"]
        assert any("CURRENT_TIMEZONE_ID" in w for w in first), first
        assert any("notAnOption" in w for w in first), first
        assert all(r["detail"] is None for r in rows[1:]), rows[1:]
    finally:
        old.stop()
