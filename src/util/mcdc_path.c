/* mcdc_path.c - canonical local paths, to tell whether two locations are one. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
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
