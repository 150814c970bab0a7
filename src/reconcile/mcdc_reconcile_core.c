/*
 * mcdc_reconcile_core.c - reconcile's pure parts: the row hash, the bucket
 * grid and its merge, the verdicts, the sample, the key set
 * (mcdc_reconcile.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_reconcile.h"
#include "mcdc_value_text.h"

#define MCDC_LITTLE_ENDIAN (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)

int rec_grow(void *pp, int64_t *cap, int64_t need, size_t elem, mcdc_error *err) {
    if (need <= *cap) return MCDC_OK;
    int64_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void **p = pp;
    void *v = mcdc_realloc(*p, (size_t)n * elem);
    if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    *p = v;
    *cap = n;
    return MCDC_OK;
}

/* ---- hash ------------------------------------------------------------------------
 * Two 64-bit lanes over 8-byte words, each word mixed into both with other
 * constants; 128 bits, so that two rows of a 10M-row table collide with a
 * chance far below any other failure. Not cryptographic: the rows are the
 * user's own on both sides. */
static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

rec_hash rec_hash_bytes(const void *p, size_t n, uint64_t seed) {
    const uint8_t *s = p;
    uint64_t a = 0x9e3779b97f4a7c15ULL ^ seed ^ (n * 0x100000001b3ULL);
    uint64_t b = 0xc2b2ae3d27d4eb4fULL ^ rotl(seed, 29) ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        a = mcdc_mix64(a ^ w) + 0x9e3779b97f4a7c15ULL;
        b = rotl(b ^ (w * 0x87c37b91114253d5ULL), 31) * 0x4cf5ad432745937fULL;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    w ^= (uint64_t)n << 56;
    a = mcdc_mix64(a ^ w);
    b = mcdc_mix64(b ^ rotl(w, 17) ^ a);
    return (rec_hash){a, b};
}

/* Row hashes are built column by column: each cell's canonical form
 * absorbed into its row's two lanes a word at a time (a multiply-rotate
 * step per 8 bytes, no finalisation per cell), framed by a word of its
 * column, its class and its length (NULL: class 0 and a length no value
 * has), and each row finalised once.
 *
 * A cell's canonical form is binary where a binary form is equal exactly
 * when the canonical text (mcdc_value_text.h) is: every integer width (and
 * a decimal of scale 0 that fits) its int64; a decimal its scale and 128
 * bits; a date its day; a timestamp its microsecond, UTC apart from local;
 * a bool its bit; a binary its bytes (not its hex); a string its bytes. Only
 * floating point is hashed by its text (its shortest round-trip digits, so a
 * float and a double of one value hash alike). Each form is framed by its
 * family (exact number, floating point, date, timestamp, bool, binary,
 * string): an int 1 and a string "1" differ, as their types do. The type is
 * looked at once per column, not per cell. */
#define NULL_LEN 0xffffffffULL
enum { CLS_TEXT = 1, CLS_INT, CLS_DEC, CLS_DATE, CLS_TS, CLS_TSZ, CLS_BOOL, CLS_BIN, CLS_FLT };

static inline void absorb(rec_hash *h, uint64_t w) {
    h->a = rotl(h->a ^ (w * 0x87c37b91114253d5ULL), 31) * 0x4cf5ad432745937fULL;
    h->b = (rotl(h->b + w, 27) * 0x52dce729ULL) ^ h->a;
}

/* The last n (1-7) bytes of a value of `total` bytes, as memcpy into a
 * zeroed word would give them, without a call: an 8-byte load ending at
 * the value's end when it has 8 bytes, else byte by byte. */
static inline uint64_t tail_word(const uint8_t *p, size_t n, size_t total) {
    uint64_t w = 0;
    if (total >= 8) {
        memcpy(&w, p + n - 8, 8);
        return MCDC_LITTLE_ENDIAN ? w >> (8 * (8 - n)) : w << (8 * (8 - n));
    }
    for (size_t j = 0; j < n; j++) ((uint8_t *)&w)[j] = p[j];
    return w;
}

