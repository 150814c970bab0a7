/*
 * Parquet writer -> reader round trips: every type, codec, page version,
 * dictionary fallback, row groups, statistics, pruning, bad input.
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mcdc_parquet_int.h"
#include "mcdc_test.h"
#include "test_delta_util.h"

static char g_path[256];

static const char *tmp_path(const char *tag) {
    snprintf(g_path, sizeof g_path, "/tmp/mcdc_pq_test_%d_%s.parquet", (int)getpid(), tag);
    return g_path;
}

enum { NF = 16 };

static mcdc_schema *all_types_schema(void) {
    mcdc_schema *s = NULL;
    MCDC_ASSERT(mcdc_schema_create(&s, NF, NULL) == MCDC_OK);
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
    mcdc_schema_set(s, i++, "s", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "bin", MCDC_TYPE_BINARY, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "fx", MCDC_TYPE_FIXED_BINARY, 0, 0, 10, true, NULL);
    mcdc_schema_set(s, i++, "dt", MCDC_TYPE_DATE32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "tsu", MCDC_TYPE_TIMESTAMP_UTC, 0, 0, 0, true, NULL);
    return s;
}

/* Deterministic value of row r in column c (NULL every 7th row for nullable
 * columns, edge values at the start). */
static bool is_null(int c, int64_t r) { return c != 3 && r % 7 == 3; }

static void fill(mcdc_batch *b, int64_t first, int64_t n, int64_t distinct) {
    for (int64_t k = 0; k < n; k++) {
        int64_t r = first + k;
        int64_t x = distinct ? r % distinct : r;
        for (int c = 0; c < NF; c++) {
            mcdc_column *col = &b->columns[c];
            if (is_null(c, r)) {
                MCDC_ASSERT(mcdc_col_append_null(col, NULL) == MCDC_OK);
                continue;
            }
            char s[64];
            int len;
            switch (c) {
            case 0: mcdc_col_append_bool(col, x % 3 == 0, NULL); break;
            case 1: mcdc_col_append_int(col, r == 0 ? INT8_MIN : r == 1 ? INT8_MAX : (int8_t)x, NULL); break;
            case 2: mcdc_col_append_int(col, r == 0 ? INT16_MIN : (int16_t)(x * 7), NULL); break;
            case 3: mcdc_col_append_int(col, r == 0 ? INT32_MIN : r == 1 ? INT32_MAX : (int32_t)(x * 31), NULL); break;
            case 4: mcdc_col_append_int(col, r == 0 ? INT64_MIN : r == 1 ? INT64_MAX : x * 1000003, NULL); break;
            case 5: mcdc_col_append_double(col, r == 2 ? -0.0 : (double)(float)((double)x * 0.5), NULL); break;
            case 6: mcdc_col_append_double(col, r == 0 ? -1e308 : r == 1 ? 1e308 : (double)x * 0.25, NULL); break;
            case 7: mcdc_col_append_decimal(col, (uint64_t)(r == 0 ? -999999999 : x * 3 - 50), r == 0 || x * 3 < 50 ? -1 : 0, NULL); break;
            case 8: mcdc_col_append_decimal(col, (uint64_t)(r == 1 ? 999999999999999999 : -x), r == 1 || x == 0 ? 0 : -1, NULL); break;
            case 9:
                /* +-(10^38 - 1) = 0x4B3B4CA85A86C47A098A223FFFFFFFFF */
                if (r == 0) mcdc_col_append_decimal(col, 0x098A223FFFFFFFFFull, 0x4B3B4CA85A86C47ALL, NULL);
                else if (r == 1) mcdc_col_append_decimal(col, ~0x098A223FFFFFFFFFull + 1, ~0x4B3B4CA85A86C47ALL, NULL);
                else mcdc_col_append_decimal(col, (uint64_t)x * 12345, 0, NULL);
                break;
            case 10:
                if (r == 1) len = 0, s[0] = 0;
                else len = snprintf(s, sizeof s, "%s-%lld", x % 2 ? "zürich" : "日本", (long long)x);
                mcdc_col_append_bytes(col, s, len, NULL);
                break;
            case 11:
                len = (int)(x % 5);
                for (int j = 0; j < len; j++) s[j] = (char)(0xF0 + j + x);
                mcdc_col_append_bytes(col, s, len, NULL);
                break;
            case 12:
                for (int j = 0; j < 10; j++) s[j] = (char)(x + j);
                mcdc_col_append_bytes(col, s, 10, NULL);
                break;
            case 13: mcdc_col_append_int(col, r == 0 ? -719162 : x - 1000, NULL); break;
            case 14: mcdc_col_append_int(col, r == 0 ? -62135596800000000LL : x * 1000001 - 86400000000LL, NULL); break;
            case 15: mcdc_col_append_int(col, r == 0 ? -1 : x * 999, NULL); break;
            }
        }
    }
    MCDC_ASSERT(mcdc_batch_seal(b, NULL) == MCDC_OK);
}

/* Compares row r of a and row s of b, column c (same type). */
static bool same_value(const mcdc_column *a, int64_t r, const mcdc_column *b, int64_t s) {
    bool va = mcdc_col_is_valid(a, r), vb = mcdc_col_is_valid(b, s);
    if (va != vb) return false;
    if (!va) return true;
    switch (a->field->type) {
    case MCDC_TYPE_BOOL:
        return ((a->values[r >> 3] >> (r & 7)) & 1) == ((b->values[s >> 3] >> (s & 7)) & 1);
    case MCDC_TYPE_UTF8:
    case MCDC_TYPE_BINARY: {
        int32_t la = a->offsets[r + 1] - a->offsets[r], lb = b->offsets[s + 1] - b->offsets[s];
        return la == lb && memcmp(a->data + a->offsets[r], b->data + b->offsets[s], (size_t)la) == 0;
    }
    default: {
        int32_t w = mcdc_type_width(a->field);
        return memcmp(a->values + r * w, b->values + s * w, (size_t)w) == 0;
    }
    }
}

static int64_t compare_reader(mcdc_parquet_reader *r, const mcdc_batch *want);

/* Reads path back and compares every row with `want` (rows in order). */
static int64_t compare_file(const char *path, const mcdc_batch *want, int64_t batch_rows) {
    mcdc_parquet_reader *r = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_parquet_read_options ro = MCDC_PARQUET_READ_OPTIONS_INIT;
    ro.batch_rows = batch_rows;
    int rc = mcdc_parquet_reader_open_path(&r, path, &ro, &e);
    if (rc) {
        fprintf(stderr, "open: %s\n", e.message);
        return -1;
    }
    return compare_reader(r, want);
}

/* Compares every row of r with `want` (rows in order); frees r. */
static int64_t compare_reader(mcdc_parquet_reader *r, const mcdc_batch *want) {
    mcdc_error e = MCDC_ERROR_INIT;
    int rc;
    const mcdc_schema *s;
    if (mcdc_parquet_reader_schema(&s, r, &e) || s->n_fields != want->schema->n_fields) {
        mcdc_parquet_reader_free(r);
        return -2;
    }
    for (int32_t c = 0; c < s->n_fields; c++) {
        const mcdc_field *a = &s->fields[c], *b = &want->schema->fields[c];
        if (strcmp(a->name, b->name) || a->type != b->type || a->precision != b->precision ||
            a->scale != b->scale || a->byte_width != b->byte_width || a->nullable != b->nullable) {
            mcdc_parquet_reader_free(r);
            return -3;
        }
    }
    int64_t row = 0, bad = 0, nb = 0;
    mcdc_batch *b = NULL;
    while ((rc = mcdc_parquet_reader_next(&b, r, &e)) == MCDC_OK && b) {
        nb++;
        if (mcdc_batch_validate(b, &e) != MCDC_OK) bad++;
        for (int64_t i = 0; i < b->rows; i++, row++)
            for (int32_t c = 0; c < s->n_fields; c++)
                if (row >= want->rows || !same_value(&b->columns[c], i, &want->columns[c], row)) {
                    if (bad < 3) fprintf(stderr, "mismatch row %lld col %s\n", (long long)row, s->fields[c].name);
                    bad++;
                }
        /* every other batch goes back to the reader to be refilled */
        if (nb % 2) mcdc_parquet_reader_recycle(r, b);
        else mcdc_batch_free(b);
    }
    if (rc) fprintf(stderr, "next: %s\n", e.message);
    mcdc_parquet_reader_free(r);
    if (rc || bad) return -4;
    return row;
}

static int write_file(const char *path, mcdc_batch *b, const mcdc_parquet_write_options *o,
                      int pieces, const mcdc_parquet_file_info **info_out,
                      mcdc_parquet_writer **keep) {
    mcdc_parquet_writer *w = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_parquet_writer_open_path(&w, path, b->schema, o, &e);
    /* the same batch written `pieces` times */
    for (int k = 0; k < pieces && !rc; k++) rc = mcdc_parquet_writer_write(w, b, &e);
    if (!rc) rc = mcdc_parquet_writer_close(w, &e);
    if (rc) fprintf(stderr, "write: %s\n", e.message);
    if (info_out) *info_out = rc ? NULL : mcdc_parquet_writer_info(w);
    if (keep) *keep = w;
    else mcdc_parquet_writer_free(w);
    return rc;
}

static mcdc_batch *make_batch(int64_t rows, int64_t distinct) {
    mcdc_schema *s = all_types_schema();
    mcdc_batch *b = NULL;
    MCDC_ASSERT(mcdc_batch_create(&b, s, rows, NULL) == MCDC_OK);
    mcdc_schema_unref(s);
    fill(b, 0, rows, distinct);
    return b;
}

TEST(parquet_all_types_round_trip_every_codec_and_page_version) {
    mcdc_batch *b = make_batch(3000, 0);
    int codecs[] = {MCDC_PARQUET_ZSTD, MCDC_PARQUET_SNAPPY, MCDC_PARQUET_GZIP,
                    MCDC_PARQUET_LZ4_RAW, MCDC_PARQUET_UNCOMPRESSED};
    for (size_t k = 0; k < sizeof codecs / sizeof codecs[0]; k++) {
        for (int v2 = 0; v2 < 2; v2++) {
            for (int dict = 0; dict < 2; dict++) {
                mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
                o.codec = (mcdc_parquet_codec)codecs[k];
                o.data_page_v2 = v2;
                o.dictionary = dict;
                o.page_bytes = 4096; /* many pages */
                const char *p = tmp_path("types");
                CHECK_EQ_INT(write_file(p, b, &o, 1, NULL, NULL), MCDC_OK);
                CHECK_EQ_INT(compare_file(p, b, 1000), 3000);
                unlink(p);
            }
        }
    }
    mcdc_batch_free(b);
}

/* Text of every length from 0 to 80 bytes (the reader copies values of up
 * to 32 bytes in fixed moves, longer ones as they are), a NULL now and then
 * and pages of few distinct values (dictionary) or many (PLAIN), read back
 * value for value: a fixed move must not spill into the next value. */
TEST(parquet_text_of_every_length_round_trips) {
    mcdc_schema *s = NULL;
    MCDC_ASSERT(mcdc_schema_create(&s, 2, NULL) == MCDC_OK);
    mcdc_schema_set(s, 0, "few", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "many", MCDC_TYPE_BINARY, 0, 0, 0, true, NULL);
    const int64_t rows = 5000;
    mcdc_batch *b = NULL;
    MCDC_ASSERT(mcdc_batch_create(&b, s, rows, NULL) == MCDC_OK);
    mcdc_schema_unref(s);
    char v[96];
    for (int64_t r = 0; r < rows; r++) {
        int len = (int)(r % 81);
        for (int i = 0; i < len; i++) v[i] = (char)('a' + (r + i) % 26);
        if (r % 11 == 5) MCDC_ASSERT(mcdc_col_append_null(&b->columns[0], NULL) == MCDC_OK);
        else MCDC_ASSERT(mcdc_col_append_bytes(&b->columns[0], v, len, NULL) == MCDC_OK);
        int len2 = (int)((r * 7) % 81);
        for (int i = 0; i < len2; i++) v[i] = (char)((r * 31 + i) & 0xFF);
        if (r % 13 == 3) MCDC_ASSERT(mcdc_col_append_null(&b->columns[1], NULL) == MCDC_OK);
        else MCDC_ASSERT(mcdc_col_append_bytes(&b->columns[1], v, len2, NULL) == MCDC_OK);
    }
    MCDC_ASSERT(mcdc_batch_seal(b, NULL) == MCDC_OK);
    for (int v2 = 0; v2 < 2; v2++) {
        for (int dict = 0; dict < 2; dict++) {
            mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
            o.codec = MCDC_PARQUET_SNAPPY;
            o.data_page_v2 = v2;
            o.dictionary = dict;
            o.page_bytes = 2048; /* many pages */
            const char *p = tmp_path("textlen");
            CHECK_EQ_INT(write_file(p, b, &o, 1, NULL, NULL), MCDC_OK);
            CHECK_EQ_INT(compare_file(p, b, 700), rows);
            unlink(p);
        }
    }
    mcdc_batch_free(b);
}

