/*
 * mcdc_reconcile_tier2.c - reconcile's Tier 2: the buckets (other keys:
 * ranges) chosen after Tier 1 compared row by row, and the keys that
 * differ named (mcdc_reconcile.c runs it, and again for each re-check of
 * what is in flight).
 *
 * One bucket at a time, in memory flat in the rows' width: the source's rows
 * are hashed as they stream in and dropped, each leaving an entry (its
 * key's ordinal, or its encoded key in a key set, and its hash); then
 * silver's rows of the bucket, each hashed and looked up. An integer or date
 * key is looked up by its ordinal among the entries sorted once (both sides
 * come in key order, so each lookup starts where the one before ended: a
 * merge); any other key, and a NULL one, through the key set. The few keys
 * that differ are named by their rows again: a RECORD_DIFF keeps silver's
 * cells' hashes, and a second read of the bucket's source rows (only when a
 * key differs) gives the columns that differ and the MISSING_TARGET keys.
 * The next bucket's source rows are read on a thread of their own while one
 * is compared. A key the source's read held twice is kept until the keys in
 * flight are known: refused (not unique) unless it changed in flight.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_changes.h"
#include "mcdc_context.h"
#include "mcdc_lake.h"
#include "mcdc_reconcile.h"
#include "mcdc_silver.h"
#include "mcdc_tables.h"
#include "mcdc_value_text.h"

static const uint8_t ZERO_LSN[10];

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

/* ---- helpers ----------------------------------------------------------------------------- */
/* b as a string into *out (owned) when rc is MCDC_OK; else b is freed. */
static int buf_take(char **out, mcdc_buf *b, int rc, mcdc_error *err) {
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(b, err);
    if (rc) {
        mcdc_buf_free(b);
        return rc;
    }
    *out = (char *)b->data;
    return MCDC_OK;
}

/* The key JSON object of row `row`: {"k": value, ...}. */
static int key_json(char **out, const mcdc_reconcile *r, const mcdc_column *const *kc, int64_t row,
                    mcdc_error *err) {
    mcdc_buf b = {0};
    int rc = mcdc_buf_append_byte(&b, '{', err);
    for (int32_t k = 0; rc == MCDC_OK && k < r->n_keys; k++) {
        if (k) rc = mcdc_buf_append_byte(&b, ',', err);
        if (rc == MCDC_OK)
            rc = mcdc_text_json_string(&b, (const uint8_t *)r->keys[k], strlen(r->keys[k]), err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&b, ':', err);
        if (rc == MCDC_OK) rc = mcdc_text_cell_json(&b, kc[k], row, err);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&b, '}', err);
    return buf_take(out, &b, rc, err);
}

/* ---- the source's side ------------------------------------------------------------------- */
/* A RECORD_DIFF whose columns the second read names. */
typedef struct rec_pend {
    int64_t diff;    /* its index in r->diffs */
    char *lsn;       /* silver's _start_lsn (owned), NULL when NULL */
    size_t lsn_len;
    int64_t dup_rows; /* > 0: silver holds the key this many times (a DUPLICATE_TARGET) */
} rec_pend;

typedef struct src_side {
    mcdc_reconcile *r;
    rec_entry *ent;
    int64_t n_ent, cap_ent;
    int64_t n_ord;      /* ordinal keys: entries [0, n_ord) sorted by ord */
    int64_t finger;
    rec_keyset keys;    /* encoded key -> entry (other keys; NULL ordinal keys) */
    mcdc_buf key;
    rec_hash *tmp;
    int64_t cap_tmp;
    const mcdc_column **cols;  /* a batch's compared columns (n_cols) */
    int64_t rows;       /* rows read */
    int64_t read_us;
    rec_pend *pend;
    int64_t n_pend, cap_pend;
    rec_hash *pend_h;   /* silver's cells' hashes, n_cols a RECORD_DIFF */
    int64_t cap_pend_h;
    int64_t missing;    /* entries no silver row matched */
    /* ordinal keys: the bucket's rows with a key and their sum (a re-check's counts) */
    int64_t ord_rows;
    rec_i128 ord_sum;
    /* keys the read held twice (the first few) */
    rec_twice twice[REC_TWICE_MAX];
    int32_t n_twice;
    mcdc_buf twice_keys;
} src_side;

static void side_cols(const mcdc_reconcile *r, const mcdc_batch *b, const mcdc_column **cols) {
    for (int32_t k = 0; k < r->n_cols; k++) {
        int i = rec_col_index(b->schema, r->col_names[k]);
        cols[k] = i >= 0 ? &b->columns[i] : NULL;
    }
}

/* The key columns of a source batch. */
static void key_cols(const mcdc_reconcile *r, const mcdc_batch *b, const mcdc_column **kc) {
    for (int32_t k = 0; k < r->n_keys; k++)
        kc[k] = &b->columns[rec_col_index(b->schema, r->keys[k])];
}

static int side_cols_alloc(src_side *s, mcdc_error *err) {
    if (s->cols == NULL &&
        (s->cols = mcdc_malloc((size_t)(s->r->n_cols + 1) * sizeof *s->cols)) == NULL)
        return nomem(err);
    return MCDC_OK;
}

