"""The package's finalization readers and advance (python/src/mssql_cdc/
finalization.py) with storage options: a control table on moto's S3
(signatures checked) written by advance and read back by finalized_until,
is_final and freshness, the same as on local disk; a misspelt storage
option is refused, and no secret appears in the message.

The package from the source tree (python/src, the repo's build/
libmssqlcdc), in a Python process of its own (.venv holds the reference's
`mssql_cdc`).

Run: .venv/bin/python -m pytest tests/interop/test_python_finalization.py
"""
import json
import os
import subprocess
import sys

from conftest import ROOT
from objstore import Moto

CODE = r"""
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["MCDC_ROOT"], "python", "src"))
from datetime import datetime
from mssql_cdc import finalization as F
P = json.loads(os.environ["MCDC_PARAMS"])
out = {}
for where, table, so in (("local", P["local"], None), ("s3", P["s3"], P["options"])):
    kw = {"storage_options": so} if so else {}
    r = {"before": F.finalized_until(table, "dbo.orders", **kw)}
    r["advanced"] = F.advance(table, "dbo.orders",
                              {"lsn": "0x0000002A000001000003", "commit_ts": "2026-03-01T10:20:30.123"},
                              granularity="hour", **kw)
    r["after"] = F.finalized_until(table, "dbo.orders", **kw)
    r["final_10"] = F.is_final(table, "dbo.orders", datetime(2026, 3, 1, 10), **kw)
    r["final_11"] = F.is_final(table, "dbo.orders", datetime(2026, 3, 1, 11), **kw)
    r["snapshot"] = F.freshness(table, "dbo.orders", **kw)["open_snapshot_lsn"]
    out[where] = r
try:
    F.finalized_until(P["s3"], "dbo.orders",
                      storage_options={**P["options"], "AWS_SECRET_KEY": P["options"]["AWS_SECRET_ACCESS_KEY"]})
    out["misspelt"] = None
except ValueError as e:
    out["misspelt"] = str(e)
try:
    F.finalized_until(P["s3"] + "-other", "dbo.orders")
    out["no_options"] = None
except Exception as e:
    out["no_options"] = type(e).__name__
print("RESULT " + json.dumps(out, default=str), flush=True)
"""


def test_control_table_on_s3_through_storage_options(workdir):
    with Moto() as moto:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MSSQL_CDC_LIBRARY")}
        env.update(MCDC_ROOT=ROOT, MCDC_PARAMS=json.dumps({
            "local": os.path.join(workdir, "control"), "s3": "s3://lake/control",
            "options": moto.options}))
        p = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env,
                           timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        out = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
        keys = [o["Key"] for o in moto.s3().list_objects_v2(Bucket="lake").get("Contents", [])]
    for where in ("local", "s3"):
        r = out[where]
        assert r["before"] is None
        assert r["advanced"] == r["after"] == "2026-03-01 10:00:00", r
        assert r["final_10"] is True and r["final_11"] is False
        assert r["snapshot"] is None
    assert any(k.startswith("control/_delta_log/") for k in keys), keys
    assert "AWS_SECRET_KEY" in out["misspelt"]
    assert moto.options["AWS_SECRET_ACCESS_KEY"] not in out["misspelt"]
    # without the store's options the table cannot be read (no environment is read)
    assert out["no_options"] is not None
