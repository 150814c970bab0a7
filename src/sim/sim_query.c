/*
 * sim_query.c - queries: the translator's environment over a
 * session, the SELECT permission check, running a SELECT (general path, or
 * the fast path's entry points) and evaluating expressions for SET,
 * DECLARE, IF, EXEC arguments and the expressions of DML.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* ---- translator environment --------------------------------------------- */
typedef struct env_ctx {
    sim_session *s;
    sqlite3 *c;
    sim_snap_view *view; /* a snapshot read's versioned view, or NULL */
} env_ctx;
static int env_table_source(void *ctx, const char *name, mcdc_buf *out) {
    env_ctx *ec = ctx;
    return ec->view ? sim_snap_table_source(ec->view, name, out) : 0;
}
static bool env_table_exists(void *ctx, const char *name) { return sim_table_exists(((env_ctx *)ctx)->c, name); }
static bool env_col_type(void *ctx, const char *tbl, const char *col, sim_type *out, bool *nul) {
    return sim_col_type(((env_ctx *)ctx)->c, tbl, col, out, nul);
}
static bool env_var_type(void *ctx, const char *name, sim_type *out) {
    sim_var *v = sim_var_find(((env_ctx *)ctx)->s, name);
    if (!v) return false;
    *out = v->type;
    return true;
}
static bool env_ci_columns(void *ctx, const char *ci, char *buf, size_t cap) {
    sqlite3 *c = ((env_ctx *)ctx)->c;
    sqlite3_stmt *st;
    bool found = false;
    size_t o = 0;
    buf[0] = 0;
    if (sqlite3_prepare_v2(c, "SELECT column_name FROM \"cdc.captured_columns\" WHERE capture_instance = ? ORDER BY column_ordinal",
                           -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, ci, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW) {
        found = true;
        const char *n = (const char *)sqlite3_column_text(st, 0);
        int w = snprintf(buf + o, cap - o, "%s\"%s\"", o ? ", " : "", n);
        if (w < 0 || (size_t)w >= cap - o) break;
        o += (size_t)w;
    }
    sqlite3_finalize(st);
    return found;
}

/* sys.dm_exec_session_wait_stats as an inline subquery: one ASYNC_NETWORK_IO
 * row per session (its counter is what the TDS layer reported through
 * sim_session_add_network_wait) plus a SOS_SCHEDULER_YIELD row. A
 * least-privilege login sees its own session only. */
static int env_dyn_view(void *ctx, const char *name, mcdc_buf *out) {
    sim_session *s = ((env_ctx *)ctx)->s;
    if (mcdc_str_ieq(name, "sys.databases")) {
        /* name, database_id, is_cdc_enabled, ... over the open databases */
        int rc = MCDC_OK, id = 1;
        pthread_mutex_lock(&s->srv->mu);
        bool first = true;
        for (sim_db *d = s->srv->dbs; d && rc == MCDC_OK; d = d->next) {
            int snap = sim_snap_state(d);
            char *q = sqlite3_mprintf("%sSELECT %Q AS name, %d AS database_id, %d AS is_cdc_enabled, %d AS snapshot_isolation_state,"
                                      " %Q AS snapshot_isolation_state_desc, 0 AS is_read_committed_snapshot_on,"
                                      " %d AS compatibility_level, 'ONLINE' AS state_desc",
                                      first ? "" : " UNION ALL ", d->name, mcdc_str_ieq(d->name, "master") ? 1 : 4 + id++,
                                      d->cdc_enabled ? 1 : 0, snap, sim_snap_state_desc(snap), s->srv->product_major * 10);
            rc = q ? mcdc_buf_append_str(out, q, NULL) : MCDC_E_NOMEM;
            sqlite3_free(q);
            first = false;
        }
        pthread_mutex_unlock(&s->srv->mu);
        return rc == MCDC_OK ? 1 : -1;
    }
    if (!mcdc_str_ieq(name, "sys.dm_exec_session_wait_stats")) return 0;
    bool first = true;
    int rc = MCDC_OK;
    pthread_mutex_lock(&s->srv->mu);
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX && rc == MCDC_OK; k++) {
        sim_session *o = s->srv->sessions[k];
        if (!o || (!s->admin && o != s)) continue;
        rc = mcdc_buf_printf(out, NULL,
                             "%sSELECT %d AS session_id, 'ASYNC_NETWORK_IO' AS wait_type, %lld AS waiting_tasks_count,"
                             " %lld AS wait_time_ms, %lld AS max_wait_time_ms, 0 AS signal_wait_time_ms"
                             " UNION ALL SELECT %d, 'SOS_SCHEDULER_YIELD', %lld, 0, 0, 0",
                             first ? "" : " UNION ALL ", o->spid, (long long)o->net_waits, (long long)o->net_wait_ms,
                             (long long)o->net_wait_max_ms, o->spid, (long long)o->requests);
        first = false;
    }
    pthread_mutex_unlock(&s->srv->mu);
    if (rc == MCDC_OK && first)
        rc = mcdc_buf_append_str(out, "SELECT 0 AS session_id, '' AS wait_type, 0 AS waiting_tasks_count, 0 AS wait_time_ms,"
                                      " 0 AS max_wait_time_ms, 0 AS signal_wait_time_ms WHERE 0", NULL);
    return rc == MCDC_OK ? 1 : -1;
}

