"""mssql-cdc apply: silver, the source table's current state, kept from bronze
while a workload of inserts, updates, deletes and key updates runs.

After each stream + apply (the stream caught up), silver read by delta-rs and
DuckDB equals the source read through pymssql, row for row, every column;
Spark reads it in test_apply_peer.py. Also: another writer (delta-rs DELETE
and UPDATE) changes silver between applies, a long-running --trigger, bad
arguments refused before anything is written.
"""
import json
import os
import re
import signal
import time

import pytest
from deltalake import DeltaTable

from apply_jobs import (apply, apply_args, assert_merged_over, assert_silver_equals_source,
                        control_row, merge_commits, silver_commits, silver_of, spawn_apply)
from conftest import CLI, run_cli
from snapshot_jobs import new_job
from workload import Events, Items, Regional, delta_rows, source_rows

SPECS = {"items": lambda: Items(key_space=1500), "regional": lambda: Regional(ids_per_region=150),
         "events": lambda: Events(key_space=1500, groups=20)}


@pytest.mark.parametrize("name", ["items", "regional", "events"])
def test_stream_and_apply_keep_silver_equal_to_the_source(sim, workdir, name):
    spec = SPECS[name]()
    job, w = new_job(sim, workdir, spec, preload=0, seed=11)
    # events has no unique index: its key comes from --keys
    keys = spec.keys if name == "events" else None
    w.preload(200)  # after CDC: the stream has these rows
    results = []
    with w:
        for _ in range(3):
            w.wait_for(25)
            job.stream()
            r = apply(job, keys=keys)
            assert r["bronze_found"]
            results.append(r)
    job.stream()
    r = apply(job, keys=keys)
    results.append(r)
    n = assert_silver_equals_source(job)
    # each pass's commit says what it did as Delta's MERGE does (DESCRIBE HISTORY,
    # delta-rs' history()): the rows apply counted, the files the commit added and removed
    merges = merge_commits(silver_of(job))
    assert merges and all(not ci["isBlindAppend"] for ci, _, _ in merges)
    for what in ("inserted", "updated", "deleted"):
        said = sum(int(ci["operationMetrics"][f"numTargetRows{what.capitalize()}"])
                   for ci, _, _ in merges)
        assert said == sum(x[what] for x in results), what
    for ci, adds, removes in merges:
        m = ci["operationMetrics"]
        new = [a for a in adds if not a.get("deletionVector")]
        assert int(m["numTargetFilesAdded"]) == len(new)
        assert int(m["numTargetBytesAdded"]) == sum(a["size"] for a in new)
        assert int(m["numTargetFilesRemoved"]) == len(removes)
        assert ci["operationParameters"]["predicate"].startswith('["(target.')
    assert n > 0 and r["applied_lsn"]
    # position and verdict in the control table, the reference's columns
    row = control_row(job, silver_of(job))
    assert row["applied_lsn"] == r["applied_lsn"]
    assert row["finalized_until"] is not None
    assert row["open_snapshot_lsn"] is None and row["snapshot_wave"] is None
    assert r["finalized_until"].startswith(row["finalized_until"].isoformat()[:16])
    # a reapply changes nothing and commits nothing
    before = silver_commits(silver_of(job))
    again = apply(job, keys=keys)
    assert again["applied_lsn"] == r["applied_lsn"] and not again["rebuilt"]
    assert silver_commits(silver_of(job)) == before
    assert_silver_equals_source(job)
    # silver's columns: the captured ones, _start_lsn and _commit_ts
    cols = [f.name for f in DeltaTable(silver_of(job)).schema().fields]
    assert cols == [*spec.column_names, "_start_lsn", "_commit_ts"]


