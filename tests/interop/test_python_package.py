"""The mssql_cdc Python package (python/): the wheel `make python-wheel`
builds (hatchling, the library and what it links grafted in), installed
with pip into a fresh virtual environment (on top of .venv, for pyarrow and
DuckDB), and run from a directory outside the repository, against the
simulator.

read_changes and read_snapshot equal what SQL Server holds; DuckDB reads
the reader; stream, apply_changes, reconcile, snapshot, backfill, seed and
repair return the reference's typed results and the finalization readers
read the verdict; a purge gives DataLossError where the CLI exits 3; a
KeyboardInterrupt stops a running stream cleanly (and waits for a job that
has no stop); the library's messages reach `logging`."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from deltalake import DeltaTable

from conftest import ROOT, run_cli
from test_resnapshot import purge
from test_snapshot import COLUMNS, insert, make_db, rebuild, source_rows, stream_args

PRELUDE = r"""
import json, logging, os, sys
import mssql_cdc
P = json.loads(os.environ["MCDC_PARAMS"])
OPTS = {"captureInstance": "dbo_orders", "connectionString": P.get("connstr", "")}
def out(value):
    print("RESULT " + json.dumps(value, default=str), flush=True)
"""


@pytest.fixture(scope="session")
def venv(installed_wheel):
    """The package as `make python-wheel` builds it, installed into a fresh
    virtual environment (conftest.installed_wheel), and a working directory
    outside the repository."""
    return installed_wheel


def script(venv, code, name="job"):
    path = os.path.join(venv["work"], f"{name}.py")
    with open(path, "w") as f:
        f.write(PRELUDE + code)
    return path


def env_of(params):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MSSQL_CDC_LIBRARY")}
    env["MCDC_PARAMS"] = json.dumps(params)
    return env


def run_py(venv, code, timeout=90, every=False, **params):
    """Runs code in the venv's Python from the working directory; returns
    what it passed to out() last (every: each value, in a list), and its
    stderr."""
    p = subprocess.run([venv["python"], script(venv, code)], cwd=venv["work"],
                       capture_output=True, text=True, env=env_of(params), timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}:\n{p.stdout}\n{p.stderr}"
    results = [json.loads(line[7:]) for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    assert results, p.stdout + p.stderr
    return (results if every else results[-1]), p.stderr


def capture(sim):
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def changes(sim, first, n=5):
    insert(sim, first, n)
    sim.run(f"UPDATE dbo.orders SET status = N'upd-{first}' WHERE order_id % 7 = {first % 7};"
            f"DELETE FROM dbo.orders WHERE order_id = {first - 11};", database="shop")
    capture(sim)


def test_the_installed_package_loads_its_own_library_on_first_use(venv):
    code = r"""
import mssql_cdc._native as native
loaded_at_import = native._lib is not None
path = mssql_cdc.library_path()
try:
    mssql_cdc.read_changes({"captureInstance": "x", "connectionStrin": "y"})
    unknown = None
except ValueError as e:
    unknown = str(e)
try:
    mssql_cdc.read_changes({"captureInstance": "x", "numPartitions": "many"})
    bad = None
except ValueError as e:
    bad = [type(e).__name__, str(e), e.status]
try:
    mssql_cdc.stream(OPTS, "./bronze", "a", "./ckpt", trigger="sometimes")
    trigger = None
except ValueError as e:
    trigger = str(e)
out({"trigger": trigger, "file": mssql_cdc.__file__, "loaded_at_import": loaded_at_import, "path": path,
     "version": mssql_cdc.library_version(), "unknown": unknown, "bad": bad})
