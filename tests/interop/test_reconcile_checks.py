"""mssql-cdc reconcile: what it refuses before it reads, what it names that it
skipped before, and what it does when nothing could be verified.

- Options of another capture instance than silver and bronze were built from
  are refused before anything is read (exit 7), by reconcile and by repair.
- A key given with --keys that the source holds twice is refused (exit 21),
  naming the key column and a value held twice.
- A key silver holds twice (another writer appended it) is named
  DUPLICATE_TARGET, and --repair re-reads it into bronze.
- repair --run-id of a run the report does not hold is refused (exit 2),
  naming the runs it holds.
- A run that verified nothing (every bucket in flight) exits 20; with
  --settle-seconds it re-checks what is in flight until it settles.
- The report's first bucket_lo and last bucket_hi are the key's bounds, as
  the reference writes them.
"""
import json
import os
import subprocess
import threading
import time

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from apply_jobs import apply, silver_of
from conftest import CLI, run_cli
from snapshot_jobs import new_job
from test_reconcile import (EXIT_DIFFERS, EXIT_UNVERIFIED, quick_sim,  # noqa: F401
                            reconcile, reconcile_args, report_of, report_rows)
from test_repair import repair, repair_args, repair_facts, repair_rows
from workload import DB, Items, Spec, delta_rows, enable_cdc, settle

EXIT_MISMATCH = 7
EXIT_NOT_UNIQUE = 21


def built(sim, workdir, seed, rows=300):
    job, w = new_job(sim, workdir, Items(key_space=1500), preload=0, seed=seed)
    w.preload(rows)
    job.stream()
    apply(job)
    return job, w


def with_instance(args, ci):
    a = list(args)
    a[a.index("--captureInstance") + 1] = ci
    return a


# ---- another capture instance ------------------------------------------------------------

class Other(Items):
    name = "k"


def test_options_of_another_capture_instance_are_refused(sim, workdir):
    """Silver and bronze of dbo_items, the options of dbo_k (another table
    with CDC, changing): reconcile and repair stop with exit 7 before they
    read or write anything, naming both instances."""
    job, _ = built(sim, workdir, 41)
    other = Other()
    sim.run(other.create_sql(), database=DB)
    sim.run("INSERT INTO dbo.k (id, name) VALUES " +
            ", ".join(f"({i}, N'k{i}')" for i in range(1, 400)) + ";", database=DB)
    enable_cdc(sim, other)
    sim.run("UPDATE dbo.k SET name = N'changed' WHERE id % 3 = 0;", database=DB)
    settle(sim)
    for extra in ((), ("--repair",)):
        p = run_cli(*with_instance(reconcile_args(job, "--bucket-rows", "60", *extra), "dbo_k"),
                    check=False)
        assert p.returncode == EXIT_MISMATCH, (p.returncode, p.stdout, p.stderr)
        assert "dbo_items" in p.stderr and "dbo_k" in p.stderr, p.stderr
        assert p.stdout == "", p.stdout
    assert not os.path.exists(report_of(job))
    keys = os.path.join(workdir, "keys.jsonl")
    with open(keys, "w") as f:
        f.write('{"id": 1}\n')
    version = DeltaTable(job.bronze).version()
    p = run_cli(*with_instance(repair_args(job, "--keys-file", keys), "dbo_k"), check=False)
    assert p.returncode == EXIT_MISMATCH and "dbo_items" in p.stderr, p.stderr
    assert DeltaTable(job.bronze).version() == version and repair_facts(job) == []
    # the right instance still reconciles
    reconcile(job, "--bucket-rows", "60", "--sample", "1")


# ---- a key held twice --------------------------------------------------------------------

class Coded(Spec):
    """id the primary key; code and label repeat (every 7th row shares its code)."""
    name = "coded"
    columns = (("id", "INT NOT NULL", pa.int32()), ("code", "INT NULL", pa.int32()),
               ("label", "NVARCHAR(20) NULL", pa.string()))
    keys = primary_key = ("id",)


