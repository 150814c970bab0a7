"""The stream source on Spark before 4.2 (python/src/mssql_cdc/spark.py's
reader without admission control): PySpark 4.0 and 4.1, each in a virtual
environment of its own (`make deps-spark40` makes .venv-spark40 from
tests/requirements-spark40.txt, `make deps-spark41` .venv-spark41 from
tests/requirements-spark41.txt; `make soak` runs this file with both), the
package from the source tree and the library from build/.

One Spark process a version: the changes of a first workload read with
availableNow into Parquet files (Spark's file sink, its own log of
committed files), a second workload written to the simulator, the query
started again from its checkpoint, then the files read back: every row of
the change table once, none twice; the offsets in the checkpoint are the
reference's {"lsn", "commit_ts"}, the last one the change table's newest
commit. Where the environment has delta-spark (4.1's: delta-spark 4.4.0,
whose Spark 4.1 build Spark fetches from Maven Central as
io.delta:delta-spark_4.1_2.13), the same stream also goes through
``stream(spark, options).to_delta`` into a Delta bronze with facts, twice.

Run: .venv/bin/python -m pytest tests/interop/test_spark40.py
(MCDC_SPARK40_PYTHON / MCDC_SPARK41_PYTHON name another interpreter; a
version whose environment is missing is skipped, saying why).
"""
import collections
import glob
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, PASSWORD, ROOT, start_sim
from test_snapshot import make_db
from test_spark_sources import workload

# version: (the variable naming its Python, the default environment, make's target)
VERSIONS = {"4.0": ("MCDC_SPARK40_PYTHON", ".venv-spark40", "deps-spark40"),
            "4.1": ("MCDC_SPARK41_PYTHON", ".venv-spark41", "deps-spark41")}


def python_of(version):
    var, venv, _ = VERSIONS[version]
    return os.environ.get(var, os.path.join(ROOT, venv, "bin", "python"))

RUN = r"""
import json, os, sys, time
P = json.loads(os.environ["MCDC_PARAMS"])
os.environ["TZ"] = "UTC"
time.tzset()
import pymssql
import pyspark
from pyspark.sql import SparkSession
builder = (SparkSession.builder.master("local[2]").appName("mcdc-spark-legacy")
           .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
           .config("spark.sql.session.timeZone", "UTC")
           .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
           .config("spark.sql.shuffle.partitions", "2"))
try:
    from delta import configure_spark_with_delta_pip
except ImportError:
    configure_spark_with_delta_pip = None
if configure_spark_with_delta_pip is not None:
    builder = configure_spark_with_delta_pip(
        builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog",
                "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
import mssql_cdc
from mssql_cdc import spark as source
mssql_cdc.register(spark)
out = {"spark": pyspark.__version__, "module": mssql_cdc.__file__,
       "admission_control": source.HAS_ADMISSION_CONTROL,
       "delta": configure_spark_with_delta_pip is not None}

def to_delta():
    # the reference's streaming API: bronze and facts through delta-spark
    q = mssql_cdc.stream(spark, P["options"]).to_delta(
        P["bronze"], "legacy-app", P["ckpt"] + "-delta", P["facts"],
        trigger={"availableNow": True})
    q.awaitTermination(300)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))

def run():
    df = spark.readStream.format("mssql_cdc").options(**P["options"]).load()
    q = (df.writeStream.format("parquet").option("path", P["out"])
         .option("checkpointLocation", P["ckpt"]).trigger(availableNow=True).start())
    q.awaitTermination(300)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return sum(p["numInputRows"] for p in q.recentProgress)

out["first_rows"] = run()
if out["delta"]:
    to_delta()
conn = pymssql.connect(**P["db"], autocommit=True, tds_version="7.4")
for sql in P["second"]:
    conn.cursor().execute(sql)
conn.close()
out["second_rows"] = run()
if out["delta"]:
    to_delta()
    bronze = spark.read.format("delta").load(P["bronze"])
    out["bronze"] = [list(r) for r in bronze.select("_start_lsn", "_seqval", "_operation",
                                                    "order_id").collect()]
    out["facts"] = [r.asDict() for r in spark.read.format("delta").load(P["facts"])
                    .select("app_id", "batch_id", "rows", "event").collect()]
rows = spark.read.parquet(P["out"]).select("_start_lsn", "_seqval", "_operation", "order_id")
out["rows"] = [list(r) for r in rows.collect()]
print("RESULT " + json.dumps(out, default=str), flush=True)
"""


