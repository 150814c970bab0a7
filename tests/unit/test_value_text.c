/* Unit tests of the canonical value text (src/batch/mcdc_value_text.c):
 * every batch type, edge values, the column and JSON forms, and the outputs
 * of the formatters it replaced (lake JSON, Delta statistics, the TDS
 * decoder's decimal text cast, the test tools), kept here as vectors. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_test.h"
#include "mcdc_value_text.h"

/* out as a C string (the functions write no NUL). */
__extension__ typedef unsigned __int128 u128;

/* xorshift64: the random values of the sweeps */
static uint64_t next64(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

#define TXT(buf, call) ((buf)[(call)] = 0, (buf))

TEST(text_integers_and_bools) {
    char b[64];
    CHECK_EQ_STR(TXT(b, mcdc_text_int(b, 0)), "0");
    CHECK_EQ_STR(TXT(b, mcdc_text_int(b, 7)), "7");
    CHECK_EQ_STR(TXT(b, mcdc_text_int(b, -1)), "-1");
    CHECK_EQ_STR(TXT(b, mcdc_text_int(b, 100)), "100");
    CHECK_EQ_STR(TXT(b, mcdc_text_int(b, -32768)), "-32768");
    CHECK_EQ_STR(TXT(b, mcdc_text_int(b, INT64_MAX)), "9223372036854775807");
    CHECK_EQ_STR(TXT(b, mcdc_text_int(b, INT64_MIN)), "-9223372036854775808");
    CHECK_EQ_STR(TXT(b, mcdc_text_bool(b, true)), "true");
    CHECK_EQ_STR(TXT(b, mcdc_text_bool(b, false)), "false");
    /* every value of a small range reads back */
    for (int64_t v = -100000; v <= 100000; v += 7) {
        mcdc_text_int(b, v)[b] = 0;
        if (strtoll(b, NULL, 10) != v) CHECK(false);
    }
    CHECK(true);
}

/* Outputs of the decimal formatters this replaced: lake JSON's put_decimal,
 * Delta statistics' put_decimal, the TDS decoder's decimal_text (they gave
 * the same text for every vector) and the tools' unscaled put_i128 (the
 * scale-0 text of the same value). */
static const struct {
    uint64_t lo;
    int64_t hi;
    int32_t scale;
    const char *text;
} OLD_DECIMALS[] = {
    {0x0000000000000000ull, 0LL, 0, "0"},
    {0x0000000000000000ull, 0LL, 2, "0.00"},
    {0x0000000000000000ull, 0LL, 38, "0.00000000000000000000000000000000000000"},
    {0x0000000000000001ull, 0LL, 0, "1"},
    {0x0000000000000001ull, 0LL, 38, "0.00000000000000000000000000000000000001"},
    {0xffffffffffffffffull, -1LL, 0, "-1"},
    {0xffffffffffffffffull, -1LL, 2, "-0.01"},
    {0xfffffffffffffffbull, -1LL, 3, "-0.005"},
    {0xfffffffff8a432ebull, -1LL, 4, "-12345.6789"},
    {0x00000000075bcd15ull, 0LL, 4, "12345.6789"},
    {0x0000000000003039ull, 0LL, 4, "1.2345"},
    {0x098a223fffffffffull, 5421010862427522170LL, 0, "99999999999999999999999999999999999999"},
    {0x098a223fffffffffull, 5421010862427522170LL, 38, "0.99999999999999999999999999999999999999"},
    {0xf675ddc000000001ull, -5421010862427522171LL, 0, "-99999999999999999999999999999999999999"},
    {0xf675ddc000000001ull, -5421010862427522171LL, 38, "-0.99999999999999999999999999999999999999"},
    {0x0000000000000000ull, INT64_MIN, 0, "-170141183460469231731687303715884105728"},
    {0xffffffffffffffffull, INT64_MAX, 0, "170141183460469231731687303715884105727"},
    {0x8ac7230489e80000ull, 0LL, 19, "1.0000000000000000000"},
    {0xffffffffffffff9cull, -1LL, 2, "-1.00"},
};
static const char *const OLD_UNSCALED[] = {
    "0", "0", "0", "1", "1", "-1", "-1", "-5", "-123456789", "123456789", "12345",
    "99999999999999999999999999999999999999", "99999999999999999999999999999999999999",
    "-99999999999999999999999999999999999999", "-99999999999999999999999999999999999999",
    "-170141183460469231731687303715884105728", "170141183460469231731687303715884105727",
    "10000000000000000000", "-100"};

TEST(text_decimals_match_the_replaced_formatters) {
    char b[64];
    _Static_assert(sizeof OLD_DECIMALS / sizeof OLD_DECIMALS[0] ==
                       sizeof OLD_UNSCALED / sizeof OLD_UNSCALED[0],
                   "one unscaled text per vector");
    for (size_t i = 0; i < sizeof OLD_DECIMALS / sizeof OLD_DECIMALS[0]; i++) {
        CHECK_EQ_STR(TXT(b, mcdc_text_decimal(b, OLD_DECIMALS[i].lo, OLD_DECIMALS[i].hi,
                                              OLD_DECIMALS[i].scale)),
                     OLD_DECIMALS[i].text);
        CHECK_EQ_STR(TXT(b, mcdc_text_decimal(b, OLD_DECIMALS[i].lo, OLD_DECIMALS[i].hi, 0)),
                     OLD_UNSCALED[i]);
        CHECK(strlen(b) < MCDC_TEXT_FIXED_MAX);
        /* sign and magnitude give the same text */
        u128 v = (u128)(uint64_t)OLD_DECIMALS[i].hi << 64 | OLD_DECIMALS[i].lo;
        bool neg = OLD_DECIMALS[i].hi < 0;
        if (neg) v = (u128)0 - v;
        CHECK_EQ_STR(TXT(b, mcdc_text_decimal_parts(b, neg, (uint64_t)v, (uint64_t)(v >> 64),
                                                    OLD_DECIMALS[i].scale)),
                     OLD_DECIMALS[i].text);
    }
    /* Zero never has a sign. (The TDS decoder's text cast wrote "-0.00" for
     * a negative zero on the wire; its decimal columns stored 0.00.) */
    CHECK_EQ_STR(TXT(b, mcdc_text_decimal_parts(b, true, 0, 0, 2)), "0.00");
    CHECK_EQ_STR(TXT(b, mcdc_text_decimal_parts(b, true, 0, 0, 0)), "0");
    /* negative values below one keep their sign at every scale */
    CHECK_EQ_STR(TXT(b, mcdc_text_decimal_parts(b, true, 5, 0, 1)), "-0.5");
    CHECK_EQ_STR(TXT(b, mcdc_text_decimal_parts(b, true, 5, 0, 38)),
                 "-0.00000000000000000000000000000000000005");
    CHECK_EQ_STR(TXT(b, mcdc_text_decimal_parts(b, false, 5, 0, 0)), "5");
    /* a group of 19 digits with leading zeros inside a 128-bit value */
    CHECK_EQ_STR(TXT(b, mcdc_text_decimal_parts(b, false, 0, 1, 0)), "18446744073709551616");
    CHECK_EQ_STR(TXT(b, mcdc_text_decimal_parts(b, false, 0x8ac7230489e80001ull, 0, 0)),
                 "10000000000000000001");
    u128 big = (u128)10000000000000000000ull * 10000000000000000000ull + 7;
    CHECK_EQ_STR(TXT(b, mcdc_text_decimal_parts(b, false, (uint64_t)big, (uint64_t)(big >> 64), 2)),
                 "1000000000000000000000000000000000000.07");
}

/* The formatters this replaced wrote %.17g (double) and %.9g (float):
 * the canonical text is shorter where it can be and reads back as the same
 * value. */
TEST(text_doubles_shortest_round_trip) {
    static const struct {
        double v;
        const char *text;
    } V[] = {
        {0.0, "0"},
        {1.0, "1"},
        {-1.0, "-1"},
        {1.5, "1.5"},
        {0.1, "0.1"},
        {0.1 + 0.2, "0.30000000000000004"},
        {100.0, "100"},
        {123.456, "123.456"},
        {-2.25e300, "-2.25e+300"},
        {1e21, "1e+21"},
        {1e20, "100000000000000000000"},
        {1.2345678901234568e20, "123456789012345680000"},
        {1e-6, "0.000001"},
        {1.25e-6, "0.00000125"},
        {1e-7, "1e-7"},
        {1.5e-7, "1.5e-7"},
        {5e-324, "5e-324"},
        {DBL_MAX, "1.7976931348623157e+308"},
        {-DBL_MIN, "-2.2250738585072014e-308"},
        {9007199254740992.0, "9007199254740992"},
        {9007199254740994.0, "9007199254740994"},
        {1e16, "10000000000000000"},
        {4.35, "4.35"},
    };
    char b[64];
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++) {
        CHECK_EQ_STR(TXT(b, mcdc_text_double(b, V[i].v)), V[i].text);
        CHECK(strtod(b, NULL) == V[i].v);
    }
    CHECK_EQ_STR(TXT(b, mcdc_text_double(b, -0.0)), "-0");
    CHECK_EQ_STR(TXT(b, mcdc_text_double(b, NAN)), "NaN");
    CHECK_EQ_STR(TXT(b, mcdc_text_double(b, INFINITY)), "Infinity");
    CHECK_EQ_STR(TXT(b, mcdc_text_double(b, -INFINITY)), "-Infinity");
    /* random bit patterns: the value reads back, the text is at most 17
     * significant digits, and %.17g (the old text) reads back the same */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        uint64_t bits = next64(&x);
        double d;
        memcpy(&d, &bits, 8);
        if (!isfinite(d)) continue;
        size_t n = mcdc_text_double(b, d);
        b[n] = 0;
        char old[40];
        snprintf(old, sizeof old, "%.17g", d);
        if (n >= MCDC_TEXT_FIXED_MAX || strtod(b, NULL) != d || strtod(old, NULL) != d) bad++;
        /* one significant digit fewer does not read back: the shortest */
        char sig[40];
        int k = 0;
        for (const char *p = b; *p && *p != 'e'; p++)
            if (*p >= '0' && *p <= '9' && (k > 0 || *p != '0')) sig[k++] = *p;
        while (k > 0 && sig[k - 1] == '0') k--;
        if (k > 1) {
            char fewer[40];
            snprintf(fewer, sizeof fewer, "%.*e", k - 2, d);
            if (strtod(fewer, NULL) == d) bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(text_floats_use_their_own_digits) {
    static const struct {
        float v;
        const char *text;
    } V[] = {
        {0.1f, "0.1"},
        {1.5f, "1.5"},
        {-2.5f, "-2.5"},
        {3.14159274f, "3.1415927"},
        {1e10f, "10000000000"},
        {16777216.0f, "16777216"},
        {FLT_MAX, "3.4028235e+38"},
        {FLT_MIN, "1.1754944e-38"},
        {1e-7f, "1e-7"},
        {0.0f, "0"},
    };
    char b[64];
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++) {
        CHECK_EQ_STR(TXT(b, mcdc_text_float(b, V[i].v)), V[i].text);
        CHECK(strtof(b, NULL) == V[i].v);
        /* the old %.9g text reads back as the same float */
        char old[40];
        snprintf(old, sizeof old, "%.9g", (double)V[i].v);
        CHECK(strtof(old, NULL) == V[i].v);
    }
    CHECK_EQ_STR(TXT(b, mcdc_text_float(b, -0.0f)), "-0");
    CHECK_EQ_STR(TXT(b, mcdc_text_float(b, NAN)), "NaN");
    CHECK_EQ_STR(TXT(b, mcdc_text_float(b, -INFINITY)), "-Infinity");
    uint64_t x = 2463534242u;
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        uint32_t bits = (uint32_t)(next64(&x) >> 32);
        float f;
        memcpy(&f, &bits, 4);
        if (!isfinite(f)) continue;
        size_t n = mcdc_text_float(b, f);
        b[n] = 0;
        if (strtof(b, NULL) != f) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(text_dates_and_timestamps) {
    char b[64];
    CHECK_EQ_STR(TXT(b, mcdc_text_date(b, 0)), "1970-01-01");
    CHECK_EQ_STR(TXT(b, mcdc_text_date(b, -1)), "1969-12-31");
    CHECK_EQ_STR(TXT(b, mcdc_text_date(b, -719162)), "0001-01-01");
    CHECK_EQ_STR(TXT(b, mcdc_text_date(b, 2932896)), "9999-12-31");
    CHECK_EQ_STR(TXT(b, mcdc_text_date(b, -719528)), "0000-01-01");
    CHECK_EQ_STR(TXT(b, mcdc_text_date(b, -719529)), "-0001-12-31");
    CHECK_EQ_STR(TXT(b, mcdc_text_date(b, 2932897)), "+10000-01-01");
    CHECK_EQ_STR(TXT(b, mcdc_text_date(b, INT32_MIN)), "-5877641-06-23");
    CHECK_EQ_STR(TXT(b, mcdc_text_date(b, INT32_MAX)), "+5881580-07-11");
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp(b, 0, false)), "1970-01-01T00:00:00.000000");
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp(b, 0, true)), "1970-01-01T00:00:00.000000Z");
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp(b, -1, false)), "1969-12-31T23:59:59.999999");
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp(b, -62135596800000000LL, false)),
                 "0001-01-01T00:00:00.000000");
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp(b, 253402300799999999LL, true)),
                 "9999-12-31T23:59:59.999999Z");
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp(b, -2208902399000000LL, false)),
                 "1900-01-02T00:00:01.000000");
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp(b, INT64_MIN, true)),
                 "-290308-12-21T19:59:05.224192Z");
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp(b, INT64_MAX, false)),
                 "+294247-01-10T04:00:54.775807");
    CHECK(strlen(b) < MCDC_TEXT_FIXED_MAX);
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp_ms(b, 1500, true)), "1970-01-01T00:00:00.001Z");
    CHECK_EQ_STR(TXT(b, mcdc_text_timestamp_ms(b, -1, false)), "1969-12-31T23:59:59.999");
    /* The replaced texts: lake JSON wrote mcdc_format_ts_us(us, 6) (+ 'Z'),
     * Delta statistics mcdc_format_ts_us(ms * 1000, 3) + 'Z' and
     * "%04lld-%02u-%02u" dates: the same over years 1-9999. */
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        int64_t us = -62135596800000000LL + (int64_t)(next64(&x) % 315537897600000000ull);
        char old[32], want[40];
        mcdc_format_ts_us(us, 6, old);
        snprintf(want, sizeof want, "%sZ", old);
        if (strcmp(TXT(b, mcdc_text_timestamp(b, us, true)), want) != 0) bad++;
        if (strcmp(TXT(b, mcdc_text_timestamp(b, us, false)), old) != 0) bad++;
        mcdc_format_ts_us(us, 3, old);
        if (strcmp(TXT(b, mcdc_text_timestamp_ms(b, us, false)), old) != 0) bad++;
        int64_t days = us / 86400000000LL - (us % 86400000000LL < 0);
        int64_t y;
        unsigned m, d;
        mcdc_civil_from_days(days, &y, &m, &d);
        snprintf(want, sizeof want, "%04lld-%02u-%02u", (long long)y, m, d);
        if (strcmp(TXT(b, mcdc_text_date(b, days)), want) != 0) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(text_binary_hex) {
    char b[64];
    static const uint8_t p[] = {0x00, 0xAB, 0xFF, 0x10};
    CHECK_EQ_STR(TXT(b, mcdc_text_hex(b, p, 0)), "0x");
    CHECK_EQ_STR(TXT(b, mcdc_text_hex(b, p, 4)), "0x00ABFF10");
    CHECK_EQ_STR(TXT(b, mcdc_text_hex_digits(b, p, 4, false)), "00abff10");
    CHECK_EQ_STR(TXT(b, mcdc_text_hex_digits(b, p, 4, true)), "00ABFF10");
    CHECK_EQ_INT(mcdc_text_hex_digits(b, p, 0, false), 0);
}

