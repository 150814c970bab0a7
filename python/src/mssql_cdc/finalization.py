"""The completeness verdict per table (the reference's ``finalization``
module), read from and written to a control table given as a path or a
URI. The reference's functions take a SparkSession first; these take the
control table first (Spark's will come with ``register``). Times are naive
UTC datetimes, as the reference's. ``storage_options``: the object store's
endpoint and credentials for a control table on one (s3://, abfss://...),
under delta-rs' names (AWS_REGION, AZURE_STORAGE_ACCOUNT_KEY...)."""
from __future__ import annotations

import ctypes
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from . import _cfg, _native
from ._cfg import Error
from ._core import (Options, check, datetime_to_us, granularity as _granularity, text,
                    us_to_datetime)
from .types import Freshness, Granularity


StorageOptions = Mapping[str, str]


def _call(storage_options: StorageOptions | None, fn, *args) -> None:
    """fn(...args with the storage options' handle in place of None...)."""
    opts = Options(storage_options, storage_only=True) if storage_options else None
    err = Error()
    try:
        handle = opts.handle if opts is not None else None
        check(fn(*[handle if a is _OPTS else a for a in args], ctypes.byref(err)), err)
    finally:
        if opts is not None:
            opts.free()


_OPTS = object()  # where _call puts the storage options' handle


def _verdict(control_table: str, table_name: str, warehouse: str | None,
             storage_options: StorageOptions | None) -> _cfg.Verdict:
    v = _cfg.Verdict()
    _call(storage_options, _native.lib().mcdc_verdict_read_opts, ctypes.byref(v), _OPTS,
          text(control_table), text(warehouse), text(table_name))
    return v


def finalized_until(control_table: str, table_name: str, *, warehouse: str | None = None,
                    storage_options: StorageOptions | None = None) -> datetime | None:
    """``table_name``'s verdict: every period ending at or before it is
    complete; None before the first."""
    v = _verdict(control_table, table_name, warehouse, storage_options)
    return us_to_datetime(v.finalized_until_us) if v.found else None


def is_final(control_table: str, table_name: str, period_end: datetime, *,
             warehouse: str | None = None, storage_options: StorageOptions | None = None) -> bool:
    """Whether the period ending at ``period_end`` (exclusive; naive UTC, or
    aware and converted) is complete: no source commit in it can still
    arrive."""
    out = ctypes.c_bool(False)
    _call(storage_options, _native.lib().mcdc_verdict_is_final_opts, ctypes.byref(out), _OPTS,
          text(control_table), text(warehouse), text(table_name), datetime_to_us(period_end))
    return bool(out.value)


def freshness(control_table: str, table_name: str, *, warehouse: str | None = None,
              storage_options: StorageOptions | None = None) -> Freshness:
    """How old ``table_name``'s verdict is now, by this machine's clock, and
    the chunked snapshot that holds it (silver tables), if one does. Reads
    the control table only."""
    v = _verdict(control_table, table_name, warehouse, storage_options)
    has, lsn = ctypes.c_bool(False), ctypes.create_string_buffer(24)
    _call(storage_options, _native.lib().mcdc_verdict_open_snapshot_opts, ctypes.byref(has), lsn,
          _OPTS, text(control_table), text(warehouse), text(table_name))
    until = us_to_datetime(v.finalized_until_us) if v.found else None
    moved = us_to_datetime(v.updated_at_us) if v.found else None
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    return {
        "table_name": table_name,
        "finalized_until": until,
        "updated_at": moved,
        "age_seconds": None if until is None else (now - until).total_seconds(),
        "seconds_since_update": None if moved is None else (now - moved).total_seconds(),
        "open_snapshot_lsn": lsn.value.decode() if has.value else None,
    }


def advance(control_table: str, table_name: str, end_offset: Mapping[str, Any] | None, *,
            granularity: Granularity = "hour", warehouse: str | None = None,
            storage_options: StorageOptions | None = None) -> datetime | None:
    """Moves ``table_name``'s verdict to ``end_offset``'s commit time
    truncated to ``granularity``, when later (never backwards), and returns
    the verdict. Call it only after the batch ending at ``end_offset``
    ({"lsn", "commit_ts"}) is committed. An offset without a commit time
    moves nothing."""
    if not end_offset or not end_offset.get("commit_ts"):
        return finalized_until(control_table, table_name, warehouse=warehouse,
                               storage_options=storage_options)
    commit = datetime.fromisoformat(str(end_offset["commit_ts"]).rstrip("Z"))
    v = _cfg.Verdict()
    _call(storage_options, _native.lib().mcdc_verdict_advance_opts, ctypes.byref(v), _OPTS,
          text(control_table), text(warehouse), text(table_name), text(end_offset["lsn"]),
          datetime_to_us(commit), _granularity(granularity))
    return us_to_datetime(v.finalized_until_us) if v.found else None


def _or_on_spark(plain):
    """``plain``, or with a SparkSession first (the reference's form) the
    same function on a control table kept through Spark (spark_jobs)."""
    import functools
    import os

    @functools.wraps(plain)
    def call(first, *args, **kwargs):
        if isinstance(first, (str, os.PathLike)):
            return plain(first, *args, **kwargs)
        from . import spark_jobs
        return getattr(spark_jobs, plain.__name__)(first, *args, **kwargs)
    return call


finalized_until = _or_on_spark(finalized_until)
is_final = _or_on_spark(is_final)
freshness = _or_on_spark(freshness)
advance = _or_on_spark(advance)


def track(spark, query, control_table: str, table_name: str, *, granularity: Granularity = "hour"):
    """Advances ``table_name``'s verdict after every batch of ``query`` (a
    started StreamingQuery writing it) until it terminates; returns the
    tracker, whose ``join()`` waits for the last verdict (spark_jobs.track)."""
    from . import spark_jobs
    return spark_jobs.track(spark, query, control_table, table_name, granularity=granularity)
