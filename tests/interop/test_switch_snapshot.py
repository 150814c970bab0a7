"""Snapshot on switch (reference snapshot_on_switch, §2.5, ADR 0023): after
the batch that first reads a newer capture instance, the table is snapshotted
so that rows unchanged since carry the column only the newer instance
captures. Full reads the whole table into bronze (snapshot_open with
switch_batch_id, the rows, a bootstrap row); chunked opens one at the newer
instance's start LSN S for backfill, superseding one still open. With a
workload writing the whole time; kill -9 before, inside and after the
snapshot leaves the same result after a restart, nothing read twice. Apply
then gives silver equal to the source, the new column included."""
import json
import os
import signal
import subprocess
from types import SimpleNamespace

import pyarrow as pa
import pytest

from apply_jobs import apply, assert_silver_equals_source
from conftest import CLI, run_cli
from snapshot_jobs import status_of
from test_schema_changes import (V2, Orders, args, assert_bronze_is, bronze, ct_rows, enable_v2,
                                 events, facts, make_table, running)  # noqa: F401 - a fixture
from workload import DB, Workload

# bronze's change rows carry the newer instance's name from S; the
# snapshot's rows the configured one's, as the stream's bootstrap does
CONFIGURED = "dbo_orders"
REGION = "set-before-switch"
QUIET = range(9001, 9021)


def setup_switch(sim, d, running, stream_extra=(), seed=31, preload=60):
    """The table, a workload writing the whole time, one stream run on the
    older instance, then the column added and filled (the older instance does
    not capture it: only a snapshot brings these values to bronze) and the
    newer instance enabled. Returns (workload, spec, S)."""
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=seed, pace=0.005)
    w.preload(preload)
    running.append(w.start())
    w.wait_for(10)
    run_cli(*args(sim, d, extra=stream_extra))
    sim.run("ALTER TABLE dbo.orders ADD region NVARCHAR(20) NULL;", database=DB)
    spec.add(("region", "NVARCHAR(20) NULL", pa.string()))
    # rows the workload never touches (its keys stay below 5001): from here
    # on only a snapshot can bring their region to bronze
    sim.run("INSERT INTO dbo.orders (order_id, status, amount, qty) VALUES "
            + ", ".join(f"({k}, N'quiet', 1.00, 1)" for k in QUIET) + ";", database=DB)
    sim.run(f"UPDATE dbo.orders SET region = N'{REGION}';", database=DB)
    w.wait_for(5)
    s = enable_v2(sim)
    w.wait_for(10)
    return w, spec, s


def job_of(sim, d, spec):
    return SimpleNamespace(sim=sim, spec=spec, dir=d, bronze=os.path.join(d, "bronze"),
                           facts=os.path.join(d, "facts"), control=os.path.join(d, "control"))


def switch_stream(sim, d, mode, env=None, check=True):
    return run_cli(*args(sim, d, extra=["--snapshot", mode, "--snapshot-on-switch"]), env=env,
                   check=check, timeout=180)


def the_switch(d, s):
    (ev,) = events(d, "capture_instance_switched")
    assert ev["min_lsn"] == s
    return ev["batch_id"]


def switch_opens(d, batch):
    return [r for r in events(d, "snapshot_open")
            if json.loads(r["detail"]).get("switch_batch_id") == batch]


def snapshot_lsns(d):
    return {r["_snapshot"] or r["_start_lsn"] for r in bronze(d) if r["_operation"] == 0}


def assert_full_switch_snapshot(d, spec, s):
    """One whole snapshot after the switch batch: its open names the batch,
    one bootstrap row at its LSN, each key once in it, and every row unchanged
    since carries the column's value."""
    batch = the_switch(d, s)
    (done,) = events(d, "bootstrap")
    lsn = done["min_lsn"]
    assert done["max_lsn"] == lsn and done["batch_id"] is None and lsn > s
    assert snapshot_lsns(d) == {lsn}, "bronze holds more than one snapshot"
    opens = switch_opens(d, batch)
    assert opens and lsn in {o["min_lsn"] for o in opens}
    assert all(json.loads(o["detail"]) == {"mode": "full", "kind": "bootstrap", "generation": 0,
                                           "lost_from_ts": None, "lost_to_ts": None,
                                           "switch_batch_id": batch} for o in opens)
    rows = [r for r in bronze(d) if r["_operation"] == 0]
    keys = [r["order_id"] for r in rows]
    assert len(keys) == len(set(keys)), "a key twice in the snapshot"
    assert {r["_capture_instance"] for r in rows} == {CONFIGURED}
    assert done["rows"] is None or done["rows"] == len(rows)
    return lsn


