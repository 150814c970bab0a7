/*
 * mcdc_silver_key.c - keys as ordered bytes, their hash and bloom filters,
 * the rank of a change row, and the rules of one merge decision (see
 * mcdc_silver.h).
 */
#include <math.h>
#include <string.h>

#include "mcdc_silver.h"
#include "mcdc_value_text.h"

bool silver_key_type_ok(mcdc_type_id t) { return t >= MCDC_TYPE_BOOL && t <= MCDC_TYPE_TIMESTAMP_UTC; }

static void put_be64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* A signed integer as 8 bytes whose memcmp order is the integers' order. */
static void put_int(uint8_t *p, int64_t v) { put_be64(p, (uint64_t)v ^ (1ULL << 63)); }

static int64_t int_at(const mcdc_column *c, int64_t row) {
    switch (c->field->type) {
    case MCDC_TYPE_INT8: return ((const int8_t *)c->values)[row];
    case MCDC_TYPE_INT16: {
        int16_t v;
        memcpy(&v, c->values + row * 2, 2);
        return v;
    }
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: {
        int32_t v;
        memcpy(&v, c->values + row * 4, 4);
        return v;
    }
    default: {
        int64_t v;
        memcpy(&v, c->values + row * 8, 8);
        return v;
    }
    }
}

/* Text or binary: 0x00 escaped as 0x00 0xFF, ended by 0x00 0x00, so that
 * a value that is a prefix of another sorts first and no value's bytes run
 * into the next column's. */
static int put_bytes(mcdc_buf *out, const uint8_t *p, size_t n, mcdc_error *err) {
    size_t zeros = 0;
    for (size_t i = 0; i < n; i++) zeros += p[i] == 0;
    int rc = mcdc_buf_reserve(out, n + zeros + 2, err);
    if (rc) return rc;
    uint8_t *d = (uint8_t *)out->data + out->len;
    if (zeros == 0) {
        if (n) memcpy(d, p, n);
        d += n;
    } else {
        for (size_t i = 0; i < n; i++) {
            *d++ = p[i];
            if (p[i] == 0) *d++ = 0xFF;
        }
    }
    d[0] = d[1] = 0;
    out->len += n + zeros + 2;
    return MCDC_OK;
}

