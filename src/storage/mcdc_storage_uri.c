/*
 * mcdc_storage_uri.c - a storage from a location, by scheme.
 *
 * The scheme table below is the only place that knows URI schemes: an
 * object store backend lands as one file (mcdc_storage_s3.c, ...) and one
 * row here. Until then its row has no opener, and a location on it is
 * refused as a usage error (MCDC_E_INVALID) when a table name is resolved,
 * before a command writes anything (mcdc_storage_check_location).
 */
#include <string.h>
#include <strings.h>

#include "mcdc_http.h"
#include "mcdc_limits.h"
#include "mcdc_storage.h"
#include "mcdc_storage_azure.h"
#include "mcdc_storage_s3.h"

typedef int (*scheme_open_fn)(mcdc_storage **out, const mcdc_storage_env *env,
                              const char *location, const char *rest, mcdc_error *err);

static int open_file(mcdc_storage **out, const mcdc_storage_env *env, const char *location,
                     const char *rest, mcdc_error *err);
static int open_mem(mcdc_storage **out, const mcdc_storage_env *env, const char *location,
                    const char *rest, mcdc_error *err);

static const struct scheme {
    const char *prefix; /* matched case-insensitively, as RFC 3986 schemes are */
    scheme_open_fn open; /* NULL: the backend is not built yet */
    const char *what;
    const char *family; /* mcdc_storage_family */
} k_schemes[] = {
    {"file:", open_file, "the local filesystem", "file"},
    {"mem://", open_mem, "an in-memory store", "mem"},
    {"s3://", mcdc_storage_s3_open, "Amazon S3", "s3"},
    {"s3a://", mcdc_storage_s3_open, "Amazon S3", "s3"},
    {"abfss://", mcdc_storage_azure_open, "Azure Data Lake Storage", "azure"},
    {"abfs://", mcdc_storage_azure_open, "Azure Data Lake Storage", "azure"},
    {"az://", mcdc_storage_azure_open, "Azure Blob Storage", "azure"},
    {"wasbs://", mcdc_storage_azure_open, "Azure Blob Storage", "azure"},
    {"wasb://", mcdc_storage_azure_open, "Azure Blob Storage", "azure"},
    {"gs://", NULL, "Google Cloud Storage", "gs"},
};

const char *mcdc_storage_family(const char *scheme) {
    if (scheme == NULL) return NULL;
    size_t n = strlen(scheme);
    for (size_t i = 0; i < sizeof k_schemes / sizeof k_schemes[0]; i++) {
        const struct scheme *s = &k_schemes[i];
        size_t len = strcspn(s->prefix, ":");
        if ((n == len && strncasecmp(scheme, s->prefix, n) == 0) || strcasecmp(scheme, s->family) == 0)
            return s->family;
    }
    return NULL;
}

/* An open's options from the set its env gives for the location's family
 * (mcdc_storage_env.family_set): the set is taken once, at the open. */
typedef struct {
    const mcdc_storage_env *env;
    const void *set;
} family_options;

static const char *family_option(void *octx, const char *name) {
    const family_options *f = octx;
    return f->set ? f->env->set_option(f->set, name) : NULL;
}

/* file:/x, file:///x and file://localhost/x are /x; file:x is the relative x. */
static int open_file(mcdc_storage **out, const mcdc_storage_env *env, const char *location,
                     const char *rest, mcdc_error *err) {
    (void)env;
    if (strncmp(rest, "//", 2) == 0) {
        rest += 2;
        if (strncasecmp(rest, "localhost/", 10) == 0) rest += 9;
        else if (rest[0] != '/')
            return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                  "location \"%s\" names a remote host; only local file: "
                                  "URIs (file:///path) are supported",
                                  location);
    }
    if (rest[0] == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "location \"%s\" has no path", location);
    return mcdc_storage_local_create(out, rest, err);
}