/* The entry of a source row's key, or -1 (ordinal keys: once sorted). */
static int64_t src_find(src_side *s, const mcdc_column *const *kc, int64_t row, int *rc,
                        mcdc_error *err) {
    int64_t v;
    if (s->r->ordinal && silver_range_value(kc[0], row, &v)) return rec_entries_find(s->ent, s->n_ord, &s->finger, v);
    s->key.len = 0;
    *rc = silver_key_append(&s->key, kc, s->r->n_keys, row, err);
    if (*rc) return -1;
    int64_t k = rec_keyset_find(&s->keys, s->key.data, s->key.len);
    return k < 0 ? -1 : s->keys.val[k];
}

/* A key the source's read held twice: kept (the first few) to be decided on
 * once the keys in flight are known. The key is s->key's bytes (other
 * keys), or ordinal ord. */
static int twice_add(src_side *s, bool ordinal, int64_t ord, char *json, mcdc_error *err) {
    if (s->n_twice == REC_TWICE_MAX) {
        mcdc_free(json);
        return MCDC_OK;
    }
    rec_twice t = {.ordinal = ordinal, .ord = ord, .key_off = (int64_t)s->twice_keys.len,
                   .json = json};
    int rc = ordinal ? MCDC_OK : mcdc_buf_append(&s->twice_keys, s->key.data, s->key.len, err);
    if (rc) {
        mcdc_free(json);
        return rc;
    }
    t.key_len = (int64_t)s->twice_keys.len - t.key_off;
    s->twice[s->n_twice++] = t;
    return MCDC_OK;
}

/* A source batch: its rows hashed into entries, the batch dropped. */
static int src_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    src_side *s = ctx;
    mcdc_reconcile *r = s->r;
    int rc = side_cols_alloc(s, err);
    const mcdc_column *kc[SILVER_KEYS_MAX];
    if (rc == MCDC_OK) {
        side_cols(r, b, s->cols);
        key_cols(r, b, kc);
        rc = rec_grow(&s->tmp, &s->cap_tmp, b->rows, sizeof *s->tmp, err);
    }
    if (rc == MCDC_OK) rc = rec_hash_rows(s->tmp, s->cols, r->n_cols, 0, b->rows, err);
    if (rc == MCDC_OK) rc = rec_grow(&s->ent, &s->cap_ent, s->n_ent + b->rows, sizeof *s->ent, err);
    if (rc == MCDC_OK && r->ctx.progress) /* the prefetch thread's: counted at once */
        mcdc_progress_add(r->ctx.progress, b->rows, mcdc_batch_bytes(b));
    if (rc == MCDC_OK) rc = mcdc_ctx_check_stop(&r->ctx, "the reconcile run's report", err);
    for (int64_t i = 0; rc == MCDC_OK && i < b->rows; i++) {
        rec_entry e = {.seq = s->rows + i, .h = s->tmp[i], .pend = -1};
        if (r->ordinal) {
            e.null_key = !silver_range_value(kc[0], i, &e.ord);
            if (!e.null_key) { /* sorted once all are in */
                s->ord_rows++;
                s->ord_sum += e.ord;
                s->ent[s->n_ent++] = e;
                continue;
            }
        }
        s->key.len = 0;
        rc = silver_key_append(&s->key, kc, r->n_keys, i, err);
        int64_t idx;
        bool added;
        if (rc == MCDC_OK) rc = rec_keyset_add(&s->keys, s->key.data, s->key.len, &idx, &added, err);
        if (rc == MCDC_OK && !added && s->n_twice < REC_TWICE_MAX) {
            /* a key twice in the source: its first row stands for it */
            char *json = NULL;
            rc = key_json(&json, r, kc, i, err);
            if (rc == MCDC_OK) rc = twice_add(s, false, 0, json, err);
        }
        if (rc || !added) continue;
        s->keys.val[idx] = s->n_ent;
        if (r->ordinal) e.ord = idx; /* its entry's place is set once sorted */
        s->ent[s->n_ent++] = e;
    }
    if (rc == MCDC_OK) s->rows += b->rows;
    mcdc_batch_free(b);
    return rc;
}

/* Ordinal keys, once the source is read: entries sorted by ordinal (a key
 * twice keeps its first row, and is kept as one the read held twice), NULL
 * keys after them, found through the key set. */
