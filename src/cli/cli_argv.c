/*
 * The command line's secrets out of /proc/PID/cmdline.
 *
 * Any user of the machine can read a process's arguments (ps, /proc). The
 * commands read their own copy of argv; the strings the kernel shows are
 * overwritten with 'x' where they hold a connection string (its password)
 * or the value of a secret storage option. Before main runs the arguments
 * are visible, so the options file (mode 0600) stays the better place.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

static void hide(char *s) {
    memset(s, 'x', strlen(s));
}

/* The part of "NAME=VALUE" after '=', when NAME is one whose value is a
 * secret (connectionString for -o, a secret storage option); NULL else. */
static char *secret_value(char *pair, bool storage) {
    char *eq = strchr(pair, '=');
    if (eq == NULL) return storage ? pair : NULL; /* a secret pasted without its name */
    size_t n = (size_t)(eq - pair);
    char name[64];
    if (n == 0 || n >= sizeof name) return NULL;
    memcpy(name, pair, n);
    name[n] = '\0';
    bool secret = storage ? mcdc_opts_storage_secret(name) : strcasecmp(name, "connectionString") == 0;
    return secret ? eq + 1 : NULL;
}

char **cli_argv_private(int argc, char **argv) {
    char **copy = calloc((size_t)argc + 1, sizeof *copy);
    if (copy == NULL) return NULL;
    for (int i = 0; i < argc; i++) {
        if ((copy[i] = strdup(argv[i])) == NULL) {
            cli_argv_free(copy);
            return NULL;
        }
    }
    for (int i = 1; i + 1 < argc; i++) {
        const char *a = argv[i];
        char *v = argv[i + 1];
        if (strcasecmp(a, "--connectionString") == 0) {
            hide(v);
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--option") == 0 ||
                   strcmp(a, "--storage-option") == 0) {
            char *s = secret_value(v, strcmp(a, "--storage-option") == 0);
            if (s) hide(s);
        } else {
            continue;
        }
        i++;
    }
    return copy;
}

void cli_argv_free(char **argv) {
    if (argv == NULL) return;
    for (char **p = argv; *p; p++) free(*p);
    free(argv);
}
