"""Spark binding benchmark (make bench-spark): the same change rows streamed
into a Delta bronze inside one local Spark (local[2], delta-spark) by our
package's `format("mssql_cdc")` and by the reference's (mssql-cdc-pyspark
0.8.0, through mssql-python), against one simulator, with the same sink
(foreachBatch appending bronze with txnAppId/txnVersion) and the same
trigger (availableNow); the same for a whole snapshot read through
`format("mssql_cdc_snapshot")` and written to Delta; `mssql-cdc stream` on
the same change rows; and the plain-Python `read_changes` into pyarrow next
to the C reader alone (build/mcdc-bench-reader, one connection: both read
the ranges one after another), alternated BENCH_SPARK_READER_ROUNDS times and
compared by their medians.

Our package runs from the source tree (python/src on PYTHONPATH, which
Spark's Python workers inherit; the library from build/); the reference is
.venv's `mssql_cdc`. The two share that import name, so each runs in a
Spark process of its own, which first runs the same small stream and
snapshot untimed (the JVM's and Delta's first use). The reference is slow:
it reads a table of fewer rows (BENCH_SPARK_REFERENCE_ROWS,
BENCH_SPARK_REFERENCE_SNAPSHOT_ROWS), which ours reads too in the same
process, and the ratios compare the two on those same rows. Where the time
goes: the same streams with a sink that only counts each batch (no Delta
write) give the sources' own rates (spark_binding_count_only_rows_per_s;
spark_binding_source_only_vs_reference_ratio on the reference's rows); the
rows the reference's jobs wrote, staged as Parquet and written into a new
Delta table by Spark alone, give the sink's own cost on those rows
(spark_delta_write_only_*_rows_per_s) and so the ratio a source that cost
nothing would roughly reach against the reference with this sink
(*_ratio_ceiling; the staged write has fixed costs of its own: no bound).
The stream once more through the reference's streaming API,
`stream(spark, options).to_delta(...)` with a facts table (its sink caches
and counts each batch, and folds the executors' read metrics):
spark_binding_to_delta_rows_per_s. Does the reference's rate rise with rows
(its fixed costs amortised)? Both
packages stream a larger table too (BENCH_SPARK_REFERENCE_LARGE_ROWS):
spark_binding_vs_reference_ratio_large. The issue's own reading, ours on
all the rows against the reference's rate on its fewer rows, is printed
too (spark_binding_full_rows_vs_reference_ratio,
spark_snapshot_full_rows_vs_reference_ratio), each next to the Delta write
alone of all our rows over the reference's rate (*_ceiling of the same
name; spark_delta_write_only_*_full_rows_per_s). A Spark's time runs from
start() (or the read) to the end of the query, without the SparkSession's
start.

Prints `name: value` lines. Not a test: nothing here asserts a goal.

Environment: BENCH_SPARK_ROWS (3,000,000 change rows), BENCH_SPARK_SNAPSHOT_ROWS
(5,000,000 table rows), BENCH_SPARK_REFERENCE_ROWS (200,000; 0 skips the
reference), BENCH_SPARK_REFERENCE_SNAPSHOT_ROWS (500,000), BENCH_SPARK_REFERENCE_LARGE_ROWS
(1,000,000; 0 skips the larger comparison), BENCH_SPARK_READER_ROUNDS (3).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
from conftest import CLI, PASSWORD  # noqa: E402

sys.path.insert(0, HERE)
from bench_stream import bulk_load, loaded_sim, stream_args, table_sql  # noqa: E402
from benchlib import reference_missing, run_child  # noqa: E402

ROWS = int(os.environ.get("BENCH_SPARK_ROWS", "3000000"))
SNAPSHOT_ROWS = int(os.environ.get("BENCH_SPARK_SNAPSHOT_ROWS", "5000000"))
REFERENCE_ROWS = int(os.environ.get("BENCH_SPARK_REFERENCE_ROWS", "200000"))
REFERENCE_SNAPSHOT_ROWS = int(os.environ.get("BENCH_SPARK_REFERENCE_SNAPSHOT_ROWS", "500000"))
REFERENCE_LARGE_ROWS = int(os.environ.get("BENCH_SPARK_REFERENCE_LARGE_ROWS", "1000000"))
READER_ROUNDS = int(os.environ.get("BENCH_SPARK_READER_ROUNDS", "3"))

# One Spark process: each job streams (or snapshots) one capture instance
# into a bronze of its own; prints RESULT {job: [seconds, rows]}.
SPARK = r"""
import json, os, sys, time
P = json.loads(os.environ["MCDC_PARAMS"])
sys.path.insert(0, P["bench"])
from benchlib import local_spark
spark = local_spark("mcdc-bench-spark")
import mssql_cdc
mssql_cdc.register(spark)
out = {"module": mssql_cdc.__file__}

