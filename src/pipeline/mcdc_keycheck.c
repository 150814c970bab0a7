/* mcdc_keycheck.c - duplicate keys in bounded memory (see mcdc_keycheck.h). */
#include "mcdc_keycheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_batch_frame.h"
#include "mcdc_value_text.h"

/* A NULL key column hashes as this word (a value equal to it only makes a
 * suspect, which the byte comparison clears). */
#define NULL_WORD 0x6e756c6c2d6b6579ULL

/* Where sorted hashes are read from while merging: a spilled run, frame by
 * frame, or the hashes still held. */
typedef struct {
    const char *key;     /* the run's (borrowed); NULL: the held hashes */
    int64_t at, size;    /* the next frame's offset; the run's bytes */
    mcdc_batch *frame;   /* the frame read last (owned) */
    const uint64_t *v;   /* its hashes */
    int64_t n, i;        /* how many, and the next one */
} cursor;

struct mcdc_keycheck {
    int32_t cols[MCDC_SNAPSHOT_KEYS_MAX];
    int32_t n_cols;
    mcdc_storage *spill;
    char *prefix;
    char id[37];
    mcdc_schema *schema; /* the runs' one int64 column */
    mcdc_batch *held;    /* the hashes not spilled yet */
    uint64_t *scratch;   /* the radix sort's, held_max */
    int64_t held_max;
    char **runs;
    int32_t n_runs, cap_runs, seq;
    int64_t rows, spilled;
    bool finished;
    uint64_t *suspects;  /* sorted, at most MCDC_KEYCHECK_SUSPECTS_MAX */
    int32_t n_suspects;
    mcdc_buf *first;     /* per suspect: the first key seen, encoded (len 0: none yet) */
    mcdc_buf enc, io;
};

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

int mcdc_keycheck_create(mcdc_keycheck **out, const mcdc_keycheck_cfg *cfg, mcdc_error *err) {
    MCDC_ASSERT(out && cfg && cfg->spill && cfg->spill_prefix && cfg->n_cols > 0);
    *out = NULL;
    if (cfg->n_cols > MCDC_SNAPSHOT_KEYS_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "a key of %d columns, more than %d",
                              (int)cfg->n_cols, MCDC_SNAPSHOT_KEYS_MAX);
    mcdc_keycheck *k = mcdc_calloc(1, sizeof *k);
    if (k == NULL) return nomem(err);
    memcpy(k->cols, cfg->cols, (size_t)cfg->n_cols * sizeof *k->cols);
    k->n_cols = cfg->n_cols;
    k->spill = cfg->spill;
    mcdc_uuid4(k->id);
    int64_t bytes = cfg->memory_bytes > 0 ? cfg->memory_bytes : MCDC_KEYCHECK_BYTES_DEFAULT;
    if (bytes < MCDC_KEYCHECK_BYTES_MIN) bytes = MCDC_KEYCHECK_BYTES_MIN;
    /* half for the hashes, half for the sort's scratch; whole frames */
    k->held_max = bytes / 16 / MCDC_KEYCHECK_FRAME_ROWS * MCDC_KEYCHECK_FRAME_ROWS;
    if (k->held_max < MCDC_KEYCHECK_FRAME_ROWS) k->held_max = MCDC_KEYCHECK_FRAME_ROWS;
    k->prefix = mcdc_strdup(cfg->spill_prefix);
    int rc = k->prefix ? mcdc_schema_create(&k->schema, 1, err) : nomem(err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(k->schema, 0, "key_hash", MCDC_TYPE_INT64, 0, 0, 0, false, err);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&k->held, k->schema, k->held_max, err);
    if (rc == MCDC_OK && (k->scratch = mcdc_malloc((size_t)k->held_max * sizeof *k->scratch)) == NULL)
        rc = nomem(err);
    if (rc) {
        mcdc_keycheck_free(k);
        return rc;
    }
    *out = k;
    return MCDC_OK;
}

int64_t mcdc_keycheck_rows(const mcdc_keycheck *k) { return k->rows; }
int64_t mcdc_keycheck_runs(const mcdc_keycheck *k) { return k->spilled; }

/* ---- hashing ---------------------------------------------------------------------- */

