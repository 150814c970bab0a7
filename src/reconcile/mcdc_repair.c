/*
 * mcdc_repair.c - mssql-cdc repair (mcdc_repair.h, docs/repair.md).
 *
 * A repair is a job of one unit on the job frame, its ledger the lake
 * (mcdc_once.h): bronze's txn of its own app id (mssql-cdc.repair.<run
 * id>, version 0) and the facts row after it:
 *   plan    the keys checked and typed, L = max_lsn and its commit time
 *   read    the keys' rows, MCDC_POINT_READ_KEYS a query
 *   commit  bronze: the images (operation 4) and deletes (1), stamped L,
 *           in one commit with the txn                      after_bronze
 *   facts   the 'repair' row, with txn(<app id>#facts, 0)   after_facts
 * A run that finds the bronze txn (killed after the commit, or run again)
 * replays the unit: the frame verifies the commit is this run's (its
 * binding, or an earlier build's repair record naming the run), its
 * counts come from the commit's userMetadata, and only the facts row is
 * written, which its own txn keeps to one. The stream's txn and verdict
 * are not touched: the app id is not the stream's, and the control table
 * is not written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_cfg.h"
#include "mcdc_changes.h"
#include "mcdc_facts.h"
#include "mcdc_once.h"
#include "mcdc_repair.h"
#include "mcdc_runtime.h"
#include "mcdc_tables.h"
#include "mcdc_txn.h"

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

/* ---- encoded keys, sorted ------------------------------------------------------ */

typedef struct {
    mcdc_buf bytes;
    size_t *off, *len;
    int64_t *row; /* the row each came from */
    size_t n, cap;
} keyset;

static int keyset_add(keyset *s, const mcdc_column *const *cols, int32_t n_cols, int64_t r,
                      mcdc_error *err) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        size_t *o = mcdc_realloc(s->off, cap * sizeof *o);
        if (o) s->off = o;
        size_t *l = o ? mcdc_realloc(s->len, cap * sizeof *l) : NULL;
        if (l) s->len = l;
        int64_t *w = l ? mcdc_realloc(s->row, cap * sizeof *w) : NULL;
        if (w) s->row = w;
        if (w == NULL) return nomem(err);
        s->cap = cap;
    }
    size_t at = s->bytes.len;
    int rc = silver_key_append(&s->bytes, cols, n_cols, r, err);
    if (rc) return rc;
    s->off[s->n] = at;
    s->len[s->n] = s->bytes.len - at;
    s->row[s->n] = r;
    s->n++;
    return MCDC_OK;
}

static const keyset *g_sort_set; /* qsort has no context argument */
static int by_key(const void *x, const void *y) {
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    const keyset *s = g_sort_set;
    return silver_key_cmp(s->bytes.data + s->off[a], s->len[a], s->bytes.data + s->off[b], s->len[b]);
}

/* The indexes of s in key order. */
static size_t *keyset_order(const keyset *s, mcdc_error *err) {
    size_t *ix = mcdc_calloc(s->n ? s->n : 1, sizeof *ix);
    if (ix == NULL) {
        nomem(err);
        return NULL;
    }
    for (size_t i = 0; i < s->n; i++) ix[i] = i;
    g_sort_set = s;
    qsort(ix, s->n, sizeof *ix, by_key);
    return ix;
}

static bool keyset_find(const keyset *s, const size_t *order, const uint8_t *k, size_t kn) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, j = order[mid];
        int c = silver_key_cmp(s->bytes.data + s->off[j], s->len[j], k, kn);
        if (c == 0) return true;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

static void keyset_free(keyset *s) {
    mcdc_buf_free(&s->bytes);
    mcdc_free(s->off);
    mcdc_free(s->len);
    mcdc_free(s->row);
    memset(s, 0, sizeof *s);
}

/* ---- one run ---------------------------------------------------------------------- */

typedef struct {
    const mcdc_ctx *ctx;
    const mcdc_opts *opts;
    const char *bronze_name, *facts_name, *warehouse, *run_id;
    const char *const *keys_json; /* the keys asked for (borrowed) */
    size_t n_json;
    char app_id[MCDC_TXN_APP_ID_MAX];
    char facts_app[MCDC_TXN_APP_ID_MAX];
    char name[MCDC_REPAIR_RUN_ID_MAX + 16]; /* "repair <run id>" */
    mcdc_table *bronze, *facts;
    /* the plan: the keys typed, the distinct ones, the stamp */
    bool planned;
    mcdc_batch *keys;          /* one row per key asked for */
    json_t **bounds;           /* each key as a point read's bound (owned) */
    keyset asked;
    const json_t **points;     /* the distinct keys' bounds (borrowed from bounds) */
    int64_t *uniq;             /* the distinct keys' rows in keys */
    size_t n_uniq;
    mcdc_lsn stamp;
    mcdc_changes *changes;
    const mcdc_schema *out;    /* the reader's output schema (borrowed from changes) */
    int32_t c_ci, c_lsn, c_seq, c_op, c_cmd, c_ts;
    const char *key_names[SILVER_KEYS_MAX];
    int32_t n_keys, key_out[SILVER_KEYS_MAX];
    mcdc_schema *key_schema;
    /* the read */
    mcdc_batch **got;
    size_t n_got, cap_got;
    keyset found;
    mcdc_repair_result *res;
} repair_run;

