/* mcdc_delta_commit.c - tables, create, append (txn + optimistic concurrency),
 * commit info, checkpoints. */
#include "mcdc_delta_internal.h"
#include "mcdc_delta_dv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------------ */
/* names and tables                                                         */
/* ------------------------------------------------------------------------ */

static int check_name_part(const char *part, size_t n, const char *whole, mcdc_error *err) {
    if (n == 0 || part[0] == '.')
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "table name \"%s\": a part is empty or starts with '.'", whole);
    for (size_t i = 0; i < n; i++)
        if (part[i] == '\\' || part[i] == '/' || part[i] == ':')
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "table name \"%s\" contains '%c'", whole, part[i]);
    return MCDC_OK;
}

int mcdc_delta_resolve_path(char **out_path, const char *name_or_path, const char *warehouse,
                            mcdc_error *err) {
    *out_path = NULL;
    if (name_or_path == NULL || name_or_path[0] == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "a table needs a name or a path");
    const char *s = name_or_path;
    if (strchr(s, '/') || strchr(s, ':')) {
        /* A location: the storage's scheme table judges it now, before a
         * command writes anything (an object store without a backend). */
        int rc = mcdc_storage_check_location(s, err);
        if (rc) return rc;
        *out_path = mcdc_strdup(s);
    } else {
        const char *dot = strchr(s, '.');
        /* "bronze" could mean ./bronze or a table under the warehouse: it
         * says neither, and a wrong guess writes the table where nobody
         * looks for it */
        if (dot == NULL)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "table \"%s\" is neither a path nor a schema.table name: "
                                  "write ./%s for the directory %s here, or <schema>.%s for a "
                                  "table under the warehouse (<warehouse>/<schema>.db/%s)",
                                  s, s, s, s, s);
        if (warehouse == NULL || warehouse[0] == 0)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "table name \"%s\" needs a warehouse directory (or give a "
                                  "path containing '/')",
                                  s);
        if (strchr(dot + 1, '.'))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "table name \"%s\": expected schema.table (or a path "
                                  "containing '/')", s);
        int rc = check_name_part(s, (size_t)(dot - s), s, err);
        if (!rc) rc = check_name_part(dot + 1, strlen(dot + 1), s, err);
        if (!rc) rc = mcdc_storage_check_location(warehouse, err);
        if (rc) return rc;
        /* s3://b/wh/ and s3://b/wh are one warehouse: on an object store
         * "wh//x.db" would be another key than "wh/x.db" */
        size_t wl = strlen(warehouse);
        while (wl > 1 && warehouse[wl - 1] == '/') wl--;
        *out_path = mcdc_asprintf("%.*s/%.*s.db/%s", (int)wl, warehouse, (int)(dot - s), s,
                                  dot + 1);
    }
    if (*out_path == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return MCDC_OK;
}

int mcdc_delta_table_open_storage(mcdc_delta_table **out, mcdc_storage **storage,
                                  mcdc_error *err) {
    *out = mcdc_calloc(1, sizeof **out);
    if (*out == NULL) {
        mcdc_storage_free(*storage);
        *storage = NULL;
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    (*out)->storage = *storage;
    *storage = NULL;
    return MCDC_OK;
}

int mcdc_delta_table_open_env(mcdc_delta_table **out, const mcdc_storage_env *env,
                              const char *name_or_path, const char *warehouse,
                              mcdc_error *err) {
    *out = NULL;
    char *location;
    int rc = mcdc_delta_resolve_path(&location, name_or_path, warehouse, err);
    if (rc) return rc;
    mcdc_storage *st;
    rc = mcdc_storage_open_env(&st, env, location, err);
    mcdc_free(location);
    if (rc) return rc;
    return mcdc_delta_table_open_storage(out, &st, err);
}

int mcdc_delta_table_open(mcdc_delta_table **out, const char *name_or_path,
                          const char *warehouse, mcdc_error *err) {
    return mcdc_delta_table_open_env(out, NULL, name_or_path, warehouse, err);
}

void mcdc_delta_table_free(mcdc_delta_table *t) {
    if (t == NULL) return;
    mcdc_delta_snapshot_free(t->latest);
    mcdc_storage_free(t->storage);
    mcdc_free(t);
}

const char *mcdc_delta_table_location(const mcdc_delta_table *t) { return t->storage->root; }

mcdc_storage *mcdc_delta_table_storage(mcdc_delta_table *t) { return t->storage; }

/* The newest commit of a listing of the log; -1 when it has none. */
static int64_t newest_commit(const mcdc_storage_listing *l) {
    int64_t newest = -1;
    for (size_t i = 0; i < l->count; i++) {
        const char *n = l->entries[i].name;
        size_t len = strlen(n);
        if (len != 25 || strcmp(n + 20, ".json") != 0) continue;
        char digits[21];
        memcpy(digits, n, 20);
        digits[20] = 0;
        int64_t v;
        if (strspn(digits, "0123456789") == 20 && mcdc_parse_i64(digits, &v) == MCDC_OK &&
            v > newest)
            newest = v;
    }
    return newest;
}

int mcdc_delta_table_latest_version(int64_t *out_version, mcdc_delta_table *t,
                                    mcdc_error *err) {
    *out_version = -1;
    mcdc_storage_listing l = {0};
    int rc;
    /* With a cached snapshot at version c > 0 the log is listed from c on
     * (names after "<c - 1>~", which sorts after every name of version
     * c - 1 and before c's): one page however long the log is. c's own
     * commit must be in it; when it is not (a log rewound under us), the
     * whole log is listed. */
    int64_t c = t->latest ? mcdc_delta_snapshot_version(t->latest) : -1;
    if (t->keep_snapshot && (t->latest || t->known_absent)) { /* trusted: see keep_snapshot */
        *out_version = c;
        return MCDC_OK;
    }
    if (c > 0) {
        char after[32];
        snprintf(after, sizeof after, "%020lld~", (long long)(c - 1));
        rc = mcdc_storage_list_after(t->storage, MCDC_DELTA_LOG_DIR "/", after, &l, err);
        if (rc) return rc;
        *out_version = newest_commit(&l);
        mcdc_storage_listing_free(&l);
        if (*out_version >= c) return MCDC_OK;
        *out_version = -1;
    }
    rc = mcdc_storage_list(t->storage, MCDC_DELTA_LOG_DIR "/", &l, err);
    if (rc) return rc;
    *out_version = newest_commit(&l);
    mcdc_storage_listing_free(&l);
    return MCDC_OK;
}

/* Brings the cached latest snapshot up to date (loading it the first time).
 * A cached version whose commit file is gone means the log was rewound
 * under us (a restored backup): the cache is dropped and the log replayed
 * again, so that a commit never leaves a gap after the rewound end.
 * absent_ok: an empty log leaves the cache NULL with MCDC_OK (else
 * MCDC_E_NOTFOUND). */
static int refresh_cache(mcdc_delta_table *t, bool absent_ok, mcdc_error *err) {
    int rc = MCDC_OK;
    if (t->keep_snapshot && (t->latest || (t->known_absent && absent_ok)))
        return MCDC_OK; /* see keep_snapshot */
    if (t->latest) {
        char key[64];
        mcdc_delta__commit_key(mcdc_delta_snapshot_version(t->latest), key);
        int64_t bytes;
        rc = mcdc_storage_size(t->storage, key, &bytes, err);
        if (rc == MCDC_E_NOTFOUND) {
            mcdc_delta_snapshot_free(t->latest);
            t->latest = NULL;
            rc = MCDC_OK;
        }
        if (rc) return rc;
    }
    if (t->latest == NULL && absent_ok) rc = mcdc_delta_snapshot_load_latest(&t->latest, t, err);
    else if (t->latest == NULL) rc = mcdc_delta_snapshot_load(&t->latest, t, -1, err);
    else rc = mcdc_delta__snapshot_refresh(t->latest, t->storage, err);
    if (rc && t->latest) {
        mcdc_delta_snapshot_free(t->latest); /* maybe half applied: drop it */
        t->latest = NULL;
    }
    t->known_absent = t->keep_snapshot && rc == MCDC_OK && t->latest == NULL;
    return rc;
}

void mcdc_delta_table_keep_snapshot(mcdc_delta_table *t) { t->keep_snapshot = true; }

/* No listing of its own: the first load lists the log once, and a cached
 * snapshot is checked by its own commit's size and brought forward by
 * reading the next commits (refresh_cache). On an object store every
 * request is a round trip, and this runs before each commit. */
int mcdc_delta_table_latest(const mcdc_delta_snapshot **out, mcdc_delta_table *t,
                            mcdc_error *err) {
    *out = NULL;
    int rc = refresh_cache(t, true, err);
    if (rc == MCDC_OK) *out = t->latest; /* NULL: no commit in _delta_log */
    return rc;
}

int mcdc_delta_table_latest_copy(mcdc_delta_snapshot **out, mcdc_delta_table *t,
                                 mcdc_error *err) {
    *out = NULL;
    /* A keeper's cache is trusted for its own commits only: its readers
     * load the log as it is, as before. */
    if (t->keep_snapshot) return mcdc_delta_snapshot_load_latest(out, t, err);
    /* the refresh's probe past the end is a miss it expects: its message
     * must not reach a caller whose read goes on */
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = refresh_cache(t, true, &e);
    if (rc && err) *err = e;
    if (rc || t->latest == NULL) return rc;
    return mcdc_delta_snapshot_copy(out, t->latest, err);
}

/* ------------------------------------------------------------------------ */
/* building commit lines                                                    */
/* ------------------------------------------------------------------------ */

/* Appends {"<kind>": body}\n; takes the reference to body. */
static int put_action(mcdc_buf *b, const char *kind, json_t *body, mcdc_error *err) {
    json_t *o = json_object();
    if (o == NULL || body == NULL || json_object_set_new(o, kind, body)) {
        if (o == NULL) json_decref(body);
        json_decref(o);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory building a %s action", kind);
    }
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s == NULL) /* its strings were checked when set: out of memory */
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory serializing a %s action", kind);
    int rc = mcdc_buf_append_str(b, s, err);
    free(s);
    if (!rc) rc = mcdc_buf_append_byte(b, '\n', err);
    return rc;
}

