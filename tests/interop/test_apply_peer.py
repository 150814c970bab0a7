"""Silver built by mssql-cdc apply, read by delta-rs, DuckDB and Spark, after a
bootstrap (full snapshot) and a re-snapshot (rebuild), and after a chunked
snapshot backfilled and applied wave by wave; each time equal to the source
table row for row, and to the silver the reference's apply_changes
(mssql-cdc-pyspark 0.8.0 on local Spark) builds from the same bronze. And an
SCD type 2 history through a re-snapshot, read by Spark (the session is this
module's).
"""
import json
import os
import sys

import pytest

from apply_jobs import apply, assert_silver_equals_source, control_row, silver_of, silver_rows
from conftest import PASSWORD, run_cli
from snapshot_jobs import CHUNKED, new_job
from workload import DB, Items, delta_rows, source_rows

pytest.importorskip("pyspark")
pytest.importorskip("delta")
mssql_cdc = pytest.importorskip("mssql_cdc", reason="the reference, mssql-cdc-pyspark, is not installed")
pytest.importorskip("mssql_python")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from test_reference_peer import spark  # noqa: E402,F401  (the module-scoped session)


def ref_options(job):
    cs = (f"Server=127.0.0.1,{job.sim.port};Database={DB};UID=sa;PWD={PASSWORD};"
          "Encrypt=yes;TrustServerCertificate=yes")
    return {"captureInstance": job.spec.capture_instance, "connectionString": cs,
            "backend": "mssql-python"}


def ref_apply(spark, job, silver):  # noqa: F811
    from mssql_cdc import apply_changes
    return apply_changes(spark, job.bronze, silver, capture_instance=job.spec.capture_instance,
                         keys=list(job.spec.keys), control_table=job.control,
                         facts_table=job.facts, options=ref_options(job), granularity="minute")


def same_as_reference(spark, job, ours, theirs):  # noqa: F811
    """Both silvers hold the same rows: captured columns, _start_lsn, _commit_ts."""
    cols = [*job.spec.column_names, "_start_lsn", "_commit_ts"]
    mine = sorted(tuple(r[c] for c in cols) for r in delta_rows(ours, cols))
    ref = sorted(tuple(r[c] for c in cols) for r in delta_rows(theirs, cols))
    assert mine == ref, f"ours {len(mine)} rows, the reference's {len(ref)}: " \
                        f"{sorted(set(mine) ^ set(ref))[:5]}"


def test_bootstrap_then_resnapshot_read_everywhere_and_as_the_reference(spark, sim, workdir):  # noqa: F811
    job, w = new_job(sim, workdir, Items(key_space=1500), preload=300, seed=41)
    job.stream("--bootstrap")
    with w:
        for _ in range(2):
            w.wait_for(30)
            job.stream()
            apply(job)
    job.stream()
    r = apply(job)
    assert r["rebuilt"] is False and r["applied_lsn"]
    assert_silver_equals_source(job)
    # a re-snapshot: silver is rebuilt from it and the changes after it
    with w:
        w.wait_for(20)
        run_cli("snapshot", *job.source(), "--target", job.bronze, "--resnapshot")
        w.wait_for(20)
    job.stream()
    r2 = apply(job)
    assert r2["rebuilt"] is True
    snap = control_row(job, silver_of(job))["snapshot_lsn"]
    assert snap and snap <= r2["applied_lsn"]
    assert_silver_equals_source(job, spark=spark)
    # the reference, from the same bronze (its first call rebuilds from the
    # newest snapshot too)
    theirs = os.path.join(workdir, "silver_ref")
    ref = ref_apply(spark, job, theirs)
    assert ref["bronze_found"] and ref["rebuilt"] is True and ref["applied_lsn"] == r2["applied_lsn"]
    same_as_reference(spark, job, silver_of(job), theirs)


