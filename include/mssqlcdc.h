/*
 * mssqlcdc.h - the public interface of libmssqlcdc.
 *
 * One header, one prefix (mcdc_); the test hooks alone are in
 * mssqlcdc_testing.h. Handles are opaque; every function that can fail
 * returns an int status (MCDC_OK or a negative mcdc_status) and writes the
 * detail into a caller-owned mcdc_error (which may be NULL). Out-parameters
 * come first, after the handle a call works on (mcdc_opts_set,
 * mcdc_granularity_parse, mcdc_apply_run and mcdc_repair_run take theirs
 * after the inputs). Free functions accept NULL.
 *
 * This header compiles as C17 and as C++.
 */
#ifndef MSSQLCDC_H
#define MSSQLCDC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MCDC_VERSION_MAJOR 1
#define MCDC_VERSION_MINOR 0
#define MCDC_VERSION_PATCH 0
#define MCDC_VERSION_STRING "1.0.0"
/*
 * Bumped whenever a public struct, signature or function set changes. The
 * binary interface keeps older callers working: a configuration struct only
 * grows, at its end, under a new version number (its `version` field), and
 * the library reads exactly the bytes the caller's version holds, taking the
 * defaults for the rest; a field no longer used stays in its place as a
 * reserved slot that must be left zero. The SONAME's number
 * (libmssqlcdc.so.<major>, the major of MCDC_VERSION_STRING) changes only
 * when a layout or signature changes in a way an older caller cannot
 * survive: a field moved or removed, a function's parameters changed.
 * 3: the test hooks left the configs (their slots reserved;
 *    mssqlcdc_testing.h sets them), mcdc_*_cfg_init added, layouts unchanged;
 *    the seed config's version 2 (allow_empty), the reconcile config's
 *    version 3 (settle_seconds) and its result's duplicate_target, verified
 *    and rechecks.
 * 4: progress (mcdc_progress, mcdc_progress_fn): progress_fn and
 *    progress_user at the end of the stream (version 5), snapshot (3), seed
 *    (3), backfill (2), apply (4) and reconcile (4) configs.
 * 5: storage options on mcdc_opts (mcdc_opts_storage_names), and the calls
 *    that open tables without a job taking opts: mcdc_verdict_*_opts,
 *    mcdc_table_rows_json_opts; the apply config's version 5 (scratch_dir);
 *    a source's positions (mcdc_source: max_lsn, the n-th commit after an
 *    LSN, commit times, startingLsn) for engines that plan their own
 *    batches; for many tables in one process, mcdc_capture_instances_find
 *    and mcdc_facts_table_create; the capture probe (mcdc_capture_probe_*,
 *    mcdc_capture_health) and the batch report's retention headroom (added
 *    at its end) came with start-many's metrics; a stream's progress
 *    function hears one report of job "stream" once it streams (serve's
 *    readiness; no layout changed). Later, in the same version: the
 *    runtime (mcdc_runtime_create/destroy, mcdc_runtime_cfg,
 *    mcdc_runtime_cfg_init, mcdc_runtime_get_stats) and the runtime field
 *    of the stream config (version 6), the backfill config (3) and the
 *    apply config (6) and the reconcile config (5); mcdc_stream_caught_up;
 *    batches planned with the
 *    stream's guards for engines that plan their own (the capture-instance
 *    cut, DDL checks, retention guard): mcdc_source_schema,
 *    mcdc_source_batch_end, mcdc_source_plan_batch and
 *    mcdc_range_plan_events_json (their tokens are range tokens of version
 *    2, which an older library refuses); mcdc_log_to_thread (messages of
 *    calls outside jobs to a log function); stop requests for the jobs
 *    without a handle (mcdc_stop_*: the snapshot config's version 4, the
 *    seed's 4, the repair's 2) and mcdc_reconcile_request_stop; the
 *    runtime field of the snapshot config (version 5), the seed config (5)
 *    and the repair config (3); storage options per scheme on the runtime
 *    (mcdc_runtime_set_storage_options); the runtime's metrics registry
 *    (mcdc_job_metrics, mcdc_runtime_metrics, mcdc_runtime_job_metrics,
 *    mcdc_job_state_name); the change tables' row counts
 *    (mcdc_capture_probe_change_rows); delta-rs's other spellings of the
 *    storage options (mcdc_opts_storage_name).
 * 6: the results a caller hands a job carry their size (see "Results"
 *    below): size_t size, the first field of mcdc_apply_result,
 *    mcdc_backfill_status, mcdc_reconcile_result and mcdc_repair_result
 *    (the one inside mcdc_reconcile_result too), every other field moved
 *    after it. An older caller cannot survive that move, so the SONAME's
 *    number went from 0 to 1 (MCDC_VERSION_STRING 1.0.0); from here on
 *    these results grow at their end as the configs do. With them,
 *    mcdc_runtime_job_metrics takes the size of the caller's struct.
 *    Later, in the same version: mcdc_job_metrics version 2 (a stream's
 *    probe and chunked_snapshot, at its end).
 */
#define MCDC_API_VERSION 6

#if defined(__GNUC__) || defined(__clang__)
#define MCDC_API __attribute__((visibility("default")))
#else
#define MCDC_API
#endif

/*
 * Status codes. Pinned and append-only: a value is never renumbered or
 * reused. The reference library's error kinds map onto them
 * (mcdc_status_kind() gives the reference name).
 */
typedef enum mcdc_status {
    MCDC_OK = 0,
    MCDC_E_INVALID = -1,     /* bad argument or option: ValueError */
    MCDC_E_NOMEM = -2,       /* allocation failed */
    MCDC_E_IO = -3,          /* file or socket I/O failed */
    MCDC_E_PROTOCOL = -4,    /* peer broke the wire protocol */
    MCDC_E_SERVER = -5,      /* SQL Server returned an error token */
    MCDC_E_LIMIT = -6,       /* a limit of mcdc_limits.h was exceeded */
    MCDC_E_CONFLICT = -7,    /* Delta commit lost a race that cannot be retried */
    MCDC_E_CANCELLED = -8,   /* stopped by a signal or a cancel request */
    MCDC_E_DATALOSS = -9,    /* DataLossError: unread changes were purged */
    MCDC_E_SCHEMA = -10,     /* SchemaChangedError */
    MCDC_E_PERMISSION = -11, /* PermissionError: a missing grant */
    MCDC_E_TRANSIENT = -12,  /* connection lost, timeout, deadlock victim */
    MCDC_E_NOTFOUND = -13,   /* object (table, capture instance, file) missing */
    MCDC_E_CORRUPT = -14,    /* a file on disk is not what its format says */
    MCDC_E_UNSUPPORTED = -15, /* valid input we do not handle (yet) */
    /* State on disk that cannot be trusted: nothing is written past it. */
    MCDC_E_MISMATCH = -16,       /* state given to a job belongs to another one: a checkpoint
                                    bound to another app id, target, capture instance or facts
                                    table; a table of another kind; one table in two roles;
                                    a new checkpoint on a target holding its changes */
    MCDC_E_TARGET_BEHIND = -17,  /* the target lacks batches its checkpoint committed (commits
                                    deleted, an older backup restored) */
    MCDC_E_REWOUND = -18,        /* a table holds batches of the app id that its checkpoint has
                                    not committed: the checkpoint was deleted, rewound or
                                    restored from an older copy */
    MCDC_E_FACTS_BEHIND = -19,   /* the facts table lacks the row of a committed batch */
    MCDC_E_FOREIGN_WRITER = -20, /* another writer (another checkpoint) commits under this app id */
    MCDC_E_LOGIN = -21,          /* the server refused the login (UID/PWD, a disabled login);
                                    not a missing grant, which is MCDC_E_PERMISSION */
    MCDC_E_SNAPSHOT_OPEN = -22,  /* a snapshot of the stream in the other mode (full, chunked)
                                    is still open: finish it first (ValueError) */
    MCDC_E_NOT_UNIQUE = -23,     /* the key given is not unique: the source, a snapshot or a
                                    copy holds two rows of one key at one LSN (ValueError) */
    MCDC_E_NOT_READY = -24       /* the source is not ready for the job yet and did not become
                                    ready within the wait: a capture instance whose start
                                    LSN capture has not recorded (RuntimeError) */
} mcdc_status;

#define MCDC_ERROR_MESSAGE_MAX 1024

/*
 * Caller-owned error detail. Zero-initialise it (MCDC_ERROR_INIT); a failing
 * call fills it. server_* fields carry a SQL Server error token when
 * code == MCDC_E_SERVER (or a transient/permission error that came from one),
 * else they are 0. The message never contains a password.
 */
typedef struct mcdc_error {
    int code;
    int server_number;
    int server_state;
    int server_class;
    int server_line;
    char message[MCDC_ERROR_MESSAGE_MAX];
} mcdc_error;

#define MCDC_ERROR_INIT {0, 0, 0, 0, 0, {0}}

/* Results. A result struct a caller hands a job to fill (mcdc_apply_result,
 * mcdc_backfill_status, mcdc_reconcile_result, mcdc_repair_result) starts
 * with size_t size: set it to sizeof the struct before the call
 * (`mcdc_apply_result res = {.size = sizeof res};` in C, or zero it and
 * then set size).
 * Fields are only ever added at a result's end. The library writes only the
 * bytes the caller's size holds (the fields of the header it was built
 * with; the rest of a larger struct, from a newer header, is left as it
 * was), and the calls that read a result (mcdc_*_result_json,
 * mcdc_reconcile_differs) read only those bytes, taking zero for later
 * fields. A size smaller than the first sized version's fields
 * (MCDC_API_VERSION 6) is MCDC_E_INVALID before anything runs: for a job,
 * before it reads or writes anything. The size itself is left as the
 * caller set it. */

/* Messages of the library. A job passes those at or above its log_level
 * (by default MCDC_LOG_WARN: warnings and errors) to its log function, from
 * any of its threads, one call per message, never a secret in them; without
 * one they go to stderr. Functions outside a job write their warnings and
 * errors to stderr. */
typedef enum mcdc_log_level {
    MCDC_LOG_ERROR = 0,
    MCDC_LOG_WARN = 1,
    MCDC_LOG_INFO = 2,
    MCDC_LOG_DEBUG = 3
} mcdc_log_level;
typedef void (*mcdc_log_fn)(void *user, mcdc_log_level level, const char *message);
/* Where the calling thread's messages go outside a job: those of the calls
 * it makes itself (a source's positions and batch plans, range and snapshot
 * plans, opening a range or chunk stream, the verdict calls) at or above
 * level go to fn, one call per message, never a secret in them; fn NULL
 * puts back the default (warnings and errors on stderr). Per thread, so
 * two hosts' threads in one process keep their own; a job's log_fn takes
 * the messages of the thread it runs on while it runs, and the threads a
 * job or a stream starts have their own. */
MCDC_API void mcdc_log_to_thread(mcdc_log_fn fn, void *user, mcdc_log_level level);

/* How far a long job is (a snapshot, a seed, a backfill, apply, reconcile),
 * told to a job given a progress function: at most once per interval while
 * it works, at once when it starts a phase, and a last time with done set.
 * Called from any of the job's threads, never from two at once; the struct
 * and its strings are valid during the call only. Fields are only ever
 * added at the end (version says how many a library fills). Counts are of
 * batches and files finished: rows_done never goes back within a phase. */
#define MCDC_PROGRESS_VERSION 2
typedef struct mcdc_progress {
    int version;            /* MCDC_PROGRESS_VERSION of the library that fills it */
    const char *job;        /* "snapshot", "seed", "backfill", "apply", "reconcile";
                               "stream": one report, phase "streaming", once a stream
                               has resumed or bootstrapped and streams */
    const char *phase;      /* what it does now: "reading", "sorting", "merging", "hashing"... */
    int64_t rows_done;      /* rows of this phase finished */
    int64_t rows_total;     /* rows the phase will handle; -1: unknown */
    bool rows_estimated;    /* rows_total is an estimate, not a count: the server's, files'
                               statistics a pruned scan reads less of, an earlier count */
    const char *parts_name; /* what the phase is cut into ("ranges", "chunks", "buckets",
                               "files"); NULL: not cut */
    int64_t parts_done;
    int64_t parts_total;    /* -1: unknown */
    int64_t bytes_done;     /* bytes of this phase finished (read or written) */
    int64_t phase_ms;       /* since the phase began */
    int64_t elapsed_ms;     /* since the job began */
    bool done;              /* the job's last report */
    /* version 2: the phase's place in the job (1, 2, ...; 0 before the
     * first): a phase of the same name again, as a backfill's next wave, is
     * another one */
    int64_t phase_number;
    /* the job's own parts across its phases (a backfill's chunks of the
     * whole snapshot, those earlier runs read counted done); NULL: none */
    const char *job_parts_name;
    int64_t job_parts_done;
    int64_t job_parts_total; /* -1: unknown */
} mcdc_progress;
typedef void (*mcdc_progress_fn)(void *user, const mcdc_progress *p);

