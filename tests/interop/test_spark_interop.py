"""Spark (pyspark + delta-spark) against our Delta tables, both ways.

- Spark reads tables we write (our Parquet writer, our Delta log, through the
  lake appender driven by tests/tools/lake_tool.c) with every batch type, edge
  values and NULLs, and sees exactly what we wrote; delta-rs sees the same.
- We replay tables Spark writes (appends, a DELETE, a checkpoint, txn) and
  our file list, schema, version, txn and row values (our Parquet reader)
  match Spark's view.
- A replayed txn is a no-op in Spark's view, and Spark honours our txn (and
  we honour Spark's) for idempotent writes.
- The stream's bronze, facts and control tables are read identically by
  Spark, delta-rs and our reader.

One local SparkSession (local[2], UTC) serves every test. delta-spark's jars
come from Maven Central through configure_spark_with_delta_pip (ivy cache in
~/.ivy2*; scripts/install-deps.sh warms it).

Run: .venv/bin/python -m pytest tests/interop/test_spark_interop.py
"""
import datetime as dt
import decimal
import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CC, link_libs, run_cli

pytest.importorskip("pyspark")
pytest.importorskip("delta")
deltalake = pytest.importorskip("deltalake")

decimal.getcontext().prec = 100  # 38-digit values stay exact in scaleb/compare

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MCDC_BUILD", ROOT / "build"))
TOOL = BUILD / "lake_tool"
EPOCH = dt.datetime(1970, 1, 1)
EPOCH_DAY = dt.date(1970, 1, 1)


# ---- fixtures -------------------------------------------------------------------

@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    if shutil.which("java") is None:
        pytest.skip("no java on PATH (scripts/install-deps.sh installs openjdk-17-jre-headless)")
    # Spark's Python side turns TimestampType values into naive datetimes in the
    # process's local zone: make that UTC.
    old_tz = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession
    wh = tmp_path_factory.mktemp("spark-warehouse")
    builder = (SparkSession.builder.master("local[2]").appName("mcdc-interop")
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog",
                       "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "768m")
               .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
               .config("spark.sql.shuffle.partitions", "2")
               # tiny tables: planning and compiling cost more than running
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.sql.codegen.wholeStage", "false")
               .config("spark.default.parallelism", "2")
               .config("spark.databricks.delta.snapshotPartitions", "2")
               .config("spark.sql.warehouse.dir", str(wh)))
    session = configure_spark_with_delta_pip(builder).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    if old_tz is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old_tz
    time.tzset()


@pytest.fixture(scope="session")
def tool():
    subprocess.run(["make", "-s", f"{BUILD}/libmssqlcdc.a"], cwd=ROOT, check=True)
    subprocess.run(
        [*CC, "-Iinclude",
         "-Isrc/util", "-Isrc/storage", "-Isrc/batch", "-Isrc/delta", "-Isrc/parquet", "-Isrc/lake",
         "tests/tools/lake_tool.c", str(BUILD / "libmssqlcdc.a"), *link_libs(), "-o", str(TOOL)],
        cwd=ROOT, check=True)
    return Tool()


class Tool:
    """build/lake_tool: our writer (lake appender) and our reader (replay + Parquet)."""

    def write(self, table, columns, rows, tmp, **extra):
        spec = Path(tmp) / f"spec-{time.monotonic_ns()}.json"
        spec.write_text(json.dumps({"columns": columns, "rows": rows, **extra}))
        p = subprocess.run([str(TOOL), "write", str(table), str(spec)], capture_output=True,
                           text=True)
        assert p.returncode == 0, (p.stdout, p.stderr)
        return json.loads(p.stdout)

    def dump(self, table, version=-1, app_id=None):
        argv = [str(TOOL), "dump", str(table), str(version)] + ([app_id] if app_id else [])
        p = subprocess.run(argv, capture_output=True, text=True)
        assert p.returncode == 0, (p.stdout, p.stderr)
        lines = p.stdout.splitlines()
        head = json.loads(lines[0])
        fmts = [f for _, f in head["columns"]]
        rows = [tuple(to_py(f, v) for f, v in zip(fmts, json.loads(line))) for line in lines[1:]]
        return head, rows


# ---- values ---------------------------------------------------------------------

