#!/usr/bin/env bash
# The stream's change feed (src/source/mcdc_changes.c) under the CLI: 150,000
# change rows planned into commit-aligned ranges read in parallel
# (numPartitions=3), every row once in bronze; the columns option reads a
# subset with declared types. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${MCDC_BUILD:-build}
SIM=$BUILD/mssql-cdc-sim
CLI=$BUILD/mssql-cdc
PY=.venv/bin/python
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }
if [ ! -x "$SIM" ] || [ ! -x "$CLI" ] || [ ! -x "$PY" ]; then
  echo "reader_stream: $SIM, $CLI or $PY missing; skipping"; echo "0 passed, 0 failed"; exit 0
fi
TMP=$(mktemp -d /tmp/mcdc-reader-stream.XXXXXX)
SIM_PID=
cleanup() { [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PW='Sim-Passw0rd!'
"$SIM" --port "$PORT" --data "$TMP/data" --password "$PW" --ready-file "$TMP/ready" \
  --capture-poll-ms 20 --capture-latency-ms 0 >"$TMP/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 400); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
[ -e "$TMP/ready" ] || { cat "$TMP/sim.log"; echo "0 passed, 1 failed"; exit 1; }
sql() { "$PY" - "$PORT" "$PW" "$1" "$2" <<'PYEOF'
import sys, pymssql
port, pw, db, text = sys.argv[1:5]
c = pymssql.connect(server="127.0.0.1", port=port, user="sa", password=pw, database=db,
                    autocommit=True, tds_version="7.4")
cur = c.cursor(); cur.execute(text)
rows = []
while True:
    if cur.description is not None:
        rows = cur.fetchall()
    if not cur.nextset():
        break
for r in rows: print("|".join(str(v) for v in r))
PYEOF
}
sql master "CREATE DATABASE shop" >/dev/null
sql shop "CREATE TABLE dbo.big (id INT NOT NULL PRIMARY KEY, name NVARCHAR(40) NULL,
  amount DECIMAL(18,2) NULL, at DATETIME2(3) NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'big', @role_name = NULL;" >/dev/null
sql shop "EXEC sim.bulk_load @capture_instance = N'dbo_big', @transactions = 1500, @rows_per_tx = 100, @seed = 7;" >/dev/null
sql shop "EXEC sim.run_capture @ignore_latency = 1;" >/dev/null
CT=$(sql shop "SELECT COUNT(*) FROM cdc.dbo_big_CT")
CS="Server=127.0.0.1,$PORT;Database=shop;UID=sa;PWD=$PW;Encrypt=no"

out=$("$CLI" stream --captureInstance dbo_big --connectionString "$CS" --numPartitions 3 \
      --target "$TMP/lake/bronze" --app-id big --checkpoint "$TMP/lake/ckpt" \
      --facts-table "$TMP/lake/facts" --trigger availableNow --quiet 2>&1); rc=$?
check=$("$PY" - "$TMP/lake/bronze" <<'PYEOF'
import sys
from deltalake import DeltaTable
t = DeltaTable(sys.argv[1]).to_pyarrow_table().to_pylist()
keys = [(r["_start_lsn"], r["_command_id"], r["_seqval"], r["_operation"]) for r in t]
print(len(t), len(set(keys)))
PYEOF
)
rows=$(echo "$check" | cut -d' ' -f1); distinct=$(echo "$check" | cut -d' ' -f2)
if [ "$rc" = 0 ] && [ "$CT" -ge 150000 ] && [ "$rows" = "$CT" ] && [ "$distinct" = "$CT" ]; then
  ok "numPartitions=3: every change row once in bronze ($rows)"
else ko "numPartitions=3: every change row once in bronze" "rc=$rc ct=$CT rows=$rows distinct=$distinct" "$out"; fi

out=$("$CLI" stream --captureInstance dbo_big --connectionString "$CS" \
      --columns "id BIGINT, amount DECIMAL(20,2)" --maxCommitsPerBatch 500 \
      --target "$TMP/lake2/bronze" --app-id big2 --checkpoint "$TMP/lake2/ckpt" \
      --trigger availableNow --quiet 2>&1); rc=$?
check=$("$PY" - "$TMP/lake2/bronze" <<'PYEOF'
import sys
from deltalake import DeltaTable
t = DeltaTable(sys.argv[1]).to_pyarrow_table()
names = [f.name for f in t.schema if not f.name.startswith("_")]
print(t.num_rows, ",".join(names), str(t.schema.field("id").type), str(t.schema.field("amount").type))
PYEOF
)
if [ "$rc" = 0 ] && [ "$check" = "$CT id,amount int64 decimal128(20, 2)" ]; then
  ok "columns option: a typed subset"
else ko "columns option: a typed subset" "rc=$rc check=$check" "$out"; fi

out=$("$CLI" stream --captureInstance dbo_big --connectionString "$CS" \
      --columns "id DECIMAL(12,0), amount DOUBLE, at STRING" \
      --target "$TMP/lake5/bronze" --app-id big5 --checkpoint "$TMP/lake5/ckpt" \
      --trigger availableNow --quiet 2>&1); rc=$?
check=$("$PY" - "$TMP/lake5/bronze" "$PORT" "$PW" <<'PYEOF'
import sys, decimal, pymssql
from deltalake import DeltaTable
t = DeltaTable(sys.argv[1]).to_pyarrow_table()
got = {}
for r in t.to_pylist():
    got[(r["_start_lsn"], r["_seqval"], r["_operation"])] = (r["id"], r["amount"], r["at"])
c = pymssql.connect(server="127.0.0.1", port=sys.argv[2], user="sa", password=sys.argv[3],
                    database="shop", autocommit=True, tds_version="7.4")
cur = c.cursor()
cur.execute("SELECT TOP 2000 CONVERT(varchar(22), __$start_lsn, 1), CONVERT(varchar(22), __$seqval, 1), "
            "__$operation, id, amount, CONVERT(varchar(30), at, 121) FROM cdc.dbo_big_CT ORDER BY 1, 2, 3")
bad = 0
nonnull = 0
for lsn, seq, op, i, amount, at in cur.fetchall():
    nonnull += at is not None and amount is not None
    g = got[(lsn, seq, op)]
    if g[0] != decimal.Decimal(i) or (amount is None) != (g[1] is None) or \
       (amount is not None and abs(float(amount) - g[1]) > 1e-9 * max(1, abs(float(amount)))):
        bad += 1
    if g[2] != at:  # datetime2(3) as text, as CONVERT style 121 writes it
        bad += 1
bad += nonnull == 0
print(len(got), bad, str(t.schema.field("id").type), str(t.schema.field("amount").type),
      str(t.schema.field("at").type))
PYEOF
)
if [ "$rc" = 0 ] && [ "$check" = "$CT 0 decimal128(12, 0) double string" ]; then
  ok "columns option: casts on read (int to decimal, decimal to double, datetime2 to string)"
else ko "columns option: casts on read" "rc=$rc check=$check" "$out"; fi

out=$("$CLI" stream --captureInstance DBO_BIG --connectionString "$CS" --columns "nope INT" \
      --target "$TMP/lake3/bronze" --app-id big3 --checkpoint "$TMP/lake3/ckpt" \
      --trigger availableNow --quiet 2>&1); rc=$?
if [ "$rc" != 0 ] && echo "$out" | grep -q "'nope' is not a captured column"; then
  ok "a column no instance captures is refused"
else ko "a column no instance captures is refused" "rc=$rc" "$out"; fi

# The control connection dropped while the stream starts: retried on a new
# connection (fast backoff for the test), the stream completes. The fault's
# setter stays connected (faults spare the setter's own session).
"$PY" - "$PORT" "$PW" <<'PYEOF' &
import sys, time, pymssql
c = pymssql.connect(server="127.0.0.1", port=sys.argv[1], user="sa", password=sys.argv[2],
                    database="shop", autocommit=True, tds_version="7.4")
c.cursor().execute("EXEC sim.fault @kind = N'drop_at_query', @count = 3")
print("set", flush=True)
time.sleep(30)
PYEOF
SETTER=$!
sleep 1
out=$(MCDC_RETRY_BACKOFF_MS=10 "$CLI" stream --captureInstance dbo_big --connectionString "$CS" \
      --target "$TMP/lake4/bronze" --app-id big4 --checkpoint "$TMP/lake4/ckpt" \
      --trigger availableNow 2>&1); rc=$?
kill "$SETTER" 2>/dev/null; wait "$SETTER" 2>/dev/null
# (deltalake 1.6.6 with pyarrow 26 sometimes aborts at interpreter exit, after
# printing: the count is read from stdout alone.)
rows=$("$PY" -c "import sys; from deltalake import DeltaTable; print(DeltaTable(sys.argv[1]).to_pyarrow_table().num_rows)" "$TMP/lake4/bronze" 2>/dev/null | head -1)
if [ "$rc" = 0 ] && [ "$rows" = "$CT" ] && echo "$out" | grep -q "retrying on a new connection"; then
  ok "control connection lost: retried, stream completes"
else ko "control connection lost: retried, stream completes" "rc=$rc rows=$rows" "$out"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
