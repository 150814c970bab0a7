/*
 * mcdc_azure_entra.c - Entra ID bearer tokens (see the header).
 */
#include "mcdc_azure_entra.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct mcdc_az_entra {
    atomic_int refs;    /* its stores and the share holding it */
    pthread_mutex_t mu; /* the token: a renewal replaces it while others use it */
    char *token;        /* owned (a secret) */
    int64_t expires_ms; /* 0: does not expire (AZURE_STORAGE_TOKEN) */
    int fetches;
    mcdc_az_cred kind;
    mcdc_az_entra_config c; /* owned copies */
    const char *source;     /* static: the option that gave the credential */
    mcdc_http *http;        /* renewals' pool (NULL for a given token) */
};

static void wipe_free(char *s) {
    if (s == NULL) return;
    gnutls_memset(s, 0, strlen(s));
    mcdc_free(s);
}

static void wipe_buf(mcdc_buf *b) {
    if (b->data) gnutls_memset(b->data, 0, b->len);
    mcdc_buf_free(b);
}

void mcdc_az_entra_free(mcdc_az_entra *t) {
    if (t == NULL || atomic_fetch_sub(&t->refs, 1) > 1) return;
    wipe_free(t->token);
    wipe_free(t->c.token);
    mcdc_free(t->c.client_id);
    wipe_free(t->c.client_secret);
    mcdc_free(t->c.token_url);
    mcdc_free(t->c.token_file);
    mcdc_free(t->c.msi_url);
    wipe_free(t->c.msi_header);
    mcdc_free(t->c.msi_id_param);
    mcdc_http_free(t->http);
    pthread_mutex_destroy(&t->mu);
    mcdc_free(t);
}

/* ---- the answers ------------------------------------------------------------------------ */

/* A whole number of seconds, as a JSON number or a string of digits. */
static bool json_seconds(json_t *v, int64_t *out) {
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return *out > 0;
    }
    const char *s = json_string_value(v);
    if (s == NULL || s[0] == 0 || strlen(s) > 12) return false;
    int64_t n = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        n = n * 10 + (*s - '0');
    }
    *out = n;
    return n > 0;
}