/* The footer of the file at path into m; *keep gets the file's bytes,
 * which m's statistics point into (freed here when keep is NULL). */
static int read_meta_keep(const char *path, pq_file_meta *m, uint8_t **keep) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    uint8_t *buf = malloc((size_t)n);
    fseek(f, 0, SEEK_SET);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    uint32_t flen = pq_le32(buf + n - 8);
    int rc = got == (size_t)n ? mcdc_pq_meta_decode(m, buf + n - 8 - flen, flen, path, NULL) : -1;
    if (keep) *keep = buf;
    else free(buf);
    return rc;
}

static int read_meta(const char *path, pq_file_meta *m) { return read_meta_keep(path, m, NULL); }

TEST(parquet_dictionary_then_plain_fallback_and_row_groups) {
    /* 40000 rows, all distinct: the dictionary passes a 16 KiB cap and the
     * rest of each chunk is PLAIN; 256 KiB row groups make several. */
    mcdc_batch *b = make_batch(40000, 0);
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.dict_bytes_max = 16384;
    o.row_group_bytes = 256 * 1024;
    o.page_bytes = 8192;
    const char *p = tmp_path("fallback");
    const mcdc_parquet_file_info *info;
    mcdc_parquet_writer *w;
    CHECK_EQ_INT(write_file(p, b, &o, 1, &info, &w), MCDC_OK);
    CHECK(info != NULL && info->row_groups > 1);
    CHECK_EQ_INT(info->rows, 40000);
    CHECK_EQ_INT(compare_file(p, b, 7777), 40000);
    pq_file_meta m;
    CHECK_EQ_INT(read_meta(p, &m), MCDC_OK);
    CHECK_EQ_INT(m.n_row_groups, info->row_groups);
    int64_t rows = 0;
    for (int32_t g = 0; g < m.n_row_groups; g++) rows += m.row_groups[g].num_rows;
    CHECK_EQ_INT(rows, 40000);
    /* the int64 column: dictionary first, then PLAIN */
    uint32_t enc = m.row_groups[0].columns[4].encodings;
    CHECK((enc & (1u << PQ_RLE_DICTIONARY)) && (enc & (1u << PQ_PLAIN)));
    CHECK(m.row_groups[0].columns[4].dict_page_offset > 0);
    /* booleans never use a dictionary */
    CHECK(!(m.row_groups[0].columns[0].encodings & (1u << PQ_RLE_DICTIONARY)));
    CHECK(m.has_column_orders);
    mcdc_pq_meta_free(&m);
    mcdc_parquet_writer_free(w);
    unlink(p);

    /* few distinct values: the whole chunk stays dictionary-encoded */
    mcdc_batch *d = make_batch(20000, 50);
    CHECK_EQ_INT(write_file(p, d, NULL, 1, NULL, NULL), MCDC_OK);
    CHECK_EQ_INT(read_meta(p, &m), MCDC_OK);
    enc = m.row_groups[0].columns[10].encodings;
    CHECK((enc & (1u << PQ_RLE_DICTIONARY)) != 0);
    CHECK_EQ_INT(m.row_groups[0].columns[10].codec, MCDC_PARQUET_ZSTD);
    mcdc_pq_meta_free(&m);
    CHECK_EQ_INT(compare_file(p, d, 0), 20000);
    unlink(p);
    mcdc_batch_free(d);
    mcdc_batch_free(b);
}

