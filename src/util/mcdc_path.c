/* mcdc_path.c - canonical local paths, to tell whether two locations are one. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "mcdc_util.h"

/* Lexical normalisation of an absolute path in place: "//" and "/./"
 * collapse, "/x/.." goes, a trailing '/' goes. */
static void normalise(char *p) {
    char *out = p;
    const char *in = p;
    while (*in) {
        while (*in == '/') in++;
        if (*in == 0) break;
        const char *seg = in;
        while (*in && *in != '/') in++;
        size_t n = (size_t)(in - seg);
        if (n == 1 && seg[0] == '.') continue;
        if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            while (out > p && *--out != '/') {
            }
            continue;
        }
        *out++ = '/';
        memmove(out, seg, n);
        out += n;
    }
    if (out == p) *out++ = '/';
    *out = 0;
}

int mcdc_path_canonical(char **out, const char *path, mcdc_error *err) {
    *out = NULL;
    if (path == NULL || *path == 0) return mcdc_error_set(err, MCDC_E_INVALID, "an empty path");
    size_t n = strlen(path);
    char cwd[PATH_MAX] = "";
    if (path[0] != '/' && getcwd(cwd, sizeof cwd) == NULL)
        return mcdc_error_set(err, MCDC_E_IO, "cannot read the current directory: %s",
                              strerror(errno));
    char *p = mcdc_malloc(strlen(cwd) + n + 2);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    strcpy(p, cwd);
    strcat(p, "/");
    strcat(p, path);
    normalise(p);
    /* Symbolic links: the longest prefix that exists is resolved, the rest
     * (not created yet) appended as it is. */
    size_t len = strlen(p);
    for (size_t cut = len; cut > 0; cut--) {
        if (cut != len && p[cut] != '/') continue;
        char saved = p[cut];
        p[cut] = 0;
        char real[PATH_MAX];
        bool ok = realpath(cut ? p : "/", real) != NULL;
        p[cut] = saved;
        if (!ok) continue;
        char *joined = mcdc_asprintf("%s%s", strcmp(real, "/") == 0 && saved ? "" : real,
                                     p + cut);
        mcdc_free(p);
        if (joined == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        normalise(joined);
        *out = joined;
        return MCDC_OK;
    }
    *out = p;
    return MCDC_OK;
}

bool mcdc_path_within(const char *outer, const char *inner) {
    size_t n = strlen(outer);
    if (strncmp(outer, inner, n) != 0) return false;
    return inner[n] == 0 || inner[n] == '/' || (n == 1 && outer[0] == '/');
}

/* The length of location's "<scheme>:" when it has a "<scheme>://" (RFC
 * 3986: a letter, then letters, digits, '+', '-', '.'), else 0. */
static size_t scheme_len(const char *location) {
    const char *p = location;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) return 0;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '+' || *p == '-' || *p == '.')
        p++;
    return strncmp(p, "://", 3) == 0 ? (size_t)(p - location) + 1 : 0;
}

bool mcdc_location_is_local(const char *location) {
    return strncasecmp(location, "file:", 5) == 0 || scheme_len(location) == 0;
}

/* file:/x, file:///x and file://localhost/x are /x; file:x is x (the local
 * backend's reading); a remote host stays as given (it opens nowhere). */
static const char *file_uri_path(const char *location) {
    const char *rest = location + 5;
    if (strncmp(rest, "//", 2) != 0) return rest;
    rest += 2;
    if (strncasecmp(rest, "localhost/", 10) == 0) return rest + 9;
    return rest[0] == '/' ? rest : location;
}

/* Scheme aliases that name one store. */
static const char *const SCHEME_FOLD[][2] = {
    {"s3a:", "s3:"}, {"s3n:", "s3:"}, {"abfs:", "abfss:"}, {"wasb:", "wasbs:"}};

int mcdc_location_place(char **out, const char *location, mcdc_error *err) {
    *out = NULL;
    if (location == NULL || *location == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "an empty location");
    if (strncasecmp(location, "file:", 5) == 0) {
        const char *path = file_uri_path(location);
        if (path != location) return mcdc_path_canonical(out, path, err);
    } else if (scheme_len(location) == 0) {
        return mcdc_path_canonical(out, location, err);
    }
    size_t sl = scheme_len(location);
    char *p = mcdc_malloc(strlen(location) + 8);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    bool store = false; /* an object store: its bucket is compared in lower case */
    size_t at = 0;
    for (size_t i = 0; i < sl; i++) p[at++] = (char)tolower((unsigned char)location[i]);
    p[at] = 0;
    for (size_t i = 0; i < sizeof SCHEME_FOLD / sizeof SCHEME_FOLD[0]; i++)
        if (strcmp(p, SCHEME_FOLD[i][0]) == 0) {
            strcpy(p, SCHEME_FOLD[i][1]);
            at = strlen(p);
        }
    store = strcmp(p, "s3:") == 0 || strcmp(p, "gs:") == 0 || strcmp(p, "abfss:") == 0 ||
            strcmp(p, "wasbs:") == 0 || strcmp(p, "az:") == 0;
    const char *in = location + sl + 2; /* after "//" */
    memcpy(p + at, "//", 2);
    at += 2;
    for (; *in && *in != '/'; in++) p[at++] = store ? (char)tolower((unsigned char)*in) : *in;
    for (; *in; in++)
        if (!(*in == '/' && (in[1] == '/' || in[1] == 0))) p[at++] = *in;
    p[at] = 0;
    *out = p;
    return MCDC_OK;
}
