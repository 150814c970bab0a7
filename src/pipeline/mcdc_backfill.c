/*
 * mcdc_backfill.c - chunked snapshots read in waves next to the stream
 * (reference §2.4.2, ADR 0028; the public contract is in mssqlcdc.h).
 *
 * A wave is one unit of the job frame (mcdc_frame.h), on a ledger of its
 * own that lives in the lake, as the reference keeps it:
 *
 *   plan     the wave's chunks as 'snapshot_chunk' rows of the plans table,
 *            txn(<app_id>#snapchunks.<S>, wave)                after_plan
 *   run      max_lsn L before the read; the chunks read on numPartitions
 *            connections; one bronze commit, txn(<app_id>#snap.<S>, wave),
 *            userMetadata the reference's WaveMetadata        after_bronze
 *   facts    one 'snapshot_chunk' facts row per chunk, the same txn as the
 *            plans rows: the wave's commit record             after_facts
 *
 * so the ledger's last planned wave is the plans table's txn version and
 * its last committed one the facts table's. A rerun after a crash between
 * the plans rows and the facts rows reads exactly the chunks those rows
 * hold (whatever numPartitions and the pace say); between the append and
 * the facts rows, Delta holds the wave already and its facts come from the
 * commit's userMetadata (or, once log cleanup dropped it, from its rows).
 * A wave another program appended before writing its plans rows (the
 * reference appends first) is taken as the plan of that wave.
 *
 * Before the first wave, the whole plan: a 'snapshot_plan' plans row, then
 * its facts row (both txn <app_id>#snapplan.<S>, version 0). After the
 * last chunk, the completion ('bootstrap' or 'resnapshot', txn
 * <app_id>#events, version generation).
 *
 * Two backfills of one snapshot: a wave planned by one is read again by the
 * other (same ledger id, same plan: Delta keeps one commit), and a wave the
 * other plans differently is refused (MCDC_E_FOREIGN_WRITER): nothing twice,
 * nothing lost, one of them stops.
 */
#include "mssqlcdc.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_cfg.h"
#include "mcdc_changes.h"
#include "mcdc_context.h"
#include "mcdc_facts.h"
#include "mcdc_fanin.h"
#include "mcdc_frame.h"
#include "mcdc_ledger.h"
#include "mcdc_offset.h"
#include "mcdc_plans.h"
#include "mcdc_runtime.h"
#include "mcdc_snapfacts.h"
#include "mcdc_snapshot_job.h"
#include "mcdc_tables.h"
#include "mcdc_txn.h"

#define DEFAULT_CHUNK_ROWS 1000000
/* A wave's seconds when none are given: a few minutes amortise a wave's
 * fixed cost (the reference's figure; ours is milliseconds, so this only
 * sets how often the facts get a row). */
#define DEFAULT_WAVE_SECONDS 300.0

typedef struct chunk_rec {   /* a chunk the facts record as read */
    int64_t chunk, wave, rows, duration_ms;
    bool last;
    char lsn[MCDC_LSN_TEXT_LEN + 1];
} chunk_rec;

typedef struct wave_chunk {  /* a chunk of the wave being run */
    int64_t chunk;
    json_t *lo, *hi;         /* owned: the unit's end position's bounds */
    bool last;
    int64_t rows;
    char high_lsn[MCDC_LSN_TEXT_LEN + 1];
    bool has_read;
    double read_seconds, read_mb;
} wave_chunk;

struct mcdc_backfill {
    mcdc_ctx ctx;
    mcdc_backfill_cfg cfg;
    char *strings[5];
    const mcdc_opts *opts;
    mcdc_log_sink sink;
    /* While running: */
    mcdc_changes *changes;
    mcdc_table *bronze, *facts, *plans;
    mcdc_schema *bronze_schema;
    char *plans_name;
    mcdc_snapfacts sf;
    const mcdc_snap_row *top;   /* the open, in sf */
    char s[MCDC_LSN_TEXT_LEN + 1];
    char *sink_id;              /* the generation that opened it */
    json_t *info;               /* the open's detail, whole */
    json_t *plan;               /* the snapshot_plan detail, whole */
    mcdc_plan_rows prows;
    chunk_rec *done;
    int n_done, cap_done;
    char ledger_id[MCDC_TXN_APP_ID_MAX];          /* <app_id>#snap.<S>: bronze's txn */
    char ledger_name[MCDC_APP_ID_BYTES_MAX + 96]; /* for messages */
    mcdc_pos first_pos;                           /* {"chunk": 0} */
    char chunks_id[MCDC_TXN_APP_ID_MAX];          /* <app_id>#snapchunks.<S> */
    mcdc_isolation iso;
    int k;                      /* numPartitions */
    double pace_s;              /* seconds a round of k chunks took; 0: unknown */
    int64_t t0_us;
    /* The wave being run. */
    wave_chunk *w;
    int nw;
    char stamp[MCDC_LSN_TEXT_LEN + 1];
    bool stamp_has_ts;
    int64_t stamp_ts_us, started_us, duration_ms;
    mcdc_backfill_status st;
};

/* ---- small helpers -------------------------------------------------------------- */

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

static json_t *int_json(int64_t v) { return json_integer((json_int_t)v); }

static int64_t jint(const json_t *o, const char *key, int64_t dflt) {
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static json_t *plan_chunks(const mcdc_backfill *b) { return json_object_get(b->plan, "chunks"); }

static int64_t chunk_count(const mcdc_backfill *b) {
    return b->plan ? (int64_t)json_array_size(plan_chunks(b)) : -1;
}

/* Keys compared ignoring case, as SQL Server resolves names. */
static bool same_keys(const json_t *a, const json_t *b) {
    if (!json_is_array(a) || !json_is_array(b) || json_array_size(a) != json_array_size(b))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++) {
        const char *x = json_string_value(json_array_get(a, i));
        const char *y = json_string_value(json_array_get(b, i));
        if (!x || !y || !mcdc_str_ieq(x, y)) return false;
    }
    return true;
}

static void status_set(mcdc_backfill *b, mcdc_backfill_state state, bool paused,
                       const char *reason) {
    b->st.state = state;
    b->st.paused = paused;
    snprintf(b->st.reason, sizeof b->st.reason, "%s", reason ? reason : "");
}

/* ---- the chunks the facts hold ------------------------------------------------ */

static int add_done(mcdc_backfill *b, const chunk_rec *r, mcdc_error *err) {
    if (b->n_done == b->cap_done) {
        int cap = b->cap_done ? 2 * b->cap_done : 64;
        chunk_rec *v = mcdc_realloc(b->done, (size_t)cap * sizeof *v);
        if (v == NULL) return nomem(err);
        b->done = v;
        b->cap_done = cap;
    }
    b->done[b->n_done++] = *r;
    return MCDC_OK;
}

static int cmp_chunk(const void *x, const void *y) {
    const chunk_rec *a = x, *c = y;
    return (a->chunk > c->chunk) - (a->chunk < c->chunk);
}

static int load_done(mcdc_backfill *b, mcdc_error *err) {
    int rc = MCDC_OK;
    for (int i = 0; i < b->sf.n && rc == MCDC_OK; i++) {
        const mcdc_snap_row *r = &b->sf.rows[i];
        const char *of = json_string_value(json_object_get(r->detail, "snapshot"));
        if (r->event != MCDC_SNAP_CHUNK || of == NULL || strcmp(of, b->s) != 0) continue;
        chunk_rec c = {.chunk = jint(r->detail, "chunk", -1),
                       .wave = jint(r->detail, "wave", -1),
                       .rows = r->has_rows ? r->rows : 0,
                       .duration_ms = r->has_duration ? r->duration_ms : 0,
                       .last = json_is_true(json_object_get(r->detail, "last"))};
        snprintf(c.lsn, sizeof c.lsn, "%s", r->min_lsn);
        if (c.chunk < 0 || c.wave < 0)
            rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                "a snapshot_chunk facts row of snapshot %s has no chunk or wave "
                                "number: the facts table is damaged",
                                b->s);
        else
            rc = add_done(b, &c, err);
    }
    if (rc == MCDC_OK && b->n_done) qsort(b->done, (size_t)b->n_done, sizeof *b->done, cmp_chunk);
    return rc;
}

static bool all_done(const mcdc_backfill *b) {
    return b->n_done > 0 && b->done[b->n_done - 1].last;
}

/* ---- the pause (min_headroom_hours) ------------------------------------------------ */

typedef struct {
    const char *sink;
    bool found;
    int64_t written_us;
    bool has_headroom;
    double headroom;
} headroom_acc;

