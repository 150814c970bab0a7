/*
 * mcdc_parquet_codec.c - page compression (formats.md B6): zstd, snappy,
 * gzip (zlib), LZ4_RAW, and legacy LZ4 (Hadoop framing) for reading.
 */
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_c_literalCompressionMode */
#include <zstd.h>

#include "mcdc_parquet_int.h"

/* zstd level 1's match table for our pages (~256 KiB): 2^12 entries (16 KiB,
 * stays in L1) instead of the 2^14 zstd picks for that size. Measured on the
 * bench-stream bronze rows' columns (256 KiB pages, thread CPU, best of 5,
 * load 13-15): 9-22% more bytes per CPU-second (uuid text and decimals
 * most), compressed size within 1.5% either way per column (text 0.2700 ->
 * 0.2714 of the input, uuid text 0.4901 -> 0.4875). The fast levels
 * (-1, -3, Huffman literals kept) were no faster on text and 1-6% larger.
 * The format is unchanged: readers never see the table. */
#define PQ_ZSTD1_HASH_LOG 12

void mcdc_pq_codec_ctx_free(mcdc_pq_codec_ctx *c) {
    if (c == NULL) return;
    ZSTD_freeCCtx(c->zstd_c);
    ZSTD_freeDCtx(c->zstd_d);
    c->zstd_c = NULL;
    c->zstd_d = NULL;
    c->zstd_set = false;
}

const char *mcdc_parquet_codec_name(mcdc_parquet_codec c) {
    switch (c) {
    case MCDC_PARQUET_UNCOMPRESSED: return "uncompressed";
    case MCDC_PARQUET_SNAPPY: return "snappy";
    case MCDC_PARQUET_GZIP: return "gzip";
    case MCDC_PARQUET_LZ4: return "lz4";
    case MCDC_PARQUET_ZSTD: return "zstd";
    case MCDC_PARQUET_LZ4_RAW: return "lz4_raw";
    }
    return "unknown";
}

int mcdc_parquet_codec_parse(mcdc_parquet_codec *out, const char *name, mcdc_error *err) {
    static const struct { const char *name; mcdc_parquet_codec c; } names[] = {
        {"zstd", MCDC_PARQUET_ZSTD},       {"snappy", MCDC_PARQUET_SNAPPY},
        {"gzip", MCDC_PARQUET_GZIP},       {"lz4_raw", MCDC_PARQUET_LZ4_RAW},
        {"lz4", MCDC_PARQUET_LZ4_RAW},     {"uncompressed", MCDC_PARQUET_UNCOMPRESSED},
        {"none", MCDC_PARQUET_UNCOMPRESSED},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (mcdc_str_ieq(name, names[i].name)) {
            *out = names[i].c;
            return MCDC_OK;
        }
    }
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "unknown Parquet codec '%s'; use zstd, snappy, gzip, lz4_raw or "
                          "uncompressed",
                          name);
}

static int gzip_compress(const uint8_t *src, size_t n, int level, mcdc_buf *out,
                         mcdc_error *err) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, level ? level : 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return mcdc_error_set(err, MCDC_E_NOMEM, "gzip: cannot initialise deflate");
    uLong bound = deflateBound(&zs, (uLong)n) + 32;
    int rc = mcdc_buf_reserve(out, bound, err);
    if (rc) {
        deflateEnd(&zs);
        return rc;
    }
    zs.next_in = (Bytef *)(uintptr_t)src;
    zs.avail_in = (uInt)n;
    zs.next_out = out->data + out->len;
    zs.avail_out = (uInt)bound;
    int zr = deflate(&zs, Z_FINISH);
    size_t produced = zs.total_out;
    deflateEnd(&zs);
    if (zr != Z_STREAM_END) return mcdc_error_set(err, MCDC_E_IO, "gzip: deflate failed (%d)", zr);
    out->len += produced;
    return MCDC_OK;
}

