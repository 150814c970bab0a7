"""Many tables as one service (make bench-many): BENCH_MANY_TABLES capture
instances in one database of the simulator, BENCH_MANY_BUSY of them given a
backlog of change rows, run two ways in the same run:

  - one `mssql-cdc start-many` process over all of them (one runtime: one
    probe per database, one budget);
  - one `mssql-cdc stream` process per table (BENCH_MANY_PROCESSES of them:
    200 processes polling every 10 ms do not fit the 2 cores a CI runner
    has, so by default 50; their RSS is scaled to the full table count, and
    the busy tables are among them).

Each way: the queries per second the idle service sends (the simulator
counts the requests it receives, EXEC sim.request_stats), its CPU seconds
per minute idle, its peak RSS (VmHWM; summed over the processes), and the
seconds from the backlog's load until every busy table's batches reached
the end of its change table. Both ways use the default trigger (idle polls
every 10 ms).

Prints `name: value` lines:
  many_idle_queries_per_s, many_idle_cpu_s_per_min, many_idle_sim_cpu_s_per_min
  (the simulator's, serving the probe), many_peak_rss_mb,
  many_busy_catch_up_seconds, and for the processes processes_idle_queries_per_s,
  processes_idle_cpu_s_per_min, processes_peak_rss_mb (scaled),
  processes_busy_catch_up_seconds; many_vs_processes_rss_ratio.
Not a test: nothing here asserts a goal.

Environment: BENCH_MANY_TABLES (200), BENCH_MANY_BUSY (10), BENCH_MANY_ROWS
(change rows per busy table, 20,000), BENCH_MANY_PROCESSES (50; 0 runs the start-many way only),
BENCH_MANY_IDLE_SECONDS (10).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "interop"))
from conftest import CLI, Sim  # noqa: E402

sys.path.insert(0, HERE)
from benchlib import cpu_seconds  # noqa: E402

TABLES = int(os.environ.get("BENCH_MANY_TABLES", "200"))
BUSY = int(os.environ.get("BENCH_MANY_BUSY", "10"))
ROWS = int(os.environ.get("BENCH_MANY_ROWS", "20000"))
PROCESSES = min(TABLES, int(os.environ.get("BENCH_MANY_PROCESSES", "50")))
IDLE_S = float(os.environ.get("BENCH_MANY_IDLE_SECONDS", "10"))
# start-many's --max-connections; "" leaves its default (a connection per
# table and 4 to read with)
CONNECTIONS = os.environ.get("BENCH_MANY_CONNECTIONS", "")
DB = "bench"
BATCH = re.compile(r"^(dbo_t\d+): batch \d+: \d+ rows .* end (0x[0-9A-F]{20})", re.M)


def ci(i):
    return f"dbo_t{i}"


def make_db(sim):
    sim.run(f"CREATE DATABASE {DB};")
    sim.run("EXEC sys.sp_cdc_enable_db;", database=DB)
    for first in range(0, TABLES, 50):  # batches of 50 tables: a bounded statement
        sql = ""
        for i in range(first, min(TABLES, first + 50)):
            sql += (f"CREATE TABLE dbo.t{i} (id INT NOT NULL PRIMARY KEY, v NVARCHAR(40) NULL);"
                    f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't{i}', "
                    "@role_name = NULL;")
        sim.run(sql, database=DB)
    # a first change, so that max_lsn is not NULL and every stream starts
    sim.run("INSERT INTO dbo.t0 VALUES (1, N'first');", database=DB)
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database=DB)


def requests(sim):
    return sim.run("EXEC sim.request_stats;")[0][0]


def hwm_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class Way:
    """Running processes for some tables, their stderr in files."""

    def __init__(self, work, name):
        self.work = os.path.join(work, name)
        os.makedirs(self.work)
        self.procs, self.logs = [], []

    def start(self, args):
        log = open(os.path.join(self.work, f"log{len(self.procs)}"), "w+")
        self.procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log))
        self.logs.append(log)

    def ends(self):
        """The latest end LSN each table's batches reached."""
        out = {}
        for log in self.logs:
            log.flush()
            with open(log.name) as f:
                for m in BATCH.finditer(f.read()):
                    out[m.group(1)] = max(out.get(m.group(1), ""), m.group(2))
        return out

    def alive(self):
        for p, log in zip(self.procs, self.logs):
            if p.poll() is not None:
                with open(log.name) as f:
                    raise SystemExit(f"a process stopped ({p.returncode}): {f.read()[-2000:]}")

    def wait_started(self, instances, limit_s=600):
        deadline = time.time() + limit_s
        while time.time() < deadline:
            self.alive()
            if all(os.path.exists(os.path.join(self.work, "ckpt", c, "commits", "0"))
                   for c in instances):
                return
            time.sleep(0.2)
        raise SystemExit(f"the streams of {self.work} did not start in {limit_s} s")

    def cpu(self):
        return sum(cpu_seconds(p.pid) for p in self.procs)

    def hwm(self):
        return sum(hwm_mb(p.pid) for p in self.procs)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()