/* A batch with a column of every type: row 0 values, row 1 NULLs, row 2
 * other values. */
static mcdc_batch *every_type(void) {
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 14, NULL);
    mcdc_schema_set(s, 0, "b", MCDC_TYPE_BOOL, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "i8", MCDC_TYPE_INT8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 2, "i16", MCDC_TYPE_INT16, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 3, "i32", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 4, "i64", MCDC_TYPE_INT64, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 5, "f", MCDC_TYPE_FLOAT, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 6, "d", MCDC_TYPE_DOUBLE, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 7, "dec", MCDC_TYPE_DECIMAL, 38, 4, 0, true, NULL);
    mcdc_schema_set(s, 8, "u", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 9, "bin", MCDC_TYPE_BINARY, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 10, "fix", MCDC_TYPE_FIXED_BINARY, 0, 0, 2, true, NULL);
    mcdc_schema_set(s, 11, "day", MCDC_TYPE_DATE32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 12, "ntz", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 13, "utc", MCDC_TYPE_TIMESTAMP_UTC, 0, 0, 0, true, NULL);
    mcdc_batch *b = NULL;
    mcdc_batch_create(&b, s, 4, NULL);
    mcdc_schema_unref(s);
    mcdc_column *c = b->columns;
    mcdc_col_append_bool(&c[0], true, NULL);
    mcdc_col_append_int(&c[1], -128, NULL);
    mcdc_col_append_int(&c[2], 255, NULL);
    mcdc_col_append_int(&c[3], INT32_MIN, NULL);
    mcdc_col_append_int(&c[4], INT64_MAX, NULL);
    mcdc_col_append_double(&c[5], 0.1, NULL);
    mcdc_col_append_double(&c[6], NAN, NULL);
    mcdc_col_append_decimal(&c[7], (uint64_t)-5, -1, NULL);
    mcdc_col_append_bytes(&c[8], "a\"\\\n\x01z", 6, NULL);
    mcdc_col_append_bytes(&c[9], "", 0, NULL);
    mcdc_col_append_bytes(&c[10], "\x01\xfe", 2, NULL);
    mcdc_col_append_int(&c[11], -719162, NULL);
    mcdc_col_append_int(&c[12], -1, NULL);
    mcdc_col_append_int(&c[13], 253402300799999999LL, NULL);
    for (int i = 0; i < 14; i++) mcdc_col_append_null(&c[i], NULL);
    mcdc_col_append_bool(&c[0], false, NULL);
    mcdc_col_append_int(&c[1], 0, NULL);
    mcdc_col_append_int(&c[2], -1, NULL);
    mcdc_col_append_int(&c[3], 42, NULL);
    mcdc_col_append_int(&c[4], 0, NULL);
    mcdc_col_append_double(&c[5], -INFINITY, NULL);
    mcdc_col_append_double(&c[6], -1.5e-7, NULL);
    mcdc_col_append_decimal(&c[7], 1234567, 0, NULL);
    mcdc_col_append_bytes(&c[8], "", 0, NULL);
    mcdc_col_append_bytes(&c[9], "\xde\xad", 2, NULL);
    mcdc_col_append_bytes(&c[10], "\x00\x00", 2, NULL);
    mcdc_col_append_int(&c[11], 2932896, NULL);
    mcdc_col_append_int(&c[12], 0, NULL);
    mcdc_col_append_int(&c[13], -62135596800000000LL, NULL);
    mcdc_batch_seal(b, NULL);
    return b;
}