def test_a_chunked_snapshot_is_applied_wave_by_wave(spark, sim, workdir):  # noqa: F811
    job, w = new_job(sim, workdir, Items(key_space=1500), preload=500, seed=43)
    job.stream(*CHUNKED)
    waves, held, sizes = [], [], []
    with w:
        while True:
            w.wait_for(15)
            _, st = job.backfill("--chunk-rows", "100", "--max-waves", "1",
                                 "--target-wave-seconds", "0")
            job.stream(*CHUNKED)
            r = apply(job)
            row = control_row(job, silver_of(job))
            if st["done"]:
                break
            # while open: its S and the last wave applied, the verdict held
            assert row["open_snapshot_lsn"] == st["snapshot"] == r["open_snapshot_lsn"], row
            waves.append(row["snapshot_wave"])
            held.append(row["finalized_until"])
            if len(waves) == 1:  # freshness names the snapshot that holds the verdict
                fr = json.loads(run_cli("finalization", "freshness", "--control-table",
                                        job.control, "--table", silver_of(job), "--json").stdout)
                assert fr["open_snapshot_lsn"] == st["snapshot"], fr
            sizes.append(len(silver_rows(job.spec, silver_of(job))))
            if len(waves) > 1:
                assert not r["rebuilt"], r
    assert len(waves) >= 2 and waves == sorted(waves) and len(set(waves)) == len(waves), waves
    assert all(h is None for h in held), held
    assert sizes[-1] > sizes[0], sizes  # each wave brings its chunks' rows
    # complete: rebuilt from S, the verdict free to move
    assert r["rebuilt"] is True and r["open_snapshot_lsn"] is None
    row = control_row(job, silver_of(job))
    assert row["open_snapshot_lsn"] is None and row["snapshot_wave"] is None
    assert row["snapshot_lsn"] == st["snapshot"]
    job.stream(*CHUNKED)
    r = apply(job)
    assert not r["rebuilt"]
    assert control_row(job, silver_of(job))["finalized_until"] is not None
    assert_silver_equals_source(job, spark=spark)
    theirs = os.path.join(workdir, "silver_ref")
    ref_apply(spark, job, theirs)
    same_as_reference(spark, job, silver_of(job), theirs)


def test_a_history_through_a_resnapshot_read_by_spark(spark, sim, workdir):  # noqa: F811
    """apply --scd-type 2 after a bootstrap and through a re-snapshot taken
    under a workload: the changes bronze holds before the snapshot keep their
    versions, the history equals the one computed from the change table, and
    Spark reads it as delta-rs does; by Spark SQL the open versions are the
    source table, and the state as of a time holds a key once at most."""
    from test_apply_scd2 import META, _norm, expected_history, silver_history
    job, w = new_job(sim, workdir, Items(key_space=600), preload=200, seed=47)
    job.stream("--bootstrap")
    apply(job, "--scd-type", "2")
    prior = silver_history(job, "delta-rs")
    after = control_row(job, silver_of(job))["applied_lsn"]
    with w:
        w.wait_for(30)
        job.stream()  # in bronze, not applied before the re-snapshot
        w.wait_for(10)
        run_cli("snapshot", *job.source(), "--target", job.bronze, "--resnapshot")
        w.wait_for(20)
    job.stream()
    r = apply(job, "--scd-type", "2")
    assert r["rebuilt"]
    want = expected_history(job, prior=prior, after=after)
    assert silver_history(job, "delta-rs") == want
    cols = [*job.spec.column_names, *META]
    n = len(job.spec.column_names)
    got = {}
    for row in spark.read.format("delta").load(silver_of(job)).select(*cols).collect():
        got.setdefault(row[0], []).append(tuple(_norm(v) for v in row))
    assert {k: sorted(v, key=lambda x: x[n]) for k, v in got.items()} == want
    t = f"delta.`{silver_of(job)}`"
    now = spark.sql(f"SELECT {', '.join(job.spec.column_names)} FROM {t} WHERE __END_AT IS NULL")
    assert sorted((tuple(_norm(v) for v in x) for x in now.collect()), key=lambda x: x[0]) == \
        [tuple(_norm(v) for v in x) for x in source_rows(sim, job.spec)]
    starts = sorted(v[n + 2] for vs in want.values() for v in vs if v[n + 2] is not None)
    mid = starts[len(starts) // 2]
    twice = spark.sql(f"SELECT id FROM {t} WHERE __START_AT <= TIMESTAMP_NTZ '{mid}' AND "
                      f"(__END_AT IS NULL OR __END_AT > TIMESTAMP_NTZ '{mid}') "
                      "GROUP BY id HAVING count(*) > 1").collect()
    assert twice == []
    assert sum(len(v) for v in want.values()) > len(want)  # keys with more than one version
