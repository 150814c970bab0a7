/*
 * sim_dml.c - DML: INSERT (VALUES, SELECT, DEFAULT VALUES), UPDATE
 * and DELETE with WHERE; row images for the undo log and for capture, and
 * the waits of writers on rows other transactions hold.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* ---- DML ---------------------------------------------------------------- */
typedef struct img_set {
    sim_rowimg *rows;
    int n, cap, ncols;
} img_set;

static void img_free(img_set *m) {
    for (int r = 0; r < m->n; r++) {
        for (int k = 0; m->rows[r].v && k < m->ncols; k++) sqlite3_value_free(m->rows[r].v[k]);
        mcdc_free(m->rows[r].v);
    }
    mcdc_free(m->rows);
    memset(m, 0, sizeof *m);
}

/* Collects rows "rowid, c1..cn" of a stepped statement. */
static int img_collect(img_set *m, sqlite3 *c, sqlite3_stmt *st, int ncols, mcdc_error *err) {
    m->ncols = ncols;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (m->n == m->cap) {
            int nc = m->cap ? m->cap * 2 : 16;
            sim_rowimg *nr = mcdc_realloc(m->rows, (size_t)nc * sizeof *nr);
            if (!nr) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            m->rows = nr;
            m->cap = nc;
        }
        sim_rowimg *r = &m->rows[m->n];
        r->rowid = sqlite3_column_int64(st, 0);
        r->v = mcdc_calloc((size_t)ncols, sizeof *r->v);
        if (!r->v) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        m->n++;
        for (int k = 0; k < ncols; k++) r->v[k] = sqlite3_value_dup(sqlite3_column_value(st, k + 1));
    }
    if (rc != SQLITE_DONE) return sim_sqlite_err(c, rc, err);
    return MCDC_OK;
}

static bool val_eq(sqlite3_value *a, sqlite3_value *b) {
    int ta = sqlite3_value_type(a), tb = sqlite3_value_type(b);
    if (ta != tb) return false;
    switch (ta) {
    case SQLITE_NULL: return true;
    case SQLITE_INTEGER: return sqlite3_value_int64(a) == sqlite3_value_int64(b);
    case SQLITE_FLOAT: return sqlite3_value_double(a) == sqlite3_value_double(b);
    default: {
        int na = sqlite3_value_bytes(a), nb = sqlite3_value_bytes(b);
        const void *pa = ta == SQLITE_TEXT ? (const void *)sqlite3_value_text(a) : sqlite3_value_blob(a);
        const void *pb = tb == SQLITE_TEXT ? (const void *)sqlite3_value_text(b) : sqlite3_value_blob(b);
        return na == nb && (na == 0 || memcmp(pa, pb, (size_t)na) == 0);
    }
    }
}

typedef struct dml {
    char tbl[SIM_NAME_MAX * 2];
    char short_name[SIM_NAME_MAX];
    sim_col_def *cols;
    int ncols;
    char (*names)[SIM_NAME_MAX];
    int64_t schema_ver; /* the database's schema version the statement was compiled at */
} dml;

static int dml_target(sim_stmt *x, const tsql_tok *t, int *i, int end, dml *d, mcdc_error *err) {
    char parts[4][MCDC_IDENT_BYTES_MAX];
    int np = xl_name_parts(t, i, end, parts);
    if (np == 0) return sim_syntax_err(err, t, *i, end);
    xl_table_name(parts, np, d->tbl, sizeof d->tbl);
    snprintf(d->short_name, sizeof d->short_name, "%s", parts[np - 1]);
    /* the statement runs later, under the lock again: a DDL in between
     * compiles it again (DML_STALE), as SQL Server's schema lock would have
     * made the DDL wait for it or it for the DDL */
    pthread_mutex_lock(&x->s->srv->mu);
    d->schema_ver = sim_schema_version(x->s->db->w);
    bool exists = sim_table_exists(x->s->db->w, d->tbl);
    int rc = exists && x->s->admin ? sim_load_cols(x->s->db->w, d->tbl, &d->cols, &d->ncols, err) : MCDC_OK;
    pthread_mutex_unlock(&x->s->srv->mu);
    if (!exists || sim_ci_prefix(d->tbl, "sys.")) {
        if (np >= 2) return sim_err(err, 208, "Invalid object name '%s.%s'.", parts[np - 2], parts[np - 1]);
        return sim_err(err, 208, "Invalid object name '%s'.", parts[np - 1]);
    }
    if (!x->s->admin) {
        const char *dot = strchr(d->tbl, '.');
        return sim_err(err, 229, "The %s permission was denied on the object '%s', database '%s', schema '%.*s'.", "INSERT",
                       d->short_name, x->s->db->name, dot ? (int)(dot - d->tbl) : 3, d->tbl);
    }
    if (rc != MCDC_OK) return rc;
    d->names = mcdc_calloc((size_t)d->ncols + 1, SIM_NAME_MAX);
    if (!d->names) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int k = 0; k < d->ncols; k++) snprintf(d->names[k], SIM_NAME_MAX, "%s", d->cols[k].name);
    return MCDC_OK;
}

