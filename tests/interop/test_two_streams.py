"""Two streams of two tables in one process (tests/e2e/two_streams.c, public API
only): each stops on its own request, each one's warnings reach only its own
facts rows and log function, and together they never hold more connections to
the server than the budget they share.

Two processes on one checkpoint: the second stops with exit 12 naming the one
that holds it (pid, host, since when), whenever it starts; a stream killed with
SIGKILL leaves no hold behind."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

from deltalake import DeltaTable

from conftest import BUILD, CC, CLI, ROOT, link_libs, run_cli
from test_stream_e2e import assert_exactly_once, make_db, stream_args, write_changes

TABLES = """
CREATE TABLE dbo.a (id INT NOT NULL PRIMARY KEY, v NVARCHAR(40) NULL);
CREATE TABLE dbo.b (id INT NOT NULL PRIMARY KEY, v NVARCHAR(40) NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'a', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'b', @role_name = NULL;
"""


def build_program(workdir):
    exe = os.path.join(workdir, "two_streams")
    subprocess.run([*CC, "-O1", "-pthread", "-I", os.path.join(ROOT, "include"),
                    os.path.join(ROOT, "tests", "e2e", "two_streams.c"),
                    os.path.join(BUILD, "libmssqlcdc.a"), *link_libs(), "-o", exe],
                   check=True)
    return exe


def insert(sim, table, first, n):
    values = ",".join(f"({i}, N'{table}-{i}')" for i in range(first, first + n))
    sim.run(f"INSERT INTO dbo.{table} (id, v) VALUES {values};", database="shop")


def test_two_streams_in_one_process_keep_apart_and_share_the_budget(sim, workdir):
    exe = build_program(workdir)
    sim.run("CREATE DATABASE shop;")
    sim.run(TABLES, database="shop")
    cs = sim.connection_string("shop")
    lake = os.path.join(workdir, "lake")
    # a has a position already; then changes it has not read are purged, so
    # its next batch (failOnDataLoss=false) skips them with a warning
    insert(sim, "a", 1, 3)
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    run_cli("stream", "--captureInstance", "dbo_a", "--connectionString", cs,
            "--target", os.path.join(lake, "bronze_a"), "--app-id", "a",
            "--checkpoint", os.path.join(lake, "ckpt_a"),
            "--facts-table", os.path.join(lake, "facts"), "--trigger", "availableNow")
    insert(sim, "a", 100, 3)
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    sim.run("""DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn();
EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_a',
     @low_water_mark = @m, @threshold = 5000;""", database="shop")
    # enough change rows that each stream's first batch reads several ranges
    for ci in ("dbo_a", "dbo_b"):
        sim.run(f"EXEC sim.bulk_load @capture_instance = N'{ci}', @transactions = 2000, "
                "@rows_per_tx = 100, @seed = 3;", database="shop")
    stop = threading.Event()

    def workload():
        i = 1000
        while not stop.is_set():
            insert(sim, "a", i, 2)
            insert(sim, "b", i, 2)
            sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
            i += 2
            time.sleep(0.05)

    def run(lake_dir, budget):
        p = subprocess.run([exe, cs, lake_dir, str(sim.port), str(budget)],
                           capture_output=True, text=True, timeout=240)
        assert p.returncode == 0, p.stderr
        out = dict(line.split(": ", 1) for line in p.stdout.splitlines())
        assert out["a_rc"] == "0" and out["b_rc"] == "0", p.stdout
        return out, p

    w = threading.Thread(target=workload)
    w.start()
    try:
        out, p = run(lake, 3)
        # the same two streams on a new lake without a budget: the sampler sees
        # more connections at once (both read several ranges in parallel)
        unlimited, _ = run(os.path.join(workdir, "lake2"), 0)
    finally:
        stop.set()
        w.join()
    assert int(out["a_batches"]) >= 3 and int(out["b_batches"]) >= 3, p.stdout
    # a stopped on its own request while b went on
    assert out["b_running_when_a_stopped"] == "1", p.stdout
    assert int(out["b_batches_after_a_stopped"]) >= 2, p.stdout
    # never more connections than the budget (two control connections and the
    # readers sharing what is left); without it, more
    assert 2 <= int(out["peak_connections"]) <= 3, p.stdout
    assert int(unlimited["peak_connections"]) > 3, unlimited
    # the warning reached a's log function and facts rows only
    assert int(out["a_log_lines"]) >= 1 and out["a_foreign_lines"] == "0", p.stdout + p.stderr
    assert out["b_log_lines"] == "0", p.stderr
    facts = DeltaTable(os.path.join(lake, "facts")).to_pyarrow_table().to_pylist()
    mine = [r for r in facts if r["app_id"] == "a"]
    theirs = [r for r in facts if r["app_id"] == "b"]
    assert any(r["event"] == "data_skipped" for r in mine)
    warned = [r for r in mine if r["event"] is None and r["detail"]]
    assert warned and all("dbo_a" in w for r in warned
                          for w in json.loads(r["detail"])["warnings"])
    assert theirs and all(r["detail"] is None and r["event"] is None for r in theirs)
    # b's bronze holds b's changes once each, and only b's
    bronze_b = DeltaTable(os.path.join(lake, "bronze_b")).to_pyarrow_table()
    keys = list(zip(bronze_b["_start_lsn"].to_pylist(), bronze_b["_seqval"].to_pylist(),
                    bronze_b["_operation"].to_pylist()))
    assert len(keys) == len(set(keys)) and len(keys) >= 200000
    assert set(bronze_b["_capture_instance"].to_pylist()) == {"dbo_b"}


def first_batch_seen(proc, workdir, timeout=30):
    """Waits until the running stream proc has committed a batch."""
    commits = os.path.join(workdir, "ckpt", "commits")
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if os.path.isdir(commits) and os.listdir(commits):
            return
        time.sleep(0.05)
    raise AssertionError(f"no batch committed: {proc.poll()}")


def test_a_second_process_on_a_running_streams_checkpoint_exits_12_naming_it(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 3)
    running = subprocess.Popen([CLI, *stream_args(sim, workdir, trigger="processingTime=100ms")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        first_batch_seen(running, workdir)
        write_changes(sim, 100, 2)
        second = run_cli(*stream_args(sim, workdir), check=False)
        assert second.returncode == 12, second.stderr
        err = second.stderr
        assert "another process is running on checkpoint" in err, err
        assert os.path.join(workdir, "ckpt") in err, err
        assert f"pid {running.pid} " in err and socket.gethostname() in err, err
        assert "since" in err, err
    finally:
        # killed as a crash would: the kernel drops its hold with it
        running.send_signal(signal.SIGKILL)
        running.wait()
    write_changes(sim, 200, 2)
    after = run_cli(*stream_args(sim, workdir))
    assert after.returncode == 0, after.stderr
    assert_exactly_once(sim, workdir)


def test_two_processes_started_at_once_on_one_checkpoint(sim, workdir):
    """Started together, whatever the interleaving: one streams, the other
    stops with exit 12, and bronze holds every change once."""
    make_db(sim)
    sim.run("EXEC sim.bulk_load @capture_instance = N'dbo_orders', @transactions = 1500, "
            "@rows_per_tx = 20, @seed = 5;", database="shop")
    for trial, stagger in enumerate((0.0, 0.05, 0.2)):
        d = os.path.join(workdir, f"t{trial}")
        os.makedirs(d)
        args = stream_args(sim, d, extra=["--maxCommitsPerBatch", "40"])
        procs = [subprocess.Popen([CLI, *args], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)]
        time.sleep(stagger)
        procs.append(subprocess.Popen([CLI, *args], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
        results = [(p.wait(timeout=240), p.stderr.read()) for p in procs]
        codes = sorted(rc for rc, _ in results)
        assert codes == [0, 12], results
        loser = next(err for rc, err in results if rc == 12)
        assert "another process is running on checkpoint" in loser, loser
        assert "restore" not in loser and "start over" not in loser, loser
        assert_exactly_once(sim, d)
