#!/usr/bin/env bash
# Runs every suite and ends with one line "tests: N passed, N failed".
# Builds: gcc, clang, the public header as C and C++, ASan+UBSan, TSan.
# Checks: table data goes through src/storage only (check_storage_io.py); the
# shared library exports exactly the public API (check-abi.py); no module
# includes one above it (check-deps.py).
# Suites: unit tests (plain build, then ASan+UBSan and valgrind in shards, TSan), simulator and
# end-to-end tests, fuzz corpora, the benchmarks (every program compiled, each run once at its
# smallest size: bench/smoke.sh), interop tests with the Python readers and
# Spark, the stream's end-to-end and crash tests (one under TSan).
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
total_pass=0; total_fail=0
tally() { # name, output file, seconds
  local line p f
  line=$(grep -E '[0-9]+ passed' "$2" | tail -1)
  p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
  f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0)
  [ -z "$p" ] && p=0; [ -z "$f" ] && f=0
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
  echo "== $1: $p passed, $f failed (${3:-0} s)"
}
run_suite() { # name, command...
  local name=$1; shift
  local out; out=$(mktemp)
  local t0=$SECONDS
  echo "== $name"
  if ! "$@" 2>&1 | tee "$out"; then :; fi
  local rc=${PIPESTATUS[0]}
  tally "$name" "$out" $((SECONDS - t0))
  if [ "$rc" -ne 0 ] && ! grep -qE '[1-9][0-9]* failed' "$out"; then
    echo "== $name exited with status $rc"; total_fail=$((total_fail + 1))
  fi
  rm -f "$out"
}
# The interop suite as two pytest processes at once (JOBS=1: one): the files
# that start a JVM (Spark with delta-spark, the reference's package) in one,
# all others in the other. Most of its time is spent waiting on simulators,
# CLIs and JVMs, so the two overlap well on two cores; one JVM file at a time
# (they share a Spark session within the process). Each process has its own
# base temporary directory and lists its slowest tests; the last line sums
# both ("N passed, N failed", errors counted as failed).
JVM_TESTS="test_apply_peer test_apply_scd2 test_colmap_interop test_dv_interop test_objstore_spark
  test_reference_chunked test_reference_peer test_silver_modes test_spark40 test_spark_api
  test_spark_guards test_spark_interop test_spark_sources test_types_e2e"
