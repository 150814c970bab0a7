/*
 * sim_fast_cache.c - the session's cache of its last fast-path query
 * (owns sim_session.fast) and the first run of the reader's change and
 * split-point queries (sim_engine_fast.c matches and emits them).
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* The change-table read fast path (sim_engine_fast.c). A session keeps its
 * last fast query prepared (the reader repeats one statement text with new
 * range parameters): a repeat skips translation and preparation. The entry
 * is dropped when the schema changes (PRAGMA schema_version), on USE and
 * at session end. */
typedef struct sim_fast_cache {
    char *key;  /* owned: the statement's tokens, each followed by \x01 */
    size_t keyn;
    sim_fast_item *items; /* owned */
    int nitems, nsrc;
    sqlite3_stmt *red, *cm, *ver; /* on s->rd */
    sqlite3_stmt *bnd; /* the range's bounds, for the change store (or NULL) */
    char ci[SIM_NAME_MAX];
    sim_fast_range range;
    bool order3;
    int lsn_param;
    int64_t schema_version;
    sim_column *cols; /* owned; names point into names */
    char (*names)[SIM_NAME_MAX];
    xl_result *res; /* owned: tables for the permission check */
} sim_fast_cache;

void sim_fast_cache_drop(sim_session *s) {
    sim_fast_cache *c = s->fast;
    if (!c) return;
    sqlite3_finalize(c->red);
    sqlite3_finalize(c->cm);
    sqlite3_finalize(c->ver);
    sqlite3_finalize(c->bnd);
    mcdc_free(c->key);
    mcdc_free(c->items);
    mcdc_free(c->cols);
    mcdc_free(c->names);
    mcdc_free(c->res);
    mcdc_free(c);
    s->fast = NULL;
}

static int fast_key(mcdc_buf *k, const tsql_tok *t, int a, int b) {
    int rc = MCDC_OK;
    for (int q = a; q < b && rc == MCDC_OK; q++) {
        rc = mcdc_buf_append(k, t[q].s, (size_t)t[q].n, NULL);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(k, 1, NULL);
    }
    return rc;
}

static int64_t schema_version(sqlite3_stmt *ver) {
    int64_t v = -1;
    if (sqlite3_step(ver) == SQLITE_ROW) v = sqlite3_column_int64(ver, 0);
    sqlite3_reset(ver);
    return v;
}

/* Sends the result of the cached fast query; *done false (nothing sent)
 * when the entry no longer applies. */
static int fast_send(sim_stmt *x, sim_fast_cache *c, bool *done, mcdc_error *err) {
    sim_session *s = x->s;
    mcdc_error e2 = MCDC_ERROR_INIT;
    *done = false;
    sqlite3_reset(c->red);
    sqlite3_clear_bindings(c->red);
    sqlite3_reset(c->cm);
    sqlite3_clear_bindings(c->cm);
    if (sim_bind_vars(s, c->red, &e2) != MCDC_OK || sim_bind_vars(s, c->cm, &e2) != MCDC_OK) return MCDC_OK;
    if (c->bnd) {
        sqlite3_reset(c->bnd);
        sqlite3_clear_bindings(c->bnd);
        if (sim_bind_vars(s, c->bnd, &e2) != MCDC_OK) return MCDC_OK;
    }
    *done = true;
    s->srv->fast_queries++;
    int64_t rows = 0;
    sim_fast_plan p = {c->items, c->nitems, c->nsrc, NULL, 0, NULL, 0, "", c->range, c->order3, NULL, 0};
    snprintf(p.ci, sizeof p.ci, "%s", c->ci);
    /* the change store first (sim_store.h), else SQLite */
    sim_fast_store_q sq = {&p, c->bnd, c->cm, c->lsn_param, c->cols};
    bool served = false;
    int rc = sim_fast_store_emit(s, &sq, x->sink, &rows, &x->aborted, &served, err);
    if (!served) {
        if (x->sink->columns && x->sink->columns(x->sink->ctx, c->cols, c->nitems)) x->aborted = true;
        if (!x->aborted) rc = sim_fast_emit(s->rd, c->red, c->cm, &p, c->lsn_param, x->sink, &rows, &x->aborted, err);
    }
    sqlite3_reset(c->red);
    sqlite3_reset(c->cm);
    if (c->bnd) sqlite3_reset(c->bnd);
    if (rc == MCDC_OK && !x->aborted) { s->rowcount = rows; sim_send_done(x, rows, true, false); }
    return rc;
}

