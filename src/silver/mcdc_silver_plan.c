/*
 * mcdc_silver_plan.c - planning a pass (mcdc_silver_apply.h). The order is
 * what makes a pass's view consistent: the control table first (bronze's
 * verdict, silver's position), then the facts and plans (snapshots,
 * chunks, repairs), then bronze pinned at one version: bronze commits its
 * rows before its verdict, and the stream its facts rows after bronze, so
 * the rows read hold every commit up to the verdict and every chunk the
 * facts announce. Then pass 1 (bronze's snapshots), the rebuild decision,
 * pass 2 (the rows to rank) and the state after the pass.
 */
#include <stdio.h>
#include <string.h>

#include "mcdc_finalization.h"
#include "mcdc_silver_apply.h"

void apply_plan_clear(apply_plan *pl) {
    silver_sorter_free(pl->changes);
    apply_bronze_replay_free(pl->replay);
    mcdc_schema_unref(pl->change_schema);
    mcdc_free(pl->ranges);
    mcdc_batch_free(pl->close);
    mcdc_batch_free(pl->stamps);
    memset(pl, 0, sizeof *pl);
}

void apply_result_state(mcdc_apply *a, const apply_state *s) {
    a->res.has_applied_lsn = s->applied.set;
    apply_lsn_text(&s->applied, a->res.applied_lsn);
    a->res.has_open_snapshot = s->open.set;
    apply_lsn_text(&s->open, a->res.open_snapshot_lsn);
    a->res.snapshot_wave = s->has_wave ? s->wave : -1;
}

static void warn_no_bronze(mcdc_apply *a) {
    if (a->warned_no_bronze) return;
    a->warned_no_bronze = true;
    mcdc_log(MCDC_LOG_WARN,
             "bronze %s does not exist: nothing applied to %s. Expected until the stream writes "
             "its first batch; otherwise check the name (a typo, or bronze and target swapped)",
             a->cfg.bronze, a->cfg.target);
}

/* Silver of another SCD type is refused before anything; then the control
 * table. *exists: bronze does (else the pass is idle). */
static int read_start(mcdc_apply *a, control_view *cv, bool *exists, mcdc_error *err) {
    mcdc_table_view *sv = NULL;
    int rc = mcdc_table_view_open(&sv, a->silver, -1, err);
    if (rc == MCDC_OK) rc = apply_check_scd_type(a, sv, err);
    mcdc_table_view_free(sv);
    if (rc == MCDC_OK) rc = apply_read_control(a, cv, err);
    if (rc) return rc;
    a->has_fin = cv->has_fin;
    a->fin_us = cv->fin_us;
    apply_result_state(a, &cv->silver);
    rc = mcdc_table_exists(a->bronze, exists, err);
    if (rc) return rc;
    a->res.bronze_found = *exists;
    if (!*exists) warn_no_bronze(a);
    return MCDC_OK;
}

/* Bronze pinned at its latest version (*bv): its own columns checked, the
 * change rows' schema, the key's columns among the captured ones. */
static int pin_bronze(mcdc_apply *a, apply_plan *pl, mcdc_table_view **bv, mcdc_error *err) {
    int rc = mcdc_table_view_open(bv, a->bronze, -1, err);
    if (rc == MCDC_OK && *bv == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "bronze %s vanished", a->cfg.bronze);
    const mcdc_schema *bs = rc == MCDC_OK ? mcdc_table_view_schema(*bv) : NULL;
    if (rc == MCDC_OK) rc = apply_check_bronze_types(a, bs, err);
    if (rc == MCDC_OK) pl->bronze_version = mcdc_table_view_version(*bv);
    if (rc == MCDC_OK) rc = apply_change_schema(&pl->change_schema, bs, &pl->n_cap, err);
    for (int32_t k = 0; rc == MCDC_OK && k < a->n_keys; k++) {
        int32_t j = mcdc_schema_find(pl->change_schema, a->keys[k]);
        if (j < 0 || j >= pl->n_cap)
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "key column '%s' is not a captured column of %s: give --keys the "
                                "source table's key columns as bronze names them",
                                a->keys[k], a->cfg.bronze);
    }
    return rc;
}

/* Rows of a chunked snapshot need the facts that say which chunks arrived
 * and when it is complete. */
