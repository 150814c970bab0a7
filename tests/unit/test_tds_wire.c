/* test_tds_wire.c - the simulator's TDS codec: packets, PRELOGIN, LOGIN7,
 * requests, RPC parameters, tokens and value encodings. */
#include <stdlib.h>
#include <string.h>

#include "mcdc_test.h"
#include "sim_val.h"
#include "sim_variant.h"
#include "tds_result.h"
#include "tds_wire.h"

/* ---- helpers ---------------------------------------------------------------- */
typedef struct capture {
    mcdc_buf raw;     /* every byte written */
    int packets;
    int fail_after;   /* > 0: writes after this many packets fail */
} capture;

static int cap_write(void *ctx, const uint8_t *p, size_t n) {
    capture *c = ctx;
    if (c->fail_after > 0 && c->packets >= c->fail_after) return -1;
    c->packets++;
    return mcdc_buf_append(&c->raw, p, n, NULL);
}

/* Walks the packets in raw: checks headers, concatenates payloads into out.
 * Returns the number of packets, -1 on a malformed stream. */
static int depacketize(const capture *c, mcdc_buf *out, size_t max_packet, uint8_t type) {
    size_t i = 0;
    int n = 0;
    while (i < c->raw.len) {
        const uint8_t *h = c->raw.data + i;
        if (c->raw.len - i < 8) return -1;
        size_t len = (size_t)(h[2] << 8 | h[3]);
        if (len < 8 || len > max_packet || len > c->raw.len - i) return -1;
        if (h[0] != type || h[6] != (uint8_t)(n + 1)) return -1;
        bool last = i + len == c->raw.len;
        if ((h[1] & 1) != (last ? 1 : 0)) return -1;
        if (mcdc_buf_append(out, h + 8, len - 8, NULL)) return -1;
        i += len;
        n++;
    }
    return n;
}

static void put16(mcdc_buf *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    mcdc_buf_append(b, x, 2, NULL);
}
static void put32(mcdc_buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    mcdc_buf_append(b, x, 4, NULL);
}
static void put8(mcdc_buf *b, uint8_t v) { mcdc_buf_append(b, &v, 1, NULL); }
static void putu16s(mcdc_buf *b, const char *ascii) {
    for (const char *s = ascii; *s; s++) put16(b, (uint8_t)*s);
}
static int hexcmp(const uint8_t *p, const char *hex) {
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        if (p[i] != v) return 1;
    }
    return 0;
}

/* memory reader for sim_tds_msg_read */
typedef struct mem {
    const uint8_t *p;
    size_t n, i;
} mem;
static int mem_read(void *ctx, uint8_t *p, size_t n) {
    mem *m = ctx;
    if (m->n - m->i < n) return -1;
    memcpy(p, m->p + m->i, n);
    m->i += n;
    return 0;
}
static void packet(mcdc_buf *b, uint8_t type, uint8_t status, const void *payload, size_t n,
                   size_t claimed_len) {
    size_t len = claimed_len ? claimed_len : n + 8;
    uint8_t h[8] = {type, status, (uint8_t)(len >> 8), (uint8_t)len, 0, 0, 1, 0};
    mcdc_buf_append(b, h, 8, NULL);
    mcdc_buf_append(b, payload, n, NULL);
}

/* ---- packets ------------------------------------------------------------------ */
TEST(sim_tds_msg_read_assembles_packets) {
    mcdc_buf s = {0};
    packet(&s, TDS_PKT_SQL_BATCH, 0x08, "abc", 3, 0);
    packet(&s, TDS_PKT_SQL_BATCH, 0x01, "de", 2, 0);
    packet(&s, TDS_PKT_ATTENTION, 0x01, "", 0, 0);
    mem m = {s.data, s.len, 0};
    sim_tds_msg msg = {0};
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_tds_msg_read(&msg, mem_read, &m, &err), MCDC_OK);
    CHECK_EQ_INT(msg.type, TDS_PKT_SQL_BATCH);
    CHECK_EQ_INT(msg.status, 0x08);
    CHECK_EQ_INT(msg.payload.len, 5);
    CHECK(memcmp(msg.payload.data, "abcde", 5) == 0);
    CHECK_EQ_INT(sim_tds_msg_read(&msg, mem_read, &m, &err), MCDC_OK);
    CHECK_EQ_INT(msg.type, TDS_PKT_ATTENTION);
    CHECK_EQ_INT(msg.payload.len, 0);
    CHECK_EQ_INT(sim_tds_msg_read(&msg, mem_read, &m, &err), MCDC_E_IO);
    sim_tds_msg_free(&msg);
    mcdc_buf_free(&s);
}

TEST(sim_tds_msg_read_rejects_bad_packets) {
    mcdc_error err = MCDC_ERROR_INIT;
    sim_tds_msg msg = {0};
    struct {
        int kind;
        int want;
    } cases[] = {{0, MCDC_E_PROTOCOL}, {1, MCDC_E_PROTOCOL}, {2, MCDC_E_PROTOCOL},
                 {3, MCDC_E_PROTOCOL}, {4, MCDC_E_LIMIT}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mcdc_buf s = {0};
        switch (cases[k].kind) {
        case 0: packet(&s, 1, 1, "abc", 3, 5); break;         /* length < header */
        case 1: packet(&s, 1, 1, "abc", 3, 100); break;       /* lies: longer than sent */
        case 2: packet(&s, 1, 0, "abc", 3, 0); break;         /* no EOM, then EOF */
        case 3:                                               /* type changes mid-message */
            packet(&s, 1, 0, "abc", 3, 0);
            packet(&s, 3, 1, "abc", 3, 0);
            break;
        case 4: { /* LOGIN7 over its 128 KiB limit */
            uint8_t *big = calloc(1, 32000);
            for (int i = 0; i < 5; i++) packet(&s, TDS_PKT_LOGIN7, 0, big, 32000 - 8, 0);
            free(big);
            break;
        }
        }
        mem m = {s.data, s.len, 0};
        CHECK_EQ_INT(sim_tds_msg_read(&msg, mem_read, &m, &err), cases[k].want);
        CHECK(err.message[0] != 0);
        mcdc_buf_free(&s);
    }
    sim_tds_msg_free(&msg);
}

/* Before login only PRELOGIN (a few KiB) and LOGIN7 (its 128 KiB) are read:
 * anything else, or more, is a protocol error at the header past the bound,
 * before its body is read. */
TEST(sim_tds_msg_read_bounds_the_login_phase) {
    mcdc_error err = MCDC_ERROR_INIT;
    sim_tds_msg msg = {0};
    uint8_t *big = calloc(1, 32000);
    /* a PRELOGIN of 2 x 3000 bytes: past MCDC_TDS_PRELOGIN_BYTES_MAX */
    mcdc_buf s = {0};
    packet(&s, TDS_PKT_PRELOGIN, 0, big, 3000, 0);
    packet(&s, TDS_PKT_PRELOGIN, 1, big, 3000, 0);
    mem m = {s.data, s.len, 0};
    msg.login_phase = true;
    CHECK_EQ_INT(sim_tds_msg_read(&msg, mem_read, &m, &err), MCDC_E_PROTOCOL);
    CHECK(strstr(err.message, "exceeds 4096 bytes before login") != NULL);
    CHECK_EQ_INT(m.i, 8 + 3000 + 8); /* the second packet's body was never read */
    CHECK(msg.payload.cap <= MCDC_TDS_PRELOGIN_BYTES_MAX + 64);
    mcdc_buf_free(&s);
    /* a SQL batch before login: refused at its header */
    s = (mcdc_buf){0};
    packet(&s, TDS_PKT_SQL_BATCH, 1, big, 30000, 0);
    m = (mem){s.data, s.len, 0};
    CHECK_EQ_INT(sim_tds_msg_read(&msg, mem_read, &m, &err), MCDC_E_PROTOCOL);
    CHECK(strstr(err.message, "before login") != NULL);
    CHECK_EQ_INT(m.i, 8);
    mcdc_buf_free(&s);
    /* LOGIN7 past 128 KiB: a protocol error too */
    s = (mcdc_buf){0};
    for (int i = 0; i < 5; i++) packet(&s, TDS_PKT_LOGIN7, 0, big, 32000 - 8, 0);
    m = (mem){s.data, s.len, 0};
    CHECK_EQ_INT(sim_tds_msg_read(&msg, mem_read, &m, &err), MCDC_E_PROTOCOL);
    CHECK(msg.payload.len <= MCDC_TDS_LOGIN7_BYTES_MAX);
    mcdc_buf_free(&s);
    /* small ones pass, in the login phase and after it */
    s = (mcdc_buf){0};
    packet(&s, TDS_PKT_PRELOGIN, 1, big, 40, 0);
    packet(&s, TDS_PKT_SQL_BATCH, 1, big, 30000, 0);
    m = (mem){s.data, s.len, 0};
    CHECK_EQ_INT(sim_tds_msg_read(&msg, mem_read, &m, &err), MCDC_OK);
    CHECK_EQ_INT(msg.type, TDS_PKT_PRELOGIN);
    msg.login_phase = false;
    CHECK_EQ_INT(sim_tds_msg_read(&msg, mem_read, &m, &err), MCDC_OK);
    CHECK_EQ_INT(msg.payload.len, 30000);
    mcdc_buf_free(&s);
    free(big);
    sim_tds_msg_free(&msg);
}

