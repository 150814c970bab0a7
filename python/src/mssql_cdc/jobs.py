"""The jobs, run in this process on the library's jobs: the same code the
`mssql-cdc` CLI runs, on tables given as paths (or schema.table names under
``warehouse``). Each blocks until its job ends; its messages go to the
"mssql_cdc" logger, its progress to an optional callable; a
KeyboardInterrupt stops a stream, an apply or a backfill once its current
batch, pass or wave is committed, and a snapshot, a seed, a reconcile run
or a repair before its commit (nothing of it is written), and then
propagates."""
from __future__ import annotations

import ctypes
import json
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from . import _cfg, _native
from ._cfg import Error
from ._core import (MCDC_E_CANCELLED, Callbacks, Options, Runtime, check, iso_ms, log,
                    offset_dict, parse_time, run_job, runtime_handle, text, us_to_datetime)
from ._core import granularity as _granularity
from .errors import raise_error
from .types import (ApplyResult, BackfillStatus, Offset, ReconcileResult, RepairResult,
                    StreamResult)

_RESULT_BYTES = 8192  # a result struct's room: larger than any version of one
_JSON_BYTES = 8192


def _result_buffer():
    """Room for a result the library fills (mcdc_apply_result,
    mcdc_backfill_status, mcdc_reconcile_result, mcdc_repair_result): their
    first field, size_t size, says how many bytes it holds, so that the
    library writes no more; the JSON calls read it back as the library's."""
    buf = ctypes.create_string_buffer(_RESULT_BYTES)
    ctypes.c_size_t.from_buffer(buf).value = _RESULT_BYTES
    return buf


def _trigger(trigger: Any) -> tuple[int, int]:
    """(mcdc_trigger, processing_time_ms) of a trigger given as the
    reference's dict, or a word."""
    if trigger is None:
        return _cfg.TRIGGER_DEFAULT, 0
    if isinstance(trigger, Mapping):
        if len(trigger) != 1:
            raise ValueError(f"trigger: one of availableNow, once or processingTime, not {trigger!r}")
        (key, value), = trigger.items()
        if key in ("availableNow", "once"):
            if value is not True:
                raise ValueError(f"trigger: {key} takes True, not {value!r}")
            trigger = key
        elif key == "processingTime":
            trigger = f"processingTime={value}"
        else:
            raise ValueError(f"trigger: one of availableNow, once or processingTime, not {key!r}")
    if not isinstance(trigger, str):
        raise TypeError(f"trigger must be a string or a dict, not {trigger!r}")
    word = trigger.strip()
    if word.lower() == "default":
        return _cfg.TRIGGER_DEFAULT, 0
    if word.lower() == "availablenow":
        return _cfg.TRIGGER_AVAILABLE_NOW, 0
    if word.lower() == "once":
        return _cfg.TRIGGER_ONCE, 0
    m = re.fullmatch(r"processingTime\s*=\s*(.+)", word, re.I)
    if m:
        return _cfg.TRIGGER_PROCESSING_TIME, _interval_ms(m.group(1))
    raise ValueError(f"trigger: expected default, availableNow, once or processingTime=<interval> "
                     f"(e.g. '1 minute', '250ms'), not {trigger!r}")


_UNITS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000, "second": 1000,
          "seconds": 1000, "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000,
          "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000}


