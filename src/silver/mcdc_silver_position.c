/*
 * mcdc_silver_position.c - silver's position (mcdc_silver_apply.h): its
 * cells of the control table (applied_lsn, snapshot_lsn, open_snapshot_lsn,
 * snapshot_wave), as they are read, planned (an APPLY position,
 * mcdc_position.h, in the merge commit's userMetadata) and written; and
 * apply's ledger for the job frame: a pass is planned by silver's txn
 * (mssql-cdc.apply, n) and committed by the control row holding its
 * "after" cells.
 */
#include <stdio.h>
#include <string.h>

#include "mcdc_silver_apply.h"
#include "mcdc_tables.h"

/* ---- the control table ------------------------------------------------------------------ */

static apply_lsn cell_lsn(mcdc_cell c) {
    return c.kind == MCDC_CELL_TEXT ? apply_lsn_of(c.s, (size_t)c.i) : (apply_lsn){0};
}

int apply_read_control(mcdc_apply *a, control_view *cv, mcdc_error *err) {
    memset(cv, 0, sizeof *cv);
    mcdc_batch *b = NULL;
    int64_t version;
    int rc = mcdc_table_read_all(a->control, &b, &version, err);
    if (rc) return mcdc_error_wrap(err, "reading control table %s", a->cfg.control_table), rc;
    int64_t r = mcdc_control_find(b, a->cfg.bronze);
    if (r >= 0) {
        mcdc_cell l = mcdc_row_get(b, r, MCDC_C_END_LSN), t = mcdc_row_get(b, r, MCDC_C_END_COMMIT_TS);
        if (l.kind == MCDC_CELL_TEXT && t.kind == MCDC_CELL_INT && (size_t)l.i < sizeof cv->verdict_lsn) {
            cv->has_verdict = true;
            memcpy(cv->verdict_lsn, l.s, (size_t)l.i);
            cv->verdict_lsn[l.i] = 0;
            cv->verdict_us = t.i;
        }
    }
    r = mcdc_control_find(b, a->cfg.target);
    if (r >= 0) {
        cv->silver.applied = cell_lsn(mcdc_row_get(b, r, MCDC_C_APPLIED_LSN));
        cv->silver.snapshot = cell_lsn(mcdc_row_get(b, r, MCDC_C_SNAPSHOT_LSN));
        cv->silver.open = cell_lsn(mcdc_row_get(b, r, MCDC_C_OPEN_SNAPSHOT_LSN));
        mcdc_cell w = mcdc_row_get(b, r, MCDC_C_SNAPSHOT_WAVE);
        cv->silver.has_wave = w.kind == MCDC_CELL_INT;
        cv->silver.wave = w.i;
        mcdc_cell f = mcdc_row_get(b, r, MCDC_C_FINALIZED_UNTIL);
        cv->has_fin = f.kind == MCDC_CELL_INT;
        cv->fin_us = f.i;
    }
    mcdc_batch_free(b);
    return MCDC_OK;
}

/* ---- the ledger: silver's txn plans a pass, the control row commits it --------------------- */

/* The positions silver's commit of unit n planned: *found false when the
 * log no longer has the commit, or it names none (an APPLY position without
 * cells then). */
static int unit_planned(mcdc_apply *a, int64_t n, mcdc_pos *start, mcdc_pos *end, bool *found,
                        mcdc_error *err) {
    char *um = NULL;
    int64_t version;
    *found = false;
    int rc = mcdc_table_txn_commit(a->silver, APPLY_APP_ID, n, &um, &version, err);
    if (rc == MCDC_E_NOTFOUND) {
        mcdc_error_clear(err);
        rc = MCDC_OK;
    } else if (rc == MCDC_OK) {
        *found = mcdc_frame_planned_of(um, MCDC_POS_APPLY, start, end, NULL) == MCDC_OK;
    }
    mcdc_free(um);
    if (rc == MCDC_OK && !*found) {
        mcdc_pos_free(start);
        mcdc_pos_free(end);
        start->kind = end->kind = MCDC_POS_APPLY;
    }
    return rc;
}

static const char *l_id(void *self) {
    (void)self;
    return APPLY_LEDGER_ID;
}
static const char *l_name(void *self) { return ((mcdc_apply *)self)->cfg.target; }
static bool l_fresh(void *self) {
    mcdc_apply *a = self;
    int64_t have = -1;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table_txn_version(a->silver, APPLY_APP_ID, &have, &e);
    return have < 0;
}

