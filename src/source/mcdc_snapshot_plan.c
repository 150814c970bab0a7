/*
 * mcdc_snapshot_plan.c - a chunked snapshot's extent and chunks (reference
 * §2.4.2, §3.7; see mcdc_changes.h): planned once, on the control
 * connection, before the first wave reads any chunk.
 *
 * The chunks tile the key space up to just above MAX, the largest key when
 * the extent was read (after the snapshot's LSN S): a key above it was
 * inserted after S, so the stream has it, and the last chunk does not grow
 * with a table written while it is read.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_changes_int.h"

/* Slice arithmetic: the width of [MIN, MAX] of a bigint needs 65 bits. */
__extension__ typedef __int128 i128;

/* An integer key is counted in about this many slices per chunk (a chunk
 * then holds chunk_rows less at most one slice), at most MCDC_KEY_SLICES_MAX
 * slices a query. */
#define SLICES_PER_CHUNK 16

/* ---- the extent ------------------------------------------------------------------ */
static int keyset_extent(json_t **out, json_t *max, mcdc_error *err) {
    *out = json_pack("{s:s, s:o}", "kind", "keyset", "max", max ? max : json_null());
    return *out ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
}

static int extent(mcdc_changes *c, const json_t *keys, const mcdc_source_read *rd, json_t **out,
                  mcdc_error *err) {
    *out = NULL;
    mcdc_snap_keys k;
    int rc = mcdc_changes__snap_keys(&k, NULL, c, c->client, keys, false, err);
    if (rc) return rc;
    const char *s = c->source_schema, *t = c->source_table;
    json_t *lo = NULL, *hi = NULL;
    if (k.n == 0 || !k.bindable) {
        rc = keyset_extent(out, NULL, err);
    } else if (k.n == 1) {
        rc = mcdc_cdc_key_min_max(&lo, &hi, c->client, s, t, &k.cols[0], NULL, NULL, rd, err);
        int64_t rows = 0;
        if (rc == MCDC_OK && lo && k.cols[0].kind == MCDC_KEY_INT) {
            rc = mcdc_cdc_row_estimate(&rows, c->client, s, t, err);
            *out = rc ? NULL : json_pack("{s:s, s:O, s:O, s:I}", "kind", "int", "lo", lo, "hi", hi,
                                         "rows", (json_int_t)rows);
            if (rc == MCDC_OK && *out == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        } else if (rc == MCDC_OK) {
            rc = keyset_extent(out, json_incref(hi), err);
        }
    } else {
        json_t *max = NULL;
        rc = mcdc_cdc_key_max(&max, c->client, s, t, k.cols, k.n, rd, err);
        if (rc == MCDC_OK) rc = keyset_extent(out, max, err);
    }
    json_decref(lo);
    json_decref(hi);
    mcdc_changes__snap_keys_free(&k);
    return rc;
}

int mcdc_changes_snapshot_extent(mcdc_changes *c, const json_t *keys, mcdc_isolation iso,
                                 json_t **out, mcdc_error *err) {
    int rc;
    *out = NULL;
    mcdc_source_read rd = mcdc_changes__source_read(c, iso);
    CONTROL_CALL(rc, c, err, extent(c, keys, &rd, out, err));
    mcdc_changes__control_read_committed(c, &rd);
    return rc;
}

/* ---- the plan's pieces ------------------------------------------------------------------ */
typedef struct planner {
    mcdc_changes *c;
    mcdc_snap_keys k;
    mcdc_source_read rd;
    int64_t chunk_rows;
    json_t *chunks; /* the plan, [[lo, hi], ...] */
    mcdc_error *err;
} planner;

/* Appends [lo, hi] (both stolen; NULL: null) to the plan. */
static int add_chunk(planner *p, json_t *lo, json_t *hi) {
    json_t *r = json_pack("[oo]", lo ? lo : json_null(), hi ? hi : json_null());
    if (r == NULL || json_array_append_new(p->chunks, r) != 0)
        return mcdc_error_set(p->err, MCDC_E_NOMEM, "out of memory planning chunks");
    if (json_array_size(p->chunks) > MCDC_SNAPSHOT_CHUNKS_MAX)
        return mcdc_error_set(p->err, MCDC_E_LIMIT,
                              "the snapshot of %s.%s would have more than %d chunks: use a "
                              "larger chunk_rows",
                              p->c->source_schema, p->c->source_table, MCDC_SNAPSHOT_CHUNKS_MAX);
    return MCDC_OK;
}

/* ---- an integer key: counts per slice --------------------------------------------------- */
typedef struct packer {
    planner *p;
    int64_t start; /* the current chunk's start (once a chunk was cut; the first is open) */
    int64_t rows;  /* rows in the current chunk */
} packer;

/* Consecutive slices packed into chunks of at most chunk_rows rows (a slice
 * of more, one value, is a chunk of its own): a chunk ends where the slice
 * that would overfill it starts. The first chunk starts open. */
static int pack(packer *k, int64_t x, int64_t rows) {
    int rc = MCDC_OK;
    if (k->rows && k->rows + rows > k->p->chunk_rows) {
        json_t *lo = json_array_size(k->p->chunks) ? json_integer(k->start) : NULL;
        json_t *hi = json_integer(x);
        if ((json_array_size(k->p->chunks) && lo == NULL) || hi == NULL) {
            json_decref(lo);
            json_decref(hi);
            return mcdc_error_set(k->p->err, MCDC_E_NOMEM, "out of memory planning chunks");
        }
        rc = add_chunk(k->p, lo, hi);
        k->start = x;
        k->rows = 0;
    }
    k->rows += rows;
    return rc;
}

/* The slices of [a, b) (NULL: open) holding rows, on a grid over lo..hi of
 * about SLICES_PER_CHUNK slices per chunk_rows of `rows`, packed in order; a
 * slice of more than chunk_rows rows is cut again over its own MIN..MAX. */
static int cut(packer *k, const int64_t *a, const int64_t *b, int64_t lo, int64_t hi, int64_t rows) {
    planner *p = k->p;
    const mcdc_key_col *key = &p->k.cols[0];
    i128 span = (i128)hi - lo + 1, want = ((i128)rows * SLICES_PER_CHUNK + p->chunk_rows - 1) / p->chunk_rows;
    int64_t n = want < 1 ? 1 : want > MCDC_KEY_SLICES_MAX ? MCDC_KEY_SLICES_MAX : (int64_t)want;
    i128 w128 = (span + n - 1) / n;
    int64_t w = w128 < 1 ? 1 : w128 > INT64_MAX ? INT64_MAX : (int64_t)w128;
    mcdc_key_slice *v = NULL;
    int nv = 0;
    int rc = mcdc_cdc_key_slices(&v, &nv, p->c->client, p->c->source_schema, p->c->source_table,
                                 key, w, a, b, &p->rd, p->err);
    for (int i = 0; rc == MCDC_OK && i < nv; i++) {
        /* The slice within [a, b): no key is below INT64_MIN or above
         * INT64_MAX, so an end past them is open. */
        i128 x = (i128)v[i].index * w, y = x + w;
        if (a && x < *a) x = *a;
        if (b && y > *b) y = *b;
        int64_t xs = x < INT64_MIN ? INT64_MIN : (int64_t)x;
        int64_t ys = y > INT64_MAX ? INT64_MAX : (int64_t)y;
        bool y_open = y > INT64_MAX;
        json_t *mn = NULL, *mx = NULL;
        if (v[i].rows > p->chunk_rows && w > 1)
            rc = mcdc_cdc_key_min_max(&mn, &mx, p->c->client, p->c->source_schema,
                                      p->c->source_table, key, &xs, y_open ? NULL : &ys, &p->rd,
                                      p->err);
        if (rc == MCDC_OK && mn)
            rc = cut(k, &xs, y_open ? NULL : &ys, (int64_t)json_integer_value(mn),
                     (int64_t)json_integer_value(mx), v[i].rows);
        else if (rc == MCDC_OK)
            rc = pack(k, xs, v[i].rows);
        json_decref(mn);
        json_decref(mx);
    }
    mcdc_free(v);
    return rc;
}

static int int_chunks(planner *p, const json_t *extent) {
    json_int_t lo = json_integer_value(json_object_get(extent, "lo"));
    json_int_t hi = json_integer_value(json_object_get(extent, "hi"));
    json_int_t rows = json_integer_value(json_object_get(extent, "rows"));
    /* Keys above MAX are the stream's; below MIN, the first chunk's (it is
     * open below). A bigint MAX of INT64_MAX has nothing above it: open. */
    bool end_open = hi == INT64_MAX;
    int64_t end = end_open ? INT64_MAX : (int64_t)hi + 1;
    packer k = {p, 0, 0};
    int rc = cut(&k, NULL, end_open ? NULL : &end, (int64_t)lo, (int64_t)hi, (int64_t)rows);
    if (rc) return rc;
    json_t *a = json_array_size(p->chunks) ? json_integer(k.start) : NULL;
    json_t *b = end_open ? NULL : json_integer(end);
    if ((json_array_size(p->chunks) && a == NULL) || (!end_open && b == NULL)) {
        json_decref(a);
        json_decref(b);
        return mcdc_error_set(p->err, MCDC_E_NOMEM, "out of memory planning chunks");
    }
    return add_chunk(p, a, b);
}

/* ---- other keys: bounds by seeks ----------------------------------------------------------- */
/* A bound that is SQL NULL on one key column cannot be written (JSON null
 * is an open end); nothing sorts below NULL, so [lo, NULL) is empty. */
static bool null_bound(const mcdc_snap_keys *k, const json_t *b) {
    return k->n == 1 && json_is_null(b);
}

int mcdc_changes__seek(mcdc_changes *c, const mcdc_snap_keys *k, const json_t *lo,
                       const json_t *hi, int64_t n, const mcdc_source_read *rd, json_t **out,
                       mcdc_error *err) {
    *out = NULL;
    for (;;) {
        json_t *bound = NULL, *first = NULL;
        int rc = mcdc_cdc_key_bound(&bound, c->client, c->source_schema, c->source_table, k->cols,
                                    k->n, lo, hi, n, rd, err);
        if (rc || bound == NULL || (k->unique && !null_bound(k, bound))) {
            *out = bound;
            return rc;
        }
        if (!null_bound(k, bound))
            rc = mcdc_cdc_key_bound(&first, c->client, c->source_schema, c->source_table, k->cols,
                                    k->n, lo, bound, 0, rd, err);
        if (rc == MCDC_OK && first) {
            json_decref(first);
            *out = bound;
            return MCDC_OK;
        }
        json_decref(bound);
        if (rc) return rc;
        if (n > INT64_MAX / 2 - 1)
            return mcdc_error_set(err, MCDC_E_LIMIT, "a key value held by more than %lld rows",
                                  (long long)n);
        n *= 2;
    }
}

static int seek(planner *p, const json_t *lo, const json_t *hi, int64_t n, json_t **out) {
    return mcdc_changes__seek(p->c, &p->k, lo, hi, n, &p->rd, out, p->err);
}

/* The first key after top now (none, or one that reads back as top: NULL). */
static int last_bound(planner *p, const json_t *top, json_t **end) {
    json_t *after = NULL;
    int rc = seek(p, top, NULL, 1, &after);
    /* A datetime2(7) last key column reads back cut to the microsecond: a
     * key after MAX in MAX's microsecond reads back as MAX, at or below
     * it, and would leave the keys of that microsecond in no chunk. Then
     * the last chunk is open. */
    if (rc == MCDC_OK && after && json_equal(after, top)) {
        json_decref(after);
        after = NULL;
    }
    *end = after;
    return rc;
}

static int keyset_chunks(planner *p, const json_t *top) {
    json_t *lo = NULL; /* the current chunk's start; NULL: open */
    int rc = MCDC_OK;
    for (;;) {
        json_t *bound = NULL;
        rc = seek(p, lo, top, p->chunk_rows, &bound);
        if (rc || bound == NULL) break;
        rc = add_chunk(p, lo, json_incref(bound));
        lo = bound;
        if (rc) break;
    }
    json_t *end = NULL;
    if (rc == MCDC_OK) rc = last_bound(p, top, &end);
    if (rc == MCDC_OK) return add_chunk(p, lo, end);
    json_decref(lo);
    return rc;
}

/* ---- the plan ---------------------------------------------------------------------------- */
static int check_extent(const json_t *e, bool *is_int, const json_t **max, mcdc_error *err) {
    const char *kind = json_string_value(json_object_get(e, "kind"));
    *is_int = kind && strcmp(kind, "int") == 0;
    *max = json_object_get(e, "max");
    if (*is_int) {
        const json_t *lo = json_object_get(e, "lo"), *hi = json_object_get(e, "hi"),
                     *rows = json_object_get(e, "rows");
        if (json_is_integer(lo) && json_is_integer(hi) && json_is_integer(rows) &&
            json_integer_value(lo) <= json_integer_value(hi) && json_integer_value(rows) >= 0)
            return MCDC_OK;
    } else if (kind && strcmp(kind, "keyset") == 0 && *max) {
        return MCDC_OK;
    }
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "a snapshot extent is {\"kind\":\"int\",\"lo\":MIN,\"hi\":MAX,"
                          "\"rows\":n} (lo <= hi, n >= 0) or {\"kind\":\"keyset\",\"max\":"
                          "bound or null}");
}