/* mem://<name>[/<prefix>]: the store comes from the caller's env. */
static int open_mem(mcdc_storage **out, const mcdc_storage_env *env, const char *location,
                    const char *rest, mcdc_error *err) {
    const char *slash = strchr(rest, '/');
    size_t name_len = slash ? (size_t)(slash - rest) : strlen(rest);
    if (name_len == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "location \"%s\": a memory location is mem://<store>/<path>",
                              location);
    mcdc_storage_mem *m = env && env->mem_store ? env->mem_store(env->ctx, rest, name_len) : NULL;
    if (m == NULL)
        return mcdc_error_set(err, MCDC_E_NOTFOUND,
                              "location \"%s\": no memory store named \"%.*s\" was handed to "
                              "this opener (memory stores exist only in the process that "
                              "created them, for tests)",
                              location, (int)name_len, rest);
    return mcdc_storage_mem_open(out, m, slash ? slash + 1 : "", err);
}

/* Whether location starts with "<scheme>://" (RFC 3986: a letter, then
 * letters, digits, '+', '-', '.'). */
static bool has_scheme(const char *location) {
    const char *p = location;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) return false;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '+' || *p == '-' || *p == '.')
        p++;
    return strncmp(p, "://", 3) == 0;
}

/* The row of location's scheme (*row NULL: a plain path). A location on an
 * object store that is not built, or with a scheme no row knows, is
 * MCDC_E_INVALID: what the user gave cannot be used as it is. */
static int scheme_of(const struct scheme **row, const char *location, mcdc_error *err) {
    *row = NULL;
    if (location == NULL || location[0] == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "a storage location (path or URI) is empty");
    for (size_t i = 0; i < sizeof k_schemes / sizeof k_schemes[0]; i++) {
        const struct scheme *s = &k_schemes[i];
        if (strncasecmp(location, s->prefix, strlen(s->prefix)) != 0) continue;
        if (s->open == NULL)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "location \"%s\" is on %s: object stores are not built yet "
                                  "for it (S3 and Azure Blob are); use a local path, a file: "
                                  "URI, s3:// or an Azure location",
                                  location, s->what);
        *row = s;
        return MCDC_OK;
    }
    if (has_scheme(location))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "location \"%s\": unknown scheme; use a local path, a file: URI "
                              "or mem://",
                              location);
    return MCDC_OK;
}

int mcdc_storage_check_location(const char *location, mcdc_error *err) {
    const struct scheme *s;
    return scheme_of(&s, location, err);
}

int mcdc_storage_open_env(mcdc_storage **out, const mcdc_storage_env *env,
                          const char *location, mcdc_error *err) {
    MCDC_ASSERT(out != NULL);
    *out = NULL;
    const struct scheme *s;
    int rc = scheme_of(&s, location, err);
    if (rc) return rc;
    /* a job without options of its own: its runtime's for this family */
    mcdc_storage_env scoped;
    family_options fam;
    if (env && env->option == NULL && env->family_set) {
        fam = (family_options){env, env->family_set(env->fctx, s ? s->family : "file")};
        scoped = *env;
        scoped.option = family_option;
        scoped.octx = &fam;
        scoped.share = fam.set && env->set_share ? env->set_share(fam.set) : NULL;
        env = &scoped;
    }
    if (s == NULL) return mcdc_storage_local_create(out, location, err);
    rc = s->open(out, env, location, location + strlen(s->prefix), err);
    /* the life of the store's leases (the checkpoint's hold), when it has any */
    if (rc == MCDC_OK && (*out)->ops->lease) {
        int64_t ttl = MCDC_LEASE_TTL_MS_DEFAULT;
        rc = mcdc_storage_option_ms(env, "MCDC_LEASE_TTL_MS", MCDC_LEASE_TTL_MS_MAX, &ttl, err);
        if (rc == MCDC_OK && ttl < 1000)
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "storage option MCDC_LEASE_TTL_MS is %lld; give at least 1000 "
                                "(a lease is renewed every third of it)",
                                (long long)ttl);
        if (rc) {
            mcdc_storage_free(*out);
            *out = NULL;
        } else {
            (*out)->lease_ttl_ms = ttl;
        }
    }
    return rc;
}

int mcdc_storage_open(mcdc_storage **out, const char *location, mcdc_error *err) {
    return mcdc_storage_open_env(out, NULL, location, err);
}