/* Static string: "ok", "invalid", ... */
MCDC_API const char *mcdc_status_name(int code);
/* The reference library's error kind: "DataLossError", "SchemaChangedError",
 * "PermissionError", "ValueError", "RuntimeError"... Static string. */
MCDC_API const char *mcdc_status_kind(int code);
MCDC_API const char *mcdc_version(void);

/* ------------------------------------------------------------------------
 * Values: LSNs and timestamps, and their text forms.
 * ---------------------------------------------------------------------- */
#define MCDC_LSN_VALUE_BYTES 10
/* Bytes of an LSN's text with its NUL: "0x" + 20 hex digits + NUL. */
#define MCDC_LSN_TEXT_SIZE 23

/* A SQL Server log sequence number: 10 bytes, most significant first, so
 * memcmp(a.bytes, b.bytes, MCDC_LSN_VALUE_BYTES) orders two LSNs as SQL
 * Server does. */
typedef struct mcdc_lsn_value {
    uint8_t bytes[MCDC_LSN_VALUE_BYTES];
} mcdc_lsn_value;

/* Parses "0x" followed by 1-20 hex digits (any case; the "0x" may be left
 * out), left-padded with zeros. Anything else (empty, spaces, more than 20
 * digits, a non-hex character) is MCDC_E_INVALID with a message quoting the
 * input. */
MCDC_API int mcdc_lsn_value_parse(mcdc_lsn_value *out, const char *text, mcdc_error *err);
/* Writes the canonical text, "0x" + 20 uppercase hex digits (what
 * CONVERT(varchar(22), lsn, 1) returns), into out; out_size must be at least
 * MCDC_LSN_TEXT_SIZE. */
MCDC_API int mcdc_lsn_value_format(char *out, size_t out_size, const mcdc_lsn_value *lsn,
                                   mcdc_error *err);

/* Timestamps are int64 microseconds since 1970-01-01T00:00:00 UTC. */
/* Bytes that hold any formatted timestamp, with its NUL. */
#define MCDC_TS_TEXT_SIZE 32
/* Parses "YYYY-MM-DD" (a day the month has), optionally followed by "THH:MM"
 * or " HH:MM", ":SS", ".fffffff" (digits past the sixth are dropped), then
 * optionally "Z" or "+hh:mm"/"-hh:mm". Without an offset the text is UTC;
 * with one it is converted to UTC. Anything else is MCDC_E_INVALID. */
MCDC_API int mcdc_ts_parse(int64_t *out_us, const char *text, mcdc_error *err);
/* Writes "YYYY-MM-DDTHH:MM:SS" with frac_digits (0, 3 or 6) fractional
 * digits, truncated, and no zone suffix, into out; out_size must be at least
 * MCDC_TS_TEXT_SIZE. us must lie in years 0001-9999. */
MCDC_API int mcdc_ts_format(char *out, size_t out_size, int64_t us, int frac_digits,
                            mcdc_error *err);

/* ------------------------------------------------------------------------
 * Source options, with the reference library's names (captureInstance,
 * connectionString, maxCommitsPerBatch...). Names ignore case; values are
 * validated when set; unknown names are kept and warned about.
 * ---------------------------------------------------------------------- */
typedef struct mcdc_opts mcdc_opts;
MCDC_API int mcdc_opts_create(mcdc_opts **out, mcdc_error *err);
MCDC_API void mcdc_opts_free(mcdc_opts *o);
/* *unknown (may be NULL) tells whether the name is not a known option. */
MCDC_API int mcdc_opts_set(mcdc_opts *o, const char *name, const char *value, bool *unknown,
                           mcdc_error *err);
/* "name = value" lines, '#' comments; a "[storage]" line starts the
 * storage options (and "[source]" the source options again). */
MCDC_API int mcdc_opts_load_file(mcdc_opts *o, const char *path, mcdc_error *err);
/* Value as set, else the default, else NULL. Borrowed. */
MCDC_API const char *mcdc_opts_get(const mcdc_opts *o, const char *name);
MCDC_API int mcdc_opts_check_required(const mcdc_opts *o, mcdc_error *err);
/* Every known option name, NULL-terminated. */
MCDC_API const char *const *mcdc_opts_known_names(void);
/* Storage options: endpoints, regions and credentials of object stores,
 * under the names delta-rs reads from the environment (AWS_REGION,
 * AWS_SECRET_ACCESS_KEY, AZURE_STORAGE_ACCOUNT_KEY...), set with
 * mcdc_opts_set like the source options. Their names ignore case and are
 * kept in upper case; an empty value, or an AWS_... or AZURE_... name not
 * in this list, is MCDC_E_INVALID (a misspelt credential must not be
 * dropped); values of keys, tokens and connection strings never appear in
 * a message. Every job opens its tables, checkpoint and files with the
 * storage options of the opts it was given. The library reads no
 * environment: the host passes what it wants the stores to see (the CLI:
 * its environment, then the options file, then --storage-option). Every
 * name, NULL-terminated (static). */
MCDC_API const char *const *mcdc_opts_storage_names(void);
/* The option a storage option name means (any case): itself in upper case,
 * or for another spelling delta-rs (object_store) accepts, such as
 * access_key_id, account_key, sas_key or use_emulator, the name in the list
 * above it stands for. NULL for any other name; the bare names that mean one
 * thing on S3 and another on Azure (endpoint, token, allow_http) are NULL
 * too, and mcdc_opts_set refuses them saying which to write. */
MCDC_API const char *mcdc_opts_storage_name(const char *name);
/* For a bare name that delta-rs reads for S3 and for Azure alike (endpoint,
 * token, allow_http; any case): the options it could mean, as text for a
 * message ("AWS_ENDPOINT_URL or AZURE_STORAGE_ENDPOINT"; static). NULL for
 * any other name. What mcdc_opts_set's refusal of such a name says. */
MCDC_API const char *mcdc_opts_storage_ambiguous(const char *name);
/* Whether the storage option name (any case) holds a secret (keys, tokens,
 * connection strings): a host echoing options shows it redacted. */
MCDC_API bool mcdc_opts_storage_secret(const char *name);

/* ------------------------------------------------------------------------
 * Finalization: finalized_until, the completeness verdict per table.
 * ---------------------------------------------------------------------- */
typedef enum mcdc_granularity {
    MCDC_GRANULARITY_HOUR = 0,
    MCDC_GRANULARITY_MINUTE = 1,
    MCDC_GRANULARITY_DAY = 2
} mcdc_granularity;

/* Start (UTC microseconds) of the period holding us; INT64_MIN when g is not
 * a mcdc_granularity (or the period would start before INT64_MIN). */
MCDC_API int64_t mcdc_truncate_us(int64_t us, mcdc_granularity g);
MCDC_API int mcdc_granularity_parse(const char *s, mcdc_granularity *out, mcdc_error *err);

typedef struct mcdc_verdict {
    bool found;                 /* a verdict exists */
    bool moved;                 /* this call moved it */
    int64_t finalized_until_us; /* UTC microseconds: periods ending at or before it are complete */
    int64_t updated_at_us;      /* when it last moved, UTC microseconds */
    char end_lsn[32];           /* the batch end LSN that last moved it */
} mcdc_verdict;

/* Tables (here and in every config) are paths (holding a '/': "./bronze")
 * or file: URIs, or schema.table names, <warehouse>/<schema>.db/<table>
 * (warehouse NULL: ./warehouse). A bare name ("bronze": ./bronze or a table
 * under the warehouse?) and an object store URI whose backend is not built
 * (s3://, abfss://, az://, gs://) are MCDC_E_INVALID. */
MCDC_API int mcdc_verdict_read(mcdc_verdict *out, const char *control_table,
                               const char *warehouse, const char *table_name, mcdc_error *err);
/* Moves the verdict to truncate(end_commit_us) when later; never backwards.
 * Call only after the batch ending at end_lsn is committed. */
MCDC_API int mcdc_verdict_advance(mcdc_verdict *out, const char *control_table,
                                  const char *warehouse, const char *table_name,
                                  const char *end_lsn, int64_t end_commit_us,
                                  mcdc_granularity g, mcdc_error *err);

/* The chunked snapshot that holds a silver table's verdict (the control
 * row's open_snapshot_lsn, written by mcdc_apply): *has false when none (or
 * no row). The reference's Freshness.open_snapshot_lsn. */
MCDC_API int mcdc_verdict_open_snapshot(bool *has, char out_lsn[24], const char *control_table,
                                        const char *warehouse, const char *table_name,
                                        mcdc_error *err);

/* ------------------------------------------------------------------------
 * Finalization: is a period final?
 * ---------------------------------------------------------------------- */
/* *out_final tells whether the period ending at period_end_us (UTC
 * microseconds, exclusive) is complete under table_name's verdict in
 * control_table: a verdict exists and period_end_us <= finalized_until (the
 * reference's is_final). No verdict yet is not final. */
MCDC_API int mcdc_verdict_is_final(bool *out_final, const char *control_table,
                                   const char *warehouse, const char *table_name,
                                   int64_t period_end_us, mcdc_error *err);

/* The four verdict calls above with storage options (opts: its storage
 * options are used, the source options ignored; NULL: none), for control
 * tables on object stores. The calls above are these with opts NULL. */
MCDC_API int mcdc_verdict_read_opts(mcdc_verdict *out, const mcdc_opts *opts,
                                    const char *control_table, const char *warehouse,
                                    const char *table_name, mcdc_error *err);
MCDC_API int mcdc_verdict_advance_opts(mcdc_verdict *out, const mcdc_opts *opts,
                                       const char *control_table, const char *warehouse,
                                       const char *table_name, const char *end_lsn,
                                       int64_t end_commit_us, mcdc_granularity g,
                                       mcdc_error *err);
MCDC_API int mcdc_verdict_open_snapshot_opts(bool *has, char out_lsn[24], const mcdc_opts *opts,
                                             const char *control_table, const char *warehouse,
                                             const char *table_name, mcdc_error *err);
MCDC_API int mcdc_verdict_is_final_opts(bool *out_final, const mcdc_opts *opts,
                                        const char *control_table, const char *warehouse,
                                        const char *table_name, int64_t period_end_us,
                                        mcdc_error *err);

/* ------------------------------------------------------------------------
 * The stream (the reference's stream(...).to_delta(...)).
 * ---------------------------------------------------------------------- */
typedef enum mcdc_trigger {
    MCDC_TRIGGER_DEFAULT = 0,         /* back to back; idle polls every 10 ms */
    MCDC_TRIGGER_AVAILABLE_NOW = 1,   /* up to max_lsn seen at start, in batches; then stop */
    MCDC_TRIGGER_PROCESSING_TIME = 2, /* a batch at most every processing_time_ms */
    MCDC_TRIGGER_ONCE = 3             /* one batch up to max_lsn; then stop */
} mcdc_trigger;

/* Connections to SQL Server and Parquet encoder threads shared by the jobs
 * of one process: together they never hold more than the budget (at least
 * 2 connections and 1 encoder thread, else MCDC_E_INVALID). Every job holds
 * one connection for its life (its control connection) and more while it
 * reads. Created by the host, which frees it after the jobs. */
typedef struct mcdc_budget mcdc_budget;
MCDC_API int mcdc_budget_create(mcdc_budget **out, int connections_max, int encoder_threads_max,
                                mcdc_error *err);
MCDC_API void mcdc_budget_free(mcdc_budget *b);

/* ------------------------------------------------------------------------
 * The runtime: what the jobs of one host share. One handle owns the
 * allocator's accounting (live and peak bytes, a ceiling, fault injection in
 * tests), the default log sink, the budget of connections and encoder
 * threads, the probe each database is polled with (one max_lsn and one
 * "which change tables moved" query per database and poll, however many
 * streams follow it), storage options per scheme for the jobs that bring
 * none (mcdc_runtime_set_storage_options) and a registry of its jobs'
 * metrics (mcdc_runtime_metrics). Every job takes it in its config (the runtime field
 * of each mcdc_*_cfg); a job given none behaves as with a private runtime of its own:
 * no budget but its config's, its own log fields, and its allocations
 * charged to the accounting of the thread that created it.
 *
 * How allocations find their runtime: the library has no process-wide
 * allocator state. A job binds its runtime's accounting to its thread while
 * it runs (create, run, free), and every thread it starts inherits the
 * binding; a block remembers the accounting that took it and is given back
 * there whichever thread frees it. An allocation on a thread with nothing
 * bound (the library called outside any job) is not counted and never
 * fails on purpose. Two runtimes in one process therefore count and fail
 * independently.
 *
 * Created before, destroyed after every job that names it (and after every
 * block those jobs handed out has been freed). Thread-safe: its jobs run on
 * any threads at once.
 * ---------------------------------------------------------------------- */
