/*
 * mcdc_aws_creds.c - AWS credentials from the storage options and the
 * shared profile files (see mcdc_aws_creds.h).
 */
#include "mcdc_aws_creds.h"

#include "mcdc_azure_entra.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mcdc_sigv4.h"
#include "mcdc_xml.h"

/* Where a key comes from, and so how it is renewed. */
typedef enum creds_kind {
    CREDS_STATIC = 0, /* options or a profile: never renewed */
    CREDS_WEB_IDENTITY, /* STS AssumeRoleWithWebIdentity with a token file */
    CREDS_CONTAINER,    /* the ECS (or EKS Pod Identity) credentials endpoint */
    CREDS_IMDS          /* EC2 instance metadata, version 2 */
} creds_kind;

struct mcdc_aws_creds {
    atomic_int refs;    /* the stores signing with it, and a share's hold (0: one) */
    pthread_mutex_t mu; /* the key: a refresh replaces it while others sign */
    char *key_id, *secret, *token; /* owned; token may be NULL */
    int64_t expires_ms;            /* 0: does not expire */
    char *source;                  /* owned: for messages */
    creds_kind kind;
    mcdc_http *http; /* renewals' pool (not CREDS_STATIC) */
    /* web identity */
    char *token_file, *role_arn, *session_name, *sts_url;
    /* container and instance metadata */
    char *md_url;  /* the credentials URL (container), or IMDS's base URL */
    char *md_auth; /* the container endpoint's Authorization value, or NULL (a secret) */
};

static void remote_fields_free(mcdc_aws_creds *f);

static void wipe_free(char *s) {
    if (s == NULL) return;
    memset(s, 0, strlen(s));
    mcdc_free(s);
}

void mcdc_aws_creds_free(mcdc_aws_creds *c) {
    if (c == NULL || atomic_fetch_sub(&c->refs, 1) > 0) return;
    mcdc_free(c->key_id);
    wipe_free(c->secret);
    wipe_free(c->token);
    mcdc_free(c->source);
    mcdc_http_free(c->http);
    remote_fields_free(c);
    pthread_mutex_destroy(&c->mu);
    mcdc_free(c);
}

static int creds_new(mcdc_aws_creds **out, const char *id, const char *secret, const char *token,
                     char *source_owned, mcdc_error *err) {
    mcdc_aws_creds *c = mcdc_calloc(1, sizeof *c);
    if (c) pthread_mutex_init(&c->mu, NULL);
    if (c == NULL || (c->key_id = mcdc_strdup(id)) == NULL ||
        (c->secret = mcdc_strdup(secret)) == NULL ||
        (token && (c->token = mcdc_strdup(token)) == NULL) || source_owned == NULL) {
        mcdc_free(source_owned);
        mcdc_aws_creds_free(c);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (credentials)");
    }
    c->source = source_owned;
    *out = c;
    return MCDC_OK;
}

/* ---- the shared files -------------------------------------------------------------------- */

/* A profile file read whole (at most MCDC_AWS_PROFILE_FILE_BYTES_MAX).
 * MCDC_E_NOTFOUND when it does not exist. */
static int read_file(mcdc_buf *out, const char *path, mcdc_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return mcdc_error_set(err, MCDC_E_NOTFOUND, "%s does not exist", path);
        return mcdc_error_set(err, MCDC_E_INVALID, "cannot read the AWS profile file %s: %s",
                              path, strerror(errno));
    }
    struct stat st;
    int rc = MCDC_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size > (off_t)MCDC_AWS_PROFILE_FILE_BYTES_MAX)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "the AWS profile file %s is not a regular file of at most %u bytes",
                            path, MCDC_AWS_PROFILE_FILE_BYTES_MAX);
    out->limit = MCDC_AWS_PROFILE_FILE_BYTES_MAX + 1;
    char chunk[4096];
    for (ssize_t k; rc == MCDC_OK && (k = read(fd, chunk, sizeof chunk)) != 0;) {
        if (k < 0) {
            if (errno == EINTR) continue;
            rc = mcdc_error_set(err, MCDC_E_INVALID, "cannot read %s: %s", path, strerror(errno));
        } else {
            rc = mcdc_buf_append(out, chunk, (size_t)k, err);
        }
    }
    close(fd);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(out, err);
    return rc;
}

