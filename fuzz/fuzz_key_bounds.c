/* fuzz_key_bounds.c - key bounds from untrusted JSON (a token's lo and hi)
 * through mcdc_key_select, over arbitrary bytes read as [lo, hi] against
 * one, two or three key columns (the first byte picks): it never crashes
 * or leaks; a refusal is MCDC_E_INVALID with a message; an accepted range
 * has one parameter per `?` and a bound text only ever as a parameter. Run
 * by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_cdc_client.h"
#include "mcdc_keyrange.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mcdc_key_col col(const char *name, const char *type, int len, int dtp, const char *coll,
                        bool last) {
    mcdc_captured_column c;
    memset(&c, 0, sizeof c);
    c.name = (char *)name;
    c.data_type = (char *)type;
    c.max_length = len;
    c.precision = 10;
    c.datetime_precision = dtp;
    mcdc_key_col k;
    if (mcdc_key_col_init(&k, name, &c, coll, last, NULL) != MCDC_OK) abort();
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int n = 1 + data[0] % 3;
    mcdc_key_col keys[3];
    keys[0] = col("region", "varchar", 20, 0, "Latin1_General_CI_AS", n == 1);
    keys[1] = col("id", "bigint", 0, 0, NULL, n == 2);
    keys[2] = col("at", "datetime2", 0, 7, NULL, true);
    if (n == 1 && data[0] & 4) keys[0] = col("b", "varbinary", 8, 0, NULL, true);
    json_error_t je;
    json_t *j = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (j == NULL) return 0;
    const json_t *lo = json_is_array(j) ? json_array_get(j, 0) : j;
    const json_t *hi = json_is_array(j) ? json_array_get(j, 1) : NULL;
    mcdc_buf b = {0};
    mcdc_sql_params p = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_key_select(&b, &p, "SELECT * FROM t", NULL, NULL, keys, n, lo, hi, &e);
    if (rc != MCDC_OK && (rc != MCDC_E_INVALID || e.message[0] == 0)) abort();
    if (rc == MCDC_OK) {
        if (mcdc_buf_cstr(&b, NULL) != MCDC_OK) abort();
        int marks = 0;
        for (const char *q = (const char *)b.data; *q; q++) {
            if (*q == '?') marks++;
            if (*q == '\'') abort(); /* no text is inlined */
        }
        if (marks != p.n) abort();
    }
    mcdc_sql_params_free(&p);
    mcdc_buf_free(&b);
    json_decref(j);
    return 0;
}
