"""apply's --scratch-dir (issue 23): the sorted runs a pass spills go to a
local directory of the user's, under mssql-cdc-spill/ with names of the
run's own, instead of silver's _mssql_cdc_spill/; a silver on an object
store always spills there (the CLI's default: the system's temp
directory). A killed run's runs stay in the scratch directory and nothing
of them in silver; the next run, sharing the directory, neither reads nor
removes them, and gives the same silver."""
import os
import re

from deltalake import DeltaTable

from apply_jobs import apply, apply_args, silver_of, spawn_apply, wait_killed
from conftest import run_cli
from snapshot_jobs import new_job
from workload import Items


def spill_files(scratch):
    d = os.path.join(scratch, "mssql-cdc-spill")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def runs_spilled(stderr):
    m = re.search(r"\((\d+) runs spilled", stderr)
    assert m, stderr[-3000:]
    return int(m[1])


def test_runs_spill_to_the_scratch_dir_and_a_killed_runs_stay_apart(sim, workdir):
    spec = Items()
    job, _ = new_job(sim, workdir, spec, preload=0)
    sim.run(f"EXEC sim.bulk_load @capture_instance = N'{spec.capture_instance}', "
            "@transactions = 400, @rows_per_tx = 100, @seed = 7;", database="shop")
    job.stream("--maxCommitsPerBatch", "40")
    scratch = os.path.join(workdir, "scratch")
    silver = silver_of(job)
    # killed while merging: the runs it spilled are in the scratch directory
    p = spawn_apply(job, "--memory-mb", "1", "--scratch-dir", scratch,
                    env={"MCDC_CRASH_AT": "during_merge"})
    wait_killed(p)
    left = spill_files(scratch)
    assert left and all(re.fullmatch(r"[0-9a-f-]{36}-.+", n) for n in left), left
    killed_run = {n[:36] for n in left}
    assert len(killed_run) == 1
    assert not os.path.exists(os.path.join(silver, "_mssql_cdc_spill"))
    # the next run spills there too, under its own name, and removes only its own
    p = run_cli(*apply_args(job, "--memory-mb", "1", "--scratch-dir",
                                                      scratch, "--verbose"), timeout=300)
    assert runs_spilled(p.stderr) > 0
    assert spill_files(scratch) == left
    assert not os.path.exists(os.path.join(silver, "_mssql_cdc_spill"))
    # without --scratch-dir a local silver spills in its own directory, as
    # before, and the two silvers are one
    silver2 = os.path.join(workdir, "silver2")
    p = run_cli(*apply_args(job, "--memory-mb", "1", "--verbose", silver=silver2), timeout=300)
    assert runs_spilled(p.stderr) > 0
    assert spill_files(scratch) == left
    one, two = (DeltaTable(t).to_pyarrow_table().sort_by("id") for t in (silver, silver2))
    assert one.num_rows > 1000 and one.equals(two)


def test_a_scratch_dir_that_cannot_be_one_is_refused_before_anything(sim, workdir):
    spec = Items()
    job, w = new_job(sim, workdir, spec, preload=0)
    w.preload(20)
    job.stream()
    notes = os.path.join(workdir, "notes.txt")
    with open(notes, "w") as f:
        f.write("a file\n")
    silver = silver_of(job)
    for bad, says in ((notes, "is a file"), ("s3://bucket/tmp", "not a local path"),
                      ("", "--scratch-dir is empty")):
        p = apply(job, "--scratch-dir", bad, check=False)
        assert p.returncode == 2, (bad, p.stderr)
        assert says in p.stderr, p.stderr
        assert not os.path.exists(silver)