def to_py(fmt, v):
    """Our JSON encoding (lake_tool) -> the Python value Spark returns."""
    if v is None:
        return None
    if fmt in ("f", "g"):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(v, v) \
            if isinstance(v, str) else float(v)
    if fmt.startswith("d:"):
        return decimal.Decimal(int(v)).scaleb(-int(fmt.split(",")[1]))
    if fmt == "z" or fmt.startswith("w:"):
        return bytes.fromhex(v)
    if fmt == "tdD":
        return EPOCH_DAY + dt.timedelta(days=v)
    if fmt in ("tsu:", "tsu:UTC"):
        return EPOCH + dt.timedelta(microseconds=v)
    return v


def norm(v):
    """Comparable form: bytes for binary, naive UTC datetimes, a token for NaN."""
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, float) and math.isnan(v):
        return "<NaN>"
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def rows_key(rows):
    return sorted((tuple(norm(v) for v in r) for r in rows), key=repr)


def spark_rows(spark, path):
    df = spark.read.format("delta").load(str(path))
    return df, [tuple(r) for r in df.collect()]


def duckdb_rows(path, names):
    """DuckDB's delta extension (delta_scan), with UTC as its session zone."""
    from conftest import duckdb_with_delta
    con = duckdb_with_delta()
    con.execute("SET TimeZone = 'UTC'")
    cols = ", ".join(f'"{n}"' for n in names)
    return con.execute(f"SELECT {cols} FROM delta_scan('{path}')").fetchall()


def deltalake_rows(path, names):
    t = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    cols = [t.column(n).to_pylist() for n in names]
    return [tuple(c[i] for c in cols) for i in range(t.num_rows)]


# ---- every type, written by us ----------------------------------------------------

N38 = "9" * 38
TYPES = [  # name, Arrow format, nullable, Spark simpleString
    ("b", "b", True, "boolean"),
    ("i8", "c", True, "tinyint"),
    ("i16", "s", True, "smallint"),
    ("i32", "i", False, "int"),
    ("i64", "l", True, "bigint"),
    ("f32", "f", True, "float"),
    ("f64", "g", True, "double"),
    ("d9", "d:9,2", True, "decimal(9,2)"),
    ("d18", "d:18,4", True, "decimal(18,4)"),
    ("d38", "d:38,10", True, "decimal(38,10)"),
    ("d38_0", "d:38,0", True, "decimal(38,0)"),
    ("d38_38", "d:38,38", True, "decimal(38,38)"),
    ("s", "u", True, "string"),
    ("bin", "z", True, "binary"),
    ("fx", "w:16", True, "binary"),
    ("day", "tdD", True, "date"),
    ("ntz", "tsu:", True, "timestamp_ntz"),
    ("ts", "tsu:UTC", True, "timestamp"),
]
COLUMNS = [[n, f, nl] for n, f, nl, _ in TYPES]
FLT_MAX = 3.4028234663852886e38
FLT_TRUE_MIN = 1.401298464324817e-45
US_0001 = -62135596800000000          # 0001-01-01T00:00:00
US_9999 = 253402300799999999          # 9999-12-31T23:59:59.999999


def every_type_rows(n_regular=40, ancient=False):
    rows = [
        # minimums (0001-01-01 only when ancient: see test_ancient_dates_need_corrected_rebase)
        [False, -128, -32768, -2**31, -2**63, -FLT_MAX, -1.7976931348623157e308,
         "-999999999", "-" + "9" * 18, "-" + N38, "-" + N38, "-" + N38, "", "", "00" * 16,
         -719162 if ancient else -25567, US_0001 if ancient else -2208988800000000,
         US_0001 if ancient else -2208988800000000],
        # maximums
        [True, 127, 32767, 2**31 - 1, 2**63 - 1, FLT_MAX, 1.7976931348623157e308,
         "999999999", "9" * 18, N38, N38, N38, "日本語 🎉 zürich", "ff" * 8, "ff" * 16,
         2932896, US_9999, US_9999],
        # NULL everywhere it may be
        [None, None, None, 0, None, None, None, None, None, None, None, None, None, None, None,
         None, None, None],
        # just before the epoch, microseconds, special floats
        [True, -1, -1, -1, -1, FLT_TRUE_MIN, "NaN", "-1", "-1", "-1", "-1", "-1", "\u00e9", "00",
         "0f" * 16, -1, -1, -1],
        [False, 0, 0, 0, 0, "-Infinity", "Infinity", "0", "0", "0", "0", "1", " ", "0001",
         "10" * 16, 0, -86400000001, -1234567890123457],
        [True, 1, 1, 1, 1, -0.0, 5e-324, "1", "1", "1", "1", "-" + "0" * 37 + "1", "a\"b\\c\n\t",
         "5c22", "ab" * 16, -365, 1, 1],
    ]
    for i in range(n_regular):
        rows.append([i % 2 == 0, i - 64, i * 300 - 5000, i * 1000003, i * 10**15 - 7,
                     i * 0.5 - 3.25, i / 3.0 - 7.0, str(i * 12345 - 99999), str(-i * 10**14),
                     str(i * 10**30 + 12345), str(-(i % 10) * 10**37), str(i * 10**36),
                     ["zürich", "日本語", "ascii", "Ελληνικά", ""][i % 5] + str(i),
                     "%02x" % i * (i % 5), "%02x" % (i % 256) * 16,
                     -40000 + i * 1000, -2**40 + i * 123456789, i * -98765432101 + 17])
        if i % 7 == 3:  # scattered NULLs
            for c in (0, 4, 8, 12, 13, 17):
                rows[-1][c] = None
    return rows


