/*
 * tds_wire.c - packets, text conversion, PRELOGIN/LOGIN7, login reply,
 * tokens, SQL batch decoding and the value text forms (decimal, date/time,
 * GUID). See tds_wire.h.
 */
#include "tds_wire.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

_Static_assert(TDS_HEADER_BYTES == 8, "TDS packet header is 8 bytes");
_Static_assert(MCDC_TDS_PACKET_BYTES_MAX <= 0xFFFF, "packet length is a USHORT");

const uint8_t sim_tds_collation_default[5] = {0x09, 0x04, 0xD0, 0x00, 0x34};

static inline uint16_t rd_u16le(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t rd_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static inline uint16_t rd_u16be(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

/* ---- packets in ------------------------------------------------------------ */
int sim_tds_msg_read(sim_tds_msg *m, sim_tds_read_fn rd, void *ctx, mcdc_error *err) {
    mcdc_buf_reset(&m->payload);
    m->type = 0;
    m->status = 0;
    size_t limit = MCDC_TDS_MESSAGE_BYTES_MAX;
    for (int first = 1;; first = 0) {
        uint8_t h[TDS_HEADER_BYTES];
        if (rd(ctx, h, sizeof h) != 0) {
            if (first) return mcdc_error_set(err, MCDC_E_IO, "connection closed by the client");
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "connection closed in the middle of a message");
        }
        size_t len = rd_u16be(h + 2);
        if (len < TDS_HEADER_BYTES)
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "packet length %zu is shorter than its header", len);
        if (first) {
            m->type = h[0];
            m->status = h[1];
            if (m->type == TDS_PKT_LOGIN7) limit = MCDC_TDS_LOGIN7_BYTES_MAX;
            else if (m->type == TDS_PKT_PRELOGIN) limit = MCDC_TDS_PRELOGIN_BYTES_MAX;
            else if (m->login_phase)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "packet type 0x%02x before login (only PRELOGIN and LOGIN7 are"
                                      " accepted before it)", m->type);
        } else if (h[0] != m->type) {
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "packet of type 0x%02x inside a message of type 0x%02x", h[0],
                                  m->type);
        }
        size_t body = len - TDS_HEADER_BYTES;
        if (m->payload.len + body > limit)
            return mcdc_error_set(err, m->login_phase ? MCDC_E_PROTOCOL : MCDC_E_LIMIT,
                                  "client message of type 0x%02x exceeds %zu bytes%s", m->type, limit,
                                  m->login_phase ? " before login: protocol error" : "");
        m->payload.limit = limit + 1;
        int rc = mcdc_buf_reserve(&m->payload, body, err);
        if (rc) return rc;
        if (body && rd(ctx, m->payload.data + m->payload.len, body) != 0)
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "connection closed inside a packet (%zu bytes announced)", len);
        m->payload.len += body;
        if (h[1] & TDS_STATUS_EOM) break;
    }
    return MCDC_OK;
}

void sim_tds_msg_free(sim_tds_msg *m) {
    if (m) mcdc_buf_free(&m->payload);
}

/* ---- packets out ------------------------------------------------------------ */
int sim_tds_out_init(sim_tds_out *o, sim_tds_write_fn w, void *wctx, mcdc_error *err) {
    memset(o, 0, sizeof *o);
    o->region = mcdc_malloc(MCDC_TDS_PACKET_BYTES_MAX);
    if (!o->region)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for a TDS packet buffer");
    o->region_bytes = MCDC_TDS_PACKET_BYTES_MAX;
    o->buf = o->region;
    o->size = MCDC_TDS_PACKET_BYTES_DEFAULT;
    o->pos = TDS_HEADER_BYTES;
    o->write = w;
    o->wctx = wctx;
    o->type = TDS_PKT_REPLY;
    o->packet_id = 1;
    return MCDC_OK;
}

void sim_tds_out_free(sim_tds_out *o) {
    if (!o) return;
    mcdc_free(o->region);
    o->region = o->buf = NULL;
}

int sim_tds_out_hold(sim_tds_out *o, size_t region_bytes, mcdc_error *err) {
    MCDC_ASSERT(o->held == 0 && region_bytes <= TDS_OUT_HOLD_BYTES_MAX);
    if (region_bytes < MCDC_TDS_PACKET_BYTES_MAX) region_bytes = MCDC_TDS_PACKET_BYTES_MAX;
    uint8_t *r = mcdc_malloc(region_bytes);
    if (!r)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for %zu bytes of TDS packets",
                              region_bytes);
    memcpy(r, o->buf, o->pos);
    mcdc_free(o->region);
    o->region = o->buf = r;
    o->region_bytes = region_bytes;
    o->holding = true;
    return MCDC_OK;
}

void sim_tds_out_begin(sim_tds_out *o, uint8_t type) {
    MCDC_ASSERT(o->held == 0 || o->failed);
    o->type = type;
    o->packet_id = 1;
    o->held = 0;
    o->buf = o->region;
    o->pos = TDS_HEADER_BYTES;
}

int sim_tds_out_push(sim_tds_out *o) {
    if (o->held == 0) return o->failed ? -1 : 0;
    size_t n = o->held;
    o->held = 0;
    if (!o->failed && o->write(o->wctx, o->region, n) != 0) o->failed = 1;
    memmove(o->region, o->buf, o->pos);
    o->buf = o->region;
    return o->failed ? -1 : 0;
}