static void dml_free(dml *d) {
    mcdc_free(d->cols);
    mcdc_free(d->names);
}

static int computed_err(mcdc_error *err, const char *col) {
    return sim_err(err, 271, "The column \"%s\" cannot be modified because it is either a computed column or is the result of a UNION operator.", col);
}

static int col_index(const dml *d, const char *name) {
    for (int k = 0; k < d->ncols; k++) if (mcdc_str_ieq(d->cols[k].name, name)) return k;
    return -1;
}

/* A value that is just a numeric literal ("-12.50", "1e3") goes to the
 * conversion as text, so decimal(38,s) and money keep every digit (SQLite
 * would read the literal as a double). */
static bool numeric_literal(const tsql_tok *t, int a, int b, const sim_type *target, mcdc_buf *out) {
    bool neg = false;
    if (target->id != SIM_T_DECIMAL && target->id != SIM_T_MONEY && target->id != SIM_T_SMALLMONEY) return false;
    if (b - a == 2 && (tsql_tok_op(&t[a], "-") || tsql_tok_op(&t[a], "+"))) { neg = tsql_tok_op(&t[a], "-"); a++; }
    if (b - a != 1 || t[a].t != TK_NUM) return false;
    mcdc_buf_printf(out, NULL, "'%s%.*s'", neg ? "-" : "", t[a].n, t[a].s);
    return mcdc_buf_cstr(out, NULL) == MCDC_OK;
}

/* A value [a, b) for a column of type target into ex: a numeric literal
 * as exact text; for a sql_variant column as CAST(value AS sql_variant),
 * so the value keeps its own type as the base type. */
static int value_expr(sim_stmt *x, const tsql_tok *t, int a, int b, const sim_type *target, mcdc_buf *ex,
                      mcdc_error *err) {
    if (numeric_literal(t, a, b, target, ex)) return MCDC_OK;
    if (target->id != SIM_T_SQL_VARIANT) return sim_xlate_expr(x, x->s->rd, t, a, b, ex, err);
    int n = b - a;
    tsql_tok *c = mcdc_malloc(((size_t)n + 6) * sizeof *c);
    if (!c) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    static const struct { tsql_tk k; const char *s; } HEAD[] = {{TK_IDENT, "CAST"}, {TK_OP, "("}},
                                                     TAIL[] = {{TK_IDENT, "AS"}, {TK_IDENT, "sql_variant"}, {TK_OP, ")"}};
    int o = 0, line = n > 0 ? t[a].line : 1;
    for (size_t k = 0; k < 2; k++) c[o++] = (tsql_tok){HEAD[k].k, HEAD[k].s, (int)strlen(HEAD[k].s), line};
    memcpy(c + o, t + a, (size_t)n * sizeof *c);
    o += n;
    for (size_t k = 0; k < 3; k++) c[o++] = (tsql_tok){TAIL[k].k, TAIL[k].s, (int)strlen(TAIL[k].s), line};
    c[o] = (tsql_tok){TK_EOF, "", 0, line};
    int rc = sim_xlate_expr(x, x->s->rd, c, 0, o, ex, err);
    mcdc_free(c);
    return rc;
}

static void append_cols(mcdc_buf *b, const dml *d) {
    for (int k = 0; k < d->ncols; k++) mcdc_buf_printf(b, NULL, ", \"%s\"", d->cols[k].name);
}

