"""mssql-cdc reconcile and repair: what they refuse before they read.

- Options of another capture instance than silver and bronze were built from
  are refused before anything is read (exit 7), by reconcile and by repair.
- repair --run-id of a run the report does not hold is refused (exit 2),
  naming the runs it holds.
- The report's first bucket_lo and last bucket_hi are the key's bounds, as
  the reference writes them.
"""
import json
import os

from deltalake import DeltaTable

from apply_jobs import apply, silver_of
from conftest import run_cli
from snapshot_jobs import new_job
from test_reconcile import EXIT_DIFFERS, reconcile, reconcile_args, report_of, report_rows
from test_repair import repair, repair_args, repair_facts
from workload import DB, Items, delta_rows, enable_cdc, settle

EXIT_MISMATCH = 7


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
