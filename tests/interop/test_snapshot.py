"""Whole snapshots: `mssql-cdc snapshot` and `stream --bootstrap --snapshot full`.

The table rebuilt from bronze (the newest snapshot S's rows, then the changes
with _start_lsn after S, the latest per key, deleted keys dropped) equals the
source table read through pymssql, row for row, every column."""
import json
import os
import signal
import subprocess
import threading
import time

from deltalake import DeltaTable

from conftest import CLI, run_cli

SETUP = "CREATE DATABASE shop;"
TABLE = """
CREATE TABLE dbo.orders (
    order_id INT NOT NULL PRIMARY KEY,
    customer_id INT NULL,
    status NVARCHAR(20) NULL,
    amount DECIMAL(18,2) NULL,
    created_at DATETIME2(3) NULL);
"""
CDC = """EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL;"""
COLUMNS = ["order_id", "customer_id", "status", "amount", "created_at"]


def insert(sim, first, n):
    for lo in range(first, first + n, 500):
        values = ",".join(f"({i}, {i % 5}, N'st-\u00e9{i}', {i}.5, '2025-03-0{1 + i % 9} 08:00:00')"
                          for i in range(lo, min(lo + 500, first + n)))
        sim.run(f"INSERT INTO dbo.orders (order_id, customer_id, status, amount, created_at) "
                f"VALUES {values};", database="shop")


def make_db(sim, before_cdc=0):
    sim.run(SETUP)
    sim.run(TABLE, database="shop")
    if before_cdc:
        insert(sim, 1, before_cdc)  # rows no change table holds: only a snapshot has them
    sim.run(CDC, database="shop")


def source_rows(sim):
    rows = sim.run("SELECT order_id, customer_id, status, amount, created_at FROM dbo.orders "
                   "ORDER BY order_id", database="shop")
    return [tuple(r) for r in rows]


def rebuild(bronze_path):
    """The downstream view (docs/rebuild.md): snapshot S's rows, then the changes
    after S in commit order, the latest image per key, deletes dropping keys."""
    rows = DeltaTable(bronze_path).to_pyarrow_table().to_pylist()
    snaps = [r for r in rows if r["_operation"] == 0]
    s = max((r["_snapshot"] or r["_start_lsn"]) for r in snaps)
    state = {r["order_id"]: r for r in snaps if (r["_snapshot"] or r["_start_lsn"]) == s}
    changes = sorted((r for r in rows if r["_operation"] != 0 and r["_start_lsn"] > s),
                     key=lambda r: (r["_start_lsn"], r["_command_id"], r["_seqval"],
                                    r["_operation"]))
    for r in changes:
        if r["_operation"] == 1:
            state.pop(r["order_id"], None)
        elif r["_operation"] in (2, 4):
            state[r["order_id"]] = r
    return sorted(tuple(r[c] for c in COLUMNS) for r in state.values())


def rebuild_duckdb(bronze_path, facts_path=None):
    """The query of docs/rebuild.md, run by DuckDB's delta extension (the
    facts table next to bronze by default; without one, no chunked snapshot
    counts as complete)."""
    from conftest import duckdb_with_delta
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "rebuild.md")).read()
    sql = doc.split("```sql", 1)[1].split("```", 1)[0].replace("lake/bronze", bronze_path)
    facts_path = facts_path or os.path.join(os.path.dirname(bronze_path), "facts")
    none = "(SELECT NULL::VARCHAR AS max_lsn, NULL::VARCHAR AS event, NULL::VARCHAR AS target WHERE false)"
    sql = sql.replace("delta_scan('lake/facts')",
                      f"delta_scan('{facts_path}')" if os.path.exists(facts_path) else none)
    sql = sql.strip().rstrip(";")
    con = duckdb_with_delta()
    got = con.execute(f"SELECT {', '.join(COLUMNS)} FROM ({sql}) ORDER BY order_id").fetchall()
    return sorted(tuple(r) for r in got)


def snapshot_args(sim, d, *extra):
    return ["snapshot", "--captureInstance", "dbo_orders",
            "--connectionString", sim.connection_string("shop"),
            "--target", os.path.join(d, "bronze"), *extra]


def stream_args(sim, d, *extra, trigger="availableNow"):
    return ["stream", "--captureInstance", "dbo_orders",
            "--connectionString", sim.connection_string("shop"),
            "--target", os.path.join(d, "bronze"), "--app-id", "orders-v1",
            "--checkpoint", os.path.join(d, "ckpt"), "--facts-table", os.path.join(d, "facts"),
            "--control-table", os.path.join(d, "control"), "--trigger", trigger, *extra]


