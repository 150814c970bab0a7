/*
 * sim_txn_ddl.c - DDL inside an open transaction: the copy of a table
 * (rows, rowids, CREATE statement, catalog rows) that ROLLBACK restores and
 * COMMIT drops.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* ---- DDL inside a transaction ------------------------------------------- */
/* Under mu. A DDL statement in an open T-SQL transaction joins it: the
 * transaction now spans the session's database. */
int sim_tran_ddl_join(sim_session *s, mcdc_error *err) {
    if (s->trancount == 0) return MCDC_OK;
    if (s->tran_db && s->tran_db != s->db)
        return sim_err(err, 50000, "the simulator does not support a transaction across databases ('%s' and '%s')",
                       s->tran_db->name, s->db->name);
    s->tran_db = s->db;
    return MCDC_OK;
}

/* Appends "INSERT INTO <cat> VALUES (...);" for each row of catalog table
 * cat whose column key equals val. */
static int catalog_rows_sql(sqlite3 *w, mcdc_buf *out, const char *cat, const char *key, const char *val,
                            mcdc_error *err) {
    char *q = sqlite3_mprintf("SELECT * FROM \"%w\" WHERE \"%w\" = %Q", cat, key, val);
    sqlite3_stmt *st = NULL;
    int rc = q && sqlite3_prepare_v2(w, q, -1, &st, NULL) == SQLITE_OK ? MCDC_OK : sim_sqlite_err(w, SQLITE_ERROR, err);
    sqlite3_free(q);
    while (rc == MCDC_OK && sqlite3_step(st) == SQLITE_ROW) {
        rc = mcdc_buf_printf(out, err, "INSERT INTO \"%s\" VALUES (", cat);
        for (int k = 0; k < sqlite3_column_count(st) && rc == MCDC_OK; k++) {
            char *l = sim_value_literal(sqlite3_column_value(st, k));
            rc = l ? mcdc_buf_printf(out, err, "%s%s", k ? ", " : "", l) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            sqlite3_free(l);
        }
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, ");", err);
    }
    sqlite3_finalize(st);
    return rc;
}

/* Under mu, inside the DDL's SQLite transaction, before the DDL changes
 * table tbl (ALTER, DROP). In an open T-SQL transaction, copies the table (rows with
 * their rowids), its CREATE statement and catalog rows, and builds the
 * ROLLBACK SQL that puts them back (*undo) and the COMMIT SQL that drops
 * the copy (*commit); both sqlite3_malloc'd, NULL outside a transaction. */
