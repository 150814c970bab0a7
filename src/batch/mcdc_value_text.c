/* mcdc_value_text.c - the canonical text of batch values (mcdc_value_text.h). */
#include "mcdc_value_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

/* "00" .. "99": two digits a store, no division per digit. */
static const char D2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline char *put2(char *o, unsigned v) {
    memcpy(o, D2 + 2 * v, 2);
    return o + 2;
}

/* Digits of v written backwards ending at `end`; returns the first. */
static inline char *digits_back(char *end, uint64_t v) {
    while (v >= 100) {
        end -= 2;
        memcpy(end, D2 + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        end -= 2;
        memcpy(end, D2 + 2 * v, 2);
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

size_t mcdc_text_bool(char *out, bool v) {
    memcpy(out, v ? "true" : "false", v ? 4 : 5);
    return v ? 4 : 5;
}

size_t mcdc_text_int(char *out, int64_t v) {
    char tmp[24], *end = tmp + sizeof tmp;
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *p = digits_back(end, m);
    if (v < 0) *--p = '-';
    size_t n = (size_t)(end - p);
    memcpy(out, p, n);
    return n;
}

/* ---- decimals --------------------------------------------------------------------- */
size_t mcdc_text_decimal_parts(char *out, bool neg, uint64_t mag_lo, uint64_t mag_hi,
                               int32_t scale) {
    MCDC_ASSERT(scale >= 0 && scale <= 38);
    u128 m = (u128)mag_hi << 64 | mag_lo;
    /* Digits backwards, 19 at a time while the value needs 128 bits (at
     * most two 128-bit divisions), then 64-bit arithmetic. */
    char tmp[48], *end = tmp + sizeof tmp, *p = end;
    const uint64_t P19 = 10000000000000000000ull;
    while (m >> 64) {
        u128 q = m / P19;
        uint64_t r = (uint64_t)(m - q * P19);
        char *s = digits_back(p, r);
        while (s > p - 19) *--s = '0'; /* a full group keeps its leading zeros */
        p = s;
        m = q;
    }
    p = digits_back(p, (uint64_t)m);
    int nd = (int)(end - p);
    if (nd == 1 && *p == '0') neg = false; /* zero has no sign */
    char *o = out;
    if (neg) *o++ = '-';
    if (nd <= scale) { /* "0." and the zeros before the digits */
        *o++ = '0';
        *o++ = '.';
        memset(o, '0', (size_t)(scale - nd));
        o += scale - nd;
        memcpy(o, p, (size_t)nd);
        o += nd;
    } else {
        memcpy(o, p, (size_t)(nd - scale));
        o += nd - scale;
        if (scale > 0) {
            *o++ = '.';
            memcpy(o, p + nd - scale, (size_t)scale);
            o += scale;
        }
    }
    return (size_t)(o - out);
}

size_t mcdc_text_decimal(char *out, uint64_t lo, int64_t hi, int32_t scale) {
    u128 v = (u128)(uint64_t)hi << 64 | lo;
    bool neg = hi < 0;
    if (neg) v = (u128)0 - v;
    return mcdc_text_decimal_parts(out, neg, (uint64_t)v, (uint64_t)(v >> 64), scale);
}

/* ---- floating point ----------------------------------------------------------------- */
/* Lays out the significant digits d[0..k) of a value d.ddd x 10^(n-1) as
 * ECMAScript's Number::toString does. */
static size_t es_layout(char *out, bool neg, const char *d, int k, int n) {
    char *o = out;
    if (neg) *o++ = '-';
    if (k <= n && n <= 21) {
        memcpy(o, d, (size_t)k);
        o += k;
        memset(o, '0', (size_t)(n - k));
        o += n - k;
    } else if (0 < n && n <= 21) {
        memcpy(o, d, (size_t)n);
        o += n;
        *o++ = '.';
        memcpy(o, d + n, (size_t)(k - n));
        o += k - n;
    } else if (-6 < n && n <= 0) {
        *o++ = '0';
        *o++ = '.';
        memset(o, '0', (size_t)-n);
        o += -n;
        memcpy(o, d, (size_t)k);
        o += k;
    } else {
        *o++ = d[0];
        if (k > 1) {
            *o++ = '.';
            memcpy(o, d + 1, (size_t)(k - 1));
            o += k - 1;
        }
        *o++ = 'e';
        *o++ = n - 1 < 0 ? '-' : '+';
        o += mcdc_text_int(o, n - 1 < 0 ? 1 - n : n - 1);
    }
    return (size_t)(o - out);
}

/* The shortest of %.{p-1}e, p = 1..max_digits, that reads back as v
 * (printf and strtod round correctly in glibc; the first p that reads back
 * is the shortest, and its digits are the nearest of that length). The
 * digits and the exponent are taken from that text whatever the locale's
 * decimal point. */
static size_t shortest(char *out, double v, bool is_float, int max_digits) {
    char buf[40];
    for (int p = 1; p <= max_digits; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        bool same = is_float ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v;
        if (!same && p < max_digits) continue;
        char d[24];
        int k = 0;
        const char *s = buf + (buf[0] == '-');
        for (; *s && *s != 'e'; s++)
            if (*s >= '0' && *s <= '9') d[k++] = *s;
        MCDC_ASSERT(*s == 'e' && k == p);
        int e = atoi(s + 1);
        while (k > 1 && d[k - 1] == '0') k--; /* only when max_digits was reached */
        return es_layout(out, buf[0] == '-', d, k, e + 1);
    }
    MCDC_UNREACHABLE();
}

static size_t special(char *out, double v) {
    if (isnan(v)) {
        memcpy(out, "NaN", 3);
        return 3;
    }
    if (isinf(v)) {
        memcpy(out, v < 0 ? "-Infinity" : "Infinity", v < 0 ? 9 : 8);
        return v < 0 ? 9 : 8;
    }
    MCDC_ASSERT(v == 0);
    memcpy(out, signbit(v) ? "-0" : "0", signbit(v) ? 2 : 1);
    return signbit(v) ? 2 : 1;
}

size_t mcdc_text_double(char *out, double v) {
    if (!isfinite(v) || v == 0) return special(out, v);
    /* Integers below 2^53 are their own shortest digits. */
    if (fabs(v) < 9007199254740992.0 && v == trunc(v)) return mcdc_text_int(out, (int64_t)v);
    return shortest(out, v, false, 17);
}

size_t mcdc_text_float(char *out, float v) {
    if (!isfinite(v) || v == 0) return special(out, (double)v);
    if (fabsf(v) < 16777216.0f && v == truncf(v)) return mcdc_text_int(out, (int64_t)v);
    return shortest(out, (double)v, true, 9);
}

/* ---- dates and times ------------------------------------------------------------------ */
static char *put_year(char *o, int64_t y) {
    if (y >= 0 && y <= 9999) {
        o = put2(o, (unsigned)(y / 100));
        return put2(o, (unsigned)(y % 100));
    }
    *o++ = y < 0 ? '-' : '+';
    uint64_t a = y < 0 ? (uint64_t)0 - (uint64_t)y : (uint64_t)y;
    char tmp[24], *end = tmp + sizeof tmp, *p = digits_back(end, a);
    while (end - p < 4) *--p = '0';
    memcpy(o, p, (size_t)(end - p));
    return o + (end - p);
}

static char *put_date(char *o, int64_t days) {
    int64_t y;
    unsigned m, d;
    mcdc_civil_from_days(days, &y, &m, &d);
    o = put_year(o, y);
    *o++ = '-';
    o = put2(o, m);
    *o++ = '-';
    return put2(o, d);
}

size_t mcdc_text_date(char *out, int64_t days) { return (size_t)(put_date(out, days) - out); }

/* "YYYY-MM-DDTHH:MM:SS" of us; *frac_us = the microseconds into the second. */
static char *put_datetime(char *o, int64_t us, int64_t *frac_us) {
    /* floored, without the product days * 86400e6 (it overflows near
     * INT64_MIN) */
    int64_t days = us / 86400000000LL, rem = us % 86400000000LL;
    if (rem < 0) {
        rem += 86400000000LL;
        days--;
    }
    o = put_date(o, days);
    int64_t secs = rem / 1000000;
    *frac_us = rem % 1000000;
    *o++ = 'T';
    o = put2(o, (unsigned)(secs / 3600));
    *o++ = ':';
    o = put2(o, (unsigned)(secs / 60 % 60));
    *o++ = ':';
    return put2(o, (unsigned)(secs % 60));
}

size_t mcdc_text_timestamp(char *out, int64_t us, bool utc) {
    int64_t f;
    char *o = put_datetime(out, us, &f);
    *o++ = '.';
    o = put2(o, (unsigned)(f / 10000));
    o = put2(o, (unsigned)(f / 100 % 100));
    o = put2(o, (unsigned)(f % 100));
    if (utc) *o++ = 'Z';
    return (size_t)(o - out);
}

size_t mcdc_text_timestamp_ms(char *out, int64_t us, bool utc) {
    int64_t f;
    char *o = put_datetime(out, us, &f);
    unsigned ms = (unsigned)(f / 1000);
    *o++ = '.';
    *o++ = (char)('0' + ms / 100);
    o = put2(o, ms % 100);
    if (utc) *o++ = 'Z';
    return (size_t)(o - out);
}

/* ---- binary -------------------------------------------------------------------------- */
size_t mcdc_text_hex_digits(char *out, const uint8_t *p, size_t n, bool upper) {
    static const char LOWER[] = "0123456789abcdef";
    if (upper) {
        for (size_t i = 0; i < n; i++) memcpy(out + 2 * i, mcdc_hex_pairs + 2 * p[i], 2);
    } else {
        for (size_t i = 0; i < n; i++) {
            out[2 * i] = LOWER[p[i] >> 4];
            out[2 * i + 1] = LOWER[p[i] & 15];
        }
    }
    return 2 * n;
}

size_t mcdc_text_hex(char *out, const uint8_t *p, size_t n) {
    out[0] = '0';
    out[1] = 'x';
    return 2 + mcdc_text_hex_digits(out + 2, p, n, true);
}

/* ---- cells ------------------------------------------------------------------------- */
static inline bool is_var(mcdc_type_id t) { return t == MCDC_TYPE_UTF8 || t == MCDC_TYPE_BINARY; }

/* The integer at row i of an int8..int64, date32 or timestamp column. */
static inline int64_t int_at(const mcdc_column *c, int64_t i) {
    const uint8_t *v = c->values;
    switch (c->field->type) {
    case MCDC_TYPE_INT8: return (int8_t)v[i];
    case MCDC_TYPE_INT16: {
        int16_t x;
        memcpy(&x, v + i * 2, 2);
        return x;
    }
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: {
        int32_t x;
        memcpy(&x, v + i * 4, 4);
        return x;
    }
    default: {
        int64_t x;
        memcpy(&x, v + i * 8, 8);
        return x;
    }
    }
}

/* Text of a fixed-width (not fixed binary) value at row i of c. */
static size_t fixed_text(char *out, const mcdc_column *c, int64_t i) {
    const uint8_t *v = c->values;
    switch (c->field->type) {
    case MCDC_TYPE_BOOL: return mcdc_text_bool(out, (v[i >> 3] >> (i & 7)) & 1);
    case MCDC_TYPE_INT8:
    case MCDC_TYPE_INT16:
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_INT64: return mcdc_text_int(out, int_at(c, i));
    case MCDC_TYPE_DATE32: return mcdc_text_date(out, int_at(c, i));
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC:
        return mcdc_text_timestamp(out, int_at(c, i), c->field->type == MCDC_TYPE_TIMESTAMP_UTC);
    case MCDC_TYPE_FLOAT: {
        float x;
        memcpy(&x, v + i * 4, 4);
        return mcdc_text_float(out, x);
    }
    case MCDC_TYPE_DOUBLE: {
        double x;
        memcpy(&x, v + i * 8, 8);
        return mcdc_text_double(out, x);
    }
    case MCDC_TYPE_DECIMAL: {
        uint64_t lo;
        int64_t hi;
        memcpy(&lo, v + i * 16, 8);
        memcpy(&hi, v + i * 16 + 8, 8);
        return mcdc_text_decimal(out, lo, hi, c->field->scale);
    }
    default: MCDC_UNREACHABLE();
    }
}

/* The bytes of a var or fixed binary value. */
static const uint8_t *bytes_of(const mcdc_column *c, int64_t i, size_t *n) {
    if (c->field->type == MCDC_TYPE_FIXED_BINARY) {
        *n = (size_t)c->field->byte_width;
        return c->values + i * c->field->byte_width;
    }
    *n = (size_t)(c->offsets[i + 1] - c->offsets[i]);
    return c->data + c->offsets[i];
}

int mcdc_text_cell(mcdc_buf *out, const mcdc_column *c, int64_t row, mcdc_error *err) {
    MCDC_ASSERT(row >= 0 && row < c->length && mcdc_col_is_valid(c, row));
    mcdc_type_id t = c->field->type;
    if (t == MCDC_TYPE_UTF8 || t == MCDC_TYPE_BINARY || t == MCDC_TYPE_FIXED_BINARY) {
        size_t n;
        const uint8_t *p = bytes_of(c, row, &n);
        if (t == MCDC_TYPE_UTF8) return mcdc_buf_append(out, p, n, err);
        int rc = mcdc_buf_reserve(out, 2 + 2 * n, err);
        if (rc == MCDC_OK) out->len += mcdc_text_hex((char *)out->data + out->len, p, n);
        return rc;
    }
    char tmp[MCDC_TEXT_FIXED_MAX];
    return mcdc_buf_append(out, tmp, fixed_text(tmp, c, row), err);
}

/* One value's text into out's data (room was reserved); ends the value. */
static inline void end_value(mcdc_column *out, size_t n) {
    out->data_len += (int64_t)n;
    out->offsets[out->length + 1] = (int32_t)out->data_len;
    out->length++;
}

int mcdc_text_column(mcdc_column *out, const mcdc_column *in, int64_t from, int64_t n,
                     mcdc_error *err) {
    MCDC_ASSERT(out->field->type == MCDC_TYPE_UTF8);
    MCDC_ASSERT(from >= 0 && n >= 0 && from + n <= in->length);
    mcdc_type_id t = in->field->type;
    /* Room for every value at once: exact for text, an upper bound else. */
    int64_t bytes;
    if (is_var(t)) {
        int64_t span = in->offsets[from + n] - in->offsets[from];
        bytes = t == MCDC_TYPE_UTF8 ? span : 2 * n + 2 * span;
    } else if (t == MCDC_TYPE_FIXED_BINARY) {
        bytes = n * (2 + 2 * (int64_t)in->field->byte_width);
    } else {
        bytes = n * MCDC_TEXT_FIXED_MAX;
    }
    int rc = mcdc_col_reserve(out, n, bytes, err);
    if (rc != MCDC_OK) return rc;
    int64_t end = from + n;
    for (int64_t i = from; i < end && rc == MCDC_OK; i++) {
        if (!mcdc_col_is_valid(in, i)) {
            rc = mcdc_col_append_null(out, err); /* no growth: rows were reserved */
            continue;
        }
        switch (t) { /* predictable: the same branch for every row */
        case MCDC_TYPE_UTF8: {
            size_t k = (size_t)(in->offsets[i + 1] - in->offsets[i]);
            if (k) memcpy(out->data + out->data_len, in->data + in->offsets[i], k);
            end_value(out, k);
            break;
        }
        case MCDC_TYPE_BINARY:
        case MCDC_TYPE_FIXED_BINARY: {
            size_t k;
            const uint8_t *p = bytes_of(in, i, &k);
            end_value(out, mcdc_text_hex((char *)out->data + out->data_len, p, k));
            break;
        }
        default: end_value(out, fixed_text((char *)out->data + out->data_len, in, i)); break;
        }
    }
    return rc;
}

/* ---- JSON ---------------------------------------------------------------------------- */
int mcdc_text_json_string(mcdc_buf *b, const uint8_t *s, size_t n, mcdc_error *err) {
    int rc = mcdc_buf_append_byte(b, '"', err);
    size_t run = 0; /* bytes [run, i) are copied as they are */
    for (size_t i = 0; i < n && !rc; i++) {
        uint8_t c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        rc = mcdc_buf_append(b, s + run, i - run, err);
        if (!rc) {
            if (c == '"') rc = mcdc_buf_append_str(b, "\\\"", err);
            else if (c == '\\') rc = mcdc_buf_append_str(b, "\\\\", err);
            else if (c == '\n') rc = mcdc_buf_append_str(b, "\\n", err);
            else if (c == '\t') rc = mcdc_buf_append_str(b, "\\t", err);
            else if (c == '\r') rc = mcdc_buf_append_str(b, "\\r", err);
            else rc = mcdc_buf_printf(b, err, "\\u%04x", c);
        }
        run = i + 1;
    }
    if (!rc) rc = mcdc_buf_append(b, s + run, n - run, err);
    if (!rc) rc = mcdc_buf_append_byte(b, '"', err);
    return rc;
}

int mcdc_text_cell_json(mcdc_buf *out, const mcdc_column *c, int64_t row, mcdc_error *err) {
    if (!mcdc_col_is_valid(c, row)) return mcdc_buf_append_str(out, "null", err);
    mcdc_type_id t = c->field->type;
    if (t == MCDC_TYPE_UTF8) {
        size_t n;
        const uint8_t *p = bytes_of(c, row, &n);
        return mcdc_text_json_string(out, p, n, err);
    }
    if (t == MCDC_TYPE_BINARY || t == MCDC_TYPE_FIXED_BINARY) {
        size_t n;
        const uint8_t *p = bytes_of(c, row, &n);
        int rc = mcdc_buf_reserve(out, 4 + 2 * n, err);
        if (rc != MCDC_OK) return rc;
        char *o = (char *)out->data + out->len;
        o[0] = '"';
        size_t k = 1 + mcdc_text_hex(o + 1, p, n);
        o[k++] = '"';
        out->len += k;
        return MCDC_OK;
    }
    char tmp[MCDC_TEXT_FIXED_MAX + 2];
    size_t k = fixed_text(tmp + 1, c, row);
    bool bare;
    switch (t) {
    case MCDC_TYPE_BOOL: case MCDC_TYPE_INT8: case MCDC_TYPE_INT16: case MCDC_TYPE_INT32:
    case MCDC_TYPE_INT64: bare = true; break;
    case MCDC_TYPE_FLOAT: case MCDC_TYPE_DOUBLE: /* NaN, Infinity, -Infinity: quoted */
        bare = (tmp[1] >= '0' && tmp[1] <= '9') || (tmp[1] == '-' && tmp[2] != 'I');
        break;
    default: bare = false; break;
    }
    if (bare) return mcdc_buf_append(out, tmp + 1, k, err);
    tmp[0] = '"'; /* canonical texts of these types need no escapes */
    tmp[k + 1] = '"';
    return mcdc_buf_append(out, tmp, k + 2, err);
}