/* h[0..n) gets the key hash of rows [from, from + n) of b: one loop per key
 * column and kind of value, no dispatch per cell. */
static void hash_rows(const mcdc_keycheck *k, const mcdc_batch *b, int64_t from, int64_t n,
                      uint64_t *h) {
    for (int64_t r = 0; r < n; r++) h[r] = 0x243f6a8885a308d3ULL;
    for (int32_t x = 0; x < k->n_cols; x++) {
        const mcdc_column *c = &b->columns[k->cols[x]];
        mcdc_type_id t = c->field->type;
        size_t w = (size_t)mcdc_type_width(c->field);
        uint64_t salt = (uint64_t)x + 1;
        if (t == MCDC_TYPE_UTF8 || t == MCDC_TYPE_BINARY) {
            for (int64_t r = 0, at = from; r < n; r++, at++) {
                uint64_t v = mcdc_col_is_valid(c, at)
                                 ? mcdc_hash_bytes(c->data + c->offsets[at],
                                                   (size_t)(c->offsets[at + 1] - c->offsets[at]), salt)
                                 : NULL_WORD;
                h[r] = mcdc_mix64(h[r] ^ v) + salt;
            }
        } else if (t == MCDC_TYPE_BOOL) {
            for (int64_t r = 0, at = from; r < n; r++, at++) {
                uint64_t v = mcdc_col_is_valid(c, at) ? (uint64_t)((c->values[at >> 3] >> (at & 7)) & 1)
                                                      : NULL_WORD;
                h[r] = mcdc_mix64(h[r] ^ v) + salt;
            }
        } else if (w <= 8) {
            for (int64_t r = 0, at = from; r < n; r++, at++) {
                uint64_t v = 0;
                if (mcdc_col_is_valid(c, at)) memcpy(&v, c->values + (size_t)at * w, w);
                else v = NULL_WORD;
                h[r] = mcdc_mix64(h[r] ^ v) + salt;
            }
        } else {
            for (int64_t r = 0, at = from; r < n; r++, at++) {
                uint64_t v = mcdc_col_is_valid(c, at)
                                 ? mcdc_hash_bytes(c->values + (size_t)at * w, w, salt)
                                 : NULL_WORD;
                h[r] = mcdc_mix64(h[r] ^ v) + salt;
            }
        }
    }
}

/* The key of row `row` as comparable bytes: per column a presence byte,
 * then the value (fixed width as it is, utf8/binary with its length). */
static int encode_key(mcdc_buf *out, const mcdc_keycheck *k, const mcdc_batch *b, int64_t row,
                      mcdc_error *err) {
    mcdc_buf_reset(out);
    int rc = MCDC_OK;
    for (int32_t x = 0; x < k->n_cols && rc == MCDC_OK; x++) {
        const mcdc_column *c = &b->columns[k->cols[x]];
        bool valid = mcdc_col_is_valid(c, row);
        rc = mcdc_buf_append_byte(out, valid ? 1 : 0, err);
        if (rc || !valid) continue;
        mcdc_type_id t = c->field->type;
        size_t w = (size_t)mcdc_type_width(c->field);
        if (t == MCDC_TYPE_UTF8 || t == MCDC_TYPE_BINARY) {
            uint32_t len = (uint32_t)(c->offsets[row + 1] - c->offsets[row]);
            rc = mcdc_buf_append(out, &len, sizeof len, err);
            if (rc == MCDC_OK) rc = mcdc_buf_append(out, c->data + c->offsets[row], len, err);
        } else if (t == MCDC_TYPE_BOOL) {
            rc = mcdc_buf_append_byte(out, (uint8_t)((c->values[row >> 3] >> (row & 7)) & 1), err);
        } else {
            rc = mcdc_buf_append(out, c->values + (size_t)row * w, w, err);
        }
    }
    return rc;
}

/* ---- runs ------------------------------------------------------------------------- */

