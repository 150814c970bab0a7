/* mcdc_delta_checkpoint.c - reading checkpoint Parquet files (formats.md A8):
 * classic single-part, multi-part, and UUID-named V2 checkpoints whose file
 * actions are inline (Parquet or JSON). Rows become the same action lists a
 * commit file produces, so replay has one path. */
#include "mcdc_delta_internal.h"
#include "mcdc_delta_dv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_parquet.h"

/* One leaf of the current row group, with a cursor for repeated leaves. */
typedef struct cp_leaf {
    int32_t index;              /* -1: the file has no such column (all null) */
    mcdc_parquet_leaf_data d;
    int16_t max_def;
    int16_t max_rep;
    int64_t cursor;             /* repeated leaves: next entry */
    int64_t begin, end;         /* repeated leaves: entries of the current row */
} cp_leaf;

enum {
    ADD_PATH, ADD_SIZE, ADD_MTIME, ADD_DC, ADD_STATS, ADD_PV_KEY, ADD_PV_VAL, ADD_DV_TYPE,
    ADD_DV_POD, ADD_DV_OFF, ADD_DV_SIZE, ADD_DV_CARD, ADD_DV_MAXROW,
    REM_PATH, REM_TS, REM_DC, REM_SIZE, REM_DV_TYPE, REM_DV_POD, REM_DV_OFF, REM_DV_SIZE,
    REM_DV_CARD, REM_DV_MAXROW,
    MD_ID, MD_NAME, MD_DESC, MD_PROVIDER, MD_SCHEMA, MD_PARTS, MD_CONF_KEY, MD_CONF_VAL,
    MD_CREATED,
    PR_R, PR_W, PR_RF, PR_WF,
    TX_APP, TX_VER, TX_LU,
    DM_DOMAIN, DM_CONF, DM_REMOVED,
    SIDECAR_PATH,
    N_LEAVES
};

/* Flat leaves by exact path; repeated ones by prefix + last element (writers
 * name list/map groups differently: list.element vs list.item, key_value). */
static const struct {
    const char *prefix;
    const char *last; /* NULL: exact path */
} leaf_names[N_LEAVES] = {
    {"add.path", NULL}, {"add.size", NULL}, {"add.modificationTime", NULL},
    {"add.dataChange", NULL}, {"add.stats", NULL}, {"add.partitionValues.", "key"},
    {"add.partitionValues.", "value"}, {"add.deletionVector.storageType", NULL},
    {"add.deletionVector.pathOrInlineDv", NULL}, {"add.deletionVector.offset", NULL},
    {"add.deletionVector.sizeInBytes", NULL}, {"add.deletionVector.cardinality", NULL},
    {"add.deletionVector.maxRowIndex", NULL},
    {"remove.path", NULL}, {"remove.deletionTimestamp", NULL}, {"remove.dataChange", NULL},
    {"remove.size", NULL}, {"remove.deletionVector.storageType", NULL},
    {"remove.deletionVector.pathOrInlineDv", NULL}, {"remove.deletionVector.offset", NULL},
    {"remove.deletionVector.sizeInBytes", NULL}, {"remove.deletionVector.cardinality", NULL},
    {"remove.deletionVector.maxRowIndex", NULL},
    {"metaData.id", NULL}, {"metaData.name", NULL}, {"metaData.description", NULL},
    {"metaData.format.provider", NULL}, {"metaData.schemaString", NULL},
    {"metaData.partitionColumns.", ""}, {"metaData.configuration.", "key"},
    {"metaData.configuration.", "value"}, {"metaData.createdTime", NULL},
    {"protocol.minReaderVersion", NULL}, {"protocol.minWriterVersion", NULL},
    {"protocol.readerFeatures.", ""}, {"protocol.writerFeatures.", ""},
    {"txn.appId", NULL}, {"txn.version", NULL}, {"txn.lastUpdated", NULL},
    {"domainMetadata.domain", NULL}, {"domainMetadata.configuration", NULL},
    {"domainMetadata.removed", NULL},
    {"sidecar.path", NULL},
};

