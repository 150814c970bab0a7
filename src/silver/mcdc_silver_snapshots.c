/*
 * mcdc_silver_snapshots.c - which snapshot a pass applies and how
 * (mcdc_silver_apply.h, docs/silver.md "Snapshots", "Chunked snapshots"):
 *   facts     the completed snapshots, the chunked one still open and the
 *             chunks its 'snapshot_chunk' rows announce (their bounds from
 *             the plans table, read after the facts), the repairs recorded
 *             since the last pass
 *   decision  rebuild from the newest complete snapshot when it is newer
 *             than the one silver was rebuilt from; else apply the waves of
 *             an open chunked snapshot announced since the last pass
 *   waves     a history's stamps (the commit time each new chunk's stamp
 *             maps to), and the chunk ranges whose keys a chunk lacks are
 *             deleted (a single key of an integer, date or timestamp type)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_plans.h"
#include "mcdc_silver_apply.h"

/* ---- the facts --------------------------------------------------------------------------- */

static void chunks_free(achunk *v, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        json_decref(v[i].lo);
        json_decref(v[i].hi);
    }
    mcdc_free(v);
}

/* The open chunked snapshot's announced chunks, their bounds from the plans
 * table (read after the facts: its rows are written first). */
static int read_chunks(mcdc_apply *a, const mcdc_snapfacts *sf, const mcdc_snap_row *opened,
                       achunk **out, int32_t *n_out, json_t **cut, mcdc_error *err) {
    *out = NULL;
    *n_out = 0;
    *cut = NULL;
    const char *s = opened->max_lsn;
    mcdc_plan_rows pr = {0};
    int rc = mcdc_plans_load(&pr, a->plans, s, err);
    const json_t *info = rc ? NULL : mcdc_plans_whole(&pr, a->plans_name, "snapshot_open", opened->detail, err);
    if (rc == MCDC_OK && info == NULL) rc = err && err->code ? err->code : MCDC_E_CORRUPT;
    if (rc == MCDC_OK) *cut = json_incref(json_object_get(info, "keys"));
    achunk *v = NULL;
    int32_t n = 0;
    for (int i = 0; rc == MCDC_OK && i < sf->n; i++) {
        const mcdc_snap_row *r = &sf->rows[i];
        const char *of = json_string_value(json_object_get(r->detail, "snapshot"));
        if (r->event != MCDC_SNAP_CHUNK || of == NULL || strcmp(of, s) != 0) continue;
        const json_t *d = mcdc_plans_whole(&pr, a->plans_name, "snapshot_chunk", r->detail, err);
        if (d == NULL) {
            rc = err && err->code ? err->code : MCDC_E_CORRUPT;
            break;
        }
        achunk *x = mcdc_realloc(v, (size_t)(n + 1) * sizeof *x);
        if (x == NULL) {
            rc = apply_nomem(err);
            break;
        }
        v = x;
        achunk *c = &v[n++];
        memset(c, 0, sizeof *c);
        json_t *ci = json_object_get(d, "chunk"), *wi = json_object_get(d, "wave");
        c->chunk = json_is_integer(ci) ? (int64_t)json_integer_value(ci) : -1;
        c->wave = json_is_integer(wi) ? (int64_t)json_integer_value(wi) : -1;
        snprintf(c->stamp, sizeof c->stamp, "%s", r->min_lsn);
        c->has_ts = r->has_min_ts;
        c->ts_us = r->min_ts_us;
        json_t *lo = json_object_get(d, "lo"), *hi = json_object_get(d, "hi");
        c->lo = lo && !json_is_null(lo) ? json_incref(lo) : NULL;
        c->hi = hi && !json_is_null(hi) ? json_incref(hi) : NULL;
    }
    mcdc_plan_rows_free(&pr);
    if (rc) {
        chunks_free(v, n);
        json_decref(*cut);
        *cut = NULL;
        return mcdc_error_wrap(err, "reading the chunks of snapshot %s of %s", s, a->cfg.bronze), rc;
    }
    *out = v;
    *n_out = n;
    return MCDC_OK;
}

/* The stamps of the repairs the facts record now that they did not at the
 * version the last pass read (all of them when it read none, or that
 * version is gone): applying a repair again only costs a rewrite. */
