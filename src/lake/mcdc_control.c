/*
 * mcdc_control.c - compare-and-set of one row of a control table (see
 * mcdc_tables.h): read the table at version v, let the caller decide the
 * row's new cells from its current ones, rewrite the table as version v + 1
 * only (a strict read-modify-write), and on losing to any other commit read
 * again and decide again. Several writers racing on one control table (the
 * verdicts of many streams, silver's positions, another engine's MERGE)
 * each end up applied to what the others left, none lost.
 */
#include <string.h>

#include "mcdc_delta.h"
#include "mcdc_lake.h"
#include "mcdc_tables.h"

/* How long a lost race is retried; backoff doubles from 50 ms to 2 s. */
#define CONTROL_RETRY_SECONDS 60

static bool text_eq(mcdc_cell c, const char *s) {
    return c.kind == MCDC_CELL_TEXT && (size_t)c.i == strlen(s) && memcmp(c.s, s, (size_t)c.i) == 0;
}

int64_t mcdc_control_find(const mcdc_batch *b, const char *table_name) {
    if (b == NULL) return -1;
    for (int64_t r = 0; r < b->rows; r++)
        if (text_eq(mcdc_row_get(b, r, MCDC_C_TABLE_NAME), table_name)) return r;
    return -1;
}

/* The table with row `row` (-1: a new row) set to cells. */
static int with_row(mcdc_batch **out, const mcdc_batch *old, int64_t row, const mcdc_cell *cells,
                    mcdc_error *err) {
    mcdc_schema *s;
    int rc = mcdc_control_schema(&s, err);
    if (rc) return rc;
    int64_t n = old ? old->rows : 0;
    rc = mcdc_batch_create(out, s, n + 1, err);
    mcdc_schema_unref(s);
    if (rc) return rc;
    for (int64_t r = 0; r < n && rc == MCDC_OK; r++) {
        mcdc_cell c[MCDC_C_COUNT];
        for (int32_t k = 0; k < MCDC_C_COUNT; k++) c[k] = mcdc_row_get(old, r, k);
        rc = mcdc_row_append(*out, r == row ? cells : c, err);
    }
    if (rc == MCDC_OK && row < 0) rc = mcdc_row_append(*out, cells, err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(*out, err);
    if (rc) {
        mcdc_batch_free(*out);
        *out = NULL;
    }
    return rc;
}

int mcdc_control_update(mcdc_table *control, const char *table_name, mcdc_control_fn decide,
                        void *ctx, bool *changed, mcdc_error *err) {
    MCDC_ASSERT(control && table_name && decide && changed);
    *changed = false;
    int64_t backoff_ms = 50, deadline = mcdc_monotonic_us() + CONTROL_RETRY_SECONDS * 1000000LL;
    for (;;) {
        mcdc_batch *old = NULL, *fresh = NULL;
        int64_t version;
        int rc = mcdc_table_read_all(control, &old, &version, err);
        if (rc) return rc;
        int64_t row = mcdc_control_find(old, table_name);
        mcdc_cell cells[MCDC_C_COUNT];
        for (int32_t k = 0; k < MCDC_C_COUNT; k++)
            cells[k] = row >= 0 ? mcdc_row_get(old, row, k) : mcdc_cell_null();
        cells[MCDC_C_TABLE_NAME] = mcdc_cell_text(table_name);
        bool write = false;
        rc = decide(ctx, row >= 0, cells, &write, err);
        if (rc == MCDC_OK && write) rc = with_row(&fresh, old, row, cells, err);
        mcdc_batch_free(old); /* cells pointed into it: used above only */
        if (rc || !write) return rc;
        mcdc_table_props props = {.kind = MCDC_KIND_CONTROL};
        /* Written whole, recorded as what it is: a merge of one row on
         * table_name. */
        int64_t old_rows = fresh->rows - (row >= 0 ? 0 : 1);
        mcdc_delta_merge_info merge = {
            .predicate = "[\"(target.table_name = source.table_name)\"]",
            .matched_predicates = "[{\"actionType\":\"update\"}]",
            .not_matched_predicates = "[{\"actionType\":\"insert\"}]",
            .source_rows = 1,
            .rows_inserted = row >= 0 ? 0 : 1,
            .rows_updated = row >= 0 ? 1 : 0,
            .rows_copied = old_rows - (row >= 0 ? 1 : 0)};
        int64_t new_version;
        rc = mcdc_table_replace(control, fresh, version, &props, &merge, &new_version, err);
        mcdc_batch_free(fresh);
        if (rc == MCDC_OK) {
            *changed = true;
            return MCDC_OK;
        }
        if (rc != MCDC_E_CONFLICT || mcdc_monotonic_us() > deadline) return rc;
        mcdc_sleep_ms(backoff_ms);
        if (backoff_ms < 2000) backoff_ms *= 2;
    }
}