int silver_key_append(mcdc_buf *out, const mcdc_column *const *cols, int32_t n, int64_t row,
                      mcdc_error *err) {
    size_t start = out->len;
    int rc = MCDC_OK;
    for (int32_t k = 0; k < n && rc == MCDC_OK; k++) {
        const mcdc_column *c = cols[k];
        uint8_t tmp[1 + 16];
        if (!mcdc_col_is_valid(c, row)) {
            rc = mcdc_buf_append_byte(out, 0, err);
            continue;
        }
        tmp[0] = 1;
        size_t len = 1;
        switch (c->field->type) {
        case MCDC_TYPE_BOOL:
            tmp[1] = (uint8_t)((c->values[row >> 3] >> (row & 7)) & 1);
            len = 2;
            break;
        case MCDC_TYPE_INT8:
        case MCDC_TYPE_INT16:
        case MCDC_TYPE_INT32:
        case MCDC_TYPE_INT64:
        case MCDC_TYPE_DATE32:
        case MCDC_TYPE_TIMESTAMP_NTZ:
        case MCDC_TYPE_TIMESTAMP_UTC:
            put_int(tmp + 1, int_at(c, row));
            len = 9;
            break;
        case MCDC_TYPE_FLOAT:
        case MCDC_TYPE_DOUBLE: {
            double d;
            if (c->field->type == MCDC_TYPE_FLOAT) {
                float f;
                memcpy(&f, c->values + row * 4, 4);
                d = f;
            } else {
                memcpy(&d, c->values + row * 8, 8);
            }
            if (d == 0) d = 0;          /* -0 equals 0 */
            if (isnan(d)) d = NAN;      /* one NaN */
            uint64_t bits;
            memcpy(&bits, &d, 8);
            bits = (bits >> 63) ? ~bits : bits | (1ULL << 63);
            put_be64(tmp + 1, bits);
            len = 9;
            break;
        }
        case MCDC_TYPE_DECIMAL: {
            uint64_t lo;
            int64_t hi;
            memcpy(&lo, c->values + row * 16, 8);
            memcpy(&hi, c->values + row * 16 + 8, 8);
            put_int(tmp + 1, hi);
            put_be64(tmp + 9, lo);
            len = 17;
            break;
        }
        case MCDC_TYPE_FIXED_BINARY: {
            int32_t w = c->field->byte_width;
            rc = mcdc_buf_append_byte(out, 1, err);
            if (rc == MCDC_OK) rc = put_bytes(out, c->values + (int64_t)w * row, (size_t)w, err);
            len = 0;
            break;
        }
        case MCDC_TYPE_UTF8:
        case MCDC_TYPE_BINARY: {
            int32_t o = c->offsets[row], l = c->offsets[row + 1] - o;
            rc = mcdc_buf_append_byte(out, 1, err);
            if (rc == MCDC_OK) rc = put_bytes(out, c->data + o, (size_t)l, err);
            len = 0;
            break;
        }
        }
        if (rc == MCDC_OK && len) rc = mcdc_buf_append(out, tmp, len, err);
    }
    if (rc == MCDC_OK && out->len - start > SILVER_KEY_BYTES_MAX)
        rc = mcdc_error_set(err, MCDC_E_LIMIT,
                            "a key of %zu bytes (its columns encoded) is longer than the %d a "
                            "silver key may have: choose key columns that identify a row with "
                            "fewer bytes (--keys)",
                            out->len - start, SILVER_KEY_BYTES_MAX);
    return rc;
}

int silver_keys_append(mcdc_buf *out, size_t *off, const mcdc_column *const *cols, int32_t n,
                       int64_t from, int64_t rows, mcdc_error *err) {
    const mcdc_column *c = cols[0];
    mcdc_type_id t = c->field->type;
    bool ints = n == 1 && (t == MCDC_TYPE_INT32 || t == MCDC_TYPE_INT64 || t == MCDC_TYPE_DATE32 ||
                           t == MCDC_TYPE_TIMESTAMP_NTZ || t == MCDC_TYPE_TIMESTAMP_UTC);
    if (ints) { /* one integer column, the common key: 9 bytes a row, no calls */
        int rc = mcdc_buf_reserve(out, (size_t)rows * 9, err);
        if (rc) return rc;
        uint8_t *d = (uint8_t *)out->data + out->len;
        for (int64_t i = 0; i < rows; i++) {
            int64_t r = from + i;
            off[i] = out->len;
            if (!mcdc_col_is_valid(c, r)) {
                *d++ = 0;
                out->len += 1;
                continue;
            }
            d[0] = 1;
            put_int(d + 1, int_at(c, r));
            d += 9;
            out->len += 9;
        }
        off[rows] = out->len;
        return MCDC_OK;
    }
    for (int64_t i = 0; i < rows; i++) {
        off[i] = out->len;
        int rc = silver_key_append(out, cols, n, from + i, err);
        if (rc) return rc;
    }
    off[rows] = out->len;
    return MCDC_OK;
}

int silver_key_cmp(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    size_t n = na < nb ? na : nb;
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return na < nb ? -1 : na > nb;
}

/* 8-byte words mixed in turn: keys are hashed for bloom filters only (no
 * adversary: a collision costs a file read). */
static inline uint64_t mix(uint64_t h) { return mcdc_mix64(h); }

void silver_key_text(mcdc_buf *out, const mcdc_column *const *cols, int32_t n, int64_t row) {
    for (int32_t k = 0; k < n; k++) {
        if (k) mcdc_buf_append(out, ", ", 2, NULL);
        size_t at = out->len;
        if (!mcdc_col_is_valid(cols[k], row)) mcdc_buf_append(out, "NULL", 4, NULL);
        else mcdc_text_cell(out, cols[k], row, NULL);
        if (out->len - at > 64) out->len = at + 64; /* enough to find it */
    }
}

