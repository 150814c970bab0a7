"""Snapshot benchmark (make bench-snapshot): a base table under CDC read into a
fresh bronze table by `mssql-cdc snapshot`, next to the Python path
(mssql-python's Arrow fetch into deltalake's write_deltalake) and the
reference (mssql-cdc-pyspark 0.8.0's snapshot() and backfill() on local
Spark, through mssql-python), then a chunked backfill next to a running
stream under a workload, with the stream's lag before and during it.

The table (id INT primary key and nine nullable columns of mixed types, as
bench-table's) is filled by `EXEC sim.bulk_load_table`, which writes no change
rows: the rows are as if they were there before CDC was enabled.

Measures:
- snapshot_rows_per_s_1conn / _2conn: the whole process, numPartitions 1 and 2;
  snapshot_file_bytes_per_row_*: the bronze data files' bytes per row;
  snapshot_peak_rss_mb: the larger of the two runs' peak RSS, the mssql-cdc
  process's own maximum resident set as GNU time reports it (%M; see
  benchlib.run_child for why not this process's wait4); the CPU seconds each
  side used during the run (ours from time, the simulator's from
  /proc/<pid>/stat), and rows per CPU-second of each, to show which side is
  the bottleneck, with the CPU microseconds a row of each and of both
  (*_cpu_us_per_row_*; the sum bounds the rate on the shared cores), and
  that bound itself, snapshot_cpu_ceiling_rows_per_s_*: the machine's cores
  divided by the sum; sim_table_store_reads_*: the queries the simulator's table
  store answered (sim.fast_path_stats), the rest went through SQLite.
- backfill_quiet_*: the same table by `mssql-cdc backfill` (numPartitions 2,
  chunks of 1,000,000 rows, a wave per round) after `stream --bootstrap
  --snapshot chunked` opened it, no stream running, plan included.
- python_*: one connection, `SELECT` of the first BENCH_SNAPSHOT_PYTHON_ROWS
  rows, cursor.arrow_reader() streamed into write_deltalake; its rows/s against
  ours is snapshot_vs_python_ratio (ours on 2 connections) and
  snapshot_1conn_vs_python_ratio; snapshot_vs_python_cpu_ratio is the same
  in rows per CPU-second, each side's process and the simulator's CPU for
  its rows together (snapshot_vs_python_cpu_ratio_own: the processes
  alone); python_10x_rows_per_s is the rate the
  goal of 10x asks for, snapshot_cpu_ceiling_vs_python_ratio the ratio the
  cores would allow at this run's CPU a row.
- reference_*: a table of BENCH_SNAPSHOT_REFERENCE_ROWS rows; the reference's
  snapshot() and ours (numPartitions 2 each), then its chunked backfill
  (to_delta(bootstrap=True, snapshot="chunked") opens it, backfill() until
  done is timed) and ours (stream --bootstrap --snapshot chunked, then backfill
  until done is timed), both in chunks of a quarter of the rows, a wave being
  one round of two chunks (target wave seconds 0). The SparkSession's start is
  not counted.
- backfill_*: a table of BENCH_SNAPSHOT_BACKFILL_ROWS rows; `mssql-cdc stream
  --bootstrap --snapshot chunked --trigger processingTime=250ms` runs while a
  Python thread commits BENCH_SNAPSHOT_WORKLOAD_TPS transactions a second (one
  new row, one update of a loaded row) for BENCH_SNAPSHOT_BASELINE_SECONDS,
  then `mssql-cdc backfill` (numPartitions 2, --chunk-rows
  BENCH_SNAPSHOT_CHUNK_ROWS, a wave per round) runs until done. The workload
  keeps the table changing, so the simulator reads the chunks through SQLite,
  not its table store. A new row's lag is from its
  INSERT's return to the stream's JSON line for the batch whose end_lsn
  reaches the row's __$start_lsn (printed after bronze, facts and verdict
  committed). From the facts rows: the plan's seconds; the share of the waves'
  time after their last read ended (the Parquet files' close and bronze's
  Delta commit; a read streams into the writer, so it holds the encoding); and
  of the backfill process's time outside waves (start, plan, plans and facts
  rows).
- load_average_1m_at_start/_at_end: the machine's, as the cores are shared.

Prints `name: value` lines. Not a test: nothing here asserts a goal.

Environment: BENCH_SNAPSHOT_ROWS (10,000,000), BENCH_SNAPSHOT_PYTHON_ROWS
(2,000,000), BENCH_SNAPSHOT_REFERENCE_ROWS (200,000; 0 skips the reference),
BENCH_SNAPSHOT_BACKFILL_ROWS (5,000,000; 0 skips the backfill),
BENCH_SNAPSHOT_CHUNK_ROWS (500,000), BENCH_SNAPSHOT_WORKLOAD_TPS (20),
BENCH_SNAPSHOT_BASELINE_SECONDS (15).
"""
import json
import os
import random
import shutil
import signal
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

