/* mcdc_once.c - a job of one unit on a lake ledger (see mcdc_once.h). */
#include "mcdc_once.h"

#include <string.h>

/* The ledger: the unit's commits are its records; a plan made by this run
 * is kept in memory until the target holds it. */
typedef struct once_ledger {
    const mcdc_once_cfg *cfg;
    void *job;
    bool planned;             /* this run planned the unit */
    mcdc_pos start, end;
} once_ledger;

/* The txn versions the target and the facts hold of the unit's app ids
 * (-1: none); without facts, the target's is the record. */
static int versions(const mcdc_once_cfg *c, int64_t *data, int64_t *record, mcdc_error *err) {
    int rc = mcdc_table_txn_version(c->target, c->app_id, data, err);
    *record = *data;
    if (rc == MCDC_OK && c->facts) rc = mcdc_table_txn_version(c->facts, c->facts_app_id, record, err);
    return rc;
}

int mcdc_once_state(const mcdc_once_cfg *cfg, bool *planned, bool *committed, mcdc_error *err) {
    int64_t d = -1, c = -1;
    int rc = versions(cfg, &d, &c, err);
    *committed = rc == MCDC_OK && c >= cfg->unit;
    *planned = rc == MCDC_OK && (d >= cfg->unit || *committed);
    return rc;
}

static const char *l_id(void *self) { return ((once_ledger *)self)->cfg->id; }
static const char *l_name(void *self) { return ((once_ledger *)self)->cfg->name; }

static bool l_fresh(void *self) {
    once_ledger *l = self;
    bool planned = false, committed = false;
    mcdc_error e = MCDC_ERROR_INIT;
    return !l->planned && mcdc_once_state(l->cfg, &planned, &committed, &e) == MCDC_OK &&
           !planned;
}

static int l_last(void *self, int64_t *planned, int64_t *committed, mcdc_error *err) {
    once_ledger *l = self;
    bool p = false, c = false;
    int rc = mcdc_once_state(l->cfg, &p, &c, err);
    *planned = p || l->planned ? l->cfg->unit : -1;
    *committed = c ? l->cfg->unit : -1;
    return rc;
}

/* The plan a commit of unit n in t records: its "planned", else what the
 * job reads from an earlier build's userMetadata. *found false: t holds no
 * commit of n that tells. */
static int plan_in(once_ledger *l, mcdc_table *t, const char *app_id, int64_t n, mcdc_pos *start,
                   mcdc_pos *end, bool *found, mcdc_error *err) {
    *found = false;
    char *um = NULL;
    int64_t version;
    int rc = mcdc_table_txn_commit(t, app_id, n, &um, &version, err);
    if (rc == MCDC_E_NOTFOUND) {
        mcdc_error_clear(err);
        return MCDC_OK;
    }
    if (rc == MCDC_OK)
        *found = mcdc_frame_planned_of(um, MCDC_POS_STAMP, start, end, NULL) == MCDC_OK;
    if (rc == MCDC_OK && !*found && l->cfg->legacy_end) {
        mcdc_pos_free(end);
        *found = l->cfg->legacy_end(l->job, um, end) && end->kind == MCDC_POS_STAMP;
        if (*found) start->kind = MCDC_POS_STAMP; /* none: a one-unit job starts nowhere */
        else mcdc_pos_free(end);
    }
    mcdc_free(um);
    return rc;
}

static int l_read_plan(void *self, int64_t n, mcdc_pos *start, mcdc_pos *end, mcdc_error *err) {
    once_ledger *l = self;
    if (l->planned) {
        int rc = mcdc_pos_copy(start, &l->start, err);
        return rc ? rc : mcdc_pos_copy(end, &l->end, err);
    }
    bool found = false;
    int rc = plan_in(l, l->cfg->target, l->cfg->app_id, n, start, end, &found, err);
    if (rc == MCDC_OK && !found && l->cfg->facts)
        rc = plan_in(l, l->cfg->facts, l->cfg->facts_app_id, n, start, end, &found, err);
    /* No record tells it (the target lost its commit): positions with
     * nothing, and the frame's checks say what is wrong. */
    if (rc == MCDC_OK && !found) start->kind = end->kind = MCDC_POS_STAMP;
    return rc;
}

static int l_write_plan(void *self, int64_t n, const mcdc_pos *start, const mcdc_pos *end,
                        mcdc_error *err) {
    once_ledger *l = self;
    MCDC_ASSERT(n == l->cfg->unit);
    int rc = mcdc_pos_copy(&l->start, start, err);
    if (rc == MCDC_OK) rc = mcdc_pos_copy(&l->end, end, err);
    l->planned = rc == MCDC_OK;
    return rc;
}

static bool l_owns(void *self, const char *um, const mcdc_unit *u) {
    once_ledger *l = self;
    (void)u;
    return l->cfg->owns && l->cfg->owns(l->job, um);
}

static const mcdc_ledger_ops ONCE_LEDGER = {
    .id = l_id,
    .name = l_name,
    .fresh = l_fresh,
    .last = l_last,
    .read_plan = l_read_plan,
    .write_plan = l_write_plan,
    /* no markers: the unit's record (its facts row, or the target's commit)
     * is written after its data */
    .owns = l_owns,
};

int mcdc_once_run(const mcdc_once_cfg *cfg, const mcdc_job_ops *ops, void *job, mcdc_error *err) {
    MCDC_ASSERT(cfg && ops && ops->pos_kind == MCDC_POS_STAMP && cfg->id && cfg->name);
    MCDC_ASSERT(cfg->unit >= 0 && (cfg->facts == NULL || cfg->facts_app_id));
    once_ledger l = {.cfg = cfg, .job = job};
    mcdc_ledger led = {&ONCE_LEDGER, &l};
    mcdc_frame_cfg fc = {
        .ctx = cfg->ctx,
        .ledger = &led,
        .target = cfg->target,
        .target_kind = cfg->target_kind,
        .target_role = cfg->target_role,
        .app_id = cfg->app_id,
        .facts = cfg->facts,
        .facts_app_id = cfg->facts_app_id,
        .stop_when_idle = true,
        .one_unit = true,
        .idle_poll_ms = 1,
        .first_unit = cfg->unit,
        .crash_prefix = cfg->crash_prefix,
    };
    int rc = mcdc_frame_run(&fc, ops, job, err);
    mcdc_pos_free(&l.start);
    mcdc_pos_free(&l.end);
    return rc;
}