static int out_send(sim_tds_out *o, uint8_t status) {
    MCDC_ASSERT(o->pos >= TDS_HEADER_BYTES && o->pos <= o->size);
    MCDC_ASSERT(o->buf == o->region + o->held && o->held + o->size <= o->region_bytes);
    uint8_t *h = o->buf;
    h[0] = o->type;
    h[1] = status;
    h[2] = (uint8_t)(o->pos >> 8);
    h[3] = (uint8_t)o->pos;
    h[4] = (uint8_t)(o->spid >> 8);
    h[5] = (uint8_t)o->spid;
    h[6] = o->packet_id;
    h[7] = 0;
    o->packet_id = (uint8_t)(o->packet_id + 1);
    o->held += o->pos;
    o->pos = TDS_HEADER_BYTES;
    /* hold the packet while another full one fits behind it */
    if (status != TDS_STATUS_EOM && o->holding && o->region_bytes - o->held >= o->size) {
        o->buf = o->region + o->held;
        return o->failed ? -1 : 0;
    }
    size_t n = o->held;
    o->held = 0;
    o->buf = o->region;
    if (o->failed) return -1;
    if (o->write(o->wctx, o->region, n) != 0) o->failed = 1;
    return o->failed ? -1 : 0;
}

int sim_tds_out_flush(sim_tds_out *o) { return out_send(o, 0); }

int sim_tds_out_end(sim_tds_out *o) { return out_send(o, TDS_STATUS_EOM); }

int sim_tds_out_bytes_slow(sim_tds_out *o, const void *p, size_t n) {
    const uint8_t *s = p;
    while (n) {
        size_t room = o->size - o->pos;
        if (room == 0) {
            if (sim_tds_out_flush(o) != 0) return -1;
            continue;
        }
        size_t k = n < room ? n : room;
        memcpy(o->buf + o->pos, s, k);
        o->pos += k;
        s += k;
        n -= k;
    }
    return o->failed ? -1 : 0;
}

/* ---- text ------------------------------------------------------------------- */
static const uint16_t cp1252_hi[32] = {
    0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
    0x2039, 0x0152, 0x008D, 0x017D, 0x008F, 0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
    0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178};

/* Decodes one code point at s[*i]; invalid or truncated sequences yield
 * U+FFFD and consume one byte. */
static inline uint32_t utf8_next(const uint8_t *s, size_t n, size_t *i) {
    uint8_t c = s[*i];
    if (c < 0x80) {
        (*i)++;
        return c;
    }
    size_t k;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
        k = 1;
        cp = c & 0x1Fu;
        min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        k = 2;
        cp = c & 0x0Fu;
        min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        k = 3;
        cp = c & 0x07u;
        min = 0x10000;
    } else {
        (*i)++;
        return 0xFFFD;
    }
    if (*i + k >= n) { /* needs bytes *i+1 .. *i+k */
        (*i)++;
        return 0xFFFD;
    }
    for (size_t j = 1; j <= k; j++) {
        uint8_t t = s[*i + j];
        if ((t & 0xC0) != 0x80) {
            (*i)++;
            return 0xFFFD;
        }
        cp = (cp << 6) | (t & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        (*i)++;
        return 0xFFFD;
    }
    *i += k + 1;
    return cp;
}

