/*
 * mcdc_azure_auth.c - Azure locations, options, connection strings, Shared
 * Key signing and SAS tokens, the service's error bodies (see the header).
 */
#include "mcdc_azure_auth.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mcdc_http.h"
#include "mcdc_xml.h"

/* Azurite's account key: published with the emulator (not a secret). */
static const char k_emulator_key[] =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/* The smallest block MCDC_AZURE_BLOCK_BYTES may set (tests set it). */
#define AZ_BLOCK_BYTES_MIN 1024u

const char *mcdc_az_cred_name(mcdc_az_cred cred) {
    switch (cred) {
    case MCDC_AZ_CRED_SAS: return "SAS token";
    case MCDC_AZ_CRED_TOKEN: return "bearer token";
    case MCDC_AZ_CRED_CLIENT_SECRET: return "client secret";
    case MCDC_AZ_CRED_WORKLOAD: return "workload identity";
    case MCDC_AZ_CRED_MANAGED: return "managed identity";
    default: return "shared key";
    }
}

/* Frees s after overwriting it (a secret). */
static void wipe_free(char *s) {
    if (s == NULL) return;
    gnutls_memset(s, 0, strlen(s));
    mcdc_free(s);
}

/* ---- base64, percent-encoding --------------------------------------------------------- */

static const char k_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Writes base64 of n bytes at o (4 * ceil(n / 3) characters and a NUL);
 * returns the characters written. */
static size_t b64_write(char *o, const uint8_t *p, size_t n) {
    char *start = o;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = k_b64[v >> 18];
        *o++ = k_b64[(v >> 12) & 63];
        *o++ = k_b64[(v >> 6) & 63];
        *o++ = k_b64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = k_b64[v >> 18];
        *o++ = k_b64[(v >> 12) & 63];
        *o++ = i + 1 < n ? k_b64[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = 0;
    return (size_t)(o - start);
}

int mcdc_az_base64_encode(mcdc_buf *out, const void *data, size_t n, mcdc_error *err) {
    int rc = mcdc_buf_reserve(out, (n + 2) / 3 * 4 + 1, err);
    if (rc) return rc;
    out->len += b64_write((char *)out->data + out->len, data, n);
    return MCDC_OK;
}

static int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

int mcdc_az_base64_decode(uint8_t *dst, size_t cap, size_t *got, const char *s, size_t n) {
    *got = 0;
    if (n % 4 != 0) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            char c = s[i + (size_t)j];
            if (c == '=' && i + 4 == n && j >= 2 && (j == 3 || s[i + 3] == '=')) {
                v[j] = 0;
                pad++;
            } else if ((v[j] = b64_value(c)) < 0 || pad) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        size_t k = 3 - (size_t)pad;
        if (o + k > cap) return -1;
        for (size_t j = 0; j < k; j++) dst[o++] = (uint8_t)(w >> (16 - 8 * j));
    }
    *got = o;
    return 0;
}

/* ---- Shared Key ----------------------------------------------------------------------- */

static const char *header_value(const mcdc_az_header *h, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(h[i].name, name) == 0) return h[i].value;
    return NULL;
}

static int cmp_header_names(const void *a, const void *b) {
    return strcasecmp((*(const mcdc_az_header *const *)a)->name,
                      (*(const mcdc_az_header *const *)b)->name);
}

static int cmp_param_names(const void *a, const void *b) {
    return strcmp((*(const mcdc_az_param *const *)a)->name,
                  (*(const mcdc_az_param *const *)b)->name);
}

/* The request's x-ms-* headers and its parameters are a handful: a
 * request with more is a programming error. */
enum { AZ_SIGNED_MAX = 32 };

int mcdc_az_string_to_sign(mcdc_buf *out, const char *method, const char *account,
                           const char *path, const mcdc_az_param *params, size_t nparams,
                           const mcdc_az_header *headers, size_t nheaders, mcdc_error *err) {
    static const char *const standard[] = {
        "Content-Encoding", "Content-Language", "Content-Length",    "Content-MD5",
        "Content-Type",     "Date",             "If-Modified-Since", "If-Match",
        "If-None-Match",    "If-Unmodified-Since", "Range"};
    MCDC_ASSERT(nparams <= AZ_SIGNED_MAX && nheaders <= AZ_SIGNED_MAX);
    int rc = mcdc_buf_printf(out, err, "%s\n", method);
    for (size_t i = 0; rc == MCDC_OK && i < sizeof standard / sizeof standard[0]; i++) {
        const char *v = header_value(headers, nheaders, standard[i]);
        if (v && i == 2 && strcmp(v, "0") == 0) v = NULL; /* an empty body: "" */
        rc = mcdc_buf_printf(out, err, "%s\n", v ? v : "");
    }
    const mcdc_az_header *ms[AZ_SIGNED_MAX];
    size_t nms = 0;
    for (size_t i = 0; i < nheaders; i++)
        if (strncasecmp(headers[i].name, "x-ms-", 5) == 0) ms[nms++] = &headers[i];
    qsort(ms, nms, sizeof ms[0], cmp_header_names);
    for (size_t i = 0; rc == MCDC_OK && i < nms; i++) {
        for (const char *p = ms[i]->name; rc == MCDC_OK && *p; p++)
            rc = mcdc_buf_append_byte(out, (uint8_t)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p), err);
        if (rc == MCDC_OK) rc = mcdc_buf_printf(out, err, ":%s\n", ms[i]->value);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_printf(out, err, "/%s%s", account, path);
    const mcdc_az_param *ps[AZ_SIGNED_MAX];
    for (size_t i = 0; i < nparams; i++) ps[i] = &params[i];
    qsort(ps, nparams, sizeof ps[0], cmp_param_names);
    for (size_t i = 0; rc == MCDC_OK && i < nparams; i++)
        rc = mcdc_buf_printf(out, err, "\n%s:%s", ps[i]->name, ps[i]->value);
    return rc == MCDC_OK ? mcdc_buf_cstr(out, err) : rc;
}

