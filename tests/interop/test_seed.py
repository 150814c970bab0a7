"""mssql-cdc seed: a copy of the table the user has (Delta or Parquet) appended
to bronze as its snapshot; every check of the seed documentation."""
import datetime as dt
import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from conftest import run_cli
from test_snapshot import (COLUMNS, insert, make_db, rebuild, rebuild_duckdb, source_rows,
                           stream_args)


def max_lsn(sim):
    return sim.run("SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)",
                   database="shop")[0][0]


def copy_of_source(sim, drop=(), rename=None):
    rows = sim.run("SELECT order_id, customer_id, status, amount, created_at FROM dbo.orders",
                   database="shop")
    cols = {c: [r[i] for r in rows] for i, c in enumerate(COLUMNS) if c not in drop}
    if rename:
        cols = {rename.get(k, k): v for k, v in cols.items()}
    types = {"order_id": pa.int32(), "ORDER_ID": pa.int32(), "customer_id": pa.int64(),
             "status": pa.string(), "amount": pa.decimal128(18, 2), "created_at": pa.timestamp("us")}
    return pa.table({k: pa.array(v, type=types.get(k, pa.string())) for k, v in cols.items()})


def seed_args(sim, d, copy, as_of, *extra):
    return ["seed", "--captureInstance", "dbo_orders",
            "--connectionString", sim.connection_string("shop"),
            "--target", os.path.join(d, "bronze"), "--from", copy, "--as-of", as_of, *extra]


def settle(sim):
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def test_seed_from_a_delta_copy_then_bootstrap_continues_from_it(sim, workdir):
    make_db(sim, before_cdc=50)
    insert(sim, 100, 5)
    settle(sim)
    as_of = max_lsn(sim)  # recorded before the copy is read
    copy = os.path.join(workdir, "copy")
    write_deltalake(copy, copy_of_source(sim))
    # changes while and after the copy was made: the stream replays them
    insert(sim, 200, 5)
    sim.run("UPDATE dbo.orders SET status = N'late' WHERE order_id <= 10;"
            "DELETE FROM dbo.orders WHERE order_id = 101;", database="shop")
    settle(sim)
    p = run_cli(*seed_args(sim, workdir, copy, as_of, "--app-id", "orders-v1",
                           "--facts-table", os.path.join(workdir, "facts")))
    off = json.loads(p.stdout)
    assert off["lsn"] == as_of and off["commit_ts"]
    bronze = os.path.join(workdir, "bronze")
    t = DeltaTable(bronze)
    assert json.loads(t.history(1)[0]["userMetadata"]) == \
        {"seed": "dbo_orders", "lsn": as_of, "commit_ts": off["commit_ts"]}
    rows = t.to_pyarrow_table().to_pylist()
    assert len(rows) == 55 and {(r["_operation"], r["_snapshot"]) for r in rows} == {(0, as_of)}
    facts = DeltaTable(os.path.join(workdir, "facts")).to_pyarrow_table().to_pylist()
    assert [(r["event"], r["min_lsn"], r["rows"]) for r in facts] == [("bootstrap", as_of, 55)]
    # a rerun with the same as_of returns the seed already written
    p = run_cli(*seed_args(sim, workdir, copy, as_of))
    assert json.loads(p.stdout) == off and "nothing written" in p.stderr
    assert len(DeltaTable(bronze).to_pyarrow_table()) == 55
    # the stream's bootstrap finds it and goes on from its LSN
    run_cli(*stream_args(sim, workdir, "--bootstrap"))
    assert rebuild(bronze) == source_rows(sim)
    assert rebuild_duckdb(bronze) == source_rows(sim)
    facts = DeltaTable(os.path.join(workdir, "facts")).to_pyarrow_table().to_pylist()
    assert sum(1 for r in facts if r["event"] == "bootstrap") == 1


def test_seed_from_parquet_by_time_with_columns_matched_ignoring_case(sim, workdir):
    make_db(sim, before_cdc=18)
    insert(sim, 19, 2)  # a commit CDC maps: the as_of time maps to it
    settle(sim)
    time.sleep(1.1)
    as_of = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    copy = os.path.join(workdir, "parquet")
    os.makedirs(copy)
    pq.write_table(copy_of_source(sim, rename={"order_id": "ORDER_ID"}),
                   os.path.join(copy, "part-0.parquet"))
    p = run_cli(*seed_args(sim, workdir, copy, as_of))
    off = json.loads(p.stdout)
    assert off["lsn"] == max_lsn(sim), (off, as_of)
    rows = DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table().to_pylist()
    assert sorted(r["order_id"] for r in rows) == list(range(1, 21))