/* Applies captured-change bookkeeping for the row images of one DML. */
static int dml_log(sim_stmt *x, dml *d, int kind, img_set *before, img_set *after, const bool *set_cols, mcdc_error *err) {
    sim_session *s = x->s;
    bool cdc = sim_cdc_table_captured(s->db, d->tbl);
    bool explicit_tran = s->trancount > 0;
    int rc = MCDC_OK;
    int n = kind == 1 ? after->n : before->n;
    for (int r = 0; r < n && rc == MCDC_OK; r++) {
        sim_rowimg *b = kind != 1 ? &before->rows[r] : NULL;
        sim_rowimg *a = NULL;
        if (kind == 1) a = &after->rows[r];
        else if (kind == 2) {
            for (int k = 0; k < after->n; k++) if (after->rows[k].rowid == b->rowid) { a = &after->rows[k]; break; }
            if (!a) continue;
        }
        if (explicit_tran) {
            if (kind == 1) sim_undo_push(s, sqlite3_mprintf("DELETE FROM \"%w\" WHERE rowid = %lld", d->tbl, (long long)a->rowid));
            else {
                mcdc_buf u = {0};
                /* computed columns compute again: never written back */
                if (kind == 3) {
                    mcdc_buf_printf(&u, NULL, "INSERT INTO \"%s\"(rowid", d->tbl);
                    for (int k = 0; k < d->ncols; k++)
                        if (!d->cols[k].computed) mcdc_buf_printf(&u, NULL, ", \"%s\"", d->cols[k].name);
                    mcdc_buf_printf(&u, NULL, ") VALUES (%lld", (long long)b->rowid);
                    for (int k = 0; k < d->ncols; k++) {
                        if (d->cols[k].computed) continue;
                        char *l = sim_value_literal(b->v[k]);
                        mcdc_buf_printf(&u, NULL, ", %s", l ? l : "NULL");
                        sqlite3_free(l);
                    }
                    mcdc_buf_append_str(&u, ")", NULL);
                } else {
                    mcdc_buf_printf(&u, NULL, "UPDATE \"%s\" SET ", d->tbl);
                    int nset = 0;
                    for (int k = 0; k < d->ncols; k++) {
                        if (d->cols[k].computed) continue;
                        char *l = sim_value_literal(b->v[k]);
                        mcdc_buf_printf(&u, NULL, "%s\"%s\" = %s", nset++ ? ", " : "", d->cols[k].name, l ? l : "NULL");
                        sqlite3_free(l);
                    }
                    mcdc_buf_printf(&u, NULL, " WHERE rowid = %lld", (long long)b->rowid);
                }
                if (mcdc_buf_cstr(&u, NULL) == MCDC_OK) sim_undo_push(s, sqlite3_mprintf("%s", (const char *)u.data));
                mcdc_buf_free(&u);
            }
        }
        if (!cdc) continue;
        if (kind == 1) {
            rc = sim_cdc_capture_row(s, d->tbl, d->names, d->ncols, 2, a, NULL, sim_lsn_next(s->db), ++s->cmd_id, err);
        } else if (kind == 3) {
            rc = sim_cdc_capture_row(s, d->tbl, d->names, d->ncols, 1, b, NULL, sim_lsn_next(s->db), ++s->cmd_id, err);
        } else {
            bool key_changed = false;
            for (int k = 0; k < d->ncols; k++)
                if (d->cols[k].pk_ordinal > 0 && !val_eq(b->v[k], a->v[k])) key_changed = true;
            if (key_changed) {
                rc = sim_cdc_capture_row(s, d->tbl, d->names, d->ncols, 1, b, NULL, sim_lsn_next(s->db), ++s->cmd_id, err);
                if (rc == MCDC_OK)
                    rc = sim_cdc_capture_row(s, d->tbl, d->names, d->ncols, 2, a, NULL, sim_lsn_next(s->db), ++s->cmd_id, err);
            } else {
                uint64_t seq = sim_lsn_next(s->db);
                int cmd = ++s->cmd_id;
                rc = sim_cdc_capture_row(s, d->tbl, d->names, d->ncols, 3, b, set_cols, seq, cmd, err);
                if (rc == MCDC_OK) rc = sim_cdc_capture_row(s, d->tbl, d->names, d->ncols, 4, a, set_cols, seq, cmd, err);
            }
        }
    }
    return rc;
}

