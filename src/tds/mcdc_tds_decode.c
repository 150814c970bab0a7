/*
 * mcdc_tds_decode.c - TDS tokens and values straight into batch columns.
 *
 * Every value goes through one function per column, chosen when the result
 * is bound to its target batch: a wire reader (fixed, byte length, ushort
 * length) fused with a converter (copy, widen, decimal, date math, UTF-16 to
 * UTF-8 ...). (max), legacy text and sql_variant values are gathered into
 * the stream's reused scratch buffer and then converted. Every length is
 * checked against the TYPE_INFO and the bytes the reply still has: a lying
 * length is MCDC_E_PROTOCOL.
 *
 * Type mapping = the FreeTDS backend's: tinyint -> int16, money ->
 * decimal(19,4), smallmoney -> decimal(10,4), datetime/smalldatetime/
 * datetime2 -> timestamp_ntz us, datetimeoffset -> timestamp UTC, date ->
 * date32, time and uniqueidentifier -> utf8 text as SQL Server prints them,
 * nvarchar (UTF-16LE) and varchar (code page 1252, or UTF-8 collations) ->
 * UTF-8, binary types -> binary, sql_variant -> text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h> /* x86-64 baseline: the UTF-16 blocks */
#include <tmmintrin.h> /* SSSE3, checked at run time: their packing */
#endif

#include "mcdc_driver.h"
#include "mcdc_limits.h"
#include "mcdc_lsn.h" /* mcdc_u128 */
#include "mcdc_sql_types.h"
#include "mcdc_tds_proto.h"
#include "mcdc_value_text.h"

#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Error paths stay out of line: inlined, their message buffers would give
 * every per-cell reader a large stack frame. */
#define COLD __attribute__((cold, noinline))

COLD static int bad(mcdc_tds_stream *s, mcdc_error *err, const char *fmt, const char *a, long v) {
    s->dead = true;
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a, v);
    return mcdc_error_set(err, MCDC_E_PROTOCOL, "TDS: %s in the reply from %s", msg, s->where);
}
COLD static int badv(mcdc_column *c, mcdc_error *err, const char *what, uint32_t len) {
    return mcdc_error_set(err, MCDC_E_PROTOCOL, "TDS: column '%s': %s value of %u bytes",
                          c->field->name, what, len);
}

/* ---- column writers --------------------------------------------------------- */
static inline void put_fixed(mcdc_column *c, const void *v, size_t w) {
    memcpy(c->values + (size_t)c->length * w, v, w);
    c->length++;
}
/* room's growth, out of line: the per-cell writers stay small leaves */
COLD static int room_grow(mcdc_column *c, int64_t n, mcdc_error *err) {
    if (n > (int64_t)MCDC_VALUE_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "column '%s': a value of %lld bytes exceeds the limit of %u",
                              c->field->name, (long long)n, MCDC_VALUE_BYTES_MAX);
    return mcdc_col_reserve(c, 0, n, err);
}
static inline int room(mcdc_column *c, int64_t n, mcdc_error *err) {
    if (UNLIKELY(c->data_len + n > c->data_cap)) return room_grow(c, n, err);
    return MCDC_OK;
}
static inline void end_var(mcdc_column *c) {
    c->offsets[c->length + 1] = (int32_t)c->data_len;
    c->length++;
}
/* 1 <= n <= 32 bytes from p to d. The short values most variable columns hold
 * (LSNs, keys, small binaries) are two overlapping fixed-size copies that
 * compile to plain loads and stores, without a call into the C library. */
__attribute__((always_inline)) static inline void copy_short(uint8_t *d, const uint8_t *p,
                                                             uint32_t n) {
    if (n >= 16) {
        memcpy(d, p, 16);
        memcpy(d + n - 16, p + n - 16, 16);
    } else if (n >= 8) {
        memcpy(d, p, 8);
        memcpy(d + n - 8, p + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, p, 4);
        memcpy(d + n - 4, p + n - 4, 4);
    } else {
        d[0] = p[0];
        d[n >> 1] = p[n >> 1];
        d[n - 1] = p[n - 1];
    }
}
static inline int put_var(mcdc_column *c, const void *p, uint32_t n, mcdc_error *err) {
    int rc = room(c, n, err);
    if (rc != MCDC_OK) return rc;
    if (n) memcpy(c->data + c->data_len, p, n);
    c->data_len += n;
    end_var(c);
    return MCDC_OK;
}
/* put_var for a value read in place from the reply. Values over 32 bytes
 * and a full buffer go out of line, so that the common case makes no call
 * (and needs no stack frame). */
COLD static int put_wire_long(mcdc_column *c, const uint8_t *p, uint32_t n, mcdc_error *err) {
    return put_var(c, p, n, err);
}
__attribute__((always_inline)) static inline int put_wire_var(mcdc_column *c, const uint8_t *p,
                                                              uint32_t n, mcdc_error *err) {
    if (UNLIKELY(n > 32 || c->data_len + n > c->data_cap)) return put_wire_long(c, p, n, err);
    if (n > 0) copy_short(c->data + c->data_len, p, n); /* data is NULL before a first byte */
    c->data_len += n;
    end_var(c);
    return MCDC_OK;
}

/* NULL without a call once the column has a validity bitmap (the common
 * case after the first NULL); same effect as mcdc_col_append_null. */
static inline int put_null(mcdc_column *c, mcdc_error *err) {
    int64_t i = c->length;
    if (UNLIKELY(c->validity == NULL || i >= c->capacity)) return mcdc_col_append_null(c, err);
    c->validity[i >> 3] &= (uint8_t)~(1u << (i & 7));
    switch (c->field->type) {
    case MCDC_TYPE_UTF8: case MCDC_TYPE_BINARY: c->offsets[i + 1] = c->offsets[i]; break;
    case MCDC_TYPE_BOOL: break;
    case MCDC_TYPE_INT16: memset(c->values + i * 2, 0, 2); break;
    case MCDC_TYPE_INT32: case MCDC_TYPE_FLOAT: case MCDC_TYPE_DATE32: memset(c->values + i * 4, 0, 4); break;
    case MCDC_TYPE_DECIMAL: memset(c->values + i * 16, 0, 16); break;
    case MCDC_TYPE_INT64: case MCDC_TYPE_DOUBLE: case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: memset(c->values + i * 8, 0, 8); break;
    default: return mcdc_col_append_null(c, err);
    }
    c->length++;
    c->null_count++;
    return MCDC_OK;
}

/* put_null for a column whose value width is known from its converter:
 * w bytes of zeros (2, 4, 8, 16), 0 for bool, NULLW_VAR for text and
 * binary, NULLW_ANY to look at the column's type. A constant w compiles
 * to the one store. */
enum { NULLW_VAR = -1, NULLW_ANY = -2 };
__attribute__((always_inline)) static inline int put_null_w(mcdc_column *c, int w,
                                                             mcdc_error *err) {
    if (w == NULLW_ANY) return put_null(c, err);
    int64_t i = c->length;
    if (UNLIKELY(c->validity == NULL || i >= c->capacity)) return mcdc_col_append_null(c, err);
    c->validity[i >> 3] &= (uint8_t)~(1u << (i & 7));
    switch (w) {
    case NULLW_VAR: c->offsets[i + 1] = c->offsets[i]; break;
    case 2: memset(c->values + i * 2, 0, 2); break;
    case 4: memset(c->values + i * 4, 0, 4); break;
    case 8: memset(c->values + i * 8, 0, 8); break;
    case 16: memset(c->values + i * 16, 0, 16); break;
    default: MCDC_ASSERT(w == 0); break;
    }
    c->length++;
    c->null_count++;
    return MCDC_OK;
}

/* 10^0 .. 10^38, folded at compile time */
#define P10_19 ((mcdc_u128)10000000000000000000ull)
static const mcdc_u128 POW10[39] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
    1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
    100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
    1000000000000000000ull, P10_19, P10_19 * 10ull, P10_19 * 100ull, P10_19 * 1000ull,
    P10_19 * 10000ull, P10_19 * 100000ull, P10_19 * 1000000ull, P10_19 * 10000000ull,
    P10_19 * 100000000ull, P10_19 * 1000000000ull, P10_19 * 10000000000ull,
    P10_19 * 100000000000ull, P10_19 * 1000000000000ull, P10_19 * 10000000000000ull,
    P10_19 * 100000000000000ull, P10_19 * 1000000000000000ull, P10_19 * 10000000000000000ull,
    P10_19 * 100000000000000000ull, P10_19 * 1000000000000000000ull, P10_19 * P10_19};
#undef P10_19

__attribute__((noinline)) static int put_decimal(mcdc_column *c, bool neg, mcdc_u128 mag,
                                                 int src_scale, mcdc_error *err) {
    const mcdc_u128 *p10 = POW10;
    int k = c->field->scale - src_scale;
    if (k < 0)
        return mcdc_error_set(err, MCDC_E_SCHEMA,
                              "column '%s': a value with scale %d does not fit decimal(%d,%d)",
                              c->field->name, src_scale, c->field->precision, c->field->scale);
    if (k > 0) mag *= p10[k];
    if (mag >= p10[c->field->precision])
        return mcdc_error_set(err, MCDC_E_SCHEMA, "column '%s': a value does not fit decimal(%d,%d)",
                              c->field->name, c->field->precision, c->field->scale);
    mcdc_u128 v = neg ? (mcdc_u128)0 - mag : mag;
    uint64_t lo = (uint64_t)v, hi = (uint64_t)(v >> 64);
    uint8_t *d = c->values + (size_t)c->length * 16;
    memcpy(d, &lo, 8);
    memcpy(d + 8, &hi, 8);
    c->length++;
    return MCDC_OK;
}

