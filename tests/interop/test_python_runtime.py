"""mssql_cdc.Runtime (python/src/mssql_cdc/_core.py): jobs of one Python
process sharing one runtime, as `mssql-cdc serve` runs them.

Two streams of one capture instance run on threads in one runtime: one into
a local bronze, the other into a bronze on moto's S3 whose storage options
only the runtime holds. Each stream's first batch waits for the other's, so
that the registry is read while both run (state "running", their first
batch's figures; closing the runtime then is refused); after they return it
holds their last figures (state "done", the rows and the end each stream
returned), and those of a stream that failed (its error counted). The
runtime's accounting saw their allocations. A second close does nothing; a
closed runtime is refused before a job starts, and writes nothing.

The package from the source tree (python/src, the repo's build/
libmssqlcdc), in a Python process of its own (.venv holds the reference's
`mssql_cdc`).

Run: .venv/bin/python -m pytest tests/interop/test_python_runtime.py
"""
import json
import os
import subprocess
import sys

import pytest
from deltalake import DeltaTable

import objstore
from conftest import ROOT
from test_snapshot import make_db

CODE = r"""
import json, os, sys, threading
sys.path.insert(0, os.path.join(os.environ["MCDC_ROOT"], "python", "src"))
import mssql_cdc
P = json.loads(os.environ["MCDC_PARAMS"])
d = P["dir"]
OPTS = {"captureInstance": "dbo_orders", "connectionString": P["connstr"],
        "maxCommitsPerBatch": 2}
out = {"during": [], "close_while_running": None, "results": {}, "errors": []}
both = threading.Barrier(2, timeout=60)
rt = mssql_cdc.Runtime(connections_max=6, storage_options={"s3": P["s3_options"]})


def on_batch(name):
    first = [True]
    def seen(batch):
        if not first[0]:
            return
        first[0] = False
        both.wait()  # both streams have committed a batch and neither has returned
        out["during"].append(rt.metrics())
        if name == "local":
            try:
                rt.close()
            except RuntimeError as e:
                out["close_while_running"] = str(e)
        both.wait()
    return seen


def run(name, target):
    try:
        out["results"][name] = mssql_cdc.stream(
            OPTS, target, f"orders-{name}", f"{d}/ckpt-{name}", trigger="availableNow",
            query_name=f"orders-{name}", on_batch=on_batch(name), runtime=rt)
    except BaseException as e:
        out["errors"].append(f"{name}: {type(e).__name__}: {e}")
        both.abort()


threads = [threading.Thread(target=run, args=("local", f"{d}/bronze")),
           threading.Thread(target=run, args=("s3", P["s3_bronze"]))]
for t in threads:
    t.start()
for t in threads:
    t.join()
try:
    mssql_cdc.stream({**OPTS, "captureInstance": "dbo_nothing"}, f"{d}/never", "orders-none",
                     f"{d}/ckpt-none", trigger="availableNow", runtime=rt)
except mssql_cdc.MssqlCdcError as e:
    out["missing"] = [type(e).__name__, e.status]
out["after"] = rt.metrics()
out["stats"] = rt.stats()
rt.close()
rt.close()
out["closed"] = rt.closed
for what, call in (("metrics", rt.metrics),
                   ("stream", lambda: mssql_cdc.stream(OPTS, f"{d}/late", "late", f"{d}/ckpt-late",
                                                       trigger="once", runtime=rt)),
                   ("snapshot", lambda: mssql_cdc.snapshot(OPTS, f"{d}/late", runtime=rt)),
                   ("not_a_runtime", lambda: mssql_cdc.snapshot(OPTS, f"{d}/late", runtime="rt"))):
    try:
        call()
        out[what] = None
    except (ValueError, TypeError) as e:
        out[what] = [type(e).__name__, str(e)]
print("RESULT " + json.dumps(out, default=str), flush=True)
"""


@pytest.fixture
def moto():
    m = objstore.Moto().start()
    yield m
    m.stop()


