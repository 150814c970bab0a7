/*
 * fuzz_tds_client.c - the native TDS client's reply decoding (token parser,
 * COLMETADATA, every value decoder, drain and cancel paths) fed from memory.
 *
 * Input: one control byte, then the reply bytes.
 *   control bit 0: the rest is token payload, cut into reply packets of
 *                  (second byte + 9) bytes (so mutations hit tokens, not
 *                  headers); else the rest is raw packets as recorded
 *   bits 1-2:      rows per fetch: 1, 7, 64, 100000
 *   bit 3:         read every column as utf8 (the text casts)
 *   bit 4:         free the result after the first fetch (ATTENTION path)
 * Up to 4 requests run in sequence over the stream (a recording holds the
 * session set-up reply before the query's). Every batch a fetch accepts must
 * validate.
 *
 * Build (from the repository root; scripts/fuzz.sh does this):
 *   clang -std=c17 -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *     -Iinclude -Isrc/util -Isrc/lsn -Isrc/options -Isrc/batch -Isrc/tds \
 *     fuzz/fuzz_tds_client.c src/tds/mcdc_tds_*.c src/tds/mcdc_driver_native.c \
 *     src/tds/mcdc_driver.c src/batch/mcdc_batch.c src/util/mcdc_util.c \
 *     src/lsn/mcdc_lsn.c src/options/mcdc_connstr.c -lm -pthread -o build-fuzz/fuzz_tds_client
 *   build-fuzz/fuzz_tds_client fuzz/corpus/tds_client
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_driver.h"
#include "mcdc_tds_proto.h"

static uint8_t *wrap(const uint8_t *p, size_t n, size_t psize, size_t *out_n) {
    size_t room = psize - 8, npk = n / room + 1;
    uint8_t *o = malloc(n + npk * 8 + 8);
    if (o == NULL) return NULL;
    size_t k = 0, off = 0;
    do {
        size_t m = n - off < room ? n - off : room;
        bool last = off + m == n;
        o[k] = 0x04; o[k + 1] = last ? 1 : 0;
        o[k + 2] = (uint8_t)((m + 8) >> 8); o[k + 3] = (uint8_t)(m + 8);
        o[k + 4] = o[k + 5] = 0; o[k + 6] = 1; o[k + 7] = 0;
        memcpy(o + k + 8, p + off, m);
        k += m + 8;
        off += m;
    } while (off < n);
    *out_n = k;
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    { static const mcdc_log_sink quiet = {NULL, NULL, MCDC_LOG_ERROR}; mcdc_log_use(&quiet); }
    uint8_t ctl = data[0];
    static const int64_t PER[4] = {1, 7, 64, 100000};
    int64_t per = PER[(ctl >> 1) & 3];
    bool as_text = (ctl & 8) != 0, early_free = (ctl & 16) != 0;
    uint8_t *owned = NULL;
    const uint8_t *stream = data + 1;
    size_t n = size - 1;
    if (ctl & 1) {
        owned = wrap(data + 2, size - 2, (size_t)data[1] + 9, &n);
        if (owned == NULL) return 0;
        stream = owned;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_conn *c = NULL;
    if (mcdc_tds_conn_open_memory(&c, stream, n, &e) != MCDC_OK) {
        free(owned);
        return 0;
    }
    for (int q = 0; q < 4 && !mcdc_conn_is_dead(c); q++) {
        mcdc_result *r = NULL;
        if (mcdc_conn_exec(&r, c, "SELECT 1", NULL, 0, &e) != MCDC_OK) continue;
        const mcdc_schema *nat = mcdc_result_schema(r);
        mcdc_schema *s = NULL;
        if (as_text && nat->n_fields > 0) {
            if (mcdc_schema_create(&s, nat->n_fields, &e) == MCDC_OK)
                for (int i = 0; i < nat->n_fields; i++)
                    mcdc_schema_set(s, i, nat->fields[i].name, MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
        } else {
            s = mcdc_schema_ref((mcdc_schema *)nat);
        }
        mcdc_batch *b = NULL;
        if (s != NULL && mcdc_batch_create(&b, s, 4, &e) == MCDC_OK) {
            for (int k = 0; k < 1000; k++) {
                int64_t got = 0;
                int rc = mcdc_result_fetch(r, b, 0, per, 0, &got, &e);
                if (rc != MCDC_OK || got == 0) break;
                if (mcdc_batch_seal(b, &e) != MCDC_OK || mcdc_batch_validate(b, &e) != MCDC_OK)
                    abort(); /* a fetch that succeeds must leave valid columns */
                mcdc_batch_reset(b);
                if (early_free) break;
            }
            mcdc_batch_free(b);
        }
        mcdc_schema_unref(s);
        mcdc_result_free(r);
    }
    mcdc_conn_close(c);
    /* The PRELOGIN reply parser over the same bytes. */
    int enc;
    (void)mcdc_tds_parse_prelogin(data + 1, size - 1, &enc, &e);
    free(owned);
    return 0;
}
