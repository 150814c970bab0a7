/* mcdc_batch_frame.c - a batch's columns as one raw frame (see
 * mcdc_batch_frame.h). */
#include "mcdc_batch_frame.h"

#include <string.h>
#if defined(__x86_64__)
#include <nmmintrin.h> /* the SSE4.2 crc32 instruction, used when the CPU has it */
#endif

static const uint8_t MAGIC[4] = {'M', 'C', 'B', 'F'};
enum { FLAG_VALIDITY = 1 };

_Static_assert(MCDC_FRAME_FIXED_BYTES == 4 + 2 + 2 + 4 + 4 + 8 + 4 + 4, "frame head layout");
_Static_assert(MCDC_FRAME_COL_BYTES == 1 + 1 + 2 + 4 + 4 + 4 + 8, "frame directory entry layout");
_Static_assert(MCDC_FRAME_ROWS_MAX < INT32_MAX / 8, "a frame's bitmaps and offsets fit 32 bits");

static void put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): x86-64 computes
 * it 8 bytes an instruction (SSE4.2), where zlib's CRC-32 took about a
 * tenth of a rebuild's CPU checking the sorter's spilled runs. Frames are
 * read back by the process that wrote them, but both paths give the same
 * value, so nothing depends on which one ran. */
static const uint32_t CRC32C_TABLE[256] = {
    0x00000000u, 0xF26B8303u, 0xE13B70F7u, 0x1350F3F4u, 0xC79A971Fu, 0x35F1141Cu,
    0x26A1E7E8u, 0xD4CA64EBu, 0x8AD958CFu, 0x78B2DBCCu, 0x6BE22838u, 0x9989AB3Bu,
    0x4D43CFD0u, 0xBF284CD3u, 0xAC78BF27u, 0x5E133C24u, 0x105EC76Fu, 0xE235446Cu,
    0xF165B798u, 0x030E349Bu, 0xD7C45070u, 0x25AFD373u, 0x36FF2087u, 0xC494A384u,
    0x9A879FA0u, 0x68EC1CA3u, 0x7BBCEF57u, 0x89D76C54u, 0x5D1D08BFu, 0xAF768BBCu,
    0xBC267848u, 0x4E4DFB4Bu, 0x20BD8EDEu, 0xD2D60DDDu, 0xC186FE29u, 0x33ED7D2Au,
    0xE72719C1u, 0x154C9AC2u, 0x061C6936u, 0xF477EA35u, 0xAA64D611u, 0x580F5512u,
    0x4B5FA6E6u, 0xB93425E5u, 0x6DFE410Eu, 0x9F95C20Du, 0x8CC531F9u, 0x7EAEB2FAu,
    0x30E349B1u, 0xC288CAB2u, 0xD1D83946u, 0x23B3BA45u, 0xF779DEAEu, 0x05125DADu,
    0x1642AE59u, 0xE4292D5Au, 0xBA3A117Eu, 0x4851927Du, 0x5B016189u, 0xA96AE28Au,
    0x7DA08661u, 0x8FCB0562u, 0x9C9BF696u, 0x6EF07595u, 0x417B1DBCu, 0xB3109EBFu,
    0xA0406D4Bu, 0x522BEE48u, 0x86E18AA3u, 0x748A09A0u, 0x67DAFA54u, 0x95B17957u,
    0xCBA24573u, 0x39C9C670u, 0x2A993584u, 0xD8F2B687u, 0x0C38D26Cu, 0xFE53516Fu,
    0xED03A29Bu, 0x1F682198u, 0x5125DAD3u, 0xA34E59D0u, 0xB01EAA24u, 0x42752927u,
    0x96BF4DCCu, 0x64D4CECFu, 0x77843D3Bu, 0x85EFBE38u, 0xDBFC821Cu, 0x2997011Fu,
    0x3AC7F2EBu, 0xC8AC71E8u, 0x1C661503u, 0xEE0D9600u, 0xFD5D65F4u, 0x0F36E6F7u,
    0x61C69362u, 0x93AD1061u, 0x80FDE395u, 0x72966096u, 0xA65C047Du, 0x5437877Eu,
    0x4767748Au, 0xB50CF789u, 0xEB1FCBADu, 0x197448AEu, 0x0A24BB5Au, 0xF84F3859u,
    0x2C855CB2u, 0xDEEEDFB1u, 0xCDBE2C45u, 0x3FD5AF46u, 0x7198540Du, 0x83F3D70Eu,
    0x90A324FAu, 0x62C8A7F9u, 0xB602C312u, 0x44694011u, 0x5739B3E5u, 0xA55230E6u,
    0xFB410CC2u, 0x092A8FC1u, 0x1A7A7C35u, 0xE811FF36u, 0x3CDB9BDDu, 0xCEB018DEu,
    0xDDE0EB2Au, 0x2F8B6829u, 0x82F63B78u, 0x709DB87Bu, 0x63CD4B8Fu, 0x91A6C88Cu,
    0x456CAC67u, 0xB7072F64u, 0xA457DC90u, 0x563C5F93u, 0x082F63B7u, 0xFA44E0B4u,
    0xE9141340u, 0x1B7F9043u, 0xCFB5F4A8u, 0x3DDE77ABu, 0x2E8E845Fu, 0xDCE5075Cu,
    0x92A8FC17u, 0x60C37F14u, 0x73938CE0u, 0x81F80FE3u, 0x55326B08u, 0xA759E80Bu,
    0xB4091BFFu, 0x466298FCu, 0x1871A4D8u, 0xEA1A27DBu, 0xF94AD42Fu, 0x0B21572Cu,
    0xDFEB33C7u, 0x2D80B0C4u, 0x3ED04330u, 0xCCBBC033u, 0xA24BB5A6u, 0x502036A5u,
    0x4370C551u, 0xB11B4652u, 0x65D122B9u, 0x97BAA1BAu, 0x84EA524Eu, 0x7681D14Du,
    0x2892ED69u, 0xDAF96E6Au, 0xC9A99D9Eu, 0x3BC21E9Du, 0xEF087A76u, 0x1D63F975u,
    0x0E330A81u, 0xFC588982u, 0xB21572C9u, 0x407EF1CAu, 0x532E023Eu, 0xA145813Du,
    0x758FE5D6u, 0x87E466D5u, 0x94B49521u, 0x66DF1622u, 0x38CC2A06u, 0xCAA7A905u,
    0xD9F75AF1u, 0x2B9CD9F2u, 0xFF56BD19u, 0x0D3D3E1Au, 0x1E6DCDEEu, 0xEC064EEDu,
    0xC38D26C4u, 0x31E6A5C7u, 0x22B65633u, 0xD0DDD530u, 0x0417B1DBu, 0xF67C32D8u,
    0xE52CC12Cu, 0x1747422Fu, 0x49547E0Bu, 0xBB3FFD08u, 0xA86F0EFCu, 0x5A048DFFu,
    0x8ECEE914u, 0x7CA56A17u, 0x6FF599E3u, 0x9D9E1AE0u, 0xD3D3E1ABu, 0x21B862A8u,
    0x32E8915Cu, 0xC083125Fu, 0x144976B4u, 0xE622F5B7u, 0xF5720643u, 0x07198540u,
    0x590AB964u, 0xAB613A67u, 0xB831C993u, 0x4A5A4A90u, 0x9E902E7Bu, 0x6CFBAD78u,
    0x7FAB5E8Cu, 0x8DC0DD8Fu, 0xE330A81Au, 0x115B2B19u, 0x020BD8EDu, 0xF0605BEEu,
    0x24AA3F05u, 0xD6C1BC06u, 0xC5914FF2u, 0x37FACCF1u, 0x69E9F0D5u, 0x9B8273D6u,
    0x88D28022u, 0x7AB90321u, 0xAE7367CAu, 0x5C18E4C9u, 0x4F48173Du, 0xBD23943Eu,
    0xF36E6F75u, 0x0105EC76u, 0x12551F82u, 0xE03E9C81u, 0x34F4F86Au, 0xC69F7B69u,
    0xD5CF889Du, 0x27A40B9Eu, 0x79B737BAu, 0x8BDCB4B9u, 0x988C474Du, 0x6AE7C44Eu,
    0xBE2DA0A5u, 0x4C4623A6u, 0x5F16D052u, 0xAD7D5351u,
};

