/*
 * fuzz_parquet - our Parquet reader over arbitrary bytes: footer, schema,
 * every page and encoding, the flat reader and the leaf API. Must never
 * crash, hang or leak; errors are fine.
 *
 * Build (sources: fuzz/fuzz_parquet.c plus every .c of src/util, src/batch
 * and src/parquet):
 *   clang -fsanitize=fuzzer,address,undefined -g -O1 -std=c17 -D_GNU_SOURCE
 *     -Iinclude -Isrc/util -Isrc/batch -Isrc/parquet <sources>
 *     -lzstd -lsnappy -llz4 -lz -lpthread -lm -o build-fuzz/fuzz_parquet
 * Run: build-fuzz/fuzz_parquet -max_total_time=60 fuzz/corpus/parquet
 */
#include <stddef.h>
#include <stdint.h>

#include "mcdc_parquet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mcdc_parquet_reader *r = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    mcdc_parquet_read_options ro = MCDC_PARQUET_READ_OPTIONS_INIT;
    ro.batch_rows = 97;
    if (mcdc_parquet_reader_open_mem(&r, data, size, "fuzz.parquet", &ro, &err) != MCDC_OK)
        return 0;
    /* every leaf through the low-level API */
    for (int32_t g = 0; g < mcdc_parquet_reader_row_groups(r) && g < 4; g++) {
        for (int32_t i = 0; i < mcdc_parquet_reader_leaves(r) && i < 64; i++) {
            mcdc_parquet_leaf_data d;
            if (mcdc_parquet_reader_read_leaf(&d, r, g, i, &err) == MCDC_OK)
                mcdc_parquet_leaf_data_free(&d);
        }
    }
    /* a pruning filter on the first flat column, then the flat reader */
    const mcdc_schema *s = NULL;
    if (mcdc_parquet_reader_schema(&s, r, &err) == MCDC_OK && s->n_fields > 0) {
        mcdc_parquet_value v = {0};
        v.i = 1;
        v.bytes = (const uint8_t *)"m";
        v.len = 1;
        (void)mcdc_parquet_reader_filter(r, s->fields[0].name, MCDC_PARQUET_GE, &v, &err);
    }
    mcdc_batch *b = NULL;
    int batches = 0;
    while (batches++ < 1000 && mcdc_parquet_reader_next(&b, r, &err) == MCDC_OK && b) {
        (void)mcdc_batch_validate(b, &err);
        mcdc_batch_free(b);
    }
    mcdc_parquet_reader_free(r);
    return 0;
}
