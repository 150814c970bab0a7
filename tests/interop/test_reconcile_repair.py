"""mssql-cdc reconcile --repair: the keys that differ (not in flight) are
repaired under the run's run_id after its report; apply then fixes silver
and the next reconcile reports only MATCH (exit 0), and so does a third.

Faults planted as in test_reconcile.py (delta-rs deletes, changes and adds
silver rows; a bronze change row dropped before apply). kill -9 inside
reconcile (after its report) and inside its repair (after the bronze
commit), then the same command again: the same silver, no report row twice,
no repair appended twice. A datetime2(7) key with digits below the
microsecond is read by its microsecond range: repaired with its image, not
deleted; two source rows in one microsecond are refused.
"""
import datetime as dt
import json
import os
import subprocess

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from apply_jobs import apply, assert_silver_equals_source, silver_of, wait_killed
from conftest import CLI, run_cli
from snapshot_jobs import new_job
from test_reconcile import EXIT_DIFFERS, reconcile, reconcile_args, report_rows
from test_repair import repair, repair_facts, repair_rows
from workload import DB, Items, Spec, delta_rows, settle


ROUND = [0]


def plant_faults(job):
    """A silver row deleted, one changed, one added (delta-rs); a bronze
    update row dropped before apply. Returns {key: failure type}."""
    silver = silver_of(job)
    ids = sorted(r["id"] for r in delta_rows(silver, ["id"]))
    gone, changed, added, lost = ids[5], ids[len(ids) // 2], ids[-1] + 1000, ids[12]
    ROUND[0] += 1
    job.sim.run(f"UPDATE dbo.items SET name = N'lost {ROUND[0]}' WHERE id = {lost};", database=DB)
    # a later change holds bronze's position past the lost one: no IN_FLIGHT
    job.sim.run(f"UPDATE dbo.items SET name = N'later {ROUND[0]}' WHERE id = {ids[20]};", database=DB)
    settle(job.sim)
    job.stream()
    DeltaTable(job.bronze).delete(f"id = {lost} AND _operation <> 0 AND _seqval IS NOT NULL")
    apply(job)
    DeltaTable(silver).delete(f"id = {gone}")
    DeltaTable(silver).update(predicate=f"id = {changed}", updates={"name": "'by hand'"})
    row = DeltaTable(silver).to_pyarrow_table(filters=[("id", "=", ids[0])])
    row = row.set_column(row.schema.get_field_index("id"), "id", pa.array([added], pa.int32()))
    write_deltalake(silver, row, mode="append")
    return {gone: "MISSING_TARGET", changed: "RECORD_DIFF", added: "MISSING_SOURCE",
            lost: "RECORD_DIFF"}


def built(sim, workdir, seed):
    job, w = new_job(sim, workdir, Items(key_space=1500), preload=0, seed=seed)
    w.preload(300)
    job.stream()
    apply(job)
    return job


def assert_report_rows_once(job):
    runs = {}
    for x in report_rows(job):
        runs.setdefault(x["run_id"], []).append((x["bucket_lo"], x["key"]))
    for run_id, got in runs.items():
        assert len(got) == len(set(got)), f"run {run_id} has a report row twice"
    return runs


def assert_match_twice(job):
    for _ in range(2):
        r = reconcile(job, "--bucket-rows", "60", "--sample", "1")
        assert r["mismatch"] == 0 and r["failures"] == {} and r["match"] == r["buckets"], r


def test_reconcile_repair_fixes_planted_faults(sim, workdir):
    job = built(sim, workdir, 31)
    faults = plant_faults(job)
    r = reconcile(job, "--bucket-rows", "60", "--sample", "1", "--repair", want=EXIT_DIFFERS)
    rp = r["repair"]
    assert rp["run_id"] == r["run_id"] and not rp["already"], r
    assert (rp["keys"], rp["images"], rp["deletes"]) == (4, 3, 1), (r, faults)
    assert sorted((x["id"], x["_operation"]) for x in repair_rows(job)) == sorted(
        (k, 1 if t == "MISSING_SOURCE" else 4) for k, t in faults.items())
    assert {(json.loads(x["key"])["id"], x["failure_type"]) for x in report_rows(job, r["run_id"])
            if x["key"]} == set(faults.items())
    # the same repair again (repair --run-id of the run): nothing appended
    version = DeltaTable(job.bronze).version()
    again = repair(job, "--report-table", os.path.join(job.dir, "reconcile_report"),
                   "--run-id", r["run_id"])
    assert again["already"] and DeltaTable(job.bronze).version() == version, again
    apply(job)
    assert_silver_equals_source(job)
    assert_match_twice(job)
    assert len(repair_facts(job)) == 1


def test_a_repair_pending_apply_is_in_flight_and_not_appended_twice(sim, workdir):
    """reconcile --repair twice with no apply in between: the second run
    finds each repaired key's repair pending apply (a repair facts row after
    silver's last pass), reports it IN_FLIGHT with the repair's run id, and
    repairs nothing; so does mssql-cdc repair of its report. Apply, then
    only MATCH, and bronze holds each repair row once."""
    job = built(sim, workdir, 35)
    faults = plant_faults(job)
    first = reconcile(job, "--bucket-rows", "60", "--sample", "1", "--repair", want=EXIT_DIFFERS)
    assert first["repair"]["keys"] == len(faults) and not first["repair"]["already"], first
    rows = sorted((x["id"], x["_operation"], x["_start_lsn"]) for x in repair_rows(job))
    assert len(rows) == len(faults)
    version = DeltaTable(job.bronze).version()
    second = reconcile(job, "--bucket-rows", "60", "--sample", "1", "--repair")
    assert second["mismatch"] == 0 and set(second["failures"]) == {"IN_FLIGHT"}, second
    assert "repair" not in second, second  # nothing to repair: nothing appended
    rows2 = report_rows(job, second["run_id"])
    got = {json.loads(x["key"])["id"]: (x["failure_type"], json.loads(x["detail"]))
           for x in rows2 if x["key"]}
    assert all(t == "IN_FLIGHT" and d["repair_pending"] == first["run_id"]
               for t, d in got.values()), got
    # a RECORD_DIFF (its bucket's counts equal, so compared) still names its columns
    assert all("columns" in d for d in (got[k][1] for k in got if faults[k] == "RECORD_DIFF")), got
    # every repaired key is named IN_FLIGHT, or in an IN_FLIGHT bucket (its
    # counts differ while the repair is pending: not read row by row)
    flight = [(json.loads(x["bucket_lo"]) if x["bucket_lo"] else None,
               json.loads(x["bucket_hi"]) if x["bucket_hi"] else None)
              for x in rows2 if x["status"] == "IN_FLIGHT"]
    for k in faults:
        assert k in got or any((lo is None or lo <= k) and (hi is None or k < hi)
                               for lo, hi in flight), (k, got, flight)
    assert got and second["in_flight"] > 0, second
    # mssql-cdc repair of that run's report finds no key to repair
    again = repair(job, "--report-table", os.path.join(job.dir, "reconcile_report"),
                   "--run-id", second["run_id"])
    assert again["keys"] == 0 and not again["already"], again
    assert DeltaTable(job.bronze).version() == version and len(repair_facts(job)) == 1
    apply(job)
    assert_silver_equals_source(job)
    assert_match_twice(job)
    assert sorted((x["id"], x["_operation"], x["_start_lsn"]) for x in repair_rows(job)) == rows
    assert len(repair_facts(job)) == 1


def test_repair_needs_the_facts_table(sim, workdir):
    job = built(sim, workdir, 32)
    args = [a for a in reconcile_args(job, "--repair")]
    i = args.index("--facts-table")
    del args[i:i + 2]
    p = run_cli(*args, check=False)
    assert p.returncode == 2 and "--facts-table" in p.stderr, p.stderr


def killed(job, point, *extra):
    p = subprocess.Popen([CLI, *reconcile_args(job, "--bucket-rows", "60", "--sample", "1",
                                               "--repair", *extra)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "MCDC_CRASH_AT": point})
    wait_killed(p)


def test_kill_inside_reconcile_and_inside_its_repair_then_rerun(sim, workdir):
    job = built(sim, workdir, 33)
    faults = plant_faults(job)
    # killed after its report commit, before its repair's bronze commit: the
    # rerun finds that run's report rows with no repair, completes that
    # repair first (under the killed run's id), then goes on: the keys are
    # pending apply, IN_FLIGHT, and nothing is repaired twice
    killed(job, "after_report")
    assert repair_rows(job) == []
    (dead,) = {x["run_id"] for x in report_rows(job)}
    r = reconcile(job, "--bucket-rows", "60", "--sample", "1", "--repair")
    assert r["repair"]["run_id"] == dead != r["run_id"] and not r["repair"]["already"], r
    assert r["repair"]["keys"] == len(faults) and set(r["failures"]) == {"IN_FLIGHT"}, r
    assert [json.loads(x["detail"])["run_id"] for x in repair_facts(job)] == [dead]
    assert len(repair_rows(job)) == len(faults)
    again = reconcile(job, "--bucket-rows", "60", "--sample", "1", "--repair")
    assert "repair" not in again and len(repair_facts(job)) == 1, again
    apply(job)
    assert_silver_equals_source(job)
    first = sorted((x["id"], x["_start_lsn"]) for x in repair_rows(job))
    # new faults; killed inside the repair, between its bronze commit and facts row
    faults = plant_faults(job)
    killed(job, "after_bronze")
    rows = repair_rows(job)
    assert len(rows) == len(first) + len(faults) and len(repair_facts(job)) == 1
    reconcile(job, "--bucket-rows", "60", "--sample", "1", want=EXIT_DIFFERS)  # a run in between
    # the rerun completes the killed run's repair (its facts row) first and
    # appends nothing: its keys are pending apply then
    again = reconcile(job, "--bucket-rows", "60", "--sample", "1", "--repair")
    assert again["repair"]["already"] and again["repair"]["run_id"] != again["run_id"], again
    assert set(again["failures"]) == {"IN_FLIGHT"}, again
    assert len(repair_rows(job)) == len(rows) and len(repair_facts(job)) == 2
    apply(job)
    assert_silver_equals_source(job)
    assert_match_twice(job)
    runs = assert_report_rows_once(job)
    assert again["run_id"] in runs and again["repair"]["run_id"] in runs


class Stamps(Spec):
    """A datetime2(7) key: the lake holds its values cut to microseconds."""
    name = "stamps"
    columns = (("ts", "DATETIME2(7) NOT NULL", pa.timestamp("us")),
               ("v", "INT NULL", pa.int32()))
    keys = ("ts",)
    primary_key = ("ts",)

    def random_key(self, rng):
        return (dt.datetime(2026, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10 ** 9)),)

    def new_row(self, rng, key):
        return {"ts": key[0], "v": rng.randint(0, 100)}


