"""Our Parquet writer and reader against pyarrow and DuckDB.

* Files we write (every type, every codec, v1/v2 pages, with and without
  dictionary, several row groups) are read by pyarrow and DuckDB with values
  identical to what our own reader dumps.
* Files pyarrow writes with each encoding (dictionary, PLAIN,
  DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY,
  BYTE_STREAM_SPLIT), page v2, every codec incl. LZ4_RAW, INT96 timestamps,
  and files DuckDB writes (v1 and v2), are dumped by our reader with the
  values pyarrow reads.

The tool (tests/tools/parquet_tool.c) is built here against
build/libmssqlcdc.a.
"""
import decimal
import json
import math
import os
import subprocess

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pc = pytest.importorskip("pyarrow.compute")
duckdb = pytest.importorskip("duckdb")

from conftest import BUILD, CC, ROOT, link_libs  # noqa: E402

TOOL = os.path.join(BUILD, "mcdc-parquet-tool")
LIBS = link_libs()

decimal.getcontext().prec = 80


@pytest.fixture(scope="module")
def tool():
    if "MCDC_BUILD" not in os.environ:
        subprocess.run(["make", "-s", "build/libmssqlcdc.a"], cwd=ROOT, check=True)
    cmd = [*CC, "-O2", "-g", "-Iinclude", "-Isrc/util", "-Isrc/storage",
           "-Isrc/batch", "-Isrc/parquet", "-o", TOOL, "tests/tools/parquet_tool.c",
           os.path.join(BUILD, "libmssqlcdc.a"), *LIBS]
    subprocess.run(cmd, cwd=ROOT, check=True)
    return TOOL