int sim_tran_ddl_snapshot(sim_session *s, const char *tbl, char **undo, char **commit, mcdc_error *err) {
    *undo = *commit = NULL;
    sim_snap_ddl(s, tbl); /* snapshots older than this DDL cannot read the table (3961) */
    if (s->trancount == 0) return MCDC_OK;
    sqlite3 *w = s->db->w;
    int64_t seq = sim_state_get(w, "undo_seq", 0) + 1;
    int rc = sim_db_state_put(s->db, "undo_seq", seq);
    char copy[64];
    snprintf(copy, sizeof copy, "__sim_undo.%lld", (long long)seq);
    mcdc_buf u = {0}, cols = {0};
    sqlite3_stmt *st = NULL;
    if (rc == MCDC_OK && sqlite3_prepare_v2(w, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", -1, &st,
                                            NULL) != SQLITE_OK)
        rc = sim_sqlite_err(w, SQLITE_ERROR, err);
    if (rc == MCDC_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_ROW) rc = sim_err(err, 208, "Invalid object name '%s'.", tbl);
        else rc = mcdc_buf_printf(&u, err, "DROP TABLE IF EXISTS \"%s\";%s;", tbl, (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc == MCDC_OK && sqlite3_prepare_v2(w, "SELECT name FROM pragma_table_info(?)", -1, &st, NULL) != SQLITE_OK)
        rc = sim_sqlite_err(w, SQLITE_ERROR, err);
    if (rc == MCDC_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        for (int k = 0; rc == MCDC_OK && sqlite3_step(st) == SQLITE_ROW; k++) {
            rc = mcdc_buf_append_str(&cols, ", ", err);
            if (rc == MCDC_OK) rc = xl_append_ident(&cols, (const char *)sqlite3_column_text(st, 0));
        }
        if (rc == MCDC_OK) rc = mcdc_buf_cstr(&cols, err);
    }
    sqlite3_finalize(st);
    if (rc == MCDC_OK)
        rc = sim_sql(w, err, "CREATE TABLE \"%w\" AS SELECT rowid AS \"__sim_rowid\"%s FROM \"%w\"", copy,
                     (const char *)cols.data, tbl);
    if (rc == MCDC_OK)
        rc = mcdc_buf_printf(&u, err, "INSERT INTO \"%s\"(rowid%s) SELECT \"__sim_rowid\"%s FROM \"%s\"; DROP TABLE \"%s\";"
                             " DELETE FROM __sim_columns WHERE tbl = '%s'; DELETE FROM __sim_tables WHERE name = '%s';"
                             " DELETE FROM __sim_grants WHERE object = '%s'; DELETE FROM __sim_computed WHERE tbl = '%s';",
                             tbl, (const char *)cols.data, (const char *)cols.data, copy, copy, tbl, tbl, tbl, tbl);
    if (rc == MCDC_OK) rc = catalog_rows_sql(w, &u, "__sim_columns", "tbl", tbl, err);
    if (rc == MCDC_OK) rc = catalog_rows_sql(w, &u, "__sim_tables", "name", tbl, err);
    if (rc == MCDC_OK) rc = catalog_rows_sql(w, &u, "__sim_grants", "object", tbl, err);
    if (rc == MCDC_OK) rc = catalog_rows_sql(w, &u, "__sim_computed", "tbl", tbl, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&u, err);
    if (rc == MCDC_OK) {
        *undo = sqlite3_mprintf("%s", (const char *)u.data);
        *commit = sqlite3_mprintf("DROP TABLE IF EXISTS \"%w\"", copy);
        if (!*undo || !*commit) {
            sqlite3_free(*undo);
            sqlite3_free(*commit);
            *undo = *commit = NULL;
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        }
    }
    mcdc_buf_free(&u);
    mcdc_buf_free(&cols);
    return rc;
}

/* Under mu: ends the DDL's SQLite transaction (COMMIT if rc is MCDC_OK,
 * else ROLLBACK) and keeps the snapshot's SQL for the T-SQL transaction.
 * Takes undo and commit (sqlite3_malloc'd, may be NULL). */
int sim_tran_ddl_end(sim_session *s, int rc, char *undo, char *commit, mcdc_error *err) {
    if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "COMMIT");
    if (rc != MCDC_OK) sim_sql(s->db->w, NULL, "ROLLBACK");
    if (rc == MCDC_OK && undo) {
        sim_undo_push2(s, undo, commit);
        return rc;
    }
    sqlite3_free(undo);
    sqlite3_free(commit);
    return rc;
}


/* ---- ALTER COLUMN: a column's declaration changed ------------------------ */
/* The end of the column definition that starts at p (a quoted name), at
 * the ',' or ')' that closes it at depth 0. */
static const char *def_end(const char *p) {
    int d = 0;
    bool q = false;
    for (; *p; p++) {
        if (*p == '"' || *p == '\'') { /* quoted names and literals */
            char c = *p++;
            while (*p && !(*p == c && p[1] != c)) p += *p == c ? 2 : 1;
            if (!*p) return p;
            continue;
        }
        if (*p == '(') d++;
        else if (*p == ')') { if (d == 0) return p; d--; }
        else if (*p == ',' && d == 0) return p;
    }
    (void)q;
    return p;
}

