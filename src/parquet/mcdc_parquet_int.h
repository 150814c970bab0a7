/*
 * mcdc_parquet_int.h - internals of the Parquet module shared by the writer,
 * the reader and the unit tests: format enums, the RLE/bit-packing hybrid,
 * the DELTA_* decoders, the codecs, the metadata decoder.
 */
#ifndef MCDC_PARQUET_INT_H
#define MCDC_PARQUET_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcdc_parquet.h"
#include "mcdc_util.h"

/* Physical types */
enum { PQ_BOOLEAN = 0, PQ_INT32 = 1, PQ_INT64 = 2, PQ_INT96 = 3, PQ_FLOAT = 4, PQ_DOUBLE = 5,
       PQ_BYTE_ARRAY = 6, PQ_FLBA = 7 };
/* Encodings */
enum { PQ_PLAIN = 0, PQ_PLAIN_DICTIONARY = 2, PQ_RLE = 3, PQ_BIT_PACKED = 4,
       PQ_DELTA_BINARY_PACKED = 5, PQ_DELTA_LENGTH_BYTE_ARRAY = 6, PQ_DELTA_BYTE_ARRAY = 7,
       PQ_RLE_DICTIONARY = 8, PQ_BYTE_STREAM_SPLIT = 9 };
/* Page types */
enum { PQ_DATA_PAGE = 0, PQ_INDEX_PAGE = 1, PQ_DICTIONARY_PAGE = 2, PQ_DATA_PAGE_V2 = 3 };
/* Repetition */
enum { PQ_REQUIRED = 0, PQ_OPTIONAL = 1, PQ_REPEATED = 2 };
/* Converted types */
enum { PQ_CT_UTF8 = 0, PQ_CT_MAP = 1, PQ_CT_MAP_KEY_VALUE = 2, PQ_CT_LIST = 3, PQ_CT_ENUM = 4,
       PQ_CT_DECIMAL = 5, PQ_CT_DATE = 6, PQ_CT_TIME_MILLIS = 7, PQ_CT_TIME_MICROS = 8,
       PQ_CT_TIMESTAMP_MILLIS = 9, PQ_CT_TIMESTAMP_MICROS = 10, PQ_CT_UINT_8 = 11,
       PQ_CT_UINT_16 = 12, PQ_CT_UINT_32 = 13, PQ_CT_UINT_64 = 14, PQ_CT_INT_8 = 15,
       PQ_CT_INT_16 = 16, PQ_CT_INT_32 = 17, PQ_CT_INT_64 = 18, PQ_CT_JSON = 19,
       PQ_CT_BSON = 20, PQ_CT_INTERVAL = 21 };
/* LogicalType union members */
enum { PQ_LT_NONE = 0, PQ_LT_STRING = 1, PQ_LT_MAP = 2, PQ_LT_LIST = 3, PQ_LT_ENUM = 4,
       PQ_LT_DECIMAL = 5, PQ_LT_DATE = 6, PQ_LT_TIME = 7, PQ_LT_TIMESTAMP = 8,
       PQ_LT_INTEGER = 10, PQ_LT_UNKNOWN = 11, PQ_LT_JSON = 12, PQ_LT_BSON = 13,
       PQ_LT_UUID = 14 };
/* TimeUnit */
enum { PQ_UNIT_NONE = 0, PQ_UNIT_MILLIS = 1, PQ_UNIT_MICROS = 2, PQ_UNIT_NANOS = 3 };

/* ---- little-endian helpers ----------------------------------------------- */
static inline uint32_t pq_le32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t pq_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
/* Whether the n bytes at a and at b are the same. The writer's dictionary
 * asks once a value (its run test, its probe's match) and its keys are
 * short (LSN texts, codes, names): up to 32 bytes are compared inline in
 * overlapping words, where a call to memcmp would cost more than the
 * comparison. */
static inline bool pq_same_bytes(const uint8_t *a, const uint8_t *b, size_t n) {
    if (n > 32) return memcmp(a, b, n) == 0;
    if (n >= 8) {
        uint64_t d = pq_le64(a + n - 8) ^ pq_le64(b + n - 8);
        for (size_t i = 0; i + 8 < n; i += 8) d |= pq_le64(a + i) ^ pq_le64(b + i);
        return d == 0;
    }
    if (n >= 4)
        return ((pq_le32(a) ^ pq_le32(b)) | (pq_le32(a + n - 4) ^ pq_le32(b + n - 4))) == 0;
    uint32_t d = 0;
    for (size_t i = 0; i < n; i++) d |= (uint32_t)(a[i] ^ b[i]);
    return d == 0;
}

