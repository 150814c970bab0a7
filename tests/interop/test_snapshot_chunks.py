"""Snapshot chunks through the public C API (mcdc_snapshot_plan_create,
mcdc_snapshot_read), loaded with ctypes, each chunk's ArrowArrayStream imported
by pyarrow: for tables cut on every kind of key the reference supports, the
chunks of a small chunk_rows, and the whole-snapshot ranges, read back every
row of the table exactly once (the table read through pymssql), each chunk
holding at most chunk_rows rows (a value repeated more often may exceed it).
"""
import ctypes
import datetime as dt
import decimal
import json
import os
import uuid

import pyarrow as pa
import pytest

from conftest import BUILD

CDC_DB = "EXEC sys.sp_cdc_enable_db;"


def enable(sim, table):
    sim.run(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', "
            "@role_name = NULL;", database="shop")


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("server_number", ctypes.c_int),
                ("server_state", ctypes.c_int), ("server_class", ctypes.c_int),
                ("server_line", ctypes.c_int), ("message", ctypes.c_char * 1024)]


class Info(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("capture_instance", ctypes.c_char * 401),
                ("index", ctypes.c_int32), ("count", ctypes.c_int32),
                ("n_keys", ctypes.c_int32)]


@pytest.fixture(scope="module")
def lib():
    path = os.path.join(BUILD, "libmssqlcdc.so")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not built")
    return load(path)


def load(path):
    lib = ctypes.CDLL(path)
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    ep = ctypes.POINTER(Error)
    lib.mcdc_opts_create.argtypes = [ctypes.POINTER(vp), ep]
    lib.mcdc_opts_set.argtypes = [vp, cp, cp, vp, ep]
    lib.mcdc_opts_free.argtypes = [vp]
    lib.mcdc_snapshot_plan_create.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_int64, ep]
    lib.mcdc_snapshot_plan_count.argtypes = [vp]
    lib.mcdc_snapshot_plan_count.restype = ctypes.c_size_t
    lib.mcdc_snapshot_plan_token.argtypes = [vp, ctypes.c_size_t]
    lib.mcdc_snapshot_plan_token.restype = cp
    lib.mcdc_snapshot_plan_lsn.argtypes = [vp]
    lib.mcdc_snapshot_plan_lsn.restype = cp
    lib.mcdc_snapshot_plan_free.argtypes = [vp]
    lib.mcdc_snapshot_plan_chunks.argtypes = [ctypes.POINTER(vp), vp, cp, cp, cp, ep]
    lib.mcdc_snapshot_plan_from_extent.argtypes = [ctypes.POINTER(vp), vp, cp, cp,
                                                   ctypes.c_int64, ep]
    lib.mcdc_snapshot_plan_extent.argtypes = [vp]
    lib.mcdc_snapshot_plan_extent.restype = cp
    lib.mcdc_snapshot_read.argtypes = [vp, vp, cp, cp, ep]
    lib.mcdc_snapshot_token_parse.argtypes = [ctypes.POINTER(Info), cp, ep]
    return lib


