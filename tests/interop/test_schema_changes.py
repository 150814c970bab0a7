"""Schema changes and capture instance switches (reference §2.5) with a
workload writing the whole time: the stream follows a newer capture
instance at exactly its start LSN S, classifies every DDL, and stops where
its schema cannot follow. After each case bronze holds every change row of
both change tables exactly once over their ranges (the older instance's
before S, the newer one's from S), and the facts hold the schema_change and
capture_instance_switched rows with the reference's payloads."""
import json
import os
import signal
import subprocess
import time

import pyarrow as pa
import pytest

from conftest import CLI, run_cli
from workload import DB, Spec, Workload, delta_rows, settle

V2 = "dbo_orders_v2"


class Orders(Spec):
    """dbo.orders; `columns` changes as the tests alter the table, and the
    workload writes what the table has at the time."""

    name = "orders"
    keys = primary_key = ("order_id",)

    def __init__(self):
        self.columns = (("order_id", "INT NOT NULL", pa.int32()),
                        ("status", "NVARCHAR(20) NULL", pa.string()),
                        ("amount", "DECIMAL(18,2) NULL", pa.decimal128(18, 2)),
                        ("qty", "INT NULL", pa.int32()))
        self.long_status = False

    def add(self, column):
        self.columns = self.columns + (column,)

    def drop(self, name):
        self.columns = tuple(c for c in self.columns if c[0] != name)

    def random_key(self, rng):
        return (rng.randint(1, 5000),)

    def new_row(self, rng, key):
        row = {"order_id": key[0],
               "status": rng.choice(["new", "paid", "sent"]) + (
                   "-with-a-much-longer-status" if self.long_status else ""),
               "amount": rng.randint(-10 ** 6, 10 ** 6) / 100,
               "qty": rng.randint(-1000, 1000),
               "region": rng.choice(["north", "south", None])}
        return {c: row[c] for c in self.column_names}

    def changes(self, rng):
        row = self.new_row(rng, (0,))
        pick = [c for c in self.column_names if c != "order_id"]
        return {c: row[c] for c in rng.sample(pick, min(2, len(pick)))}

    def move(self, rng, key, present):
        k = self.fresh_key(rng, present)
        return {"order_id": k[0]}, k

    def bulk_update(self, rng):
        return f"UPDATE dbo.orders SET amount = amount + 1 WHERE order_id % 97 = {rng.randrange(97)};"


# ---- the source ---------------------------------------------------------------------

def make_table(sim, spec):
    sim.run(f"CREATE DATABASE {DB};")
    sim.run(spec.create_sql() + " EXEC sys.sp_cdc_enable_db;", database=DB)
    sim.run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
            "@role_name = NULL; EXEC sim.run_capture @ignore_latency = 1;", database=DB)


def enable_v2(sim, table="orders", ci=V2):
    """Steps 1 and 3 of the DBA's procedure (docs/schema-changes.md): the new
    instance, then wait until capture has taken it up (its start LSN S)."""
    sim.run(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', "
            f"@role_name = NULL, @capture_instance = N'{ci}';", database=DB)
    deadline = time.monotonic() + 20
    while True:
        settle(sim)
        s = sim.run(f"SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'{ci}'), 1)",
                    database=DB)[0][0]
        if s != "0x" + "0" * 20:
            return s
        assert time.monotonic() < deadline, "capture never took up the new instance"
        time.sleep(0.05)


def disable(sim, ci):
    sim.run("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'orders', "
            f"@capture_instance = N'{ci}';", database=DB)


def ct_rows(sim, ci, extra=""):
    """(_start_lsn, _seqval, _operation[, extra...]) of every row of ci's change table."""
    rows = sim.run("SELECT CONVERT(varchar(22), __$start_lsn, 1), CONVERT(varchar(22), __$seqval, 1),"
                   f" __$operation{extra} FROM cdc.[{ci}_CT]", database=DB)
    return [tuple(r) for r in rows]


# ---- the stream ---------------------------------------------------------------------

def args(sim, d, ci="dbo_orders", trigger="availableNow", extra=()):
    return ["stream", "--captureInstance", ci, "--connectionString", sim.connection_string(DB),
            "--target", os.path.join(d, "bronze"), "--app-id", "orders-v1",
            "--checkpoint", os.path.join(d, "ckpt"), "--facts-table", os.path.join(d, "facts"),
            "--control-table", os.path.join(d, "control"), "--trigger", trigger,
            "--maxCommitsPerBatch", "4", "--numPartitions", "2", "--quiet", *extra]