/* ---- value helpers ------------------------------------------------------------ */
static inline int time_bytes(int scale) { return scale <= 2 ? 3 : scale <= 4 ? 4 : 5; }
static inline uint64_t le_n(const uint8_t *p, int n) {
    switch (n) { /* the widths of time and date parts, without a loop */
    case 3: return (uint64_t)tds_u16(p) | (uint64_t)p[2] << 16;
    case 4: return tds_u32(p);
    case 5: return (uint64_t)tds_u32(p) | (uint64_t)p[4] << 32;
    default: break;
    }
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static const uint64_t P10[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
/* time part of TIMEN/DATETIME2N/DTO in 100 ns units */
static inline uint64_t time_100ns(const uint8_t *p, int scale) {
    return le_n(p, time_bytes(scale)) * P10[7 - scale];
}
static int64_t int_of(const uint8_t *p, uint32_t len, bool *ok) {
    *ok = true;
    switch (len) {
    case 1: return p[0];
    case 2: return (int16_t)tds_u16(p);
    case 4: return (int32_t)tds_u32(p);
    case 8: return (int64_t)tds_u64(p);
    default: *ok = false; return 0;
    }
}
static int64_t money_of(const uint8_t *p, uint32_t len) {
    if (len == 4) return (int32_t)tds_u32(p);
    return (int64_t)(((uint64_t)tds_u32(p) << 32) | tds_u32(p + 4));
}
/* datetime (len 8) or smalldatetime (len 4) in microseconds; false when the
 * value is outside SQL Server's range (1753-01-01 .. 9999-12-31). */
static bool datetime_us(const uint8_t *p, uint32_t len, int64_t *us) {
    if (len == 4) {
        *us = ((int64_t)tds_u16(p) - TDS_DAYS_1900_TO_1970) * TDS_US_PER_DAY +
              (int64_t)tds_u16(p + 2) * 60000000LL;
        return true;
    }
    int32_t days = (int32_t)tds_u32(p);
    uint32_t ticks = tds_u32(p + 4);
    if (days < -53690 || days > 2958463 || ticks > 25920000u) return false;
    int64_t ms = ((int64_t)ticks * 10 + 1) / 3; /* 1/300 s, as SQL Server rounds */
    *us = ((int64_t)days - TDS_DAYS_1900_TO_1970) * TDS_US_PER_DAY + ms * 1000;
    return true;
}
/* datetime2 / datetimeoffset (UTC) value to microseconds */
static inline int64_t dt2_us(const uint8_t *p, int scale) {
    int tb = time_bytes(scale);
    uint64_t t = time_100ns(p, scale);
    int64_t days = (int64_t)le_n(p + tb, 3);
    return (days - TDS_DAYS_0001_TO_1970) * TDS_US_PER_DAY + (int64_t)(t / 10);
}
/* uniqueidentifier text (mcdc_driver.h). SSE2: the first three groups
 * swapped into display order, then 32 nibbles to hex digits at once. */
void mcdc_driver_guid_text(char buf[36], const uint8_t p[16]) {
#if defined(__SSE2__)
    uint64_t a, b;
    memcpy(&a, p, 8);
    memcpy(&b, p + 8, 8);
    a = (uint64_t)__builtin_bswap32((uint32_t)a) |
        (uint64_t)__builtin_bswap16((uint16_t)(a >> 32)) << 32 |
        (uint64_t)__builtin_bswap16((uint16_t)(a >> 48)) << 48;
    const __m128i f = _mm_set1_epi8(0x0F);
    __m128i v = _mm_set_epi64x((long long)b, (long long)a);
    __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), f), lo = _mm_and_si128(v, f);
    __m128i d0 = _mm_unpacklo_epi8(hi, lo), d1 = _mm_unpackhi_epi8(hi, lo);
    const __m128i zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8(9), gap = _mm_set1_epi8(7);
    d0 = _mm_add_epi8(_mm_add_epi8(d0, zero), _mm_and_si128(_mm_cmpgt_epi8(d0, nine), gap));
    d1 = _mm_add_epi8(_mm_add_epi8(d1, zero), _mm_and_si128(_mm_cmpgt_epi8(d1, nine), gap));
    char h[32];
    _mm_storeu_si128((__m128i *)(void *)h, d0);
    _mm_storeu_si128((__m128i *)(void *)(h + 16), d1);
    memcpy(buf, h, 8);
    memcpy(buf + 9, h + 8, 4);
    memcpy(buf + 14, h + 12, 4);
    memcpy(buf + 19, h + 16, 4);
    memcpy(buf + 24, h + 20, 12);
    buf[8] = buf[13] = buf[18] = buf[23] = '-';
#else
    static const uint8_t ORDER[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
    static const uint8_t AT[16] = {0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34};
    for (int i = 0; i < 16; i++) memcpy(buf + AT[i], mcdc_hex_pairs + 2 * p[ORDER[i]], 2);
    buf[8] = buf[13] = buf[18] = buf[23] = '-';
#endif
}

/* ---- converters ---------------------------------------------------------------- */
#define CONV(name)                                                                            \
    static inline int conv_##name(mcdc_column *c, const uint8_t *p, uint32_t len,             \
                                  const mcdc_tds_col *tc, mcdc_error *err)
#define UNUSED3 (void)tc, (void)err, (void)len

static int int_to_target(mcdc_column *c, int64_t v, mcdc_error *err);

CONV(int) {
    (void)tc;
    bool ok;
    int64_t v = int_of(p, len, &ok);
    if (UNLIKELY(!ok)) return badv(c, err, "integer", len);
    return int_to_target(c, v, err);
}
CONV(u8_i16) {
    if (UNLIKELY(len != 1)) return conv_int(c, p, len, tc, err);
    int16_t v = p[0];
    put_fixed(c, &v, 2);
    return MCDC_OK;
}
CONV(copy2) {
    if (UNLIKELY(len != 2)) return conv_int(c, p, len, tc, err);
    put_fixed(c, p, 2);
    return MCDC_OK;
}
CONV(copy4) {
    if (UNLIKELY(len != 4)) return conv_int(c, p, len, tc, err);
    put_fixed(c, p, 4);
    return MCDC_OK;
}
CONV(copy8) {
    if (UNLIKELY(len != 8)) return conv_int(c, p, len, tc, err);
    put_fixed(c, p, 8);
    return MCDC_OK;
}
CONV(fcopy4) {
    (void)tc;
    if (UNLIKELY(len != 4)) return badv(c, err, "real", len);
    put_fixed(c, p, 4);
    return MCDC_OK;
}
CONV(fcopy8) {
    (void)tc;
    if (UNLIKELY(len != 8)) return badv(c, err, "float", len);
    put_fixed(c, p, 8);
    return MCDC_OK;
}
CONV(real_double) {
    (void)tc;
    if (UNLIKELY(len != 4)) return badv(c, err, "real", len);
    float f;
    memcpy(&f, p, 4);
    double d = (double)f;
    put_fixed(c, &d, 8);
    return MCDC_OK;
}
CONV(bit) {
    (void)tc;
    if (UNLIKELY(len != 1)) return badv(c, err, "bit", len);
    int64_t i = c->length;
    uint8_t bit = (uint8_t)(1u << (i & 7)); /* no branch on the (random) value */
    c->values[i >> 3] = (uint8_t)((c->values[i >> 3] & ~bit) | (bit & (uint8_t)(0u - (p[0] != 0))));
    c->length++;
    return MCDC_OK;
}
/* The magnitude of a decimal value: len - 1 little-endian bytes after the
 * sign byte (4, 8, 12 or 16 of them as SQL Server sends; any up to 16). */
static inline mcdc_u128 decimal_mag(const uint8_t *p, uint32_t len) {
    switch (len) {
    case 5: return tds_u32(p + 1);
    case 9: return tds_u64(p + 1);
    case 13: return (mcdc_u128)tds_u64(p + 1) | (mcdc_u128)tds_u32(p + 9) << 64;
    case 17: return (mcdc_u128)tds_u64(p + 1) | (mcdc_u128)tds_u64(p + 9) << 64;
    default: break;
    }
    mcdc_u128 mag = 0;
    for (uint32_t i = len - 1; i >= 1; i--) mag = (mag << 8) | p[i];
    return mag;
}
__attribute__((always_inline)) CONV(decimal) {
    if (UNLIKELY(len < 2 || len > 17)) return badv(c, err, "decimal", len);
    const mcdc_field *f = c->field;
    /* The common case, precision up to 18 at its own scale (4 or 8 bytes
     * of magnitude): 64-bit arithmetic; else, and for every error, the
     * general path. */
    if ((len == 5 || len == 9) && tc->scale == f->scale && f->precision <= 19) {
        uint64_t mag = len == 9 ? tds_u64(p + 1) : tds_u32(p + 1);
        if (mag < (uint64_t)POW10[f->precision]) {
            uint64_t neg = p[0] == 0; /* sign byte 0: negative */
            uint64_t m = 0 - (neg & (mag != 0)); /* all ones for a negative value */
            uint64_t lo = (mag ^ m) - m, hi = m;
            uint8_t *d = c->values + (size_t)c->length * 16;
            memcpy(d, &lo, 8);
            memcpy(d + 8, &hi, 8);
            c->length++;
            return MCDC_OK;
        }
    }
    return put_decimal(c, p[0] == 0, decimal_mag(p, len), tc->scale, err);
}
CONV(money) {
    (void)tc;
    if (UNLIKELY(len != 4 && len != 8)) return badv(c, err, "money", len);
    int64_t v = money_of(p, len);
    return put_decimal(c, v < 0,
                       v < 0 ? (mcdc_u128)((uint64_t)0 - (uint64_t)v) : (mcdc_u128)(uint64_t)v,
                       4, err);
}
CONV(decimal_double) {
    if (UNLIKELY(len < 2 || len > 17)) return badv(c, err, "decimal", len);
    long double v = (long double)decimal_mag(p, len);
    for (int k = 0; k < tc->scale; k++) v /= 10.0L;
    double d = (double)(p[0] == 0 ? -v : v);
    put_fixed(c, &d, 8);
    return MCDC_OK;
}
CONV(money_double) {
    (void)tc;
    if (UNLIKELY(len != 4 && len != 8)) return badv(c, err, "money", len);
    double d = (double)((long double)money_of(p, len) / 10000.0L);
    put_fixed(c, &d, 8);
    return MCDC_OK;
}
CONV(datetime) {
    (void)tc;
    int64_t us;
    if (UNLIKELY((len != 4 && len != 8) || !datetime_us(p, len, &us)))
        return badv(c, err, "datetime", len);
    put_fixed(c, &us, 8);
    return MCDC_OK;
}
CONV(dt2) {
    uint32_t want = (uint32_t)time_bytes(tc->scale) + 3u + (tc->type == TDS_DATETIMEOFFSETN ? 2u : 0u);
    if (UNLIKELY(len != want)) return badv(c, err, "datetime2", len);
    int64_t us = dt2_us(p, tc->scale);
    put_fixed(c, &us, 8);
    return MCDC_OK;
}
/* datetime2(3), the change reader's commit times: 4 bytes of ms, 3 of days */
CONV(dt2s3) {
    (void)tc;
    if (UNLIKELY(len != 7)) return badv(c, err, "datetime2", len);
    int64_t us = ((int64_t)le_n(p + 4, 3) - TDS_DAYS_0001_TO_1970) * TDS_US_PER_DAY +
                 (int64_t)tds_u32(p) * 1000;
    put_fixed(c, &us, 8);
    return MCDC_OK;
}
/* datetime2(7), the default scale: 5 bytes of 100 ns units, 3 of days */
CONV(dt2s7) {
    (void)tc;
    if (UNLIKELY(len != 8)) return badv(c, err, "datetime2", len);
    int64_t us = ((int64_t)le_n(p + 5, 3) - TDS_DAYS_0001_TO_1970) * TDS_US_PER_DAY +
                 (int64_t)(le_n(p, 5) / 10);
    put_fixed(c, &us, 8);
    return MCDC_OK;
}
CONV(date32) {
    (void)tc;
    if (UNLIKELY(len != 3)) return badv(c, err, "date", len);
    int32_t d = (int32_t)le_n(p, 3) - TDS_DAYS_0001_TO_1970;
    put_fixed(c, &d, 4);
    return MCDC_OK;
}
CONV(date_ts) {
    (void)tc;
    if (UNLIKELY(len != 3)) return badv(c, err, "date", len);
    int64_t us = ((int64_t)le_n(p, 3) - TDS_DAYS_0001_TO_1970) * TDS_US_PER_DAY;
    put_fixed(c, &us, 8);
    return MCDC_OK;
}
CONV(time_text) {
    if (UNLIKELY(len != (uint32_t)time_bytes(tc->scale))) return badv(c, err, "time", len);
    char buf[32];
    int n = mcdc_driver_time_text(buf, sizeof buf, time_100ns(p, tc->scale), tc->scale);
    return put_var(c, buf, (uint32_t)n, err);
}
#if defined(__SSE2__)
/* mcdc_driver_guid_text with SSSE3: the 32 hex digits by a table lookup,
 * then put in display order with the dashes by two byte shuffles; three
 * stores (16 + 16 + 4) fill exactly the 36 bytes. */