class Api:
    """The public API over one simulator database."""

    def __init__(self, lib, sim, ci):
        self.lib, self.sim, self.ci = lib, sim, ci

    def options(self, **extra):
        o, e = ctypes.c_void_p(), Error()
        assert self.lib.mcdc_opts_create(ctypes.byref(o), ctypes.byref(e)) == 0, e.message
        opts = {"connectionString": self.sim.connection_string("shop"), "captureInstance": self.ci,
                "arrowBatchSize": "3", **extra}
        for k, v in opts.items():
            rc = self.lib.mcdc_opts_set(o, k.encode(), v.encode(), None, ctypes.byref(e))
            assert rc == 0, e.message
        return o

    def plan(self, chunk_rows, **extra):
        """(tokens, lsn), or raises AssertionError carrying (rc, message)."""
        return self._planned(lambda p, o, e: self.lib.mcdc_snapshot_plan_create(
            p, o, chunk_rows, e), extra)

    def plan_chunks(self, keys, chunks, max_bound=None, **extra):
        """Tokens for recorded chunks (mcdc_snapshot_plan_chunks); keys and
        chunks as JSON text, max_bound a value or None."""
        given = None if max_bound is None else json.dumps(max_bound).encode()
        return self._planned(lambda p, o, e: self.lib.mcdc_snapshot_plan_chunks(
            p, o, keys.encode(), chunks.encode(), given, e), extra)

    def plan_from_extent(self, keys, extent, chunk_rows, **extra):
        """(tokens, extent) of mcdc_snapshot_plan_from_extent: keys and
        extent values (None, None: the extent read now)."""
        def create(p, o, e):
            given = keys is not None
            return self.lib.mcdc_snapshot_plan_from_extent(
                p, o, json.dumps(keys).encode() if given else None,
                json.dumps(extent).encode() if given else None, chunk_rows, e)
        return self._planned(create, extra, extent=True)

    def _planned(self, create, extra, extent=False):
        o = self.options(**extra)
        p, e = ctypes.c_void_p(), Error()
        rc = create(ctypes.byref(p), o, ctypes.byref(e))
        try:
            if rc != 0:
                raise PlanError(rc, e.message.decode(), e.server_number)
            n = self.lib.mcdc_snapshot_plan_count(p)
            tokens = [self.lib.mcdc_snapshot_plan_token(p, i).decode() for i in range(n)]
            if extent:
                return tokens, json.loads(self.lib.mcdc_snapshot_plan_extent(p).decode())
            return tokens, self.lib.mcdc_snapshot_plan_lsn(p).decode()
        finally:
            self.lib.mcdc_snapshot_plan_free(p)
            self.lib.mcdc_opts_free(o)

    def read(self, token, lsn, **extra):
        """The chunk's rows (dicts) and batches; raises PlanError when it does not open."""
        o = self.options(**extra)
        stream = ctypes.create_string_buffer(5 * ctypes.sizeof(ctypes.c_void_p))
        e = Error()
        try:
            rc = self.lib.mcdc_snapshot_read(stream, o, token.encode(), lsn.encode(),
                                             ctypes.byref(e))
            if rc != 0:
                raise PlanError(rc, e.message.decode(), e.server_number)
            reader = pa.RecordBatchReader._import_from_c(ctypes.addressof(stream))
            batches = list(reader)
        finally:
            self.lib.mcdc_opts_free(o)
        for b in batches:
            b.validate(full=True)
        return [r for b in batches for r in b.to_pylist()], batches

    def info(self, token):
        i, e = Info(version=1), Error()
        assert self.lib.mcdc_snapshot_token_parse(ctypes.byref(i), token.encode(),
                                                  ctypes.byref(e)) == 0, e.message
        return i


class PlanError(AssertionError):
    def __init__(self, rc, message, server_number=0):
        super().__init__(f"{rc}: {message}")
        self.rc, self.message, self.server_number = rc, message, server_number


def norm(v):
    """A value as comparable text, the same from pymssql and from pyarrow."""
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=None).isoformat(timespec="microseconds")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v).upper()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    return str(v)


def table_rows(sim, table, cols):
    rows = sim.run(f"SELECT {', '.join(f'[{c}]' for c in cols)} FROM dbo.[{table}]",
                   database="shop")
    return sorted(tuple(norm(v) for v in r) for r in rows)


def check_snapshot(api, table, cols, chunk_rows, *, max_rows=None, first_max=None, extra=None,
                   ranges=4, expect_chunks=None, want_ranges=4):
    """Plans chunk_rows chunks and numPartitions=ranges whole-snapshot
    ranges; reads each through the public API; every row exactly once, every
    chunk within max_rows (default chunk_rows; the last one more). Returns
    the tokens of both plans and the chunks' sizes."""
    extra = extra or {}
    want = table_rows(api.sim, table, cols)
    tokens, lsn = api.plan(chunk_rows, **extra)
    assert len(lsn) == 22 and lsn.startswith("0x"), lsn
    got, sizes = [], []
    for i, tok in enumerate(tokens):
        info = api.info(tok)
        assert (info.index, info.count) == (i, len(tokens)), (info.index, info.count)
        assert info.capture_instance.decode() == api.ci
        rows, _ = api.read(tok, lsn, **extra)
        assert all(r["_start_lsn"] == lsn and r["_operation"] == 0 and r["_seqval"] is None
                   for r in rows)
        sizes.append(len(rows))
        got += [tuple(norm(r[c]) for c in cols) for r in rows]
    limit = chunk_rows if max_rows is None else max_rows
    assert sorted(got) == want, (len(got), len(want), tokens)
    assert len(set(got)) == len(got) or len(set(want)) != len(want)
    # a keyset plan's last chunk also holds MAX itself, which its seek stops below
    # and the first, open below, every row whose key is NULL
    assert sizes[0] <= (limit if first_max is None else first_max), (sizes, tokens)
    assert max(sizes[1:-1], default=0) <= limit and sizes[-1] <= limit + 1, (sizes, tokens)
    if expect_chunks is not None:
        assert expect_chunks(len(tokens)), (len(tokens), sizes)
    # the whole snapshot in numPartitions ranges: the same rows, once each
    rtokens, rlsn = api.plan(0, numPartitions=str(ranges), **extra)
    assert len(rtokens) == want_ranges, (len(rtokens), rtokens)
    again = [tuple(norm(r[c]) for c in cols)
             for tok in rtokens for r in api.read(tok, rlsn, **extra)[0]]
    assert sorted(again) == want, (len(again), len(want), rtokens)
    return tokens, rtokens, sizes


