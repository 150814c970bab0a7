"""Object-store benchmark (make bench-object-store; issue 23): the same change
rows streamed into bronze by `mssql-cdc stream` (availableNow) on local disk,
on moto's S3 and on Azurite, and by the path a user would script on each
store: the rows of our reader (the Python package's read_changes) written by
deltalake's write_deltalake in batches of the same sizes as our stream's
batches, one commit each. Both writers talk to the store through
tests/interop/faultproxy.py's FaultProxy (no fault armed), which counts their
requests.

Per store (prefix s3_ or azure_):
  requests_per_commit      ours: the requests a commit makes, per Delta
                           commit (goal: 1): those on a commit file,
                           _delta_log/<20 digits>.json, whatever the method:
                           the conditional PUT of version N, its retries,
                           and the reads of the winners' commits a lost race
                           makes (and a commit read at the open: none on the
                           bench's new table). Not counted: the Delta
                           checkpoint every tenth version (its file and
                           _last_checkpoint) and the open's read of the hint
                           and listing of the log
  log_requests_per_commit  ours: every request whose path or query names the
                           bronze table's _delta_log/ (the above, the
                           checkpoints, the open's listing and reads), per
                           Delta commit
  all_requests_per_commit  ours: every request of the run (data files and
                           the checkpoint included), per Delta commit
  commit_writes_per_commit ours: the requests that change the log (puts,
                           posts, deletes: the commit, Delta checkpoints)
  log_requests_by_kind     ours: the log's requests by kind (list, get,
                           range_get, head, put), per commit
  server_seconds           the time the server took over our requests (how
                           much of a writer's time the store itself bounds),
                           split into data files, _delta_log/ and the rest
                           (the stream's checkpoint, its lease)
  deltalake_requests_per_commit, deltalake_log_requests_per_commit,
  deltalake_all_requests_per_commit...: the same, counted the same way, for
                           write_deltalake (whose requests on commit files
                           also include the reads of the log each call makes
                           when it loads the table)
  vs_deltalake_ratio       our rows/s over deltalake's on the same server
                           (goal: at least 2), each writer's whole process
                           from its start to its exit: ours opening the
                           lake, its checkpoint and lease; the script's
                           interpreter and imports (what a user waits for)
  vs_deltalake_ratio_after_imports  the same with deltalake's time counted
                           from the reader's open to the last commit only
                           (its interpreter's start and imports left out,
                           ours still whole: in deltalake's favour)
  vs_local_ratio           our rows/s on the store over ours on local disk
  peak_rss_mb              our process's peak RSS (goal: at most 256)
  serial_rows_per_s, serial_peak_rss_mb, overlap_speedup
                           (BENCH_OBJSTORE_OVERLAP_AB=1) ours with
                           overlapBatches=false, once right before the
                           default run (which overlaps on an object store)
                           and once right after it, and the default's rate
                           over theirs: about the same load for all three
  large_file_peak_rss_mb   the same for one batch of every row, its data
                           files uploaded in parts of 8 MiB (multipart on
                           S3, blocks on Azure) as the Parquet writer
                           produces them (goal: at most 256)

The proxy answers with TCP_NODELAY (tests/interop/faultproxy.py): without
it every answer waited some 40 ms for a delayed ACK and both writers' rates
were the proxy's. Our stream's rows and deltalake's are checked equal (by
delta-rs reading each bronze) before a figure is printed.

Prints `name: value` lines. Not a test: nothing here asserts a goal.

Environment: BENCH_OBJSTORE_ROWS (change rows, default 3,000,000),
BENCH_OBJSTORE_BATCH_ROWS (rows a micro-batch, default 100,000),
BENCH_OBJSTORE_OVERLAP_AB (0; 1 adds the run without overlapBatches),
BENCH_OBJSTORE_STORES (default "s3,azure"), BENCH_OBJSTORE_LARGE (1; 0 skips
the large-file runs), BENCH_OBJSTORE_DUMP=1 (every request on stderr).
"""
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.path.insert(0, HERE)

