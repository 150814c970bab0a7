/* Unit tests of the native TDS client over hand-built reply streams: every
 * type, NULLs (ROW and NBCROW), PLP chunks, tokens split across packets at
 * every offset, lying lengths, truncated streams, server errors, casts, and
 * the PRELOGIN/LOGIN7 builders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_cdc_client.h"
#include "mcdc_driver.h"
#include "mcdc_sql_types.h"
#include "mcdc_tds_proto.h"
#include "mcdc_test.h"

/* ---- a reply builder ------------------------------------------------------------ */
typedef struct {
    uint8_t b[16384];
    size_t n;
} tb;
static void u8(tb *t, unsigned v) { t->b[t->n++] = (uint8_t)v; }
static void u16(tb *t, unsigned v) { u8(t, v & 0xFF); u8(t, (v >> 8) & 0xFF); }
static void u32(tb *t, uint32_t v) { u16(t, v & 0xFFFF); u16(t, v >> 16); }
static void u64(tb *t, uint64_t v) { u32(t, (uint32_t)v); u32(t, (uint32_t)(v >> 32)); }
static void raw(tb *t, const void *p, size_t n) { memcpy(t->b + t->n, p, n); t->n += n; }
/* ASCII as UTF-16LE */
static void w16(tb *t, const char *s) { for (; *s; s++) u16(t, (uint8_t)*s); }
static void bname(tb *t, const char *s) { u8(t, (unsigned)strlen(s)); w16(t, s); }
static void col(tb *t, uint8_t type) { u32(t, 0); u16(t, 0x0009); u8(t, type); }
static const uint8_t COLL[5] = {0x09, 0x04, 0xD0, 0x00, 0x34};
static void done(tb *t, unsigned status, uint64_t rows) {
    u8(t, TDS_TOK_DONE); u16(t, status); u16(t, 0xC1); u64(t, rows);
}
static void error_tok(tb *t, int number, int klass, const char *msg) {
    tb m = {{0}, 0};
    u32(&m, (uint32_t)number); u8(&m, 1); u8(&m, (unsigned)klass);
    u16(&m, (unsigned)strlen(msg)); w16(&m, msg);
    bname(&m, "sim"); bname(&m, ""); u32(&m, 1);
    u8(t, TDS_TOK_ERROR); u16(t, (unsigned)m.n); raw(t, m.b, m.n);
}

/* Splits a payload into reply packets of psize bytes (header included). */
static size_t packetize(uint8_t *out, const uint8_t *p, size_t n, size_t psize, bool eom) {
    size_t o = 0, off = 0, room = psize - 8;
    do {
        size_t k = n - off < room ? n - off : room;
        bool last = off + k == n;
        out[o] = TDS_PKT_REPLY; out[o + 1] = (last && eom) ? 1 : 0;
        out[o + 2] = (uint8_t)((k + 8) >> 8); out[o + 3] = (uint8_t)(k + 8);
        out[o + 4] = 0; out[o + 5] = 51; out[o + 6] = 1; out[o + 7] = 0;
        memcpy(out + o + 8, p + off, k);
        o += k + 8;
        off += k;
    } while (off < n);
    return o;
}

/* Text of a cell, for comparisons. */
static void cell(char *out, size_t cap, const mcdc_column *c, int64_t i) {
    if (!mcdc_col_is_valid(c, i)) { snprintf(out, cap, "NULL"); return; }
    switch (c->field->type) {
    case MCDC_TYPE_UTF8:
        snprintf(out, cap, "'%.*s'", (int)(c->offsets[i + 1] - c->offsets[i]),
                 (const char *)c->data + c->offsets[i]);
        return;
    case MCDC_TYPE_BINARY: {
        size_t o = (size_t)snprintf(out, cap, "0x");
        for (int32_t k = c->offsets[i]; k < c->offsets[i + 1] && o + 3 < cap; k++)
            o += (size_t)snprintf(out + o, cap - o, "%02X", c->data[k]);
        return;
    }
    case MCDC_TYPE_BOOL: snprintf(out, cap, "%d", (c->values[i >> 3] >> (i & 7)) & 1); return;
    case MCDC_TYPE_INT16: { int16_t v; memcpy(&v, c->values + i * 2, 2); snprintf(out, cap, "%d", v); return; }
    case MCDC_TYPE_INT32: case MCDC_TYPE_DATE32: { int32_t v; memcpy(&v, c->values + i * 4, 4); snprintf(out, cap, "%d", v); return; }
    case MCDC_TYPE_FLOAT: { float v; memcpy(&v, c->values + i * 4, 4); snprintf(out, cap, "%g", (double)v); return; }
    case MCDC_TYPE_DOUBLE: { double v; memcpy(&v, c->values + i * 8, 8); snprintf(out, cap, "%g", v); return; }
    case MCDC_TYPE_DECIMAL: { int64_t lo, hi; memcpy(&lo, c->values + i * 16, 8); memcpy(&hi, c->values + i * 16 + 8, 8);
        snprintf(out, cap, "%lld/%lld", (long long)lo, (long long)hi); return; }
    default: { int64_t v; memcpy(&v, c->values + i * 8, 8); snprintf(out, cap, "%lld", (long long)v); return; }
    }
}
static void dump(char *out, size_t cap, const mcdc_batch *b) {
    size_t o = 0;
    out[0] = 0;
    for (int64_t r = 0; r < b->rows; r++)
        for (int32_t i = 0; i < b->schema->n_fields && o + 2 < cap; i++) {
            cell(out + o, cap - o, &b->columns[i], r);
            o += strlen(out + o);
            o += (size_t)snprintf(out + o, cap - o, "%s", i + 1 < b->schema->n_fields ? "|" : "\n");
        }
}

/* Runs one exec over the packets and reads every row into one batch (dump
 * into text). Returns the first failing status. */
static int run(const uint8_t *pk, size_t n, char *text, size_t cap, int64_t per_fetch,
               mcdc_error *err) {
    mcdc_conn *c = NULL;
    text[0] = 0;
    int rc = mcdc_tds_conn_open_memory(&c, pk, n, err);
    if (rc != MCDC_OK) return rc;
    mcdc_result *r = NULL;
    rc = mcdc_conn_exec(&r, c, "SELECT x", NULL, 0, err);
    if (rc == MCDC_OK) {
        mcdc_batch *b = NULL;
        rc = mcdc_batch_create(&b, (mcdc_schema *)mcdc_result_schema(r), 4, err);
        int64_t got = 0;
        do {
            if (rc == MCDC_OK) rc = mcdc_result_fetch(r, b, 0, per_fetch, 0, &got, err);
        } while (rc == MCDC_OK && got > 0);
        if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
        if (rc == MCDC_OK) rc = mcdc_batch_validate(b, err);
        if (rc == MCDC_OK) dump(text, cap, b);
        mcdc_batch_free(b);
        mcdc_result_free(r);
    }
    mcdc_conn_close(c);
    return rc;
}

static bool same_text(const char *got, const char *want) {
    if (strcmp(got, want) == 0) return true;
    fprintf(stderr, "got:\n%s\nwant:\n%s\n", got, want);
    return false;
}