def expected_rows(columns, rows):
    return [tuple(to_py(f, v) for (_, f, _), v in zip(columns, r)) for r in rows]


def spark_types(df):
    return [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields]


def test_spark_reads_every_type_we_write(spark, tool, tmp_path):
    table = tmp_path / "every_type"
    rows = every_type_rows()
    # two commits, several batches each
    assert tool.write(table, COLUMNS, rows[:20], tmp_path, batch_rows=7)["version"] == 1
    assert tool.write(table, COLUMNS, rows[20:], tmp_path, batch_rows=7)["version"] == 2
    want = rows_key(expected_rows(COLUMNS, rows))
    df, got = spark_rows(spark, table)
    assert spark_types(df) == [(n, s, nl) for n, _, nl, s in TYPES]
    assert len(got) == len(rows)
    assert rows_key(got) == want
    # delta-rs and DuckDB agree, and so does our own reader
    assert rows_key(deltalake_rows(table, [t[0] for t in TYPES])) == want
    assert rows_key(duckdb_rows(table, [t[0] for t in TYPES])) == want
    head, ours = tool.dump(table)
    assert head["version"] == 2 and head["records"] == len(rows)
    assert rows_key(ours) == want
    # Spark's filters on our statistics find the edge rows (a wrong min/max skips files)
    for cond in ("ts = timestamp'1969-12-31 23:59:59.999999'", f"d38 = {N38[:28]}.{N38[28:]}"):
        assert df.filter(cond).count() == 1, cond


@pytest.mark.parametrize("codec,suffix,footer", [
    ("lz4_raw", ".lz4raw.parquet", "LZ4"), ("snappy", ".snappy.parquet", "SNAPPY"),
    ("uncompressed", "-c000.parquet", "UNCOMPRESSED"), (None, ".zstd.parquet", "ZSTD")])
def test_every_codec_we_write_is_read_by_spark_deltalake_duckdb(spark, tool, tmp_path, codec,
                                                                suffix, footer):
    """The table property mssql_cdc.parquet.compression (docs/tables.md) picks
    the codec of every data file our appender writes (unset: zstd); Spark,
    delta-rs, DuckDB and our reader read the rows back alike. Spark's ALTER
    TABLE then switches the property and our next append follows it."""
    import pyarrow.parquet as pq
    table = tmp_path / "codec"
    rows = every_type_rows()
    conf = [] if codec is None else [f"mssql_cdc.parquet.compression={codec}"]
    assert tool.write(table, COLUMNS, rows[:20], tmp_path, batch_rows=7,
                      configuration=conf)["version"] == 1

    def files_codecs():
        out = {}
        for f in sorted(table.glob("*.parquet")):
            md = pq.ParquetFile(f).metadata
            out[f.name] = {md.row_group(g).column(c).compression
                           for g in range(md.num_row_groups) for c in range(md.num_columns)}
        return out

    first = files_codecs()
    assert first and all(name.endswith(suffix) for name in first), first
    # a column that does not compress may be stored raw; every other chunk has the codec
    assert all(footer in codecs and codecs <= {footer, "UNCOMPRESSED"}
               for codecs in first.values()), first
    spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES "
              "('mssql_cdc.parquet.compression' = 'lz4_raw')")
    assert tool.write(table, COLUMNS, rows[20:], tmp_path, batch_rows=7)["version"] == 3
    later = {n: c for n, c in files_codecs().items() if n not in first}
    assert later and all(n.endswith(".lz4raw.parquet") and "LZ4" in c
                         for n, c in later.items()), later
    want = rows_key(expected_rows(COLUMNS, rows))
    df, got = spark_rows(spark, table)
    assert rows_key(got) == want
    assert rows_key(deltalake_rows(table, [t[0] for t in TYPES])) == want
    assert rows_key(duckdb_rows(table, [t[0] for t in TYPES])) == want
    assert rows_key(tool.dump(table)[1]) == want


