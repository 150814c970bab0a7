/*
 * sim_engine.c - the simulator's SQL Server model: the entry point (server
 * open and close, its state, the clock and LSNs, SQL Server's error numbers
 * for SQLite's errors) and the list of known deviations below.
 *
 * The engine's rooms, sharing sim_engine_int.h: sim_catalog.c (database
 * files, catalog), sim_sqlfn.c (SQLite functions), sim_session.c (login,
 * sessions), sim_vars.c (variables, SET), sim_dispatch.c (batches, blocks,
 * IF), sim_query.c (SELECT, expressions), sim_emit.c (results), sim_proc.c
 * (EXEC, sp_executesql, RPC), sim_txn.c (transactions, undo), sim_locks.c
 * (READ COMMITTED), sim_txn_ddl.c (DDL inside transactions), sim_ddl.c,
 * sim_dml.c, sim_fast_cache.c (the fast path's per-session cache),
 * sim_snapshot.c (SNAPSHOT isolation: row versions, a read's versioned
 * view), sim_faults.c. CDC (procedures, change rows, capture) lives in
 * sim_cdc.c, the workload generator and bulk loaders in sim_work.c, T-SQL
 * -> SQLite translation in tsql_xlate.c, values/conversions/date functions
 * in sim_val.c, zones in sim_tz.c, the reader's fast path in
 * sim_engine_fast.c, the base-table fast path in sim_fast_table.c and the
 * change store and table store in sim_store.c.
 *
 * T-SQL surface: CREATE/DROP DATABASE, USE, CREATE/DROP TABLE (the types of
 * sim_type, NULL/NOT NULL, PRIMARY KEY, UNIQUE, computed columns AS (expr)
 * [PERSISTED]), ALTER TABLE ADD / DROP COLUMN / ALTER COLUMN, INSERT ...
 * VALUES (multi-row) / SELECT / DEFAULT VALUES, UPDATE and
 * DELETE with WHERE, BEGIN TRAN / COMMIT / ROLLBACK, SELECT with joins,
 * subqueries, CTEs, UNION ALL, TOP, OFFSET/FETCH, CROSS/OUTER APPLY and
 * derived tables with column alias lists (tsql_rewrite.c), window functions (NTILE,
 * LAG, ROW_NUMBER...), CONVERT/CAST (styles 1, 2, 126), AT TIME ZONE,
 * DATEADD/DATEDIFF/DATEPART, system functions (SERVERPROPERTY,
 * CURRENT_TIMEZONE_ID, SYSDATETIME..., OBJECT_ID, QUOTENAME,
 * HAS_PERMS_BY_NAME, @@SPID, @@VERSION), string functions (LEN, DATALENGTH,
 * LEFT, RIGHT, SUBSTRING, UPPER, LOWER, LTRIM, RTRIM, CHARINDEX, REPLACE,
 * REPLICATE, CONCAT), DECLARE/SET/SELECT @v, IF/ELSE, WHILE/BREAK/CONTINUE,
 * BEGIN...END blocks, EXEC with named or positional arguments, SET options
 * (NOCOUNT honoured; the rest accepted), CREATE LOGIN/USER, GRANT/REVOKE
 * SELECT and VIEW DATABASE/SERVER STATE, sys.columns/sys.tables/sys.objects/
 * sys.databases, sys.dm_exec_session_wait_stats, sys.dm_cdc_log_scan_sessions
 * and sys.dm_cdc_errors (sim_capture_log.c), sp_spaceused, sp_executesql (RPC or EXEC,
 * with OUTPUT parameters); hierarchyid, geography, geometry, xml and
 * sql_variant with their methods, static methods (type::Method) and
 * SQL_VARIANT_PROPERTY (sim_udt.c, sim_udt_fn.c).
 *
 * Schema changes on a captured table (sim_ddl.c, sim_cdc.c): ADD, DROP and
 * ALTER COLUMN write __sim_pending_ddl rows in the DDL's transaction (its
 * LSN between the transaction's begin and commit); the commit stamps them
 * and queues the transaction (with no lsn_time_mapping entry when it has
 * no change rows); the capture scan that reaches the commit alters the
 * change tables of an ALTER COLUMN and posts cdc.ddl_history rows. Change
 * rows take a captured column's value from the source column of the same
 * column_id (a dropped or re-added column reads NULL); column_ids are never
 * reused (the state key max_column_id:<table>).
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
 * path, and so is the snapshot reader's read of a base table (from the
 * table store, sim_fast_table.c); EXEC sim.set_fast_path @on = 0 turns both
 * off (tests compare them).
 *
 * Known deviations from SQL Server (documented for test authors):
 * - The server clock never runs backwards: a host wall-clock step back is
 *   absorbed (sim.set_clock and a negative sim.advance_clock still move it).
 *   sim.set_clock @frozen = 1 stops it at the instant given (every commit,
 *   SYSUTCDATETIME() and capture reads that instant) until set_clock
 *   without it; sim.advance_clock moves a frozen clock by its @seconds.
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
 *   values (it waits only for the rows it matches). ALTER and DROP TABLE
 *   wait (same rules) for every other open transaction that changed the
 *   table, and a write, like a read, waits for another open transaction's
 *   DDL on its table, as SQL Server's schema lock (Sch-M) makes them; a
 *   DDL never fails for another session's statement, nor makes one fail:
 *   each runs whole under the server lock, and a DML compiled before a DDL
 *   changed the schema is compiled again. Wait only for another open
 *   transaction's DDL on their tables: reads WITH (NOLOCK)/READUNCOMMITTED
 *   or under SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED (they see
 *   the uncommitted rows, as SQL Server's dirty reads, though never half of
 *   one statement: each is atomic in SQLite). Never wait: sys.* views,
 *   CDC procedures and functions (change tables only ever hold committed,
 *   captured rows). Readers hold no locks (writers never wait for them);
 *   REPEATABLE READ and SERIALIZABLE behave as this READ COMMITTED;
 *   ALTER DATABASE ... SET READ_COMMITTED_SNAPSHOT ON is refused (error
 *   50000). SET TRANSACTION ISOLATION LEVEL and SET LOCK_TIMEOUT inside
 *   sp_executesql end with it, as in SQL Server; in a batch they stay on
 *   the session.
 * - SNAPSHOT isolation is SQL Server's (sim_snapshot.c): ALTER DATABASE d
 *   SET ALLOW_SNAPSHOT_ISOLATION ON | OFF (default OFF, master ON; kept in
 *   the database file; sys.databases.snapshot_isolation_state / _desc),
 *   whose switch waits, IN_TRANSITION_TO_ON / _OFF, for the transactions
 *   that wrote in the database (to ON) or the snapshot transactions in it
 *   (to OFF) that were open when it started (SET LOCK_TIMEOUT and an
 *   ATTENTION end that wait, and the state goes back); error 226 inside a
 *   transaction, 5011 for another database or a non-admin. Under SET
 *   TRANSACTION ISOLATION LEVEL SNAPSHOT, an access to a user table (cdc.*
 *   included, sys.* not) fails with 3952 when the database does not allow
 *   it (3956 / 3954 in transition, for a new snapshot); a transaction takes
 *   its stamp at its first data access (3951 when that was under another
 *   level; switching a snapshot transaction to READ COMMITTED and back is
 *   allowed), an autocommit statement at its start. Reads never wait for
 *   writers (only for another transaction's uncommitted ALTER/DROP of the
 *   table they read, as for its schema lock) and see every row as
 *   committed at the stamp, the transaction's own changes included: writers
 *   in a database that allows it (or is in transition) keep the row's
 *   before-image per row and transaction (in memory, at most
 *   MCDC_SIM_ROW_VERSIONS_MAX: past that, writes there fail) while their
 *   transaction is open, and once committed while an older snapshot is
 *   active. An UPDATE/DELETE under SNAPSHOT of a row another transaction
 *   committed after the stamp fails with 3960 (state 2, 6 for a heap) and
 *   rolls the transaction back; after waiting for a writer of the row that
 *   then commits, too. A table changed by DDL after the stamp gives 3961
 *   (the transaction rolled back); ALTER TABLE in a snapshot transaction is
 *   3964. Limits: the view covers SELECTs and the expressions of SET,
 *   DECLARE, IF and EXEC arguments; the SELECT of INSERT ... SELECT and the
 *   WHERE and subqueries of UPDATE/DELETE read as READ COMMITTED does (and
 *   wait); the conflict check sees the rows that exist now (a row a later
 *   commit deleted is no conflict); change tables, cdc.lsn_time_mapping and
 *   sys views are read as of each statement, also in a snapshot
 *   transaction (capture keeps no versions); a table created after the
 *   stamp reads as its committed rows (empty), not 3961; a row inserted
 *   while another transaction's delete of the table's last rowid is open
 *   can reuse that rowid (SQLite), and the view then shows one of the two;
 *   an ALTER/DROP waits for open transactions that changed the table (see
 *   above), but not for snapshot readers: the table's older row versions
 *   go, and a snapshot that reads it afterwards gets 3961; a read the
 *   view changes lists its rows in rowid order. sim.bulk_load_table keeps
 *   no versions: it refuses to run while a snapshot is active or another
 *   session has a transaction open in the database.
 * - The table store (sim_store.h) answers the snapshot reader's base-table
 *   reads (SELECT of columns and literal CASTs FROM one table, WHERE NULLs
 *   and/or one range of an integer column) in rowid order, the order of
 *   SQLite's plan for them whenever it serves (an index led by the key
 *   needs the key to grow with the rowid; a covering index led by another
 *   column, or a query it cannot answer byte for byte, goes to SQLite). Any
 *   write drops a table's store; a read of the whole table builds it again
 *   (ranged reads use what is there); --table-cache-mb bounds it. A chunk
 *   planner's counts per slice of a key (mcdc_cdc_key_slices: floor(k / w)
 *   per row in a derived table, COUNT_BIG(*) ... GROUP BY it) are answered
 *   from it when the key grows with the rowid, in ascending slice order
 *   (NULL first), as SQLite's GROUP BY orders them. sim.fast_path_stats
 *   returns how many queries each fast path served.
 * - ROLLBACK undoes DML and CREATE TABLE, DROP TABLE, ALTER TABLE ADD/DROP/
 *   ALTER COLUMN (a rolled-back DDL never reaches cdc.ddl_history): a DDL
 *   inside a transaction saves a copy of the table (rows, rowids, CREATE
 *   statement, catalog rows) that ROLLBACK restores and COMMIT drops; GRANT/REVOKE
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
 * - CROSS/OUTER APPLY (SQLite has no LATERAL join) is rewritten in two
 *   shapes only: a left side that is one derived table of at most one row
 *   (a SELECT without FROM, or an aggregate without GROUP BY: the reference's
 *   fall-back queries), or a right side of at most one row (TOP (1), an
 *   aggregate without GROUP BY). Other shapes get error 50000 naming these.
 *   With TOP (1) on the right and an ORDER BY that ties, each column is its
 *   own subquery and two columns may come from two of the tied rows.
 * - In a query with an outer join (LEFT/RIGHT/FULL JOIN, OUTER APPLY) every
 *   result column is sent nullable; SQL Server marks only those of the
 *   outer side.
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
 * - DDL history: ddl_time is when the DDL ran; ddl_command the statement's
 *   text as sent. A transaction of DDL alone gets no cdc.lsn_time_mapping
 *   entry (the table's documentation: "one row for each transaction having
 *   rows in a change table"; not measured on SQL Server), so max_lsn passes
 *   its ddl_lsn only with the next change or idle entry.
 * - ALTER COLUMN rebuilds the table (SQLite has no ALTER COLUMN). Refused
 *   with one error where SQL Server sends two (5074, then 4922): a key
 *   column, a column a computed column uses. A narrower string that cuts a
 *   value gives 2628. NOT NULL over a NULL gives 515.
 * - Computed columns are SQLite generated columns over the translated
 *   expression: an expression the translator cannot type needs a CAST, no
 *   non-deterministic function (GETDATE), no constraints on them, no
 *   computed column in another's definition (1759, as SQL Server); one
 *   added by ALTER TABLE ... PERSISTED is computed on read.
 * - geography/geometry: 2D only (no Z/M: an error names it), no circular
 *   arcs or FULLGLOBE; values are serialized in version 1; the valid bit is
 *   set unless a ring is open or has fewer than 4 points (no OGC validity
 *   test); geography rings are taken as given (no orientation or
 *   hemisphere test); geography SRIDs 4120-4999 and 104001 are accepted;
 *   WKT numbers are written as .NET's round-trip format writes doubles.
 *   Comparing, sorting or grouping geography, geometry or xml is not
 *   refused (SQL Server refuses it: error 305 for xml). A CLR type's TDS
 *   metadata names the session's current database.
 * - A method of a column of a CLR type needs the column's table in the
 *   statement (FROM/JOIN/UPDATE), a variable or a CAST to type the receiver;
 *   in the WHERE of UPDATE/DELETE only the latter two work.
 * - xml: no DTD, no typed xml (schema collections), no xml methods (.value,
 *   .query); parse errors are 9400/9420 with SQL Server's "XML parsing: line
 *   L, character C, ..." form but not always its exact wording.
 * - sql_variant: the base type is the expression's type as the translator
 *   infers it (a literal 3000000000 is bigint, SQL Server's numeric(10,0));
 *   INSERT ... SELECT into a sql_variant column takes the stored value's
 *   class (int/bigint, float, nvarchar, varbinary) unless the SELECT casts to
 *   sql_variant; strings of two collations compare as sim_ci; datetimeoffset
 *   is accepted as a base type.
 */