static int new_repairs(mcdc_apply *a, const mcdc_pos *last_end,
                       char (**stamps)[MCDC_LSN_TEXT_LEN + 1], int32_t *n, int64_t *facts_version,
                       mcdc_error *err) {
    *stamps = NULL;
    *n = 0;
    silver_repairs now = {0}, before = {0};
    int rc = silver_repairs_load(&now, a->facts, a->cfg.bronze, -1, facts_version, err);
    bool known = last_end && last_end->apply.has_versions && last_end->apply.facts_version >= 0;
    int64_t fv = known ? last_end->apply.facts_version : -1;
    if (rc == MCDC_OK && now.n > 0 && known) {
        int64_t got;
        mcdc_error e2 = MCDC_ERROR_INIT;
        if (silver_repairs_load(&before, a->facts, a->cfg.bronze, fv, &got, &e2) != MCDC_OK)
            mcdc_log(MCDC_LOG_INFO, "%s: the facts at version %lld are gone (%s): every repair "
                                    "recorded is applied again",
                     a->cfg.target, (long long)fv, e2.message);
    }
    if (rc == MCDC_OK && now.n > 0) {
        *stamps = mcdc_calloc((size_t)now.n, sizeof **stamps);
        if (*stamps == NULL) rc = apply_nomem(err);
    }
    for (int32_t i = 0; rc == MCDC_OK && i < now.n; i++)
        if (!silver_repairs_has(&before, now.run_ids[i])) memcpy((*stamps)[(*n)++], now.stamps[i], 23);
    silver_repairs_free(&now);
    silver_repairs_free(&before);
    return rc;
}

int apply_read_facts(mcdc_apply *a, const control_view *cv, const mcdc_pos *last_end,
                     apply_facts *out, int64_t *facts_version, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    *facts_version = -1;
    if (a->facts == NULL) return MCDC_OK;
    int rc = mcdc_snapfacts_load(&out->sf, a->facts, a->cfg.bronze, a->cfg.warehouse, NULL, err);
    if (rc == MCDC_OK) rc = new_repairs(a, last_end, &out->rep_stamps, &out->n_rep, facts_version, err);
    if (rc) return rc;
    const char *done = mcdc_snapfacts_done_max(&out->sf, NULL);
    if (done) out->newest = apply_lsn_of(done, strlen(done));
    out->opened = mcdc_snapfacts_newest_chunked(&out->sf);
    if (out->opened) out->s_open = apply_lsn_of(out->opened->max_lsn, strlen(out->opened->max_lsn));
    /* a history applying the open snapshot wave by wave reads its chunks at
     * its completion too: the waves it has not applied yet go at their stamps */
    out->hist_open = a->cfg.scd_type == 2 && out->opened && cv->silver.open.set &&
                     apply_lsn_cmp(&cv->silver.open, &out->s_open) == 0;
    if (out->opened && out->s_open.set &&
        (!out->newest.set || apply_lsn_cmp(&out->s_open, &out->newest) > 0 || out->hist_open))
        rc = read_chunks(a, &out->sf, out->opened, &out->chunks, &out->n_chunks, &out->cut, err);
    return rc;
}

void apply_facts_free(apply_facts *f) {
    chunks_free(f->chunks, f->n_chunks);
    json_decref(f->cut);
    mcdc_free(f->rep_stamps);
    mcdc_snapfacts_free(&f->sf);
    memset(f, 0, sizeof *f);
}

/* ---- the decision -------------------------------------------------------------------------- */

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* The chunks of the waves after d->after: their numbers (sorted), the
 * oldest stamp, the last wave. */
static int new_waves(const apply_facts *f, apply_decision *d, mcdc_error *err) {
    d->new_chunks = mcdc_calloc((size_t)f->n_chunks, sizeof *d->new_chunks);
    if (d->new_chunks == NULL) return apply_nomem(err);
    for (int32_t i = 0; i < f->n_chunks; i++) {
        const achunk *c = &f->chunks[i];
        if (c->wave <= d->after) continue;
        d->new_chunks[d->n_new++] = c->chunk;
        apply_lsn st = apply_lsn_of(c->stamp, strlen(c->stamp));
        if (!d->first.set || apply_lsn_cmp(&st, &d->first) < 0) d->first = st;
        if (c->wave > d->wave_max) d->wave_max = c->wave;
    }
    if (d->n_new > 1) qsort(d->new_chunks, (size_t)d->n_new, sizeof *d->new_chunks, cmp_i64);
    return MCDC_OK;
}

