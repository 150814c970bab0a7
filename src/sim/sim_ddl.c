/*
 * sim_ddl.c - DDL and security statements: CREATE TABLE/DATABASE/
 * LOGIN/USER, ALTER TABLE ADD/DROP COLUMN, DROP TABLE/DATABASE,
 * GRANT/REVOKE SELECT.
 */
#include "sim_engine_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ---- DDL ------------------------------------------------------------------ */
static int next_object_id(sim_db *d) {
    int64_t v = sim_state_get(d->w, "object_id", 245575913) + 16;
    sim_db_state_put(d, "object_id", v);
    return (int)v;
}

/* SQL Server never gives a column_id twice (sys.tables' max_column_id_used):
 * a column dropped and added back is another column, which the capture
 * instances that captured the first one do not capture. */
static int set_max_column_id(sim_db *d, const char *tbl, int v, mcdc_error *err) {
    char k[SIM_NAME_MAX * 2 + 16];
    snprintf(k, sizeof k, "max_column_id:%s", tbl);
    int rc = sim_db_state_put(d, k, v);
    if (rc != MCDC_OK) return sim_sqlite_err(d->w, SQLITE_ERROR, err);
    return MCDC_OK;
}

static int next_column_id(sim_db *d, const char *tbl) {
    char k[SIM_NAME_MAX * 2 + 16];
    snprintf(k, sizeof k, "max_column_id:%s", tbl);
    int64_t used = sim_state_get(d->w, k, 0);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->w, "SELECT coalesce(max(column_id), 0) FROM __sim_columns WHERE tbl = ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > used) used = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return (int)used + 1;
}

/* Parses one column definition at toks[*i]: name type [NULL|NOT NULL|PRIMARY KEY|UNIQUE|...],
 * or a computed column: name AS (expr) [PERSISTED [NOT NULL]]. */
static int parse_col_def(const tsql_tok *t, int *ip, int end, sim_col_def *c, bool *col_pk, bool *col_uq, mcdc_error *err) {
    int i = *ip;
    char ttext[64];
    memset(c, 0, sizeof *c);
    if (sim_tok_ident(&t[i], c->name, sizeof c->name) != 0) return sim_syntax_err(err, t, i, end);
    i++;
    c->nullable = true;
    *col_pk = *col_uq = false;
    if (i < end && tsql_tok_is(&t[i], "AS")) {
        i++;
        c->computed = true;
        c->expr_a = i;
        int d = 0;
        for (; i < end; i++) { /* to the ',' or ')' that ends the definition */
            if (tsql_tok_op(&t[i], "(")) d++;
            else if (tsql_tok_op(&t[i], ")")) { if (d == 0) break; d--; }
            else if (d == 0 && (tsql_tok_op(&t[i], ",") || tsql_tok_is(&t[i], "PERSISTED") || tsql_tok_is(&t[i], "NOT") ||
                                tsql_tok_is(&t[i], "CONSTRAINT") || tsql_tok_is(&t[i], "PRIMARY") || tsql_tok_is(&t[i], "UNIQUE")))
                break;
        }
        c->expr_b = i;
        if (c->expr_b == c->expr_a) return sim_syntax_err(err, t, i, end);
        if (i < end && tsql_tok_is(&t[i], "PERSISTED")) { c->persisted = true; i++; }
        if (i + 1 < end && tsql_tok_is(&t[i], "NOT") && tsql_tok_is(&t[i + 1], "NULL")) {
            if (!c->persisted)
                return sim_err(err, 8183, "Only UNIQUE or PRIMARY KEY constraints can be created on computed columns, while CHECK, FOREIGN KEY, and NOT NULL constraints require that computed columns be persisted.");
            c->nullable = false;
            i += 2;
        }
        if (i < end && (tsql_tok_is(&t[i], "PRIMARY") || tsql_tok_is(&t[i], "UNIQUE") || tsql_tok_is(&t[i], "CONSTRAINT")))
            return sim_err(err, 50000, "constraints on computed columns are not supported by the simulator (column '%s')", c->name);
        *ip = i;
        return MCDC_OK;
    }
    if (!sim_parse_type_at(t, &i, end, &c->type, ttext, sizeof ttext))
        return sim_err(err, 2715, "Column, parameter, or variable #1: Cannot find data type %s.", ttext);
    while (i < end && !tsql_tok_op(&t[i], ",") && !tsql_tok_op(&t[i], ")")) {
        if (tsql_tok_is(&t[i], "NOT") && i + 1 < end && tsql_tok_is(&t[i + 1], "NULL")) { c->nullable = false; i += 2; continue; }
        if (tsql_tok_is(&t[i], "PRIMARY")) { *col_pk = true; c->nullable = false; i += 2; continue; }
        if (tsql_tok_is(&t[i], "UNIQUE")) { *col_uq = true; i++; continue; }
        if (tsql_tok_is(&t[i], "IDENTITY") || tsql_tok_is(&t[i], "DEFAULT") || tsql_tok_is(&t[i], "CHECK")) {
            i++;
            if (i < end && tsql_tok_op(&t[i], "(")) {
                int d = 0;
                for (; i < end; i++) {
                    if (tsql_tok_op(&t[i], "(")) d++;
                    else if (tsql_tok_op(&t[i], ")") && --d == 0) { i++; break; }
                }
            } else if (i < end) i++;
            continue;
        }
        i++; /* NULL, CLUSTERED, COLLATE x, CONSTRAINT name ... */
    }
    *ip = i;
    return MCDC_OK;
}

/* ---- computed columns ------------------------------------------------------ */
/* The translator's view of a table being defined: its columns so far. */
typedef struct comp_env {
    sqlite3 *w;
    const char *tbl;
    const sim_col_def *cols;
    int ncols;
} comp_env;

static bool comp_table_exists(void *ctx, const char *name) {
    comp_env *e = ctx;
    return mcdc_str_ieq(name, e->tbl) || sim_table_exists(e->w, name);
}