static inline void absorb_bytes(rec_hash *h, const uint8_t *p, size_t n) {
    size_t total = n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        absorb(h, w);
        p += 8;
        n -= 8;
    }
    if (n) absorb(h, tail_word(p, n, total));
}

static inline uint64_t tag(uint64_t col, uint64_t cls, uint64_t low) {
    return col | cls << 56 | low;
}

#define VALID(val, r) ((val) == NULL || (((val)[(r) >> 3] >> ((r) & 7)) & 1))

/* Column k's cells of rows [from, from + n) into h[0..n). */
static int hash_column(rec_hash *h, const mcdc_column *c, int32_t k, int64_t from, int64_t n,
                       mcdc_error *err) {
    uint64_t col = ((uint64_t)(k + 1) & 0xffffff) << 32, null_w = col | NULL_LEN;
    if (c == NULL) {
        for (int64_t i = 0; i < n; i++) absorb(&h[i], null_w);
        return MCDC_OK;
    }
    const uint8_t *val = c->validity, *v = c->values;
    switch (c->field->type) {
    case MCDC_TYPE_UTF8:
    case MCDC_TYPE_BINARY: {
        uint64_t t = tag(col, c->field->type == MCDC_TYPE_UTF8 ? CLS_TEXT : CLS_BIN, 0);
        for (int64_t i = 0, r = from; i < n; i++, r++) {
            if (!VALID(val, r)) {
                absorb(&h[i], null_w);
                continue;
            }
            size_t len = (size_t)(c->offsets[r + 1] - c->offsets[r]);
            absorb(&h[i], t | (uint32_t)len);
            absorb_bytes(&h[i], c->data + c->offsets[r], len);
        }
        return MCDC_OK;
    }
    case MCDC_TYPE_FIXED_BINARY: {
        size_t w = (size_t)c->field->byte_width;
        uint64_t t = tag(col, CLS_BIN, (uint32_t)w);
        for (int64_t i = 0, r = from; i < n; i++, r++) {
            if (!VALID(val, r)) {
                absorb(&h[i], null_w);
                continue;
            }
            absorb(&h[i], t);
            absorb_bytes(&h[i], v + (size_t)r * w, w);
        }
        return MCDC_OK;
    }
    case MCDC_TYPE_BOOL: {
        uint64_t t = tag(col, CLS_BOOL, 0);
        for (int64_t i = 0, r = from; i < n; i++, r++) {
            if (!VALID(val, r)) {
                absorb(&h[i], null_w);
                continue;
            }
            absorb(&h[i], t | (uint64_t)((v[r >> 3] >> (r & 7)) & 1));
        }
        return MCDC_OK;
    }
#define FIXED_LOOP(ctype, cls)                                                                     \
    do {                                                                                           \
        uint64_t t = tag(col, cls, 0);                                                             \
        for (int64_t i = 0, r = from; i < n; i++, r++) {                                           \
            if (!VALID(val, r)) {                                                                  \
                absorb(&h[i], null_w);                                                             \
                continue;                                                                          \
            }                                                                                      \
            ctype x;                                                                               \
            memcpy(&x, v + (size_t)r * sizeof x, sizeof x);                                        \
            absorb(&h[i], t);                                                                      \
            absorb(&h[i], (uint64_t)(int64_t)x);                                                   \
        }                                                                                          \
    } while (0)
    case MCDC_TYPE_INT8: FIXED_LOOP(int8_t, CLS_INT); return MCDC_OK;
    case MCDC_TYPE_INT16: FIXED_LOOP(int16_t, CLS_INT); return MCDC_OK;
    case MCDC_TYPE_INT32: FIXED_LOOP(int32_t, CLS_INT); return MCDC_OK;
    case MCDC_TYPE_INT64: FIXED_LOOP(int64_t, CLS_INT); return MCDC_OK;
    case MCDC_TYPE_DATE32: FIXED_LOOP(int32_t, CLS_DATE); return MCDC_OK;
    case MCDC_TYPE_TIMESTAMP_NTZ: FIXED_LOOP(int64_t, CLS_TS); return MCDC_OK;
    case MCDC_TYPE_TIMESTAMP_UTC: FIXED_LOOP(int64_t, CLS_TSZ); return MCDC_OK;
#undef FIXED_LOOP
    case MCDC_TYPE_DECIMAL: {
        int32_t scale = c->field->scale;
        uint64_t t = tag(col, CLS_DEC, (uint32_t)scale), ti = tag(col, CLS_INT, 0);
        for (int64_t i = 0, r = from; i < n; i++, r++) {
            if (!VALID(val, r)) {
                absorb(&h[i], null_w);
                continue;
            }
            uint64_t lo;
            int64_t hi;
            memcpy(&lo, v + (size_t)r * 16, 8);
            memcpy(&hi, v + (size_t)r * 16 + 8, 8);
            if (scale == 0 && hi == ((int64_t)lo >> 63)) { /* its text is an integer's */
                absorb(&h[i], ti);
                absorb(&h[i], lo);
                continue;
            }
            absorb(&h[i], t);
            absorb(&h[i], lo);
            absorb(&h[i], (uint64_t)hi);
        }
        return MCDC_OK;
    }
    case MCDC_TYPE_FLOAT:
    case MCDC_TYPE_DOUBLE: {
        uint64_t t = tag(col, CLS_FLT, 0);
        char tmp[MCDC_TEXT_FIXED_MAX];
        for (int64_t i = 0, r = from; i < n; i++, r++) {
            if (!VALID(val, r)) {
                absorb(&h[i], null_w);
                continue;
            }
            size_t len;
            if (c->field->type == MCDC_TYPE_FLOAT) {
                float x;
                memcpy(&x, v + (size_t)r * 4, 4);
                len = mcdc_text_float(tmp, x);
            } else {
                double x;
                memcpy(&x, v + (size_t)r * 8, 8);
                len = mcdc_text_double(tmp, x);
            }
            absorb(&h[i], t | (uint32_t)len);
            absorb_bytes(&h[i], (const uint8_t *)tmp, len);
        }
        return MCDC_OK;
    }
    default:
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED, "column %s: type %s cannot be hashed",
                              c->field->name, mcdc_type_name(c->field->type));
    }
}
#undef VALID