static int got_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    repair_run *r = ctx;
    int stop = mcdc_ctx_check_stop(r->ctx, "the repair", err);
    if (stop) {
        mcdc_batch_free(b);
        return stop;
    }
    if (r->n_got == r->cap_got) {
        size_t cap = r->cap_got ? r->cap_got * 2 : 16;
        mcdc_batch **v = mcdc_realloc(r->got, cap * sizeof *v);
        if (v == NULL) {
            mcdc_batch_free(b);
            return nomem(err);
        }
        r->got = v;
        r->cap_got = cap;
    }
    r->got[r->n_got++] = b;
    /* an image: operation 4 (the reader stamps 0, a snapshot row's) */
    mcdc_column *op = &b->columns[r->c_op];
    for (int64_t i = 0; i < b->rows; i++) {
        int32_t four = 4;
        memcpy(op->values + i * 4, &four, 4);
    }
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; k < r->n_keys; k++) kc[k] = &b->columns[r->key_out[k]];
    int rc = MCDC_OK;
    for (int64_t i = 0; rc == MCDC_OK && i < b->rows; i++) rc = keyset_add(&r->found, kc, r->n_keys, i, err);
    r->res->images += b->rows;
    return rc;
}

static int col_of(const mcdc_schema *s, const char *name, int32_t *out, mcdc_error *err) {
    *out = mcdc_schema_find(s, name);
    if (*out >= 0 || strcmp(name, "_command_id") == 0) return MCDC_OK;
    return mcdc_error_set(err, MCDC_E_PROTOCOL, "the reader's schema has no %s", name);
}

/* The source's side: connection, output schema, key columns. */
static int open_source(repair_run *r, const mcdc_opts *opts, mcdc_error *err) {
    silver_instances names;
    int rc = silver_source_open_bronze(&r->changes, opts, r->bronze, r->bronze_name, "repair", &names,
                                     err);
    silver_instances_free(&names);
    if (rc) return rc;
    r->out = mcdc_changes_schema(r->changes);
    const char *meta[6] = {"_capture_instance", "_start_lsn", "_seqval", "_operation", "_command_id", "_commit_ts"};
    int32_t *at[6] = {&r->c_ci, &r->c_lsn, &r->c_seq, &r->c_op, &r->c_cmd, &r->c_ts};
    for (int i = 0; rc == MCDC_OK && i < 6; i++) rc = col_of(r->out, meta[i], at[i], err);
    if (rc) return rc;
    int n = 0;
    const char *const *k = mcdc_changes_index_keys(r->changes, &n);
    if (n == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s has no unique index: repair reads the rows of keys, and a table "
                              "without a key has none. Nothing was written",
                              mcdc_changes_capture_instance(r->changes));
    if (n > SILVER_KEYS_MAX) return mcdc_error_set(err, MCDC_E_LIMIT, "an index of %d columns", n);
    rc = mcdc_schema_create(&r->key_schema, n, err);
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        int32_t j = mcdc_schema_find(r->out, k[i]);
        if (j < 0)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "key column '%s' of %s is not captured: repair cannot read it",
                                  k[i], mcdc_changes_capture_instance(r->changes));
        const mcdc_field *f = &r->out->fields[j];
        r->key_names[i] = f->name;
        r->key_out[i] = j;
        rc = mcdc_schema_set(r->key_schema, i, f->name, f->type, f->precision, f->scale,
                             f->byte_width, true, err);
    }
    r->n_keys = n;
    return rc;
}

/* The delete rows: each key of `keys` (rows idx[0..n)) in the output schema,
 * stamped lsn and us, other columns NULL. */
static int delete_rows(repair_run *r, const mcdc_batch *keys, const int64_t *idx, size_t n,
                       const char *lsn, bool has_ts, int64_t us, mcdc_batch **out,
                       mcdc_error *err) {
    mcdc_schema *s = (mcdc_schema *)r->out;
    int rc = mcdc_batch_create(out, s, (int64_t)n, err);
    const char *ci = mcdc_changes_capture_instance(r->changes);
    for (int32_t j = 0; rc == MCDC_OK && j < s->n_fields; j++) {
        mcdc_column *c = &(*out)->columns[j];
        int32_t kk = -1;
        for (int32_t k = 0; k < r->n_keys; k++)
            if (r->key_out[k] == j) kk = k;
        if (j == r->c_ci) rc = mcdc_col_fill_text(c, ci, (int64_t)n, err);
        else if (j == r->c_lsn) rc = mcdc_col_fill_text(c, lsn, (int64_t)n, err);
        else if (j == r->c_op) rc = mcdc_col_fill_int(c, 1, (int64_t)n, err);
        else if (j == r->c_ts && has_ts) rc = mcdc_col_fill_int(c, us, (int64_t)n, err);
        else if (kk >= 0)
            for (size_t i = 0; rc == MCDC_OK && i < n; i++)
                rc = mcdc_col_copy_value(c, &keys->columns[kk], idx[i], err);
        else rc = mcdc_col_append_nulls(c, (int64_t)n, err);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(*out, err);
    return rc;
}

/* What a commit of this run recorded, from its userMetadata. */
static int read_commit(repair_run *r, mcdc_error *err) {
    char *um = NULL;
    int64_t version = -1;
    int rc = mcdc_table_txn_commit(r->bronze, r->app_id, 0, &um, &version, err);
    if (rc) return rc;
    json_error_t je;
    json_t *m = um ? json_loads(um, 0, &je) : NULL;
    mcdc_free(um);
    json_t *rp = json_object_get(m, "repair");
    const char *lsn = json_string_value(json_object_get(rp, "lsn"));
    mcdc_repair_result *res = r->res;
    res->bronze_version = version;
    if (lsn && strlen(lsn) == MCDC_LSN_TEXT_LEN) {
        res->has_lsn = true;
        snprintf(res->lsn, sizeof res->lsn, "%s", lsn);
    }
    json_t *ts = json_object_get(rp, "commit_us");
    res->has_commit_ts = json_is_integer(ts);
    res->commit_us = res->has_commit_ts ? (int64_t)json_integer_value(ts) : 0;
    res->keys = (int64_t)json_integer_value(json_object_get(rp, "keys"));
    res->images = (int64_t)json_integer_value(json_object_get(rp, "images"));
    res->deletes = (int64_t)json_integer_value(json_object_get(rp, "deletes"));
    json_decref(m);
    if (!res->has_lsn)
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "bronze %s version %lld holds txn %s but no repair record in its "
                              "userMetadata: was it written by mssql-cdc repair?",
                              r->bronze_name, (long long)version, r->app_id);
    return MCDC_OK;
}

