/*
 * mcdc_silver_apply.c - mssql-cdc apply (the reference's apply_changes,
 * §2.7): the job that keeps silver from bronze.
 *
 * One pass is one unit of the job frame (mcdc_frame.h), on a ledger of its
 * own: the lake. A pass's merge commit to silver carries txn(mssql-cdc.apply,
 * n) and the positions it planned (the control row's silver cells before
 * and after, bronze's version, the verdict); the unit commits when the
 * control row holds the "after" cells. So:
 *   plan     read the control table (bronze's verdict, silver's row), the
 *            facts and plans (snapshots, chunks), then pin bronze at one
 *            version and rank what it holds beyond silver's position
 *   run      merge (mcdc_silver_merge.c) and commit once      during_merge,
 *                                                               after_bronze
 *   commit   the control row: applied_lsn, snapshot_lsn, open_snapshot_lsn,
 *            snapshot_wave                                     after_commit
 *   verdict  finalized_until to bronze's verdict read before bronze, unless
 *            a chunked snapshot is open or there is no facts table
 * A run killed after the merge commit finds silver's txn at n while the
 * control row still holds n's "before" cells: it replays unit n, whose data
 * is there (the frame verifies it is this ledger's and this plan's), and
 * writes only the control row (crash point 8 of §2.13). Killed before the
 * commit, nothing of the pass is visible and the next run plans again.
 *
 * This file holds the job itself: the public API, the run and the frame's
 * job ops. Planning, bronze, the snapshots, the position and the merge of
 * a pass have files of their own (mcdc_silver_apply.h lists them).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_cfg.h"
#include "mcdc_changes.h"
#include "mcdc_options.h"
#include "mcdc_plans.h"
#include "mcdc_runtime.h"
#include "mcdc_silver_apply.h"

/* ---- the job ------------------------------------------------------------------------------ */

static int j_plan(void *job, const mcdc_pos *last_end, mcdc_pos *start, mcdc_pos *end,
                  bool *idle, mcdc_error *err) {
    mcdc_apply *a = job;
    if (a->cfg.trigger == MCDC_TRIGGER_ONCE && a->fresh_passes > 0) {
        *idle = true; /* one pass (a replay of a pass killed before does not count) */
        return MCDC_OK;
    }
    int rc = apply_plan_pass(a, last_end, idle, err);
    if (rc || *idle) return rc;
    a->planned = true;
    const apply_plan *pl = &a->plan;
    start->kind = end->kind = MCDC_POS_APPLY;
    start->apply.cells = pl->start;
    end->apply.cells = pl->end;
    end->apply.has_versions = true;
    end->apply.bronze_version = pl->bronze_version;
    end->apply.facts_version = pl->facts_version;
    end->apply.has_verdict = pl->has_verdict;
    if (pl->has_verdict) {
        snprintf(end->apply.verdict_lsn, sizeof end->apply.verdict_lsn, "%s", pl->verdict_lsn);
        end->apply.verdict_us = pl->verdict_us;
    }
    return MCDC_OK;
}

static bool verdict_of(const mcdc_pos *end, int64_t *us, char lsn[32]) {
    if (!end->apply.has_verdict) return false;
    *us = end->apply.verdict_us;
    snprintf(lsn, 32, "%s", end->apply.verdict_lsn);
    return true;
}

static int j_run(void *job, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                 mcdc_error *err) {
    mcdc_apply *a = job;
    a->commit_end = u->end->apply.cells;
    int rc = MCDC_OK;
    if (!u->data_done) {
        MCDC_ASSERT(a->planned);
        rc = apply_merge_pass(a, f, u, res, err);
        if (rc == MCDC_OK && a->plan.rebuild && a->plan.merged) a->res.rebuilt = true;
    }
    res->data_committed = rc == MCDC_OK;
    res->has_end_time = rc == MCDC_OK && verdict_of(u->end, &res->end_commit_us, res->end_lsn);
    return rc;
}

static bool j_position_time(void *job, const mcdc_pos *pos, int64_t *commit_us, char lsn[32]) {
    (void)job;
    return verdict_of(pos, commit_us, lsn);
}

