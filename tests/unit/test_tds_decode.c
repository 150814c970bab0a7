/* test_tds_decode.c - the decoder's text and value converters (word-at-a-time
 * fast paths) against simple per-unit reference conversions written here:
 * every length 0..64 (UTF-16: on the SSSE3 and the SSE2 paths), a non-ASCII
 * unit at every position, surrogate pairs
 * (also split across the 4-unit blocks), lone surrogates at every position,
 * every CP1252 byte 0x80-0xFF, values packed back to back in one column
 * buffer, NULLs between them; uniqueidentifier, decimal and datetime2. */
#include <stdio.h>
#include <string.h>

#include "mcdc_lsn.h" /* mcdc_u128 */
#include "mcdc_tds_proto.h"
#include "mcdc_test.h"

/* ---- reference conversions (one unit at a time, no tricks) ------------------- */
static size_t ref_put(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | (cp >> 6)); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
static size_t ref_utf16(uint8_t *o, const uint16_t *u, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = u[i];
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < n && u[i + 1] >= 0xDC00 && u[i + 1] <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (u[i + 1] - 0xDC00u);
            i++;
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            cp = 0xFFFD;
        }
        k += ref_put(o + k, cp);
    }
    return k;
}
static size_t ref_cp1252(uint8_t *o, const uint8_t *b, size_t n) {
    /* Windows-1252 0x80-0x9F, spelt out again; undefined bytes stay C1 */
    static const uint16_t HI[32] = {
        0x20AC, 0x81, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
        0x2039, 0x0152, 0x8D, 0x017D, 0x8F, 0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
        0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D, 0x017E, 0x0178};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ref_put(o + k, b[i] >= 0x80 && b[i] < 0xA0 ? HI[b[i] - 0x80] : b[i]);
    return k;
}

/* ---- a bound column and its converter ------------------------------------------- */
typedef struct {
    mcdc_schema *schema;
    mcdc_batch *batch;
    mcdc_tds_meta meta;
    mcdc_tds_col col;
} conv_fixture;

static bool fixture_open(conv_fixture *f, uint8_t tds_type, uint32_t max_len, uint8_t precision,
                         uint8_t scale, mcdc_type_id target, int32_t tp, int32_t ts) {
    memset(f, 0, sizeof *f);
    mcdc_error e = MCDC_ERROR_INIT;
    static const uint8_t LATIN1[5] = {0x09, 0x04, 0xD0, 0x00, 0x34}; /* CP1252 */
    f->col.type = tds_type;
    f->col.wire = TDS_WIRE_USHORTLEN;
    f->col.max_len = max_len;
    f->col.precision = precision;
    f->col.scale = scale;
    memcpy(f->col.collation, LATIN1, 5);
    f->col.utf16 = tds_type == TDS_NVARCHAR;
    f->col.nullable = true;
    f->col.nat_type = target;
    f->meta.ncols = 1;
    f->meta.cols = &f->col;
    if (mcdc_schema_create(&f->schema, 1, &e) ||
        mcdc_schema_set(f->schema, 0, "v", target, tp, ts, 0, true, &e) ||
        mcdc_tds_bind(&f->meta, f->schema->fields, &e) ||
        mcdc_batch_create(&f->batch, f->schema, 8, &e)) {
        fprintf(stderr, "fixture: %s\n", e.message);
        return false;
    }
    return f->col.conv != NULL;
}
static void fixture_close(conv_fixture *f) {
    mcdc_batch_free(f->batch);
    mcdc_schema_unref(f->schema);
}
/* One value through the bound converter (the row reserved first, as the
 * fetch loop does for the whole batch). */
static int conv(conv_fixture *f, const void *p, uint32_t len) {
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_col_reserve(&f->batch->columns[0], 1, 0, &e) != MCDC_OK) return e.code;
    return f->col.conv(&f->batch->columns[0], p, len, &f->col, &e);
}
/* Text of the column's last value equals want (n bytes). */
static bool last_is(const conv_fixture *f, const uint8_t *want, size_t n) {
    const mcdc_column *c = &f->batch->columns[0];
    int64_t i = c->length - 1;
    size_t got = (size_t)(c->offsets[i + 1] - c->offsets[i]);
    if (got == n && (n == 0 || memcmp(c->data + c->offsets[i], want, n) == 0)) return true;
    fprintf(stderr, "value %lld: %zu bytes, want %zu: '%.*s' vs '%.*s'\n", (long long)i, got, n,
            (int)got, (const char *)c->data + c->offsets[i], (int)n, (const char *)want);
    return false;
}

