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
                             " DELETE FROM __sim_grants WHERE object = '%s';",
                             tbl, (const char *)cols.data, (const char *)cols.data, copy, copy, tbl, tbl, tbl);
    if (rc == MCDC_OK) rc = catalog_rows_sql(w, &u, "__sim_columns", "tbl", tbl, err);
    if (rc == MCDC_OK) rc = catalog_rows_sql(w, &u, "__sim_tables", "name", tbl, err);
    if (rc == MCDC_OK) rc = catalog_rows_sql(w, &u, "__sim_grants", "object", tbl, err);
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

/* Largest rowid of cdc.ddl_history (the rows a DDL adds come after it). */
int64_t sim_ddl_history_top(sqlite3 *w) {
    sqlite3_stmt *st;
    int64_t v = 0;
    if (sqlite3_prepare_v2(w, "SELECT coalesce(max(rowid), 0) FROM \"cdc.ddl_history\"", -1, &st, NULL) != SQLITE_OK) return 0;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}