def test_snapshot_appends_the_table_once_and_reruns_return_its_offset(sim, workdir):
    make_db(sim, before_cdc=40)
    sim.run("UPDATE dbo.orders SET status = N'paid' WHERE order_id <= 5;", database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    max_lsn = sim.run("SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)",
                      database="shop")[0][0]
    p = run_cli(*snapshot_args(sim, workdir))
    off = json.loads(p.stdout)
    assert off["lsn"] == max_lsn and off["commit_ts"], p.stdout
    bronze = os.path.join(workdir, "bronze")
    t = DeltaTable(bronze)
    rows = t.to_pyarrow_table().to_pylist()
    assert len(rows) == 40
    assert {(r["_operation"], r["_start_lsn"], r["_snapshot"], r["_seqval"], r["_batch_id"])
            for r in rows} == {(0, off["lsn"], off["lsn"], None, None)}
    assert sorted(tuple(r[c] for c in COLUMNS) for r in rows) == source_rows(sim)
    meta = json.loads(t.history(1)[0]["userMetadata"])
    assert meta == {"snapshot": "dbo_orders", "lsn": off["lsn"], "commit_ts": off["commit_ts"]}
    assert t.metadata().configuration.get("mssql_cdc.kind") == "bronze"
    # a rerun reads nothing and returns the same offset
    insert(sim, 100, 2)
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    p = run_cli(*snapshot_args(sim, workdir))
    assert json.loads(p.stdout) == off and "nothing read" in p.stderr
    assert len(DeltaTable(bronze).to_pyarrow_table()) == 40
    # --resnapshot takes a newer one, read in parallel ranges of the integer key
    p = run_cli(*snapshot_args(sim, workdir, "--resnapshot", "--numPartitions", "4"))
    again = json.loads(p.stdout)
    assert again["lsn"] > off["lsn"]
    newest = [r for r in DeltaTable(bronze).to_pyarrow_table().to_pylist()
              if r["_snapshot"] == again["lsn"]]
    assert sorted(tuple(r[c] for c in COLUMNS) for r in newest) == source_rows(sim)
    assert rebuild(bronze) == source_rows(sim)


def test_parallel_ranges_read_the_same_rows_nulls_and_ends_included(sim, workdir):
    sim.run(SETUP)
    sim.run("""CREATE TABLE dbo.orders (order_id BIGINT NOT NULL PRIMARY KEY, v INT NULL);""",
            database="shop")
    # keys spread over the whole int64 range, the extremes included
    keys = [-9223372036854775808, -5, 0, 1, 7, 1000, 2**40, 9223372036854775807]
    sim.run("INSERT INTO dbo.orders VALUES " + ",".join(f"({k}, {i})" for i, k in enumerate(keys)),
            database="shop")
    sim.run(CDC, database="shop")
    seen = {}
    for n in ("1", "3", "8"):
        d = os.path.join(workdir, "n" + n)
        run_cli("snapshot", "--captureInstance", "dbo_orders",
                "--connectionString", sim.connection_string("shop"),
                "--target", os.path.join(d, "bronze"), "--numPartitions", n)
        seen[n] = sorted(r["order_id"] for r in
                         DeltaTable(os.path.join(d, "bronze")).to_pyarrow_table().to_pylist())
    assert seen["1"] == seen["3"] == seen["8"] == sorted(keys)


def table_queries(sim):
    """Reads the simulator's table store has served (sim.fast_path_stats)."""
    return sim.run("EXEC sim.fast_path_stats;")[0][2]


def test_snapshot_reads_come_from_the_simulators_table_store(sim, workdir):
    """`mssql-cdc snapshot` against the simulator: its reads of the table, in
    one range or in parallel ranges of the key, READ COMMITTED or SNAPSHOT,
    are the queries the table store (the simulator's fast path) answers once
    it holds the table (a whole read built it, or sim.bulk_load_table), and
    bronze gets the source's rows either way."""
    make_db(sim, before_cdc=30)
    sim.run("ALTER DATABASE shop SET ALLOW_SNAPSHOT_ISOLATION ON;")
    # a table filled by INSERTs: ranges of it (numPartitions defaults to the
    # cores) go to SQLite, a ranged read builds no store
    q0 = table_queries(sim)
    run_cli(*snapshot_args(sim, os.path.join(workdir, "two"), "--numPartitions", "2"))
    assert table_queries(sim) - q0 == 0
    assert rebuild(os.path.join(workdir, "two", "bronze")) == source_rows(sim)
    # one range, the whole table: its read builds the store and is served
    q0 = table_queries(sim)
    run_cli(*snapshot_args(sim, os.path.join(workdir, "one"), "--numPartitions", "1"))
    assert table_queries(sim) - q0 == 1
    assert rebuild(os.path.join(workdir, "one", "bronze")) == source_rows(sim)
    # ranges of the key, under SNAPSHOT, use it (the last range open above)
    q0 = table_queries(sim)
    run_cli(*snapshot_args(sim, os.path.join(workdir, "three"), "--numPartitions", "3",
                           "--isolationLevel", "snapshot"))
    assert table_queries(sim) - q0 == 3
    assert rebuild(os.path.join(workdir, "three", "bronze")) == source_rows(sim)
    # a write drops the store: ranges alone go to SQLite, the same rows
    insert(sim, 100, 5)
    q0 = table_queries(sim)
    run_cli(*snapshot_args(sim, os.path.join(workdir, "after"), "--numPartitions", "3"))
    assert table_queries(sim) - q0 == 0
    assert rebuild(os.path.join(workdir, "after", "bronze")) == source_rows(sim)
    # sim.bulk_load_table hands the store its rows: ranges are served at once
    sim.run("CREATE TABLE dbo.big (id BIGINT NOT NULL PRIMARY KEY, v INT NULL, name NVARCHAR(50) NULL);",
            database="shop")
    sim.run("EXEC sim.bulk_load_table @table = N'dbo.big', @rows = 5000, @seed = 4;", database="shop")
    sim.run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'big', "
            "@role_name = NULL;", database="shop")
    q0 = table_queries(sim)
    d = os.path.join(workdir, "big")
    run_cli("snapshot", "--captureInstance", "dbo_big", "--connectionString",
            sim.connection_string("shop"), "--target", os.path.join(d, "bronze"), "--numPartitions", "4")
    assert table_queries(sim) - q0 == 4
    ids = sorted(r["id"] for r in DeltaTable(os.path.join(d, "bronze")).to_pyarrow_table().to_pylist())
    assert ids == list(range(1, 5001))