int mcdc_pq_compress(mcdc_pq_codec_ctx *ctx, int codec, int level, const uint8_t *src, size_t n,
                     mcdc_buf *out, mcdc_error *err) {
    int rc;
    switch (codec) {
    case MCDC_PARQUET_UNCOMPRESSED:
        return mcdc_buf_append(out, src, n, err);
    case MCDC_PARQUET_ZSTD: {
        if (ctx->zstd_c == NULL) ctx->zstd_c = ZSTD_createCCtx();
        if (ctx->zstd_c == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "zstd: no context");
        if (level == 0) level = 1;
        if (!ctx->zstd_set || ctx->zstd_level != level) {
            /* Parameters stick to the context: set once, not per page.
             * Negative (fast) levels keep Huffman-coded literals, which
             * they would otherwise drop. */
            ZSTD_CCtx_reset(ctx->zstd_c, ZSTD_reset_parameters);
            size_t r = ZSTD_CCtx_setParameter(ctx->zstd_c, ZSTD_c_compressionLevel, level);
            if (!ZSTD_isError(r) && level == 1)
                r = ZSTD_CCtx_setParameter(ctx->zstd_c, ZSTD_c_hashLog, PQ_ZSTD1_HASH_LOG);
            if (!ZSTD_isError(r) && level < 0)
                r = ZSTD_CCtx_setParameter(ctx->zstd_c, ZSTD_c_literalCompressionMode,
                                           ZSTD_ps_enable);
            if (ZSTD_isError(r))
                return mcdc_error_set(err, MCDC_E_INVALID, "zstd level %d: %s", level,
                                      ZSTD_getErrorName(r));
            ctx->zstd_set = true;
            ctx->zstd_level = level;
        }
        size_t bound = ZSTD_compressBound(n);
        rc = mcdc_buf_reserve(out, bound, err);
        if (rc) return rc;
        size_t z = ZSTD_compress2(ctx->zstd_c, out->data + out->len, bound, src, n);
        if (ZSTD_isError(z))
            return mcdc_error_set(err, MCDC_E_IO, "zstd: %s", ZSTD_getErrorName(z));
        out->len += z;
        return MCDC_OK;
    }
    case MCDC_PARQUET_SNAPPY: {
        size_t bound = snappy_max_compressed_length(n);
        rc = mcdc_buf_reserve(out, bound, err);
        if (rc) return rc;
        size_t z = bound;
        if (snappy_compress((const char *)src, n, (char *)(out->data + out->len), &z) != SNAPPY_OK)
            return mcdc_error_set(err, MCDC_E_IO, "snappy: compression failed");
        out->len += z;
        return MCDC_OK;
    }
    case MCDC_PARQUET_GZIP:
        return gzip_compress(src, n, level, out, err);
    case MCDC_PARQUET_LZ4_RAW: {
        if (n > (size_t)LZ4_MAX_INPUT_SIZE)
            return mcdc_error_set(err, MCDC_E_LIMIT, "lz4: page of %zu bytes too large", n);
        int bound = LZ4_compressBound((int)n);
        rc = mcdc_buf_reserve(out, (size_t)bound, err);
        if (rc) return rc;
        int z = LZ4_compress_default((const char *)src, (char *)(out->data + out->len), (int)n,
                                     bound);
        if (z <= 0) return mcdc_error_set(err, MCDC_E_IO, "lz4: compression failed");
        out->len += (size_t)z;
        return MCDC_OK;
    }
    default:
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED, "cannot write Parquet codec %d", codec);
    }
}

static int gzip_decompress(const uint8_t *src, size_t n, uint8_t *dst, size_t dn,
                           mcdc_error *err) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 47) != Z_OK)
        return mcdc_error_set(err, MCDC_E_NOMEM, "gzip: cannot initialise inflate");
    zs.next_in = (Bytef *)(uintptr_t)src;
    zs.avail_in = (uInt)n;
    zs.next_out = dst;
    zs.avail_out = (uInt)dn;
    int zr;
    for (;;) {
        zr = inflate(&zs, Z_FINISH);
        /* Concatenated members: start the next one. */
        if (zr == Z_STREAM_END && zs.avail_in > 0 && zs.avail_out > 0) {
            if (inflateReset(&zs) != Z_OK) break;
            continue;
        }
        break;
    }
    inflateEnd(&zs);
    /* Exactly dn bytes: the stream (or its last member) ends as the output
     * fills; a short or a longer stream is corrupt. */
    if (zr != Z_STREAM_END || zs.avail_out != 0)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "gzip: page does not inflate to %zu bytes",
                              dn);
    return MCDC_OK;
}

