/* fuzz_aws_creds.c - the parsers of AWS credentials: a shared credentials
 * or config file's profile (INI), the JSON of the container endpoint and of
 * instance metadata, and STS's AssumeRoleWithWebIdentity answer (XML). The
 * first byte picks the parser; none crashes or leaks, a value never spans
 * a line, keys given are complete (id and secret), and no error message
 * quotes the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_aws_creds.h"
#include "fuzz_quiet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The message must be the parser's own words: "what" and fixed text. */
static void check_message(const mcdc_error *e, const char *input) {
    const char *m = e->message;
    if (strlen(input) >= 12 && strstr(m, input) != NULL) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 64 * 1024) return 0;
    char *s = malloc(size);
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    mcdc_error e = MCDC_ERROR_INIT;
    switch (data[0] % 3) {
    case 0: {
        static const char *const sections[] = {"default", "dev", "profile dev"};
        mcdc_aws_profile p = {0};
        for (size_t i = 0; i < 3; i++)
            if (mcdc_aws_profile_read(&p, s, sections[i], &e) != MCDC_OK) abort();
        const char *v[] = {p.key_id, p.secret, p.token, p.region};
        for (size_t i = 0; i < 4; i++)
            if (v[i] && strchr(v[i], '\n')) abort();
        mcdc_aws_profile_free(&p);
        break;
    }
    case 1:
    case 2: {
        mcdc_aws_temp_keys k = {0};
        int rc = data[0] % 3 == 1 ? mcdc_aws_creds_json_parse(&k, s, size - 1, "the endpoint", &e)
                                  : mcdc_aws_sts_parse(&k, s, size - 1, "STS", &e);
        if (rc == MCDC_OK) {
            if (!k.key_id || !k.key_id[0] || !k.secret || !k.secret[0]) abort();
        } else {
            check_message(&e, s);
        }
        mcdc_aws_temp_keys_free(&k);
        break;
    }
    }
    free(s);
    return 0;
}
