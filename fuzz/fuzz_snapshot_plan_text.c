/* fuzz_snapshot_plan_text.c - the text of a plan recorded before
 * (mcdc_snapshot_plan_text_parse, what mcdc_snapshot_plan_chunks checks
 * before it connects) over arbitrary bytes, cut at its first two NULs into
 * keys_json, chunks_json and max_json (absent: none): it never crashes or
 * leaks; a refusal is MCDC_E_INVALID with a message; a plan it accepts has
 * bounds every snapshot token takes, so each chunk encodes to a token that
 * decodes back to the same bounds. The same keys_json with the second part
 * as extent_json go through mcdc_snapshot_extent_text_parse (what
 * mcdc_snapshot_plan_from_extent checks): the same rules for a refusal; an
 * accepted keyset extent's MAX is a bound a token takes. Run by
 * scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_snapshot_token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 2);
    if (s == NULL) abort();
    memcpy(s, data, size);
    s[size] = s[size + 1] = 0;
    const char *keys_json = s, *chunks_json = s + strlen(s) + 1, *max_json = NULL;
    if ((size_t)(chunks_json - s) > size) chunks_json = "";
    else if ((size_t)(chunks_json - s) + strlen(chunks_json) < size)
        max_json = chunks_json + strlen(chunks_json) + 1;
    json_t *keys = NULL, *chunks = NULL, *max = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    json_t *extent = NULL;
    int erc0 = mcdc_snapshot_extent_text_parse(&keys, &extent, keys_json, chunks_json, &e);
    if (erc0 != MCDC_OK && (erc0 != MCDC_E_INVALID || e.message[0] == 0 || keys || extent))
        abort();
    if (erc0 == MCDC_OK) {
        const json_t *emax = json_object_get(extent, "max");
        if (!json_is_array(keys) || !json_is_object(extent) ||
            (emax && !mcdc_snapshot_bound_ok(emax, json_array_size(keys))))
            abort();
        json_decref(keys);
        json_decref(extent);
        keys = NULL;
    }
    e = (mcdc_error)MCDC_ERROR_INIT;
    int rc = mcdc_snapshot_plan_text_parse(&keys, &chunks, &max, keys_json, chunks_json, max_json,
                                           &e);
    if (rc != MCDC_OK) {
        if (rc != MCDC_E_INVALID || e.message[0] == 0 || keys || chunks || max) abort();
        free(s);
        return 0;
    }
    if ((max_json != NULL) != (max != NULL)) abort();
    size_t n = json_array_size(chunks);
    for (size_t i = 0; i < n && i < 64; i++) {
        mcdc_snapshot_token t = {.capture_instance = "dbo_t", .keys = keys,
                                 .lo = json_array_get(json_array_get(chunks, i), 0),
                                 .hi = json_array_get(json_array_get(chunks, i), 1),
                                 .index = (int32_t)i, .count = (int32_t)n,
                                 .schema_id = "0123456789abcdef"};
        char *text = NULL;
        int erc = mcdc_snapshot_token_encode(&text, &t, &e);
        if (erc == MCDC_E_LIMIT) continue; /* long key values: refused with a message */
        mcdc_snapshot_token back;
        if (erc != MCDC_OK || mcdc_snapshot_token_decode(&back, text, strlen(text), &e) != MCDC_OK ||
            !json_equal(back.lo, t.lo) || !json_equal(back.hi, t.hi) ||
            !json_equal(back.keys, keys))
            abort();
        mcdc_snapshot_token_clear(&back);
        mcdc_free(text);
    }
    json_decref(keys);
    json_decref(chunks);
    json_decref(max);
    free(s);
    return 0;
}
