"""What every call shares: source options as a library handle, the log and
progress callbacks, times, and running a job in a worker thread so that a
KeyboardInterrupt reaches Python and stops the job."""
from __future__ import annotations

import ctypes
import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from . import _cfg, _native
from ._cfg import Error
from .errors import raise_error

log = logging.getLogger("mssql_cdc")

_EPOCH = datetime(1970, 1, 1)
MCDC_E_CANCELLED = -8

# Jobs abandoned by a second KeyboardInterrupt: their thread still runs in
# the library, so what it borrows (options, configs, callbacks) is never freed.
_abandoned: list[Any] = []


def text(value: Any) -> bytes | None:
    """A string parameter as the library takes it (None stays NULL)."""
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {type(value).__name__}: {value!r}")
    return value.encode("utf-8")


def check(rc: int, err: Error) -> None:
    if rc != 0:
        raise_error(rc, err)


def us_to_datetime(us: int) -> datetime:
    """UTC microseconds as a naive UTC datetime (the reference's form)."""
    return _EPOCH + timedelta(microseconds=us)


def datetime_to_us(value: datetime) -> int:
    """A datetime (naive: UTC; aware: converted) as UTC microseconds."""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    delta = value - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def iso_ms(us: int) -> str:
    """UTC microseconds as "YYYY-MM-DDTHH:MM:SS.fff" (an Offset's commit_ts)."""
    return us_to_datetime(us).isoformat(timespec="milliseconds")


def parse_time(value: str | None) -> datetime | None:
    """A time the library wrote ("YYYY-MM-DDTHH:MM:SS[.f]") as a naive datetime."""
    if value is None or value == "":
        return None
    return datetime.fromisoformat(value.rstrip("Z"))


def offset_dict(off: _cfg.Offset) -> dict[str, str]:
    return {"lsn": off.lsn.decode(), "commit_ts": iso_ms(off.commit_us) if off.has_commit_ts else ""}


def granularity(value: str) -> int:
    g = _cfg.GRANULARITIES.get(str(value).lower())
    if g is None:
        raise ValueError(f"granularity must be one of {tuple(_cfg.GRANULARITIES)}, not {value!r}")
    return g


class Options:
    """Source options (the reference's names, any case) and storage options
    (object stores' endpoints and credentials: mcdc_opts_storage_names) set
    on a library handle; values are validated as they are set. Unknown names
    are refused (a typo would otherwise leave the default in place).
    storage_only: only storage options are taken (a call that opens tables
    and reads no source)."""

    def __init__(self, options: Mapping[str, Any] | None, storage_only: bool = False):
        lib = _native.lib()
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"options must be a dict of option names to values, not "
                            f"{type(options).__name__}")
        handle = ctypes.c_void_p()
        err = Error()
        check(lib.mcdc_opts_create(ctypes.byref(handle), ctypes.byref(err)), err)
        self.handle = handle
        self._finalizer = weakref.finalize(self, lib.mcdc_opts_free, handle)
        known = {n.lower() for n in (known_option_names() if not storage_only else [])}
        stores = {n.lower() for n in storage_option_names()}
        for name, value in (options or {}).items():
            if not isinstance(name, str):
                raise TypeError(f"an option name must be a string, not {name!r}")
            if name.lower() not in known and name.lower() not in stores:
                if storage_only:
                    raise ValueError(f"unknown storage option '{name}' (the storage options, "
                                     f"any case: {', '.join(storage_option_names())})")
                raise ValueError(f"unknown option '{name}' (the options, any case: "
                                 f"{', '.join(known_option_names())}; and the storage options "
                                 f"{', '.join(storage_option_names())})")
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, (list, tuple, dict)):
                import json
                value = json.dumps(value)
            elif value is None:
                continue
            unknown = ctypes.c_bool(False)
            err = Error()
            check(lib.mcdc_opts_set(handle, text(name), text(str(value)), ctypes.byref(unknown),
                                    ctypes.byref(err)), err)

    def free(self) -> None:
        self._finalizer()

    def keep(self) -> None:
        """Never free: a thread abandoned in the library still borrows it."""
        self._finalizer.detach()


