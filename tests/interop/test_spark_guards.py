"""The Spark stream source's planning on the driver (python/src/mssql_cdc/
spark.py, the library's mcdc_source_plan_batch): a purge past the offset,
a DDL inside a batch and a switch to a newer capture instance, each seen
by the driver's methods before anything is read, as the reference's
(failOnDataLoss, SchemaChangedError, the capture-instance cut).

The reader's methods run as Spark's driver-side worker calls them
(initialOffset, latestOffset, partitions) and read() as an executor task
does, in one Python process without a JVM: the package from the source
tree (python/src, the repo's build/libmssqlcdc), which comes before the
reference's `mssql_cdc` in .venv on sys.path.

Run: .venv/bin/python -m pytest tests/interop/test_spark_guards.py
"""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from test_resnapshot import purge
from test_snapshot import insert, make_db

pytest.importorskip("pyspark")

PRELUDE = r"""
import json, logging, os, sys
sys.path.insert(0, os.path.join(os.environ["MCDC_ROOT"], "python", "src"))
import mssql_cdc
from mssql_cdc import spark as S
from mssql_cdc.errors import DataLossError, SchemaChangedError
from pyspark.sql.streaming.datasource import ReadAllAvailable
logging.basicConfig(level=logging.WARNING, format="LOG %(message)s")
P = json.loads(os.environ["MCDC_PARAMS"])
OPTS = {"captureInstance": "dbo_orders", "connectionString": P["connstr"], **P.get("extra", {})}
out = {"module": mssql_cdc.__file__}

def reader(**extra):
    options = {**OPTS, **extra}
    schema = S.MssqlCdcDataSource(options).schema()
    return S.MssqlCdcStreamReader(options, schema, 2)

def rows(r, parts):
    got = []
    for p in parts:
        for b in r.read(p):
            got += b.to_pylist()
    return got

def fails(fn, *args):
    try:
        fn(*args)
    except (DataLossError, SchemaChangedError) as e:
        return [type(e).__name__, str(e)]
    return None

def emit():
    print("RESULT " + json.dumps(out, default=str), flush=True)
"""


def run_py(code, timeout=120, **params):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MSSQL_CDC_LIBRARY")}
    env.update(MCDC_PARAMS=json.dumps(params), MCDC_ROOT=ROOT, TZ="UTC")
    p = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True,
                       env=env, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1:]
    return json.loads(line[7:]), p.stderr


def run_across(code, between, timeout=120, **params):
    """Runs code, which prints READY and waits for a line on stdin at the
    point a running query would meet what between() does to the source;
    the line is what between() returns ("go" for None)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MSSQL_CDC_LIBRARY")}
    env.update(MCDC_PARAMS=json.dumps(params), MCDC_ROOT=ROOT, TZ="UTC")
    p = subprocess.Popen([sys.executable, "-c", PRELUDE + code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "READY", p.stderr.read()
        extra = between()
        stdout, err = p.communicate(f"{extra or 'go'}\n", timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stdout[-3000:] + err[-6000:]
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")][-1:]
    return json.loads(line[7:]), err, extra


def capture(sim):
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def change_rows(sim, ci="dbo_orders"):
    got = sim.run(f"SELECT CONVERT(varchar(22), __$start_lsn, 1), __$operation, order_id "
                  f"FROM cdc.[{ci}_CT]", database="shop")
    return sorted(tuple(r) for r in got)


def scalar(sim, sql):
    return sim.run(sql, database="shop")[0][0]


def max_lsn(sim):
    return scalar(sim, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)")


def test_a_purge_past_the_offset_is_data_loss_on_the_driver_or_a_logged_skip(sim):
    make_db(sim)
    insert(sim, 1, 20)
    capture(sim)
    start = max_lsn(sim)
    insert(sim, 100, 20)
    capture(sim)
    purge(sim)  # every change so far: those after `start` too
    insert(sim, 200, 5)
    capture(sim)
    want = [r for r in change_rows(sim) if r[0] > start]
    low = scalar(sim, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_orders'), 1)")
    # cleanup passed the offset: changes right after it are gone
    assert want and low > start and all(r[0] >= low for r in want)
    assert any(r[2] < 100 for r in change_rows(sim)) is False
    out, err = run_py(r"""
