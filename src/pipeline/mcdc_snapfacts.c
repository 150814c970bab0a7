/* mcdc_snapfacts.c - a stream's snapshots in its facts (see mcdc_snapfacts.h). */
#include "mcdc_snapfacts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_tables.h"
#include "mcdc_txn.h"

static const char *const EVENT_NAMES[] = {"snapshot_open", "snapshot_plan", "snapshot_chunk",
                                          "bootstrap", "resnapshot",
                                          "capture_instance_switched"};
#define N_EVENTS ((int)(sizeof EVENT_NAMES / sizeof EVENT_NAMES[0]))

/* The columns read, in this order. */
enum { C_APP, C_EVENT, C_ROWS, C_MIN_LSN, C_MAX_LSN, C_MIN_TS, C_MAX_TS, C_LOST_FROM, C_LOST_TO,
       C_WRITTEN, C_DURATION, C_READ_S, C_DETAIL, C_TARGET, C_BATCH, C_COUNT };
static const char *const COLUMNS[C_COUNT] = {
    "app_id",      "event",      "rows",       "min_lsn",     "max_lsn",
    "min_commit_ts", "max_commit_ts", "lost_from_ts", "lost_to_ts", "written_at",
    "duration_ms", "read_seconds", "detail",    "target",     "batch_id"};

typedef struct {
    mcdc_snapfacts *sf;
    const char *app_id;
    const char *target;
    const char *warehouse;
    char *target_canon;   /* target resolved, NULL when it cannot be */
    char *seen;           /* the last row target compared, and its verdict */
    bool seen_same;
    int cap;
} load_acc;

static bool cell_is(mcdc_cell c, const char *s) {
    return c.kind == MCDC_CELL_TEXT && (size_t)c.i == strlen(s) && memcmp(c.s, s, (size_t)c.i) == 0;
}

/* A sink app id of the stream: app_id itself, or app_id.g<n>, a
 * generation of it (mcdc_txn.h). */
static bool in_family(const load_acc *a, mcdc_cell c) {
    if (a->app_id == NULL) return true; /* every stream's */
    return c.kind == MCDC_CELL_TEXT &&
           mcdc_txn_match(c.s, (size_t)c.i, MCDC_TXN_STREAM, a->app_id, NULL, NULL, NULL);
}

static char *resolved(const char *name, const char *warehouse) {
    char *path = NULL, *canon = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_table_resolve(&path, name, warehouse, &e) != MCDC_OK) return NULL;
    if (mcdc_location_place(&canon, path, &e) != MCDC_OK) canon = NULL;
    mcdc_free(path);
    return canon;
}

/* The row's target is ours: as given, or the same location. */
static bool same_target(load_acc *a, mcdc_cell c) {
    if (c.kind != MCDC_CELL_TEXT) return false;
    if (cell_is(c, a->target)) return true;
    if (a->seen && cell_is(c, a->seen)) return a->seen_same;
    mcdc_free(a->seen);
    a->seen = mcdc_malloc((size_t)c.i + 1);
    if (a->seen == NULL) return false;
    memcpy(a->seen, c.s, (size_t)c.i);
    a->seen[c.i] = 0;
    char *theirs = a->target_canon ? resolved(a->seen, a->warehouse) : NULL;
    a->seen_same = theirs && strcmp(theirs, a->target_canon) == 0;
    mcdc_free(theirs);
    return a->seen_same;
}

static void text_into(char *dst, size_t cap, mcdc_cell c) {
    dst[0] = 0;
    if (c.kind == MCDC_CELL_TEXT && (size_t)c.i < cap) {
        memcpy(dst, c.s, (size_t)c.i);
        dst[c.i] = 0;
    }
}

static bool int_of(mcdc_cell c, int64_t *out) {
    if (c.kind != MCDC_CELL_INT) return false;
    *out = c.i;
    return true;
}

