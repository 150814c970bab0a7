/*
 * Parquet building blocks: Thrift compact protocol, RLE/bit-packing hybrid,
 * DELTA_BINARY_PACKED, codecs.
 */
#include <stdlib.h>

#include "mcdc_parquet_int.h"
#include "mcdc_test.h"
#include "mcdc_thrift.h"

static bool bytes_eq(const mcdc_buf *b, const uint8_t *want, size_t n) {
    return b->len == n && memcmp(b->data, want, n) == 0;
}

TEST(parquet_thrift_schema_element_worked_example) {
    /* formats.md B2: SchemaElement{BYTE_ARRAY, OPTIONAL, "c", UTF8, STRING} */
    mcdc_buf b = {0};
    mcdc_thrift_writer w;
    mcdc_thrift_writer_init(&w, &b, NULL);
    mcdc_thrift_struct_begin(&w);
    mcdc_thrift_field_i32(&w, 1, 6);
    mcdc_thrift_field_i32(&w, 3, 1);
    mcdc_thrift_field_string(&w, 4, "c");
    mcdc_thrift_field_i32(&w, 6, 0);
    mcdc_thrift_field_struct(&w, 10);
    mcdc_thrift_field_struct(&w, 1);
    mcdc_thrift_struct_end(&w);
    mcdc_thrift_struct_end(&w);
    mcdc_thrift_struct_end(&w);
    static const uint8_t want[] = {0x15, 0x0C, 0x25, 0x02, 0x18, 0x01, 0x63,
                                   0x25, 0x00, 0x4C, 0x1C, 0x00, 0x00, 0x00};
    CHECK_EQ_INT(w.rc, MCDC_OK);
    CHECK(bytes_eq(&b, want, sizeof want));
    mcdc_buf_free(&b);
}

TEST(parquet_thrift_round_trip_and_skip_unknown) {
    mcdc_buf b = {0};
    mcdc_thrift_writer w;
    mcdc_thrift_writer_init(&w, &b, NULL);
    mcdc_thrift_struct_begin(&w);
    mcdc_thrift_field_i32(&w, 1, -123456);
    mcdc_thrift_field_i64(&w, 2, INT64_MIN);
    mcdc_thrift_field_bool(&w, 3, true);
    /* unknown fields the reader must skip: a long-form id, a nested struct
     * with a list of strings, a list of bools, a big list */
    mcdc_thrift_field_struct(&w, 200);
    mcdc_thrift_field_list(&w, 1, MCDC_TT_BINARY, 2);
    mcdc_thrift_elem_binary(&w, "ab", 2);
    mcdc_thrift_elem_binary(&w, "", 0);
    mcdc_thrift_field_list(&w, 2, MCDC_TT_FALSE, 3);
    mcdc_thrift_elem_bool(&w, true);
    mcdc_thrift_elem_bool(&w, false);
    mcdc_thrift_elem_bool(&w, true);
    mcdc_thrift_struct_end(&w);
    mcdc_thrift_field_list(&w, 201, MCDC_TT_I64, 20);
    for (int i = 0; i < 20; i++) mcdc_thrift_elem_i64(&w, (int64_t)i * 1000000007);
    mcdc_thrift_field_binary(&w, 202, "xyz", 3);
    mcdc_thrift_field_i8(&w, 203, -5);
    mcdc_thrift_field_i64(&w, 204, INT64_MAX);
    mcdc_thrift_struct_end(&w);
    CHECK_EQ_INT(w.rc, MCDC_OK);

    mcdc_thrift_reader r;
    mcdc_thrift_reader_init(&r, b.data, b.len, "test", NULL);
    int16_t id;
    int t;
    int seen = 0;
    mcdc_thrift_read_struct_begin(&r);
    while (mcdc_thrift_read_field(&r, &id, &t)) {
        if (id == 1) { CHECK_EQ_INT(mcdc_thrift_read_i32(&r, t), -123456); seen++; }
        else if (id == 2) { CHECK(mcdc_thrift_read_i64(&r, t) == INT64_MIN); seen++; }
        else if (id == 3) { CHECK(mcdc_thrift_read_bool(&r, t)); seen++; }
        else if (id == 204) { CHECK(mcdc_thrift_read_i64(&r, t) == INT64_MAX); seen++; }
        else if (id == 203) { CHECK_EQ_INT(mcdc_thrift_read_elem_int(&r, t), -5); seen++; }
        else mcdc_thrift_skip(&r, t);
    }
    CHECK_EQ_INT(r.rc, MCDC_OK);
    CHECK_EQ_INT(seen, 5);
    CHECK(r.p == r.end);

    /* every truncation fails cleanly, never reads past the end */
    for (size_t cut = 0; cut < b.len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, b.data, cut);
        mcdc_thrift_reader_init(&r, copy, cut, "cut", NULL);
        mcdc_thrift_read_struct_begin(&r);
        while (mcdc_thrift_read_field(&r, &id, &t)) mcdc_thrift_skip(&r, t);
        CHECK(r.rc != MCDC_OK);
        free(copy);
    }
    mcdc_buf_free(&b);
}

