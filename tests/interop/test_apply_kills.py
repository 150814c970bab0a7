"""mssql-cdc apply killed (SIGKILL) at each of its crash points and at
random: the next run gives the same silver, with no key lost or doubled.

The points (MCDC_CRASH_AT, as the stream's): after_plan (nothing written),
during_merge (the new files and the index written, nothing committed),
after_bronze (the merge committed, the control row not yet: reference
crash point 8), after_commit (the control row written, the verdict not
yet), during_verdict. After after_bronze the rerun writes the position the
merge commit planned and merges nothing again: silver gets no second commit
for that pass.
"""
import os
import random
import signal
import time

import pytest

from apply_jobs import (apply, assert_silver_equals_source, control_row, silver_commits, silver_of,
                        spawn_apply, wait_killed)
from snapshot_jobs import new_job
from workload import Items, delta_rows


def _prepared(sim, workdir, seed, *extra):
    job, w = new_job(sim, workdir, Items(key_space=2000), preload=0, seed=seed)
    w.preload(600)
    job.stream()
    apply(job, "--file-rows", "150", *extra)
    with w:
        w.wait_for(150)
    job.stream()
    return job


POINTS = ["after_plan", "during_merge", "after_bronze", "after_commit", "during_verdict"]


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_each_point_leaves_silver_the_next_run_completes(sim, workdir, point):
    job = _prepared(sim, workdir, seed=31 + POINTS.index(point))
    silver = silver_of(job)
    commits = silver_commits(silver)
    position = control_row(job, silver)["applied_lsn"]
    p = spawn_apply(job, "--file-rows", "150", env={"MCDC_CRASH_AT": point})
    wait_killed(p)
    after_kill = silver_commits(silver)
    if point in ("after_plan", "during_merge"):
        assert after_kill == commits, "a pass killed before its commit committed something"
        assert control_row(job, silver)["applied_lsn"] == position
    else:
        assert len(after_kill) == len(commits) + 1
    if point == "after_bronze":
        assert control_row(job, silver)["applied_lsn"] == position  # behind the data
    r = apply(job, "--file-rows", "150")
    assert_silver_equals_source(job)
    assert control_row(job, silver)["applied_lsn"] == r["applied_lsn"]
    again = silver_commits(silver)
    if point != "after_plan" and point != "during_merge":
        # the rerun replayed the pass's position: no second merge of it
        assert again == after_kill, (again, after_kill)
    # what a killed run spilled is gone after the next
    spill = os.path.join(silver, "_mssql_cdc_spill")
    assert not os.path.isdir(spill) or not os.listdir(spill)
    fu = control_row(job, silver)["finalized_until"]
    assert fu is not None


@pytest.mark.parametrize("point", ["during_merge", "after_bronze"])
def test_a_kill_of_a_merge_on_read_pass_leaves_silver_the_next_run_completes(sim, workdir, point):
    """The same for a silver merged on read: a pass killed before its commit
    leaves its DV file unreferenced; killed after it, the rerun merges
    nothing again."""
    job = _prepared(sim, workdir, 41 + (point == "after_bronze"), "--deletion-vectors")
    silver = silver_of(job)
    commits = silver_commits(silver)
    p = spawn_apply(job, "--file-rows", "150", env={"MCDC_CRASH_AT": point})
    wait_killed(p)
    after_kill = silver_commits(silver)
    assert len(after_kill) == len(commits) + (point == "after_bronze")
    apply(job, "--file-rows", "150")
    assert_silver_equals_source(job)
    if point == "after_bronze":
        assert silver_commits(silver) == after_kill
    log = "".join(open(os.path.join(silver, "_delta_log", f)).read()
                  for f in sorted(os.listdir(os.path.join(silver, "_delta_log"))) if f.endswith(".json"))
    assert '"deletionVector"' in log, "the pass did not merge on read"


def test_random_kills_of_apply_never_lose_or_double_a_key(sim, workdir):
    rng = random.Random(7)
    job, w = new_job(sim, workdir, Items(key_space=3000), preload=0, seed=21)
    w.preload(1500)
    job.stream()
    silver = silver_of(job)
    kills = 0
    with w:
        for _ in range(6):
            w.wait_for(40)
            job.stream()
            p = spawn_apply(job, "--file-rows", "200", "--memory-mb", "1")
            time.sleep(rng.uniform(0.005, 0.06))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
            p.communicate(timeout=60)
            log = os.path.join(silver, "_delta_log")
            created = os.path.isdir(log) and any(n.endswith(".json") for n in os.listdir(log))
            keys = [r["id"] for r in delta_rows(silver, ["id"])] if created else []
            assert len(keys) == len(set(keys)), "a killed apply left a key twice"
    job.stream()
    apply(job, "--file-rows", "200")
    assert_silver_equals_source(job)
    assert kills >= 1
