"""A snapshot right after sys.sp_cdc_enable_table, in a database where other
tables already use CDC (issue 22): SQL Server leaves the new instance's
cdc.change_tables.start_lsn NULL (and sys.fn_cdc_get_min_lsn at 0x00...)
until its capture job has processed the enable. A snapshot stamped with the
database's max_lsn, below the instance's start LSN set a moment later, looks
to every later stream run like changes CDC cleanup purged. The snapshot waits
for the start LSN and stands just before it.

The simulator here scans only on EXEC sim.run_capture (--capture-poll-ms 0),
so capture is held for as long as a test wants: no timing luck."""
import json
import os
import subprocess
import time

import pytest
from deltalake import DeltaTable

from conftest import CLI, Sim, run_cli
from test_snapshot import COLUMNS, rebuild, source_rows, stream_args

ZERO = "0x00000000000000000000"


@pytest.fixture
def held(workdir):
    data = os.path.join(workdir, "sim")
    os.makedirs(data)
    s = Sim(data, ["--capture-poll-ms", "0", "--capture-latency-ms", "0"])
    yield s
    s.stop()


def capture(sim):
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def lsn_of(sim, expr):
    return sim.run(f"SELECT CONVERT(varchar(22), {expr}, 1)", database="shop")[0][0]


def enable_late(sim, rows=20, gap=False):
    """shop with dbo.other captured and changed (max_lsn is not zero, and
    returned), then a commit to dbo.other capture has not read yet (a busy
    database), then dbo.orders holding `rows` rows enabled, its enable not
    yet processed. gap: that commit updates a row of dbo.orders too, which
    no capture instance holds."""
    sim.run("CREATE DATABASE shop;")
    sim.run("CREATE TABLE dbo.other (id INT NOT NULL PRIMARY KEY, v INT NULL);"
            "CREATE TABLE dbo.orders (order_id INT NOT NULL PRIMARY KEY, customer_id INT NULL, "
            "status NVARCHAR(20) NULL, amount DECIMAL(18,2) NULL, created_at DATETIME2(3) NULL);",
            database="shop")
    values = ",".join(f"({i}, {i % 5}, N'st{i}', {i}.5, '2025-03-01 08:00:00')"
                      for i in range(1, rows + 1))
    sim.run(f"INSERT INTO dbo.orders VALUES {values};", database="shop")
    sim.run("EXEC sys.sp_cdc_enable_db;"
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'other', "
            "@role_name = NULL;", database="shop")
    capture(sim)
    sim.run("INSERT INTO dbo.other VALUES (1, 1), (2, 2); UPDATE dbo.other SET v = 3;",
            database="shop")
    capture(sim)
    before = lsn_of(sim, "sys.fn_cdc_get_max_lsn()")
    sim.run(("UPDATE dbo.orders SET status = N'unseen' WHERE order_id = 1;" if gap else "") +
            "UPDATE dbo.other SET v = 4;", database="shop")
    sim.run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
            "@role_name = NULL;", database="shop")
    return before


def changes(sim, first):
    sim.run(f"INSERT INTO dbo.orders VALUES ({first}, 1, N'new', 1.5, NULL);"
            "UPDATE dbo.orders SET status = N'upd' WHERE order_id = 2;"
            "DELETE FROM dbo.orders WHERE order_id = 3;", database="shop")
    capture(sim)


def snapshot_args(sim, d, *extra):
    return ["snapshot", "--captureInstance", "dbo_orders",
            "--connectionString", sim.connection_string("shop"),
            "--target", os.path.join(d, "bronze"), *extra]


def spawn(args):
    return subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def release_after(sim, p, seconds):
    """Capture processes the enable once p has waited `seconds`."""
    time.sleep(seconds)
    assert p.poll() is None, p.communicate()
    capture(sim)
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err


def test_the_simulator_leaves_the_start_lsn_null_until_capture_processes_the_enable(held):
    enable_late(held)
    row = held.run("SELECT start_lsn FROM cdc.change_tables WHERE capture_instance = 'dbo_orders'",
                   database="shop")
    assert row == [(None,)]
    assert lsn_of(held, "sys.fn_cdc_get_min_lsn('dbo_orders')") == ZERO
    assert lsn_of(held, "sys.fn_cdc_get_max_lsn()") > ZERO  # the other table's changes
    capture(held)
    start = lsn_of(held, "sys.fn_cdc_get_min_lsn('dbo_orders')")
    assert start > lsn_of(held, "sys.fn_cdc_get_max_lsn()")
    # SQL Server keeps no cdc.lsn_time_mapping row at a new instance's start
    # (the enable is no transaction with change rows): no commit time there
    t = held.run(f"SELECT sys.fn_cdc_map_lsn_to_time(CONVERT(binary(10), '{start}', 1))",
                 database="shop")
    assert t == [(None,)]