int mcdc_az_sign(char out[MCDC_AZ_SIGNATURE_CHARS], const uint8_t *key, size_t key_len,
                 const char *sts, size_t sts_len, mcdc_error *err) {
    uint8_t mac[32];
    out[0] = 0;
    if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, key_len, sts, sts_len, mac) < 0)
        return mcdc_error_set(err, MCDC_E_IO, "HMAC-SHA256 failed (GnuTLS)");
    _Static_assert(MCDC_AZ_SIGNATURE_CHARS == 44 + 1, "base64 of a SHA-256 MAC, and a NUL");
    size_t n = b64_write(out, mac, sizeof mac);
    MCDC_ASSERT(n == MCDC_AZ_SIGNATURE_CHARS - 1);
    return MCDC_OK;
}

/* ---- error bodies, redaction, SAS ------------------------------------------------------- */

/* The first line of the text of <tag>, control characters as spaces: an
 * error's Message goes on with its RequestId and time. */
static void xml_line(const char *body, size_t n, const char *tag, char *out, size_t cap) {
    mcdc_xml_text_fixed(out, cap, body, n, tag);
    out[strcspn(out, "\r\n")] = 0;
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';
}

void mcdc_az_error_parse(const char *body, size_t n, char *code, size_t code_cap, char *message,
                         size_t message_cap) {
    code[0] = message[0] = 0;
    if (body == NULL || n == 0) return;
    xml_line(body, n, "Code", code, code_cap);
    xml_line(body, n, "Message", message, message_cap);
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int mcdc_az_blob_name(const char *blob, const char *end, mcdc_buf *out, bool *found,
                     mcdc_error *err) {
    const char *pos = blob, *content;
    size_t len;
    mcdc_buf_reset(out);
    if (!(*found = mcdc_xml_next(&pos, end, "Name", &content, &len))) return MCDC_OK;
    const char *open = content;
    while (open > blob && *open != '<') open--;
    bool encoded = memmem(open, (size_t)(content - open), "Encoded=\"true\"", 14) != NULL;
    int rc = mcdc_xml_unescape(out, content, len, err);
    if (rc == MCDC_OK && encoded) {
        char *t = (char *)out->data, *o = t;
        for (size_t i = 0; i < out->len; i++) {
            int hi, lo;
            if (t[i] == '%' && i + 2 < out->len && (hi = hex_digit(t[i + 1])) >= 0 &&
                (lo = hex_digit(t[i + 2])) >= 0) {
                *o++ = (char)(hi << 4 | lo);
                i += 2;
            } else {
                *o++ = t[i];
            }
        }
        out->len = (size_t)(o - t);
    }
    return rc == MCDC_OK ? mcdc_buf_cstr(out, err) : rc;
}

void mcdc_az_redact(char *s, size_t cap) {
    static const char red[] = "REDACTED";
    for (char *p = s; (p = strstr(p, "sig=")) != NULL;) {
        if (p != s && p[-1] != '?' && p[-1] != '&' && p[-1] != ' ' && p[-1] != '"') {
            p += 4;
            continue;
        }
        char *v = p + 4;
        size_t vlen = strcspn(v, "& \"'\n");
        size_t rest = strlen(v + vlen) + 1; /* with the NUL */
        size_t at = (size_t)(v - s);
        if (at + sizeof red - 1 + rest > cap) { /* no room to shift: cut here */
            v[0] = 0;
            return;
        }
        memmove(v + sizeof red - 1, v + vlen, rest);
        memcpy(v, red, sizeof red - 1);
        p = v + sizeof red - 1;
    }
}

/* The value of parameter name in a query ("a=1&b=2"), length in *n. */
static const char *query_param(const char *q, const char *name, size_t *n) {
    size_t nl = strlen(name);
    for (const char *p = q; p && *p;) {
        if (strncmp(p, name, nl) == 0 && p[nl] == '=') {
            *n = strcspn(p + nl + 1, "&");
            return p + nl + 1;
        }
        p = strchr(p, '&');
        if (p) p++;
    }
    *n = 0;
    return NULL;
}

void mcdc_az_sas_permissions(const char *sas, char *out, size_t cap) {
    size_t n;
    const char *v = query_param(sas, "sp", &n);
    if (v == NULL || cap == 0) n = 0;
    else if (n >= cap) n = cap - 1;
    if (cap) {
        if (n) memcpy(out, v, n);
        out[n] = 0;
    }
}

/* ---- connection strings ---------------------------------------------------------------- */

typedef struct connstr {
    char *copy; /* owned: the fields point into it */
    const char *protocol, *account, *key, *blob_endpoint, *sas, *suffix;
    bool dev;
} connstr;

static void connstr_free(connstr *cs) {
    if (cs->copy) {
        memset(cs->copy, 0, strlen(cs->copy)); /* it holds the key */
        mcdc_free(cs->copy);
    }
    memset(cs, 0, sizeof *cs);
}

/* "Key=Value;Key=Value;...": keys case-insensitive, a value may hold '='
 * (keys, SAS tokens). Endpoints of the other services are ignored; any
 * other key is a mistake worth saying (a misspelt AccountKey). No value
 * enters a message. */
static int connstr_parse(connstr *cs, const char *s, mcdc_error *err) {
    memset(cs, 0, sizeof *cs);
    if (strlen(s) > MCDC_CONNSTR_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "%s is longer than %d bytes",
                              MCDC_AZ_OPT_CONNSTR, MCDC_CONNSTR_BYTES_MAX);
    if ((cs->copy = mcdc_strdup(s)) == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    static const char *const ignored[] = {"QueueEndpoint", "TableEndpoint", "FileEndpoint",
                                          "DevelopmentStorageProxyUri", "QueueSecondaryEndpoint",
                                          "TableSecondaryEndpoint", "BlobSecondaryEndpoint",
                                          "FileSecondaryEndpoint"};
    char *save = NULL;
    int field = 0;
    for (char *part = strtok_r(cs->copy, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
        field++;
        while (*part == ' ' || *part == '\t' || *part == '\n' || *part == '\r') part++;
        if (*part == 0) continue;
        char *eq = strchr(part, '=');
        if (eq == NULL || eq == part)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s: field %d is not Key=Value (fields are separated by ';')",
                                  MCDC_AZ_OPT_CONNSTR, field);
        *eq = 0;
        const char *v = eq + 1;
        char *tail = eq + 1 + strlen(eq + 1);
        while (tail > eq + 1 && (tail[-1] == ' ' || tail[-1] == '\n' || tail[-1] == '\r'))
            *--tail = 0;
        if (strcasecmp(part, "DefaultEndpointsProtocol") == 0) cs->protocol = v;
        else if (strcasecmp(part, "AccountName") == 0) cs->account = v;
        else if (strcasecmp(part, "AccountKey") == 0) cs->key = v;
        else if (strcasecmp(part, "BlobEndpoint") == 0) cs->blob_endpoint = v;
        else if (strcasecmp(part, "SharedAccessSignature") == 0) cs->sas = v;
        else if (strcasecmp(part, "EndpointSuffix") == 0) cs->suffix = v;
        else if (strcasecmp(part, "UseDevelopmentStorage") == 0) {
            if (strcasecmp(v, "true") != 0)
                return mcdc_error_set(err, MCDC_E_INVALID,
                                      "%s: UseDevelopmentStorage must be true when given",
                                      MCDC_AZ_OPT_CONNSTR);
            cs->dev = true;
        } else {
            bool known = false;
            for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
                known = known || strcasecmp(part, ignored[i]) == 0;
            if (!known)
                return mcdc_error_set(err, MCDC_E_INVALID,
                                      "%s: unknown field \"%.40s\" (known: "
                                      "DefaultEndpointsProtocol, AccountName, AccountKey, "
                                      "BlobEndpoint, SharedAccessSignature, EndpointSuffix, "
                                      "UseDevelopmentStorage)",
                                      MCDC_AZ_OPT_CONNSTR, part);
        }
    }
    if (cs->protocol && strcasecmp(cs->protocol, "https") != 0 &&
        strcasecmp(cs->protocol, "http") != 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s: DefaultEndpointsProtocol must be https or http",
                              MCDC_AZ_OPT_CONNSTR);
    return MCDC_OK;
}

/* ---- the configuration ------------------------------------------------------------------ */

/* Storage account names: 3 to 24 lower-case letters and digits (they
 * become a host name). */
static bool valid_account(const char *a, size_t n) {
    if (n < 3 || n > 24) return false;
    for (size_t i = 0; i < n; i++)
        if (!((a[i] >= 'a' && a[i] <= 'z') || (a[i] >= '0' && a[i] <= '9'))) return false;
    return true;
}

/* Container names: 3 to 63 lower-case letters, digits and single '-',
 * starting and ending with a letter or digit. */
static bool valid_container(const char *c, size_t n) {
    if (n < 3 || n > 63 || c[0] == '-' || c[n - 1] == '-') return false;
    for (size_t i = 0; i < n; i++) {
        bool ok = (c[i] >= 'a' && c[i] <= 'z') || (c[i] >= '0' && c[i] <= '9') ||
                  (c[i] == '-' && c[i + 1] != '-');
        if (!ok) return false;
    }
    return true;
}

/* What a location says: the container, the prefix, and (the @ forms) the
 * account and the host's service suffix ("core.windows.net"). */
typedef struct az_uri {
    const char *container;
    size_t container_len;
    const char *account; /* NULL: not named */
    size_t account_len;
    const char *suffix; /* NULL: the default */
    size_t suffix_len;
    const char *path;
} az_uri;

static int parse_uri(az_uri *u, const char *location, mcdc_error *err) {
    memset(u, 0, sizeof *u);
    const char *rest = strstr(location, "://");
    MCDC_ASSERT(rest != NULL); /* the scheme table matched "<scheme>://" */
    rest += 3;
    size_t head = strcspn(rest, "/");
    const char *at = memchr(rest, '@', head);
    u->container = rest;
    u->container_len = at ? (size_t)(at - rest) : head;
    u->path = rest + head;
    if (at) {
        const char *host = at + 1;
        size_t hlen = (size_t)(rest + head - host);
        const char *dot = memchr(host, '.', hlen);
        u->account = host;
        u->account_len = dot ? (size_t)(dot - host) : hlen;
        if (dot) {
            const char *svc = dot + 1;
            size_t left = hlen - u->account_len - 1;
            if (left > 4 && (strncmp(svc, "dfs.", 4) == 0 || strncmp(svc, "blob.", 5) == 0)) {
                size_t skip = svc[0] == 'd' ? 4 : 5;
                u->suffix = svc + skip;
                u->suffix_len = left - skip;
            } else {
                return mcdc_error_set(err, MCDC_E_INVALID,
                                      "location \"%s\": the host must be "
                                      "<account>.dfs.<suffix> or <account>.blob.<suffix> "
                                      "(such as acct.dfs.core.windows.net)",
                                      location);
            }
        }
        if (!valid_account(u->account, u->account_len))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "location \"%s\": \"%.*s\" is not a storage account name (3 to "
                                  "24 lower-case letters and digits)",
                                  location, (int)u->account_len, u->account);
    }
    if (!valid_container(u->container, u->container_len))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "location \"%s\": \"%.*s\" is not a container name (3 to 63 "
                              "lower-case letters, digits and single hyphens); write "
                              "abfss://<container>@<account>.dfs.core.windows.net/<path> or "
                              "az://<container>/<path>",
                              location, (int)u->container_len, u->container);
    return MCDC_OK;
}