def start_stream(sim, d, **kw):
    return subprocess.Popen([CLI, *args(sim, d, trigger="processingTime=50ms", **kw)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop_stream(p, timeout=30):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=timeout)
    return p.returncode, err


def facts(d):
    return delta_rows(os.path.join(d, "facts"))


def switched(d):
    """The DBA's query of docs/schema-changes.md: the stream's
    capture_instance_switched row and a batch after it (the old instance may go)."""
    rows = facts(d)
    sw = [r["batch_id"] for r in rows if r["event"] == "capture_instance_switched"]
    return bool(sw) and any(r["event"] is None and r["batch_id"] > max(sw) for r in rows)


def dba_query(d, s):
    """docs/schema-changes.md step 4, over the facts table with DuckDB: the
    app ids that have switched at S and read one more batch."""
    from conftest import duckdb_with_delta
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                            "schema-changes.md")).read()
    sql = doc[doc.index("SELECT s.app_id"):]
    sql = sql[:sql.index("```")].replace("FROM facts", f"FROM delta_scan('{d}/facts')")
    sql = sql.replace("JOIN facts", f"JOIN delta_scan('{d}/facts')")
    sql = sql.replace("<S, the new start LSN>", s)
    return [r[0] for r in duckdb_with_delta().execute(sql).fetchall()]