/* Under mu, the write committed to SQLite: the rows' states before it,
 * for SNAPSHOT readers (sim_snapshot.c): the before-images of updated and
 * deleted rows (taken from before), "no row" for inserted ones. */
static int dml_keep_versions(sim_session *s, const dml *d, int kind, img_set *before, const img_set *after,
                             bool implicit, mcdc_error *err) {
    if (!sim_snap_versioning(s)) return MCDC_OK;
    int rc = MCDC_OK;
    const img_set *rows = kind == 1 ? after : before;
    for (int r = 0; r < rows->n && rc == MCDC_OK; r++) {
        sqlite3_value **vals = NULL;
        if (kind != 1) {
            vals = before->rows[r].v;
            before->rows[r].v = NULL; /* the version store takes them */
        }
        rc = sim_snap_record(s, d->tbl, rows->rows[r].rowid, vals, d->ncols, err);
    }
    if (implicit) sim_snap_stmt_commit(s); /* an autocommit statement: committed now */
    return rc;
}

static bool dml_heap(const dml *d) {
    for (int k = 0; k < d->ncols; k++)
        if (d->cols[k].pk_ordinal > 0) return false;
    return true;
}

#define DML_BLOCKED 1 /* dml_exec_once: another open transaction holds a row */
#define DML_STALE 2   /* dml_exec_once: a DDL changed the schema since dml_target */
#define DML_STALE_TRIES 100 /* compiles of one statement before it fails */

static int dml_exec_once(sim_stmt *x, dml *d, int kind, const char *before_sql, const char *write_sql,
                         const bool *set_cols, int64_t *count, sim_tran_ref *blocked, mcdc_error *err);

/* Runs the write part of a DML. A write of a row that another session's
 * open transaction changed, or one that hits a duplicate key in a table such
 * a transaction changed, waits for that transaction to end, then runs again. */
static int dml_exec(sim_stmt *x, dml *d, int kind, const char *before_sql, const char *write_sql, const bool *set_cols,
                    int64_t *count, mcdc_error *err) {
    for (;;) {
        sim_tran_ref blocked = {NULL, 0};
        int rc = dml_exec_once(x, d, kind, before_sql, write_sql, set_cols, count, &blocked, err);
        if (rc != DML_BLOCKED) return rc;
        rc = sim_wait_while(x, sim_tran_still_open, &blocked, err);
        if (rc != MCDC_OK) return rc;
    }
}

/* Runs the write part of a DML under the mutex in one SQLite transaction.
 * before_sql may be NULL; write_sql has RETURNING rowid, cols. */