TEST(parquet_streaming_many_batches_threads) {
    mcdc_batch *b = make_batch(5000, 0);
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.threads = 3;
    o.row_group_bytes = 300 * 1024;
    const char *p = tmp_path("threads");
    const mcdc_parquet_file_info *info;
    mcdc_parquet_writer *w;
    CHECK_EQ_INT(write_file(p, b, &o, 6, &info, &w), MCDC_OK);
    CHECK_EQ_INT(info->rows, 30000);
    CHECK(info->row_groups >= 2);
    mcdc_parquet_reader *r;
    CHECK_EQ_INT(mcdc_parquet_reader_open_path(&r, p, NULL, NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_parquet_reader_rows(r), 30000);
    int64_t rows = 0, bad = 0;
    mcdc_batch *x;
    while (mcdc_parquet_reader_next(&x, r, NULL) == MCDC_OK && x) {
        for (int64_t i = 0; i < x->rows; i++, rows++)
            for (int c = 0; c < NF; c++) bad += !same_value(&x->columns[c], i, &b->columns[c], rows % 5000);
        mcdc_batch_free(x);
    }
    CHECK_EQ_INT(rows, 30000);
    CHECK_EQ_INT(bad, 0);
    mcdc_parquet_reader_free(r);
    mcdc_parquet_writer_free(w);
    unlink(p);
    mcdc_batch_free(b);
}

TEST(parquet_file_stats_are_typed_and_ordered) {
    mcdc_batch *b = make_batch(1000, 0);
    const char *p = tmp_path("stats");
    const mcdc_parquet_file_info *info;
    mcdc_parquet_writer *w;
    CHECK_EQ_INT(write_file(p, b, NULL, 1, &info, &w), MCDC_OK);
    CHECK_EQ_INT(info->n_columns, NF);
    CHECK_EQ_INT(info->file_bytes > 100, 1);
    const mcdc_parquet_column_stats *s = info->columns;
    int64_t nulls = 0;
    for (int64_t r = 0; r < 1000; r++) nulls += is_null(1, r);
    CHECK_EQ_INT(s[1].null_count, nulls);
    CHECK_EQ_INT(s[3].null_count, 0);
    CHECK_EQ_INT(s[1].min.i, INT8_MIN);
    CHECK_EQ_INT(s[1].max.i, INT8_MAX);
    CHECK(s[4].min.i == INT64_MIN && s[4].max.i == INT64_MAX);
    CHECK(s[3].min.i == INT32_MIN && s[3].max.i == INT32_MAX);
    CHECK(s[5].min.d == 0.0 && signbit(s[5].min.d)); /* -0.0 min */
    CHECK(s[6].min.d == -1e308 && s[6].max.d == 1e308);
    CHECK_EQ_INT(s[7].min.dec_hi, -1);
    CHECK_EQ_INT((int64_t)s[7].min.dec_lo, -999999999);
    CHECK(s[9].max.dec_hi == 0x4B3B4CA85A86C47ALL && s[9].max.dec_lo == 0x098A223FFFFFFFFFull);
    CHECK(s[9].min.dec_hi == ~0x4B3B4CA85A86C47ALL);
    /* strings: unsigned byte order, empty string is the minimum */
    CHECK_EQ_INT(s[10].min.len, 0);
    CHECK(s[10].max.len > 0 && (uint8_t)s[10].max.bytes[0] == 0xE6); /* 日 */
    CHECK_EQ_INT(s[13].min.i, -719162);
    CHECK(s[14].min.i == -62135596800000000LL);
    CHECK_EQ_INT(s[0].min.i, 0);
    CHECK_EQ_INT(s[0].max.i, 1);
    mcdc_parquet_writer_free(w);

    /* the footer statistics prune row groups */
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.row_group_bytes = 64 * 1024;
    mcdc_batch *big = make_batch(20000, 0);
    CHECK_EQ_INT(write_file(p, big, &o, 1, NULL, NULL), MCDC_OK);
    mcdc_parquet_reader *r;
    CHECK_EQ_INT(mcdc_parquet_reader_open_path(&r, p, NULL, NULL), MCDC_OK);
    int32_t g = mcdc_parquet_reader_row_groups(r);
    CHECK(g >= 4);
    mcdc_parquet_value v = {0};
    v.i = 19990 * 31; /* i32 = x * 31: only the last row group holds it (and
                       * the first, whose min/max are INT32_MIN/INT32_MAX) */
    CHECK_EQ_INT(mcdc_parquet_reader_filter(r, "i32", MCDC_PARQUET_EQ, &v, NULL), MCDC_OK);
    int32_t kept = 0;
    for (int32_t k = 0; k < g; k++) kept += mcdc_parquet_reader_row_group_selected(r, k);
    CHECK_EQ_INT(kept, 2);
    CHECK(mcdc_parquet_reader_row_group_selected(r, 0));
    CHECK(mcdc_parquet_reader_row_group_selected(r, g - 1));
    const char *cols[] = {"i32", "s"};
    CHECK_EQ_INT(mcdc_parquet_reader_select(r, cols, 2, NULL), MCDC_OK);
    mcdc_batch *x;
    bool found = false;
    int64_t rows = 0;
    while (mcdc_parquet_reader_next(&x, r, NULL) == MCDC_OK && x) {
        CHECK_EQ_INT(x->schema->n_fields, 2);
        CHECK_EQ_STR(x->schema->fields[1].name, "s");
        for (int64_t i = 0; i < x->rows; i++) found |= ((int32_t *)(void *)x->columns[0].values)[i] == v.i;
        rows += x->rows;
        mcdc_batch_free(x);
    }
    CHECK(found);
    CHECK(rows < 20000);
    mcdc_parquet_reader_free(r);

    /* string range: GT the maximum prunes everything */
    CHECK_EQ_INT(mcdc_parquet_reader_open_path(&r, p, NULL, NULL), MCDC_OK);
    mcdc_parquet_value sv = {0};
    sv.bytes = (const uint8_t *)"\xFF";
    sv.len = 1;
    CHECK_EQ_INT(mcdc_parquet_reader_filter(r, "s", MCDC_PARQUET_GE, &sv, NULL), MCDC_OK);
    for (int32_t k = 0; k < g; k++) CHECK(!mcdc_parquet_reader_row_group_selected(r, k));
    CHECK_EQ_INT(mcdc_parquet_reader_next(&x, r, NULL), MCDC_OK);
    CHECK(x == NULL);
    mcdc_parquet_reader_free(r);
    unlink(p);
    mcdc_batch_free(big);
    mcdc_batch_free(b);
}

TEST(parquet_empty_one_and_two_hundred_columns) {
    const char *p = tmp_path("shapes");
    /* empty file */
    mcdc_batch *e0 = make_batch(0, 0);
    const mcdc_parquet_file_info *info;
    mcdc_parquet_writer *w;
    CHECK_EQ_INT(write_file(p, e0, NULL, 1, &info, &w), MCDC_OK);
    CHECK_EQ_INT(info->rows, 0);
    CHECK_EQ_INT(info->row_groups, 0);
    CHECK(!info->columns[0].has_min_max);
    mcdc_parquet_writer_free(w);
    CHECK_EQ_INT(compare_file(p, e0, 0), 0);
    mcdc_batch_free(e0);

    /* one column, all NULL */
    mcdc_schema *s1;
    mcdc_schema_create(&s1, 1, NULL);
    mcdc_schema_set(s1, 0, "only", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_batch *b1;
    mcdc_batch_create(&b1, s1, 10, NULL);
    for (int i = 0; i < 100; i++) mcdc_col_append_null(&b1->columns[0], NULL);
    mcdc_batch_seal(b1, NULL);
    CHECK_EQ_INT(write_file(p, b1, NULL, 1, &info, &w), MCDC_OK);
    CHECK_EQ_INT(info->columns[0].null_count, 100);
    CHECK(!info->columns[0].has_min_max);
    mcdc_parquet_writer_free(w);
    CHECK_EQ_INT(compare_file(p, b1, 0), 100);
    /* every row group is all-null: any filter prunes it */
    mcdc_parquet_reader *r;
    CHECK_EQ_INT(mcdc_parquet_reader_open_path(&r, p, NULL, NULL), MCDC_OK);
    mcdc_parquet_value v = {0};
    CHECK_EQ_INT(mcdc_parquet_reader_filter(r, "only", MCDC_PARQUET_GE, &v, NULL), MCDC_OK);
    CHECK(!mcdc_parquet_reader_row_group_selected(r, 0));
    mcdc_parquet_reader_free(r);
    mcdc_batch_free(b1);
    mcdc_schema_unref(s1);

    /* 200 columns of mixed types */
    mcdc_schema *s;
    mcdc_schema_create(&s, 200, NULL);
    for (int c = 0; c < 200; c++) {
        char name[16];
        snprintf(name, sizeof name, "c%03d", c);
        mcdc_schema_set(s, c, name, c % 2 ? MCDC_TYPE_INT64 : MCDC_TYPE_UTF8, 0, 0, 0, c % 3 != 0, NULL);
    }
    mcdc_batch *b;
    mcdc_batch_create(&b, s, 50, NULL);
    for (int r0 = 0; r0 < 50; r0++)
        for (int c = 0; c < 200; c++) {
            if (c % 3 != 0 && (r0 + c) % 11 == 0) mcdc_col_append_null(&b->columns[c], NULL);
            else if (c % 2) mcdc_col_append_int(&b->columns[c], r0 * c, NULL);
            else {
                char t[32];
                int n = snprintf(t, sizeof t, "r%dc%d", r0, c);
                mcdc_col_append_bytes(&b->columns[c], t, n, NULL);
            }
        }
    mcdc_batch_seal(b, NULL);
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.threads = 2;
    CHECK_EQ_INT(write_file(p, b, &o, 1, NULL, NULL), MCDC_OK);
    CHECK_EQ_INT(compare_file(p, b, 0), 50);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
    unlink(p);
}

TEST(parquet_leaf_api_on_flat_file) {
    mcdc_batch *b = make_batch(500, 0);
    const char *p = tmp_path("leaf");
    CHECK_EQ_INT(write_file(p, b, NULL, 1, NULL, NULL), MCDC_OK);
    mcdc_parquet_reader *r;
    CHECK_EQ_INT(mcdc_parquet_reader_open_path(&r, p, NULL, NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_parquet_reader_leaves(r), NF);
    int32_t li = mcdc_parquet_reader_find_leaf(r, "s");
    CHECK_EQ_INT(li, 10);
    const mcdc_parquet_leaf *l = mcdc_parquet_reader_leaf(r, li);
    CHECK_EQ_INT(l->max_def, 1);
    CHECK_EQ_INT(l->max_rep, 0);
    CHECK_EQ_INT(l->physical_type, PQ_BYTE_ARRAY);
    mcdc_parquet_leaf_data d;
    CHECK_EQ_INT(mcdc_parquet_reader_read_leaf(&d, r, 0, li, NULL), MCDC_OK);
    CHECK_EQ_INT(d.n, 500);
    CHECK(d.rep == NULL && d.def != NULL);
    int64_t bad = 0;
    for (int64_t i = 0; i < 500; i++) {
        bad += d.def[i] != (is_null(10, i) ? 0 : 1);
        bad += !same_value(&d.values->columns[0], i, &b->columns[10], i);
    }
    CHECK_EQ_INT(bad, 0);
    mcdc_parquet_leaf_data_free(&d);
    /* required column: no levels */
    CHECK_EQ_INT(mcdc_parquet_reader_read_leaf(&d, r, 0, 3, NULL), MCDC_OK);
    CHECK(d.def == NULL && d.n == 500);
    mcdc_parquet_leaf_data_free(&d);
    mcdc_parquet_reader_free(r);
    unlink(p);
    mcdc_batch_free(b);
}

static uint8_t *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(*n);
    if (fread(buf, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return buf;
}

/* Reads everything from memory; returns the status. */
static int read_all_mem(const uint8_t *buf, size_t n, mcdc_error *e) {
    mcdc_parquet_reader *r;
    int rc = mcdc_parquet_reader_open_mem(&r, buf, n, "bad.parquet", NULL, e);
    if (rc) return rc;
    mcdc_batch *b;
    while ((rc = mcdc_parquet_reader_next(&b, r, e)) == MCDC_OK && b) mcdc_batch_free(b);
    mcdc_parquet_reader_free(r);
    return rc;
}

TEST(parquet_bad_input_fails_cleanly_naming_the_file) {
    mcdc_batch *b = make_batch(300, 0);
    const char *p = tmp_path("bad");
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.codec = MCDC_PARQUET_UNCOMPRESSED;
    CHECK_EQ_INT(write_file(p, b, &o, 1, NULL, NULL), MCDC_OK);
    size_t n;
    uint8_t *buf = slurp(p, &n);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(read_all_mem(buf, n, &e), MCDC_OK);

    uint8_t *m = malloc(n);
    memcpy(m, buf, n);
    m[n - 1] = 'X'; /* bad magic */
    CHECK_EQ_INT(read_all_mem(m, n, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "bad.parquet") != NULL);

    memcpy(m, buf, n);
    pq_put_le32(m + n - 8, (uint32_t)n); /* footer length beyond the file */
    CHECK_EQ_INT(read_all_mem(m, n, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "footer length") != NULL);

    /* a page header lying about its size: the first page of column 0
     * starts at byte 4; its compressed size field (3rd) grows */
    memcpy(m, buf, n);
    pq_page_header h;
    size_t used;
    CHECK_EQ_INT(mcdc_pq_page_header_decode(&h, m + 4, n - 4, &used, "x", NULL), MCDC_OK);
    size_t pos = 4;
    while (pos < 4 + used && m[pos] != 0x15) pos++; /* field 2 */
    CHECK(m[pos] == 0x15);
    pos++;
    while (m[pos] & 0x80) pos++;
    pos++;
    CHECK(m[pos] == 0x15); /* field 3 */
    m[pos + 1] = 0xFE;
    m[pos + 2] = 0xFF;
    m[pos + 3] = 0x7F;
    int rc = read_all_mem(m, n, &e);
    CHECK(rc == MCDC_E_CORRUPT || rc == MCDC_E_LIMIT);
    CHECK(strstr(e.message, "bad.parquet") != NULL);

    /* every truncation, and byte flips all over: errors, never crashes */
    for (size_t cut = 0; cut < n; cut += 1 + cut / 16) {
        rc = read_all_mem(buf, cut, &e);
        CHECK(rc != MCDC_OK);
    }
    unsigned seed = 1;
    for (int k = 0; k < 300; k++) {
        memcpy(m, buf, n);
        for (int j = 0; j < 4; j++) {
            seed = seed * 1103515245u + 12345u;
            m[(seed >> 8) % n] ^= (uint8_t)(1u << (seed % 8));
        }
        (void)read_all_mem(m, n, &e);
    }
    CHECK_EQ_INT(read_all_mem(buf, n, &e), MCDC_OK);

    mcdc_parquet_reader *r;
    CHECK_EQ_INT(mcdc_parquet_reader_open_path(&r, "/nonexistent/x.parquet", NULL, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "/nonexistent/x.parquet") != NULL);
    free(m);
    free(buf);
    unlink(p);
    mcdc_batch_free(b);
}

TEST(parquet_writer_rejects_bad_use) {
    mcdc_schema *s;
    mcdc_schema_create(&s, 1, NULL);
    mcdc_schema_set(s, 0, "x", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    mcdc_parquet_writer *w;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.codec = MCDC_PARQUET_LZ4; /* read-only codec */
    CHECK_EQ_INT(mcdc_parquet_writer_open_path(&w, tmp_path("reject"), s, &o, &e), MCDC_E_INVALID);
    /* a file below a file: its directory cannot be made (even as root) */
    CHECK_EQ_INT(mcdc_parquet_writer_open_path(&w, "/dev/null/dir/x.parquet", s, NULL, &e), MCDC_E_IO);
    CHECK(strstr(e.message, "/dev/null/dir/x.parquet") != NULL);
    CHECK_EQ_INT(mcdc_parquet_writer_open_path(&w, tmp_path("reject"), s, NULL, &e), MCDC_OK);
    mcdc_schema *s2;
    mcdc_schema_create(&s2, 1, NULL);
    mcdc_schema_set(s2, 0, "x", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    mcdc_batch *b;
    mcdc_batch_create(&b, s2, 1, NULL);
    mcdc_col_append_int(&b->columns[0], 1, NULL);
    mcdc_batch_seal(b, NULL);
    CHECK_EQ_INT(mcdc_parquet_writer_write(w, b, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_parquet_writer_close(w, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_parquet_writer_close(w, &e), MCDC_E_INVALID);
    mcdc_parquet_writer_free(w);
    mcdc_parquet_writer_free(NULL);
    mcdc_parquet_reader_free(NULL);
    mcdc_batch_free(b);
    mcdc_schema_unref(s2);
    mcdc_schema_unref(s);
    unlink(tmp_path("reject"));
}

/* Fails the Nth allocation for every N of a small write + read: each run
 * ends with an error or success, never a crash or a leak (the runner
 * checks leaks per test). */
TEST(parquet_every_allocation_failure_is_clean) {
    mcdc_schema *s;
    mcdc_schema_create(&s, 3, NULL);
    mcdc_schema_set(s, 0, "a", MCDC_TYPE_INT64, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "b", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 2, "c", MCDC_TYPE_BOOL, 0, 0, 0, false, NULL);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, 100, NULL);
    for (int i = 0; i < 100; i++) {
        if (i % 5 == 0) mcdc_col_append_null(&b->columns[0], NULL);
        else mcdc_col_append_int(&b->columns[0], i, NULL);
        char t[16];
        int n = snprintf(t, sizeof t, "v%d", i % 9);
        mcdc_col_append_bytes(&b->columns[1], t, n, NULL);
        mcdc_col_append_bool(&b->columns[2], i % 2, NULL);
    }
    mcdc_batch_seal(b, NULL);
    const char *p = tmp_path("faults");
    int ok_runs = 0, failed_runs = 0;
    for (int64_t nth = 1; nth < 2000 && ok_runs == 0; nth++) {
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_alloc_fail_at(nth);
        mcdc_parquet_writer *w = NULL;
        int rc = mcdc_parquet_writer_open_path(&w, p, s, NULL, &e);
        if (!rc) rc = mcdc_parquet_writer_write(w, b, &e);
        if (!rc) rc = mcdc_parquet_writer_close(w, &e);
        mcdc_parquet_writer_free(w);
        int64_t rows = 0;
        if (!rc) {
            mcdc_parquet_reader *r = NULL;
            rc = mcdc_parquet_reader_open_path(&r, p, NULL, &e);
            mcdc_batch *x;
            while (!rc && (rc = mcdc_parquet_reader_next(&x, r, &e)) == MCDC_OK && x) {
                rows += x->rows;
                mcdc_batch_free(x);
            }
            mcdc_parquet_reader_free(r);
        }
        mcdc_alloc_fail_at(0);
        if (rc == MCDC_OK) {
            CHECK_EQ_INT(rows, 100);
            ok_runs++;
        } else {
            CHECK(rc == MCDC_E_NOMEM || rc == MCDC_E_IO || rc == MCDC_E_CORRUPT);
            failed_runs++;
        }
    }
    CHECK(ok_runs == 1 && failed_runs > 20);
    unlink(p);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

/* The file appears whole at close (a storage commit) and not before; a
 * writer freed unclosed publishes nothing and leaves no temp file. */
TEST(parquet_writer_publishes_at_close_and_created_by) {
    mcdc_batch *b = make_batch(100, 0);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/mcdc_pq_pub_%d", (int)getpid());
    mcdc_storage *st = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_local_create(&st, dir, &e), MCDC_OK);
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.created_by = "mssql-cdc test version 9.9.9";
    mcdc_parquet_writer *w;
    int64_t size = -1;
    CHECK_EQ_INT(mcdc_parquet_writer_open(&w, st, "sub/pub.parquet", b->schema, &o, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_parquet_writer_write(w, b, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_size(st, "sub/pub.parquet", &size, &e), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_parquet_writer_close(w, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_size(st, "sub/pub.parquet", &size, &e), MCDC_OK);
    CHECK_EQ_INT(size, mcdc_parquet_writer_info(w)->file_bytes);
    mcdc_parquet_writer_free(w);
    CHECK_EQ_INT(mcdc_parquet_writer_open(&w, st, "sub/gone.parquet", b->schema, &o, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_parquet_writer_write(w, b, &e), MCDC_OK);
    mcdc_parquet_writer_free(w);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(st, "sub/", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 1); /* no gone.parquet, no temp file */
    CHECK_EQ_STR(l.count ? l.entries[0].name : NULL, "pub.parquet");
    mcdc_storage_listing_free(&l);
    char p[128];
    snprintf(p, sizeof p, "%s/sub/pub.parquet", dir);
    CHECK_EQ_INT(compare_file(p, b, 0), 100);
    mcdc_parquet_reader *r;
    CHECK_EQ_INT(mcdc_parquet_reader_open(&r, st, "sub/pub.parquet", NULL, NULL), MCDC_OK);
    CHECK_EQ_STR(mcdc_parquet_reader_created_by(r), "mssql-cdc test version 9.9.9");
    CHECK_EQ_INT(mcdc_parquet_reader_row_groups(r), 1);
    CHECK_EQ_INT(mcdc_parquet_reader_row_group_rows(r, 0), 100);
    mcdc_parquet_reader_free(r);
    mcdc_storage_delete(st, "sub/pub.parquet", NULL);
    mcdc_storage_free(st);
    snprintf(p, sizeof p, "%s/sub", dir);
    rmdir(p);
    rmdir(dir);
    mcdc_batch_free(b);
}

TEST(parquet_encoding_chosen_once_per_file) {
    /* ts: increasing timestamps -> DELTA_BINARY_PACKED; u: all distinct
     * random strings -> DELTA_LENGTH_BYTE_ARRAY without ever a dictionary;
     * k: 5 distinct strings -> dictionary; w: int32 alternating extremes
     * (deltas wrap in 32 bits); r: random int64, stored uncompressed in a
     * zstd file; lsn: increasing hex texts (LSNs) -> DELTA_BYTE_ARRAY;
     * amt: unscaled decimals of 1-12 digits and either sign, whose zstd
     * gains under an eighth on DELTA_BINARY_PACKED: stored uncompressed in
     * that encoding. The choice holds in every row group of the file. */
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 7, NULL), MCDC_OK);
    mcdc_schema_set(s, 0, "ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "u", MCDC_TYPE_UTF8, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 2, "k", MCDC_TYPE_UTF8, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 3, "w", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 4, "r", MCDC_TYPE_INT64, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 5, "lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 6, "amt", MCDC_TYPE_INT64, 0, 0, 0, true, NULL);
    enum { ROWS = 60000 };
    mcdc_batch *b = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&b, s, ROWS, NULL), MCDC_OK);
    uint64_t x = 88172645463325252ull;
    for (int64_t r = 0; r < ROWS; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        char t[64];
        if (r % 11 == 5) mcdc_col_append_null(&b->columns[0], NULL);
        else mcdc_col_append_int(&b->columns[0], 1735689600000000LL + r / 3 * 1000 + r % 7, NULL);
        int n = snprintf(t, sizeof t, "%016llx", (unsigned long long)x);
        mcdc_col_append_bytes(&b->columns[1], t, n, NULL);
        n = snprintf(t, sizeof t, "kind-%d", (int)(x % 5));
        mcdc_col_append_bytes(&b->columns[2], t, n, NULL);
        mcdc_col_append_int(&b->columns[3], r % 2 ? INT32_MAX - (int32_t)(r % 3) : INT32_MIN + (int32_t)(r % 5), NULL);
        mcdc_col_append_int(&b->columns[4], (int64_t)(x * 0x9E3779B97F4A7C15ull), NULL);
        n = snprintf(t, sizeof t, "0x%020llX", 0x12345600ull + (unsigned long long)(r / 2));
        if (r % 13 == 7) mcdc_col_append_null(&b->columns[5], NULL);
        else mcdc_col_append_bytes(&b->columns[5], t, n, NULL);
        int64_t amt = (int64_t)(1 + (x >> 8) % 9);
        for (uint64_t d = (x >> 1) % 12, y = x >> 12; d > 0; d--, y /= 10) amt = amt * 10 + (int64_t)(y % 10);
        amt = amt * 10000 + (int64_t)((x >> 40) % 10000);
        mcdc_col_append_int(&b->columns[6], x & 1 ? -amt : amt, NULL);
    }
    CHECK_EQ_INT(mcdc_batch_seal(b, NULL), MCDC_OK);
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.row_group_bytes = 256 * 1024;
    const char *p = tmp_path("choose");
    CHECK_EQ_INT(write_file(p, b, &o, 1, NULL, NULL), MCDC_OK);
    CHECK_EQ_INT(compare_file(p, b, 4096), ROWS);
    pq_file_meta m;
    CHECK_EQ_INT(read_meta(p, &m), MCDC_OK);
    CHECK(m.n_row_groups > 2);
    for (int32_t g = 0; g < m.n_row_groups; g++) {
        const pq_chunk_meta *c = m.row_groups[g].columns;
        CHECK(c[0].encodings & (1u << PQ_DELTA_BINARY_PACKED));
        CHECK(!(c[0].encodings & (1u << PQ_RLE_DICTIONARY)) && c[0].dict_page_offset == 0);
        CHECK(!(c[1].encodings & (1u << PQ_RLE_DICTIONARY)) && c[1].dict_page_offset == 0);
        CHECK(c[1].encodings & (1u << PQ_DELTA_LENGTH_BYTE_ARRAY));
        CHECK(!(c[5].encodings & (1u << PQ_RLE_DICTIONARY)) && c[5].dict_page_offset == 0);
        CHECK(c[5].encodings & (1u << PQ_DELTA_BYTE_ARRAY));
        CHECK(c[2].encodings & (1u << PQ_RLE_DICTIONARY));
        CHECK(c[2].dict_page_offset > 0);
        /* random 64-bit values do not compress: that chunk is stored raw */
        CHECK_EQ_INT(c[4].codec, MCDC_PARQUET_UNCOMPRESSED);
        CHECK_EQ_INT(c[1].codec, MCDC_PARQUET_ZSTD);
        CHECK_EQ_INT(c[2].codec, MCDC_PARQUET_ZSTD);
        CHECK_EQ_INT(c[6].codec, MCDC_PARQUET_UNCOMPRESSED);
        CHECK(c[6].encodings & (1u << PQ_DELTA_BINARY_PACKED));
    }
    mcdc_pq_meta_free(&m);
    /* the same file without compression chooses the same way and reads back */
    o.codec = MCDC_PARQUET_UNCOMPRESSED;
    o.data_page_v2 = true;
    CHECK_EQ_INT(write_file(p, b, &o, 1, NULL, NULL), MCDC_OK);
    CHECK_EQ_INT(compare_file(p, b, 0), ROWS);
    CHECK_EQ_INT(read_meta(p, &m), MCDC_OK);
    CHECK(m.row_groups[m.n_row_groups - 1].columns[0].encodings & (1u << PQ_DELTA_BINARY_PACKED));
    CHECK(m.row_groups[m.n_row_groups - 1].columns[5].encodings & (1u << PQ_DELTA_BYTE_ARRAY));
    mcdc_pq_meta_free(&m);
    unlink(p);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

TEST(parquet_next_file_starts_from_the_last_ones_choices) {
    /* File A's rows choose DELTA for both columns; file B's rows alone
     * choose a dictionary (5 distinct strings) and PLAIN stored raw (random
     * int64); its third column the other way round (A's random int64 is
     * stored raw, B's increasing ones would be DELTA and compressed). B
     * written with A's choices keeps A's encodings and codecs and reads back; with another codec the choices do not fit and B chooses
     * for itself, as it does without them. */
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 3, NULL), MCDC_OK);
    mcdc_schema_set(s, 0, "s", MCDC_TYPE_UTF8, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 1, "v", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 2, "r", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    enum { ROWS = 20000 };
    mcdc_batch *a = NULL, *b = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&a, s, ROWS, NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_create(&b, s, ROWS, NULL), MCDC_OK);
    uint64_t x = 88172645463325252ull;
    for (int64_t r = 0; r < ROWS; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        char t[64];
        int n = snprintf(t, sizeof t, "%016llx", (unsigned long long)x);
        mcdc_col_append_bytes(&a->columns[0], t, n, NULL);
        mcdc_col_append_int(&a->columns[1], 1000000 + r * 3, NULL);
        n = snprintf(t, sizeof t, "kind-%d", (int)(x % 5));
        mcdc_col_append_bytes(&b->columns[0], t, n, NULL);
        mcdc_col_append_int(&b->columns[1], (int64_t)(x * 0x9E3779B97F4A7C15ull), NULL);
        mcdc_col_append_int(&a->columns[2], (int64_t)(x * 0x9E3779B97F4A7C15ull), NULL);
        mcdc_col_append_int(&b->columns[2], 1000000 + r * 3, NULL);
    }
    CHECK_EQ_INT(mcdc_batch_seal(a, NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_seal(b, NULL), MCDC_OK);
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    const char *pa = tmp_path("choices_a"), *pb = tmp_path("choices_b");
    mcdc_parquet_writer *w = NULL;
    CHECK_EQ_INT(write_file(pa, a, &o, 1, NULL, &w), MCDC_OK);
    mcdc_parquet_choices *ch = mcdc_parquet_writer_choices(w);
    mcdc_parquet_writer_free(w);
    CHECK(ch != NULL);
    pq_file_meta m;
    for (int k = 0; k < 3; k++) {
        /* 0: with A's choices; 1: the same under another codec; 2: none */
        o.codec = k == 1 ? MCDC_PARQUET_SNAPPY : MCDC_PARQUET_ZSTD;
        o.choices = k == 2 ? NULL : ch;
        CHECK_EQ_INT(write_file(pb, b, &o, 1, NULL, NULL), MCDC_OK);
        CHECK_EQ_INT(compare_file(pb, b, 0), ROWS);
        CHECK_EQ_INT(read_meta(pb, &m), MCDC_OK);
        const pq_chunk_meta *c = m.row_groups[0].columns;
        bool kept = k == 0;
        CHECK_EQ_INT(!!(c[0].encodings & (1u << PQ_DELTA_LENGTH_BYTE_ARRAY)), kept);
        CHECK_EQ_INT(!!(c[0].encodings & (1u << PQ_RLE_DICTIONARY)), !kept);
        CHECK_EQ_INT(!!(c[1].encodings & (1u << PQ_DELTA_BINARY_PACKED)), kept);
        CHECK_EQ_INT(c[1].codec, kept ? MCDC_PARQUET_ZSTD : MCDC_PARQUET_UNCOMPRESSED);
        CHECK_EQ_INT(!!(c[2].encodings & (1u << PQ_DELTA_BINARY_PACKED)), !kept);
        CHECK_EQ_INT(c[2].codec, kept ? MCDC_PARQUET_UNCOMPRESSED : (int)o.codec);
        mcdc_pq_meta_free(&m);
    }
    mcdc_parquet_choices_free(ch);
    unlink(pa);
    unlink(pb);
    mcdc_batch_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

/* b's rows k times over, in one new batch. */
static mcdc_batch *repeat_batch(const mcdc_batch *b, int k) {
    mcdc_batch *out = NULL;
    MCDC_ASSERT(mcdc_batch_create(&out, b->schema, b->rows * k, NULL) == MCDC_OK);
    for (int i = 0; i < k; i++)
        for (int64_t row = 0; row < b->rows; row++)
            for (int32_t c = 0; c < b->schema->n_fields; c++)
                MCDC_ASSERT(mcdc_col_copy_value(&out->columns[c], &b->columns[c], row, NULL) ==
                            MCDC_OK);
    MCDC_ASSERT(mcdc_batch_seal(out, NULL) == MCDC_OK);
    return out;
}

/* The same file through a memory storage: written by a storage writer,
 * read back by ranged reads only (pages of every type, several row groups,
 * a footer larger than the reader's first tail read). */
TEST(parquet_round_trip_on_memory_storage) {
    mcdc_storage_mem *m = NULL;
    mcdc_storage *st = td_mem_storage(&m, "pq", "t");
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK(st != NULL);
    mcdc_batch *b = make_batch(3000, 0);
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.row_group_bytes = 32 * 1024; /* many row groups: a footer past 64 KiB */
    mcdc_parquet_writer *w = NULL;
    CHECK_EQ_INT(mcdc_parquet_writer_open(&w, st, "part-0.parquet", b->schema, &o, &e), MCDC_OK);
    for (int k = 0; k < 4; k++) CHECK_EQ_INT(mcdc_parquet_writer_write(w, b, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_mem_count(m), 0); /* nothing visible before close */
    CHECK_EQ_INT(mcdc_parquet_writer_close(w, &e), MCDC_OK);
    const mcdc_parquet_file_info *info = mcdc_parquet_writer_info(w);
    CHECK(info && info->rows == 12000 && info->row_groups > 20);
    int64_t size = -1;
    CHECK_EQ_INT(mcdc_storage_size(st, "part-0.parquet", &size, &e), MCDC_OK);
    CHECK_EQ_INT(size, info ? info->file_bytes : -2);
    mcdc_parquet_writer_free(w);
    int64_t ranged0 = mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET_RANGE);
    mcdc_parquet_reader *r = NULL;
    CHECK_EQ_INT(mcdc_parquet_reader_open(&r, st, "part-0.parquet", NULL, &e), MCDC_OK);
    mcdc_batch *four = repeat_batch(b, 4);
    CHECK_EQ_INT(r ? compare_reader(r, four) : -1, 12000);
    int64_t ranged = mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET_RANGE) - ranged0;
    CHECK(ranged > 20 * NF); /* a ranged read per column chunk */
    CHECK_EQ_INT(mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET), 0); /* never a whole get */
    CHECK_EQ_INT(mcdc_parquet_reader_open(&r, st, "missing.parquet", NULL, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "mem://pq/t/missing.parquet") != NULL);
    mcdc_batch_free(four);
    mcdc_batch_free(b);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* Fails the Nth storage call of a Parquet file write for N = 1, 2, ... until
 * the write succeeds: each failure is a clean I/O error, and the file is
 * then either absent (nothing published, no temp data) or whole. Then the
 * same for the reads. */
TEST(parquet_every_storage_failure_is_clean) {
    mcdc_storage_mem *m = NULL;
    mcdc_storage *st = td_mem_storage(&m, "torture", NULL);
    CHECK(st != NULL);
    mcdc_batch *b = make_batch(500, 0);
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.row_group_bytes = 64 * 1024; /* a few row groups */
    int failures = 0;
    bool done = false;
    for (int64_t nth = 1; nth < 2000 && !done; nth++) {
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, nth, MCDC_E_IO);
        mcdc_parquet_writer *w = NULL;
        int rc = mcdc_parquet_writer_open(&w, st, "f.parquet", b->schema, &o, &e);
        for (int k = 0; k < 3 && rc == MCDC_OK; k++) rc = mcdc_parquet_writer_write(w, b, &e);
        if (rc == MCDC_OK) rc = mcdc_parquet_writer_close(w, &e);
        mcdc_parquet_writer_free(w);
        bool fired = mcdc_storage_mem_fault_fired(m);
        mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, 0, MCDC_OK);
        /* failed cleanly (the injected fault, nothing published), or done whole */
        bool clean = rc ? fired && rc == MCDC_E_IO && strstr(e.message, "injected") &&
                              strstr(e.message, "f.parquet") && mcdc_storage_mem_count(m) == 0
                        : !fired && mcdc_storage_mem_count(m) == 1;
        if (!clean) fprintf(stderr, "nth %lld: rc %d, %s\n", (long long)nth, rc, e.message);
        CHECK(clean);
        if (!clean) break; /* one report, not hundreds */
        failures += rc != MCDC_OK;
        done = rc == MCDC_OK;
    }
    CHECK(done && failures > 10);
    /* reading: every ranged read in turn fails cleanly (ranged reads only:
     * this small file would else be read whole by its first) */
    mcdc_batch *three = repeat_batch(b, 3);
    mcdc_parquet_read_options ranged = MCDC_PARQUET_READ_OPTIONS_INIT;
    ranged.whole_bytes = -1;
    done = false;
    failures = 0;
    for (int64_t nth = 1; nth < 2000 && !done; nth++) {
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_GET_RANGE, nth, MCDC_E_IO);
        mcdc_parquet_reader *r = NULL;
        int rc = mcdc_parquet_reader_open(&r, st, "f.parquet", &ranged, &e);
        int64_t rows = 0;
        mcdc_batch *x = NULL;
        while (rc == MCDC_OK && (rc = mcdc_parquet_reader_next(&x, r, &e)) == MCDC_OK && x) {
            rows += x->rows;
            mcdc_batch_free(x);
        }
        mcdc_parquet_reader_free(r);
        bool fired = mcdc_storage_mem_fault_fired(m);
        mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, 0, MCDC_OK);
        bool clean = rc ? fired && rc == MCDC_E_IO && strstr(e.message, "injected")
                        : !fired && rows == 1500;
        if (!clean) fprintf(stderr, "nth %lld: rc %d, %s\n", (long long)nth, rc, e.message);
        CHECK(clean);
        if (!clean) break;
        failures += rc != MCDC_OK;
        done = rc == MCDC_OK;
    }
    CHECK(done && failures > 10);
    /* by default a file this small is one ranged read, all of it read back
     * from memory; with a limit below its size, ranged reads as above */
    int64_t size = -1;
    CHECK_EQ_INT(mcdc_storage_size(st, "f.parquet", &size, NULL), MCDC_OK);
    CHECK(size > 0 && size <= (int64_t)MCDC_PARQUET_READ_WHOLE_BYTES);
    int64_t before = mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET_RANGE);
    mcdc_parquet_reader *r = NULL;
    CHECK_EQ_INT(mcdc_parquet_reader_open(&r, st, "f.parquet", NULL, NULL), MCDC_OK);
    CHECK_EQ_INT(r ? compare_reader(r, three) : -1, 1500);
    CHECK_EQ_INT(mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET_RANGE) - before, 1);
    ranged.whole_bytes = size - 1;
    before = mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET_RANGE);
    CHECK_EQ_INT(mcdc_parquet_reader_open(&r, st, "f.parquet", &ranged, NULL), MCDC_OK);
    CHECK_EQ_INT(r ? compare_reader(r, three) : -1, 1500);
    CHECK(mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET_RANGE) - before > 2);
    mcdc_batch_free(three);
    mcdc_batch_free(b);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
}