@pytest.fixture
def shop(sim):
    sim.run("CREATE DATABASE shop;")
    sim.run(CDC_DB, database="shop")
    return sim


def make(sim, table, ddl, rows, values):
    sim.run(f"CREATE TABLE dbo.[{table}] ({ddl});", database="shop")
    for i in range(0, len(rows), 200):
        part = rows[i:i + 200]
        sim.run(f"INSERT INTO dbo.[{table}] VALUES " + ",".join(values(r) for r in part),
                database="shop")
    enable(sim, table)


def test_int_key_chunks_tile_the_table(lib, shop):
    ids = [i for i in range(1, 301) if i % 7]  # gaps
    make(shop, "t", "id INT NOT NULL PRIMARY KEY, v NVARCHAR(20) NULL", ids,
         lambda i: f"({i}, N'v{i}')")
    api = Api(lib, shop, "dbo_t")
    tokens, rtokens, sizes = check_snapshot(api, "t", ["id", "v"], 10,
                                            expect_chunks=lambda n: 26 <= n <= 60)
    plan = [json.loads(t) for t in tokens]
    assert plan[0]["keys"] == ["id"] and plan[0]["lo"] is None
    assert all(a["hi"] == b["lo"] for a, b in zip(plan, plan[1:]))
    assert plan[-1]["hi"] == 301 and all(isinstance(p["hi"], int) for p in plan)
    # whole-snapshot ranges: uniform over [MIN, MAX], first open below, last above
    r = [json.loads(t) for t in rtokens]
    assert [(x["lo"], x["hi"]) for x in r] == [(None, 76), (76, 151), (151, 226), (226, None)]
    assert "PWD" not in "".join(tokens + rtokens) and "Sim-Passw0rd" not in "".join(tokens)


def test_bigint_key_with_negative_and_extreme_values(lib, shop):
    keys = ([-9223372036854775808, -2**40, -5, -1, 0, 1, 7, 1000, 2**40, 2**62,
             9223372036854775806, 9223372036854775807] + list(range(100, 130)))
    make(shop, "b", "id BIGINT NOT NULL PRIMARY KEY, v INT NULL", keys,
         lambda k: f"({k}, {k % 1000})")
    api = Api(lib, shop, "dbo_b")
    tokens, _, _ = check_snapshot(api, "b", ["id", "v"], 4)
    plan = [json.loads(t) for t in tokens]
    # nothing is above INT64_MAX: the last chunk ends open
    assert plan[0]["lo"] is None and plan[-1]["hi"] is None


def test_sparse_int_key_with_a_sentinel_far_above(lib, shop):
    ids = list(range(1, 201)) + [2_000_000_000]
    make(shop, "s", "id INT NOT NULL PRIMARY KEY, v NVARCHAR(10) NULL", ids,
         lambda i: f"({i}, N'x')")
    api = Api(lib, shop, "dbo_s")
    tokens, _, sizes = check_snapshot(api, "s", ["id", "v"], 20,
                                      expect_chunks=lambda n: 10 <= n <= 16)
    # slices are recounted finer: no chunk is empty but perhaps the sentinel's neighbours
    assert sum(1 for s in sizes if s == 0) == 0, sizes
    assert json.loads(tokens[-1])["hi"] == 2_000_000_001


