#!/usr/bin/env bash
# TLS on both sides of TDS against mssql-cdc-sim: our native client with
# Encrypt=yes/strict streams the same rows as plaintext; an untrusted
# certificate and a server without TLS give clear errors; FreeTDS tsql,
# pymssql (FreeTDS 1.5, strict too) and mssql-python (ODBC 18) connect with
# encryption; --tls off/required and --tls-cert/--tls-key; the certificate is
# kept across restarts; and a relaying proxy shows that no password byte
# crosses the wire in clear when TLS is on. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${MCDC_BUILD:-build}
SIM=$BUILD/mssql-cdc-sim
PY=${PYTHON:-$PWD/.venv/bin/python}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }
check() { if eval "$2"; then ok "$1"; else ko "$1" "${3:-}"; fi; }

if [ ! -x "$SIM" ] || [ ! -f "$BUILD/libmssqlcdc.a" ]; then
  echo "tls_sim: $SIM or $BUILD/libmssqlcdc.a not built; skipping"
  echo "0 passed, 0 failed"; exit 0
fi
TMP=$(mktemp -d /tmp/mcdc-tls-e2e.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done; rm -rf "$TMP"; }
trap cleanup EXIT

INC="-Iinclude"; for m in util lsn options batch tds source; do INC="$INC -Isrc/$m"; done
cp tests/e2e/native_probe.c.in "$TMP/probe.c"
if ! cc -std=c17 -D_GNU_SOURCE -O1 $INC "$TMP/probe.c" "$BUILD/libmssqlcdc.a" \
     $(make -s --no-print-directory print-ldlibs) -o "$TMP/probe" 2>"$TMP/cc.log"; then
  cat "$TMP/cc.log"; echo "0 passed, 1 failed"; exit 1
fi
PROBE=$TMP/probe
PW='Tls-Probe-Pw9!'

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# start_sim <name> <data dir> [sim options...]: sets PORT; log in $TMP/<name>.log
start_sim() {
  local name=$1 data=$2; shift 2
  PORT=$(free_port)
  rm -f "$TMP/$name.ready"
  "$SIM" --port "$PORT" --data "$data" --password "$PW" --ready-file "$TMP/$name.ready" --verbose \
    "$@" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!); LAST_PID=$!
  for _ in $(seq 1 400); do [ -e "$TMP/$name.ready" ] && return 0; sleep 0.05; done
  cat "$TMP/$name.log"; return 1
}
stop_last() { kill "$LAST_PID" 2>/dev/null; wait "$LAST_PID" 2>/dev/null; }

# ---- sim A: --tls on (the default) -------------------------------------------------------
start_sim a "$TMP/a" || { echo "0 passed, 1 failed"; exit 1; }
PA=$PORT
CS="Server=127.0.0.1,$PA;Database=tls;UID=sa;PWD=$PW"
"$PROBE" dump native "Server=127.0.0.1,$PA;UID=sa;PWD=$PW;Encrypt=no" "CREATE DATABASE tls" >/dev/null 2>&1
"$PROBE" dump native "$CS;Encrypt=no" "CREATE TABLE dbo.d (id INT NOT NULL PRIMARY KEY, s NVARCHAR(60) NULL);
  INSERT INTO dbo.d VALUES (0, N'zéro'), (1, N'un 😀'), (2, NULL), (3, N'trois'), (4, N'quatre €'),
  (5, N'cinq'), (6, N'six'), (7, N'sept'), (8, N'huit'), (9, N'neuf')" >"$TMP/setup" 2>&1
# 10000 rows of about 130 bytes: many packets and TLS records
Q="SELECT a.id * 1000 + b.id * 100 + c.id * 10 + e.id AS n, a.s AS sa, REPLICATE(N'x', b.id * 10) AS pad, e.s AS se
   FROM dbo.d a CROSS JOIN dbo.d b CROSS JOIN dbo.d c CROSS JOIN dbo.d e ORDER BY n"
plain=$("$PROBE" dump native "$CS;Encrypt=no" "$Q" 2>&1)
enc=$("$PROBE" dump native "$CS;Encrypt=yes;TrustServerCertificate=yes" "$Q" 2>&1)
strict=$("$PROBE" dump native "$CS;Encrypt=strict;TrustServerCertificate=yes" "$Q" 500 2>&1)
rows=$(echo "$plain" | grep -c '^[0-9]')
check "native: Encrypt=no reads 10000 rows" '[ "$rows" = 10000 ]' "$(echo "$plain" | head -3)"
check "native: Encrypt=yes;TrustServerCertificate=yes streams the same rows" '[ "$plain" = "$enc" ]' \
  "$(echo "$enc" | head -3)"
check "native: Encrypt=strict (TDS 8.0) streams the same rows" '[ "$plain" = "$strict" ]' \
  "$(echo "$strict" | head -3)"