static int src_finish(src_side *s, mcdc_error *err) {
    mcdc_reconcile *r = s->r;
    if (!r->ordinal) return MCDC_OK;
    int64_t repeats = 0;
    s->n_ord = rec_entries_order(s->ent, s->n_ent, &repeats);
    for (int64_t i = s->n_ord; i < s->n_ent; i++) s->keys.val[s->ent[i].ord] = i;
    int rc = MCDC_OK;
    for (int64_t i = 1; rc == MCDC_OK && repeats > 0 && i < s->n_ord && s->n_twice < REC_TWICE_MAX;
         i++) {
        if (s->ent[i].ord != s->ent[i - 1].ord || (i > 1 && s->ent[i - 2].ord == s->ent[i].ord))
            continue; /* not a key's second row */
        char *v = NULL, *json = NULL;
        mcdc_buf b = {0};
        rc = rec_bound_json(&v, r, true, s->ent[i].ord, err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&b, '{', err);
        if (rc == MCDC_OK)
            rc = mcdc_text_json_string(&b, (const uint8_t *)r->keys[0], strlen(r->keys[0]), err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&b, ':', err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(&b, v ? v : "null", err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&b, '}', err);
        mcdc_free(v);
        rc = buf_take(&json, &b, rc, err);
        if (rc == MCDC_OK) rc = twice_add(s, true, s->ent[i].ord, json, err);
    }
    return rc;
}

static void src_side_clear(src_side *s) {
    mcdc_free(s->ent);
    rec_keyset_clear(&s->keys);
    mcdc_free(s->tmp);
    mcdc_buf_free(&s->key);
    mcdc_free(s->cols);
    for (int64_t i = 0; i < s->n_pend; i++) mcdc_free(s->pend[i].lsn);
    mcdc_free(s->pend);
    mcdc_free(s->pend_h);
    for (int32_t i = 0; i < s->n_twice; i++) mcdc_free(s->twice[i].json);
    mcdc_buf_free(&s->twice_keys);
    memset(s, 0, sizeof *s);
}

/* ---- silver's side, and the keys that differ --------------------------------------------- */
typedef struct sil_side {
    mcdc_reconcile *r;
    src_side *src;
    int64_t bucket;
    bool filter;        /* ordinal: only rows in [lo, hi) */
    bool has_lo, has_hi;
    int64_t lo, hi;
    bool left;          /* other keys: silver's rows of the source's keys only */
    rec_hash *tmp;
    int64_t cap_tmp;
    mcdc_buf key;
    rec_keyset gone;    /* the keys named MISSING_SOURCE: each once */
    int64_t ord_rows;   /* ordinal keys: the bucket's rows with a key, their sum */
    rec_i128 ord_sum;
} sil_side;

/* detail: {"silver_start_lsn": ..., "columns": ...}, either left out when
 * NULL (Spark's to_json drops NULL fields). */
static int detail_json(char **out, const char *lsn, size_t lsn_len, const char *columns,
                       mcdc_error *err) {
    mcdc_buf b = {0};
    int rc = mcdc_buf_append_byte(&b, '{', err);
    if (rc == MCDC_OK && lsn) {
        rc = mcdc_buf_append_str(&b, "\"silver_start_lsn\":", err);
        if (rc == MCDC_OK) rc = mcdc_text_json_string(&b, (const uint8_t *)lsn, lsn_len, err);
    }
    if (rc == MCDC_OK && columns) {
        rc = mcdc_buf_append_str(&b, lsn ? ",\"columns\":" : "\"columns\":", err);
        if (rc == MCDC_OK) rc = mcdc_text_json_string(&b, (const uint8_t *)columns, strlen(columns), err);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&b, '}', err);
    return buf_take(out, &b, rc, err);
}

/* A key of a repair apply has not taken: detail gains "repair_pending",
 * the repair's run id (its change is pending apply, as a change in flight
 * is pending the stream). */
static int detail_pending(char **detail, const char *run_id, mcdc_error *err) {
    const char *d = *detail ? *detail : "{}";
    size_t n = strlen(d);
    MCDC_ASSERT(n >= 2 && d[0] == '{' && d[n - 1] == '}');
    mcdc_buf b = {0};
    int rc = mcdc_buf_append(&b, d, n - 1, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&b, n > 2 ? ",\"repair_pending\":" : "\"repair_pending\":", err);
    if (rc == MCDC_OK) rc = mcdc_text_json_string(&b, (const uint8_t *)run_id, strlen(run_id), err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&b, '}', err);
    char *out = NULL;
    rc = buf_take(&out, &b, rc, err);
    if (rc == MCDC_OK) {
        mcdc_free(*detail);
        *detail = out;
    }
    return rc;
}

/* A differing key: its encoded key (for IN_FLIGHT), key JSON and detail. */
static int record(mcdc_reconcile *r, mcdc_reconcile_failure f, int64_t bucket,
                  const mcdc_column *const *kc, int64_t row, const char *lsn, size_t lsn_len,
                  const char *columns, mcdc_error *err) {
    rec_diff d = {.failure = f, .bucket = bucket, .key_off = (int64_t)r->diff_keys.len,
                  .round = r->round};
    int rc = silver_key_append(&r->diff_keys, kc, r->n_keys, row, err);
    d.key_len = (int64_t)r->diff_keys.len - d.key_off;
    if (rc == MCDC_OK) rc = key_json(&d.key_json, r, kc, row, err);
    if (rc == MCDC_OK) rc = detail_json(&d.detail, lsn, lsn_len, columns, err);
    if (rc == MCDC_OK) rc = rec_add_diff(r, &d, err);
    if (rc) {
        mcdc_free(d.key_json);
        mcdc_free(d.detail);
    }
    return rc;
}

/* A key of entry e that differs on silver's side (its row `row`, cells
 * cols): recorded now as failure f, its detail completed later (a
 * RECORD_DIFF's columns by the second read, a DUPLICATE_TARGET's rows once
 * silver's rows of the bucket are read). */
static int record_pending(mcdc_reconcile *r, src_side *src, rec_entry *e, int64_t bucket,
                          mcdc_reconcile_failure f, const mcdc_column *const *kc,
                          const mcdc_column *const *cols, int64_t row, const char *lsn,
                          size_t lsn_len, mcdc_error *err) {
    int rc = rec_grow(&src->pend, &src->cap_pend, src->n_pend + 1, sizeof *src->pend, err);
    if (rc == MCDC_OK)
        rc = rec_grow(&src->pend_h, &src->cap_pend_h, (src->n_pend + 1) * r->n_cols,
                      sizeof *src->pend_h, err);
    if (rc == MCDC_OK)
        rc = rec_hash_cells(src->pend_h + src->n_pend * r->n_cols, cols, r->n_cols, row, err);
    rec_pend p = {.diff = r->n_diffs, .lsn_len = lsn_len,
                  .dup_rows = f == MCDC_RECONCILE_DUPLICATE_TARGET ? 2 : 0};
    if (rc == MCDC_OK && lsn) {
        if ((p.lsn = mcdc_malloc(lsn_len + 1)) == NULL) return nomem(err);
        memcpy(p.lsn, lsn, lsn_len);
        p.lsn[lsn_len] = 0;
    }
    if (rc == MCDC_OK) rc = record(r, f, bucket, kc, row, lsn, lsn_len, NULL, err);
    if (rc) {
        mcdc_free(p.lsn);
        return rc;
    }
    e->pend = (int32_t)src->n_pend;
    src->pend[src->n_pend++] = p;
    return MCDC_OK;
}

/* Another silver row of a key a silver row matched before: silver holds
 * the key twice (or more), which apply never writes (another writer
 * appended it). Named DUPLICATE_TARGET once, its RECORD_DIFF (if the
 * first row differed) becoming that. */
static int record_twice(mcdc_reconcile *r, src_side *src, rec_entry *e, int64_t bucket,
                        const mcdc_column *const *kc, const mcdc_column *const *cols, int64_t row,
                        const char *lsn, size_t lsn_len, mcdc_error *err) {
    if (e->pend >= 0) {
        rec_pend *p = &src->pend[e->pend];
        p->dup_rows = p->dup_rows ? p->dup_rows + 1 : 2;
        r->diffs[p->diff].failure = MCDC_RECONCILE_DUPLICATE_TARGET;
        return MCDC_OK;
    }
    return record_pending(r, src, e, bucket, MCDC_RECONCILE_DUPLICATE_TARGET, kc, cols, row, lsn,
                          lsn_len, err);
}

/* A DUPLICATE_TARGET's detail: {"silver_rows": n}. */
static int detail_twice(char **detail, int64_t rows, mcdc_error *err) {
    char t[64];
    snprintf(t, sizeof t, "{\"silver_rows\":%lld}", (long long)rows);
    char *d = mcdc_strdup(t);
    if (d == NULL) return nomem(err);
    mcdc_free(*detail);
    *detail = d;
    return MCDC_OK;
}

static int sil_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    sil_side *s = ctx;
    mcdc_reconcile *r = s->r;
    src_side *src = s->src;
    const mcdc_column **cols = mcdc_malloc((size_t)(r->n_cols + 1) * sizeof *cols);
    if (cols == NULL) {
        mcdc_batch_free(b);
        return nomem(err);
    }
    side_cols(r, b, cols);
    const mcdc_column *kc[SILVER_KEYS_MAX];
    int rc = MCDC_OK;
    for (int32_t k = 0; k < r->n_keys; k++) {
        kc[k] = cols[r->key_in_cols[k]];
        if (kc[k] == NULL) rc = mcdc_error_set(err, MCDC_E_INVALID, "silver has no key column %s",
                                                r->keys[k]);
    }
    int lsn_col = rec_col_index(b->schema, "_start_lsn");
    int64_t hashed = r->res.silver_rows_hashed; /* the batch's rows of the bucket: progress */
    if (rc == MCDC_OK) rc = rec_grow(&s->tmp, &s->cap_tmp, b->rows, sizeof *s->tmp, err);
    if (rc == MCDC_OK) rc = rec_hash_rows(s->tmp, cols, r->n_cols, 0, b->rows, err);
    for (int64_t i = 0; rc == MCDC_OK && i < b->rows; i++) {
        int64_t v = 0;
        bool has_v = r->ordinal && silver_range_value(kc[0], i, &v);
        /* NULL sorts first: the first bucket's, as the source's read of it
         * has them (Tier 1 counts them in none) */
        if (s->filter && !has_v && s->has_lo) continue;
        if (s->filter && has_v && ((s->has_lo && v < s->lo) || (s->has_hi && v >= s->hi))) continue;
        int64_t idx = src_find(src, kc, i, &rc, err);
        if (rc) break;
        if (idx < 0 && s->left) continue;
        r->res.silver_rows_hashed++;
        if (has_v) {
            s->ord_rows++;
            s->ord_sum += v;
        }
        mcdc_cell l = lsn_col >= 0 ? mcdc_row_get(b, i, lsn_col) : mcdc_cell_null();
        const char *lsn = l.kind == MCDC_CELL_TEXT ? l.s : NULL;
        size_t lsn_len = lsn ? (size_t)l.i : 0;
        if (idx < 0) { /* once a key, however many rows of it silver holds */
            int64_t at;
            bool added;
            s->key.len = 0;
            rc = silver_key_append(&s->key, kc, r->n_keys, i, err);
            if (rc == MCDC_OK) rc = rec_keyset_add(&s->gone, s->key.data, s->key.len, &at, &added, err);
            if (rc == MCDC_OK && added)
                rc = record(r, MCDC_RECONCILE_MISSING_SOURCE, s->bucket, kc, i, lsn, lsn_len, NULL, err);
            continue;
        }
        rec_entry *e = &src->ent[idx];
        if (e->seen) { /* the key again: silver holds it twice */
            rc = record_twice(r, src, e, s->bucket, kc, cols, i, lsn, lsn_len, err);
            continue;
        }
        e->seen = true;
        if (rec_hash_eq(e->h, s->tmp[i])) {
            r->keys_equal++;
            continue;
        }
        rc = record_pending(r, src, e, s->bucket, MCDC_RECONCILE_RECORD_DIFF, kc, cols, i, lsn,
                            lsn_len, err);
    }
    if (rc == MCDC_OK && r->ctx.progress)
        mcdc_progress_add(r->ctx.progress, r->res.silver_rows_hashed - hashed, 0);
    mcdc_free(cols);
    mcdc_batch_free(b);
    return rc;
}

