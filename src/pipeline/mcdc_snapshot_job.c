/* mcdc_snapshot_job.c - whole snapshots into bronze (see mcdc_snapshot_job.h). */
#include "mcdc_runtime.h"
#include "mcdc_snapshot_job.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcdc_cfg.h"
#include "mcdc_facts.h"
#include "mcdc_fanin.h"
#include "mcdc_frame.h"
#include "mcdc_plans.h"
#include "mcdc_snapfacts.h"
#include "mcdc_stream.h"
#include "mcdc_tables.h"
#include "mcdc_txn.h"

int mcdc_snapshot_purged(void *changes_ctx, const char *lsn, bool *purged, mcdc_error *err) {
    return mcdc_snapshot_purged_after(changes_ctx, lsn, NULL, purged, err);
}

int mcdc_snapshot_purged_after(mcdc_changes *c, const char *lsn, const char *read_ci, bool *purged,
                               mcdc_error *err) {
    *purged = false;
    mcdc_lsn at, next, min;
    int rc = mcdc_lsn_parse_cstr(&at, lsn, err);
    if (rc == MCDC_OK) rc = mcdc_lsn_increment(&next, &at, err);
    /* the instance a stream continuing from lsn reads (ADR 0023: the
     * older one's cleanup does not concern a stream past the newer start) */
    if (rc == MCDC_OK) rc = mcdc_changes_min_lsn_at(c, &next, read_ci, &min, err);
    if (rc == MCDC_OK) *purged = !mcdc_lsn_is_zero(&min) && mcdc_lsn_cmp(&next, &min) < 0;
    return rc;
}

/* ---- finding the newest one ---------------------------------------------------- */
typedef struct {
    const mcdc_snap_env *e;
    /* The newest whole snapshot (or seed), and the newest chunked one's S:
     * its rows carry _chunk, and are stamped per wave. */
    char whole[MCDC_LSN_TEXT_LEN + 1], chunked[MCDC_LSN_TEXT_LEN + 1];
    const char *exact;  /* a whole snapshot at this LSN, looked for too */
    bool exact_found;
} find_acc;

static int file_stats(void *ctx, const char *stats, mcdc_error *err) {
    find_acc *a = ctx;
    if (stats == NULL) return MCDC_OK;
    json_error_t je;
    json_t *j = json_loads(stats, 0, &je);
    json_t *mins = json_object_get(j, "minValues"), *maxs = json_object_get(j, "maxValues"),
           *nulls = json_object_get(j, "nullCount");
    json_int_t records = json_integer_value(json_object_get(j, "numRecords"));
    int rc = MCDC_OK;
    /* A snapshot file holds operation 0 rows only (batches never mix them). */
    json_t *op_min = json_object_get(mins, "_operation"), *op_max = json_object_get(maxs, "_operation");
    bool snapshot_file = records > 0 && json_is_integer(op_min) && json_is_integer(op_max) &&
                         json_integer_value(op_min) == 0 && json_integer_value(op_max) == 0;
    const char *lsn = NULL;
    bool chunked = false;
    if (snapshot_file) {
        bool tagged = json_integer_value(json_object_get(nulls, "_snapshot")) < records;
        lsn = json_string_value(json_object_get(maxs, tagged ? "_snapshot" : "_start_lsn"));
        json_t *chunk_nulls = json_object_get(nulls, "_chunk");
        chunked = json_is_integer(chunk_nulls) && json_integer_value(chunk_nulls) < records;
    }
    const char *ci = json_string_value(json_object_get(mins, "_capture_instance"));
    const char *ci_max = json_string_value(json_object_get(maxs, "_capture_instance"));
    if (lsn && strlen(lsn) == MCDC_LSN_TEXT_LEN && ci) {
        /* Statistics cut strings at 32 characters: a long name is a prefix. */
        bool exact = ci_max && strcmp(ci, ci_max) == 0 && strlen(ci) < 32;
        bool ours = false;
        rc = mcdc_changes_is_table_instance(a->e->changes, ci, !exact, &ours, err);
        char *best = chunked ? a->chunked : a->whole;
        if (rc == MCDC_OK && ours && strcmp(lsn, best) > 0)
            snprintf(best, MCDC_LSN_TEXT_LEN + 1, "%s", lsn);
        if (rc == MCDC_OK && ours && !chunked && a->exact && strcmp(lsn, a->exact) == 0)
            a->exact_found = true;
    }
    json_decref(j);
    return rc;
}

