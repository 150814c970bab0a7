/* fuzz_entra_token.c - Entra ID's and the managed identity endpoints'
 * answers: a token answer parses to a token a header can carry and an
 * expiry, or to an error that never quotes the answer; an error answer's
 * summary is one line of printable text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_azure_entra.h"
#include "fuzz_quiet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 64 * 1024) return 0;
    const char *body = (const char *)data;
    mcdc_error e = MCDC_ERROR_INIT;
    char *tok = NULL;
    int64_t exp = 0;
    int rc = mcdc_az_token_parse(&tok, &exp, body, size, 1700000000000LL, "the endpoint", &e);
    if (rc == MCDC_OK) {
        if (tok == NULL || tok[0] == 0 || exp <= 0) abort();
        for (const char *p = tok; *p; p++)
            if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) abort();
        if (strlen(tok) >= 8 && strstr(e.message, tok)) abort();
    } else if (tok != NULL) {
        abort();
    }
    mcdc_free(tok);
    char why[400];
    mcdc_az_token_error(why, sizeof why, body, size);
    for (const char *p = why; *p; p++)
        if ((unsigned char)*p < ' ') abort();
    return 0;
}