/* ---- the reads of a bucket --------------------------------------------------------------- */
/* The source's rows of one bucket (or range) to fn. */
static int read_bucket(mcdc_reconcile *r, int64_t bucket, mcdc_batch_fn fn, void *ctx,
                       mcdc_error *err) {
    const rec_bucket *bk = r->ordinal ? &r->buckets[bucket] : NULL;
    json_t *keys = bk ? json_array() : json_incref(r->range_keys), *range = NULL;
    char *lo = NULL, *hi = NULL;
    int rc = keys ? MCDC_OK : nomem(err);
    for (int32_t k = 0; rc == MCDC_OK && bk && k < r->n_keys; k++)
        if (json_array_append_new(keys, json_string(r->keys[k])) != 0) rc = nomem(err);
    if (rc == MCDC_OK && bk) {
        rc = rec_bound_json(&lo, r, bk->has_lo, bk->lo, err);
        if (rc == MCDC_OK) rc = rec_bound_json(&hi, r, bk->has_hi, bk->hi, err);
        if (rc == MCDC_OK) {
            json_error_t je;
            json_t *a = lo ? json_loads(lo, JSON_DECODE_ANY, &je) : json_null();
            json_t *z = hi ? json_loads(hi, JSON_DECODE_ANY, &je) : json_null();
            range = a && z ? json_pack("[oo]", a, z) : NULL;
            if (range == NULL) rc = nomem(err);
        }
    } else if (rc == MCDC_OK) {
        range = json_incref(json_array_get(r->ranges, (size_t)bucket));
    }
    mcdc_lsn at;
    if (rc == MCDC_OK) rc = mcdc_lsn_parse_cstr(&at, r->read_lsn, err);
    if (rc == MCDC_OK)
        rc = mcdc_changes_snapshot_read(r->changes, keys, range, MCDC_ISO_OPTION, &at, false, 0, fn,
                                        ctx, NULL, err);
    if (rc) mcdc_error_wrap(err, "reading the source's rows of bucket [%s, %s)", lo ? lo : "open",
                            hi ? hi : "open");
    json_decref(range);
    json_decref(keys);
    mcdc_free(lo);
    mcdc_free(hi);
    return rc;
}

