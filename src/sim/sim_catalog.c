/*
 * sim_catalog.c - the catalog of a database file: its schema (the
 * __sim_* tables and the sys.* views over them), column types, table
 * existence and grants; opening a database file (and rebuilding the tables
 * of an older build with this build's collations).
 */
#include "sim_engine_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- catalog ------------------------------------------------------------ */
bool sim_col_type(sqlite3 *c, const char *tbl, const char *col, sim_type *out, bool *nullable) {
    sqlite3_stmt *st;
    bool ok = false;
    if (sqlite3_prepare_v2(c, "SELECT type, nullable FROM __sim_columns WHERE tbl = ? AND name = ?", -1, &st, NULL) !=
        SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, col, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        ok = t && sim_type_parse(out, t, strlen(t));
        if (nullable) *nullable = sqlite3_column_int(st, 1) != 0;
    }
    sqlite3_finalize(st);
    return ok;
}

bool sim_table_exists(sqlite3 *c, const char *name) {
    sqlite3_stmt *st;
    bool ok = false;
    if (sqlite3_prepare_v2(c, "SELECT 1 FROM sqlite_schema WHERE type IN ('table','view') AND name = ? COLLATE NOCASE",
                           -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    ok = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return ok;
}

/* A grant of perm on obj ('' for the database or server) to who. */
static bool has_grant_row(sqlite3 *c, const char *who, const char *obj, const char *perm) {
    sqlite3_stmt *st;
    bool ok = false;
    if (!who || !who[0] ||
        sqlite3_prepare_v2(c, "SELECT 1 FROM __sim_grants WHERE principal = ? COLLATE NOCASE AND object = ? COLLATE NOCASE"
                              " AND perm = ?", -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, who, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, obj, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, perm, -1, SQLITE_STATIC);
    ok = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return ok;
}

bool sim_has_grant(sqlite3 *c, const char *user, const char *obj) { return has_grant_row(c, user, obj, "SELECT"); }

bool sim_has_scope_grant(sqlite3 *c, const char *who, const char *perm) { return has_grant_row(c, who, "", perm); }

static const char *DB_SCHEMA =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS __sim_state(k TEXT PRIMARY KEY, v);"
    "CREATE TABLE IF NOT EXISTS __sim_tables(name TEXT PRIMARY KEY COLLATE NOCASE, schema_name TEXT, table_name TEXT,"
    " object_id INT, create_date TEXT, is_cdc INT DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS __sim_columns(tbl TEXT COLLATE NOCASE, column_id INT, name TEXT COLLATE NOCASE, type TEXT,"
    " nullable INT, pk_ordinal INT, PRIMARY KEY(tbl, name));"
    "CREATE TABLE IF NOT EXISTS __sim_users(name TEXT PRIMARY KEY COLLATE NOCASE, login TEXT);"
    "CREATE TABLE IF NOT EXISTS __sim_grants(principal TEXT COLLATE NOCASE, object TEXT COLLATE NOCASE, perm TEXT,"
    " PRIMARY KEY(principal, object, perm));"
    /* computed columns: their definition as written (sys.computed_columns'
     * definition, is_persisted) */
    "CREATE TABLE IF NOT EXISTS __sim_computed(tbl TEXT COLLATE NOCASE, name TEXT COLLATE NOCASE, definition TEXT,"
    " is_persisted INT, PRIMARY KEY(tbl, name));"
    /* recreated on every open: a data dir of an older build gets is_computed */
    "DROP VIEW IF EXISTS \"sys.columns\";"
    "CREATE VIEW \"sys.columns\" AS SELECT t.object_id AS object_id, c.name AS name,"
    " c.column_id AS column_id, (k.name IS NOT NULL) AS is_computed, c.nullable AS is_nullable,"
    " CASE WHEN c.type LIKE '%char%' THEN 'SQL_Latin1_General_CP1_CI_AS' END AS collation_name"
    " FROM __sim_columns c JOIN __sim_tables t ON t.name = c.tbl LEFT JOIN __sim_computed k ON k.tbl = c.tbl AND"
    " k.name = c.name;"
    "CREATE VIEW IF NOT EXISTS \"sys.tables\" AS SELECT object_id, table_name AS name, schema_name,"
    " create_date, is_cdc AS is_tracked_by_cdc FROM __sim_tables WHERE schema_name <> 'cdc';"
    "CREATE VIEW IF NOT EXISTS \"sys.objects\" AS SELECT object_id, table_name AS name, CASE schema_name WHEN 'dbo'"
    " THEN 1 WHEN 'cdc' THEN 5 ELSE 7 END AS schema_id, 'U' AS type, 'USER_TABLE' AS type_desc, create_date"
    " FROM __sim_tables;"
    /* sys.dm_db_partition_stats: a row per table and partition (one here) of
     * its heap (index_id 0) or clustered index (1: a key, and every cdc
     * table), row_count counted when read; SQL Server's page counts are left
     * out (the simulator keeps no pages: a query reading them fails rather
     * than reads a made-up number). Needs VIEW DATABASE STATE
     * (sim_caplog_view). */
    "DROP VIEW IF EXISTS \"sys.dm_db_partition_stats\";"
    "CREATE VIEW \"sys.dm_db_partition_stats\" AS SELECT object_id * 65536 + index_id AS partition_id,"
    " object_id, index_id, 1 AS partition_number, row_count FROM (SELECT t.object_id AS object_id,"
    " CASE WHEN t.schema_name = 'cdc' OR EXISTS (SELECT 1 FROM __sim_columns c WHERE c.tbl = t.name AND"
    " c.pk_ordinal > 0) THEN 1 ELSE 0 END AS index_id, sim_row_count(t.name) AS row_count FROM __sim_tables t)"
    " WHERE row_count IS NOT NULL;"
    /* the views' column types, as SQL Server's catalog views declare them
     * (a computed column has no origin: without these its type would come
     * from the first row's value, an int for a NULL) */
    "INSERT OR IGNORE INTO __sim_columns VALUES"
    " ('sys.columns', 1, 'object_id', 'int', 0, 0), ('sys.columns', 2, 'name', 'nvarchar(128)', 1, 0),"
    " ('sys.columns', 3, 'column_id', 'int', 0, 0), ('sys.columns', 4, 'is_computed', 'bit', 0, 0),"
    " ('sys.columns', 5, 'is_nullable', 'bit', 1, 0), ('sys.columns', 6, 'collation_name', 'nvarchar(128)', 1, 0),"
    " ('sys.tables', 1, 'object_id', 'int', 0, 0), ('sys.tables', 2, 'name', 'nvarchar(128)', 0, 0),"
    " ('sys.tables', 3, 'schema_name', 'nvarchar(128)', 1, 0), ('sys.tables', 4, 'create_date', 'datetime', 0, 0),"
    " ('sys.tables', 5, 'is_tracked_by_cdc', 'bit', 1, 0),"
    " ('sys.objects', 1, 'object_id', 'int', 0, 0), ('sys.objects', 2, 'name', 'nvarchar(128)', 0, 0),"
    " ('sys.objects', 3, 'schema_id', 'int', 0, 0), ('sys.objects', 4, 'type', 'char(2)', 1, 0),"
    " ('sys.objects', 5, 'type_desc', 'nvarchar(60)', 1, 0), ('sys.objects', 6, 'create_date', 'datetime', 0, 0),"
    " ('sys.dm_db_partition_stats', 1, 'partition_id', 'bigint', 0, 0),"
    " ('sys.dm_db_partition_stats', 2, 'object_id', 'int', 0, 0),"
    " ('sys.dm_db_partition_stats', 3, 'index_id', 'int', 0, 0),"
    " ('sys.dm_db_partition_stats', 4, 'partition_number', 'int', 0, 0),"
    " ('sys.dm_db_partition_stats', 14, 'row_count', 'bigint', 0, 0);";

/* ---- data dirs of older builds ------------------------------------------- */
/* Appends the column list of table tbl ("a", "b") in its physical order. */
static int table_col_list(sqlite3 *w, const char *tbl, mcdc_buf *out, mcdc_error *err) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(w, "SELECT name FROM pragma_table_info(?) ORDER BY cid", -1, &st, NULL) != SQLITE_OK)
        return sim_sqlite_err(w, SQLITE_ERROR, err);
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    int rc = MCDC_OK;
    for (int k = 0; rc == MCDC_OK && sqlite3_step(st) == SQLITE_ROW; k++) {
        if (k) rc = mcdc_buf_append_str(out, ", ", err);
        if (rc == MCDC_OK) rc = xl_append_ident(out, (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return rc == MCDC_OK ? mcdc_buf_cstr(out, err) : rc;
}

/* The CREATE TABLE of user table tbl as this build declares it, from the
 * catalog (types), table_info (order, NOT NULL, key) and its UNIQUE
 * indexes; false if a column is not in the catalog. */
static bool table_ddl_now(sqlite3 *w, const char *tbl, const char *as_name, mcdc_buf *out) {
    sqlite3_stmt *st;
    bool ok = true;
    mcdc_buf pk = {0};
    mcdc_buf_printf(out, NULL, "CREATE TABLE \"%s\"(", as_name);
    if (sqlite3_prepare_v2(w, "SELECT p.name, p.\"notnull\", p.pk, c.type FROM pragma_table_info(?1) p LEFT JOIN"
                              " __sim_columns c ON c.tbl = ?1 AND c.name = p.name ORDER BY p.cid", -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    for (int k = 0; ok && sqlite3_step(st) == SQLITE_ROW; k++) {
        const char *nm = (const char *)sqlite3_column_text(st, 0), *ty = (const char *)sqlite3_column_text(st, 3);
        sim_type t;
        ok = ty && sim_type_parse(&t, ty, strlen(ty));
        if (!ok) break;
        mcdc_buf_printf(out, NULL, "%s\"%s\" %s%s", k ? ", " : "", nm, sim_type_decl(&t),
                        sqlite3_column_int(st, 1) ? " NOT NULL" : "");
    }
    sqlite3_finalize(st);
    if (ok && sqlite3_prepare_v2(w, "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        for (int k = 0; sqlite3_step(st) == SQLITE_ROW; k++)
            mcdc_buf_printf(&pk, NULL, "%s\"%s\"", k ? "," : "", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        if (pk.len) mcdc_buf_printf(out, NULL, ", PRIMARY KEY(%.*s)", (int)pk.len, (const char *)pk.data);
    }
    if (ok && sqlite3_prepare_v2(w, "SELECT l.name, group_concat('\"' || i.name || '\"', ',') FROM pragma_index_list(?1) l,"
                                    " pragma_index_info(l.name) i WHERE l.origin = 'u' GROUP BY l.name ORDER BY l.seq",
                                 -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
        while (sqlite3_step(st) == SQLITE_ROW)
            mcdc_buf_printf(out, NULL, ", UNIQUE(%s)", (const char *)sqlite3_column_text(st, 1));
        sqlite3_finalize(st);
    }
    mcdc_buf_free(&pk);
    return ok && mcdc_buf_append_str(out, ")", NULL) == MCDC_OK && mcdc_buf_cstr(out, NULL) == MCDC_OK;
}

/* Tables that builds before the decimal and string collations created
 * (decimal columns without a type, strings COLLATE NOCASE) are rebuilt
 * with this build's declarations, rows and rowids kept. Change tables and
 * the simulator's own tables are left as they are. */
static int db_migrate_collations(sim_db *d, mcdc_error *err) {
    sqlite3 *w = d->w;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(w, "SELECT t.name FROM __sim_tables t JOIN sqlite_schema s ON s.type = 'table' AND s.name = t.name"
                              " WHERE t.schema_name <> 'cdc' AND EXISTS (SELECT 1 FROM __sim_columns c WHERE c.tbl = t.name AND"
                              " (c.type LIKE '%char%' AND s.sql NOT LIKE '%COLLATE " SIM_STRING_COLLATION "%' OR"
                              " (c.type LIKE 'decimal%' OR c.type LIKE 'numeric%' OR c.type LIKE '%money')"
                              " AND s.sql NOT LIKE '%COLLATE " SIM_DECIMAL_COLLATION "%' OR"
                              " c.type LIKE 'datetimeoffset%' AND s.sql NOT LIKE '%COLLATE " SIM_DTO_COLLATION "%' OR"
                              " c.type = 'uniqueidentifier' AND s.sql NOT LIKE '%COLLATE " SIM_GUID_COLLATION "%'))",
                           -1, &st, NULL) != SQLITE_OK)
        return sim_sqlite_err(w, SQLITE_ERROR, err);
    char names[64][SIM_NAME_MAX];
    int n = 0;
    while (n < 64 && sqlite3_step(st) == SQLITE_ROW)
        snprintf(names[n++], SIM_NAME_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    int rc = MCDC_OK;
    for (int k = 0; k < n && rc == MCDC_OK; k++) {
        mcdc_buf ddl = {0}, cols = {0};
        char tmp[SIM_NAME_MAX + 16];
        snprintf(tmp, sizeof tmp, "__sim_migrate.%.*s", SIM_NAME_MAX - 1, names[k]);
        if (table_ddl_now(w, names[k], tmp, &ddl) && table_col_list(w, names[k], &cols, err) == MCDC_OK) {
            rc = sim_sql(w, err, "BEGIN IMMEDIATE");
            if (rc == MCDC_OK) rc = sim_sql(w, err, "%s", (const char *)ddl.data);
            if (rc == MCDC_OK)
                rc = sim_sql(w, err, "INSERT INTO \"%w\"(rowid, %s) SELECT rowid, %s FROM \"%w\"; DROP TABLE \"%w\";"
                                     " ALTER TABLE \"%w\" RENAME TO \"%w\"",
                             tmp, (const char *)cols.data, (const char *)cols.data, names[k], names[k], tmp, names[k]);
            sim_sql(w, NULL, rc == MCDC_OK ? "COMMIT" : "ROLLBACK");
            if (rc != MCDC_OK)
                mcdc_log(MCDC_LOG_WARN, "sim: database %s: table %s keeps the collations of an older build: %s", d->name,
                         names[k], err ? err->message : "");
            rc = MCDC_OK; /* the table still works, with the old comparisons */
            mcdc_error_clear(err);
        }
        mcdc_buf_free(&ddl);
        mcdc_buf_free(&cols);
    }
    return rc;
}

int sim_db_open(sim_server *srv, const char *name, bool create, sim_db **out, mcdc_error *err) {
    sim_db *d = mcdc_calloc(1, sizeof *d);
    if (!d) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->path, sizeof d->path, "%s/%s.db", srv->data_dir, name);
    for (char *p = d->path + strlen(srv->data_dir) + 1; *p; p++) *p = (char)tolower((unsigned char)*p);
    /* owner-only: SQLite gives its -wal and -shm files the database file's mode */
    if (create) {
        int fd = open(d->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) close(fd);
    }
    static const char *const SUFFIX[] = {"", "-wal", "-shm"};
    for (int k = 0; k < 3; k++) {
        char p[sizeof d->path + 8];
        snprintf(p, sizeof p, "%s%s", d->path, SUFFIX[k]);
        sim_owner_only(p);
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(d->path, &d->w, flags, NULL) != SQLITE_OK) {
        mcdc_error_set(err, MCDC_E_IO, "cannot open database file %s: %s", d->path, d->w ? sqlite3_errmsg(d->w) : "?");
        sqlite3_close(d->w);
        mcdc_free(d);
        return MCDC_E_IO;
    }
    int rc = sim_conn_setup(d->w, &srv->clk);
    if (rc == MCDC_OK) rc = sim_sql(d->w, err, "PRAGMA cache_size = -65536");
    if (rc == MCDC_OK) rc = sim_sql(d->w, err, "%s", DB_SCHEMA);
    if (rc == MCDC_OK) rc = sim_cdc_init_db(d, err);
    if (rc == MCDC_OK) rc = db_migrate_collations(d, err);
    if (rc != MCDC_OK) {
        sqlite3_close(d->w);
        mcdc_free(d);
        return rc;
    }
    d->lsn = (uint64_t)sim_state_get(d->w, "lsn", (int64_t)SIM_LSN_FIRST);
    d->tran_seq = (uint64_t)sim_state_get(d->w, "tran_seq", 0x1000);
    d->cdc_enabled = sim_state_get(d->w, "cdc_enabled", 0) != 0;
    d->retention_min = sim_state_get(d->w, "retention_min", 0);
    d->auth = (sim_store_auth_ctx){srv->stores, d->name, false, &srv->mu};
    sqlite3_set_authorizer(d->w, sim_store_auth, &d->auth);
    d->next = srv->dbs;
    srv->dbs = d;
    *out = d;
    return MCDC_OK;
}

void sim_owner_only(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || (st.st_mode & 077) == 0) return;
    if (chmod(path, st.st_mode & 0700) != 0)
        mcdc_log(MCDC_LOG_WARN, "sim: cannot make %s readable by its owner only: %s", path, strerror(errno));
}

sim_db *sim_find_db(sim_server *srv, const char *name) {
    for (sim_db *d = srv->dbs; d; d = d->next)
        if (mcdc_str_ieq(d->name, name)) return d;
    return NULL;
}
