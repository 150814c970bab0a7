/*
 * mcdc_reconcile.c - mssql-cdc reconcile (the reference's reconcile, §2.8):
 * is silver equal to its SQL Server table?
 *
 * The reads, in the order that makes IN_FLIGHT sound (the seed's
 * paragraph on it):
 *   E        silver's applied_lsn in the control table, read before the
 *            silver version compared (silver holds every change up to it)
 *   version  silver pinned at its latest version, read there only
 *   M        max_lsn, read just before the source is counted
 *   tier 1   the source's counts per bucket (one GROUP BY scan), then the
 *            keys in flight after min(M, E) (bronze after the count, then
 *            the change table past bronze's position up to max_lsn read
 *            then), then silver's counts
 *   M'       max_lsn again, just before the rows are read
 *   tier 2   the chosen buckets' rows through the snapshot reader, silver's
 *            of the same buckets, joined on the key by one row hash; then
 *            the keys in flight after min(M', E) again
 *   chunks   facts, then the plans, then bronze (a wave's rows commit first)
 *   settle   with settle_seconds: what is IN_FLIGHT re-checked, each time
 *            E, silver's latest version, M', its rows, the keys in flight
 *   report   one commit, txn(mssql-cdc.reconcile.<run_id>, 1) (2: a run
 *            that goes on to repair keys)
 * Before any of it: the options checked to be bronze's table's, and, for
 * --repair, the repairs of runs killed after their report completed.
 * Nothing is written to SQL Server; the source is read under READ
 * COMMITTED (Tier 2: the isolationLevel option), never NOLOCK.
 *
 * This file is the job: its handle, the tables, the source, E, Tier 1 and
 * the choice of what Tier 2 compares, the keys in flight, settling, the
 * chunk checks, the run and its result. Tier 2 is mcdc_reconcile_tier2.c,
 * the report mcdc_reconcile_report.c.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_cfg.h"
#include "mcdc_changes.h"
#include "mcdc_context.h"
#include "mcdc_frame.h"
#include "mcdc_lake.h"
#include "mcdc_options.h"
#include "mcdc_plans.h"
#include "mcdc_reconcile.h"
#include "mcdc_repair.h"
#include "mcdc_runtime.h"
#include "mcdc_silver.h"
#include "mcdc_snapfacts.h"
#include "mcdc_tables.h"
#include "mcdc_value_text.h"

static const uint8_t ZERO_LSN[10];

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

static const char *const FAILURES[MCDC_RECONCILE_FAILURE_TYPES] = {
    "MISSING_TARGET", "MISSING_SOURCE", "RECORD_DIFF", "IN_FLIGHT",
    "CHUNK_TILING",   "CHUNK_ROWS",     "CHUNK_STAMP", "DUPLICATE_TARGET"};

const char *mcdc_reconcile_failure_name(int failure) {
    return failure >= 0 && failure < MCDC_RECONCILE_FAILURE_TYPES ? FAILURES[failure] : NULL;
}

/* ---- helpers ------------------------------------------------------------------------ */
static bool lsn_bytes(uint8_t out[10], const char *s) {
    return s && silver_lsn_parse(out, s, strlen(s));
}

/* The older of two LSN texts (NULL or unset: zero). */
void rec_lsn_min(uint8_t out[10], const char *a, const uint8_t *b) {
    uint8_t x[10] = {0};
    lsn_bytes(x, a);
    if (b && memcmp(b, x, 10) < 0) memcpy(x, b, 10);
    memcpy(out, x, 10);
}

int rec_col_index(const mcdc_schema *s, const char *name) {
    int32_t i = mcdc_schema_find(s, name);
    if (i >= 0) return i;
    for (int32_t k = 0; k < s->n_fields; k++)
        if (mcdc_str_ieq(s->fields[k].name, name)) return k;
    return -1;
}

/* An ordinal bound as JSON text: an integer, or a date "YYYY-MM-DD" within
 * SQL Server's range (below it its first day; above it open). NULL: open. */
int rec_bound_json(char **out, const mcdc_reconcile *r, bool has, int64_t v, mcdc_error *err) {
    *out = NULL;
    if (!has) return MCDC_OK;
    char t[64];
    if (!r->date_key) {
        snprintf(t, sizeof t, "%lld", (long long)v);
    } else {
        int64_t first = mcdc_days_from_civil(1, 1, 1), last = mcdc_days_from_civil(9999, 12, 31);
        if (v > last) return MCDC_OK;
        if (v < first) v = first;
        t[0] = '"';
        size_t n = mcdc_text_date(t + 1, v);
        t[n + 1] = '"';
        t[n + 2] = 0;
    }
    *out = mcdc_strdup(t);
    return *out ? MCDC_OK : nomem(err);
}

int rec_add_diff(mcdc_reconcile *r, rec_diff *d, mcdc_error *err) {
    int rc = rec_grow(&r->diffs, &r->cap_diffs, r->n_diffs + 1, sizeof *r->diffs, err);
    if (rc) return rc;
    r->diffs[r->n_diffs++] = *d;
    return MCDC_OK;
}

static void diffs_clear(mcdc_reconcile *r) {
    for (int64_t i = 0; i < r->n_diffs; i++) {
        mcdc_free(r->diffs[i].key_json);
        mcdc_free(r->diffs[i].detail);
        mcdc_free(r->diffs[i].lo);
        mcdc_free(r->diffs[i].hi);
    }
    mcdc_free(r->diffs);
    r->diffs = NULL;
    r->n_diffs = r->cap_diffs = 0;
    mcdc_buf_free(&r->diff_keys);
}

/* ---- the keys in flight ---------------------------------------------------------------
 * The keys of the changes after `lower`, which one side may not hold yet:
 * bronze's (its latest version; snapshot rows are no change), then the
 * change tables' after bronze's position (its newest change, or a chunked
 * snapshot's S) up to max_lsn read now: changes the stream has not read,
 * in every capture instance it could still read them from
 * (mcdc_reconcile_flight.c). */
typedef struct moved_ctx {
    mcdc_reconcile *r;
    rec_keyset *set;
    uint8_t lower[10];
    uint8_t newest[10];
    bool has_newest;
    mcdc_buf key;
    bool bronze;   /* rows of bronze (else of the change table) */
    /* the capture instance of bronze's newest change: the one the stream's
     * position records ("": none seen) */
    char ci[MCDC_IDENT_BYTES_MAX + 1];
    uint8_t ci_at[10];
} moved_ctx;