"""
    r, _ = run_py(venv, code)
    assert r["file"].startswith(venv["purelib"]) and not r["file"].startswith(ROOT), r
    assert not r["loaded_at_import"]
    assert r["path"] == os.path.join(venv["purelib"], "mssql_cdc", "libmssqlcdc.so.1"), r
    header = open(os.path.join(ROOT, "include", "mssqlcdc.h")).read()
    assert f'#define MCDC_VERSION_STRING "{r["version"]}"' in header
    assert "unknown option 'connectionStrin'" in r["unknown"] and "connectionString" in r["unknown"]
    assert r["bad"][0] == "CdcValueError" and "numPartitions" in r["bad"][1], r
    assert r["bad"][2] == "invalid"
    assert "trigger: expected default, availableNow, once or processingTime" in r["trigger"]
    # a library that is not libmssqlcdc is refused, saying what it lacks
    zlib = subprocess.run(["sh", "-c", "ldconfig -p | grep -m1 'libz.so.1 ' | sed 's/.*=> //'"],
                          capture_output=True, text=True).stdout.strip()
    r, _ = run_py(venv, r"""
try:
    mssql_cdc.load_library(P["lib"])
    out(None)
except OSError as e:
    out(str(e))
""", lib=zlib)
    assert r and "is not a libmssqlcdc" in r and "mcdc_" in r, r


def test_read_changes_and_read_snapshot_equal_sql_server_and_duckdb_reads_them(venv, sim):
    make_db(sim, before_cdc=300)
    changes(sim, 1000, 40)
    ct = sim.run("SELECT CONVERT(varchar(22), __$start_lsn, 1), CONVERT(varchar(22), __$seqval, 1),"
                 " __$operation, order_id, status, amount FROM cdc.dbo_orders_CT", database="shop")
    code = r"""
import duckdb
reader = mssql_cdc.read_changes(OPTS)
rows = reader.read_all().to_pylist()
snap = mssql_cdc.read_snapshot({**OPTS, "numPartitions": 3})
lsn = snap.schema.metadata[b"mssql_cdc.snapshot_lsn"].decode()
srows = snap.read_all().to_pylist()
n, s = duckdb.sql("select count(*), sum(order_id) from reader2").fetchone() if (
    reader2 := mssql_cdc.read_changes(OPTS)) else (0, 0)
# batches of 7 rows: every other one kept, the rest dropped as read (their
# buffers go back to the library's pool for the batches after them); what
# was kept must still hold its own rows
kept, at, seen = [], [], 0
for i, b in enumerate(mssql_cdc.read_changes({**OPTS, "arrowBatchSize": "7"})):
    if i % 2:
        kept.append(b)
        at.append(seen)
    seen += b.num_rows
    del b
# a reader left after its second batch, that batch kept past the reader's close
early = mssql_cdc.read_changes({**OPTS, "arrowBatchSize": "7"})
early.read_next_batch()
second = early.read_next_batch()
early.close()
del early
small = {"seen": seen, "kept": len(kept),
         "equal": [r for b in kept for r in b.to_pylist()]
                  == [r for b, a in zip(kept, at) for r in rows[a:a + b.num_rows]],
         "early": second.to_pylist() == rows[7:14]}
out({"changes": [[r["_start_lsn"], r["_seqval"], r["_operation"], r["order_id"], r["status"],
                  str(r["amount"])] for r in rows],
     "snapshot": [[r[c] for c in P["columns"]] for r in srows],
     "snap_ops": sorted({r["_operation"] for r in srows}),
     "snap_lsns": sorted({r["_start_lsn"] for r in srows}), "lsn": lsn,
     "duckdb": [n, int(s)], "small": small})