def test_datetime2_7_key_below_the_microsecond_is_repaired_not_deleted(sim, workdir):
    spec = Stamps()
    job, _ = new_job(sim, workdir, spec, preload=0, seed=34)
    sim.run("INSERT INTO dbo.stamps (ts, v) VALUES ('2026-01-01T10:00:00.1234567', 1), "
            "('2026-01-01T10:00:01.0000009', 2), ('2026-01-01T10:00:02.5', 3);", database=DB)
    settle(sim)
    job.stream()
    apply(job)
    silver = silver_of(job)
    DeltaTable(silver).update(predicate="v = 1", updates={"v": "10"})
    DeltaTable(silver).delete("v = 2")
    r = reconcile(job, "--sample", "1", "--repair", want=EXIT_DIFFERS)
    rp = r["repair"]
    assert (rp["keys"], rp["images"], rp["deletes"]) == (2, 2, 0), r
    apply(job)
    got = sorted((x["ts"], x["v"]) for x in delta_rows(silver, ["ts", "v"]))
    assert got == [(dt.datetime(2026, 1, 1, 10, 0, 0, 123456), 1),
                   (dt.datetime(2026, 1, 1, 10, 0, 1, 0), 2),
                   (dt.datetime(2026, 1, 1, 10, 0, 2, 500000), 3)], got
    reconcile(job, "--sample", "1")
    # two source rows in one microsecond: which one silver should hold is unknowable
    sim.run("INSERT INTO dbo.stamps (ts, v) VALUES ('2026-01-01T10:00:03.0000001', 4), "
            "('2026-01-01T10:00:03.0000002', 5);", database=DB)
    settle(sim)
    keys = os.path.join(workdir, "keys.jsonl")
    with open(keys, "w") as f:
        f.write('{"ts": "2026-01-01T10:00:03"}\n')
    before = DeltaTable(job.bronze).version()
    p = repair(job, "--keys-file", keys, check=False)
    assert p.returncode == 2 and "more than one row" in p.stderr, p.stderr
    assert DeltaTable(job.bronze).version() == before
