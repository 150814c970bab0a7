/*
 * mcdc_silver_position.c - silver's position (mcdc_silver_apply.h): its
 * cells of the control table (applied_lsn, snapshot_lsn, open_snapshot_lsn,
 * snapshot_wave), as they are read, planned (JSON in the merge commit's
 * userMetadata) and written; and apply's ledger for the job frame: a pass
 * is planned by silver's txn (mssql-cdc.apply, n) and committed by the
 * control row holding its "after" cells.
 */
#include <stdio.h>
#include <string.h>

#include "mcdc_silver_apply.h"
#include "mcdc_tables.h"

/* ---- the state ------------------------------------------------------------------------- */

bool apply_state_eq(const apply_state *a, const apply_state *b) {
    return apply_lsn_cmp(&a->applied, &b->applied) == 0 &&
           apply_lsn_cmp(&a->snapshot, &b->snapshot) == 0 && apply_lsn_cmp(&a->open, &b->open) == 0 &&
           a->has_wave == b->has_wave && (!a->has_wave || a->wave == b->wave);
}

static json_t *lsn_json(const apply_lsn *o) {
    char t[MCDC_LSN_TEXT_LEN + 1];
    apply_lsn_text(o, t);
    return o->set ? json_string(t) : json_null();
}

json_t *apply_state_json(const apply_state *s) {
    return json_pack("{s:o, s:o, s:o, s:o}", "applied_lsn", lsn_json(&s->applied), "snapshot_lsn",
                     lsn_json(&s->snapshot), "open_snapshot_lsn", lsn_json(&s->open),
                     "snapshot_wave", s->has_wave ? json_integer(s->wave) : json_null());
}

void apply_state_of_json(apply_state *s, const json_t *j) {
    memset(s, 0, sizeof *s);
    const char *names[3] = {"applied_lsn", "snapshot_lsn", "open_snapshot_lsn"};
    apply_lsn *dst[3] = {&s->applied, &s->snapshot, &s->open};
    for (int i = 0; i < 3; i++) {
        const char *t = json_string_value(json_object_get(j, names[i]));
        if (t) *dst[i] = apply_lsn_of(t, strlen(t));
    }
    json_t *w = json_object_get(j, "snapshot_wave");
    s->has_wave = json_is_integer(w);
    s->wave = s->has_wave ? (int64_t)json_integer_value(w) : 0;
}

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

/* The userMetadata of silver's commit of unit n, parsed; NULL when the log
 * no longer has it. */
static json_t *unit_meta(mcdc_apply *a, int64_t n, mcdc_error *err, int *rc) {
    char *um = NULL;
    int64_t version;
    *rc = mcdc_table_txn_commit(a->silver, APPLY_APP_ID, n, &um, &version, err);
    if (*rc == MCDC_E_NOTFOUND) {
        *rc = MCDC_OK;
        mcdc_error_clear(err);
        return NULL;
    }
    json_error_t je;
    json_t *m = *rc == MCDC_OK && um ? json_loads(um, 0, &je) : NULL;
    mcdc_free(um);
    return m;
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
static int l_bind(void *self, const json_t *start, mcdc_error *err) {
    (void)self, (void)start, (void)err;
    return MCDC_OK;
}
static const json_t *l_start(void *self) {
    (void)self;
    return NULL;
}

static int l_last(void *self, int64_t *planned, int64_t *committed, mcdc_error *err) {
    mcdc_apply *a = self;
    int64_t have;
    int rc = mcdc_table_txn_version(a->silver, APPLY_APP_ID, &have, err);
    *planned = *committed = have;
    if (rc || have < 0) return rc;
    json_t *m = unit_meta(a, have, err, &rc);
    json_t *p = json_object_get(m, "planned");
    if (rc == MCDC_OK && p) {
        apply_state s, e;
        apply_state_of_json(&s, json_object_get(p, "start"));
        apply_state_of_json(&e, json_object_get(p, "end"));
        control_view cv;
        rc = apply_read_control(a, &cv, err);
        /* merged, but the control row still holds the state before it */
        if (rc == MCDC_OK && apply_state_eq(&cv.silver, &s) && !apply_state_eq(&s, &e))
            *committed = have - 1;
    }
    json_decref(m);
    return rc;
}

static int l_read_plan(void *self, int64_t n, json_t **start, json_t **end, mcdc_error *err) {
    mcdc_apply *a = self;
    *start = *end = NULL;
    if (n == a->mem_unit && a->mem_start) {
        *start = json_incref(a->mem_start);
        *end = json_incref(a->mem_end);
        return MCDC_OK;
    }
    int rc;
    json_t *m = unit_meta(a, n, err, &rc);
    json_t *p = json_object_get(m, "planned");
    *start = json_incref(json_object_get(p, "start"));
    *end = json_incref(json_object_get(p, "end"));
    json_decref(m);
    if (rc == MCDC_OK && *start == NULL) *start = json_object();
    if (rc == MCDC_OK && *end == NULL) *end = json_object();
    return rc;
}

static int l_write_plan(void *self, int64_t n, const json_t *start, const json_t *end,
                        mcdc_error *err) {
    mcdc_apply *a = self;
    json_decref(a->mem_start);
    json_decref(a->mem_end);
    a->mem_unit = n;
    a->mem_start = json_deep_copy(start);
    a->mem_end = json_deep_copy(end);
    return a->mem_start && a->mem_end ? MCDC_OK : apply_nomem(err);
}

static int l_read_commit(void *self, int64_t n, mcdc_ckpt_commit *out, mcdc_error *err) {
    (void)self, (void)err;
    out->rows = 0;
    out->data_txn = n;
    return MCDC_OK;
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
    .bind = l_bind,
    .start = l_start,
    .last = l_last,
    .read_plan = l_read_plan,
    .write_plan = l_write_plan,
    .read_commit = l_read_commit,
    .write_commit = l_write_commit,
    .owns = NULL,
};
