"""Delta column mapping (mode "name", formats.md A9) both ways.

- A table we write (lake appender through build/lake_tool) with columns
  `Qty (kg)` and `a,b` (and an evolution adding `x y`) is read with the
  logical names and identical values by deltalake (delta-rs' QueryBuilder:
  its pyarrow path refuses column mapping), DuckDB's delta
  extension, Spark (delta-spark) and us; its Parquet files name the columns
  physically and carry the column ids as field_id.
- Tables Spark writes with column mapping (CREATE ... TBLPROPERTIES
  ('delta.columnMapping.mode'='name'), INSERT, RENAME COLUMN) are replayed by
  us with the logical names; we append to them and Spark reads our rows.
- An unmapped table of ours refuses a column that needs mapping with the
  ALTER TABLE statement of the reference; once Spark runs exactly that
  statement we append the column and every reader sees it.
- The stream's bronze with `[Qty (kg)]` and `[a,b]` columns is read alike by
  Spark, delta-rs, DuckDB and us.

Run: .venv/bin/python -m pytest tests/interop/test_colmap_interop.py
"""
import datetime as dt
import json
import subprocess
import time
from pathlib import Path

import pytest

from conftest import duckdb_with_delta, run_cli
from test_spark_interop import TOOL, rows_key, spark, tool  # noqa: F401 (fixtures)

deltalake = pytest.importorskip("deltalake")
pq = pytest.importorskip("pyarrow.parquet")

EPOCH = dt.datetime(1970, 1, 1)
COLUMNS = [["id", "l", False], ["Qty (kg)", "g", True], ["a,b", "u", True],
           ["ts", "tsu:", True]]
NAMES = [c[0] for c in COLUMNS]
ROWS = [[1, 1.5, "x", 0], [2, None, "comma,semi;", 86_400_000_123],
        [3, -0.25, None, None], [4, 1e300, "ü {}()=", -1]]
EXTRA = [["id", "l", False], ["Qty (kg)", "g", True], ["a,b", "u", True],
         ["ts", "tsu:", True], ["x y", "i", True]]
EXTRA_ROWS = [[10, 2.0, "new", 5, 42], [11, None, None, None, None]]


def py(fmt, v):
    if v is None:
        return None
    if fmt == "tsu:":
        return EPOCH + dt.timedelta(microseconds=v)
    return v


def expected(columns, rows, names):
    out = []
    for r in rows:
        byname = {c[0]: py(c[1], v) for c, v in zip(columns, r)}
        out.append(tuple(byname.get(n) for n in names))
    return out


def write_raw(table, columns, rows, tmp):
    spec = Path(tmp) / f"spec-{time.monotonic_ns()}.json"
    spec.write_text(json.dumps({"columns": columns, "rows": rows}))
    return subprocess.run([str(TOOL), "write", str(table), str(spec)], capture_output=True,
                          text=True)


def deltalake_view(path):
    """delta-rs' own scan (DataFusion over delta-kernel): deltalake 1.6's
    to_pyarrow_table / to_pyarrow_dataset refuse the columnMapping reader
    feature outright ("not supported using pyarrow Datasets")."""
    from deltalake import QueryBuilder
    t = QueryBuilder().register("t", deltalake.DeltaTable(str(path))) \
        .execute("SELECT * FROM t").read_all()
    names = t.column_names
    cols = [t.column(n).to_pylist() for n in names]
    return names, [tuple(c[i] for c in cols) for i in range(t.num_rows)]


def duckdb_view(path):
    con = duckdb_with_delta()
    cur = con.execute(f"SELECT * FROM delta_scan('{path}')")
    names = [d[0] for d in cur.description]
    return names, [tuple(r) for r in cur.fetchall()]


def spark_view(spark, path):
    df = spark.read.format("delta").load(str(path))
    return [f.name for f in df.schema.fields], [tuple(r) for r in df.collect()]


