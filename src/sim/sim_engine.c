/*
 * sim_engine.c - the simulator's SQL Server model: server state, sessions,
 * logins, T-SQL batches and RPCs, DDL/DML with transactions, faults.
 * CDC (procedures, change rows, capture) lives in sim_cdc.c, the workload
 * generator and bulk loader in sim_work.c, T-SQL -> SQLite translation in
 * tsql_xlate.c, values/conversions/date functions in sim_val.c, zones in
 * sim_tz.c.
 *
 * T-SQL surface: CREATE/DROP DATABASE, USE, CREATE/DROP TABLE (the types of
 * sim_type, NULL/NOT NULL, PRIMARY KEY, UNIQUE), ALTER TABLE ADD / DROP
 * COLUMN, INSERT ... VALUES (multi-row) / SELECT / DEFAULT VALUES, UPDATE and
 * DELETE with WHERE, BEGIN TRAN / COMMIT / ROLLBACK, SELECT with joins,
 * subqueries, CTEs, UNION ALL, TOP, OFFSET/FETCH, window functions (NTILE,
 * LAG, ROW_NUMBER...), CONVERT/CAST (styles 1, 2, 126), AT TIME ZONE,
 * DATEADD/DATEDIFF/DATEPART, system functions (SERVERPROPERTY,
 * CURRENT_TIMEZONE_ID, SYSDATETIME..., OBJECT_ID, QUOTENAME,
 * HAS_PERMS_BY_NAME, @@SPID, @@VERSION), string functions (LEN, DATALENGTH,
 * LEFT, RIGHT, SUBSTRING, UPPER, LOWER, LTRIM, RTRIM, CHARINDEX, REPLACE,
 * REPLICATE, CONCAT), DECLARE/SET/SELECT @v, IF/ELSE,
 * BEGIN...END blocks, EXEC with named or positional arguments, SET options
 * (NOCOUNT honoured; the rest accepted), CREATE LOGIN/USER, GRANT/REVOKE
 * SELECT, sys.columns/sys.tables/sys.objects/sys.databases,
 * sys.dm_exec_session_wait_stats, sp_spaceused, sp_executesql (RPC or EXEC,
 * with OUTPUT parameters).
 *
 * Results: one done() per statement, in order (the TDS layer sets DONE_MORE
 * on all but the last); statements inside EXEC/RPC use in_proc, then the
 * procedure sends return_status(0) and a done(in_proc = false). A failing
 * statement sends message(error) + done(error) and the batch goes on, except
 * after a syntax error (102/105), which ends the batch as SQL Server's parse
 * would.
 *
 * Numeric literals SQLite cannot hold exactly (more than 15 significant
 * digits with a '.', integers past 2^63-1) are passed as exact decimal
 * text, typed numeric(p,s) as SQL Server types them.
 *
 * The reader's change query (reference §3.1 row 8) is served by a fast
 * path (sim_engine_fast.c) with the same columns and values as the general
 * path; EXEC sim.set_fast_path @on = 0 turns it off (tests compare both).
 *
 * Known deviations from SQL Server (documented for test authors):
 * - The server clock never runs backwards: a host wall-clock step back is
 *   absorbed (sim.set_clock and a negative sim.advance_clock still move it).
 * - sim.fault spares the session that set it (by a per-login serial, not
 *   the SPID, which is reused).
 * - Isolation is READ COMMITTED approximated per table. Sessions share one
 *   writer connection per database and every statement is committed to
 *   SQLite at once (ROLLBACK replays undo SQL). A read - SELECT, SET/SELECT
 *   @v = (SELECT ...), the expressions of IF and EXEC arguments - of a table
 *   that another session's open transaction changed (DML or DDL; by table
 *   name, past 16 tables any table of that database) waits until that
 *   transaction commits or rolls back, polling every 5 ms: SET LOCK_TIMEOUT
 *   n gives error 1222 after about n ms (0 at once; -1, the default, waits
 *   forever); an ATTENTION (a client's query timeout) ends the wait; a
 *   cycle of waiting sessions makes the session that closes it the
 *   deadlock victim (error 1205: its transaction rolled back, the batch
 *   ends). Writers wait by row: an UPDATE/DELETE whose WHERE matches a row
 *   (by rowid) another open transaction inserted, updated or deleted, and
 *   an INSERT/UPDATE that hits a duplicate key in a table another open
 *   transaction changed, wait for that transaction (same timeout,
 *   attention and deadlock rules), then run again; past 65536 rows a
 *   transaction holds every row of its tables. The subqueries and the
 *   SELECT of DML (INSERT ... SELECT) wait as reads do; the WHERE of an
 *   UPDATE/DELETE on its own target sees other transactions' uncommitted
 *   values (it waits only for the rows it matches); DDL takes no schema
 *   lock. Never wait: reads WITH (NOLOCK)/READUNCOMMITTED or under SET
 *   TRANSACTION ISOLATION LEVEL READ UNCOMMITTED (they see uncommitted
 *   rows); sys.* views, CDC procedures and functions (change tables only
 *   ever hold committed, captured rows). Readers hold no locks (writers
 *   never wait for them); REPEATABLE READ, SERIALIZABLE and SNAPSHOT
 *   behave as this READ COMMITTED.
 * - ROLLBACK undoes DML and CREATE TABLE, DROP TABLE, ALTER TABLE ADD/DROP
 *   COLUMN (with the cdc.ddl_history rows of the ALTER): a DDL inside a
 *   transaction saves a copy of the table (rows, rowids, CREATE statement,
 *   catalog rows) that ROLLBACK restores and COMMIT drops; GRANT/REVOKE
 *   SELECT and CREATE USER are undone too. Not undone: the CDC procedures
 *   (sys.sp_cdc_enable/disable_db/_table...) and the capture instances a
 *   DROP TABLE removes, CREATE LOGIN, CREATE/DROP DATABASE; they take
 *   effect at once.
 * - decimal/money values are stored as exact text in columns declared
 *   TEXT COLLATE sim_decimal: comparisons (with literals, columns,
 *   parameters, CAST/CONVERT results, decimal variables), ORDER BY,
 *   GROUP BY, MIN/MAX and PRIMARY KEY/UNIQUE indexes use the exact numeric
 *   value; SUM/AVG over decimal text are exact (sim_sum/sim_avg; SUM(decimal
 *   (p,s)) -> decimal(38,s), AVG -> decimal(38,max(s,6)) truncated, AVG(int)
 *   -> int). Arithmetic (+ - * / %) is typed as SQL Server types it
 *   (decimal(p,s) by its precision/scale rules, money, int, bigint, float)
 *   but + - * / compute through double (exact to about 15 significant
 *   digits); % is exact on decimal text (sim_mod); / and % by zero give
 *   error 8134 (sim_div, sim_mod), except after * or / in one chain
 *   (a * b / c, a * b % c), where SQLite's operators remain (NULL for a
 *   zero divisor, % on integers). Opening a data dir of an older build
 *   rebuilds its user tables with these declarations (rows, rowids, keys
 *   kept); change tables created by an older build keep their old
 *   declarations.
 * - String columns (char/varchar/nchar/nvarchar) are declared TEXT COLLATE
 *   sim_ci: comparisons, ORDER BY, GROUP BY and keys ignore case for Latin
 *   (Basic, Latin-1, Extended-A), Greek and Cyrillic letters, are
 *   accent-sensitive and ignore trailing spaces, as SQL_Latin1_General_
 *   CP1_CI_AS; the order is by code point after lower-casing (not SQL
 *   Server's dictionary order: 'e' < 'z' < 'é'). Two string literals or
 *   variables compare case- and space-sensitively (no column collation).
 *   LIKE follows T-SQL (%, _, [set], [^set], [a-z], ESCAPE) with the same
 *   case folding, trailing spaces significant; it never uses an index.
 *   (Older data dirs: as above.)
 * - datetimeoffset columns (TEXT COLLATE sim_dto) compare by the UTC
 *   instant, as SQL Server; other date/time values compare as their ISO
 *   text (right within one type). uniqueidentifier columns (TEXT COLLATE
 *   sim_guid) sort in SQL Server's byte-group order.
 * - Capture-instance gating roles (@role_name) are stored, not enforced.
 * - RPC OUTPUT parameters: sp_executesql (and sp_prepexec/sp_execute, which
 *   the TDS layer keeps as handles and rewrites to it) sends a RETURNVALUE
 *   per parameter the RPC flagged as output and @params declared OUTPUT,
 *   after RETURNSTATUS, ordinal = 0-based position in the RPC as sent
 *   (error 8162 when not declared OUTPUT); a batch's EXEC sp_executesql
 *   ... @v OUTPUT sets @v. Other procedures (sys.sp_cdc_*, sim.*) have no
 *   OUTPUT parameters. (sp_prepare/sp_execute/sp_unprepare handles live per
 *   connection, as in SQL Server: tds_prep.c.)
 * - ASYNC_NETWORK_IO wait_time_ms is what the TDS layer reports through
 *   sim_session_add_network_wait (0 until it does).
 */
#include "sim_engine_int.h"

#include <ctype.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- small helpers ----------------------------------------------------- */
int sim_err(mcdc_error *err, int number, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mcdc_error_vset(err, number == 229 || number == 262 ? MCDC_E_PERMISSION : MCDC_E_SERVER, fmt, ap);
    va_end(ap);
    if (err) {
        err->server_number = number;
        err->server_class = number == 18456 ? 14 : number == 2627 ? 14 : 16;
        err->server_state = 1;
    }
    return MCDC_E_SERVER;
}

static bool ci_prefix(const char *s, const char *p) { return mcdc_str_nieq(s, p, strlen(p)); }

int sim_sqlite_err(sqlite3 *c, int rc, mcdc_error *err) {
    const char *m = sqlite3_errmsg(c);
    if (err && err->server_number) return MCDC_E_SERVER; /* already mapped */
    if (ci_prefix(m, "no such table: ")) {
        const char *n = m + 15;
        const char *dot = strchr(n, '.');
        if (dot && mcdc_str_nieq(n, "dbo.", 4)) n = dot + 1;
        return sim_err(err, 208, "Invalid object name '%s'.", n);
    }
    if (ci_prefix(m, "no such column: ")) {
        const char *n = m + 16;
        const char *dot = strrchr(n, '.');
        if (dot && !strchr(n, '"')) n = dot + 1;
        return sim_err(err, 207, "Invalid column name '%s'.", n);
    }
    if (ci_prefix(m, "ambiguous column name: ")) return sim_err(err, 209, "Ambiguous column name '%s'.", m + 23);
    if (ci_prefix(m, "UNIQUE constraint failed: ") || ci_prefix(m, "PRIMARY KEY")) {
        char tbl[SIM_NAME_MAX] = "";
        const char *p = m + 26;
        size_t k = 0;
        /* "dbo.t.col" -> table dbo.t */
        const char *last = strrchr(p, '.');
        if (last) {
            const char *comma = strchr(p, ',');
            if (comma && comma < last) last = strrchr(p, '.');
            k = (size_t)(last - p) < sizeof tbl - 1 ? (size_t)(last - p) : sizeof tbl - 1;
            const char *c2 = strchr(p, ',');
            if (c2) {
                /* multi-column key: table part is before the first column */
                const char *d1 = p;
                int dots = 0;
                for (const char *q = p; q < c2; q++) if (*q == '.') { dots++; if (dots == 2) { d1 = q; break; } }
                k = (size_t)(d1 - p) < sizeof tbl - 1 ? (size_t)(d1 - p) : sizeof tbl - 1;
            }
            memcpy(tbl, p, k);
            tbl[k] = 0;
        }
        const char *tn = strchr(tbl, '.') ? strchr(tbl, '.') + 1 : tbl;
        int r = sim_err(err, 2627,
                        "Violation of PRIMARY KEY constraint 'PK_%s'. Cannot insert duplicate key in object '%s'.",
                        tn, tbl);
        if (err) err->server_class = 14;
        return r;
    }
    if (ci_prefix(m, "NOT NULL constraint failed: ")) {
        const char *p = m + 28;
        const char *last = strrchr(p, '.');
        char tbl[SIM_NAME_MAX] = "";
        size_t k = last ? (size_t)(last - p) : 0;
        if (k >= sizeof tbl) k = sizeof tbl - 1;
        memcpy(tbl, p, k);
        tbl[k] = 0;
        return sim_err(err, 515,
                       "Cannot insert the value NULL into column '%s', table '%s'; column does not allow nulls. INSERT fails.",
                       last ? last + 1 : p, tbl);
    }
    if (strstr(m, "syntax error")) {
        const char *q = strchr(m, '"');
        char near[128] = "";
        if (q) {
            const char *e = strchr(q + 1, '"');
            size_t k = e ? (size_t)(e - q - 1) : 0;
            if (k >= sizeof near) k = sizeof near - 1;
            memcpy(near, q + 1, k);
            near[k] = 0;
        }
        return sim_err(err, 102, "Incorrect syntax near '%s'.", near);
    }
    if (strstr(m, "Arithmetic overflow")) return sim_err(err, 8115, "%s", m);
    if (strstr(m, "Divide by zero")) return sim_err(err, 8134, "%s", m);
    if (strstr(m, "Conversion failed") || strstr(m, "converting")) return sim_err(err, 245, "%s", m);
    if (strstr(m, "time zone")) return sim_err(err, 9820, "%s", m);
    if (strstr(m, "datediff")) return sim_err(err, 535, "%s", m);
    if (rc == SQLITE_NOMEM) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return sim_err(err, 50000, "%s", m);
}

int sim_sql(sqlite3 *c, mcdc_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *q = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    if (!q) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = sqlite3_exec(c, q, NULL, NULL, NULL);
    sqlite3_free(q);
    if (rc != SQLITE_OK) return sim_sqlite_err(c, rc, err);
    return MCDC_OK;
}

/* ---- clock / LSN ------------------------------------------------------- */
/* The server clock: wall clock + offset, never earlier than a reading
 * already handed out. A host clock stepping back (NTP, a paused VM) would
 * otherwise stamp a commit later than the capture scan that follows it,
 * which then leaves the commit out (latency check), and give mapping
 * entries times that go back while LSNs go up. */
int64_t sim_srv_utc_us(sim_server *srv) {
    int64_t now = mcdc_now_utc_us() + srv->clock_off_us;
    int64_t last = atomic_load(&srv->clock_last_us);
    while (now > last && !atomic_compare_exchange_weak(&srv->clock_last_us, &last, now)) {}
    return now > last ? now : last;
}

void sim_srv_clock_reset(sim_server *srv) { atomic_store(&srv->clock_last_us, INT64_MIN); }

int64_t sim_srv_local_us(sim_server *srv, int64_t utc_us) {
    int64_t s = utc_us >= 0 ? utc_us / 1000000 : (utc_us - 999999) / 1000000;
    return utc_us + (int64_t)sim_tz_offset_at(srv->tz, s) * 1000000;
}

void sim_lsn_bytes(uint64_t v, uint8_t out[10]) {
    out[0] = out[1] = 0;
    for (int k = 0; k < 8; k++) out[2 + k] = (uint8_t)(v >> (8 * (7 - k)));
}

uint64_t sim_lsn_value(const uint8_t *b, int n) {
    uint64_t v = 0;
    for (int k = n > 8 ? n - 8 : 0; k < n; k++) v = (v << 8) | b[k];
    return v;
}

uint64_t sim_lsn_next(sim_db *d) { return ++d->lsn; }

int sim_db_state_put(sim_db *d, const char *k, int64_t v) {
    return sim_sql(d->w, NULL, "INSERT OR REPLACE INTO __sim_state(k, v) VALUES (%Q, %lld)", k, (long long)v);
}

