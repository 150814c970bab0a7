"""A minimal raw TDS client for the simulator's e2e tests: PRELOGIN, LOGIN7,
SQL batches with chosen status bits, ATTENTION, whole-message reads."""
import socket
import struct


def raw_session(port):
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def pkt(ptype, payload, status=1):
    return struct.pack(">BBHHBB", ptype, status, len(payload) + 8, 0, 1, 0) + payload


def read_msg(s):
    """One server message: payloads of packets until EOM."""
    out = b""
    while True:
        h = b""
        while len(h) < 8:
            b = s.recv(8 - len(h))
            if not b:
                raise EOFError("closed")
            h += b
        ln = struct.unpack(">H", h[2:4])[0] - 8
        body = b""
        while len(body) < ln:
            b = s.recv(ln - len(body))
            if not b:
                raise EOFError("closed")
            body += b
        out += body
        if h[1] & 1:
            return out


def raw_login(s, password, user="sa"):
    pre = bytes([0, 0, 6, 0, 6, 0xFF]) + bytes([9, 0, 0, 0, 0, 0])
    s.sendall(pkt(0x12, pre))
    read_msg(s)
    strs = ["host", user, password, "raw", "127.0.0.1", "", "raw", "", "master"]
    enc = []
    for i, v in enumerate(strs):
        b = v.encode("utf-16-le")
        if i == 2:
            b = bytes((((x << 4) & 0xF0) | (x >> 4)) ^ 0xA5 for x in b)
        enc.append(b)
    off = 94
    fixed = b""
    data = b""
    for v, b in zip(strs, enc):
        fixed += struct.pack("<HH", off + len(data), len(v))
        data += b
    total = 94 + len(data)
    head = struct.pack("<IIIIII", total, 0x74000004, 4096, 7, 1, 0) + bytes([0xE0, 3, 0, 0]) + \
        struct.pack("<ii", 0, 0x409)
    login = head + fixed + bytes(6) + bytes(16) + data
    assert len(head + fixed + bytes(22)) == 94
    s.sendall(pkt(0x10, login))
    return read_msg(s)


def batch(sql, status=1):
    hdr = struct.pack("<IIHQI", 22, 18, 2, 0, 1)
    return pkt(0x01, hdr + sql.encode("utf-16-le"), status)