static int headroom_rows(void *ctx, mcdc_batch *bt, mcdc_error *err) {
    (void)err;
    headroom_acc *a = ctx;
    size_t n = strlen(a->sink);
    for (int64_t r = 0; r < bt->rows; r++) {
        mcdc_cell app = mcdc_row_get(bt, r, 0), bid = mcdc_row_get(bt, r, 1),
                  ev = mcdc_row_get(bt, r, 2), hr = mcdc_row_get(bt, r, 3),
                  at = mcdc_row_get(bt, r, 4);
        if (app.kind != MCDC_CELL_TEXT || (size_t)app.i != n || memcmp(app.s, a->sink, n) != 0 ||
            bid.kind == MCDC_CELL_NULL || ev.kind != MCDC_CELL_NULL || at.kind != MCDC_CELL_INT)
            continue;
        if (a->found && at.i <= a->written_us) continue;
        a->found = true;
        a->written_us = at.i;
        a->has_headroom = hr.kind == MCDC_CELL_DOUBLE;
        a->headroom = hr.d;
    }
    mcdc_batch_free(bt);
    return MCDC_OK;
}

/* Why the backfill pauses now, or MCDC_OK with *paused false: the stream's
 * newest batch row's headroom, less that row's age, below the minimum. */
static int throttle(mcdc_backfill *b, bool *paused, mcdc_error *err) {
    *paused = false;
    if (!b->cfg.has_min_headroom) return MCDC_OK;
    static const char *const cols[] = {"app_id", "batch_id", "event", "retention_headroom_hours",
                                       "written_at"};
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.columns = cols;
    sc.n_columns = 5;
    headroom_acc a = {.sink = b->sink_id};
    int64_t v;
    int rc = mcdc_table_scan_run(b->facts, &sc, headroom_rows, &a, &v, NULL, err);
    if (rc) return rc;
    char why[512];
    if (!a.found || !a.has_headroom) {
        snprintf(why, sizeof why,
                 "the stream %s has written no facts row with retention_headroom_hours: is it "
                 "running?", b->sink_id);
        status_set(b, MCDC_BACKFILL_WAITING_METRICS, true, why);
        *paused = true;
        return MCDC_OK;
    }
    double age = (double)(mcdc_now_utc_us() - a.written_us) / 3600e6;
    double left = a.headroom - age;
    if (left >= b->cfg.min_headroom_hours) return MCDC_OK;
    snprintf(why, sizeof why,
             "retention headroom %.2f h (the stream's newest facts row, %.2f h old) is below "
             "--min-headroom-hours %g",
             left, age, b->cfg.min_headroom_hours);
    status_set(b, MCDC_BACKFILL_WAITING_HEADROOM, true, why);
    *paused = true;
    return MCDC_OK;
}

/* ---- the plan --------------------------------------------------------------------- */

/* Plans every chunk once: the plans row, then its facts row. A plan another
 * run recorded first stands (Delta skips ours). */
static int make_plan(mcdc_backfill *b, mcdc_error *err) {
    int64_t rows = b->cfg.chunk_rows > 0 ? b->cfg.chunk_rows : DEFAULT_CHUNK_ROWS;
    mcdc_progress_phase(b->ctx.progress, "planning", NULL, -1, -1, false);
    int64_t started = mcdc_now_utc_us(), t0 = mcdc_monotonic_us();
    json_t *keys = json_object_get(b->info, "keys"), *extent = json_object_get(b->info, "plan");
    json_t *chunks = NULL;
    int rc = mcdc_changes_plan_chunks(b->changes, keys, extent, rows, b->iso, &chunks, err);
    json_t *d = rc ? NULL
                   : json_pack("{s:s, s:O, s:O, s:I, s:o, s:I}", "snapshot", b->s, "kind",
                               json_object_get(extent, "kind"), "keys", keys, "chunk_rows",
                               (json_int_t)rows, "chunks", chunks, "chunk_count",
                               (json_int_t)json_array_size(chunks));
    if (rc == MCDC_OK && d == NULL) rc = nomem(err);
    char txn[MCDC_TXN_APP_ID_MAX];
    bool skipped = false;
    if (rc == MCDC_OK)
        rc = mcdc_txn_app_id(txn, sizeof txn, MCDC_TXN_SNAPPLAN, b->cfg.app_id, 0, b->s, err);
    if (rc == MCDC_OK) rc = mcdc_plans_write(b->plans, b->s, "snapshot_plan", &d, 1, txn, 0, &skipped, err);
    json_decref(d);
    /* The plan that stands: re-read. */
    if (rc == MCDC_OK) {
        mcdc_plan_rows_free(&b->prows);
        rc = mcdc_plans_load(&b->prows, b->plans, b->s, err);
    }
    const json_t *standing = rc ? NULL : mcdc_plan_rows_find(&b->prows, "snapshot_plan", -1, -1);
    if (rc == MCDC_OK && standing == NULL)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "%s: the plan of snapshot %s just written is not "
                                                 "there", b->plans_name, b->s);
    if (rc == MCDC_OK) b->plan = json_deep_copy(standing);
    if (rc == MCDC_OK && mcdc_ctx_crash(&b->ctx, "after_snapshot_plan_rows", 0))
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed after the plan's rows (test hook)");
    json_t *pub = rc ? NULL : mcdc_plans_public("snapshot_plan", b->plan);
    char *text = pub ? json_dumps(pub, JSON_COMPACT) : NULL;
    json_decref(pub);
    if (rc == MCDC_OK && text == NULL) rc = nomem(err);
    if (rc == MCDC_OK) {
        mcdc_facts_event ev = {.app_id = b->sink_id, .target = b->cfg.target,
                               .event = "snapshot_plan", .rows = 0, .lsn = b->s,
                               .has_commit_ts = b->top->has_min_ts, .commit_us = b->top->min_ts_us,
                               .detail = text, .has_timing = true, .started_us = started,
                               .duration_ms = (mcdc_monotonic_us() - t0) / 1000};
        rc = mcdc_facts_write_event(b->facts, &ev, txn, 0, &skipped, err);
    }
    free(text);
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_INFO, "backfill of %s (snapshot %s): %lld chunks of at most about "
                                "%lld rows planned", b->cfg.target, b->s,
                 (long long)chunk_count(b), (long long)rows);
    return rc;
}

/* ---- the ledger: plans rows plan a wave, facts rows commit it ------------------------ */

/* A wave's start {"chunk": first} (its end's first chunk). */
static void wave_start(mcdc_pos *start, const mcdc_pos *end) {
    mcdc_pos_free(start);
    start->kind = MCDC_POS_WAVE;
    start->wave.chunk = end->wave.n ? end->wave.chunks[0].chunk : end->wave.chunk;
}

/* A wave's planned chunks from its plans rows: start {"chunk": first},
 * end {"chunk": last + 1, "chunks": [[i, lo, hi], ...]}; *found false when
 * it has none. */
static int wave_from_plans(mcdc_backfill *b, int64_t n, mcdc_pos *start, mcdc_pos *end,
                           bool *found, mcdc_error *err) {
    *found = false;
    int64_t first = -1, last = -1;
    int32_t m = 0;
    for (int i = 0; i < b->prows.n; i++) {
        const struct mcdc_plan_row *r = &b->prows.rows[i];
        if (strcmp(r->event, "snapshot_chunk") != 0 || r->wave != n) continue;
        if (first < 0 || r->chunk < first) first = r->chunk;
        if (r->chunk > last) last = r->chunk;
        m++;
    }
    if (m == 0) return MCDC_OK;
    /* In chunk order; they must be consecutive. */
    if (last - first + 1 != m)
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "%s: the rows of wave %lld of snapshot %s skip a chunk between %lld "
                              "and %lld: the plans table is damaged",
                              b->plans_name, (long long)n, b->s, (long long)first, (long long)last);
    int rc = mcdc_pos_wave_alloc(end, last + 1, m, err);
    for (int32_t i = 0; rc == MCDC_OK && i < m; i++) end->wave.chunks[i].chunk = -1;
    for (int i = 0; rc == MCDC_OK && i < b->prows.n; i++) {
        const struct mcdc_plan_row *r = &b->prows.rows[i];
        if (strcmp(r->event, "snapshot_chunk") != 0 || r->wave != n) continue;
        mcdc_pos_chunk *c = &end->wave.chunks[r->chunk - first];
        if (c->chunk >= 0) /* a chunk twice (so another one is missing) */
            rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                "%s: wave %lld of snapshot %s holds chunk %lld twice: the plans "
                                "table is damaged",
                                b->plans_name, (long long)n, b->s, (long long)r->chunk);
        c->chunk = r->chunk;
        if (rc == MCDC_OK) rc = mcdc_pos_bound_text(&c->lo, json_object_get(r->detail, "lo"), err);
        if (rc == MCDC_OK) rc = mcdc_pos_bound_text(&c->hi, json_object_get(r->detail, "hi"), err);
    }
    if (rc) {
        mcdc_pos_free(end);
        return rc;
    }
    wave_start(start, end);
    *found = true;
    return MCDC_OK;
}