ROWS = int(os.environ.get("BENCH_OBJSTORE_ROWS", "3000000"))
BATCH_ROWS = int(os.environ.get("BENCH_OBJSTORE_BATCH_ROWS", "100000"))
STORES = [s for s in os.environ.get("BENCH_OBJSTORE_STORES", "s3,azure").split(",") if s]
LARGE = os.environ.get("BENCH_OBJSTORE_LARGE", "1") != "0"
OVERLAP_AB = os.environ.get("BENCH_OBJSTORE_OVERLAP_AB", "0") == "1"
ROWS_PER_TX = 100  # bench_stream.bulk_load: BATCH_ROWS / 100 commits a batch
# The parts of a multipart upload (S3) and the blocks of a block list
# (Azure): the backends' default, MCDC_S3_PART_BYTES and
# MCDC_AZURE_BLOCK_BYTES, which the CLI does not take as storage options
PART_BYTES = 8 * 1024 * 1024
RSS_GOAL_MB = 256
RATE_GOAL = 2.0
WRITER_FLAG = "--deltalake-writer"


def main():
    from benchlib import run_child
    from bench_stream import loaded_sim
    from conftest import CLI
    from faultproxy import FaultProxy
    from objstore import Azurite, Moto

    work = tempfile.mkdtemp(prefix="mcdc-bench-objstore-")
    sim, _ = loaded_sim(work, ROWS)
    try:
        cs = sim.connection_string("bench")
        per_batch = max(1, BATCH_ROWS // ROWS_PER_TX)

        def stream(root, env, commits_per_batch=per_batch, extra=()):
            args = [CLI, "stream", "--captureInstance", "dbo_bench", "--connectionString", cs,
                    "--target", f"{root}/bronze", "--app-id", "bench",
                    "--checkpoint", f"{root}/ckpt", "--trigger", "availableNow", "--json",
                    "--progress", "none", *extra]
            if commits_per_batch:
                args += ["--maxCommitsPerBatch", str(commits_per_batch)]
            run = run_child(args, env=env)
            batches = [json.loads(ln) for ln in run.out.splitlines() if ln.startswith("{")]
            return run, batches

        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
        # the first read of the change rows warms the simulator's caches:
        # the local run measured is the second
        stream(os.path.join(work, "warm"), base_env)
        local, batches = stream(os.path.join(work, "local"), base_env)
        sizes = [int(b["rows"]) for b in batches]  # --json: an object per batch
        rows = sum(sizes)
        local_rate = rows / local.secs
        print(f"objstore_rows: {rows}")
        load_average("after the local run")
        print(f"objstore_batches: {len(sizes)}")
        print(f"objstore_batch_rows: {max(sizes)}")
        print(f"local_rows_per_s: {local_rate:.0f}")
        print(f"local_peak_rss_mb: {local.rss_mb:.1f}")
        for store in STORES:
            server = {"s3": lambda: Moto(bucket="lake"),
                      "azure": lambda: Azurite(container="lake")}[store]()
            with server, timed_proxy(FaultProxy)(server.port) as proxy:
                Store(store, server, proxy, base_env).run(
                    stream, run_child, cs, sizes, rows, local_rate)
            load_average(f"after {store}")
    finally:
        sim.stop()
        shutil.rmtree(work, ignore_errors=True)


def load_average(when):
    """The machine's load: every figure here moves with it."""
    one, five, fifteen = os.getloadavg()
    print(f"load_average: {one:.2f} {five:.2f} {fifteen:.2f} ({when})")


def timed_proxy(base):
    """FaultProxy also noting how long the server behind it took over each
    request (.served: path and seconds, cleared with the counts): where a
    writer's time goes."""
    class TimedProxy(base):
        def __init__(self, port):
            super().__init__(port)
            self.served = []

        def _forward(self, method, path, headers, body):
            t0 = time.perf_counter()
            try:
                return super()._forward(method, path, headers, body)
            finally:
                with self.lock:
                    self.served.append((path, time.perf_counter() - t0))

        def reset_counts(self):
            super().reset_counts()
            with self.lock:
                self.served.clear()

        def server_seconds_on(self, pattern, exclude):
            """Seconds on requests whose path matches pattern and does not
            name exclude."""
            with self.lock:
                return sum(s for p, s in self.served
                           if re.search(pattern, urllib.parse.unquote(p))
                           and exclude not in urllib.parse.unquote(p))

        def server_seconds(self):
            """(seconds on requests naming a _delta_log/, all seconds)."""
            with self.lock:
                log = sum(s for p, s in self.served if "/_delta_log/" in urllib.parse.unquote(p))
                return log, sum(s for _, s in self.served)
    return TimedProxy




class Store:
    """One object store behind its counting proxy: our stream, deltalake's
    writer and our large-file run on it."""

    def __init__(self, name, server, proxy, base_env):
        self.name, self.server, self.proxy = name, server, proxy
        self.env = dict(base_env)
        if name == "s3":
            self.env.update(server.options, AWS_ENDPOINT_URL=proxy.url)
            self.so = dict(server.options, AWS_ENDPOINT_URL=proxy.url)
            self.direct = dict(server.options)
            self.uri = "s3://lake/"
            self.part_re = r"[?&]partNumber="
        else:
            self.env.update(server.options, AZURE_STORAGE_ENDPOINT=proxy.url)
            # delta-rs reaches an emulator on another port through this variable
            self.so = {"AZURE_STORAGE_USE_EMULATOR": "true"}
            self.direct = self.so
            self.uri = "az://lake/"
            self.part_re = r"[?&]comp=block(&|$)"

    def counts(self):
        """(requests naming a _delta_log/, all requests, the former by kind,
        those on a commit file _delta_log/<20 digits>.json) since the last
        reset."""
        with self.proxy.lock:
            seen = [(m, urllib.parse.unquote(p), st) for m, p, st in self.proxy.log]
        kinds, on_commits = {}, 0
        for m, path, status in seen:
            if "/_delta_log/" in path:
                kind = ("list" if re.search(r"[?&](list-type=2|comp=list)", path) else
                        "range_get" if m == "GET" and status == 206 else m.lower())
                kinds[kind] = kinds.get(kind, 0) + 1
                on_commits += bool(COMMIT_FILE.search(path))
        return sum(kinds.values()), len(seen), kinds, on_commits

    def table(self, root):
        """(Delta commits, rows, the data files' sizes) of root/bronze, read
        by delta-rs straight from the server."""
        from deltalake import DeltaTable
        if self.name == "azure":
            os.environ["AZURITE_BLOB_STORAGE_URL"] = "http://127.0.0.1:%d" % self.server.port
        dt = DeltaTable(self.uri + root + "/bronze", storage_options=self.direct)
        adds = dt.get_add_actions(flatten=True)
        sizes = adds.column("size_bytes").to_pylist()
        return dt.version() + 1, sum(adds.column("num_records").to_pylist()), sizes

    def server_time(self, who, secs):
        log, total = self.proxy.server_seconds()
        data = self.proxy.server_seconds_on(r"\.parquet(\?|$)", exclude="/_delta_log/")
        print(f"{self.name}_{who}server_seconds: {total:.2f} (the server's time over the "
              f"writer's requests: data files {data:.2f}, _delta_log/ {log:.2f}, the rest "
              f"{total - data - log:.2f}; the writer took {secs:.2f})")

    def run(self, stream, run_child, cs, sizes, rows, local_rate):
        p = self.name
        if OVERLAP_AB:
            before, _ = stream(self.uri + "serial-before", self.env,
                               extra=["--overlapBatches", "false"])
            check_rows(f"{p} serial", self.table("serial-before")[1], rows)
        self.proxy.reset_counts()
        ours, _ = stream(self.uri + "ours", self.env)
        log, total, kinds, on_commits = self.counts()
        dump(self.proxy, f"{p} ours")
        commits, got, _ = self.table("ours")
        check_rows(f"{p} ours", got, rows)
        rate = rows / ours.secs
        print(f"{p}_rows_per_s: {rate:.0f}")
        print(f"{p}_commits: {commits}")
        print(f"{p}_requests_per_commit: {on_commits / commits:.2f} (ours: requests on "
              "_delta_log/<version>.json per Delta commit: the conditional PUT, its retries, "
              "the reads a lost race makes; not the checkpoints nor the open's listing; "
              f"goal 1; {goal(on_commits <= commits)})")
        print(f"{p}_log_requests_per_commit: {log / commits:.2f} (ours: every request on "
              "_delta_log/ per Delta commit: commits, the checkpoint and _last_checkpoint every "
              "10 versions, the open's hint read and listing)")
        print(f"{p}_commit_writes_per_commit: {writes(kinds) / commits:.2f} (ours: "
              "writes to _delta_log/ per Delta commit)")
        print(f"{p}_log_requests_by_kind: {by_kind(kinds, commits)} (ours, per commit)")
        print(f"{p}_all_requests_per_commit: {total / commits:.2f} (ours: every request, data "
              "files and checkpoint included)")
        self.server_time("", ours.secs)
        if OVERLAP_AB:
            # the serial run on either side of ours: the server holds more
            # objects later, and the load moves
            after, _ = stream(self.uri + "serial-after", self.env,
                              extra=["--overlapBatches", "false"])
            check_rows(f"{p} serial", self.table("serial-after")[1], rows)
            secs = (before.secs + after.secs) / 2
            print(f"{p}_serial_rows_per_s: {rows / secs:.0f} (overlapBatches=false, the mean "
                  f"of a run before ours and one after: {rows / before.secs:.0f}, "
                  f"{rows / after.secs:.0f})")
            print(f"{p}_serial_peak_rss_mb: {max(before.rss_mb, after.rss_mb):.1f}")
            print(f"{p}_overlap_speedup: {secs / ours.secs:.2f} (the default's rate over the "
                  "serial runs')")

        self.proxy.reset_counts()
        dl = self.deltalake(run_child, cs, sizes)
        dl_log, dl_total, dl_kinds, dl_on_commits = self.counts()
        dump(self.proxy, f"{p} deltalake")
        dl_commits, dl_got, _ = self.table("deltalake")
        check_rows(f"{p} deltalake", dl_got, rows)
        dl_rate = rows / dl["wall_secs"]
        dl_rate_after_imports = rows / dl["secs"]
        print(f"{p}_deltalake_rows_per_s: {dl_rate:.0f} (its whole process: "
              f"{dl['wall_secs']:.2f} s)")
        print(f"{p}_deltalake_rows_per_s_after_imports: {dl_rate_after_imports:.0f} (from the "
              f"reader's open: {dl['secs']:.2f} s)")
        print(f"{p}_deltalake_write_seconds: {dl['write_secs']:.2f} (of {dl['secs']:.2f}; "
              "the rest in the reader's loop)")
        print(f"{p}_deltalake_commits: {dl_commits}")
        print(f"{p}_deltalake_requests_per_commit: {dl_on_commits / dl_commits:.2f} (delta-rs "
              "write_deltalake, counted the same way: with the reads of commits each call's "
              "table load makes)")
        print(f"{p}_deltalake_log_requests_per_commit: {dl_log / dl_commits:.2f}")
        print(f"{p}_deltalake_commit_writes_per_commit: "
              f"{writes(dl_kinds) / dl_commits:.2f}")
        print(f"{p}_deltalake_log_requests_by_kind: {by_kind(dl_kinds, dl_commits)}")
        print(f"{p}_deltalake_all_requests_per_commit: {dl_total / dl_commits:.2f}")
        self.server_time("deltalake_", dl["wall_secs"])
        print(f"{p}_deltalake_peak_rss_mb: {dl['rss_mb']:.1f}")
        ratio = rate / dl_rate
        after = rate / dl_rate_after_imports
        print(f"{p}_vs_deltalake_ratio: {ratio:.2f} (whole processes; goal: at least "
              f"{RATE_GOAL:g}; {goal(ratio >= RATE_GOAL)})")
        print(f"{p}_vs_deltalake_ratio_after_imports: {after:.2f} (deltalake's interpreter "
              f"and imports left out, ours whole; goal: at least {RATE_GOAL:g}; "
              f"{goal(after >= RATE_GOAL)})")
        print(f"{p}_vs_local_ratio: {rate / local_rate:.2f}")
        print(f"{p}_peak_rss_mb: {ours.rss_mb:.1f} (goal: at most {RSS_GOAL_MB}"
              f"; {goal(ours.rss_mb <= RSS_GOAL_MB)})")
        if LARGE:
            self.large(stream, rows)

    def large(self, stream, rows):
        """Every row in one batch: its data files (as the appender rolls them)
        go up in parts of 8 MiB as the Parquet writer fills them."""
        p = self.name
        self.proxy.reset_counts()
        run, _ = stream(self.uri + "large", self.env, commits_per_batch=0)
        dump(self.proxy, f"{p} large")
        with self.proxy.lock:
            parts = sum(1 for m, path, _ in self.proxy.log
                        if m == "PUT" and re.search(self.part_re, path))
        _, got, files = self.table("large")
        check_rows(f"{p} large", got, rows)
        print(f"{p}_large_file_peak_rss_mb: {run.rss_mb:.1f} (one batch of {rows} rows: "
              f"{len(files)} data file(s) of {sum(files) / 1048576:.1f} MB, the largest "
              f"{max(files) / 1048576:.1f} MB, sent as {parts} parts of "
              f"{PART_BYTES >> 20} MiB; goal: at most {RSS_GOAL_MB}"
              f"; {goal(run.rss_mb <= RSS_GOAL_MB)})")
        print(f"{p}_large_file_rows_per_s: {rows / run.secs:.0f}")

    def deltalake(self, run_child, cs, sizes):
        """The scripted path in a child of its own (its RSS its own, and the
        proxy's threads in this process not sharing its interpreter)."""
        env = dict(self.env)
        env["PYTHONPATH"] = os.path.join(ROOT, "python", "src")
        if self.name == "azure":
            env["AZURITE_BLOB_STORAGE_URL"] = self.proxy.url
        env["BENCH_OBJSTORE_WRITER"] = json.dumps(
            {"uri": self.uri + "deltalake/bronze", "so": self.so, "sizes": sizes,
             "options": {"captureInstance": "dbo_bench", "connectionString": cs}})
        run = run_child([sys.executable, os.path.abspath(__file__), WRITER_FLAG], env=env)
        result = json.loads(run.out.strip().splitlines()[-1])
        result["rss_mb"] = run.rss_mb
        result["wall_secs"] = run.secs
        return result


# a Delta commit file's name in a request's path
COMMIT_FILE = re.compile(r"/_delta_log/\d{20}\.json(\?|$)")


def goal(met):
    return "met" if met else "missed"


def writes(kinds):
    """The requests that change the log: puts, posts, deletes."""
    return sum(kinds.get(k, 0) for k in ("put", "post", "delete", "patch"))


def by_kind(kinds, commits):
    return " ".join(f"{k}={n / commits:.2f}" for k, n in sorted(kinds.items()))


def dump(proxy, what):
    """BENCH_OBJSTORE_DUMP=1: every request of the run on stderr."""
    if os.environ.get("BENCH_OBJSTORE_DUMP") == "1":
        with proxy.lock:
            for m, path, status in proxy.log:
                print(f"{what}: {m} {urllib.parse.unquote(path)} {status}", file=sys.stderr)


def check_rows(what, got, want):
    if got != want:
        raise SystemExit(f"{what}: bronze holds {got} rows, the local run {want}")


def deltalake_writer():
    """The user's script: read_changes' rows, write_deltalake per batch of
    the stream's sizes (the rest, if any, in batches of the last size)."""
    p = json.loads(os.environ["BENCH_OBJSTORE_WRITER"])
    import pyarrow as pa
    import mssql_cdc
    from deltalake import DeltaTable, write_deltalake
    t0 = time.perf_counter()
    reader = mssql_cdc.read_changes(p["options"])
    sizes = list(p["sizes"])
    target, pending, have, write_secs = p["uri"], [], 0, 0.0

    def flush():
        nonlocal target, pending, have, write_secs
        w0 = time.perf_counter()
        table = pa.Table.from_batches(pending, schema=reader.schema)
        if isinstance(target, str):
            write_deltalake(target, table, mode="append", storage_options=p["so"])
            target = DeltaTable(target, storage_options=p["so"])
        else:
            write_deltalake(target, table, mode="append")
        write_secs += time.perf_counter() - w0
        pending, have = [], 0

    want = sizes.pop(0) if sizes else 1 << 62
    for rb in reader:
        while rb.num_rows:
            take = min(rb.num_rows, want - have)
            pending.append(rb.slice(0, take))
            have += take
            rb = rb.slice(take)
            if have == want:
                flush()
                want = sizes.pop(0) if sizes else want
    if have:
        flush()
    print(json.dumps({"secs": time.perf_counter() - t0, "write_secs": write_secs}))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == WRITER_FLAG:
        deltalake_writer()
    else:
        main()
