"""Real clients against the real mssql-cdc-sim (engine + TDS layer), with T-SQL.

usage: sim_clients_real.py PORT PASSWORD (run by sim_clients.sh when the
engine is built). A typed table written with RPC parameters (python-tds) is
read back exactly by python-tds, pymssql and (if importable) mssql-python.
Ends with "N passed, N failed".
"""
import datetime
import decimal
import sys
import time
import uuid

import pymssql
import pytds

from sim_tdsraw import batch, raw_login, raw_session, read_msg

PORT, PASSWORD = int(sys.argv[1]), sys.argv[2]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    passed, failed = (passed + 1, failed) if cond else (passed, failed + 1)
    print(f"{'ok  ' if cond else 'FAIL'} real: {name} {'' if cond else detail}")


COLS = """id int NOT NULL PRIMARY KEY, ti tinyint, si smallint, bi bigint, b bit,
 d decimal(38,10), n numeric(5,2), m money, sm smallmoney, f float, r real, dd date,
 t time(3), dt datetime, sdt smalldatetime, dt2 datetime2(7), dto datetimeoffset(7),
 c char(4), vc varchar(20), nc nchar(3), nv nvarchar(50), nvm nvarchar(max),
 bn binary(4), vb varbinary(20), vbm varbinary(max), g uniqueidentifier"""
VALS = (1, 255, -32768, -(2**63), True, decimal.Decimal("-1234567890123456789012345678.0123456789"),
        decimal.Decimal("-999.99"), decimal.Decimal("-922337203685477.5808"),
        decimal.Decimal("214748.3647"), 1.5e300, 2.5, datetime.date(1, 1, 1),
        datetime.time(23, 59, 59, 999000), datetime.datetime(2023, 12, 31, 23, 59, 59, 997000),
        datetime.datetime(2024, 5, 6, 7, 8), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
        datetime.datetime(2024, 1, 1, 1, 30, 0, 500000,
                          tzinfo=datetime.timezone(datetime.timedelta(hours=-3))),
        "ab", "caf\u00e9", "\u00e9", "h\u00e9llo \U0001F600", "x" * 10000,
        b"\x01\x02\x03\x04", b"\x00\xff", b"\x07" * 9000,
        uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"))
# char(n)/nchar(n) come back padded, as from SQL Server
EXPECT = list(VALS)
EXPECT[17] = "ab  "
EXPECT[19] = "\u00e9  "


def compare(client, rows):
    check(f"{client}: two rows", len(rows) == 2, repr(rows)[:200])
    if len(rows) != 2:
        return
    bad = [(i, rows[0][i], w) for i, w in enumerate(EXPECT)
           if not (rows[0][i] == w or (isinstance(w, bytes) and bytes(rows[0][i]) == w))]
    check(f"{client}: 26 typed values exact", not bad, repr(bad)[:400])
    check(f"{client}: NULLs", rows[1][0] == 2 and all(v is None for v in rows[1][1:]),
          repr(rows[1]))


def main():
    c = pytds.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD,
                      autocommit=True)
    cur = c.cursor()
    try:
        cur.execute("DROP TABLE dbo.sim_clients_typed")
    except pytds.Error:
        pass
    cur.execute(f"CREATE TABLE dbo.sim_clients_typed ({COLS})")
    params = list(VALS)
    for i in (22, 23, 24):
        params[i] = pytds.Binary(params[i])
    cur.execute("INSERT INTO dbo.sim_clients_typed VALUES (" + ",".join(["%s"] * len(VALS)) +
                ")", tuple(params))
    check("python-tds: INSERT with 26 RPC parameters", cur.rowcount == 1, repr(cur.rowcount))
    cur.execute("INSERT INTO dbo.sim_clients_typed (id) VALUES (2)")
    cur.execute("SELECT * FROM dbo.sim_clients_typed ORDER BY id")
    compare("python-tds", cur.fetchall())
    try:
        cur.execute("SELEC 1")
        check("python-tds: syntax error raises", False)
    except pytds.Error as e:
        check("python-tds: syntax error raises", True, repr(e))
    cur.execute("SELECT CAST(SERVERPROPERTY('ProductMajorVersion') AS int)")
    check("python-tds: SERVERPROPERTY", cur.fetchall()[0][0] == 16)
    # a client that reads slowly makes the server wait: ASYNC_NETWORK_IO
    cur.execute("CREATE TABLE dbo.sim_clients_big (id int NOT NULL PRIMARY KEY, s nvarchar(200))")
    for k in range(0, 30000, 1000):
        cur.execute("INSERT INTO dbo.sim_clients_big VALUES " + ",".join(
            f"({i}, N'" + "x" * 200 + "')" for i in range(k, k + 1000)))
    cur.execute("SELECT * FROM dbo.sim_clients_big")
    n = 0
    for _ in cur:
        n += 1
        if n % 10000 == 0:
            time.sleep(0.2)
    cur.execute("SELECT wait_time_ms FROM sys.dm_exec_session_wait_stats "
                "WHERE session_id = @@SPID AND wait_type = 'ASYNC_NETWORK_IO'")
    ms = cur.fetchall()[0][0]
    check("python-tds: slow reader shows as ASYNC_NETWORK_IO wait", n == 30000 and ms >= 100,
          f"{n} rows, {ms} ms")
    c.close()

    with pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD,
                         tds_version="7.4") as c2:
        cur2 = c2.cursor()
        cur2.execute("SELECT * FROM dbo.sim_clients_typed ORDER BY id")
        compare("pymssql", cur2.fetchall())
    # RESETCONNECTION returns the session to the login's database
    s = raw_session(PORT)
    raw_login(s, PASSWORD)
    for q in ("CREATE DATABASE sim_clients_db", "USE sim_clients_db"):
        s.sendall(batch(q))
        read_msg(s)
    s.sendall(batch("SELECT DB_NAME()"))
    before = read_msg(s)
    s.sendall(batch("SELECT DB_NAME()", status=0x09))
    after = read_msg(s)
    s.close()
    check("raw client: RESETCONNECTION acknowledged and back in master",
          "sim_clients_db".encode("utf-16-le") in before and after[:4] == bytes([0xE3, 3, 0, 18])
          and "master".encode("utf-16-le") in after, after.hex()[:120])
    try:
        import mssql_python
    except ImportError:
        return
    with mssql_python.connect(f"Server=127.0.0.1,{PORT};UID=sa;PWD={PASSWORD};Encrypt=no") as c3:
        cur3 = c3.cursor()
        cur3.execute("SELECT * FROM dbo.sim_clients_typed WHERE id > ? ORDER BY id", (0,))
        compare("mssql-python", [tuple(r) for r in cur3.fetchall()])


try:
    main()
except Exception as e:
    check("session", False, repr(e))
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