/* ---- statistics against a brute-force oracle --------------------------------
 * Random rows (nulls anywhere, batches of odd sizes, so slices and pages
 * start at any bit of the validity bitmaps) in columns that take every
 * statistics path: dictionary (few values), dictionary given up mid-chunk
 * (a small dict_bytes_max), PLAIN and DELTA values, strings sharing long
 * prefixes and holding bytes >= 0x80, a constant string, FLBA decimals of
 * both signs, doubles with NaN and -0.0. Every row group's footer
 * statistics must equal the min/max/null count computed here from its
 * rows, the file statistics those of all rows, and the rows read back. */

__extension__ typedef __int128 oracle_i128;
__extension__ typedef unsigned __int128 oracle_u128;
enum { OC_N = 9 };

static mcdc_schema *oracle_schema(void) {
    mcdc_schema *s = NULL;
    MCDC_ASSERT(mcdc_schema_create(&s, OC_N, NULL) == MCDC_OK);
    mcdc_schema_set(s, 0, "few", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "big", MCDC_TYPE_INT64, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 2, "sfew", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 3, "srand", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 4, "konst", MCDC_TYPE_UTF8, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 5, "dec", MCDC_TYPE_DECIMAL, 30, 2, 0, true, NULL);
    mcdc_schema_set(s, 6, "dbl", MCDC_TYPE_DOUBLE, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 7, "day", MCDC_TYPE_DATE32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 8, "late", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    return s;
}

static uint64_t oracle_rng(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* n random rows appended to b (same seed, same rows); row0: the file row
 * of the first. */
static void oracle_rows(mcdc_batch *b, uint64_t seed, int64_t n, int null_pct, int64_t row0) {
    static const char *few[] = {"", "a", "ab", "abcdefgh", "abcdefghi", "abcdefgh\xff", "\xc3\xa9t\xc3\xa9"};
    uint64_t x = seed | 1;
    for (int64_t k = 0; k < n; k++) {
        mcdc_column *c = b->columns;
        for (int i = 0; i < OC_N; i++) {
            uint64_t v = oracle_rng(&x);
            if (i != 4 && (int)(v % 100) < null_pct) {
                MCDC_ASSERT(mcdc_col_append_null(&c[i], NULL) == MCDC_OK);
                continue;
            }
            v = oracle_rng(&x);
            char t[32];
            int len;
            switch (i) {
            case 0: mcdc_col_append_int(&c[i], (int64_t)(v % 9) - 4, NULL); break;
            case 1: mcdc_col_append_int(&c[i], (int64_t)v, NULL); break;
            case 2: mcdc_col_append_bytes(&c[i], few[v % 7], (int64_t)strlen(few[v % 7]), NULL); break;
            case 3: /* 0-19 bytes from {a, b, 0xff}: long shared prefixes */
                len = (int)(v % 20);
                for (int j = 0; j < len; j++) t[j] = "ab\xff"[(v >> (5 + 2 * j % 50)) % 3];
                mcdc_col_append_bytes(&c[i], t, len, NULL);
                break;
            case 4: mcdc_col_append_bytes(&c[i], "0x0000002A000001000000", 22, NULL); break;
            case 5: mcdc_col_append_decimal(&c[i], v, (int64_t)(oracle_rng(&x) % 2001) - 1000, NULL); break;
            case 6:
                mcdc_col_append_double(&c[i], v % 50 == 0 ? NAN : v % 50 == 1 ? -0.0
                                              : ((double)(int64_t)v) / 1e6, NULL);
                break;
            case 7: mcdc_col_append_int(&c[i], (int64_t)(v % 40) - 20, NULL); break;
            case 8: /* 3 values for the first 30000 rows (the dictionary is
                     * chosen), then all distinct (it overflows later) */
                len = row0 + k < 30000 ? snprintf(t, sizeof t, "late-%d", (int)(v % 3))
                                       : snprintf(t, sizeof t, "%016llx", (unsigned long long)v);
                mcdc_col_append_bytes(&c[i], t, len, NULL);
                break;
            }
        }
    }
}

/* -1/0/1: row a vs row b of column c by the type's order (non-null rows). */
static int oracle_cmp(const mcdc_column *c, int64_t a, int64_t b) {
    switch (c->field->type) {
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: {
        int32_t x = ((const int32_t *)(const void *)c->values)[a], y = ((const int32_t *)(const void *)c->values)[b];
        return (x > y) - (x < y);
    }
    case MCDC_TYPE_INT64: {
        int64_t x = ((const int64_t *)(const void *)c->values)[a], y = ((const int64_t *)(const void *)c->values)[b];
        return (x > y) - (x < y);
    }
    case MCDC_TYPE_DOUBLE: {
        double x = ((const double *)(const void *)c->values)[a], y = ((const double *)(const void *)c->values)[b];
        return (x > y) - (x < y);
    }
    case MCDC_TYPE_DECIMAL: {
        oracle_i128 x, y;
        memcpy(&x, c->values + a * 16, 16);
        memcpy(&y, c->values + b * 16, 16);
        return (x > y) - (x < y);
    }
    default: {
        int32_t la = c->offsets[a + 1] - c->offsets[a], lb = c->offsets[b + 1] - c->offsets[b];
        int32_t m = la < lb ? la : lb;
        int r = m ? memcmp(c->data + c->offsets[a], c->data + c->offsets[b], (size_t)m) : 0;
        return r ? (r > 0) - (r < 0) : (la > lb) - (la < lb);
    }
    }
}

static bool oracle_is_nan(const mcdc_column *c, int64_t r) {
    return c->field->type == MCDC_TYPE_DOUBLE && isnan(((const double *)(const void *)c->values)[r]);
}

/* Whether the statistic bytes (physical form) equal row r of column c. */
static bool oracle_same(const mcdc_column *c, int64_t r, const uint8_t *p, size_t n) {
    switch (c->field->type) {
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32:
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_DOUBLE: {
        size_t w = (size_t)mcdc_type_width(c->field);
        if (n != w) return false;
        if (c->field->type == MCDC_TYPE_DOUBLE) {
            double x, y = ((const double *)(const void *)c->values)[r];
            memcpy(&x, p, 8);
            return x == y; /* -0.0 == 0.0: the sign is checked apart */
        }
        return memcmp(p, c->values + (size_t)r * w, w) == 0;
    }
    case MCDC_TYPE_DECIMAL: { /* big-endian two's complement, 13 bytes for 30 digits */
        oracle_i128 v = (p[0] & 0x80) ? -1 : 0, want;
        for (size_t j = 0; j < n; j++) v = (oracle_i128)(((oracle_u128)v << 8) | p[j]);
        memcpy(&want, c->values + r * 16, 16);
        return n == 13 && v == want;
    }
    default: {
        int32_t len = c->offsets[r + 1] - c->offsets[r];
        return (size_t)len == n && (n == 0 || memcmp(p, c->data + c->offsets[r], n) == 0);
    }
    }
}

/* Checks one chunk's statistics against rows [r0, r1) of column c. */
static bool oracle_chunk(const mcdc_column *c, int64_t r0, int64_t r1, const pq_stats *st) {
    int64_t nulls = 0, lo = -1, hi = -1;
    for (int64_t r = r0; r < r1; r++) {
        if (!mcdc_col_is_valid(c, r)) {
            nulls++;
            continue;
        }
        if (oracle_is_nan(c, r)) continue;
        if (lo < 0 || oracle_cmp(c, r, lo) < 0) lo = r;
        if (hi < 0 || oracle_cmp(c, r, hi) > 0) hi = r;
    }
    bool ok = st->has_null_count && st->null_count == nulls;
    if (lo < 0) return ok && st->min == NULL && st->max == NULL;
    ok = ok && st->min && st->max && oracle_same(c, lo, st->min, st->min_len) &&
         oracle_same(c, hi, st->max, st->max_len);
    if (ok && c->field->type == MCDC_TYPE_DOUBLE) {
        double mn, mx;
        memcpy(&mn, st->min, 8);
        memcpy(&mx, st->max, 8);
        ok = (mn != 0 || signbit(mn)) && (mx != 0 || !signbit(mx));
    }
    if (!ok) fprintf(stderr, "column %s rows [%lld, %lld): statistics differ\n", c->field->name,
                     (long long)r0, (long long)r1);
    return ok;
}

TEST(parquet_statistics_match_a_brute_force_oracle) {
    static const int64_t sizes[] = {1, 7, 1000, 4099, 333, 65536, 9, 20000, 12345, 2};
    enum { N_SIZES = sizeof sizes / sizeof sizes[0] };
    mcdc_schema *s = oracle_schema();
    const char *p = tmp_path("oracle");
    for (int round = 0; round < 6; round++) {
        mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
        o.page_bytes = round % 2 ? 3000 : 40000;
        o.dict_bytes_max = round % 3 == 0 ? 64 * 1024 : 1500; /* srand gives it up mid-chunk */
        o.row_group_bytes = round >= 4 ? 300 * 1024 : 64 * 1024 * 1024;
        o.threads = round % 2 + 1;
        o.codec = round % 3 == 2 ? MCDC_PARQUET_UNCOMPRESSED : MCDC_PARQUET_ZSTD;
        o.data_page_v2 = round == 3;
        int null_pct = round == 1 ? 0 : round == 2 ? 95 : 30;
        mcdc_batch *all = NULL;
        CHECK_EQ_INT(mcdc_batch_create(&all, s, 0, NULL), MCDC_OK);
        mcdc_parquet_writer *w = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_parquet_writer_open_path(&w, p, s, &o, &e), MCDC_OK);
        int64_t row0 = 0;
        for (int k = 0; k < N_SIZES; k++) {
            uint64_t seed = UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)(100 * round + k + 1);
            mcdc_batch *b = NULL;
            CHECK_EQ_INT(mcdc_batch_create(&b, s, sizes[k], NULL), MCDC_OK);
            oracle_rows(b, seed, sizes[k], null_pct, row0);
            oracle_rows(all, seed, sizes[k], null_pct, row0);
            row0 += sizes[k];
            CHECK_EQ_INT(mcdc_batch_seal(b, NULL), MCDC_OK);
            CHECK_EQ_INT(mcdc_parquet_writer_write(w, b, &e), MCDC_OK);
            mcdc_batch_free(b);
        }
        CHECK_EQ_INT(mcdc_batch_seal(all, NULL), MCDC_OK);
        CHECK_EQ_INT(mcdc_parquet_writer_close(w, &e), MCDC_OK);
        /* file statistics: those of every row */
        const mcdc_parquet_file_info *info = mcdc_parquet_writer_info(w);
        for (int i = 0; i < OC_N; i++) {
            const mcdc_column *c = &all->columns[i];
            int64_t nulls = 0;
            for (int64_t r = 0; r < all->rows; r++) nulls += !mcdc_col_is_valid(c, r);
            CHECK_EQ_INT(info->columns[i].null_count, nulls);
        }
        mcdc_parquet_writer_free(w);
        /* every row group's statistics, from the footer */
        FILE *f = fopen(p, "rb");
        CHECK(f != NULL);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        uint8_t *buf = malloc((size_t)n);
        fseek(f, 0, SEEK_SET);
        CHECK_EQ_INT((long)fread(buf, 1, (size_t)n, f), n);
        fclose(f);
        uint32_t flen = pq_le32(buf + n - 8);
        pq_file_meta m;
        CHECK_EQ_INT(mcdc_pq_meta_decode(&m, buf + n - 8 - flen, flen, p, NULL), MCDC_OK);
        CHECK(round < 4 ? m.n_row_groups == 1 : m.n_row_groups > 3);
        int64_t r0 = 0;
        bool dict_gone = false, late_gone = false;
        for (int32_t g = 0; g < m.n_row_groups; g++) {
            int64_t r1 = r0 + m.row_groups[g].num_rows;
            for (int i = 0; i < OC_N; i++)
                CHECK(oracle_chunk(&all->columns[i], r0, r1, &m.row_groups[g].columns[i].stats));
            const pq_chunk_meta *sr = &m.row_groups[g].columns[3];
            dict_gone |= (sr->encodings & (1u << PQ_RLE_DICTIONARY)) && (sr->encodings & (1u << PQ_PLAIN)) &&
                         sr->dict_page_offset > 0;
            const pq_chunk_meta *lt = &m.row_groups[g].columns[8];
            late_gone |= (lt->encodings & (1u << PQ_RLE_DICTIONARY)) && (lt->encodings & (1u << PQ_PLAIN));
            r0 = r1;
        }
        CHECK_EQ_INT(r0, all->rows);
        /* the paths the test is for were taken */
        CHECK(m.row_groups[0].columns[4].encodings & (1u << PQ_RLE_DICTIONARY));
        if (o.dict_bytes_max == 1500 && null_pct < 90) CHECK(dict_gone && late_gone);
        mcdc_pq_meta_free(&m);
        free(buf);
        CHECK_EQ_INT(compare_file(p, all, round % 2 ? 777 : 0), all->rows);
        mcdc_batch_free(all);
    }
    unlink(p);
    mcdc_schema_unref(s);
}

