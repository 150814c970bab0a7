/* mcdc_generation.c - stream generations and the re-snapshot after data
 * loss (see mcdc_generation.h). */
#include "mcdc_generation.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_facts.h"
#include "mcdc_frame.h"
#include "mcdc_offset.h"
#include "mcdc_snapfacts.h"
#include "mcdc_snapshot_job.h"
#include "mcdc_txn.h"

/* The state file is a few hundred bytes; anything larger is damage. */
#define STATE_BYTES_MAX (64 * 1024)

/* ---- the state file ------------------------------------------------------------- */

static int open_root(mcdc_storage **st, const mcdc_storage_env *env, const char *checkpoint,
                     mcdc_error *err) {
    return mcdc_storage_open_env(st, env, checkpoint, err);
}

static int corrupt(const char *checkpoint, const char *what, mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_CORRUPT,
                          "%s/%s %s: the generation state is damaged. Restore it from a backup; "
                          "or, if no re-snapshot ever ran for this checkpoint, delete it (the "
                          "stream is then in generation 0)",
                          checkpoint, MCDC_GENERATION_STATE_FILE, what);
}

static bool time_of(const json_t *j, int64_t *us) {
    const char *t = json_string_value(j);
    mcdc_error e = MCDC_ERROR_INIT;
    return t && *t && mcdc_parse_ts_us(t, strlen(t), us, &e) == MCDC_OK;
}

int mcdc_generation_read(mcdc_generation *g, const mcdc_storage_env *env, const char *checkpoint,
                         mcdc_error *err) {
    memset(g, 0, sizeof *g);
    mcdc_storage *st = NULL;
    mcdc_buf b = {0};
    int rc = open_root(&st, env, checkpoint, err);
    mcdc_error e = MCDC_ERROR_INIT;
    if (rc == MCDC_OK) {
        rc = mcdc_storage_get(st, MCDC_GENERATION_STATE_FILE, STATE_BYTES_MAX, &b, &e);
        if (rc == MCDC_E_NOTFOUND) rc = MCDC_OK; /* generation 0 */
        else if (rc && err) *err = e;
    }
    json_t *j = NULL;
    if (rc == MCDC_OK && b.len) {
        json_error_t je;
        j = json_loadb((const char *)b.data, b.len, 0, &je);
        json_t *n = json_object_get(j, "generation");
        if (!json_is_object(j) || !json_is_integer(n) || json_integer_value(n) < 0)
            rc = corrupt(checkpoint, "is not a JSON object with a generation number", err);
        else
            g->n = json_integer_value(n);
    }
    if (rc == MCDC_OK && g->n > 0) {
        json_t *s = json_pack("{s:O?, s:O?}", "lsn", json_object_get(j, "snapshot_lsn"),
                              "commit_ts", json_object_get(j, "commit_ts"));
        mcdc_error pe = MCDC_ERROR_INIT;
        if (mcdc_offset_parse(&g->snapshot, s, &pe) != MCDC_OK)
            rc = corrupt(checkpoint, "has no valid snapshot_lsn and commit_ts", err);
        json_decref(s);
    }
    if (rc == MCDC_OK && j) {
        g->has_at = time_of(json_object_get(j, "at"), &g->at_us);
        g->has_failed_at = time_of(json_object_get(j, "failed_at"), &g->failed_at_us);
        json_t *r = json_object_get(j, "recovering");
        if (r && !json_is_null(r)) {
            mcdc_error pe = MCDC_ERROR_INIT;
            g->recovering = true;
            if (mcdc_offset_parse(&g->recovering_from, r, &pe) != MCDC_OK)
                rc = corrupt(checkpoint, "has a \"recovering\" that is not an offset", err);
        }
    }
    json_decref(j);
    mcdc_buf_free(&b);
    mcdc_storage_free(st);
    return rc;
}

/* "2026-12-01T14:00:00+00:00": the reference writes an aware UTC time. */
static json_t *aware(int64_t us) {
    char t[40];
    mcdc_format_ts_us(us, 0, t);
    strcat(t, "+00:00");
    return json_string(t);
}

