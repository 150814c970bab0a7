/* fuzz_delta_dv.c - the deletion vector readers over arbitrary bytes: the
 * first byte picks the entry point (DV file at an offset, bare bitmap,
 * inline descriptor text); what parses is re-serialized and parsed again
 * and must give the same rows.
 *
 * Build and run: scripts/fuzz.sh (target delta_dv). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcdc_delta_dv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const mcdc_dv_bitmap *b) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_buf out = {0};
    MCDC_ASSERT(mcdc_dv_bitmap_serialize(&out, b, &e) == MCDC_OK);
    mcdc_dv_bitmap *again = NULL;
    MCDC_ASSERT(mcdc_dv_bitmap_parse(&again, out.data, out.len, "again", &e) == MCDC_OK);
    MCDC_ASSERT(mcdc_dv_bitmap_cardinality(again) == mcdc_dv_bitmap_cardinality(b));
    MCDC_ASSERT(mcdc_dv_bitmap_max(again) == mcdc_dv_bitmap_max(b));
    int32_t keep[64], n = 0;
    mcdc_dv_bitmap_keep(b, 0, 64, keep, &n);
    MCDC_ASSERT(n == 64 - (int32_t)mcdc_dv_bitmap_range_count(b, 0, 64));
    mcdc_dv_bitmap_free(again);
    mcdc_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_dv_bitmap *b = NULL;
    int rc;
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    switch (data[0] % 3) {
    case 0: /* a DV file, the DV at offset data[1], its size from the file */
        rc = mcdc_dv_file_parse(&b, p, n, data[1],
                                n > (size_t)data[1] + 4
                                    ? (int32_t)(((uint32_t)p[data[1]] << 24 | (uint32_t)p[data[1] + 1] << 16 |
                                                 (uint32_t)p[data[1] + 2] << 8 | p[data[1] + 3]) & 0x7fffffff)
                                    : 0,
                                "fuzz.bin", &e);
        break;
    case 1:
        rc = mcdc_dv_bitmap_parse(&b, p, n, "fuzz.bin", &e);
        break;
    default: { /* inline: the text, sizeInBytes from its length less data[1] % 4 */
        char *text = mcdc_strndup((const char *)p, n);
        if (text == NULL) return 0;
        mcdc_delta_dv dv = {'i', text, -1, (int32_t)(strlen(text) / 5 * 4) - data[1] % 4, 1, -1};
        char *uid = NULL;
        rc = mcdc_dv_check_descriptor(&uid, &dv, "fuzz", &e);
        mcdc_free(uid);
        if (rc == MCDC_OK) rc = mcdc_dv_inline_parse(&b, &dv, "fuzz", &e);
        mcdc_free(text);
    }
    }
    if (rc != MCDC_OK) {
        MCDC_ASSERT(b == NULL && e.code == rc && e.message[0] != 0);
        return 0;
    }
    round_trip(b);
    mcdc_dv_bitmap_free(b);
    return 0;
}