static int moved_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    moved_ctx *m = ctx;
    mcdc_reconcile *r = m->r;
    const mcdc_column *kc[SILVER_KEYS_MAX];
    int rc = MCDC_OK;
    for (int32_t k = 0; k < r->n_keys; k++) {
        int i = rec_col_index(b->schema, r->keys[k]);
        if (i < 0) {
            rc = mcdc_error_set(err, MCDC_E_CORRUPT, "%s: no key column %s in its rows",
                                m->bronze ? "bronze" : "the change table", r->keys[k]);
            goto done;
        }
        kc[k] = &b->columns[i];
    }
    int ls = rec_col_index(b->schema, "_start_lsn"), op = rec_col_index(b->schema, "_operation");
    int ch = rec_col_index(b->schema, "_chunk"), sn = rec_col_index(b->schema, "_snapshot");
    int ci = m->bronze ? rec_col_index(b->schema, "_capture_instance") : -1;
    if (ls < 0 || op < 0) {
        rc = mcdc_error_set(err, MCDC_E_CORRUPT, "bronze rows without _start_lsn or _operation");
        goto done;
    }
    for (int64_t i = 0; i < b->rows && rc == MCDC_OK; i++) {
        mcdc_cell l = mcdc_row_get(b, i, ls), o = mcdc_row_get(b, i, op);
        uint8_t at[10];
        if (l.kind != MCDC_CELL_TEXT || !silver_lsn_parse(at, l.s, (size_t)l.i)) continue;
        if (m->bronze && memcmp(at, m->lower, 10) <= 0) continue;
        bool change = o.kind == MCDC_CELL_INT && o.i != 0;
        if (m->bronze) {
            /* bronze's position: a chunk row's S, or a change's LSN */
            mcdc_cell c = ch >= 0 ? mcdc_row_get(b, i, ch) : mcdc_cell_null();
            uint8_t pos[10];
            bool has = false;
            if (c.kind == MCDC_CELL_INT && sn >= 0) {
                mcdc_cell s = mcdc_row_get(b, i, sn);
                has = s.kind == MCDC_CELL_TEXT && silver_lsn_parse(pos, s.s, (size_t)s.i);
            } else if (change) {
                memcpy(pos, at, 10);
                has = true;
            }
            if (has && (!m->has_newest || memcmp(pos, m->newest, 10) > 0)) {
                memcpy(m->newest, pos, 10);
                m->has_newest = true;
            }
            mcdc_cell n = change && ci >= 0 ? mcdc_row_get(b, i, ci) : mcdc_cell_null();
            if (n.kind == MCDC_CELL_TEXT && (size_t)n.i < sizeof m->ci &&
                (m->ci[0] == 0 || memcmp(at, m->ci_at, 10) > 0)) {
                memcpy(m->ci, n.s, (size_t)n.i);
                m->ci[n.i] = 0;
                memcpy(m->ci_at, at, 10);
            }
        }
        if (!change) continue;
        m->key.len = 0;
        rc = silver_key_append(&m->key, kc, r->n_keys, i, err);
        int64_t idx;
        bool added;
        if (rc == MCDC_OK) rc = rec_keyset_add(m->set, m->key.data, m->key.len, &idx, &added, err);
        if (rc == MCDC_OK && added) {
            /* its ordinal, for the bucket it falls in (REC_NO_ORDINAL: in none) */
            int64_t v;
            m->set->val[idx] = r->ordinal && silver_range_value(kc[0], i, &v) ? v : REC_NO_ORDINAL;
        }
    }
done:
    mcdc_batch_free(b);
    return rc;
}

int rec_moved_keys(mcdc_reconcile *r, const uint8_t lower[10], rec_keyset *set, mcdc_error *err) {
    moved_ctx m = {.r = r, .set = set, .bronze = true};
    memcpy(m.lower, lower, 10);
    mcdc_schema *bs = NULL;
    int rc = mcdc_table_schema(r->bronze, &bs, err);
    const char *cols[SILVER_KEYS_MAX + 5];
    int32_t nc = 0;
    for (int32_t k = 0; k < r->n_keys; k++) cols[nc++] = r->keys[k];
    cols[nc++] = "_start_lsn";
    cols[nc++] = "_operation";
    if (bs && mcdc_schema_find(bs, "_chunk") >= 0) cols[nc++] = "_chunk";
    if (bs && mcdc_schema_find(bs, "_snapshot") >= 0) cols[nc++] = "_snapshot";
    if (bs && mcdc_schema_find(bs, "_capture_instance") >= 0) cols[nc++] = "_capture_instance";
    char lo[24];
    silver_lsn_format(lo, lower);
    if (rc == MCDC_OK && bs) {
        rc = rec_bronze_from(r->bronze, cols, nc, lo, moved_rows, &m, err);
        if (rc) mcdc_error_wrap(err, "reading bronze %s for the changes in flight", r->cfg.bronze);
    }
    mcdc_schema_unref(bs);
    /* the change table past bronze's position, up to max_lsn now */
    mcdc_lsn upper, after;
    if (rc == MCDC_OK) rc = mcdc_changes_max_lsn(r->changes, &upper, err);
    if (rc == MCDC_OK) {
        uint8_t a[10];
        memcpy(a, m.has_newest && memcmp(m.newest, lower, 10) > 0 ? m.newest : lower, 10);
        char t[24];
        silver_lsn_format(t, a);
        rc = mcdc_lsn_parse_cstr(&after, t, err);
    }
    if (rc == MCDC_OK && mcdc_lsn_cmp(&upper, &after) > 0) {
        m.bronze = false;
        rc = rec_flight_read(&r->flight, r->opts, r->changes, &after, &upper, m.ci[0] ? m.ci : NULL,
                             moved_rows, &m, err);
        if (rc) mcdc_error_wrap(err, "reading the change tables for the changes in flight");
    }
    mcdc_buf_free(&m.key);
    return rc;
}

/* ---- tier 1 ---------------------------------------------------------------------------- */
typedef struct fine_acc {
    mcdc_reconcile *r;
    rec_keyset ids;    /* fine id (8 bytes) -> index into v */
    rec_fine *v;
    int64_t n, cap;
    int64_t rows;
    bool has_min;
    int64_t min, max; /* the ordinals seen */
    bool extent_only;
    int64_t last_id, last; /* the fine bucket of the row before, its index in v */
} fine_acc;

static int fine_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    fine_acc *a = ctx;
    int rc = MCDC_OK;
    const mcdc_column *c = &b->columns[0];
    a->rows += b->rows;
    if (!a->extent_only && a->r->ctx.progress)
        mcdc_progress_add(a->r->ctx.progress, b->rows, mcdc_batch_bytes(b));
    rc = mcdc_ctx_check_stop(&a->r->ctx, "the reconcile run's report", err);
    for (int64_t i = 0; i < b->rows && rc == MCDC_OK; i++) {
        int64_t v;
        if (a->r->ordinal && !silver_range_value(c, i, &v)) continue; /* NULL keys in none */
        if (!a->r->ordinal) continue;
        if (!a->has_min || v < a->min) a->min = v;
        if (!a->has_min || v > a->max) a->max = v;
        a->has_min = true;
        if (a->extent_only) continue;
        int64_t id = rec_floor_div(v, a->r->width), idx;
        if (a->n > 0 && id == a->last_id) { /* silver's files are in key order: mostly the same */
            a->v[a->last].rows++;
            a->v[a->last].sum += v;
            continue;
        }
        bool added;
        rc = rec_keyset_add(&a->ids, (const uint8_t *)&id, sizeof id, &idx, &added, err);
        if (rc) break;
        if (added) {
            if ((rc = rec_grow(&a->v, &a->cap, a->n + 1, sizeof *a->v, err)) != MCDC_OK) break;
            a->ids.val[idx] = a->n;
            a->v[a->n++] = (rec_fine){id, 0, 0};
            if (a->n > REC_BUCKETS_MAX * 4) {
                rc = mcdc_error_set(err, MCDC_E_LIMIT, "silver's keys fall in more than %d buckets",
                                    REC_BUCKETS_MAX * 4);
                break;
            }
        }
        a->last_id = id;
        a->last = a->ids.val[idx];
        rec_fine *f = &a->v[a->last];
        f->rows++;
        f->sum += v;
    }
    mcdc_batch_free(b);
    return rc;
}

