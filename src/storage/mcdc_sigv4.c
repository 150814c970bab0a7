/*
 * mcdc_sigv4.c - AWS Signature Version 4 (see mcdc_sigv4.h), on GnuTLS's
 * SHA-256 and HMAC-SHA256.
 */
#include "mcdc_sigv4.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

static void hex_of(const uint8_t *d, size_t n, char *out) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = 0;
}

void mcdc_sigv4_sha256_hex(const void *p, size_t n, char out[65]) {
    uint8_t d[32];
    int rc = gnutls_hash_fast(GNUTLS_DIG_SHA256, n ? p : "", n, d);
    MCDC_ASSERT(rc == 0);
    hex_of(d, sizeof d, out);
}

static void hmac(const void *key, size_t key_len, const char *msg, size_t n, uint8_t out[32]) {
    int rc = gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, key_len, msg, n, out);
    MCDC_ASSERT(rc == 0);
}

/* ---- the URL's parts ----------------------------------------------------------------- */

typedef struct url_parts {
    const char *host;
    size_t host_len;
    const char *path; /* "/..." or empty (then "/") */
    size_t path_len;
    const char *query; /* after '?', or "" */
} url_parts;

static int split_url(url_parts *u, const char *url, mcdc_error *err) {
    const char *p = strstr(url, "://");
    if (p == NULL || p[3] == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "an S3 request URL needs a scheme and a host");
    u->host = p + 3;
    u->host_len = strcspn(u->host, "/?");
    if (u->host_len == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "an S3 request URL needs a host");
    u->path = u->host + u->host_len;
    u->path_len = strcspn(u->path, "?");
    u->query = u->path[u->path_len] == '?' ? u->path + u->path_len + 1 : "";
    return MCDC_OK;
}

/* ---- canonical parts --------------------------------------------------------------------- */

typedef struct qparam {
    const char *k, *v;
    size_t kn, vn;
} qparam;

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

static int cmp_qparam(const void *pa, const void *pb) {
    const qparam *a = pa, *b = pb;
    int c = cmp_bytes(a->k, a->kn, b->k, b->kn);
    return c ? c : cmp_bytes(a->v, a->vn, b->v, b->vn);
}

/* The query's parameters sorted by name, then value; "name" alone is "name=". */
static int append_query(mcdc_buf *out, const char *q, mcdc_error *err) {
    size_t n = 0;
    for (const char *p = q; *p; p++) n += *p == '&';
    qparam *ps = mcdc_calloc(n + 1, sizeof *ps);
    if (ps == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (signing)");
    size_t count = 0;
    for (const char *p = q; *p;) {
        size_t len = strcspn(p, "&");
        if (len) {
            const char *eq = memchr(p, '=', len);
            qparam *x = &ps[count++];
            x->k = p;
            x->kn = eq ? (size_t)(eq - p) : len;
            x->v = eq ? eq + 1 : p + len;
            x->vn = eq ? len - x->kn - 1 : 0;
        }
        p += len + (p[len] == '&');
    }
    qsort(ps, count, sizeof *ps, cmp_qparam);
    int rc = MCDC_OK;
    for (size_t i = 0; rc == MCDC_OK && i < count; i++)
        rc = mcdc_buf_printf(out, err, "%s%.*s=%.*s", i ? "&" : "", (int)ps[i].kn, ps[i].k,
                             (int)ps[i].vn, ps[i].v);
    mcdc_free(ps);
    return rc;
}

static int cmp_header(const void *pa, const void *pb) {
    const mcdc_http_header *a = *(const mcdc_http_header *const *)pa;
    const mcdc_http_header *b = *(const mcdc_http_header *const *)pb;
    return strcasecmp(a->name, b->name);
}

static int append_lower(mcdc_buf *out, const char *s, mcdc_error *err) {
    int rc = MCDC_OK;
    for (; rc == MCDC_OK && *s; s++) {
        char c = *s;
        rc = mcdc_buf_append_byte(out, (uint8_t)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c), err);
    }
    return rc;
}

/* A header value trimmed, inner runs of blanks as one space. */
static int append_trimmed(mcdc_buf *out, const char *v, mcdc_error *err) {
    while (*v == ' ' || *v == '\t') v++;
    int rc = MCDC_OK;
    bool blank = false;
    for (; rc == MCDC_OK && *v; v++) {
        if (*v == ' ' || *v == '\t') {
            blank = true;
            continue;
        }
        if (blank) rc = mcdc_buf_append_byte(out, ' ', err);
        blank = false;
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, (uint8_t)*v, err);
    }
    return rc;
}

