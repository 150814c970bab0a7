/* test_batch_frame.c - raw frames of a batch's columns (src/batch/mcdc_batch_frame.h):
 * every type round trips, NULLs, empty texts and no rows included; frames
 * cut short, with a wrong checksum, or with lengths that do not add up are
 * refused as corrupt, saying what is wrong. */
#include <stdlib.h>
#include <string.h>

#include "mcdc_batch_frame.h"
#include "mcdc_test.h"

enum { N_COLS = 15 };

/* One column of every type, all nullable but the last. */
static mcdc_schema *every_type(void) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, N_COLS, &e);
    mcdc_schema_set(s, 0, "b", MCDC_TYPE_BOOL, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "i8", MCDC_TYPE_INT8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "i16", MCDC_TYPE_INT16, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 3, "i32", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 4, "i64", MCDC_TYPE_INT64, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 5, "f", MCDC_TYPE_FLOAT, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 6, "d", MCDC_TYPE_DOUBLE, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 7, "dec", MCDC_TYPE_DECIMAL, 38, 4, 0, true, &e);
    mcdc_schema_set(s, 8, "u", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 9, "bin", MCDC_TYPE_BINARY, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 10, "fix", MCDC_TYPE_FIXED_BINARY, 0, 0, 5, true, &e);
    mcdc_schema_set(s, 11, "day", MCDC_TYPE_DATE32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 12, "ntz", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 13, "utc", MCDC_TYPE_TIMESTAMP_UTC, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 14, "key", MCDC_TYPE_UTF8, 0, 0, 0, false, &e);
    return s;
}

/* rows rows: column c is NULL where (r + c) % 5 == 0 (the NOT NULL one
 * never; column 13 always, column 12 never), texts empty where r % 4 == 1. */
static mcdc_batch *sample(mcdc_schema *s, int rows) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *b;
    mcdc_batch_create(&b, s, rows, &e);
    for (int r = 0; r < rows; r++) {
        char t[32];
        int tl = r % 4 == 1 ? 0 : snprintf(t, sizeof t, "v%d-%s", r, r % 3 ? "xyz" : "");
        for (int c = 0; c < N_COLS; c++) {
            mcdc_column *col = &b->columns[c];
            bool null = c == 13 || (c != 12 && c != 14 && (r + c) % 5 == 0);
            if (null) {
                mcdc_col_append_null(col, &e);
                continue;
            }
            switch (c) {
            case 0: mcdc_col_append_bool(col, r % 3 == 0, &e); break;
            case 5: case 6: mcdc_col_append_double(col, r * 0.5 - 3, &e); break;
            case 7: mcdc_col_append_decimal(col, (uint64_t)r * 977, r % 2 ? -1 : 0, &e); break;
            case 8: case 9: case 14: mcdc_col_append_bytes(col, t, tl, &e); break;
            case 10: mcdc_col_append_bytes(col, "abcde", 5, &e); col->values[(int64_t)r * 5] = (uint8_t)r; break;
            case 1: mcdc_col_append_int(col, r % 100 - 50, &e); break;
            case 2: mcdc_col_append_int(col, r * 7 % 30000 - 15000, &e); break;
            default: mcdc_col_append_int(col, (int64_t)r * 1000 - 7, &e); break;
            }
        }
    }
    mcdc_batch_seal(b, &e);
    return b;
}

/* Cell by cell, b's rows against a's from row0 on: validity, then the
 * value's bytes (bool: its bit). */
