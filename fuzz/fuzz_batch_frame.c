/* fuzz_batch_frame.c - raw batch frames (mcdc_batch_frame.h) over
 * arbitrary bytes: the head check and the decoder never crash or leak; a
 * refusal is MCDC_E_CORRUPT (or MCDC_E_NOMEM) with a message; a frame they
 * accept is a valid batch (mcdc_batch_validate), which writes a frame of
 * the same length that reads back to the same bytes again.
 *
 * Input: bytes 0 and 1 pick the columns (how many, from which, of a schema
 * of every type whose last is NOT NULL) and whether the checksums are fixed
 * first (byte 0 odd: so that the fuzzer reaches past them); then frames, one after another, as a
 * sorter's run holds them. Run by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_batch_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { ALL = 15 };

static const struct {
    const char *name;
    mcdc_type_id type;
    int32_t precision, scale, width;
} FIELDS[ALL] = {
    {"b", MCDC_TYPE_BOOL, 0, 0, 0},          {"i8", MCDC_TYPE_INT8, 0, 0, 0},
    {"i16", MCDC_TYPE_INT16, 0, 0, 0},       {"i32", MCDC_TYPE_INT32, 0, 0, 0},
    {"i64", MCDC_TYPE_INT64, 0, 0, 0},       {"f", MCDC_TYPE_FLOAT, 0, 0, 0},
    {"d", MCDC_TYPE_DOUBLE, 0, 0, 0},        {"dec", MCDC_TYPE_DECIMAL, 38, 4, 0},
    {"u", MCDC_TYPE_UTF8, 0, 0, 0},          {"bin", MCDC_TYPE_BINARY, 0, 0, 0},
    {"fix", MCDC_TYPE_FIXED_BINARY, 0, 0, 5}, {"day", MCDC_TYPE_DATE32, 0, 0, 0},
    {"ntz", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0}, {"utc", MCDC_TYPE_TIMESTAMP_UTC, 0, 0, 0},
    {"key", MCDC_TYPE_BINARY, 0, 0, 0},
};

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void check_refusal(int rc, const mcdc_error *e) {
    if ((rc != MCDC_E_CORRUPT && rc != MCDC_E_NOMEM) || e->code != rc || e->message[0] == 0)
        abort();
}

/* A frame the decoder accepted: it writes back, and what it writes reads
 * back to itself. */
static void round_trip(mcdc_schema *s, const mcdc_batch *b, size_t frame_len) {
    mcdc_error e = MCDC_ERROR_INIT;
    int32_t n = s->n_fields;
    size_t hb = mcdc_frame_head_bytes(n);
    mcdc_buf g = {0}, g2 = {0};
    if (mcdc_frame_append(&g, b, 0, n, &e) != MCDC_OK) abort();
    if (g.len != frame_len) abort();
    mcdc_batch *b2 = NULL;
    if (mcdc_batch_create(&b2, s, b->rows, &e) != MCDC_OK) abort();
    if (mcdc_frame_decode(b2, 0, n, g.data, g.data + hb, g.len - hb, &e) != MCDC_OK) abort();
    if (mcdc_batch_seal(b2, &e) != MCDC_OK || b2->rows != b->rows) abort();
    if (mcdc_frame_append(&g2, b2, 0, n, &e) != MCDC_OK) abort();
    if (g2.len != g.len || memcmp(g2.data, g.data, g.len) != 0) abort();
    mcdc_batch_free(b2);
    mcdc_buf_free(&g);
    mcdc_buf_free(&g2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    bool fix = data[0] & 1;
    int32_t n_cols = 1 + (data[0] >> 1) % ALL;
    int32_t first = data[1] % (ALL - n_cols + 1);
    data += 2;
    size -= 2;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s = NULL;
    if (mcdc_schema_create(&s, n_cols, &e) != MCDC_OK) return 0;
    for (int32_t i = 0; i < n_cols; i++) {
        int32_t k = first + i;
        if (mcdc_schema_set(s, i, FIELDS[k].name, FIELDS[k].type, FIELDS[k].precision,
                            FIELDS[k].scale, FIELDS[k].width, k != ALL - 1, &e) != MCDC_OK)
            abort();
    }
    uint8_t *p = malloc(size ? size : 1);
    if (p == NULL) abort();
    memcpy(p, data, size);
    size_t hb = mcdc_frame_head_bytes(n_cols), at = 0;
    while (size - at >= hb) {
        uint8_t *f = p + at;
        size_t left = size - at - hb;
        if (fix) {
            uint64_t body = 0;
            for (int i = 7; i >= 0; i--) body = body << 8 | f[16 + i];
            if (body > left) body = left;
            put32(f + 24, mcdc_frame_crc(0, f + hb, (size_t)body));
            put32(f + 28, mcdc_frame_crc(mcdc_frame_crc(0, f, 28), f + 32, (size_t)(hb - 32)));
        }
        int64_t rows = 0, body = 0;
        mcdc_error_clear(&e);
        int rc = mcdc_frame_head(f, n_cols, &rows, &body, &e);
        if (rc == MCDC_OK && (uint64_t)body > left) break; /* a reader stops here: truncated */
        if (rc != MCDC_OK) {
            check_refusal(rc, &e);
            break;
        }
        mcdc_batch *b = NULL;
        if (mcdc_batch_create(&b, s, rows, &e) != MCDC_OK) abort();
        rc = mcdc_frame_decode(b, 0, n_cols, f, f + hb, (size_t)body, &e);
        if (rc == MCDC_OK) {
            if (mcdc_batch_seal(b, &e) != MCDC_OK || b->rows != rows) abort();
            if (mcdc_batch_validate(b, &e) != MCDC_OK) abort();
            round_trip(s, b, hb + (size_t)body);
        } else {
            check_refusal(rc, &e);
        }
        mcdc_batch_free(b);
        if (rc != MCDC_OK) break;
        at += hb + (size_t)body;
    }
    free(p);
    mcdc_schema_unref(s);
    return 0;
}