"""
    r, _ = run_py(venv, code, connstr=sim.connection_string("shop"), columns=COLUMNS)
    want = sorted([list(row[:5]) + [str(row[5])] for row in ct])
    assert sorted(r["changes"]) == want and len(want) > 40
    batches = -(-len(want) // 7)
    assert r["small"] == {"seen": len(want), "kept": batches // 2, "equal": True,
                          "early": True}, r["small"]
    # in change order
    assert [c[:3] for c in r["changes"]] == sorted(c[:3] for c in r["changes"])
    assert r["duckdb"] == [len(want), sum(row[3] for row in ct)]
    source = [[str(v) if v is not None else None for v in row] for row in source_rows(sim)]
    got = sorted([[str(v) if v is not None else None for v in row] for row in r["snapshot"]],
                 key=lambda x: int(x[0]))
    assert got == source and len(got) > 300
    max_lsn = sim.run("SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)",
                      database="shop")[0][0]
    assert r["snap_ops"] == [0] and r["snap_lsns"] == [r["lsn"]] == [max_lsn]


STREAM_APPLY = r"""
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.name, record.levelname, record.getMessage(), record.threadName])
logging.getLogger("mssql_cdc").addHandler(Keep())
logging.getLogger("mssql_cdc").setLevel(logging.INFO)
d = P["dir"]
progress, batches = [], []
res = mssql_cdc.stream(OPTS, f"{d}/bronze", "orders-py", f"{d}/ckpt", f"{d}/facts",
                       trigger={"availableNow": True}, bootstrap=True,
                       control_table=f"{d}/control", progress=progress.append,
                       on_batch=batches.append)
applied = mssql_cdc.apply_changes(f"{d}/bronze", f"{d}/silver", control_table=f"{d}/control",
                                  facts_table=f"{d}/facts", options=OPTS)
rec = mssql_cdc.reconcile(OPTS, f"{d}/silver", bronze=f"{d}/bronze",
                          control_table=f"{d}/control", facts_table=f"{d}/facts",
                          report_table=f"{d}/report", sample=1.0)
fin = mssql_cdc.finalization
until = fin.finalized_until(f"{d}/control", f"{d}/silver")
out({"stream": res, "batches": batches, "progress": progress, "apply": applied,
     "apply_types": {k: type(v).__name__ for k, v in applied.items()},
     "reconcile": rec, "until": until,
     "final_before": fin.is_final(f"{d}/control", f"{d}/silver", until),
     "final_after": fin.is_final(f"{d}/control", f"{d}/silver",
                                 until.replace(year=until.year + 1)),
     "freshness": fin.freshness(f"{d}/control", f"{d}/bronze"),
     "none": fin.finalized_until(f"{d}/control", "no-such-table"),
     "advanced": fin.advance(f"{d}/control", "mine", {"lsn": "0x0000002A000000000001",
                                                      "commit_ts": "2026-03-01T10:42:13.250"},
                             granularity="day"),
     "records": records})
