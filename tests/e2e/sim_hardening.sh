#!/usr/bin/env bash
# The simulator against clients that do not log in, and its password's paths:
# login deadline, what it reads before login, pending logins, --password-file,
# MSSQL_CDC_SIM_PASSWORD, owner-only data files (tests/e2e/sim_hardening.py,
# which starts build/mssql-cdc-sim, or SIM_BIN, itself). Ends with
# "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=${SIM_BIN:-build/mssql-cdc-sim}
if [ -z "${SIM_BIN:-}" ] && ! make -s -j2 build/mssql-cdc-sim >/dev/null 2>&1; then
  echo "build of mssql-cdc-sim failed"; echo "0 passed, 1 failed"; exit 1
fi
[ -x "$PY" ] || { echo "python venv missing at $PY (ln -s /work/main/.venv .venv)"; echo "0 passed, 1 failed"; exit 1; }
cd tests/e2e && timeout 300 "$PY" sim_hardening.py "$ROOT/$BIN"