def common(cs, work):
    return ["--connectionString", cs, "--target", os.path.join(work, "bronze_{ci}"),
            "--checkpoint", os.path.join(work, "ckpt", "{ci}")]


def idle(sim, way):
    """Queries a second, the way's CPU-seconds a minute and the simulator's."""
    r0, c0, s0, t0 = requests(sim), way.cpu(), cpu_seconds(sim.proc.pid), time.time()
    time.sleep(IDLE_S)
    r1, c1, s1, t1 = requests(sim), way.cpu(), cpu_seconds(sim.proc.pid), time.time()
    per_min = 60 / (t1 - t0)
    return (r1 - r0 - 1) / (t1 - t0), (c1 - c0) * per_min, (s1 - s0) * per_min


def backlog(sim, busy, seed):
    """Loads ROWS change rows into each busy table; the end LSN of each."""
    want = {}
    for i in busy:
        sim.run(f"EXEC sim.bulk_load @capture_instance = N'{ci(i)}', "
                f"@transactions = {max(1, ROWS // 100)}, @rows_per_tx = {min(ROWS, 100)}, "
                f"@seed = {seed};", database=DB)
        want[ci(i)] = sim.run(f"SELECT CONVERT(varchar(22), MAX(__$start_lsn), 1) FROM "
                              f"cdc.[{ci(i)}_CT];", database=DB)[0][0]
    return want


def catch_up(way, want, t0, limit_s=1800):
    while time.time() - t0 < limit_s:
        way.alive()
        ends = way.ends()
        if all(ends.get(c, "") >= lsn for c, lsn in want.items()):
            return time.time() - t0
        time.sleep(0.05)
    raise SystemExit(f"the busy tables did not catch up in {limit_s} s")


def run_way(sim, work, name, instances, start):
    way = Way(work, name)
    try:
        start(way)
        way.wait_started(instances)
        time.sleep(1.0)  # the last starts' work settles
        q, cpu, sim_cpu = idle(sim, way)
        busy = list(range(1, 1 + BUSY))
        t0 = time.time()
        want = backlog(sim, busy, seed=len(name))
        secs = catch_up(way, want, t0)
        rss = way.hwm()
    finally:
        way.stop()
    return q, cpu, sim_cpu, rss, secs


def main():
    work = tempfile.mkdtemp(prefix="mcdc-bench-many-")
    data = os.path.join(work, "sim")
    os.makedirs(data)
    sim = Sim(data, ["--capture-poll-ms", "20", "--capture-latency-ms", "0"])
    try:
        make_db(sim)
        cs = sim.connection_string(DB)
        every = [ci(i) for i in range(TABLES)]

        def one(way):
            budget = ["--max-connections", CONNECTIONS] if CONNECTIONS else []
            way.start([CLI, "start-many", *common(cs, way.work), "--capture-instances",
                       ",".join(every), "--app-id", "{ci}-many", *budget])

        mq, mcpu, msim, mrss, msecs = run_way(sim, work, "many", every, one)
        print(f"many_tables: {TABLES}")
        print(f"many_idle_queries_per_s: {mq:.1f}")
        print(f"many_idle_cpu_s_per_min: {mcpu:.2f}")
        print(f"many_idle_sim_cpu_s_per_min: {msim:.2f}")
        print(f"many_peak_rss_mb: {mrss:.1f}")
        print(f"many_busy_catch_up_seconds: {msecs:.2f}")
        sys.stdout.flush()
        if PROCESSES == 0:
            return

        some = [ci(i) for i in range(PROCESSES)]  # t1..tBUSY are busy: among them

        def each(way):
            for c in some:
                args = [a.replace("{ci}", c) for a in common(cs, way.work)]
                way.start([CLI, "stream", *args, "--captureInstance", c, "--app-id",
                           f"{c}-proc", "--query-name", c])

        pq, pcpu, _, prss, psecs = run_way(sim, work, "processes", some, each)
        scale = TABLES / PROCESSES
        print(f"processes_count: {PROCESSES} (RSS, queries and CPU scaled by {scale:.2f} to "
              f"{TABLES} tables)")
        print(f"processes_idle_queries_per_s: {pq * scale:.1f}")
        print(f"processes_idle_cpu_s_per_min: {pcpu * scale:.2f}")
        print(f"processes_peak_rss_mb: {prss * scale:.1f}")
        print(f"processes_busy_catch_up_seconds: {psecs:.2f}")
        print(f"many_vs_processes_rss_ratio: {mrss / (prss * scale):.4f}")
    finally:
        sim.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