/* The canonical request, and the signed headers' names apart. */
static int canonical(mcdc_buf *out, mcdc_buf *signed_names, mcdc_http_method method,
                     const char *url, const mcdc_http_headers *hdrs, const char *payload_hash,
                     mcdc_error *err) {
    url_parts u;
    int rc = split_url(&u, url, err);
    if (rc) return rc;
    const mcdc_http_header *sorted[MCDC_HTTP_HEADERS_MAX];
    for (size_t i = 0; i < hdrs->count; i++) sorted[i] = &hdrs->items[i];
    qsort(sorted, hdrs->count, sizeof sorted[0], cmp_header);
    rc = mcdc_buf_printf(out, err, "%s\n%.*s\n", mcdc_http_method_name(method),
                         (int)(u.path_len ? u.path_len : 1), u.path_len ? u.path : "/");
    if (rc == MCDC_OK) rc = append_query(out, u.query, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, '\n', err);
    for (size_t i = 0; rc == MCDC_OK && i < hdrs->count; i++) {
        rc = append_lower(out, sorted[i]->name, err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, ':', err);
        if (rc == MCDC_OK) rc = append_trimmed(out, sorted[i]->value, err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, '\n', err);
        if (rc == MCDC_OK && i) rc = mcdc_buf_append_byte(signed_names, ';', err);
        if (rc == MCDC_OK) rc = append_lower(signed_names, sorted[i]->name, err);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(signed_names, err);
    if (rc == MCDC_OK)
        rc = mcdc_buf_printf(out, err, "\n%s\n%s", (const char *)signed_names->data,
                             payload_hash);
    return rc;
}

int mcdc_sigv4_canonical_request(mcdc_buf *out, mcdc_http_method method, const char *url,
                                 const mcdc_http_headers *hdrs, const char *payload_hash,
                                 mcdc_error *err) {
    mcdc_buf names = {0};
    int rc = canonical(out, &names, method, url, hdrs, payload_hash, err);
    mcdc_buf_free(&names);
    return rc;
}

/* ---- signing ---------------------------------------------------------------------------- */

int mcdc_sigv4_sign(mcdc_http_headers *hdrs, mcdc_http_method method, const char *url,
                    const char *payload_hash, const mcdc_sigv4_key *key, const char *region,
                    const char *service, int64_t now_ms, mcdc_error *err) {
    MCDC_ASSERT(hdrs && url && payload_hash && key && key->access_key_id &&
                key->secret_access_key && region && service);
    url_parts u;
    int rc = split_url(&u, url, err);
    if (rc) return rc;
    char host[256], amz_date[17], day[9];
    snprintf(host, sizeof host, "%.*s", (int)u.host_len, u.host);
    int64_t secs = now_ms / 1000, days = secs / 86400, rem = secs % 86400, y;
    unsigned mo, d;
    mcdc_civil_from_days(days, &y, &mo, &d);
    MCDC_ASSERT(y >= 1970 && y <= 9999 && rem >= 0);
    snprintf(amz_date, sizeof amz_date, "%04u%02u%02uT%02u%02u%02uZ", (unsigned)y % 10000u, mo % 100u,
             d % 100u, (unsigned)(rem / 3600) % 100u, (unsigned)(rem / 60 % 60),
             (unsigned)(rem % 60));
    memcpy(day, amz_date, 8);
    day[8] = 0;
    rc = mcdc_http_headers_set(hdrs, "host", host, err);
    if (rc == MCDC_OK) rc = mcdc_http_headers_set(hdrs, "x-amz-date", amz_date, err);
    if (rc == MCDC_OK) rc = mcdc_http_headers_set(hdrs, "x-amz-content-sha256", payload_hash, err);
    if (rc == MCDC_OK && key->session_token && key->session_token[0])
        rc = mcdc_http_headers_set(hdrs, "x-amz-security-token", key->session_token, err);
    mcdc_buf creq = {0}, names = {0}, sts = {0};
    if (rc == MCDC_OK) rc = canonical(&creq, &names, method, url, hdrs, payload_hash, err);
    char creq_hash[65];
    if (rc == MCDC_OK) {
        mcdc_sigv4_sha256_hex(creq.data, creq.len, creq_hash);
        rc = mcdc_buf_printf(&sts, err, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s",
                             amz_date, day, region, service, creq_hash);
    }
    if (rc == MCDC_OK) {
        /* kSecret = "AWS4" + secret; then date, region, service, "aws4_request" */
        size_t sl = strlen(key->secret_access_key);
        char *ksecret = mcdc_malloc(sl + 5);
        if (ksecret == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (signing)");
        uint8_t k1[32], k2[32], k3[32], k4[32], sig[32];
        if (rc == MCDC_OK) {
            memcpy(ksecret, "AWS4", 4);
            memcpy(ksecret + 4, key->secret_access_key, sl + 1);
            hmac(ksecret, sl + 4, day, 8, k1);
            memset(ksecret, 0, sl + 4);
            hmac(k1, 32, region, strlen(region), k2);
            hmac(k2, 32, service, strlen(service), k3);
            hmac(k3, 32, "aws4_request", 12, k4);
            hmac(k4, 32, (const char *)sts.data, sts.len, sig);
            char sig_hex[65];
            hex_of(sig, sizeof sig, sig_hex);
            char *auth = mcdc_asprintf(
                "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request,SignedHeaders=%s,"
                "Signature=%s",
                key->access_key_id, day, region, service, (const char *)names.data, sig_hex);
            rc = auth ? mcdc_http_headers_set(hdrs, "Authorization", auth, err)
                      : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (signing)");
            mcdc_free(auth);
            memset(k1, 0, sizeof k1);
            memset(k4, 0, sizeof k4);
        }
        mcdc_free(ksecret);
    }
    mcdc_buf_free(&creq);
    mcdc_buf_free(&names);
    mcdc_buf_free(&sts);
    return rc;
}
