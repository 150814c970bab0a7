/*
 * mcdc_finalization.c - the completeness verdict, finalized_until.
 *
 * One control table row per table. advance() moves a row's verdict to
 * truncate(end commit time, granularity) when that is later than what the
 * row holds, and never backwards. The control table is small, so an advance
 * rewrites it whole under optimistic concurrency: read at version v, replace
 * if still at v, else re-read and decide again. Two trackers racing on one
 * control table therefore both end with the larger verdict.
 */
#include "mcdc_finalization.h"

#include <string.h>

#include "mcdc_lake.h"
#include "mcdc_tables.h"

static bool text_eq(mcdc_cell c, const char *s) {
    return c.kind == MCDC_CELL_TEXT && (size_t)c.i == strlen(s) && memcmp(c.s, s, (size_t)c.i) == 0;
}

/* Finds table_name's row in b (-1 when absent). */
static int64_t find_row(const mcdc_batch *b, const char *table_name) {
    if (b == NULL) return -1;
    for (int64_t r = 0; r < b->rows; r++)
        if (text_eq(mcdc_row_get(b, r, MCDC_C_TABLE_NAME), table_name)) return r;
    return -1;
}

/* The arguments every verdict function needs: a bad one is the caller's
 * MCDC_E_INVALID, never an abort of the host process. */
static int check_args(const char *fn, const void *out, const char *control_table,
                      const char *table_name, mcdc_error *err) {
    const char *missing = out == NULL             ? "out"
                          : control_table == NULL ? "control_table"
                          : table_name == NULL    ? "table_name"
                                                  : NULL;
    if (missing) return mcdc_error_set(err, MCDC_E_INVALID, "%s: %s is NULL", fn, missing);
    if (*control_table == 0 || *table_name == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "%s: %s is empty", fn,
                              *control_table == 0 ? "control_table" : "table_name");
    return MCDC_OK;
}

int mcdc_verdict_read(mcdc_verdict *out, const char *control_table, const char *warehouse,
                      const char *table_name, mcdc_error *err) {
    int rc = check_args("mcdc_verdict_read", out, control_table, table_name, err);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    mcdc_table *t;
    rc = mcdc_table_open(&t, control_table, warehouse, err);
    if (rc) return rc;
    mcdc_batch *b = NULL;
    int64_t version;
    rc = mcdc_table_read_all(t, &b, &version, err);
    if (rc == MCDC_OK) {
        int64_t r = find_row(b, table_name);
        if (r >= 0) {
            mcdc_cell fu = mcdc_row_get(b, r, MCDC_C_FINALIZED_UNTIL);
            mcdc_cell up = mcdc_row_get(b, r, MCDC_C_UPDATED_AT);
            mcdc_cell el = mcdc_row_get(b, r, MCDC_C_END_LSN);
            out->found = fu.kind == MCDC_CELL_INT;
            out->finalized_until_us = fu.i;
            out->updated_at_us = up.kind == MCDC_CELL_INT ? up.i : 0;
            if (el.kind == MCDC_CELL_TEXT && el.i < (int64_t)sizeof out->end_lsn)
                memcpy(out->end_lsn, el.s, (size_t)el.i);
        }
    }
    mcdc_batch_free(b);
    mcdc_table_close(t);
    return rc;
}