static bool comp_col_type(void *ctx, const char *tbl, const char *col, sim_type *out, bool *nul) {
    comp_env *e = ctx;
    if (!mcdc_str_ieq(tbl, e->tbl)) return false;
    for (int k = 0; k < e->ncols; k++)
        if (!e->cols[k].computed && mcdc_str_ieq(e->cols[k].name, col)) {
            *out = e->cols[k].type;
            if (nul) *nul = e->cols[k].nullable;
            return true;
        }
    return false;
}

/* The SQLite column of computed column c ([expr_a, expr_b) of t) of table
 * tbl whose other columns are cols: its type is the expression's (SQL
 * Server's rules, as the translator types a select item), stored as
 * GENERATED ALWAYS AS the translated expression converted to that type
 * (VIRTUAL; STORED when PERSISTED and the table is new). */
static int computed_decl(sqlite3 *w, const char *tbl, const sim_col_def *cols, int ncols, sim_col_def *c,
                         const tsql_tok *t, bool stored, mcdc_buf *decl, mcdc_error *err) {
    for (int k = c->expr_a; k < c->expr_b; k++) {
        if (t[k].t == TK_VAR || t[k].t == TK_SYSVAR)
            return sim_err(err, 128, "The name \"%.*s\" is not permitted in this context. Valid expressions are constants, constant expressions, and (in some contexts) variables. Column names are not permitted.",
                           t[k].n, t[k].s);
        if (t[k].t != TK_IDENT && t[k].t != TK_QIDENT) continue;
        char nm[SIM_NAME_MAX];
        tsql_tok_text(&t[k], nm, sizeof nm);
        for (int q = 0; q < ncols; q++)
            if (cols[q].computed && &cols[q] != c && mcdc_str_ieq(cols[q].name, nm))
                return sim_err(err, 1759, "Computed column '%s' in table '%s' is not allowed to be used in another computed-column definition.",
                               nm, strchr(tbl, '.') ? strchr(tbl, '.') + 1 : tbl);
    }
    comp_env ce = {w, tbl, cols, ncols};
    xl_env env;
    memset(&env, 0, sizeof env);
    env.ctx = &ce;
    env.table_exists = comp_table_exists;
    env.col_type = comp_col_type;
    env.db_name = "";
    env.user_name = "dbo";
    env.is_admin = true;
    env.product_major = 16;
    xl_result *res = mcdc_malloc(sizeof *res);
    mcdc_buf ex = {0}, q = {0};
    if (!res) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = tsql_xlate(&env, t, c->expr_a, c->expr_b, &ex, res, err);
    /* its type: the expression as a select item over the table */
    const char *ea = t[c->expr_a].s, *eb = t[c->expr_b - 1].s + t[c->expr_b - 1].n;
    const char *dot = strchr(tbl, '.');
    if (rc == MCDC_OK)
        rc = mcdc_buf_printf(&q, err, "SELECT %.*s FROM [%.*s].[%s]", (int)(eb - ea), ea, dot ? (int)(dot - tbl) : 3,
                             dot ? tbl : "dbo", dot ? dot + 1 : tbl);
    tsql_tok *qt = NULL;
    int nq = 0;
    if (rc == MCDC_OK) rc = tsql_lex(&qt, &nq, (const char *)q.data, q.len, err);
    mcdc_buf sel = {0};
    if (rc == MCDC_OK) rc = tsql_xlate(&env, qt, 0, nq, &sel, res, err);
    if (rc == MCDC_OK && (res->nitems < 1 || !res->items[0].known))
        rc = sim_err(err, 50000, "the simulator cannot tell the type of computed column '%s': write its expression as CAST(... AS <type>)", c->name);
    if (rc == MCDC_OK) {
        c->type = res->items[0].type;
        if (c->type.id == SIM_T_VARCHAR || c->type.id == SIM_T_NVARCHAR || c->type.id == SIM_T_VARBINARY)
            if (c->type.length == 0) c->type.length = -1;
        char tn[64];
        sim_type_format(&c->type, tn, sizeof tn);
        rc = mcdc_buf_printf(decl, err, "\"%s\" %s GENERATED ALWAYS AS (sim_convert((%s), '%s', NULL)) %s", c->name,
                             sim_type_decl(&c->type), ex.data ? (const char *)ex.data : "NULL", tn, stored ? "STORED" : "VIRTUAL");
    }
    mcdc_free(qt);
    mcdc_free(res);
    mcdc_buf_free(&ex);
    mcdc_buf_free(&q);
    mcdc_buf_free(&sel);
    return rc;
}

static int catalog_add_computed(sim_db *d, const char *tbl, const sim_col_def *c, const tsql_tok *t, mcdc_error *err) {
    const char *ea = t[c->expr_a].s, *eb = t[c->expr_b - 1].s + t[c->expr_b - 1].n;
    char *def = mcdc_strndup(ea, (size_t)(eb - ea));
    if (!def) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    /* sys.computed_columns shows the definition in parentheses */
    int rc = sim_sql(d->w, err, "INSERT INTO __sim_computed VALUES (%Q, %Q, %s%Q%s, %d)", tbl, c->name,
                     def[0] == '(' ? "" : "'(' || ", def, def[0] == '(' ? "" : " || ')'", c->persisted ? 1 : 0);
    mcdc_free(def);
    return rc;
}

static int catalog_add_col(sim_db *d, const char *tbl, int column_id, const sim_col_def *c, mcdc_error *err) {
    char tn[64];
    sim_type_format(&c->type, tn, sizeof tn);
    return sim_sql(d->w, err, "INSERT INTO __sim_columns VALUES (%Q, %d, %Q, %Q, %d, %d)", tbl, column_id, c->name, tn,
                   c->nullable ? 1 : 0, c->pk_ordinal);
}

