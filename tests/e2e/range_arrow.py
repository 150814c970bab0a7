"""pyarrow reads change ranges through libmssqlcdc's C stream interface.

Loads the installed libmssqlcdc.so with ctypes, plans the ranges of a
capture instance, imports each range's ArrowArrayStream with
pyarrow.RecordBatchReader._import_from_c, and checks that:
  - its tokens are the C program's (tests/e2e/range_reader.c) and its rows
    the C program's rows, value for value;
  - the rows are the change table's, read with pymssql in change order;
  - a range read with other options (includeCommandId=false) is refused as
    a schema change, an altered token as invalid;
  - a purged range fails in get_next with DataLossError, which pyarrow
    raises.
Prints "ok   ..." or "FAIL ..." per check (tests/e2e/range_stream.sh counts).

usage: range_arrow.py LIB CONNSTR PORT PASSWORD CI TOKENS_FILE C_ROWS_PREFIX
"""
import ctypes
import datetime as dt
import decimal
import json
import sys

import pyarrow as pa
import pymssql

LIB, CONNSTR, PORT, PASSWORD, CI, TOKENS, C_ROWS = sys.argv[1:8]
failures = 0


def check(ok, what, *detail):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures += 1
        for d in detail:
            print("     " + str(d)[:2000])


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("server_number", ctypes.c_int),
                ("server_state", ctypes.c_int), ("server_class", ctypes.c_int),
                ("server_line", ctypes.c_int), ("message", ctypes.c_char * 1024)]


lib = ctypes.CDLL(LIB)
vp, cp = ctypes.c_void_p, ctypes.c_char_p
lib.mcdc_opts_create.argtypes = [ctypes.POINTER(vp), ctypes.POINTER(Error)]
lib.mcdc_opts_set.argtypes = [vp, cp, cp, vp, ctypes.POINTER(Error)]
lib.mcdc_opts_free.argtypes = [vp]
lib.mcdc_range_plan_create.argtypes = [ctypes.POINTER(vp), vp, vp, vp, ctypes.c_int,
                                       ctypes.POINTER(Error)]
lib.mcdc_range_plan_count.argtypes = [vp]
lib.mcdc_range_plan_count.restype = ctypes.c_size_t
lib.mcdc_range_plan_token.argtypes = [vp, ctypes.c_size_t]
lib.mcdc_range_plan_token.restype = cp
lib.mcdc_range_plan_free.argtypes = [vp]
lib.mcdc_range_read.argtypes = [vp, vp, cp, ctypes.POINTER(Error)]


def options(**extra):
    o, e = vp(), Error()
    assert lib.mcdc_opts_create(ctypes.byref(o), ctypes.byref(e)) == 0, e.message
    for k, v in {"connectionString": CONNSTR, "arrowBatchSize": "7000", **extra}.items():
        assert lib.mcdc_opts_set(o, k.encode(), v.encode(), None, ctypes.byref(e)) == 0, e.message
    return o


def plan(opts, ranges):
    p, e = vp(), Error()
    rc = lib.mcdc_range_plan_create(ctypes.byref(p), opts, None, None, ranges, ctypes.byref(e))
    assert rc == 0, e.message
    tokens = [lib.mcdc_range_plan_token(p, i).decode()
              for i in range(lib.mcdc_range_plan_count(p))]
    lib.mcdc_range_plan_free(p)
    return tokens


def open_range(opts, token):
    """(rc, message, reader): the ArrowArrayStream imported into pyarrow."""
    stream = ctypes.create_string_buffer(5 * ctypes.sizeof(ctypes.c_void_p))
    e = Error()
    rc = lib.mcdc_range_read(stream, opts, token.encode(), ctypes.byref(e))
    if rc != 0:
        return rc, e.message.decode(), None
    return 0, "", pa.RecordBatchReader._import_from_c(ctypes.addressof(stream))


# ---- the text both readers write (range_reader.c put_value) -----------------------
def text(v, t):
    if v is None:
        return "NULL"
    if pa.types.is_string(t):
        return v.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n")
    if pa.types.is_binary(t):
        return "0x" + v.hex().upper()
    if pa.types.is_boolean(t):
        return "true" if v else "false"
    if pa.types.is_decimal(t):
        return format(decimal.Decimal(v).quantize(decimal.Decimal(1).scaleb(-t.scale)), "f")
    if pa.types.is_timestamp(t):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f").rjust(26, "0")
    if pa.types.is_date(t):
        return v.isoformat()
    if pa.types.is_floating(t):
        return format(v, ".17g") if pa.types.is_float64(t) else format(v, ".9g")
    return str(v)