static void j_done(void *job, const mcdc_unit *u, const mcdc_unit_result *res,
                   const mcdc_verdict *v) {
    (void)res;
    mcdc_apply *a = job;
    apply_result_state(a, &a->commit_end);
    if (v && v->found) {
        a->has_fin = true;
        a->fin_us = v->finalized_until_us;
    }
    a->res.passes++;
    a->res.has_finalized_until = a->has_fin;
    a->res.finalized_until_us = a->fin_us;
    int64_t ver;
    if (mcdc_table_version(a->silver, &ver, NULL) == MCDC_OK) a->res.silver_version = ver;
    (void)u;
    a->fresh_passes += a->planned;
    apply_plan_clear(&a->plan);
    a->planned = false;
    if (a->fn) a->fn(a->fn_ctx, &a->res);
}

static const mcdc_job_ops APPLY_OPS = {
    .kind = "apply",
    .pos_kind = MCDC_POS_APPLY,
    .plan = j_plan,
    .run = j_run,
    .position_time = j_position_time,
    .done = j_done,
};

/* ---- the public API ------------------------------------------------------------------------ */

static int copy_str(mcdc_apply *a, const char **s, mcdc_error *err) {
    if (*s == NULL) return MCDC_OK;
    char **v = mcdc_realloc(a->strings, (size_t)(a->n_strings + 1) * sizeof *v);
    if (v == NULL) return apply_nomem(err);
    a->strings = v;
    if ((v[a->n_strings] = mcdc_strdup(*s)) == NULL) return apply_nomem(err);
    *s = v[a->n_strings++];
    return MCDC_OK;
}

static void log_to_host(void *user, mcdc_log_level level, const char *msg) {
    mcdc_apply *a = user;
    if (a->cfg.log_fn) a->cfg.log_fn(a->cfg.log_user, level, msg);
    else mcdc_log_stderr(level, msg);
}