static int create_table(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    char parts[4][MCDC_IDENT_BYTES_MAX], name[SIM_NAME_MAX * 2];
    int np = xl_name_parts(t, &i, end, parts);
    if (np == 0) return sim_syntax_err(err, t, i, end);
    xl_table_name(parts, np, name, sizeof name);
    const char *schema = np >= 2 && parts[np - 2][0] ? parts[np - 2] : "dbo";
    if (i >= end || !tsql_tok_op(&t[i], "(")) return sim_syntax_err(err, t, i, end);
    i++;
    sim_col_def *cols = mcdc_calloc(MCDC_COLUMNS_MAX, sizeof *cols);
    if (!cols) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    char pk[64][SIM_NAME_MAX];
    int npk = 0, ncol = 0, rc = MCDC_OK;
    mcdc_buf ddl = {0};
    char uniq[2048] = "";
    while (i < end && rc == MCDC_OK) {
        if (tsql_tok_op(&t[i], ")")) { i++; break; }
        if (tsql_tok_op(&t[i], ",")) { i++; continue; }
        if (tsql_tok_is(&t[i], "CONSTRAINT")) i += 2;
        if (i < end && (tsql_tok_is(&t[i], "PRIMARY") || tsql_tok_is(&t[i], "UNIQUE"))) {
            bool is_pk = tsql_tok_is(&t[i], "PRIMARY");
            i += is_pk ? 2 : 1;
            while (i < end && (tsql_tok_is(&t[i], "CLUSTERED") || tsql_tok_is(&t[i], "NONCLUSTERED"))) i++;
            if (i >= end || !tsql_tok_op(&t[i], "(")) { rc = sim_syntax_err(err, t, i, end); break; }
            i++;
            char list[1024] = "";
            while (i < end && !tsql_tok_op(&t[i], ")")) {
                char c[SIM_NAME_MAX];
                if (sim_tok_ident(&t[i], c, sizeof c) == 0 && !tsql_tok_is(&t[i], "ASC") && !tsql_tok_is(&t[i], "DESC")) {
                    if (is_pk && npk < 64) snprintf(pk[npk++], SIM_NAME_MAX, "%s", c);
                    size_t l = strlen(list);
                    snprintf(list + l, sizeof list - l, "%s\"%s\"", l ? "," : "", c);
                }
                i++;
            }
            i++;
            if (!is_pk) {
                size_t l = strlen(uniq);
                snprintf(uniq + l, sizeof uniq - l, ", UNIQUE(%s)", list);
            }
            continue;
        }
        if (ncol >= MCDC_COLUMNS_MAX) { rc = mcdc_error_set(err, MCDC_E_LIMIT, "too many columns"); break; }
        bool cpk, cuq;
        rc = parse_col_def(t, &i, end, &cols[ncol], &cpk, &cuq, err);
        if (rc != MCDC_OK) break;
        if (cpk && npk < 64) snprintf(pk[npk++], SIM_NAME_MAX, "%s", cols[ncol].name);
        if (cuq) {
            size_t l = strlen(uniq);
            snprintf(uniq + l, sizeof uniq - l, ", UNIQUE(\"%s\")", cols[ncol].name);
        }
        ncol++;
    }
    if (rc == MCDC_OK && ncol == 0) rc = sim_syntax_err(err, t, i, end);
    if (rc == MCDC_OK) {
        mcdc_buf_printf(&ddl, NULL, "CREATE TABLE \"%s\"(", name);
        for (int k = 0; k < ncol && rc == MCDC_OK; k++) {
            for (int p = 0; p < npk; p++)
                if (mcdc_str_ieq(pk[p], cols[k].name)) { cols[k].pk_ordinal = p + 1; cols[k].nullable = false; }
            if (cols[k].computed && cols[k].pk_ordinal)
                rc = sim_err(err, 50000, "a computed column in a PRIMARY KEY is not supported by the simulator ('%s')", cols[k].name);
            else if (cols[k].computed) {
                if (k) mcdc_buf_append_str(&ddl, ", ", NULL);
                rc = computed_decl(s->rd, name, cols, ncol, &cols[k], t, cols[k].persisted, &ddl, err);
            } else
                mcdc_buf_printf(&ddl, NULL, "%s\"%s\" %s%s", k ? ", " : "", cols[k].name, sim_type_decl(&cols[k].type),
                                cols[k].nullable ? "" : " NOT NULL");
        }
    }
    if (rc == MCDC_OK) {
        if (npk) {
            mcdc_buf_append_str(&ddl, ", PRIMARY KEY(", NULL);
            for (int k = 0; k < npk; k++) mcdc_buf_printf(&ddl, NULL, "%s\"%s\"", k ? "," : "", pk[k]);
            mcdc_buf_append_str(&ddl, ")", NULL);
        }
        mcdc_buf_printf(&ddl, NULL, "%s)", uniq);
        mcdc_buf_cstr(&ddl, NULL);
        pthread_mutex_lock(&s->srv->mu);
        if (sim_table_exists(s->db->w, name))
            rc = sim_err(err, 2714, "There is already an object named '%s' in the database.", parts[np - 1]);
        if (rc == MCDC_OK) rc = sim_tran_ddl_join(s, err);
        if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "BEGIN");
        if (rc == MCDC_OK) {
            rc = sim_sql(s->db->w, err, "%s", (const char *)ddl.data);
            for (int k = 0; k < ncol && rc == MCDC_OK; k++) {
                rc = catalog_add_col(s->db, name, k + 1, &cols[k], err);
                if (rc == MCDC_OK && cols[k].computed) rc = catalog_add_computed(s->db, name, &cols[k], t, err);
            }
            if (rc == MCDC_OK) rc = set_max_column_id(s->db, name, ncol, err);
            if (rc == MCDC_OK)
                rc = sim_sql(s->db->w, err, "INSERT INTO __sim_tables VALUES (%Q, %Q, %Q, %d, %Q, 0)", name, schema,
                             parts[np - 1], next_object_id(s->db), "");
            sim_sql(s->db->w, NULL, rc == MCDC_OK ? "COMMIT" : "ROLLBACK");
            if (rc == MCDC_OK) sim_tran_touch(s, name);
            if (rc == MCDC_OK && s->trancount > 0) /* ROLLBACK drops it again */
                sim_undo_push(s, sqlite3_mprintf("DROP TABLE IF EXISTS \"%w\"; DELETE FROM __sim_columns WHERE tbl = %Q;"
                                             " DELETE FROM __sim_tables WHERE name = %Q; DELETE FROM __sim_grants WHERE object = %Q;"
                                             " DELETE FROM __sim_computed WHERE tbl = %Q",
                                             name, name, name, name, name));
        }
        pthread_mutex_unlock(&s->srv->mu);
    }
    mcdc_buf_free(&ddl);
    mcdc_free(cols);
    if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
    return rc;
}

