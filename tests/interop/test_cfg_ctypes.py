"""The configs' defaults as a binding sees them: build/libmssqlcdc.so loaded
with ctypes, which cannot see the header's _INIT macros, and each
mcdc_<name>_cfg_init called for every version the library knows. The
structs below are the header's, as a binding would declare them."""
import ctypes
import os

import pytest

from conftest import BUILD, ROOT

c_int, c_bool, c_double, c_int32, c_int64, c_uint64, c_void_p, c_char_p = (
    ctypes.c_int, ctypes.c_bool, ctypes.c_double, ctypes.c_int32, ctypes.c_int64,
    ctypes.c_uint64, ctypes.c_void_p, ctypes.c_char_p)

MCDC_E_INVALID = -1
LOG_WARN = 1


class Error(ctypes.Structure):
    _fields_ = [("code", c_int), ("server_number", c_int), ("server_state", c_int),
                ("server_class", c_int), ("server_line", c_int),
                ("message", ctypes.c_char * 1024)]


class StreamCfg(ctypes.Structure):
    _fields_ = [("version", c_int), ("target", c_char_p), ("app_id", c_char_p),
                ("checkpoint", c_char_p), ("facts_table", c_char_p),
                ("control_table", c_char_p), ("warehouse", c_char_p), ("query_name", c_char_p),
                ("trigger", c_int), ("processing_time_ms", c_int64), ("granularity", c_int),
                ("max_batches", c_int64),
                ("budget", c_void_p), ("reserved1", c_void_p), ("reserved2", c_int64),
                ("log_fn", c_void_p), ("log_user", c_void_p), ("log_level", c_int),
                ("bootstrap", c_bool), ("snapshot", c_int),
                ("on_data_loss", c_int), ("resnapshot_interval_days", c_double),
                ("snapshot_on_switch", c_bool), ("progress_fn", c_void_p),
                ("progress_user", c_void_p)]


class SnapshotCfg(ctypes.Structure):
    _fields_ = [("version", c_int), ("target", c_char_p), ("warehouse", c_char_p),
                ("resnapshot", c_bool), ("budget", c_void_p), ("log_fn", c_void_p),
                ("log_user", c_void_p), ("log_level", c_int),
                ("app_id", c_char_p), ("facts_table", c_char_p), ("progress_fn", c_void_p),
                ("progress_user", c_void_p)]


class SeedCfg(ctypes.Structure):
    _fields_ = [("version", c_int), ("target", c_char_p), ("warehouse", c_char_p),
                ("from_", c_char_p), ("as_of", c_char_p), ("allow_missing_columns", c_bool),
                ("reseed", c_bool), ("app_id", c_char_p), ("facts_table", c_char_p),
                ("log_fn", c_void_p), ("log_user", c_void_p), ("log_level", c_int),
                ("allow_empty", c_bool), ("progress_fn", c_void_p), ("progress_user", c_void_p)]


class BackfillCfg(ctypes.Structure):
    _fields_ = [("version", c_int), ("target", c_char_p), ("app_id", c_char_p),
                ("facts_table", c_char_p), ("warehouse", c_char_p), ("chunk_rows", c_int64),
                ("max_waves", c_int64), ("max_seconds", c_double),
                ("target_wave_seconds", c_double), ("has_min_headroom", c_bool),
                ("min_headroom_hours", c_double), ("isolation", c_char_p),
                ("budget", c_void_p), ("reserved1", c_void_p), ("log_fn", c_void_p),
                ("log_user", c_void_p), ("log_level", c_int), ("progress_fn", c_void_p),
                ("progress_user", c_void_p)]


class ApplyCfg(ctypes.Structure):
    _fields_ = [("version", c_int), ("bronze", c_char_p), ("target", c_char_p),
                ("control_table", c_char_p), ("facts_table", c_char_p),
                ("warehouse", c_char_p), ("capture_instance", c_char_p), ("keys", c_void_p),
                ("n_keys", c_int32), ("granularity", c_int), ("trigger", c_int),
                ("processing_time_ms", c_int64), ("max_passes", c_int64),
                ("memory_mb", c_int64), ("file_rows", c_int64), ("reserved1", c_void_p),
                ("log_fn", c_void_p), ("log_user", c_void_p), ("log_level", c_int),
                ("scd_type", c_int32), ("track_history_columns", c_void_p),
                ("n_track_history_columns", c_int32),
                ("deletion_vectors", c_int32), ("progress_fn", c_void_p),
                ("progress_user", c_void_p), ("scratch_dir", c_char_p)]


class ReconcileCfg(ctypes.Structure):
    _fields_ = [("version", c_int), ("silver", c_char_p), ("bronze", c_char_p),
                ("control_table", c_char_p), ("facts_table", c_char_p),
                ("report_table", c_char_p), ("warehouse", c_char_p), ("keys", c_void_p),
                ("n_keys", c_int32), ("bucket_rows", c_int64), ("sample", c_double),
                ("has_sample_seed", c_bool), ("sample_seed", c_uint64),
                ("reserved1", c_void_p), ("log_fn", c_void_p), ("log_user", c_void_p),
                ("log_level", c_int), ("repair", c_bool), ("settle_seconds", c_int64),
                ("progress_fn", c_void_p), ("progress_user", c_void_p)]


