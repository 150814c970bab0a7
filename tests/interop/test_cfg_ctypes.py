"""The configs' defaults as a binding sees them: build/libmssqlcdc.so loaded
with ctypes, which cannot see the header's _INIT macros, and each
mcdc_<name>_cfg_init called for every version the library knows. The
structs are the Python package's mirrors of the header's."""
import ctypes
import importlib.util
import os

import pytest

from conftest import BUILD, ROOT

# The structs are the Python package's (python/src/mssql_cdc/_cfg.py), the
# one copy of them in the repository, loaded by path: the package's name is
# the reference's, which .venv holds.
_spec = importlib.util.spec_from_file_location(
    "mcdc_python_cfg", os.path.join(ROOT, "python", "src", "mssql_cdc", "_cfg.py"))
_cfg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cfg)
Error, StreamCfg, SnapshotCfg, SeedCfg, BackfillCfg, ApplyCfg, ReconcileCfg, RepairCfg = (
    _cfg.Error, _cfg.StreamCfg, _cfg.SnapshotCfg, _cfg.SeedCfg, _cfg.BackfillCfg, _cfg.ApplyCfg,
    _cfg.ReconcileCfg, _cfg.RepairCfg)
RuntimeCfg = _cfg.RuntimeCfg
c_int, c_char_p, c_void_p = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p

MCDC_E_INVALID = -1
LOG_WARN = _cfg.LOG_WARN


# name: (struct, newest version, the first field of each later version,
#        the defaults the header's _INIT macro gives)
CONFIGS = {
    "stream": (StreamCfg, 6, ["budget", "on_data_loss", "snapshot_on_switch", "progress_fn",
                              "runtime"],
               {"trigger": 0, "granularity": 0, "log_level": LOG_WARN, "snapshot": 0,
                "on_data_loss": 0, "resnapshot_interval_days": 7.0, "bootstrap": False}),
    "snapshot": (SnapshotCfg, 5, ["app_id", "progress_fn", "stop", "runtime"],
                 {"resnapshot": False, "log_level": LOG_WARN}),
    "seed": (SeedCfg, 5, ["allow_empty", "progress_fn", "stop", "runtime"],
             {"log_level": LOG_WARN, "reseed": False, "allow_empty": False}),
    "backfill": (BackfillCfg, 3, ["progress_fn", "runtime"],
                 {"chunk_rows": 0, "target_wave_seconds": -1.0, "max_seconds": 0.0,
                  "log_level": LOG_WARN}),
    "apply": (ApplyCfg, 6, ["scd_type", "deletion_vectors", "progress_fn", "scratch_dir",
                            "runtime"],
              {"trigger": 3, "granularity": 0, "memory_mb": 0, "file_rows": 0,
               "log_level": LOG_WARN, "scd_type": 0, "deletion_vectors": 0}),
    "reconcile": (ReconcileCfg, 5, ["repair", "settle_seconds", "progress_fn", "runtime"],
                  {"sample": -1.0, "bucket_rows": 0, "log_level": LOG_WARN, "repair": False,
                   "settle_seconds": 0}),
    "repair": (RepairCfg, 3, ["stop", "runtime"], {"log_level": LOG_WARN, "n_keys": 0}),
    "runtime": (RuntimeCfg, 1, [], {"connections_max": 0, "encoder_threads_max": 0,
                                    "memory_bytes_max": 0, "probe_interval_ms": 0}),
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


def test_the_package_mirrors_the_header_s_newest_versions():
    """A struct, a config version or the API version the header moves on
    to is mirrored in python/src/mssql_cdc/_cfg.py too (and the version its
    cfg_init asks for)."""
    import re
    header = open(os.path.join(ROOT, "include", "mssqlcdc.h")).read()
    api = re.search(r"#define MCDC_API_VERSION (\d+)", header)
    assert api and int(api.group(1)) == _cfg.API_VERSION
    for name, struct in _cfg.CONFIGS.items():
        m = re.search(rf"#define MCDC_{name.upper()}_CFG_VERSION (\d+)", header)
        assert m and int(m.group(1)) == struct.VERSION == CONFIGS[name][1], name