void mcdc_aws_profile_free(mcdc_aws_profile *p) {
    mcdc_free(p->key_id);
    wipe_free(p->secret);
    wipe_free(p->token);
    mcdc_free(p->region);
    memset(p, 0, sizeof *p);
}

static void trim(const char **s, const char **e) {
    while (*s < *e && (**s == ' ' || **s == '\t')) (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\r')) (*e)--;
}

int mcdc_aws_profile_read(mcdc_aws_profile *p, const char *text, const char *section,
                          mcdc_error *err) {
    static const char *const foreign[] = {"role_arn", "sso_start_url", "sso_session",
                                          "credential_process", "web_identity_token_file"};
    bool in = false;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n'), *end = nl ? nl : line + strlen(line);
        const char *s = line, *e = end;
        line = nl ? nl + 1 : end;
        trim(&s, &e);
        if (s == e || *s == '#' || *s == ';') continue;
        if (*s == '[') {
            const char *n = s + 1, *ne = e;
            if (ne > n && ne[-1] == ']') ne--;
            trim(&n, &ne);
            in = (size_t)(ne - n) == strlen(section) && memcmp(n, section, (size_t)(ne - n)) == 0;
            if (in) p->found = true;
            continue;
        }
        const char *eq = memchr(s, '=', (size_t)(e - s));
        if (!in || eq == NULL) continue;
        const char *ks = s, *ke = eq, *vs = eq + 1, *ve = e;
        trim(&ks, &ke);
        trim(&vs, &ve);
        size_t kn = (size_t)(ke - ks);
        char **slot = NULL;
        if (kn == 17 && memcmp(ks, "aws_access_key_id", kn) == 0) slot = &p->key_id;
        else if (kn == 21 && memcmp(ks, "aws_secret_access_key", kn) == 0) slot = &p->secret;
        else if (kn == 17 && memcmp(ks, "aws_session_token", kn) == 0) slot = &p->token;
        else if (kn == 6 && memcmp(ks, "region", kn) == 0) slot = &p->region;
        for (size_t i = 0; slot == NULL && i < sizeof foreign / sizeof foreign[0]; i++)
            if (kn == strlen(foreign[i]) && memcmp(ks, foreign[i], kn) == 0)
                p->unsupported = foreign[i];
        if (slot == NULL || *slot != NULL) continue;
        if ((*slot = mcdc_strndup(vs, (size_t)(ve - vs))) == NULL)
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (AWS profile)");
    }
    return MCDC_OK;
}

/* Reads the profile from the credentials file ([name]) and the config file
 * ([profile name], or [default]). */
static int read_profile(mcdc_aws_profile *p, const char *name, const char *cred_path, const char *conf_path,
                        mcdc_error *err) {
    mcdc_buf text = {0};
    int rc = MCDC_OK;
    if (cred_path) {
        rc = read_file(&text, cred_path, err);
        if (rc == MCDC_OK) rc = mcdc_aws_profile_read(p, (const char *)text.data, name, err);
        if (rc == MCDC_E_NOTFOUND) rc = MCDC_OK;
        mcdc_buf_free(&text);
    }
    if (rc == MCDC_OK && conf_path) {
        char *section = strcmp(name, "default") == 0 ? mcdc_strdup(name)
                                                     : mcdc_asprintf("profile %s", name);
        rc = section ? read_file(&text, conf_path, err)
                     : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (rc == MCDC_OK) rc = mcdc_aws_profile_read(p, (const char *)text.data, section, err);
        if (rc == MCDC_E_NOTFOUND) rc = MCDC_OK;
        mcdc_free(section);
        mcdc_buf_free(&text);
    }
    return rc;
}

/* ---- keys that expire: web identity, container and instance metadata --------------------- */

void mcdc_aws_temp_keys_free(mcdc_aws_temp_keys *f) {
    mcdc_free(f->key_id);
    wipe_free(f->secret);
    wipe_free(f->token);
    memset(f, 0, sizeof *f);
}

/* "2026-12-06T21:00:00Z" as ms since 1970. */
static int parse_expiration(const char *s, int64_t *ms, const char *what, mcdc_error *err) {
    int64_t us;
    if (s == NULL || mcdc_parse_ts_us(s, strlen(s), &us, NULL) != MCDC_OK)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "%s gave credentials without a valid "
                              "expiration time", what);
    *ms = us / 1000;
    return MCDC_OK;
}

