"""Chunked snapshots: `stream --bootstrap --snapshot chunked` opens one at S
and streams from S at once; `mssql-cdc backfill` reads it in waves next to
the stream (reference §2.4.2). The plans table, the facts rows and bronze's
rows agree; the table rebuilt from bronze equals the source."""
import json
import os
import signal

import pytest
from deltalake import DeltaTable

from conftest import run_cli
from test_snapshot import insert, make_db, rebuild, rebuild_duckdb, source_rows, stream_args

CHUNKED = ("--bootstrap", "--snapshot", "chunked")


def backfill_args(sim, d, *extra):
    return ["backfill", "--captureInstance", "dbo_orders",
            "--connectionString", sim.connection_string("shop"),
            "--target", os.path.join(d, "bronze"), "--app-id", "orders-v1",
            "--facts-table", os.path.join(d, "facts"), "--numPartitions", "2", *extra]


def backfill(sim, d, *extra, check=True, env=None):
    p = run_cli(*backfill_args(sim, d, *extra), check=False, env=env)
    if check:
        assert p.returncode in (0, 14), p.stderr
    status = json.loads(p.stdout) if p.stdout.strip() else None
    return p, status


def table(d, name):
    path = os.path.join(d, name)
    return DeltaTable(path).to_pyarrow_table().to_pylist() if os.path.exists(path) else []