def _interval_ms(value: str) -> int:
    m = re.fullmatch(r"\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = (m.group(2).lower() or "ms") if m else ""
    if m is None or unit not in _UNITS:
        raise ValueError(f"trigger: processingTime takes an interval such as '10 seconds', "
                         f"'1 minute' or '250ms', not {value!r}")
    ms = int(float(m.group(1)) * _UNITS[unit])
    if not 1 <= ms <= 7 * 86_400_000:
        raise ValueError(f"trigger: processingTime must be 1 ms to 7 days, not {value!r}")
    return ms


def _choice(name: str, value: str, choices: dict[str, int]) -> int:
    v = choices.get(str(value).lower())
    if v is None:
        raise ValueError(f"{name} must be one of {tuple(choices)}, not {value!r}")
    return v


def _set_strings(cfg, field: str, count: str, values: Iterable[str] | None, what: str):
    """Sets a const char *const * field and its count from a list of
    strings; returns the array, which must live as long as the job."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    items = [text(v) for v in values]
    if not items:
        raise ValueError(f"{what}: an empty list (leave it None for the default)")
    array = (ctypes.c_char_p * len(items))(*items)
    setattr(cfg, field, ctypes.cast(array, ctypes.c_void_p))
    setattr(cfg, count, len(items))
    return array


def _batch_dict(r: _cfg.BatchReport) -> dict[str, Any]:
    return {
        "batch_id": r.batch_id, "rows": r.rows, "inserts": r.inserts, "updates": r.updates,
        "deletes": r.deletes, "start_lsn": r.start_lsn.decode(), "end_lsn": r.end_lsn.decode(),
        "end_commit_ts": iso_ms(r.end_commit_us) if r.has_end_commit else "",
        "replayed": bool(r.replayed), "bronze_skipped": bool(r.bronze_skipped),
        "duration_ms": r.duration_ms, "rows_per_s": r.rows_per_s,
        "ingestion_lag_seconds": r.ingestion_lag_seconds if r.ingestion_lag_seconds >= 0 else None,
        "finalized_until": us_to_datetime(r.finalized_until_us) if r.has_verdict else None,
    }


def _finish(rc: int, err: Error, interrupted: bool) -> None:
    """After a job: its error, else the KeyboardInterrupt that stopped it."""
    if rc not in (0, MCDC_E_CANCELLED) or (rc and not interrupted):
        raise_error(rc, err)
    if interrupted:
        raise KeyboardInterrupt


class _Stop:
    """A stop request (mcdc_stop) for a job that is one call; set in its
    config's ``stop``; request() from the waiting thread."""

    def __init__(self, cfg):
        lib = _native.lib()
        self._handle, err = ctypes.c_void_p(), Error()
        check(lib.mcdc_stop_create(ctypes.byref(self._handle), ctypes.byref(err)), err)
        cfg.stop = self._handle

    def request(self) -> None:
        _native.lib().mcdc_stop_request(self._handle)

    def free(self) -> None:
        _native.lib().mcdc_stop_free(self._handle)


def _one_call_job(what: str, call: Callable[[], int], cfg, keep: list[Any],
                  runtime: Runtime | None) -> tuple[int, bool]:
    """run_job for a job that is one call, stoppable through its config, in
    runtime (None: a private one)."""
    cfg.runtime = runtime_handle(runtime)
    try:
        stop = _Stop(cfg)
    except BaseException:
        if runtime is not None:
            runtime._release()
        raise
    # abandoned (a second KeyboardInterrupt), the job still runs in the
    # runtime: it stays borrowed, and run_job keeps the Runtime alive
    rc, interrupted = run_job(what, call, stop.request, [*keep, stop, runtime])
    stop.free()
    if runtime is not None:
        runtime._release()
    return rc, interrupted


def _handle_job(name: str, opts: Options | None, cfg, run: Callable[[Any, Error], int],
                result_json: Callable | None, result: Any, keep: list[Any],
                runtime: Runtime | None, stoppable: bool = True) -> dict[str, Any] | None:
    """A job with a handle (mcdc_<name>_create, _run, _request_stop, _free):
    created from opts and cfg in runtime (None: a private one), run by
    run(handle, err) in a worker thread, its result (result_json of result)
    and its last metrics taken before the handle is freed."""
    lib = _native.lib()
    handle, err = ctypes.c_void_p(), Error()
    cfg.runtime = runtime_handle(runtime)
    rc = getattr(lib, f"mcdc_{name}_create")(ctypes.byref(handle),
                                              opts.handle if opts is not None else None,
                                              ctypes.byref(cfg), ctypes.byref(err))
    if rc and runtime is not None:
        runtime._release()
    check(rc, err)
    stop = getattr(lib, f"mcdc_{name}_request_stop") if stoppable else None
    # abandoned (a second KeyboardInterrupt), the job still runs in the
    # runtime: it stays borrowed, and run_job keeps the Runtime alive
    rc, interrupted = run_job(name, lambda: run(handle, err),
                              (lambda: stop(handle)) if stop is not None else None,
                              [opts, cfg, handle, result, runtime, *keep])
    out = _json(result_json, result) if rc == 0 and result_json is not None else None
    if runtime is not None:
        runtime._release(handle)
    getattr(lib, f"mcdc_{name}_free")(handle)
    if opts is not None:
        opts.free()
    _finish(rc, err, interrupted)
    return out


def stream(options: Mapping[str, Any], target: str, app_id: str, checkpoint: str,
           facts_table: str | None = None, *, trigger: Any = None, query_name: str | None = None,
           bootstrap: bool = False, on_data_loss: str = "fail",
           resnapshot_interval_days: float = 7.0, snapshot_on_switch: bool = False,
           snapshot: str = "full", control_table: str | None = None, granularity: str = "hour",
           max_batches: int | None = None, warehouse: str | None = None,
           progress: Callable[[dict], Any] | None = None,
           on_batch: Callable[[dict], Any] | None = None,
           runtime: Runtime | None = None) -> StreamResult:
    """Streams the changes of ``options``' capture instance into ``target``
    (bronze) exactly once, as the reference's ``stream(spark,
    options).to_delta(...)`` does, until its trigger says stop: ``None`` or
    ``"default"`` runs back to back until interrupted, ``"availableNow"``
    (``{"availableNow": True}``) reads up to the max_lsn seen at start and
    returns, ``"once"`` one batch, ``"processingTime=1 minute"``
    (``{"processingTime": "1 minute"}``) a batch at most every interval.
    ``control_table`` advances ``target``'s verdict after each batch (at
    ``granularity``). ``on_batch`` gets a ``BatchReport`` dict after each
    committed batch; ``progress`` the progress of each whole snapshot the
    stream takes. ``runtime``: the ``Runtime`` it runs in (its budget,
    probe, storage options and metrics), else a private one."""
    lib = _native.lib()
    cfg = _native.init_cfg(_cfg.StreamCfg)
    cfg.target, cfg.app_id, cfg.checkpoint = text(target), text(app_id), text(checkpoint)
    cfg.facts_table, cfg.control_table = text(facts_table), text(control_table)
    cfg.warehouse, cfg.query_name = text(warehouse), text(query_name)
    cfg.trigger, cfg.processing_time_ms = _trigger(trigger)
    cfg.granularity = _granularity(granularity)
    cfg.max_batches = int(max_batches or 0)
    cfg.bootstrap = bool(bootstrap)
    cfg.snapshot = _choice("snapshot", snapshot, {"full": 0, "chunked": 1})
    cfg.on_data_loss = _choice("on_data_loss", on_data_loss, {"fail": 0, "resnapshot": 1})
    cfg.resnapshot_interval_days = float(resnapshot_interval_days)
    cfg.snapshot_on_switch = bool(snapshot_on_switch)
    callbacks = Callbacks(progress)
    callbacks.fill(cfg)
    totals: dict[str, Any] = {"batches": 0, "rows": 0, "end_offset": None}

    def on_report(ctx, report):
        try:
            r = report.contents
            totals["batches"] += 1
            totals["rows"] += r.rows
            totals["end_offset"] = {"lsn": r.end_lsn.decode(),
                                    "commit_ts": iso_ms(r.end_commit_us) if r.has_end_commit else ""}
            if on_batch is not None:
                on_batch(_batch_dict(r))
        except Exception:  # noqa: BLE001 - reported, never raised into C
            log.exception("the on_batch callable raised")
    report_fn = _cfg.REPORT_FN(on_report)
    _handle_job("stream", Options(options), cfg,
                lambda h, err: lib.mcdc_stream_run(h, ctypes.cast(report_fn, ctypes.c_void_p),
                                                   None, ctypes.byref(err)),
                None, None, [callbacks, report_fn], runtime)
    return {"batches": totals["batches"], "rows": totals["rows"],
            "end_offset": totals["end_offset"]}


def snapshot(options: Mapping[str, Any], target: str, *, resnapshot: bool = False,
             app_id: str | None = None, facts_table: str | None = None,
             warehouse: str | None = None,
             progress: Callable[[dict], Any] | None = None,
             runtime: Runtime | None = None) -> Offset:
    """Appends a snapshot of the table (its current rows as operation 0,
    stamped with an LSN recorded before the read) to ``target`` in one
    commit and returns its ``Offset``, for a stream's ``startingLsn``. When
    ``target`` holds a snapshot of the table already (and not
    ``resnapshot``), returns that one's offset and reads nothing. With
    ``app_id`` and ``facts_table`` (both or neither) a chunked snapshot of
    that stream still open is refused. A KeyboardInterrupt stops it before
    its one commit (nothing of it is in ``target``)."""
    lib = _native.lib()
    cfg = _native.init_cfg(_cfg.SnapshotCfg)
    cfg.target, cfg.warehouse = text(target), text(warehouse)
    cfg.resnapshot = bool(resnapshot)
    cfg.app_id, cfg.facts_table = text(app_id), text(facts_table)
    callbacks = Callbacks(progress)
    callbacks.fill(cfg)
    opts = Options(options)
    off, rows, taken, err = _cfg.Offset(), ctypes.c_int64(0), ctypes.c_bool(False), Error()
    rc, interrupted = _one_call_job(
        "snapshot", lambda: lib.mcdc_snapshot_take(ctypes.byref(off), ctypes.byref(rows),
                                                   ctypes.byref(taken), opts.handle,
                                                   ctypes.byref(cfg), ctypes.byref(err)),
        cfg, [opts, cfg, callbacks, off, rows, taken, err], runtime)
    opts.free()
    _finish(rc, err, interrupted)
    log.info("%s: %s", target, f"snapshot taken: {rows.value} rows at {off.lsn.decode()}"
             if taken.value else "holds a snapshot already: nothing read")
    return offset_dict(off)


def seed(options: Mapping[str, Any], target: str, source: str, as_of: str | datetime, *,
         app_id: str | None = None, facts_table: str | None = None,
         allow_missing_columns: bool = False, reseed: bool = False, allow_empty: bool = False,
         warehouse: str | None = None, progress: Callable[[dict], Any] | None = None,
         runtime: Runtime | None = None) -> Offset:
    """Appends a copy of the table the user already has (``source``: a Delta
    table, a .parquet file, a directory or a glob of them; the reference
    takes a DataFrame) to ``target`` as its snapshot, stamped with the LSN
    of ``as_of`` (a UTC time, a datetime, or an LSN recorded before the
    copy was read), and returns its ``Offset``."""
    lib = _native.lib()
    if isinstance(as_of, datetime):
        from datetime import timezone
        if as_of.tzinfo is not None:
            as_of = as_of.astimezone(timezone.utc).replace(tzinfo=None)
        as_of = as_of.isoformat() + "Z"
    cfg = _native.init_cfg(_cfg.SeedCfg)
    cfg.target, cfg.warehouse = text(target), text(warehouse)
    cfg.from_, cfg.as_of = text(source), text(as_of)
    cfg.allow_missing_columns, cfg.reseed = bool(allow_missing_columns), bool(reseed)
    cfg.app_id, cfg.facts_table = text(app_id), text(facts_table)
    cfg.allow_empty = bool(allow_empty)
    callbacks = Callbacks(progress)
    callbacks.fill(cfg)
    opts = Options(options)
    off, rows, written, err = _cfg.Offset(), ctypes.c_int64(0), ctypes.c_bool(False), Error()
    rc, interrupted = _one_call_job(
        "seed", lambda: lib.mcdc_seed(ctypes.byref(off), ctypes.byref(rows), ctypes.byref(written),
                                      opts.handle, ctypes.byref(cfg), ctypes.byref(err)),
        cfg, [opts, cfg, callbacks, off, rows, written, err], runtime)
    opts.free()
    _finish(rc, err, interrupted)
    return offset_dict(off)


def backfill(options: Mapping[str, Any], target: str, *, app_id: str, facts_table: str,
             chunk_rows: int | None = None, max_waves: int | None = None,
             max_seconds: float | None = None, min_headroom_hours: float | None = None,
             isolation: str | None = None, target_wave_seconds: float | None = None,
             warehouse: str | None = None,
             progress: Callable[[dict], Any] | None = None,
             runtime: Runtime | None = None) -> BackfillStatus:
    """Reads the newest chunked snapshot ``app_id``'s stream opened in
    ``target``, in waves of chunks, until it is done, a limit, a pause or a
    KeyboardInterrupt (which finishes the current wave: state "running");
    call it again until ``done``."""
    lib = _native.lib()
    cfg = _native.init_cfg(_cfg.BackfillCfg)
    cfg.target, cfg.app_id, cfg.facts_table = text(target), text(app_id), text(facts_table)
    cfg.warehouse, cfg.isolation = text(warehouse), text(isolation)
    if chunk_rows is not None:
        cfg.chunk_rows = int(chunk_rows)
    if max_waves is not None:
        cfg.max_waves = int(max_waves)
    if max_seconds is not None:
        cfg.max_seconds = float(max_seconds)
    if target_wave_seconds is not None:
        cfg.target_wave_seconds = float(target_wave_seconds)
    if min_headroom_hours is not None:
        cfg.has_min_headroom, cfg.min_headroom_hours = True, float(min_headroom_hours)
    callbacks = Callbacks(progress)
    callbacks.fill(cfg)
    status = _result_buffer()
    return _handle_job("backfill", Options(options), cfg,
                       lambda h, err: lib.mcdc_backfill_run(h, status, ctypes.byref(err)),
                       lib.mcdc_backfill_status_json, status, [callbacks],
                       runtime)  # type: ignore


def _json(fn, result) -> dict[str, Any]:
    out = ctypes.create_string_buffer(_JSON_BYTES)
    err = Error()
    check(fn(out, _JSON_BYTES, result, ctypes.byref(err)), err)
    return json.loads(out.value.decode("utf-8"))


def apply_changes(bronze: str, target: str, *, control_table: str,
                  capture_instance: str | None = None, keys: Iterable[str] | None = None,
                  facts_table: str | None = None, options: Mapping[str, Any] | None = None,
                  granularity: str = "hour", trigger: Any = "once", max_passes: int | None = None,
                  scd_type: int = 1, track_history_columns: Iterable[str] | None = None,
                  deletion_vectors: bool = False, memory_mb: int | None = None,
                  warehouse: str | None = None, scratch_dir: str | None = None,
                  progress: Callable[[dict], Any] | None = None,
                  runtime: Runtime | None = None) -> ApplyResult:
    """Applies what ``bronze`` holds beyond silver's position to ``target``
    (silver: the current state, one row per key; ``scd_type=2``: a
    history), then silver's position and verdict to ``control_table``; one
    pass by default (``trigger="availableNow"``: passes until bronze holds
    nothing new). Keys: ``keys``, else the capture instance's unique index
    read through ``options``. Sorted runs that do not fit ``memory_mb``
    spill to ``scratch_dir`` (a local directory), else into silver's own
    folder; a silver on an object store spills to the system's temporary
    directory unless ``scratch_dir`` says otherwise. A KeyboardInterrupt
    finishes the current pass."""
    lib = _native.lib()
    cfg = _native.init_cfg(_cfg.ApplyCfg)
    cfg.bronze, cfg.target = text(bronze), text(target)
    cfg.control_table, cfg.facts_table = text(control_table), text(facts_table)
    cfg.warehouse, cfg.capture_instance = text(warehouse), text(capture_instance)
    key_array = _set_strings(cfg, "keys", "n_keys", keys, "keys")
    cfg.granularity = _granularity(granularity)
    cfg.trigger, cfg.processing_time_ms = _trigger(trigger if trigger is not None else "default")
    cfg.max_passes = int(max_passes or 0)
    if memory_mb is not None:
        cfg.memory_mb = int(memory_mb)
    cfg.scd_type = int(scd_type)
    hist_array = _set_strings(cfg, "track_history_columns", "n_track_history_columns",
                              track_history_columns, "track_history_columns")
    cfg.deletion_vectors = 1 if deletion_vectors else 0
    if scratch_dir is None and "://" in target and not target.lower().startswith("file:"):
        scratch_dir = tempfile.gettempdir()
    cfg.scratch_dir = text(scratch_dir)
    callbacks = Callbacks(progress)
    callbacks.fill(cfg)
    result = _result_buffer()
    out = _handle_job("apply", Options(options) if options is not None else None, cfg,
                      lambda h, err: lib.mcdc_apply_run(h, None, None, result, ctypes.byref(err)),
                      lib.mcdc_apply_result_json, result, [callbacks, key_array, hist_array],
                      runtime)
    assert out is not None
    out["finalized_until"] = parse_time(out.get("finalized_until"))
    return out  # type: ignore[return-value]



def _rows_json(table: str, warehouse: str | None) -> list[dict[str, Any]]:
    lib = _native.lib()
    rows: list[dict[str, Any]] = []

    def on_line(ctx, line):
        try:
            rows.append(json.loads(line.decode("utf-8")))
            return 0
        except Exception:  # noqa: BLE001 - stops the read; reported below
            return 1
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(on_line)
    err = Error()
    check(lib.mcdc_table_rows_json(text(table), text(warehouse), ctypes.cast(fn, ctypes.c_void_p),
                                   None, ctypes.byref(err)), err)
    return rows


def reconcile(options: Mapping[str, Any], silver: str, *, bronze: str, control_table: str,
              keys: Iterable[str] | None = None, facts_table: str | None = None,
              bucket_rows: int | None = None, sample: float | None = None,
              report_table: str | None = None, seed: int | None = None, repair: bool = False,
              settle_seconds: int = 0, warehouse: str | None = None,
              progress: Callable[[dict], Any] | None = None,
              runtime: Runtime | None = None) -> ReconcileResult:
    """Is ``silver`` equal to its SQL Server table? Counts buckets of the
    key on both sides (Tier 1), compares the mismatched buckets and a
    ``sample`` of the others row by row (Tier 2), classifies what differs,
    and (with ``report_table``) appends the run's report. ``repair=True``
    (needs ``facts_table``) appends the differing keys' current rows to
    bronze for the next apply. Nothing is written to SQL Server. A
    KeyboardInterrupt stops the run before its report (nothing of it is
    recorded)."""
    lib = _native.lib()
    cfg = _native.init_cfg(_cfg.ReconcileCfg)
    cfg.silver, cfg.bronze = text(silver), text(bronze)
    cfg.control_table, cfg.facts_table = text(control_table), text(facts_table)
    cfg.report_table, cfg.warehouse = text(report_table), text(warehouse)
    key_array = _set_strings(cfg, "keys", "n_keys", keys, "keys")
    if bucket_rows is not None:
        cfg.bucket_rows = int(bucket_rows)
    if sample is not None:
        cfg.sample = float(sample)
    if seed is not None:
        cfg.has_sample_seed, cfg.sample_seed = True, int(seed)
    cfg.repair = bool(repair)
    cfg.settle_seconds = int(settle_seconds)
    callbacks = Callbacks(progress)
    callbacks.fill(cfg)
    result = _result_buffer()
    out = _handle_job("reconcile", Options(options), cfg,
                      lambda h, err: lib.mcdc_reconcile_run(h, result, ctypes.byref(err)),
                      lib.mcdc_reconcile_result_json, result, [callbacks, key_array], runtime)
    assert out is not None
    out["report"] = ([r for r in _rows_json(report_table, warehouse)
                      if r.get("run_id") == out["run_id"]] if report_table else None)
    return out  # type: ignore[return-value]


def repair(options: Mapping[str, Any], bronze: str, *, facts_table: str,
           keys: Iterable[Mapping[str, Any] | str] | None = None, run_id: str | None = None,
           report_table: str | None = None, warehouse: str | None = None,
           runtime: Runtime | None = None) -> RepairResult:
    """Appends the current source row of each key (``keys``: dicts such as
    ``{"id": 42}``, or JSON text; or the differing keys of reconcile run
    ``run_id`` in ``report_table``) to ``bronze`` as a recorded repair, so
    that the next ``apply_changes`` fixes silver. Again with the same
    ``run_id``, nothing is appended twice."""
    lib = _native.lib()
    cfg = _native.init_cfg(_cfg.RepairCfg)
    cfg.bronze, cfg.facts_table = text(bronze), text(facts_table)
    cfg.warehouse, cfg.run_id, cfg.report_table = text(warehouse), text(run_id), text(report_table)
    key_texts = None
    if keys is not None:
        key_texts = [k if isinstance(k, str) else json.dumps(dict(k)) for k in keys]
    key_array = _set_strings(cfg, "keys_json", "n_keys", key_texts, "keys")
    callbacks = Callbacks(None)
    callbacks.fill(cfg, with_progress=False)
    opts = Options(options)
    result, err = _result_buffer(), Error()
    rc, interrupted = _one_call_job(
        "repair", lambda: lib.mcdc_repair_run(opts.handle, ctypes.byref(cfg), result,
                                              ctypes.byref(err)),
        cfg, [opts, cfg, callbacks, result, key_array], runtime)
    opts.free()
    _finish(rc, err, interrupted)
    return _json(lib.mcdc_repair_result_json, result)  # type: ignore[return-value]
