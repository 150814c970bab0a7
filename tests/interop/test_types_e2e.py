"""Every SQL Server type the simulator holds, from a change table and from the table
itself into bronze, read back by delta-rs, DuckDB and Spark.

One table has a column of each type: the mapped ones of reference §2.2 and the ones the
reference refuses (hierarchyid, geography, geometry, sql_variant; xml), read here
without loss (docs/tables.md). Its rows are inserted, updated and deleted; `mssql-cdc
stream` (twice: before and after the updates) and `mssql-cdc snapshot` write bronze
through each TDS backend (ours and FreeTDS), and:

- bronze's change rows are the change table's, each once, and every value is the one the
  statements put there: hierarchyid as its string form, geography/geometry as EWKB (the
  WKB with the value's SRID), sql_variant as "<base type>:<value>";
- the snapshot's rows are the table's at the end;
- both backends write the same values;
- delta-rs, DuckDB (delta_scan) and Spark (delta-spark) read the same values, and Spark
  4.1+'s st_geomfromwkb reads the spatial ones as docs/tables.md says;
- a stream whose `columns` leaves these columns out never reads them and keeps running;
  one that gives them another type is refused before it reads anything.

The simulator has no image or rowversion (and keeps text/ntext as (max) strings): those
are covered by the unit tests of the type table only.

Run: .venv/bin/python -m pytest tests/interop/test_types_e2e.py
"""
import datetime as dt
import decimal
import json
import math
import os
import shutil
import struct
import tempfile

import pytest

from conftest import Sim, duckdb_with_delta, run_cli
# the one local Spark session (delta-spark, UTC) of the interop suite
from test_spark_interop import spark  # noqa: F401

deltalake = pytest.importorskip("deltalake")

UTC = dt.timezone.utc
CI = "dbo_every"

# ---- spatial values: one description gives the WKT the source is written with and the
# EWKB bronze must hold (WKB of SQL Server's AsBinaryZM, little endian, SRID in the header)

SRID_FLAG = 0x20000000
KINDS = {"POINT": 1, "LINESTRING": 2, "POLYGON": 3, "MULTIPOINT": 4, "GEOMETRYCOLLECTION": 7}


def wkt(g):
    kind, arg = g
    pts = lambda ps: ", ".join(f"{x!r} {y!r}" for x, y in ps)  # noqa: E731
    if kind == "POINT":
        return f"POINT({arg[0]!r} {arg[1]!r})"
    if kind == "LINESTRING":
        return f"LINESTRING({pts(arg)})"
    if kind == "POLYGON":
        return "POLYGON(" + ", ".join(f"({pts(r)})" for r in arg) + ")"
    if kind == "MULTIPOINT":
        return "MULTIPOINT(" + ", ".join(f"({x!r} {y!r})" for x, y in arg) + ")"
    return "GEOMETRYCOLLECTION(" + ", ".join(wkt(p) for p in arg) + ")"


def wkb(g, srid=None):
    kind, arg = g
    head = struct.pack("<BI", 1, KINDS[kind] | (SRID_FLAG if srid is not None else 0))
    if srid is not None:
        head += struct.pack("<I", srid)
    xy = lambda p: struct.pack("<dd", *p)  # noqa: E731
    if kind == "POINT":
        return head + xy(arg)
    if kind == "LINESTRING":
        return head + struct.pack("<I", len(arg)) + b"".join(xy(p) for p in arg)
    if kind == "POLYGON":
        return head + struct.pack("<I", len(arg)) + b"".join(
            struct.pack("<I", len(r)) + b"".join(xy(p) for p in r) for r in arg)
    parts = [("POINT", p) for p in arg] if kind == "MULTIPOINT" else arg
    return head + struct.pack("<I", len(parts)) + b"".join(wkb(p) for p in parts)


def geo(g, srid, geography=True):
    """(T-SQL literal, expected bronze value) of a spatial value."""
    t = "geography" if geography else "geometry"
    return f"{t}::STGeomFromText('{wkt(g)}', {srid})", wkb(g, srid)


# A polygon of SQL Server's documentation (counter-clockwise, as geography wants it).
SEATTLE = ("POLYGON", [[(-122.358, 47.653), (-122.348, 47.649), (-122.348, 47.658),
                        (-122.358, 47.653)]])