static uint32_t crc32c_bytes(uint32_t c, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) c = CRC32C_TABLE[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t c, const uint8_t *p,
                                                                size_t n) {
    uint64_t w = c;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        w = _mm_crc32_u64(w, v);
    }
    uint32_t c32 = (uint32_t)w;
    for (; n > 0; p++, n--) c32 = _mm_crc32_u8(c32, *p);
    return c32;
}
#endif

uint32_t mcdc_frame_crc(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) return ~crc32c_sse42(c, p, n);
#endif
    return ~crc32c_bytes(c, p, n);
}

static bool is_var(const mcdc_field *f) {
    return f->type == MCDC_TYPE_UTF8 || f->type == MCDC_TYPE_BINARY;
}

/* The directory's type detail of a field: what else must match. */
static int32_t type_param(const mcdc_field *f) {
    if (f->type == MCDC_TYPE_FIXED_BINARY) return f->byte_width;
    if (f->type == MCDC_TYPE_DECIMAL) return f->precision * 256 + f->scale;
    return 0;
}

/* Bytes per value of a directory's type (and detail), without a schema:
 * or bits (bool), var (utf8/binary: offsets and data), bad (no such type,
 * or a fixed binary of no width). */
enum { WIDTH_BITS = -1, WIDTH_VAR = -2, WIDTH_BAD = -3 };
static int64_t wire_width(uint8_t type, int32_t param) {
    switch (type) {
    case MCDC_TYPE_BOOL: return WIDTH_BITS;
    case MCDC_TYPE_INT8: return 1;
    case MCDC_TYPE_INT16: return 2;
    case MCDC_TYPE_INT32: case MCDC_TYPE_FLOAT: case MCDC_TYPE_DATE32: return 4;
    case MCDC_TYPE_INT64: case MCDC_TYPE_DOUBLE: case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: return 8;
    case MCDC_TYPE_DECIMAL: return 16;
    case MCDC_TYPE_UTF8: case MCDC_TYPE_BINARY: return WIDTH_VAR;
    case MCDC_TYPE_FIXED_BINARY: return param > 0 && param <= (1 << 20) ? param : WIDTH_BAD;
    default: return WIDTH_BAD;
    }
}