TEST(sim_tds_out_splits_at_packet_size) {
    capture c = {0};
    sim_tds_out o;
    CHECK_EQ_INT(sim_tds_out_init(&o, cap_write, &c, NULL), MCDC_OK);
    o.size = 512;
    o.spid = 0x0133;
    sim_tds_out_begin(&o, TDS_PKT_REPLY);
    uint8_t data[2000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7);
    CHECK_EQ_INT(sim_tds_out_bytes(&o, data, 300), 0);
    CHECK_EQ_INT(sim_tds_out_bytes(&o, data + 300, 1700), 0);
    CHECK_EQ_INT(sim_tds_out_end(&o), 0);
    mcdc_buf pay = {0};
    CHECK_EQ_INT(depacketize(&c, &pay, 512, TDS_PKT_REPLY), 4); /* 504*3 + 488 */
    CHECK_EQ_INT(pay.len, 2000);
    CHECK(memcmp(pay.data, data, 2000) == 0);
    CHECK_EQ_INT(c.raw.data[4], 0x01); /* SPID big-endian */
    CHECK_EQ_INT(c.raw.data[5], 0x33);
    CHECK_EQ_INT(c.raw.data[2] << 8 | c.raw.data[3], 512);
    /* a second message restarts packet ids at 1 */
    mcdc_buf_reset(&c.raw);
    sim_tds_out_begin(&o, TDS_PKT_REPLY);
    CHECK_EQ_INT(sim_tds_out_u32(&o, 0xAABBCCDD), 0);
    CHECK_EQ_INT(sim_tds_out_end(&o), 0);
    CHECK_EQ_INT(c.raw.len, 12);
    CHECK_EQ_INT(c.raw.data[6], 1);
    CHECK(hexcmp(c.raw.data + 8, "ddccbbaa") == 0);
    /* a failed write is sticky */
    c.fail_after = c.packets;
    sim_tds_out_begin(&o, TDS_PKT_REPLY);
    CHECK(sim_tds_out_bytes(&o, data, 2000) != 0);
    CHECK(o.failed);
    mcdc_buf_free(&pay);
    mcdc_buf_free(&c.raw);
    sim_tds_out_free(&o);
}

/* With a hold region, finished packets go out together: at the message's
 * end, when the region is full, or on push; the bytes are those of one
 * packet per write. */
TEST(sim_tds_out_holds_packets_and_writes_them_together) {
    capture c = {0};
    sim_tds_out o;
    CHECK_EQ_INT(sim_tds_out_init(&o, cap_write, &c, NULL), MCDC_OK);
    CHECK_EQ_INT(sim_tds_out_hold(&o, 64 * 1024, NULL), MCDC_OK);
    o.size = 4096;
    sim_tds_out_begin(&o, TDS_PKT_REPLY);
    enum { N = 100000 };
    uint8_t *data = malloc(N);
    CHECK(data != NULL);
    if (!data) return;
    for (size_t i = 0; i < N; i++) data[i] = (uint8_t)(i * 13 + (i >> 8));
    /* 20000 bytes: four full packets held, none written */
    CHECK_EQ_INT(sim_tds_out_bytes(&o, data, 20000), 0);
    CHECK_EQ_INT(c.packets, 0);
    CHECK_EQ_INT((int)o.held, 4 * 4096);
    /* push: the four go in one write; the packet being filled stays */
    CHECK_EQ_INT(sim_tds_out_push(&o), 0);
    CHECK_EQ_INT(c.packets, 1);
    CHECK_EQ_INT((int)c.raw.len, 4 * 4096);
    CHECK_EQ_INT((int)o.held, 0);
    CHECK_EQ_INT(sim_tds_out_push(&o), 0); /* nothing held: no write */
    CHECK_EQ_INT(c.packets, 1);
    /* the rest: the region (16 packets of 4096) fills once, then the end */
    CHECK_EQ_INT(sim_tds_out_bytes(&o, data + 20000, N - 20000), 0);
    CHECK_EQ_INT(c.packets, 2);
    CHECK_EQ_INT(sim_tds_out_end(&o), 0);
    CHECK_EQ_INT(c.packets, 3);
    mcdc_buf pay = {0};
    CHECK_EQ_INT(depacketize(&c, &pay, 4096, TDS_PKT_REPLY), (N + 4087) / 4088);
    CHECK_EQ_INT((int)pay.len, N);
    CHECK(pay.len == N && memcmp(pay.data, data, N) == 0);
    /* the same bytes as without holding */
    capture d = {0};
    sim_tds_out p;
    CHECK_EQ_INT(sim_tds_out_init(&p, cap_write, &d, NULL), MCDC_OK);
    p.size = 4096;
    sim_tds_out_begin(&p, TDS_PKT_REPLY);
    CHECK_EQ_INT(sim_tds_out_bytes(&p, data, N), 0);
    CHECK_EQ_INT(sim_tds_out_end(&p), 0);
    CHECK_EQ_INT(d.packets, (N + 4087) / 4088); /* one write per packet */
    CHECK(d.raw.len == c.raw.len && memcmp(d.raw.data, c.raw.data, c.raw.len) == 0);
    /* a failed write drops what is held and stays failed */
    mcdc_buf_reset(&c.raw);
    c.fail_after = c.packets;
    sim_tds_out_begin(&o, TDS_PKT_REPLY);
    CHECK_EQ_INT(sim_tds_out_bytes(&o, data, 3 * 4096), 0); /* held: no write yet */
    CHECK(sim_tds_out_push(&o) != 0);
    CHECK(o.failed);
    CHECK_EQ_INT((int)c.raw.len, 0);
    free(data);
    mcdc_buf_free(&pay);
    mcdc_buf_free(&c.raw);
    mcdc_buf_free(&d.raw);
    sim_tds_out_free(&o);
    sim_tds_out_free(&p);
}

/* ---- PRELOGIN ------------------------------------------------------------------- */
TEST(sim_tds_prelogin_reply_bytes) {
    capture c = {0};
    sim_tds_out o;
    sim_tds_out_init(&o, cap_write, &c, NULL);
    CHECK_EQ_INT(sim_tds_prelogin_reply(&o, 16, TDS_ENCRYPT_NOT_SUP), 0);
    const char *want = "0401002b00000100"                 /* header: type 4, EOM, 35 bytes */
                       "00001a0006" "0100200001" "0200210001" "0300220000" "0400220001" "ff"
                       "100010270000" "02" "00" "00";
    CHECK_EQ_INT(c.raw.len, strlen(want) / 2);
    CHECK(hexcmp(c.raw.data, want) == 0);
    /* and our parser reads back what a FreeTDS client sends */
    mcdc_buf req = {0};
    const char *hex = "00001a0006" "0100200001" "0200210001" "03002200" "04" "0400260001" "ff"
                      "090000000000" "00" "00" "00000000" "00";
    for (size_t i = 0; hex[i]; i += 2) {
        unsigned v;
        sscanf(hex + i, "%2x", &v);
        put8(&req, (uint8_t)v);
    }
    sim_tds_prelogin pl;
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_tds_prelogin_parse(&pl, req.data, req.len, &err), MCDC_OK);
    CHECK_EQ_INT(pl.encryption, 0);
    CHECK_EQ_INT(pl.mars, 0);
    /* an option pointing outside the message */
    req.data[2] = 0xF0;
    CHECK_EQ_INT(sim_tds_prelogin_parse(&pl, req.data, req.len, &err), MCDC_E_PROTOCOL);
    CHECK_EQ_INT(sim_tds_prelogin_parse(&pl, req.data, 3, &err), MCDC_E_PROTOCOL);
    mcdc_buf_free(&req);
    mcdc_buf_free(&c.raw);
    sim_tds_out_free(&o);
}

/* ---- LOGIN7 ----------------------------------------------------------------------- */
static void obfuscate(mcdc_buf *b, const char *pw) {
    for (const char *s = pw; *s; s++) {
        uint8_t u[2] = {(uint8_t)*s, 0};
        for (int k = 0; k < 2; k++) {
            uint8_t x = (uint8_t)((u[k] << 4) | (u[k] >> 4));
            put8(b, (uint8_t)(x ^ 0xA5));
        }
    }
}

