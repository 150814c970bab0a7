"""The reader's batches leave the library through the Arrow C Data Interface
and pyarrow imports them unchanged (a tiny shared library is built from
build/libmssqlcdc.a and called through ctypes).

The first test needs no server; the second reads a change-table range from
the simulator (skipped when build/mssql-cdc-sim is missing)."""
import ctypes
import datetime as dt
import decimal
import os
import shutil
import subprocess
import tempfile

import pyarrow as pa
import pytest

from conftest import BUILD, CC, PASSWORD, ROOT, link_libs

SIM = os.path.join(BUILD, "mssql-cdc-sim")

SHIM = r"""
#include <stdio.h>
#include <string.h>
#include "mcdc_reader.h"

/* A batch in the reader's output schema, built with the batch API. */
int shim_demo_batch(struct ArrowArray *array, struct ArrowSchema *schema, char *msg) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *cap = NULL, *out = NULL;
    mcdc_batch *b = NULL;
    int rc = mcdc_schema_create(&cap, 2, &e);
    if (!rc) rc = mcdc_schema_set(cap, 0, "amount", MCDC_TYPE_DECIMAL, 10, 2, 0, 1, &e);
    if (!rc) rc = mcdc_schema_set(cap, 1, "name", MCDC_TYPE_UTF8, 0, 0, 0, 1, &e);
    if (!rc) rc = mcdc_reader_output_schema(&out, cap, 1, &e);
    if (!rc) rc = mcdc_batch_create(&b, out, 4, &e);
    const char *lsn[] = {"0x0000002A000001F00003", "0x0000002A000001F80001"};
    for (int r = 0; !rc && r < 2; r++) {
        mcdc_column *c = b->columns;
        rc |= mcdc_col_append_bytes(&c[0], "dbo_orders", 10, &e);
        rc |= mcdc_col_append_bytes(&c[1], lsn[r], 22, &e);
        rc |= mcdc_col_append_bytes(&c[2], lsn[r], 22, &e);
        rc |= mcdc_col_append_int(&c[3], r ? 4 : 2, &e);
        rc |= mcdc_col_append_int(&c[4], 1, &e);
        rc |= mcdc_col_append_int(&c[5], 1735689600000000LL + r * 3000, &e);
        if (r) rc |= mcdc_col_append_null(&c[6], &e);
        else rc |= mcdc_col_append_decimal(&c[6], 12345, 0, &e);
        rc |= mcdc_col_append_bytes(&c[7], "\xc3\xa9t\xc3\xa9", 5, &e);
    }
    if (!rc) rc = mcdc_batch_seal(b, &e);
    if (!rc) rc = mcdc_batch_export(&b, array, schema, &e);
    mcdc_batch_free(b);
    mcdc_schema_unref(cap);
    mcdc_schema_unref(out);
    if (rc) snprintf(msg, 1024, "%s", e.message);
    return rc;
}

typedef struct { mcdc_batch *first; int batches; long long rows; } keep;
static int keep_first(void *ctx, mcdc_batch *b, mcdc_error *err) {
    (void)err;
    keep *k = ctx;
    k->batches++;
    k->rows += b->rows;
    if (k->first == NULL) k->first = b; else mcdc_batch_free(b);
    return MCDC_OK;
}

/* Reads [from, to] of ci and exports the first batch. */
int shim_read_range(const char *connstr, const char *ci, const char *from, const char *to,
                    struct ArrowArray *array, struct ArrowSchema *schema, long long *rows,
                    char *msg) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_connstr *cs = NULL;
    keep k = {0};
    int rc = mcdc_connstr_parse(&cs, connstr, &e);
    mcdc_lsn f, t;
    if (!rc) rc = mcdc_lsn_parse_cstr(&f, from, &e);
    if (!rc) rc = mcdc_lsn_parse_cstr(&t, to, &e);
    mcdc_connstr_connector conn = {cs, MCDC_CONN_OPTIONS_INIT};
    mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
    opt.capture_instance = ci;
    opt.batch_rows = 1 << 20;
    if (!rc) rc = mcdc_reader_read_range(NULL, &opt, mcdc_connect_connstr, &conn, &f, &t, 1,
                                         keep_first, &k, &e);
    *rows = k.rows;
    if (!rc && k.first) rc = mcdc_batch_export(&k.first, array, schema, &e);
    mcdc_batch_free(k.first);
    mcdc_connstr_free(cs);
    if (rc) snprintf(msg, 1024, "%s", e.message);
    return rc;
}
"""