def test_a_codec_property_we_cannot_write_is_refused(tool, tmp_path):
    table = tmp_path / "badcodec"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"columns": [["k", "i", False]], "rows": [[1]],
                                "configuration": ["mssql_cdc.parquet.compression=brotli"]}))
    p = subprocess.run([str(TOOL), "write", str(table), str(spec)], capture_output=True, text=True)
    assert p.returncode == 1
    err = json.loads(p.stdout)
    assert "mssql_cdc.parquet.compression is 'brotli'" in err["message"], err
    assert "zstd, snappy, lz4_raw" in err["message"], err
    assert not list(table.glob("*.parquet"))


def test_ancient_dates_and_timestamps(spark, tool, tmp_path):
    """Dates before 1582-10-15 and timestamps before 1900, which Spark 3 refused
    by default in files not written by Spark: Spark 4 reads them in the
    proleptic Gregorian calendar (datetimeRebaseModeInRead = CORRECTED), the
    one we write, and gets our values exactly."""
    table = tmp_path / "ancient"
    cols = [["id", "i", False], ["day", "tdD", True], ["ntz", "tsu:", True],
            ["ts", "tsu:UTC", True]]
    rows = [[0, -719162, US_0001, US_0001], [1, -141428, -12219292800000001, -2208988800000001],
            [2, 2932896, US_9999, US_9999], [3, None, None, None]]
    tool.write(table, cols, rows, tmp_path)
    assert spark.conf.get("spark.sql.parquet.datetimeRebaseModeInRead") == "CORRECTED"
    # internal values: PySpark cannot turn a TimestampType of year 1 into a datetime
    query = ("SELECT id, unix_date(day), unix_micros(cast(ntz AS timestamp)), unix_micros(ts) "
             f"FROM delta.`{table}`")
    got = [tuple(r) for r in spark.sql(query).collect()]
    assert sorted(got) == sorted(tuple(r) for r in rows)
    assert rows_key(deltalake_rows(table, ["id", "day", "ntz", "ts"])) == \
        rows_key(expected_rows(cols, rows))


def test_one_column_and_two_hundred_columns(spark, tool, tmp_path):
    one = tmp_path / "one"
    tool.write(one, [["only", "l", False]], [[i * 7 - 3] for i in range(100)], tmp_path)
    df, got = spark_rows(spark, one)
    assert spark_types(df) == [("only", "bigint", False)]
    assert sorted(got) == sorted((i * 7 - 3,) for i in range(100))

    wide = tmp_path / "wide"
    cols, src = [], every_type_rows(n_regular=6)
    for k in range(200):
        n, f, _, _ = TYPES[k % len(TYPES)]
        cols.append([f"c{k:03d}_{n}", f, True])
    rows = [[r[k % len(TYPES)] for k in range(200)] for r in src]
    rows[2] = [None] * 200  # a row of NULLs in every column
    tool.write(wide, cols, rows, tmp_path)
    df, got = spark_rows(spark, wide)
    assert len(df.schema.fields) == 200
    assert [f.name for f in df.schema.fields] == [c[0] for c in cols]
    want = rows_key(expected_rows(cols, rows))
    assert rows_key(got) == want
    assert rows_key(deltalake_rows(wide, [c[0] for c in cols])) == want
    assert rows_key(duckdb_rows(wide, [c[0] for c in cols])) == want


def test_empty_table(spark, tool, tmp_path):
    table = tmp_path / "empty"
    r = tool.write(table, COLUMNS, [], tmp_path)
    assert r["rows"] == 0
    df, got = spark_rows(spark, table)
    assert got == []
    assert spark_types(df) == [(n, s, nl) for n, _, nl, s in TYPES]
    t = deltalake.DeltaTable(str(table)).to_pyarrow_table()
    assert t.num_rows == 0 and t.column_names == [c[0] for c in COLUMNS]