/* Hadoop LZ4 framing: [BE u32 raw len][BE u32 comp len][lz4 block]... */
static bool lz4_hadoop(const uint8_t *src, size_t n, uint8_t *dst, size_t dn) {
    size_t o = 0;
    while (n >= 8) {
        uint32_t raw = (uint32_t)src[0] << 24 | (uint32_t)src[1] << 16 | (uint32_t)src[2] << 8 | src[3];
        uint32_t comp = (uint32_t)src[4] << 24 | (uint32_t)src[5] << 16 | (uint32_t)src[6] << 8 | src[7];
        src += 8;
        n -= 8;
        if (comp > n || raw > dn - o || comp > (uint32_t)LZ4_MAX_INPUT_SIZE) return false;
        int z = LZ4_decompress_safe((const char *)src, (char *)dst + o, (int)comp, (int)raw);
        if (z < 0 || (uint32_t)z != raw) return false;
        o += raw;
        src += comp;
        n -= comp;
    }
    return n == 0 && o == dn;
}

int mcdc_pq_decompress(mcdc_pq_codec_ctx *ctx, int codec, const uint8_t *src, size_t n,
                       uint8_t *dst, size_t dn, mcdc_error *err) {
    switch (codec) {
    case MCDC_PARQUET_UNCOMPRESSED:
        if (n != dn)
            return mcdc_error_set(err, MCDC_E_CORRUPT,
                                  "uncompressed page of %zu bytes claims %zu", n, dn);
        if (n) memcpy(dst, src, n);
        return MCDC_OK;
    case MCDC_PARQUET_ZSTD: {
        if (ctx->zstd_d == NULL) ctx->zstd_d = ZSTD_createDCtx();
        if (ctx->zstd_d == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "zstd: no context");
        size_t z = ZSTD_decompressDCtx(ctx->zstd_d, dst, dn, src, n);
        if (ZSTD_isError(z) || z != dn)
            return mcdc_error_set(err, MCDC_E_CORRUPT, "zstd: page does not decompress to %zu "
                                  "bytes (%s)", dn, ZSTD_isError(z) ? ZSTD_getErrorName(z) : "size");
        return MCDC_OK;
    }
    case MCDC_PARQUET_SNAPPY: {
        size_t len;
        if (snappy_uncompressed_length((const char *)src, n, &len) != SNAPPY_OK || len != dn)
            return mcdc_error_set(err, MCDC_E_CORRUPT, "snappy: page does not decompress to %zu "
                                  "bytes", dn);
        size_t out_len = dn;
        if (snappy_uncompress((const char *)src, n, (char *)dst, &out_len) != SNAPPY_OK ||
            out_len != dn)
            return mcdc_error_set(err, MCDC_E_CORRUPT, "snappy: corrupt page");
        return MCDC_OK;
    }
    case MCDC_PARQUET_GZIP:
        return gzip_decompress(src, n, dst, dn, err);
    case MCDC_PARQUET_LZ4_RAW:
    case MCDC_PARQUET_LZ4: {
        if (codec == MCDC_PARQUET_LZ4 && lz4_hadoop(src, n, dst, dn)) return MCDC_OK;
        if (n > (size_t)LZ4_MAX_INPUT_SIZE || dn > (size_t)LZ4_MAX_INPUT_SIZE)
            return mcdc_error_set(err, MCDC_E_LIMIT, "lz4: page too large");
        int z = LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)dn);
        if (z < 0 || (size_t)z != dn)
            return mcdc_error_set(err, MCDC_E_CORRUPT, "lz4: page does not decompress to %zu "
                                  "bytes", dn);
        return MCDC_OK;
    }
    default:
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "Parquet codec %d (%s) is not supported; rewrite the file with "
                              "zstd, snappy, gzip or lz4",
                              codec, codec == 3 ? "LZO" : codec == 4 ? "BROTLI" : "unknown");
    }
}