/* A wave bronze holds without plans rows (another program appended it
 * first): its chunks from the commit's userMetadata. */
static int wave_from_bronze(mcdc_backfill *b, int64_t n, mcdc_pos *start, mcdc_pos *end,
                            bool *found, mcdc_error *err) {
    *found = false;
    char *um = NULL;
    int64_t version;
    int rc = mcdc_table_txn_commit(b->bronze, b->ledger_id, n, &um, &version, err);
    if (rc == MCDC_E_NOTFOUND) return mcdc_error_set(err, MCDC_E_CORRUPT,
                                                     "%s holds wave %lld of snapshot %s, but "
                                                     "neither its commit nor the plans table "
                                                     "tells its chunks",
                                                     mcdc_table_name(b->bronze), (long long)n, b->s);
    if (rc) return rc;
    json_error_t je;
    json_t *meta = um ? json_loads(um, 0, &je) : NULL;
    mcdc_free(um);
    json_t *chunks = json_object_get(meta, "chunks");
    int32_t m = 0;
    size_t i;
    json_t *c;
    json_array_foreach(chunks, i, c) m += jint(c, "chunk", -1) >= 0;
    rc = m ? mcdc_pos_wave_alloc(end, 0, m, err)
           : mcdc_error_set(err, MCDC_E_CORRUPT,
                            "%s: the commit of wave %lld of snapshot %s names no chunks",
                            mcdc_table_name(b->bronze), (long long)n, b->s);
    int32_t k = 0;
    json_array_foreach(chunks, i, c) {
        int64_t id = jint(c, "chunk", -1);
        if (rc || id < 0) continue;
        mcdc_pos_chunk *pc = &end->wave.chunks[k++];
        pc->chunk = id;
        rc = mcdc_pos_bound_text(&pc->lo, json_object_get(c, "lo"), err);
        if (rc == MCDC_OK) rc = mcdc_pos_bound_text(&pc->hi, json_object_get(c, "hi"), err);
        end->wave.chunk = id + 1;
    }
    json_decref(meta);
    if (rc) {
        mcdc_pos_free(end);
        return rc;
    }
    wave_start(start, end);
    *found = true;
    return MCDC_OK;
}

static const char *l_id(void *self) { return ((mcdc_backfill *)self)->ledger_id; }
static const char *l_name(void *self) { return ((mcdc_backfill *)self)->ledger_name; }
static bool l_fresh(void *self) { (void)self; return false; }
static const mcdc_pos *l_start(void *self) { return &((mcdc_backfill *)self)->first_pos; }

static int l_last(void *self, int64_t *planned, int64_t *committed, mcdc_error *err) {
    mcdc_backfill *b = self;
    int64_t p = -1, c = -1, d = -1;
    int rc = mcdc_table_txn_version(b->plans, b->chunks_id, &p, err);
    if (rc == MCDC_OK) rc = mcdc_table_txn_version(b->facts, b->chunks_id, &c, err);
    if (rc == MCDC_OK) rc = mcdc_table_txn_version(b->bronze, b->ledger_id, &d, err);
    if (rc) return rc;
    /* A wave appended by a program that writes its plans rows after. */
    if (d > p) p = d;
    if (c > p) p = c; /* a snapshot opened before the plans table: no rows there */
    if (p > c + 1)
        return mcdc_error_set(err, MCDC_E_CORRUPT,
                              "snapshot %s: waves up to %lld are planned but only up to %lld are "
                              "recorded in %s (a wave is planned only after the one before it is "
                              "recorded): the facts table was restored from an older copy. "
                              "Restore it, or take a new snapshot",
                              b->s, (long long)p, (long long)c, b->cfg.facts_table);
    *planned = p;
    *committed = c;
    return MCDC_OK;
}

static int l_read_plan(void *self, int64_t n, mcdc_pos *start, mcdc_pos *end, mcdc_error *err) {
    mcdc_backfill *b = self;
    bool found;
    int rc = wave_from_plans(b, n, start, end, &found, err);
    /* Another backfill planned it after this run read the plans table:
     * its rows are there now (they come before its bronze and facts). */
    if (rc == MCDC_OK && !found) {
        mcdc_plan_rows_free(&b->prows);
        rc = mcdc_plans_load(&b->prows, b->plans, b->s, err);
        if (rc == MCDC_OK) rc = wave_from_plans(b, n, start, end, &found, err);
    }
    if (rc == MCDC_OK && !found) rc = wave_from_bronze(b, n, start, end, &found, err);
    return rc;
}

/* The plans rows of a wave: its chunks whole, as its facts rows' txn. */
static int l_write_plan(void *self, int64_t n, const mcdc_pos *start, const mcdc_pos *end,
                        mcdc_error *err) {
    (void)start;
    mcdc_backfill *b = self;
    size_t m = (size_t)end->wave.n;
    MCDC_ASSERT(end->kind == MCDC_POS_WAVE && m >= 1);
    json_t **details = mcdc_calloc(m, sizeof *details);
    if (details == NULL) return nomem(err);
    int64_t total = chunk_count(b);
    int rc = MCDC_OK;
    for (size_t i = 0; i < m && rc == MCDC_OK; i++) {
        const mcdc_pos_chunk *c = &end->wave.chunks[i];
        json_t *lo = mcdc_pos_bound_json(c->lo), *hi = mcdc_pos_bound_json(c->hi);
        details[i] = lo && hi ? json_pack("{s:s, s:I, s:I, s:O, s:O, s:b}", "snapshot", b->s,
                                          "chunk", (json_int_t)c->chunk, "wave", (json_int_t)n,
                                          "lo", lo, "hi", hi, "last", c->chunk == total - 1)
                              : NULL;
        json_decref(lo);
        json_decref(hi);
        if (details[i] == NULL) rc = nomem(err);
    }
    bool skipped = false;
    if (rc == MCDC_OK)
        rc = mcdc_plans_write(b->plans, b->s, "snapshot_chunk", details, (int)m, b->chunks_id, n,
                              &skipped, err);
    for (size_t i = 0; i < m; i++) json_decref(details[i]);
    mcdc_free(details);
    if (rc == MCDC_OK) {
        mcdc_plan_rows_free(&b->prows);
        rc = mcdc_plans_load(&b->prows, b->plans, b->s, err);
    }
    if (rc == MCDC_OK && skipped) {
        /* Another run planned this wave first: only the same plan is ours. */
        mcdc_pos s2 = {0}, e2 = {0};
        bool found;
        rc = wave_from_plans(b, n, &s2, &e2, &found, err);
        if (rc == MCDC_OK && !(found && mcdc_pos_eq(&e2, end)))
            rc = mcdc_error_set(err, MCDC_E_FOREIGN_WRITER,
                                "another backfill of snapshot %s (app id %s) planned wave %lld "
                                "first, with other chunks: run one backfill per snapshot. "
                                "Nothing of this wave was written; the other run reads it",
                                b->s, b->cfg.app_id, (long long)n);
        mcdc_pos_free(&s2);
        mcdc_pos_free(&e2);
    }
    return rc;
}

/* data_txn: the newest wave up to n whose chunks held rows (an empty wave
 * appends nothing). */
static int l_read_commit(void *self, int64_t n, mcdc_ckpt_commit *out, mcdc_error *err) {
    (void)err;
    mcdc_backfill *b = self;
    out->rows = 0;
    out->data_txn = -1;
    for (int i = 0; i < b->n_done; i++) {
        const chunk_rec *c = &b->done[i];
        if (c->wave == n) out->rows += c->rows;
        if (c->wave <= n && c->rows > 0 && c->wave > out->data_txn) out->data_txn = c->wave;
    }
    return MCDC_OK;
}


/* A wave commit without our binding (the reference's): ours when it is the
 * same snapshot's wave with the planned chunks. */
static bool l_owns(void *self, const char *um, const mcdc_unit *u) {
    mcdc_backfill *b = self;
    json_error_t je;
    json_t *meta = um ? json_loads(um, 0, &je) : NULL;
    const char *key = json_string_value(json_object_get(meta, "backfill"));
    json_t *theirs = json_object_get(meta, "chunks");
    const mcdc_pos_wave *ours = &u->end->wave;
    bool same = key && strcmp(key, b->ledger_id) == 0 && jint(meta, "wave", -1) == u->id &&
                json_array_size(theirs) == (size_t)ours->n;
    for (int32_t i = 0; same && i < ours->n; i++)
        same = jint(json_array_get(theirs, (size_t)i), "chunk", -1) == ours->chunks[i].chunk;
    json_decref(meta);
    return same;
}

