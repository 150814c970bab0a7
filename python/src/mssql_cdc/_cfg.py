"""The structs of include/mssqlcdc.h as ctypes declares them: the job
configs, the values the jobs hand back, and the error detail.

This is the one copy in the repository (tests/interop/test_cfg_ctypes.py
checks it against the library's mcdc_*_cfg_init). The module needs ctypes
only: it loads nothing.

A config struct only grows at its end, under a new version number; each
class below is the newest version this package was written for (its
VERSION), and the library fills its defaults through mcdc_<name>_cfg_init.
Function pointers are c_void_p fields: a callback is assigned cast to one.
"""
import ctypes

c_int, c_bool, c_double, c_int32, c_int64, c_uint64, c_void_p, c_char_p, c_size_t = (
    ctypes.c_int, ctypes.c_bool, ctypes.c_double, ctypes.c_int32, ctypes.c_int64,
    ctypes.c_uint64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)

# MCDC_API_VERSION of the header these structs were written for.
API_VERSION = 6
ERROR_MESSAGE_MAX = 1024

# mcdc_log_level
LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3
# mcdc_trigger
TRIGGER_DEFAULT, TRIGGER_AVAILABLE_NOW, TRIGGER_PROCESSING_TIME, TRIGGER_ONCE = 0, 1, 2, 3
# mcdc_snapshot_mode, mcdc_on_data_loss
SNAPSHOT_FULL, SNAPSHOT_CHUNKED = 0, 1
ON_DATA_LOSS_FAIL, ON_DATA_LOSS_RESNAPSHOT = 0, 1
# mcdc_granularity
GRANULARITIES = {"hour": 0, "minute": 1, "day": 2}


class Error(ctypes.Structure):
    _fields_ = [("code", c_int), ("server_number", c_int), ("server_state", c_int),
                ("server_class", c_int), ("server_line", c_int),
                ("message", ctypes.c_char * ERROR_MESSAGE_MAX)]


class StreamCfg(ctypes.Structure):
    VERSION = 6
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
                ("progress_user", c_void_p), ("runtime", c_void_p)]


class SnapshotCfg(ctypes.Structure):
    VERSION = 5
    _fields_ = [("version", c_int), ("target", c_char_p), ("warehouse", c_char_p),
                ("resnapshot", c_bool), ("budget", c_void_p), ("log_fn", c_void_p),
                ("log_user", c_void_p), ("log_level", c_int),
                ("app_id", c_char_p), ("facts_table", c_char_p), ("progress_fn", c_void_p),
                ("progress_user", c_void_p), ("stop", c_void_p), ("runtime", c_void_p)]


class SeedCfg(ctypes.Structure):
    VERSION = 5
    _fields_ = [("version", c_int), ("target", c_char_p), ("warehouse", c_char_p),
                ("from_", c_char_p), ("as_of", c_char_p), ("allow_missing_columns", c_bool),
                ("reseed", c_bool), ("app_id", c_char_p), ("facts_table", c_char_p),
                ("log_fn", c_void_p), ("log_user", c_void_p), ("log_level", c_int),
                ("allow_empty", c_bool), ("progress_fn", c_void_p), ("progress_user", c_void_p),
                ("stop", c_void_p), ("runtime", c_void_p)]


class BackfillCfg(ctypes.Structure):
    VERSION = 3
    _fields_ = [("version", c_int), ("target", c_char_p), ("app_id", c_char_p),
                ("facts_table", c_char_p), ("warehouse", c_char_p), ("chunk_rows", c_int64),
                ("max_waves", c_int64), ("max_seconds", c_double),
                ("target_wave_seconds", c_double), ("has_min_headroom", c_bool),
                ("min_headroom_hours", c_double), ("isolation", c_char_p),
                ("budget", c_void_p), ("reserved1", c_void_p), ("log_fn", c_void_p),
                ("log_user", c_void_p), ("log_level", c_int), ("progress_fn", c_void_p),
                ("progress_user", c_void_p), ("runtime", c_void_p)]


class ApplyCfg(ctypes.Structure):
    VERSION = 6
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
                ("progress_user", c_void_p),
                # version 5
                ("scratch_dir", c_char_p), ("runtime", c_void_p)]


class ReconcileCfg(ctypes.Structure):
    VERSION = 5
    _fields_ = [("version", c_int), ("silver", c_char_p), ("bronze", c_char_p),
                ("control_table", c_char_p), ("facts_table", c_char_p),
                ("report_table", c_char_p), ("warehouse", c_char_p), ("keys", c_void_p),
                ("n_keys", c_int32), ("bucket_rows", c_int64), ("sample", c_double),
                ("has_sample_seed", c_bool), ("sample_seed", c_uint64),
                ("reserved1", c_void_p), ("log_fn", c_void_p), ("log_user", c_void_p),
                ("log_level", c_int), ("repair", c_bool), ("settle_seconds", c_int64),
                ("progress_fn", c_void_p), ("progress_user", c_void_p), ("runtime", c_void_p)]


