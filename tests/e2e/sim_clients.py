"""Real SQL Server clients against mssql-cdc-sim (run by sim_clients.sh).

usage: sim_clients.py PORT PASSWORD MODE
MODE "testengine": the server runs tests/e2e/sim_testengine.c (fixed commands).
Prints one line per check and ends with "N passed, N failed".
"""
import datetime
import decimal
import socket
import struct
import sys
import time
import uuid

import pymssql
import pytds

from sim_tdsraw import batch, pkt, raw_login, read_msg

PORT = int(sys.argv[1])
PASSWORD = sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "testengine"
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def run(name, fn):
    try:
        fn()
    except Exception as e:  # a crash in a check is a failure, not the end
        check(name, False, f"raised {type(e).__name__}: {e}")


EXPECT_TYPED = (
    -2147483648,
    9223372036854775807,
    255,
    True,
    decimal.Decimal("-1234567890123456789012345678.0123456789"),
    decimal.Decimal("-922337203685477.5808"),
    3.5,
    "h\u00e9llo \u20ac \U0001F600",
    "caf\u00e9 \u20ac",
    datetime.datetime(2024, 2, 29, 23, 59, 59, 123456),
    None,  # datetimeoffset: compared separately (tz classes differ)
    datetime.datetime(2023, 12, 31, 23, 59, 59, 997000),
    datetime.date(1, 1, 1),
    datetime.time(12, 34, 56, 789000),
    uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"),
    b"\x00\x01\xfe\xff\x10",
    b"\x00\x01\xfe" + b"\x00" * 7,
    "max \u00e9",
    b"\x00\x01\xfe\xff\x10",
    datetime.datetime(2024, 5, 6, 7, 8),
    decimal.Decimal("42.00"),
)
DTO_UTC = datetime.datetime(2024, 1, 1, 4, 30, 0, 500000, tzinfo=datetime.timezone.utc)


def compare_typed(client, rows):
    check(f"{client}: two rows", len(rows) == 2, repr(rows))
    r = rows[0]
    for i, want in enumerate(EXPECT_TYPED):
        if want is None:
            continue
        got = r[i]
        ok = got == want and type(got) == type(want) or (
            isinstance(want, bytes) and bytes(got) == want)
        check(f"{client}: typed column {i} = {want!r}", ok, f"got {got!r}")
    dto = r[10]
    check(f"{client}: datetimeoffset", dto == DTO_UTC and dto.utcoffset() ==
          datetime.timedelta(hours=-3), f"got {dto!r}")
    nulls = rows[1]
    check(f"{client}: NULL row", all(v is None for i, v in enumerate(nulls) if i != 1)
          and nulls[1] == 0, repr(nulls))


def pymssql_conn(**kw):
    return pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD,
                           database="master", tds_version="7.4", **kw)


def pytds_conn(**kw):
    kw.setdefault("autocommit", True)
    return pytds.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD,
                         database="master", **kw)


def t_pymssql_typed():
    with pymssql_conn() as c:
        cur = c.cursor()
        cur.execute("SELECT 1")
        check("pymssql: SELECT 1", cur.fetchall() == [(1,)])
        cur.execute("SELECT TYPED")
        compare_typed("pymssql", cur.fetchall())


def t_pytds_typed():
    with pytds_conn() as c:
        cur = c.cursor()
        cur.execute("SELECT TYPED")
        rows = cur.fetchall()
        # python-tds builds Decimal from the scaled integer, so 42.00 compares
        # equal to 42 but prints as 42: equality is what matters
        compare_typed("python-tds", rows)


def t_pytds_params():
    with pytds_conn() as c:
        cur = c.cursor()
        vals = (7, -(2**40), "h\u00e9llo \U0001F600", decimal.Decimal("-12.345"),
                datetime.datetime(2024, 1, 2, 3, 4, 5, 678901),
                uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"), pytds.Binary(b"\x00\x01\xff"),
                2.5, True, datetime.date(2024, 2, 29), "x" * 5000, None)
        cur.execute("SELECT PARAMS x" + " %s" * len(vals), vals)
        row = cur.fetchall()[0]
        want = [v for v in vals if v is not None]
        check("python-tds: RPC parameters round-trip", list(row) == want,
              f"got {row!r}")


