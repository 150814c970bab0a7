#!/usr/bin/env bash
# bench-table: a snapshot's reads of a base table alone against the
# simulator. Loads BENCH_TABLE_ROWS rows of a 10-column table with
# sim.bulk_load_table (10,000,000 from `make bench-table`, 1,000,000 when the
# script runs alone), then reads them with the snapshot reader's query on 1
# and 2 connections (READ COMMITTED, then SNAPSHOT), with the simulator's
# table store (its fast path) and once without it. Builds
# build/mcdc-bench-table. Prints `name: value`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${MCDC_BUILD:-build}
ROWS=${BENCH_TABLE_ROWS:-1000000}
make --no-print-directory -s BUILD="$BUILD" "$BUILD/mcdc-bench-table"
TMP=$(mktemp -d /tmp/mcdc-bench-table.XXXXXX)
SIM_PID=
cleanup() { [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
PW='Sim-Passw0rd!'
"$BUILD/mssql-cdc-sim" --port 0 --data "$TMP/data" --password "$PW" --ready-file "$TMP/ready" \
  --capture-poll-ms 0 >"$TMP/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 400); do [ -s "$TMP/ready" ] && break; sleep 0.05; done
[ -s "$TMP/ready" ] || { cat "$TMP/sim.log"; exit 1; }
PORT=$(cat "$TMP/ready")
CS="Server=127.0.0.1,$PORT;Database=bench;UID=sa;PWD=$PW;Encrypt=no"
PY=${PYTHON:-.venv/bin/python}
sql() { # one batch on database $1 (through python-tds)
  "$PY" - "$PORT" "$PW" "$1" "$2" <<'PY'
import sys, pytds
port, pw, db, sql = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
c = pytds.connect("127.0.0.1", port=port, user="sa", password=pw, database=db or None, autocommit=True)
c.cursor().execute(sql)
PY
}
sql "" "CREATE DATABASE bench"
sql bench "ALTER DATABASE bench SET ALLOW_SNAPSHOT_ISOLATION ON"
sql bench "CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY, big BIGINT NULL, amount DECIMAL(18,4) NULL,
    name NVARCHAR(50) NULL, at DATETIME2(7) NULL, flag BIT NULL, raw VARBINARY(16) NULL,
    guid UNIQUEIDENTIFIER NULL, note VARCHAR(200) NULL, d DATE NULL)"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SIM_PID/stat"; }
hz=$(getconf CLK_TCK)
t0=$(date +%s.%N)
sql bench "EXEC sim.bulk_load_table @table = N'dbo.t', @rows = $ROWS, @seed = 1"
t1=$(date +%s.%N)
echo "table_bulk_load_rows: $ROWS"
echo "table_bulk_load_seconds: $(echo "$t1 - $t0" | bc)"
# the load's background checkpoint would count as sending: wait until the
# simulator has used no CPU for a second (five quiet looks of 0.2 s)
idle_wait() {
  local a b quiet=0
  for _ in $(seq 1 300); do
    a=$(cpu_ticks); sleep 0.2; b=$(cpu_ticks)
    if [ "$a" = "$b" ]; then quiet=$((quiet + 1)); else quiet=0; fi
    [ "$quiet" -ge 5 ] && return 0
  done
}
COLS=id,big,amount,name,at,flag,raw,guid,note,d
read_once() { # label, connections, isolation
  idle_wait
  local s0 s1 cpu
  s0=$(cpu_ticks)
  /usr/bin/time -f "%U %S" -o "$TMP/time" "$BUILD/mcdc-bench-table" --connection-string "$CS" --table t --key id \
    --columns "$COLS" --connections "$2" --isolation "$3" >"$TMP/out"
  s1=$(cpu_ticks)
  cpu=$(awk '{print $1 + $2}' "$TMP/time")
  sed "s/^table_/table_$1_/" "$TMP/out"
  echo "table_$1_reader_cpu_seconds: $cpu"
  echo "table_$1_sim_cpu_seconds: $(echo "scale=3; ($s1 - $s0) / $hz" | bc)"
  # the simulator's own rate: rows per CPU-second it spent sending them
  echo "table_$1_sim_rows_per_cpu_s: $(echo "$ROWS * $hz / ($s1 - $s0 + 1)" | bc)"
  echo "table_$1_reader_rows_per_cpu_s: $(echo "$ROWS / ($cpu + 0.001)" | bc)"
}
read_once rc_1conn 1 readCommitted
read_once rc_2conn 2 readCommitted
read_once snapshot_2conn 2 snapshot
sql "" "EXEC sim.set_fast_path @on = 0"
read_once general_path_2conn 2 readCommitted