# ---- the table: (column, SQL Server type, Delta type)

COLUMNS = [
    ("id", "INT NOT NULL PRIMARY KEY", "integer"), ("b", "BIT", "boolean"),
    ("ti", "TINYINT", "short"), ("si", "SMALLINT", "short"), ("i", "INT", "integer"),
    ("bi", "BIGINT", "long"), ("r", "REAL", "float"), ("f", "FLOAT", "double"),
    ("dc", "DECIMAL(38,6)", "decimal(38,6)"), ("nm", "NUMERIC(5,0)", "decimal(5,0)"),
    ("m", "MONEY", "decimal(19,4)"), ("sm", "SMALLMONEY", "decimal(10,4)"),
    ("d", "DATE", "date"), ("dt", "DATETIME", "timestamp_ntz"),
    ("sdt", "SMALLDATETIME", "timestamp_ntz"), ("dt2", "DATETIME2(7)", "timestamp_ntz"),
    ("dto", "DATETIMEOFFSET(3)", "timestamp"), ("t", "TIME(4)", "string"),
    ("c", "CHAR(3)", "string"), ("vc", "VARCHAR(10)", "string"), ("nc", "NCHAR(2)", "string"),
    ("nv", "NVARCHAR(MAX)", "string"), ("tx", "TEXT", "string"), ("ntx", "NTEXT", "string"),
    ("u", "UNIQUEIDENTIFIER", "string"), ("bn", "BINARY(3)", "binary"),
    ("vb", "VARBINARY(8)", "binary"), ("x", "XML", "string"), ("h", "HIERARCHYID", "string"),
    ("geo", "GEOGRAPHY", "binary"), ("gm", "GEOMETRY", "binary"), ("v", "SQL_VARIANT", "string"),
]
NAMES = [c for c, _, _ in COLUMNS]
ITEM4 = ("x", "h", "geo", "gm", "v")

