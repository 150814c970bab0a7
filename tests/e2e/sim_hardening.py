"""What an unauthenticated client can make mssql-cdc-sim do, and where its
password goes, against the real program.

usage: sim_hardening.py SIM_BIN   (run by sim_hardening.sh)

Starts the simulator itself (to choose its flags): a connection that has not
logged in by --login-timeout-ms is closed while an idle logged-in one is
not; before login only a small PRELOGIN and a LOGIN7 of at most 128 KiB are
read (anything else closes the connection, and the server goes on); no more
than --max-pending-logins connections wait for their login; the password
comes from --password-file or MSSQL_CDC_SIM_PASSWORD and is out of ps for
--password once started; the data directory is the owner's only and holds
no password text. Raw sockets (sim_tdsraw) and pymssql.
Ends with "N passed, N failed".
"""
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time

import pymssql

from sim_check import Checks
from sim_tdsraw import batch, pkt, raw_login, raw_session, read_msg

SIM_BIN = sys.argv[1]
C = Checks("hardening")
check = C.check
PW = "Hard!Pass42"
TIMEOUT_MS = 700


def start(d, *flags, env=None):
    ready = os.path.join(d, "ready")
    if os.path.exists(ready):
        os.remove(ready)
    p = subprocess.Popen([SIM_BIN, "--port", "0", "--data", os.path.join(d, "data"), "--ready-file", ready,
                          "--capture-poll-ms", "0", "--quiet", *flags], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    for _ in range(100):
        if os.path.exists(ready) and open(ready).read().strip():
            return p, int(open(ready).read())
        if p.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError("the simulator did not start: " + p.stderr.read().decode(errors="replace"))


def stop(p):
    p.terminate()
    p.wait(10)


def closed_within(s, seconds):
    """Seconds until the server closed s (reading only), None if it did not."""
    t0 = time.monotonic()
    s.settimeout(seconds)
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return time.monotonic() - t0
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - t0
    except socket.timeout:
        return None


def send_until_closed(s, data):
    """Sends data; True when the server closed the connection meanwhile or after."""
    try:
        s.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        return True
    return closed_within(s, 5) is not None


def prelogin():
    return pkt(0x12, bytes([0, 0, 6, 0, 6, 0xFF]) + bytes([9, 0, 0, 0, 0, 0]))


def server_serves(port):
    s = raw_session(port)
    reply = raw_login(s, PW)
    ok = reply.find(b"\xad") >= 0  # LOGINACK
    s.close()
    return ok


def main():
    with tempfile.TemporaryDirectory() as d:
        pwfile = os.path.join(d, "pw")
        with open(pwfile, "w") as f:
            f.write(PW + "\n")
        os.chmod(pwfile, 0o600)
        p, port = start(d, "--password-file", pwfile, "--login-timeout-ms", str(TIMEOUT_MS),
                        "--max-pending-logins", "3")
        try:
            check("--password-file: sa logs in with the file's first line", server_serves(port))
            # ---- the login deadline ------------------------------------------------
            s = raw_session(port)
            t = closed_within(s, 5)
            check("a connection that sends nothing is closed at the login timeout",
                  t is not None and TIMEOUT_MS / 1000 * 0.7 < t < TIMEOUT_MS / 1000 + 2, t)
            s.close()
            s = raw_session(port)
            s.sendall(prelogin())
            read_msg(s)
            t = closed_within(s, 5)
            check("one that stops after PRELOGIN too", t is not None and t < TIMEOUT_MS / 1000 + 2, t)
            s.close()
            s = raw_session(port)
            raw_login(s, PW)
            time.sleep(3 * TIMEOUT_MS / 1000)
            s.sendall(batch("SELECT 42"))
            reply = read_msg(s)
            check("a logged-in session idle past the timeout still serves", reply.find(b"\xd1") >= 0, reply[:40])
            s.close()
            # ---- what it reads before login ----------------------------------------
            s = raw_session(port)
            big = b"\x00" * 3000
            gone = send_until_closed(s, pkt(0x12, big, status=0) + pkt(0x12, big))
            check("a PRELOGIN past 4 KiB closes the connection", gone)
            s.close()
            s = raw_session(port)
            check("a SQL batch before login closes the connection", send_until_closed(s, batch("SELECT 1")))
            s.close()
            s = raw_session(port)
            s.sendall(prelogin())
            read_msg(s)
            chunk = b"\x00" * (32000 - 8)
            gone = send_until_closed(s, b"".join(pkt(0x10, chunk, status=0) for _ in range(5)))
            check("a LOGIN7 past 128 KiB closes the connection", gone)
            s.close()
            check("and the server goes on serving", server_serves(port))
            # ---- connections waiting for their login ---------------------------------
            held = [raw_session(port) for _ in range(3)]
            for h in held:  # each one accepted and served: a PRELOGIN answered
                h.sendall(prelogin())
                read_msg(h)
            extra = raw_session(port)
            t = closed_within(extra, 3)
            check("past --max-pending-logins a new connection is closed at once",
                  t is not None and t < TIMEOUT_MS / 1000 / 2, t)
            extra.close()
            for h in held:
                h.close()
            time.sleep(0.3)
            check("once they are gone, logins work again", server_serves(port))
            # ---- the data directory ---------------------------------------------------
            data = os.path.join(d, "data")
            modes = {n: stat.S_IMODE(os.stat(os.path.join(data, n)).st_mode) for n in os.listdir(data)
                     if n.endswith((".db", ".db-wal", ".db-shm"))}
            check("the data directory is the owner's only (0700)", stat.S_IMODE(os.stat(data).st_mode) == 0o700)
            check("its database files are 0600", modes and all(m == 0o600 for m in modes.values()), modes)
            blobs = b"".join(open(os.path.join(data, n), "rb").read() for n in modes)
            check("no file holds the password, as text or UTF-16",
                  PW.encode() not in blobs and PW.encode("utf-16-le") not in blobs)
        finally:
            stop(p)
        # ---- --password out of ps; MSSQL_CDC_SIM_PASSWORD -------------------------------
        p, port = start(d, "--password", PW)
        try:
            cmd = open(f"/proc/{p.pid}/cmdline", "rb").read()
            check("--password: the password is out of /proc/PID/cmdline once it listens", PW.encode() not in cmd, cmd)
            check("--password still logs in", server_serves(port))
        finally:
            stop(p)
        env = dict(os.environ, MSSQL_CDC_SIM_PASSWORD=PW)
        p, port = start(d, env=env)
        try:
            c = pymssql.connect(server="127.0.0.1", port=port, user="sa", password=PW)
            c.close()
            check("MSSQL_CDC_SIM_PASSWORD: sa logs in", True)
            envb = open(f"/proc/{p.pid}/environ", "rb").read()
            check("and it is out of /proc/PID/environ", PW.encode() not in envb)
        finally:
            stop(p)
        r = subprocess.run([SIM_BIN, "--port", "0", "--data", os.path.join(d, "data"), "--password", "a",
                            "--password-file", pwfile], capture_output=True, text=True)
        check("--password with --password-file is a usage error", r.returncode == 2 and "not both" in r.stderr, r.stderr)
        r = subprocess.run([SIM_BIN, "--port", "0", "--data", os.path.join(d, "data"), "--password-file",
                            os.path.join(d, "missing")], capture_output=True, text=True)
        check("a missing --password-file is a usage error naming it", r.returncode == 2 and "missing" in r.stderr,
              r.stderr)
        r = subprocess.run([SIM_BIN, "--help"], capture_output=True, text=True)
        check("--help documents the flags", all(f in r.stdout for f in (
            "--login-timeout-ms", "--max-pending-logins", "--password-file", "MSSQL_CDC_SIM_PASSWORD")), r.stdout)


C.run(main)