static const mcdc_ledger_ops LAKE_LEDGER = {
    .id = l_id,
    .name = l_name,
    .fresh = l_fresh,
    .start = l_start,
    .last = l_last,
    .read_plan = l_read_plan,
    .write_plan = l_write_plan,
    .read_commit = l_read_commit,
    /* no write_commit: the facts rows are the record */
    .owns = l_owns,
};

/* ---- the job: waves ----------------------------------------------------------------- */

/* How many chunks the next wave takes: whole rounds of k, as many as the
 * target wave time holds at the last pace (and the rest of max_seconds), at
 * least one round. */
static int64_t wave_width(const mcdc_backfill *b) {
    if (b->pace_s <= 0) return b->k;
    double target = b->cfg.target_wave_seconds < 0 ? DEFAULT_WAVE_SECONDS : b->cfg.target_wave_seconds;
    double rounds = target / b->pace_s;
    if (b->cfg.max_seconds > 0) {
        double left = b->cfg.max_seconds - (double)(mcdc_monotonic_us() - b->t0_us) / 1e6;
        if (left / b->pace_s < rounds) rounds = left / b->pace_s;
    }
    int64_t total = chunk_count(b);
    if (rounds > (double)total) rounds = (double)total;
    return (int64_t)b->k * (rounds >= 1 ? (int64_t)rounds : 1);
}

static int job_plan(void *job, const mcdc_pos *last_end, mcdc_pos *start, mcdc_pos *end,
                    bool *idle, mcdc_error *err) {
    mcdc_backfill *b = job;
    *idle = false;
    int64_t first = last_end ? last_end->wave.chunk : 0, total = chunk_count(b);
    if (first >= total) {
        *idle = true;
        return MCDC_OK;
    }
    if (b->cfg.max_seconds > 0 &&
        (double)(mcdc_monotonic_us() - b->t0_us) / 1e6 >= b->cfg.max_seconds) {
        *idle = true;
        return MCDC_OK;
    }
    bool paused;
    int rc = throttle(b, &paused, err);
    if (rc || paused) {
        *idle = paused;
        return rc;
    }
    int64_t stop = first + wave_width(b);
    if (stop > total) stop = total;
    rc = mcdc_pos_wave_alloc(end, stop, (int32_t)(stop - first), err);
    for (int64_t i = first; rc == MCDC_OK && i < stop; i++) {
        json_t *c = json_array_get(plan_chunks(b), (size_t)i);
        json_t *lo = json_array_get(c, 0), *hi = json_array_get(c, 1);
        json_t *found_end = NULL;
        /* A keyset plan's last chunk ends at the first key after MAX; none at
         * planning: sought again, so that rows inserted above MAX since (the
         * stream's) do not pile up in it. */
        json_t *extent = json_object_get(b->info, "plan");
        const char *kind = json_string_value(json_object_get(extent, "kind"));
        if (i == total - 1 && json_is_null(hi) && kind && strcmp(kind, "keyset") == 0 &&
            !json_is_null(json_object_get(extent, "max")) && json_object_get(extent, "max")) {
            rc = mcdc_changes_last_bound(b->changes, json_object_get(b->info, "keys"),
                                         json_object_get(extent, "max"), b->iso, &found_end, err);
            if (rc) break;
        }
        mcdc_pos_chunk *pc = &end->wave.chunks[i - first];
        pc->chunk = i;
        rc = mcdc_pos_bound_text(&pc->lo, lo, err);
        if (rc == MCDC_OK) rc = mcdc_pos_bound_text(&pc->hi, found_end ? found_end : hi, err);
        json_decref(found_end);
    }
    if (rc) {
        mcdc_pos_free(end);
        return rc;
    }
    wave_start(start, end);
    mcdc_log(MCDC_LOG_INFO, "backfill of %s (snapshot %s, %s): chunks %lld to %lld of %lld",
             b->cfg.target, b->s, b->sink_id, (long long)first, (long long)(stop - 1),
             (long long)total);
    return MCDC_OK;
}

static void wave_end(mcdc_backfill *b) {
    for (int i = 0; b->w && i < b->nw; i++) {
        json_decref(b->w[i].lo);
        json_decref(b->w[i].hi);
    }
    mcdc_free(b->w);
    b->w = NULL;
    b->nw = 0;
}

/* The wave's chunks, from the unit's end position. */
static int wave_begin(mcdc_backfill *b, const mcdc_unit *u, mcdc_error *err) {
    wave_end(b);
    const mcdc_pos_wave *pw = &u->end->wave;
    b->w = mcdc_calloc((size_t)(pw->n ? pw->n : 1), sizeof *b->w);
    if (b->w == NULL) return nomem(err);
    b->nw = pw->n;
    int64_t total = chunk_count(b);
    for (int i = 0; i < b->nw; i++) {
        b->w[i].chunk = pw->chunks[i].chunk;
        b->w[i].lo = mcdc_pos_bound_json(pw->chunks[i].lo);
        b->w[i].hi = mcdc_pos_bound_json(pw->chunks[i].hi);
        if (b->w[i].lo == NULL || b->w[i].hi == NULL) return nomem(err);
        b->w[i].last = b->w[i].chunk == total - 1;
    }
    b->started_us = mcdc_now_utc_us();
    return MCDC_OK;
}

/* One reading connection's share of the wave: chunks p, p + r, ... */
typedef struct {
    mcdc_backfill *b;
    int p, r;
    mcdc_lsn lsn;
} reader_job;

typedef struct {
    mcdc_batch_fn put;
    void *put_ctx;
    mcdc_backfill *b;
    wave_chunk *c;
} tag_ctx;

/* Every batch gets _snapshot S and its chunk before it goes to the writer. */
static int tag_batch(void *ctx, mcdc_batch *bt, mcdc_error *err) {
    tag_ctx *t = ctx;
    t->c->rows += bt->rows;
    int rc = mcdc_bronze_widen(bt, t->b->bronze_schema, -1, t->b->s, t->c->chunk, err);
    if (rc) {
        mcdc_batch_free(bt);
        return rc;
    }
    return t->put(t->put_ctx, bt, err);
}

static int read_share(void *arg, mcdc_batch_fn put, void *put_ctx, mcdc_error *err) {
    reader_job *j = arg;
    mcdc_backfill *b = j->b;
    int rc = MCDC_OK;
    for (int i = j->p; i < b->nw && rc == MCDC_OK; i += j->r) {
        wave_chunk *c = &b->w[i];
        json_t *range = json_pack("[O?, O?]", c->lo, c->hi);
        tag_ctx t = {.put = put, .put_ctx = put_ctx, .b = b, .c = c};
        mcdc_reader_metrics m;
        rc = range ? mcdc_changes_snapshot_read(b->changes, json_object_get(b->info, "keys"), range,
                                                b->iso, &j->lsn, b->stamp_has_ts, b->stamp_ts_us,
                                                tag_batch, &t, &m, err)
                   : nomem(err);
        json_decref(range);
        if (rc == MCDC_OK) {
            c->has_read = true;
            c->read_seconds = m.seconds;
            c->read_mb = (double)m.bytes / 1e6;
            mcdc_progress_part_done(b->ctx.progress);
        }
    }
    return rc;
}

/* The reference's WaveMetadata: {backfill, wave, lsn, attempt, chunks}. */
static json_t *wave_meta(const mcdc_backfill *b, int64_t wave) {
    char attempt[37];
    mcdc_uuid4(attempt);
    json_t *chunks = json_array();
    for (int i = 0; chunks && i < b->nw; i++) {
        const wave_chunk *c = &b->w[i];
        json_array_append_new(
            chunks, json_pack("{s:I, s:O?, s:O?, s:b, s:I, s:s?, s:o, s:o}", "chunk",
                              (json_int_t)c->chunk, "lo", c->lo, "hi", c->hi, "last", c->last, "rows",
                              (json_int_t)c->rows, "high_lsn", c->high_lsn[0] ? c->high_lsn : NULL,
                              "read_seconds", c->has_read ? json_real(c->read_seconds) : json_null(),
                              "read_mb", c->has_read ? json_real(c->read_mb) : json_null()));
    }
    return json_pack("{s:s, s:I, s:s, s:s, s:o}", "backfill", b->ledger_id, "wave",
                     (json_int_t)wave, "lsn", b->stamp, "attempt", attempt, "chunks", chunks);
}

static int wave_held(mcdc_backfill *b, const mcdc_unit *u, mcdc_unit_result *res,
                     mcdc_error *err);

/* Reads the wave into one appender and commits it (nothing when it held
 * no row). */
