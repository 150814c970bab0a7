"""A source's positions on one open connection (the library's mcdc_source):
max_lsn, the n-th commit after an LSN, commit times and startingLsn, as a
stream that plans its own batches needs them; and its batches planned with
the stream's guards (the capture-instance cut, the DDL checks, the
retention guard) into range tokens. Offsets are the reference's
``{"lsn", "commit_ts"}``: the LSN as "0x" + 20 uppercase hex digits, the
commit time of that LSN in UTC to the millisecond ("" when the LSN is no
commit's)."""
from __future__ import annotations

import ctypes
import json
import weakref
from collections.abc import Mapping
from typing import Any

from . import _native
from ._cfg import Error
from ._core import Options, check, iso_ms, text

LsnValue = ctypes.c_uint8 * 10


def lsn_text(value) -> str:
    return "0x" + bytes(value).hex().upper()


def lsn_value(lsn: str):
    value = LsnValue()
    err = Error()
    check(_native.lib().mcdc_lsn_value_parse(value, text(lsn), ctypes.byref(err)), err)
    return value


def lsn_after(lsn: str) -> str:
    """The LSN just after ``lsn`` (sys.fn_cdc_increment_lsn)."""
    n = int(lsn, 16) + 1
    if n >= 1 << 80:
        raise ValueError(f"no LSN comes after {lsn}")
    return "0x" + format(n, "020X")


class Positions:
    """One connection to the source, opened on first use, reopened by the
    library when it breaks. Not picklable state: drop it before pickling
    (``close``)."""

    def __init__(self, options: Mapping[str, Any]):
        self._options = dict(options)
        self._handle: ctypes.c_void_p | None = None
        self._finalizer = None

    def _source(self) -> ctypes.c_void_p:
        if self._handle is None:
            lib = _native.lib()
            opts = Options(self._options)
            try:
                handle = ctypes.c_void_p()
                err = Error()
                check(lib.mcdc_source_open(ctypes.byref(handle), opts.handle, ctypes.byref(err)),
                      err)
            finally:
                opts.free()
            self._handle = handle
            self._finalizer = weakref.finalize(self, lib.mcdc_source_free, handle)
        return self._handle

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._handle = self._finalizer = None

    def initial_lsn(self, starting_lsn: str | None) -> str:
        out = LsnValue()
        err = Error()
        check(_native.lib().mcdc_source_initial_lsn(self._source(), text(starting_lsn), out,
                                                    ctypes.byref(err)), err)
        return lsn_text(out)

    def max_lsn(self) -> str:
        out = LsnValue()
        err = Error()
        check(_native.lib().mcdc_source_max_lsn(self._source(), out, ctypes.byref(err)), err)
        return lsn_text(out)

    def nth_commit_after(self, lsn: str, n: int) -> str | None:
        out = LsnValue()
        found = ctypes.c_bool(False)
        err = Error()
        check(_native.lib().mcdc_source_nth_commit_after(
            self._source(), lsn_value(lsn), int(n), out, ctypes.byref(found),
            ctypes.byref(err)), err)
        return lsn_text(out) if found.value else None

    def commit_ts(self, lsn: str) -> str:
        us = ctypes.c_int64(0)
        found = ctypes.c_bool(False)
        err = Error()
        check(_native.lib().mcdc_source_commit_time(self._source(), lsn_value(lsn),
                                                    ctypes.byref(us), ctypes.byref(found),
                                                    ctypes.byref(err)), err)
        return iso_ms(us.value) if found.value else ""

    def commit_at(self, utc_us: int) -> str | None:
        """The LSN of the last commit at or before ``utc_us`` (microseconds
        since 1970, UTC), to the second on the server's clock; None when
        cdc.lsn_time_mapping holds none. A time later than the server's
        clock is a ValueError."""
        out = LsnValue()
        found = ctypes.c_bool(False)
        err = Error()
        check(_native.lib().mcdc_source_commit_at(self._source(), int(utc_us), out,
                                                  ctypes.byref(found), ctypes.byref(err)), err)
        return lsn_text(out) if found.value else None

    def offset(self, lsn: str) -> dict[str, str]:
        """The reference's offset of ``lsn``: keys in its order."""
        return {"lsn": lsn, "commit_ts": self.commit_ts(lsn)}

    def schema(self):
        """The stream's schema (pyarrow): the union of the table's capture
        instances' columns, the schema of every planned range."""
        import pyarrow as pa

        from ._cfg import ArrowSchema
        c_schema = ArrowSchema()
        err = Error()
        check(_native.lib().mcdc_source_schema(ctypes.byref(c_schema), self._source(),
                                               ctypes.byref(err)), err)
        return pa.Schema._import_from_c(ctypes.addressof(c_schema))

    def batch_end(self, start: str, end: str) -> str:
        """``end`` lowered to just before a newer capture instance whose
        columns the stream's schema lacks (the next batch fails there)."""
        value = lsn_value(end)
        cut = ctypes.c_bool(False)
        err = Error()
        check(_native.lib().mcdc_source_batch_end(self._source(), lsn_value(start), value,
                                                  ctypes.byref(cut), ctypes.byref(err)), err)
        return lsn_text(value)

    def plan_batch(self, start: str, end: str, ranges_max: int) -> tuple[list[str], list[dict]]:
        """The batch (start, end] as range tokens and the events its
        planning met (DataLossError, SchemaChangedError before any read)."""
        lib = _native.lib()
        plan = ctypes.c_void_p()
        err = Error()
        try:
            check(lib.mcdc_source_plan_batch(ctypes.byref(plan), self._source(), lsn_value(start),
                                             lsn_value(end), int(ranges_max), ctypes.byref(err)),
                  err)
            tokens = [lib.mcdc_range_plan_token(plan, i).decode()
                      for i in range(lib.mcdc_range_plan_count(plan))]
            events = json.loads(lib.mcdc_range_plan_events_json(plan).decode())
        finally:
            lib.mcdc_range_plan_free(plan)
        return tokens, events