/* ---- the all-types reply ---------------------------------------------------------- */
/* Row 1's value of column i (all_types), on the wire. */
static void value(tb *t, int i) {
    switch (i) {
    case 0: u32(t, 7); return;
    case 1: u8(t, 1); u8(t, 255); return;
    case 2: u8(t, 8); u64(t, (uint64_t)-5); return;
    case 3: u8(t, 1); u8(t, 1); return;
    case 4: u8(t, 8); { double d = 1.5; raw(t, &d, 8); } return;
    case 5: u8(t, 9); u8(t, 0); u64(t, 123456789); return; /* -12345.6789 */
    case 6: u8(t, 8); u32(t, 0); u32(t, 12345); return; /* 1.2345 */
    case 7: u8(t, 8); u32(t, 1); u32(t, 300); return; /* 1900-01-02 00:00:01 */
    case 8: u8(t, 3); u16(t, 719162 & 0xFFFF); u8(t, 719162 >> 16); return;
    case 9: u8(t, 5); u32(t, 123456789); u8(t, 0); return;
    case 10: u8(t, 7); u32(t, 1000); u16(t, 719162 & 0xFFFF); u8(t, 719162 >> 16); return;
    case 11: u8(t, 8); u16(t, 3600); u8(t, 0); u16(t, 719162 & 0xFFFF); u8(t, 719162 >> 16); u16(t, 60); return;
    case 12: u8(t, 16); { static const uint8_t g[16] = {0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF}; raw(t, g, 16); } return;
    case 13: /* "Zoë😀" + an unpaired surrogate */
        u16(t, 14); u16(t, 'Z'); u16(t, 'o'); u16(t, 0xEB); u16(t, 0xD83D); u16(t, 0xDE00); u16(t, 0xD800); u16(t, 'x');
        return;
    case 14: u16(t, 7); raw(t, "caf\xe9 \x80!", 7); return;
    case 15: u16(t, 2); u8(t, 1); u8(t, 2); return;
    case 16: u64(t, 8); u32(t, 4); w16(t, "ab"); u32(t, 4); w16(t, "cd"); u32(t, 0); return;
    case 17: u64(t, TDS_PLP_UNKNOWN); u32(t, 0); return;
    default: return;
    }
}

static void all_types_meta(tb *t) {
    u8(t, TDS_TOK_COLMETADATA);
    u16(t, 18);
    col(t, TDS_INT4); bname(t, "i4");
    col(t, TDS_INTN); u8(t, 1); bname(t, "ti");
    col(t, TDS_INTN); u8(t, 8); bname(t, "bi");
    col(t, TDS_BITN); u8(t, 1); bname(t, "bt");
    col(t, TDS_FLTN); u8(t, 8); bname(t, "f8");
    col(t, TDS_DECIMALN); u8(t, 9); u8(t, 18); u8(t, 4); bname(t, "dec");
    col(t, TDS_MONEYN); u8(t, 8); bname(t, "m");
    col(t, TDS_DATETIMN); u8(t, 8); bname(t, "dt");
    col(t, TDS_DATEN); bname(t, "d");
    col(t, TDS_TIMEN); u8(t, 7); bname(t, "tm");
    col(t, TDS_DATETIME2N); u8(t, 3); bname(t, "dt2");
    col(t, TDS_DATETIMEOFFSETN); u8(t, 0); bname(t, "dto");
    col(t, TDS_GUID); u8(t, 16); bname(t, "g");
    col(t, TDS_NVARCHAR); u16(t, 100); raw(t, COLL, 5); bname(t, "nv");
    col(t, TDS_BIGVARCHAR); u16(t, 50); raw(t, COLL, 5); bname(t, "vc");
    col(t, TDS_BIGVARBINARY); u16(t, 16); bname(t, "vb");
    col(t, TDS_NVARCHAR); u16(t, 0xFFFF); raw(t, COLL, 5); bname(t, "nvm");
    col(t, TDS_BIGVARBINARY); u16(t, 0xFFFF); bname(t, "vbm");
}
static void all_types(tb *t) {
    all_types_meta(t);
    /* row 1: values */
    u8(t, TDS_TOK_ROW);
    for (int i = 0; i < 18; i++) value(t, i);
    /* row 2: NBCROW, every column NULL */
    u8(t, TDS_TOK_NBCROW); u8(t, 0xFF); u8(t, 0xFF); u8(t, 0x03);
    /* row 3: ROW with NULL encodings (i4 cannot be NULL) */
    u8(t, TDS_TOK_ROW);
    u32(t, (uint32_t)-1);
    for (int i = 0; i < 12; i++) u8(t, 0);
    u16(t, 0xFFFF); u16(t, 0xFFFF); u16(t, 0xFFFF);
    u64(t, TDS_PLP_NULL); u64(t, TDS_PLP_NULL);
    /* row 4: NBCROW with some values: i4 and nv present */
    u8(t, TDS_TOK_NBCROW); u8(t, 0xFE); u8(t, 0xDF); u8(t, 0x03);
    u32(t, 9);
    u16(t, 0);
    done(t, TDS_DONE_COUNT, 4);
}

static const char ALL_EXPECTED[] =
    "7|255|-5|1|1.5|-123456789/-1|12345/0|-2208902399000000|0|'00:00:12.3456789'|1000000|"
    "3600000000|'00112233-4455-6677-8899-AABBCCDDEEFF'|'Zo\xc3\xab\xf0\x9f\x98\x80\xef\xbf\xbdx'|"
    "'caf\xc3\xa9 \xe2\x82\xac!'|0x0102|'abcd'|0x\n"
    "NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL\n"
    "-1|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL\n"
    "9|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|''|NULL|NULL|NULL|NULL\n";

TEST(tds_native_all_types_and_nulls) {
    static tb t;
    t.n = 0;
    all_types(&t);
    static uint8_t pk[65536];
    size_t n = packetize(pk, t.b, t.n, 4096, true);
    char text[4096];
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = run(pk, n, text, sizeof text, 1000, &e);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK(same_text(text, ALL_EXPECTED));
    /* MCDC_TDS_WRITE_SEEDS=dir: the fuzz seeds of fuzz_tds_client (control
     * byte, then packets or a payload; see fuzz/fuzz_tds_client.c). */
    const char *dir = getenv("MCDC_TDS_WRITE_SEEDS");
    if (dir) {
        static const uint8_t ctls[][2] = {{0x01, 31}, {0x03, 200}, {0x0D, 64}, {0x17, 255}};
        char path[512];
        for (size_t k = 0; k < sizeof ctls / sizeof ctls[0]; k++) {
            snprintf(path, sizeof path, "%s/all_types_payload_%zu", dir, k);
            FILE *f = fopen(path, "wb");
            if (f) { fwrite(ctls[k], 1, 2, f); fwrite(t.b, 1, t.n, f); fclose(f); }
        }
        snprintf(path, sizeof path, "%s/all_types_packets", dir);
        FILE *f = fopen(path, "wb");
        if (f) { fputc(0x04, f); fwrite(pk, 1, n, f); fclose(f); }
    }
}