static int check_chunk_rows(const mcdc_apply *a, const apply_facts *f, mcdc_error *err) {
    if (a->facts == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s holds rows of a chunked snapshot: pass --facts-table (the "
                              "stream's), whose rows say which chunks arrived and when the "
                              "snapshot is complete. Nothing was applied",
                              a->cfg.bronze);
    if (f->opened == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s holds rows of a chunked snapshot, but %s has no "
                              "'snapshot_open' row for target '%s': is bronze named otherwise "
                              "in the stream's --target? Nothing was applied",
                              a->cfg.bronze, a->cfg.facts_table, a->cfg.bronze);
    return MCDC_OK;
}

/* Which rows pass 2 ranks. */
static bronze_selection selection(const mcdc_apply *a, const apply_plan *pl, const control_view *cv,
                                  const apply_facts *f, const apply_decision *d) {
    bronze_selection s = {.rebuild = d->rebuild, .snapshot = d->snapshot,
                          .applied = cv->silver.applied, .s_open = f->s_open, .first = d->first,
                          .new_chunks = d->new_chunks, .n_new = d->n_new,
                          .history = a->cfg.scd_type == 2 && d->rebuild,
                          .changes_after = d->snapshot,
                          .keep_stamps = d->hist_done && pl->n_ranges > 0};
    if (s.history && cv->silver.applied.set && apply_lsn_cmp(&cv->silver.applied, &d->snapshot) < 0)
        s.changes_after = cv->silver.applied;
    /* a rebuild takes the repairs after its snapshot as changes; one below
     * it is older than the snapshot's rows */
    if (!d->rebuild && f->n_rep > 0) {
        s.rep_stamps = (const char(*)[MCDC_LSN_TEXT_LEN + 1])f->rep_stamps;
        s.n_rep = f->n_rep;
        for (int32_t i = 0; i < f->n_rep; i++) {
            apply_lsn x = apply_lsn_of(f->rep_stamps[i], MCDC_LSN_TEXT_LEN);
            if (!s.rep_min.set || apply_lsn_cmp(&x, &s.rep_min) < 0) s.rep_min = x;
        }
    }
    return s;
}

/* A history's rebuild: the snapshot's commit time, as its rows, the
 * changes around it or its facts row tell it (none may: NULL), as
 * pl->close. */
static int close_row(apply_plan *pl, const apply_facts *f, const apply_lsn *snapshot,
                     const bronze_ranked *r, mcdc_error *err) {
    bool has = true;
    int64_t us = r->has_ts_snap ? r->ts_snap : r->has_ts_le ? r->ts_le : r->has_ts_gt ? r->ts_gt : 0;
    if (!r->has_ts_snap && !r->has_ts_le && !r->has_ts_gt) {
        has = false;
        for (int i = 0; i < f->sf.n && !has; i++) {
            const mcdc_snap_row *row = &f->sf.rows[i];
            apply_lsn at = apply_lsn_of(row->max_lsn, strlen(row->max_lsn));
            if (apply_lsn_cmp(&at, snapshot) == 0 && row->has_max_ts) has = true, us = row->max_ts_us;
        }
    }
    char text[1][MCDC_LSN_TEXT_LEN + 1];
    apply_lsn_text(snapshot, text[0]);
    return apply_stamp_rows(&pl->close, pl, 1, (const char(*)[MCDC_LSN_TEXT_LEN + 1])text, &has,
                            &us, err);
}

/* The state after the pass, and the verdict it passes on: bronze's, read
 * before bronze, unless held (a chunked snapshot open, no facts). */
static void plan_end(mcdc_apply *a, apply_plan *pl, const control_view *cv, const apply_facts *f,
                     const apply_decision *d, const bronze_ranked *r) {
    pl->rebuild = d->rebuild;
    pl->merged = r->top.set || (d->rebuild && d->snapshot.set) || d->n_new > 0 || r->repair_rows > 0;
    pl->is_open = d->is_open;
    pl->start = cv->silver;
    pl->end.applied = cv->silver.applied;
    apply_lsn_max(&pl->end.applied, &d->snapshot);
    apply_lsn_max(&pl->end.applied, &r->top);
    pl->end.snapshot = d->rebuild ? d->snapshot : cv->silver.snapshot;
    if (d->is_open) {
        pl->end.open = f->s_open;
        pl->end.has_wave = d->wave_max >= 0;
        pl->end.wave = d->wave_max;
    }
    pl->has_verdict = cv->has_verdict && a->facts && !d->is_open;
    if (pl->has_verdict) {
        snprintf(pl->verdict_lsn, sizeof pl->verdict_lsn, "%s", cv->verdict_lsn);
        pl->verdict_us = cv->verdict_us;
    }
}

/* Nothing new for silver that exists: the pass is idle, and only the
 * verdict may move (a failure to move it is a warning, retried after the
 * next pass). */
static int idle_verdict(mcdc_apply *a, bool *idle, mcdc_error *err) {
    apply_plan *pl = &a->plan;
    bool has_table = false;
    int rc = mcdc_table_exists(a->silver, &has_table, err);
    if (rc || !has_table) return rc;
    *idle = true;
    if (pl->has_verdict) {
        mcdc_verdict v;
        if (mcdc_verdict_advance_table(&v, a->control, a->cfg.target, pl->verdict_lsn,
                                       pl->verdict_us, a->cfg.granularity, err) == MCDC_OK &&
            v.found) {
            a->has_fin = true;
            a->fin_us = v.finalized_until_us;
        } else if (err && err->code) {
            mcdc_log(MCDC_LOG_WARN, "finalized_until of %s was not advanced (%s); it is "
                     "retried after the next pass", a->cfg.target, err->message);
            mcdc_error_clear(err);
        }
    }
    apply_plan_clear(pl);
    return MCDC_OK;
}

/* Nothing new in bronze: the pass still merges when silver holds files of
 * another writer to fold in (silver_merge_foreign), so that a key it
 * holds twice is held once without waiting for a change of it. */
static int foreign_fold(mcdc_apply *a, bool *fold, mcdc_error *err) {
    mcdc_table_view *sv = NULL;
    int rc = mcdc_table_view_open(&sv, a->silver, -1, err);
    if (rc == MCDC_OK)
        rc = silver_merge_foreign(a->silver, sv, (const char *const *)a->keys, a->n_keys, fold, err);
    mcdc_table_view_free(sv);
    if (rc == MCDC_OK && *fold)
        mcdc_log(MCDC_LOG_INFO, "%s: nothing new in %s, but silver holds files another writer "
                                "added: they are folded in",
                 a->cfg.target, a->cfg.bronze);
    return rc;
}

int apply_plan_pass(mcdc_apply *a, const mcdc_pos *last_end, bool *idle, mcdc_error *err) {
    *idle = false;
    apply_plan_clear(&a->plan);
    apply_plan *pl = &a->plan;
    control_view cv;
    bool exists = false;
    int rc = read_start(a, &cv, &exists, err);
    if (rc || !exists) {
        *idle = rc == MCDC_OK;
        return rc;
    }
    apply_facts f;
    apply_decision d = {0};
    bronze_snapshots snaps = {0};
    bronze_ranked ranked = {0};
    mcdc_table_view *bv = NULL;
    rc = apply_read_facts(a, &cv, last_end, &f, &pl->facts_version, err);
    if (rc == MCDC_OK) rc = pin_bronze(a, pl, &bv, err);
    const mcdc_schema *bs = rc == MCDC_OK ? mcdc_table_view_schema(bv) : NULL;
    /* pass 1: the newest whole snapshot after the one rebuilt from */
    int64_t t0 = mcdc_monotonic_us();
    if (rc == MCDC_OK)
        rc = apply_bronze_snapshots(a, pl, bs, &cv.silver.snapshot, a->facts && f.opened, &snaps, err);
    if (rc == MCDC_OK && snaps.chunk_rows) rc = check_chunk_rows(a, &f, err);
    /* what the pass does */
    if (rc == MCDC_OK) rc = apply_decide(&cv, &f, &snaps.whole, &d, err);
    if (rc == MCDC_OK) rc = apply_plan_waves(a, pl, &f, &d, err);
    int64_t t1 = mcdc_monotonic_us();
    /* pass 2: the rows to rank */
    bronze_selection sel = selection(a, pl, &cv, &f, &d);
    if (rc == MCDC_OK) rc = apply_bronze_rank(a, pl, bs, &sel, &ranked, err);
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_INFO, "%s: bronze version %lld read: its snapshots in %.3f s, %lld rows "
                                "to rank in %.3f s (%lld runs spilled, %lld merges of runs; %.1f "
                                "of %lld MB held at most)",
                 a->cfg.bronze, (long long)pl->bronze_version, (double)(t1 - t0) / 1e6,
                 (long long)silver_sorter_rows(pl->changes),
                 (double)(mcdc_monotonic_us() - t1) / 1e6, (long long)silver_sorter_runs(pl->changes),
                 (long long)silver_sorter_merges(pl->changes),
                 (double)silver_sorter_held_max(pl->changes) / (1024.0 * 1024.0),
                 (long long)a->cfg.memory_mb);
    if (rc == MCDC_OK && mcdc_schema_find(bs, "_command_id") < 0)
        mcdc_log(MCDC_LOG_INFO, "%s has no _command_id (includeCommandId=false): the changes of one "
                                "transaction are ordered by _seqval", a->cfg.bronze);
    if (rc == MCDC_OK && sel.history && d.snapshot.set) rc = close_row(pl, &f, &d.snapshot, &ranked, err);
    if (rc == MCDC_OK) {
        plan_end(a, pl, &cv, &f, &d, &ranked);
        if (ranked.repair_rows > 0)
            mcdc_log(MCDC_LOG_INFO, "%s: %lld rows of %d repairs recorded since the last pass",
                     a->cfg.bronze, (long long)ranked.repair_rows, (int)sel.n_rep);
    }
    apply_decision_free(&d);
    apply_facts_free(&f);
    mcdc_table_view_free(bv);
    if (rc) {
        apply_plan_clear(pl);
        return rc;
    }
    if (pl->merged || !apply_state_eq(&pl->start, &pl->end)) return MCDC_OK;
    bool fold = false;
    rc = foreign_fold(a, &fold, err);
    if (rc) apply_plan_clear(pl);
    else if (fold) pl->merged = true;
    else rc = idle_verdict(a, idle, err);
    return rc;
}