/* The prefix below the container: "" or "a/b/", checked as a key is. */
static int make_prefix(mcdc_az_config *c, const char *location, const char *path,
                       mcdc_error *err) {
    while (*path == '/') path++;
    size_t n = strlen(path);
    while (n > 0 && path[n - 1] == '/') n--;
    if (n == 0) return (c->prefix = mcdc_strdup("")) ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    char *p = mcdc_strndup(path, n);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = mcdc_storage_check_key(p, err);
    if (rc == MCDC_OK && strpbrk(p, "?#") != NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "a path with '?' or '#'");
    if (rc == MCDC_OK) c->prefix = mcdc_asprintf("%s/", p);
    mcdc_free(p);
    if (rc) {
        mcdc_error_wrap(err, "location \"%s\"", location);
        return rc;
    }
    return c->prefix ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
}

/* One account name from up to three places, which must agree. */
static int pick_account(mcdc_az_config *c, const char *location, const az_uri *u,
                        const char *opt, const connstr *cs, bool emulator, mcdc_error *err) {
    const char *names[3] = {NULL, opt, cs->account};
    size_t lens[3] = {u->account_len, opt ? strlen(opt) : 0, cs->account ? strlen(cs->account) : 0};
    static const char *const from[3] = {"the location", MCDC_AZ_OPT_ACCOUNT,
                                        "the connection string's AccountName"};
    names[0] = u->account;
    int first = -1;
    for (int i = 0; i < 3; i++) {
        if (names[i] == NULL) continue;
        if (!valid_account(names[i], lens[i]))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s names \"%.*s\", which is not a storage account name (3 to "
                                  "24 lower-case letters and digits)",
                                  from[i], (int)lens[i], names[i]);
        if (first < 0) first = i;
        else if (lens[i] != lens[first] || memcmp(names[i], names[first], lens[i]) != 0)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "location \"%s\": %s names account \"%.*s\" but %s names "
                                  "\"%.*s\"; make them agree",
                                  location, from[first], (int)lens[first], names[first], from[i],
                                  (int)lens[i], names[i]);
    }
    if (first >= 0) c->account = mcdc_strndup(names[first], lens[first]);
    else if (emulator) c->account = mcdc_strdup(MCDC_AZ_EMULATOR_ACCOUNT);
    else
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "location \"%s\" names no storage account: write "
                              "abfss://<container>@<account>.dfs.core.windows.net/<path>, or set "
                              "%s or %s",
                              location, MCDC_AZ_OPT_ACCOUNT, MCDC_AZ_OPT_CONNSTR);
    return c->account ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
}

