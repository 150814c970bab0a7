/*
 * parquet_tool - drives our Parquet writer and reader from tests.
 *
 *   parquet_tool write-sample OUT [--codec C] [--v2] [--no-dict] [--rows N]
 *                [--page-bytes N] [--row-group-bytes N] [--threads N]
 *       writes a fixed sample of every type (NULLs, edge values, non-ASCII)
 *   parquet_tool dump IN [--columns a,b] [--batch-rows N]
 *       prints {"columns":[[name,format],...]} then one JSON array per row:
 *       bool, ints, date32 (days), timestamps (microseconds) as numbers;
 *       float/double as numbers, the shortest that read back ("NaN", "Infinity", "-Infinity");
 *       decimals as the unscaled integer in a string; utf8 as a string;
 *       binary/fixed as lowercase hex strings; NULL as null.
 *   parquet_tool leaves IN
 *       prints one line per leaf: path max_def max_rep physical format
 *   parquet_tool leaf IN PATH
 *       prints [def, rep, value] per level entry of the leaf (null levels
 *       when the leaf has none), all row groups
 *
 * Built by tests/interop (cc ... build/libmssqlcdc.a).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_values.h"
#include "mcdc_parquet.h"

static int fail(const mcdc_error *e) {
    fprintf(stderr, "parquet_tool: %s\n", e->message);
    return 1;
}

/* ---- sample ------------------------------------------------------------------- */

enum { NF = 17 };

static mcdc_schema *sample_schema(void) {
    mcdc_schema *s = NULL;
    if (mcdc_schema_create(&s, NF, NULL)) return NULL;
    int i = 0;
    mcdc_schema_set(s, i++, "b", MCDC_TYPE_BOOL, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "i8", MCDC_TYPE_INT8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "i16", MCDC_TYPE_INT16, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "i32", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "i64", MCDC_TYPE_INT64, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "f32", MCDC_TYPE_FLOAT, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "f64", MCDC_TYPE_DOUBLE, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "d9", MCDC_TYPE_DECIMAL, 9, 2, 0, true, NULL);
    mcdc_schema_set(s, i++, "d18", MCDC_TYPE_DECIMAL, 18, 4, 0, true, NULL);
    mcdc_schema_set(s, i++, "d38", MCDC_TYPE_DECIMAL, 38, 10, 0, true, NULL);
    mcdc_schema_set(s, i++, "d25", MCDC_TYPE_DECIMAL, 25, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "s", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "bin", MCDC_TYPE_BINARY, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "fx", MCDC_TYPE_FIXED_BINARY, 0, 0, 10, true, NULL);
    mcdc_schema_set(s, i++, "dt", MCDC_TYPE_DATE32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "tsu", MCDC_TYPE_TIMESTAMP_UTC, 0, 0, 0, true, NULL);
    return s;
}

static void neg128(uint64_t *lo, int64_t *hi) {
    *lo = ~*lo + 1;
    *hi = (int64_t)(~(uint64_t)*hi + (*lo == 0));
}