/* Converts units (host order) as UTF-16LE into f and compares with the
 * reference; returns 1 on a mismatch, or when the converter wrote past
 * the room it reserves (3 bytes a unit and 4 more: its block stores may
 * write ahead of the value's end, never past that). */
static int check_utf16(conv_fixture *f, const uint16_t *u, size_t n) {
    uint8_t wire[256], want[1024];
    for (size_t i = 0; i < n; i++) { wire[2 * i] = (uint8_t)u[i]; wire[2 * i + 1] = (uint8_t)(u[i] >> 8); }
    size_t k = ref_utf16(want, u, n);
    mcdc_column *c = &f->batch->columns[0];
    mcdc_error e = MCDC_ERROR_INIT;
    enum { GUARD = 32 };
    size_t room = 3 * n + 4;
    if (mcdc_col_reserve(c, 1, (int64_t)(room + GUARD), &e) != MCDC_OK) return 1;
    uint8_t *start = c->data + c->data_len;
    memset(start + room, 0xA5, GUARD);
    if (conv(f, wire, (uint32_t)(2 * n)) != MCDC_OK) return 1;
    for (size_t i = 0; i < GUARD; i++)
        if (start[room + i] != 0xA5) {
            fprintf(stderr, "%zu units: a byte written %zu past the room\n", n, i);
            return 1;
        }
    return last_is(f, want, k) ? 0 : 1;
}

TEST(tds_decode_utf16_fast_paths_match_reference) {
    conv_fixture f;
    CHECK(fixture_open(&f, TDS_NVARCHAR, 200, 0, 0, MCDC_TYPE_UTF8, 0, 0));
    for (int path = 0; path < 2; path++) {
        if (path == 0) CHECK_EQ_INT(f.col.ssse3, __builtin_cpu_supports("ssse3") != 0);
        if (path == 1) f.col.ssse3 = false; /* the SSE2 path on an SSSE3 host */
        /* Characters of each UTF-8 length, and the edges of each range. */
        static const uint16_t ODD[] = {0x00, 0x7F, 0x80, 0xE9, 0x7FF, 0x800, 0x65E5, 0xD7FF,
                                       0xE000, 0xFFFD, 0xFFFF, 0xFF80, 0x0100};
        int bad = 0, cases = 0;
        for (size_t n = 0; n <= 64; n++) {
            uint16_t u[64] = {0};
            for (size_t i = 0; i < n; i++) u[i] = (uint16_t)('a' + i % 26);
            bad += check_utf16(&f, u, n), cases++; /* all ASCII */
            for (size_t at = 0; at < n; at++) {
                for (size_t k = 0; k < sizeof ODD / sizeof ODD[0]; k++) {
                    u[at] = ODD[k];
                    bad += check_utf16(&f, u, n), cases++;
                }
                u[at] = 0xD800; /* lone high surrogate */
                bad += check_utf16(&f, u, n), cases++;
                u[at] = 0xDFFF; /* lone low surrogate */
                bad += check_utf16(&f, u, n), cases++;
                if (at + 1 < n) { /* a pair (U+1F600) straddling every block offset */
                    u[at] = 0xD83D;
                    u[at + 1] = 0xDE00;
                    bad += check_utf16(&f, u, n), cases++;
                    u[at] = 0xDE00; /* reversed: two lone surrogates */
                    u[at + 1] = 0xD83D;
                    bad += check_utf16(&f, u, n), cases++;
                    u[at + 1] = (uint16_t)('a' + (at + 1) % 26);
                }
                u[at] = (uint16_t)('a' + at % 26);
            }
            /* all non-ASCII, mixed widths */
            for (size_t i = 0; i < n; i++) u[i] = ODD[(i * 7 + n) % (sizeof ODD / sizeof ODD[0])];
            bad += check_utf16(&f, u, n), cases++;
            /* all 3 bytes: the stores reach furthest */
            for (size_t i = 0; i < n; i++) u[i] = (uint16_t)(0x65E5 + i);
            bad += check_utf16(&f, u, n), cases++;
        }
        CHECK_EQ_INT(bad, 0);
        CHECK(cases > 5000);
    }
    /* Packed back to back, NULLs between: offsets and earlier values intact. */
    mcdc_column *c = &f.batch->columns[0];
    int64_t first = c->length;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_col_append_null(c, &e), MCDC_OK);
    static const uint16_t A[] = {'Z', 'o', 0xEB, 0xD83D, 0xDE00, 0xD800, 'x'};
    CHECK_EQ_INT(check_utf16(&f, A, 7), 0);
    CHECK_EQ_INT(mcdc_col_append_null(c, &e), MCDC_OK);
    CHECK_EQ_INT(check_utf16(&f, A, 3), 0);
    CHECK(!mcdc_col_is_valid(c, first) && !mcdc_col_is_valid(c, first + 2));
    CHECK_EQ_INT(c->offsets[first + 2] - c->offsets[first + 1],
                 (int32_t)strlen("Zo\xc3\xab\xf0\x9f\x98\x80\xef\xbf\xbdx"));
    CHECK(memcmp(c->data + c->offsets[first + 1], "Zo\xc3\xab\xf0\x9f\x98\x80\xef\xbf\xbdx", 12) == 0);
    CHECK_EQ_INT(c->offsets[first + 3], c->offsets[first + 2]);
    /* An odd byte count is a protocol error, not a value. */
    CHECK_EQ_INT(conv(&f, "abc", 3), MCDC_E_PROTOCOL);
    fixture_close(&f);
}