static int load_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    load_acc *a = ctx;
    int rc = MCDC_OK;
    for (int64_t r = 0; r < b->rows && rc == MCDC_OK; r++) {
        mcdc_cell ev = mcdc_row_get(b, r, C_EVENT);
        int kind = -1;
        for (int k = 0; k < N_EVENTS && kind < 0; k++)
            if (cell_is(ev, EVENT_NAMES[k])) kind = k;
        if (kind < 0 || !in_family(a, mcdc_row_get(b, r, C_APP)) ||
            !same_target(a, mcdc_row_get(b, r, C_TARGET)))
            continue;
        if (a->sf->n == a->cap) {
            int cap = a->cap ? a->cap * 2 : 16;
            mcdc_snap_row *v = mcdc_realloc(a->sf->rows, (size_t)cap * sizeof *v);
            if (v == NULL) {
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                break;
            }
            a->sf->rows = v;
            a->cap = cap;
        }
        mcdc_snap_row *x = &a->sf->rows[a->sf->n];
        memset(x, 0, sizeof *x);
        x->event = (mcdc_snap_event)kind;
        mcdc_cell app = mcdc_row_get(b, r, C_APP);
        x->app_id = mcdc_malloc((size_t)app.i + 1);
        if (x->app_id == NULL) {
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            break;
        }
        memcpy(x->app_id, app.s, (size_t)app.i);
        x->app_id[app.i] = 0;
        a->sf->n++;
        x->has_rows = int_of(mcdc_row_get(b, r, C_ROWS), &x->rows);
        text_into(x->min_lsn, sizeof x->min_lsn, mcdc_row_get(b, r, C_MIN_LSN));
        text_into(x->max_lsn, sizeof x->max_lsn, mcdc_row_get(b, r, C_MAX_LSN));
        x->has_min_ts = int_of(mcdc_row_get(b, r, C_MIN_TS), &x->min_ts_us);
        x->has_max_ts = int_of(mcdc_row_get(b, r, C_MAX_TS), &x->max_ts_us);
        x->has_lost_from = int_of(mcdc_row_get(b, r, C_LOST_FROM), &x->lost_from_us);
        x->has_lost_to = int_of(mcdc_row_get(b, r, C_LOST_TO), &x->lost_to_us);
        x->has_written = int_of(mcdc_row_get(b, r, C_WRITTEN), &x->written_us);
        x->has_duration = int_of(mcdc_row_get(b, r, C_DURATION), &x->duration_ms);
        mcdc_cell rs = mcdc_row_get(b, r, C_READ_S);
        x->has_batch_id = int_of(mcdc_row_get(b, r, C_BATCH), &x->batch_id);
        x->has_read_seconds = rs.kind == MCDC_CELL_DOUBLE;
        x->read_seconds = rs.d;
        mcdc_cell d = mcdc_row_get(b, r, C_DETAIL);
        if (d.kind == MCDC_CELL_TEXT) {
            json_error_t je;
            x->detail = json_loadb(d.s, (size_t)d.i, 0, &je);
        }
    }
    mcdc_batch_free(b);
    return rc;
}

int mcdc_snapfacts_load(mcdc_snapfacts *out, mcdc_table *facts, const char *target,
                        const char *warehouse, const char *app_id, mcdc_error *err) {
    MCDC_ASSERT(out && target);
    memset(out, 0, sizeof *out);
    if (facts == NULL) return MCDC_OK;
    load_acc a = {.sf = out, .app_id = app_id, .target = target,
                  .warehouse = warehouse};
    a.target_canon = resolved(target, warehouse);
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.columns = COLUMNS;
    sc.n_columns = C_COUNT;
    int64_t version;
    int rc = mcdc_table_scan_run(facts, &sc, load_rows, &a, &version, NULL, err);
    mcdc_free(a.target_canon);
    mcdc_free(a.seen);
    if (rc) {
        mcdc_snapfacts_free(out);
        mcdc_error_wrap(err, "reading the snapshot rows of %s in %s", app_id ? app_id : target,
                        mcdc_table_name(facts));
    }
    return rc;
}

void mcdc_snapfacts_free(mcdc_snapfacts *sf) {
    for (int i = 0; sf && i < sf->n; i++) {
        mcdc_free(sf->rows[i].app_id);
        json_decref(sf->rows[i].detail);
    }
    if (sf) {
        mcdc_free(sf->rows);
        sf->rows = NULL;
        sf->n = 0;
    }
}

static json_t *iso_or_null(bool has, int64_t us) {
    char t[40];
    if (!has) return json_null();
    mcdc_format_ts_us(us, 3, t);
    return json_string(t);
}