int sim_table_retype(sqlite3 *w, const char *tbl, const char *col, const char *new_def, const char *conv_expr,
                     mcdc_error *err) {
    sqlite3_stmt *st = NULL;
    char *sql = NULL;
    int rc = MCDC_OK;
    if (sqlite3_prepare_v2(w, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", -1, &st, NULL) != SQLITE_OK)
        return sim_sqlite_err(w, SQLITE_ERROR, err);
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) sql = mcdc_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (!sql) return sim_err(err, 208, "Invalid object name '%s'.", tbl);
    /* the column's definition: "col" at depth 1, after '(' or ', ' */
    mcdc_buf qn = {0}, ddl = {0}, cols = {0}, sel = {0}, idx = {0};
    xl_append_ident(&qn, col);
    mcdc_buf_cstr(&qn, NULL);
    const char *open = strchr(sql, '('), *at = NULL;
    for (const char *p = open ? open + 1 : sql; open && *p; ) {
        while (*p == ' ') p++;
        if (mcdc_str_nieq(p, (const char *)qn.data, qn.len) && p[qn.len] == ' ') { at = p; break; }
        const char *e = def_end(p);
        if (*e != ',') break;
        p = e + 1;
    }
    if (!at) rc = sim_err(err, 4924, "ALTER TABLE ALTER COLUMN failed because column '%s' does not exist in table '%s'.", col, tbl);
    if (rc == MCDC_OK) {
        const char *e = def_end(at);
        mcdc_buf_printf(&ddl, NULL, "CREATE TABLE \"__sim_retype\"%.*s%s%s", (int)(at - open), open, new_def, e);
        rc = mcdc_buf_cstr(&ddl, err);
    }
    /* its columns, generated ones left out (they compute again) */
    if (rc == MCDC_OK && sqlite3_prepare_v2(w, "SELECT name FROM pragma_table_xinfo(?) WHERE hidden = 0 ORDER BY cid", -1, &st,
                                            NULL) != SQLITE_OK)
        rc = sim_sqlite_err(w, SQLITE_ERROR, err);
    bool rowid = rc == MCDC_OK && !strstr(sql, "WITHOUT ROWID");
    if (rc == MCDC_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        if (rowid) { mcdc_buf_append_str(&cols, "rowid", NULL); mcdc_buf_append_str(&sel, "rowid", NULL); }
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *n = (const char *)sqlite3_column_text(st, 0);
            if (cols.len) { mcdc_buf_append_str(&cols, ", ", NULL); mcdc_buf_append_str(&sel, ", ", NULL); }
            xl_append_ident(&cols, n);
            if (mcdc_str_ieq(n, col)) mcdc_buf_append_str(&sel, conv_expr, NULL);
            else xl_append_ident(&sel, n);
        }
        sqlite3_finalize(st);
        rc = mcdc_buf_cstr(&cols, err) == MCDC_OK ? mcdc_buf_cstr(&sel, err) : MCDC_E_NOMEM;
    }
    /* the table's indexes (other than its key's) come back after */
    if (rc == MCDC_OK && sqlite3_prepare_v2(w, "SELECT sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
                                            -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        while (sqlite3_step(st) == SQLITE_ROW) mcdc_buf_printf(&idx, NULL, "%s;", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    if (rc == MCDC_OK) rc = sim_sql(w, err, "DROP TABLE IF EXISTS \"__sim_retype\"; %s", (const char *)ddl.data);
    if (rc == MCDC_OK)
        rc = sim_sql(w, err, "INSERT INTO \"__sim_retype\"(%s) SELECT %s FROM \"%w\"", (const char *)cols.data,
                     (const char *)sel.data, tbl);
    if (rc == MCDC_OK) rc = sim_sql(w, err, "DROP TABLE \"%w\"; ALTER TABLE \"__sim_retype\" RENAME TO \"%w\"", tbl, tbl);
    if (rc == MCDC_OK && idx.len) {
        mcdc_buf_cstr(&idx, NULL);
        rc = sim_sql(w, err, "%s", (const char *)idx.data);
    }
    mcdc_free(sql);
    mcdc_buf_free(&qn);
    mcdc_buf_free(&ddl);
    mcdc_buf_free(&cols);
    mcdc_buf_free(&sel);
    mcdc_buf_free(&idx);
    return rc;
}