static size_t utf8_put(uint8_t *d, uint32_t cp) {
    if (cp < 0x80) {
        d[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (uint8_t)(0xC0 | (cp >> 6));
        d[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (uint8_t)(0xE0 | (cp >> 12));
        d[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (uint8_t)(0xF0 | (cp >> 18));
    d[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int sim_tds_utf16_to_utf8(mcdc_buf *b, const uint8_t *p, size_t n, mcdc_error *err) {
    if (n & 1)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "UTF-16 text has an odd byte count %zu", n);
    int rc = mcdc_buf_reserve(b, n / 2 * 3 + 1, err);
    if (rc) return rc;
    uint8_t *d = b->data + b->len;
    for (size_t i = 0; i < n; i += 2) {
        uint32_t u = rd_u16le(p + i);
        if (u >= 0xD800 && u <= 0xDBFF && i + 3 < n) {
            uint32_t lo = rd_u16le(p + i + 2);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                i += 2;
            } else {
                u = 0xFFFD;
            }
        } else if (u >= 0xD800 && u <= 0xDFFF) {
            u = 0xFFFD;
        }
        d += utf8_put(d, u); /* a pair is 4 bytes of input for 4 of output */
    }
    b->len = (size_t)(d - b->data);
    return MCDC_OK;
}

size_t sim_tds_utf8_utf16_units(const uint8_t *s, size_t n) {
    size_t units = 0, i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            units++;
            continue;
        }
        uint32_t cp = utf8_next(s, n, &i);
        units += cp >= 0x10000 ? 2 : 1;
    }
    return units;
}

int sim_tds_out_utf16(sim_tds_out *o, const uint8_t *s, size_t n, size_t max_units) {
    uint8_t tmp[512];
    size_t t = 0, units = 0, i = 0;
    while (i < n && units < max_units) {
        uint32_t cp = s[i] < 0x80 ? s[i++] : utf8_next(s, n, &i);
        if (cp >= 0x10000) {
            if (units + 2 > max_units) { /* a pair cut at the limit: a space keeps the count */
                tmp[t++] = ' ';
                tmp[t++] = 0;
                units++;
                break;
            }
            uint32_t v = cp - 0x10000;
            uint32_t hi = 0xD800 + (v >> 10), lo = 0xDC00 + (v & 0x3FF);
            tmp[t++] = (uint8_t)hi;
            tmp[t++] = (uint8_t)(hi >> 8);
            tmp[t++] = (uint8_t)lo;
            tmp[t++] = (uint8_t)(lo >> 8);
            units += 2;
        } else {
            tmp[t++] = (uint8_t)cp;
            tmp[t++] = (uint8_t)(cp >> 8);
            units++;
        }
        if (t > sizeof tmp - 4) {
            if (sim_tds_out_bytes(o, tmp, t)) return -1;
            t = 0;
        }
    }
    return sim_tds_out_bytes(o, tmp, t);
}

static uint8_t cp1252_from_cp(uint32_t cp) {
    if (cp < 0x80 || (cp >= 0xA0 && cp <= 0xFF)) return (uint8_t)cp;
    for (int k = 0; k < 32; k++)
        if (cp1252_hi[k] == cp) return (uint8_t)(0x80 + k);
    return '?';
}

size_t sim_tds_utf8_cp1252_len(const uint8_t *s, size_t n) {
    size_t len = 0, i = 0;
    while (i < n) {
        if (s[i] < 0x80)
            i++;
        else
            (void)utf8_next(s, n, &i);
        len++;
    }
    return len;
}

int sim_tds_out_cp1252(sim_tds_out *o, const uint8_t *s, size_t n, size_t max_bytes) {
    uint8_t tmp[512];
    size_t t = 0, w = 0, i = 0;
    while (i < n && w < max_bytes) {
        uint32_t cp = s[i] < 0x80 ? s[i++] : utf8_next(s, n, &i);
        tmp[t++] = cp1252_from_cp(cp);
        w++;
        if (t == sizeof tmp) {
            if (sim_tds_out_bytes(o, tmp, t)) return -1;
            t = 0;
        }
    }
    return sim_tds_out_bytes(o, tmp, t);
}

int sim_tds_cp1252_to_utf8(mcdc_buf *b, const uint8_t *p, size_t n, mcdc_error *err) {
    int rc = mcdc_buf_reserve(b, n * 3 + 1, err);
    if (rc) return rc;
    uint8_t *d = b->data + b->len;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = p[i];
        if (cp >= 0x80 && cp < 0xA0) cp = cp1252_hi[cp - 0x80];
        d += utf8_put(d, cp);
    }
    b->len = (size_t)(d - b->data);
    return MCDC_OK;
}

/* ---- PRELOGIN -------------------------------------------------------------- */
int sim_tds_prelogin_parse(sim_tds_prelogin *out, const uint8_t *p, size_t n, mcdc_error *err) {
    out->encryption = -1;
    out->mars = -1;
    size_t i = 0;
    for (int k = 0;; k++) {
        if (i >= n)
            return mcdc_error_set(err, MCDC_E_PROTOCOL, "PRELOGIN option table is not terminated");
        if (p[i] == TDS_PL_TERMINATOR) break;
        if (k > 64 || i + 5 > n)
            return mcdc_error_set(err, MCDC_E_PROTOCOL, "PRELOGIN option table is malformed");
        uint8_t tok = p[i];
        size_t off = rd_u16be(p + i + 1), len = rd_u16be(p + i + 3);
        if (off > n || len > n - off)
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "PRELOGIN option 0x%02x points outside the message", tok);
        if (tok == TDS_PL_ENCRYPTION && len >= 1) out->encryption = p[off];
        if (tok == TDS_PL_MARS && len >= 1) out->mars = p[off];
        i += 5;
    }
    return MCDC_OK;
}

int sim_tds_prelogin_reply(sim_tds_out *o, int version_major, int encryption) {
    /* 5 options x 5 bytes + terminator = 26; data: version 6, enc 1, instopt 1, mars 1 */
    uint8_t b[26 + 9];
    size_t i = 0, off = 26;
    const struct {
        uint8_t tok, len;
    } opt[5] = {{TDS_PL_VERSION, 6}, {TDS_PL_ENCRYPTION, 1}, {TDS_PL_INSTOPT, 1}, {TDS_PL_THREADID, 0}, {TDS_PL_MARS, 1}};
    for (int k = 0; k < 5; k++) {
        b[i++] = opt[k].tok;
        b[i++] = (uint8_t)(off >> 8);
        b[i++] = (uint8_t)off;
        b[i++] = 0;
        b[i++] = opt[k].len;
        off += opt[k].len;
    }
    b[i++] = TDS_PL_TERMINATOR;
    MCDC_ASSERT(i == 26);
    b[i++] = (uint8_t)version_major; /* VERSION: major, minor, build BE, sub-build */
    b[i++] = 0;
    b[i++] = TDS_PRODUCT_BUILD >> 8;
    b[i++] = TDS_PRODUCT_BUILD & 0xFF;
    b[i++] = 0;
    b[i++] = 0;
    b[i++] = (uint8_t)encryption;
    b[i++] = 0; /* INSTOPT: instance name matches */
    b[i++] = 0; /* MARS off */
    MCDC_ASSERT(i == sizeof b);
    sim_tds_out_begin(o, TDS_PKT_REPLY);
    if (sim_tds_out_bytes(o, b, sizeof b)) return -1;
    return sim_tds_out_end(o);
}