def run_tool(tool, *args):
    p = subprocess.run([tool, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("parquet_tool %s failed: %s" % (" ".join(args), p.stderr))
    return p.stdout


def dump(tool, path, *args):
    """Our reader: (column formats, rows as lists)."""
    lines = run_tool(tool, "dump", path, *args).splitlines()
    header = json.loads(lines[0])
    rows = [json.loads(l) for l in lines[1:]]
    return header["columns"], rows


# ---- canonical values (what the dump prints) ------------------------------------

def canon_float(v):
    if v is None:
        return None
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return float(v)


def canon_column(col):
    """An Arrow column -> list of canonical python values."""
    t = col.type
    if pa.types.is_timestamp(t):
        if t.unit != "us":
            col = pc.cast(col, pa.timestamp("us", tz=t.tz), safe=False)
        return pc.cast(col, pa.int64()).to_pylist()
    if pa.types.is_date32(t):
        return pc.cast(col, pa.int32()).to_pylist()
    if pa.types.is_decimal(t):
        scale = t.scale
        return [None if v is None else str(int(v.scaleb(scale))) for v in col.to_pylist()]
    if pa.types.is_floating(t):
        return [canon_float(v) for v in col.to_pylist()]
    if (pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_binary_view(t)):
        return [None if v is None else v.hex() for v in col.to_pylist()]
    if pa.types.is_dictionary(t):
        return canon_column(pc.cast(col, t.value_type))
    return col.to_pylist()


def canon_table(table):
    cols = [canon_column(table.column(i)) for i in range(table.num_columns)]
    return [list(r) for r in zip(*cols)] if cols else []


def canon_ours(rows):
    """Our dump already is canonical; floats as float for comparison."""
    out = []
    for r in rows:
        out.append([float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                    and isinstance(v, float) else v for v in r])
    return out


def assert_same(ours, theirs, what):
    assert len(ours) == len(theirs), "%s: %d rows vs %d" % (what, len(ours), len(theirs))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            diffs = [(k, x, y) for k, (x, y) in enumerate(zip(a, b)) if x != y]
            raise AssertionError("%s: row %d differs (col, ours, theirs): %s" % (what, i, diffs[:5]))


def duck_arrow(con, sql):
    result = con.sql(sql)
    for name in ("to_arrow_table", "fetch_arrow_table", "arrow"):
        if hasattr(result, name):
            t = getattr(result, name)()
            return t.read_all() if hasattr(t, "read_all") else t
    raise AssertionError("no Arrow export in this duckdb")


# ---- our files, read by pyarrow and DuckDB ------------------------------------------

WRITE_CASES = [
    ("zstd", []), ("snappy", []), ("gzip", []), ("lz4_raw", []), ("uncompressed", []),
    ("zstd", ["--no-dict"]), ("snappy", ["--v2"]), ("zstd", ["--v2", "--no-dict"]),
    ("zstd", ["--page-bytes", "2048", "--row-group-bytes", "65536", "--threads", "2"]),
]


@pytest.mark.parametrize("codec,extra", WRITE_CASES)
def test_our_files_read_by_pyarrow_and_duckdb(tool, tmp_path, codec, extra):
    path = str(tmp_path / "ours.parquet")
    info = json.loads(run_tool(tool, "write-sample", path, "--codec", codec, "--rows", "3000",
                               *extra))
    assert info["rows"] == 3000
    assert os.path.getsize(path) == info["file_bytes"]
    cols, ours = dump(tool, path)
    ours = canon_ours(ours)
    assert len(ours) == 3000

    meta = pq.ParquetFile(path).metadata
    assert meta.num_rows == 3000
    assert meta.row_group(0).column(0).compression.lower() == \
        {"lz4_raw": "lz4", "uncompressed": "uncompressed"}.get(codec, codec)
    if "--row-group-bytes" in extra:
        assert meta.num_row_groups > 1
    table = pq.read_table(path)
    assert [f.name for f in table.schema] == [c[0] for c in cols]
    # logical types as pyarrow sees them
    s = table.schema
    assert s.field("i8").type == pa.int8() and s.field("i16").type == pa.int16()
    assert s.field("d38").type == pa.decimal128(38, 10)
    assert s.field("d9").type == pa.decimal128(9, 2)
    assert s.field("s").type == pa.string() and s.field("bin").type == pa.binary()
    assert s.field("fx").type == pa.binary(10)
    assert s.field("dt").type == pa.date32()
    assert s.field("ts").type == pa.timestamp("us")
    assert s.field("tsu").type == pa.timestamp("us", tz="UTC")
    assert not s.field("i32").nullable and s.field("i64").nullable
    assert_same(ours, canon_table(table), "pyarrow " + codec)

    # statistics pyarrow understands
    st = meta.row_group(0).column(4).statistics
    assert st.has_min_max and st.min == -2**63 and st.max == 2**63 - 1
    st = meta.row_group(0).column(11).statistics
    assert st.min == "" and st.null_count > 0

    con = duckdb.connect()
    dtable = duck_arrow(con, "SELECT * FROM read_parquet('%s')" % path)
    assert_same(ours, canon_table(dtable), "duckdb " + codec)
    # DuckDB uses our statistics for pruning; the answers must still be right
    n = con.execute("SELECT count(*) FROM read_parquet(?) WHERE i32 > 1000", [path]).fetchone()[0]
    assert n == sum(1 for r in ours if r[3] > 1000)


@pytest.mark.parametrize("codec", ["zstd", "snappy", "lz4_raw", "uncompressed"])
def test_our_file_read_by_delta_rs(tool, tmp_path, codec):
    """arrow-rs (DataFusion inside deltalake) reads our file through a Delta
    table whose log we write by hand."""
    deltalake = pytest.importorskip("deltalake")
    table_dir = tmp_path / "t"
    (table_dir / "_delta_log").mkdir(parents=True)
    path = str(table_dir / "part-0.parquet")
    run_tool(tool, "write-sample", path, "--codec", codec, "--rows", "2000")
    types = [("b", "boolean"), ("i8", "byte"), ("i16", "short"), ("i32", "integer"),
             ("i64", "long"), ("f32", "float"), ("f64", "double"), ("d9", "decimal(9,2)"),
             ("d18", "decimal(18,4)"), ("d38", "decimal(38,10)"), ("d25", "decimal(25,0)"),
             ("s", "string"), ("bin", "binary"), ("fx", "binary"), ("dt", "date"),
             ("ts", "timestamp_ntz"), ("tsu", "timestamp")]
    schema = {"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": n != "i32", "metadata": {}} for n, t in types]}
    actions = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["timestampNtz"], "writerFeatures": ["timestampNtz"]}},
        {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [],
                      "configuration": {}, "createdTime": 0}},
        {"add": {"path": "part-0.parquet", "partitionValues": {}, "size": os.path.getsize(path),
                 "modificationTime": 0, "dataChange": True}},
    ]
    with open(table_dir / "_delta_log" / "00000000000000000000.json", "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")
    dt = deltalake.DeltaTable(str(table_dir))
    result = deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t")
    result = result.read_all() if hasattr(result, "read_all") else result
    theirs = canon_table(pa.table(result))
    cols, ours = dump(tool, path)
    assert_same(canon_ours(ours), theirs, "delta-rs " + codec)


