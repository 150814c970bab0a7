/*
 * lake_tool - writes and reads Delta tables through libmssqlcdc for the
 * interop tests (tests/interop/test_spark_interop.py).
 *
 *   lake_tool write TABLE SPEC.json
 *       SPEC = {"columns": [[name, arrow_format, nullable], ...],
 *               "rows": [[v, ...], ...], "batch_rows": n (default 4096),
 *               "app_id": s, "txn": n, "configuration": ["k=v", ...]}
 *       appends the rows through the lake appender (src/lake: our Parquet
 *       writer, our Delta commit) in one commit; prints
 *       {"version": v, "skipped": b, "rows": n}.
 *       Formats: b c s i l f g d:P,S u z w:N tdD tsu: tsu:UTC (Arrow's).
 *   lake_tool dump TABLE [VERSION] [APP_ID]
 *       replays the log (src/delta) and reads every live file with our
 *       Parquet reader. First line: {"version", "files": [path...],
 *       "schema": schemaString, "columns": [[name, format]...], "records",
 *       "protocol": [r, w], "txn" (when APP_ID)}; then one JSON array per row,
 *       columns in the table schema's order (NULL for a column a file lacks).
 *       Under column mapping (mode "name") file columns are found by their
 *       physical names; "columns" shows the logical ones.
 *
 * Values (both ways): bool, ints, date32 (days), timestamps (microseconds)
 * as JSON numbers; float/double as numbers or "NaN"/"Infinity"/"-Infinity";
 * decimals as the unscaled integer in a string; utf8 as a string;
 * binary/fixed as lowercase hex strings; NULL as null.
 * On failure prints {"error": name, "message": ...} and exits 1.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_values.h"
#include "mcdc_delta.h"
#include "mcdc_lake.h"
#include "mcdc_parquet.h"

static int fail(int rc, const mcdc_error *e) {
    json_t *o = json_pack("{s:s,s:s}", "error", mcdc_status_name(rc), "message", e->message);
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s ? s : "{}");
    free(s);
    json_decref(o);
    return 1;
}

static int parse_format(mcdc_schema *s, int32_t i, const char *name, const char *fmt,
                        bool nullable, mcdc_error *e) {
    static const struct { const char *f; mcdc_type_id t; } simple[] = {
        {"b", MCDC_TYPE_BOOL},      {"c", MCDC_TYPE_INT8},    {"s", MCDC_TYPE_INT16},
        {"i", MCDC_TYPE_INT32},     {"l", MCDC_TYPE_INT64},   {"f", MCDC_TYPE_FLOAT},
        {"g", MCDC_TYPE_DOUBLE},    {"u", MCDC_TYPE_UTF8},    {"z", MCDC_TYPE_BINARY},
        {"tdD", MCDC_TYPE_DATE32},  {"tsu:", MCDC_TYPE_TIMESTAMP_NTZ},
        {"tsu:UTC", MCDC_TYPE_TIMESTAMP_UTC}};
    for (size_t k = 0; k < sizeof simple / sizeof simple[0]; k++)
        if (strcmp(fmt, simple[k].f) == 0)
            return mcdc_schema_set(s, i, name, simple[k].t, 0, 0, 0, nullable, e);
    int p, sc, w;
    if (sscanf(fmt, "d:%d,%d", &p, &sc) == 2)
        return mcdc_schema_set(s, i, name, MCDC_TYPE_DECIMAL, p, sc, 0, nullable, e);
    if (sscanf(fmt, "w:%d", &w) == 1)
        return mcdc_schema_set(s, i, name, MCDC_TYPE_FIXED_BINARY, 0, 0, w, nullable, e);
    return mcdc_error_set(e, MCDC_E_INVALID, "lake_tool: unknown format '%s'", fmt);
}

/* Unscaled decimal text -> 128-bit two's complement halves. */
static void parse_i128(const char *t, uint64_t *lo, int64_t *hi) {
    bool neg = *t == '-';
    if (neg || *t == '+') t++;
    uint32_t p[4] = {0, 0, 0, 0}; /* big-endian 32-bit limbs */
    for (; *t >= '0' && *t <= '9'; t++) {
        uint64_t carry = (uint64_t)(*t - '0');
        for (int j = 3; j >= 0; j--) {
            uint64_t cur = (uint64_t)p[j] * 10 + carry;
            p[j] = (uint32_t)cur;
            carry = cur >> 32;
        }
    }
    uint64_t l = ((uint64_t)p[2] << 32) | p[3], h = ((uint64_t)p[0] << 32) | p[1];
    if (neg) {
        l = ~l + 1;
        h = ~h + (l == 0);
    }
    *lo = l;
    *hi = (int64_t)h;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10;
}