def workload_step(sim, i):
    insert(sim, 100000 + i * 10, 3)
    sim.run(f"""UPDATE dbo.orders SET status = N'w{i}', amount = amount + 1 WHERE order_id % 11 = {i % 11};
DELETE FROM dbo.orders WHERE order_id = {20 + i * 7};
UPDATE dbo.orders SET order_id = order_id + 900000 WHERE order_id = {21 + i * 7};""",
            database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def check_chunks_agree(d):
    """Every chunk once in bronze, counted as its facts row says, stamped at
    or after S; the plans table holds the bounds the facts rows leave out."""
    facts = table(d, "facts")
    opens = [r for r in facts if r["event"] == "snapshot_open"]
    s = max(r["min_lsn"] for r in opens)
    chunks = [r for r in facts if r["event"] == "snapshot_chunk"]
    details = [json.loads(r["detail"]) for r in chunks]
    assert all("lo" not in x and "hi" not in x for x in details)
    ids = [x["chunk"] for x in details]
    assert len(ids) == len(set(ids)), "a chunk has two facts rows"
    bronze = [r for r in table(d, "bronze") if r["_operation"] == 0 and r["_snapshot"] == s]
    per_chunk = {}
    for r in bronze:
        per_chunk[r["_chunk"]] = per_chunk.get(r["_chunk"], 0) + 1
        assert r["_start_lsn"] >= s
    for x, r in zip(details, chunks):
        assert per_chunk.get(x["chunk"], 0) == r["rows"], (x, r["rows"], per_chunk)
        assert r["min_lsn"] >= s
    keys = [r["order_id"] for r in bronze]
    assert len(keys) == len(set(keys)), "a key was read twice into bronze"
    plans = [r for r in table(d, "bronze_snapshot_plans") if r["snapshot"] == s]
    plan_rows = [json.loads(r["detail"]) for r in plans if r["event"] == "snapshot_chunk"]
    assert sorted(p["chunk"] for p in plan_rows) == sorted(ids)
    return s, chunks


def test_chunked_bootstrap_then_backfill_in_waves_rebuilds_the_source(sim, workdir):
    make_db(sim, before_cdc=1500)
    p = run_cli(*stream_args(sim, workdir, *CHUNKED))
    facts = table(workdir, "facts")
    opens = [r for r in facts if r["event"] == "snapshot_open"]
    assert len(opens) == 1 and json.loads(opens[0]["detail"]) == {
        "mode": "chunked", "kind": "bootstrap", "generation": 0, "lost_from_ts": None,
        "lost_to_ts": None}
    s = opens[0]["min_lsn"]
    # nothing of the table read yet; the stream started at S
    assert not any(r["_operation"] == 0 for r in table(workdir, "bronze"))
    plans = table(workdir, "bronze_snapshot_plans")
    opened = [json.loads(r["detail"]) for r in plans if r["event"] == "snapshot_open"]
    assert opened[0]["keys"] == ["order_id"] and opened[0]["plan"]["kind"] == "int"
    assert opened[0]["plan"]["lo"] == 1 and opened[0]["plan"]["hi"] == 1500
    # waves, one at a time, with the stream running between them
    p, st = backfill(sim, workdir, "--chunk-rows", "200", "--max-waves", "1")
    assert p.returncode == 14 and st["state"] == "running" and not st["done"], st
    assert st["snapshot"] == s and st["chunks_done"] == 2 and st["chunks_total"] >= 8, st
    plan = [json.loads(r["detail"]) for r in table(workdir, "facts") if r["event"] == "snapshot_plan"]
    assert len(plan) == 1 and "chunks" not in plan[0] and plan[0]["chunk_rows"] == 200
    whole = [json.loads(r["detail"]) for r in table(workdir, "bronze_snapshot_plans")
             if r["event"] == "snapshot_plan"][0]
    assert whole["chunk_count"] == len(whole["chunks"]) == st["chunks_total"]
    assert whole["chunks"][0][0] is None and whole["chunks"][-1][1] == 1501
    for a, b in zip(whole["chunks"], whole["chunks"][1:]):
        assert a[1] == b[0], "the chunks do not tile the key"
    # while it is open, the documented rebuild ignores its rows: no snapshot yet
    assert rebuild_duckdb(os.path.join(workdir, "bronze")) == []
    for i in range(6):
        workload_step(sim, i)
        run_cli(*stream_args(sim, workdir))
        p, st = backfill(sim, workdir, "--max-waves", "1", "--chunk-rows", "999")
        assert "ignored" in p.stderr or i > 0  # another chunk_rows: warned about once at least
        if st["done"]:
            break
    while not st["done"]:
        p, st = backfill(sim, workdir)
    assert p.returncode == 0 and st["state"] == "done" and st["chunks_done"] == st["chunks_total"]
    boots = [r for r in table(workdir, "facts") if r["event"] == "bootstrap"]
    assert len(boots) == 1 and boots[0]["max_lsn"] == s and boots[0]["min_lsn"] == s
    detail = json.loads(boots[0]["detail"])
    assert detail["snapshot"] == s and detail["chunks"] == st["chunks_total"]
    s2, chunks = check_chunks_agree(workdir)
    assert s2 == s and detail["rows"] == sum(r["rows"] for r in chunks)
    workload_step(sim, 99)
    run_cli(*stream_args(sim, workdir))
    assert rebuild(os.path.join(workdir, "bronze")) == source_rows(sim)
    assert rebuild_duckdb(os.path.join(workdir, "bronze")) == source_rows(sim)
    # done is done: a rerun reads nothing
    before = len(table(workdir, "bronze"))
    p, st = backfill(sim, workdir)
    assert p.returncode == 0 and st["done"] and len(table(workdir, "bronze")) == before


def test_backfill_states_and_bad_input(sim, workdir):
    make_db(sim, before_cdc=50)
    p, st = backfill(sim, workdir, check=False)
    assert p.returncode == 17 and st["state"] == "no_snapshot" and st["snapshot"] is None, p.stderr
    assert st["chunks_total"] is None and st["paused"]
    p = run_cli(*backfill_args(sim, workdir, "--chunk-rows", "0"), check=False)
    assert p.returncode == 2 and "--chunk-rows" in p.stderr
    p = run_cli(*backfill_args(sim, workdir, "--isolation", "dirty"), check=False)
    assert p.returncode == 2 and "snapshot or readCommitted" in p.stderr
    p = run_cli("backfill", "--target", "x", check=False)
    assert p.returncode == 2 and "--app-id" in p.stderr
    run_cli(*stream_args(sim, workdir, *CHUNKED))
    # headroom: the stream has written no batch row yet
    p, st = backfill(sim, workdir, "--min-headroom-hours", "1", check=False)
    assert p.returncode == 16 and st["state"] == "waiting_metrics" and st["paused"], p.stderr
    # a stream batch with a headroom far below the minimum (once cleanup
    # moved min_lsn off the new instance's start LSN, which is no commit:
    # until then no headroom is known, docs/tables.md)
    workload_step(sim, 0)
    run_cli(*stream_args(sim, workdir))
    sim.run("""DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn();
EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders',
     @low_water_mark = @m, @threshold = 5000;""", database="shop")
    workload_step(sim, 1)
    run_cli(*stream_args(sim, workdir))
    p, st = backfill(sim, workdir, "--min-headroom-hours", "100000", check=False)
    assert p.returncode == 15 and st["state"] == "waiting_headroom" and "below" in st["reason"]
    assert st["chunks_total"] is None  # nothing planned while paused
    # a full snapshot of the stream is refused while the chunked one is open
    p = run_cli("snapshot", "--captureInstance", "dbo_orders", "--connectionString",
                sim.connection_string("shop"), "--target", os.path.join(workdir, "bronze"),
                "--app-id", "orders-v1", "--facts-table", os.path.join(workdir, "facts"),
                check=False)
    assert p.returncode == 18 and "chunked snapshot open" in p.stderr, p.stderr
    # snapshotKeys other than the ones it opened with
    p = run_cli(*backfill_args(sim, workdir, "--snapshotKeys", '["customer_id"]'), check=False)
    assert p.returncode == 2 and "cuts its chunks on" in p.stderr, p.stderr
    p, st = backfill(sim, workdir, "--chunk-rows", "20")
    while not st["done"]:
        p, st = backfill(sim, workdir)
    check_chunks_agree(workdir)


@pytest.mark.parametrize("point", ["after_snapshot_plan_rows", "after_plan:1", "after_bronze:1",
                                   "after_facts:1", "during_wave:1", "before_completion"])
def test_killed_at_each_wave_point_nothing_twice_nothing_skipped(sim, workdir, point):
    make_db(sim, before_cdc=400)
    run_cli(*stream_args(sim, workdir, *CHUNKED))
    p, st = backfill(sim, workdir, "--chunk-rows", "60", "--target-wave-seconds", "0",
                     "--arrowBatchSize", "7", env={"MCDC_CRASH_AT": point}, check=False)
    assert p.returncode == -signal.SIGKILL, p.stderr
    workload_step(sim, 3)
    run_cli(*stream_args(sim, workdir))
    while True:
        p, st = backfill(sim, workdir, "--target-wave-seconds", "0")
        if st["done"]:
            break
    check_chunks_agree(workdir)
    assert [r["event"] for r in table(workdir, "facts")].count("bootstrap") == 1
    assert [r["event"] for r in table(workdir, "facts")].count("snapshot_plan") == 1
    run_cli(*stream_args(sim, workdir))
    assert rebuild(os.path.join(workdir, "bronze")) == source_rows(sim)