uint64_t silver_hash(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0x100000001b3ULL);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = mix(h ^ w) + 0x9e3779b97f4a7c15ULL;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    return mix(h ^ w ^ (uint64_t)n << 56);
}

/* ---- rank ------------------------------------------------------------------------- */

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

bool silver_lsn_parse(uint8_t out[10], const char *t, size_t len) {
    if (len != 22 || t[0] != '0' || (t[1] != 'x' && t[1] != 'X')) return false;
    for (int i = 0; i < 10; i++) {
        int a = hexval(t[2 + 2 * i]), b = hexval(t[3 + 2 * i]);
        if (a < 0 || b < 0) return false;
        out[i] = (uint8_t)(a << 4 | b);
    }
    return true;
}

void silver_lsn_format(char out[23], const uint8_t lsn[10]) {
    static const char hex[] = "0123456789ABCDEF";
    out[0] = '0';
    out[1] = 'x';
    for (int i = 0; i < 10; i++) {
        out[2 + 2 * i] = hex[lsn[i] >> 4];
        out[3 + 2 * i] = hex[lsn[i] & 15];
    }
    out[22] = 0;
}

int silver_rank_make(silver_rank *out, const char *lsn, size_t lsn_len, bool has_cmd,
                     int32_t cmd, const char *seqval, size_t seq_len, int32_t op,
                     mcdc_error *err) {
    uint8_t *b = out->b;
    memset(b, 0, sizeof out->b);
    if (!silver_lsn_parse(b, lsn, lsn_len))
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "bronze row with _start_lsn '%.*s', which is not an LSN (0x and 20 "
                              "hex digits): is this table a bronze table of mssql-cdc?",
                              (int)(lsn_len > 40 ? 40 : lsn_len), lsn);
    if (has_cmd) {
        b[10] = 1;
        uint32_t u = (uint32_t)cmd ^ 0x80000000u;
        b[11] = (uint8_t)(u >> 24);
        b[12] = (uint8_t)(u >> 16);
        b[13] = (uint8_t)(u >> 8);
        b[14] = (uint8_t)u;
    }
    if (seqval) {
        b[15] = 1;
        if (!silver_lsn_parse(b + 16, seqval, seq_len))
            return mcdc_error_set(err, MCDC_E_CORRUPT,
                                  "bronze row with _seqval '%.*s', which is not an LSN",
                                  (int)(seq_len > 40 ? 40 : seq_len), seqval);
    }
    if (op < 0 || op > 4)
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "bronze row with _operation %d: operations are 0 to 4", (int)op);
    b[26] = (uint8_t)op;
    return MCDC_OK;
}

void silver_rank_delete_at(silver_rank *out, const uint8_t stamp[10]) {
    memset(out->b, 0, sizeof out->b);
    memcpy(out->b, stamp, 10);
    out->b[26] = 1;
}