int sim_load_cols(sqlite3 *c, const char *tbl, sim_col_def **out, int *n, mcdc_error *err) {
    sqlite3_stmt *st;
    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(c, "SELECT c.name, c.type, c.nullable, c.pk_ordinal, k.is_persisted FROM __sim_columns c LEFT JOIN"
                              " __sim_computed k ON k.tbl = c.tbl AND k.name = c.name WHERE c.tbl = ? ORDER BY c.column_id",
                           -1, &st, NULL) != SQLITE_OK)
        return sim_sqlite_err(c, SQLITE_ERROR, err);
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    int cap = 16, k = 0;
    sim_col_def *v = mcdc_calloc((size_t)cap, sizeof *v);
    while (v && sqlite3_step(st) == SQLITE_ROW) {
        if (k == cap) {
            sim_col_def *nv = mcdc_realloc(v, (size_t)cap * 2 * sizeof *v);
            if (!nv) { mcdc_free(v); v = NULL; break; }
            v = nv;
            cap *= 2;
        }
        snprintf(v[k].name, sizeof v[k].name, "%s", (const char *)sqlite3_column_text(st, 0));
        const char *ty = (const char *)sqlite3_column_text(st, 1);
        sim_type_parse(&v[k].type, ty, strlen(ty));
        v[k].nullable = sqlite3_column_int(st, 2) != 0;
        v[k].pk_ordinal = sqlite3_column_int(st, 3);
        v[k].computed = sqlite3_column_type(st, 4) != SQLITE_NULL;
        v[k].persisted = v[k].computed && sqlite3_column_int(st, 4) != 0;
        k++;
    }
    sqlite3_finalize(st);
    if (!v) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    *out = v;
    *n = k;
    return MCDC_OK;
}

/* ---- other statements ---------------------------------------------------- */
static int need_admin(sim_stmt *x, const char *what, mcdc_error *err) {
    if (x->s->admin) return MCDC_OK;
    return sim_err(err, 262, "%s permission denied in database '%s'.", what, x->s->db->name);
}

int sim_do_alter_login(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    char name[SIM_NAME_MAX], pw[SIM_PASSWORD_BYTES_MAX + 1] = "";
    int rc = need_admin(x, "ALTER LOGIN", err);
    if (rc != MCDC_OK) return rc;
    int k = i + 2, disable = -1;
    if (k >= end || sim_tok_ident(&t[k], name, sizeof name) != 0) return sim_syntax_err(err, t, k, end);
    k++;
    if (k + 1 == end && tsql_tok_is(&t[k], "DISABLE")) disable = 1;
    else if (k + 1 == end && tsql_tok_is(&t[k], "ENABLE")) disable = 0;
    else if (k + 4 == end && tsql_tok_is(&t[k], "WITH") && tsql_tok_is(&t[k + 1], "PASSWORD") &&
             tsql_tok_op(&t[k + 2], "=") && (t[k + 3].t == TK_STR || t[k + 3].t == TK_NSTR))
        tsql_tok_text(&t[k + 3], pw, sizeof pw);
    else
        return sim_err(err, 50000, "the simulator supports ALTER LOGIN <name> DISABLE, ENABLE or WITH PASSWORD = '...'"
                                   " only");
    sim_server *srv = x->s->srv;
    pthread_mutex_lock(&srv->mu);
    rc = sim_logins_alter(sim_master_db(srv), name, disable, disable < 0 ? pw : NULL, err);
    pthread_mutex_unlock(&srv->mu);
    explicit_bzero(pw, sizeof pw);
    if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
    return rc;
}