/* json_object_set_new that remembers a failure (allocation, bad UTF-8). */
static void set(json_t *o, const char *k, json_t *v, bool *bad) {
    if (v == NULL || json_object_set_new(o, k, v)) *bad = true;
}

/* commitInfo in the order Delta's writers give its fields; takes
 * op_params and op_metrics. */
static json_t *commit_info_new(const char *operation, json_t *op_params, json_t *op_metrics,
                               const char *user_md, bool blind_append, int64_t read_version,
                               bool *bad) {
    json_t *ci = json_object();
    if (ci == NULL) {
        *bad = true;
        json_decref(op_params);
        json_decref(op_metrics);
        return NULL;
    }
    char uuid[37];
    mcdc_delta__uuid(uuid);
    set(ci, "timestamp", json_integer(mcdc_now_utc_us() / 1000), bad);
    set(ci, "operation", json_string(operation), bad);
    set(ci, "operationParameters", op_params, bad);
    if (read_version >= 0) set(ci, "readVersion", json_integer(read_version), bad);
    set(ci, "isolationLevel", json_string("Serializable"), bad);
    set(ci, "isBlindAppend", json_boolean(blind_append), bad);
    set(ci, "operationMetrics", op_metrics, bad);
    if (user_md) set(ci, "userMetadata", json_string(user_md), bad);
    set(ci, "engineInfo", json_string("mssql-cdc/" MCDC_VERSION_STRING), bad);
    set(ci, "txnId", json_string(uuid), bad);
    return ci;
}

/* ---- what a commit did: operationParameters and operationMetrics ------------- */

/* Delta writes its metrics as decimal strings. */
static void set_count(json_t *o, const char *k, int64_t v, bool *bad) {
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    set(o, k, json_string(buf), bad);
}

/* numRecords of a file's statistics, -1 when they do not say. */
static int64_t stats_records(const char *stats) {
    const char *p = stats ? strstr(stats, "\"numRecords\":") : NULL;
    if (p == NULL) return -1;
    char *end;
    long long n = strtoll(p + 13, &end, 10);
    return end == p + 13 || n < 0 ? -1 : (int64_t)n;
}

/* The files, bytes and deletion vectors a commit's actions add and remove.
 * A file removed and added back in the same commit (its deletion vector
 * set or changed: merge-on-read) is neither added nor removed. */
typedef struct commit_counts {
    int64_t files_added, bytes_added, rows_added; /* rows_added -1: a file without numRecords */
    int64_t files_removed, bytes_removed;
    int64_t dvs_added, dvs_updated, dvs_removed;
} commit_counts;

static void count_actions(commit_counts *c, const mcdc_delta_append_opts *o) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < o->n_adds; i++) {
        const mcdc_delta_file *a = &o->adds[i];
        if (a->dv.storage_type) continue; /* a file that was live before, with a new DV */
        int64_t rows = stats_records(a->stats_json);
        c->files_added++;
        c->bytes_added += a->size_bytes;
        c->rows_added = c->rows_added < 0 || rows < 0 ? -1 : c->rows_added + rows;
    }
    for (size_t i = 0; i < o->n_removes; i++) {
        const mcdc_delta_file *r = &o->removes[i];
        bool readded = false;
        for (size_t k = 0; k < o->n_adds && !readded; k++)
            readded = o->adds[k].dv.storage_type && strcmp(o->adds[k].path, r->path) == 0;
        if (readded) {
            if (r->dv.storage_type) c->dvs_updated++;
            else c->dvs_added++;
            continue;
        }
        c->files_removed++;
        c->bytes_removed += r->size_bytes > 0 ? r->size_bytes : 0;
        if (r->dv.storage_type) c->dvs_removed++;
    }
}

