"""Chunked snapshots shared with the reference (mssql-cdc-pyspark 0.8.0 on
local Spark): the plans table, the snapshot facts rows and bronze's wave
commits are one contract, so either side continues a backfill the other
started, and the reference's apply_changes builds silver from our chunks.

Our stream opens a chunked snapshot and our backfill reads its first wave;
the reference's backfill() reads the rest. Then the reference opens one
(to_delta(snapshot="chunked")) and plans and reads a wave, and the CLI
finishes it; with MCDC_SPARK_API=1 (`make soak`), our Spark package's
backfill() first reads the next wave on the reference's plan rows, in a
Spark process of its own (the two packages share the import name: a second
JVM, about 130 s at load 12, too much for `make test`). Each time the table
rebuilt from bronze equals the source, and the plans table reads the same
through delta-rs, DuckDB and Spark.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import PASSWORD, ROOT, Sim, run_cli, duckdb_with_delta

pytest.importorskip("pyspark")
pytest.importorskip("delta")
deltalake = pytest.importorskip("deltalake")
mssql_cdc = pytest.importorskip("mssql_cdc",
                                reason="the reference, mssql-cdc-pyspark, is not installed")
pytest.importorskip("mssql_python")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from test_reference_peer import spark  # noqa: E402,F401  (the module-scoped session)

CI = "dbo_orders"
TABLE = """
CREATE TABLE dbo.orders (order_id INT NOT NULL PRIMARY KEY, status NVARCHAR(20) NULL,
                         amount DECIMAL(18,2) NULL);
"""
CDC = """EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL;"""
ROWS = 400
CHUNK_ROWS = 100


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("ref-chunked"))
    os.makedirs(os.path.join(work, "sim"))
    s = Sim(os.path.join(work, "sim"), ["--capture-poll-ms", "50", "--capture-latency-ms", "0"])
    s.work = work
    try:
        s.run("CREATE DATABASE shop;")
        s.run(TABLE, database="shop")
        values = ",".join(f"({i}, N'st{i % 7}', {i}.25)" for i in range(1, ROWS + 1))
        s.run(f"INSERT INTO dbo.orders VALUES {values};", database="shop")
        s.run(CDC, database="shop")
        s.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
        yield s
    finally:
        s.stop()


def options(sim):
    cs = (f"Server=127.0.0.1,{sim.port};Database=shop;UID=sa;PWD={PASSWORD};"
          "Encrypt=yes;TrustServerCertificate=yes")
    return {"captureInstance": CI, "connectionString": cs, "backend": "mssql-python",
            "numPartitions": "2"}


def our_args(sim):
    return ["--captureInstance", CI, "--connectionString", sim.connection_string("shop"),
            "--numPartitions", "2"]


def changes(sim, first):
    sim.run(f"""INSERT INTO dbo.orders VALUES ({first}, N'new', 1.00), ({first + 1}, N'new', 2.00);