int apply_decide(const control_view *cv, const apply_facts *f,
                 const apply_lsn *whole, apply_decision *out, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    const apply_state *was = &cv->silver;
    out->snapshot = f->newest;
    apply_lsn_max(&out->snapshot, &was->snapshot);
    apply_lsn_max(&out->snapshot, whole);
    out->is_open = f->s_open.set &&
                   (!out->snapshot.set || apply_lsn_cmp(&f->s_open, &out->snapshot) > 0);
    out->rebuild = (!was->applied.set && !was->open.set) ||
                   (out->snapshot.set &&
                    (!was->snapshot.set || apply_lsn_cmp(&out->snapshot, &was->snapshot) > 0));
    out->after = !out->rebuild && apply_lsn_cmp(&was->open, &f->s_open) == 0 && was->open.set &&
                         was->has_wave
                     ? was->wave
                     : -1;
    /* its completion: a rebuild from S, the chunks after the last wave
     * applied taken as waves */
    out->hist_done = f->hist_open && out->rebuild && !out->is_open &&
                     apply_lsn_cmp(&out->snapshot, &f->s_open) == 0;
    if (out->hist_done) out->after = was->has_wave ? was->wave : -1;
    out->wave_max = out->after;
    if ((out->is_open || out->hist_done) && f->n_chunks > 0) return new_waves(f, out, err);
    return MCDC_OK;
}

void apply_decision_free(apply_decision *d) {
    mcdc_free(d->new_chunks);
    memset(d, 0, sizeof *d);
}

/* ---- the waves ------------------------------------------------------------------------------ */

