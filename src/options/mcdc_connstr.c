/* mcdc_connstr.c - ODBC keyword connection strings: parse, redact. */
#include "mcdc_connstr.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef enum {
    K_UNKNOWN = 0,
    K_SERVER,
    K_DATABASE,
    K_USER,
    K_PASSWORD,
    K_ENCRYPT,
    K_TRUST,
    K_HOSTCERT,
    K_SERVERCERT,
    K_TIMEOUT,
    K_APP,
    K_DRIVER
} keyword;

/* Keywords compared lowercased with spaces removed. */
static const struct {
    const char *name;
    keyword k;
} KEYWORDS[] = {
    {"server", K_SERVER},
    {"address", K_SERVER},
    {"addr", K_SERVER},
    {"datasource", K_SERVER},
    {"networkaddress", K_SERVER},
    {"database", K_DATABASE},
    {"initialcatalog", K_DATABASE},
    {"uid", K_USER},
    {"userid", K_USER},
    {"user", K_USER},
    {"pwd", K_PASSWORD},
    {"password", K_PASSWORD},
    {"encrypt", K_ENCRYPT},
    {"trustservercertificate", K_TRUST},
    {"hostnameincertificate", K_HOSTCERT},
    {"servercertificate", K_SERVERCERT},
    {"connectiontimeout", K_TIMEOUT},
    {"connecttimeout", K_TIMEOUT},
    {"logintimeout", K_TIMEOUT},
    {"timeout", K_TIMEOUT},
    {"app", K_APP},
    {"applicationname", K_APP},
    {"driver", K_DRIVER},
};

static keyword lookup(const char *key, size_t n) {
    char norm[64];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (key[i] == ' ' || key[i] == '\t') continue;
        if (m + 1 >= sizeof norm) return K_UNKNOWN;
        norm[m++] = (char)tolower((unsigned char)key[i]);
    }
    norm[m] = 0;
    for (size_t i = 0; i < sizeof KEYWORDS / sizeof KEYWORDS[0]; i++)
        if (strcmp(norm, KEYWORDS[i].name) == 0) return KEYWORDS[i].k;
    return K_UNKNOWN;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* A keyword's name for messages: its canonical spelling for known ones
 * (never user text for the password). */
static const char *canonical(keyword k) {
    switch (k) {
    case K_SERVER: return "Server";
    case K_DATABASE: return "Database";
    case K_USER: return "UID";
    case K_PASSWORD: return "PWD";
    case K_ENCRYPT: return "Encrypt";
    case K_TRUST: return "TrustServerCertificate";
    case K_HOSTCERT: return "HostNameInCertificate";
    case K_SERVERCERT: return "ServerCertificate";
    case K_TIMEOUT: return "Connection Timeout";
    case K_APP: return "App";
    case K_DRIVER: return "Driver";
    case K_UNKNOWN: return NULL;
    }
    return NULL;
}

/* Values quoted in messages only when short and plain: a braced value could
 * have swallowed a following PWD=... pair. */
static void describe_value(const char *v, char out[48]) {
    size_t n = strlen(v);
    if (n <= 32 && strpbrk(v, ";{}=") == NULL)
        snprintf(out, 48, "'%s'", v);
    else
        snprintf(out, 48, "<value not shown>");
}

static bool looks_secret(const char *key) {
    char low[64];
    size_t n = strlen(key);
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)key[i]);
    low[n] = 0;
    return strstr(low, "pwd") || strstr(low, "pass") || strstr(low, "secret") ||
           strstr(low, "token") || strstr(low, "key");
}

void mcdc_connstr_free(mcdc_connstr *c) {
    if (c == NULL) return;
    mcdc_free(c->host);
    mcdc_free(c->instance);
    mcdc_free(c->database);
    mcdc_free(c->user);
    if (c->password) {
        /* Do not leave the secret in freed memory. */
        volatile char *p = c->password;
        while (*p) *p++ = 0;
        mcdc_free(c->password);
    }
    mcdc_free(c->app);
    mcdc_free(c->driver);
    mcdc_free(c->host_name_in_certificate);
    mcdc_free(c->server_certificate);
    for (int i = 0; i < c->n_unknown; i++) {
        mcdc_free(c->unknown[i].key);
        mcdc_free(c->unknown[i].value);
    }
    mcdc_free(c->unknown);
    mcdc_free(c);
}

