/*
 * mcdc_lake.h - Delta tables as the pipeline uses them: open by name or
 * path, append batches exactly once (txn), read and replace small tables.
 * Built on the delta and parquet modules; the pipeline sees only this.
 */
#ifndef MCDC_LAKE_H
#define MCDC_LAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_storage.h"

typedef struct mcdc_table mcdc_table;

/* What a table is to mssql-cdc. Stored in the table's configuration as
 * mssql_cdc.kind when we create it, with mssql_cdc.schema_version set to
 * the reference's migration count for that kind (so the reference finds
 * our tables current and runs no migration on them). */
typedef enum mcdc_table_kind {
    MCDC_KIND_NONE = 0, /* not one of ours */
    MCDC_KIND_BRONZE,
    MCDC_KIND_FACTS,
    MCDC_KIND_CONTROL,
    MCDC_KIND_PLANS,
    MCDC_KIND_SILVER,
    MCDC_KIND_RECONCILE,
    MCDC_KIND_COUNT
} mcdc_table_kind;
#define MCDC_TABLE_PROP_KIND "mssql_cdc.kind"
#define MCDC_TABLE_PROP_SCHEMA_VERSION "mssql_cdc.schema_version"
/* The Parquet codec of the table's data files (zstd, snappy, lz4_raw, gzip,
 * uncompressed), honoured by every writer of the table; unset: zstd. Set
 * with ALTER TABLE ... SET TBLPROPERTIES, or among the creation properties
 * (mcdc_table_props.configuration). docs/tables.md says why zstd. */
#define MCDC_TABLE_PROP_PARQUET_CODEC "mssql_cdc.parquet.compression"
/* "bronze", "facts", ... (static). */
const char *mcdc_table_kind_name(mcdc_table_kind k);
int mcdc_table_kind_schema_version(mcdc_table_kind k);

/* A table is a path (contains '/' or ':') or a name "schema.table" under the
 * warehouse directory (<warehouse>/<schema>.db/<table>, Spark's layout). The
 * table need not exist yet. */
int mcdc_table_open(mcdc_table **out, const char *name_or_path, const char *warehouse,
                    mcdc_error *err);
/* The same with an env resolving mem:// locations (NULL: none). */
int mcdc_table_open_env(mcdc_table **out, const mcdc_storage_env *env, const char *name_or_path,
                        const char *warehouse, mcdc_error *err);
void mcdc_table_close(mcdc_table *t);
/* t is its table's only writer for this run: its reads and commits trust
 * the snapshot it holds (mcdc_delta_table_keep_snapshot), so a commit is
 * one conditional put on an object store. */
void mcdc_table_keep_snapshot(mcdc_table *t);
/* Where name_or_path lives (see mcdc_table_open), without opening it.
 * *out owned. */
int mcdc_table_resolve(char **out, const char *name_or_path, const char *warehouse,
                       mcdc_error *err);
/* The table's directory; borrowed. */
const char *mcdc_table_path(const mcdc_table *t);
/* The storage under the table (borrowed): for files a job keeps next to its
 * data files, in directories whose names start with '_' (readers and
 * VACUUM leave those alone). */
mcdc_storage *mcdc_table_storage(mcdc_table *t);
/* The name the user gave; borrowed. */
const char *mcdc_table_name(const mcdc_table *t);
int mcdc_table_exists(mcdc_table *t, bool *exists, mcdc_error *err);
/* The table's columns as its latest version declares them; *out NULL when
 * the table does not exist yet. Owned (mcdc_schema_unref). */
int mcdc_table_schema(mcdc_table *t, mcdc_schema **out, mcdc_error *err);
/* The latest version (listing the log); -1 when there is no table. */
int mcdc_table_version(mcdc_table *t, int64_t *version, mcdc_error *err);
/* Latest txn version recorded for app_id, or -1. Reads only the commits
 * after the ones the handle has seen (cheap to call before every batch). */
int mcdc_table_txn_version(mcdc_table *t, const char *app_id, int64_t *version, mcdc_error *err);
/* The commit that recorded txn (app_id, txn_version): its version and its
 * userMetadata (*user_metadata owned, NULL when it has none). Searched back
 * from the newest commit; MCDC_E_NOTFOUND when no commit still in the log
 * records it. */
