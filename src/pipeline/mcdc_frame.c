/* mcdc_frame.c - the job frame (see mcdc_frame.h). */
#include "mcdc_frame.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_finalization.h"
#include "mcdc_tables.h"

struct mcdc_frame {
    const mcdc_frame_cfg *cfg;
    const mcdc_job_ops *ops;
    void *job;
    mcdc_checkpoint *ckpt; /* opened here when the job gave no ledger */
    mcdc_ledger led;
    bool fresh;
    /* What the tables must hold before the next unit: the newest unit whose
     * data the target has under app_id, and the newest committed unit (the
     * facts hold a row of every one). */
    int64_t expected_data, expected_facts;
    mcdc_table *control;  /* the verdict's table, opened on first use */
};

/* A unit read on a thread of the frame's while the unit before publishes
 * (mcdc_frame_cfg.overlap). */
struct mcdc_frame_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool published;   /* the unit before is published: the read may go on */
    atomic_bool abandoned; /* it will not be, or the job stops: give up */
};

typedef struct {
    mcdc_frame *f;
    mcdc_frame_gate gate;
    mcdc_unit u;
    mcdc_pos start, end; /* u's, owned */
    int slot;
    pthread_t thread;
    bool planned, running;
    bool idle; /* planned, and found nothing new */
    int rc;
    mcdc_error err;
} read_ahead;

#define L_ID(f) ((f)->led.ops->id((f)->led.self))
#define L_NAME(f) ((f)->led.ops->name((f)->led.self))
#define TARGET_ROLE(f) ((f)->cfg->target_role ? (f)->cfg->target_role : "target")

const mcdc_ctx *mcdc_frame_ctx(const mcdc_frame *f) { return f->cfg->ctx; }
mcdc_table *mcdc_frame_target(const mcdc_frame *f) { return f->cfg->target; }

/* ---- the binding stamped on commits ------------------------------------------ */

static json_t *binding_meta(const mcdc_frame *f, const mcdc_unit *u) {
    json_t *s = mcdc_pos_json(u->start), *e = mcdc_pos_json(u->end);
    if (s == NULL || e == NULL) {
        json_decref(s);
        json_decref(e);
        return NULL;
    }
    return json_pack("{s:{s:o, s:o}, s:s}", "planned", "start", s, "end", e, "checkpoint_id",
                     L_ID(f));
}

/* Compact JSON of j for messages (static buffer per call site). */
static const char *text_of(const json_t *j, char *buf, size_t cap) {
    char *t = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    snprintf(buf, cap, "%s", t ? t : "(none)");
    free(t);
    return buf;
}

int mcdc_frame_planned_of(const char *um, mcdc_pos_kind k, mcdc_pos *start, mcdc_pos *end,
                          mcdc_error *err) {
    mcdc_pos_free(start);
    mcdc_pos_free(end);
    json_error_t je;
    json_t *m = um ? json_loads(um, 0, &je) : NULL;
    json_t *p = json_object_get(m, "planned");
    int rc = p ? MCDC_OK
               : mcdc_error_set(err, MCDC_E_NOTFOUND, "the commit names no planned positions");
    if (rc == MCDC_OK) rc = mcdc_pos_parse(start, k, json_object_get(p, "start"), err);
    if (rc == MCDC_OK) rc = mcdc_pos_parse(end, k, json_object_get(p, "end"), err);
    if (rc) {
        mcdc_pos_free(start);
        mcdc_pos_free(end);
    }
    json_decref(m);
    return rc;
}

typedef enum { COMMIT_OURS, COMMIT_OTHER_RANGE, COMMIT_OTHER_CHECKPOINT, COMMIT_UNKNOWN } commit_owner;

/* Whose is the commit recording txn (app_id, v) in t? *meta: its
 * userMetadata parsed (owned, may be NULL). */
static int commit_owner_of(mcdc_frame *f, mcdc_table *t, const char *app_id, int64_t v,
                           const mcdc_unit *planned, commit_owner *owner, json_t **meta,
                           int64_t *version, mcdc_error *err) {
    *owner = COMMIT_UNKNOWN;
    *meta = NULL;
    char *um = NULL;
    int rc = mcdc_table_txn_commit(t, app_id, v, &um, version, err);
    if (rc == MCDC_E_NOTFOUND) return MCDC_OK; /* cleaned up: unknown */
    if (rc) return rc;
    json_error_t je;
    *meta = um ? json_loads(um, 0, &je) : NULL;
    const char *id = json_string_value(json_object_get(*meta, "checkpoint_id"));
    if (planned && f->led.ops->owns && f->led.ops->owns(f->led.self, um, planned)) {
        *owner = COMMIT_OURS;
    } else if (id == NULL) {
        *owner = COMMIT_UNKNOWN;
    } else if (strcmp(id, L_ID(f)) != 0) {
        *owner = COMMIT_OTHER_CHECKPOINT;
    } else {
        *owner = COMMIT_OURS;
        mcdc_pos s = {0}, e = {0};
        if (planned && (mcdc_frame_planned_of(um, f->ops->pos_kind, &s, &e, NULL) != MCDC_OK ||
                        !mcdc_pos_eq(&s, planned->start) || !mcdc_pos_eq(&e, planned->end)))
            *owner = COMMIT_OTHER_RANGE;
        mcdc_pos_free(&s);
        mcdc_pos_free(&e);
    }
    mcdc_free(um);
    return MCDC_OK;
}