def test_composite_key_under_a_case_insensitive_collation(lib, shop):
    regions = ["north", "North", "NORTH", "south", "South", "east", "n", "N", "west", "WEST"]
    rows = [(regions[i % len(regions)], i) for i in range(120)]
    make(shop, "c", "region NVARCHAR(20) NOT NULL, id INT NOT NULL, v VARCHAR(10) NULL, "
         "PRIMARY KEY (region, id)", rows, lambda r: f"(N'{r[0]}', {r[1]}, 'v{r[1]}')")
    api = Api(lib, shop, "dbo_c")
    tokens, rtokens, _ = check_snapshot(api, "c", ["region", "id", "v"], 7)
    plan = [json.loads(t) for t in tokens]
    assert plan[0]["keys"] == ["region", "id"]
    assert all(isinstance(p["hi"], list) and len(p["hi"]) == 2 for p in plan[:-1])
    assert all(a["hi"] == b["lo"] for a, b in zip(plan, plan[1:]))


def test_varchar_key_with_its_collation(lib, shop):
    names = [f"k{i:03d}" if i % 3 else f"K{i:03d}" for i in range(60)]
    make(shop, "vc", "name VARCHAR(12) COLLATE Latin1_General_CI_AS NOT NULL PRIMARY KEY, "
         "v INT NULL", names, lambda n: f"('{n}', 1)")
    api = Api(lib, shop, "dbo_vc")
    check_snapshot(api, "vc", ["name", "v"], 8)


def test_recorded_chunks_become_tokens_and_the_last_end_is_sought_again(lib, shop):
    """mcdc_snapshot_plan_chunks: a plan's recorded bounds (as `mssql-cdc
    backfill` keeps them) become tokens that read the same rows; given the
    plan's MAX, a last chunk open above ends at the first key after it now,
    so keys inserted above MAX since are left to the stream; keys other
    than the snapshot's, or bounds of another shape, are refused."""
    names = [f"k{i:03d}" for i in range(30)]
    make(shop, "rc", "name VARCHAR(12) NOT NULL PRIMARY KEY, v INT NULL", names,
         lambda n: f"('{n}', 1)")
    api = Api(lib, shop, "dbo_rc")
    tokens, _ = api.plan(8)
    chunks = [[json.loads(t)["lo"], json.loads(t)["hi"]] for t in tokens]
    assert chunks[-1][1] is None and len(chunks) >= 3, chunks
    # the same chunks again: the same tokens but for the check of nothing else
    again, lsn = api.plan_chunks('["NAME"]', json.dumps(chunks))
    assert [json.loads(t) for t in again] == [json.loads(t) for t in tokens]
    # rows inserted above MAX: the last chunk, sought again past MAX, leaves them out
    shop.run("INSERT INTO dbo.rc VALUES ('k100', 2), ('k200', 2);", database="shop")
    sought, lsn = api.plan_chunks('["name"]', json.dumps(chunks), "k029")
    assert json.loads(sought[-1])["hi"] == "k100"
    got = sorted(r["name"] for t in sought for r in api.read(t, lsn)[0])
    assert got == names
    # without MAX, the last chunk stays open and reads them too
    open_above, lsn = api.plan_chunks('["name"]', json.dumps(chunks))
    assert sorted(r["name"] for t in open_above for r in api.read(t, lsn)[0]) == \
        names + ["k100", "k200"]
    for keys, given, want in (('["v"]', json.dumps(chunks), "is cut on"),
                              ('["name"]', "[]", "1 to"),
                              ('["name"]', '[[1, 2, 3]]', "chunk 0"),
                              ('["name"]', '[["a", ["b", "c"]]]', "chunk 0"),
                              ('["name"]', "{", "not a JSON array")):
        with pytest.raises(PlanError) as e:
            api.plan_chunks(keys, given)
        assert e.value.rc == -1 and want in e.value.message, e.value.message