static int parse_bool(const char *v, bool *out) {
    if (mcdc_str_ieq(v, "yes") || mcdc_str_ieq(v, "true") || mcdc_str_ieq(v, "1")) {
        *out = true;
        return 0;
    }
    if (mcdc_str_ieq(v, "no") || mcdc_str_ieq(v, "false") || mcdc_str_ieq(v, "0")) {
        *out = false;
        return 0;
    }
    return -1;
}

static int replace(char **slot, char *v) {
    mcdc_free(*slot);
    *slot = v;
    return MCDC_OK;
}

/* Server value: [tcp:]host[\instance][,port], host may be [ipv6]. */
static int set_server(mcdc_connstr *c, char *v, size_t pos, mcdc_error *err) {
    char *s = v;
    if (mcdc_str_nieq(s, "tcp:", 4)) s += 4;
    else if (mcdc_str_nieq(s, "np:", 3) || mcdc_str_nieq(s, "lpc:", 4) ||
             mcdc_str_nieq(s, "admin:", 6)) {
        mcdc_free(v);
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "connection string: Server at position %zu uses a protocol "
                              "prefix other than tcp: (named pipes, shared memory and the "
                              "admin connection are not supported); write tcp:host,port",
                              pos);
    }
    int port = 0;
    char *comma = strrchr(s, ',');
    if (comma) {
        char *p = comma + 1;
        while (is_space(*p)) p++;
        int64_t pv;
        if (mcdc_parse_i64(p, &pv) != MCDC_OK || pv < 1 || pv > 65535) {
            char shown[48];
            describe_value(p, shown);
            mcdc_free(v);
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "connection string: Server at position %zu has port %s; "
                                  "expected a number 1-65535 after the comma",
                                  pos, shown);
        }
        port = (int)pv;
        *comma = 0;
    }
    char *inst = NULL;
    size_t hl;
    if (s[0] == '[') {
        char *close = strchr(s, ']');
        if (close == NULL) {
            mcdc_free(v);
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "connection string: Server at position %zu opens '[' "
                                  "without the closing ']'",
                                  pos);
        }
        if (close[1] == '\\') inst = close + 2;
        else {
            char *t = close + 1;
            while (is_space(*t)) t++;
            if (*t) {
                mcdc_free(v);
                return mcdc_error_set(err, MCDC_E_INVALID,
                                      "connection string: Server at position %zu has text "
                                      "after ']'; expected \\instance or ,port",
                                      pos);
            }
        }
        s++;
        hl = (size_t)(close - s);
    } else {
        char *bs = strchr(s, '\\');
        if (bs) {
            *bs = 0;
            inst = bs + 1;
        }
        hl = strlen(s);
        while (hl && is_space(s[hl - 1])) hl--;
    }
    if (inst) {
        size_t il = strlen(inst);
        while (il && is_space(inst[il - 1])) inst[--il] = 0;
        if (il == 0) {
            mcdc_free(v);
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "connection string: Server at position %zu ends with "
                                  "'\\' but names no instance",
                                  pos);
        }
    }
    if (hl == 0) {
        mcdc_free(v);
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "connection string: Server at position %zu names no host", pos);
    }
    /* Host names and instance names are plain: no spaces, controls or the
     * characters that structure the value. */
    for (size_t q = 0; q < hl; q++) {
        unsigned char ch = (unsigned char)s[q];
        if (ch <= 0x20 || ch == 0x7F || strchr(";{}=,\\[]", ch)) {
            mcdc_free(v);
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "connection string: Server at position %zu: the host name "
                                  "contains a space, a control character or one of ;{}=,\\[]",
                                  pos);
        }
    }
    for (const char *q = inst; q && *q; q++) {
        unsigned char ch = (unsigned char)*q;
        if (ch <= 0x20 || ch == 0x7F || strchr(";{}=,\\[]", ch)) {
            mcdc_free(v);
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "connection string: Server at position %zu: the instance "
                                  "name contains a space, a control character or one of "
                                  ";{}=,\\[]",
                                  pos);
        }
    }
    char *host;
    if ((hl == 1 && s[0] == '.') || (hl == 7 && mcdc_str_nieq(s, "(local)", 7)))
        host = mcdc_strdup("localhost");
    else
        host = mcdc_strndup(s, hl);
    char *instance = inst ? mcdc_strdup(inst) : NULL;
    mcdc_free(v);
    if (host == NULL || (inst && instance == NULL)) {
        mcdc_free(host);
        mcdc_free(instance);
        return mcdc_error_set(err, MCDC_E_NOMEM, "connection string: out of memory");
    }
    replace(&c->host, host);
    replace(&c->instance, instance);
    c->port = port;
    return MCDC_OK;
}