json_t *mcdc_snap_open_detail(const char *mode, const char *kind, int64_t generation,
                              bool has_lost_from, int64_t lost_from_us, bool has_lost_to,
                              int64_t lost_to_us) {
    return json_pack("{s:s, s:s, s:I, s:o, s:o}", "mode", mode, "kind", kind, "generation",
                     (json_int_t)generation, "lost_from_ts", iso_or_null(has_lost_from, lost_from_us),
                     "lost_to_ts", iso_or_null(has_lost_to, lost_to_us));
}

json_t *mcdc_snap_switch_detail(const char *mode, int64_t generation, int64_t switch_batch_id) {
    json_t *d = mcdc_snap_open_detail(mode, "bootstrap", generation, false, 0, false, 0);
    if (d && json_object_set_new(d, "switch_batch_id", json_integer((json_int_t)switch_batch_id))) {
        json_decref(d);
        return NULL;
    }
    return d;
}

const char *mcdc_snap_mode(const mcdc_snap_row *open) {
    const char *m = json_string_value(json_object_get(open->detail, "mode"));
    return m && strcmp(m, "full") == 0 ? "full" : "chunked";
}

static bool is_chunked_open(const mcdc_snap_row *r) {
    return r->event == MCDC_SNAP_OPEN && strcmp(mcdc_snap_mode(r), "chunked") == 0;
}

static bool is_completion(const mcdc_snap_row *r) {
    return r->event == MCDC_SNAP_BOOTSTRAP || r->event == MCDC_SNAP_RESNAPSHOT;
}

const char *mcdc_snapfacts_done_max(const mcdc_snapfacts *sf, const char *sink_id) {
    const char *best = NULL;
    for (int i = 0; i < sf->n; i++) {
        const mcdc_snap_row *r = &sf->rows[i];
        if (!is_completion(r) || !r->max_lsn[0]) continue;
        if (sink_id && strcmp(r->app_id, sink_id) != 0) continue;
        if (best == NULL || strcmp(r->max_lsn, best) > 0) best = r->max_lsn;
    }
    return best;
}

const mcdc_snap_row *mcdc_snapfacts_opened(const mcdc_snapfacts *sf, const char *sink_id,
                                           bool *done) {
    const mcdc_snap_row *best = NULL;
    for (int i = 0; i < sf->n; i++) {
        const mcdc_snap_row *r = &sf->rows[i];
        if (r->event != MCDC_SNAP_OPEN || strcmp(r->app_id, sink_id) != 0) continue;
        /* A chunked one first (a generation has at most one), else the
         * newest full one (each full run writes its own). */
        bool better = best == NULL || (is_chunked_open(r) && !is_chunked_open(best)) ||
                      (is_chunked_open(r) == is_chunked_open(best) &&
                       strcmp(r->min_lsn, best->min_lsn) > 0);
        if (better) best = r;
    }
    const char *top = best ? mcdc_snapfacts_done_max(sf, sink_id) : NULL;
    *done = best && top && strcmp(top, best->min_lsn) >= 0;
    return best;
}

const mcdc_snap_row *mcdc_snapfacts_newest_chunked(const mcdc_snapfacts *sf) {
    const mcdc_snap_row *best = NULL;
    for (int i = 0; i < sf->n; i++)
        if (is_chunked_open(&sf->rows[i]) &&
            (best == NULL || strcmp(sf->rows[i].min_lsn, best->min_lsn) > 0))
            best = &sf->rows[i];
    return best;
}

/* The switch batch an open names; -1 when none. */
static int64_t switch_batch(const mcdc_snap_row *r) {
    json_t *b = json_object_get(r->detail, "switch_batch_id");
    return r->event == MCDC_SNAP_OPEN && json_is_integer(b) ? (int64_t)json_integer_value(b) : -1;
}

