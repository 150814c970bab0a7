/*
 * mcdc_finalization.c - the completeness verdict, finalized_until.
 *
 * One control table row per table. advance() moves a row's verdict to
 * truncate(end commit time, granularity) when that is later than what the
 * row holds, and never backwards, as one compare-and-set of the row
 * (mcdc_control_update: read at version v, rewrite as v + 1 only, else read
 * and decide again). Two trackers racing on one control table therefore
 * both end with the larger verdict.
 */
#include "mcdc_finalization.h"

#include <string.h>

#include "mcdc_lake.h"
#include "mcdc_lsn.h"
#include "mcdc_options.h"
#include "mcdc_tables.h"

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

/* How far a commit time may lie ahead of this clock (the server's clock
 * may run ahead of ours). */
#define MCDC_VERDICT_SKEW_US (24LL * 3600 * 1000000)

/* The control table, refused when it is of another kind (a file, a
 * bronze table...): its rows would be read or written as verdicts. */
static int open_control(mcdc_table **out, const mcdc_opts *opts, const char *control_table,
                        const char *warehouse, mcdc_error *err) {
    mcdc_storage_env env = mcdc_opts_storage_env(opts, NULL);
    int rc = mcdc_table_open_env(out, &env, control_table, warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_table_check_kind(*out, MCDC_KIND_CONTROL, "control table", err);
    if (rc && *out) {
        mcdc_table_close(*out);
        *out = NULL;
    }
    return rc;
}

int mcdc_verdict_read_opts(mcdc_verdict *out, const mcdc_opts *opts, const char *control_table,
                           const char *warehouse, const char *table_name, mcdc_error *err) {
    int rc = check_args("mcdc_verdict_read", out, control_table, table_name, err);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    mcdc_table *t = NULL;
    rc = open_control(&t, opts, control_table, warehouse, err);
    if (rc) return rc;
    mcdc_batch *b = NULL;
    int64_t version;
    rc = mcdc_table_read_all(t, &b, &version, err);
    if (rc == MCDC_OK) {
        int64_t r = mcdc_control_find(b, table_name);
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

int mcdc_verdict_open_snapshot_opts(bool *has, char out_lsn[24], const mcdc_opts *opts,
                                    const char *control_table, const char *warehouse,
                                    const char *table_name, mcdc_error *err) {
    int rc = check_args("mcdc_verdict_open_snapshot", has, control_table, table_name, err);
    if (rc == MCDC_OK && out_lsn == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "mcdc_verdict_open_snapshot: out_lsn is NULL");
    if (rc) return rc;
    *has = false;
    out_lsn[0] = 0;
    mcdc_table *t = NULL;
    rc = open_control(&t, opts, control_table, warehouse, err);
    if (rc) return rc;
    mcdc_batch *b = NULL;
    int64_t version;
    rc = mcdc_table_read_all(t, &b, &version, err);
    int64_t r = rc == MCDC_OK ? mcdc_control_find(b, table_name) : -1;
    if (r >= 0) {
        mcdc_cell c = mcdc_row_get(b, r, MCDC_C_OPEN_SNAPSHOT_LSN);
        if (c.kind == MCDC_CELL_TEXT && c.i < 24) {
            memcpy(out_lsn, c.s, (size_t)c.i);
            out_lsn[c.i] = 0;
            *has = true;
        }
    }
    mcdc_batch_free(b);
    mcdc_table_close(t);
    return rc;
}

/* The verdict's move, decided on the row's current cells. */
typedef struct {
    int64_t candidate, end_commit_us, now_us;
    const char *end_lsn;
    mcdc_verdict *out;
} advance_ctx;

static int decide_advance(void *ctx, bool exists, mcdc_cell *cells, bool *write, mcdc_error *err) {
    (void)err;
    (void)exists;
    advance_ctx *a = ctx;
    mcdc_cell cur = cells[MCDC_C_FINALIZED_UNTIL];
    if (cur.kind == MCDC_CELL_INT && a->candidate <= cur.i) {
        /* Never backwards: the stored verdict stands. */
        a->out->found = true;
        a->out->finalized_until_us = cur.i;
        mcdc_cell up = cells[MCDC_C_UPDATED_AT];
        a->out->updated_at_us = up.kind == MCDC_CELL_INT ? up.i : 0;
        *write = false;
        return MCDC_OK;
    }
    a->now_us = mcdc_now_utc_us();
    cells[MCDC_C_FINALIZED_UNTIL] = mcdc_cell_int(a->candidate);
    cells[MCDC_C_END_LSN] = mcdc_cell_text(a->end_lsn);
    cells[MCDC_C_END_COMMIT_TS] = mcdc_cell_int(a->end_commit_us);
    cells[MCDC_C_UPDATED_AT] = mcdc_cell_int(a->now_us);
    *write = true;
    return MCDC_OK;
}

int mcdc_verdict_advance_table(mcdc_verdict *out, mcdc_table *control, const char *table_name,
                               const char *end_lsn, int64_t end_commit_us, mcdc_granularity g,
                               mcdc_error *err) {
    memset(out, 0, sizeof *out);
    advance_ctx a = {mcdc_truncate_us(end_commit_us, g), end_commit_us, 0, end_lsn, out};
    bool changed = false;
    int rc = mcdc_control_update(control, table_name, decide_advance, &a, &changed, err);
    if (rc == MCDC_OK && changed) {
        out->found = true;
        out->moved = true;
        out->finalized_until_us = a.candidate;
        out->updated_at_us = a.now_us;
        snprintf(out->end_lsn, sizeof out->end_lsn, "%s", end_lsn);
    }
    if (rc) mcdc_error_wrap(err, "advancing finalized_until of %s in %s", table_name,
                            mcdc_table_name(control));
    return rc;
}

int mcdc_verdict_advance_opts(mcdc_verdict *out, const mcdc_opts *opts,
                              const char *control_table, const char *warehouse,
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
    mcdc_lsn lsn;
    if (mcdc_lsn_parse_cstr(&lsn, end_lsn, NULL) != MCDC_OK)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "end LSN '%s' is not an LSN: give the LSN the committed batch ends "
                              "at, 0x and 20 hex digits (0x0000002A000001000001)",
                              end_lsn);
    /* A commit time later than now (a day's clock skew allowed) has not
     * happened: the verdict would call periods final that are still open. */
    if (end_commit_us > mcdc_now_utc_us() + MCDC_VERDICT_SKEW_US)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "end commit time is more than a day in the future: "
                              "finalized_until would claim periods not over yet. Give the "
                              "commit time of the batch's end (UTC)");
    mcdc_table *t = NULL;
    rc = open_control(&t, opts, control_table, warehouse, err);
    if (rc) return rc;
    rc = mcdc_verdict_advance_table(out, t, table_name, end_lsn, end_commit_us, g, err);
    mcdc_table_close(t);
    return rc;
}

int mcdc_verdict_is_final_opts(bool *out_final, const mcdc_opts *opts, const char *control_table,
                               const char *warehouse, const char *table_name,
                               int64_t period_end_us, mcdc_error *err) {
    int rc = check_args("mcdc_verdict_is_final", out_final, control_table, table_name, err);
    if (rc) return rc;
    *out_final = false;
    mcdc_verdict v;
    rc = mcdc_verdict_read_opts(&v, opts, control_table, warehouse, table_name, err);
    if (rc) return rc;
    /* The period [start, period_end) is complete when no commit before its
     * end can still arrive: everything up to finalized_until has. */
    *out_final = v.found && period_end_us <= v.finalized_until_us;
    return MCDC_OK;
}

/* ---- the same without storage options (local tables) ------------------------------- */

int mcdc_verdict_read(mcdc_verdict *out, const char *control_table, const char *warehouse,
                      const char *table_name, mcdc_error *err) {
    return mcdc_verdict_read_opts(out, NULL, control_table, warehouse, table_name, err);
}

int mcdc_verdict_open_snapshot(bool *has, char out_lsn[24], const char *control_table,
                               const char *warehouse, const char *table_name, mcdc_error *err) {
    return mcdc_verdict_open_snapshot_opts(has, out_lsn, NULL, control_table, warehouse,
                                           table_name, err);
}

int mcdc_verdict_advance(mcdc_verdict *out, const char *control_table, const char *warehouse,
                         const char *table_name, const char *end_lsn, int64_t end_commit_us,
                         mcdc_granularity g, mcdc_error *err) {
    return mcdc_verdict_advance_opts(out, NULL, control_table, warehouse, table_name, end_lsn,
                                     end_commit_us, g, err);
}

int mcdc_verdict_is_final(bool *out_final, const char *control_table, const char *warehouse,
                          const char *table_name, int64_t period_end_us, mcdc_error *err) {
    return mcdc_verdict_is_final_opts(out_final, NULL, control_table, warehouse, table_name,
                                      period_end_us, err);
}