def test_another_writers_delete_and_update_are_merged_over(sim, workdir):
    """A user deletes rows of silver and changes others with delta-rs (its
    own files, in no key order, no index entry); the next apply finds the
    changed keys in them and leaves silver as the reference's MERGE would:
    a key changed since is the source's again, one not changed keeps what
    the user did."""
    spec = Items(key_space=1200)
    job, w = new_job(sim, workdir, spec, preload=0, seed=5)
    w.preload(400)
    job.stream()
    first = apply(job, "--file-rows", "100")
    assert_silver_equals_source(job)
    silver = silver_of(job)
    before = {r["id"] for r in delta_rows(silver, ["id"])}
    DeltaTable(silver).delete("id % 7 = 0")
    DeltaTable(silver).update(predicate="id % 5 = 1", updates={"note": "'by hand'"})
    deleted = before - {r["id"] for r in delta_rows(silver, ["id"])}
    marked = {r["id"] for r in delta_rows(silver, ["id", "note"]) if r["note"] == "by hand"}
    assert deleted and marked
    with w:
        w.wait_for(150)
    job.stream()
    r = apply(job, "--file-rows", "100")
    assert not r["rebuilt"] and r["applied_lsn"] > first["applied_lsn"]
    got = assert_merged_over(job, spec, first["applied_lsn"], deleted, marked)
    # what delta-rs wrote was folded back into files in key order
    assert len(DeltaTable(silver).file_uris()) <= len(got) // 100 + 4


def _append_to_silver(silver, rows):
    """Another writer (deltalake) appends rows to silver: its own file."""
    import pyarrow as pa
    from deltalake import write_deltalake
    schema = DeltaTable(silver).schema().to_arrow()
    write_deltalake(silver, pa.Table.from_pylist(rows, schema=pa.schema(schema)), mode="append")


def _silver_row(silver, key):
    t = DeltaTable(silver).to_pyarrow_table()
    return [r for r in t.to_pylist() if r["id"] == key]


