"""Bad input to the snapshot commands: each is a clear error (its exit code, a
message saying what is wrong and what to do) that leaves bronze, facts and
the plans table as they were, or a documented behaviour that loses nothing.

Tests of commands this build lacks skip, saying which."""
import datetime as dt
import json
import os
import re

import pytest

from conftest import run_cli
from snapshot_jobs import (CHUNKED, OTHER_MODE_OPEN, Job, assert_changes_once,
                           assert_chunks_once, kill, new_job, require,
                           snapshot_isolation_refused, status_of, wait_killed)
from workload import (DB, Events, Items, assert_rebuild_equals_source, max_lsn, parquet_copy,
                      purge_all, settle)

ITEMS = Items()


def seed(job, copy, as_of, *extra, check=False):
    return run_cli("seed", *job.source(), "--target", job.bronze, "--from", copy, "--as-of", as_of,
                   "--app-id", job.app_id, "--facts-table", job.facts, *extra, check=check)


def refused(p, code, *words):
    """Exit code code, and a message with every one of words in it."""
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    for w in words:
        assert re.search(w, p.stderr), (w, p.stderr)


def open_chunked(sim, workdir, rows=300):
    """A stream that opened a chunked snapshot of ITEMS (and streams from it)."""
    job, w = new_job(sim, workdir, ITEMS, rows)
    job.stream(*CHUNKED)
    return job, w


# ---- backfill's own options ---------------------------------------------------------

def test_backfill_chunk_rows_must_be_a_positive_count(sim, workdir):
    require("chunked")
    job, _ = open_chunked(sim, workdir)
    before = job.versions()
    p, _ = job.backfill("--chunk-rows", "0", check=False)
    refused(p, 2, "chunk-rows", r"positive|at least 1|>= ?1|greater than 0")
    for bad in ("-5", "many", "1.5"):
        p, _ = job.backfill("--chunk-rows", bad, check=False)
        refused(p, 2, "chunk-rows")
    assert job.versions() == before


def test_backfill_isolation_must_be_snapshot_or_read_committed(sim, workdir):
    require("chunked")
    job, _ = open_chunked(sim, workdir)
    before = job.versions()
    p, _ = job.backfill("--isolation", "nolock", check=False)
    refused(p, 2, "nolock", "snapshot", "readCommitted")
    assert job.versions() == before
    # any case is the same level
    _, st = job.backfill("--isolation", "READCOMMITTED", "--max-waves", "1", "--chunk-rows", "50")
    assert st["state"] in ("running", "done") and st["chunks_done"] >= 1


def test_backfill_of_another_app_id_finds_no_snapshot_and_writes_nothing(sim, workdir):
    require("chunked")
    job, _ = open_chunked(sim, workdir)
    before = job.versions()
    other = Job(sim, ITEMS, workdir, app_id="not-this-stream")
    p, st = other.backfill()
    assert st["state"] == "no_snapshot" and st["snapshot"] is None and not st["done"], st
    assert st["reason"], st
    assert job.versions() == before


def test_backfill_pauses_below_min_headroom(sim, workdir):
    """Documented: below --min-headroom-hours backfill reads nothing and says
    waiting_headroom (exit 15); without it, it goes on."""
    require("chunked")
    job, w = open_chunked(sim, workdir)
    # min_lsn is the new instance's start LSN, no commit: no headroom is
    # known (as the reference writes it) until cleanup moves min_lsn to a
    # commit; the stream has read everything up to here
    w.step()
    job.stream(*CHUNKED)
    purge_all(sim, ITEMS)
    seen = max(f["batch_id"] for f in job.facts_rows() if f["event"] is None)
    for _ in range(3):
        w.step()
    job.stream(*CHUNKED)
    # the batches after the cleanup that read a range (a new checkpoint's empty batch 0
    # reads none, and has no metrics, as the reference's)
    batches = [f for f in job.facts_rows()
               if f["event"] is None and f["batch_id"] > seen and f["end_lsn"] is not None]
    assert batches and all(f["retention_headroom_hours"] is not None for f in batches)
    low = max(f["retention_headroom_hours"] for f in batches)
    p, st = job.backfill("--min-headroom-hours", str(low + 1000))
    assert st["state"] == "waiting_headroom" and st["paused"] and not st["done"], st
    assert "headroom" in (st["reason"] or ""), st
    assert not job.events("snapshot_chunk")
    assert not [r for r in job.bronze_rows() if r["_chunk"] is not None]
    _, st = job.backfill("--max-waves", "1", "--chunk-rows", "50")
    assert st["state"] in ("running", "done") and st["chunks_done"] >= 1, st