counted = []

def stream(opts, lake, count_only=False):
    def sink(df, batch_id):
        if count_only:  # the source and Spark's transfer alone, no Delta write
            counted.append(df.count())
            return
        (df.write.format("delta").mode("append").option("txnAppId", "bench")
           .option("txnVersion", batch_id).save(lake))
    t0 = time.perf_counter()
    q = (spark.readStream.format("mssql_cdc").options(**opts).load().writeStream
         .foreachBatch(sink).option("checkpointLocation", lake + "-ckpt")
         .trigger(availableNow=True).start())
    q.awaitTermination()
    secs = time.perf_counter() - t0
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return secs

def to_delta(opts, lake):
    # the reference's streaming API: our to_delta with its sink (delta_sink) and a facts
    # table, whose read metrics come from the executors (metricsPath)
    t0 = time.perf_counter()
    q = mssql_cdc.stream(spark, opts).to_delta(lake, "bench", lake + "-ckpt", lake + "-facts",
                                               trigger={"availableNow": True})
    q.awaitTermination()
    secs = time.perf_counter() - t0
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return secs

def delta_only(source, lake):
    # The Delta write alone: the rows an earlier job wrote (source: its
    # lake), first copied to Parquet (untimed), then timed from that Parquet
    # into a new Delta table: the sink's cost whatever source feeds it.
    staged = lake + "-staged"
    spark.read.format("delta").load(source).write.mode("overwrite").parquet(staged)
    rows = spark.read.parquet(staged)
    t0 = time.perf_counter()
    rows.write.format("delta").mode("append").save(lake)
    return time.perf_counter() - t0

def snapshot(opts, lake):
    t0 = time.perf_counter()
    spark.read.format("mssql_cdc_snapshot").options(**opts).load() \
        .write.format("delta").mode("overwrite").save(lake)
    return time.perf_counter() - t0

# the JVM's and Delta's first-use costs before anything is timed: the same
# small stream and snapshot in both packages' processes
for name, kind, ci in [["warm_stream", "stream", "dbo_warm"], ["warm_snapshot", "snapshot", "dbo_warm"]] + P["jobs"]:
    lake = os.path.join(P["work"], name)
    opts = {**P["options"], "captureInstance": ci}
    if kind == "delta_only":  # ci names the job whose rows are written again
        secs = delta_only(os.path.join(P["work"], ci), lake)
        out[name] = [secs, spark.read.format("delta").load(lake).count()]
        print(f"{name}: {secs:.2f} s", file=sys.stderr, flush=True)
        continue
    if kind == "count":
        counted.clear()
        out[name] = [stream(opts, lake, count_only=True), sum(counted)]
        continue
    secs = {"stream": stream, "to_delta": to_delta, "snapshot": snapshot}[kind](opts, lake)
    out[name] = [secs, spark.read.format("delta").load(lake).count()]
    if kind in ("stream", "to_delta"):
        commits = os.path.join(lake + "-ckpt", "commits")
        out[name].append(len([n for n in os.listdir(commits) if n.isdigit()]))
    print(f"{name}: {secs:.2f} s", file=sys.stderr, flush=True)
spark.stop()
print("RESULT " + json.dumps(out), flush=True)
"""

# The plain-Python reader: every change row into pyarrow, counted.
READ_CHANGES = r"""
import json, os, sys, time
P = json.loads(os.environ["MCDC_PARAMS"])
import mssql_cdc
t0, c0 = time.perf_counter(), time.process_time()
n = 0
for batch in mssql_cdc.read_changes({"captureInstance": P["ci"], "connectionString": P["cs"]},
                                    num_partitions=1):
    n += batch.num_rows