static int keys_check(const mcdc_aws_temp_keys *f, const char *what, mcdc_error *err) {
    if (f->key_id == NULL || f->key_id[0] == 0 || f->secret == NULL || f->secret[0] == 0)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "%s gave credentials without a key", what);
    return MCDC_OK;
}

/* A small GET/PUT/POST to a credentials service; the answer's body into
 * out. Non-2xx: MCDC_E_PERMISSION naming what (with the service's code). */
static int creds_call(mcdc_aws_creds *c, mcdc_http_method m, const char *url,
                      const mcdc_http_headers *h, const char *body, mcdc_buf *out,
                      const char *what, mcdc_error *err) {
    out->limit = MCDC_AWS_CREDS_ANSWER_BYTES_MAX;
    mcdc_http_request req = {.method = m, .url = url, .headers = h, .body = body,
                             .body_len = body ? strlen(body) : 0, .body_out = out,
                             .retry_ambiguous = true, .what = what};
    mcdc_http_response r;
    int rc = mcdc_http_do(c->http, &req, &r, err);
    if (rc == MCDC_OK && (r.status < 200 || r.status > 299)) {
        char code[64] = "", msg[256] = "";
        const char *d = r.error_body.data ? (const char *)r.error_body.data : "";
        mcdc_xml_text_fixed(code, sizeof code, d, r.error_body.len, "Code");
        mcdc_xml_text_fixed(msg, sizeof msg, d, r.error_body.len, "Message");
        rc = mcdc_error_set(err, MCDC_E_PERMISSION, "%s was refused: HTTP %ld %s%s%s", what,
                            r.status, code, msg[0] ? ": " : "", msg);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(out, err);
    mcdc_http_response_free(&r);
    return rc;
}

int mcdc_aws_sts_parse(mcdc_aws_temp_keys *f, const char *body, size_t n, const char *what,
                       mcdc_error *err) {
    mcdc_buf v = {0};
    char **slots[3] = {&f->key_id, &f->secret, &f->token};
    static const char *const tags[3] = {"AccessKeyId", "SecretAccessKey", "SessionToken"};
    int rc = MCDC_OK;
    for (int i = 0; rc == MCDC_OK && i < 3; i++) {
        mcdc_buf_reset(&v);
        if (mcdc_xml_text(&v, body, n, tags[i], NULL) == MCDC_OK &&
            (*slots[i] = mcdc_strndup((const char *)v.data, v.len)) == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    char exp[64];
    mcdc_xml_text_fixed(exp, sizeof exp, body, n, "Expiration");
    if (rc == MCDC_OK) rc = keys_check(f, what, err);
    if (rc == MCDC_OK) rc = parse_expiration(exp, &f->expires_ms, what, err);
    if (v.data) memset(v.data, 0, v.len);
    mcdc_buf_free(&v);
    return rc;
}

/* STS AssumeRoleWithWebIdentity with the token file's token (read anew
 * each time: the platform rotates it). */
static int fetch_web_identity(mcdc_aws_creds *c, mcdc_aws_temp_keys *f, mcdc_error *err) {
    mcdc_buf tok = {0}, body = {0}, ans = {0};
    mcdc_http_headers h = {0};
    int rc = read_file(&tok, c->token_file, err);
    if (rc == MCDC_E_NOTFOUND)
        rc = mcdc_error_set(err, MCDC_E_PERMISSION,
                            "AWS_WEB_IDENTITY_TOKEN_FILE %s does not exist", c->token_file);
    size_t n = tok.len;
    while (rc == MCDC_OK && n > 0 && (tok.data[n - 1] == '\n' || tok.data[n - 1] == '\r' ||
                                      tok.data[n - 1] == ' '))
        n--;
    if (rc == MCDC_OK && n == 0)
        rc = mcdc_error_set(err, MCDC_E_PERMISSION, "the web identity token file %s is empty",
                            c->token_file);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&body, "Action=AssumeRoleWithWebIdentity"
                                                       "&Version=2011-06-15&DurationSeconds=3600"
                                                       "&RoleArn=", err);
    if (rc == MCDC_OK) rc = mcdc_http_append_encoded(&body, c->role_arn, strlen(c->role_arn),
                                                      false, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&body, "&RoleSessionName=", err);
    if (rc == MCDC_OK) rc = mcdc_http_append_encoded(&body, c->session_name,
                                                      strlen(c->session_name), false, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&body, "&WebIdentityToken=", err);
    if (rc == MCDC_OK) rc = mcdc_http_append_encoded(&body, (const char *)tok.data, n, false, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&body, err);
    if (rc == MCDC_OK)
        rc = mcdc_http_headers_set(&h, "Content-Type", "application/x-www-form-urlencoded", err);
    char what[512];
    snprintf(what, sizeof what, "AssumeRoleWithWebIdentity of role %s at %s", c->role_arn,
             c->sts_url);
    if (rc == MCDC_OK)
        rc = creds_call(c, MCDC_HTTP_POST, c->sts_url, &h, (const char *)body.data, &ans, what,
                        err);
    if (rc == MCDC_OK) rc = mcdc_aws_sts_parse(f, (const char *)ans.data, ans.len, what, err);
    if (tok.data) memset(tok.data, 0, tok.len);
    if (body.data) memset(body.data, 0, body.len);
    if (ans.data) memset(ans.data, 0, ans.len);
    mcdc_buf_free(&tok);
    mcdc_buf_free(&body);
    mcdc_buf_free(&ans);
    mcdc_http_headers_free(&h);
    return rc;
}

int mcdc_aws_creds_json_parse(mcdc_aws_temp_keys *f, const char *body, size_t n,
                              const char *what, mcdc_error *err) {
    json_error_t je;
    json_t *j = json_loadb(body, n, 0, &je);
    if (j == NULL || !json_is_object(j)) {
        json_decref(j);
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "%s answered with something other than "
                              "credentials in JSON", what);
    }
    const char *id = json_string_value(json_object_get(j, "AccessKeyId"));
    const char *sec = json_string_value(json_object_get(j, "SecretAccessKey"));
    const char *tok = json_string_value(json_object_get(j, "Token"));
    const char *exp = json_string_value(json_object_get(j, "Expiration"));
    f->key_id = id ? mcdc_strdup(id) : NULL;
    f->secret = sec ? mcdc_strdup(sec) : NULL;
    f->token = tok ? mcdc_strdup(tok) : NULL;
    int rc = keys_check(f, what, err);
    if (rc == MCDC_OK) rc = parse_expiration(exp, &f->expires_ms, what, err);
    json_decref(j);
    return rc;
}

static int fetch_container(mcdc_aws_creds *c, mcdc_aws_temp_keys *f, mcdc_error *err) {
    mcdc_http_headers h = {0};
    mcdc_buf ans = {0};
    int rc = c->md_auth ? mcdc_http_headers_set(&h, "Authorization", c->md_auth, err) : MCDC_OK;
    char what[512];
    snprintf(what, sizeof what, "the container credentials endpoint %s", c->md_url);
    if (rc == MCDC_OK) rc = creds_call(c, MCDC_HTTP_GET, c->md_url, &h, NULL, &ans, what, err);
    if (rc == MCDC_OK) rc = mcdc_aws_creds_json_parse(f, (const char *)ans.data, ans.len, what, err);
    if (ans.data) memset(ans.data, 0, ans.len);
    mcdc_buf_free(&ans);
    mcdc_http_headers_free(&h);
    return rc;
}

/* IMDSv2: a session token (PUT), the instance profile's role, its keys. */
static int fetch_imds(mcdc_aws_creds *c, mcdc_aws_temp_keys *f, mcdc_error *err) {
    mcdc_http_headers h = {0};
    mcdc_buf tok = {0}, role = {0}, ans = {0};
    char what[512], *url = mcdc_asprintf("%s/latest/api/token", c->md_url);
    snprintf(what, sizeof what, "the instance metadata service at %s", c->md_url);
    int rc = url ? mcdc_http_headers_set(&h, "X-aws-ec2-metadata-token-ttl-seconds", "21600", err)
                 : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK) rc = creds_call(c, MCDC_HTTP_PUT, url, &h, NULL, &tok, what, err);
    mcdc_http_headers_free(&h);
    if (rc == MCDC_OK)
        rc = mcdc_http_headers_set(&h, "X-aws-ec2-metadata-token", (const char *)tok.data, err);
    mcdc_free(url);
    url = mcdc_asprintf("%s/latest/meta-data/iam/security-credentials/", c->md_url);
    if (rc == MCDC_OK && url == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK) rc = creds_call(c, MCDC_HTTP_GET, url, &h, NULL, &role, what, err);
    size_t rn = rc ? 0 : strcspn((const char *)role.data, "\r\n");
    if (rc == MCDC_OK && rn == 0)
        rc = mcdc_error_set(err, MCDC_E_PERMISSION, "%s: this instance has no IAM role "
                            "(attach an instance profile, or give keys)", what);
    mcdc_free(url);
    url = NULL;
    if (rc == MCDC_OK) {
        mcdc_buf u = {0};
        rc = mcdc_buf_printf(&u, err, "%s/latest/meta-data/iam/security-credentials/", c->md_url);
        if (rc == MCDC_OK) rc = mcdc_http_append_encoded(&u, (const char *)role.data, rn, false,
                                                          err);
        if (rc == MCDC_OK) rc = mcdc_buf_cstr(&u, err);
        if (rc == MCDC_OK) rc = creds_call(c, MCDC_HTTP_GET, (const char *)u.data, &h, NULL,
                                           &ans, what, err);
        mcdc_buf_free(&u);
    }
    if (rc == MCDC_OK) rc = mcdc_aws_creds_json_parse(f, (const char *)ans.data, ans.len, what, err);
    if (ans.data) memset(ans.data, 0, ans.len);
    if (tok.data) memset(tok.data, 0, tok.len);
    mcdc_buf_free(&tok);
    mcdc_buf_free(&role);
    mcdc_buf_free(&ans);
    mcdc_http_headers_free(&h);
    mcdc_free(url);
    return rc;
}