def test_our_empty_file(tool, tmp_path):
    path = str(tmp_path / "empty.parquet")
    run_tool(tool, "write-sample", path, "--rows", "0")
    t = pq.read_table(path)
    assert t.num_rows == 0 and t.num_columns == 17
    assert duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [path]).fetchone()[0] == 0
    cols, rows = dump(tool, path)
    assert rows == []


# ---- pyarrow files, read by us ----------------------------------------------------------

def sample_arrow_table(n=2500):
    import datetime
    rows = range(n)

    def nul(i):
        return i % 9 == 4

    def col(f, t):
        return pa.array([None if nul(i) else f(i) for i in rows], type=t)

    return pa.table({
        "b": col(lambda i: i % 3 == 0, pa.bool_()),
        "i8": col(lambda i: (i % 256) - 128, pa.int8()),
        "i16": col(lambda i: -32768 if i == 0 else i * 7, pa.int16()),
        "i32": col(lambda i: -2**31 if i == 0 else (i * 7919) % 100000 - 50000, pa.int32()),
        "i64": col(lambda i: 2**63 - 1 if i == 1 else i * 1000003 - 5000000, pa.int64()),
        "f32": col(lambda i: float(i) * 0.5 - 3.25, pa.float32()),
        "f64": col(lambda i: float("nan") if i == 5 else i / 7.0, pa.float64()),
        "d9": col(lambda i: decimal.Decimal(i * 37 - 999).scaleb(-2), pa.decimal128(9, 2)),
        "d18": col(lambda i: decimal.Decimal(i * 1234567 - 10**15).scaleb(-4), pa.decimal128(18, 4)),
        "d38": col(lambda i: decimal.Decimal(-(10**38 - 1) if i == 0 else i * 10**20 + 7).scaleb(-10),
                   pa.decimal128(38, 10)),
        "s": col(lambda i: "" if i == 1 else ("zürich-%d" % (i % 40) if i % 2 else "日本-%d" % (i % 60)),
                 pa.string()),
        "bin": col(lambda i: bytes([(i + k) % 256 for k in range(i % 7)]), pa.binary()),
        "fx": col(lambda i: bytes([(i * 3 + k) % 256 for k in range(6)]), pa.binary(6)),
        "dt": col(lambda i: datetime.date(1970, 1, 1) + datetime.timedelta(days=i - 1200),
                  pa.date32()),
        "ts": col(lambda i: i * 1000001 - 10**9, pa.timestamp("us")),
        "tsm": col(lambda i: i * 1001 - 10**6, pa.timestamp("ms", tz="UTC")),
        "tsn": col(lambda i: i * 1000000007 - 10**12, pa.timestamp("ns")),
        "u8": col(lambda i: i % 256, pa.uint8()),
        "u32": col(lambda i: (i * 2654435761) % 2**32, pa.uint32()),
        "u64": col(lambda i: (i * 11400714819323198485) % 2**64, pa.uint64()),
    })