/* ---- LOGIN7 ----------------------------------------------------------------- */
static int login_str(char *dst, const uint8_t *p, size_t n, const uint8_t *slot, bool password,
                     const char *what, mcdc_error *err) {
    size_t off = rd_u16le(slot), chars = rd_u16le(slot + 2);
    dst[0] = 0;
    if (chars == 0) return MCDC_OK;
    if (chars > MCDC_SYSNAME_CHARS_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT, "LOGIN7 %s is %zu characters, more than %d",
                              what, chars, MCDC_SYSNAME_CHARS_MAX);
    if (off > n || chars * 2 > n - off)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "LOGIN7 %s points outside the message",
                              what);
    uint8_t raw[2 * MCDC_SYSNAME_CHARS_MAX];
    memcpy(raw, p + off, chars * 2);
    if (password)
        for (size_t k = 0; k < chars * 2; k++) {
            uint8_t x = (uint8_t)(raw[k] ^ 0xA5);
            raw[k] = (uint8_t)((x >> 4) | (x << 4));
        }
    mcdc_buf b = {0};
    b.limit = TDS_LOGIN_STR_BYTES;
    int rc = sim_tds_utf16_to_utf8(&b, raw, chars * 2, err);
    if (rc == MCDC_OK && b.len >= TDS_LOGIN_STR_BYTES)
        rc = mcdc_error_set(err, MCDC_E_LIMIT, "LOGIN7 %s is too long", what);
    if (rc == MCDC_OK) {
        memcpy(dst, b.data, b.len);
        dst[b.len] = 0;
    }
    if (b.data) memset(b.data, 0, b.cap);
    memset(raw, 0, sizeof raw);
    mcdc_buf_free(&b);
    return rc;
}

int sim_tds_login7_parse(sim_tds_login7 *out, const uint8_t *p, size_t n, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    if (n < 94)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "LOGIN7 of %zu bytes is shorter than 94", n);
    uint32_t total = rd_u32le(p);
    if (total > n || total < 94)
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "LOGIN7 length field %u does not match the %zu bytes received",
                              total, n);
    n = total;
    out->tds_version = rd_u32le(p + 4);
    out->packet_size = rd_u32le(p + 8);
    out->option_flags1 = p[24];
    out->option_flags2 = p[25];
    out->type_flags = p[26];
    out->option_flags3 = p[27];
    out->integrated_security = (out->option_flags2 & 0x80) != 0;
    uint32_t major = out->tds_version & 0xFF000000u;
    if (major != 0x71000000u && major != 0x72000000u && major != 0x73000000u &&
        major != 0x74000000u)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "LOGIN7 asks for TDS version 0x%08x; this server speaks 7.1 to 7.4",
                              out->tds_version);
    struct {
        char *dst;
        int slot;
        const char *what;
    } f[] = {{out->host, 0, "host name"},      {out->user, 1, "user name"},
             {out->password, 2, "password"},   {out->app, 3, "application name"},
             {out->server, 4, "server name"},  {out->library, 6, "library name"},
             {out->language, 7, "language"},   {out->database, 8, "database"}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        int rc = login_str(f[k].dst, p, n, p + 36 + 4 * f[k].slot, f[k].slot == 2, f[k].what, err);
        if (rc) {
            sim_tds_login7_wipe(out);
            return rc;
        }
    }
    if (out->option_flags3 & 0x10) {
        /* Extension slot: offset of a DWORD holding the FeatureExt offset. */
        size_t off = rd_u16le(p + 36 + 20), len = rd_u16le(p + 36 + 22);
        if (len >= 4 && off <= n && n - off >= 4) {
            size_t fe = rd_u32le(p + off);
            if (fe < n) out->feature_ext = true;
        }
        if (!out->feature_ext) {
            sim_tds_login7_wipe(out);
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "LOGIN7 announces a FeatureExt block it does not contain");
        }
    }
    return MCDC_OK;
}

void sim_tds_login7_wipe(sim_tds_login7 *l) {
    volatile char *v = l->password;
    for (size_t k = 0; k < sizeof l->password; k++) v[k] = 0;
}

int sim_tds_packet_size_negotiate(uint32_t requested) {
    if (requested == 0) return MCDC_TDS_PACKET_BYTES_DEFAULT;
    if (requested < MCDC_TDS_PACKET_BYTES_MIN) return MCDC_TDS_PACKET_BYTES_MIN;
    if (requested > MCDC_TDS_PACKET_BYTES_MAX) return MCDC_TDS_PACKET_BYTES_MAX;
    return (int)requested;
}

