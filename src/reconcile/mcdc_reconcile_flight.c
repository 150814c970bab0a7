/*
 * mcdc_reconcile_flight.c - two sources of reconcile's IN_FLIGHT beside
 * bronze's own change rows (mcdc_reconcile.c reads those):
 *
 *   the change tables  the changes past bronze's position that the stream
 *                      has not read yet. After a capture instance switch
 *                      two instances of the table are live, and the
 *                      stream reads past its position as it always does:
 *                      the older one up to the newer one's start S - 1,
 *                      the newer one from S, none older than the instance
 *                      its position records (mcdc_follow_cut, through the
 *                      change feed's follow mode). The same pieces are
 *                      read here, so a key changed in the newer instance
 *                      only is in flight, not a difference.
 *   pending repairs    a repair recorded (its facts row) after silver's
 *                      last apply pass: apply takes it on its next pass, so
 *                      its keys are changes pending apply, and a second
 *                      repair of them would append them twice.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_changes.h"
#include "mcdc_frame.h"
#include "mcdc_lake.h"
#include "mcdc_reconcile.h"
#include "mcdc_silver.h"
#include "mcdc_tables.h"
#include "mcdc_txn.h"

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

/* ---- the change tables -------------------------------------------------------------- */

void rec_flight_close(rec_flight *f) {
    if (f == NULL) return;
    mcdc_changes_close(f->follow);
    mcdc_opts_free(f->opts);
    silver_instances_free(&f->names);
    memset(f, 0, sizeof *f);
}

/* The follow handle says what the stream would (a switch, a name that is
 * gone, a purge it would skip): the configured handle said the first two
 * already, and the rest is no concern of reconcile's, whose failures come
 * back as return codes. Only its errors reach the run's log. */
static void pass_errors(void *user, mcdc_log_level level, const char *msg) {
    const mcdc_log_sink *outer = user;
    if (outer && outer->fn) outer->fn(outer->user, level, msg);
    else mcdc_log_stderr(level, msg);
}

/* The follow handle, once a run: the stream's options, but reading what
 * the stream would never stops reconcile. DDL inside the range (under
 * schemaChangePolicy=fail) stops the stream before it reads; here the
 * rows' keys are all that is read. And a cleanup that passed bronze's
 * position is the stream's loss, not reconcile's: what is left past it is
 * still in flight. On failure (a union of the instances' columns the
 * stream could not read either, say) only the configured instance is read,
 * as before the switch. */
static void flight_open(rec_flight *f, const mcdc_opts *opts) {
    if (f->follow || f->unusable) return;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_opts_clone(&f->opts, opts, &e);
    if (rc == MCDC_OK) rc = mcdc_opts_set(f->opts, "schemaChangePolicy", "classify", NULL, &e);
    if (rc == MCDC_OK) rc = mcdc_opts_set(f->opts, "failOnDataLoss", "false", NULL, &e);
    const mcdc_log_sink *outer = mcdc_log_current();
    mcdc_log_sink quiet = {pass_errors, (void *)outer, MCDC_LOG_ERROR};
    mcdc_log_use(&quiet);
    if (rc == MCDC_OK) rc = silver_source_open(&f->follow, f->opts, &f->names, true, &e);
    mcdc_log_use(outer);
    if (rc == MCDC_OK) return;
    mcdc_log(MCDC_LOG_WARN,
             "the changes in flight are read from capture instance %s only: the other instances "
             "of its table cannot be followed (%s)",
             mcdc_opt_capture_instance(opts), e.message);
    f->follow = NULL;
    f->unusable = true;
}

/* The configured instance alone, (after, upper], from its min_lsn at the
 * lowest (what cleanup took is gone for both sides). */