/* AZURE_ALLOW_HTTP, or AZURE_STORAGE_ALLOW_HTTP (the same, under the name
 * of the other AZURE_STORAGE_* options: both are accepted). */
static int allow_http_option(const mcdc_storage_env *env, bool *out, mcdc_error *err) {
    bool a = false, b = false;
    int rc = mcdc_storage_option_bool(env, MCDC_AZ_OPT_ALLOW_HTTP, &a, err);
    if (rc == MCDC_OK) rc = mcdc_storage_option_bool(env, "AZURE_STORAGE_ALLOW_HTTP", &b, err);
    *out = a || b;
    return rc;
}

/* A value that goes into a header or a URL as it is: printable ASCII, no
 * space. */
static bool token_chars_ok(const char *v) {
    for (; *v; v++)
        if ((unsigned char)*v <= ' ' || (unsigned char)*v >= 0x7f) return false;
    return true;
}

/* An Entra ID endpoint option: https; plain http when allowed, or (local)
 * to the link-local or loopback address the identity services listen on.
 * No user info, query or fragment; kept without its trailing '/'. */
static int entra_url(char **out, const char *v, const char *from, bool allow_http, bool local,
                     mcdc_error *err) {
    static const char *const near[] = {"169.254.169.254", "127.0.0.1", "localhost", "[::1]"};
    bool https = strncasecmp(v, "https://", 8) == 0, http = strncasecmp(v, "http://", 7) == 0;
    const char *host = v + (https ? 8 : 7);
    size_t host_n = strcspn(host, ":/");
    bool near_ok = false;
    for (size_t i = 0; http && local && i < sizeof near / sizeof near[0]; i++)
        near_ok = near_ok || (host_n == strlen(near[i]) && memcmp(host, near[i], host_n) == 0);
    if ((!https && !http) || host_n == 0 || strpbrk(v, "@?# \t\r\n") || !token_chars_ok(v))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s \"%.200s\" is not an endpoint URL (https://host[:port][/path], "
                              "no query)",
                              from, v);
    if (http && !allow_http && !near_ok)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s \"%.200s\" is plain http, which would send a credential "
                              "unencrypted: use https (or set %s=true, for tests only)",
                              from, v, MCDC_AZ_OPT_ALLOW_HTTP);
    size_t n = strlen(v);
    while (n > 0 && v[n - 1] == '/') n--;
    return (*out = mcdc_strndup(v, n)) ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM,
                                                                   "out of memory");
}

