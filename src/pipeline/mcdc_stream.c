/*
 * mcdc_stream.c - the stream (the reference's stream(...).to_delta(...)):
 * one job on the frame (mcdc_frame.h). Its unit is a micro-batch, its
 * position the offset {"lsn", "commit_ts"} of the last processed commit.
 *
 *   plan    end = min(max_lsn [availableNow: max_lsn at start],
 *                     the maxCommitsPerBatch-th commit after start,
 *                     just before a newer capture instance's start S when
 *                     the stream's schema does not hold what it captures)
 *   run     the batch's pieces, one per capture instance it reads (cut at
 *           each newer instance's S), its DDL classified before anything
 *           is read; per piece the retention guard, then commit-aligned
 *           ranges read in parallel (a connection each) into bronze
 *   facts   the micro-batch row; data_skipped, schema_change and
 *           capture_instance_switched rows
 *
 * run comes in two halves on the frame (read: plan the pieces, read them
 * into the batch's slot and its appender; publish: bronze's commit), so
 * that with overlapBatches the next batch is read while one publishes
 * (mcdc_frame_cfg.overlap). A batch read ahead reaches switch_planned and
 * switch_read before its plan is recorded; a kill there leaves nothing of
 * it.
 *
 * The position also records the capture instance the batch read last
 * ("capture_instance"): a restart follows it when the configured instance
 * is gone, and a checkpoint bound to the older instance accepts the newer
 * one's name (reference §2.5).
 *
 * Crash points beside the frame's (mcdc_context.h: MCDC_CRASH_AT), on the
 * batch that reads a newer capture instance from its start: switch_planned
 * (planned, nothing read), switch_read (read, bronze not committed),
 * switch_committed (bronze committed, facts not), switch_done (all
 * committed, the next batch not planned).
 *
 * Snapshot on switch (snapshot_on_switch, reference §2.5 and ADR 0023):
 * once the batch that first read a newer instance is committed, and at the
 * start of every run (a run killed in between owes it), the facts say
 * whether the live generation's newest capture_instance_switched row has
 * its snapshot: a snapshot_open naming its batch in switch_batch_id that
 * is chunked, or completed. If not, full reads the whole table into bronze
 * (snapshot_open, the rows, a bootstrap row; rows found in bronze at the
 * open's LSN are not read again) and chunked opens one at S for backfill.
 * Its crash points (unit: the switch batch): switch_snapshot_opened (the
 * open written, nothing read; a chunked one's plans row only),
 * during_snapshot (full: reading), switch_snapshot_read (full: rows
 * committed, no bootstrap row), switch_snapshot_done (all written).
 */
#include "mcdc_stream.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcdc_cfg.h"
#include "mcdc_changes.h"
#include "mcdc_facts.h"
#include "mcdc_fanin.h"
#include "mcdc_follow.h"
#include "mcdc_frame.h"
#include "mcdc_generation.h"
#include "mcdc_lake.h"
#include "mcdc_lsn.h"
#include "mcdc_offset.h"
#include "mcdc_progress.h"
#include "mcdc_runtime.h"
#include "mcdc_snapfacts.h"
#include "mcdc_snapshot_job.h"
#include "mcdc_tables.h"
#include "mcdc_txn.h"

/* ---- offsets ---------------------------------------------------------------
 * The stream's position (mcdc_position.h's OFFSET): the last processed
 * commit, its UTC commit time (reference offset contract) and the capture
 * instance read up to it. */
typedef mcdc_pos_offset offset_t;

/* An offset as the frame's position. */
static void pos_of(mcdc_pos *p, const offset_t *o) {
    memset(p, 0, sizeof *p);
    p->kind = MCDC_POS_OFFSET;
    p->offset = *o;
}

/* ---- the handle ------------------------------------------------------------ */
/* A batch reads at most one piece per capture instance of its table, so
 * at most this many gaps. */
#define MCDC_STREAM_SKIPS_MAX MCDC_TABLE_INSTANCES_MAX

/* A batch from its read to its facts row and report: two slots, so that
 * one batch is read while the one before publishes (overlapBatches). */
typedef struct stream_unit {
    mcdc_unit_stats st;
    mcdc_unit_metrics fm;
    int64_t started_us, t0_us;
    offset_t start, end;
    mcdc_facts_skip skips[MCDC_STREAM_SKIPS_MAX]; /* failOnDataLoss=false: a piece's gap each */
    int n_skips;
    bool possible_loss;
    mcdc_facts_skip possible;
    mcdc_changes_batch batch;  /* its pieces and events (schema_change, switches) */
    mcdc_reader_metrics *rm;   /* every range's read metrics, folded at the read's end */
    int n_rm, cap_rm;
    mcdc_lsn proven_empty_to;  /* the stream's when the batch was planned */
    json_t *warnings;          /* for its facts row (owned) */
    mcdc_appender *app;        /* its bronze files, not committed yet (owned) */
    int encoders;              /* encoder permits its appender holds */
} stream_unit;

struct mcdc_stream {
    mcdc_ctx ctx;
    /* The accounting its allocations are charged to, bound on every
     * thread while it is created, run and freed (mcdc_runtime.h). */
    mcdc_alloc_acct *acct;
    /* Its database's shared probe (a runtime's, continuous triggers; set
     * and cleared under caught_up_mu, which mcdc_stream_caught_up reads it
     * under), and when it last planned a batch (monotonic us). */
    mcdc_db_probe *probe;
    int64_t last_plan_us;
    /* The last plan was idle on the probe's word: the frame's idle wait
     * sleeps in the probe (job_idle_wait). The frame's thread's. */
    bool probe_idle;
    /* The newest max_lsn the probe found nothing past the stream's
     * position up to (zero: none since its last plan), for its host's lag
     * (mcdc_stream_caught_up); under caught_up_mu. While it sleeps in the
     * probe, the probe's later rounds prove more (idle_from: the position
     * they are about; has_idle_from false: none since its last plan). */
    pthread_mutex_t caught_up_mu;
    mcdc_lsn caught_up;
    mcdc_lsn idle_from;
    bool has_idle_from;
    /* What caught_up was when the current batch was planned: its change
     * table provably has no row in (start, proven_empty_to] (zero: no such
     * knowledge), so CDC cleanup up to there lost it nothing. */
    mcdc_lsn proven_empty_to;
    mcdc_stream_cfg cfg;      /* strings point into `strings` */
    char *strings[8];         /* owned copies of the cfg's strings */
    const mcdc_opts *opts;    /* borrowed */
    char *target_path, *facts_path; /* canonical locations (owned) */
    mcdc_ckpt_lock *held;     /* the checkpoint's hold for the run (owned by run) */
    /* The live generation (mcdc_generation.h): its checkpoint directory and
     * sink app id, the one its commits and facts rows carry. */
    mcdc_generation gen;
    char *gen_checkpoint;
    char sink_id[MCDC_TXN_APP_ID_MAX];
    char facts_app_id[MCDC_TXN_APP_ID_MAX];
    /* While running: */
    mcdc_changes *changes;
    mcdc_schema *bronze_schema;
    mcdc_table *bronze, *facts;
    int num_partitions;
    mcdc_lsn ceiling;
    bool has_ceiling;
    mcdc_report_fn report;
    void *report_ctx;
    mcdc_log_sink sink;       /* stream_log */
    pthread_mutex_t warnings_mu;
    json_t *warnings;         /* the list a warning goes to now: the unit read
                                 last's (borrowed), NULL between units */
    json_t *pending;          /* logged between units, for the next one's row */
    /* The batches: read into a slot (the frame's), published from it; pub
     * is the one publishing (its facts and done). */
    stream_unit units[2];
    stream_unit *pub;
    /* startingLsn resolved by this run while no batch is committed: latest
     * is max_lsn when the run first planned, not at each idle trigger (a
     * change committed after the start would be skipped as "before latest"
     * until a batch committed, which an idle table never gets). */
    bool has_initial;
    offset_t initial;
    bool latest_was_empty; /* latest found no change yet: read as earliest */
    /* The checkpoint's capture instance when it differs from the one
     * configured and names the table the stream follows (owned). */
    char *ci_alias;
    /* snapshot_on_switch: the facts may owe a snapshot on switch (at the
     * start of a run, and after a batch that switched). */
    bool switch_check;
};

static int snapshot_on_switch(mcdc_stream *s, mcdc_error *err);

/* The stream's sink, on every thread it runs: messages go to the host's
 * log function (or stderr); a unit's warnings also go to its facts row. */
static void add_warning(json_t *list, const char *msg) {
    if (list == NULL || json_array_size(list) >= 100) return;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) if (strcmp(json_string_value(v), msg) == 0) return;
    json_array_append_new(list, json_string(msg));
}

/* Warnings logged outside a unit (starting up, planning: a fixed UTC
 * offset, unknown options...) wait in `pending` for the next unit's row,
 * as the reference's driver passes its warnings to the next batch. */
static void stream_log(void *user, mcdc_log_level level, const char *msg) {
    mcdc_stream *s = user;
    if (level == MCDC_LOG_WARN) {
        pthread_mutex_lock(&s->warnings_mu);
        add_warning(s->warnings ? s->warnings : s->pending, msg);
        pthread_mutex_unlock(&s->warnings_mu);
    }
    if (s->cfg.log_fn) s->cfg.log_fn(s->cfg.log_user, level, msg);
    else mcdc_log_stderr(level, msg);
}

/* ---- plan ------------------------------------------------------------------ */

/* startingLsn for a fresh checkpoint. With "earliest" and a min_lsn of zero,
 * capture has not processed the enable of the instance yet: its change table
 * is empty and its first LSN unknown, so the start waits (*idle) rather than
 * guess an LSN that the retention guard would then call purged. */
static int initial_offset(mcdc_stream *s, offset_t *start, bool *idle, mcdc_error *err) {
    const char *starting = NULL;
    mcdc_start_kind kind = mcdc_opt_starting_lsn(s->opts, &starting);
    memset(start, 0, sizeof *start);
    *idle = false;
    int rc = MCDC_OK;
    if (kind == MCDC_START_LATEST && !s->latest_was_empty) {
        rc = mcdc_changes_initial(s->changes, starting, &start->lsn, err);
        if (rc) return rc;
        /* No change captured yet (max_lsn NULL) and capture has not reached
         * the instance: every change comes after this start, so latest reads
         * as earliest once the instance has one (a zero position would read
         * from LSN 1, below min_lsn: DataLossError). */
        if (mcdc_lsn_is_zero(&start->lsn)) s->latest_was_empty = true;
    }
    if (kind == MCDC_START_EARLIEST || s->latest_was_empty) {
        mcdc_lsn min;
        rc = mcdc_changes_min_lsn(s->changes, &min, err);
        if (rc) return rc;
        if (mcdc_lsn_is_zero(&min)) {
            *idle = true;
            return MCDC_OK;
        }
        rc = mcdc_changes_initial(s->changes, "earliest", &start->lsn, err);
    } else if (kind == MCDC_START_LSN) {
        rc = mcdc_changes_initial(s->changes, starting, &start->lsn, err);
    }
    if (rc) return rc;
    bool found = false;
    if (!mcdc_lsn_is_zero(&start->lsn) &&
        (rc = mcdc_changes_commit_time(s->changes, &start->lsn, &start->commit_us, &found, err)))
        return rc;
    start->has_ts = found;
    return MCDC_OK;
}