#include "sim_engine_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
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

int sim_sqlite_err(sqlite3 *c, int rc, mcdc_error *err) {
    const char *m = sqlite3_errmsg(c);
    if (err && err->server_number) return MCDC_E_SERVER; /* already mapped */
    /* a function of ours names SQL Server's number: "#6522 text" */
    if (m[0] == '#' && m[1] >= '1' && m[1] <= '9') {
        char *end;
        long num = strtol(m + 1, &end, 10);
        if (*end == ' ' && num > 0 && num < 100000) return sim_err(err, (int)num, "%s", end + 1);
    }
    if (sim_ci_prefix(m, "no such table: ")) {
        const char *n = m + 15;
        const char *dot = strchr(n, '.');
        if (dot && mcdc_str_nieq(n, "dbo.", 4)) n = dot + 1;
        return sim_err(err, 208, "Invalid object name '%s'.", n);
    }
    if (sim_ci_prefix(m, "no such column: ")) {
        const char *n = m + 16;
        const char *dot = strrchr(n, '.');
        if (dot && !strchr(n, '"')) n = dot + 1;
        return sim_err(err, 207, "Invalid column name '%s'.", n);
    }
    if (sim_ci_prefix(m, "ambiguous column name: ")) return sim_err(err, 209, "Ambiguous column name '%s'.", m + 23);
    if (sim_ci_prefix(m, "UNIQUE constraint failed: ") || sim_ci_prefix(m, "PRIMARY KEY")) {
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
    if (sim_ci_prefix(m, "NOT NULL constraint failed: ")) {
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
    int64_t frozen = atomic_load(&srv->clock_frozen_us);
    if (frozen != INT64_MIN) return frozen;
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

int64_t sim_state_get(sqlite3 *c, const char *k, int64_t dflt) {
    sqlite3_stmt *st;
    int64_t v = dflt;
    if (sqlite3_prepare_v2(c, "SELECT v FROM __sim_state WHERE k = ?", -1, &st, NULL) != SQLITE_OK) return dflt;
    sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int64_t sim_schema_version(sqlite3 *c) {
    sqlite3_stmt *st;
    int64_t v = -1;
    if (sqlite3_prepare_v2(c, "PRAGMA schema_version", -1, &st, NULL) != SQLITE_OK) return v;
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

/* ---- server ------------------------------------------------------------ */
int sim_server_open(sim_server **out, const sim_config *cfg, mcdc_error *err) {
    *out = NULL;
    if (!cfg || !cfg->data_dir || !cfg->data_dir[0])
        return mcdc_error_set(err, MCDC_E_INVALID, "sim_server_open: data_dir is required");
    if (mkdir(cfg->data_dir, 0700) != 0 && errno != EEXIST)
        return mcdc_error_set(err, MCDC_E_IO, "cannot create data directory %s: %s", cfg->data_dir, strerror(errno));
    sim_owner_only(cfg->data_dir); /* a directory of an older build was 0755 */
    sim_server *srv = mcdc_calloc(1, sizeof *srv);
    if (srv) atomic_store(&srv->clock_last_us, INT64_MIN);
    if (srv) atomic_store(&srv->clock_frozen_us, INT64_MIN);
    if (!srv) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->cap_cv, NULL);
    sim_tz_retain();
    srv->data_dir = mcdc_strdup(cfg->data_dir);
    srv->product_major = cfg->product_major_version > 0 ? cfg->product_major_version : 16;
    srv->capture_poll_ms = cfg->capture_poll_ms;
    srv->capture_latency_ms = cfg->capture_latency_ms;
    srv->capture_maxtrans = cfg->capture_maxtrans > 0 ? cfg->capture_maxtrans : 500;
    if (sim_stores_create(&srv->stores, (int64_t)SIM_CHANGE_CACHE_MB_DEFAULT << 20, err) != MCDC_OK ||
        sim_vstore_create(&srv->vers, err) != MCDC_OK) {
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
    if (!srv->tz || !srv->data_dir) { sim_server_close(srv); return err ? err->code ? err->code : MCDC_E_NOMEM : MCDC_E_INVALID; }
    /* no other thread yet: the lock is held for the writer connections'
     * rule (sim_store_auth_ctx) */
    pthread_mutex_lock(&srv->mu);
    sim_db *m;
    int rc = sim_db_open(srv, "master", true, &m, err);
    if (rc == MCDC_OK)
        rc = sim_sql(m->w, err,
                     "CREATE TABLE IF NOT EXISTS __sim_databases(name TEXT PRIMARY KEY COLLATE NOCASE);"
                     "CREATE TABLE IF NOT EXISTS __sim_server(k TEXT PRIMARY KEY, v);");
    if (rc == MCDC_OK) rc = sim_logins_open(m, cfg->sa_password ? cfg->sa_password : "", err);
    if (rc != MCDC_OK) { pthread_mutex_unlock(&srv->mu); sim_server_close(srv); return rc; }
    /* stored state wins */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(m->w, "SELECT k, v FROM __sim_server", -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *k = (const char *)sqlite3_column_text(st, 0);
            if (k && strcmp(k, "clock_off_us") == 0) srv->clock_off_us = sqlite3_column_int64(st, 1);
            else if (k && strcmp(k, "clock_frozen_us") == 0 && sqlite3_column_type(st, 1) != SQLITE_NULL)
                srv->clock_frozen_us = sqlite3_column_int64(st, 1);
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
            rc = sim_db_open(srv, (const char *)sqlite3_column_text(st, 0), false, &d, err);
        }
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&srv->mu);
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

void sim_server_set_table_cache_mb(sim_server *srv, int mb) {
    sim_stores_set_table_limit(srv->stores, mb > 0 ? (int64_t)mb << 20 : 0);
}

int sim_server_state_put(sim_server *srv, const char *k, const char *text, int64_t v) {
    sim_db *m = sim_master_db(srv);
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
    sim_vstore_free(srv->vers);
    pthread_cond_destroy(&srv->cap_cv);
    pthread_mutex_destroy(&srv->mu);
    mcdc_free(srv->data_dir);
    mcdc_free(srv);
    sim_tz_release();
}