/* Bytes of the values (fixed width) or offsets (utf8/binary) of rows rows. */
static int64_t main_bytes(const mcdc_field *f, int64_t rows) {
    if (is_var(f)) return (rows + 1) * 4;
    if (f->type == MCDC_TYPE_BOOL) return (rows + 7) / 8;
    return (int64_t)mcdc_type_width(f) * rows;
}

static int corrupt(mcdc_error *err, const char *what, const mcdc_field *f) {
    if (f)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "frame column '%s' (%s): %s", f->name,
                              mcdc_type_name(f->type), what);
    return mcdc_error_set(err, MCDC_E_CORRUPT, "frame: %s", what);
}


/* A column's rows [row0, row0 + rows) as the frame holds them: its NULLs,
 * and its buffers' bytes: validity (only with NULLs), values or offsets,
 * data. Offsets of a slice that does not start at 0 are rebased into
 * rebased ((rows + 1) entries); a column of no rows may have no offsets
 * yet (its one offset is 0). */
typedef struct {
    int64_t nulls;
    const uint8_t *p[3];
    size_t n[3];
} col_bytes;

static void col_slice(const mcdc_column *c, int64_t row0, int64_t rows, int32_t *rebased,
                      col_bytes *o) {
    const mcdc_field *f = c->field;
    o->nulls = c->null_count ? mcdc_bits_unset(c->validity + row0 / 8, rows) : 0;
    o->p[0] = c->null_count ? c->validity + row0 / 8 : NULL;
    o->n[0] = o->nulls ? (size_t)(rows + 7) / 8 : 0;
    o->n[1] = (size_t)main_bytes(f, rows);
    o->p[2] = NULL;
    o->n[2] = 0;
    if (!is_var(f)) {
        o->p[1] = f->type == MCDC_TYPE_BOOL ? c->values + row0 / 8
                                            : c->values + row0 * mcdc_type_width(f);
        return;
    }
    int32_t base = c->offsets ? c->offsets[row0] : 0;
    if (base == 0 && c->offsets) {
        o->p[1] = (const uint8_t *)(c->offsets + row0);
    } else {
        for (int64_t r = 0; r <= rows; r++) rebased[r] = c->offsets ? c->offsets[row0 + r] - base : 0;
        o->p[1] = (const uint8_t *)rebased;
    }
    o->p[2] = c->data ? c->data + base : NULL;
    o->n[2] = c->offsets ? (size_t)(c->offsets[row0 + rows] - base) : 0;
}