def sql_of(first, n_tx):
    """The statements test_spark_sources.workload sends, as text, so the
    Spark process sends them itself between its two runs."""
    sent = []

    class Recorder:
        def run(self, sql, database="master"):
            sent.append(sql)
    workload(Recorder(), first, n_tx)
    return sent


@pytest.fixture(scope="module", params=sorted(VERSIONS))
def legacy(request, tmp_path_factory):
    version = request.param
    python = python_of(version)
    if not os.path.exists(python):
        pytest.skip(f"no Spark {version} environment at {python} (make {VERSIONS[version][2]}; "
                    "make soak runs it)")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH (scripts/install-deps.sh installs openjdk-17-jre-headless)")
    d = str(tmp_path_factory.mktemp("spark" + version.replace(".", "")))
    sim = start_sim(d)
    try:
        make_db(sim)
        workload(sim, 1, 2)
        params = {"options": {"captureInstance": "dbo_orders",
                              "connectionString": sim.connection_string("shop")},
                  "db": {"server": "127.0.0.1", "port": str(sim.port), "user": "sa",
                         "password": PASSWORD, "database": "shop"},
                  "second": sql_of(3, 3), "out": os.path.join(d, "out"),
                  "ckpt": os.path.join(d, "ckpt"), "bronze": os.path.join(d, "bronze"),
                  "facts": os.path.join(d, "facts")}
        env = dict(os.environ, MCDC_PARAMS=json.dumps(params), PYSPARK_PYTHON=python,
                   PYSPARK_DRIVER_PYTHON=python, TZ="UTC",
                   PYTHONPATH=os.path.join(ROOT, "python", "src"),
                   MSSQL_CDC_LIBRARY=os.path.join(BUILD, "libmssqlcdc.so"))
        path = os.path.join(d, "run.py")
        with open(path, "w") as f:
            f.write(RUN)
        started = time.monotonic()
        p = subprocess.run([python, path], cwd=d, capture_output=True, text=True, env=env,
                           timeout=900)
        print(f"Spark {version} ran for {time.monotonic() - started:.1f} s")
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
        result = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
        changes = sim.run("SELECT CONVERT(varchar(22), __$start_lsn, 1), "
                          "CONVERT(varchar(22), __$seqval, 1), __$operation, order_id "
                          "FROM cdc.dbo_orders_CT", database="shop")
        newest = sim.run("SELECT CONVERT(varchar(22), MAX(start_lsn), 1) "
                         "FROM cdc.lsn_time_mapping", database="shop")[0][0]
        yield {"version": version, "result": result, "changes": [tuple(r) for r in changes],
               "newest": newest, "ckpt": params["ckpt"]}
    finally:
        sim.stop()


def test_it_ran_on_its_spark_with_the_reader_without_admission_control(legacy):
    r = legacy["result"]
    assert r["spark"].startswith(legacy["version"] + "."), r["spark"]
    assert r["admission_control"] is False
    assert r["module"].startswith(os.path.join(ROOT, "python", "src"))


def test_every_change_once_across_a_restart_from_the_checkpoint(legacy):
    r = legacy["result"]
    got = [tuple(row) for row in r["rows"]]
    doubled = [k for k, n in collections.Counter(got).items() if n > 1]
    assert not doubled, doubled[:5]
    assert sorted(got) == sorted(legacy["changes"])
    # both runs read rows: the first the first workload, the restart the second
    assert r["first_rows"] > 0 and r["second_rows"] > 0
    assert r["first_rows"] + r["second_rows"] == len(legacy["changes"])


def test_the_checkpoints_offsets_are_the_references_ending_at_the_newest_commit(legacy):
    ends = {}
    for path in glob.glob(os.path.join(legacy["ckpt"], "offsets", "[0-9]*")):
        with open(path) as f:
            ends[int(os.path.basename(path))] = json.loads(f.read().splitlines()[2])
    assert ends, "no offsets in the checkpoint"
    for end in ends.values():
        assert set(end) == {"lsn", "commit_ts"}, end
    assert ends[max(ends)]["lsn"] == legacy["newest"]


def test_to_delta_through_delta_spark_writes_every_change_once_with_facts(legacy):
    r = legacy["result"]
    if not r["delta"]:
        pytest.skip(f"no delta-spark in the Spark {legacy['version']} environment")
    got = [tuple(row) for row in r["bronze"]]
    assert sorted(got) == sorted(legacy["changes"])  # both runs, none twice
    batches = [f for f in r["facts"] if f["app_id"] == "legacy-app" and f["event"] is None]
    assert len(batches) >= 2  # one per run at least
    assert sum(f["rows"] for f in batches) == len(got)