start = {"lsn": P["start"], "commit_ts": ""}
r = reader()
end = r.latestOffset(start, ReadAllAvailable())
out["end"] = end
out["strict"] = fails(r.partitions, start, end)
lenient = reader(failOnDataLoss="false")
parts = lenient.partitions(start, end)
out["skipped"] = sorted((x["_start_lsn"], x["_operation"], x["order_id"]) for x in rows(lenient, parts))
emit()
""", connstr=sim.connection_string("shop"), start=start)
    assert out["end"]["lsn"] == max_lsn(sim)
    kind, message = out["strict"]
    assert kind == "DataLossError", message
    assert "is gone" in message and "failOnDataLoss=false" in message, message
    # failOnDataLoss=false: from what cleanup left, and a warning says what was skipped
    assert [tuple(x) for x in out["skipped"]] == want
    assert "data_skipped" in err and "failOnDataLoss=false skips it" in err, err
    # the library's warning outside a job went to the "mssql_cdc" logger
    # (mcdc_log_to_thread), not to the library's own stderr line
    assert "LOG capture instance dbo_orders: change data from" in err, err
    assert "mssql-cdc: warning:" not in err, err


def test_ddl_the_schema_cannot_hold_fails_the_batch_before_any_read(sim):
    make_db(sim)
    insert(sim, 1, 10)
    capture(sim)
    start = max_lsn(sim)

    def alter():
        insert(sim, 100, 5)
        capture(sim)
        before = max_lsn(sim)
        sim.run("ALTER TABLE dbo.orders ALTER COLUMN customer_id BIGINT NULL;", database="shop")
        insert(sim, 200, 5)
        capture(sim)
        return before

    # a running query, loaded and planning before the DDL
    out, err, before = run_across(r"""
start = {"lsn": P["start"], "commit_ts": ""}
r = reader()
r.latestOffset(start, ReadAllAvailable())
out["types"] = {f.name: f.dataType.simpleString() for f in r.schema.fields}
print("READY", flush=True)
before = {"lsn": sys.stdin.readline().strip(), "commit_ts": ""}
end = r.latestOffset(start, ReadAllAvailable())
out["ddl"] = fails(r.partitions, start, end)
# before the DDL too: the change table holds the new type in every row
out["before"] = fails(r.partitions, start, before)
emit()
""", alter, connstr=sim.connection_string("shop"), start=start)
    assert out["types"]["customer_id"] == "int"
    kind, message = out["ddl"]
    assert kind == "SchemaChangedError", message
    assert "customer_id" in message and "bigint" in message, message
    kind, message = out["before"]
    assert kind == "SchemaChangedError" and "every row" in message, message


def enable_v2(sim):
    """A newer capture instance of dbo.orders, once capture has taken it up
    (its start LSN S)."""
    sim.run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
            "@role_name = NULL, @capture_instance = N'dbo_orders_v2';", database="shop")
    deadline = time.monotonic() + 20
    while True:
        capture(sim)
        s = scalar(sim, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_orders_v2'), 1)")
        if s != "0x" + "0" * 20:
            return s
        assert time.monotonic() < deadline, "capture never took up the new instance"
        time.sleep(0.05)


def test_a_newer_capture_instance_is_followed_or_cut_before_as_the_stream_does(sim):
    make_db(sim)
    insert(sim, 1, 10)
    capture(sim)
    start = max_lsn(sim)

    def switch():
        insert(sim, 100, 5)
        sim.run("ALTER TABLE dbo.orders ADD region NVARCHAR(20) NULL;", database="shop")
        s = enable_v2(sim)
        sim.run("INSERT INTO dbo.orders (order_id, customer_id, status, amount, region) VALUES "
                "(300, 1, N'x', 1.5, N'north'), (301, 2, N'y', 2.5, NULL);", database="shop")
        capture(sim)
        return s

    # a running query: loaded, and its driver planning, before the switch
    out, err, s = run_across(r"""