def test_a_snapshot_waits_for_the_start_lsn_and_the_stream_after_it_loses_nothing(held,
                                                                                 workdir):
    enable_late(held)
    p = spawn(snapshot_args(held, workdir))
    rc, out, err = release_after(held, p, 2.5)
    assert rc == 0, err
    assert "waiting" in err and "start_lsn" in err, err
    start = lsn_of(held, "sys.fn_cdc_get_min_lsn('dbo_orders')")
    stamp = json.loads(out)["lsn"]
    assert stamp == lsn_of(held, f"sys.fn_cdc_decrement_lsn(CONVERT(binary(10), '{start}', 1))")
    # every later stream run goes on from it: nothing was lost, nothing is
    changes(held, 100)
    for first in (200, 300):
        run_cli(*stream_args(held, workdir, "--startingLsn", stamp))
        changes(held, first)
    run_cli(*stream_args(held, workdir, "--startingLsn", stamp))
    bronze = os.path.join(workdir, "bronze")
    assert rebuild(bronze) == source_rows(held)
    facts = DeltaTable(os.path.join(workdir, "facts")).to_pyarrow_table().to_pylist()
    assert not [r for r in facts if r["event"] == "data_skipped"], facts


def test_a_snapshot_that_capture_never_answers_is_not_ready(held, workdir):
    enable_late(held)
    t0 = time.monotonic()
    p = run_cli(*snapshot_args(held, workdir, "--captureWaitSeconds", "1"), check=False)
    assert p.returncode == 22, (p.returncode, p.stderr)
    assert "capture job" in p.stderr and "dbo_orders" in p.stderr, p.stderr
    assert time.monotonic() - t0 < 30
    assert not os.path.exists(os.path.join(workdir, "bronze", "_delta_log"))


@pytest.mark.parametrize("mode", ["full", "chunked"])
def test_a_bootstrap_waits_too_full_or_chunked(held, workdir, mode):
    enable_late(held)
    p = spawn(stream_args(held, workdir, "--bootstrap", "--snapshot", mode))
    rc, out, err = release_after(held, p, 2.5)
    assert rc == 0, err
    assert "waiting" in err, err
    start = lsn_of(held, "sys.fn_cdc_get_min_lsn('dbo_orders')")
    before = lsn_of(held, f"sys.fn_cdc_decrement_lsn(CONVERT(binary(10), '{start}', 1))")
    facts = DeltaTable(os.path.join(workdir, "facts")).to_pyarrow_table().to_pylist()
    (opened,) = [r for r in facts if r["event"] == "snapshot_open"]
    assert opened["min_lsn"] == before, (opened, start)
    changes(held, 100)
    p = run_cli(*stream_args(held, workdir, "--snapshot", mode), check=False)
    assert p.returncode == 0, p.stderr
    if mode == "full":
        assert rebuild(os.path.join(workdir, "bronze")) == source_rows(held)


def test_a_seed_waits_for_the_start_lsn_and_refuses_a_copy_older_than_the_instance(held,
                                                                                  workdir):
    import pyarrow as pa
    from deltalake import write_deltalake
    old = enable_late(held, gap=True)  # a commit no change table holds came after it
    rows = held.run("SELECT order_id FROM dbo.orders", database="shop")
    copy = os.path.join(workdir, "copy")
    write_deltalake(copy, pa.table({"order_id": pa.array([r[0] for r in rows], pa.int32())}))
    seed = ["seed", "--captureInstance", "dbo_orders",
            "--connectionString", held.connection_string("shop"),
            "--target", os.path.join(workdir, "bronze"), "--from", copy,
            "--allow-missing-columns"]
    p = spawn([*seed, "--as-of", old])
    rc, out, err = release_after(held, p, 2.5)
    assert rc == 3 and "waiting" in err and "after the copy was read" in err, (rc, err)
    assert not os.path.exists(os.path.join(workdir, "bronze", "_delta_log"))
    changes(held, 100)
    p = run_cli(*seed, "--as-of", lsn_of(held, "sys.fn_cdc_get_max_lsn()"))
    assert json.loads(p.stdout)["lsn"] > old


def test_retention_metrics_are_null_while_min_lsn_is_no_commit_as_the_reference_writes(held,
                                                                                      workdir):
    """A new instance's min_lsn is its start LSN, which cdc.lsn_time_mapping
    does not hold (the enable is no transaction with change rows):
    sys.fn_cdc_map_lsn_to_time gives NULL there, and the reference writes
    NULL retention_watermark_ts and retention_headroom_hours. Once cleanup
    moves min_lsn to a mapping entry (it only takes those), both are set."""
    enable_late(held)
    capture(held)
    changes(held, 100)
    run_cli(*stream_args(held, workdir))
    facts = os.path.join(workdir, "facts")
    batches = [r for r in DeltaTable(facts).to_pyarrow_table().to_pylist() if r["event"] is None]
    assert batches and all(r["retention_watermark_ts"] is None and
                           r["retention_headroom_hours"] is None for r in batches), batches
    low = lsn_of(held, "sys.fn_cdc_get_max_lsn()")
    held.run(f"""EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders',
             @low_water_mark = {low}, @threshold = 5000;""", database="shop")
    assert lsn_of(held, "sys.fn_cdc_get_min_lsn('dbo_orders')") == low
    changes(held, 200)
    run_cli(*stream_args(held, workdir))
    last = max((r for r in DeltaTable(facts).to_pyarrow_table().to_pylist()
                if r["event"] is None), key=lambda r: r["batch_id"])
    mapped = held.run(f"SELECT sys.fn_cdc_map_lsn_to_time({low})", database="shop")[0][0]
    assert last["retention_watermark_ts"] == mapped, (last, mapped)
    assert last["retention_headroom_hours"] is not None