bool silver_rank_is_repair(const silver_rank *r) {
    static const uint8_t mark[16] = {1, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0xFF, 0xFF,
                                     0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    return memcmp(r->b + 10, mark, sizeof mark) == 0;
}

silver_action silver_decide(const silver_rank *winner, bool has_row_lsn,
                            const uint8_t row_lsn[10], bool rebuild) {
    if (winner == NULL) return rebuild ? SILVER_DELETE : SILVER_KEEP;
    if (silver_rank_is_repair(winner)) {
        /* read after L: it replaces anything not newer than L */
        if (has_row_lsn && memcmp(winner->b, row_lsn, 10) < 0) return SILVER_KEEP;
        return silver_op_deletes(silver_rank_op(winner)) ? SILVER_DELETE : SILVER_UPDATE;
    }
    /* s._start_lsn > t._start_lsn: never an older image over a newer one,
     * and a row without one (NULL) is never matched as older. */
    if (!has_row_lsn || memcmp(winner->b, row_lsn, 10) <= 0) return SILVER_KEEP;
    return silver_op_deletes(silver_rank_op(winner)) ? SILVER_DELETE : SILVER_UPDATE;
}

/* ---- chunk ranges ------------------------------------------------------------------- */

const silver_range *silver_range_find(const silver_range *r, int32_t n, int64_t v) {
    /* The last range whose lower bound is at or below v. */
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (!r[mid].has_lo || r[mid].lo <= v) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return NULL;
    const silver_range *x = &r[lo - 1];
    return !x->has_hi || v < x->hi ? x : NULL;
}

bool silver_range_value(const mcdc_column *c, int64_t row, int64_t *v) {
    if (!mcdc_col_is_valid(c, row)) return false;
    switch (c->field->type) {
    case MCDC_TYPE_INT8:
    case MCDC_TYPE_INT16:
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_DATE32:
    case MCDC_TYPE_TIMESTAMP_NTZ: *v = int_at(c, row); return true;
    default: return false;
    }
}

/* ---- bloom filters ------------------------------------------------------------------ */

int silver_bloom_build(silver_bloom *out, const uint64_t *hashes, int64_t n, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    uint64_t bits = (uint64_t)(n > 0 ? n : 1) * SILVER_BLOOM_BITS_PER_KEY;
    bits = (bits + 63) / 64 * 64;
    out->words = mcdc_calloc(bits / 64, sizeof *out->words);
    if (out->words == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (bloom filter)");
    out->nbits = bits;
    for (int64_t i = 0; i < n; i++) {
        uint64_t h1 = hashes[i], h2 = (h1 >> 32) | 1;
        for (int k = 0; k < SILVER_BLOOM_PROBES; k++) {
            uint64_t bit = (h1 + (uint64_t)k * h2) % bits;
            out->words[bit >> 6] |= 1ULL << (bit & 63);
        }
    }
    return MCDC_OK;
}

bool silver_bloom_may(const silver_bloom *b, uint64_t h1) {
    if (b->nbits == 0) return true;
    uint64_t h2 = (h1 >> 32) | 1;
    for (int k = 0; k < SILVER_BLOOM_PROBES; k++) {
        uint64_t bit = (h1 + (uint64_t)k * h2) % b->nbits;
        if (!((b->words[bit >> 6] >> (bit & 63)) & 1)) return false;
    }
    return true;
}

void silver_bloom_free(silver_bloom *b) {
    if (b == NULL) return;
    mcdc_free(b->words);
    memset(b, 0, sizeof *b);
}

bool silver_value_eq(const mcdc_column *a, int64_t ra, const mcdc_column *b, int64_t rb) {
    bool va = mcdc_col_is_valid(a, ra), vb = mcdc_col_is_valid(b, rb);
    if (va != vb) return false;
    if (!va) return true; /* NULL equals NULL: an image's cells, compared as values */
    MCDC_ASSERT(a->field->type == b->field->type);
    if (a->offsets) {
        int32_t la = a->offsets[ra + 1] - a->offsets[ra], lb = b->offsets[rb + 1] - b->offsets[rb];
        return la == lb && (la == 0 || memcmp(a->data + a->offsets[ra], b->data + b->offsets[rb],
                                              (size_t)la) == 0); /* empty: data may be NULL */
    }
    if (a->field->type == MCDC_TYPE_BOOL)
        return ((a->values[ra >> 3] >> (ra & 7)) & 1) == ((b->values[rb >> 3] >> (rb & 7)) & 1);
    int32_t w = mcdc_type_width(a->field);
    MCDC_ASSERT(w > 0 && w == mcdc_type_width(b->field));
    return memcmp(a->values + ra * w, b->values + rb * w, (size_t)w) == 0;
}