/* The source's rows of one bucket (or range) into src's entries. Runs on a
 * thread of its own while the bucket before is compared: it uses nothing of
 * r that changes until then. */
static int read_source(mcdc_reconcile *r, int64_t bucket, src_side *src, mcdc_error *err) {
    int64_t t0 = mcdc_monotonic_us();
    /* room for the rows Tier 1 counted (and a few more changed since), at once */
    int64_t expect = r->ordinal ? r->buckets[bucket].src_rows
                                : (r->n_buckets ? r->buckets[0].src_rows : 0) /
                                      (int64_t)(json_array_size(r->ranges) ? json_array_size(r->ranges) : 1);
    int rc = rec_grow(&src->ent, &src->cap_ent, expect + expect / 64 + 16, sizeof *src->ent, err);
    if (rc == MCDC_OK) rc = read_bucket(r, bucket, src_rows, src, err);
    if (rc == MCDC_OK) rc = src_finish(src, err);
    src->read_us = mcdc_monotonic_us() - t0;
    return rc;
}

/* The second read: the source's rows of the keys that differ. */
typedef struct name_ctx {
    mcdc_reconcile *r;
    src_side *src;
    int64_t bucket;
    rec_hash *cells;   /* n_cols */
} name_ctx;

/* The columns whose cells differ: "a, b". */
static int differing(char **out, const mcdc_reconcile *r, const rec_hash *a, const rec_hash *b,
                     mcdc_error *err) {
    mcdc_buf t = {0};
    int rc = MCDC_OK;
    for (int32_t k = 0; k < r->n_cols && rc == MCDC_OK; k++) {
        if (rec_hash_eq(a[k], b[k])) continue;
        if (t.len) rc = mcdc_buf_append_str(&t, ", ", err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(&t, r->col_names[k], err);
    }
    return buf_take(out, &t, rc, err);
}

static int name_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    name_ctx *n = ctx;
    mcdc_reconcile *r = n->r;
    src_side *s = n->src;
    const mcdc_column *kc[SILVER_KEYS_MAX];
    key_cols(r, b, kc);
    side_cols(r, b, s->cols);
    int rc = MCDC_OK;
    for (int64_t i = 0; i < b->rows && rc == MCDC_OK; i++) {
        int64_t idx = src_find(s, kc, i, &rc, err);
        if (rc || idx < 0 || s->ent[idx].named) continue;
        rec_entry *e = &s->ent[idx];
        if (!e->seen) {
            e->named = true;
            rc = record(r, MCDC_RECONCILE_MISSING_TARGET, n->bucket, kc, i, NULL, 0, NULL, err);
            continue;
        }
        if (e->pend < 0) continue;
        e->named = true;
        const rec_pend *p = &s->pend[e->pend];
        if (p->dup_rows) continue; /* a DUPLICATE_TARGET: no columns to name */
        char *columns = NULL, *detail = NULL;
        rc = rec_hash_cells(n->cells, s->cols, r->n_cols, i, err);
        if (rc == MCDC_OK) rc = differing(&columns, r, n->cells, s->pend_h + e->pend * r->n_cols, err);
        if (rc == MCDC_OK) rc = detail_json(&detail, p->lsn, p->lsn_len, columns, err);
        if (rc == MCDC_OK) {
            rec_diff *d = &r->diffs[p->diff];
            mcdc_free(d->detail);
            d->detail = detail;
        }
        mcdc_free(columns);
    }
    mcdc_batch_free(b);
    return rc;
}