static int64_t state_get(sqlite3 *c, const char *k, int64_t dflt) {
    sqlite3_stmt *st;
    int64_t v = dflt;
    if (sqlite3_prepare_v2(c, "SELECT v FROM __sim_state WHERE k = ?", -1, &st, NULL) != SQLITE_OK) return dflt;
    sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static int clk_spid(void *ctx) { (void)ctx; return 0; }
static int64_t clk_utc(void *ctx) { return sim_srv_utc_us(ctx); }
static int clk_off(void *ctx, int64_t utc_s) { return sim_tz_offset_at(((sim_server *)ctx)->tz, utc_s); }
static const char *clk_zone(void *ctx, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", sim_tz_name(((sim_server *)ctx)->tz));
    return buf;
}

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

static bool table_exists_c(sqlite3 *c, const char *name) {
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

static bool has_grant(sqlite3 *c, const char *user, const char *obj) {
    sqlite3_stmt *st;
    bool ok = false;
    if (sqlite3_prepare_v2(c, "SELECT 1 FROM __sim_grants WHERE principal = ? COLLATE NOCASE AND object = ? COLLATE NOCASE AND perm = 'SELECT'",
                           -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, obj, -1, SQLITE_STATIC);
    ok = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return ok;
}

static void fn_has_perms(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const char *s = (const char *)sqlite3_value_text(argv[0]);
    const char *cls = (const char *)sqlite3_value_text(argv[1]);
    const char *perm = (const char *)sqlite3_value_text(argv[2]);
    const char *user = (const char *)sqlite3_value_text(argv[3]);
    int admin = sqlite3_value_int(argv[4]);
    if (!s || !cls) { sqlite3_result_null(ctx); return; }
    if (!mcdc_str_ieq(cls, "OBJECT")) { sqlite3_result_int(ctx, admin ? 1 : 0); return; }
    char schema[SIM_NAME_MAX], name[SIM_NAME_MAX], full[2 * SIM_NAME_MAX + 2];
    parse_objname(s, schema, name, sizeof schema);
    snprintf(full, sizeof full, "%s.%s", schema, name);
    sqlite3 *c = sqlite3_context_db_handle(ctx);
    if (!table_exists_c(c, full)) { sqlite3_result_null(ctx); return; }
    if (admin) { sqlite3_result_int(ctx, 1); return; }
    if (perm && !mcdc_str_ieq(perm, "SELECT")) { sqlite3_result_int(ctx, 0); return; }
    sqlite3_result_int(ctx, user && has_grant(c, user, full) ? 1 : 0);
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

static int conn_setup(sqlite3 *c, const sim_clock_src *clk) {
    sqlite3_busy_timeout(c, 10000);
    /* "x" is an identifier, never a string (SQLite's legacy fallback off) */
    sqlite3_db_config(c, SQLITE_DBCONFIG_DQS_DML, 0, (int *)NULL);
    sqlite3_db_config(c, SQLITE_DBCONFIG_DQS_DDL, 0, (int *)NULL);
    if (sim_val_register(c, clk) != MCDC_OK) return MCDC_E_IO;
    sqlite3_create_function(c, "sim_object_id", 1, SQLITE_UTF8, NULL, fn_object_id, NULL, NULL);
    sqlite3_create_function(c, "sim_has_perms", 5, SQLITE_UTF8, NULL, fn_has_perms, NULL, NULL);
    sqlite3_create_function(c, "sim_charindex", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_charindex, NULL, NULL);
    sqlite3_create_function(c, "sim_charindex", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_charindex, NULL, NULL);
    sqlite3_create_function(c, "sim_replicate", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_replicate, NULL, NULL);
    sqlite3_create_function(c, "sim_len", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_len, NULL, NULL);
    sqlite3_create_function(c, "sim_datalength", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_datalength, NULL, NULL);
    return MCDC_OK;
}

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
    "CREATE VIEW IF NOT EXISTS \"sys.columns\" AS SELECT t.object_id AS object_id, c.name AS name,"
    " c.column_id AS column_id, 0 AS is_computed, c.nullable AS is_nullable,"
    " CASE WHEN c.type LIKE '%char%' THEN 'SQL_Latin1_General_CP1_CI_AS' END AS collation_name"
    " FROM __sim_columns c JOIN __sim_tables t ON t.name = c.tbl;"
    "CREATE VIEW IF NOT EXISTS \"sys.tables\" AS SELECT object_id, table_name AS name, schema_name,"
    " create_date, is_cdc AS is_tracked_by_cdc FROM __sim_tables WHERE schema_name <> 'cdc';"
    "CREATE VIEW IF NOT EXISTS \"sys.objects\" AS SELECT object_id, table_name AS name, CASE schema_name WHEN 'dbo'"
    " THEN 1 WHEN 'cdc' THEN 5 ELSE 7 END AS schema_id, 'U' AS type, 'USER_TABLE' AS type_desc, create_date"
    " FROM __sim_tables;";

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

static int db_open(sim_server *srv, const char *name, bool create, sim_db **out, mcdc_error *err) {
    sim_db *d = mcdc_calloc(1, sizeof *d);
    if (!d) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->path, sizeof d->path, "%s/%s.db", srv->data_dir, name);
    for (char *p = d->path + strlen(srv->data_dir) + 1; *p; p++) *p = (char)tolower((unsigned char)*p);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(d->path, &d->w, flags, NULL) != SQLITE_OK) {
        mcdc_error_set(err, MCDC_E_IO, "cannot open database file %s: %s", d->path, d->w ? sqlite3_errmsg(d->w) : "?");
        sqlite3_close(d->w);
        mcdc_free(d);
        return MCDC_E_IO;
    }
    int rc = conn_setup(d->w, &srv->clk);
    if (rc == MCDC_OK) rc = sim_sql(d->w, err, "PRAGMA cache_size = -65536");
    if (rc == MCDC_OK) rc = sim_sql(d->w, err, "%s", DB_SCHEMA);
    if (rc == MCDC_OK) rc = sim_cdc_init_db(d, err);
    if (rc == MCDC_OK) rc = db_migrate_collations(d, err);
    if (rc != MCDC_OK) {
        sqlite3_close(d->w);
        mcdc_free(d);
        return rc;
    }
    d->lsn = (uint64_t)state_get(d->w, "lsn", (int64_t)SIM_LSN_FIRST);
    d->tran_seq = (uint64_t)state_get(d->w, "tran_seq", 0x1000);
    d->cdc_enabled = state_get(d->w, "cdc_enabled", 0) != 0;
    d->retention_min = state_get(d->w, "retention_min", 0);
    d->auth = (sim_store_auth_ctx){srv->stores, d->name, false};
    sqlite3_set_authorizer(d->w, sim_store_auth, &d->auth);
    d->next = srv->dbs;
    srv->dbs = d;
    *out = d;
    return MCDC_OK;
}

sim_db *sim_find_db(sim_server *srv, const char *name) {
    for (sim_db *d = srv->dbs; d; d = d->next)
        if (mcdc_str_ieq(d->name, name)) return d;
    return NULL;
}

static sim_db *master_db(sim_server *srv) { return sim_find_db(srv, "master"); }

/* ---- server ------------------------------------------------------------ */
int sim_server_open(sim_server **out, const sim_config *cfg, mcdc_error *err) {
    *out = NULL;
    if (!cfg || !cfg->data_dir || !cfg->data_dir[0])
        return mcdc_error_set(err, MCDC_E_INVALID, "sim_server_open: data_dir is required");
    if (mkdir(cfg->data_dir, 0755) != 0 && errno != EEXIST)
        return mcdc_error_set(err, MCDC_E_IO, "cannot create data directory %s: %s", cfg->data_dir, strerror(errno));
    sim_server *srv = mcdc_calloc(1, sizeof *srv);
    if (srv) atomic_store(&srv->clock_last_us, INT64_MIN);
    if (!srv) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->cap_cv, NULL);
    sim_tz_retain();
    srv->data_dir = mcdc_strdup(cfg->data_dir);
    srv->sa_password = mcdc_strdup(cfg->sa_password ? cfg->sa_password : "");
    srv->product_major = cfg->product_major_version > 0 ? cfg->product_major_version : 16;
    srv->capture_poll_ms = cfg->capture_poll_ms;
    srv->capture_latency_ms = cfg->capture_latency_ms;
    srv->capture_maxtrans = cfg->capture_maxtrans > 0 ? cfg->capture_maxtrans : 500;
    if (sim_stores_create(&srv->stores, (int64_t)SIM_CHANGE_CACHE_MB_DEFAULT << 20, err) != MCDC_OK) {
        sim_server_close(srv);
        return MCDC_E_NOMEM;
    }
    srv->clk.ctx = srv;
    srv->clk.utc_us = clk_utc;
    srv->clk.offset_s = clk_off;
    srv->clk.zone_name = clk_zone;
    srv->clk.spid = clk_spid;
    srv->clk.product_major = srv->product_major;
    srv->tz = sim_tz_get(cfg->time_zone && cfg->time_zone[0] ? cfg->time_zone : "UTC", err);
    if (!srv->tz || !srv->data_dir || !srv->sa_password) { sim_server_close(srv); return err ? err->code ? err->code : MCDC_E_NOMEM : MCDC_E_INVALID; }
    sim_db *m;
    int rc = db_open(srv, "master", true, &m, err);
    if (rc == MCDC_OK)
        rc = sim_sql(m->w, err,
                     "CREATE TABLE IF NOT EXISTS __sim_logins(name TEXT PRIMARY KEY COLLATE NOCASE, password TEXT, is_admin INT);"
                     "CREATE TABLE IF NOT EXISTS __sim_databases(name TEXT PRIMARY KEY COLLATE NOCASE);"
                     "CREATE TABLE IF NOT EXISTS __sim_server(k TEXT PRIMARY KEY, v);"
                     "INSERT OR REPLACE INTO __sim_logins VALUES ('sa', %Q, 1);",
                     srv->sa_password);
    if (rc != MCDC_OK) { sim_server_close(srv); return rc; }
    /* stored state wins */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->w, "SELECT k, v FROM __sim_server", -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *k = (const char *)sqlite3_column_text(st, 0);
            if (k && strcmp(k, "clock_off_us") == 0) srv->clock_off_us = sqlite3_column_int64(st, 1);
            else if (k && strcmp(k, "zone") == 0) {
                const sim_tz *z = sim_tz_get((const char *)sqlite3_column_text(st, 1), NULL);
                if (z) srv->tz = z;
            } else if (k && strcmp(k, "capture_latency_ms") == 0) srv->capture_latency_ms = sqlite3_column_int(st, 1);
            else if (k && strcmp(k, "capture_maxtrans") == 0) srv->capture_maxtrans = sqlite3_column_int(st, 1);
        }
        sqlite3_finalize(st);
    }
    if (sqlite3_prepare_v2(m->w, "SELECT name FROM __sim_databases", -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW && rc == MCDC_OK) {
            sim_db *d;
            rc = db_open(srv, (const char *)sqlite3_column_text(st, 0), false, &d, err);
        }
        sqlite3_finalize(st);
    }
    if (rc != MCDC_OK) { sim_server_close(srv); return rc; }
    if (srv->capture_poll_ms > 0) {
        if (pthread_create(&srv->cap_thread, NULL, sim_cdc_thread, srv) != 0) {
            sim_server_close(srv);
            return mcdc_error_set(err, MCDC_E_IO, "cannot start the capture thread");
        }
        srv->cap_started = true;
    }
    *out = srv;
    return MCDC_OK;
}

void sim_server_set_change_cache_mb(sim_server *srv, int mb) {
    sim_stores_set_limit(srv->stores, mb > 0 ? (int64_t)mb << 20 : 0);
}

int sim_server_state_put(sim_server *srv, const char *k, const char *text, int64_t v);
int sim_server_state_put(sim_server *srv, const char *k, const char *text, int64_t v) {
    sim_db *m = master_db(srv);
    if (!m) return MCDC_E_INVALID;
    if (text) return sim_sql(m->w, NULL, "INSERT OR REPLACE INTO __sim_server VALUES (%Q, %Q)", k, text);
    return sim_sql(m->w, NULL, "INSERT OR REPLACE INTO __sim_server VALUES (%Q, %lld)", k, (long long)v);
}

void sim_server_close(sim_server *srv) {
    if (!srv) return;
    sim_work_stop_all(srv);
    if (srv->cap_started) {
        pthread_mutex_lock(&srv->mu);
        srv->stop = true;
        pthread_cond_broadcast(&srv->cap_cv);
        pthread_mutex_unlock(&srv->mu);
        pthread_join(srv->cap_thread, NULL);
    }
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++)
        if (srv->sessions[k]) sim_session_close(srv->sessions[k]);
    while (srv->dbs) {
        sim_db *d = srv->dbs;
        srv->dbs = d->next;
        sqlite3_close_v2(d->w);
        mcdc_free(d);
    }
    sim_stores_free(srv->stores);
    pthread_cond_destroy(&srv->cap_cv);
    pthread_mutex_destroy(&srv->mu);
    mcdc_free(srv->data_dir);
    mcdc_free(srv->sa_password);
    mcdc_free(srv);
    sim_tz_release();
}

/* ---- sessions ----------------------------------------------------------- */
static int sess_clk_spid(void *ctx) { return ((sim_session *)ctx)->spid; }
static int64_t sess_clk_utc(void *ctx) { return sim_srv_utc_us(((sim_session *)ctx)->srv); }
static int sess_clk_off(void *ctx, int64_t utc_s) { return sim_tz_offset_at(((sim_session *)ctx)->srv->tz, utc_s); }
static const char *sess_clk_zone(void *ctx, char *buf, size_t cap) {
    return clk_zone(((sim_session *)ctx)->srv, buf, cap);
}

static void fast_cache_drop(sim_session *s);