/* A tenant as it goes into the token URL's path: a GUID or a domain name. */
static bool tenant_ok(const char *t) {
    size_t n = strlen(t);
    if (n == 0 || n > 100) return false;
    for (; *t; t++)
        if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') ||
              *t == '-' || *t == '.'))
            return false;
    return true;
}

/* A service principal: its secret, or a federated token file (workload
 * identity). Both need the client and the tenant. */
static int pick_principal(mcdc_az_config *c, const mcdc_storage_env *env, bool allow_http,
                          mcdc_error *err) {
    mcdc_az_entra_config *e = &c->entra;
    const char *secret = mcdc_storage_option(env, MCDC_AZ_OPT_CLIENT_SECRET);
    const char *file = mcdc_storage_option(env, MCDC_AZ_OPT_FEDERATED_TOKEN_FILE);
    const char *id = mcdc_storage_option(env, MCDC_AZ_OPT_CLIENT_ID);
    const char *tenant = mcdc_storage_option(env, MCDC_AZ_OPT_TENANT_ID);
    const char *given = secret ? MCDC_AZ_OPT_CLIENT_SECRET : MCDC_AZ_OPT_FEDERATED_TOKEN_FILE;
    if (id == NULL || tenant == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s is given without %s: a service principal needs %s and %s "
                              "(the application's client id and its directory's tenant id)",
                              given, id == NULL ? MCDC_AZ_OPT_CLIENT_ID : MCDC_AZ_OPT_TENANT_ID,
                              MCDC_AZ_OPT_CLIENT_ID, MCDC_AZ_OPT_TENANT_ID);
    if (!tenant_ok(tenant))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s \"%.120s\" is not a tenant id (a GUID or a domain such as "
                              "contoso.onmicrosoft.com)",
                              MCDC_AZ_OPT_TENANT_ID, tenant);
    if (!token_chars_ok(id) || (secret && !token_chars_ok(secret)))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s holds a space or a control character; copy it again",
                              !token_chars_ok(id) ? MCDC_AZ_OPT_CLIENT_ID
                                                  : MCDC_AZ_OPT_CLIENT_SECRET);
    const char *authority = mcdc_storage_option(env, MCDC_AZ_OPT_AUTHORITY_HOST);
    char *host = NULL;
    int rc = entra_url(&host, authority ? authority : MCDC_AZ_AUTHORITY_DEFAULT,
                       MCDC_AZ_OPT_AUTHORITY_HOST, allow_http, false, err);
    if (rc) return rc;
    e->token_url = mcdc_asprintf("%s/%s/oauth2/v2.0/token", host, tenant);
    mcdc_free(host);
    e->client_id = mcdc_strdup(id);
    if (secret) {
        c->cred = MCDC_AZ_CRED_CLIENT_SECRET;
        c->cred_source = MCDC_AZ_OPT_CLIENT_SECRET;
        e->client_secret = mcdc_strdup(secret);
    } else {
        c->cred = MCDC_AZ_CRED_WORKLOAD;
        c->cred_source = MCDC_AZ_OPT_FEDERATED_TOKEN_FILE;
        e->token_file = mcdc_strdup(file);
    }
    if (!e->token_url || !e->client_id || (secret ? !e->client_secret : !e->token_file))
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return MCDC_OK;
}