/* Does the bucket hold a key that differs on the source's side? */
static bool needs_names(const src_side *s) {
    for (int64_t i = 0; i < s->n_pend; i++)
        if (s->pend[i].dup_rows == 0) return true;
    for (int64_t i = 0; i < s->n_ent; i++)
        if (!s->ent[i].seen) return true;
    return false;
}

/* The second read of a bucket: MISSING_TARGET keys, and the columns of the
 * RECORD_DIFFs (a key changed since the first read, and so in flight, may
 * be named differently or not at all). */
static int name_keys(mcdc_reconcile *r, int64_t bucket, src_side *src, mcdc_error *err) {
    int rc = side_cols_alloc(src, err);
    name_ctx n = {.r = r, .src = src, .bucket = bucket};
    if (rc == MCDC_OK && (n.cells = mcdc_malloc((size_t)(r->n_cols + 1) * sizeof *n.cells)) == NULL)
        rc = nomem(err);
    src->finger = 0;
    if (rc == MCDC_OK) rc = read_bucket(r, bucket, name_rows, &n, err);
    mcdc_free(n.cells);
    return rc;
}

/* Silver's rows of the bucket, looked up among the source's; counts: the
 * bucket's counts set from both sides' reads (a re-check's). */
static int compare_silver(mcdc_reconcile *r, int64_t bucket, src_side *src, bool counts,
                          mcdc_error *err) {
    const rec_bucket *bk = r->ordinal ? &r->buckets[bucket] : NULL;
    int rc = MCDC_OK;
    int64_t t0 = mcdc_monotonic_us(), before = r->res.silver_rows_hashed;
    sil_side sil = {.r = r, .src = src, .bucket = bucket, .left = !r->ordinal};
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.version = r->version;
    char lo_t[16], hi_t[16];
    if (bk) {
        sil.filter = true;
        sil.has_lo = bk->has_lo;
        sil.has_hi = bk->has_hi;
        sil.lo = bk->lo;
        sil.hi = bk->hi;
        sc.prune_column = r->keys[0];
        if (r->date_key) {
            /* dates' statistics are their text, which orders as they do */
            if (bk->has_lo && bk->lo >= 0 && bk->lo < 2932897) {
                lo_t[mcdc_text_date(lo_t, bk->lo)] = 0;
                sc.lo = (mcdc_scan_bound){true, lo_t, 0};
            }
            if (bk->has_hi && bk->hi >= 0 && bk->hi < 2932897) {
                hi_t[mcdc_text_date(hi_t, bk->hi)] = 0;
                sc.hi = (mcdc_scan_bound){true, hi_t, 0};
            }
        } else {
            sc.lo = (mcdc_scan_bound){bk->has_lo, NULL, bk->lo};
            sc.hi = (mcdc_scan_bound){bk->has_hi, NULL, bk->hi};
        }
    }
    /* silver's columns: the compared ones it has, and _start_lsn */
    const char **cols = mcdc_malloc((size_t)(r->n_cols + 1) * sizeof *cols);
    mcdc_schema *ss = NULL;
    if (cols == NULL) rc = nomem(err);
    if (rc == MCDC_OK) rc = mcdc_table_schema(r->silver, &ss, err);
    int32_t nc = 0;
    for (int32_t k = 0; rc == MCDC_OK && k < r->n_cols; k++)
        if (mcdc_schema_find(ss, r->col_names[k]) >= 0) cols[nc++] = r->col_names[k];
    if (rc == MCDC_OK && mcdc_schema_find(ss, "_start_lsn") >= 0) cols[nc++] = "_start_lsn";
    sc.columns = cols;
    sc.n_columns = nc;
    int64_t v;
    if (rc == MCDC_OK) rc = mcdc_table_scan_run(r->silver, &sc, sil_rows, &sil, &v, NULL, err);
    if (rc) mcdc_error_wrap(err, "reading silver %s", r->cfg.silver);
    /* the keys silver holds twice: how many rows each */
    for (int64_t i = 0; rc == MCDC_OK && i < src->n_pend; i++)
        if (src->pend[i].dup_rows)
            rc = detail_twice(&r->diffs[src->pend[i].diff].detail, src->pend[i].dup_rows, err);
    if (rc == MCDC_OK && counts && bk) {
        rec_bucket *w = &r->buckets[bucket];
        w->src_rows = src->ord_rows;
        w->src_sum = src->ord_sum;
        w->sil_rows = sil.ord_rows;
        w->sil_sum = sil.ord_sum;
    }
    mcdc_log(MCDC_LOG_INFO,
             "bucket %lld: %lld source rows read in %.3f s, %lld of silver's compared in %.3f s",
             (long long)bucket, (long long)src->rows, (double)src->read_us / 1e6,
             (long long)(r->res.silver_rows_hashed - before),
             (double)(mcdc_monotonic_us() - t0) / 1e6);
    mcdc_schema_unref(ss);
    mcdc_free(cols);
    mcdc_free(sil.tmp);
    mcdc_buf_free(&sil.key);
    rec_keyset_clear(&sil.gone);
    return rc;
}