def test_two_streams_share_a_runtime_and_its_metrics(sim, workdir, moto):
    make_db(sim, before_cdc=10)
    for i in range(3):  # three commits after the snapshot: batches of at most two
        sim.run(f"INSERT INTO dbo.orders (order_id, customer_id, status, amount, created_at) "
                f"VALUES ({1000 + i}, 1, N'new', 1.5, '2025-03-01 08:00:00');"
                f"UPDATE dbo.orders SET status = N'u{i}' WHERE order_id = {5 + i};",
                database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "MSSQL_CDC_LIBRARY") and not k.startswith(("AWS_", "AZURE_"))}
    env.update(MCDC_ROOT=ROOT, MCDC_PARAMS=json.dumps({
        "dir": workdir, "connstr": sim.connection_string("shop"),
        "s3_bronze": "s3://lake/bronze", "s3_options": moto.options}))
    p = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env,
                       timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    out = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert out["errors"] == [], out["errors"]
    results = out["results"]
    assert set(results) == {"local", "s3"}

    # read while both ran: each read lists both streams, running, with a batch committed
    assert len(out["during"]) == 2
    for reading in out["during"]:
        by_name = {m["name"]: m for m in reading}
        assert set(by_name) == {"orders-local", "orders-s3"}, reading
        for m in by_name.values():
            assert m["job"] == "stream" and m["state"] == "running" and m["runs"] == 1, m
            assert m["batches"] >= 1 and m["end_lsn"].startswith("0x"), m
            assert m["last_batch_seconds"] is not None and m["errors"] == {}, m
        assert sorted(m["id"] for m in reading) == [1, 2]
    assert "2 job(s) still run" in (out["close_while_running"] or ""), out

    # after: each stream's last figures are its result's
    after = {m["name"]: m for m in out["after"]}
    assert set(after) == {"orders-local", "orders-s3", "orders-none"}, out["after"]
    for name in ("local", "s3"):
        m, r = after[f"orders-{name}"], results[name]
        assert m["state"] == "done" and m["last_status"] is None and m["last_error"] is None, m
        assert r["batches"] >= 2 and (m["batches"], m["rows"]) == (r["batches"], r["rows"]), (m, r)
        assert m["end_lsn"] == r["end_offset"]["lsn"], (m, r)
        assert m["end_commit_ts"] == r["end_offset"]["commit_ts"], (m, r)
    assert results["local"]["rows"] == results["s3"]["rows"] > 0
    failed = after["orders-none"]
    assert out["missing"][1] == "not found", out["missing"]
    assert failed["state"] == "failed" and failed["errors"] == {"not found": 1}, failed
    assert failed["last_status"] == "not found" and "dbo_nothing" in failed["last_error"], failed
    assert [m["id"] for m in out["after"]] == [1, 2, 3]
    stats = out["stats"]
    assert stats["alloc_calls"] > 0 and stats["peak_bytes"] > 0 and stats["live_bytes"] >= 0

    # the bronze on S3 was written with the runtime's storage options alone, and equals the
    # local one
    def rows(table, **kw):
        return sorted((r["_start_lsn"], r["_seqval"], r["_operation"], r["order_id"])
                      for r in DeltaTable(table, **kw).to_pyarrow_table().to_pylist())
    local = rows(os.path.join(workdir, "bronze"))
    assert len(local) == 9  # 3 inserts and 3 updates (2 rows each)
    assert results["local"]["rows"] == 9
    assert rows("s3://lake/bronze", storage_options=moto.options) == local

    # closed: twice is harmless, then every use is refused before a job starts
    assert out["closed"] is True
    for what in ("metrics", "stream", "snapshot"):
        assert out[what] == ["ValueError", "mssql_cdc.Runtime: this runtime is closed; "
                                           "create another one"], (what, out[what])
    assert out["not_a_runtime"][0] == "TypeError" and "mssql_cdc.Runtime" in out["not_a_runtime"][1]
    assert not os.path.exists(os.path.join(workdir, "late"))
    assert not os.path.exists(os.path.join(workdir, "ckpt-late"))
