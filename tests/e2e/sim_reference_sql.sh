#!/usr/bin/env bash
# The reference's own T-SQL through a real client: tests/e2e/sim_reference_sql.py
# imports the reference package (mssql-cdc-pyspark 0.8.0, from
# tests/requirements.txt) and runs every query of reference.md §3.1 that its
# SqlCdcClient builds, over mssql-python, against build/mssql-cdc-sim (or
# SIM_BIN), checking each answer against the scenario. Ends with
# "N passed, N failed".
. "$(dirname "$0")/sim_serve.inc"
sim_py 300 sim_reference_sql.py "$PORT" "$PW" "$ROOT/$BIN"
sim_stop