@pytest.fixture(scope="module")
def shim():
    lib = os.path.join(BUILD, "libmssqlcdc.a")
    if not os.path.exists(lib):
        pytest.skip("build/libmssqlcdc.a is not built")
    d = tempfile.mkdtemp(prefix="mcdc-shim-")
    src = os.path.join(d, "shim.c")
    so = os.path.join(d, "libshim.so")
    with open(src, "w") as f:
        f.write(SHIM)
    inc = [f"-I{ROOT}/include"] + [f"-I{ROOT}/src/{m}" for m in
                                    ("util", "lsn", "options", "batch", "tds", "source")]
    subprocess.run([*CC, "-shared", "-fPIC", "-o", so, src, *inc, lib, *link_libs()], check=True)
    h = ctypes.CDLL(so)
    yield h
    shutil.rmtree(d, ignore_errors=True)


def import_batch(fn, *args):
    """Calls fn(..., ArrowArray*, ArrowSchema*, ...) and imports the result.
    The two structs are plain ctypes buffers (9 and 10 pointer-sized fields);
    pyarrow moves them and calls their release callbacks."""
    c_schema = ctypes.create_string_buffer(9 * 8)
    c_array = ctypes.create_string_buffer(10 * 8)
    msg = ctypes.create_string_buffer(1024)
    extra = []
    if args:
        rows = ctypes.c_longlong(0)
        rc = fn(*args, c_array, c_schema, ctypes.byref(rows), msg)
        extra = [rows.value]
    else:
        rc = fn(c_array, c_schema, msg)
    assert rc == 0, msg.value.decode()
    batch = pa.RecordBatch._import_from_c(ctypes.addressof(c_array), ctypes.addressof(c_schema))
    return (batch, *extra)


def test_output_schema_batch_imports_into_pyarrow(shim):
    (b,) = import_batch(shim.shim_demo_batch)
    b.validate(full=True)
    assert b.schema.names == ["_capture_instance", "_start_lsn", "_seqval", "_operation",
                              "_command_id", "_commit_ts", "amount", "name"]
    assert b.schema.field("_operation").type == pa.int32()
    assert b.schema.field("_commit_ts").type == pa.timestamp("us")
    assert b.schema.field("amount").type == pa.decimal128(10, 2)
    assert not b.schema.field("_start_lsn").nullable
    rows = b.to_pylist()
    assert rows[0]["_start_lsn"] == "0x0000002A000001F00003"
    assert rows[0]["_commit_ts"] == dt.datetime(2025, 1, 1, 0, 0, 0)
    assert rows[1]["_commit_ts"] == dt.datetime(2025, 1, 1, 0, 0, 0, 3000)
    assert rows[0]["amount"] == decimal.Decimal("123.45")
    assert rows[1]["amount"] is None
    assert rows[1]["name"] == "\u00e9t\u00e9"
    assert [r["_operation"] for r in rows] == [2, 4]


# ---- against the simulator ------------------------------------------------------------
@pytest.fixture
def sim(workdir):
    """The simulator's port (conftest's Sim, started on a free one)."""
    if not os.path.exists(SIM):
        pytest.skip("build/mssql-cdc-sim is not built")
    from conftest import Sim
    data = os.path.join(workdir, "sim")
    os.makedirs(data)
    s = Sim(data, ["--capture-poll-ms", "50", "--capture-latency-ms", "0"])
    yield s.port
    s.stop()