/* The 8-unit blocks (SSE2) and the overlapping last block: every length
 * 0..40 with 2-byte, 3-byte and ASCII units mixed at every offset, a few
 * non-ASCII units per block, surrogate pairs and lone surrogates at the
 * block boundaries (units 7/8, 15/16, the last 8). */
TEST(tds_decode_utf16_blocks_match_reference) {
    conv_fixture f;
    CHECK(fixture_open(&f, TDS_NVARCHAR, 200, 0, 0, MCDC_TYPE_UTF8, 0, 0));
    for (int path = 0; path < 2; path++) {
        if (path == 1) f.col.ssse3 = false; /* the SSE2 path on an SSSE3 host */
        static const uint16_t MIX[] = {'a', 0xEB, 0x6771, 'Z', 0x3A9, 0xFFEF, 0x7F, 0x80, 0x7FF, 0x800};
        enum { NMIX = sizeof MIX / sizeof MIX[0] };
        static const uint16_t SUR[][2] = {{0xD83D, 0xDE00}, {0xDBFF, 0xDFFF}, {0xD800, 'x'},
                                          {0xDC00, 'x'}, {'x', 0xD800}, {0xDE00, 0xD83D}};
        int bad = 0, cases = 0;
        uint32_t rnd = 12345;
        for (size_t n = 0; n <= 64; n++) {
            uint16_t u[64] = {0};
            for (size_t shift = 0; shift < NMIX; shift++) { /* every unit non-ASCII-ish, rotating */
                for (size_t i = 0; i < n; i++) u[i] = MIX[(i + shift) % NMIX];
                bad += check_utf16(&f, u, n), cases++;
            }
            for (size_t at = 0; at < n; at++) { /* ASCII but for two units at and at+3 */
                for (size_t k = 1; k < NMIX; k++) {
                    for (size_t i = 0; i < n; i++) u[i] = (uint16_t)('A' + i % 26);
                    u[at] = MIX[k];
                    if (at + 3 < n) u[at + 3] = MIX[(k + 1) % NMIX];
                    bad += check_utf16(&f, u, n), cases++;
                }
            }
            for (size_t s = 0; s < sizeof SUR / sizeof SUR[0]; s++) {
                static const size_t AT[] = {0,  6,  7,  8,  14, 15, 16, 23, 24, 31,
                                               32, 38, 39, 47, 48, 55, 56, 62, 63};
                for (size_t j = 0; j < sizeof AT / sizeof AT[0]; j++) {
                    size_t at = AT[j];
                    if (at + 1 >= n) continue;
                    for (size_t i = 0; i < n; i++) u[i] = MIX[(i * 3 + n) % NMIX];
                    u[at] = SUR[s][0];
                    u[at + 1] = SUR[s][1];
                    bad += check_utf16(&f, u, n), cases++;
                    if (n >= 8) { /* and in the last 8 units */
                        u[n - 1 - at % 8] = 0xDC01;
                        bad += check_utf16(&f, u, n), cases++;
                    }
                }
            }
            for (int r = 0; r < 20; r++) { /* random units, surrogates 1 in 8 */
                for (size_t i = 0; i < n; i++) {
                    rnd = rnd * 1103515245u + 12345u;
                    uint32_t x = rnd >> 8;
                    u[i] = (x & 7) == 0 ? (uint16_t)(0xD800 + (x >> 3) % 0x800)
                                        : MIX[(x >> 3) % NMIX];
                }
                bad += check_utf16(&f, u, n), cases++;
            }
        }
        CHECK_EQ_INT(bad, 0);
        CHECK(cases > 5000);
    }
    fixture_close(&f);
}