static int read_wave(mcdc_backfill *b, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                     mcdc_error *err) {
    mcdc_lsn lsn, s_lsn;
    int64_t ts_us;
    bool has_ts;
    /* max_lsn, or the instance's first LSN minus one while capture has not
     * reached it (as S was recorded); snapshotLsn is refused up front. */
    int rc = mcdc_changes_snapshot_lsn(b->changes, &lsn, &ts_us, &has_ts, err);
    if (rc == MCDC_OK) rc = mcdc_lsn_parse_cstr(&s_lsn, b->s, err);
    if (rc == MCDC_OK && mcdc_lsn_cmp(&lsn, &s_lsn) < 0) {
        char m[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&lsn, m);
        return mcdc_error_set(err, MCDC_E_MISMATCH,
                              "sys.fn_cdc_get_max_lsn() is %s, below the snapshot's LSN %s: is "
                              "this the database the snapshot was opened on (not a readable "
                              "secondary, not a restored copy)? Nothing was written",
                              m, b->s);
    }
    if (rc) return rc;
    /* The wave's stamp, before its read: every commit up to it is in it. */
    mcdc_lsn_format(&lsn, b->stamp);
    b->stamp_ts_us = ts_us;
    b->stamp_has_ts = has_ts;
    int readers = 0, encoders = 0;
    int want = b->nw < b->k ? b->nw : b->k;
    if (rc == MCDC_OK)
        rc = mcdc_budget_acquire(b->ctx.budget, MCDC_PERMIT_CONNECTION, 1, want, 0, &b->ctx.stop,
                                 &readers, err);
    if (rc == MCDC_OK)
        rc = mcdc_budget_acquire(b->ctx.budget, MCDC_PERMIT_ENCODER, 1, 1, 0, &b->ctx.stop,
                                 &encoders, err);
    reader_job *jobs = rc ? NULL : mcdc_calloc((size_t)readers, sizeof *jobs);
    void **args = rc ? NULL : mcdc_calloc((size_t)readers, sizeof *args);
    if (rc == MCDC_OK && (jobs == NULL || args == NULL)) rc = nomem(err);
    for (int p = 0; rc == MCDC_OK && p < readers; p++) {
        jobs[p] = (reader_job){.b = b, .p = p, .r = readers, .lsn = lsn};
        args[p] = &jobs[p];
    }
    mcdc_table_props props = {.kind = MCDC_KIND_BRONZE, .parquet_threads = encoders};
    mcdc_appender *app = NULL;
    mcdc_fanin *fan = NULL;
    if (rc == MCDC_OK) rc = mcdc_appender_open(&app, b->bronze, b->bronze_schema, &props, err);
    if (rc == MCDC_OK)
        rc = mcdc_fanin_start(&fan, readers, MCDC_QUEUE_DEPTH_MAX, read_share, args, err);
    mcdc_batch *bt;
    int64_t rows = 0;
    while (rc == MCDC_OK && (bt = mcdc_fanin_next(fan)) != NULL) {
        rows += bt->rows;
        rc = mcdc_appender_write(app, bt, err);
        if (rc == MCDC_OK && b->ctx.progress)
            mcdc_progress_add(b->ctx.progress, bt->rows, mcdc_batch_bytes(bt));
        mcdc_batch_free(bt);
        if (rc == MCDC_OK && mcdc_ctx_crash(&b->ctx, "during_wave", u->id))
            rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed while reading a wave (test hook)");
    }
    if (rc) mcdc_fanin_fail(fan);
    int frc = mcdc_fanin_finish(fan, NULL, rc ? NULL : err);
    if (rc == MCDC_OK) rc = frc;
    mcdc_budget_release(b->ctx.budget, MCDC_PERMIT_CONNECTION, readers);
    /* How far capture had got after the read: informational. */
    mcdc_lsn high;
    if (rc == MCDC_OK && mcdc_changes_max_lsn(b->changes, &high, NULL) == MCDC_OK)
        for (int i = 0; i < b->nw; i++) mcdc_lsn_format(&high, b->w[i].high_lsn);
    bool skipped = false;
    if (rc == MCDC_OK && rows > 0) {
        json_t *meta = wave_meta(b, u->id);
        rc = meta ? mcdc_frame_commit_data(f, u, app, meta, &skipped, err) : nomem(err);
        res->data_committed = rc == MCDC_OK;
    }
    mcdc_appender_free(app);
    mcdc_budget_release(b->ctx.budget, MCDC_PERMIT_ENCODER, encoders);
    mcdc_free(jobs);
    mcdc_free(args);
    res->rows = rows;
    /* Another attempt (a second backfill) committed this wave first: its
     * rows stand, so its counts and stamp are the wave's. */
    if (rc == MCDC_OK && skipped) {
        for (int i = 0; i < b->nw; i++) b->w[i].rows = 0;
        res->rows = 0;
        rc = wave_held(b, u, res, err);
    }
    return rc;
}

/* A wave bronze holds already (a crash before its facts rows): its counts
 * and stamp from the commit, or from its rows once log cleanup dropped the
 * commit. */
typedef struct {
    mcdc_backfill *b;
    char low[MCDC_LSN_TEXT_LEN + 1];
} held_acc;

static int held_rows(void *ctx, mcdc_batch *bt, mcdc_error *err) {
    (void)err;
    held_acc *a = ctx;
    mcdc_backfill *b = a->b;
    for (int64_t r = 0; r < bt->rows; r++) {
        mcdc_cell snap = mcdc_row_get(bt, r, 0), chunk = mcdc_row_get(bt, r, 1),
                  lsn = mcdc_row_get(bt, r, 2), op = mcdc_row_get(bt, r, 3);
        if (snap.kind != MCDC_CELL_TEXT || (size_t)snap.i != strlen(b->s) ||
            memcmp(snap.s, b->s, (size_t)snap.i) != 0 || chunk.kind != MCDC_CELL_INT ||
            op.kind != MCDC_CELL_INT || op.i != 0)
            continue;
        for (int i = 0; i < b->nw; i++)
            if (b->w[i].chunk == chunk.i) b->w[i].rows++;
        if (lsn.kind == MCDC_CELL_TEXT && lsn.i == MCDC_LSN_TEXT_LEN &&
            (a->low[0] == 0 || memcmp(lsn.s, a->low, MCDC_LSN_TEXT_LEN) < 0)) {
            memcpy(a->low, lsn.s, MCDC_LSN_TEXT_LEN);
            a->low[MCDC_LSN_TEXT_LEN] = 0;
        }
    }
    mcdc_batch_free(bt);
    return MCDC_OK;
}

static int wave_held(mcdc_backfill *b, const mcdc_unit *u, mcdc_unit_result *res,
                     mcdc_error *err) {
    char *um = NULL;
    int64_t version;
    int rc = mcdc_table_txn_commit(b->bronze, b->ledger_id, u->id, &um, &version, err);
    json_error_t je;
    json_t *meta = rc == MCDC_OK && um ? json_loads(um, 0, &je) : NULL;
    mcdc_free(um);
    if (meta) {
        snprintf(b->stamp, sizeof b->stamp, "%s", json_string_value(json_object_get(meta, "lsn"))
                                                       ? json_string_value(json_object_get(meta, "lsn"))
                                                       : "");
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(meta, "chunks"), i, c) {
            for (int k = 0; k < b->nw; k++) {
                wave_chunk *w = &b->w[k];
                if (w->chunk != jint(c, "chunk", -1)) continue;
                w->rows = jint(c, "rows", 0);
                const char *h = json_string_value(json_object_get(c, "high_lsn"));
                snprintf(w->high_lsn, sizeof w->high_lsn, "%s", h ? h : b->stamp);
                json_t *rs = json_object_get(c, "read_seconds"), *mb = json_object_get(c, "read_mb");
                w->has_read = json_is_number(rs) && json_is_number(mb);
                w->read_seconds = json_number_value(rs);
                w->read_mb = json_number_value(mb);
            }
        }
    } else if (rc == MCDC_OK || rc == MCDC_E_NOTFOUND) {
        static const char *const cols[] = {"_snapshot", "_chunk", "_start_lsn", "_operation"};
        mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
        sc.columns = cols;
        sc.n_columns = 4;
        sc.prune_column = "_chunk";
        sc.lo = (mcdc_scan_bound){true, NULL, b->w[0].chunk};
        sc.hi = (mcdc_scan_bound){true, NULL, b->w[b->nw - 1].chunk + 1};
        held_acc a = {.b = b};
        int64_t v;
        rc = mcdc_table_scan_run(b->bronze, &sc, held_rows, &a, &v, NULL, err);
        snprintf(b->stamp, sizeof b->stamp, "%s", a.low);
        for (int k = 0; k < b->nw; k++) snprintf(b->w[k].high_lsn, sizeof b->w[k].high_lsn, "%s", a.low);
    }
    json_decref(meta);
    if (rc == MCDC_OK && strlen(b->stamp) != MCDC_LSN_TEXT_LEN)
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "%s holds wave %lld of snapshot %s, but neither its commit nor its "
                            "rows tell the LSN it was stamped with",
                            mcdc_table_name(b->bronze), (long long)u->id, b->s);
    mcdc_lsn l;
    if (rc == MCDC_OK) rc = mcdc_lsn_parse_cstr(&l, b->stamp, err);
    if (rc == MCDC_OK)
        rc = mcdc_changes_commit_time(b->changes, &l, &b->stamp_ts_us, &b->stamp_has_ts, err);
    for (int k = 0; k < b->nw; k++) res->rows += b->w[k].rows;
    return rc;
}