def test_chunked_needs_a_facts_table(sim, workdir):
    require("chunked")
    job, _ = new_job(sim, workdir, ITEMS, 20)
    args = job.stream_args(*CHUNKED)
    i = args.index("--facts-table")
    del args[i:i + 2]
    p = run_cli(*args, check=False)
    refused(p, 2, "--facts-table", "chunked")
    assert job.versions()["bronze"] is None


def test_backfill_with_a_full_snapshot_still_open_is_refused(sim, workdir):
    require("chunked")
    job, _ = new_job(sim, workdir, ITEMS, 3000)
    wait_killed(job.spawn(job.stream_args("--bootstrap", "--arrowBatchSize", "100"),
                          env={"MCDC_CRASH_AT": "during_snapshot"}))
    before = job.versions()
    p, _ = job.backfill(check=False)
    refused(p, OTHER_MODE_OPEN, "full")
    assert re.search(r"--snapshot full|rerun|finish", p.stderr), p.stderr
    assert job.versions() == before
    # finishing the full one, as the message says, completes it
    job.stream("--bootstrap")
    assert len(job.events("bootstrap")) == 1
    assert_rebuild_equals_source(sim, ITEMS, job.bronze, job.facts)


# ---- no unique index, a second backfill ---------------------------------------------

def test_a_table_without_a_unique_index_and_no_snapshot_keys(sim, workdir):
    """Either refused, naming snapshotKeys, with nothing written; or read as
    one chunk, the whole table (the reference's keyset plan without bounds)."""
    require("chunked")
    spec = Events()
    job, w = new_job(sim, workdir, spec, 400)
    with w:
        w.wait_for(5)
        p = run_cli(*job.stream_args(*CHUNKED, keys=False), check=False)
        if p.returncode == 0:
            p = run_cli(*job.backfill_args("--chunk-rows", "50", keys=False), check=False,
                        timeout=120)
        w.wait_for(5)
    if p.returncode != 0:
        refused(p, 2, "snapshotKeys", "unique index")
        assert not job.events("snapshot_chunk") and job.versions()["plans"] is None
        return
    st = status_of(p)
    assert st["done"] and st["chunks_total"] == 1, st
    run_cli(*job.stream_args(*CHUNKED, keys=False))
    assert_rebuild_equals_source(sim, spec, job.bronze, job.facts)
    assert assert_chunks_once(job) > 300


def test_a_second_backfill_on_the_same_snapshot(sim, workdir):
    """Two backfill processes at once: the second refused clearly, or both
    running without a chunk read twice."""
    require("chunked")
    job, w = open_chunked(sim, workdir, rows=1200)
    args = job.backfill_args("--chunk-rows", "40", "--numPartitions", "2",
                             "--target-wave-seconds", "0")
    with w:
        a, b = job.spawn(args), job.spawn(args)
        results = []
        for p in (a, b):
            try:
                out, err = p.communicate(timeout=120)
            except Exception:
                kill(p)
                raise
            results.append((p.returncode, out, err))
        for rc, out, err in results:
            if rc in (0, 14):
                status_of((rc, out, err))
            else:
                assert rc > 0, (rc, err)  # no crash
                assert re.search(r"another|concurrent|already|running", err), (rc, err)
        assert any(rc == 0 for rc, _, _ in results), results
        w.wait_for(5)
    job.backfill_until_done("--chunk-rows", "40")
    job.stream(*CHUNKED)
    assert_chunks_once(job)
    assert_changes_once(job)
    assert_rebuild_equals_source(sim, ITEMS, job.bronze, job.facts)


# ---- isolation the database does not allow ------------------------------------------

@pytest.mark.parametrize("command", ["snapshot", "bootstrap", "backfill"])
def test_snapshot_isolation_on_a_database_without_it(sim, workdir, command):
    if command == "backfill":
        require("chunked")
    job, _ = new_job(sim, workdir, ITEMS, 50)
    # the simulator refuses SNAPSHOT (3952) while ALLOW_SNAPSHOT_ISOLATION is OFF
    assert snapshot_isolation_refused(sim, ITEMS)
    if command == "backfill":
        job.stream(*CHUNKED)

    def attempt():
        if command == "snapshot":
            return run_cli("snapshot", *job.source(), "--target", job.bronze,
                           "--isolationLevel", "snapshot", check=False)
        if command == "bootstrap":
            return job.stream("--bootstrap", "--isolationLevel", "snapshot", check=False)
        return job.backfill("--isolation", "snapshot", check=False)[0]

    before = job.versions()
    p = attempt()
    assert p.returncode in (1, 2), (p.returncode, p.stderr)
    assert "ALLOW_SNAPSHOT_ISOLATION" in p.stderr, p.stderr
    assert re.search(r"ALTER DATABASE|readCommitted", p.stderr), p.stderr
    after = job.versions()
    assert after["bronze"] == before["bronze"] and after["plans"] == before["plans"]
    assert not [f for f in job.facts_rows() if f["event"] in ("bootstrap", "snapshot_chunk")]
    # the database allowing it, the same command works
    sim.run(f"ALTER DATABASE {DB} SET ALLOW_SNAPSHOT_ISOLATION ON;", database=DB)
    p = attempt()
    assert p.returncode == 0, p.stderr


