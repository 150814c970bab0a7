"""Loading libmssqlcdc with ctypes, once, on first use (never at import:
Spark forks its Python workers after the import, and the library's TLS and
FreeTDS state must be set up in the process that uses it).

Where it is looked for, in order:
1. the path given to ``load_library(path)`` before the first use;
2. the environment variable ``MSSQL_CDC_LIBRARY`` (a path);
3. the copy the package carries next to its modules,
   ``libmssqlcdc.so.<major>`` (a wheel puts it there: python/hatch_build.py);
4. a development fallback: ``build/libmssqlcdc.so.<major>`` of the source
   tree the package was imported from (``python/src/mssql_cdc`` in the repo),
   then the system's loader path (``make install``).
"""
from __future__ import annotations

import ctypes
import os
import threading

from . import _cfg
from ._cfg import Error, c_bool, c_char_p, c_int, c_int64, c_size_t, c_void_p

# The SONAME's major (libmssqlcdc.so.<major>): another major changed a layout
# or a signature this package relies on.
ABI_MAJOR = 1
SONAME = f"libmssqlcdc.so.{ABI_MAJOR}"

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_path: str | None = None
_requested: str | None = None

_E = ctypes.POINTER(Error)
_VP = ctypes.POINTER(c_void_p)

# name: (restype, argtypes); every function the package calls
_PROTOTYPES = {
    "mcdc_version": (c_char_p, []),
    "mcdc_status_name": (c_char_p, [c_int]),
    "mcdc_status_kind": (c_char_p, [c_int]),
    "mcdc_log_to_thread": (None, [c_void_p, c_void_p, c_int]),
    "mcdc_opts_create": (c_int, [_VP, _E]),
    "mcdc_opts_free": (None, [c_void_p]),
    "mcdc_opts_set": (c_int, [c_void_p, c_char_p, c_char_p, ctypes.POINTER(c_bool), _E]),
    "mcdc_opts_check_required": (c_int, [c_void_p, _E]),
    "mcdc_opts_known_names": (ctypes.POINTER(c_char_p), []),
    "mcdc_opts_storage_names": (ctypes.POINTER(c_char_p), []),
    "mcdc_lsn_value_parse": (c_int, [c_void_p, c_char_p, _E]),
    "mcdc_ts_parse": (c_int, [ctypes.POINTER(c_int64), c_char_p, _E]),
    "mcdc_ts_format": (c_int, [c_char_p, c_size_t, c_int64, c_int, _E]),
    "mcdc_granularity_parse": (c_int, [c_char_p, ctypes.POINTER(c_int), _E]),
    "mcdc_verdict_read_opts": (c_int, [ctypes.POINTER(_cfg.Verdict), c_void_p, c_char_p,
                                       c_char_p, c_char_p, _E]),
    "mcdc_verdict_advance_opts": (c_int, [ctypes.POINTER(_cfg.Verdict), c_void_p, c_char_p,
                                          c_char_p, c_char_p, c_char_p, c_int64, c_int, _E]),
    "mcdc_verdict_open_snapshot_opts": (c_int, [ctypes.POINTER(c_bool), c_char_p, c_void_p,
                                                c_char_p, c_char_p, c_char_p, _E]),
    "mcdc_verdict_is_final_opts": (c_int, [ctypes.POINTER(c_bool), c_void_p, c_char_p, c_char_p,
                                           c_char_p, c_int64, _E]),
    "mcdc_stream_create": (c_int, [_VP, c_void_p, ctypes.POINTER(_cfg.StreamCfg), _E]),
    "mcdc_stream_run": (c_int, [c_void_p, c_void_p, c_void_p, _E]),
    "mcdc_stream_request_stop": (None, [c_void_p]),
    "mcdc_stream_free": (None, [c_void_p]),
    "mcdc_snapshot_take": (c_int, [ctypes.POINTER(_cfg.Offset), ctypes.POINTER(c_int64),
                                   ctypes.POINTER(c_bool), c_void_p,
                                   ctypes.POINTER(_cfg.SnapshotCfg), _E]),
    "mcdc_seed": (c_int, [ctypes.POINTER(_cfg.Offset), ctypes.POINTER(c_int64),
                          ctypes.POINTER(c_bool), c_void_p, ctypes.POINTER(_cfg.SeedCfg), _E]),
    "mcdc_backfill_create": (c_int, [_VP, c_void_p, ctypes.POINTER(_cfg.BackfillCfg), _E]),
    "mcdc_backfill_run": (c_int, [c_void_p, c_void_p, _E]),
    "mcdc_backfill_request_stop": (None, [c_void_p]),
    "mcdc_backfill_free": (None, [c_void_p]),
    "mcdc_backfill_status_json": (c_int, [c_char_p, c_size_t, c_void_p, _E]),
    "mcdc_apply_create": (c_int, [_VP, c_void_p, ctypes.POINTER(_cfg.ApplyCfg), _E]),
    "mcdc_apply_run": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, _E]),
    "mcdc_apply_request_stop": (None, [c_void_p]),
    "mcdc_apply_free": (None, [c_void_p]),
    "mcdc_apply_result_json": (c_int, [c_char_p, c_size_t, c_void_p, _E]),
    "mcdc_reconcile_create": (c_int, [_VP, c_void_p, ctypes.POINTER(_cfg.ReconcileCfg), _E]),
    "mcdc_reconcile_run": (c_int, [c_void_p, c_void_p, _E]),
    "mcdc_reconcile_request_stop": (None, [c_void_p]),
    "mcdc_reconcile_free": (None, [c_void_p]),
    "mcdc_stop_create": (c_int, [_VP, _E]),
    "mcdc_stop_request": (None, [c_void_p]),
    "mcdc_stop_free": (None, [c_void_p]),
    "mcdc_reconcile_result_json": (c_int, [c_char_p, c_size_t, c_void_p, _E]),
    "mcdc_repair_run": (c_int, [c_void_p, ctypes.POINTER(_cfg.RepairCfg), c_void_p, _E]),
    "mcdc_repair_result_json": (c_int, [c_char_p, c_size_t, c_void_p, _E]),
    "mcdc_table_rows_json": (c_int, [c_char_p, c_char_p, c_void_p, c_void_p, _E]),
    "mcdc_range_plan_create": (c_int, [_VP, c_void_p, c_void_p, c_void_p, c_int, _E]),
    "mcdc_range_plan_free": (None, [c_void_p]),
    "mcdc_range_plan_count": (c_size_t, [c_void_p]),
    "mcdc_range_plan_token": (c_char_p, [c_void_p, c_size_t]),
    "mcdc_range_plan_schema": (c_int, [ctypes.POINTER(_cfg.ArrowSchema), c_void_p, _E]),
    "mcdc_range_read": (c_int, [ctypes.POINTER(_cfg.ArrowArrayStream), c_void_p, c_char_p, _E]),
    "mcdc_snapshot_plan_create": (c_int, [_VP, c_void_p, c_int64, _E]),
    "mcdc_snapshot_plan_chunks": (c_int, [_VP, c_void_p, c_char_p, c_char_p, c_char_p, _E]),
    "mcdc_snapshot_plan_from_extent": (c_int, [_VP, c_void_p, c_char_p, c_char_p, c_int64,
                                               _E]),
    "mcdc_snapshot_plan_extent": (c_char_p, [c_void_p]),
    "mcdc_snapshot_plan_free": (None, [c_void_p]),
    "mcdc_snapshot_plan_count": (c_size_t, [c_void_p]),
    "mcdc_snapshot_plan_token": (c_char_p, [c_void_p, c_size_t]),
    "mcdc_snapshot_plan_lsn": (c_char_p, [c_void_p]),
    "mcdc_snapshot_plan_schema": (c_int, [ctypes.POINTER(_cfg.ArrowSchema), c_void_p, _E]),
    "mcdc_snapshot_read": (c_int, [ctypes.POINTER(_cfg.ArrowArrayStream), c_void_p, c_char_p,
                                   c_char_p, _E]),
    "mcdc_source_open": (c_int, [_VP, c_void_p, _E]),
    "mcdc_source_free": (None, [c_void_p]),
    "mcdc_source_initial_lsn": (c_int, [c_void_p, c_char_p, c_void_p, _E]),
    "mcdc_source_max_lsn": (c_int, [c_void_p, c_void_p, _E]),
    "mcdc_source_nth_commit_after": (c_int, [c_void_p, c_void_p, c_int64, c_void_p,
                                             ctypes.POINTER(c_bool), _E]),
    "mcdc_source_commit_time": (c_int, [c_void_p, c_void_p, ctypes.POINTER(c_int64),
                                        ctypes.POINTER(c_bool), _E]),
    "mcdc_source_commit_at": (c_int, [c_void_p, c_int64, c_void_p, ctypes.POINTER(c_bool),
                                      _E]),
    "mcdc_source_schema": (c_int, [ctypes.POINTER(_cfg.ArrowSchema), c_void_p, _E]),
    "mcdc_source_batch_end": (c_int, [c_void_p, c_void_p, c_void_p, ctypes.POINTER(c_bool), _E]),
    "mcdc_source_plan_batch": (c_int, [_VP, c_void_p, c_void_p, c_void_p, c_int, _E]),
    "mcdc_range_plan_events_json": (c_char_p, [c_void_p]),
    "mcdc_runtime_create": (c_int, [_VP, ctypes.POINTER(_cfg.RuntimeCfg), _E]),
    "mcdc_runtime_destroy": (None, [c_void_p]),
    "mcdc_runtime_set_storage_options": (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_char_p),
                                                 ctypes.POINTER(c_char_p), c_size_t, _E]),
    "mcdc_runtime_get_stats": (None, [c_void_p, ctypes.POINTER(_cfg.RuntimeStats)]),
    "mcdc_runtime_metrics": (c_int, [c_void_p, c_void_p, c_void_p]),
    "mcdc_runtime_job_metrics": (c_bool, [c_void_p, c_void_p, c_void_p, c_size_t]),
    "mcdc_job_state_name": (c_char_p, [c_int]),
}
for _name in _cfg.CONFIGS:
    _PROTOTYPES[f"mcdc_{_name}_cfg_init"] = (c_int, [c_void_p, c_int, _E])