int mcdc_frame_write(const mcdc_batch *b, int32_t first, int32_t n_cols, int64_t row0,
                     int64_t rows, mcdc_frame_sink sink, void *ctx, mcdc_error *err) {
    MCDC_ASSERT(first >= 0 && n_cols >= 0 && first + n_cols <= b->schema->n_fields);
    MCDC_ASSERT(row0 >= 0 && row0 % 8 == 0 && rows >= 0 && rows <= MCDC_FRAME_ROWS_MAX);
    size_t head_bytes = mcdc_frame_head_bytes(n_cols);
    uint8_t *head = mcdc_calloc(1, head_bytes);
    int32_t *rebased = mcdc_malloc((size_t)(rows + 1) * sizeof *rebased);
    if (head == NULL || rebased == NULL) {
        mcdc_free(head);
        mcdc_free(rebased);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory writing a frame");
    }
    uint64_t body = 0;
    uint32_t crc = 0;
    for (int32_t i = 0; i < n_cols; i++) {
        const mcdc_column *c = &b->columns[first + i];
        const mcdc_field *f = c->field;
        MCDC_ASSERT(row0 + rows <= c->length && (c->null_count == 0 || c->validity != NULL));
        col_bytes cb;
        col_slice(c, row0, rows, rebased, &cb);
        uint8_t *d = head + MCDC_FRAME_FIXED_BYTES + (size_t)i * MCDC_FRAME_COL_BYTES;
        d[0] = (uint8_t)f->type;
        d[1] = cb.nulls ? FLAG_VALIDITY : 0;
        put32(d + 4, (uint32_t)type_param(f));
        put32(d + 8, (uint32_t)cb.nulls);
        put64(d + 16, (uint64_t)cb.n[2]);
        for (int k = 0; k < 3; k++) {
            crc = mcdc_frame_crc(crc, cb.p[k], cb.n[k]);
            body += cb.n[k];
        }
    }
    memcpy(head, MAGIC, 4);
    put16(head + 4, MCDC_FRAME_VERSION);
    put32(head + 8, (uint32_t)n_cols);
    put32(head + 12, (uint32_t)rows);
    put64(head + 16, body);
    put32(head + 24, crc);
    put32(head + 28, mcdc_frame_crc(mcdc_frame_crc(0, head, 28), head + MCDC_FRAME_FIXED_BYTES,
                            head_bytes - MCDC_FRAME_FIXED_BYTES));
    int rc = sink(ctx, head, head_bytes, err);
    mcdc_free(head);
    for (int32_t i = 0; rc == MCDC_OK && i < n_cols; i++) {
        col_bytes cb;
        col_slice(&b->columns[first + i], row0, rows, rebased, &cb);
        for (int k = 0; rc == MCDC_OK && k < 3; k++)
            if (cb.n[k]) rc = sink(ctx, cb.p[k], cb.n[k], err);
    }
    mcdc_free(rebased);
    return rc;
}

static int buf_sink(void *ctx, const void *p, size_t n, mcdc_error *err) {
    return mcdc_buf_append(ctx, p, n, err);
}

int mcdc_frame_append(mcdc_buf *out, const mcdc_batch *b, int32_t first, int32_t n_cols,
                      mcdc_error *err) {
    int64_t rows = n_cols ? b->columns[first].length : 0;
    return mcdc_frame_write(b, first, n_cols, 0, rows, buf_sink, out, err);
}