/* LSD radix sort, a byte a pass (eight passes: the result ends in v). */
static void radix_sort(uint64_t *v, uint64_t *tmp, int64_t n) {
    uint64_t *src = v, *dst = tmp;
    for (int shift = 0; shift < 64; shift += 8) {
        int64_t count[257] = {0};
        for (int64_t i = 0; i < n; i++) count[((src[i] >> shift) & 0xff) + 1]++;
        for (int d = 0; d < 256; d++) count[d + 1] += count[d];
        for (int64_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 0xff]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
}

static uint64_t *held_values(mcdc_keycheck *k) { return (uint64_t *)k->held->columns[0].values; }

static int run_sink(void *ctx, const void *p, size_t n, mcdc_error *err) {
    return mcdc_storage_writer_write(ctx, p, n, err);
}

static int add_run(mcdc_keycheck *k, char *key, mcdc_error *err) {
    if (k->n_runs == k->cap_runs) {
        int32_t cap = k->cap_runs ? k->cap_runs * 2 : 8;
        char **v = mcdc_realloc(k->runs, (size_t)cap * sizeof *v);
        if (v == NULL) {
            mcdc_free(key);
            return nomem(err);
        }
        k->runs = v;
        k->cap_runs = cap;
    }
    k->runs[k->n_runs++] = key;
    return MCDC_OK;
}

/* A writer of a new run; *key owned. */
static int run_open(mcdc_keycheck *k, mcdc_storage_writer **w, char **key, mcdc_error *err) {
    *key = mcdc_asprintf("%s%s-keys-%04d.frames", k->prefix, k->id, (int)k->seq++);
    if (*key == NULL) return nomem(err);
    int rc = mcdc_storage_writer_open(w, k->spill, *key, err);
    if (rc) {
        mcdc_free(*key);
        *key = NULL;
    }
    return rc;
}

/* Publishes a run written by w (scratch: a crash leaves it to the next
 * seed's cleanup, no fsync needed), or drops it on rc. */
static int run_close(mcdc_keycheck *k, mcdc_storage_writer *w, char *key, int rc, mcdc_error *err) {
    if (rc == MCDC_OK) rc = mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_SCRATCH, err);
    else mcdc_storage_writer_abort(w);
    if (rc) {
        mcdc_free(key);
        return mcdc_error_wrap(err, "spilling key hashes to %s", k->prefix), rc;
    }
    return add_run(k, key, err);
}

/* Frames of rows [0, n) of batch b (one int64 column) to w. */
static int write_frames(mcdc_storage_writer *w, const mcdc_batch *b, int64_t n, mcdc_error *err) {
    int rc = MCDC_OK;
    for (int64_t r = 0; rc == MCDC_OK && r < n; r += MCDC_KEYCHECK_FRAME_ROWS) {
        int64_t rows = n - r < MCDC_KEYCHECK_FRAME_ROWS ? n - r : MCDC_KEYCHECK_FRAME_ROWS;
        rc = mcdc_frame_write(b, 0, 1, r, rows, run_sink, w, err);
    }
    return rc;
}

static int merge_all(mcdc_keycheck *k, mcdc_error *err);

static int spill(mcdc_keycheck *k, mcdc_error *err) {
    mcdc_column *c = &k->held->columns[0];
    radix_sort(held_values(k), k->scratch, c->length);
    int rc = mcdc_batch_seal(k->held, err);
    mcdc_storage_writer *w = NULL;
    char *key = NULL;
    if (rc == MCDC_OK) rc = run_open(k, &w, &key, err);
    if (rc) return rc;
    rc = run_close(k, w, key, write_frames(w, k->held, c->length, err), err);
    if (rc) return rc;
    k->spilled++;
    mcdc_batch_reset(k->held);
    return k->n_runs >= MCDC_KEYCHECK_RUNS_MAX ? merge_all(k, err) : MCDC_OK;
}

int mcdc_keycheck_add(mcdc_keycheck *k, const mcdc_batch *b, mcdc_error *err) {
    MCDC_ASSERT(!k->finished);
    int rc = MCDC_OK;
    for (int64_t from = 0; rc == MCDC_OK && from < b->rows;) {
        mcdc_column *c = &k->held->columns[0];
        int64_t room = k->held_max - c->length;
        int64_t n = b->rows - from < room ? b->rows - from : room;
        hash_rows(k, b, from, n, held_values(k) + c->length);
        c->length += n;
        from += n;
        k->rows += n;
        if (c->length == k->held_max) rc = spill(k, err);
    }
    return rc;
}

/* ---- merging ---------------------------------------------------------------------- */