static void make_env(sim_session *s, env_ctx *ec, xl_env *env, char *user, size_t ucap, mcdc_buf *wait_sql) {
    memset(env, 0, sizeof *env);
    env->ctx = ec;
    env->table_exists = env_table_exists;
    env->col_type = env_col_type;
    env->var_type = env_var_type;
    env->ci_columns = env_ci_columns;
    env->spid = s->spid;
    env->trancount = s->trancount;
    env->rowcount = s->rowcount;
    env->db_name = s->db->name;
    env->user_name = sim_db_user_name(s, user, ucap);
    env->is_admin = s->admin;
    env->product_major = s->srv->product_major;
    (void)wait_sql;
    env->dyn_view = env_dyn_view;
    env->table_source = env_table_source;
}

/* Translates the read [a, b) for the session's read connection: the SELECT
 * permission, then under SNAPSHOT the versioned view (*view: end it with
 * sim_snap_read_end and free it, whatever rc), else the READ COMMITTED
 * wait. A table the view changes is translated as the view's subquery. */
static int translate_read(sim_stmt *x, env_ctx *ec, const xl_env *env, const tsql_tok *t, int a, int b, mcdc_buf *sql,
                          xl_result *res, sim_snap_view **view, mcdc_error *err) {
    sim_session *s = x->s;
    *view = NULL;
    int rc = tsql_xlate(env, t, a, b, sql, res, err);
    if (rc == MCDC_OK) rc = sim_check_select_perms(s, s->rd, res, err);
    bool nolock = sim_has_nolock(t, a, b);
    if (rc == MCDC_OK && sim_snap_applies(s, res, nolock)) {
        sim_snap_view *v = mcdc_malloc(sizeof *v);
        if (!v) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        *view = v;
        rc = sim_snap_read_begin(x, res, v, err);
        if (rc == MCDC_OK && v->noverlay > 0) {
            ec->view = v;
            mcdc_buf_reset(sql);
            rc = tsql_xlate(env, t, a, b, sql, res, err);
        }
    } else if (rc == MCDC_OK) {
        sim_snap_note_access(s, res);
        rc = sim_wait_committed(x, res, nolock, err);
    }
    return rc;
}

static void end_read(sim_session *s, sim_snap_view *view) {
    if (!view) return;
    sim_snap_read_end(s, view);
    mcdc_free(view);
}

/* Permission check of a translated statement's tables. */
int sim_check_select_perms(sim_session *s, sqlite3 *c, const xl_result *r, mcdc_error *err) {
    if (s->admin) return MCDC_OK;
    for (int k = 0; k < r->ntables; k++) {
        const char *n = r->tables[k].name;
        if (sim_caplog_view(n)) {
            int rc = sim_caplog_check_perm(s, err);
            if (rc != MCDC_OK) return rc;
            continue;
        }
        if (sim_ci_prefix(n, "sys.") || mcdc_str_ieq(n, "cdc.lsn_time_mapping")) continue;
        if (!sim_has_grant(c, s->login, n)) {
            char user[SIM_NAME_MAX];
            sim_db_user_name(s, user, sizeof user);
            if (sim_has_grant(c, user, n)) continue;
            const char *dot = strchr(n, '.');
            char schema[SIM_NAME_MAX];
            size_t sl = dot ? (size_t)(dot - n) : 0;
            if (sl >= sizeof schema) sl = sizeof schema - 1;
            memcpy(schema, n, sl);
            schema[sl] = 0;
            return sim_err(err, 229, "The SELECT permission was denied on the object '%s', database '%s', schema '%s'.",
                           dot ? dot + 1 : n, s->db->name, schema);
        }
    }
    return MCDC_OK;
}

/* Runs a SELECT (tokens [a, b)); assign: the variables of "@v = expr"
 * items (the caller stripped them), nassign of them. */