/* PLAIN strings of every length 100..0 (memcpy beyond 64 bytes, the
 * 16-byte piece copy up to 64), with and without NULLs between them (the
 * selection path), in a batch whose data buffer ends exactly at its last
 * value (no room to read past it: the copy falls back to memcpy for the
 * short values at the end; ASan (make SAN=1) sees an over-read),
 * read back byte for byte. Dictionary off, so every value goes through the
 * PLAIN copy. */
TEST(parquet_plain_strings_every_length_round_trip) {
    mcdc_error e = MCDC_ERROR_INIT;
    for (int nulls = 0; nulls < 2; nulls++) {
        mcdc_schema *s = NULL;
        CHECK_EQ_INT(mcdc_schema_create(&s, 1, &e), MCDC_OK);
        mcdc_schema_set(s, 0, "v", MCDC_TYPE_BINARY, 0, 0, 0, nulls == 1, &e);
        mcdc_batch *b = NULL;
        CHECK_EQ_INT(mcdc_batch_create(&b, s, 8, &e), MCDC_OK);
        mcdc_column *c = &b->columns[0];
        uint8_t v[128];
        int64_t total = 0;
        for (int rep = 0; rep < 3; rep++)
            for (int len = 0; len <= 100; len++) total += len;
        CHECK_EQ_INT(mcdc_col_reserve(c, 0, total, &e), MCDC_OK);
        for (int rep = 0; rep < 3; rep++) {
            /* longest first: the batch ends with short values */
            for (int len = 100; len >= 0; len--) {
                for (int i = 0; i < len; i++) v[i] = (uint8_t)(rep * 31 + len * 7 + i);
                CHECK_EQ_INT(mcdc_col_append_bytes(c, v, len, &e), MCDC_OK);
                if (nulls && (len % 3) == 1) CHECK_EQ_INT(mcdc_col_append_null(c, &e), MCDC_OK);
            }
        }
        /* shrink the data buffer to the values: nothing to read past the last */
        uint8_t *exact = mcdc_realloc(c->data, (size_t)c->data_len);
        CHECK(exact != NULL);
        c->data = exact;
        c->data_cap = c->data_len;
        CHECK_EQ_INT(mcdc_batch_seal(b, &e), MCDC_OK);
        mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
        o.dictionary = false;
        o.codec = MCDC_PARQUET_UNCOMPRESSED;
        const char *path = tmp_path("plain_lengths");
        CHECK_EQ_INT(write_file(path, b, &o, 2, NULL, NULL), MCDC_OK);
        mcdc_batch *twice = repeat_batch(b, 2);
        CHECK_EQ_INT(compare_file(path, twice, 64), twice->rows);
        mcdc_batch_free(twice);
        unlink(path);
        mcdc_batch_free(b);
        mcdc_schema_unref(s);
    }
}