/* A commit of unit u under app_id already in t: fine only when it is this
 * checkpoint's commit of the same planned range. */
static int verify_replay(mcdc_frame *f, mcdc_table *t, const char *role, const char *app_id,
                         const mcdc_unit *u, mcdc_error *err) {
    commit_owner owner;
    json_t *meta;
    int64_t version;
    int rc = commit_owner_of(f, t, app_id, u->id, u, &owner, &meta, &version, err);
    if (rc || owner == COMMIT_OURS) {
        json_decref(meta);
        return rc;
    }
    char theirs[512], ours_s[256], ours_e[256];
    json_t *p = json_object_get(meta, "planned");
    text_of(p, theirs, sizeof theirs);
    mcdc_pos_text(u->start, ours_s, sizeof ours_s);
    mcdc_pos_text(u->end, ours_e, sizeof ours_e);
    const char *whose = owner == COMMIT_OTHER_RANGE ? "this checkpoint, for another range"
                        : owner == COMMIT_OTHER_CHECKPOINT ? "another checkpoint"
                                                           : "a writer that recorded no range";
    rc = mcdc_error_set(err, MCDC_E_FOREIGN_WRITER,
                        "%s %s already holds unit %lld of app id '%s' (version %lld, written by "
                        "%s: planned %s, checkpoint %s), but %s (%s) planned unit "
                        "%lld as start %s, end %s. Skipping it would lose or double changes, so "
                        "nothing was written. Stop every other job writing with app id '%s' "
                        "(each checkpoint needs an app id of its own); then rebuild the target "
                        "with a new checkpoint and a new app id",
                        role, mcdc_table_name(t), (long long)u->id, app_id, (long long)version,
                        whose, theirs,
                        json_string_value(json_object_get(meta, "checkpoint_id"))
                            ? json_string_value(json_object_get(meta, "checkpoint_id"))
                            : "(none)",
                        L_NAME(f), L_ID(f), (long long)u->id, ours_s, ours_e, app_id);
    json_decref(meta);
    return rc;
}

/* ---- the checks every job shares ----------------------------------------------- */

int mcdc_frame_check_roles(const mcdc_frame_role *roles, int n, mcdc_error *err) {
    MCDC_ASSERT(roles && n >= 0 && n <= MCDC_ROLES_MAX);
    mcdc_table *t[MCDC_ROLES_MAX] = {NULL};
    const char *role[MCDC_ROLES_MAX] = {NULL};
    for (int i = 0; i < n; i++) {
        t[i] = roles[i].table;
        role[i] = roles[i].role;
    }
    int rc = mcdc_roles_check_tables(t, role, n, err);
    for (int i = 0; i < n && rc == MCDC_OK; i++)
        if (roles[i].table && roles[i].kind != MCDC_KIND_NONE)
            rc = mcdc_table_check_kind(roles[i].table, roles[i].kind, roles[i].role, err);
    return rc;
}

int mcdc_frame_check_once(mcdc_table *t, const char *role, const char *app_id, int64_t version,
                          const char *state, bool *done, mcdc_error *err) {
    if (done) *done = false;
    int64_t have;
    int rc = mcdc_table_txn_version(t, app_id, &have, err);
    if (rc || have < version) return rc;
    if (have == version) {
        if (done) *done = true;
        return MCDC_OK;
    }
    return mcdc_error_set(
        err, MCDC_E_REWOUND,
        "%s %s holds app id '%s' up to version %lld, past the version %lld that %s would write "
        "now: that state was deleted, rewound or restored from an older copy, and the table has "
        "moved on without it. Nothing was written. Restore it; or start over with a new "
        "checkpoint, a new app id and a new (or rebuilt) target",
        role, mcdc_table_name(t), app_id, (long long)have, (long long)version, state);
}

/* ---- another process on the same ledger -------------------------------------- */

/* Whether the ledger has planned unit `unit` since this run read it: then
 * another process runs on it (this run plans nothing it has not read). */
static bool ledger_moved_to(mcdc_frame *f, int64_t unit) {
    int64_t planned, committed;
    return f->led.ops->last(f->led.self, &planned, &committed, NULL) == MCDC_OK && planned >= unit;
}

/* The error for a second process found on the ledger; `what` says what it
 * did that this run met. */
static int another_process(mcdc_frame *f, const char *what, mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_FOREIGN_WRITER,
                          "another process is running on %s: %s. A checkpoint serves one "
                          "process at a time; this run stops here and what the other "
                          "committed stands (no change is lost or doubled). Let that process "
                          "go on, or stop it and run again; two jobs need two checkpoints and "
                          "two app ids",
                          L_NAME(f), what);
}