/* The probe found nothing past from up to max (behind: from is behind max). */
static void set_caught_up(mcdc_stream *s, const mcdc_lsn *from, const mcdc_lsn *max,
                          bool behind) {
    pthread_mutex_lock(&s->caught_up_mu);
    if (behind) s->caught_up = *max;
    s->idle_from = *from;
    s->has_idle_from = true;
    pthread_mutex_unlock(&s->caught_up_mu);
}

/* The stream leaves its probe (refused, or its run ends). */
static void leave_probe(mcdc_stream *s) {
    pthread_mutex_lock(&s->caught_up_mu);
    mcdc_db_probe *p = s->probe;
    s->probe = NULL;
    pthread_mutex_unlock(&s->caught_up_mu);
    mcdc_runtime_probe_leave(s->cfg.runtime, p, s);
}

/* caught_up, or later: the probe's rounds since the stream's last poll
 * (it sleeps in the probe meanwhile). Under caught_up_mu. */
static mcdc_lsn caught_up_locked(mcdc_stream *s) {
    mcdc_lsn l = s->caught_up, later;
    if (s->has_idle_from && mcdc_runtime_probe_proven(s->probe, s, &s->idle_from, &later) &&
        mcdc_lsn_cmp(&later, &s->idle_from) > 0 && mcdc_lsn_cmp(&later, &l) > 0)
        l = later;
    return l;
}

bool mcdc_stream_caught_up(mcdc_stream *s, char lsn[24]) {
    if (s == NULL || lsn == NULL) return false;
    pthread_mutex_lock(&s->caught_up_mu);
    mcdc_lsn l = caught_up_locked(s);
    pthread_mutex_unlock(&s->caught_up_mu);
    if (mcdc_lsn_is_zero(&l)) return false;
    _Static_assert(MCDC_LSN_TEXT_LEN < 24, "an LSN's text fits");
    mcdc_lsn_format(&l, lsn);
    return true;
}

/* The shared probe's answer for a stream past its first batch: *idle when
 * its change table has no row past start (it plans nothing, unless it has
 * planned nothing for MCDC_PROBE_IDLE_ADVANCE_MS while the database moved:
 * then it plans, and its position keeps up with the database), else *max,
 * the database's max_lsn, from the round. *known false: no answer (the
 * stream has no probe, or reads an older instance than the probe asks). */
static int probe_poll(mcdc_stream *s, const offset_t *start, mcdc_lsn *max, bool *known,
                      bool *idle, mcdc_error *err) {
    *known = *idle = s->probe_idle = false;
    if (s->probe == NULL || (start->ci[0] && strcmp(start->ci, mcdc_changes_capture_instance(s->changes))))
        return MCDC_OK;
    bool moved = false, usable = true;
    int rc = mcdc_runtime_probe_poll(s->cfg.runtime, s->probe, s, s->changes, &start->lsn, max,
                                     &moved, &usable, err);
    if (rc || !usable) return rc; /* refused: it polls on its own (the probe is retried) */
    *known = true;
    bool behind = mcdc_lsn_cmp(&start->lsn, max) < 0;
    bool due = behind && mcdc_monotonic_us() - s->last_plan_us >=
                             (int64_t)MCDC_PROBE_IDLE_ADVANCE_MS * 1000;
    *idle = s->probe_idle = !moved && !due;
    if (*idle) set_caught_up(s, &start->lsn, max, behind);
    return MCDC_OK;
}

/* After an idle plan on the probe's word (the default trigger): sleeps in
 * the probe until a round finds rows for the stream, it is due to keep up
 * with the database (probe_poll), or a stop; the probe's driver wakes each
 * slot to run the round (mcdc_runtime_probe_wait). */
static void job_idle_wait(void *job) {
    mcdc_stream *s = job;
    /* processingTime sleeps out its interval anyway: no round of its own */
    if (s->probe == NULL || !s->probe_idle || s->cfg.trigger != MCDC_TRIGGER_DEFAULT) return;
    mcdc_runtime_probe_wait(s->cfg.runtime, s->probe, s,
                            s->last_plan_us + (int64_t)MCDC_PROBE_IDLE_ADVANCE_MS * 1000, &s->ctx);
}

/* Where the next batch ends, or *idle when nothing is new. known_max: the
 * database's max_lsn when the probe read it (NULL: read it here). */
static int next_end(mcdc_stream *s, const offset_t *start, const mcdc_lsn *known_max,
                    offset_t *end, bool *idle, mcdc_error *err) {
    mcdc_lsn upper;
    int rc = known_max ? MCDC_OK : mcdc_changes_max_lsn(s->changes, &upper, err);
    if (rc) return rc;
    if (known_max) upper = *known_max;
    if (s->has_ceiling && mcdc_lsn_cmp(&s->ceiling, &upper) < 0) upper = s->ceiling;
    *idle = mcdc_lsn_cmp(&upper, &start->lsn) <= 0;
    if (*idle) return MCDC_OK;
    int64_t max_commits = mcdc_opt_max_commits_per_batch(s->opts);
    if (max_commits > 0 && s->cfg.trigger != MCDC_TRIGGER_ONCE) {
        mcdc_lsn nth;
        bool found;
        rc = mcdc_changes_nth_commit_after(s->changes, &start->lsn, max_commits, &nth, &found, err);
        if (rc) return rc;
        if (found && mcdc_lsn_cmp(&nth, &upper) < 0) upper = nth;
    }
    end->lsn = upper;
    bool found = false;
    rc = mcdc_changes_commit_time(s->changes, &upper, &end->commit_us, &found, err);
    end->has_ts = found;
    return rc;
}

static int job_plan(void *job, const mcdc_pos *last_end, mcdc_pos *start_p, mcdc_pos *end_p,
                    bool *idle, mcdc_error *err) {
    mcdc_stream *s = job;
    offset_t start, end;
    int rc = MCDC_OK;
    *idle = false;
    memset(&end, 0, sizeof end);
    /* The snapshot a switch batch owes comes before the next batch. */
    if (s->switch_check && (rc = snapshot_on_switch(s, err)) != MCDC_OK) return rc;
    if (last_end == NULL && s->has_initial) {
        start = s->initial;
    } else if (last_end == NULL) {
        rc = initial_offset(s, &start, idle, err);
        if (rc == MCDC_OK && !*idle) {
            s->initial = start;
            s->has_initial = true;
        }
    } else {
        start = last_end->offset;
    }
    if (rc || *idle) return rc;
    mcdc_lsn max;
    bool known = false;
    if (last_end != NULL && (rc = probe_poll(s, &start, &max, &known, idle, err)) != MCDC_OK)
        return rc;
    if (*idle) return MCDC_OK;
    rc = next_end(s, &start, known ? &max : NULL, &end, idle, err);
    if (rc || *idle) return rc;
    s->last_plan_us = mcdc_monotonic_us();
    mcdc_runtime_probe_busy(s->probe, s); /* the rounds are driven by a stream still idle */
    /* its batch's end says it from now on; the batch keeps what was proven */
    pthread_mutex_lock(&s->caught_up_mu);
    s->proven_empty_to = last_end != NULL ? caught_up_locked(s) : mcdc_lsn_zero();
    s->caught_up = mcdc_lsn_zero();
    s->has_idle_from = false;
    pthread_mutex_unlock(&s->caught_up_mu);
    /* A newer capture instance whose columns the schema lacks: this batch
     * ends just before its start, the next one stops there. */
    bool cut = false;
    rc = mcdc_changes_follow_end(s->changes, &start.lsn, start.ci, &end.lsn, &cut, end.ci, err);
    if (rc == MCDC_OK && cut)
        rc = mcdc_changes_commit_time(s->changes, &end.lsn, &end.commit_us, &end.has_ts, err);
    if (rc) return rc;
    pos_of(start_p, &start);
    pos_of(end_p, &end);
    return MCDC_OK;
}

/* A new checkpoint's batch 0 when nothing is new: from where the stream
 * starts to the same offset, reading nothing (mcdc_job_ops.empty_first).
 * The offset names the capture instance a batch ending there would. */
static int job_empty_first(void *job, const mcdc_pos *last_end, mcdc_pos *start_p,
                           mcdc_pos *end_p, mcdc_error *err) {
    mcdc_stream *s = job;
    offset_t start;
    int rc = MCDC_OK;
    if (last_end) start = last_end->offset;
    else if (s->has_initial) start = s->initial;
    else return MCDC_OK; /* no position yet (capture has not reached the instance) */
    offset_t end = start;
    bool cut = false;
    if (rc == MCDC_OK)
        rc = mcdc_changes_follow_end(s->changes, &start.lsn, start.ci, &end.lsn, &cut, end.ci,
                                     err);
    if (rc) return rc;
    MCDC_ASSERT(!cut && mcdc_lsn_cmp(&end.lsn, &start.lsn) == 0);
    pos_of(start_p, &start);
    pos_of(end_p, &end);
    return MCDC_OK;
}

/* The largest _start_lsn of the target's change rows by file statistics.
 * Files of snapshot rows only (operation 0) do not count: a chunked
 * snapshot's waves are stamped past its S, where a new generation starts. */
typedef struct {
    char *max;
    size_t cap;
    bool rows, known;
} max_acc;

static int change_file_max(void *ctx, const char *stats, mcdc_error *err) {
    (void)err;
    max_acc *a = ctx;
    json_error_t je;
    json_t *j = stats ? json_loads(stats, 0, &je) : NULL;
    json_t *mins = json_object_get(j, "minValues"), *maxs = json_object_get(j, "maxValues");
    json_int_t records = json_integer_value(json_object_get(j, "numRecords"));
    json_t *op_lo = json_object_get(mins, "_operation"), *op_hi = json_object_get(maxs, "_operation");
    bool snapshot_only = json_is_integer(op_lo) && json_is_integer(op_hi) &&
                         json_integer_value(op_lo) == 0 && json_integer_value(op_hi) == 0;
    const char *m = json_string_value(json_object_get(maxs, "_start_lsn"));
    if (j == NULL || !json_is_integer(json_object_get(j, "numRecords"))) {
        a->rows = true; /* a file without statistics: anything */
        a->known = false;
    } else if (records > 0 && !snapshot_only) {
        a->rows = true;
        if (m == NULL || strlen(m) >= a->cap) a->known = false;
        else if (strcmp(m, a->max) > 0) snprintf(a->max, a->cap, "%s", m);
    }
    json_decref(j);
    return MCDC_OK;
}

static int change_rows_max_lsn(mcdc_table *t, char *max, size_t cap, bool *rows, bool *known,
                               mcdc_error *err) {
    max[0] = 0;
    max_acc a = {.max = max, .cap = cap, .known = true};
    int rc = mcdc_table_each_file_stats(t, change_file_max, &a, err);
    *rows = a.rows;
    *known = a.known;
    return rc;
}

/* A new checkpoint on a target that already holds change rows past its
 * start would write them a second time (the advice "new app id, new
 * checkpoint" followed on the same target). Refused unless the rows all lie
 * at or before the start (startingLsn set past them, or a snapshot at it). */
