"""The wheel `make python-wheel` builds: installed into a clean virtual
environment (nothing of .venv's but pyarrow, linked in by a .pth to a
folder holding only it), imported from a directory outside the tree, it
loads the library it carries and every library that one links from its
own mssql_cdc.libs/ (read from /proc/self/maps once loaded), never the
system's; and it reads changes over TLS (FreeTDS and GnuTLS from the
wheel) from the simulator.

Run: .venv/bin/python -m pytest tests/interop/test_python_wheel.py
"""
import json
import os
import subprocess

import pyarrow
import pytest

from conftest import PASSWORD, ROOT, venv_with
from test_snapshot import insert, make_db

# the libraries libmssqlcdc links that auditwheel grafts (zlib, libstdc++
# and glibc are manylinux's own: the system's)
GRAFTED = ("libmssqlcdc", "libsybdb", "libgnutls", "libjansson", "libroaring", "libzstd",
           "libsnappy", "liblz4", "libnettle", "libhogweed", "libgmp", "libp11-kit", "libidn2",
           "libunistring", "libtasn1", "libgssapi_krb5", "libkrb5", "libk5crypto")

CODE = r"""
import json, os, sys
import mssql_cdc
P = json.loads(os.environ["MCDC_PARAMS"])
opts = {"captureInstance": "dbo_orders", "connectionString": P["connstr"]}
rows = mssql_cdc.read_changes(opts).read_all().num_rows
with open("/proc/self/maps") as f:
    maps = sorted({line.split()[-1] for line in f if "/" in line.split()[-1]})
print("RESULT " + json.dumps({"file": mssql_cdc.__file__, "path": mssql_cdc.library_path(),
                              "rows": rows, "maps": maps, "sys_path": sys.path}))
"""


def test_the_wheel_runs_in_a_clean_venv_on_the_libraries_it_carries(python_wheel, sim,
                                                                    tmp_path_factory):
    assert "-py3-none-manylinux_" in os.path.basename(python_wheel), python_wheel
    env = venv_with(tmp_path_factory, python_wheel, "clean", on_top=False)
    deps = tmp_path_factory.mktemp("only-pyarrow")
    os.symlink(os.path.dirname(pyarrow.__file__), deps / "pyarrow")
    with open(os.path.join(env["purelib"], "_pyarrow_only.pth"), "w") as f:
        f.write(f"{deps}\n")
    make_db(sim)
    insert(sim, 1, 7)
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    connstr = (f"Server=127.0.0.1,{sim.port};Database=shop;UID=sa;PWD={PASSWORD};"
               "Encrypt=yes;TrustServerCertificate=yes")
    path = os.path.join(env["work"], "probe.py")
    with open(path, "w") as f:
        f.write(CODE)
    run_env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "MSSQL_CDC_LIBRARY")}
    run_env["MCDC_PARAMS"] = json.dumps({"connstr": connstr})
    p = subprocess.run([env["python"], path], cwd=env["work"], capture_output=True, text=True,
                       env=run_env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    pkg = os.path.join(env["purelib"], "mssql_cdc")
    assert r["file"] == os.path.join(pkg, "__init__.py") and not r["file"].startswith(ROOT)
    assert r["path"] == os.path.join(pkg, "libmssqlcdc.so.1")
    assert r["rows"] == 7
    # nothing of .venv's on the path but the folder holding pyarrow
    assert not [d for d in r["sys_path"] if ".venv" in d or "/work/main" in d], r["sys_path"]
    ours = [m for m in r["maps"] if os.path.basename(m).startswith(GRAFTED)]
    libs = os.path.join(env["purelib"], "mssql_cdc.libs")
    outside = [m for m in ours if not (m.startswith(libs + "/") or m == r["path"])]
    assert not outside, outside
    loaded = {os.path.basename(m).split("-")[0].split(".so")[0] for m in ours}
    assert {"libmssqlcdc", "libsybdb", "libgnutls", "libjansson", "libzstd"} <= loaded, loaded