/* ---- tokens ------------------------------------------------------------------ */
/* B_VARCHAR: at most 255 UTF-16 units. */
static int out_bvarchar(sim_tds_out *o, const char *s) {
    size_t n = s ? strlen(s) : 0;
    size_t units = sim_tds_utf8_utf16_units((const uint8_t *)s, n);
    if (units > 255) units = 255;
    if (sim_tds_out_u8(o, (uint8_t)units)) return -1;
    return sim_tds_out_utf16(o, (const uint8_t *)s, n, units);
}

static size_t bvarchar_bytes(const char *s) {
    size_t units = s ? sim_tds_utf8_utf16_units((const uint8_t *)s, strlen(s)) : 0;
    return 1 + 2 * (units > 255 ? 255 : units);
}

int sim_tds_tok_envchange_str(sim_tds_out *o, uint8_t type, const char *new_v, const char *old_v) {
    size_t len = 1 + bvarchar_bytes(new_v) + bvarchar_bytes(old_v);
    if (sim_tds_out_u8(o, TDS_TOK_ENVCHANGE) || sim_tds_out_u16(o, (uint16_t)len) || sim_tds_out_u8(o, type))
        return -1;
    if (out_bvarchar(o, new_v) || out_bvarchar(o, old_v)) return -1;
    return 0;
}

int sim_tds_tok_envchange_bytes(sim_tds_out *o, uint8_t type, const uint8_t *new_v, uint8_t new_n,
                            const uint8_t *old_v, uint8_t old_n) {
    size_t len = 1 + 1 + (size_t)new_n + 1 + (size_t)old_n;
    if (sim_tds_out_u8(o, TDS_TOK_ENVCHANGE) || sim_tds_out_u16(o, (uint16_t)len) || sim_tds_out_u8(o, type))
        return -1;
    if (sim_tds_out_u8(o, new_n) || sim_tds_out_bytes(o, new_v, new_n)) return -1;
    if (sim_tds_out_u8(o, old_n) || sim_tds_out_bytes(o, old_v, old_n)) return -1;
    return 0;
}

int sim_tds_tok_message(sim_tds_out *o, bool is_error, int32_t number, uint8_t state, uint8_t cls,
                    const char *text, const char *proc, int32_t line) {
    if (!text) text = "";
    size_t tn = strlen(text);
    size_t units = sim_tds_utf8_utf16_units((const uint8_t *)text, tn);
    if (units > 4000) units = 4000; /* keeps the token length within a USHORT */
    size_t len = 4 + 1 + 1 + 2 + 2 * units + bvarchar_bytes(TDS_SERVER_NAME) +
                 bvarchar_bytes(proc) + 4;
    if (sim_tds_out_u8(o, is_error ? TDS_TOK_ERROR : TDS_TOK_INFO) || sim_tds_out_u16(o, (uint16_t)len) ||
        sim_tds_out_u32(o, (uint32_t)number) || sim_tds_out_u8(o, state) || sim_tds_out_u8(o, cls) ||
        sim_tds_out_u16(o, (uint16_t)units) || sim_tds_out_utf16(o, (const uint8_t *)text, tn, units) ||
        out_bvarchar(o, TDS_SERVER_NAME) || out_bvarchar(o, proc) ||
        sim_tds_out_u32(o, (uint32_t)line))
        return -1;
    return 0;
}

int sim_tds_tok_loginack(sim_tds_out *o, int version_major) {
    static const char prog[] = "Microsoft SQL Server";
    size_t units = sizeof prog - 1;
    size_t len = 1 + 4 + 1 + 2 * units + 4;
    uint8_t head[] = {TDS_TOK_LOGINACK, (uint8_t)len, (uint8_t)(len >> 8), 1, 0x74, 0x00, 0x00,
                      0x04, (uint8_t)units};
    if (sim_tds_out_bytes(o, head, sizeof head)) return -1;
    if (sim_tds_out_utf16(o, (const uint8_t *)prog, units, units)) return -1;
    uint8_t ver[4] = {(uint8_t)version_major, 0, TDS_PRODUCT_BUILD >> 8,
                      TDS_PRODUCT_BUILD & 0xFF};
    return sim_tds_out_bytes(o, ver, 4);
}

int sim_tds_tok_done(sim_tds_out *o, uint8_t token, uint16_t status, uint16_t curcmd, uint64_t rows) {
    uint8_t b[13] = {token, (uint8_t)status, (uint8_t)(status >> 8), (uint8_t)curcmd,
                     (uint8_t)(curcmd >> 8)};
    for (int i = 0; i < 8; i++) b[5 + i] = (uint8_t)(rows >> (8 * i));
    return sim_tds_out_bytes(o, b, sizeof b);
}

int sim_tds_tok_returnstatus(sim_tds_out *o, int32_t status) {
    if (sim_tds_out_u8(o, TDS_TOK_RETURNSTATUS)) return -1;
    return sim_tds_out_u32(o, (uint32_t)status);
}