"""


def test_stream_apply_reconcile_with_typed_results_and_logging(venv, sim, workdir):
    make_db(sim, before_cdc=120)
    changes(sim, 1000, 10)
    r, _ = run_py(venv, STREAM_APPLY, connstr=sim.connection_string("shop"), dir=workdir)
    assert set(r["stream"]) == {"batches", "rows", "end_offset"} and r["stream"]["batches"] >= 1
    assert set(r["stream"]["end_offset"]) == {"lsn", "commit_ts"}
    assert r["batches"][-1]["end_lsn"] == r["stream"]["end_offset"]["lsn"]
    assert sum(b["rows"] for b in r["batches"]) == r["stream"]["rows"]
    # the bootstrap snapshot's progress, ending with done
    assert r["progress"] and r["progress"][-1]["job"] == "snapshot" and r["progress"][-1]["done"]
    a = r["apply"]
    assert {"rebuilt", "applied_lsn", "finalized_until", "bronze_found"} <= set(a)
    assert a["rebuilt"] is True and a["bronze_found"] is True
    assert a["applied_lsn"] == r["stream"]["end_offset"]["lsn"]
    assert r["apply_types"]["finalized_until"] == "datetime"
    silver = DeltaTable(os.path.join(workdir, "silver")).to_pyarrow_table().to_pylist()
    assert sorted(tuple(x[c] for c in COLUMNS) for x in silver) == source_rows(sim)
    rec = r["reconcile"]
    assert {"run_id", "silver_version", "silver_lsn", "source_lsn", "buckets", "match",
            "in_flight", "mismatch", "hashed", "failures", "report"} <= set(rec)
    assert rec["match"] == rec["buckets"] >= 1 and rec["mismatch"] == 0 and rec["failures"] == {}
    assert rec["report"] and {x["run_id"] for x in rec["report"]} == {rec["run_id"]}
    assert r["until"] == str(a["finalized_until"]).replace("T", " ")
    assert r["final_before"] is True and r["final_after"] is False
    f = r["freshness"]
    assert set(f) == {"table_name", "finalized_until", "updated_at", "age_seconds",
                      "seconds_since_update", "open_snapshot_lsn"}
    assert f["finalized_until"] is not None and f["age_seconds"] >= 0
    assert r["none"] is None and r["advanced"] == "2026-03-01 00:00:00"
    # the library's messages, from its own threads too, reach the logger
    msgs = [m for m in r["records"] if m[0] == "mssql_cdc"]
    assert any("snapshot of dbo.orders" in m[2] for m in msgs), msgs
    assert any(m[2].startswith("bucket 0:") for m in msgs), msgs
    assert all(m[3] != "MainThread" for m in msgs)  # from the job's threads


def test_a_purge_is_a_data_loss_error_where_the_cli_exits_3(venv, sim, workdir):
    make_db(sim, before_cdc=20)
    run_cli(*stream_args(sim, workdir, "--bootstrap"))
    changes(sim, 1000)
    purged = sim.run("SELECT CONVERT(varchar(22), MIN(__$start_lsn), 1) FROM cdc.dbo_orders_CT",
                     database="shop")[0][0]
    purge(sim)
    changes(sim, 2000)
    p = run_cli(*stream_args(sim, workdir), check=False)
    assert p.returncode == 3, p.stderr
    code = r"""
d = P["dir"]
try:
    mssql_cdc.stream(OPTS, f"{d}/bronze", "orders-v1", f"{d}/ckpt", f"{d}/facts",
                     control_table=f"{d}/control", trigger="availableNow")
    out(None)
except mssql_cdc.DataLossError as e:
    out([type(e).__mro__[1].__name__, str(e), mssql_cdc.is_data_loss(e),
         mssql_cdc.is_data_loss(RuntimeError("boom: DataLossError: x")),
         mssql_cdc.is_schema_changed(e), e.code])
# the change reader: a range CDC cleanup purged, told by the stream it reads
try:
    mssql_cdc.read_changes(OPTS, start_lsn=P["purged"]).read_all()
    out(None)
except mssql_cdc.DataLossError as e:
    out([str(e), e.code])
"""
    (r, reader), _ = run_py(venv, code, connstr=sim.connection_string("shop"), dir=workdir,
                            purged=purged, every=True)
    assert r is not None, "no DataLossError"
    kind, message, is_loss, in_text, is_schema, code_ = r
    assert kind == "RuntimeError" and is_loss and not is_schema and code_ == -9
    assert not in_text  # only the "<Kind>: " prefix at the start, or a module path, counts
    assert message.split(":")[0] in p.stderr, (message, p.stderr)
    assert reader is not None, "read_changes read a purged range"
    assert "no longer available" in reader[0] and purged in reader[0] and reader[1] == -9, reader


def test_a_keyboard_interrupt_stops_a_running_stream_cleanly(venv, sim, workdir):
    make_db(sim, before_cdc=20)
    code = r"""
import time
d = P["dir"]
def on_batch(b):
    print("BATCH", b["batch_id"], b["rows"], flush=True)
try:
    mssql_cdc.stream(OPTS, f"{d}/bronze", "orders-ki", f"{d}/ckpt", f"{d}/facts",
                     control_table=f"{d}/control", trigger="processingTime=100ms",
                     on_batch=on_batch)
    out("returned")
except KeyboardInterrupt:
    out("interrupted")