typedef struct mcdc_runtime mcdc_runtime;
#define MCDC_RUNTIME_CFG_VERSION 1
typedef struct mcdc_runtime_cfg {
    int version;                /* MCDC_RUNTIME_CFG_VERSION */
    /* The budget shared by the runtime's jobs (a job whose config names a
     * budget of its own uses that one). Connections: 0 no limit, else at
     * least 2; each reader thread holds one, so they bound the readers too.
     * Encoder threads: 0 no limit, else at least 1. */
    int connections_max;
    int encoder_threads_max;
    /* Bytes the runtime's jobs may hold at once through the library's
     * allocator; an allocation past it fails (MCDC_E_NOMEM). 0: no ceiling. */
    int64_t memory_bytes_max;
    /* The log sink of jobs whose config sets no log_fn; NULL: stderr. */
    mcdc_log_fn log_fn;
    void *log_user;
    /* A database's probe answers from its last poll for this long: streams
     * of one database polling within it share one round of queries.
     * 0: 10 ms (a default stream's idle poll). */
    int64_t probe_interval_ms;
} mcdc_runtime_cfg;
#define MCDC_RUNTIME_CFG_INIT {MCDC_RUNTIME_CFG_VERSION, 0, 0, 0, NULL, NULL, 0}
MCDC_API int mcdc_runtime_cfg_init(mcdc_runtime_cfg *out, int version, mcdc_error *err);
/* cfg NULL: the defaults. MCDC_E_INVALID for a budget below its minimum or
 * a negative figure. */
MCDC_API int mcdc_runtime_create(mcdc_runtime **out, const mcdc_runtime_cfg *cfg,
                                 mcdc_error *err);
MCDC_API void mcdc_runtime_destroy(mcdc_runtime *rt);

/* Storage options for the stores of one scheme, for the runtime's jobs
 * whose opts hold no storage option of their own (a job given any uses
 * only its own, for every location). scheme: "s3" (s3:// and s3a://),
 * "azure" (abfss://, abfs://, az://, wasbs://, wasb://), "file" (paths and
 * file:), "mem", or one of those URI schemes (any case), which names its
 * family: "s3a" sets "s3"'s. names[i] = values[i], n of them, are checked
 * as mcdc_opts_set checks storage options (a name that is no storage
 * option, an empty value: MCDC_E_INVALID, quoting no value). A call
 * replaces the family's whole set (n 0: none) for the stores opened after
 * it; the runtime keeps copies, and an earlier set until it is destroyed.
 * Credentials a set leads to that are fetched (S3's from STS, a container
 * endpoint or instance metadata; Azure's Entra ID token from a managed
 * identity's endpoint, workload identity or a client secret) are found
 * once per set and shared by every store its jobs open, renewals too (one
 * renewal, under a lock, before expiry). The runtime's jobs given storage
 * options of their own share them the same way with every job given the
 * same options (each name, each value): serve's tables, each given the
 * config's [storage]; a job with options unlike any other's finds its own.
 * Thread-safe. */
MCDC_API int mcdc_runtime_set_storage_options(mcdc_runtime *rt, const char *scheme,
                                              const char *const *names,
                                              const char *const *values, size_t n,
                                              mcdc_error *err);

/* What the runtime's allocator accounting says. */
typedef struct mcdc_runtime_stats {
    int64_t alloc_calls;      /* successful allocations */
    int64_t live_bytes;       /* held now */
    int64_t peak_bytes;       /* the most held at once */
    int64_t probe_rounds;     /* rounds of probe queries sent (all databases) */
    int64_t probe_queries;    /* queries those rounds sent */
} mcdc_runtime_stats;
MCDC_API void mcdc_runtime_get_stats(const mcdc_runtime *rt, mcdc_runtime_stats *out);

/* The runtime's metrics registry: each job of the runtime publishes its
 * figures there while it exists (a stream, backfill, apply or reconcile
 * from its create to its free; a snapshot, seed or repair during its
 * call), so that a host reads what `serve`'s /metrics shows without
 * collecting the jobs' reports itself. It holds the jobs that exist, not
 * the figures of jobs gone: a job with a handle leaves it at its free, a
 * one-call job when its call returns (whatever it returned), and nothing of
 * theirs stays; a host that wants a job's last figures reads them
 * (mcdc_runtime_job_metrics) before the free, as `serve` does when a
 * table's run ends. */
typedef enum mcdc_job_state {
    MCDC_JOB_STARTING = 0,     /* created, or running before it works (resume, bootstrap) */
    MCDC_JOB_SNAPSHOTTING = 1, /* a stream taking a whole snapshot */
    MCDC_JOB_RUNNING = 2,      /* working: a stream that resumed and streams */
    MCDC_JOB_DONE = 3,         /* its run returned MCDC_OK */
    MCDC_JOB_STOPPED = 4,      /* its run was stopped (MCDC_E_CANCELLED) */
    MCDC_JOB_FAILED = 5        /* its run returned another error (last_status) */
} mcdc_job_state;
/* "starting", "snapshotting", "running", "done", "stopped", "failed". */
MCDC_API const char *mcdc_job_state_name(mcdc_job_state s);

/* Slots of mcdc_job_metrics.errors: one per status code (errors[-code]). */
#define MCDC_JOB_ERROR_SLOTS 32
#define MCDC_JOB_NAME_SIZE 272
#define MCDC_JOB_METRICS_VERSION 2
/* How a stream of a runtime learns whether its change table has new rows
 * (version 2 of mcdc_job_metrics). */
typedef enum mcdc_job_probe {
    MCDC_JOB_PROBE_NONE = 0,    /* no shared probe: not a stream, no runtime, a trigger that
                                   ends, or not polled yet */
    MCDC_JOB_PROBE_SHARED = 1,  /* through its database's one probe per poll */
    MCDC_JOB_PROBE_REFUSED = 2  /* the login may not run that probe (SELECT on
                                   cdc.change_tables or a change table refused): it polls
                                   max_lsn on its own */
} mcdc_job_probe;
typedef struct mcdc_job_metrics {
    int version;               /* MCDC_JOB_METRICS_VERSION of the library that fills it */
    int64_t id;                /* the runtime's number for the job: 1, 2, ... in order */
    const void *handle;        /* the job's handle (mcdc_stream *, mcdc_backfill *, mcdc_apply *,
                                  mcdc_reconcile *); NULL for a snapshot, seed or repair */
    const char *job;           /* "stream", "snapshot", "seed", "backfill", "apply",
                                  "reconcile", "repair" (static) */
    char name[MCDC_JOB_NAME_SIZE]; /* a stream's query name (else its app id); the others'
                                      target (apply: silver; reconcile: silver; repair:
                                      bronze), truncated */
    mcdc_job_state state;
    int64_t runs;              /* runs started (a stream's mcdc_stream_run calls) */
    /* A stream's committed batches, over its runs, and the last one's report. */
    int64_t rows, batches;
    bool has_batch;
    double last_batch_seconds;
    char end_lsn[24];
    bool has_end_commit;
    int64_t end_commit_us;
    double ingestion_lag_seconds;  /* the last batch's own; < 0 unknown */
    bool has_retention_headroom;
    double retention_headroom_hours;
    bool has_verdict;
    int64_t finalized_until_us;
    int64_t verdict_moved_us;  /* UTC time the job last saw the verdict move (or first saw it) */
    /* Runs that ended with an error, by status: errors[-status] (MCDC_E_CANCELLED counted
     * too); last_status and last_error: the last run's (0, "": none or MCDC_OK). */
    int64_t errors[MCDC_JOB_ERROR_SLOTS];
    int last_status;
    char last_error[512];
    /* Its progress (a snapshot's, a backfill's...), from the job's progress reports: the
     * last report's job and phase (static strings; NULL: none yet) and figures. */
    bool progress_active;      /* a report came and the job has not reported done */
    const char *progress_job, *progress_phase;
    int64_t progress_rows_done, progress_rows_total;   /* total -1: unknown */
    int64_t progress_parts_done, progress_parts_total; /* the job's parts when it counts
                                                          them across phases, else the
                                                          phase's; total -1: unknown */
    /* version 2 */
    mcdc_job_probe probe;      /* a stream's: how it polls (above) */
    char chunked_snapshot[24]; /* a stream's: S (the LSN) of the newest chunked snapshot it
                                  opened in this process (bootstrap, re-snapshot, switch);
                                  "": none */
} mcdc_job_metrics;
/* Returns non-zero to stop the iteration. m is valid during the call. */
typedef int (*mcdc_job_metrics_fn)(void *user, const mcdc_job_metrics *m);
/* Calls fn for each job the runtime holds now, oldest first, with a copy
 * taken under the registry's lock (fn runs outside it and may call into the
 * library). Returns what fn returned to stop, else the number of jobs (0 or
 * more), or MCDC_E_NOMEM / MCDC_E_INVALID (rt or fn NULL). */
MCDC_API int mcdc_runtime_metrics(mcdc_runtime *rt, mcdc_job_metrics_fn fn, void *user);
/* The job of handle (a stream's...), into *out, whose size out_size the
 * caller gives (sizeof its mcdc_job_metrics: a library with a larger one
 * fills only what fits, a smaller one leaves the caller's tail alone; its
 * version field says which fields it knows): false when the runtime holds
 * none, or out_size is below the first version's struct (up to
 * progress_parts_total). */
MCDC_API bool mcdc_runtime_job_metrics(mcdc_runtime *rt, const void *handle,
                                       mcdc_job_metrics *out, size_t out_size);

/* A position in the change log, as a stream's offsets hold it: the last
 * processed commit and its UTC commit time. */
typedef struct mcdc_offset {
    char lsn[24];          /* "0x" + 20 upper-case hex digits */
    bool has_commit_ts;    /* false: no commit maps to lsn (nothing captured yet) */
    int64_t commit_us;     /* UTC microseconds */
} mcdc_offset;

/* How a stream takes the snapshots it needs (bootstrap). */
typedef enum mcdc_snapshot_mode {
    MCDC_SNAPSHOT_FULL = 0,   /* the whole table read before the stream goes on */
    MCDC_SNAPSHOT_CHUNKED = 1 /* opened by the stream, read in chunks by mcdc_backfill next
                                 to it (needs a facts table) */
} mcdc_snapshot_mode;

/* What a stream does when CDC cleanup purged changes it has not read. */
typedef enum mcdc_on_data_loss {
    MCDC_ON_DATA_LOSS_FAIL = 0,      /* stop with MCDC_E_DATALOSS */
    MCDC_ON_DATA_LOSS_RESNAPSHOT = 1 /* re-snapshot into a new generation, then go on */
} mcdc_on_data_loss;

#define MCDC_STREAM_CFG_VERSION 6
typedef struct mcdc_stream_cfg {
    int version;               /* MCDC_STREAM_CFG_VERSION */
    const char *target;        /* bronze: a path, or schema.table under warehouse */
    const char *app_id;        /* Delta txnAppId (at most 256 bytes); stable for the life of
                                  the checkpoint */
    const char *checkpoint;    /* directory */
    const char *facts_table;   /* NULL: no facts */
    const char *control_table; /* NULL: no verdict */
    const char *warehouse;     /* NULL: ./warehouse */
    const char *query_name;    /* NULL: app_id */
    mcdc_trigger trigger;
    int64_t processing_time_ms; /* PROCESSING_TIME: 1 ms to a week */
    mcdc_granularity granularity;
    int64_t max_batches;       /* 0: no limit */
    /* version 2 */
    mcdc_budget *budget;       /* NULL: no limit; borrowed, outlives the stream */
    const void *reserved1;     /* leave NULL (a test hook was here: mssqlcdc_testing.h) */
    int64_t reserved2;         /* leave 0 (a test hook was here) */
    mcdc_log_fn log_fn;        /* NULL: stderr */
    void *log_user;
    mcdc_log_level log_level;  /* less severe messages are dropped */
    /* bootstrap: snapshot the table into target before the first batch of
     * a new checkpoint (snapshot_open and bootstrap facts rows with a facts
     * table), then stream from the snapshot's LSN. */
    bool bootstrap;
    mcdc_snapshot_mode snapshot;
    /* version 3: before the first batch, when CDC cleanup passed the
     * position of the checkpoint's live generation: re-snapshot the table
     * (in mode `snapshot`) into generation n+1 (checkpoint
     * <checkpoint>/_generations/<n+1>, app id <app_id>.g<n+1>, the state
     * file <checkpoint>/_mssql_cdc_generation.json), needing a facts table.
     * A second loss within resnapshot_interval_days of the last re-snapshot
     * is MCDC_E_DATALOSS. Whatever on_data_loss says, a checkpoint with a
     * state file runs its live generation. */
    mcdc_on_data_loss on_data_loss;
    double resnapshot_interval_days; /* 0 to 3650; 7 by default */
    /* version 4: after the batch that first reads a newer capture instance
     * of the table (its capture_instance_switched facts row), snapshot the
     * table so that rows unchanged since carry the columns only the newer
     * instance captures (needs a facts table). In mode `snapshot`: full
     * reads the whole table into target at once (snapshot_open with
     * switch_batch_id, then a bootstrap row); chunked opens a chunked
     * snapshot at the newer instance's start LSN S, which mssql-cdc backfill
     * reads (it supersedes a chunked one still open). A run killed before
     * the snapshot is done takes it on its restart, once. */
    bool snapshot_on_switch;
    /* version 5: each whole snapshot the stream takes (its bootstrap, a
     * re-snapshot, a snapshot on switch) reports its progress to
     * progress_fn (job "snapshot", done once it is committed); NULL: none */
    mcdc_progress_fn progress_fn;
    void *progress_user;
    /* version 6: the runtime the stream runs in (borrowed; outlives the
     * stream); NULL: a private one (see "The runtime") */
    mcdc_runtime *runtime;
} mcdc_stream_cfg;
#define MCDC_STREAM_CFG_INIT \
    {MCDC_STREAM_CFG_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, MCDC_TRIGGER_DEFAULT, 0, \
     MCDC_GRANULARITY_HOUR, 0, NULL, NULL, 0, NULL, NULL, MCDC_LOG_WARN, false, MCDC_SNAPSHOT_FULL, \
     MCDC_ON_DATA_LOSS_FAIL, 7.0, false, NULL, NULL, NULL}
