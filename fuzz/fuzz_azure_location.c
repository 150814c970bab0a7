/* fuzz_azure_location.c - an Azure location and its options (the first line
 * of the input is the location, the second a connection string, the third
 * an account key, the rest a SAS token) as mcdc_az_config_load reads them:
 * never a crash or a leak, and never a secret in the error: an account key
 * or SAS signature of SECRETXX is not quoted back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_azure_auth.h"
#include "mcdc_storage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    const char *connstr, *key, *sas;
} opts;

static const char *option(void *octx, const char *name) {
    const opts *o = octx;
    if (strcmp(name, "AZURE_STORAGE_CONNECTION_STRING") == 0) return o->connstr;
    if (strcmp(name, "AZURE_STORAGE_ACCOUNT_KEY") == 0) return o->key;
    if (strcmp(name, "AZURE_STORAGE_SAS_TOKEN") == 0) return o->sas;
    return NULL;
}

/* The next line of [*p, end) as a new string ("" when none); NULL: none left. */
static char *line(const char **p, const char *end) {
    if (*p >= end) return NULL;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    const char *stop = nl ? nl : end;
    size_t n = (size_t)(stop - *p);
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, *p, n);
        s[n] = 0;
    }
    *p = nl ? nl + 1 : end;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int quiet;
    if (!quiet) {
        static const mcdc_log_sink sink = {NULL, NULL, MCDC_LOG_ERROR};
        mcdc_log_use(&sink);
        quiet = 1;
    }
    if (size > 8192) return 0;
    const char *p = (const char *)data, *end = p + size;
    char *location = line(&p, end), *connstr = line(&p, end), *key = line(&p, end);
    char *sas = p < end ? line(&p, end) : NULL;
    if (location && location[0] == 0) { /* empty: a fixed one */
        free(location);
        location = strdup("az://lake/t");
    }
    if (location) {
        opts o = {connstr && *connstr ? connstr : NULL, key && *key ? key : NULL,
                  sas && *sas ? sas : NULL};
        mcdc_storage_env env = {.option = option, .octx = &o};
        mcdc_az_config c;
        mcdc_error e = MCDC_ERROR_INIT;
        if (mcdc_az_config_load(&c, &env, location, &e) != MCDC_OK &&
            strstr(e.message, "SECRETXX") != NULL) {
            /* the secret may be in the message only when the user put it where
             * no secret goes (the location itself) */
            if (strstr(location, "SECRETXX") == NULL) abort();
        }
        mcdc_az_config_free(&c);
    }
    free(location);
    free(connstr);
    free(key);
    free(sas);
    return 0;
}