int mcdc_table_txn_commit(mcdc_table *t, const char *app_id, int64_t txn_version,
                          char **user_metadata, int64_t *version, mcdc_error *err);
/* Calls fn with each commit's version and userMetadata (NULL: none), the
 * newest first, down to version 0 or until fn sets *stop. A version whose
 * commit file is gone (a log cleaned up behind a checkpoint) ends the walk:
 * what is older is not known. One read of a log file per version. */
typedef int (*mcdc_commit_meta_fn)(void *ctx, int64_t version, const char *user_metadata,
                                   bool *stop, mcdc_error *err);
int mcdc_table_each_commit_back(mcdc_table *t, mcdc_commit_meta_fn fn, void *ctx,
                                mcdc_error *err);
/* A location a command is given, in one role. */
typedef struct mcdc_role {
    const char *role;  /* as the user knows it: "--target" */
    const char *given; /* as given; NULL: not given (left out) */
    bool table;        /* a table (a schema.table name resolves under the warehouse);
                          else a directory or file path as it is */
} mcdc_role;
#define MCDC_ROLES_MAX 8
/* One place, one role: no two of the n (<= MCDC_ROLES_MAX) locations given
 * are one, and none lies inside another (MCDC_E_MISMATCH naming both, before
 * anything is read or written). canon (may be NULL) gets each location's
 * canonical form (owned; NULL where not given). */
int mcdc_roles_check(const mcdc_role *r, int n, const char *warehouse, char **canon,
                     mcdc_error *err);
/* The same for n tables already opened (NULL: none in role[i]). */
int mcdc_roles_check_tables(mcdc_table *const *t, const char *const *role, int n,
                            mcdc_error *err);

/* Whether the table's location is a regular file (where its directory
 * should be). */
bool mcdc_table_is_file(const mcdc_table *t);
/* The same of a local path or file: URI. */
bool mcdc_location_is_file(const char *location);
/* Refuses (MCDC_E_MISMATCH, naming `role` and what the table is) a table
 * that is not of kind `want`: by its mssql_cdc.kind property, else by its
 * columns; a directory that is no Delta table but holds files is refused
 * too, and a file where the table's directory should be (MCDC_E_INVALID). A
 * missing or empty location is fine (the table will be created). A silver
 * table may also be one with neither (the reference marks none). */
int mcdc_table_check_kind(mcdc_table *t, mcdc_table_kind want, const char *role,
                          mcdc_error *err);
/* Calls fn with the statistics JSON of every live file (NULL when a file
 * has none); fn returning non-zero stops. */
typedef int (*mcdc_file_stats_fn)(void *ctx, const char *stats_json, mcdc_error *err);
int mcdc_table_each_file_stats(mcdc_table *t, mcdc_file_stats_fn fn, void *ctx, mcdc_error *err);

typedef struct mcdc_table_props {
    /* Delta configuration entries set when the table is created, as
     * "key=value" strings; NULL-terminated list, may be NULL. */
    const char *const *configuration;
    /* Threads encoding and compressing Parquet column chunks; 0 = the
     * writer's default (half the cores: a stream's readers need the rest). */
    int32_t parquet_threads;
    /* The kind a table created by this write gets (MCDC_KIND_NONE: no
     * property); an existing table of another kind is MCDC_E_MISMATCH at
     * commit, before anything is published. */
    mcdc_table_kind kind;
    /* A data file is closed once this many uncompressed bytes were written
     * to it (0: 128 MiB; tests roll small files with it). */
    int64_t file_bytes;
    /* Data files an appender keeps open at once, one per lane
     * (mcdc_appender_write_lane): 0 or 1, one; at most
     * MCDC_APPENDER_LANES_MAX. The lanes share one writer's row-group
     * budget: each lane's row groups are cut at
     * MCDC_PARQUET_ROW_GROUP_BYTES_DEFAULT / lanes, so the column chunks
     * held in memory are about one writer's whatever the lanes. */
    int32_t lanes;
} mcdc_table_props;

/* Appends batches as Parquet files (bounded memory: files roll at the row
 * group/file size) and commits them in one Delta commit. */
typedef struct mcdc_appender mcdc_appender;
int mcdc_appender_open(mcdc_appender **out, mcdc_table *t, mcdc_schema *schema,
                       const mcdc_table_props *props, mcdc_error *err);
