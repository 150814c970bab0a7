"""READ COMMITTED between sessions against the real mssql-cdc-sim.

usage: sim_isolation.py PORT PASSWORD (run by sim_fidelity.sh). A reader of a
table another session changed in an open transaction waits for its COMMIT;
SET LOCK_TIMEOUT gives error 1222; a client query timeout (ATTENTION) ends
the wait and leaves the connection usable; writers do not wait.
Ends with "N passed, N failed".
"""
import sys
import threading
import time

import pymssql
import pytds

from sim_check import Checks
from sim_tdsraw import batch, pkt, raw_login, raw_session, read_msg

PORT, PASSWORD = int(sys.argv[1]), sys.argv[2]
C = Checks("isolation")
check = C.check


def connect(**kw):
    return pytds.connect("127.0.0.1", port=PORT, user="sa", password=PASSWORD, database="isolab", **kw)


def main():
    setup = pytds.connect("127.0.0.1", port=PORT, user="sa", password=PASSWORD, autocommit=True)
    setup.cursor().execute("CREATE DATABASE isolab")
    setup.close()
    a = connect(autocommit=True)
    ca = a.cursor()
    ca.execute("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v int NULL)")
    ca.execute("INSERT INTO dbo.t VALUES (1, 10)")
    ca.execute("BEGIN TRAN")
    ca.execute("INSERT INTO dbo.t VALUES (2, 20)")
    b = connect(autocommit=True)
    cb = b.cursor()
    got = {}

    def reader():
        cb.execute("SELECT COUNT(*) FROM dbo.t")
        got["n"] = cb.fetchone()[0]
        got["t"] = time.monotonic()

    th = threading.Thread(target=reader)
    th.start()
    time.sleep(0.3)
    check("a reader waits for the other session's open transaction", "n" not in got, repr(got))
    w = connect(autocommit=True)
    cw = w.cursor()
    cw.execute("INSERT INTO dbo.t VALUES (3, 30)")
    check("a writer does not wait", True)
    cw.execute("SET LOCK_TIMEOUT 100")
    try:
        cw.execute("SELECT COUNT(*) FROM dbo.t")
        cw.fetchall()
        check("SET LOCK_TIMEOUT 100 -> error 1222", False, "no error")
    except pytds.tds_base.Error as e:
        check("SET LOCK_TIMEOUT 100 -> error 1222", getattr(e, "number", None) == 1222, repr(e))
    cw.execute("SELECT COUNT(*) FROM dbo.t WITH (NOLOCK)")
    check("NOLOCK reads the uncommitted row", cw.fetchone()[0] == 3)
    # a client query timeout: FreeTDS sends ATTENTION, the wait ends (pymssql
    # then closes the connection itself)
    p = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, database="isolab",
                        autocommit=True, timeout=1)
    pc = p.cursor()
    t0 = time.monotonic()
    try:
        pc.execute("SELECT COUNT(*) FROM dbo.t")
        pc.fetchall()
        check("pymssql query timeout ends the wait", False, "no timeout")
    except pymssql.Error as e:
        check("pymssql query timeout ends the wait", time.monotonic() - t0 < 5, repr(e))
    # raw ATTENTION: DONE(DONE_ATTN), then the connection serves the next batch
    s = raw_session(PORT)
    raw_login(s, PASSWORD)
    s.sendall(batch("USE isolab"))
    read_msg(s)
    s.sendall(batch("SELECT COUNT(*) FROM dbo.t"))
    time.sleep(0.2)
    s.sendall(pkt(0x06, b""))
    replies = [read_msg(s)]
    if b"\xfd\x20\x00" not in replies[0]:  # the reply to the batch came first
        replies.append(read_msg(s))
    check("ATTENTION during the wait -> DONE_ATTN", any(b"\xfd\x20\x00" in r for r in replies), repr(replies)[:300])
    s.sendall(batch("SELECT 41 + 1"))
    r = read_msg(s)
    check("the connection serves the next batch", b"\x2a\x00\x00\x00" in r, r.hex())
    s.close()
    t_commit = time.monotonic()
    ca.execute("COMMIT")
    th.join(10)
    check("COMMIT releases the reader, which sees the committed rows",
          got.get("n") == 3 and got.get("t", 0) >= t_commit, repr(got))
    for c in (a, b, w):
        c.close()


C.run(main)