def run_sql(port, sql, database="master"):
    import pymssql
    conn = pymssql.connect(server="127.0.0.1", port=str(port), user="sa", password=PASSWORD,
                           database=database, autocommit=True, tds_version="7.4")
    try:
        cur = conn.cursor()
        cur.execute(sql)
        rows = []
        while True:
            if cur.description is not None:
                rows = cur.fetchall()
            if not cur.nextset():
                break
        return rows
    finally:
        conn.close()


def test_reader_range_from_the_simulator_into_pyarrow(shim, sim):
    run_sql(sim, "CREATE DATABASE shop;")
    run_sql(sim, """CREATE TABLE dbo.orders (id INT NOT NULL PRIMARY KEY, qty TINYINT NULL,
        amount DECIMAL(18,2) NULL, price MONEY NULL, name NVARCHAR(20) NULL,
        at DATETIME2(3) NULL, d DATE NULL, flag BIT NULL);
        EXEC sys.sp_cdc_enable_db;
        EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders',
             @role_name = NULL;""", database="shop")
    run_sql(sim, """BEGIN TRAN;
        INSERT INTO dbo.orders VALUES (1, 200, 12.34, 5.6789, N'caf\u00e9', '2025-01-02 03:04:05.678', '2025-01-02', 1);
        INSERT INTO dbo.orders VALUES (2, NULL, -0.01, NULL, NULL, NULL, NULL, 0);
        COMMIT;
        UPDATE dbo.orders SET name = N'tea' WHERE id = 1;
        DELETE FROM dbo.orders WHERE id = 2;
        EXEC sim.run_capture @ignore_latency = 1;""", database="shop")
    lo = run_sql(sim, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_orders'), 1)",
                 "shop")[0][0]
    hi = run_sql(sim, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)", "shop")[0][0]
    expected = run_sql(sim, """SELECT CONVERT(varchar(22), __$start_lsn, 1), __$operation, id, name
        FROM cdc.dbo_orders_CT ORDER BY __$start_lsn, __$command_id, __$seqval, __$operation""",
                       "shop")
    cs = (f"Server=127.0.0.1,{sim};Database=shop;UID=sa;PWD={PASSWORD};Encrypt=no").encode()
    b, rows = import_batch(shim.shim_read_range, cs, b"dbo_orders", lo.encode(), hi.encode())
    b.validate(full=True)
    assert rows == len(expected) == 5
    got = [(r["_start_lsn"], r["_operation"], r["id"], r["name"]) for r in b.to_pylist()]
    assert got == [tuple(e) for e in expected]
    assert [r["_operation"] for r in b.to_pylist()] == [2, 2, 3, 4, 1]
    first = b.to_pylist()[0]
    assert first["_capture_instance"] == "dbo_orders"
    assert b.schema.field("qty").type == pa.int16()
    assert b.schema.field("price").type == pa.decimal128(19, 4)
    assert b.schema.field("at").type == pa.timestamp("us")
    assert b.schema.field("d").type == pa.date32()
    assert b.schema.field("flag").type == pa.bool_()
    ins = [r for r in b.to_pylist() if r["_operation"] == 2 and r["id"] == 1][0]
    assert ins["qty"] == 200
    assert ins["amount"] == decimal.Decimal("12.34")
    assert ins["price"] == decimal.Decimal("5.6789")
    assert ins["name"] == "caf\u00e9"
    assert ins["at"] == dt.datetime(2025, 1, 2, 3, 4, 5, 678000)
    assert ins["d"] == dt.date(2025, 1, 2)
    assert ins["flag"] is True


