/*
 * mcdc_lake.c - Delta tables for the pipeline, on the delta and parquet
 * modules: appends of Parquet files with txn, small-table reads and
 * replaces.
 */
#include "mcdc_lake.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_delta.h"
#include "mcdc_delta_dv.h"
#include "mcdc_parquet.h"
#include "mcdc_tables.h"

/* A data file rolls over at this many uncompressed bytes: Spark's and
 * delta-rs's targets are 128 MiB-1 GiB; 128 MiB keeps files few and reads
 * parallel. */
#define LAKE_FILE_BYTES_TARGET (128LL * 1024 * 1024)
/* A data file's writer starts from the previous file's encoding choices
 * (trial compression of each column's first values is ~6% of the writer's
 * CPU on a 600K-row file) except every this many files, which choose anew. */
#define LAKE_CHOOSE_EVERY 8

struct mcdc_table {
    char *name;
    mcdc_delta_table *dt;
};

int mcdc_table_open(mcdc_table **out, const char *name_or_path, const char *warehouse,
                    mcdc_error *err) {
    return mcdc_table_open_env(out, NULL, name_or_path, warehouse, err);
}

int mcdc_table_open_env(mcdc_table **out, const mcdc_storage_env *env, const char *name_or_path,
                        const char *warehouse, mcdc_error *err) {
    *out = NULL;
    mcdc_table *t = mcdc_calloc(1, sizeof *t);
    if (t == NULL || (t->name = mcdc_strdup(name_or_path)) == NULL) {
        mcdc_free(t);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    int rc = mcdc_delta_table_open_env(&t->dt, env, name_or_path,
                                       warehouse ? warehouse : "warehouse", err);
    if (rc) {
        mcdc_free(t->name);
        mcdc_free(t);
        return rc;
    }
    *out = t;
    return MCDC_OK;
}

int mcdc_table_resolve(char **out, const char *name_or_path, const char *warehouse,
                       mcdc_error *err) {
    return mcdc_delta_resolve_path(out, name_or_path, warehouse ? warehouse : "warehouse", err);
}

void mcdc_table_close(mcdc_table *t) {
    if (t == NULL) return;
    mcdc_delta_table_free(t->dt);
    mcdc_free(t->name);
    mcdc_free(t);
}

void mcdc_table_keep_snapshot(mcdc_table *t) { mcdc_delta_table_keep_snapshot(t->dt); }

const char *mcdc_table_path(const mcdc_table *t) { return mcdc_delta_table_location(t->dt); }
const char *mcdc_table_name(const mcdc_table *t) { return t->name; }
mcdc_storage *mcdc_table_storage(mcdc_table *t) { return mcdc_delta_table_storage(t->dt); }

int mcdc_table_exists(mcdc_table *t, bool *exists, mcdc_error *err) {
    int64_t v;
    int rc = mcdc_delta_table_latest_version(&v, t->dt, err);
    *exists = rc == MCDC_OK && v >= 0;
    return rc;
}

int mcdc_table_schema(mcdc_table *t, mcdc_schema **out, mcdc_error *err) {
    *out = NULL;
    const mcdc_delta_snapshot *s = NULL;
    int rc = mcdc_delta_table_latest(&s, t->dt, err);
    if (rc || s == NULL) return rc;
    return mcdc_delta_snapshot_schema(out, NULL, s, err);
}

int mcdc_table_version(mcdc_table *t, int64_t *version, mcdc_error *err) {
    return mcdc_delta_table_latest_version(version, t->dt, err);
}

/* The latest snapshot, or NULL (MCDC_OK) when the table does not exist:
 * a copy of the handle's cached snapshot brought up to date, so that the
 * reads of one run (views, scans, replaces) replay the log once and then
 * only check its end (on an object store each request is a round trip). */
static int load_latest(mcdc_delta_snapshot **out, mcdc_table *t, mcdc_error *err) {
    return mcdc_delta_table_latest_copy(out, t->dt, err);
}

int mcdc_table_txn_version(mcdc_table *t, const char *app_id, int64_t *version, mcdc_error *err) {
    const mcdc_delta_snapshot *s;
    *version = -1;
    int rc = mcdc_delta_table_latest(&s, t->dt, err);
    if (rc == MCDC_OK && s) *version = mcdc_delta_snapshot_txn_version(s, app_id);
    return rc;
}

/* How far back a txn's commit is looked for. A stream's own commit is the
 * newest or close to it; further back than this the log is someone else's
 * history, and not finding it proves nothing either way. */
#define LAKE_TXN_SEARCH_VERSIONS 1000

int mcdc_table_txn_commit(mcdc_table *t, const char *app_id, int64_t txn_version,
                          char **user_metadata, int64_t *version, mcdc_error *err) {
    *user_metadata = NULL;
    *version = -1;
    int64_t latest;
    int rc = mcdc_delta_table_latest_version(&latest, t->dt, err);
    if (rc) return rc;
    for (int64_t v = latest; v >= 0 && v > latest - LAKE_TXN_SEARCH_VERSIONS; v--) {
        mcdc_delta_commit_info *ci;
        rc = mcdc_delta_commit_info_read(&ci, t->dt, v, app_id, err);
        if (rc == MCDC_E_NOTFOUND) break; /* cleaned up: only a checkpoint holds it */
        if (rc) return rc;
        bool hit = ci->txn_version == txn_version;
        if (hit) {
            *version = v;
            if (ci->user_metadata && (*user_metadata = mcdc_strdup(ci->user_metadata)) == NULL)
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        }
        mcdc_delta_commit_info_free(ci);
        if (hit || rc) return rc;
    }
    return mcdc_error_set(err, MCDC_E_NOTFOUND,
                          "table %s: no commit in its log (searched back from version %lld) "
                          "records txn %lld of app id '%s'",
                          t->name, (long long)latest, (long long)txn_version, app_id);
}

int mcdc_table_each_commit_back(mcdc_table *t, mcdc_commit_meta_fn fn, void *ctx,
                                mcdc_error *err) {
    int64_t latest;
    int rc = mcdc_delta_table_latest_version(&latest, t->dt, err);
    bool stop = false;
    for (int64_t v = latest; rc == MCDC_OK && v >= 0 && !stop; v--) {
        mcdc_delta_commit_info *ci;
        rc = mcdc_delta_commit_info_read(&ci, t->dt, v, NULL, err);
        if (rc == MCDC_E_NOTFOUND) return MCDC_OK; /* cleaned up: only a checkpoint holds it */
        if (rc == MCDC_OK) rc = fn(ctx, v, ci->user_metadata, &stop, err);
        mcdc_delta_commit_info_free(ci);
    }
    if (rc) mcdc_error_wrap(err, "reading the log of table %s", t->name);
    return rc;
}

/* ---- kinds -------------------------------------------------------------------
 * Every table mssql-cdc creates says what it is in its configuration
 * (mssql_cdc.kind), next to the reference's mssql_cdc.schema_version. A
 * table without the property (the reference's, an older build's) is known
 * by the columns only its kind has. */
static const struct {
    const char *name;
    int schema_version; /* the reference 0.8.0's count of migrations */
    const char *columns[5];
} KINDS[MCDC_KIND_COUNT] = {
    [MCDC_KIND_NONE] = {"none", 0, {NULL}},
    [MCDC_KIND_BRONZE] = {"bronze", 2, {"_start_lsn", "_seqval", "_operation", "_commit_ts", NULL}},
    [MCDC_KIND_FACTS] = {"facts", 14, {"app_id", "batch_id", "event", "written_at", NULL}},
    [MCDC_KIND_CONTROL] = {"control", 4, {"table_name", "finalized_until", NULL}},
    [MCDC_KIND_PLANS] = {"plans", 1, {"snapshot", "event", "detail", NULL}},
    [MCDC_KIND_SILVER] = {"silver", 0, {NULL}},
    [MCDC_KIND_RECONCILE] = {"reconcile", 0, {"run_id", "bucket_lo", "failure_type", NULL}},
};

const char *mcdc_table_kind_name(mcdc_table_kind k) {
    MCDC_ASSERT(k >= 0 && k < MCDC_KIND_COUNT);
    return KINDS[k].name;
}

int mcdc_table_kind_schema_version(mcdc_table_kind k) {
    MCDC_ASSERT(k >= 0 && k < MCDC_KIND_COUNT);
    return KINDS[k].schema_version;
}

static bool has_columns(const mcdc_schema *s, const char *const *cols) {
    if (cols[0] == NULL) return false;
    for (size_t i = 0; cols[i]; i++)
        if (mcdc_schema_find(s, cols[i]) < 0) return false;
    return true;
}

/* What s is: by its property, else by its columns (MCDC_KIND_NONE when
 * neither tells; *by_property says which). */
static int snapshot_kind(const mcdc_delta_snapshot *s, mcdc_table_kind *out, const char **prop,
                         mcdc_error *err) {
    *out = MCDC_KIND_NONE;
    *prop = mcdc_delta_snapshot_config(s, MCDC_TABLE_PROP_KIND);
    if (*prop) {
        for (int k = 1; k < MCDC_KIND_COUNT; k++)
            if (strcmp(*prop, KINDS[k].name) == 0) *out = (mcdc_table_kind)k;
        return MCDC_OK;
    }
    mcdc_schema *schema;
    int rc = mcdc_delta_snapshot_schema(&schema, NULL, s, err);
    if (rc) return rc;
    for (int k = 1; k < MCDC_KIND_COUNT && *out == MCDC_KIND_NONE; k++)
        if (has_columns(schema, KINDS[k].columns)) *out = (mcdc_table_kind)k;
    mcdc_schema_unref(schema);
    return MCDC_OK;
}

/* The refusal of a table of another kind, naming what it is and how we know. */
static int kind_mismatch(const mcdc_table *t, mcdc_table_kind want, const char *role,
                         mcdc_table_kind have, const char *prop, mcdc_error *err) {
    char what[160];
    if (prop && have != MCDC_KIND_NONE)
        snprintf(what, sizeof what, "a %s table (%s=%s)", KINDS[have].name, MCDC_TABLE_PROP_KIND,
                 prop);
    else if (prop)
        snprintf(what, sizeof what, "a table of an unknown kind (%s=%s)", MCDC_TABLE_PROP_KIND,
                 prop);
    else if (have != MCDC_KIND_NONE)
        snprintf(what, sizeof what, "a %s table (it has the %s table's columns)",
                 KINDS[have].name, KINDS[have].name);
    else
        snprintf(what, sizeof what, "a Delta table that is not one of mssql-cdc's (it lacks "
                 "the %s table's columns)", KINDS[want].name);
    return mcdc_error_set(err, MCDC_E_MISMATCH,
                          "%s %s is %s, not a %s table: nothing was written. Give %s a table of "
                          "its own (a new path creates one)",
                          role, t->name, what, KINDS[want].name, role);
}

bool mcdc_table_is_file(const mcdc_table *t) { return mcdc_location_is_file(mcdc_table_path(t)); }

bool mcdc_location_is_file(const char *location) {
    /* An object store has no directories: an object at a table's prefix
     * neither hides nor blocks the keys below it. */
    if (!mcdc_location_is_local(location)) return false;
    size_t n = strlen(location);
    while (n > 1 && location[n - 1] == '/') n--;
    size_t cut = n;
    while (cut > 0 && location[cut - 1] != '/') cut--;
    char *parent = cut == 0 ? mcdc_strdup(".") : mcdc_strndup(location, cut);
    char *base = mcdc_strndup(location + cut, n - cut);
    mcdc_storage *st = NULL;
    int64_t bytes;
    bool file = parent && base && *base && mcdc_storage_open(&st, parent, NULL) == MCDC_OK &&
                mcdc_storage_size(st, base, &bytes, NULL) == MCDC_OK;
    mcdc_storage_free(st);
    mcdc_free(parent);
    mcdc_free(base);
    return file;
}

int mcdc_table_check_kind(mcdc_table *t, mcdc_table_kind want, const char *role,
                          mcdc_error *err) {
    MCDC_ASSERT(want > MCDC_KIND_NONE && want < MCDC_KIND_COUNT);
    const mcdc_delta_snapshot *s;
    int rc = mcdc_delta_table_latest(&s, t->dt, err);
    if (rc == MCDC_E_IO && mcdc_table_is_file(t))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s %s is a file, not a Delta table (a Delta table is a directory "
                              "holding _delta_log/): nothing was written. Give %s the table's "
                              "directory, or a new path",
                              role, t->name, role);
    /* a file where a directory above it should be (a warehouse that is a file) */
    const char *at = mcdc_table_path(t);
    for (size_t n = strlen(at); rc == MCDC_E_IO && n > 1; n--) {
        if (at[n - 1] != '/') continue;
        char *up = mcdc_strndup(at, n - 1);
        bool file = up && mcdc_location_is_file(up);
        if (file)
            mcdc_error_set(err, MCDC_E_INVALID,
                           "%s %s: %s is a file, so no table can be under it: nothing was "
                           "written. Give %s a path under a directory",
                           role, t->name, up, role);
        mcdc_free(up);
        if (file) return MCDC_E_INVALID;
    }
    if (rc) return mcdc_error_wrap(err, "%s %s", role, t->name), rc;
    if (s == NULL) {
        /* Not a table yet: only an empty place may become one. */
        mcdc_storage_listing l = {0};
        rc = mcdc_storage_list(mcdc_delta_table_storage(t->dt), "", &l, err);
        size_t n = l.count;
        mcdc_storage_listing_free(&l);
        if (rc) return rc;
        if (n == 0) return MCDC_OK;
        /* Files, but maybe of a writer that created the table between the
         * two looks: its log decides. */
        rc = mcdc_delta_table_latest(&s, t->dt, err);
        if (rc) return mcdc_error_wrap(err, "%s %s", role, t->name), rc;
        if (s == NULL)
            return mcdc_error_set(err, MCDC_E_MISMATCH,
                                  "%s %s is not a Delta table (no _delta_log) but holds files: "
                                  "nothing was written. Give %s a new or empty directory (or, "
                                  "if another writer is creating this table right now, run "
                                  "again once it has)",
                                  role, t->name, role);
    }
    mcdc_table_kind have;
    const char *prop;
    rc = snapshot_kind(s, &have, &prop, err);
    if (rc) return rc;
    /* the reference's silver tables carry no property, and no columns tell */
    if (want == MCDC_KIND_SILVER && have == MCDC_KIND_NONE && prop == NULL) return MCDC_OK;
    if (have != want) return kind_mismatch(t, want, role, have, prop, err);
    return MCDC_OK;
}

int mcdc_table_each_file_stats(mcdc_table *t, mcdc_file_stats_fn fn, void *ctx, mcdc_error *err) {
    const mcdc_delta_snapshot *s;
    int rc = mcdc_delta_table_latest(&s, t->dt, err);
    size_t n = rc == MCDC_OK && s ? mcdc_delta_snapshot_file_count(s) : 0;
    for (size_t i = 0; i < n && rc == MCDC_OK; i++)
        rc = fn(ctx, mcdc_delta_snapshot_file(s, i)->stats_json, err);
    return rc;
}

/* ---- appends ---------------------------------------------------------------- */
typedef struct {
    char *path;  /* relative to the table root */
    int64_t bytes;
    char *stats;
} lake_file;

/* How data files name their columns (formats.md A9). Decided from the table
 * before the first file is written, checked again at commit. */
typedef struct {
    bool decided;
    bool exists;              /* the table existed when decided */
    bool complete;            /* ... with every column of ours */
    bool mapped;              /* column mapping mode "name" */
    char **phys;              /* mapped: physical name per column of ours (owned) */
    int32_t *ids;             /* mapped: column id per column of ours */
    mcdc_schema *phys_schema; /* mapped: ours under the physical names */
    mcdc_parquet_codec codec; /* of the data files (MCDC_TABLE_PROP_PARQUET_CODEC) */
} lake_layout;

static void layout_clear(lake_layout *l, int32_t n) {
    for (int32_t i = 0; l->phys && i < n; i++) mcdc_free(l->phys[i]);
    mcdc_free(l->phys);
    mcdc_free(l->ids);
    mcdc_schema_unref(l->phys_schema);
    memset(l, 0, sizeof *l);
}

static bool any_needs_mapping(const mcdc_schema *s) {
    for (int32_t i = 0; i < s->n_fields; i++)
        if (mcdc_delta_name_needs_column_mapping(s->fields[i].name)) return true;
    return false;
}

/* The statement the reference asks for: the table name as the user gave it
 * (a path as delta.`path`). Owned. */
static char *alter_statement(const mcdc_table *t) {
    bool path = strchr(t->name, '/') != NULL || strchr(t->name, ':') != NULL;
    return mcdc_asprintf("ALTER TABLE %s%s%s SET TBLPROPERTIES ('delta.columnMapping.mode'='name', "
                         "'delta.minReaderVersion'='2', 'delta.minWriterVersion'='5')",
                         path ? "delta.`" : "", t->name, path ? "`" : "");
}

/* An unmapped table receiving a column whose name needs mapping: the
 * reference's SchemaChangedError (the library never enables it itself). */
static int needs_alter(const mcdc_table *t, const char *column, mcdc_error *err) {
    char *alter = alter_statement(t);
    int rc = mcdc_error_set(err, MCDC_E_SCHEMA,
                            "table %s: new column '%s' holds a character Delta allows only "
                            "with column mapping (space or ,;{}()=, tab, newline) and the table "
                            "has none; mssql-cdc never enables it itself. Enable it with: %s",
                            t->name, column, alter ? alter : "(out of memory)");
    mcdc_free(alter);
    return rc;
}

/* The value of key among the creation properties, NULL when unset. */
static const char *props_value(const mcdc_table_props *p, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; p && p->configuration && p->configuration[i]; i++)
        if (strncmp(p->configuration[i], key, n) == 0 && p->configuration[i][n] == '=')
            return p->configuration[i] + n + 1;
    return NULL;
}