def test_our_mapped_table_is_read_alike_by_deltalake_duckdb_spark_and_us(spark, tool, tmp_path):
    table = tmp_path / "mapped"
    r = tool.write(table, COLUMNS, ROWS, tmp_path)
    assert r["rows"] == 4
    log0 = [json.loads(x) for x in (table / "_delta_log" / f"{0:020}.json").read_text().splitlines()]
    proto = next(a["protocol"] for a in log0 if "protocol" in a)
    assert (proto["minReaderVersion"], proto["minWriterVersion"]) == (3, 7)
    assert "columnMapping" in proto["readerFeatures"] and "columnMapping" in proto["writerFeatures"]
    md = next(a["metaData"] for a in log0 if "metaData" in a)
    assert md["configuration"]["delta.columnMapping.mode"] == "name"
    assert md["configuration"]["delta.columnMapping.maxColumnId"] == "4"
    fields = json.loads(md["schemaString"])["fields"]
    phys = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in fields}
    ids = {f["name"]: f["metadata"]["delta.columnMapping.id"] for f in fields}
    assert [f["name"] for f in fields] == NAMES and sorted(ids.values()) == [1, 2, 3, 4]
    # Parquet: physical names, field ids, stats keyed physically
    data = next(table.glob("*.parquet"))
    schema = pq.read_schema(data)
    assert schema.names == [phys[n] for n in NAMES]
    assert [int(f.metadata[b"PARQUET:field_id"]) for f in schema] == [ids[n] for n in NAMES]
    stats = json.loads(next(json.loads(line)["add"]["stats"] for line in
                            (table / "_delta_log" / f"{1:020}.json").read_text().splitlines()
                            if "add" in json.loads(line)))
    assert set(stats["nullCount"]) == set(phys.values())

    # evolution: a new mapped column
    r = tool.write(table, EXTRA, EXTRA_ROWS, tmp_path)
    want_names = NAMES + ["x y"]
    want = rows_key(expected(COLUMNS, ROWS, want_names) + expected(EXTRA, EXTRA_ROWS, want_names))

    names, got = deltalake_view(table)
    assert names == want_names
    assert rows_key(got) == want
    names, got = duckdb_view(table)
    assert names == want_names
    assert rows_key(got) == want
    names, got = spark_view(spark, table)
    assert names == want_names
    assert rows_key(got) == want
    head, ours = tool.dump(table)
    assert [n for n, _ in head["columns"]] == want_names
    assert rows_key(ours) == want
    # Spark can query by the logical name
    assert spark.sql(f"SELECT sum(`Qty (kg)`) FROM delta.`{table}` WHERE `a,b` = 'x'").collect()[0][0] == 1.5


def test_spark_mapped_table_with_rename_is_read_by_us_and_we_append(spark, tool, tmp_path):
    table = tmp_path / "spark_mapped"
    spark.sql(f"CREATE TABLE delta.`{table}` (id BIGINT, `Qty (kg)` DOUBLE, name STRING) "
              "USING delta TBLPROPERTIES ('delta.columnMapping.mode'='name')")
    spark.sql(f"INSERT INTO delta.`{table}` VALUES (1, 1.5, 'a'), (2, NULL, 'b')")
    spark.sql(f"ALTER TABLE delta.`{table}` RENAME COLUMN name TO `full name`")
    spark.sql(f"INSERT INTO delta.`{table}` VALUES (3, 3.0, 'c')")
    names, got = spark_view(spark, table)
    assert names == ["id", "Qty (kg)", "full name"]
    head, ours = tool.dump(table)
    assert [n for n, _ in head["columns"]] == names
    assert rows_key(ours) == rows_key(got) == rows_key([(1, 1.5, "a"), (2, None, "b"),
                                                         (3, 3.0, "c")])
    # we append (with a new mapped column) and Spark sees our rows
    cols = [["id", "l", True], ["Qty (kg)", "g", True], ["full name", "u", True],
            ["a,b", "i", True]]
    tool.write(table, cols, [[4, 4.5, "d", 7]], tmp_path)
    names, got = spark_view(spark, table)
    assert names == ["id", "Qty (kg)", "full name", "a,b"]
    assert rows_key(got) == rows_key([(1, 1.5, "a", None), (2, None, "b", None),
                                      (3, 3.0, "c", None), (4, 4.5, "d", 7)])
    dnames, dgot = deltalake_view(table)
    assert dnames == names and rows_key(dgot) == rows_key(got)