TEST(tds_decode_cp1252_fast_paths_match_reference) {
    conv_fixture f;
    CHECK(fixture_open(&f, TDS_BIGVARCHAR, 200, 0, 0, MCDC_TYPE_UTF8, 0, 0));
    int bad = 0, cases = 0;
    uint8_t b[64], want[256];
    for (size_t n = 0; n <= 40; n++) {
        for (size_t i = 0; i < n; i++) b[i] = (uint8_t)('A' + i % 26);
        size_t k = ref_cp1252(want, b, n);
        bad += conv(&f, b, (uint32_t)n) != MCDC_OK || !last_is(&f, want, k), cases++;
        for (size_t at = 0; at < n; at++) {
            for (unsigned v = 0x7F; v <= 0xFF; v += (v < 0xA1 ? 1 : 13)) {
                b[at] = (uint8_t)v;
                k = ref_cp1252(want, b, n);
                bad += conv(&f, b, (uint32_t)n) != MCDC_OK || !last_is(&f, want, k), cases++;
            }
            b[at] = (uint8_t)('A' + at % 26);
        }
    }
    for (unsigned v = 0; v < 256; v++) { /* every byte, alone and in a long run */
        uint8_t one = (uint8_t)v;
        size_t k = ref_cp1252(want, &one, 1);
        bad += conv(&f, &one, 1) != MCDC_OK || !last_is(&f, want, k), cases++;
        memset(b, (int)v, 33);
        k = ref_cp1252(want, b, 33);
        bad += conv(&f, b, 33) != MCDC_OK || !last_is(&f, want, k), cases++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(cases > 3000);
    /* spot check of the table: 0x80 is the euro sign, 0x81 stays U+0081 */
    CHECK_EQ_INT(conv(&f, "\x80\x81\x9f", 3), MCDC_OK);
    CHECK(last_is(&f, (const uint8_t *)"\xe2\x82\xac\xc2\x81\xc5\xb8", 7));
    fixture_close(&f);
}

TEST(tds_decode_guid_decimal_datetime2_values) {
    conv_fixture f;
    /* uniqueidentifier text on the SSSE3 path (when the CPU has it), then SSE2 */
    for (int path = 0; path < 2; path++) {
    CHECK(fixture_open(&f, TDS_GUID, 16, 0, 0, MCDC_TYPE_UTF8, 0, 0));
    if (path == 1) f.col.ssse3 = false;
    static const uint8_t G[16] = {0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66,
                                  0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF};
    CHECK_EQ_INT(conv(&f, G, 16), MCDC_OK);
    CHECK(last_is(&f, (const uint8_t *)"00112233-4455-6677-8899-AABBCCDDEEFF", 36));
    uint8_t all[16];
    for (int i = 0; i < 16; i++) all[i] = (uint8_t)(0xF0 + i);
    CHECK_EQ_INT(conv(&f, all, 16), MCDC_OK);
    CHECK(last_is(&f, (const uint8_t *)"F3F2F1F0-F5F4-F7F6-F8F9-FAFBFCFDFEFF", 36));
    /* every byte value at every position, against printf */
    int gbad = 0;
    for (int at = 0; at < 16; at++) {
        for (int v = 0; v < 256; v++) {
            uint8_t g[16];
            for (int i = 0; i < 16; i++) g[i] = (uint8_t)(i * 37 + v);
            g[at] = (uint8_t)v;
            char want[40];
            snprintf(want, sizeof want,
                     "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X", g[3],
                     g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12],
                     g[13], g[14], g[15]);
            gbad += conv(&f, g, 16) != MCDC_OK || !last_is(&f, (const uint8_t *)want, 36);
        }
    }
    CHECK_EQ_INT(gbad, 0);
    CHECK_EQ_INT(conv(&f, G, 15), MCDC_E_PROTOCOL);
    fixture_close(&f);
    }

    /* decimal: every wire width, both signs, to decimal(38,s) and rescaled */
    CHECK(fixture_open(&f, TDS_DECIMALN, 17, 38, 2, MCDC_TYPE_DECIMAL, 38, 4));
    static const struct { uint8_t len; uint8_t sign; uint64_t lo, hi; } D[] = {
        {5, 1, 123456789, 0}, {5, 0, 0xFFFFFFFFu, 0}, {9, 1, 0xFFFFFFFFFFFFFFFFull, 0},
        {9, 0, 1, 0}, {13, 1, 0x0123456789ABCDEFull, 0x42}, {17, 0, 7, 0x0000FFFFFFFFFFFFull},
        {3, 1, 0x1234, 0}, {2, 1, 0, 0}};
    mcdc_column *c = &f.batch->columns[0];
    for (size_t k = 0; k < sizeof D / sizeof D[0]; k++) {
        uint8_t w[17] = {D[k].sign};
        for (int i = 0; i < 8; i++) w[1 + i] = (uint8_t)(D[k].lo >> (8 * i));
        for (int i = 0; i < 8; i++) w[9 + i] = (uint8_t)(D[k].hi >> (8 * i));
        uint32_t len = D[k].len;
        if (len < 17) memset(w + len, 0, 17 - len); /* bytes past len are not read */
        CHECK_EQ_INT(conv(&f, w, len), MCDC_OK);
        /* magnitude of the bytes given, times 100 (scale 2 -> 4) */
        mcdc_u128 mag = 0;
        for (uint32_t i = len - 1; i >= 1; i--) mag = (mag << 8) | w[i];
        mag *= 100;
        mcdc_u128 v = D[k].sign ? mag : (mcdc_u128)0 - mag;
        uint64_t lo, hi;
        memcpy(&lo, c->values + (c->length - 1) * 16, 8);
        memcpy(&hi, c->values + (c->length - 1) * 16 + 8, 8);
        CHECK(lo == (uint64_t)v && hi == (uint64_t)(v >> 64));
    }
    fixture_close(&f);

    /* datetime2 at every scale: 0001-01-01 + days + time */
    for (uint8_t scale = 0; scale <= 7; scale++) {
        CHECK(fixture_open(&f, TDS_DATETIME2N, 8, 0, scale, MCDC_TYPE_TIMESTAMP_NTZ, 0, 0));
        int tb = scale <= 2 ? 3 : scale <= 4 ? 4 : 5;
        uint64_t units = 86399ull, p10 = 1; /* 23:59:59 and a fraction */
        for (int i = 0; i < scale; i++) p10 *= 10;
        units = units * p10 + (p10 - 1);
        uint32_t days = 738000; /* 2022-07-... */
        uint8_t w[8];
        for (int i = 0; i < tb; i++) w[i] = (uint8_t)(units >> (8 * i));
        for (int i = 0; i < 3; i++) w[tb + i] = (uint8_t)(days >> (8 * i));
        CHECK_EQ_INT(conv(&f, w, (uint32_t)tb + 3), MCDC_OK);
        int64_t got;
        memcpy(&got, f.batch->columns[0].values, 8);
        int64_t want = ((int64_t)days - 719162) * 86400000000LL +
                       (int64_t)(units * (10000000ull / p10) / 10);
        CHECK_EQ_INT(got, want);
        CHECK_EQ_INT(conv(&f, w, (uint32_t)tb + 2), MCDC_E_PROTOCOL);
        fixture_close(&f);
    }
}