TEST(tds_native_tokens_split_at_every_packet_size) {
    static tb t;
    t.n = 0;
    all_types(&t);
    static uint8_t pk[262144];
    char text[4096];
    int bad = 0;
    for (size_t ps = 9; ps <= 80; ps++) {
        size_t n = packetize(pk, t.b, t.n, ps, true);
        mcdc_error e = MCDC_ERROR_INIT;
        for (int64_t per = 1; per <= 1000; per *= 1000) {
            int rc = run(pk, n, text, sizeof text, per, &e);
            if (rc != MCDC_OK || strcmp(text, ALL_EXPECTED) != 0) {
                if (!bad) fprintf(stderr, "packet size %zu, fetch %lld: rc %d %s\n%s", ps, (long long)per, rc, e.message, text);
                bad++;
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
}

/* NULLs at every position: NBCROW bitmaps with one NULL, all but one,
 * whole bitmap bytes with and without NULLs and pseudo-random ones, and ROW
 * with each nullable column's NULL encoding; each row reads back as row 1
 * of all_types with those cells NULL, at packet sizes that split the
 * bitmaps and values at every offset. */
TEST(tds_native_nulls_at_every_position) {
    enum { NC = 18 };
    char cells[NC][128]; /* row 1 of ALL_EXPECTED, cell by cell */
    const char *p = ALL_EXPECTED;
    for (int i = 0; i < NC; i++) {
        size_t k = strcspn(p, "|\n");
        snprintf(cells[i], sizeof cells[i], "%.*s", (int)k, p);
        p += k + 1;
    }
    CHECK(strcmp(cells[NC - 1], "0x") == 0 && strcmp(cells[0], "7") == 0);
    uint32_t masks[80];
    int nm = 0;
    for (int i = 0; i < NC; i++) masks[nm++] = 1u << i;
    for (int i = 0; i < NC; i++) masks[nm++] = 0x3FFFFu & ~(1u << i);
    static const uint32_t WHOLE[] = {0, 0x3FFFF, 0xFF, 0xFF00, 0x30000, 0x300FF, 0xFFFF, 0x2FF01};
    for (size_t i = 0; i < sizeof WHOLE / sizeof WHOLE[0]; i++) masks[nm++] = WHOLE[i];
    uint32_t x = 12345;
    while (nm < 60) {
        x = x * 1103515245u + 12345u;
        masks[nm++] = (x >> 8) & 0x3FFFFu;
    }
    static tb t;
    t.n = 0;
    all_types_meta(&t);
    static char want[32768];
    size_t w = 0;
    int rows = 0;
    for (int r = 0; r < nm; r++) {
        u8(&t, TDS_TOK_NBCROW);
        u8(&t, masks[r] & 0xFF); u8(&t, (masks[r] >> 8) & 0xFF); u8(&t, masks[r] >> 16);
        for (int i = 0; i < NC; i++) {
            bool null = (masks[r] >> i) & 1;
            if (!null) value(&t, i);
            w += (size_t)snprintf(want + w, sizeof want - w, "%s%s", null ? "NULL" : cells[i],
                                  i + 1 < NC ? "|" : "\n");
        }
        rows++;
    }
    for (int n = 1; n < NC; n++) { /* ROW, column n NULL (i4 has no NULL) */
        u8(&t, TDS_TOK_ROW);
        for (int i = 0; i < NC; i++) {
            if (i != n) value(&t, i);
            else if (i <= 12) u8(&t, 0);
            else if (i <= 15) u16(&t, 0xFFFF);
            else u64(&t, TDS_PLP_NULL);
            w += (size_t)snprintf(want + w, sizeof want - w, "%s%s", i == n ? "NULL" : cells[i],
                                  i + 1 < NC ? "|" : "\n");
        }
        rows++;
    }
    done(&t, TDS_DONE_COUNT, (uint64_t)rows);
    CHECK(t.n < sizeof t.b && w + 1 < sizeof want);
    static uint8_t pk[262144];
    static char text[32768];
    int bad = 0, runs = 0;
    for (size_t ps = 9; ps <= 4096; ps = ps < 72 ? ps + 1 : ps * 4) {
        size_t n = packetize(pk, t.b, t.n, ps, true);
        for (int64_t per = 7; per <= 7000; per *= 1000) {
            mcdc_error e = MCDC_ERROR_INIT;
            int rc = run(pk, n, text, sizeof text, per, &e);
            runs++;
            if (rc != MCDC_OK || strcmp(text, want) != 0) {
                if (!bad) {
                    fprintf(stderr, "packet size %zu, fetch %lld: rc %d %s\n", ps, (long long)per, rc, e.message);
                    same_text(text, want);
                }
                bad++;
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(runs > 100);
}

/* The stream alone: a message's payload read back through mcdc_tds_need
 * in steps of 1-40 bytes, whatever the packet size and however few bytes
 * each read returns: bytes read in place and bytes gathered across packet
 * boundaries are the payload, in order; the end is found, and a token
 * past it is a protocol error. */
TEST(tds_stream_need_across_packets_and_short_reads) {
    static uint8_t payload[3000], pk[3000 * 9]; /* 1-byte packets: 9 bytes each */
    for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)(i * 7 + (i >> 8));
    static const size_t PS[] = {9, 10, 17, 64, 512, 4096};
    static const size_t CHUNK[] = {0, 1, 3, 8, 9, 100, 5000};
    int bad = 0, runs = 0;
    for (size_t a = 0; a < sizeof PS / sizeof PS[0]; a++) {
        size_t n = packetize(pk, payload, sizeof payload, PS[a], true);
        for (size_t b = 0; b < sizeof CHUNK / sizeof CHUNK[0]; b++) {
            mcdc_tds_stream s;
            mcdc_error e = MCDC_ERROR_INIT;
            if (mcdc_tds_stream_init(&s, -1, pk, n, &e) != MCDC_OK) { bad++; continue; }
            s.mem_read_max = CHUNK[b];
            mcdc_tds_begin_reply(&s);
            size_t at = 0;
            for (unsigned j = 0; at < sizeof payload; j++) {
                size_t k = 1 + (j * 13u) % 40u;
                if (k > sizeof payload - at) k = sizeof payload - at;
                bool end = true;
                if (j % 5 == 0 && (mcdc_tds_at_end(&s, &end, &e) != MCDC_OK || end)) { bad++; break; }
                if (mcdc_tds_need(&s, k, &e) != MCDC_OK ||
                    memcmp(s.buf + s.pos, payload + at, k) != 0) {
                    if (!bad) fprintf(stderr, "packet %zu, reads of %zu: at %zu (+%zu): %s\n",
                                      PS[a], CHUNK[b], at, k, e.message);
                    bad++;
                    break;
                }
                s.pos += k;
                at += k;
            }
            bool end = false;
            bad += mcdc_tds_at_end(&s, &end, &e) != MCDC_OK || !end;
            bad += mcdc_tds_need(&s, 1, &e) != MCDC_E_PROTOCOL;
            mcdc_tds_stream_free(&s);
            runs++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(runs, 42);
}

/* A reply with metadata prefix `meta`/`mn` and one ROW payload; expects rc. */
static int one_row(const uint8_t *meta, size_t mn, const uint8_t *row, size_t rn, bool eom,
                   mcdc_error *e) {
    static tb t;
    t.n = 0;
    u8(&t, TDS_TOK_COLMETADATA);
    raw(&t, meta, mn);
    u8(&t, TDS_TOK_ROW);
    raw(&t, row, rn);
    if (eom) done(&t, TDS_DONE_COUNT, 1);
    static uint8_t pk[65536];
    size_t n = packetize(pk, t.b, t.n, 512, eom);
    char text[1024];
    return run(pk, n, text, sizeof text, 100, e);
}

TEST(tds_native_lying_lengths_are_protocol_errors) {
    mcdc_error e = MCDC_ERROR_INIT;
    /* nvarchar(50) max 100 bytes, value claims 200 */
    static const uint8_t m1[] = {1, 0, 0, 0, 0, 0, 9, 0, TDS_NVARCHAR, 100, 0, 9, 4, 0xD0, 0, 0x34, 1, 'a', 0};
    static const uint8_t r1[] = {200, 0, 'a', 0};
    CHECK_EQ_INT(one_row(m1, sizeof m1, r1, sizeof r1, true, &e), MCDC_E_PROTOCOL);
    /* INTN(4) value of length 8 */
    static const uint8_t m2[] = {1, 0, 0, 0, 0, 0, 9, 0, TDS_INTN, 4, 1, 'a', 0};
    static const uint8_t r2[] = {8, 1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_EQ_INT(one_row(m2, sizeof m2, r2, sizeof r2, true, &e), MCDC_E_PROTOCOL);
    /* INTN(4) value of length 3 */
    static const uint8_t r3[] = {3, 1, 2, 3};
    CHECK_EQ_INT(one_row(m2, sizeof m2, r3, sizeof r3, true, &e), MCDC_E_PROTOCOL);
    /* PLP chunks longer than the total */
    static const uint8_t m4[] = {1, 0, 0, 0, 0, 0, 9, 0, TDS_BIGVARBINARY, 0xFF, 0xFF, 1, 'a', 0};
    static const uint8_t r4[] = {2, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0};
    CHECK_EQ_INT(one_row(m4, sizeof m4, r4, sizeof r4, true, &e), MCDC_E_PROTOCOL);
    /* unknown type in COLMETADATA */
    static const uint8_t m5[] = {1, 0, 0, 0, 0, 0, 9, 0, 0x99, 1, 'a', 0};
    CHECK_EQ_INT(one_row(m5, sizeof m5, r3, sizeof r3, true, &e), MCDC_E_PROTOCOL);
    /* decimal precision 40 */
    static const uint8_t m6[] = {1, 0, 0, 0, 0, 0, 9, 0, TDS_DECIMALN, 17, 40, 2, 1, 'a', 0};
    CHECK_EQ_INT(one_row(m6, sizeof m6, r3, sizeof r3, true, &e), MCDC_E_PROTOCOL);
    /* the message ends inside a value (EOM set) */
    static const uint8_t r7[] = {4, 1, 2};
    static tb t;
    t.n = 0;
    u8(&t, TDS_TOK_COLMETADATA);
    raw(&t, m2, sizeof m2);
    u8(&t, TDS_TOK_ROW);
    raw(&t, r7, sizeof r7);
    static uint8_t pk[1024];
    size_t n = packetize(pk, t.b, t.n, 512, true);
    char text[256];
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_E_PROTOCOL);
    /* the stream stops without EOM: the connection is lost */
    n = packetize(pk, t.b, t.n, 512, false);
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_E_TRANSIENT);
    /* a bad packet header */
    pk[0] = 0x77;
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_E_PROTOCOL);
}

TEST(tds_native_server_errors) {
    static tb t;
    static uint8_t pk[8192];
    char text[256];
    mcdc_error e = MCDC_ERROR_INIT;
    t.n = 0;
    error_tok(&t, 208, 16, "Invalid object name 'x'.");
    done(&t, TDS_DONE_ERROR, 0);
    size_t n = packetize(pk, t.b, t.n, 4096, true);
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(e.server_number, 208);
    CHECK_EQ_INT(e.server_class, 16);
    CHECK(strstr(e.message, "Invalid object name 'x'.") != NULL);
    /* rows, then an error mid-result: the fetch fails */
    t.n = 0;
    u8(&t, TDS_TOK_COLMETADATA); u16(&t, 1); col(&t, TDS_INT4); bname(&t, "a");
    u8(&t, TDS_TOK_ROW); u32(&t, 1);
    error_tok(&t, 8134, 16, "Divide by zero error encountered.");
    done(&t, TDS_DONE_ERROR, 0);
    n = packetize(pk, t.b, t.n, 4096, true);
    mcdc_error_clear(&e);
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_E_SERVER);
    CHECK_EQ_INT(e.server_number, 8134);
    /* a deadlock is transient */
    t.n = 0;
    error_tok(&t, 1205, 13, "Transaction was deadlocked.");
    done(&t, TDS_DONE_ERROR, 0);
    n = packetize(pk, t.b, t.n, 4096, true);
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_E_TRANSIENT);
}

TEST(tds_native_first_result_set_and_skipped_tokens) {
    static tb t;
    static uint8_t pk[8192];
    char text[256];
    mcdc_error e = MCDC_ERROR_INIT;
    t.n = 0;
    /* ENVCHANGE database, INFO, a DONE for SET, ORDER, then two result sets */
    u8(&t, TDS_TOK_ENVCHANGE); u16(&t, 1 + 1 + 4 + 1 + 2); u8(&t, 1); bname(&t, "ab"); bname(&t, "c");
    {
        tb m = {{0}, 0};
        u32(&m, 5701); u8(&m, 1); u8(&m, 0); u16(&m, 2); w16(&m, "hi"); bname(&m, "s"); bname(&m, ""); u32(&m, 1);
        u8(&t, TDS_TOK_INFO); u16(&t, (unsigned)m.n); raw(&t, m.b, m.n);
    }
    done(&t, TDS_DONE_MORE, 0);
    u8(&t, TDS_TOK_COLMETADATA); u16(&t, 2);
    col(&t, TDS_INTN); u8(&t, 2); bname(&t, "a");
    col(&t, TDS_BIGCHAR); u16(&t, 3); raw(&t, COLL, 5); bname(&t, "b");
    u8(&t, TDS_TOK_ORDER); u16(&t, 2); u16(&t, 1);
    u8(&t, TDS_TOK_ROW); u8(&t, 2); u16(&t, (unsigned)-2); u16(&t, 3); raw(&t, "ab ", 3);
    u8(&t, TDS_TOK_DONEINPROC); u16(&t, TDS_DONE_MORE | TDS_DONE_COUNT); u16(&t, 0); u64(&t, 1);
    u8(&t, TDS_TOK_RETURNSTATUS); u32(&t, 0);
    u8(&t, TDS_TOK_COLMETADATA); u16(&t, 1); col(&t, TDS_INT4); bname(&t, "z");
    u8(&t, TDS_TOK_ROW); u32(&t, 5);
    done(&t, TDS_DONE_COUNT, 1);
    size_t n = packetize(pk, t.b, t.n, 512, true);
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_OK);
    CHECK(same_text(text, "-2|'ab '\n"));
    /* a reply with no result set at all: zero columns, no rows */
    t.n = 0;
    done(&t, TDS_DONE_COUNT, 3);
    n = packetize(pk, t.b, t.n, 512, true);
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_OK);
    CHECK(same_text(text, ""));
}

TEST(tds_native_casts_and_schema_errors) {
    static tb t;
    static uint8_t pk[8192];
    t.n = 0;
    u8(&t, TDS_TOK_COLMETADATA); u16(&t, 3);
    col(&t, TDS_INTN); u8(&t, 4); bname(&t, "a");
    col(&t, TDS_DATEN); bname(&t, "d");
    col(&t, TDS_DECIMALN); u8(&t, 5); u8(&t, 9); u8(&t, 2); bname(&t, "x");
    u8(&t, TDS_TOK_ROW); u8(&t, 4); u32(&t, (uint32_t)-7); u8(&t, 3); u16(&t, 719163 & 0xFFFF); u8(&t, 719163 >> 16);
    u8(&t, 5); u8(&t, 1); u32(&t, 12345); /* 123.45 */
    done(&t, TDS_DONE_COUNT, 1);
    size_t n = packetize(pk, t.b, t.n, 512, true);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 4, &e), MCDC_OK);
    mcdc_schema_set(s, 0, "pad", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "a", MCDC_TYPE_DECIMAL, 12, 1, 0, true, &e);
    mcdc_schema_set(s, 2, "d", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 3, "x", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_conn *c = NULL;
    CHECK_EQ_INT(mcdc_tds_conn_open_memory(&c, pk, n, &e), MCDC_OK);
    mcdc_result *r = NULL;
    CHECK_EQ_INT(mcdc_conn_exec(&r, c, "SELECT", NULL, 0, &e), MCDC_OK);
    mcdc_batch *b = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&b, s, 4, &e), MCDC_OK);
    mcdc_col_append_int(&b->columns[0], 1, &e);
    int64_t got = 0;
    CHECK_EQ_INT(mcdc_result_fetch(r, b, 1, 10, 0, &got, &e), MCDC_OK);
    CHECK_EQ_INT((int)got, 1);
    int64_t lo;
    memcpy(&lo, b->columns[1].values, 8);
    CHECK_EQ_INT((int)lo, -70); /* -7 at scale 1 */
    int64_t us;
    memcpy(&us, b->columns[2].values, 8);
    CHECK(us == 86400000000LL);
    CHECK_EQ_INT(b->columns[3].offsets[1], 6);
    CHECK(memcmp(b->columns[3].data, "123.45", 6) == 0);
    mcdc_batch_free(b);
    mcdc_result_free(r);
    mcdc_conn_close(c);
    /* int -> boolean has no cast */
    mcdc_schema_set(s, 1, "a", MCDC_TYPE_BOOL, 0, 0, 0, true, &e);
    CHECK_EQ_INT(mcdc_tds_conn_open_memory(&c, pk, n, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_conn_exec(&r, c, "SELECT", NULL, 0, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_create(&b, s, 4, &e), MCDC_OK);
    mcdc_col_append_int(&b->columns[0], 1, &e);
    CHECK_EQ_INT(mcdc_result_fetch(r, b, 1, 10, 0, &got, &e), MCDC_E_SCHEMA);
    CHECK(strstr(e.message, "'a'") != NULL);
    mcdc_batch_free(b);
    mcdc_result_free(r);
    mcdc_conn_close(c);
    mcdc_schema_unref(s);
}

/* Casts to text (a declared utf8 column) through the canonical value text
 * (mcdc_value_text.h). The decimal and money texts are the ones the
 * decoder's own decimal_text wrote; floats are now the shortest that read
 * back (it wrote %.17g / %.9g: "0.10000000000000001", "0.100000001"). */
TEST(tds_native_text_casts_are_canonical) {
    static tb t;
    static uint8_t pk[8192];
    t.n = 0;
    u8(&t, TDS_TOK_COLMETADATA); u16(&t, 11);
    col(&t, TDS_DECIMALN); u8(&t, 17); u8(&t, 38); u8(&t, 0); bname(&t, "d38");
    col(&t, TDS_DECIMALN); u8(&t, 17); u8(&t, 38); u8(&t, 38); bname(&t, "d3838");
    col(&t, TDS_NUMERICN); u8(&t, 5); u8(&t, 9); u8(&t, 2); bname(&t, "n92");
    col(&t, TDS_MONEYN); u8(&t, 8); bname(&t, "m");
    col(&t, TDS_MONEYN); u8(&t, 4); bname(&t, "sm");
    col(&t, TDS_FLTN); u8(&t, 8); bname(&t, "f8");
    col(&t, TDS_FLTN); u8(&t, 4); bname(&t, "f4");
    col(&t, TDS_INTN); u8(&t, 8); bname(&t, "bi");
    col(&t, TDS_BIGVARBINARY); u16(&t, 16); bname(&t, "vb");
    col(&t, TDS_BITN); u8(&t, 1); bname(&t, "bt");
    col(&t, TDS_INTN); u8(&t, 1); bname(&t, "ti");
    u8(&t, TDS_TOK_ROW);
    u8(&t, 17); u8(&t, 1); u64(&t, 0x098a223fffffffffull); u64(&t, 0x4b3b4ca85a86c47aull); /* 10^38-1 */
    u8(&t, 17); u8(&t, 0); u64(&t, 0x098a223fffffffffull); u64(&t, 0x4b3b4ca85a86c47aull);
    u8(&t, 5); u8(&t, 0); u32(&t, 5);                  /* -0.05 */
    u8(&t, 8); u32(&t, 0xFFFFFFFFu); u32(&t, 0xFFFFFFFFu); /* -0.0001 */
    u8(&t, 4); u32(&t, 0x80000000u);                   /* -214748.3648 */
    u8(&t, 8); { double d = 0.1; raw(&t, &d, 8); }
    u8(&t, 4); { float f = 0.1f; raw(&t, &f, 4); }
    u8(&t, 8); u64(&t, 0x8000000000000000ull);
    u16(&t, 2); u8(&t, 0xDE); u8(&t, 0xAD);
    u8(&t, 1); u8(&t, 1);
    u8(&t, 1); u8(&t, 255);
    u8(&t, TDS_TOK_ROW); /* zeros: a negative zero on the wire has no sign */
    u8(&t, 17); u8(&t, 1); u64(&t, 0); u64(&t, 0);
    u8(&t, 17); u8(&t, 0); u64(&t, 0); u64(&t, 0);
    u8(&t, 5); u8(&t, 0); u32(&t, 0);
    u8(&t, 8); u32(&t, 0); u32(&t, 0);
    u8(&t, 4); u32(&t, 0);
    u8(&t, 8); { double d = -2.25e300; raw(&t, &d, 8); }
    u8(&t, 4); { float f = 1.5f; raw(&t, &f, 4); }
    u8(&t, 8); u64(&t, 0);
    u16(&t, 0);
    u8(&t, 1); u8(&t, 0);
    u8(&t, 1); u8(&t, 0);
    done(&t, TDS_DONE_COUNT, 2);
    size_t n = packetize(pk, t.b, t.n, 512, true);
    static const char *const WANT[2][11] = {
        {"99999999999999999999999999999999999999", "-0.99999999999999999999999999999999999999",
         "-0.05", "-0.0001", "-214748.3648", "0.1", "0.1", "-9223372036854775808", "0xDEAD", "1",
         "255"},
        {"0", "0.00000000000000000000000000000000000000", "0.00", "0.0000", "0.0000",
         "-2.25e+300", "1.5", "0", "0x", "0", "0"}};
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 11, &e), MCDC_OK);
    for (int i = 0; i < 11; i++) mcdc_schema_set(s, i, "x", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_conn *c = NULL;
    CHECK_EQ_INT(mcdc_tds_conn_open_memory(&c, pk, n, &e), MCDC_OK);
    mcdc_result *r = NULL;
    CHECK_EQ_INT(mcdc_conn_exec(&r, c, "SELECT", NULL, 0, &e), MCDC_OK);
    mcdc_batch *b = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&b, s, 4, &e), MCDC_OK);
    int64_t got = 0;
    CHECK_EQ_INT(mcdc_result_fetch(r, b, 0, 10, 0, &got, &e), MCDC_OK);
    CHECK_EQ_INT((int)got, 2);
    for (int row = 0; row < 2 && got == 2; row++)
        for (int i = 0; i < 11; i++) {
            const mcdc_column *cc = &b->columns[i];
            char v[64];
            snprintf(v, sizeof v, "%.*s", (int)(cc->offsets[row + 1] - cc->offsets[row]),
                     (const char *)cc->data + cc->offsets[row]);
            CHECK_EQ_STR(v, WANT[row][i]);
        }
    mcdc_batch_free(b);
    mcdc_result_free(r);
    mcdc_conn_close(c);
    mcdc_schema_unref(s);
}