static void build_login7(mcdc_buf *b, uint32_t version, uint32_t packet_size, bool feature_ext,
                         const char *user, const char *pw, const char *db) {
    const char *strs[9] = {"myhost", user, pw, "myapp", "127.0.0.1", "", "libx", "", db};
    size_t off = 94;
    uint16_t offs[9], lens[9];
    for (int i = 0; i < 9; i++) {
        offs[i] = (uint16_t)off;
        lens[i] = (uint16_t)strlen(strs[i]);
        if (i == 5 && feature_ext) lens[i] = 4; /* bytes: a DWORD */
        off += i == 5 && feature_ext ? 4 : 2 * strlen(strs[i]);
    }
    size_t fe_off = off;
    size_t total = off + (feature_ext ? 1 : 0);
    put32(b, (uint32_t)total);
    put32(b, version);
    put32(b, packet_size);
    put32(b, 7);
    put32(b, 1234);
    put32(b, 0);
    put8(b, 0xE0);
    put8(b, 0x03);
    put8(b, 0);
    put8(b, feature_ext ? 0x10 : 0);
    put32(b, 0);
    put32(b, 0x409);
    for (int i = 0; i < 9; i++) {
        put16(b, offs[i]);
        put16(b, lens[i]);
    }
    for (int i = 0; i < 6; i++) put8(b, 0);
    for (int i = 0; i < 4; i++) put32(b, 0);
    for (int i = 0; i < 9; i++) {
        if (i == 2)
            obfuscate(b, pw);
        else if (i == 5 && feature_ext)
            put32(b, (uint32_t)fe_off);
        else
            putu16s(b, strs[i]);
    }
    if (feature_ext) put8(b, 0xFF);
}

TEST(sim_tds_login7_decodes_fields_and_password) {
    mcdc_buf b = {0};
    build_login7(&b, 0x74000004, 8192, true, "sa", "P@ss w0rd!", "cdcdb");
    sim_tds_login7 l;
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_tds_login7_parse(&l, b.data, b.len, &err), MCDC_OK);
    CHECK_EQ_INT(l.tds_version, 0x74000004);
    CHECK_EQ_INT(l.packet_size, 8192);
    CHECK_EQ_STR(l.user, "sa");
    CHECK_EQ_STR(l.password, "P@ss w0rd!");
    CHECK_EQ_STR(l.database, "cdcdb");
    CHECK_EQ_STR(l.app, "myapp");
    CHECK_EQ_STR(l.host, "myhost");
    CHECK_EQ_STR(l.library, "libx");
    CHECK(l.feature_ext);
    CHECK(!l.integrated_security);
    sim_tds_login7_wipe(&l);
    CHECK_EQ_STR(l.password, "");
    mcdc_buf_free(&b);

    /* 7.1 accepted, 7.0 and 8.0 refused */
    build_login7(&b, 0x71000001, 0, false, "u", "p", "");
    CHECK_EQ_INT(sim_tds_login7_parse(&l, b.data, b.len, &err), MCDC_OK);
    CHECK(!l.feature_ext);
    CHECK_EQ_STR(l.database, "");
    mcdc_buf_free(&b);
    build_login7(&b, 0x70000000, 0, false, "u", "p", "");
    CHECK_EQ_INT(sim_tds_login7_parse(&l, b.data, b.len, &err), MCDC_E_UNSUPPORTED);
    mcdc_buf_free(&b);
}

TEST(sim_tds_login7_rejects_lies) {
    mcdc_buf b = {0};
    build_login7(&b, 0x74000004, 4096, false, "sa", "pw", "db");
    sim_tds_login7 l;
    mcdc_error err = MCDC_ERROR_INIT;
    /* truncated */
    CHECK_EQ_INT(sim_tds_login7_parse(&l, b.data, 60, &err), MCDC_E_PROTOCOL);
    CHECK_EQ_INT(sim_tds_login7_parse(&l, b.data, b.len - 2, &err), MCDC_E_PROTOCOL);
    /* user name pointing past the end */
    uint8_t *u = b.data + 36 + 4;
    uint16_t save = (uint16_t)(u[0] | u[1] << 8);
    u[0] = 0xF0;
    u[1] = 0x00;
    CHECK_EQ_INT(sim_tds_login7_parse(&l, b.data, b.len, &err), MCDC_E_PROTOCOL);
    u[0] = (uint8_t)save;
    u[1] = (uint8_t)(save >> 8);
    /* a password of 300 characters */
    b.data[36 + 8 + 2] = 0x2C;
    b.data[36 + 8 + 3] = 0x01;
    CHECK(sim_tds_login7_parse(&l, b.data, b.len, &err) != MCDC_OK);
    CHECK(strstr(err.message, "password") != NULL);
    mcdc_buf_free(&b);
    CHECK_EQ_INT(sim_tds_packet_size_negotiate(0), 4096);
    CHECK_EQ_INT(sim_tds_packet_size_negotiate(100), 512);
    CHECK_EQ_INT(sim_tds_packet_size_negotiate(65536), 32767);
    CHECK_EQ_INT(sim_tds_packet_size_negotiate(8000), 8000);
}

TEST(sim_tds_login_reply_tokens) {
    capture c = {0};
    sim_tds_out o;
    sim_tds_out_init(&o, cap_write, &c, NULL);
    CHECK_EQ_INT(sim_tds_login_reply(&o, "cdcdb", 4096, 8192, true, 16), 0);
    mcdc_buf p = {0};
    CHECK_EQ_INT(depacketize(&c, &p, 4096, TDS_PKT_REPLY), 1);
    /* ENVCHANGE database first: E3 len 01 05 'cdcdb' 06 'master' */
    CHECK_EQ_INT(p.data[0], 0xE3);
    CHECK_EQ_INT(p.data[3], 1);
    CHECK_EQ_INT(p.data[4], 5);
    CHECK_EQ_INT(p.data[5], 'c');
    /* collation bytes and packet size ENVCHANGE present, LOGINACK, FEATUREEXTACK, DONE last */
    const uint8_t coll[] = {0xE3, 0x08, 0x00, 0x07, 0x05, 0x09, 0x04, 0xD0, 0x00, 0x34, 0x00};
    CHECK(memmem(p.data, p.len, coll, sizeof coll) != NULL);
    const uint8_t ack[] = {0xAD, 0x32, 0x00, 0x01, 0x74, 0x00, 0x00, 0x04, 20};
    const uint8_t *a = memmem(p.data, p.len, ack, sizeof ack);
    CHECK(a != NULL);
    if (a) CHECK(hexcmp(a + 9 + 40, "10001027" "aeff" "fd0000000000000000000000") == 0);
    const uint8_t ps[] = {0xE3, 0x13, 0x00, 0x04, 0x04, '8', 0, '1', 0, '9', 0, '2', 0, 0x04};
    CHECK(memmem(p.data, p.len, ps, sizeof ps) != NULL);
    CHECK_EQ_INT(p.data[p.len - 13], 0xFD);
    mcdc_buf_free(&p);
    mcdc_buf_reset(&c.raw);
    /* failure */
    CHECK_EQ_INT(sim_tds_login_fail_reply(&o, 18456, 1, 14, "Login failed for user 'x'."), 0);
    CHECK_EQ_INT(depacketize(&c, &p, 4096, TDS_PKT_REPLY), 1);
    CHECK_EQ_INT(p.data[0], 0xAA);
    CHECK(hexcmp(p.data + 3, "18480000" "01" "0e") == 0); /* 18456, state 1, class 14 */
    CHECK(hexcmp(p.data + p.len - 13, "fd0200") == 0);
    mcdc_buf_free(&p);
    mcdc_buf_free(&c.raw);
    sim_tds_out_free(&o);
}

/* ---- requests ------------------------------------------------------------------------- */
static void all_headers(mcdc_buf *b) {
    put32(b, 22);
    put32(b, 18);
    put16(b, 2);
    put32(b, 0);
    put32(b, 0);
    put32(b, 1);
}

TEST(sim_tds_batch_decode_skips_all_headers) {
    mcdc_buf req = {0}, out = {0};
    all_headers(&req);
    putu16s(&req, "SELECT 1");
    put16(&req, 0xE9); /* é */
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_tds_batch_decode(&out, req.data, req.len, &err), MCDC_OK);
    CHECK_EQ_STR((const char *)out.data, "SELECT 1\xC3\xA9");
    /* no headers (TDS 7.1) */
    mcdc_buf_reset(&req);
    putu16s(&req, "SELECT 2");
    CHECK_EQ_INT(sim_tds_batch_decode(&out, req.data, req.len, &err), MCDC_OK);
    CHECK_EQ_STR((const char *)out.data, "SELECT 2");
    /* a header that lies about its length */
    mcdc_buf_reset(&req);
    all_headers(&req);
    req.data[4] = 40;
    putu16s(&req, "SELECT 3");
    CHECK_EQ_INT(sim_tds_batch_decode(&out, req.data, req.len, &err), MCDC_E_PROTOCOL);
    /* odd byte count */
    mcdc_buf_reset(&req);
    all_headers(&req);
    put8(&req, 'x');
    CHECK_EQ_INT(sim_tds_batch_decode(&out, req.data, req.len, &err), MCDC_E_PROTOCOL);
    mcdc_buf_free(&req);
    mcdc_buf_free(&out);
}

static void bvar(mcdc_buf *b, const char *ascii) {
    put8(b, (uint8_t)strlen(ascii));
    putu16s(b, ascii);
}