/* A whole snapshot or seed without rows (of an empty table, or an empty copy
 * allowed) has no file to find it by: its commit's userMetadata,
 * {"snapshot" | "seed": <capture instance>, "lsn", "commit_ts"}, says it is
 * there. The walk stops at the newest such commit of the table; a chunked
 * wave's metadata names its S under "snapshot" and has a "kind". */
typedef struct {
    find_acc *a;
    char lsn[MCDC_LSN_TEXT_LEN + 1]; /* the newest whole snapshot commit's */
} commit_acc;

static int snapshot_commit(void *ctx, int64_t version, const char *meta, bool *stop,
                           mcdc_error *err) {
    commit_acc *c = ctx;
    (void)version;
    if (meta == NULL || meta[0] != '{') return MCDC_OK;
    json_error_t je;
    json_t *j = json_loads(meta, 0, &je);
    const char *lsn = json_string_value(json_object_get(j, "lsn"));
    const char *ci = json_string_value(json_object_get(j, "seed"));
    if (ci == NULL) ci = json_string_value(json_object_get(j, "snapshot"));
    bool whole = lsn && strlen(lsn) == MCDC_LSN_TEXT_LEN && ci && *ci &&
                 json_object_get(j, "kind") == NULL && json_object_get(j, "chunks") == NULL;
    bool ours = false;
    int rc = whole ? mcdc_changes_is_table_instance(c->a->e->changes, ci, false, &ours, err) : MCDC_OK;
    if (rc == MCDC_OK && ours) {
        snprintf(c->lsn, sizeof c->lsn, "%s", lsn);
        *stop = true;
    }
    json_decref(j);
    return rc;
}

int mcdc_snapshot_find(mcdc_offset *out, bool *found, const mcdc_snap_env *e, mcdc_error *err) {
    return mcdc_snapshot_find_at(out, found, true, NULL, NULL, e, err);
}

int mcdc_snapshot_find_whole(mcdc_offset *out, bool *found, const mcdc_snap_env *e,
                             mcdc_error *err) {
    return mcdc_snapshot_find_at(out, found, false, NULL, NULL, e, err);
}

int mcdc_snapshot_find_at(mcdc_offset *out, bool *found, bool chunks, const char *exact,
                          bool *exact_found, const mcdc_snap_env *e, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    find_acc a = {.e = e, .exact = exact};
    int rc = mcdc_table_each_file_stats(e->target, file_stats, &a, err);
    commit_acc c = {.a = &a};
    if (rc == MCDC_OK) rc = mcdc_table_each_commit_back(e->target, snapshot_commit, &c, err);
    if (rc == MCDC_OK && c.lsn[0] && strcmp(c.lsn, a.whole) > 0)
        snprintf(a.whole, sizeof a.whole, "%s", c.lsn);
    if (rc == MCDC_OK && c.lsn[0] && exact && strcmp(c.lsn, exact) == 0) a.exact_found = true;
    if (exact_found) *exact_found = rc == MCDC_OK && a.exact_found;
    const char *best = a.whole[0] ? a.whole : chunks && a.chunked[0] ? a.chunked : NULL;
    *found = rc == MCDC_OK && best;
    if (!*found) return rc;
    snprintf(out->lsn, sizeof out->lsn, "%s", best);
    mcdc_lsn l;
    rc = mcdc_lsn_parse_cstr(&l, best, err);
    if (rc == MCDC_OK)
        rc = mcdc_changes_commit_time(e->changes, &l, &out->commit_us, &out->has_commit_ts, err);
    return rc;
}

/* ---- the target's table -------------------------------------------------------------- */
typedef struct {
    mcdc_changes *changes;
    bool any, ours;
    char first[MCDC_IDENT_BYTES_MAX + 1]; /* the first capture instance seen */
} table_acc;