"""
    path = script(venv, code, "interrupt")
    proc = subprocess.Popen([venv["python"], path], cwd=venv["work"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=env_of({"connstr": sim.connection_string("shop"), "dir": workdir}))
    try:
        seen = 0
        first = 1000
        deadline = time.time() + 60
        while seen < 3 and time.time() < deadline and proc.poll() is None:
            changes(sim, first)
            first += 100
            line = proc.stdout.readline()
            if line.startswith("BATCH"):
                seen += 1
        assert seen >= 3, proc.stderr.read() if proc.poll() is not None else "no batches"
        changes(sim, first)  # a batch in flight, most likely, when the interrupt comes
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert 'RESULT "interrupted"' in stdout, stdout + stderr
    assert "stopping on KeyboardInterrupt" in stderr, stderr
    # nothing half-committed: the next run finds the state it left consistent
    # and reads on; bronze then holds every change once
    r, _ = run_py(venv, r"""
d = P["dir"]
out(mssql_cdc.stream(OPTS, f"{d}/bronze", "orders-ki", f"{d}/ckpt", f"{d}/facts",
                     control_table=f"{d}/control", trigger="availableNow"))
""", connstr=sim.connection_string("shop"), dir=workdir)
    bronze = DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table().to_pylist()
    got = sorted((x["_start_lsn"], x["_seqval"], x["_operation"]) for x in bronze)
    ct = sim.run("SELECT CONVERT(varchar(22), __$start_lsn, 1), CONVERT(varchar(22), __$seqval, 1),"
                 " __$operation FROM cdc.dbo_orders_CT", database="shop")
    assert got == sorted(tuple(x) for x in ct) and len(got) > 20


OTHER_JOBS = r"""
import pyarrow.parquet as pq
d = P["dir"]
snap = mssql_cdc.snapshot(OPTS, f"{d}/whole")
again = mssql_cdc.snapshot(OPTS, f"{d}/whole")
# a chunked bootstrap, read by backfill in waves
mssql_cdc.stream(OPTS, f"{d}/bronze", "orders-ch", f"{d}/ckpt", f"{d}/facts", trigger="once",
                 bootstrap=True, snapshot="chunked")
progress = []
status = mssql_cdc.backfill(OPTS, f"{d}/bronze", app_id="orders-ch", facts_table=f"{d}/facts",
                            chunk_rows=40, progress=progress.append)
# a copy of the table (read with read_snapshot), seeded as of the LSN recorded before it
reader = mssql_cdc.read_snapshot(OPTS)
copy = reader.read_all()
pq.write_table(copy.select(P["columns"]), f"{d}/copy.parquet")
seeded = mssql_cdc.seed(OPTS, f"{d}/seeded", f"{d}/copy.parquet",
                        copy.schema.metadata[b"mssql_cdc.snapshot_lsn"].decode())
fixed = mssql_cdc.repair(OPTS, f"{d}/bronze", facts_table=f"{d}/facts",
                         keys=[{"order_id": 5}, {"order_id": 999999}])
out({"snap": snap, "again": again, "status": status, "progress": progress[-1],
     "seeded": seeded, "seed_lsn": copy.schema.metadata[b"mssql_cdc.snapshot_lsn"].decode(),
     "repair": fixed})