static int64_t differences_at(const mcdc_batch *a, int64_t row0, const mcdc_batch *b) {
    int64_t bad = row0 + b->rows > a->rows;
    for (int32_t c = 0; !bad && c < a->schema->n_fields; c++) {
        const mcdc_column *x = &a->columns[c], *y = &b->columns[c];
        int32_t w = mcdc_type_width(x->field);
        int64_t nulls = 0;
        for (int64_t r = 0; r < b->rows; r++) {
            int64_t q = row0 + r;
            bool v = mcdc_col_is_valid(x, q);
            nulls += !v;
            bad += v != mcdc_col_is_valid(y, r);
            if (!v) continue;
            if (x->field->type == MCDC_TYPE_BOOL)
                bad += ((x->values[q >> 3] >> (q & 7)) & 1) != ((y->values[r >> 3] >> (r & 7)) & 1);
            else if (w > 0)
                bad += memcmp(x->values + q * w, y->values + r * w, (size_t)w) != 0;
            else {
                int32_t l = x->offsets[q + 1] - x->offsets[q];
                bad += l != y->offsets[r + 1] - y->offsets[r] ||
                       memcmp(x->data + x->offsets[q], y->data + y->offsets[r], (size_t)l) != 0;
            }
        }
        bad += nulls != y->null_count;
    }
    return bad;
}

static int64_t differences(const mcdc_batch *a, const mcdc_batch *b) {
    return (a->rows != b->rows) + differences_at(a, 0, b);
}

/* Decodes the frame at p (n bytes, N_COLS columns) into a new batch of s. */
static int decode(mcdc_schema *s, const uint8_t *p, size_t n, mcdc_batch **out, mcdc_error *e) {
    *out = NULL;
    size_t hb = mcdc_frame_head_bytes(N_COLS);
    if (n < hb) return MCDC_E_CORRUPT;
    int64_t rows, body;
    int rc = mcdc_frame_head(p, N_COLS, &rows, &body, e);
    if (rc) return rc;
    mcdc_batch *b;
    if ((rc = mcdc_batch_create(&b, s, rows, e)) != MCDC_OK) return rc;
    rc = mcdc_frame_decode(b, 0, N_COLS, p, p + hb, n - hb, e);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, e);
    if (rc == MCDC_OK) rc = mcdc_batch_validate(b, e);
    if (rc) mcdc_batch_free(b);
    else *out = b;
    return rc;
}

static int to_buf(void *ctx, const void *p, size_t n, mcdc_error *err) {
    return mcdc_buf_append(ctx, p, n, err);
}

/* Rows [row0, row0 + n) of a batch as a frame (the sorter writes a large
 * batch as frames of its reader's size): they read back as those rows,
 * NULL counts and offsets of the slice's own. */
TEST(batch_frame_writes_a_slice_of_rows) {
    mcdc_schema *s = every_type();
    mcdc_batch *a = sample(s, 1000);
    static const int64_t SLICES[][2] = {{0, 0}, {0, 13}, {8, 1}, {16, 8}, {992, 8}, {40, 960}, {504, 0}};
    for (size_t k = 0; k < sizeof SLICES / sizeof SLICES[0]; k++) {
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_buf f = {0};
        CHECK_EQ_INT(mcdc_frame_write(a, 0, N_COLS, SLICES[k][0], SLICES[k][1], to_buf, &f, &e), MCDC_OK);
        mcdc_batch *b = NULL;
        CHECK_EQ_INT(decode(s, f.data, f.len, &b, &e), MCDC_OK);
        if (b) {
            CHECK_EQ_INT(b->rows, SLICES[k][1]);
            CHECK_EQ_INT(differences_at(a, SLICES[k][0], b), 0);
        }
        mcdc_buf_free(&f);
        mcdc_batch_free(b);
    }
    mcdc_batch_free(a);
    mcdc_schema_unref(s);
}

