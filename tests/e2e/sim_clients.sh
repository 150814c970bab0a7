#!/usr/bin/env bash
# Real SQL Server clients (FreeTDS tsql, pymssql, python-tds; mssql-python when
# MSSQL_PYTHON names a Python that has it) against the simulator's TDS server.
# Part 1 builds mssql-cdc-sim's main and TDS layer with the stand-in engine
# tests/e2e/sim_testengine.c (ASan+UBSan), so the protocol is tested on its
# own (attention, faults, bad input, every type). Part 2 runs the real
# program (build/mssql-cdc-sim, or SIM_BIN) with T-SQL, once the engine is in
# the tree. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
OUT=$ROOT/build/e2e
mkdir -p "$OUT"
TMP=$(mktemp -d)
PASS=0; FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
tally() { # file
  local line p f
  line=$(tail -1 "$1")
  p=$(echo "$line" | grep -oE '^[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
  f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 1)
  [ -z "$p" ] && p=0; [ -z "$f" ] && f=1
  PASS=$((PASS + p)); FAIL=$((FAIL + f))
}

SIM_PID=
cleanup() {
  [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

CC=${CC:-cc}
SAN_FLAGS=${SIM_E2E_SAN:--fsanitize=address,undefined -fno-omit-frame-pointer}
BIN=$OUT/mssql-cdc-sim-testengine
if ! $CC -std=c17 -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Werror -O1 -g $SAN_FLAGS \
    -D_GNU_SOURCE -pthread -Iinclude -Isrc/util -Isrc/tds -Isrc/sim -o "$BIN" \
    src/sim/sim_main.c src/sim/tds_*.c src/util/mcdc_util.c tests/e2e/sim_testengine.c \
    $(make -s --no-print-directory print-ldlibs); then
  echo "build of the test server failed"; echo "0 passed, 1 failed"; exit 1
fi

PW='Sim!Pass1'
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

# ---- flags ---------------------------------------------------------------------
"$BIN" --help >"$TMP/help" 2>&1; rc=$?
check "--help exits 0 and documents --capture-poll-ms" \
  '[ $rc -eq 0 ] && grep -q -- "--capture-poll-ms" "$TMP/help"'
"$BIN" --port 1 --data "$TMP/d" >"$TMP/o" 2>&1; rc=$?
check "missing --password exits 2 with a message" '[ $rc -eq 2 ] && grep -q -- "--password" "$TMP/o"'
"$BIN" --port x --data "$TMP/d" --password p >"$TMP/o" 2>&1; rc=$?
check "bad --port exits 2" '[ $rc -eq 2 ] && grep -q "port" "$TMP/o"'
"$BIN" --bogus >"$TMP/o" 2>&1; rc=$?
check "unknown flag exits 2" '[ $rc -eq 2 ] && grep -q "bogus" "$TMP/o"'

# ---- start ------------------------------------------------------------------------
"$BIN" --port 0 --data "$TMP/data" --password "$PW" --ready-file "$TMP/ready" \
  >"$TMP/sim.out" 2>"$TMP/sim.err" &
SIM_PID=$!
for _ in $(seq 100); do [ -s "$TMP/ready" ] && break; sleep 0.1; done
PORT=$(cat "$TMP/ready" 2>/dev/null)
check "ready file and 'listening on' line" \
  '[ -n "$PORT" ] && grep -q "listening on 127.0.0.1:$PORT" "$TMP/sim.out"'
if [ -z "$PORT" ]; then cat "$TMP/sim.err"; echo "$PASS passed, $((FAIL + 1)) failed"; exit 1; fi

# ---- FreeTDS tsql -------------------------------------------------------------------
export TDSVER=7.4
printf 'SELECT 1\ngo\nSELECT TYPED\ngo\nquit\n' |
  timeout 20 tsql -H 127.0.0.1 -p "$PORT" -U sa -P "$PW" >"$TMP/tsql" 2>&1
check "tsql: SELECT 1" 'grep -q "(1 row affected)" "$TMP/tsql"'
check "tsql: typed row with non-ASCII nvarchar and decimal(38)" \
  'grep -q "héllo € 😀" "$TMP/tsql" && grep -q -- "-1234567890123456789012345678.0123456789" "$TMP/tsql"'
check "tsql: uniqueidentifier byte order" 'grep -q "6F9619FF-8B86-D011-B42D-00C04FC964FF" "$TMP/tsql"'
printf 'SELECT 1\ngo\nquit\n' |
  timeout 20 tsql -H 127.0.0.1 -p "$PORT" -U sa -P wrong >"$TMP/tsql2" 2>&1
check "tsql: wrong password -> 18456" 'grep -q "18456" "$TMP/tsql2" && grep -q "Login failed for user" "$TMP/tsql2"'

# ---- Python clients -------------------------------------------------------------------
if [ -x "$PY" ]; then
  timeout 300 "$PY" tests/e2e/sim_clients.py "$PORT" "$PW" testengine >"$TMP/py" 2>&1
  cat "$TMP/py"
  tally "$TMP/py"
else
  bad "python venv missing at $PY (ln -s /work/main/.venv .venv)"
fi

# ---- Microsoft mssql-python (optional: MSSQL_PYTHON=/path/to/python with it) ------------
if [ -n "${MSSQL_PYTHON:-}" ] && "$MSSQL_PYTHON" -c "import mssql_python" 2>/dev/null; then
  timeout 120 "$MSSQL_PYTHON" tests/e2e/sim_mssql_python.py "$PORT" "$PW" >"$TMP/ms" 2>&1
  cat "$TMP/ms"
  tally "$TMP/ms"
else
  echo "skip mssql-python (set MSSQL_PYTHON to a Python that has the mssql-python package)"
fi

# ---- clean shutdown with a session open -------------------------------------------------
stop_server() { # label
  exec 3<>"/dev/tcp/127.0.0.1/$PORT"
  kill -TERM "$SIM_PID"
  local rc=0
  for _ in $(seq 50); do kill -0 "$SIM_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$SIM_PID" 2>/dev/null; then rc=99; kill -9 "$SIM_PID"; fi
  wait "$SIM_PID" 2>/dev/null; [ $rc -eq 0 ] && rc=$?
  SIM_PID=
  exec 3<&-
  check "$1: SIGTERM stops the server cleanly (exit 0, no sanitizer report)" \
    '[ $rc -eq 0 ] && ! grep -q "ERROR: \(Address\|Leak\)Sanitizer\|runtime error" "$TMP/sim.err"'
  if grep -q "Sanitizer\|runtime error" "$TMP/sim.err"; then head -50 "$TMP/sim.err"; fi
}
stop_server testengine

# ---- part 2: the real program -------------------------------------------------------------
REAL_BIN=${SIM_BIN:-}
if [ -z "$REAL_BIN" ] && ls src/sim/sim_engine*.c >/dev/null 2>&1; then
  if make -s -j2 build/mssql-cdc-sim >"$TMP/make" 2>&1; then REAL_BIN=build/mssql-cdc-sim
  else bad "build of build/mssql-cdc-sim"; tail -20 "$TMP/make"; fi
fi
if [ -n "$REAL_BIN" ]; then
  rm -f "$TMP/ready"
  "$REAL_BIN" --port 0 --data "$TMP/realdata" --password "$PW" --ready-file "$TMP/ready" \
    --capture-poll-ms 0 >"$TMP/sim.out" 2>"$TMP/sim.err" &
  SIM_PID=$!
  for _ in $(seq 100); do [ -s "$TMP/ready" ] && break; sleep 0.1; done
  PORT=$(cat "$TMP/ready" 2>/dev/null)
  check "real: ready file and 'listening on' line" \
    '[ -n "$PORT" ] && grep -q "listening on 127.0.0.1:$PORT" "$TMP/sim.out"'
  if [ -n "$PORT" ]; then
    printf 'SELECT 1\ngo\nquit\n' |
      timeout 20 tsql -H 127.0.0.1 -p "$PORT" -U sa -P "$PW" >"$TMP/tsql" 2>&1
    check "real: tsql SELECT 1" 'grep -q "(1 row affected)" "$TMP/tsql"'
    printf 'SELECT 1\ngo\nquit\n' |
      timeout 20 tsql -H 127.0.0.1 -p "$PORT" -U sa -P wrong >"$TMP/tsql2" 2>&1
    check "real: tsql wrong password -> 18456" 'grep -q "18456" "$TMP/tsql2"'
    RPY=$PY
    if [ -n "${MSSQL_PYTHON:-}" ] && "$MSSQL_PYTHON" -c "import mssql_python, pymssql, pytds" 2>/dev/null; then
      RPY=$MSSQL_PYTHON
    fi
    timeout 120 "$RPY" tests/e2e/sim_clients_real.py "$PORT" "$PW" >"$TMP/real" 2>&1
    cat "$TMP/real"
    tally "$TMP/real"
    stop_server real
  fi
else
  echo "skip the real program (the engine is not in this tree yet; SIM_BIN=path runs one)"
fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