ROWS = int(os.environ.get("BENCH_SNAPSHOT_ROWS", "10000000"))
PYTHON_ROWS = min(ROWS, int(os.environ.get("BENCH_SNAPSHOT_PYTHON_ROWS", "2000000")))
REFERENCE_ROWS = int(os.environ.get("BENCH_SNAPSHOT_REFERENCE_ROWS", "200000"))
BACKFILL_ROWS = int(os.environ.get("BENCH_SNAPSHOT_BACKFILL_ROWS", "5000000"))
CHUNK_ROWS = int(os.environ.get("BENCH_SNAPSHOT_CHUNK_ROWS", "500000"))
WORKLOAD_TPS = float(os.environ.get("BENCH_SNAPSHOT_WORKLOAD_TPS", "20"))
BASELINE_S = float(os.environ.get("BENCH_SNAPSHOT_BASELINE_SECONDS", "15"))

DB = "bench"
COLUMNS = """(
    id INT NOT NULL PRIMARY KEY, big BIGINT NULL, amount DECIMAL(18,4) NULL,
    name NVARCHAR(50) NULL, at DATETIME2(7) NULL, flag BIT NULL, raw VARBINARY(16) NULL,
    guid UNIQUEIDENTIFIER NULL, note VARCHAR(200) NULL, d DATE NULL)"""
COLUMN_NAMES = "id, big, amount, name, at, flag, raw, guid, note, d"


def make_table(sim, name, rows, seed):
    """dbo.<name> under CDC (capture instance dbo_<name>) holding rows rows;
    returns the load's seconds."""
    sim.run(f"CREATE TABLE dbo.{name} {COLUMNS};"
            f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{name}', "
            "@role_name = NULL;", database=DB)
    t0 = time.perf_counter()
    sim.run(f"EXEC sim.bulk_load_table @table = N'dbo.{name}', @rows = {rows}, @seed = {seed};",
            database=DB)
    return time.perf_counter() - t0


def source_args(sim, ci, partitions):
    return ["--captureInstance", ci, "--connectionString", sim.connection_string(DB),
            "--numPartitions", str(partitions)]


def data_bytes(table):
    """Bytes of the table's Parquet data files (the codec's figure)."""
    return sum(os.path.getsize(os.path.join(table, f)) for f in os.listdir(table)
               if f.endswith(".parquet"))


def table_store_reads(sim):
    """Queries the simulator's table store has answered so far (sim.fast_path_stats):
    a read it did not answer went through SQLite, about 15 times slower."""
    return sim.run("EXEC sim.fast_path_stats;")[0][2]


def measured(sim, args, ok=(0,)):
    """Runs our CLI once the simulator is quiet; returns (Run, simulator CPU seconds,
    table store reads)."""
    wait_idle(sim.proc.pid)
    s0, q0 = cpu_seconds(sim.proc.pid), table_store_reads(sim)
    run = run_child(args, ok=ok)
    return run, cpu_seconds(sim.proc.pid) - s0, table_store_reads(sim) - q0


def main():
    work = tempfile.mkdtemp(prefix="mcdc-bench-snapshot-")
    data = os.path.join(work, "sim")
    os.makedirs(data)
    sim = Sim(data, ["--capture-poll-ms", "20", "--capture-latency-ms", "0"])
    # the cores are shared: how busy they were frames every figure below
    print(f"load_average_1m_at_start: {os.getloadavg()[0]:.2f}")
    try:
        sim.run(f"CREATE DATABASE {DB};")
        sim.run("EXEC sys.sp_cdc_enable_db;", database=DB)
        secs = make_table(sim, "t", ROWS, 1)
        print(f"snapshot_rows: {ROWS}")
        print(f"table_load_rows_per_s: {ROWS / secs:.0f}")
        ours = ours_snapshots(sim, work)
        python_path(sim, work, ours)
        reference(sim, work)
        backfill_under_stream(sim, work)
        print(f"load_average_1m_at_end: {os.getloadavg()[0]:.2f}")
    finally:
        sim.stop()
        shutil.rmtree(work, ignore_errors=True)