static void fill(mcdc_batch *b, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t x = r;
        for (int c = 0; c < NF; c++) {
            mcdc_column *col = &b->columns[c];
            if (c != 3 && r % 7 == 3) {
                mcdc_col_append_null(col, NULL);
                continue;
            }
            char s[64];
            int len;
            uint64_t lo;
            int64_t hi;
            switch (c) {
            case 0: mcdc_col_append_bool(col, x % 3 == 0, NULL); break;
            case 1: mcdc_col_append_int(col, r == 0 ? INT8_MIN : r == 1 ? INT8_MAX : (int8_t)x, NULL); break;
            case 2: mcdc_col_append_int(col, r == 0 ? INT16_MIN : r == 1 ? INT16_MAX : (int16_t)(x * 7), NULL); break;
            case 3: mcdc_col_append_int(col, r == 0 ? INT32_MIN : r == 1 ? INT32_MAX : (int32_t)(x * 31 - 1000), NULL); break;
            case 4: mcdc_col_append_int(col, r == 0 ? INT64_MIN : r == 1 ? INT64_MAX : x * 1000003 - 7777777, NULL); break;
            case 5: mcdc_col_append_double(col, r == 0 ? -3.4028234663852886e38 : r == 1 ? 1e-45 : r == 2 ? -0.0 : (double)(float)((double)x * 0.3), NULL); break;
            case 6: mcdc_col_append_double(col, r == 0 ? -1.7976931348623157e308 : r == 1 ? 5e-324 : r == 2 ? NAN : (double)x / 3.0, NULL); break;
            case 7:
                lo = (uint64_t)(r == 0 ? 999999999 : x * 37);
                hi = 0;
                if (r == 0 || (r > 1 && x % 2)) neg128(&lo, &hi);
                mcdc_col_append_decimal(col, lo, hi, NULL);
                break;
            case 8:
                lo = (uint64_t)(r == 1 ? 999999999999999999LL : x * 1234567);
                hi = 0;
                if (r == 0 || (r > 1 && x % 2)) neg128(&lo, &hi);
                if (r == 0) lo = (uint64_t)-999999999999999999LL, hi = -1;
                mcdc_col_append_decimal(col, lo, hi, NULL);
                break;
            case 9:
                /* 10^38 - 1 = 0x4B3B4CA85A86C47A098A223FFFFFFFFF */
                lo = 0x098A223FFFFFFFFFull;
                hi = 0x4B3B4CA85A86C47ALL;
                if (r > 1) lo = (uint64_t)x * 98765431, hi = 0;
                if (r == 0 || (r > 1 && x % 2)) neg128(&lo, &hi);
                mcdc_col_append_decimal(col, lo, hi, NULL);
                break;
            case 10:
                lo = (uint64_t)x * 0x123456789ull;
                hi = (int64_t)(x % 1000);
                if (x % 2) neg128(&lo, &hi);
                mcdc_col_append_decimal(col, lo, hi, NULL);
                break;
            case 11:
                if (r == 1) len = 0;
                else len = snprintf(s, sizeof s, "%s-%lld", x % 3 == 0 ? "zürich" : x % 3 == 1 ? "日本語" : "a\"b\\c\n", (long long)(x % 50));
                mcdc_col_append_bytes(col, s, len, NULL);
                break;
            case 12:
                len = (int)(x % 6);
                for (int j = 0; j < len; j++) s[j] = (char)(0xF0 + j + x);
                mcdc_col_append_bytes(col, s, len, NULL);
                break;
            case 13:
                for (int j = 0; j < 10; j++) s[j] = (char)(x * 13 + j);
                mcdc_col_append_bytes(col, s, 10, NULL);
                break;
            case 14: mcdc_col_append_int(col, r == 0 ? -719162 : r == 1 ? 2932896 : x - 5000, NULL); break;
            case 15: mcdc_col_append_int(col, r == 0 ? -62135596800000000LL : r == 1 ? 253402300799999999LL : x * 1000001 - 86400000000LL, NULL); break;
            case 16: mcdc_col_append_int(col, r == 0 ? -1 : x * 999999937, NULL); break;
            }
        }
    }
    mcdc_batch_seal(b, NULL);
}

static int write_sample(int argc, char **argv) {
    const char *out = argv[2];
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    int64_t rows = 1000;
    mcdc_error e = MCDC_ERROR_INIT;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--codec") && i + 1 < argc) {
            if (mcdc_parquet_codec_parse(&o.codec, argv[++i], &e)) return fail(&e);
        } else if (!strcmp(argv[i], "--v2")) o.data_page_v2 = true;
        else if (!strcmp(argv[i], "--no-dict")) o.dictionary = false;
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--page-bytes") && i + 1 < argc) o.page_bytes = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--row-group-bytes") && i + 1 < argc) o.row_group_bytes = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) o.threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "parquet_tool: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    mcdc_schema *s = sample_schema();
    mcdc_batch *b = NULL;
    if (s == NULL || mcdc_batch_create(&b, s, rows, &e)) return fail(&e);
    fill(b, rows);
    mcdc_parquet_writer *w = NULL;
    int rc = mcdc_parquet_writer_open_path(&w, out, s, &o, &e);
    if (!rc) rc = mcdc_parquet_writer_write(w, b, &e);
    if (!rc) rc = mcdc_parquet_writer_close(w, &e);
    if (!rc) {
        const mcdc_parquet_file_info *fi = mcdc_parquet_writer_info(w);
        printf("{\"file_bytes\":%lld,\"rows\":%lld,\"row_groups\":%d}\n", (long long)fi->file_bytes,
               (long long)fi->rows, fi->row_groups);
    }
    mcdc_parquet_writer_free(w);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
    return rc ? fail(&e) : 0;
}

/* ---- dump --------------------------------------------------------------------- */