/* A repeat of the cached statement: sent from the cache (*done), or the
 * entry dropped. */
int sim_fast_cached(sim_stmt *x, const tsql_tok *t, int a, int b, bool *done, mcdc_error *err) {
    sim_session *s = x->s;
    sim_fast_cache *c = s->fast;
    *done = false;
    mcdc_buf k = {0};
    bool same = fast_key(&k, t, a, b) == MCDC_OK && k.len == c->keyn && memcmp(k.data, c->key, k.len) == 0;
    mcdc_buf_free(&k);
    if (!same) return MCDC_OK;
    if (schema_version(c->ver) != c->schema_version) { sim_fast_cache_drop(s); return MCDC_OK; }
    mcdc_error e2 = MCDC_ERROR_INIT;
    if (sim_check_select_perms(s, s->rd, c->res, &e2) != MCDC_OK) { sim_fast_cache_drop(s); return MCDC_OK; }
    int rc = fast_send(x, c, done, err);
    if (*done) s->srv->fast_cache_hits++;
    else sim_fast_cache_drop(s);
    return rc;
}

/* First run of a fast query: translate and prepare its two statements,
 * keep them in the session's cache and send the result. *done false when
 * the statement is left to the general path (nothing was sent). */
int sim_run_fast(sim_stmt *x, const xl_env *env, const sim_fast_plan *fp, const tsql_tok *t, int a, int b,
                    sqlite3_stmt *orig, const xl_result *res, bool *done, mcdc_error *err) {
    sim_session *s = x->s;
    *done = false;
    int n = sqlite3_column_count(orig);
    if (n != fp->nitems || n > MCDC_COLUMNS_MAX) return MCDC_OK;
    sim_fast_cache_drop(s);
    sim_fast_cache *c = mcdc_calloc(1, sizeof *c);
    if (!c) return MCDC_OK;
    c->cols = mcdc_calloc((size_t)n + 1, sizeof *c->cols);
    c->names = mcdc_calloc((size_t)n + 1, SIM_NAME_MAX);
    c->items = mcdc_calloc((size_t)n + 1, sizeof *c->items);
    c->res = mcdc_malloc(sizeof *c->res);
    c->nitems = n;
    c->nsrc = fp->nsrc;
    s->fast = c;
    xl_result *r2 = mcdc_malloc(sizeof *r2);
    mcdc_buf q1 = {0}, q2 = {0}, key = {0};
    mcdc_error e2 = MCDC_ERROR_INIT;
    bool ok = c->cols && c->names && c->items && c->res && r2 && sim_result_columns(s->rd, orig, res, c->cols, c->names, n);
    if (ok) {
        memcpy(c->items, fp->items, (size_t)n * sizeof *c->items);
        memcpy(c->res, res, sizeof *c->res);
        ok = fast_key(&key, t, a, b) == MCDC_OK;
        c->key = (char *)key.data; /* ownership moves to the cache */
        c->keyn = key.len;
    }
    ok = ok && tsql_xlate(env, fp->reduced, 0, fp->nreduced, &q1, r2, &e2) == MCDC_OK;
    ok = ok && tsql_xlate(env, fp->commit, 0, fp->ncommit, &q2, r2, &e2) == MCDC_OK;
    if (ok) {
        q2.len = strlen((const char *)q2.data);
        ok = mcdc_buf_append_str(&q2, " WHERE \"m\".\"start_lsn\" = $__lsn", NULL) == MCDC_OK && mcdc_buf_cstr(&q2, NULL) == MCDC_OK;
    }
    ok = ok && sqlite3_prepare_v3(s->rd, (const char *)q1.data, -1, SQLITE_PREPARE_PERSISTENT, &c->red, NULL) == SQLITE_OK &&
         sqlite3_column_count(c->red) == fp->nsrc;
    ok = ok && sqlite3_prepare_v3(s->rd, (const char *)q2.data, -1, SQLITE_PREPARE_PERSISTENT, &c->cm, NULL) == SQLITE_OK &&
         sqlite3_column_count(c->cm) == 1;
    ok = ok && sqlite3_prepare_v3(s->rd, "PRAGMA schema_version", -1, SQLITE_PREPARE_PERSISTENT, &c->ver, NULL) == SQLITE_OK;
    if (ok && fp->range != SIM_FAST_RANGE_NONE) {
        /* the bounds for the change store; without them SQLite answers */
        mcdc_buf q3 = {0};
        if (tsql_xlate(env, fp->bounds, 0, fp->nbounds, &q3, r2, &e2) == MCDC_OK &&
            sqlite3_prepare_v3(s->rd, (const char *)q3.data, -1, SQLITE_PREPARE_PERSISTENT, &c->bnd, NULL) == SQLITE_OK) {
            snprintf(c->ci, sizeof c->ci, "%s", fp->ci);
            c->range = fp->range;
            c->order3 = fp->order3;
        } else {
            sqlite3_finalize(c->bnd);
            c->bnd = NULL;
        }
        mcdc_buf_free(&q3);
    }
    if (ok) {
        c->lsn_param = sqlite3_bind_parameter_index(c->cm, "$__lsn");
        c->schema_version = schema_version(c->ver);
        ok = c->lsn_param > 0 && c->schema_version >= 0;
    }
    int rc = MCDC_OK;
    if (ok) rc = fast_send(x, c, done, err);
    if (!ok || !*done) sim_fast_cache_drop(s);
    mcdc_buf_free(&q1);
    mcdc_buf_free(&q2);
    mcdc_free(r2);
    return rc;
}

