"""RPC output parameters and prepared handles against the real mssql-cdc-sim.

usage: sim_rpc_outputs.py PORT PASSWORD (run by sim_fidelity.sh). Raw TDS
RPCs by ProcID (sp_prepare, sp_execute, sp_prepexec, sp_unprepare) check the
RETURNVALUE tokens byte by byte (ordinal = position in the RPC as sent,
0-based; the handle before the output parameters); python-tds and pymssql
read OUTPUT parameters of sp_executesql through callproc. An RPC of more than
2,100 parameters is refused as SQL Server does (8003).
Ends with "N passed, N failed".
"""
import struct
import sys

import pymssql
import pytds

from sim_check import Checks
from sim_tdsraw import pkt, raw_login, raw_session, read_msg

PORT, PASSWORD = int(sys.argv[1]), sys.argv[2]
C = Checks("rpc")
check = C.check


def bvarchar(s):
    b = s.encode("utf-16-le")
    return bytes([len(s)]) + b


def p_int(name, value, output=False):
    v = b"\x00" if value is None else b"\x04" + struct.pack("<i", value)
    return bvarchar(name) + bytes([1 if output else 0]) + b"\x26\x04" + v


def p_nvarchar(name, text):
    b = text.encode("utf-16-le")
    return bvarchar(name) + b"\x00" + b"\xe7" + struct.pack("<H", 8000) + bytes.fromhex("0904d00034") + \
        struct.pack("<H", len(b)) + b


def rpc(proc_id, *params):
    hdr = struct.pack("<IIHQI", 22, 18, 2, 0, 1)
    return pkt(0x03, hdr + struct.pack("<HHH", 0xFFFF, proc_id, 0) + b"".join(params))


def retval_int(ordinal, name, value):
    return b"\xac" + struct.pack("<H", ordinal) + bvarchar(name) + b"\x01" + struct.pack("<IH", 0, 1) + \
        b"\x26\x04\x04" + struct.pack("<i", value)


def error_number(reply):
    i = reply.find(b"\xaa")
    return struct.unpack("<i", reply[i + 3:i + 7])[0] if i >= 0 else None


def raw_checks():
    s = raw_session(PORT)
    raw_login(s, PASSWORD)
    stmt = "SELECT @a + 1 AS n; SET @o = @a * 2"
    decl = "@a int, @o int OUTPUT"
    # sp_prepare @handle OUTPUT, @params, @stmt -> the handle, nothing run
    s.sendall(rpc(11, p_int("@handle", None, True), p_nvarchar("@params", decl), p_nvarchar("@stmt", stmt)))
    r = read_msg(s)
    i = r.find(b"\xac\x00\x00" + bvarchar("@handle"))
    check("sp_prepare returns the handle as RETURNVALUE ordinal 0", i >= 0, r.hex())
    handle = struct.unpack("<i", r[i + 3 + 15 + 1 + 6 + 3:i + 3 + 15 + 1 + 6 + 7])[0] if i >= 0 else -1
    check("sp_prepare runs nothing (no COLMETADATA)", b"\x81" not in r[:i] if i >= 0 else False, r.hex())
    # sp_execute @handle, @a = 20, @o OUTPUT -> a row, then @o = 40 with ordinal 2 (the RPC as sent)
    s.sendall(rpc(12, p_int("", handle), p_int("@a", 20), p_int("@o", None, True)))
    r = read_msg(s)
    check("sp_execute by handle: the row", struct.pack("<i", 21) in r and b"\x81" in r, r.hex())
    check("sp_execute: OUTPUT @o as RETURNVALUE ordinal 2", retval_int(2, "@o", 40) in r, r.hex())
    check("sp_execute: no handle RETURNVALUE", b"\xac\x00\x00" not in r, r.hex())
    # positional values work the same
    s.sendall(rpc(12, p_int("", handle), p_int("", 5), p_int("", None, True)))
    r = read_msg(s)
    check("sp_execute positional: @o = 10", retval_int(2, "@o", 10) in r, r.hex())
    # sp_prepexec: result, then handle (ordinal 0) before @o (ordinal 4)
    s.sendall(rpc(13, p_int("@handle", None, True), p_nvarchar("@params", decl), p_nvarchar("@stmt", stmt),
                  p_int("@a", 1), p_int("@o", None, True)))
    r = read_msg(s)
    j = r.find(b"\xac\x00\x00" + bvarchar("@handle"))
    h2 = struct.unpack("<i", r[j + 3 + 15 + 1 + 6 + 3:j + 3 + 15 + 1 + 6 + 7])[0] if j >= 0 else -1
    k = r.find(retval_int(4, "@o", 2))
    check("sp_prepexec: a new handle, then OUTPUT @o (ordinal 4)", 0 <= j < k and h2 != handle, r.hex())
    check("sp_prepexec: RETURNSTATUS before the RETURNVALUEs", 0 <= r.find(b"\x79\x00\x00\x00\x00") < j, r.hex())
    # sp_unprepare, then the handle is gone: 8179
    s.sendall(rpc(15, p_int("", handle)))
    r = read_msg(s)
    check("sp_unprepare", error_number(r) is None, r.hex())
    s.sendall(rpc(12, p_int("", handle), p_int("", 1), p_int("", None, True)))
    r = read_msg(s)
    check("sp_execute of an unprepared handle -> 8179", error_number(r) == 8179, r.hex())
    s.sendall(rpc(12, p_int("", h2), p_int("", 7), p_int("", None, True)))
    r = read_msg(s)
    check("the other handle still runs", retval_int(2, "@o", 14) in r, r.hex())
    # output requested for a parameter not declared OUTPUT -> 8162
    s.sendall(rpc(10, p_nvarchar("@stmt", "SET @x = 1"), p_nvarchar("@params", "@x int"), p_int("@x", None, True)))
    r = read_msg(s)
    check("sp_executesql: OUTPUT not declared -> 8162", error_number(r) == 8162, r.hex())
    s.close()


