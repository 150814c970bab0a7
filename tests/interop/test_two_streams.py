"""Two streams of two tables in one process (tests/e2e/two_streams.c, public API
only): each stops on its own request, each one's warnings reach only its own
facts rows and log function, and together they never hold more connections to
the server than the budget they share."""
import json
import os
import subprocess
import threading
import time

from deltalake import DeltaTable

from conftest import BUILD, CC, ROOT, link_libs, run_cli

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
