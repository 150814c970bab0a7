"""Spark reads our tables on S3 through s3a (issue 23): bronze and silver
written by the CLI on s3:// (moto, signatures checked) and read by Delta
Spark's reader at s3a:// (hadoop-aws from Maven Central, the version of the
hadoop client pyspark ships, path-style requests to moto's endpoint) equal
the same commands' tables on local disk.

Spark runs in a process of its own: hadoop-aws has to be on the JVM's class
path from its start, and this pytest process may already hold a JVM of
another test's session. scripts/install-deps.sh fetches the jars ahead."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import CLI
from test_objstore_e2e import CAPTURE, TABLE

objstore = pytest.importorskip("objstore")



def hadoop_aws_package():
    """org.apache.hadoop:hadoop-aws at the version of pyspark's hadoop client."""
    import pyspark
    jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars",
                                  "hadoop-client-api-*.jar"))
    if not jars:
        pytest.skip("pyspark ships no hadoop-client-api jar")
    version = re.search(r"hadoop-client-api-(.+)\.jar$", jars[0]).group(1)
    return "org.apache.hadoop:hadoop-aws:" + version


# Reads each table named on the command line with Delta Spark at s3a://
# (moto, path style) and prints {name: [[id, v, note, ...], ...]}.
READER = r"""
import json, sys
from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession
endpoint, key_id, package, root = sys.argv[1:5]
secret = sys.stdin.readline().strip()  # not on the command line
b = (SparkSession.builder.master("local[1]").appName("mcdc-s3a")
     .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
     .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
     .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
     .config("spark.sql.shuffle.partitions", "1").config("spark.driver.memory", "512m")
     # tiny tables: planning and compiling cost more than running
     .config("spark.sql.adaptive.enabled", "false")
     .config("spark.sql.codegen.wholeStage", "false")
     .config("spark.databricks.delta.snapshotPartitions", "1")
     .config("spark.hadoop.fs.s3a.endpoint", endpoint)
     .config("spark.hadoop.fs.s3a.endpoint.region", "us-east-1")
     .config("spark.hadoop.fs.s3a.path.style.access", "true")
     .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
     .config("spark.hadoop.fs.s3a.aws.credentials.provider",
             "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
     .config("spark.hadoop.fs.s3a.access.key", key_id)
     .config("spark.hadoop.fs.s3a.secret.key", secret)
     .config("spark.hadoop.fs.s3a.attempts.maximum", "2")
     .config("spark.hadoop.fs.s3a.retry.limit", "2"))
s = configure_spark_with_delta_pip(b, extra_packages=[package]).getOrCreate()
s.sparkContext.setLogLevel("ERROR")
out = {}
for name in sys.argv[5:]:
    df = s.read.format("delta").load(root + "/" + name)
    cols = ["id", "v", "note"] + (["_operation"] if name == "bronze" else [])
    out[name] = sorted([list(r) for r in df.select(*cols).collect()], key=repr)
print("ROWS " + json.dumps(out, default=str))
s.stop()
"""


def test_spark_reads_bronze_and_silver_on_s3a_equal_to_local(sim, workdir):
    if shutil.which("java") is None:
        pytest.skip("no java on PATH (scripts/install-deps.sh installs openjdk-17-jre-headless)")
    from deltalake import DeltaTable

    sim.run("CREATE DATABASE shop;")
    sim.run(TABLE + "INSERT INTO dbo.t VALUES (1, 10, N'a'), (2, 20, N'b'), (3, 30, NULL);" +
            CAPTURE, database="shop")
    sim.run("UPDATE dbo.t SET v = 11 WHERE id = 1; DELETE FROM dbo.t WHERE id = 2;"
            "INSERT INTO dbo.t VALUES (4, 40, N'd');" + CAPTURE, database="shop")
    with objstore.Moto() as moto:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
        env.update(moto.options)
        env["HOME"] = workdir
        src = ["--captureInstance", "dbo_t", "--connectionString", sim.connection_string("shop")]
        local = os.path.join(workdir, "local")
        for root in ("s3://lake/sp", local):
            for args in (["stream", "--target", f"{root}/bronze", "--app-id", "t-v1",
                          "--checkpoint", f"{root}/ckpt", "--facts-table", f"{root}/facts",
                          "--control-table", f"{root}/control", "--trigger", "availableNow"],
                         ["apply", "--bronze", f"{root}/bronze", "--target", f"{root}/silver",
                          "--control-table", f"{root}/control", "--facts-table",
                          f"{root}/facts"]):
                p = subprocess.run([CLI, args[0], *src, *args[1:]], capture_output=True,
                                   text=True, env=env, cwd=workdir, timeout=180)
                assert p.returncode == 0, (args[0], p.stderr[-3000:])
        renv = dict(os.environ, PYSPARK_PYTHON=sys.executable, TZ="UTC")
        p = subprocess.run([sys.executable, "-c", READER, moto.endpoint, moto.key_id,
                            hadoop_aws_package(), "s3a://lake/sp", "bronze", "silver"],
                           input=moto.secret + "\n", capture_output=True, text=True, env=renv,
                           timeout=600)
        assert p.returncode == 0 and "ROWS " in p.stdout, p.stderr[-4000:]
        got = json.loads(p.stdout.split("ROWS ", 1)[1].splitlines()[0])
    want = {}
    for name in ("bronze", "silver"):
        t = DeltaTable(f"{local}/{name}").to_pyarrow_table()
        cols = ["id", "v", "note"] + (["_operation"] if name == "bronze" else [])
        want[name] = sorted([[json.loads(json.dumps(d[c], default=str)) for c in cols]
                             for d in t.select(cols).to_pylist()], key=repr)
    assert got["silver"] == want["silver"] == [[1, 11, "a"], [3, 30, None], [4, 40, "d"]]
    assert got["bronze"] == want["bronze"] and len(got["bronze"]) >= 6, (got, want)
