/*
 * mcdc_aws_creds.c - AWS credentials from the storage options and the
 * shared profile files (see mcdc_aws_creds.h).
 */
#include "mcdc_aws_creds.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mcdc_sigv4.h"

struct mcdc_aws_creds {
    pthread_mutex_t mu; /* the key: a refresh may replace it while others sign */
    char *key_id, *secret, *token; /* owned; token may be NULL */
    char *source;                  /* owned: for messages */
};

static void wipe_free(char *s) {
    if (s == NULL) return;
    memset(s, 0, strlen(s));
    mcdc_free(s);
}

void mcdc_aws_creds_free(mcdc_aws_creds *c) {
    if (c == NULL) return;
    mcdc_free(c->key_id);
    wipe_free(c->secret);
    wipe_free(c->token);
    mcdc_free(c->source);
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

typedef struct profile {
    char *key_id, *secret, *token, *region; /* owned, NULL when absent */
    const char *unsupported;                /* a setting we cannot follow, or NULL */
    bool found;
} profile;

static void profile_free(profile *p) {
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

/* Takes the settings of section `section` (as written between the
 * brackets) of an INI text into p; settings already set are kept. */
static int read_section(profile *p, const char *text, const char *section, mcdc_error *err) {
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
static int read_profile(profile *p, const char *name, const char *cred_path, const char *conf_path,
                        mcdc_error *err) {
    mcdc_buf text = {0};
    int rc = MCDC_OK;
    if (cred_path) {
        rc = read_file(&text, cred_path, err);
        if (rc == MCDC_OK) rc = read_section(p, (const char *)text.data, name, err);
        if (rc == MCDC_E_NOTFOUND) rc = MCDC_OK;
        mcdc_buf_free(&text);
    }
    if (rc == MCDC_OK && conf_path) {
        char *section = strcmp(name, "default") == 0 ? mcdc_strdup(name)
                                                     : mcdc_asprintf("profile %s", name);
        rc = section ? read_file(&text, conf_path, err)
                     : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (rc == MCDC_OK) rc = read_section(p, (const char *)text.data, section, err);
        if (rc == MCDC_E_NOTFOUND) rc = MCDC_OK;
        mcdc_free(section);
        mcdc_buf_free(&text);
    }
    return rc;
}

/* ---- the chain ----------------------------------------------------------------------------- */

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
    const char *named = mcdc_storage_option(env, "AWS_PROFILE");
    const char *home = mcdc_storage_option(env, "HOME");
    char *cred_path = NULL, *conf_path = NULL;
    const char *cp = mcdc_storage_option(env, "AWS_SHARED_CREDENTIALS_FILE");
    const char *fp = mcdc_storage_option(env, "AWS_CONFIG_FILE");
    cred_path = cp ? mcdc_strdup(cp) : home ? mcdc_asprintf("%s/.aws/credentials", home) : NULL;
    conf_path = fp ? mcdc_strdup(fp) : home ? mcdc_asprintf("%s/.aws/config", home) : NULL;
    profile p = {0};
    const char *name = named ? named : "default";
    int rc = read_profile(&p, name, cred_path, conf_path, err);
    if (rc == MCDC_OK && named && !p.found)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "AWS_PROFILE names the profile \"%s\", which neither %s nor %s has",
                            name, cred_path ? cred_path : "(no credentials file)",
                            conf_path ? conf_path : "(no config file)");
    if (rc == MCDC_OK && p.region) {
        *region_out = p.region;
        p.region = NULL;
    }
    if (rc == MCDC_OK && id) {
        rc = creds_new(out, id, secret, token, mcdc_strdup("AWS_ACCESS_KEY_ID"), err);
    } else if (rc == MCDC_OK && p.key_id && p.secret) {
        rc = creds_new(out, p.key_id, p.secret, p.token,
                       mcdc_asprintf("profile %s of %s", name,
                                     cred_path ? cred_path : conf_path ? conf_path : "?"),
                       err);
    } else if (rc == MCDC_OK && p.unsupported) {
        rc = mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                            "the AWS profile \"%s\" uses %s, which this build cannot follow; "
                            "give AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
                            "AWS_SESSION_TOKEN) instead, e.g. from `aws configure "
                            "export-credentials`",
                            name, p.unsupported);
    } else if (rc == MCDC_OK) {
        rc = mcdc_error_set(
            err, MCDC_E_PERMISSION,
            "no AWS credentials: give AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
            "AWS_SESSION_TOKEN for temporary ones), or a profile with keys in the shared "
            "credentials file (AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE; looked for: %s); "
            "web identity and instance metadata are not supported by this build",
            cred_path ? cred_path : "none, HOME not given");
    }
    if (rc) {
        mcdc_free(*region_out);
        *region_out = NULL;
    }
    profile_free(&p);
    mcdc_free(cred_path);
    mcdc_free(conf_path);
    return rc;
}

int mcdc_aws_creds_sign(mcdc_aws_creds *c, mcdc_http_headers *hdrs, mcdc_http_method method,
                        const char *url, const char *payload_hash, const char *region,
                        mcdc_error *err) {
    pthread_mutex_lock(&c->mu);
    mcdc_sigv4_key k = {c->key_id, c->secret, c->token};
    int rc = mcdc_sigv4_sign(hdrs, method, url, payload_hash, &k, region, "s3",
                             mcdc_now_utc_us() / 1000, err);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void mcdc_aws_creds_key_id(mcdc_aws_creds *c, char *out, size_t room) {
    pthread_mutex_lock(&c->mu);
    snprintf(out, room, "%s", c->key_id);
    pthread_mutex_unlock(&c->mu);
}

const char *mcdc_aws_creds_source(const mcdc_aws_creds *c) { return c->source; }
