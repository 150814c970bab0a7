"""mssql-cdc repair: the keys that differ read again from the source and
appended to bronze as a recorded repair; the next apply fixes silver.

Faults are planted as they happen: another writer (delta-rs) deletes,
changes and adds silver rows, a bronze change row is lost before apply, a
key deleted in the source stays in silver. The report rows are written by
deltalake with the reference's report columns (or the keys given in a
file). After repair + apply, silver equals the source row for row; a
second repair of the run appends nothing; a kill between the bronze commit
and the facts row leaves nothing twice; a repair whose stamp is at or below
silver's applied_lsn is applied, and a later change of its key beats it.
"""
import datetime as dt
import json
import os
import signal
import subprocess
from decimal import Decimal

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from apply_jobs import apply, assert_silver_equals_source, control_row, silver_of
from conftest import CLI, run_cli
from snapshot_jobs import new_job
from workload import DB, Items, Regional, delta_rows, settle

REPORT_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("run_at", pa.timestamp("us")), ("silver", pa.string()),
    ("silver_version", pa.int64()), ("silver_lsn", pa.string()), ("source_lsn", pa.string()),
    ("bucket_lo", pa.string()), ("bucket_hi", pa.string()), ("source_rows", pa.int64()),
    ("source_key_sum", pa.decimal128(38, 0)), ("silver_rows", pa.int64()),
    ("silver_key_sum", pa.decimal128(38, 0)), ("status", pa.string()), ("hashed", pa.bool_()),
    ("key", pa.string()), ("failure_type", pa.string()), ("detail", pa.string())])


def write_report(path, run_id, failures, silver):
    """A report table as reconcile writes it: a bucket row, then a key row
    per (key dict, failure_type)."""
    now = dt.datetime(2026, 12, 1, 12, 0, 0)
    rows = [{"run_id": run_id, "run_at": now, "silver": silver, "status": "MISMATCH",
             "hashed": True, "bucket_lo": "0", "bucket_hi": "1000", "source_rows": 10,
             "silver_rows": 9, "source_key_sum": Decimal(5), "silver_key_sum": Decimal(4)}]
    for key, ft in failures:
        rows.append({"run_id": run_id, "run_at": now, "silver": silver,
                     "status": "IN_FLIGHT" if ft == "IN_FLIGHT" else "MISMATCH",
                     "key": json.dumps(key), "failure_type": ft, "detail": "{}"})
    full = [{f.name: r.get(f.name) for f in REPORT_SCHEMA} for r in rows]
    write_deltalake(path, pa.Table.from_pylist(full, schema=REPORT_SCHEMA), mode="append")


def repair_args(job, *extra):
    return ["repair", "--captureInstance", job.spec.capture_instance,
            "--connectionString", job.sim.connection_string(DB),
            "--bronze", job.bronze, "--facts-table", job.facts, *extra]


def repair(job, *extra, env=None, check=True):
    p = run_cli(*repair_args(job, *extra), env=env, check=False)
    if not check:
        return p
    assert p.returncode == 0, f"repair exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def repair_rows(job):
    """bronze's repair rows: change operations without a _seqval."""
    return [r for r in delta_rows(job.bronze, ["id", "_operation", "_seqval", "_start_lsn",
                                               "_batch_id"])
            if r["_operation"] != 0 and r["_seqval"] is None]


def repair_facts(job):
    return [r for r in delta_rows(job.facts) if r["event"] == "repair"]


def txns(table):
    """The latest txn version of each app id in a table's log."""
    out = {}
    log = os.path.join(table, "_delta_log")
    for name in sorted(os.listdir(log)):
        if name.endswith(".json"):
            with open(os.path.join(log, name)) as f:
                for line in f:
                    a = json.loads(line)
                    if "txn" in a:
                        out[a["txn"]["appId"]] = a["txn"]["version"]
    return out


def stream_txn(job):
    """The stream's txn version in bronze, and its verdict."""
    row = control_row(job, job.bronze)
    v = txns(job.bronze).get(job.app_id)
    assert v is not None
    return v, row["finalized_until"], row["end_lsn"]


def source_update(job, sql):
    job.sim.run(sql, database=DB)
    settle(job.sim)


def drop_bronze_change(job, key, op):
    """A change row of key lost before apply: deleted from bronze by delta-rs."""
    rows = [r for r in delta_rows(job.bronze, ["id", "_operation", "_start_lsn"])
            if r["id"] == key and r["_operation"] == op]
    assert rows, (key, op)
    last = max(r["_start_lsn"] for r in rows)
    DeltaTable(job.bronze).delete(f"id = {key} AND _start_lsn = '{last}'")