static int read_configured(mcdc_changes *c, const mcdc_lsn *after, const mcdc_lsn *upper,
                           mcdc_batch_fn fn, void *ctx, mcdc_error *err) {
    mcdc_lsn from, min;
    mcdc_lsn_range *rg = NULL;
    int n = 0;
    int rc = mcdc_lsn_increment(&from, after, err);
    if (rc == MCDC_OK) rc = mcdc_changes_min_lsn(c, &min, err);
    if (rc == MCDC_OK && mcdc_lsn_cmp(&min, &from) > 0) from = min;
    if (rc == MCDC_OK) rc = mcdc_changes_plan(c, &from, upper, 4, &rg, &n, err);
    for (int i = 0; rc == MCDC_OK && i < n; i++) rc = mcdc_changes_read(c, &rg[i], fn, ctx, NULL, err);
    mcdc_free(rg);
    return rc;
}

/* The pieces the stream would read after `after`, up to upper: each from
 * where the stream would start it, raised to its instance's min_lsn when
 * cleanup passed that (the changes below it are gone for both sides). */
static int read_pieces(rec_flight *f, const mcdc_lsn *after, const mcdc_lsn *upper,
                       const char *read_ci, mcdc_batch_fn fn, void *ctx, mcdc_error *err) {
    mcdc_changes_batch b;
    int rc = mcdc_changes_batch_plan(f->follow, after, read_ci, upper, &b, err);
    if (rc) return rc;
    for (int i = 0; rc == MCDC_OK && i < b.n_pieces; i++) {
        mcdc_changes_piece q = b.pieces[i];
        mcdc_lsn min;
        rc = mcdc_changes_piece_min_lsn(f->follow, &q, &min, err);
        if (rc) break;
        if (!mcdc_lsn_is_zero(&min) && mcdc_lsn_cmp(&min, &q.from) > 0) q.from = min;
        if (mcdc_lsn_cmp(&q.from, &q.to) > 0) continue;
        mcdc_lsn_range *rg = NULL;
        int n = 0;
        rc = mcdc_changes_plan_piece(f->follow, &q, 4, &rg, &n, err);
        for (int k = 0; rc == MCDC_OK && k < n; k++)
            rc = mcdc_changes_read(f->follow, &rg[k], fn, ctx, NULL, err);
        mcdc_free(rg);
        if (rc) mcdc_error_wrap(err, "capture instance %s", q.ci);
    }
    mcdc_changes_batch_free(&b);
    return rc;
}

int rec_flight_read(rec_flight *f, const mcdc_opts *opts, mcdc_changes *configured,
                    const mcdc_lsn *after, const mcdc_lsn *upper, const char *read_ci,
                    mcdc_batch_fn fn, void *ctx, mcdc_error *err) {
    MCDC_ASSERT(f && opts && configured && after && upper && fn);
    flight_open(f, opts);
    if (f->follow) {
        const mcdc_log_sink *outer = mcdc_log_current();
        mcdc_log_sink quiet = {pass_errors, (void *)outer, MCDC_LOG_ERROR};
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_log_use(&quiet);
        int rc = read_pieces(f, after, upper, read_ci, fn, ctx, &e);
        mcdc_log_use(outer);
        if (rc == MCDC_OK) return MCDC_OK;
        if (rc == MCDC_E_SCHEMA) {
            /* a captured type the stream cannot hold: it stops there, and
             * so does what it would read */
            mcdc_log(MCDC_LOG_WARN, "the changes in flight are read from capture instance %s only: %s",
                     mcdc_changes_capture_instance(configured), e.message);
        } else {
            /* an instance dropped between the listing and its read: listed
             * again, it is gone (its changes are the newer one's too); any
             * other failure fails again. Keys read twice count once. */
            mcdc_log(MCDC_LOG_INFO, "reading the changes in flight again: %s", e.message);
            mcdc_log_use(&quiet);
            rc = read_pieces(f, after, upper, read_ci, fn, ctx, err);
            mcdc_log_use(outer);
            return rc;
        }
    }
    return read_configured(configured, after, upper, fn, ctx, err);
}

/* ---- pending repairs ------------------------------------------------------------------ */
int rec_bronze_from(mcdc_table *bronze, const char *const *cols, int32_t n, const char *lo,
                    mcdc_batch_fn fn, void *ctx, mcdc_error *err) {
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.columns = cols;
    sc.n_columns = n;
    sc.prune_column = "_start_lsn";
    sc.lo = (mcdc_scan_bound){true, lo, 0};
    int64_t v;
    return mcdc_table_scan_run(bronze, &sc, fn, ctx, &v, NULL, err);
}


