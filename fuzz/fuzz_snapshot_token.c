/* fuzz_snapshot_token.c - the snapshot token parser (mcdc_snapshot_token_decode
 * and the public mcdc_snapshot_token_parse) over arbitrary bytes: it never
 * crashes or leaks; a refusal is MCDC_E_INVALID with a message; a token it
 * accepts encodes back to text that decodes to the same fields, and the
 * public parser agrees with the internal one. Run by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_snapshot_token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const mcdc_snapshot_token *a, const mcdc_snapshot_token *b) {
    return strcmp(a->capture_instance, b->capture_instance) == 0 && json_equal(a->keys, b->keys) &&
           json_equal(a->lo, b->lo) && json_equal(a->hi, b->hi) && a->index == b->index &&
           a->count == b->count && strcmp(a->schema_id, b->schema_id) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mcdc_snapshot_token t;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_snapshot_token_decode(&t, (const char *)data, size, &e);
    /* The public parser reads a C string: the same bytes up to a NUL. */
    char *s = malloc(size + 1);
    if (s == NULL) abort();
    memcpy(s, data, size);
    s[size] = 0;
    mcdc_snapshot_info info = MCDC_SNAPSHOT_INFO_INIT;
    mcdc_error pe = MCDC_ERROR_INIT;
    int prc = mcdc_snapshot_token_parse(&info, s, &pe);
    if (strlen(s) == size && (prc == MCDC_OK) != (rc == MCDC_OK)) abort();
    free(s);
    if (rc != MCDC_OK) {
        if (rc != MCDC_E_INVALID || e.code != rc || e.message[0] == 0) abort();
        return 0;
    }
    char *text = NULL;
    if (mcdc_snapshot_token_encode(&text, &t, &e) != MCDC_OK) abort();
    mcdc_snapshot_token back;
    if (mcdc_snapshot_token_decode(&back, text, strlen(text), &e) != MCDC_OK || !same(&t, &back))
        abort();
    mcdc_snapshot_token_clear(&back);
    mcdc_snapshot_token_clear(&t);
    mcdc_free(text);
    return 0;
}