def test_seed_refusals_write_nothing(sim, workdir):
    make_db(sim, before_cdc=4)
    insert(sim, 5, 1)
    settle(sim)
    copy = os.path.join(workdir, "copy")
    write_deltalake(copy, copy_of_source(sim, drop=("status",)))
    bronze = os.path.join(workdir, "bronze")
    now = max_lsn(sim)
    # a missing column: an error naming it; NULL with --allow-missing-columns
    p = run_cli(*seed_args(sim, workdir, copy, now), check=False)
    assert p.returncode == 2 and "'status'" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(bronze, "_delta_log"))
    # an as_of in the future
    future = "0x7FFFFFFF000000000001"
    p = run_cli(*seed_args(sim, workdir, copy, future, "--allow-missing-columns"), check=False)
    assert p.returncode == 2 and "beyond the server's max_lsn" in p.stderr, p.stderr
    p = run_cli(*seed_args(sim, workdir, copy, "not-a-time"), check=False)
    assert p.returncode == 2 and "neither an LSN" in p.stderr
    # an as_of older than every commit (or purged): the changes since are gone
    p = run_cli(*seed_args(sim, workdir, copy, "2001-01-01T00:00:00Z", "--allow-missing-columns"),
                check=False)
    assert p.returncode == 3 and "DataLossError" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(bronze, "_delta_log"))
    # the seed, then another as_of is refused unless --reseed with a newer one
    run_cli(*seed_args(sim, workdir, copy, now, "--allow-missing-columns"))
    rows = DeltaTable(bronze).to_pyarrow_table().to_pylist()
    assert len(rows) == 5 and all(r["status"] is None for r in rows)
    insert(sim, 50, 1)
    settle(sim)
    later = max_lsn(sim)
    p = run_cli(*seed_args(sim, workdir, copy, later, "--allow-missing-columns"), check=False)
    assert p.returncode == 2 and "--reseed" in p.stderr
    p = run_cli(*seed_args(sim, workdir, copy, now, "--allow-missing-columns", "--reseed"),
                check=False)
    assert p.returncode == 0  # the same as_of: the seed already there, whatever --reseed says
    insert(sim, 60, 1)
    settle(sim)
    p = run_cli(*seed_args(sim, workdir, copy, later, "--allow-missing-columns", "--reseed"))
    assert json.loads(p.stdout)["lsn"] == later
    # an open snapshot of the stream is refused: a bootstrap killed while reading
    facts = os.path.join(workdir, "facts")
    d2 = os.path.join(workdir, "other")
    p = run_cli(*stream_args(sim, d2, "--bootstrap", "--arrowBatchSize", "1"),
                env={"MCDC_CRASH_AT": "during_snapshot"}, check=False)
    assert p.returncode < 0
    p = run_cli("seed", "--captureInstance", "dbo_orders",
                "--connectionString", sim.connection_string("shop"),
                "--target", os.path.join(d2, "bronze"), "--from", copy, "--as-of", later,
                "--allow-missing-columns", "--app-id", "orders-v1",
                "--facts-table", os.path.join(d2, "facts"), check=False)
    assert p.returncode == 18 and "full snapshot open" in p.stderr, p.stderr
    assert not os.path.exists(facts)


# ---- what --from must hold (issue 22) ------------------------------------------------

def seeded_db(sim, n=6):
    """shop.dbo.orders with n rows, captured, and the LSN a copy of it now has."""
    make_db(sim, before_cdc=n)
    insert(sim, 1000, 1)
    sim.run("DELETE FROM dbo.orders WHERE order_id = 1000;", database="shop")
    settle(sim)
    return max_lsn(sim)


