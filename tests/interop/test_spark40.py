"""The stream source on Spark 4.0 (python/src/mssql_cdc/spark.py's reader
for Spark before 4.2, which has no admission control): Spark 4.0 in a
virtual environment of its own (`make deps-spark40` makes .venv-spark40;
`make soak` runs this file with it), the package from the source tree and
the library from build/.

One Spark process: the changes of a first workload read with availableNow
into Parquet files (Spark's file sink, its own log of committed files), a
second workload written to the simulator, the query started again from its
checkpoint, then the files read back: every row of the change table once,
none twice; the offsets in the checkpoint are the reference's
{"lsn", "commit_ts"}, the last one the change table's newest commit.

Run: MCDC_SPARK40_PYTHON=.venv-spark40/bin/python .venv/bin/python -m pytest
tests/interop/test_spark40.py (unset, and no .venv-spark40: skipped, saying why).
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

PYTHON = os.environ.get("MCDC_SPARK40_PYTHON",
                        os.path.join(ROOT, ".venv-spark40", "bin", "python"))

RUN = r"""
import json, os, sys, time
P = json.loads(os.environ["MCDC_PARAMS"])
os.environ["TZ"] = "UTC"
time.tzset()
import pymssql
import pyspark
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").appName("mcdc-spark40")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
import mssql_cdc
from mssql_cdc import spark as source
mssql_cdc.register(spark)
out = {"spark": pyspark.__version__, "module": mssql_cdc.__file__,
       "admission_control": source.HAS_ADMISSION_CONTROL}

def run():
    df = spark.readStream.format("mssql_cdc").options(**P["options"]).load()
    q = (df.writeStream.format("parquet").option("path", P["out"])
         .option("checkpointLocation", P["ckpt"]).trigger(availableNow=True).start())
    q.awaitTermination(300)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return sum(p["numInputRows"] for p in q.recentProgress)

out["first_rows"] = run()
conn = pymssql.connect(**P["db"], autocommit=True, tds_version="7.4")
for sql in P["second"]:
    conn.cursor().execute(sql)
conn.close()
out["second_rows"] = run()
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


@pytest.fixture(scope="module")
def spark40(tmp_path_factory):
    if not os.path.exists(PYTHON):
        pytest.skip(f"no Spark 4.0 environment at {PYTHON} (make deps-spark40; make soak runs it)")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH (scripts/install-deps.sh installs openjdk-17-jre-headless)")
    d = str(tmp_path_factory.mktemp("spark40"))
    sim = start_sim(d)
    try:
        make_db(sim)
        workload(sim, 1, 2)
        params = {"options": {"captureInstance": "dbo_orders",
                              "connectionString": sim.connection_string("shop")},
                  "db": {"server": "127.0.0.1", "port": str(sim.port), "user": "sa",
                         "password": PASSWORD, "database": "shop"},
                  "second": sql_of(3, 3), "out": os.path.join(d, "out"),
                  "ckpt": os.path.join(d, "ckpt")}
        env = dict(os.environ, MCDC_PARAMS=json.dumps(params), PYSPARK_PYTHON=PYTHON,
                   PYSPARK_DRIVER_PYTHON=PYTHON, TZ="UTC",
                   PYTHONPATH=os.path.join(ROOT, "python", "src"),
                   MSSQL_CDC_LIBRARY=os.path.join(BUILD, "libmssqlcdc.so"))
        path = os.path.join(d, "run.py")
        with open(path, "w") as f:
            f.write(RUN)
        started = time.monotonic()
        p = subprocess.run([PYTHON, path], cwd=d, capture_output=True, text=True, env=env,
                           timeout=600)
        print(f"Spark 4.0 ran for {time.monotonic() - started:.1f} s")
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
        result = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
        changes = sim.run("SELECT CONVERT(varchar(22), __$start_lsn, 1), "
                          "CONVERT(varchar(22), __$seqval, 1), __$operation, order_id "
                          "FROM cdc.dbo_orders_CT", database="shop")
        newest = sim.run("SELECT CONVERT(varchar(22), MAX(start_lsn), 1) "
                         "FROM cdc.lsn_time_mapping", database="shop")[0][0]
        yield {"result": result, "changes": [tuple(r) for r in changes], "newest": newest,
               "ckpt": params["ckpt"]}
    finally:
        sim.stop()


def test_it_ran_on_spark_40_with_the_reader_without_admission_control(spark40):
    r = spark40["result"]
    assert r["spark"].startswith("4.0."), r["spark"]
    assert r["admission_control"] is False
    assert r["module"].startswith(os.path.join(ROOT, "python", "src"))


def test_every_change_once_across_a_restart_from_the_checkpoint(spark40):
    r = spark40["result"]
    got = [tuple(row) for row in r["rows"]]
    doubled = [k for k, n in collections.Counter(got).items() if n > 1]
    assert not doubled, doubled[:5]
    assert sorted(got) == sorted(spark40["changes"])
    # both runs read rows: the first the first workload, the restart the second
    assert r["first_rows"] > 0 and r["second_rows"] > 0
    assert r["first_rows"] + r["second_rows"] == len(spark40["changes"])


def test_the_checkpoints_offsets_are_the_references_ending_at_the_newest_commit(spark40):
    ends = {}
    for path in glob.glob(os.path.join(spark40["ckpt"], "offsets", "[0-9]*")):
        with open(path) as f:
            ends[int(os.path.basename(path))] = json.loads(f.read().splitlines()[2])
    assert ends, "no offsets in the checkpoint"
    for end in ends.values():
        assert set(end) == {"lsn", "commit_ts"}, end
    assert ends[max(ends)]["lsn"] == spark40["newest"]