def load_library(path: str | os.PathLike | None = None) -> str:
    """Load libmssqlcdc now, from ``path`` when given, and return the path
    loaded. Call it before the first use to choose the library; once one is
    loaded, another path is refused (a process holds one copy)."""
    global _requested
    with _lock:
        want = os.fspath(path) if path is not None else None
        if _lib is not None:
            if want is not None and os.path.realpath(want) != os.path.realpath(_path or ""):
                raise RuntimeError(f"mssql_cdc: libmssqlcdc is already loaded from {_path}; "
                                   f"load_library({want!r}) must come before the first use")
            return _path or ""
        if want is not None:
            _requested = want
    lib()
    return _path or ""


def library_path() -> str:
    """The path of the loaded library (loading it if needed)."""
    lib()
    return _path or ""


def _candidates() -> list[tuple[str, str]]:
    """(path, where it came from), in the order tried."""
    if _requested is not None:
        return [(_requested, "load_library()")]
    env = os.environ.get("MSSQL_CDC_LIBRARY")
    if env:
        return [(env, "MSSQL_CDC_LIBRARY")]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [(os.path.join(here, SONAME), "the package's own copy")]
    # python/src/mssql_cdc -> the repo's build/
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    if os.path.exists(os.path.join(repo, "include", "mssqlcdc.h")):
        out.append((os.path.join(repo, "build", SONAME), "the source tree's build"))
    out.append((SONAME, "the system's library path"))
    return out