static json_t *write_params(const mcdc_delta_append_opts *o, bool *bad) {
    json_t *p = json_object();
    if (p == NULL) {
        *bad = true;
        return NULL;
    }
    set(p, "mode", json_string(o->n_removes ? "Overwrite" : "Append"), bad);
    set(p, "partitionBy", json_string("[]"), bad);
    if (o->can_merge_schema || o->schema) set(p, "canMergeSchema", json_true(), bad);
    return p;
}

static json_t *write_metrics(const commit_counts *c, bool *bad) {
    json_t *m = json_object();
    if (m == NULL) {
        *bad = true;
        return NULL;
    }
    set_count(m, "numFiles", c->files_added, bad);
    if (c->rows_added >= 0) set_count(m, "numOutputRows", c->rows_added, bad);
    set_count(m, "numOutputBytes", c->bytes_added, bad);
    if (c->files_removed) {
        set_count(m, "numRemovedFiles", c->files_removed, bad);
        set_count(m, "numRemovedBytes", c->bytes_removed, bad);
    }
    return m;
}

static json_t *merge_params(const mcdc_delta_merge_info *mi, bool *bad) {
    json_t *p = json_object();
    if (p == NULL) {
        *bad = true;
        return NULL;
    }
    set(p, "predicate", json_string(mi->predicate ? mi->predicate : "[]"), bad);
    set(p, "matchedPredicates",
        json_string(mi->matched_predicates ? mi->matched_predicates : "[]"), bad);
    set(p, "notMatchedPredicates",
        json_string(mi->not_matched_predicates ? mi->not_matched_predicates : "[]"), bad);
    set(p, "notMatchedBySourcePredicates", json_string("[]"), bad);
    return p;
}

/* Delta's MERGE metrics: the caller's row counts and times, this commit's
 * files; no merge of ours updates or deletes rows the source lacks. */
static json_t *merge_metrics(const mcdc_delta_merge_info *mi, const commit_counts *c, bool *bad) {
    json_t *m = json_object();
    if (m == NULL) {
        *bad = true;
        return NULL;
    }
    set_count(m, "numSourceRows", mi->source_rows, bad);
    set_count(m, "numTargetRowsInserted", mi->rows_inserted, bad);
    set_count(m, "numTargetRowsUpdated", mi->rows_updated, bad);
    set_count(m, "numTargetRowsMatchedUpdated", mi->rows_updated, bad);
    set_count(m, "numTargetRowsNotMatchedBySourceUpdated", 0, bad);
    set_count(m, "numTargetRowsDeleted", mi->rows_deleted, bad);
    set_count(m, "numTargetRowsMatchedDeleted", mi->rows_deleted, bad);
    set_count(m, "numTargetRowsNotMatchedBySourceDeleted", 0, bad);
    set_count(m, "numTargetRowsCopied", mi->rows_copied, bad);
    set_count(m, "numOutputRows", mi->rows_inserted + mi->rows_updated + mi->rows_copied, bad);
    set_count(m, "numTargetFilesAdded", c->files_added, bad);
    set_count(m, "numTargetFilesRemoved", c->files_removed, bad);
    set_count(m, "numTargetBytesAdded", c->bytes_added, bad);
    set_count(m, "numTargetBytesRemoved", c->bytes_removed, bad);
    set_count(m, "numTargetDeletionVectorsAdded", c->dvs_added, bad);
    set_count(m, "numTargetDeletionVectorsUpdated", c->dvs_updated, bad);
    set_count(m, "numTargetDeletionVectorsRemoved", c->dvs_removed, bad);
    set_count(m, "numTargetChangeFilesAdded", 0, bad);
    set_count(m, "executionTimeMs", mi->execution_ms, bad);
    set_count(m, "scanTimeMs", mi->scan_ms, bad);
    set_count(m, "rewriteTimeMs", mi->rewrite_ms, bad);
    set_count(m, "materializeSourceTimeMs", 0, bad);
    return m;
}

static bool path_ok(const char *p) {
    if (p == NULL || p[0] == 0 || p[0] == '/' || p[0] == '_' || p[0] == '.') return false;
    for (const char *s = p; *s; s++) {
        if (s[0] == '/' && (s[1] == '/' || s[1] == 0)) return false;
        if (s[0] == '/' && s[1] == '.' && s[2] == '.' && (s[3] == '/' || s[3] == 0))
            return false;
    }
    return true;
}

static int file_action(mcdc_buf *b, const mcdc_delta_file *f, bool is_add, mcdc_error *err) {
    const char *what = is_add ? "add" : "remove";
    if (!path_ok(f->path))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s path \"%s\" must be relative to the table root, not hidden, "
                              "without \"..\"",
                              what, f->path ? f->path : "(null)");
    if (is_add && (f->size_bytes < 0 || f->modification_time_ms < 0))
        return mcdc_error_set(err, MCDC_E_INVALID, "add %s: size and modificationTime are "
                                                   "required",
                              f->path);
    json_t *pv = NULL;
    if (f->partition_values_json) {
        pv = json_loads(f->partition_values_json, 0, NULL);
        if (!json_is_object(pv)) {
            json_decref(pv);
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s %s: partition values are not a JSON object", what, f->path);
        }
    } else {
        pv = json_object();
    }
    if (f->stats_json) {
        /* Bounds of decimal(p>18, 0) columns are integers beyond int64 (valid
         * JSON, as Spark writes them): parse them as reals to validate. */
        json_t *st = json_loads(f->stats_json, JSON_DECODE_INT_AS_REAL, NULL);
        bool ok = json_is_object(st);
        json_decref(st);
        if (!ok) {
            json_decref(pv);
            return mcdc_error_set(err, MCDC_E_INVALID, "add %s: stats are not a JSON object",
                                  f->path);
        }
    }
    char *esc = mcdc_delta__path_escape(f->path);
    json_t *o = json_object();
    bool bad = esc == NULL || o == NULL;
    if (!bad) {
        set(o, "path", json_string(esc), &bad);
        if (is_add) {
            set(o, "partitionValues", pv, &bad);
            pv = NULL;
            set(o, "size", json_integer(f->size_bytes), &bad);
            set(o, "modificationTime", json_integer(f->modification_time_ms), &bad);
            set(o, "dataChange", json_boolean(f->data_change), &bad);
            if (f->stats_json) set(o, "stats", json_string(f->stats_json), &bad);
        } else {
            int64_t ts = f->deletion_timestamp_ms > 0 ? f->deletion_timestamp_ms
                                                       : mcdc_now_utc_us() / 1000;
            set(o, "deletionTimestamp", json_integer(ts), &bad);
            set(o, "dataChange", json_boolean(f->data_change), &bad);
            set(o, "extendedFileMetadata", json_boolean(f->size_bytes >= 0), &bad);
            set(o, "partitionValues", pv, &bad);
            pv = NULL;
            if (f->size_bytes >= 0) set(o, "size", json_integer(f->size_bytes), &bad);
        }
        if (f->dv.storage_type) set(o, "deletionVector", mcdc_dv_descriptor_json(&f->dv), &bad);
    }
    json_decref(pv);
    mcdc_free(esc);
    if (bad) {
        json_decref(o);
        char label[512];
        snprintf(label, sizeof label, "the %s action of %s", what, f->path);
        return mcdc_delta__json_fail(err,
                                     mcdc_delta__utf8_ok(f->path) &&
                                         mcdc_delta__utf8_ok(f->stats_json),
                                     label);
    }
    return put_action(b, what, o, err);
}