TEST(sim_tds_rpc_decodes_every_parameter_type) {
    mcdc_buf r = {0};
    all_headers(&r);
    put16(&r, 0xFFFF);
    put16(&r, 10); /* sp_executesql */
    put16(&r, 0);
    /* @stmt nvarchar(max) PLP in two chunks */
    bvar(&r, "");
    put8(&r, 0);
    put8(&r, 0xE7);
    put16(&r, 0xFFFF);
    mcdc_buf_append(&r, sim_tds_collation_default, 5, NULL);
    mcdc_buf_append(&r, "\x10\x00\x00\x00\x00\x00\x00\x00", 8, NULL);
    put32(&r, 6);
    putu16s(&r, "SEL");
    put32(&r, 10);
    putu16s(&r, "ECT 1");
    put32(&r, 0);
    /* @i INTN(4) = -5 */
    bvar(&r, "@i");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x26\x04\x04\xfb\xff\xff\xff", 7, NULL);
    /* @n INTN(8) NULL, output */
    bvar(&r, "@n");
    put8(&r, 1);
    mcdc_buf_append(&r, "\x26\x08\x00", 3, NULL);
    /* @d decimal(38,2) = -12345.67 */
    bvar(&r, "@d");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x6a\x11\x26\x02\x11\x00", 6, NULL);
    put32(&r, 1234567);
    put32(&r, 0);
    put32(&r, 0);
    put32(&r, 0);
    /* @m money = -922337203685477.5808 */
    bvar(&r, "@m");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x6e\x08\x08\x00\x00\x00\x80\x00\x00\x00\x00", 11, NULL);
    /* @g uniqueidentifier */
    bvar(&r, "@g");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x24\x10\x10", 3, NULL);
    mcdc_buf_append(&r, "\xff\x19\x96\x6f\x86\x8b\x11\xd0\xb4\x2d\x00\xc0\x4f\xc9\x64\xff", 16,
                    NULL);
    /* @t datetimeoffset(7) 2024-01-01 04:30:00.5 UTC, offset -180 */
    bvar(&r, "@t");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x2b\x07\x0a\x40\x1f\x40\xb8\x25\x45\x46\x0b\x4c\xff", 13, NULL);
    /* @v varchar(10) CP1252 'caf\xe9 \x80' */
    bvar(&r, "@v");
    put8(&r, 0);
    put8(&r, 0xA7);
    put16(&r, 10);
    mcdc_buf_append(&r, sim_tds_collation_default, 5, NULL);
    put16(&r, 6);
    mcdc_buf_append(&r, "caf\xe9 \x80", 6, NULL);
    /* @b varbinary(max) PLP empty, @bn varbinary(8) NULL */
    bvar(&r, "@b");
    put8(&r, 0);
    mcdc_buf_append(&r, "\xa5\xff\xff", 3, NULL);
    mcdc_buf_append(&r, "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 12, NULL);
    bvar(&r, "@bn");
    put8(&r, 0);
    mcdc_buf_append(&r, "\xa5\x08\x00\xff\xff", 5, NULL);
    /* @f FLTN(8) 2.5, @bit BITN 1, @dt DATETIMN(8), @dd DATEN, @tm TIMEN(3) */
    bvar(&r, "@f");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x6d\x08\x08\x00\x00\x00\x00\x00\x00\x04\x40", 11, NULL);
    bvar(&r, "@bit");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x68\x01\x01\x01", 4, NULL);
    bvar(&r, "@dt");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x6f\x08\x08\xe9\xb0\x00\x00\xff\x81\x8b\x01", 11, NULL);
    bvar(&r, "@dd");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x28\x03\x80\x46\x0b", 5, NULL);
    bvar(&r, "@tm");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x29\x03\x04\x95\x2c\xb3\x02", 7, NULL); /* 12:34:56.789 */
    /* a second RPC by name, after the batch separator */
    put8(&r, 0xFF);
    put16(&r, 6);
    putu16s(&r, "sp_foo");
    put16(&r, 0);
    bvar(&r, "");
    put8(&r, 0);
    mcdc_buf_append(&r, "\x38\x07\x00\x00\x00", 5, NULL); /* INT4 fixed = 7 */

    mcdc_error err = MCDC_ERROR_INIT;
    sim_tds_rpc rpc = {0};
    size_t pos;
    bool more;
    CHECK_EQ_INT(sim_tds_skip_all_headers(r.data, r.len, &pos, &err), MCDC_OK);
    CHECK_EQ_INT(pos, 22);
    CHECK_EQ_INT(sim_tds_rpc_decode(&rpc, r.data, r.len, &pos, &more, &err), MCDC_OK);
    CHECK(more);
    CHECK_EQ_STR(rpc.proc_name, "sp_executesql");
    CHECK_EQ_INT(rpc.nparams, 15);
    if (rpc.nparams == 15) {
        sim_param *p = rpc.params;
        CHECK_EQ_INT(p[0].type.id, SIM_T_NVARCHAR);
        CHECK_EQ_INT(p[0].type.length, -1);
        CHECK_EQ_INT(p[0].value.n, 8);
        CHECK(memcmp(p[0].value.p, "SELECT 1", 8) == 0);
        CHECK_EQ_STR(p[1].name, "@i");
        CHECK_EQ_INT(p[1].type.id, SIM_T_INT);
        CHECK_EQ_INT(p[1].value.kind, SIM_V_INT);
        CHECK_EQ_INT(p[1].value.i, -5);
        CHECK_EQ_INT(p[2].type.id, SIM_T_BIGINT);
        CHECK_EQ_INT(p[2].value.kind, SIM_V_NULL);
        CHECK(p[2].output);
        CHECK_EQ_INT(p[3].type.precision, 38);
        CHECK_EQ_STR((const char *)p[3].value.p, "-12345.67");
        CHECK_EQ_STR((const char *)p[4].value.p, "-922337203685477.5808");
        CHECK_EQ_STR((const char *)p[5].value.p, "6F9619FF-8B86-D011-B42D-00C04FC964FF");
        CHECK_EQ_STR((const char *)p[6].value.p, "2024-01-01 01:30:00.5000000 -03:00");
        CHECK_EQ_STR((const char *)p[7].value.p, "caf\xC3\xA9 \xE2\x82\xAC");
        CHECK_EQ_INT(p[7].type.length, 10);
        CHECK_EQ_INT(p[8].value.kind, SIM_V_BLOB);
        CHECK_EQ_INT(p[8].value.n, 0);
        CHECK_EQ_INT(p[9].value.kind, SIM_V_NULL);
        CHECK_EQ_INT(p[10].value.kind, SIM_V_REAL);
        CHECK(p[10].value.f == 2.5);
        CHECK_EQ_INT(p[11].value.i, 1);
        CHECK_EQ_STR((const char *)p[12].value.p, "2023-12-31 23:59:59.997");
        CHECK_EQ_STR((const char *)p[13].value.p, "2024-02-29");
        CHECK_EQ_STR((const char *)p[14].value.p, "12:34:56.789");
        CHECK_EQ_INT(p[14].type.scale, 3);
    }
    CHECK_EQ_INT(sim_tds_rpc_decode(&rpc, r.data, r.len, &pos, &more, &err), MCDC_OK);
    CHECK(!more);
    CHECK_EQ_STR(rpc.proc_name, "sp_foo");
    CHECK_EQ_INT(rpc.nparams, 1);
    CHECK_EQ_INT(rpc.params[0].value.i, 7);
    CHECK_EQ_INT(pos, r.len);

    /* every truncation of the message is an error, never a crash */
    int errors = 0;
    for (size_t cut = 23; cut < r.len - 10; cut++) {
        size_t p2 = 22;
        if (sim_tds_rpc_decode(&rpc, r.data, cut, &p2, &more, &err) != MCDC_OK) errors++;
    }
    CHECK(errors > 100);
    sim_tds_rpc_free(&rpc);
    mcdc_buf_free(&r);
}

TEST(sim_tds_rpc_time_param) {
    mcdc_buf r = {0};
    put16(&r, 0xFFFF);
    put16(&r, 10);
    put16(&r, 0);
    bvar(&r, "@tm");
    put8(&r, 0);
    /* TIMEN(3) 12:34:56.789 = 45296789 ms */
    mcdc_buf_append(&r, "\x29\x03\x04\x95\x2c\xb3\x02", 7, NULL);
    sim_tds_rpc rpc = {0};
    size_t pos = 0;
    bool more;
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_tds_rpc_decode(&rpc, r.data, r.len, &pos, &more, &err), MCDC_OK);
    CHECK_EQ_INT(rpc.params[0].type.id, SIM_T_TIME);
    CHECK_EQ_STR((const char *)rpc.params[0].value.p, "12:34:56.789");
    /* unsupported type: a clear error */
    r.data[r.len - 7] = 0xF1;
    pos = 0;
    CHECK_EQ_INT(sim_tds_rpc_decode(&rpc, r.data, r.len, &pos, &more, &err), MCDC_E_UNSUPPORTED);
    CHECK(strstr(err.message, "0xf1") != NULL);
    sim_tds_rpc_free(&rpc);
    mcdc_buf_free(&r);
}