def test_a_plan_is_cut_on_the_extent_an_open_recorded(lib, shop):
    """mcdc_snapshot_plan_from_extent: chunk_rows 0 reads the extent alone
    (what a chunked open records: one whole-table chunk, int or keyset);
    later, with rows inserted above that MAX, a plan cut on the recorded
    extent ends where the CLI's does (MAX+1 for an int key; for a keyset,
    the first key after MAX), where one cut on the extent read now takes the
    new rows in; the recorded key columns must be the snapshot's."""
    make(shop, "xi", "id INT NOT NULL PRIMARY KEY, v INT NULL", list(range(1, 41)),
         lambda i: f"({i}, 1)")
    make(shop, "xk", "name VARCHAR(12) NOT NULL PRIMARY KEY, v INT NULL",
         [f"k{i:03d}" for i in range(30)], lambda n: f"('{n}', 1)")
    xi, xk = Api(lib, shop, "dbo_xi"), Api(lib, shop, "dbo_xk")
    whole, extent_i = xi.plan_from_extent(None, None, 0)
    assert extent_i == {"kind": "int", "lo": 1, "hi": 40, "rows": extent_i["rows"]}
    assert [(json.loads(t)["lo"], json.loads(t)["hi"]) for t in whole] == [(None, None)]
    assert json.loads(whole[0])["keys"] == ["id"]
    whole, extent_k = xk.plan_from_extent(None, None, 0)
    assert extent_k == {"kind": "keyset", "max": "k029"} and len(whole) == 1
    shop.run("INSERT INTO dbo.xi VALUES (50, 2), (60, 2); "
             "INSERT INTO dbo.xk VALUES ('k100', 2), ('k200', 2);", database="shop")
    tokens, kept = xi.plan_from_extent(["ID"], extent_i, 10)
    assert kept == extent_i and json.loads(tokens[-1])["hi"] == 41 and len(tokens) >= 4
    tokens, kept = xk.plan_from_extent(["name"], extent_k, 8)
    plan = [json.loads(t) for t in tokens]
    assert kept == extent_k and plan[-1]["hi"] == "k100", plan[-1]
    assert all(a["hi"] == b["lo"] for a, b in zip(plan, plan[1:]))
    _, lsn = xk.plan(8)
    got = sorted(r["name"] for t in tokens for r in xk.read(t, lsn)[0])
    assert got == [f"k{i:03d}" for i in range(30)]
    # read now instead, the new rows are in the plan
    tokens, now = xk.plan_from_extent(None, None, 8)
    assert now == {"kind": "keyset", "max": "k200"} and json.loads(tokens[-1])["hi"] is None
    for keys, extent, want in ((["v"], extent_k, "is cut on"),
                               (["name"], {"kind": "int", "lo": 1, "hi": 2, "rows": 2},
                                "int extent"),
                               (["name"], {"kind": "keyset", "max": [1, 2]}, "extent_json")):
        with pytest.raises(PlanError) as e:
            xk.plan_from_extent(keys, extent, 8)
        assert e.value.rc == -1 and want in e.value.message, e.value.message


def test_date_key(lib, shop):
    days = [dt.date(2020, 1, 1) + dt.timedelta(days=3 * i) for i in range(80)]
    make(shop, "d", "day DATE NOT NULL PRIMARY KEY, v INT NULL", days,
         lambda d: f"('{d.isoformat()}', {d.day})")
    api = Api(lib, shop, "dbo_d")
    tokens, _, _ = check_snapshot(api, "d", ["day", "v"], 9)
    assert json.loads(tokens[1])["lo"] == (days[9]).isoformat()


def test_datetime2_3_last_key(lib, shop):
    rows = [(i % 4, dt.datetime(2025, 1, 1, 10, 0, 0) + dt.timedelta(milliseconds=7 * i))
            for i in range(90)]
    make(shop, "t3", "grp INT NOT NULL, at DATETIME2(3) NOT NULL, v INT NULL, "
         "PRIMARY KEY (grp, at)", rows,
         lambda r: f"({r[0]}, '{r[1].isoformat(timespec='milliseconds')}', 1)")
    api = Api(lib, shop, "dbo_t3")
    tokens, _, _ = check_snapshot(api, "t3", ["grp", "at", "v"], 8)
    bound = json.loads(tokens[1])["lo"]
    assert isinstance(bound[0], int) and len(bound[1]) == 26 and "T" in bound[1], bound