static int job_check_fresh(void *job, const mcdc_pos *start_p, mcdc_error *err) {
    mcdc_stream *s = job;
    const offset_t *start = &start_p->offset;
    char max[64], from[MCDC_LSN_TEXT_LEN + 1];
    bool rows, known;
    int rc = change_rows_max_lsn(s->bronze, max, sizeof max, &rows, &known, err);
    if (rc || !rows) return rc;
    mcdc_lsn_format(&start->lsn, from);
    /* LSN texts are fixed width: string order is LSN order. */
    if (known && strlen(max) == MCDC_LSN_TEXT_LEN && strcmp(max, from) <= 0) return MCDC_OK;
    return mcdc_error_set(
        err, MCDC_E_MISMATCH,
        "target %s already holds change rows up to _start_lsn %s (written under other app "
        "ids), and this new checkpoint %s would start after %s: every change in between would "
        "be in the target twice. Nothing was written. Stream into a new (or rebuilt) target; "
        "or, to continue after the rows it holds, set startingLsn to %s",
        s->cfg.target, known && max[0] ? max : "(unknown: files without statistics)",
        s->cfg.checkpoint, from, known && max[0] ? max : "the target's largest _start_lsn");
}

/* ---- run --------------------------------------------------------------------- */

typedef struct {
    mcdc_changes *changes;
    const mcdc_lsn_range *range;
    mcdc_reader_metrics metrics;
} range_reader;

static int read_range(void *arg, mcdc_batch_fn put, void *put_ctx, mcdc_error *err) {
    range_reader *r = arg;
    return mcdc_changes_read(r->changes, r->range, put, put_ctx, &r->metrics, err);
}

/* Bronze's userMetadata (reference §2.3.2); the frame adds the binding. */
static json_t *bronze_meta(const mcdc_stream *s, const stream_unit *w, int64_t batch_id) {
    const mcdc_unit_stats *st = &w->st;
    char min_ts[32], max_ts[32];
    mcdc_format_ts_us(st->min_ts, 3, min_ts);
    mcdc_format_ts_us(st->max_ts, 3, max_ts);
    return json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "rows",
                     (json_int_t)st->rows, "min_lsn", st->min_lsn, "max_lsn", st->max_lsn,
                     "min_commit_ts", min_ts, "max_commit_ts", max_ts, "deletes",
                     (json_int_t)st->deletes, "inserts", (json_int_t)st->inserts, "updates",
                     (json_int_t)st->updates, "batch_id", (json_int_t)batch_id, "app_id",
                     s->sink_id);
}

/* Bronze's appender for the unit, with encoder threads from the budget
 * (released once the unit is published or discarded); a unit read ahead
 * has its appender from prepare already, its layout decided. */
static int open_appender(mcdc_stream *s, stream_unit *w, mcdc_error *err) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want = cores > 3 ? (int)(cores / 2) : 1; /* the readers need the rest */
    MCDC_ASSERT(w->encoders == 0);
    int rc = mcdc_budget_acquire(s->ctx.budget, MCDC_PERMIT_ENCODER, 1, want, 0, &s->ctx.stop,
                                 &w->encoders, err);
    if (rc) return rc;
    if (w->app) {
        mcdc_appender_set_threads(w->app, w->encoders);
        return MCDC_OK;
    }
    mcdc_table_props props = {.kind = MCDC_KIND_BRONZE, .parquet_threads = w->encoders};
    return mcdc_appender_open(&w->app, s->bronze, s->bronze_schema, &props, err);
}

/* Keeps a range's read metrics for the unit's facts (folded once every
 * piece was read). */
static int keep_metrics(stream_unit *w, const mcdc_reader_metrics *m, mcdc_error *err) {
    if (w->n_rm == w->cap_rm) {
        int cap = w->cap_rm ? w->cap_rm * 2 : 8;
        mcdc_reader_metrics *v = mcdc_realloc(w->rm, sizeof *v * (size_t)cap);
        if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        w->rm = v;
        w->cap_rm = cap;
    }
    w->rm[w->n_rm++] = *m;
    return MCDC_OK;
}

/* Reads the ranges on one thread each (a connection each, from the
 * budget); batches reach this thread through the fan-in and are appended to
 * bronze unless it already holds the unit. A unit read ahead (gate) keeps
 * one file of its own until the unit before is published: before it would
 * finish that file and start a second, it waits. */
static int read_ranges(mcdc_stream *s, stream_unit *w, const mcdc_unit *u,
                       const mcdc_lsn_range *ranges, int nranges, mcdc_frame_gate *gate,
                       mcdc_error *err) {
    range_reader *readers = mcdc_calloc((size_t)(nranges ? nranges : 1), sizeof *readers);
    void **args = mcdc_calloc((size_t)(nranges ? nranges : 1), sizeof *args);
    if (readers == NULL || args == NULL) {
        mcdc_free(readers);
        mcdc_free(args);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory starting readers");
    }
    for (int i = 0; i < nranges; i++) {
        readers[i] = (range_reader){.changes = s->changes, .range = &ranges[i]};
        args[i] = &readers[i];
    }
    mcdc_fanin *fan = NULL;
    int rc = mcdc_fanin_start(&fan, nranges, MCDC_QUEUE_DEPTH_MAX, read_range, args, err);
    mcdc_batch *b;
    while (rc == MCDC_OK && (b = mcdc_fanin_next(fan)) != NULL) {
        mcdc_unit_stats_add(&w->st, b);
        if (!u->data_done && b->rows > 0) {
            if (w->encoders == 0) rc = open_appender(s, w, err);
            if (rc == MCDC_OK) rc = mcdc_bronze_widen(b, s->bronze_schema, u->id, NULL, -1, err);
            if (rc == MCDC_OK && gate && mcdc_appender_fills(w->app, b))
                rc = mcdc_frame_gate_wait(gate, err);
            if (rc == MCDC_OK) rc = mcdc_appender_write(w->app, b, err);
        }
        /* given up (the unit before failed, a stop): read no further */
        if (rc == MCDC_OK && mcdc_frame_gate_abandoned(gate)) rc = mcdc_frame_gate_wait(gate, err);
        mcdc_batch_free(b);
    }
    int frc = mcdc_fanin_finish(fan, NULL, rc ? NULL : err);
    if (rc == MCDC_OK) rc = frc;
    for (int i = 0; rc == MCDC_OK && i < nranges; i++) rc = keep_metrics(w, &readers[i].metrics, err);
    /* failOnDataLoss=false: cleanup passed a range's start while it was read,
     * so rows of it may be missing (certain: false). */
    for (int i = 0; rc == MCDC_OK && i < nranges; i++) {
        const mcdc_reader_metrics *m = &readers[i].metrics;
        if (!m->data_lost) continue;
        if (!w->possible_loss || mcdc_lsn_cmp(&ranges[i].from, &w->possible.from) < 0)
            w->possible.from = ranges[i].from;
        mcdc_lsn to;
        mcdc_lsn_decrement(&to, &m->min_lsn_after, NULL);
        if (!w->possible_loss || mcdc_lsn_cmp(&to, &w->possible.to) > 0) w->possible.to = to;
        w->possible_loss = true;
    }
    mcdc_free(readers);
    mcdc_free(args);
    return rc;
}

/* Retention guard of one piece before its ranges are planned (invariant 4,
 * per capture instance). A gap before the oldest instance's min_lsn may be
 * a dropped older instance's: the message names it ("disabled too early"). */
static int retention_guard(mcdc_stream *s, stream_unit *w, mcdc_changes_piece *p,
                           mcdc_error *err) {
    mcdc_piece_loss l;
    int rc = mcdc_changes_piece_loss(s->changes, p, &l, err);
    if (rc || !l.lost) return rc;
    /* An idle table the database's probe found empty past its position up
     * to proven_empty_to lost nothing to a cleanup below that (LSNs only
     * grow: no row can appear there later). */
    if (!mcdc_lsn_is_zero(&w->proven_empty_to) &&
        mcdc_lsn_cmp(&l.min_lsn, &w->proven_empty_to) <= 0 &&
        mcdc_str_ieq(p->ci, mcdc_changes_capture_instance(s->changes))) {
        mcdc_log(MCDC_LOG_INFO, "capture instance %s: CDC cleanup moved min_lsn to %s, past %s, "
                                "where its change table had no rows (the database's probe found "
                                "none): nothing lost", p->ci, l.min, l.from);
        p->from = l.min_lsn;
        return MCDC_OK;
    }
    if (mcdc_opt_fail_on_data_loss(s->opts))
        return mcdc_error_set(err, MCDC_E_DATALOSS,
                              "capture instance %s: changes from %s on were purged by CDC "
                              "cleanup (min_lsn is now %s)%s%s%s before this stream read them. "
                              "Rerun with --on-data-loss resnapshot (and a --facts-table): the "
                              "table is snapshotted again into a new generation of this "
                              "checkpoint and the stream goes on from it. Or set "
                              "failOnDataLoss=false to skip the gap (recorded as a data_skipped "
                              "event)",
                              p->ci, l.from, l.min,
                              l.gone[0] ? ", or were held only by capture instance " : "", l.gone,
                              l.gone[0] ? ", disabled too early (an older instance may be "
                                          "disabled only once every stream has switched: "
                                          "docs/schema-changes.md)"
                                        : "");
    if (w->n_skips >= MCDC_STREAM_SKIPS_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT, "more than %d skipped gaps in one batch",
                              MCDC_STREAM_SKIPS_MAX);
    mcdc_log(MCDC_LOG_WARN, "capture instance %s: skipping purged changes %s..%s "
                            "(failOnDataLoss=false)", p->ci, l.from, l.min);
    mcdc_facts_skip *k = &w->skips[w->n_skips++];
    memset(k, 0, sizeof *k);
    k->from = p->from;
    k->certain = true;
    mcdc_lsn_decrement(&k->to, &l.min_lsn, NULL);
    k->has_lost_from = w->start.has_ts;
    k->lost_from_us = w->start.commit_us;
    bool found = false;
    if (mcdc_changes_commit_time(s->changes, &l.min_lsn, &k->lost_to_us, &found, err) == MCDC_OK)
        k->has_lost_to = found;
    p->from = l.min_lsn;
    return MCDC_OK;
}

/* Test hooks around a batch that reads a newer capture instance from its
 * start (kill -9 just before, inside and just after the switch). */
static bool switch_crash(mcdc_stream *s, const stream_unit *w, const mcdc_unit *u,
                         const char *point, mcdc_error *err) {
    if (!w->batch.switches || !mcdc_ctx_crash(&s->ctx, point, u->id)) return false;
    mcdc_error_set(err, MCDC_E_CANCELLED, "killed at crash point %s of unit %lld (test hook)",
                   point, (long long)u->id);
    return true;
}

/* Reads the batch's pieces, older instance first: per piece the guard, the
 * checks of a first read, then its ranges. One reading permit set serves
 * every piece. */
