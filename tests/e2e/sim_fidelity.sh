#!/usr/bin/env bash
# Simulator fidelity against the real mssql-cdc-sim, through TDS:
# RPC OUTPUT parameters and prepared handles (sp_prepare, sp_execute,
# sp_prepexec, sp_unprepare, sp_executesql OUTPUT; tests/e2e/sim_rpc_outputs.py)
# and READ COMMITTED between sessions (waits, LOCK_TIMEOUT, ATTENTION;
# tests/e2e/sim_isolation.py) and T-SQL shapes SQLite lacks (APPLY, column alias
# lists: tests/e2e/sim_tsql_shapes.py), with raw TDS, python-tds and pymssql.
# Ends with "N passed, N failed".
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
PASS=0; FAIL=0
for t in sim_rpc_outputs.py sim_isolation.py sim_tsql_shapes.py; do
  (cd tests/e2e && timeout 120 "$PY" "$t" "$PORT" "$PW") >"$TMP/out" 2>&1
  cat "$TMP/out"
  line=$(tail -1 "$TMP/out")
  p=$(echo "$line" | grep -oE '^[0-9]+ passed' | grep -oE '[0-9]+'); f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
  PASS=$((PASS + ${p:-0})); FAIL=$((FAIL + ${f:-1}))
done
# a clean stop, and nothing from a sanitizer when SIM_BIN is an ASan build
kill -TERM "$SIM_PID"; wait "$SIM_PID"; rc=$?; SIM_PID=
if [ $rc -eq 0 ] && ! grep -q "Sanitizer\|runtime error" "$TMP/sim.err"; then
  PASS=$((PASS + 1)); echo "ok   SIGTERM stops the simulator cleanly (exit 0, no sanitizer report)"
else
  FAIL=$((FAIL + 1)); echo "FAIL SIGTERM stop: exit $rc"; head -40 "$TMP/sim.err"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
