/*
 * tool_values.h - how the test tools (parquet_tool, lake_tool) print batch
 * values as JSON: the exact encoding the interop tests parse (integers and
 * timestamps as numbers, decimals as unscaled integer strings, binary as
 * lowercase hex, NaN and infinities as strings), each through the library's
 * value text (src/batch/mcdc_value_text.h). Header-only: each tool is one
 * file built by its test fixture.
 */
#ifndef TOOL_VALUES_H
#define TOOL_VALUES_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_batch.h"
#include "mcdc_value_text.h"

static void put_json_string(const uint8_t *p, int64_t n) {
    mcdc_buf b = {0};
    if (mcdc_text_json_string(&b, p, (size_t)n, NULL) == MCDC_OK) fwrite(b.data, 1, b.len, stdout);
    mcdc_buf_free(&b);
}

static void put_hex(const uint8_t *p, int64_t n) {
    char *t = malloc((size_t)n * 2 + 1);
    if (t == NULL) return;
    printf("\"%.*s\"", (int)mcdc_text_hex_digits(t, p, (size_t)n, false), t);
    free(t);
}

/* The canonical text of the double: a JSON number, or "NaN", "Infinity",
 * "-Infinity" as strings. A float is printed as its double (the interop
 * tests compare with pyarrow's Python floats). */
static void put_double(double d) {
    char t[MCDC_TEXT_FIXED_MAX];
    size_t n = mcdc_text_double(t, d);
    if (isfinite(d)) fwrite(t, 1, n, stdout);
    else printf("\"%.*s\"", (int)n, t);
}

/* The unscaled value (the decimal's scale-0 text) as a string. */
static void put_i128(const uint8_t *v) {
    uint64_t lo;
    int64_t hi;
    memcpy(&lo, v, 8);
    memcpy(&hi, v + 8, 8);
    char t[MCDC_TEXT_FIXED_MAX];
    printf("\"%.*s\"", (int)mcdc_text_decimal(t, lo, hi, 0), t);
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