def test_a_key_column_that_is_not_unique_is_refused(sim, workdir):
    """--keys code (an integer) or --keys label (text) that the source holds
    more than once: exit 21 naming the column and a value held twice, no
    report row written."""
    spec = Coded()
    job, _ = new_job(sim, workdir, spec, preload=0, seed=42)
    sim.run("INSERT INTO dbo.coded (id, code, label) VALUES " +
            ", ".join(f"({i}, {i if i % 7 else i - 1}, N'l{i if i % 7 else i - 1}')"
                      for i in range(1, 200)) + ";", database=DB)
    settle(sim)
    job.stream()
    apply(job)
    for keys, col in ((["code"], "code"), (["label"], "label")):
        p = run_cli(*reconcile_args(job, "--keys", json.dumps(keys), "--bucket-rows", "50",
                                    "--sample", "1"), check=False)
        assert p.returncode == EXIT_NOT_UNIQUE, (keys, p.returncode, p.stdout, p.stderr)
        assert f"'{col}'" in p.stderr and "not unique" in p.stderr, p.stderr
        twice = [i - 1 for i in range(7, 200, 7)]
        assert any((str(v) if col == "code" else f'"l{v}"') in p.stderr for v in twice), p.stderr
    assert not os.path.exists(report_of(job))
    reconcile(job, "--bucket-rows", "50", "--sample", "1")  # on its unique index: fine