int sim_tds_login_reply(sim_tds_out *o, const char *database, int old_packet_size, int new_packet_size,
                    bool feature_ext, int version_major) {
    char msg[600];
    sim_tds_out_begin(o, TDS_PKT_REPLY);
    if (sim_tds_tok_envchange_str(o, TDS_ENV_DATABASE, database, "master")) return -1;
    snprintf(msg, sizeof msg, "Changed database context to '%s'.", database);
    if (sim_tds_tok_message(o, false, 5701, 2, 0, msg, "", 1)) return -1;
    if (sim_tds_tok_envchange_str(o, TDS_ENV_LANGUAGE, "us_english", "")) return -1;
    if (sim_tds_tok_message(o, false, 5703, 1, 0, "Changed language setting to us_english.", "", 1))
        return -1;
    if (sim_tds_tok_envchange_bytes(o, TDS_ENV_COLLATION, sim_tds_collation_default, 5, NULL, 0))
        return -1;
    {   /* always, as SQL Server does: python-tds sizes its reader only from it */
        char nv[16], ov[16];
        snprintf(nv, sizeof nv, "%d", new_packet_size);
        snprintf(ov, sizeof ov, "%d", old_packet_size);
        if (sim_tds_tok_envchange_str(o, TDS_ENV_PACKETSIZE, nv, ov)) return -1;
    }
    if (sim_tds_tok_loginack(o, version_major)) return -1;
    if (feature_ext && (sim_tds_out_u8(o, TDS_TOK_FEATUREEXTACK) || sim_tds_out_u8(o, 0xFF))) return -1;
    if (sim_tds_tok_done(o, TDS_TOK_DONE, TDS_DONE_FINAL, 0, 0)) return -1;
    return sim_tds_out_end(o);
}

int sim_tds_login_fail_reply(sim_tds_out *o, int number, int state, int cls, const char *text) {
    sim_tds_out_begin(o, TDS_PKT_REPLY);
    if (sim_tds_tok_message(o, true, number, (uint8_t)state, (uint8_t)cls, text, "", 1)) return -1;
    if (sim_tds_tok_done(o, TDS_TOK_DONE, TDS_DONE_ERROR, 0, 0)) return -1;
    return sim_tds_out_end(o);
}

/* ---- requests --------------------------------------------------------------------- */
int sim_tds_skip_all_headers(const uint8_t *p, size_t n, size_t *pos, mcdc_error *err) {
    *pos = 0;
    if (n < 4) return MCDC_OK; /* pre-7.2 clients send none */
    uint32_t total = rd_u32le(p);
    /* A plausible ALL_HEADERS: total covers itself and whole headers. Text
     * without headers starts with two UTF-16 characters, which read as a
     * length far larger than the message. */
    if (total < 4 || total > n) {
        if (total > n && total <= 0x10000)
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "ALL_HEADERS length %u exceeds the %zu-byte message", total, n);
        return MCDC_OK;
    }
    size_t i = 4;
    while (i < total) {
        if (total - i < 6)
            return mcdc_error_set(err, MCDC_E_PROTOCOL, "ALL_HEADERS ends inside a header");
        uint32_t hl = rd_u32le(p + i);
        if (hl < 6 || hl > total - i)
            return mcdc_error_set(err, MCDC_E_PROTOCOL, "ALL_HEADERS header length %u is bad",
                                  hl);
        i += hl;
    }
    *pos = total;
    return MCDC_OK;
}

int sim_tds_batch_decode(mcdc_buf *b, const uint8_t *p, size_t n, mcdc_error *err) {
    size_t pos;
    mcdc_buf_reset(b);
    int rc = sim_tds_skip_all_headers(p, n, &pos, err);
    if (rc) return rc;
    b->limit = MCDC_TDS_MESSAGE_BYTES_MAX * 2;
    rc = sim_tds_utf16_to_utf8(b, p + pos, n - pos, err);
    if (rc) return rc;
    return mcdc_buf_cstr(b, err);
}

static int tm_name(char *out, size_t cap, const uint8_t *p, size_t n, size_t *i,
                   mcdc_error *err) {
    out[0] = 0;
    if (*i >= n) return MCDC_OK;
    size_t chars = p[(*i)++];
    if (chars * 2 > n - *i)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "transaction name runs past the request");
    mcdc_buf b = {0};
    b.limit = cap;
    int rc = sim_tds_utf16_to_utf8(&b, p + *i, chars * 2, err);
    if (!rc) {
        /* only a plain identifier goes into the statement */
        size_t k = 0;
        for (size_t j = 0; j < b.len && k + 1 < cap; j++) {
            uint8_t ch = b.data[j];
            if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                ch == '_')
                out[k++] = (char)ch;
        }
        out[k] = 0;
    }
    mcdc_buf_free(&b);
    *i += chars * 2;
    return rc;
}