int sim_do_create(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    sim_server *srv = s->srv;
    i++;
    if (i < end && tsql_tok_is(&t[i], "TABLE")) {
        int rc = need_admin(x, "CREATE TABLE", err);
        return rc == MCDC_OK ? create_table(x, t, i + 1, end, err) : rc;
    }
    if (i < end && tsql_tok_is(&t[i], "DATABASE")) {
        char name[SIM_NAME_MAX];
        int rc = need_admin(x, "CREATE DATABASE", err);
        if (rc != MCDC_OK) return rc;
        if (i + 1 >= end || sim_tok_ident(&t[i + 1], name, sizeof name) != 0) return sim_syntax_err(err, t, i + 1, end);
        for (const char *p = name; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
                return sim_err(err, 50000, "the simulator only supports database names of letters, digits, '_' and '-' ('%s')", name);
        pthread_mutex_lock(&srv->mu);
        if (sim_find_db(srv, name)) rc = sim_err(err, 1801, "Database '%s' already exists. Choose a different database name.", name);
        sim_db *d;
        if (rc == MCDC_OK) rc = sim_db_open(srv, name, true, &d, err);
        if (rc == MCDC_OK) rc = sim_sql(sim_master_db(srv)->w, err, "INSERT INTO __sim_databases VALUES (%Q)", name);
        pthread_mutex_unlock(&srv->mu);
        if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
        return rc;
    }
    if (i < end && tsql_tok_is(&t[i], "LOGIN")) {
        char name[SIM_NAME_MAX], pw[SIM_PASSWORD_BYTES_MAX + 1] = "";
        int rc = need_admin(x, "CREATE LOGIN", err);
        if (rc != MCDC_OK) return rc;
        if (i + 1 >= end || sim_tok_ident(&t[i + 1], name, sizeof name) != 0) return sim_syntax_err(err, t, i + 1, end);
        int k = i + 2;
        if (k + 3 < end && tsql_tok_is(&t[k], "WITH") && tsql_tok_is(&t[k + 1], "PASSWORD") && tsql_tok_op(&t[k + 2], "=") &&
            (t[k + 3].t == TK_STR || t[k + 3].t == TK_NSTR))
            tsql_tok_text(&t[k + 3], pw, sizeof pw);
        else return sim_syntax_err(err, t, k, end);
        pthread_mutex_lock(&srv->mu);
        rc = sim_logins_create(sim_master_db(srv), name, pw, err); /* a salted hash, not the text */
        pthread_mutex_unlock(&srv->mu);
        explicit_bzero(pw, sizeof pw);
        if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
        return rc;
    }
    if (i < end && tsql_tok_is(&t[i], "USER")) {
        char name[SIM_NAME_MAX], login[SIM_NAME_MAX];
        int rc = need_admin(x, "CREATE USER", err);
        if (rc != MCDC_OK) return rc;
        if (i + 1 >= end || sim_tok_ident(&t[i + 1], name, sizeof name) != 0) return sim_syntax_err(err, t, i + 1, end);
        snprintf(login, sizeof login, "%s", name);
        int k = i + 2;
        if (k + 2 < end && (tsql_tok_is(&t[k], "FOR") || tsql_tok_is(&t[k], "FROM")) && tsql_tok_is(&t[k + 1], "LOGIN"))
            sim_tok_ident(&t[k + 2], login, sizeof login);
        pthread_mutex_lock(&srv->mu);
        rc = sim_tran_ddl_join(s, err);
        if (rc == MCDC_OK) {
            rc = sim_sql(s->db->w, NULL, "INSERT INTO __sim_users VALUES (%Q, %Q)", name, login);
            if (rc != MCDC_OK) rc = sim_err(err, 15023, "User, group, or role '%s' already exists in the current database.", name);
            else if (s->trancount > 0) sim_undo_push(s, sqlite3_mprintf("DELETE FROM __sim_users WHERE name = %Q", name));
        }
        pthread_mutex_unlock(&srv->mu);
        if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
        return rc;
    }
    if (i < end && (tsql_tok_is(&t[i], "SCHEMA") || tsql_tok_is(&t[i], "ROLE") || tsql_tok_is(&t[i], "INDEX") ||
                    tsql_tok_is(&t[i], "NONCLUSTERED") || tsql_tok_is(&t[i], "UNIQUE") || tsql_tok_is(&t[i], "CLUSTERED"))) {
        /* accepted, no effect (indexes: SQLite plans well enough) */
        sim_send_done(x, 0, false, false);
        return MCDC_OK;
    }
    return sim_err(err, 50000, "CREATE %.*s is not supported by the simulator", i < end ? t[i].n : 0, i < end ? t[i].s : "");
}

/* Does a computed column of tbl use column col? (its definition's names) */
static bool computed_uses(sqlite3 *w, const char *tbl, const char *col, char *who, size_t cap) {
    sqlite3_stmt *st;
    bool used = false;
    if (sqlite3_prepare_v2(w, "SELECT name, definition FROM __sim_computed WHERE tbl = ?", -1, &st, NULL) != SQLITE_OK) return false;
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    while (!used && sqlite3_step(st) == SQLITE_ROW) {
        const char *def = (const char *)sqlite3_column_text(st, 1);
        tsql_tok *dt = NULL;
        int nd = 0;
        if (!def || tsql_lex(&dt, &nd, def, strlen(def), NULL) != MCDC_OK) continue;
        for (int k = 0; k < nd && !used; k++) {
            char nm[SIM_NAME_MAX];
            if ((dt[k].t == TK_IDENT || dt[k].t == TK_QIDENT) && tsql_tok_text(&dt[k], nm, sizeof nm) && mcdc_str_ieq(nm, col)) {
                used = true;
                snprintf(who, cap, "%s", (const char *)sqlite3_column_text(st, 0));
            }
        }
        mcdc_free(dt);
    }
    sqlite3_finalize(st);
    return used;
}

/* ALTER TABLE t ALTER COLUMN c type [NULL | NOT NULL] at toks[*ip] (after
 * COLUMN): the table is rebuilt with the new declaration, its values
 * converted (a value that does not convert or fit fails the statement, as
 * SQL Server's does). name, nt: the column and its type. */
static int alter_column(sim_stmt *x, const tsql_tok *t, int *ip, int end, const char *tbl, const char *short_name,
                        char name[SIM_NAME_MAX], sim_type *nt, mcdc_error *err) {
    sim_session *s = x->s;
    int i = *ip;
    if (i >= end || sim_tok_ident(&t[i], name, SIM_NAME_MAX) != 0) return sim_syntax_err(err, t, i, end);
    i++;
    char ttext[64];
    if (!sim_parse_type_at(t, &i, end, nt, ttext, sizeof ttext))
        return sim_err(err, 2715, "Column, parameter, or variable #1: Cannot find data type %s.", ttext);
    bool nullable = true;
    if (i + 1 < end && tsql_tok_is(&t[i], "NOT") && tsql_tok_is(&t[i + 1], "NULL")) { nullable = false; i += 2; }
    else if (i < end && tsql_tok_is(&t[i], "NULL")) i++;
    if (i < end) return sim_syntax_err(err, t, i, end);
    *ip = i;
    sim_col_def *cols = NULL;
    int n = 0;
    int rc = sim_load_cols(s->db->w, tbl, &cols, &n, err);
    int at = -1;
    for (int k = 0; rc == MCDC_OK && k < n; k++) if (mcdc_str_ieq(cols[k].name, name)) at = k;
    char who[SIM_NAME_MAX] = "";
    if (rc == MCDC_OK && at < 0)
        rc = sim_err(err, 4924, "ALTER TABLE ALTER COLUMN failed because column '%s' does not exist in table '%s'.", name, short_name);
    else if (rc == MCDC_OK && cols[at].computed)
        rc = sim_err(err, 4928, "Cannot alter column '%s' because it is 'COMPUTED'.", name);
    else if (rc == MCDC_OK && cols[at].pk_ordinal) /* SQL Server: 5074 (the key depends on it), then this */
        rc = sim_err(err, 4922, "ALTER TABLE ALTER COLUMN %s failed because one or more objects access this column.", name);
    else if (rc == MCDC_OK && computed_uses(s->db->w, tbl, name, who, sizeof who))
        rc = sim_err(err, 4922, "ALTER TABLE ALTER COLUMN %s failed because one or more objects access this column.", name);
    if (rc == MCDC_OK) {
        snprintf(name, SIM_NAME_MAX, "%s", cols[at].name);
        /* a shorter string or binary: no value may lose characters */
        bool str = nt->id >= SIM_T_CHAR && nt->id <= SIM_T_VARBINARY && nt->id != SIM_T_UNIQUEIDENTIFIER;
        if (str && nt->length > 0) {
            sqlite3_stmt *st;
            char *q = sqlite3_mprintf("SELECT substr(\"%w\", 1, %d) FROM \"%w\" WHERE length(\"%w\") > %d LIMIT 1", name,
                                      (int)nt->length, tbl, name, (int)nt->length);
            if (q && sqlite3_prepare_v2(s->db->w, q, -1, &st, NULL) == SQLITE_OK) {
                if (sqlite3_step(st) == SQLITE_ROW)
                    rc = sim_err(err, 2628, "String or binary data would be truncated in table '%s.%s', column '%s'. Truncated value: '%.100s'.",
                                 s->db->name, tbl, name, (const char *)sqlite3_column_text(st, 0));
                sqlite3_finalize(st);
            }
            sqlite3_free(q);
        }
    }
    if (rc == MCDC_OK) {
        char tn[64];
        sim_type_format(nt, tn, sizeof tn);
        char *def = sqlite3_mprintf("\"%w\" %s%s", name, sim_type_decl(nt), nullable ? "" : " NOT NULL");
        char *conv = sqlite3_mprintf("sim_convert(\"%w\", '%s', NULL)", name, tn);
        rc = def && conv ? sim_table_retype(s->db->w, tbl, name, def, conv, err) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (rc != MCDC_OK && err && err->server_number == 515)
            rc = sim_err(err, 515, "Cannot insert the value NULL into column '%s', table '%s.%s'; column does not allow nulls. UPDATE fails.",
                         name, s->db->name, tbl);
        sqlite3_free(def);
        sqlite3_free(conv);
        if (rc == MCDC_OK)
            rc = sim_sql(s->db->w, err, "UPDATE __sim_columns SET type = %Q, nullable = %d WHERE tbl = %Q AND name = %Q", tn,
                         nullable ? 1 : 0, tbl, name);
    }
    mcdc_free(cols);
    return rc;
}

int sim_do_alter_table(sim_stmt *x, const tsql_tok *t, int i, int end, const char *text, mcdc_error *err) {
    sim_session *s = x->s;
    int start = i;
    (void)text;
    i += 2;
    char parts[4][MCDC_IDENT_BYTES_MAX], tbl[SIM_NAME_MAX * 2];
    int np = xl_name_parts(t, &i, end, parts);
    if (np == 0) return sim_syntax_err(err, t, i, end);
    xl_table_name(parts, np, tbl, sizeof tbl);
    int rc = need_admin(x, "ALTER TABLE", err);
    if (rc != MCDC_OK) return rc;
    rc = sim_lock_table_for_ddl(x, tbl, err);
    if (rc != MCDC_OK) return rc;
    if (!sim_table_exists(s->db->w, tbl)) {
        pthread_mutex_unlock(&s->srv->mu);
        return sim_err(err, 4902, "Cannot find the object \"%s\" because it does not exist or you do not have permissions.", parts[np - 1]);
    }
    char *undo = NULL, *commit = NULL;
    char alter_col[SIM_NAME_MAX] = "";
    sim_type alter_type;
    memset(&alter_type, 0, sizeof alter_type);
    bool implicit = s->trancount == 0;
    rc = sim_tran_ddl_join(s, err);
    if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "BEGIN IMMEDIATE");
    if (rc == MCDC_OK) rc = sim_tran_ddl_snapshot(s, tbl, &undo, &commit, err);
    if (rc == MCDC_OK && i < end && tsql_tok_is(&t[i], "ADD")) {
        i++;
        sim_col_def *have = NULL;
        int nhave = 0;
        rc = sim_load_cols(s->db->w, tbl, &have, &nhave, err);
        while (i < end && rc == MCDC_OK) {
            if (tsql_tok_op(&t[i], ",")) { i++; continue; }
            if (tsql_tok_is(&t[i], "COLUMN")) i++;
            sim_col_def c;
            bool pk, uq;
            rc = parse_col_def(t, &i, end, &c, &pk, &uq, err);
            if (rc != MCDC_OK) break;
            if (!c.nullable) {
                rc = sim_err(err, 4901, "ALTER TABLE only allows columns to be added that can contain nulls, or have a DEFAULT definition specified, or the column being added is an identity or timestamp column, or alternatively if none of the previous conditions are satisfied the table must be empty to allow addition of this last column. Column '%s' cannot be added to non-empty table '%s' because it does not satisfy these conditions.",
                             c.name, parts[np - 1]);
                break;
            }
            int colid = next_column_id(s->db, tbl);
            if (c.computed) {
                /* SQLite adds VIRTUAL generated columns only: a PERSISTED one
                 * computes the same values */
                mcdc_buf decl = {0};
                rc = computed_decl(s->db->w, tbl, have, nhave, &c, t, false, &decl, err);
                if (rc == MCDC_OK) rc = mcdc_buf_cstr(&decl, err);
                if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "ALTER TABLE \"%w\" ADD COLUMN %s", tbl, (const char *)decl.data);
                if (rc == MCDC_OK) rc = catalog_add_computed(s->db, tbl, &c, t, err);
                mcdc_buf_free(&decl);
            } else
                rc = sim_sql(s->db->w, err, "ALTER TABLE \"%w\" ADD COLUMN \"%w\" %s", tbl, c.name, sim_type_decl(&c.type));
            if (rc == MCDC_OK) rc = catalog_add_col(s->db, tbl, colid, &c, err);
            if (rc == MCDC_OK) rc = set_max_column_id(s->db, tbl, colid, err);
        }
        mcdc_free(have);
    } else if (rc == MCDC_OK && i + 1 < end && tsql_tok_is(&t[i], "ALTER") && tsql_tok_is(&t[i + 1], "COLUMN")) {
        i += 2;
        rc = alter_column(x, t, &i, end, tbl, parts[np - 1], alter_col, &alter_type, err);
    } else if (rc == MCDC_OK && i < end && tsql_tok_is(&t[i], "DROP")) {
        i++;
        if (i < end && tsql_tok_is(&t[i], "COLUMN")) i++;
        while (i < end && rc == MCDC_OK) {
            if (tsql_tok_op(&t[i], ",")) { i++; continue; }
            char c[SIM_NAME_MAX], who[SIM_NAME_MAX];
            if (sim_tok_ident(&t[i], c, sizeof c) != 0) { rc = sim_syntax_err(err, t, i, end); break; }
            i++;
            if (!sim_col_type(s->db->w, tbl, c, &(sim_type){0}, NULL)) {
                rc = sim_err(err, 4924, "ALTER TABLE DROP COLUMN failed because column '%s' does not exist in table '%s'.", c, parts[np - 1]);
                break;
            }
            if (computed_uses(s->db->w, tbl, c, who, sizeof who)) { /* SQL Server: 5074, then this */
                rc = sim_err(err, 4922, "ALTER TABLE DROP COLUMN %s failed because one or more objects access this column.", c);
                break;
            }
            rc = sim_sql(s->db->w, err, "ALTER TABLE \"%w\" DROP COLUMN \"%w\"", tbl, c);
            if (rc != MCDC_OK && err)
                rc = sim_err(err, 4922, "ALTER TABLE DROP COLUMN %s failed because one or more objects access this column.", c);
            if (rc == MCDC_OK)
                rc = sim_sql(s->db->w, err, "DELETE FROM __sim_columns WHERE tbl = %Q AND name = %Q;"
                                            "DELETE FROM __sim_computed WHERE tbl = %Q AND name = %Q", tbl, c, tbl, c);
        }
    } else if (rc == MCDC_OK) {
        rc = sim_err(err, 50000, "this ALTER TABLE form is not supported by the simulator (ADD, DROP COLUMN and ALTER COLUMN are)");
    }
    if (rc == MCDC_OK && sim_cdc_table_captured(s->db, tbl)) {
        /* the statement's text for cdc.ddl_history, in the DDL's
         * transaction: capture posts it when it reads the commit */
        const char *a = t[start].s, *b = t[end - 1].s + t[end - 1].n;
        char *ddl = mcdc_strndup(a, (size_t)(b - a));
        if (implicit) sim_tran_log_start(s);
        rc = ddl ? sim_cdc_ddl(s, tbl, ddl, alter_col[0] ? alter_col : NULL, &alter_type, err)
                 : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (rc == MCDC_OK && implicit) rc = sim_tran_commit(s, err);
        mcdc_free(ddl);
    }
    rc = sim_tran_ddl_end(s, rc, undo, commit, err);
    if (implicit) sim_tran_reset(s);
    else if (rc == MCDC_OK) sim_tran_touch(s, tbl);
    pthread_mutex_unlock(&s->srv->mu);
    if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
    return rc;
}