# ---- idempotent writes (txn) ---------------------------------------------------------

def test_replayed_txn_is_a_no_op_in_sparks_view(spark, tool, tmp_path):
    table = tmp_path / "txn"
    cols = [["id", "l", False], ["s", "u", True]]
    rows = [[i, f"r{i}"] for i in range(10)]
    first = tool.write(table, cols, rows, tmp_path, app_id="app-1", txn=1)
    again = tool.write(table, cols, rows, tmp_path, app_id="app-1", txn=1)
    assert not first["skipped"] and again["skipped"] and again["version"] == first["version"]
    df, got = spark_rows(spark, table)
    assert sorted(got) == sorted(tuple(r) for r in rows)
    from delta.tables import DeltaTable
    hist = DeltaTable.forPath(spark, str(table)).history().collect()
    assert max(h.version for h in hist) == first["version"]
    assert len(os.listdir(table)) == 2  # _delta_log and one data file: the replay left none

    # Spark's idempotent writes honour our txn: (app-1, 1) is done, (app-1, 2) is not
    more = spark.createDataFrame([(100, "spark")], "id bigint, s string")
    more.write.format("delta").mode("append").option("txnAppId", "app-1") \
        .option("txnVersion", 1).save(str(table))
    assert spark.read.format("delta").load(str(table)).count() == 10
    more.write.format("delta").mode("append").option("txnAppId", "app-1") \
        .option("txnVersion", 2).save(str(table))
    assert spark.read.format("delta").load(str(table)).count() == 11
    # and we honour Spark's: our (app-1, 2) replay is skipped
    r = tool.write(table, cols, [[200, "late"]], tmp_path, app_id="app-1", txn=2)
    assert r["skipped"]
    head, ours = tool.dump(table, -1, "app-1")
    assert head["txn"] == 2
    assert rows_key(ours) == rows_key(spark_rows(spark, table)[1])


# ---- tables Spark writes, replayed by us ---------------------------------------------

SPARK_DDL = ("id int not null, b boolean, i8 tinyint, i16 smallint, i64 bigint, f32 float, "
             "f64 double, d9 decimal(9,2), d18 decimal(18,4), d38 decimal(38,10), s string, "
             "bin binary, day date, ntz timestamp_ntz, ts timestamp")
SPARK_FORMATS = ["i", "b", "c", "s", "l", "f", "g", "d:9,2", "d:18,4", "d:38,10", "u", "z",
                 "tdD", "tsu:", "tsu:UTC"]


def spark_batch(k):
    out = []
    for j in range(3):
        i = k * 10 + j
        if j == 2 and k % 3 == 0:
            out.append((i,) + (None,) * 14)
            continue
        out.append((i, i % 2 == 0, i % 128 - 64, i * 100 - 3000, i * 10**12 - 1,
                    i * 0.25 - 1.5, i / 7.0, decimal.Decimal(i * 101 - 5000).scaleb(-2),
                    decimal.Decimal(-i * 10**13 + 1).scaleb(-4),
                    decimal.Decimal(int(N38) - i).scaleb(-10) * (-1 if i % 2 else 1),
                    ["zürich", "日本語", "", "x"][i % 4] + str(i), bytes([i % 256, 255, 0]),
                    dt.date(1969, 12, 31) + dt.timedelta(days=i * 37 - 500),
                    dt.datetime(1969, 12, 31, 23, 59, 59, 999999) + dt.timedelta(
                        microseconds=i * 1000001 - 5000000),
                    dt.datetime(1965, 6, 1, 0, 0, 0, 1) + dt.timedelta(hours=i * 13)))
    return out