GUID = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
POLY = geo(SEATTLE, 4326)
# every mapped type at an edge of its range (the values of test_reader_arrow's table)
FULL = {
    "b": ("1", True), "ti": ("255", 255), "si": ("-32768", -32768),
    "i": ("2147483647", 2147483647), "bi": ("-9223372036854775808", -9223372036854775808),
    "r": ("1.5", 1.5), "f": ("-2.25e100", -2.25e100),
    "dc": ("CAST('12345678901234567890123456789012.123456' AS DECIMAL(38,6))",
           decimal.Decimal("12345678901234567890123456789012.123456")),
    "nm": ("-99999", decimal.Decimal("-99999")),
    "m": ("CAST('-922337203685477.5808' AS MONEY)", decimal.Decimal("-922337203685477.5808")),
    "sm": ("214748.3647", decimal.Decimal("214748.3647")),
    "d": ("'0001-01-01'", dt.date(1, 1, 1)),
    "dt": ("'1753-01-01 00:00:00.003'", dt.datetime(1753, 1, 1, 0, 0, 0, 3000)),
    "sdt": ("'2079-06-06 23:59:00'", dt.datetime(2079, 6, 6, 23, 59)),
    "dt2": ("'9999-12-31 23:59:59.9999999'", dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    "dto": ("'2025-06-01 12:00:00.123 +05:30'", dt.datetime(2025, 6, 1, 6, 30, 0, 123000, UTC)),
    "t": ("'23:59:59.1234'", "23:59:59.1234"), "c": ("'ab'", "ab "), "vc": ("'x'", "x"),
    "nc": ("N'\u00e9'", "\u00e9 "), "nv": ("N'\U0001F600 long'", "\U0001F600 long"),
    "tx": ("'legacy text'", "legacy text"), "ntx": ("N'\u00f1text'", "\u00f1text"),
    "u": (f"'{GUID}'", GUID), "bn": ("0x00FF10", b"\x00\xff\x10"), "vb": ("0x0102", b"\x01\x02"),
    "x": ("'<doc a=\"1\"><e>t &amp; u</e></doc>'", '<doc a="1"><e>t &amp; u</e></doc>'),
    "h": ("'/1/2.5/'", "/1/2.5/"), "geo": POLY,
    "gm": geo(("MULTIPOINT", [(1.0, 2.0), (3.0, 4.0)]), 3857, geography=False),
    "v": ("CAST(12.30 AS decimal(10,2))", "decimal:12.30"),
}
# sql_variant: one row per base type, and the text each reads as
VARIANTS = [
    ("CAST(42 AS int)", "int:42"), ("CAST(-5 AS bigint)", "bigint:-5"),
    ("CAST(255 AS tinyint)", "tinyint:255"), ("CAST(-3 AS smallint)", "smallint:-3"),
    ("CAST(1 AS bit)", "bit:1"), ("CAST(-1.5 AS decimal(5,1))", "decimal:-1.5"),
    ("CAST(0.1 AS float)", "float:0.1"), ("CAST(0.1 AS real)", "real:0.1"),
    ("CAST(1e300 AS float)", "float:1e300"),
    ("CAST(12.3456 AS money)", "money:12.3456"), ("CAST(5.5 AS smallmoney)", "smallmoney:5.5000"),
    ("CAST('2024-01-02 03:04:05.003' AS datetime)", "datetime:2024-01-02 03:04:05.003"),
    ("CAST('2024-01-02 03:04:00' AS smalldatetime)", "smalldatetime:2024-01-02 03:04:00"),
    ("CAST('2024-01-02 03:04:05.1234567' AS datetime2(7))",
     "datetime2:2024-01-02 03:04:05.1234567"),
    ("CAST('2024-01-02 03:04:05.12 +05:30' AS datetimeoffset(2))",
     "datetimeoffset:2024-01-02 03:04:05.12 +05:30"),
    ("CAST('2024-01-02' AS date)", "date:2024-01-02"),
    ("CAST('03:04:05.5' AS time(3))", "time:03:04:05.500"),
    ("CAST('x' AS varchar(10))", "varchar:x"), ("CAST(N'a:b \u2603' AS nvarchar(20))",
                                                "nvarchar:a:b \u2603"),
    ("CAST('ab' AS char(4))", "char:ab  "), ("CAST(N'z' AS nchar(3))", "nchar:z  "),
    ("CAST(0x0102FF AS varbinary(10))", "varbinary:0x0102FF"),
    ("CAST(0xAB AS binary(3))", "binary:0xAB0000"),
    (f"CAST('{GUID}' AS uniqueidentifier)", f"uniqueidentifier:{GUID}"),
]
FLOAT = 6
NVARCHAR = 18
assert VARIANTS[FLOAT][1] == "float:0.1" and VARIANTS[NVARCHAR][1].startswith("nvarchar:")
HIERARCHY = ["/", "/1/", "/1/2/", "/3/1.5/", "/2/1/3/"]
SHAPES = [
    geo(("POINT", (-122.35, 47.65)), 4326),
    geo(("LINESTRING", [(0.0, 0.0), (1.5, 1.5), (3.0, 0.25)]), 4326, geography=False),
    geo(("GEOMETRYCOLLECTION", [("POINT", (1.0, 1.0)), ("LINESTRING", [(0.0, 0.0), (2.0, 2.0)])]),
        0, geography=False),
    geo(("POLYGON", [[(0.0, 0.0), (4.0, 0.0), (4.0, 4.0), (0.0, 0.0)],
                     [(1.0, 1.0), (2.0, 1.0), (2.0, 2.0), (1.0, 1.0)]]), 32633, geography=False),
]


def row(rid, **cells):
    """(id, {column: (literal, expected)}) with NULL for every column not given."""
    return rid, {n: cells.get(n, ("NULL", None)) for n in NAMES if n != "id"}


def first_rows():
    rows = [row(1, **FULL), row(3)]
    for k, (lit, want) in enumerate(VARIANTS):
        rows.append(row(10 + k, v=(lit, want), h=(f"'{HIERARCHY[k % len(HIERARCHY)]}'",
                                                   HIERARCHY[k % len(HIERARCHY)])))
    for k, s in enumerate(SHAPES):
        rows.append(row(40 + k, gm=s) if s[0].startswith("geometry") else row(40 + k, geo=s))
    rows.append(row(2, h=("'/'", "/"), geo=SHAPES[0], gm=SHAPES[2], v=VARIANTS[FLOAT], i=("1", 1)))
    return rows


UPDATE_2 = {"h": ("'/3/'", "/3/"), "gm": SHAPES[1], "v": VARIANTS[NVARCHAR], "i": ("7", 7),
            "geo": POLY}


def insert_sql(rows):
    cols = ", ".join(NAMES)
    return "\n".join(f"INSERT INTO dbo.every ({cols}) VALUES ({rid}, "
                     + ", ".join(cells[n][0] for n in NAMES[1:]) + ");" for rid, cells in rows)


# ---- the run: the simulator, the workload, the CLI with each backend -------------------

def stream(sim, d, backend, extra=()):
    return run_cli("stream", "--captureInstance", CI,
                   "--connectionString", sim.connection_string("typ"), "--backend", backend,
                   "--target", os.path.join(d, "bronze"), "--app-id", f"every-{backend}",
                   "--checkpoint", os.path.join(d, "ckpt"),
                   "--facts-table", os.path.join(d, "facts"), "--trigger", "availableNow",
                   *extra)


@pytest.fixture(scope="module")
def lake():
    work = tempfile.mkdtemp(prefix="mcdc-types-")
    data = os.path.join(work, "sim")
    os.makedirs(data)
    sim = Sim(data, ["--capture-poll-ms", "50", "--capture-latency-ms", "0"])
    try:
        sim.run("CREATE DATABASE typ;")
        sim.run("CREATE TABLE dbo.every ("
                + ", ".join(f"{n} {t}" + ("" if "NOT NULL" in t else " NULL")
                            for n, t, _ in COLUMNS)
                + ");\nEXEC sys.sp_cdc_enable_db;\nEXEC sys.sp_cdc_enable_table "
                  "@source_schema = N'dbo', @source_name = N'every', @role_name = NULL;",
                database="typ")
        rows = first_rows()
        sim.run("BEGIN TRAN;\n" + insert_sql(rows) + "\nCOMMIT;\n"
                "EXEC sim.run_capture @ignore_latency = 1;", database="typ")
        model = {rid: {"id": rid, **{n: c[1] for n, c in cells.items()}} for rid, cells in rows}
        changes = [(2, dict(model[rid])) for rid, _ in rows]
        for be in ("native", "freetds"):
            stream(sim, os.path.join(work, be), be)
        # updates of every item-4 column, a delete, an insert
        sets = ", ".join(f"{n} = {lit}" for n, (lit, _) in UPDATE_2.items())
        sim.run(f"BEGIN TRAN;\nUPDATE dbo.every SET {sets} WHERE id = 2;\n"
                "DELETE FROM dbo.every WHERE id = 3;\n"
                + insert_sql([row(4, h=("'/9/'", "/9/"), v=VARIANTS[0], gm=SHAPES[3])])
                + "\nCOMMIT;\nEXEC sim.run_capture @ignore_latency = 1;", database="typ")
        before = dict(model[2])
        model[2].update({n: want for n, (_, want) in UPDATE_2.items()})
        changes += [(3, before), (4, dict(model[2])), (1, dict(model.pop(3)))]
        model[4] = {"id": 4, **{n: None for n in NAMES[1:]}, "h": "/9/", "v": "int:42",
                    "gm": SHAPES[3][1]}
        changes.append((2, dict(model[4])))
        for be in ("native", "freetds"):
            d = os.path.join(work, be)
            stream(sim, d, be)
            run_cli("snapshot", "--captureInstance", CI,
                    "--connectionString", sim.connection_string("typ"), "--backend", be,
                    "--target", os.path.join(d, "snapshot"))
        keys = sorted(tuple(r) for r in sim.run(
            "SELECT CONVERT(varchar(22), __$start_lsn, 1), CONVERT(varchar(22), __$seqval, 1), "
            "__$operation FROM cdc.dbo_every_CT", database="typ"))
        yield {"sim": sim, "work": work, "model": model, "changes": changes, "keys": keys}
    finally:
        sim.stop()
        shutil.rmtree(work, ignore_errors=True)


# ---- comparing values ------------------------------------------------------------------

def norm(v):
    """One value as every reader's can be compared: bytes, naive UTC datetimes."""
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC).replace(tzinfo=None)
    return v