/* delta.columnMapping.mode among the creation properties, NULL when unset. */
static const char *props_mapping_mode(const mcdc_table_props *p) {
    return props_value(p, "delta.columnMapping.mode");
}

/* The data files' codec: the table's MCDC_TABLE_PROP_PARQUET_CODEC (or, for
 * a table about to be created, the creation properties'), else zstd. */
static int layout_codec(mcdc_parquet_codec *out, const mcdc_table *t, const mcdc_delta_snapshot *s,
                        const mcdc_table_props *props, mcdc_error *err) {
    *out = MCDC_PARQUET_ZSTD;
    const char *v = s ? mcdc_delta_snapshot_config(s, MCDC_TABLE_PROP_PARQUET_CODEC)
                      : props_value(props, MCDC_TABLE_PROP_PARQUET_CODEC);
    if (v == NULL) return MCDC_OK;
    int rc = mcdc_parquet_codec_parse(out, v, err);
    if (rc) {
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "table %s: property %s is '%s'; set it to zstd, snappy, lz4_raw, "
                            "gzip or uncompressed (ALTER TABLE ... SET TBLPROPERTIES), or unset "
                            "it for zstd",
                            t->name, MCDC_TABLE_PROP_PARQUET_CODEC, v);
    }
    return rc;
}

/* The largest column id of a mapped table (maxColumnId and the fields'). */
static int64_t max_column_id(const mcdc_delta_snapshot *s, const mcdc_schema *theirs,
                             const mcdc_delta_field_meta *meta) {
    int64_t max = 0;
    const char *mc = mcdc_delta_snapshot_config(s, "delta.columnMapping.maxColumnId");
    if (mc && mcdc_parse_i64(mc, &max) != MCDC_OK) max = 0;
    for (int32_t j = 0; j < theirs->n_fields; j++)
        if (meta[j].column_id > max) max = meta[j].column_id;
    return max;
}

/* Decides the layout of ours against the latest table: mapped when the
 * table is, or when it does not exist yet and a name needs mapping;
 * existing columns keep the table's physical names and ids, new ones get
 * "col-<uuid>" and the next ids (the order mcdc_delta_append gives them). */