def t_login_failure():
    try:
        pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password="wrong",
                        tds_version="7.4", login_timeout=5)
        check("pymssql: wrong password refused", False, "connected")
    except pymssql.OperationalError as e:
        check("pymssql: wrong password -> 18456", "18456" in str(e), str(e))
    try:
        pytds.connect(server="127.0.0.1", port=PORT, user="sa", password="wrong",
                      login_timeout=5)
        check("python-tds: wrong password refused", False, "connected")
    except Exception as e:  # pytds wraps in TimeoutError/OperationalError
        cause = e.__cause__ or e
        check("python-tds: wrong password -> 18456",
              getattr(cause, "msg_no", None) == 18456 or "18456" in str(cause) or
              "Login failed" in str(cause), repr(cause))


def t_errors_and_session():
    with pytds_conn() as c:
        cur = c.cursor()
        try:
            cur.execute("RAISE")
            check("python-tds: error token raises", False)
        except pytds.Error as e:
            check("python-tds: error token raises with number", e.msg_no == 50000, repr(e))
        cur.execute("SELECT 1")
        check("python-tds: session usable after an error", cur.fetchall() == [(1,)])
        cur.execute("USE cdcdb")
        cur.execute("SELECT 1")
        db = c._tds_socket.env.database
        check("python-tds: USE changes the database (ENVCHANGE 1)", db == "cdcdb", repr(db))


def t_transactions():
    with pytds_conn(autocommit=False) as c:
        cur = c.cursor()
        cur.execute("SELECT 1")
        check("python-tds: query inside a TM transaction", cur.fetchall() == [(1,)])
        c.commit()
        c.rollback()
        cur.execute("SELECT 1")
        check("python-tds: commit/rollback via transaction manager", cur.fetchall() == [(1,)])


def t_packet_size():
    with pytds_conn(blocksize=16384) as c:
        cur = c.cursor()
        cur.execute("SELECT ROWS 20000")
        rows = cur.fetchall()
        check("python-tds: 16 KiB packets, 20000 rows", len(rows) == 20000 and
              rows[-1] == (19999, "row 19999"))
        size = c._tds_socket.main_session._writer.bufsize
        check("python-tds: packet size negotiated (ENVCHANGE 4)", size == 16384, repr(size))


def t_attention():
    with pytds_conn() as c:
        cur = c.cursor()
        cur.execute("SELECT ROWS 5000000")
        first = cur.fetchmany(10)
        t0 = time.time()
        cur.cancel()
        took = time.time() - t0
        check("python-tds: attention stops a long result", len(first) == 10 and took < 5,
              f"{took:.1f}s")
        cur.execute("SELECT 1")
        check("python-tds: session in sync after attention", cur.fetchall() == [(1,)])


def t_network_wait():
    with pytds_conn() as c:
        cur = c.cursor()
        cur.execute("SELECT ROWS 200000")
        n = 0
        for _ in cur:  # python-tds reads slower than the server writes
            n += 1
            if n % 50000 == 0:
                time.sleep(0.2)
        cur.execute("SELECT NETWAIT")
        ms = cur.fetchall()[0][0]
        check("blocked sends reported as network wait", n == 200000 and ms >= 100, f"{ms} ms")


def t_attention_after_completion():
    with pytds_conn() as c:
        cur = c.cursor()
        cur.execute("SELECT 1")
        cur.fetchall()
        cur.cancel()  # nothing pending: no attention sent by the client, still fine
        cur.execute("SELECT 1")
        check("python-tds: cancel when idle", cur.fetchall() == [(1,)])


def raw_session():
    return socket.create_connection(("127.0.0.1", PORT), timeout=5)


def recv_all(s, limit=1 << 20):
    out = b""
    try:
        while len(out) < limit:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    return out