/* A managed identity, when the options name one: its endpoint (IMDS unless
 * the host's own is given) and which identity (a user-assigned one by
 * client id, resource id or object id; else the system-assigned one).
 * *used is false when nothing asks for one. */
static int pick_managed(mcdc_az_config *c, const mcdc_storage_env *env, bool allow_http,
                        bool *used, mcdc_error *err) {
    mcdc_az_entra_config *e = &c->entra;
    static const char *const ep_names[] = {MCDC_AZ_OPT_MSI_ENDPOINT, "IDENTITY_ENDPOINT",
                                           "MSI_ENDPOINT"};
    const char *ep = NULL, *ep_from = NULL;
    for (size_t i = 0; ep == NULL && i < sizeof ep_names / sizeof ep_names[0]; i++)
        if ((ep = mcdc_storage_option(env, ep_names[i])) != NULL) ep_from = ep_names[i];
    const char *id = mcdc_storage_option(env, MCDC_AZ_OPT_CLIENT_ID);
    const char *res = mcdc_storage_option(env, MCDC_AZ_OPT_MSI_RESOURCE_ID);
    const char *obj = mcdc_storage_option(env, MCDC_AZ_OPT_OBJECT_ID);
    bool asked = false;
    int rc = mcdc_storage_option_bool(env, MCDC_AZ_OPT_MANAGED_IDENTITY, &asked, err);
    *used = rc == MCDC_OK && (ep || id || res || obj || asked);
    if (rc || !*used) return rc;
    if ((id != NULL) + (res != NULL) + (obj != NULL) > 1)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "a managed identity is named by at most one of %s, %s and %s",
                              MCDC_AZ_OPT_CLIENT_ID, MCDC_AZ_OPT_MSI_RESOURCE_ID,
                              MCDC_AZ_OPT_OBJECT_ID);
    const char *header = mcdc_storage_option(env, "IDENTITY_HEADER");
    const char *which = id ? id : res ? res : obj;
    if ((which && !token_chars_ok(which)) || (header && !token_chars_ok(header)))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s holds a space or a control character; copy it again",
                              which && !token_chars_ok(which)
                                  ? (id ? MCDC_AZ_OPT_CLIENT_ID
                                        : res ? MCDC_AZ_OPT_MSI_RESOURCE_ID : MCDC_AZ_OPT_OBJECT_ID)
                                  : "IDENTITY_HEADER");
    rc = entra_url(&e->msi_url, ep ? ep : MCDC_AZ_IMDS_DEFAULT, ep ? ep_from : "IMDS", allow_http,
                   true, err);
    if (rc) return rc;
    if (which) {
        mcdc_buf b = {0};
        rc = mcdc_buf_append_str(&b, id ? "client_id=" : res ? "msi_res_id=" : "object_id=", err);
        if (rc == MCDC_OK) rc = mcdc_http_append_encoded(&b, which, strlen(which), false, err);
        if (rc == MCDC_OK) rc = mcdc_buf_cstr(&b, err);
        if (rc == MCDC_OK) e->msi_id_param = (char *)b.data;
        else mcdc_buf_free(&b);
        if (rc) return rc;
    }
    if (header && (e->msi_header = mcdc_strdup(header)) == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    c->cred = MCDC_AZ_CRED_MANAGED;
    c->cred_source = ep ? ep_from : "the machine's managed identity";
    return MCDC_OK;
}

/* Entra ID, when the options give it: a token as it is, a service
 * principal, or a managed identity. *used is false when they give none. */