static int table_file(void *ctx, const char *stats, mcdc_error *err) {
    table_acc *a = ctx;
    if (stats == NULL || a->ours) return MCDC_OK;
    json_error_t je;
    json_t *j = json_loads(stats, 0, &je);
    const char *ci[2] = {
        json_string_value(json_object_get(json_object_get(j, "minValues"), "_capture_instance")),
        json_string_value(json_object_get(json_object_get(j, "maxValues"), "_capture_instance"))};
    int rc = MCDC_OK;
    for (int i = 0; i < 2 && rc == MCDC_OK && !a->ours; i++) {
        if (ci[i] == NULL || ci[i][0] == 0) continue;
        /* Statistics cut strings at 32 characters: a long name is a prefix. */
        bool cut = strlen(ci[i]) >= 32;
        if (!a->any) snprintf(a->first, sizeof a->first, "%s", ci[i]);
        a->any = true;
        rc = mcdc_changes_is_table_instance(a->changes, ci[i], cut, &a->ours, err);
        if (rc == MCDC_OK && !a->ours && !cut) a->ours = mcdc_changes_is_table_name(a->changes, ci[i]);
    }
    json_decref(j);
    return rc;
}

int mcdc_snapshot_check_table(mcdc_table *target, const char *name, mcdc_changes *changes,
                              mcdc_error *err) {
    table_acc a = {.changes = changes};
    int rc = mcdc_table_each_file_stats(target, table_file, &a, err);
    if (rc || !a.any || a.ours) return rc;
    return mcdc_error_set(err, MCDC_E_MISMATCH,
                          "target %s holds the rows of capture instance '%s', which is not '%s' "
                          "(of table %s.%s) nor another capture instance of that table: one "
                          "bronze table would hold two tables' rows. Nothing was written. Give "
                          "this table a target of its own, or the options of the stream that "
                          "wrote %s",
                          name, a.first, mcdc_changes_capture_instance(changes),
                          mcdc_changes_source_schema(changes), mcdc_changes_source_table(changes),
                          name);
}

/* ---- taking one ---------------------------------------------------------------------- */
typedef struct {
    mcdc_changes *changes;
    const json_t *keys, *range; /* borrowed from the attempt */
    mcdc_lsn lsn;
    bool has_ts;
    int64_t commit_us;
    mcdc_reader_metrics metrics;
    mcdc_progress_tracker *progress; /* a range read is a part */
} range_job;

static int read_one(void *arg, mcdc_batch_fn put, void *put_ctx, mcdc_error *err) {
    range_job *j = arg;
    int rc = mcdc_changes_snapshot_read(j->changes, j->keys, j->range, MCDC_ISO_OPTION, &j->lsn,
                                        j->has_ts, j->commit_us, put, put_ctx, &j->metrics, err);
    if (rc == MCDC_OK) mcdc_progress_part_done(j->progress);
    return rc;
}

/* The phase of an attempt's read: its ranges, and the rows sp_spaceused
 * counts (asked only when someone listens; none said when it cannot). */
static void reading_phase(mcdc_progress_tracker *t, const mcdc_snap_env *e, int tries,
                          int64_t ranges) {
    if (t == NULL) return;
    int64_t rows = -1;
    mcdc_error why = MCDC_ERROR_INIT;
    if (mcdc_changes_row_estimate(e->changes, &rows, &why) != MCDC_OK) {
        mcdc_log(MCDC_LOG_INFO, "no estimate of the rows to read for the progress: %s",
                 why.message);
        rows = -1;
    }
    mcdc_progress_phase(t, tries ? "reading again" : "reading", "ranges", ranges, rows, true);
}

/* ---- each reader's rows in files of their own ------------------------------------
 * The readers' batches come interleaved; written as they come into one
 * file, every file would hold rows of every range, and no file's key range
 * would stand apart (a rebuild could not read bronze in key order,
 * mcdc_silver_bronze.c). So each reader writes into a data file of its own
 * (its lane of the appender, mcdc_table_props.lanes): each file is one
 * range's rows, in the order read (the range's key order), filled to the
 * full size, and every batch is written when it comes (nothing held). */

/* The appender's lanes for n ranges cut on keys: one per reader when files
 * of one range each pay (only a rebuild of silver on one integer key reads
 * a bronze whose files stand apart without sorting it,
 * mcdc_silver_bronze.c), else one: ranges cut on any other key, one
 * reader, or more readers than an appender keeps files open
 * (MCDC_APPENDER_LANES_MAX), write the batches as they come. */