int mcdc_generation_write(const mcdc_generation *g, const mcdc_storage_env *env,
                          const char *checkpoint, mcdc_error *err) {
    MCDC_ASSERT(g->n >= 0);
    char ts[32];
    mcdc_offset_commit_text(&g->snapshot, ts);
    json_t *j = json_pack("{s:I}", "generation", (json_int_t)g->n);
    if (j && g->n > 0) {
        json_object_set_new(j, "snapshot_lsn", json_string(g->snapshot.lsn));
        json_object_set_new(j, "commit_ts", json_string(ts));
    }
    if (j && g->has_at) json_object_set_new(j, "at", aware(g->at_us));
    if (j && g->recovering) json_object_set_new(j, "recovering", mcdc_offset_json(&g->recovering_from));
    if (j && g->has_failed_at) json_object_set_new(j, "failed_at", aware(g->failed_at_us));
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_storage *st = NULL;
    int rc = open_root(&st, env, checkpoint, err);
    /* put: a reader sees the old state or the new one, never a mix. */
    if (rc == MCDC_OK) rc = mcdc_storage_put(st, MCDC_GENERATION_STATE_FILE, text, strlen(text), err);
    mcdc_storage_free(st);
    free(text);
    if (rc) mcdc_error_wrap(err, "writing %s/%s", checkpoint, MCDC_GENERATION_STATE_FILE);
    return rc;
}