static int job_run(void *job, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                   mcdc_error *err) {
    mcdc_backfill *b = job;
    int64_t t0 = mcdc_monotonic_us();
    int rc = wave_begin(b, u, err);
    if (rc == MCDC_OK && u->data_done) rc = wave_held(b, u, res, err);
    else if (rc == MCDC_OK) {
        /* The stream commits to bronze too: a schema change or the table's
         * creation under our files makes the commit a conflict; read again. */
        for (int attempt = 0;; attempt++) {
            memset(res, 0, sizeof *res);
            for (int i = 0; i < b->nw; i++) b->w[i].rows = 0;
            /* a wave's rows and chunks (the snapshot's: the job's parts) */
            mcdc_progress_phase(b->ctx.progress, attempt ? "reading again" : "reading", "chunks",
                                b->nw, -1, false);
            rc = read_wave(b, f, u, res, err);
            if (rc != MCDC_E_CONFLICT || attempt >= 1) break;
            mcdc_log(MCDC_LOG_WARN, "backfill of %s: %s; reading wave %lld again",
                     b->cfg.target, err ? err->message : "a conflict", (long long)u->id);
        }
    }
    b->duration_ms = (mcdc_monotonic_us() - t0) / 1000;
    if (rc == MCDC_OK && !u->data_done) {
        int rounds = (b->nw + b->k - 1) / b->k;
        b->pace_s = (double)(mcdc_monotonic_us() - t0) / 1e6 / (rounds ? rounds : 1);
    }
    return rc;
}

static int job_facts(void *job, const mcdc_unit *u, const mcdc_unit_result *res, mcdc_batch *rows,
                     mcdc_error *err) {
    (void)res;
    mcdc_backfill *b = job;
    mcdc_lsn high;
    int64_t high_us = 0;
    bool has_high = false;
    int rc = MCDC_OK;
    for (int i = 0; i < b->nw && rc == MCDC_OK; i++) {
        wave_chunk *c = &b->w[i];
        if (c->high_lsn[0] && (i == 0 || strcmp(c->high_lsn, b->w[i - 1].high_lsn) != 0)) {
            rc = mcdc_lsn_parse_cstr(&high, c->high_lsn, err);
            if (rc == MCDC_OK) rc = mcdc_changes_commit_time(b->changes, &high, &high_us, &has_high, err);
        }
        json_t *d = json_pack("{s:s, s:I, s:I, s:b}", "snapshot", b->s, "wave", (json_int_t)u->id,
                              "chunk", (json_int_t)c->chunk, "last", c->last);
        char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
        if (rc == MCDC_OK && detail == NULL) rc = nomem(err);
        mcdc_facts_chunk fc = {.app_id = b->sink_id, .target = b->cfg.target, .rows = c->rows,
                               .lsn = b->stamp, .high_lsn = c->high_lsn[0] ? c->high_lsn : NULL,
                               .has_lsn_ts = b->stamp_has_ts, .lsn_ts_us = b->stamp_ts_us,
                               .has_high_ts = c->high_lsn[0] && has_high, .high_ts_us = high_us,
                               .started_us = b->started_us, .duration_ms = b->duration_ms,
                               .has_read = c->has_read, .read_seconds = c->read_seconds,
                               .read_mb = c->read_mb, .detail = detail};
        if (rc == MCDC_OK) rc = mcdc_facts_append_chunk(rows, &fc, err);
        free(detail);
    }
    return rc;
}

static void job_done(void *job, const mcdc_unit *u, const mcdc_unit_result *res,
                     const mcdc_verdict *v) {
    (void)res, (void)v;
    mcdc_backfill *b = job;
    for (int i = 0; i < b->nw; i++) {
        chunk_rec c = {.chunk = b->w[i].chunk, .wave = u->id, .rows = b->w[i].rows,
                       .duration_ms = b->duration_ms, .last = b->w[i].last};
        snprintf(c.lsn, sizeof c.lsn, "%s", b->stamp);
        if (add_done(b, &c, NULL) != MCDC_OK) break;
    }
    mcdc_progress_job_parts_add(b->ctx.progress, b->nw); /* committed: its facts rows are in */
    mcdc_log(MCDC_LOG_INFO, "backfill of %s (snapshot %s): wave %lld in, %lld rows in %.1f s",
             b->cfg.target, b->s, (long long)u->id, (long long)res->rows,
             (double)b->duration_ms / 1000);
}

static const mcdc_job_ops BACKFILL_OPS = {
    .kind = "backfill",
    .pos_kind = MCDC_POS_WAVE,
    .plan = job_plan,
    .run = job_run,
    .facts = job_facts,
    .done = job_done,
};

/* ---- completion ------------------------------------------------------------------- */

/* The snapshot's 'bootstrap' (or 'resnapshot') row after its last chunk:
 * once, by its txn (also after a crash between the last wave and it). */
static int complete(mcdc_backfill *b, mcdc_error *err) {
    if (mcdc_ctx_crash(&b->ctx, "before_completion", 0))
        return mcdc_error_set(err, MCDC_E_CANCELLED, "killed before the completion row (test hook)");
    int64_t rows = 0;
    const char *last = "";
    for (int i = 0; i < b->n_done; i++) {
        rows += b->done[i].rows;
        if (strcmp(b->done[i].lsn, last) > 0) last = b->done[i].lsn;
    }
    json_t *d = json_pack("{s:s, s:I, s:I, s:s}", "snapshot", b->s, "chunks", (json_int_t)b->n_done,
                          "rows", (json_int_t)rows, "last_lsn", last);
    char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (detail == NULL) return nomem(err);
    int64_t gen = jint(b->info, "generation", 0);
    const char *kind = json_string_value(json_object_get(b->info, "kind"));
    if (kind == NULL) kind = gen ? "resnapshot" : "bootstrap";
    bool switched = json_object_get(b->info, "switch_batch_id") != NULL;
    char txn[MCDC_TXN_APP_ID_MAX];
    int rc = switched ? mcdc_txn_app_id(txn, sizeof txn, MCDC_TXN_SNAPDONE, b->cfg.app_id, 0, b->s, err)
                      : mcdc_txn_app_id(txn, sizeof txn, MCDC_TXN_EVENTS, b->cfg.app_id, 0, NULL, err);
    if (rc) {
        free(detail);
        return rc;
    }
    const mcdc_snap_row *o = b->top;
    int64_t now = mcdc_now_utc_us();
    mcdc_facts_event ev = {.app_id = b->sink_id, .target = b->cfg.target, .event = kind,
                           .rows = rows, .lsn = b->s, .has_commit_ts = o->has_min_ts,
                           .commit_us = o->min_ts_us, .detail = detail,
                           .has_lost_from = o->has_lost_from, .lost_from_us = o->lost_from_us,
                           .has_lost_to = o->has_lost_to, .lost_to_us = o->lost_to_us,
                           .has_timing = o->has_written, .started_us = o->written_us,
                           .duration_ms = o->has_written ? (now - o->written_us) / 1000 : 0};
    bool skipped;
    rc = mcdc_facts_write_event(b->facts, &ev, txn, switched ? 0 : gen, &skipped, err);
    free(detail);
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_INFO, "backfill of %s: snapshot %s complete, %lld chunks, %lld rows; "
                                "downstream rebuilds from it",
                 b->cfg.target, b->s, (long long)b->n_done, (long long)rows);
    return rc;
}

/* ---- the handle ------------------------------------------------------------------- */

static int check_cfg(const mcdc_backfill_cfg *c, mcdc_error *err) {
    if (c->target == NULL || !*c->target || c->app_id == NULL || !*c->app_id ||
        c->facts_table == NULL || !*c->facts_table)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "a backfill needs --target, --app-id and --facts-table (the "
                              "stream's)");
    if (strlen(c->app_id) > MCDC_APP_ID_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "--app-id is longer than %d bytes",
                              MCDC_APP_ID_BYTES_MAX);
    if (c->chunk_rows < 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "--chunk-rows must be at least 1, not %lld",
                              (long long)c->chunk_rows);
    if (c->max_waves < 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "--max-waves must be at least 1");
    if (!(c->target_wave_seconds < 0 || c->target_wave_seconds <= 86400))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--target-wave-seconds must be between 0 and 86400, not %g",
                              c->target_wave_seconds);
    if (!(isfinite(c->max_seconds) && c->max_seconds >= 0) ||
        (c->has_min_headroom && !(isfinite(c->min_headroom_hours) && c->min_headroom_hours >= 0)))
        return mcdc_error_set(err, MCDC_E_INVALID, "--max-seconds and --min-headroom-hours take "
                                                   "finite numbers >= 0");
    if (c->isolation && !mcdc_str_ieq(c->isolation, "snapshot") &&
        !mcdc_str_ieq(c->isolation, "readCommitted"))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--isolation must be snapshot or readCommitted, not '%s'",
                              c->isolation);
    return MCDC_OK;
}