static int dml_exec_once(sim_stmt *x, dml *d, int kind, const char *before_sql, const char *write_sql,
                         const bool *set_cols, int64_t *count, sim_tran_ref *blocked, mcdc_error *err) {
    sim_session *s = x->s;
    sim_server *srv = s->srv;
    img_set before = {0}, after = {0};
    *count = 0;
    pthread_mutex_lock(&srv->mu);
    if (s->tran_db && s->tran_db != s->db) {
        pthread_mutex_unlock(&srv->mu);
        return sim_err(err, 50000, "the simulator does not support a transaction across databases ('%s' and '%s')",
                       s->tran_db->name, s->db->name);
    }
    sqlite3 *w = s->db->w;
    if (sim_schema_version(w) != d->schema_ver) { pthread_mutex_unlock(&srv->mu); return DML_STALE; }
    /* another open transaction's DDL on the table holds its schema lock */
    if ((blocked->s = sim_ddl_blocker(s, d->tbl)) != NULL) {
        blocked->descriptor = blocked->s->descriptor;
        pthread_mutex_unlock(&srv->mu);
        return DML_BLOCKED;
    }
    bool implicit = s->trancount == 0;
    int rc = sim_sql(w, err, "BEGIN IMMEDIATE");
    if (rc != MCDC_OK) { pthread_mutex_unlock(&srv->mu); return rc; }
    bool was_logged = s->tran_logged;
    uint64_t lsn_save = s->db->lsn;
    int cmd_save = s->cmd_id;
    bool conflict = false;
    sqlite3_stmt *st = NULL;
    if (before_sql) {
        if (sqlite3_prepare_v2(w, before_sql, -1, &st, NULL) != SQLITE_OK) rc = sim_sqlite_err(w, SQLITE_ERROR, err);
        if (rc == MCDC_OK) rc = sim_bind_vars(s, st, err);
        if (rc == MCDC_OK) rc = img_collect(&before, w, st, d->ncols, err);
        sqlite3_finalize(st);
        st = NULL;
        for (int r = 0; r < before.n && rc == MCDC_OK && !blocked->s; r++)
            blocked->s = sim_write_blocker(s, d->tbl, before.rows[r].rowid);
        if (blocked->s) rc = DML_BLOCKED;
        /* under SNAPSHOT: a row another transaction changed since the
         * snapshot started is an update conflict */
        for (int r = 0; r < before.n && rc == MCDC_OK; r++) {
            rc = sim_snap_conflict(s, d->tbl, before.rows[r].rowid, dml_heap(d), err);
            if (rc != MCDC_OK) conflict = true;
        }
    }
    if (rc == MCDC_OK) {
        if (sqlite3_prepare_v2(w, write_sql, -1, &st, NULL) != SQLITE_OK) rc = sim_sqlite_err(w, SQLITE_ERROR, err);
        if (rc == MCDC_OK) rc = sim_bind_vars(s, st, err);
        if (rc == MCDC_OK) rc = img_collect(&after, w, st, d->ncols, err);
        sqlite3_finalize(st);
        /* a duplicate key may be another open transaction's row */
        if (rc != MCDC_OK && err && err->server_number == 2627 && (blocked->s = sim_write_blocker(s, d->tbl, -1)) != NULL) {
            mcdc_error_clear(err);
            rc = DML_BLOCKED;
        }
    }
    if (blocked->s) blocked->descriptor = blocked->s->descriptor;
    int64_t n = after.n;
    if (rc == MCDC_OK && n > 0) {
        sim_tran_log_start(s);
        rc = dml_log(x, d, kind, &before, &after, set_cols, err);
        int ti = rc == MCDC_OK && !implicit ? sim_tran_touch(s, d->tbl) : -1;
        const img_set *rows = kind == 1 ? &after : &before;
        for (int r = 0; r < rows->n && ti >= 0; r++) sim_tran_touch_row(s, ti, rows->rows[r].rowid);
    }
    if (rc == MCDC_OK && implicit) rc = sim_tran_commit(s, err);
    if (rc == MCDC_OK && !implicit) rc = sim_db_state_put(s->db, "lsn", (int64_t)s->db->lsn);
    if (rc == MCDC_OK) rc = sim_sql(w, err, "COMMIT");
    bool rolled = false;
    if (rc != MCDC_OK) {
        sqlite3_exec(w, "ROLLBACK", NULL, NULL, NULL);
        s->db->lsn = lsn_save > s->db->lsn ? lsn_save : s->db->lsn; /* LSNs never go back */
        s->cmd_id = cmd_save;
        if (!was_logged) s->tran_logged = false;
        /* an update conflict ends the snapshot transaction, as in SQL Server */
        if (conflict && s->trancount > 0) {
            sim_tran_rollback(s);
            rolled = true;
        } else if (implicit) sim_tran_reset(s);
    } else {
        /* committed to SQLite: a version that cannot be kept (out of
         * memory) is logged, the statement stands */
        mcdc_error ve = MCDC_ERROR_INIT;
        if (n > 0 && dml_keep_versions(s, d, kind, &before, &after, implicit, &ve) != MCDC_OK)
            mcdc_log(MCDC_LOG_ERROR, "sim: row versions of %s lost: %s", d->tbl, ve.message);
        if (implicit) sim_tran_reset(s);
    }
    pthread_mutex_unlock(&srv->mu);
    if (rolled && x->sink->transaction && x->sink->transaction(x->sink->ctx, 10, s->descriptor)) x->aborted = true;
    img_free(&before);
    img_free(&after);
    *count = n;
    return rc;
}