static int32_t find_leaf(mcdc_parquet_reader *r, int k) {
    if (leaf_names[k].last == NULL) return mcdc_parquet_reader_find_leaf(r, leaf_names[k].prefix);
    size_t pl = strlen(leaf_names[k].prefix), ll = strlen(leaf_names[k].last);
    for (int32_t i = 0; i < mcdc_parquet_reader_leaves(r); i++) {
        const char *p = mcdc_parquet_reader_leaf(r, i)->path;
        size_t n = strlen(p);
        if (strncmp(p, leaf_names[k].prefix, pl) != 0) continue;
        if (ll == 0) return i; /* a list: its only leaf */
        if (n > ll + 1 && p[n - ll - 1] == '.' && strcmp(p + n - ll, leaf_names[k].last) == 0)
            return i;
    }
    return -1;
}

/* Entry e of a leaf holds a value. */
static bool present(const cp_leaf *l, int64_t e) {
    if (l->index < 0 || e >= l->d.n) return false;
    return l->d.def == NULL || l->d.def[e] == l->max_def;
}

static bool get_str(const cp_leaf *l, int64_t e, const char **s, size_t *len) {
    if (!present(l, e)) return false;
    const mcdc_column *c = &l->d.values->columns[0];
    if (c->offsets == NULL) return false;
    *len = (size_t)(c->offsets[e + 1] - c->offsets[e]);
    /* A column of empty strings may have no data buffer at all. */
    if (c->data == NULL && *len != 0) return false;
    *s = c->data ? (const char *)c->data + c->offsets[e] : "";
    return true;
}

static bool get_i64(const cp_leaf *l, int64_t e, int64_t *out) {
    if (!present(l, e)) return false;
    const mcdc_column *c = &l->d.values->columns[0];
    switch (c->field->type) {
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_TIMESTAMP_UTC:
    case MCDC_TYPE_TIMESTAMP_NTZ: *out = ((const int64_t *)c->values)[e]; return true;
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: *out = ((const int32_t *)c->values)[e]; return true;
    case MCDC_TYPE_INT16: *out = ((const int16_t *)c->values)[e]; return true;
    case MCDC_TYPE_INT8: *out = ((const int8_t *)c->values)[e]; return true;
    default: return false;
    }
}

static bool get_bool(const cp_leaf *l, int64_t e, bool *out) {
    if (!present(l, e)) return false;
    const mcdc_column *c = &l->d.values->columns[0];
    if (c->field->type != MCDC_TYPE_BOOL) return false;
    *out = (c->values[e >> 3] >> (e & 7)) & 1;
    return true;
}

/* Moves a repeated leaf to the entries of the next row. */
static void next_row(cp_leaf *l) {
    if (l->index < 0) return;
    l->begin = l->cursor;
    l->end = l->begin + 1;
    while (l->d.rep && l->end < l->d.n && l->d.rep[l->end] != 0) l->end++;
    l->cursor = l->end;
}

static char *dupn(const char *s, size_t n) { return mcdc_strndup(s, n); }

/* A string as a new JSON string (NULL on bad UTF-8). */
static json_t *jstr(const char *s, size_t n) { return json_stringn(s, n); }

typedef struct cp_ctx {
    cp_leaf leaves[N_LEAVES];
    const char *label;
    mcdc_error *err;
    mcdc_delta_actions *out;
} cp_ctx;

static int bad(cp_ctx *c, const char *what, int64_t row) {
    return mcdc_error_set(c->err, MCDC_E_CORRUPT, "%s: row %lld: %s", c->label, (long long)row,
                          what);
}

static int nomem(cp_ctx *c) {
    return mcdc_error_set(c->err, MCDC_E_NOMEM, "out of memory reading %s", c->label);
}