const mcdc_snap_row *mcdc_snapfacts_switch_owed(const mcdc_snapfacts *sf, const char *sink_id,
                                                const mcdc_snap_row **full_open) {
    *full_open = NULL;
    const mcdc_snap_row *sw = NULL;
    for (int i = 0; i < sf->n; i++) {
        const mcdc_snap_row *r = &sf->rows[i];
        if (r->event == MCDC_SNAP_SWITCHED && r->has_batch_id && strcmp(r->app_id, sink_id) == 0 &&
            (sw == NULL || r->batch_id > sw->batch_id))
            sw = r;
    }
    if (sw == NULL) return NULL;
    const char *done = mcdc_snapfacts_done_max(sf, sink_id);
    for (int i = 0; i < sf->n; i++) {
        const mcdc_snap_row *r = &sf->rows[i];
        if (switch_batch(r) != sw->batch_id || strcmp(r->app_id, sink_id) != 0) continue;
        if (is_chunked_open(r) || (done && r->min_lsn[0] && strcmp(done, r->min_lsn) >= 0)) {
            *full_open = NULL;
            return NULL; /* answered */
        }
        if (*full_open == NULL || strcmp(r->min_lsn, (*full_open)->min_lsn) > 0) *full_open = r;
    }
    return sw;
}

const mcdc_snap_row *mcdc_snapfacts_open_chunked(const mcdc_snapfacts *sf) {
    const mcdc_snap_row *top = mcdc_snapfacts_newest_chunked(sf);
    const char *done = mcdc_snapfacts_done_max(sf, NULL);
    return top && !(done && strcmp(done, top->min_lsn) >= 0) ? top : NULL;
}

const mcdc_snap_row *mcdc_snapfacts_plan(const mcdc_snapfacts *sf, const char *s) {
    for (int i = 0; i < sf->n; i++) {
        const mcdc_snap_row *r = &sf->rows[i];
        const char *of = json_string_value(json_object_get(r->detail, "snapshot"));
        if (r->event == MCDC_SNAP_PLAN && of && strcmp(of, s) == 0) return r;
    }
    return NULL;
}

int mcdc_snapfacts_lock(const mcdc_snapfacts *sf, const char *target, const char *mode,
                        mcdc_purged_fn purged, void *purged_ctx, mcdc_error *err) {
    const char *done = mcdc_snapfacts_done_max(sf, NULL);
    const mcdc_snap_row *top = NULL;
    for (int i = 0; i < sf->n; i++) {
        const mcdc_snap_row *r = &sf->rows[i];
        if (r->event != MCDC_SNAP_OPEN || !r->max_lsn[0]) continue;
        if (done && strcmp(r->max_lsn, done) <= 0) continue; /* completed */
        const char *m = mcdc_snap_mode(r);
        if (mode && strcmp(m, mode) == 0) continue;
        if (strcmp(m, "full") == 0) {
            /* A full one stops counting next to a chunked open of its
             * generation (which took it over) and once cleanup passed S. */
            bool taken = false;
            for (int k = 0; k < sf->n && !taken; k++)
                taken = is_chunked_open(&sf->rows[k]) && strcmp(sf->rows[k].app_id, r->app_id) == 0;
            if (taken) continue;
            bool gone = false;
            int rc = purged ? purged(purged_ctx, r->max_lsn, &gone, err) : MCDC_OK;
            if (rc) return rc;
            if (gone) continue;
        }
        if (top == NULL || strcmp(r->max_lsn, top->max_lsn) > 0) top = r;
    }
    if (top == NULL) return MCDC_OK;
    const char *m = mcdc_snap_mode(top);
    json_t *g = json_object_get(top->detail, "generation");
    char gen[32] = "?";
    if (json_is_integer(g)) snprintf(gen, sizeof gen, "%lld", (long long)json_integer_value(g));
    bool chunked = strcmp(m, "chunked") == 0;
    char what[96];
    if (mode) snprintf(what, sizeof what, "no %s snapshot is taken until it does", mode);
    else snprintf(what, sizeof what, "a seed writes nothing over it");
    return mcdc_error_set(
        err, MCDC_E_SNAPSHOT_OPEN,
        "%s has a %s snapshot open at %s (generation %s, sink %s) that has not completed: %s. "
        "To finish it, %s%s%s. Then either mode may be used. Nothing was written",
        target, m, top->max_lsn, gen, top->app_id, what,
        chunked ? "run mssql-cdc backfill until it reports done, or run the stream with "
                  "--snapshot chunked"
                : "run the stream again with --snapshot full, which reads the table again (if "
                  "no run is reading it any more, it also stops counting once CDC cleanup "
                  "passes ",
        chunked ? "" : top->max_lsn, chunked ? "" : ")");
}