/* Fetches a fresh key and puts it in place (the lock held, or c not yet
 * shared). */
static int renew(mcdc_aws_creds *c, mcdc_error *err) {
    mcdc_aws_temp_keys f = {0};
    int rc = c->kind == CREDS_WEB_IDENTITY ? fetch_web_identity(c, &f, err)
             : c->kind == CREDS_CONTAINER  ? fetch_container(c, &f, err)
                                           : fetch_imds(c, &f, err);
    if (rc == MCDC_OK) {
        mcdc_free(c->key_id);
        wipe_free(c->secret);
        wipe_free(c->token);
        c->key_id = f.key_id;
        c->secret = f.secret;
        c->token = f.token;
        c->expires_ms = f.expires_ms;
        memset(&f, 0, sizeof f);
    }
    mcdc_aws_temp_keys_free(&f);
    return rc;
}

static void remote_fields_free(mcdc_aws_creds *f) {
    mcdc_free(f->token_file);
    mcdc_free(f->role_arn);
    mcdc_free(f->session_name);
    mcdc_free(f->sts_url);
    mcdc_free(f->md_url);
    wipe_free(f->md_auth);
    f->token_file = f->role_arn = f->session_name = f->sts_url = f->md_url = f->md_auth = NULL;
}

/* A key from a service (fields says where: taken, whatever the result),
 * fetched now and renewed before it expires. */