/* Its 'repair' facts row: the unit's record. */
static int append_facts(repair_run *r, mcdc_batch *rows, mcdc_error *err) {
    const mcdc_repair_result *res = r->res;
    json_t *d = json_pack("{s:s, s:s, s:I, s:I, s:I}", "run_id", r->run_id, "lsn", res->lsn, "images",
                          (json_int_t)res->images, "deletes", (json_int_t)res->deletes, "keys",
                          (json_int_t)res->keys);
    char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (detail == NULL) return nomem(err);
    mcdc_facts_event ev = {.app_id = r->app_id, .target = r->bronze_name, .event = SILVER_REPAIR_EVENT,
                           .rows = res->images + res->deletes, .lsn = res->lsn,
                           .has_commit_ts = res->has_commit_ts, .commit_us = res->commit_us,
                           .detail = detail};
    int rc = mcdc_facts_append_event(rows, &ev, err);
    free(detail);
    return rc;
}

/* The plan: the keys checked, typed and made distinct, every one before
 * anything is read; then the stamp L = max_lsn and its commit time. */
static int repair_plan(repair_run *r, mcdc_error *err) {
    mcdc_repair_result *res = r->res;
    size_t n = r->n_json;
    int rc = open_source(r, r->opts, err);
    mcdc_schema *bs = NULL;
    if (rc == MCDC_OK) rc = mcdc_table_schema(r->bronze, &bs, err);
    if (rc == MCDC_OK && bs == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND,
                            "bronze %s does not exist: repair appends to the stream's bronze "
                            "(give --bronze the stream's --target)", r->bronze_name);
    for (int32_t k = 0; rc == MCDC_OK && k < r->n_keys; k++)
        if (mcdc_schema_find(bs, r->key_names[k]) < 0)
            rc = mcdc_error_set(err, MCDC_E_MISMATCH, "bronze %s has no key column '%s'",
                                r->bronze_name, r->key_names[k]);
    mcdc_schema_unref(bs);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&r->keys, r->key_schema, (int64_t)n, err);
    if (rc == MCDC_OK && (r->bounds = mcdc_calloc(n ? n : 1, sizeof *r->bounds)) == NULL)
        rc = nomem(err);
    for (size_t i = 0; rc == MCDC_OK && i < n; i++) {
        const char *t = r->keys_json[i] ? r->keys_json[i] : "";
        rc = mcdc_repair_key_parse(t, strlen(t), i, r->out, r->key_names, r->n_keys, r->keys,
                                   &r->bounds[i], err);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(r->keys, err);
    /* distinct keys */
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; rc == MCDC_OK && k < r->n_keys; k++) kc[k] = &r->keys->columns[k];
    for (size_t i = 0; rc == MCDC_OK && i < n; i++) rc = keyset_add(&r->asked, kc, r->n_keys, (int64_t)i, err);
    size_t *order = NULL;
    if (rc == MCDC_OK && (order = keyset_order(&r->asked, err)) == NULL) rc = MCDC_E_NOMEM;
    if (rc == MCDC_OK) {
        r->points = mcdc_calloc(n ? n : 1, sizeof *r->points);
        r->uniq = mcdc_calloc(n ? n : 1, sizeof *r->uniq);
        if (!r->points || !r->uniq) rc = nomem(err);
    }
    const keyset *asked = &r->asked;
    for (size_t i = 0; rc == MCDC_OK && i < n; i++) {
        size_t j = order[i];
        if (i > 0) {
            size_t p = order[i - 1];
            if (silver_key_cmp(asked->bytes.data + asked->off[p], asked->len[p],
                               asked->bytes.data + asked->off[j], asked->len[j]) == 0)
                continue;
        }
        r->uniq[r->n_uniq] = asked->row[j];
        r->points[r->n_uniq++] = r->bounds[asked->row[j]];
    }
    mcdc_free(order);
    res->keys = (int64_t)r->n_uniq;
    /* the stamp, before the read */
    if (rc == MCDC_OK && r->n_uniq > 0) rc = mcdc_changes_max_lsn(r->changes, &r->stamp, err);
    if (rc == MCDC_OK && r->n_uniq > 0)
        rc = mcdc_changes_commit_time(r->changes, &r->stamp, &res->commit_us, &res->has_commit_ts, err);
    if (rc == MCDC_OK && r->n_uniq > 0) {
        mcdc_lsn_format(&r->stamp, res->lsn);
        res->has_lsn = true;
    }
    return rc;
}

/* The run: the keys' rows read at the stamp, the ones the source lacks as
 * deletes, all in one bronze commit through the frame. */