static int corrupt(const mcdc_keycheck *k, const cursor *c, const char *what, mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_CORRUPT,
                          "spilled key hashes %s/%s at byte %lld: %s; run the seed again (it "
                          "spills afresh), and check the disk if this recurs",
                          k->spill->root, c->key, (long long)c->at, what);
}

/* The next frame of a run into c (c->n 0 at its end). */
static int cursor_fill(mcdc_keycheck *k, cursor *c, mcdc_error *err) {
    c->n = c->i = 0;
    if (c->at >= c->size) return MCDC_OK;
    uint8_t head[MCDC_FRAME_FIXED_BYTES + MCDC_FRAME_COL_BYTES];
    size_t hb = mcdc_frame_head_bytes(1), got = 0;
    _Static_assert(sizeof head == MCDC_FRAME_FIXED_BYTES + MCDC_FRAME_COL_BYTES, "one column");
    int rc = mcdc_storage_get_range(k->spill, c->key, c->at, hb, head, &got, NULL, err);
    if (rc == MCDC_OK && got != hb) return corrupt(k, c, "a frame's head is cut short", err);
    int64_t rows = 0, body = 0;
    if (rc == MCDC_OK) rc = mcdc_frame_head(head, 1, &rows, &body, err);
    if (rc == MCDC_OK && (rows <= 0 || rows > MCDC_KEYCHECK_FRAME_ROWS || body != rows * 8))
        return corrupt(k, c, "a frame that is not one of key hashes", err);
    mcdc_buf_reset(&k->io);
    if (rc == MCDC_OK) rc = mcdc_buf_reserve(&k->io, (size_t)body, err);
    if (rc == MCDC_OK)
        rc = mcdc_storage_get_range(k->spill, c->key, c->at + (int64_t)hb, (size_t)body,
                                    k->io.data, &got, NULL, err);
    if (rc == MCDC_OK && got != (size_t)body) return corrupt(k, c, "a frame is cut short", err);
    if (rc == MCDC_OK && c->frame == NULL) rc = mcdc_batch_create(&c->frame, k->schema, rows, err);
    if (rc == MCDC_OK) {
        mcdc_batch_reset(c->frame);
        rc = mcdc_frame_decode(c->frame, 0, 1, head, k->io.data, (size_t)body, err);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(c->frame, err);
    if (rc) return mcdc_error_wrap(err, "reading back %s", c->key), rc;
    c->v = (const uint64_t *)c->frame->columns[0].values;
    c->n = rows;
    c->at += (int64_t)hb + body;
    return MCDC_OK;
}

static uint64_t head_of(const cursor *cs, int32_t i) { return cs[i].v[cs[i].i]; }

static void sift_down(const cursor *cs, int32_t *heap, int32_t n, int32_t at) {
    for (;;) {
        int32_t l = 2 * at + 1, r = l + 1, m = at;
        if (l < n && head_of(cs, heap[l]) < head_of(cs, heap[m])) m = l;
        if (r < n && head_of(cs, heap[r]) < head_of(cs, heap[m])) m = r;
        if (m == at) return;
        int32_t t = heap[at];
        heap[at] = heap[m];
        heap[m] = t;
        at = m;
    }
}

typedef int (*emit_fn)(void *ctx, uint64_t v, mcdc_error *err);

/* Every hash of the cursors, in order, to emit. */
static int merge(mcdc_keycheck *k, cursor *cs, int32_t n, emit_fn emit, void *ctx, mcdc_error *err) {
    int32_t heap[MCDC_KEYCHECK_RUNS_MAX + 1];
    int32_t hn = 0;
    int rc = MCDC_OK;
    MCDC_ASSERT(n <= MCDC_KEYCHECK_RUNS_MAX + 1);
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++) {
        if (cs[i].key) rc = mcdc_storage_size(k->spill, cs[i].key, &cs[i].size, err);
        if (rc == MCDC_OK && cs[i].key) rc = cursor_fill(k, &cs[i], err);
        if (rc == MCDC_OK && cs[i].i < cs[i].n) heap[hn++] = i;
    }
    for (int32_t i = hn / 2 - 1; i >= 0; i--) sift_down(cs, heap, hn, i);
    while (rc == MCDC_OK && hn > 0) {
        cursor *c = &cs[heap[0]];
        rc = emit(ctx, c->v[c->i++], err);
        if (rc == MCDC_OK && c->i == c->n && c->key) rc = cursor_fill(k, c, err);
        if (c->i == c->n) heap[0] = heap[--hn];
        sift_down(cs, heap, hn, 0);
    }
    return rc;
}