/* ---- one type policy ------------------------------------------------------------- */
/* How SQL Server sends each type (TYPE_INFO after the type id), as MS-TDS
 * describes it: the test's own knowledge, not the table's. */
typedef enum { TI_NONE, TI_LEN1, TI_DEC, TI_SCALE, TI_CHARS, TI_BYTES, TI_XML, TI_UDT,
               TI_LONG_CHARS, TI_LONG_BYTES, TI_VARIANT } ti_kind;
static const struct {
    const char *name; /* as sp_cdc_get_captured_columns names it */
    uint8_t tds;
    ti_kind ti;
    unsigned len;
} SENT[] = {
    {"bit", TDS_BIT, TI_NONE, 0},          {"bit", TDS_BITN, TI_LEN1, 1},
    {"tinyint", TDS_INT1, TI_NONE, 0},     {"tinyint", TDS_INTN, TI_LEN1, 1},
    {"smallint", TDS_INT2, TI_NONE, 0},    {"smallint", TDS_INTN, TI_LEN1, 2},
    {"int", TDS_INT4, TI_NONE, 0},         {"int", TDS_INTN, TI_LEN1, 4},
    {"bigint", TDS_INT8, TI_NONE, 0},      {"bigint", TDS_INTN, TI_LEN1, 8},
    {"real", TDS_FLT4, TI_NONE, 0},        {"real", TDS_FLTN, TI_LEN1, 4},
    {"float", TDS_FLT8, TI_NONE, 0},       {"float", TDS_FLTN, TI_LEN1, 8},
    {"decimal", TDS_DECIMALN, TI_DEC, 17}, {"numeric", TDS_NUMERICN, TI_DEC, 17},
    {"money", TDS_MONEY, TI_NONE, 0},      {"money", TDS_MONEYN, TI_LEN1, 8},
    {"smallmoney", TDS_MONEY4, TI_NONE, 0}, {"smallmoney", TDS_MONEYN, TI_LEN1, 4},
    {"date", TDS_DATEN, TI_NONE, 0},
    {"datetime", TDS_DATETIME, TI_NONE, 0}, {"datetime", TDS_DATETIMN, TI_LEN1, 8},
    {"smalldatetime", TDS_DATETIM4, TI_NONE, 0}, {"smalldatetime", TDS_DATETIMN, TI_LEN1, 4},
    {"datetime2", TDS_DATETIME2N, TI_SCALE, 7}, {"datetimeoffset", TDS_DATETIMEOFFSETN, TI_SCALE, 7},
    {"time", TDS_TIMEN, TI_SCALE, 7},
    {"char", TDS_BIGCHAR, TI_CHARS, 10},   {"varchar", TDS_BIGVARCHAR, TI_CHARS, 100},
    {"nchar", TDS_NCHAR, TI_CHARS, 20},    {"nvarchar", TDS_NVARCHAR, TI_CHARS, 200},
    {"sysname", TDS_NVARCHAR, TI_CHARS, 256},
    {"text", TDS_TEXT, TI_LONG_CHARS, 0},  {"ntext", TDS_NTEXT, TI_LONG_CHARS, 0},
    {"xml", TDS_XML, TI_XML, 0},           {"uniqueidentifier", TDS_GUID, TI_LEN1, 16},
    {"binary", TDS_BIGBINARY, TI_BYTES, 4}, {"varbinary", TDS_BIGVARBINARY, TI_BYTES, 16},
    {"image", TDS_IMAGE, TI_LONG_BYTES, 0}, {"timestamp", TDS_BIGBINARY, TI_BYTES, 8},
    {"rowversion", TDS_BIGBINARY, TI_BYTES, 8},
    {"sql_variant", TDS_SSVARIANT, TI_VARIANT, 0}, {"geography", TDS_UDT, TI_UDT, 0},
    {"geometry", TDS_UDT, TI_UDT, 0},      {"hierarchyid", TDS_UDT, TI_UDT, 0},
    {"clr type", TDS_UDT, TI_UDT, 0},
};