/* decimal at its own scale and precision up to 19 (the 64-bit path): both
 * signs, zero and negative zero, the largest value that fits and the
 * smallest that does not, against 128-bit arithmetic written here. */
TEST(tds_decode_decimal_own_scale_values) {
    static const struct { uint8_t prec, scale, len; } T[] = {
        {18, 4, 9}, {9, 2, 5}, {19, 0, 9}, {10, 3, 9}, {1, 0, 5}};
    for (size_t t = 0; t < sizeof T / sizeof T[0]; t++) {
        conv_fixture f;
        CHECK(fixture_open(&f, TDS_DECIMALN, T[t].len, T[t].prec, T[t].scale, MCDC_TYPE_DECIMAL,
                           T[t].prec, T[t].scale));
        mcdc_column *c = &f.batch->columns[0];
        mcdc_u128 lim = 1;
        for (int i = 0; i < T[t].prec; i++) lim *= 10;
        uint64_t wide = T[t].len == 9 ? ~0ull : 0xFFFFFFFFull;
        const uint64_t M[] = {0, 1, 12345, (uint64_t)(lim - 1), (uint64_t)lim, wide};
        for (size_t k = 0; k < sizeof M / sizeof M[0]; k++) {
            for (uint8_t sign = 0; sign <= 1; sign++) {
                if (M[k] > wide) continue;
                uint8_t w[9] = {sign};
                for (int i = 0; i < 8; i++) w[1 + i] = (uint8_t)(M[k] >> (8 * i));
                int rc = conv(&f, w, T[t].len);
                if ((mcdc_u128)M[k] >= lim) {
                    CHECK_EQ_INT(rc, MCDC_E_SCHEMA);
                    continue;
                }
                CHECK_EQ_INT(rc, MCDC_OK);
                mcdc_u128 v = sign ? (mcdc_u128)M[k] : (mcdc_u128)0 - M[k];
                uint64_t lo, hi;
                memcpy(&lo, c->values + (c->length - 1) * 16, 8);
                memcpy(&hi, c->values + (c->length - 1) * 16 + 8, 8);
                CHECK(lo == (uint64_t)v && hi == (uint64_t)(v >> 64));
            }
        }
        fixture_close(&f);
    }
}

