/*
 * mcdc_delta.h - the Delta Lake transaction log: snapshots (log replay),
 * commits (create, append with txn exactly-once and optimistic concurrency),
 * schema and statistics JSON. Protocol facts: spec/formats.md PART A.
 *
 * Data files are written by the caller (with the Parquet writer, through
 * mcdc_delta_table_storage()); this module only commits them: the caller
 * hands over `add` actions (path, size, modificationTime, dataChange, stats).
 * Every read and write of the log, checkpoints and data files goes through
 * the table's storage (src/storage).
 *
 * Table names. A table is addressed by a location or by a name:
 *   - a string containing '/' or ':' is a location, opened by the storage's
 *     scheme table (mcdc_storage_open_env): a path, a file: URI, mem://
 *     (with an env), s3:// and the Azure forms; an object store without a
 *     backend (gs://) is refused when the name is resolved (MCDC_E_INVALID,
 *     "not built yet");
 *   - "schema.table" resolves to <warehouse>/<schema>.db/<table> (Spark's
 *     convention for a database's default location);
 *   - a bare "table" is MCDC_E_INVALID: it could mean ./table or a table
 *     under the warehouse, and the message asks for one of the two.
 * Names are used as given (no case folding); a part may not be empty, start
 * with '.', or contain '/', '\\' or ':'.
 *
 * Versions written: protocol (1,2) by default, (3,7) with readerFeatures and
 * writerFeatures ["timestampNtz"] when the schema has a timestamp_ntz column,
 * and with "deletionVectors" in both when created with the configuration
 * delta.enableDeletionVectors=true.
 * Column mapping (formats.md A9), mode "name" only: a table created with the
 * configuration delta.columnMapping.mode=name gets protocol (2,5), or (3,7)
 * with "columnMapping" in both feature lists when timestamp_ntz is needed
 * too; every field carries delta.columnMapping.id (1..n) and
 * delta.columnMapping.physicalName ("col-<uuid>" unless the caller names
 * it), and the configuration delta.columnMapping.maxColumnId. On such a
 * table the caller writes Parquet columns and statistics under the physical
 * names (mcdc_delta_field_meta); schema evolution gives new columns the next
 * ids and bumps maxColumnId.
 * Versions read: reader 1, 2 (column mapping mode "name" or "none") and 3
 * with features timestampNtz, columnMapping, deletionVectors (the
 * descriptors are carried; readers skip the rows with mcdc_delta_dv.h),
 * vacuumProtocolCheck, v2Checkpoint.
 * Checkpoints read: classic, multi-part, V2 (UUID-named, Parquet or JSON,
 * with sidecars). When the JSON commits since version 0 are all present, an
 * unreadable checkpoint is replayed around (with a warning).
 * Writes are refused on tables using features we cannot honour (column
 * mapping mode "id", invariants, CHECK constraints, generated or identity columns,
 * unknown writer features).
 */
#ifndef MCDC_DELTA_H
#define MCDC_DELTA_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_storage.h"
#include "mcdc_util.h"

/* Spark's delta.checkpointInterval default. */
#define MCDC_DELTA_CHECKPOINT_INTERVAL_DEFAULT 10
/* Statistics: Spark's delta.dataSkippingNumIndexedCols default, and the
 * prefix length strings are cut to. */
#define MCDC_DELTA_STATS_INDEXED_COLS_DEFAULT 32
#define MCDC_DELTA_STATS_STRING_PREFIX_CHARS 32

/* ---- table names ---------------------------------------------------------- */

/* Resolves name_or_path (see the header comment) to a location (a path or
 * URI, as given, or under the warehouse location). warehouse may be NULL
 * when name_or_path is a location. *out_path is owned by the caller
 * (mcdc_free). */
int mcdc_delta_resolve_path(char **out_path, const char *name_or_path, const char *warehouse,
                            mcdc_error *err);

/* ---- the table handle ----------------------------------------------------- */

typedef struct mcdc_delta_table mcdc_delta_table;
typedef struct mcdc_delta_snapshot mcdc_delta_snapshot;