static int32_t lanes_pay(const mcdc_schema *bronze, const json_t *keys, int readers) {
    if (readers < 2 || readers > MCDC_APPENDER_LANES_MAX || json_array_size(keys) != 1) return 1;
    const char *name = json_string_value(json_array_get(keys, 0));
    int32_t i = name ? mcdc_schema_find(bronze, name) : -1;
    if (i < 0) return 1;
    mcdc_type_id ty = bronze->fields[i].type;
    bool integer = ty == MCDC_TYPE_INT64 || ty == MCDC_TYPE_INT32 || ty == MCDC_TYPE_INT16 ||
                   ty == MCDC_TYPE_INT8;
    return integer ? readers : 1;
}

/* One attempt: ranges read in parallel into one appender, committed. */
static int attempt(mcdc_offset *out, int64_t *rows, const mcdc_snap_env *e,
                   mcdc_progress_tracker *t, int tries, mcdc_snapshot_stamped_fn on_stamped,
                   void *ctx, mcdc_error *err) {
    mcdc_lsn lsn;
    bool has_ts = false;
    int64_t commit_us = 0;
    /* The key first: bad snapshotKeys must stop the snapshot before its
     * stamp (and the open row written there). */
    json_t *keys = NULL, *ranges = NULL;
    int rc = mcdc_changes_snapshot_keys(e->changes, &keys, err);
    if (rc == MCDC_OK) rc = mcdc_changes_snapshot_lsn(e->changes, &lsn, &commit_us, &has_ts, err);
    if (rc) {
        json_decref(keys);
        return rc;
    }
    mcdc_lsn_format(&lsn, out->lsn);
    out->has_commit_ts = has_ts;
    out->commit_us = commit_us;
    if (on_stamped && (rc = on_stamped(ctx, out, err)) != MCDC_OK) {
        json_decref(keys);
        return rc;
    }
    int readers = 0, encoders = 0, n = 0;
    rc = mcdc_budget_acquire(e->ctx->budget, MCDC_PERMIT_CONNECTION, 1, e->num_partitions, 0,
                             &e->ctx->stop, &readers, err);
    if (rc == MCDC_OK) rc = mcdc_changes_snapshot_ranges(e->changes, readers, &ranges, err);
    if (rc == MCDC_OK) n = (int)json_array_size(ranges);
    if (rc == MCDC_OK && n < readers) {
        mcdc_budget_release(e->ctx->budget, MCDC_PERMIT_CONNECTION, readers - n);
        readers = n;
    }
    /* Half the cores encode (1 on 2 or 3). All of them on the 2-core bench
     * machine (10M rows, 2 connections, load 6.7-8): wall no better (8.5 vs
     * 8.4 s, 4 runs each), CPU +5%, peak RSS +35 MB. Nor would an idle
     * 2-core machine gain, by CPU-seconds per thread (perf samples; 3M rows,
     * two runs each, load 4-7): the writing thread took 1.02-1.11 s, each
     * reader 0.29-0.35, the simulator 0.23-0.27, the process 1.62-1.80, so
     * the writer already needs about what two cores give both processes
     * ((ours + the simulator's) / 2 = 1.0 s). Two encoders cut the writing
     * thread to 0.71-0.72 s but not that sum (1.01-1.06 s); one connection
     * instead of two changes neither (1.00-1.12 s), and a lower priority
     * for the second reader moves no CPU-second. On two cores only less
     * CPU a row makes the snapshot faster. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (rc == MCDC_OK)
        rc = mcdc_budget_acquire(e->ctx->budget, MCDC_PERMIT_ENCODER, 1, cores > 3 ? (int)(cores / 2) : 1,
                                 0, &e->ctx->stop, &encoders, err);
    range_job *jobs = rc ? NULL : mcdc_calloc((size_t)n, sizeof *jobs);
    void **args = rc ? NULL : mcdc_calloc((size_t)n, sizeof *args);
    if (rc == MCDC_OK && (jobs == NULL || args == NULL))
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        jobs[i] = (range_job){.changes = e->changes, .keys = keys,
                              .range = json_array_get(ranges, (size_t)i), .lsn = lsn,
                              .has_ts = has_ts, .commit_us = commit_us, .progress = t};
        args[i] = &jobs[i];
    }
    if (rc == MCDC_OK) reading_phase(t, e, tries, n);
    int64_t t0 = mcdc_monotonic_us();
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_INFO, "snapshot of %s.%s stamped %s: %d ranges on %d connections, "
                                "%d encoder threads",
                 mcdc_changes_source_schema(e->changes), mcdc_changes_source_table(e->changes),
                 out->lsn, n, readers, encoders);
    mcdc_table_props props = {.kind = MCDC_KIND_BRONZE, .parquet_threads = encoders,
                              .lanes = rc ? 1 : lanes_pay(e->bronze, keys, n)};
    mcdc_appender *app = NULL;
    mcdc_fanin *fan = NULL;
    if (rc == MCDC_OK) rc = mcdc_appender_open(&app, e->target, e->bronze, &props, err);
    if (rc == MCDC_OK) rc = mcdc_fanin_start(&fan, n, MCDC_QUEUE_DEPTH_MAX, read_one, args, err);
    mcdc_batch *b;
    *rows = 0;
    int from = 0;
    while (rc == MCDC_OK && (b = mcdc_fanin_next_from(fan, &from)) != NULL) {
        *rows += b->rows;
        int64_t got = b->rows, bytes = 0;
        rc = mcdc_bronze_widen(b, e->bronze, -1, out->lsn, -1, err);
        if (rc == MCDC_OK) bytes = mcdc_batch_bytes(b);
        /* each reader's batches into its lane's file, at once */
        if (rc == MCDC_OK) rc = mcdc_appender_write_lane(app, props.lanes > 1 ? from : 0, b, err);
        mcdc_batch_free(b);
        if (rc == MCDC_OK && t) mcdc_progress_add(t, got, bytes);
        if (rc == MCDC_OK) rc = mcdc_ctx_check_stop(e->ctx, "the snapshot", err);
        /* Crash tests: killed while the table is read (reference crash point 10). */
        if (rc == MCDC_OK && mcdc_ctx_crash(e->ctx, "during_snapshot", 0))
            rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed while reading the snapshot (test hook)");
    }
    int frc = mcdc_fanin_finish(fan, NULL, rc ? NULL : err);
    if (rc == MCDC_OK) rc = frc;
    mcdc_budget_release(e->ctx->budget, MCDC_PERMIT_CONNECTION, readers);
    /* The stream continues after the snapshot's LSN: cleanup must not have
     * passed it while the table was read. */
    mcdc_lsn min, next;
    if (rc == MCDC_OK) rc = mcdc_lsn_increment(&next, &lsn, err);
    if (rc == MCDC_OK) rc = mcdc_changes_min_lsn_at(e->changes, &next, NULL, &min, err);
    if (rc == MCDC_OK && !mcdc_lsn_is_zero(&min) && mcdc_lsn_cmp(&next, &min) < 0) {
        char m[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&min, m);
        rc = mcdc_error_set(err, MCDC_E_DATALOSS,
                            "capture instance %s: CDC cleanup moved min_lsn to %s while the "
                            "snapshot stamped %s was read, so no stream can continue from it; "
                            "nothing was committed. Take the snapshot again (a larger "
                            "numPartitions reads faster), or keep CDC's retention longer",
                            mcdc_changes_capture_instance(e->changes), m, out->lsn);
    }
    if (rc == MCDC_OK) rc = mcdc_ctx_check_stop(e->ctx, "the snapshot", err);
    if (rc == MCDC_OK) {
        char ts[32];
        mcdc_offset_commit_text(out, ts);
        json_t *meta = json_pack("{s:s, s:s, s:s}", "snapshot",
                                 mcdc_changes_capture_instance(e->changes), "lsn", out->lsn,
                                 "commit_ts", ts);
        char *text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
        json_decref(meta);
        bool skipped = false;
        int64_t version;
        /* the files' last row groups are encoded, then the commit */
        mcdc_progress_phase(t, "committing", NULL, -1, *rows, false);
        rc = text ? mcdc_appender_commit(app, NULL, 0, text, &skipped, &version, err)
                  : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (rc == MCDC_OK) mcdc_progress_add(t, *rows, 0);
        if (rc == MCDC_OK)
            mcdc_log(MCDC_LOG_INFO, "snapshot of %s.%s: %lld rows read and committed in %.3f s",
                     mcdc_changes_source_schema(e->changes), mcdc_changes_source_table(e->changes),
                     (long long)*rows, (double)(mcdc_monotonic_us() - t0) / 1e6);
        free(text);
    }
    mcdc_appender_free(app);
    mcdc_budget_release(e->ctx->budget, MCDC_PERMIT_ENCODER, encoders);
    mcdc_free(jobs);
    mcdc_free(args);
    json_decref(ranges);
    json_decref(keys);
    return rc;
}