def test_spark_written_table_with_checkpoint_replayed_by_us(spark, tool, tmp_path):
    table = tmp_path / "spark_table"
    path = str(table)
    all_rows = []
    # version 0 creates the table (checkpoint every 5 commits, Spark's default
    # 10 would only cost time), 1..6 append: Spark checkpoints version 5
    spark.sql(f"CREATE TABLE delta.`{path}` ({SPARK_DDL}) USING delta "
              "TBLPROPERTIES ('delta.checkpointInterval' = '5')")
    for k in range(6):
        batch = spark_batch(k)
        all_rows += batch
        w = spark.createDataFrame(batch, SPARK_DDL).write.format("delta")
        if k == 3:
            w = w.option("txnAppId", "spark-app").option("txnVersion", 7)
        w.mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (1, 51)")  # a rewrite: removes
    all_rows = [r for r in all_rows if r[0] not in (1, 51)]
    log = table / "_delta_log"
    assert (log / f"{5:020d}.checkpoint.parquet").exists()

    df, got = spark_rows(spark, table)
    assert rows_key(got) == rows_key(all_rows)
    from delta.tables import DeltaTable
    spark_version = DeltaTable.forPath(spark, path).history(1).collect()[0].version
    spark_files = sorted(os.path.relpath(f.replace("file://", "").replace("file:", ""), path)
                         for f in df.inputFiles())

    def check(head, ours):
        assert head["version"] == spark_version == 7
        assert sorted(head["files"]) == spark_files
        assert [f for _, f in head["columns"]] == SPARK_FORMATS
        assert [n for n, _ in head["columns"]] == [f.name for f in df.schema.fields]
        assert json.loads(head["schema"]) == json.loads(df.schema.json()) or \
            [f["name"] for f in json.loads(head["schema"])["fields"]] == df.schema.names
        assert head["txn"] == 7
        assert head["records"] == len(all_rows)
        assert rows_key(ours) == rows_key(got)

    check(*tool.dump(table, -1, "spark-app"))
    # only the checkpoint and the commits after it: our replay must use Spark's checkpoint
    copy = tmp_path / "from_checkpoint"
    shutil.copytree(table, copy)
    for v in range(5):
        (copy / "_delta_log" / f"{v:020d}.json").unlink()
    head, ours = tool.dump(copy, -1, "spark-app")
    check(head, ours)
    # an older version, before the DELETE
    head, ours = tool.dump(table, 6)
    assert head["version"] == 6 and len(ours) == len(all_rows) + 2


def test_we_append_to_a_spark_table_and_spark_reads_it(spark, tool, tmp_path):
    table = tmp_path / "mixed"
    spark.createDataFrame(spark_batch(1), SPARK_DDL).write.format("delta").save(str(table))
    head, _ = tool.dump(table)
    cols = [[n, f, n != "id"] for n, f in head["columns"]]
    ours = [[1000, True, -5, 7, 123, 0.5, 2.25, "-12345", "99", "-" + N38, "ü", "beef",
             -1, -1, -1]]
    r = tool.write(table, cols, ours, tmp_path)
    assert r["version"] == 1
    _, got = spark_rows(spark, table)
    assert rows_key(got) == rows_key(spark_batch(1) + expected_rows(cols, ours))


# ---- the stream's tables --------------------------------------------------------------

STREAM_TABLE = """
CREATE TABLE dbo.items (
    id INT NOT NULL PRIMARY KEY,
    big BIGINT NULL, small SMALLINT NULL, tiny TINYINT NULL, flag BIT NULL,
    price DECIMAL(38,10) NULL, amount DECIMAL(18,4) NULL, cash MONEY NULL,
    f FLOAT NULL, r REAL NULL,
    name NVARCHAR(50) NULL, code VARCHAR(20) NULL, raw VARBINARY(16) NULL,
    guid UNIQUEIDENTIFIER NULL, d DATE NULL, at DATETIME2(7) NULL, old DATETIME NULL,
    dto DATETIMEOFFSET(7) NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items',
     @role_name = NULL;
"""