__attribute__((target("ssse3"))) static void guid_text_ssse3(uint8_t *o, const uint8_t p[16]) {
    const __m128i hex = _mm_setr_epi8('0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'A', 'B',
                                      'C', 'D', 'E', 'F');
    const __m128i f = _mm_set1_epi8(0x0F);
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i hi = _mm_shuffle_epi8(hex, _mm_and_si128(_mm_srli_epi16(v, 4), f));
    __m128i lo = _mm_shuffle_epi8(hex, _mm_and_si128(v, f));
    __m128i d0 = _mm_unpacklo_epi8(hi, lo), d1 = _mm_unpackhi_epi8(hi, lo); /* bytes 0-7, 8-15 */
    /* bytes 3 2 1 0 - 5 4 - 7 6 - 8 9 - 10..15; -1 lanes are zero, then the dashes */
    __m128i a = _mm_shuffle_epi8(d0, _mm_setr_epi8(6, 7, 4, 5, 2, 3, 0, 1, -1, 10, 11, 8, 9, -1,
                                                   14, 15));
    a = _mm_or_si128(a, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, '-', 0, 0, 0, 0, '-', 0, 0));
    __m128i b = _mm_or_si128(
        _mm_shuffle_epi8(d0, _mm_setr_epi8(12, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                           -1, -1)),
        _mm_shuffle_epi8(d1, _mm_setr_epi8(-1, -1, -1, 0, 1, 2, 3, -1, 4, 5, 6, 7, 8, 9, 10, 11)));
    b = _mm_or_si128(b, _mm_setr_epi8(0, 0, '-', 0, 0, 0, 0, '-', 0, 0, 0, 0, 0, 0, 0, 0));
    _mm_storeu_si128((__m128i *)(void *)o, a);
    _mm_storeu_si128((__m128i *)(void *)(o + 16), b);
    uint32_t last = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(d1, 12));
    memcpy(o + 32, &last, 4);
}
#endif
CONV(guid) {
    if (UNLIKELY(len != 16)) return badv(c, err, "uniqueidentifier", len);
    int rc = room(c, 36, err);
    if (rc != MCDC_OK) return rc;
#if defined(__SSE2__)
    if (tc != NULL && tc->ssse3)
        guid_text_ssse3(c->data + c->data_len, p);
    else
#endif
        mcdc_driver_guid_text((char *)c->data + c->data_len, p);
    c->data_len += 36;
    end_var(c);
    return MCDC_OK;
}
__attribute__((always_inline)) CONV(bytes) {
    (void)tc;
    return put_wire_var(c, p, len, err);
}
/* ---- text to UTF-8 -------------------------------------------------------------
 * Fast paths work on 8-byte words read in host order: the wire is
 * little-endian, so they need a little-endian host. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "text fast paths read LE words");
#define UTF8_SLACK 4u /* a BMP code unit is written as one 4-byte store */

static inline uint64_t ld64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}
static inline void st32(uint8_t *o, uint32_t v) { memcpy(o, &v, 4); }
static inline void st64(uint8_t *o, uint64_t v) { memcpy(o, &v, 8); }
/* 4 ASCII UTF-16 units (one per 16-bit lane) to 4 bytes */
static inline uint32_t pack4(uint64_t w) {
    return (uint32_t)(w & 0xFF) | (uint32_t)((w >> 8) & 0xFF00) | (uint32_t)((w >> 16) & 0xFF0000) |
           (uint32_t)((w >> 24) & 0xFF000000);
}
/* Whether one of 4 units is a surrogate (0xD800-0xDFFF): a lane of
 * (w & 0xF800) ^ 0xD800 is zero. */
static inline bool has_surrogate4(uint64_t w) {
    uint64_t x = (w & 0xF800F800F800F800ull) ^ 0xD800D800D800D800ull;
    return ((x - 0x0001000100010001ull) & ~x & 0x8000800080008000ull) != 0;
}
/* One BMP unit that is not a surrogate, without branches: 1-3 bytes
 * computed together, one 4-byte store (UTF8_SLACK). */
static inline uint8_t *utf8_bmp(uint8_t *o, uint32_t u) {
    uint32_t two = (0xC0 | (u >> 6)) | ((0x80 | (u & 0x3F)) << 8);
    uint32_t three = (0xE0 | (u >> 12)) | ((0x80 | ((u >> 6) & 0x3F)) << 8) |
                     ((0x80 | (u & 0x3F)) << 16);
    st32(o, u < 0x80 ? u : u < 0x800 ? two : three);
    return o + 1 + (u >= 0x80) + (u >= 0x800);
}
#if defined(__SSE2__)
/* 8 BMP units without surrogates (one per 16-bit lane of v) to UTF-8:
 * every lane's 1-3 bytes (*a: lanes 0-3, *b: lanes 4-7, one 32-bit lane
 * each) and its length are computed together; returns the running sum of
 * the lengths (lane k: bytes of lanes 0..k). */
static inline __m128i utf8_bmp8_lanes(__m128i v, __m128i *a, __m128i *b) {
    const __m128i x3f = _mm_set1_epi16(0x3F), x80 = _mm_set1_epi16(0x80);
    __m128i z1 = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xFF80)),
                                 _mm_setzero_si128()); /* u < 0x80 */
    __m128i z2 = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xF800)),
                                 _mm_setzero_si128()); /* u < 0x800 */
    __m128i last = _mm_or_si128(_mm_and_si128(v, x3f), x80); /* 10xxxxxx of bits 0-5 */
    __m128i u6 = _mm_srli_epi16(v, 6);
    __m128i mid = _mm_or_si128(_mm_and_si128(u6, x3f), x80); /* 10xxxxxx of bits 6-11 */
    __m128i two = _mm_or_si128(_mm_or_si128(u6, _mm_set1_epi16(0xC0)), _mm_slli_epi16(last, 8));
    __m128i three = _mm_or_si128(_mm_or_si128(_mm_srli_epi16(v, 12), _mm_set1_epi16(0xE0)),
                                 _mm_slli_epi16(mid, 8));
    __m128i lo = _mm_or_si128(_mm_and_si128(z2, two), _mm_andnot_si128(z2, three));
    lo = _mm_or_si128(_mm_and_si128(z1, v), _mm_andnot_si128(z1, lo));
    *a = _mm_unpacklo_epi16(lo, last);
    *b = _mm_unpackhi_epi16(lo, last);
    /* length 3 + (u < 0x80 ? -1 : 0) + (u < 0x800 ? -1 : 0), then summed */
    __m128i len = _mm_add_epi16(_mm_set1_epi16(3), _mm_add_epi16(z1, z2));
    len = _mm_add_epi16(len, _mm_slli_si128(len, 2));
    len = _mm_add_epi16(len, _mm_slli_si128(len, 4));
    return _mm_add_epi16(len, _mm_slli_si128(len, 8));
}
/* Writes the 8 lanes of utf8_bmp8_lanes at o, in order, one 4-byte store
 * each (UTF8_SLACK); returns the end. The stores do not depend on each
 * other. */
static inline uint8_t *utf8_bmp8_put(uint8_t *o, __m128i a, __m128i b, __m128i sum) {
#define LANE(k, x, j) st32(o + ((k) ? _mm_extract_epi16(sum, (k) - 1) : 0), \
                           (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(x, 4 * (j))))
    LANE(0, a, 0); LANE(1, a, 1); LANE(2, a, 2); LANE(3, a, 3);
    LANE(4, b, 0); LANE(5, b, 1); LANE(6, b, 2); LANE(7, b, 3);
#undef LANE
    return o + _mm_extract_epi16(sum, 7);
}
/* Whether one of 8 units is a surrogate (0xD800-0xDFFF). */
static inline bool has_surrogate8(__m128i v) {
    __m128i s = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xF800)),
                                _mm_set1_epi16((short)0xD800));
    return _mm_movemask_epi8(s) != 0;
}

/* SSSE3 (checked at run time): the lanes of 4 units packed together with
 * one byte shuffle instead of a store per unit. The shuffle depends on
 * the 4 lanes' lengths, told by a key: bit k is "unit k < 0x80", bit k + 4
 * "unit k < 0x800" (1, 2 or 3 bytes). UTF8_PACK[key] moves each lane's
 * bytes (the first 1-3 of its 4, as utf8_bmp8_lanes leaves them) next to
 * the previous lane's; UTF8_PACK_LEN[key] is their sum. Keys with a unit
 * below 0x80 but not below 0x800 never occur. Built by the preprocessor. */
#define PK_L(key, k) (3 - (((key) >> (k)) & 1) - (((key) >> ((k) + 4)) & 1))
#define PK_S1(key) PK_L(key, 0)
#define PK_S2(key) (PK_S1(key) + PK_L(key, 1))
#define PK_S3(key) (PK_S2(key) + PK_L(key, 2))
#define PK_N(key) (PK_S3(key) + PK_L(key, 3))
#define PK_SRC(key, j)                                                                        \
    ((j) < PK_S1(key)   ? (j)                                                                 \
     : (j) < PK_S2(key) ? 4 + (j) - PK_S1(key)                                                \
     : (j) < PK_S3(key) ? 8 + (j) - PK_S2(key)                                                \
     : (j) < PK_N(key)  ? 12 + (j) - PK_S3(key)                                               \
                        : 0x80)
#define PK_ROW(key)                                                                           \
    {PK_SRC(key, 0),  PK_SRC(key, 1),  PK_SRC(key, 2),  PK_SRC(key, 3),                       \
     PK_SRC(key, 4),  PK_SRC(key, 5),  PK_SRC(key, 6),  PK_SRC(key, 7),                       \
     PK_SRC(key, 8),  PK_SRC(key, 9),  PK_SRC(key, 10), PK_SRC(key, 11),                      \
     PK_SRC(key, 12), PK_SRC(key, 13), PK_SRC(key, 14), PK_SRC(key, 15)},
#define PK_ROW4(k) PK_ROW(k) PK_ROW((k) + 1) PK_ROW((k) + 2) PK_ROW((k) + 3)
#define PK_ROW16(k) PK_ROW4(k) PK_ROW4((k) + 4) PK_ROW4((k) + 8) PK_ROW4((k) + 12)
#define PK_LEN4(k) PK_N(k), PK_N((k) + 1), PK_N((k) + 2), PK_N((k) + 3),
#define PK_LEN16(k) PK_LEN4(k) PK_LEN4((k) + 4) PK_LEN4((k) + 8) PK_LEN4((k) + 12)
#define PK_ALL(M) M(0) M(16) M(32) M(48) M(64) M(80) M(96) M(112) M(128) M(144) M(160) \
                  M(176) M(192) M(208) M(224) M(240)
static const uint8_t UTF8_PACK[256][16] __attribute__((aligned(16))) = {PK_ALL(PK_ROW16)};
static const uint8_t UTF8_PACK_LEN[256] = {PK_ALL(PK_LEN16)};
#undef PK_L
#undef PK_S1
#undef PK_S2
#undef PK_S3
#undef PK_N
#undef PK_SRC
#undef PK_ROW
#undef PK_ROW4
#undef PK_ROW16
#undef PK_LEN4
#undef PK_LEN16
#undef PK_ALL

/* 8 BMP units without surrogates (one per 16-bit lane of v) to UTF-8 at
 * o, lanes 0..skip-1 excepted: those were written before, ending at o, and
 * are written again (the same bytes at the same places). Each 4-lane half
 * is one 16-byte store of which its 4-12 bytes count: the units reserve 3
 * bytes each and the value UTF8_SLACK more, so even the value's last 8
 * units' 16 bytes stay inside its room. Returns the end. */
__attribute__((target("ssse3"))) static inline uint8_t *utf8_bmp8_pack(uint8_t *o, __m128i v,
                                                                       int skip) {
    __m128i a, b;
    (void)utf8_bmp8_lanes(v, &a, &b);
    __m128i z1 = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xFF80)),
                                 _mm_setzero_si128());
    __m128i z2 = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xF800)),
                                 _mm_setzero_si128());
    unsigned m = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(z1, z2)); /* z1: 0-7, z2: 8-15 */
    unsigned ka = (m & 0x0Fu) | ((m >> 4) & 0xF0u), kb = ((m >> 4) & 0x0Fu) | ((m >> 8) & 0xF0u);
    if (skip > 0) { /* back over lanes 0..skip-1: the others counted as 1 byte */
        unsigned fa = skip < 4 ? (0x0Fu << skip) & 0x0Fu : 0;
        unsigned fb = skip > 4 ? (0x0Fu << (skip - 4)) & 0x0Fu : 0x0Fu;
        o -= UTF8_PACK_LEN[ka | fa | fa << 4] + UTF8_PACK_LEN[kb | fb | fb << 4] - (8 - skip);
    }
    __m128i sa = _mm_load_si128((const __m128i *)(const void *)UTF8_PACK[ka]);
    __m128i sb = _mm_load_si128((const __m128i *)(const void *)UTF8_PACK[kb]);
    _mm_storeu_si128((__m128i *)(void *)o, _mm_shuffle_epi8(a, sa));
    o += UTF8_PACK_LEN[ka];
    _mm_storeu_si128((__m128i *)(void *)o, _mm_shuffle_epi8(b, sb));
    return o + UTF8_PACK_LEN[kb];
}
#endif
/* Unit i of n (any value), the exact per-unit rules: a valid surrogate
 * pair is one 4-byte sequence, a lone surrogate U+FFFD. Advances *i. */