int mcdc_frame_head(const uint8_t *head, int32_t n_cols, int64_t *rows, int64_t *body_bytes,
                    mcdc_error *err) {
    *rows = *body_bytes = 0;
    size_t head_bytes = mcdc_frame_head_bytes(n_cols);
    if (memcmp(head, MAGIC, 4) != 0) return corrupt(err, "no frame starts here (bad magic)", NULL);
    if (get16(head + 4) != MCDC_FRAME_VERSION)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "frame: version %u, this build reads %d",
                              get16(head + 4), MCDC_FRAME_VERSION);
    if (get32(head + 8) != (uint32_t)n_cols)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "frame: %u columns where %d were written",
                              get32(head + 8), (int)n_cols);
    uint32_t want = mcdc_frame_crc(mcdc_frame_crc(0, head, 28), head + MCDC_FRAME_FIXED_BYTES,
                           head_bytes - MCDC_FRAME_FIXED_BYTES);
    if (get32(head + 28) != want) return corrupt(err, "the head's checksum does not match", NULL);
    uint32_t r = get32(head + 12);
    uint64_t body = get64(head + 16);
    if (r > MCDC_FRAME_ROWS_MAX)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "frame: %u rows, more than the %d a frame holds",
                              r, MCDC_FRAME_ROWS_MAX);
    /* each of a column's three buffers is at most a batch's bytes */
    if (body > (uint64_t)MCDC_BATCH_BYTES_MAX * 3 * (uint64_t)n_cols)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "frame: a body of %llu bytes, past any batch",
                              (unsigned long long)body);
    /* the buffers the directory describes fill the body exactly: a reader
     * sizes a batch by rows only once the body holds them */
    uint64_t sum = 0;
    for (int32_t i = 0; i < n_cols; i++) {
        const uint8_t *d = head + MCDC_FRAME_FIXED_BYTES + (size_t)i * MCDC_FRAME_COL_BYTES;
        int64_t w = wire_width(d[0], (int32_t)get32(d + 4));
        uint64_t data = get64(d + 16);
        if (w == WIDTH_BAD)
            return mcdc_error_set(err, MCDC_E_CORRUPT, "frame: column %d has no type this build knows (%u)",
                                  (int)i, (unsigned)d[0]);
        if (data > body)
            return mcdc_error_set(err, MCDC_E_CORRUPT, "frame: column %d has more data than the body",
                                  (int)i);
        sum += (d[1] & FLAG_VALIDITY ? (r + 7) / 8 : 0) + data +
               (uint64_t)(w == WIDTH_VAR ? ((int64_t)r + 1) * 4 : w == WIDTH_BITS ? ((int64_t)r + 7) / 8
                                                                                  : w * r);
        if (sum > body) break;
    }
    if (sum != body)
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "frame: its columns' buffers do not fill its body of %llu bytes",
                              (unsigned long long)body);
    *rows = r;
    *body_bytes = (int64_t)body;
    return MCDC_OK;
}

/* Bits [rows, 8 * bytes) of a bitmap: padding, set to v so that the column
 * reads as one built by appends (a fresh validity byte is all ones, fresh
 * values all zeros). */
static void pad_bits(uint8_t *bits, int64_t rows, bool v) {
    if (rows & 7) {
        uint8_t keep = (uint8_t)((1u << (rows & 7)) - 1);
        uint8_t *last = &bits[rows >> 3];
        *last = v ? (uint8_t)(*last | ~keep) : (uint8_t)(*last & keep);
    }
}

/* Decodes one column of rows rows from body[*at..] per its directory
 * entry d into the empty column c. */
