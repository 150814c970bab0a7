#!/usr/bin/env bash
# bench-reader: the change reader alone against the simulator. Loads
# BENCH_READER_ROWS change rows with sim.bulk_load (5,000,000 from `make
# bench-reader`, 1,000,000 when the script runs alone), then reads them with
# 1 and 2 connections, then with the Python drivers (PYTHON=true skips them). Builds
# build/mcdc-bench-reader (which bench_stream.py also uses for its e2e/reader ratio) and
# build/mcdc-bench-sql (the setup's T-SQL). Prints `name: value`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${MCDC_BUILD:-build}
ROWS=${BENCH_READER_ROWS:-1000000}
make --no-print-directory -s BUILD="$BUILD" "$BUILD/mcdc-bench-reader" "$BUILD/mcdc-bench-sql"
RUN="$BUILD/mcdc-bench-sql"
TMP=$(mktemp -d /tmp/mcdc-bench-reader.XXXXXX)
SIM_PID=
cleanup() { [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PW='Sim-Passw0rd!'
"$BUILD/mssql-cdc-sim" --port "$PORT" --data "$TMP/data" --password "$PW" \
  --ready-file "$TMP/ready" --capture-poll-ms 20 --capture-latency-ms 0 >"$TMP/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 400); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
[ -e "$TMP/ready" ] || { cat "$TMP/sim.log"; exit 1; }
CS="Server=127.0.0.1,$PORT;Database=bench;UID=sa;PWD=$PW;Encrypt=no"
"$RUN" "Server=127.0.0.1,$PORT;UID=sa;PWD=$PW;Encrypt=no" "CREATE DATABASE bench"
"$RUN" "$CS" "CREATE TABLE dbo.bench (
    id INT NOT NULL PRIMARY KEY, big BIGINT NULL, amount DECIMAL(18,4) NULL,
    name NVARCHAR(50) NULL, at DATETIME2(7) NULL, flag BIT NULL, raw VARBINARY(16) NULL,
    guid UNIQUEIDENTIFIER NULL, note VARCHAR(200) NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'bench', @role_name = NULL;"
t0=$(date +%s.%N)
if ! "$RUN" "$CS" "EXEC sim.bulk_load @capture_instance = N'dbo_bench', @transactions = $((ROWS / 100)), @rows_per_tx = 100, @seed = 1;" 2>/dev/null; then
  # a simulator without sim.bulk_load: multi-row INSERTs of 1000 rows
  cat > "$TMP/gen.py" <<'PY'
import sys
total = int(sys.argv[1])
for b in range(total // 100):
    rows = (f"({b * 100 + i}, {i * 7919}, {i}.1234, N'name-{i}', NULL, "
            f"{i % 2}, 0x0102030405, NULL, "
            f"'note {i} abcdefghijklmnopqrstuvwxyz')" for i in range(100))
    print("INSERT INTO dbo.bench VALUES " + ",".join(rows))
PY
  python3 "$TMP/gen.py" "$ROWS" | "$RUN" "$CS" -
  "$RUN" "$CS" "EXEC sim.run_capture @ignore_latency = 1"
fi
t1=$(date +%s.%N)
echo "reader_bulk_load_rows: $ROWS"
echo "reader_bulk_load_seconds: $(echo "$t1 - $t0" | bc)"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SIM_PID/stat"; }
# The load's background checkpoint (WAL into the database file) would be
# counted as sending: wait until the simulator has used no CPU for a whole
# second (five 0.2 s looks in a row; at most 60 s), since the checkpoint
# waits on the disk between bursts and one quiet look could fall in a wait.
idle_wait() {
  local a b quiet=0
  for _ in $(seq 1 300); do
    a=$(cpu_ticks); sleep 0.2; b=$(cpu_ticks)
    if [ "$a" = "$b" ]; then quiet=$((quiet + 1)); else quiet=0; fi
    [ "$quiet" -ge 5 ] && return 0
  done
}
idle_wait
for n in 1 2; do
  echo "-- connections=$n"
  idle_wait
  s0=$(cpu_ticks)
  /usr/bin/time -f "%U %S %M" -o "$TMP/time$n" "$BUILD/mcdc-bench-reader" --connection-string "$CS" \
    --capture-instance dbo_bench --connections "$n" | tee "$TMP/reader$n.out"
  s1=$(cpu_ticks)
  cpu=$(awk '{print $1 + $2}' "$TMP/time$n")
  echo "reader_cpu_seconds_${n}conn: $cpu"
  echo "reader_rows_per_cpu_s_${n}conn: $(echo "$ROWS / ($cpu + 0.001)" | bc)"
  echo "reader_peak_rss_mb_${n}conn: $(awk '{printf "%.1f", $3 / 1024}' "$TMP/time$n")"
  # The simulator's own rate: rows per CPU-second it spent serving them
  # (what one of its cores can send), next to the reader's wall-clock rate.
  hz=$(getconf CLK_TCK)
  echo "sim_cpu_seconds_${n}conn: $(echo "scale=3; ($s1 - $s0) / $hz" | bc)"
  if [ "$n" = 1 ]; then
    send=$(echo "$ROWS * $hz / ($s1 - $s0 + 1)" | bc)
    echo "sim_send_rows_per_s: $send"
    # above 1: the simulator sends faster than the reader decodes, per CPU-second
    echo "sim_send_vs_reader_cpu_ratio: $(echo "scale=2; $send / ($ROWS / ($cpu + 0.001))" | bc)"
  else
    echo "sim_send_rows_per_s_${n}conn: $(echo "$ROWS * $hz / ($s1 - $s0 + 1)" | bc)"
  fi
done
one=$(awk '/^reader_rows_per_s:/ {print $2}' "$TMP/reader1.out")
echo "reader_rows_per_s_1conn: $one"
echo "reader_rows_per_s_2conn: $(awk '/^reader_rows_per_s:/ {print $2}' "$TMP/reader2.out")"
echo "-- python drivers (same rows, the reader's ordering)"
PY=${PYTHON:-.venv/bin/python}
"$PY" bench/bench_reader_python.py "$PORT" "$PW" bench dbo_bench | tee "$TMP/py.out"
best=$(awk '/^python_fastest_rows_per_s:/ {print $2}' "$TMP/py.out")
if [ -n "$best" ] && [ -n "$one" ]; then
  echo "reader_vs_fastest_python_ratio: $(echo "scale=2; $one / $best" | bc)"
fi
# Wall-clock rates are capped by the simulator when it sends slower than the
# clients read; per CPU-second of the client the comparison is the clients'.
best_cpu=$(awk '/^python_fastest_rows_per_cpu_s:/ {print $2}' "$TMP/py.out")
one_cpu=$(echo "$ROWS / ($(awk '{print $1 + $2}' "$TMP/time1") + 0.001)" | bc)
if [ -n "$best_cpu" ]; then
  echo "reader_vs_fastest_python_cpu_ratio: $(echo "scale=2; $one_cpu / $best_cpu" | bc)"
fi