static int sess_use(sim_session *s, sim_db *d, mcdc_error *err) {
    sqlite3 *rd = NULL;
    if (sqlite3_open_v2(d->path, &rd, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        mcdc_error_set(err, MCDC_E_IO, "cannot open %s for reading: %s", d->path, rd ? sqlite3_errmsg(rd) : "?");
        sqlite3_close(rd);
        return MCDC_E_IO;
    }
    conn_setup(rd, &s->clk);
    sqlite3_exec(rd, "PRAGMA cache_size = -16384; PRAGMA mmap_size = 268435456", NULL, NULL, NULL);
    sqlite3_stmt *conv = NULL;
    if (sqlite3_prepare_v3(rd, "SELECT sim_convert(?1, ?2, NULL)", -1, SQLITE_PREPARE_PERSISTENT, &conv, NULL) != SQLITE_OK) {
        sqlite3_close(rd);
        return mcdc_error_set(err, MCDC_E_IO, "cannot prepare on %s", d->path);
    }
    fast_cache_drop(s);
    if (s->conv) sqlite3_finalize(s->conv);
    if (s->rd) sqlite3_close(s->rd);
    s->rd = rd;
    s->conv = conv;
    s->db = d;
    return MCDC_OK;
}

static bool db_has_user(sim_db *d, const char *login) {
    sqlite3_stmt *st;
    bool ok = false;
    if (sqlite3_prepare_v2(d->w, "SELECT 1 FROM __sim_users WHERE login = ? COLLATE NOCASE", -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, login, -1, SQLITE_STATIC);
    ok = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return ok;
}

static const char *db_user_name(sim_session *s, char *buf, size_t cap) {
    if (s->admin) { snprintf(buf, cap, "dbo"); return buf; }
    sqlite3_stmt *st;
    snprintf(buf, cap, "%s", s->login);
    if (sqlite3_prepare_v2(s->db->w, "SELECT name FROM __sim_users WHERE login = ? COLLATE NOCASE", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, s->login, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) snprintf(buf, cap, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    return buf;
}

int sim_login(sim_server *srv, sim_session **out, const char *user, const char *password, const char *database,
              const char *app_name, mcdc_error *err) {
    (void)app_name;
    *out = NULL;
    pthread_mutex_lock(&srv->mu);
    sim_db *m = master_db(srv);
    sqlite3_stmt *st;
    bool ok = false, admin = false;
    if (user && sqlite3_prepare_v2(m->w, "SELECT password, is_admin FROM __sim_logins WHERE name = ? COLLATE NOCASE", -1,
                                   &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
            const char *pw = (const char *)sqlite3_column_text(st, 0);
            ok = pw && password && strcmp(pw, password) == 0;
            admin = sqlite3_column_int(st, 1) != 0;
        }
        sqlite3_finalize(st);
    }
    if (!ok) {
        pthread_mutex_unlock(&srv->mu);
        sim_err(err, 18456, "Login failed for user '%s'.", user ? user : "");
        if (err) { err->code = MCDC_E_PERMISSION; err->server_class = 14; }
        return MCDC_E_PERMISSION;
    }
    sim_db *d = database && database[0] ? sim_find_db(srv, database) : m;
    if (!d || (!admin && d != m && !db_has_user(d, user))) {
        pthread_mutex_unlock(&srv->mu);
        sim_err(err, 4060, "Cannot open database \"%s\" requested by the login. The login failed.", database);
        if (err) { err->code = MCDC_E_PERMISSION; err->server_class = 11; }
        return MCDC_E_PERMISSION;
    }
    int slot = -1;
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) if (!srv->sessions[k]) { slot = k; break; }
    if (slot < 0) {
        pthread_mutex_unlock(&srv->mu);
        return mcdc_error_set(err, MCDC_E_LIMIT, "more than %d sessions (MCDC_SIM_SESSIONS_MAX)", MCDC_SIM_SESSIONS_MAX);
    }
    sim_session *s = mcdc_calloc(1, sizeof *s);
    if (!s) { pthread_mutex_unlock(&srv->mu); return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }
    s->srv = srv;
    s->spid = 51 + slot;
    s->serial = ++srv->next_serial;
    snprintf(s->login, sizeof s->login, "%s", user);
    s->admin = admin;
    s->packet_size = 4096;
    s->lock_timeout_ms = -1;
    s->clk = srv->clk;
    s->clk.ctx = s;
    s->clk.spid = sess_clk_spid;
    s->clk.utc_us = sess_clk_utc;
    s->clk.offset_s = sess_clk_off;
    s->clk.zone_name = sess_clk_zone;
    int rc = sess_use(s, d, err);
    if (rc != MCDC_OK) { pthread_mutex_unlock(&srv->mu); mcdc_free(s); return rc; }
    srv->sessions[slot] = s;
    pthread_mutex_unlock(&srv->mu);
    *out = s;
    return MCDC_OK;
}

static void vars_clear(sim_session *s) {
    for (int k = 0; k < s->nvars; k++) mcdc_free(s->vars[k].p);
    s->nvars = 0;
}

static void tran_rollback(sim_session *s);

void sim_session_close(sim_session *s) {
    if (!s) return;
    sim_server *srv = s->srv;
    pthread_mutex_lock(&srv->mu);
    if (s->trancount > 0) tran_rollback(s);
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) if (srv->sessions[k] == s) srv->sessions[k] = NULL;
    pthread_mutex_unlock(&srv->mu);
    mcdc_free(s->tran_rows);
    vars_clear(s);
    fast_cache_drop(s);
    if (s->conv) sqlite3_finalize(s->conv);
    if (s->rd) sqlite3_close(s->rd);
    mcdc_free(s);
}

int sim_session_spid(const sim_session *s) { return s->spid; }
const char *sim_session_database(const sim_session *s) { return s->db->name; }
void sim_session_set_packet_size(sim_session *s, int bytes) { s->packet_size = bytes; }

void sim_session_add_network_wait(sim_session *s, int64_t ms) {
    if (ms <= 0) return;
    pthread_mutex_lock(&s->srv->mu);
    s->net_wait_ms += ms;
    s->net_waits++;
    if (ms > s->net_wait_max_ms) s->net_wait_max_ms = ms;
    pthread_mutex_unlock(&s->srv->mu);
}

/* ---- variables ---------------------------------------------------------- */
static sim_var *var_find(sim_session *s, const char *name) {
    for (int k = 0; k < s->nvars; k++) if (mcdc_str_ieq(s->vars[k].name, name)) return &s->vars[k];
    return NULL;
}

static int var_declare(sim_session *s, const char *name, const sim_type *t, mcdc_error *err) {
    if (var_find(s, name))
        return sim_err(err, 134, "The variable name '%s' has already been declared. Variable names must be unique within a query batch or stored procedure.", name);
    if (s->nvars >= SIM_VARS_MAX) return mcdc_error_set(err, MCDC_E_LIMIT, "more than %d variables in a batch", SIM_VARS_MAX);
    sim_var *v = &s->vars[s->nvars++];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->type = *t;
    v->kind = SQLITE_NULL;
    return MCDC_OK;
}

/* Assigns a value converted to the variable's type. */
static int var_assign(sim_session *s, sim_var *v, sqlite3_value *val, mcdc_error *err) {
    char tn[64];
    sim_type_format(&v->type, tn, sizeof tn);
    sqlite3_reset(s->conv);
    sqlite3_bind_value(s->conv, 1, val);
    sqlite3_bind_text(s->conv, 2, tn, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(s->conv);
    if (rc != SQLITE_ROW) {
        int r = sim_sqlite_err(s->rd, rc, err);
        sqlite3_reset(s->conv);
        return r;
    }
    mcdc_free(v->p);
    v->p = NULL;
    v->n = 0;
    v->kind = sqlite3_column_type(s->conv, 0);
    if (v->kind == SQLITE_INTEGER) v->i = sqlite3_column_int64(s->conv, 0);
    else if (v->kind == SQLITE_FLOAT) v->f = sqlite3_column_double(s->conv, 0);
    else if (v->kind == SQLITE_TEXT || v->kind == SQLITE_BLOB) {
        const void *p = v->kind == SQLITE_TEXT ? (const void *)sqlite3_column_text(s->conv, 0) : sqlite3_column_blob(s->conv, 0);
        v->n = (size_t)sqlite3_column_bytes(s->conv, 0);
        v->p = mcdc_malloc(v->n + 1);
        if (!v->p) { sqlite3_reset(s->conv); return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }
        if (v->n) memcpy(v->p, p, v->n);
        v->p[v->n] = 0;
    }
    sqlite3_reset(s->conv);
    sqlite3_clear_bindings(s->conv);
    return MCDC_OK;
}

static int bind_vars(sim_session *s, sqlite3_stmt *st, mcdc_error *err) {
    int n = sqlite3_bind_parameter_count(st);
    for (int k = 1; k <= n; k++) {
        const char *nm = sqlite3_bind_parameter_name(st, k);
        if (!nm) return sim_err(err, 102, "Incorrect syntax near '?'.");
        if (nm[0] == '$' && nm[1] == '_' && nm[2] == '_') continue; /* the engine's own (fast path) */
        sim_var *v = var_find(s, nm);
        if (!v) return sim_err(err, 137, "Must declare the scalar variable \"%s\".", nm);
        switch (v->kind) {
        case SQLITE_INTEGER: sqlite3_bind_int64(st, k, v->i); break;
        case SQLITE_FLOAT: sqlite3_bind_double(st, k, v->f); break;
        case SQLITE_TEXT: sqlite3_bind_text(st, k, (const char *)v->p, (int)v->n, SQLITE_STATIC); break;
        case SQLITE_BLOB: sqlite3_bind_blob(st, k, v->p, (int)v->n, SQLITE_STATIC); break;
        default: sqlite3_bind_null(st, k); break;
        }
    }
    return MCDC_OK;
}

/* ---- translator environment --------------------------------------------- */
typedef struct env_ctx { sim_session *s; sqlite3 *c; } env_ctx;
static bool env_table_exists(void *ctx, const char *name) { return table_exists_c(((env_ctx *)ctx)->c, name); }
static bool env_col_type(void *ctx, const char *tbl, const char *col, sim_type *out, bool *nul) {
    return sim_col_type(((env_ctx *)ctx)->c, tbl, col, out, nul);
}
static bool env_var_type(void *ctx, const char *name, sim_type *out) {
    sim_var *v = var_find(((env_ctx *)ctx)->s, name);
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
            char *q = sqlite3_mprintf("%sSELECT %Q AS name, %d AS database_id, %d AS is_cdc_enabled, 1 AS snapshot_isolation_state,"
                                      " 1 AS is_read_committed_snapshot_on, %d AS compatibility_level, 'ONLINE' AS state_desc",
                                      first ? "" : " UNION ALL ", d->name, mcdc_str_ieq(d->name, "master") ? 1 : 4 + id++,
                                      d->cdc_enabled ? 1 : 0, s->srv->product_major * 10);
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
    env->user_name = db_user_name(s, user, ucap);
    env->is_admin = s->admin;
    env->product_major = s->srv->product_major;
    (void)wait_sql;
    env->dyn_view = env_dyn_view;
}

/* Permission check of a translated statement's tables. */
static int check_select_perms(sim_session *s, sqlite3 *c, const xl_result *r, mcdc_error *err) {
    if (s->admin) return MCDC_OK;
    for (int k = 0; k < r->ntables; k++) {
        const char *n = r->tables[k].name;
        if (ci_prefix(n, "sys.") || mcdc_str_ieq(n, "cdc.lsn_time_mapping")) continue;
        if (!has_grant(c, s->login, n)) {
            char user[SIM_NAME_MAX];
            db_user_name(s, user, sizeof user);
            if (has_grant(c, user, n)) continue;
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

/* ---- result emission ---------------------------------------------------- */
static void value_type(sqlite3_value *v, sim_type *t) {
    memset(t, 0, sizeof *t);
    switch (v ? sqlite3_value_type(v) : SQLITE_NULL) {
    case SQLITE_INTEGER: {
        int64_t i = sqlite3_value_int64(v);
        t->id = i >= INT32_MIN && i <= INT32_MAX ? SIM_T_INT : SIM_T_BIGINT;
        break;
    }
    case SQLITE_FLOAT: t->id = SIM_T_FLOAT; break;
    case SQLITE_TEXT: t->id = SIM_T_NVARCHAR; t->length = 4000; break;
    case SQLITE_BLOB: t->id = SIM_T_VARBINARY; t->length = 8000; break;
    default: t->id = SIM_T_INT; break;
    }
}

/* Column metadata of st: forced columns, the translator's items, the origin
 * column, else the first row's value type (returns false when that last
 * fallback was needed). */
static bool column_meta(sqlite3 *c, sqlite3_stmt *st, int first_rc, const xl_result *items, const sim_column *forced,
                        int nforced, sim_column *cols, char (*names)[SIM_NAME_MAX], int n) {
    bool all_known = true;
    for (int k = 0; k < n; k++) {
        sim_column *col = &cols[k];
        bool done = false;
        if (forced && k < nforced) {
            *col = forced[k];
            done = true;
        }
        const char *ot = sqlite3_column_table_name(st, k), *oc = sqlite3_column_origin_name(st, k);
        const char *alias = sqlite3_column_name(st, k);
        bool item = items && items->nitems == n && items->items[k].known;
        if (!done && item) {
            col->type = items->items[k].type;
            col->nullable = items->items[k].nullable;
            done = true;
        }
        if (!done && ot && oc && sim_col_type(c, ot, oc, &col->type, &col->nullable)) done = true;
        if (!done) {
            value_type(first_rc == SQLITE_ROW ? sqlite3_column_value(st, k) : NULL, &col->type);
            col->nullable = true;
            all_known = false;
        }
        if (!(forced && k < nforced)) {
            if (items && items->nitems == n && items->items[k].name[0])
                snprintf(names[k], SIM_NAME_MAX, "%s", items->items[k].name);
            else if (oc) snprintf(names[k], SIM_NAME_MAX, "%s", alias ? alias : oc);
            else if (items && items->nitems == n) names[k][0] = 0;
            else snprintf(names[k], SIM_NAME_MAX, "%s", alias ? alias : "");
            col->name = names[k];
        }
    }
    return all_known;
}

bool sim_result_columns(sqlite3 *c, sqlite3_stmt *st, const xl_result *items, sim_column *cols,
                        char (*names)[SIM_NAME_MAX], int n) {
    return column_meta(c, st, SQLITE_DONE, items, NULL, 0, cols, names, n);
}

int sim_emit_stmt(sim_session *s, sqlite3 *c, sqlite3_stmt *st, int first_rc, const xl_result *items,
                  const sim_column *forced, int nforced, const sim_sink *sink, bool in_proc, int64_t *rows,
                  mcdc_error *err, bool *aborted) {
    int n = sqlite3_column_count(st);
    *rows = 0;
    if (first_rc != SQLITE_ROW && first_rc != SQLITE_DONE) return sim_sqlite_err(c, first_rc, err);
    if (n > MCDC_COLUMNS_MAX) return mcdc_error_set(err, MCDC_E_LIMIT, "result has more than %d columns", MCDC_COLUMNS_MAX);
    sim_column *cols = mcdc_calloc((size_t)n + 1, sizeof *cols);
    sim_value *vals = mcdc_calloc((size_t)n + 1, sizeof *vals);
    char (*names)[SIM_NAME_MAX] = mcdc_calloc((size_t)n + 1, SIM_NAME_MAX);
    if (!cols || !vals || !names) {
        mcdc_free(cols); mcdc_free(vals); mcdc_free(names);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    column_meta(c, st, first_rc, items, forced, nforced, cols, names, n);
    int rc = MCDC_OK;
    if (sink->columns && sink->columns(sink->ctx, cols, n)) *aborted = true;
    int step = first_rc;
    int64_t cnt = 0;
    while (!*aborted && step == SQLITE_ROW) {
        for (int k = 0; k < n; k++) {
            /* sqlite3_value_* on the column's value: cheaper per cell than
             * the sqlite3_column_* wrappers (the hot loop of every read) */
            sim_store_value_of(&vals[k], sqlite3_column_value(st, k));
        }
        cnt++;
        if (sink->row && sink->row(sink->ctx, vals, n)) { *aborted = true; break; }
        step = sqlite3_step(st);
    }
    /* an error after rows: the caller sends ERROR + DONE(error), as SQL Server */
    if (!*aborted && step != SQLITE_DONE && step != SQLITE_ROW) rc = sim_sqlite_err(c, step, err);
    (void)s;
    (void)in_proc;
    *rows = cnt;
    mcdc_free(cols);
    mcdc_free(vals);
    mcdc_free(names);
    return rc;
}

/* ---- statements ---------------------------------------------------------- */
typedef struct stmt_ctx {
    sim_session *s;
    const sim_sink *sink;
    bool in_proc;
    bool aborted;
    const char *batch; /* whole batch text */
    /* the RPC's parameters (borrowed) while its procedure runs, for the
     * OUTPUT flags; NULL in a batch and in statements the procedure runs */
    const sim_param *rpc_params;
    int rpc_nparams, rpc_first; /* rpc_params[rpc_first] is argument 0 */
    bool batch_ended; /* an error that ends the batch (deadlock victim) */
} stmt_ctx;

/* The parameters an sp_executesql declared (@params), in order. */
typedef struct sql_params {
    int n;
    char names[32][SIM_NAME_MAX]; /* with '@' */
    int arg[32];                  /* the procedure argument that supplied it, -1 none */
    bool output[32];              /* declared OUTPUT */
} sql_params;

static int send_done(stmt_ctx *x, int64_t rows, bool has_count, bool error) {
    if (x->sink->done && x->sink->done(x->sink->ctx, rows, has_count && !x->s->nocount, x->in_proc, error))
        x->aborted = true;
    return MCDC_OK;
}

static int send_error(stmt_ctx *x, const mcdc_error *err, int line) {
    int num = err->server_number ? err->server_number : 50000;
    int cls = err->server_class ? err->server_class : 16;
    if (x->sink->message &&
        x->sink->message(x->sink->ctx, true, num, err->server_state ? err->server_state : 1, cls, err->message, "", line))
        x->aborted = true;
    return send_done(x, 0, false, true);
}

static int send_info(stmt_ctx *x, int number, const char *text) {
    if (x->sink->message && x->sink->message(x->sink->ctx, false, number, 1, 0, text, "", 1)) x->aborted = true;
    return MCDC_OK;
}

/* Finds the end of the statement starting at toks[i]. */
static int stmt_end(const tsql_tok *t, int i, int n) {
    static const char *STARTS[] = {"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "EXEC",
                                   "EXECUTE", "BEGIN", "COMMIT", "ROLLBACK", "USE", "SET", "DECLARE", "GRANT",
                                   "REVOKE", "DENY", "PRINT", "IF", "WHILE", "RETURN", "TRUNCATE", "WAITFOR",
                                   "CHECKPOINT", "SAVE", NULL};
    const tsql_tok *first = &t[i];
    bool is_update = tsql_tok_is(first, "UPDATE"), is_insert = tsql_tok_is(first, "INSERT");
    bool is_perm = tsql_tok_is(first, "GRANT") || tsql_tok_is(first, "REVOKE") || tsql_tok_is(first, "DENY");
    bool is_create = tsql_tok_is(first, "CREATE") || tsql_tok_is(first, "ALTER") || tsql_tok_is(first, "DROP");
    bool seen_set = false, seen_values = false, is_with = tsql_tok_is(first, "WITH");
    int d = 0, cases = 0;
    for (int k = i + 1; k < n; k++) {
        if (tsql_tok_op(&t[k], "(")) { d++; continue; }
        if (tsql_tok_op(&t[k], ")")) { d--; continue; }
        if (d > 0) continue;
        if (tsql_tok_op(&t[k], ";")) return k;
        if (t[k].t != TK_IDENT) continue;
        if (tsql_tok_is(&t[k], "CASE")) { cases++; continue; }
        if (tsql_tok_is(&t[k], "END")) { if (cases > 0) cases--; else return k; continue; }
        if (tsql_tok_is(&t[k], "ELSE") && cases == 0) return k; /* IF ... ELSE */
        if (tsql_tok_is(&t[k], "VALUES")) seen_values = true;
        if (tsql_tok_is(&t[k], "WITH")) {
            /* a common table expression starts a statement; WITH (NOLOCK),
             * WITH PASSWORD = ... do not */
            if (k + 2 < n && (t[k + 1].t == TK_IDENT || t[k + 1].t == TK_QIDENT) &&
                (tsql_tok_is(&t[k + 2], "AS") || tsql_tok_op(&t[k + 2], "(")))
                return k;
            continue;
        }
        if (tsql_tok_is(&t[k - 1], "WITH")) continue; /* WITH ROLLBACK IMMEDIATE */
        bool start = false;
        for (int w = 0; STARTS[w]; w++) if (tsql_tok_is(&t[k], STARTS[w])) { start = true; break; }
        if (!start) continue;
        const tsql_tok *prev = &t[k - 1];
        if (tsql_tok_is(&t[k], "SELECT")) {
            if (is_with) { is_with = false; continue; } /* the CTE's main query */
            if (tsql_tok_is(prev, "UNION") || tsql_tok_is(prev, "ALL") || tsql_tok_is(prev, "EXCEPT") ||
                tsql_tok_is(prev, "INTERSECT") || is_perm)
                continue;
            if (is_insert && !seen_values) continue;
        }
        if (tsql_tok_is(&t[k], "SET") && is_update && !seen_set) { seen_set = true; continue; }
        if (tsql_tok_is(&t[k], "IF") && (tsql_tok_is(prev, "TABLE") || tsql_tok_is(prev, "DATABASE") ||
                                         tsql_tok_is(prev, "LOGIN") || tsql_tok_is(prev, "USER")))
            continue; /* DROP TABLE IF EXISTS */
        if (is_perm && (tsql_tok_is(&t[k], "EXEC") || tsql_tok_is(&t[k], "EXECUTE") || tsql_tok_is(&t[k], "INSERT") ||
                        tsql_tok_is(&t[k], "UPDATE") || tsql_tok_is(&t[k], "DELETE") || tsql_tok_is(&t[k], "ALTER")))
            continue;
        if (is_create && k == i + 1) continue; /* CREATE/ALTER ... */
        if (tsql_tok_is(&t[k], "SET") && tsql_tok_is(first, "ALTER")) continue;
        if (tsql_tok_is(&t[k], "DROP") && tsql_tok_is(first, "ALTER") && k + 1 < n &&
            (tsql_tok_is(&t[k + 1], "COLUMN") || tsql_tok_is(&t[k + 1], "CONSTRAINT")))
            continue; /* ALTER TABLE t DROP COLUMN c */
        return k;
    }
    return n;
}

static int tok_ident(const tsql_tok *t, char *buf, size_t cap) {
    if (t->t != TK_IDENT && t->t != TK_QIDENT) return -1;
    tsql_tok_text(t, buf, cap);
    return 0;
}

static int syntax_err(mcdc_error *err, const tsql_tok *t, int i, int end) {
    if (i >= end || t[i].t == TK_EOF) return sim_err(err, 102, "Incorrect syntax near '%s'.", i > 0 ? "end of statement" : "");
    return sim_err(err, 102, "Incorrect syntax near '%.*s'.", t[i].n > 100 ? 100 : t[i].n, t[i].s);
}

/* Runs a SELECT (tokens [a, b)); assignments "@v = expr" handled by caller. */
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

static void fast_cache_drop(sim_session *s) {
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
static int fast_send(stmt_ctx *x, sim_fast_cache *c, bool *done, mcdc_error *err) {
    sim_session *s = x->s;
    mcdc_error e2 = MCDC_ERROR_INIT;
    *done = false;
    sqlite3_reset(c->red);
    sqlite3_clear_bindings(c->red);
    sqlite3_reset(c->cm);
    sqlite3_clear_bindings(c->cm);
    if (bind_vars(s, c->red, &e2) != MCDC_OK || bind_vars(s, c->cm, &e2) != MCDC_OK) return MCDC_OK;
    if (c->bnd) {
        sqlite3_reset(c->bnd);
        sqlite3_clear_bindings(c->bnd);
        if (bind_vars(s, c->bnd, &e2) != MCDC_OK) return MCDC_OK;
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
    if (rc == MCDC_OK && !x->aborted) { s->rowcount = rows; send_done(x, rows, true, false); }
    return rc;
}

/* A repeat of the cached statement: sent from the cache (*done), or the
 * entry dropped. */
static int fast_cached(stmt_ctx *x, const tsql_tok *t, int a, int b, bool *done, mcdc_error *err) {
    sim_session *s = x->s;
    sim_fast_cache *c = s->fast;
    *done = false;
    mcdc_buf k = {0};
    bool same = fast_key(&k, t, a, b) == MCDC_OK && k.len == c->keyn && memcmp(k.data, c->key, k.len) == 0;
    mcdc_buf_free(&k);
    if (!same) return MCDC_OK;
    if (schema_version(c->ver) != c->schema_version) { fast_cache_drop(s); return MCDC_OK; }
    mcdc_error e2 = MCDC_ERROR_INIT;
    if (check_select_perms(s, s->rd, c->res, &e2) != MCDC_OK) { fast_cache_drop(s); return MCDC_OK; }
    int rc = fast_send(x, c, done, err);
    if (*done) s->srv->fast_cache_hits++;
    else fast_cache_drop(s);
    return rc;
}

/* First run of a fast query: translate and prepare its two statements,
 * keep them in the session's cache and send the result. *done false when
 * the statement is left to the general path (nothing was sent). */
static int run_fast(stmt_ctx *x, const xl_env *env, const sim_fast_plan *fp, const tsql_tok *t, int a, int b,
                    sqlite3_stmt *orig, const xl_result *res, bool *done, mcdc_error *err) {
    sim_session *s = x->s;
    *done = false;
    int n = sqlite3_column_count(orig);
    if (n != fp->nitems || n > MCDC_COLUMNS_MAX) return MCDC_OK;
    fast_cache_drop(s);
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
    if (!ok || !*done) fast_cache_drop(s);
    mcdc_buf_free(&q1);
    mcdc_buf_free(&q2);
    mcdc_free(r2);
    return rc;
}

/* The reader's split-point query (sim_engine_fast.c); *done as run_fast. */
static int run_split(stmt_ctx *x, const xl_env *env, const sim_fast_split *sp, sqlite3_stmt *orig, const xl_result *res,
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
              sqlite3_column_count(scan) == 1 && bind_vars(s, scan, &e2) == MCDC_OK;
    int rc = MCDC_OK;
    sqlite3_stmt *bnd = NULL;
    if (ok && sp->bounds) {
        mcdc_buf q3 = {0};
        if (tsql_xlate(env, sp->bounds, 0, sp->nbounds, &q3, r2, &e2) != MCDC_OK ||
            sqlite3_prepare_v2(s->rd, (const char *)q3.data, -1, &bnd, NULL) != SQLITE_OK || bind_vars(s, bnd, &e2) != MCDC_OK) {
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
        if (rc == MCDC_OK && !x->aborted) { s->rowcount = rows; send_done(x, rows, true, false); }
    }
    sqlite3_finalize(scan);
    sqlite3_finalize(bnd);
    mcdc_buf_free(&q);
    mcdc_free(r2);
    return rc;
}

/* ---- READ COMMITTED ------------------------------------------------------ */
#define SIM_LOCK_POLL_MS 5

/* Under mu: another session whose open transaction changed a table res reads. */
static sim_session *read_blocker(sim_session *s, const xl_result *res) {
    sim_server *srv = s->srv;
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) {
        sim_session *o = srv->sessions[k];
        if (!o || o == s || o->trancount == 0 || o->tran_db != s->db) continue;
        if (o->tran_tables_all && o->tran_ntables > 0) return o;
        for (int t = 0; t < res->ntables; t++)
            for (int c = 0; c < o->tran_ntables; c++)
                if (mcdc_str_ieq(o->tran_tables[c], res->tables[t].name)) return o;
    }
    return NULL;
}

/* Waits while blocker(s, arg) (called under mu) names another session:
 * until SET LOCK_TIMEOUT (error 1222), an ATTENTION (the sink's poll), or a
 * wait cycle (error 1205, this session's transaction rolled back as the
 * deadlock victim). */
static int wait_while(stmt_ctx *x, sim_session *(*blocker)(sim_session *s, const void *arg), const void *arg,
                      mcdc_error *err) {
    sim_session *s = x->s;
    sim_server *srv = s->srv;
    int64_t waited_ms = 0;
    int rc = MCDC_OK;
    bool victim = false;
    pthread_mutex_lock(&srv->mu);
    for (;;) {
        sim_session *b = blocker(s, arg);
        if (!b) break;
        for (sim_session *w = b; w && !victim; w = w->waiting_for) victim = w == s;
        if (victim) {
            tran_rollback(s);
            rc = sim_err(err, 1205,
                         "Transaction (Process ID %d) was deadlocked on lock resources with another process and has been"
                         " chosen as the deadlock victim. Rerun the transaction.",
                         s->spid);
            if (err) err->server_class = 13;
            break;
        }
        if (s->lock_timeout_ms >= 0 && waited_ms >= s->lock_timeout_ms) {
            rc = sim_err(err, 1222, "Lock request time out period exceeded.");
            break;
        }
        s->waiting_for = b;
        pthread_mutex_unlock(&srv->mu);
        mcdc_sleep_ms(SIM_LOCK_POLL_MS);
        waited_ms += SIM_LOCK_POLL_MS;
        bool stop = x->sink->poll && x->sink->poll(x->sink->ctx);
        pthread_mutex_lock(&srv->mu);
        s->waiting_for = NULL;
        if (stop) {
            x->aborted = true;
            rc = sim_err(err, 3617, "The query was cancelled while it waited for a lock.");
            break;
        }
    }
    pthread_mutex_unlock(&srv->mu);
    if (victim && x->sink->transaction && x->sink->transaction(x->sink->ctx, 10, s->descriptor)) x->aborted = true;
    return rc;
}

static sim_session *read_blocker_cb(sim_session *s, const void *res) { return read_blocker(s, res); }

/* READ COMMITTED at table granularity: waits while another session's open
 * transaction has changed a table the statement reads. nolock: the
 * statement reads WITH (NOLOCK). */
static int wait_committed(stmt_ctx *x, const xl_result *res, bool nolock, mcdc_error *err) {
    if (res->ntables == 0 || nolock || x->s->read_uncommitted) return MCDC_OK;
    return wait_while(x, read_blocker_cb, res, err);
}

static bool has_nolock(const tsql_tok *t, int a, int b) {
    for (int k = a; k < b; k++)
        if (tsql_tok_is(&t[k], "NOLOCK") || tsql_tok_is(&t[k], "READUNCOMMITTED")) return true;
    return false;
}

static int run_query(stmt_ctx *x, const tsql_tok *t, int a, int b, const sim_var **assign, int nassign,
                     mcdc_error *err) {
    sim_session *s = x->s;
    env_ctx ec = {s, s->rd};
    xl_env env;
    char user[SIM_NAME_MAX];
    mcdc_buf wait = {0}, sql = {0};
    if (nassign == 0 && s->fast && !s->srv->fast_off) {
        bool done = false;
        int frc = fast_cached(x, t, a, b, &done, err);
        if (done) return frc;
    }
    make_env(s, &ec, &env, user, sizeof user, &wait);
    xl_result *res = mcdc_malloc(sizeof *res);
    if (!res) { mcdc_buf_free(&wait); return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }
    int rc = tsql_xlate(&env, t, a, b, &sql, res, err);
    if (rc == MCDC_OK) rc = check_select_perms(s, s->rd, res, err);
    if (rc == MCDC_OK) rc = wait_committed(x, res, has_nolock(t, a, b), err);
    sqlite3_stmt *st = NULL;
    if (rc == MCDC_OK && sqlite3_prepare_v2(s->rd, (const char *)sql.data, -1, &st, NULL) != SQLITE_OK)
        rc = sim_sqlite_err(s->rd, SQLITE_ERROR, err);
    if (rc == MCDC_OK) rc = bind_vars(s, st, err);
    bool fast_done = false;
    if (rc == MCDC_OK && nassign == 0 && !s->srv->fast_off) {
        sim_fast_plan fp;
        if (sim_fast_match(&fp, t, a, b)) {
            rc = run_fast(x, &env, &fp, t, a, b, st, res, &fast_done, err);
            sim_fast_plan_free(&fp);
        }
    }
    if (rc == MCDC_OK && !fast_done && nassign == 0 && !s->srv->fast_off) {
        sim_fast_split sp;
        if (sim_fast_match_split(&sp, t, a, b)) {
            rc = run_split(x, &env, &sp, st, res, &fast_done, err);
            sim_fast_split_free(&sp);
        }
    }
    if (rc == MCDC_OK && !fast_done) {
        int first = sqlite3_step(st);
        if (nassign > 0) {
            int64_t cnt = 0;
            while (first == SQLITE_ROW && rc == MCDC_OK) {
                for (int k = 0; k < nassign && k < sqlite3_column_count(st) && rc == MCDC_OK; k++)
                    rc = var_assign(s, (sim_var *)assign[k], sqlite3_column_value(st, k), err);
                cnt++;
                first = sqlite3_step(st);
            }
            if (rc == MCDC_OK && first != SQLITE_DONE) rc = sim_sqlite_err(s->rd, first, err);
            if (rc == MCDC_OK) { s->rowcount = cnt; send_done(x, cnt, true, false); }
        } else {
            int64_t rows = 0;
            rc = sim_emit_stmt(s, s->rd, st, first, res, NULL, 0, x->sink, x->in_proc, &rows, err, &x->aborted);
            if (rc == MCDC_OK && !x->aborted) { s->rowcount = rows; send_done(x, rows, true, false); }
        }
    }
    sqlite3_finalize(st);
    mcdc_free(res);
    mcdc_buf_free(&sql);
    mcdc_buf_free(&wait);
    return rc;
}

/* Evaluates one expression [a, b) into a variable (SET / DECLARE). */
static int eval_into(stmt_ctx *x, const tsql_tok *t, int a, int b, sim_var *v, mcdc_error *err) {
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
    stmt_ctx quiet = *x;
    sim_sink none = {0};
    quiet.sink = &none;
    int rc = run_query(&quiet, tk, 0, n + 1, as, 1, err);
    mcdc_free(tk);
    return rc;
}

/* Parses a type at toks[*i] ("decimal(18,4)", "varchar(max)"). */
static bool parse_type_at(const tsql_tok *t, int *i, int end, sim_type *out, char *text, size_t cap) {
    int k = *i;
    if (k >= end || (t[k].t != TK_IDENT && t[k].t != TK_QIDENT)) return false;
    size_t o = 0;
    char w[MCDC_IDENT_BYTES_MAX];
    tsql_tok_text(&t[k], w, sizeof w);
    o = (size_t)snprintf(text, cap, "%s", w);
    k++;
    if (k < end && tsql_tok_op(&t[k], "(")) {
        while (k < end && o + 1 < cap) {
            int w2 = snprintf(text + o, cap - o, "%.*s", t[k].n, t[k].s);
            if (w2 > 0) o += (size_t)w2;
            if (tsql_tok_op(&t[k], ")")) { k++; break; }
            k++;
        }
    }
    if (o >= cap) o = cap - 1;
    text[o] = 0;
    *i = k;
    return sim_type_parse(out, text, strlen(text));
}

static char *value_literal(sqlite3_value *v) {
    switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER: return sqlite3_mprintf("%lld", (long long)sqlite3_value_int64(v));
    case SQLITE_FLOAT: return sqlite3_mprintf("%!.17g", sqlite3_value_double(v));
    case SQLITE_TEXT: return sqlite3_mprintf("%Q", (const char *)sqlite3_value_text(v));
    case SQLITE_BLOB: {
        int n = sqlite3_value_bytes(v);
        const uint8_t *p = sqlite3_value_blob(v);
        char *h = sqlite3_malloc(2 * n + 4);
        if (!h) return NULL;
        int o = 0;
        h[o++] = 'X';
        h[o++] = '\'';
        for (int k = 0; k < n; k++) {
            static const char HX[] = "0123456789ABCDEF";
            h[o++] = HX[p[k] >> 4];
            h[o++] = HX[p[k] & 15];
        }
        h[o++] = '\'';
        h[o] = 0;
        return h;
    }
    default: return sqlite3_mprintf("NULL");
    }
}

/* ---- transactions ------------------------------------------------------- */
/* Takes sql (sqlite3_malloc'd) and commit_sql (same, may be NULL). */
static void undo_push2(sim_session *s, char *sql, char *commit_sql) {
    sim_undo *u = sql ? mcdc_calloc(1, sizeof *u) : NULL;
    if (u) {
        u->sql = mcdc_strdup(sql);
        u->commit_sql = commit_sql ? mcdc_strdup(commit_sql) : NULL;
        u->prev = s->undo;
        s->undo = u;
    }
    sqlite3_free(sql);
    sqlite3_free(commit_sql);
}

static void undo_push(sim_session *s, char *sql) { undo_push2(s, sql, NULL); }

static void undo_free_all(sim_session *s) {
    while (s->undo) {
        sim_undo *u = s->undo;
        s->undo = u->prev;
        mcdc_free(u->sql);
        mcdc_free(u->commit_sql);
        mcdc_free(u);
    }
}

static void tran_reset(sim_session *s) {
    undo_free_all(s);
    s->trancount = 0;
    s->tran_ntables = 0;
    s->tran_tables_all = false;
    mcdc_free(s->tran_rows);
    s->tran_rows = NULL;
    s->tran_nrows = s->tran_rows_cap = 0;
    s->tran_rows_all = false;
    s->tran_logged = false;
    s->tran_cdc = false;
    s->tran_ncis = 0;
    s->tran_db = NULL;
    s->cmd_id = 0;
}

/* Under mu. */
static void tran_rollback(sim_session *s) {
    if (s->tran_db) {
        sqlite3 *w = s->tran_db->w;
        sqlite3_exec(w, "BEGIN", NULL, NULL, NULL);
        for (sim_undo *u = s->undo; u; u = u->prev) sqlite3_exec(w, u->sql, NULL, NULL, NULL);
        sim_cdc_rollback(s);
        sqlite3_exec(w, "COMMIT", NULL, NULL, NULL);
    }
    tran_reset(s);
}

/* Under mu, inside a SQLite transaction on the db. */
static int tran_commit(sim_session *s, mcdc_error *err) {
    int rc = MCDC_OK;
    if (s->tran_logged && s->tran_db) {
        uint64_t commit = sim_lsn_next(s->tran_db);
        if (s->tran_cdc) rc = sim_cdc_commit(s, commit, err);
        if (rc == MCDC_OK) rc = sim_db_state_put(s->tran_db, "lsn", (int64_t)s->tran_db->lsn);
    }
    for (sim_undo *u = s->undo; u && rc == MCDC_OK; u = u->prev)
        if (u->commit_sql) rc = sim_sql(s->tran_db->w, err, "%s", u->commit_sql);
    if (rc == MCDC_OK) undo_free_all(s);
    return rc;
}

/* ---- DDL inside a transaction ------------------------------------------- */
/* Under mu. A DDL statement in an open T-SQL transaction joins it: the
 * transaction now spans the session's database. */
static int tran_ddl_join(sim_session *s, mcdc_error *err) {
    if (s->trancount == 0) return MCDC_OK;
    if (s->tran_db && s->tran_db != s->db)
        return sim_err(err, 50000, "the simulator does not support a transaction across databases ('%s' and '%s')",
                       s->tran_db->name, s->db->name);
    s->tran_db = s->db;
    return MCDC_OK;
}

/* Under mu: the open transaction changed table tbl (other sessions' reads
 * of it wait until it ends). */
static int tran_touch(sim_session *s, const char *tbl) {
    if (s->trancount == 0 || s->tran_tables_all) return -1;
    for (int k = 0; k < s->tran_ntables; k++)
        if (mcdc_str_ieq(s->tran_tables[k], tbl)) return k;
    if (s->tran_ntables == (int)(sizeof s->tran_tables / sizeof s->tran_tables[0])) {
        s->tran_tables_all = true;
        return -1;
    }
    snprintf(s->tran_tables[s->tran_ntables], SIM_NAME_MAX, "%s", tbl);
    return s->tran_ntables++;
}

/* Under mu: the open transaction changed row rowid of its table number
 * table (from tran_touch; -1: not tracked). */
static void tran_touch_row(sim_session *s, int table, int64_t rowid) {
    if (table < 0 || s->tran_rows_all) return;
    if (s->tran_nrows == s->tran_rows_cap) {
        int cap = s->tran_rows_cap ? s->tran_rows_cap * 2 : 64;
        sim_tran_row *nr = cap <= SIM_TRAN_ROWS_MAX ? mcdc_realloc(s->tran_rows, (size_t)cap * sizeof *nr) : NULL;
        if (!nr) { /* past the limit (or out of memory): every row of its tables */
            s->tran_rows_all = true;
            return;
        }
        s->tran_rows = nr;
        s->tran_rows_cap = cap;
    }
    s->tran_rows[s->tran_nrows++] = (sim_tran_row){table, rowid};
}

/* Under mu: another session whose open transaction changed table tbl
 * (rowid < 0) or row rowid of it. */
static sim_session *write_blocker(sim_session *s, const char *tbl, int64_t rowid) {
    sim_server *srv = s->srv;
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) {
        sim_session *o = srv->sessions[k];
        if (!o || o == s || o->trancount == 0 || o->tran_db != s->db) continue;
        if (o->tran_tables_all && o->tran_ntables > 0) return o;
        int ti = -1;
        for (int c = 0; c < o->tran_ntables && ti < 0; c++)
            if (mcdc_str_ieq(o->tran_tables[c], tbl)) ti = c;
        if (ti < 0) continue;
        if (rowid < 0 || o->tran_rows_all) return o;
        for (int r = 0; r < o->tran_nrows; r++)
            if (o->tran_rows[r].table == ti && o->tran_rows[r].rowid == rowid) return o;
    }
    return NULL;
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
            char *l = value_literal(sqlite3_column_value(st, k));
            rc = l ? mcdc_buf_printf(out, err, "%s%s", k ? ", " : "", l) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            sqlite3_free(l);
        }
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(out, ");", err);
    }
    sqlite3_finalize(st);
    return rc;
}

/* Under mu, inside the DDL's SQLite transaction, before the DDL changes
 * table tbl. In an open T-SQL transaction, copies the table (rows with
 * their rowids), its CREATE statement and catalog rows, and builds the
 * ROLLBACK SQL that puts them back (*undo) and the COMMIT SQL that drops
 * the copy (*commit); both sqlite3_malloc'd, NULL outside a transaction. */
static int tran_ddl_snapshot(sim_session *s, const char *tbl, char **undo, char **commit, mcdc_error *err) {
    *undo = *commit = NULL;
    if (s->trancount == 0) return MCDC_OK;
    sqlite3 *w = s->db->w;
    int64_t seq = state_get(w, "undo_seq", 0) + 1;
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
static int tran_ddl_end(sim_session *s, int rc, char *undo, char *commit, mcdc_error *err) {
    if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "COMMIT");
    if (rc != MCDC_OK) sim_sql(s->db->w, NULL, "ROLLBACK");
    if (rc == MCDC_OK && undo) {
        undo_push2(s, undo, commit);
        return rc;
    }
    sqlite3_free(undo);
    sqlite3_free(commit);
    return rc;
}

/* Largest rowid of cdc.ddl_history (the rows a DDL adds come after it). */
static int64_t ddl_history_top(sqlite3 *w) {
    sqlite3_stmt *st;
    int64_t v = 0;
    if (sqlite3_prepare_v2(w, "SELECT coalesce(max(rowid), 0) FROM \"cdc.ddl_history\"", -1, &st, NULL) != SQLITE_OK) return 0;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* ---- DDL ------------------------------------------------------------------ */
static int next_object_id(sim_db *d) {
    int64_t v = state_get(d->w, "object_id", 245575913) + 16;
    sim_db_state_put(d, "object_id", v);
    return (int)v;
}

typedef struct col_def {
    char name[SIM_NAME_MAX];
    sim_type type;
    bool nullable;
    int pk_ordinal;
} col_def;

/* Parses one column definition at toks[*i]: name type [NULL|NOT NULL|PRIMARY KEY|UNIQUE|...]. */
static int parse_col_def(const tsql_tok *t, int *ip, int end, col_def *c, bool *col_pk, bool *col_uq, mcdc_error *err) {
    int i = *ip;
    char ttext[64];
    memset(c, 0, sizeof *c);
    if (tok_ident(&t[i], c->name, sizeof c->name) != 0) return syntax_err(err, t, i, end);
    i++;
    if (!parse_type_at(t, &i, end, &c->type, ttext, sizeof ttext))
        return sim_err(err, 2715, "Column, parameter, or variable #1: Cannot find data type %s.", ttext);
    c->nullable = true;
    *col_pk = *col_uq = false;
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

static int catalog_add_col(sim_db *d, const char *tbl, int column_id, const col_def *c, mcdc_error *err) {
    char tn[64];
    sim_type_format(&c->type, tn, sizeof tn);
    return sim_sql(d->w, err, "INSERT INTO __sim_columns VALUES (%Q, %d, %Q, %Q, %d, %d)", tbl, column_id, c->name, tn,
                   c->nullable ? 1 : 0, c->pk_ordinal);
}

static int create_table(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    char parts[4][MCDC_IDENT_BYTES_MAX], name[SIM_NAME_MAX * 2];
    int np = xl_name_parts(t, &i, end, parts);
    if (np == 0) return syntax_err(err, t, i, end);
    xl_table_name(parts, np, name, sizeof name);
    const char *schema = np >= 2 && parts[np - 2][0] ? parts[np - 2] : "dbo";
    if (i >= end || !tsql_tok_op(&t[i], "(")) return syntax_err(err, t, i, end);
    i++;
    col_def *cols = mcdc_calloc(MCDC_COLUMNS_MAX, sizeof *cols);
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
            if (i >= end || !tsql_tok_op(&t[i], "(")) { rc = syntax_err(err, t, i, end); break; }
            i++;
            char list[1024] = "";
            while (i < end && !tsql_tok_op(&t[i], ")")) {
                char c[SIM_NAME_MAX];
                if (tok_ident(&t[i], c, sizeof c) == 0 && !tsql_tok_is(&t[i], "ASC") && !tsql_tok_is(&t[i], "DESC")) {
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
    if (rc == MCDC_OK && ncol == 0) rc = syntax_err(err, t, i, end);
    if (rc == MCDC_OK) {
        mcdc_buf_printf(&ddl, NULL, "CREATE TABLE \"%s\"(", name);
        for (int k = 0; k < ncol; k++) {
            for (int p = 0; p < npk; p++)
                if (mcdc_str_ieq(pk[p], cols[k].name)) { cols[k].pk_ordinal = p + 1; cols[k].nullable = false; }
            mcdc_buf_printf(&ddl, NULL, "%s\"%s\" %s%s", k ? ", " : "", cols[k].name, sim_type_decl(&cols[k].type),
                            cols[k].nullable ? "" : " NOT NULL");
        }
        if (npk) {
            mcdc_buf_append_str(&ddl, ", PRIMARY KEY(", NULL);
            for (int k = 0; k < npk; k++) mcdc_buf_printf(&ddl, NULL, "%s\"%s\"", k ? "," : "", pk[k]);
            mcdc_buf_append_str(&ddl, ")", NULL);
        }
        mcdc_buf_printf(&ddl, NULL, "%s)", uniq);
        mcdc_buf_cstr(&ddl, NULL);
        pthread_mutex_lock(&s->srv->mu);
        if (table_exists_c(s->db->w, name))
            rc = sim_err(err, 2714, "There is already an object named '%s' in the database.", parts[np - 1]);
        if (rc == MCDC_OK) rc = tran_ddl_join(s, err);
        if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "BEGIN");
        if (rc == MCDC_OK) {
            rc = sim_sql(s->db->w, err, "%s", (const char *)ddl.data);
            for (int k = 0; k < ncol && rc == MCDC_OK; k++) rc = catalog_add_col(s->db, name, k + 1, &cols[k], err);
            if (rc == MCDC_OK)
                rc = sim_sql(s->db->w, err, "INSERT INTO __sim_tables VALUES (%Q, %Q, %Q, %d, %Q, 0)", name, schema,
                             parts[np - 1], next_object_id(s->db), "");
            sim_sql(s->db->w, NULL, rc == MCDC_OK ? "COMMIT" : "ROLLBACK");
            if (rc == MCDC_OK) tran_touch(s, name);
            if (rc == MCDC_OK && s->trancount > 0) /* ROLLBACK drops it again */
                undo_push(s, sqlite3_mprintf("DROP TABLE IF EXISTS \"%w\"; DELETE FROM __sim_columns WHERE tbl = %Q;"
                                             " DELETE FROM __sim_tables WHERE name = %Q; DELETE FROM __sim_grants WHERE object = %Q",
                                             name, name, name, name));
        }
        pthread_mutex_unlock(&s->srv->mu);
    }
    mcdc_buf_free(&ddl);
    mcdc_free(cols);
    if (rc == MCDC_OK) send_done(x, 0, false, false);
    return rc;
}

static int load_cols(sqlite3 *c, const char *tbl, col_def **out, int *n, mcdc_error *err) {
    sqlite3_stmt *st;
    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(c, "SELECT name, type, nullable, pk_ordinal FROM __sim_columns WHERE tbl = ? ORDER BY column_id",
                           -1, &st, NULL) != SQLITE_OK)
        return sim_sqlite_err(c, SQLITE_ERROR, err);
    sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
    int cap = 16, k = 0;
    col_def *v = mcdc_calloc((size_t)cap, sizeof *v);
    while (v && sqlite3_step(st) == SQLITE_ROW) {
        if (k == cap) {
            col_def *nv = mcdc_realloc(v, (size_t)cap * 2 * sizeof *v);
            if (!nv) { mcdc_free(v); v = NULL; break; }
            v = nv;
            cap *= 2;
        }
        snprintf(v[k].name, sizeof v[k].name, "%s", (const char *)sqlite3_column_text(st, 0));
        const char *ty = (const char *)sqlite3_column_text(st, 1);
        sim_type_parse(&v[k].type, ty, strlen(ty));
        v[k].nullable = sqlite3_column_int(st, 2) != 0;
        v[k].pk_ordinal = sqlite3_column_int(st, 3);
        k++;
    }
    sqlite3_finalize(st);
    if (!v) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    *out = v;
    *n = k;
    return MCDC_OK;
}

static void tran_log_start(sim_session *s) {
    if (s->tran_logged) return;
    s->tran_logged = true;
    s->tran_db = s->db;
    s->tran_begin_lsn = sim_lsn_next(s->db);
    s->tran_id = ++s->db->tran_seq;
    s->tran_begin_utc_us = sim_srv_utc_us(s->srv);
    s->cmd_id = 0;
    sim_db_state_put(s->db, "tran_seq", (int64_t)s->db->tran_seq);
}

/* ---- DML ---------------------------------------------------------------- */
typedef struct img_set {
    sim_rowimg *rows;
    int n, cap, ncols;
} img_set;

static void img_free(img_set *m) {
    for (int r = 0; r < m->n; r++) {
        for (int k = 0; k < m->ncols; k++) sqlite3_value_free(m->rows[r].v[k]);
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
    col_def *cols;
    int ncols;
    char (*names)[SIM_NAME_MAX];
} dml;

static int dml_target(stmt_ctx *x, const tsql_tok *t, int *i, int end, dml *d, mcdc_error *err) {
    char parts[4][MCDC_IDENT_BYTES_MAX];
    int np = xl_name_parts(t, i, end, parts);
    if (np == 0) return syntax_err(err, t, *i, end);
    xl_table_name(parts, np, d->tbl, sizeof d->tbl);
    snprintf(d->short_name, sizeof d->short_name, "%s", parts[np - 1]);
    if (!table_exists_c(x->s->db->w, d->tbl) || ci_prefix(d->tbl, "sys.")) {
        if (np >= 2) return sim_err(err, 208, "Invalid object name '%s.%s'.", parts[np - 2], parts[np - 1]);
        return sim_err(err, 208, "Invalid object name '%s'.", parts[np - 1]);
    }
    if (!x->s->admin) {
        const char *dot = strchr(d->tbl, '.');
        return sim_err(err, 229, "The %s permission was denied on the object '%s', database '%s', schema '%.*s'.", "INSERT",
                       d->short_name, x->s->db->name, dot ? (int)(dot - d->tbl) : 3, d->tbl);
    }
    int rc = load_cols(x->s->db->w, d->tbl, &d->cols, &d->ncols, err);
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

static int col_index(const dml *d, const char *name) {
    for (int k = 0; k < d->ncols; k++) if (mcdc_str_ieq(d->cols[k].name, name)) return k;
    return -1;
}

static int xlate_expr(stmt_ctx *x, sqlite3 *c, const tsql_tok *t, int a, int b, mcdc_buf *out, mcdc_error *err) {
    env_ctx ec = {x->s, c};
    xl_env env;
    char user[SIM_NAME_MAX];
    mcdc_buf wait = {0};
    make_env(x->s, &ec, &env, user, sizeof user, &wait);
    xl_result *res = mcdc_malloc(sizeof *res);
    int rc = res ? tsql_xlate(&env, t, a, b, out, res, err) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK && res && res->ntables) rc = check_select_perms(x->s, c, res, err);
    /* the tables it reads (IF, EXEC arguments, the subqueries and SELECT of DML) */
    if (rc == MCDC_OK && res) rc = wait_committed(x, res, has_nolock(t, a, b), err);
    mcdc_free(res);
    mcdc_buf_free(&wait);
    return rc;
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

static void append_cols(mcdc_buf *b, const dml *d) {
    for (int k = 0; k < d->ncols; k++) mcdc_buf_printf(b, NULL, ", \"%s\"", d->cols[k].name);
}

/* Applies captured-change bookkeeping for the row images of one DML. */
static int dml_log(stmt_ctx *x, dml *d, int kind, img_set *before, img_set *after, const bool *set_cols, mcdc_error *err) {
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
            if (kind == 1) undo_push(s, sqlite3_mprintf("DELETE FROM \"%w\" WHERE rowid = %lld", d->tbl, (long long)a->rowid));
            else {
                mcdc_buf u = {0};
                if (kind == 3) {
                    mcdc_buf_printf(&u, NULL, "INSERT INTO \"%s\"(rowid", d->tbl);
                    append_cols(&u, d);
                    mcdc_buf_printf(&u, NULL, ") VALUES (%lld", (long long)b->rowid);
                    for (int k = 0; k < d->ncols; k++) {
                        char *l = value_literal(b->v[k]);
                        mcdc_buf_printf(&u, NULL, ", %s", l ? l : "NULL");
                        sqlite3_free(l);
                    }
                    mcdc_buf_append_str(&u, ")", NULL);
                } else {
                    mcdc_buf_printf(&u, NULL, "UPDATE \"%s\" SET ", d->tbl);
                    for (int k = 0; k < d->ncols; k++) {
                        char *l = value_literal(b->v[k]);
                        mcdc_buf_printf(&u, NULL, "%s\"%s\" = %s", k ? ", " : "", d->cols[k].name, l ? l : "NULL");
                        sqlite3_free(l);
                    }
                    mcdc_buf_printf(&u, NULL, " WHERE rowid = %lld", (long long)b->rowid);
                }
                if (mcdc_buf_cstr(&u, NULL) == MCDC_OK) undo_push(s, sqlite3_mprintf("%s", (const char *)u.data));
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

/* Runs the write part of a DML under the mutex in one SQLite transaction.
 * before_sql may be NULL; write_sql has RETURNING rowid, cols. */
/* The session a write waits for, in the transaction it had then. */
typedef struct tran_ref {
    sim_session *s;
    uint64_t descriptor;
} tran_ref;

static sim_session *tran_still_open(sim_session *s, const void *arg) {
    const tran_ref *t = arg;
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++)
        if (s->srv->sessions[k] == t->s)
            return t->s->trancount > 0 && t->s->descriptor == t->descriptor ? t->s : NULL;
    return NULL;
}

#define DML_BLOCKED 1 /* dml_exec_once: another open transaction holds a row */

static int dml_exec_once(stmt_ctx *x, dml *d, int kind, const char *before_sql, const char *write_sql,
                         const bool *set_cols, int64_t *count, tran_ref *blocked, mcdc_error *err);

/* Runs the write part of a DML. A write of a row that another session's
 * open transaction changed, or one that hits a duplicate key in a table such
 * a transaction changed, waits for that transaction to end, then runs again. */
static int dml_exec(stmt_ctx *x, dml *d, int kind, const char *before_sql, const char *write_sql, const bool *set_cols,
                    int64_t *count, mcdc_error *err) {
    for (;;) {
        tran_ref blocked = {NULL, 0};
        int rc = dml_exec_once(x, d, kind, before_sql, write_sql, set_cols, count, &blocked, err);
        if (rc != DML_BLOCKED) return rc;
        rc = wait_while(x, tran_still_open, &blocked, err);
        if (rc != MCDC_OK) return rc;
    }
}

static int dml_exec_once(stmt_ctx *x, dml *d, int kind, const char *before_sql, const char *write_sql,
                         const bool *set_cols, int64_t *count, tran_ref *blocked, mcdc_error *err) {
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
    bool implicit = s->trancount == 0;
    int rc = sim_sql(w, err, "BEGIN IMMEDIATE");
    if (rc != MCDC_OK) { pthread_mutex_unlock(&srv->mu); return rc; }
    bool was_logged = s->tran_logged;
    uint64_t lsn_save = s->db->lsn;
    int cmd_save = s->cmd_id;
    sqlite3_stmt *st = NULL;
    if (before_sql) {
        if (sqlite3_prepare_v2(w, before_sql, -1, &st, NULL) != SQLITE_OK) rc = sim_sqlite_err(w, SQLITE_ERROR, err);
        if (rc == MCDC_OK) rc = bind_vars(s, st, err);
        if (rc == MCDC_OK) rc = img_collect(&before, w, st, d->ncols, err);
        sqlite3_finalize(st);
        st = NULL;
        for (int r = 0; r < before.n && rc == MCDC_OK && !blocked->s; r++)
            blocked->s = write_blocker(s, d->tbl, before.rows[r].rowid);
        if (blocked->s) rc = DML_BLOCKED;
    }
    if (rc == MCDC_OK) {
        if (sqlite3_prepare_v2(w, write_sql, -1, &st, NULL) != SQLITE_OK) rc = sim_sqlite_err(w, SQLITE_ERROR, err);
        if (rc == MCDC_OK) rc = bind_vars(s, st, err);
        if (rc == MCDC_OK) rc = img_collect(&after, w, st, d->ncols, err);
        sqlite3_finalize(st);
        /* a duplicate key may be another open transaction's row */
        if (rc != MCDC_OK && err && err->server_number == 2627 && (blocked->s = write_blocker(s, d->tbl, -1)) != NULL) {
            mcdc_error_clear(err);
            rc = DML_BLOCKED;
        }
    }
    if (blocked->s) blocked->descriptor = blocked->s->descriptor;
    int64_t n = after.n;
    if (rc == MCDC_OK && n > 0) {
        tran_log_start(s);
        rc = dml_log(x, d, kind, &before, &after, set_cols, err);
        int ti = rc == MCDC_OK && !implicit ? tran_touch(s, d->tbl) : -1;
        const img_set *rows = kind == 1 ? &after : &before;
        for (int r = 0; r < rows->n && ti >= 0; r++) tran_touch_row(s, ti, rows->rows[r].rowid);
    }
    if (rc == MCDC_OK && implicit) rc = tran_commit(s, err);
    if (rc == MCDC_OK && !implicit) rc = sim_db_state_put(s->db, "lsn", (int64_t)s->db->lsn);
    if (rc == MCDC_OK) rc = sim_sql(w, err, "COMMIT");
    if (rc != MCDC_OK) {
        sqlite3_exec(w, "ROLLBACK", NULL, NULL, NULL);
        s->db->lsn = lsn_save > s->db->lsn ? lsn_save : s->db->lsn; /* LSNs never go back */
        s->cmd_id = cmd_save;
        if (!was_logged) s->tran_logged = false;
        if (implicit) tran_reset(s);
    } else if (implicit) tran_reset(s);
    pthread_mutex_unlock(&srv->mu);
    img_free(&before);
    img_free(&after);
    *count = n;
    return rc;
}

static int do_insert(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
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
            if (tok_ident(&t[i], c, sizeof c) != 0) { rc = syntax_err(err, t, i, end); break; }
            int ci = col_index(&d, c);
            if (ci < 0) { rc = sim_err(err, 207, "Invalid column name '%s'.", c); break; }
            if (nt < MCDC_COLUMNS_MAX) tcol[nt++] = ci;
            i++;
        }
        i++;
    } else if (rc == MCDC_OK) {
        for (int k = 0; k < d.ncols && k < MCDC_COLUMNS_MAX; k++) tcol[nt++] = k;
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
                if (!tsql_tok_op(&t[i], "(")) { rc = syntax_err(err, t, i, end); break; }
                int dd = 0, close = -1;
                for (int k = i; k < end; k++) {
                    if (tsql_tok_op(&t[k], "(")) dd++;
                    else if (tsql_tok_op(&t[k], ")") && --dd == 0) { close = k; break; }
                }
                if (close < 0) { rc = syntax_err(err, t, end, end); break; }
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
                        if (!numeric_literal(t, a, k, &d.cols[tcol[v]].type, &ex)) rc = xlate_expr(x, s->db->w, t, a, k, &ex, err);
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
            rc = xlate_expr(x, s->db->w, t, i, end, &ex, err);
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
        } else rc = syntax_err(err, t, i, end);
    }
    int64_t count = 0;
    if (rc == MCDC_OK) {
        mcdc_buf_append_str(&sql, " RETURNING rowid", NULL);
        append_cols(&sql, &d);
        mcdc_buf_cstr(&sql, NULL);
        rc = dml_exec(x, &d, 1, NULL, (const char *)sql.data, NULL, &count, err);
    }
    if (rc == MCDC_OK) {
        s->rowcount = count;
        send_done(x, count, true, false);
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

static int do_update_delete(stmt_ctx *x, const tsql_tok *t, int i, int end, bool is_update, mcdc_error *err) {
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
    if (rc == MCDC_OK && wpos < end) rc = xlate_expr(x, s->db->w, t, wpos + 1, end, &where, err);
    if (rc == MCDC_OK) {
        set_cols = mcdc_calloc((size_t)d.ncols + 1, sizeof *set_cols);
        if (!set_cols) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (rc == MCDC_OK && is_update) {
        if (i >= end || !tsql_tok_is(&t[i], "SET")) rc = syntax_err(err, t, i, end);
        else i++;
        mcdc_buf_printf(&sql, NULL, "UPDATE \"%s\" AS \"%s\" SET ", d.tbl, d.short_name);
        int nset = 0;
        while (rc == MCDC_OK && i < wpos) {
            char parts[4][MCDC_IDENT_BYTES_MAX];
            int np = xl_name_parts(t, &i, wpos, parts);
            if (np == 0 || i >= wpos || !tsql_tok_op(&t[i], "=")) { rc = syntax_err(err, t, i, end); break; }
            int ci = col_index(&d, parts[np - 1]);
            if (ci < 0) { rc = sim_err(err, 207, "Invalid column name '%s'.", parts[np - 1]); break; }
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
            if (!numeric_literal(t, a, i, &d.cols[ci].type, &ex)) rc = xlate_expr(x, s->db->w, t, a, i, &ex, err);
            if (rc != MCDC_OK) break;
            char tn[64];
            sim_type_format(&d.cols[ci].type, tn, sizeof tn);
            mcdc_buf_printf(&sql, NULL, "%s\"%s\" = sim_convert((%s), '%s', NULL)", nset ? ", " : "", d.cols[ci].name,
                            (const char *)ex.data, tn);
            nset++;
            if (i < wpos && tsql_tok_op(&t[i], ",")) i++;
        }
        if (rc == MCDC_OK && nset == 0) rc = syntax_err(err, t, i, end);
    } else if (rc == MCDC_OK) {
        if (i < wpos) rc = syntax_err(err, t, i, end);
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
        rc = dml_exec(x, &d, is_update ? 2 : 3, (const char *)before.data, (const char *)sql.data, set_cols, &count, err);
    }
    if (rc == MCDC_OK) {
        s->rowcount = count;
        send_done(x, count, true, false);
    }
    mcdc_free(set_cols);
    mcdc_buf_free(&where);
    mcdc_buf_free(&sql);
    mcdc_buf_free(&before);
    mcdc_buf_free(&ex);
    dml_free(&d);
    return rc;
}

/* ---- other statements ---------------------------------------------------- */
static int need_admin(stmt_ctx *x, const char *what, mcdc_error *err) {
    if (x->s->admin) return MCDC_OK;
    return sim_err(err, 262, "%s permission denied in database '%s'.", what, x->s->db->name);
}

static int do_create(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
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
        if (i + 1 >= end || tok_ident(&t[i + 1], name, sizeof name) != 0) return syntax_err(err, t, i + 1, end);
        for (const char *p = name; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
                return sim_err(err, 50000, "the simulator only supports database names of letters, digits, '_' and '-' ('%s')", name);
        pthread_mutex_lock(&srv->mu);
        if (sim_find_db(srv, name)) rc = sim_err(err, 1801, "Database '%s' already exists. Choose a different database name.", name);
        sim_db *d;
        if (rc == MCDC_OK) rc = db_open(srv, name, true, &d, err);
        if (rc == MCDC_OK) rc = sim_sql(master_db(srv)->w, err, "INSERT INTO __sim_databases VALUES (%Q)", name);
        pthread_mutex_unlock(&srv->mu);
        if (rc == MCDC_OK) send_done(x, 0, false, false);
        return rc;
    }
    if (i < end && tsql_tok_is(&t[i], "LOGIN")) {
        char name[SIM_NAME_MAX], pw[256] = "";
        int rc = need_admin(x, "CREATE LOGIN", err);
        if (rc != MCDC_OK) return rc;
        if (i + 1 >= end || tok_ident(&t[i + 1], name, sizeof name) != 0) return syntax_err(err, t, i + 1, end);
        int k = i + 2;
        if (k + 3 < end && tsql_tok_is(&t[k], "WITH") && tsql_tok_is(&t[k + 1], "PASSWORD") && tsql_tok_op(&t[k + 2], "=") &&
            (t[k + 3].t == TK_STR || t[k + 3].t == TK_NSTR))
            tsql_tok_text(&t[k + 3], pw, sizeof pw);
        else return syntax_err(err, t, k, end);
        pthread_mutex_lock(&srv->mu);
        sqlite3_stmt *st;
        sqlite3 *m = master_db(srv)->w;
        if (sqlite3_prepare_v2(m, "INSERT INTO __sim_logins VALUES (?, ?, 0)", -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 2, pw, -1, SQLITE_STATIC);
            if (sqlite3_step(st) != SQLITE_DONE) rc = sim_err(err, 15025, "The server principal '%s' already exists.", name);
            sqlite3_finalize(st);
        }
        pthread_mutex_unlock(&srv->mu);
        if (rc == MCDC_OK) send_done(x, 0, false, false);
        return rc;
    }
    if (i < end && tsql_tok_is(&t[i], "USER")) {
        char name[SIM_NAME_MAX], login[SIM_NAME_MAX];
        int rc = need_admin(x, "CREATE USER", err);
        if (rc != MCDC_OK) return rc;
        if (i + 1 >= end || tok_ident(&t[i + 1], name, sizeof name) != 0) return syntax_err(err, t, i + 1, end);
        snprintf(login, sizeof login, "%s", name);
        int k = i + 2;
        if (k + 2 < end && (tsql_tok_is(&t[k], "FOR") || tsql_tok_is(&t[k], "FROM")) && tsql_tok_is(&t[k + 1], "LOGIN"))
            tok_ident(&t[k + 2], login, sizeof login);
        pthread_mutex_lock(&srv->mu);
        rc = tran_ddl_join(s, err);
        if (rc == MCDC_OK) {
            rc = sim_sql(s->db->w, NULL, "INSERT INTO __sim_users VALUES (%Q, %Q)", name, login);
            if (rc != MCDC_OK) rc = sim_err(err, 15023, "User, group, or role '%s' already exists in the current database.", name);
            else if (s->trancount > 0) undo_push(s, sqlite3_mprintf("DELETE FROM __sim_users WHERE name = %Q", name));
        }
        pthread_mutex_unlock(&srv->mu);
        if (rc == MCDC_OK) send_done(x, 0, false, false);
        return rc;
    }
    if (i < end && (tsql_tok_is(&t[i], "SCHEMA") || tsql_tok_is(&t[i], "ROLE") || tsql_tok_is(&t[i], "INDEX") ||
                    tsql_tok_is(&t[i], "NONCLUSTERED") || tsql_tok_is(&t[i], "UNIQUE") || tsql_tok_is(&t[i], "CLUSTERED"))) {
        /* accepted, no effect (indexes: SQLite plans well enough) */
        send_done(x, 0, false, false);
        return MCDC_OK;
    }
    return sim_err(err, 50000, "CREATE %.*s is not supported by the simulator", i < end ? t[i].n : 0, i < end ? t[i].s : "");
}

static int do_alter_table(stmt_ctx *x, const tsql_tok *t, int i, int end, const char *text, mcdc_error *err) {
    sim_session *s = x->s;
    int start = i;
    i += 2;
    char parts[4][MCDC_IDENT_BYTES_MAX], tbl[SIM_NAME_MAX * 2];
    int np = xl_name_parts(t, &i, end, parts);
    if (np == 0) return syntax_err(err, t, i, end);
    xl_table_name(parts, np, tbl, sizeof tbl);
    int rc = need_admin(x, "ALTER TABLE", err);
    if (rc != MCDC_OK) return rc;
    pthread_mutex_lock(&s->srv->mu);
    if (!table_exists_c(s->db->w, tbl)) {
        pthread_mutex_unlock(&s->srv->mu);
        return sim_err(err, 4902, "Cannot find the object \"%s\" because it does not exist or you do not have permissions.", parts[np - 1]);
    }
    char *undo = NULL, *commit = NULL;
    int64_t hist_top = ddl_history_top(s->db->w);
    rc = tran_ddl_join(s, err);
    if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "BEGIN IMMEDIATE");
    if (rc == MCDC_OK) rc = tran_ddl_snapshot(s, tbl, &undo, &commit, err);
    if (rc == MCDC_OK && i < end && tsql_tok_is(&t[i], "ADD")) {
        i++;
        while (i < end && rc == MCDC_OK) {
            if (tsql_tok_op(&t[i], ",")) { i++; continue; }
            if (tsql_tok_is(&t[i], "COLUMN")) i++;
            col_def c;
            bool pk, uq;
            rc = parse_col_def(t, &i, end, &c, &pk, &uq, err);
            if (rc != MCDC_OK) break;
            if (!c.nullable) {
                rc = sim_err(err, 4901, "ALTER TABLE only allows columns to be added that can contain nulls, or have a DEFAULT definition specified, or the column being added is an identity or timestamp column, or alternatively if none of the previous conditions are satisfied the table must be empty to allow addition of this last column. Column '%s' cannot be added to non-empty table '%s' because it does not satisfy these conditions.",
                             c.name, parts[np - 1]);
                break;
            }
            sqlite3_stmt *st;
            int colid = 1;
            if (sqlite3_prepare_v2(s->db->w, "SELECT coalesce(max(column_id), 0) + 1 FROM __sim_columns WHERE tbl = ?", -1, &st, NULL) == SQLITE_OK) {
                sqlite3_bind_text(st, 1, tbl, -1, SQLITE_STATIC);
                if (sqlite3_step(st) == SQLITE_ROW) colid = sqlite3_column_int(st, 0);
                sqlite3_finalize(st);
            }
            rc = sim_sql(s->db->w, err, "ALTER TABLE \"%w\" ADD COLUMN \"%w\" %s", tbl, c.name, sim_type_decl(&c.type));
            if (rc == MCDC_OK) rc = catalog_add_col(s->db, tbl, colid, &c, err);
        }
    } else if (rc == MCDC_OK && i < end && tsql_tok_is(&t[i], "DROP")) {
        i++;
        if (i < end && tsql_tok_is(&t[i], "COLUMN")) i++;
        while (i < end && rc == MCDC_OK) {
            if (tsql_tok_op(&t[i], ",")) { i++; continue; }
            char c[SIM_NAME_MAX];
            if (tok_ident(&t[i], c, sizeof c) != 0) { rc = syntax_err(err, t, i, end); break; }
            i++;
            rc = sim_sql(s->db->w, err, "ALTER TABLE \"%w\" DROP COLUMN \"%w\"", tbl, c);
            if (rc != MCDC_OK && err && err->server_number == 50000)
                rc = sim_err(err, 4922, "ALTER TABLE DROP COLUMN %s failed because one or more objects access this column.", c);
            if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "DELETE FROM __sim_columns WHERE tbl = %Q AND name = %Q", tbl, c);
        }
    } else if (rc == MCDC_OK) {
        rc = sim_err(err, 50000, "this ALTER TABLE form is not supported by the simulator");
    }
    if (rc == MCDC_OK) {
        /* the statement text for cdc.ddl_history */
        const char *a = t[start].s, *b = end < 1 << 30 && t[end - 1].s ? t[end - 1].s + t[end - 1].n : a;
        char *ddl = mcdc_strndup(a, (size_t)(b - a));
        (void)text;
        rc = sim_cdc_ddl(s, tbl, ddl ? ddl : "ALTER TABLE", err);
        mcdc_free(ddl);
    }
    if (rc == MCDC_OK && undo) {
        /* ROLLBACK also takes back the cdc.ddl_history rows of this DDL */
        char *u2 = sqlite3_mprintf("%s DELETE FROM \"cdc.ddl_history\" WHERE rowid > %lld AND rowid <= %lld;", undo,
                                   (long long)hist_top, (long long)ddl_history_top(s->db->w));
        sqlite3_free(undo);
        undo = u2;
        if (!undo) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    rc = tran_ddl_end(s, rc, undo, commit, err);
    if (rc == MCDC_OK) tran_touch(s, tbl);
    pthread_mutex_unlock(&s->srv->mu);
    if (rc == MCDC_OK) send_done(x, 0, false, false);
    return rc;
}

static int do_drop(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    i++;
    if (i < end && tsql_tok_is(&t[i], "TABLE")) {
        i++;
        bool if_exists = false;
        if (i + 1 < end && tsql_tok_is(&t[i], "IF") && tsql_tok_is(&t[i + 1], "EXISTS")) { if_exists = true; i += 2; }
        char parts[4][MCDC_IDENT_BYTES_MAX], tbl[SIM_NAME_MAX * 2];
        int np = xl_name_parts(t, &i, end, parts);
        if (np == 0) return syntax_err(err, t, i, end);
        xl_table_name(parts, np, tbl, sizeof tbl);
        int rc = need_admin(x, "DROP TABLE", err);
        if (rc != MCDC_OK) return rc;
        pthread_mutex_lock(&s->srv->mu);
        if (!table_exists_c(s->db->w, tbl) || ci_prefix(tbl, "sys.") || ci_prefix(tbl, "cdc.")) {
            pthread_mutex_unlock(&s->srv->mu);
            if (if_exists) { send_done(x, 0, false, false); return MCDC_OK; }
            return sim_err(err, 3701, "Cannot drop the table '%s', because it does not exist or you do not have permission.", parts[np - 1]);
        }
        char *undo = NULL, *commit = NULL;
        rc = tran_ddl_join(s, err);
        if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "BEGIN IMMEDIATE");
        if (rc == MCDC_OK) rc = tran_ddl_snapshot(s, tbl, &undo, &commit, err);
        if (rc == MCDC_OK) rc = sim_cdc_drop_table(s, tbl, err);
        if (rc == MCDC_OK) rc = sim_sql(s->db->w, err, "DROP TABLE \"%w\"; DELETE FROM __sim_columns WHERE tbl = %Q; DELETE FROM __sim_tables WHERE name = %Q; DELETE FROM __sim_grants WHERE object = %Q", tbl, tbl, tbl, tbl);
        rc = tran_ddl_end(s, rc, undo, commit, err);
        if (rc == MCDC_OK) tran_touch(s, tbl);
        pthread_mutex_unlock(&s->srv->mu);
        if (rc == MCDC_OK) send_done(x, 0, false, false);
        return rc;
    }
    if (i < end && tsql_tok_is(&t[i], "DATABASE")) {
        char name[SIM_NAME_MAX];
        int rc = need_admin(x, "DROP DATABASE", err);
        if (rc != MCDC_OK) return rc;
        i++;
        bool if_exists = false;
        if (i + 1 < end && tsql_tok_is(&t[i], "IF") && tsql_tok_is(&t[i + 1], "EXISTS")) { if_exists = true; i += 2; }
        if (i >= end || tok_ident(&t[i], name, sizeof name) != 0) return syntax_err(err, t, i, end);
        sim_server *srv = s->srv;
        pthread_mutex_lock(&srv->mu);
        sim_db *d = sim_find_db(srv, name);
        if (!d || mcdc_str_ieq(name, "master")) {
            pthread_mutex_unlock(&srv->mu);
            if (if_exists && d == NULL) { send_done(x, 0, false, false); return MCDC_OK; }
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
        rc = sim_sql(master_db(srv)->w, err, "DELETE FROM __sim_databases WHERE name = %Q", name);
        pthread_mutex_unlock(&srv->mu);
        mcdc_free(d);
        if (rc == MCDC_OK) send_done(x, 0, false, false);
        return rc;
    }
    return sim_err(err, 50000, "DROP %.*s is not supported by the simulator", i < end ? t[i].n : 0, i < end ? t[i].s : "");
}

static int do_grant(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    bool revoke = !tsql_tok_is(&t[i], "GRANT");
    int rc = need_admin(x, "GRANT", err);
    if (rc != MCDC_OK) return rc;
    i++;
    bool select = false;
    while (i < end && !tsql_tok_is(&t[i], "ON") && !tsql_tok_is(&t[i], "TO")) {
        if (tsql_tok_is(&t[i], "SELECT")) select = true;
        i++;
    }
    char obj[SIM_NAME_MAX * 2] = "";
    if (i < end && tsql_tok_is(&t[i], "ON")) {
        i++;
        if (i + 1 < end && (tsql_tok_is(&t[i], "OBJECT") || tsql_tok_is(&t[i], "SCHEMA")) && tsql_tok_op(&t[i + 1], "::")) i += 2;
        char parts[4][MCDC_IDENT_BYTES_MAX];
        int np = xl_name_parts(t, &i, end, parts);
        if (np == 0) return syntax_err(err, t, i, end);
        xl_table_name(parts, np, obj, sizeof obj);
        if (!table_exists_c(s->db->w, obj))
            return sim_err(err, 15151, "Cannot find the object '%s', because it does not exist or you do not have permission.", parts[np - 1]);
    }
    if (i >= end || (!tsql_tok_is(&t[i], "TO") && !tsql_tok_is(&t[i], "FROM"))) return syntax_err(err, t, i, end);
    i++;
    pthread_mutex_lock(&s->srv->mu);
    rc = tran_ddl_join(s, err);
    while (i < end && rc == MCDC_OK) {
        char who[SIM_NAME_MAX];
        if (tsql_tok_op(&t[i], ",")) { i++; continue; }
        if (tok_ident(&t[i], who, sizeof who) != 0) break;
        i++;
        if (select && obj[0]) {
            bool had = has_grant(s->db->w, who, obj);
            if (revoke) rc = sim_sql(s->db->w, err, "DELETE FROM __sim_grants WHERE principal = %Q AND object = %Q", who, obj);
            else rc = sim_sql(s->db->w, err, "INSERT OR IGNORE INTO __sim_grants VALUES (%Q, %Q, 'SELECT')", who, obj);
            if (rc == MCDC_OK && s->trancount > 0 && had != !revoke) /* ROLLBACK puts the grant back as it was */
                undo_push(s, had ? sqlite3_mprintf("INSERT OR IGNORE INTO __sim_grants VALUES (%Q, %Q, 'SELECT')", who, obj)
                                 : sqlite3_mprintf("DELETE FROM __sim_grants WHERE principal = %Q AND object = %Q AND"
                                                   " perm = 'SELECT'", who, obj));
        }
    }
    pthread_mutex_unlock(&s->srv->mu);
    if (rc == MCDC_OK) send_done(x, 0, false, false);
    return rc;
}

static int do_use(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    char name[SIM_NAME_MAX];
    if (i + 1 >= end || tok_ident(&t[i + 1], name, sizeof name) != 0) return syntax_err(err, t, i + 1, end);
    pthread_mutex_lock(&s->srv->mu);
    sim_db *d = sim_find_db(s->srv, name);
    bool ok = d && (s->admin || mcdc_str_ieq(d->name, "master") || db_has_user(d, s->login));
    pthread_mutex_unlock(&s->srv->mu);
    if (!d) return sim_err(err, 911, "Database '%s' does not exist. Make sure that the name is entered correctly.", name);
    if (!ok)
        return sim_err(err, 916, "The server principal \"%s\" is not able to access the database \"%s\" under the current security context.",
                       s->login, d->name);
    char old[SIM_NAME_MAX];
    snprintf(old, sizeof old, "%s", s->db->name);
    int rc = sess_use(s, d, err);
    if (rc != MCDC_OK) return rc;
    if (x->sink->database_changed && x->sink->database_changed(x->sink->ctx, d->name, old)) x->aborted = true;
    char msg[SIM_NAME_MAX + 64];
    snprintf(msg, sizeof msg, "Changed database context to '%s'.", d->name);
    send_info(x, 5701, msg);
    send_done(x, 0, false, false);
    return MCDC_OK;
}

static int do_tran(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    (void)end;
    int rc = MCDC_OK;
    if (tsql_tok_is(&t[i], "BEGIN")) {
        pthread_mutex_lock(&s->srv->mu);
        s->trancount++;
        if (s->trancount == 1) s->descriptor = ((uint64_t)s->spid << 32) | (s->descriptor + 1);
        pthread_mutex_unlock(&s->srv->mu);
        if (s->trancount == 1 && x->sink->transaction && x->sink->transaction(x->sink->ctx, 8, s->descriptor))
            x->aborted = true;
    } else if (tsql_tok_is(&t[i], "COMMIT")) {
        if (s->trancount == 0)
            return sim_err(err, 3902, "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.");
        pthread_mutex_lock(&s->srv->mu);
        if (--s->trancount == 0) {
            if (s->tran_db) {
                rc = sim_sql(s->tran_db->w, err, "BEGIN IMMEDIATE");
                if (rc == MCDC_OK) rc = tran_commit(s, err);
                sim_sql(s->tran_db->w, NULL, rc == MCDC_OK ? "COMMIT" : "ROLLBACK");
            }
            tran_reset(s);
        }
        pthread_mutex_unlock(&s->srv->mu);
        if (s->trancount == 0 && x->sink->transaction && x->sink->transaction(x->sink->ctx, 9, s->descriptor))
            x->aborted = true;
    } else { /* ROLLBACK */
        if (s->trancount == 0)
            return sim_err(err, 3903, "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION.");
        pthread_mutex_lock(&s->srv->mu);
        tran_rollback(s);
        pthread_mutex_unlock(&s->srv->mu);
        if (x->sink->transaction && x->sink->transaction(x->sink->ctx, 10, s->descriptor)) x->aborted = true;
    }
    if (rc == MCDC_OK) send_done(x, 0, false, false);
    return rc;
}

static int do_declare(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    i++;
    while (i < end) {
        if (tsql_tok_op(&t[i], ",")) { i++; continue; }
        if (t[i].t != TK_VAR) return syntax_err(err, t, i, end);
        char name[SIM_NAME_MAX], tt[64];
        snprintf(name, sizeof name, "%.*s", t[i].n, t[i].s);
        i++;
        if (i < end && tsql_tok_is(&t[i], "AS")) i++;
        sim_type ty;
        if (!parse_type_at(t, &i, end, &ty, tt, sizeof tt))
            return sim_err(err, 2715, "Column, parameter, or variable #1: Cannot find data type %s.", tt);
        int rc = var_declare(x->s, name, &ty, err);
        if (rc != MCDC_OK) return rc;
        if (i < end && tsql_tok_op(&t[i], "=")) {
            i++;
            int a = i, d = 0;
            while (i < end) {
                if (tsql_tok_op(&t[i], "(")) d++;
                else if (tsql_tok_op(&t[i], ")")) d--;
                else if (d == 0 && tsql_tok_op(&t[i], ",")) break;
                i++;
            }
            rc = eval_into(x, t, a, i, var_find(x->s, name), err);
            if (rc != MCDC_OK) return rc;
        }
    }
    send_done(x, 0, false, false);
    return MCDC_OK;
}

static int do_set(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    i++;
    if (i < end && t[i].t == TK_VAR) {
        char name[SIM_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", t[i].n, t[i].s);
        sim_var *v = var_find(s, name);
        if (!v) return sim_err(err, 137, "Must declare the scalar variable \"%s\".", name);
        if (i + 1 >= end || !tsql_tok_op(&t[i + 1], "=")) return syntax_err(err, t, i + 1, end);
        int rc = eval_into(x, t, i + 2, end, v, err);
        if (rc == MCDC_OK) send_done(x, 0, false, false);
        return rc;
    }
    if (i + 1 < end && tsql_tok_is(&t[i], "NOCOUNT")) s->nocount = tsql_tok_is(&t[i + 1], "ON");
    if (i + 1 < end && tsql_tok_is(&t[i], "IMPLICIT_TRANSACTIONS")) s->implicit_tx = tsql_tok_is(&t[i + 1], "ON");
    if (i + 1 < end && tsql_tok_is(&t[i], "LOCK_TIMEOUT")) {
        bool neg = i + 2 < end && tsql_tok_op(&t[i + 1], "-");
        const tsql_tok *nt = &t[neg ? i + 2 : i + 1];
        if (nt->t != TK_NUM) return syntax_err(err, t, i + 1, end);
        char num[32];
        snprintf(num, sizeof num, "%.*s", nt->n < 31 ? nt->n : 31, nt->s);
        long long v = strtoll(num, NULL, 10);
        s->lock_timeout_ms = neg ? -1 : v;
    }
    if (i + 3 < end && tsql_tok_is(&t[i], "TRANSACTION") && tsql_tok_is(&t[i + 1], "ISOLATION"))
        s->read_uncommitted = tsql_tok_is(&t[i + 3], "READ") && i + 4 < end && tsql_tok_is(&t[i + 4], "UNCOMMITTED");
    /* TEXTSIZE, other isolation levels (as READ COMMITTED), ANSI_*, XACT_ABORT...: accepted */
    send_done(x, 0, false, false);
    return MCDC_OK;
}

/* EXEC proc args: evaluates arguments into a sim_proc_args. */
static void args_free(sim_proc_args *a) {
    for (int k = 0; k < a->n; k++) sqlite3_value_free(a->vals[k]);
    a->n = 0;
}

static int eval_value(stmt_ctx *x, const tsql_tok *t, int a, int b, sqlite3_value **out, mcdc_error *err) {
    sim_session *s = x->s;
    *out = NULL;
    if (b == a + 1 && tsql_tok_is(&t[a], "DEFAULT")) return MCDC_OK;
    mcdc_buf ex = {0}, q = {0};
    int rc = xlate_expr(x, s->rd, t, a, b, &ex, err);
    if (rc == MCDC_OK) {
        mcdc_buf_printf(&q, NULL, "SELECT %s", (const char *)ex.data);
        rc = mcdc_buf_cstr(&q, err);
    }
    sqlite3_stmt *st = NULL;
    if (rc == MCDC_OK && sqlite3_prepare_v2(s->rd, (const char *)q.data, -1, &st, NULL) != SQLITE_OK)
        rc = sim_sqlite_err(s->rd, SQLITE_ERROR, err);
    if (rc == MCDC_OK) rc = bind_vars(s, st, err);
    if (rc == MCDC_OK) {
        int r = sqlite3_step(st);
        if (r == SQLITE_ROW) *out = sqlite3_value_dup(sqlite3_column_value(st, 0));
        else rc = sim_sqlite_err(s->rd, r, err);
    }
    sqlite3_finalize(st);
    mcdc_buf_free(&ex);
    mcdc_buf_free(&q);
    return rc;
}

static int run_tokens(stmt_ctx *x, const tsql_tok *t, int n);
static int run_proc(stmt_ctx *x, const char *proc, sim_proc_args *a, sql_params *dp, mcdc_error *err);
static int send_error(stmt_ctx *x, const mcdc_error *err, int line);

static int do_exec(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    i++;
    if (i + 1 < end && t[i].t == TK_VAR && tsql_tok_op(&t[i + 1], "=")) i += 2; /* @rc = proc */
    char parts[4][MCDC_IDENT_BYTES_MAX];
    int np = xl_name_parts(t, &i, end, parts);
    if (np == 0) return syntax_err(err, t, i, end);
    char proc[SIM_NAME_MAX * 2];
    if (np >= 2 && parts[np - 2][0]) snprintf(proc, sizeof proc, "%s.%s", parts[np - 2], parts[np - 1]);
    else snprintf(proc, sizeof proc, "%s", parts[np - 1]);
    sim_proc_args *a = mcdc_calloc(1, sizeof *a);
    sql_params *dp = mcdc_calloc(1, sizeof *dp);
    int *out_tok = mcdc_calloc(32, sizeof *out_tok); /* OUTPUT argument: its caller variable's token + 1 */
    if (!a || !dp || !out_tok) {
        mcdc_free(a);
        mcdc_free(dp);
        mcdc_free(out_tok);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    int rc = MCDC_OK;
    while (i < end && rc == MCDC_OK) {
        if (tsql_tok_op(&t[i], ",")) { i++; continue; }
        if (a->n >= 32) { rc = mcdc_error_set(err, MCDC_E_LIMIT, "more than 32 procedure arguments"); break; }
        a->names[a->n][0] = 0;
        if (t[i].t == TK_VAR && i + 1 < end && tsql_tok_op(&t[i + 1], "=")) {
            snprintf(a->names[a->n], SIM_NAME_MAX, "%.*s", t[i].n, t[i].s);
            i += 2;
        }
        int s0 = i, d = 0;
        while (i < end) {
            if (tsql_tok_op(&t[i], "(")) d++;
            else if (tsql_tok_op(&t[i], ")")) d--;
            else if (d == 0 && (tsql_tok_op(&t[i], ",") || tsql_tok_is(&t[i], "OUTPUT") || tsql_tok_is(&t[i], "OUT"))) break;
            i++;
        }
        rc = eval_value(x, t, s0, i, &a->vals[a->n], err);
        if (i < end && (tsql_tok_is(&t[i], "OUTPUT") || tsql_tok_is(&t[i], "OUT"))) {
            if (i == s0 + 1 && t[s0].t == TK_VAR) out_tok[a->n] = s0 + 1;
            i++;
        }
        a->n++;
    }
    if (rc == MCDC_OK) rc = run_proc(x, proc, a, dp, err);
    /* @callee = @caller OUTPUT: the caller's variable takes the value */
    for (int d = 0; d < dp->n && rc == MCDC_OK; d++) {
        int k = dp->arg[d];
        if (k < 0 || !dp->output[d] || !out_tok[k]) continue;
        char cn[SIM_NAME_MAX];
        snprintf(cn, sizeof cn, "%.*s", t[out_tok[k] - 1].n, t[out_tok[k] - 1].s);
        sim_var *from = var_find(x->s, dp->names[d]), *to = var_find(x->s, cn);
        if (!to) { rc = sim_err(err, 137, "Must declare the scalar variable \"%s\".", cn); break; }
        if (!from || from == to) continue;
        sqlite3_stmt *st = x->s->conv; /* the value as an sqlite3_value */
        sqlite3_reset(st);
        sim_type vt = from->type;
        char tn[64];
        sim_type_format(&vt, tn, sizeof tn);
        if (from->kind == SQLITE_INTEGER) sqlite3_bind_int64(st, 1, from->i);
        else if (from->kind == SQLITE_FLOAT) sqlite3_bind_double(st, 1, from->f);
        else if (from->kind == SQLITE_TEXT) sqlite3_bind_text(st, 1, (const char *)from->p, (int)from->n, SQLITE_TRANSIENT);
        else if (from->kind == SQLITE_BLOB) sqlite3_bind_blob(st, 1, from->p, (int)from->n, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, tn, -1, SQLITE_TRANSIENT);
        sqlite3_value *val = sqlite3_step(st) == SQLITE_ROW ? sqlite3_value_dup(sqlite3_column_value(st, 0)) : NULL;
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        rc = val ? var_assign(x->s, to, val, err) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        sqlite3_value_free(val);
    }
    args_free(a);
    mcdc_free(a);
    mcdc_free(dp);
    mcdc_free(out_tok);
    return rc;
}

/* sp_executesql: @stmt, @params, values. */
static int arg_index(const sim_proc_args *a, const char *name) {
    for (int k = 0; k < a->n; k++)
        if (mcdc_str_ieq(a->names[k], name)) return k;
    return -1;
}

static int exec_sql_with_params(stmt_ctx *x, sim_proc_args *a, sql_params *dp, mcdc_error *err) {
    sim_session *s = x->s;
    dp->n = 0;
    const char *stmt = sim_arg_text(a, "@stmt", 0);
    if (!stmt) return sim_err(err, 214, "Procedure expects parameter '@statement' of type 'ntext/nchar/nvarchar'.");
    const char *decl = sim_arg_text(a, "@params", 1);
    int rc = MCDC_OK;
    /* declare the parameters */
    if (decl && decl[0]) {
        tsql_tok *dt = NULL;
        int dn = 0;
        rc = tsql_lex(&dt, &dn, decl, strlen(decl), err);
        int i = 0, pos = 2;
        while (rc == MCDC_OK && i < dn) {
            if (tsql_tok_op(&dt[i], ",")) { i++; continue; }
            if (dt[i].t != TK_VAR) { rc = syntax_err(err, dt, i, dn); break; }
            char name[SIM_NAME_MAX], tt[64];
            snprintf(name, sizeof name, "%.*s", dt[i].n, dt[i].s);
            i++;
            sim_type ty;
            if (!parse_type_at(dt, &i, dn, &ty, tt, sizeof tt)) { rc = sim_err(err, 2715, "Cannot find data type %s.", tt); break; }
            bool out = false;
            for (; i < dn && !tsql_tok_op(&dt[i], ","); i++) /* OUTPUT, = default */
                if (tsql_tok_is(&dt[i], "OUTPUT") || tsql_tok_is(&dt[i], "OUT")) out = true;
            sim_var *v = var_find(s, name);
            if (!v) {
                rc = var_declare(s, name, &ty, err);
                v = var_find(s, name);
            }
            if (rc != MCDC_OK || !v) break;
            int ai = arg_index(a, name);
            if (ai < 0 && pos < a->n && !a->names[pos][0]) ai = pos;
            pos++;
            if (dp->n < 32) {
                snprintf(dp->names[dp->n], SIM_NAME_MAX, "%s", name);
                dp->arg[dp->n] = ai;
                dp->output[dp->n++] = out;
            }
            if (ai >= 0 && x->rpc_params && ai + x->rpc_first < x->rpc_nparams &&
                x->rpc_params[ai + x->rpc_first].output && !out)
                rc = sim_err(err, 8162,
                             "The formal parameter \"%s\" was not declared as an OUTPUT parameter, but the actual"
                             " parameter passed in requested output.", name);
            if (rc == MCDC_OK && ai >= 0) rc = var_assign(s, v, a->vals[ai], err);
        }
        mcdc_free(dt);
    }
    if (rc != MCDC_OK) return rc;
    tsql_tok *toks = NULL;
    int n = 0;
    rc = tsql_lex(&toks, &n, stmt, strlen(stmt), err);
    if (rc != MCDC_OK) {
        if (err && !err->server_number) { err->server_number = 102; err->server_class = 15; }
        return rc;
    }
    bool save = x->in_proc;
    const sim_param *rp = x->rpc_params;
    x->in_proc = true;
    x->rpc_params = NULL; /* an EXEC inside is no RPC */
    rc = run_tokens(x, toks, n);
    x->in_proc = save;
    x->rpc_params = rp;
    mcdc_free(toks);
    return rc == SIM_EXEC_ABORTED ? -998 : MCDC_OK;
}

/* A variable's value as the sink hands values out (borrowed from v). */
static sim_value var_value(const sim_var *v) {
    sim_value r = {SIM_V_NULL, 0, 0, NULL, 0};
    switch (v->kind) {
    case SQLITE_INTEGER: r.kind = SIM_V_INT; r.i = v->i; break;
    case SQLITE_FLOAT: r.kind = SIM_V_REAL; r.f = v->f; break;
    case SQLITE_TEXT: r.kind = SIM_V_TEXT; r.p = v->p; r.n = v->n; break;
    case SQLITE_BLOB: r.kind = SIM_V_BLOB; r.p = v->p; r.n = v->n; break;
    default: break;
    }
    return r;
}

/* RETURNVALUE tokens for the RPC's OUTPUT parameters, in RPC order. */
static void send_outputs(stmt_ctx *x, const sql_params *dp) {
    if (!x->rpc_params || !x->sink->return_value) return;
    for (int k = x->rpc_first; k < x->rpc_nparams && !x->aborted; k++) {
        if (!x->rpc_params[k].output) continue;
        for (int d = 0; d < dp->n; d++) {
            if (dp->arg[d] != k - x->rpc_first || !dp->output[d]) continue;
            sim_var *v = var_find(x->s, dp->names[d]);
            if (!v) break;
            sim_value val = var_value(v);
            if (x->sink->return_value(x->sink->ctx, k, dp->names[d], &v->type, &val)) x->aborted = true;
            break;
        }
    }
}

static int run_proc(stmt_ctx *x, const char *proc, sim_proc_args *a, sql_params *dp, mcdc_error *err) {
    const char *p = proc;
    if (ci_prefix(p, "dbo.") ) p += 4;
    int status = 0, rc;
    bool handled = false, sql = false;
    bool save = x->in_proc;
    x->in_proc = true;
    dp->n = 0;
    if (mcdc_str_ieq(p, "sp_executesql") || mcdc_str_ieq(p, "sys.sp_executesql")) {
        rc = exec_sql_with_params(x, a, dp, err);
        handled = sql = true;
        if (rc == -998) { x->in_proc = save; return MCDC_OK; }
    } else {
        rc = sim_cdc_proc(x->s, p, a, x->sink, &status, err, &handled);
    }
    x->in_proc = save;
    if (!handled)
        return sim_err(err, 2812, "Could not find stored procedure '%s'.", proc);
    if (rc != MCDC_OK) return rc;
    if (x->sink->return_status && x->sink->return_status(x->sink->ctx, status)) x->aborted = true;
    if (sql) send_outputs(x, dp);
    send_done(x, 0, false, false);
    return MCDC_OK;
}

/* SELECT statement with possible "@v = expr" items. */
static int do_select(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
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
    if (!(k + 1 < end && t[k].t == TK_VAR && tsql_tok_op(&t[k + 1], "="))) return run_query(x, t, i, end, NULL, 0, err);
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
            sim_var *v = var_find(x->s, name);
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
    int rc = run_query(x, tk, 0, o, as, na, err);
    mcdc_free(tk);
    return rc;
}

/* SET IMPLICIT_TRANSACTIONS ON: these statements open a transaction when
 * none is open (SELECT only when it reads a table). */
static void implicit_begin(stmt_ctx *x, const tsql_tok *t, int i, int end) {
    sim_session *s = x->s;
    if (!s->implicit_tx || s->trancount > 0) return;
    static const char *W[] = {"INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "TRUNCATE", "GRANT", "REVOKE", NULL};
    bool opens = false;
    for (int w = 0; W[w]; w++) if (tsql_tok_is(&t[i], W[w])) opens = true;
    if (tsql_tok_is(&t[i], "SELECT") || tsql_tok_is(&t[i], "WITH"))
        for (int k = i; k < end; k++) if (tsql_tok_is(&t[k], "FROM")) { opens = true; break; }
    if (tsql_tok_is(&t[i], "CREATE") && i + 1 < end && tsql_tok_is(&t[i + 1], "DATABASE")) opens = false;
    if (!opens) return;
    pthread_mutex_lock(&s->srv->mu);
    s->trancount = 1;
    s->descriptor = ((uint64_t)s->spid << 32) | ((s->descriptor + 1) & 0xFFFFFFFFu);
    pthread_mutex_unlock(&s->srv->mu);
    if (x->sink->transaction && x->sink->transaction(x->sink->ctx, 8, s->descriptor)) x->aborted = true;
}

static int run_statement(stmt_ctx *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    const tsql_tok *f = &t[i];
    implicit_begin(x, t, i, end);
    if (tsql_tok_is(f, "SELECT")) return do_select(x, t, i, end, err);
    if (tsql_tok_is(f, "WITH")) return run_query(x, t, i, end, NULL, 0, err);
    if (tsql_tok_op(f, "(")) return run_query(x, t, i, end, NULL, 0, err);
    if (tsql_tok_is(f, "INSERT")) return do_insert(x, t, i, end, err);
    if (tsql_tok_is(f, "UPDATE")) return do_update_delete(x, t, i, end, true, err);
    if (tsql_tok_is(f, "DELETE")) return do_update_delete(x, t, i, end, false, err);
    if (tsql_tok_is(f, "CREATE")) return do_create(x, t, i, end, err);
    if (tsql_tok_is(f, "ALTER")) {
        if (i + 1 < end && tsql_tok_is(&t[i + 1], "TABLE")) return do_alter_table(x, t, i, end, NULL, err);
        send_done(x, 0, false, false); /* ALTER DATABASE / ROLE ...: accepted */
        return MCDC_OK;
    }
    if (tsql_tok_is(f, "DROP")) return do_drop(x, t, i, end, err);
    if (tsql_tok_is(f, "GRANT") || tsql_tok_is(f, "REVOKE") || tsql_tok_is(f, "DENY")) return do_grant(x, t, i, end, err);
    if (tsql_tok_is(f, "USE")) return do_use(x, t, i, end, err);
    if (tsql_tok_is(f, "BEGIN")) {
        if (i + 1 < end && (tsql_tok_is(&t[i + 1], "TRAN") || tsql_tok_is(&t[i + 1], "TRANSACTION")))
            return do_tran(x, t, i, end, err);
        return sim_err(err, 50000, "BEGIN ... END blocks are not supported by the simulator");
    }
    if (tsql_tok_is(f, "COMMIT") || tsql_tok_is(f, "ROLLBACK")) return do_tran(x, t, i, end, err);
    if (tsql_tok_is(f, "DECLARE")) return do_declare(x, t, i, end, err);
    if (tsql_tok_is(f, "SET")) return do_set(x, t, i, end, err);
    if (tsql_tok_is(f, "EXEC") || tsql_tok_is(f, "EXECUTE")) return do_exec(x, t, i, end, err);
    if (tsql_tok_is(f, "CHECKPOINT")) { send_done(x, 0, false, false); return MCDC_OK; }
    if (tsql_tok_is(f, "PRINT")) {
        sqlite3_value *v = NULL;
        int rc = eval_value(x, t, i + 1, end, &v, err);
        if (rc == MCDC_OK) {
            const unsigned char *txt = v ? sqlite3_value_text(v) : NULL;
            if (x->sink->message && x->sink->message(x->sink->ctx, false, 0, 1, 0, txt ? (const char *)txt : "", "", f->line))
                x->aborted = true;
            send_done(x, 0, false, false);
        }
        sqlite3_value_free(v);
        return rc;
    }
    if (tsql_tok_is(f, "WAITFOR")) {
        /* WAITFOR DELAY 'hh:mm:ss[.mmm]' (real time, at most 60 s) */
        char d[32] = "";
        if (i + 2 < end && tsql_tok_is(&t[i + 1], "DELAY")) tsql_tok_text(&t[i + 2], d, sizeof d);
        int h = 0, m = 0;
        double sec = 0;
        if (sscanf(d, "%d:%d:%lf", &h, &m, &sec) >= 2) {
            double ms = ((h * 60.0 + m) * 60.0 + sec) * 1000.0;
            if (ms > 60000) ms = 60000;
            mcdc_sleep_ms((int64_t)ms);
        }
        send_done(x, 0, false, false);
        return MCDC_OK;
    }
    if (tsql_tok_is(f, "TRUNCATE")) {
        return sim_err(err, 50000, "TRUNCATE TABLE is not supported by the simulator (use DELETE)");
    }
    return syntax_err(err, t, i, end);
}

static bool is_block_begin(const tsql_tok *t, int i, int n) {
    return tsql_tok_is(&t[i], "BEGIN") &&
           !(i + 1 < n && (tsql_tok_is(&t[i + 1], "TRAN") || tsql_tok_is(&t[i + 1], "TRANSACTION") ||
                           tsql_tok_is(&t[i + 1], "DISTRIBUTED")));
}

/* End (exclusive) of the statement or BEGIN ... END block at i. */
static int unit_end(const tsql_tok *t, int i, int n) {
    if (i < n && is_block_begin(t, i, n)) {
        int d = 0;
        for (int k = i; k < n; k++) {
            if (is_block_begin(t, k, n) || tsql_tok_is(&t[k], "CASE")) d++;
            else if (tsql_tok_is(&t[k], "END") && --d == 0) return k + 1;
        }
        return n;
    }
    return i < n ? stmt_end(t, i, n) : n;
}

static int run_tokens(stmt_ctx *x, const tsql_tok *t, int n);

/* Runs the statement or block [a, b). */
static void run_unit(stmt_ctx *x, const tsql_tok *t, int a, int b) {
    if (a < b && is_block_begin(t, a, b)) run_tokens(x, t + a + 1, b - a - 2);
    else if (a < b) run_tokens(x, t + a, b - a);
}

/* IF <condition> <statement|block> [ELSE <statement|block>]; returns the end. */
static int run_if(stmt_ctx *x, const tsql_tok *t, int i, int n) {
    int k = i + 1, d = 0;
    static const char *STARTS[] = {"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "EXEC",
                                   "EXECUTE", "BEGIN", "COMMIT", "ROLLBACK", "USE", "SET", "DECLARE", "GRANT",
                                   "PRINT", "IF", "RETURN", "WITH", NULL};
    for (; k < n; k++) {
        if (tsql_tok_op(&t[k], "(")) d++;
        else if (tsql_tok_op(&t[k], ")")) d--;
        else if (d == 0) {
            bool st = false;
            for (int w = 0; STARTS[w]; w++) if (tsql_tok_is(&t[k], STARTS[w])) st = true;
            if (st) break;
        }
    }
    mcdc_error err = MCDC_ERROR_INIT;
    if (k >= n || k == i + 1) {
        sim_err(&err, 102, "Incorrect syntax near '%s'.", k >= n ? "end of batch" : "IF");
        send_error(x, &err, t[i].line);
        return n;
    }
    /* CASE WHEN <cond> THEN 1 ELSE 0 END */
    int cn = k - (i + 1);
    tsql_tok *c = mcdc_malloc(((size_t)cn + 8) * sizeof *c);
    if (!c) return n;
    static const char *W[] = {"CASE", "WHEN", "THEN", "1", "ELSE", "0", "END"};
    tsql_tok mk[7];
    for (int w = 0; w < 7; w++) {
        mk[w].t = w == 3 || w == 5 ? TK_NUM : TK_IDENT;
        mk[w].s = W[w];
        mk[w].n = (int)strlen(W[w]);
        mk[w].line = t[i].line;
    }
    int o = 0;
    c[o++] = mk[0];
    c[o++] = mk[1];
    memcpy(c + o, t + i + 1, (size_t)cn * sizeof *c);
    o += cn;
    for (int w = 2; w < 7; w++) c[o++] = mk[w];
    c[o].t = TK_EOF;
    c[o].s = "";
    c[o].n = 0;
    sqlite3_value *v = NULL;
    int rc = eval_value(x, c, 0, o, &v, &err);
    mcdc_free(c);
    bool yes = rc == MCDC_OK && v && sqlite3_value_int(v) == 1;
    sqlite3_value_free(v);
    if (rc != MCDC_OK) send_error(x, &err, t[i].line);
    int te = unit_end(t, k, n);
    int next = te;
    while (next < n && tsql_tok_op(&t[next], ";")) next++;
    int es = -1, ee = next;
    if (next < n && tsql_tok_is(&t[next], "ELSE")) {
        es = next + 1;
        ee = unit_end(t, es, n);
    }
    if (rc == MCDC_OK) {
        if (yes) run_unit(x, t, k, te);
        else if (es >= 0) run_unit(x, t, es, ee);
    }
    return es >= 0 ? ee : te;
}

/* Runs all statements of a token array. Returns SIM_EXEC_OK / ABORTED. */
static int run_tokens(stmt_ctx *x, const tsql_tok *t, int n) {
    int i = 0;
    while (i < n && !x->aborted && !x->batch_ended) {
        if (tsql_tok_op(&t[i], ";")) { i++; continue; }
        if (tsql_tok_is(&t[i], "GO")) { i++; continue; }
        if (tsql_tok_is(&t[i], "IF")) { i = run_if(x, t, i, n); continue; }
        if (is_block_begin(t, i, n)) {
            int e = unit_end(t, i, n);
            run_unit(x, t, i, e);
            i = e;
            continue;
        }
        int end = stmt_end(t, i, n);
        mcdc_error err = MCDC_ERROR_INIT;
        int rc = run_statement(x, t, i, end, &err);
        if (rc != MCDC_OK) {
            send_error(x, &err, t[i].line);
            /* compile errors end the batch, as SQL Server's parse would; so
             * does being the deadlock victim, at every nesting level */
            if (err.server_number == 102 || err.server_number == 105) break;
            if (err.server_number == 1205) x->batch_ended = true;
        }
        i = end;
    }
    return x->aborted ? SIM_EXEC_ABORTED : SIM_EXEC_OK;
}

int sim_exec_batch(sim_session *s, const char *sql, size_t len, const sim_sink *sink) {
    stmt_ctx x = {s, sink, false, false, sql, NULL, 0, 0, false};
    tsql_tok *t = NULL;
    int n = 0;
    mcdc_error err = MCDC_ERROR_INIT;
    s->requests++;
    vars_clear(s);
    if (tsql_lex(&t, &n, sql, len, &err) != MCDC_OK) {
        if (!err.server_number) { err.server_number = err.code == MCDC_E_LIMIT ? 8621 : 105; err.server_class = 15; }
        send_error(&x, &err, 1);
        return x.aborted ? SIM_EXEC_ABORTED : SIM_EXEC_OK;
    }
    int rc = run_tokens(&x, t, n);
    mcdc_free(t);
    vars_clear(s);
    return rc;
}

sqlite3_value *sim_arg(const sim_proc_args *a, const char *name, int pos) {
    for (int k = 0; k < a->n; k++) if (a->names[k][0] && mcdc_str_ieq(a->names[k], name)) return a->vals[k];
    if (pos >= 0 && pos < a->n && !a->names[pos][0]) return a->vals[pos];
    return NULL;
}

const char *sim_arg_text(const sim_proc_args *a, const char *name, int pos) {
    sqlite3_value *v = sim_arg(a, name, pos);
    if (!v || sqlite3_value_type(v) == SQLITE_NULL) return NULL;
    return (const char *)sqlite3_value_text(v);
}

int sim_exec_rpc(sim_session *s, const char *proc_name, const sim_param *params, int nparams, const sim_sink *sink) {
    stmt_ctx x = {s, sink, false, false, "", params, nparams, 0, false};
    mcdc_error err = MCDC_ERROR_INIT;
    s->requests++;
    vars_clear(s);
    sim_proc_args *a = mcdc_calloc(1, sizeof *a);
    sql_params *dp = mcdc_calloc(1, sizeof *dp);
    if (!a || !dp) {
        mcdc_free(a);
        mcdc_free(dp);
        return SIM_EXEC_ABORTED;
    }
    /* values into sqlite3_values via the conversion statement */
    int rc = MCDC_OK;
    const char *proc = proc_name;
    int first = 0;
    if (mcdc_str_ieq(proc, "sp_prepexec")) { proc = "sp_executesql"; first = 1; }
    x.rpc_first = first;
    for (int k = first; k < nparams && k - first < 32 && rc == MCDC_OK; k++) {
        const sim_param *p = &params[k];
        snprintf(a->names[a->n], SIM_NAME_MAX, "%s", p->name ? p->name : "");
        sqlite3_stmt *st = s->conv;
        sqlite3_reset(st);
        switch (p->value.kind) {
        case SIM_V_INT: sqlite3_bind_int64(st, 1, p->value.i); break;
        case SIM_V_REAL: sqlite3_bind_double(st, 1, p->value.f); break;
        case SIM_V_TEXT: sqlite3_bind_text(st, 1, (const char *)p->value.p, (int)p->value.n, SQLITE_TRANSIENT); break;
        case SIM_V_BLOB: sqlite3_bind_blob(st, 1, p->value.p, (int)p->value.n, SQLITE_TRANSIENT); break;
        default: sqlite3_bind_null(st, 1); break;
        }
        char tn[64];
        sim_type_format(&p->type, tn, sizeof tn);
        if (p->type.id == 0) snprintf(tn, sizeof tn, "nvarchar(max)");
        sqlite3_bind_text(st, 2, tn, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW) a->vals[a->n] = sqlite3_value_dup(sqlite3_column_value(st, 0));
        else rc = sim_sqlite_err(s->rd, SQLITE_ERROR, &err);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        a->n++;
    }
    if (rc == MCDC_OK) rc = run_proc(&x, proc, a, dp, &err);
    if (rc != MCDC_OK) send_error(&x, &err, 1);
    args_free(a);
    mcdc_free(a);
    mcdc_free(dp);
    vars_clear(s);
    return x.aborted ? SIM_EXEC_ABORTED : SIM_EXEC_OK;
}

/* ---- faults -------------------------------------------------------------- */
int sim_fault_add(sim_server *srv, uint64_t setter_serial, const char *kind, int count, int ms, int times, mcdc_error *err);
int sim_fault_add(sim_server *srv, uint64_t setter_serial, const char *kind, int count, int ms, int times, mcdc_error *err) {
    fault_kind k;
    if (mcdc_str_ieq(kind, "drop_after_rows")) k = FAULT_DROP_AFTER_ROWS;
    else if (mcdc_str_ieq(kind, "drop_at_query")) k = FAULT_DROP_AT_QUERY;
    else if (mcdc_str_ieq(kind, "delay")) k = FAULT_DELAY;
    else if (mcdc_str_ieq(kind, "stall")) k = FAULT_STALL;
    else if (mcdc_str_ieq(kind, "refuse_login")) k = FAULT_REFUSE_LOGIN;
    else return sim_err(err, 50000, "sim.fault: unknown @kind '%s' (drop_after_rows, drop_at_query, delay, stall, refuse_login)", kind);
    pthread_mutex_lock(&srv->mu);
    if (srv->nfaults >= SIM_FAULTS_MAX) {
        pthread_mutex_unlock(&srv->mu);
        return sim_err(err, 50000, "sim.fault: more than %d faults set; EXEC sim.clear_faults first", SIM_FAULTS_MAX);
    }
    sim_fault *f = &srv->faults[srv->nfaults++];
    memset(f, 0, sizeof *f);
    f->kind = k;
    f->count = count;
    f->ms = ms;
    f->times = times > 0 ? times : 1;
    f->setter_serial = setter_serial;
    pthread_mutex_unlock(&srv->mu);
    return MCDC_OK;
}

void sim_fault_clear(sim_server *srv);
void sim_fault_clear(sim_server *srv) {
    pthread_mutex_lock(&srv->mu);
    srv->nfaults = 0;
    pthread_mutex_unlock(&srv->mu);
}

static void fault_fired(sim_server *srv, int k) {
    if (--srv->faults[k].times <= 0) {
        memmove(&srv->faults[k], &srv->faults[k + 1], (size_t)(srv->nfaults - k - 1) * sizeof srv->faults[0]);
        srv->nfaults--;
    }
}

void sim_fault_check(sim_server *srv, sim_session *s, sim_fault_point point, sim_fault_action *out) {
    memset(out, 0, sizeof *out);
    if (point == SIM_FAULT_QUERY && s) s->req_rows = 0;
    if (srv->nfaults == 0) {
        /* no fault set: the per-row call must not take the server mutex */
        if (point == SIM_FAULT_ROW && s) s->req_rows++;
        return;
    }
    pthread_mutex_lock(&srv->mu);
    uint64_t serial = s ? s->serial : 0;
    for (int k = 0; k < srv->nfaults; k++) {
        sim_fault *f = &srv->faults[k];
        if (serial && f->setter_serial == serial) continue;
        bool fire = false;
        switch (point) {
        case SIM_FAULT_LOGIN:
            if (f->kind == FAULT_REFUSE_LOGIN) { out->refuse_login = true; fire = true; }
            break;
        case SIM_FAULT_QUERY:
            if (f->kind == FAULT_DROP_AT_QUERY) {
                f->seen++;
                if (f->seen >= (f->count > 0 ? f->count : 1)) { out->drop_connection = true; fire = true; f->seen = 0; }
            } else if (f->kind == FAULT_DELAY) { out->delay_ms = f->ms; fire = true; }
            else if (f->kind == FAULT_STALL) { out->stall_ms = f->ms; fire = true; }
            break;
        case SIM_FAULT_ROW:
            if (f->kind == FAULT_DROP_AFTER_ROWS && s && s->req_rows >= f->count) { out->drop_connection = true; fire = true; }
            break;
        }
        if (fire) { fault_fired(srv, k); break; }
    }
    if (point == SIM_FAULT_ROW && s && !out->drop_connection) s->req_rows++;
    pthread_mutex_unlock(&srv->mu);
}