/* A reply with one column of type SENT[k] and no rows. */
static void one_column(tb *t, size_t k) {
    t->n = 0;
    u8(t, TDS_TOK_COLMETADATA); u16(t, 1);
    col(t, SENT[k].tds);
    switch (SENT[k].ti) {
    case TI_NONE: break;
    case TI_LEN1: u8(t, SENT[k].len); break;
    case TI_DEC: u8(t, SENT[k].len); u8(t, 38); u8(t, 6); break;
    case TI_SCALE: u8(t, SENT[k].len); break;
    case TI_CHARS: u16(t, SENT[k].len); raw(t, COLL, 5); break;
    case TI_BYTES: u16(t, SENT[k].len); break;
    case TI_XML: u8(t, 0); break;
    case TI_UDT: u16(t, 0xFFFF); bname(t, "db"); bname(t, "sys"); bname(t, SENT[k].name); u16(t, 0); break;
    case TI_LONG_CHARS: u32(t, 0x7FFFFFFF); raw(t, COLL, 5); u8(t, 1); u16(t, 1); w16(t, "t"); break;
    case TI_LONG_BYTES: u32(t, 0x7FFFFFFF); u8(t, 1); u16(t, 1); w16(t, "t"); break;
    case TI_VARIANT: u32(t, 8016); break;
    }
    bname(t, "c");
    done(t, TDS_DONE_COUNT, 0);
}