static bool list_has(const json_t *list, const char *name) {
    size_t i;
    json_t *f;
    json_array_foreach(list, i, f) {
        if (json_is_string(f) && strcmp(json_string_value(f), name) == 0) return true;
    }
    return false;
}

static bool protocol_has_ntz(const json_t *p) {
    return json_integer_value(json_object_get(p, "minReaderVersion")) >= 3 &&
           list_has(json_object_get(p, "readerFeatures"), "timestampNtz");
}

static bool protocol_has_cm(const json_t *p) {
    json_int_t r = json_integer_value(json_object_get(p, "minReaderVersion"));
    json_int_t w = json_integer_value(json_object_get(p, "minWriterVersion"));
    if (r == 2 && w >= 5) return true;
    return r >= 3 && list_has(json_object_get(p, "readerFeatures"), "columnMapping");
}

static int add_feature(json_t *list, const char *name) {
    if (list_has(list, name)) return 0;
    return json_array_append_new(list, json_string(name));
}

/* Writer features a legacy writer version implies (Spark lists them when
 * moving a table to writer version 7). */
static const struct {
    int w;
    const char *name;
} legacy_writer_features[] = {
    {2, "appendOnly"},       {2, "invariants"},       {3, "checkConstraints"},
    {4, "changeDataFeed"},   {4, "generatedColumns"}, {5, "columnMapping"},
};

/* A protocol that can hold a schema with timestamp_ntz (ntz) and column
 * mapping (cm), upgrading `from` (NULL when creating). Without ntz a legacy
 * version suffices ((1,2), or (2,5) for column mapping); with it, (3,7) and
 * table features. New reference. */
static json_t *protocol_for(const json_t *from, bool ntz, bool cm, bool dv) {
    if (from && (!ntz || protocol_has_ntz(from)) && (!cm || protocol_has_cm(from)) && !dv)
        return json_deep_copy(from);
    int64_t r = from ? (int64_t)json_integer_value(json_object_get(from, "minReaderVersion")) : 1;
    int64_t w = from ? (int64_t)json_integer_value(json_object_get(from, "minWriterVersion")) : 2;
    bool bad = false;
    json_t *p = json_object();
    if (p == NULL) return NULL;
    if (!ntz && !dv && r < 3 && w < 7) {
        set(p, "minReaderVersion", json_integer(cm && r < 2 ? 2 : r), &bad);
        set(p, "minWriterVersion", json_integer(cm && w < 5 ? 5 : w), &bad);
        if (bad) {
            json_decref(p);
            return NULL;
        }
        return p;
    }
    json_t *rf = (from && r == 3) ? json_deep_copy(json_object_get(from, "readerFeatures"))
                                  : json_array();
    json_t *wf = (from && w == 7) ? json_deep_copy(json_object_get(from, "writerFeatures"))
                                  : json_array();
    bad = rf == NULL || wf == NULL;
    /* Writer version 7 lists every writer feature: keep the legacy ones
     * (appendOnly, invariants, ...) as Spark does. Spark counts a NOT NULL
     * column as an invariant and refuses a (3,7) table whose writerFeatures
     * lack "invariants" while its schema has one. */
    for (size_t i = 0; !bad && w < 7 && i < sizeof legacy_writer_features /
                                                 sizeof legacy_writer_features[0]; i++)
        if (legacy_writer_features[i].w <= w)
            bad = add_feature(wf, legacy_writer_features[i].name) != 0;
    if (!bad && r == 2) bad = add_feature(rf, "columnMapping") != 0;
    if (!bad && cm) bad = add_feature(rf, "columnMapping") || add_feature(wf, "columnMapping");
    bool had_ntz = from && protocol_has_ntz(from);
    if (!bad && (ntz || had_ntz))
        bad = add_feature(rf, "timestampNtz") || add_feature(wf, "timestampNtz");
    if (!bad && dv) bad = add_feature(rf, "deletionVectors") || add_feature(wf, "deletionVectors");
    if (!bad) {
        set(p, "minReaderVersion", json_integer(3), &bad);
        set(p, "minWriterVersion", json_integer(7), &bad);
        set(p, "readerFeatures", rf, &bad);
        rf = NULL;
        set(p, "writerFeatures", wf, &bad);
        wf = NULL;
    }
    json_decref(rf);
    json_decref(wf);
    if (bad) {
        json_decref(p);
        return NULL;
    }
    return p;
}

/* ------------------------------------------------------------------------ */
/* create                                                                   */
/* ------------------------------------------------------------------------ */

/* The table exists: it is fine when its schema holds ours. */
static int check_existing(mcdc_delta_commit_result *out, mcdc_delta_table *t,
                          const mcdc_schema *want, mcdc_error *err) {
    int rc = refresh_cache(t, false, err);
    if (rc) return rc;
    mcdc_schema *have;
    rc = mcdc_delta_snapshot_schema(&have, NULL, t->latest, err);
    if (rc) return mcdc_error_wrap(err, "table %s exists", t->storage->root), rc;
    char why[512];
    bool ok = mcdc_delta__schema_contains(have, want, why, sizeof why);
    mcdc_schema_unref(have);
    if (!ok)
        return mcdc_error_set(err, MCDC_E_SCHEMA,
                              "table %s already exists with an incompatible schema: %s",
                              t->storage->root, why);
    out->skipped = true;
    out->version = mcdc_delta_snapshot_version(t->latest);
    return MCDC_OK;
}