static inline void pq_put_le32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void pq_put_le64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
_Static_assert(sizeof(uint32_t) == 4 && sizeof(uint64_t) == 8, "wire sizes");

/* Bits needed to store v (0 for 0). */
static inline int pq_bit_width(uint64_t v) {
    return v == 0 ? 0 : 64 - __builtin_clzll(v);
}

/* ---- RLE / bit-packing hybrid (formats.md B5) ----------------------------- */
/* Appends the hybrid encoding of v[0..n) (each < 2^width, width 0..32) to out.
 * No length prefix, no bit-width byte. */
int mcdc_pq_rle_encode(mcdc_buf *out, const uint32_t *v, int64_t n, int width, mcdc_error *err);
/* Width-1 levels straight from an LSB-first bitmap (bits[0] bit 0 = entry 0):
 * one RLE run when all bits are equal, else one bit-packed run. */
int mcdc_pq_rle_encode_bitmap(mcdc_buf *out, const uint8_t *bits, int64_t n, mcdc_error *err);
/* Decodes exactly `count` values of `width` bits into out. Returns MCDC_OK,
 * or MCDC_E_CORRUPT when the input ends early or is malformed. *used gets the
 * bytes consumed (may be NULL). */
int mcdc_pq_rle_decode(const uint8_t *p, size_t n, int width, uint32_t *out, int64_t count,
                       size_t *used);
/* Unpacks count values of width bits, LSB-first (n bytes available). */
int mcdc_pq_unpack(const uint8_t *p, size_t n, int width, uint32_t *out, int64_t count);
/* Deprecated BIT_PACKED levels: MSB-first. */
int mcdc_pq_unpack_msb(const uint8_t *p, size_t n, int width, uint32_t *out, int64_t count);

/* ---- DELTA encodings ------------------------------------------------------- */
/* DELTA_BINARY_PACKED: decodes up to count_max values (the stream's own total
 * must not exceed it) into out; *count gets the total, *used the bytes. */
int mcdc_pq_delta_decode(const uint8_t *p, size_t n, int64_t *out, int64_t count_max,
                         int64_t *count, size_t *used);
/* DELTA_BINARY_PACKED encoder (block 128, 4 miniblocks), for tests and v2 use. */
int mcdc_pq_delta_encode(mcdc_buf *out, const int64_t *v, int64_t n, mcdc_error *err);
/* The same over n PLAIN little-endian values of width 4 (INT32: deltas wrap
 * in 32 bits, as INT32 readers compute) or 8 (INT64). */
int mcdc_pq_delta_encode_plain(mcdc_buf *out, const uint8_t *plain, int64_t n, int width,
                               mcdc_error *err);

/* ---- DELTA_LENGTH_BYTE_ARRAY / DELTA_BYTE_ARRAY ----------------------------
 * A page's strings as three streams built value by value (straight from a
 * batch or from PLAIN values): with prefix, the length of the prefix each
 * value shares with the one before (DELTA_BYTE_ARRAY), then the lengths of
 * the rest and the rest's bytes (without prefix: DELTA_LENGTH_BYTE_ARRAY). */
typedef struct pq_strs {
    bool prefix;
    int64_t n;
    mcdc_buf pre, len, bytes; /* int32 LE, int32 LE, the suffixes */
    const uint8_t *prev;      /* the value before (NULL: none in this page) */
    size_t prev_n;
    mcdc_buf last;            /* a copy of it across batches (pq_strs_keep_last) */
    size_t head;              /* room kept before the suffixes (bytes starts at it), for
                               * the page's levels and length streams (strs_emit_body) */
} pq_strs;