TEST(sim_tds_tm_request_to_sql) {
    mcdc_buf r = {0};
    char sql[200];
    mcdc_error err = MCDC_ERROR_INIT;
    all_headers(&r);
    put16(&r, 5);
    put8(&r, 0);
    put8(&r, 0);
    CHECK_EQ_INT(sim_tds_tm_decode(sql, sizeof sql, r.data, r.len, &err), MCDC_OK);
    CHECK_EQ_STR(sql, "BEGIN TRANSACTION");
    mcdc_buf_reset(&r);
    all_headers(&r);
    put16(&r, 7);
    bvar(&r, "t1;x");
    put8(&r, 1);
    put8(&r, 0);
    put8(&r, 0);
    CHECK_EQ_INT(sim_tds_tm_decode(sql, sizeof sql, r.data, r.len, &err), MCDC_OK);
    CHECK_EQ_STR(sql, "COMMIT TRANSACTION t1x; BEGIN TRANSACTION");
    mcdc_buf_reset(&r);
    all_headers(&r);
    put16(&r, 1);
    CHECK_EQ_INT(sim_tds_tm_decode(sql, sizeof sql, r.data, r.len, &err), MCDC_E_UNSUPPORTED);
    mcdc_buf_free(&r);
}

/* ---- value text forms -------------------------------------------------------------- */
TEST(sim_tds_decimal_parse_and_format) {
    bool neg;
    uint32_t m[4];
    char out[64];
    const char *max38 = "99999999999999999999999999999999999999";
    CHECK(sim_tds_decimal_parse((const uint8_t *)max38, 38, 38, 0, &neg, m));
    CHECK(!neg);
    CHECK_EQ_INT(m[0], 0xFFFFFFFFu);
    CHECK_EQ_INT(m[3], 0x4B3B4CA8u);
    sim_tds_decimal_format(out, sizeof out, neg, m, 0);
    CHECK_EQ_STR(out, max38);
    CHECK(!sim_tds_decimal_parse((const uint8_t *)"100000000000000000000000000000000000000", 39, 38,
                             0, &neg, m));
    CHECK(!sim_tds_decimal_parse((const uint8_t *)"1000", 4, 5, 2, &neg, m)); /* 1000.00 > p5 */
    CHECK(sim_tds_decimal_parse((const uint8_t *)"-0.005", 6, 10, 2, &neg, m)); /* rounds away */
    CHECK(neg);
    CHECK_EQ_INT(m[0], 1);
    sim_tds_decimal_format(out, sizeof out, neg, m, 2);
    CHECK_EQ_STR(out, "-0.01");
    CHECK(sim_tds_decimal_parse((const uint8_t *)"12.3", 4, 10, 4, &neg, m));
    sim_tds_decimal_format(out, sizeof out, neg, m, 4);
    CHECK_EQ_STR(out, "12.3000");
    CHECK(!sim_tds_decimal_parse((const uint8_t *)"12a", 3, 10, 0, &neg, m));
    CHECK(!sim_tds_decimal_parse((const uint8_t *)"", 0, 10, 0, &neg, m));
    CHECK(!sim_tds_decimal_parse((const uint8_t *)"-", 1, 10, 0, &neg, m));
    CHECK(sim_tds_decimal_parse((const uint8_t *)"-0.0", 4, 10, 1, &neg, m));
    CHECK(!neg); /* no negative zero */
}

TEST(sim_tds_datetime_and_guid_text) {
    sim_tds_dt dt;
    CHECK(sim_tds_dt_parse(&dt, (const uint8_t *)"2024-02-29 23:59:59.1234567", 27));
    CHECK_EQ_INT(dt.days, 738944);
    CHECK_EQ_INT(dt.time_100ns, 863991234567LL);
    CHECK(!dt.has_offset);
    CHECK(sim_tds_dt_parse(&dt, (const uint8_t *)"2024-01-01T01:30:00.5 -03:00", 28));
    CHECK_EQ_INT(dt.offset_min, -180);
    char out[48];
    sim_tds_dt_format(out, &dt, 3);
    CHECK_EQ_STR(out, "2024-01-01 01:30:00.500 -03:00");
    CHECK(!sim_tds_dt_parse(&dt, (const uint8_t *)"2023-02-29", 10));
    CHECK(!sim_tds_dt_parse(&dt, (const uint8_t *)"2024-01-01 25:00:00", 19));
    CHECK(!sim_tds_dt_parse(&dt, (const uint8_t *)"2024-01-01 01:00:00 +15:00", 26));
    uint8_t g[16];
    const char *gs = "00112233-4455-6677-8899-AABBCCDDEEFF";
    CHECK(sim_tds_guid_parse(g, (const uint8_t *)gs, 36));
    CHECK(hexcmp(g, "33221100554477668899aabbccddeeff") == 0);
    char back[37];
    sim_tds_guid_format(back, g);
    CHECK_EQ_STR(back, gs);
    CHECK(!sim_tds_guid_parse(g, (const uint8_t *)"00112233-4455-6677-8899-AABBCCDDEEFG", 36));
}

/* ---- result encoding ----------------------------------------------------------------- */
typedef struct rig {
    capture cap;
    sim_tds_out out;
    sim_tds_result res;
    sim_sink sink;
    mcdc_buf payload;
} rig;

static void rig_init(rig *g, size_t packet) {
    memset(g, 0, sizeof *g);
    sim_tds_out_init(&g->out, cap_write, &g->cap, NULL);
    g->out.size = packet;
    sim_tds_result_init(&g->res, &g->out, NULL);
    sim_tds_result_sink(&g->res, &g->sink);
}
static void rig_free(rig *g) {
    sim_tds_result_free(&g->res);
    sim_tds_out_free(&g->out);
    mcdc_buf_free(&g->cap.raw);
    mcdc_buf_free(&g->payload);
}
static int rig_finish(rig *g) {
    mcdc_buf_reset(&g->payload);
    return depacketize(&g->cap, &g->payload, g->out.size, TDS_PKT_REPLY);
}

static sim_value T(const char *s) {
    return (sim_value){.kind = SIM_V_TEXT, .p = (const uint8_t *)s, .n = strlen(s)};
}

/* Encodes one value in a one-column result and returns the ROW value bytes
 * (after the 0xD1) in out; TYPE_INFO bytes in ti. */
static size_t encode_one(sim_type t, bool nullable, sim_value v, uint8_t *out, size_t cap,
                         uint8_t *ti, size_t *tin) {
    rig g;
    rig_init(&g, 4096);
    sim_tds_result_begin(&g.res, false, true);
    sim_column c = {"c", t, nullable};
    g.sink.columns(g.sink.ctx, &c, 1);
    size_t meta_end = g.out.pos - 8;
    g.sink.row(g.sink.ctx, &v, 1);
    size_t row_end = g.out.pos - 8;
    sim_tds_result_end_batch(&g.res);
    rig_finish(&g);
    /* COLMETADATA: 81 0100 usertype(4) flags(2) TYPE_INFO name(1+2) */
    size_t ti_start = 1 + 2 + 4 + 2;
    *tin = meta_end - ti_start - 3;
    memcpy(ti, g.payload.data + ti_start, *tin);
    size_t n = row_end - meta_end - 1;
    if (n > cap) n = cap;
    memcpy(out, g.payload.data + meta_end + 1, n);
    rig_free(&g);
    return n;
}

#define ENC(type, nullable, val, want_ti, want_val)                                      \
    do {                                                                                 \
        uint8_t v_[256], ti_[512];                                                       \
        size_t tin_;                                                                     \
        size_t n_ = encode_one(type, nullable, val, v_, sizeof v_, ti_, &tin_);          \
        CHECK_EQ_INT(tin_, strlen(want_ti) / 2);                                         \
        CHECK(hexcmp(ti_, want_ti) == 0);                                                \
        CHECK_EQ_INT(n_, strlen(want_val) / 2);                                          \
        CHECK(hexcmp(v_, want_val) == 0);                                                \
    } while (0)

/* A sql_variant value of base type type (sim_variant.h's form). */
static sim_value VAR(const char *type, const char *val) {
    static char bufs[16][256];
    static int next;
    char *b = bufs[next++ % 16];
    sim_type t;
    sim_type_parse(&t, type, strlen(type));
    size_t h = sim_variant_header(b, 256, &t);
    snprintf(b + h, 256 - h, "%s", val);
    return (sim_value){.kind = SIM_V_TEXT, .p = (const uint8_t *)b, .n = strlen(b)};
}

static sim_type ty(sim_type_id id, int p, int s, int len) {
    return (sim_type){id, (uint8_t)p, (uint8_t)s, len};
}

