/* test_keycheck.c - a seed's key check (mcdc_keycheck.h): unique keys pass
 * and duplicates are found, held in memory or over many spilled runs (more
 * than are read at once, so runs are merged), with NULLs and text keys;
 * the runs are gone once it is freed. */
#include "mcdc_keycheck.h"
#include "mcdc_test.h"

static mcdc_schema *key_schema(void) {
    mcdc_schema *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, 2, &e);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    return s;
}

/* Rows [from, from + n) of a table whose row i has key (p(i), "n<p(i) % 7>"),
 * p a permutation of [0, rows); row `dup_at` repeats row 3's key; the
 * rows of row `null_at`'s key have a NULL id instead. */
static mcdc_batch *rows_of(mcdc_schema *s, int64_t from, int64_t n, int64_t rows, int64_t dup_at,
                           int64_t null_at) {
    mcdc_batch *b = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch_create(&b, s, n, &e);
    for (int64_t i = from; i < from + n; i++) {
        int64_t src = i == dup_at ? 3 : i;
        int64_t id = (src * 7919) % rows; /* 7919 is prime to the sizes used */
        if (src == null_at) mcdc_col_append_null(&b->columns[0], &e);
        else mcdc_col_append_int(&b->columns[0], id, &e);
        char name[16];
        snprintf(name, sizeof name, "n%lld", (long long)(id % 7));
        mcdc_col_append_bytes(&b->columns[1], name, (int64_t)strlen(name), &e);
    }
    mcdc_batch_seal(b, &e);
    return b;
}

/* Checks `rows` rows in batches with a budget of mem bytes; returns the
 * suspects, and in *dup_row the first duplicate's row (-1: none), in *key
 * its description. */
static int64_t check(int64_t rows, int64_t mem, int64_t dup_at, int64_t null_at, int64_t *runs,
                     int64_t *dup_row, char *key, size_t cap) {
    mcdc_storage_mem *m = NULL;
    mcdc_storage *st = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "keycheck", &e);
    mcdc_storage_mem_open(&st, m, NULL, &e);
    mcdc_schema *s = key_schema();
    int32_t cols[] = {0, 1};
    mcdc_keycheck_cfg c = {.cols = cols, .n_cols = 2, .memory_bytes = mem, .spill = st,
                           .spill_prefix = "_mssql_cdc_spill/t-"};
    mcdc_keycheck *k = NULL;
    CHECK_EQ_INT(mcdc_keycheck_create(&k, &c, &e), MCDC_OK);
    enum { BATCH = 5000 };
    for (int64_t r = 0; r < rows; r += BATCH) {
        mcdc_batch *b = rows_of(s, r, r + BATCH < rows ? BATCH : rows - r, rows, dup_at, null_at);
        CHECK_EQ_INT(mcdc_keycheck_add(k, b, &e), MCDC_OK);
        mcdc_batch_free(b);
    }
    CHECK_EQ_INT(mcdc_keycheck_rows(k), rows);
    int64_t suspects = -1;
    CHECK_EQ_INT(mcdc_keycheck_finish(k, &suspects, &e), MCDC_OK);
    *runs = mcdc_keycheck_runs(k);
    *dup_row = -1;
    for (int64_t r = 0; suspects > 0 && r < rows && *dup_row < 0; r += BATCH) {
        mcdc_batch *b = rows_of(s, r, r + BATCH < rows ? BATCH : rows - r, rows, dup_at, null_at);
        int64_t at = -1;
        CHECK_EQ_INT(mcdc_keycheck_confirm(k, b, &at, &e), MCDC_OK);
        if (at >= 0) {
            *dup_row = r + at;
            mcdc_keycheck_describe(k, b, at, key, cap);
        }
        mcdc_batch_free(b);
    }
    mcdc_keycheck_free(k);
    mcdc_storage_listing l = {0};
    CHECK_EQ_INT(mcdc_storage_list(st, "_mssql_cdc_spill/", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 0); /* the runs are deleted */
    mcdc_storage_listing_free(&l);
    mcdc_schema_unref(s);
    mcdc_storage_free(st);
    mcdc_storage_mem_release(m);
    return suspects;
}

TEST(keycheck_unique_keys_in_memory_and_over_merged_runs) {
    int64_t runs, dup;
    char key[128];
    CHECK_EQ_INT(check(20000, 0, -1, -1, &runs, &dup, key, sizeof key), 0);
    CHECK_EQ_INT(runs, 0);
    CHECK_EQ_INT(dup, -1);
    /* 8192 hashes a run: more runs than are read at once, merged */
    int64_t rows = (MCDC_KEYCHECK_RUNS_MAX + 6) * MCDC_KEYCHECK_FRAME_ROWS + 123;
    CHECK_EQ_INT(check(rows, MCDC_KEYCHECK_BYTES_MIN, -1, 70000, &runs, &dup, key, sizeof key), 0);
    CHECK(runs > MCDC_KEYCHECK_RUNS_MAX);
}

TEST(keycheck_finds_two_rows_of_one_key_wherever_they_are) {
    int64_t runs, dup;
    char key[128] = "";
    CHECK_EQ_INT(check(20000, 0, 19999, -1, &runs, &dup, key, sizeof key), 1);
    CHECK_EQ_INT(dup, 19999);
    CHECK_EQ_STR(key, "id=3757, name=n5"); /* row 3's: 3 * 7919 % 20000, and that % 7 */
}

TEST(keycheck_finds_a_duplicate_spilled_apart_and_null_keys_are_equal) {
    int64_t runs, dup;
    char key[128] = "";
    int64_t rows = 30 * MCDC_KEYCHECK_FRAME_ROWS;
    CHECK_EQ_INT(check(rows, MCDC_KEYCHECK_BYTES_MIN, rows - 1, -1, &runs, &dup, key, sizeof key), 1);
    CHECK(runs >= 29);
    CHECK_EQ_INT(dup, rows - 1);
    /* a NULL id alone is a key like any other; two of one name are one key */
    CHECK_EQ_INT(check(20000, 0, -1, 14, &runs, &dup, key, sizeof key), 0);
    CHECK_EQ_INT(check(20000, 0, 19999, 3, &runs, &dup, key, sizeof key), 1);
    CHECK_EQ_INT(dup, 19999);
    CHECK_EQ_STR(key, "id=NULL, name=n5");
}