def test_computed_columns_are_left_out_or_read_null_as_cdc_stores_them(sim, workdir):
    sim.run(SETUP)
    sim.run("""CREATE TABLE dbo.orders (order_id INT NOT NULL PRIMARY KEY, qty INT NULL,
                                        price DECIMAL(9,2) NULL, total AS (qty * price));""",
            database="shop")
    sim.run("INSERT INTO dbo.orders (order_id, qty, price) VALUES (1, 2, 3.50), (2, 4, 1.25);",
            database="shop")
    sim.run(CDC, database="shop")
    assert sim.run("SELECT total FROM dbo.orders WHERE order_id = 1", database="shop")[0][0] == 7
    p = run_cli(*snapshot_args(sim, workdir))
    assert "computed column(s) total" in p.stderr and "NULL in every change row" in p.stderr
    t = DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table()
    assert "total" not in t.column_names and sorted(t["qty"].to_pylist()) == [2, 4]
    # listed in columns: kept, NULL in the snapshot as in every change row
    d = os.path.join(workdir, "listed")
    p = run_cli(*snapshot_args(sim, d, "--columns", "order_id INT, qty INT, total DECIMAL(20,2)"))
    rows = DeltaTable(os.path.join(d, "bronze")).to_pyarrow_table().to_pylist()
    assert len(rows) == 2 and all(r["total"] is None for r in rows), rows
    sim.run("UPDATE dbo.orders SET qty = 5 WHERE order_id = 2;", database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    ct = sim.run("SELECT total FROM cdc.dbo_orders_CT", database="shop")
    assert ct and all(r[0] is None for r in ct)


def test_a_dropped_captured_column_reads_null(sim, workdir):
    make_db(sim, before_cdc=3)
    sim.run("ALTER TABLE dbo.orders DROP COLUMN status;", database="shop")
    run_cli(*snapshot_args(sim, workdir))
    rows = DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table().to_pylist()
    assert len(rows) == 3 and all(r["status"] is None for r in rows)
    assert all(r["amount"] is not None for r in rows)


def test_bootstrap_full_under_a_running_workload_rebuilds_the_source(sim, workdir):
    make_db(sim, before_cdc=300)
    stop = threading.Event()

    def workload():
        i = 1000
        while not stop.is_set():
            insert(sim, i, 3)
            sim.run(f"""UPDATE dbo.orders SET status = N'upd-{i}', amount = amount + 1
                WHERE order_id % 7 = {i % 7};
                DELETE FROM dbo.orders WHERE order_id = {i - 500};
                UPDATE dbo.orders SET order_id = order_id + 100000 WHERE order_id = {i - 400};""",
                    database="shop")
            i += 3
            time.sleep(0.02)

    w = threading.Thread(target=workload)
    w.start()
    try:
        p = run_cli(*stream_args(sim, workdir, "--bootstrap", "--maxCommitsPerBatch", "5"))
        time.sleep(0.3)
    finally:
        stop.set()
        w.join()
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    run_cli(*stream_args(sim, workdir))
    bronze = os.path.join(workdir, "bronze")
    assert rebuild(bronze) == source_rows(sim)
    assert rebuild_duckdb(bronze) == source_rows(sim)
    facts = DeltaTable(os.path.join(workdir, "facts")).to_pyarrow_table().to_pylist()
    opens = [r for r in facts if r["event"] == "snapshot_open"]
    boots = [r for r in facts if r["event"] == "bootstrap"]
    assert len(opens) == 1 and len(boots) == 1, facts
    s = boots[0]["min_lsn"]
    assert boots[0]["max_lsn"] == s == opens[0]["min_lsn"] and boots[0]["batch_id"] is None
    assert boots[0]["rows"] == sum(1 for r in DeltaTable(bronze).to_pyarrow_table().to_pylist()
                                   if r["_operation"] == 0)
    assert json.loads(opens[0]["detail"]) == {"generation": 0, "kind": "bootstrap", "mode": "full",
                                              "lost_from_ts": None, "lost_to_ts": None}
    # the stream started at S: its first batch reads the changes after it
    batches = sorted((r for r in facts if r["event"] is None), key=lambda r: r["batch_id"])
    assert batches and batches[0]["min_lsn"] is None or batches[0]["min_lsn"] > s
    # rerunning with --bootstrap on the same checkpoint takes no second snapshot
    run_cli(*stream_args(sim, workdir, "--bootstrap"))
    facts2 = DeltaTable(os.path.join(workdir, "facts")).to_pyarrow_table().to_pylist()
    assert sum(1 for r in facts2 if r["event"] == "bootstrap") == 1
    assert len({r["_snapshot"] for r in DeltaTable(bronze).to_pyarrow_table().to_pylist()
                if r["_operation"] == 0}) == 1


def test_bootstrap_killed_while_reading_completes_on_rerun(sim, workdir):
    make_db(sim, before_cdc=3000)  # several batches of the reader
    p = run_cli(*stream_args(sim, workdir, "--bootstrap", "--arrowBatchSize", "100"),
                env={"MCDC_CRASH_AT": "during_snapshot"}, check=False)
    assert p.returncode == -signal.SIGKILL, p.stderr
    facts = os.path.join(workdir, "facts")
    opened = DeltaTable(facts).to_pyarrow_table().to_pylist()
    assert [r["event"] for r in opened] == ["snapshot_open"]
    assert not os.path.exists(os.path.join(workdir, "bronze", "_delta_log")) or \
        len(DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table()) == 0
    insert(sim, 60000, 5)
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    run_cli(*stream_args(sim, workdir, "--bootstrap"))
    bronze = os.path.join(workdir, "bronze")
    snap = [r for r in DeltaTable(bronze).to_pyarrow_table().to_pylist() if r["_operation"] == 0]
    assert len({r["_snapshot"] for r in snap}) == 1
    assert rebuild(bronze) == source_rows(sim)
    events = [r["event"] for r in DeltaTable(facts).to_pyarrow_table().to_pylist() if r["event"]]
    assert events.count("bootstrap") == 1 and events.count("snapshot_open") == 2


def test_bootstrap_with_starting_lsn_and_bad_arguments_are_refused(sim, workdir):
    make_db(sim, before_cdc=2)
    p = run_cli(*stream_args(sim, workdir, "--bootstrap", "--startingLsn", "latest"),
                check=False)
    assert p.returncode == 2 and "startingLsn" in p.stderr, p.stderr
    p = run_cli(*stream_args(sim, workdir, "--snapshot", "sideways"), check=False)
    assert p.returncode == 2 and "full or chunked" in p.stderr
    p = run_cli(*snapshot_args(sim, workdir, "--snapshotKeys", "order_id"), check=False)
    assert p.returncode == 2 and "JSON list" in p.stderr, p.stderr
    p = run_cli(*snapshot_args(sim, workdir, "--snapshotKeys", '["nope"]'), check=False)
    assert p.returncode == 2 and "nope" in p.stderr, p.stderr
    # the target of a snapshot is a bronze table
    insert(sim, 10, 1)
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    run_cli(*stream_args(sim, workdir))
    assert os.path.exists(os.path.join(workdir, "facts", "_delta_log"))
    p = run_cli("snapshot", "--captureInstance", "dbo_orders",
                "--connectionString", sim.connection_string("shop"),
                "--target", os.path.join(workdir, "facts"), check=False)
    assert p.returncode == 7 and "is a facts table" in p.stderr, p.stderr
