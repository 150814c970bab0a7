#!/usr/bin/env bash
# Parquet benchmark (make bench-parquet): our writer on 10M bronze-shaped CDC
# rows (uncompressed, snappy, zstd; single-threaded, then 2 threads), the same
# rows again in zstd, snappy, lz4_raw and uncompressed (bench_rewrite: CPU
# seconds and bytes per row), our reader on the zstd file, then pyarrow writing
# the same table with zstd and uncompressed on one thread: rows per CPU-second
# of both sides (parquet_write_vs_pyarrow_cpu_ratio_*) and the file sizes.
# Prints `name: value` lines. Environment: BENCH_ROWS (default 10000000).
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${BENCH_ROWS:-10000000}"
BUILD="${MCDC_BUILD:-build}"
make --no-print-directory -s BUILD="$BUILD" "$BUILD/mcdc-bench-parquet" "$BUILD/mcdc-bench-rewrite"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
echo "== ours, 1 thread"
"$BUILD/mcdc-bench-parquet" "$OUT" "$ROWS" 1 | tee "$OUT/ours.txt"
echo "== ours, 2 threads"
"$BUILD/mcdc-bench-parquet" "$OUT" "$ROWS" 2 zstd | grep -E '^(threads|write_zstd)'
echo "== ours, the zstd file's rows again in each codec (CPU per million rows, bytes per row)"
"$BUILD/mcdc-bench-rewrite" "$OUT/bench_zstd.parquet" "$OUT" 1 3
echo "== pyarrow (one thread), the same rows, the same codecs"
.venv/bin/python - "$OUT/bench_zstd.parquet" "$OUT/ours.txt" <<'PY'
import os, sys, time
import pyarrow as pa, pyarrow.parquet as pq
pa.set_cpu_count(1)
pa.set_io_thread_count(1)
src, ours_txt = sys.argv[1], sys.argv[2]
ours = {}
for line in open(ours_txt):
    k, _, v = line.partition(": ")
    ours[k] = v.split()[0] if v.strip() else ""
t0 = time.perf_counter()
table = pq.read_table(src, use_threads=False)
print("pyarrow_read_zstd_seconds: %.3f" % (time.perf_counter() - t0))
print("pyarrow_rows: %d" % table.num_rows)
for codec, name in (("zstd", "zstd"), ("none", "uncompressed")):
    out = src + ".pyarrow.%s.parquet" % name
    t0, c0 = time.perf_counter(), time.process_time()
    pq.write_table(table, out, compression=codec, row_group_size=1 << 20)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    size = os.path.getsize(out)
    os.remove(out)
    rate = table.num_rows / cpu
    print("pyarrow_write_%s_seconds: %.3f" % (name, secs))
    print("pyarrow_write_%s_cpu_seconds: %.3f" % (name, cpu))
    print("pyarrow_write_%s_rows_per_s: %.0f" % (name, table.num_rows / secs))
    print("pyarrow_write_%s_rows_per_cpu_s: %.0f" % (name, rate))
    print("pyarrow_write_%s_file_mb: %.1f" % (name, size / 1e6))
    key = "parquet_write_rows_per_cpu_s_" + name
    if key in ours:
        print("parquet_write_vs_pyarrow_cpu_ratio_%s: %.2f" % (name, float(ours[key]) / rate))
    key = "write_%s_file_mb" % name
    if key in ours:
        print("parquet_file_size_vs_pyarrow_ratio_%s: %.3f" % (name, float(ours[key]) * 1e6 / size))
print("load_average: %.2f %.2f %.2f" % os.getloadavg())
PY