static uint8_t *utf16_one(uint8_t *o, const uint8_t *p, uint32_t n, uint32_t *i) {
    uint32_t u = tds_u16(p + 2 * *i);
    (*i)++;
    if (u < 0xD800 || u > 0xDFFF) return utf8_bmp(o, u);
    uint32_t lo = *i < n ? tds_u16(p + 2 * *i) : 0;
    if (u <= 0xDBFF && lo >= 0xDC00 && lo <= 0xDFFF) {
        uint32_t cp = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        (*i)++;
        o[0] = (uint8_t)(0xF0 | (cp >> 18));
        o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (uint8_t)(0x80 | (cp & 0x3F));
        return o + 4;
    }
    o[0] = 0xEF; /* unpaired surrogate: U+FFFD */
    o[1] = 0xBF;
    o[2] = 0xBD;
    return o + 3;
}
/* The conversion, instantiated twice (utf16_pack, utf16_plain) so that
 * the SSSE3 packing inlines into a loop compiled for it. */
__attribute__((always_inline)) static inline int utf16_body(mcdc_column *c, const uint8_t *p,
                                                           uint32_t len, bool pack,
                                                           mcdc_error *err) {
    (void)pack;
    if (UNLIKELY(len & 1)) return badv(c, err, "UTF-16", len);
    uint32_t n = len / 2;
    if (n == 0) {
        end_var(c);
        return MCDC_OK;
    }
    int rc = room(c, (int64_t)n * 3 + UTF8_SLACK, err);
    if (rc != MCDC_OK) return rc;
    uint8_t *const o0 = c->data + c->data_len;
    uint8_t *o = o0;
    uint32_t i = 0;
#if defined(__SSE2__)
    if (n >= 8) {
        /* 8 units a block: all ASCII packed, other BMP units expanded
         * together, a block with a surrogate unit by unit; a last
         * partial block is the value's last 8 units. */
        const __m128i ff80 = _mm_set1_epi16((short)0xFF80);
        while (i + 8 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 2 * i));
            if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(v, ff80), _mm_setzero_si128())) ==
                0xFFFF) {
                _mm_storel_epi64((__m128i *)(void *)o, _mm_packus_epi16(v, v));
                o += 8;
                i += 8;
            } else if (!has_surrogate8(v)) {
                if (pack) {
                    o = utf8_bmp8_pack(o, v, 0);
                } else {
                    __m128i a, b, sum = utf8_bmp8_lanes(v, &a, &b);
                    o = utf8_bmp8_put(o, a, b, sum);
                }
                i += 8;
            } else {
                for (uint32_t e = i + 8; i < e;) o = utf16_one(o, p, n, &i);
            }
        }
        if (i < n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 2 * (n - 8)));
            if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(v, ff80), _mm_setzero_si128())) ==
                0xFFFF) {
                /* all 8 ASCII: the lanes before i wrote one byte each, the
                 * output's last 8 - (n - i) bytes; written again the same */
                _mm_storel_epi64((__m128i *)(void *)(o - (8 - (n - i))), _mm_packus_epi16(v, v));
                o += n - i;
                i = n;
            } else if (!has_surrogate8(v) && pack) {
                o = utf8_bmp8_pack(o, v, (int)(8 - (n - i)));
                i = n;
            } else if (!has_surrogate8(v)) {
                /* lanes before i are written again, the same bytes at
                 * the same places: they hold no surrogate either */
                __m128i a, b, sum = utf8_bmp8_lanes(v, &a, &b);
                uint16_t at[8];
                _mm_storeu_si128((__m128i *)(void *)at, sum);
                o = utf8_bmp8_put(o - at[7 - (n - i)], a, b, sum);
                i = n;
            }
        }
    } else
#endif
    {
        /* Leading ASCII, 4 units a word; an all-ASCII value ends with one
         * overlapping word (the output so far is one byte per unit). */
        while (i + 4 <= n && (ld64(p + 2 * i) & 0xFF80FF80FF80FF80ull) == 0) {
            st32(o, pack4(ld64(p + 2 * i)));
            o += 4;
            i += 4;
        }
        if (i < n && n >= 4 && i + 4 > n &&
            (ld64(p + 2 * (n - 4)) & 0xFF80FF80FF80FF80ull) == 0) {
            st32(o0 + n - 4, pack4(ld64(p + 2 * (n - 4))));
            o = o0 + n;
            i = n;
        }
    }
    /* The rest: 4 units at a time without surrogates, else one by one. */
    while (i < n) {
        if (i + 4 <= n) {
            uint64_t w = ld64(p + 2 * i);
            if ((w & 0xFF80FF80FF80FF80ull) == 0) {
                st32(o, pack4(w));
                o += 4;
                i += 4;
                continue;
            }
            if (!has_surrogate4(w)) {
                o = utf8_bmp(o, (uint32_t)(w & 0xFFFF));
                o = utf8_bmp(o, (uint32_t)((w >> 16) & 0xFFFF));
                o = utf8_bmp(o, (uint32_t)((w >> 32) & 0xFFFF));
                o = utf8_bmp(o, (uint32_t)(w >> 48));
                i += 4;
                continue;
            }
        }
        o = utf16_one(o, p, n, &i);
    }
    c->data_len = o - c->data;
    end_var(c);
    return MCDC_OK;
}
#if defined(__SSE2__)
__attribute__((target("ssse3"))) static int utf16_pack(mcdc_column *c, const uint8_t *p,
                                                        uint32_t len, mcdc_error *err) {
    return utf16_body(c, p, len, true, err);
}
#endif
static int utf16_plain(mcdc_column *c, const uint8_t *p, uint32_t len, mcdc_error *err) {
    return utf16_body(c, p, len, false, err);
}
CONV(utf16) {
#if defined(__SSE2__)
    if (tc != NULL && tc->ssse3) return utf16_pack(c, p, len, err);
#endif
    (void)tc;
    return utf16_plain(c, p, len, err);
}
/* Windows-1252 0x80-0x9F; the five undefined bytes map to the C1 controls,
 * as Windows does. */
static const uint16_t CP1252_HI[32] = {
    0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
    0x2039, 0x0152, 0x008D, 0x017D, 0x008F, 0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
    0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178};
__attribute__((always_inline)) CONV(cp1252) {
    (void)tc;
    if (len == 0) {
        end_var(c);
        return MCDC_OK;
    }
    int rc = room(c, (int64_t)len * 3 + UTF8_SLACK, err);
    if (rc != MCDC_OK) return rc;
    uint8_t *const o0 = c->data + c->data_len;
    /* ASCII copied as it is checked, 16 (SSE2) or 8 bytes a step, the
     * value's last step overlapping (the output so far is one byte per
     * byte); from the first other byte on, byte by byte. A value of 8 to
     * 16 bytes is two overlapping words. */
    uint32_t i = 0;
#if defined(__SSE2__)
    if (len >= 16) {
        for (; i + 16 <= len; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
            if (_mm_movemask_epi8(v) != 0) break;
            _mm_storeu_si128((__m128i *)(void *)(o0 + i), v);
        }
        if (i + 16 > len && i < len) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + len - 16));
            if (_mm_movemask_epi8(v) == 0) {
                _mm_storeu_si128((__m128i *)(void *)(o0 + len - 16), v);
                i = len;
            }
        }
    } else
#endif
    if (len >= 8 && len <= 16) {
        uint64_t a = ld64(p), b = ld64(p + len - 8);
        if (((a | b) & 0x8080808080808080ull) == 0) {
            st64(o0, a);
            st64(o0 + len - 8, b);
            i = len;
        }
    }
    uint8_t *o = o0 + i;
    if (i < len) {
        while (i + 8 <= len && (ld64(p + i) & 0x8080808080808080ull) == 0) {
            st64(o0 + i, ld64(p + i));
            i += 8;
        }
        o = o0 + i;
        while (i < len) {
            if (i + 8 <= len) {
                uint64_t w = ld64(p + i);
                if ((w & 0x8080808080808080ull) == 0) {
                    st64(o, w);
                    o += 8;
                    i += 8;
                    continue;
                }
            }
            uint32_t b = p[i++];
            o = utf8_bmp(o, b < 0x80 ? b : b < 0xA0 ? CP1252_HI[b - 0x80] : b);
        }
    }
    c->data_len = o - c->data;
    end_var(c);
    return MCDC_OK;
}

/* Anything to text (casts to utf8, sql_variant). */
static int value_text(mcdc_column *c, const uint8_t *p, uint32_t len, const mcdc_tds_col *tc,
                      mcdc_error *err) {
    char buf[96];
    int n = 0;
    switch (tc->type) {
    case TDS_INT1: case TDS_INT2: case TDS_INT4: case TDS_INT8: case TDS_INTN: {
        bool ok;
        int64_t v = int_of(p, len, &ok);
        if (!ok) return badv(c, err, "integer", len);
        n = (int)mcdc_text_int(buf, v);
        break;
    }
    case TDS_BIT: case TDS_BITN:
        if (len != 1) return badv(c, err, "bit", len);
        n = snprintf(buf, sizeof buf, "%d", p[0] ? 1 : 0);
        break;
    case TDS_FLT4: case TDS_FLT8: case TDS_FLTN:
        if (len == 4) {
            float f;
            memcpy(&f, p, 4);
            n = (int)mcdc_text_float(buf, f);
        } else if (len == 8) {
            double d;
            memcpy(&d, p, 8);
            n = (int)mcdc_text_double(buf, d);
        } else {
            return badv(c, err, "float", len);
        }
        break;
    case TDS_MONEY: case TDS_MONEY4: case TDS_MONEYN: {
        if (len != 4 && len != 8) return badv(c, err, "money", len);
        int64_t v = money_of(p, len);
        n = (int)mcdc_text_decimal(buf, (uint64_t)v, v < 0 ? -1 : 0, 4);
        break;
    }
    case TDS_DECIMALN: case TDS_NUMERICN: case TDS_DECIMAL: case TDS_NUMERIC: {
        if (len < 2 || len > 17) return badv(c, err, "decimal", len);
        mcdc_u128 mag = decimal_mag(p, len);
        n = (int)mcdc_text_decimal_parts(buf, p[0] == 0, (uint64_t)mag, (uint64_t)(mag >> 64),
                                         tc->scale);
        break;
    }
    case TDS_DATETIME: case TDS_DATETIM4: case TDS_DATETIMN: {
        int64_t us;
        if ((len != 4 && len != 8) || !datetime_us(p, len, &us))
            return badv(c, err, "datetime", len);
        if (len == 4)
            n = mcdc_driver_datetime_text(buf, sizeof buf, tds_u16(p), (uint64_t)tds_u16(p + 2) * 600000000u, 0,
                        true, false, 0);
        else
            n = mcdc_driver_datetime_text(buf, sizeof buf, (int32_t)tds_u32(p),
                        ((uint64_t)tds_u32(p + 4) * 10 + 1) / 3 * 10000u, 3, true, false, 0);
        break;
    }
    case TDS_DATEN:
        if (len != 3) return badv(c, err, "date", len);
        n = mcdc_driver_datetime_text(buf, sizeof buf, (int64_t)le_n(p, 3) - (TDS_DAYS_0001_TO_1970 - TDS_DAYS_1900_TO_1970),
                    0, 0, false, false, 0);
        break;
    case TDS_TIMEN:
        if (len != (uint32_t)time_bytes(tc->scale)) return badv(c, err, "time", len);
        n = mcdc_driver_time_text(buf, sizeof buf, time_100ns(p, tc->scale), tc->scale);
        break;
    case TDS_DATETIME2N: case TDS_DATETIMEOFFSETN: {
        bool dto = tc->type == TDS_DATETIMEOFFSETN;
        uint32_t tb = (uint32_t)time_bytes(tc->scale);
        if (len != tb + 3 + (dto ? 2u : 0u)) return badv(c, err, "datetime2", len);
        int off = dto ? (int16_t)tds_u16(p + tb + 3) : 0;
        n = mcdc_driver_datetime_text(buf, sizeof buf,
                    (int64_t)le_n(p + tb, 3) - (TDS_DAYS_0001_TO_1970 - TDS_DAYS_1900_TO_1970),
                    time_100ns(p, tc->scale), tc->scale, true, dto, off);
        break;
    }
    case TDS_GUID:
        if (len != 16) return badv(c, err, "uniqueidentifier", len);
        mcdc_driver_guid_text(buf, p);
        n = 36;
        break;
    case TDS_BIGVARBINARY: case TDS_BIGBINARY: case TDS_IMAGE: case TDS_UDT: {
        int rc = room(c, (int64_t)len * 2 + 2, err);
        if (rc != MCDC_OK) return rc;
        c->data_len += (int64_t)mcdc_text_hex((char *)c->data + c->data_len, p, len);
        end_var(c);
        return MCDC_OK;
    }
    default:
        if (tc->utf16) return conv_utf16(c, p, len, tc, err);
        if (tc->utf8) return conv_bytes(c, p, len, tc, err);
        return conv_cp1252(c, p, len, tc, err);
    }
    return put_var(c, buf, (uint32_t)n, err);
}
CONV(text) { return value_text(c, p, len, tc, err); }