static int apply_create(mcdc_apply **out, const mcdc_opts *opts, const mcdc_apply_cfg *cfg,
                        mcdc_error *err) {
    if (out == NULL || cfg == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_apply_create: a NULL argument");
    *out = NULL;
    /* the caller's version's fields, the defaults after them */
    mcdc_apply_cfg given;
    int rc = mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_APPLY, cfg, err);
    if (rc) return rc;
    cfg = &given;
    if (cfg->scd_type < 0 || cfg->scd_type > 2)
        return mcdc_error_set(err, MCDC_E_INVALID, "SCD type %d: apply keeps type 1 (the current "
                              "state) or 2 (a history)", (int)cfg->scd_type);
    if (cfg->n_track_history_columns < 0 || cfg->n_track_history_columns > MCDC_COLUMNS_MAX ||
        (cfg->n_track_history_columns > 0 &&
         (cfg->scd_type != 2 || cfg->track_history_columns == NULL)))
        return mcdc_error_set(err, MCDC_E_INVALID, "track_history_columns needs scd_type 2 (a "
                              "history): type 1 keeps no versions");
    const char *missing = cfg->bronze == NULL ? "bronze" : cfg->target == NULL ? "target"
                          : cfg->control_table == NULL ? "control_table" : NULL;
    if (missing) return mcdc_error_set(err, MCDC_E_INVALID, "apply needs %s", missing);
    const char *opt_ci = opts ? mcdc_opt_capture_instance(opts) : NULL;
    if (cfg->capture_instance && opt_ci && !mcdc_str_ieq(cfg->capture_instance, opt_ci))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--capture-instance '%s' and the captureInstance option '%s' name "
                              "two capture instances: give one, the stream's",
                              cfg->capture_instance, opt_ci);
    if (cfg->deletion_vectors && cfg->scd_type == 2)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--deletion-vectors merges SCD type 1 on read; a type 2 history is "
                              "copy-on-write only: leave --deletion-vectors out");
    const char *ci = cfg->capture_instance ? cfg->capture_instance : opt_ci;
    if (ci == NULL || *ci == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "apply needs the capture instance: --capture-instance, or the "
                              "stream's source options with captureInstance");
    bool can_connect = opts && mcdc_opt_connection_string(opts) && mcdc_opt_capture_instance(opts);
    if ((cfg->keys == NULL || cfg->n_keys <= 0) && !can_connect)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "apply needs the key columns: --keys, or the stream's source "
                              "options to read them from the capture instance's unique index");
    if (cfg->n_keys > SILVER_KEYS_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "%d key columns: at most %d", (int)cfg->n_keys,
                              SILVER_KEYS_MAX);
    if (cfg->granularity != MCDC_GRANULARITY_HOUR && cfg->granularity != MCDC_GRANULARITY_MINUTE &&
        cfg->granularity != MCDC_GRANULARITY_DAY)
        return mcdc_error_set(err, MCDC_E_INVALID, "granularity %d is not hour, minute or day",
                              (int)cfg->granularity);
    if (cfg->trigger < MCDC_TRIGGER_DEFAULT || cfg->trigger > MCDC_TRIGGER_ONCE ||
        (cfg->trigger == MCDC_TRIGGER_PROCESSING_TIME &&
         (cfg->processing_time_ms <= 0 || cfg->processing_time_ms > MCDC_PROCESSING_TIME_MS_MAX)))
        return mcdc_error_set(err, MCDC_E_INVALID, "a bad trigger (processingTime needs 1 ms to a week)");
    if (cfg->memory_mb < 0 || cfg->memory_mb > 1024 * 1024 || cfg->file_rows < 0 || cfg->max_passes < 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "memory_mb, file_rows and max_passes must be >= 0");
    mcdc_apply *a = mcdc_calloc(1, sizeof *a);
    if (a == NULL) return apply_nomem(err);
    a->cfg = *cfg;
    if (a->cfg.log_fn == NULL) a->cfg.log_fn = mcdc_runtime_log_fn(cfg->runtime, &a->cfg.log_user);
    a->cfg.version = MCDC_APPLY_CFG_VERSION;
    if (a->cfg.scd_type == 0) a->cfg.scd_type = 1;
    a->cfg.track_history_columns = NULL;
    a->cfg.capture_instance = ci;
    a->opts = can_connect ? opts : NULL;
    if (a->cfg.memory_mb == 0) a->cfg.memory_mb = SILVER_SORT_BYTES_DEFAULT / (1024 * 1024);
    const char **strs[] = {&a->cfg.bronze, &a->cfg.target, &a->cfg.control_table, &a->cfg.facts_table,
                           &a->cfg.warehouse, &a->cfg.capture_instance, &a->cfg.scratch_dir};
    for (size_t i = 0; rc == MCDC_OK && i < sizeof strs / sizeof strs[0]; i++) rc = copy_str(a, strs[i], err);
    a->cfg.keys = NULL;
    if (rc == MCDC_OK && cfg->keys && cfg->n_keys > 0) {
        a->keys = mcdc_calloc((size_t)cfg->n_keys, sizeof *a->keys);
        if (a->keys == NULL) rc = apply_nomem(err);
        for (int32_t k = 0; rc == MCDC_OK && k < cfg->n_keys; k++) {
            if (cfg->keys[k] == NULL || *cfg->keys[k] == 0)
                rc = mcdc_error_set(err, MCDC_E_INVALID, "key column %d is empty", (int)k);
            else if ((a->keys[k] = mcdc_strdup(cfg->keys[k])) == NULL) rc = apply_nomem(err);
            else a->n_keys = k + 1;
        }
    }
    if (rc == MCDC_OK && cfg->n_track_history_columns > 0) {
        a->track = mcdc_calloc((size_t)cfg->n_track_history_columns, sizeof *a->track);
        if (a->track == NULL) rc = apply_nomem(err);
        for (int32_t k = 0; rc == MCDC_OK && k < cfg->n_track_history_columns; k++) {
            const char *t = cfg->track_history_columns[k];
            if (t == NULL || *t == 0)
                rc = mcdc_error_set(err, MCDC_E_INVALID, "track_history_columns: column %d is empty", (int)k);
            else if ((a->track[k] = mcdc_strdup(t)) == NULL) rc = apply_nomem(err);
            else a->n_track = k + 1;
        }
    }
    mcdc_ctx_take_test_hooks(&a->ctx, opts);
    mcdc_ctx_take_storage(&a->ctx, opts, cfg->runtime);
    a->ctx.progress_fn = cfg->progress_fn;
    a->ctx.progress_user = cfg->progress_user;
    a->sink = (mcdc_log_sink){log_to_host, a, cfg->log_level};
    if (rc) {
        mcdc_apply_free(a);
        return rc;
    }
    *out = a;
    return MCDC_OK;
}

void mcdc_apply_request_stop(mcdc_apply *a) {
    if (a) atomic_store(&a->ctx.stop, 1);
}