int mcdc_delta_create(mcdc_delta_commit_result *out, mcdc_delta_table *t,
                      const mcdc_delta_create_opts *o, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    out->version = -1;
    if (o == NULL || o->struct_version != MCDC_DELTA_CREATE_OPTS_VERSION || o->schema == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "create: options missing, of another version, or without schema");
    int64_t latest;
    int rc = mcdc_delta_table_latest_version(&latest, t, err);
    if (rc) return rc;
    if (latest >= 0) return check_existing(out, t, o->schema, err);

    const char *cm_mode = NULL;
    for (size_t i = 0; i < o->n_config; i++)
        if (strcmp(o->config_keys[i], "delta.columnMapping.mode") == 0)
            cm_mode = o->config_values[i];
    bool cm = cm_mode && strcmp(cm_mode, "name") == 0;
    if (cm_mode && !cm && strcmp(cm_mode, "none") != 0)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "create %s: column mapping mode \"%s\" cannot be written (only "
                              "\"name\")",
                              t->storage->root, cm_mode);
    char *schema_json = NULL;
    if (cm) {
        int32_t n = o->schema->n_fields;
        int64_t *ids = mcdc_calloc((size_t)n, sizeof *ids);
        char (*gen)[MCDC_DELTA_PHYSICAL_NAME_LEN] = mcdc_calloc((size_t)n, sizeof *gen);
        const char **phys = mcdc_calloc((size_t)n, sizeof *phys);
        if (ids == NULL || gen == NULL || phys == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        for (int32_t i = 0; rc == MCDC_OK && i < n; i++) {
            ids[i] = i + 1;
            phys[i] = o->physical_names ? o->physical_names[i] : NULL;
            if (phys[i] == NULL) {
                mcdc_delta_physical_name_new(gen[i]);
                phys[i] = gen[i];
            }
        }
        if (rc == MCDC_OK)
            rc = mcdc_delta_schema_to_json_mapped(&schema_json, o->schema, o->field_comments,
                                                  ids, phys, err);
        mcdc_free(ids);
        mcdc_free(gen);
        mcdc_free(phys);
    } else {
        rc = mcdc_delta_schema_to_json(&schema_json, o->schema, o->field_comments, err);
    }
    if (rc) return rc;
    mcdc_buf b = {0};
    b.limit = MCDC_DELTA_COMMIT_BYTES_MAX;
    bool bad = false;
    /* What Spark's CREATE TABLE records: the table's description and the
     * properties it was given (not the ones derived, such as maxColumnId). */
    json_t *params = json_object();
    json_t *props = json_object();
    char *props_text = NULL;
    if (params && props) {
        set(params, "partitionBy", json_string("[]"), &bad);
        set(params, "clusterBy", json_string("[]"), &bad);
        if (o->description) set(params, "description", json_string(o->description), &bad);
        set(params, "isManaged", json_string("false"), &bad);
        for (size_t i = 0; i < o->n_config; i++)
            set(props, o->config_keys[i], json_string(o->config_values[i]), &bad);
        props_text = bad ? NULL : json_dumps(props, JSON_COMPACT);
        if (props_text) set(params, "properties", json_string(props_text), &bad);
        else bad = true;
    }
    free(props_text);
    json_decref(props);
    json_t *ci = commit_info_new("CREATE TABLE", params, json_object(), o->user_metadata, true,
                                 -1, &bad);
    /* delta.enableDeletionVectors: the feature too (merge-on-read silvers) */
    bool dv = false;
    for (size_t i = 0; i < o->n_config; i++)
        dv |= strcmp(o->config_keys[i], "delta.enableDeletionVectors") == 0 &&
              strcasecmp(o->config_values[i], "true") == 0;
    json_t *proto = protocol_for(NULL, mcdc_delta_schema_needs_ntz(o->schema), cm, dv);
    json_t *md = json_object();
    json_t *fmt = json_object();
    json_t *conf = json_object();
    bad |= ci == NULL || proto == NULL || md == NULL || fmt == NULL || conf == NULL;
    char uuid[37];
    mcdc_delta__uuid(uuid);
    if (!bad) {
        set(fmt, "provider", json_string("parquet"), &bad);
        set(fmt, "options", json_object(), &bad);
        for (size_t i = 0; i < o->n_config; i++)
            set(conf, o->config_keys[i], json_string(o->config_values[i]), &bad);
        if (cm) {
            char max_id[24];
            snprintf(max_id, sizeof max_id, "%d", (int)o->schema->n_fields);
            set(conf, "delta.columnMapping.maxColumnId", json_string(max_id), &bad);
        }
        set(md, "id", json_string(uuid), &bad);
        if (o->name) set(md, "name", json_string(o->name), &bad);
        if (o->description) set(md, "description", json_string(o->description), &bad);
        set(md, "format", fmt, &bad);
        fmt = NULL;
        set(md, "schemaString", json_string(schema_json), &bad);
        set(md, "partitionColumns", json_array(), &bad);
        set(md, "configuration", conf, &bad);
        conf = NULL;
        set(md, "createdTime", json_integer(mcdc_now_utc_us() / 1000), &bad);
    }
    json_decref(fmt);
    json_decref(conf);
    mcdc_free(schema_json);
    if (bad) {
        json_decref(ci);
        json_decref(proto);
        json_decref(md);
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "create %s: a name, comment or configuration string is not valid "
                              "UTF-8 (or out of memory)",
                              t->storage->root);
    }
    rc = put_action(&b, "commitInfo", ci, err);
    if (!rc) rc = put_action(&b, "protocol", proto, err);
    else json_decref(proto);
    if (!rc) rc = put_action(&b, "metaData", md, err);
    else json_decref(md);
    if (rc == MCDC_OK) {
        char key[64];
        mcdc_delta__commit_key(0, key);
        out->attempts = 1;
        rc = mcdc_storage_put_if_absent(t->storage, key, b.data, b.len, err);
        if (rc == MCDC_E_CONFLICT) {
            rc = check_existing(out, t, o->schema, err); /* a concurrent creator won */
        } else if (rc == MCDC_OK) {
            out->version = 0;
            mcdc_error re = MCDC_ERROR_INIT; /* version 0 stands (see append) */
            int rr = MCDC_OK;
            if (t->keep_snapshot) { /* from the bytes written, as an append does */
                t->known_absent = false;
                mcdc_delta_snapshot_free(t->latest);
                t->latest = NULL;
                rr = mcdc_delta__snapshot_new(&t->latest, &re);
                if (rr == MCDC_OK)
                    rr = mcdc_delta__snapshot_apply_own(t->latest, (const char *)b.data, b.len,
                                                        t->storage->root, &re);
                if (rr) {
                    mcdc_delta_snapshot_free(t->latest);
                    t->latest = NULL;
                }
            } else {
                rr = refresh_cache(t, false, &re);
            }
            if (rr == MCDC_OK)
                MCDC_ASSERT(mcdc_delta_snapshot_version(t->latest) >= 0);
            else
                mcdc_log(MCDC_LOG_WARN, "table %s version 0 is created; reading it back "
                         "failed: %s", t->storage->root, re.message);
        }
    }
    mcdc_buf_free(&b);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* append                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct append_ctx {
    const mcdc_delta_append_opts *o;
    mcdc_schema *base_schema;   /* the schema our data files were written for */
    const char *base_partitions; /* partitionColumns JSON we read (owned) */
    bool evolves;
} append_ctx;

/* A winner committed `a` at version v before us: is it a real conflict?
 * Returns MCDC_OK to retry, 1 to skip (our txn is already there), or an
 * error. */