def wait_until(cond, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def bronze(d):
    return delta_rows(os.path.join(d, "bronze"))


def assert_bronze_is(d, older, newer=None, s=None, older_ci="dbo_orders"):
    """Bronze's change rows are older's before S and newer's from S, each
    once, each with the instance it came from."""
    want = [(r[:3], older_ci) for r in older if s is None or r[0] < s]
    if newer is not None:
        want += [(r[:3], V2) for r in newer if r[0] >= s]
    got = [((r["_start_lsn"], r["_seqval"], r["_operation"]), r["_capture_instance"])
           for r in bronze(d) if r["_operation"] != 0]
    keys = [k for k, _ in got]
    assert len(keys) == len(set(keys)), "bronze holds a change twice"
    missing = set(want) - set(got)
    extra = set(got) - set(want)
    assert not missing and not extra, (f"{len(missing)} missing, e.g. {sorted(missing)[:3]}; "
                                       f"{len(extra)} extra, e.g. {sorted(extra)[:3]}")
    assert sum(r["rows"] for r in facts(d) if r["event"] is None) == len(want)


def events(d, kind):
    return sorted((r for r in facts(d) if r["event"] == kind), key=lambda r: r["min_lsn"])


@pytest.fixture
def running():
    """Workloads and streams a test started, stopped whatever happens."""
    started = []
    yield started
    for x in started:
        if isinstance(x, Workload):
            x._stop.set()
        elif x.poll() is None:
            x.kill()
            x.wait()


# ---- the cases ----------------------------------------------------------------------

def test_add_a_column_switch_to_a_new_instance_and_drop_the_old_one(sim, workdir, running):
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=3, pace=0.005)
    w.preload(30)
    running.append(w.start())
    first = start_stream(sim, workdir)
    running.append(first)
    w.wait_for(20)
    # the schema change, then the DBA's procedure
    sim.run("ALTER TABLE dbo.orders ADD region NVARCHAR(20) NULL;", database=DB)
    spec.add(("region", "NVARCHAR(20) NULL", pa.string()))
    w.wait_for(15)
    s = enable_v2(sim)
    w.wait_for(15)
    # the running stream's schema lacks region: it stops at S, before reading past it
    _, err = first.communicate(timeout=60)
    assert first.returncode == 4, err
    assert "SchemaChangedError" in err and V2 in err and "region" in err, err
    assert max(r["_start_lsn"] for r in bronze(workdir)) < s
    # restarted, it infers the new schema and switches at S
    second = start_stream(sim, workdir)
    running.append(second)
    wait_until(lambda: switched(workdir), "the switch and one more batch")
    assert dba_query(workdir, s) == ["orders-v1"]
    old_rows = ct_rows(sim, "dbo_orders")  # before the old instance goes
    disable(sim, "dbo_orders")
    w.wait_for(15)
    w.stop()
    rc, err = stop_stream(second)
    assert rc == 0, err
    run_cli(*args(sim, workdir))
    new_rows = ct_rows(sim, V2, ", region")
    assert_bronze_is(workdir, old_rows, new_rows, s)
    # the events, with the reference's payloads
    (ev,) = events(workdir, "capture_instance_switched")
    assert ev["min_lsn"] == ev["max_lsn"] == ev["end_lsn"] == s and ev["rows"] == 0
    assert json.loads(ev["detail"]) == {"start_lsn": s, "not_captured": [],
                                        "text": f"dbo_orders -> {V2}"}
    batch = [r for r in facts(workdir) if r["event"] is None and r["batch_id"] == ev["batch_id"]]
    assert len(batch) == 1 and batch[0]["app_id"] == ev["app_id"]
    ddl = events(workdir, "schema_change")
    assert [r["detail"] for r in ddl] == ["ALTER TABLE dbo.orders ADD region NVARCHAR(20) NULL"]
    assert ddl[0]["batch_id"] is not None and ddl[0]["rows"] == 0
    # region's values are in bronze from S on
    region = {r[:3]: r[3] for r in new_rows if r[0] >= s}
    got = {(r["_start_lsn"], r["_seqval"], r["_operation"]): r["region"] for r in bronze(workdir)
           if r["_start_lsn"] >= s}
    assert got == region and any(v is not None for v in got.values())
    assert all(r["region"] is None for r in bronze(workdir) if r["_start_lsn"] < s)
    # the checkpoint is the same stream under the new instance's name...
    p = run_cli(*args(sim, workdir, ci=V2))
    assert p.returncode == 0
    # (a snapshot given the old name reads the new instance, new column and all)
    snap = os.path.join(workdir, "snap")
    p = run_cli("snapshot", "--captureInstance", "dbo_orders", "--connectionString",
                sim.connection_string(DB), "--target", snap)
    assert "is gone; following dbo_orders_v2" in p.stderr, p.stderr
    rows = delta_rows(snap)
    assert {r["_capture_instance"] for r in rows} == {V2}
    assert sorted((r["order_id"], r["region"]) for r in rows) == sorted(
        tuple(r) for r in sim.run("SELECT order_id, region FROM dbo.orders", database=DB))
    # ...and still refuses a capture instance of another table
    sim.run("CREATE TABLE dbo.other (id INT NOT NULL PRIMARY KEY); EXEC sys.sp_cdc_enable_table "
            "@source_schema = N'dbo', @source_name = N'other', @role_name = NULL;", database=DB)
    p = run_cli(*args(sim, workdir, ci="dbo_other"), check=False)
    assert p.returncode == 7 and "bound to capture instance" in p.stderr, p.stderr


def ddl_lsn(sim, like):
    return sim.run("SELECT CONVERT(varchar(22), ddl_lsn, 1) FROM cdc.ddl_history "
                   f"WHERE ddl_command LIKE N'%{like}%'", database=DB)[0][0]


def test_drop_a_column_and_a_running_stream_switches_in_place(sim, workdir, running):
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=5, pace=0.005)
    w.preload(30)
    running.append(w.start())
    stream = start_stream(sim, workdir)
    running.append(stream)
    w.wait_for(20)
    spec.drop("qty")  # the workload stops writing it first
    sim.run("ALTER TABLE dbo.orders DROP COLUMN qty;", database=DB)
    w.wait_for(15)
    # the new instance captures no new column (qty is gone): the running
    # stream's schema holds it, so it switches without stopping
    s = enable_v2(sim)
    wait_until(lambda: switched(workdir), "the switch and one more batch")
    assert stream.poll() is None, stream.stderr.read()
    old_rows = ct_rows(sim, "dbo_orders", ", qty")
    disable(sim, "dbo_orders")
    w.wait_for(15)
    w.stop()
    rc, err = stop_stream(stream)
    assert rc == 0, err
    run_cli(*args(sim, workdir))
    assert_bronze_is(workdir, old_rows, ct_rows(sim, V2), s)
    (ev,) = events(workdir, "capture_instance_switched")
    assert json.loads(ev["detail"]) == {
        "start_lsn": s, "not_captured": ["qty"],
        "text": f"dbo_orders -> {V2}; no longer captured, read as NULL: qty"}
    (ddl,) = events(workdir, "schema_change")
    assert ddl["detail"] == "ALTER TABLE dbo.orders DROP COLUMN qty"
    # bronze keeps the column: NULL after the drop, as CDC stores it
    drop = ddl["min_lsn"]
    rows = bronze(workdir)
    assert all(r["qty"] is None for r in rows if r["_start_lsn"] > drop)
    assert any(r["qty"] is not None for r in rows if r["_start_lsn"] < drop)