int sim_tds_tm_decode(char *sql, size_t cap, const uint8_t *p, size_t n, mcdc_error *err) {
    size_t i;
    int rc = sim_tds_skip_all_headers(p, n, &i, err);
    if (rc) return rc;
    if (n - i < 2)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "transaction manager request is truncated");
    unsigned type = rd_u16le(p + i);
    i += 2;
    char name[130], name2[130];
    switch (type) {
    case 5: /* TM_BEGIN_XACT: isolation level, name */
        if (i < n) i++;
        if ((rc = tm_name(name, sizeof name, p, n, &i, err))) return rc;
        snprintf(sql, cap, "BEGIN TRANSACTION%s%s", name[0] ? " " : "", name);
        return MCDC_OK;
    case 7: /* TM_COMMIT_XACT */
    case 8: { /* TM_ROLLBACK_XACT: name, flags, [isolation, name] */
        if ((rc = tm_name(name, sizeof name, p, n, &i, err))) return rc;
        uint8_t flags = i < n ? p[i++] : 0;
        const char *verb = type == 7 ? "COMMIT" : "ROLLBACK";
        if (flags & 0x01) {
            if (i < n) i++;
            if ((rc = tm_name(name2, sizeof name2, p, n, &i, err))) return rc;
            snprintf(sql, cap, "%s TRANSACTION%s%s; BEGIN TRANSACTION%s%s", verb,
                     name[0] ? " " : "", name, name2[0] ? " " : "", name2);
        } else {
            snprintf(sql, cap, "%s TRANSACTION%s%s", verb, name[0] ? " " : "", name);
        }
        return MCDC_OK;
    }
    case 9: /* TM_SAVE_XACT */
        if ((rc = tm_name(name, sizeof name, p, n, &i, err))) return rc;
        if (!name[0])
            return mcdc_error_set(err, MCDC_E_PROTOCOL, "SAVE TRANSACTION request without a name");
        snprintf(sql, cap, "SAVE TRANSACTION %s", name);
        return MCDC_OK;
    default:
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "transaction manager request %u (distributed transactions) is not "
                              "supported",
                              type);
    }
}

/* ---- decimal ------------------------------------------------------------------------ */
__extension__ typedef unsigned __int128 sim_tds_u128;

static sim_tds_u128 g_pow10[39];
static pthread_once_t g_pow10_once = PTHREAD_ONCE_INIT;
static void pow10_init(void) {
    g_pow10[0] = 1;
    for (int i = 1; i < 39; i++) g_pow10[i] = g_pow10[i - 1] * 10;
}

static sim_tds_u128 mag_get(const uint32_t m[4]) {
    return (sim_tds_u128)m[0] | ((sim_tds_u128)m[1] << 32) | ((sim_tds_u128)m[2] << 64) |
           ((sim_tds_u128)m[3] << 96);
}
static void mag_set(uint32_t m[4], sim_tds_u128 v) {
    for (int i = 0; i < 4; i++) m[i] = (uint32_t)(v >> (32 * i));
}

size_t sim_tds_decimal_format(char *out, size_t cap, bool negative, const uint32_t mag[4], int scale) {
    char digits[48];
    int nd = 0;
    sim_tds_u128 v = mag_get(mag);
    do {
        digits[nd++] = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v);
    while (nd <= scale) digits[nd++] = '0'; /* at least one integer digit */
    size_t i = 0;
    char tmp[64];
    if (negative && mag_get(mag) != 0) tmp[i++] = '-';
    for (int k = nd - 1; k >= 0; k--) {
        if (k == scale - 1) tmp[i++] = '.';
        tmp[i++] = digits[k];
    }
    if (cap == 0) return i;
    size_t c = i < cap - 1 ? i : cap - 1;
    memcpy(out, tmp, c);
    out[c] = 0;
    return c;
}

bool sim_tds_decimal_parse(const uint8_t *s, size_t n, int precision, int scale, bool *negative,
                       uint32_t mag[4]) {
    pthread_once(&g_pow10_once, pow10_init);
    size_t i = 0;
    while (i < n && s[i] == ' ') i++;
    while (n > i && s[n - 1] == ' ') n--;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    sim_tds_u128 v = 0;
    int sig = 0, digits = 0;
    const sim_tds_u128 lim = g_pow10[38];
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        if (v == 0 && s[i] == '0') continue;
        if (++sig > 38) return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    int frac = 0;
    bool round_up = false;
    if (i < n && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
            if (frac < scale) {
                v = v * 10 + (unsigned)(s[i] - '0');
                frac++;
                if (v >= lim) return false;
            } else if (frac == scale) {
                round_up = s[i] >= '5';
                frac++; /* later digits do not matter */
            }
        }
    }
    /* Exponent (from %g forms): e.g. 1e+20. Only non-negative tails handled
     * exactly; rare in practice (engine floats are formatted with %.*f). */
    int exp = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < n && (s[i] == '-' || s[i] == '+')) eneg = s[i++] == '-';
        int e = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            if (e < 1000) e = e * 10 + (s[i] - '0');
        exp = eneg ? -e : e;
        if (exp != 0 && frac > scale) return false;
    }
    if (i != n || digits == 0) return false;
    if (frac > scale) frac = scale;
    while (frac < scale) {
        if (v >= lim / 10 + 1 && v * 10 >= lim) return false;
        v *= 10;
        frac++;
    }
    if (round_up) v += 1;
    for (; exp > 0; exp--) {
        if (v > lim / 10) return false;
        v *= 10;
    }
    for (; exp < 0; exp++) v /= 10;
    if (precision < 1 || precision > 38) precision = 38;
    if (v >= g_pow10[precision]) return false;
    *negative = neg && v != 0;
    mag_set(mag, v);
    return true;
}

/* ---- date/time ------------------------------------------------------------------------ */
/* mcdc_days_from_civil(1, 1, 1): days from 0001-01-01 to 1970-01-01, negated
 * (checked by a unit test). */

int64_t sim_tds_days_from_civil0001(int64_t y, unsigned m, unsigned d) {
    return mcdc_days_from_civil(y, m, d) + TDS_DAYS_0001_TO_1970;
}