TEST(batch_frame_round_trips_every_type_with_nulls_and_empty_texts) {
    mcdc_schema *s = every_type();
    static const int ROWS[] = {0, 1, 7, 8, 9, 1000};
    for (size_t k = 0; k < sizeof ROWS / sizeof ROWS[0]; k++) {
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_batch *a = sample(s, ROWS[k]), *b = NULL;
        mcdc_buf f = {0}, g = {0};
        CHECK_EQ_INT(mcdc_frame_append(&f, a, 0, N_COLS, &e), MCDC_OK);
        int64_t rows = -1, body = -1;
        CHECK_EQ_INT(mcdc_frame_head(f.data, N_COLS, &rows, &body, &e), MCDC_OK);
        CHECK_EQ_INT(rows, ROWS[k]);
        CHECK_EQ_INT((size_t)body + mcdc_frame_head_bytes(N_COLS), f.len);
        int rc = decode(s, f.data, f.len, &b, &e);
        CHECK_EQ_INT(rc, MCDC_OK);
        if (rc) fprintf(stderr, "  %d rows: %s\n", ROWS[k], e.message);
        if (b) {
            CHECK_EQ_INT(differences(a, b), 0);
            CHECK_EQ_INT(b->columns[13].null_count, ROWS[k]); /* all NULL */
            CHECK(b->columns[12].null_count == 0 && b->columns[12].validity == NULL);
            /* what was read writes the same bytes */
            CHECK_EQ_INT(mcdc_frame_append(&g, b, 0, N_COLS, &e), MCDC_OK);
            CHECK(g.len == f.len && memcmp(g.data, f.data, f.len) == 0);
            /* and takes appends as a batch built by appends does */
            CHECK_EQ_INT(mcdc_col_append_bool(&b->columns[0], true, &e), MCDC_OK);
            CHECK(mcdc_col_is_valid(&b->columns[0], ROWS[k]));
            CHECK((b->columns[0].values[ROWS[k] >> 3] >> (ROWS[k] & 7)) & 1);
        }
        mcdc_buf_free(&f);
        mcdc_buf_free(&g);
        mcdc_batch_free(a);
        mcdc_batch_free(b);
    }
    mcdc_schema_unref(s);
}

/* A part of a batch's columns as a frame, decoded at another place of a
 * wider batch (the sorter's keys after its rows). */
TEST(batch_frame_decodes_a_slice_of_columns_into_a_wider_batch) {
    mcdc_schema *s = every_type();
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *a = sample(s, 300), *b;
    mcdc_buf f = {0};
    CHECK_EQ_INT(mcdc_frame_append(&f, a, 8, 3, &e), MCDC_OK); /* u, bin, fix */
    size_t hb = mcdc_frame_head_bytes(3);
    mcdc_batch_create(&b, s, 300, &e);
    CHECK_EQ_INT(mcdc_frame_decode(b, 8, 3, f.data, f.data + hb, f.len - hb, &e), MCDC_OK);
    int64_t bad = 0;
    for (int c = 8; c < 11; c++) {
        mcdc_buf x = {0}, y = {0};
        mcdc_frame_append(&x, a, c, 1, &e);
        mcdc_frame_append(&y, b, c, 1, &e);
        bad += x.len != y.len || memcmp(x.data, y.data, x.len) != 0;
        mcdc_buf_free(&x);
        mcdc_buf_free(&y);
    }
    CHECK_EQ_INT(bad, 0);
    /* the frame's columns must be where it is decoded */
    mcdc_batch *c;
    mcdc_batch_create(&c, s, 300, &e);
    CHECK_EQ_INT(mcdc_frame_decode(c, 7, 3, f.data, f.data + hb, f.len - hb, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "'dec'") && strstr(e.message, "type"));
    mcdc_batch_free(c);
    /* and into empty columns only */
    e = (mcdc_error)MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_frame_decode(b, 8, 3, f.data, f.data + hb, f.len - hb, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "not empty") != NULL);
    mcdc_buf_free(&f);
    mcdc_batch_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

/* ---- corrupt frames ---------------------------------------------------------- */

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Adds delta to column c's data bytes in the directory. */
static void add_data(uint8_t *p, int c, int delta) {
    wr32(p + 32 + 24 * c + 16, (uint32_t)((int64_t)rd32(p + 32 + 24 * c + 16) + delta));
}

/* Recomputes both checksums of a frame of N_COLS columns of n bytes (a
 * change that should be caught by what it breaks, not by a checksum). */
static void fix_crcs(uint8_t *p, size_t n) {
    size_t hb = mcdc_frame_head_bytes(N_COLS);
    wr32(p + 24, mcdc_frame_crc(0, p + hb, (size_t)(n - hb)));
    uint32_t c = mcdc_frame_crc(0, p, 28);
    wr32(p + 28, mcdc_frame_crc(c, p + 32, (size_t)(hb - 32)));
}