int mcdc_az_token_parse(char **token, int64_t *expires_ms, const char *body, size_t n,
                        int64_t now_ms, const char *what, mcdc_error *err) {
    *token = NULL;
    *expires_ms = 0;
    json_error_t je;
    json_t *j = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je);
    const char *tok = json_string_value(json_object_get(j, "access_token"));
    const char *type = json_string_value(json_object_get(j, "token_type"));
    int64_t on = 0, in = 0;
    bool has_on = json_seconds(json_object_get(j, "expires_on"), &on);
    bool has_in = json_seconds(json_object_get(j, "expires_in"), &in);
    int rc = MCDC_OK;
    if (j == NULL || !json_is_object(j))
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "%s answered with something other than a "
                            "token in JSON", what);
    else if (tok == NULL || tok[0] == 0)
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "%s answered without an access_token", what);
    else if (type && strcasecmp(type, "Bearer") != 0)
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "%s gave a token of type \"%.40s\", not a "
                            "bearer token", what, type);
    else if (!has_on && !has_in)
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "%s gave a token without a valid expiry "
                            "(expires_on or expires_in)", what);
    else {
        for (const char *p = tok; *p && rc == MCDC_OK; p++)
            if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
                rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "%s gave a token with a character a "
                                    "header cannot carry", what);
    }
    if (rc == MCDC_OK) {
        /* expires_on wins: it does not depend on when the answer arrived */
        *expires_ms = has_on ? on * 1000 : now_ms + in * 1000;
        if ((*token = mcdc_strdup(tok)) == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    json_decref(j);
    return rc;
}

void mcdc_az_token_error(char *out, size_t cap, const char *body, size_t n) {
    out[0] = 0;
    json_error_t je;
    json_t *j = json_loadb(body, n, 0, &je);
    json_t *e = json_object_get(j, "error");
    const char *code = json_string_value(e);
    const char *desc = json_string_value(json_object_get(j, "error_description"));
    if (json_is_object(e)) { /* {"error": {"code": ..., "message": ...}} */
        code = json_string_value(json_object_get(e, "code"));
        desc = json_string_value(json_object_get(e, "message"));
    }
    if (desc == NULL) desc = json_string_value(json_object_get(j, "message"));
    if (code || desc) {
        size_t dn = desc ? strcspn(desc, "\r\n") : 0;
        if (dn > 300) dn = 300;
        snprintf(out, cap, "%s%s%.*s", code ? code : "", code && dn ? ": " : "", (int)dn,
                 desc ? desc : "");
        for (char *p = out; *p; p++)
            if ((unsigned char)*p < ' ') *p = ' ';
    }
    json_decref(j);
}

/* ---- fetching ------------------------------------------------------------------------------ */

/* The federated token file, read whole (at most MCDC_AZ_TOKEN_ANSWER_BYTES_MAX),
 * without its trailing white space. */
static int read_token_file(mcdc_buf *out, const char *path, mcdc_error *err) {
    FILE *f = fopen(path, "rbe");
    if (f == NULL)
        return mcdc_error_set(err, MCDC_E_PERMISSION, "%s %s cannot be read: %s",
                              MCDC_AZ_OPT_FEDERATED_TOKEN_FILE, path, strerror(errno));
    char chunk[4096];
    int rc = MCDC_OK;
    out->limit = MCDC_AZ_TOKEN_ANSWER_BYTES_MAX;
    for (size_t k; rc == MCDC_OK && (k = fread(chunk, 1, sizeof chunk, f)) > 0;)
        rc = mcdc_buf_append(out, chunk, k, err);
    if (rc == MCDC_OK && ferror(f))
        rc = mcdc_error_set(err, MCDC_E_PERMISSION, "cannot read %s %s", 
                            MCDC_AZ_OPT_FEDERATED_TOKEN_FILE, path);
    fclose(f);
    gnutls_memset(chunk, 0, sizeof chunk);
    while (rc == MCDC_OK && out->len > 0 &&
           (out->data[out->len - 1] == '\n' || out->data[out->len - 1] == '\r' ||
            out->data[out->len - 1] == ' '))
        out->len--;
    if (rc == MCDC_OK && out->len == 0)
        rc = mcdc_error_set(err, MCDC_E_PERMISSION, "%s %s is empty",
                            MCDC_AZ_OPT_FEDERATED_TOKEN_FILE, path);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(out, err);
    return rc;
}

/* Appends "&name=<value percent-encoded>". */
static int form_field(mcdc_buf *b, const char *name, const char *value, size_t n,
                      mcdc_error *err) {
    int rc = mcdc_buf_printf(b, err, "%s%s=", b->len ? "&" : "", name);
    return rc ? rc : mcdc_http_append_encoded(b, value, n, false, err);
}

/* Entra ID's token endpoint: the client credentials grant, with the
 * client's secret or with the federated token as its assertion. */
static int principal_request(mcdc_az_entra *t, mcdc_buf *body, mcdc_error *err) {
    static const char scope[] = MCDC_AZ_TOKEN_RESOURCE ".default";
    static const char assertion_type[] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
    int rc = form_field(body, "grant_type", "client_credentials", 18, err);
    if (rc == MCDC_OK)
        rc = form_field(body, "client_id", t->c.client_id, strlen(t->c.client_id), err);
    if (rc == MCDC_OK) rc = form_field(body, "scope", scope, sizeof scope - 1, err);
    if (rc == MCDC_OK && t->kind == MCDC_AZ_CRED_CLIENT_SECRET)
        rc = form_field(body, "client_secret", t->c.client_secret, strlen(t->c.client_secret),
                        err);
    if (rc == MCDC_OK && t->kind == MCDC_AZ_CRED_WORKLOAD) {
        mcdc_buf jwt = {0}; /* the platform rotates the file: read it each time */
        rc = read_token_file(&jwt, t->c.token_file, err);
        if (rc == MCDC_OK)
            rc = form_field(body, "client_assertion_type", assertion_type,
                            sizeof assertion_type - 1, err);
        if (rc == MCDC_OK)
            rc = form_field(body, "client_assertion", (const char *)jwt.data, jwt.len, err);
        wipe_buf(&jwt);
    }
    return rc ? rc : mcdc_buf_cstr(body, err);
}

/* Asks for a token and parses it into *token / *expires_ms. */
static int fetch(mcdc_az_entra *t, char **token, int64_t *expires_ms, mcdc_error *err) {
    mcdc_http_headers h = {0};
    mcdc_buf url = {0}, body = {0}, ans = {0};
    char what[600];
    bool managed = t->kind == MCDC_AZ_CRED_MANAGED;
    int rc;
    if (managed) {
        snprintf(what, sizeof what, "the managed identity endpoint %s", t->c.msi_url);
        rc = mcdc_buf_printf(&url, err, "%s?api-version=%s&resource=", t->c.msi_url,
                             MCDC_AZ_MSI_API_VERSION);
        if (rc == MCDC_OK)
            rc = mcdc_http_append_encoded(&url, MCDC_AZ_TOKEN_RESOURCE,
                                          strlen(MCDC_AZ_TOKEN_RESOURCE), false, err);
        if (rc == MCDC_OK && t->c.msi_id_param)
            rc = mcdc_buf_printf(&url, err, "&%s", t->c.msi_id_param);
        if (rc == MCDC_OK) rc = mcdc_http_headers_set(&h, "Metadata", "true", err);
        if (rc == MCDC_OK && t->c.msi_header)
            rc = mcdc_http_headers_set(&h, "X-IDENTITY-HEADER", t->c.msi_header, err);
    } else {
        snprintf(what, sizeof what, "Entra ID's token endpoint %s (%s, client %s)",
                 t->c.token_url, t->source, t->c.client_id);
        rc = mcdc_buf_append_str(&url, t->c.token_url, err);
        if (rc == MCDC_OK) rc = principal_request(t, &body, err);
        if (rc == MCDC_OK)
            rc = mcdc_http_headers_set(&h, "Content-Type", "application/x-www-form-urlencoded",
                                       err);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&url, err);
    ans.limit = MCDC_AZ_TOKEN_ANSWER_BYTES_MAX;
    mcdc_http_response r;
    memset(&r, 0, sizeof r);
    if (rc == MCDC_OK) {
        mcdc_http_request req = {.method = managed ? MCDC_HTTP_GET : MCDC_HTTP_POST,
                                 .url = (const char *)url.data, .headers = &h,
                                 .body = managed ? NULL : body.data,
                                 .body_len = managed ? 0 : body.len, .body_out = &ans,
                                 .retry_ambiguous = true, .what = what};
        rc = mcdc_http_do(t->http, &req, &r, err);
    }
    if (rc == MCDC_OK && (r.status < 200 || r.status > 299)) {
        char why[400];
        mcdc_az_token_error(why, sizeof why, (const char *)r.error_body.data, r.error_body.len);
        rc = mcdc_error_set(err, MCDC_E_PERMISSION, "%s refused to give a token for Azure "
                            "Storage: HTTP %ld%s%s; check %s", what, r.status, why[0] ? " " : "",
                            why, t->source);
    }
    if (rc == MCDC_OK)
        rc = mcdc_az_token_parse(token, expires_ms, (const char *)ans.data, ans.len,
                                 mcdc_now_utc_us() / 1000, what, err);
    if (rc == MCDC_OK) t->fetches++;
    mcdc_http_response_free(&r);
    mcdc_http_headers_free(&h);
    wipe_buf(&body);
    wipe_buf(&ans);
    mcdc_buf_free(&url);
    return rc;
}

static int renew(mcdc_az_entra *t, mcdc_error *err) {
    char *token = NULL;
    int64_t expires_ms = 0;
    int rc = fetch(t, &token, &expires_ms, err);
    if (rc == MCDC_OK) {
        wipe_free(t->token);
        t->token = token;
        t->expires_ms = expires_ms;
    }
    return rc;
}

static char *dup_or_null(const char *s, bool *oom) {
    char *d = s ? mcdc_strdup(s) : NULL;
    if (s && d == NULL) *oom = true;
    return d;
}

int mcdc_az_entra_create(mcdc_az_entra **out, const mcdc_az_config *c,
                         const mcdc_http_config *cfg, mcdc_error *err) {
    MCDC_ASSERT(c->cred >= MCDC_AZ_CRED_TOKEN && c->cred <= MCDC_AZ_CRED_MANAGED);
    *out = NULL;
    mcdc_az_entra *t = mcdc_calloc(1, sizeof *t);
    if (t == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    atomic_init(&t->refs, 1);
    pthread_mutex_init(&t->mu, NULL);
    t->kind = c->cred;
    t->source = c->cred_source;
    bool oom = false;
    const mcdc_az_entra_config *e = &c->entra;
    t->c.token = dup_or_null(e->token, &oom);
    t->c.client_id = dup_or_null(e->client_id, &oom);
    t->c.client_secret = dup_or_null(e->client_secret, &oom);
    t->c.token_url = dup_or_null(e->token_url, &oom);
    t->c.token_file = dup_or_null(e->token_file, &oom);
    t->c.msi_url = dup_or_null(e->msi_url, &oom);
    t->c.msi_header = dup_or_null(e->msi_header, &oom);
    t->c.msi_id_param = dup_or_null(e->msi_id_param, &oom);
    int rc = oom ? mcdc_error_set(err, MCDC_E_NOMEM, "out of memory") : MCDC_OK;
    if (rc == MCDC_OK && t->kind == MCDC_AZ_CRED_TOKEN) {
        t->token = t->c.token; /* as given, never renewed */
        t->c.token = NULL;
        t->fetches = 0;
    } else if (rc == MCDC_OK) {
        /* the proxy and CA of the storage; time limits of a token request:
         * an identity endpoint that is not there fails fast */
        mcdc_http_config tc = *cfg;
        /* an identity endpoint is the host's own (link-local or loopback):
         * never through the storage's proxy */
        if (t->kind == MCDC_AZ_CRED_MANAGED) tc.proxy_url = NULL;
        tc.connect_timeout_ms = t->kind == MCDC_AZ_CRED_MANAGED ? 2000 : 5000;
        tc.deadline_ms = t->kind == MCDC_AZ_CRED_MANAGED ? 10000 : 30000;
        tc.attempts_max = 3;
        rc = mcdc_http_create(&t->http, &tc, err);
        if (rc == MCDC_OK) rc = renew(t, err);
    }
    if (rc) {
        mcdc_az_entra_free(t);
        return rc;
    }
    *out = t;
    return MCDC_OK;
}

static bool same_str(const char *a, const char *b) {
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/* Whether t was made for the credential c says (the same kind, client,
 * secret, endpoints...): only then may a store of c use it. */
static bool same_credential(const mcdc_az_entra *t, const mcdc_az_config *c) {
    const mcdc_az_entra_config *e = &c->entra;
    /* a given token: t keeps it as its token, not in its config */
    return t->kind == c->cred && same_str(t->source, c->cred_source) &&
           same_str(t->kind == MCDC_AZ_CRED_TOKEN ? t->token : t->c.token, e->token) &&
           same_str(t->c.client_id, e->client_id) &&
           same_str(t->c.client_secret, e->client_secret) &&
           same_str(t->c.token_url, e->token_url) && same_str(t->c.token_file, e->token_file) &&
           same_str(t->c.msi_url, e->msi_url) && same_str(t->c.msi_header, e->msi_header) &&
           same_str(t->c.msi_id_param, e->msi_id_param);
}

int mcdc_az_entra_shared(mcdc_az_entra **out, const mcdc_az_config *c,
                         const mcdc_http_config *cfg, mcdc_cred_share *sh, mcdc_error *err) {
    if (sh == NULL) return mcdc_az_entra_create(out, c, cfg, err);
    *out = NULL;
    int rc = MCDC_OK;
    pthread_mutex_lock(&sh->mu);
    if (sh->azure == NULL) {
        /* the first store of the set: its token is fetched now, once */
        rc = mcdc_az_entra_create(&sh->azure, c, cfg, err);
        if (rc == MCDC_OK) {
            atomic_fetch_add(&sh->azure->refs, 1);
            *out = sh->azure;
        }
    } else if (same_credential(sh->azure, c)) {
        atomic_fetch_add(&sh->azure->refs, 1);
        *out = sh->azure;
    } else {
        /* another credential from the same set (a location's own): its own */
        rc = mcdc_az_entra_create(out, c, cfg, err);
    }
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

static int renew_cb(void *t, mcdc_error *err) { return renew(t, err); }

int mcdc_az_entra_authorize(mcdc_az_entra *t, mcdc_http_headers *hdrs, mcdc_error *err) {
    pthread_mutex_lock(&t->mu);
    int64_t now = mcdc_now_utc_us() / 1000;
    char what[300];
    snprintf(what, sizeof what, "the Entra ID token (%s, %s)", mcdc_az_cred_name(t->kind),
             t->source);
    int rc = mcdc_creds_renew_if_due(now, t->expires_ms, MCDC_AZ_TOKEN_RENEW_AHEAD_MS, renew_cb,
                                     t, what, err);
    char *auth = rc == MCDC_OK ? mcdc_asprintf("Bearer %s", t->token) : NULL;
    pthread_mutex_unlock(&t->mu);
    if (rc == MCDC_OK)
        rc = auth ? mcdc_http_headers_set(hdrs, "Authorization", auth, err)
                  : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    wipe_free(auth);
    return rc;
}

int mcdc_az_entra_fetches(mcdc_az_entra *t) {
    pthread_mutex_lock(&t->mu);
    int n = t->fetches;
    pthread_mutex_unlock(&t->mu);
    return n;
}