static int repair_write(repair_run *r, mcdc_frame *f, const mcdc_unit *u, mcdc_error *err) {
    mcdc_repair_result *res = r->res;
    const keyset *asked = &r->asked;
    size_t n = r->n_json, n_uniq = r->n_uniq;
    const char *lsn = res->lsn;
    bool has_ts = res->has_commit_ts;
    int64_t us = res->commit_us;
    json_t *names = json_array();
    for (int32_t k = 0; names && k < r->n_keys; k++) json_array_append_new(names, json_string(r->key_names[k]));
    int rc = names ? mcdc_changes_point_read(r->changes, names, (const json_t *const *)r->points, n_uniq,
                                             &r->stamp, has_ts, us, got_rows, r, err)
                   : nomem(err);
    json_decref(names);
    /* the keys the source lacks: deletes */
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; k < r->n_keys; k++) kc[k] = &r->keys->columns[k];
    size_t *found_order = NULL;
    int64_t *gone = NULL;
    size_t n_gone = 0;
    if (rc == MCDC_OK && (found_order = keyset_order(&r->found, err)) == NULL) rc = MCDC_E_NOMEM;
    if (rc == MCDC_OK && (gone = mcdc_calloc(n_uniq, sizeof *gone)) == NULL) rc = nomem(err);
    mcdc_buf one = {0};
    for (size_t i = 0; rc == MCDC_OK && i < n_uniq; i++) {
        mcdc_buf_reset(&one);
        rc = silver_key_append(&one, kc, r->n_keys, r->uniq[i], err);
        if (rc == MCDC_OK && !keyset_find(&r->found, found_order, one.data, one.len)) gone[n_gone++] = r->uniq[i];
    }
    mcdc_buf_free(&one);
    /* Two source rows of one key as bronze holds it (a datetime2(7) key
     * whose values differ below the microsecond, or a collation that
     * compares unlike the lake): which one silver should hold is not
     * knowable here, so the key is refused, and nothing is written. */
    for (size_t i = 1; rc == MCDC_OK && i < r->found.n; i++) {
        size_t p = found_order[i - 1], q = found_order[i];
        if (silver_key_cmp(r->found.bytes.data + r->found.off[p], r->found.len[p],
                           r->found.bytes.data + r->found.off[q], r->found.len[q]) != 0)
            continue;
        const char *kj = NULL;
        for (size_t k = 0; kj == NULL && k < n; k++)
            if (asked->len[k] == r->found.len[q] &&
                memcmp(asked->bytes.data + asked->off[k], r->found.bytes.data + r->found.off[q],
                       asked->len[k]) == 0)
                kj = r->keys_json[asked->row[k]];
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "key %.200s: the source has more than one row that bronze holds as "
                            "this key (values that differ below the microsecond of a datetime2(7) "
                            "or datetimeoffset(7) key, or a collation that compares them alike); "
                            "repair cannot tell which one silver should hold and refuses it. "
                            "Nothing was written; fix the key in the source, or repair the other "
                            "keys without it",
                            kj ? kj : "?");
    }
    mcdc_batch *dels = NULL;
    if (rc == MCDC_OK && n_gone > 0) rc = delete_rows(r, r->keys, gone, n_gone, lsn, has_ts, us, &dels, err);
    res->deletes = (int64_t)n_gone;
    /* one commit */
    mcdc_appender *ap = NULL;
    mcdc_table_props props = {.kind = MCDC_KIND_BRONZE};
    if (rc == MCDC_OK) rc = mcdc_appender_open(&ap, r->bronze, (mcdc_schema *)r->out, &props, err);
    for (size_t i = 0; rc == MCDC_OK && i < r->n_got; i++) rc = mcdc_appender_write(ap, r->got[i], err);
    if (rc == MCDC_OK && dels) rc = mcdc_appender_write(ap, dels, err);
    bool skipped = false;
    if (rc == MCDC_OK) {
        json_t *m = json_pack("{s:{s:s, s:s, s:o, s:I, s:I, s:I}}", "repair", "run_id", r->run_id, "lsn", lsn,
                              "commit_us", has_ts ? json_integer(us) : json_null(), "keys",
                              (json_int_t)res->keys, "images", (json_int_t)res->images, "deletes",
                              (json_int_t)res->deletes);
        mcdc_table_commit c = {.operation = "WRITE", .read_version = -1};
        rc = m ? mcdc_frame_commit_data_with(f, u, ap, m, &c, &skipped, err) : nomem(err);
    }
    /* what bronze holds now: this commit, or (skipped) the one another run
     * of this id committed first, whose rows stand */
    if (rc == MCDC_OK) {
        res->already = skipped;
        rc = read_commit(r, err);
    }
    mcdc_appender_free(ap);
    mcdc_batch_free(dels);
    mcdc_free(gone);
    mcdc_free(found_order);
    return rc;
}

/* ---- the job: one unit on the lake (mcdc_once.h) --------------------------------------
 * Its stamp L is its plan; bronze's commit, txn(REPAIR, 0), its data; the
 * 'repair' facts row, txn(REPAIR_FACTS, 0), its record. */

static void stamp_of(mcdc_pos *p, const mcdc_repair_result *res) {
    mcdc_pos_free(p);
    p->kind = MCDC_POS_STAMP;
    p->stamp.has_lsn = mcdc_lsn_parse_cstr(&p->stamp.lsn, res->lsn, NULL) == MCDC_OK;
    p->stamp.has_ts = res->has_commit_ts;
    p->stamp.commit_us = res->commit_us;
}

static void log_held(const repair_run *r) {
    mcdc_log(MCDC_LOG_INFO, "repair %s: bronze %s holds its rows (version %lld): nothing is "
                            "appended again", r->run_id, r->bronze_name,
             (long long)r->res->bronze_version);
}