static void cursors_free(cursor *cs, int32_t n) {
    for (int32_t i = 0; i < n; i++) mcdc_batch_free(cs[i].frame);
    mcdc_free(cs);
}

/* Cursors over every run, and over the held hashes (sorted) when with_held. */
static int cursors_open(mcdc_keycheck *k, bool with_held, cursor **out, int32_t *n,
                        mcdc_error *err) {
    *n = k->n_runs + (with_held ? 1 : 0);
    *out = mcdc_calloc((size_t)(*n ? *n : 1), sizeof **out);
    if (*out == NULL) return nomem(err);
    for (int32_t i = 0; i < k->n_runs; i++) (*out)[i].key = k->runs[i];
    if (with_held) {
        cursor *h = &(*out)[k->n_runs];
        h->n = k->held->columns[0].length;
        radix_sort(held_values(k), k->scratch, h->n);
        h->v = held_values(k);
    }
    return MCDC_OK;
}

typedef struct {
    mcdc_storage_writer *w;
    mcdc_batch *out;
} merged_run;

static int emit_to_run(void *ctx, uint64_t v, mcdc_error *err) {
    merged_run *m = ctx;
    mcdc_column *c = &m->out->columns[0];
    ((uint64_t *)c->values)[c->length++] = v;
    if (c->length < MCDC_KEYCHECK_FRAME_ROWS) return MCDC_OK;
    int rc = mcdc_batch_seal(m->out, err);
    if (rc == MCDC_OK) rc = mcdc_frame_write(m->out, 0, 1, 0, c->length, run_sink, m->w, err);
    mcdc_batch_reset(m->out);
    return rc;
}

/* The runs merged into one (their count reached MCDC_KEYCHECK_RUNS_MAX). */
static int merge_all(mcdc_keycheck *k, mcdc_error *err) {
    cursor *cs = NULL;
    int32_t n = 0;
    merged_run m = {0};
    char *key = NULL;
    int rc = cursors_open(k, false, &cs, &n, err);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&m.out, k->schema, MCDC_KEYCHECK_FRAME_ROWS, err);
    if (rc == MCDC_OK) rc = run_open(k, &m.w, &key, err);
    if (rc == MCDC_OK) {
        rc = merge(k, cs, n, emit_to_run, &m, err);
        int64_t left = m.out->columns[0].length;
        if (rc == MCDC_OK && left > 0) rc = mcdc_batch_seal(m.out, err);
        if (rc == MCDC_OK && left > 0)
            rc = mcdc_frame_write(m.out, 0, 1, 0, left, run_sink, m.w, err);
        int32_t old = k->n_runs;
        rc = run_close(k, m.w, key, rc, err);
        if (rc == MCDC_OK) { /* the merged run replaces the others */
            for (int32_t i = 0; i < old; i++) {
                mcdc_storage_delete(k->spill, k->runs[i], NULL);
                mcdc_free(k->runs[i]);
            }
            k->runs[0] = k->runs[old];
            k->n_runs = 1;
        }
    }
    mcdc_batch_free(m.out);
    cursors_free(cs, n);
    return rc;
}

typedef struct {
    mcdc_keycheck *k;
    bool any, prev_twice;
    uint64_t prev;
    int64_t twice;
} dup_scan;

static int emit_dup(void *ctx, uint64_t v, mcdc_error *err) {
    dup_scan *d = ctx;
    if (d->any && v == d->prev) {
        if (!d->prev_twice) {
            d->twice++;
            if (d->k->n_suspects < MCDC_KEYCHECK_SUSPECTS_MAX)
                d->k->suspects[d->k->n_suspects++] = v;
        }
        d->prev_twice = true;
        return MCDC_OK;
    }
    (void)err;
    d->any = true;
    d->prev = v;
    d->prev_twice = false;
    return MCDC_OK;
}