static const char *const CANON[2][14] = {
    {"true", "-128", "255", "-2147483648", "9223372036854775807", "0.1", "NaN", "-0.0005",
     "a\"\\\n\x01z", "0x", "0x01FE", "0001-01-01", "1969-12-31T23:59:59.999999",
     "9999-12-31T23:59:59.999999Z"},
    {"false", "0", "-1", "42", "0", "-Infinity", "-1.5e-7", "123.4567", "", "0xDEAD", "0x0000",
     "9999-12-31", "1970-01-01T00:00:00.000000", "0001-01-01T00:00:00.000000Z"}};

TEST(text_cells_and_columns_of_every_type) {
    mcdc_batch *b = every_type();
    CHECK_EQ_INT(b->rows, 3);
    mcdc_buf t = {0};
    for (int r = 0; r < 3; r += 2)
        for (int i = 0; i < 14; i++) {
            mcdc_buf_reset(&t);
            CHECK_EQ_INT(mcdc_text_cell(&t, &b->columns[i], r, NULL), MCDC_OK);
            mcdc_buf_cstr(&t, NULL);
            CHECK_EQ_STR((const char *)t.data, CANON[r / 2][i]);
        }
    /* column at a time: the same texts, NULL kept, and a sub-range */
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 1, NULL);
    mcdc_schema_set(s, 0, "text", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    for (int i = 0; i < 14; i++) {
        mcdc_batch *o = NULL;
        CHECK_EQ_INT(mcdc_batch_create(&o, s, 1, NULL), MCDC_OK);
        mcdc_column *oc = &o->columns[0];
        CHECK_EQ_INT(mcdc_text_column(oc, &b->columns[i], 0, 3, NULL), MCDC_OK);
        CHECK_EQ_INT(mcdc_text_column(oc, &b->columns[i], 2, 1, NULL), MCDC_OK);
        CHECK_EQ_INT(mcdc_text_column(oc, &b->columns[i], 1, 0, NULL), MCDC_OK);
        CHECK_EQ_INT(mcdc_batch_seal(o, NULL), MCDC_OK);
        CHECK_EQ_INT(mcdc_batch_validate(o, NULL), MCDC_OK);
        CHECK_EQ_INT(o->rows, 4);
        CHECK_EQ_INT(oc->null_count, 1);
        CHECK(!mcdc_col_is_valid(oc, 1));
        static const int want[4] = {0, -1, 1, 1};
        for (int r = 0; r < 4; r++) {
            if (want[r] < 0) continue;
            const char *w = CANON[want[r]][i];
            int32_t n = oc->offsets[r + 1] - oc->offsets[r];
            CHECK_EQ_INT(n, (int32_t)strlen(w));
            CHECK(memcmp(oc->data + oc->offsets[r], w, (size_t)n) == 0);
        }
        mcdc_batch_free(o);
    }
    mcdc_schema_unref(s);
    mcdc_buf_free(&t);
    mcdc_batch_free(b);
}