static int j_plan(void *job, const mcdc_pos *last_end, mcdc_pos *start, mcdc_pos *end, bool *idle,
                  mcdc_error *err) {
    repair_run *r = job;
    *idle = true;
    if (last_end) { /* recorded: run again, it reports what it wrote */
        r->res->already = true;
        int rc = read_commit(r, err);
        if (rc == MCDC_OK) log_held(r);
        return rc;
    }
    int rc = repair_plan(r, err);
    if (rc || r->n_uniq == 0) return rc; /* no key: nothing to write */
    *idle = false;
    r->planned = true;
    start->kind = MCDC_POS_STAMP;
    stamp_of(end, r->res);
    return MCDC_OK;
}

static int j_run(void *job, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                 mcdc_error *err) {
    repair_run *r = job;
    int rc;
    if (u->data_done) { /* written before: killed before its facts row */
        r->res->already = true;
        rc = read_commit(r, err);
        if (rc == MCDC_OK) log_held(r);
    } else if (!r->planned) {
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "repair %s: its unit is planned, but bronze %s holds no commit of it",
                            r->run_id, r->bronze_name);
    } else {
        rc = repair_write(r, f, u, err);
        res->data_committed = rc == MCDC_OK;
    }
    res->rows = r->res->images + r->res->deletes;
    return rc;
}

static int j_facts(void *job, const mcdc_unit *u, const mcdc_unit_result *res, mcdc_batch *rows,
                   mcdc_error *err) {
    (void)u, (void)res;
    return append_facts(job, rows, err);
}

static void j_done(void *job, const mcdc_unit *u, const mcdc_unit_result *res,
                   const mcdc_verdict *v) {
    (void)u, (void)res, (void)v;
    repair_run *r = job;
    mcdc_log(MCDC_LOG_INFO, "repair %s recorded in %s", r->run_id, r->facts_name);
}

static const mcdc_job_ops REPAIR_OPS = {
    .kind = "repair",
    .pos_kind = MCDC_POS_STAMP,
    .plan = j_plan,
    .run = j_run,
    .facts = j_facts,
    .done = j_done,
};

/* A commit of this run an earlier build wrote (no binding): its repair
 * record names the run, and its stamp. */
static bool legacy_owns(void *job, const char *um) {
    repair_run *r = job;
    json_error_t je;
    json_t *m = um ? json_loads(um, 0, &je) : NULL;
    const char *run = json_string_value(json_object_get(json_object_get(m, "repair"), "run_id"));
    bool ours = run && strcmp(run, r->run_id) == 0;
    json_decref(m);
    return ours;
}

static bool legacy_end(void *job, const char *um, mcdc_pos *end) {
    repair_run *r = job;
    json_error_t je;
    json_t *m = um ? json_loads(um, 0, &je) : NULL;
    json_t *rp = json_object_get(m, "repair");
    const char *lsn = json_string_value(json_object_get(rp, "lsn"));
    json_t *ts = json_object_get(rp, "commit_us");
    bool ok = legacy_owns(r, um) && lsn;
    if (ok) {
        end->kind = MCDC_POS_STAMP;
        end->stamp.has_lsn = mcdc_lsn_parse_cstr(&end->stamp.lsn, lsn, NULL) == MCDC_OK;
        end->stamp.has_ts = json_is_integer(ts);
        end->stamp.commit_us = json_is_integer(ts) ? (int64_t)json_integer_value(ts) : 0;
    }
    json_decref(m);
    return ok;
}

/* The ledger of run r (its tables open). */
static mcdc_once_cfg once_cfg(repair_run *r) {
    return (mcdc_once_cfg){.ctx = r->ctx,
                           .id = r->app_id,
                           .name = r->name,
                           .unit = 0,
                           .target = r->bronze,
                           .target_kind = MCDC_KIND_BRONZE,
                           .target_role = "bronze",
                           .app_id = r->app_id,
                           .facts = r->facts,
                           .facts_app_id = r->facts_app,
                           .owns = legacy_owns,
                           .legacy_end = legacy_end};
}

static void run_free(repair_run *r) {
    for (size_t i = 0; i < r->n_got; i++) mcdc_batch_free(r->got[i]);
    mcdc_free(r->got);
    keyset_free(&r->found);
    keyset_free(&r->asked);
    for (size_t i = 0; r->bounds && i < r->n_json; i++) json_decref(r->bounds[i]);
    mcdc_free(r->bounds);
    mcdc_free(r->points);
    mcdc_free(r->uniq);
    mcdc_batch_free(r->keys);
    mcdc_schema_unref(r->key_schema);
    mcdc_changes_close(r->changes);
    mcdc_table_close(r->bronze);
    mcdc_table_close(r->facts);
}

/* Opens run_id's repair of bronze (its tables, its app ids). */
static int run_open(repair_run *r, const mcdc_ctx *ctx, const char *bronze, const char *facts_table,
                    const char *warehouse, const char *run_id, mcdc_repair_result *res,
                    mcdc_error *err) {
    static const mcdc_ctx none = {0};
    *r = (repair_run){.ctx = ctx ? ctx : &none, .bronze_name = bronze, .facts_name = facts_table,
                      .warehouse = warehouse, .run_id = run_id, .res = res};
    snprintf(r->name, sizeof r->name, "repair %s", run_id);
    int rc = mcdc_txn_app_id(r->app_id, sizeof r->app_id, MCDC_TXN_REPAIR, run_id, 0, NULL, err);
    if (rc == MCDC_OK)
        rc = mcdc_txn_app_id(r->facts_app, sizeof r->facts_app, MCDC_TXN_REPAIR_FACTS, run_id, 0,
                             NULL, err);
    const mcdc_storage_env *env = r->ctx->storage_env;
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&r->bronze, env, bronze, warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&r->facts, env, facts_table, warehouse, err);
    return rc;
}