static int by_fine(const void *x, const void *y) {
    const rec_fine *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

/* Silver's key column, pinned: its fine buckets (or, extent_only, its
 * ordinals' extent; other keys: its rows). */
static int silver_counts(mcdc_reconcile *r, fine_acc *a, mcdc_error *err) {
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.version = r->version;
    const char *cols[1] = {r->keys[0]};
    sc.columns = cols;
    sc.n_columns = 1;
    int64_t v;
    int rc = mcdc_table_scan_run(r->silver, &sc, fine_rows, a, &v, NULL, err);
    if (rc) mcdc_error_wrap(err, "counting silver %s", r->cfg.silver);
    return rc;
}

/* Ordinal keys: marks moved each bucket a key changed in flight, or one of
 * a repair pending apply, falls in. */
static void mark_moved(mcdc_reconcile *r, const rec_keyset *moved) {
    const rec_keyset *sets[2] = {moved, &r->pending.keys};
    for (int s = 0; s < 2; s++)
        for (int64_t i = 0; i < sets[s]->n; i++) {
            if (sets[s]->val[i] == REC_NO_ORDINAL) continue; /* a NULL key: in no bucket */
            int64_t f = rec_floor_div(sets[s]->val[i], r->width);
            int64_t b = rec_bucket_of(r->buckets, r->n_buckets, f);
            if (b >= 0) r->buckets[b].moved = true;
        }
}

static int tier1(mcdc_reconcile *r, rec_keyset *moved, mcdc_error *err) {
    mcdc_key_bucket *sb = NULL;
    int nsb = 0;
    fine_acc sil = {.r = r};
    rec_fine *src = NULL;
    int rc = MCDC_OK;
    /* the source counts in one query; silver's key column is read */
    if (r->ctx.progress)
        mcdc_progress_phase(r->ctx.progress, "counting", NULL, -1, mcdc_table_view_rows(r->sview),
                            false);
    if (r->ordinal) {
        bool found;
        int64_t lo, hi;
        rc = mcdc_changes_key_extent(r->changes, r->keys[0], &found, &lo, &hi, err);
        if (rc == MCDC_OK && !found) { /* an empty source: silver's extent sets the grid */
            fine_acc ex = {.r = r, .extent_only = true};
            rc = silver_counts(r, &ex, err);
            found = ex.has_min;
            lo = ex.min;
            hi = ex.max;
        }
        r->width = found ? rec_fine_width(lo, hi) : 1;
        if (rc == MCDC_OK && found)
            rc = mcdc_changes_key_buckets(r->changes, r->keys[0], r->width, REC_BUCKETS_MAX, &sb,
                                          &nsb, err);
    } else {
        int64_t rows = 0;
        rc = mcdc_changes_row_count(r->changes, &rows, err);
        if (rc == MCDC_OK) {
            r->buckets = mcdc_calloc(1, sizeof *r->buckets);
            if (r->buckets == NULL) rc = nomem(err);
            else {
                r->n_buckets = 1;
                r->buckets[0].src_rows = rows;
            }
        }
    }
    /* after the count: every change it may have seen */
    uint8_t lower[10];
    rec_lsn_min(lower, r->source_lsn, r->has_e ? r->e_lsn : ZERO_LSN);
    if (rc == MCDC_OK) rc = rec_moved_keys(r, lower, moved, err);
    if (rc == MCDC_OK) rc = silver_counts(r, &sil, err);
    if (rc == MCDC_OK && r->ordinal) {
        src = mcdc_malloc(((size_t)nsb + 1) * sizeof *src);
        if (src == NULL) rc = nomem(err);
        for (int i = 0; rc == MCDC_OK && i < nsb; i++)
            src[i] = (rec_fine){sb[i].index, sb[i].rows, rec_i128_of(sb[i].sum.lo, sb[i].sum.hi)};
        if (rc == MCDC_OK && sil.n > 1) qsort(sil.v, (size_t)sil.n, sizeof *sil.v, by_fine);
        if (rc == MCDC_OK)
            rc = rec_merge_buckets(&r->buckets, &r->n_buckets, src, nsb, sil.v, sil.n, r->width,
                                   r->cfg.bucket_rows, err);
        if (rc == MCDC_OK) mark_moved(r, moved);
    } else if (rc == MCDC_OK) {
        r->buckets[0].sil_rows = sil.rows;
        r->buckets[0].moved = moved->n > 0 || r->pending.keys.n > 0;
    }
    for (int64_t i = 0; rc == MCDC_OK && i < r->n_buckets; i++) {
        r->buckets[i].status = rec_bucket_status(&r->buckets[i]);
        r->res.source_rows += r->buckets[i].src_rows;
        r->res.silver_rows += r->buckets[i].sil_rows;
    }
    mcdc_free(sb);
    mcdc_free(src);
    mcdc_free(sil.v);
    rec_keyset_clear(&sil.ids);
    return rc;
}

/* The buckets (other keys: ranges) Tier 2 compares: every MISMATCH and a
 * sample of the MATCH ones. */
static int choose(mcdc_reconcile *r, mcdc_error *err) {
    uint64_t seed = r->cfg.has_sample_seed ? r->cfg.sample_seed : (uint64_t)mcdc_now_utc_us() ^
                                                                     (uint64_t)mcdc_monotonic_us() << 20;
    int64_t *pick = NULL, k = 0;
    int rc = MCDC_OK;
    if (r->ordinal) {
        int64_t nm = 0;
        int64_t *match = mcdc_malloc(((size_t)r->n_buckets + 1) * sizeof *match);
        if (match == NULL) return nomem(err);
        for (int64_t i = 0; i < r->n_buckets; i++)
            if (r->buckets[i].status == REC_MATCH) match[nm++] = i;
        rc = rec_sample(&pick, &k, nm, r->cfg.sample, seed, err);
        for (int64_t i = 0; rc == MCDC_OK && i < k; i++) r->buckets[match[pick[i]]].hashed = true;
        for (int64_t i = 0; i < r->n_buckets; i++)
            if (r->buckets[i].status == REC_MISMATCH) r->buckets[i].hashed = true;
        mcdc_free(match);
        mcdc_free(pick);
        if (rc) return rc;
        r->chosen = mcdc_malloc(((size_t)r->n_buckets + 1) * sizeof *r->chosen);
        if (r->chosen == NULL) return nomem(err);
        for (int64_t i = 0; i < r->n_buckets; i++)
            if (r->buckets[i].hashed) r->chosen[r->n_chosen++] = i;
        return MCDC_OK;
    }
    /* other keys: ranges of about bucket_rows rows, cut by SQL Server */
    int64_t rows = r->n_buckets ? r->buckets[0].src_rows : 0;
    int64_t n = (rows + r->cfg.bucket_rows - 1) / r->cfg.bucket_rows;
    if (n < 1) n = 1;
    if (n > REC_RANGES_MAX) n = REC_RANGES_MAX;
    /* the ranges are cut on the snapshot's keys (the unique index), which
     * --keys need not be: their bounds are read on those */
    rc = mcdc_changes_snapshot_keys(r->changes, &r->range_keys, err);
    if (rc == MCDC_OK && n > 1) rc = mcdc_changes_snapshot_ranges(r->changes, (int)n, &r->ranges, err);
    else if (rc == MCDC_OK && (r->ranges = json_pack("[[nn]]")) == NULL) rc = nomem(err);
    if (rc) return rc;
    rc = rec_sample(&r->chosen, &r->n_chosen, (int64_t)json_array_size(r->ranges), r->cfg.sample,
                    seed, err);
    if (rc == MCDC_OK && r->n_buckets) r->buckets[0].hashed = r->n_chosen > 0;
    return rc;
}
/* ---- the run ----------------------------------------------------------------------------- */
static int copy_str(mcdc_reconcile *r, const char **s, mcdc_error *err) {
    if (*s == NULL) return MCDC_OK;
    char **v = mcdc_realloc(r->strings, (size_t)(r->n_strings + 1) * sizeof *v);
    if (v == NULL) return nomem(err);
    r->strings = v;
    if ((v[r->n_strings] = mcdc_strdup(*s)) == NULL) return nomem(err);
    *s = v[r->n_strings++];
    return MCDC_OK;
}

static void log_to_host(void *user, mcdc_log_level level, const char *msg) {
    mcdc_reconcile *r = user;
    if (r->cfg.log_fn) r->cfg.log_fn(r->cfg.log_user, level, msg);
    else mcdc_log_stderr(level, msg);
}

static int reconcile_create(mcdc_reconcile **out, const mcdc_opts *opts,
                            const mcdc_reconcile_cfg *cfg, mcdc_error *err) {
    if (out == NULL || cfg == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_reconcile_create: a NULL argument");
    *out = NULL;
    /* the caller's version's fields, the defaults after them (a version-1
     * caller's struct ends before the repair flag) */
    mcdc_reconcile_cfg given;
    int rc = mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_RECONCILE, cfg, err);
    if (rc) return rc;
    cfg = &given;
    if (cfg->repair && cfg->facts_table == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "repair needs the stream's facts table (--facts-table): apply finds "
                              "repairs there");
    const char *missing = cfg->silver == NULL ? "silver" : cfg->bronze == NULL ? "bronze"
                          : cfg->control_table == NULL ? "control_table" : NULL;
    if (missing) return mcdc_error_set(err, MCDC_E_INVALID, "reconcile needs %s", missing);
    if (opts == NULL || mcdc_opt_connection_string(opts) == NULL || mcdc_opt_capture_instance(opts) == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "reconcile reads the source table: it needs the stream's source "
                              "options (connectionString and captureInstance)");
    if (cfg->bucket_rows < 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "bucket_rows must be at least 1, not %lld",
                              (long long)cfg->bucket_rows);
    if (cfg->sample > 1 || cfg->sample != cfg->sample)
        return mcdc_error_set(err, MCDC_E_INVALID, "sample must be between 0 and 1, not %g", cfg->sample);
    if (cfg->version >= 3 && (cfg->settle_seconds < 0 || cfg->settle_seconds > REC_SETTLE_SECONDS_MAX))
        return mcdc_error_set(err, MCDC_E_INVALID, "settle_seconds must be from 0 to %d, not %lld",
                              REC_SETTLE_SECONDS_MAX, (long long)cfg->settle_seconds);
    if (cfg->n_keys > SILVER_KEYS_MAX || cfg->n_keys < 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "%d key columns: at most %d", (int)cfg->n_keys,
                              SILVER_KEYS_MAX);
    mcdc_reconcile *r = mcdc_calloc(1, sizeof *r);
    if (r == NULL) return nomem(err);
    r->cfg = *cfg;
    if (r->cfg.log_fn == NULL) r->cfg.log_fn = mcdc_runtime_log_fn(cfg->runtime, &r->cfg.log_user);
    r->opts = opts;
    if (r->cfg.bucket_rows == 0) r->cfg.bucket_rows = REC_BUCKET_ROWS_DEFAULT;
    if (r->cfg.sample < 0) r->cfg.sample = REC_SAMPLE_DEFAULT;
    const char **strs[] = {&r->cfg.silver, &r->cfg.bronze, &r->cfg.control_table, &r->cfg.facts_table,
                           &r->cfg.report_table, &r->cfg.warehouse};
    for (size_t i = 0; rc == MCDC_OK && i < sizeof strs / sizeof strs[0]; i++) rc = copy_str(r, strs[i], err);
    r->cfg.keys = NULL;
    if (rc == MCDC_OK && cfg->keys && cfg->n_keys > 0) {
        r->keys = mcdc_calloc((size_t)cfg->n_keys, sizeof *r->keys);
        if (r->keys == NULL) rc = nomem(err);
        for (int32_t k = 0; rc == MCDC_OK && k < cfg->n_keys; k++) {
            if (cfg->keys[k] == NULL || *cfg->keys[k] == 0)
                rc = mcdc_error_set(err, MCDC_E_INVALID, "key column %d is empty", (int)k);
            else if ((r->keys[k] = mcdc_strdup(cfg->keys[k])) == NULL) rc = nomem(err);
            else r->n_keys = k + 1;
        }
    }
    mcdc_ctx_take_test_hooks(&r->ctx, opts);
    mcdc_ctx_take_storage(&r->ctx, opts, cfg->runtime);
    r->ctx.progress_fn = cfg->progress_fn;
    r->ctx.progress_user = cfg->progress_user;
    r->sink = (mcdc_log_sink){log_to_host, r, cfg->log_level};
    if (rc) {
        mcdc_reconcile_free(r);
        return rc;
    }
    *out = r;
    return MCDC_OK;
}

static void close_run(mcdc_reconcile *r) {
    mcdc_table_view_free(r->sview);
    mcdc_table_close(r->silver);
    mcdc_table_close(r->bronze);
    mcdc_table_close(r->control);
    mcdc_table_close(r->facts);
    mcdc_table_close(r->report);
    rec_flight_close(&r->flight);
    rec_pending_clear(&r->pending);
    mcdc_changes_close(r->changes);
    r->sview = NULL;
    r->silver = r->bronze = r->control = r->facts = r->report = NULL;
    r->changes = NULL;
    mcdc_free(r->col_names);
    r->col_names = NULL;
    mcdc_free(r->buckets);
    r->buckets = NULL;
    r->n_buckets = 0;
    mcdc_free(r->chosen);
    r->chosen = NULL;
    r->n_chosen = 0;
    json_decref(r->ranges);
    r->ranges = NULL;
    json_decref(r->range_keys);
    r->range_keys = NULL;
}

static int open_tables(mcdc_reconcile *r, mcdc_error *err) {
    const char *wh = r->cfg.warehouse;
    /* one table in two roles, or one inside another */
    const mcdc_role roles[5] = {{"--silver", r->cfg.silver, true},
                                {"--bronze", r->cfg.bronze, true},
                                {"--control-table", r->cfg.control_table, true},
                                {"--facts-table", r->cfg.facts_table, true},
                                {"--report-table", r->cfg.report_table, true}};
    int rc = mcdc_roles_check(roles, 5, wh, NULL, err);
    const mcdc_storage_env *env = r->ctx.storage_env;
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&r->silver, env, r->cfg.silver, wh, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&r->bronze, env, r->cfg.bronze, wh, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&r->control, env, r->cfg.control_table, wh, err);
    if (rc == MCDC_OK && r->cfg.facts_table)
        rc = mcdc_table_open_env(&r->facts, env, r->cfg.facts_table, wh, err);
    if (rc == MCDC_OK && r->cfg.report_table)
        rc = mcdc_table_open_env(&r->report, env, r->cfg.report_table, wh, err);
    const mcdc_frame_role tables[5] = {{r->silver, MCDC_KIND_SILVER, "silver"},
                                      {r->bronze, MCDC_KIND_BRONZE, "bronze"},
                                      {r->control, MCDC_KIND_CONTROL, "control table"},
                                      {r->facts, MCDC_KIND_FACTS, "facts table"},
                                      {r->report, MCDC_KIND_RECONCILE, "report table"}};
    if (rc == MCDC_OK) rc = mcdc_frame_check_roles(tables, 5, err);
    return rc;
}

