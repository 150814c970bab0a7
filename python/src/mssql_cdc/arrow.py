"""Changes and snapshots as Arrow: the library plans once (change ranges,
snapshot ranges) and reads each token's range as an Arrow C stream, which
pyarrow imports without a copy; the reader returned chains the tokens'
streams in order. Python handles batches, never rows."""
from __future__ import annotations

import ctypes
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from . import _cfg, _native
from ._cfg import Error
from ._core import Options, check, text
from .errors import from_stream_error


def _lsn_value(lsn: str | None, what: str):
    if lsn is None:
        return None
    if not isinstance(lsn, str):
        raise TypeError(f"{what} must be an LSN string (0x + 20 hex digits), not {lsn!r}")
    value = (ctypes.c_uint8 * 10)()
    err = Error()
    check(_native.lib().mcdc_lsn_value_parse(value, text(lsn), ctypes.byref(err)), err)
    return value


def _schema(fn, plan) -> pa.Schema:
    c_schema = _cfg.ArrowSchema()
    err = Error()
    check(fn(ctypes.byref(c_schema), plan, ctypes.byref(err)), err)
    return pa.Schema._import_from_c(ctypes.addressof(c_schema))


def _chain(schema: pa.Schema, opts: Options, tokens: list[bytes], open_stream) -> Iterator:
    """The batches of every token's stream, in order. An error a stream
    reports ("<Kind>: <message>") is raised as that kind."""
    try:
        for token in tokens:
            stream = _cfg.ArrowArrayStream()
            err = Error()
            check(open_stream(ctypes.byref(stream), token, ctypes.byref(err)), err)
            reader = pa.RecordBatchReader._import_from_c(ctypes.addressof(stream))
            try:
                while True:
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        break
                    except (pa.ArrowException, OSError) as e:
                        mapped = from_stream_error(_stream_message(str(e)))
                        if mapped is None:
                            raise
                        raise mapped from None
                    yield batch
            finally:
                reader.close()
    finally:
        opts.free()


def _stream_message(text: str) -> str:
    # pyarrow may put its own words before the stream's get_last_error text
    for kind in ("DataLossError: ", "SchemaChangedError: ", "PermissionError: ",
                 "ValueError: ", "RuntimeError: "):
        i = text.find(kind)
        if i >= 0:
            return text[i:]
    return text


def read_changes(options: Mapping[str, Any], start_lsn: str | None = None,
                 end_lsn: str | None = None, *, num_partitions: int = 0) -> pa.RecordBatchReader:
    """The change rows of ``options``' capture instance from ``start_lsn``
    to ``end_lsn`` (both included; None: the instance's min_lsn, the
    database's max_lsn) in change order, with the stream's schema
    (``_capture_instance``, ``_start_lsn``, ``_seqval``, ``_operation``,
    ``_command_id``, ``_commit_ts``, then the captured columns).

    Planned once into commit-aligned ranges (``num_partitions``: at most
    that many; 0 takes the ``numPartitions`` option), read one after the
    other as one reader. Changes CDC cleanup purged raise ``DataLossError``
    when read. DuckDB, Polars and pyarrow consume the reader directly; it
    is read once."""
    lib = _native.lib()
    opts = Options(options)
    frm, to = _lsn_value(start_lsn, "start_lsn"), _lsn_value(end_lsn, "end_lsn")
    plan = ctypes.c_void_p()
    err = Error()
    check(lib.mcdc_range_plan_create(ctypes.byref(plan), opts.handle, frm, to,
                                     int(num_partitions), ctypes.byref(err)), err)
    try:
        schema = _schema(lib.mcdc_range_plan_schema, plan)
        tokens = [lib.mcdc_range_plan_token(plan, i)
                  for i in range(lib.mcdc_range_plan_count(plan))]
    finally:
        lib.mcdc_range_plan_free(plan)

    def open_stream(out, token, e):
        return lib.mcdc_range_read(out, opts.handle, token, e)
    return pa.RecordBatchReader.from_batches(schema, _chain(schema, opts, tokens, open_stream))


def read_snapshot(options: Mapping[str, Any], *, num_partitions: int | None = None
                  ) -> pa.RecordBatchReader:
    """The tracked table's current rows as snapshot rows (``_operation`` 0,
    ``_start_lsn`` the LSN recorded before the read: ``snapshotLsn`` when
    set), in the stream's schema. The table is planned once into ranges
    (``num_partitions``, else the ``numPartitions`` option) read one after
    the other as one reader; ``isolationLevel``, ``lockTimeoutMs`` and
    ``snapshotKeys`` apply. The snapshot's LSN is the schema's metadata
    ``mssql_cdc.snapshot_lsn``."""
    lib = _native.lib()
    if num_partitions is not None:
        options = {**{k: v for k, v in options.items() if k.lower() != "numpartitions"},
                   "numPartitions": str(num_partitions)}
    opts = Options(options)
    plan = ctypes.c_void_p()
    err = Error()
    check(lib.mcdc_snapshot_plan_create(ctypes.byref(plan), opts.handle, 0, ctypes.byref(err)),
          err)
    try:
        schema = _schema(lib.mcdc_snapshot_plan_schema, plan)
        lsn = lib.mcdc_snapshot_plan_lsn(plan)
        tokens = [lib.mcdc_snapshot_plan_token(plan, i)
                  for i in range(lib.mcdc_snapshot_plan_count(plan))]
    finally:
        lib.mcdc_snapshot_plan_free(plan)
    schema = schema.with_metadata({**(schema.metadata or {}), b"mssql_cdc.snapshot_lsn": lsn})

    def open_stream(out, token, e):
        return lib.mcdc_snapshot_read(out, opts.handle, token, lsn, e)
    return pa.RecordBatchReader.from_batches(schema, _chain(schema, opts, tokens, open_stream))