def test_datetime2_7_last_key_in_one_microsecond(lib, shop):
    # 100 ns apart: bounds read back cut to the microsecond, keys do not
    base = "2025-01-01 10:00:00.123456"
    stamps = [f"{base}{d}" for d in range(10)] + \
             [f"2025-01-01 10:00:{s:02d}.{f:07d}" for s in range(1, 6) for f in range(0, 70, 7)]
    rows = [(1, s) for s in stamps]
    make(shop, "t7", "grp INT NOT NULL, at DATETIME2(7) NOT NULL, v NVARCHAR(40) NULL, "
         "PRIMARY KEY (grp, at)", rows, lambda r: f"({r[0]}, '{r[1]}', N'{r[1]}')")
    api = Api(lib, shop, "dbo_t7")
    # the rows of one microsecond stay together; a seek that reads back its
    # own start sought again twice as far: fewer than twice the run's rows
    tokens, _, sizes = check_snapshot(api, "t7", ["grp", "v"], 4, max_rows=20)
    assert all(isinstance(json.loads(t)["hi"], list) for t in tokens[:-1])


def test_datetime2_7_ahead_of_another_key_column_is_refused(lib, shop):
    make(shop, "t7b", "at DATETIME2(7) NOT NULL, id INT NOT NULL, PRIMARY KEY (at, id)",
         [1, 2], lambda i: f"('2025-01-01 10:00:00.000000{i}', {i})")
    api = Api(lib, shop, "dbo_t7b")
    with pytest.raises(PlanError) as e:
        api.plan(1, snapshotKeys='["at", "id"]')
    assert e.value.rc == -1 and "only the last key column" in e.value.message
    # the index itself: read as one chunk
    tokens, _ = api.plan(1)
    assert len(tokens) == 1 and json.loads(tokens[0])["keys"] == []


def test_uniqueidentifier_key(lib, shop):
    ids = [str(uuid.UUID(int=(i * 0x9E3779B97F4A7C15 * 2**64 + i) % 2**128)).upper()
           for i in range(1, 70)]
    make(shop, "g", "g UNIQUEIDENTIFIER NOT NULL PRIMARY KEY, v INT NULL", ids,
         lambda g: f"('{g}', 1)")
    api = Api(lib, shop, "dbo_g")
    tokens, _, _ = check_snapshot(api, "g", ["g", "v"], 10)
    assert len(json.loads(tokens[1])["lo"]) == 36


def test_binary_and_decimal_keys(lib, shop):
    make(shop, "bin", "k VARBINARY(8) NOT NULL PRIMARY KEY, v INT NULL",
         list(range(50)), lambda i: f"(0x{(i * 37 % 251):02X}{i:04X}, {i})")
    check_snapshot(Api(lib, shop, "dbo_bin"), "bin", ["k", "v"], 6)
    make(shop, "dec", "k DECIMAL(12,3) NOT NULL PRIMARY KEY, v INT NULL",
         list(range(50)), lambda i: f"({(i - 25) * 1.125}, {i})")
    tokens, _, _ = check_snapshot(Api(lib, shop, "dbo_dec"), "dec", ["k", "v"], 6)
    assert json.loads(tokens[1])["lo"] == "-21.375"


def test_nullable_snapshot_keys_with_nulls_and_duplicates(lib, shop):
    # no unique index: the stream's snapshotKeys; a value is never split
    grps = [None] * 9 + [g for g in range(12) for _ in range(1 + g % 4)] + [None] * 3
    rows = list(enumerate(grps))
    make(shop, "n", "rid INT NOT NULL, grp INT NULL, v NVARCHAR(10) NULL", rows,
         lambda r: f"({r[0]}, {'NULL' if r[1] is None else r[1]}, N'r{r[0]}')")
    api = Api(lib, shop, "dbo_n")
    extra = {"snapshotKeys": '["grp"]'}
    # an integer plan: slices count the keys that are not NULL; the twelve
    # NULLs go to the first chunk, which is open below
    tokens, _, sizes = check_snapshot(api, "n", ["rid", "grp", "v"], 5, first_max=12 + 5,
                                      extra=extra)
    assert sizes[0] >= 12 and isinstance(json.loads(tokens[1])["lo"], int), (sizes, tokens)
    # cut on a string column of duplicates too (a keyset plan)
    make(shop, "n2", "rid INT NOT NULL, name NVARCHAR(10) NULL", list(range(40)),
         lambda i: f"({i}, {'NULL' if i % 9 == 0 else repr('n' + str(i % 5))})")
    # (a value of 7 rows: chunks of one value; the last holds MAX's too)
    check_snapshot(Api(lib, shop, "dbo_n2"), "n2", ["rid", "name"], 4, max_rows=14,
                   extra={"snapshotKeys": '["name"]'})


