/*
 * mcdc_options.h - the stream's source options, with the reference library's
 * names (captureInstance, connectionString, maxCommitsPerBatch...).
 *
 * The public part (create, set, load_file, get, check_required, known
 * names) is declared in include/mssqlcdc.h. Names are matched ignoring case;
 * values are validated when set, so a bad value fails at once with a message
 * naming the option. An unknown name is kept and warned about (as the
 * reference does): a typo must not silently change behaviour, nor stop a job
 * that runs.
 */
#ifndef MCDC_OPTIONS_H
#define MCDC_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_storage.h"
#include "mcdc_util.h"

/* The options the engine reads, in the order of mcdc_opts_known_names. */
typedef enum mcdc_opt {
    MCDC_OPT_CAPTURE_INSTANCE,
    MCDC_OPT_CONNECTION_STRING,
    MCDC_OPT_BACKEND,
    MCDC_OPT_CONNECT_TIMEOUT,
    MCDC_OPT_QUERY_TIMEOUT,
    MCDC_OPT_LOCK_TIMEOUT_MS,
    MCDC_OPT_SOURCE_TIME_ZONE,
    MCDC_OPT_COLUMNS,
    MCDC_OPT_INCLUDE_COMMAND_ID,
    MCDC_OPT_STARTING_LSN,
    MCDC_OPT_MAX_COMMITS_PER_BATCH,
    MCDC_OPT_NUM_PARTITIONS,
    MCDC_OPT_ARROW_BATCH_SIZE,
    MCDC_OPT_FAIL_ON_DATA_LOSS,
    MCDC_OPT_SCHEMA_CHANGE_POLICY,
    MCDC_OPT_METRICS_PATH,
    MCDC_OPT_SNAPSHOT_LSN,
    MCDC_OPT_SNAPSHOT_CHUNKS,
    MCDC_OPT_SNAPSHOT_KEYS,
    MCDC_OPT_ISOLATION_LEVEL,
    MCDC_OPT_CAPTURE_WAIT_SECONDS,
    MCDC_OPT_OVERLAP_BATCHES,
    MCDC_OPT_COUNT
} mcdc_opt;

/* ---- typed accessors ------------------------------------------------------
 * The engine reads options through these, one function per option, never by
 * name. Why functions over the handle rather than a struct filled once:
 * every value was validated when it was set (mcdc_opts_set, the file
 * loader), so a read cannot fail and needs no second validation pass; the
 * handle is what each job already holds and copies (mcdc_opts_clone, a
 * range read overriding captureInstance), so there is no second copy to keep
 * in step with it; and each accessor states its option's type, default and
 * "unset" meaning in one place, where a misspelt name read through
 * mcdc_opts_get was a silent NULL. Texts are borrowed from the handle. */
/* Whether the option was given (a default does not count). */
bool mcdc_opt_is_set(const mcdc_opts *o, mcdc_opt opt);
/* The option's name as the reference spells it ("startingLsn"). Static. */
const char *mcdc_opt_name(mcdc_opt opt);

/* NULL when not given (both are required: mcdc_opts_check_required). */
const char *mcdc_opt_capture_instance(const mcdc_opts *o);
const char *mcdc_opt_connection_string(const mcdc_opts *o);
typedef enum mcdc_backend_opt {
    MCDC_BACKEND_AUTO,
    MCDC_BACKEND_NATIVE,
    MCDC_BACKEND_FREETDS,
    MCDC_BACKEND_REFERENCE /* mssql-python, arrow-odbc: the reference's drivers */
} mcdc_backend_opt;
/* backend (default auto); *given = the value as written (for messages). */
mcdc_backend_opt mcdc_opt_backend(const mcdc_opts *o, const char **given);
/* connectTimeout (default 30) and queryTimeout (default 300; 0 waits
 * forever), seconds, 0..MCDC_TIMEOUT_S_MAX. */
int mcdc_opt_connect_timeout_s(const mcdc_opts *o);
int mcdc_opt_query_timeout_s(const mcdc_opts *o);
/* captureWaitSeconds (ours; default 600, 0..MCDC_TIMEOUT_S_MAX): how long a
 * snapshot waits for capture to record a new capture instance's start LSN
 * (SQL Server leaves it NULL until its capture job has processed the
 * enable: seconds under load, minutes on a quiet database). */
int mcdc_opt_capture_wait_s(const mcdc_opts *o);
/* overlapBatches (ours; auto|true|false, default auto): whether the stream
 * reads its next batch while the one before is uploaded and committed
 * (mcdc_frame_cfg.overlap). *is_auto: left to the stream (on for a target
 * on an object store, where the upload is a wait; off on local disk). */