def message(reply):
    """The first ERROR token's number, class and text."""
    i = reply.find(b"\xaa")
    if i < 0:
        return None, None, None
    number, _state, cls, n = struct.unpack("<iBBH", reply[i + 3:i + 11])
    return number, cls, reply[i + 11:i + 11 + 2 * n].decode("utf-16-le")


def split_rpc(payload):
    """An RPC message over 4096-byte packets (the size the login agreed)."""
    parts = [payload[k:k + 4088] for k in range(0, len(payload), 4088)]
    return b"".join(pkt(0x03, p, status=1 if k == len(parts) - 1 else 0) for k, p in enumerate(parts))


def param_limit_checks():
    """SQL Server takes up to 2,100 parameters in one RPC (sp_executesql's
    @stmt and @params count) and refuses more with error 8003, severity 16;
    the session goes on."""
    s = raw_session(PORT)
    raw_login(s, PASSWORD)
    hdr = struct.pack("<IIHQI", 22, 18, 2, 0, 1)
    stmt = p_nvarchar("@stmt", "SELECT 7 AS n")
    for n, refused in ((2100, False), (2101, True)):
        body = hdr + struct.pack("<HHH", 0xFFFF, 10, 0) + stmt + p_int("", 1) * (n - 1)
        s.sendall(split_rpc(body))
        number, cls, text = message(read_msg(s))
        if refused:
            check(f"{n} parameters: error 8003, severity 16", (number, cls) == (8003, 16),
                  (number, cls, text))
            check(f"{n} parameters: SQL Server's message", text ==
                  "The incoming request has too many parameters. The server supports a maximum of "
                  "2100 parameters. Reduce the number of parameters and resend the request.", text)
        else:
            check(f"{n} parameters: not refused for their number", number != 8003, (number, text))
    s.sendall(rpc(10, p_nvarchar("@stmt", "SELECT 7 AS n")))
    r = read_msg(s)
    check("the session goes on after 8003", message(r)[0] is None and struct.pack("<i", 7) in r, r.hex())
    s.close()


def client_checks():
    c = pytds.connect("127.0.0.1", port=PORT, user="sa", password=PASSWORD, autocommit=True)
    cur = c.cursor()
    r = cur.callproc("sp_executesql", ["SET @o = @i * 2; SET @s = N'h\u00e9llo'",
                                       "@i int, @o int OUTPUT, @s nvarchar(20) OUTPUT", 21,
                                       pytds.output(param_type="int"), pytds.output(param_type="nvarchar(20)")])
    check("python-tds callproc: int and nvarchar OUTPUT", r[3:] == [42, "h\u00e9llo"], repr(r))
    r = cur.callproc("sp_executesql", ["SET @d = @d + 0.25", "@d decimal(10,2) OUTPUT",
                                       pytds.output(value=1, param_type="decimal(10,2)")])
    check("python-tds callproc: decimal OUTPUT in and out", str(r[2]) == "1.25", repr(r))
    c.close()
    p = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, autocommit=True)
    pc = p.cursor()
    r = pc.callproc("sp_executesql", ("SET @o = @i * 2", "@i int, @o int OUTPUT", 21, pymssql.output(int)))
    check("pymssql callproc: int OUTPUT", r[3] == 42, repr(r))
    p.close()


C.run(raw_checks, param_limit_checks, client_checks)