def same(col, got, want):
    got, want = norm(got), norm(want)
    if col == "v" and isinstance(got, str) and isinstance(want, str) and \
            want.split(":")[0] in ("float", "real"):
        # 17 significant digits on SQL Server (CONVERT style 3), the shortest that reads
        # back on the simulator: the same double (or real) either way
        base, text = got.split(":", 1)
        wbase, wtext = want.split(":", 1)
        if base != wbase:
            return False
        if base == "real":
            return struct.pack("<f", float(text)) == struct.pack("<f", float(wtext))
        return float(text) == float(wtext)
    if isinstance(want, float) and isinstance(got, float):
        return got == want or (math.isnan(got) and math.isnan(want))
    return got == want


def check_rows(got, want, what):
    """got, want: lists of dicts; rows matched by (_operation, id)."""
    key = lambda r: (r["_operation"], r["id"])  # noqa: E731
    got, want = sorted(got, key=key), sorted(want, key=key)
    assert [key(r) for r in got] == [key(r) for r in want], what
    for g, w in zip(got, want):
        for n in NAMES:
            assert same(n, g[n], w[n]), f"{what}: row {key(w)}, column {n}: {g[n]!r} != {w[n]!r}"


def expected_changes(lake):
    return [{"_operation": op, **image} for op, image in lake["changes"]]