/* Opens (does not create) a table; the directory need not exist yet. env
 * (may be NULL) resolves mem:// locations: a job context or a test carries
 * it (see mcdc_storage_env). */
int mcdc_delta_table_open_env(mcdc_delta_table **out, const mcdc_storage_env *env,
                              const char *name_or_path, const char *warehouse,
                              mcdc_error *err);
/* The same without an env (paths and file: URIs). */
int mcdc_delta_table_open(mcdc_delta_table **out, const char *name_or_path,
                          const char *warehouse, mcdc_error *err);
/* Opens a table over an existing storage; takes ownership of *storage (set
 * to NULL), also on failure. */
int mcdc_delta_table_open_storage(mcdc_delta_table **out, mcdc_storage **storage,
                                  mcdc_error *err);
void mcdc_delta_table_free(mcdc_delta_table *t);
/* The table's root ("/lake/bronze.db/orders", "mem://t/bronze"). Borrowed. */
const char *mcdc_delta_table_location(const mcdc_delta_table *t);
/* The storage under the table: write data files with it. Borrowed. */
mcdc_storage *mcdc_delta_table_storage(mcdc_delta_table *t);
/* Latest committed version by listing the log; -1 when there is no table. */
int mcdc_delta_table_latest_version(int64_t *out_version, mcdc_delta_table *t,
                                    mcdc_error *err);

/* The latest snapshot, kept by the handle and brought up to date by
 * reading only the commits after the cached version (a cached version whose
 * commit was deleted, a restored older log, is replayed afresh). *out is
 * borrowed until the next call on t; NULL (MCDC_OK) when there is no table. */
int mcdc_delta_table_latest(const mcdc_delta_snapshot **out, mcdc_delta_table *t,
                            mcdc_error *err);
/* A copy of the latest snapshot, *out NULL when there is no table: the
 * handle's cache brought up to date (mcdc_delta_table_latest) and copied,
 * so that a reader of the latest version costs a check of the log's end,
 * not a replay of the log, and keeps its own snapshot however the cache
 * moves. A keeper (mcdc_delta_table_keep_snapshot) loads the log instead. */
int mcdc_delta_table_latest_copy(mcdc_delta_snapshot **out, mcdc_delta_table *t,
                                 mcdc_error *err);

/* Makes t the keeper of its own snapshot: once loaded, the cached snapshot
 * is trusted as the table's latest and brought forward only by t's own
 * commits (applied from the bytes written) and by the commits a lost
 * commit race reads; reads (mcdc_delta_table_latest) and appends no longer
 * check the log first. An append then costs one request on an object
 * store, the conditional put of version N + 1: a put that finds the version
 * taken reads the newer commits and applies the usual exactly-once and
 * conflict rules to them, so nothing is lost or doubled when the trust was
 * misplaced. For a writer that is its table's only writer for a run (the
 * stream on bronze, facts and control, under its checkpoint's hold): what
 * it reads between its commits is then what it wrote. A log rewound under
 * a running keeper (a restored backup) is seen at the next open only. */
void mcdc_delta_table_keep_snapshot(mcdc_delta_table *t);

/* ---- file actions --------------------------------------------------------- */

/* A deletion vector descriptor (PROTOCOL.md "Deletion Vector Descriptor
 * Schema"): the rows of a data file that are logically deleted. storage_type
 * 'u' (a file under the table named by the UUID that the last 20 Z85
 * characters of path_or_inline encode, after an optional prefix directory),
 * 'p' (path_or_inline is the file's absolute path) or 'i' (path_or_inline
 * is the Z85 of the bitmap itself); 0 = the file has none. The codec is in
 * mcdc_delta_dv.h. */
typedef struct mcdc_delta_dv {
    char storage_type;
    const char *path_or_inline;
    int64_t offset;        /* of the DV in its file; -1 = absent (inline) */
    int32_t size_bytes;    /* of the serialized bitmap */
    int64_t cardinality;   /* rows deleted */
    int64_t max_row_index; /* -1 = absent */
} mcdc_delta_dv;

/* One data file (add) or tombstone (remove). In an append the strings are
 * borrowed from the caller; in a snapshot they are owned by the snapshot.
 * path is relative to the table root and NOT URI-escaped (the log stores it
 * escaped; escaping and unescaping are done here). */
