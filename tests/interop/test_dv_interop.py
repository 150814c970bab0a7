"""Deletion vectors written by Spark (delta-spark, delta.enableDeletionVectors,
DELETE and UPDATE) in the tables mssql-cdc reads: a bronze apply reads, a
silver apply merges into, a copy seed --from reads. Every time our read
(mssql-cdc table-rows) equals Spark's own, delta-rs' and DuckDB's, and a
checkpoint we write of a table with deletion vectors is read by Spark.

One Spark session (test_reference_peer's) serves the module.
Run: .venv/bin/python -m pytest tests/interop/test_dv_interop.py
"""
import glob
import json
import os

import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from apply_jobs import apply, assert_merged_over, assert_silver_equals_source, silver_of
from conftest import duckdb_with_delta, run_cli
from snapshot_jobs import new_job
from test_reconcile import reconcile
from workload import Items, delta_rows, source_rows

try:
    from test_reference_peer import spark  # noqa: F401 - the module-scoped session
except pytest.skip.Exception as e:  # pyspark or delta not installed
    pytest.skip(str(e), allow_module_level=True)


def enable_dvs(spark, path, checkpoint_every=None):
    props = "'delta.enableDeletionVectors' = 'true'"
    if checkpoint_every:
        props += f", 'delta.checkpointInterval' = '{checkpoint_every}'"
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({props})")


def dv_adds(path):
    """The live adds that carry a deletion vector, replaying the JSON log: a
    file is (path, its DV's id), so a commit's add(path, dv) and
    remove(path) are two files (Spark writes the add first)."""
    def uid(a):
        dv = a.get("deletionVector")
        if not dv:
            return None
        off = dv.get("offset")
        return dv["storageType"] + dv["pathOrInlineDv"] + (f"@{off}" if off is not None else "")
    live = {}
    for f in sorted(glob.glob(os.path.join(path, "_delta_log", "*.json"))):
        acts = [json.loads(line) for line in open(f)]
        for a in acts:
            if "remove" in a:
                live.pop((a["remove"]["path"], uid(a["remove"])), None)
        for a in acts:
            if "add" in a:
                live[(a["add"]["path"], uid(a["add"]))] = a["add"]
    return {k: a["deletionVector"] for k, a in live.items() if a.get("deletionVector")}


def ours(path, cols):
    p = run_cli("table-rows", path)
    return sorted(tuple(json.loads(ln)[c] for c in cols) for ln in p.stdout.splitlines() if ln)


def assert_all_read_the_same(spark, path, cols):
    """Our rows == Spark's == delta-rs' == DuckDB's (cols: ints and texts)."""
    want = ours(path, cols)
    q = ", ".join(f'"{c}"' for c in cols)
    spark_got = sorted(tuple(r) for r in spark.read.format("delta").load(path).select(*cols).collect())
    rs = sorted(tuple(r[c] for c in cols) for r in delta_rows(path, cols))
    duck = sorted(duckdb_with_delta().execute(f"SELECT {q} FROM delta_scan('{path}')").fetchall())
    assert want == spark_got, "our read differs from Spark's"
    assert want == rs, "our read differs from delta-rs'"
    assert want == duck, "our read differs from DuckDB's"
    return want


def test_spark_dvs_in_silver_are_read_and_merged_over(sim, workdir, spark):
    spec = Items(key_space=1200)
    job, w = new_job(sim, workdir, spec, preload=0, seed=5)
    w.preload(400)
    job.stream()
    first = apply(job, "--file-rows", "100")
    silver = silver_of(job)
    enable_dvs(spark, silver)
    before = {r["id"] for r in delta_rows(silver, ["id"])}
    spark.sql(f"DELETE FROM delta.`{silver}` WHERE id % 7 = 0")
    spark.sql(f"UPDATE delta.`{silver}` SET note = 'by hand' WHERE id % 5 = 1")
    assert dv_adds(silver), "Spark wrote no deletion vector"
    got = assert_all_read_the_same(spark, silver, ["id", "name", "note"])
    deleted = before - {r[0] for r in got}
    marked = {r[0] for r in got if r[2] == "by hand"}
    assert deleted and marked
    with w:
        w.wait_for(150)
    job.stream()
    r = apply(job, "--file-rows", "100")
    assert not r["rebuilt"] and r["applied_lsn"] > first["applied_lsn"]
    assert_merged_over(job, spec, first["applied_lsn"], deleted, marked)
    assert_all_read_the_same(spark, silver, ["id", "name", "note"])


