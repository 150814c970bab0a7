"""The package's Spark data sources (python/src/mssql_cdc/spark.py) on local
Spark (local[2], delta-spark), against the simulator, with the package as
the wheel `make python-wheel` builds, installed into a fresh virtual
environment (conftest's installed_wheel).

One checkpoint, three runs into one Delta bronze written by foreachBatch
(txnAppId/txnVersion, so a replayed batch is a no-op):
1. the reference (mssql-cdc-pyspark, its own `mssql_cdc`) reads the first
   workload with availableNow and maxCommitsPerBatch=2;
2. ours continues from that checkpoint over a second workload, as a stream
   with maxCommitsPerBatch=1 that is stopped after two batches;
3. ours again, restarted from the checkpoint with availableNow, to the end.
Bronze must then hold every row of the change table once; every end offset
in the checkpoint is the reference's {"lsn", "commit_ts"} with the
mapping's commit time; ours ended one commit per batch. Then
`spark.read.format("mssql_cdc_snapshot")` equals the table.

Each run is a Python process of its own (the reference and ours share the
import name `mssql_cdc`): Spark's Python workers run the interpreter that
has the package (PYSPARK_PYTHON).

Run: .venv/bin/python -m pytest tests/interop/test_spark_sources.py
"""
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from deltalake import DeltaTable

from conftest import PASSWORD, ROOT, start_sim
from test_snapshot import COLUMNS, insert, make_db, source_rows

pytest.importorskip("pyspark")
pytest.importorskip("delta")

SPARK = r"""
import json, os, sys, time
P = json.loads(os.environ["MCDC_PARAMS"])
sys.path.insert(0, P["bench"])
from benchlib import local_spark
spark = local_spark("mcdc-spark-sources")
import mssql_cdc
mssql_cdc.register(spark)
out = {"module": mssql_cdc.__file__}

def sink(df, batch_id):
    (df.write.format("delta").mode("append").option("txnAppId", "orders")
       .option("txnVersion", batch_id).save(P["bronze"]))

def start(options, **trigger):
    df = spark.readStream.format("mssql_cdc").options(**options).load()
    return (df.writeStream.foreachBatch(sink).option("checkpointLocation", P["ckpt"])
            .trigger(**trigger).start())

def finish(q):
    q.awaitTermination(300)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
"""

REFERENCE = r"""
finish(start({**P["options"], "backend": "mssql-python", "maxCommitsPerBatch": "2"},
             availableNow=True))
"""

OURS = r"""
# a stream stopped after two batches, then restarted from its checkpoint
q = start({**P["options"], "maxCommitsPerBatch": "1"}, processingTime="0 seconds")
deadline = time.time() + 120
while time.time() < deadline and len([p for p in q.recentProgress if p["numInputRows"]]) < 2:
    time.sleep(0.2)
out["stopped_after"] = len(q.recentProgress)
q.stop()
batches = lambda: len([n for n in os.listdir(os.path.join(P["ckpt"], "commits")) if n.isdigit()])
out["batches_at_stop"] = batches()
finish(start({**P["options"], "maxCommitsPerBatch": "1"}, availableNow=True))
out["batches_at_end"] = batches()
snap = spark.read.format("mssql_cdc_snapshot").options(**P["options"]).load()
out["snapshot_partitions"] = snap.rdd.getNumPartitions()
out["snapshot_types"] = {f.name: f.dataType.simpleString() for f in snap.schema.fields}
out["snapshot"] = [r.asDict() for r in snap.collect()]
keyed = (spark.read.format("mssql_cdc_snapshot").options(**P["options"])
         .option("numPartitions", "3").option("snapshotKeys", '["customer_id", "order_id"]').load())
out["keyed_partitions"] = keyed.rdd.getNumPartitions()
out["keyed"] = sorted(r["order_id"] for r in keyed.select("order_id").collect())
print("RESULT " + json.dumps(out, default=str), flush=True)
"""


def run_spark(python, code, timeout=400, **params):
    env = dict(os.environ, MCDC_PARAMS=json.dumps(params), PYSPARK_PYTHON=python,
               PYSPARK_DRIVER_PYTHON=python, TZ="UTC")
    env.pop("PYTHONPATH", None)
    work = params["work"]
    path = os.path.join(work, "run.py")
    with open(path, "w") as f:
        f.write(SPARK + code)
    started = time.monotonic()
    p = subprocess.run([python, path], cwd=work, capture_output=True, text=True, env=env,
                       timeout=timeout)
    print(f"{os.path.basename(python)} ran Spark for {time.monotonic() - started:.1f} s")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(lines[-1][7:]) if lines else None