/* The writer's profile: off by default; on, it charges CPU to the stages a
 * column goes through (a compressed string column: convert, compress,
 * write), and none to compress in an uncompressed file. */
TEST(parquet_writer_profile_charges_the_stages_a_column_uses) {
    mcdc_batch *b = make_batch(50000, 0);
    for (int codec = 0; codec < 2; codec++) {
        mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
        o.codec = codec ? MCDC_PARQUET_ZSTD : MCDC_PARQUET_UNCOMPRESSED;
        o.dictionary = false;
        const char *p = tmp_path("profile");
        mcdc_parquet_writer *w = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_parquet_writer_open_path(&w, p, b->schema, &o, &e), MCDC_OK);
        CHECK(mcdc_parquet_writer_profile(w, 0) == NULL);
        mcdc_parquet_writer_profile_enable(w);
        CHECK_EQ_INT(mcdc_parquet_writer_write(w, b, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_parquet_writer_close(w, &e), MCDC_OK);
        const int64_t *s = mcdc_parquet_writer_profile(w, 10); /* "s", a string column */
        CHECK(s != NULL);
        CHECK(s[MCDC_PARQUET_STAGE_CONVERT] > 0);
        CHECK(s[MCDC_PARQUET_STAGE_WRITE] > 0);
        if (codec) CHECK(s[MCDC_PARQUET_STAGE_COMPRESS] > 0);
        else CHECK_EQ_INT(s[MCDC_PARQUET_STAGE_COMPRESS], 0);
        mcdc_parquet_writer_free(w);
        CHECK_EQ_INT(compare_file(p, b, 0), 50000);
        unlink(p);
    }
    CHECK_EQ_STR(mcdc_parquet_stage_name(MCDC_PARQUET_STAGE_COMPRESS), "compress");
    CHECK_EQ_STR(mcdc_parquet_stage_name(MCDC_PARQUET_STAGES), "unknown");
    mcdc_batch_free(b);
}

/* Strings written as DELTA_BYTE_ARRAY / DELTA_LENGTH_BYTE_ARRAY straight
 * from many small batches (the value before the first of a batch is kept
 * across batches; each page starts again from no value), with NULLs, small
 * pages, v1 and v2 pages, in every codec: read back row for row. */
static void strs_rows(mcdc_batch *b, int64_t r0, int64_t n) {
    for (int64_t r = r0; r < r0 + n; r++) {
        char t[64];
        int len = snprintf(t, sizeof t, "0x%020llX", 0xABC000ull + (unsigned long long)(r / 3));
        if (r % 17 == 5) mcdc_col_append_null(&b->columns[0], NULL);
        else mcdc_col_append_bytes(&b->columns[0], t, len, NULL);
        uint64_t x = (uint64_t)r * 0x9E3779B97F4A7C15ull;
        len = snprintf(t, sizeof t, "%016llx%s", (unsigned long long)x, r % 7 ? "" : "-tail");
        len = (int)(3 + x % (uint64_t)(len - 3));
        if (r % 11 == 2) mcdc_col_append_null(&b->columns[1], NULL);
        else mcdc_col_append_bytes(&b->columns[1], t, len, NULL);
    }
}