static const rec_hash HASH_INIT = {0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL};

int rec_hash_rows(rec_hash *out, const mcdc_column *const *cols, int32_t n_cols, int64_t from,
                  int64_t n, mcdc_error *err) {
    for (int64_t i = 0; i < n; i++) out[i] = HASH_INIT;
    for (int32_t k = 0; k < n_cols; k++) {
        int rc = hash_column(out, cols[k], k, from, n, err);
        if (rc) return rc;
    }
    for (int64_t i = 0; i < n; i++) {
        uint64_t a = mcdc_mix64(out[i].a ^ rotl(out[i].b, 17));
        out[i].b = mcdc_mix64(out[i].b + a);
        out[i].a = a;
    }
    return MCDC_OK;
}

int rec_hash_cells(rec_hash *out, const mcdc_column *const *cols, int32_t n_cols, int64_t row,
                   mcdc_error *err) {
    for (int32_t k = 0; k < n_cols; k++) {
        out[k] = HASH_INIT;
        int rc = hash_column(&out[k], cols[k], k, row, 1, err);
        if (rc) return rc;
    }
    return MCDC_OK;
}

int rec_cell_eq(bool *eq, const mcdc_column *a, int64_t ra, const mcdc_column *b, int64_t rb,
                mcdc_error *err) {
    rec_hash x, y;
    int rc = rec_hash_cells(&x, &a, 1, ra, err);
    if (rc == MCDC_OK) rc = rec_hash_cells(&y, &b, 1, rb, err);
    *eq = rc == MCDC_OK && rec_hash_eq(x, y);
    return rc;
}

/* ---- buckets ----------------------------------------------------------------------- */
int64_t rec_fine_width(int64_t lo, int64_t hi) {
    MCDC_ASSERT(lo <= hi);
    rec_i128 span = (rec_i128)hi - lo + 1;
    rec_i128 w = (span + REC_FINE - 1) / REC_FINE;
    return w < 1 ? 1 : (int64_t)w;
}

