#!/usr/bin/env bash
# bench-native: decode cost of the native TDS backend vs FreeTDS on the
# benchmark change table (bench_reader.sh's schema), BENCH_NATIVE_ROWS change
# rows (default 1,000,000) loaded with sim.bulk_load. Measures, for each
# backend: the change query fetched into reused batches (client CPU via
# getrusage, the simulator runs in its own process), the CDC reader, and a
# recorded reply decoded from memory (pure decode), and the native reader's
# recorded session decoded from memory as the reader does (replay_all_*).
# Prints `name: value`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${MCDC_BUILD:-build}
ROWS=${BENCH_NATIVE_ROWS:-1000000}
make --no-print-directory -s BUILD="$BUILD" "$BUILD/mcdc-bench-native"
TMP=$(mktemp -d /tmp/mcdc-bench-native.XXXXXX)
SIM_PID=
cleanup() { [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PW='Sim-Passw0rd!'
"$BUILD/mssql-cdc-sim" --port "$PORT" --data "$TMP/data" --password "$PW" --quiet \
  --ready-file "$TMP/ready" --capture-poll-ms 20 --capture-latency-ms 0 >"$TMP/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 400); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
[ -e "$TMP/ready" ] || { cat "$TMP/sim.log"; exit 1; }
B="$BUILD/mcdc-bench-native"
CS="Server=127.0.0.1,$PORT;Database=bench;UID=sa;PWD=$PW;Encrypt=no"
q() { "$B" query --backend native --connection-string "$1" --sql "$2" >/dev/null; }
q "Server=127.0.0.1,$PORT;UID=sa;PWD=$PW;Encrypt=no" "CREATE DATABASE bench"
q "$CS" "CREATE TABLE dbo.bench (
    id INT NOT NULL PRIMARY KEY, big BIGINT NULL, amount DECIMAL(18,4) NULL,
    name NVARCHAR(50) NULL, at DATETIME2(7) NULL, flag BIT NULL, raw VARBINARY(16) NULL,
    guid UNIQUEIDENTIFIER NULL, note VARCHAR(200) NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'bench', @role_name = NULL;"
q "$CS" "EXEC sim.bulk_load @capture_instance = N'dbo_bench', @transactions = $((ROWS / 100)), @rows_per_tx = 100, @seed = 1;"
SQL="DECLARE @f binary(10) = sys.fn_cdc_get_min_lsn(N'dbo_bench'), @t binary(10) = sys.fn_cdc_get_max_lsn();
SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_bench(@f, @t, N'all')"
for be in freetds native; do
  echo "-- query, backend=$be"
  "$B" query --backend $be --connection-string "$CS" --sql "$SQL"
done
for be in freetds native; do
  echo "-- reader, backend=$be"
  if [ $be = native ]; then export MCDC_TDS_RECORD="$TMP/reader.tds"; fi
  "$B" reader --backend $be --connection-string "$CS" --capture-instance dbo_bench
  unset MCDC_TDS_RECORD
done
echo "-- replay-all (the native reader's recorded session, from memory, fresh batches as the reader)"
"$B" replay-all --file "$TMP/reader.tds" --batch-rows 10000 | sed 's/^native_/replay_all_/'
echo "-- replay (recorded reply, from memory)"
MCDC_TDS_RECORD="$TMP/reply.tds" "$B" query --backend native --connection-string "$CS" --sql "$SQL" >/dev/null
"$B" replay --file "$TMP/reply.tds" --repeat "${BENCH_NATIVE_REPEAT:-3}"
# The Python drivers on the same query (client CPU via getrusage), when the venv has them.
PY=${PYTHON:-.venv/bin/python}
if [ -x "$PY" ]; then
  cat > "$TMP/py.py" <<'PYEOF'
import resource, sys, time
port, drv = int(sys.argv[1]), sys.argv[2]
sql = ("DECLARE @f binary(10) = sys.fn_cdc_get_min_lsn(N'dbo_bench'), @t binary(10) = sys.fn_cdc_get_max_lsn(); "
       "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_bench(@f, @t, N'all')")
try:
    if drv.startswith("mssql_python"):
        import mssql_python
        c = mssql_python.connect(f"Server=127.0.0.1,{port};Database=bench;UID=sa;PWD=Sim-Passw0rd!;Encrypt=no")
    else:
        import pymssql
        c = pymssql.connect(server="127.0.0.1", port=port, user="sa", password="Sim-Passw0rd!", database="bench")
except ImportError:
    sys.exit(0)
cur = c.cursor()
r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.time()
cur.execute(sql)
n = 0
if drv == "mssql_python_arrow":
    for b in cur.arrow_reader(65536):
        n += b.num_rows
else:
    while True:
        rows = cur.fetchmany(10000)
        if not rows: break
        n += len(rows)
r1 = resource.getrusage(resource.RUSAGE_SELF); t1 = time.time()
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(f"python_{drv}_rows: {n}\npython_{drv}_wall_seconds: {t1 - t0:.3f}\npython_{drv}_cpu_seconds: {cpu:.3f}\n"
      f"python_{drv}_cpu_s_per_1m_rows: {cpu / (n / 1e6):.3f}")
PYEOF
  for d in mssql_python_arrow mssql_python pymssql; do
    echo "-- python $d"
    "$PY" "$TMP/py.py" "$PORT" "$d" || true
  done
fi
[ -n "${BENCH_NATIVE_KEEP_REPLY:-}" ] && cp "$TMP/reply.tds" "$BENCH_NATIVE_KEEP_REPLY"
exit 0