/* The defaults of a config for bindings, which cannot see macros: writes
 * the fields version holds (what MCDC_STREAM_CFG_INIT gives them, nothing
 * past that version's end) into *out, with out->version = version. Pass the
 * version the binding's struct was written for (MCDC_STREAM_CFG_VERSION of
 * its header). A version this library does not know is MCDC_E_INVALID. Each
 * config has one: mcdc_snapshot_cfg_init, mcdc_seed_cfg_init... */
MCDC_API int mcdc_stream_cfg_init(mcdc_stream_cfg *out, int version, mcdc_error *err);

/* What one committed micro-batch did (append-only struct). */
typedef struct mcdc_batch_report {
    int64_t batch_id;
    bool replayed;            /* re-ran a planned batch after a crash */
    bool bronze_skipped;      /* its append was already in bronze */
    int64_t rows, deletes, inserts, updates;
    char start_lsn[24], end_lsn[24];
    int64_t end_commit_us;
    bool has_end_commit;
    double duration_ms;
    double rows_per_s;
    double ingestion_lag_seconds; /* < 0: unknown */
    bool has_verdict;
    int64_t finalized_until_us;
    /* end_commit minus the commit time of the instance's min_lsn (what CDC
     * cleanup keeps), in hours, as the facts row's retention_headroom_hours */
    double retention_headroom_hours;
    bool has_retention_headroom;
} mcdc_batch_report;

typedef void (*mcdc_report_fn)(void *ctx, const mcdc_batch_report *r);

/* One stream job. create validates the configuration and the locations
 * (nothing is read or written yet); the strings of cfg are copied, opts is
 * borrowed and must outlive the stream. */
typedef struct mcdc_stream mcdc_stream;
MCDC_API int mcdc_stream_create(mcdc_stream **out, const mcdc_opts *opts,
                                const mcdc_stream_cfg *cfg, mcdc_error *err);
/* Runs until the trigger says stop, max_batches, mcdc_stream_request_stop(),
 * or an error (MCDC_E_DATALOSS, MCDC_E_SCHEMA, MCDC_E_PERMISSION, and the
 * state checks MCDC_E_MISMATCH ... MCDC_E_FOREIGN_WRITER). fn (may be NULL)
 * gets a report after each committed batch. */
MCDC_API int mcdc_stream_run(mcdc_stream *s, mcdc_report_fn fn, void *ctx, mcdc_error *err);
/* Async-signal-safe, from any thread: finish the current batch, then
 * return from mcdc_stream_run. */
MCDC_API void mcdc_stream_request_stop(mcdc_stream *s);
/* A stream of a runtime that polls through its database's probe plans no
 * batch while its change table has nothing new, so its last batch's end
 * stays behind the database's max_lsn although it has read everything: true
 * and *lsn (0x + 20 hex digits) the newest max_lsn up to which its probe
 * found nothing past its position, since its last batch; false: none (its
 * last batch's end is its position). From any thread; a host's lag uses
 * it. */
MCDC_API bool mcdc_stream_caught_up(mcdc_stream *s, char lsn[24]);
MCDC_API void mcdc_stream_free(mcdc_stream *s);

/* ------------------------------------------------------------------------
 * Many tables (the reference's start_many): what a host running a stream
 * per capture instance in one process does once before starting them.
 * ---------------------------------------------------------------------- */
typedef enum mcdc_instance_found {
    MCDC_INSTANCE_UNKNOWN = 0,   /* no capture instance of that name */
    MCDC_INSTANCE_LISTED = 1,    /* this login sees it (the name exactly, else the one
                                    instance matching it ignoring case) */
    MCDC_INSTANCE_UNREADABLE = 2 /* its change table exists and this login may not SELECT
                                    it: a stream on it stops with MCDC_E_PERMISSION */
} mcdc_instance_found;
/* Asks the source of opts (its connectionString; captureInstance ignored)
 * once which of names[0..n) are capture instances: found[i] is a
 * mcdc_instance_found. The source's errors as a stream's (MCDC_E_LOGIN,
 * MCDC_E_TRANSIENT after retries...). */
MCDC_API int mcdc_capture_instances_find(const mcdc_opts *opts, const char *const *names,
                                         size_t n, int *found, mcdc_error *err);
/* Creates the facts table when missing (no rows; the storage options of
 * opts, which may be NULL), so that streams starting together append to
 * one table rather than race to create it. A table of another kind is
 * MCDC_E_MISMATCH. Each stream's facts rows carry its own txn app id
 * (<app_id>#facts): streams append to one facts table safely. */
MCDC_API int mcdc_facts_table_create(const mcdc_opts *opts, const char *facts_table,
                                     const char *warehouse, mcdc_error *err);

/* The health of a database's capture job and its newest commit, read by a
 * probe on a connection of its own (a service's metrics): one poll asks
 * max_lsn, its commit time and the capture DMVs (sys.dm_cdc_log_scan_sessions,
 * sys.dm_cdc_errors). Times are UTC microseconds. */
typedef struct mcdc_capture_health {
    char max_lsn[24];            /* sys.fn_cdc_get_max_lsn(), 0x... ("" when NULL) */
    bool has_max_commit;
    int64_t max_commit_us;       /* its commit time: the source's newest commit */
    int64_t server_now_us;       /* SYSUTCDATETIME() */
    /* The DMVs need VIEW DATABASE STATE: without it visible is false, the
     * fields below are 0 and the read is no error. */
    bool visible;
    bool has_sessions;           /* a scan session since the server started */
    double latency_seconds;      /* session 0's latency: the last non-zero one */
    int64_t error_count;         /* session 0's: errors of every session */
    int64_t failed_sessions;     /* session 0's failed_sessions_count */
    int64_t transactions;        /* session 0's tran_count */
    int64_t empty_scans;         /* the newest session's empty_scan_count (in a row) */
    bool has_last_scan_end;
    int64_t last_scan_end_us;    /* the newest session's end */
    int64_t errors_listed;       /* rows of sys.dm_cdc_errors (the last 32 sessions') */
} mcdc_capture_health;
typedef struct mcdc_capture_probe mcdc_capture_probe;
/* Opens a probe on the source of opts (its connectionString and
 * captureInstance, which names one instance of the database: the probe
 * reads commit times on its clock). Nothing is read until the first read. */
MCDC_API int mcdc_capture_probe_open(mcdc_capture_probe **out, const mcdc_opts *opts,
                                     mcdc_error *err);
/* One poll (three queries; retried as a stream's control queries are). A
 * login without VIEW DATABASE STATE reads visible = false, not an error. */
MCDC_API int mcdc_capture_probe_read(mcdc_capture_probe *p, mcdc_capture_health *out,
                                     mcdc_error *err);
MCDC_API void mcdc_capture_probe_free(mcdc_capture_probe *p);
/* A change table's rows: sys.dm_db_partition_stats' row_count of its
 * clustered index, summed over its partitions. */
#define MCDC_SYSNAME_BYTES 513 /* a sysname in UTF-8 (128 characters) and its NUL */
typedef struct mcdc_change_table_rows {
    char capture_instance[MCDC_SYSNAME_BYTES];
    int64_t rows;
} mcdc_change_table_rows;
/* Every change table of the probe's database with its row count, in one
 * query (retried as a stream's control queries are), ordered by capture
 * instance. The DMV needs VIEW DATABASE STATE (and the query SELECT on
 * cdc.change_tables): without either *visible is false, *out NULL and *n 0,
 * and the read is no error. *out owned
 * (mcdc_change_table_rows_free). */
MCDC_API int mcdc_capture_probe_change_rows(mcdc_capture_probe *p, mcdc_change_table_rows **out,
                                            size_t *n, bool *visible, mcdc_error *err);
MCDC_API void mcdc_change_table_rows_free(mcdc_change_table_rows *rows);

/* ------------------------------------------------------------------------
 * A stop request for the jobs that are one call (a snapshot, a seed, a
 * repair): create one, give it in the job's config, and request the stop
 * from any thread (a signal handler too: it is one atomic store) while the
 * call runs. The job then returns MCDC_E_CANCELLED at its next batch,
 * before its commit: nothing of it is in the table (files it wrote and did
 * not commit are left, as a kill leaves them, and never read). A stop
 * requested once stays requested; one per call.
 * ---------------------------------------------------------------------- */
typedef struct mcdc_stop mcdc_stop;
MCDC_API int mcdc_stop_create(mcdc_stop **out, mcdc_error *err);
MCDC_API void mcdc_stop_request(mcdc_stop *s);
MCDC_API bool mcdc_stop_requested(const mcdc_stop *s);
MCDC_API void mcdc_stop_free(mcdc_stop *s);

/* ------------------------------------------------------------------------
 * Snapshots (the reference's snapshot()): the tracked table's current rows
 * appended to bronze as operation 0, stamped with an LSN recorded before
 * the read; a stream started at that LSN loses and doubles nothing.
 * ---------------------------------------------------------------------- */
#define MCDC_SNAPSHOT_CFG_VERSION 5
typedef struct mcdc_snapshot_cfg {
    int version;               /* MCDC_SNAPSHOT_CFG_VERSION */
    const char *target;        /* bronze: a path, or schema.table under warehouse */
    const char *warehouse;     /* NULL: ./warehouse */
    bool resnapshot;           /* take a new one even when target holds one */
    mcdc_budget *budget;       /* NULL: no limit */
    mcdc_log_fn log_fn;        /* NULL: stderr */
    void *log_user;
    mcdc_log_level log_level;
    /* version 2: the stream's app id and facts table (both or neither): a
     * chunked snapshot of that stream still open in target is refused
     * (MCDC_E_SNAPSHOT_OPEN), as one mode holds while one is open. */
    const char *app_id;
    const char *facts_table;
    /* version 3: the snapshot's progress (job "snapshot": "reading", the
     * rows of the server's estimate, parts "ranges"; "committing"); NULL:
     * none */
    mcdc_progress_fn progress_fn;
    void *progress_user;
    /* version 4: a stop request (mcdc_stop_create); NULL: none */
    mcdc_stop *stop;
    /* version 5: the runtime the snapshot runs in (borrowed; its budget
     * when budget is NULL, its log sink when log_fn is, its storage
     * options, its metrics); NULL: a private one (see "The runtime") */
    mcdc_runtime *runtime;
} mcdc_snapshot_cfg;
#define MCDC_SNAPSHOT_CFG_INIT \
    {MCDC_SNAPSHOT_CFG_VERSION, NULL, NULL, false, NULL, NULL, NULL, MCDC_LOG_WARN, NULL, NULL, \
     NULL, NULL, NULL, NULL}
/* As mcdc_stream_cfg_init, for this config. */
MCDC_API int mcdc_snapshot_cfg_init(mcdc_snapshot_cfg *out, int version, mcdc_error *err);

/* Appends a snapshot of the capture instance's table (opts: the source
 * options; snapshotLsn, snapshotKeys, isolationLevel, lockTimeoutMs and
 * numPartitions apply) and returns the offset it is stamped with. When
 * target already holds a snapshot of any capture instance of the table
 * (and !resnapshot), returns that one's offset and reads nothing (*taken
 * false). *rows: rows appended (0 when none was taken). Waits for capture
 * to record a new capture instance's start LSN (captureWaitSeconds), then
 * MCDC_E_NOT_READY. */
MCDC_API int mcdc_snapshot_take(mcdc_offset *out, int64_t *rows, bool *taken,
                                const mcdc_opts *opts, const mcdc_snapshot_cfg *cfg,
                                mcdc_error *err);

/* ------------------------------------------------------------------------
 * Seeds (the reference's seed()): a copy of the table the user already has
 * (a Delta table, or Parquet files) appended to bronze as its snapshot,
 * stamped with the LSN of as_of.
 * ---------------------------------------------------------------------- */