def test_a_copy_that_is_missing_or_holds_no_table_is_refused(sim, workdir):
    as_of = seeded_db(sim)
    bronze = os.path.join(workdir, "bronze")
    empty_dir = os.path.join(workdir, "empty")
    os.makedirs(empty_dir)
    other = os.path.join(workdir, "other")
    os.makedirs(other)
    with open(os.path.join(other, "notes.txt"), "w") as f:
        f.write("no parquet here")
    missing = os.path.join(workdir, "nowhere")
    for copy in (missing, empty_dir, other, os.path.join(workdir, "empty", "part-*.parquet")):
        p = run_cli(*seed_args(sim, workdir, copy, as_of), check=False)
        assert p.returncode == 2, (copy, p.returncode, p.stderr)
        assert copy in p.stderr and ".parquet" in p.stderr and "Delta" in p.stderr, p.stderr
        assert not os.path.exists(os.path.join(bronze, "_delta_log")), copy


def test_an_empty_copy_is_refused_unless_allowed_and_then_the_bootstrap_starts_from_it(sim,
                                                                                       workdir):
    # the table is empty when the copy is read: the copy rightly holds no row
    as_of = seeded_db(sim, n=0)
    copy = os.path.join(workdir, "copy")
    write_deltalake(copy, copy_of_source(sim))
    assert len(DeltaTable(copy).to_pyarrow_table()) == 0
    insert(sim, 1, 7)  # after the copy: the stream brings them
    settle(sim)
    facts = os.path.join(workdir, "facts")
    bronze = os.path.join(workdir, "bronze")
    seed = seed_args(sim, workdir, copy, as_of, "--app-id", "orders-v1", "--facts-table", facts)
    p = run_cli(*seed, check=False)
    assert p.returncode == 2 and "no row" in p.stderr and "--allow-empty" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(bronze, "_delta_log"))
    assert not os.path.exists(facts)
    p = run_cli(*seed, "--allow-empty")
    off = json.loads(p.stdout)
    assert off["lsn"] == as_of and "seeded 0 rows" in p.stderr, p.stderr
    # a rerun finds the empty seed, as a rerun finds any other
    p = run_cli(*seed, "--allow-empty")
    assert json.loads(p.stdout) == off and "nothing written" in p.stderr, p.stderr
    # the bootstrap takes the empty seed as the snapshot: it reads no table
    run_cli(*stream_args(sim, workdir, "--bootstrap"))
    rows = DeltaTable(facts).to_pyarrow_table().to_pylist()
    assert [r["event"] for r in rows if r["event"]] == ["bootstrap"], rows
    assert not [r for r in DeltaTable(bronze).to_pyarrow_table().to_pylist()
                if r["_operation"] == 0]
    changes = sorted(r["order_id"] for r in DeltaTable(bronze).to_pyarrow_table().to_pylist())
    assert changes == list(range(1, 8))


def test_an_empty_snapshot_counts_for_a_seed_too(sim, workdir):
    """The other way round: a snapshot of an empty table, which a bootstrap
    would start from, is a snapshot a seed does not write over."""
    as_of = seeded_db(sim, n=0)
    run_cli(*snapshot_args_for(sim, workdir))
    copy = os.path.join(workdir, "copy")
    write_deltalake(copy, copy_of_source(sim))
    insert(sim, 1, 1)
    settle(sim)
    p = run_cli(*seed_args(sim, workdir, copy, max_lsn(sim), "--allow-empty"), check=False)
    assert p.returncode == 2 and "holds a snapshot" in p.stderr, p.stderr
    assert as_of <= max_lsn(sim)


def snapshot_args_for(sim, d):
    return ["snapshot", "--captureInstance", "dbo_orders",
            "--connectionString", sim.connection_string("shop"),
            "--target", os.path.join(d, "bronze")]


def test_seed_from_one_parquet_file_or_a_glob_of_them(sim, workdir):
    as_of = seeded_db(sim, n=10)
    whole = copy_of_source(sim)
    parts = os.path.join(workdir, "parts")
    os.makedirs(parts)
    pq.write_table(whole.slice(0, 4), os.path.join(parts, "part-0.parquet"))
    pq.write_table(whole.slice(4), os.path.join(parts, "part-1.parquet"))
    pq.write_table(whole.slice(0, 1), os.path.join(parts, "other-0.parquet"))
    with open(os.path.join(parts, "_SUCCESS"), "w"):
        pass
    one = os.path.join(workdir, "one")
    p = run_cli(*seed_args(sim, one, os.path.join(parts, "part-0.parquet"), as_of))
    assert json.loads(p.stdout)["lsn"] == as_of
    got = DeltaTable(os.path.join(one, "bronze")).to_pyarrow_table().to_pylist()
    assert sorted(r["order_id"] for r in got) == [1, 2, 3, 4]
    globbed = os.path.join(workdir, "globbed")
    run_cli(*seed_args(sim, globbed, os.path.join(parts, "part-*.parquet"), as_of))
    got = DeltaTable(os.path.join(globbed, "bronze")).to_pyarrow_table().to_pylist()
    assert sorted(r["order_id"] for r in got) == list(range(1, 11))
    assert rebuild(os.path.join(globbed, "bronze")) == source_rows(sim)
    # a file that is not there, and a glob that matches nothing
    for copy in (os.path.join(parts, "part-9.parquet"), os.path.join(parts, "x-*.parquet")):
        p = run_cli(*seed_args(sim, os.path.join(workdir, "none"), copy, as_of), check=False)
        assert p.returncode == 2 and copy in p.stderr, p.stderr


