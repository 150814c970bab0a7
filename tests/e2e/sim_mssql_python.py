"""Microsoft's mssql-python (bundled ODBC driver 18) against mssql-cdc-sim.

usage: sim_mssql_python.py PORT PASSWORD   (run by sim_clients.sh when a Python
with mssql_python is given in MSSQL_PYTHON). Ends with "N passed, N failed".
"""
import decimal
import sys

import mssql_python

PORT, PASSWORD = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    passed, failed = (passed + 1, failed) if cond else (passed, failed + 1)
    print(f"{'ok  ' if cond else 'FAIL'} mssql-python: {name} {'' if cond else detail}")


base = f"Server=127.0.0.1,{PORT};UID=sa;PWD={PASSWORD}"
try:
    mssql_python.connect(base)
    check("default (Encrypt=yes) refuses the sim's self-signed certificate", False, "connected")
except mssql_python.OperationalError as e:
    check("default (Encrypt=yes) refuses the sim's self-signed certificate",
          "certificate verify failed" in str(e), str(e))
for enc in ("no", "optional", "yes;TrustServerCertificate=yes"):
    try:
        with mssql_python.connect(base + f";Encrypt={enc}") as c:
            cur = c.cursor()
            cur.execute("SELECT TYPED")
            rows = cur.fetchall()
            check(f"Encrypt={enc}: typed result", rows[0][4] == decimal.Decimal(
                "-1234567890123456789012345678.0123456789") and rows[0][7] ==
                "h\u00e9llo \u20ac \U0001F600" and rows[1][0] is None, repr(rows[0]))
            for i in range(3):  # sp_prepexec, then re-executions
                cur.execute("SELECT PARAMS x ? ?", (i, "\u00e9" * (i + 1)))
                got = cur.fetchall()
                check(f"Encrypt={enc}: parameters (sp_prepexec) run {i}",
                      [tuple(r) for r in got] == [(i, "\u00e9" * (i + 1))], repr(got))
            c.commit()
    except Exception as e:
        check(f"Encrypt={enc}: session", False, repr(e))
try:
    mssql_python.connect(f"Server=127.0.0.1,{PORT};UID=sa;PWD=wrong;Encrypt=no")
    check("wrong password refused", False, "connected")
except mssql_python.Error as e:
    check("wrong password -> Login failed", "Login failed for user 'sa'" in str(e), str(e))
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