static int read_pieces(mcdc_stream *s, stream_unit *w, const mcdc_unit *u, mcdc_frame_gate *gate,
                       mcdc_error *err) {
    mcdc_changes_batch *b = &w->batch;
    int rc = MCDC_OK, last = -1;
    for (int i = 0; rc == MCDC_OK && i < b->n_pieces; i++) {
        rc = retention_guard(s, w, &b->pieces[i], err);
        if (rc == MCDC_OK && mcdc_lsn_cmp(&b->pieces[i].from, &b->pieces[i].to) <= 0) {
            rc = mcdc_changes_piece_check(s->changes, &b->pieces[i], err);
            last = i;
        }
    }
    if (rc || last < 0) return rc; /* invariant 3: cleanup may have left nothing */
    int readers = 0;
    /* A connection per range, from the budget: fewer free, fewer ranges. */
    rc = mcdc_budget_acquire(s->ctx.budget, MCDC_PERMIT_CONNECTION, 1, s->num_partitions, 0,
                             &s->ctx.stop, &readers, err);
    for (int i = 0; rc == MCDC_OK && i <= last; i++) {
        const mcdc_changes_piece *p = &b->pieces[i];
        if (mcdc_lsn_cmp(&p->from, &p->to) > 0) continue;
        mcdc_lsn_range *ranges = NULL;
        int nranges = 0;
        rc = mcdc_changes_plan_piece(s->changes, p, readers, &ranges, &nranges, err);
        MCDC_ASSERT(rc != MCDC_OK || (nranges >= 1 && nranges <= readers));
        /* Only the range at the batch's end measures where the stream stands. */
        if (rc == MCDC_OK && i < last) ranges[nranges - 1].last = false;
        if (rc == MCDC_OK) rc = read_ranges(s, w, u, ranges, nranges, gate, err);
        mcdc_free(ranges);
    }
    mcdc_budget_release(s->ctx.budget, MCDC_PERMIT_CONNECTION, readers);
    return rc;
}

/* Frees what a unit's slot holds for its publish: its appender (which
 * deletes the files it wrote when nothing committed them) and its encoder
 * permits. */
static void unit_release(mcdc_stream *s, stream_unit *w) {
    mcdc_appender_free(w->app);
    w->app = NULL;
    mcdc_budget_release(s->ctx.budget, MCDC_PERMIT_ENCODER, w->encoders);
    w->encoders = 0;
}

/* The warnings logged from now on go to w's facts row: those waiting in
 * `pending` first (the reference's driver passes its warnings to the next
 * batch). */
static void collect_warnings(mcdc_stream *s, stream_unit *w) {
    pthread_mutex_lock(&s->warnings_mu);
    json_decref(w->warnings);
    w->warnings = s->pending; /* the unit's row carries them */
    s->pending = json_array();
    s->warnings = w->warnings;
    pthread_mutex_unlock(&s->warnings_mu);
}

/* A unit's warnings end with it: later ones wait for the next unit (or
 * go to the unit read ahead, which collects them already). */
static void end_unit_warnings(mcdc_stream *s, stream_unit *w) {
    pthread_mutex_lock(&s->warnings_mu);
    if (s->warnings == w->warnings) s->warnings = NULL;
    json_decref(w->warnings);
    w->warnings = NULL;
    pthread_mutex_unlock(&s->warnings_mu);
}

/* w's warnings wait for the next unit's row after all, before those logged
 * since: an empty unit (a new checkpoint's batch 0 with nothing new) plans
 * no range, and the reference's warnings travel in its ranges' metrics
 * files, so its row has none; a unit read and discarded gives them back. */
static void defer_unit_warnings(mcdc_stream *s, stream_unit *w) {
    pthread_mutex_lock(&s->warnings_mu);
    json_t *later = s->pending;
    s->pending = w->warnings ? w->warnings : json_array();
    if (s->warnings == w->warnings) s->warnings = NULL;
    w->warnings = NULL;
    size_t i;
    json_t *v;
    json_array_foreach(later, i, v) add_warning(s->pending, json_string_value(v));
    json_decref(later);
    pthread_mutex_unlock(&s->warnings_mu);
}

static int job_read(void *job, int slot, const mcdc_unit *u, mcdc_frame_gate *gate,
                    mcdc_error *err) {
    mcdc_stream *s = job;
    stream_unit *w = &s->units[slot];
    memset(&w->st, 0, sizeof w->st);
    memset(&w->fm, 0, sizeof w->fm);
    w->n_skips = 0;
    w->possible_loss = false;
    memset(&w->possible, 0, sizeof w->possible);
    w->n_rm = 0;
    mcdc_changes_batch_free(&w->batch);
    w->started_us = mcdc_now_utc_us();
    w->t0_us = mcdc_monotonic_us();
    w->proven_empty_to = s->proven_empty_to; /* what its plan knew */
    collect_warnings(s, w);
    w->start = u->start->offset;
    w->end = u->end->offset;
    /* The schema checks come first: a batch that fails them reads nothing. */
    int rc = mcdc_changes_batch_plan(s->changes, &w->start.lsn, w->start.ci, &w->end.lsn,
                                     &w->batch, err);
    if (rc == MCDC_OK && switch_crash(s, w, u, "switch_planned", err)) return MCDC_E_CANCELLED;
    if (rc == MCDC_OK) rc = read_pieces(s, w, u, gate, err);
    /* Capture may alter a change table's column between the check and the
     * read (it applies an ALTER COLUMN as it reaches it): the check again
     * says which DDL and what to do, where the decoder only saw a type. */
    if (rc == MCDC_E_SCHEMA) {
        mcdc_changes_batch again;
        mcdc_error why = MCDC_ERROR_INIT;
        if (mcdc_changes_batch_plan(s->changes, &w->start.lsn, w->start.ci, &w->end.lsn, &again,
                                    &why) == MCDC_E_SCHEMA &&
            err)
            *err = why;
        mcdc_changes_batch_free(&again);
    }
    if (rc == MCDC_OK) mcdc_unit_metrics_fold(&w->fm, w->rm, w->n_rm);
    if (rc == MCDC_OK && switch_crash(s, w, u, "switch_read", err)) rc = MCDC_E_CANCELLED;
    return rc;
}

static int job_publish(void *job, int slot, mcdc_frame *f, const mcdc_unit *u,
                       mcdc_unit_result *res, mcdc_error *err) {
    mcdc_stream *s = job;
    stream_unit *w = &s->units[slot];
    s->pub = w; /* facts and done are its */
    bool data = w->app && mcdc_appender_rows(w->app) > 0;
    int rc = data ? mcdc_checkpoint_lock_check(s->held, err) : MCDC_OK;
    if (rc == MCDC_OK && data) {
        rc = mcdc_frame_commit_data(f, u, w->app, bronze_meta(s, w, u->id), NULL, err);
        res->data_committed = rc == MCDC_OK;
    }
    if (rc == MCDC_OK && switch_crash(s, w, u, "switch_committed", err)) rc = MCDC_E_CANCELLED;
    unit_release(s, w);
    if (rc) return rc;
    res->rows = w->st.rows;
    res->has_end_time = w->end.has_ts;
    res->end_commit_us = w->end.commit_us;
    mcdc_lsn_format(&w->end.lsn, res->end_lsn);
    return MCDC_OK;
}

static void job_discard(void *job, int slot) {
    mcdc_stream *s = job;
    stream_unit *w = &s->units[slot];
    unit_release(s, w);
    defer_unit_warnings(s, w);
}

/* The batch after u is planned while u publishes unless u is a switch
 * batch (its snapshot on switch, or the next run's check, comes first) or
 * an empty one (its warnings wait for the next row). */
static bool job_ahead(void *job, int slot, const mcdc_unit *u) {
    mcdc_stream *s = job;
    const stream_unit *w = &s->units[slot];
    (void)u;
    return !w->batch.switches && mcdc_lsn_cmp(&w->start.lsn, &w->end.lsn) != 0;
}

/* The appender of the batch read ahead, its layout decided here, while no
 * commit runs on bronze's handle: its writes then touch only the storage.
 * Not ahead while bronze lacks a column of the stream's (the commit before
 * adds it and may move the layout). */
static int job_prepare(void *job, int slot, const mcdc_unit *next, bool *go, mcdc_error *err) {
    mcdc_stream *s = job;
    stream_unit *w = &s->units[slot];
    (void)next;
    *go = false;
    MCDC_ASSERT(w->app == NULL && w->encoders == 0);
    mcdc_table_props props = {.kind = MCDC_KIND_BRONZE, .parquet_threads = 1};
    int rc = mcdc_appender_open(&w->app, s->bronze, s->bronze_schema, &props, err);
    if (rc == MCDC_OK) rc = mcdc_appender_prepare(w->app, go, err);
    if (rc || !*go) unit_release(s, w);
    return rc;
}