def known_option_names() -> list[str]:
    return _names(_native.lib().mcdc_opts_known_names())


def storage_option_names() -> list[str]:
    return _names(_native.lib().mcdc_opts_storage_names())


def _names(names) -> list[str]:
    out = []
    i = 0
    while names[i] is not None:
        out.append(names[i].decode())
        i += 1
    return out


_LEVELS = {_cfg.LOG_ERROR: logging.ERROR, _cfg.LOG_WARN: logging.WARNING,
           _cfg.LOG_INFO: logging.INFO, _cfg.LOG_DEBUG: logging.DEBUG}


def _on_log(user, level, message) -> None:
    # called from the job's threads (ctypes takes the GIL); never raises
    try:
        log.log(_LEVELS.get(level, logging.WARNING),
                (message or b"").decode("utf-8", errors="replace"))
    except Exception:  # noqa: BLE001 - a handler failing must not reach C
        pass


def _library_level() -> int:
    """The library level that passes what the "mssql_cdc" logger keeps."""
    if log.isEnabledFor(logging.DEBUG):
        return _cfg.LOG_DEBUG
    if log.isEnabledFor(logging.INFO):
        return _cfg.LOG_INFO
    return _cfg.LOG_WARN



_THREAD_LOG_FN = None  # the callback every thread's messages outside jobs go to


def route_log(lib) -> int:
    """Sends the calling thread's library messages outside jobs to the
    "mssql_cdc" logger, at the level it keeps (taken now); returns a true
    value (the level + 1)."""
    global _THREAD_LOG_FN
    if _THREAD_LOG_FN is None:
        _THREAD_LOG_FN = _cfg.LOG_FN(_on_log)
    level = _library_level()
    lib.mcdc_log_to_thread(ctypes.cast(_THREAD_LOG_FN, ctypes.c_void_p), None, level)
    return level + 1


def progress_dict(p) -> dict[str, Any]:
    v2 = p.version >= 2
    s = (lambda b: b.decode("utf-8", errors="replace") if b is not None else None)
    return {
        "job": s(p.job), "phase": s(p.phase), "phase_number": p.phase_number if v2 else 0,
        "rows_done": p.rows_done, "rows_total": p.rows_total if p.rows_total >= 0 else None,
        "rows_estimated": bool(p.rows_estimated), "parts_name": s(p.parts_name),
        "parts_done": p.parts_done, "parts_total": p.parts_total if p.parts_total >= 0 else None,
        "job_parts_name": s(p.job_parts_name) if v2 else None,
        "job_parts_done": p.job_parts_done if v2 else 0,
        "job_parts_total": (p.job_parts_total if v2 and p.job_parts_total >= 0 else None),
        "bytes_done": p.bytes_done, "phase_ms": p.phase_ms, "elapsed_ms": p.elapsed_ms,
        "done": bool(p.done),
    }


class Callbacks:
    """The ctypes callbacks of one job, alive as long as this object."""

    def __init__(self, progress: Callable[[dict], Any] | None = None):
        self.log_fn = _cfg.LOG_FN(_on_log)
        self.progress_fn = None
        self.level = _library_level()
        if progress is not None:
            if not callable(progress):
                raise TypeError("progress must be a callable taking a dict")

            def on_progress(user, p):
                try:
                    progress(progress_dict(p.contents))
                except Exception:  # noqa: BLE001 - reported, never raised into C
                    log.exception("the progress callable raised")
            self.progress_fn = _cfg.PROGRESS_FN(on_progress)

    def fill(self, cfg, with_progress: bool = True) -> None:
        """Sets a config's log_fn, log_level and (when it has them)
        progress_fn."""
        cfg.log_fn = ctypes.cast(self.log_fn, ctypes.c_void_p)
        cfg.log_level = self.level
        if with_progress and self.progress_fn is not None:
            cfg.progress_fn = ctypes.cast(self.progress_fn, ctypes.c_void_p)