/* ---- the prefetch ------------------------------------------------------------------------ */
/* The next bucket's source rows, read while the one before is compared
 * (two buckets' entries are held at most). */
typedef struct prefetch {
    mcdc_reconcile *r;
    int64_t bucket;
    src_side src;
    int rc;
    mcdc_error err;
    const mcdc_log_sink *sink;
    pthread_t th;
    bool started;
} prefetch;

static void *prefetch_main(void *p) {
    prefetch *f = p;
    mcdc_log_use(f->sink);
    f->rc = read_source(f->r, f->bucket, &f->src, &f->err);
    return NULL;
}

static int prefetch_start(prefetch *f, mcdc_reconcile *r, int64_t bucket, mcdc_error *err) {
    memset(f, 0, sizeof *f);
    f->r = r;
    f->bucket = bucket;
    f->src.r = r;
    f->sink = mcdc_log_current();
    if (mcdc_thread_start(&f->th, prefetch_main, f) != 0)
        return mcdc_error_set(err, MCDC_E_NOMEM, "reconcile: no thread to read the source with");
    f->started = true;
    return MCDC_OK;
}

/* The read's end and its result (again after it has ended). */
static int prefetch_join(prefetch *f, mcdc_error *err) {
    if (f->started) {
        pthread_join(f->th, NULL);
        f->started = false;
    }
    if (f->rc && err) *err = f->err;
    return f->rc;
}

/* ---- the keys the source held twice ------------------------------------------------------ */
/* The keys the source's read of a bucket held twice, kept by the run (the
 * first few). */
static int twice_take(mcdc_reconcile *r, src_side *s, mcdc_error *err) {
    int rc = MCDC_OK;
    for (int32_t i = 0; i < s->n_twice; i++) {
        rec_twice t = s->twice[i];
        s->twice[i].json = NULL;
        if (rc || r->n_twice == REC_TWICE_MAX) {
            mcdc_free(t.json);
            continue;
        }
        int64_t off = (int64_t)r->twice_keys.len;
        rc = mcdc_buf_append(&r->twice_keys, s->twice_keys.data + t.key_off, (size_t)t.key_len, err);
        t.key_off = off;
        if (rc == MCDC_OK) r->twice[r->n_twice++] = t;
        else mcdc_free(t.json);
    }
    s->n_twice = 0;
    return rc;
}

/* Is a key the source held twice one that changed in flight (or whose
 * repair is pending apply)? Then the read may have seen it twice as it
 * moved; else the key is not unique. */
static bool twice_in_flight(const mcdc_reconcile *r, const rec_twice *t, const rec_keyset *moved) {
    if (!t->ordinal) {
        const uint8_t *k = r->twice_keys.data + t->key_off;
        return rec_keyset_find(moved, k, (size_t)t->key_len) >= 0 ||
               rec_pending_find(&r->pending, k, (size_t)t->key_len) != NULL;
    }
    const rec_keyset *sets[2] = {moved, &r->pending.keys};
    for (int s = 0; s < 2; s++)
        for (int64_t i = 0; i < sets[s]->n; i++)
            if (sets[s]->val[i] == t->ord) return true;
    return false;
}

void rec_twice_clear(mcdc_reconcile *r) {
    for (int32_t i = 0; i < r->n_twice; i++) mcdc_free(r->twice[i].json);
    r->n_twice = 0;
    mcdc_buf_free(&r->twice_keys);
}

/* The key columns as "'a', 'b'". */
static void key_names(char *out, size_t cap, const mcdc_reconcile *r) {
    size_t n = 0;
    out[0] = 0;
    for (int32_t k = 0; k < r->n_keys && n < cap; k++)
        n += (size_t)snprintf(out + n, cap - n, "%s'%s'", k ? ", " : "", r->keys[k]);
}