TEST(parquet_thrift_depth_is_bounded) {
    uint8_t deep[200];
    for (size_t i = 0; i < sizeof deep; i++) deep[i] = 0x1C; /* field 1, struct, nested */
    mcdc_thrift_reader r;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_thrift_reader_init(&r, deep, sizeof deep, "deep", &e);
    mcdc_thrift_skip(&r, MCDC_TT_STRUCT);
    CHECK_EQ_INT(r.rc, MCDC_E_LIMIT);
    CHECK(strstr(e.message, "deep") != NULL);
}

TEST(parquet_rle_worked_examples) {
    /* formats.md B4: 1000 present rows -> D0 0F 01; 10 rows with nulls at
     * 2 and 7 -> 05 7B 03 */
    uint8_t bits[125];
    memset(bits, 0xFF, sizeof bits);
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_pq_rle_encode_bitmap(&b, bits, 1000, NULL), MCDC_OK);
    static const uint8_t want1[] = {0xD0, 0x0F, 0x01};
    CHECK(bytes_eq(&b, want1, 3));
    b.len = 0;
    uint8_t bits2[2] = {0x7B, 0xFF};
    CHECK_EQ_INT(mcdc_pq_rle_encode_bitmap(&b, bits2, 10, NULL), MCDC_OK);
    static const uint8_t want2[] = {0x05, 0x7B, 0x03};
    CHECK(bytes_eq(&b, want2, 3));
    uint32_t out[10];
    CHECK_EQ_INT(mcdc_pq_rle_decode(b.data, b.len, 1, out, 10, NULL), MCDC_OK);
    static const uint32_t lv[10] = {1, 1, 0, 1, 1, 1, 1, 0, 1, 1};
    CHECK(memcmp(out, lv, sizeof lv) == 0);
    mcdc_buf_free(&b);
}

TEST(parquet_rle_hybrid_round_trips_all_widths) {
    enum { N = 5000 };
    uint32_t *v = malloc(N * sizeof *v), *back = malloc(N * sizeof *back);
    unsigned seed = 7;
    for (int width = 0; width <= 32; width++) {
        uint64_t mask = width == 32 ? 0xFFFFFFFFu : ((1ull << width) - 1);
        for (int i = 0; i < N; i++) {
            seed = seed * 1103515245u + 12345u;
            /* mix of long runs, short runs and noise */
            if ((i / 100) % 3 == 0) v[i] = (uint32_t)(i / 100) & (uint32_t)mask;
            else v[i] = (uint32_t)(seed >> 3) & (uint32_t)mask;
        }
        for (int n = 0; n <= N; n += (n < 40 ? 1 : 997)) {
            mcdc_buf b = {0};
            CHECK_EQ_INT(mcdc_pq_rle_encode(&b, v, n, width, NULL), MCDC_OK);
            size_t used = 0;
            memset(back, 0xAB, N * sizeof *back);
            CHECK_EQ_INT(mcdc_pq_rle_decode(b.data, b.len, width, back, n, &used), MCDC_OK);
            CHECK(n == 0 || memcmp(v, back, (size_t)n * sizeof *v) == 0);
            CHECK(used == b.len);
            /* one value more than encoded can only come from padding */
            if (b.len > 1 && n > 0)
                CHECK_EQ_INT(mcdc_pq_rle_decode(b.data, b.len - 1, width, back, n, NULL) == MCDC_OK &&
                                 memcmp(v, back, (size_t)n * sizeof *v) != 0,
                             0);
            mcdc_buf_free(&b);
        }
    }
    free(v);
    free(back);
}