/* Is name one of list's ("a, b")? */
static bool in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strstr(p, ", ");
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0) return true;
        p = e ? e + 2 : NULL;
    }
    return false;
}

/* The source's columns and key, and what kind of key it is. */
static int resolve_source(mcdc_reconcile *r, mcdc_error *err) {
    /* the configured instance, else (gone) its table through bronze's
     * names; the follow handle of the changes in flight resolves alike */
    silver_instances_free(&r->flight.names);
    int rc = silver_source_open_bronze(&r->changes, r->opts, r->bronze, r->cfg.bronze, "reconcile",
                                       &r->flight.names, err);
    if (rc == MCDC_E_MISMATCH) return rc;
    if (rc) return mcdc_error_wrap(err, "opening the source"), rc;
    if (r->n_keys == 0) {
        int n = 0;
        const char *const *k = mcdc_changes_index_keys(r->changes, &n);
        if (n == 0)
            return mcdc_error_set(err, MCDC_E_INVALID, "%s has no unique index to key rows by: pass --keys",
                                  mcdc_changes_capture_instance(r->changes));
        if (n > SILVER_KEYS_MAX) return mcdc_error_set(err, MCDC_E_LIMIT, "an index of %d columns", n);
        r->keys = mcdc_calloc((size_t)n, sizeof *r->keys);
        if (r->keys == NULL) return nomem(err);
        for (int i = 0; i < n; i++) {
            if ((r->keys[i] = mcdc_strdup(k[i])) == NULL) return nomem(err);
            r->n_keys = i + 1;
        }
    }
    r->out_schema = mcdc_changes_schema(r->changes);
    const mcdc_schema *s = r->out_schema;
    r->first_captured = 0;
    while (r->first_captured < s->n_fields && mcdc_is_reserved_column(s->fields[r->first_captured].name))
        r->first_captured++;
    /* the captured columns (computed ones are not read: CDC holds NULL for them) */
    r->col_names = mcdc_calloc((size_t)(s->n_fields - r->first_captured) + 1, sizeof *r->col_names);
    if (r->col_names == NULL) return nomem(err);
    r->n_cols = 0;
    const char *computed = mcdc_changes_computed(r->changes);
    for (int32_t k = r->first_captured; k < s->n_fields; k++)
        if (!in_list(computed, s->fields[k].name)) r->col_names[r->n_cols++] = s->fields[k].name;
    for (int32_t k = 0; k < r->n_keys; k++) {
        r->key_in_cols[k] = -1;
        for (int32_t c = 0; c < r->n_cols; c++)
            if (strcmp(r->col_names[c], r->keys[k]) == 0) r->key_in_cols[k] = c;
        if (r->key_in_cols[k] < 0)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "key %s is not a captured column of %s: give --keys the "
                                  "columns of a unique index of the table (or leave it out)",
                                  r->keys[k], mcdc_changes_capture_instance(r->changes));
    }
    mcdc_type_id t = s->fields[r->first_captured + r->key_in_cols[0]].type;
    r->date_key = t == MCDC_TYPE_DATE32;
    r->ordinal = r->n_keys == 1 && (r->date_key || t == MCDC_TYPE_INT8 || t == MCDC_TYPE_INT16 ||
                                    t == MCDC_TYPE_INT32 || t == MCDC_TYPE_INT64);
    return MCDC_OK;
}