static int job_facts(void *job, const mcdc_unit *u, const mcdc_unit_result *res,
                     mcdc_batch *rows, mcdc_error *err) {
    (void)res;
    mcdc_stream *s = job;
    stream_unit *w = s->pub;
    if (mcdc_lsn_cmp(&w->start.lsn, &w->end.lsn) == 0) defer_unit_warnings(s, w);
    char *detail = NULL;
    pthread_mutex_lock(&s->warnings_mu);
    if (json_array_size(w->warnings)) {
        json_t *d = json_pack("{s:O}", "warnings", w->warnings);
        detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
    }
    pthread_mutex_unlock(&s->warnings_mu);
    char end_lsn[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(&w->end.lsn, end_lsn);
    int64_t written = mcdc_now_utc_us();
    mcdc_facts_batch fb = {.app_id = s->sink_id,
                           .target = s->cfg.target,
                           .batch_id = u->id,
                           .stats = &w->st,
                           .metrics = &w->fm,
                           .started_us = w->started_us,
                           .duration_ms = (mcdc_monotonic_us() - w->t0_us) / 1000,
                           .written_us = written,
                           .end_lsn = end_lsn,
                           .has_end_ts = w->end.has_ts,
                           .end_commit_us = w->end.commit_us,
                           .detail = detail};
    int rc = mcdc_facts_append_batch(rows, &fb, err);
    free(detail);
    mcdc_facts_skip *events[MCDC_STREAM_SKIPS_MAX + 1];
    int n = 0;
    for (int i = 0; i < w->n_skips; i++) events[n++] = &w->skips[i];
    if (w->possible_loss) events[n++] = &w->possible;
    for (int i = 0; i < n && rc == MCDC_OK; i++) {
        events[i]->app_id = s->sink_id;
        events[i]->target = s->cfg.target;
        events[i]->batch_id = u->id;
        events[i]->written_us = written;
        if (events[i] == &w->possible) {
            events[i]->certain = false;
            events[i]->reason = "CDC cleanup moved min_lsn past the range while it was read";
            events[i]->has_lost_from = w->start.has_ts;
            events[i]->lost_from_us = w->start.commit_us;
        }
        rc = mcdc_facts_append_skip(rows, events[i], err);
    }
    /* The DDL and the switch the batch read past, in its facts commit. */
    for (int i = 0; i < w->batch.n_events && rc == MCDC_OK; i++) {
        const mcdc_changes_event *e = &w->batch.events[i];
        char lsn[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&e->lsn, lsn);
        mcdc_facts_event ev = {.app_id = s->sink_id,
                               .target = s->cfg.target,
                               .event = e->event,
                               .in_batch = true,
                               .batch_id = u->id,
                               .rows = 0,
                               .lsn = lsn,
                               .has_commit_ts = e->has_commit_ts,
                               .commit_us = e->commit_us,
                               .detail = e->detail};
        rc = mcdc_facts_append_event(rows, &ev, err);
    }
    end_unit_warnings(s, w);
    return rc;
}

static bool job_position_time(void *job, const mcdc_pos *pos, int64_t *commit_us, char lsn[32]) {
    (void)job;
    const offset_t *o = &pos->offset;
    if (!o->has_ts) return false;
    *commit_us = o->commit_us;
    mcdc_lsn_format(&o->lsn, lsn);
    return true;
}

static void job_done(void *job, const mcdc_unit *u, const mcdc_unit_result *res,
                     const mcdc_verdict *v) {
    mcdc_stream *s = job;
    stream_unit *w = s->pub;
    end_unit_warnings(s, w);
    /* The batch that first read a newer capture instance (from its start
     * S, w->batch.switch_lsn) is committed here, facts and verdict too:
     * with snapshot_on_switch its snapshot is owed now, and taken before
     * the next batch is planned (job_plan), or before the run ends. Test
     * hook: killed here, before the next batch is planned. */
    if (w->batch.switches) (void)mcdc_ctx_crash(&s->ctx, "switch_done", u->id);
    if (w->batch.switches && s->cfg.snapshot_on_switch) s->switch_check = true;
    if (s->report == NULL && s->ctx.metrics == NULL) return;
    MCDC_ASSERT(res->rows == w->st.rows);
    mcdc_batch_report rep;
    memset(&rep, 0, sizeof rep);
    rep.batch_id = u->id;
    rep.replayed = u->replay;
    rep.bronze_skipped = u->data_done;
    rep.rows = w->st.rows;
    rep.deletes = w->st.deletes;
    rep.inserts = w->st.inserts;
    rep.updates = w->st.updates;
    mcdc_lsn_format(&w->start.lsn, rep.start_lsn);
    mcdc_lsn_format(&w->end.lsn, rep.end_lsn);
    rep.end_commit_us = w->end.commit_us;
    rep.has_end_commit = w->end.has_ts;
    rep.duration_ms = (double)(mcdc_monotonic_us() - w->t0_us) / 1000.0;
    rep.rows_per_s = rep.duration_ms > 0 ? (double)rep.rows / (rep.duration_ms / 1000.0) : 0;
    rep.ingestion_lag_seconds = -1;
    if (w->fm.has_last && w->fm.last.source_max_commit_ts_known && w->end.has_ts)
        rep.ingestion_lag_seconds =
            (double)(w->fm.last.source_max_commit_ts_us - w->end.commit_us) / 1e6;
    rep.has_verdict = v && v->found;
    rep.finalized_until_us = v ? v->finalized_until_us : 0;
    /* the facts row's headroom: from the batch end, else its newest change */
    if (w->fm.has_last && w->fm.last.retention_watermark_known) {
        int64_t ref = w->end.has_ts ? w->end.commit_us : w->st.max_ts;
        rep.has_retention_headroom = true;
        rep.retention_headroom_hours =
            (double)(ref - w->fm.last.retention_watermark_ts_us) / 3600e6;
    }
    mcdc_runtime_job_batch(s->ctx.metrics, &rep);
    if (s->report) s->report(s->report_ctx, &rep);
}

/* ---- bootstrap (reference §2.4.1) ---------------------------------------------------- */

typedef struct {
    mcdc_stream *s;
    int64_t switch_batch; /* -1: a bootstrap's */
} open_ctx;

/* The snapshot_open row, written once the snapshot's LSN is recorded and
 * before the table is read: it says a full snapshot of this stream is on its
 * way until a bootstrap row reaches its LSN. */
static int write_open(void *ctx, const mcdc_offset *stamp, mcdc_error *err) {
    const open_ctx *oc = ctx;
    mcdc_stream *s = oc->s;
    if (s->facts == NULL) return MCDC_OK;
    bool sw = oc->switch_batch >= 0;
    /* A switch's by its LSN, as its completion (a full one per attempt). */
    char txn[MCDC_TXN_APP_ID_MAX];
    int rc = mcdc_txn_app_id(txn, sizeof txn, MCDC_TXN_SNAPOPEN, s->cfg.app_id, 0, stamp->lsn, err);
    if (rc) return rc;
    json_t *d = sw ? mcdc_snap_switch_detail("full", s->gen.n, oc->switch_batch)
                   : mcdc_snap_open_detail("full", "bootstrap", 0, false, 0, false, 0);
    char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (detail == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_facts_event ev = {.app_id = s->sink_id,
                           .target = s->cfg.target,
                           .event = "snapshot_open",
                           .rows = 0,
                           .lsn = stamp->lsn,
                           .has_commit_ts = stamp->has_commit_ts,
                           .commit_us = stamp->commit_us,
                           .detail = detail};
    bool skipped;
    rc = mcdc_facts_write_event(s->facts, &ev, sw ? txn : NULL, 0, &skipped, err);
    free(detail);
    if (rc == MCDC_OK && sw && mcdc_ctx_crash(&s->ctx, "switch_snapshot_opened", oc->switch_batch))
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed after the open row (test hook)");
    return rc;
}

/* Opens a chunked snapshot for generation n of the stream (kind bootstrap
 * or resnapshot); lost_from NULL: no loss. */
static int open_chunked(mcdc_stream *s, const char *sink, int64_t n, const char *kind,
                        const mcdc_offset *lost_from, bool has_lost_to, int64_t lost_to_us,
                        const mcdc_offset *at, int64_t switch_batch, mcdc_offset *out,
                        mcdc_error *err) {
    mcdc_chunked_open o = {.changes = s->changes,
                           .facts = s->facts,
                           .target = s->cfg.target,
                           .warehouse = s->cfg.warehouse,
                           .env = s->ctx.storage_env,
                           .app_id = s->cfg.app_id,
                           .sink = sink,
                           .generation = n,
                           .kind = kind,
                           .lost_from = lost_from,
                           .has_lost_to = has_lost_to,
                           .lost_to_us = lost_to_us,
                           .at = at,
                           .switch_batch_id = switch_batch,
                           .ctx = &s->ctx};
    return mcdc_snapshot_open_chunked(out, &o, err);
}

/* mcdc_recovery's open_chunked: a chunked re-snapshot. */
static int open_resnapshot(void *ctx, const char *sink, int64_t n, const mcdc_offset *lost_from,
                           bool has_lost_to, int64_t lost_to_us, mcdc_offset *out,
                           mcdc_error *err) {
    return open_chunked(ctx, sink, n, "resnapshot", lost_from, has_lost_to, lost_to_us, NULL, -1,
                        out, err);
}

/* The bootstrap row of a full snapshot at `off` (rows -1: read before, NULL
 * in the row; timed: it was read now, from `started`), under txn. */
static int write_bootstrap_row(mcdc_stream *s, const mcdc_offset *off, int64_t rows, bool timed,
                               int64_t started, const char *txn, mcdc_error *err) {
    mcdc_facts_event ev = {.app_id = s->sink_id,
                           .target = s->cfg.target,
                           .event = "bootstrap",
                           .rows = rows,
                           .lsn = off->lsn,
                           .has_commit_ts = off->has_commit_ts,
                           .commit_us = off->commit_us,
                           .has_timing = timed,
                           .started_us = started,
                           .duration_ms = (mcdc_now_utc_us() - started) / 1000};
    bool skipped;
    return mcdc_facts_write_event(s->facts, &ev, txn, 0, &skipped, err);
}

/* A snapshot this generation opened before that a bootstrap starts from
 * instead of taking one (the table is never read twice): a chunked one, open
 * or complete, in either mode; in a chunked run a full one too once complete
 * (an emptied table's: no rows find it). *found false: none. */
static int reusable_open(mcdc_stream *s, mcdc_offset *off, bool *found, mcdc_error *err) {
    *found = false;
    if (s->facts == NULL) return MCDC_OK;
    mcdc_snapfacts sf;
    int rc = mcdc_snapfacts_load(&sf, s->facts, s->cfg.target, s->cfg.warehouse, s->cfg.app_id, err);
    bool done = false;
    const mcdc_snap_row *o = rc ? NULL : mcdc_snapfacts_opened(&sf, s->sink_id, &done);
    *found = o && (strcmp(mcdc_snap_mode(o), "chunked") == 0 ||
                   (done && s->cfg.snapshot == MCDC_SNAPSHOT_CHUNKED));
    if (*found) {
        memset(off, 0, sizeof *off);
        snprintf(off->lsn, sizeof off->lsn, "%s", o->min_lsn);
        off->has_commit_ts = o->has_min_ts;
        off->commit_us = o->min_ts_us;
    }
    mcdc_snapfacts_free(&sf);
    return rc;
}

/* A new checkpoint with bootstrap: the target's snapshot of the table (taken
 * now when it holds none), its bootstrap row, then the stream from its LSN. */
static int job_before_first(void *job, mcdc_pos *start, mcdc_error *err) {
    mcdc_stream *s = job;
    if (s->gen.n > 0) { /* a later generation starts at its snapshot, whatever startingLsn says */
        offset_t o = {.has_ts = s->gen.snapshot.has_commit_ts,
                      .commit_us = s->gen.snapshot.commit_us};
        int rc = mcdc_lsn_parse_cstr(&o.lsn, s->gen.snapshot.lsn, err);
        if (rc == MCDC_OK) pos_of(start, &o);
        return rc;
    }
    if (!s->cfg.bootstrap) return MCDC_OK;
    mcdc_snap_env e = {.ctx = &s->ctx,
                       .changes = s->changes,
                       .target = s->bronze,
                       .bronze = s->bronze_schema,
                       .num_partitions = s->num_partitions};
    mcdc_offset off;
    bool found = false, opened = false;
    int64_t rows = -1; /* a snapshot already there: NULL rows in the event */
    int64_t started = mcdc_now_utc_us();
    int rc = mcdc_snapshot_find_whole(&off, &found, &e, err);
    /* A snapshot opened before (backfill reads a chunked one and writes its
     * bootstrap row), else a chunked one opened now, else a full one. */
    if (rc == MCDC_OK && !found) rc = reusable_open(s, &off, &opened, err);
    if (rc == MCDC_OK && !found && !opened && s->cfg.snapshot == MCDC_SNAPSHOT_CHUNKED) {
        rc = open_chunked(s, s->sink_id, 0, "bootstrap", NULL, false, 0, NULL, -1, &off, err);
        opened = rc == MCDC_OK;
    } else if (rc == MCDC_OK && !found && !opened) {
        open_ctx oc = {s, -1};
        rc = mcdc_snapshot_append(&off, &rows, &e, write_open, &oc, err);
    }
    if (rc == MCDC_OK && s->facts && !opened) {
        char events[MCDC_TXN_APP_ID_MAX];
        rc = mcdc_txn_app_id(events, sizeof events, MCDC_TXN_EVENTS, s->cfg.app_id, 0, NULL, err);
        if (rc == MCDC_OK) rc = write_bootstrap_row(s, &off, rows, !found, started, events, err);
    }
    if (rc) return rc;
    offset_t o = {.has_ts = off.has_commit_ts, .commit_us = off.commit_us};
    rc = mcdc_lsn_parse_cstr(&o.lsn, off.lsn, err);
    if (rc == MCDC_OK) pos_of(start, &o);
    /* availableNow reads up to max_lsn at its start: after a snapshot that
     * took a while, the start is now. */
    if (rc == MCDC_OK && s->has_ceiling) rc = mcdc_changes_max_lsn(s->changes, &s->ceiling, err);
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_INFO, "bootstrap: %s %s the snapshot at %s (%s); streaming from it",
                 s->cfg.target, opened ? "has opened" : "holds", off.lsn,
                 opened ? "chunked: mssql-cdc backfill reads it" : found ? "taken before" : "taken now");
    return rc;
}

/* ---- snapshot on switch (reference snapshot_on_switch, ADR 0023) ------------------- */

/* The whole table into bronze after switch batch `batch`: its open row
 * (switch_batch_id) before the read, its rows, then its bootstrap row
 * (txn <app_id>#snapdone.<L>, once per L). `earlier`: the LSN of an open of
 * that batch that did not complete; when bronze holds that snapshot's
 * rows (killed between them and the bootstrap row) only the row is written. */
static int switch_full(mcdc_stream *s, int64_t batch, const mcdc_offset *earlier,
                       mcdc_error *err) {
    mcdc_snap_env e = {.ctx = &s->ctx,
                       .changes = s->changes,
                       .target = s->bronze,
                       .bronze = s->bronze_schema,
                       .num_partitions = s->num_partitions};
    mcdc_offset off;
    memset(&off, 0, sizeof off);
    int64_t rows = -1; /* rows in bronze before: NULL rows in the event */
    int64_t started = mcdc_now_utc_us();
    bool there = false;
    int rc = MCDC_OK;
    if (earlier) {
        mcdc_offset found_off;
        bool found = false;
        rc = mcdc_snapshot_find_at(&found_off, &found, false, earlier->lsn, &there, &e, err);
        if (there) off = *earlier;
    }
    open_ctx oc = {s, batch};
    if (rc == MCDC_OK && !there) rc = mcdc_snapshot_append(&off, &rows, &e, write_open, &oc, err);
    if (rc == MCDC_OK && mcdc_ctx_crash(&s->ctx, "switch_snapshot_read", batch))
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed before the bootstrap row (test hook)");
    if (rc) return rc;
    char txn[MCDC_TXN_APP_ID_MAX];
    rc = mcdc_txn_app_id(txn, sizeof txn, MCDC_TXN_SNAPDONE, s->cfg.app_id, 0, off.lsn, err);
    if (rc == MCDC_OK) rc = write_bootstrap_row(s, &off, rows, !there, started, txn, err);
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_INFO, "snapshot on switch: %s %s the table at %s after batch %lld "
                                "(%lld rows); downstream rebuilds from it",
                 s->cfg.target, there ? "held" : "read", off.lsn, (long long)batch,
                 (long long)(rows < 0 ? 0 : rows));
    return rc;
}