static int creds_remote(mcdc_aws_creds **out, creds_kind kind, char *source_owned,
                        const mcdc_http_config *cfg, mcdc_aws_creds *fields, mcdc_error *err) {
    mcdc_aws_creds *c = mcdc_calloc(1, sizeof *c);
    if (c == NULL || source_owned == NULL) {
        mcdc_free(c);
        mcdc_free(source_owned);
        remote_fields_free(fields);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (credentials)");
    }
    *c = *fields;
    memset(fields, 0, sizeof *fields);
    pthread_mutex_init(&c->mu, NULL);
    c->kind = kind;
    c->source = source_owned;
    int rc = mcdc_http_create(&c->http, cfg, err);
    if (rc == MCDC_OK) rc = renew(c, err);
    if (rc) {
        mcdc_aws_creds_free(c);
        return rc;
    }
    *out = c;
    return MCDC_OK;
}

/* ---- the chain ----------------------------------------------------------------------------- */

/* An endpoint option: https, or http when allowed; without its trailing
 * '/'. */
static int endpoint_option(char **out, const char *v, const char *name, bool allow_http,
                           mcdc_error *err) {
    bool https = strncasecmp(v, "https://", 8) == 0, http = strncasecmp(v, "http://", 7) == 0;
    if (!https && !(http && allow_http))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s \"%s\" must be an https:// URL%s", name, v,
                              http ? " (plain http needs AWS_ALLOW_HTTP=true)" : "");
    size_t n = strlen(v);
    while (n > 0 && v[n - 1] == '/') n--;
    if ((*out = mcdc_strndup(v, n)) == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return MCDC_OK;
}