def t_raw_attention():
    s = raw_session()
    reply = raw_login(s, PASSWORD)
    check("raw client: login reply has LOGINACK", b"\xad" in reply and reply[-13] == 0xFD)
    # an attention with nothing running is answered with DONE(DONE_ATTN)
    s.sendall(pkt(0x06, b""))
    r = read_msg(s)
    check("raw client: idle attention -> DONE_ATTN", r[0] == 0xFD and r[1] & 0x20, r.hex())
    # attention mid-stream: the reply ends with DONE_ATTN long before 5M rows
    s.sendall(batch("SELECT ROWS 5000000"))
    got = s.recv(65536)
    s.sendall(pkt(0x06, b""))
    total = len(got)
    tail = got
    s.settimeout(10)
    while True:
        b = s.recv(65536)
        if not b:
            break
        total += len(b)
        tail = (tail + b)[-64:]
        # DONE(ATTN) as the last token of an EOM packet
        if len(tail) >= 13 and tail[-13] == 0xFD and tail[-12] & 0x20:
            break
    check("raw client: attention mid-result ends with DONE_ATTN", tail[-13] == 0xFD and
          tail[-12] & 0x20 and total < 5000000 * 20, f"{total} bytes")
    s.sendall(batch("SELECT 1"))
    r = read_msg(s)
    check("raw client: in sync after attention", r[0] == 0x81 and r[-13] == 0xFD, r.hex()[:80])
    s.sendall(batch("SELECT 1", status=0x09))  # EOM | RESETCONNECTION
    r = read_msg(s)
    check("raw client: RESETCONNECTION acknowledged (ENVCHANGE 18)",
          r[:6] == bytes([0xE3, 3, 0, 18, 0, 0]) and r[6] == 0x81, r.hex()[:80])
    s.close()


def t_bad_input():
    # garbage, a lying length, an unknown packet type, a huge LOGIN7 claim
    cases = {
        "garbage": b"\x16\x03\x01\x00\xa5" + b"x" * 200,
        "short header length": b"\x12\x01\x00\x04\x00\x00\x01\x00",
        "lying length": b"\x12\x01\x40\x00\x00\x00\x01\x00abc",
        "unknown type": b"\x42\x01\x00\x08\x00\x00\x01\x00",
        "sql before login": b"\x01\x01\x00\x0c\x00\x00\x01\x00a\x00b\x00",
        "bad prelogin": b"\x12\x01\x00\x0d\x00\x00\x01\x00\x01\x00\x20\x00\x01",
    }
    for name, data in cases.items():
        s = raw_session()
        s.settimeout(2)
        s.sendall(data)
        if name == "lying length":
            s.shutdown(socket.SHUT_WR)
        got = recv_all(s)
        s.close()
        check(f"bad input ({name}) closes the connection", got == b"" or got[0] == 4,
              repr(got[:16]))
    with pymssql_conn() as c:
        cur = c.cursor()
        cur.execute("SELECT 1")
        check("server alive after bad input", cur.fetchall() == [(1,)])


def t_faults():
    with pytds_conn() as c:
        cur = c.cursor()
        cur.execute("FAULT DROPROW 3000")
        try:
            cur.execute("SELECT ROWS 100000")
            cur.fetchall()
            check("fault: drop mid-result breaks the client", False)
        except Exception as e:
            check("fault: drop mid-result breaks the client", True, repr(e))
    with pytds_conn() as c:
        cur = c.cursor()
        cur.execute("FAULT DELAY 300")
        t0 = time.time()
        cur.execute("SELECT 1")
        cur.fetchall()
        check("fault: delay", time.time() - t0 >= 0.25)
        cur.execute("FAULT LOGIN")
    try:
        pytds_conn(login_timeout=3)
        check("fault: refuse login", False)
    except Exception as e:
        cause = e.__cause__ or e
        check("fault: refuse login -> 18456", "18456" in repr(cause) or "Login failed" in
              str(cause), repr(cause))
    with pytds_conn() as c:
        check("fault: login fault is one-shot", c.cursor() is not None)
        cur = c.cursor()
        cur.execute("FAULT DROPQUERY")
        try:
            cur.execute("SELECT 1")
            cur.fetchall()
            check("fault: drop at the next request", False)
        except Exception as e:
            check("fault: drop at the next request", True, repr(e))
    with pymssql_conn() as c:
        cur = c.cursor()
        cur.execute("SELECT 1")
        check("fault: server serves new sessions after drops", cur.fetchall() == [(1,)])


for name, fn in [(n, f) for n, f in globals().items() if n.startswith("t_")]:
    run(name, fn)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
