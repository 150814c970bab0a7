/* mcdc_delta_stats.c - per-file statistics JSON for add.stats (formats.md A5). */
#include "mcdc_delta_internal.h"
#include "mcdc_value_text.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Decodes one UTF-8 code point at s[*i]; -1 on invalid input. */
static int32_t utf8_next(const uint8_t *s, size_t n, size_t *i) {
    uint8_t c = s[*i];
    int len;
    int32_t cp;
    if (c < 0x80) {
        (*i)++;
        return c;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        cp = c & 0x07;
    } else {
        return -1;
    }
    if (*i + (size_t)len > n) return -1;
    for (int k = 1; k < len; k++) {
        uint8_t cc = s[*i + (size_t)k];
        if ((cc & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (cc & 0x3F);
    }
    static const int32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    *i += (size_t)len;
    return cp;
}

static size_t utf8_put(int32_t cp, uint8_t *o) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
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

/* A string bound. is_max: a cut value must stay >= every value with that
 * prefix, so the last kept character is incremented. Returns 0 = written,
 * 1 = omitted (no valid bound), <0 error. */
static int put_string_bound(mcdc_buf *b, const mcdc_delta_value *v, bool is_max,
                            mcdc_error *err) {
    enum { K = MCDC_DELTA_STATS_STRING_PREFIX_CHARS };
    int32_t cps[K];
    size_t i = 0, ncp = 0, prefix_bytes = 0;
    while (i < v->len) {
        if (ncp == K) break;
        int32_t cp = utf8_next(v->bytes, v->len, &i);
        if (cp < 0) return 1; /* not UTF-8: no bound rather than a wrong one */
        cps[ncp++] = cp;
        prefix_bytes = i;
    }
    bool cut = i < v->len;
    if (cut) { /* the rest must be valid too, or the value is not a string */
        size_t j = i;
        while (j < v->len)
            if (utf8_next(v->bytes, v->len, &j) < 0) return 1;
    }
    if (!cut || !is_max) return mcdc_text_json_string(b, v->bytes, cut ? prefix_bytes : v->len, err);
    while (ncp > 0 && cps[ncp - 1] == 0x10FFFF) ncp--;
    if (ncp == 0) return 1;
    cps[ncp - 1]++;
    if (cps[ncp - 1] == 0xD800) cps[ncp - 1] = 0xE000; /* skip the surrogates */
    uint8_t out[K * 4];
    size_t o = 0;
    for (size_t k = 0; k < ncp; k++) o += utf8_put(cps[k], out + o);
    return mcdc_text_json_string(b, out, o, err);
}

static int64_t floor_div(int64_t a, int64_t d) {
    int64_t q = a / d;
    return (a % d != 0 && (a < 0) != (d < 0)) ? q - 1 : q;
}

/* One bound of field f, in the canonical text of its value
 * (mcdc_value_text.h): numbers and decimals bare (JSON numbers), dates and
 * timestamps quoted. Returns 0 written, 1 omitted, <0 error. */
static int put_bound(mcdc_buf *b, const mcdc_field *f, const mcdc_delta_value *v, bool is_max,
                     mcdc_error *err) {
    char t[MCDC_TEXT_FIXED_MAX + 2];
    size_t n;
    switch (f->type) {
    case MCDC_TYPE_INT8:
    case MCDC_TYPE_INT16:
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_INT64:
        return mcdc_buf_append(b, t, mcdc_text_int(t, v->i), err);
    case MCDC_TYPE_FLOAT:
    case MCDC_TYPE_DOUBLE:
        if (!isfinite(v->f)) return 1;
        n = f->type == MCDC_TYPE_FLOAT ? mcdc_text_float(t, (float)v->f) : mcdc_text_double(t, v->f);
        return mcdc_buf_append(b, t, n, err);
    case MCDC_TYPE_DECIMAL:
        return mcdc_buf_append(b, t, mcdc_text_decimal(t, v->dec_lo, v->dec_hi, f->scale), err);
    case MCDC_TYPE_UTF8:
        return put_string_bound(b, v, is_max, err);
    case MCDC_TYPE_DATE32: {
        int64_t y;
        unsigned m, d;
        mcdc_civil_from_days(v->i, &y, &m, &d);
        if (y < 0 || y > 9999) return 1;
        t[0] = '"';
        n = 1 + mcdc_text_date(t + 1, v->i);
        t[n++] = '"';
        return mcdc_buf_append(b, t, n, err);
    }
    case MCDC_TYPE_TIMESTAMP_UTC:
    case MCDC_TYPE_TIMESTAMP_NTZ: {
        /* Milliseconds: min rounded down, max rounded up, so the bounds
         * still hold for readers that compare at microsecond precision. */
        int64_t ms = floor_div(v->i, 1000);
        if (is_max && ms * 1000 != v->i) ms++;
        if (ms < -62135596800000LL || ms > 253402300799999LL) return 1;
        t[0] = '"';
        n = 1 + mcdc_text_timestamp_ms(t + 1, ms * 1000, f->type == MCDC_TYPE_TIMESTAMP_UTC);
        t[n++] = '"';
        return mcdc_buf_append(b, t, n, err);
    }
    case MCDC_TYPE_BOOL:
    case MCDC_TYPE_BINARY:
    case MCDC_TYPE_FIXED_BINARY:
        return 1; /* Spark writes null counts only for these */
    }
    return 1;
}

/* {"name":bound,...} for min (is_max false) or max. */
static int put_bounds(mcdc_buf *b, const mcdc_schema *s, const mcdc_delta_col_stats *cols,
                      int32_t n, bool is_max, mcdc_error *err) {
    int rc = mcdc_buf_append_byte(b, '{', err);
    bool first = true;
    for (int32_t i = 0; i < n && !rc; i++) {
        if (!cols[i].has_min_max) continue;
        const mcdc_field *f = &s->fields[i];
        size_t mark = b->len;
        if (!first) rc = mcdc_buf_append_byte(b, ',', err);
        if (!rc) rc = mcdc_text_json_string(b, (const uint8_t *)f->name, strlen(f->name), err);
        if (!rc) rc = mcdc_buf_append_byte(b, ':', err);
        if (!rc) rc = put_bound(b, f, is_max ? &cols[i].max : &cols[i].min, is_max, err);
        if (rc == 1) { /* omitted: take back the key */
            b->len = mark;
            rc = MCDC_OK;
            continue;
        }
        first = false;
    }
    if (!rc) rc = mcdc_buf_append_byte(b, '}', err);
    return rc;
}

int mcdc_delta_stats_json(char **out_json, const mcdc_schema *s, int64_t num_records,
                          const mcdc_delta_col_stats *cols, int32_t indexed_cols,
                          mcdc_error *err) {
    *out_json = NULL;
    MCDC_ASSERT(num_records >= 0);
    int32_t n = indexed_cols < 0 || indexed_cols > s->n_fields ? s->n_fields : indexed_cols;
    mcdc_buf b = {0};
    b.limit = MCDC_DELTA_COMMIT_BYTES_MAX;
    int rc = mcdc_buf_printf(&b, err, "{\"numRecords\":%lld,\"minValues\":",
                             (long long)num_records);
    if (!rc) rc = put_bounds(&b, s, cols, n, false, err);
    if (!rc) rc = mcdc_buf_append_str(&b, ",\"maxValues\":", err);
    if (!rc) rc = put_bounds(&b, s, cols, n, true, err);
    if (!rc) rc = mcdc_buf_append_str(&b, ",\"nullCount\":{", err);
    for (int32_t i = 0; i < n && !rc; i++) {
        const mcdc_field *f = &s->fields[i];
        MCDC_ASSERT(cols[i].null_count >= 0 && cols[i].null_count <= num_records);
        if (i) rc = mcdc_buf_append_byte(&b, ',', err);
        if (!rc) rc = mcdc_text_json_string(&b, (const uint8_t *)f->name, strlen(f->name), err);
        if (!rc) rc = mcdc_buf_printf(&b, err, ":%lld", (long long)cols[i].null_count);
    }
    if (!rc) rc = mcdc_buf_append_str(&b, "}}", err);
    if (!rc) rc = mcdc_buf_cstr(&b, err);
    if (rc) {
        mcdc_buf_free(&b);
        return rc;
    }
    *out_json = (char *)b.data;
    return MCDC_OK;
}