const char *rec_status_name(int status) {
    switch (status) {
    case REC_MATCH: return "MATCH";
    case REC_IN_FLIGHT: return "IN_FLIGHT";
    default: return "MISMATCH";
    }
}

/* id * width, clamped to int64 (a bound past it is open). */
static bool bound_of(int64_t id, int64_t width, int64_t *out) {
    rec_i128 v = (rec_i128)id * width;
    if (v > INT64_MAX || v < INT64_MIN) return false;
    *out = (int64_t)v;
    return true;
}

int rec_merge_buckets(rec_bucket **out, int64_t *n_out, const rec_fine *src, int64_t n_src,
                      const rec_fine *sil, int64_t n_sil, int64_t width, int64_t bucket_rows,
                      mcdc_error *err) {
    MCDC_ASSERT(width >= 1 && bucket_rows >= 1);
    *out = NULL;
    *n_out = 0;
    if (n_src + n_sil == 0) return MCDC_OK;
    rec_bucket *v = NULL;
    int64_t n = 0, cap = 0;
    int64_t i = 0, j = 0, rows = bucket_rows; /* rows >= bucket_rows: start a bucket */
    while (i < n_src || j < n_sil) {
        int64_t id;
        if (j >= n_sil || (i < n_src && src[i].id <= sil[j].id)) id = src[i].id;
        else id = sil[j].id;
        const rec_fine *s = i < n_src && src[i].id == id ? &src[i++] : NULL;
        const rec_fine *t = j < n_sil && sil[j].id == id ? &sil[j++] : NULL;
        if (rows >= bucket_rows) {
            if (rec_grow(&v, &cap, n + 1, sizeof *v, err)) {
                mcdc_free(v);
                return MCDC_E_NOMEM;
            }
            memset(&v[n], 0, sizeof v[n]);
            v[n].fine_lo = id;
            if (n > 0) v[n - 1].fine_hi = id;
            n++;
            rows = 0;
        }
        rec_bucket *b = &v[n - 1];
        b->fine_hi = id + 1;
        int64_t a = s ? s->rows : 0, z = t ? t->rows : 0;
        b->src_rows += a;
        b->sil_rows += z;
        if (s) b->src_sum += s->sum;
        if (t) b->sil_sum += t->sum;
        rows += a > z ? a : z;
    }
    for (int64_t k = 0; k < n; k++) {
        v[k].has_lo = k > 0 && bound_of(v[k].fine_lo, width, &v[k].lo);
        v[k].has_hi = k < n - 1 && bound_of(v[k].fine_hi, width, &v[k].hi);
        v[k].rep_has_lo = bound_of(v[k].fine_lo, width, &v[k].rep_lo);
        v[k].rep_has_hi = bound_of(v[k].fine_hi, width, &v[k].rep_hi);
    }
    *out = v;
    *n_out = n;
    return MCDC_OK;
}

int64_t rec_bucket_of(const rec_bucket *b, int64_t n, int64_t fine) {
    if (n == 0) return -1;
    /* the first is open below and the last open above */
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (b[mid].fine_lo <= fine) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

int rec_bucket_status(const rec_bucket *b) {
    if (b->src_rows == b->sil_rows && b->src_sum == b->sil_sum) return REC_MATCH;
    return b->moved ? REC_IN_FLIGHT : REC_MISMATCH;
}

mcdc_reconcile_failure rec_key_failure(bool in_source, bool in_silver, bool in_flight) {
    MCDC_ASSERT(in_source || in_silver);
    if (in_flight) return MCDC_RECONCILE_IN_FLIGHT;
    if (!in_silver) return MCDC_RECONCILE_MISSING_TARGET;
    if (!in_source) return MCDC_RECONCILE_MISSING_SOURCE;
    return MCDC_RECONCILE_RECORD_DIFF;
}

/* ---- tier 2's entries ------------------------------------------------------------------ */
static int by_ord(const rec_entry *a, const rec_entry *b) {
    if (a->null_key != b->null_key) return a->null_key ? 1 : -1;
    if (!a->null_key && a->ord != b->ord) return a->ord < b->ord ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq); /* the first row read first */
}