/* The body offset of column c's buffers in the frame (from its directory). */
static size_t col_at(const uint8_t *p, int64_t rows, int c) {
    size_t at = mcdc_frame_head_bytes(N_COLS);
    for (int i = 0; i < c; i++) {
        const uint8_t *d = p + 32 + 24 * i;
        mcdc_field f = {.type = (mcdc_type_id)d[0], .byte_width = (int32_t)rd32(d + 4)};
        if (f.type == MCDC_TYPE_DECIMAL) f.precision = 38;
        int64_t w = mcdc_type_width(&f);
        bool var = f.type == MCDC_TYPE_UTF8 || f.type == MCDC_TYPE_BINARY;
        at += (d[1] & 1 ? (size_t)(rows + 7) / 8 : 0) +
              (size_t)(var ? (rows + 1) * 4 : f.type == MCDC_TYPE_BOOL ? (rows + 7) / 8 : w * rows) +
              (size_t)rd32(d + 16);
    }
    return at;
}

/* Decodes a damaged copy of a good frame: MCDC_E_CORRUPT whose message
 * holds want. */
static void refused(mcdc_schema *s, const uint8_t *p, size_t n, const char *want) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *b = NULL;
    int rc = decode(s, p, n, &b, &e);
    CHECK_EQ_INT(rc, MCDC_E_CORRUPT);
    CHECK(b == NULL);
    CHECK(strstr(e.message, want) != NULL);
    if (strstr(e.message, want) == NULL) fprintf(stderr, "  want '%s' in: %s\n", want, e.message);
    mcdc_batch_free(b);
}

