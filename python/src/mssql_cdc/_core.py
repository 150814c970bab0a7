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
    done = threading.Event()

    def target() -> None:
        try:
            box["rc"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["exc"] = e
        finally:
            done.set()

    thread = threading.Thread(target=target, name=f"mssql_cdc {what}", daemon=True)
    thread.start()
    interrupted = False
    try:
        _wait(done)
    except KeyboardInterrupt:
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