static int plan(mcdc_changes *c, const json_t *keys, const json_t *extent, int64_t chunk_rows,
                const mcdc_source_read *rd, json_t **out, mcdc_error *err) {
    *out = NULL;
    bool is_int = false;
    const json_t *max = NULL;
    int rc = check_extent(extent, &is_int, &max, err);
    if (rc) return rc;
    planner p = {.c = c, .rd = *rd, .chunk_rows = chunk_rows, .err = err};
    p.chunks = json_array();
    if (p.chunks == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (!is_int && json_is_null(max)) { /* one chunk: the whole table */
        rc = add_chunk(&p, NULL, NULL);
    } else {
        rc = mcdc_changes__snap_keys(&p.k, NULL, c, c->client, keys, true, err);
        if (rc == MCDC_OK && is_int && (p.k.n != 1 || p.k.cols[0].kind != MCDC_KEY_INT))
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "an int extent is of one integer key column, not of %d "
                                "columns%s",
                                p.k.n, p.k.n == 1 ? " of another type" : "");
        if (rc == MCDC_OK && !is_int) rc = mcdc_key_bound_check(max, p.k.cols, p.k.n, "max", err);
        if (rc == MCDC_OK) rc = is_int ? int_chunks(&p, extent) : keyset_chunks(&p, max);
    }
    mcdc_changes__snap_keys_free(&p.k);
    if (rc) {
        json_decref(p.chunks);
        return rc;
    }
    *out = p.chunks;
    return MCDC_OK;
}