/* Appends b's rows to the open data file (opening one when none is). A
 * file that reaches its size is finished here and published (fsync, then
 * visible) on a thread of the appender's while the next one is written; at
 * most one publishes behind, and a failure of its publication is the next
 * call's. */
int mcdc_appender_write(mcdc_appender *a, const mcdc_batch *b, mcdc_error *err);
/* The same into lane's open data file (0 <= lane < mcdc_table_props.lanes):
 * each lane's files hold its batches only, in the order written, and fill
 * to the full size (mcdc_table_props.file_bytes); mcdc_appender_write is
 * lane 0's. The commit finishes every lane's open file and publishes them
 * all. */
int mcdc_appender_write_lane(mcdc_appender *a, int lane, const mcdc_batch *b, mcdc_error *err);
/* One commit: the files written, txn(app_id, txn_version) when app_id is
 * not NULL, commitInfo with operation and user_metadata (may be NULL). The
 * table is created by the first commit (the schema given to open); columns
 * the table lacks are added (schema evolution). Column mapping (reference
 * §2.3.2): a new table is created with delta.columnMapping.mode=name when a
 * column name holds a space, tab, newline or ,;{}()= (or when props set the
 * mode); files of a mapped table use the physical names. An existing table
 * without column mapping receiving such a new column is MCDC_E_SCHEMA whose
 * message holds the ALTER TABLE statement enabling it (never done here);
 * another writer moving the column layout while files are written is
 * MCDC_E_CONFLICT. When app_id already has a
 * version >= txn_version, nothing is committed, the files are deleted and
 * *skipped is true. */
int mcdc_appender_commit(mcdc_appender *a, const char *app_id, int64_t txn_version,
                         const char *user_metadata, bool *skipped, int64_t *version,
                         mcdc_error *err);
/* The one commit call: the appender's files added, files of the table
 * removed, a txn, the operation and userMetadata. Appends, rewrites of small
 * tables and merges are all this call. */
struct mcdc_delta_dv;
struct mcdc_delta_merge_info;
typedef struct mcdc_table_commit {
    const char *app_id;               /* NULL: no txn */
    int64_t txn_version;
    const char *operation;            /* commitInfo.operation; NULL: "WRITE" */
    const char *user_metadata;        /* NULL: none */
    const char *const *remove_paths;  /* live files of read_version this commit removes */
    size_t n_removes;
    /* -1: an append (rebased over concurrent appends); >= 0: a rewrite of
     * that version, committed as the next version only (any commit since is
     * MCDC_E_CONFLICT). Removes need it. */
    int64_t read_version;
    /* NULL, or n_removes entries: a removed file whose entry has a
     * storage_type comes back in the same commit with that deletion vector
     * (remove(path, old dv) + add(path, new dv), its statistics marked
     * tightBounds false): merge-on-read. The DV file must be written. */
    const struct mcdc_delta_dv *readd_dvs;
    /* A MERGE's row counts and predicates for its commitInfo (operation
     * "MERGE"); NULL for any other operation. */
    const struct mcdc_delta_merge_info *merge;
} mcdc_table_commit;
int mcdc_appender_commit_with(mcdc_appender *a, const mcdc_table_commit *c, bool *skipped,
                              int64_t *version, mcdc_error *err);

/* Closes the data file being written, if any, so that the next write
 * starts another: callers that cut files themselves (a merge keeping each
 * file to one key range). *path (may be NULL): the closed file's path
 * relative to the table root, borrowed until the appender is freed; NULL
 * when no file was open. */
int mcdc_appender_roll(mcdc_appender *a, const char **path, mcdc_error *err);
/* (roll and fills: of an appender of one lane) */
/* Frees; an uncommitted appender deletes the files it wrote. NULL-safe. */
/* Creates the table when missing (with its kind and schema, no rows), as
 * the first write would; an existing one is checked for its kind, and a
 * creator that won a race is no error. Call before any write. */
int mcdc_appender_ensure(mcdc_appender *a, mcdc_error *err);
void mcdc_appender_free(mcdc_appender *a);
int64_t mcdc_appender_rows(const mcdc_appender *a);
/* Decides now, from the table's latest version, how the data files name
 * their columns (what the first write does otherwise): then writes touch
 * only the table's storage, never its handle, and may run on another
 * thread while the handle commits (a unit read while the one before
 * publishes, mcdc_frame.h). Call before any write. *settled: the table
 * exists and has every column of the schema already, so a commit of ours
 * before this appender's cannot move the layout (another writer's still
 * can: the commit checks it again). */