def ours_snapshots(sim, work):
    """Our snapshot of dbo.t on 1 and 2 connections; returns {partitions: rows/s}."""
    rates, rss = {}, 0.0
    cores = os.cpu_count() or 1
    for n in (1, 2):
        target = os.path.join(work, f"ours-{n}conn", "bronze")
        run, sim_cpu, store = measured(sim, [CLI, "snapshot", *source_args(sim, "dbo_t", n),
                                             "--target", target])
        rates[n] = ROWS / run.secs
        rss = max(rss, run.rss_mb)
        print(f"snapshot_seconds_{n}conn: {run.secs:.2f}")
        print(f"snapshot_rows_per_s_{n}conn: {rates[n]:.0f}")
        print(f"snapshot_cpu_seconds_{n}conn: {run.cpu_s:.2f}")
        print(f"snapshot_rows_per_cpu_s_{n}conn: {ROWS / max(run.cpu_s, 1e-3):.0f}")
        print(f"sim_cpu_seconds_{n}conn: {sim_cpu:.2f}")
        print(f"sim_rows_per_cpu_s_{n}conn: {ROWS / max(sim_cpu, 1e-3):.0f}")
        # microseconds of CPU a row, each side and both: on the shared 2 cores
        # the sum bounds the rate, and it moves less with the load than the wall
        print(f"snapshot_cpu_us_per_row_{n}conn: {run.cpu_s / ROWS * 1e6:.3f}")
        print(f"sim_cpu_us_per_row_{n}conn: {sim_cpu / ROWS * 1e6:.3f}")
        print(f"total_cpu_us_per_row_{n}conn: {(run.cpu_s + sim_cpu) / ROWS * 1e6:.3f}")
        # the most the machine's cores allow at this cost a row, were they
        # busy with nothing but our snapshot and the simulator
        rates[f"ceiling{n}"] = cores * ROWS / max(run.cpu_s + sim_cpu, 1e-3)
        rates[f"cpu{n}"] = ROWS / max(run.cpu_s, 1e-3)
        rates[f"cpu_with_sim{n}"] = ROWS / max(run.cpu_s + sim_cpu, 1e-3)
        print(f"snapshot_cpu_ceiling_rows_per_s_{n}conn: {rates[f'ceiling{n}']:.0f}")
        print(f"sim_table_store_reads_{n}conn: {store}")
        print(f"snapshot_peak_rss_mb_{n}conn: {run.rss_mb:.1f}")
        print(f"snapshot_file_bytes_per_row_{n}conn: {data_bytes(target) / ROWS:.1f}")
    print(f"snapshot_peak_rss_mb: {rss:.1f}")
    # the same table in chunks of the CLI's default 1,000,000 rows, nothing else running
    secs, chunks, runs = our_backfill_secs(sim, os.path.join(work, "ours-bf-t"), "dbo_t",
                                           1000000)
    print(f"backfill_quiet_chunks: {chunks}")
    print(f"backfill_quiet_rows_per_s: {ROWS / secs:.0f}")
    print(f"backfill_quiet_peak_rss_mb: {max(r.rss_mb for r in runs):.1f}")
    return rates


