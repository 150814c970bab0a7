/*
 * Files of other writers (kept in fuzz/corpus/parquet, run from the repo
 * root): the encodings our writer does not produce, decoded by our reader
 * with the values their writers were given.
 *   pa_delta.parquet  pyarrow: i DELTA_BINARY_PACKED, s DELTA_BYTE_ARRAY,
 *                     f BYTE_STREAM_SPLIT, plus list/struct/map columns
 *   duck_v2.parquet   DuckDB PARQUET_VERSION V2: v2 pages, DELTA_BINARY_PACKED,
 *                     BYTE_STREAM_SPLIT, FLBA decimal(20,2)
 *   pa_int96.parquet  pyarrow INT96 timestamps
 * Also the legacy LZ4 (Hadoop framing) codec.
 */
#include <lz4.h>
#include <math.h>

#include "mcdc_parquet_int.h"
#include "mcdc_test.h"

#define CORPUS "fuzz/corpus/parquet/"

static mcdc_batch *read_one(const char *path, mcdc_parquet_reader **keep) {
    mcdc_parquet_reader *r = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_parquet_reader_open_path(&r, path, NULL, &e) != MCDC_OK) {
        fprintf(stderr, "%s\n", e.message);
        return NULL;
    }
    mcdc_batch *b = NULL;
    if (mcdc_parquet_reader_next(&b, r, &e) != MCDC_OK) fprintf(stderr, "%s\n", e.message);
    *keep = r;
    return b;
}

static int64_t i64_at(const mcdc_column *c, int64_t i) {
    return ((const int64_t *)(const void *)c->values)[i];
}

static bool str_at(const mcdc_column *c, int64_t i, const char *want) {
    int32_t n = c->offsets[i + 1] - c->offsets[i];
    return (size_t)n == strlen(want) && memcmp(c->data + c->offsets[i], want, (size_t)n) == 0;
}

TEST(parquet_reads_pyarrow_delta_and_byte_stream_split) {
    mcdc_parquet_reader *r = NULL;
    mcdc_batch *b = read_one(CORPUS "pa_delta.parquet", &r);
    CHECK(b != NULL);
    if (b == NULL) {
        mcdc_parquet_reader_free(r);
        return;
    }
    /* flat part: the nested columns are left to the leaf API */
    CHECK_EQ_INT(b->schema->n_fields, 3);
    CHECK_EQ_INT(b->rows, 30);
    static const int64_t iv[5] = {1, 0, 3, -4, 5};
    static const char *sv[5] = {"ab", "abc", NULL, "b", "bcd"};
    static const double fv[5] = {0.5, 1.5, NAN, 2.5, -1.0};
    int64_t bad = 0;
    for (int64_t k = 0; k < 30; k++) {
        int64_t m = k % 5;
        bad += mcdc_col_is_valid(&b->columns[0], k) != (m != 1);
        if (m != 1) bad += i64_at(&b->columns[0], k) != iv[m];
        bad += mcdc_col_is_valid(&b->columns[1], k) != (sv[m] != NULL);
        if (sv[m]) bad += !str_at(&b->columns[1], k, sv[m]);
        bad += mcdc_col_is_valid(&b->columns[2], k) != (m != 2);
        if (m != 2) bad += ((const double *)(const void *)b->columns[2].values)[k] != fv[m];
    }
    CHECK_EQ_INT(bad, 0);
    mcdc_batch_free(b);
    /* list<int32> through the leaf API: [1,2], None, [], [3], [None] */
    int32_t li = mcdc_parquet_reader_find_leaf(r, "l.list.element");
    CHECK(li >= 0);
    mcdc_parquet_leaf_data d;
    CHECK_EQ_INT(mcdc_parquet_reader_read_leaf(&d, r, 0, li, NULL), MCDC_OK);
    static const int16_t def[6] = {3, 3, 0, 1, 3, 2}, rep[6] = {0, 1, 0, 0, 0, 0};
    CHECK_EQ_INT(d.n, 36);
    for (int k = 0; k < 6; k++) {
        CHECK_EQ_INT(d.def[k], def[k]);
        CHECK_EQ_INT(d.rep[k], rep[k]);
    }
    CHECK_EQ_INT(((const int32_t *)(const void *)d.values->columns[0].values)[4], 3);
    mcdc_parquet_leaf_data_free(&d);
    mcdc_parquet_reader_free(r);
}