# ---- seed ---------------------------------------------------------------------------

def test_bad_seeds_on_a_running_stream_write_nothing(sim, workdir):
    """A stream seeded and running; reseeds with a copy missing a column, an
    as_of LSN in the future and one whose changes are purged are refused and
    leave every table as it was, and the stream loses nothing."""
    job, w = new_job(sim, workdir, ITEMS, 300, seed=31)
    copy = os.path.join(workdir, "copy")
    with w:
        w.wait_for(5)
        settle(sim)
        as_of = max_lsn(sim)
        parquet_copy(sim, ITEMS, copy)
        seed(job, copy, as_of, check=True)
        job.stream("--bootstrap")
        w.wait_for(5)
        settle(sim)
        newer = max_lsn(sim)
        short = os.path.join(workdir, "short")
        parquet_copy(sim, ITEMS, short)
        import pyarrow.parquet as pq
        t = pq.read_table(os.path.join(short, "part-0.parquet")).drop_columns(["note"])
        pq.write_table(t, os.path.join(short, "part-0.parquet"))
        before = job.versions()
        refused(seed(job, short, newer, "--reseed"), 2, "'note'", "--allow-missing-columns")
        refused(seed(job, copy, "0x7FFFFFFF000000000001", "--reseed"), 2,
                "beyond the server's max_lsn")
        refused(seed(job, copy, newer), 2, "--reseed")  # another as_of without --reseed
        assert job.versions() == before
        w.wait_for(5)
    job.stream()
    assert_rebuild_equals_source(sim, ITEMS, job.bronze, job.facts)
    # the changes after an as_of purged: DataLossError, nothing written
    w.start()
    w.wait_for(5)
    w.stop()
    lost = max_lsn(sim)
    w.start()
    w.wait_for(5)
    w.stop()
    purge_all(sim, ITEMS)
    before = job.versions()
    refused(seed(job, copy, lost, "--reseed"), 3, "DataLossError", "newer copy|snapshot instead")
    assert job.versions() == before
    assert [f["max_lsn"] for f in job.events("bootstrap")] == [as_of]


def test_seed_as_of_a_time_in_the_future_loses_nothing(sim, workdir):
    job, w = new_job(sim, workdir, ITEMS, 300, seed=32)
    copy = os.path.join(workdir, "copy")
    with w:
        w.wait_for(5)
        parquet_copy(sim, ITEMS, copy)
        w.wait_for(20)  # commits the copy lacks
    future = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).replace(microsecond=0)
    p = seed(job, copy, future.isoformat().replace("+00:00", "Z"))
    # refused: a time after the server's clock maps to the last commit, and the
    # commits between the copy and it would be lost
    refused(p, 2, "later than the server's clock", "time zone")
    assert job.versions()["bronze"] is None


BAD_KEYS = ('["nope"]', '"id"', "[]")


def test_snapshot_keys_naming_no_column_are_refused(sim, workdir):
    job, _ = new_job(sim, workdir, ITEMS, 20)
    for keys in BAD_KEYS:
        p = run_cli("snapshot", *job.source(keys=False), "--snapshotKeys", keys,
                    "--target", job.bronze, check=False)
        refused(p, 2, "snapshotKeys", re.escape(keys.strip('[]"')) if keys != "[]" else "list")
    assert job.versions()["bronze"] is None
    assert json.loads(run_cli("snapshot", *job.source(), "--target", job.bronze).stdout)["lsn"]


def test_a_bootstrap_with_bad_snapshot_keys_writes_nothing(sim, workdir):
    job, _ = new_job(sim, workdir, ITEMS, 20)
    for keys in BAD_KEYS:
        p = run_cli(*job.stream_args("--bootstrap", keys=False), "--snapshotKeys", keys,
                    check=False)
        refused(p, 2, "snapshotKeys")
    assert job.versions() == {"bronze": None, "facts": None, "control": None, "plans": None}, \
        job.facts_rows()