/* ---- integrity ------------------------------------------------------------- */

/* t's txn for app_id is `have`; the checkpoint says `expected` (a replay of
 * unit `replay_id` may also find that unit). *done: it holds the replayed
 * unit (verified). */
static int check_table(mcdc_frame *f, mcdc_table *t, const char *role, const char *app_id,
                       bool is_facts, const mcdc_unit *replay, bool *done, mcdc_error *err) {
    *done = false;
    int64_t have;
    int rc = mcdc_table_txn_version(t, app_id, &have, err);
    if (rc) return rc;
    int64_t expected = is_facts ? f->expected_facts : f->expected_data;
    if (have == expected) return MCDC_OK;
    if (replay && have == replay->id) {
        rc = verify_replay(f, t, role, app_id, replay, err);
        *done = rc == MCDC_OK;
        return rc;
    }
    const char *dir = L_NAME(f);
    if (have < expected) {
        if (is_facts)
            return mcdc_error_set(
                err, MCDC_E_FACTS_BEHIND,
                "facts table %s holds rows of app id '%s' up to unit %lld, but %s "
                "committed units up to %lld: the facts rows of units %lld..%lld are gone (the "
                "facts table was restored from an older copy, or commits were deleted). "
                "Nothing was written. Restore the facts table's missing commits; or start over "
                "with a new checkpoint, a new app id and a new (or rebuilt) target",
                mcdc_table_name(t), f->cfg->app_id, (long long)have, dir, (long long)expected,
                (long long)(have + 1), (long long)expected);
        return mcdc_error_set(
            err, MCDC_E_TARGET_BEHIND,
            "%s %s holds units of app id '%s' up to %lld, but %s committed data up to "
            "unit %lld: commits of the target are gone (an older backup restored, log files "
            "deleted) and their changes would be missing for good. Nothing was written. "
            "Restore the target's missing commits; or rebuild: a new checkpoint, a new app id "
            "and a new (or rebuilt) target",
            role, mcdc_table_name(t), app_id, (long long)have, dir, (long long)expected);
    }
    commit_owner owner;
    json_t *meta;
    int64_t version;
    rc = commit_owner_of(f, t, app_id, have, NULL, &owner, &meta, &version, err);
    json_decref(meta);
    if (rc) return rc;
    /* Units this run has not seen, by a ledger that has planned them since
     * it was read: not a rewound checkpoint but a second process on it. */
    if ((owner == COMMIT_OURS || (f->fresh && owner == COMMIT_OTHER_CHECKPOINT)) &&
        ledger_moved_to(f, have)) {
        char what[640];
        snprintf(what, sizeof what,
                 "it committed unit %lld to %s %s (version %lld) while this run, at unit "
                 "%lld, was not looking",
                 (long long)have, role, mcdc_table_name(t), (long long)version,
                 (long long)expected);
        return another_process(f, what, err);
    }
    if (owner == COMMIT_OTHER_CHECKPOINT && !f->fresh)
        return mcdc_error_set(
            err, MCDC_E_FOREIGN_WRITER,
            "%s %s holds unit %lld of app id '%s' (version %lld) committed by another "
            "checkpoint, while %s is at unit %lld: another job writes with the same "
            "app id. Nothing was written. Stop it: every checkpoint needs an app id of its own "
            "(and a target of its own). Then rebuild this target with a new checkpoint and a "
            "new app id",
            role, mcdc_table_name(t), (long long)have, app_id, (long long)version, dir,
            (long long)expected);
    if (owner == COMMIT_UNKNOWN && !f->fresh && expected >= 0)
        return mcdc_error_set(
            err, MCDC_E_FOREIGN_WRITER,
            "%s %s holds unit %lld of app id '%s' (version %lld), beyond the unit %lld "
            "%s committed, written by a program that did not record a checkpoint: "
            "another writer uses this app id. Nothing was written. Stop it, then rebuild this "
            "target with a new checkpoint and a new app id",
            role, mcdc_table_name(t), (long long)have, app_id, (long long)version,
            (long long)expected, dir);
    return mcdc_error_set(
        err, MCDC_E_REWOUND,
        "%s %s already holds units of app id '%s' up to %lld, but %s %s: the "
        "checkpoint was deleted, rewound or restored from an older copy, and Delta would skip "
        "every new write as a duplicate. Nothing was written. Restore the checkpoint; or start "
        "over with a new checkpoint, a new app id AND a new (or rebuilt) target: a new app id "
        "on this target would write every change a second time",
        role, mcdc_table_name(t), app_id, (long long)have, dir,
        f->fresh ? "is new" : "has not committed them");
}

/* Before a unit: `replay` is the unit about to run again, NULL when a fresh
 * plan comes next. A replayed unit the facts already hold is written again
 * and skipped by the txn rule (verified then); one they did not hold here
 * and hold by then was written by another process. */