TEST(parquet_delta_strings_across_batches_and_pages_round_trip) {
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 2, NULL), MCDC_OK);
    mcdc_schema_set(s, 0, "lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "u", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    enum { BATCH = 2502, BATCHES = 12 }; /* a multiple of 3: batches start a new LSN */
    mcdc_batch *all = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&all, s, BATCH * BATCHES, NULL), MCDC_OK);
    strs_rows(all, 0, BATCH * BATCHES);
    CHECK_EQ_INT(mcdc_batch_seal(all, NULL), MCDC_OK);
    int codecs[] = {MCDC_PARQUET_UNCOMPRESSED, MCDC_PARQUET_ZSTD, MCDC_PARQUET_SNAPPY};
    for (int k = 0; k < 3; k++) {
        for (int v2 = 0; v2 < 2; v2++) {
            mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
            o.codec = (mcdc_parquet_codec)codecs[k];
            o.data_page_v2 = v2;
            o.page_bytes = 32768; /* a slice of >= 1024 values: the choice */
            o.row_group_bytes = 200 * 1024;
            const char *p = tmp_path("strs");
            mcdc_parquet_writer *w = NULL;
            mcdc_error e = MCDC_ERROR_INIT;
            CHECK_EQ_INT(mcdc_parquet_writer_open_path(&w, p, s, &o, &e), MCDC_OK);
            mcdc_batch *bs[BATCHES];
            for (int i = 0; i < BATCHES; i++) {
                CHECK_EQ_INT(mcdc_batch_create(&bs[i], s, BATCH, NULL), MCDC_OK);
                strs_rows(bs[i], (int64_t)i * BATCH, BATCH);
                CHECK_EQ_INT(mcdc_batch_seal(bs[i], NULL), MCDC_OK);
            }
            for (int i = 0; i < BATCHES; i++) {
                CHECK_EQ_INT(mcdc_parquet_writer_write(w, bs[i], &e), MCDC_OK);
                /* the writer keeps nothing of a batch: its LSN texts (22
                 * bytes each) overwritten by the next batch's first one
                 * would show as that value's prefix if it read them */
                const mcdc_column *nx = &bs[i + 1 < BATCHES ? i + 1 : i]->columns[0];
                const uint8_t *first = nx->data + nx->offsets[nx->offsets[1] ? 0 : 1];
                mcdc_column *c0 = &bs[i]->columns[0];
                for (int64_t at = 0; at + 22 <= c0->data_len; at += 22)
                    memcpy(c0->data + at, first, 22);
            }
            for (int i = 0; i < BATCHES; i++) mcdc_batch_free(bs[i]);
            CHECK_EQ_INT(mcdc_parquet_writer_close(w, &e), MCDC_OK);
            const mcdc_parquet_file_info *fi = mcdc_parquet_writer_info(w);
            CHECK(fi->columns[0].has_min_max);
            CHECK_EQ_INT(fi->columns[0].min.len, 22);
            CHECK(memcmp(fi->columns[0].min.bytes, "0x00000000000000ABC000", 22) == 0);
            mcdc_parquet_writer_free(w);
            CHECK_EQ_INT(compare_file(p, all, 1000), BATCH * BATCHES);
            pq_file_meta m;
            CHECK_EQ_INT(read_meta(p, &m), MCDC_OK);
            CHECK(m.n_row_groups > 1);
            const pq_chunk_meta *c = m.row_groups[m.n_row_groups - 1].columns;
            CHECK(c[0].encodings & (1u << PQ_DELTA_BYTE_ARRAY));
            CHECK(c[1].encodings & ((1u << PQ_DELTA_LENGTH_BYTE_ARRAY) | (1u << PQ_PLAIN)));
            mcdc_pq_meta_free(&m);
            unlink(p);
        }
    }
    mcdc_batch_free(all);
    mcdc_schema_unref(s);
}

/* Row r of pattern p for the DELTA_BYTE_ARRAY statistics test, into t
 * (64 bytes); its length. Every value starts with the same 16 bytes. */
static int dba_value(char *t, int p, int64_t r, uint64_t *x) {
    static const char head[] = "0x00000000ABCDEF";
    switch (p) {
    case 0: /* ascending, runs of 3 equal values (LSNs) */
        return snprintf(t, 64, "%s%012llX", head, (unsigned long long)(r / 3));
    case 1: /* descending, runs of 2 */
        return snprintf(t, 64, "%s%012llX", head, (unsigned long long)(1000000 - r / 2));
    case 2: { /* random tails of 0-8 bytes from {0x00, 0x01, 'a', 0xff}: prefixes of one
               * another, and tails that end in zero bytes (compared as padding) */
        uint64_t v = oracle_rng(x);
        int n = 16 + (int)(v % 9);
        memcpy(t, head, 16);
        for (int j = 16; j < n; j++)
            t[j] = "\x00\x01" "a\xff"[(v >> (8 + 3 * (j - 16))) % 4];
        return n;
    }
    case 3: /* ascending runs of 50, each starting a little higher than the last began */
        return snprintf(t, 64, "%s%06d", head, (int)(r % 50 + (r / 50) * 10));
    default: { /* tails of 0-8 zero bytes (all alike as zero-padded numbers), in no
                * order, one value in ten ending in 0xff instead */
        uint64_t v = oracle_rng(x);
        int n = 16 + (int)(v % 9);
        memcpy(t, head, 16);
        memset(t + 16, 0, (size_t)(n - 16));
        if (n > 16 && (v >> 8) % 10 == 0) t[n - 1] = '\xff';
        return n;
    }
    }
}

/* A string column written as DELTA_BYTE_ARRAY takes its min/max from the
 * order each value has against the one before (the byte after their shared
 * prefix): in ascending, descending, random and sawtooth order, with NULLs,
 * over many pages, chunks and batches, every chunk's statistics are the
 * brute-force ones and the file reads back. */
TEST(parquet_delta_byte_array_statistics_match_the_oracle_in_any_order) {
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 1, NULL), MCDC_OK);
    mcdc_schema_set(s, 0, "k", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    enum { ROWS = 30000 };
    static const int64_t cuts[] = {1, 4999, 2, 7000, 15000}; /* batch sizes; the rest last */
    for (int p = 0; p < 5; p++) {
        mcdc_batch *all = NULL;
        CHECK_EQ_INT(mcdc_batch_create(&all, s, ROWS, NULL), MCDC_OK);
        uint64_t x = 0x9E3779B97F4A7C15ull;
        for (int64_t r = 0; r < ROWS; r++) {
            char t[64];
            int n = dba_value(t, p, r, &x);
            if (p % 2 == 0 && r % 5 == 3) mcdc_col_append_null(&all->columns[0], NULL);
            else mcdc_col_append_bytes(&all->columns[0], t, n, NULL);
        }
        CHECK_EQ_INT(mcdc_batch_seal(all, NULL), MCDC_OK);
        mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
        o.dictionary = false;
        o.codec = p == 3 ? MCDC_PARQUET_UNCOMPRESSED : MCDC_PARQUET_ZSTD;
        o.page_bytes = 40000;
        o.row_group_bytes = 150 * 1024;
        const char *path = tmp_path("dba_stats");
        mcdc_parquet_writer *w = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_parquet_writer_open_path(&w, path, s, &o, &e), MCDC_OK);
        int64_t r0 = 0;
        for (size_t k = 0; k <= sizeof cuts / sizeof cuts[0]; k++) {
            int64_t n = k < sizeof cuts / sizeof cuts[0] ? cuts[k] : ROWS - r0;
            mcdc_batch *b = NULL;
            CHECK_EQ_INT(mcdc_batch_create(&b, s, n, NULL), MCDC_OK);
            CHECK_EQ_INT(mcdc_col_take_range(&b->columns[0], &all->columns[0], r0, n, NULL), MCDC_OK);
            CHECK_EQ_INT(mcdc_batch_seal(b, NULL), MCDC_OK);
            CHECK_EQ_INT(mcdc_parquet_writer_write(w, b, &e), MCDC_OK);
            mcdc_batch_free(b);
            r0 += n;
        }
        CHECK_EQ_INT(mcdc_parquet_writer_close(w, &e), MCDC_OK);
        mcdc_parquet_writer_free(w);
        pq_file_meta m;
        uint8_t *bytes = NULL; /* the statistics point into them */
        CHECK_EQ_INT(read_meta_keep(path, &m, &bytes), MCDC_OK);
        CHECK(m.n_row_groups > 2);
        int64_t g0 = 0;
        for (int32_t g = 0; g < m.n_row_groups; g++) {
            int64_t g1 = g0 + m.row_groups[g].num_rows;
            CHECK(oracle_chunk(&all->columns[0], g0, g1, &m.row_groups[g].columns[0].stats));
            g0 = g1;
        }
        CHECK_EQ_INT(g0, ROWS);
        /* the path under test was taken */
        CHECK(m.row_groups[m.n_row_groups - 1].columns[0].encodings & (1u << PQ_DELTA_BYTE_ARRAY));
        mcdc_pq_meta_free(&m);
        free(bytes);
        CHECK_EQ_INT(compare_file(path, all, 0), ROWS);
        unlink(path);
        mcdc_batch_free(all);
    }
    mcdc_schema_unref(s);
}

/* A DELTA_*BYTE_ARRAY page's body built in place (its levels and length
 * streams moved into the room kept before the suffixes) is byte for byte
 * the body built by copying; a page whose streams do not fit that room is
 * copied, with the same bytes; and the page after either starts afresh. */
TEST(parquet_delta_strings_body_in_place_equals_the_copied_one) {
    enum { N = 3000 };
    mcdc_buf plain = {0}, want = {0}, out = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    for (int64_t i = 0; i < N; i++) {
        char t[64];
        uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull;
        int len = snprintf(t, sizeof t, "key-%05d-%016llx", (int)(i / 7), (unsigned long long)x);
        len = (int)(4 + x % (uint64_t)(len - 4));
        uint8_t l4[4];
        pq_put_le32(l4, (uint32_t)len);
        CHECK_EQ_INT(mcdc_buf_append(&plain, l4, 4, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_buf_append(&plain, t, (size_t)len, &e), MCDC_OK);
    }
    static const uint8_t levels[5] = {4, 0, 0, 0, 0x21}; /* stand-in bytes before the body */
    for (int prefix = 0; prefix < 2; prefix++) {
        pq_strs scratch = {0};
        want.len = 0;
        CHECK_EQ_INT(mcdc_buf_append(&want, levels, sizeof levels, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_pq_delta_strings_encode(&want, plain.data, plain.len, N, prefix,
                                                  &scratch, &e),
                     MCDC_OK);
        mcdc_pq_strs_free(&scratch);
        /* room for the streams (in place), none at all, and too little (copied) */
        size_t heads[3] = {64 * 1024, 0, 16};
        for (int h = 0; h < 3; h++) {
            pq_strs s = {0};
            s.prefix = prefix;
            s.head = heads[h];
            for (int page = 0; page < 2; page++) {
                CHECK_EQ_INT(mcdc_pq_strs_reserve(&s, N, plain.len, &e), MCDC_OK);
                pq_strs_cur k = pq_strs_open(&s);
                const uint8_t *q = plain.data;
                for (int i = 0; i < N; i++) {
                    size_t len = pq_le32(q);
                    mcdc_pq_strs_add(&k, q + 4, len, false);
                    q += 4 + len;
                }
                pq_strs_close(&s, &k);
                CHECK_EQ_INT((int)s.n, N);
                out.len = 0;
                CHECK_EQ_INT(mcdc_buf_append(&out, "xy", 2, &e), MCDC_OK); /* not body */
                CHECK_EQ_INT(mcdc_buf_append(&out, levels, sizeof levels, &e), MCDC_OK);
                const uint8_t *body = NULL;
                size_t body_n = 0;
                CHECK_EQ_INT(mcdc_pq_strs_emit_body(&s, &out, 2, &body, &body_n, &e), MCDC_OK);
                CHECK_EQ_INT((int64_t)body_n, (int64_t)want.len);
                CHECK(memcmp(body, want.data, want.len) == 0);
                bool in_place = body >= s.bytes.data && body < s.bytes.data + s.bytes.cap;
                CHECK_EQ_INT(in_place, h == 0);
                CHECK_EQ_INT((int)s.n, 0);
                CHECK(s.prev == NULL);
            }
            mcdc_pq_strs_free(&s);
        }
    }
    mcdc_buf_free(&plain);
    mcdc_buf_free(&want);
    mcdc_buf_free(&out);
}

/* A compressed page is compressed straight into its column chunk after a
 * header that guessed its compressed size (the body's own): pages whose
 * real size has a shorter varint (compressed below 8 KiB from above it)
 * and a longer one (random bytes, which every codec stores a little
 * larger: from below 8 KiB to above) read back, in every codec, and the
 * headers say what was stored. */
TEST(parquet_page_header_guess_shorter_and_longer_round_trips) {
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 1, NULL), MCDC_OK);
    mcdc_schema_set(s, 0, "v", MCDC_TYPE_BINARY, 0, 0, 0, false, NULL);
    const mcdc_parquet_codec codecs[] = {MCDC_PARQUET_ZSTD, MCDC_PARQUET_SNAPPY,
                                         MCDC_PARQUET_GZIP, MCDC_PARQUET_LZ4_RAW};
    uint8_t *v = malloc(8192), *a = malloc(100000);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 8192; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = (uint8_t)x;
    }
    memset(a, 'a', 100000);
    const char *p = tmp_path("hdr_guess");
    for (size_t k = 0; k < sizeof codecs / sizeof codecs[0]; k++) {
        bool grew = false, shrank = false;
        /* one value a file: random bytes of 8180..8191 bytes (the PLAIN body
         * is 4 more), then 100000 equal bytes */
        for (int len = 8180; len <= 8192; len++) {
            bool same = len == 8192;
            size_t n = same ? 100000 : (size_t)len;
            mcdc_batch *b = NULL;
            CHECK_EQ_INT(mcdc_batch_create(&b, s, 1, NULL), MCDC_OK);
            CHECK_EQ_INT(mcdc_col_append_bytes(&b->columns[0], same ? a : v, (int64_t)n, NULL),
                         MCDC_OK);
            CHECK_EQ_INT(mcdc_batch_seal(b, NULL), MCDC_OK);
            mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
            o.codec = codecs[k];
            o.dictionary = false;
            CHECK_EQ_INT(write_file(p, b, &o, 1, NULL, NULL), MCDC_OK);
            CHECK_EQ_INT(compare_file(p, b, 0), 1);
            pq_file_meta m;
            uint8_t *buf = NULL;
            CHECK_EQ_INT(read_meta_keep(p, &m, &buf), MCDC_OK);
            const pq_chunk_meta *c = &m.row_groups[0].columns[0];
            pq_page_header h;
            size_t used = 0;
            CHECK_EQ_INT(mcdc_pq_page_header_decode(&h, buf + c->data_page_offset,
                                                    (size_t)c->total_compressed, &used, p, NULL),
                         MCDC_OK);
            CHECK_EQ_INT(h.uncompressed_size, (int32_t)n + 4);
            CHECK_EQ_INT((int64_t)used + h.compressed_size, c->total_compressed);
            if (h.uncompressed_size < 8192 && h.compressed_size >= 8192) grew = true;
            if (h.uncompressed_size >= 8192 && h.compressed_size < 8192) shrank = true;
            mcdc_pq_meta_free(&m);
            free(buf);
            mcdc_batch_free(b);
        }
        CHECK(shrank);
        CHECK(grew);
    }
    unlink(p);
    free(v);
    free(a);
    mcdc_schema_unref(s);
}