/* Apply's app id in silver (mcdc_txn.h): its commits' userMetadata has
 * planned.end.facts_version, the facts version the pass read. */
#define REC_APPLY_APP_ID mcdc_txn_fixed(MCDC_TXN_APPLY)

void rec_pending_clear(rec_pending *p) {
    if (p == NULL) return;
    rec_keyset_clear(&p->keys);
    mcdc_free(p->run);
    for (int32_t i = 0; i < p->n_runs; i++) mcdc_free(p->run_ids[i]);
    mcdc_free(p->run_ids);
    mcdc_free(p->stamps);
    memset(p, 0, sizeof *p);
}

/* The facts version silver's last apply pass at or below `version` read;
 * -1 when none is known (no pass recorded one, or its commit left the
 * log): apply's next pass then takes every repair recorded, and so every
 * one is pending. */
static int last_facts_version(mcdc_table *silver, int64_t version, int64_t *fv, mcdc_error *err) {
    *fv = -1;
    int64_t n = -1;
    int rc = mcdc_table_txn_version(silver, REC_APPLY_APP_ID, &n, err);
    for (; rc == MCDC_OK && n >= 0; n--) {
        char *um = NULL;
        int64_t at = -1;
        mcdc_error e = MCDC_ERROR_INIT;
        int x = mcdc_table_txn_commit(silver, REC_APPLY_APP_ID, n, &um, &at, &e);
        if (x == MCDC_E_NOTFOUND) break;
        if (x) {
            if (err) *err = e;
            rc = x;
            break;
        }
        if (at > version) { /* a pass after the version compared */
            mcdc_free(um);
            continue;
        }
        mcdc_pos start = {0}, end = {0};
        if (mcdc_frame_planned_of(um, MCDC_POS_APPLY, &start, &end, NULL) == MCDC_OK &&
            end.apply.has_versions && end.apply.facts_version >= 0)
            *fv = end.apply.facts_version;
        mcdc_pos_free(&start);
        mcdc_pos_free(&end);
        mcdc_free(um);
        break;
    }
    return rc;
}

typedef struct pending_ctx {
    rec_pending *p;
    const char *const *keys;
    int32_t n_keys;
    bool ordinal;
    int64_t cap_run;
    mcdc_buf key;
} pending_ctx;

static int col_of(const mcdc_schema *s, const char *name) {
    int32_t i = mcdc_schema_find(s, name);
    for (int32_t k = 0; i < 0 && k < s->n_fields; k++)
        if (mcdc_str_ieq(s->fields[k].name, name)) i = k;
    return i;
}

/* A repair row (docs/repair.md): operation 1, 2 or 4 with no _seqval, at a
 * pending repair's stamp. */
static int pending_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    pending_ctx *c = ctx;
    rec_pending *p = c->p;
    const mcdc_column *kc[SILVER_KEYS_MAX];
    int rc = MCDC_OK;
    for (int32_t k = 0; rc == MCDC_OK && k < c->n_keys; k++) {
        int i = col_of(b->schema, c->keys[k]);
        if (i < 0) rc = mcdc_error_set(err, MCDC_E_CORRUPT, "bronze: no key column %s in its rows", c->keys[k]);
        else kc[k] = &b->columns[i];
    }
    int ls = col_of(b->schema, "_start_lsn"), op = col_of(b->schema, "_operation");
    int sq = col_of(b->schema, "_seqval");
    if (rc == MCDC_OK && (ls < 0 || op < 0 || sq < 0))
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "bronze rows without _start_lsn, _operation or _seqval");
    for (int64_t i = 0; rc == MCDC_OK && i < b->rows; i++) {
        mcdc_cell o = mcdc_row_get(b, i, op), l = mcdc_row_get(b, i, ls);
        if (o.kind != MCDC_CELL_INT || o.i == 0 || o.i == 3 || l.kind != MCDC_CELL_TEXT || l.i != 22 ||
            mcdc_col_is_valid(&b->columns[sq], i))
            continue;
        int32_t run = -1;
        for (int32_t s = 0; s < p->n_runs && run < 0; s++)
            if (memcmp(p->stamps[s], l.s, 22) == 0) run = s;
        if (run < 0) continue;
        c->key.len = 0;
        rc = silver_key_append(&c->key, kc, c->n_keys, i, err);
        int64_t idx;
        bool added;
        if (rc == MCDC_OK) rc = rec_keyset_add(&p->keys, c->key.data, c->key.len, &idx, &added, err);
        if (rc || !added) continue;
        int64_t v;
        p->keys.val[idx] = c->ordinal && silver_range_value(kc[0], i, &v) ? v : REC_NO_ORDINAL;
        if ((rc = rec_grow(&p->run, &c->cap_run, idx + 1, sizeof *p->run, err)) == MCDC_OK)
            p->run[idx] = run;
    }
    mcdc_batch_free(b);
    return rc;
}

