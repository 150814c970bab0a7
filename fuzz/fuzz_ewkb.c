/* fuzz_ewkb.c - the spatial rewrite (mcdc_ewkb_from_srid_wkb) over arbitrary
 * bytes: it never reads or writes outside them; a refusal says why; a value
 * it accepts keeps its length and body, has the SRID flag in its first type
 * code and the input's SRID after it in its byte order. Run by
 * scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_ewkb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an allocation of exactly size bytes: ASan sees any overrun */
    uint8_t *p = malloc(size ? size : 1);
    if (p == NULL) return 0;
    if (size) memcpy(p, data, size);
    char why[MCDC_EWKB_WHY_BYTES];
    int rc = mcdc_ewkb_from_srid_wkb(p, size, why);
    if (rc != 0) {
        if (rc != -1 || why[0] == 0 || strlen(why) >= MCDC_EWKB_WHY_BYTES) abort();
        free(p);
        return 0;
    }
    if (why[0] != 0 || size < 9) abort();
    bool le = p[0] == 1;
    if (p[0] != data[4] || (p[0] != 0 && p[0] != 1)) abort();
    /* the type's SRID flag, the SRID in the value's byte order */
    uint8_t flag_byte = le ? p[4] : p[1];
    if (!(flag_byte & 0x20)) abort();
    for (int i = 0; i < 4; i++)
        if (p[5 + (le ? 3 - i : i)] != data[i]) abort();
    if (memcmp(p + 9, data + 9, size - 9) != 0) abort();
    free(p);
    return 0;
}