def test_unmapped_table_needs_the_alter_statement_then_accepts_the_column(spark, tool, tmp_path):
    table = tmp_path / "plain"
    tool.write(table, [["id", "l", False], ["ts", "tsu:", True]], [[1, 0]], tmp_path)
    p = write_raw(table, [["id", "l", False], ["ts", "tsu:", True], ["Qty (kg)", "g", True]],
                  [[2, 1, 2.5]], tmp_path)
    assert p.returncode != 0
    err = json.loads(p.stdout)
    assert err["error"] == "schema changed", err
    alter = (f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.columnMapping.mode'='name', "
             "'delta.minReaderVersion'='2', 'delta.minWriterVersion'='5')")
    assert alter in err["message"]
    spark.sql(alter)
    tool.write(table, [["id", "l", False], ["ts", "tsu:", True], ["Qty (kg)", "g", True]],
               [[2, 1, 2.5]], tmp_path)
    names, got = spark_view(spark, table)
    assert names == ["id", "ts", "Qty (kg)"]
    want = rows_key([(1, EPOCH, None), (2, EPOCH + dt.timedelta(microseconds=1), 2.5)])
    assert rows_key(got) == want
    dnames, dgot = deltalake_view(table)
    assert dnames == names and rows_key(dgot) == want
    head, ours = tool.dump(table)
    assert rows_key(ours) == want


def test_stream_bronze_with_a_mapped_column_is_read_by_spark_deltalake_duckdb_and_us(
        sim, spark, tool, workdir):
    sim.run("CREATE DATABASE shop;")
    sim.run("""CREATE TABLE dbo.orders (order_id INT NOT NULL PRIMARY KEY, [Qty (kg)] INT NULL,
    [a,b] NVARCHAR(10) NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL;
INSERT INTO dbo.orders VALUES (1, 2, N'x'), (2, NULL, N'y z');
DELETE FROM dbo.orders WHERE order_id = 2;
EXEC sim.run_capture @ignore_latency = 1;""", database="shop")
    d = Path(workdir)
    run_cli("stream", "--captureInstance", "dbo_orders",
            "--connectionString", sim.connection_string("shop"),
            "--target", str(d / "bronze"), "--app-id", "orders-v1",
            "--checkpoint", str(d / "ckpt"), "--facts-table", str(d / "facts"),
            "--control-table", str(d / "control"), "--trigger", "availableNow")
    bronze = d / "bronze"
    want = rows_key([(1, 2, "x", 2), (2, None, "y z", 2), (2, None, "y z", 1)])
    sel = ["order_id", "Qty (kg)", "a,b", "_operation"]

    df = spark.read.format("delta").load(str(bronze))
    assert set(sel) <= {f.name for f in df.schema.fields}
    got = [tuple(r) for r in df.select(*[f"`{c}`" for c in sel]).collect()]
    assert rows_key(got) == want
    names, rows = deltalake_view(bronze)
    assert rows_key([tuple(r[names.index(c)] for c in sel) for r in rows]) == want
    names, rows = duckdb_view(bronze)
    assert rows_key([tuple(r[names.index(c)] for c in sel) for r in rows]) == want
    head, ours = tool.dump(bronze)
    names = [n for n, _ in head["columns"]]
    assert rows_key([tuple(r[names.index(c)] for c in sel) for r in ours]) == want