def expected_snapshot(lake):
    return [{"_operation": 0, **r} for r in lake["model"].values()]


def deltalake_rows(path):
    return deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()


# ---- the tests -------------------------------------------------------------------------

def test_every_type_streams_and_snapshots_with_either_backend(lake):
    for be in ("native", "freetds"):
        d = os.path.join(lake["work"], be)
        rows = deltalake_rows(os.path.join(d, "bronze"))
        got_keys = sorted((r["_start_lsn"], r["_seqval"], r["_operation"]) for r in rows)
        assert got_keys == lake["keys"], f"{be}: bronze is not the change table, once"
        check_rows(rows, expected_changes(lake), f"{be} stream")
        check_rows(deltalake_rows(os.path.join(d, "snapshot")), expected_snapshot(lake),
                   f"{be} snapshot")
        schema = deltalake.DeltaTable(os.path.join(d, "bronze")).schema().to_json()
        types = {f["name"]: f["type"] for f in json.loads(schema)["fields"]}
        assert {n: types[n] for n in NAMES} == {n: t for n, _, t in COLUMNS}
    # the two backends: the same bytes and texts
    for table in ("bronze", "snapshot"):
        a, b = (sorted(deltalake_rows(os.path.join(lake["work"], be, table)),
                       key=lambda r: (r["_start_lsn"], r["_seqval"] or "", r["_operation"],
                                      r["id"]))
                for be in ("native", "freetds"))
        assert [{n: r[n] for n in NAMES} for r in a] == [{n: r[n] for n in NAMES} for r in b]


def test_duckdb_reads_every_type(lake):
    con = duckdb_with_delta()
    for table, want in (("bronze", expected_changes(lake)), ("snapshot", expected_snapshot(lake))):
        path = os.path.join(lake["work"], "native", table)
        cur = con.execute(f"SELECT * FROM delta_scan('{path}')")
        names = [c[0] for c in cur.description]
        check_rows([dict(zip(names, r)) for r in cur.fetchall()], want, f"duckdb {table}")
    # the sql_variant text splits on its first colon
    path = os.path.join(lake["work"], "native", "snapshot")
    got = con.execute(f"SELECT split_part(v, ':', 1), v[strpos(v, ':') + 1:] FROM "
                      f"delta_scan('{path}') WHERE id = 2").fetchall()
    assert got == [("nvarchar", "a:b \u2603")]


# docs/tables.md: bronze's EWKB to Spark 4.1+'s GEOMETRY, the SRID taken out of the header
SPARK_WKB = "concat(substr({c}, 1, 4), X'00', substr({c}, 10))"
SPARK_SRID = "CAST(conv(hex(reverse(substr({c}, 6, 4))), 16, 10) AS INT)"