static int plan_layout(lake_layout *l, mcdc_table *t, const mcdc_schema *ours,
                       const mcdc_table_props *props, mcdc_error *err) {
    memset(l, 0, sizeof *l);
    const mcdc_delta_snapshot *s; /* the handle's, brought up to date: no fresh replay */
    int rc = mcdc_delta_table_latest(&s, t->dt, err);
    if (rc) return rc;
    mcdc_schema *theirs = NULL;
    mcdc_delta_field_meta *meta = NULL;
    int64_t max = 0;
    l->exists = s != NULL;
    const char *mode = props_mapping_mode(props);
    l->mapped = s ? mcdc_delta_snapshot_column_mapping(s)
                  : mode ? strcmp(mode, "name") == 0 : any_needs_mapping(ours);
    rc = layout_codec(&l->codec, t, s, props, err);
    if (rc == MCDC_OK && s) rc = mcdc_delta_snapshot_schema(&theirs, &meta, s, err);
    if (rc == MCDC_OK && s && l->mapped) max = max_column_id(s, theirs, meta);
    int32_t n = ours->n_fields;
    l->complete = theirs != NULL;
    for (int32_t i = 0; rc == MCDC_OK && theirs && i < n; i++)
        if (mcdc_schema_find(theirs, ours->fields[i].name) < 0) l->complete = false;
    /* Refused before any data is written: an unmapped table (or one about
     * to be created with mode "none") cannot take such a name. */
    for (int32_t i = 0; rc == MCDC_OK && !l->mapped && i < n; i++) {
        const char *name = ours->fields[i].name;
        if (!mcdc_delta_name_needs_column_mapping(name)) continue;
        if (theirs == NULL)
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "table %s: column '%s' needs column mapping but the table is "
                                "to be created with delta.columnMapping.mode=%s",
                                t->name, name, mode ? mode : "none");
        else if (mcdc_schema_find(theirs, name) < 0)
            rc = needs_alter(t, name, err);
    }
    if (rc == MCDC_OK && l->mapped) {
        l->phys = mcdc_calloc((size_t)n, sizeof *l->phys);
        l->ids = mcdc_calloc((size_t)n, sizeof *l->ids);
        if (l->phys == NULL || l->ids == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (rc == MCDC_OK) rc = mcdc_schema_create(&l->phys_schema, n, err);
    }
    for (int32_t i = 0; rc == MCDC_OK && l->mapped && i < n; i++) {
        const mcdc_field *f = &ours->fields[i];
        int32_t j = theirs ? mcdc_schema_find(theirs, f->name) : -1;
        if (j >= 0) {
            l->phys[i] = mcdc_strdup(meta[j].physical_name ? meta[j].physical_name : f->name);
            l->ids[i] = meta[j].column_id > 0 && meta[j].column_id <= INT32_MAX
                            ? (int32_t)meta[j].column_id
                            : 0;
        } else {
            char pn[MCDC_DELTA_PHYSICAL_NAME_LEN];
            mcdc_delta_physical_name_new(pn);
            l->phys[i] = mcdc_strdup(pn);
            if (max >= INT32_MAX) {
                rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                    "table %s: delta.columnMapping.maxColumnId %lld is out of "
                                    "range",
                                    t->name, (long long)max);
                break;
            }
            l->ids[i] = (int32_t)++max;
        }
        if (l->phys[i] == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        else
            rc = mcdc_schema_set(l->phys_schema, i, l->phys[i], f->type, f->precision, f->scale,
                                 f->byte_width, f->nullable, err);
    }
    mcdc_delta_field_meta_free(meta, theirs ? theirs->n_fields : 0);
    mcdc_schema_unref(theirs);
    if (rc) layout_clear(l, n);
    else l->decided = true;
    return rc;
}

/* A full file is finished (its last row group and footer written, its
 * statistics taken, its writer freed) on the writing thread, and published
 * (fsync, then visible) on a thread of its own while the next file is
 * written: the writing thread does not wait on the disk while the readers
 * that feed it wait on it, and no second writer's buffers are held. At most
 * one file publishes behind the one open; it is recorded in the appender's
 * files, in order, when it is joined: before the next one is handed over,
 * and by commit, roll and free. */
typedef struct {
    mcdc_storage_writer *out; /* the whole file, owned by the thread until joined */
    lake_file file;           /* its record, kept for the join */
    pthread_t thread;
    bool running;
    int rc;
    mcdc_error err;
} lake_closer;

/* A lane: one open data file of the appender's (mcdc_table_props.lanes). */
typedef struct {
    mcdc_parquet_writer *w; /* NULL: no file open */
    /* the lane's last file's writer's buffers, for its next file's (NULL
     * before its first file and after the commit): one writer at a time
     * uses a spare */
    mcdc_parquet_spare *spare;
    char *cur;           /* relative path of the open file */
    int64_t cur_bytes;   /* uncompressed bytes written to it */
} lake_lane;

struct mcdc_appender {
    mcdc_table *t;
    mcdc_schema *schema;
    lake_layout layout;
    mcdc_table_props props;
    lake_lane lane[MCDC_APPENDER_LANES_MAX];
    int n_lanes;         /* 1..MCDC_APPENDER_LANES_MAX */
    mcdc_parquet_choices *choices; /* the last file's encoding choices, or NULL */
    int opened;          /* files opened so far, of every lane (their names' numbers) */
    lake_closer closer;
    lake_file *files;
    int nfiles, capfiles;
    int64_t rows;
    bool committed;
};