def test_spark_dvs_in_bronze_are_skipped_and_our_checkpoint_keeps_them(sim, workdir, spark):
    spec = Items(key_space=900)
    job, w = new_job(sim, workdir, spec, preload=0, seed=9)
    w.preload(300)
    with w:
        w.wait_for(100)
    job.stream()
    enable_dvs(spark, job.bronze, checkpoint_every=1)
    spark.sql(f"DELETE FROM delta.`{job.bronze}` WHERE id % 11 = 0")
    assert dv_adds(job.bronze), "Spark wrote no deletion vector"
    cols = ["id", "_operation", "name"]
    assert_all_read_the_same(spark, job.bronze, cols)
    # more changes: our stream's append writes the checkpoint (interval 1)
    with w:
        w.wait_for(60)
    job.stream()
    cps = sorted(glob.glob(os.path.join(job.bronze, "_delta_log", "*.checkpoint.parquet")))
    ours_cp = pq.read_table(cps[-1]).to_pylist()
    dvs = [a["add"]["deletionVector"] for a in ours_cp if a.get("add") and a["add"]["deletionVector"]]
    assert dvs and all(d["storageType"] and d["cardinality"] > 0 for d in dvs), cps[-1]
    # it is ours, of the stream's commit: Spark, delta-rs and DuckDB read through it
    version = int(os.path.basename(cps[-1]).split(".")[0])
    commit = os.path.join(job.bronze, "_delta_log", f"{version:020d}.json")
    info = [json.loads(ln)["commitInfo"] for ln in open(commit) if '"commitInfo"' in ln][0]
    assert "mssql-cdc" in info.get("engineInfo", ""), info
    assert_all_read_the_same(spark, job.bronze, cols)
    # apply reads bronze without the deleted changes: a key whose changes
    # were all deleted is absent unless it changed again afterwards
    apply(job)
    later = {b["id"] for b in delta_rows(job.bronze, ["id"])}
    src = {row[0]: row for row in source_rows(sim, spec)}
    got = {r["id"]: tuple(r[c] for c in spec.column_names)
           for r in delta_rows(silver_of(job), spec.column_names)}
    for k in set(src) | set(got):
        if k % 11 != 0 or k in later:
            assert got.get(k) == src.get(k), (k, got.get(k), src.get(k))
        else:
            assert k not in got, k
    assert any(k % 11 == 0 for k in src) and any(k % 11 == 0 and k not in got for k in src)


def test_seed_from_a_spark_copy_with_deletion_vectors(sim, workdir, spark):
    from test_seed import copy_of_source, max_lsn, seed_args, settle
    from test_snapshot import insert, make_db
    make_db(sim, before_cdc=60)
    insert(sim, 100, 6)
    settle(sim)
    as_of = max_lsn(sim)
    copy = os.path.join(workdir, "copy")
    write_deltalake(copy, copy_of_source(sim))
    enable_dvs(spark, copy)
    spark.sql(f"DELETE FROM delta.`{copy}` WHERE order_id % 3 = 0")
    assert dv_adds(copy), "Spark wrote no deletion vector"
    kept = assert_all_read_the_same(spark, copy, ["order_id", "status"])
    run_cli(*seed_args(sim, workdir, copy, as_of))
    bronze = [(r["order_id"], r["status"]) for r in delta_rows(os.path.join(workdir, "bronze"),
                                                               ["order_id", "status"])]
    assert sorted(bronze) == kept and all(k % 3 != 0 for k, _ in bronze)


def test_a_merge_on_read_silver_is_read_equal_by_every_reader(sim, workdir, spark):
    """apply --deletion-vectors: passes mark replaced rows in DVs and write
    the images as new files; silver equals the source through delta-rs,
    DuckDB, Spark and our reader after every pass."""
    spec = Items(key_space=1500)
    job, w = new_job(sim, workdir, spec, preload=0, seed=17)
    w.preload(500)
    job.stream()
    apply(job, "--file-rows", "120", "--deletion-vectors")
    silver = silver_of(job)
    proto = [json.loads(ln)["protocol"] for ln in open(os.path.join(
        silver, "_delta_log", "00000000000000000000.json")) if '"protocol"' in ln][0]
    assert proto["minReaderVersion"] == 3 and "deletionVectors" in proto["readerFeatures"]
    merged_on_read = 0
    for _ in range(3):
        with w:  # the source is still while silver is compared with it
            w.wait_for(60)
        job.stream()
        r = apply(job, "--file-rows", "120")
        assert not r["rebuilt"] and r["updated"] + r["deleted"] > 0
        assert_silver_equals_source(job)
        if dv_adds(silver) and not merged_on_read:  # Spark and ours on live DVs
            assert_silver_equals_source(job, spark=spark, readers=())
            assert_all_read_the_same(spark, silver, ["id", "name", "note"])
            # reconcile reads silver through its DVs: every bucket matches
            res = reconcile(job, "--sample", "1")
            assert res["mismatch"] == 0 and res["failures"] == {}, res
            merged_on_read = 1
    # small files decay fast: the fold policy may have folded some passes back
    assert merged_on_read, "no pass left deletion vectors live"