int mcdc_repair_keys(const mcdc_ctx *ctx, const mcdc_opts *opts, const char *bronze,
                     const char *facts_table, const char *warehouse, const char *run_id,
                     const char *const *keys_json, size_t n, mcdc_repair_result *res,
                     mcdc_error *err) {
    if (res == NULL || bronze == NULL || facts_table == NULL || (n > 0 && keys_json == NULL))
        return mcdc_error_set(err, MCDC_E_INVALID, "repair needs bronze, the facts table and the keys");
    memset(res, 0, sizeof *res);
    res->size = sizeof *res;
    res->bronze_version = -1;
    int rc = mcdc_repair_run_id_check(run_id, err);
    if (rc) return rc;
    if (n > MCDC_REPAIR_KEYS_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT, "%zu keys: a repair takes at most %d", n, MCDC_REPAIR_KEYS_MAX);
    if (opts == NULL || mcdc_opt_connection_string(opts) == NULL || mcdc_opt_capture_instance(opts) == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "repair reads the keys' rows from SQL Server: give the stream's source "
                              "options (connectionString, captureInstance)");
    snprintf(res->run_id, sizeof res->run_id, "%s", run_id);
    repair_run r;
    rc = run_open(&r, ctx, bronze, facts_table, warehouse, run_id, res, err);
    r.opts = opts;
    r.keys_json = keys_json;
    r.n_json = n;
    mcdc_once_cfg oc = once_cfg(&r);
    if (rc == MCDC_OK) rc = mcdc_once_run(&oc, &REPAIR_OPS, &r, err);
    run_free(&r);
    if (rc && rc != MCDC_E_CANCELLED) mcdc_error_wrap(err, "repair %s of %s", run_id, bronze);
    return rc;
}

int mcdc_repair_state(mcdc_table *bronze, mcdc_table *facts, const char *run_id, bool *written,
                      bool *recorded, mcdc_error *err) {
    *written = *recorded = false;
    repair_run r = {.run_id = run_id, .bronze = bronze, .facts = facts};
    int rc = mcdc_txn_app_id(r.app_id, sizeof r.app_id, MCDC_TXN_REPAIR, run_id, 0, NULL, err);
    if (rc == MCDC_OK)
        rc = mcdc_txn_app_id(r.facts_app, sizeof r.facts_app, MCDC_TXN_REPAIR_FACTS, run_id, 0,
                             NULL, err);
    snprintf(r.name, sizeof r.name, "repair %s", run_id);
    mcdc_once_cfg oc = once_cfg(&r);
    if (rc == MCDC_OK) rc = mcdc_once_state(&oc, written, recorded, err);
    return rc;
}

/* ---- the report's keys --------------------------------------------------------------- */

/* A run of the report other than the one asked for, and when it ran. */
typedef struct {
    char *run_id;
    int64_t run_at_us;
} report_run;

typedef struct {
    const char *run_id;
    char **keys;
    size_t n, cap;
    bool found;               /* a row of run_id */
    report_run *others;       /* the other runs (for the message when none is) */
    size_t n_others, cap_others;
} report_acc;

/* Notes run `s` (n bytes) run at `at`: each run once, its latest run_at. */
static int other_run(report_acc *a, const char *s, size_t n, int64_t at, mcdc_error *err) {
    /* a run's rows are written together: most repeats are the last one */
    for (size_t i = a->n_others; i-- > 0;)
        if (strlen(a->others[i].run_id) == n && memcmp(a->others[i].run_id, s, n) == 0) {
            if (at > a->others[i].run_at_us) a->others[i].run_at_us = at;
            return MCDC_OK;
        }
    if (a->n_others == a->cap_others) {
        size_t cap = a->cap_others ? a->cap_others * 2 : 16;
        report_run *v = mcdc_realloc(a->others, cap * sizeof *v);
        if (v == NULL) return nomem(err);
        a->others = v;
        a->cap_others = cap;
    }
    char *id = mcdc_strndup(s, n);
    if (id == NULL) return nomem(err);
    a->others[a->n_others++] = (report_run){id, at};
    return MCDC_OK;
}

static int by_run_at_desc(const void *x, const void *y) {
    const report_run *a = x, *b = y;
    return (a->run_at_us < b->run_at_us) - (a->run_at_us > b->run_at_us);
}

/* run_id is none of the report's runs: MCDC_E_INVALID naming the newest
 * few it holds. */
static int no_such_run(report_acc *a, const char *report_table, mcdc_error *err) {
    enum { SHOWN = 5 };
    if (a->n_others > 1) qsort(a->others, a->n_others, sizeof *a->others, by_run_at_desc);
    char list[SHOWN * (MCDC_REPAIR_RUN_ID_MAX + 40)] = "";
    size_t len = 0;
    for (size_t i = 0; i < a->n_others && i < SHOWN && len < sizeof list; i++) {
        char at[32] = "?";
        if (a->others[i].run_at_us != INT64_MIN) mcdc_format_ts_us(a->others[i].run_at_us, 0, at);
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s (run at %s)", i ? ", " : "",
                                a->others[i].run_id, at);
    }
    if (a->n_others == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "run %s is not in report table %s, which holds no run: give the "
                              "run_id a reconcile with --report-table %s printed. Nothing was "
                              "read or written",
                              a->run_id, report_table, report_table);
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "run %s is not in report table %s, which holds %zu run%s (%s%s): give "
                          "one of them, the run_id reconcile printed. Nothing was read or written",
                          a->run_id, report_table, a->n_others, a->n_others == 1 ? "" : "s",
                          a->n_others > SHOWN ? "the newest: " : "", list);
}