static int append_value(mcdc_column *c, json_t *v, mcdc_error *e) {
    if (json_is_null(v)) return mcdc_col_append_null(c, e);
    switch (c->field->type) {
    case MCDC_TYPE_BOOL: return mcdc_col_append_bool(c, json_is_true(v), e);
    case MCDC_TYPE_FLOAT:
    case MCDC_TYPE_DOUBLE: {
        double d;
        if (json_is_string(v)) {
            const char *s = json_string_value(v);
            d = strcmp(s, "NaN") == 0 ? NAN : strcmp(s, "Infinity") == 0 ? INFINITY : -INFINITY;
        } else {
            d = json_number_value(v);
        }
        return mcdc_col_append_double(c, d, e);
    }
    case MCDC_TYPE_DECIMAL: {
        uint64_t lo;
        int64_t hi;
        parse_i128(json_string_value(v), &lo, &hi);
        return mcdc_col_append_decimal(c, lo, hi, e);
    }
    case MCDC_TYPE_UTF8:
        return mcdc_col_append_bytes(c, json_string_value(v), (int64_t)json_string_length(v), e);
    case MCDC_TYPE_BINARY:
    case MCDC_TYPE_FIXED_BINARY: {
        const char *h = json_string_value(v);
        size_t n = json_string_length(v) / 2;
        uint8_t buf[4096];
        if (n > sizeof buf) return mcdc_error_set(e, MCDC_E_INVALID, "lake_tool: binary too long");
        for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)(hexval(h[2 * k]) << 4 | hexval(h[2 * k + 1]));
        return mcdc_col_append_bytes(c, buf, (int64_t)n, e);
    }
    default: return mcdc_col_append_int(c, (int64_t)json_integer_value(v), e);
    }
}

static int cmd_write(const char *table, const char *spec_path, mcdc_error *e) {
    json_error_t je;
    json_t *spec = json_load_file(spec_path, 0, &je);
    if (spec == NULL)
        return mcdc_error_set(e, MCDC_E_INVALID, "lake_tool: %s: %s", spec_path, je.text);
    json_t *cols = json_object_get(spec, "columns"), *rows = json_object_get(spec, "rows");
    int32_t nf = (int32_t)json_array_size(cols);
    mcdc_schema *s = NULL;
    mcdc_table *t = NULL;
    mcdc_appender *a = NULL;
    mcdc_batch *b = NULL;
    const char *conf[65] = {0};
    json_t *jc = json_object_get(spec, "configuration");
    for (size_t k = 0; k < json_array_size(jc) && k < 64; k++)
        conf[k] = json_string_value(json_array_get(jc, k));
    mcdc_table_props props = {.configuration = conf};
    int rc = mcdc_schema_create(&s, nf, e);
    for (int32_t i = 0; rc == MCDC_OK && i < nf; i++) {
        json_t *c = json_array_get(cols, (size_t)i);
        rc = parse_format(s, i, json_string_value(json_array_get(c, 0)),
                          json_string_value(json_array_get(c, 1)),
                          json_is_true(json_array_get(c, 2)), e);
    }
    int64_t per = json_integer_value(json_object_get(spec, "batch_rows"));
    if (per <= 0) per = 4096;
    if (rc == MCDC_OK) rc = mcdc_table_open(&t, table, NULL, e);
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, t, s, &props, e);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&b, s, per, e);
    size_t nrows = json_array_size(rows);
    for (size_t r = 0; rc == MCDC_OK && r < nrows; r++) {
        json_t *row = json_array_get(rows, r);
        for (int32_t i = 0; rc == MCDC_OK && i < nf; i++)
            rc = append_value(&b->columns[i], json_array_get(row, (size_t)i), e);
        if (rc == MCDC_OK && ((int64_t)(r + 1) % per == 0 || r + 1 == nrows)) {
            rc = mcdc_batch_seal(b, e);
            if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, e);
            mcdc_batch_reset(b);
        }
    }
    bool skipped = false;
    int64_t version = -1;
    const char *app = json_string_value(json_object_get(spec, "app_id"));
    if (rc == MCDC_OK)
        rc = mcdc_appender_commit(a, app, (int64_t)json_integer_value(json_object_get(spec, "txn")),
                                  NULL, &skipped, &version, e);
    if (rc == MCDC_OK)
        printf("{\"version\":%lld,\"skipped\":%s,\"rows\":%zu}\n", (long long)version,
               skipped ? "true" : "false", nrows);
    mcdc_batch_free(b);
    mcdc_appender_free(a);
    mcdc_table_close(t);
    mcdc_schema_unref(s);
    json_decref(spec);
    return rc;
}

