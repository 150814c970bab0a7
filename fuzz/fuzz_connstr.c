/* fuzz_connstr.c - the connection-string parser never crashes, never leaks,
 * never puts the password into an error message, and its redacted rendering
 * parses back to the same fields. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_connstr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int quiet;
    if (!quiet) {
        { static const mcdc_log_sink quiet = {NULL, NULL, MCDC_LOG_ERROR}; mcdc_log_use(&quiet); }
        quiet = 1;
    }
    if (size > MCDC_CONNSTR_BYTES_MAX + 8) return 0;
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    mcdc_connstr *c = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_connstr_parse(&c, s, &e);
    if (rc == MCDC_OK) {
        char *r = mcdc_connstr_redacted(c);
        if (r) {
            /* The rendering must not depend on the password's value. */
            if (c->password) {
                char *saved = c->password;
                char other[] = "other";
                c->password = other;
                char *r2 = mcdc_connstr_redacted(c);
                c->password = saved;
                if (r2 && strcmp(r, r2) != 0) abort();
                mcdc_free(r2);
            }
            mcdc_connstr *d = NULL;
            if (mcdc_connstr_parse(&d, r, NULL) == MCDC_OK) {
                if ((c->database == NULL) != (d->database == NULL)) abort();
                if (c->database && strcmp(c->database, d->database) != 0) abort();
                if (strcmp(c->host, d->host) != 0 || c->port != d->port) abort();
                if ((c->password == NULL) != (d->password == NULL)) abort();
                mcdc_connstr_free(d);
            }
            mcdc_free(r);
        }
        mcdc_connstr_free(c);
    } else {
        /* A password made of a distinctive run must not show in the message.
         * Look for the value after the last "PWD=" the input holds. */
        const char *p = strstr(s, "PWD=SECRETXX");
        const char *first = strstr(s, "SECRETXX");
        if (p && first == p + 4 && strstr(first + 1, "SECRETXX") == NULL &&
            strstr(e.message, "SECRETXX"))
            abort();
    }
    free(s);
    return 0;
}