def test_repair_fixes_planted_faults_through_apply(sim, workdir):
    spec = Items(key_space=900)
    job, w = new_job(sim, workdir, spec, preload=0, seed=3)
    w.preload(300)
    job.stream()
    apply(job)
    assert_silver_equals_source(job)
    silver = silver_of(job)
    ids = sorted(r["id"] for r in delta_rows(silver, ["id"]))
    a, b, d, e, f = ids[10], ids[20], ids[30], ids[40], ids[50]
    c = max(ids) + 1000  # no such key in the source
    # a bronze update of d and the delete of e are lost before apply
    source_update(job, f"UPDATE dbo.items SET note = N'lost' WHERE id = {d}; "
                       f"DELETE FROM dbo.items WHERE id = {e};")
    job.stream()
    drop_bronze_change(job, d, 4)
    drop_bronze_change(job, e, 1)
    apply(job)
    # another writer: a row deleted, a row changed, a row added (no _start_lsn)
    DeltaTable(silver).delete(f"id = {a}")
    DeltaTable(silver).update(predicate=f"id = {b}", updates={"name": "'by hand'"})
    added = pa.Table.from_pylist([{"id": c, "name": "ghost"}], schema=pa.schema(
        [("id", pa.int32()), ("name", pa.string())]))
    write_deltalake(silver, added, mode="append", schema_mode="merge")
    before_stream = stream_txn(job)
    report = os.path.join(workdir, "report")
    run = "11111111-2222-3333-4444-555555555555"
    write_report(report, run, [({"id": a}, "MISSING_TARGET"), ({"id": b}, "RECORD_DIFF"),
                               ({"id": c}, "MISSING_SOURCE"), ({"id": d}, "RECORD_DIFF"),
                               ({"id": e}, "MISSING_SOURCE"), ({"id": f}, "IN_FLIGHT")], silver)
    write_report(report, "another-run", [({"id": f}, "RECORD_DIFF")], silver)
    r = repair(job, "--report-table", report, "--run-id", run)
    assert r["run_id"] == run and not r["already"], r
    assert (r["keys"], r["images"], r["deletes"]) == (5, 3, 2), r
    rows = repair_rows(job)
    assert sorted((x["id"], x["_operation"]) for x in rows) == sorted(
        [(a, 4), (b, 4), (d, 4), (c, 1), (e, 1)])
    assert {x["_start_lsn"] for x in rows} == {r["lsn"]} and all(x["_batch_id"] is None for x in rows)
    facts = repair_facts(job)
    assert len(facts) == 1 and facts[0]["max_lsn"] == r["lsn"], facts
    detail = json.loads(facts[0]["detail"])
    assert detail == {"run_id": run, "lsn": r["lsn"], "images": 3, "deletes": 2, "keys": 5}
    # the stream's txn and verdict are the stream's; the repair has its own
    assert stream_txn(job) == before_stream
    assert txns(job.bronze)["mssql-cdc.repair." + run] == 0
    assert txns(job.facts)["mssql-cdc.repair." + run + "#facts"] == 0
    apply(job)
    assert_silver_equals_source(job)
    # again with the run id: nothing appended, nothing recorded twice
    version = DeltaTable(job.bronze).version()
    again = repair(job, "--report-table", report, "--run-id", run)
    assert again["already"] and again["lsn"] == r["lsn"] and again["images"] == 3, again
    assert DeltaTable(job.bronze).version() == version and len(repair_facts(job)) == 1
    apply(job)
    assert_silver_equals_source(job)
    # the stream goes on as before, and apply after it
    with w:
        w.wait_for(40)
    job.stream()
    apply(job)
    assert_silver_equals_source(job)


def test_kill_after_bronze_commit_a_repair_below_applied_lsn_and_a_later_delete(sim, workdir):
    spec = Items(key_space=600)
    job, w = new_job(sim, workdir, spec, preload=0, seed=8)
    w.preload(200)
    job.stream()
    apply(job)
    silver = silver_of(job)
    ids = sorted(r["id"] for r in delta_rows(silver, ["id"]))
    a, b, c = ids[5], ids[6], ids[7]
    DeltaTable(silver).update(predicate=f"id IN ({a}, {b}, {c})", updates={"name": "'by hand'"})
    keys = os.path.join(workdir, "keys.jsonl")
    with open(keys, "w") as fh:
        fh.write(f'{{"id": {a}}}\n\n  \n{{"id": {b}}}\r\n{{"id": {c}}}\n')  # blank lines skipped
    # killed between the bronze commit and its facts row
    p = subprocess.run([CLI, *repair_args(job, "--keys-file", keys, "--run-id", "r1")],
                       env={**os.environ, "MCDC_CRASH_AT": "after_bronze"}, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr[-2000:])
    assert len(repair_rows(job)) == 3 and repair_facts(job) == []
    stamp = repair_rows(job)[0]["_start_lsn"]
    # then b is deleted and c updated in the source, and both applied:
    # silver's position passes the repair's stamp before it is recorded
    source_update(job, f"DELETE FROM dbo.items WHERE id = {b}; "
                       f"UPDATE dbo.items SET name = N'later' WHERE id = {c}")
    with w:
        w.wait_for(20)
    job.stream()
    first = apply(job)
    assert first["applied_lsn"] > stamp
    # the rerun records it, appending nothing
    r = repair(job, "--keys-file", keys, "--run-id", "r1")
    assert r["already"] and r["lsn"] == stamp and (r["images"], r["deletes"]) == (3, 0), r
    assert len(repair_rows(job)) == 3 and len(repair_facts(job)) == 1
    # the repair, below applied_lsn, is applied: a is the source's again;
    # b's later delete and c's later update beat their repair images
    second = apply(job)
    assert second["applied_lsn"] == first["applied_lsn"] and second["updated"] == 1, second
    got = {x["id"]: x["name"] for x in delta_rows(silver, ["id", "name"])}
    assert b not in got and got[a] != "by hand" and got[c] == "later"
    assert_silver_equals_source(job)
    # a later apply does not apply the repair again
    third = apply(job)
    assert third["passes"] == 0 or third["updated"] == 0, third