static bool digits_at(const uint8_t *s, size_t n, size_t i, int count, int *out) {
    if (i + (size_t)count > n) return false;
    int v = 0;
    for (int k = 0; k < count; k++) {
        uint8_t c = s[i + (size_t)k];
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
}

bool sim_tds_dt_parse(sim_tds_dt *out, const uint8_t *s, size_t n) {
    memset(out, 0, sizeof *out);
    while (n && s[n - 1] == ' ') n--;
    size_t i = 0;
    int y, mo, d, h, mi, se;
    if (n >= 10 && s[4] == '-') {
        if (!digits_at(s, n, 0, 4, &y) || s[4] != '-' || !digits_at(s, n, 5, 2, &mo) ||
            s[7] != '-' || !digits_at(s, n, 8, 2, &d))
            return false;
        if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > 31) return false;
        static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        if (d > mdays[mo - 1]) return false;
        if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return false;
        out->days = sim_tds_days_from_civil0001(y, (unsigned)mo, (unsigned)d);
        out->has_date = true;
        i = 10;
        if (i < n && (s[i] == ' ' || s[i] == 'T')) i++;
    }
    if (i + 8 <= n && s[i + 2] == ':') {
        if (!digits_at(s, n, i, 2, &h) || !digits_at(s, n, i + 3, 2, &mi) || s[i + 5] != ':' ||
            !digits_at(s, n, i + 6, 2, &se))
            return false;
        if (h > 23 || mi > 59 || se > 59) return false;
        i += 8;
        int64_t frac = 0;
        int fd = 0;
        if (i < n && s[i] == '.') {
            for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
                if (fd < 7) {
                    frac = frac * 10 + (s[i] - '0');
                    fd++;
                }
        }
        for (; fd < 7; fd++) frac *= 10;
        out->time_100ns = ((int64_t)h * 3600 + mi * 60 + se) * 10000000 + frac;
        out->has_time = true;
    }
    if (i < n && s[i] == ' ') i++;
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
        out->has_offset = true;
        i++;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        int oh, om;
        if (!digits_at(s, n, i + 1, 2, &oh) || i + 3 >= n || s[i + 3] != ':' ||
            !digits_at(s, n, i + 4, 2, &om))
            return false;
        int off = oh * 60 + om;
        if (off > 840 || om > 59) return false;
        out->offset_min = s[i] == '-' ? -off : off;
        out->has_offset = true;
        i += 6;
    }
    return i == n && (out->has_date || out->has_time);
}

size_t sim_tds_dt_format(char *out, const sim_tds_dt *dt, int frac) {
    size_t i = 0;
    if (dt->has_date) {
        int64_t y;
        unsigned m, d;
        mcdc_civil_from_days(dt->days - TDS_DAYS_0001_TO_1970, &y, &m, &d);
        i += (size_t)snprintf(out + i, 48 - i, "%04d-%02u-%02u", (int)y, m, d);
    }
    if (dt->has_time) {
        if (dt->has_date) out[i++] = ' ';
        int64_t t = dt->time_100ns;
        int64_t sec = t / 10000000, f = t % 10000000;
        i += (size_t)snprintf(out + i, 48 - i, "%02d:%02d:%02d", (int)(sec / 3600),
                              (int)(sec / 60 % 60), (int)(sec % 60));
        if (frac > 0) {
            char fs[16];
            snprintf(fs, sizeof fs, "%07d", (int)f);
            out[i++] = '.';
            memcpy(out + i, fs, (size_t)frac);
            i += (size_t)frac;
        }
    }
    if (dt->has_offset) {
        int o = dt->offset_min < 0 ? -dt->offset_min : dt->offset_min;
        i += (size_t)snprintf(out + i, 48 - i, " %c%02d:%02d", dt->offset_min < 0 ? '-' : '+',
                              o / 60, o % 60);
    }
    out[i] = 0;
    return i;
}

/* ---- GUID ------------------------------------------------------------------------------ */
/* hex digit value + 1; 0 = not a hex digit */
static const uint8_t g_hex1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,
    ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14,
    ['E'] = 15, ['F'] = 16, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15,
    ['f'] = 16};

bool sim_tds_guid_parse(uint8_t out[16], const uint8_t *s, size_t n) {
    if (n == 38 && s[0] == '{' && s[37] == '}') {
        s++;
        n -= 2;
    }
    if (n != 36) return false;
    uint8_t b[16];
    size_t k = 0;
    for (size_t i = 0; i < 36;) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return false;
            i++;
            continue;
        }
        int hi = g_hex1[s[i]], lo = g_hex1[s[i + 1]];
        if (!hi || !lo) return false;
        b[k++] = (uint8_t)((hi - 1) << 4 | (lo - 1));
        i += 2;
    }
    static const uint8_t order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
    for (int i = 0; i < 16; i++) out[i] = b[order[i]];
    return true;
}

void sim_tds_guid_format(char out[37], const uint8_t w[16]) {
    snprintf(out, 37, "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X",
             w[3], w[2], w[1], w[0], w[5], w[4], w[7], w[6], w[8], w[9], w[10], w[11], w[12],
             w[13], w[14], w[15]);
}
