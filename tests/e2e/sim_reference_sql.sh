#!/usr/bin/env bash
# The reference's own T-SQL through a real client: tests/e2e/sim_reference_sql.py
# imports the reference package (mssql-cdc-pyspark 0.8.0, from
# tests/requirements.txt) and runs every query of reference.md §3.1 that its
# SqlCdcClient builds, over mssql-python, against build/mssql-cdc-sim (or
# SIM_BIN), checking each answer against the scenario. Ends with
# "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
TMP=$(mktemp -d)
SIM_PID=
cleanup() {
  [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
BIN=${SIM_BIN:-build/mssql-cdc-sim}
if [ -z "${SIM_BIN:-}" ] && ! make -s -j2 build/mssql-cdc-sim >"$TMP/make" 2>&1; then
  tail -20 "$TMP/make"; echo "0 passed, 1 failed"; exit 1
fi
[ -x "$PY" ] || { echo "python venv missing at $PY (ln -s /work/main/.venv .venv)"; echo "0 passed, 1 failed"; exit 1; }
PW='Sim!Pass1'
"$BIN" --port 0 --data "$TMP/data" --password "$PW" --ready-file "$TMP/ready" --capture-poll-ms 0 \
  >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM_PID=$!
for _ in $(seq 100); do [ -s "$TMP/ready" ] && break; sleep 0.1; done
PORT=$(cat "$TMP/ready" 2>/dev/null)
if [ -z "$PORT" ]; then cat "$TMP/sim.err"; echo "0 passed, 1 failed"; exit 1; fi
(cd tests/e2e && timeout 300 "$PY" sim_reference_sql.py "$PORT" "$PW" "$ROOT/$BIN") 2>&1 | tee "$TMP/out"
line=$(tail -1 "$TMP/out")
PASS=$(echo "$line" | grep -oE '^[0-9]+ passed' | grep -oE '[0-9]+'); FAIL=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
PASS=${PASS:-0}; FAIL=${FAIL:-1}
kill -TERM "$SIM_PID"; wait "$SIM_PID"; rc=$?; SIM_PID=
if [ $rc -eq 0 ] && ! grep -q "Sanitizer\|runtime error" "$TMP/sim.err"; then
  PASS=$((PASS + 1)); echo "ok   SIGTERM stops the simulator cleanly (exit 0, no sanitizer report)"
else
  FAIL=$((FAIL + 1)); echo "FAIL SIGTERM stop: exit $rc"; head -40 "$TMP/sim.err"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