TEST(batch_frame_refuses_corrupt_frames) {
    mcdc_schema *s = every_type();
    mcdc_error e = MCDC_ERROR_INIT;
    enum { ROWS = 100 };
    mcdc_batch *a = sample(s, ROWS);
    mcdc_buf f = {0};
    CHECK_EQ_INT(mcdc_frame_append(&f, a, 0, N_COLS, &e), MCDC_OK);
    size_t n = f.len, hb = mcdc_frame_head_bytes(N_COLS);
    uint8_t *p = malloc(n);
    const uint8_t *good = f.data;
#define DAMAGE(change, want)   \
    do {                       \
        memcpy(p, good, n);    \
        change;                \
        refused(s, p, n, want); \
    } while (0)
    size_t u = col_at(good, ROWS, 8); /* the utf8 column's bitmap, then offsets */
    size_t uoff = u + (size_t)(ROWS + 7) / 8;
    /* cut short, anywhere in the body, or with a byte more */
    for (size_t cut = hb; cut < n; cut += 97) {
        mcdc_batch *b = NULL;
        mcdc_error e2 = MCDC_ERROR_INIT;
        CHECK_EQ_INT(decode(s, good, cut, &b, &e2), MCDC_E_CORRUPT);
        CHECK(b == NULL && strstr(e2.message, "bytes where the head says") != NULL);
    }
    memcpy(p, good, n); /* the harness itself: an intact copy is read */
    mcdc_batch *ok = NULL;
    CHECK_EQ_INT(decode(s, p, n, &ok, &e), MCDC_OK);
    mcdc_batch_free(ok);
    DAMAGE(p[n - 1] ^= 1, "body's checksum");
    DAMAGE(p[hb + 10] ^= 0x80, "body's checksum");
    DAMAGE(p[12] ^= 1, "head's checksum");          /* rows */
    DAMAGE(p[32 + 24 * 3 + 8] ^= 1, "head's checksum"); /* a NULL count */
    DAMAGE(p[0] = 'X', "bad magic");
    DAMAGE((p[4] = 2, fix_crcs(p, n)), "version 2");
    DAMAGE((p[8] = 3, fix_crcs(p, n)), "3 columns");
    DAMAGE((wr32(p + 12, (1u << 20) + 1), fix_crcs(p, n)), "more than");
    /* lengths that do not add up, with checksums that match them */
    DAMAGE((wr32(p + 12, ROWS + 1), fix_crcs(p, n)), "frame");
    DAMAGE((wr32(p + 12, ROWS - 8), fix_crcs(p, n)), "frame");
    DAMAGE((add_data(p, 8, 1), fix_crcs(p, n)), "do not fill its body");
    DAMAGE((add_data(p, 8, 1), add_data(p, 9, -1), fix_crcs(p, n)), "last offset");
    DAMAGE((wr32(p + 32 + 24 * 9 + 16, 1u << 30), fix_crcs(p, n)), "more data than the body");
    DAMAGE((add_data(p, 3, 4), add_data(p, 9, -4), fix_crcs(p, n)), "fixed-width");
    DAMAGE((p[32 + 24 * 2] = 99, fix_crcs(p, n)), "no type");
    DAMAGE((wr32(p + uoff + 4 * 10, 1u << 31), fix_crcs(p, n)), "offsets decrease");
    DAMAGE((wr32(p + uoff, 1), fix_crcs(p, n)), "first offset");
    DAMAGE((p[u] ^= 0x04, fix_crcs(p, n)), "bitmap's NULLs"); /* row 2 of u: NULL to valid */
    DAMAGE((wr32(p + 32 + 24 * 8 + 8, ROWS + 1), fix_crcs(p, n)), "NULL count");
    /* NULLs without a bitmap (its bytes counted as data, so that the sizes add up) */
    DAMAGE((p[32 + 24 * 8 + 1] = 0, add_data(p, 8, (ROWS + 7) / 8), fix_crcs(p, n)), "NULL count");
    DAMAGE((p[32 + 24 * 8 + 1] = 3, fix_crcs(p, n)), "unknown flags");
    DAMAGE((p[32 + 24 * 10 + 4] = 6, add_data(p, 14, -ROWS), fix_crcs(p, n)), "type"); /* width 6 */
    DAMAGE((p[32 + 24 * 4] = MCDC_TYPE_DOUBLE, fix_crcs(p, n)), "'i64'");
#undef DAMAGE
    /* NULLs in the NOT NULL column: written from a batch whose last column
     * is nullable, read as the schema says */
    mcdc_schema *s2;
    mcdc_schema_create(&s2, N_COLS, &e);
    for (int c = 0; c < N_COLS; c++) {
        const mcdc_field *fl = &s->fields[c];
        mcdc_schema_set(s2, c, fl->name, fl->type, fl->precision, fl->scale, fl->byte_width, true, &e);
    }
    mcdc_batch *b2;
    mcdc_batch_create(&b2, s2, 4, &e);
    for (int c = 0; c < N_COLS; c++) mcdc_col_append_null(&b2->columns[c], &e);
    mcdc_batch_seal(b2, &e);
    mcdc_buf f2 = {0};
    CHECK_EQ_INT(mcdc_frame_append(&f2, b2, 0, N_COLS, &e), MCDC_OK);
    refused(s, f2.data, f2.len, "NOT NULL");
    mcdc_buf_free(&f2);
    mcdc_batch_free(b2);
    mcdc_schema_unref(s2);
    free(p);
    mcdc_buf_free(&f);
    mcdc_batch_free(a);
    mcdc_schema_unref(s);
}

/* The frames' checksum is CRC-32C: its check value, and the same result
 * whether the bytes come in one call or in pieces of every split (the
 * hardware path's 8-byte steps and its byte tail). */
TEST(batch_frame_crc_is_crc32c_in_any_pieces) {
    const char *check = "123456789";
    CHECK_EQ_INT(mcdc_frame_crc(0, check, 9), 0xE3069283u);
    CHECK_EQ_INT(mcdc_frame_crc(0, "", 0), 0);
    uint8_t buf[67];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 37 + 11);
    uint32_t whole = mcdc_frame_crc(0, buf, sizeof buf);
    for (size_t cut = 0; cut <= sizeof buf; cut++)
        CHECK_EQ_INT(mcdc_frame_crc(mcdc_frame_crc(0, buf, cut), buf + cut, sizeof buf - cut), whole);
    buf[40] ^= 1; /* one bit off, another checksum */
    CHECK(mcdc_frame_crc(0, buf, sizeof buf) != whole);
}