def python_path(sim, work, ours):
    """mssql-python's Arrow fetch of the first PYTHON_ROWS rows into write_deltalake."""
    try:
        import mssql_python
        from deltalake import DeltaTable, write_deltalake
    except ImportError as e:
        print(f"python_rows_per_s: n/a (skipped: {e}; make deps installs it)")
        return
    where = f" WHERE id <= {PYTHON_ROWS}" if PYTHON_ROWS < ROWS else ""
    wait_idle(sim.proc.pid)
    s0, q0 = cpu_seconds(sim.proc.pid), table_store_reads(sim)
    c0 = time.process_time()
    t0 = time.perf_counter()
    conn = mssql_python.connect(f"Server=127.0.0.1,{sim.port};Database={DB};UID=sa;"
                                f"PWD={PASSWORD};Encrypt=no")
    try:
        cur = conn.cursor()
        cur.execute(f"SELECT {COLUMN_NAMES} FROM dbo.t{where}")
        # held in a name: the wrapper closes the result set when it is collected,
        # and write_deltalake keeps only the C stream inside it (0 rows written)
        reader = cur.arrow_reader(65536)
        write_deltalake(os.path.join(work, "python", "t"), reader)
    finally:
        conn.close()
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0
    sim_cpu = cpu_seconds(sim.proc.pid) - s0
    got = DeltaTable(os.path.join(work, "python", "t")).to_pyarrow_dataset().count_rows()
    if got != PYTHON_ROWS:
        print(f"python_rows_per_s: n/a (the Delta table holds {got} rows, not {PYTHON_ROWS})")
        return
    rate = PYTHON_ROWS / secs
    print(f"python_rows: {PYTHON_ROWS}")
    print(f"python_seconds: {secs:.2f}")
    print(f"python_rows_per_s: {rate:.0f}")
    print(f"python_rows_per_cpu_s: {PYTHON_ROWS / max(cpu, 1e-3):.0f}")
    print(f"python_sim_cpu_seconds: {sim_cpu:.2f}")
    print(f"python_sim_table_store_reads: {table_store_reads(sim) - q0}")
    print(f"snapshot_vs_python_ratio: {ours[2] / rate:.2f}")
    # rows per CPU-second of each side: its own process, then with the
    # simulator's CPU for its rows counted in (the goal's figure)
    print(f"snapshot_vs_python_cpu_ratio_own: {ours['cpu2'] / (PYTHON_ROWS / max(cpu, 1e-3)):.2f}")
    py_with_sim = PYTHON_ROWS / max(cpu + sim_cpu, 1e-3)
    print(f"python_rows_per_cpu_s_with_sim: {py_with_sim:.0f}")
    print(f"snapshot_vs_python_cpu_ratio: {ours['cpu_with_sim2'] / py_with_sim:.2f}")
    # the goal's rate (10x the Python path) next to what the cores allow
    print(f"python_10x_rows_per_s: {10 * rate:.0f}")
    print(f"snapshot_cpu_ceiling_vs_python_ratio: {ours['ceiling2'] / rate:.2f}")
    print(f"snapshot_1conn_vs_python_ratio: {ours[1] / rate:.2f}")


# ---- the reference ----------------------------------------------------------------