int sim_do_drop(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    i++;
    if (i < end && tsql_tok_is(&t[i], "TABLE")) {
        i++;
        bool if_exists = false;
        if (i + 1 < end && tsql_tok_is(&t[i], "IF") && tsql_tok_is(&t[i + 1], "EXISTS")) { if_exists = true; i += 2; }
        char parts[4][MCDC_IDENT_BYTES_MAX], tbl[SIM_NAME_MAX * 2];
        int np = xl_name_parts(t, &i, end, parts);
        if (np == 0) return sim_syntax_err(err, t, i, end);
        xl_table_name(parts, np, tbl, sizeof tbl);
        int rc = need_admin(x, "DROP TABLE", err);
        if (rc != MCDC_OK) return rc;
        rc = sim_lock_table_for_ddl(x, tbl, err);
        if (rc != MCDC_OK) return rc;
        if (!sim_table_exists(s->db->w, tbl) || sim_ci_prefix(tbl, "sys.") || sim_ci_prefix(tbl, "cdc.")) {
            pthread_mutex_unlock(&s->srv->mu);
            if (if_exists) { sim_send_done(x, 0, false, false); return MCDC_OK; }
            return sim_err(err, 3701, "Cannot drop the table '%s', because it does not exist or you do not have permission.", parts[np - 1]);
        }
        char *undo = NULL, *commit = NULL;
        rc = sim_tran_ddl_join(s, err);
        if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "BEGIN IMMEDIATE");
        if (rc == MCDC_OK) rc = sim_tran_ddl_snapshot(s, tbl, &undo, &commit, err);
        if (rc == MCDC_OK) rc = sim_cdc_drop_table(s, tbl, err);
        if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "DROP TABLE \"%w\"; DELETE FROM __sim_columns WHERE tbl = %Q; DELETE FROM __sim_tables WHERE name = %Q; DELETE FROM __sim_grants WHERE object = %Q; DELETE FROM __sim_computed WHERE tbl = %Q", tbl, tbl, tbl, tbl, tbl);
        rc = sim_tran_ddl_end(s, rc, undo, commit, err);
        if (rc == MCDC_OK) sim_tran_touch(s, tbl);
        pthread_mutex_unlock(&s->srv->mu);
        if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
        return rc;
    }
    if (i < end && tsql_tok_is(&t[i], "DATABASE")) {
        char name[SIM_NAME_MAX];
        int rc = need_admin(x, "DROP DATABASE", err);
        if (rc != MCDC_OK) return rc;
        i++;
        bool if_exists = false;
        if (i + 1 < end && tsql_tok_is(&t[i], "IF") && tsql_tok_is(&t[i + 1], "EXISTS")) { if_exists = true; i += 2; }
        if (i >= end || sim_tok_ident(&t[i], name, sizeof name) != 0) return sim_syntax_err(err, t, i, end);
        sim_server *srv = s->srv;
        pthread_mutex_lock(&srv->mu);
        sim_db *d = sim_find_db(srv, name);
        if (!d || mcdc_str_ieq(name, "master")) {
            pthread_mutex_unlock(&srv->mu);
            if (if_exists && d == NULL) { sim_send_done(x, 0, false, false); return MCDC_OK; }
            return sim_err(err, 3701, "Cannot drop the database '%s', because it does not exist or you do not have permission.", name);
        }
        bool busy = false;
        for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++)
            if (srv->sessions[k] && (srv->sessions[k]->db == d || srv->sessions[k]->tran_db == d)) busy = true;
        if (busy) {
            pthread_mutex_unlock(&srv->mu);
            return sim_err(err, 3702, "Cannot drop database \"%s\" because it is currently in use.", name);
        }
        for (sim_db **pp = &srv->dbs; *pp; pp = &(*pp)->next)
            if (*pp == d) { *pp = d->next; break; }
        sqlite3_close_v2(d->w);
        sim_store_invalidate(srv->stores, d->name, NULL);
        const char *sfx[] = {"", "-wal", "-shm"};
        for (int k = 0; k < 3; k++) {
            char path[1100];
            snprintf(path, sizeof path, "%s%s", d->path, sfx[k]);
            remove(path);
        }
        rc = sim_sql(sim_master_db(srv)->w, err, "DELETE FROM __sim_databases WHERE name = %Q", name);
        pthread_mutex_unlock(&srv->mu);
        mcdc_free(d);
        if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
        return rc;
    }
    return sim_err(err, 50000, "DROP %.*s is not supported by the simulator", i < end ? t[i].n : 0, i < end ? t[i].s : "");
}