/* The reader's split-point query (sim_engine_fast.c); *done as sim_run_fast. */
int sim_run_split(sim_stmt *x, const xl_env *env, const sim_fast_split *sp, sqlite3_stmt *orig, const xl_result *res,
                     bool *done, mcdc_error *err) {
    sim_session *s = x->s;
    *done = false;
    if (sqlite3_column_count(orig) != 3) return MCDC_OK;
    sim_column cols[3];
    char names[3][SIM_NAME_MAX];
    memset(cols, 0, sizeof cols);
    xl_result *r2 = mcdc_malloc(sizeof *r2);
    mcdc_buf q = {0};
    mcdc_error e2 = MCDC_ERROR_INIT;
    sqlite3_stmt *scan = NULL;
    bool ok = r2 && sim_result_columns(s->rd, orig, res, cols, names, 3) &&
              tsql_xlate(env, sp->scan, 0, sp->nscan, &q, r2, &e2) == MCDC_OK &&
              sqlite3_prepare_v2(s->rd, (const char *)q.data, -1, &scan, NULL) == SQLITE_OK &&
              sqlite3_column_count(scan) == 1 && sim_bind_vars(s, scan, &e2) == MCDC_OK;
    int rc = MCDC_OK;
    sqlite3_stmt *bnd = NULL;
    if (ok && sp->bounds) {
        mcdc_buf q3 = {0};
        if (tsql_xlate(env, sp->bounds, 0, sp->nbounds, &q3, r2, &e2) != MCDC_OK ||
            sqlite3_prepare_v2(s->rd, (const char *)q3.data, -1, &bnd, NULL) != SQLITE_OK || sim_bind_vars(s, bnd, &e2) != MCDC_OK) {
            sqlite3_finalize(bnd);
            bnd = NULL;
        }
        mcdc_buf_free(&q3);
    }
    if (ok) {
        *done = true;
        s->srv->fast_queries++;
        int64_t rows = 0;
        bool served = false;
        rc = sim_fast_split_store(s, sp, bnd, cols, x->sink, &rows, &x->aborted, &served, err);
        if (!served && x->sink->columns && x->sink->columns(x->sink->ctx, cols, 3)) x->aborted = true;
        if (!served && !x->aborted) rc = sim_fast_split_emit(s->rd, scan, sp->tiles, x->sink, &rows, &x->aborted, err);
        if (rc == MCDC_OK && !x->aborted) { s->rowcount = rows; sim_send_done(x, rows, true, false); }
    }
    sqlite3_finalize(scan);
    sqlite3_finalize(bnd);
    mcdc_buf_free(&q);
    mcdc_free(r2);
    return rc;
}
