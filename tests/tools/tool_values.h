/*
 * tool_values.h - how the test tools (parquet_tool, lake_tool) print batch
 * values as JSON: the exact encoding the interop tests parse (integers and
 * timestamps as numbers, decimals as unscaled integer strings, binary as
 * hex, NaN and infinities as strings). Header-only: each tool is one file
 * built by its test fixture.
 */
#ifndef TOOL_VALUES_H
#define TOOL_VALUES_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_batch.h"

static void put_json_string(const uint8_t *p, int64_t n) {
    putchar('"');
    for (int64_t i = 0; i < n; i++) {
        uint8_t ch = p[i];
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}

static void put_hex(const uint8_t *p, int64_t n) {
    putchar('"');
    for (int64_t i = 0; i < n; i++) printf("%02x", p[i]);
    putchar('"');
}

static void put_double(double d) {
    if (isnan(d)) printf("\"NaN\"");
    else if (isinf(d)) printf(d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else printf("%.17g", d);
}

/* Unscaled 128-bit two's complement as decimal digits. */
static void put_i128(const uint8_t *v) {
    uint64_t lo, hi;
    memcpy(&lo, v, 8);
    memcpy(&hi, v + 8, 8);
    bool neg = hi >> 63;
    if (neg) {
        lo = ~lo + 1;
        hi = ~hi + (lo == 0);
    }
    char buf[48];
    int k = 47;
    buf[k] = 0;
    uint32_t parts[4] = {(uint32_t)(hi >> 32), (uint32_t)hi, (uint32_t)(lo >> 32), (uint32_t)lo};
    do {
        uint64_t rem = 0;
        for (int j = 0; j < 4; j++) {
            uint64_t cur = (rem << 32) | parts[j];
            parts[j] = (uint32_t)(cur / 10);
            rem = cur % 10;
        }
        buf[--k] = (char)('0' + rem);
    } while (parts[0] | parts[1] | parts[2] | parts[3]);
    if (neg) buf[--k] = '-';
    printf("\"%s\"", buf + k);
}

static void put_value(const mcdc_column *c, int64_t i) {
    if (c == NULL || !mcdc_col_is_valid(c, i)) {
        printf("null");
        return;
    }
    const uint8_t *v = c->values;
    switch (c->field->type) {
    case MCDC_TYPE_BOOL: printf((v[i >> 3] >> (i & 7)) & 1 ? "true" : "false"); break;
    case MCDC_TYPE_INT8: printf("%d", ((const int8_t *)v)[i]); break;
    case MCDC_TYPE_INT16: printf("%d", ((const int16_t *)(const void *)v)[i]); break;
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: printf("%d", ((const int32_t *)(const void *)v)[i]); break;
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: printf("%lld", (long long)((const int64_t *)(const void *)v)[i]); break;
    case MCDC_TYPE_FLOAT: put_double(((const float *)(const void *)v)[i]); break;
    case MCDC_TYPE_DOUBLE: put_double(((const double *)(const void *)v)[i]); break;
    case MCDC_TYPE_DECIMAL: put_i128(v + i * 16); break;
    case MCDC_TYPE_UTF8:
        put_json_string(c->data + c->offsets[i], c->offsets[i + 1] - c->offsets[i]);
        break;
    case MCDC_TYPE_BINARY: put_hex(c->data + c->offsets[i], c->offsets[i + 1] - c->offsets[i]); break;
    case MCDC_TYPE_FIXED_BINARY: put_hex(v + i * c->field->byte_width, c->field->byte_width); break;
    default: printf("\"?\"");
    }
}

#endif /* TOOL_VALUES_H */