def assert_unchanged_rows_carry_region(sim, d, snapshot):
    """Once the stream read everything: each row of the snapshot whose key no
    change touched after its stamp holds the source's region now, which
    the older instance's change rows never carried."""
    source = {r[0]: r[1] for r in sim.run("SELECT order_id, region FROM dbo.orders", database=DB)}
    changes = [r for r in bronze(d) if r["_operation"] != 0]
    rows = [r for r in bronze(d) if r["_operation"] == 0
            and (r["_snapshot"] or r["_start_lsn"]) == snapshot]
    still = [r for r in rows
             if not any(c["order_id"] == r["order_id"] and c["_start_lsn"] > r["_start_lsn"]
                        for c in changes)]
    assert all(r["region"] == source[r["order_id"]] for r in still), still[:3]
    # (a bulk update of the workload may touch a few of them)
    quiet = {r["order_id"]: r["region"] for r in still if r["order_id"] in QUIET}
    assert len(quiet) >= 5 and set(quiet.values()) == {REGION}, quiet
    # which their change rows, the older instance's, never carried
    older = [r for r in changes if r["order_id"] in quiet and r["_capture_instance"] == CONFIGURED]
    assert older and all(r["region"] is None for r in older)


def finish_and_apply(sim, d, w, spec, s, since=None):
    """Stop the workload, let the stream read everything, check bronze's
    change rows (both instances, each once) and apply: silver equals the
    source, region included."""
    w.stop()
    run_cli(*args(sim, d))
    older = [r for r in ct_rows(sim, CONFIGURED) if since is None or r[0] > since]
    assert_bronze_is(d, older, ct_rows(sim, V2, ", region"), s)
    job = job_of(sim, d, spec)
    res = apply(job)
    assert res["rebuilt"], res
    n = assert_silver_equals_source(job)
    assert n > 0
    from apply_jobs import silver_rows, silver_of
    assert any(r[-1] == REGION for r in silver_rows(spec, silver_of(job)))
    (done,) = events(d, "bootstrap")  # the switch's: an abandoned one never completes
    assert_unchanged_rows_carry_region(sim, d, done["min_lsn"])


def test_full_snapshot_on_switch_gives_every_row_the_new_column(sim, workdir, running):
    w, spec, s = setup_switch(sim, workdir, running)
    p = switch_stream(sim, workdir, "full")
    assert p.returncode == 0
    lsn = assert_full_switch_snapshot(workdir, spec, s)
    # a later run owes nothing: no second snapshot
    switch_stream(sim, workdir, "full")
    assert snapshot_lsns(workdir) == {lsn} and len(events(workdir, "bootstrap")) == 1
    finish_and_apply(sim, workdir, w, spec, s)


def test_chunked_snapshot_on_switch_supersedes_an_open_one(sim, workdir, running):
    from snapshot_jobs import Job
    w, spec, s = setup_switch(sim, workdir, running, stream_extra=["--bootstrap", "--snapshot",
                                                                   "chunked"], preload=120)
    (first,) = events(workdir, "snapshot_open")
    s0 = first["min_lsn"]
    assert s0 < s
    job = Job(sim, spec, workdir, app_id="orders-v1")
    job.ckpt = os.path.join(workdir, "ckpt")
    # part of the first snapshot read, then the switch opens a newer one
    _, st = job.backfill("--chunk-rows", "20", "--max-waves", "1", "--numPartitions", "2")
    assert st["state"] == "running" and st["snapshot"] == s0, st
    switch_stream(sim, workdir, "chunked")
    batch = the_switch(workdir, s)
    (opened,) = switch_opens(workdir, batch)
    assert opened["min_lsn"] == opened["max_lsn"] == s and opened["batch_id"] is None
    assert json.loads(opened["detail"]) == {"mode": "chunked", "kind": "bootstrap",
                                            "generation": 0, "lost_from_ts": None,
                                            "lost_to_ts": None, "switch_batch_id": batch}
    # backfill reads the newer one; the older one never completes
    statuses = job.backfill_until_done("--chunk-rows", "20", "--numPartitions", "2")
    assert {x["snapshot"] for x in statuses} == {s}, statuses
    (done,) = events(workdir, "bootstrap")
    assert done["min_lsn"] == done["max_lsn"] == s
    chunks = [json.loads(r["detail"])["chunk"] for r in events(workdir, "snapshot_chunk")
              if json.loads(r["detail"])["snapshot"] == s]
    assert len(chunks) == len(set(chunks)) > 1, "a chunk twice"
    rows = [r for r in bronze(workdir) if r["_snapshot"] == s]
    assert len({r["order_id"] for r in rows}) == len(rows), "a key twice in the snapshot"
    assert any(r["region"] == REGION for r in rows)
    # a later run opens nothing more
    switch_stream(sim, workdir, "chunked")
    assert len(switch_opens(workdir, batch)) == 1
    finish_and_apply(sim, workdir, w, spec, s, since=s0)