/* Bytes a and b (an, bn bytes) start with in common. */
static inline size_t pq_common_prefix(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    size_t m = an < bn ? an : bn, i = 0;
    for (; i + 8 <= m; i += 8) {
        uint64_t x = pq_le64(a + i) ^ pq_le64(b + i);
        if (x) return i + (size_t)(__builtin_ctzll(x) >> 3);
    }
    if (i < m && m >= 8) {
        /* the last 8 bytes, overlapping those compared: the bytes before
         * i are equal, so a difference lies at i or after */
        uint64_t x = pq_le64(a + m - 8) ^ pq_le64(b + m - 8);
        return x ? m - 8 + (size_t)(__builtin_ctzll(x) >> 3) : m;
    }
    while (i < m && a[i] == b[i]) i++;
    return i;
}

/* Room for n more values of at most `bytes` bytes in all. */
int mcdc_pq_strs_reserve(pq_strs *s, int64_t n, size_t bytes, mcdc_error *err);

/* A pq_strs while values are added to it: its write positions in locals
 * (pq_strs_open, then pq_strs_close). The compiler keeps these in
 * registers; the fields of a pq_strs it reloaded after every copy of a
 * value's bytes (a byte store may alias them). */
typedef struct pq_strs_cur {
    bool prefix;
    uint8_t *pre, *len, *bytes; /* where the next value's entries go */
    const uint8_t *prev;
    size_t prev_n;
} pq_strs_cur;

static inline pq_strs_cur pq_strs_open(pq_strs *s) {
    pq_strs_cur k = {s->prefix, s->pre.data + (size_t)s->n * 4, s->len.data + (size_t)s->n * 4,
                     s->bytes.data + s->bytes.len, s->prev, s->prev_n};
    return k;
}

static inline void pq_strs_close(pq_strs *s, const pq_strs_cur *k) {
    s->n = (int64_t)((size_t)(k->len - s->len.data) / 4);
    s->bytes.len = (size_t)(k->bytes - s->bytes.data);
    s->prev = k->prev;
    s->prev_n = k->prev_n;
}

/* Adds one value (room reserved). safe: v may be read 32 bytes past its
 * prefix (the value's buffer extends that far), so a short suffix is
 * copied in 16-byte pieces instead of a call to memcpy. Returns the length
 * of the prefix it shares with the value before (0 without prefix). Always
 * inlined: a call per value costs more than the work (gcc stops inlining
 * it into the writer's grown slice loop). */
__attribute__((always_inline)) static inline size_t mcdc_pq_strs_add(pq_strs_cur *k,
                                                                      const uint8_t *v,
                                                                      size_t len, bool safe) {
    size_t pl = k->prefix && k->prev ? pq_common_prefix(k->prev, k->prev_n, v, len) : 0;
    size_t m = len - pl;
    if (k->prefix) {
        pq_put_le32(k->pre, (uint32_t)pl);
        k->pre += 4;
    }
    pq_put_le32(k->len, (uint32_t)m);
    k->len += 4;
    if (m <= 32 && safe) {
        memcpy(k->bytes, v + pl, 16);
        if (m > 16) memcpy(k->bytes + 16, v + pl + 16, 16);
    } else if (m) {
        memcpy(k->bytes, v + pl, m);
    }
    k->bytes += m;
    k->prev = v;
    k->prev_n = len;
    return pl;
}

/* Copies the last value added (its buffer may go away) for the next add. */
int mcdc_pq_strs_keep_last(pq_strs *s, mcdc_error *err);
/* Appends the page's encoded streams to out and starts a new page. */
int mcdc_pq_strs_emit(pq_strs *s, mcdc_buf *out, mcdc_error *err);
/* The same, but when out's bytes from `from` on and the length streams fit
 * in the room before the suffixes, they are moved there instead and the
 * page's body is left in place (*body, *body_n: those bytes, then the
 * suffixes; valid until the next value is added), saving a copy of the
 * suffixes. Otherwise *body is out's bytes from `from`. */
int mcdc_pq_strs_emit_body(pq_strs *s, mcdc_buf *out, size_t from, const uint8_t **body,
                           size_t *body_n, mcdc_error *err);
void mcdc_pq_strs_free(pq_strs *s);

/* DELTA_LENGTH_BYTE_ARRAY (prefix false) or DELTA_BYTE_ARRAY of the n PLAIN
 * BYTE_ARRAY values at plain (plain_n bytes: a 4-byte length, then the
 * bytes, per value), appended to out; s is scratch. */