/* ---- a check over buckets ---------------------------------------------------------------- */
/* Tier 2 over the buckets (other keys: ranges) list[0..n): M' read, each
 * one's source rows read (the next one's while one is compared), silver's
 * looked up, the keys that differ named; then the keys changed after
 * min(M', E) make the keys found IN_FLIGHT (and are left in *moved), and a
 * key the source held twice that is not among them is refused
 * (MCDC_E_NOT_UNIQUE). counts: each bucket's counts set from the reads (a
 * re-check's); need_moved: the keys in flight read even when no key
 * differs (a re-check decides its buckets by them). */
int rec_compare_buckets(mcdc_reconcile *r, const int64_t *list, int64_t n, bool counts,
                        bool need_moved, rec_keyset *moved, mcdc_error *err) {
    if (n == 0 && !need_moved) return MCDC_OK;
    int64_t first = r->n_diffs; /* the diffs this check finds */
    mcdc_lsn m;
    int rc = mcdc_changes_max_lsn(r->changes, &m, err); /* M again, before the rows */
    if (rc) return rc;
    mcdc_lsn_format(&m, r->read_lsn);
    prefetch f[2];
    memset(f, 0, sizeof f);
    if (n > 0) rc = prefetch_start(&f[0], r, list[0], err);
    for (int64_t i = 0; rc == MCDC_OK && i < n; i++) {
        prefetch *cur = &f[i % 2], *next = &f[(i + 1) % 2];
        rc = prefetch_join(cur, err);
        if (rc == MCDC_OK && i + 1 < n) rc = prefetch_start(next, r, list[i + 1], err);
        if (rc == MCDC_OK) rc = twice_take(r, &cur->src, err);
        if (rc == MCDC_OK) {
            r->res.source_rows_hashed += cur->src.rows;
            rc = compare_silver(r, cur->bucket, &cur->src, counts, err);
        }
        if (rc == MCDC_OK && needs_names(&cur->src)) {
            /* one read of the source at a time: the next bucket's ends first
             * (its result is taken at the loop's next turn) */
            prefetch_join(next, NULL);
            rc = name_keys(r, cur->bucket, &cur->src, err);
        }
        src_side_clear(&cur->src);
        if (rc == MCDC_OK) mcdc_progress_part_done(r->ctx.progress);
    }
    for (int k = 0; k < 2; k++) { /* after an error: the read under way ends first */
        prefetch_join(&f[k], NULL);
        src_side_clear(&f[k].src);
    }
    if (rc || (r->n_diffs == first && r->n_twice == 0 && !need_moved)) return rc;
    /* after the rows: what they may have seen */
    uint8_t lower[10];
    rec_lsn_min(lower, r->read_lsn, r->has_e ? r->e_lsn : ZERO_LSN);
    rec_keyset_clear(moved);
    rc = rec_moved_keys(r, lower, moved, err);
    for (int32_t i = 0; rc == MCDC_OK && i < r->n_twice; i++) {
        if (twice_in_flight(r, &r->twice[i], moved)) continue;
        char names[256];
        key_names(names, sizeof names, r);
        rc = mcdc_error_set(err, MCDC_E_NOT_UNIQUE,
                            "the key %s is not unique in the source table %s.%s: it holds more "
                            "than one row of key %.300s%s. Reconcile compares one row a key and "
                            "cannot tell which of them silver should hold; nothing was written. "
                            "Give --keys the columns of a unique index of the table (or leave "
                            "--keys out: the capture instance's unique index), and apply silver "
                            "by the same key",
                            names, mcdc_changes_source_schema(r->changes),
                            mcdc_changes_source_table(r->changes), r->twice[i].json,
                            r->n_twice > 1 ? " (and others)" : "");
    }
    rec_twice_clear(r); /* in flight: a read under READ COMMITTED may see a moving key twice */
    for (int64_t i = first; rc == MCDC_OK && i < r->n_diffs; i++) {
        rec_diff *d = &r->diffs[i];
        const uint8_t *k = r->diff_keys.data + d->key_off;
        const char *run = rec_pending_find(&r->pending, k, (size_t)d->key_len);
        if (run) rc = detail_pending(&d->detail, run, err);
        if (run || rec_keyset_find(moved, k, (size_t)d->key_len) >= 0)
            d->failure = MCDC_RECONCILE_IN_FLIGHT;
    }
    return rc;
}

/* Tier 2's rows: both sides' of the buckets chosen, by Tier 1's counts
 * (all ranges of another key: the whole table's); -1: not known. */
static int64_t tier2_rows(const mcdc_reconcile *r) {
    int64_t rows = 0;
    if (!r->ordinal)
        return r->n_buckets && r->n_chosen == (int64_t)json_array_size(r->ranges)
                   ? r->buckets[0].src_rows + r->buckets[0].sil_rows
                   : -1;
    for (int64_t i = 0; i < r->n_chosen; i++)
        rows += r->buckets[r->chosen[i]].src_rows + r->buckets[r->chosen[i]].sil_rows;
    return rows;
}

int rec_tier2(mcdc_reconcile *r, rec_keyset *moved, mcdc_error *err) {
    mcdc_progress_phase(r->ctx.progress, "comparing", "buckets", r->n_chosen, tier2_rows(r), true);
    return rec_compare_buckets(r, r->chosen, r->n_chosen, false, false, moved, err);
}