/* The native backend (TDS type ids as sent), the FreeTDS backend (the ids
 * db-lib reports: the nullable ones at their width) and the CDC client (the
 * captured column's type name) give every SQL Server type the same batch
 * type, the reference's (§2.2). */
TEST(tds_backends_and_cdc_client_agree_on_every_type) {
    static tb t;
    static uint8_t pk[4096];
    int n_types = 0;
    const mcdc_sql_type *all = mcdc_sql_types_all(&n_types);
    bool covered[64] = {false};
    CHECK(n_types > 30 && n_types <= 64);
    for (size_t k = 0; k < sizeof SENT / sizeof SENT[0]; k++) {
        const char *name = SENT[k].name;
        const mcdc_sql_type *want = mcdc_sql_type_named(name);
        CHECK(want != NULL);
        if (want == NULL) continue;
        covered[want - all] = true;
        /* native: the result schema of a reply with that column */
        one_column(&t, k);
        size_t n = packetize(pk, t.b, t.n, 4096, true);
        mcdc_conn *c = NULL;
        mcdc_result *r = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_tds_conn_open_memory(&c, pk, n, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_conn_exec(&r, c, "SELECT", NULL, 0, &e), MCDC_OK);
        const mcdc_field *f = r ? &mcdc_result_schema(r)->fields[0] : NULL;
        mcdc_type_id wt;
        int32_t wp, ws;
        /* A UDT result column is its bytes, whatever the captured
         * column of that type reads as through its expression. */
        mcdc_sql_type_batch(SENT[k].tds == TDS_UDT ? mcdc_sql_type_of_tds(TDS_UDT, 0) : want, 38,
                            6, &wt, &wp, &ws);
        if (f == NULL || f->type != wt || f->precision != wp || f->scale != ws) {
            fprintf(stderr, "  native reads %s as %d(%d,%d), not %d(%d,%d)\n", name,
                    f ? (int)f->type : -1, f ? f->precision : -1, f ? f->scale : -1, (int)wt, wp,
                    ws);
            CHECK(false);
        }
        mcdc_result_free(r);
        mcdc_conn_close(c);
        /* FreeTDS: db-lib's ids are the TDS ids, the nullable fixed ones
         * normalised (INTN 4 -> INT4 ...): the same row either way */
        const mcdc_sql_type *ft = mcdc_sql_type_of_tds(SENT[k].tds, SENT[k].len);
        bool alias = !strcmp(name, "sysname") || !strcmp(name, "timestamp") ||
                     !strcmp(name, "rowversion") || SENT[k].tds == TDS_UDT;
        CHECK(ft != NULL && (ft == want || (alias && ft->type == wt)));
        /* the CDC client: the captured column's type name */
        mcdc_captured_column cc = {.name = (char *)"c", .data_type = (char *)name,
                                   .precision = 38, .scale = 6};
        mcdc_type_id ct = 0;
        int32_t cp = -1, cs = -1;
        int rc = mcdc_cdc_map_type(&ct, &cp, &cs, &cc, NULL);
        mcdc_sql_type_batch(want, 38, 6, &wt, &wp, &ws);
        if (want->has_default) {
            CHECK_EQ_INT(rc, MCDC_OK);
            CHECK(ct == wt && cp == wp && cs == ws);
        } else {
            CHECK_EQ_INT(rc, MCDC_E_UNSUPPORTED);
        }
    }
    for (int i = 0; i < n_types; i++)
        if (!covered[i]) {
            fprintf(stderr, "  type %s has no case here\n", all[i].name);
            CHECK(false);
        }
    /* the ids only db-lib reports */
    static const struct { uint8_t id; const char *name; } DBLIB[] = {
        {0x2F, "char"}, {0x27, "varchar"}, {0x67, "nvarchar"}, {0x2D, "binary"},
        {0x25, "varbinary"}, {0xE1, "varbinary"}};
    for (size_t k = 0; k < sizeof DBLIB / sizeof DBLIB[0]; k++)
        CHECK(mcdc_sql_type_of_tds(DBLIB[k].id, 0) == mcdc_sql_type_named(DBLIB[k].name));
    CHECK(mcdc_sql_type_of_tds(0x01, 0) == NULL);
    CHECK(mcdc_sql_type_of_tds(TDS_INTN, 3) == NULL);
    /* typed NULLs: the type a batch type is cast to reads back as it */
    static const mcdc_type_id BATCH[] = {
        MCDC_TYPE_BOOL, MCDC_TYPE_INT16, MCDC_TYPE_INT32, MCDC_TYPE_INT64, MCDC_TYPE_FLOAT,
        MCDC_TYPE_DOUBLE, MCDC_TYPE_DECIMAL, MCDC_TYPE_UTF8, MCDC_TYPE_BINARY, MCDC_TYPE_DATE32,
        MCDC_TYPE_TIMESTAMP_NTZ, MCDC_TYPE_TIMESTAMP_UTC};
    for (size_t k = 0; k < sizeof BATCH / sizeof BATCH[0]; k++) {
        mcdc_field f = {.name = (char *)"c", .type = BATCH[k], .precision = 12, .scale = 3};
        char cast[32], base[32];
        mcdc_sql_type_cast_name(&f, cast);
        snprintf(base, sizeof base, "%.*s", (int)strcspn(cast, "("), cast);
        const mcdc_sql_type *st = mcdc_sql_type_named(base);
        mcdc_type_id bt = 0;
        int32_t bp = 0, bs = 0;
        if (st) mcdc_sql_type_batch(st, 12, 3, &bt, &bp, &bs);
        CHECK(st != NULL && bt == BATCH[k]);
        if (BATCH[k] == MCDC_TYPE_DECIMAL) CHECK_EQ_STR(cast, "decimal(12,3)");
    }
}

