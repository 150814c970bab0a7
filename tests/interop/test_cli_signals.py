"""SIGINT and SIGTERM on the one-shot commands that had no stop before
(snapshot, seed; repair and reconcile share the mechanism): the job stops
before it commits its rows, the command says it stopped on request (exit
1), the table holds none of them, and a rerun does the whole job.

The simulator's delay fault holds the command's queries, so the signal
lands while the job runs."""
import json
import os
import signal
import subprocess
import time

import pyarrow.parquet as pq
from deltalake import DeltaTable

from conftest import CLI, run_cli
from test_start_many import DB, make_db, write

CANCELLED = 1


def delayed(sim, ms, times):
    sim.run(f"EXEC sim.fault @kind = 'delay', @ms = {ms}, @times = {times};")


def rows_of(path):
    """The rows of the Delta table at path; 0 when there is none (the job may
    have created the empty table before its read: that is no commit of rows)."""
    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return 0
    return DeltaTable(path).to_pyarrow_table().num_rows


def interrupted(args, sig, after_s=0.8):
    """Runs the CLI, sends sig once it has run after_s seconds; its exit code
    and stderr."""
    p = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(after_s)
    assert p.poll() is None, "the command ended before the signal: " + p.communicate()[1]
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err


def test_snapshot_stops_before_its_commit_and_a_rerun_takes_it(sim, workdir):
    make_db(sim)
    write(sim, ["t1"], 1, 3)
    bronze = os.path.join(workdir, "bronze")
    args = ["snapshot", "--connectionString", sim.connection_string(DB),
            "--captureInstance", "dbo_t1", "--target", bronze, "--progress", "none"]
    delayed(sim, 1500, 4)
    rc, out, err = interrupted(args, signal.SIGINT)
    assert rc == CANCELLED, err
    assert "stopped on request" in err and "nothing of it was written" in err, err
    assert out == "", out  # no offset printed: nothing was taken
    assert rows_of(bronze) == 0, "a cancelled snapshot committed rows"
    sim.run("EXEC sim.clear_faults;")
    p = run_cli(*args)
    assert '"lsn"' in p.stdout
    rows = DeltaTable(bronze).to_pyarrow_table()
    assert sorted(rows["id"].to_pylist()) == [1, 3, 5]  # the rows the table holds


def test_seed_stops_on_sigterm_and_writes_nothing(sim, workdir):
    make_db(sim)
    write(sim, ["t1"], 1, 2)
    copy = os.path.join(workdir, "copy.parquet")
    bronze = os.path.join(workdir, "seeded")
    # the copy to seed from: the table's rows as a snapshot read them
    snap = os.path.join(workdir, "snap")
    off = run_cli("snapshot", "--connectionString", sim.connection_string(DB),
                  "--captureInstance", "dbo_t1", "--target", snap, "--progress", "none")
    lsn = json.loads(off.stdout)["lsn"]
    t = DeltaTable(snap).to_pyarrow_table().select(["id", "v"])
    pq.write_table(t, copy)
    args = ["seed", "--connectionString", sim.connection_string(DB),
            "--captureInstance", "dbo_t1", "--target", bronze, "--from", copy,
            "--as-of", lsn, "--progress", "none"]
    delayed(sim, 1500, 4)
    rc, out, err = interrupted(args, signal.SIGTERM)
    assert rc == CANCELLED, err
    assert "stopped on request" in err and "nothing of it was written" in err, err
    assert rows_of(bronze) == 0, "a cancelled seed committed rows"
    sim.run("EXEC sim.clear_faults;")
    run_cli(*args)
    assert sorted(DeltaTable(bronze).to_pyarrow_table()["id"].to_pylist()) == \
        sorted(t["id"].to_pylist())