def workload(sim, first, n_tx):
    for i in range(first, first + n_tx):
        insert(sim, i * 10, 3)
        sim.run(f"UPDATE dbo.orders SET status = N'upd-{i}' WHERE order_id = {i * 10};"
                f"DELETE FROM dbo.orders WHERE order_id = {i * 10 + 1};", database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


@pytest.fixture(scope="module")
def streamed(installed_wheel, tmp_path_factory):
    if shutil.which("java") is None:
        pytest.skip("no java on PATH (scripts/install-deps.sh installs openjdk-17-jre-headless)")
    pytest.importorskip("mssql_python")
    d = str(tmp_path_factory.mktemp("spark-sources"))
    sim = start_sim(d)
    try:
        make_db(sim)
        workload(sim, 1, 1)
        tls = (f"Server=127.0.0.1,{sim.port};Database=shop;UID=sa;PWD={PASSWORD};"
               "Encrypt=yes;TrustServerCertificate=yes")
        params = {"bench": os.path.join(ROOT, "bench"), "work": d, "bronze": os.path.join(d, "bronze"), "ckpt": os.path.join(d, "ckpt"),
                  "options": {"captureInstance": "dbo_orders", "connectionString": tls}}
        ref = run_spark(sys.executable, REFERENCE + 'print("RESULT " + json.dumps(out))',
                        **params)
        assert ref["module"].startswith(os.path.dirname(os.path.dirname(pytest.__file__)))
        ref_batches = sorted(offsets(params["ckpt"]))
        workload(sim, 3, 2)
        params["options"]["connectionString"] = sim.connection_string("shop")
        ours = run_spark(installed_wheel["python"], OURS, **params)
        mapping = dict(sim.run("SELECT CONVERT(varchar(22), start_lsn, 1), tran_end_time "
                               "FROM cdc.lsn_time_mapping ORDER BY start_lsn", database="shop"))
        change_rows = sim.run("SELECT CONVERT(varchar(22), __$start_lsn, 1), "
                              "CONVERT(varchar(22), __$seqval, 1), __$operation, order_id "
                              "FROM cdc.dbo_orders_CT", database="shop")
        yield {"dir": d, "ours": ours, "ref_batches": ref_batches, "mapping": mapping,
               "changes": [tuple(r) for r in change_rows], "table": source_rows(sim),
               "wheel": installed_wheel, **params}
    finally:
        sim.stop()


def offsets(ckpt):
    """Spark's offsets/<n>: 'v1', the batch's metadata, then the source's
    end offset as the JSON text it wrote."""
    out = {}
    for path in glob.glob(os.path.join(ckpt, "offsets", "[0-9]*")):
        with open(path) as f:
            out[int(os.path.basename(path))] = f.read().splitlines()[2]
    return out


def test_ours_ran_from_the_wheel_and_the_reference_from_its_package(streamed):
    assert streamed["ours"]["module"].startswith(streamed["wheel"]["purelib"])
    assert len(streamed["ref_batches"]) >= 2  # 3 commits, 2 per batch


def test_bronze_holds_every_change_once_across_both_packages_and_a_restart(streamed):
    rows = DeltaTable(streamed["bronze"]).to_pyarrow_table(
        columns=["_start_lsn", "_seqval", "_operation", "order_id"]).to_pylist()
    got = [(r["_start_lsn"], r["_seqval"], r["_operation"], r["order_id"]) for r in rows]
    dup = [k for k, n in collections.Counter(got).items() if n > 1]
    assert not dup, dup[:5]
    assert sorted(got) == sorted(streamed["changes"])
    assert streamed["ours"]["stopped_after"] >= 2
    # the restart read batches of its own
    assert streamed["ours"]["batches_at_end"] > streamed["ours"]["batches_at_stop"]


def test_offsets_are_the_references_json_with_the_mappings_commit_time(streamed):
    texts = offsets(streamed["ckpt"])
    ours = sorted(set(texts) - set(streamed["ref_batches"]))
    assert ours, texts
    mapping = streamed["mapping"]
    for batch, text in texts.items():
        offset = json.loads(text)
        assert list(offset) == ["lsn", "commit_ts"], text
        assert text == json.dumps(offset), text  # the bytes Spark wrote for a dict, both sides
        at = mapping[offset["lsn"]]
        assert offset["commit_ts"] == at.isoformat(timespec="milliseconds"), (batch, text)
    # maxCommitsPerBatch=1: each of our batches ends one commit after the one before
    lsns = sorted(mapping)
    ends = [json.loads(texts[b])["lsn"] for b in sorted(texts)]
    for before, end in zip(ends[len(streamed["ref_batches"]) - 1:], ends[len(streamed["ref_batches"]):]):
        assert lsns.index(end) == lsns.index(before) + 1, (before, end)


def test_the_snapshot_source_equals_the_table(streamed):
    snap = streamed["ours"]["snapshot"]
    got = sorted(tuple(r[c] for c in COLUMNS) for r in snap)
    want = sorted(tuple(str(v) if v is not None else None for v in row) for row in streamed["table"])
    assert [tuple(str(v) if v is not None else None for v in r) for r in got] == want
    assert {r["_operation"] for r in snap} == {0}
    assert len({r["_start_lsn"] for r in snap}) == 1
    assert streamed["ours"]["snapshot_types"]["_commit_ts"] == "timestamp_ntz"
    # stamped with max_lsn, recorded before the read; numPartitions 'auto': the session's 2 cores
    assert snap[0]["_start_lsn"] == max(streamed["mapping"])
    assert streamed["ours"]["snapshot_partitions"] == 2
    # cut on other keys, in 3 ranges: the same rows
    assert streamed["ours"]["keyed_partitions"] == 3
    assert streamed["ours"]["keyed"] == sorted(r[0] for r in streamed["table"])


READER_LOGIC = r"""
import json
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from mssql_cdc import spark as s

L = ["0x%020X" % n for n in range(10)]  # commits at L[1..9]

class FakePositions:
    max = L[9]
    def max_lsn(self): return self.max
    def nth_commit_after(self, lsn, n):
        i = L.index(lsn) + n
        return L[i] if i < len(L) else None
    def offset(self, lsn): return {"lsn": lsn, "commit_ts": "2026-01-01T00:00:0%d.000" % L.index(lsn)}
    cut = None  # a newer capture instance's start the schema cannot read
    def batch_end(self, start, end):  # as the library: cut when the batch spans both sides
        before = L[L.index(self.cut) - 1] if self.cut else None
        return before if before and start < before and self.cut <= end else end
    def close(self): pass

opts = {"captureInstance": "dbo_orders", "maxCommitsPerBatch": "3"}
r = s.MssqlCdcStreamReader(opts, None, 2)
r._positions = FakePositions()
out = {"limit": repr(r.getDefaultReadLimit())}
out["capped"] = r.latestOffset({"lsn": L[1]}, ReadMaxRows(3))["lsn"]
out["all"] = r.latestOffset({"lsn": L[1]}, ReadAllAvailable())["lsn"]
r.prepareForTriggerAvailableNow()
r._positions.max = L[9]
r._target = L[5]  # as if max_lsn was L[5] when the trigger started
ends, start = [], {"lsn": L[1]}
while True:
    end = r.latestOffset(start, ReadMaxRows(3))
    if end == start:
        break
    ends.append(end["lsn"])
    start = end
out["available_now"] = ends
out["no_partitions_when_equal"] = r.partitions({"lsn": L[4]}, {"lsn": L[4]})
out["pickled_without_connection"] = r.__getstate__()["_positions"] is None
# a batch ends just before such a start, then the next one begins there
r._target, r._positions.cut = None, L[7]
out["cut"] = [r.latestOffset({"lsn": L[5]}, ReadAllAvailable())["lsn"],
              r.latestOffset({"lsn": L[6]}, ReadAllAvailable())["lsn"]]
legacy = s.MssqlCdcLegacyStreamReader(opts, None, 2)
legacy._positions = FakePositions()
out["legacy"] = legacy.latestOffset()
out["json"] = json.dumps(legacy.latestOffset())
print("RESULT " + json.dumps(out))
"""


def test_admission_control_available_now_and_the_legacy_reader(installed_wheel):
    """The stream reader's offsets without Spark running: maxCommitsPerBatch
    as ReadMaxRows(n) commits, AvailableNow never past its target and ending
    on the start, and the 4.0/4.1 reader up to max_lsn."""
    path = os.path.join(installed_wheel["work"], "reader_logic.py")
    with open(path, "w") as f:
        f.write(READER_LOGIC)
    p = subprocess.run([installed_wheel["python"], path], cwd=installed_wheel["work"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    lsn = ["0x%020X" % n for n in range(10)]
    assert "ReadMaxRows" in r["limit"] and "3" in r["limit"]
    assert r["capped"] == lsn[4] and r["all"] == lsn[9]
    assert r["available_now"] == [lsn[4], lsn[5]]
    assert r["no_partitions_when_equal"] == []
    assert r["pickled_without_connection"]
    assert r["legacy"] == {"lsn": lsn[9], "commit_ts": "2026-01-01T00:00:09.000"}
    # the capture-instance cut: the batch ends before S, the next reads from S on
    assert r["cut"] == [lsn[6], lsn[9]]
    assert r["json"] == '{"lsn": "%s", "commit_ts": "2026-01-01T00:00:09.000"}' % lsn[9]