static void close_run(mcdc_apply *a) {
    apply_plan_clear(&a->plan);
    if (a->scratch) apply_empty_spill(a); /* this run's own runs, in a shared directory */
    mcdc_storage_free(a->scratch);
    a->scratch = a->spill = NULL;
    mcdc_table_close(a->bronze);
    mcdc_table_close(a->silver);
    mcdc_table_close(a->control);
    mcdc_table_close(a->facts);
    mcdc_table_close(a->plans);
    mcdc_changes_close(a->changes);
    mcdc_free(a->plans_name);
    for (int32_t i = 0; i < a->n_ours; i++) mcdc_free(a->ours[i]);
    for (int32_t i = 0; i < a->n_others; i++) mcdc_free(a->others[i]);
    mcdc_free(a->ours);
    mcdc_free(a->others);
    mcdc_pos_free(&a->mem_start);
    mcdc_pos_free(&a->mem_end);
    a->bronze = a->silver = a->control = a->facts = a->plans = NULL;
    a->changes = NULL;
    a->plans_name = NULL;
    a->ours = a->others = NULL;
    a->n_ours = a->n_others = 0;
}

/* Where the sorters spill: silver's own _mssql_cdc_spill/ (a local silver
 * without a scratch directory), else the scratch directory, which must be
 * local: spilled runs are written and read back at once, as scratch, and an
 * object store would bill, and wait for, every one of them. */
static int open_spill(mcdc_apply *a, mcdc_error *err) {
    const char *dir = a->cfg.scratch_dir;
    if (dir == NULL && mcdc_location_is_local(mcdc_table_path(a->silver))) {
        a->spill = mcdc_table_storage(a->silver);
        snprintf(a->spill_prefix, sizeof a->spill_prefix, "%s", APPLY_SPILL_DIR);
        return MCDC_OK;
    }
    if (dir == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "target %s is on an object store: give a local scratch directory "
                              "for the runs a pass spills (--scratch-dir DIR; the CLI's default "
                              "is the system's temp directory)",
                              a->cfg.target);
    if (*dir == 0 || !mcdc_location_is_local(dir))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--scratch-dir %s is %s: spilled runs go to a local directory "
                              "(give a path, such as /tmp)",
                              dir, *dir ? "not a local path" : "empty");
    if (mcdc_location_is_file(dir))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--scratch-dir %s is a file: give a directory (a new path creates "
                              "one)",
                              dir);
    char uuid[37];
    mcdc_uuid4(uuid);
    snprintf(a->spill_prefix, sizeof a->spill_prefix, "%s%s-", APPLY_SCRATCH_SPILL_DIR, uuid);
    int rc = mcdc_storage_open_env(&a->scratch, NULL, dir, err);
    if (rc) return mcdc_error_wrap(err, "--scratch-dir %s", dir), rc;
    a->spill = a->scratch;
    return MCDC_OK;
}

/* Opens the run's tables and checks that each is what its role says. */
static int open_tables(mcdc_apply *a, mcdc_error *err) {
    const mcdc_storage_env *env = a->ctx.storage_env;
    const char *wh = a->cfg.warehouse;
    /* one table in two roles, or one inside another */
    const mcdc_role roles[4] = {{"--bronze", a->cfg.bronze, true},
                                {"--target", a->cfg.target, true},
                                {"--control-table", a->cfg.control_table, true},
                                {"--facts-table", a->cfg.facts_table, true}};
    int rc = mcdc_roles_check(roles, 4, wh, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&a->bronze, env, a->cfg.bronze, wh, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&a->silver, env, a->cfg.target, wh, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&a->control, env, a->cfg.control_table, wh, err);
    if (rc == MCDC_OK && a->cfg.facts_table)
        rc = mcdc_table_open_env(&a->facts, env, a->cfg.facts_table, wh, err);
    if (rc == MCDC_OK) rc = mcdc_plans_name(&a->plans_name, a->cfg.bronze, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&a->plans, env, a->plans_name, wh, err);
    /* one table in two roles, each of its kind */
    const mcdc_frame_role tables[4] = {{a->bronze, MCDC_KIND_BRONZE, "bronze"},
                                      {a->silver, MCDC_KIND_SILVER, "target"},
                                      {a->control, MCDC_KIND_CONTROL, "control table"},
                                      {a->facts, MCDC_KIND_FACTS, "facts table"}};
    if (rc == MCDC_OK) rc = mcdc_frame_check_roles(tables, 4, err);
    if (rc == MCDC_OK) rc = open_spill(a, err);
    return rc;
}