print("RESULT " + json.dumps({"module": mssql_cdc.__file__, "rows": n,
                              "seconds": time.perf_counter() - t0,
                              "cpu_seconds": time.process_time() - c0}), flush=True)
"""


def child(code, params, ours, work, name):
    """Runs code in .venv's Python, our package first on its path (ours) or
    the reference's; returns (its RESULT, the run)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MSSQL_CDC_LIBRARY")}
    python = os.path.join(ROOT, ".venv", "bin", "python")
    env.update(MCDC_PARAMS=json.dumps(params), PYSPARK_PYTHON=python,
               PYSPARK_DRIVER_PYTHON=python, TZ="UTC")
    if ours:
        env["PYTHONPATH"] = os.path.join(ROOT, "python", "src")
    path = os.path.join(work, f"{name}.py")
    with open(path, "w") as f:
        f.write(code)
    run = run_child([python, path], env=env)
    lines = [ln for ln in run.out.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        raise SystemExit(f"{name}: no result: {run.err[-2000:]}")
    result = json.loads(lines[-1][7:])
    want = os.path.join(ROOT, "python", "src") if ours else "site-packages"
    if want not in result["module"]:
        raise SystemExit(f"{name} imported {result['module']}, not {'ours' if ours else 'the reference'}")
    return result, run


def make_snapshot_table(sim, name, rows):
    sim.run(f"CREATE TABLE dbo.{name} (id INT NOT NULL PRIMARY KEY, big BIGINT NULL, "
            "amount DECIMAL(18,4) NULL, name NVARCHAR(50) NULL, at DATETIME2(7) NULL, "
            "flag BIT NULL, raw VARBINARY(16) NULL, guid UNIQUEIDENTIFIER NULL, "
            f"note VARCHAR(200) NULL);"
            f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{name}', "
            "@role_name = NULL;", database="bench")
    sim.run(f"EXEC sim.bulk_load_table @table = N'dbo.{name}', @rows = {rows}, @seed = 7;",
            database="bench")


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "n/a"


def main():
    print("machine: shared (2 cores, other jobs running): figures are indicative")
    work = tempfile.mkdtemp(prefix="mcdc-bench-spark-")
    sim, _ = loaded_sim(work, ROWS)
    try:
        cs = sim.connection_string("bench")
        make_snapshot_table(sim, "snap", SNAPSHOT_ROWS)
        sim.run(table_sql("warm", enable_db=False), database="bench")
        bulk_load(sim, "warm", 1000)
        why = reference_missing(REFERENCE_ROWS, "BENCH_SPARK_REFERENCE_ROWS")
        if why is None:
            sim.run(table_sql("bench_ref", enable_db=False), database="bench")
            bulk_load(sim, "bench_ref", REFERENCE_ROWS)
            make_snapshot_table(sim, "snap_ref", REFERENCE_SNAPSHOT_ROWS)
            if REFERENCE_LARGE_ROWS:
                sim.run(table_sql("bench_ref_large", enable_db=False), database="bench")
                bulk_load(sim, "bench_ref_large", REFERENCE_LARGE_ROWS)
        sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="bench")
        rows = sim.run("SELECT COUNT(*) FROM cdc.dbo_bench_CT", database="bench")[0][0]
        print(f"spark_binding_rows: {rows}")
        print(f"spark_snapshot_rows: {SNAPSHOT_ROWS}")

        # mssql-cdc stream, the whole process
        cli = run_child(stream_args(cs, "dbo_bench", os.path.join(work, "cli")))
        cli_rate = rows / cli.secs
        print(f"cli_stream_rows_per_s: {cli_rate:.0f}")

        # ours in Spark
        jobs = [["stream", "stream", "dbo_bench"], ["snapshot", "snapshot", "dbo_snap"],
                ["count", "count", "dbo_bench"], ["to_delta", "to_delta", "dbo_bench"]]
        ref_jobs = []
        if why is None:
            ref_jobs = [["stream_ref", "stream", "dbo_bench_ref"],
                        ["snapshot_ref", "snapshot", "dbo_snap_ref"],
                        ["count_ref", "count", "dbo_bench_ref"]]
            if REFERENCE_LARGE_ROWS:
                ref_jobs.append(["stream_ref_large", "stream", "dbo_bench_ref_large"])
            # the sink alone on the same rows (ours only: it reads no source)
            jobs += ref_jobs + [[f"delta_only_{j[0]}", "delta_only", j[0]]
                                for j in ref_jobs if j[1] != "count"]
        # the sink alone on all the rows of our stream and snapshot: last, so
        # that the pages these 8M rows dirty are not written back under the
        # smaller timed jobs
        jobs += [["delta_only_stream", "delta_only", "stream"],
                 ["delta_only_snapshot", "delta_only", "snapshot"]]
        ours, _ = child(SPARK, {"bench": HERE, "work": os.path.join(work, "ours"), "jobs": jobs,
                                "options": {"connectionString": cs}}, True, work, "ours")
        secs, got, batches = ours["stream"]
        print(f"spark_binding_batches: {batches}")
        if got != rows:
            raise SystemExit(f"our Spark stream wrote {got} rows of {rows}")
        binding = rows / secs
        print(f"spark_binding_seconds: {secs:.2f}")
        print(f"spark_binding_rows_per_s: {binding:.0f}")
        # where the time goes: the same stream with a sink that only counts
        csecs, cgot = ours["count"]
        print(f"spark_binding_count_only_rows_per_s: {cgot / csecs:.0f}")
        print(f"spark_binding_delta_write_share: {max(0.0, 1 - csecs / secs):.2f}")
        tsecs, tgot, tbatches = ours["to_delta"]
        if tgot != rows:
            raise SystemExit(f"our to_delta wrote {tgot} rows of {rows}")
        print(f"spark_binding_to_delta_batches: {tbatches}")
        print(f"spark_binding_to_delta_rows_per_s: {rows / tsecs:.0f}")
        ssecs, sgot = ours["snapshot"]
        if sgot != SNAPSHOT_ROWS:
            raise SystemExit(f"our Spark snapshot wrote {sgot} rows of {SNAPSHOT_ROWS}")
        print(f"spark_snapshot_rows_per_s: {SNAPSHOT_ROWS / ssecs:.0f}")
        write_only = {}  # the Delta write alone on the same rows, rows/s
        for job, n in (("stream", rows), ("snapshot", SNAPSHOT_ROWS)):
            wsecs, wgot = ours[f"delta_only_{job}"]
            if wgot != n:
                raise SystemExit(f"the staged write of {job} wrote {wgot} rows of {n}")
            write_only[job] = n / wsecs
            print(f"spark_delta_write_only_{job}_full_rows_per_s: {write_only[job]:.0f}")
        print(f"cli_vs_spark_binding_ratio: {ratio(cli_rate, binding)}")

        # the reference in the same Spark, on the fewer rows; ours on the same
        if why is None:
            ref_cs = (f"Server=127.0.0.1,{sim.port};Database=bench;UID=sa;PWD={PASSWORD};"
                      "Encrypt=yes;TrustServerCertificate=yes")
            try:
                ref, _ = child(SPARK, {"bench": HERE, "work": os.path.join(work, "ref"),
                                       "jobs": ref_jobs,
                                       "options": {"connectionString": ref_cs,
                                                   "backend": "mssql-python"}},
                               False, work, "reference")
            except SystemExit as e:  # a peer that fails is reported, not fatal
                ref = None
                print(f"spark_binding_vs_reference_ratio: n/a (the reference failed: "
                      f"{str(e).splitlines()[0][:300]})")
            if ref:
                # the reading: ours on all the rows against the
                # reference's rate on its fewer rows (each side's fixed
                # costs spread over its own rows), next to the Delta write
                # alone on our rows over the reference's rate
                for kind, n, o_secs, figure in (
                        ("stream", rows, secs, "spark_binding_full_rows_vs_reference_ratio"),
                        ("snapshot", SNAPSHOT_ROWS, ssecs,
                         "spark_snapshot_full_rows_vs_reference_ratio")):
                    if f"{kind}_ref" in ref:
                        r_secs, r_rows = ref[f"{kind}_ref"][:2]
                        print(f"{figure}: {ratio(n / o_secs, r_rows / r_secs)}")
                        print(f"{figure}_ceiling: {ratio(write_only[kind], r_rows / r_secs)}")
                for kind, figure in (("stream", "spark_binding_vs_reference_ratio"),
                                     ("snapshot", "spark_snapshot_vs_reference_ratio"),
                                     ("count", "spark_binding_source_only_vs_reference_ratio"),
                                     ("stream", "spark_binding_vs_reference_ratio_large")):
                    job = f"{kind}_ref_large" if figure.endswith("_large") else f"{kind}_ref"
                    if job not in ref:
                        continue
                    o_secs, o_rows = ours[job][:2]
                    r_secs, r_rows = ref[job][:2]
                    label = job.replace("_ref", "")
                    print(f"reference_{label}_rows: {r_rows}")
                    print(f"reference_{label}_rows_per_s: {r_rows / r_secs:.0f}")
                    print(f"spark_binding_{label}_same_rows_rows_per_s: {o_rows / o_secs:.0f}")
                    if o_rows != r_rows:
                        print(f"{figure}: n/a (ours wrote {o_rows} rows, the reference {r_rows})")
                        continue
                    print(f"{figure}: {ratio(o_rows / o_secs, r_rows / r_secs)}")
                    # the sink alone on these rows: no source can be faster than
                    # it, so the reference's time over it bounds any ratio here
                    sink = ours.get(f"delta_only_{job}")
                    if sink and sink[1] == r_rows:
                        print(f"spark_delta_write_only_{label}_rows_per_s: {sink[1] / sink[0]:.0f}")
                        print(f"{figure}_ceiling: {ratio(r_secs, sink[0])}")
        else:
            print(f"spark_binding_vs_reference_ratio: n/a (skipped: {why})")
            print(f"spark_snapshot_vs_reference_ratio: n/a (skipped: {why})")

        # the plain-Python reader against the C reader alone, one connection
        # each, alternated READER_ROUNDS times and compared by their medians:
        # one run of either takes about a second, where a neighbour's burst
        # moves a single figure by a fifth. The Python side is timed from the
        # call of read_changes (planning and connecting included, the
        # interpreter's start and imports not); the C side is its whole process.
        reader = os.path.join(os.path.dirname(CLI), "mcdc-bench-reader")
        py_rates, py_cpu, c_rates, c_cpu = [], [], [], []
        for _ in range(READER_ROUNDS):
            py, _ = child(READ_CHANGES, {"ci": "dbo_bench", "cs": cs}, True, work, "read_changes")
            if py["rows"] != rows:
                raise SystemExit(f"read_changes read {py['rows']} rows of {rows}")
            py_rates.append(rows / py["seconds"])
            py_cpu.append(rows / max(py["cpu_seconds"], 1e-3))
            if os.path.exists(reader):
                c = run_child([reader, "--connection-string", cs, "--capture-instance",
                               "dbo_bench", "--connections", "1"])
                c_rates.append(rows / c.secs)
                c_cpu.append(rows / max(c.cpu_s, 1e-3))
        print(f"python_read_changes_rows_per_s: {statistics.median(py_rates):.0f}")
        print(f"python_read_changes_rows_per_cpu_s: {statistics.median(py_cpu):.0f}")
        if c_rates:
            print(f"c_reader_rows_per_s: {statistics.median(c_rates):.0f}")
            print(f"c_reader_rows_per_cpu_s: {statistics.median(c_cpu):.0f}")
            print("python_read_changes_vs_c_reader_ratio: "
                  f"{ratio(statistics.median(py_rates), statistics.median(c_rates))}")
            print("python_read_changes_vs_c_reader_rounds: "
                  + " ".join(ratio(a, b) for a, b in zip(py_rates, c_rates)))
        else:
            print("python_read_changes_vs_c_reader_ratio: n/a (build/mcdc-bench-reader missing)")
    finally:
        sim.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