def reference(sim, work):
    """The reference's snapshot() and backfill() and ours on dbo.r."""
    why = reference_missing(REFERENCE_ROWS, "BENCH_SNAPSHOT_REFERENCE_ROWS")
    if why:
        print(f"reference_rows_per_s: n/a (skipped: {why})")
        return
    make_table(sim, "r", REFERENCE_ROWS, 2)
    rows = REFERENCE_ROWS
    # two chunks a round, one per connection, rounds one wave each: Spark's
    # fixed cost per wave (its facts, plans and history reads) is paid a few times
    chunk = max(1, rows // 4)
    print(f"reference_rows: {rows}")
    print(f"reference_backfill_chunk_rows: {chunk}")
    run, _, _ = measured(sim, [CLI, "snapshot", *source_args(sim, "dbo_r", 2),
                            "--target", os.path.join(work, "ours-r", "bronze")])
    ours = rows / run.secs
    print(f"snapshot_same_rows_rows_per_s: {ours:.0f}")
    ours_bf, chunks, _ = our_backfill_secs(sim, os.path.join(work, "ours-bf-r"), "dbo_r", chunk)
    print(f"backfill_same_rows_chunks: {chunks}")
    print(f"backfill_same_rows_rows_per_s: {rows / ours_bf:.0f}")
    try:
        spark = local_spark("mcdc-bench-snapshot-reference")
    except Exception as e:  # a peer that cannot start is reported, not fatal
        print(f"reference_rows_per_s: n/a (local Spark did not start: {first_line(e)})")
        return
    try:
        ref_options = reference_options(sim, "dbo_r")
        try:
            secs = reference_snapshot_secs(spark, ref_options, os.path.join(work, "ref-r"))
            print(f"reference_seconds: {secs:.2f}")
            print(f"reference_rows_per_s: {rows / secs:.0f}")
            print(f"snapshot_vs_reference_ratio: {ours / (rows / secs):.2f}")
        except Exception as e:
            print(f"reference_rows_per_s: n/a (the reference's snapshot() failed: {first_line(e)})")
        try:
            secs = reference_backfill_secs(spark, ref_options, os.path.join(work, "ref-bf"), chunk)
            print(f"reference_backfill_seconds: {secs:.2f}")
            print(f"reference_backfill_rows_per_s: {rows / secs:.0f}")
            print(f"backfill_vs_reference_ratio: {(rows / ours_bf) / (rows / secs):.2f}")
        except Exception as e:
            print(f"reference_backfill_rows_per_s: n/a (the reference's backfill() failed: "
                  f"{first_line(e)})")
    finally:
        spark.stop()


def first_line(e):
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def reference_options(sim, ci):
    cs = (f"Server=127.0.0.1,{sim.port};Database={DB};UID=sa;PWD={PASSWORD};"
          "Encrypt=yes;TrustServerCertificate=yes")
    return {"captureInstance": ci, "connectionString": cs, "backend": "mssql-python",
            "numPartitions": "2"}


def reference_snapshot_secs(spark, options, lake):
    import mssql_cdc
    t0 = time.perf_counter()
    mssql_cdc.stream(spark, options).snapshot(os.path.join(lake, "bronze"))
    return time.perf_counter() - t0


def reference_backfill_secs(spark, options, lake, chunk):
    """Opens a chunked snapshot with to_delta (not timed), then times backfill() to done."""
    import mssql_cdc
    bronze, facts = os.path.join(lake, "bronze"), os.path.join(lake, "facts")
    stream = mssql_cdc.stream(spark, options)
    q = stream.to_delta(bronze, "bench-ref", os.path.join(lake, "ckpt"), facts, bootstrap=True,
                        snapshot="chunked", trigger={"availableNow": True})
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    t0 = time.perf_counter()
    while True:
        st = stream.backfill(bronze, app_id="bench-ref", facts_table=facts, chunk_rows=chunk,
                             target_wave_seconds=0)
        if st["done"]:
            break
        if st["state"] != "running":
            raise RuntimeError(f"backfill() stopped: {st['state']}: {st['reason']}")
    secs = time.perf_counter() - t0
    print(f"reference_backfill_chunks: {st['chunks_total']}")
    return secs


# ---- our chunked backfill -----------------------------------------------------------

def lake_args(lake, app_id):
    return ["--target", os.path.join(lake, "bronze"), "--app-id", app_id,
            "--facts-table", os.path.join(lake, "facts")]


def backfill_until_done(sim, ci, lake, app_id, chunk):
    """Runs `mssql-cdc backfill` until it exits 0; returns the runs."""
    runs = []
    while True:
        run = run_child([CLI, "backfill", *source_args(sim, ci, 2), *lake_args(lake, app_id),
                         "--chunk-rows", str(chunk), "--target-wave-seconds", "0"], ok=(0, 14))
        runs.append(run)
        if run.rc == 0:
            return runs


def our_backfill_secs(sim, lake, ci, chunk):
    """Ours as the reference's: the stream opens a chunked snapshot (availableNow, not
    timed), then the backfill runs until done (timed, with no stream running);
    returns (seconds, chunks, the runs)."""
    run_child([CLI, "stream", *source_args(sim, ci, 2), *lake_args(lake, "bench-ref"),
               "--checkpoint", os.path.join(lake, "ckpt"), "--bootstrap", "--snapshot",
               "chunked", "--trigger", "availableNow", "--quiet"])
    wait_idle(sim.proc.pid)
    runs = backfill_until_done(sim, ci, lake, "bench-ref", chunk)
    return sum(r.secs for r in runs), json.loads(runs[-1].out)["chunks_total"], runs


class Workload(threading.Thread):
    """WORKLOAD_TPS transactions a second on dbo.b: one new row (its key and
    the time its INSERT returned are kept) and one update of a loaded row."""

    def __init__(self, sim, first_key, loaded):
        super().__init__(daemon=True)
        self.sim, self.next_key, self.loaded = sim, first_key, loaded
        self.commits = []  # (key, perf_counter after the commit)
        self.stop = threading.Event()

    def run(self):
        conn = self.sim.connect(DB)
        cur = conn.cursor()
        rng = random.Random(7)
        period = 1.0 / WORKLOAD_TPS
        due = time.perf_counter()
        while not self.stop.is_set():
            k = self.next_key
            cur.execute(f"BEGIN TRANSACTION; INSERT INTO dbo.b (id, big, name) VALUES ({k}, {k}, "
                        f"N'workload'); UPDATE dbo.b SET big = big + 1 WHERE id = "
                        f"{rng.randint(1, self.loaded)}; COMMIT;")
            self.commits.append((k, time.perf_counter()))
            self.next_key += 1
            due += period
            time.sleep(max(0.0, due - time.perf_counter()))
        conn.close()


class StreamWatch(threading.Thread):
    """Reads the stream's --json lines: (perf_counter, end_lsn as int) per batch."""

    def __init__(self, proc):
        super().__init__(daemon=True)
        self.proc, self.batches = proc, []

    def run(self):
        for line in self.proc.stdout:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("end_lsn"):
                self.batches.append((time.perf_counter(), int(r["end_lsn"], 16)))


def lags_ms(sim, commits, batches, t_from, t_to):
    """Lag of every new row committed in [t_from, t_to): from its commit to the first
    batch line whose end_lsn reaches its __$start_lsn."""
    keys = [k for k, t in commits if t_from <= t < t_to]
    if not keys:
        return []
    lsn = dict(sim.run(f"SELECT id, CONVERT(varchar(22), __$start_lsn, 1) FROM cdc.dbo_b_CT "
                       f"WHERE __$operation = 2 AND id >= {min(keys)} AND id <= {max(keys)}",
                       database=DB))
    at = dict(commits)
    out = []
    for k in keys:
        if k not in lsn:
            continue
        want = int(lsn[k], 16)
        seen = next((t for t, end in batches if end >= want and t >= at[k]), None)
        if seen is not None:
            out.append((seen - at[k]) * 1000)
    return sorted(out)


def print_lags(when, lat, expected):
    print(f"stream_lag_samples_{when}: {len(lat)} of {expected}")
    if lat:
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        print(f"stream_lag_p50_ms_{when}: {lat[len(lat) // 2]:.0f}")
        print(f"stream_lag_p99_ms_{when}: {p99:.0f}")
        print(f"stream_lag_max_ms_{when}: {lat[-1]:.0f}")


def backfill_under_stream(sim, work):
    if BACKFILL_ROWS <= 0:
        print("backfill_rows_per_s: n/a (skipped: BENCH_SNAPSHOT_BACKFILL_ROWS=0)")
        return
    make_table(sim, "b", BACKFILL_ROWS, 3)
    print(f"backfill_rows: {BACKFILL_ROWS}")
    print(f"backfill_chunk_rows: {CHUNK_ROWS}")
    print(f"backfill_workload_tps: {WORKLOAD_TPS:g}")
    lake = os.path.join(work, "bf")
    wait_idle(sim.proc.pid)
    stream = subprocess.Popen(
        [CLI, "stream", *source_args(sim, "dbo_b", 2), *lake_args(lake, "bench-bf"),
         "--checkpoint", os.path.join(lake, "ckpt"), "--bootstrap", "--snapshot", "chunked",
         "--trigger", "processingTime=250ms", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    watch = StreamWatch(stream)
    watch.start()
    wl = Workload(sim, BACKFILL_ROWS + 1, BACKFILL_ROWS)
    try:
        wl.start()
        # the stream prints a line per batch with rows: its first says it is running
        deadline = time.monotonic() + 60
        while not watch.batches and time.monotonic() < deadline and stream.poll() is None:
            time.sleep(0.05)
        if not watch.batches:
            print("backfill_rows_per_s: n/a (the stream wrote no batch within 60 s)")
            return
        t_base = time.perf_counter()
        time.sleep(BASELINE_S)
        t_bf = time.perf_counter()
        s0, q0 = cpu_seconds(sim.proc.pid), table_store_reads(sim)
        runs = backfill_until_done(sim, "dbo_b", lake, "bench-bf", CHUNK_ROWS)
        sim_cpu, store = cpu_seconds(sim.proc.pid) - s0, table_store_reads(sim) - q0
        t_end = time.perf_counter()
        time.sleep(2.0)
        wl.stop.set()
        wl.join()
        # the last rows reach bronze: a batch whose end_lsn reaches the last new
        # row's (once capture has it); no later batch comes, the workload stopped
        last_key = wl.commits[-1][0] if wl.commits else None
        want = None
        deadline = time.monotonic() + 30
        while last_key is not None and time.monotonic() < deadline:
            if want is None:
                got = sim.run("SELECT CONVERT(varchar(22), __$start_lsn, 1) FROM cdc.dbo_b_CT "
                              f"WHERE __$operation = 2 AND id = {last_key}", database=DB)
                want = int(got[0][0], 16) if got else None
            if want is not None and watch.batches and watch.batches[-1][1] >= want:
                break
            time.sleep(0.1)
    finally:
        wl.stop.set()
        if stream.poll() is None:
            stream.send_signal(signal.SIGTERM)
        try:
            stream.wait(30)
        except subprocess.TimeoutExpired:
            stream.kill()
            stream.wait()
    bf_secs = sum(r.secs for r in runs)
    print(f"backfill_runs: {len(runs)}")
    print(f"backfill_seconds: {bf_secs:.2f}")
    print(f"backfill_rows_per_s: {BACKFILL_ROWS / bf_secs:.0f}")
    print(f"backfill_peak_rss_mb: {max(r.rss_mb for r in runs):.1f}")
    cpu = sum(r.cpu_s for r in runs)
    print(f"backfill_rows_per_cpu_s: {BACKFILL_ROWS / max(cpu, 1e-3):.0f}")
    # the workload's writes keep the table changing: the simulator serves the chunks
    # through SQLite, not its table store (and serves the stream's reads meanwhile)
    print(f"backfill_sim_cpu_seconds: {sim_cpu:.2f}")
    print(f"backfill_sim_rows_per_cpu_s: {BACKFILL_ROWS / max(sim_cpu, 1e-3):.0f}")
    print(f"backfill_sim_table_store_reads: {store}")
    base = lags_ms(sim, wl.commits, watch.batches, t_base, t_bf)
    during = lags_ms(sim, wl.commits, watch.batches, t_bf, t_end)
    print_lags("baseline", base, sum(1 for _, t in wl.commits if t_base <= t < t_bf))
    print_lags("during_backfill", during, sum(1 for _, t in wl.commits if t_bf <= t < t_end))
    wave_shares(lake, bf_secs)


def wave_shares(lake, bf_secs):
    """From the snapshot_chunk facts rows: each wave's duration (its read and bronze's
    commit) against its reads (per connection, the chunks it read one after another)."""
    try:
        from deltalake import DeltaTable
    except ImportError as e:
        print(f"backfill_wave_commit_share: n/a ({e})")
        return
    facts = DeltaTable(os.path.join(lake, "facts")).to_pyarrow_table().to_pylist()
    rows = [r for r in facts if r["event"] == "snapshot_chunk"]
    plan = [r for r in facts if r["event"] == "snapshot_plan"]
    if plan and plan[0]["duration_ms"] is not None:
        print(f"backfill_plan_seconds: {plan[0]['duration_ms'] / 1000:.2f}")
    waves = {}
    for r in rows:
        d = json.loads(r["detail"])
        waves.setdefault(d["wave"], []).append((d["chunk"], r))
    wave_ms = read_ms = 0.0
    for chunks in waves.values():
        chunks.sort()
        if any(r["read_seconds"] is None for _, r in chunks):
            continue
        per_conn = {}
        for i, (_, r) in enumerate(chunks):  # chunk i of a wave is read by connection i % 2
            per_conn[i % 2] = per_conn.get(i % 2, 0.0) + r["read_seconds"] * 1000
        wave_ms += chunks[0][1]["duration_ms"]
        read_ms += max(per_conn.values())
    print(f"backfill_waves: {len(waves)}")
    if wave_ms > 0:
        print(f"backfill_wave_read_share: {read_ms / wave_ms:.2f}")
        # after the last read of the wave: its Parquet files closed, bronze's commit
        print(f"backfill_wave_commit_share: {max(0.0, wave_ms - read_ms) / wave_ms:.2f}")
        # the process's time outside waves: start, plan, plans and facts rows
        print(f"backfill_outside_waves_share: {max(0.0, bf_secs * 1000 - wave_ms) / (bf_secs * 1000):.2f}")


if __name__ == "__main__":
    main()