start = {"lsn": P["start"], "commit_ts": ""}
old = reader()
old.latestOffset(start, ReadAllAvailable())
out["loaded"] = old.schema.fieldNames()
print("READY", flush=True)
sys.stdin.readline()
end = old.latestOffset(start, ReadAllAvailable())
out["cut_end"] = end["lsn"]
got = rows(old, old.partitions(start, end))
out["cut_rows"] = sorted((x["_start_lsn"], x["_operation"], x["order_id"]) for x in got)
nxt = old.latestOffset(end, ReadAllAvailable())
out["next"] = fails(old.partitions, end, nxt)
# the same query's schema on a driver that starts after the switch
late = S.MssqlCdcStreamReader(dict(OPTS), old.schema, 2)
out["late"] = fails(late.partitions, start, late.latestOffset(start, ReadAllAvailable()))
# restarted, the query infers the union and reads both instances in one batch
r = reader()
out["fields"] = r.schema.fieldNames()
end = r.latestOffset(start, ReadAllAvailable())
got = rows(r, r.partitions(start, end))
out["rows"] = sorted((x["_start_lsn"], x["_operation"], x["order_id"]) for x in got)
out["regions"] = {str(x["order_id"]): x["region"] for x in got if x["order_id"] >= 300}
out["old_regions"] = sorted({str(x["region"]) for x in got if x["order_id"] < 300})
# the snapshot source reads the table as its configured instance captures it
snap = S.MssqlCdcSnapshotDataSource(dict(OPTS))
sr = snap.reader(snap.schema())
names = set()
for p in sr.partitions():
    for b in sr.read(p):
        names.add(tuple(b.schema.names))
out["snapshot"] = [list(snap.schema().fieldNames()), [list(n) for n in names]]
emit()
""", switch, connstr=sim.connection_string("shop"), start=start)
    old = [r for r in change_rows(sim) if start < r[0] < s]
    new = [r for r in change_rows(sim, "dbo_orders_v2") if r[0] >= s]
    assert old and new
    assert "region" not in out["loaded"]
    # the cut: the batch ends just before S, with every row of the old instance
    assert out["cut_end"] < s
    assert [tuple(x) for x in out["cut_rows"]] == old
    kind, message = out["next"]
    assert kind == "SchemaChangedError" and "dbo_orders_v2" in message, message
    kind, message = out["late"]
    assert kind == "SchemaChangedError" and "region" in message, message
    # followed: the older instance below S, the newer from S, region NULL before
    assert "region" in out["fields"]
    assert [tuple(x) for x in out["rows"]] == sorted(old + new)
    assert out["regions"] == {"300": "north", "301": None}
    assert out["old_regions"] == ["None"]
    assert "capture_instance_switched" in err, err
    fields, read = out["snapshot"]
    assert read == [fields] and "region" not in fields, out["snapshot"]


def test_spark_before_4_2_gets_the_legacy_reader_which_reads_to_max_lsn(sim):
    """The version switch (Spark 4.0/4.1 lack pyspark.sql.streaming.datasource's
    admission control): with those names missing, the source hands Spark
    the legacy reader, whose latestOffset() takes no start and reads up to
    max_lsn, guards included. pyspark 4.0/4.1 themselves are not installed
    here (a second Spark of some 400 MB): the switch is what is tested."""
    make_db(sim)
    insert(sim, 1, 10)
    capture(sim)
    start = max_lsn(sim)
    insert(sim, 100, 7)
    capture(sim)
    out, _ = run_py(r"""
import importlib, types
import pyspark.sql.streaming.datasource as real
# Spark 4.0/4.1: the module exists without admission control's names
old = types.ModuleType(real.__name__)
sys.modules[real.__name__] = old
S = importlib.reload(S)
out["has_admission_control"] = S.HAS_ADMISSION_CONTROL
options = dict(OPTS)
source = S.MssqlCdcDataSource(options)
r = source.streamReader(source.schema())
out["reader"] = type(r).__name__
start = {"lsn": P["start"], "commit_ts": ""}
end = r.latestOffset()
out["end"] = end
out["rows"] = sorted(x["order_id"] for x in rows(r, r.partitions(start, end)))
out["again"] = r.latestOffset() is end  # an idle poll: the same offset, no new query result
sys.modules[real.__name__] = real
S = importlib.reload(S)
out["back"] = [S.HAS_ADMISSION_CONTROL,
               type(S.MssqlCdcDataSource(options).streamReader(source.schema())).__name__]
emit()
""", connstr=sim.connection_string("shop"), start=start)
    assert out["has_admission_control"] is False
    assert out["reader"] == "MssqlCdcLegacyStreamReader"
    assert out["end"]["lsn"] == max_lsn(sim) and len(out["end"]["commit_ts"]) == 23
    assert out["rows"] == list(range(100, 107))
    assert out["again"] is True
    assert out["back"] == [True, "MssqlCdcStreamReader"]