static void offset_of_row(mcdc_offset *o, const mcdc_snap_row *r) {
    memset(o, 0, sizeof *o);
    snprintf(o->lsn, sizeof o->lsn, "%s", r->min_lsn);
    o->has_commit_ts = r->has_min_ts;
    o->commit_us = r->min_ts_us;
}

/* What the facts owe (mcdc_snapfacts_switch_owed), taken now in the run's
 * mode, under the mode lock. Nothing on disk is trusted but the facts and
 * bronze's own rows. */
static int snapshot_on_switch(mcdc_stream *s, mcdc_error *err) {
    MCDC_ASSERT(s->facts && s->cfg.snapshot_on_switch);
    bool chunked = s->cfg.snapshot == MCDC_SNAPSHOT_CHUNKED;
    mcdc_snapfacts sf;
    int rc = mcdc_snapfacts_load(&sf, s->facts, s->cfg.target, s->cfg.warehouse, s->cfg.app_id, err);
    const mcdc_snap_row *full = NULL;
    const mcdc_snap_row *sw = rc ? NULL : mcdc_snapfacts_switch_owed(&sf, s->sink_id, &full);
    if (rc == MCDC_OK && sw)
        rc = mcdc_snapfacts_lock(&sf, s->cfg.target, chunked ? "chunked" : "full",
                                 mcdc_snapshot_purged, s->changes, err);
    int64_t batch = sw ? sw->batch_id : -1;
    mcdc_offset at, earlier, old;
    const mcdc_snap_row *open = sw && chunked ? mcdc_snapfacts_open_chunked(&sf) : NULL;
    char old_sink[MCDC_TXN_APP_ID_MAX] = "";
    if (sw) offset_of_row(&at, sw);
    if (full) offset_of_row(&earlier, full);
    if (open) {
        offset_of_row(&old, open);
        snprintf(old_sink, sizeof old_sink, "%s", open->app_id);
    }
    bool has_earlier = full != NULL;
    mcdc_snapfacts_free(&sf);
    if (rc || batch < 0) {
        if (rc == MCDC_OK) s->switch_check = false;
        return rc;
    }
    mcdc_log(MCDC_LOG_INFO, "snapshot on switch: batch %lld read capture instance switch at %s; "
                            "%s", (long long)batch, at.lsn,
             chunked ? "opening a chunked snapshot there" : "reading the whole table");
    if (chunked) {
        /* A newer open supersedes one still open: backfill reads the newest,
         * the older one is abandoned and never completes. The warning goes
         * to the next batch's facts row. */
        if (open && strcmp(old.lsn, at.lsn) < 0)
            mcdc_log(MCDC_LOG_WARN, "snapshot on switch supersedes the chunked snapshot opened at "
                                    "%s (app id %s), which had not completed: it is abandoned, "
                                    "and mssql-cdc backfill reads the one opened at %s from now on",
                     old.lsn, old_sink, at.lsn);
        mcdc_offset out;
        rc = open_chunked(s, s->sink_id, s->gen.n, "bootstrap", NULL, false, 0, &at, batch, &out,
                          err);
    } else {
        rc = switch_full(s, batch, has_earlier ? &earlier : NULL, err);
    }
    if (rc == MCDC_OK && mcdc_ctx_crash(&s->ctx, "switch_snapshot_done", batch))
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed after the snapshot on switch (test hook)");
    if (rc == MCDC_OK) s->switch_check = false;
    return rc;
}

static const mcdc_job_ops STREAM_OPS = {
    .kind = "stream",
    .pos_kind = MCDC_POS_OFFSET,
    .before_first = job_before_first,
    .plan = job_plan,
    .empty_first = job_empty_first,
    .check_fresh = job_check_fresh,
    .read = job_read,
    .publish = job_publish,
    .discard = job_discard,
    .ahead = job_ahead,
    .idle_wait = job_idle_wait,
    .prepare = job_prepare,
    .facts = job_facts,
    .position_time = job_position_time,
    .done = job_done,
};

/* Whether the stream reads its next batch while the one before publishes
 * (overlapBatches): auto, when bronze is on an object store, where a
 * batch's upload and commit are waits on the network the next batch's read
 * and encoding can fill (docs/object-stores.md has the figures); on local
 * disk a file's write is work of the same machine. */
static bool overlap_batches(const mcdc_stream *s) {
    bool is_auto = false;
    bool on = mcdc_opt_overlap_batches(s->opts, &is_auto);
    if (!is_auto) return on;
    const char *loc = s->cfg.target, *sep = strstr(loc, "://");
    char scheme[16];
    if (sep == NULL || (size_t)(sep - loc) >= sizeof scheme) return false;
    memcpy(scheme, loc, (size_t)(sep - loc));
    scheme[sep - loc] = 0;
    const char *family = mcdc_storage_family(scheme);
    return family && strcmp(family, "file") != 0 && strcmp(family, "mem") != 0;
}

/* ---- validation: before anything is read or written ----------------------------- */

static int check_app_id(const char *app_id, mcdc_error *err) {
    size_t n = strlen(app_id);
    if (n == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "--app-id is empty: give the stream a name "
                                                   "that stays the same for its checkpoint's life");
    if (n > MCDC_APP_ID_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "--app-id is %zu bytes long; at most %d",
                              n, MCDC_APP_ID_BYTES_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)app_id[i] < 0x20 || app_id[i] == 0x7f)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "--app-id holds a control character (byte %zu): an app id "
                                  "is printable text",
                                  i);
    return MCDC_OK;
}

/* One place, one role: the target, the facts and the control table must be
 * three tables (none inside another), and the checkpoint a directory of its
 * own, neither a table nor inside one nor holding one. */
static int check_roles(mcdc_stream *s, mcdc_error *err) {
    const mcdc_stream_cfg *c = &s->cfg;
    const mcdc_role r[4] = {{"--target", c->target, true},
                            {"--facts-table", c->facts_table, true},
                            {"--control-table", c->control_table, true},
                            {"--checkpoint", c->checkpoint, false}};
    char *canon[4] = {NULL};
    int rc = mcdc_roles_check(r, 4, c->warehouse, canon, err);
    if (rc == MCDC_OK) {
        s->target_path = canon[0];
        s->facts_path = canon[1];
        mcdc_free(canon[2]);
        mcdc_free(canon[3]);
    }
    return rc;
}

static void stream_free(mcdc_stream *s);

static int stream_create(mcdc_stream **out, const mcdc_opts *opts, const mcdc_stream_cfg *cfg,
                         mcdc_alloc_acct *acct, mcdc_error *err) {
    int rc = MCDC_OK;
    if (cfg->target == NULL || cfg->app_id == NULL || cfg->checkpoint == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "a stream needs a target, an app id and a "
                                                   "checkpoint");
    if (*cfg->target == 0 || *cfg->checkpoint == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "--%s is empty: give it a path",
                              *cfg->target == 0 ? "target" : "checkpoint");
    rc = check_app_id(cfg->app_id, err);
    if (rc == MCDC_OK) rc = mcdc_opts_check_required(opts, err);
    if (rc == MCDC_OK && cfg->trigger == MCDC_TRIGGER_PROCESSING_TIME &&
        (cfg->processing_time_ms < 1 || cfg->processing_time_ms > MCDC_PROCESSING_TIME_MS_MAX))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "processingTime must be between 1 ms and %lld ms (a week), not %lld ms",
                            (long long)MCDC_PROCESSING_TIME_MS_MAX,
                            (long long)cfg->processing_time_ms);
    if (rc == MCDC_OK && cfg->bootstrap &&
        mcdc_opt_is_set(opts, MCDC_OPT_STARTING_LSN))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "--bootstrap and startingLsn together: a bootstrap starts the stream "
                            "at its snapshot's LSN; leave startingLsn out");
    bool resnapshot = cfg->on_data_loss == MCDC_ON_DATA_LOSS_RESNAPSHOT;
    if (rc == MCDC_OK && cfg->on_data_loss != MCDC_ON_DATA_LOSS_FAIL &&
        !resnapshot)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "on_data_loss must be fail or resnapshot");
    if (rc == MCDC_OK && cfg->snapshot == MCDC_SNAPSHOT_CHUNKED &&
        cfg->facts_table == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "--snapshot chunked needs --facts-table: the snapshot's rows there "
                            "record its plan and its chunks, and backfill reads them");
    if (rc == MCDC_OK && cfg->snapshot_on_switch && cfg->facts_table == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "--snapshot-on-switch needs --facts-table: its capture_instance_switched "
                            "rows say which switch is owed a snapshot (also after a crash), and "
                            "its snapshot rows tell downstream to rebuild");
    if (rc == MCDC_OK && resnapshot && cfg->facts_table == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "--on-data-loss resnapshot needs --facts-table: the re-snapshot's "
                            "rows and the mode lock live there");
    if (rc == MCDC_OK && resnapshot && !mcdc_opt_fail_on_data_loss(opts))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "--on-data-loss resnapshot with failOnDataLoss=false: the stream would "
                            "skip the gap instead of re-snapshotting; drop one of them");
    if (rc == MCDC_OK &&
        !(cfg->resnapshot_interval_days >= 0 && cfg->resnapshot_interval_days <= 3650))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "--resnapshot-interval-days must be between 0 and 3650, not %g",
                            cfg->resnapshot_interval_days);
    if (rc) return rc;
    mcdc_stream *s = mcdc_calloc(1, sizeof *s);
    if (s == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    s->cfg = *cfg;
    s->opts = opts;
    s->acct = acct;
    const char **fields[] = {&s->cfg.target,        &s->cfg.app_id,    &s->cfg.checkpoint,
                             &s->cfg.facts_table,   &s->cfg.control_table,
                             &s->cfg.warehouse,     &s->cfg.query_name};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && rc == MCDC_OK; i++) {
        if (*fields[i] == NULL) continue;
        s->strings[i] = mcdc_strdup(*fields[i]);
        if (s->strings[i] == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        *fields[i] = s->strings[i];
    }
    if (rc == MCDC_OK) rc = check_roles(s, err);
    if (rc) {
        stream_free(s);
        return rc;
    }
    pthread_mutex_init(&s->warnings_mu, NULL);
    pthread_mutex_init(&s->caught_up_mu, NULL);
    if (s->cfg.log_fn == NULL) s->cfg.log_fn = mcdc_runtime_log_fn(cfg->runtime, &s->cfg.log_user);
    s->sink = (mcdc_log_sink){stream_log, s, cfg->log_level};
    s->ctx.budget = mcdc_runtime_budget_or(cfg->runtime, cfg->budget);
    s->ctx.progress_fn = cfg->progress_fn; /* each snapshot makes a tracker of its own */
    s->ctx.progress_user = cfg->progress_user;
    mcdc_ctx_take_test_hooks(&s->ctx, opts);
    mcdc_ctx_take_storage(&s->ctx, opts, cfg->runtime);
    s->ctx.metrics = mcdc_runtime_job_join(
        cfg->runtime, "stream", s->cfg.query_name ? s->cfg.query_name : s->cfg.app_id, s);
    *out = s;
    return MCDC_OK;
}