int rec_pending_load(rec_pending *p, mcdc_table *silver, int64_t version, mcdc_table *facts,
                     mcdc_table *bronze, const char *bronze_name, const char *const *keys,
                     int32_t n_keys, bool ordinal, mcdc_error *err) {
    MCDC_ASSERT(p && silver && facts && bronze && bronze_name && keys && n_keys > 0);
    rec_pending_clear(p);
    silver_repairs now = {0}, before = {0};
    int64_t fv, got;
    int rc = last_facts_version(silver, version, &fv, err);
    if (rc == MCDC_OK) rc = silver_repairs_load(&now, facts, bronze_name, -1, &got, err);
    if (rc == MCDC_OK && now.n > 0 && fv >= 0) {
        mcdc_error e = MCDC_ERROR_INIT;
        /* that version gone (VACUUM): apply takes every repair again */
        if (silver_repairs_load(&before, facts, bronze_name, fv, &got, &e) != MCDC_OK)
            silver_repairs_free(&before);
    }
    if (rc == MCDC_OK && now.n > 0) {
        p->run_ids = mcdc_calloc((size_t)now.n, sizeof *p->run_ids);
        p->stamps = mcdc_calloc((size_t)now.n, sizeof *p->stamps);
        if (p->run_ids == NULL || p->stamps == NULL) rc = nomem(err);
    }
    char lo[23] = "";
    for (int32_t i = 0; rc == MCDC_OK && i < now.n; i++) {
        if (silver_repairs_has(&before, now.run_ids[i])) continue;
        if ((p->run_ids[p->n_runs] = mcdc_strdup(now.run_ids[i])) == NULL) {
            rc = nomem(err);
            break;
        }
        memcpy(p->stamps[p->n_runs++], now.stamps[i], 23);
        if (lo[0] == 0 || strcmp(now.stamps[i], lo) < 0) memcpy(lo, now.stamps[i], 23);
    }
    silver_repairs_free(&now);
    silver_repairs_free(&before);
    if (rc || p->n_runs == 0) {
        if (rc) rec_pending_clear(p);
        return rc;
    }
    /* their rows in bronze: the keys */
    const char *cols[SILVER_KEYS_MAX + 3];
    int32_t nc = 0;
    for (int32_t k = 0; k < n_keys; k++) cols[nc++] = keys[k];
    cols[nc++] = "_start_lsn";
    cols[nc++] = "_operation";
    cols[nc++] = "_seqval";
    pending_ctx c = {.p = p, .keys = keys, .n_keys = n_keys, .ordinal = ordinal};
    rc = rec_bronze_from(bronze, cols, nc, lo, pending_rows, &c, err);
    mcdc_buf_free(&c.key);
    if (rc) {
        rec_pending_clear(p);
        mcdc_error_wrap(err, "reading bronze %s for the repairs apply has not taken yet", bronze_name);
    }
    return rc;
}

const char *rec_pending_find(const rec_pending *p, const uint8_t *key, size_t n) {
    if (p == NULL || p->n_runs == 0) return NULL;
    int64_t idx = rec_keyset_find(&p->keys, key, n);
    return idx < 0 ? NULL : p->run_ids[p->run[idx]];
}