/* GRANT / REVOKE VIEW DATABASE STATE (kept in the database) or VIEW SERVER
 * STATE (kept in master, for a login) TO who: a grant without an object. */
static int state_grant(sim_session *s, const char *who, const char *perm, bool revoke, mcdc_error *err) {
    bool server = strcmp(perm, "VIEW SERVER STATE") == 0;
    if (server && !mcdc_str_ieq(s->db->name, "master"))
        return sim_err(err, 4621, "Permissions at the server scope can only be granted when the current database is master");
    sqlite3 *w = s->db->w;
    bool had = sim_has_scope_grant(w, who, perm);
    char *add = sqlite3_mprintf("INSERT OR IGNORE INTO __sim_grants VALUES (%Q, '', %Q)", who, perm);
    char *del = sqlite3_mprintf("DELETE FROM __sim_grants WHERE principal = %Q AND object = '' AND perm = %Q", who, perm);
    if (!add || !del) {
        sqlite3_free(add);
        sqlite3_free(del);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    int rc = sim_sql(w, err, "%s", revoke ? del : add);
    char *undo = NULL; /* ROLLBACK puts it back as it was */
    if (rc == MCDC_OK && s->trancount > 0 && had != !revoke) {
        undo = had ? add : del;
        if (had) add = NULL;
        else del = NULL;
    }
    if (undo) sim_undo_push(s, undo);
    sqlite3_free(add);
    sqlite3_free(del);
    return rc;
}

int sim_do_grant(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    bool revoke = !tsql_tok_is(&t[i], "GRANT");
    int rc = need_admin(x, "GRANT", err);
    if (rc != MCDC_OK) return rc;
    i++;
    bool select = false;
    const char *state = NULL; /* VIEW DATABASE STATE / VIEW SERVER STATE (no ON) */
    while (i < end && !tsql_tok_is(&t[i], "ON") && !tsql_tok_is(&t[i], "TO") && !tsql_tok_is(&t[i], "FROM")) {
        if (tsql_tok_is(&t[i], "SELECT")) select = true;
        if (i + 2 < end && tsql_tok_is(&t[i], "VIEW") && tsql_tok_is(&t[i + 2], "STATE")) {
            if (tsql_tok_is(&t[i + 1], "DATABASE")) state = "VIEW DATABASE STATE";
            else if (tsql_tok_is(&t[i + 1], "SERVER")) state = "VIEW SERVER STATE";
        }
        i++;
    }
    char obj[SIM_NAME_MAX * 2] = "";
    if (i < end && tsql_tok_is(&t[i], "ON")) {
        i++;
        if (i + 1 < end && (tsql_tok_is(&t[i], "OBJECT") || tsql_tok_is(&t[i], "SCHEMA")) && tsql_tok_op(&t[i + 1], "::")) i += 2;
        char parts[4][MCDC_IDENT_BYTES_MAX];
        int np = xl_name_parts(t, &i, end, parts);
        if (np == 0) return sim_syntax_err(err, t, i, end);
        xl_table_name(parts, np, obj, sizeof obj);
        if (!sim_table_exists(s->rd, obj))
            return sim_err(err, 15151, "Cannot find the object '%s', because it does not exist or you do not have permission.", parts[np - 1]);
    }
    if (i >= end || (!tsql_tok_is(&t[i], "TO") && !tsql_tok_is(&t[i], "FROM"))) return sim_syntax_err(err, t, i, end);
    i++;
    pthread_mutex_lock(&s->srv->mu);
    rc = sim_tran_ddl_join(s, err);
    while (i < end && rc == MCDC_OK) {
        char who[SIM_NAME_MAX];
        if (tsql_tok_op(&t[i], ",")) { i++; continue; }
        if (sim_tok_ident(&t[i], who, sizeof who) != 0) break;
        i++;
        if (state && !obj[0]) rc = state_grant(s, who, state, revoke, err);
        if (select && obj[0]) {
            bool had = sim_has_grant(s->db->w, who, obj);
            if (revoke) rc = sim_sql(s->db->w, err, "DELETE FROM __sim_grants WHERE principal = %Q AND object = %Q", who, obj);
            else rc = sim_sql(s->db->w, err, "INSERT OR IGNORE INTO __sim_grants VALUES (%Q, %Q, 'SELECT')", who, obj);
            if (rc == MCDC_OK && s->trancount > 0 && had != !revoke) /* ROLLBACK puts the grant back as it was */
                sim_undo_push(s, had ? sqlite3_mprintf("INSERT OR IGNORE INTO __sim_grants VALUES (%Q, %Q, 'SELECT')", who, obj)
                                 : sqlite3_mprintf("DELETE FROM __sim_grants WHERE principal = %Q AND object = %Q AND"
                                                   " perm = 'SELECT'", who, obj));
        }
    }
    pthread_mutex_unlock(&s->srv->mu);
    if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
    return rc;
}