/* varbinary of every length 0..80, back to back in one column, each
 * value's bytes and nothing around them (the short copies). */
TEST(tds_decode_binary_every_length) {
    conv_fixture f;
    CHECK(fixture_open(&f, TDS_BIGVARBINARY, 80, 0, 0, MCDC_TYPE_BINARY, 0, 0));
    uint8_t w[80];
    int bad = 0;
    for (uint32_t n = 0; n <= 80; n++) {
        for (uint32_t i = 0; i < n; i++) w[i] = (uint8_t)(n * 31 + i * 7 + 1);
        bad += conv(&f, w, n) != MCDC_OK || !last_is(&f, w, n);
    }
    CHECK_EQ_INT(bad, 0);
    const mcdc_column *c = &f.batch->columns[0];
    CHECK_EQ_INT(c->data_len, 80 * 81 / 2);
    for (uint32_t n = 0; n <= 80; n++) /* later values left the earlier ones intact */
        for (uint32_t i = 0; i < n; i++)
            bad += c->data[(uint32_t)c->offsets[n] + i] != (uint8_t)(n * 31 + i * 7 + 1);
    CHECK_EQ_INT(bad, 0);
    fixture_close(&f);
}

/* NULLs written at each converter's width (ROW length-zero and NBCROW
 * bitmap forms) leave zeros in the slot even over reused, dirty buffers. */