TEST(tds_native_login_builders) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_tds_build_prelogin(&b, 2, &e), MCDC_OK);
    int enc = -1;
    CHECK_EQ_INT(mcdc_tds_parse_prelogin(b.data, b.len, &enc, &e), MCDC_OK);
    CHECK_EQ_INT(enc, 2);
    CHECK_EQ_INT(mcdc_tds_parse_prelogin(b.data, 3, &enc, &e), MCDC_E_PROTOCOL);
    mcdc_buf_free(&b);
    mcdc_tds_login_params lp = {"h", "sa", "Pw\xc3\xa9", "app", "srv", "db", "lib", 32767};
    CHECK_EQ_INT(mcdc_tds_build_login7(&b, &lp, &e), MCDC_OK);
    CHECK_EQ_INT((int)tds_u32(b.data), (int)b.len);
    CHECK(tds_u32(b.data + 4) == TDS_VERSION_74);
    CHECK_EQ_INT((int)tds_u32(b.data + 8), 32767);
    /* password: slot 3 (offset 44); deobfuscate: XOR 0xA5 then swap nibbles */
    uint16_t off = tds_u16(b.data + 44), len = tds_u16(b.data + 46);
    CHECK_EQ_INT(len, 3);
    uint8_t plain[6];
    for (int i = 0; i < 6; i++) {
        uint8_t x = b.data[off + i] ^ 0xA5;
        plain[i] = (uint8_t)((x << 4) | (x >> 4));
    }
    CHECK(memcmp(plain, "P\0w\0\xe9\0", 6) == 0);
    CHECK(memcmp(b.data + off, "P\0w\0", 4) != 0);
    /* database: slot 9 (offset 68) */
    CHECK_EQ_INT(tds_u16(b.data + 70), 2);
    CHECK(memcmp(b.data + tds_u16(b.data + 68), "d\0b\0", 4) == 0);
    mcdc_buf_free(&b);
    CHECK_EQ_INT(mcdc_tds_build_sql_batch(&b, "S\xf0\x9f\x98\x80", 0, &e), MCDC_OK);
    CHECK_EQ_INT((int)b.len, 22 + 2 + 4);
    CHECK_EQ_INT(tds_u16(b.data + 24), 0xD83D);
    CHECK_EQ_INT(tds_u16(b.data + 26), 0xDE00);
    mcdc_buf_free(&b);
}