TEST(parquet_reads_duckdb_v2_pages) {
    mcdc_parquet_reader *r = NULL;
    mcdc_batch *b = read_one(CORPUS "duck_v2.parquet", &r);
    CHECK(b != NULL);
    if (b == NULL) {
        mcdc_parquet_reader_free(r);
        return;
    }
    CHECK_EQ_INT(b->rows, 40);
    CHECK_EQ_INT(b->schema->fields[3].type, MCDC_TYPE_DECIMAL);
    CHECK_EQ_INT(b->schema->fields[3].precision, 20);
    CHECK_EQ_INT(b->schema->fields[3].scale, 2);
    int64_t bad = 0;
    for (int64_t i = 0; i < 40; i++) {
        char want[8];
        snprintf(want, sizeof want, "x%d", (int)(i % 7));
        bad += i64_at(&b->columns[0], i) != i;
        bad += !str_at(&b->columns[1], i, want);
        bad += ((const double *)(const void *)b->columns[2].values)[i] != (double)i * 0.5;
        int64_t lo = i64_at(&b->columns[3], 2 * i), hi = i64_at(&b->columns[3], 2 * i + 1);
        bad += lo != i * 300 || hi != 0; /* i*3 at scale 2 */
    }
    CHECK_EQ_INT(bad, 0);
    mcdc_batch_free(b);
    mcdc_parquet_reader_free(r);
}

TEST(parquet_reads_int96_timestamps) {
    mcdc_parquet_reader *r = NULL;
    mcdc_batch *b = read_one(CORPUS "pa_int96.parquet", &r);
    CHECK(b != NULL);
    if (b == NULL) {
        mcdc_parquet_reader_free(r);
        return;
    }
    CHECK_EQ_INT(b->schema->fields[0].type, MCDC_TYPE_TIMESTAMP_UTC);
    CHECK_EQ_INT(b->rows, 4);
    CHECK_EQ_INT(i64_at(&b->columns[0], 0), 0);
    CHECK_EQ_INT(i64_at(&b->columns[0], 1), 1000000000000LL);
    CHECK(!mcdc_col_is_valid(&b->columns[0], 2));
    CHECK_EQ_INT(i64_at(&b->columns[0], 3), -1000000000LL);
    mcdc_batch_free(b);
    mcdc_parquet_reader_free(r);
}

TEST(parquet_legacy_lz4_hadoop_framing) {
    enum { N = 5000 };
    uint8_t src[N], comp[N + 64], back[N];
    for (int i = 0; i < N; i++) src[i] = (uint8_t)(i % 97);
    int z = LZ4_compress_default((const char *)src, (char *)comp + 8, N, N + 56);
    CHECK(z > 0);
    uint32_t raw = N, cz = (uint32_t)z;
    for (int k = 0; k < 4; k++) {
        comp[k] = (uint8_t)(raw >> (24 - 8 * k));
        comp[4 + k] = (uint8_t)(cz >> (24 - 8 * k));
    }
    mcdc_pq_codec_ctx ctx = {0};
    CHECK_EQ_INT(mcdc_pq_decompress(&ctx, MCDC_PARQUET_LZ4, comp, (size_t)z + 8, back, N, NULL),
                 MCDC_OK);
    CHECK(memcmp(src, back, N) == 0);
    /* some writers put a bare block under the LZ4 id */
    memset(back, 0, N);
    CHECK_EQ_INT(mcdc_pq_decompress(&ctx, MCDC_PARQUET_LZ4, comp + 8, (size_t)z, back, N, NULL),
                 MCDC_OK);
    CHECK(memcmp(src, back, N) == 0);
    mcdc_pq_codec_ctx_free(&ctx);
}