int mcdc_stream_create(mcdc_stream **out, const mcdc_opts *opts, const mcdc_stream_cfg *cfg,
                       mcdc_error *err) {
    if (out == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_stream_create: out is NULL");
    *out = NULL;
    if (opts == NULL || cfg == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_stream_create: opts and cfg are required");
    /* the caller's version's fields, the defaults after them */
    mcdc_stream_cfg given;
    int rc = mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_STREAM, cfg, err);
    if (rc) return rc;
    mcdc_alloc_acct *acct = mcdc_runtime_acct_or_bound(given.runtime);
    mcdc_job_scope host = mcdc_job_enter(acct, mcdc_log_current());
    rc = stream_create(out, opts, &given, acct, err);
    mcdc_job_leave(host);
    return rc;
}

void mcdc_stream_request_stop(mcdc_stream *s) {
    if (s) atomic_store(&s->ctx.stop, 1);
}

void mcdc_stream_free(mcdc_stream *s) {
    if (s == NULL) return;
    mcdc_job_scope host = mcdc_job_enter(s->acct, mcdc_log_current());
    stream_free(s);
    mcdc_job_leave(host);
}

static void stream_free(mcdc_stream *s) {
    mcdc_runtime_job_leave(s->ctx.metrics);
    if (s->sink.fn) {
        pthread_mutex_destroy(&s->warnings_mu);
        pthread_mutex_destroy(&s->caught_up_mu);
    }
    for (size_t i = 0; i < sizeof s->strings / sizeof s->strings[0]; i++) mcdc_free(s->strings[i]);
    mcdc_free(s->target_path);
    mcdc_free(s->facts_path);
    mcdc_free(s->gen_checkpoint);
    mcdc_free(s);
}

/* A captured column named like one of ours (_start_lsn, _batch_id, ... in
 * any case) would collide in bronze: refused before anything is read, as the
 * reference refuses it at load. The captured columns follow _commit_ts. */
static int check_reserved(const mcdc_schema *out, mcdc_error *err) {
    int32_t first = mcdc_schema_find(out, "_commit_ts") + 1;
    MCDC_ASSERT(first > 0);
    return mcdc_check_reserved_columns(out, first, err);
}

/* startingLsn past max_lsn: nothing comes until the server gets there. */
/* startingLsn, where a new checkpoint starts, must be an LSN of this
 * server that a stream can start from, checked before anything is written
 * (else the first batch would plan, then stop). */
static int check_start(mcdc_stream *s, bool fresh, mcdc_error *err) {
    const char *starting = NULL;
    if (!fresh || mcdc_opt_starting_lsn(s->opts, &starting) != MCDC_START_LSN) return MCDC_OK;
    mcdc_lsn want;
    int rc = mcdc_lsn_parse_cstr(&want, starting, err);
    bool loss_ok = s->cfg.on_data_loss == MCDC_ON_DATA_LOSS_RESNAPSHOT ||
                   !mcdc_opt_fail_on_data_loss(s->opts);
    if (rc == MCDC_OK) rc = mcdc_changes_check_start(s->changes, &want, "startingLsn", loss_ok, err);
    return rc;
}

/* The checkpoint is a directory of its own: not a file, not a Delta table. */
static int check_checkpoint_place(mcdc_stream *s, mcdc_error *err) {
    const char *dir = s->cfg.checkpoint;
    if (mcdc_location_is_file(dir))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--checkpoint %s is a file: a checkpoint is a directory (a new "
                              "path creates one). Nothing was written",
                              dir);
    mcdc_storage *st = NULL;
    mcdc_storage_listing l = {0};
    int rc = mcdc_storage_open_env(&st, s->ctx.storage_env, dir, err);
    if (rc == MCDC_OK) rc = mcdc_storage_list(st, "_delta_log/", &l, err);
    size_t n = l.count;
    mcdc_storage_listing_free(&l);
    mcdc_storage_free(st);
    if (rc == MCDC_OK && n > 0)
        rc = mcdc_error_set(err, MCDC_E_MISMATCH,
                            "--checkpoint %s holds a Delta table (_delta_log/): a checkpoint is "
                            "a directory of its own, and its files would go into that table's. "
                            "Nothing was written. Give the checkpoint a new path",
                            dir);
    return rc;
}

/* What a generation's checkpoint is bound to (app_id: its sink app id). */
static mcdc_ckpt_binding stream_binding(const mcdc_stream *s, const char *app_id) {
    return (mcdc_ckpt_binding){.job = STREAM_OPS.kind,
                               .app_id = app_id,
                               .target = s->target_path,
                               .capture_instance = mcdc_opt_capture_instance(s->opts),
                               .facts_table = s->facts_path,
                               .capture_instance_alias = s->ci_alias};
}

/* The capture instances the live generation's checkpoint names: the one it
 * is bound to and the one it read last (either NULL). Reads only. */
static int peek_checkpoint(mcdc_stream *s, char **bound, char **last_read, mcdc_error *err) {
    *bound = *last_read = NULL;
    mcdc_generation g;
    char *dir = NULL, *app = NULL;
    int rc = mcdc_generation_read(&g, s->ctx.storage_env, s->cfg.checkpoint, err);
    if (rc == MCDC_OK)
        rc = mcdc_generation_names(&dir, &app, s->cfg.checkpoint, s->cfg.app_id, g.n, err);
    if (rc == MCDC_OK)
        rc = mcdc_checkpoint_peek_instances(s->ctx.storage_env, dir, bound, last_read, err);
    mcdc_free(dir);
    mcdc_free(app);
    return rc;
}

/* Bronze never changes a column's type (reference §2.5): a column the
 * stream now reads as another type than bronze holds (the source's type
 * changed, and a restart inferred the new one) stops the stream before it
 * reads anything, saying what to do. */
static int check_bronze_types(mcdc_stream *s, mcdc_error *err) {
    mcdc_schema *have = NULL;
    int rc = mcdc_table_schema(s->bronze, &have, err);
    for (int32_t i = 0; rc == MCDC_OK && have && i < s->bronze_schema->n_fields; i++) {
        const mcdc_field *ours = &s->bronze_schema->fields[i];
        int32_t j = mcdc_schema_find(have, ours->name);
        if (j < 0) continue; /* a new column: bronze takes it */
        const mcdc_field *theirs = &have->fields[j];
        bool binary = (ours->type == MCDC_TYPE_FIXED_BINARY || ours->type == MCDC_TYPE_BINARY) &&
                      theirs->type == MCDC_TYPE_BINARY;
        if (binary || (ours->type == theirs->type && ours->precision == theirs->precision &&
                       ours->scale == theirs->scale))
            continue;
        char a[48], b[48];
        mcdc_type_text(ours, a);
        mcdc_type_text(theirs, b);
        rc = mcdc_error_set(err, MCDC_E_SCHEMA,
                            "target %s holds column %s as %s, and the stream reads it as %s now "
                            "(its type changed at the source): bronze never changes a column's "
                            "type, so nothing was read. Stream into a new target (a new "
                            "checkpoint and app id, with --bootstrap)",
                            s->cfg.target, ours->name, b, a);
    }
    mcdc_schema_unref(have);
    return rc;
}

/* The generation this run streams: the state file's (read on every run),
 * after a re-snapshot when on_data_loss asks for one and CDC lost changes
 * the live generation has not read. */
static int enter_generation(mcdc_stream *s, mcdc_error *err) {
    const mcdc_stream_cfg *cfg = &s->cfg;
    bool resnapshot = cfg->on_data_loss == MCDC_ON_DATA_LOSS_RESNAPSHOT;
    int rc = MCDC_OK;
    /* One mode while a snapshot is open (reference §2.4.5), for the runs
     * that may take one. */
    if (s->facts && (cfg->bootstrap || resnapshot || cfg->snapshot_on_switch)) {
        mcdc_snapfacts sf;
        rc = mcdc_snapfacts_load(&sf, s->facts, cfg->target, cfg->warehouse, cfg->app_id, err);
        if (rc == MCDC_OK)
            rc = mcdc_snapfacts_lock(&sf, cfg->target,
                                     cfg->snapshot == MCDC_SNAPSHOT_CHUNKED ? "chunked" : "full",
                                     mcdc_snapshot_purged, s->changes, err);
        mcdc_snapfacts_free(&sf);
    }
    if (rc == MCDC_OK) rc = mcdc_generation_read(&s->gen, s->ctx.storage_env, cfg->checkpoint, err);
    if (rc == MCDC_OK && resnapshot) {
        const char *starting = NULL;
        bool given = mcdc_opt_starting_lsn(s->opts, &starting) == MCDC_START_LSN;
        mcdc_recovery r = {
            .ctx = &s->ctx,
            .changes = s->changes,
            .bronze = s->bronze,
            .bronze_schema = s->bronze_schema,
            .num_partitions = s->num_partitions,
            .facts = s->facts,
            .target = cfg->target,
            .checkpoint = cfg->checkpoint,
            .app_id = cfg->app_id,
            .binding = stream_binding(s, cfg->app_id),
            .bootstrap = cfg->bootstrap,
            .chunked = cfg->snapshot == MCDC_SNAPSHOT_CHUNKED,
            .interval_days = cfg->resnapshot_interval_days,
            .starting_lsn = given ? starting : NULL,
            .open_chunked = open_resnapshot,
            .open_ctx = s,
        };
        bool recovered;
        rc = mcdc_generation_recover(&s->gen, &r, &recovered, err);
    }
    char *app = NULL;
    mcdc_free(s->gen_checkpoint);
    s->gen_checkpoint = NULL;
    if (rc == MCDC_OK)
        rc = mcdc_generation_names(&s->gen_checkpoint, &app, cfg->checkpoint, cfg->app_id,
                                   s->gen.n, err);
    if (rc == MCDC_OK)
        rc = mcdc_txn_app_id(s->sink_id, sizeof s->sink_id, MCDC_TXN_STREAM, cfg->app_id, s->gen.n,
                             NULL, err);
    if (rc == MCDC_OK)
        rc = mcdc_txn_app_id(s->facts_app_id, sizeof s->facts_app_id, MCDC_TXN_STREAM_FACTS,
                             cfg->app_id, s->gen.n, NULL, err);
    if (rc == MCDC_OK && s->gen.n > 0)
        mcdc_log(MCDC_LOG_INFO, "%s: generation %lld (app id %s, checkpoint %s)", cfg->target,
                 (long long)s->gen.n, s->sink_id, s->gen_checkpoint);
    mcdc_free(app);
    return rc;
}

int mcdc_stream_run(mcdc_stream *s, mcdc_report_fn fn, void *ctx, mcdc_error *err) {
    if (s == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_stream_run: no stream");
    const mcdc_stream_cfg *cfg = &s->cfg;
    s->report = fn;
    s->report_ctx = ctx;
    s->pending = json_array();
    mcdc_job_scope host = mcdc_job_enter(s->acct, &s->sink);
    mcdc_runtime_job_started(s->ctx.metrics);
    /* Unknown options were warned about when set; the first batch's row
     * records them too. */
    const char *unknown = mcdc_opts_unknown(s->opts);
    if (*unknown) {
        char msg[512];
        snprintf(msg, sizeof msg, "unknown option(s) ignored: %s", unknown);
        add_warning(s->pending, msg);
    }
    s->num_partitions = mcdc_opt_num_partitions(s->opts);

    /* Options of the reference this release accepts but does not act on;
     * the snapshot's act only when the stream takes one (bootstrap). */
    static const struct {
        mcdc_opt opt;
        bool snapshot;
    } inert[] = {{MCDC_OPT_METRICS_PATH, false},   {MCDC_OPT_SNAPSHOT_CHUNKS, false},
                 {MCDC_OPT_LOCK_TIMEOUT_MS, true},
                 {MCDC_OPT_ISOLATION_LEVEL, true},  {MCDC_OPT_SNAPSHOT_LSN, true},
                 {MCDC_OPT_SNAPSHOT_KEYS, true}};
    for (size_t i = 0; i < sizeof inert / sizeof inert[0]; i++)
        if (mcdc_opt_is_set(s->opts, inert[i].opt) && !(inert[i].snapshot && cfg->bootstrap))
            mcdc_log(MCDC_LOG_WARN, "option %s has no effect %s%s", mcdc_opt_name(inert[i].opt),
                     inert[i].snapshot ? "without --bootstrap (it applies to snapshots)"
                                       : "in this release",
                     inert[i].opt == MCDC_OPT_METRICS_PATH
                         ? ": the stream's metrics travel in-process"
                         : "");
    /* Every table is what its role says before the source is even asked. */
    int rc = mcdc_table_open_env(&s->bronze, s->ctx.storage_env, cfg->target, cfg->warehouse, err);
    if (rc == MCDC_OK && cfg->facts_table)
        rc = mcdc_table_open_env(&s->facts, s->ctx.storage_env, cfg->facts_table, cfg->warehouse, err);
    /* The stream is the writer of its batches: between its commits it reads
     * what it wrote, so each commit is one conditional put (a lost race
     * still reads the winners and applies the exactly-once rules). */
    if (s->bronze) mcdc_table_keep_snapshot(s->bronze);
    if (s->facts) mcdc_table_keep_snapshot(s->facts);
    mcdc_table *verdicts = NULL;
    if (rc == MCDC_OK && cfg->control_table)
        rc = mcdc_table_open_env(&verdicts, s->ctx.storage_env, cfg->control_table, cfg->warehouse, err);
    const mcdc_frame_role roles[3] = {{s->bronze, MCDC_KIND_BRONZE, "target"},
                                      {s->facts, MCDC_KIND_FACTS, "facts table"},
                                      {verdicts, MCDC_KIND_CONTROL, "control table"}};
    if (rc == MCDC_OK) rc = mcdc_frame_check_roles(roles, 3, err);
    mcdc_table_close(verdicts);
    /* One process on a checkpoint at a time, held for the whole run: its
     * generations, the state file and every batch. A second one stops here,
     * before it asks the source anything. */
    mcdc_ckpt_lock *held = NULL;
    if (rc == MCDC_OK) rc = check_checkpoint_place(s, err);
    if (rc == MCDC_OK)
        rc = mcdc_checkpoint_lock(&held, s->ctx.storage_env, cfg->checkpoint, STREAM_OPS.kind,
                                  cfg->app_id, err);
    s->held = held;
    /* The control connection, held for the stream's life, leaves one
     * connection of the budget for some job's reader. */
    int control = 0;
    if (rc == MCDC_OK)
        rc = mcdc_budget_acquire(s->ctx.budget, MCDC_PERMIT_CONNECTION, 1, 1, 1, &s->ctx.stop,
                                 &control, err);
    /* The checkpoint names the instances it read: a configured one that is
     * gone is followed through them (reference §2.5). */
    char *bound = NULL, *last_read = NULL;
    if (rc == MCDC_OK) rc = peek_checkpoint(s, &bound, &last_read, err);
    const char *also[2] = {last_read, bound};
    mcdc_changes_settings cs = {.retry_backoff_ms = mcdc_opt_retry_backoff_ms(s->opts),
                                .follow = true,
                                .also_names = also,
                                .n_also_names = 2};
    if (rc == MCDC_OK) rc = mcdc_changes_open(&s->changes, s->opts, &cs, err);
    /* A checkpoint bound to the older instance, given the newer one's name
     * (or the reverse): the same stream when both name its table. */
    if (rc == MCDC_OK && bound && !mcdc_str_ieq(bound, mcdc_opt_capture_instance(s->opts)) &&
        (mcdc_changes_is_table_name(s->changes, bound) ||
         mcdc_changes_is_table_name(s->changes, last_read)) &&
        (s->ci_alias = mcdc_strdup(bound)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    bool fresh = bound == NULL;
    mcdc_free(bound);
    mcdc_free(last_read);
    if (rc == MCDC_OK) rc = check_reserved(mcdc_changes_schema(s->changes), err);
    /* Continuous streams of a runtime poll through their database's probe. */
    if (rc == MCDC_OK && cfg->runtime &&
        (cfg->trigger == MCDC_TRIGGER_DEFAULT || cfg->trigger == MCDC_TRIGGER_PROCESSING_TIME)) {
        mcdc_db_probe *probe = NULL;
        rc = mcdc_runtime_probe_join(cfg->runtime, mcdc_opt_connection_string(s->opts), s,
                                     mcdc_changes_capture_instance(s->changes),
                                     &mcdc_probe_seam_db, &probe, err);
        pthread_mutex_lock(&s->caught_up_mu);
        s->probe = probe;
        pthread_mutex_unlock(&s->caught_up_mu);
    }
    s->last_plan_us = mcdc_monotonic_us();
    if (rc == MCDC_OK) rc = mcdc_bronze_schema(&s->bronze_schema, mcdc_changes_schema(s->changes), err);
    if (rc == MCDC_OK) rc = check_bronze_types(s, err);
    if (rc == MCDC_OK && cfg->trigger == MCDC_TRIGGER_AVAILABLE_NOW) {
        rc = mcdc_changes_max_lsn(s->changes, &s->ceiling, err);
        s->has_ceiling = rc == MCDC_OK;
    }
    if (rc == MCDC_OK) rc = check_start(s, fresh, err);
    /* A run that may snapshot checks the key it would cut on before it
     * writes anything (an open row, a state file). */
    if (rc == MCDC_OK && (cfg->bootstrap || cfg->on_data_loss == MCDC_ON_DATA_LOSS_RESNAPSHOT ||
                          cfg->snapshot_on_switch)) {
        json_t *keys = NULL;
        rc = mcdc_changes_snapshot_keys(s->changes, &keys, err);
        json_decref(keys);
    }
    if (rc == MCDC_OK) rc = enter_generation(s, err);
    /* Resumed (or bootstrapped) and streaming from here: told to a host's
     * progress function as job "stream", phase "streaming", since a table
     * with nothing new commits no batch that would say so (a service's
     * readiness). */
    if (rc == MCDC_OK) mcdc_runtime_job_state(s->ctx.metrics, MCDC_JOB_RUNNING);
    if (rc == MCDC_OK && cfg->progress_fn) {
        mcdc_progress_tracker *started = NULL;
        mcdc_error ignored = MCDC_ERROR_INIT;
        if (mcdc_progress_create(&started, "stream", cfg->progress_fn, cfg->progress_user, 1000,
                                 &ignored) == MCDC_OK)
            mcdc_progress_phase(started, "streaming", NULL, -1, -1, false);
        mcdc_progress_free(started);
    }
    if (rc == MCDC_OK) {
        mcdc_frame_cfg fc = {
            .ctx = &s->ctx,
            .checkpoint = s->gen_checkpoint,
            .binding = stream_binding(s, s->sink_id),
            .target = s->bronze,
            .target_kind = MCDC_KIND_BRONZE,
            .app_id = s->sink_id,
            .facts = s->facts,
            .facts_app_id = s->facts_app_id,
            .control_table = cfg->control_table,
            .warehouse = cfg->warehouse,
            .verdict_name = cfg->target,
            .granularity = cfg->granularity,
            .stop_when_idle = cfg->trigger == MCDC_TRIGGER_AVAILABLE_NOW ||
                              cfg->trigger == MCDC_TRIGGER_ONCE,
            .one_unit = cfg->trigger == MCDC_TRIGGER_ONCE,
            .idle_poll_ms = cfg->trigger == MCDC_TRIGGER_PROCESSING_TIME ? cfg->processing_time_ms : 10,
            .min_interval_ms = cfg->trigger == MCDC_TRIGGER_PROCESSING_TIME ? cfg->processing_time_ms : 0,
            .max_units = cfg->max_batches,
            .overlap = overlap_batches(s),
        };
        s->switch_check = cfg->snapshot_on_switch; /* a run killed before it owes it */
        rc = mcdc_frame_run(&fc, &STREAM_OPS, s, err);
        /* Once, a batch limit or the last batch of availableNow: the snapshot
         * its switch owes before the run ends (a stop request leaves it to
         * the next run, which finds it owed). */
        if (rc == MCDC_OK && s->switch_check && !mcdc_ctx_stopping(&s->ctx))
            rc = snapshot_on_switch(s, err);
    }
    for (int i = 0; i < 2; i++) {
        stream_unit *w = &s->units[i];
        unit_release(s, w);
        json_decref(w->warnings);
        mcdc_changes_batch_free(&w->batch);
        mcdc_free(w->rm);
        memset(w, 0, sizeof *w);
    }
    s->pub = NULL;
    json_decref(s->pending);
    s->warnings = s->pending = NULL;
    mcdc_free(s->ci_alias);
    s->ci_alias = NULL;
    leave_probe(s);
    mcdc_changes_close(s->changes);
    mcdc_budget_release(s->ctx.budget, MCDC_PERMIT_CONNECTION, control);
    mcdc_table_close(s->bronze);
    mcdc_table_close(s->facts);
    mcdc_schema_unref(s->bronze_schema);
    s->bronze = s->facts = NULL;
    s->bronze_schema = NULL;
    s->changes = NULL;
    s->held = NULL;
    mcdc_checkpoint_unlock(held);
    mcdc_runtime_job_ended(s->ctx.metrics, rc, err);
    mcdc_job_leave(host);
    return rc;
}