/* The key columns and the table's capture instances, from SQL Server when
 * the source options allow. */
static int resolve_source(mcdc_apply *a, mcdc_error *err) {
    int rc = apply_list_add(&a->ours, &a->n_ours, a->cfg.capture_instance, strlen(a->cfg.capture_instance), err);
    if (rc || a->opts == NULL) return rc;
    /* the configured instance, else (gone) its table through bronze's names */
    silver_instances names;
    rc = silver_source_open_bronze(&a->changes, a->opts, a->bronze, a->cfg.bronze, "apply", &names,
                                   err);
    silver_instances_free(&names);
    if (rc == MCDC_E_MISMATCH) return rc;
    if (rc) return mcdc_error_wrap(err, "reading the capture instance's key and its table's capture "
                                        "instances"), rc;
    if (a->n_keys > 0) return MCDC_OK;
    int n = 0;
    const char *const *k = mcdc_changes_index_keys(a->changes, &n);
    if (n == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s has no unique index to key rows by: pass --keys",
                              mcdc_changes_capture_instance(a->changes));
    if (n > SILVER_KEYS_MAX) return mcdc_error_set(err, MCDC_E_LIMIT, "an index of %d columns", n);
    a->keys = mcdc_calloc((size_t)n, sizeof *a->keys);
    if (a->keys == NULL) return apply_nomem(err);
    for (int i = 0; i < n; i++) {
        if ((a->keys[i] = mcdc_strdup(k[i])) == NULL) return apply_nomem(err);
        a->n_keys = i + 1;
    }
    return MCDC_OK;
}