static void backfill_log(void *user, mcdc_log_level level, const char *msg) {
    mcdc_backfill *b = user;
    if (b->cfg.log_fn) b->cfg.log_fn(b->cfg.log_user, level, msg);
    else fprintf(stderr, "mssql-cdc: %s%s\n", level == MCDC_LOG_WARN ? "warning: " : "", msg);
}

static int backfill_create(mcdc_backfill **out, const mcdc_opts *opts, const mcdc_backfill_cfg *cfg,
                           mcdc_error *err) {
    if (out == NULL || opts == NULL || cfg == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_backfill_create: a NULL argument");
    *out = NULL;
    /* the caller's version's fields, the defaults after them */
    mcdc_backfill_cfg given;
    int rc = mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_BACKFILL, cfg, err);
    if (rc) return rc;
    cfg = &given;
    rc = check_cfg(cfg, err);
    if (rc == MCDC_OK) rc = mcdc_opts_check_required(opts, err);
    if (rc == MCDC_OK && mcdc_opt_is_set(opts, MCDC_OPT_SNAPSHOT_LSN))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "snapshotLsn has no meaning for a backfill: each wave is stamped with "
                            "max_lsn before it is read; leave it out");
    if (rc) return rc;
    mcdc_backfill *b = mcdc_calloc(1, sizeof *b);
    if (b == NULL) return nomem(err);
    b->cfg = *cfg;
    b->opts = opts;
    const char **fields[] = {&b->cfg.target, &b->cfg.app_id, &b->cfg.facts_table,
                             &b->cfg.warehouse, &b->cfg.isolation};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && rc == MCDC_OK; i++) {
        if (*fields[i] == NULL) continue;
        if ((b->strings[i] = mcdc_strdup(*fields[i])) == NULL) rc = nomem(err);
        *fields[i] = b->strings[i];
    }
    if (rc) {
        mcdc_backfill_free(b);
        return rc;
    }
    b->ctx.budget = mcdc_runtime_budget_or(cfg->runtime, cfg->budget);
    if (b->cfg.log_fn == NULL) b->cfg.log_fn = mcdc_runtime_log_fn(cfg->runtime, &b->cfg.log_user);
    b->ctx.progress_fn = cfg->progress_fn;
    b->ctx.progress_user = cfg->progress_user;
    mcdc_ctx_take_test_hooks(&b->ctx, opts);
    mcdc_ctx_take_storage(&b->ctx, opts, cfg->runtime);
    b->sink = (mcdc_log_sink){backfill_log, b, cfg->log_level};
    *out = b;
    return MCDC_OK;
}

void mcdc_backfill_request_stop(mcdc_backfill *b) {
    if (b) atomic_store(&b->ctx.stop, 1);
}

/* Created with its runtime's accounting bound (mcdc_runtime.h). */
int mcdc_backfill_create(mcdc_backfill **out, const mcdc_opts *opts, const mcdc_backfill_cfg *cfg,
                         mcdc_error *err) {
    mcdc_job_scope host = mcdc_runtime_enter_cfg(MCDC_CFG_BACKFILL, cfg, offsetof(mcdc_backfill_cfg, runtime));
    int rc = backfill_create(out, opts, cfg, err);
    if (rc == MCDC_OK)
        (*out)->ctx.metrics = mcdc_runtime_job_join((*out)->cfg.runtime, "backfill",
                                                    (*out)->cfg.target, *out);
    mcdc_job_leave(host);
    return rc;
}

void mcdc_backfill_free(mcdc_backfill *b) {
    if (b == NULL) return;
    mcdc_runtime_job_leave(b->ctx.metrics);
    for (size_t i = 0; i < sizeof b->strings / sizeof b->strings[0]; i++) mcdc_free(b->strings[i]);
    mcdc_free(b);
}

const char *mcdc_backfill_state_name(mcdc_backfill_state s) {
    switch (s) {
    case MCDC_BACKFILL_DONE: return "done";
    case MCDC_BACKFILL_RUNNING: return "running";
    case MCDC_BACKFILL_WAITING_HEADROOM: return "waiting_headroom";
    case MCDC_BACKFILL_WAITING_METRICS: return "waiting_metrics";
    case MCDC_BACKFILL_NO_SNAPSHOT: return "no_snapshot";
    }
    return "unknown";
}