def test_empty_table_and_table_without_key(lib, shop):
    make(shop, "e", "id INT NOT NULL PRIMARY KEY, v INT NULL", [], None)
    api = Api(lib, shop, "dbo_e")
    tokens, _, sizes = check_snapshot(api, "e", ["id", "v"], 5, want_ranges=1)
    assert len(tokens) == 1 and sizes == [0]
    assert (json.loads(tokens[0])["lo"], json.loads(tokens[0])["hi"]) == (None, None)
    make(shop, "h", "a INT NULL, b NVARCHAR(10) NULL", list(range(30)), lambda i: f"({i}, N'b')")
    api = Api(lib, shop, "dbo_h")
    tokens, rtokens, sizes = check_snapshot(api, "h", ["a", "b"], 5, max_rows=30,
                                            want_ranges=1)
    assert len(tokens) == 1 and len(rtokens) == 1 and json.loads(tokens[0])["keys"] == []


def test_snapshot_keys_of_an_unsortable_type_is_a_clear_error(lib, shop):
    # (the simulator has no xml or image, and captures ntext as nvarchar(max):
    # bit and time stand for them here; the unit tests refuse every one)
    make(shop, "u", "id INT NOT NULL PRIMARY KEY, flag BIT NULL, t TIME NULL",
         [1], lambda i: f"({i}, 1, '10:00')")
    api = Api(lib, shop, "dbo_u")
    for col, why in (("flag", "cannot sort"), ("t", "no key bound can be bound")):
        with pytest.raises(PlanError) as e:
            api.plan(10, snapshotKeys=json.dumps([col]))
        assert e.value.rc == -1 and col in e.value.message and why in e.value.message, e.value
    with pytest.raises(PlanError) as e:
        api.plan(10, snapshotKeys='["nope"]')
    assert e.value.rc == -1 and "not a column the stream reads" in e.value.message


def test_tokens_are_checked_before_reading(lib, shop):
    make(shop, "k", "id INT NOT NULL PRIMARY KEY", list(range(20)), lambda i: f"({i})")
    api = Api(lib, shop, "dbo_k")
    tokens, lsn = api.plan(5)
    bad = tokens[1].replace('"index":1', '"index":2')
    with pytest.raises(PlanError) as e:
        api.read(bad, lsn)
    assert e.value.rc == -1 and "changed or cut after planning" in e.value.message
    t = json.loads(tokens[1])
    with pytest.raises(PlanError) as e:
        api.read(tokens[1], "nonsense")
    assert e.value.rc == -1 and "lsn" in e.value.message
    with pytest.raises(PlanError) as e:
        api.read(tokens[1], lsn, includeCommandId="false")
    assert e.value.rc == -10 and "plan again" in e.value.message
    assert t["keys"] == ["id"]


def test_snapshot_isolation_without_allow_snapshot_isolation(lib, shop):
    """isolationLevel=snapshot on a database that does not allow it: the
    plan's first read of the table (its key extent) already runs under
    SNAPSHOT, so planning fails with 3952 and says what to do; allowed, the
    same plan and its chunks read every row."""
    make(shop, "si", "id INT NOT NULL PRIMARY KEY", list(range(5)), lambda i: f"({i})")
    api = Api(lib, shop, "dbo_si")
    with pytest.raises(PlanError) as e:
        api.plan(2, isolationLevel="snapshot")
    assert e.value.server_number == 3952 and "reading MIN and MAX of [id]" in e.value.message \
        and "SET ALLOW_SNAPSHOT_ISOLATION ON" in e.value.message, e.value
    shop.run("ALTER DATABASE shop SET ALLOW_SNAPSHOT_ISOLATION ON;")
    tokens, lsn = api.plan(2, isolationLevel="snapshot")
    got = sorted(r["id"] for t in tokens for r in api.read(t, lsn, isolationLevel="snapshot")[0])
    assert got == list(range(5)) and len(tokens) >= 2, (got, tokens)
    # a token planned under SNAPSHOT, read on a database that no longer allows
    # it: the stream's first batch fails, saying what to do
    shop.run("ALTER DATABASE shop SET ALLOW_SNAPSHOT_ISOLATION OFF;")
    with pytest.raises(OSError) as e:
        api.read(tokens[0], lsn, isolationLevel="snapshot")
    assert "error 3952" in str(e.value) and "SET ALLOW_SNAPSHOT_ISOLATION ON" in str(e.value) \
        and "isolationLevel=readCommitted" in str(e.value), e.value