"""


def test_snapshot_backfill_seed_and_repair_with_typed_results(venv, sim, workdir):
    make_db(sim, before_cdc=150)
    changes(sim, 1000, 5)
    r, _ = run_py(venv, OTHER_JOBS, connstr=sim.connection_string("shop"), dir=workdir,
                  columns=COLUMNS)
    max_lsn = sim.run("SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)",
                      database="shop")[0][0]
    assert set(r["snap"]) == {"lsn", "commit_ts"} and r["snap"]["lsn"] == max_lsn
    assert r["again"] == r["snap"] and len(r["snap"]["commit_ts"]) == 23
    whole = DeltaTable(os.path.join(workdir, "whole")).to_pyarrow_table().to_pylist()
    assert sorted(tuple(x[c] for c in COLUMNS) for x in whole) == source_rows(sim)
    st = r["status"]
    assert set(st) == {"snapshot", "chunks_done", "chunks_total", "done", "paused", "state",
                       "reason"}
    assert st["state"] == "done" and st["done"] and st["chunks_done"] == st["chunks_total"] > 1
    assert r["progress"]["job"] == "backfill" and r["progress"]["done"]
    assert rebuild(os.path.join(workdir, "bronze")) == source_rows(sim)
    assert r["seeded"]["lsn"] == r["seed_lsn"]
    seeded = DeltaTable(os.path.join(workdir, "seeded")).to_pyarrow_table().to_pylist()
    assert sorted(tuple(x[c] for c in COLUMNS) for x in seeded) == source_rows(sim)
    fixed = r["repair"]
    assert fixed["keys"] == 2 and fixed["images"] == 1 and fixed["deletes"] == 1, fixed
    assert fixed["lsn"] == max_lsn and not fixed["already"]


STOPPED_JOBS = r"""
import signal, time
import pyarrow.parquet as pq
from deltalake import DeltaTable
d = P["dir"]
def rows_of(path):
    try:
        return DeltaTable(path).to_pyarrow_table().num_rows
    except Exception:  # no commit: no table
        return 0
def interrupt_at(phase):
    # a KeyboardInterrupt once the job reports that phase (from its thread,
    # which then waits a little: the main thread takes the interrupt while
    # the job is still reading, on a busy machine too)
    fired = []
    def progress(p):
        if not fired and p["phase"] == phase:
            fired.append(p["phase"])
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
    return progress
def interrupted(call):
    t0 = time.monotonic()
    try:
        call()
        return ["returned", time.monotonic() - t0]
    except KeyboardInterrupt:
        return ["interrupted", time.monotonic() - t0]
r = {}
r["snapshot"] = interrupted(lambda: mssql_cdc.snapshot(OPTS, f"{d}/whole",
                                                       progress=interrupt_at("reading")))
r["snapshot_rows"] = rows_of(f"{d}/whole")
copy = mssql_cdc.read_snapshot(OPTS).read_all()
pq.write_table(copy.select(P["columns"]), f"{d}/copy.parquet")
lsn = copy.schema.metadata[b"mssql_cdc.snapshot_lsn"].decode()
r["seed"] = interrupted(lambda: mssql_cdc.seed(OPTS, f"{d}/seeded", f"{d}/copy.parquet", lsn,
                                               progress=interrupt_at("reading")))
r["seed_rows"] = rows_of(f"{d}/seeded")
mssql_cdc.stream(OPTS, f"{d}/bronze", "orders-st", f"{d}/ckpt", f"{d}/facts",
                 trigger="availableNow", bootstrap=True, control_table=f"{d}/control")
mssql_cdc.apply_changes(f"{d}/bronze", f"{d}/silver", control_table=f"{d}/control",
                        facts_table=f"{d}/facts", options=OPTS)
phases = []
def first_phase(p):
    phases.append(p["phase"])
    if len(phases) == 1:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
r["reconcile"] = interrupted(lambda: mssql_cdc.reconcile(
    OPTS, f"{d}/silver", bronze=f"{d}/bronze", control_table=f"{d}/control",
    facts_table=f"{d}/facts", report_table=f"{d}/report", sample=1.0, progress=first_phase))
r["report_rows"] = rows_of(f"{d}/report")
bronze_before = rows_of(f"{d}/bronze")
import threading
def when_running(name):
    # a KeyboardInterrupt once the job's worker thread runs (repair reports no progress)
    while not any(t.name == name for t in threading.enumerate()):
        time.sleep(0.005)
    time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=when_running, args=("mssql_cdc repair",), daemon=True).start()
r["repair"] = interrupted(lambda: mssql_cdc.repair(
    OPTS, f"{d}/bronze", facts_table=f"{d}/facts",
    keys=[{"order_id": k} for k in range(1, P["keys"] + 1)]))