int mcdc_appender_prepare(mcdc_appender *a, bool *settled, mcdc_error *err);
/* The encoding threads of its files (mcdc_table_props.parquet_threads),
 * before its first write. */
void mcdc_appender_set_threads(mcdc_appender *a, int threads);
/* Whether writing b finishes the open file (it reaches its size), which
 * then publishes while the next one is written. */
bool mcdc_appender_fills(const mcdc_appender *a, const mcdc_batch *b);

/* ---- views, files and scans ----------------------------------------------
 * A view is one version of a table: its schema (logical column names), its
 * live data files with their statistics, and how those files name their
 * columns (physical names on a column-mapped table). Readers read one file
 * of a view, pull-style; scans read many files, push-style. Both give rows
 * in the table's logical column names (columns a file lacks read NULL),
 * only the columns asked for, in that order. */
typedef struct mcdc_table_view mcdc_table_view;
/* The view of version (-1: the latest); *out NULL (MCDC_OK) when the table
 * does not exist. The view borrows t. */
int mcdc_table_view_open(mcdc_table_view **out, mcdc_table *t, int64_t version,
                         mcdc_error *err);
void mcdc_table_view_free(mcdc_table_view *v);
int64_t mcdc_table_view_version(const mcdc_table_view *v);
/* Borrowed from the view. */
const mcdc_schema *mcdc_table_view_schema(const mcdc_table_view *v);
/* True when the version's protocol lists the table feature name. */
bool mcdc_table_view_has_feature(const mcdc_table_view *v, const char *name);
/* A metaData.configuration value, NULL when absent; borrowed. */
const char *mcdc_table_view_config(const mcdc_table_view *v, const char *key);
/* Partition columns of the version (0: unpartitioned). */
size_t mcdc_table_view_partition_columns(const mcdc_table_view *v);
/* One live data file; the strings are borrowed from the view. */
typedef struct mcdc_table_file {
    const char *path;       /* relative to the table root */
    int64_t bytes;
    const char *stats_json; /* NULL: no statistics (numRecords counts deleted rows too) */
    int64_t dv_rows;        /* rows its deletion vector deletes; 0: none */
} mcdc_table_file;
/* The live rows a file holds by its statistics (numRecords less the rows
 * its deletion vector deletes); -1 when it has none. */
int64_t mcdc_table_file_rows(const mcdc_table_file *f);
/* The live rows of the view's files by their statistics; -1 when a file
 * has none. */
int64_t mcdc_table_view_rows(const mcdc_table_view *v);
size_t mcdc_table_view_file_count(const mcdc_table_view *v);
/* Files sorted by path. */
mcdc_table_file mcdc_table_view_file(const mcdc_table_view *v, size_t i);
/* The name a column has in the files' statistics (its physical name on a
 * column-mapped table); NULL when the view has no such column. */
const char *mcdc_table_view_stats_name(const mcdc_table_view *v, const char *column);

typedef struct mcdc_table_reader mcdc_table_reader;
/* Opens file path of the view (which must outlive the reader) for the
 * columns named (NULL: every column of the view). prune (may be NULL):
 * row groups that cannot hold a value of its prune_column in [lo, hi) are
 * skipped, as a scan skips them. */
struct mcdc_table_scan;
int mcdc_table_reader_open(mcdc_table_reader **out, mcdc_table_view *v, const char *path,
                           const char *const *columns, int32_t n_columns,
                           const struct mcdc_table_scan *prune, mcdc_error *err);
/* The next batch (owned by the caller), NULL at the end. */
int mcdc_table_reader_next(mcdc_batch **out, mcdc_table_reader *r, mcdc_error *err);
const char *mcdc_table_reader_path(const mcdc_table_reader *r);
/* Where the rows of the batch _next gave last lie in the file, counting the
 * rows its deletion vector deletes (the positions a deletion vector holds):
 * row i of the batch is row first + (keep ? keep[i] : i) of the file. */
void mcdc_table_reader_positions(const mcdc_table_reader *r, int64_t *first,
                                 const int32_t **keep);