@pytest.mark.parametrize("mode,point", [
    ("full", "switch_done"),               # the switch batch committed, nothing of the snapshot
    ("full", "switch_snapshot_opened"),    # its open row written, nothing read
    ("full", "during_snapshot"),           # reading the table
    ("full", "switch_snapshot_read"),      # its rows committed, no bootstrap row
    ("full", "switch_snapshot_done"),      # all written, the next batch not planned
    ("chunked", "switch_snapshot_opened"),  # its plans row written, not its facts row
    ("chunked", "switch_snapshot_done"),
])
def test_kill_before_inside_and_after_the_snapshot_on_switch(sim, workdir, running, mode, point):
    w, spec, s = setup_switch(sim, workdir, running, seed=37)
    p = subprocess.run([CLI, *args(sim, workdir, extra=["--snapshot", mode,
                                                        "--snapshot-on-switch"])],
                       capture_output=True, text=True, timeout=180,
                       env={**os.environ, "MCDC_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, p.stderr
    switch_stream(sim, workdir, mode)
    batch = the_switch(workdir, s)
    if mode == "full":
        lsn = assert_full_switch_snapshot(workdir, spec, s)
        # an open row per attempt that read; only the completed one has rows
        assert len(switch_opens(workdir, batch)) == (2 if point in ("switch_snapshot_opened",
                                                                    "during_snapshot") else 1)
        assert lsn in {o["min_lsn"] for o in switch_opens(workdir, batch)}
    else:
        (opened,) = switch_opens(workdir, batch)
        assert opened["min_lsn"] == s
        job = SimpleNamespace()  # backfill with the stream's names
        from snapshot_jobs import Job
        job = Job(sim, spec, workdir, app_id="orders-v1")
        job.backfill_until_done("--chunk-rows", "25", "--numPartitions", "2")
        chunks = [json.loads(r["detail"])["chunk"] for r in events(workdir, "snapshot_chunk")]
        assert len(chunks) == len(set(chunks)), "a chunk twice"
        (done,) = events(workdir, "bootstrap")
        assert done["min_lsn"] == s
    finish_and_apply(sim, workdir, w, spec, s)


def test_snapshot_on_switch_needs_a_facts_table(sim, workdir):
    spec = Orders()
    make_table(sim, spec)
    a = args(sim, workdir, extra=["--snapshot-on-switch"])
    i = a.index("--facts-table")
    del a[i:i + 2]
    p = run_cli(*a, check=False)
    assert p.returncode == 2 and "--snapshot-on-switch needs --facts-table" in p.stderr, p.stderr


def test_loss_is_decided_on_the_instance_the_stream_reads(sim, workdir):
    """Past the newer instance's start, CDC cleanup of the older one loses
    nothing of the stream's: --on-data-loss resnapshot takes no re-snapshot;
    the newer one's cleanup past the position does."""
    from workload import CAPTURE
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=41)
    w.preload(20)
    run_cli(*args(sim, workdir))
    sim.run("ALTER TABLE dbo.orders ADD region NVARCHAR(20) NULL;", database=DB)
    spec.add(("region", "NVARCHAR(20) NULL", pa.string()))
    s = enable_v2(sim)
    for _ in range(5):
        w.step()
    run_cli(*args(sim, workdir))
    the_switch(workdir, s)
    resnap = ["--on-data-loss", "resnapshot", "--resnapshot-interval-days", "0"]

    def purge(ci):
        sim.run(f"""{CAPTURE}
DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn();
EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'{ci}',
     @low_water_mark = @m, @threshold = 100000;""", database=DB)

    for _ in range(3):
        w.step()
    purge(CONFIGURED)  # the older instance's changes, which the stream read long ago
    for _ in range(3):
        w.step()
    run_cli(*args(sim, workdir, extra=resnap))
    assert events(workdir, "resnapshot") == []
    assert not os.path.exists(os.path.join(workdir, "ckpt", "_generations"))
    got = {(r["_start_lsn"], r["_seqval"], r["_operation"]) for r in bronze(workdir)
           if r["_operation"] != 0 and r["_start_lsn"] >= s}
    assert got == {r[:3] for r in ct_rows(sim, V2)}
    # both instances' cleanup past the stream's position is a loss (the older
    # one alone still holds the changes up to the newer one's moved start)
    for _ in range(3):
        w.step()
    purge(CONFIGURED)
    purge(V2)
    for _ in range(3):
        w.step()
    run_cli(*args(sim, workdir, extra=resnap))
    (re,) = events(workdir, "resnapshot")
    assert re["app_id"] == "orders-v1.g1"


def test_a_full_snapshot_on_switch_is_refused_while_a_chunked_one_is_open(sim, workdir):
    """The mode lock (reference §2.4.5): one mode while a snapshot is open,
    checked before the run reads or writes anything."""
    spec = Orders()
    make_table(sim, spec)
    Workload(sim, spec, seed=43).preload(20)
    run_cli(*args(sim, workdir, extra=["--bootstrap", "--snapshot", "chunked"]))
    before = facts(workdir)
    p = run_cli(*args(sim, workdir, extra=["--snapshot-on-switch"]), check=False)
    assert p.returncode != 0 and "chunked snapshot open" in p.stderr, p.stderr
    assert "backfill" in p.stderr
    assert facts(workdir) == before
