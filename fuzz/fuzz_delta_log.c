/* fuzz_delta_log.c - the commit file parser and snapshot replay over arbitrary bytes;
 * inputs starting with "PAR1" go through the checkpoint (Parquet) reader instead.
 *
 * Build (from the repository root):
 *   clang -std=c17 -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *     -Iinclude -Isrc/util -Isrc/batch -Isrc/parquet -Isrc/delta fuzz/fuzz_delta_log.c \
 *     src/delta/mcdc_*.c src/parquet/mcdc_*.c src/batch/mcdc_batch.c src/util/mcdc_util.c \
 *     -ljansson -lzstd -lsnappy -llz4 -lz -lpthread -lm \
 *     -o build-fuzz/fuzz_delta_log
 *   build-fuzz/fuzz_delta_log fuzz/corpus/delta_log
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcdc_delta_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mcdc_delta_actions a;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc;
    if (size >= 4 && memcmp(data, "PAR1", 4) == 0) {
        memset(&a, 0, sizeof a);
        rc = mcdc_delta__checkpoint_parse(&a, data, size, "fuzz.checkpoint.parquet", &e);
        if (rc != MCDC_OK) mcdc_delta_actions_clear(&a);
    } else {
        rc = mcdc_delta_actions_parse(&a, (const char *)data, size, "fuzz.json", &e);
    }
    if (rc != MCDC_OK) {
        MCDC_ASSERT(e.code == rc && e.message[0] != 0);
        return 0;
    }
    /* Replay it as version 0 (and again as version 1) into a snapshot. */
    mcdc_delta_snapshot *s = NULL;
    if (mcdc_delta__snapshot_new(&s, &e) == MCDC_OK) {
        if (mcdc_delta__snapshot_apply(s, &a, 0, &e) == MCDC_OK)
            (void)mcdc_delta__snapshot_apply(s, &a, 1, &e);
        mcdc_delta_snapshot_free(s);
    }
    /* Schema strings in metaData go through the schema parser. */
    if (a.metadata) {
        mcdc_schema *sc = NULL;
        mcdc_delta_field_meta *m = NULL;
        const char *ss = json_string_value(json_object_get(a.metadata, "schemaString"));
        if (mcdc_delta_schema_from_json(&sc, &m, ss, &e) == MCDC_OK) {
            char *back = NULL;
            if (mcdc_delta_schema_to_json(&back, sc, NULL, &e) == MCDC_OK) mcdc_free(back);
            mcdc_delta_field_meta_free(m, sc->n_fields);
            mcdc_schema_unref(sc);
        }
    }
    mcdc_delta_actions_clear(&a);
    return 0;
}
