#!/usr/bin/env bash
# RPC OUTPUT parameters and prepared handles (sp_prepare, sp_execute,
# sp_prepexec, sp_unprepare, sp_executesql OUTPUT) against the real
# mssql-cdc-sim, raw TDS and python-tds/pymssql (tests/e2e/sim_rpc_outputs.py).
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
(cd tests/e2e && timeout 120 "$PY" sim_rpc_outputs.py "$PORT" "$PW")