static int int_to_target(mcdc_column *c, int64_t v, mcdc_error *err) {
    switch (c->field->type) {
    case MCDC_TYPE_INT16: { int16_t x = (int16_t)v; put_fixed(c, &x, 2); return MCDC_OK; }
    case MCDC_TYPE_INT32: { int32_t x = (int32_t)v; put_fixed(c, &x, 4); return MCDC_OK; }
    case MCDC_TYPE_INT64: put_fixed(c, &v, 8); return MCDC_OK;
    case MCDC_TYPE_FLOAT: { float x = (float)v; put_fixed(c, &x, 4); return MCDC_OK; }
    case MCDC_TYPE_DOUBLE: { double x = (double)v; put_fixed(c, &x, 8); return MCDC_OK; }
    case MCDC_TYPE_BOOL: {
        int64_t i = c->length;
        if (v) c->values[i >> 3] |= (uint8_t)(1u << (i & 7));
        else c->values[i >> 3] &= (uint8_t)~(1u << (i & 7));
        c->length++;
        return MCDC_OK;
    }
    case MCDC_TYPE_DECIMAL:
        return put_decimal(c, v < 0,
                           v < 0 ? (mcdc_u128)((uint64_t)0 - (uint64_t)v) : (mcdc_u128)(uint64_t)v,
                           0, err);
    default:
        return mcdc_error_set(err, MCDC_E_SCHEMA, "column '%s': an integer cannot be stored here",
                              c->field->name);
    }
}

/* sql_variant: base type, property bytes, data. */
CONV(variant) {
    (void)tc;
    if (len < 2 || (uint32_t)p[1] + 2u > len) return badv(c, err, "sql_variant", len);
    mcdc_tds_col bt;
    memset(&bt, 0, sizeof bt);
    bt.type = p[0];
    uint8_t np = p[1];
    const uint8_t *props = p + 2;
    switch (bt.type) {
    case TDS_DECIMALN: case TDS_NUMERICN:
        if (np < 2) return badv(c, err, "sql_variant decimal", len);
        bt.precision = props[0];
        bt.scale = props[1];
        break;
    case TDS_TIMEN: case TDS_DATETIME2N: case TDS_DATETIMEOFFSETN:
        if (np < 1 || props[0] > 7) return badv(c, err, "sql_variant time", len);
        bt.scale = props[0];
        break;
    case TDS_NVARCHAR: case TDS_NCHAR: bt.utf16 = true; break;
    case TDS_BIGVARCHAR: case TDS_BIGCHAR:
        if (np >= 5) bt.utf8 = (props[3] & 0x04) != 0;
        break;
    default: break;
    }
    return value_text(c, p + 2 + np, len - 2u - np, &bt, err);
}

/* ---- wire readers fused with converters ------------------------------------------- */
#define CONVS(X)                                                                              \
    X(int) X(u8_i16) X(copy2) X(copy4) X(copy8) X(fcopy4) X(fcopy8) X(real_double) X(bit)    \
    X(decimal) X(money) X(decimal_double) X(money_double) X(datetime) X(dt2) X(dt2s3) X(dt2s7) X(date32) X(date_ts) X(time_text) X(guid)          \
    X(bytes) X(utf16) X(cp1252) X(text) X(variant)

/* The null width (put_null_w) of each converter's target column. */
enum {
    NULLW_int = NULLW_ANY, NULLW_u8_i16 = 2, NULLW_copy2 = 2, NULLW_copy4 = 4, NULLW_copy8 = 8,
    NULLW_fcopy4 = 4, NULLW_fcopy8 = 8, NULLW_real_double = 8, NULLW_bit = 0,
    NULLW_decimal = 16, NULLW_money = 16, NULLW_decimal_double = 8, NULLW_money_double = 8,
    NULLW_datetime = 8, NULLW_dt2 = 8, NULLW_dt2s3 = 8, NULLW_dt2s7 = 8, NULLW_date32 = 4, NULLW_date_ts = 8,
    NULLW_time_text = NULLW_VAR, NULLW_guid = NULLW_VAR, NULLW_bytes = NULLW_VAR,
    NULLW_utf16 = NULLW_VAR, NULLW_cp1252 = NULLW_VAR, NULLW_text = NULLW_VAR,
    NULLW_variant = NULLW_VAR
};

/* Per-cell readers. The fast path (the whole value in the window, a
 * length within the type) makes only tail calls, so it needs no stack
 * frame; the checked path (more packets to read, errors) is out of line
 * and starts over from the same position. */
#define DEC_FIXED(name)                                                                       \
    COLD static int fixed_##name##_slow(mcdc_tds_stream *s, mcdc_column *c,                   \
                                        const mcdc_tds_col *tc, mcdc_error *err) {            \
        uint32_t n = tc->max_len;                                                             \
        int rc = mcdc_tds_need(s, n, err);                                                    \
        if (rc != MCDC_OK) return rc;                                                         \
        const uint8_t *p = s->buf + s->pos;                                                   \
        s->pos += n;                                                                          \
        return conv_##name(c, p, n, tc, err);                                                 \
    }                                                                                         \
    static int fixed_##name(mcdc_tds_stream *s, mcdc_column *c, const mcdc_tds_col *tc,       \
                            mcdc_error *err) {                                                \
        uint32_t n = tc->max_len;                                                             \
        if (UNLIKELY(s->len - s->pos < n)) return fixed_##name##_slow(s, c, tc, err);         \
        const uint8_t *p = s->buf + s->pos;                                                   \
        s->pos += n;                                                                          \
        return conv_##name(c, p, n, tc, err);                                                 \
    }
/* A value after a W-byte length (1: NULL is 0; 2: NULL is 0xFFFF). */
#define DEC_LEN(kind, W, NULLV, name)                                                         \
    COLD static int kind##_##name##_slow(mcdc_tds_stream *s, mcdc_column *c,                  \
                                         const mcdc_tds_col *tc, mcdc_error *err) {           \
        int rc = mcdc_tds_need(s, W, err);                                                    \
        if (rc != MCDC_OK) return rc;                                                         \
        uint32_t n = W == 1 ? s->buf[s->pos] : tds_u16(s->buf + s->pos);                      \
        if (n == NULLV) {                                                                     \
            s->pos += W;                                                                      \
            return put_null_w(c, NULLW_##name, err);                                          \
        }                                                                                     \
        if (n > tc->max_len) return bad(s, err, "a value of %s%ld bytes over its type", "", (long)n); \
        rc = mcdc_tds_need(s, W + n, err);                                                    \
        if (rc != MCDC_OK) return rc;                                                         \
        const uint8_t *p = s->buf + s->pos + W;                                               \
        s->pos += W + n;                                                                      \
        return conv_##name(c, p, n, tc, err);                                                 \
    }                                                                                         \
    static int kind##_##name(mcdc_tds_stream *s, mcdc_column *c, const mcdc_tds_col *tc,      \
                             mcdc_error *err) {                                               \
        size_t avail = s->len - s->pos;                                                       \
        if (UNLIKELY(avail < W)) return kind##_##name##_slow(s, c, tc, err);                  \
        uint32_t n = W == 1 ? s->buf[s->pos] : tds_u16(s->buf + s->pos);                      \
        if (n == NULLV) {                                                                     \
            s->pos += W;                                                                      \
            return put_null_w(c, NULLW_##name, err);                                          \
        }                                                                                     \
        if (UNLIKELY(n > tc->max_len || avail < W + n))                                       \
            return kind##_##name##_slow(s, c, tc, err);                                       \
        const uint8_t *p = s->buf + s->pos + W;                                               \
        s->pos += W + n;                                                                      \
        return conv_##name(c, p, n, tc, err);                                                 \
    }
#define DEC_BLEN(name) DEC_LEN(blen, 1u, 0u, name)
#define DEC_USLEN(name) DEC_LEN(uslen, 2u, 0xFFFFu, name)
#define DEF_ALL(name) DEC_FIXED(name) DEC_BLEN(name) DEC_USLEN(name)
CONVS(DEF_ALL)

typedef enum {
#define ENUM(name) K_##name,
    CONVS(ENUM)
#undef ENUM
    K_COUNT
} conv_kind;

static const mcdc_tds_dec_fn FIXED_FN[K_COUNT] = {
#define F(name) fixed_##name,
    CONVS(F)
#undef F
};
static const mcdc_tds_dec_fn BLEN_FN[K_COUNT] = {
#define F(name) blen_##name,
    CONVS(F)
#undef F
};
static const mcdc_tds_dec_fn USLEN_FN[K_COUNT] = {
#define F(name) uslen_##name,
    CONVS(F)
#undef F
};
static const int8_t NULLW_OF[K_COUNT] = {
#define F(name) NULLW_##name,
    CONVS(F)
#undef F
};
#define WRAP(name)                                                                            \
    static int cv_##name(mcdc_column *c, const uint8_t *p, uint32_t len,                      \
                         const mcdc_tds_col *tc, mcdc_error *err) {                           \
        return conv_##name(c, p, len, tc, err);                                               \
    }
CONVS(WRAP)
static const mcdc_tds_conv_fn CONV_FN[K_COUNT] = {
#define F(name) cv_##name,
    CONVS(F)
#undef F
};

/* Copies n bytes of the reply into scratch (in window-sized pieces). */
static int gather(mcdc_tds_stream *s, uint64_t n, mcdc_error *err) {
    if (s->scratch.len + n > MCDC_VALUE_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "TDS: a value of more than %u bytes (MCDC_VALUE_BYTES_MAX)",
                              MCDC_VALUE_BYTES_MAX);
    while (n > 0) {
        int rc = mcdc_tds_need(s, 1, err);
        if (rc != MCDC_OK) return rc;
        size_t k = s->len - s->pos;
        if (k > n) k = (size_t)n;
        if (s->scratch.limit == 0) s->scratch.limit = MCDC_VALUE_BYTES_MAX + 16u;
        rc = mcdc_buf_append(&s->scratch, s->buf + s->pos, k, err);
        if (rc != MCDC_OK) return rc;
        s->pos += k;
        n -= k;
    }
    return MCDC_OK;
}
static int skip_n(mcdc_tds_stream *s, uint64_t n, mcdc_error *err) {
    while (n > 0) {
        int rc = mcdc_tds_need(s, 1, err);
        if (rc != MCDC_OK) return rc;
        size_t k = s->len - s->pos;
        if (k > n) k = (size_t)n;
        s->pos += k;
        n -= k;
    }
    return MCDC_OK;
}