def lines(rows, schema):
    return ["|".join(text(r[f.name], f.type) for f in schema) for r in rows]


# ---- 1. tokens: the same plan as the C program's ----------------------------------
opts = options(captureInstance=CI)
tokens = plan(opts, 4)
c_tokens = open(TOKENS).read().split()
check(tokens == c_tokens and len(tokens) >= 2,
      f"planned {len(tokens)} ranges, the C program's tokens", tokens, c_tokens)

# ---- 2. every range through pyarrow: the C program's rows ------------------------
ours, schema = [], None
for i, tok in enumerate(tokens):
    rc, msg, reader = open_range(opts, tok)
    if reader is None:
        check(False, f"range {i} opens", rc, msg)
        continue
    schema = reader.schema
    batches = list(reader)
    for b in batches:
        b.validate(full=True)
    got = lines([r for b in batches for r in b.to_pylist()], schema)
    want = open(f"{C_ROWS}{i}.txt").read().splitlines()
    check(got == want and len(got) > 0,
          f"range {i}: {len(got)} rows in {len(batches)} batches equal the C program's",
          next((f"first difference at row {k}: {a!r} vs {b!r}"
                for k, (a, b) in enumerate(zip(got, want)) if a != b), f"{len(got)} vs {len(want)}"))
    ours += got

names = [f.name for f in schema] if schema else []
check(names[:6] == ["_capture_instance", "_start_lsn", "_seqval", "_operation", "_command_id",
                    "_commit_ts"] and schema.field("_commit_ts").type == pa.timestamp("us"),
      "the reader's output schema (reference 2.2)", names)

# ---- 3. the change table, read with pymssql -------------------------------------
cols = ", ".join(f"c.[{n}]" for n in names[6:])
lo = json.loads(tokens[0])["from_lsn"]
hi = json.loads(tokens[-1])["to_lsn"]
conn = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD,
                       database="shop", tds_version="7.4")
cur = conn.cursor()
cur.execute(f"""SELECT N'{CI}', CONVERT(varchar(22), c.__$start_lsn, 1),
    CONVERT(varchar(22), c.__$seqval, 1), c.__$operation, c.__$command_id, m.tran_end_time, {cols}
    FROM cdc.[{CI}_CT] AS c JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn
    WHERE c.__$start_lsn BETWEEN CONVERT(binary(10), '{lo}', 1) AND CONVERT(binary(10), '{hi}', 1)
    ORDER BY c.__$start_lsn, c.__$command_id, c.__$seqval, c.__$operation""")
theirs = lines([dict(zip(names, r)) for r in cur.fetchall()], schema)
conn.close()
check(ours == theirs,
      f"{len(ours)} rows equal the change table read with pymssql",
      next((f"first difference at row {k}: {a!r} vs {b!r}"
            for k, (a, b) in enumerate(zip(ours, theirs)) if a != b), f"{len(ours)} vs {len(theirs)}"))

# ---- 4. refusals before reading ----------------------------------------------------
rc, msg, _ = open_range(options(includeCommandId="false"), tokens[0])
check(rc == -10 and "plan again" in msg, "other options (includeCommandId=false): SchemaChanged",
      rc, msg)
bad = tokens[0].replace('"index":0', '"index":1')
rc, msg, _ = open_range(opts, bad)
check(rc == -1 and "changed or cut after planning" in msg, "an altered token is invalid", rc, msg)
check(CONNSTR.split("PWD=")[1].split(";")[0] not in "".join(tokens),
      "no token holds the password")

# ---- 5. a purged range: DataLossError from get_next, raised by pyarrow -----------
conn = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD,
                       database="shop", tds_version="7.4", autocommit=True)
cur = conn.cursor()
first = json.loads(tokens[0])
cur.execute(f"""EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'{CI}',
    @low_water_mark = {first['to_lsn']}, @threshold = 5000""")
conn.close()
rc, msg, reader = open_range(opts, tokens[0])
try:
    n = sum(b.num_rows for b in reader) if reader else -1
    check(False, "a purged range fails in get_next", rc, msg, f"{n} rows, no error")
except OSError as e:
    check("DataLossError" in str(e) and CI in str(e), "a purged range fails in get_next with "
          "DataLossError", str(e))

lib.mcdc_opts_free(opts)
sys.exit(1 if failures else 0)