static int insert_once(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    i++;
    if (i < end && tsql_tok_is(&t[i], "INTO")) i++;
    dml d = {0};
    int rc = dml_target(x, t, &i, end, &d, err);
    int tcol[MCDC_COLUMNS_MAX];
    int nt = 0;
    mcdc_buf sql = {0}, ex = {0};
    if (rc == MCDC_OK && i < end && tsql_tok_op(&t[i], "(")) {
        i++;
        while (i < end && !tsql_tok_op(&t[i], ")") && rc == MCDC_OK) {
            char c[SIM_NAME_MAX];
            if (tsql_tok_op(&t[i], ",")) { i++; continue; }
            if (sim_tok_ident(&t[i], c, sizeof c) != 0) { rc = sim_syntax_err(err, t, i, end); break; }
            int ci = col_index(&d, c);
            if (ci < 0) { rc = sim_err(err, 207, "Invalid column name '%s'.", c); break; }
            if (d.cols[ci].computed) { rc = computed_err(err, d.cols[ci].name); break; }
            if (nt < MCDC_COLUMNS_MAX) tcol[nt++] = ci;
            i++;
        }
        i++;
    } else if (rc == MCDC_OK) { /* every column but the computed ones */
        for (int k = 0; k < d.ncols && k < MCDC_COLUMNS_MAX; k++)
            if (!d.cols[k].computed) tcol[nt++] = k;
    }
    if (rc == MCDC_OK) {
        if (i < end && tsql_tok_is(&t[i], "VALUES")) {
            i++;
            mcdc_buf_printf(&sql, NULL, "INSERT INTO \"%s\"(", d.tbl);
            for (int k = 0; k < nt; k++) mcdc_buf_printf(&sql, NULL, "%s\"%s\"", k ? ", " : "", d.cols[tcol[k]].name);
            mcdc_buf_append_str(&sql, ") VALUES ", NULL);
            int nrows = 0;
            while (i < end && rc == MCDC_OK) {
                if (tsql_tok_op(&t[i], ",")) { i++; continue; }
                if (!tsql_tok_op(&t[i], "(")) { rc = sim_syntax_err(err, t, i, end); break; }
                int dd = 0, close = -1;
                for (int k = i; k < end; k++) {
                    if (tsql_tok_op(&t[k], "(")) dd++;
                    else if (tsql_tok_op(&t[k], ")") && --dd == 0) { close = k; break; }
                }
                if (close < 0) { rc = sim_syntax_err(err, t, end, end); break; }
                mcdc_buf_printf(&sql, NULL, "%s(", nrows ? ", " : "");
                int a = i + 1, v = 0, d2 = 0;
                for (int k = i + 1; k <= close && rc == MCDC_OK; k++) {
                    if (k < close && tsql_tok_op(&t[k], "(")) d2++;
                    else if (k < close && tsql_tok_op(&t[k], ")")) d2--;
                    if (k == close || (d2 == 0 && tsql_tok_op(&t[k], ","))) {
                        if (v >= nt) {
                            rc = sim_err(err, 110, "There are more columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.");
                            break;
                        }
                        mcdc_buf_reset(&ex);
                        rc = value_expr(x, t, a, k, &d.cols[tcol[v]].type, &ex, err);
                        if (rc != MCDC_OK) break;
                        char tn[64];
                        sim_type_format(&d.cols[tcol[v]].type, tn, sizeof tn);
                        mcdc_buf_printf(&sql, NULL, "%ssim_convert((%s), '%s', NULL)", v ? ", " : "", (const char *)ex.data, tn);
                        v++;
                        a = k + 1;
                    }
                }
                if (rc == MCDC_OK && v != nt)
                    rc = sim_err(err, 109, "There are more columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.");
                mcdc_buf_append_str(&sql, ")", NULL);
                nrows++;
                i = close + 1;
            }
        } else if (i < end && tsql_tok_is(&t[i], "SELECT")) {
            mcdc_buf_reset(&ex);
            rc = sim_xlate_expr(x, s->rd, t, i, end, &ex, err);
            if (rc == MCDC_OK) {
                mcdc_buf_append_str(&sql, "WITH __q(", NULL);
                for (int k = 0; k < nt; k++) mcdc_buf_printf(&sql, NULL, "%s__c%d", k ? ", " : "", k);
                mcdc_buf_printf(&sql, NULL, ") AS (%s) INSERT INTO \"%s\"(", (const char *)ex.data, d.tbl);
                for (int k = 0; k < nt; k++) mcdc_buf_printf(&sql, NULL, "%s\"%s\"", k ? ", " : "", d.cols[tcol[k]].name);
                mcdc_buf_append_str(&sql, ") SELECT ", NULL);
                for (int k = 0; k < nt; k++) {
                    char tn[64];
                    sim_type_format(&d.cols[tcol[k]].type, tn, sizeof tn);
                    mcdc_buf_printf(&sql, NULL, "%ssim_convert(__c%d, '%s', NULL)", k ? ", " : "", k, tn);
                }
                mcdc_buf_append_str(&sql, " FROM __q WHERE 1", NULL);
            }
        } else if (i + 1 < end && tsql_tok_is(&t[i], "DEFAULT") && tsql_tok_is(&t[i + 1], "VALUES")) {
            mcdc_buf_printf(&sql, NULL, "INSERT INTO \"%s\" DEFAULT VALUES", d.tbl);
        } else rc = sim_syntax_err(err, t, i, end);
    }
    int64_t count = 0;
    if (rc == MCDC_OK) {
        mcdc_buf_append_str(&sql, " RETURNING rowid", NULL);
        append_cols(&sql, &d);
        mcdc_buf_cstr(&sql, NULL);
        bool own = false;
        rc = sim_snap_write_begin(x, d.tbl, &own, err);
        if (rc == MCDC_OK) rc = dml_exec(x, &d, 1, NULL, (const char *)sql.data, NULL, &count, err);
        sim_snap_write_end(s, own);
    }
    if (rc == MCDC_OK) {
        s->rowcount = count;
        sim_send_done(x, count, true, false);
    }
    mcdc_buf_free(&sql);
    mcdc_buf_free(&ex);
    dml_free(&d);
    return rc;
}