/* PLP value: reads it into scratch (keep = true) or skips it. *is_null. */
static int read_plp(mcdc_tds_stream *s, bool keep, bool *is_null, mcdc_error *err) {
    *is_null = false;
    s->scratch.len = 0;
    int rc = mcdc_tds_need(s, 8, err);
    if (rc != MCDC_OK) return rc;
    uint64_t total = tds_u64(s->buf + s->pos);
    s->pos += 8;
    if (total == TDS_PLP_NULL) {
        *is_null = true;
        return MCDC_OK;
    }
    uint64_t got = 0;
    for (;;) {
        rc = mcdc_tds_need(s, 4, err);
        if (rc != MCDC_OK) return rc;
        uint32_t k = tds_u32(s->buf + s->pos);
        s->pos += 4;
        if (k == 0) break;
        got += k;
        if (total != TDS_PLP_UNKNOWN && got > total)
            return bad(s, err, "PLP chunks longer than the announced %s%ld bytes", "", (long)total);
        rc = keep ? gather(s, k, err) : skip_n(s, k, err);
        if (rc != MCDC_OK) return rc;
    }
    if (total != TDS_PLP_UNKNOWN && got != total)
        return bad(s, err, "PLP chunks shorter than the announced %s%ld bytes", "", (long)total);
    return MCDC_OK;
}
static int read_longlen(mcdc_tds_stream *s, const mcdc_tds_col *tc, bool keep, bool *is_null,
                        mcdc_error *err) {
    *is_null = false;
    s->scratch.len = 0;
    int rc = mcdc_tds_need(s, 1, err);
    if (rc != MCDC_OK) return rc;
    uint32_t tp = s->buf[s->pos];
    s->pos++;
    if (tp == 0) {
        *is_null = true;
        return MCDC_OK;
    }
    rc = mcdc_tds_need(s, tp + 8u + 4u, err);
    if (rc != MCDC_OK) return rc;
    uint32_t n = tds_u32(s->buf + s->pos + tp + 8);
    s->pos += tp + 8u + 4u;
    if (n > tc->max_len && tc->max_len != 0)
        return bad(s, err, "a text value of %s%ld bytes over its type", "", (long)n);
    return keep ? gather(s, n, err) : skip_n(s, n, err);
}
static int read_variant(mcdc_tds_stream *s, const mcdc_tds_col *tc, bool keep, bool *is_null,
                        mcdc_error *err) {
    *is_null = false;
    s->scratch.len = 0;
    int rc = mcdc_tds_need(s, 4, err);
    if (rc != MCDC_OK) return rc;
    uint32_t n = tds_u32(s->buf + s->pos);
    s->pos += 4;
    if (n == 0) {
        *is_null = true;
        return MCDC_OK;
    }
    if (n > tc->max_len) return bad(s, err, "a sql_variant of %s%ld bytes over its type", "", (long)n);
    return keep ? gather(s, n, err) : skip_n(s, n, err);
}

static int dec_plp(mcdc_tds_stream *s, mcdc_column *c, const mcdc_tds_col *tc, mcdc_error *err) {
    bool isnull;
    int rc = read_plp(s, true, &isnull, err);
    if (rc != MCDC_OK) return rc;
    if (isnull) return mcdc_col_append_null(c, err);
    return tc->conv(c, s->scratch.data ? s->scratch.data : (const uint8_t *)"",
                    (uint32_t)s->scratch.len, tc, err);
}
static int dec_longlen(mcdc_tds_stream *s, mcdc_column *c, const mcdc_tds_col *tc,
                       mcdc_error *err) {
    bool isnull;
    int rc = read_longlen(s, tc, true, &isnull, err);
    if (rc != MCDC_OK) return rc;
    if (isnull) return mcdc_col_append_null(c, err);
    return tc->conv(c, s->scratch.data ? s->scratch.data : (const uint8_t *)"",
                    (uint32_t)s->scratch.len, tc, err);
}
static int dec_variant(mcdc_tds_stream *s, mcdc_column *c, const mcdc_tds_col *tc,
                       mcdc_error *err) {
    bool isnull;
    int rc = read_variant(s, tc, true, &isnull, err);
    if (rc != MCDC_OK) return rc;
    if (isnull) return mcdc_col_append_null(c, err);
    return tc->conv(c, s->scratch.data, (uint32_t)s->scratch.len, tc, err);
}

static int skip_value(mcdc_tds_stream *s, const mcdc_tds_col *tc, mcdc_error *err) {
    bool isnull;
    int rc;
    switch (tc->wire) {
    case TDS_WIRE_FIXED: return skip_n(s, tc->max_len, err);
    case TDS_WIRE_BYTELEN: {
        rc = mcdc_tds_need(s, 1, err);
        if (rc != MCDC_OK) return rc;
        uint32_t n = s->buf[s->pos++];
        if (n > tc->max_len) return bad(s, err, "a value of %s%ld bytes over its type", "", (long)n);
        return skip_n(s, n, err);
    }
    case TDS_WIRE_USHORTLEN: {
        rc = mcdc_tds_need(s, 2, err);
        if (rc != MCDC_OK) return rc;
        uint32_t n = tds_u16(s->buf + s->pos);
        s->pos += 2;
        if (n == 0xFFFF) return MCDC_OK;
        if (n > tc->max_len) return bad(s, err, "a value of %s%ld bytes over its type", "", (long)n);
        return skip_n(s, n, err);
    }
    case TDS_WIRE_PLP: return read_plp(s, false, &isnull, err);
    case TDS_WIRE_LONGLEN: return read_longlen(s, tc, false, &isnull, err);
    case TDS_WIRE_VARIANT: return read_variant(s, tc, false, &isnull, err);
    }
    MCDC_UNREACHABLE();
}

/* ---- metadata ------------------------------------------------------------------- */
void mcdc_tds_meta_clear(mcdc_tds_meta *m) {
    for (int i = 0; i < m->ncols; i++) mcdc_free(m->cols[i].name);
    mcdc_free(m->cols);
    m->cols = NULL;
    m->ncols = 0;
}

/* UTF-16LE (n code units at p) to a new NUL-terminated UTF-8 string. */
static char *utf16_to_cstr(const uint8_t *p, uint32_t n, mcdc_error *err) {
    mcdc_field f = {.name = (char *)"name", .type = MCDC_TYPE_UTF8};
    mcdc_column c = {.field = &f};
    int32_t offs[2] = {0, 0};
    c.offsets = offs;
    c.data = mcdc_malloc((size_t)n * 3 + UTF8_SLACK + 1);
    if (c.data == NULL) {
        mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        return NULL;
    }
    c.data_cap = (int64_t)n * 3 + UTF8_SLACK + 1;
    (void)conv_utf16(&c, p, n * 2, NULL, err);
    c.data[c.data_len] = 0;
    return (char *)c.data;
}

/* Reads a B_VARCHAR (1-byte count of UTF-16 units) and skips it. */
static int skip_bvarchar(mcdc_tds_stream *s, mcdc_error *err) {
    int rc = mcdc_tds_need(s, 1, err);
    if (rc != MCDC_OK) return rc;
    uint32_t n = s->buf[s->pos++];
    return skip_n(s, (uint64_t)n * 2, err);
}
static int skip_usvarchar(mcdc_tds_stream *s, mcdc_error *err) {
    int rc = mcdc_tds_need(s, 2, err);
    if (rc != MCDC_OK) return rc;
    uint32_t n = tds_u16(s->buf + s->pos);
    s->pos += 2;
    return skip_n(s, (uint64_t)n * 2, err);
}

/* TYPE_INFO after the type byte (already in tc->type): the wire form and
 * lengths. The batch type comes from mcdc_sql_types.c. */
static int read_type_info(mcdc_tds_stream *s, mcdc_tds_col *tc, bool in_colmetadata,
                          mcdc_error *err) {
    int rc = MCDC_OK;
    uint8_t t = tc->type;
    switch (t) {
    case TDS_INT1: tc->max_len = 1; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_BIT: tc->max_len = 1; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_INT2: tc->max_len = 2; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_INT4: tc->max_len = 4; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_INT8: tc->max_len = 8; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_FLT4: tc->max_len = 4; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_FLT8: tc->max_len = 8; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_MONEY: tc->max_len = 8; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_MONEY4: tc->max_len = 4; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_DATETIME: tc->max_len = 8; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_DATETIM4: tc->max_len = 4; tc->wire = TDS_WIRE_FIXED; return MCDC_OK;
    case TDS_INTN: case TDS_BITN: case TDS_FLTN: case TDS_MONEYN: case TDS_DATETIMN: case TDS_GUID: {
        rc = mcdc_tds_need(s, 1, err);
        if (rc != MCDC_OK) return rc;
        uint8_t n = s->buf[s->pos++];
        tc->max_len = n;
        tc->wire = TDS_WIRE_BYTELEN;
        bool ok = false;
        switch (t) {
        case TDS_INTN: ok = n == 1 || n == 2 || n == 4 || n == 8; break;
        case TDS_BITN: ok = n == 1; break;
        case TDS_FLTN: ok = n == 4 || n == 8; break;
        case TDS_MONEYN: ok = n == 4 || n == 8; break;
        case TDS_DATETIMN: ok = n == 4 || n == 8; break;
        default: ok = n == 16; break;
        }
        if (!ok) return bad(s, err, "type 0x%s with length %ld", t == TDS_INTN ? "26" : "nn", (long)n);
        return MCDC_OK;
    }
    case TDS_DECIMALN: case TDS_NUMERICN: case TDS_DECIMAL: case TDS_NUMERIC: {
        rc = mcdc_tds_need(s, 3, err);
        if (rc != MCDC_OK) return rc;
        const uint8_t *p = s->buf + s->pos;
        s->pos += 3;
        tc->max_len = p[0];
        tc->precision = p[1];
        tc->scale = p[2];
        tc->wire = TDS_WIRE_BYTELEN;
        if (p[0] < 2 || p[0] > 17 || p[1] < 1 || p[1] > 38 || p[2] > p[1])
            return bad(s, err, "decimal TYPE_INFO%s (length %ld)", "", (long)p[0]);
        return MCDC_OK;
    }
    case TDS_DATEN:
        tc->max_len = 3;
        tc->wire = TDS_WIRE_BYTELEN;
        return MCDC_OK;
    case TDS_TIMEN: case TDS_DATETIME2N: case TDS_DATETIMEOFFSETN: {
        rc = mcdc_tds_need(s, 1, err);
        if (rc != MCDC_OK) return rc;
        uint8_t sc = s->buf[s->pos++];
        if (sc > 7) return bad(s, err, "time scale%s %ld", "", (long)sc);
        tc->scale = sc;
        tc->wire = TDS_WIRE_BYTELEN;
        tc->max_len = (uint32_t)time_bytes(sc) + (t == TDS_TIMEN ? 0u : 3u) +
                      (t == TDS_DATETIMEOFFSETN ? 2u : 0u);
        return MCDC_OK;
    }
    case TDS_BIGVARBINARY: case TDS_BIGBINARY: case TDS_BIGVARCHAR: case TDS_BIGCHAR:
    case TDS_NVARCHAR: case TDS_NCHAR: {
        bool chr = t == TDS_BIGVARCHAR || t == TDS_BIGCHAR || t == TDS_NVARCHAR || t == TDS_NCHAR;
        rc = mcdc_tds_need(s, chr ? 7u : 2u, err);
        if (rc != MCDC_OK) return rc;
        tc->max_len = tds_u16(s->buf + s->pos);
        if (chr) memcpy(tc->collation, s->buf + s->pos + 2, 5);
        s->pos += chr ? 7u : 2u;
        tc->utf16 = t == TDS_NVARCHAR || t == TDS_NCHAR;
        tc->utf8 = chr && !tc->utf16 && (tc->collation[3] & 0x04) != 0;
        if (tc->max_len == 0xFFFF) {
            if (t == TDS_BIGBINARY || t == TDS_BIGCHAR || t == TDS_NCHAR)
                return bad(s, err, "fixed-length type%s with (max) length %ld", "", 65535L);
            tc->wire = TDS_WIRE_PLP;
        } else {
            tc->wire = TDS_WIRE_USHORTLEN;
            if (tc->utf16 && (tc->max_len & 1))
                return bad(s, err, "odd nvarchar length%s %ld", "", (long)tc->max_len);
        }
        return MCDC_OK;
    }
    case TDS_XML: {
        rc = mcdc_tds_need(s, 1, err);
        if (rc != MCDC_OK) return rc;
        uint8_t schema = s->buf[s->pos++];
        if (schema) {
            if ((rc = skip_bvarchar(s, err)) || (rc = skip_bvarchar(s, err)) ||
                (rc = skip_usvarchar(s, err)))
                return rc;
        }
        tc->wire = TDS_WIRE_PLP;
        tc->utf16 = true;
        tc->max_len = 0xFFFF;
        return MCDC_OK;
    }
    case TDS_UDT: {
        rc = mcdc_tds_need(s, 2, err);
        if (rc != MCDC_OK) return rc;
        s->pos += 2;
        if ((rc = skip_bvarchar(s, err)) || (rc = skip_bvarchar(s, err)) ||
            (rc = skip_bvarchar(s, err)) || (rc = skip_usvarchar(s, err)))
            return rc;
        tc->wire = TDS_WIRE_PLP;
        tc->max_len = 0xFFFF;
        return MCDC_OK;
    }
    case TDS_TEXT: case TDS_NTEXT: case TDS_IMAGE: {
        bool chr = t != TDS_IMAGE;
        rc = mcdc_tds_need(s, chr ? 9u : 4u, err);
        if (rc != MCDC_OK) return rc;
        tc->max_len = tds_u32(s->buf + s->pos);
        if (chr) memcpy(tc->collation, s->buf + s->pos + 4, 5);
        s->pos += chr ? 9u : 4u;
        tc->utf16 = t == TDS_NTEXT;
        tc->utf8 = t == TDS_TEXT && (tc->collation[3] & 0x04) != 0;
        tc->wire = TDS_WIRE_LONGLEN;
        if (in_colmetadata) { /* table name parts */
            rc = mcdc_tds_need(s, 1, err);
            if (rc != MCDC_OK) return rc;
            uint8_t parts = s->buf[s->pos++];
            for (int i = 0; i < parts; i++)
                if ((rc = skip_usvarchar(s, err)) != MCDC_OK) return rc;
        }
        return MCDC_OK;
    }
    case TDS_SSVARIANT:
        rc = mcdc_tds_need(s, 4, err);
        if (rc != MCDC_OK) return rc;
        tc->max_len = tds_u32(s->buf + s->pos);
        s->pos += 4;
        tc->wire = TDS_WIRE_VARIANT;
        return MCDC_OK;
    default:
        return bad(s, err, "unsupported data type%s 0x%02lX", "", (long)t);
    }
}