def test_spark_reads_every_type_and_the_spatial_values_as_geometries(lake, spark):
    for table, want in (("bronze", expected_changes(lake)), ("snapshot", expected_snapshot(lake))):
        path = os.path.join(lake["work"], "native", table)
        df = spark.read.format("delta").load(path)
        check_rows([r.asDict() for r in df.collect()], want, f"spark {table}")
    df = spark.read.format("delta").load(os.path.join(lake["work"], "native", "snapshot"))
    df.createOrReplaceTempView("every")
    split = spark.sql("SELECT substring_index(v, ':', 1) AS t, substr(v, instr(v, ':') + 1) AS x "
                      "FROM every WHERE id = 2").collect()
    assert [(r["t"], r["x"]) for r in split] == [("nvarchar", "a:b \u2603")]
    from pyspark.sql import functions
    if not hasattr(functions, "st_geomfromwkb"):
        pytest.skip("this Spark has no st_geomfromwkb (4.1+)")
    q = ("SELECT id, st_srid(g) AS srid, hex(st_asbinary(g)) AS wkb FROM (SELECT id, "
         f"st_geomfromwkb({SPARK_WKB.format(c='gm')}, {SPARK_SRID.format(c='gm')}) AS g "
         "FROM every WHERE gm IS NOT NULL)")
    got = {r["id"]: (r["srid"], bytes.fromhex(r["wkb"])) for r in spark.sql(q).collect()}
    want = {rid: (struct.unpack("<I", r["gm"][5:9])[0], r["gm"][:4] + b"\x00" + r["gm"][9:])
            for rid, r in lake["model"].items() if r["gm"] is not None}
    assert got == want and len(got) >= 4
    q = ("SELECT id, st_srid(g) AS srid FROM (SELECT id, "
         f"st_geogfromwkb({SPARK_WKB.format(c='geo')}) AS g FROM every WHERE geo IS NOT NULL)")
    assert {r["id"]: r["srid"] for r in spark.sql(q).collect()} == \
        {rid: 4326 for rid, r in lake["model"].items() if r["geo"] is not None}


def test_columns_leaves_them_out_and_the_stream_keeps_running(lake, tmp_path):
    sim = lake["sim"]
    listed = ["--columns", "id INT, i INT, vc STRING"]
    stream(sim, str(tmp_path), "native", extra=listed)
    sim.run("INSERT INTO dbo.every (id, i, h, geo, v) VALUES (90, 9, '/5/', "
            "geography::Point(1, 2, 4326), CAST(N'later' AS nvarchar(10)));\n"
            "EXEC sim.run_capture @ignore_latency = 1;", database="typ")
    stream(sim, str(tmp_path), "native", extra=listed)
    rows = deltalake_rows(str(tmp_path / "bronze"))
    assert not set(ITEM4) & set(rows[0]), "a column columns leaves out was written"
    assert [r["i"] for r in rows if r["id"] == 90] == [9]
    assert len(rows) == len(lake["keys"]) + 1
    # they read with the types their reads give...
    given = ["--columns", "id INT, h STRING, geo BINARY, v STRING"]
    stream(sim, str(tmp_path / "some"), "freetds", extra=given)
    got = {r["id"]: r for r in deltalake_rows(str(tmp_path / "some" / "bronze"))
           if r["_operation"] == 2}
    assert got[90]["h"] == "/5/" and got[90]["v"] == "nvarchar:later"
    assert got[90]["geo"] == wkb(("POINT", (2.0, 1.0)), 4326)
    # ...and with another one they are refused before anything is read
    for spec, says in (("id INT, geo STRING", "'geo' is a geography or geometry column, which "
                                              "reads as BINARY (EWKB)"),
                       ("id INT, v BINARY", "'v' is a sql_variant column, which reads as STRING"),
                       ("id INT, h BIGINT", "'h' is a hierarchyid column")):
        d = tmp_path / "refused"
        p = run_cli("stream", "--captureInstance", CI,
                    "--connectionString", sim.connection_string("typ"),
                    "--target", str(d / "bronze"), "--app-id", "refused",
                    "--checkpoint", str(d / "ckpt"), "--trigger", "availableNow",
                    "--columns", spec, check=False)
        assert p.returncode != 0 and says in p.stderr, p.stderr
        assert not (d / "bronze" / "_delta_log").exists()