int mcdc_keycheck_finish(mcdc_keycheck *k, int64_t *suspects, mcdc_error *err) {
    MCDC_ASSERT(!k->finished);
    k->finished = true;
    *suspects = 0;
    k->suspects = mcdc_calloc(MCDC_KEYCHECK_SUSPECTS_MAX, sizeof *k->suspects);
    if (k->suspects == NULL) return nomem(err);
    cursor *cs = NULL;
    int32_t n = 0;
    dup_scan d = {.k = k};
    int rc = cursors_open(k, true, &cs, &n, err);
    if (rc == MCDC_OK) rc = merge(k, cs, n, emit_dup, &d, err);
    cursors_free(cs, n);
    if (rc == MCDC_OK && d.twice > 0 &&
        (k->first = mcdc_calloc((size_t)k->n_suspects, sizeof *k->first)) == NULL)
        rc = nomem(err);
    if (rc == MCDC_OK) *suspects = d.twice;
    return rc;
}

/* ---- confirming ------------------------------------------------------------------- */

static int32_t suspect_at(const mcdc_keycheck *k, uint64_t h) {
    int32_t lo = 0, hi = k->n_suspects;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (k->suspects[mid] < h) lo = mid + 1;
        else hi = mid;
    }
    return lo < k->n_suspects && k->suspects[lo] == h ? lo : -1;
}

int mcdc_keycheck_confirm(mcdc_keycheck *k, const mcdc_batch *b, int64_t *dup_row,
                          mcdc_error *err) {
    MCDC_ASSERT(k->finished);
    *dup_row = -1;
    if (k->n_suspects == 0 || b->rows == 0) return MCDC_OK;
    uint64_t *h = mcdc_malloc((size_t)b->rows * sizeof *h);
    if (h == NULL) return nomem(err);
    hash_rows(k, b, 0, b->rows, h);
    int rc = MCDC_OK;
    for (int64_t r = 0; rc == MCDC_OK && r < b->rows && *dup_row < 0; r++) {
        int32_t s = suspect_at(k, h[r]);
        if (s < 0) continue;
        rc = encode_key(&k->enc, k, b, r, err);
        if (rc) break;
        mcdc_buf *f = &k->first[s];
        if (f->len == 0) rc = mcdc_buf_append(f, k->enc.data, k->enc.len, err);
        else if (f->len == k->enc.len && memcmp(f->data, k->enc.data, f->len) == 0) *dup_row = r;
    }
    mcdc_free(h);
    return rc;
}

void mcdc_keycheck_describe(const mcdc_keycheck *k, const mcdc_batch *b, int64_t row, char *out,
                            size_t cap) {
    MCDC_ASSERT(cap > 4);
    mcdc_buf t = {0};
    for (int32_t x = 0; x < k->n_cols; x++) {
        const mcdc_column *c = &b->columns[k->cols[x]];
        mcdc_buf_printf(&t, NULL, "%s%s=", x ? ", " : "", c->field->name);
        if (!mcdc_col_is_valid(c, row)) mcdc_buf_append_str(&t, "NULL", NULL);
        else mcdc_text_cell(&t, c, row, NULL);
    }
    size_t n = t.len < cap - 1 ? t.len : cap - 1;
    if (n) memcpy(out, t.data, n);
    out[n] = 0;
    if (t.len > cap - 1) memcpy(out + cap - 4, "...", 4);
    mcdc_buf_free(&t);
}

void mcdc_keycheck_free(mcdc_keycheck *k) {
    if (k == NULL) return;
    for (int32_t i = 0; i < k->n_runs; i++) {
        mcdc_storage_delete(k->spill, k->runs[i], NULL);
        mcdc_free(k->runs[i]);
    }
    for (int32_t i = 0; k->first && i < k->n_suspects; i++) mcdc_buf_free(&k->first[i]);
    mcdc_free(k->first);
    mcdc_free(k->suspects);
    mcdc_free(k->runs);
    mcdc_free(k->scratch);
    mcdc_batch_free(k->held);
    mcdc_schema_unref(k->schema);
    mcdc_free(k->prefix);
    mcdc_buf_free(&k->enc);
    mcdc_buf_free(&k->io);
    mcdc_free(k);
}