class RepairCfg(ctypes.Structure):
    VERSION = 3
    _fields_ = [("version", c_int), ("bronze", c_char_p), ("facts_table", c_char_p),
                ("warehouse", c_char_p), ("run_id", c_char_p), ("keys_json", c_void_p),
                ("n_keys", c_size_t), ("report_table", c_char_p),
                ("reserved1", c_void_p), ("log_fn", c_void_p), ("log_user", c_void_p),
                ("log_level", c_int), ("stop", c_void_p), ("runtime", c_void_p)]


class RuntimeCfg(ctypes.Structure):
    VERSION = 1
    _fields_ = [("version", c_int), ("connections_max", c_int), ("encoder_threads_max", c_int),
                ("memory_bytes_max", c_int64), ("log_fn", c_void_p), ("log_user", c_void_p),
                ("probe_interval_ms", c_int64)]


# name (mcdc_<name>_cfg_init): struct
CONFIGS = {"stream": StreamCfg, "snapshot": SnapshotCfg, "seed": SeedCfg,
           "backfill": BackfillCfg, "apply": ApplyCfg, "reconcile": ReconcileCfg,
           "repair": RepairCfg, "runtime": RuntimeCfg}


# mcdc_job_metrics (version 1: the fields below; the library fills its own
# version, which only grows at the end). MCDC_JOB_ERROR_SLOTS slots of errors.
JOB_ERROR_SLOTS = 32


class JobMetrics(ctypes.Structure):
    VERSION = 1
    _fields_ = [("version", c_int), ("id", c_int64), ("handle", c_void_p), ("job", c_char_p),
                ("name", ctypes.c_char * 272), ("state", c_int), ("runs", c_int64),
                ("rows", c_int64), ("batches", c_int64), ("has_batch", c_bool),
                ("last_batch_seconds", c_double), ("end_lsn", ctypes.c_char * 24),
                ("has_end_commit", c_bool), ("end_commit_us", c_int64),
                ("ingestion_lag_seconds", c_double), ("has_retention_headroom", c_bool),
                ("retention_headroom_hours", c_double), ("has_verdict", c_bool),
                ("finalized_until_us", c_int64), ("verdict_moved_us", c_int64),
                ("errors", c_int64 * JOB_ERROR_SLOTS), ("last_status", c_int),
                ("last_error", ctypes.c_char * 512), ("progress_active", c_bool),
                ("progress_job", c_char_p), ("progress_phase", c_char_p),
                ("progress_rows_done", c_int64), ("progress_rows_total", c_int64),
                ("progress_parts_done", c_int64), ("progress_parts_total", c_int64)]


class RuntimeStats(ctypes.Structure):
    _fields_ = [("alloc_calls", c_int64), ("live_bytes", c_int64), ("peak_bytes", c_int64),
                ("probe_rounds", c_int64), ("probe_queries", c_int64)]


class Offset(ctypes.Structure):
    _fields_ = [("lsn", ctypes.c_char * 24), ("has_commit_ts", c_bool), ("commit_us", c_int64)]


class Verdict(ctypes.Structure):
    _fields_ = [("found", c_bool), ("moved", c_bool), ("finalized_until_us", c_int64),
                ("updated_at_us", c_int64), ("end_lsn", ctypes.c_char * 32)]


class BatchReport(ctypes.Structure):
    _fields_ = [("batch_id", c_int64), ("replayed", c_bool), ("bronze_skipped", c_bool),
                ("rows", c_int64), ("deletes", c_int64), ("inserts", c_int64),
                ("updates", c_int64), ("start_lsn", ctypes.c_char * 24),
                ("end_lsn", ctypes.c_char * 24), ("end_commit_us", c_int64),
                ("has_end_commit", c_bool), ("duration_ms", c_double), ("rows_per_s", c_double),
                ("ingestion_lag_seconds", c_double), ("has_verdict", c_bool),
                ("finalized_until_us", c_int64)]


class Progress(ctypes.Structure):
    _fields_ = [("version", c_int), ("job", c_char_p), ("phase", c_char_p),
                ("rows_done", c_int64), ("rows_total", c_int64), ("rows_estimated", c_bool),
                ("parts_name", c_char_p), ("parts_done", c_int64), ("parts_total", c_int64),
                ("bytes_done", c_int64), ("phase_ms", c_int64), ("elapsed_ms", c_int64),
                ("done", c_bool),
                # version 2
                ("phase_number", c_int64), ("job_parts_name", c_char_p),
                ("job_parts_done", c_int64), ("job_parts_total", c_int64)]


class ArrowArrayStream(ctypes.Structure):
    """struct ArrowArrayStream: five pointers; pyarrow moves it on import."""
    _fields_ = [("get_schema", c_void_p), ("get_next", c_void_p), ("get_last_error", c_void_p),
                ("release", c_void_p), ("private_data", c_void_p)]


class ArrowSchema(ctypes.Structure):
    _fields_ = [("format", c_char_p), ("name", c_char_p), ("metadata", c_char_p),
                ("flags", c_int64), ("n_children", c_int64), ("children", c_void_p),
                ("dictionary", c_void_p), ("release", c_void_p), ("private_data", c_void_p)]


LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)
PROGRESS_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(Progress))
REPORT_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(BatchReport))
JOB_METRICS_FN = ctypes.CFUNCTYPE(c_int, c_void_p, ctypes.POINTER(JobMetrics))