/* E: silver's applied_lsn, read before silver's version. */
static int read_position(mcdc_reconcile *r, mcdc_error *err) {
    mcdc_batch *b = NULL;
    int64_t v;
    int rc = mcdc_table_read_all(r->control, &b, &v, err);
    if (rc) return mcdc_error_wrap(err, "reading control table %s", r->cfg.control_table), rc;
    int64_t row = mcdc_control_find(b, r->cfg.silver);
    if (row >= 0) {
        mcdc_cell c = mcdc_row_get(b, row, MCDC_C_APPLIED_LSN);
        if (c.kind == MCDC_CELL_TEXT && silver_lsn_parse(r->e_lsn, c.s, (size_t)c.i)) {
            r->has_e = true;
            silver_lsn_format(r->silver_lsn, r->e_lsn);
        }
    }
    mcdc_batch_free(b);
    rc = mcdc_table_view_open(&r->sview, r->silver, -1, err);
    if (rc == MCDC_OK && r->sview == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "silver %s does not exist: run mssql-cdc apply first (nothing to compare)",
                            r->cfg.silver);
    /* Without silver's position nothing tells a change in flight from a
     * difference (every bronze change would be newer than it): the control
     * row is keyed by the name apply was given, so a name spelled otherwise
     * (a relative path for an absolute one) finds none. */
    if (rc == MCDC_OK && !r->has_e)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "silver %s has no applied_lsn in control table %s: name it exactly as "
                            "mssql-cdc apply was given its --target (the control row is keyed by "
                            "that name), or run apply to completion first",
                            r->cfg.silver, r->cfg.control_table);
    /* A history holds every version of a key: its rows are not the
     * source's, and a repair would only add versions to it. */
    const char *scd = rc == MCDC_OK ? mcdc_table_view_config(r->sview, SILVER_PROP_SCD_TYPE) : NULL;
    if (scd && strcmp(scd, "1") != 0)
        rc = mcdc_error_set(err, MCDC_E_MISMATCH,
                            "silver %s is a history (table property %s = '%.32s'): reconcile "
                            "compares a current-state table (apply --scd-type 1) with the source; "
                            "reconcile one of those built from the same bronze",
                            r->cfg.silver, SILVER_PROP_SCD_TYPE, scd);
    if (rc == MCDC_OK) r->version = mcdc_table_view_version(r->sview);
    return rc;
}

/* The result's counts and list (the keys that differ and are not in
 * flight), and whether anything was verified. */
static int result_lists(mcdc_reconcile *r, mcdc_error *err) {
    r->out_diffs = mcdc_calloc((size_t)r->n_diffs + 1, sizeof *r->out_diffs);
    if (r->out_diffs == NULL) return nomem(err);
    bool v3 = r->cfg.version >= 3;
    bool proven = false; /* a failure other than IN_FLIGHT */
    for (int64_t i = 0; i < r->n_diffs; i++) {
        const rec_diff *d = &r->diffs[i];
        mcdc_reconcile_failure f = d->failure;
        /* an older caller's failures[] has no room for DUPLICATE_TARGET */
        if (f == MCDC_RECONCILE_DUPLICATE_TARGET && !v3) f = MCDC_RECONCILE_RECORD_DIFF;
        if (f == MCDC_RECONCILE_DUPLICATE_TARGET) r->res.duplicate_target++;
        else r->res.failures[f]++;
        proven = proven || f != MCDC_RECONCILE_IN_FLIGHT;
        if (d->chunk || f == MCDC_RECONCILE_IN_FLIGHT) continue;
        r->out_diffs[r->n_out_diffs++] = (mcdc_reconcile_diff){f, d->key_json};
    }
    int64_t hashed = 0;
    for (int64_t i = 0; i < r->n_buckets; i++) {
        const rec_bucket *b = &r->buckets[i];
        r->res.match += b->status == REC_MATCH;
        r->res.in_flight += b->status == REC_IN_FLIGHT;
        r->res.mismatch += b->status == REC_MISMATCH;
        hashed += b->hashed;
    }
    r->res.buckets = r->n_buckets;
    r->res.hashed = r->ordinal ? hashed : r->n_chosen;
    r->res.diffs = r->out_diffs;
    r->res.n_diffs = r->n_out_diffs;
    r->res.report_rows = r->n_buckets + r->n_diffs;
    /* Nothing verified: there were buckets, and each one, and each key
     * compared, was in flight. Both sides empty is verified (equal). */
    r->res.verified = r->n_buckets == 0 || r->res.match > 0 || r->res.mismatch > 0 ||
                      r->keys_equal > 0 || proven;
    return MCDC_OK;
}

/* ---- settling (settle_seconds) ------------------------------------------------------------
 * What is IN_FLIGHT, checked again until it is not: each re-check reads as a
 * run does (E, silver pinned at its latest version, the repairs pending
 * apply, M', then the source's rows), but only the buckets that are
 * IN_FLIGHT or hold a key that is (other keys: the ranges holding one, and
 * the whole-table count when it is), compared row by row as Tier 2
 * compares. A re-checked bucket's counts are those reads' (rows with a
 * key, and their key sum), its status decided as Tier 1 decides it, by the
 * keys changed after min(M', E); its keys found anew. A bucket settles
 * when it is MATCH or MISMATCH and no key of it is IN_FLIGHT. */
static bool unsettled(const mcdc_reconcile *r) {
    for (int64_t i = 0; i < r->n_buckets; i++)
        if (r->buckets[i].status == REC_IN_FLIGHT) return true;
    for (int64_t i = 0; i < r->n_diffs; i++)
        if (!r->diffs[i].chunk && r->diffs[i].failure == MCDC_RECONCILE_IN_FLIGHT) return true;
    return false;
}

/* The reads of the check that ends (r->round): the report's rows of it name
 * them. */
static int round_push(mcdc_reconcile *r, const char *bucket_lsn, mcdc_error *err) {
    MCDC_ASSERT(r->n_rounds == r->round);
    int rc = rec_grow(&r->rounds, &r->cap_rounds, r->n_rounds + 1, sizeof *r->rounds, err);
    if (rc) return rc;
    rec_round *x = &r->rounds[r->n_rounds++];
    memset(x, 0, sizeof *x);
    x->version = r->version;
    x->has_e = r->has_e;
    snprintf(x->silver_lsn, sizeof x->silver_lsn, "%s", r->silver_lsn);
    snprintf(x->bucket_lsn, sizeof x->bucket_lsn, "%s", bucket_lsn);
    snprintf(x->read_lsn, sizeof x->read_lsn, "%s", r->read_lsn);
    return MCDC_OK;
}