r["repair_added"] = rows_of(f"{d}/bronze") - bronze_before
# nothing half-done: each runs again to its end
r["again"] = [mssql_cdc.snapshot(OPTS, f"{d}/whole")["lsn"] == lsn,
              mssql_cdc.seed(OPTS, f"{d}/seeded", f"{d}/copy.parquet", lsn)["lsn"] == lsn]
r["whole_rows"], r["seeded_rows"] = rows_of(f"{d}/whole"), rows_of(f"{d}/seeded")
rec = mssql_cdc.reconcile(OPTS, f"{d}/silver", bronze=f"{d}/bronze", control_table=f"{d}/control",
                          facts_table=f"{d}/facts", report_table=f"{d}/report")
r["reconciled"] = rec["mismatch"] == 0 and len(rec["report"]) >= 1
out(r)
"""


def test_a_keyboard_interrupt_stops_snapshot_seed_reconcile_and_repair_before_their_commit(
        venv, sim, workdir):
    """The jobs that are one call (snapshot, seed, repair: a stop request
    in their config) and reconcile (mcdc_reconcile_request_stop) stop at
    their next batch on the first KeyboardInterrupt, before their commit:
    nothing of them is in the tables, and each runs again to its end."""
    make_db(sim, before_cdc=40000)
    changes(sim, 100000, 5)
    r, stderr = run_py(venv, STOPPED_JOBS, timeout=300, connstr=sim.connection_string("shop"),
                       dir=workdir, columns=COLUMNS, keys=40000)
    for job in ("snapshot", "seed", "reconcile", "repair"):
        assert r[job][0] == "interrupted", (job, r, stderr[-3000:])
    assert r["snapshot_rows"] == 0 and r["seed_rows"] == 0, r
    assert r["report_rows"] == 0 and r["repair_added"] == 0, r
    assert stderr.count("stopping on KeyboardInterrupt") == 4, stderr[-3000:]
    assert r["again"] == [True, True], r
    assert r["whole_rows"] == r["seeded_rows"] == len(source_rows(sim)), r
    assert r["reconciled"], r


def test_an_interrupt_waits_for_a_job_without_a_stop_and_a_second_abandons_it(venv):
    """A job without a stop request (every job of the package has one now:
    stand-ins here, a Python call in the worker thread): the first
    KeyboardInterrupt waits for the job, the second stops waiting."""
    code = r"""
import signal, threading, time
from mssql_cdc._core import run_job
def interrupt(*after):
    for t in after:
        threading.Timer(t, os.kill, (os.getpid(), signal.SIGINT)).start()
def timed(call, stop=None):
    t0 = time.monotonic()
    try:
        rc, interrupted = run_job("job", call, stop, [])  # the job's caller raises it then
        return ["returned, interrupted" if interrupted else "returned", time.monotonic() - t0]
    except KeyboardInterrupt:
        return ["interrupted", time.monotonic() - t0]
interrupt(0.2)
waited = timed(lambda: (time.sleep(1.0), 0)[1])
interrupt(0.2, 0.4)
abandoned = timed(lambda: (time.sleep(3.0), 0)[1])
ended, stops = threading.Event(), []
interrupt(0.2)
stopped = timed(lambda: (ended.wait(10), 0)[1], lambda: (stops.append(1), ended.set()))
out({"waited": waited, "abandoned": abandoned, "stopped": stopped, "stops": stops})
"""
    r, stderr = run_py(venv, code)
    assert r["waited"][0] == "returned, interrupted" and r["waited"][1] >= 1.0, r
    assert r["abandoned"][0] == "interrupted" and r["abandoned"][1] < 2.0, r
    assert r["stopped"][0] == "returned, interrupted" and r["stopped"][1] < 5, r
    assert r["stops"] == [1], r
    assert "cannot be stopped midway; waiting for it to end" in stderr, stderr
