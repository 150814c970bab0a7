"""apply and a key that is not unique: bronze that proves it (two snapshot
rows of one key at one LSN, two inserts of one key with no delete between) is
refused with exit 21 before the merge commits anything, naming the key
column and a value; the table's real key then applies. Streams that rank
rows of one key alike without proving anything (an insert, delete and
insert of one key in one transaction, key updates) are not refused."""
import os

from apply_jobs import apply, assert_silver_equals_source, control_row, silver_of
from snapshot_jobs import Job, new_job
from workload import DB, Events, Workload, enable_cdc, insert_sql, make_db, settle

NOT_UNIQUE = 21


def refused(job, p, column, value):
    assert p.returncode == NOT_UNIQUE, (p.returncode, p.stdout, p.stderr[-2000:])
    assert "not unique" in p.stderr and f"{column} = {value}" in p.stderr, p.stderr
    assert "--keys" in p.stderr, p.stderr
    # nothing committed: no silver, no position
    assert not os.path.exists(os.path.join(silver_of(job), "_delta_log"))
    assert control_row(job, silver_of(job)) is None


def test_a_snapshot_of_a_column_that_is_not_unique_is_refused(sim, workdir):
    """grp is shared by many rows: the snapshot holds two rows of a grp."""
    spec = Events(key_space=2000, groups=12)
    job, _ = new_job(sim, workdir, spec, preload=300, seed=3)
    job.stream("--bootstrap")
    p = apply(job, keys=["grp"], check=False)
    grp = int(p.stderr.split("grp = ")[1].split()[0]) if "grp = " in p.stderr else None
    refused(job, p, "grp", grp)
    assert 0 <= grp < 12
    apply(job, keys=["rid"])
    assert_silver_equals_source(job)


def test_a_heap_holding_a_row_twice_is_refused(sim, workdir):
    """A heap holds one row twice, every column equal: the snapshot has both."""
    spec = Events(key_space=2000, groups=12)
    make_db(sim, spec)
    w = Workload(sim, spec, seed=4)
    w.preload(80, capture=False)
    row = dict(zip(spec.column_names, sim.run(
        f"SELECT {', '.join(spec.column_names)} FROM dbo.events WHERE rid = "
        f"(SELECT min(rid) FROM dbo.events)", database=DB)[0]))
    sim.run(insert_sql(spec, [row]), database=DB)
    enable_cdc(sim, spec)
    job = Job(sim, spec, workdir)
    job.stream("--bootstrap")
    refused(job, apply(job, keys=["rid"], check=False), "rid", row["rid"])


def test_a_transaction_inserting_one_key_twice_is_refused(sim, workdir):
    spec = Events(key_space=2000, groups=12)
    job, _ = new_job(sim, workdir, spec, preload=0)

    def tx(*rows_or_sql):
        parts = [r if isinstance(r, str) else insert_sql(spec, [r]) for r in rows_or_sql]
        sim.run("BEGIN TRAN;\n" + "\n".join(parts) + "\nCOMMIT;", database=DB)

    def row(rid, payload):
        return {"rid": rid, "grp": rid % 12, "payload": payload, "amount": None, "blob": None}

    # not refused: one transaction inserts, deletes and inserts rid 5 again;
    # another deletes rid 6 and inserts it again; a third moves rid 7's grp
    tx(row(6, "six"), row(7, "seven"))
    tx(row(5, "a"), "DELETE FROM dbo.events WHERE rid = 5;", row(5, "b"))
    tx("DELETE FROM dbo.events WHERE rid = 6;", row(6, "six again"),
       "UPDATE dbo.events SET grp = 3 WHERE rid = 7;")
    settle(sim)
    job.stream()
    apply(job, keys=["rid"])
    assert_silver_equals_source(job)
    first = control_row(job, silver_of(job))["applied_lsn"]
    # refused: one transaction inserts rid 9 twice (a heap takes it)
    tx(row(9, "one"), row(8, "between"), row(9, "two"))
    settle(sim)
    job.stream()
    p = apply(job, keys=["rid"], check=False)
    assert p.returncode == NOT_UNIQUE, (p.returncode, p.stderr[-2000:])
    assert "two inserts of rid = 9 (the later at LSN" in p.stderr, p.stderr
    # the pass committed nothing: silver's position is the first pass's
    assert control_row(job, silver_of(job))["applied_lsn"] == first


def test_two_transactions_inserting_one_key_are_refused(sim, workdir):
    """--keys grp on a stream of inserts: each grp is inserted again and again with no
    delete between, which a unique key never is (the sweep's case: 40 orders merged
    into 2 silver rows, exit 0)."""
    spec = Events(key_space=2000, groups=3)
    job, w = new_job(sim, workdir, spec, preload=0, seed=5)
    with w:
        w.wait_for(40)
    job.stream()
    p = apply(job, keys=["grp"], check=False)
    assert p.returncode == NOT_UNIQUE, (p.returncode, p.stderr[-2000:])
    assert "two inserts of grp = " in p.stderr and "--keys" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(silver_of(job), "_delta_log"))
    # by its real key the same bronze applies
    apply(job, keys=["rid"])
    assert_silver_equals_source(job)