def table_queries(sim):
    """Reads the simulator's table store has served (sim.fast_path_stats)."""
    return sim.run("EXEC sim.fast_path_stats;")[0][2]


@pytest.mark.parametrize("iso", ["readCommitted", "snapshot"])
def test_chunks_of_a_bulk_loaded_table_come_from_the_table_store(lib, shop, iso):
    """The planner's counts per slice and every chunk's read of a table
    sim.bulk_load_table filled are answered by the simulator's table store
    (its fast path; the same bytes as SQLite's, tests/unit/test_sim_fast_table.c),
    and read every row once."""
    shop.run("ALTER DATABASE shop SET ALLOW_SNAPSHOT_ISOLATION ON;")
    shop.run("CREATE TABLE dbo.bl (id BIGINT NOT NULL PRIMARY KEY, v INT NULL, name NVARCHAR(20) NULL);",
             database="shop")
    shop.run("EXEC sim.bulk_load_table @table = N'dbo.bl', @rows = 3000, @seed = 5, @first_key = -1000;",
             database="shop")
    enable(shop, "bl")
    api = Api(lib, shop, "dbo_bl")
    q0 = table_queries(shop)
    tokens, lsn = api.plan(500, isolationLevel=iso)
    planned = table_queries(shop) - q0
    assert planned >= 1 and 6 <= len(tokens) <= 12, (planned, len(tokens))
    q0 = table_queries(shop)
    ids = [r["id"] for t in tokens for r in api.read(t, lsn, isolationLevel=iso)[0]]
    assert table_queries(shop) - q0 == len(tokens)
    assert sorted(ids) == list(range(-1000, 2000)), (len(ids), min(ids), max(ids))


def test_datetime_and_datetimeoffset_keys(lib, shop):
    # datetime's 1/300 s ticks: bounds of 3 digits read back as the same tick
    stamps = [dt.datetime(2025, 3, 1, 8, 0, 0) + dt.timedelta(milliseconds=3 * i + i // 3)
              for i in range(45)]
    make(shop, "dtm", "at DATETIME NOT NULL PRIMARY KEY, v INT NULL", stamps,
         lambda t: f"('{t.isoformat(timespec='milliseconds')}', 1)")
    tokens, _, _ = check_snapshot(Api(lib, shop, "dbo_dtm"), "dtm", ["v", "at"], 5)
    assert len(json.loads(tokens[1])["lo"]) == 23  # YYYY-MM-DDTHH:MM:SS.fff
    make(shop, "dto", "at DATETIMEOFFSET(3) NOT NULL PRIMARY KEY, v INT NULL", list(range(40)),
         lambda i: f"('2025-03-01T08:00:{i:02d}.5{'+02:00' if i % 2 else '-05:30'}', {i})")
    check_snapshot(Api(lib, shop, "dbo_dto"), "dto", ["v"], 6)


def test_cli_snapshot_reads_composite_and_duplicate_keys_in_ranges(lib, shop, workdir):
    """mssql-cdc snapshot (the full snapshot job) on the same ranges."""
    from deltalake import DeltaTable
    from conftest import run_cli
    regions = ["north", "North", "east", "n", "N"]
    make(shop, "cc", "region NVARCHAR(20) NOT NULL, id INT NOT NULL, v INT NULL, "
         "PRIMARY KEY (region, id)", [(regions[i % 5], i) for i in range(90)],
         lambda r: f"(N'{r[0]}', {r[1]}, {r[1] % 7})")
    for keys, name in ((None, "index"), ('["v"]', "dups"), ('["v", "region"]', "two")):
        target = os.path.join(workdir, name)
        args = ["snapshot", "--captureInstance", "dbo_cc", "--connectionString",
                shop.connection_string("shop"), "--target", target, "--numPartitions", "4"]
        if keys:
            args += ["--snapshotKeys", keys]
        run_cli(*args)
        rows = DeltaTable(target).to_pyarrow_table().to_pylist()
        got = sorted((r["region"], r["id"], r["v"]) for r in rows)
        assert got == sorted(tuple(r) for r in shop.run("SELECT region, id, v FROM dbo.cc",
                                                         database="shop")), name