int mcdc_backfill_status_json(char *out, size_t cap, const mcdc_backfill_status *given,
                              mcdc_error *err) {
    if (out == NULL || given == NULL || cap == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_backfill_status_json: a NULL argument");
    mcdc_backfill_status full;
    int rc = mcdc_result_in(MCDC_RESULT_BACKFILL, &full, given, "mcdc_backfill_status_json", err);
    if (rc) return rc;
    const mcdc_backfill_status *st = &full;
    json_t *j = json_pack("{s:o, s:I, s:o, s:b, s:b, s:s, s:o}", "snapshot",
                          st->snapshot[0] ? json_string(st->snapshot) : json_null(), "chunks_done",
                          (json_int_t)st->chunks_done, "chunks_total",
                          st->chunks_total >= 0 ? int_json(st->chunks_total) : json_null(), "done",
                          st->done, "paused", st->paused, "state",
                          mcdc_backfill_state_name(st->state), "reason",
                          st->reason[0] ? json_string(st->reason) : json_null());
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (text == NULL) return nomem(err);
    size_t n = strlen(text);
    rc = n < cap ? MCDC_OK
                 : mcdc_error_set(err, MCDC_E_LIMIT, "the status needs %zu bytes, not %zu", n + 1,
                                  cap);
    if (rc == MCDC_OK) memcpy(out, text, n + 1);
    free(text);
    return rc;
}

/* Everything the run reads before its first wave; MCDC_OK with a status
 * when there is nothing to read. *go: waves may run. */
static int prepare(mcdc_backfill *b, bool *go, mcdc_error *err) {
    *go = false;
    const mcdc_backfill_cfg *c = &b->cfg;
    const mcdc_storage_env *env = b->ctx.storage_env;
    const mcdc_role roles[2] = {{"--target", c->target, true},
                                {"--facts-table", c->facts_table, true}};
    int rc = mcdc_roles_check(roles, 2, c->warehouse, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&b->bronze, env, c->target, c->warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&b->facts, env, c->facts_table, c->warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_plans_name(&b->plans_name, c->target, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&b->plans, env, b->plans_name, c->warehouse, err);
    const mcdc_frame_role tables[3] = {{b->bronze, MCDC_KIND_BRONZE, "target"},
                                       {b->facts, MCDC_KIND_FACTS, "facts table"},
                                       {b->plans, MCDC_KIND_PLANS, "plans table"}};
    if (rc == MCDC_OK) rc = mcdc_frame_check_roles(tables, 3, err);
    if (rc == MCDC_OK) rc = mcdc_snapfacts_load(&b->sf, b->facts, c->target, c->warehouse, c->app_id, err);
    /* One mode while a snapshot is open: a full one of the stream still
     * being read refuses any wave (and any plan). */
    /* The stream's schema: the union of every capture instance of the table
     * (a chunk reads a column only a newer instance captures, as the stream
     * does from its start; a snapshot on switch is taken for it). */
    mcdc_changes_settings cs = {.follow = true};
    if (rc == MCDC_OK) rc = mcdc_changes_open(&b->changes, b->opts, &cs, err);
    if (rc == MCDC_OK) rc = mcdc_snapshot_check_table(b->bronze, c->target, b->changes, err);
    if (rc == MCDC_OK)
        rc = mcdc_snapfacts_lock(&b->sf, c->target, "chunked", mcdc_snapshot_purged, b->changes, err);
    if (rc) return rc;
    b->top = mcdc_snapfacts_newest_chunked(&b->sf);
    if (b->top == NULL) {
        char why[512];
        snprintf(why, sizeof why,
                 "%s has no chunked snapshot opened by %s's stream (in %s): not yet, or another "
                 "--app-id, --target or --facts-table than the stream's",
                 c->target, c->app_id, c->facts_table);
        status_set(b, MCDC_BACKFILL_NO_SNAPSHOT, true, why);
        return MCDC_OK;
    }
    snprintf(b->s, sizeof b->s, "%s", b->top->min_lsn);
    snprintf(b->st.snapshot, sizeof b->st.snapshot, "%s", b->s);
    b->sink_id = b->top->app_id;
    rc = mcdc_txn_app_id(b->ledger_id, sizeof b->ledger_id, MCDC_TXN_SNAP, c->app_id, 0, b->s, err);
    if (rc == MCDC_OK)
        rc = mcdc_txn_app_id(b->chunks_id, sizeof b->chunks_id, MCDC_TXN_SNAPCHUNKS, c->app_id, 0,
                             b->s, err);
    if (rc) return rc;
    snprintf(b->ledger_name, sizeof b->ledger_name, "the backfill of snapshot %s (app id %s)",
             b->s, c->app_id);
    mcdc_pos_free(&b->first_pos);
    b->first_pos.kind = MCDC_POS_WAVE; /* {"chunk": 0} */
    rc = mcdc_plans_load(&b->prows, b->plans, b->s, err);
    const json_t *info = rc ? NULL : mcdc_plans_whole(&b->prows, b->plans_name, "snapshot_open",
                                                       b->top->detail, err);
    if (rc == MCDC_OK && info == NULL) rc = err ? err->code : MCDC_E_CORRUPT;
    if (rc == MCDC_OK && (b->info = json_deep_copy(info)) == NULL) rc = nomem(err);
    const mcdc_snap_row *plan = rc ? NULL : mcdc_snapfacts_plan(&b->sf, b->s);
    if (plan) {
        const json_t *whole = mcdc_plans_whole(&b->prows, b->plans_name, "snapshot_plan",
                                               plan->detail, err);
        if (whole == NULL) rc = err ? err->code : MCDC_E_CORRUPT;
        else if ((b->plan = json_deep_copy(whole)) == NULL) rc = nomem(err);
    }
    if (rc == MCDC_OK && b->plan && c->chunk_rows > 0 &&
        jint(b->plan, "chunk_rows", -1) != c->chunk_rows)
        mcdc_log(MCDC_LOG_WARN,
                 "--chunk-rows %lld ignored: snapshot %s of %s was planned with %lld rows a "
                 "chunk, and its chunks do not change while it is open",
                 (long long)c->chunk_rows, b->s, c->target,
                 (long long)jint(b->plan, "chunk_rows", -1));
    if (rc == MCDC_OK) rc = load_done(b, err);
    if (rc) return rc;
    b->st.chunks_done = b->n_done;
    b->st.chunks_total = chunk_count(b);
    /* Its own completion, or a newer whole snapshot's that supersedes it. */
    const char *completed = mcdc_snapfacts_done_max(&b->sf, NULL);
    if (completed && strcmp(completed, b->s) >= 0) {
        b->st.done = true;
        b->st.chunks_total = b->n_done;
        status_set(b, MCDC_BACKFILL_DONE, false, NULL);
        return MCDC_OK;
    }
    /* The source: the same key the snapshot opened with. */
    rc = mcdc_bronze_schema(&b->bronze_schema, mcdc_changes_schema(b->changes), err);
    json_t *keys = NULL;
    if (rc == MCDC_OK) rc = mcdc_changes_snapshot_keys(b->changes, &keys, err);
    if (rc == MCDC_OK && !same_keys(keys, json_object_get(b->info, "keys"))) {
        char *ours = json_dumps(keys, JSON_COMPACT), *theirs = json_dumps(json_object_get(b->info, "keys"), JSON_COMPACT);
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "snapshot %s cuts its chunks on %s, but this backfill would cut them "
                            "on %s (its snapshotKeys option, else the capture instance's unique "
                            "index): a plan stays on the columns it opened with. Set snapshotKeys "
                            "as when it opened, or take a new snapshot",
                            b->s, theirs ? theirs : "?", ours ? ours : "?");
        free(ours);
        free(theirs);
    }
    json_decref(keys);
    if (rc) return rc;
    b->k = mcdc_opt_num_partitions(b->opts);
    if (b->k < 1) b->k = 1;
    /* The pace of the last wave an earlier run read, from its facts rows. */
    if (b->n_done) {
        int64_t wave = -1, n = 0, ms = 0;
        for (int i = 0; i < b->n_done; i++) wave = b->done[i].wave > wave ? b->done[i].wave : wave;
        for (int i = 0; i < b->n_done; i++)
            if (b->done[i].wave == wave) n++, ms = b->done[i].duration_ms;
        int64_t rounds = (n + b->k - 1) / b->k;
        b->pace_s = ms > 0 ? (double)ms / 1000 / (double)(rounds ? rounds : 1) : 0;
    }
    status_set(b, MCDC_BACKFILL_RUNNING, false, NULL);
    *go = true;
    return MCDC_OK;
}

static void release_run(mcdc_backfill *b) {
    mcdc_changes_close(b->changes);
    mcdc_table_close(b->bronze);
    mcdc_table_close(b->facts);
    mcdc_table_close(b->plans);
    mcdc_schema_unref(b->bronze_schema);
    mcdc_snapfacts_free(&b->sf);
    mcdc_plan_rows_free(&b->prows);
    json_decref(b->info);
    json_decref(b->plan);
    mcdc_pos_free(&b->first_pos);
    mcdc_free(b->plans_name);
    mcdc_free(b->done);
    wave_end(b);
    b->changes = NULL;
    b->bronze = b->facts = b->plans = NULL;
    b->bronze_schema = NULL;
    b->info = b->plan = NULL;
    b->plans_name = NULL;
    b->done = NULL;
    b->w = NULL;
    b->n_done = b->cap_done = b->nw = 0;
    b->top = NULL;
    b->sink_id = NULL;
}

int mcdc_backfill_run(mcdc_backfill *b, mcdc_backfill_status *status, mcdc_error *err) {
    if (b == NULL || status == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_backfill_run: a NULL argument");
    int rc = mcdc_result_check(MCDC_RESULT_BACKFILL, status, "mcdc_backfill_run", err);
    if (rc) return rc;
    mcdc_job_scope host = mcdc_job_enter(mcdc_runtime_acct_or_bound(b->cfg.runtime), &b->sink);
    mcdc_runtime_job_started(b->ctx.metrics);
    memset(&b->st, 0, sizeof b->st);
    b->st.size = sizeof b->st;
    b->st.chunks_total = -1;
    b->t0_us = mcdc_monotonic_us();
    const char *iso = b->cfg.isolation;
    b->iso = iso == NULL ? MCDC_ISO_OPTION
             : mcdc_str_ieq(iso, "snapshot") ? MCDC_ISO_SNAPSHOT : MCDC_ISO_READ_COMMITTED;
    bool go = false;
    rc = mcdc_ctx_progress_create(&b->ctx.progress, &b->ctx, "backfill", err);
    if (rc == MCDC_OK) rc = prepare(b, &go, err);
    if (rc == MCDC_OK && go && b->plan == NULL) {
        bool paused;
        rc = throttle(b, &paused, err);
        if (rc == MCDC_OK && !paused) rc = make_plan(b, err);
        go = rc == MCDC_OK && !paused;
        b->st.chunks_total = chunk_count(b);
    }
    if (rc == MCDC_OK && go)
        mcdc_progress_job_parts(b->ctx.progress, "chunks", b->n_done, chunk_count(b));
    if (rc == MCDC_OK && go && !all_done(b)) {
        mcdc_ledger led = {&LAKE_LEDGER, b};
        mcdc_frame_cfg fc = {
            .ctx = &b->ctx,
            .ledger = &led,
            .target = b->bronze,
            .target_kind = MCDC_KIND_BRONZE,
            .app_id = b->ledger_id,
            .facts = b->facts,
            .facts_app_id = b->chunks_id,
            .stop_when_idle = true,
            .idle_poll_ms = 10,
            .max_units = b->cfg.max_waves,
        };
        rc = mcdc_frame_run(&fc, &BACKFILL_OPS, b, err);
    }
    if (rc == MCDC_OK && go) {
        b->st.chunks_done = b->n_done;
        if (all_done(b)) {
            rc = complete(b, err);
            b->st.done = rc == MCDC_OK;
            if (b->st.done) status_set(b, MCDC_BACKFILL_DONE, false, NULL);
        } else if (b->st.state == MCDC_BACKFILL_RUNNING) {
            status_set(b, MCDC_BACKFILL_RUNNING, false,
                       "stopped by --max-waves, --max-seconds or a stop request: run again");
        }
    }
    mcdc_result_out(MCDC_RESULT_BACKFILL, status, &b->st);
    release_run(b);
    mcdc_progress_end(b->ctx.progress);
    b->ctx.progress = NULL;
    mcdc_runtime_job_ended(b->ctx.metrics, rc, err);
    mcdc_job_leave(host);
    return rc;
}