static void report_acc_free(report_acc *a) {
    for (size_t i = 0; i < a->n_others; i++) mcdc_free(a->others[i].run_id);
    mcdc_free(a->others);
    a->others = NULL;
    a->n_others = a->cap_others = 0;
}

static bool cell_eq(const mcdc_column *c, int64_t r, const char *s) {
    if (!mcdc_col_is_valid(c, r)) return false;
    size_t n = (size_t)(c->offsets[r + 1] - c->offsets[r]);
    return n == strlen(s) && memcmp(c->data + c->offsets[r], s, n) == 0;
}

static int report_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    report_acc *a = ctx;
    int rc = MCDC_OK;
    const mcdc_column *run = &b->columns[0], *ft = &b->columns[1], *key = &b->columns[2],
                      *st = &b->columns[3];
    const mcdc_column *at = b->schema->n_fields > 4 ? &b->columns[4] : NULL;
    for (int64_t r = 0; r < b->rows && rc == MCDC_OK; r++) {
        if (!cell_eq(run, r, a->run_id)) {
            if (!a->found && mcdc_col_is_valid(run, r)) {
                int64_t us = INT64_MIN;
                if (at && mcdc_col_is_valid(at, r)) memcpy(&us, at->values + r * 8, 8);
                rc = other_run(a, (const char *)run->data + run->offsets[r],
                               (size_t)(run->offsets[r + 1] - run->offsets[r]), us, err);
            }
            continue;
        }
        a->found = true;
        if (!mcdc_col_is_valid(key, r) || cell_eq(st, r, "IN_FLIGHT")) continue;
        if (!cell_eq(ft, r, "MISSING_TARGET") && !cell_eq(ft, r, "MISSING_SOURCE") &&
            !cell_eq(ft, r, "RECORD_DIFF") && !cell_eq(ft, r, "DUPLICATE_TARGET"))
            continue;
        if (a->n == a->cap) {
            size_t cap = a->cap ? a->cap * 2 : 64;
            char **v = mcdc_realloc(a->keys, cap * sizeof *v);
            if (v == NULL) {
                rc = nomem(err);
                break;
            }
            a->keys = v;
            a->cap = cap;
        }
        a->keys[a->n] = mcdc_strndup((const char *)key->data + key->offsets[r],
                                     (size_t)(key->offsets[r + 1] - key->offsets[r]));
        if (a->keys[a->n] == NULL) rc = nomem(err);
        else a->n++;
    }
    mcdc_batch_free(b);
    return rc;
}

int mcdc_repair_report_keys(const mcdc_ctx *ctx, const char *report_table, const char *warehouse,
                            const char *run_id, char ***keys, size_t *n, mcdc_error *err) {
    *keys = NULL;
    *n = 0;
    int rc = mcdc_repair_run_id_check(run_id, err);
    if (rc) return rc;
    mcdc_table *t = NULL;
    rc = mcdc_table_open_env(&t, ctx ? ctx->storage_env : NULL, report_table, warehouse, err);
    mcdc_schema *s = NULL;
    if (rc == MCDC_OK) rc = mcdc_table_schema(t, &s, err);
    if (rc == MCDC_OK && s == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "report table %s does not exist: give --report-table the table reconcile wrote its report to",
                            report_table);
    static const char *const cols[5] = {"run_id", "failure_type", "key", "status", "run_at"};
    for (int i = 0; rc == MCDC_OK && i < 4; i++) {
        int32_t j = mcdc_schema_find(s, cols[i]);
        if (j < 0 || s->fields[j].type != MCDC_TYPE_UTF8)
            rc = mcdc_error_set(err, MCDC_E_MISMATCH,
                                "%s has no STRING column %s: is it a reconcile report table?",
                                report_table, cols[i]);
    }
    /* run_at orders the runs a message names (the newest first); optional */
    int32_t at = rc == MCDC_OK ? mcdc_schema_find(s, "run_at") : -1;
    bool has_at = at >= 0 && (s->fields[at].type == MCDC_TYPE_TIMESTAMP_NTZ ||
                              s->fields[at].type == MCDC_TYPE_TIMESTAMP_UTC);
    mcdc_schema_unref(s);
    report_acc a = {.run_id = run_id};
    if (rc == MCDC_OK) {
        mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
        sc.columns = cols;
        sc.n_columns = has_at ? 5 : 4;
        int64_t v;
        rc = mcdc_table_scan_run(t, &sc, report_rows, &a, &v, NULL, err);
    }
    mcdc_table_close(t);
    if (rc) {
        mcdc_repair_keys_free(a.keys, a.n);
        report_acc_free(&a);
        return mcdc_error_wrap(err, "reading the keys of run %s in %s", run_id, report_table), rc;
    }
    if (!a.found) {
        rc = no_such_run(&a, report_table, err);
        report_acc_free(&a);
        return rc;
    }
    report_acc_free(&a);
    *keys = a.keys;
    *n = a.n;
    return MCDC_OK;
}

void mcdc_repair_keys_free(char **keys, size_t n) {
    for (size_t i = 0; keys && i < n; i++) mcdc_free(keys[i]);
    mcdc_free(keys);
}

