#!/usr/bin/env bash
# The benchmarks' smoke run (`make bench-smoke`; `make test` runs it as its
# bench suite): every benchmark program compiles (`make bench-programs`: the
# project's flags, warnings as errors), and every benchmark runs once at its
# smallest size (a few thousand rows, the Spark reference skipped), so that
# none can rot unseen. A run passes when it exits 0 and prints the figure
# named for it. It measures nothing: the sizes are far too small, and no
# figure is compared with a goal. Ends with "bench: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${MCDC_BUILD:-build}
export PYTHON=${PYTHON:-.venv/bin/python}
pass=0
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
step() { # name, the figure its output must hold ("-": none), command...
  local name=$1 want=$2 t0=$SECONDS
  shift 2
  if "$@" >"$out" 2>&1 && { [ "$want" = - ] || grep -qE "^$want: [0-9.]+" "$out"; }; then
    pass=$((pass + 1))
    echo "ok   $name ($((SECONDS - t0)) s)"
  else
    fail=$((fail + 1))
    echo "FAIL $name ($((SECONDS - t0)) s)${want:+, expected a figure '$want'}:"
    tail -20 "$out" | sed 's/^/     /'
  fi
}
step "every benchmark program compiles" - \
  make --no-print-directory -s BUILD="$BUILD" bench-programs
step bench-reader reader_rows_per_s_1conn env BENCH_READER_ROWS=2000 bench/bench_reader.sh
step bench-table table_general_path_2conn_rows env BENCH_TABLE_ROWS=2000 bench/bench_table.sh
step bench-native replay_all_rows_per_s_wall env BENCH_NATIVE_ROWS=2000 bench/bench_native.sh
step bench-parquet read_zstd_cpu_s_per_mrow env BENCH_ROWS=20000 bench/bench_parquet.sh
step bench-lake read_vs_pyarrow_ratio env BENCH_LAKE_ROWS=20000 "$PYTHON" bench/bench_lake.py
step bench-stream e2e_rows_per_s env BENCH_ROWS=2000 BENCH_REFERENCE_ROWS=0 \
  BENCH_LATENCY_SAMPLES=2 "$PYTHON" bench/bench_stream.py
step bench-snapshot backfill_rows_per_s env BENCH_SNAPSHOT_ROWS=2000 \
  BENCH_SNAPSHOT_REFERENCE_ROWS=0 BENCH_SNAPSHOT_BACKFILL_ROWS=2000 BENCH_SNAPSHOT_CHUNK_ROWS=500 \
  BENCH_SNAPSHOT_BASELINE_SECONDS=1 BENCH_SNAPSHOT_WORKLOAD_TPS=5 "$PYTHON" bench/bench_snapshot.py
step bench-silver reconcile_tier2_rows_per_s env BENCH_SILVER_ROWS=2000 BENCH_SILVER_CHANGES=200 \
  "$PYTHON" bench/bench_silver.py
# S3's side only: Azurite's start and deltalake's second run would double it
step bench-object-store s3_vs_deltalake_ratio env BENCH_OBJSTORE_ROWS=1000 \
  BENCH_OBJSTORE_BATCH_ROWS=500 BENCH_OBJSTORE_STORES=s3 "$PYTHON" bench/bench_object_store.py
step bench-many many_vs_processes_rss_ratio env BENCH_MANY_TABLES=6 BENCH_MANY_BUSY=2 \
  BENCH_MANY_ROWS=500 BENCH_MANY_PROCESSES=4 BENCH_MANY_IDLE_SECONDS=1 "$PYTHON" bench/bench_many.py
# the reference skipped: a Spark of ours only
step bench-spark spark_binding_rows_per_s env BENCH_SPARK_ROWS=2000 BENCH_SPARK_SNAPSHOT_ROWS=2000 BENCH_SPARK_READER_ROUNDS=1 \
  BENCH_SPARK_REFERENCE_ROWS=0 "$PYTHON" bench/bench_spark.py
echo "bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