int mcdc_apply_run(mcdc_apply *a, mcdc_apply_fn fn, void *ctx, mcdc_apply_result *result,
                   mcdc_error *err) {
    if (a == NULL || result == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_apply_run: a NULL argument");
    int rc = mcdc_result_check(MCDC_RESULT_APPLY, result, "mcdc_apply_run", err);
    if (rc) return rc;
    mcdc_job_scope host = mcdc_job_enter(mcdc_runtime_acct_or_bound(a->cfg.runtime), &a->sink);
    mcdc_runtime_job_started(a->ctx.metrics);
    memset(&a->res, 0, sizeof a->res);
    a->res.size = sizeof a->res;
    a->res.silver_version = -1;
    a->res.snapshot_wave = -1;
    a->fn = fn;
    a->fn_ctx = ctx;
    a->fresh_passes = 0;
    a->mem_unit = -1;
    a->has_fin = false;
    rc = mcdc_ctx_progress_create(&a->ctx.progress, &a->ctx, "apply", err);
    if (rc == MCDC_OK) rc = open_tables(a, err);
    if (rc == MCDC_OK) rc = resolve_source(a, err);
    if (rc == MCDC_OK && a->facts == NULL && !a->warned_no_facts) {
        a->warned_no_facts = true;
        mcdc_log(MCDC_LOG_WARN, "apply into %s without a facts table: its finalized_until is not "
                                "advanced, and a chunked snapshot cannot be applied (pass the "
                                "stream's --facts-table)",
                 a->cfg.target);
    }
    if (rc == MCDC_OK) apply_empty_spill(a); /* runs a killed pass left */
    if (rc == MCDC_OK) {
        mcdc_ledger led = {&apply_ledger, a};
        bool until_idle = a->cfg.trigger == MCDC_TRIGGER_ONCE || a->cfg.trigger == MCDC_TRIGGER_AVAILABLE_NOW;
        mcdc_frame_cfg fc = {
            .ctx = &a->ctx,
            .ledger = &led,
            .target = a->silver,
            .target_kind = MCDC_KIND_SILVER,
            .app_id = APPLY_APP_ID,
            .control_table = a->cfg.control_table,
            .warehouse = a->cfg.warehouse,
            .verdict_name = a->cfg.target,
            .granularity = a->cfg.granularity,
            .stop_when_idle = until_idle,
            .idle_poll_ms = a->cfg.trigger == MCDC_TRIGGER_PROCESSING_TIME ? a->cfg.processing_time_ms : 1000,
            .min_interval_ms = a->cfg.trigger == MCDC_TRIGGER_PROCESSING_TIME ? a->cfg.processing_time_ms : 0,
            .max_units = a->cfg.max_passes,
        };
        rc = mcdc_frame_run(&fc, &APPLY_OPS, a, err);
    }
    if (rc == MCDC_OK) {
        a->res.has_finalized_until = a->has_fin;
        a->res.finalized_until_us = a->fin_us;
        int64_t ver;
        if (mcdc_table_version(a->silver, &ver, NULL) == MCDC_OK) a->res.silver_version = ver;
    }
    mcdc_result_out(MCDC_RESULT_APPLY, result, &a->res);
    if (rc && rc != MCDC_E_CANCELLED) mcdc_error_wrap(err, "apply into %s", a->cfg.target);
    close_run(a);
    mcdc_progress_end(a->ctx.progress);
    a->ctx.progress = NULL;
    mcdc_runtime_job_ended(a->ctx.metrics, rc, err);
    mcdc_job_leave(host);
    return rc;
}

/* Created with its runtime's accounting bound (mcdc_runtime.h). */
int mcdc_apply_create(mcdc_apply **out, const mcdc_opts *opts, const mcdc_apply_cfg *cfg,
                      mcdc_error *err) {
    mcdc_job_scope host = mcdc_runtime_enter_cfg(MCDC_CFG_APPLY, cfg, offsetof(mcdc_apply_cfg, runtime));
    int rc = apply_create(out, opts, cfg, err);
    if (rc == MCDC_OK)
        (*out)->ctx.metrics = mcdc_runtime_job_join((*out)->cfg.runtime, "apply",
                                                    (*out)->cfg.target, *out);
    mcdc_job_leave(host);
    return rc;
}

void mcdc_apply_free(mcdc_apply *a) {
    if (a == NULL) return;
    mcdc_runtime_job_leave(a->ctx.metrics);
    close_run(a);
    for (int i = 0; i < a->n_strings; i++) mcdc_free(a->strings[i]);
    mcdc_free(a->strings);
    for (int32_t k = 0; k < a->n_keys; k++) mcdc_free(a->keys[k]);
    mcdc_free(a->keys);
    for (int32_t k = 0; k < a->n_track; k++) mcdc_free(a->track[k]);
    mcdc_free(a->track);
    mcdc_free(a);
}

int mcdc_apply_result_json(char *out, size_t cap, const mcdc_apply_result *given,
                           mcdc_error *err) {
    if (out == NULL || given == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_apply_result_json: a NULL argument");
    mcdc_apply_result full;
    int rc = mcdc_result_in(MCDC_RESULT_APPLY, &full, given, "mcdc_apply_result_json", err);
    if (rc) return rc;
    const mcdc_apply_result *r = &full;
    char fin[MCDC_TS_TEXT_SIZE + 2] = "null";
    if (r->has_finalized_until) {
        char t[MCDC_TS_TEXT_SIZE];
        if (mcdc_ts_format(t, sizeof t, r->finalized_until_us, 3, NULL) == MCDC_OK)
            snprintf(fin, sizeof fin, "\"%s\"", t);
    }
    char lsn[32] = "null", open[32] = "null", wave[32] = "null";
    if (r->has_applied_lsn) snprintf(lsn, sizeof lsn, "\"%.22s\"", r->applied_lsn);
    if (r->has_open_snapshot) snprintf(open, sizeof open, "\"%.22s\"", r->open_snapshot_lsn);
    if (r->snapshot_wave >= 0) snprintf(wave, sizeof wave, "%lld", (long long)r->snapshot_wave);
    int n = snprintf(out, cap,
                     "{\"rebuilt\":%s,\"applied_lsn\":%s,\"finalized_until\":%s,\"bronze_found\":%s,"
                     "\"passes\":%lld,\"inserted\":%lld,\"updated\":%lld,\"deleted\":%lld,"
                     "\"silver_version\":%lld,\"open_snapshot_lsn\":%s,\"snapshot_wave\":%s}",
                     r->rebuilt ? "true" : "false", lsn, fin, r->bronze_found ? "true" : "false",
                     (long long)r->passes, (long long)r->inserted, (long long)r->updated,
                     (long long)r->deleted, (long long)r->silver_version, open, wave);
    if (n < 0 || (size_t)n >= cap)
        return mcdc_error_set(err, MCDC_E_LIMIT, "%zu bytes are too few for the ApplyResult", cap);
    return MCDC_OK;
}