static int pick_entra(mcdc_az_config *c, const mcdc_storage_env *env, bool *used,
                      mcdc_error *err) {
    bool allow_http = false;
    int rc = allow_http_option(env, &allow_http, err);
    if (rc) return rc;
    const char *token = mcdc_storage_option(env, MCDC_AZ_OPT_TOKEN);
    *used = true;
    if (token) {
        if (strncasecmp(token, "Bearer ", 7) == 0) token += 7;
        if (token[0] == 0 || !token_chars_ok(token))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s is not a bearer token (one word of printable characters)",
                                  MCDC_AZ_OPT_TOKEN);
        c->cred = MCDC_AZ_CRED_TOKEN;
        c->cred_source = MCDC_AZ_OPT_TOKEN;
        return (c->entra.token = mcdc_strdup(token)) ? MCDC_OK
                                                     : mcdc_error_set(err, MCDC_E_NOMEM,
                                                                      "out of memory");
    }
    if (mcdc_storage_option(env, MCDC_AZ_OPT_CLIENT_SECRET) ||
        mcdc_storage_option(env, MCDC_AZ_OPT_FEDERATED_TOKEN_FILE))
        return pick_principal(c, env, allow_http, err);
    return pick_managed(c, env, allow_http, used, err);
}

/* The credential: an account key (option, then connection string), else
 * a SAS token (the same order), else Entra ID, else the emulator's key. */
static int pick_credential(mcdc_az_config *c, const char *location, const mcdc_storage_env *env,
                           const connstr *cs, bool emulator, mcdc_error *err) {
    const char *key = mcdc_storage_option(env, MCDC_AZ_OPT_KEY);
    const char *key_from = MCDC_AZ_OPT_KEY;
    if (key == NULL && cs->key) key = cs->key, key_from = "the connection string's AccountKey";
    const char *sas = mcdc_storage_option(env, MCDC_AZ_OPT_SAS);
    const char *sas_from = MCDC_AZ_OPT_SAS;
    if (sas == NULL && cs->sas) sas = cs->sas, sas_from = "the connection string's SharedAccessSignature";
    if (key == NULL && sas == NULL) {
        bool entra = false;
        int rc = pick_entra(c, env, &entra, err);
        if (rc || entra) return rc;
        if (emulator) key = k_emulator_key, key_from = "the emulator's well-known key";
    }
    if (key) {
        c->cred = MCDC_AZ_CRED_SHARED_KEY;
        c->cred_source = key_from;
        if (mcdc_az_base64_decode(c->key, sizeof c->key, &c->key_len, key, strlen(key)) != 0 ||
            c->key_len == 0)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s is not an account key (base64 of at most 64 bytes, as the "
                                  "portal shows it); copy it again",
                                  key_from);
        return MCDC_OK;
    }
    if (sas == NULL) /* as S3 says "no AWS credentials": a PermissionError */
        return mcdc_error_set(err, MCDC_E_PERMISSION,
                              "location \"%s\": no credential for account \"%s\": set %s, %s or "
                              "%s (or %s=true for Azurite), or Entra ID: %s, %s + %s + %s, %s "
                              "(workload identity), or a managed identity (%s, %s or %s=true)",
                              location, c->account, MCDC_AZ_OPT_KEY, MCDC_AZ_OPT_SAS,
                              MCDC_AZ_OPT_CONNSTR, MCDC_AZ_OPT_EMULATOR, MCDC_AZ_OPT_TOKEN,
                              MCDC_AZ_OPT_CLIENT_ID, MCDC_AZ_OPT_CLIENT_SECRET,
                              MCDC_AZ_OPT_TENANT_ID, MCDC_AZ_OPT_FEDERATED_TOKEN_FILE,
                              MCDC_AZ_OPT_MSI_ENDPOINT, MCDC_AZ_OPT_CLIENT_ID,
                              MCDC_AZ_OPT_MANAGED_IDENTITY);
    if (sas[0] == '?') sas++;
    size_t n;
    bool clean = strpbrk(sas, " \t\r\n#?") == NULL;
    if (!clean || query_param(sas, "sig", &n) == NULL || n == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s is not a SAS token (a query such as sv=...&sp=...&sig=..., "
                              "without spaces)",
                              sas_from);
    c->cred = MCDC_AZ_CRED_SAS;
    c->cred_source = sas_from;
    return (c->sas = mcdc_strdup(sas)) ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
}

/* The blob endpoint: AZURE_STORAGE_ENDPOINT, the connection string's
 * BlobEndpoint, the emulator's, or https://<account>.blob.<suffix>. The
 * emulator serves accounts by path: an emulator endpoint without a path
 * gets "/<account>". Plain http needs the emulator, AZURE_ALLOW_HTTP, or a
 * connection string that says http. */
static int pick_endpoint(mcdc_az_config *c, const mcdc_storage_env *env, const az_uri *u,
                         const connstr *cs, bool emulator, mcdc_error *err) {
    const char *ep = mcdc_storage_option(env, MCDC_AZ_OPT_ENDPOINT);
    const char *from = MCDC_AZ_OPT_ENDPOINT;
    bool cs_http = cs->protocol && strcasecmp(cs->protocol, "http") == 0;
    if (ep == NULL && cs->blob_endpoint) ep = cs->blob_endpoint, from = "the connection string's BlobEndpoint";
    bool allow_http = false;
    int rc = allow_http_option(env, &allow_http, err);
    if (rc) return rc;
    if (ep == NULL && emulator) ep = MCDC_AZ_EMULATOR_ENDPOINT, from = "the emulator's endpoint";
    if (ep) {
        size_t n = strlen(ep);
        while (n > 0 && ep[n - 1] == '/') n--;
        bool https = strncasecmp(ep, "https://", 8) == 0, http = strncasecmp(ep, "http://", 7) == 0;
        size_t host_at = https ? 8 : 7;
        if ((!https && !http) || n <= host_at || memchr(ep, '@', n) || strpbrk(ep, "?# \t\r\n"))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s \"%.200s\" is not an endpoint URL (https://host[:port][/path], "
                                  "no query)",
                                  from, ep);
        if (http && !emulator && !allow_http && !(cs_http && ep == cs->blob_endpoint))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "%s \"%.200s\" is plain http: set %s=true to allow it (for "
                                  "emulators and tests only)",
                                  from, ep, MCDC_AZ_OPT_ALLOW_HTTP);
        bool has_path = memchr(ep + host_at, '/', n - host_at) != NULL;
        c->endpoint = emulator && !has_path ? mcdc_asprintf("%.*s/%s", (int)n, ep, c->account)
                                            : mcdc_strndup(ep, n);
    } else {
        const char *proto = cs_http ? "http" : "https";
        if (cs->suffix)
            c->endpoint = mcdc_asprintf("%s://%s.blob.%s", proto, c->account, cs->suffix);
        else if (u->suffix)
            c->endpoint = mcdc_asprintf("%s://%s.blob.%.*s", proto, c->account,
                                        (int)u->suffix_len, u->suffix);
        else c->endpoint = mcdc_asprintf("%s://%s.blob.core.windows.net", proto, c->account);
    }
    if (c->endpoint == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    const char *host = strstr(c->endpoint, "://") + 3;
    c->endpoint_path = host + strcspn(host, "/");
    return MCDC_OK;
}