static int recheck(mcdc_reconcile *r, rec_keyset *moved, mcdc_error *err) {
    int64_t n_units = r->ordinal ? r->n_buckets : (int64_t)json_array_size(r->ranges);
    bool *again = mcdc_calloc((size_t)n_units + 1, sizeof *again);
    int64_t *list = mcdc_calloc((size_t)n_units + 1, sizeof *list);
    int rc = again && list ? MCDC_OK : nomem(err);
    bool whole = !r->ordinal && r->n_buckets > 0 && r->buckets[0].status == REC_IN_FLIGHT;
    for (int64_t i = 0; rc == MCDC_OK && r->ordinal && i < r->n_buckets; i++)
        again[i] = r->buckets[i].status == REC_IN_FLIGHT;
    for (int64_t i = 0; rc == MCDC_OK && i < r->n_diffs; i++) {
        const rec_diff *d = &r->diffs[i];
        if (!d->chunk && d->failure == MCDC_RECONCILE_IN_FLIGHT && d->bucket >= 0 && d->bucket < n_units)
            again[d->bucket] = true;
    }
    /* the keys of what is checked again are found anew */
    int64_t kept = 0, n = 0;
    for (int64_t i = 0; rc == MCDC_OK && i < r->n_diffs; i++) {
        rec_diff *d = &r->diffs[i];
        if (d->chunk || !again[d->bucket]) {
            r->diffs[kept++] = *d;
            continue;
        }
        mcdc_free(d->key_json);
        mcdc_free(d->detail);
    }
    if (rc == MCDC_OK) r->n_diffs = kept;
    for (int64_t i = 0; rc == MCDC_OK && i < n_units; i++)
        if (again[i]) list[n++] = i;
    r->round = (int32_t)r->n_rounds;
    /* a run's reads, in its order: E, silver's latest version, the repairs
     * its last pass had not read, then the source */
    mcdc_table_view_free(r->sview);
    r->sview = NULL;
    if (rc == MCDC_OK) rc = read_position(r, err);
    if (rc == MCDC_OK && r->facts)
        rc = rec_pending_load(&r->pending, r->silver, r->version, r->facts, r->bronze, r->cfg.bronze,
                              (const char *const *)r->keys, r->n_keys, r->ordinal, err);
    char count_lsn[24] = "";
    if (rc == MCDC_OK && whole) { /* the whole table counted again, M' before */
        mcdc_lsn m;
        int64_t rows = 0;
        fine_acc sil = {.r = r};
        rc = mcdc_changes_max_lsn(r->changes, &m, err);
        if (rc == MCDC_OK) mcdc_lsn_format(&m, count_lsn);
        if (rc == MCDC_OK) rc = mcdc_changes_row_count(r->changes, &rows, err);
        if (rc == MCDC_OK) rc = silver_counts(r, &sil, err);
        if (rc == MCDC_OK) {
            r->buckets[0].src_rows = rows;
            r->buckets[0].sil_rows = sil.rows;
        }
        mcdc_free(sil.v);
        rec_keyset_clear(&sil.ids);
    }
    if (rc == MCDC_OK) rc = rec_compare_buckets(r, list, n, r->ordinal, true, moved, err);
    if (rc == MCDC_OK && r->ordinal) {
        for (int64_t i = 0; i < n; i++) r->buckets[list[i]].moved = false;
        mark_moved(r, moved);
        for (int64_t i = 0; i < n; i++) {
            rec_bucket *b = &r->buckets[list[i]];
            b->status = rec_bucket_status(b);
            b->hashed = true;
            b->round = r->round;
        }
    } else if (rc == MCDC_OK && whole) {
        rec_bucket *b = &r->buckets[0];
        b->moved = moved->n > 0 || r->pending.keys.n > 0;
        b->status = rec_bucket_status(b);
        b->round = r->round;
    }
    if (rc == MCDC_OK) rc = round_push(r, whole ? count_lsn : r->read_lsn, err);
    if (rc == MCDC_OK) r->res.rechecks++;
    mcdc_free(again);
    mcdc_free(list);
    return rc;
}

/* While something is IN_FLIGHT: re-checks, pausing between them (a quarter
 * of a second, doubling up to two), until nothing is or settle_seconds have
 * passed since the first check ended. */
static int settle(mcdc_reconcile *r, rec_keyset *moved, mcdc_error *err) {
    if (r->cfg.settle_seconds <= 0 || !unsettled(r)) return MCDC_OK;
    int64_t deadline = mcdc_monotonic_us() + r->cfg.settle_seconds * 1000000;
    int64_t pause_ms = REC_SETTLE_PAUSE_FIRST_MS;
    int rc = MCDC_OK;
    /* the buckets re-checked, and their rows, until what is in flight settles */
    mcdc_progress_phase(r->ctx.progress, "settling", "buckets", -1, -1, false);
    while (rc == MCDC_OK && unsettled(r)) {
        int64_t left_ms = (deadline - mcdc_monotonic_us()) / 1000;
        if (left_ms <= 0) break;
        mcdc_sleep_ms(pause_ms < left_ms ? pause_ms : left_ms);
        pause_ms = pause_ms * 2 < REC_SETTLE_PAUSE_MAX_MS ? pause_ms * 2 : REC_SETTLE_PAUSE_MAX_MS;
        rc = recheck(r, moved, err);
        if (rc == MCDC_OK)
            mcdc_log(MCDC_LOG_INFO, "re-check %lld at silver version %lld: %s",
                     (long long)r->res.rechecks, (long long)r->version,
                     unsettled(r) ? "still in flight" : "settled");
    }
    if (rc == MCDC_OK && unsettled(r))
        mcdc_log(MCDC_LOG_WARN,
                 "reconcile of %s: still in flight after %lld s and %lld re-checks: run it again "
                 "once the stream and apply have caught up",
                 r->cfg.silver, (long long)r->cfg.settle_seconds, (long long)r->res.rechecks);
    return rc;
}

/* ---- chunk checks ------------------------------------------------------------------------
 * Bronze's newest chunked snapshot against its 'snapshot_chunk' facts rows
 * (their bounds in the plans table unless the rows have them), without
 * reading SQL Server. The facts first, then bronze: a wave's rows commit
 * before its facts rows, so a wave still being written is no failure. */
typedef struct held_acc {
    rec_held *v;
    int64_t n, cap;
    const char *s;
} held_acc;

static int held_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    held_acc *h = ctx;
    int rc = MCDC_OK;
    int op = rec_col_index(b->schema, "_operation"), sn = rec_col_index(b->schema, "_snapshot");
    int ch = rec_col_index(b->schema, "_chunk"), ls = rec_col_index(b->schema, "_start_lsn");
    for (int64_t i = 0; i < b->rows && rc == MCDC_OK && op >= 0 && sn >= 0 && ch >= 0 && ls >= 0; i++) {
        mcdc_cell o = mcdc_row_get(b, i, op), s = mcdc_row_get(b, i, sn), c = mcdc_row_get(b, i, ch);
        mcdc_cell l = mcdc_row_get(b, i, ls);
        if (o.kind != MCDC_CELL_INT || o.i != 0 || c.kind != MCDC_CELL_INT || s.kind != MCDC_CELL_TEXT ||
            (size_t)s.i != strlen(h->s) || memcmp(s.s, h->s, (size_t)s.i) != 0)
            continue;
        int64_t k = 0;
        while (k < h->n && h->v[k].chunk != c.i) k++;
        if (k == h->n) {
            if ((rc = rec_grow(&h->v, &h->cap, h->n + 1, sizeof *h->v, err)) != MCDC_OK) break;
            h->v[h->n++] = (rec_held){c.i, 0, ""};
        }
        rec_held *x = &h->v[k];
        x->rows++;
        if (l.kind == MCDC_CELL_TEXT && (size_t)l.i < sizeof x->low &&
            (x->low[0] == 0 || strncmp(l.s, x->low, (size_t)l.i) < 0)) {
            memcpy(x->low, l.s, (size_t)l.i);
            x->low[l.i] = 0;
        }
    }
    mcdc_batch_free(b);
    return rc;
}