typedef struct mcdc_delta_file {
    const char *path;
    int64_t size_bytes;
    int64_t modification_time_ms;
    bool data_change;
    const char *stats_json;            /* NULL = no statistics */
    const char *partition_values_json; /* NULL = {} (unpartitioned) */
    const char *dv_unique_id;          /* read only: deletion vector id, NULL = none */
    int64_t deletion_timestamp_ms;     /* remove only; <= 0 when writing = now */
    /* Its deletion vector (storage_type 0: none). A file with one is the
     * pair (path, its unique id): updating it is remove(path, old dv) +
     * add(path, new dv). Written into add and remove actions as given. */
    mcdc_delta_dv dv;
} mcdc_delta_file;

/* ---- creating a table ----------------------------------------------------- */

#define MCDC_DELTA_CREATE_OPTS_VERSION 1
typedef struct mcdc_delta_create_opts {
    int struct_version;               /* MCDC_DELTA_CREATE_OPTS_VERSION */
    const mcdc_schema *schema;        /* required */
    const char *const *field_comments; /* NULL, or schema->n_fields entries (NULL = none) */
    const char *const *config_keys;   /* metaData.configuration, n_config pairs */
    const char *const *config_values;
    size_t n_config;
    const char *name;                 /* optional metaData.name */
    const char *description;          /* optional */
    const char *user_metadata;        /* optional commitInfo.userMetadata */
    /* Used when the configuration sets delta.columnMapping.mode=name: NULL,
     * or schema->n_fields physical names (a NULL entry = "col-<uuid>"). */
    const char *const *physical_names;
} mcdc_delta_create_opts;
#define MCDC_DELTA_CREATE_OPTS_INIT {MCDC_DELTA_CREATE_OPTS_VERSION, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL}

typedef struct mcdc_delta_commit_result {
    int64_t version;  /* the version written, or the one that made us skip */
    bool skipped;     /* nothing written: already done (txn) or table exists */
    int attempts;     /* put-if-absent attempts (1 without contention) */
} mcdc_delta_commit_result;

/* Creates version 0 (commitInfo CREATE TABLE, protocol, metaData). If the
 * table already exists (created earlier, or by a concurrent writer that won
 * the race) with a compatible schema (every one of our columns present with
 * the same type and nullability), nothing is written and out->skipped is
 * true; an incompatible one is MCDC_E_SCHEMA. */
int mcdc_delta_create(mcdc_delta_commit_result *out, mcdc_delta_table *t,
                      const mcdc_delta_create_opts *opts, mcdc_error *err);

/* ---- appending ------------------------------------------------------------ */

/* What a MERGE did, for its commitInfo (Delta's operationParameters and
 * operationMetrics, which DESCRIBE HISTORY and delta-rs' history() show).
 * The counts of files, bytes and deletion vectors come from the commit's
 * own actions; the row counts and times are the caller's. */
typedef struct mcdc_delta_merge_info {
    /* operationParameters, as Delta writes them: JSON arrays as text.
     * NULL: "[]". */
    const char *predicate;              /* ["<join condition>"] */
    const char *matched_predicates;     /* [{"predicate":..,"actionType":"update"}] */
    const char *not_matched_predicates; /* [{"actionType":"insert"}] */
    int64_t source_rows;
    int64_t rows_inserted;
    int64_t rows_updated; /* matched rows given a new image */
    int64_t rows_deleted; /* matched rows deleted */
    int64_t rows_copied;  /* rows of rewritten files written again unchanged */
    int64_t execution_ms;
    int64_t scan_ms;
    int64_t rewrite_ms;
} mcdc_delta_merge_info;