TEST(parquet_rle_decoder_rejects_garbage) {
    uint32_t out[64];
    static const uint8_t zero_run[] = {0x00, 0x01};            /* RLE run of 0 */
    static const uint8_t short_bp[] = {0x03, 0xFF};            /* 8 values of width 3 need 3 bytes */
    static const uint8_t big_val[] = {0x10, 0x07};             /* value 7 at width 2 */
    static const uint8_t endless[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    CHECK_EQ_INT(mcdc_pq_rle_decode(zero_run, sizeof zero_run, 1, out, 4, NULL), MCDC_E_CORRUPT);
    CHECK_EQ_INT(mcdc_pq_rle_decode(short_bp, sizeof short_bp, 3, out, 8, NULL), MCDC_E_CORRUPT);
    CHECK_EQ_INT(mcdc_pq_rle_decode(big_val, sizeof big_val, 2, out, 8, NULL), MCDC_E_CORRUPT);
    CHECK_EQ_INT(mcdc_pq_rle_decode(endless, sizeof endless, 1, out, 8, NULL), MCDC_E_CORRUPT);
    CHECK_EQ_INT(mcdc_pq_rle_decode(big_val, sizeof big_val, 33, out, 8, NULL), MCDC_E_CORRUPT);
}

TEST(parquet_delta_binary_packed_round_trip) {
    enum { N = 1000 };
    int64_t *v = malloc(N * sizeof *v), *back = malloc(N * sizeof *back);
    int sizes[] = {0, 1, 2, 31, 32, 33, 127, 128, 129, 257, N};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        for (int i = 0; i < n; i++) {
            switch (i % 5) {
            case 0: v[i] = INT64_MIN + i; break;
            case 1: v[i] = INT64_MAX - i; break;
            case 2: v[i] = -i; break;
            case 3: v[i] = (int64_t)i * i; break;
            default: v[i] = 42; break;
            }
        }
        mcdc_buf b = {0};
        CHECK_EQ_INT(mcdc_pq_delta_encode(&b, v, n, NULL), MCDC_OK);
        int64_t got = -1;
        size_t used = 0;
        CHECK_EQ_INT(mcdc_pq_delta_decode(b.data, b.len, back, N, &got, &used), MCDC_OK);
        CHECK_EQ_INT(got, n);
        CHECK_EQ_INT(used, b.len);
        CHECK(n == 0 || memcmp(v, back, (size_t)n * 8) == 0);
        /* a claimed count above the caller's room is corrupt, not an overflow */
        if (n > 1) CHECK_EQ_INT(mcdc_pq_delta_decode(b.data, b.len, back, n - 1, &got, &used), MCDC_E_CORRUPT);
        mcdc_buf_free(&b);
    }
    free(v);
    free(back);
}

TEST(parquet_codecs_round_trip) {
    enum { N = 100000 };
    uint8_t *src = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++) src[i] = (uint8_t)((i % 251) ^ (i / 1000));
    int codecs[] = {MCDC_PARQUET_UNCOMPRESSED, MCDC_PARQUET_SNAPPY, MCDC_PARQUET_GZIP,
                    MCDC_PARQUET_ZSTD, MCDC_PARQUET_LZ4_RAW};
    mcdc_pq_codec_ctx ctx = {0};
    for (size_t k = 0; k < sizeof codecs / sizeof codecs[0]; k++) {
        mcdc_buf out = {0};
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_pq_compress(&ctx, codecs[k], 0, src, N, &out, &e), MCDC_OK);
        if (codecs[k] != MCDC_PARQUET_UNCOMPRESSED) CHECK(out.len < N);
        memset(back, 0, N);
        CHECK_EQ_INT(mcdc_pq_decompress(&ctx, codecs[k], out.data, out.len, back, N, &e), MCDC_OK);
        CHECK(memcmp(src, back, N) == 0);
        /* wrong claimed size and damaged input are errors */
        CHECK(mcdc_pq_decompress(&ctx, codecs[k], out.data, out.len, back, N - 1, &e) != MCDC_OK);
        if (out.len > 20) {
            out.data[out.len / 2] ^= 0x5A;
            out.data[out.len - 1] ^= 0x5A;
            int rc = mcdc_pq_decompress(&ctx, codecs[k], out.data, out.len / 2, back, N, &e);
            CHECK(rc != MCDC_OK);
        }
        /* compressed bytes are appended after what out holds (the writer
         * compresses a page after its header) */
        size_t z = out.len;
        out.len = 0;
        CHECK_EQ_INT(mcdc_buf_append(&out, "hdr", 3, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_pq_compress(&ctx, codecs[k], 0, src, N, &out, &e), MCDC_OK);
        CHECK(out.len == z + 3 && memcmp(out.data, "hdr", 3) == 0);
        memset(back, 0, N);
        CHECK_EQ_INT(mcdc_pq_decompress(&ctx, codecs[k], out.data + 3, z, back, N, &e), MCDC_OK);
        CHECK(memcmp(src, back, N) == 0);
        mcdc_buf_free(&out);
    }
    mcdc_pq_codec_ctx_free(&ctx);
    mcdc_parquet_codec c;
    CHECK_EQ_INT(mcdc_parquet_codec_parse(&c, "ZSTD", NULL), MCDC_OK);
    CHECK_EQ_INT(c, MCDC_PARQUET_ZSTD);
    CHECK_EQ_INT(mcdc_parquet_codec_parse(&c, "brotli", NULL), MCDC_E_INVALID);
    free(src);
    free(back);
}