static int by_ord_q(const void *x, const void *y) { return by_ord(x, y); }

int64_t rec_entries_order(rec_entry *e, int64_t n, int64_t *repeats) {
    /* the snapshot reader reads a range in key order: mostly sorted already */
    bool sorted = true;
    for (int64_t i = 1; i < n && sorted; i++) sorted = by_ord(&e[i - 1], &e[i]) <= 0;
    if (!sorted) qsort(e, (size_t)n, sizeof *e, by_ord_q);
    int64_t k = 0, twice = 0;
    while (k < n && !e[k].null_key) k++;
    for (int64_t i = 1; i < k; i++)
        if (e[i].ord == e[i - 1].ord) { /* a key twice: its first row stands for it */
            e[i].seen = true;
            twice++;
        }
    *repeats = twice;
    return k;
}

int64_t rec_entries_find(const rec_entry *e, int64_t n_ord, int64_t *finger, int64_t v) {
    int64_t lo = 0, hi = n_ord;
    if (*finger < n_ord && e[*finger].ord <= v) { /* a few steps on, else bisect what is left */
        lo = *finger;
        for (int k = 0; k < 8 && lo < hi; k++, lo++)
            if (e[lo].ord >= v) break;
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (e[mid].ord < v) lo = mid + 1;
        else hi = mid;
    }
    *finger = lo;
    return lo < n_ord && e[lo].ord == v ? lo : -1;
}

/* ---- sample ------------------------------------------------------------------------- */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

int rec_sample(int64_t **out, int64_t *k, int64_t n, double fraction, uint64_t seed,
               mcdc_error *err) {
    MCDC_ASSERT(n >= 0 && fraction >= 0 && fraction <= 1);
    *out = NULL;
    *k = 0;
    int64_t want = (int64_t)ceil(fraction * (double)n);
    if (want > n) want = n;
    if (want <= 0) return MCDC_OK;
    int64_t *v = mcdc_malloc((size_t)n * sizeof *v);
    if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) v[i] = i;
    uint64_t s = seed;
    for (int64_t i = 0; i < want; i++) { /* a partial Fisher-Yates shuffle */
        int64_t j = i + (int64_t)(splitmix(&s) % (uint64_t)(n - i));
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    qsort(v, (size_t)want, sizeof *v, cmp_i64);
    *out = v;
    *k = want;
    return MCDC_OK;
}

/* ---- keyset ---------------------------------------------------------------------------- */
static uint64_t key_hash(const uint8_t *p, size_t n) { return rec_hash_bytes(p, n, 0x51ed).a; }

static int64_t probe(const rec_keyset *s, const uint8_t *key, size_t n, bool *found) {
    uint64_t mask = (uint64_t)s->n_slots - 1;
    uint64_t at = key_hash(key, n) & mask;
    for (;;) {
        int64_t x = s->slots[at];
        if (x == 0) {
            *found = false;
            return (int64_t)at;
        }
        int64_t i = x - 1;
        size_t len = (size_t)(s->off[i + 1] - s->off[i]);
        if (len == n && memcmp(s->bytes.data + s->off[i], key, n) == 0) {
            *found = true;
            return (int64_t)at;
        }
        at = (at + 1) & mask;
    }
}