static bool region_chars_ok(const char *r) {
    for (; *r; r++)
        if (!((*r >= 'a' && *r <= 'z') || (*r >= '0' && *r <= '9') || *r == '-')) return false;
    return true;
}

/* Web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN. *used says
 * whether the options ask for it. */
static int try_web_identity(mcdc_aws_creds **out, bool *used, const mcdc_storage_env *env,
                            const char *region, bool allow_http, mcdc_error *err) {
    const char *file = mcdc_storage_option(env, "AWS_WEB_IDENTITY_TOKEN_FILE");
    const char *arn = mcdc_storage_option(env, "AWS_ROLE_ARN");
    const char *name = mcdc_storage_option(env, "AWS_ROLE_SESSION_NAME");
    const char *sts = mcdc_storage_option(env, "AWS_ENDPOINT_URL_STS");
    *used = file != NULL;
    if (file == NULL) return MCDC_OK;
    if (arn == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "AWS_WEB_IDENTITY_TOKEN_FILE is given without AWS_ROLE_ARN, the "
                              "role to assume with it");
    mcdc_aws_creds f = {0};
    int rc = sts ? endpoint_option(&f.sts_url, sts, "AWS_ENDPOINT_URL_STS", allow_http, err)
                 : MCDC_OK;
    if (rc == MCDC_OK && f.sts_url == NULL)
        f.sts_url = region && region_chars_ok(region)
                        ? mcdc_asprintf("https://sts.%s.amazonaws.com", region)
                        : mcdc_strdup("https://sts.amazonaws.com");
    f.token_file = mcdc_strdup(file);
    f.role_arn = mcdc_strdup(arn);
    f.session_name = mcdc_strdup(name ? name : "mssql-cdc");
    if (rc == MCDC_OK && (!f.sts_url || !f.token_file || !f.role_arn || !f.session_name))
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc) {
        remote_fields_free(&f);
        return rc;
    }
    char *slash_url = mcdc_asprintf("%s/", f.sts_url);
    mcdc_free(f.sts_url);
    f.sts_url = slash_url;
    mcdc_http_config cfg = {.connect_timeout_ms = 5000, .deadline_ms = 30000, .attempts_max = 4};
    return creds_remote(out, CREDS_WEB_IDENTITY,
                        mcdc_asprintf("web identity, role %s, token file %s", arn, file), &cfg,
                        &f, err);
}