int mcdc_changes_plan_chunks(mcdc_changes *c, const json_t *keys, const json_t *extent,
                             int64_t chunk_rows, mcdc_isolation iso, json_t **chunks,
                             mcdc_error *err) {
    *chunks = NULL;
    if (chunk_rows < 1)
        return mcdc_error_set(err, MCDC_E_INVALID, "chunk_rows is %lld; a chunk holds rows: >= 1",
                              (long long)chunk_rows);
    int rc;
    mcdc_source_read rd = mcdc_changes__source_read(c, iso);
    CONTROL_CALL(rc, c, err, plan(c, keys, extent, chunk_rows, &rd, chunks, err));
    mcdc_changes__control_read_committed(c, &rd);
    if (rc && rc != MCDC_E_INVALID)
        mcdc_error_wrap(err, "planning the chunks of a snapshot of %s.%s", c->source_schema,
                        c->source_table);
    return rc;
}

static int last(mcdc_changes *c, const json_t *keys, const json_t *max,
                const mcdc_source_read *rd, json_t **end, mcdc_error *err) {
    *end = NULL;
    planner p = {.c = c, .rd = *rd, .chunk_rows = 1, .err = err};
    int rc = mcdc_changes__snap_keys(&p.k, NULL, c, c->client, keys, true, err);
    if (rc == MCDC_OK && p.k.n == 0)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "the first key after MAX: no key columns");
    if (rc == MCDC_OK) rc = mcdc_key_bound_check(max, p.k.cols, p.k.n, "max", err);
    if (rc == MCDC_OK && (max == NULL || json_is_null(max)))
        rc = mcdc_error_set(err, MCDC_E_INVALID, "the first key after MAX: MAX is null");
    if (rc == MCDC_OK) rc = last_bound(&p, max, end);
    mcdc_changes__snap_keys_free(&p.k);
    return rc;
}