/* Applies one pair; takes ownership of key and value. */
static int apply(mcdc_connstr *c, char *key, char *v, size_t kpos, size_t vpos,
                 mcdc_error *err) {
    keyword k = lookup(key, strlen(key));
    char shown[48];
    int rc = MCDC_OK;
    bool b;
    switch (k) {
    case K_SERVER:
        mcdc_free(key);
        return set_server(c, v, vpos, err);
    case K_DATABASE: replace(&c->database, v); break;
    case K_USER: replace(&c->user, v); break;
    case K_PASSWORD:
        if (c->password) {
            volatile char *p = c->password;
            while (*p) *p++ = 0;
        }
        replace(&c->password, v);
        break;
    case K_APP: replace(&c->app, v); break;
    case K_HOSTCERT: replace(&c->host_name_in_certificate, v); break;
    case K_SERVERCERT: replace(&c->server_certificate, v); break;
    case K_DRIVER: replace(&c->driver, v); break;
    case K_ENCRYPT:
        if (mcdc_str_ieq(v, "yes") || mcdc_str_ieq(v, "true") || mcdc_str_ieq(v, "mandatory"))
            c->encrypt = MCDC_ENCRYPT_YES;
        else if (mcdc_str_ieq(v, "no") || mcdc_str_ieq(v, "false") ||
                 mcdc_str_ieq(v, "optional"))
            c->encrypt = MCDC_ENCRYPT_NO;
        else if (mcdc_str_ieq(v, "strict"))
            c->encrypt = MCDC_ENCRYPT_STRICT;
        else {
            describe_value(v, shown);
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "connection string: Encrypt at position %zu is %s; expected "
                                "yes, no, strict, mandatory or optional",
                                vpos, shown);
        }
        mcdc_free(v);
        break;
    case K_TRUST:
        if (parse_bool(v, &b) == 0)
            c->trust_server_certificate = b ? 1 : 0;
        else {
            describe_value(v, shown);
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "connection string: TrustServerCertificate at position %zu "
                                "is %s; expected yes or no",
                                vpos, shown);
        }
        mcdc_free(v);
        break;
    case K_TIMEOUT: {
        int64_t t;
        if (mcdc_parse_i64(v, &t) == MCDC_OK && t >= 0 && t <= 86400)
            c->connect_timeout_s = (int)t;
        else {
            describe_value(v, shown);
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "connection string: Connection Timeout at position %zu is "
                                "%s; expected whole seconds 0-86400",
                                vpos, shown);
        }
        mcdc_free(v);
        break;
    }
    case K_UNKNOWN: {
        for (int i = 0; i < c->n_unknown; i++) {
            if (mcdc_str_ieq(c->unknown[i].key, key)) {
                mcdc_free(c->unknown[i].value);
                c->unknown[i].value = v;
                mcdc_free(key);
                return MCDC_OK;
            }
        }
        mcdc_connstr_pair *np =
            mcdc_realloc(c->unknown, sizeof *np * (size_t)(c->n_unknown + 1));
        if (np == NULL) {
            mcdc_free(key);
            mcdc_free(v);
            return mcdc_error_set(err, MCDC_E_NOMEM, "connection string: out of memory");
        }
        c->unknown = np;
        np[c->n_unknown].key = key;
        np[c->n_unknown].value = v;
        c->n_unknown++;
        mcdc_log(MCDC_LOG_WARN,
                 "connection string: unknown keyword '%.64s' at position %zu is ignored", key,
                 kpos);
        return MCDC_OK;
    }
    }
    mcdc_free(key);
    return rc;
}