def test_a_key_twice_in_silver_is_named_and_repaired(sim, workdir):
    """Another writer appends to silver a row of a key silver holds: the
    report names the key DUPLICATE_TARGET (exit 19); --repair reads it from
    the source again into bronze, and until apply takes that repair the key
    is IN_FLIGHT (repair_pending), so a second --repair appends nothing."""
    job, _ = built(sim, workdir, 43)
    silver = silver_of(job)
    ids = sorted(r["id"] for r in delta_rows(silver, ["id"]))
    twice = ids[len(ids) // 3]
    row = DeltaTable(silver).to_pyarrow_table(filters=[("id", "=", twice)])
    write_deltalake(silver, row, mode="append")
    r = reconcile(job, "--bucket-rows", "60", "--sample", "0", want=EXIT_DIFFERS)
    assert r["failures"] == {"DUPLICATE_TARGET": 1} and r["mismatch"] == 1, r
    keyed = [x for x in report_rows(job, r["run_id"]) if x["key"]]
    assert [(json.loads(x["key"]), x["failure_type"]) for x in keyed] == \
        [({"id": twice}, "DUPLICATE_TARGET")], keyed
    assert json.loads(keyed[0]["detail"])["silver_rows"] == 2, keyed
    r = reconcile(job, "--bucket-rows", "60", "--sample", "0", "--repair", want=EXIT_DIFFERS)
    assert r["repair"]["keys"] == 1 and r["repair"]["images"] == 1, r
    assert [(x["id"], x["_operation"]) for x in repair_rows(job)] == [(twice, 4)]
    # the key's bucket holds a repair pending apply: IN_FLIGHT, nothing repaired again
    again = reconcile(job, "--bucket-rows", "60", "--sample", "0", "--repair")
    assert again["in_flight"] == 1 and again["mismatch"] == 0 and "repair" not in again, again
    assert len(repair_rows(job)) == 1 and len(repair_facts(job)) == 1
    # compared row by row (a re-check), the key is named IN_FLIGHT, its repair's run id given
    again = reconcile(job, "--bucket-rows", "60", "--sample", "0", "--settle-seconds", "1")
    pending = [json.loads(x["detail"]) for x in report_rows(job, again["run_id"]) if x["key"]]
    assert pending == [{"silver_rows": 2, "repair_pending": r["run_id"]}], pending
    # the whole path: apply holds the key once again and takes the repair, and
    # reconcile then verifies silver equal to the source (exit 0, nothing named)
    apply(job)
    assert sorted(r["id"] for r in delta_rows(silver, ["id"])) == ids
    done = reconcile(job, "--bucket-rows", "60", "--sample", "1")
    assert done["failures"] == {} and done["mismatch"] == 0 and done["in_flight"] == 0, done


# ---- repair --run-id ---------------------------------------------------------------------

def test_repair_of_a_run_the_report_lacks_is_refused(sim, workdir):
    job, _ = built(sim, workdir, 44)
    runs = [reconcile(job, "--bucket-rows", "100")["run_id"] for _ in range(2)]
    version = DeltaTable(job.bronze).version()
    p = repair(job, "--report-table", report_of(job), "--run-id", "no-such-run", check=False)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "no-such-run" in p.stderr and all(x in p.stderr for x in runs), p.stderr
    assert DeltaTable(job.bronze).version() == version and repair_facts(job) == []
    # a run it holds with nothing to repair: 0 keys, exit 0
    assert repair(job, "--report-table", report_of(job), "--run-id", runs[0])["keys"] == 0


# ---- nothing verified, settling --------------------------------------------------------

def every_bucket_in_flight(job):
    """Deletes every fifth row at the source, captured, not streamed: each
    bucket's counts differ while a change to it is in the change table."""
    job.sim.run("DELETE FROM dbo.items WHERE id % 5 = 0;", database=DB)
    settle(job.sim)


def test_nothing_verified_exits_20(sim, workdir):
    job, _ = built(sim, workdir, 45)
    every_bucket_in_flight(job)
    r = reconcile(job, "--bucket-rows", "40", "--sample", "1", want=EXIT_UNVERIFIED)
    assert r["in_flight"] == r["buckets"] > 3 and r["match"] == r["mismatch"] == 0, r
    assert r["hashed"] == 0 and r["verified"] is False and not r["differs"], r
    # a settle time with nothing bringing the changes: the buckets stay in
    # flight, but their re-checks compare row by row, which verifies the keys
    # that are equal (the deleted ones are named IN_FLIGHT)
    r = reconcile(job, "--bucket-rows", "40", "--settle-seconds", "1")
    assert r["in_flight"] == r["buckets"] and r["rechecks"] >= 1 and r["verified"], r
    assert set(r["failures"]) == {"IN_FLIGHT"} and r["hashed"] == r["buckets"], r
    gone = {json.loads(x["key"])["id"] for x in report_rows(job, r["run_id"]) if x["key"]}
    assert gone and all(k % 5 == 0 for k in gone), gone
    job.stream()
    apply(job)
    r = reconcile(job, "--bucket-rows", "40", "--sample", "1")
    assert r["match"] == r["buckets"] and r["verified"] is True, r


def test_settle_seconds_rechecks_until_the_pipeline_catches_up(quick_sim, workdir):  # noqa: F811
    """A workload writes while the stream and apply run on their own;
    reconcile --settle-seconds starts with the workload running, the
    workload stops partway: the buckets and keys in flight are re-checked
    until they match, and the run ends with only MATCH, exit 0."""
    spec = Items(key_space=600)
    job, w = new_job(quick_sim, workdir, spec, preload=0, seed=46)
    w.preload(200)
    job.stream()
    apply(job)
    stream = job.spawn(job.stream_args(trigger="processingTime=200ms"))
    stop = threading.Event()

    def apply_loop():
        while not stop.is_set():
            apply(job, check=False)
            stop.wait(0.2)

    t = threading.Thread(target=apply_loop, daemon=True)
    try:
        with w:
            t.start()
            w.wait_for(30)
            p = subprocess.Popen([CLI, *reconcile_args(job, "--bucket-rows", "30", "--sample", "1",
                                                       "--settle-seconds", "90")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.5)
        out, err = p.communicate(timeout=150)
    finally:
        stop.set()
        t.join(60)
        stream.terminate()
        stream.wait(30)
    assert p.returncode == 0, (p.returncode, out, err)
    r = json.loads(out.splitlines()[-1])
    assert r["rechecks"] >= 1, r
    assert r["match"] == r["buckets"] and r["in_flight"] == 0 and r["failures"] == {}, r
    rows = report_rows(job, r["run_id"])
    assert len(rows) == r["buckets"] and all(x["status"] == "MATCH" for x in rows), rows
    # a re-checked bucket row says what it was compared at: a silver version
    # after the first check's (the result's), and the max_lsn read before its rows
    later = [x for x in rows if x["silver_version"] > r["silver_version"]]
    assert later and all(x["hashed"] and x["source_lsn"] > r["source_lsn"] for x in later), rows


# ---- the report's bounds ---------------------------------------------------------------

def test_the_first_and_last_bucket_bounds_are_the_keys(sim, workdir):
    """As the reference writes them: the first bucket_lo is the lowest key
    (a width of one fine bucket per key on a small range), the last
    bucket_hi the key after the highest; key rows carry their bucket's."""
    job, _ = built(sim, workdir, 47)
    ids = sorted(r["id"] for r in delta_rows(silver_of(job), ["id"]))
    DeltaTable(silver_of(job)).delete(f"id = {ids[-1]}")
    r = reconcile(job, "--bucket-rows", "40", "--sample", "0", want=EXIT_DIFFERS)
    rows = report_rows(job, r["run_id"])
    buckets = sorted((x for x in rows if x["status"]), key=lambda x: json.loads(x["bucket_lo"]))
    assert json.loads(buckets[0]["bucket_lo"]) == ids[0], buckets[0]
    assert json.loads(buckets[-1]["bucket_hi"]) == ids[-1] + 1, buckets[-1]
    for a, b in zip(buckets, buckets[1:]):
        assert a["bucket_hi"] == b["bucket_lo"], (a, b)
    key = [x for x in rows if x["key"]]
    assert len(key) == 1 and key[0]["bucket_hi"] == buckets[-1]["bucket_hi"], key
    assert key[0]["bucket_lo"] == buckets[-1]["bucket_lo"], key