#define MCDC_SEED_CFG_VERSION 5
typedef struct mcdc_seed_cfg {
    int version;                  /* MCDC_SEED_CFG_VERSION */
    const char *target;           /* bronze: a path, or schema.table under warehouse */
    const char *warehouse;        /* NULL: ./warehouse */
    const char *from;             /* the copy: a Delta table, a .parquet file, a directory
                                     of them or a glob of them (dir/part-*.parquet) */
    const char *as_of;            /* when the copy started being read: a UTC time
                                     ("2026-12-01T10:00:00Z"), or an LSN recorded before it */
    bool allow_missing_columns;   /* captured columns the copy lacks read NULL */
    bool reseed;                  /* replace an older snapshot (after a DataLossError) */
    const char *app_id;           /* with facts_table: the stream whose bootstrap row records
                                     the seed, and whose open snapshots are refused */
    const char *facts_table;
    mcdc_log_fn log_fn;           /* NULL: stderr */
    void *log_user;
    mcdc_log_level log_level;
    /* version 2: a copy without rows is seeded (else MCDC_E_INVALID: an
     * empty copy of a table that has rows is the usual mistake) */
    bool allow_empty;
    /* version 3: the seed's progress (job "seed": "checking keys",
     * "reading", each of the copy's rows by its metadata; "committing");
     * NULL: none */
    mcdc_progress_fn progress_fn;
    void *progress_user;
    /* version 4: a stop request (mcdc_stop_create); NULL: none */
    mcdc_stop *stop;
    /* version 5: the runtime the seed runs in (borrowed; its log sink when
     * log_fn is NULL, its storage options, its metrics); NULL: a private
     * one (see "The runtime") */
    mcdc_runtime *runtime;
} mcdc_seed_cfg;
#define MCDC_SEED_CFG_INIT \
    {MCDC_SEED_CFG_VERSION, NULL, NULL, NULL, NULL, false, false, NULL, NULL, NULL, NULL, \
     MCDC_LOG_WARN, false, NULL, NULL, NULL, NULL}
/* As mcdc_stream_cfg_init, for this config. */
MCDC_API int mcdc_seed_cfg_init(mcdc_seed_cfg *out, int version, mcdc_error *err);

/* Checks everything (see the seed documentation: the copy found at from,
 * its columns, as_of purged or in the future, other snapshots, open
 * snapshots) before writing, then appends the copy in one commit and returns
 * the offset it is stamped with. A copy without rows (unless allow_empty),
 * or holding two rows of one key (MCDC_E_NOT_UNIQUE), is refused before
 * that commit. A rerun with the same as_of returns that seed (*written
 * false). */
MCDC_API int mcdc_seed(mcdc_offset *out, int64_t *rows, bool *written, const mcdc_opts *opts,
                       const mcdc_seed_cfg *cfg, mcdc_error *err);

/* ------------------------------------------------------------------------
 * Tables
 * ---------------------------------------------------------------------- */
/* Receives one line; non-zero stops. */
typedef int (*mcdc_line_fn)(void *ctx, const char *line);
/* Every row of a Delta table (path, or schema.table under warehouse) as one
 * JSON object per line, in column order: numbers as numbers, decimals as
 * exact strings, binary as "0x..." hex, timestamps as ISO-8601 strings. A
 * location holding no Delta table says what it holds: a file
 * (MCDC_E_INVALID), a directory without _delta_log/ or nothing
 * (MCDC_E_NOTFOUND). */
MCDC_API int mcdc_table_rows_json(const char *table, const char *warehouse, mcdc_line_fn fn,
                                  void *ctx, mcdc_error *err);
/* The same with storage options (opts may be NULL: none), for a table on an
 * object store. */
MCDC_API int mcdc_table_rows_json_opts(const mcdc_opts *opts, const char *table,
                                       const char *warehouse, mcdc_line_fn fn, void *ctx,
                                       mcdc_error *err);

/* ------------------------------------------------------------------------
 * Backfill (the reference's backfill()): reads the newest chunked snapshot
 * a stream opened (stream --bootstrap --snapshot chunked, or a chunked
 * re-snapshot) in waves of chunks next to the running stream.
 *
 * The first run plans every chunk (at most about chunk_rows rows each) and
 * records the plan in the target's plans table (<target>_snapshot_plans),
 * then in a 'snapshot_plan' facts row; the plan never changes while the
 * snapshot is open. Each wave is stamped with max_lsn before it is read,
 * appended to the target in one commit (operation 0, _snapshot S, _chunk)
 * and recorded as one 'snapshot_chunk' facts row per chunk, its bounds in
 * the plans table first. After the last chunk, the snapshot's 'bootstrap'
 * (or 'resnapshot') row tells downstream to rebuild from S. Killed at any
 * point, the next run neither reads a chunk twice into the target nor skips
 * one. Run it apart from the stream, again until done.
 * ---------------------------------------------------------------------- */
typedef enum mcdc_backfill_state {
    MCDC_BACKFILL_DONE = 0,              /* every chunk is in; the completion row too */
    MCDC_BACKFILL_RUNNING = 1,           /* max_waves, max_seconds or a stop: run again */
    MCDC_BACKFILL_WAITING_HEADROOM = 2,  /* the stream's retention headroom is below the minimum */
    MCDC_BACKFILL_WAITING_METRICS = 3,   /* the stream has written no row with a headroom */
    MCDC_BACKFILL_NO_SNAPSHOT = 4        /* no chunked snapshot opened by the stream in the target */
} mcdc_backfill_state;

/* The reference's BackfillStatus (a sized result: see "Results"). */
typedef struct mcdc_backfill_status {
    size_t size;              /* sizeof(mcdc_backfill_status), set by the caller */
    char snapshot[24];        /* S; "" when there is none */
    int64_t chunks_done;
    int64_t chunks_total;     /* the plan's; < 0 before a run planned it */
    bool done, paused;
    mcdc_backfill_state state;
    char reason[512];         /* the state in words; "" when done or running */
} mcdc_backfill_status;

#define MCDC_BACKFILL_CFG_VERSION 3
typedef struct mcdc_backfill_cfg {
    int version;                 /* MCDC_BACKFILL_CFG_VERSION */
    const char *target;          /* bronze, as the stream was given it */
    const char *app_id;          /* the stream's (its generations' snapshots are found too) */
    const char *facts_table;     /* the stream's; required */
    const char *warehouse;       /* NULL: ./warehouse */
    int64_t chunk_rows;          /* 0: 1,000,000; a later run's other value is ignored, with
                                    a warning (the plan is fixed) */
    int64_t max_waves;           /* 0: no limit */
    double max_seconds;          /* <= 0: no limit */
    double target_wave_seconds;  /* < 0: 300; 0: one round of numPartitions chunks a wave */
    bool has_min_headroom;       /* pause below min_headroom_hours */
    double min_headroom_hours;
    const char *isolation;       /* "snapshot" or "readCommitted" (any case); NULL: the
                                    isolationLevel option, READ COMMITTED without one */
    mcdc_budget *budget;         /* NULL: no limit; borrowed */
    const void *reserved1;       /* leave NULL (a test hook was here: mssqlcdc_testing.h) */
    mcdc_log_fn log_fn;          /* NULL: stderr */
    void *log_user;
    mcdc_log_level log_level;
    /* version 2: the run's progress (job "backfill": "planning", then a
     * "reading" phase a wave, parts its chunks, job parts the snapshot's
     * chunks); NULL: none */
    mcdc_progress_fn progress_fn;
    void *progress_user;
    /* version 3: the runtime the backfill runs in (borrowed; its budget
     * when budget is NULL, its log sink when log_fn is); NULL: a private
     * one (see "The runtime") */
    mcdc_runtime *runtime;
} mcdc_backfill_cfg;
#define MCDC_BACKFILL_CFG_INIT \
    {MCDC_BACKFILL_CFG_VERSION, NULL, NULL, NULL, NULL, 0, 0, 0, -1, false, 0, NULL, NULL, NULL, \
     NULL, NULL, MCDC_LOG_WARN, NULL, NULL, NULL}
/* As mcdc_stream_cfg_init, for this config. */
MCDC_API int mcdc_backfill_cfg_init(mcdc_backfill_cfg *out, int version, mcdc_error *err);

typedef struct mcdc_backfill mcdc_backfill;
/* Validates cfg (nothing is read or written); opts is borrowed and must
 * outlive the handle. */
MCDC_API int mcdc_backfill_create(mcdc_backfill **out, const mcdc_opts *opts,
                                  const mcdc_backfill_cfg *cfg, mcdc_error *err);
/* One call of the reference's backfill(): waves until done, a limit, a
 * pause or a stop request; *status says which. Errors: the state checks of
 * the stream (MCDC_E_MISMATCH ... MCDC_E_FOREIGN_WRITER: another backfill of
 * the same snapshot planned a wave first), MCDC_E_SNAPSHOT_OPEN (a full
 * snapshot of the stream is still open), and the source's. */
MCDC_API int mcdc_backfill_run(mcdc_backfill *b, mcdc_backfill_status *status, mcdc_error *err);
/* Async-signal-safe: finish the current wave, then return (running). */
MCDC_API void mcdc_backfill_request_stop(mcdc_backfill *b);
MCDC_API void mcdc_backfill_free(mcdc_backfill *b);
/* "done", "running", "waiting_headroom", "waiting_metrics", "no_snapshot". */
MCDC_API const char *mcdc_backfill_state_name(mcdc_backfill_state s);
/* The status as the reference's BackfillStatus JSON, one line, into out
 * (MCDC_BACKFILL_STATUS_JSON_SIZE bytes always suffice; a smaller cap too
 * small for it is MCDC_E_LIMIT). */
#define MCDC_BACKFILL_STATUS_JSON_SIZE 4096
MCDC_API int mcdc_backfill_status_json(char *out, size_t cap, const mcdc_backfill_status *st,
                                       mcdc_error *err);

/* ------------------------------------------------------------------------
 * Silver (the reference's apply_changes): the current state of the source
 * table, one row per key, kept from bronze.
 *
 * A pass ranks what bronze holds beyond silver's position: the latest row
 * of each key by (_start_lsn, _command_id, _seqval, _operation); operation
 * 1 deletes the key, 0, 2 and 4 set it, 3 deletes its own key unless the
 * operation 4 of the same change outranks it. Keys match null-safely. A
 * row only takes an image newer than its own _start_lsn, so applying from
 * behind changes nothing. When bronze holds a complete snapshot newer than
 * the one silver was last rebuilt from, silver is rebuilt from its rows and
 * the changes after it (keys it lacks are deleted). A chunked snapshot
 * still open is applied wave by wave (with range deletes on a single
 * integer, date or timestamp key) and holds the verdict until it
 * completes. Silver's columns are the captured ones, _start_lsn and
 * _commit_ts; columns bronze gains are added. The merge rewrites only the
 * files that hold changed keys and commits once, with txn(mssql-cdc.apply,
 * pass): a crash before the control row is written replays the same
 * commit's position, never a second merge. Then applied_lsn,
 * snapshot_lsn, open_snapshot_lsn and snapshot_wave go to the control
 * table, and finalized_until to bronze's verdict read before bronze.
 *
 * scd_type 2 keeps a history instead (SCD type 2, as Databricks' AUTO CDC
 * keeps one): a row per version of each key, with __START_AT and __END_AT
 * (the commit times it began and ended at; NULL end: the open version) and
 * _end_lsn. A delete closes the key's open version; a change of none of
 * track_history_columns (default: every captured column) updates the open
 * version in place; a rebuild closes the open versions of keys the newer
 * snapshot lacks at its LSN. The type is recorded in silver (table
 * property mssql_cdc.scd_type) and another is refused (MCDC_E_MISMATCH).
 * docs/silver.md says the rules.
 * ---------------------------------------------------------------------- */
#define MCDC_APPLY_CFG_VERSION 6 /* 1: the fields up to log_level (scd_type 1); 2: up to
                                    n_track_history_columns; 3: deletion_vectors; 4:
                                    progress_fn, progress_user; 5: scratch_dir; 6: runtime */