def test_widen_a_column_the_stream_type_holds_and_the_fail_policy(sim, workdir, running):
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=7, pace=0.005)
    w.preload(30)
    running.append(w.start())
    strict = start_stream(sim, workdir, extra=["--schemaChangePolicy", "fail"])
    running.append(strict)
    w.wait_for(20)
    sim.run("ALTER TABLE dbo.orders ALTER COLUMN status NVARCHAR(40) NULL;", database=DB)
    spec.long_status = True
    # schemaChangePolicy=fail: any DDL stops the batch before it is read
    _, err = strict.communicate(timeout=60)
    assert strict.returncode == 4, err
    assert "schemaChangePolicy=fail" in err and "ALTER COLUMN status" in err, err
    at = ddl_lsn(sim, "ALTER COLUMN status")
    assert max(r["_start_lsn"] for r in bronze(workdir)) < at
    # classify (the default): string holds the wider column; go on, record it
    stream = start_stream(sim, workdir)
    running.append(stream)
    w.wait_for(20)
    w.stop()
    rc, err = stop_stream(stream)
    assert rc == 0, err
    run_cli(*args(sim, workdir))
    assert_bronze_is(workdir, ct_rows(sim, "dbo_orders"))
    (ddl,) = events(workdir, "schema_change")
    assert ddl["detail"] == "ALTER TABLE dbo.orders ALTER COLUMN status NVARCHAR(40) NULL"
    assert ddl["min_lsn"] == at
    assert any(len(r["status"] or "") > 20 for r in bronze(workdir) if r["_start_lsn"] > at)


def test_a_widening_the_stream_type_cannot_hold_stops_before_the_batch(sim, workdir, running):
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=11, pace=0.005)
    w.preload(30)
    running.append(w.start())
    first = start_stream(sim, workdir)
    running.append(first)
    w.wait_for(20)
    sim.run("ALTER TABLE dbo.orders ALTER COLUMN qty BIGINT NULL;", database=DB)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 4, err
    assert "SchemaChangedError" in err and "qty bigint (read as int)" in err, err
    at = ddl_lsn(sim, "ALTER COLUMN qty")
    # whatever it read lies before the DDL, exactly once; nothing after it
    end = max(r["_start_lsn"] for r in bronze(workdir))
    assert end < at
    assert_bronze_is(workdir, [r for r in ct_rows(sim, "dbo_orders") if r[0] <= end])
    # a restart infers bigint, which bronze's int column cannot take
    p = run_cli(*args(sim, workdir), check=False)
    assert p.returncode == 4 and "holds column qty as int" in p.stderr, p.stderr
    # the way on: a new target, snapshotted, that reads qty as bigint
    new = os.path.join(workdir, "new")
    stream = start_stream(sim, new, extra=["--bootstrap"])
    running.append(stream)
    w.wait_for(20)
    w.stop()
    rc, err = stop_stream(stream)
    assert rc == 0, err
    run_cli(*args(sim, new))
    rows = bronze(new)
    snap = {r["_start_lsn"] for r in rows if r["_operation"] == 0}
    assert len(snap) == 1
    (s,) = snap
    assert_bronze_is(new, [r for r in ct_rows(sim, "dbo_orders") if r[0] > s])
    want = {r[:3]: r[3] for r in ct_rows(sim, "dbo_orders", ", qty") if r[0] > s}
    assert {(r["_start_lsn"], r["_seqval"], r["_operation"]): r["qty"]
            for r in rows if r["_operation"] != 0} == want


@pytest.mark.parametrize("point", ["switch_planned", "switch_read", "switch_committed",
                                   "switch_done"])