int mcdc_snapshot_append(mcdc_offset *out, int64_t *rows, const mcdc_snap_env *e,
                         mcdc_snapshot_stamped_fn on_stamped, void *ctx, mcdc_error *err) {
    /* the job's tracker, else one of the snapshot's own (a stream's) */
    mcdc_progress_tracker *own = NULL, *t = e->ctx->progress;
    int rc = t ? MCDC_OK : mcdc_ctx_progress_create(&own, e->ctx, "snapshot", err);
    if (rc) return rc;
    if (own) t = own;
    for (int tries = 0;; tries++) {
        rc = attempt(out, rows, e, t, tries, on_stamped, ctx, err);
        if (rc != MCDC_E_TRANSIENT || tries >= MCDC_RETRIES_MAX || mcdc_ctx_stopping(e->ctx))
            break;
        mcdc_log(MCDC_LOG_WARN, "snapshot of %s.%s: %s; reading it again (attempt %d of %d)",
                 mcdc_changes_source_schema(e->changes), mcdc_changes_source_table(e->changes),
                 err ? err->message : "transient error", tries + 2, MCDC_RETRIES_MAX + 1);
        mcdc_sleep_ms((int64_t)MCDC_RETRY_BACKOFF_MS_FIRST << tries);
    }
    mcdc_progress_end(own);
    return rc;
}