int mcdc_changes_last_bound(mcdc_changes *c, const json_t *keys, const json_t *max,
                            mcdc_isolation iso, json_t **end, mcdc_error *err) {
    int rc;
    *end = NULL;
    mcdc_source_read rd = mcdc_changes__source_read(c, iso);
    CONTROL_CALL(rc, c, err, last(c, keys, max, &rd, end, err));
    mcdc_changes__control_read_committed(c, &rd);
    return rc;
}

/* ---- reconcile's counts --------------------------------------------------------------- */
typedef struct {
    const char *key;
    int64_t width;
    int max;
    bool *found;
    int64_t *lo, *hi, *rows;
    mcdc_key_bucket **out;
    int *n;
} count_call;

/* mode 0: the ordinal extent; 1: the buckets; 2: the whole table's rows. */
static int count_on(mcdc_changes *c, const count_call *q, int mode, const mcdc_source_read *rd,
                    mcdc_error *err) {
    const char *s = c->source_schema, *t = c->source_table;
    if (mode == 2) return mcdc_cdc_row_count(q->rows, c->client, s, t, rd, err);
    json_t *names = json_pack("[s]", q->key);
    if (names == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_snap_keys k;
    int rc = mcdc_changes__snap_keys(&k, NULL, c, c->client, names, true, err);
    json_decref(names);
    if (rc) return rc;
    if (mode == 0)
        rc = mcdc_cdc_key_ordinal_extent(q->found, q->lo, q->hi, c->client, s, t, &k.cols[0], rd, err);
    else
        rc = mcdc_cdc_key_buckets(q->out, q->n, c->client, s, t, &k.cols[0], q->width, q->max, rd, err);
    mcdc_changes__snap_keys_free(&k);
    return rc;
}

static int count_call_run(mcdc_changes *c, const count_call *q, int mode, mcdc_error *err) {
    int rc;
    /* counts under READ COMMITTED, whatever isolationLevel says (reference §2.8) */
    mcdc_source_read rd = mcdc_changes__source_read(c, MCDC_ISO_READ_COMMITTED);
    CONTROL_CALL(rc, c, err, count_on(c, q, mode, &rd, err));
    return rc;
}

int mcdc_changes_key_extent(mcdc_changes *c, const char *key, bool *found, int64_t *lo,
                            int64_t *hi, mcdc_error *err) {
    count_call q = {.key = key, .found = found, .lo = lo, .hi = hi};
    return count_call_run(c, &q, 0, err);
}

int mcdc_changes_key_buckets(mcdc_changes *c, const char *key, int64_t width, int max_buckets,
                             mcdc_key_bucket **out, int *n, mcdc_error *err) {
    count_call q = {.key = key, .width = width, .max = max_buckets, .out = out, .n = n};
    return count_call_run(c, &q, 1, err);
}

int mcdc_changes_row_count(mcdc_changes *c, int64_t *rows, mcdc_error *err) {
    count_call q = {.rows = rows};
    return count_call_run(c, &q, 2, err);
}
