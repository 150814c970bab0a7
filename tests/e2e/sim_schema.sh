#!/usr/bin/env bash
# Schema changes and the new types against the real mssql-cdc-sim, through
# TDS: hierarchyid, geography, geometry, xml and sql_variant as python-tds
# and pymssql decode them (tests/e2e/sim_types_tds.py); DDL history,
# captured columns and the capture instance switch as the reader queries
# them, DDL while other sessions write, read and capture, and DDL that
# waits for open transactions and makes them wait
# (tests/e2e/sim_schema_ddl.py); the reconcile's queries on a
# million-row table, exact and timed (tests/e2e/sim_reconcile.py; ROWS from
# SIM_RECONCILE_ROWS). Ends with "N passed, N failed".
. "$(dirname "$0")/sim_serve.inc"
sim_py 120 sim_types_tds.py "$PORT" "$PW"
sim_py 120 sim_schema_ddl.py "$PORT" "$PW"
sim_py 900 sim_reconcile.py "$PORT" "$PW" "${SIM_RECONCILE_ROWS:-1000000}"
sim_stop