def test_kill_before_inside_and_after_the_switch_batch(sim, workdir, running, point):
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=13, pace=0.005)
    w.preload(30)
    running.append(w.start())
    w.wait_for(10)
    sim.run("ALTER TABLE dbo.orders ADD region NVARCHAR(20) NULL;", database=DB)
    spec.add(("region", "NVARCHAR(20) NULL", pa.string()))
    s = enable_v2(sim)
    w.wait_for(10)
    # the stream starts with both instances listed: it reads the union and
    # switches in place, and is killed there
    p = subprocess.run([CLI, *args(sim, workdir)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "MCDC_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, p.stderr
    stream = start_stream(sim, workdir)
    running.append(stream)
    wait_until(lambda: switched(workdir), "the switch and one more batch")
    old_rows = ct_rows(sim, "dbo_orders")
    disable(sim, "dbo_orders")
    w.wait_for(10)
    w.stop()
    rc, err = stop_stream(stream)
    assert rc == 0, err
    run_cli(*args(sim, workdir))
    new_rows = ct_rows(sim, V2, ", region")
    assert_bronze_is(workdir, old_rows, new_rows, s)
    (ev,) = events(workdir, "capture_instance_switched")
    assert ev["min_lsn"] == s
    got = {(r["_start_lsn"], r["_seqval"], r["_operation"]): r["region"] for r in bronze(workdir)
           if r["_start_lsn"] >= s}
    assert got == {r[:3]: r[3] for r in new_rows if r[0] >= s}


def test_an_instance_disabled_before_the_stream_switched_is_data_loss(sim, workdir):
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=17)
    w.preload(20)
    run_cli(*args(sim, workdir))
    for _ in range(5):  # changes only the old instance holds
        w.step()
    enable_v2(sim)
    for _ in range(5):
        w.step()
    # the DBA drops the old instance before the stream read up to the new one's start
    disable(sim, "dbo_orders")
    p = run_cli(*args(sim, workdir), check=False)
    assert p.returncode == 3, p.stderr
    assert "DataLossError" in p.stderr and "'dbo_orders'" in p.stderr
    assert "disabled too early" in p.stderr, p.stderr


def newer_cleaned_past_the_position(sim, d, seed):
    """The stream switched to the newer instance (its position records it),
    then the DBA cleans the newer one up past that position while the older
    one still holds those changes. (S, the position, the newer instance's
    change LSNs after it, the low water mark.)"""
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=seed)
    w.preload(20)
    run_cli(*args(sim, d))
    sim.run("ALTER TABLE dbo.orders ADD region NVARCHAR(20) NULL;", database=DB)
    spec.add(("region", "NVARCHAR(20) NULL", pa.string()))
    s = enable_v2(sim)
    for _ in range(5):
        w.step()
    run_cli(*args(sim, d))  # a new run's schema holds region: it switches at S
    assert len(events(d, "capture_instance_switched")) == 1
    position = max(r["_start_lsn"] for r in bronze(d))
    assert position >= s
    for _ in range(6):  # both instances capture these
        w.step()
    after = sorted({r[0] for r in ct_rows(sim, V2) if r[0] > position})
    assert len(after) >= 4
    low = after[2]  # past the position: the changes at after[0] and after[1] go
    sim.run(f"EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'{V2}', "
            f"@low_water_mark = {low}, @threshold = 5000;", database=DB)
    assert sim.run("SELECT CONVERT(varchar(22), start_lsn, 1) FROM cdc.change_tables "
                   f"WHERE capture_instance = N'{V2}'", database=DB)[0][0] == low
    assert [r for r in ct_rows(sim, "dbo_orders") if position < r[0] < low], \
        "the older instance still holds the changes the newer one lost"
    return s, position, after, low