static int grow(void **arr, size_t n, size_t elem) {
    if (n != 0 && (n & (n - 1)) != 0) return MCDC_OK;
    void *p = mcdc_realloc(*arr, (n == 0 ? 4 : n * 2) * elem);
    if (p == NULL) return MCDC_E_NOMEM;
    *arr = p;
    return MCDC_OK;
}

/* map<string,string> of the current row as a JSON object. */
static json_t *map_of(cp_leaf *k, cp_leaf *v) {
    json_t *o = json_object();
    if (o == NULL || k->index < 0) return o;
    for (int64_t e = k->begin; e < k->end; e++) {
        const char *ks, *vs;
        size_t kn, vn;
        if (!get_str(k, e, &ks, &kn)) continue;
        char *key = dupn(ks, kn);
        if (key == NULL) {
            json_decref(o);
            return NULL;
        }
        json_t *val = (v->index >= 0 && get_str(v, e, &vs, &vn)) ? jstr(vs, vn) : json_null();
        if (val == NULL || json_object_set_new(o, key, val)) {
            mcdc_free(key);
            json_decref(o);
            return NULL;
        }
        mcdc_free(key);
    }
    return o;
}

static json_t *list_of(cp_leaf *l) {
    json_t *a = json_array();
    if (a == NULL || l->index < 0) return a;
    for (int64_t e = l->begin; e < l->end; e++) {
        const char *s;
        size_t n;
        if (!get_str(l, e, &s, &n)) continue;
        json_t *x = jstr(s, n);
        if (x == NULL || json_array_append_new(a, x)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* The deletionVector group whose leaves start at first (type, pod, offset,
 * size, cardinality, maxRowIndex) into f->dv: none when the type is null. */
static int read_dv(cp_ctx *c, cp_leaf *L, int first, int64_t row, mcdc_delta_file *f) {
    const char *st, *pod;
    size_t stn, podn;
    if (!get_str(&L[first], row, &st, &stn)) return MCDC_OK;
    int64_t size = -1;
    f->dv.offset = -1;
    f->dv.max_row_index = -1;
    if (stn != 1 || !get_str(&L[first + 1], row, &pod, &podn) ||
        !get_i64(&L[first + 3], row, &size) || !get_i64(&L[first + 4], row, &f->dv.cardinality))
        return bad(c, "deletionVector without a one-character storageType, pathOrInlineDv, "
                   "sizeInBytes or cardinality", row);
    if (size < 0 || size > INT32_MAX) return bad(c, "deletionVector sizeInBytes out of range", row);
    get_i64(&L[first + 2], row, &f->dv.offset);
    get_i64(&L[first + 5], row, &f->dv.max_row_index);
    f->dv.storage_type = st[0];
    f->dv.size_bytes = (int32_t)size;
    if ((f->dv.path_or_inline = dupn(pod, podn)) == NULL) return nomem(c);
    char where[700];
    snprintf(where, sizeof where, "%s: row %lld: %s of %s", c->label, (long long)row,
             first == ADD_DV_TYPE ? "add" : "remove", f->path);
    return mcdc_dv_check_descriptor((char **)&f->dv_unique_id, &f->dv, where, c->err);
}

static int row_file(cp_ctx *c, int64_t row, bool is_add) {
    cp_leaf *L = c->leaves;
    mcdc_delta_actions *a = c->out;
    mcdc_delta_file **arr = is_add ? &a->adds : &a->removes;
    size_t *n = is_add ? &a->n_adds : &a->n_removes;
    if (grow((void **)arr, *n, sizeof **arr)) return nomem(c);
    mcdc_delta_file *f = &(*arr)[*n];
    memset(f, 0, sizeof *f);
    (*n)++;
    f->size_bytes = -1;
    f->modification_time_ms = -1;
    f->deletion_timestamp_ms = -1;
    const char *s;
    size_t len;
    if (!get_str(&L[is_add ? ADD_PATH : REM_PATH], row, &s, &len))
        return bad(c, "file path is not a string column", row);
    char *raw = dupn(s, len);
    if (raw == NULL) return nomem(c);
    f->path = mcdc_delta__path_unescape(raw);
    mcdc_free(raw);
    if (f->path == NULL) return nomem(c);
    if (is_add) {
        if (!get_i64(&L[ADD_SIZE], row, &f->size_bytes) ||
            !get_i64(&L[ADD_MTIME], row, &f->modification_time_ms) ||
            !get_bool(&L[ADD_DC], row, &f->data_change))
            return bad(c, "add without size, modificationTime or dataChange", row);
        if (get_str(&L[ADD_STATS], row, &s, &len) && (f->stats_json = dupn(s, len)) == NULL)
            return nomem(c);
        json_t *pv = map_of(&L[ADD_PV_KEY], &L[ADD_PV_VAL]);
        if (pv == NULL) return nomem(c);
        if (json_object_size(pv) > 0) {
            char *d = json_dumps(pv, JSON_COMPACT);
            f->partition_values_json = d ? mcdc_strdup(d) : NULL;
            free(d);
            if (f->partition_values_json == NULL) {
                json_decref(pv);
                return nomem(c);
            }
        }
        json_decref(pv);
    } else {
        if (!get_bool(&L[REM_DC], row, &f->data_change))
            return bad(c, "remove without dataChange", row);
        get_i64(&L[REM_TS], row, &f->deletion_timestamp_ms);
        get_i64(&L[REM_SIZE], row, &f->size_bytes);
    }
    return read_dv(c, L, is_add ? ADD_DV_TYPE : REM_DV_TYPE, row, f);
}

static void set(json_t *o, const char *k, json_t *v, bool *failed) {
    if (v == NULL || json_object_set_new(o, k, v)) *failed = true;
}

static int row_metadata(cp_ctx *c, int64_t row) {
    cp_leaf *L = c->leaves;
    if (c->out->metadata) return bad(c, "two metaData rows", row);
    const char *s;
    size_t n;
    bool failed = false;
    json_t *md = json_object(), *fmt = json_object();
    if (md == NULL || fmt == NULL) {
        json_decref(md);
        json_decref(fmt);
        return nomem(c);
    }
    if (!get_str(&L[MD_ID], row, &s, &n)) {
        json_decref(md);
        return bad(c, "metaData.id is not a string column", row);
    }
    set(md, "id", jstr(s, n), &failed);
    if (get_str(&L[MD_NAME], row, &s, &n)) set(md, "name", jstr(s, n), &failed);
    if (get_str(&L[MD_DESC], row, &s, &n)) set(md, "description", jstr(s, n), &failed);
    if (get_str(&L[MD_PROVIDER], row, &s, &n)) set(fmt, "provider", jstr(s, n), &failed);
    else set(fmt, "provider", json_string("parquet"), &failed);
    set(fmt, "options", json_object(), &failed);
    set(md, "format", fmt, &failed);
    if (!get_str(&L[MD_SCHEMA], row, &s, &n)) {
        json_decref(md);
        return bad(c, "metaData without schemaString", row);
    }
    set(md, "schemaString", jstr(s, n), &failed);
    set(md, "partitionColumns", list_of(&L[MD_PARTS]), &failed);
    set(md, "configuration", map_of(&L[MD_CONF_KEY], &L[MD_CONF_VAL]), &failed);
    int64_t created;
    if (get_i64(&L[MD_CREATED], row, &created)) set(md, "createdTime", json_integer(created), &failed);
    if (failed) {
        json_decref(md);
        return bad(c, "metaData with a string that is not UTF-8", row);
    }
    c->out->metadata = md;
    return MCDC_OK;
}

static int row_protocol(cp_ctx *c, int64_t row) {
    cp_leaf *L = c->leaves;
    if (c->out->protocol) return bad(c, "two protocol rows", row);
    int64_t r = 0, w = 0;
    if (!get_i64(&L[PR_R], row, &r) || !get_i64(&L[PR_W], row, &w) || r < 1 || w < 1)
        return bad(c, "protocol without valid versions", row);
    bool failed = false;
    json_t *p = json_object();
    if (p == NULL) return nomem(c);
    set(p, "minReaderVersion", json_integer(r), &failed);
    set(p, "minWriterVersion", json_integer(w), &failed);
    /* Feature lists exist exactly when the versions say so (formats.md A2). */
    if (r == 3) set(p, "readerFeatures", list_of(&L[PR_RF]), &failed);
    if (w == 7) set(p, "writerFeatures", list_of(&L[PR_WF]), &failed);
    if (failed) {
        json_decref(p);
        return nomem(c);
    }
    c->out->protocol = p;
    return MCDC_OK;
}

static int row_txn(cp_ctx *c, int64_t row) {
    cp_leaf *L = c->leaves;
    const char *s;
    size_t n;
    if (!get_str(&L[TX_APP], row, &s, &n)) return bad(c, "txn.appId is not a string column", row);
    int64_t v, lu = -1;
    if (!get_i64(&L[TX_VER], row, &v)) return bad(c, "txn without version", row);
    get_i64(&L[TX_LU], row, &lu);
    mcdc_delta_actions *a = c->out;
    if (grow((void **)&a->txns, a->n_txns, sizeof *a->txns)) return nomem(c);
    delta_txn *t = &a->txns[a->n_txns];
    if ((t->app_id = dupn(s, n)) == NULL) return nomem(c);
    t->version = v;
    t->last_updated_ms = lu;
    a->n_txns++;
    return MCDC_OK;
}

static int row_domain(cp_ctx *c, int64_t row) {
    cp_leaf *L = c->leaves;
    const char *d, *conf;
    size_t dn, cn;
    if (!get_str(&L[DM_DOMAIN], row, &d, &dn))
        return bad(c, "domainMetadata.domain is not a string column", row);
    if (!get_str(&L[DM_CONF], row, &conf, &cn)) return bad(c, "domainMetadata without configuration", row);
    bool removed = false;
    get_bool(&L[DM_REMOVED], row, &removed);
    mcdc_delta_actions *a = c->out;
    if (grow((void **)&a->domains, a->n_domains, sizeof *a->domains)) return nomem(c);
    delta_domain *x = &a->domains[a->n_domains];
    x->domain = dupn(d, dn);
    x->configuration = dupn(conf, cn);
    x->removed = removed;
    a->n_domains++;
    if (x->domain == NULL || x->configuration == NULL) return nomem(c);
    return MCDC_OK;
}

static int read_parquet_part(mcdc_delta_actions *out, mcdc_parquet_reader *r,
                             const char *label, mcdc_error *err);

/* Appends the actions of one checkpoint Parquet file (in memory) to out. */
int mcdc_delta__checkpoint_parse(mcdc_delta_actions *out, const void *data, size_t len,
                                 const char *label, mcdc_error *err) {
    mcdc_parquet_reader *r = NULL;
    int rc = mcdc_parquet_reader_open_mem(&r, data, len, label, NULL, err);
    if (rc == MCDC_OK) rc = read_parquet_part(out, r, label, err);
    mcdc_parquet_reader_free(r);
    return rc;
}

/* The same for a Parquet part in the storage, read by ranges (a part or
 * sidecar whose size is unknown, or a checkpoint too large to hold whole).
 * missing: the message when the key is not there. */
static int read_parquet_key(mcdc_delta_actions *out, mcdc_storage *st, const char *key,
                            const char *label, const char *missing, mcdc_error *err) {
    mcdc_parquet_reader *r = NULL;
    int rc = mcdc_parquet_reader_open(&r, st, key, NULL, err);
    if (rc == MCDC_E_NOTFOUND) rc = mcdc_error_set(err, MCDC_E_CORRUPT, "%s %s", label, missing);
    else if (rc) mcdc_error_wrap(err, "%s", label);
    if (rc == MCDC_OK) rc = read_parquet_part(out, r, label, err);
    mcdc_parquet_reader_free(r);
    return rc;
}

static int read_parquet_part(mcdc_delta_actions *out, mcdc_parquet_reader *r,
                             const char *label, mcdc_error *err) {
    int rc = MCDC_OK;
    cp_ctx c;
    memset(&c, 0, sizeof c);
    c.label = label;
    c.err = err;
    c.out = out;
    for (int k = 0; k < N_LEAVES; k++) {
        c.leaves[k].index = find_leaf(r, k);
        if (c.leaves[k].index >= 0) {
            const mcdc_parquet_leaf *lf = mcdc_parquet_reader_leaf(r, c.leaves[k].index);
            c.leaves[k].max_def = lf->max_def;
            c.leaves[k].max_rep = lf->max_rep;
            bool want_rep = leaf_names[k].last != NULL;
            if ((lf->max_rep > 0) != want_rep) {
                rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                    "%s: column %s is %srepeated, which no checkpoint schema "
                                    "allows",
                                    label, lf->path, lf->max_rep ? "" : "not ");
                break;
            }
        }
    }
    if (rc == MCDC_OK && c.leaves[ADD_PATH].index < 0 && c.leaves[MD_ID].index < 0)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "%s has neither add nor metaData columns: not a Delta checkpoint",
                            label);
    for (int32_t rg = 0; rc == MCDC_OK && rg < mcdc_parquet_reader_row_groups(r); rg++) {
        int64_t rows = mcdc_parquet_reader_row_group_rows(r, rg);
        for (int k = 0; k < N_LEAVES && rc == MCDC_OK; k++) {
            cp_leaf *l = &c.leaves[k];
            mcdc_parquet_leaf_data_free(&l->d);
            memset(&l->d, 0, sizeof l->d);
            l->cursor = l->begin = l->end = 0;
            if (l->index >= 0) rc = mcdc_parquet_reader_read_leaf(&l->d, r, rg, l->index, err);
            if (rc == MCDC_OK && l->index >= 0 && l->max_rep == 0 && l->d.n != rows)
                rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                    "%s: row group %d: column %s has %lld values for %lld rows",
                                    label, (int)rg, leaf_names[k].prefix, (long long)l->d.n,
                                    (long long)rows);
        }
        for (int64_t row = 0; rc == MCDC_OK && row < rows; row++) {
            for (int k = 0; k < N_LEAVES; k++)
                if (c.leaves[k].max_rep > 0) next_row(&c.leaves[k]);
            if (present(&c.leaves[ADD_PATH], row)) rc = row_file(&c, row, true);
            else if (present(&c.leaves[REM_PATH], row)) rc = row_file(&c, row, false);
            else if (present(&c.leaves[MD_ID], row)) rc = row_metadata(&c, row);
            else if (present(&c.leaves[PR_R], row)) rc = row_protocol(&c, row);
            else if (present(&c.leaves[TX_APP], row)) rc = row_txn(&c, row);
            else if (present(&c.leaves[DM_DOMAIN], row)) rc = row_domain(&c, row);
            else if (present(&c.leaves[SIDECAR_PATH], row)) {
                const char *sp;
                size_t spn;
                if (!get_str(&c.leaves[SIDECAR_PATH], row, &sp, &spn))
                    rc = bad(&c, "sidecar.path is not a string column", row);
                else if (grow((void **)&out->sidecars, out->n_sidecars, sizeof *out->sidecars) ||
                    (out->sidecars[out->n_sidecars] = dupn(sp, spn)) == NULL)
                    rc = nomem(&c);
                else
                    out->n_sidecars++;
            }
        }
    }
    for (int k = 0; k < N_LEAVES; k++) mcdc_parquet_leaf_data_free(&c.leaves[k].d);
    return rc;
}