/* ---- opening a chunked one ----------------------------------------------------------- */

int mcdc_snapshot_open_chunked(mcdc_offset *s, const mcdc_chunked_open *o, mcdc_error *err) {
    memset(s, 0, sizeof *s);
    json_t *keys = NULL, *extent = NULL;
    mcdc_lsn lsn;
    /* S first: MIN and MAX are read after it, so a key outside them was
     * inserted after S and reaches bronze through the stream. */
    int rc = mcdc_changes_snapshot_keys(o->changes, &keys, err);
    if (rc == MCDC_OK && o->at) {
        *s = *o->at;
        rc = mcdc_lsn_parse_cstr(&lsn, s->lsn, err);
    } else if (rc == MCDC_OK) {
        rc = mcdc_changes_snapshot_lsn(o->changes, &lsn, &s->commit_us, &s->has_commit_ts, err);
    }
    if (rc == MCDC_OK) mcdc_lsn_format(&lsn, s->lsn);
    if (rc == MCDC_OK)
        rc = mcdc_changes_snapshot_extent(o->changes, keys, MCDC_ISO_OPTION, &extent, err);
    bool lost = o->lost_from != NULL;
    MCDC_ASSERT(!(lost && o->at));
    json_t *d = rc ? NULL
                : o->at ? mcdc_snap_switch_detail("chunked", o->generation, o->switch_batch_id)
                        : mcdc_snap_open_detail("chunked", o->kind, o->generation,
                                                lost && o->lost_from->has_commit_ts,
                                                lost ? o->lost_from->commit_us : 0,
                                                o->has_lost_to, o->lost_to_us);
    if (rc == MCDC_OK && d == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK) {
        json_object_set(d, "keys", keys);
        json_object_set(d, "plan", extent);
    }
    char txn[MCDC_TXN_APP_ID_MAX] = "";
    if (rc == MCDC_OK) rc = mcdc_txn_app_id(txn, sizeof txn, MCDC_TXN_SNAPOPEN, o->app_id, 0, s->lsn, err);
    char *plans_name = NULL;
    mcdc_table *plans = NULL;
    bool skipped = false;
    if (rc == MCDC_OK) rc = mcdc_plans_name(&plans_name, o->target, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&plans, o->env, plans_name, o->warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_table_check_kind(plans, MCDC_KIND_PLANS, "plans table", err);
    /* The key values go to the plans table before the facts row. */
    if (rc == MCDC_OK) rc = mcdc_plans_write(plans, s->lsn, "snapshot_open", &d, 1, txn, 0, &skipped, err);
    json_t *pub = rc ? NULL : mcdc_plans_public("snapshot_open", d);
    char *detail = pub ? json_dumps(pub, JSON_COMPACT) : NULL;
    json_decref(pub);
    if (rc == MCDC_OK && detail == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK && o->at && o->ctx &&
        mcdc_ctx_crash(o->ctx, "switch_snapshot_opened", o->switch_batch_id))
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed after the plans row (test hook)");
    if (rc == MCDC_OK && o->at == NULL)
        rc = mcdc_txn_app_id(txn, sizeof txn, MCDC_TXN_SNAPSHOTS, o->app_id, 0, NULL, err);
    if (rc == MCDC_OK) {
        mcdc_facts_event ev = {.app_id = o->sink, .target = o->target, .event = "snapshot_open",
                               .rows = 0, .lsn = s->lsn, .has_commit_ts = s->has_commit_ts,
                               .commit_us = s->commit_us, .detail = detail,
                               .has_lost_from = lost && o->lost_from->has_commit_ts,
                               .lost_from_us = lost ? o->lost_from->commit_us : 0,
                               .has_lost_to = o->has_lost_to, .lost_to_us = o->lost_to_us};
        rc = mcdc_facts_write_event(o->facts, &ev, txn, o->at ? 0 : o->generation, &skipped, err);
    }
    free(detail);
    /* The open that stands: a rerun's row was skipped, the first one's
     * S is the generation's. */
    mcdc_snapfacts sf = {0};
    bool own = o->at == NULL; /* a switch's: once per S, so the row that stands is this S's */
    if (rc == MCDC_OK && own)
        rc = mcdc_snapfacts_load(&sf, o->facts, o->target, o->warehouse, o->app_id, err);
    bool done;
    const mcdc_snap_row *top = rc || !own ? NULL : mcdc_snapfacts_opened(&sf, o->sink, &done);
    if (rc == MCDC_OK && own && (top == NULL || strcmp(mcdc_snap_mode(top), "chunked") != 0))
        rc = mcdc_error_set(err, MCDC_E_SNAPSHOT_OPEN,
                            "%s: another run opened a %s snapshot for %s first; run again",
                            o->target, top ? mcdc_snap_mode(top) : "no", o->sink);
    if (rc == MCDC_OK && own && strcmp(top->min_lsn, s->lsn) != 0) {
        snprintf(s->lsn, sizeof s->lsn, "%s", top->min_lsn);
        s->has_commit_ts = top->has_min_ts;
        s->commit_us = top->min_ts_us;
    }
    if (rc == MCDC_OK && own)
        mcdc_log(MCDC_LOG_INFO, "chunked snapshot of %s opened at %s for %s (%s, generation %lld)",
                 o->target, s->lsn, o->sink, o->kind, (long long)o->generation);
    else if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_INFO, "chunked snapshot of %s opened at %s for %s after the capture "
                                "instance switch of batch %lld (generation %lld): mssql-cdc "
                                "backfill reads it",
                 o->target, s->lsn, o->sink, (long long)o->switch_batch_id, (long long)o->generation);
    /* a host's backfill schedule learns that there is a snapshot to read */
    if (rc == MCDC_OK && o->ctx) mcdc_runtime_job_chunked_opened(o->ctx->metrics, s->lsn);
    mcdc_snapfacts_free(&sf);
    mcdc_table_close(plans);
    mcdc_free(plans_name);
    json_decref(d);
    json_decref(keys);
    json_decref(extent);
    return rc;
}