int mcdc_tds_read_colmetadata(mcdc_tds_stream *s, mcdc_tds_meta *m, mcdc_error *err) {
    mcdc_tds_meta_clear(m);
    int rc = mcdc_tds_need(s, 2, err);
    if (rc != MCDC_OK) return rc;
    uint32_t n = tds_u16(s->buf + s->pos);
    s->pos += 2;
    if (n == 0xFFFF) return MCDC_OK; /* no metadata */
    if (n > MCDC_COLUMNS_MAX) return bad(s, err, "COLMETADATA with%s %ld columns", "", (long)n);
    m->cols = mcdc_calloc(n ? n : 1, sizeof *m->cols);
    if (m->cols == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        mcdc_tds_col *tc = &m->cols[i];
        m->ncols = (int)i + 1;
        rc = mcdc_tds_need(s, 7, err);
        if (rc != MCDC_OK) return rc;
        uint16_t flags = tds_u16(s->buf + s->pos + 4);
        tc->nullable = (flags & 1) != 0;
        tc->type = s->buf[s->pos + 6];
        s->pos += 7;
        rc = read_type_info(s, tc, true, err);
        if (rc != MCDC_OK) return rc;
        /* The batch type: the one policy both backends share. */
        const mcdc_sql_type *st = mcdc_sql_type_of_tds(tc->type, tc->max_len);
        MCDC_ASSERT(st != NULL); /* read_type_info takes no type the table lacks */
        mcdc_sql_type_batch(st, tc->precision, tc->scale, &tc->nat_type, &tc->nat_precision,
                            &tc->nat_scale);
        tc->chars = st->chars;
        rc = mcdc_tds_need(s, 1, err);
        if (rc != MCDC_OK) return rc;
        uint32_t nl = s->buf[s->pos];
        rc = mcdc_tds_need(s, 1 + nl * 2, err);
        if (rc != MCDC_OK) return rc;
        tc->name = utf16_to_cstr(s->buf + s->pos + 1, nl, err);
        if (tc->name == NULL) return MCDC_E_NOMEM;
        s->pos += 1 + nl * 2;
    }
    return MCDC_OK;
}

/* ---- binding ---------------------------------------------------------------------- */
static bool is_int_col(const mcdc_tds_col *tc) {
    switch (tc->type) {
    case TDS_INT1: case TDS_INT2: case TDS_INT4: case TDS_INT8: case TDS_INTN:
    case TDS_BIT: case TDS_BITN: return true;
    default: return false;
    }
}
static int int_bits(const mcdc_tds_col *tc) {
    if (tc->type == TDS_BIT || tc->type == TDS_BITN) return 1;
    return tc->max_len == 1 ? 9 : tc->max_len == 2 ? 16 : tc->max_len == 4 ? 32 : 64;
}

/* The converter for column tc into field f, or -1. */
static int choose(const mcdc_tds_col *tc, const mcdc_field *f) {
    mcdc_type_id t = f->type;
    uint8_t s = tc->type;
    if (t == MCDC_TYPE_UTF8) {
        if (s == TDS_SSVARIANT) return K_variant;
        if (tc->chars) return tc->utf16 ? K_utf16 : tc->utf8 ? K_bytes : K_cp1252;
        if (s == TDS_GUID) return K_guid;
        if (s == TDS_TIMEN) return K_time_text;
        return K_text;
    }
    if (t == MCDC_TYPE_BINARY) return tc->nat_type == MCDC_TYPE_BINARY ? K_bytes : -1;
    if (is_int_col(tc)) {
        int bits = int_bits(tc);
        if (bits == 1) return t == MCDC_TYPE_BOOL ? K_bit : -1;
        if (t == tc->nat_type) {
            if (bits == 9) return K_u8_i16;
            return bits == 16 ? K_copy2 : bits == 32 ? K_copy4 : K_copy8;
        }
        if ((t == MCDC_TYPE_INT16 && bits <= 16) || (t == MCDC_TYPE_INT32 && bits <= 32) ||
            t == MCDC_TYPE_INT64 || (t == MCDC_TYPE_DOUBLE && bits <= 32) ||
            (t == MCDC_TYPE_FLOAT && bits <= 16) ||
            (t == MCDC_TYPE_DECIMAL &&
             f->precision - f->scale >= (bits <= 16 ? 5 : bits <= 32 ? 10 : 19)))
            return K_int;
        return -1;
    }
    switch (s) {
    case TDS_FLT4: case TDS_FLT8: case TDS_FLTN:
        if (tc->nat_type == MCDC_TYPE_FLOAT) {
            if (t == MCDC_TYPE_FLOAT) return K_fcopy4;
            if (t == MCDC_TYPE_DOUBLE) return K_real_double;
            return -1;
        }
        return t == MCDC_TYPE_DOUBLE ? K_fcopy8 : -1;
    case TDS_DECIMALN: case TDS_NUMERICN: case TDS_DECIMAL: case TDS_NUMERIC:
        if (t == MCDC_TYPE_DECIMAL) return K_decimal;
        return t == MCDC_TYPE_DOUBLE ? K_decimal_double : -1;
    case TDS_MONEY: case TDS_MONEY4: case TDS_MONEYN:
        if (t == MCDC_TYPE_DECIMAL) return K_money;
        return t == MCDC_TYPE_DOUBLE ? K_money_double : -1;
    case TDS_DATETIME: case TDS_DATETIM4: case TDS_DATETIMN:
        return t == MCDC_TYPE_TIMESTAMP_NTZ ? K_datetime : -1;
    case TDS_DATETIME2N:
        if (t != MCDC_TYPE_TIMESTAMP_NTZ) return -1;
        return tc->scale == 7 ? K_dt2s7 : tc->scale == 3 ? K_dt2s3 : K_dt2;
    case TDS_DATETIMEOFFSETN: return t == MCDC_TYPE_TIMESTAMP_UTC ? K_dt2 : -1;
    case TDS_DATEN:
        if (t == MCDC_TYPE_DATE32) return K_date32;
        if (t == MCDC_TYPE_TIMESTAMP_NTZ) return K_date_ts;
        return -1;
    default: return -1;
    }
}

/* Whether a varchar/char/text collation's code page is Windows-1252 (the
 * one single-byte code page this decoder converts): SQL_Latin1_General_CP1
 * sort orders, or a Windows collation whose language uses 1252. Others
 * (1250, 1251, 932, 936 ...) are refused rather than mis-decoded. */
static bool collation_is_cp1252(const uint8_t coll[5]) {
    uint32_t lcid = (uint32_t)coll[0] | ((uint32_t)coll[1] << 8) | ((uint32_t)(coll[2] & 0x0F) << 16);
    uint8_t sort_id = coll[4];
    if (sort_id != 0) return sort_id >= 51 && sort_id <= 54;
    static const uint16_t WESTERN[] = {
        0x0409, 0x0809, 0x0C09, 0x1009, 0x1409, 0x1809, 0x0407, 0x0807, 0x0C07, 0x1007, 0x1407,
        0x040C, 0x080C, 0x0C0C, 0x100C, 0x140C, 0x0410, 0x0810, 0x040A, 0x080A, 0x0C0A, 0x0416,
        0x0816, 0x0413, 0x0813, 0x041D, 0x081D, 0x0406, 0x0414, 0x0814, 0x040B, 0x040F, 0x0403,
        0x042D, 0x0456, 0x0421, 0x043E, 0x0436, 0x0438};
    for (size_t i = 0; i < sizeof WESTERN / sizeof WESTERN[0]; i++)
        if ((lcid & 0xFFFF) == WESTERN[i]) return true;
    return false;
}

int mcdc_tds_bind(mcdc_tds_meta *m, const mcdc_field *f, mcdc_error *err) {
    for (int i = 0; i < m->ncols; i++) {
        mcdc_tds_col *tc = &m->cols[i];
        int k = choose(tc, &f[i]);
        bool single_byte_text = (tc->type == TDS_BIGVARCHAR || tc->type == TDS_BIGCHAR ||
                                 tc->type == TDS_TEXT) && !tc->utf8;
        if (k >= 0 && single_byte_text && !collation_is_cp1252(tc->collation))
            return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                  "column '%s': varchar data in collation LCID 0x%05X sort id %u "
                                  "(not code page 1252 or UTF-8) is not decoded by the native "
                                  "TDS backend yet; use nvarchar or the FreeTDS backend",
                                  f[i].name,
                                  (unsigned)(tc->collation[0] | (tc->collation[1] << 8) |
                                             ((tc->collation[2] & 0x0F) << 16)),
                                  (unsigned)tc->collation[4]);
        if (k < 0)
            return mcdc_error_set(err, MCDC_E_SCHEMA,
                                  "column '%s': SQL type 0x%02X cannot be read as %s; declare a "
                                  "type the column's values fit",
                                  f[i].name, tc->type, mcdc_type_name(f[i].type));
        tc->conv = CONV_FN[k];
        tc->null_w = NULLW_OF[k];
#if defined(__SSE2__)
        tc->ssse3 = __builtin_cpu_supports("ssse3");
#endif
        switch (tc->wire) {
        case TDS_WIRE_FIXED: tc->dec = FIXED_FN[k]; break;
        case TDS_WIRE_BYTELEN: tc->dec = BLEN_FN[k]; break;
        case TDS_WIRE_USHORTLEN: tc->dec = USLEN_FN[k]; break;
        case TDS_WIRE_PLP: tc->dec = dec_plp; break;
        case TDS_WIRE_LONGLEN: tc->dec = dec_longlen; break;
        case TDS_WIRE_VARIANT: tc->dec = dec_variant; break;
        }
    }
    return MCDC_OK;
}

