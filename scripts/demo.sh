#!/usr/bin/env bash
# make demo: the main job against the simulator, end to end.
#
#  1. starts mssql-cdc-sim (a SQL Server CDC simulator speaking TDS) on a free
#     loopback port, with its state in demo/sim
#  2. creates database shop, table dbo.orders, enables CDC on it, and starts a
#     workload (inserts, updates, deletes at 100 transactions/s for 8 s)
#  3. streams the changes into a local lake (demo/lake) with mssql-cdc stream
#     while the workload runs, then catches up with trigger availableNow
#  4. prints the facts (one row per micro-batch), the finalized_until verdict,
#     and checks bronze against the change table
#  5. builds silver (the current state, one row per key) from bronze with
#     mssql-cdc apply and checks it against the source table
#  6. reconciles silver with the source (mssql-cdc reconcile, report table
#     demo/lake/reconcile_report) and fails unless it reports only MATCH
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build
DEMO=${DEMO_DIR:-demo}
PW="Demo-Passw0rd!"
rm -rf "$DEMO"
mkdir -p "$DEMO"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "== starting mssql-cdc-sim on 127.0.0.1:$port (state in $DEMO/sim)"
"$BIN/mssql-cdc-sim" --port "$port" --data "$DEMO/sim" --password "$PW" \
  --capture-poll-ms 200 --ready-file "$DEMO/ready" --quiet > "$DEMO/sim.log" 2>&1 &
sim_pid=$!
trap 'kill $sim_pid 2>/dev/null; wait $sim_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$DEMO/ready" ] && break; sleep 0.05; done
[ -s "$DEMO/ready" ] || { cat "$DEMO/sim.log"; echo "demo: the simulator did not start"; exit 1; }

sql() { # database, T-SQL on stdin (batches separated by 'go')
  TDSVER=7.4 tsql -H 127.0.0.1 -p "$port" -U sa -P "$PW" -D "$1" -o fhq 2>&1 | grep -v '^locale\|^using default charset\|^Setting .* as default database' || true
}

echo "== creating shop.dbo.orders, enabling CDC, starting a workload"
sql master <<'SQL' >/dev/null
CREATE DATABASE shop
go
SQL
sql shop <<'SQL'
CREATE TABLE dbo.orders (
    order_id INT NOT NULL PRIMARY KEY,
    customer_id INT NULL,
    status NVARCHAR(20) NULL,
    amount DECIMAL(18,2) NULL,
    created_at DATETIME2(3) NULL)
go
EXEC sys.sp_cdc_enable_db
go
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL
go
EXEC sim.workload @table = N'dbo.orders', @tps = 100, @seconds = 8,
     @mix = 'insert=0.5,update=0.35,delete=0.15', @seed = 42
go
SQL

CS="Server=127.0.0.1,$port;Database=shop;UID=sa;PWD=$PW;Encrypt=no"
LAKE="$DEMO/lake"
stream() {
  "$BIN/mssql-cdc" stream --captureInstance dbo_orders --connectionString "$CS" \
    --target "$LAKE/bronze" --app-id demo-orders --checkpoint "$LAKE/checkpoint" \
    --facts-table "$LAKE/facts" --control-table "$LAKE/control" --granularity minute "$@"
}
echo "== streaming while the workload runs (processingTime=1s, 6 batches)"
stream --trigger processingTime=1s --max-batches 6
sleep 3
echo "== catching up (availableNow)"
stream --trigger availableNow --maxCommitsPerBatch 500

echo "== facts: one row per micro-batch"
"$BIN/mssql-cdc" table-rows "$LAKE/facts" | python3 -c '
import json, sys
rows = sorted((json.loads(l) for l in sys.stdin), key=lambda r: r["batch_id"])
print("%5s %6s %6s %6s %6s  %-22s %-23s %8s" % ("batch", "rows", "ins", "upd", "del", "end_lsn", "end_commit_ts", "read_ms"))
for r in rows:
    print("%5d %6d %6d %6d %6d  %-22s %-23s %8.1f" % (r["batch_id"], r["rows"], r["inserts"], r["updates"],
          r["deletes"], r["end_lsn"] or "", (r["end_commit_ts"] or "")[:23], (r["read_seconds"] or 0) * 1000))
print("total rows:", sum(r["rows"] for r in rows))
'
echo "== the verdict"
"$BIN/mssql-cdc" finalization show --control-table "$LAKE/control" --table "$LAKE/bronze"
"$BIN/mssql-cdc" finalization freshness --control-table "$LAKE/control" --table "$LAKE/bronze"

echo "== checking bronze against the change table"
bronze=$("$BIN/mssql-cdc" table-rows "$LAKE/bronze" | wc -l)
source=$(printf 'SELECT COUNT_BIG(*) FROM cdc.dbo_orders_CT\ngo\n' | sql shop | tr -d '[:space:]')
echo "bronze rows: $bronze, change table rows: $source"
[ "$bronze" = "$source" ] || { echo "demo: MISMATCH"; exit 1; }

echo "== silver: the current state of dbo.orders, from bronze (mssql-cdc apply)"
"$BIN/mssql-cdc" apply --bronze "$LAKE/bronze" --target "$LAKE/silver" --control-table "$LAKE/control" \
  --facts-table "$LAKE/facts" --captureInstance dbo_orders --connectionString "$CS" --granularity minute
silver=$("$BIN/mssql-cdc" table-rows "$LAKE/silver" | python3 -c '
import json, sys
print(sorted((r["order_id"], r["customer_id"], r["status"], r["amount"]) for r in map(json.loads, sys.stdin)))' | sha256sum)
table=$(printf 'SELECT order_id, customer_id, status, amount FROM dbo.orders\ngo\n' | sql shop | python3 -c '
import sys
from decimal import Decimal
def v(x, f): return None if x == "NULL" else f(x)
rows = [l.rstrip("\n").split("\t") for l in sys.stdin if l.strip()]
print(sorted((int(r[0]), v(r[1], int), v(r[2], str), v(r[3], lambda a: str(Decimal(a)))) for r in rows))' | sha256sum)
echo "silver rows: $("$BIN/mssql-cdc" table-rows "$LAKE/silver" | wc -l), source rows: $(printf 'SELECT COUNT_BIG(*) FROM dbo.orders\ngo\n' | sql shop | tr -d '[:space:]')"
[ "$silver" = "$table" ] || { echo "demo: silver differs from dbo.orders"; exit 1; }

echo "== reconcile: is silver equal to dbo.orders? (mssql-cdc reconcile)"
rc=0
"$BIN/mssql-cdc" reconcile --silver "$LAKE/silver" --bronze "$LAKE/bronze" --control-table "$LAKE/control" \
  --facts-table "$LAKE/facts" --report-table "$LAKE/reconcile_report" --sample 1 \
  --captureInstance dbo_orders --connectionString "$CS" > "$DEMO/reconcile.json" || rc=$?
cat "$DEMO/reconcile.json"
[ "$rc" = 0 ] || { echo "demo: reconcile exited $rc: silver differs from dbo.orders"; exit 1; }
python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ok = r["buckets"] > 0 and r["match"] == r["buckets"] and r["mismatch"] == 0 and r["failures"] == {}
print("reconcile: %d buckets, %d MATCH, report run %s" % (r["buckets"], r["match"], r["run_id"]))
sys.exit(0 if ok else 1)' "$DEMO/reconcile.json" || { echo "demo: reconcile reported more than MATCH"; exit 1; }
echo "demo: ok (lake in $DEMO/lake; read it with deltalake, DuckDB or Spark)"