static int grow_slots(rec_keyset *s, mcdc_error *err) {
    int64_t ns = s->n_slots ? s->n_slots * 2 : 1024;
    int64_t *slots = mcdc_calloc((size_t)ns, sizeof *slots);
    if (slots == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_free(s->slots);
    s->slots = slots;
    s->n_slots = ns;
    for (int64_t i = 0; i < s->n; i++) {
        bool found;
        int64_t at = probe(s, s->bytes.data + s->off[i], (size_t)(s->off[i + 1] - s->off[i]), &found);
        s->slots[at] = i + 1;
    }
    return MCDC_OK;
}

int rec_keyset_add(rec_keyset *s, const uint8_t *key, size_t n, int64_t *idx, bool *added,
                   mcdc_error *err) {
    *added = false;
    if ((s->n + 1) * 2 > s->n_slots) {
        int rc = grow_slots(s, err);
        if (rc) return rc;
    }
    bool found;
    int64_t at = probe(s, key, n, &found);
    if (found) {
        *idx = s->slots[at] - 1;
        return MCDC_OK;
    }
    if (s->n + 2 > s->cap) {
        int64_t c1 = s->cap, c2 = s->cap;
        int rc = rec_grow(&s->off, &c1, s->n + 2, sizeof *s->off, err);
        if (rc == MCDC_OK) rc = rec_grow(&s->val, &c2, s->n + 2, sizeof *s->val, err);
        if (rc) return rc;
        s->cap = c1 < c2 ? c1 : c2;
    }
    if (s->n == 0) s->off[0] = 0;
    int rc = mcdc_buf_append(&s->bytes, key, n, err);
    if (rc) return rc;
    s->off[s->n + 1] = (int64_t)s->bytes.len;
    s->val[s->n] = 0;
    s->slots[at] = s->n + 1;
    *idx = s->n++;
    *added = true;
    return MCDC_OK;
}

int64_t rec_keyset_find(const rec_keyset *s, const uint8_t *key, size_t n) {
    if (s->n == 0) return -1;
    bool found;
    int64_t at = probe(s, key, n, &found);
    return found ? s->slots[at] - 1 : -1;
}

void rec_keyset_clear(rec_keyset *s) {
    mcdc_buf_free(&s->bytes);
    mcdc_free(s->off);
    mcdc_free(s->val);
    mcdc_free(s->slots);
    memset(s, 0, sizeof *s);
}

/* ---- chunk checks ---------------------------------------------------------------------- */
typedef struct fail_acc {
    rec_chunk_failure *v;
    int64_t n, cap;
    const char *s;
} fail_acc;

/* Adds a failure; detail_fmt fills the detail's members after snapshot and
 * chunk (a JSON fragment starting with ',' or empty). */
static int fail(fail_acc *a, mcdc_reconcile_failure type, int64_t chunk, const rec_chunk *c,
                const char *more, mcdc_error *err) {
    if (rec_grow(&a->v, &a->cap, a->n + 1, sizeof *a->v, err)) return MCDC_E_NOMEM;
    mcdc_buf d = {0};
    int rc = mcdc_buf_append_str(&d, "{\"snapshot\":", err);
    if (rc == MCDC_OK) rc = mcdc_text_json_string(&d, (const uint8_t *)a->s, strlen(a->s), err);
    if (rc == MCDC_OK) rc = mcdc_buf_printf(&d, err, ",\"chunk\":%lld%s}", (long long)chunk, more);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&d, err);
    if (rc) {
        mcdc_buf_free(&d);
        return rc;
    }
    a->v[a->n++] = (rec_chunk_failure){type, chunk, c ? c->lo : NULL, c ? c->hi : NULL,
                                       (char *)d.data};
    return MCDC_OK;
}

static int by_chunk(const void *x, const void *y) {
    const rec_chunk *a = *(const rec_chunk *const *)x, *b = *(const rec_chunk *const *)y;
    return (a->chunk > b->chunk) - (a->chunk < b->chunk);
}

