/*
 * sim_sqlfn.c - the SQLite functions the engine registers on every
 * connection besides sim_val.c's: OBJECT_ID and HAS_PERMS_BY_NAME (they read
 * the catalog), CHARINDEX, REPLICATE, LEN, DATALENGTH, and sim_row_count
 * (sys.dm_db_partition_stats' row_count).
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* SQLite functions that need the database: OBJECT_ID, HAS_PERMS_BY_NAME. */
static void parse_objname(const char *s, char *schema, char *name, size_t cap) {
    tsql_tok *toks = NULL;
    int n = 0;
    snprintf(schema, cap, "dbo");
    name[0] = 0;
    if (tsql_lex(&toks, &n, s, strlen(s), NULL) != MCDC_OK) return;
    char parts[4][MCDC_IDENT_BYTES_MAX];
    int i = 0;
    int np = xl_name_parts(toks, &i, n, parts);
    if (np >= 1 && i == n) {
        snprintf(name, cap, "%s", parts[np - 1]);
        if (np >= 2 && parts[np - 2][0]) snprintf(schema, cap, "%s", parts[np - 2]);
    }
    mcdc_free(toks);
}

static void fn_object_id(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const char *s = (const char *)sqlite3_value_text(argv[0]);
    if (!s) { sqlite3_result_null(ctx); return; }
    char schema[SIM_NAME_MAX], name[SIM_NAME_MAX], full[2 * SIM_NAME_MAX + 2];
    parse_objname(s, schema, name, sizeof schema);
    snprintf(full, sizeof full, "%s.%s", schema, name);
    sqlite3_stmt *st;
    sqlite3 *c = sqlite3_context_db_handle(ctx);
    if (sqlite3_prepare_v2(c, "SELECT object_id FROM __sim_tables WHERE name = ? COLLATE NOCASE", -1, &st, NULL) != SQLITE_OK) {
        sqlite3_result_null(ctx);
        return;
    }
    sqlite3_bind_text(st, 1, full, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) sqlite3_result_int64(ctx, sqlite3_column_int64(st, 0));
    else sqlite3_result_null(ctx);
    sqlite3_finalize(st);
}

static void fn_has_perms(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const char *s = (const char *)sqlite3_value_text(argv[0]);
    const char *cls = (const char *)sqlite3_value_text(argv[1]);
    const char *perm = (const char *)sqlite3_value_text(argv[2]);
    const char *user = (const char *)sqlite3_value_text(argv[3]);
    int admin = sqlite3_value_int(argv[4]);
    if (!s || !cls) { sqlite3_result_null(ctx); return; }
    if (mcdc_str_ieq(cls, "DATABASE") && !admin && perm && mcdc_str_ieq(perm, "VIEW DATABASE STATE")) {
        /* a database-scope grant (GRANT VIEW DATABASE STATE TO user) */
        int yes = sim_has_scope_grant(sqlite3_context_db_handle(ctx), user, perm);
        sqlite3_result_int(ctx, yes);
        return;
    }
    if (!mcdc_str_ieq(cls, "OBJECT")) { sqlite3_result_int(ctx, admin ? 1 : 0); return; }
    char schema[SIM_NAME_MAX], name[SIM_NAME_MAX], full[2 * SIM_NAME_MAX + 2];
    parse_objname(s, schema, name, sizeof schema);
    snprintf(full, sizeof full, "%s.%s", schema, name);
    sqlite3 *c = sqlite3_context_db_handle(ctx);
    if (!sim_table_exists(c, full)) { sqlite3_result_null(ctx); return; }
    if (admin) { sqlite3_result_int(ctx, 1); return; }
    if (perm && !mcdc_str_ieq(perm, "SELECT")) { sqlite3_result_int(ctx, 0); return; }
    sqlite3_result_int(ctx, user && sim_has_grant(c, user, full) ? 1 : 0);
}

/* CHARINDEX(find, in [, start]): 1-based, case-insensitive (ASCII), in
 * characters; 0 when absent. */
static void fn_charindex(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    const char *a = (const char *)sqlite3_value_text(argv[0]), *b = (const char *)sqlite3_value_text(argv[1]);
    if (!a || !b || (argc == 3 && sqlite3_value_type(argv[2]) == SQLITE_NULL)) { sqlite3_result_null(ctx); return; }
    int64_t start = argc == 3 ? sqlite3_value_int64(argv[2]) : 1;
    if (start < 1) start = 1;
    const char *from = b;
    for (int64_t ch = 1; ch < start && *from; ch++) { /* skip start-1 UTF-8 characters */
        from++;
        while ((*(const unsigned char *)from & 0xC0) == 0x80) from++;
    }
    const char *p = *a ? strcasestr(from, a) : NULL;
    if (!p) { sqlite3_result_int64(ctx, 0); return; }
    int64_t chars = 1;
    for (const char *q = b; q < p; q++) if ((*(const unsigned char *)q & 0xC0) != 0x80) chars++;
    sqlite3_result_int64(ctx, chars);
}

