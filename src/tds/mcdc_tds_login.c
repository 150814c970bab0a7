/* mcdc_tds_login.c - PRELOGIN, LOGIN7 and SQL batch payloads (the TLS part
 * of the PRELOGIN exchange is in mcdc_tds_tls.c). */
#include <string.h>
#include <unistd.h>

#include "mcdc_limits.h"
#include "mcdc_tds_proto.h"

#define LOGIN7_FIXED_BYTES 94
_Static_assert(LOGIN7_FIXED_BYTES == 36 + 4 * 9 + 6 + 4 * 4, "LOGIN7 fixed part");
#define ALL_HEADERS_BYTES 22

int mcdc_tds_utf16_append(mcdc_buf *out, const char *s, size_t n, mcdc_error *err) {
    int rc = mcdc_buf_reserve(out, n * 2, err);
    if (rc != MCDC_OK) return rc;
    const uint8_t *p = (const uint8_t *)s, *e = p + n;
    while (p < e) {
        uint32_t cp;
        uint8_t b = *p;
        size_t k;
        if (b < 0x80) { cp = b; k = 1; }
        else if ((b & 0xE0) == 0xC0) { cp = b & 0x1Fu; k = 2; }
        else if ((b & 0xF0) == 0xE0) { cp = b & 0x0Fu; k = 3; }
        else if ((b & 0xF8) == 0xF0) { cp = b & 0x07u; k = 4; }
        else { cp = 0xFFFD; k = 1; }
        if (k > 1) {
            if ((size_t)(e - p) < k) { cp = 0xFFFD; k = (size_t)(e - p); }
            else {
                for (size_t i = 1; i < k; i++) {
                    if ((p[i] & 0xC0) != 0x80) { cp = 0xFFFD; k = i; break; }
                    cp = (cp << 6) | (p[i] & 0x3Fu);
                }
            }
        }
        p += k;
        uint8_t u[4];
        size_t un;
        if (cp >= 0x10000 && cp <= 0x10FFFF) {
            uint32_t v = cp - 0x10000;
            uint16_t hi = (uint16_t)(0xD800 + (v >> 10)), lo = (uint16_t)(0xDC00 + (v & 0x3FF));
            u[0] = (uint8_t)hi; u[1] = (uint8_t)(hi >> 8); u[2] = (uint8_t)lo; u[3] = (uint8_t)(lo >> 8);
            un = 4;
        } else {
            if (cp > 0x10FFFF) cp = 0xFFFD;
            u[0] = (uint8_t)cp; u[1] = (uint8_t)(cp >> 8);
            un = 2;
        }
        rc = mcdc_buf_append(out, u, un, err);
        if (rc != MCDC_OK) return rc;
    }
    return MCDC_OK;
}