static int check_integrity(mcdc_frame *f, mcdc_unit *replay, mcdc_error *err) {
    bool data_done = false, facts_done = false;
    int rc = check_table(f, f->cfg->target, TARGET_ROLE(f), f->cfg->app_id, false, replay, &data_done,
                         err);
    if (rc == MCDC_OK && f->cfg->facts)
        rc = check_table(f, f->cfg->facts, "facts table", f->cfg->facts_app_id, true, replay,
                         &facts_done, err);
    if (replay) {
        replay->data_done = data_done;
        replay->facts_done = facts_done;
    }
    return rc;
}

/* ---- commits ------------------------------------------------------------------ */

static char *meta_text(json_t *meta, const mcdc_frame *f, const mcdc_unit *u) {
    json_t *b = binding_meta(f, u);
    if (meta == NULL || b == NULL || json_object_update(meta, b) != 0) {
        json_decref(b);
        return NULL;
    }
    json_decref(b);
    return json_dumps(meta, JSON_COMPACT);
}

/* Commits a's files under txn(app_id, u->id); a skip is verified. Takes
 * meta (NULL: out of memory building it). */
static int commit_verified(mcdc_frame *f, mcdc_table *t, const char *role, const char *app_id,
                           const mcdc_unit *u, mcdc_appender *a, json_t *meta,
                           const mcdc_table_commit *tmpl, bool skip_expected, bool *was_skipped,
                           mcdc_error *err) {
    char *text = meta_text(meta, f, u);
    json_decref(meta);
    if (text == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    bool skipped = false;
    int64_t version;
    mcdc_table_commit c = {.read_version = -1};
    if (tmpl) c = *tmpl;
    c.app_id = app_id;
    c.txn_version = u->id;
    c.user_metadata = text;
    int rc = mcdc_appender_commit_with(a, &c, &skipped, &version, err);
    free(text);
    if (rc == MCDC_OK && skipped) {
        /* A commit of this txn appeared since the check: whose? */
        int64_t have;
        rc = mcdc_table_txn_version(t, app_id, &have, err);
        if (rc == MCDC_OK && have == u->id) rc = verify_replay(f, t, role, app_id, u, err);
        /* This checkpoint's commit of this very range, absent when the run
         * checked: only another process on the checkpoint writes one. */
        if (rc == MCDC_OK && have == u->id && !skip_expected) {
            char what[640];
            snprintf(what, sizeof what,
                     "it committed unit %lld to %s %s while this run was writing the same "
                     "unit",
                     (long long)u->id, role, mcdc_table_name(t));
            rc = another_process(f, what, err);
        } else if (rc == MCDC_OK && have != u->id && ledger_moved_to(f, have)) {
            char what[640];
            snprintf(what, sizeof what,
                     "it committed unit %lld to %s %s, past unit %lld this run was writing",
                     (long long)have, role, mcdc_table_name(t), (long long)u->id);
            rc = another_process(f, what, err);
        } else if (rc == MCDC_OK && have != u->id)
            rc = mcdc_error_set(err, MCDC_E_FOREIGN_WRITER,
                                "%s %s: app id '%s' is at unit %lld, past unit %lld that "
                                "%s was writing: another job writes with the same "
                                "app id. Nothing of unit %lld was written. Stop it: every "
                                "checkpoint needs an app id of its own",
                                role, mcdc_table_name(t), app_id, (long long)have,
                                (long long)u->id, L_NAME(f), (long long)u->id);
    }
    if (was_skipped) *was_skipped = rc == MCDC_OK && skipped;
    return rc;
}

int mcdc_frame_commit_data(mcdc_frame *f, const mcdc_unit *u, mcdc_appender *a, json_t *meta,
                           bool *skipped, mcdc_error *err) {
    return mcdc_frame_commit_data_with(f, u, a, meta, NULL, skipped, err);
}

int mcdc_frame_commit_data_with(mcdc_frame *f, const mcdc_unit *u, mcdc_appender *a, json_t *meta,
                                const mcdc_table_commit *c, bool *skipped, mcdc_error *err) {
    MCDC_ASSERT(!u->data_done);
    int rc = commit_verified(f, f->cfg->target, TARGET_ROLE(f), f->cfg->app_id, u, a, meta, c,
                             false, skipped, err);
    if (rc) mcdc_error_wrap(err, "committing unit %lld to %s", (long long)u->id,
                            mcdc_table_name(f->cfg->target));
    return rc;
}

static int write_facts(mcdc_frame *f, const mcdc_unit *u, const mcdc_unit_result *res,
                       mcdc_error *err) {
    mcdc_schema *fs;
    int rc = mcdc_facts_schema(&fs, err);
    if (rc) return rc;
    mcdc_batch *rows = NULL;
    mcdc_appender *a = NULL;
    mcdc_table_props props = {.kind = MCDC_KIND_FACTS};
    rc = mcdc_batch_create(&rows, fs, 2, err);
    if (rc == MCDC_OK) rc = f->ops->facts(f->job, u, res, rows, err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(rows, err);
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, f->cfg->facts, fs, &props, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(a, rows, err);
    json_t *meta = json_pack("{s:s, s:I}", "app_id", f->cfg->app_id, "batch_id", (json_int_t)u->id);
    /* The facts turn of the jobs sharing the budget (mcdc_context.h); not
     * given up on a stop request: the unit's data is committed, its facts
     * row finishes it. Held for one commit, so the wait is short. */
    int turn = 0;
    if (rc == MCDC_OK)
        rc = mcdc_budget_acquire(f->cfg->ctx->budget, MCDC_PERMIT_FACTS, 1, 1, 0, NULL, &turn, err);
    if (rc == MCDC_OK)
        rc = commit_verified(f, f->cfg->facts, "facts table", f->cfg->facts_app_id, u, a, meta,
                             NULL, u->facts_done, NULL, err);
    else
        json_decref(meta);
    mcdc_budget_release(f->cfg->ctx->budget, MCDC_PERMIT_FACTS, turn);
    mcdc_appender_free(a);
    mcdc_batch_free(rows);
    mcdc_schema_unref(fs);
    if (rc) mcdc_error_wrap(err, "writing the facts of unit %lld to %s", (long long)u->id,
                            mcdc_table_name(f->cfg->facts));
    return rc;
}

/* ---- the verdict ----------------------------------------------------------------- */

/* Moves finalized_until; a failure is a warning (retried after the next
 * unit: every advance carries the newest end). *v is filled on success. */
static bool advance_verdict(mcdc_frame *f, int64_t end_us, const char *end_lsn, mcdc_verdict *v) {
    mcdc_error e = MCDC_ERROR_INIT;
    if (f->control == NULL)
        mcdc_table_open_env(&f->control, f->cfg->ctx->storage_env, f->cfg->control_table,
                            f->cfg->warehouse, &e);
    if (f->control && mcdc_verdict_advance_table(v, f->control, f->cfg->verdict_name, end_lsn,
                                                 end_us, f->cfg->granularity, &e) == MCDC_OK)
        return true;
    mcdc_log(MCDC_LOG_WARN, "finalized_until of %s was not advanced (%s); it is retried after "
                            "the next batch and never runs ahead of the data",
             f->cfg->verdict_name, e.message);
    return false;
}

/* ---- the loop --------------------------------------------------------------------- */

/* The state the last committed unit left (expected txns, its end). */
static int load_position(mcdc_frame *f, int64_t committed, mcdc_pos *last_end, mcdc_error *err) {
    mcdc_pos_free(last_end);
    f->expected_data = -1;
    f->expected_facts = committed;
    if (committed < 0) return MCDC_OK;
    /* a ledger that keeps no marker: the unit committed its data */
    mcdc_ckpt_commit m = {0, committed};
    int rc = f->led.ops->read_commit ? f->led.ops->read_commit(f->led.self, committed, &m, err)
                                     : MCDC_OK;
    if (rc) return rc;
    f->expected_data = m.data_txn;
    mcdc_pos start = {0};
    rc = f->led.ops->read_plan(f->led.self, committed, &start, last_end, err);
    mcdc_pos_free(&start);
    return rc;
}

/* Crash points (tests): true when the job "dies" here, leaving the disk as
 * a kill would. */
static bool crashed(const mcdc_frame *f, const char *point, int64_t id, mcdc_error *err) {
    char named[64];
    if (f->cfg->crash_prefix) {
        snprintf(named, sizeof named, "%s%s", f->cfg->crash_prefix, point);
        point = named;
    }
    if (!mcdc_ctx_crash(f->cfg->ctx, point, id)) return false;
    mcdc_error_set(err, MCDC_E_CANCELLED, "killed at crash point %s of unit %lld (test hook)",
                   point, (long long)id);
    return true;
}

/* Publishes unit u (read into slot, or run whole), then its facts, its
 * commit marker and the verdict. */
static int run_unit(mcdc_frame *f, mcdc_unit *u, int slot, mcdc_error *err) {
    const mcdc_frame_cfg *cfg = f->cfg;
    mcdc_unit_result res;
    memset(&res, 0, sizeof res);
    int rc = f->ops->publish ? f->ops->publish(f->job, slot, f, u, &res, err)
                             : f->ops->run(f->job, f, u, &res, err);
    if (rc) return rc;
    MCDC_ASSERT(res.rows >= 0);
    if (crashed(f, "after_bronze", u->id, err)) return MCDC_E_CANCELLED;
    if (cfg->facts) {
        rc = write_facts(f, u, &res, err);
        if (rc) return rc;
        if (crashed(f, "after_facts", u->id, err)) return MCDC_E_CANCELLED;
    }
    bool has_data = res.data_committed || u->data_done;
    mcdc_ckpt_commit m = {res.rows, has_data ? u->id : f->expected_data};
    if (f->led.ops->write_commit) rc = f->led.ops->write_commit(f->led.self, u->id, &m, err);
    if (rc) return rc;
    f->expected_data = m.data_txn;
    f->expected_facts = u->id;
    if (crashed(f, "after_commit", u->id, err)) return MCDC_E_CANCELLED;
    mcdc_verdict v;
    bool moved = false;
    if (cfg->control_table && res.has_end_time) {
        if (crashed(f, "during_verdict", u->id, err)) return MCDC_E_CANCELLED;
        moved = advance_verdict(f, res.end_commit_us, res.end_lsn, &v);
    }
    if (f->ops->done) f->ops->done(f->job, u, &res, moved ? &v : NULL);
    return MCDC_OK;
}

/* Records a fresh plan of unit u (its start and end), after the checks:
 * the tables (unless checked since the last unit), a fresh ledger's. */
static int record_plan(mcdc_frame *f, mcdc_unit *u, bool checked, mcdc_error *err) {
    int rc = checked ? MCDC_OK : check_integrity(f, NULL, err);
    if (rc == MCDC_OK && f->fresh && f->ops->check_fresh)
        rc = f->ops->check_fresh(f->job, u->start, err);
    if (rc == MCDC_OK && f->led.ops->bind) rc = f->led.ops->bind(f->led.self, NULL, err);
    if (rc == MCDC_OK) f->fresh = false;
    if (rc == MCDC_OK) rc = f->led.ops->write_plan(f->led.self, u->id, u->start, u->end, err);
    if (rc == MCDC_E_CONFLICT) {
        char what[96];
        snprintf(what, sizeof what, "it planned unit %lld first", (long long)u->id);
        rc = another_process(f, what, err);
    }
    if (rc) return rc;
    u->data_done = u->facts_done = false;
    if (crashed(f, "after_plan", u->id, err)) return MCDC_E_CANCELLED;
    return MCDC_OK;
}

/* ---- overlap: the next unit read while one publishes ------------------------------- */

int mcdc_frame_gate_wait(mcdc_frame_gate *g, mcdc_error *err) {
    if (g == NULL) return MCDC_OK;
    pthread_mutex_lock(&g->mu);
    while (!g->published && !atomic_load(&g->abandoned)) pthread_cond_wait(&g->cv, &g->mu);
    bool go = !atomic_load(&g->abandoned);
    pthread_mutex_unlock(&g->mu);
    return go ? MCDC_OK
              : mcdc_error_set(err, MCDC_E_CANCELLED,
                               "the unit read ahead was given up: the unit before it was not "
                               "published, or the job stops");
}

bool mcdc_frame_gate_abandoned(mcdc_frame_gate *g) {
    return g != NULL && atomic_load(&g->abandoned);
}

/* The unit before was published (ok), or will not be: the read goes on,
 * or gives up. */
static void gate_open(mcdc_frame_gate *g, bool ok) {
    pthread_mutex_lock(&g->mu);
    if (ok) g->published = true;
    else atomic_store(&g->abandoned, true);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void *ahead_main(void *arg) {
    read_ahead *a = arg;
    a->rc = a->f->ops->read(a->f->job, a->slot, &a->u, &a->gate, &a->err);
    return NULL;
}

/* Plans the unit after u (which ends at u_end), when the frame overlaps
 * and the next unit would run at once, and starts reading it on a thread
 * into the other slot. a->planned: it was planned (positions in a);
 * a->running: its read started; a->rc: planning or preparing failed
 * (reported once u is published, as it would be after it). */
static void read_ahead_start(mcdc_frame *f, const mcdc_unit *u, int slot, const mcdc_pos *u_end,
                             int64_t units, read_ahead *a) {
    const mcdc_frame_cfg *cfg = f->cfg;
    a->planned = a->running = a->idle = false;
    a->rc = MCDC_OK;
    if (!cfg->overlap || f->ops->read == NULL || cfg->one_unit || cfg->min_interval_ms > 0 ||
        (cfg->max_units > 0 && units + 1 >= cfg->max_units) || mcdc_ctx_stopping(cfg->ctx) ||
        (f->ops->ahead && !f->ops->ahead(f->job, slot, u)))
        return;
    bool idle = false;
    mcdc_pos_free(&a->start);
    mcdc_pos_free(&a->end);
    a->rc = f->ops->plan(f->job, u_end, &a->start, &a->end, &idle, &a->err);
    a->idle = a->rc == MCDC_OK && idle;
    if (a->rc || idle) return;
    MCDC_ASSERT(a->start.kind == f->ops->pos_kind && a->end.kind == f->ops->pos_kind);
    a->planned = true;
    a->u = (mcdc_unit){.id = u->id + 1, .start = &a->start, .end = &a->end};
    a->slot = slot ^ 1;
    bool go = true;
    if (f->ops->prepare) a->rc = f->ops->prepare(f->job, a->slot, &a->u, &go, &a->err);
    if (a->rc) {
        f->ops->discard(f->job, a->slot);
        a->planned = false;
        return;
    }
    a->gate.published = false;
    atomic_store(&a->gate.abandoned, false);
    /* no thread (or the job said no): it is read after u, as without overlap */
    if (go && mcdc_thread_start(&a->thread, ahead_main, a) == 0) a->running = true;
}

/* After u's publish (ok: it succeeded): lets the read ahead go on, or
 * gives it up (u failed, the job stops); joins it. *next: the unit after u
 * stands planned (its positions in a), *read: and read, to be recorded and
 * published next; else nothing of it remains. Returns the read's failure,
 * or its planning's, when u was published and the job goes on (what the
 * run would have met after u). */
static int read_ahead_join(mcdc_frame *f, read_ahead *a, bool ok, bool *next, bool *read,
                           mcdc_error *err) {
    *next = *read = false;
    bool go = ok && !mcdc_ctx_stopping(f->cfg->ctx);
    if (a->running) {
        gate_open(&a->gate, go);
        pthread_join(a->thread, NULL);
        a->running = false;
        *read = go && a->rc == MCDC_OK;
    }
    if (a->planned && !*read) f->ops->discard(f->job, a->slot); /* what prepare left */
    *next = go && a->planned && a->rc == MCDC_OK;
    if (go && a->rc && err) *err = a->err;
    return go ? a->rc : MCDC_OK;
}

int mcdc_frame_run(const mcdc_frame_cfg *cfg, const mcdc_job_ops *ops, void *job,
                   mcdc_error *err) {
    MCDC_ASSERT(cfg && ops && ops->plan && cfg->target && cfg->app_id);
    /* run whole, or in halves (all three) */
    MCDC_ASSERT((ops->run != NULL) != (ops->read != NULL));
    MCDC_ASSERT((ops->read != NULL) == (ops->publish != NULL) &&
                (ops->read != NULL) == (ops->discard != NULL));
    MCDC_ASSERT(cfg->facts == NULL || (ops->facts && cfg->facts_app_id));
    MCDC_ASSERT(ops->pos_kind != MCDC_POS_NONE);
    MCDC_ASSERT(cfg->first_unit >= 0);
    mcdc_frame f = {.cfg = cfg, .ops = ops, .job = job};
    const mcdc_frame_role roles[2] = {
        {cfg->target, cfg->target_kind, cfg->target_role ? cfg->target_role : "target"},
        {cfg->facts, MCDC_KIND_FACTS, "facts table"}};
    int rc = mcdc_frame_check_roles(roles, 2, err);
    if (rc) return rc;
    if (cfg->ledger) {
        f.led = *cfg->ledger;
    } else {
        rc = mcdc_checkpoint_open(&f.ckpt, cfg->ctx->storage_env, cfg->checkpoint, &cfg->binding,
                                  ops->pos_kind, &f.fresh, err);
        if (rc) return rc;
        f.led = mcdc_checkpoint_ledger(f.ckpt);
    }
    f.fresh = f.led.ops->fresh(f.led.self);
    int64_t planned, committed;
    /* Positions: the last committed unit's end, and the unit's own. */
    mcdc_pos last_end = {0}, start = {0}, end = {0};
    rc = f.led.ops->last(f.led.self, &planned, &committed, err);
    if (rc == MCDC_OK) rc = load_position(&f, committed, &last_end, err);
    mcdc_unit u = {.id = committed + 1 > cfg->first_unit ? committed + 1 : cfg->first_unit};
    u.replay = rc == MCDC_OK && planned > committed;
    MCDC_ASSERT(rc != MCDC_OK || !u.replay || planned == u.id);
    if (rc == MCDC_OK && u.replay)
        rc = f.led.ops->read_plan(f.led.self, planned, &start, &end, err);
    u.start = &start;
    u.end = &end;
    if (rc == MCDC_OK) rc = check_integrity(&f, u.replay ? &u : NULL, err);
    /* No unit yet: the position recorded before unit 0, or the job's own
     * first one (bootstrap), which binds the checkpoint at once. */
    const mcdc_pos *recorded = f.led.ops->start ? f.led.ops->start(f.led.self) : NULL;
    if (rc == MCDC_OK && planned < 0 && recorded)
        rc = mcdc_pos_copy(&last_end, recorded, err);
    else if (rc == MCDC_OK && planned < 0 && ops->before_first) {
        rc = ops->before_first(job, &last_end, err);
        bool has = last_end.kind != MCDC_POS_NONE;
        MCDC_ASSERT(!has || last_end.kind == ops->pos_kind);
        if (rc == MCDC_OK && has && f.fresh && ops->check_fresh)
            rc = ops->check_fresh(job, &last_end, err);
        if (rc == MCDC_OK && has && f.led.ops->bind)
            rc = f.led.ops->bind(f.led.self, &last_end, err);
        if (rc == MCDC_OK && has) f.fresh = false;
    }
    /* A run killed between a unit's commit and its verdict left the verdict
     * behind: bring it up to the last committed unit now (only a committed
     * unit moves it: a bootstrap's start does not). */
    int64_t at_us;
    char at_lsn[32];
    if (rc == MCDC_OK && cfg->control_table && committed >= 0 &&
        last_end.kind != MCDC_POS_NONE && !u.replay && ops->position_time &&
        ops->position_time(job, &last_end, &at_us, at_lsn)) {
        mcdc_verdict v;
        advance_verdict(&f, at_us, at_lsn, &v);
    }
    int64_t units = 0;
    bool checked = true; /* the tables agree with the checkpoint as of now */
    int slot = 0;        /* the job's slot the unit is read into */
    /* the unit was planned (and read) while the one before published;
     * or that plan found nothing new (the next plan waits a poll) */
    bool next_planned = false, next_read = false, next_idle = false;
    read_ahead ra = {.f = &f};
    pthread_mutex_init(&ra.gate.mu, NULL);
    pthread_cond_init(&ra.gate.cv, NULL);
    while (rc == MCDC_OK && !mcdc_ctx_stopping(cfg->ctx)) {
        int64_t tick = mcdc_monotonic_us();
        if (next_planned) {
            /* planned (and read, when next_read) while the unit before
             * published: its plan is recorded now, after that unit's
             * commit marker (the ledger keeps one planned unit) */
            next_planned = false;
            rc = record_plan(&f, &u, checked, err);
            if (rc == MCDC_OK && !next_read) rc = ops->read(job, slot, &u, NULL, err);
            next_read = false;
            if (rc) {
                ops->discard(job, slot);
                break;
            }
        } else {
            if (!u.replay) {
                /* Nothing new when the unit before published: planning again
                 * at once would only ask the source once more (a caught-up
                 * stream's second max_lsn a batch); it waits a poll first. */
                bool idle = next_idle;
                next_idle = false;
                const mcdc_pos *last = last_end.kind != MCDC_POS_NONE ? &last_end : NULL;
                mcdc_pos_free(&start);
                mcdc_pos_free(&end);
                if (!idle) rc = ops->plan(job, last, &start, &end, &idle, err);
                /* Nothing new for a ledger without a unit yet: its first unit
                 * runs all the same, empty (mcdc_job_ops.empty_first). */
                if (rc == MCDC_OK && idle && u.id == 0 && ops->empty_first) {
                    mcdc_pos_free(&start);
                    mcdc_pos_free(&end);
                    rc = ops->empty_first(job, last, &start, &end, err);
                    idle = start.kind == MCDC_POS_NONE;
                    MCDC_ASSERT(rc != MCDC_OK || idle || end.kind != MCDC_POS_NONE);
                }
                if (rc) break;
                if (idle) {
                    if (cfg->stop_when_idle) break;
                    checked = false;
                    if (ops->idle_wait) ops->idle_wait(job);
                    mcdc_ctx_sleep_until(cfg->ctx, tick + cfg->idle_poll_ms * 1000);
                    continue;
                }
                MCDC_ASSERT(start.kind == ops->pos_kind && end.kind == ops->pos_kind);
                /* Cheap (the newest commits of each table): before every unit. */
                rc = record_plan(&f, &u, checked, err);
                if (rc) break;
            }
            if (ops->read) {
                rc = ops->read(job, slot, &u, NULL, err);
                if (rc) {
                    ops->discard(job, slot);
                    break;
                }
            }
        }
        /* The next unit, read while this one publishes (overlap). */
        read_ahead_start(&f, &u, slot, &end, units, &ra);
        rc = run_unit(&f, &u, slot, err);
        bool keep = false;
        int arc = read_ahead_join(&f, &ra, rc == MCDC_OK, &keep, &next_read, rc ? NULL : err);
        if (rc == MCDC_OK) rc = arc;
        if (rc) break;
        checked = false;
        /* the unit's end is where the next one starts */
        mcdc_pos_free(&last_end);
        last_end = end;
        memset(&end, 0, sizeof end);
        u.id++;
        u.replay = false;
        units++;
        next_idle = ra.idle;
        if (keep) {
            MCDC_ASSERT(ra.u.id == u.id);
            mcdc_pos_free(&start);
            start = ra.start;
            end = ra.end;
            memset(&ra.start, 0, sizeof ra.start);
            memset(&ra.end, 0, sizeof ra.end);
            slot = ra.slot;
            next_planned = true;
        }
        if ((cfg->max_units > 0 && units >= cfg->max_units) || cfg->one_unit) break;
        if (cfg->min_interval_ms > 0)
            mcdc_ctx_sleep_until(cfg->ctx, tick + cfg->min_interval_ms * 1000);
    }
    /* a unit read ahead and never recorded: a stop came after the unit
     * before it (nothing of it is planned, written or sent) */
    if (next_planned) ops->discard(job, slot);
    mcdc_pos_free(&ra.start);
    mcdc_pos_free(&ra.end);
    pthread_mutex_destroy(&ra.gate.mu);
    pthread_cond_destroy(&ra.gate.cv);
    mcdc_pos_free(&start);
    mcdc_pos_free(&end);
    mcdc_pos_free(&last_end);
    mcdc_table_close(f.control);
    mcdc_checkpoint_free(f.ckpt);
    return rc;
}