# The threads whose messages outside jobs (positions, plans, verdicts) the
# library passes to the "mssql_cdc" logger (mcdc_log_to_thread is per thread).
_routed = threading.local()


def lib() -> ctypes.CDLL:
    """The loaded library, loaded and checked on the first call; the
    calling thread's messages outside jobs go to the "mssql_cdc" logger."""
    if _lib is None:
        _load()
    if not getattr(_routed, "level", None):
        from ._core import route_log
        _routed.level = route_log(_lib)
    return _lib  # type: ignore[return-value]


def _load() -> ctypes.CDLL:
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path, where in _candidates():
            explicit = where in ("load_library()", "MSSQL_CDC_LIBRARY")
            if os.sep in path and not os.path.exists(path):
                if explicit:
                    raise OSError(f"mssql_cdc: {where} names {path}, which does not exist")
                tried.append(f"{path} ({where}): not there")
                continue
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                if explicit:
                    raise OSError(f"mssql_cdc: cannot load {path} ({where}): {e}") from None
                tried.append(f"{path} ({where}): {e}")
                continue
            _check(handle, path, where)
            _lib, _path = handle, _resolved(handle, path)
            return _lib
        raise OSError("mssql_cdc: libmssqlcdc not found. Tried:\n  " + "\n  ".join(tried) +
                      "\nInstall the package with its library (the wheel make python-wheel builds, "
                      "or make then pip install ./python), call mssql_cdc.load_library(path), or set MSSQL_CDC_LIBRARY")