int mcdc_delta__read_checkpoint(mcdc_delta_actions *out, mcdc_storage *st,
                                const delta_checkpoint_ref *cp, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    int rc = MCDC_OK;
    for (int32_t part = 0; part < cp->n_parts && rc == MCDC_OK; part++) {
        char key[512];
        if (cp->uuid[0])
            snprintf(key, sizeof key, MCDC_DELTA_LOG_DIR "/%020lld.checkpoint.%s.%s",
                     (long long)cp->version, cp->uuid, cp->is_json ? "json" : "parquet");
        else if (cp->n_parts == 1)
            snprintf(key, sizeof key, MCDC_DELTA_LOG_DIR "/%020lld.checkpoint.parquet",
                     (long long)cp->version);
        else
            snprintf(key, sizeof key, MCDC_DELTA_LOG_DIR "/%020lld.checkpoint.%010d.%010d.parquet",
                     (long long)cp->version, (int)part + 1, (int)cp->n_parts);
        char label[1024];
        snprintf(label, sizeof label, "%s/%s (checkpoint of version %lld)", st->root, key,
                 (long long)cp->version);
        /* A small single file comes in one GET: one round trip on an object
         * store instead of one per column chunk; the same decoder reads it. */
        bool whole = cp->is_json || (cp->n_parts == 1 && cp->bytes > 0 &&
                                     cp->bytes <= (int64_t)MCDC_DELTA_CHECKPOINT_WHOLE_READ_MAX);
        if (!whole) {
            rc = read_parquet_key(out, st, key, label, "vanished while reading", err);
            continue;
        }
        size_t max = cp->is_json ? MCDC_DELTA_COMMIT_BYTES_MAX
                                 : MCDC_DELTA_CHECKPOINT_WHOLE_READ_MAX;
        mcdc_buf b = {0};
        b.limit = max + 1u;
        rc = mcdc_storage_get(st, key, max, &b, err);
        if (rc == MCDC_E_NOTFOUND)
            rc = mcdc_error_set(err, MCDC_E_CORRUPT, "%s vanished while reading", label);
        if (rc == MCDC_OK && cp->is_json)
            rc = mcdc_delta_actions_parse(out, b.data ? (const char *)b.data : "", b.len, label,
                                          err);
        else if (rc == MCDC_OK)
            rc = mcdc_delta__checkpoint_parse(out, b.data ? b.data : (const void *)"", b.len,
                                              label, err);
        mcdc_buf_free(&b);
    }
    /* V2: file actions may live in sidecar files under _delta_log/_sidecars. */
    size_t n_sidecars = rc == MCDC_OK ? out->n_sidecars : 0;
    for (size_t i = 0; i < n_sidecars && rc == MCDC_OK; i++) {
        const char *sp = out->sidecars[i];
        if (sp[0] == 0 || strchr(sp, '/') || strchr(sp, ':')) {
            rc = mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                "%s/_delta_log checkpoint of version %lld: sidecar \"%s\" is "
                                "not a plain file name under _delta_log/_sidecars",
                                st->root, (long long)cp->version, sp);
            break;
        }
        char key[600], label[1200];
        snprintf(key, sizeof key, MCDC_DELTA_LOG_DIR "/_sidecars/%s", sp);
        snprintf(label, sizeof label, "%s/%s (sidecar of checkpoint %lld)", st->root, key,
                 (long long)cp->version);
        rc = read_parquet_key(out, st, key, label, "is missing", err);
    }
    if (rc == MCDC_OK && (out->protocol == NULL || out->metadata == NULL))
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "%s/_delta_log checkpoint of version %lld lacks the %s action",
                            st->root, (long long)cp->version,
                            out->protocol == NULL ? "protocol" : "metaData");
    if (rc) mcdc_delta_actions_clear(out);
    return rc;
}