int mcdc_connstr_parse(mcdc_connstr **out, const char *s, mcdc_error *err) {
    MCDC_ASSERT(out != NULL);
    *out = NULL;
    if (s == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "connection string: missing");
    size_t n = strnlen(s, MCDC_CONNSTR_BYTES_MAX + 1);
    if (n > MCDC_CONNSTR_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "connection string: longer than %d bytes",
                              MCDC_CONNSTR_BYTES_MAX);
    mcdc_connstr *c = mcdc_calloc(1, sizeof *c);
    if (c == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "connection string: out of memory");
    c->trust_server_certificate = -1;
    c->connect_timeout_s = -1;
    int rc = MCDC_OK;
    size_t i = 0;
    while (i < n) {
        while (i < n && (is_space(s[i]) || s[i] == ';')) i++;
        if (i >= n) break;
        size_t kstart = i;
        while (i < n && s[i] != '=' && s[i] != ';') i++;
        size_t kend = i;
        while (kend > kstart && is_space(s[kend - 1])) kend--;
        if (i >= n || s[i] == ';') {
            /* A keyword without '=' could be a pasted password: do not echo it. */
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "connection string: the pair at position %zu has no '='; "
                                "write keyword=value pairs separated by ';'",
                                kstart);
            goto fail;
        }
        if (kend == kstart) {
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "connection string: '=' at position %zu has no keyword before "
                                "it",
                                i);
            goto fail;
        }
        for (size_t q = kstart; q < kend; q++) {
            unsigned char ch = (unsigned char)s[q];
            if (ch == '{' || ch == '}' || ch < 0x20) {
                rc = mcdc_error_set(err, MCDC_E_INVALID,
                                    "connection string: keyword at position %zu contains "
                                    "'{', '}' or a control character",
                                    kstart);
                goto fail;
            }
        }
        keyword k = lookup(s + kstart, kend - kstart);
        const char *kname = canonical(k);
        char unk_name[72];
        if (kname == NULL) {
            snprintf(unk_name, sizeof unk_name, "'%.*s'",
                     (int)(kend - kstart > 64 ? 64 : kend - kstart), s + kstart);
            kname = unk_name;
        }
        const char *kshown = k == K_PASSWORD ? "PWD=<redacted>" : kname;
        i++; /* '=' */
        while (i < n && is_space(s[i])) i++;
        size_t vpos = i;
        mcdc_buf val = {0};
        val.limit = MCDC_CONNSTR_BYTES_MAX + 1;
        if (i < n && s[i] == '{') {
            i++;
            bool closed = false;
            while (i < n) {
                if (s[i] == '}') {
                    if (i + 1 < n && s[i + 1] == '}') {
                        if (mcdc_buf_append_byte(&val, '}', err) != MCDC_OK) goto nomem;
                        i += 2;
                        continue;
                    }
                    closed = true;
                    i++;
                    break;
                }
                if (mcdc_buf_append_byte(&val, (uint8_t)s[i], err) != MCDC_OK) goto nomem;
                i++;
            }
            if (!closed) {
                mcdc_buf_free(&val);
                rc = mcdc_error_set(err, MCDC_E_INVALID,
                                    "connection string: the braced value of %s starting at "
                                    "position %zu has no closing '}' (write '}}' for a '}' "
                                    "inside braces)",
                                    kshown, vpos);
                goto fail;
            }
            while (i < n && is_space(s[i])) i++;
            if (i < n && s[i] != ';') {
                mcdc_buf_free(&val);
                rc = mcdc_error_set(err, MCDC_E_INVALID,
                                    "connection string: unexpected text at position %zu after "
                                    "the braced value of %s; expected ';'",
                                    i, kshown);
                goto fail;
            }
        } else {
            size_t vstart = i;
            while (i < n && s[i] != ';') i++;
            size_t vend = i;
            while (vend > vstart && is_space(s[vend - 1])) vend--;
            if (mcdc_buf_append(&val, s + vstart, vend - vstart, err) != MCDC_OK) goto nomem;
        }
        if (mcdc_buf_cstr(&val, err) != MCDC_OK) goto nomem;
        if (strlen((char *)val.data) != val.len) {
            /* An embedded NUL cannot happen from a C string; keep it honest. */
            mcdc_buf_free(&val);
            rc = mcdc_error_set(err, MCDC_E_INVALID, "connection string: NUL in value of %s",
                                kshown);
            goto fail;
        }
        char *key = mcdc_strndup(s + kstart, kend - kstart);
        if (key == NULL) {
            mcdc_buf_free(&val);
            goto nomem;
        }
        rc = apply(c, key, (char *)val.data, kstart, vpos, err);
        if (rc != MCDC_OK) goto fail;
        continue;
    nomem:
        mcdc_buf_free(&val);
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "connection string: out of memory");
        goto fail;
    }
    if (c->host == NULL) {
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "connection string: no Server given; add Server=host,port "
                            "(synonyms: Address, Addr, Data Source)");
        goto fail;
    }
    *out = c;
    return MCDC_OK;