int sim_run_query(sim_stmt *x, const tsql_tok *t, int a, int b, const sim_var **assign, int nassign,
                     mcdc_error *err) {
    sim_session *s = x->s;
    env_ctx ec = {s, s->rd, NULL};
    xl_env env;
    char user[SIM_NAME_MAX];
    mcdc_buf wait = {0}, sql = {0};
    /* the cached change query skips translation: not under SNAPSHOT, whose
     * checks and view come with it */
    if (nassign == 0 && s->fast && !s->srv->fast_off && s->iso != SIM_ISO_SNAPSHOT) {
        bool done = false;
        int frc = sim_fast_cached(x, t, a, b, &done, err);
        if (done) return frc;
    }
    make_env(s, &ec, &env, user, sizeof user, &wait);
    xl_result *res = mcdc_malloc(sizeof *res);
    if (!res) { mcdc_buf_free(&wait); return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }
    sim_snap_view *view = NULL;
    int rc = translate_read(x, &ec, &env, t, a, b, &sql, res, &view, err);
    sqlite3_stmt *st = NULL;
    if (rc == MCDC_OK && sqlite3_prepare_v2(s->rd, (const char *)sql.data, -1, &st, NULL) != SQLITE_OK)
        rc = sim_sqlite_err(s->rd, SQLITE_ERROR, err);
    if (rc == MCDC_OK) rc = sim_bind_vars(s, st, err);
    bool fast_done = false;
    if (rc == MCDC_OK && nassign == 0 && !s->srv->fast_off) {
        sim_fast_plan fp;
        if (sim_fast_match(&fp, t, a, b)) {
            rc = sim_run_fast(x, &env, &fp, t, a, b, st, res, &fast_done, err);
            sim_fast_plan_free(&fp);
        }
    }
    if (rc == MCDC_OK && !fast_done && nassign == 0 && !s->srv->fast_off) {
        sim_fast_table ft;
        if (sim_fast_match_table(&ft, t, a, b) || sim_fast_match_slices(&ft, t, a, b)) {
            rc = sim_run_table_fast(x, &env, &ft, st, res, view, &fast_done, err);
            sim_fast_table_free(&ft);
        }
    }
    if (rc == MCDC_OK && !fast_done && nassign == 0 && !s->srv->fast_off) {
        sim_fast_split sp;
        if (sim_fast_match_split(&sp, t, a, b)) {
            rc = sim_run_split(x, &env, &sp, st, res, &fast_done, err);
            sim_fast_split_free(&sp);
        }
    }
    if (rc == MCDC_OK && !fast_done) {
        int first = sqlite3_step(st);
        if (nassign > 0) {
            int64_t cnt = 0;
            while (first == SQLITE_ROW && rc == MCDC_OK) {
                for (int k = 0; k < nassign && k < sqlite3_column_count(st) && rc == MCDC_OK; k++)
                    rc = sim_var_assign(s, (sim_var *)assign[k], sqlite3_column_value(st, k), err);
                cnt++;
                first = sqlite3_step(st);
            }
            if (rc == MCDC_OK && first != SQLITE_DONE) rc = sim_sqlite_err(s->rd, first, err);
            if (rc == MCDC_OK) { s->rowcount = cnt; sim_send_done(x, cnt, true, false); }
        } else {
            int64_t rows = 0;
            rc = sim_emit_stmt(s, s->rd, st, first, res, NULL, 0, x->sink, x->in_proc, &rows, err, &x->aborted);
            if (rc == MCDC_OK && !x->aborted) { s->rowcount = rows; sim_send_done(x, rows, true, false); }
        }
    }
    sqlite3_finalize(st);
    end_read(s, view);
    mcdc_free(res);
    mcdc_buf_free(&sql);
    mcdc_buf_free(&wait);
    return rc;
}

/* Evaluates one expression [a, b) into a variable (SET / DECLARE). */
int sim_eval_into(sim_stmt *x, const tsql_tok *t, int a, int b, sim_var *v, mcdc_error *err) {
    /* build "SELECT <expr>" tokens */
    int n = b - a;
    tsql_tok *tk = mcdc_malloc(((size_t)n + 2) * sizeof *tk);
    if (!tk) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    tk[0].t = TK_IDENT;
    tk[0].s = "SELECT";
    tk[0].n = 6;
    tk[0].line = t[a].line;
    memcpy(tk + 1, t + a, (size_t)n * sizeof *tk);
    tk[n + 1].t = TK_EOF;
    tk[n + 1].s = "";
    tk[n + 1].n = 0;
    const sim_var *as[1] = {v};
    sim_stmt quiet = *x;
    sim_sink none = {0};
    quiet.sink = &none;
    int rc = sim_run_query(&quiet, tk, 0, n + 1, as, 1, err);
    mcdc_free(tk);
    return rc;
}