TEST(tds_decode_nulls_zero_their_slots) {
    mcdc_error e = MCDC_ERROR_INIT;
    static const uint8_t COLL[5] = {0x09, 0x04, 0xD0, 0x00, 0x34};
    mcdc_tds_col cols[5];
    memset(cols, 0, sizeof cols);
    static const struct { uint8_t type; mcdc_tds_wire wire; uint32_t max_len; mcdc_type_id t; } C[5] = {
        {TDS_INTN, TDS_WIRE_BYTELEN, 4, MCDC_TYPE_INT32},
        {TDS_DECIMALN, TDS_WIRE_BYTELEN, 9, MCDC_TYPE_DECIMAL},
        {TDS_DATETIME2N, TDS_WIRE_BYTELEN, 8, MCDC_TYPE_TIMESTAMP_NTZ},
        {TDS_BITN, TDS_WIRE_BYTELEN, 1, MCDC_TYPE_BOOL},
        {TDS_NVARCHAR, TDS_WIRE_USHORTLEN, 100, MCDC_TYPE_UTF8}};
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 5, &e), MCDC_OK);
    for (int i = 0; i < 5; i++) {
        cols[i].type = C[i].type;
        cols[i].wire = C[i].wire;
        cols[i].max_len = C[i].max_len;
        cols[i].precision = 18;
        cols[i].scale = i == 2 ? 7 : 4;
        cols[i].utf16 = C[i].type == TDS_NVARCHAR;
        cols[i].nullable = true;
        cols[i].nat_type = C[i].t;
        memcpy(cols[i].collation, COLL, 5);
        const char name[3] = {'c', (char)('0' + i), 0};
        mcdc_schema_set(s, i, name, C[i].t, 18, 4, 0, true, &e);
    }
    mcdc_tds_meta m = {5, cols};
    CHECK_EQ_INT(mcdc_tds_bind(&m, s->fields, &e), MCDC_OK);
    /* one packet: ROW (values), ROW (length-zero NULLs), NBCROW (all NULL), ROW */
    uint8_t pk[512];
    size_t n = 8;
    const uint8_t row[] = {4, 7, 0, 0, 0,                         /* int 7 */
                           9, 1, 0x39, 0x30, 0, 0, 0, 0, 0, 0,   /* decimal 1.2345 */
                           8, 1, 0, 0, 0, 0, 0x5A, 0x0B, 0x0B,   /* datetime2(7) */
                           1, 1,                                 /* bit 1 */
                           4, 0, 'h', 0, 'i', 0};                /* N'hi' */
    const uint8_t nulls[] = {0, 0, 0, 0, 0xFF, 0xFF};
    pk[n++] = TDS_TOK_ROW; memcpy(pk + n, row, sizeof row); n += sizeof row;
    pk[n++] = TDS_TOK_ROW; memcpy(pk + n, nulls, sizeof nulls); n += sizeof nulls;
    pk[n++] = TDS_TOK_NBCROW; pk[n++] = 0x1F;
    pk[n++] = TDS_TOK_ROW; memcpy(pk + n, row, sizeof row); n += sizeof row;
    pk[0] = TDS_PKT_REPLY; pk[1] = 1; pk[2] = (uint8_t)(n >> 8); pk[3] = (uint8_t)n;
    pk[4] = pk[5] = pk[6] = pk[7] = 0;
    mcdc_tds_stream st;
    CHECK_EQ_INT(mcdc_tds_stream_init(&st, -1, pk, n, &e), MCDC_OK);
    mcdc_tds_begin_reply(&st);
    mcdc_batch *b = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&b, s, 8, &e), MCDC_OK);
    for (int i = 0; i < 4; i++) /* dirty, as a reused batch's buffers are */
        if (C[i].t != MCDC_TYPE_BOOL)
            memset(b->columns[i].values, 0xAB, (size_t)(mcdc_type_width(&s->fields[i]) * 4));
    for (int r = 0; r < 4; r++) {
        CHECK_EQ_INT(mcdc_tds_need(&st, 1, &e), MCDC_OK);
        uint8_t tok = st.buf[st.pos++];
        CHECK_EQ_INT(mcdc_tds_decode_row(&st, tok, &m, b->columns, &e), MCDC_OK);
    }
    CHECK_EQ_INT(mcdc_batch_seal(b, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_validate(b, &e), MCDC_OK);
    for (int i = 0; i < 5; i++) {
        const mcdc_column *c = &b->columns[i];
        CHECK_EQ_INT(c->null_count, 2);
        CHECK(mcdc_col_is_valid(c, 0) && !mcdc_col_is_valid(c, 1) && !mcdc_col_is_valid(c, 2) &&
              mcdc_col_is_valid(c, 3));
        if (C[i].t == MCDC_TYPE_UTF8) {
            CHECK(c->offsets[2] == c->offsets[1] && c->offsets[3] == c->offsets[2]);
            CHECK(c->offsets[4] - c->offsets[3] == 2 && memcmp(c->data + c->offsets[3], "hi", 2) == 0);
        } else if (C[i].t == MCDC_TYPE_BOOL) {
            CHECK_EQ_INT(c->values[0] & 0x9, 0x9); /* rows 0 and 3 true */
        } else {
            int32_t w = mcdc_type_width(&s->fields[i]);
            static const uint8_t Z[16] = {0};
            CHECK(memcmp(c->values + w, Z, (size_t)w) == 0 && memcmp(c->values + 2 * w, Z, (size_t)w) == 0);
            CHECK(memcmp(c->values, c->values + 3 * w, (size_t)w) == 0); /* same value twice */
        }
    }
    int32_t v;
    memcpy(&v, b->columns[0].values, 4);
    CHECK_EQ_INT(v, 7);
    mcdc_batch_free(b);
    mcdc_tds_stream_free(&st);
    mcdc_schema_unref(s);
}