check "sim: LOGIN7-only TLS, full TLS 1.2 and TDS 8.0 strict were used" \
  'grep -q "TLS established (TLS1.2" "$TMP/a.log" && grep -q "TDS 8.0 strict" "$TMP/a.log"'
out=$("$PROBE" cancel native "$CS;Encrypt=yes;TrustServerCertificate=yes" "$Q" 2>&1)
check "native: freeing a result mid-stream (ATTENTION inside TLS), then the connection is reused" \
  'echo "$out" | grep -q "after=42" && echo "$out" | grep -q "dead=0"' "$out"
out=$("$PROBE" dump native "$CS;Encrypt=yes" "SELECT 1" 2>&1)
check "native: Encrypt=yes with an untrusted certificate says what to do" \
  'echo "$out" | grep -q "OPEN ERROR -1 " && echo "$out" | grep -q "TrustServerCertificate=yes" &&
   echo "$out" | grep -q "install the certificate" && ! echo "$out" | grep -q -- "$PW"' "$out"
out=$("$PROBE" dump native "$CS;Encrypt=strict" "SELECT 1" 2>&1)
check "native: Encrypt=strict validates too" 'echo "$out" | grep -q "not trusted"' "$out"
out=$("$PROBE" dump native "$CS;Encrypt=yes;ServerCertificate=$TMP/a/tls-cert.pem" "SELECT 8 AS v" 2>&1)
check "native: Encrypt=yes;ServerCertificate=<the sim's cert> validates (IP address 127.0.0.1)" \
  'echo "$out" | grep -q "^8$"' "$out"
out=$("$PROBE" dump native "$CS;Encrypt=yes;ServerCertificate=$TMP/a/tls-cert.pem;HostNameInCertificate=db.example" \
      "SELECT 8 AS v" 2>&1)
check "native: a certificate for another name is refused, naming HostNameInCertificate" \
  'echo "$out" | grep -q "not trusted" && echo "$out" | grep -q "HostNameInCertificate"' "$out"
# which client logged in: FreeTDS sends a FeatureExt block, the native client does not
n0=$(wc -l <"$TMP/a.log")
out=$(MCDC_TDS_BACKEND= "$PROBE" dump auto "$CS;Encrypt=yes;TrustServerCertificate=yes" "SELECT 7 AS s" 2>&1)
login=$(tail -n +$((n0 + 1)) "$TMP/a.log" | grep "logged in")
check "backend auto picks the native client for Encrypt=yes" \
  'echo "$out" | grep -q "^7$" && [ -n "$login" ] && ! echo "$login" | grep -q FeatureExt' "$out $login"
n0=$(wc -l <"$TMP/a.log")
out=$(MCDC_TDS_BACKEND=freetds "$PROBE" dump auto "$CS;Encrypt=yes;TrustServerCertificate=yes" "$Q" 2>&1)
session=$(tail -n +$((n0 + 1)) "$TMP/a.log")
login=$(echo "$session" | grep "logged in")
check "backend=freetds (MCDC_TDS_BACKEND) with Encrypt=yes streams the same rows over full TLS" \
  '[ "$out" = "$plain" ] && echo "$login" | grep -q FeatureExt &&
   echo "$session" | grep -q "TLS established (TLS1.2"' "$(echo "$out" | head -3) $session"
check "sim log never shows the password" '! grep -q -- "$PW" "$TMP/a.log"'

# FreeTDS tsql: encryption = require (full TLS) and request (LOGIN7 only)
for mode in require request; do
  printf '[global]\n\ttds version = 7.4\n\tencryption = %s\n' "$mode" >"$TMP/freetds-$mode.conf"
  printf 'SELECT 1\ngo\nquit\n' |
    FREETDSCONF=$TMP/freetds-$mode.conf timeout 20 tsql -H 127.0.0.1 -p "$PA" -U sa -P "$PW" >"$TMP/tsql" 2>&1
  check "tsql with encryption = $mode" 'grep -q "(1 row affected)" "$TMP/tsql"' "$(tail -3 "$TMP/tsql")"
done