TEST(text_json_values) {
    mcdc_batch *b = every_type();
    static const char *const JSON[3][14] = {
        {"true", "-128", "255", "-2147483648", "9223372036854775807", "0.1", "\"NaN\"",
         "\"-0.0005\"", "\"a\\\"\\\\\\n\\u0001z\"", "\"0x\"", "\"0x01FE\"", "\"0001-01-01\"",
         "\"1969-12-31T23:59:59.999999\"", "\"9999-12-31T23:59:59.999999Z\""},
        {"null", "null", "null", "null", "null", "null", "null", "null", "null", "null", "null",
         "null", "null", "null"},
        {"false", "0", "-1", "42", "0", "\"-Infinity\"", "-1.5e-7", "\"123.4567\"", "\"\"",
         "\"0xDEAD\"", "\"0x0000\"", "\"9999-12-31\"", "\"1970-01-01T00:00:00.000000\"",
         "\"0001-01-01T00:00:00.000000Z\""}};
    mcdc_buf t = {0};
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 14; i++) {
            mcdc_buf_reset(&t);
            CHECK_EQ_INT(mcdc_text_cell_json(&t, &b->columns[i], r, NULL), MCDC_OK);
            mcdc_buf_cstr(&t, NULL);
            CHECK_EQ_STR((const char *)t.data, JSON[r][i]);
        }
    mcdc_buf_reset(&t);
    CHECK_EQ_INT(mcdc_text_json_string(&t, (const uint8_t *)"\t\r\x1f\xc3\xa9", 5, NULL), MCDC_OK);
    mcdc_buf_cstr(&t, NULL);
    CHECK_EQ_STR((const char *)t.data, "\"\\t\\r\\u001f\xc3\xa9\"");
    mcdc_buf_free(&t);
    mcdc_batch_free(b);
}