int mcdc_appender_open(mcdc_appender **out, mcdc_table *t, mcdc_schema *schema,
                       const mcdc_table_props *props, mcdc_error *err) {
    *out = NULL;
    int lanes = props && props->lanes > 0 ? props->lanes : 1;
    if (lanes > MCDC_APPENDER_LANES_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT, "an appender keeps %d data files open at "
                              "most, not %d (MCDC_APPENDER_LANES_MAX)",
                              MCDC_APPENDER_LANES_MAX, lanes);
    *out = mcdc_calloc(1, sizeof **out);
    if (*out == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    (*out)->t = t;
    (*out)->schema = mcdc_schema_ref(schema);
    if (props) (*out)->props = *props;
    (*out)->n_lanes = lanes;
    return MCDC_OK;
}

int64_t mcdc_appender_rows(const mcdc_appender *a) { return a->rows; }

static void to_delta_value(mcdc_delta_value *d, const mcdc_parquet_value *p) {
    d->i = p->i;
    d->f = p->d;
    d->dec_lo = p->dec_lo;
    d->dec_hi = p->dec_hi;
    d->bytes = p->bytes;
    d->len = (size_t)p->len;
}

/* The record of a closed file at path (taken over on success): its size
 * and its statistics as Delta wants them. */
static int file_record(const mcdc_appender *a, const mcdc_parquet_file_info *info, char *path,
                       lake_file *out, mcdc_error *err) {
    int32_t n = info->n_columns;
    mcdc_delta_col_stats *cs = mcdc_calloc((size_t)(n ? n : 1), sizeof *cs);
    if (cs == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        cs[i].has_min_max = info->columns[i].has_min_max;
        cs[i].null_count = info->columns[i].null_count;
        to_delta_value(&cs[i].min, &info->columns[i].min);
        to_delta_value(&cs[i].max, &info->columns[i].max);
    }
    char *stats = NULL;
    /* Statistics name the columns as the file does (physical names). */
    int rc = mcdc_delta_stats_json(&stats, a->layout.mapped ? a->layout.phys_schema : a->schema,
                                   info->rows, cs, -1, err);
    mcdc_free(cs);
    if (rc == MCDC_OK) *out = (lake_file){path, info->file_bytes, stats};
    return rc;
}

/* Adds a closed file to the appender's (taken over; freed on failure). */
static int record_file(mcdc_appender *a, lake_file f, mcdc_error *err) {
    if (a->nfiles == a->capfiles) {
        int cap = a->capfiles ? a->capfiles * 2 : 4;
        lake_file *v = mcdc_realloc(a->files, (size_t)cap * sizeof *v);
        if (v == NULL) {
            mcdc_free(f.path);
            mcdc_free(f.stats);
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        }
        a->files = v;
        a->capfiles = cap;
    }
    a->files[a->nfiles++] = f;
    return MCDC_OK;
}

static void *closer_main(void *arg) {
    lake_closer *c = arg;
    c->rc = mcdc_storage_writer_commit(c->out, MCDC_STORAGE_PUT, &c->err);
    if (c->rc) mcdc_error_wrap(&c->err, "publishing Parquet file %s", c->file.path);
    c->out = NULL;
    return NULL;
}

/* Records the closer's file once published; its failure is returned (err
 * may be NULL: the appender is being freed). */
static int closer_done(mcdc_appender *a, mcdc_error *err) {
    lake_closer *c = &a->closer;
    int rc = c->rc;
    if (rc == MCDC_OK) {
        rc = record_file(a, c->file, err);
    } else { /* nothing published */
        mcdc_free(c->file.path);
        mcdc_free(c->file.stats);
        if (err) *err = c->err;
    }
    c->file = (lake_file){0};
    return rc;
}

/* Waits for the file publishing behind (if any) and records it. */
static int join_closer(mcdc_appender *a, mcdc_error *err) {
    if (!a->closer.running) return MCDC_OK;
    pthread_join(a->closer.thread, NULL);
    a->closer.running = false;
    return closer_done(a, err);
}

/* Finishes lane l's open file (after the one publishing behind): its last
 * row group, footer and record; then publishes it here, or (behind) hands
 * its publication to the closer thread. */
static int finish_file_as(mcdc_appender *a, lake_lane *l, bool behind, mcdc_error *err) {
    int rc = join_closer(a, err);
    if (rc || l->w == NULL) return rc;
    mcdc_storage_writer *out = NULL;
    lake_file f = {0};
    rc = mcdc_parquet_writer_close_unpublished(l->w, &out, err);
    if (rc == MCDC_OK) rc = file_record(a, mcdc_parquet_writer_info(l->w), l->cur, &f, err);
    mcdc_parquet_choices_free(a->choices);
    a->choices = rc ? NULL : mcdc_parquet_writer_choices(l->w); /* NULL: the next one chooses */
    mcdc_parquet_writer_free(l->w); /* its buffers go to the lane's spare, for its next file's */
    l->w = NULL;
    if (rc) {
        mcdc_storage_writer_abort(out);
        return rc;
    }
    l->cur = NULL;
    lake_closer *c = &a->closer;
    *c = (lake_closer){.out = out, .file = f};
    if (behind && mcdc_thread_start(&c->thread, closer_main, c) == 0) {
        c->running = true;
        return MCDC_OK;
    }
    closer_main(c); /* here: asked to, or no thread could start */
    return closer_done(a, err);
}

/* Finishes every lane's open file, each published here. */
static int finish_files(mcdc_appender *a, mcdc_error *err) {
    int rc = MCDC_OK;
    for (int i = 0; i < a->n_lanes && rc == MCDC_OK; i++)
        rc = finish_file_as(a, &a->lane[i], false, err);
    return rc;
}

static void delete_file(mcdc_appender *a, const char *rel) {
    mcdc_storage_delete(mcdc_delta_table_storage(a->t->dt), rel, NULL);
}

static int ensure_table(mcdc_table *t, mcdc_schema *ours, const mcdc_table_props *props,
                        const lake_layout *l, mcdc_schema **evolved,
                        const char ***evolved_phys, mcdc_error *err);

/* The codec in a data file's name, as Spark names its files
 * (part-...-c000.snappy.parquet). */
static const char *codec_suffix(mcdc_parquet_codec c) {
    switch (c) {
    case MCDC_PARQUET_SNAPPY: return ".snappy";
    case MCDC_PARQUET_GZIP: return ".gz";
    case MCDC_PARQUET_ZSTD: return ".zstd";
    case MCDC_PARQUET_LZ4_RAW: return ".lz4raw";
    default: return "";
    }
}

int mcdc_appender_write_lane(mcdc_appender *a, int lane, const mcdc_batch *b, mcdc_error *err) {
    MCDC_ASSERT(!a->committed && lane >= 0 && lane < a->n_lanes);
    lake_lane *l = &a->lane[lane];
    if (b->rows == 0) return MCDC_OK;
    int rc = MCDC_OK;
    if (l->w == NULL) {
        char uuid[37];
        mcdc_uuid4(uuid);
        if (!a->layout.decided) rc = plan_layout(&a->layout, a->t, a->schema, &a->props, err);
        if (rc) return rc;
        l->cur = mcdc_asprintf("part-%05d-%s-c000%s.parquet", a->opened, uuid,
                               codec_suffix(a->layout.codec));
        if (l->cur == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        /* A new table is created before its first data file is written: a
         * kill in between leaves an empty table (and an unreferenced file),
         * never a directory of files without a log, which no run could
         * tell from someone else's. */
        if (rc == MCDC_OK && !a->layout.exists && a->opened == 0) {
            mcdc_schema *evolved = NULL;
            const char **evolved_phys = NULL;
            rc = ensure_table(a->t, a->schema, &a->props, &a->layout, &evolved, &evolved_phys, err);
            mcdc_schema_unref(evolved);
            mcdc_free(evolved_phys);
        }
        if (rc == MCDC_OK && l->spare == NULL)
            rc = mcdc_parquet_spare_create(&l->spare, 0, err);
        if (rc == MCDC_OK) {
            mcdc_parquet_write_options po = MCDC_PARQUET_WRITE_OPTIONS_INIT;
            po.spare = l->spare;
            /* the lanes share one writer's row-group budget */
            po.row_group_bytes = (int64_t)MCDC_PARQUET_ROW_GROUP_BYTES_DEFAULT / a->n_lanes;
            po.field_ids = a->layout.mapped ? a->layout.ids : NULL;
            po.threads = a->props.parquet_threads;
            po.codec = a->layout.codec;
            /* the columns keep the last file's encodings, chosen afresh
             * every LAKE_CHOOSE_EVERY files in case the rows changed */
            if (a->opened % LAKE_CHOOSE_EVERY != 0) po.choices = a->choices;
            rc = mcdc_parquet_writer_open(&l->w, mcdc_delta_table_storage(a->t->dt), l->cur,
                                          a->layout.mapped ? a->layout.phys_schema : a->schema,
                                          &po, err);
        }
        if (rc) {
            mcdc_free(l->cur);
            l->cur = NULL;
            return rc;
        }
        a->opened++;
        l->cur_bytes = 0;
    }
    rc = mcdc_parquet_writer_write(l->w, b, err);
    if (rc) return rc;
    a->rows += b->rows;
    l->cur_bytes += mcdc_batch_bytes(b);
    int64_t target = a->props.file_bytes > 0 ? a->props.file_bytes : LAKE_FILE_BYTES_TARGET;
    if (l->cur_bytes >= target) rc = finish_file_as(a, l, true, err);
    return rc;
}

int mcdc_appender_write(mcdc_appender *a, const mcdc_batch *b, mcdc_error *err) {
    return mcdc_appender_write_lane(a, 0, b, err);
}

/* Pairs ensure_table may add to the caller's: the column mapping mode, the
 * kind and the schema version. */
#define LAKE_CONFIG_EXTRA 3

/* Adds key=value to the split pairs (room reserved by split_config). */
static int add_config(char **keys, char **values, size_t *n, const char *key, const char *value,
                      mcdc_error *err) {
    for (size_t i = 0; i < *n; i++)
        if (strcmp(keys[i], key) == 0) return MCDC_OK; /* the caller's wins */
    keys[*n] = mcdc_strdup(key);
    values[*n] = mcdc_strdup(value);
    (*n)++;
    if (keys[*n - 1] == NULL || values[*n - 1] == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return MCDC_OK;
}

/* Configuration pairs of props, split at '='. */
static int split_config(const mcdc_table_props *p, char ***keys, char ***values, size_t *n,
                        mcdc_error *err) {
    *keys = *values = NULL;
    *n = 0;
    size_t count = 0;
    while (p && p->configuration && p->configuration[count]) count++;
    *keys = mcdc_calloc(count + LAKE_CONFIG_EXTRA, sizeof **keys);
    *values = mcdc_calloc(count + LAKE_CONFIG_EXTRA, sizeof **values);
    if (*keys == NULL || *values == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        const char *kv = p->configuration[i], *eq = strchr(kv, '=');
        MCDC_ASSERT(eq != NULL);
        (*keys)[i] = mcdc_strndup(kv, (size_t)(eq - kv));
        (*values)[i] = mcdc_strdup(eq + 1);
        *n = i + 1;
        if ((*keys)[i] == NULL || (*values)[i] == NULL)
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    return MCDC_OK;
}

static void free_config(char **keys, char **values, size_t n) {
    for (size_t i = 0; i < n; i++) {
        mcdc_free(keys ? keys[i] : NULL);
        mcdc_free(values ? values[i] : NULL);
    }
    mcdc_free(keys);
    mcdc_free(values);
}

/* The table changed under the layout the files were written with. */
static int layout_moved(const mcdc_table *t, const char *why, mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_CONFLICT,
                          "table %s: %s while data files were written; retry the batch",
                          t->name, why);
}

/* Creates the table when missing; returns the evolved schema to commit (or
 * NULL when the table already has every column of ours) with the physical
 * names of its new columns (*evolved_phys, borrowed from the layout). */
static int ensure_table(mcdc_table *t, mcdc_schema *ours, const mcdc_table_props *props,
                        const lake_layout *l, mcdc_schema **evolved,
                        const char ***evolved_phys, mcdc_error *err) {
    *evolved = NULL;
    *evolved_phys = NULL;
    const mcdc_delta_snapshot *s; /* the handle's, brought up to date: no fresh replay */
    int rc = mcdc_delta_table_latest(&s, t->dt, err);
    if (rc) return rc;
    if (s == NULL) {
        if (l->exists) return layout_moved(t, "the table was dropped", err);
        bool skipped = false;
        char **keys, **values;
        size_t n;
        rc = split_config(props, &keys, &values, &n, err);
        if (rc == MCDC_OK && l->mapped)
            rc = add_config(keys, values, &n, "delta.columnMapping.mode", "name", err);
        mcdc_table_kind kind = props ? props->kind : MCDC_KIND_NONE;
        if (rc == MCDC_OK && kind != MCDC_KIND_NONE) {
            char version[16];
            snprintf(version, sizeof version, "%d", mcdc_table_kind_schema_version(kind));
            rc = add_config(keys, values, &n, MCDC_TABLE_PROP_KIND, mcdc_table_kind_name(kind), err);
            if (rc == MCDC_OK)
                rc = add_config(keys, values, &n, MCDC_TABLE_PROP_SCHEMA_VERSION, version, err);
        }
        const char **comments = NULL;
        if (rc == MCDC_OK && kind != MCDC_KIND_NONE) {
            comments = mcdc_calloc((size_t)ours->n_fields + 1, sizeof *comments);
            if (comments == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            for (int32_t i = 0; comments && i < ours->n_fields; i++)
                comments[i] = mcdc_table_column_comment(kind, ours->fields[i].name);
        }
        if (rc == MCDC_OK) {
            mcdc_delta_create_opts co = MCDC_DELTA_CREATE_OPTS_INIT;
            co.schema = ours;
            co.field_comments = comments;
            co.description = mcdc_table_description(kind);
            co.config_keys = (const char *const *)keys;
            co.config_values = (const char *const *)values;
            co.n_config = n;
            co.physical_names = l->mapped ? (const char *const *)l->phys : NULL;
            mcdc_delta_commit_result res;
            rc = mcdc_delta_create(&res, t->dt, &co, err);
            skipped = rc == MCDC_OK && res.skipped;
        }
        free_config(keys, values, n);
        mcdc_free(comments);
        if (rc || !skipped) return rc;
        /* A concurrent creator won: hold our files against its table. */
        rc = mcdc_delta_table_latest(&s, t->dt, err);
        if (rc) return rc;
        if (s == NULL) return layout_moved(t, "the table was dropped", err);
    }
    if (props && props->kind != MCDC_KIND_NONE) {
        mcdc_table_kind have;
        const char *prop;
        rc = snapshot_kind(s, &have, &prop, err);
        if (rc == MCDC_OK && have != props->kind)
            rc = kind_mismatch(t, props->kind, "table", have, prop, err);
        if (rc) return rc;
    }
    mcdc_schema *theirs = NULL;
    mcdc_delta_field_meta *meta = NULL;
    bool mapped = mcdc_delta_snapshot_column_mapping(s);
    rc = mcdc_delta_snapshot_schema(&theirs, &meta, s, err);
    if (rc) return rc;
    if (mapped != l->mapped)
        rc = layout_moved(t,
                          mapped ? "the table is (now) column-mapped"
                                 : "the table is (now) without column mapping",
                          err);
    int64_t next_id = mapped && rc == MCDC_OK ? max_column_id(s, theirs, meta) : 0;
    int32_t extra = 0;
    for (int32_t i = 0; rc == MCDC_OK && i < ours->n_fields; i++) {
        int32_t j = mcdc_schema_find(theirs, ours->fields[i].name);
        if (j < 0) {
            extra++;
            if (!mapped && mcdc_delta_name_needs_column_mapping(ours->fields[i].name))
                rc = needs_alter(t, ours->fields[i].name, err);
            /* mcdc_delta_append numbers new columns in this order */
            else if (mapped && l->ids[i] != next_id + extra)
                rc = layout_moved(t, "another writer added columns", err);
            continue;
        }
        if (mapped) {
            const char *pn = meta[j].physical_name ? meta[j].physical_name : theirs->fields[j].name;
            if (strcmp(pn, l->phys[i]) != 0) {
                rc = layout_moved(t, "a column's physical name changed", err);
                break;
            }
        }
        const mcdc_field *a = &ours->fields[i], *b = &theirs->fields[j];
        bool fixed_as_binary = a->type == MCDC_TYPE_FIXED_BINARY && b->type == MCDC_TYPE_BINARY;
        if (!fixed_as_binary && (a->type != b->type || a->precision != b->precision ||
                                 a->scale != b->scale)) {
            rc = mcdc_error_set(err, MCDC_E_SCHEMA,
                                "table %s: column '%s' has another type in the table than in the "
                                "data written to it",
                                t->name, a->name);
            break;
        }
    }
    const char **phys = NULL;
    if (rc == MCDC_OK && extra > 0) {
        rc = mcdc_schema_create(evolved, theirs->n_fields + extra, err);
        if (rc == MCDC_OK && mapped &&
            (phys = mcdc_calloc((size_t)(theirs->n_fields + extra), sizeof *phys)) == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        int32_t k = 0;
        for (int32_t i = 0; rc == MCDC_OK && i < theirs->n_fields; i++, k++) {
            const mcdc_field *f = &theirs->fields[i];
            rc = mcdc_schema_set(*evolved, k, f->name, f->type, f->precision, f->scale,
                                 f->byte_width, f->nullable, err);
        }
        for (int32_t i = 0; rc == MCDC_OK && i < ours->n_fields; i++) {
            const mcdc_field *f = &ours->fields[i];
            if (mcdc_schema_find(theirs, f->name) >= 0) continue;
            if (phys) phys[k] = l->phys[i];
            /* Added columns are nullable: older rows hold NULL. */
            rc = mcdc_schema_set(*evolved, k++, f->name, f->type, f->precision, f->scale,
                                 f->byte_width, true, err);
        }
        if (rc) {
            mcdc_schema_unref(*evolved);
            *evolved = NULL;
            mcdc_free(phys);
            phys = NULL;
        }
    }
    *evolved_phys = phys;
    mcdc_delta_field_meta_free(meta, theirs->n_fields);
    mcdc_schema_unref(theirs);
    return rc;
}

int mcdc_appender_ensure(mcdc_appender *a, mcdc_error *err) {
    MCDC_ASSERT(!a->committed && a->nfiles == 0);
    mcdc_schema *evolved = NULL;
    const char **evolved_phys = NULL;
    int rc = a->layout.decided ? MCDC_OK : plan_layout(&a->layout, a->t, a->schema, &a->props, err);
    if (rc == MCDC_OK)
        rc = ensure_table(a->t, a->schema, &a->props, &a->layout, &evolved, &evolved_phys, err);
    mcdc_schema_unref(evolved);
    mcdc_free(evolved_phys);
    return rc;
}

int mcdc_appender_prepare(mcdc_appender *a, bool *settled, mcdc_error *err) {
    MCDC_ASSERT(!a->committed && a->opened == 0);
    int rc = a->layout.decided ? MCDC_OK : plan_layout(&a->layout, a->t, a->schema, &a->props, err);
    *settled = rc == MCDC_OK && a->layout.exists && a->layout.complete;
    return rc;
}

void mcdc_appender_set_threads(mcdc_appender *a, int threads) {
    MCDC_ASSERT(a->opened == 0 && threads >= 0);
    a->props.parquet_threads = threads;
}

bool mcdc_appender_fills(const mcdc_appender *a, const mcdc_batch *b) {
    int64_t target = a->props.file_bytes > 0 ? a->props.file_bytes : LAKE_FILE_BYTES_TARGET;
    const lake_lane *l = &a->lane[0];
    return l->w != NULL && b->rows > 0 && l->cur_bytes + mcdc_batch_bytes(b) >= target;
}

static int commit_files(mcdc_appender *a, const mcdc_delta_file *removes, size_t n_removes,
                        const mcdc_delta_file *readds, size_t n_readds, const mcdc_table_commit *c,
                        bool *skipped, int64_t *version, mcdc_error *err) {
    mcdc_schema *evolved = NULL;
    const char **evolved_phys = NULL;
    int rc = a->layout.decided ? MCDC_OK : plan_layout(&a->layout, a->t, a->schema, &a->props, err);
    if (rc == MCDC_OK)
        rc = ensure_table(a->t, a->schema, &a->props, &a->layout, &evolved, &evolved_phys, err);
    if (rc) return rc;
    mcdc_delta_file *adds = mcdc_calloc((size_t)a->nfiles + n_readds + 1, sizeof *adds);
    if (adds == NULL) {
        mcdc_free(evolved_phys);
        mcdc_schema_unref(evolved);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    int64_t now_ms = mcdc_now_utc_us() / 1000;
    for (int i = 0; i < a->nfiles; i++)
        adds[i] = (mcdc_delta_file){.path = a->files[i].path,
                                    .size_bytes = a->files[i].bytes,
                                    .modification_time_ms = now_ms,
                                    .data_change = true,
                                    .stats_json = a->files[i].stats};
    for (size_t i = 0; i < n_readds; i++) adds[(size_t)a->nfiles + i] = readds[i];
    mcdc_delta_append_opts ao = MCDC_DELTA_APPEND_OPTS_INIT;
    ao.adds = adds;
    ao.n_adds = (size_t)a->nfiles + n_readds;
    ao.removes = removes;
    ao.n_removes = n_removes;
    ao.app_id = c->app_id;
    ao.txn_version = c->app_id ? c->txn_version : -1;
    ao.user_metadata = c->user_metadata;
    ao.operation = c->operation;
    ao.schema = evolved;
    ao.physical_names = evolved_phys;
    ao.read_version = c->read_version;
    /* the tables that take the columns a batch brings, as the reference's
     * bronze writes say (mergeSchema) */
    ao.can_merge_schema = a->props.kind == MCDC_KIND_BRONZE || a->props.kind == MCDC_KIND_SILVER;
    ao.merge = c->merge;
    mcdc_delta_commit_result res;
    rc = mcdc_delta_append(&res, a->t->dt, &ao, err);
    mcdc_free(evolved_phys);
    mcdc_free(adds);
    mcdc_schema_unref(evolved);
    if (rc) return rc;
    *skipped = res.skipped;
    *version = res.version;
    a->committed = true;
    if (res.skipped)
        for (int i = 0; i < a->nfiles; i++) delete_file(a, a->files[i].path);
    return MCDC_OK;
}

int mcdc_appender_roll(mcdc_appender *a, const char **path, mcdc_error *err) {
    MCDC_ASSERT(!a->committed);
    if (path) *path = NULL;
    MCDC_ASSERT(a->n_lanes == 1);
    if (a->lane[0].w == NULL) return join_closer(a, err);
    int rc = finish_file_as(a, &a->lane[0], false, err);
    if (rc == MCDC_OK && path) *path = a->files[a->nfiles - 1].path;
    return rc;
}

/* The add that brings live file f back with deletion vector dv: its
 * statistics say tightBounds false (the bounds may be of deleted rows);
 * numRecords stays the file's rows, as the protocol wants. */
static int readd_of(mcdc_delta_file *out, const mcdc_delta_file *f, const mcdc_delta_dv *dv,
                    int64_t now_ms, mcdc_error *err) {
    *out = *f;
    out->dv = *dv;
    out->dv_unique_id = NULL;
    out->data_change = true;
    out->modification_time_ms = f->modification_time_ms > 0 ? f->modification_time_ms : now_ms;
    /* Edited as text: a decimal(38, 0) bound is an integer beyond int64,
     * which a parse and dump would not keep. */
    const char *st = f->stats_json;
    const char *t = st ? strstr(st, "\"tightBounds\":") : NULL;
    out->stats_json = NULL;
    if (st == NULL || st[0] != '{' || strstr(st, "\"numRecords\"") == NULL)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "data file %s has no statistics with "
                              "numRecords, which a file with a deletion vector must have", f->path);
    if (t && strncmp(t + 14, "true", 4) == 0)
        out->stats_json = mcdc_asprintf("%.*sfalse%s", (int)(t + 14 - st), st, t + 18);
    else if (t)
        out->stats_json = mcdc_strdup(st);
    else
        out->stats_json = mcdc_asprintf("{\"tightBounds\":false,%s", st + 1);
    return out->stats_json ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
}

int mcdc_appender_commit_with(mcdc_appender *a, const mcdc_table_commit *c, bool *skipped,
                              int64_t *version, mcdc_error *err) {
    int rc = finish_files(a, err);
    if (rc) return rc;
    for (int i = 0; i < a->n_lanes; i++) { /* no file comes after */
        mcdc_parquet_spare_free(a->lane[i].spare);
        a->lane[i].spare = NULL;
    }
    mcdc_delta_snapshot *s = NULL;
    mcdc_delta_file *removes = NULL, *readds = NULL;
    size_t nr = 0, n_readds = 0;
    if (c->n_removes > 0) {
        /* The files removed, as the version they were read from has them. */
        if (c->read_version < 0)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "table %s: a commit that removes files names the version it "
                                  "read them from",
                                  a->t->name);
        rc = mcdc_delta_snapshot_load(&s, a->t->dt, c->read_version, err);
        removes = rc ? NULL : mcdc_calloc(c->n_removes, sizeof *removes);
        if (rc == MCDC_OK && removes == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        int64_t now_ms = mcdc_now_utc_us() / 1000;
        size_t nf = rc ? 0 : mcdc_delta_snapshot_file_count(s);
        for (size_t i = 0; rc == MCDC_OK && i < c->n_removes; i++) {
            const mcdc_delta_file *hit = NULL;
            for (size_t k = 0; k < nf && !hit; k++)
                if (strcmp(mcdc_delta_snapshot_file(s, k)->path, c->remove_paths[i]) == 0)
                    hit = mcdc_delta_snapshot_file(s, k);
            if (hit == NULL) {
                rc = mcdc_error_set(err, MCDC_E_CONFLICT,
                                    "table %s version %lld has no live file %s to remove",
                                    a->t->name, (long long)c->read_version, c->remove_paths[i]);
                break;
            }
            removes[nr] = *hit;
            removes[nr].deletion_timestamp_ms = now_ms;
            removes[nr].data_change = true;
            if (c->readd_dvs && c->readd_dvs[i].storage_type) {
                if (readds == NULL && (readds = mcdc_calloc(c->n_removes, sizeof *readds)) == NULL) {
                    rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                    break;
                }
                rc = readd_of(&readds[n_readds], hit, &c->readd_dvs[i], now_ms, err);
                if (rc) break;
                n_readds++;
            }
            nr++;
        }
    }
    if (rc == MCDC_OK)
        rc = commit_files(a, removes, nr, readds, n_readds, c, skipped, version, err);
    for (size_t i = 0; i < n_readds; i++) mcdc_free((void *)readds[i].stats_json);
    mcdc_free(readds);
    mcdc_free(removes);
    mcdc_delta_snapshot_free(s);
    return rc;
}

int mcdc_appender_commit(mcdc_appender *a, const char *app_id, int64_t txn_version,
                         const char *user_metadata, bool *skipped, int64_t *version,
                         mcdc_error *err) {
    mcdc_table_commit c = {.app_id = app_id, .txn_version = txn_version,
                           .user_metadata = user_metadata, .read_version = -1};
    return mcdc_appender_commit_with(a, &c, skipped, version, err);
}

void mcdc_appender_free(mcdc_appender *a) {
    if (a == NULL) return;
    join_closer(a, NULL); /* a file it published is deleted below */
    for (int i = 0; i < a->n_lanes; i++) {
        mcdc_parquet_writer_free(a->lane[i].w); /* an open file was never published */
        mcdc_parquet_spare_free(a->lane[i].spare);
        mcdc_free(a->lane[i].cur);
    }
    mcdc_parquet_choices_free(a->choices);
    for (int i = 0; i < a->nfiles; i++) {
        if (!a->committed) delete_file(a, a->files[i].path);
        mcdc_free(a->files[i].path);
        mcdc_free(a->files[i].stats);
    }
    mcdc_free(a->files);
    layout_clear(&a->layout, a->schema->n_fields);
    mcdc_schema_unref(a->schema);
    mcdc_free(a);
}

/* ---- views, file readers and scans ---------------------------------------------- */

struct mcdc_table_view {
    mcdc_table *t;
    mcdc_delta_snapshot *s;
    mcdc_schema *schema;          /* logical names */
    mcdc_delta_field_meta *meta;  /* per field of schema */
    bool mapped;
};

int mcdc_table_view_open(mcdc_table_view **out, mcdc_table *t, int64_t version,
                         mcdc_error *err) {
    *out = NULL;
    mcdc_delta_snapshot *s = NULL;
    int rc = version < 0 ? load_latest(&s, t, err) : mcdc_delta_snapshot_load(&s, t->dt, version, err);
    if (rc || s == NULL) return rc;
    mcdc_table_view *v = mcdc_calloc(1, sizeof *v);
    if (v == NULL) {
        mcdc_delta_snapshot_free(s);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    v->t = t;
    v->s = s;
    v->mapped = mcdc_delta_snapshot_column_mapping(s);
    rc = mcdc_delta_snapshot_schema(&v->schema, &v->meta, s, err);
    if (rc) {
        mcdc_table_view_free(v);
        return rc;
    }
    *out = v;
    return MCDC_OK;
}

void mcdc_table_view_free(mcdc_table_view *v) {
    if (v == NULL) return;
    mcdc_delta_field_meta_free(v->meta, v->schema ? v->schema->n_fields : 0);
    mcdc_schema_unref(v->schema);
    mcdc_delta_snapshot_free(v->s);
    mcdc_free(v);
}

int64_t mcdc_table_view_version(const mcdc_table_view *v) { return mcdc_delta_snapshot_version(v->s); }
const mcdc_schema *mcdc_table_view_schema(const mcdc_table_view *v) { return v->schema; }
size_t mcdc_table_view_file_count(const mcdc_table_view *v) {
    return mcdc_delta_snapshot_file_count(v->s);
}

mcdc_table_file mcdc_table_view_file(const mcdc_table_view *v, size_t i) {
    const mcdc_delta_file *f = mcdc_delta_snapshot_file(v->s, i);
    return (mcdc_table_file){f->path, f->size_bytes, f->stats_json,
                             f->dv.storage_type ? f->dv.cardinality : 0};
}

int64_t mcdc_table_file_rows(const mcdc_table_file *f) {
    int64_t n = mcdc_delta_stats_records(f->stats_json);
    return n < 0 ? -1 : n - f->dv_rows;
}

bool mcdc_scan_rows_fn(void *ctx, const mcdc_table_view *v, const mcdc_table_file *f) {
    (void)v;
    mcdc_scan_rows *a = ctx;
    int64_t n = mcdc_table_file_rows(f);
    a->files++;
    if (n < 0) a->unknown = true;
    else a->rows += n;
    return true;
}

int64_t mcdc_table_view_rows(const mcdc_table_view *v) {
    mcdc_scan_rows a = {0};
    for (size_t i = 0; i < mcdc_table_view_file_count(v); i++) {
        mcdc_table_file f = mcdc_table_view_file(v, i);
        mcdc_scan_rows_fn(&a, v, &f);
    }
    return a.unknown ? -1 : a.rows;
}

bool mcdc_table_view_has_feature(const mcdc_table_view *v, const char *name) {
    return mcdc_delta_snapshot_has_feature(v->s, name);
}

const char *mcdc_table_view_config(const mcdc_table_view *v, const char *key) {
    return mcdc_delta_snapshot_config(v->s, key);
}

size_t mcdc_table_view_partition_columns(const mcdc_table_view *v) {
    return mcdc_delta_snapshot_partition_column_count(v->s);
}

/* The name column (a logical name, field k of the schema) has in the files
 * and their statistics. */
static const char *file_name_of(const mcdc_table_view *v, int32_t k) {
    return v->mapped && v->meta[k].physical_name ? v->meta[k].physical_name
                                                 : v->schema->fields[k].name;
}

const char *mcdc_table_view_stats_name(const mcdc_table_view *v, const char *column) {
    int32_t k = mcdc_schema_find(v->schema, column);
    return k < 0 ? NULL : file_name_of(v, k);
}

/* Can a file whose statistics are stats hold a value of column (its name in
 * the file) within [lo, hi)? Unknown statistics: yes. */
static bool file_may_match(const char *stats, const char *column, const mcdc_table_scan *sc) {
    if (stats == NULL) return true;
    json_error_t je;
    json_t *j = json_loads(stats, 0, &je);
    json_t *mn = json_object_get(json_object_get(j, "minValues"), column);
    json_t *mx = json_object_get(json_object_get(j, "maxValues"), column);
    json_int_t records = json_integer_value(json_object_get(j, "numRecords"));
    json_int_t nulls = json_integer_value(json_object_get(json_object_get(j, "nullCount"), column));
    bool may = true;
    if (json_is_integer(json_object_get(j, "numRecords")) && records == nulls &&
        json_is_integer(json_object_get(json_object_get(j, "nullCount"), column)))
        may = false; /* only NULLs: no value in any range */
    else if (sc->lo.set && mx) /* max < lo: nothing */
        may = sc->lo.text ? !(json_is_string(mx) && strcmp(json_string_value(mx), sc->lo.text) < 0)
                          : !(json_is_integer(mx) && json_integer_value(mx) < sc->lo.i);
    if (may && sc->hi.set && mn) /* min >= hi: nothing */
        may = sc->hi.text ? !(json_is_string(mn) && strcmp(json_string_value(mn), sc->hi.text) >= 0)
                          : !(json_is_integer(mn) && json_integer_value(mn) >= sc->hi.i);
    json_decref(j);
    return may;
}

static int prune_row_groups(mcdc_parquet_reader *r, const char *column, const mcdc_table_scan *sc,
                            mcdc_error *err) {
    const mcdc_scan_bound *b[2] = {&sc->lo, &sc->hi};
    mcdc_parquet_op op[2] = {MCDC_PARQUET_GE, MCDC_PARQUET_LT};
    int rc = MCDC_OK;
    for (int k = 0; k < 2 && rc == MCDC_OK; k++) {
        if (!b[k]->set) continue;
        mcdc_parquet_value v = {0};
        if (b[k]->text) {
            v.bytes = (const uint8_t *)b[k]->text;
            v.len = (int64_t)strlen(b[k]->text);
        } else {
            v.i = b[k]->i;
        }
        rc = mcdc_parquet_reader_filter(r, column, op[k], &v, err);
    }
    return rc;
}

struct mcdc_table_reader {
    mcdc_table_view *v;
    char *path;
    mcdc_parquet_reader *r;
    mcdc_schema *want;  /* the columns asked for, logical names */
    int32_t *from;      /* column of the selection per wanted column; -1: NULL */
    int32_t nsel;
    bool nulls_done;    /* nsel == 0: the one batch of NULL rows was given */
    /* The file's deletion vector (NULL: none) and where the next batch
     * starts in the file: batches never span row groups, so the row group
     * being read and the rows of it given tell each batch's first row. */
    mcdc_dv_bitmap *dv;
    int32_t rg;
    int64_t rg_first, rg_used;
    int32_t *keep;      /* rows kept of a batch (batch rows entries) */
    int64_t keep_cap;
    int64_t last_first; /* the last batch's first row and kept rows (NULL: all) */
    const int32_t *last_keep;
};

/* The live file path of the view (files are sorted by path), NULL if none. */
static const mcdc_delta_file *view_file_by_path(const mcdc_table_view *v, const char *path) {
    size_t lo = 0, hi = mcdc_delta_snapshot_file_count(v->s);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(mcdc_delta_snapshot_file(v->s, mid)->path, path);
        if (c == 0) return mcdc_delta_snapshot_file(v->s, mid);
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* The first row (in the file) of a batch of n rows the reader just got. */
static int64_t batch_first_row(mcdc_table_reader *x, int64_t n) {
    int32_t nrg = mcdc_parquet_reader_row_groups(x->r);
    while (x->rg < nrg && (!mcdc_parquet_reader_row_group_selected(x->r, x->rg) ||
                           x->rg_used == mcdc_parquet_reader_row_group_rows(x->r, x->rg))) {
        x->rg_first += mcdc_parquet_reader_row_group_rows(x->r, x->rg);
        x->rg++;
        x->rg_used = 0;
    }
    MCDC_ASSERT(x->rg < nrg);
    int64_t first = x->rg_first + x->rg_used;
    x->rg_used += n;
    MCDC_ASSERT(x->rg_used <= mcdc_parquet_reader_row_group_rows(x->r, x->rg));
    return first;
}

/* Drops the rows of b the deletion vector deletes (b is taken). */
static int drop_deleted(mcdc_batch **out, mcdc_table_reader *x, mcdc_batch *b, mcdc_error *err) {
    *out = NULL;
    uint64_t first = (uint64_t)x->last_first;
    if (mcdc_dv_bitmap_range_count(x->dv, first, first + (uint64_t)b->rows) == 0) {
        *out = b;
        return MCDC_OK;
    }
    int rc = MCDC_OK;
    if (b->rows > x->keep_cap) {
        int32_t *k = mcdc_realloc(x->keep, (size_t)b->rows * sizeof *k);
        if (k == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        else x->keep = k, x->keep_cap = b->rows;
    }
    int32_t n = 0;
    if (rc == MCDC_OK) mcdc_dv_bitmap_keep(x->dv, first, (int32_t)b->rows, x->keep, &n);
    x->last_keep = x->keep;
    mcdc_batch *nb = NULL;
    if (rc == MCDC_OK) rc = mcdc_batch_create(&nb, b->schema, n, err);
    for (int32_t c = 0; rc == MCDC_OK && c < b->schema->n_fields; c++)
        rc = mcdc_col_take(&nb->columns[c], &b->columns[c], x->keep, n, err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(nb, err);
    mcdc_batch_free(b);
    if (rc) {
        mcdc_batch_free(nb);
        return rc;
    }
    *out = nb;
    return MCDC_OK;
}

int mcdc_table_reader_open(mcdc_table_reader **out, mcdc_table_view *v, const char *path,
                           const char *const *columns, int32_t n_columns,
                           const mcdc_table_scan *prune, mcdc_error *err) {
    *out = NULL;
    const mcdc_schema *all = v->schema;
    int32_t n = columns ? n_columns : all->n_fields;
    mcdc_table_reader *x = mcdc_calloc(1, sizeof *x);
    const char **sel = mcdc_calloc((size_t)(n ? n : 1), sizeof *sel);
    int rc = MCDC_OK;
    if (x == NULL || sel == NULL || (x->path = mcdc_strdup(path)) == NULL ||
        (x->from = mcdc_calloc((size_t)(n ? n : 1), sizeof *x->from)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (x) x->v = v;
    if (rc == MCDC_OK) rc = mcdc_schema_create(&x->want, n, err);
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++) {
        int32_t k = columns ? mcdc_schema_find(all, columns[i]) : i;
        if (k < 0) {
            rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "table %s has no column '%s'", v->t->name,
                                columns[i]);
            break;
        }
        const mcdc_field *f = &all->fields[k];
        rc = mcdc_schema_set(x->want, i, f->name, f->type, f->precision, f->scale, f->byte_width,
                             f->nullable, err);
    }
    if (rc == MCDC_OK)
        rc = mcdc_parquet_reader_open(&x->r, mcdc_delta_table_storage(v->t->dt), path, NULL, err);
    /* Select what this file has (older files lack later columns). */
    const mcdc_schema *fs = NULL;
    if (rc == MCDC_OK) rc = mcdc_parquet_reader_schema(&fs, x->r, err);
    for (int32_t c = 0; rc == MCDC_OK && c < n; c++) {
        const char *name = file_name_of(v, mcdc_schema_find(all, x->want->fields[c].name));
        x->from[c] = -1;
        if (mcdc_schema_find(fs, name) >= 0) {
            x->from[c] = x->nsel;
            sel[x->nsel++] = name;
        }
    }
    if (rc == MCDC_OK && x->nsel > 0) rc = mcdc_parquet_reader_select(x->r, sel, x->nsel, err);
    const mcdc_delta_file *df = rc ? NULL : view_file_by_path(v, path);
    if (df && df->dv.storage_type)
        rc = mcdc_dv_load(&x->dv, mcdc_delta_table_storage(v->t->dt),
                          mcdc_delta_table_location(v->t->dt), df, mcdc_parquet_reader_rows(x->r),
                          err);
    if (rc == MCDC_OK && prune && prune->prune_column) {
        int32_t k = mcdc_schema_find(all, prune->prune_column);
        const char *pn = k < 0 ? NULL : file_name_of(v, k);
        if (pn && mcdc_schema_find(fs, pn) >= 0) rc = prune_row_groups(x->r, pn, prune, err);
    }
    mcdc_free(sel);
    if (rc) {
        mcdc_table_reader_free(x);
        return rc;
    }
    *out = x;
    return MCDC_OK;
}

int mcdc_table_reader_next(mcdc_batch **out, mcdc_table_reader *x, mcdc_error *err) {
    *out = NULL;
    if (x->nsel == 0) { /* none of the columns: only NULL rows */
        int64_t rows = mcdc_parquet_reader_rows(x->r);
        if (x->dv) rows -= (int64_t)mcdc_dv_bitmap_cardinality(x->dv);
        if (x->nulls_done || rows == 0) return MCDC_OK;
        x->nulls_done = true;
        mcdc_batch *b;
        int rc = mcdc_batch_create(&b, x->want, rows, err);
        for (int32_t c = 0; rc == MCDC_OK && c < x->want->n_fields; c++)
            rc = mcdc_col_append_nulls(&b->columns[c], rows, err);
        if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
        if (rc) mcdc_batch_free(b);
        else *out = b;
        return rc;
    }
    mcdc_batch *b = NULL;
    int rc;
    for (;;) {
        rc = mcdc_parquet_reader_next(&b, x->r, err);
        if (rc || b == NULL) return rc;
        x->last_first = batch_first_row(x, b->rows);
        x->last_keep = NULL;
        if (x->dv == NULL) break;
        rc = drop_deleted(&b, x, b, err); /* takes b */
        if (rc) return rc;
        if (b->rows > 0) break;
        mcdc_batch_free(b); /* every row deleted: the next batch */
    }
    return mcdc_batch_reshape(out, b, x->want, x->from, err); /* takes b */
}

const char *mcdc_table_reader_path(const mcdc_table_reader *x) { return x->path; }

void mcdc_table_reader_positions(const mcdc_table_reader *x, int64_t *first,
                                 const int32_t **keep) {
    *first = x->last_first;
    *keep = x->last_keep;
}

const struct mcdc_dv_bitmap *mcdc_table_reader_dv(const mcdc_table_reader *x) { return x->dv; }

void mcdc_table_reader_free(mcdc_table_reader *x) {
    if (x == NULL) return;
    mcdc_parquet_reader_free(x->r);
    mcdc_dv_bitmap_free(x->dv);
    mcdc_free(x->keep);
    mcdc_schema_unref(x->want);
    mcdc_free(x->from);
    mcdc_free(x->path);
    mcdc_free(x);
}

/* ---- scans: a decoder thread reads ahead ------------------------------------------
 * A scan decodes Parquet on one thread and runs fn on another, so a caller
 * that ranks or hashes each batch (apply, reconcile) keeps both cores busy.
 * The files are listed first, on the calling thread (pruning, then file_fn),
 * so file_fn runs there and nothing else touches the view's list. The
 * decoder then opens those files in order and queues their batches; the
 * calling thread takes them in that same order. The decoder reads only the
 * view (the scan's own: fn cannot reach it), the scan's columns and bounds
 * (the caller's, unchanged while the scan runs) and the table's storage
 * (thread-safe, mcdc_storage.h). Memory: at most MCDC_SCAN_AHEAD_BATCHES
 * batches wait in the queue and the decoder holds one more it is decoding,
 * besides the one fn has. A small scan (files of fewer than
 * MCDC_SCAN_AHEAD_BYTES_MIN bytes in all) runs on the calling thread alone,
 * through the same queue: a thread's start and a wake-up per batch cost
 * more than decoding a few small files. */

typedef struct {
    mcdc_batch *b;  /* NULL: the last item, the end (rc MCDC_OK) or the decoder's error */
    int rc;
    int64_t opened; /* files opened when it was queued: the scan's files_read if it stops here */
} ahead_item;

typedef struct {
    mcdc_table_view *v;
    const mcdc_table_scan *sc;
    const size_t *files; /* the view's files to read, in order */
    size_t n_files;
    /* The decoder's (the caller's until the thread starts, and after the join): */
    size_t next_file;
    mcdc_table_reader *r;
    int64_t opened;
    mcdc_error err;      /* the error of the last item; read by the caller once it took it */
    const mcdc_log_sink *sink;
    /* Under mu: */
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* an item was queued or taken, or the caller stopped */
    ahead_item q[MCDC_SCAN_AHEAD_BATCHES];
    int head, n;
    bool stop;           /* the caller is done: the decoder quits */
} scan_ahead;

/* Decodes the next item: a batch, the end, or an error (then s->err says it). */
static ahead_item ahead_decode(scan_ahead *s) {
    for (;;) {
        int rc;
        if (s->r == NULL) {
            if (s->next_file == s->n_files) return (ahead_item){NULL, MCDC_OK, s->opened};
            mcdc_table_file f = mcdc_table_view_file(s->v, s->files[s->next_file++]);
            rc = mcdc_table_reader_open(&s->r, s->v, f.path, s->sc->columns, s->sc->n_columns,
                                        s->sc, &s->err);
            if (rc) return (ahead_item){NULL, rc, s->opened};
            s->opened++;
        }
        mcdc_batch *b = NULL;
        rc = mcdc_table_reader_next(&b, s->r, &s->err);
        if (rc == MCDC_OK && b) return (ahead_item){b, MCDC_OK, s->opened};
        mcdc_table_reader_free(s->r); /* the file's end, or its error */
        s->r = NULL;
        if (rc) return (ahead_item){NULL, rc, s->opened};
    }
}

/* Queues it (mu held, room checked). */
static void ahead_push(scan_ahead *s, ahead_item it) {
    MCDC_ASSERT(s->n < MCDC_SCAN_AHEAD_BATCHES);
    MCDC_ASSERT(it.b != NULL || s->r == NULL); /* the last item leaves no file open */
    s->q[(s->head + s->n) % MCDC_SCAN_AHEAD_BATCHES] = it;
    s->n++;
}

static void *ahead_main(void *arg) {
    scan_ahead *s = arg;
    mcdc_log_use(s->sink);
    for (bool last = false; !last;) {
        ahead_item it = ahead_decode(s);
        last = it.b == NULL;
        pthread_mutex_lock(&s->mu);
        while (s->n == MCDC_SCAN_AHEAD_BATCHES && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
        bool stop = s->stop;
        if (!stop) ahead_push(s, it);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (stop) {
            mcdc_batch_free(it.b); /* the caller is gone: nobody takes it */
            break;
        }
    }
    mcdc_table_reader_free(s->r); /* a file open when the caller stopped */
    s->r = NULL;
    return NULL;
}

/* The next item, in the decoder's order (waits for the thread when there is one). */
static ahead_item ahead_take(scan_ahead *s, bool threaded) {
    if (!threaded && s->n == 0) return ahead_decode(s);
    pthread_mutex_lock(&s->mu);
    while (s->n == 0) pthread_cond_wait(&s->cv, &s->mu);
    ahead_item it = s->q[s->head];
    s->head = (s->head + 1) % MCDC_SCAN_AHEAD_BATCHES;
    s->n--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return it;
}

/* Runs fn on every batch of the listed files, reading ahead on a thread
 * when ahead; *files_read: files opened up to where the scan stopped, as a
 * scan on one thread counts them. */
static int scan_files(scan_ahead *s, bool ahead, mcdc_batch_fn fn, void *ctx, int64_t *files_read,
                      mcdc_error *err) {
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    /* The first items are decoded here: a scan that ends in them, or has no
     * file left to open after them, starts no thread. */
    bool last = false;
    while (!last && s->n < MCDC_SCAN_AHEAD_BATCHES) {
        ahead_item it = ahead_decode(s);
        last = it.b == NULL;
        ahead_push(s, it);
    }
    bool more = s->r != NULL || s->next_file < s->n_files;
    /* Without a thread (not worth one, or none could start) the scan
     * decodes as it goes, as a scan on one thread. The thread takes no
     * signal: the host's handlers keep running on the host's threads. */
    pthread_t th;
    bool threaded = false;
    if (ahead && !last && more) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        threaded = mcdc_thread_start(&th, ahead_main, s) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    int rc = MCDC_OK;
    for (;;) {
        ahead_item it = ahead_take(s, threaded);
        *files_read = it.opened;
        if (it.b == NULL) {
            rc = it.rc;
            if (rc && err) *err = s->err;
            break;
        }
        rc = fn(ctx, it.b, err); /* takes it.b */
        if (rc) break;
    }
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (threaded) pthread_join(th, NULL);
    for (; s->n > 0; s->n--, s->head = (s->head + 1) % MCDC_SCAN_AHEAD_BATCHES)
        mcdc_batch_free(s->q[s->head].b);
    mcdc_table_reader_free(s->r); /* open when fn stopped a scan without a thread */
    s->r = NULL;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    return rc;
}

/* A file's place in a scan ordered by a column's smallest value. */
typedef struct {
    bool has;
    json_int_t min;
    size_t file;
} file_place;

static int place_cmp(const void *pa, const void *pb) {
    const file_place *a = pa, *b = pb;
    if (a->has != b->has) return a->has ? 1 : -1;
    if (a->has && a->min != b->min) return a->min < b->min ? -1 : 1;
    return a->file < b->file ? -1 : a->file > b->file;
}

/* files[0..n) (indexes of v's files) in ascending order of column's
 * minValues (sc->order_column). */
static int order_files(const mcdc_table_view *v, const char *column, size_t *files, size_t n,
                       mcdc_error *err) {
    const char *name = mcdc_table_view_stats_name(v, column);
    if (name == NULL) return mcdc_error_set(err, MCDC_E_NOTFOUND, "no column '%s' to order by", column);
    file_place *p = mcdc_malloc(n * sizeof *p);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        mcdc_table_file f = mcdc_table_view_file(v, files[i]);
        json_error_t je;
        json_t *j = f.stats_json ? json_loads(f.stats_json, 0, &je) : NULL;
        json_t *mn = json_object_get(json_object_get(j, "minValues"), name);
        p[i] = (file_place){json_is_integer(mn), json_integer_value(mn), files[i]};
        json_decref(j);
    }
    qsort(p, n, sizeof *p, place_cmp);
    for (size_t i = 0; i < n; i++) files[i] = p[i].file;
    mcdc_free(p);
    return MCDC_OK;
}

int mcdc_table_scan_run(mcdc_table *t, const mcdc_table_scan *sc, mcdc_batch_fn fn, void *ctx,
                        int64_t *version_read, int64_t *files_read, mcdc_error *err) {
    *version_read = -1;
    if (files_read) *files_read = 0;
    mcdc_table_view *v = NULL;
    int rc = mcdc_table_view_open(&v, t, sc->version, err);
    if (rc || v == NULL) return rc;
    *version_read = mcdc_table_view_version(v);
    const char *prune = NULL;
    if (sc->prune_column && (prune = mcdc_table_view_stats_name(v, sc->prune_column)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "table %s has no column '%s'", t->name,
                            sc->prune_column);
    for (int32_t i = 0; rc == MCDC_OK && sc->columns && i < sc->n_columns; i++)
        if (mcdc_schema_find(v->schema, sc->columns[i]) < 0)
            rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "table %s has no column '%s'", t->name,
                                sc->columns[i]);
    size_t nf = rc ? 0 : mcdc_table_view_file_count(v);
    size_t *files = nf ? mcdc_malloc(nf * sizeof *files) : NULL;
    if (nf && files == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    size_t n = 0;
    int64_t bytes = 0;
    for (size_t i = 0; i < nf && rc == MCDC_OK; i++) {
        mcdc_table_file f = mcdc_table_view_file(v, i);
        if (prune && !file_may_match(f.stats_json, prune, sc)) continue;
        if (sc->file_fn && !sc->file_fn(sc->file_ctx, v, &f)) continue;
        files[n++] = i;
        bytes += f.bytes;
    }
    if (rc == MCDC_OK && n > 1 && sc->order_column) rc = order_files(v, sc->order_column, files, n, err);
    if (rc == MCDC_OK && n > 0) {
        scan_ahead s = {.v = v, .sc = sc, .files = files, .n_files = n,
                        .err = MCDC_ERROR_INIT, .sink = mcdc_log_current()};
        int64_t opened = 0;
        rc = scan_files(&s, bytes >= MCDC_SCAN_AHEAD_BYTES_MIN, fn, ctx, &opened, err);
        if (files_read) *files_read = opened;
        if (rc && rc != MCDC_E_CANCELLED)
            mcdc_error_wrap(err, "reading %s version %lld", t->name, (long long)*version_read);
    }
    mcdc_free(files);
    mcdc_table_view_free(v);
    return rc;
}

/* ---- small tables ------------------------------------------------------------------ */

typedef struct {
    mcdc_batch *all;
} gather;

/* Appends every row of src to the gathered batch (same schema). */
static int gather_rows(void *ctx, mcdc_batch *src, mcdc_error *err) {
    gather *g = ctx;
    int rc = MCDC_OK;
    if (g->all == NULL) rc = mcdc_batch_create(&g->all, src->schema, src->rows, err);
    for (int32_t i = 0; rc == MCDC_OK && i < src->schema->n_fields; i++)
        for (int64_t r = 0; r < src->rows && rc == MCDC_OK; r++)
            rc = mcdc_col_copy_value(&g->all->columns[i], &src->columns[i], r, err);
    mcdc_batch_free(src);
    return rc;
}

int mcdc_table_read_all(mcdc_table *t, mcdc_batch **out, int64_t *version, mcdc_error *err) {
    *out = NULL;
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    gather g = {NULL};
    int rc = mcdc_table_scan_run(t, &sc, gather_rows, &g, version, NULL, err);
    if (rc == MCDC_OK && g.all) rc = mcdc_batch_seal(g.all, err);
    if (rc) {
        mcdc_batch_free(g.all);
        return rc;
    }
    *out = g.all;
    return MCDC_OK;
}

/* A replace removes every live file and adds one, as a read-modify-write of
 * read_version: it commits only as version read_version + 1 (put-if-absent
 * of that log file), so any other commit since, a racing replace or another
 * engine's MERGE into the same table, makes it MCDC_E_CONFLICT and the
 * caller reads again. Nothing it read is ever overwritten unseen. */
int mcdc_table_replace(mcdc_table *t, const mcdc_batch *b, int64_t read_version,
                       const mcdc_table_props *props, const mcdc_delta_merge_info *merge,
                       int64_t *version, mcdc_error *err) {
    mcdc_delta_snapshot *s;
    int rc = load_latest(&s, t, err);
    if (rc) return rc;
    int64_t now_version = s ? mcdc_delta_snapshot_version(s) : -1;
    if (now_version != read_version) {
        mcdc_delta_snapshot_free(s);
        return mcdc_error_set(err, MCDC_E_CONFLICT, "table %s moved from version %lld to %lld",
                              t->name, (long long)read_version, (long long)now_version);
    }
    size_t nf = s ? mcdc_delta_snapshot_file_count(s) : 0;
    const char **paths = mcdc_calloc(nf ? nf : 1, sizeof *paths);
    if (paths == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MCDC_OK && i < nf; i++) paths[i] = mcdc_delta_snapshot_file(s, i)->path;
    mcdc_appender *a = NULL;
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, t, b->schema, props, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, err);
    /* From no table: on top of its creation (version 0) only. */
    mcdc_table_commit c = {.operation = "MERGE", .remove_paths = paths, .n_removes = nf,
                           .read_version = read_version < 0 ? 0 : read_version, .merge = merge};
    bool skipped = false;
    if (rc == MCDC_OK) rc = mcdc_appender_commit_with(a, &c, &skipped, version, err);
    if (rc == MCDC_OK && skipped)
        rc = mcdc_error_set(err, MCDC_E_CONFLICT, "another writer replaced %s first", t->name);
    mcdc_appender_free(a);
    mcdc_free(paths);
    mcdc_delta_snapshot_free(s);
    return rc;
}