static int dump(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_parquet_read_options ro = MCDC_PARQUET_READ_OPTIONS_INIT;
    const char *cols = NULL;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--columns") && i + 1 < argc) cols = argv[++i];
        else if (!strcmp(argv[i], "--batch-rows") && i + 1 < argc) ro.batch_rows = atoll(argv[++i]);
        else return 2;
    }
    mcdc_parquet_reader *r;
    if (mcdc_parquet_reader_open_path(&r, argv[2], &ro, &e)) return fail(&e);
    if (cols) {
        char *copy = strdup(cols);
        const char *names[256];
        int32_t n = 0;
        for (char *t = strtok(copy, ","); t && n < 256; t = strtok(NULL, ",")) names[n++] = t;
        int rc = mcdc_parquet_reader_select(r, names, n, &e);
        free(copy);
        if (rc) {
            mcdc_parquet_reader_free(r);
            return fail(&e);
        }
    }
    mcdc_batch *b;
    int rc;
    bool header = false;
    while ((rc = mcdc_parquet_reader_next(&b, r, &e)) == MCDC_OK && b) {
        if (!header) {
            printf("{\"columns\":[");
            for (int32_t c = 0; c < b->schema->n_fields; c++) {
                char fmt[32];
                mcdc_field_format(&b->schema->fields[c], fmt);
                printf("%s[\"%s\",\"%s\"]", c ? "," : "", b->schema->fields[c].name, fmt);
            }
            printf("]}\n");
            header = true;
        }
        for (int64_t i = 0; i < b->rows; i++) {
            putchar('[');
            for (int32_t c = 0; c < b->schema->n_fields; c++) {
                if (c) putchar(',');
                put_value(&b->columns[c], i);
            }
            printf("]\n");
        }
        mcdc_batch_free(b);
    }
    if (!header && rc == MCDC_OK) printf("{\"columns\":[]}\n");
    mcdc_parquet_reader_free(r);
    return rc ? fail(&e) : 0;
}

static int leaves(int argc, char **argv) {
    (void)argc;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_parquet_reader *r;
    if (mcdc_parquet_reader_open_path(&r, argv[2], NULL, &e)) return fail(&e);
    for (int32_t i = 0; i < mcdc_parquet_reader_leaves(r); i++) {
        const mcdc_parquet_leaf *l = mcdc_parquet_reader_leaf(r, i);
        char fmt[32];
        mcdc_field_format(l->field, fmt);
        printf("%s %d %d %d %s\n", l->path, l->max_def, l->max_rep, l->physical_type, fmt);
    }
    mcdc_parquet_reader_free(r);
    return 0;
}

/* leaf IN PATH: one [def, rep, value] line per level entry, every row group. */
static int leaf(int argc, char **argv) {
    if (argc < 4) return 2;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_parquet_reader *r;
    if (mcdc_parquet_reader_open_path(&r, argv[2], NULL, &e)) return fail(&e);
    int32_t li = mcdc_parquet_reader_find_leaf(r, argv[3]);
    if (li < 0) {
        fprintf(stderr, "parquet_tool: no leaf %s\n", argv[3]);
        mcdc_parquet_reader_free(r);
        return 1;
    }
    int rc = 0;
    for (int32_t g = 0; g < mcdc_parquet_reader_row_groups(r) && !rc; g++) {
        mcdc_parquet_leaf_data d;
        rc = mcdc_parquet_reader_read_leaf(&d, r, g, li, &e);
        if (rc) break;
        for (int64_t i = 0; i < d.n; i++) {
            if (d.def) printf("[%d,", d.def[i]);
            else printf("[null,");
            if (d.rep) printf("%d,", d.rep[i]);
            else printf("null,");
            put_value(&d.values->columns[0], i);
            printf("]\n");
        }
        mcdc_parquet_leaf_data_free(&d);
    }
    mcdc_parquet_reader_free(r);
    return rc ? fail(&e) : 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "leaf")) return leaf(argc, argv);
    if (argc >= 3 && !strcmp(argv[1], "write-sample")) return write_sample(argc, argv);
    if (argc >= 3 && !strcmp(argv[1], "dump")) return dump(argc, argv);
    if (argc >= 3 && !strcmp(argv[1], "leaves")) return leaves(argc, argv);
    fprintf(stderr, "usage: parquet_tool write-sample OUT [options] | dump IN [options] | leaves IN\n");
    return 2;
}