static int decode_col(mcdc_column *c, const uint8_t *d, int64_t rows, const uint8_t *body,
                      size_t body_bytes, size_t *at, mcdc_error *err) {
    const mcdc_field *f = c->field;
    if (c->length != 0) return corrupt(err, "decoded into a column that is not empty", f);
    if (d[0] != (uint8_t)f->type || (int32_t)get32(d + 4) != type_param(f))
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "frame column '%s' (%s): the frame holds type %u (detail %d) here",
                              f->name, mcdc_type_name(f->type), (unsigned)d[0], (int)get32(d + 4));
    if ((d[1] & ~FLAG_VALIDITY) != 0 || get16(d + 2) != 0 || get32(d + 12) != 0)
        return corrupt(err, "unknown flags in its directory entry", f);
    bool has_validity = d[1] & FLAG_VALIDITY;
    int64_t nulls = get32(d + 8);
    uint64_t data = get64(d + 16);
    if (has_validity != (nulls > 0) || nulls > rows)
        return corrupt(err, "its NULL count does not fit its rows and bitmap", f);
    if (nulls && !f->nullable) return corrupt(err, "NULLs in a NOT NULL column", f);
    if (!is_var(f) && data != 0) return corrupt(err, "data bytes for a fixed-width type", f);
    size_t vb = has_validity ? (size_t)(rows + 7) / 8 : 0, mb = (size_t)main_bytes(f, rows);
    size_t left = body_bytes - *at;
    if (vb > left || mb > left - vb || data > left - vb - mb)
        return corrupt(err, "its buffers run past the frame's body", f);
    const uint8_t *p = body + *at;
    int64_t db = (int64_t)data;
    if (is_var(f)) {
        /* offsets from 0, non-decreasing, ending at the data's length */
        int32_t prev = 0, o;
        memcpy(&o, p + vb, 4);
        if (o != 0) return corrupt(err, "its first offset is not 0", f);
        for (int64_t r = 1; r <= rows; r++) {
            memcpy(&o, p + vb + 4 * r, 4);
            if (o < prev) return corrupt(err, "its offsets decrease", f);
            prev = o;
        }
        if ((int64_t)prev != db) return corrupt(err, "its last offset is not its data's length", f);
    }
    if (has_validity && mcdc_bits_unset(p, rows) != nulls)
        return corrupt(err, "its bitmap's NULLs are not its NULL count", f);
    int rc = mcdc_col_reserve(c, rows, is_var(f) ? db : 0, err);
    if (rc == MCDC_OK && has_validity) rc = mcdc_col_ensure_validity(c, err);
    if (rc) return rc;
    if (has_validity) {
        memcpy(c->validity, p, vb);
        pad_bits(c->validity, rows, true);
    }
    if (is_var(f)) {
        memcpy(c->offsets, p + vb, mb);
        if (db) memcpy(c->data, p + vb + mb, (size_t)db);
        c->data_len = db;
    } else if (mb) {
        memcpy(c->values, p + vb, mb);
        if (f->type == MCDC_TYPE_BOOL) pad_bits(c->values, rows, false);
    }
    c->length = rows;
    c->null_count = nulls;
    *at += vb + mb + (size_t)db;
    return MCDC_OK;
}

int mcdc_frame_decode(mcdc_batch *b, int32_t first, int32_t n_cols, const uint8_t *head,
                      const uint8_t *body, size_t body_bytes, mcdc_error *err) {
    MCDC_ASSERT(first >= 0 && n_cols >= 0 && first + n_cols <= b->schema->n_fields);
    int64_t rows, want;
    int rc = mcdc_frame_head(head, n_cols, &rows, &want, err);
    if (rc) return rc;
    if ((uint64_t)want != body_bytes)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "frame: a body of %zu bytes where the head says %lld",
                              body_bytes, (long long)want);
    if (mcdc_frame_crc(0, body, body_bytes) != get32(head + 24))
        return corrupt(err, "the body's checksum does not match", NULL);
    size_t at = 0;
    for (int32_t i = 0; rc == MCDC_OK && i < n_cols; i++)
        rc = decode_col(&b->columns[first + i],
                        head + MCDC_FRAME_FIXED_BYTES + (size_t)i * MCDC_FRAME_COL_BYTES, rows,
                        body, body_bytes, &at, err);
    if (rc == MCDC_OK && at != body_bytes)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "frame: %zu bytes after its last column", body_bytes - at);
    return rc;
}