/* ---- dump --------------------------------------------------------------------- */


static int cmd_dump(const char *table, int64_t version, const char *app, mcdc_error *e) {
    mcdc_delta_table *t = NULL;
    mcdc_delta_snapshot *s = NULL;
    mcdc_schema *schema = NULL;
    mcdc_delta_field_meta *meta = NULL;
    int rc = mcdc_delta_table_open(&t, table, NULL, e);
    if (rc == MCDC_OK) rc = mcdc_delta_snapshot_load(&s, t, version, e);
    if (rc == MCDC_OK) rc = mcdc_delta_snapshot_schema(&schema, &meta, s, e);
    if (rc) goto done;
    bool mapped = mcdc_delta_snapshot_column_mapping(s);
    json_t *files = json_array(), *cols = json_array();
    size_t nfiles = mcdc_delta_snapshot_file_count(s);
    for (size_t i = 0; i < nfiles; i++)
        json_array_append_new(files, json_string(mcdc_delta_snapshot_file(s, i)->path));
    for (int32_t c = 0; c < schema->n_fields; c++) {
        char fmt[32];
        mcdc_field_format(&schema->fields[c], fmt);
        json_array_append_new(cols, json_pack("[s,s]", schema->fields[c].name, fmt));
    }
    int32_t pr = 0, pw = 0;
    mcdc_delta_snapshot_protocol(s, &pr, &pw);
    json_t *head = json_pack("{s:I,s:o,s:s,s:o,s:I,s:[i,i]}", "version",
                             (json_int_t)mcdc_delta_snapshot_version(s), "files", files, "schema",
                             mcdc_delta_snapshot_schema_string(s), "columns", cols, "records",
                             (json_int_t)mcdc_delta_snapshot_total_records(s), "protocol", pr, pw);
    if (app)
        json_object_set_new(head, "txn", json_integer(mcdc_delta_snapshot_txn_version(s, app)));
    char *hs = json_dumps(head, JSON_COMPACT);
    printf("%s\n", hs ? hs : "{}");
    free(hs);
    json_decref(head);
    for (size_t i = 0; rc == MCDC_OK && i < nfiles; i++) {
        mcdc_parquet_reader *r = NULL;
        rc = mcdc_parquet_reader_open(&r, mcdc_delta_table_storage(t),
                                      mcdc_delta_snapshot_file(s, i)->path, NULL, e);
        mcdc_batch *b = NULL;
        while (rc == MCDC_OK && (rc = mcdc_parquet_reader_next(&b, r, e)) == MCDC_OK && b) {
            for (int64_t row = 0; row < b->rows; row++) {
                putchar('[');
                for (int32_t c = 0; c < schema->n_fields; c++) {
                    const char *fname = mapped && meta[c].physical_name
                                            ? meta[c].physical_name
                                            : schema->fields[c].name;
                    int32_t j = mcdc_schema_find(b->schema, fname);
                    if (c) putchar(',');
                    put_value(j < 0 ? NULL : &b->columns[j], row);
                }
                printf("]\n");
            }
            mcdc_batch_free(b);
        }
        mcdc_parquet_reader_free(r);
    }
done:
    mcdc_delta_field_meta_free(meta, schema ? schema->n_fields : 0);
    mcdc_schema_unref(schema);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    return rc;
}

int main(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    int rc;
    if (argc == 4 && strcmp(argv[1], "write") == 0) {
        rc = cmd_write(argv[2], argv[3], &e);
    } else if (argc >= 3 && strcmp(argv[1], "dump") == 0) {
        rc = cmd_dump(argv[2], argc > 3 ? strtoll(argv[3], NULL, 10) : -1,
                      argc > 4 ? argv[4] : NULL, &e);
    } else {
        fprintf(stderr, "usage: lake_tool write TABLE SPEC.json | dump TABLE [VERSION] [APP_ID]\n");
        return 2;
    }
    return rc ? fail(rc, &e) : 0;
}
