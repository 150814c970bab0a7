#!/usr/bin/env bash
# Parquet benchmark (make bench-parquet): our writer on 10M bronze-shaped CDC
# rows (uncompressed, snappy, zstd; single-threaded, then 2 threads), the same
# rows again in zstd, snappy, lz4_raw and uncompressed (bench_rewrite: CPU
# seconds and bytes per row), our reader on the zstd file, then pyarrow writing
# the same table with zstd.
# Prints `name: value` lines. Environment: BENCH_ROWS (default 10000000).
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${BENCH_ROWS:-10000000}"
BUILD="${MCDC_BUILD:-build}"
make --no-print-directory -s BUILD="$BUILD" "$BUILD/mcdc-bench-parquet" "$BUILD/mcdc-bench-rewrite"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
echo "== ours, 1 thread"
"$BUILD/mcdc-bench-parquet" "$OUT" "$ROWS" 1
echo "== ours, 2 threads"
"$BUILD/mcdc-bench-parquet" "$OUT" "$ROWS" 2 | grep -E '^(threads|write_zstd)'
echo "== ours, the zstd file's rows again in each codec (CPU per million rows, bytes per row)"
"$BUILD/mcdc-bench-rewrite" "$OUT/bench_zstd.parquet" "$OUT" 1 3
echo "== pyarrow"
.venv/bin/python - "$OUT/bench_zstd.parquet" <<'PY'
import os, sys, time
import pyarrow as pa, pyarrow.parquet as pq
src = sys.argv[1]
t0 = time.perf_counter()
table = pq.read_table(src)
print("pyarrow_read_zstd_seconds: %.3f" % (time.perf_counter() - t0))
out = src + ".pyarrow.parquet"
t0 = time.perf_counter()
pq.write_table(table, out, compression="zstd", row_group_size=1 << 20)
secs = time.perf_counter() - t0
print("pyarrow_rows: %d" % table.num_rows)
print("pyarrow_write_zstd_seconds: %.3f" % secs)
print("pyarrow_write_zstd_rows_per_s: %.0f" % (table.num_rows / secs))
print("pyarrow_write_zstd_file_mb: %.1f" % (os.path.getsize(out) / 1e6))
PY