int mcdc_pq_delta_strings_encode(mcdc_buf *out, const uint8_t *plain, size_t plain_n, int64_t n,
                                 bool prefix, pq_strs *s, mcdc_error *err);

/* ---- codecs ---------------------------------------------------------------- */
typedef struct mcdc_pq_codec_ctx {
    void *zstd_c; /* ZSTD_CCtx*, created on first use */
    void *zstd_d; /* ZSTD_DCtx* */
    bool zstd_set;  /* zstd_c's parameters are those of zstd_level */
    int zstd_level;
} mcdc_pq_codec_ctx;
void mcdc_pq_codec_ctx_free(mcdc_pq_codec_ctx *c);
/* Appends the compressed bytes of src to out (the writer compresses a page
 * straight into its column chunk, after room for the page's header). */
int mcdc_pq_compress(mcdc_pq_codec_ctx *ctx, int codec, int level, const uint8_t *src, size_t n,
                     mcdc_buf *out, mcdc_error *err);
/* Decompresses exactly uncompressed_n bytes into dst (dst sized by caller). */
int mcdc_pq_decompress(mcdc_pq_codec_ctx *ctx, int codec, const uint8_t *src, size_t n,
                       uint8_t *dst, size_t uncompressed_n, mcdc_error *err);

/* ---- metadata (decoded footer) -------------------------------------------- */
typedef struct pq_schema_elem {
    char *name;            /* owned */
    int32_t type;          /* -1 for groups */
    int32_t type_length;
    int32_t repetition;    /* -1 when absent (root) */
    int32_t num_children;
    int32_t converted;     /* -1 when absent */
    int32_t scale, precision;
    int32_t logical;       /* PQ_LT_* */
    int32_t lt_scale, lt_precision;
    bool lt_utc;
    int32_t lt_unit;
    int32_t lt_bits;
    bool lt_signed;
} pq_schema_elem;

typedef struct pq_stats {
    bool has_null_count;
    int64_t null_count;
    const uint8_t *min, *max; /* borrowed from the footer; NULL when absent */
    size_t min_len, max_len;
    bool legacy;              /* min/max came from deprecated fields 1/2 */
} pq_stats;

typedef struct pq_chunk_meta {
    int32_t type;
    int32_t codec;
    int64_t num_values;
    int64_t total_compressed;
    int64_t total_uncompressed;
    int64_t data_page_offset;
    int64_t dict_page_offset;  /* 0 when absent */
    uint32_t encodings;        /* bit per Encoding listed */
    pq_stats stats;
} pq_chunk_meta;

typedef struct pq_row_group {
    int64_t num_rows;
    int32_t n_columns;
    pq_chunk_meta *columns;    /* owned */
} pq_row_group;

typedef struct pq_file_meta {
    int32_t version;
    int64_t num_rows;
    int32_t n_schema;
    pq_schema_elem *schema;    /* owned */
    int32_t n_row_groups;
    pq_row_group *row_groups;  /* owned */
    bool has_column_orders;
    char *created_by;          /* owned, may be NULL */
} pq_file_meta;

int mcdc_pq_meta_decode(pq_file_meta *out, const uint8_t *p, size_t n, const char *what,
                        mcdc_error *err);
void mcdc_pq_meta_free(pq_file_meta *m);

typedef struct pq_page_header {
    int32_t type;
    int32_t uncompressed_size;
    int32_t compressed_size;
    int32_t num_values;
    int32_t encoding;
    int32_t def_encoding;
    int32_t rep_encoding;
    /* v2 */
    int32_t num_nulls;
    int32_t num_rows;
    int32_t def_len;
    int32_t rep_len;
    bool is_compressed;
} pq_page_header;

/* Decodes a page header at p (n bytes available); *used = header bytes. */
int mcdc_pq_page_header_decode(pq_page_header *out, const uint8_t *p, size_t n, size_t *used,
                               const char *what, mcdc_error *err);

/* A local storage on the directory of path (owned by the caller) and the
 * file's name in it (borrowed from path): the *_open_path conveniences. */
int mcdc_parquet__local_path(mcdc_storage **st, const char **key, const char *path,
                             mcdc_error *err);

/* FLBA bytes for a decimal of precision p (formats.md B4). */
int32_t mcdc_pq_decimal_bytes(int32_t precision);

#endif /* MCDC_PARQUET_INT_H */
