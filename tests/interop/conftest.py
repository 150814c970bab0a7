"""Fixtures shared by the end-to-end and interop tests.

The simulator (build/mssql-cdc-sim) is started on a free loopback port with a
fresh data directory; SQL is sent with pymssql, an independent TDS client;
our CLI (build/mssql-cdc) runs as a subprocess; Delta tables are read back
with deltalake (delta-rs), the reader users trust.
"""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MCDC_BUILD", os.path.join(ROOT, "build"))
SIM = os.path.join(BUILD, "mssql-cdc-sim")
CLI = os.path.join(BUILD, "mssql-cdc")
PASSWORD = "Sim-Passw0rd!"


# How the tests compile their C programs and shims: the project's warnings,
# as errors, so a test program is held to what the library is.
CC = ["cc", "-std=c17", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wpedantic", "-Wconversion",
      "-Werror"]


def link_libs():
    """The libraries a program linking libmssqlcdc.a needs: the Makefile's
    one list (make print-ldlibs), so no test keeps its own copy."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run(["make", "-s", "--no-print-directory", "-C", root, "print-ldlibs"],
                          capture_output=True, text=True, check=True).stdout.split()


class Sim:
    """A running mssql-cdc-sim."""

    def __init__(self, data_dir, extra_args=()):
        # port 0: the simulator binds a free port itself and writes it to the
        # ready file, so no two simulators can race for one
        self.data_dir = data_dir
        ready = os.path.join(data_dir, "ready")
        if os.path.exists(ready):
            os.unlink(ready)
        self.log = open(os.path.join(data_dir, "sim.log"), "w")
        self.proc = subprocess.Popen(
            [SIM, "--port", "0", "--data", data_dir, "--password", PASSWORD,
             "--ready-file", ready, *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("simulator did not start: " + open(self.log.name).read())
            time.sleep(0.02)
        with open(ready) as f:
            self.port = int(f.read().strip())

    def connect(self, database="master", user="sa", password=PASSWORD):
        import pymssql
        return pymssql.connect(server="127.0.0.1", port=str(self.port), user=user,
                               password=password, database=database, autocommit=True,
                               tds_version="7.4")

    def run(self, sql, database="master"):
        """Runs a batch; returns the rows of its last result set (or [])."""
        conn = self.connect(database)
        try:
            cur = conn.cursor()
            cur.execute(sql)
            rows = []
            while True:
                if cur.description is not None:
                    rows = cur.fetchall()
                if not cur.nextset():
                    break
            return rows
        finally:
            conn.close()

    def connection_string(self, database, user="sa", password=PASSWORD):
        return (f"Server=127.0.0.1,{self.port};Database={database};UID={user};"
                f"PWD={password};Encrypt=no")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="mcdc-test-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start_sim(workdir, capture_poll_ms=50):
    """A simulator on workdir/sim; capture_poll_ms 0: capture only on
    EXEC sim.run_capture."""
    data = os.path.join(workdir, "sim")
    os.makedirs(data)
    return Sim(data, ["--capture-poll-ms", str(capture_poll_ms), "--capture-latency-ms", "0"])


@pytest.fixture
def sim(workdir):
    s = start_sim(workdir)
    yield s
    s.stop()


def run_cli(*args, env=None, check=True, timeout=120):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run([CLI, *args], capture_output=True, text=True, env=e, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"mssql-cdc {' '.join(args)} exited {p.returncode}:\n"
                             f"{p.stdout}\n{p.stderr}")
    return p


def duckdb_with_delta():
    """A DuckDB connection with the delta extension loaded from the
    duckdb-ext-delta package (the extension repository is not reachable from
    our machines, PyPI is)."""
    import glob

    import duckdb
    import duckdb_ext
    base = os.path.dirname(duckdb_ext.__file__) if getattr(duckdb_ext, "__file__", None) \
        else list(duckdb_ext.__path__)[0]
    found = glob.glob(os.path.join(base, "extensions", f"v{duckdb.__version__}", "*",
                                   "delta.duckdb_extension"))
    if not found:
        raise RuntimeError(f"no delta extension for DuckDB {duckdb.__version__} under {base}")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{found[0]}'")
    return con