static int find_kw(const tsql_tok *t, int a, int end, const char *kw) {
    int d = 0;
    for (int k = a; k < end; k++) {
        if (tsql_tok_op(&t[k], "(")) d++;
        else if (tsql_tok_op(&t[k], ")")) d--;
        else if (d == 0 && tsql_tok_is(&t[k], kw)) return k;
    }
    return end;
}

static int update_delete_once(sim_stmt *x, const tsql_tok *t, int i, int end, bool is_update, mcdc_error *err) {
    sim_session *s = x->s;
    i++;
    if (!is_update && i < end && tsql_tok_is(&t[i], "FROM")) i++;
    if (i < end && tsql_tok_is(&t[i], "TOP")) return sim_err(err, 50000, "UPDATE/DELETE TOP is not supported by the simulator");
    dml d = {0};
    int rc = dml_target(x, t, &i, end, &d, err);
    if (rc != MCDC_OK && err && err->server_number == 229) {
        /* message names the right verb */
        const char *dot = strchr(d.tbl, '.');
        sim_err(err, 229, "The %s permission was denied on the object '%s', database '%s', schema '%.*s'.",
                is_update ? "UPDATE" : "DELETE", d.short_name, s->db->name, dot ? (int)(dot - d.tbl) : 3, d.tbl);
    }
    mcdc_buf where = {0}, sql = {0}, before = {0}, ex = {0};
    bool *set_cols = NULL;
    int wpos = find_kw(t, i, end, "WHERE");
    if (rc == MCDC_OK && find_kw(t, i, end, "FROM") < wpos)
        rc = sim_err(err, 50000, "UPDATE/DELETE with FROM is not supported by the simulator");
    if (rc == MCDC_OK && wpos < end) rc = sim_xlate_expr(x, s->rd, t, wpos + 1, end, &where, err);
    if (rc == MCDC_OK) {
        set_cols = mcdc_calloc((size_t)d.ncols + 1, sizeof *set_cols);
        if (!set_cols) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (rc == MCDC_OK && is_update) {
        if (i >= end || !tsql_tok_is(&t[i], "SET")) rc = sim_syntax_err(err, t, i, end);
        else i++;
        mcdc_buf_printf(&sql, NULL, "UPDATE \"%s\" AS \"%s\" SET ", d.tbl, d.short_name);
        int nset = 0;
        while (rc == MCDC_OK && i < wpos) {
            char parts[4][MCDC_IDENT_BYTES_MAX];
            int np = xl_name_parts(t, &i, wpos, parts);
            if (np == 0 || i >= wpos || !tsql_tok_op(&t[i], "=")) { rc = sim_syntax_err(err, t, i, end); break; }
            int ci = col_index(&d, parts[np - 1]);
            if (ci < 0) { rc = sim_err(err, 207, "Invalid column name '%s'.", parts[np - 1]); break; }
            if (d.cols[ci].computed) { rc = computed_err(err, d.cols[ci].name); break; }
            set_cols[ci] = true;
            i++;
            int a = i, dd = 0;
            while (i < wpos) {
                if (tsql_tok_op(&t[i], "(")) dd++;
                else if (tsql_tok_op(&t[i], ")")) dd--;
                else if (dd == 0 && tsql_tok_op(&t[i], ",")) break;
                i++;
            }
            mcdc_buf_reset(&ex);
            rc = value_expr(x, t, a, i, &d.cols[ci].type, &ex, err);
            if (rc != MCDC_OK) break;
            char tn[64];
            sim_type_format(&d.cols[ci].type, tn, sizeof tn);
            mcdc_buf_printf(&sql, NULL, "%s\"%s\" = sim_convert((%s), '%s', NULL)", nset ? ", " : "", d.cols[ci].name,
                            (const char *)ex.data, tn);
            nset++;
            if (i < wpos && tsql_tok_op(&t[i], ",")) i++;
        }
        if (rc == MCDC_OK && nset == 0) rc = sim_syntax_err(err, t, i, end);
    } else if (rc == MCDC_OK) {
        if (i < wpos) rc = sim_syntax_err(err, t, i, end);
        mcdc_buf_printf(&sql, NULL, "DELETE FROM \"%s\" AS \"%s\"", d.tbl, d.short_name);
    }
    int64_t count = 0;
    if (rc == MCDC_OK) {
        if (wpos < end) mcdc_buf_printf(&sql, NULL, " WHERE %s", (const char *)where.data);
        mcdc_buf_append_str(&sql, " RETURNING rowid", NULL);
        append_cols(&sql, &d);
        mcdc_buf_cstr(&sql, NULL);
        mcdc_buf_append_str(&before, "SELECT rowid", NULL);
        append_cols(&before, &d);
        mcdc_buf_printf(&before, NULL, " FROM \"%s\" AS \"%s\"", d.tbl, d.short_name);
        if (wpos < end) mcdc_buf_printf(&before, NULL, " WHERE %s", (const char *)where.data);
        mcdc_buf_cstr(&before, NULL);
        bool own = false;
        rc = sim_snap_write_begin(x, d.tbl, &own, err);
        if (rc == MCDC_OK)
            rc = dml_exec(x, &d, is_update ? 2 : 3, (const char *)before.data, (const char *)sql.data, set_cols, &count, err);
        sim_snap_write_end(s, own);
    }
    if (rc == MCDC_OK) {
        s->rowcount = count;
        sim_send_done(x, count, true, false);
    }
    mcdc_free(set_cols);
    mcdc_buf_free(&where);
    mcdc_buf_free(&sql);
    mcdc_buf_free(&before);
    mcdc_buf_free(&ex);
    dml_free(&d);
    return rc;
}

/* Runs a DML statement (is_update: NULL for INSERT), compiled again while
 * DDL keeps changing the schema between its compile and its run. */
static int dml_run(sim_stmt *x, const tsql_tok *t, int i, int end, const bool *is_update, mcdc_error *err) {
    for (int n = 0; n < DML_STALE_TRIES; n++) {
        int rc = is_update ? update_delete_once(x, t, i, end, *is_update, err) : insert_once(x, t, i, end, err);
        if (rc != DML_STALE) return rc;
    }
    return sim_err(err, 50000, "the statement was compiled %d times and a DDL changed the schema each time before it ran",
                   DML_STALE_TRIES);
}

int sim_do_insert(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    return dml_run(x, t, i, end, NULL, err);
}

int sim_do_update_delete(sim_stmt *x, const tsql_tok *t, int i, int end, bool is_update, mcdc_error *err) {
    return dml_run(x, t, i, end, &is_update, err);
}
