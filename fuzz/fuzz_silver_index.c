/* fuzz_silver_index.c - silver's key index decoder (silver_index_decode)
 * over arbitrary bytes: it never crashes or leaks; a refusal is
 * MCDC_E_CORRUPT (or MCDC_E_NOMEM) with a message; an index it accepts
 * encodes back to the same bytes, and every entry is found by its path.
 * Inputs whose first byte is odd get their trailing CRC-32 fixed first, so
 * that the fuzzer reaches past the checksum. Run by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "mcdc_silver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool fix = data[0] & 1;
    data++;
    size--;
    uint8_t *p = malloc(size ? size : 1);
    if (p == NULL) return 0;
    memcpy(p, data, size);
    if (fix && size >= 4) {
        uint32_t crc = (uint32_t)crc32(0L, p, (uInt)(size - 4));
        for (int i = 0; i < 4; i++) p[size - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
    }
    silver_index ix;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = silver_index_decode(&ix, p, size, &e);
    if (rc != MCDC_OK) {
        if ((rc != MCDC_E_CORRUPT && rc != MCDC_E_NOMEM) || e.code != rc || e.message[0] == 0) abort();
        free(p);
        return 0;
    }
    mcdc_buf b = {0};
    if (silver_index_encode(&b, &ix, &e) != MCDC_OK) abort();
    if (b.len != size || memcmp(b.data, p, size) != 0) abort();
    for (int64_t i = 0; i < ix.n; i++)
        if (silver_index_find(&ix, ix.entries[i].path) != &ix.entries[i]) abort();
    mcdc_buf_free(&b);
    silver_index_clear(&ix);
    free(p);
    return 0;
}