/* Whether the files at a and b hold the same bytes. */
static bool same_file(const char *a, const char *b) {
    size_t an = 0, bn = 0;
    uint8_t *x = slurp(a, &an), *y = slurp(b, &bn);
    bool same = an > 0 && an == bn && memcmp(x, y, an) == 0;
    free(x);
    free(y);
    return same;
}

/* A spare carries a writer's buffers to the next writer: the files are
 * the same bytes as without it (one thread and two, several row groups and
 * pages), the next writer allocates less, what it keeps stays within its
 * bound, and a writer of another schema starts from it as well. */
TEST(parquet_spare_carries_buffers_to_the_next_writer) {
    mcdc_batch *b = make_batch(20000, 50);
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    o.row_group_bytes = 256 * 1024;
    o.page_bytes = 16 * 1024;
    char pa[256], pb[256];
    snprintf(pa, sizeof pa, "%s", tmp_path("spare_a"));
    snprintf(pb, sizeof pb, "%s", tmp_path("spare_b"));
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_parquet_spare *sp = NULL, *small = NULL;
    CHECK_EQ_INT(mcdc_parquet_spare_create(&sp, 0, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_parquet_spare_create(&small, 4096, &e), MCDC_OK);
    CHECK_EQ_INT((int64_t)mcdc_parquet_spare_bytes(sp), 0);
    for (int threads = 1; threads <= 2; threads++) {
        o.threads = threads;
        o.spare = NULL;
        mcdc_alloc_stats s0, s1, s2;
        mcdc_alloc_get_stats(&s0);
        CHECK_EQ_INT(write_file(pa, b, &o, 2, NULL, NULL), MCDC_OK);
        mcdc_alloc_get_stats(&s1);
        int64_t calls_without = s1.calls - s0.calls;
        o.spare = sp;
        for (int k = 0; k < 3; k++) { /* the first fills the spare, the others start from it */
            mcdc_alloc_get_stats(&s1);
            CHECK_EQ_INT(write_file(pb, b, &o, 2, NULL, NULL), MCDC_OK);
            mcdc_alloc_get_stats(&s2);
            CHECK(same_file(pa, pb));
            CHECK(mcdc_parquet_spare_bytes(sp) > 64 * 1024);
            CHECK(mcdc_parquet_spare_bytes(sp) <= MCDC_PARQUET_SPARE_BYTES_MAX);
            /* its growth: about a third of the writer's allocations here */
            if (k > 0) CHECK(s2.calls - s1.calls < calls_without * 3 / 4);
        }
        o.spare = small;
        CHECK_EQ_INT(write_file(pb, b, &o, 2, NULL, NULL), MCDC_OK);
        CHECK(same_file(pa, pb));
        CHECK(mcdc_parquet_spare_bytes(small) <= 4096);
    }
    /* another schema (3 columns) from the 16 columns' buffers, and back */
    mcdc_schema *s3 = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s3, 3, NULL), MCDC_OK);
    mcdc_schema_set(s3, 0, "s", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s3, 1, "i", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    mcdc_schema_set(s3, 2, "f", MCDC_TYPE_BOOL, 0, 0, 0, true, NULL);
    mcdc_batch *c = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&c, s3, 5000, NULL), MCDC_OK);
    for (int64_t r = 0; r < 5000; r++) {
        char t[32];
        int n = snprintf(t, sizeof t, "row-%lld", (long long)(r * 7919 % 5000));
        if (r % 11 == 0) mcdc_col_append_null(&c->columns[0], NULL);
        else mcdc_col_append_bytes(&c->columns[0], t, n, NULL);
        mcdc_col_append_int(&c->columns[1], r * r, NULL);
        mcdc_col_append_bool(&c->columns[2], r % 3 == 0, NULL);
    }
    CHECK_EQ_INT(mcdc_batch_seal(c, NULL), MCDC_OK);
    o.spare = sp;
    CHECK_EQ_INT(write_file(pb, c, &o, 1, NULL, NULL), MCDC_OK);
    CHECK_EQ_INT(compare_file(pb, c, 0), 5000);
    CHECK_EQ_INT(write_file(pb, b, &o, 2, NULL, NULL), MCDC_OK);
    CHECK(same_file(pa, pb));
    /* a writer freed unclosed gives its buffers back too */
    mcdc_parquet_writer *w = NULL;
    CHECK_EQ_INT(mcdc_parquet_writer_open_path(&w, pb, b->schema, &o, &e), MCDC_OK);
    CHECK_EQ_INT((int64_t)mcdc_parquet_spare_bytes(sp), 0); /* the writer holds them */
    CHECK_EQ_INT(mcdc_parquet_writer_write(w, b, &e), MCDC_OK);
    mcdc_parquet_writer_free(w);
    CHECK(mcdc_parquet_spare_bytes(sp) > 64 * 1024);
    mcdc_parquet_spare_free(sp);
    mcdc_parquet_spare_free(small);
    mcdc_parquet_spare_free(NULL);
    unlink(pa);
    unlink(pb);
    mcdc_batch_free(c);
    mcdc_schema_unref(s3);
    mcdc_batch_free(b);
}

/* Row r of the one-value test's batch `k`: in most batches every row holds
 * the same value; in the others one row breaks it in a way the writer's
 * one-value check must see (a different byte at the same length, lengths
 * that still sum to the run's, the second or the last row). */
static void one_value_rows(mcdc_batch *b, int k, int64_t n) {
    for (int64_t r = 0; r < n; r++) {
        char t[32] = "0x0000000000000000ABCDEF";
        int len = 22;
        int64_t big = 42;
        if (k == 1 && r == n / 2) t[10] = '9';                   /* a middle byte */
        if (k == 2 && r == n - 1) t[21] = '0';                   /* the last row */
        if (k == 3 && r == 1) t[2] = '1';                        /* the second row */
        if (k == 4 && r == n / 3) len = 21;                      /* one shorter, */
        if (k == 4 && r == n / 3 + 1) len = 23;                  /* one longer */
        if (k == 5) len = 0;                                     /* "" throughout */
        if (k == 6 && r == n / 2) big = 43;
        mcdc_col_append_bytes(&b->columns[0], t, len, NULL);
        mcdc_col_append_int(&b->columns[1], big, NULL);
        mcdc_col_append_int(&b->columns[2], k == 6 && r == n - 1 ? 8 : 7, NULL);
    }
}

TEST(parquet_slices_of_one_value_round_trip_and_the_exceptions_too) {
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 3, NULL), MCDC_OK);
    mcdc_schema_set(s, 0, "lsn", MCDC_TYPE_UTF8, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 1, "batch_id", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 2, "op", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    enum { BATCH = 3000, KINDS = 7 };
    int order[] = {0, 1, 0, 2, 3, 0, 4, 5, 0, 6, 0};
    int nb = (int)(sizeof order / sizeof order[0]);
    mcdc_batch *all = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&all, s, (int64_t)BATCH * nb, NULL), MCDC_OK);
    for (int i = 0; i < nb; i++) one_value_rows(all, order[i], BATCH);
    CHECK_EQ_INT(mcdc_batch_seal(all, NULL), MCDC_OK);
    for (int threads = 1; threads <= 2; threads++) {
        mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
        o.threads = threads;
        o.page_bytes = 40 * 1024; /* slices of >= 1024 values (the choice), ending inside a batch */
        const char *p = tmp_path("onevalue");
        mcdc_parquet_writer *w = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_parquet_writer_open_path(&w, p, s, &o, &e), MCDC_OK);
        for (int i = 0; i < nb; i++) {
            mcdc_batch *b = NULL;
            CHECK_EQ_INT(mcdc_batch_create(&b, s, BATCH, NULL), MCDC_OK);
            one_value_rows(b, order[i], BATCH);
            CHECK_EQ_INT(mcdc_batch_seal(b, NULL), MCDC_OK);
            CHECK_EQ_INT(mcdc_parquet_writer_write(w, b, &e), MCDC_OK);
            mcdc_batch_free(b);
        }
        CHECK_EQ_INT(mcdc_parquet_writer_close(w, &e), MCDC_OK);
        const mcdc_parquet_file_info *fi = mcdc_parquet_writer_info(w);
        /* the statistics see every exception: "" the least, the second
         * row's '1' the most; 42..43 and 7..8 */
        CHECK(fi->columns[0].has_min_max);
        CHECK_EQ_INT(fi->columns[0].min.len, 0);
        CHECK_EQ_INT(fi->columns[0].max.len, 22);
        CHECK(memcmp(fi->columns[0].max.bytes, "0x1000000000000000ABCDEF", 22) == 0);
        CHECK_EQ_INT(fi->columns[1].min.i, 42);
        CHECK_EQ_INT(fi->columns[1].max.i, 43);
        CHECK_EQ_INT(fi->columns[2].min.i, 7);
        CHECK_EQ_INT(fi->columns[2].max.i, 8);
        mcdc_parquet_writer_free(w);
        CHECK_EQ_INT(compare_file(p, all, 1000), (int64_t)BATCH * nb);
        pq_file_meta m;
        CHECK_EQ_INT(read_meta(p, &m), MCDC_OK);
        for (int c = 0; c < 3; c++)
            CHECK(m.row_groups[0].columns[c].encodings & (1u << PQ_RLE_DICTIONARY));
        mcdc_pq_meta_free(&m);
        unlink(p);
    }
    (void)KINDS;
    mcdc_batch_free(all);
    mcdc_schema_unref(s);
}