typedef struct mcdc_apply_cfg {
    int version;                  /* MCDC_APPLY_CFG_VERSION */
    const char *bronze;           /* the stream's target, named as the stream was given it */
    const char *target;           /* silver: a path, or schema.table under warehouse */
    const char *control_table;    /* required: the position, and bronze's verdict */
    const char *facts_table;      /* the stream's; NULL: no verdict, no chunked snapshots */
    const char *warehouse;        /* NULL: ./warehouse */
    const char *capture_instance; /* NULL: the captureInstance option */
    /* The key columns; NULL: the capture instance's unique index, read
     * through the source options (MCDC_E_INVALID without either). */
    const char *const *keys;
    int32_t n_keys;
    mcdc_granularity granularity;
    /* ONCE: one pass (apply_changes); AVAILABLE_NOW: passes until bronze
     * holds nothing new; PROCESSING_TIME: a pass at most every
     * processing_time_ms, until stopped; DEFAULT: back to back, polling an
     * idle bronze every second. */
    mcdc_trigger trigger;
    int64_t processing_time_ms;
    int64_t max_passes;           /* 0: no limit */
    int64_t memory_mb;            /* the sorter's budget, spilled before passing; 0: 64 */
    int64_t file_rows;            /* rows a silver file holds about; 0: 1,048,576 */
    const void *reserved1;        /* leave NULL (a test hook was here: mssqlcdc_testing.h) */
    mcdc_log_fn log_fn;           /* NULL: stderr */
    void *log_user;
    mcdc_log_level log_level;
    /* version 2 */
    int32_t scd_type;             /* 0 or 1: current state; 2: history */
    const char *const *track_history_columns; /* scd_type 2; NULL: every captured column */
    int32_t n_track_history_columns;
    /* version 3 */
    /* A silver this run creates is merged on read: protocol (3,7) with the
     * deletionVectors feature and delta.enableDeletionVectors=true, so that
     * apply marks replaced rows in deletion vectors instead of rewriting
     * files (docs/silver.md). An existing silver follows its own property. */
    int32_t deletion_vectors;
    /* version 4: the run's progress (job "apply": each pass that reads
     * rows: "reading bronze", its rows by the files' statistics; "sorting";
     * "merging", or "rebuilding", parts silver's files); NULL: none */
    mcdc_progress_fn progress_fn;
    void *progress_user;
    /* version 5: a local directory for the sorted runs a pass spills (under
     * its mssql-cdc-spill/, names unique to the run, removed as they are
     * merged). NULL: silver's own _mssql_cdc_spill/ when silver is local;
     * a silver on an object store needs one (MCDC_E_INVALID without it:
     * runs are scratch, written and read back at once, not objects to
     * upload). The CLI gives the system's temp directory by default. */
    const char *scratch_dir;
    /* version 6: the runtime the apply runs in (borrowed; its log sink when
     * log_fn is NULL); NULL: a private one (see "The runtime") */
    mcdc_runtime *runtime;
} mcdc_apply_cfg;
#define MCDC_APPLY_CFG_INIT \
    {MCDC_APPLY_CFG_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, MCDC_GRANULARITY_HOUR, \
     MCDC_TRIGGER_ONCE, 0, 0, 0, 0, NULL, NULL, NULL, MCDC_LOG_WARN, 0, NULL, 0, 0, NULL, NULL, \
     NULL, NULL}
/* As mcdc_stream_cfg_init, for this config. */
MCDC_API int mcdc_apply_cfg_init(mcdc_apply_cfg *out, int version, mcdc_error *err);

/* The reference's ApplyResult, and what the pass did (a sized result: see
 * "Results"; apply's fn gets the library's own, its size the library's). */
typedef struct mcdc_apply_result {
    size_t size;                  /* sizeof(mcdc_apply_result), set by the caller */
    bool rebuilt;                 /* a pass of this run rebuilt silver from a snapshot */
    bool has_applied_lsn;         /* applied_lsn: silver's position after the run */
    char applied_lsn[24];
    bool has_finalized_until;     /* silver's verdict after the run, UTC microseconds */
    int64_t finalized_until_us;
    bool bronze_found;            /* false: bronze does not exist (nothing applied) */
    /* ours */
    int64_t passes;               /* passes that committed to silver */
    int64_t inserted, updated, deleted; /* rows, over those passes */
    int64_t files_read, files_written;
    int64_t silver_version;       /* -1: no silver table */
    bool has_open_snapshot;       /* a chunked snapshot is being applied (holds the verdict) */
    char open_snapshot_lsn[24];
    int64_t snapshot_wave;        /* its last wave applied; -1: none */
} mcdc_apply_result;

typedef struct mcdc_apply mcdc_apply;
/* Validates cfg (nothing is read or written). opts (the stream's source
 * options and the storage options, may be NULL: none) is borrowed and must
 * outlive the handle. */
MCDC_API int mcdc_apply_create(mcdc_apply **out, const mcdc_opts *opts, const mcdc_apply_cfg *cfg,
                               mcdc_error *err);
/* Runs passes as the trigger says; *result is the run's (fn, may be NULL,
 * also gets it after each pass that committed). Errors: the tables' kinds
 * (MCDC_E_MISMATCH), a bronze row of another capture instance or chunk
 * rows without facts (MCDC_E_INVALID), a silver column whose type differs
 * from bronze's (MCDC_E_SCHEMA), another writer committing under
 * mssql-cdc.apply (MCDC_E_FOREIGN_WRITER), and the storage's. */
typedef void (*mcdc_apply_fn)(void *ctx, const mcdc_apply_result *r);
MCDC_API int mcdc_apply_run(mcdc_apply *a, mcdc_apply_fn fn, void *ctx, mcdc_apply_result *result,
                            mcdc_error *err);
/* Async-signal-safe: finish the current pass, then return. */
MCDC_API void mcdc_apply_request_stop(mcdc_apply *a);
MCDC_API void mcdc_apply_free(mcdc_apply *a);
/* The result as the reference's ApplyResult JSON ({"rebuilt", "applied_lsn",
 * "finalized_until", "bronze_found"}, then ours), one line, into out
 * (MCDC_APPLY_RESULT_JSON_SIZE bytes always suffice). */
#define MCDC_APPLY_RESULT_JSON_SIZE 1024
MCDC_API int mcdc_apply_result_json(char *out, size_t cap, const mcdc_apply_result *r,
                                    mcdc_error *err);

/* ------------------------------------------------------------------------
 * Reconcile (the reference's reconcile): is silver equal to its SQL Server
 * table? Nothing is written to SQL Server and nothing read with NOLOCK.
 *
 * Tier 1: for a one-column integer or date key, one scan on SQL Server
 * counts the rows and sums the keys (COUNT_BIG, SUM as decimal(38,0), a
 * date as its day number from 1970-01-01) per fine bucket of the key's
 * range, the same over silver pinned at one version; fine buckets are
 * merged in key order into buckets of about bucket_rows rows. A bucket is
 * MATCH when both are equal, IN_FLIGHT when they differ while a change to
 * one of its keys is newer than what one side read, else MISMATCH. Other
 * keys get one count of the whole table.
 * Tier 2: every MISMATCH bucket and a `sample` fraction of the MATCH ones
 * (other keys: sampled ranges of about bucket_rows rows) read through the
 * snapshot reader and compared with silver key by key by one canonical
 * row hash of the captured columns (not computed ones): MISSING_TARGET,
 * MISSING_SOURCE, RECORD_DIFF, or IN_FLIGHT for a key changed after the
 * older of silver's applied_lsn and max_lsn read before the source (in
 * bronze, or in a change table past bronze's position: after a capture
 * instance switch the older instance before the newer one's start and the
 * newer one from it, as the stream reads them), or, with facts_table, a
 * key whose repair apply has not taken (its detail: repair_pending); and
 * DUPLICATE_TARGET for a key silver holds more than once (version 3).
 * A key the source holds twice (a --keys column that is not unique) is
 * refused: MCDC_E_NOT_UNIQUE.
 * With facts_table: the chunks of bronze's newest chunked snapshot
 * (CHUNK_TILING, CHUNK_ROWS, CHUNK_STAMP).
 * With report_table: the run's report rows, appended in one commit with
 * txn(mssql-cdc.reconcile.<run_id>, 1).
 * With repair (version 2, needs facts_table): after the report, the keys
 * that differ and are not in flight are repaired (mcdc_repair_run) under
 * the run's run_id, so that the next apply fixes silver. With report_table,
 * a run's repair the report names and bronze or the facts table lacks (a
 * run killed after its report) is completed first.
 * With settle_seconds (version 3): what is IN_FLIGHT is re-checked until
 * it settles or the time passes.
 * ---------------------------------------------------------------------- */
#define MCDC_RECONCILE_CFG_VERSION 5 /* 2: up to repair; 3: settle_seconds; 4: progress;
                                        5: runtime */
typedef struct mcdc_reconcile_cfg {
    int version;                  /* MCDC_RECONCILE_CFG_VERSION */
    const char *silver;           /* required: a path, or schema.table under warehouse */
    const char *bronze;           /* required: the table silver is applied from */
    const char *control_table;    /* required: apply's, for silver's applied_lsn */
    const char *facts_table;      /* the stream's: the chunk checks, pending repairs; NULL: none */
    const char *report_table;     /* NULL: no report table */
    const char *warehouse;        /* NULL: ./warehouse */
    /* The key columns; NULL: the capture instance's unique index. */
    const char *const *keys;
    int32_t n_keys;
    int64_t bucket_rows;          /* rows per bucket; 0: 1,000,000 */
    double sample;                /* fraction of MATCH buckets hashed, 0..1; < 0: 0.01 */
    bool has_sample_seed;         /* false: a random sample */
    uint64_t sample_seed;
    const void *reserved1;        /* leave NULL (a test hook was here: mssqlcdc_testing.h) */
    mcdc_log_fn log_fn;           /* NULL: stderr */
    void *log_user;
    mcdc_log_level log_level;
    /* version 2: repair the keys that differ and are not in flight (the
     * result's diffs) after the report, with run_id as the repair's run id
     * (needs facts_table). A run killed inside that repair, rerun with the
     * same report_table, completes it (its facts row) and appends nothing
     * new. */
    bool repair;
    /* version 3: while buckets or keys are IN_FLIGHT, re-check them (each
     * at silver's latest version, as a run would) until none is or this
     * many seconds have passed since the first check; 0: check once. */
    int64_t settle_seconds;
    /* version 4: the run's progress (job "reconcile": "counting", Tier 1,
     * silver's rows; "comparing", Tier 2, both sides' rows, parts buckets;
     * "settling", the re-checks); NULL: none */
    mcdc_progress_fn progress_fn;
    void *progress_user;
    /* version 5: the runtime the reconcile runs in (borrowed; its log sink
     * when log_fn is NULL); NULL: a private one (see "The runtime") */
    mcdc_runtime *runtime;
} mcdc_reconcile_cfg;
#define MCDC_RECONCILE_CFG_INIT \
    {MCDC_RECONCILE_CFG_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, -1.0, false, 0, \
     NULL, NULL, NULL, MCDC_LOG_WARN, false, 0, NULL, NULL, NULL}
/* As mcdc_stream_cfg_init, for this config. */
MCDC_API int mcdc_reconcile_cfg_init(mcdc_reconcile_cfg *out, int version, mcdc_error *err);

/* Failure types of the report (pinned, append-only). */
typedef enum mcdc_reconcile_failure {
    MCDC_RECONCILE_MISSING_TARGET = 0, /* in the source, not in silver */
    MCDC_RECONCILE_MISSING_SOURCE = 1, /* in silver, not in the source */
    MCDC_RECONCILE_RECORD_DIFF = 2,    /* in both, other values */
    MCDC_RECONCILE_IN_FLIGHT = 3,      /* differs while a change to it is in flight */
    MCDC_RECONCILE_CHUNK_TILING = 4,
    MCDC_RECONCILE_CHUNK_ROWS = 5,
    MCDC_RECONCILE_CHUNK_STAMP = 6,
    /* The types a result's failures[] counts (its size, pinned). */
    MCDC_RECONCILE_FAILURE_COUNT = 7,
    /* A key silver holds more than once (another writer appended it); a
     * version-3 result counts it in duplicate_target (an older one, whose
     * failures[] has no room for it, as a RECORD_DIFF). */
    MCDC_RECONCILE_DUPLICATE_TARGET = 7,
    MCDC_RECONCILE_FAILURE_TYPES = 8
} mcdc_reconcile_failure;
/* "MISSING_TARGET", ... (static); NULL for another value. */
MCDC_API const char *mcdc_reconcile_failure_name(int failure);

/* A key that differs and is not in flight: its key as the report's `key`
 * JSON object ({"id": 7}; a NULL key column is null). */
typedef struct mcdc_reconcile_diff {
    mcdc_reconcile_failure failure; /* MISSING_TARGET, MISSING_SOURCE, RECORD_DIFF or
                                       DUPLICATE_TARGET */
    const char *key_json;
} mcdc_reconcile_diff;

/* What one repair did (mcdc_repair_run below; also reconcile's repair): a
 * sized result (see "Results"). It sits whole inside mcdc_reconcile_result
 * (its size there the library's), so it cannot grow without moving that
 * result's later fields: more of a repair's figures would go at the
 * reconcile result's end and in a struct of their own. */
typedef struct mcdc_repair_result {
    size_t size;                  /* sizeof(mcdc_repair_result), set by the caller */
    char run_id[132];
    bool has_lsn;                 /* lsn: the stamp L (false: no keys, nothing done) */
    char lsn[24];
    bool has_commit_ts;           /* L's commit time, UTC microseconds */
    int64_t commit_us;
    int64_t keys;                 /* distinct keys repaired */
    int64_t images, deletes;      /* operation 4 and operation 1 rows */
    int64_t bronze_version;       /* the bronze commit of the repair; -1: none */
    bool already;                 /* a run of this id had appended them: nothing appended now */
} mcdc_repair_result;

/* The reference's ReconcileResult (without its DataFrame), and ours: a
 * sized result (see "Results"). */