int apply_stamp_rows(mcdc_batch **out, const apply_plan *pl, int32_t n,
                     const char (*lsn)[MCDC_LSN_TEXT_LEN + 1], const bool *has, const int64_t *us,
                     mcdc_error *err) {
    mcdc_schema *cs = NULL;
    const mcdc_field *lf = &pl->change_schema->fields[pl->n_cap], *tf = &pl->change_schema->fields[pl->n_cap + 1];
    int rc = mcdc_schema_create(&cs, 2, err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(cs, 0, lf->name, lf->type, 0, 0, 0, true, err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(cs, 1, tf->name, tf->type, 0, 0, 0, true, err);
    if (rc == MCDC_OK) rc = mcdc_batch_create(out, cs, n, err);
    mcdc_schema_unref(cs);
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++) {
        rc = mcdc_col_append_bytes(&(*out)->columns[0], lsn[i], MCDC_LSN_TEXT_LEN, err);
        if (rc == MCDC_OK)
            rc = has[i] ? mcdc_col_append_int(&(*out)->columns[1], us[i], err)
                        : mcdc_col_append_null(&(*out)->columns[1], err);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(*out, err);
    if (rc) {
        mcdc_batch_free(*out);
        *out = NULL;
    }
    return rc;
}

static int by_stamp(const void *x, const void *y) {
    return strcmp(((const achunk *)x)->stamp, ((const achunk *)y)->stamp);
}

/* SCD2: pl->stamps, one row per distinct stamp of the chunks after wave
 * `after` (a wave's chunks share one), sorted by LSN. */
static int wave_stamps(apply_plan *pl, const achunk *chunks, int32_t n, int64_t after, mcdc_error *err) {
    achunk *v = mcdc_calloc((size_t)n, sizeof *v);
    char(*lsn)[MCDC_LSN_TEXT_LEN + 1] = mcdc_calloc((size_t)n, sizeof *lsn);
    bool *has = mcdc_calloc((size_t)n, sizeof *has);
    int64_t *us = mcdc_calloc((size_t)n, sizeof *us);
    int rc = v && lsn && has && us ? MCDC_OK : apply_nomem(err);
    int32_t m = 0, k = 0;
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++)
        if (chunks[i].wave > after && strlen(chunks[i].stamp) == MCDC_LSN_TEXT_LEN) v[m++] = chunks[i];
    if (rc == MCDC_OK && m > 1) qsort(v, (size_t)m, sizeof *v, by_stamp);
    for (int32_t i = 0; rc == MCDC_OK && i < m; i++) {
        if (k > 0 && strcmp(lsn[k - 1], v[i].stamp) == 0) {
            if (!has[k - 1] && v[i].has_ts) has[k - 1] = true, us[k - 1] = v[i].ts_us;
            continue;
        }
        memcpy(lsn[k], v[i].stamp, sizeof lsn[k]);
        has[k] = v[i].has_ts;
        us[k] = v[i].ts_us;
        k++;
    }
    if (rc == MCDC_OK && k > 0)
        rc = apply_stamp_rows(&pl->stamps, pl, k, (const char(*)[MCDC_LSN_TEXT_LEN + 1])lsn, has, us, err);
    mcdc_free(v);
    mcdc_free(lsn);
    mcdc_free(has);
    mcdc_free(us);
    return rc;
}

/* A chunk bound of a single key as the int64 ranges compare (the key's
 * integer, days, microseconds): false when it cannot be one (then the
 * chunk deletes nothing by range). A datetime2(7) bound with digits below
 * the microsecond: a lower bound moves up one microsecond (the keys of that
 * microsecond lie on both sides of it), an upper one is cut. */
static bool bound_value(const json_t *j, mcdc_type_id t, bool lower, int64_t *v) {
    if (t == MCDC_TYPE_DATE32 || t == MCDC_TYPE_TIMESTAMP_NTZ) {
        const char *s = json_string_value(j);
        int64_t us;
        if (s == NULL || mcdc_parse_ts_us(s, strlen(s), &us, NULL) != MCDC_OK) return false;
        if (t == MCDC_TYPE_DATE32) {
            *v = us >= 0 ? us / 86400000000LL : -((-us + 86400000000LL - 1) / 86400000000LL);
            return true;
        }
        const char *dot = strchr(s, '.');
        bool finer = false;
        if (dot) {
            size_t d = strspn(dot + 1, "0123456789");
            for (size_t i = 6; i < d; i++) finer |= dot[1 + i] != '0';
        }
        *v = us + (lower && finer ? 1 : 0);
        return true;
    }
    if (!json_is_integer(j)) return false;
    *v = (int64_t)json_integer_value(j);
    return true;
}

static bool range_type(mcdc_type_id t) {
    return t == MCDC_TYPE_INT8 || t == MCDC_TYPE_INT16 || t == MCDC_TYPE_INT32 ||
           t == MCDC_TYPE_INT64 || t == MCDC_TYPE_DATE32 || t == MCDC_TYPE_TIMESTAMP_NTZ;
}

static int by_lo(const void *x, const void *y) {
    const silver_range *a = x, *b = y;
    if (!a->has_lo || !b->has_lo) return (int)a->has_lo - (int)b->has_lo;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* pl->ranges: the new chunks' ranges [lo, hi) of key type kt, sorted. */
static int chunk_ranges(apply_plan *pl, const apply_facts *f, const apply_decision *d,
                        mcdc_type_id kt, mcdc_error *err) {
    pl->ranges = mcdc_calloc((size_t)d->n_new, sizeof *pl->ranges);
    if (pl->ranges == NULL) return apply_nomem(err);
    for (int32_t i = 0; i < f->n_chunks; i++) {
        const achunk *c = &f->chunks[i];
        if (c->wave <= d->after) continue;
        silver_range r = {0};
        r.has_lo = c->lo != NULL;
        r.has_hi = c->hi != NULL;
        if ((r.has_lo && !bound_value(c->lo, kt, true, &r.lo)) ||
            (r.has_hi && !bound_value(c->hi, kt, false, &r.hi)) ||
            !silver_lsn_parse(r.stamp, c->stamp, strlen(c->stamp)))
            continue; /* no key surely inside */
        pl->ranges[pl->n_ranges++] = r;
    }
    if (pl->n_ranges > 1) qsort(pl->ranges, (size_t)pl->n_ranges, sizeof *pl->ranges, by_lo);
    return MCDC_OK;
}

int apply_plan_waves(const mcdc_apply *a, apply_plan *pl, const apply_facts *f,
                     const apply_decision *d, mcdc_error *err) {
    if (d->n_new == 0) return MCDC_OK;
    /* a history's waves: a version a chunk row opens or a chunk closes
     * begins or ends at its stamp, at the commit time that maps to */
    int rc = a->cfg.scd_type == 2 ? wave_stamps(pl, f->chunks, f->n_chunks, d->after, err) : MCDC_OK;
    /* range deletes: one key, the one the chunks are cut on, of a type
     * SQL Server and we order alike */
    const json_t *cut = f->cut;
    const char *on = json_is_array(cut) && json_array_size(cut) == 1
                         ? json_string_value(json_array_get(cut, 0))
                         : NULL;
    if (rc || a->n_keys != 1 || on == NULL || strcmp(on, a->keys[0]) != 0) return rc;
    mcdc_type_id kt = pl->change_schema->fields[mcdc_schema_find(pl->change_schema, a->keys[0])].type;
    return range_type(kt) ? chunk_ranges(pl, f, d, kt, err) : MCDC_OK;
}