/* ---- rows -------------------------------------------------------------------------- */
int mcdc_tds_decode_row(mcdc_tds_stream *s, uint8_t tok, const mcdc_tds_meta *m,
                        mcdc_column *cols, mcdc_error *err) {
    const int n = m->ncols;
    const mcdc_tds_col *tc = m->cols;
    int rc = MCDC_OK;
    if (tok == TDS_TOK_ROW) {
        for (int i = 0; i < n; i++) {
            rc = tc[i].dec(s, &cols[i], &tc[i], err);
            if (UNLIKELY(rc != MCDC_OK)) return rc;
        }
        return MCDC_OK;
    }
    uint32_t nb = ((uint32_t)n + 7) / 8;
    rc = mcdc_tds_need(s, nb, err);
    if (rc != MCDC_OK) return rc;
    uint8_t bits[MCDC_COLUMNS_MAX / 8];
    if (nb <= 16 && s->len - s->pos >= 16) /* one fixed copy, no call; the bytes after are unused */
        memcpy(bits, s->buf + s->pos, 16);
    else
        memcpy(bits, s->buf + s->pos, nb);
    s->pos += nb;
    /* 8 columns per bitmap byte: a byte without NULLs reads its columns
     * as ROW does, with no test per column */
    for (int b = 0; b < (int)nb; b++) {
        int i = b * 8, e = i + 8 < n ? i + 8 : n;
        unsigned nulls = bits[b];
        if (nulls == 0) {
            for (; i < e; i++) {
                rc = tc[i].dec(s, &cols[i], &tc[i], err);
                if (UNLIKELY(rc != MCDC_OK)) return rc;
            }
            continue;
        }
        for (; i < e; i++, nulls >>= 1) {
            if (nulls & 1)
                rc = put_null_w(&cols[i], tc[i].null_w, err);
            else
                rc = tc[i].dec(s, &cols[i], &tc[i], err);
            if (UNLIKELY(rc != MCDC_OK)) return rc;
        }
    }
    return MCDC_OK;
}

int mcdc_tds_skip_row(mcdc_tds_stream *s, uint8_t tok, const mcdc_tds_meta *m, mcdc_error *err) {
    const int n = m->ncols;
    int rc;
    uint8_t bits[MCDC_COLUMNS_MAX / 8];
    if (tok == TDS_TOK_NBCROW) {
        uint32_t nb = ((uint32_t)n + 7) / 8;
        rc = mcdc_tds_need(s, nb, err);
        if (rc != MCDC_OK) return rc;
        memcpy(bits, s->buf + s->pos, nb);
        s->pos += nb;
    }
    for (int i = 0; i < n; i++) {
        if (tok == TDS_TOK_NBCROW && ((bits[i >> 3] >> (i & 7)) & 1)) continue;
        rc = skip_value(s, &m->cols[i], err);
        if (rc != MCDC_OK) return rc;
    }
    return MCDC_OK;
}

/* ---- other tokens -------------------------------------------------------------------- */
/* A B_VARCHAR inside [p, e): UTF-8 into out (n bytes max). Returns the next
 * position or NULL when it overruns. */
static const uint8_t *bvarchar(const uint8_t *p, const uint8_t *e, bool us, char *out,
                               size_t outn) {
    size_t need = us ? 2 : 1;
    if ((size_t)(e - p) < need) return NULL;
    uint32_t n = us ? tds_u16(p) : p[0];
    p += need;
    if ((size_t)(e - p) < (size_t)n * 2) return NULL;
    if (out) {
        size_t o = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t u = tds_u16(p + 2 * i);
            if (u < 0x80) {
                if (o + 1 < outn) out[o++] = (char)u;
            } else if (u < 0x800) {
                if (o + 2 < outn) {
                    out[o++] = (char)(0xC0 | (u >> 6));
                    out[o++] = (char)(0x80 | (u & 0x3F));
                }
            } else if (o + 3 < outn) {
                if (u >= 0xD800 && u <= 0xDFFF) u = 0xFFFD; /* names: BMP is enough */
                out[o++] = (char)(0xE0 | (u >> 12));
                out[o++] = (char)(0x80 | ((u >> 6) & 0x3F));
                out[o++] = (char)(0x80 | (u & 0x3F));
            }
        }
        if (outn) out[o] = 0;
    }
    return p + (size_t)n * 2;
}

static int read_len16(mcdc_tds_stream *s, const uint8_t **out_p, uint32_t *out_n,
                      mcdc_error *err) {
    int rc = mcdc_tds_need(s, 2, err);
    if (rc != MCDC_OK) return rc;
    uint32_t n = tds_u16(s->buf + s->pos);
    rc = mcdc_tds_need(s, 2 + n, err);
    if (rc != MCDC_OK) return rc;
    *out_p = s->buf + s->pos + 2;
    *out_n = n;
    s->pos += 2 + n;
    return MCDC_OK;
}

static int read_message(mcdc_tds_stream *s, uint8_t tok, mcdc_tds_events *ev, mcdc_error *err) {
    const uint8_t *p;
    uint32_t n;
    int rc = read_len16(s, &p, &n, err);
    if (rc != MCDC_OK) return rc;
    const uint8_t *e = p + n;
    if (n < 6) return bad(s, err, "a short ERROR/INFO%s token (%ld bytes)", "", (long)n);
    int number = (int32_t)tds_u32(p);
    int state = p[4], klass = p[5];
    char text[512];
    const uint8_t *q = bvarchar(p + 6, e, true, text, sizeof text);
    if (q) q = bvarchar(q, e, false, NULL, 0);
    if (q) q = bvarchar(q, e, false, NULL, 0);
    if (q == NULL || e - q < 4) return bad(s, err, "a malformed ERROR/INFO%s token (%ld bytes)", "", (long)n);
    int line = (int32_t)tds_u32(q);
    if (tok == TDS_TOK_ERROR && klass > 10) {
        if (!ev->error) {
            ev->error = true;
            ev->number = number;
            ev->state = state;
            ev->klass = klass;
            ev->line = line;
            snprintf(ev->text, sizeof ev->text, "%s", text);
        }
        if (klass >= 20) s->dead = true;
    } else if (number != 5701 && number != 5703) {
        mcdc_log(MCDC_LOG_DEBUG, "server message %d: %s", number, text);
    }
    return MCDC_OK;
}

static int read_envchange(mcdc_tds_stream *s, mcdc_tds_events *ev, mcdc_error *err) {
    const uint8_t *p;
    uint32_t n;
    int rc = read_len16(s, &p, &n, err);
    if (rc != MCDC_OK) return rc;
    const uint8_t *e = p + n;
    if (n < 1) return bad(s, err, "an empty ENVCHANGE%s (%ld)", "", 0L);
    uint8_t type = p[0];
    switch (type) {
    case 1:
        if (!bvarchar(p + 1, e, false, ev->database, sizeof ev->database))
            return bad(s, err, "a malformed ENVCHANGE%s %ld", "", (long)type);
        break;
    case 4: {
        char v[16];
        if (!bvarchar(p + 1, e, false, v, sizeof v))
            return bad(s, err, "a malformed ENVCHANGE%s %ld", "", (long)type);
        long size = strtol(v, NULL, 10);
        if (size >= MCDC_TDS_PACKET_BYTES_MIN && size <= MCDC_TDS_PACKET_BYTES_MAX)
            ev->packet_bytes = (int)size;
        break;
    }
    case 8: /* begin transaction: B_VARBYTE new descriptor */
        if (n >= 10 && p[1] == 8) ev->txn = tds_u64(p + 2);
        break;
    case 9: case 10: case 17: ev->txn = 0; break;
    default: break;
    }
    return MCDC_OK;
}

int mcdc_tds_read_token(mcdc_tds_stream *s, uint8_t tok, const mcdc_tds_meta *m,
                        mcdc_tds_events *ev, mcdc_error *err) {
    (void)m;
    const uint8_t *p;
    uint32_t n;
    int rc;
    switch (tok) {
    case TDS_TOK_ERROR: case TDS_TOK_INFO: return read_message(s, tok, ev, err);
    case TDS_TOK_ENVCHANGE: return read_envchange(s, ev, err);
    case TDS_TOK_LOGINACK:
        rc = read_len16(s, &p, &n, err);
        if (rc != MCDC_OK) return rc;
        if (n < 10) return bad(s, err, "a short LOGINACK%s (%ld bytes)", "", (long)n);
        ev->loginack = true;
        ev->tds_version = ((uint32_t)p[1] << 24) | ((uint32_t)p[2] << 16) |
                          ((uint32_t)p[3] << 8) | p[4];
        return MCDC_OK;
    case TDS_TOK_DONE: case TDS_TOK_DONEPROC: case TDS_TOK_DONEINPROC:
        rc = mcdc_tds_need(s, 12, err);
        if (rc != MCDC_OK) return rc;
        ev->done_status = tds_u16(s->buf + s->pos);
        ev->done_rows = tds_u64(s->buf + s->pos + 4);
        s->pos += 12;
        return MCDC_OK;
    case TDS_TOK_RETURNSTATUS: return skip_n(s, 4, err);
    case TDS_TOK_ORDER: case TDS_TOK_COLINFO: case TDS_TOK_TABNAME: case TDS_TOK_SSPI:
        return read_len16(s, &p, &n, err);
    case TDS_TOK_SESSIONSTATE: case TDS_TOK_FEDAUTHINFO:
        rc = mcdc_tds_need(s, 4, err);
        if (rc != MCDC_OK) return rc;
        n = tds_u32(s->buf + s->pos);
        s->pos += 4;
        return skip_n(s, n, err);
    case TDS_TOK_FEATUREEXTACK:
        for (;;) {
            rc = mcdc_tds_need(s, 1, err);
            if (rc != MCDC_OK) return rc;
            if (s->buf[s->pos] == 0xFF) {
                s->pos++;
                return MCDC_OK;
            }
            rc = mcdc_tds_need(s, 5, err);
            if (rc != MCDC_OK) return rc;
            n = tds_u32(s->buf + s->pos + 1);
            s->pos += 5;
            if ((rc = skip_n(s, n, err)) != MCDC_OK) return rc;
        }
    case TDS_TOK_RETURNVALUE: {
        rc = mcdc_tds_need(s, 2, err);
        if (rc != MCDC_OK) return rc;
        s->pos += 2;
        if ((rc = skip_bvarchar(s, err)) != MCDC_OK) return rc;
        rc = mcdc_tds_need(s, 1 + 4 + 2 + 1, err);
        if (rc != MCDC_OK) return rc;
        mcdc_tds_col tc;
        memset(&tc, 0, sizeof tc);
        tc.type = s->buf[s->pos + 7];
        s->pos += 8;
        rc = read_type_info(s, &tc, false, err);
        if (rc != MCDC_OK) return rc;
        return skip_value(s, &tc, err);
    }
    default:
        return bad(s, err, "unexpected token%s 0x%02lX", "", (long)tok);
    }
}
