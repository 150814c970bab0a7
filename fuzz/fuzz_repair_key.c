/* fuzz_repair_key.c - a repair's key objects from untrusted JSON (a report
 * table's key column, a --keys-file line) through mcdc_repair_key_parse,
 * against one, two or three key columns of bronze's types (the first byte
 * picks): it never crashes or leaks; a refusal is MCDC_E_INVALID with a
 * message that names the key, and appends nothing; an accepted key appends
 * exactly one row and gives a bound the point read accepts (one part per
 * column, an integer for an integer column, else text or null). Run by
 * scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_repair.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const struct {
        const char *name;
        mcdc_type_id type;
        int32_t p, s, w;
    } COLS[] = {{"region", MCDC_TYPE_UTF8, 0, 0, 0},        {"id", MCDC_TYPE_INT16, 0, 0, 0},
                {"amount", MCDC_TYPE_DECIMAL, 18, 4, 0},    {"day", MCDC_TYPE_DATE32, 0, 0, 0},
                {"at", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0},   {"b", MCDC_TYPE_FIXED_BINARY, 0, 0, 4},
                {"f", MCDC_TYPE_DOUBLE, 0, 0, 0}};
    int n = 1 + data[0] % 3, first = (data[0] / 3) % 7;
    mcdc_schema *bs = NULL, *ks = NULL;
    if (mcdc_schema_create(&bs, 7, NULL) != MCDC_OK || mcdc_schema_create(&ks, n, NULL) != MCDC_OK) abort();
    const char *names[3];
    for (int i = 0; i < 7; i++)
        if (mcdc_schema_set(bs, i, COLS[i].name, COLS[i].type, COLS[i].p, COLS[i].s, COLS[i].w, true,
                            NULL) != MCDC_OK)
            abort();
    for (int i = 0; i < n; i++) {
        int c = (first + i) % 7;
        names[i] = COLS[c].name;
        if (mcdc_schema_set(ks, i, COLS[c].name, COLS[c].type, COLS[c].p, COLS[c].s, COLS[c].w, true,
                            NULL) != MCDC_OK)
            abort();
    }
    mcdc_batch *keys = NULL;
    if (mcdc_batch_create(&keys, ks, 1, NULL) != MCDC_OK) abort();
    json_t *bound = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_repair_key_parse((const char *)data + 1, size - 1, 0, bs, names, n, keys, &bound, &e);
    if (rc != MCDC_OK && (rc != MCDC_E_INVALID || strstr(e.message, "key 1") == NULL)) abort();
    if (mcdc_batch_seal(keys, NULL) != MCDC_OK) abort();
    if (keys->rows != (rc == MCDC_OK ? 1 : 0)) abort();
    if (rc == MCDC_OK) {
        if (bound == NULL || (n > 1 && (!json_is_array(bound) || (int)json_array_size(bound) != n))) abort();
        for (int i = 0; i < n; i++) {
            const json_t *p = n == 1 ? bound : json_array_get(bound, (size_t)i);
            mcdc_type_id t = ks->fields[i].type;
            bool integer = t == MCDC_TYPE_INT16;
            if (!json_is_null(p) && (integer ? !json_is_integer(p) : !json_is_string(p))) abort();
            if (json_is_null(p) != !mcdc_col_is_valid(&keys->columns[i], 0)) abort();
        }
    }
    json_decref(bound);
    mcdc_batch_free(keys);
    mcdc_schema_unref(ks);
    mcdc_schema_unref(bs);
    return 0;
}