static void put_u16le(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put_u32le(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

int mcdc_tds_build_prelogin(mcdc_buf *out, int encryption, mcdc_error *err) {
    /* VERSION, ENCRYPTION, THREADID, MARS, terminator; then their data. */
    enum { N_OPT = 4, TABLE = N_OPT * 5 + 1 };
    static const uint8_t tokens[N_OPT] = {0x00, 0x01, 0x03, 0x04};
    static const uint16_t lens[N_OPT] = {6, 1, 4, 1};
    uint8_t p[TABLE + 12];
    memset(p, 0, sizeof p);
    uint16_t off = TABLE;
    for (int i = 0; i < N_OPT; i++) {
        uint8_t *e = p + i * 5;
        e[0] = tokens[i];
        e[1] = (uint8_t)(off >> 8); e[2] = (uint8_t)off;
        e[3] = (uint8_t)(lens[i] >> 8); e[4] = (uint8_t)lens[i];
        off = (uint16_t)(off + lens[i]);
    }
    p[TABLE - 1] = 0xFF;
    uint8_t *d = p + TABLE;
    d[0] = 9; /* client version 9.0.0.0, as FreeTDS sends for 7.2+ */
    d[6] = (uint8_t)encryption;
    uint32_t pid = (uint32_t)getpid();
    d[7] = (uint8_t)(pid >> 24); d[8] = (uint8_t)(pid >> 16); d[9] = (uint8_t)(pid >> 8); d[10] = (uint8_t)pid;
    d[11] = 0; /* MARS off */
    return mcdc_buf_append(out, p, sizeof p, err);
}

int mcdc_tds_parse_prelogin(const uint8_t *p, size_t n, int *out_encryption, mcdc_error *err) {
    *out_encryption = -1;
    size_t i = 0;
    for (;;) {
        if (i >= n) break;
        if (p[i] == 0xFF) {
            if (*out_encryption < 0)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "TDS: the PRELOGIN reply has no ENCRYPTION option");
            return MCDC_OK;
        }
        if (n - i < 5) break;
        size_t off = ((size_t)p[i + 1] << 8) | p[i + 2], len = ((size_t)p[i + 3] << 8) | p[i + 4];
        if (off > n || len > n - off) break;
        if (p[i] == 0x01) {
            if (len < 1) break;
            *out_encryption = p[off];
        }
        i += 5;
    }
    return mcdc_error_set(err, MCDC_E_PROTOCOL, "TDS: malformed PRELOGIN reply (%zu bytes)", n);
}

int mcdc_tds_build_login7(mcdc_buf *out, const mcdc_tds_login_params *lp, mcdc_error *err) {
    const char *str[9] = {lp->host, lp->user, lp->password, lp->app, lp->server, "",
                          lp->library, "", lp->database};
    mcdc_buf var = {0};
    uint8_t fixed[LOGIN7_FIXED_BYTES];
    memset(fixed, 0, sizeof fixed);
    int rc = MCDC_OK;
    for (int i = 0; i < 9 && rc == MCDC_OK; i++) {
        const char *s = str[i] ? str[i] : "";
        size_t start = var.len;
        rc = mcdc_tds_utf16_append(&var, s, strlen(s), err);
        if (rc != MCDC_OK) break;
        size_t bytes = var.len - start;
        if (i == 2) /* password: swap nibbles, then XOR 0xA5 */
            for (size_t k = start; k < var.len; k++) {
                uint8_t b = var.data[k];
                var.data[k] = (uint8_t)(((b << 4) | (b >> 4)) ^ 0xA5);
            }
        if (bytes / 2 > 128 || LOGIN7_FIXED_BYTES + start > 65535) {
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "TDS login: a login field is longer than 128 characters");
            break;
        }
        put_u16le(fixed + 36 + 4 * i, (uint32_t)(LOGIN7_FIXED_BYTES + start));
        put_u16le(fixed + 38 + 4 * i, (uint32_t)(bytes / 2));
    }
    if (rc == MCDC_OK) {
        uint32_t total = (uint32_t)(LOGIN7_FIXED_BYTES + var.len);
        put_u32le(fixed, total);
        put_u32le(fixed + 4, TDS_VERSION_74);
        put_u32le(fixed + 8, (uint32_t)lp->packet_bytes);
        put_u32le(fixed + 12, 7);
        put_u32le(fixed + 16, (uint32_t)getpid());
        fixed[24] = 0xE0; /* fUseDB | fDatabase (fatal) | fSetLang */
        fixed[25] = 0x03; /* fLanguage fatal | fODBC (ANSI session defaults) */
        fixed[26] = 0x00;
        fixed[27] = 0x00;
        put_u32le(fixed + 32, 0x0409);
        /* ClientID, SSPI, AtchDBFile, ChangePassword, cbSSPILong: empty, but
         * their offsets point at the end of the variable part. */
        put_u16le(fixed + 78, total);
        put_u16le(fixed + 82, total);
        put_u16le(fixed + 86, total);
        rc = mcdc_buf_append(out, fixed, sizeof fixed, err);
        if (rc == MCDC_OK) rc = mcdc_buf_append(out, var.data, var.len, err);
    }
    if (var.data) memset(var.data, 0, var.cap); /* the obfuscated password */
    mcdc_buf_free(&var);
    return rc;
}

int mcdc_tds_build_sql_batch(mcdc_buf *out, const char *sql, uint64_t txn, mcdc_error *err) {
    uint8_t h[ALL_HEADERS_BYTES];
    put_u32le(h, ALL_HEADERS_BYTES);
    put_u32le(h + 4, ALL_HEADERS_BYTES - 4);
    put_u16le(h + 8, 2); /* transaction descriptor */
    put_u32le(h + 10, (uint32_t)txn);
    put_u32le(h + 14, (uint32_t)(txn >> 32));
    put_u32le(h + 18, 1); /* outstanding requests */
    int rc = mcdc_buf_append(out, h, sizeof h, err);
    if (rc == MCDC_OK) rc = mcdc_tds_utf16_append(out, sql, strlen(sql), err);
    if (rc == MCDC_OK && out->len > MCDC_TDS_MESSAGE_BYTES_MAX)
        rc = mcdc_error_set(err, MCDC_E_LIMIT, "TDS: a SQL batch of %zu bytes exceeds %u",
                            out->len, MCDC_TDS_MESSAGE_BYTES_MAX);
    return rc;
}