interop_suite() {
  local py=.venv/bin/python jvm=() rest=() f tmp
  for f in tests/interop/test_*.py; do
    if [[ " $(echo $JVM_TESTS) " == *" $(basename "$f" .py) "* ]]; then jvm+=("$f"); else rest+=("$f"); fi
  done
  if [ "$JOBS" -lt 2 ] || [ ${#jvm[@]} -eq 0 ] || [ ${#rest[@]} -eq 0 ]; then
    "$py" -m pytest -q --durations=25 tests/interop
    return
  fi
  tmp=$(mktemp -d)
  # a command a script starts with & ignores SIGINT, and so would the jobs the
  # tests interrupt (KeyboardInterrupt in the Python package's tests): reset it
  env --default-signal=INT "$py" -m pytest -q --durations=15 --basetemp="$tmp/jvm" "${jvm[@]}" \
    >"$tmp/jvm.log" 2>&1 &
  local a=$!
  env --default-signal=INT "$py" -m pytest -q --durations=15 --basetemp="$tmp/rest" "${rest[@]}" \
    >"$tmp/rest.log" 2>&1 &
  local b=$!
  wait "$a"; local ra=$?
  wait "$b"; local rb=$?
  local pass=0 fail=0 n log
  for log in jvm rest; do
    echo "-- interop, the $log process:"
    cat "$tmp/$log.log"
    local line; line=$(grep -E '[0-9]+ (passed|failed|error)' "$tmp/$log.log" | tail -1)
    n=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+'); pass=$((pass + ${n:-0}))
    n=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+'); fail=$((fail + ${n:-0}))
    n=$(echo "$line" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+'); fail=$((fail + ${n:-0}))
  done
  rm -rf "$tmp"
  echo "interop: $pass passed, $fail failed"
  [ "$ra" -eq 0 ] && [ "$rb" -eq 0 ]
}
# each suite's line ends with its wall seconds, the builds' and the whole
# run's are printed too: CI must stay well within 45 minutes on 2 cores
t_start=$SECONDS
make -j"$JOBS" all || { echo "tests: 0 passed, 1 failed"; exit 1; }
make -j"$JOBS" CC=clang BUILD=build-clang all >/dev/null || { echo "clang build failed"; echo "tests: 0 passed, 1 failed"; exit 1; }
make headercheck >/dev/null || { echo "header check failed"; echo "tests: 0 passed, 1 failed"; exit 1; }
make -j"$JOBS" SAN=1 all >/dev/null || { echo "sanitizer build failed"; echo "tests: 0 passed, 1 failed"; exit 1; }
make -j"$JOBS" SAN=thread all >/dev/null || { echo "thread sanitizer build failed"; echo "tests: 0 passed, 1 failed"; exit 1; }
echo "== builds: $((SECONDS - t_start)) s"
# Table data goes through src/storage only (no file calls elsewhere in src/).
run_suite storage-io python3 scripts/check_storage_io.py
run_suite abi scripts/check-abi.py
run_suite deps scripts/check-deps.py
run_suite unit build/unit-tests
# the slow runs of the unit tests go as $JOBS shards at once (every test in
# exactly one: scripts/unit_shards.sh)
run_suite unit-asan-ubsan scripts/unit_shards.sh "$JOBS" build-san/unit-tests
# The unit tests where threads meet, again under TSan (a report makes the
# run exit non-zero, so the suite fails): the scan's read-ahead, the Parquet
# encoders, the batch pool, the verdict's racers, storage and Delta commit
# races, the simulator's capture thread and concurrent writers, the API.
# (All 399 take 2.5 minutes under TSan; these take seconds.)
TSAN_TESTS="lake_scan|lake_append_closes|parquet_streaming|batch_pool|finalization|storage_put_if_absent|progress_"
TSAN_TESTS="$TSAN_TESTS|delta_append_race|sim_capture_thread|sim_snapshot_under|api_|runtime_"
TSAN_TESTS="$TSAN_TESTS|storage_part_sender|s3_multipart"
run_suite unit-tsan env TSAN_OPTIONS="exitcode=66 ${TSAN_OPTIONS:-}" build-tsan/unit-tests "$TSAN_TESTS"
# Under valgrind the exhaustive fault sweeps try every 4th storage call
# (MCDC_TEST_FAULT_STEP; they took 3 of its minutes), ASan's run every one.
run_suite unit-valgrind env MCDC_TEST_FAULT_STEP=4 scripts/unit_shards.sh "$JOBS" valgrind -q \
  --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite build/unit-tests
# Microsoft's mssql-python (from tests/requirements.txt) joins the client tests.
export MSSQL_PYTHON=${MSSQL_PYTHON:-$PWD/.venv/bin/python}
for t in tests/e2e/*.sh; do
  [ -e "$t" ] || continue
  run_suite "$(basename "$t" .sh)" "$t"
done
# Every fuzz target replays its kept corpus (fresh fuzzing: make fuzz).
run_suite fuzz-corpus env FUZZ_SECONDS=0 scripts/fuzz.sh --regress
# Every benchmark program compiles and every benchmark runs at its smallest
# size (about a minute), so that none rots unseen (make bench measures).
run_suite bench bench/smoke.sh
if ls tests/interop/test_*.py >/dev/null 2>&1; then
  run_suite interop interop_suite
fi
echo "== all suites and builds: $((SECONDS - t_start)) s"
echo "tests: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