static int l_last(void *self, int64_t *planned, int64_t *committed, mcdc_error *err) {
    mcdc_apply *a = self;
    int64_t have;
    int rc = mcdc_table_txn_version(a->silver, APPLY_APP_ID, &have, err);
    *planned = *committed = have;
    if (rc || have < 0) return rc;
    mcdc_pos s = {0}, e = {0};
    bool found;
    rc = unit_planned(a, have, &s, &e, &found, err);
    if (rc == MCDC_OK && found) {
        control_view cv;
        rc = apply_read_control(a, &cv, err);
        /* merged, but the control row still holds the state before it */
        if (rc == MCDC_OK && apply_state_eq(&cv.silver, &s.apply.cells) &&
            !apply_state_eq(&s.apply.cells, &e.apply.cells))
            *committed = have - 1;
    }
    mcdc_pos_free(&s);
    mcdc_pos_free(&e);
    return rc;
}

static int l_read_plan(void *self, int64_t n, mcdc_pos *start, mcdc_pos *end, mcdc_error *err) {
    mcdc_apply *a = self;
    if (n == a->mem_unit && a->mem_start.kind != MCDC_POS_NONE) {
        int rc = mcdc_pos_copy(start, &a->mem_start, err);
        if (rc == MCDC_OK) rc = mcdc_pos_copy(end, &a->mem_end, err);
        return rc;
    }
    bool found;
    return unit_planned(a, n, start, end, &found, err);
}

static int l_write_plan(void *self, int64_t n, const mcdc_pos *start, const mcdc_pos *end,
                        mcdc_error *err) {
    mcdc_apply *a = self;
    a->mem_unit = n;
    int rc = mcdc_pos_copy(&a->mem_start, start, err);
    if (rc == MCDC_OK) rc = mcdc_pos_copy(&a->mem_end, end, err);
    return rc;
}

/* The cells a state writes, with the texts they point at. */
typedef struct {
    const apply_state *s;
    char applied[MCDC_LSN_TEXT_LEN + 1], snapshot[MCDC_LSN_TEXT_LEN + 1], open[MCDC_LSN_TEXT_LEN + 1];
} state_cells;

static int decide_state(void *ctx, bool exists, mcdc_cell *cells, bool *write, mcdc_error *err) {
    (void)exists, (void)err;
    const state_cells *c = ctx;
    const apply_state *s = c->s;
    cells[MCDC_C_APPLIED_LSN] = s->applied.set ? mcdc_cell_text(c->applied) : mcdc_cell_null();
    cells[MCDC_C_SNAPSHOT_LSN] = s->snapshot.set ? mcdc_cell_text(c->snapshot) : mcdc_cell_null();
    cells[MCDC_C_OPEN_SNAPSHOT_LSN] = s->open.set ? mcdc_cell_text(c->open) : mcdc_cell_null();
    cells[MCDC_C_SNAPSHOT_WAVE] = s->has_wave ? mcdc_cell_int(s->wave) : mcdc_cell_null();
    *write = true;
    return MCDC_OK;
}

static int l_write_commit(void *self, int64_t n, const mcdc_ckpt_commit *m, mcdc_error *err) {
    (void)n, (void)m;
    mcdc_apply *a = self;
    state_cells c = {.s = &a->commit_end};
    apply_lsn_text(&a->commit_end.applied, c.applied);
    apply_lsn_text(&a->commit_end.snapshot, c.snapshot);
    apply_lsn_text(&a->commit_end.open, c.open);
    bool changed;
    int rc = mcdc_control_update(a->control, a->cfg.target, decide_state, &c, &changed, err);
    if (rc) mcdc_error_wrap(err, "recording silver's position in %s", a->cfg.control_table);
    return rc;
}

const mcdc_ledger_ops apply_ledger = {
    .id = l_id,
    .name = l_name,
    .fresh = l_fresh,
    .last = l_last,
    .read_plan = l_read_plan,
    .write_plan = l_write_plan,
    /* no read_commit: a committed pass committed its merge */
    .write_commit = l_write_commit,
    .owns = NULL,
};
