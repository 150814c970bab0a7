/* mcdc_lake_json.c - a table's rows as JSON lines (inspection and tests). */
#include <stdio.h>
#include <string.h>

#include "mcdc_lake.h"

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

static int put_escaped(mcdc_buf *o, const uint8_t *p, int64_t n, mcdc_error *err) {
    int rc = mcdc_buf_append_byte(o, '"', err);
    for (int64_t i = 0; rc == MCDC_OK && i < n; i++) {
        uint8_t ch = p[i];
        if (ch == '"' || ch == '\\') {
            rc = mcdc_buf_append_byte(o, '\\', err);
            if (rc == MCDC_OK) rc = mcdc_buf_append_byte(o, ch, err);
        } else if (ch < 0x20) {
            rc = mcdc_buf_printf(o, err, "\\u%04x", ch);
        } else {
            rc = mcdc_buf_append_byte(o, ch, err);
        }
    }
    return rc ? rc : mcdc_buf_append_byte(o, '"', err);
}

/* Exact decimal text of a 128-bit unscaled value with `scale` digits. */
static int put_decimal(mcdc_buf *o, const uint8_t *v16, int32_t scale, mcdc_error *err) {
    uint64_t lo;
    int64_t hi;
    memcpy(&lo, v16, 8);
    memcpy(&hi, v16 + 8, 8);
    i128 v = ((i128)hi << 64) | (i128)lo;
    bool neg = v < 0;
    u128 m = neg ? (u128)0 - (u128)v : (u128)v;
    char digits[48];
    int nd = 0;
    do {
        digits[nd++] = (char)('0' + (int)(m % 10));
        m /= 10;
    } while (m);
    while (nd <= scale) digits[nd++] = '0';
    char out[64];
    int k = 0;
    out[k++] = '"';
    if (neg) out[k++] = '-';
    for (int i = nd - 1; i >= 0; i--) {
        out[k++] = digits[i];
        if (i == scale && scale > 0) out[k++] = '.';
    }
    out[k++] = '"';
    return mcdc_buf_append(o, out, (size_t)k, err);
}

static int put_value(mcdc_buf *o, const mcdc_column *c, int64_t r, mcdc_error *err) {
    if (!mcdc_col_is_valid(c, r)) return mcdc_buf_append_str(o, "null", err);
    const mcdc_field *f = c->field;
    const uint8_t *v = c->values;
    char ts[32];
    switch (f->type) {
    case MCDC_TYPE_BOOL:
        return mcdc_buf_append_str(o, (v[r >> 3] >> (r & 7)) & 1 ? "true" : "false", err);
    case MCDC_TYPE_INT8: return mcdc_buf_printf(o, err, "%d", (int)(int8_t)v[r]);
    case MCDC_TYPE_INT16: {
        int16_t x;
        memcpy(&x, v + r * 2, 2);
        return mcdc_buf_printf(o, err, "%d", x);
    }
    case MCDC_TYPE_INT32: {
        int32_t x;
        memcpy(&x, v + r * 4, 4);
        return mcdc_buf_printf(o, err, "%d", x);
    }
    case MCDC_TYPE_INT64: {
        int64_t x;
        memcpy(&x, v + r * 8, 8);
        return mcdc_buf_printf(o, err, "%lld", (long long)x);
    }
    case MCDC_TYPE_FLOAT: {
        float x;
        memcpy(&x, v + r * 4, 4);
        return mcdc_buf_printf(o, err, "%.9g", (double)x);
    }
    case MCDC_TYPE_DOUBLE: {
        double x;
        memcpy(&x, v + r * 8, 8);
        return mcdc_buf_printf(o, err, "%.17g", x);
    }
    case MCDC_TYPE_DECIMAL: return put_decimal(o, v + r * 16, f->scale, err);
    case MCDC_TYPE_UTF8:
        return put_escaped(o, c->data + c->offsets[r], c->offsets[r + 1] - c->offsets[r], err);
    case MCDC_TYPE_BINARY:
    case MCDC_TYPE_FIXED_BINARY: {
        const uint8_t *p;
        int64_t n;
        if (f->type == MCDC_TYPE_BINARY) {
            p = c->data + c->offsets[r];
            n = c->offsets[r + 1] - c->offsets[r];
        } else {
            p = v + r * f->byte_width;
            n = f->byte_width;
        }
        int rc = mcdc_buf_append_str(o, "\"0x", err);
        for (int64_t i = 0; rc == MCDC_OK && i < n; i++) rc = mcdc_buf_printf(o, err, "%02X", p[i]);
        return rc ? rc : mcdc_buf_append_byte(o, '"', err);
    }
    case MCDC_TYPE_DATE32: {
        int32_t d;
        memcpy(&d, v + r * 4, 4);
        mcdc_format_ts_us((int64_t)d * 86400000000LL, 0, ts);
        ts[10] = 0;
        return mcdc_buf_printf(o, err, "\"%s\"", ts);
    }
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: {
        int64_t x;
        memcpy(&x, v + r * 8, 8);
        mcdc_format_ts_us(x, 6, ts);
        return mcdc_buf_printf(o, err, "\"%s%s\"", ts, f->type == MCDC_TYPE_TIMESTAMP_UTC ? "Z" : "");
    }
    default: MCDC_UNREACHABLE();
    }
}

int mcdc_table_rows_json(const char *table, const char *warehouse, mcdc_line_fn fn, void *ctx,
                         mcdc_error *err) {
    mcdc_table *t;
    int rc = mcdc_table_open(&t, table, warehouse, err);
    if (rc) return rc;
    mcdc_batch *b = NULL;
    int64_t version;
    rc = mcdc_table_read_all(t, &b, &version, err);
    if (rc == MCDC_OK && version < 0)
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "no Delta table at %s", mcdc_table_path(t));
    mcdc_buf line = {0};
    for (int64_t r = 0; rc == MCDC_OK && b && r < b->rows; r++) {
        mcdc_buf_reset(&line);
        rc = mcdc_buf_append_byte(&line, '{', err);
        for (int32_t i = 0; rc == MCDC_OK && i < b->schema->n_fields; i++) {
            if (i) rc = mcdc_buf_append_byte(&line, ',', err);
            const char *name = b->schema->fields[i].name;
            if (rc == MCDC_OK)
                rc = put_escaped(&line, (const uint8_t *)name, (int64_t)strlen(name), err);
            if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&line, ':', err);
            if (rc == MCDC_OK) rc = put_value(&line, &b->columns[i], r, err);
        }
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&line, '}', err);
        if (rc == MCDC_OK) rc = mcdc_buf_cstr(&line, err);
        if (rc == MCDC_OK && fn(ctx, (const char *)line.data) != 0)
            rc = mcdc_error_set(err, MCDC_E_IO, "the output was closed");
    }
    mcdc_buf_free(&line);
    mcdc_batch_free(b);
    mcdc_table_close(t);
    return rc;
}