UPDATE dbo.orders SET status = N'upd{first}' WHERE order_id % 13 = {first % 13};
DELETE FROM dbo.orders WHERE order_id = {first % ROWS + 1};""", database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def source_rows(sim):
    return sorted(tuple(r) for r in sim.run(
        "SELECT order_id, status, amount FROM dbo.orders", database="shop"))


def rebuild(bronze):
    rows = deltalake.DeltaTable(bronze).to_pyarrow_table().to_pylist()
    s = max(r["_snapshot"] for r in rows if r["_operation"] == 0)
    state = {r["order_id"]: r for r in rows if r["_operation"] == 0 and r["_snapshot"] == s}
    for r in sorted((r for r in rows if r["_operation"] in (1, 2, 4) and r["_start_lsn"] > s),
                    key=lambda r: (r["_start_lsn"], r["_command_id"] or 0, r["_seqval"] or "",
                                   r["_operation"])):
        if r["_operation"] == 1:
            state.pop(r["order_id"], None)
        else:
            state[r["order_id"]] = r
    return sorted((r["order_id"], r["status"], r["amount"]) for r in state.values())


def lake(sim, side, name):
    return os.path.join(sim.work, side, name)


def run_our_stream(sim, side, *extra):
    run_cli("stream", *our_args(sim), "--target", lake(sim, side, "bronze"),
            "--app-id", "orders-v1", "--checkpoint", lake(sim, side, "ckpt"),
            "--facts-table", lake(sim, side, "facts"), "--trigger", "availableNow", *extra)


def our_backfill(sim, side, *extra):
    p = run_cli("backfill", *our_args(sim), "--target", lake(sim, side, "bronze"),
                "--app-id", "orders-v1", "--facts-table", lake(sim, side, "facts"), *extra,
                check=False)
    assert p.returncode in (0, 14), p.stderr
    return json.loads(p.stdout)


# MCDC_SPARK_API=1 (`make soak`): our Spark package's backfill() on the reference's plan too
OURS_ON_THE_REFERENCES_PLAN = os.environ.get("MCDC_SPARK_API", "") == "1"

# Our package's backfill() in a local Spark of its own (the reference holds the
# import name in this process): one call, its status printed as a RESULT line.
OURS = r"""
import json, os, sys
P = json.loads(os.environ["MCDC_PARAMS"])
sys.path.insert(0, P["bench"])
from benchlib import local_spark
spark = local_spark("mcdc-ours-on-the-references-plan")
import mssql_cdc
st = mssql_cdc.stream(spark, P["options"]).backfill(P["bronze"], **P["kw"])
print("RESULT " + json.dumps({"module": mssql_cdc.__file__, "status": st}), flush=True)
"""


def our_spark_backfill(sim, side, **kw):
    """Our Spark package's backfill() on the lake of ``side``, run from the
    source tree as test_spark_api runs it; its status."""
    from test_spark_api import spark_env
    work = os.path.join(sim.work, "ours-spark")
    os.makedirs(work, exist_ok=True)
    params = {"work": work, "bench": os.path.join(ROOT, "bench"),
              "options": {"captureInstance": CI, "connectionString": sim.connection_string("shop"),
                          "numPartitions": "1"},
              "bronze": lake(sim, side, "bronze"),
              "kw": {"app_id": "orders-v1", "facts_table": lake(sim, side, "facts"), **kw}}
    script = os.path.join(work, "ours.py")
    with open(script, "w") as f:
        f.write(OURS)
    started = time.monotonic()
    p = subprocess.run([sys.executable, script], cwd=work, capture_output=True, text=True,
                       timeout=900, env=spark_env(params, True, sys.executable))
    print(f"our Spark backfill took {time.monotonic() - started:.1f} s")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, (p.returncode, p.stdout[-2000:], p.stderr[-4000:])
    out = json.loads(lines[-1][7:])
    assert out["module"].startswith(os.path.join(ROOT, "python", "src")), out
    return out["status"]


def test_the_reference_finishes_a_backfill_we_started(spark, sim):
    bronze, facts = lake(sim, "ours", "bronze"), lake(sim, "ours", "facts")
    run_our_stream(sim, "ours", "--bootstrap", "--snapshot", "chunked")
    st = our_backfill(sim, "ours", "--chunk-rows", str(CHUNK_ROWS), "--max-waves", "1")
    assert not st["done"] and st["chunks_done"] == 2
    changes(sim, 5000)
    run_our_stream(sim, "ours")
    stream = mssql_cdc.stream(spark, options(sim))
    ref = stream.backfill(bronze, app_id="orders-v1", facts_table=facts)
    assert ref["done"] and ref["state"] == "done", ref
    assert ref["snapshot"] == st["snapshot"] and ref["chunks_total"] == st["chunks_total"]
    events = [r["event"] for r in deltalake.DeltaTable(facts).to_pyarrow_table().to_pylist()]
    assert events.count("bootstrap") == 1 and events.count("snapshot_plan") == 1
    assert events.count("snapshot_chunk") == st["chunks_total"]
    run_our_stream(sim, "ours")
    assert rebuild(bronze) == source_rows(sim)
    # ours agrees that it is done, and reads nothing
    again = our_backfill(sim, "ours")
    assert again["done"] and again["chunks_done"] == st["chunks_total"]
    # the reference's apply_changes builds silver from our chunks and its completion
    from mssql_cdc import apply_changes
    silver = lake(sim, "ours", "silver")
    r = apply_changes(spark, bronze, silver, capture_instance=CI, keys=["order_id"],
                      control_table=lake(sim, "ours", "control"), facts_table=facts,
                      options=options(sim))
    assert r["bronze_found"]
    got = sorted((x["order_id"], x["status"], x["amount"])
                 for x in deltalake.DeltaTable(silver).to_pyarrow_table().to_pylist())
    assert got == source_rows(sim)


def test_we_finish_a_backfill_the_reference_started(spark, sim):
    bronze, facts = lake(sim, "ref", "bronze"), lake(sim, "ref", "facts")
    stream = mssql_cdc.stream(spark, options(sim))
    q = stream.to_delta(bronze, "orders-v1", lake(sim, "ref", "ckpt"), facts, bootstrap=True,
                        snapshot="chunked", trigger={"availableNow": True})
    assert q.awaitTermination(600) and q.exception() is None
    ref = stream.backfill(bronze, app_id="orders-v1", facts_table=facts, chunk_rows=CHUNK_ROWS,
                          max_waves=1, target_wave_seconds=0)
    assert not ref["done"] and ref["chunks_done"] >= 1, ref
    changes(sim, 6000)
    if OURS_ON_THE_REFERENCES_PLAN:
        # our Spark backfill() accepts the reference's open and plan rows: one wave more
        mine = our_spark_backfill(sim, "ref", max_waves=1, target_wave_seconds=0)
        assert mine["state"] in ("running", "done") and mine["snapshot"] == ref["snapshot"], mine
        assert mine["chunks_total"] == ref["chunks_total"], (mine, ref)
        assert mine["chunks_done"] == ref["chunks_done"] + 1, (mine, ref)
        waves = [json.loads(h["userMetadata"]) for h in deltalake.DeltaTable(
            lake(sim, "ref", "bronze")).history() if "backfill" in (h.get("userMetadata") or "")]
        assert [len(w["chunks"]) for w in waves if w["wave"] == 1] == [1], waves  # ours
    st = our_backfill(sim, "ref")
    while not st["done"]:
        st = our_backfill(sim, "ref")
    assert st["snapshot"] == ref["snapshot"] and st["chunks_total"] == ref["chunks_total"]
    q = stream.to_delta(bronze, "orders-v1", lake(sim, "ref", "ckpt"), facts, bootstrap=True,
                        snapshot="chunked", trigger={"availableNow": True})
    assert q.awaitTermination(600) and q.exception() is None
    assert rebuild(bronze) == source_rows(sim)
    # the reference sees its snapshot complete: a rerun of its backfill is done at once
    assert stream.backfill(bronze, app_id="orders-v1", facts_table=facts)["done"]


def test_the_plans_table_reads_alike_everywhere(spark, sim):
    plans = lake(sim, "ours", "bronze_snapshot_plans")
    if not os.path.exists(plans):
        pytest.skip("needs test_the_reference_finishes_a_backfill_we_started first")
    rs = deltalake.DeltaTable(plans).to_pyarrow_table()
    assert rs.column_names == ["snapshot", "event", "detail"]
    duck = duckdb_with_delta().execute(
        f"SELECT snapshot, event, detail FROM delta_scan('{plans}')").fetchall()
    sp = [tuple(r) for r in spark.read.format("delta").load(plans)
          .select("snapshot", "event", "detail").collect()]
    mine = sorted(tuple(r.values()) for r in rs.to_pylist())
    assert sorted(duck) == mine == sorted(sp)
    kinds = {e for _, e, _ in mine}
    assert kinds == {"snapshot_open", "snapshot_plan", "snapshot_chunk"}
    for _, event, detail in mine:
        d = json.loads(detail)
        want = {"snapshot_open": {"mode", "kind", "generation", "keys", "plan"},
                "snapshot_plan": {"snapshot", "kind", "keys", "chunk_rows", "chunks"},
                "snapshot_chunk": {"snapshot", "chunk", "wave", "lo", "hi", "last"}}[event]
        assert want <= set(d), (event, d)
    # the reference's own reader of the plans table
    from mssql_cdc import events
    s = mine[0][0]
    kept = events.plans(spark, lake(sim, "ours", "bronze"), s)
    assert ("snapshot_plan", None, None) in kept.details