/* The container credentials endpoint (ECS, EKS Pod Identity). */
static int try_container(mcdc_aws_creds **out, bool *used, const mcdc_storage_env *env,
                         mcdc_error *err) {
    const char *rel = mcdc_storage_option(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const char *full = mcdc_storage_option(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
    const char *auth = mcdc_storage_option(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN");
    const char *auth_file = mcdc_storage_option(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    *used = rel || full;
    if (!*used) return MCDC_OK;
    mcdc_aws_creds f = {0};
    int rc = MCDC_OK;
    if (rel) {
        f.md_url = mcdc_asprintf("http://169.254.170.2%s%s", rel[0] == '/' ? "" : "/", rel);
    } else {
        /* plain http only to this machine or the link-local agents: the
         * request carries an authorization token */
        static const char *const local[] = {"http://127.0.0.1", "http://localhost",
                                            "http://[::1]", "http://169.254.170.2",
                                            "http://169.254.170.23"};
        bool ok = strncasecmp(full, "https://", 8) == 0;
        for (size_t i = 0; !ok && i < sizeof local / sizeof local[0]; i++) {
            size_t n = strlen(local[i]);
            ok = strncasecmp(full, local[i], n) == 0 && (full[n] == ':' || full[n] == '/' ||
                                                          full[n] == 0);
        }
        if (!ok)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "AWS_CONTAINER_CREDENTIALS_FULL_URI \"%s\" must be https, or "
                                  "http to this machine",
                                  full);
        f.md_url = mcdc_strdup(full);
    }
    if (auth) {
        f.md_auth = mcdc_strdup(auth);
    } else if (auth_file) {
        mcdc_buf b = {0};
        rc = read_file(&b, auth_file, err);
        if (rc == MCDC_E_NOTFOUND)
            rc = mcdc_error_set(err, MCDC_E_PERMISSION,
                                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s does not exist",
                                auth_file);
        size_t n = b.len;
        while (n > 0 && (b.data[n - 1] == '\n' || b.data[n - 1] == '\r')) n--;
        if (rc == MCDC_OK) f.md_auth = mcdc_strndup((const char *)b.data, n);
        if (b.data) memset(b.data, 0, b.len);
        mcdc_buf_free(&b);
    }
    if (rc == MCDC_OK && (f.md_url == NULL || ((auth || auth_file) && f.md_auth == NULL)))
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc) {
        remote_fields_free(&f);
        return rc;
    }
    mcdc_http_config cfg = {.connect_timeout_ms = 2000, .deadline_ms = 10000, .attempts_max = 3};
    return creds_remote(out, CREDS_CONTAINER, mcdc_asprintf("the container endpoint %s",
                                                           f.md_url),
                        &cfg, &f, err);
}

/* EC2 instance metadata (IMDSv2), unless AWS_EC2_METADATA_DISABLED. */
static int try_imds(mcdc_aws_creds **out, bool *used, const mcdc_storage_env *env,
                    mcdc_error *err) {
    bool disabled = false;
    int rc = mcdc_storage_option_bool(env, "AWS_EC2_METADATA_DISABLED", &disabled, err);
    *used = rc == MCDC_OK && !disabled;
    if (rc || disabled) return rc;
    const char *ep = mcdc_storage_option(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
    mcdc_aws_creds f = {0};
    rc = endpoint_option(&f.md_url, ep ? ep : "http://169.254.169.254",
                         "AWS_EC2_METADATA_SERVICE_ENDPOINT", true, err);
    if (rc) return rc;
    /* off EC2 nothing answers there: fail fast */
    mcdc_http_config cfg = {.connect_timeout_ms = 1000, .deadline_ms = 4000, .attempts_max = 2};
    return creds_remote(out, CREDS_IMDS, mcdc_asprintf("instance metadata at %s", f.md_url), &cfg,
                        &f, err);
}

void mcdc_cred_share_free(mcdc_cred_share *sh) {
    if (sh == NULL) return;
    mcdc_aws_creds_free(sh->aws);
    mcdc_az_entra_free(sh->azure);
    mcdc_free(sh->aws_region);
    sh->azure = NULL;
    sh->aws = NULL;
    sh->aws_region = NULL;
    pthread_mutex_destroy(&sh->mu);
}

int mcdc_aws_creds_shared(mcdc_aws_creds **out, char **region_out, const mcdc_storage_env *env,
                          mcdc_error *err) {
    mcdc_cred_share *sh = env ? env->share : NULL;
    if (sh == NULL) return mcdc_aws_creds_create(out, region_out, env, err);
    *out = NULL;
    *region_out = NULL;
    int rc = MCDC_OK;
    pthread_mutex_lock(&sh->mu);
    if (sh->aws == NULL) rc = mcdc_aws_creds_create(&sh->aws, &sh->aws_region, env, err);
    if (rc == MCDC_OK && sh->aws_region && (*region_out = mcdc_strdup(sh->aws_region)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK) {
        atomic_fetch_add(&sh->aws->refs, 1);
        *out = sh->aws;
    }
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

int mcdc_aws_creds_create(mcdc_aws_creds **out, char **region_out, const mcdc_storage_env *env,
                          mcdc_error *err) {
    *out = NULL;
    *region_out = NULL;
    const char *id = mcdc_storage_option(env, "AWS_ACCESS_KEY_ID");
    const char *secret = mcdc_storage_option(env, "AWS_SECRET_ACCESS_KEY");
    const char *token = mcdc_storage_option(env, "AWS_SESSION_TOKEN");
    if ((id == NULL) != (secret == NULL))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s is given without %s: give both (or neither, to use a profile)",
                              id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                              id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
    bool allow_http = false;
    int rc = mcdc_storage_option_bool(env, "AWS_ALLOW_HTTP", &allow_http, err);
    if (rc) return rc;
    const char *named = mcdc_storage_option(env, "AWS_PROFILE");
    const char *home = mcdc_storage_option(env, "HOME");
    char *cred_path = NULL, *conf_path = NULL;
    const char *cp = mcdc_storage_option(env, "AWS_SHARED_CREDENTIALS_FILE");
    const char *fp = mcdc_storage_option(env, "AWS_CONFIG_FILE");
    cred_path = cp ? mcdc_strdup(cp) : home ? mcdc_asprintf("%s/.aws/credentials", home) : NULL;
    conf_path = fp ? mcdc_strdup(fp) : home ? mcdc_asprintf("%s/.aws/config", home) : NULL;
    mcdc_aws_profile p = {0};
    const char *name = named ? named : "default";
    rc = read_profile(&p, name, cred_path, conf_path, err);
    if (rc == MCDC_OK && named && !p.found)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "AWS_PROFILE names the profile \"%s\", which neither %s nor %s has",
                            name, cred_path ? cred_path : "(no credentials file)",
                            conf_path ? conf_path : "(no config file)");
    if (rc == MCDC_OK && p.region) {
        *region_out = p.region;
        p.region = NULL;
    }
    const char *region = mcdc_storage_option(env, "AWS_REGION");
    if (region == NULL) region = mcdc_storage_option(env, "AWS_DEFAULT_REGION");
    if (region == NULL) region = *region_out;
    /* the order of AWS's own tools: keys, web identity, profile, container,
     * instance */
    bool used = false;
    if (rc == MCDC_OK && id) {
        rc = creds_new(out, id, secret, token, mcdc_strdup("AWS_ACCESS_KEY_ID"), err);
        used = true;
    }
    if (rc == MCDC_OK && !used) rc = try_web_identity(out, &used, env, region, allow_http, err);
    if (rc == MCDC_OK && !used && p.key_id && p.secret) {
        rc = creds_new(out, p.key_id, p.secret, p.token,
                       mcdc_asprintf("profile %s of %s", name,
                                     cred_path ? cred_path : conf_path ? conf_path : "?"),
                       err);
        used = true;
    }
    if (rc == MCDC_OK && !used && p.unsupported)
        rc = mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                            "the AWS profile \"%s\" uses %s, which this build cannot follow; "
                            "give AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
                            "AWS_SESSION_TOKEN) instead, e.g. from `aws configure "
                            "export-credentials`",
                            name, p.unsupported);
    if (rc == MCDC_OK && !used) rc = try_container(out, &used, env, err);
    bool imds = false;
    if (rc == MCDC_OK && !used) {
        rc = try_imds(out, &imds, env, err);
        used = imds;
    }
    if ((rc == MCDC_OK && !used) || (imds && rc)) {
        char why[600] = "instance metadata is off (AWS_EC2_METADATA_DISABLED)";
        if (imds)
            snprintf(why, sizeof why, "and the instance metadata service gave none: %.500s",
                     err ? err->message : "");
        rc = mcdc_error_set(
            err, MCDC_E_PERMISSION,
            "no AWS credentials: give AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
            "AWS_SESSION_TOKEN for temporary ones), AWS_WEB_IDENTITY_TOKEN_FILE with "
            "AWS_ROLE_ARN, or a profile with keys in the shared credentials file (AWS_PROFILE, "
            "AWS_SHARED_CREDENTIALS_FILE; looked for: %s); %s",
            cred_path ? cred_path : "none, HOME not given", why);
    }
    if (rc) {
        mcdc_free(*region_out);
        *region_out = NULL;
    }
    mcdc_aws_profile_free(&p);
    mcdc_free(cred_path);
    mcdc_free(conf_path);
    return rc;
}

static int renew_cb(void *c, mcdc_error *err) { return renew(c, err); }

int mcdc_aws_creds_sign(mcdc_aws_creds *c, mcdc_http_headers *hdrs, mcdc_http_method method,
                        const char *url, const char *payload_hash, const char *region,
                        mcdc_error *err) {
    pthread_mutex_lock(&c->mu);
    int64_t now = mcdc_now_utc_us() / 1000;
    char what[600];
    snprintf(what, sizeof what, "the AWS credentials from %s", c->source);
    int rc = mcdc_creds_renew_if_due(now, c->expires_ms, MCDC_AWS_CREDS_RENEW_AHEAD_MS,
                                     renew_cb, c, what, err);
    mcdc_sigv4_key k = {c->key_id, c->secret, c->token};
    if (rc == MCDC_OK)
        rc = mcdc_sigv4_sign(hdrs, method, url, payload_hash, &k, region, "s3", now, err);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void mcdc_aws_creds_key_id(mcdc_aws_creds *c, char *out, size_t room) {
    pthread_mutex_lock(&c->mu);
    snprintf(out, room, "%s", c->key_id);
    pthread_mutex_unlock(&c->mu);
}

const char *mcdc_aws_creds_source(const mcdc_aws_creds *c) { return c->source; }