/* The control table with table_name's row set to the new verdict. */
static int rebuild(mcdc_batch **out, const mcdc_batch *old, int64_t row, const char *table_name,
                   int64_t verdict_us, const char *end_lsn, int64_t end_commit_us, int64_t now_us,
                   mcdc_error *err) {
    mcdc_schema *s;
    int rc = mcdc_control_schema(&s, err);
    if (rc) return rc;
    rc = mcdc_batch_create(out, s, (old ? old->rows : 0) + 1, err);
    mcdc_schema_unref(s);
    if (rc) return rc;
    int64_t n = old ? old->rows : 0;
    for (int64_t r = 0; r < n && rc == MCDC_OK; r++) {
        mcdc_cell cells[MCDC_C_COUNT];
        for (int32_t c = 0; c < MCDC_C_COUNT; c++) cells[c] = mcdc_row_get(old, r, c);
        if (r == row) {
            cells[MCDC_C_FINALIZED_UNTIL] = mcdc_cell_int(verdict_us);
            cells[MCDC_C_END_LSN] = mcdc_cell_text(end_lsn);
            cells[MCDC_C_END_COMMIT_TS] = mcdc_cell_int(end_commit_us);
            cells[MCDC_C_UPDATED_AT] = mcdc_cell_int(now_us);
        }
        rc = mcdc_row_append(*out, cells, err);
    }
    if (rc == MCDC_OK && row < 0) {
        mcdc_cell cells[MCDC_C_COUNT];
        for (int32_t c = 0; c < MCDC_C_COUNT; c++) cells[c] = mcdc_cell_null();
        cells[MCDC_C_TABLE_NAME] = mcdc_cell_text(table_name);
        cells[MCDC_C_FINALIZED_UNTIL] = mcdc_cell_int(verdict_us);
        cells[MCDC_C_END_LSN] = mcdc_cell_text(end_lsn);
        cells[MCDC_C_END_COMMIT_TS] = mcdc_cell_int(end_commit_us);
        cells[MCDC_C_UPDATED_AT] = mcdc_cell_int(now_us);
        rc = mcdc_row_append(*out, cells, err);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(*out, err);
    if (rc) {
        mcdc_batch_free(*out);
        *out = NULL;
    }
    return rc;
}

int mcdc_verdict_advance(mcdc_verdict *out, const char *control_table, const char *warehouse,
                         const char *table_name, const char *end_lsn, int64_t end_commit_us,
                         mcdc_granularity g, mcdc_error *err) {
    int rc = check_args("mcdc_verdict_advance", out, control_table, table_name, err);
    if (rc) return rc;
    if (end_lsn == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_verdict_advance: end_lsn is NULL");
    if (g != MCDC_GRANULARITY_HOUR && g != MCDC_GRANULARITY_MINUTE && g != MCDC_GRANULARITY_DAY)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_verdict_advance: granularity %d is not a mcdc_granularity "
                              "(hour, minute or day)",
                              (int)g);
    memset(out, 0, sizeof *out);
    int64_t candidate = mcdc_truncate_us(end_commit_us, g);
    mcdc_table *t;
    rc = mcdc_table_open(&t, control_table, warehouse, err);
    if (rc) return rc;
    /* Concurrent trackers: retry a lost race for about a minute. */
    int64_t backoff_ms = 50;
    int64_t deadline = mcdc_monotonic_us() + 60LL * 1000000;
    for (;;) {
        mcdc_batch *old = NULL, *fresh = NULL;
        int64_t version;
        rc = mcdc_table_read_all(t, &old, &version, err);
        if (rc) break;
        int64_t row = find_row(old, table_name);
        mcdc_cell cur = row >= 0 ? mcdc_row_get(old, row, MCDC_C_FINALIZED_UNTIL) : mcdc_cell_null();
        if (cur.kind == MCDC_CELL_INT && candidate <= cur.i) {
            /* Never backwards: the stored verdict stands. */
            out->found = true;
            out->finalized_until_us = cur.i;
            mcdc_cell up = mcdc_row_get(old, row, MCDC_C_UPDATED_AT);
            out->updated_at_us = up.kind == MCDC_CELL_INT ? up.i : 0;
            mcdc_batch_free(old);
            break;
        }
        int64_t now = mcdc_now_utc_us();
        rc = rebuild(&fresh, old, row, table_name, candidate, end_lsn, end_commit_us, now, err);
        mcdc_batch_free(old);
        if (rc) break;
        int64_t new_version;
        mcdc_table_props props = {.kind = MCDC_KIND_CONTROL};
        rc = mcdc_table_replace(t, fresh, version, &props, &new_version, err);
        mcdc_batch_free(fresh);
        if (rc == MCDC_OK) {
            out->found = true;
            out->moved = true;
            out->finalized_until_us = candidate;
            out->updated_at_us = now;
            snprintf(out->end_lsn, sizeof out->end_lsn, "%s", end_lsn);
            break;
        }
        if (rc != MCDC_E_CONFLICT || mcdc_monotonic_us() > deadline) break;
        mcdc_sleep_ms(backoff_ms);
        if (backoff_ms < 2000) backoff_ms *= 2;
    }
    mcdc_table_close(t);
    if (rc) mcdc_error_wrap(err, "advancing finalized_until of %s in %s", table_name, control_table);
    return rc;
}

int mcdc_verdict_is_final(bool *out_final, const char *control_table, const char *warehouse,
                          const char *table_name, int64_t period_end_us, mcdc_error *err) {
    int rc = check_args("mcdc_verdict_is_final", out_final, control_table, table_name, err);
    if (rc) return rc;
    *out_final = false;
    mcdc_verdict v;
    rc = mcdc_verdict_read(&v, control_table, warehouse, table_name, err);
    if (rc) return rc;
    /* The period [start, period_end) is complete when no commit before its
     * end can still arrive: everything up to finalized_until has. */
    *out_final = v.found && period_end_us <= v.finalized_until_us;
    return MCDC_OK;
}