def test_every_mapped_type_decodes_like_pymssql(shim, sim):
    """One change row per value: our FreeTDS decoding versus pymssql's."""
    run_sql(sim, "CREATE DATABASE typ;")
    run_sql(sim, """CREATE TABLE dbo.w (id INT NOT NULL PRIMARY KEY, b BIT NULL, ti TINYINT NULL,
        si SMALLINT NULL, bi BIGINT NULL, r REAL NULL, f FLOAT NULL, dc DECIMAL(38,6) NULL,
        nm NUMERIC(5,0) NULL, m MONEY NULL, sm SMALLMONEY NULL, d DATE NULL, dt DATETIME NULL,
        sdt SMALLDATETIME NULL, dt2 DATETIME2(7) NULL, dto DATETIMEOFFSET(3) NULL, t TIME(4) NULL,
        c CHAR(3) NULL, vc VARCHAR(10) NULL, nc NCHAR(2) NULL, nv NVARCHAR(MAX) NULL,
        g UNIQUEIDENTIFIER NULL, vb VARBINARY(8) NULL, bn BINARY(3) NULL);
        EXEC sys.sp_cdc_enable_db;
        EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'w',
             @role_name = NULL;""", database="typ")
    run_sql(sim, """INSERT INTO dbo.w VALUES (1, 1, 255, -32768, -9223372036854775808, 1.5,
        -2.25e100, CAST('12345678901234567890123456789012.123456' AS DECIMAL(38,6)), -99999,
        CAST('-922337203685477.5808' AS MONEY),
        214748.3647, '0001-01-01', '1753-01-01 00:00:00.003', '2079-06-06 23:59:00',
        '9999-12-31 23:59:59.9999999', '2025-06-01 12:00:00.123 +05:30', '23:59:59.1234',
        'ab', 'x', N'\u00e9', N'\U0001F600 long', '6F9619FF-8B86-D011-B42D-00C04FC964FF',
        0x00FF10, 0x0102);
        INSERT INTO dbo.w (id) VALUES (2);
        EXEC sim.run_capture @ignore_latency = 1;""", database="typ")
    lo = run_sql(sim, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_w'), 1)",
                 "typ")[0][0]
    hi = run_sql(sim, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)", "typ")[0][0]
    cs = (f"Server=127.0.0.1,{sim};Database=typ;UID=sa;PWD={PASSWORD};Encrypt=no").encode()
    b, rows = import_batch(shim.shim_read_range, cs, b"dbo_w", lo.encode(), hi.encode())
    b.validate(full=True)
    assert rows == 2
    t = {f.name: f.type for f in b.schema}
    assert t["b"] == pa.bool_() and t["ti"] == pa.int16() and t["si"] == pa.int16()
    assert t["bi"] == pa.int64() and t["r"] == pa.float32() and t["f"] == pa.float64()
    assert t["dc"] == pa.decimal128(38, 6) and t["nm"] == pa.decimal128(5, 0)
    assert t["m"] == pa.decimal128(19, 4) and t["sm"] == pa.decimal128(10, 4)
    assert t["d"] == pa.date32() and t["dt"] == pa.timestamp("us")
    assert t["dto"] == pa.timestamp("us", tz="UTC")
    for name in ("t", "c", "vc", "nc", "nv", "g"):
        assert t[name] == pa.string(), name
    assert t["vb"] == pa.binary() and t["bn"] == pa.binary()
    r, empty = b.to_pylist()
    assert all(v is None for k, v in empty.items() if not k.startswith("_") and k != "id")
    assert r["b"] is True and r["ti"] == 255 and r["si"] == -32768
    assert r["bi"] == -9223372036854775808
    assert r["r"] == 1.5 and r["f"] == -2.25e100
    assert r["dc"] == decimal.Decimal("12345678901234567890123456789012.123456")
    assert r["nm"] == decimal.Decimal("-99999")
    assert r["m"] == decimal.Decimal("-922337203685477.5808")
    assert r["sm"] == decimal.Decimal("214748.3647")
    assert r["d"] == dt.date(1, 1, 1)
    assert r["dt"] == dt.datetime(1753, 1, 1, 0, 0, 0, 3000)
    assert r["sdt"] == dt.datetime(2079, 6, 6, 23, 59)
    assert r["dt2"] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    assert r["dto"] == dt.datetime(2025, 6, 1, 6, 30, 0, 123000, tzinfo=dt.timezone.utc)
    assert r["t"] == "23:59:59.1234"
    assert r["c"] == "ab " and r["vc"] == "x" and r["nc"] == "\u00e9 "
    assert r["nv"] == "\U0001F600 long"
    assert r["g"] == "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    assert r["vb"] == b"\x00\xff\x10" and r["bn"] == b"\x01\x02\x00"