/* The n INT32 values at plain (PLAIN) encoded as DELTA_BINARY_PACKED
 * (*len: its bytes) and decoded back: how many differ from plain's, or -1
 * when the stream does not decode whole to n values. */
static int int32_delta_round_trip(const uint8_t *plain, int n, size_t *len) {
    mcdc_buf b = {0};
    int64_t *back = malloc((size_t)n * sizeof *back), got = 0;
    size_t used = 0;
    int bad = -1;
    if (back && mcdc_pq_delta_encode_plain(&b, plain, n, 4, NULL) == MCDC_OK &&
        mcdc_pq_delta_decode(b.data, b.len, back, n, &got, &used) == MCDC_OK && got == n &&
        used == b.len) {
        bad = 0;
        for (int i = 0; i < n; i++) bad += (uint32_t)back[i] != pq_le32(plain + (size_t)i * 4);
    }
    *len = b.len;
    mcdc_buf_free(&b);
    free(back);
    return bad;
}

TEST(parquet_delta_encode_int32_wraps_in_32_bits) {
    /* INT32 pages: deltas such as INT32_MIN - INT32_MAX wrap to 1 */
    enum { N = 1000 };
    uint8_t plain[N * 4];
    int32_t v[N];
    for (int i = 0; i < N; i++) {
        v[i] = i % 2 ? INT32_MAX - i % 3 : INT32_MIN + i % 5;
        if (i % 97 == 0) v[i] = -i * 12345;
        memcpy(plain + i * 4, &v[i], 4);
    }
    size_t len = 0;
    CHECK_EQ_INT(int32_delta_round_trip(plain, N, &len), 0);
    /* every miniblock width fits 32 bits: what INT32 readers (Arrow) accept */
    CHECK(len < (size_t)N * 4 + 200);
}

/* INT32 values whose deltas less their minimum take every bit width 0..32
 * (each miniblock packing width), in counts that end a block
 * and a miniblock early or exactly: decoded as written. */
TEST(parquet_delta_encode_int32_every_bit_width_round_trips) {
    enum { N = 300 };
    static const int counts[] = {1, 2, 33, 129, 130, 257, N};
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int bad = 0;
    for (int w = 0; w <= 32; w++) {
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            int n = counts[c];
            uint8_t plain[N * 4];
            uint32_t v = (uint32_t)x;
            for (int i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                uint32_t d = w == 32 ? (uint32_t)x : (uint32_t)(x & ((1ull << w) - 1));
                if (i % 32 == 5) d = w == 32 ? UINT32_MAX : (uint32_t)((1ull << w) - 1);
                v = i ? v + d - 7 : v; /* deltas from -7 up: a negative minimum */
                pq_put_le32(plain + i * 4, v);
            }
            size_t len = 0;
            int k = int32_delta_round_trip(plain, n, &len);
            bad += k != 0;
        }
    }
    CHECK_EQ_INT(bad, 0);
}

/* pq_same_bytes against memcmp: every length 0..40 (the word paths, their
 * overlapping last word, memcmp beyond 32), one byte differing at every
 * position (and differing in one bit only, high or low), at unaligned
 * starts. */
TEST(parquet_same_bytes_matches_memcmp) {
    uint8_t a[64], b[64];
    int bad = 0, cases = 0;
    for (size_t off = 0; off < 3; off++) {
        for (size_t n = 0; n <= 40; n++) {
            for (size_t i = 0; i < n + off; i++) a[i] = b[i] = (uint8_t)(0x41 + i * 7);
            bad += !pq_same_bytes(a + off, b + off, n), cases++;
            for (size_t at = 0; at < n; at++) {
                static const uint8_t FLIP[] = {0x01, 0x80, 0xFF};
                for (size_t f = 0; f < sizeof FLIP; f++) {
                    b[off + at] ^= FLIP[f];
                    bool want = memcmp(a + off, b + off, n) == 0;
                    bad += pq_same_bytes(a + off, b + off, n) != want || want, cases++;
                    b[off + at] ^= FLIP[f];
                }
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(cases > 2000);
}