static char *json_text(const json_t *v) {
    if (v == NULL || json_is_null(v)) return NULL;
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    char *c = t ? mcdc_strdup(t) : NULL;
    free(t);
    return c;
}

static int chunk_checks(mcdc_reconcile *r, mcdc_error *err) {
    mcdc_snapfacts sf = {0};
    int rc = mcdc_snapfacts_load(&sf, r->facts, r->cfg.bronze, r->cfg.warehouse, NULL, err);
    if (rc) return mcdc_error_wrap(err, "reading facts table %s", r->cfg.facts_table), rc;
    const mcdc_snap_row *open = mcdc_snapfacts_newest_chunked(&sf);
    if (open == NULL) {
        mcdc_snapfacts_free(&sf);
        return MCDC_OK;
    }
    const char *s = open->max_lsn;
    bool complete = false;
    for (int i = 0; i < sf.n; i++)
        if ((sf.rows[i].event == MCDC_SNAP_BOOTSTRAP || sf.rows[i].event == MCDC_SNAP_RESNAPSHOT) &&
            sf.rows[i].max_lsn[0] && strcmp(sf.rows[i].max_lsn, s) >= 0)
            complete = true;
    char *pname = NULL;
    mcdc_table *plans = NULL;
    mcdc_plan_rows pr = {0};
    rc = mcdc_plans_name(&pname, r->cfg.bronze, err);
    if (rc == MCDC_OK)
        rc = mcdc_table_open_env(&plans, r->ctx.storage_env, pname, r->cfg.warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_plans_load(&pr, plans, s, err);
    rec_chunk *found = NULL;
    int64_t nf = 0;
    found = mcdc_calloc((size_t)sf.n + 1, sizeof *found);
    if (rc == MCDC_OK && found == NULL) rc = nomem(err);
    for (int i = 0; rc == MCDC_OK && i < sf.n; i++) {
        const mcdc_snap_row *x = &sf.rows[i];
        const char *of = json_string_value(json_object_get(x->detail, "snapshot"));
        if (x->event != MCDC_SNAP_CHUNK || of == NULL || strcmp(of, s) != 0) continue;
        const json_t *d = mcdc_plans_whole(&pr, pname, "snapshot_chunk", x->detail, err);
        if (d == NULL) {
            rc = err && err->code ? err->code : MCDC_E_CORRUPT;
            break;
        }
        rec_chunk *c = &found[nf++];
        json_t *ci = json_object_get(d, "chunk");
        c->chunk = json_is_integer(ci) ? (int64_t)json_integer_value(ci) : -1;
        c->lo = json_text(json_object_get(d, "lo"));
        c->hi = json_text(json_object_get(d, "hi"));
        c->last = json_is_true(json_object_get(d, "last"));
        c->rows = x->has_rows ? x->rows : 0;
        snprintf(c->lsn, sizeof c->lsn, "%s", x->min_lsn);
    }
    /* bronze after the facts */
    held_acc h = {.s = s};
    mcdc_schema *bs = NULL;
    if (rc == MCDC_OK) rc = mcdc_table_schema(r->bronze, &bs, err);
    if (rc == MCDC_OK && bs && mcdc_schema_find(bs, "_chunk") >= 0) {
        const char *cols[] = {"_operation", "_snapshot", "_chunk", "_start_lsn"};
        mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
        sc.columns = cols;
        sc.n_columns = 4;
        sc.prune_column = "_start_lsn"; /* a chunk row's stamp is at or past S, or it fails */
        int64_t v;
        rc = mcdc_table_scan_run(r->bronze, &sc, held_rows, &h, &v, NULL, err);
    }
    mcdc_schema_unref(bs);
    rec_chunk_failure *fv = NULL;
    int64_t nfv = 0;
    if (rc == MCDC_OK) rc = rec_tiling_failures(&fv, &nfv, s, complete, found, nf, h.v, h.n, err);
    for (int64_t i = 0; rc == MCDC_OK && i < nfv; i++) {
        rec_diff d = {.failure = fv[i].type, .chunk = true, .bucket = -1, .detail = fv[i].detail};
        fv[i].detail = NULL;
        d.lo = fv[i].lo ? mcdc_strdup(fv[i].lo) : NULL;
        d.hi = fv[i].hi ? mcdc_strdup(fv[i].hi) : NULL;
        rc = rec_add_diff(r, &d, err);
        if (rc) {
            mcdc_free(d.detail);
            mcdc_free(d.lo);
            mcdc_free(d.hi);
        }
    }
    rec_chunk_failures_free(fv, nfv);
    for (int64_t i = 0; i < nf; i++) {
        mcdc_free(found[i].lo);
        mcdc_free(found[i].hi);
    }
    mcdc_free(found);
    mcdc_free(h.v);
    mcdc_plan_rows_free(&pr);
    mcdc_table_close(plans);
    mcdc_free(pname);
    mcdc_snapfacts_free(&sf);
    if (rc) mcdc_error_wrap(err, "checking the chunks of snapshot %s of %s", s, r->cfg.bronze);
    return rc;
}


int mcdc_reconcile_run(mcdc_reconcile *r, mcdc_reconcile_result *result, mcdc_error *err) {
    if (r == NULL || result == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_reconcile_run: a NULL argument");
    int rc = mcdc_result_check(MCDC_RESULT_RECONCILE, result, "mcdc_reconcile_run", err);
    if (rc) return rc;
    mcdc_job_scope host = mcdc_job_enter(mcdc_runtime_acct_or_bound(r->cfg.runtime), &r->sink);
    mcdc_runtime_job_started(r->ctx.metrics);
    diffs_clear(r);
    rec_twice_clear(r);
    mcdc_free(r->out_diffs);
    r->out_diffs = NULL;
    r->n_out_diffs = 0;
    r->n_rounds = 0;
    r->round = 0;
    r->keys_equal = 0;
    memset(&r->res, 0, sizeof r->res);
    r->res.size = sizeof r->res;
    r->res.repair.size = sizeof r->res.repair;
    r->res.silver_version = -1;
    mcdc_uuid4(r->res.run_id);
    r->run_at_us = mcdc_now_utc_us();
    r->has_e = false;
    r->silver_lsn[0] = r->source_lsn[0] = r->read_lsn[0] = 0;
    rec_keyset moved = {0};
    mcdc_batch *report = NULL;
    rc = mcdc_ctx_progress_create(&r->ctx.progress, &r->ctx, "reconcile", err);
    if (rc == MCDC_OK) rc = open_tables(r, err);
    if (rc == MCDC_OK) rc = resolve_source(r, err);
    if (rc == MCDC_OK && r->cfg.repair && r->report) {
        /* the repairs runs killed after their report left unfinished, first:
         * their keys are pending apply when this run compares */
        bool done = false;
        rc = rec_repair_unfinished(&r->ctx, r->opts, &r->cfg, r->res.run_id, &done, &r->res.repair,
                                   err);
        r->res.repaired = done;
    }
    if (rc == MCDC_OK) rc = read_position(r, err);
    /* after silver's version: the repairs its last pass had not read */
    if (rc == MCDC_OK && r->facts)
        rc = rec_pending_load(&r->pending, r->silver, r->version, r->facts, r->bronze, r->cfg.bronze,
                              (const char *const *)r->keys, r->n_keys, r->ordinal, err);
    mcdc_lsn m;
    if (rc == MCDC_OK) rc = mcdc_changes_max_lsn(r->changes, &m, err); /* M */
    if (rc == MCDC_OK) {
        mcdc_lsn_format(&m, r->source_lsn);
        rc = tier1(r, &moved, err);
    }
    if (rc == MCDC_OK) rc = choose(r, err);
    if (rc == MCDC_OK) rc = rec_tier2(r, &moved, err);
    if (rc == MCDC_OK) rc = round_push(r, r->source_lsn, err);
    if (rc == MCDC_OK && r->facts) rc = chunk_checks(r, err);
    if (rc == MCDC_OK) rc = settle(r, &moved, err);
    if (rc == MCDC_OK) rc = result_lists(r, err);
    if (rc == MCDC_OK && r->report) {
        rc = rec_build_report(r, &report, err);
        if (rc == MCDC_OK && mcdc_ctx_crash(&r->ctx, "before_report", 0)) rc = MCDC_E_CANCELLED;
        if (rc == MCDC_OK) rc = rec_write_report(r, report, err);
        if (rc == MCDC_OK && mcdc_ctx_crash(&r->ctx, "after_report", 0)) rc = MCDC_E_CANCELLED;
    }
    if (rc == MCDC_OK && r->cfg.repair) {
        /* after the report: a kill from here on leaves it for the rerun */
        bool own = false;
        mcdc_repair_result rp;
        rc = rec_repair_diffs(&r->ctx, r->opts, &r->cfg, r->res.run_id, r->out_diffs, r->n_out_diffs,
                              &own, &rp, err);
        if (own) { /* the run's own repair, else the one it completed first */
            r->res.repaired = true;
            r->res.repair = rp;
        }
    }
    if (rc == MCDC_OK) {
        /* the run's first check: its Tier 1 (re-checks' rows name their own) */
        const rec_round *first = &r->rounds[0];
        r->res.silver_version = first->version;
        r->res.has_silver_lsn = first->has_e;
        snprintf(r->res.silver_lsn, sizeof r->res.silver_lsn, "%s", first->silver_lsn);
        snprintf(r->res.source_lsn, sizeof r->res.source_lsn, "%s", first->bucket_lsn);
        mcdc_result_out(MCDC_RESULT_RECONCILE, result, &r->res);
    }
    if (rc && rc != MCDC_E_CANCELLED) mcdc_error_wrap(err, "reconcile of %s", r->cfg.silver);
    mcdc_batch_free(report);
    rec_keyset_clear(&moved);
    close_run(r);
    mcdc_progress_end(r->ctx.progress);
    r->ctx.progress = NULL;
    mcdc_runtime_job_ended(r->ctx.metrics, rc, err);
    mcdc_job_leave(host);
    return rc;
}

const char *const *mcdc_reconcile_keys(const mcdc_reconcile *r, int32_t *n) {
    *n = r ? r->n_keys : 0;
    return r ? (const char *const *)r->keys : NULL;
}

bool mcdc_reconcile_differs(const mcdc_reconcile_result *given) {
    mcdc_reconcile_result full;
    if (given == NULL ||
        mcdc_result_in(MCDC_RESULT_RECONCILE, &full, given, "mcdc_reconcile_differs", NULL))
        return false;
    const mcdc_reconcile_result *r = &full;
    if (r->mismatch > 0 || r->duplicate_target > 0) return true;
    for (int f = 0; f < MCDC_RECONCILE_FAILURE_COUNT; f++)
        if (f != MCDC_RECONCILE_IN_FLIGHT && r->failures[f] > 0) return true;
    return false;
}

/* Created with its runtime's accounting bound (mcdc_runtime.h). */
int mcdc_reconcile_create(mcdc_reconcile **out, const mcdc_opts *opts,
                          const mcdc_reconcile_cfg *cfg, mcdc_error *err) {
    mcdc_job_scope host =
        mcdc_runtime_enter_cfg(MCDC_CFG_RECONCILE, cfg, offsetof(mcdc_reconcile_cfg, runtime));
    int rc = reconcile_create(out, opts, cfg, err);
    if (rc == MCDC_OK)
        (*out)->ctx.metrics = mcdc_runtime_job_join((*out)->cfg.runtime, "reconcile",
                                                    (*out)->cfg.silver, *out);
    mcdc_job_leave(host);
    return rc;
}

void mcdc_reconcile_request_stop(mcdc_reconcile *r) {
    if (r) atomic_store(&r->ctx.stop, 1);
}

void mcdc_reconcile_free(mcdc_reconcile *r) {
    if (r == NULL) return;
    mcdc_runtime_job_leave(r->ctx.metrics);
    close_run(r);
    diffs_clear(r);
    rec_twice_clear(r);
    mcdc_free(r->rounds);
    mcdc_free(r->out_diffs);
    for (int i = 0; i < r->n_strings; i++) mcdc_free(r->strings[i]);
    mcdc_free(r->strings);
    for (int32_t k = 0; k < r->n_keys; k++) mcdc_free(r->keys[k]);
    mcdc_free(r->keys);
    mcdc_free(r);
}

int mcdc_reconcile_result_json(char *out, size_t cap, const mcdc_reconcile_result *given,
                               mcdc_error *err) {
    if (out == NULL || given == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_reconcile_result_json: a NULL argument");
    mcdc_reconcile_result full;
    int rc = mcdc_result_in(MCDC_RESULT_RECONCILE, &full, given, "mcdc_reconcile_result_json", err);
    if (rc) return rc;
    const mcdc_reconcile_result *r = &full;
    char lsn[32] = "null", fail[640] = "";
    if (r->has_silver_lsn) snprintf(lsn, sizeof lsn, "\"%.22s\"", r->silver_lsn);
    size_t n = 0;
    for (int f = 0; f < MCDC_RECONCILE_FAILURE_TYPES; f++) {
        int64_t c = f < MCDC_RECONCILE_FAILURE_COUNT ? r->failures[f] : r->duplicate_target;
        if (c > 0)
            n += (size_t)snprintf(fail + n, sizeof fail - n, "%s\"%s\":%lld", n ? "," : "", FAILURES[f],
                                  (long long)c);
    }
    int w = snprintf(out, cap,
                     "{\"run_id\":\"%s\",\"silver_version\":%lld,\"silver_lsn\":%s,\"source_lsn\":"
                     "\"%.22s\",\"buckets\":%lld,\"match\":%lld,\"in_flight\":%lld,\"mismatch\":%lld,"
                     "\"hashed\":%lld,\"failures\":{%s},\"source_rows\":%lld,\"silver_rows\":%lld,"
                     "\"source_rows_hashed\":%lld,\"silver_rows_hashed\":%lld,\"report_rows\":%lld,"
                     "\"differs\":%s,\"verified\":%s,\"rechecks\":%lld}",
                     r->run_id, (long long)r->silver_version, lsn, r->source_lsn, (long long)r->buckets,
                     (long long)r->match, (long long)r->in_flight, (long long)r->mismatch,
                     (long long)r->hashed, fail, (long long)r->source_rows, (long long)r->silver_rows,
                     (long long)r->source_rows_hashed, (long long)r->silver_rows_hashed,
                     (long long)r->report_rows, mcdc_reconcile_differs(r) ? "true" : "false",
                     r->verified ? "true" : "false", (long long)r->rechecks);
    if (w < 0 || (size_t)w >= cap)
        return mcdc_error_set(err, MCDC_E_LIMIT, "%zu bytes are too few for the ReconcileResult", cap);
    if (r->repaired) {
        /* ...,"rechecks":n} -> ...,"rechecks":n,"repair":{...}} */
        char rj[MCDC_REPAIR_RESULT_JSON_SIZE];
        mcdc_repair_result rp = r->repair; /* inside the result: its layout's size */
        rp.size = sizeof rp;
        rc = mcdc_repair_result_json(rj, sizeof rj, &rp, err);
        if (rc) return rc;
        int k = snprintf(out + w - 1, cap - (size_t)w + 1, ",\"repair\":%s}", rj);
        if (k < 0 || (size_t)k >= cap - (size_t)w + 1)
            return mcdc_error_set(err, MCDC_E_LIMIT, "%zu bytes are too few for the ReconcileResult", cap);
    }
    return MCDC_OK;
}