def test_composite_keys_many_at_once_and_bad_keys(sim, workdir):
    spec = Regional(ids_per_region=400)
    job, w = new_job(sim, workdir, spec, preload=0, seed=4)
    w.preload(1500)
    job.stream()
    apply(job)
    silver = silver_of(job)
    present = [(x["region"], x["id"]) for x in delta_rows(silver, ["region", "id"])]
    DeltaTable(silver).delete("id % 3 = 0")
    keys = os.path.join(workdir, "keys.jsonl")
    absent = [("EU", 100000 + i) for i in range(800)]
    with open(keys, "w") as fh:
        for region, i in present + absent:
            fh.write(json.dumps({"id": i, "region": region}) + "\n")
    r = repair(job, "--keys-file", keys)
    assert r["keys"] == len(present) + len(absent), r
    assert (r["images"], r["deletes"]) == (len(present), len(absent)), r
    apply(job)
    assert_silver_equals_source(job)
    # bad keys: a clear error, nothing written
    version = DeltaTable(job.bronze).version()
    for bad, says in [({"id": 1}, "'region'"), ({"region": "EU", "id": "x"}, "integer"),
                      ({"region": "EU", "id": 1, "qty": 2}, "'qty' is not a key column"),
                      ([1, 2], "not a JSON object")]:
        with open(keys, "w") as fh:
            fh.write(json.dumps({"region": "EU", "id": 1}) + "\n" + json.dumps(bad) + "\n")
        p = repair(job, "--keys-file", keys, check=False)
        assert p.returncode == 2 and "key 2" in p.stderr and says in p.stderr, p.stderr
    assert DeltaTable(job.bronze).version() == version
    p = repair(job, "--keys-file", keys, "--run-id", "no spaces", check=False)
    assert p.returncode == 2 and "run id" in p.stderr, p.stderr


def test_a_repair_whose_bronze_commit_is_gone_or_is_another_writers_is_refused(sim, workdir):
    """A repair runs on the job frame (a job of one unit on the lake), so its
    state is checked as a stream's is before anything is written: bronze
    restored from an older copy without the repair's commit while its facts
    row stands (exit 8: a rerun would stamp new rows the row does not
    describe), and a commit under a run's app id by another program (exit
    12)."""
    spec = Items(key_space=600)
    job, w = new_job(sim, workdir, spec, preload=0, seed=9)
    w.preload(100)
    job.stream()
    ids = sorted({r["id"] for r in delta_rows(job.bronze, ["id"])})
    keys = os.path.join(workdir, "keys.jsonl")
    with open(keys, "w") as fh:
        fh.write(f'{{"id": {ids[1]}}}\n{{"id": {ids[2]}}}\n')
    first = repair(job, "--keys-file", keys, "--run-id", "r1")
    assert not first["already"] and len(repair_facts(job)) == 1
    # what restoring an older backup of bronze does: its last commit, the repair's, goes
    log = os.path.join(job.bronze, "_delta_log")
    last = max(n for n in os.listdir(log) if n.endswith(".json"))
    assert "mssql-cdc.repair.r1" in open(os.path.join(log, last)).read()
    os.remove(os.path.join(log, last))
    version = DeltaTable(job.bronze).version()
    p = repair(job, "--keys-file", keys, "--run-id", "r1", check=False)
    assert p.returncode == 8, (p.returncode, p.stderr)
    assert "mssql-cdc.repair.r1" in p.stderr and "are gone" in p.stderr, p.stderr
    assert DeltaTable(job.bronze).version() == version and repair_rows(job) == []
    assert len(repair_facts(job)) == 1
    # another program commits under the app id of run r2 first
    bronze = DeltaTable(job.bronze)
    write_deltalake(job.bronze, bronze.to_pyarrow_table().slice(0, 0), mode="append",
                    commit_properties=CommitProperties(
                        app_transactions=[Transaction(app_id="mssql-cdc.repair.r2", version=0)]))
    version = DeltaTable(job.bronze).version()
    p = repair(job, "--keys-file", keys, "--run-id", "r2", check=False)
    assert p.returncode == 12, (p.returncode, p.stderr)
    assert "mssql-cdc.repair.r2" in p.stderr, p.stderr
    assert DeltaTable(job.bronze).version() == version and len(repair_facts(job)) == 1