def _wait(done: threading.Event) -> None:
    # bounded waits on an event the job's thread sets last (not join: a
    # KeyboardInterrupt inside Thread.join can leave the thread marked as
    # ended while it runs), so that a signal the kernel gave to one of the
    # library's threads is still seen by the main thread within the interval
    while not done.wait(0.2):
        pass


def run_job(what: str, call: Callable[[], int], stop: Callable[[], None] | None,
            keep: list[Any]) -> tuple[int, bool]:
    """Runs call() (a library call returning a status) in a worker thread;
    returns (status, interrupted). A KeyboardInterrupt while it runs calls
    stop() (the job's request_stop: it finishes its batch, pass or wave and
    returns) and waits for it; a job without one is waited for. A second
    KeyboardInterrupt abandons the job (it goes on until the process exits,
    which leaves the lake as a kill would: the library's jobs are crash-safe)
    and propagates; what the job borrows (keep) is never freed then."""
    box: dict[str, Any] = {}
    began, done = threading.Event(), threading.Event()

    def target() -> None:
        began.set()
        try:
            box["rc"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["exc"] = e
        finally:
            done.set()

    thread = threading.Thread(target=target, name=f"mssql_cdc {what}", daemon=True)
    interrupted = False
    try:
        # inside the try: an interrupt while start() waits for the thread to
        # run (a loaded machine can take a while) must stop the job too
        thread.start()
        _wait(done)
    except KeyboardInterrupt:
        # an interrupt that came before start() made the thread: nothing runs
        if not began.wait(5):
            raise
        interrupted = True
        if stop is not None:
            stop()
            log.warning("%s: stopping on KeyboardInterrupt once the current unit of work is "
                        "committed (interrupt again to abandon it, as a kill would)", what)
        else:
            log.warning("%s: cannot be stopped midway; waiting for it to end (interrupt again "
                        "to abandon it, as a kill would)", what)
        try:
            _wait(done)
        except KeyboardInterrupt:
            for k in keep:
                if isinstance(k, Options):
                    k.keep()
            _abandoned.append((thread, keep))
            raise
    if "exc" in box:
        raise box["exc"]
    return box["rc"], interrupted


# ---- the runtime ------------------------------------------------------------------------

_RUNTIME_LOG_FN = None  # every runtime's default log sink (the jobs here set their own)
_METRICS_BYTES = 8192   # room for a mcdc_job_metrics of a later library version


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Runtime: {name} must be an int, not {value!r}")
    if value < 0:
        raise ValueError(f"Runtime: {name} cannot be negative ({value}): 0 means no limit")
    return value


def _opt_us(has: bool, us: int) -> datetime | None:
    return us_to_datetime(us) if has else None


def job_metrics_dict(m: _cfg.JobMetrics) -> dict[str, Any]:
    """A mcdc_job_metrics as the JobMetrics dict (types.JobMetrics)."""
    lib = _native.lib()
    s = (lambda b: b.decode("utf-8", errors="replace") if b is not None else None)
    errors = {}
    for slot in range(1, _cfg.JOB_ERROR_SLOTS):
        if m.errors[slot]:
            errors[s(lib.mcdc_status_name(-slot))] = m.errors[slot]
    progress = None
    if m.progress_job is not None:
        progress = {"job": s(m.progress_job), "phase": s(m.progress_phase),
                    "active": bool(m.progress_active), "rows_done": m.progress_rows_done,
                    "rows_total": m.progress_rows_total if m.progress_rows_total >= 0 else None,
                    "parts_done": m.progress_parts_done,
                    "parts_total": m.progress_parts_total if m.progress_parts_total >= 0 else None}
    return {
        "id": m.id, "job": s(m.job), "name": s(m.name), "state": s(lib.mcdc_job_state_name(m.state)),
        "runs": m.runs, "rows": m.rows, "batches": m.batches,
        "last_batch_seconds": m.last_batch_seconds if m.has_batch else None,
        "end_lsn": s(m.end_lsn) if m.has_batch else None,
        "end_commit_ts": iso_ms(m.end_commit_us) if m.has_batch and m.has_end_commit else None,
        "ingestion_lag_seconds": (m.ingestion_lag_seconds
                                  if m.has_batch and m.ingestion_lag_seconds >= 0 else None),
        "retention_headroom_hours": (m.retention_headroom_hours
                                     if m.has_retention_headroom else None),
        "finalized_until": _opt_us(m.has_verdict, m.finalized_until_us),
        "verdict_moved_at": _opt_us(m.has_verdict and m.verdict_moved_us > 0, m.verdict_moved_us),
        "errors": errors,
        "last_status": s(lib.mcdc_status_name(m.last_status)) if m.last_status else None,
        "last_error": s(m.last_error) or None,
        "progress": progress,
    }


class Runtime:
    """What the jobs of this process share, as ``mssql-cdc serve`` shares
    it (include/mssqlcdc.h, "The runtime"): one budget of SQL Server
    connections and Parquet encoder threads, a ceiling on the bytes the
    jobs hold, one probe per database however many streams poll it, storage
    options per scheme for the jobs given none, and a registry of the jobs'
    metrics. Give it to the job functions (``runtime=rt``); a job without
    one runs in a private runtime of its own.

    ``connections_max`` (0: no limit, else at least 2), ``encoder_threads_max``
    (0: no limit, else at least 1), ``memory_bytes_max`` (0: no ceiling; an
    allocation past it fails the job with an out-of-memory error),
    ``probe_interval_ms`` (0: 10 ms) and ``storage_options`` (a dict of
    scheme, such as ``"s3"`` or ``"azure"``, to a dict of storage options)
    are the C config's.

    A context manager: leaving the ``with`` block closes it. ``close()``
    refuses while a job runs in it (``RuntimeError``); a second close does
    nothing; a closed runtime refuses every use (``ValueError``). Jobs run
    on any threads at once."""

    def __init__(self, *, connections_max: int = 0, encoder_threads_max: int = 0,
                 memory_bytes_max: int = 0, probe_interval_ms: int = 0,
                 storage_options: Mapping[str, Mapping[str, Any]] | None = None):
        global _RUNTIME_LOG_FN
        lib = _native.lib()
        cfg = _native.init_cfg(_cfg.RuntimeCfg)
        cfg.connections_max = _count("connections_max", connections_max)
        cfg.encoder_threads_max = _count("encoder_threads_max", encoder_threads_max)
        cfg.memory_bytes_max = _count("memory_bytes_max", memory_bytes_max)
        cfg.probe_interval_ms = _count("probe_interval_ms", probe_interval_ms)
        if _RUNTIME_LOG_FN is None:
            _RUNTIME_LOG_FN = _cfg.LOG_FN(_on_log)
        cfg.log_fn = ctypes.cast(_RUNTIME_LOG_FN, ctypes.c_void_p)
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise TypeError("Runtime: storage_options must be a dict of scheme to a dict of "
                            f"storage options, not {type(storage_options).__name__}")
        handle, err = ctypes.c_void_p(), Error()
        check(lib.mcdc_runtime_create(ctypes.byref(handle), ctypes.byref(cfg), ctypes.byref(err)),
              err)
        self._handle = handle
        self._lock = threading.Lock()
        self._active = 0        # jobs running in it now
        self._closed = False
        self._ended: dict[tuple[str, str], dict[str, Any]] = {}  # (job, name): last figures
        self._finalizer = weakref.finalize(self, lib.mcdc_runtime_destroy, handle)
        # not at exit: a job abandoned by a second KeyboardInterrupt may still run in it
        self._finalizer.atexit = False
        try:
            for scheme, options in (storage_options or {}).items():
                self.set_storage_options(scheme, options)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Runtime":
        self._check_open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._active} job(s) running"
        return f"<mssql_cdc.Runtime {state}>"

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("mssql_cdc.Runtime: this runtime is closed; create another one")

    def set_storage_options(self, scheme: str, options: Mapping[str, Any]) -> None:
        """Storage options (delta-rs's names, any case) for the stores of one
        scheme family (``"s3"``, ``"azure"``, ``"file"``, ``"mem"``, or a URI
        scheme such as ``"s3a"`` or ``"abfss"`` naming its family), for the
        jobs whose options hold no storage option of their own. Replaces the
        family's whole set for the stores opened afterwards; an empty dict
        clears it. A misspelt name is refused, quoting no value."""
        if not isinstance(options, Mapping):
            raise TypeError(f"Runtime: the storage options of {scheme!r} must be a dict, not "
                            f"{type(options).__name__}")
        names = [text(str(n)) for n in options]
        values = [text(str(v)) for v in options.values()]
        n = len(names)
        name_array = (ctypes.c_char_p * max(n, 1))(*names)
        value_array = (ctypes.c_char_p * max(n, 1))(*values)
        err = Error()
        with self._lock:
            self._check_open()
            check(_native.lib().mcdc_runtime_set_storage_options(
                self._handle, text(scheme), name_array, value_array, n, ctypes.byref(err)), err)

    def metrics(self) -> list[dict[str, Any]]:
        """The registry's figures, a ``JobMetrics`` dict per job, oldest
        first: every job running in the runtime now, then for each stream,
        backfill, apply or reconcile that has ended (its state "done",
        "stopped" or "failed") its last figures, one per job and name (a
        later run of the same one replaces them)."""
        rows: list[dict[str, Any]] = []

        def on_job(user, m):
            try:
                rows.append(job_metrics_dict(m.contents))
            except Exception:  # noqa: BLE001 - reported, never raised into C
                log.exception("reading a job's metrics")
            return 0
        fn = _cfg.JOB_METRICS_FN(on_job)
        with self._lock:
            self._check_open()
            rc = _native.lib().mcdc_runtime_metrics(self._handle, ctypes.cast(fn, ctypes.c_void_p),
                                                    None)
            ended = list(self._ended.values())
        if rc < 0:
            from .errors import error_for
            raise error_for(rc, "mssql_cdc.Runtime.metrics: the registry could not be copied "
                                "(out of memory)")
        return rows + sorted(ended, key=lambda m: m["id"])

    def stats(self) -> dict[str, int]:
        """The runtime's allocator accounting and probe counts (a
        ``RuntimeStats`` dict)."""
        st = _cfg.RuntimeStats()
        with self._lock:
            self._check_open()
            _native.lib().mcdc_runtime_get_stats(self._handle, ctypes.byref(st))
        return {name: getattr(st, name) for name, _ in _cfg.RuntimeStats._fields_}

    def close(self) -> None:
        """Destroys the runtime. Refused while a job runs in it (a
        ``RuntimeError`` saying how many); closing a closed runtime does
        nothing."""
        with self._lock:
            if self._closed:
                return
            if self._active:
                raise RuntimeError(f"mssql_cdc.Runtime: {self._active} job(s) still run in this "
                                   f"runtime; close it after they return")
            self._closed = True
            self._finalizer()

    # -- for the job functions --

    def _borrow(self) -> ctypes.c_void_p:
        """The handle for a job's config; the job counts as running until
        _release."""
        with self._lock:
            self._check_open()
            self._active += 1
            return self._handle

    def _release(self, handle: Any = None) -> None:
        """A job has returned: with its handle (a job that has one, before it
        is freed), its last figures are kept for metrics()."""
        last = None
        if handle is not None:
            buf = ctypes.create_string_buffer(_METRICS_BYTES)
            try:
                if _native.lib().mcdc_runtime_job_metrics(self._handle, handle, buf,
                                                           len(buf)):
                    last = job_metrics_dict(_cfg.JobMetrics.from_buffer(buf))
            except Exception:  # noqa: BLE001 - the job is released all the same
                log.exception("reading a job's last metrics")
        with self._lock:
            self._active -= 1
            if last is not None:
                self._ended[(last["job"], last["name"])] = last


def runtime_handle(runtime: "Runtime | None") -> Any:
    """Checks a job's runtime= argument; its handle (borrowed: release it)
    or None."""
    if runtime is None:
        return None
    if not isinstance(runtime, Runtime):
        raise TypeError(f"runtime must be a mssql_cdc.Runtime, not {type(runtime).__name__}")
    return runtime._borrow()