/* The file's deletion vector as read (NULL: none); borrowed. */
struct mcdc_dv_bitmap;
const struct mcdc_dv_bitmap *mcdc_table_reader_dv(const mcdc_table_reader *r);
void mcdc_table_reader_free(mcdc_table_reader *r);

/* Scans: the rows of one version of a table, batch by batch. Pruning on one
 * integer or text column: files (by their Delta statistics) and row groups
 * (by their Parquet statistics) that cannot hold a value in [lo, hi) are
 * not read; the rows of what is read are not filtered (the caller's
 * predicate does that). file_fn (may be NULL) skips more files: it sees
 * each file that pruning kept, and returns false to skip it.
 * Threads: a scan lists its files first, calling file_fn for each on the
 * calling thread before fn sees a batch (so file_fn sees every file even when
 * fn later stops the scan early). Then one decoder thread of the scan's own
 * opens and decodes the files while fn runs on the calling thread, on every
 * batch in file order, one at a time: fn and file_fn are never called from
 * another thread. At most MCDC_SCAN_AHEAD_BATCHES decoded batches wait for
 * fn, and the decoder holds one more. A scan of files smaller than
 * MCDC_SCAN_AHEAD_BYTES_MIN in all, or that ends within its first batches,
 * starts no thread. The thread is joined before the scan returns. */
typedef struct mcdc_scan_bound {
    bool set;                     /* false: open */
    const char *text;             /* a text bound, else NULL */
    int64_t i;                    /* an integer bound when text is NULL */
} mcdc_scan_bound;
typedef bool (*mcdc_table_file_fn)(void *ctx, const mcdc_table_view *v, const mcdc_table_file *f);
typedef struct mcdc_table_scan {
    int64_t version;              /* -1: the latest */
    const char *const *columns;   /* NULL: every column */
    int32_t n_columns;
    const char *prune_column;     /* NULL: read every file */
    mcdc_scan_bound lo, hi;       /* lo <= value < hi */
    mcdc_table_file_fn file_fn;   /* NULL: none */
    void *file_ctx;
    /* NULL: the files in the view's order; else in ascending order of
     * their smallest value of this integer column by their statistics
     * (files without one first, each in the view's order) */
    const char *order_column;
} mcdc_table_scan;
#define MCDC_TABLE_SCAN_INIT \
    {-1, NULL, 0, NULL, {false, NULL, 0}, {false, NULL, 0}, NULL, NULL, NULL}
/* A file_fn that keeps every file and sums the rows the files hold by their
 * statistics (mcdc_table_file_rows) into the mcdc_scan_rows its ctx points
 * to: what a scan will read, before it reads (row groups it prunes aside). */
typedef struct mcdc_scan_rows {
    int64_t rows;
    int64_t files;
    bool unknown; /* a file without statistics: rows says too little */
} mcdc_scan_rows;
bool mcdc_scan_rows_fn(void *ctx, const mcdc_table_view *v, const mcdc_table_file *f);
/* fn owns each batch; an error it returns stops the scan (the decoder too)
 * and is returned, wrapped with the table and version but for
 * MCDC_E_CANCELLED. *version_read: the version scanned (-1: no table, fn
 * never called). *files_read (may be NULL): data files opened up to the
 * batch fn stopped at, or up to the error, as if decoded one by one. */
int mcdc_table_scan_run(mcdc_table *t, const mcdc_table_scan *scan, mcdc_batch_fn fn, void *ctx,
                        int64_t *version_read, int64_t *files_read, mcdc_error *err);

/* Every row of a (small) table in one batch (NULL when the table does not
 * exist or is empty), and the version read (-1 when missing). Columns carry
 * the logical names (physical ones are mapped back). */
int mcdc_table_read_all(mcdc_table *t, mcdc_batch **out, int64_t *version, mcdc_error *err);
/* Replaces the table's rows with b, provided the table is still at
 * read_version (-1: must not exist yet): else MCDC_E_CONFLICT, nothing
 * written. Creates the table with b's schema when missing. merge: what the
 * replace did to the rows, as a MERGE (its commitInfo). */
int mcdc_table_replace(mcdc_table *t, const mcdc_batch *b, int64_t read_version,
                       const mcdc_table_props *props, const struct mcdc_delta_merge_info *merge,
                       int64_t *version, mcdc_error *err);

#endif /* MCDC_LAKE_H */