bool mcdc_opt_overlap_batches(const mcdc_opts *o, bool *is_auto);
/* lockTimeoutMs, 0..INT32_MAX, or -1 when not given (wait forever). */
int64_t mcdc_opt_lock_timeout_ms(const mcdc_opts *o);
/* sourceTimeZone: a zone name, or NULL for auto (detect the server's). */
const char *mcdc_opt_source_time_zone(const mcdc_opts *o);
/* columns (Spark DDL), or NULL: inferred from the capture instance. */
const char *mcdc_opt_columns(const mcdc_opts *o);
bool mcdc_opt_include_command_id(const mcdc_opts *o); /* default true */
typedef enum mcdc_start_kind { MCDC_START_EARLIEST, MCDC_START_LATEST, MCDC_START_LSN } mcdc_start_kind;
/* startingLsn (default earliest); *text = the value ("earliest", "latest"
 * or the LSN as given). */
mcdc_start_kind mcdc_opt_starting_lsn(const mcdc_opts *o, const char **text);
/* maxCommitsPerBatch, or 0 when not given (unlimited). */
int64_t mcdc_opt_max_commits_per_batch(const mcdc_opts *o);
/* numPartitions with auto resolved to the online processors, within
 * 1..MCDC_PARTITIONS_MAX. */
int mcdc_opt_num_partitions(const mcdc_opts *o);
/* arrowBatchSize, rows (default 10000). */
int64_t mcdc_opt_arrow_batch_size(const mcdc_opts *o);
bool mcdc_opt_fail_on_data_loss(const mcdc_opts *o); /* default true */
/* schemaChangePolicy=fail: any DDL inside a batch stops the stream
 * (default classify: only a type change the stream cannot hold does). */
bool mcdc_opt_schema_change_fail(const mcdc_opts *o);
/* snapshotLsn as an LSN text, or NULL: the max_lsn read before the
 * snapshot (not given, or earliest/latest). */
const char *mcdc_opt_snapshot_lsn(const mcdc_opts *o);
/* snapshotKeys (a JSON list of column names), or NULL: the unique index. */
const char *mcdc_opt_snapshot_keys(const mcdc_opts *o);
/* isolationLevel=snapshot (default readCommitted: false). */
bool mcdc_opt_snapshot_isolation(const mcdc_opts *o);

/* The test hooks (mssqlcdc_testing.h): the crash point ("" none; borrowed)
 * and the first retry's backoff (0: the default). o may be NULL. */
const char *mcdc_opt_crash_at(const mcdc_opts *o);
int64_t mcdc_opt_retry_backoff_ms(const mcdc_opts *o);

/* Storage options (AWS_REGION, AZURE_STORAGE_ACCOUNT_KEY...: the names are
 * mcdc_opts_storage_names): the value of name (upper case, exactly as in
 * that list) or NULL when it was not given. Borrowed. What a job's storage
 * env answers (mcdc_ctx_take_storage). */
const char *mcdc_opt_storage(const mcdc_opts *o, const char *name);
/* A storage env whose option() answers opts' storage options (opts is
 * borrowed and must outlive the env; NULL: no options) and whose memory
 * stores are mem's (NULL: none; a test's env). Every opener of a job or of
 * a call given opts goes through one of these. */
mcdc_storage_env mcdc_opts_storage_env(const mcdc_opts *opts, const mcdc_storage_env *mem);
/* Whether o holds any storage option (a job given some uses only its own,
 * not its runtime's). o may be NULL. */
bool mcdc_opts_has_storage(const mcdc_opts *o);
/* Whether name (any case) is a storage option's name. */
bool mcdc_opt_is_storage(const char *name);
/* Whether name (any case) is a storage option whose value is a secret
 * (keys, tokens, connection strings): never echoed. */
bool mcdc_opt_storage_secret(const char *name);

/* Calls fn for each option that was set, in the order set; values of secret
 * options (connectionString, storage keys and tokens) are given redacted. */
void mcdc_opts_each(const mcdc_opts *o, void (*fn)(void *ctx, const char *name, const char *value),
                    void *ctx);
/* A copy of o (its unknown names too, without warning again). Caller frees
 * it with mcdc_opts_free. */
int mcdc_opts_clone(mcdc_opts **out, const mcdc_opts *o, mcdc_error *err);
/* Unknown option names seen by set, comma-separated; borrowed, "" if none. */
const char *mcdc_opts_unknown(const mcdc_opts *o);

/* The one check of a capture instance name, for the option and for every
 * name the engine puts in T-SQL (cdc.[<name>_CT]...): 1-100 characters
 * (UTF-8), without ']' and without control characters. NULL is empty. */
int mcdc_validate_capture_instance(const char *name, mcdc_error *err);

#endif /* MCDC_OPTIONS_H */