int sim_xlate_expr(sim_stmt *x, sqlite3 *c, const tsql_tok *t, int a, int b, mcdc_buf *out, mcdc_error *err) {
    env_ctx ec = {x->s, c, NULL};
    xl_env env;
    char user[SIM_NAME_MAX];
    mcdc_buf wait = {0};
    make_env(x->s, &ec, &env, user, sizeof user, &wait);
    xl_result *res = mcdc_malloc(sizeof *res);
    int rc = res ? tsql_xlate(&env, t, a, b, out, res, err) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK && res && res->ntables) rc = sim_check_select_perms(x->s, c, res, err);
    /* the tables it reads (the subqueries and SELECT of DML: READ COMMITTED,
     * even under SNAPSHOT) */
    if (rc == MCDC_OK && res) sim_snap_note_access(x->s, res);
    if (rc == MCDC_OK && res) rc = sim_wait_committed(x, res, sim_has_nolock(t, a, b), err);
    mcdc_free(res);
    mcdc_buf_free(&wait);
    return rc;
}

int sim_eval_value(sim_stmt *x, const tsql_tok *t, int a, int b, sqlite3_value **out, mcdc_error *err) {
    sim_session *s = x->s;
    *out = NULL;
    if (b == a + 1 && tsql_tok_is(&t[a], "DEFAULT")) return MCDC_OK;
    mcdc_buf ex = {0}, q = {0}, wait = {0};
    env_ctx ec = {s, s->rd, NULL};
    xl_env env;
    char user[SIM_NAME_MAX];
    make_env(s, &ec, &env, user, sizeof user, &wait);
    xl_result *res = mcdc_malloc(sizeof *res);
    sim_snap_view *view = NULL;
    int rc = res ? translate_read(x, &ec, &env, t, a, b, &ex, res, &view, err)
                 : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK) {
        mcdc_buf_printf(&q, NULL, "SELECT %s", (const char *)ex.data);
        rc = mcdc_buf_cstr(&q, err);
    }
    sqlite3_stmt *st = NULL;
    if (rc == MCDC_OK && sqlite3_prepare_v2(s->rd, (const char *)q.data, -1, &st, NULL) != SQLITE_OK)
        rc = sim_sqlite_err(s->rd, SQLITE_ERROR, err);
    if (rc == MCDC_OK) rc = sim_bind_vars(s, st, err);
    if (rc == MCDC_OK) {
        int r = sqlite3_step(st);
        if (r == SQLITE_ROW) *out = sqlite3_value_dup(sqlite3_column_value(st, 0));
        else rc = sim_sqlite_err(s->rd, r, err);
    }
    sqlite3_finalize(st);
    end_read(s, view);
    mcdc_free(res);
    mcdc_buf_free(&ex);
    mcdc_buf_free(&q);
    mcdc_buf_free(&wait);
    return rc;
}

/* SELECT statement with possible "@v = expr" items. */
int sim_do_select(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    int k = i + 1;
    if (k < end && tsql_tok_is(&t[k], "TOP")) {
        k++;
        if (k < end && tsql_tok_op(&t[k], "(")) {
            int d = 0;
            for (; k < end; k++) {
                if (tsql_tok_op(&t[k], "(")) d++;
                else if (tsql_tok_op(&t[k], ")") && --d == 0) { k++; break; }
            }
        } else k++;
    }
    if (!(k + 1 < end && t[k].t == TK_VAR && tsql_tok_op(&t[k + 1], "="))) return sim_run_query(x, t, i, end, NULL, 0, err);
    /* assignment select: strip the "@v =" prefixes */
    tsql_tok *tk = mcdc_malloc(((size_t)(end - i) + 1) * sizeof *tk);
    const sim_var *as[64];
    int na = 0, o = 0, d = 0;
    if (!tk) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    bool item_start = false;
    for (int q = i; q < end; q++) {
        if (q == k) item_start = true;
        if (tsql_tok_op(&t[q], "(")) d++;
        else if (tsql_tok_op(&t[q], ")")) d--;
        if (item_start && d == 0 && t[q].t == TK_VAR && q + 1 < end && tsql_tok_op(&t[q + 1], "=")) {
            char name[SIM_NAME_MAX];
            snprintf(name, sizeof name, "%.*s", t[q].n, t[q].s);
            sim_var *v = sim_var_find(x->s, name);
            if (!v) { mcdc_free(tk); return sim_err(err, 137, "Must declare the scalar variable \"%s\".", name); }
            if (na < 64) as[na++] = v;
            q++;
            item_start = false;
            continue;
        }
        if (d == 0 && tsql_tok_op(&t[q], ",")) item_start = true;
        if (d == 0 && tsql_tok_is(&t[q], "FROM")) item_start = false;
        tk[o++] = t[q];
    }
    tk[o].t = TK_EOF;
    tk[o].s = "";
    tk[o].n = 0;
    int rc = sim_run_query(x, tk, 0, o, as, na, err);
    mcdc_free(tk);
    return rc;
}
