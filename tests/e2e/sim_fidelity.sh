#!/usr/bin/env bash
# Simulator fidelity against the real mssql-cdc-sim, through TDS:
# RPC OUTPUT parameters and prepared handles (sp_prepare, sp_execute,
# sp_prepexec, sp_unprepare, sp_executesql OUTPUT; tests/e2e/sim_rpc_outputs.py)
# and READ COMMITTED between sessions (waits, LOCK_TIMEOUT, ATTENTION;
# tests/e2e/sim_isolation.py), SNAPSHOT isolation and the snapshot reader's
# base-table reads from the table store (tests/e2e/sim_snapshot.py) and T-SQL
# shapes SQLite lacks (APPLY, column alias lists: tests/e2e/sim_tsql_shapes.py),
# with raw TDS, python-tds and pymssql.
# Ends with "N passed, N failed".
. "$(dirname "$0")/sim_serve.inc"
for t in sim_rpc_outputs.py sim_isolation.py sim_snapshot.py sim_tsql_shapes.py; do
  sim_py 120 "$t" "$PORT" "$PW"
done
sim_stop