/* ---- the public API -------------------------------------------------------------------- */

static void log_to_host(void *user, mcdc_log_level level, const char *msg) {
    const mcdc_repair_cfg *c = user;
    if (c->log_fn) c->log_fn(c->log_user, level, msg);
    else mcdc_log_stderr(level, msg);
}

/* Fills *result, the library's own (the caller's gets what its size holds). */
static int repair_job(const mcdc_opts *opts, const mcdc_repair_cfg *cfg,
                      mcdc_repair_result *result, mcdc_job_entry *metrics, mcdc_error *err) {
    memset(result, 0, sizeof *result);
    result->size = sizeof *result;
    result->bronze_version = -1;
    /* the caller's version's fields, the defaults after them */
    mcdc_repair_cfg given;
    int rc = mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_REPAIR, cfg, err);
    if (rc) return rc;
    cfg = &given;
    if (given.log_fn == NULL) given.log_fn = mcdc_runtime_log_fn(cfg->runtime, &given.log_user);
    if (cfg->bronze == NULL || cfg->facts_table == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "repair needs bronze and the facts table");
    bool from_report = cfg->report_table != NULL;
    if (from_report == (cfg->keys_json != NULL))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "repair takes its keys from a report table (with its run id) or a "
                              "list of key objects: one of the two");
    if (from_report && cfg->run_id == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "the report's keys need the reconcile run's id");
    mcdc_ctx ctx = {.host_stop = cfg->stop, .metrics = metrics};
    mcdc_ctx_take_test_hooks(&ctx, opts);
    mcdc_ctx_take_storage(&ctx, opts, cfg->runtime);
    mcdc_log_sink sink = {log_to_host, (void *)cfg, cfg->log_level};
    const mcdc_log_sink *host = mcdc_log_use(&sink);
    char uuid[37];
    const char *run_id = cfg->run_id;
    if (run_id == NULL) {
        mcdc_uuid4(uuid);
        run_id = uuid;
    }
    char **keys = NULL;
    size_t n = 0;
    const mcdc_role roles[3] = {{"--bronze", cfg->bronze, true},
                                {"--facts-table", cfg->facts_table, true},
                                {"--report-table", cfg->report_table, true}};
    rc = mcdc_roles_check(roles, 3, cfg->warehouse, NULL, err);
    if (rc == MCDC_OK && from_report) rc = mcdc_repair_report_keys(&ctx, cfg->report_table, cfg->warehouse, run_id, &keys, &n, err);
    if (rc == MCDC_OK)
        rc = mcdc_repair_keys(&ctx, opts, cfg->bronze, cfg->facts_table, cfg->warehouse, run_id,
                              from_report ? (const char *const *)keys : cfg->keys_json,
                              from_report ? n : cfg->n_keys, result, err);
    snprintf(result->run_id, sizeof result->run_id, "%s", run_id);
    mcdc_repair_keys_free(keys, n);
    mcdc_log_use(host);
    return rc;
}

/* Run with its runtime's accounting bound (mcdc_runtime.h). */
int mcdc_repair_run(const mcdc_opts *opts, const mcdc_repair_cfg *cfg, mcdc_repair_result *result,
                    mcdc_error *err) {
    if (cfg == NULL || result == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_repair_run: a NULL argument");
    int rc = mcdc_result_check(MCDC_RESULT_REPAIR, result, "mcdc_repair_run", err);
    if (rc) return rc;
    mcdc_call_scope in = mcdc_runtime_call_enter(MCDC_CFG_REPAIR, cfg,
                                                 offsetof(mcdc_repair_cfg, runtime), "repair",
                                                 offsetof(mcdc_repair_cfg, bronze));
    mcdc_repair_result res;
    rc = repair_job(opts, cfg, &res, in.metrics, err);
    mcdc_result_out(MCDC_RESULT_REPAIR, result, &res);
    mcdc_runtime_call_leave(in);
    return rc;
}

int mcdc_repair_result_json(char *out, size_t cap, const mcdc_repair_result *given,
                            mcdc_error *err) {
    if (out == NULL || given == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_repair_result_json: a NULL argument");
    mcdc_repair_result full;
    int rc = mcdc_result_in(MCDC_RESULT_REPAIR, &full, given, "mcdc_repair_result_json", err);
    if (rc) return rc;
    const mcdc_repair_result *r = &full;
    char ts[MCDC_TS_TEXT_SIZE + 2] = "null";
    if (r->has_commit_ts) {
        char t[32];
        mcdc_format_ts_us(r->commit_us, 6, t);
        snprintf(ts, sizeof ts, "\"%.28s\"", t);
    }
    char lsn[32] = "null";
    if (r->has_lsn) snprintf(lsn, sizeof lsn, "\"%.22s\"", r->lsn);
    json_t *id = json_string(r->run_id);
    char *idj = id ? json_dumps(id, JSON_ENCODE_ANY) : NULL;
    json_decref(id);
    if (idj == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int k = snprintf(out, cap,
                     "{\"run_id\":%s,\"lsn\":%s,\"commit_ts\":%s,\"keys\":%lld,\"images\":%lld,"
                     "\"deletes\":%lld,\"bronze_version\":%lld,\"already\":%s}",
                     idj, lsn, ts, (long long)r->keys, (long long)r->images, (long long)r->deletes,
                     (long long)r->bronze_version, r->already ? "true" : "false");
    free(idj);
    if (k < 0 || (size_t)k >= cap)
        return mcdc_error_set(err, MCDC_E_LIMIT, "%zu bytes are too few for the repair result", cap);
    return MCDC_OK;
}