static int pick_block_bytes(mcdc_az_config *c, const mcdc_storage_env *env, mcdc_error *err) {
    const char *v = mcdc_storage_option(env, MCDC_AZ_OPT_BLOCK_BYTES);
    c->block_bytes = MCDC_AZ_BLOCK_BYTES;
    if (v == NULL) return MCDC_OK;
    int64_t n;
    if (mcdc_parse_i64(v, &n) != 0 || n < AZ_BLOCK_BYTES_MIN || n > MCDC_AZ_BLOCK_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "storage option %s=\"%.40s\" must be a number of bytes from %u to %u",
                              MCDC_AZ_OPT_BLOCK_BYTES, v, AZ_BLOCK_BYTES_MIN,
                              (unsigned)MCDC_AZ_BLOCK_BYTES_MAX);
    c->block_bytes = (size_t)n;
    return MCDC_OK;
}

int mcdc_az_config_load(mcdc_az_config *c, const mcdc_storage_env *env, const char *location,
                        mcdc_error *err) {
    memset(c, 0, sizeof *c);
    az_uri u;
    connstr cs = {0};
    int rc = parse_uri(&u, location, err);
    if (rc == MCDC_OK) rc = make_prefix(c, location, u.path, err);
    const char *s = mcdc_storage_option(env, MCDC_AZ_OPT_CONNSTR);
    if (rc == MCDC_OK && s) rc = connstr_parse(&cs, s, err);
    bool emulator = false;
    if (rc == MCDC_OK)
        rc = mcdc_storage_option_bool(env, MCDC_AZ_OPT_EMULATOR, &emulator, err);
    emulator = emulator || cs.dev;
    if (rc == MCDC_OK) rc = pick_account(c, location, &u, mcdc_storage_option(env, MCDC_AZ_OPT_ACCOUNT), &cs, emulator, err);
    if (rc == MCDC_OK && (c->container = mcdc_strndup(u.container, u.container_len)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK) rc = pick_credential(c, location, env, &cs, emulator, err);
    if (rc == MCDC_OK) rc = pick_endpoint(c, env, &u, &cs, emulator, err);
    if (rc == MCDC_OK) rc = pick_block_bytes(c, env, err);
    connstr_free(&cs);
    return rc;
}

void mcdc_az_config_free(mcdc_az_config *c) {
    if (c == NULL) return;
    mcdc_free(c->account);
    mcdc_free(c->container);
    mcdc_free(c->prefix);
    mcdc_free(c->endpoint);
    wipe_free(c->sas);
    mcdc_az_entra_config *e = &c->entra;
    wipe_free(e->token);
    mcdc_free(e->client_id);
    wipe_free(e->client_secret);
    mcdc_free(e->token_url);
    mcdc_free(e->token_file);
    mcdc_free(e->msi_url);
    wipe_free(e->msi_header);
    mcdc_free(e->msi_id_param);
    gnutls_memset(c->key, 0, sizeof c->key);
    memset(c, 0, sizeof *c);
}
