"""Stream benchmark (make bench-stream): change rows from the simulator into
committed bronze with facts, end to end, next to the reader-only rate of the
same rows; peak RSS; latency from a commit to its row in bronze; and the
reference, mssql-cdc-pyspark's stream(...).to_delta on local Spark (through
mssql-python), on a table of the same generated rows, fewer of them (Spark is
slow): its rows/s and ours on that same table, whose ratio is
e2e_vs_reference_ratio. The reference's time runs from to_delta to the end of
its availableNow query (bronze and facts written), without the SparkSession's
start; ours is the whole process. Without the reference importable (pyspark,
delta-spark, mssql-cdc-pyspark from tests/requirements.txt) or java, the peer
is skipped with a message.

Prints `name: value` lines. Not a test: nothing here asserts a goal.

Per CPU-second as well as per second, since the two cores are shared:
e2e_rows_per_cpu_s and reader_only_rows_per_cpu_s count our process's CPU,
*_sim_cpu_seconds the simulator's for the same run (it serves the rows on
the same cores). e2e_vs_reader_cpu_ratio is the reader-only run's CPU
(ours and the simulator's) over the stream's: on two busy cores the wall
ratio cannot pass it, however reading and writing overlap.
load_average_1m_at_start/_at_end frame every figure.

Environment: BENCH_ROWS (default 5,000,000), BENCH_LATENCY_SAMPLES (20; 0
skips the latency), BENCH_REFERENCE_ROWS (200,000; 0 skips the reference).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "interop"))
from conftest import CLI, PASSWORD, Sim  # noqa: E402

sys.path.insert(0, HERE)
from benchlib import cpu_seconds, local_spark, reference_missing, run_child, wait_idle  # noqa: E402

ROWS = int(os.environ.get("BENCH_ROWS", "5000000"))
SAMPLES = int(os.environ.get("BENCH_LATENCY_SAMPLES", "20"))
REFERENCE_ROWS = int(os.environ.get("BENCH_REFERENCE_ROWS", "200000"))

COLUMNS = """(
    id INT NOT NULL PRIMARY KEY, big BIGINT NULL, amount DECIMAL(18,4) NULL,
    name NVARCHAR(50) NULL, at DATETIME2(7) NULL, flag BIT NULL, raw VARBINARY(16) NULL,
    guid UNIQUEIDENTIFIER NULL, note VARCHAR(200) NULL)"""


def table_sql(name, enable_db=True):
    return (f"CREATE TABLE dbo.{name} {COLUMNS};"
            + ("EXEC sys.sp_cdc_enable_db;" if enable_db else "")
            + f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{name}', "
              "@role_name = NULL;")


def bulk_load(sim, name, rows):
    sim.run(f"EXEC sim.bulk_load @capture_instance = N'dbo_{name}', "
            f"@transactions = {max(1, rows // 100)}, @rows_per_tx = 100, @seed = 1;",
            database="bench")


def timed_child(args, env=None):
    """Runs a child; returns (seconds, its peak RSS MB, stdout)."""
    run = run_child(args, env=env)
    return run.secs, run.rss_mb, run.out


def measured(sim, args):
    """Runs a child once the simulator is quiet; returns (Run, the simulator's
    CPU seconds meanwhile)."""
    wait_idle(sim.proc.pid)
    s0 = cpu_seconds(sim.proc.pid)
    run = run_child(args)
    return run, cpu_seconds(sim.proc.pid) - s0


def loaded_sim(work, rows):
    """A simulator on work/sim whose database bench holds dbo.bench with
    `rows` change rows of sim.bulk_load; (sim, the load's seconds)."""
    data = os.path.join(work, "sim")
    os.makedirs(data)
    sim = Sim(data, ["--capture-poll-ms", "20", "--capture-latency-ms", "0"])
    try:
        sim.run("CREATE DATABASE bench;")
        sim.run(table_sql("bench"), database="bench")
        t0 = time.perf_counter()
        bulk_load(sim, "bench", rows)
        return sim, time.perf_counter() - t0
    except BaseException:
        sim.stop()
        raise


def main():
    work = tempfile.mkdtemp(prefix="mcdc-bench-")
    print(f"load_average_1m_at_start: {os.getloadavg()[0]:.2f}")
    sim, load_s = loaded_sim(work, ROWS)
    try:
        print(f"bulk_load_rows: {ROWS}")
        print(f"bulk_load_rows_per_s: {ROWS / load_s:.0f}")
        cs = sim.connection_string("bench")
        run, sim_cpu = measured(sim, stream_args(cs, "dbo_bench", os.path.join(work, "lake")))
        secs = run.secs
        print(f"e2e_seconds: {secs:.2f}")
        print(f"e2e_rows_per_s: {ROWS / secs:.0f}")
        print(f"e2e_cpu_seconds: {run.cpu_s:.2f}")
        print(f"e2e_rows_per_cpu_s: {ROWS / max(run.cpu_s, 1e-3):.0f}")
        print(f"e2e_sim_cpu_seconds: {sim_cpu:.2f}")
        print(f"e2e_peak_rss_mb: {run.rss_mb:.1f}")
        reader = os.path.join(os.path.dirname(CLI), "mcdc-bench-reader")
        if os.path.exists(reader):
            rrun, rsim_cpu = measured(sim, [reader, "--connection-string", cs,
                                            "--capture-instance", "dbo_bench",
                                            "--connections", "2"])
            rsecs = rrun.secs
            print(f"reader_only_rows_per_s: {ROWS / rsecs:.0f}")
            print(f"reader_only_rows_per_cpu_s: {ROWS / max(rrun.cpu_s, 1e-3):.0f}")
            print(f"reader_only_sim_cpu_seconds: {rsim_cpu:.2f}")
            print(f"e2e_vs_reader_ratio: {(ROWS / secs) / (ROWS / rsecs):.2f}")
            # the same per CPU-second of both processes (ours and the
            # simulator's): what the wall ratio is bounded by once both runs
            # keep the two cores busy, whatever overlaps
            print(f"e2e_vs_reader_cpu_ratio: "
                  f"{(rrun.cpu_s + rsim_cpu) / max(run.cpu_s + sim_cpu, 1e-3):.2f}")
        else:
            print("e2e_vs_reader_ratio: n/a (build/mcdc-bench-reader missing)")
        if SAMPLES > 0:
            latency(sim, work)
        reference(sim, work)
        print(f"load_average_1m_at_end: {os.getloadavg()[0]:.2f}")
    finally:
        sim.stop()
        shutil.rmtree(work, ignore_errors=True)


def stream_args(cs, ci, lake):
    return [CLI, "stream", "--captureInstance", ci, "--connectionString", cs,
            "--target", os.path.join(lake, "bronze"), "--app-id", "bench",
            "--checkpoint", os.path.join(lake, "ckpt"),
            "--facts-table", os.path.join(lake, "facts"),
            "--trigger", "availableNow", "--quiet"]


def reference(sim, work):
    """The reference's to_delta and ours on one table of REFERENCE_ROWS change rows."""
    why = reference_missing(REFERENCE_ROWS, "BENCH_REFERENCE_ROWS")
    if why:
        print(f"reference_rows_per_s: n/a (skipped: {why})")
        return
    sim.run(table_sql("bench_ref", enable_db=False), database="bench")
    bulk_load(sim, "bench_ref", REFERENCE_ROWS)
    rows = sim.run("SELECT COUNT(*) FROM cdc.dbo_bench_ref_CT", database="bench")[0][0]
    print(f"reference_rows: {rows}")
    secs, _, _ = timed_child(stream_args(sim.connection_string("bench"), "dbo_bench_ref",
                                         os.path.join(work, "ours-ref")))
    ours = rows / secs
    print(f"e2e_same_rows_rows_per_s: {ours:.0f}")
    try:
        ref_secs = run_reference(sim, os.path.join(work, "ref"))
    except Exception as e:  # a peer that fails is reported, not fatal to the figures above
        print(f"reference_rows_per_s: n/a (the reference failed: {str(e).splitlines()[0][:300]})")
        return
    print(f"reference_seconds: {ref_secs:.2f}")
    print(f"reference_rows_per_s: {rows / ref_secs:.0f}")
    print(f"e2e_vs_reference_ratio: {ours / (rows / ref_secs):.2f}")


def run_reference(sim, lake):
    """Seconds from to_delta to the end of the reference's availableNow query."""
    import mssql_cdc
    spark = local_spark("mcdc-bench-reference")
    try:
        cs = (f"Server=127.0.0.1,{sim.port};Database=bench;UID=sa;PWD={PASSWORD};"
              "Encrypt=yes;TrustServerCertificate=yes")
        options = {"captureInstance": "dbo_bench_ref", "connectionString": cs,
                   "backend": "mssql-python"}
        t0 = time.perf_counter()
        query = mssql_cdc.stream(spark, options).to_delta(
            os.path.join(lake, "bronze"), "bench", os.path.join(lake, "ckpt"),
            os.path.join(lake, "facts"), trigger={"availableNow": True})
        query.awaitTermination()
        secs = time.perf_counter() - t0
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        # the sink's own share (read, facts, append), without planning and table creation
        batch_ms = spark.read.format("delta").load(os.path.join(lake, "facts")) \
            .where("event IS NULL").agg({"duration_ms": "sum"}).first()[0]
        print(f"reference_batch_seconds: {(batch_ms or 0) / 1000:.2f}")
        return secs
    finally:
        spark.stop()


def latency(sim, work):
    """Commit in the simulator -> batch committed in bronze, with a 250 ms trigger."""
    sim.run("CREATE TABLE dbo.lat (id INT NOT NULL PRIMARY KEY, v INT NULL);"
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'lat', "
            "@role_name = NULL;", database="bench")
    lake = os.path.join(work, "lat")
    args = [CLI, "stream", "--captureInstance", "dbo_lat",
            "--connectionString", sim.connection_string("bench"), "--startingLsn", "latest",
            "--target", os.path.join(lake, "bronze"), "--app-id", "lat",
            "--checkpoint", os.path.join(lake, "ckpt"), "--trigger", "processingTime=250ms",
            "--json"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen = []
    cond = threading.Condition()

    def pump():
        for line in proc.stdout:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            with cond:
                seen.append((time.perf_counter(), r))
                cond.notify_all()

    threading.Thread(target=pump, daemon=True).start()
    lat = []
    conn = sim.connect("bench")
    cur = conn.cursor()
    time.sleep(1.0)
    for i in range(SAMPLES):
        cur.execute(f"INSERT INTO dbo.lat (id, v) VALUES ({i}, {i});")
        t_commit = time.perf_counter()
        cur.execute("SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)")
        cur.fetchall()
        deadline = t_commit + 10
        with cond:
            while time.perf_counter() < deadline:
                hit = [t for t, r in seen if t > t_commit and r.get("rows", 0) > 0]
                if hit:
                    lat.append((hit[0] - t_commit) * 1000)
                    break
                cond.wait(0.05)
        time.sleep(0.3)
    conn.close()
    proc.terminate()
    proc.wait(10)
    if lat:
        lat.sort()
        print(f"commit_to_bronze_samples: {len(lat)}")
        print(f"commit_to_bronze_p50_ms: {lat[len(lat) // 2]:.0f}")
        print(f"commit_to_bronze_max_ms: {lat[-1]:.0f}")
    else:
        print("commit_to_bronze_p50_ms: n/a (no batch seen)")


if __name__ == "__main__":
    main()