#define MCDC_DELTA_APPEND_OPTS_VERSION 1
typedef struct mcdc_delta_append_opts {
    int struct_version;             /* MCDC_DELTA_APPEND_OPTS_VERSION */
    const mcdc_delta_file *adds;    /* data files already written */
    size_t n_adds;
    const mcdc_delta_file *removes; /* files logically deleted (rewrites) */
    size_t n_removes;
    const char *app_id;             /* txn appId; NULL = no txn */
    int64_t txn_version;            /* txn version (>= 0) when app_id is set */
    const char *user_metadata;      /* commitInfo.userMetadata, NULL = none */
    const char *operation;          /* commitInfo.operation, NULL = "WRITE" */
    const char *commit_info_json;   /* NULL, or a JSON object whose keys are
                                       added to commitInfo (e.g. {"cdc":{...}}) */
    const mcdc_schema *schema;      /* NULL, or the evolved schema: the current
                                       columns unchanged plus new nullable ones */
    const char *const *field_comments; /* for schema: NULL or n_fields entries */
    /* For schema on a column-mapped table: NULL or n_fields physical names
     * for the new columns (entries of existing columns are ignored; NULL =
     * "col-<uuid>"). The data files must use them. */
    const char *const *physical_names;
    /* -1: an append, rebased over concurrent commits that only add files.
     * >= 0: a read-modify-write of that version (a small table rewritten
     * whole): it commits only as version read_version + 1, and any other
     * commit since (another engine's MERGE included) is MCDC_E_CONFLICT. */
    int64_t read_version;
    /* commitInfo of a WRITE: operationParameters.canMergeSchema true (the
     * writer adds the columns a batch brings: bronze, silver). */
    bool can_merge_schema;
    /* commitInfo of a MERGE (operation "MERGE"); NULL otherwise. */
    const mcdc_delta_merge_info *merge;
} mcdc_delta_append_opts;
#define MCDC_DELTA_APPEND_OPTS_INIT {MCDC_DELTA_APPEND_OPTS_VERSION, NULL, 0, NULL, 0, NULL, -1, NULL, NULL, NULL, NULL, NULL, NULL, -1, false, NULL}

/* One commit: [commitInfo] [metaData if the schema evolves] add* remove* [txn].
 * Exactly once: when app_id is set and the table's txn for it is already
 * >= txn_version, nothing is written and out->skipped is true (MCDC_OK).
 * Concurrency: the commit file is created put-if-absent; on a lost race the
 * winning commits are read; a protocol change we cannot write, a metaData
 * change (schema, partitioning) or our own evolution racing another is
 * MCDC_E_CONFLICT; a winner's txn for our app_id re-applies the skip rule;
 * anything else (their adds) is retried at the next version, at most
 * MCDC_DELTA_COMMIT_RETRIES_MAX times. A checkpoint is attempted when the
 * new version is a multiple of delta.checkpointInterval (default 10).
 * Once the commit file is published the result is MCDC_OK: reading it back
 * or the checkpoint failing afterwards is only logged. */
int mcdc_delta_append(mcdc_delta_commit_result *out, mcdc_delta_table *t,
                      const mcdc_delta_append_opts *opts, mcdc_error *err);

/* ---- snapshots (log replay) ------------------------------------------------ */

/* Replays the log up to version (-1 = latest). MCDC_E_NOTFOUND when there is
 * no table (or no such version), MCDC_E_CORRUPT for an unparsable commit or a
 * gap in the versions (the message names the file), MCDC_E_UNSUPPORTED for a
 * protocol or feature we cannot read. */
int mcdc_delta_snapshot_load(mcdc_delta_snapshot **out, mcdc_delta_table *t, int64_t version,
                             mcdc_error *err);
/* The latest version with one listing of the log; *out NULL (MCDC_OK) when
 * the log has no commit and no checkpoint. */
int mcdc_delta_snapshot_load_latest(mcdc_delta_snapshot **out, mcdc_delta_table *t,
                                    mcdc_error *err);
void mcdc_delta_snapshot_free(mcdc_delta_snapshot *s);
/* A copy of s that owns all it holds, for a reader that must not see s
 * change under it. */
int mcdc_delta_snapshot_copy(mcdc_delta_snapshot **out, const mcdc_delta_snapshot *s,
                             mcdc_error *err);
int64_t mcdc_delta_snapshot_version(const mcdc_delta_snapshot *s);
void mcdc_delta_snapshot_protocol(const mcdc_delta_snapshot *s, int32_t *min_reader,
                                  int32_t *min_writer);