TEST(sim_tds_encode_numbers) {
    const mcdc_log_sink *saved = mcdc_log_use(&mcdc_test_quiet); /* the overflow cases warn */
    sim_value i = {.kind = SIM_V_INT, .i = -2};
    sim_value nul = {0};
    ENC(ty(SIM_T_INT, 0, 0, 0), true, i, "2604", "04feffffff");
    ENC(ty(SIM_T_INT, 0, 0, 0), false, i, "38", "feffffff");
    ENC(ty(SIM_T_INT, 0, 0, 0), true, nul, "2604", "00");
    ENC(ty(SIM_T_BIGINT, 0, 0, 0), true, T("42"), "2608", "082a00000000000000");
    ENC(ty(SIM_T_TINYINT, 0, 0, 0), true, ((sim_value){.kind = SIM_V_INT, .i = 255}), "2601",
        "01ff");
    ENC(ty(SIM_T_BIT, 0, 0, 0), true, ((sim_value){.kind = SIM_V_INT, .i = 5}), "6801", "0101");
    ENC(ty(SIM_T_BIT, 0, 0, 0), true, T("TRUE"), "6801", "0101");
    ENC(ty(SIM_T_BIT, 0, 0, 0), false, T("false"), "32", "00");
    ENC(ty(SIM_T_FLOAT, 0, 0, 0), true, ((sim_value){.kind = SIM_V_REAL, .f = 2.5}), "6d08",
        "080000000000000440");
    ENC(ty(SIM_T_REAL, 0, 0, 0), false, ((sim_value){.kind = SIM_V_REAL, .f = 2.5}), "3b",
        "00002040");
    /* decimal(38,0) extremes, decimal(5,2) from an int and from a double */
    ENC(ty(SIM_T_DECIMAL, 38, 0, 0), true, T("99999999999999999999999999999999999999"),
        "6a112600", "1101ffffffff3f228a097ac4865aa84c3b4b");
    ENC(ty(SIM_T_DECIMAL, 38, 0, 0), true, T("-99999999999999999999999999999999999999"),
        "6a112600", "1100ffffffff3f228a097ac4865aa84c3b4b");
    ENC(ty(SIM_T_DECIMAL, 5, 2, 0), true, ((sim_value){.kind = SIM_V_INT, .i = 42}), "6a050502",
        "0501681000" "00");
    ENC(ty(SIM_T_DECIMAL, 5, 2, 0), true, ((sim_value){.kind = SIM_V_REAL, .f = -1.255}),
        "6a050502", "05007e000000");
    ENC(ty(SIM_T_DECIMAL, 19, 4, 0), true, T("1.5"), "6a091304", "0901983a000000000000");
    /* overflow -> NULL, never a corrupt value */
    ENC(ty(SIM_T_DECIMAL, 5, 2, 0), true, T("1000"), "6a050502", "00");
    /* money: -922337203685477.5808 is the minimum; smallmoney NOT NULL */
    ENC(ty(SIM_T_MONEY, 0, 0, 0), true, T("-922337203685477.5808"), "6e08",
        "080000008000000000");
    ENC(ty(SIM_T_SMALLMONEY, 0, 0, 0), false, T("1.0001"), "7a", "11270000");
    mcdc_log_use(saved);
}

TEST(sim_tds_encode_dates_and_guid) {
    const mcdc_log_sink *saved = mcdc_log_use(&mcdc_test_quiet); /* the bad date warns */
    ENC(ty(SIM_T_DATETIME2, 0, 7, 0), true, T("2024-02-29 23:59:59.1234567"), "2a07",
        "080700e429c980460b");
    ENC(ty(SIM_T_DATETIMEOFFSET, 0, 7, 0), true, T("2024-01-01 01:30:00.5000000 -03:00"), "2b07",
        "0a401f40b82545460b4cff");
    /* datetime2(0) rounds .5 up and carries into the next day */
    ENC(ty(SIM_T_DATETIME2, 0, 0, 0), true, T("2024-02-28 23:59:59.6"), "2a00",
        "0600000080460b");
    ENC(ty(SIM_T_DATE, 0, 0, 0), true, T("0001-01-01"), "28", "03000000");
    ENC(ty(SIM_T_DATE, 0, 0, 0), true, T("9999-12-31"), "28", "03dab937");
    ENC(ty(SIM_T_TIME, 0, 3, 0), true, T("12:34:56.789"), "2903", "04952cb302");
    ENC(ty(SIM_T_DATETIME, 0, 0, 0), true, T("2023-12-31 23:59:59.997"), "6f08",
        "08e9b00000ff818b01");
    ENC(ty(SIM_T_DATETIME, 0, 0, 0), false, T("1900-01-01 00:00:00"), "3d", "0000000000000000");
    ENC(ty(SIM_T_SMALLDATETIME, 0, 0, 0), true, T("1900-01-02 00:01:30"), "6f04", "0401000200");
    ENC(ty(SIM_T_UNIQUEIDENTIFIER, 0, 0, 0), true, T("00112233-4455-6677-8899-AABBCCDDEEFF"),
        "2410", "1033221100554477668899aabbccddeeff");
    ENC(ty(SIM_T_DATETIME2, 0, 7, 0), true, T("not a date"), "2a07", "00");
    /* a date alone is midnight; a time alone is on 1900-01-01 (SQL Server's conversions) */
    ENC(ty(SIM_T_DATETIME2, 0, 0, 0), true, T("2024-02-29"), "2a00", "0600000080460b");
    ENC(ty(SIM_T_DATETIME, 0, 0, 0), true, T("00:00:01"), "6f08", "08" "00000000" "2c010000");
    ENC(ty(SIM_T_TIME, 0, 0, 0), true, T("2024-02-29 00:00:02"), "2900", "03020000");
    mcdc_log_use(saved);
}

TEST(sim_tds_encode_strings_and_binary) {
    /* nvarchar(10) with a non-BMP character: surrogate pair */
    ENC(ty(SIM_T_NVARCHAR, 0, 0, 10), true, T("\xC3\xA9\xF0\x9F\x98\x80"),
        "e71400" "0904d00034", "0600e9003dd800de");
    /* truncated at the column length */
    ENC(ty(SIM_T_NVARCHAR, 0, 0, 2), true, T("abc"), "e70400" "0904d00034", "040061006200");
    ENC(ty(SIM_T_NCHAR, 0, 0, 3), true, T("a"), "ef0600" "0904d00034", "0600610020002000");
    /* varchar: UTF-8 -> CP1252, unrepresentable -> '?' */
    ENC(ty(SIM_T_VARCHAR, 0, 0, 20), true, T("\xC3\xA9\xE2\x82\xAC\xE4\xB8\xAD"),
        "a71400" "0904d00034", "0300e9803f");
    ENC(ty(SIM_T_CHAR, 0, 0, 4), true, T("ab"), "af0400" "0904d00034", "040061622020");
    ENC(ty(SIM_T_VARCHAR, 0, 0, 20), true, ((sim_value){0}), "a71400" "0904d00034", "ffff");
    /* (max) types are PLP: total length, one chunk, terminator */
    ENC(ty(SIM_T_NVARCHAR, 0, 0, -1), true, T("hi"), "e7ffff" "0904d00034",
        "0400000000000000" "04000000" "68006900" "00000000");
    ENC(ty(SIM_T_NVARCHAR, 0, 0, -1), true, T(""), "e7ffff" "0904d00034",
        "0000000000000000" "00000000");
    ENC(ty(SIM_T_VARBINARY, 0, 0, -1), true, ((sim_value){0}), "a5ffff", "ffffffffffffffff");
    static const uint8_t bl[] = {1, 2, 3};
    sim_value b = {.kind = SIM_V_BLOB, .p = bl, .n = 3};
    ENC(ty(SIM_T_VARBINARY, 0, 0, 8), true, b, "a50800", "0300010203");
    ENC(ty(SIM_T_BINARY, 0, 0, 5), true, b, "ad0500", "05000102030000");
    ENC(ty(SIM_T_VARBINARY, 0, 0, -1), true, b, "a5ffff",
        "0300000000000000" "03000000" "010203" "00000000");
    /* sql_variant (MS-TDS 2.2.5.5.4): TYPE_INFO LONG max length 8016; a
     * value is LONG length, base type, property bytes, properties, data */
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, ((sim_value){.kind = SIM_V_INT, .i = 16}),
        "62501f0000", "06000000" "38" "00" "10000000");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, ((sim_value){0}), "62501f0000", "00000000");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, VAR("nvarchar(5)", "hi"), "62501f0000",
        "0d000000" "e7" "07" "0904d00034" "0a00" "68006900");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, VAR("varchar(3)", "ab"), "62501f0000",
        "0b000000" "a7" "07" "0904d00034" "0300" "6162");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, VAR("decimal(5,2)", "1.50"), "62501f0000",
        "09000000" "6a" "02" "0502" "01" "96000000");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, VAR("bigint", "-2"), "62501f0000",
        "0a000000" "7f" "00" "feffffffffffffff");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, VAR("varbinary(4)", "0A0B"), "62501f0000",
        "06000000" "a5" "02" "0400" "0a0b");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, VAR("date", "0001-01-02"), "62501f0000",
        "05000000" "28" "00" "010000");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, VAR("datetime2(2)", "0001-01-01 00:00:01.00"), "62501f0000",
        "09000000" "2a" "01" "02" "640000" "000000");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, VAR("float", "2.5"), "62501f0000",
        "0a000000" "3e" "00" "0000000000000440");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, VAR("uniqueidentifier", "00112233-4455-6677-8899-AABBCCDDEEFF"),
        "62501f0000", "12000000" "24" "00" "33221100554477668899aabbccddeeff");
    ENC(ty(SIM_T_SQL_VARIANT, 0, 0, 0), true, T("plain"), "62501f0000",
        "13000000" "e7" "07" "0904d00034" "401f" "70006c00610069006e00");
    /* xml (MS-TDS 2.2.5.5.3): XMLTYPE, no schema; UTF-16LE text in PLP */
    ENC(ty(SIM_T_XML, 0, 0, 0), true, T("<a />"), "f100",
        "0a00000000000000" "0a000000" "3c0061002000" "2f003e00" "00000000");
    ENC(ty(SIM_T_XML, 0, 0, 0), true, ((sim_value){0}), "f100", "ffffffffffffffff");
}