def test_cleanup_of_the_newer_instance_past_the_position_is_its_loss_not_the_older_ones(
        sim, workdir):
    """Once the position records the newer instance, no batch reads the older
    one: a cleanup of the newer past the position is the newer one's loss,
    not a range the older one (without region) fills with NULLs."""
    s, position, after, low = newer_cleaned_past_the_position(sim, workdir, seed=29)
    p = run_cli(*args(sim, workdir), check=False)
    assert p.returncode == 3, p.stderr
    assert "DataLossError" in p.stderr and f"capture instance {V2}:" in p.stderr, p.stderr
    assert "disabled too early" not in p.stderr, p.stderr
    # nothing after the switch came from the older instance, nothing past the position
    changes = [r for r in bronze(workdir) if r["_operation"] != 0]
    assert {r["_capture_instance"] for r in changes if r["_start_lsn"] >= s} == {V2}
    assert max(r["_start_lsn"] for r in changes) == position
    # failOnDataLoss=false skips the newer one's gap and reads it on, region and all
    run_cli(*args(sim, workdir, extra=["--failOnDataLoss", "false"]))
    changes = [r for r in bronze(workdir) if r["_operation"] != 0]
    assert {r["_capture_instance"] for r in changes if r["_start_lsn"] >= s} == {V2}
    got = {(r["_start_lsn"], r["_seqval"], r["_operation"]): r["region"] for r in changes
           if r["_start_lsn"] > position}
    assert got == {r[:3]: r[3] for r in ct_rows(sim, V2, ", region") if r[0] > position}
    assert not any(position < k[0] < low for k in got)
    (skip,) = [r for r in facts(workdir) if r["event"] == "data_skipped"]
    assert position < skip["min_lsn"] <= after[0] and skip["max_lsn"] < low, skip


def test_cleanup_of_the_newer_instance_past_the_position_resnapshots(sim, workdir):
    """--on-data-loss resnapshot sees the newer instance's loss before the
    first batch (the older instance's rows do not hide it) and snapshots
    the table into a new generation."""
    s, position, _, low = newer_cleaned_past_the_position(sim, workdir, seed=31)
    run_cli(*args(sim, workdir, extra=["--on-data-loss", "resnapshot",
                                       "--resnapshot-interval-days", "0"]))
    (re,) = events(workdir, "resnapshot")
    assert re["app_id"] == "orders-v1.g1"
    changes = [r for r in bronze(workdir) if r["_operation"] != 0]
    assert {r["_capture_instance"] for r in changes if r["_start_lsn"] >= s} == {V2}
    assert not any(position < r["_start_lsn"] < low for r in changes)


def test_a_missing_select_on_the_new_change_table_names_the_grant(sim, workdir):
    spec = Orders()
    make_table(sim, spec)
    sim.run("CREATE LOGIN cdc_reader WITH PASSWORD = 'Reader_Passw0rd'; "
            "CREATE USER cdc_reader FOR LOGIN cdc_reader; GRANT SELECT ON dbo.orders TO cdc_reader; "
            "GRANT SELECT ON cdc.dbo_orders_CT TO cdc_reader;", database=DB)
    cs = sim.connection_string(DB, user="cdc_reader", password="Reader_Passw0rd")
    reader = args(sim, workdir)
    reader[reader.index("--connectionString") + 1] = cs
    w = Workload(sim, spec, seed=19)
    w.preload(20)
    run_cli(*reader)
    s = enable_v2(sim)
    for _ in range(5):
        w.step()
    p = run_cli(*reader, check=False)
    assert p.returncode == 5, p.stderr
    assert "PermissionError" in p.stderr
    assert f"GRANT SELECT ON cdc.[{V2}_CT] TO [cdc_reader];" in p.stderr, p.stderr
    sim.run(f"GRANT SELECT ON cdc.[{V2}_CT] TO cdc_reader;", database=DB)
    run_cli(*reader)
    assert_bronze_is(workdir, ct_rows(sim, "dbo_orders"), ct_rows(sim, V2), s)


def test_a_bootstrap_reads_a_column_only_the_newer_instance_captures(sim, workdir):
    spec = Orders()
    make_table(sim, spec)
    w = Workload(sim, spec, seed=23)
    w.preload(20)
    sim.run("ALTER TABLE dbo.orders ADD region NVARCHAR(20) NULL;", database=DB)
    spec.add(("region", "NVARCHAR(20) NULL", pa.string()))
    enable_v2(sim)
    for _ in range(5):
        w.step()
    run_cli(*args(sim, workdir, extra=["--bootstrap"]))
    rows = [r for r in bronze(workdir) if r["_operation"] == 0]
    assert {r["_capture_instance"] for r in rows} == {"dbo_orders"}
    assert sorted((r["order_id"], r["region"]) for r in rows) == sorted(
        tuple(r) for r in sim.run("SELECT order_id, region FROM dbo.orders", database=DB))
    assert any(r["region"] is not None for r in rows)