def stream_changes(sim, first, n):
    for t in range(n):
        i = first + t * 3
        sim.run(f"""BEGIN TRAN;
INSERT INTO dbo.items VALUES
 ({i}, {i * 10**12}, {-i}, {i % 256}, 1, CAST('12345678901234567890123456.7890123456' AS DECIMAL(38,10)), -{i}.1234,
  922337203685477.5807, {i}.5e-3, 1.5, N'zürich 日本語 {i}', 'code{i}', 0x00FF{i % 256:02X},
  '6F9619FF-8B86-D011-B42D-00C04FC964FF', '1969-07-20', '1969-12-31 23:59:59.9999999',
  '1900-01-01 00:00:00', '1969-12-31 23:00:00.1234567 -05:00'),
 ({i + 1}, NULL, NULL, NULL, NULL, -99999999999999999999999999.9999999999, NULL, NULL, NULL,
  NULL, N'', NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 ({i + 2}, -1, 0, 0, 0, 0, 0, 0, 0, 0, N'é', '', 0x, NULL, '2024-02-29',
  '2024-02-29 12:34:56.1234560', '2024-01-01 10:00:00.003', '2024-01-01 10:00:00 +00:00');
UPDATE dbo.items SET name = N'paid ✓', amount = 1.0001 WHERE id = {i};
DELETE FROM dbo.items WHERE id = {i + 1};
COMMIT;""", database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def compare_spark_deltalake_ours(spark, tool, path):
    df, got = spark_rows(spark, path)
    names = [f.name for f in df.schema.fields]
    dl = deltalake.DeltaTable(str(path))
    dl_types = {f["name"]: f["type"] for f in json.loads(dl.schema().to_json())["fields"]}
    spark_types_json = {f.name: f.dataType.jsonValue() for f in df.schema.fields}
    assert spark_types_json == dl_types
    theirs = deltalake_rows(path, names)
    assert len(got) == len(theirs) > 0
    assert rows_key(got) == rows_key(theirs)
    head, ours = tool.dump(path)
    assert [n for n, _ in head["columns"]] == names
    assert rows_key(ours) == rows_key(got)
    return df, spark_types_json


def test_stream_tables_read_identically_by_spark_deltalake_and_us(sim, spark, tool, workdir):
    sim.run("CREATE DATABASE shop;")
    sim.run(STREAM_TABLE, database="shop")
    stream_changes(sim, 1, 3)
    d = Path(workdir)
    args = ["stream", "--captureInstance", "dbo_items",
            "--connectionString", sim.connection_string("shop"),
            "--target", str(d / "bronze"), "--app-id", "items-v1",
            "--checkpoint", str(d / "ckpt"), "--facts-table", str(d / "facts"),
            "--control-table", str(d / "control"), "--trigger", "availableNow",
            "--maxCommitsPerBatch", "2"]
    run_cli(*args)
    stream_changes(sim, 100, 2)
    run_cli(*args)

    df, types = compare_spark_deltalake_ours(spark, tool, d / "bronze")
    assert types["_commit_ts"] == "timestamp_ntz"
    assert types["price"] == "decimal(38,10)" and types["amount"] == "decimal(18,4)"
    assert types["cash"] == "decimal(19,4)"
    assert types["at"] == "timestamp_ntz" and types["dto"] == "timestamp"
    assert types["name"] == "string" and types["raw"] == "binary" and types["d"] == "date"
    # 5 transactions: 3 inserts, an update (2 rows) and a delete each
    ops = sorted(r["_operation"] for r in df.select("_operation").collect())
    assert ops.count(2) == 15 and ops.count(1) == 5 and ops.count(3) == 5 and ops.count(4) == 5
    row = df.filter("id = 1 and _operation = 2").collect()[0]
    assert row["price"] == decimal.Decimal("12345678901234567890123456.7890123456")
    assert row["at"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999999)
    assert row["dto"] == dt.datetime(1970, 1, 1, 4, 0, 0, 123456)  # +5h to UTC, µs kept
    assert row["name"] == "zürich 日本語 1"
    assert row["raw"] == bytearray(b"\x00\xff\x01")
    assert row["guid"].upper() == "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    assert df.filter("id = 2 and _operation = 2").collect()[0]["name"] == ""

    fdf, ftypes = compare_spark_deltalake_ours(spark, tool, d / "facts")
    assert sum(r["rows"] for r in fdf.collect() if r["event"] is None) == 30
    cdf, ctypes = compare_spark_deltalake_ours(spark, tool, d / "control")
    assert cdf.count() >= 1


# ---- checkpoints both ways ----------------------------------------------------------------

def test_spark_reads_our_checkpoint(spark, tool, tmp_path):
    table = tmp_path / "our_ckpt"
    cols = [["id", "l", False], ["s", "u", True], ["at", "tsu:", True]]
    written = []
    for k in range(1, 13):  # versions 1..12 after the create: we checkpoint version 10
        rows = [[k * 100 + j, f"ü{k}-{j}" if j else None, -k * 1000001] for j in range(3)]
        written += rows
        assert tool.write(table, cols, rows, tmp_path, app_id="ours", txn=k)["version"] == k
    log = table / "_delta_log"
    assert (log / f"{10:020d}.checkpoint.parquet").exists()
    for v in range(10):  # only our checkpoint holds the state before version 10
        (log / f"{v:020d}.json").unlink()
    _, got = spark_rows(spark, table)
    assert rows_key(got) == rows_key(expected_rows(cols, written))
    assert rows_key(deltalake_rows(table, ["id", "s", "at"])) == rows_key(got)
    # Spark finds our txn in the checkpoint + commits: a replay of version 12 is skipped
    spark.createDataFrame([(1, "x", None)], "id bigint, s string, at timestamp_ntz") \
        .write.format("delta").mode("append").option("txnAppId", "ours") \
        .option("txnVersion", 12).save(str(table))
    assert spark.read.format("delta").load(str(table)).count() == len(written)
    # a version inside the checkpoint range is gone for Spark as for us
    with pytest.raises(Exception):
        spark.read.format("delta").option("versionAsOf", 5).load(str(table)).count()


def test_spark_v2_checkpoint_replayed_by_us(spark, tool, tmp_path):
    table = tmp_path / "v2"
    path = str(table)
    spark.sql(f"CREATE TABLE delta.`{path}` ({SPARK_DDL}) USING delta TBLPROPERTIES "
              "('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2')")
    rows = []
    for k in range(4):
        batch = spark_batch(k)
        rows += batch
        spark.createDataFrame(batch, SPARK_DDL).write.format("delta").mode("append").save(path)
    log = table / "_delta_log"
    v2 = [f for f in os.listdir(log) if ".checkpoint." in f and f.count(".") >= 3]
    assert v2, sorted(os.listdir(log))  # UUID-named V2 checkpoints
    head, ours = tool.dump(table)
    assert head["version"] == 4
    assert head["protocol"][0] == 3
    _, got = spark_rows(spark, table)
    assert rows_key(ours) == rows_key(got) == rows_key(rows)
    # from the last checkpoint only
    last = json.loads((log / "_last_checkpoint").read_text())["version"]
    for v in range(last):
        (log / f"{v:020d}.json").unlink()
    head, ours = tool.dump(table)
    assert head["version"] == 4 and rows_key(ours) == rows_key(rows)


def test_delta_string_encodings_we_choose_are_read_by_spark_deltalake_duckdb(spark, tool,
                                                                               tmp_path):
    """Strings our writer stores as DELTA_BYTE_ARRAY (increasing LSN texts:
    each value keeps only what differs from the one before) and as
    DELTA_LENGTH_BYTE_ARRAY (random texts: lengths apart from the bytes),
    with NULLs between, and decimals of any size and sign, which zstd
    shrinks by less than an eighth and which are stored uncompressed as
    DELTA_BINARY_PACKED in the zstd file, read back alike by Spark's
    vectorized reader, delta-rs, DuckDB and us."""
    import random
    import pyarrow.parquet as pq
    table = tmp_path / "delta_strings"
    rnd = random.Random(7)

    def amount():
        digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(0, 11)))
        return rnd.choice(["", "-"]) + rnd.choice("123456789") + digits + "%04d" % rnd.randint(0, 9999)

    rows = [[None if r % 9 == 4 else "0x%020X" % (0x12345600 + r // 3),
             ("%016x" % ((r * 0x9E3779B97F4A7C15) & (2**64 - 1)))[:3 + r * 7 % 13], r,
             None if r % 5 == 2 else amount()]
            for r in range(5000)]
    cols = [["lsn", "u", True], ["u", "u", True], ["k", "l", False], ["amt", "d:18,4", True]]
    tool.write(table, cols, rows, tmp_path, batch_rows=5000)
    encodings = set()
    for f in table.glob("*.parquet"):
        md = pq.ParquetFile(f).metadata
        for g in range(md.num_row_groups):
            encodings |= set(md.row_group(g).column(0).encodings)
            encodings |= set(md.row_group(g).column(1).encodings)
            amt = md.row_group(g).column(3)
            assert amt.compression == "UNCOMPRESSED", amt
            assert "DELTA_BINARY_PACKED" in amt.encodings, amt
            assert md.row_group(g).column(1).compression == "ZSTD"
    assert {"DELTA_BYTE_ARRAY", "DELTA_LENGTH_BYTE_ARRAY"} <= encodings, encodings
    want = rows_key(expected_rows(cols, rows))
    df, got = spark_rows(spark, table)
    assert rows_key(got) == want
    assert rows_key(deltalake_rows(table, ["lsn", "u", "k", "amt"])) == want
    assert rows_key(duckdb_rows(table, ["lsn", "u", "k", "amt"])) == want
    assert rows_key(tool.dump(table)[1]) == want