def test_a_key_another_writer_puts_into_silver_twice_is_held_once_again(sim, workdir):
    """deltalake appends rows of keys silver holds: a copy with another note
    and the same _start_lsn, a copy without _start_lsn, and, later, a copy of
    a key the source then changes. Each key is held once again after the
    next apply, with nothing new in bronze too: the row whose image bronze
    wrote (the newest _start_lsn up to silver's position; a tie keeps apply's
    own), or the change's image when the pass has one; a warning names each
    key."""
    spec = Items(key_space=1200)
    job, w = new_job(sim, workdir, spec, preload=0, seed=7)
    w.preload(300)
    job.stream()
    apply(job, "--file-rows", "100")
    silver = silver_of(job)
    keys = sorted(r["id"] for r in delta_rows(silver, ["id"]))
    a, b, c = keys[10], keys[150], keys[290]
    ra, rb = _silver_row(silver, a)[0], _silver_row(silver, b)[0]
    _append_to_silver(silver, [dict(ra, note="by hand"), dict(rb, name="no lsn", _start_lsn=None)])
    # nothing new in bronze: apply folds the other writer's file all the same
    p = apply(job, "--file-rows", "100", check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert_silver_equals_source(job)
    for k in (a, b):
        assert f"id = {k}" in p.stderr and "more than once" in p.stderr, p.stderr[-3000:]
    # a copy of c, then a change of c in the source: the change's image, once
    _append_to_silver(silver, [dict(_silver_row(silver, c)[0], note="stale copy")])
    sim.run(f"UPDATE dbo.items SET note = N'changed' WHERE id = {c}; "
            "EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    job.stream()
    assert apply(job, "--file-rows", "100")["updated"] >= 1
    assert_silver_equals_source(job)
    assert [r["note"] for r in _silver_row(silver, c)] == ["changed"]


def test_a_key_another_writer_repeats_in_a_silver_merged_on_read_is_held_once(sim, workdir):
    """The same on a silver merged on read (--deletion-vectors): deltalake
    appends a copy of a source row without _start_lsn; the next apply
    (nothing new in bronze) folds its file in, copy-on-write, and the key is
    held once, apply's row kept. Read by DuckDB (delta-rs reads no DVs)."""
    spec = Items(key_space=1200)
    job, w = new_job(sim, workdir, spec, preload=0, seed=8)
    w.preload(300)
    job.stream()
    apply(job, "--file-rows", "100", "--deletion-vectors")
    with w:
        w.wait_for(40)  # changes merged on read: deletion vectors and overlapping files
    job.stream()
    apply(job, "--file-rows", "100")
    silver = silver_of(job)
    src = source_rows(sim, spec)[7]
    row = dict(zip(spec.column_names, src), note="by hand", _start_lsn=None, _commit_ts=None)
    _append_to_silver(silver, [row])
    p = apply(job, "--file-rows", "100", check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    assert_silver_equals_source(job, readers=("duckdb",))
    assert f"id = {src[0]}" in p.stderr, p.stderr[-3000:]


def test_a_long_running_trigger_applies_as_bronze_grows(sim, workdir):
    spec = Items(key_space=800)
    job, w = new_job(sim, workdir, spec, preload=0, seed=9)
    w.preload(100)
    job.stream()
    p = spawn_apply(job, "--trigger", "processingTime=200ms")
    try:
        with w:
            for _ in range(3):
                w.wait_for(20)
                job.stream()
                time.sleep(0.5)
        job.stream()
        deadline = time.monotonic() + 30
        while True:  # the pass after the last batch
            r = control_row(job, silver_of(job))
            b = [x["_start_lsn"] for x in delta_rows(job.bronze, ["_start_lsn"])]
            if r and r["applied_lsn"] == max(b):
                break
            assert time.monotonic() < deadline, "apply did not catch up"
            time.sleep(0.2)
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err[-2000:]
    passes = [json.loads(x) for x in out.splitlines() if x.strip()]
    assert len(passes) >= 3, out  # a line per pass, then the run's
    assert passes[-1]["applied_lsn"] == max(b)
    assert_silver_equals_source(job)


def test_apply_before_the_stream_wrote_anything_applies_nothing(sim, workdir):
    job, _ = new_job(sim, workdir, Items(), preload=0)
    r = apply(job)
    assert r["bronze_found"] is False and r["applied_lsn"] is None and not r["rebuilt"]
    assert not os.path.exists(silver_of(job))


def test_bad_arguments_are_refused_before_anything_is_written(sim, workdir):
    spec = Items(key_space=500)
    job, w = new_job(sim, workdir, spec, preload=0)
    w.preload(20)
    job.stream()
    # bronze given as silver: a table of another kind
    p = apply(job, silver=job.bronze, check=False)
    assert p.returncode == 7, p.stderr
    # silver into the control table's place
    p = run_cli(*apply_args(job)[:-6], "--control-table", silver_of(job), "--facts-table",
                job.facts, check=False)
    assert p.returncode in (2, 7), p.stderr
    # a key bronze does not capture
    p = apply(job, keys=["nope"], check=False)
    assert p.returncode == 2 and "nope" in p.stderr, p.stderr
    # neither keys nor a connection to read them from
    p = run_cli("apply", "--bronze", job.bronze, "--target", silver_of(job), "--control-table",
                job.control, "--capture-instance", spec.capture_instance, check=False)
    assert p.returncode == 2 and "--keys" in p.stderr, p.stderr
    p = run_cli("apply", "--bronze", job.bronze, check=False)
    assert p.returncode == 2
    assert not os.path.exists(silver_of(job))
    h = run_cli("apply", "--help")
    assert "ApplyResult" in h.stdout and "--trigger" in h.stdout
    assert CLI


@pytest.mark.parametrize("flag,bad,allowed", [
    ("--file-rows", "99999999999999999999", "at least 1 and at most 1073741824"),
    ("--file-rows", "0", "at least 1 and at most 1073741824"),
    ("--file-rows", "12abc", "at least 1 and at most 1073741824"),
    ("--memory-mb", "-64", "at least 1 and at most 1048576"),
    ("--memory-mb", "2000000", "at least 1 and at most 1048576"),
    ("--memory-mb", " 64", "at least 1 and at most 1048576"),
    ("--max-passes", "1e3", "at least 1 and at most 2147483647"),
    ("--max-passes", "+5", "at least 1 and at most 2147483647"),
    ("--trigger", "processingTime=1e3ms", "processingTime=<n>[ms|s|m]"),
])
def test_numeric_flags_are_parsed_strictly(workdir, flag, bad, allowed):
    """An overflow, a negative, zero, trailing junk, a sign or an exponent
    is a usage error (exit 2) naming the flag and what it takes, before
    anything is read or written."""
    d = lambda n: os.path.join(workdir, n)  # noqa: E731
    p = run_cli("apply", "--bronze", d("bronze"), "--target", d("silver"), "--control-table",
                d("control"), "--capture-instance", "dbo_items", "--keys", "id", flag, bad,
                check=False, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert flag in p.stderr and allowed in p.stderr and bad.strip() in p.stderr, p.stderr
    assert not os.listdir(workdir)


@pytest.mark.parametrize("command,flag,bad,allowed", [
    ("stream", "--max-batches", "99999999999999999999", "at least 1 and at most 2147483647"),
    ("stream", "--resnapshot-interval-days", "inf", "at least 0 and at most 3650"),
    ("backfill", "--chunk-rows", "99999999999999999999", "at least 1 and at most 2147483647"),
    ("backfill", "--max-seconds", "1e999", "at least 0 and at most 31536000"),
    ("backfill", "--min-headroom-hours", "nan", "at least 0 and at most 874914"),
    ("reconcile", "--bucket-rows", "18446744073709551617", "at least 1 and at most 2147483647"),
    ("reconcile", "--sample-seed", "-1", "at least 0 and at most 9223372036854775807"),
])
def test_other_commands_parse_numeric_flags_alike(workdir, command, flag, bad, allowed):
    """The same parser serves every command's numeric flags."""
    p = run_cli(command, flag, bad, check=False)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert flag in p.stderr and allowed in p.stderr, p.stderr


SPILL_LOG = []
HELD = []


def test_a_pass_past_the_runs_read_at_once_gives_the_same_silver(sim, workdir):
    """With --memory-mb 1, each of bronze's 75 batches spills a run (the
    budget is below one batch), past 64, the most the sorter reads at once,
    so runs are merged into runs of the next level: the silver and the SCD2
    history built so equal those of the default budget (which merges nothing
    here), row for row."""
    spec = Items()
    job, _ = new_job(sim, workdir, spec, preload=0)
    sim.run(f"EXEC sim.bulk_load @capture_instance = N'{spec.capture_instance}', "
            "@transactions = 3000, @rows_per_tx = 100, @seed = 5;", database="shop")
    job.stream("--maxCommitsPerBatch", "40")  # 3000 transactions: 75 batches, a file each

    def built(name, *extra):
        silver = os.path.join(workdir, name)
        p = run_cli(*apply_args(job, "--verbose", *extra, silver=silver), check=False,
                    timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        spill = re.search(r"\((\d+) runs spilled, (\d+) merges of runs; ([\d.]+) of (\d+) MB held",
                          p.stderr)
        SPILL_LOG[:] = [ln for ln in p.stderr.splitlines() if "rank" in ln]
        assert spill, p.stderr[-3000:]
        HELD[:] = [float(spill[3]), int(spill[4])]
        rows = DeltaTable(silver).to_pyarrow_table()
        keys = ["id", "__START_AT", "_start_lsn"] if "--scd-type" in extra else ["id"]
        return rows.sort_by([(k, "ascending") for k in keys]), int(spill[1]), int(spill[2])

    for extra in ((), ("--scd-type", "2")):
        whole, runs, merges = built("whole" + "".join(extra), *extra)
        assert runs < 64 and merges == 0, (runs, merges, SPILL_LOG)
        spilled, runs, merges = built("spilled" + "".join(extra), "--memory-mb", "1", *extra)
        assert runs > 64 and merges >= 1, (runs, merges, SPILL_LOG)
        assert spilled.num_rows == whole.num_rows > 1000
        assert spilled.equals(whole), extra
        if extra:
            continue
        # a budget the sorter keeps: it spills before what it holds would pass it
        # (the sorter is the same for both SCD types: shown once; the unit test
        # silver_sorter_holds_at_most_its_budget_whatever_rows_are_picked has more)
        within, runs, _ = built("within", "--memory-mb", "4")
        assert runs >= 2 and HELD[0] <= HELD[1] == 4, (HELD, SPILL_LOG)
        assert within.equals(whole)