/* Recorded replies of mssql-cdc-sim (MCDC_TDS_RECORD): the session set-up
 * reply, then the reply to tests/e2e/native_sim.sh's TYPES query (whose
 * result tests/e2e/native_sim.sh checks equal to FreeTDS's). */
static size_t load(const char *path, uint8_t *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "%s: cannot open (run the tests from the repository root)\n", path);
        return 0;
    }
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* Replays `requests` requests over the recording; dumps the last result. */
static int replay(const uint8_t *pk, size_t n, int requests, char *text, size_t cap,
                  mcdc_error *err) {
    mcdc_conn *c = NULL;
    int rc = mcdc_tds_conn_open_memory(&c, pk, n, err);
    for (int q = 0; rc == MCDC_OK && q < requests; q++) {
        mcdc_batch *b = NULL;
        mcdc_result *r = NULL;
        rc = mcdc_conn_exec(&r, c, "-", NULL, 0, err);
        if (rc != MCDC_OK) break;
        rc = mcdc_result_next_batch(&b, r, 100000, err);
        if (rc == MCDC_OK && b) dump(text, cap, b);
        mcdc_batch_free(b);
        mcdc_result_free(r);
    }
    mcdc_conn_close(c);
    return rc;
}

TEST(tds_native_recorded_sim_replies) {
    static uint8_t pk[65536];
    static char text[65536];
    mcdc_error e = MCDC_ERROR_INIT;
    size_t n = load("tests/data/tds/sim_types.tds", pk, sizeof pk);
    CHECK(n > 100);
    CHECK_EQ_INT(replay(pk, n, 2, text, sizeof text, &e), MCDC_OK);
    /* tinyint, smallint, int, bigint, bit, real, float */
    CHECK(strncmp(text, "255|-32768|-2147483648|-9223372036854775808|1|1.5|-2.25e+300|", 61) == 0);
    CHECK(strstr(text, "|'23:59:59.1234567'|'12:00:00'|'01:02:03.500'|") != NULL);
    CHECK(strstr(text, "|'6F9619FF-8B86-D011-B42D-00C04FC964FF'|") != NULL);
    CHECK(strstr(text, "|'\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 \xc3\xa9 \xc3\x9f'|"
                       "'caf\xc3\xa9 \xc3\xbc \xe2\x82\xac'|'ab   '|'x  '|0x0102FF|0x01000000|") != NULL);
    CHECK(strstr(text, "|-2208988799880000|") != NULL); /* 1900-01-01 00:00:00.12 */
    /* every truncation of the recording fails cleanly (no crash, an error) */
    int clean = 0;
    for (size_t cut = 1; cut < n; cut += 7)
        if (replay(pk, cut, 2, text, sizeof text, &e) != MCDC_OK) clean++;
    CHECK_EQ_INT(clean, (int)((n - 1 + 6) / 7));
    n = load("tests/data/tds/sim_rows.tds", pk, sizeof pk);
    CHECK(n > 1000);
    CHECK_EQ_INT(replay(pk, n, 2, text, sizeof text, &e), MCDC_OK);
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    CHECK_EQ_INT(lines, 20);
}

TEST(tds_native_varchar_collations) {
    static tb t;
    static uint8_t pk[4096];
    char text[256];
    mcdc_error e = MCDC_ERROR_INIT;
    /* Cyrillic_General (LCID 0x0419, code page 1251): refused, not mis-decoded */
    static const uint8_t CYR[5] = {0x19, 0x04, 0xD0, 0x00, 0x00};
    t.n = 0;
    u8(&t, TDS_TOK_COLMETADATA); u16(&t, 1); col(&t, TDS_BIGVARCHAR); u16(&t, 10); raw(&t, CYR, 5); bname(&t, "v");
    u8(&t, TDS_TOK_ROW); u16(&t, 2); u8(&t, 0xC0); u8(&t, 0xE1);
    done(&t, TDS_DONE_COUNT, 1);
    size_t n = packetize(pk, t.b, t.n, 512, true);
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_E_UNSUPPORTED);
    CHECK(strstr(e.message, "'v'") != NULL);
    /* a UTF-8 collation (flag 0x40 of the collation word): bytes as they are */
    static const uint8_t U8[5] = {0x09, 0x04, 0xD0, 0x04, 0x00};
    t.n = 0;
    u8(&t, TDS_TOK_COLMETADATA); u16(&t, 1); col(&t, TDS_BIGVARCHAR); u16(&t, 10); raw(&t, U8, 5); bname(&t, "v");
    u8(&t, TDS_TOK_ROW); u16(&t, 3); u8(&t, 'a'); u8(&t, 0xC3); u8(&t, 0xA9);
    done(&t, TDS_DONE_COUNT, 1);
    n = packetize(pk, t.b, t.n, 512, true);
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_OK);
    CHECK(same_text(text, "'a\xc3\xa9'\n"));
    /* Latin1_General (LCID 0x0409, Windows collation, sort id 0): 1252 */
    static const uint8_t L1[5] = {0x09, 0x04, 0xD0, 0x00, 0x00};
    t.n = 0;
    u8(&t, TDS_TOK_COLMETADATA); u16(&t, 1); col(&t, TDS_BIGCHAR); u16(&t, 2); raw(&t, L1, 5); bname(&t, "v");
    u8(&t, TDS_TOK_ROW); u16(&t, 2); u8(&t, 0x80); u8(&t, 0xFF);
    done(&t, TDS_DONE_COUNT, 1);
    n = packetize(pk, t.b, t.n, 512, true);
    CHECK_EQ_INT(run(pk, n, text, sizeof text, 10, &e), MCDC_OK);
    CHECK(same_text(text, "'\xe2\x82\xac\xc3\xbf'\n"));
}