/* The CLR types (MS-TDS 2.2.5.5.2): UDTTYPE, max bytes (hierarchyid 892,
 * the spatial types 0xFFFF), database, schema, type and assembly-qualified
 * names; the serialized bytes in PLP. */
TEST(sim_tds_encode_clr_types) {
    static const uint8_t h[] = {0x5A, 0xC0};
    sim_value hv = {.kind = SIM_V_BLOB, .p = h, .n = 2};
    /* "master" (no session), "sys", "hierarchyid", then the assembly name */
    const char *aqn = "Microsoft.SqlServer.Types.SqlHierarchyId, Microsoft.SqlServer.Types, Version=11.0.0.0, Culture=neutral, PublicKeyToken=89845dcd8080cc91";
    char want[1024];
    size_t o = (size_t)snprintf(want, sizeof want, "f07c03" "06");
    for (const char *p = "master"; *p; p++) o += (size_t)snprintf(want + o, sizeof want - o, "%02x00", *p);
    o += (size_t)snprintf(want + o, sizeof want - o, "03");
    for (const char *p = "sys"; *p; p++) o += (size_t)snprintf(want + o, sizeof want - o, "%02x00", *p);
    o += (size_t)snprintf(want + o, sizeof want - o, "0b");
    for (const char *p = "hierarchyid"; *p; p++) o += (size_t)snprintf(want + o, sizeof want - o, "%02x00", *p);
    o += (size_t)snprintf(want + o, sizeof want - o, "%02x%02x", (unsigned)strlen(aqn) & 0xFF, (unsigned)strlen(aqn) >> 8);
    for (const char *p = aqn; *p && o + 4 < sizeof want; p++) o += (size_t)snprintf(want + o, sizeof want - o, "%02x00", *p);
    ENC(ty(SIM_T_HIERARCHYID, 0, 0, 0), true, hv, want, "0200000000000000" "02000000" "5ac0" "00000000");
    ENC(ty(SIM_T_HIERARCHYID, 0, 0, 0), true, ((sim_value){0}), want, "ffffffffffffffff");
    uint8_t v_[256], ti_[512];
    size_t tin;
    encode_one(ty(SIM_T_GEOGRAPHY, 0, 0, 0), true, hv, v_, sizeof v_, ti_, &tin);
    CHECK(ti_[0] == 0xF0 && ti_[1] == 0xFF && ti_[2] == 0xFF); /* unlimited */
    CHECK(tin > 20 && memmem(ti_, tin, "g\0e\0o\0g\0r\0a\0p\0h\0y\0", 18) != NULL);
    CHECK(memmem(ti_, tin, "S\0q\0l\0G\0e\0o\0g\0r\0a\0p\0h\0y\0", 24) != NULL);
    encode_one(ty(SIM_T_GEOMETRY, 0, 0, 0), true, hv, v_, sizeof v_, ti_, &tin);
    CHECK(memmem(ti_, tin, "S\0q\0l\0G\0e\0o\0m\0e\0t\0r\0y\0", 22) != NULL);
}

TEST(sim_tds_result_done_flags_and_split_tokens) {
    rig g;
    rig_init(&g, 512);
    sim_tds_result_begin(&g.res, false, true);
    sim_column cols[2] = {{"id", {SIM_T_INT, 0, 0, 0}, false},
                          {"s", {SIM_T_NVARCHAR, 0, 0, 200}, true}};
    CHECK_EQ_INT(g.sink.columns(g.sink.ctx, cols, 2), 0);
    char text[201];
    memset(text, 'x', 200);
    text[200] = 0;
    for (int i = 0; i < 20; i++) {
        sim_value v[2] = {{.kind = SIM_V_INT, .i = i}, T(text)};
        CHECK_EQ_INT(g.sink.row(g.sink.ctx, v, 2), 0);
    }
    CHECK_EQ_INT(g.sink.done(g.sink.ctx, 20, true, false, false), 0);
    CHECK_EQ_INT(g.sink.message(g.sink.ctx, true, 208, 1, 16, "Invalid object name 'x'.", "", 1),
                 0);
    CHECK_EQ_INT(g.sink.done(g.sink.ctx, 0, false, false, true), 0);
    CHECK_EQ_INT(sim_tds_result_end_batch(&g.res), 0);
    int packets = rig_finish(&g);
    CHECK(packets > 10); /* rows of 405 bytes in 504-byte packets: tokens split */
    /* walk the tokens of the reassembled payload */
    const uint8_t *p = g.payload.data;
    size_t n = g.payload.len, i = 0;
    int rows = 0, dones = 0;
    uint16_t st[4] = {0};
    uint64_t cnt[4] = {0};
    CHECK_EQ_INT(p[0], TDS_TOK_COLMETADATA);
    i = 1 + 2 + (4 + 2 + 1 + 5) + (4 + 2 + 1 + 2 + 5 + 3);
    while (i < n) {
        if (p[i] == TDS_TOK_ROW) {
            CHECK_EQ_INT(p[i + 1] | p[i + 2] << 8, rows); /* INT4 NOT NULL */
            size_t len = (size_t)(p[i + 5] | p[i + 6] << 8);
            CHECK_EQ_INT(len, 400);
            i += 1 + 4 + 2 + len;
            rows++;
        } else if (p[i] == TDS_TOK_DONE) {
            if (dones < 4) {
                st[dones] = (uint16_t)(p[i + 1] | p[i + 2] << 8);
                cnt[dones] = p[i + 5];
            }
            dones++;
            i += 13;
        } else if (p[i] == TDS_TOK_ERROR) {
            i += 3 + (size_t)(p[i + 1] | p[i + 2] << 8);
        } else {
            break;
        }
    }
    CHECK_EQ_INT(i, n);
    CHECK_EQ_INT(rows, 20);
    CHECK_EQ_INT(dones, 2);
    CHECK_EQ_INT(st[0], TDS_DONE_MORE | TDS_DONE_COUNT);
    CHECK_EQ_INT(cnt[0], 20);
    CHECK_EQ_INT(st[1], TDS_DONE_ERROR); /* the last: no DONE_MORE */
    rig_free(&g);
}

TEST(sim_tds_result_rpc_ends_with_doneproc) {
    rig g;
    rig_init(&g, 4096);
    sim_tds_result_begin(&g.res, true, true);
    sim_column c = {"", {SIM_T_INT, 0, 0, 0}, true};
    sim_value v = {.kind = SIM_V_INT, .i = 1};
    g.sink.columns(g.sink.ctx, &c, 1);
    g.sink.row(g.sink.ctx, &v, 1);
    g.sink.done(g.sink.ctx, 1, true, false, false);
    CHECK_EQ_INT(sim_tds_result_end_rpc(&g.res, false), 0);
    sim_tds_result_begin(&g.res, true, false);
    g.sink.transaction(g.sink.ctx, TDS_ENV_BEGINTRAN, 0x0102030405060708ULL);
    g.sink.done(g.sink.ctx, 0, false, true, false);
    CHECK_EQ_INT(sim_tds_result_end_rpc(&g.res, true), 0);
    CHECK_EQ_INT(rig_finish(&g), 1);
    const uint8_t *p = g.payload.data;
    size_t n = g.payload.len;
    /* ... ROW, DONEINPROC(MORE|COUNT, 1), RETURNSTATUS 0, DONEPROC(MORE) */
    const char *first = "d10401000000" "ff1100c1000100000000000000" "7900000000"
                        "fe01000000" "0000000000000000";
    size_t meta = 1 + 2 + 4 + 2 + 2 + 1;
    CHECK(hexcmp(p + meta, first) == 0);
    /* ENVCHANGE 8 with the descriptor, DONEINPROC(MORE|INXACT), RETURNSTATUS, DONEPROC final */
    const char *second = "e30b0008" "080807060504030201" "00" "ff0500c1000000000000000000"
                         "7900000000" "fe04000000";
    CHECK(hexcmp(p + meta + strlen(first) / 2, second) == 0);
    CHECK_EQ_INT(n, meta + strlen(first) / 2 + strlen(second) / 2 + 8);
    rig_free(&g);
}

TEST(sim_tds_result_attention_and_dead_peer) {
    rig g;
    rig_init(&g, 512);
    sim_tds_result_begin(&g.res, false, true);
    sim_column c = {"n", {SIM_T_BIGINT, 0, 0, 0}, true};
    g.sink.columns(g.sink.ctx, &c, 1);
    CHECK_EQ_INT(sim_tds_result_attention_ack(&g.res), 0);
    CHECK_EQ_INT(rig_finish(&g), 1);
    CHECK(hexcmp(g.payload.data + g.payload.len - 13, "fd2000") == 0);
    mcdc_buf_reset(&g.cap.raw);
    /* the peer goes away: the row callback asks the engine to stop */
    g.cap.fail_after = g.cap.packets + 1;
    sim_tds_result_begin(&g.res, false, true);
    g.sink.columns(g.sink.ctx, &c, 1);
    int stop = 0;
    for (int i = 0; i < 1000 && !stop; i++) {
        sim_value v = {.kind = SIM_V_INT, .i = i};
        stop = g.sink.row(g.sink.ctx, &v, 1);
    }
    CHECK(stop != 0);
    CHECK(g.res.stopped);
    rig_free(&g);
}