def check_ours_equal_pyarrow(tool, path, table=None):
    cols, ours = dump(tool, path, "--batch-rows", "777")
    theirs = canon_table(table if table is not None else pq.read_table(path))
    # nanosecond timestamps: we keep microseconds (floor)
    names = [c[0] for c in cols]
    if "tsn" in names:
        k = names.index("tsn")
        tsn = pq.read_table(path, columns=["tsn"]).column(0)
        floored = pc.cast(pc.floor_temporal(tsn, unit="microsecond"), pa.int64())
        us = [None if v is None else v // 1000 for v in floored.to_pylist()]
        for r, v in zip(theirs, us):
            r[k] = v
    # uint64 is read as decimal(20,0): compare the integer's digits
    for k, (name, fmt) in enumerate(cols):
        if fmt.startswith("d:"):
            for r in theirs:
                if isinstance(r[k], int):
                    r[k] = str(r[k])
    assert_same(canon_ours(ours), theirs, path)
    return cols


ENCODING_CASES = {
    "dictionary": dict(use_dictionary=True),
    "plain": dict(use_dictionary=False),
    "delta": dict(use_dictionary=False, column_encoding={
        "i32": "DELTA_BINARY_PACKED", "i64": "DELTA_BINARY_PACKED", "i8": "DELTA_BINARY_PACKED",
        "ts": "DELTA_BINARY_PACKED", "u64": "DELTA_BINARY_PACKED",
        "s": "DELTA_LENGTH_BYTE_ARRAY", "bin": "DELTA_BYTE_ARRAY", "fx": "DELTA_BYTE_ARRAY"}),
    "delta_byte_array_strings": dict(use_dictionary=False, column_encoding={
        "s": "DELTA_BYTE_ARRAY", "bin": "DELTA_LENGTH_BYTE_ARRAY"}),
    "byte_stream_split": dict(use_dictionary=False, column_encoding={
        "f32": "BYTE_STREAM_SPLIT", "f64": "BYTE_STREAM_SPLIT", "i32": "BYTE_STREAM_SPLIT",
        "i64": "BYTE_STREAM_SPLIT", "fx": "BYTE_STREAM_SPLIT", "d38": "BYTE_STREAM_SPLIT"}),
    "v2_dictionary": dict(use_dictionary=True, data_page_version="2.0"),
    "v2_delta": dict(use_dictionary=False, data_page_version="2.0", column_encoding={
        "i64": "DELTA_BINARY_PACKED", "s": "DELTA_BYTE_ARRAY"}),
    "small_pages": dict(use_dictionary=True, data_page_size=512, row_group_size=600),
    "int96": dict(use_deprecated_int96_timestamps=True),
    # dictionary overflow: dictionary pages then PLAIN pages in one chunk
    "dictionary_fallback": dict(use_dictionary=True, dictionary_pagesize_limit=256,
                                data_page_size=1024),
    # page index bytes between the row groups and the footer; no statistics
    "page_index_no_stats": dict(write_page_index=True, write_statistics=False),
    # format 1.0 as parquet-mr writes it: PLAIN_DICTIONARY pages, no ns timestamps
    "format_1_0_plain_dictionary": dict(use_dictionary=True, version="1.0", _drop=["tsn"]),
}


@pytest.mark.parametrize("case", sorted(ENCODING_CASES))
def test_pyarrow_encodings_read_by_us(tool, tmp_path, case):
    opts = dict(ENCODING_CASES[case])
    table = sample_arrow_table().drop_columns(opts.pop("_drop", []))
    path = str(tmp_path / ("pa_%s.parquet" % case))
    pq.write_table(table, path, compression="zstd", **opts)
    cols = check_ours_equal_pyarrow(tool, path)
    fmt = dict(cols)
    assert fmt["u64"] == "d:20,0" and fmt["u32"] == "l" and fmt["u8"] == "s"
    assert fmt["tsm"] == "tsu:UTC"
    if case == "int96":
        assert fmt["ts"] == "tsu:UTC"  # INT96 is an instant (Spark)
    # the encodings really are in the file
    md = pq.ParquetFile(path).metadata.row_group(0)
    encs = set()
    for i in range(md.num_columns):
        encs.update(md.column(i).encodings)
    expect = {"delta": "DELTA_BINARY_PACKED", "byte_stream_split": "BYTE_STREAM_SPLIT",
              "delta_byte_array_strings": "DELTA_BYTE_ARRAY", "dictionary": "RLE_DICTIONARY",
              "format_1_0_plain_dictionary": "PLAIN_DICTIONARY"}
    if case == "dictionary_fallback":
        assert {"RLE_DICTIONARY", "PLAIN"} <= set(md.column(4).encodings)
    if case in expect:
        assert expect[case] in encs, encs


@pytest.mark.parametrize("codec", ["none", "snappy", "gzip", "zstd", "lz4"])
def test_pyarrow_codecs_read_by_us(tool, tmp_path, codec):
    table = sample_arrow_table(1500)
    path = str(tmp_path / ("pa_%s.parquet" % codec))
    pq.write_table(table, path, compression=codec)
    check_ours_equal_pyarrow(tool, path)


def test_projection_and_all_null_columns(tool, tmp_path):
    table = pa.table({"a": pa.array([None] * 100, pa.int64()),
                      "b": pa.array(["x%d" % i for i in range(100)]),
                      "c": pa.array([None] * 100, pa.string())})
    path = str(tmp_path / "nulls.parquet")
    pq.write_table(table, path)
    cols, rows = dump(tool, path, "--columns", "c,b")
    assert [c[0] for c in cols] == ["c", "b"]
    assert rows == [[None, "x%d" % i] for i in range(100)]


# ---- DuckDB files, read by us ----------------------------------------------------------------

DUCK_SELECT = """
SELECT i % 3 = 0 AS b,
       (i % 200 - 100)::TINYINT AS i8,
       (i * 3)::SMALLINT AS i16,
       (i * 7919 % 100000 - 50000)::INTEGER AS i32,
       (i * 1000003 - 5000000)::BIGINT AS i64,
       (i * 0.25)::FLOAT AS f32,
       (i / 7)::DOUBLE AS f64,
       (i * 37 - 999)::DECIMAL(9,2) AS d9,
       (i * 1234567 - 1000000)::DECIMAL(18,4) AS d18,
       (i::HUGEINT * 100000000000000000000 + 7)::DECIMAL(38,0) AS d38,
       CASE WHEN i % 11 = 5 THEN NULL ELSE 'duck-' || (i % 77)::VARCHAR || 'ü' END AS s,
       ('\\xAA\\xBB' || (i % 5)::VARCHAR)::BLOB AS bin,
       DATE '1970-01-01' + (i - 500)::INTEGER AS dt,
       TIMESTAMP '1969-12-31 00:00:00' + INTERVAL (i) SECOND AS ts,
       TIMESTAMPTZ '2024-03-01 00:00:00+00' + INTERVAL (i) MILLISECOND AS tsu
FROM range(3000) t(i)
"""


@pytest.mark.parametrize("opts", [
    "FORMAT PARQUET",
    "FORMAT PARQUET, COMPRESSION SNAPPY",
    "FORMAT PARQUET, COMPRESSION ZSTD, ROW_GROUP_SIZE 1000",
    "FORMAT PARQUET, COMPRESSION GZIP",
    "FORMAT PARQUET, COMPRESSION LZ4_RAW",
    "FORMAT PARQUET, COMPRESSION UNCOMPRESSED, PARQUET_VERSION V2",
    "FORMAT PARQUET, COMPRESSION ZSTD, PARQUET_VERSION V2",
])
def test_duckdb_files_read_by_us(tool, tmp_path, opts):
    path = str(tmp_path / "duck.parquet")
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    con.execute("COPY (%s) TO '%s' (%s)" % (DUCK_SELECT, path, opts))
    check_ours_equal_pyarrow(tool, path)


# ---- nested files through the leaf API (Delta checkpoints) ---------------------------------

def leaf_entries(tool, path, leaf):
    return [json.loads(l) for l in run_tool(tool, "leaf", path, leaf).splitlines()]


def leaves(tool, path):
    out = {}
    for line in run_tool(tool, "leaves", path).splitlines():
        p, d, r, phys, fmt = line.split(" ")
        out[p] = (int(d), int(r), int(phys), fmt)
    return out


def test_nested_levels_match_pyarrow(tool, tmp_path):
    t = pa.table({
        "id": pa.array(range(6), pa.int64()),
        "l": pa.array([[1, 2], None, [], [3], [None], [4, 5, 6]], pa.list_(pa.int32())),
        "st": pa.array([{"x": 1, "m": {"k": "v"}}, None, {"x": None, "m": {}},
                        {"x": 2, "m": None}, {"x": 3, "m": {"a": "b", "c": "d"}},
                        {"x": 4, "m": {"z": None}}],
                       pa.struct([("x", pa.int32()), ("m", pa.map_(pa.string(), pa.string()))])),
    })
    path = str(tmp_path / "nested.parquet")
    for version in ("1.0", "2.0"):
        pq.write_table(t, path, data_page_version=version)
        lv = leaves(tool, path)
        assert lv["id"][:2] == (0, 0) or lv["id"][:2] == (1, 0)
        assert lv["l.list.element"][:2] == (3, 1)
        assert lv["st.x"][:2] == (2, 0)
        assert lv["st.m.key_value.key"][:2] == (3, 1)
        assert lv["st.m.key_value.value"][:2] == (4, 1)
        # list<int32>: levels by hand from the Dremel rules
        e = leaf_entries(tool, path, "l.list.element")
        assert e == [[3, 0, 1], [3, 1, 2], [0, 0, None], [1, 0, None], [3, 0, 3], [2, 0, None],
                     [3, 0, 4], [3, 1, 5], [3, 1, 6]]
        # struct field: null struct -> def 0, null field -> def 1
        e = leaf_entries(tool, path, "st.x")
        assert [x[0] for x in e] == [2, 0, 1, 2, 2, 2]
        assert [x[2] for x in e] == [1, None, None, 2, 3, 4]
        # map keys/values: one row per rep == 0
        k = leaf_entries(tool, path, "st.m.key_value.key")
        v = leaf_entries(tool, path, "st.m.key_value.value")
        assert sum(1 for x in k if x[1] == 0) == 6
        assert [x[2] for x in k if x[0] == 3] == ["k", "a", "c", "z"]
        assert [x[2] for x in v if x[0] == 4] == ["v", "b", "d"]
        assert len(k) == len(v)


def test_delta_rs_checkpoint_leaves(tool, tmp_path):
    deltalake = pytest.importorskip("deltalake")
    table_dir = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": pa.array(["a", "b", "a"])})
    deltalake.write_deltalake(table_dir, data, partition_by=["p"])
    deltalake.write_deltalake(table_dir, data, mode="append", partition_by=["p"])
    dt = deltalake.DeltaTable(table_dir)
    dt.create_checkpoint()
    log = os.path.join(table_dir, "_delta_log")
    cp = [f for f in os.listdir(log) if f.endswith(".checkpoint.parquet")]
    assert len(cp) == 1
    path = os.path.join(log, cp[0])
    lv = leaves(tool, path)
    assert lv["add.path"][:2] == (1, 0) or lv["add.path"][:2] == (2, 0)
    assert "add.partitionValues.key_value.key" in lv and "metaData.schemaString" in lv
    ref = pq.read_table(path)
    nrows = ref.num_rows
    # add.path: the non-null values in order, as pyarrow flattens them
    want = [a["path"] for a in ref.column("add").to_pylist() if a is not None]
    e = leaf_entries(tool, path, "add.path")
    maxdef = lv["add.path"][0]
    assert len(e) == nrows
    assert [x[2] for x in e if x[0] == maxdef] == want
    # partition values (a map inside a struct)
    kd = lv["add.partitionValues.key_value.key"][0]
    want_keys = [kv[0] for a in ref.column("add").to_pylist() if a is not None
                 for kv in (a["partitionValues"] or [])]
    k = leaf_entries(tool, path, "add.partitionValues.key_value.key")
    assert sum(1 for x in k if x[1] == 0) == nrows
    assert [x[2] for x in k if x[0] == kd] == want_keys
    # metaData.schemaString is the table schema JSON
    s = [x[2] for x in leaf_entries(tool, path, "metaData.schemaString") if x[2] is not None]
    assert len(s) == 1 and json.loads(s[0])["type"] == "struct"
    # the flat reader refuses a file with no top-level primitive column
    p = subprocess.run([tool, "dump", path], capture_output=True, text=True)
    assert p.returncode != 0 and "leaf API" in p.stderr


def test_delta_rs_data_files_read_by_us(tool, tmp_path):
    """Data files arrow-rs writes (through deltalake) dump like pyarrow reads them."""
    deltalake = pytest.importorskip("deltalake")
    table = sample_arrow_table(3000).drop_columns(["tsn", "u8", "u32", "u64", "fx"])
    table_dir = str(tmp_path / "t")
    deltalake.write_deltalake(table_dir, table)
    files = [f for f in os.listdir(table_dir) if f.endswith(".parquet")]
    assert files
    for f in files:
        check_ours_equal_pyarrow(tool, os.path.join(table_dir, f))