/* REPLICATE(s, n): NULL for a negative n, "" for 0; bounded by SQLite's
 * string length limit. */
static void fn_replicate(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    const unsigned char *t = sqlite3_value_text(argv[0]);
    int64_t n = sqlite3_value_int64(argv[1]);
    size_t len = (size_t)sqlite3_value_bytes(argv[0]);
    if (!t || n < 0) { sqlite3_result_null(ctx); return; }
    int64_t cap = sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1);
    if (len > 0 && (uint64_t)n > (uint64_t)cap / len) { sqlite3_result_error_toobig(ctx); return; }
    size_t total = len * (size_t)n;
    char *out = sqlite3_malloc64(total + 1);
    if (!out) { sqlite3_result_error_nomem(ctx); return; }
    for (int64_t k = 0; k < n; k++) memcpy(out + (size_t)k * len, t, len);
    out[total] = 0;
    sqlite3_result_text64(ctx, out, total, sqlite3_free, SQLITE_UTF8);
}

/* LEN(s): characters without trailing spaces. */
static void fn_len(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    if (sqlite3_value_type(argv[0]) == SQLITE_BLOB) { sqlite3_result_int64(ctx, sqlite3_value_bytes(argv[0])); return; }
    const unsigned char *t = sqlite3_value_text(argv[0]);
    size_t n = (size_t)sqlite3_value_bytes(argv[0]);
    while (n > 0 && t[n - 1] == ' ') n--;
    int64_t chars = 0;
    for (size_t k = 0; k < n; k++) if ((t[k] & 0xC0) != 0x80) chars++;
    sqlite3_result_int64(ctx, chars);
}

/* DATALENGTH(s, unit): bytes; unit 2 = UTF-16 (nchar/nvarchar), 1 = the
 * UTF-8 bytes stand for single-byte characters. */
static void fn_datalength(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    int ty = sqlite3_value_type(argv[0]);
    if (ty == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    if (ty == SQLITE_BLOB) { sqlite3_result_int64(ctx, sqlite3_value_bytes(argv[0])); return; }
    if (ty == SQLITE_INTEGER) { sqlite3_result_int64(ctx, 8); return; }
    if (ty == SQLITE_FLOAT) { sqlite3_result_int64(ctx, 8); return; }
    const unsigned char *t = sqlite3_value_text(argv[0]);
    size_t n = (size_t)sqlite3_value_bytes(argv[0]);
    int64_t units = 0;
    for (size_t k = 0; k < n; k++) {
        if ((t[k] & 0xC0) == 0x80) continue;
        units += (t[k] >= 0xF0) ? 2 : 1; /* a 4-byte UTF-8 character is a surrogate pair */
    }
    sqlite3_result_int64(ctx, sqlite3_value_int(argv[1]) == 2 ? units * 2 : units);
}

/* sim_row_count(name): the rows of the table "name" on this connection
 * (what its transaction sees), NULL when there is no such table. */
static void fn_row_count(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const char *name = (const char *)sqlite3_value_text(argv[0]);
    char *sql = name ? sqlite3_mprintf("SELECT count(*) FROM \"%w\"", name) : NULL;
    sqlite3_stmt *st = NULL;
    if (sql && sqlite3_prepare_v2(sqlite3_context_db_handle(ctx), sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        sqlite3_result_int64(ctx, sqlite3_column_int64(st, 0));
    else
        sqlite3_result_null(ctx);
    sqlite3_finalize(st);
    sqlite3_free(sql);
}

int sim_conn_setup(sqlite3 *c, const sim_clock_src *clk) {
    sqlite3_busy_timeout(c, 10000);
    /* "x" is an identifier, never a string (SQLite's legacy fallback off) */
    sqlite3_db_config(c, SQLITE_DBCONFIG_DQS_DML, 0, (int *)NULL);
    sqlite3_db_config(c, SQLITE_DBCONFIG_DQS_DDL, 0, (int *)NULL);
    if (sim_val_register(c, clk) != MCDC_OK) return MCDC_E_IO;
    sqlite3_create_function(c, "sim_object_id", 1, SQLITE_UTF8, NULL, fn_object_id, NULL, NULL);
    sqlite3_create_function(c, "sim_has_perms", 5, SQLITE_UTF8, NULL, fn_has_perms, NULL, NULL);
    sqlite3_create_function(c, "sim_row_count", 1, SQLITE_UTF8, NULL, fn_row_count, NULL, NULL);
    sqlite3_create_function(c, "sim_charindex", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_charindex, NULL, NULL);
    sqlite3_create_function(c, "sim_charindex", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_charindex, NULL, NULL);
    sqlite3_create_function(c, "sim_replicate", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_replicate, NULL, NULL);
    sqlite3_create_function(c, "sim_len", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_len, NULL, NULL);
    sqlite3_create_function(c, "sim_datalength", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_datalength, NULL, NULL);
    return MCDC_OK;
}