typedef struct mcdc_reconcile_result {
    size_t size;                  /* sizeof(mcdc_reconcile_result), set by the caller */
    char run_id[37];              /* a UUID */
    int64_t silver_version;       /* the version compared; -1: no silver table */
    bool has_silver_lsn;          /* silver's applied_lsn, read before that version */
    char silver_lsn[24];
    char source_lsn[24];          /* max_lsn read just before the source was counted */
    int64_t buckets, match, in_flight, mismatch, hashed;
    int64_t failures[MCDC_RECONCILE_FAILURE_COUNT]; /* report rows by failure type */
    /* ours */
    int64_t source_rows, silver_rows;               /* Tier 1's totals */
    int64_t source_rows_hashed, silver_rows_hashed; /* Tier 2's rows, each side */
    int64_t report_rows;          /* rows the run's report holds */
    bool report_written;          /* report_table got them */
    /* The keys that differ and are not in flight, borrowed from the handle
     * until its next run or its free. */
    const mcdc_reconcile_diff *diffs;
    int64_t n_diffs;
    /* The repair that ran (cfg.repair, version 2; none when no key needed
     * one). */
    bool repaired;
    mcdc_repair_result repair;
    /* Report rows of DUPLICATE_TARGET, for a cfg of version 3 or later (an
     * older cfg's run counts them as RECORD_DIFF in failures[]). */
    int64_t duplicate_target;
    /* Something was verified: a bucket MATCH or MISMATCH, a key compared
     * equal, or a failure other than IN_FLIGHT. False when every bucket and
     * key compared was IN_FLIGHT (and there was one): nothing could be
     * proven either way yet. */
    bool verified;
    int64_t rechecks;             /* re-checks of what was in flight (settle_seconds) */
} mcdc_reconcile_result;

typedef struct mcdc_reconcile mcdc_reconcile;
/* Validates cfg (nothing read). opts: the stream's source options
 * (connectionString and captureInstance required), borrowed. */
MCDC_API int mcdc_reconcile_create(mcdc_reconcile **out, const mcdc_opts *opts,
                                   const mcdc_reconcile_cfg *cfg, mcdc_error *err);
/* One run. Errors: a table of another kind, or options of another table
 * than bronze's (MCDC_E_MISMATCH), no silver or no key (MCDC_E_INVALID), a
 * key the source holds twice (MCDC_E_NOT_UNIQUE), the source's and the
 * storage's. *result is filled on MCDC_OK. */
MCDC_API int mcdc_reconcile_run(mcdc_reconcile *r, mcdc_reconcile_result *result,
                                mcdc_error *err);
/* Does the result say something differs (a MISMATCH bucket, or a failure
 * other than IN_FLIGHT, duplicate_target included)? False for NULL or a
 * result whose size is below the first sized version's. */
MCDC_API bool mcdc_reconcile_differs(const mcdc_reconcile_result *r);
/* Asks a running mcdc_reconcile_run (from another thread) to stop: it
 * returns MCDC_E_CANCELLED at its next batch, before its report is
 * written (nothing of the run is recorded). */
MCDC_API void mcdc_reconcile_request_stop(mcdc_reconcile *r);
MCDC_API void mcdc_reconcile_free(mcdc_reconcile *r);
/* The result as the reference's ReconcileResult JSON ({"run_id",
 * "silver_version", "silver_lsn", "source_lsn", "buckets", "match",
 * "in_flight", "mismatch", "hashed", "failures": {type: rows}}, then ours),
 * one line (MCDC_RECONCILE_RESULT_JSON_SIZE bytes always suffice). */
#define MCDC_RECONCILE_RESULT_JSON_SIZE 2048
MCDC_API int mcdc_reconcile_result_json(char *out, size_t cap, const mcdc_reconcile_result *r,
                                        mcdc_error *err);

/* ------------------------------------------------------------------------
 * Repair (docs/repair.md): the current source row of each key that differs
 * appended to bronze as a recorded repair, so that the next apply fixes
 * silver. Keys are JSON objects as reconcile's report holds them
 * ({"id": 42}); every one is checked against bronze's key columns before
 * anything is read. One repair takes L = max_lsn before it reads the keys'
 * rows (point reads, READ COMMITTED), then appends in one bronze commit,
 * with txn(mssql-cdc.repair.<run id>, 0), an operation 4 row for each key
 * the source has and an operation 1 row for each it lacks, stamped
 * _start_lsn L, _commit_ts L's commit time, _seqval NULL; then a facts row
 * of event 'repair'. Again with the same run id, nothing is appended twice.
 * ---------------------------------------------------------------------- */
#define MCDC_REPAIR_CFG_VERSION 3
typedef struct mcdc_repair_cfg {
    int version;                  /* MCDC_REPAIR_CFG_VERSION */
    const char *bronze;           /* the stream's target, named as the stream was given it */
    const char *facts_table;      /* required: the stream's (apply finds repairs there) */
    const char *warehouse;        /* NULL: ./warehouse */
    const char *run_id;           /* NULL with keys_json: a new UUID */
    /* The keys: key objects, or the differing keys of run_id in
     * report_table (failure_type MISSING_TARGET, MISSING_SOURCE,
     * RECORD_DIFF or DUPLICATE_TARGET; not IN_FLIGHT; a run_id the report
     * does not hold is MCDC_E_INVALID). One of the two. */
    const char *const *keys_json;
    size_t n_keys;
    const char *report_table;
    const void *reserved1;        /* leave NULL (a test hook was here: mssqlcdc_testing.h) */
    mcdc_log_fn log_fn;           /* NULL: stderr */
    void *log_user;
    mcdc_log_level log_level;
    /* version 2: a stop request (mcdc_stop_create); NULL: none */
    mcdc_stop *stop;
    /* version 3: the runtime the repair runs in (borrowed; its log sink
     * when log_fn is NULL, its storage options, its metrics); NULL: a
     * private one (see "The runtime") */
    mcdc_runtime *runtime;
} mcdc_repair_cfg;
#define MCDC_REPAIR_CFG_INIT \
    {MCDC_REPAIR_CFG_VERSION, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, \
     MCDC_LOG_WARN, NULL, NULL}
/* As mcdc_stream_cfg_init, for this config. */
MCDC_API int mcdc_repair_cfg_init(mcdc_repair_cfg *out, int version, mcdc_error *err);


/* Runs one repair (opts: the stream's source options, borrowed). Errors:
 * a bad key or run id (MCDC_E_INVALID), the tables' kinds, or options of
 * another table than bronze's (MCDC_E_MISMATCH), bronze missing
 * (MCDC_E_NOTFOUND), the source's and the storage's. */
MCDC_API int mcdc_repair_run(const mcdc_opts *opts, const mcdc_repair_cfg *cfg,
                             mcdc_repair_result *result, mcdc_error *err);
/* The result as one JSON line: {"run_id", "lsn", "commit_ts", "keys",
 * "images", "deletes", "bronze_version", "already"}. */
#define MCDC_REPAIR_RESULT_JSON_SIZE 512
MCDC_API int mcdc_repair_result_json(char *out, size_t cap, const mcdc_repair_result *r,
                                     mcdc_error *err);

/* ------------------------------------------------------------------------
 * Arrow C Data Interface. The struct layouts are fixed by the Arrow
 * specification (ABI); the include guards are the ones the specification
 * asks for so that another project's definitions do not clash.
 * ---------------------------------------------------------------------- */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};

#endif /* ARROW_C_STREAM_INTERFACE */

/* ------------------------------------------------------------------------
 * Change ranges as Arrow streams: plan the change ranges of a capture
 * instance once, read each range anywhere (another thread, process or
 * machine given the same source options), for engines that read in
 * parallel such as a Spark data source.
 *
 * A range is carried by a token: short JSON text naming the capture
 * instance, the range's first and last LSN, its estimated rows, its place
 * in the plan and the output schema's fingerprint. A token holds no part of
 * the connection string. Its "check" field catches a token altered or cut
 * after planning (it is not a signature: there is no secret).
 * ---------------------------------------------------------------------- */
typedef struct mcdc_range_plan mcdc_range_plan;

/* Plans [from, to] (both LSNs included) of opts' captureInstance into
 * commit-aligned ranges balanced by change rows (at most ranges_max, each
 * of at least about 50,000 rows; 0 takes numPartitions, whose auto is the
 * number of CPUs; at most 64). from NULL: the instance's min_lsn; to NULL:
 * the database's max_lsn. to before from plans no range. Opens one
 * connection for the planning and closes it. */
MCDC_API int mcdc_range_plan_create(mcdc_range_plan **out, const mcdc_opts *opts,
                                    const mcdc_lsn_value *from, const mcdc_lsn_value *to,
                                    int ranges_max, mcdc_error *err);
MCDC_API void mcdc_range_plan_free(mcdc_range_plan *p);
/* Number of ranges (0 for NULL). */
MCDC_API size_t mcdc_range_plan_count(const mcdc_range_plan *p);
/* Token of range i, NUL-terminated, in reading order; NULL when i is out of
 * range. Borrowed: valid until mcdc_range_plan_free (copy it to keep it). */
MCDC_API const char *mcdc_range_plan_token(const mcdc_range_plan *p, size_t i);
/* The schema every range's stream has (the reader's output schema): a
 * struct ("+s") whose children are the columns. The caller releases it. */
MCDC_API int mcdc_range_plan_schema(struct ArrowSchema *out, const mcdc_range_plan *p,
                                    mcdc_error *err);

/* What a token says. Set version (MCDC_RANGE_INFO_INIT) before the call;
 * fields may be added at the end under a higher version. */
#define MCDC_RANGE_INFO_VERSION 1
/* 100 characters of up to 4 UTF-8 bytes, and the NUL. */
#define MCDC_CAPTURE_INSTANCE_TEXT_SIZE 401
typedef struct mcdc_range_info {
    int version;                    /* MCDC_RANGE_INFO_VERSION */
    char capture_instance[MCDC_CAPTURE_INSTANCE_TEXT_SIZE];
    mcdc_lsn_value from_lsn, to_lsn; /* closed interval */
    int64_t rows_estimate;          /* change rows the plan expects (0: not estimated) */
    int32_t index, count;           /* range index of count in its plan */
} mcdc_range_info;
#define MCDC_RANGE_INFO_INIT {MCDC_RANGE_INFO_VERSION, {0}, {{0}}, {{0}}, 0, 0, 0}

/* Parses and checks a token. Malformed, altered or foreign text is
 * MCDC_E_INVALID saying what is wrong. */
MCDC_API int mcdc_range_token_parse(mcdc_range_info *out, const char *token, mcdc_error *err);

/* Reads the range of token as an Arrow C stream into *out: the schema of
 * mcdc_range_plan_schema, then batches of up to arrowBatchSize rows in
 * change order (start LSN, command id, seqval, operation), then the end.
 * opts are the source options (connectionString...); their captureInstance
 * may be left out, else must name the token's; the stream keeps a copy, so
 * opts may be freed once this returns. Connects (the capture
 * instance is resolved and its columns read) before returning: a bad token,
 * an unreachable server or columns that changed since the plan
 * (MCDC_E_SCHEMA: plan again) fail here. Rows are read on a thread of the
 * stream, at most two batches ahead of get_next.
 *
 * The stream follows the Arrow C stream interface: get_next from one thread
 * at a time; an error (a purged range is DataLossError, a lost connection
 * is retried first) makes get_next return an errno value (EINVAL, ENOMEM,
 * ECANCELED, else EIO) and get_last_error "<ErrorKind>: <message>", the kind
 * as mcdc_status_kind names it; release may be called at any time, mid-range
 * too: it stops the reading thread and waits for it (at most until the fetch
 * in flight, or a retry's backoff, ends: queryTimeout and the retry limit
 * bound them). Batches already taken stay
 * valid after release. */
MCDC_API int mcdc_range_read(struct ArrowArrayStream *out, const mcdc_opts *opts,
                             const char *token, mcdc_error *err);

/* ------------------------------------------------------------------------
 * A source's positions, for an engine that plans its own batches (the
 * Spark stream source: its offsets are {lsn, commit_ts}, its batches end on
 * a commit, maxCommitsPerBatch caps them). One handle keeps one connection
 * to SQL Server open across calls (an idle Spark stream asks for max_lsn
 * every few milliseconds); a lost connection is opened again and the call
 * retried (transient errors, with backoff) before an error is returned.
 * One thread at a time per handle.
 * ---------------------------------------------------------------------- */
typedef struct mcdc_source mcdc_source;

/* Connects with opts (connectionString, captureInstance...) and resolves
 * the capture instance, and every capture instance of its table, as the
 * stream follows them; the handle keeps a copy of opts. */
MCDC_API int mcdc_source_open(mcdc_source **out, const mcdc_opts *opts, mcdc_error *err);
MCDC_API void mcdc_source_free(mcdc_source *s);
/* The last LSN processed before the first batch, as the startingLsn option
 * says: NULL or "earliest" is the LSN just before the capture instance's
 * min_lsn, "latest" is max_lsn (never below the instance's first LSN less
 * one), else the LSN given ("0x" + hex). */
MCDC_API int mcdc_source_initial_lsn(mcdc_source *s, const char *starting_lsn,
                                     mcdc_lsn_value *out, mcdc_error *err);
/* sys.fn_cdc_get_max_lsn(): the last LSN capture has processed (zero when
 * capture has not written to the database yet). */
