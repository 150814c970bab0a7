#!/usr/bin/env bash
# The change reader against mssql-cdc-sim over TDS (FreeTDS): row order
# 2,3,4,3,4,1; a key update read as 1/2; a purged range is DataLossError; a
# wrong password is login failure 18456 and not retried; a connection dropped
# mid-range is retried and yields the identical rows, no gap, no duplicate.
# Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${MCDC_BUILD:-build}
SIM=$BUILD/mssql-cdc-sim
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

if [ ! -x "$SIM" ] || [ ! -f "$BUILD/libmssqlcdc.a" ]; then
  echo "reader_sim: $SIM or $BUILD/libmssqlcdc.a not built; skipping"
  echo "0 passed, 0 failed"; exit 0
fi
TMP=$(mktemp -d /tmp/mcdc-reader-e2e.XXXXXX)
SIM_PID=
cleanup() { [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

INC="-Iinclude"; for m in util lsn options batch tds source; do INC="$INC -Isrc/$m"; done
cp tests/e2e/reader_probe.c.in "$TMP/probe.c"
if ! cc -std=c17 -D_GNU_SOURCE -O1 $INC "$TMP/probe.c" "$BUILD/libmssqlcdc.a" $(make -s --no-print-directory print-ldlibs) \
     -o "$TMP/probe" 2>"$TMP/cc.log"; then
  cat "$TMP/cc.log"; echo "0 passed, 1 failed"; exit 1
fi
PROBE=$TMP/probe

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PW='Sim-Passw0rd!'
"$SIM" --port "$PORT" --data "$TMP/data" --password "$PW" --ready-file "$TMP/ready" --tls off \
  --capture-poll-ms 50 --capture-latency-ms 0 >"$TMP/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 400); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
if [ ! -e "$TMP/ready" ]; then cat "$TMP/sim.log"; echo "0 passed, 1 failed"; exit 1; fi

CS_MASTER="Server=127.0.0.1,$PORT;UID=sa;PWD=$PW;Encrypt=no"
CS="Server=127.0.0.1,$PORT;Database=shop;UID=sa;PWD=$PW;Encrypt=no"
sql() { "$PROBE" sql "$1" "$2"; }

out=$(sql "$CS_MASTER" "CREATE DATABASE shop" 2>&1) || ko "create database" "$out"
out=$(sql "$CS" "CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY, v NVARCHAR(20) NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL;" 2>&1) \
  || ko "enable cdc" "$out"

# 1. ordering: insert, update, update, delete of one row
out=$(sql "$CS" "INSERT INTO dbo.t VALUES (1, N'a');
UPDATE dbo.t SET v = N'b' WHERE id = 1;
UPDATE dbo.t SET v = N'c' WHERE id = 1;
DELETE FROM dbo.t WHERE id = 1;
EXEC sim.run_capture @ignore_latency = 1;" 2>&1) || ko "scenario 1 writes" "$out"
out=$("$PROBE" read "$CS" dbo_t min max 2>&1)
ops=$(echo "$out" | grep '^dbo_t|' | cut -d'|' -f4 | tr '\n' ',')
vals=$(echo "$out" | grep '^dbo_t|' | cut -d'|' -f8 | tr '\n' ',')
if [ "$ops" = "2,3,4,3,4,1," ] && [ "$vals" = "a,a,b,b,c,c," ]; then ok "ordering 2,3,4,3,4,1"
else ko "ordering 2,3,4,3,4,1" "ops=$ops vals=$vals" "$out"; fi
MAX1=$(sql "$CS" "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)")

# 1b. includeCommandId=false: the same rows without the _command_id column
out=$(MCDC_PROBE_NO_COMMAND_ID=1 "$PROBE" read "$CS" dbo_t min max 2>&1)
ops=$(echo "$out" | grep '^dbo_t|' | cut -d'|' -f4 | tr '\n' ',')
cols=$(echo "$out" | grep '^dbo_t|' | head -1 | awk -F'|' '{print NF}')
if [ "$ops" = "2,3,4,3,4,1," ] && [ "$cols" = 7 ]; then ok "includeCommandId=false"
else ko "includeCommandId=false" "ops=$ops cols=$cols" "$out"; fi

# 1c. the same inside one transaction (plus a delete of another row): order
#     by (start_lsn, command_id, seqval, operation) gives 2,3,4,3,4,1
out=$(sql "$CS" "CREATE TABLE dbo.s (id INT NOT NULL PRIMARY KEY, v NVARCHAR(20) NULL);
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N's', @role_name = NULL;
INSERT INTO dbo.s VALUES (1, N'other');
BEGIN TRAN;
INSERT INTO dbo.s VALUES (2, N'a');
UPDATE dbo.s SET v = N'b' WHERE id = 2;
UPDATE dbo.s SET v = N'c' WHERE id = 2;
DELETE FROM dbo.s WHERE id = 1;
COMMIT;
EXEC sim.run_capture @ignore_latency = 1;" 2>&1) || ko "scenario 1c writes" "$out"
out=$("$PROBE" read "$CS" dbo_s min max 2>&1)
got=$(echo "$out" | grep '^dbo_s|' | tail -6 | awk -F'|' '{print $4":"$5":"$7":"$8}' | tr '\n' ',')
if [ "$got" = "2:1:2:a,3:2:2:a,4:2:2:b,3:3:2:b,4:3:2:c,1:4:1:other," ]; then
  ok "one transaction reads 2,3,4,3,4,1 by command id"
else ko "one transaction reads 2,3,4,3,4,1 by command id" "got=$got" "$out"; fi

# 1d. (max) values: not cut at 4 KiB (SET TEXTSIZE), and batches split by bytes
DOC=$(head -c 100000 /dev/zero | tr '\0' 'x')
out=$(sql "$CS" "CREATE TABLE dbo.w (id INT NOT NULL PRIMARY KEY, doc NVARCHAR(MAX) NULL);
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'w', @role_name = NULL;
INSERT INTO dbo.w VALUES (1, N'$DOC');
INSERT INTO dbo.w SELECT id + 1, doc FROM dbo.w;
INSERT INTO dbo.w SELECT id + 2, doc FROM dbo.w;
INSERT INTO dbo.w SELECT id + 4, doc FROM dbo.w;
EXEC sim.run_capture @ignore_latency = 1;" 2>&1) || ko "scenario 1d writes" "$out"
out=$("$PROBE" read "$CS" dbo_w min max 2>&1)
lens=$(echo "$out" | grep '^dbo_w|' | awk -F'|' '{print length($8)}' | sort -u | tr '\n' ',')
if [ "$lens" = "100000," ] && echo "$out" | grep -q '^rows=8 '; then ok "(max) values read whole"
else ko "(max) values read whole" "lens=$lens" "$(echo "$out" | tail -2)"; fi

# 2. key update: delete + insert (1, 2) in one commit
out=$(sql "$CS" "INSERT INTO dbo.t VALUES (5, N'k');
UPDATE dbo.t SET id = 6 WHERE id = 5;
EXEC sim.run_capture @ignore_latency = 1;" 2>&1) || ko "scenario 2 writes" "$out"
FROM2=$(sql "$CS" "SELECT CONVERT(varchar(22), sys.fn_cdc_increment_lsn(CONVERT(binary(10), '$MAX1', 1)), 1)")
out=$("$PROBE" read "$CS" dbo_t "$FROM2" max 2>&1)
got=$(echo "$out" | grep '^dbo_t|' | awk -F'|' '{print $4":"$7}' | tr '\n' ',')
if [ "$got" = "2:5,1:5,2:6," ]; then ok "key update read as 1/2"
else ko "key update read as 1/2" "got=$got" "$out"; fi

# 3. a dropped connection mid-range: retried, identical rows, no gap
vals=""; for i in $(seq 100 139); do vals="$vals,($i, N'r$i')"; done
out=$(sql "$CS" "INSERT INTO dbo.t VALUES ${vals:1}; EXEC sim.run_capture @ignore_latency = 1;" 2>&1) \
  || ko "scenario 3 writes" "$out"
clean=$("$PROBE" read "$CS" dbo_t min max 7 1 2>&1)
faulted=$(MCDC_PROBE_SIDE_SQL="EXEC sim.fault @kind = N'drop_after_rows', @count = 20" \
  "$PROBE" read "$CS" dbo_t min max 7 1 2>&1)
if [ "$(echo "$clean" | grep '^dbo_t|')" = "$(echo "$faulted" | grep '^dbo_t|')" ] \
   && echo "$faulted" | grep -q 'attempts=2' \
   && [ "$(echo "$clean" | grep -o 'rows=[0-9]*')" = "rows=49" ] \
   && [ "$(echo "$faulted" | grep -o 'rows=[0-9]*')" = "rows=49" ]; then
  ok "dropped connection retried: identical rows"
else ko "dropped connection retried: identical rows" "clean: $(echo "$clean" | tail -1)" \
        "faulted: $(echo "$faulted" | tail -3)"; fi

# 3b. a result abandoned after 5 rows is cancelled; the connection stays usable
out=$("$PROBE" cancel "$CS" "SELECT * FROM cdc.dbo_t_CT" 2>&1)
if [ "$out" = "$(printf 'first=5\nafter=42')" ]; then ok "abandoned result cancelled, connection reusable"
else ko "abandoned result cancelled, connection reusable" "$out"; fi

# 3c. a stalled server with a 1 s query timeout: SYBETIME is transient, retried
stalled=$(MCDC_PROBE_QUERY_TIMEOUT=1 MCDC_PROBE_SIDE_SQL="EXEC sim.fault @kind = N'stall', @ms = 2500" \
  "$PROBE" read "$CS" dbo_t min max 7 1 2>&1)
if [ "$(echo "$clean" | grep '^dbo_t|')" = "$(echo "$stalled" | grep '^dbo_t|')" ] \
   && echo "$stalled" | grep -q 'attempts=2'; then ok "query timeout retried: identical rows"
else ko "query timeout retried: identical rows" "$(echo "$stalled" | tail -3)"; fi

# 3d. split_points (20 tiles, folded to whole commits): tiles whose ranges read every row once
tiles=$("$PROBE" split "$CS" dbo_t 20 2>&1)
total=0; prev=""; bad=""; from=$(sql "$CS" "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_t'), 1)")
while read -r bound next rows; do
  [ -z "$bound" ] && continue
  got=$("$PROBE" read "$CS" dbo_t "$from" "$bound" 2>&1 | grep -o 'rows=[0-9]*' | cut -d= -f2)
  total=$((total + got)); [ -n "$prev" ] && [[ ! "$bound" > "$prev" ]] && bad="not increasing"
  prev=$bound; from=$next
done <<< "$tiles"
if [ "$(echo "$tiles" | wc -l)" -ge 3 ] && [ "$total" -eq 49 ] && [ -z "$bad" ]; then ok "split_points tiles cover the range"
else ko "split_points tiles cover the range" "total=$total $bad" "$tiles"; fi

# 4. the last range measures the position
out=$("$PROBE" read "$CS" dbo_t min max 1000 1 last 2>&1)
if echo "$out" | grep -q 'position=1 lag_known=1'; then ok "last range measures position"
else ko "last range measures position" "$(echo "$out" | tail -2)"; fi

# 4b. time_to_lsn's T-SQL shape: a time far ahead maps to max_lsn, far back to zero
MAXNOW=$(sql "$CS" "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)")
late=$(sql "$CS" "SELECT CONVERT(varchar(22), sys.fn_cdc_map_time_to_lsn(N'largest less than or equal', CONVERT(datetime2(0), CONVERT(datetime2(0), N'2100-01-01T00:00:00', 126) AT TIME ZONE 'UTC' AT TIME ZONE N'Central European Standard Time')), 1)" 2>&1)
early=$(sql "$CS" "SELECT CONVERT(varchar(22), sys.fn_cdc_map_time_to_lsn(N'largest less than or equal', CONVERT(datetime2(0), N'2000-01-01T00:00:00', 126)), 1)" 2>&1)
if [ "$late" = "$MAXNOW" ] && { [ -z "$early" ] || [ "$early" = "0x00000000000000000000" ]; }; then
  ok "time_to_lsn shapes"
else ko "time_to_lsn shapes" "late=$late max=$MAXNOW early=$early"; fi

# 5. wrong password: 18456, permanent (one attempt, no retry)
out=$("$PROBE" read "Server=127.0.0.1,$PORT;Database=shop;UID=sa;PWD=wrong;Encrypt=no" dbo_t 0x01 0x02 2>&1)
if echo "$out" | grep -q '^ERROR login failed RuntimeError 18456:' && ! echo "$out" | grep -q 'wrong'; then
  ok "wrong password is 18456 (a refused login, not a missing grant), permanent"
else ko "wrong password is 18456, permanent" "$out"; fi

# 5b. an unknown capture instance: ValueError naming it, with the hint
out=$("$PROBE" read "$CS" dbo_nope 0x01 0x02 2>&1)
if echo "$out" | grep -q "^ERROR not found ValueError 22964: capture instance 'dbo_nope' not found"; then
  ok "unknown capture instance is ValueError"
else ko "unknown capture instance is ValueError" "$out"; fi

# 5c. a least-privilege login without SELECT on the change table: the exact GRANT
out=$(sql "$CS" "CREATE LOGIN etl_reader WITH PASSWORD = 'Rd-Passw0rd!';
CREATE USER etl_reader FOR LOGIN etl_reader;
GRANT SELECT ON dbo.t TO etl_reader;" 2>&1) || ko "create login" "$out"
out=$("$PROBE" read "Server=127.0.0.1,$PORT;Database=shop;UID=etl_reader;PWD=Rd-Passw0rd!;Encrypt=no" \
      dbo_t 0x01 0x02 2>&1)
if echo "$out" | grep -q '^ERROR permission PermissionError' \
   && echo "$out" | grep -qF 'GRANT SELECT ON cdc.[dbo_t_CT] TO [etl_reader];'; then
  ok "missing grant gives the exact GRANT"
else ko "missing grant gives the exact GRANT" "$out"; fi
out=$(sql "$CS" "GRANT SELECT ON cdc.[dbo_t_CT] TO etl_reader" 2>&1) || ko "grant" "$out"
out=$("$PROBE" read "Server=127.0.0.1,$PORT;Database=shop;UID=etl_reader;PWD=Rd-Passw0rd!;Encrypt=no" \
      dbo_t min max 2>&1)
if echo "$out" | grep -q '^rows=49 '; then ok "granted login reads the range"
else ko "granted login reads the range" "$(echo "$out" | tail -2)"; fi

# 6. purged range: DataLossError naming the instance and min_lsn
OLD_MIN=$(sql "$CS" "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_t'), 1)")
out=$(sql "$CS" "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_t',
  @low_water_mark = $FROM2, @threshold = 5000" 2>&1) || ko "cleanup" "$out"
out=$("$PROBE" read "$CS" dbo_t "$OLD_MIN" max 2>&1)
if echo "$out" | grep -q '^ERROR data loss DataLossError 0:' && echo "$out" | grep -q "dbo_t" \
   && echo "$out" | grep -q "$OLD_MIN"; then ok "purged range is DataLossError"
else ko "purged range is DataLossError" "$out"; fi

# 7. Encrypt=yes against a server without TLS (--tls off): a clear, permanent error
out=$("$PROBE" read "Server=127.0.0.1,$PORT;Database=shop;UID=sa;PWD=$PW;Encrypt=yes;TrustServerCertificate=yes" \
      dbo_t 0x01 0x02 2>&1)
if echo "$out" | grep -q '^ERROR unsupported' && echo "$out" | grep -q 'Encrypt=yes requires TLS' \
   && echo "$out" | grep -q 'Encrypt=no'; then ok "Encrypt=yes without TLS explains itself"
else ko "Encrypt=yes without TLS explains itself" "$out"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
