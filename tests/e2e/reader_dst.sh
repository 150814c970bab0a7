#!/usr/bin/env bash
# Commit times across a daylight-saving fall-back (spec §3.3): the simulator's
# clock runs in Central European time and crosses 2025-10-26 03:00 CEST ->
# 02:00 CET; commits in the repeated hour must come out in UTC, increasing,
# whether the range starts before the change or inside the repeated hour.
# Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${MCDC_BUILD:-build}
SIM=$BUILD/mssql-cdc-sim
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }
if [ ! -x "$SIM" ] || [ ! -f "$BUILD/libmssqlcdc.a" ]; then
  echo "reader_dst: $SIM or $BUILD/libmssqlcdc.a not built; skipping"
  echo "0 passed, 0 failed"; exit 0
fi
TMP=$(mktemp -d /tmp/mcdc-reader-dst.XXXXXX)
SIM_PID=
cleanup() { [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
INC="-Iinclude"; for m in util lsn options batch tds source; do INC="$INC -Isrc/$m"; done
cp tests/e2e/reader_probe.c.in "$TMP/probe.c"
cc -std=c17 -D_GNU_SOURCE -O1 $INC "$TMP/probe.c" "$BUILD/libmssqlcdc.a" $(make -s --no-print-directory print-ldlibs) \
   -o "$TMP/probe" 2>"$TMP/cc.log" || { cat "$TMP/cc.log"; echo "0 passed, 1 failed"; exit 1; }
PROBE=$TMP/probe
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PW='Sim-Passw0rd!'
"$SIM" --port "$PORT" --data "$TMP/data" --password "$PW" --ready-file "$TMP/ready" \
  --capture-poll-ms 0 --capture-latency-ms 0 >"$TMP/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 400); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
[ -e "$TMP/ready" ] || { cat "$TMP/sim.log"; echo "0 passed, 1 failed"; exit 1; }
CS_MASTER="Server=127.0.0.1,$PORT;UID=sa;PWD=$PW;Encrypt=no"
CS="Server=127.0.0.1,$PORT;Database=dst;UID=sa;PWD=$PW;Encrypt=no"
sql() { "$PROBE" sql "$1" "$2"; }

out=$(sql "$CS_MASTER" "EXEC sim.set_time_zone @zone = N'Central European Standard Time';
EXEC sim.set_clock @utc = '2025-10-26 00:30:00'; CREATE DATABASE dst;" 2>&1) || ko "setup" "$out"
out=$(sql "$CS" "CREATE TABLE dbo.e (id INT NOT NULL PRIMARY KEY);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'e', @role_name = NULL;" 2>&1) \
  || ko "enable" "$out"
# commits at 00:30, 00:50, 01:10, 01:30, 02:10 UTC = 02:30, 02:50 CEST, 02:10, 02:30, 03:10 CET
step=(1200 1200 1200 2400 0)
for i in 1 2 3 4 5; do
  out=$(sql "$CS" "INSERT INTO dbo.e VALUES ($i); EXEC sim.run_capture @ignore_latency = 1;
EXEC sim.advance_clock @seconds = ${step[$((i - 1))]};" 2>&1) || ko "commit $i" "$out"
done
want=("2025-10-26T00:30" "2025-10-26T00:50" "2025-10-26T01:10" "2025-10-26T01:30" "2025-10-26T02:10")

check() { # name, probe output, first index into want
  local name=$1 out=$2 k=$3 got line i=0 bad=""
  got=$(echo "$out" | grep '^dbo_e|' | cut -d'|' -f6)
  while read -r line; do
    [ -z "$line" ] && continue
    [ "${line:0:16}" = "${want[$((k + i))]}" ] || bad="$bad row $i: $line != ${want[$((k + i))]};"
    i=$((i + 1))
  done <<< "$got"
  if [ -z "$bad" ] && [ "$i" -eq $((5 - k)) ]; then ok "$name"; else ko "$name" "$bad" "$out"; fi
}
out=$(MCDC_PROBE_ZONE=auto "$PROBE" read "$CS" dbo_e min max 2>&1)
check "fall-back range converted to UTC in commit order" "$out" 0
# a range that starts inside the repeated hour (second pass)
L3=$(echo "$out" | grep '^dbo_e|' | sed -n 3p | cut -d'|' -f2)
out=$(MCDC_PROBE_ZONE=auto "$PROBE" read "$CS" dbo_e "$L3" max 2>&1)
check "range starting in the repeated hour" "$out" 2
# explicit zone name gives the same
out=$(MCDC_PROBE_ZONE="Central European Standard Time" "$PROBE" read "$CS" dbo_e min max 2>&1)
check "explicit sourceTimeZone" "$out" 0
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