static bool same_bound(const char *a, const char *b) {
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static const rec_held *held_of(const rec_held *h, int64_t n, int64_t chunk) {
    for (int64_t i = 0; i < n; i++)
        if (h[i].chunk == chunk) return &h[i];
    return NULL;
}

int rec_tiling_failures(rec_chunk_failure **out, int64_t *n_out, const char *s, bool complete,
                        const rec_chunk *found, int64_t n_found, const rec_held *held,
                        int64_t n_held, mcdc_error *err) {
    *out = NULL;
    *n_out = 0;
    fail_acc a = {.s = s};
    const rec_chunk **by = mcdc_malloc(((size_t)n_found + 1) * sizeof *by);
    if (by == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < n_found; i++) by[i] = &found[i];
    if (n_found > 1) qsort(by, (size_t)n_found, sizeof *by, by_chunk);
    int64_t top = n_found ? by[n_found - 1]->chunk : -1;
    int rc = MCDC_OK;
    int64_t j = 0;            /* by[j]: the first row of chunk i */
    const rec_chunk *before = NULL;
    char more[160];
    for (int64_t i = 0; i <= top && rc == MCDC_OK; i++) {
        while (j < n_found && by[j]->chunk < i) j++;
        int64_t times = 0;
        while (j + times < n_found && by[j + times]->chunk == i) times++;
        const rec_chunk *c = times ? by[j] : NULL;
        if (c == NULL) {
            rc = fail(&a, MCDC_RECONCILE_CHUNK_TILING, i, NULL,
                      ",\"problem\":\"no 'snapshot_chunk' facts row\"", err);
            before = NULL;
            continue;
        }
        if (times > 1) {
            snprintf(more, sizeof more, ",\"problem\":\"%lld 'snapshot_chunk' facts rows\"",
                     (long long)times);
            rc = fail(&a, MCDC_RECONCILE_CHUNK_TILING, i, c, more, err);
        }
        if (rc == MCDC_OK && i == 0 && c->lo != NULL)
            rc = fail(&a, MCDC_RECONCILE_CHUNK_TILING, i, c,
                      ",\"problem\":\"the first chunk is not open below\"", err);
        else if (rc == MCDC_OK && before && (before->last || !same_bound(c->lo, before->hi)))
            rc = fail(&a, MCDC_RECONCILE_CHUNK_TILING, i, c,
                      ",\"problem\":\"it does not start where the one before ended\"", err);
        const rec_held *h = held_of(held, n_held, i);
        int64_t n = h ? h->rows : 0;
        if (rc == MCDC_OK && c->rows != n) {
            snprintf(more, sizeof more, ",\"facts_rows\":%lld,\"bronze_rows\":%lld", (long long)c->rows,
                     (long long)n);
            rc = fail(&a, MCDC_RECONCILE_CHUNK_ROWS, i, c, more, err);
        }
        /* the stamp: the lowest of the facts row's and bronze's rows' */
        const char *stamp = c->lsn[0] ? c->lsn : NULL;
        if (h && h->low[0] && (stamp == NULL || strcmp(h->low, stamp) < 0)) stamp = h->low;
        if (rc == MCDC_OK && stamp && strcmp(stamp, s) < 0) {
            snprintf(more, sizeof more, ",\"lsn\":\"%.22s\"", stamp);
            rc = fail(&a, MCDC_RECONCILE_CHUNK_STAMP, i, c, more, err);
        }
        before = c;
    }
    if (rc == MCDC_OK && complete && n_found && !by[n_found - 1]->last) {
        const rec_chunk *c = by[n_found - 1];
        rc = fail(&a, MCDC_RECONCILE_CHUNK_TILING, c->chunk, c,
                  ",\"problem\":\"the last chunk is not the plan's final\"", err);
    }
    for (int64_t i = 0; rc == MCDC_OK && complete && i < n_held; i++) {
        bool named = false;
        for (int64_t k = 0; k < n_found && !named; k++) named = found[k].chunk == held[i].chunk;
        if (named) continue;
        snprintf(more, sizeof more, ",\"facts_rows\":null,\"bronze_rows\":%lld", (long long)held[i].rows);
        rc = fail(&a, MCDC_RECONCILE_CHUNK_ROWS, held[i].chunk, NULL, more, err);
    }
    mcdc_free(by);
    if (rc) {
        rec_chunk_failures_free(a.v, a.n);
        return rc;
    }
    *out = a.v;
    *n_out = a.n;
    return MCDC_OK;
}

void rec_chunk_failures_free(rec_chunk_failure *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) mcdc_free(v[i].detail);
    mcdc_free(v);
}