class RepairCfg(ctypes.Structure):
    _fields_ = [("version", c_int), ("bronze", c_char_p), ("facts_table", c_char_p),
                ("warehouse", c_char_p), ("run_id", c_char_p), ("keys_json", c_void_p),
                ("n_keys", ctypes.c_size_t), ("report_table", c_char_p),
                ("reserved1", c_void_p), ("log_fn", c_void_p), ("log_user", c_void_p),
                ("log_level", c_int)]


# name: (struct, newest version, the first field of each later version,
#        the defaults the header's _INIT macro gives)
CONFIGS = {
    "stream": (StreamCfg, 5, ["budget", "on_data_loss", "snapshot_on_switch", "progress_fn"],
               {"trigger": 0, "granularity": 0, "log_level": LOG_WARN, "snapshot": 0,
                "on_data_loss": 0, "resnapshot_interval_days": 7.0, "bootstrap": False}),
    "snapshot": (SnapshotCfg, 3, ["app_id", "progress_fn"],
                 {"resnapshot": False, "log_level": LOG_WARN}),
    "seed": (SeedCfg, 3, ["allow_empty", "progress_fn"],
             {"log_level": LOG_WARN, "reseed": False, "allow_empty": False}),
    "backfill": (BackfillCfg, 2, ["progress_fn"],
                 {"chunk_rows": 0, "target_wave_seconds": -1.0, "max_seconds": 0.0,
                  "log_level": LOG_WARN}),
    "apply": (ApplyCfg, 5, ["scd_type", "deletion_vectors", "progress_fn", "scratch_dir"],
              {"trigger": 3, "granularity": 0, "memory_mb": 0, "file_rows": 0,
               "log_level": LOG_WARN, "scd_type": 0, "deletion_vectors": 0}),
    "reconcile": (ReconcileCfg, 4, ["repair", "settle_seconds", "progress_fn"],
                  {"sample": -1.0, "bucket_rows": 0, "log_level": LOG_WARN, "repair": False,
                   "settle_seconds": 0}),
    "repair": (RepairCfg, 1, [], {"log_level": LOG_WARN, "n_keys": 0}),
}


@pytest.fixture(scope="module")
def lib():
    so = os.path.join(BUILD, "libmssqlcdc.so")
    if not os.path.exists(so):
        pytest.fail(f"{so} is not built: run make")
    lib = ctypes.CDLL(so)
    for name in CONFIGS:
        fn = getattr(lib, f"mcdc_{name}_cfg_init")
        fn.argtypes = [c_void_p, c_int, ctypes.POINTER(Error)]
        fn.restype = c_int
    return lib


def version_bytes(struct, later, version):
    """The bytes a version holds: up to the first field a later version added."""
    if version <= len(later):
        return getattr(struct, later[version - 1]).offset
    return ctypes.sizeof(struct)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cfg_init_gives_the_macro_defaults_for_every_version(lib, name):
    struct, newest, later, defaults = CONFIGS[name]
    init = getattr(lib, f"mcdc_{name}_cfg_init")
    for version in range(1, newest + 1):
        # a buffer larger than the struct, every byte set: what the call
        # writes past the version's end shows
        size = ctypes.sizeof(struct) + 64
        buf = ctypes.create_string_buffer(b"\xa5" * size, size)
        err = Error()
        assert init(buf, version, ctypes.byref(err)) == 0, err.message
        end = version_bytes(struct, later, version)
        assert buf.raw[end:size] == b"\xa5" * (size - end), f"{name} v{version} wrote past {end}"
        cfg = struct.from_buffer_copy(buf.raw[:ctypes.sizeof(struct)])
        assert cfg.version == version
        for field, value in defaults.items():
            if getattr(struct, field).offset < end:
                assert getattr(cfg, field) == value, f"{name} v{version}: {field}"
        # every pointer the version holds is NULL
        for field, ftype in struct._fields_:
            if ftype in (c_char_p, c_void_p) and getattr(struct, field).offset < end:
                assert getattr(cfg, field) in (None, 0), f"{name} v{version}: {field}"
    err = Error()
    full = struct()
    assert init(ctypes.byref(full), newest + 1, ctypes.byref(err)) == MCDC_E_INVALID
    assert err.code == MCDC_E_INVALID and b"_CFG_VERSION" in err.message
    assert init(None, newest, ctypes.byref(err)) == MCDC_E_INVALID


def test_the_test_hooks_are_exported_but_not_in_the_configs(lib):
    """crash_at and retry_backoff_ms left the public structs for
    mssqlcdc_testing.h's setters, which the library exports."""
    assert hasattr(lib, "mcdc_opts_set_crash_at")
    assert hasattr(lib, "mcdc_opts_set_retry_backoff_ms")
    header = open(os.path.join(ROOT, "include", "mssqlcdc.h")).read()
    assert "crash_at;" not in header and "retry_backoff_ms;" not in header