# pymssql (its bundled FreeTDS reads FREETDSCONF too)
if [ -x "$PY" ] && "$PY" -c "import pymssql" 2>/dev/null; then
  printf '[global]\n\ttds version = 7.4\n\tencryption = strict\n\tca file = %s\n' "$TMP/a/tls-cert.pem" \
    >"$TMP/freetds-strict.conf"
  for mode in require strict; do
    out=$(FREETDSCONF=$TMP/freetds-$mode.conf timeout 30 "$PY" -c "
import pymssql
c = pymssql.connect(server='localhost', port='$PA', user='sa', password='$PW', database='tls')
cur = c.cursor(); cur.execute('SELECT COUNT(*) FROM dbo.d'); print('rows', cur.fetchall()[0][0])" 2>&1)
    check "pymssql with encryption = $mode" 'echo "$out" | grep -q "rows 10"' "$out"
  done
else
  echo "skip pymssql (no $PY with pymssql)"
fi

# Microsoft mssql-python (ODBC Driver 18)
if [ -x "$PY" ] && "$PY" -c "import mssql_python" 2>/dev/null; then
  out=$(timeout 60 "$PY" - "$PA" "$PW" "$TMP/a/tls-cert.pem" <<'PY' 2>&1
import sys
import mssql_python
port, pw, cert = sys.argv[1:4]
base = f"Server=127.0.0.1,{port};Database=tls;UID=sa;PWD={pw}"
for label, extra in (("trust", "Encrypt=yes;TrustServerCertificate=yes"),
                     ("strict", f"Encrypt=strict;ServerCertificate={cert}"),
                     ("yes", "Encrypt=yes")):
    try:
        with mssql_python.connect(f"{base};{extra}") as c:
            cur = c.cursor()
            cur.execute("SELECT COUNT(*) FROM dbo.d")
            print(label, "rows", cur.fetchall()[0][0])
    except Exception as e:
        print(label, "error", e)
PY
)
  check "mssql-python: Encrypt=yes;TrustServerCertificate=yes" \
    'echo "$out" | grep -q "^trust rows 10"' "$out"
  check "mssql-python: Encrypt=strict (TDS 8.0) trusting the sim's certificate file" \
    'echo "$out" | grep -q "^strict rows 10"' "$out"
  check "mssql-python: Encrypt=yes refuses the self-signed certificate" \
    'echo "$out" | grep -q "^yes error.*certificate verify failed"' "$out"
else
  echo "skip mssql-python (no $PY with mssql_python)"
fi

# wire check: a relaying proxy records every byte in both directions
cat >"$TMP/proxy.py" <<'PY'
import socket, sys, threading
lport, rport, cap = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", lport)); ls.listen(8)
lock = threading.Lock()
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d: break
            with lock, open(cap, "ab") as f: f.write(d)
            b.sendall(d)
    except OSError: pass
    for s in (a, b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    c, _ = ls.accept()
    r = socket.create_connection(("127.0.0.1", rport))
    threading.Thread(target=pump, args=(c, r), daemon=True).start()
    threading.Thread(target=pump, args=(r, c), daemon=True).start()
PY
# proxy <sim port> <capture file>: sets PXPORT
proxy() {
  PXPORT=$(free_port)
  python3 "$TMP/proxy.py" "$PXPORT" "$1" "$2" & PIDS+=($!)
  for _ in $(seq 1 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $PXPORT)).close()" 2>/dev/null && break; sleep 0.05; done
  : >"$2"
}
# has <file> <hex bytes>: the bytes occur in the file
has() { python3 -c "import sys; sys.exit(0 if bytes.fromhex(sys.argv[2]) in open(sys.argv[1], 'rb').read() else 1)" "$1" "$2"; }
PW16=$(python3 -c "import sys; print(sys.argv[1].encode('utf-16-le').hex())" "$PW")
PWOBF=$(python3 -c "import sys; print(bytes((((b << 4) | (b >> 4)) & 0xFF) ^ 0xA5 for b in sys.argv[1].encode('utf-16-le')).hex())" "$PW")
SQL16=$(python3 -c "print('SELECT 4242'.encode('utf-16-le').hex())")
proxy "$PA" "$TMP/cap-yes"
"$PROBE" dump native "Server=127.0.0.1,$PXPORT;UID=sa;PWD=$PW;Encrypt=yes;TrustServerCertificate=yes" "SELECT 4242" >/dev/null 2>&1
check "wire, Encrypt=yes: neither the password nor the query in clear" \
  '[ -s "$TMP/cap-yes" ] && ! has "$TMP/cap-yes" "$PWOBF" && ! has "$TMP/cap-yes" "$PW16" && ! has "$TMP/cap-yes" "$SQL16"'
proxy "$PA" "$TMP/cap-no"
"$PROBE" dump native "Server=127.0.0.1,$PXPORT;UID=sa;PWD=$PW;Encrypt=no" "SELECT 4242" >/dev/null 2>&1
check "wire, Encrypt=no against a TLS server: LOGIN7 encrypted (no password), the query in clear" \
  '! has "$TMP/cap-no" "$PWOBF" && ! has "$TMP/cap-no" "$PW16" && has "$TMP/cap-no" "$SQL16"'

stop_last
shaA=$(sha256sum "$TMP/a/tls-cert.pem" | cut -d' ' -f1)
start_sim a2 "$TMP/a" || ko "restart on the same data dir"
out=$("$PROBE" dump native "Server=127.0.0.1,$PORT;Database=tls;UID=sa;PWD=$PW;Encrypt=yes;TrustServerCertificate=yes" \
      "SELECT COUNT(*) AS c FROM dbo.d" 2>&1)
check "restart: the certificate in the data dir is reused" \
  '[ "$(sha256sum "$TMP/a/tls-cert.pem" | cut -d" " -f1)" = "$shaA" ] && echo "$out" | grep -q "^10$" &&
   ! grep -q "created a self-signed" "$TMP/a2.log"' "$out"
check "the private key is private (0600)" '[ "$(stat -c %a "$TMP/a/tls-key.pem")" = 600 ]'
stop_last

# ---- sim B: --tls off ----------------------------------------------------------------------
start_sim b "$TMP/b" --tls off || ko "start --tls off"
PB=$PORT
out=$("$PROBE" dump native "Server=127.0.0.1,$PB;UID=sa;PWD=$PW;Encrypt=yes;TrustServerCertificate=yes" "SELECT 1" 2>&1)
check "--tls off: Encrypt=yes says the server does not support encryption, and Encrypt=no" \
  'echo "$out" | grep -q "OPEN ERROR -15" && echo "$out" | grep -q "does not support encryption" &&
   echo "$out" | grep -q "Encrypt=no"' "$out"
out=$("$PROBE" dump native "Server=127.0.0.1,$PB;UID=sa;PWD=$PW;Encrypt=no" "SELECT 5 AS v" 2>&1)
check "--tls off: Encrypt=no works, no certificate created" \
  'echo "$out" | grep -q "^5$" && [ ! -e "$TMP/b/tls-cert.pem" ]' "$out"
proxy "$PB" "$TMP/cap-off"
"$PROBE" dump native "Server=127.0.0.1,$PXPORT;UID=sa;PWD=$PW;Encrypt=no" "SELECT 4242" >/dev/null 2>&1
check "wire, --tls off (control): the obfuscated password is visible, so the checks above can fail" \
  'has "$TMP/cap-off" "$PWOBF"'
stop_last

# ---- sim C: --tls required, with --tls-cert/--tls-key -----------------------------------------
start_sim c "$TMP/c" --tls required --tls-cert "$TMP/a/tls-cert.pem" --tls-key "$TMP/a/tls-key.pem" \
  || ko "start --tls required"
PC=$PORT
out=$("$PROBE" dump native "Server=127.0.0.1,$PC;UID=sa;PWD=$PW;Encrypt=no" "SELECT 6 AS v" 2>&1)
check "--tls required: Encrypt=no gets full TLS (server-forced)" \
  'echo "$out" | grep -q "^6$" && grep -q "TLS established" "$TMP/c.log" && [ ! -e "$TMP/c/tls-cert.pem" ]' "$out"
printf '[global]\n\ttds version = 7.4\n\tencryption = off\n' >"$TMP/freetds-off.conf"
printf 'SELECT 1\ngo\nquit\n' |
  FREETDSCONF=$TMP/freetds-off.conf timeout 20 tsql -H 127.0.0.1 -p "$PC" -U sa -P "$PW" >"$TMP/tsql" 2>&1
check "--tls required: a client without encryption is refused" \
  '! grep -q "(1 row affected)" "$TMP/tsql" && grep -q "requires (--tls required)" "$TMP/c.log"'
out=$(python3 - "$PC" "$TMP/a/tls-cert.pem" <<'PY' 2>&1
import socket, ssl, sys
port, cafile = int(sys.argv[1]), sys.argv[2]
for name in ("localhost", "127.0.0.1"):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["tds/8.0"])
    with socket.create_connection(("127.0.0.1", port)) as s, ctx.wrap_socket(s, server_hostname=name) as t:
        print(name, t.version(), t.selected_alpn_protocol(), t.getpeercert()["subject"])
PY
)
check "--tls-cert served; it validates for localhost and 127.0.0.1, ALPN tds/8.0" \
  '[ "$(echo "$out" | grep -c "tds/8.0.*localhost")" = 2 ]' "$out"
stop_last

out=$("$SIM" --help)
check "--help documents --tls, --tls-cert, --tls-key" \
  'echo "$out" | grep -q -- "--tls MODE" && echo "$out" | grep -q -- "--tls-cert FILE" && echo "$out" | grep -q -- "--tls-key FILE"'
"$SIM" --port 0 --data "$TMP/x" --password p --tls maybe >"$TMP/o" 2>&1; rc=$?
check "--tls with a bad mode exits 2" '[ $rc = 2 ] && grep -q "on, off or required" "$TMP/o"'
"$SIM" --port 0 --data "$TMP/x" --password p --tls-cert "$TMP/a/tls-cert.pem" >"$TMP/o" 2>&1; rc=$?
check "--tls-cert without --tls-key exits 2" '[ $rc = 2 ] && grep -q "together" "$TMP/o"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