def test_a_copy_with_two_rows_of_one_key_is_refused(sim, workdir):
    as_of = seeded_db(sim, n=6)
    whole = copy_of_source(sim)
    dup = pa.concat_tables([whole, whole.slice(3, 1)])  # order_id 4 twice
    copy = os.path.join(workdir, "copy")
    write_deltalake(copy, dup)
    bronze = os.path.join(workdir, "bronze")
    p = run_cli(*seed_args(sim, workdir, copy, as_of), check=False)
    assert p.returncode == 21, (p.returncode, p.stderr)
    assert "holds two rows of one key (order_id=4;" in p.stderr, p.stderr
    assert "reading" not in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(bronze, "_delta_log"))
    # snapshotKeys only cut ranges and need not be unique: the unique index is checked
    p = run_cli(*seed_args(sim, workdir, copy, as_of, "--snapshotKeys", '["status"]'),
                check=False)
    assert p.returncode == 21 and "order_id=4" in p.stderr, p.stderr
    whole_copy = os.path.join(workdir, "whole")
    write_deltalake(whole_copy, whole)
    run_cli(*seed_args(sim, workdir, whole_copy, as_of, "--snapshotKeys", '["status"]'))
    assert rebuild(bronze) == source_rows(sim)


def test_a_table_without_a_unique_key_is_seeded_unchecked(sim, workdir):
    sim.run("CREATE DATABASE shop;")
    sim.run("CREATE TABLE dbo.orders (order_id INT NULL, customer_id INT NULL, "
            "status NVARCHAR(20) NULL, amount DECIMAL(18,2) NULL, created_at DATETIME2(3) NULL);",
            database="shop")
    sim.run("INSERT INTO dbo.orders VALUES (1, 1, N'a', 1.5, NULL), (1, 1, N'a', 1.5, NULL);",
            database="shop")
    sim.run(CDC_HEAP, database="shop")
    insert(sim, 50, 1)
    settle(sim)
    copy = os.path.join(workdir, "copy")
    write_deltalake(copy, copy_of_source(sim))
    p = run_cli(*seed_args(sim, workdir, copy, max_lsn(sim), "--verbose"))
    assert "no unique key" in p.stderr, p.stderr
    assert len(DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table()) == 3


CDC_HEAP = """EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL;"""


def test_one_table_as_target_and_facts_table_is_refused_before_anything_is_written(sim, workdir):
    """The frame's check of the tables' roles holds for a seed and a snapshot
    too: one location as --target and --facts-table (or one inside the
    other) would mix bronze rows and facts rows in one table (exit 7)."""
    make_db(sim, before_cdc=5)
    insert(sim, 100, 2)
    settle(sim)
    as_of = max_lsn(sim)
    copy = os.path.join(workdir, "copy")
    write_deltalake(copy, copy_of_source(sim))
    bronze = os.path.join(workdir, "bronze")
    for facts in (bronze, os.path.join(bronze, "facts")):
        p = run_cli(*seed_args(sim, workdir, copy, as_of, "--app-id", "orders-v1",
                               "--facts-table", facts), check=False)
        assert not os.path.exists(bronze), (os.listdir(bronze), p.stderr)
        assert p.returncode == 7 and "a place of its own" in p.stderr, (p.returncode, p.stderr)
        p = run_cli(*snapshot_args_for(sim, workdir), "--app-id", "orders-v1", "--facts-table",
                    facts, check=False)
        assert not os.path.exists(bronze), (os.listdir(bronze), p.stderr)
        assert p.returncode == 7 and "a place of its own" in p.stderr, (p.returncode, p.stderr)