MCDC_API int mcdc_source_max_lsn(mcdc_source *s, mcdc_lsn_value *out, mcdc_error *err);
/* The n-th commit (n >= 1) of cdc.lsn_time_mapping after `after`: *found
 * false when fewer than n follow it (*out is then the last one, or zero). */
MCDC_API int mcdc_source_nth_commit_after(mcdc_source *s, const mcdc_lsn_value *after, int64_t n,
                                          mcdc_lsn_value *out, bool *found, mcdc_error *err);
/* The UTC commit time (microseconds since 1970, millisecond precision) of
 * the commit at lsn exactly: *found false when lsn is no commit's (an LSN
 * just before min_lsn, say). */
MCDC_API int mcdc_source_commit_time(mcdc_source *s, const mcdc_lsn_value *lsn, int64_t *utc_us,
                                     bool *found, mcdc_error *err);
/* The LSN of the last commit at or before utc_us (microseconds since 1970,
 * UTC), to the second, on the server's clock (sourceTimeZone):
 * sys.fn_cdc_map_time_to_lsn, as `mssql-cdc seed --as-of` maps a time.
 * *found false when cdc.lsn_time_mapping holds no commit at or before it
 * (cleanup passed it, or CDC began later); a time later than the server's
 * clock is MCDC_E_INVALID. */
MCDC_API int mcdc_source_commit_at(mcdc_source *s, int64_t utc_us, mcdc_lsn_value *out,
                                   bool *found, mcdc_error *err);

/* ---- A batch planned with the stream's guards (the Spark stream source's
 * driver; reference §2.5, ADR 0023 of the reference, invariants 3 and 4).
 * The handle follows the table's capture instances as `mssql-cdc stream`
 * does: the union of their columns is its schema, and a batch crossing a
 * newer instance's start S reads the older one below S and the newer one
 * from S. */

/* The stream's output schema (the union of the instances' columns): the
 * schema of every range mcdc_source_plan_batch plans. The caller releases
 * it. */
MCDC_API int mcdc_source_schema(struct ArrowSchema *out, mcdc_source *s, mcdc_error *err);
/* Where a batch after start should end at most, given the end the
 * positions allow (*end, lowered in place): just before the start S of a
 * newer capture instance whose columns the schema does not hold (*cut
 * true), so that the batch before S is read whole; the next batch, from S,
 * is then refused by mcdc_source_plan_batch (MCDC_E_SCHEMA: restart to take
 * the new schema). */
MCDC_API int mcdc_source_batch_end(mcdc_source *s, const mcdc_lsn_value *start,
                                   mcdc_lsn_value *end, bool *cut, mcdc_error *err);
/* Plans the batch (start, end] (start: the last LSN processed) as the
 * stream plans one, before anything is read: the DDL the instances
 * recorded inside it is classified (a type the schema cannot hold, or any
 * DDL under schemaChangePolicy=fail: MCDC_E_SCHEMA), a newer instance read
 * for the first time must be one the schema holds (MCDC_E_SCHEMA), and the
 * retention guard runs per instance: changes purged past the batch's start
 * are MCDC_E_DATALOSS, or with failOnDataLoss=false skipped (a warning and
 * a data_skipped event). Then each instance's part is cut into ranges
 * (ranges_max in all, 0: numPartitions; at least one per part), whose
 * tokens mcdc_range_read reads (in this schema). end at or before start:
 * a plan of no range. The plan's events are in mcdc_range_plan_events_json. */
MCDC_API int mcdc_source_plan_batch(mcdc_range_plan **out, mcdc_source *s,
                                    const mcdc_lsn_value *start, const mcdc_lsn_value *end,
                                    int ranges_max, mcdc_error *err);
/* What the planning of a batch met, as JSON text: an array of objects
 * {"event", "capture_instance", "lsn", "commit_ts" (absent: no commit maps
 * to it), "detail"}, event one of "schema_change" (detail: the DDL),
 * "capture_instance_switched" (detail: JSON of the switch) and
 * "data_skipped" (detail: JSON of the gap's from_lsn and to_lsn). "[]" for
 * a plan of mcdc_range_plan_create. Borrowed; NULL for NULL. */
MCDC_API const char *mcdc_range_plan_events_json(const mcdc_range_plan *p);

/* ------------------------------------------------------------------------
 * Snapshots as Arrow streams: the tracked table's current rows cut into
 * chunks (or a whole snapshot's parallel ranges) planned once, each read
 * anywhere given the same source options (the Spark binding's
 * mssql_cdc_snapshot source; reference §2.4, §3.7).
 *
 * Chunks are ranges of the key the snapshot is cut on (snapshotKeys, else
 * the capture instance's unique index): [lo, hi) in SQL Server's order of
 * its columns, the first open below, each starting where the one before
 * ends, the last just above the largest key when it was planned (rows
 * inserted above it after the snapshot's LSN are the stream's). A table
 * with no usable key is one chunk. A chunk is carried by a token: JSON text
 * naming the capture instance, the key columns, the chunk's bounds, its
 * place in the plan and the output schema's fingerprint, with a "check"
 * field that catches a token altered or cut after planning (not a
 * signature: there is no secret). A token holds no part of the connection
 * string. Bounds are JSON: integers for an integer key, otherwise the text
 * SQL Server reads back as the value (ISO 8601 times, fixed-notation
 * decimals, "0x" + hex for binary), null for an open end.
 * ---------------------------------------------------------------------- */
typedef struct mcdc_snapshot_plan mcdc_snapshot_plan;

/* Records the snapshot's LSN (snapshotLsn when set, else max_lsn, or the
 * capture instance's first LSN minus one while capture has not reached
 * it), then plans the table of opts' captureInstance: chunk_rows > 0 cuts
 * chunks of at most about chunk_rows rows each (a value held by more rows
 * of a key that is not unique is never split); chunk_rows 0 cuts up to
 * numPartitions ranges for reading the whole snapshot in parallel (uniform
 * ranges of one integer key, else ranges of about the same number of
 * rows). Counts and seeks run under isolationLevel, with lockTimeoutMs.
 * snapshotKeys naming a column the stream does not read or of a type no
 * chunk can be cut on (bit, text, ntext, image, xml, time; datetime2(7) or
 * datetimeoffset(7) but as the last column) is MCDC_E_INVALID. Opens one
 * connection for the planning and closes it. */
MCDC_API int mcdc_snapshot_plan_create(mcdc_snapshot_plan **out, const mcdc_opts *opts,
                                       int64_t chunk_rows, mcdc_error *err);
MCDC_API void mcdc_snapshot_plan_free(mcdc_snapshot_plan *p);
/* Number of chunks (0 for NULL; at least 1 for a plan). */
MCDC_API size_t mcdc_snapshot_plan_count(const mcdc_snapshot_plan *p);
/* Token of chunk i, NUL-terminated, in key order; NULL when i is out of
 * range. Borrowed: valid until mcdc_snapshot_plan_free. */
MCDC_API const char *mcdc_snapshot_plan_token(const mcdc_snapshot_plan *p, size_t i);
/* The snapshot's LSN recorded before planning, "0x" + 20 uppercase hex
 * digits: pass it to mcdc_snapshot_read for every chunk. Borrowed; NULL for
 * NULL. */
MCDC_API const char *mcdc_snapshot_plan_lsn(const mcdc_snapshot_plan *p);
/* The schema every chunk's stream has (the reader's output schema, as
 * mcdc_range_plan_schema's). The caller releases it. */
MCDC_API int mcdc_snapshot_plan_schema(struct ArrowSchema *out, const mcdc_snapshot_plan *p,
                                       mcdc_error *err);

/* Tokens for the chunks of a plan recorded before (the chunks a backfill
 * plan of mssql-cdc backfill or the reference holds, its 'snapshot_plan'
 * row of the plans table), to read through mcdc_snapshot_read as
 * mcdc_snapshot_plan_create's. chunks_json: the plan's JSON array of
 * [lo, hi] bounds, 1 to 1,000,000 of them, as that function describes
 * them; keys_json: the JSON array of the columns they are cut on, which
 * must be the ones a snapshot of opts is cut on now (snapshotKeys, else the
 * capture instance's unique index; names compared ignoring case), else
 * MCDC_E_INVALID saying both. max_json (NULL: none): a keyset plan's
 * largest key when it was planned (its extent's "max"); the last chunk,
 * when its hi is null, then ends at the first key after it now (null when
 * there is none), as mssql-cdc backfill seeks it before each wave, so that
 * rows inserted above it since (the stream's) do not pile up in that chunk.
 * Records the LSN first, as mcdc_snapshot_plan_create. Text that is not
 * such JSON, or bounds not of the keys' shape, is MCDC_E_INVALID; the
 * bounds' values are checked against the columns when a chunk is read.
 * Opens one connection and closes it. */
MCDC_API int mcdc_snapshot_plan_chunks(mcdc_snapshot_plan **out, const mcdc_opts *opts,
                                       const char *keys_json, const char *chunks_json,
                                       const char *max_json, mcdc_error *err);

/* A chunked snapshot's plan as mssql-cdc opens and plans one (its chunked
 * open records the key columns and their extent next to the snapshot's LSN
 * S; its backfill cuts every chunk on that extent once), for a binding that
 * opens and plans such snapshots itself. Records the LSN first, as
 * mcdc_snapshot_plan_create; then the extent: keys_json and extent_json
 * NULL read it now ({"kind":"int","lo":MIN,"hi":MAX,"rows":estimate} for
 * one integer key, else {"kind":"keyset","max":MAX or null}: what an open
 * records, read after its S), or both given (what an open recorded: its
 * key columns, which must be the ones a snapshot of opts is cut on now, as
 * for mcdc_snapshot_plan_chunks, and their extent). chunk_rows > 0 then
 * cuts chunks of at most about chunk_rows rows up to just above the
 * extent's MAX, as mssql-cdc backfill plans them (keys inserted above it
 * after S are the stream's); chunk_rows 0 cuts none: the plan's one chunk
 * is the whole table (an open's, which needs only the extent). Text that is
 * not such JSON, one of the two NULL without the other, or a negative
 * chunk_rows is MCDC_E_INVALID before anything connects. Opens one
 * connection and closes it. */
MCDC_API int mcdc_snapshot_plan_from_extent(mcdc_snapshot_plan **out, const mcdc_opts *opts,
                                            const char *keys_json, const char *extent_json,
                                            int64_t chunk_rows, mcdc_error *err);
/* The extent a plan's chunks were cut on, as compact JSON text: for a plan
 * of mcdc_snapshot_plan_from_extent, or of mcdc_snapshot_plan_create with
 * chunk_rows > 0; NULL for others and for NULL. Borrowed: valid until
 * mcdc_snapshot_plan_free. */
MCDC_API const char *mcdc_snapshot_plan_extent(const mcdc_snapshot_plan *p);

/* What a snapshot token says. Set version (MCDC_SNAPSHOT_INFO_INIT) before
 * the call; fields may be added at the end under a higher version. */
#define MCDC_SNAPSHOT_INFO_VERSION 1
typedef struct mcdc_snapshot_info {
    int version;                    /* MCDC_SNAPSHOT_INFO_VERSION */
    char capture_instance[MCDC_CAPTURE_INSTANCE_TEXT_SIZE];
    int32_t index, count;           /* chunk index of count in its plan */
    int32_t n_keys;                 /* key columns it is cut on (0: the whole table) */
} mcdc_snapshot_info;
#define MCDC_SNAPSHOT_INFO_INIT {MCDC_SNAPSHOT_INFO_VERSION, {0}, 0, 0, 0}

/* Parses and checks a token. Malformed, altered or foreign text is
 * MCDC_E_INVALID saying what is wrong. */
MCDC_API int mcdc_snapshot_token_parse(mcdc_snapshot_info *out, const char *token,
                                       mcdc_error *err);

/* Reads the chunk of token as an Arrow C stream into *out: the schema of
 * mcdc_snapshot_plan_schema, then batches of up to arrowBatchSize rows in
 * no particular order, then the end. Every row is the table's current row
 * stamped as a snapshot row: _operation 0, _start_lsn = lsn (the plan's,
 * mcdc_snapshot_plan_lsn, or another recorded before this read), _commit_ts
 * its commit time, _seqval and _command_id NULL. Read under isolationLevel
 * (snapshot: the database needs ALLOW_SNAPSHOT_ISOLATION ON), with
 * lockTimeoutMs, never NOLOCK. opts are the source options; their
 * captureInstance may be left out, else must name the token's; the stream
 * keeps a copy. A bad token or LSN, an unreachable server or columns that
 * changed since the plan (MCDC_E_SCHEMA: plan again) fail here; errors while
 * reading come from get_next, as mcdc_range_read's do (same errno values,
 * get_last_error "<ErrorKind>: <message>", release at any time). */
MCDC_API int mcdc_snapshot_read(struct ArrowArrayStream *out, const mcdc_opts *opts,
                                const char *token, const char *lsn, mcdc_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MSSQLCDC_H */
