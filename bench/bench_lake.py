"""Lake benchmark (make bench-lake): BENCH_LAKE_ROWS rows (default 10,000,000)
of the representative CDC schema written as ONE Delta append with zstd by our
code (bench/bench_lake.c: lake appender = our Parquet writer + Delta log),
then the same data written by deltalake.write_deltalake and by
pyarrow.parquet (zstd), and read back by our reader and by pyarrow
(single-threaded, use_threads=False) from the same files.

Each writer and reader runs in its own process, so peak RSS is its own; the
Python ones hold the input table in memory (reported as *_input_rss_mb).
Prints `name: value` lines, then the ratios against the goals (reported, not
asserted): write >= 1.5x delta-rs rows/s, size <= 1.1x pyarrow, write peak
RSS <= 256 MB, our read >= pyarrow single-threaded.
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("MCDC_BUILD", os.path.join(ROOT, "build"))
DRIVER = os.path.join(BUILD, "mcdc-bench-lake")


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def data_files(table):
    out = []
    for dirpath, dirs, files in os.walk(table):
        dirs[:] = [d for d in dirs if d != "_delta_log"]
        out += [os.path.join(dirpath, f) for f in files if f.endswith(".parquet")]
    return sorted(out)


def load(table):
    """Our table's rows as one Arrow table (not timed)."""
    import pyarrow.parquet as pq
    import pyarrow as pa
    return pa.concat_tables([pq.read_table(f) for f in data_files(table)])


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(kind, src, dst):
    import pyarrow.parquet as pq
    if kind == "pyarrow-read":
        # Single-threaded for real: use_threads=False still decodes ahead on
        # the IO pool, which takes a second core.
        import pyarrow as pa
        pa.set_cpu_count(1)
        pa.set_io_thread_count(1)
        files = data_files(src)
        c0 = cpu()
        t0 = time.perf_counter()
        rows = nbytes = 0
        for f in files:
            t = pq.read_table(f, use_threads=False, pre_buffer=False)
            rows += t.num_rows
            nbytes += t.nbytes
            del t
        secs = time.perf_counter() - t0
        print(f"pyarrow_read_seconds: {secs:.3f}")
        print(f"pyarrow_read_cpu_seconds: {cpu() - c0:.3f}")
        print(f"pyarrow_read_rows_per_s: {rows / secs:.0f}")
        print(f"pyarrow_read_mb_per_s: {nbytes / 1e6 / secs:.1f}")
        print(f"pyarrow_read_peak_rss_mb: {rss_mb():.1f}")
        return
    table = load(src)
    base = rss_mb()
    name = "deltalake" if kind == "deltalake-write" else "pyarrow"
    c0 = cpu()
    t0 = time.perf_counter()
    if kind == "deltalake-write":
        import deltalake
        deltalake.write_deltalake(
            dst, table, writer_properties=deltalake.WriterProperties(compression="ZSTD"))
        out = sum(os.path.getsize(f) for f in data_files(dst))
    else:
        os.makedirs(dst, exist_ok=True)
        path = os.path.join(dst, "part-0.zstd.parquet")
        pq.write_table(table, path, compression="zstd")
        out = os.path.getsize(path)
    secs = time.perf_counter() - t0
    print(f"{name}_write_seconds: {secs:.3f}")
    print(f"{name}_write_cpu_seconds: {cpu() - c0:.3f}")
    print(f"{name}_write_rows_per_s: {table.num_rows / secs:.0f}")
    print(f"{name}_write_mb_per_s: {table.nbytes / 1e6 / secs:.1f}")
    print(f"{name}_output_bytes: {out}")
    print(f"{name}_write_input_rss_mb: {base:.1f}")
    print(f"{name}_write_peak_rss_mb: {rss_mb():.1f}")


def run(argv, figures, env=None):
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"bench_lake: {' '.join(argv)} failed:\n{p.stdout}\n{p.stderr}")
    for line in p.stdout.splitlines():
        print(line, flush=True)
        k, _, v = line.partition(": ")
        try:
            figures[k] = float(v)
        except ValueError:
            pass


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        return child(*sys.argv[2:])
    rows = int(os.environ.get("BENCH_LAKE_ROWS", "10000000"))
    subprocess.run(["make", "--no-print-directory", "-s", f"BUILD={BUILD}", DRIVER], cwd=ROOT,
                   check=True)
    out = tempfile.mkdtemp(prefix="bench-lake-")
    figures = {}
    try:
        ours = os.path.join(out, "ours")
        print(f"rows: {rows}")
        run([DRIVER, "write", ours, str(rows)], figures)
        run([DRIVER, "read", ours], figures)
        run([DRIVER, "read", ours], figures, env=dict(os.environ, BENCH_LAKE_MALLOPT="1"))
        me = [sys.executable, os.path.abspath(__file__), "--child"]
        run(me + ["pyarrow-read", ours, "-"], figures)
        run(me + ["deltalake-write", ours, os.path.join(out, "deltalake")], figures)
        run(me + ["pyarrow-write", ours, os.path.join(out, "pyarrow")], figures)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    f = figures
    print(f"write_vs_deltalake_ratio: {f['ours_write_rows_per_s'] / f['deltalake_write_rows_per_s']:.2f}"
          "   (goal >= 1.5)")
    print(f"size_vs_pyarrow_ratio: {f['ours_output_bytes'] / f['pyarrow_output_bytes']:.3f}"
          "   (goal <= 1.1)")
    print(f"write_peak_rss_mb: {f['ours_write_peak_rss_mb']:.1f}   (goal <= 256)")
    print(f"read_vs_pyarrow_ratio: {f['ours_read_rows_per_s'] / f['pyarrow_read_rows_per_s']:.2f}"
          "   (goal >= 1.0)")
    # CPU-time forms (the machine is shared: wall time carries others' load)
    print("write_vs_deltalake_cpu_ratio: "
          f"{f['deltalake_write_cpu_seconds'] / f['ours_write_cpu_seconds']:.2f}")
    print(f"read_vs_pyarrow_cpu_ratio: {f['pyarrow_read_cpu_seconds'] / f['ours_read_cpu_seconds']:.2f}")
    print("read_vs_pyarrow_mallopt_ratio: "
          f"{f['ours_read_mallopt_rows_per_s'] / f['pyarrow_read_rows_per_s']:.2f}")
    print("read_vs_pyarrow_mallopt_cpu_ratio: "
          f"{f['pyarrow_read_cpu_seconds'] / f['ours_read_mallopt_cpu_seconds']:.2f}")


if __name__ == "__main__":
    main()