fail:
    mcdc_connstr_free(c);
    return rc;
}

/* Appends key=value, bracing the value when it needs it. */
static int render_pair(mcdc_buf *b, const char *key, const char *v, mcdc_error *err) {
    if (b->len && mcdc_buf_append_byte(b, ';', err) != MCDC_OK) return MCDC_E_NOMEM;
    if (mcdc_buf_append_str(b, key, err) != MCDC_OK) return MCDC_E_NOMEM;
    if (mcdc_buf_append_byte(b, '=', err) != MCDC_OK) return MCDC_E_NOMEM;
    size_t n = strlen(v);
    bool brace = n > 0 && (strpbrk(v, ";{}") != NULL || is_space(v[0]) || is_space(v[n - 1]));
    if (!brace) return mcdc_buf_append_str(b, v, err);
    if (mcdc_buf_append_byte(b, '{', err) != MCDC_OK) return MCDC_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '}' && mcdc_buf_append_byte(b, '}', err) != MCDC_OK) return MCDC_E_NOMEM;
        if (mcdc_buf_append_byte(b, (uint8_t)v[i], err) != MCDC_OK) return MCDC_E_NOMEM;
    }
    return mcdc_buf_append_byte(b, '}', err);
}

char *mcdc_connstr_redacted(const mcdc_connstr *c) {
    MCDC_ASSERT(c != NULL);
    mcdc_buf b = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = MCDC_OK;
    if (c->driver) rc |= render_pair(&b, "Driver", c->driver, &e);
    char server[MCDC_CONNSTR_BYTES_MAX + 64];
    bool v6 = strchr(c->host, ':') != NULL;
    int w = snprintf(server, sizeof server, "tcp:%s%s%s%s%s", v6 ? "[" : "", c->host,
                     v6 ? "]" : "", c->instance ? "\\" : "", c->instance ? c->instance : "");
    if (c->port && w > 0 && (size_t)w < sizeof server)
        snprintf(server + w, sizeof server - (size_t)w, ",%d", c->port);
    rc |= render_pair(&b, "Server", server, &e);
    if (c->database) rc |= render_pair(&b, "Database", c->database, &e);
    if (c->user) rc |= render_pair(&b, "UID", c->user, &e);
    if (c->password) rc |= mcdc_buf_append_str(&b, ";PWD={***}", &e);
    static const char *const ENC[] = {NULL, "no", "yes", "strict"};
    if (c->encrypt != MCDC_ENCRYPT_DEFAULT) rc |= render_pair(&b, "Encrypt", ENC[c->encrypt], &e);
    if (c->trust_server_certificate >= 0)
        rc |= render_pair(&b, "TrustServerCertificate",
                          c->trust_server_certificate ? "yes" : "no", &e);
    if (c->host_name_in_certificate)
        rc |= render_pair(&b, "HostNameInCertificate", c->host_name_in_certificate, &e);
    if (c->server_certificate)
        rc |= render_pair(&b, "ServerCertificate", c->server_certificate, &e);
    if (c->connect_timeout_s >= 0) {
        char t[16];
        snprintf(t, sizeof t, "%d", c->connect_timeout_s);
        rc |= render_pair(&b, "Connection Timeout", t, &e);
    }
    if (c->app) rc |= render_pair(&b, "App", c->app, &e);
    for (int i = 0; i < c->n_unknown; i++)
        rc |= render_pair(&b, c->unknown[i].key,
                          looks_secret(c->unknown[i].key) ? "***" : c->unknown[i].value, &e);
    if (rc != MCDC_OK || mcdc_buf_cstr(&b, &e) != MCDC_OK) {
        mcdc_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

const char *mcdc_connstr_freetds_encryption(const mcdc_connstr *c) {
    switch (c->encrypt) {
    case MCDC_ENCRYPT_YES:
    case MCDC_ENCRYPT_STRICT: return "require";
    case MCDC_ENCRYPT_DEFAULT:
    case MCDC_ENCRYPT_NO: return "request";
    }
    return "request";
}