int mcdc_generation_names(char **checkpoint, char **app_id, const char *base_checkpoint,
                          const char *base_app_id, int64_t n, mcdc_error *err) {
    MCDC_ASSERT(n >= 0);
    size_t cn = strlen(base_checkpoint) + 48, an = strlen(base_app_id) + 24;
    *checkpoint = mcdc_malloc(cn);
    *app_id = mcdc_malloc(an);
    if (*checkpoint == NULL || *app_id == NULL) {
        mcdc_free(*checkpoint);
        mcdc_free(*app_id);
        *checkpoint = *app_id = NULL;
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    size_t len = strlen(base_checkpoint);
    while (len > 1 && base_checkpoint[len - 1] == '/') len--;
    if (n == 0) snprintf(*checkpoint, cn, "%.*s", (int)len, base_checkpoint);
    else snprintf(*checkpoint, cn, "%.*s/_generations/%lld", (int)len, base_checkpoint, (long long)n);
    int rc = mcdc_txn_app_id(*app_id, an, MCDC_TXN_STREAM, base_app_id, n, NULL, err);
    if (rc) {
        mcdc_free(*checkpoint);
        mcdc_free(*app_id);
        *checkpoint = *app_id = NULL;
    }
    return rc;
}

/* ---- the recovery ------------------------------------------------------------------ */

/* The offset generation n has reached: its last committed unit's end, or
 * the start its checkpoint was bound with; *found false when neither. ci:
 * the capture instance the end records ("" when none). */
static int position_of(mcdc_offset *out, char ci[MCDC_IDENT_BYTES_MAX + 1], bool *found,
                       const mcdc_recovery *r, int64_t n, mcdc_error *err) {
    *found = false;
    ci[0] = 0;
    char *dir = NULL, *sink = NULL;
    int rc = mcdc_generation_names(&dir, &sink, r->checkpoint, r->app_id, n, err);
    mcdc_ckpt_binding b = r->binding;
    b.app_id = sink;
    mcdc_checkpoint *c = NULL;
    bool fresh = true;
    if (rc == MCDC_OK)
        rc = mcdc_checkpoint_open(&c, r->ctx->storage_env, dir, &b, MCDC_POS_OFFSET, &fresh, err);
    int64_t planned = -1, committed = -1;
    if (rc == MCDC_OK && !fresh) rc = mcdc_checkpoint_last(c, &planned, &committed, err);
    mcdc_pos start = {0}, end = {0};
    const mcdc_pos *at = NULL;
    if (rc == MCDC_OK && committed >= 0) {
        rc = mcdc_checkpoint_read_plan(c, committed, &start, &end, err);
        at = &end;
    } else if (rc == MCDC_OK && !fresh) {
        at = mcdc_checkpoint_start(c);
    }
    if (rc == MCDC_OK && at) {
        memset(out, 0, sizeof *out);
        mcdc_lsn_format(&at->offset.lsn, out->lsn);
        out->has_commit_ts = at->offset.has_ts;
        out->commit_us = at->offset.commit_us;
        snprintf(ci, MCDC_IDENT_BYTES_MAX + 1, "%s", at->offset.ci);
        *found = true;
    }
    if (rc) mcdc_error_wrap(err, "reading the position of generation %lld in %s", (long long)n, dir);
    mcdc_pos_free(&start);
    mcdc_pos_free(&end);
    mcdc_checkpoint_free(c);
    mcdc_free(dir);
    mcdc_free(sink);
    return rc;
}

static mcdc_snap_env snap_env(const mcdc_recovery *r) {
    return (mcdc_snap_env){.ctx = r->ctx,
                           .changes = r->changes,
                           .target = r->bronze,
                           .bronze = r->bronze_schema,
                           .num_partitions = r->num_partitions};
}

/* Where generation n's lost stream stood, when nothing is recorded in its
 * checkpoint: its snapshot (n > 0, or a bootstrap's), else startingLsn. */
static int first_position(mcdc_offset *out, bool *found, const mcdc_generation *g,
                          const mcdc_recovery *r, mcdc_error *err) {
    *found = false;
    if (g->n > 0) {
        *out = g->snapshot;
        *found = true;
        return MCDC_OK;
    }
    if (r->bootstrap) {
        mcdc_snap_env e = snap_env(r);
        return mcdc_snapshot_find(out, found, &e, err);
    }
    if (r->starting_lsn == NULL) return MCDC_OK;
    memset(out, 0, sizeof *out);
    mcdc_lsn l;
    int rc = mcdc_lsn_parse_cstr(&l, r->starting_lsn, err);
    if (rc == MCDC_OK) mcdc_lsn_format(&l, out->lsn);
    *found = rc == MCDC_OK;
    return rc;
}

static int write_event(const mcdc_recovery *r, const char *event, const char *sink, int64_t gen,
                       const mcdc_offset *at, int64_t rows, const mcdc_offset *from,
                       bool has_lost_to, int64_t lost_to_us, const char *detail, bool txn,
                       int64_t started_us, mcdc_error *err) {
    mcdc_facts_event ev = {.app_id = sink,
                           .target = r->target,
                           .event = event,
                           .rows = rows,
                           .lsn = at->lsn,
                           .has_commit_ts = at->has_commit_ts,
                           .commit_us = at->commit_us,
                           .detail = detail,
                           .has_lost_from = from->has_commit_ts,
                           .lost_from_us = from->commit_us,
                           .has_lost_to = has_lost_to,
                           .lost_to_us = lost_to_us,
                           .has_timing = started_us > 0,
                           .started_us = started_us,
                           .duration_ms = started_us > 0 ? (mcdc_now_utc_us() - started_us) / 1000 : 0};
    char events[MCDC_TXN_APP_ID_MAX];
    bool skipped;
    int rc = mcdc_txn_app_id(events, sizeof events, MCDC_TXN_EVENTS, r->app_id, 0, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_facts_write_event(r->facts, &ev, txn ? events : NULL, gen, &skipped, err);
    return rc;
}

/* The snapshot_open row of a full re-snapshot, written once its LSN is
 * recorded and before the table is read: until its resnapshot row, it holds
 * the mode (mcdc_snapfacts_lock). */
typedef struct {
    const mcdc_recovery *r;
    const char *sink;
    int64_t gen;
    const mcdc_offset *from;
    bool has_lost_to;
    int64_t lost_to_us;
} open_row;

/* Does an open row of a killed run of this re-snapshot stand for this one?
 * Its full open of the generation that did not complete, at or below the
 * stamp, not passed by CDC cleanup (one that cleanup passed can never
 * complete, and readers no longer count it: a new row then). The completion
 * at this run's LSN closes it, so readers see one open snapshot of the
 * generation, then its resnapshot row. */
static int open_stands(const open_row *o, const mcdc_offset *stamp, bool *stands,
                       mcdc_error *err) {
    *stands = false;
    mcdc_snapfacts sf;
    int rc = mcdc_snapfacts_load(&sf, o->r->facts, o->r->target, NULL, o->r->app_id, err);
    bool done = true;
    const mcdc_snap_row *prev = rc ? NULL : mcdc_snapfacts_opened(&sf, o->sink, &done);
    bool gone = false;
    if (prev && !done && strcmp(mcdc_snap_mode(prev), "full") == 0 &&
        strcmp(prev->min_lsn, stamp->lsn) <= 0) {
        rc = mcdc_snapshot_purged(o->r->changes, prev->min_lsn, &gone, err);
        *stands = rc == MCDC_OK && !gone;
    }
    if (rc == MCDC_OK && *stands)
        mcdc_log(MCDC_LOG_INFO, "re-snapshot of generation %lld: the snapshot_open row a killed "
                                "run wrote at %s stands for this one (stamped %s)",
                 (long long)o->gen, prev->min_lsn, stamp->lsn);
    mcdc_snapfacts_free(&sf);
    return rc;
}

static int write_open(void *ctx, const mcdc_offset *stamp, mcdc_error *err) {
    open_row *o = ctx;
    bool stands = false;
    int rc = open_stands(o, stamp, &stands, err);
    if (rc || stands) return rc;
    json_t *d = mcdc_snap_open_detail("full", "resnapshot", o->gen, o->from->has_commit_ts,
                                      o->from->commit_us, o->has_lost_to, o->lost_to_us);
    char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    rc = detail ? write_event(o->r, "snapshot_open", o->sink, o->gen, stamp, 0, o->from,
                              o->has_lost_to, o->lost_to_us, detail, false, 0, err)
                : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    free(detail);
    return rc;
}

int mcdc_generation_recover(mcdc_generation *g, const mcdc_recovery *r, bool *recovered,
                            mcdc_error *err) {
    MCDC_ASSERT(g && r && r->facts && recovered);
    *recovered = false;
    int64_t n = g->n;
    /* 1. The position of the live generation. */
    mcdc_offset start;
    char read_ci[MCDC_IDENT_BYTES_MAX + 1] = ""; /* the instance the position records */
    bool found = false;
    int rc = MCDC_OK;
    if (g->recovering) {
        start = g->recovering_from;
        found = true;
    } else {
        rc = position_of(&start, read_ci, &found, r, n, err);
        if (rc == MCDC_OK && !found) rc = first_position(&start, &found, g, r, err);
    }
    if (rc || !found) return rc;
    mcdc_lsn max, low;
    rc = mcdc_changes_max_lsn(r->changes, &max, err);
    mcdc_lsn at;
    if (rc == MCDC_OK) rc = mcdc_lsn_parse_cstr(&at, start.lsn, err);
    if (rc || mcdc_lsn_cmp(&max, &at) <= 0) return rc; /* nothing to read yet */
    bool lost = false;
    rc = mcdc_snapshot_purged_after(r->changes, start.lsn, read_ci, &lost, err);
    if (rc || !lost) return rc;
    /* the min_lsn of the instance the stream reads after its position (the
     * newer one once it read past its start), as the purge check decided */
    mcdc_lsn after;
    rc = mcdc_lsn_increment(&after, &at, err);
    if (rc == MCDC_OK) rc = mcdc_changes_min_lsn_at(r->changes, &after, read_ci, &low, err);
    char low_text[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(&low, low_text);
    int64_t lost_to_us = 0;
    bool has_lost_to = false;
    if (rc == MCDC_OK) rc = mcdc_changes_commit_time(r->changes, &low, &lost_to_us, &has_lost_to, err);
    if (rc) return rc;
    char *next_dir = NULL, *next_sink = NULL;
    rc = mcdc_generation_names(&next_dir, &next_sink, r->checkpoint, r->app_id, n + 1, err);
    if (rc) return rc;
    /* 2. A snapshot a cut-short recovery took already: newer than the
     * position and not purged itself. */
    mcdc_offset done;
    memset(&done, 0, sizeof done);
    bool reuse = false;
    if (!r->chunked) {
        mcdc_snap_env e = snap_env(r);
        rc = mcdc_snapshot_find_whole(&done, &reuse, &e, err);
        bool gone = false;
        if (rc == MCDC_OK && reuse) reuse = strcmp(done.lsn, start.lsn) > 0;
        if (rc == MCDC_OK && reuse) rc = mcdc_snapshot_purged(r->changes, done.lsn, &gone, err);
        if (gone) reuse = false;
    } else {
        mcdc_snapfacts sf;
        rc = mcdc_snapfacts_load(&sf, r->facts, r->target, NULL, r->app_id, err);
        bool completed;
        const mcdc_snap_row *o = rc ? NULL : mcdc_snapfacts_opened(&sf, next_sink, &completed);
        if (o && strcmp(mcdc_snap_mode(o), "chunked") == 0) {
            reuse = true;
            memset(&done, 0, sizeof done);
            snprintf(done.lsn, sizeof done.lsn, "%s", o->min_lsn);
            done.has_commit_ts = o->has_min_ts;
            done.commit_us = o->min_ts_us;
        }
        mcdc_snapfacts_free(&sf);
    }
    char what[512];
    snprintf(what, sizeof what,
             "capture instance %s: CDC no longer holds the changes after %s that the stream has "
             "not read (min_lsn is %s): cleanup purged them",
             mcdc_changes_capture_instance(r->changes), start.lsn, low_text);
    /* The re-snapshot row of a later generation than n + 1 must not be in
     * the facts (the frame's check of a record written once): if it is,
     * this state file is older than they are, and the generation the
     * stream would enter has run before. */
    char events[MCDC_TXN_APP_ID_MAX], state[256];
    snprintf(state, sizeof state, "the generation state of checkpoint %s (generation %lld)",
             r->checkpoint, (long long)n);
    if (rc == MCDC_OK)
        rc = mcdc_txn_app_id(events, sizeof events, MCDC_TXN_EVENTS, r->app_id, 0, NULL, err);
    if (rc == MCDC_OK)
        rc = mcdc_frame_check_once(r->facts, "facts table", events, n + 1, state, NULL, err);
    /* The anti-loop rule: a second loss soon after the last re-snapshot
     * (or a failed one) means the stream cannot keep up. */
    int64_t now = mcdc_now_utc_us();
    bool has_last = g->has_failed_at || (n > 0 && g->has_at);
    int64_t last = g->has_failed_at ? g->failed_at_us : g->at_us;
    if (rc == MCDC_OK && !reuse && has_last &&
        (double)(now - last) < r->interval_days * 86400e6) {
        char t[32];
        mcdc_format_ts_us(last, 0, t);
        rc = mcdc_error_set(err, MCDC_E_DATALOSS,
                            "%s, and the last re-snapshot (or a failed one) was at %s UTC, less "
                            "than --resnapshot-interval-days=%g ago. The stream does not keep up "
                            "with the CDC retention, or stops for longer than it: fix that, then "
                            "rerun with a smaller --resnapshot-interval-days to re-snapshot now",
                            what, t, r->interval_days);
    }
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_WARN, "%s. Re-snapshotting %s (%s) into generation %lld, app id %s",
                 what, r->target, r->chunked ? "chunked" : "full", (long long)(n + 1), next_sink);
    /* 3. A cut-short recovery resumes from what it found. */
    mcdc_generation cur = *g;
    cur.recovering = true;
    cur.recovering_from = start;
    if (rc == MCDC_OK) rc = mcdc_generation_write(&cur, r->ctx->storage_env, r->checkpoint, err);
    /* 4. The snapshot of the next generation. */
    mcdc_offset snap = done;
    if (rc == MCDC_OK && r->chunked && !reuse) {
        if (r->open_chunked == NULL)
            rc = mcdc_error_set(err, MCDC_E_UNSUPPORTED, "no chunked snapshot can be opened here");
        else
            rc = r->open_chunked(r->open_ctx, next_sink, n + 1, &start, has_lost_to, lost_to_us,
                                 &snap, err);
    } else if (rc == MCDC_OK && !r->chunked) {
        int64_t rows = -1, started = mcdc_now_utc_us();
        if (!reuse) {
            open_row o = {.r = r, .sink = next_sink, .gen = n + 1, .from = &start,
                          .has_lost_to = has_lost_to, .lost_to_us = lost_to_us};
            mcdc_snap_env e = snap_env(r);
            rc = mcdc_snapshot_append(&snap, &rows, &e, write_open, &o, err);
        }
        bool gone = false;
        if (rc == MCDC_OK) rc = mcdc_snapshot_purged(r->changes, snap.lsn, &gone, err);
        if (rc == MCDC_OK && gone) {
            cur.has_failed_at = true;
            cur.failed_at_us = mcdc_now_utc_us();
            mcdc_generation_write(&cur, r->ctx->storage_env, r->checkpoint, NULL);
            rc = mcdc_error_set(err, MCDC_E_DATALOSS,
                                "%s. The re-snapshot at %s took longer than the CDC retention, "
                                "so the changes after it are gone too: keep CDC's retention "
                                "longer, read faster (numPartitions), or use --snapshot chunked, "
                                "which reads next to the stream and has no such limit; then rerun "
                                "with --resnapshot-interval-days 0",
                                what, snap.lsn);
        }
        if (rc == MCDC_OK)
            rc = write_event(r, "resnapshot", next_sink, n + 1, &snap, rows, &start, has_lost_to,
                             lost_to_us, NULL, true, reuse ? 0 : started, err);
    }
    if (rc == MCDC_OK && mcdc_ctx_crash(r->ctx, "before_generation_state", n + 1))
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed before the generation state (test hook)");
    /* 5. The commit point. */
    mcdc_generation next = {.n = n + 1, .snapshot = snap, .has_at = true, .at_us = mcdc_now_utc_us()};
    if (rc == MCDC_OK) rc = mcdc_generation_write(&next, r->ctx->storage_env, r->checkpoint, err);
    if (rc == MCDC_OK) {
        *g = next;
        *recovered = true;
        mcdc_log(MCDC_LOG_INFO, "%s streams generation %lld (app id %s) from %s", r->target,
                 (long long)next.n, next_sink, snap.lsn);
    }
    mcdc_free(next_dir);
    mcdc_free(next_sink);
    return rc;
}
