#include <string.h>

#include "mcdc_batch.h"
#include "mcdc_test.h"

static mcdc_schema *sample_schema(void) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_schema_create(&s, 5, &e)) return NULL;
    mcdc_schema_set(s, 0, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, false, &e);
    mcdc_schema_set(s, 1, "_operation", MCDC_TYPE_INT32, 0, 0, 0, false, &e);
    mcdc_schema_set(s, 2, "amount", MCDC_TYPE_DECIMAL, 38, 4, 0, true, &e);
    mcdc_schema_set(s, 3, "flag", MCDC_TYPE_BOOL, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 4, "ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, &e);
    return s;
}

static void fill(mcdc_batch *b, int rows) {
    mcdc_error e = MCDC_ERROR_INIT;
    for (int r = 0; r < rows; r++) {
        char lsn[32];
        snprintf(lsn, sizeof lsn, "0x%020d", r);
        mcdc_col_append_bytes(&b->columns[0], lsn, 22, &e);
        mcdc_col_append_int(&b->columns[1], 1 + r % 4, &e);
        if (r % 3 == 0)
            mcdc_col_append_null(&b->columns[2], &e);
        else
            mcdc_col_append_decimal(&b->columns[2], (uint64_t)r, r % 2 ? -1 : 0, &e);
        mcdc_col_append_bool(&b->columns[3], r % 2 == 0, &e);
        mcdc_col_append_int(&b->columns[4], -1000000LL * r, &e);
    }
}

TEST(batch_append_seal_validate) {
    mcdc_schema *s = sample_schema();
    mcdc_batch *b;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_batch_create(&b, s, 4, &e), MCDC_OK);
    fill(b, 1000); /* grows past the initial capacity */
    CHECK_EQ_INT(mcdc_batch_seal(b, &e), MCDC_OK);
    CHECK_EQ_INT(b->rows, 1000);
    CHECK_EQ_INT(mcdc_batch_validate(b, &e), MCDC_OK);
    CHECK_EQ_INT(b->columns[2].null_count, 334);
    CHECK(!mcdc_col_is_valid(&b->columns[2], 3));
    CHECK(mcdc_col_is_valid(&b->columns[2], 4));
    /* unequal columns are refused */
    mcdc_col_append_int(&b->columns[1], 1, &e);
    CHECK_EQ_INT(mcdc_batch_seal(b, &e), MCDC_E_INVALID);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

TEST(batch_rejects_bad_decimal_and_null_in_not_null) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_schema_create(&s, 1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_schema_set(s, 0, "d", MCDC_TYPE_DECIMAL, 39, 2, 0, true, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "decimal(39,2)") != NULL);
    CHECK_EQ_INT(mcdc_schema_set(s, 0, "k", MCDC_TYPE_INT64, 0, 0, 0, false, &e), MCDC_OK);
    mcdc_batch *b;
    CHECK_EQ_INT(mcdc_batch_create(&b, s, 0, &e), MCDC_OK);
    mcdc_col_append_null(&b->columns[0], &e);
    mcdc_batch_seal(b, &e);
    CHECK_EQ_INT(mcdc_batch_validate(b, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "NOT NULL") != NULL);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

TEST(batch_export_import_round_trip) {
    mcdc_schema *s = sample_schema();
    mcdc_batch *b, *back;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_batch_create(&b, s, 16, &e), MCDC_OK);
    fill(b, 100);
    mcdc_batch_seal(b, &e);
    struct ArrowArray arr;
    struct ArrowSchema sch;
    CHECK_EQ_INT(mcdc_batch_export(&b, &arr, &sch, &e), MCDC_OK);
    CHECK(b == NULL);
    CHECK_EQ_STR(sch.format, "+s");
    CHECK_EQ_INT(sch.n_children, 5);
    CHECK_EQ_STR(sch.children[2]->format, "d:38,4");
    CHECK_EQ_STR(sch.children[4]->format, "tsu:");
    CHECK_EQ_INT(arr.length, 100);
    CHECK_EQ_INT(arr.children[2]->null_count, 34);
    CHECK(arr.children[0]->buffers[0] == NULL); /* no nulls: no bitmap */
    CHECK_EQ_INT(mcdc_batch_import(&back, &arr, &sch, &e), MCDC_OK);
    CHECK_EQ_INT(back->rows, 100);
    const mcdc_column *lsn = &back->columns[0];
    CHECK_EQ_INT(lsn->offsets[100] - lsn->offsets[99], 22);
    CHECK(memcmp(lsn->data + lsn->offsets[7], "0x00000000000000000007", 22) == 0);
    int64_t hi;
    memcpy(&hi, back->columns[2].values + 5 * 16 + 8, 8);
    CHECK_EQ_INT(hi, -1);
    CHECK(!mcdc_col_is_valid(&back->columns[2], 99));
    CHECK(((back->columns[3].values[0] >> 2) & 1) == 1);
    int64_t ts;
    memcpy(&ts, back->columns[4].values + 8 * 42, 8);
    CHECK_EQ_INT(ts, -42000000);
    arr.release(&arr);
    sch.release(&sch);
    CHECK(arr.release == NULL && sch.release == NULL);
    mcdc_batch_free(back);
    mcdc_schema_unref(s);
}

TEST(batch_out_of_memory_is_clean) {
    /* Fail each allocation of create+fill+export in turn: no crash, no leak. */
    for (int64_t n = 1; n < 60; n++) {
        mcdc_schema *s = sample_schema();
        mcdc_batch *b = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_alloc_fail_at(n);
        int rc = mcdc_batch_create(&b, s, 2, &e);
        if (rc == MCDC_OK) {
            for (int r = 0; r < 40 && rc == MCDC_OK; r++)
                rc = mcdc_col_append_bytes(&b->columns[0], "0x00", 4, &e);
            if (rc == MCDC_OK) {
                for (int c = 1; c < 5 && rc == MCDC_OK; c++)
                    for (int r = 0; r < 40 && rc == MCDC_OK; r++)
                        rc = mcdc_col_append_null(&b->columns[c], &e);
            }
            if (rc == MCDC_OK) rc = mcdc_batch_seal(b, &e);
            /* columns 1 and 4 are nullable here only by accident of the test:
             * the NOT NULL column 1 makes validate refuse, exercising that path */
            struct ArrowArray arr;
            struct ArrowSchema sch;
            if (rc == MCDC_OK) {
                int xr = mcdc_batch_export(&b, &arr, &sch, &e);
                CHECK(xr == MCDC_E_INVALID);
            }
        }
        mcdc_alloc_fail_at(0);
        CHECK(rc == MCDC_OK || rc == MCDC_E_NOMEM);
        mcdc_batch_free(b);
        mcdc_schema_unref(s);
    }
}