static int check_winner(append_ctx *c, mcdc_delta_table *t, const mcdc_delta_actions *a,
                        int64_t v, mcdc_error *err) {
    const char *root = t->storage->root;
    for (size_t i = 0; i < a->n_txns && c->o->app_id; i++)
        if (strcmp(a->txns[i].app_id, c->o->app_id) == 0 &&
            a->txns[i].version >= c->o->txn_version)
            return 1;
    if (a->protocol) {
        char where[600];
        snprintf(where, sizeof where, "table %s version %lld (committed concurrently)", root,
                 (long long)v);
        int rc = mcdc_delta__check_protocol(
            a->protocol, a->metadata ? a->metadata : mcdc_delta__snapshot_metadata_json(t->latest),
            true, where, err);
        if (rc) return mcdc_error_set(err, MCDC_E_CONFLICT, "%s", err ? err->message : "");
    }
    if (a->metadata) {
        if (c->evolves)
            return mcdc_error_set(err, MCDC_E_CONFLICT,
                                  "table %s: version %lld changed the metadata while we were "
                                  "evolving the schema; re-read the table and retry",
                                  root, (long long)v);
        mcdc_schema *now = NULL;
        mcdc_error e2 = MCDC_ERROR_INIT;
        int rc = mcdc_delta_schema_from_json(
            &now, NULL, json_string_value(json_object_get(a->metadata, "schemaString")), &e2);
        char why[512] = "";
        bool ok = rc == MCDC_OK && mcdc_delta__schema_contains(now, c->base_schema, why, sizeof why);
        mcdc_schema_unref(now);
        char *parts = json_dumps(json_object_get(a->metadata, "partitionColumns"), JSON_COMPACT);
        bool same_parts = parts && c->base_partitions && strcmp(parts, c->base_partitions) == 0;
        free(parts);
        if (!ok || !same_parts)
            return mcdc_error_set(err, MCDC_E_CONFLICT,
                                  "table %s: version %lld, committed concurrently, changed the "
                                  "schema or partitioning incompatibly (%s)",
                                  root, (long long)v,
                                  rc ? e2.message : (!ok ? why : "partition columns differ"));
    }
    return MCDC_OK;
}

/* Reads and checks every commit after the cache, applying them. */
static int absorb_winners(append_ctx *c, mcdc_delta_table *t, int64_t *skip_version,
                          mcdc_error *err) {
    int rc;
    for (;;) {
        int64_t v = mcdc_delta_snapshot_version(t->latest) + 1;
        mcdc_delta_actions a;
        rc = mcdc_delta__read_commit(&a, t->storage, v, err);
        if (rc == MCDC_E_NOTFOUND) rc = MCDC_OK;
        else if (rc == MCDC_OK) {
            rc = check_winner(c, t, &a, v, err);
            if (rc == 1) *skip_version = v;
            if (rc >= 0) {
                int rc2 = mcdc_delta__snapshot_apply(t->latest, &a, v, err);
                if (rc2) rc = rc2;
            }
            mcdc_delta_actions_clear(&a);
            if (rc == 0) continue;
            if (rc == 1) rc = MCDC_OK;
        }
        break;
    }
    /* The winners' files join the cache's live order before anything reads
     * it: a skipped commit's caller reads the winner's rows next. */
    if (rc == MCDC_OK) rc = mcdc_delta__snapshot_settle(t->latest, t->storage->root, err);
    if (rc) {
        mcdc_delta_snapshot_free(t->latest); /* maybe half applied: drop it */
        t->latest = NULL;
    }
    return rc;
}

/* The evolved schemaString of a table without column mapping: existing
 * columns keep their comments unless the caller gives new ones. */
static int plain_schema_json(char **out, mcdc_delta_table *t, const mcdc_delta_append_opts *o,
                             mcdc_error *err) {
    if (o->field_comments) return mcdc_delta_schema_to_json(out, o->schema, o->field_comments, err);
    mcdc_schema *cur = NULL;
    mcdc_delta_field_meta *meta = NULL;
    int rc = mcdc_delta_snapshot_schema(&cur, &meta, t->latest, err);
    if (rc) return rc;
    int32_t n = o->schema->n_fields;
    const char **comments = mcdc_calloc((size_t)n + 1, sizeof *comments);
    if (comments == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int32_t i = 0; comments && i < n; i++) {
        int32_t j = mcdc_schema_find(cur, o->schema->fields[i].name);
        comments[i] = j >= 0 ? meta[j].comment : NULL;
    }
    if (rc == MCDC_OK) rc = mcdc_delta_schema_to_json(out, o->schema, comments, err);
    mcdc_free(comments);
    mcdc_delta_field_meta_free(meta, cur->n_fields);
    mcdc_schema_unref(cur);
    return rc;
}

/* The evolved schemaString of a column-mapped table: existing columns keep
 * their id and physical name, new ones get the next ids and the caller's
 * physical names (or new ones); *max_id gets the new maxColumnId. */
static int mapped_schema_json(char **out, int64_t *max_id, mcdc_delta_table *t,
                              const mcdc_delta_append_opts *o, mcdc_error *err) {
    mcdc_schema *cur = NULL;
    mcdc_delta_field_meta *meta = NULL;
    int rc = mcdc_delta_snapshot_schema(&cur, &meta, t->latest, err);
    if (rc) return rc;
    int64_t max = 0;
    const char *mc = mcdc_delta_snapshot_config(t->latest, "delta.columnMapping.maxColumnId");
    if (mc && mcdc_parse_i64(mc, &max) != MCDC_OK) max = 0;
    for (int32_t j = 0; j < cur->n_fields; j++)
        if (meta[j].column_id > max) max = meta[j].column_id;
    int32_t n = o->schema->n_fields;
    int64_t *ids = mcdc_calloc((size_t)n, sizeof *ids);
    char (*gen)[MCDC_DELTA_PHYSICAL_NAME_LEN] = mcdc_calloc((size_t)n, sizeof *gen);
    const char **phys = mcdc_calloc((size_t)n, sizeof *phys);
    const char **comments = mcdc_calloc((size_t)n, sizeof *comments);
    if (ids == NULL || gen == NULL || phys == NULL || comments == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++) {
        int32_t j = mcdc_schema_find(cur, o->schema->fields[i].name);
        comments[i] = o->field_comments ? o->field_comments[i] : j >= 0 ? meta[j].comment : NULL;
        if (j >= 0) {
            ids[i] = meta[j].column_id;
            phys[i] = meta[j].physical_name;
            continue;
        }
        ids[i] = ++max;
        phys[i] = o->physical_names ? o->physical_names[i] : NULL;
        if (phys[i] == NULL) {
            mcdc_delta_physical_name_new(gen[i]);
            phys[i] = gen[i];
        }
    }
    if (rc == MCDC_OK)
        rc = mcdc_delta_schema_to_json_mapped(out, o->schema, comments, ids, phys, err);
    *max_id = max;
    mcdc_free(ids);
    mcdc_free(gen);
    mcdc_free(phys);
    mcdc_free(comments);
    mcdc_delta_field_meta_free(meta, cur->n_fields);
    mcdc_schema_unref(cur);
    return rc;
}