/* True when name is in readerFeatures or writerFeatures. */
bool mcdc_delta_snapshot_has_feature(const mcdc_delta_snapshot *s, const char *name);
/* metaData fields; borrowed from the snapshot. */
const char *mcdc_delta_snapshot_table_id(const mcdc_delta_snapshot *s);
const char *mcdc_delta_snapshot_schema_string(const mcdc_delta_snapshot *s);
/* A metaData.configuration value, NULL when absent. */
const char *mcdc_delta_snapshot_config(const mcdc_delta_snapshot *s, const char *key);
size_t mcdc_delta_snapshot_partition_column_count(const mcdc_delta_snapshot *s);
/* The schema as an mcdc_schema (flat tables only: nested types are
 * MCDC_E_UNSUPPORTED); *out_meta (optional) gets per-field comment,
 * physical name and column id, free it with mcdc_delta_field_meta_free. */
typedef struct mcdc_delta_field_meta mcdc_delta_field_meta;
int mcdc_delta_snapshot_schema(mcdc_schema **out, mcdc_delta_field_meta **out_meta,
                               const mcdc_delta_snapshot *s, mcdc_error *err);
/* True when the table uses column mapping mode "name": data files and
 * statistics use the physical names of mcdc_delta_field_meta. */
bool mcdc_delta_snapshot_column_mapping(const mcdc_delta_snapshot *s);
/* Live data files, sorted by path. Borrowed. */
size_t mcdc_delta_snapshot_file_count(const mcdc_delta_snapshot *s);
const mcdc_delta_file *mcdc_delta_snapshot_file(const mcdc_delta_snapshot *s, size_t i);
/* Sum of live file sizes, and of numRecords from stats less the rows deletion
 * vectors delete (-1 when a file has no statistics). */
int64_t mcdc_delta_snapshot_total_bytes(const mcdc_delta_snapshot *s);
int64_t mcdc_delta_snapshot_total_records(const mcdc_delta_snapshot *s);
/* numRecords of a file's statistics JSON (deleted rows included); -1 when
 * there are none. */
int64_t mcdc_delta_stats_records(const char *stats_json);
/* Remove tombstones (in replay order). Borrowed. */
size_t mcdc_delta_snapshot_tombstone_count(const mcdc_delta_snapshot *s);
const mcdc_delta_file *mcdc_delta_snapshot_tombstone(const mcdc_delta_snapshot *s, size_t i);
/* Latest txn version of app_id, -1 when none. */
int64_t mcdc_delta_snapshot_txn_version(const mcdc_delta_snapshot *s, const char *app_id);
/* domainMetadata configuration of a live domain, NULL when none. */
const char *mcdc_delta_snapshot_domain(const mcdc_delta_snapshot *s, const char *domain);
/* Checks every live file exists with the logged size: MCDC_E_NOTFOUND or
 * MCDC_E_CORRUPT naming the first bad file. */
int mcdc_delta_snapshot_verify_files(const mcdc_delta_snapshot *s, mcdc_delta_table *t,
                                     mcdc_error *err);

/* ---- commit info of one version -------------------------------------------- */

typedef struct mcdc_delta_commit_info {
    int64_t version;
    int64_t timestamp_ms;  /* -1 when absent */
    char *operation;       /* owned; NULL when absent */
    char *user_metadata;   /* owned; NULL when absent */
    char *engine_info;     /* owned; NULL when absent */
    char *json;            /* owned; the whole commitInfo object, "{}" when none */
    int64_t txn_version;   /* the commit's txn for the app_id asked, -1 = none */
} mcdc_delta_commit_info;

/* Reads the commitInfo of one version; app_id (optional) selects the txn
 * reported in txn_version. */
int mcdc_delta_commit_info_read(mcdc_delta_commit_info **out, mcdc_delta_table *t,
                                int64_t version, const char *app_id, mcdc_error *err);
void mcdc_delta_commit_info_free(mcdc_delta_commit_info *ci);

/* ---- checkpoints ------------------------------------------------------------ */