TEST(sim_tds_result_nbcrow_when_nulls_pay) {
    rig g;
    rig_init(&g, 4096);
    g.res.nbcrow = true;
    sim_tds_result_begin(&g.res, false, true);
    sim_column c[10];
    for (int i = 0; i < 10; i++) c[i] = (sim_column){"", {SIM_T_INT, 0, 0, 0}, true};
    c[9].type = (sim_type){SIM_T_NVARCHAR, 0, 0, -1};
    CHECK_EQ_INT(g.sink.columns(g.sink.ctx, c, 10), 0);
    size_t meta_end = g.out.pos;
    sim_value v[10];
    memset(v, 0, sizeof v);
    v[3] = (sim_value){.kind = SIM_V_INT, .i = 7};
    CHECK_EQ_INT(g.sink.row(g.sink.ctx, v, 10), 0); /* 9 NULLs: NBCROW */
    size_t row1_end = g.out.pos;
    for (int i = 0; i < 9; i++) v[i] = (sim_value){.kind = SIM_V_INT, .i = i};
    v[0].kind = SIM_V_NULL;
    v[9] = T("x");
    CHECK_EQ_INT(g.sink.row(g.sink.ctx, v, 10), 0); /* one INTN NULL: 1 byte < 2: ROW */
    size_t row2_end = g.out.pos;
    const uint8_t *b = g.out.buf;
    /* D2, bitmap: cols 0-2,4-7 -> 0xF7; cols 8,9 -> 0x03; then col 3 only */
    CHECK_EQ_INT(row1_end - meta_end, 1 + 2 + 5);
    CHECK(hexcmp(b + meta_end, "d2f70304" "07000000") == 0);
    CHECK_EQ_INT(b[row1_end], TDS_TOK_ROW);
    CHECK_EQ_INT(row2_end - row1_end, 1 + 1 + 8 * 5 + (8 + 4 + 2 + 4));
    /* without 7.3B the same row is a ROW token */
    g.res.nbcrow = false;
    memset(v, 0, sizeof v);
    size_t before = g.out.pos;
    CHECK_EQ_INT(g.sink.row(g.sink.ctx, v, 10), 0);
    CHECK_EQ_INT(b[before], TDS_TOK_ROW);
    CHECK_EQ_INT(g.out.pos - before, 1 + 9 + 8);
    sim_tds_result_end_batch(&g.res);
    rig_free(&g);
}

TEST(tds_result_return_values) {
    rig g;
    rig_init(&g, 4096);
    sim_tds_result_begin(&g.res, true, true);
    g.res.has_handle = true;
    g.res.handle = 7;
    strcpy(g.res.handle_name, "@h");
    CHECK_EQ_INT(sim_tds_result_end_rpc(&g.res, false), 0);
    sim_tds_result_begin(&g.res, true, false);
    sim_type dt = {SIM_T_DECIMAL, 10, 2, 0};
    sim_value dv = T("1.5");
    CHECK_EQ_INT(sim_tds_result_return_value(&g.res, 1, "@d", &dt, &dv), 0);
    CHECK_EQ_INT(sim_tds_result_end_rpc(&g.res, true), 0);
    CHECK_EQ_INT(rig_finish(&g), 1);
    const char *want = "7900000000"                                       /* RETURNSTATUS */
                       "ac0000" "02400068" "00" "01" "00000000" "0100" "2604" "0407000000"
                       "fe0100000000000000000000" "00"                    /* DONEPROC MORE */
                       "ac0100" "02400064" "00" "01" "00000000" "0100" "6a090a02"
                       "09019600000000000000"                              /* 150 */
                       "7900000000" "fe0000000000000000000000" "00";
    CHECK_EQ_INT(g.payload.len, strlen(want) / 2);
    CHECK(hexcmp(g.payload.data, want) == 0);
    rig_free(&g);
}

static int attention_after_3(void *ctx, sim_tds_result *r, int what) {
    int *n = ctx;
    if (what == 0 && ++*n > 3) {
        r->attention = true;
        return 1;
    }
    return 0;
}

TEST(tds_result_stops_at_a_token_boundary) {
    rig g;
    rig_init(&g, 4096);
    int n = 0;
    g.res.check = attention_after_3;
    g.res.check_ctx = &n;
    sim_tds_result_begin(&g.res, false, true);
    sim_column c = {"n", {SIM_T_INT, 0, 0, 0}, false};
    CHECK_EQ_INT(g.sink.columns(g.sink.ctx, &c, 1), 0);
    sim_value v = {.kind = SIM_V_INT, .i = 1};
    int rc = 0, sent = 0;
    for (int i = 0; i < 10 && rc == 0; i++) {
        rc = g.sink.row(g.sink.ctx, &v, 1);
        if (rc == 0) sent++;
    }
    CHECK_EQ_INT(sent, 3);
    size_t pos = g.out.pos;
    /* an engine that goes on anyway writes nothing more */
    CHECK(g.sink.row(g.sink.ctx, &v, 1) != 0);
    CHECK(g.sink.done(g.sink.ctx, 4, true, false, false) != 0);
    CHECK_EQ_INT(g.out.pos, pos);
    CHECK(g.res.attention);
    CHECK_EQ_INT(sim_tds_result_attention_ack(&g.res), 0);
    CHECK_EQ_INT(rig_finish(&g), 1);
    /* COLMETADATA (1+2+4+2+1+3), three ROWs of 5 bytes, DONE(ATTN) */
    CHECK_EQ_INT(g.payload.len, 13 + 3 * 5 + 13);
    CHECK(hexcmp(g.payload.data + 13 + 15, "fd2000") == 0);
    rig_free(&g);
}

/* sp_prepexec as tds_server.c runs it: the engine gets sp_executesql with
 * the values, the handle goes out first (ordinal 0), then the OUTPUT
 * parameter with its ordinal in the RPC as sent (handle, @params, @stmt,
 * @i = 3, @o = 4), then DONEPROC. */
TEST(sim_tds_rpc_output_parameter_bytes) {
    char dir[64] = "/tmp/simtest-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    sim_config cfg = {dir, "Sa_Passw0rd", "UTC", 16, 0, 0, 500};
    sim_server *srv = NULL;
    sim_session *s = NULL;
    CHECK_EQ_INT(sim_server_open(&srv, &cfg, NULL), MCDC_OK);
    CHECK_EQ_INT(sim_login(srv, &s, "sa", "Sa_Passw0rd", NULL, "test", NULL), MCDC_OK);
    if (!s) return;
    rig g;
    rig_init(&g, 4096);
    sim_tds_result_begin(&g.res, true, true);
    g.res.has_handle = true;
    g.res.handle = 1;
    strcpy(g.res.handle_name, "@h");
    g.res.rv_ordinal_shift = 5 - 4; /* the RPC's 5 parameters vs sp_executesql's 4 */
    const char *stmt = "SET @o = @i * 2", *decl = "@i int, @o int OUTPUT";
    sim_param p[4];
    memset(p, 0, sizeof p);
    p[0] = (sim_param){"@stmt", {SIM_T_NVARCHAR, 0, 0, -1}, T(stmt), false};
    p[1] = (sim_param){"@params", {SIM_T_NVARCHAR, 0, 0, -1}, T(decl), false};
    p[2] = (sim_param){"", {SIM_T_INT, 0, 0, 0}, {.kind = SIM_V_INT, .i = 21}, false};
    p[3] = (sim_param){"", {SIM_T_INT, 0, 0, 0}, {.kind = SIM_V_NULL}, true};
    CHECK_EQ_INT(sim_exec_rpc(s, "sp_executesql", p, 4, &g.sink), SIM_EXEC_OK);
    CHECK_EQ_INT(sim_tds_result_end_rpc(&g.res, true), 0);
    CHECK_EQ_INT(rig_finish(&g), 1);
    /* RETURNSTATUS 0; RETURNVALUE ordinal 0 "@h" status 1 usertype 0 flags 1 INTN(4) 1;
     * RETURNVALUE ordinal 4 "@o" INTN(4) 42; DONEINPROC; DONEPROC final */
    const char *want = "7900000000"
                       "ac0000" "02400068" "00" "01" "00000000" "0100" "2604" "0401000000"
                       "ac0400" "0240006f" "00" "01" "00000000" "0100" "2604" "042a000000";
    const uint8_t *at = NULL;
    for (size_t k = 0; k + strlen(want) / 2 <= g.payload.len && !at; k++)
        if (hexcmp(g.payload.data + k, want) == 0) at = g.payload.data + k;
    CHECK(at != NULL);
    CHECK_EQ_INT(g.payload.data[g.payload.len - 13], 0xFE); /* DONEPROC last */
    rig_free(&g);
    sim_session_close(s);
    sim_server_close(srv);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(cmd), 0);
}
