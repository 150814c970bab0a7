"""pyarrow hands us a record batch through the Arrow C Data Interface; we
import it (mcdc_batch_import, a copy), validate it, and export it back
(mcdc_batch_export); pyarrow gets identical values. Every batch type, NULLs,
and a sliced batch (non-zero offsets)."""
import ctypes
import datetime as dt
import decimal
import os
import shutil
import subprocess
import tempfile

import pyarrow as pa
import pytest

from conftest import BUILD, CC, ROOT, link_libs

SHIM = r"""
#include <stdio.h>
#include "mcdc_batch.h"

int shim_round_trip(const struct ArrowArray *in, const struct ArrowSchema *in_schema,
                    struct ArrowArray *out, struct ArrowSchema *out_schema, char *msg) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *b = NULL;
    int rc = mcdc_batch_import(&b, in, in_schema, &e);
    if (!rc) rc = mcdc_batch_validate(b, &e);
    if (!rc) rc = mcdc_batch_export(&b, out, out_schema, &e);
    mcdc_batch_free(b);
    if (rc) snprintf(msg, 1024, "%s", e.message);
    return rc;
}
"""


@pytest.fixture(scope="module")
def shim():
    lib = os.path.join(BUILD, "libmssqlcdc.a")
    if not os.path.exists(lib):
        pytest.skip("build/libmssqlcdc.a is not built")
    d = tempfile.mkdtemp(prefix="mcdc-arrow-")
    src, so = os.path.join(d, "shim.c"), os.path.join(d, "libshim.so")
    with open(src, "w") as f:
        f.write(SHIM)
    subprocess.run([*CC, "-shared", "-fPIC", "-o", so, src,
                    f"-I{ROOT}/include", f"-I{ROOT}/src/util", f"-I{ROOT}/src/batch", lib,
                    *link_libs()], check=True)
    yield ctypes.CDLL(so)
    shutil.rmtree(d, ignore_errors=True)


def round_trip(shim, batch):
    in_array = ctypes.create_string_buffer(10 * 8)
    in_schema = ctypes.create_string_buffer(9 * 8)
    batch._export_to_c(ctypes.addressof(in_array), ctypes.addressof(in_schema))
    out_array = ctypes.create_string_buffer(10 * 8)
    out_schema = ctypes.create_string_buffer(9 * 8)
    msg = ctypes.create_string_buffer(1024)
    rc = shim.shim_round_trip(in_array, in_schema, out_array, out_schema, msg)
    # we copied: the input is still ours to release, through pyarrow
    pa.RecordBatch._import_from_c(ctypes.addressof(in_array), ctypes.addressof(in_schema))
    assert rc == 0, msg.value.decode()
    return pa.RecordBatch._import_from_c(ctypes.addressof(out_array),
                                         ctypes.addressof(out_schema))


def every_type():
    big = decimal.Decimal("9" * 34 + ".1234")
    return pa.record_batch({
        "b": pa.array([True, None, False, True], pa.bool_()),
        "i8": pa.array([-128, 127, None, 0], pa.int8()),
        "i16": pa.array([-32768, None, 32767, 1], pa.int16()),
        "i32": pa.array([None, -2**31, 2**31 - 1, 7], pa.int32()),
        "i64": pa.array([-2**63, 2**63 - 1, None, 42], pa.int64()),
        "f32": pa.array([1.5, None, -0.0, 3.25], pa.float32()),
        "f64": pa.array([None, 1e308, -2.5, 0.1], pa.float64()),
        "dec": pa.array([big, decimal.Decimal("-" + "9" * 34 + ".1234"), None,
                         decimal.Decimal("0.0001")], pa.decimal128(38, 4)),
        "s": pa.array(["", "na\u00efve \U0001F600", None, "x" * 300], pa.string()),
        "bin": pa.array([b"", None, b"\x00\xff", b"abc"], pa.binary()),
        "lsn": pa.array([b"\x00" * 10, b"\xff" * 10, None, b"0123456789"], pa.binary(10)),
        "d": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31), None, dt.date(1969, 12, 31)],
                      pa.date32()),
        "ts": pa.array([dt.datetime(1900, 1, 1, 0, 0, 0, 1), None,
                        dt.datetime(2025, 11, 2, 1, 30), dt.datetime(1969, 12, 31, 23, 59, 59)],
                       pa.timestamp("us")),
        "tsz": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), None, None,
                         dt.datetime(1960, 6, 1, 12, tzinfo=dt.timezone.utc)],
                        pa.timestamp("us", tz="UTC")),
    })


def test_every_type_round_trips_through_our_batches(shim):
    src = every_type()
    got = round_trip(shim, src)
    got.validate(full=True)
    assert got.schema.names == src.schema.names
    for name in src.schema.names:
        assert got.column(name).type == src.column(name).type, name
        assert got.column(name).to_pylist() == src.column(name).to_pylist(), name


def test_a_sliced_batch_keeps_its_offsets(shim):
    src = every_type().slice(1, 2)
    got = round_trip(shim, src)
    assert got.num_rows == 2
    assert got.to_pylist() == src.to_pylist()


def test_an_unsupported_type_is_refused_clearly(shim):
    src = pa.record_batch({"l": pa.array([[1, 2]], pa.list_(pa.int32()))})
    with pytest.raises(AssertionError, match="not supported"):
        round_trip(shim, src)