/* Writes the classic single-part checkpoint of version (protocol, metaData,
 * txn, domainMetadata, live adds with stats as JSON, tombstones younger than
 * delta.deletedFileRetentionDuration, default 1 week) and moves
 * _last_checkpoint forward. An existing checkpoint file is never replaced
 * (a concurrent writer's has the same content). mcdc_delta_append calls it
 * every delta.checkpointInterval versions (default 10); its failure there is
 * logged, never the commit's failure. */
int mcdc_delta_checkpoint(mcdc_delta_table *t, int64_t version, mcdc_error *err);

/* ---- schema JSON (schemaString) --------------------------------------------- */

struct mcdc_delta_field_meta {
    char *comment;       /* owned; "comment" key of the field metadata, or NULL */
    char *physical_name; /* owned; delta.columnMapping.physicalName, or NULL */
    int64_t column_id;   /* delta.columnMapping.id, 0 when absent */
};
void mcdc_delta_field_meta_free(mcdc_delta_field_meta *m, int32_t n_fields);

/* Delta schema JSON of s; fixed binary becomes binary. comments: NULL or
 * n_fields entries (each NULL = none). *out_json owned by the caller. */
int mcdc_delta_schema_to_json(char **out_json, const mcdc_schema *s,
                              const char *const *comments, mcdc_error *err);
/* The same with column mapping metadata: ids and physical are NULL or
 * n_fields entries (an id <= 0 or a NULL name leaves that key out). */
int mcdc_delta_schema_to_json_mapped(char **out_json, const mcdc_schema *s,
                                     const char *const *comments, const int64_t *ids,
                                     const char *const *physical, mcdc_error *err);
/* True when a column name holds a character Delta allows only with column
 * mapping: space, tab, newline or ,;{}()= (reference §2.3.2). */
bool mcdc_delta_name_needs_column_mapping(const char *name);
/* A new physical name "col-<uuid v4>" into out. */
#define MCDC_DELTA_PHYSICAL_NAME_LEN 41
void mcdc_delta_physical_name_new(char out[MCDC_DELTA_PHYSICAL_NAME_LEN]);
/* Parses a schemaString into a new schema (one reference, unref it). Nested
 * types are MCDC_E_UNSUPPORTED; out_meta optional (n_fields entries). */
int mcdc_delta_schema_from_json(mcdc_schema **out, mcdc_delta_field_meta **out_meta,
                                const char *json, mcdc_error *err);
/* True when any field is timestamp_ntz (needs protocol 3/7). */
bool mcdc_delta_schema_needs_ntz(const mcdc_schema *s);

/* ---- statistics JSON (add.stats) --------------------------------------------- */

/* One bound. Which member counts follows the field type: i for bool/ints/
 * date32 (days)/timestamps (µs), f for float/double, dec_lo/dec_hi for
 * decimal (128-bit two's complement, unscaled), bytes/len for utf8. */
typedef struct mcdc_delta_value {
    int64_t i;
    double f;
    uint64_t dec_lo;
    int64_t dec_hi;
    const uint8_t *bytes;
    size_t len;
} mcdc_delta_value;

typedef struct mcdc_delta_col_stats {
    bool has_min_max;   /* false: no non-null value, or bounds unknown */
    mcdc_delta_value min;
    mcdc_delta_value max;
    int64_t null_count;
} mcdc_delta_col_stats;

/* Builds {"numRecords":n,"minValues":{..},"maxValues":{..},"nullCount":{..}}
 * for the first indexed_cols fields (-1 = all). Rules (formats.md A5):
 * strings longer than MCDC_DELTA_STATS_STRING_PREFIX_CHARS characters get a
 * prefix as min and the prefix with its last character incremented as max
 * (omitted when no character can be incremented); timestamps are written in
 * ms (min rounded down, max rounded up); booleans and binary get null counts
 * only; NaN or infinite bounds are omitted. *out_json owned by the caller. */
int mcdc_delta_stats_json(char **out_json, const mcdc_schema *s, int64_t num_records,
                          const mcdc_delta_col_stats *cols, int32_t indexed_cols,
                          mcdc_error *err);

#endif /* MCDC_DELTA_H */