def _resolved(handle: ctypes.CDLL, path: str) -> str:
    if os.sep in path:
        return os.path.realpath(path)
    return path


def _check(handle: ctypes.CDLL, path: str, where: str) -> None:
    """Declares the prototypes and proves the library is one this package
    can drive: every function present, the same SONAME major, and each
    config version the package's structs are written for known to it."""
    missing = [n for n in _PROTOTYPES if not hasattr(handle, n)]
    if missing:
        raise OSError(f"mssql_cdc: {path} ({where}) is not a libmssqlcdc this package can use: "
                      f"it lacks {', '.join(missing[:5])}{'...' if len(missing) > 5 else ''}. "
                      f"Rebuild it (make) or install the package with its own copy")
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(handle, name)
        fn.restype, fn.argtypes = restype, argtypes
    version = (handle.mcdc_version() or b"").decode()
    major = version.split(".")[0]
    if major != str(ABI_MAJOR):
        raise OSError(f"mssql_cdc: {path} ({where}) is libmssqlcdc {version}; this package needs "
                      f"version {ABI_MAJOR}.x (API {_cfg.API_VERSION})")
    for name, struct in _cfg.CONFIGS.items():
        buf = struct()
        err = Error()
        rc = getattr(handle, f"mcdc_{name}_cfg_init")(ctypes.byref(buf), struct.VERSION,
                                                     ctypes.byref(err))
        if rc != 0:
            raise OSError(f"mssql_cdc: {path} ({where}) is libmssqlcdc {version}, older than "
                          f"this package needs (API {_cfg.API_VERSION}): its "
                          f"mcdc_{name}_cfg_init refuses version {struct.VERSION} "
                          f"({err.message.decode(errors='replace')}). Install the library this "
                          f"package was built with")


def version() -> str:
    """The loaded library's version (mcdc_version())."""
    return lib().mcdc_version().decode()


def init_cfg(struct_type):
    """A config of the newest version this package knows, with the
    library's defaults."""
    cfg = struct_type()
    err = Error()
    name = next(n for n, t in _cfg.CONFIGS.items() if t is struct_type)
    rc = getattr(lib(), f"mcdc_{name}_cfg_init")(ctypes.byref(cfg), struct_type.VERSION,
                                                ctypes.byref(err))
    if rc:
        from .errors import raise_error
        raise_error(rc, err)
    return cfg