/* ---- the snapshot command ------------------------------------------------------- */
static int snapshot_take(mcdc_offset *out, int64_t *rows, bool *taken, const mcdc_opts *opts,
                         const mcdc_snapshot_cfg *cfg, mcdc_job_entry *metrics,
                         mcdc_error *err) {
    if (out == NULL || rows == NULL || taken == NULL || opts == NULL || cfg == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_snapshot_take: a NULL argument");
    /* the caller's version's fields, the defaults after them */
    mcdc_snapshot_cfg given;
    int rc = mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_SNAPSHOT, cfg, err);
    if (rc) return rc;
    cfg = &given;
    if (cfg->target == NULL || *cfg->target == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "a snapshot needs a target");
    const char *app_id = cfg->app_id;
    const char *facts_name = cfg->facts_table;
    if ((app_id == NULL) != (facts_name == NULL))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--app-id and --facts-table go together: the stream's, whose open "
                              "snapshots are checked");
    memset(out, 0, sizeof *out);
    *rows = 0;
    *taken = false;
    rc = mcdc_opts_check_required(opts, err);
    const mcdc_role roles[2] = {{"--target", cfg->target, true},
                                {"--facts-table", facts_name, true}};
    if (rc == MCDC_OK) rc = mcdc_roles_check(roles, 2, cfg->warehouse, NULL, err);
    if (rc) return rc;
    mcdc_ctx ctx = {.budget = mcdc_runtime_budget_or(cfg->runtime, cfg->budget),
                    .progress_fn = cfg->progress_fn, .progress_user = cfg->progress_user,
                    .host_stop = cfg->stop, .metrics = metrics};
    mcdc_ctx_take_storage(&ctx, opts, cfg->runtime);
    rc = mcdc_ctx_progress_create(&ctx.progress, &ctx, "snapshot", err);
    if (rc) return rc;
    if (given.log_fn == NULL) given.log_fn = mcdc_runtime_log_fn(cfg->runtime, &given.log_user);
    mcdc_log_sink sink = {cfg->log_fn, cfg->log_user, cfg->log_level};
    const mcdc_log_sink *host = mcdc_log_use(&sink); /* log_fn NULL: stderr, at log_level */
    mcdc_table *target = NULL;
    mcdc_changes *changes = NULL;
    mcdc_schema *bronze = NULL;
    int control = 0;
    mcdc_table *facts = NULL;
    rc = mcdc_table_open_env(&target, ctx.storage_env, cfg->target, cfg->warehouse, err);
    if (rc == MCDC_OK && facts_name)
        rc = mcdc_table_open_env(&facts, ctx.storage_env, facts_name, cfg->warehouse, err);
    /* The frame's check of the tables' roles: a whole snapshot is no unit of
     * the frame (the header says why), but it writes to the stream's bronze */
    const mcdc_frame_role tables[2] = {{target, MCDC_KIND_BRONZE, "target"},
                                      {facts, MCDC_KIND_FACTS, "facts table"}};
    if (rc == MCDC_OK) rc = mcdc_frame_check_roles(tables, 2, err);
    if (rc == MCDC_OK)
        rc = mcdc_budget_acquire(ctx.budget, MCDC_PERMIT_CONNECTION, 1, 1, 1, &ctx.stop, &control, err);
    if (rc == MCDC_OK) rc = mcdc_changes_open(&changes, opts, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_snapshot_check_table(target, cfg->target, changes, err);
    if (rc == MCDC_OK) rc = mcdc_bronze_schema(&bronze, mcdc_changes_schema(changes), err);
    mcdc_snap_env e = {.ctx = &ctx, .changes = changes, .target = target, .bronze = bronze,
                       .num_partitions = mcdc_opt_num_partitions(opts)};
    /* A chunked snapshot of the stream still open: this would be a full one. */
    mcdc_snapfacts sf = {0};
    if (rc == MCDC_OK && facts)
        rc = mcdc_snapfacts_load(&sf, facts, cfg->target, cfg->warehouse, app_id, err);
    if (rc == MCDC_OK && facts)
        rc = mcdc_snapfacts_lock(&sf, cfg->target, "full", mcdc_snapshot_purged, changes, err);
    mcdc_snapfacts_free(&sf);
    mcdc_table_close(facts);
    bool found = false;
    if (rc == MCDC_OK && !cfg->resnapshot) rc = mcdc_snapshot_find(out, &found, &e, err);
    if (rc == MCDC_OK && !found) {
        rc = mcdc_snapshot_append(out, rows, &e, NULL, NULL, err);
        *taken = rc == MCDC_OK;
    }
    mcdc_schema_unref(bronze);
    mcdc_changes_close(changes);
    mcdc_budget_release(ctx.budget, MCDC_PERMIT_CONNECTION, control);
    mcdc_table_close(target);
    mcdc_progress_end(ctx.progress);
    mcdc_log_use(host);
    return rc;
}

/* Taken with its runtime's accounting bound (mcdc_runtime.h). */
int mcdc_snapshot_take(mcdc_offset *out, int64_t *rows, bool *taken, const mcdc_opts *opts,
                       const mcdc_snapshot_cfg *cfg, mcdc_error *err) {
    mcdc_call_scope in = mcdc_runtime_call_enter(MCDC_CFG_SNAPSHOT, cfg,
                                                 offsetof(mcdc_snapshot_cfg, runtime), "snapshot",
                                                 offsetof(mcdc_snapshot_cfg, target));
    int rc = snapshot_take(out, rows, taken, opts, cfg, in.metrics, err);
    mcdc_runtime_call_leave(in);
    return rc;
}