/* The evolved metaData (and protocol if timestamp_ntz appears). */
static int evolution_actions(mcdc_buf *b, mcdc_delta_table *t, const mcdc_delta_append_opts *o,
                             const mcdc_schema *base, mcdc_error *err) {
    char why[512];
    if (!mcdc_delta__schema_contains(o->schema, base, why, sizeof why))
        return mcdc_error_set(err, MCDC_E_SCHEMA,
                              "table %s: the new schema drops or changes a column (%s); only "
                              "adding nullable columns is supported",
                              t->storage->root, why);
    for (int32_t i = 0; i < o->schema->n_fields; i++) {
        const mcdc_field *f = &o->schema->fields[i];
        if (mcdc_schema_find(base, f->name) < 0 && !f->nullable)
            return mcdc_error_set(err, MCDC_E_SCHEMA,
                                  "table %s: new column '%s' must be nullable (existing rows "
                                  "have no value for it)",
                                  t->storage->root, f->name);
        for (int32_t j = 0; j < base->n_fields; j++)
            if (mcdc_str_ieq(base->fields[j].name, f->name) &&
                strcmp(base->fields[j].name, f->name) != 0)
                return mcdc_error_set(err, MCDC_E_SCHEMA,
                                      "table %s: new column '%s' clashes with '%s' "
                                      "(case-insensitive)",
                                      t->storage->root, f->name, base->fields[j].name);
    }
    char *schema_json;
    int64_t max_id = 0;
    bool cm = mcdc_delta_snapshot_column_mapping(t->latest);
    int rc = cm ? mapped_schema_json(&schema_json, &max_id, t, o, err)
                : plain_schema_json(&schema_json, t, o, err);
    if (rc) return rc;
    const json_t *cur_proto = mcdc_delta__snapshot_protocol_json(t->latest);
    if (mcdc_delta_schema_needs_ntz(o->schema) && !protocol_has_ntz(cur_proto)) {
        json_t *p = protocol_for(cur_proto, true, false, false);
        if (p == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        else rc = put_action(b, "protocol", p, err);
    }
    json_t *md = json_deep_copy(mcdc_delta__snapshot_metadata_json(t->latest));
    bool bad = md == NULL;
    if (!bad) set(md, "schemaString", json_string(schema_json), &bad);
    if (!bad && cm) {
        json_t *conf = json_object_get(md, "configuration");
        char buf[24];
        snprintf(buf, sizeof buf, "%lld", (long long)max_id);
        if (!json_is_object(conf)) set(md, "configuration", conf = json_object(), &bad);
        if (!bad) set(conf, "delta.columnMapping.maxColumnId", json_string(buf), &bad);
    }
    mcdc_free(schema_json);
    if (bad) {
        json_decref(md);
        return rc ? rc : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (rc) {
        json_decref(md);
        return rc;
    }
    return put_action(b, "metaData", md, err);
}

static int build_append(mcdc_buf *b, mcdc_delta_table *t, const mcdc_delta_append_opts *o,
                        const mcdc_schema *base, mcdc_error *err) {
    bool bad = false;
    commit_counts counts;
    count_actions(&counts, o);
    json_t *params = o->merge ? merge_params(o->merge, &bad) : write_params(o, &bad);
    json_t *metrics = o->merge ? merge_metrics(o->merge, &counts, &bad) : write_metrics(&counts, &bad);
    json_t *ci = commit_info_new(o->operation ? o->operation : "WRITE", params, metrics,
                                 o->user_metadata, o->n_removes == 0 && o->merge == NULL,
                                 mcdc_delta_snapshot_version(t->latest), &bad);
    if (!bad && o->commit_info_json) {
        json_t *extra = json_loads(o->commit_info_json, 0, NULL);
        if (!json_is_object(extra)) {
            json_decref(extra);
            json_decref(ci);
            return mcdc_error_set(err, MCDC_E_INVALID, "commit_info_json is not a JSON object");
        }
        bad = json_object_update(ci, extra) != 0;
        json_decref(extra);
    }
    if (bad) {
        json_decref(ci);
        return mcdc_delta__json_fail(err,
                                     mcdc_delta__utf8_ok(o->operation) &&
                                         mcdc_delta__utf8_ok(o->user_metadata),
                                     "commitInfo");
    }
    int rc = put_action(b, "commitInfo", ci, err);
    if (!rc && o->schema) rc = evolution_actions(b, t, o, base, err);
    for (size_t i = 0; i < o->n_adds && !rc; i++) rc = file_action(b, &o->adds[i], true, err);
    for (size_t i = 0; i < o->n_removes && !rc; i++)
        rc = file_action(b, &o->removes[i], false, err);
    if (!rc && o->app_id) {
        json_t *tx = json_object();
        bad = tx == NULL;
        if (!bad) {
            set(tx, "appId", json_string(o->app_id), &bad);
            set(tx, "version", json_integer(o->txn_version), &bad);
            set(tx, "lastUpdated", json_integer(mcdc_now_utc_us() / 1000), &bad);
        }
        if (bad) {
            json_decref(tx);
            return mcdc_error_set(err, MCDC_E_INVALID, "txn appId is not valid UTF-8");
        }
        rc = put_action(b, "txn", tx, err);
    }
    return rc;
}

static void maybe_checkpoint(mcdc_delta_table *t, int64_t version) {
    const char *iv = mcdc_delta_snapshot_config(t->latest, "delta.checkpointInterval");
    int64_t interval = MCDC_DELTA_CHECKPOINT_INTERVAL_DEFAULT;
    if (iv && (mcdc_parse_i64(iv, &interval) != MCDC_OK || interval < 1))
        interval = MCDC_DELTA_CHECKPOINT_INTERVAL_DEFAULT;
    if (version == 0 || version % interval != 0) return;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_delta_checkpoint(t, version, &e);
    /* A checkpoint is an optimisation: the commit stands without it. */
    if (rc == MCDC_E_UNSUPPORTED)
        mcdc_log(MCDC_LOG_DEBUG, "checkpoint of %s version %lld skipped: %s", t->storage->root,
                 (long long)version, e.message);
    else if (rc)
        mcdc_log(MCDC_LOG_WARN, "checkpoint of %s version %lld failed: %s", t->storage->root,
                 (long long)version, e.message);
}

int mcdc_delta_append(mcdc_delta_commit_result *out, mcdc_delta_table *t,
                      const mcdc_delta_append_opts *o, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    out->version = -1;
    if (o == NULL || o->struct_version != MCDC_DELTA_APPEND_OPTS_VERSION)
        return mcdc_error_set(err, MCDC_E_INVALID, "append: options missing or of another "
                                                   "version");
    if (o->app_id && (o->app_id[0] == 0 || o->txn_version < 0))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "append: txn needs a non-empty app_id and a version >= 0");
    if ((o->n_adds && o->adds == NULL) || (o->n_removes && o->removes == NULL))
        return mcdc_error_set(err, MCDC_E_INVALID, "append: action count without actions");
    int rc = refresh_cache(t, false, err);
    if (rc) return rc;
    char where[600];
    snprintf(where, sizeof where, "table %s version %lld", t->storage->root,
             (long long)mcdc_delta_snapshot_version(t->latest));
    rc = mcdc_delta__check_protocol(mcdc_delta__snapshot_protocol_json(t->latest),
                                    mcdc_delta__snapshot_metadata_json(t->latest), true, where,
                                    err);
    if (rc) return rc;
    if (o->app_id) {
        int64_t have = mcdc_delta_snapshot_txn_version(t->latest, o->app_id);
        if (have >= o->txn_version) {
            out->skipped = true;
            out->version = mcdc_delta_snapshot_version(t->latest);
            return MCDC_OK;
        }
    }
    if (o->read_version >= 0 && mcdc_delta_snapshot_version(t->latest) != o->read_version)
        return mcdc_error_set(err, MCDC_E_CONFLICT, "table %s moved from version %lld to %lld",
                              t->storage->root, (long long)o->read_version,
                              (long long)mcdc_delta_snapshot_version(t->latest));
    const char *append_only = mcdc_delta_snapshot_config(t->latest, "delta.appendOnly");
    if (append_only && strcmp(append_only, "true") == 0)
        for (size_t i = 0; i < o->n_removes; i++)
            if (o->removes[i].data_change)
                return mcdc_error_set(err, MCDC_E_INVALID,
                                      "table %s is append-only (delta.appendOnly=true): cannot "
                                      "remove %s with dataChange",
                                      t->storage->root, o->removes[i].path);

    append_ctx c = {o, NULL, NULL, o->schema != NULL};
    rc = mcdc_delta_snapshot_schema(&c.base_schema, NULL, t->latest, err);
    if (rc) return rc;
    char *parts = json_dumps(
        json_object_get(mcdc_delta__snapshot_metadata_json(t->latest), "partitionColumns"),
        JSON_COMPACT);
    c.base_partitions = parts ? mcdc_strdup(parts) : NULL;
    free(parts);
    mcdc_buf b = {0};
    b.limit = MCDC_DELTA_COMMIT_BYTES_MAX;
    rc = build_append(&b, t, o, c.base_schema, err);
    for (int attempt = 1; rc == MCDC_OK; attempt++) {
        if (attempt > MCDC_DELTA_COMMIT_RETRIES_MAX) {
            rc = mcdc_error_set(err, MCDC_E_CONFLICT,
                                "table %s: gave up after %d attempts to commit (other writers "
                                "keep winning)",
                                t->storage->root, MCDC_DELTA_COMMIT_RETRIES_MAX);
            break;
        }
        int64_t v = mcdc_delta_snapshot_version(t->latest) + 1;
        char key[64];
        mcdc_delta__commit_key(v, key);
        out->attempts = attempt;
        rc = mcdc_storage_put_if_absent(t->storage, key, b.data, b.len, err);
        if (rc == MCDC_OK) {
            out->version = v;
            /* Our own commit joins the cached snapshot from the bytes we
             * wrote: the put-if-absent of v succeeding proves that the log
             * ended at v - 1, the cache's version, so nothing is read back
             * (on an object store that is a request per commit saved). The
             * commit is durable now: failing to apply it (out of memory)
             * must not report it as not made, or the caller would delete the
             * data files it references; the cache is dropped instead and the
             * next read loads the log again. */
            mcdc_error re = MCDC_ERROR_INIT;
            if (mcdc_delta__snapshot_apply_own(t->latest, (const char *)b.data, b.len,
                                               t->storage->root, &re) != MCDC_OK) {
                mcdc_delta_snapshot_free(t->latest);
                t->latest = NULL;
            }
            if (t->latest != NULL) {
                MCDC_ASSERT(mcdc_delta_snapshot_version(t->latest) >= v);
                MCDC_ASSERT(o->app_id == NULL ||
                            mcdc_delta_snapshot_txn_version(t->latest, o->app_id) >=
                                o->txn_version);
                maybe_checkpoint(t, v);
            } else {
                mcdc_log(MCDC_LOG_WARN, "table %s version %lld is committed; applying it to "
                         "the cached snapshot failed: %s", t->storage->root, (long long)v,
                         re.message);
            }
            break;
        }
        if (rc != MCDC_E_CONFLICT) break;
        if (o->read_version >= 0) { /* a rewrite of what another writer has changed */
            /* the cache is behind the log now: a keeper loads it again */
            mcdc_delta_snapshot_free(t->latest);
            t->latest = NULL;
            mcdc_error_set(err, MCDC_E_CONFLICT,
                           "table %s: another writer committed version %lld first", t->storage->root,
                           (long long)v);
            break;
        }
        int64_t skip_version = -1;
        rc = absorb_winners(&c, t, &skip_version, err);
        if (rc == MCDC_OK && skip_version >= 0) {
            out->skipped = true;
            out->version = skip_version;
            break;
        }
        if (rc == MCDC_OK && attempt > 4) mcdc_sleep_ms(attempt < 20 ? attempt : 20);
    }
    mcdc_buf_free(&b);
    mcdc_schema_unref(c.base_schema);
    mcdc_free((void *)c.base_partitions);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* commit info                                                              */
/* ------------------------------------------------------------------------ */

void mcdc_delta_commit_info_free(mcdc_delta_commit_info *ci) {
    if (ci == NULL) return;
    mcdc_free(ci->operation);
    mcdc_free(ci->user_metadata);
    mcdc_free(ci->engine_info);
    mcdc_free(ci->json);
    mcdc_free(ci);
}

int mcdc_delta_commit_info_read(mcdc_delta_commit_info **out, mcdc_delta_table *t,
                                int64_t version, const char *app_id, mcdc_error *err) {
    *out = NULL;
    if (version < 0) return mcdc_error_set(err, MCDC_E_INVALID, "version must be >= 0");
    mcdc_delta_actions a;
    int rc = mcdc_delta__read_commit(&a, t->storage, version, err);
    if (rc) return rc;
    mcdc_delta_commit_info *ci = mcdc_calloc(1, sizeof *ci);
    bool oom = ci == NULL;
    if (ci) {
        ci->version = version;
        ci->timestamp_ms = -1;
        ci->txn_version = -1;
        const json_t *j = a.commit_info;
        json_t *ts = json_object_get(j, "timestamp");
        if (json_is_integer(ts)) ci->timestamp_ms = (int64_t)json_integer_value(ts);
        const char *s;
        if ((s = json_string_value(json_object_get(j, "operation"))) &&
            (ci->operation = mcdc_strdup(s)) == NULL)
            oom = true;
        if ((s = json_string_value(json_object_get(j, "userMetadata"))) &&
            (ci->user_metadata = mcdc_strdup(s)) == NULL)
            oom = true;
        if ((s = json_string_value(json_object_get(j, "engineInfo"))) &&
            (ci->engine_info = mcdc_strdup(s)) == NULL)
            oom = true;
        char *dump = j ? json_dumps(j, JSON_COMPACT) : NULL;
        ci->json = mcdc_strdup(dump ? dump : "{}");
        free(dump);
        if (ci->json == NULL) oom = true;
        for (size_t i = 0; app_id && i < a.n_txns; i++)
            if (strcmp(a.txns[i].app_id, app_id) == 0) ci->txn_version = a.txns[i].version;
    }
    mcdc_delta_actions_clear(&a);
    if (oom) {
        mcdc_delta_commit_info_free(ci);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    *out = ci;
    return MCDC_OK;
}

