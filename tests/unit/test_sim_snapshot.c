/* test_sim_snapshot.c - SNAPSHOT isolation in the simulator (sim_snapshot.c):
 * ALLOW_SNAPSHOT_ISOLATION and sys.databases, the errors SQL Server gives
 * (3951, 3952, 3956, 3960, 3961, 3964, 226, 5011), reads that never wait and
 * see the data as committed when the statement (autocommit) or the
 * transaction (its first read) started, own writes, rollbacks, the row
 * versions going away, READ UNCOMMITTED and NOLOCK, the isolation level of
 * sp_executesql ending with it. */
#include "sim_engine_int.h"
#include "test_sim_helpers.h"

/* Every row of the last result set, "r1;r2;..." (static buffer). */
static const char *rows_of(sim_session *s, coll *c, const char *sql) {
    static char out[COLL_ROWS * 32];
    run(s, c, sql);
    out[0] = 0;
    if (c->nerrors) {
        snprintf(out, sizeof out, "ERROR %d", c->err_number);
        return out;
    }
    size_t l = 0;
    for (int r = 0; r < c->nrows && r < COLL_ROWS && l + 2 < sizeof out; r++)
        l += (size_t)snprintf(out + l, sizeof out - l, "%s%s", r ? ";" : "", c->rows[r]);
    return out;
}

typedef struct snapenv {
    char dir[64];
    sim_server *srv;
    sim_session *a, *b, *w; /* writer, snapshot reader, another */
    coll *c;
} snapenv;

static void env_open(snapenv *e, bool allow) {
    memset(e, 0, sizeof *e);
    e->c = calloc(1, sizeof *e->c);
    test_tmpdir(e->dir, sizeof e->dir);
    e->srv = test_server(e->dir, 0);
    e->a = test_login(e->srv, "sa", "Sa_Passw0rd", NULL);
    run(e->a, e->c, "CREATE DATABASE snap; USE snap; CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v varchar(20) NULL);"
                    " INSERT INTO dbo.t VALUES (1, 'one'), (2, 'two'), (3, 'three');"
                    " CREATE TABLE dbo.h (k int NULL, v int NULL); INSERT INTO dbo.h VALUES (1, 10), (NULL, 20)");
    CHECK_EQ_INT(e->c->nerrors, 0);
    if (allow) run(e->a, e->c, "ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION ON");
    CHECK_EQ_INT(e->c->nerrors, 0);
    e->b = test_login(e->srv, "sa", "Sa_Passw0rd", "snap");
    e->w = test_login(e->srv, "sa", "Sa_Passw0rd", "snap");
    run(e->b, e->c, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT");
}

static void env_close(snapenv *e) {
    sim_session_close(e->a);
    sim_session_close(e->b);
    sim_session_close(e->w);
    sim_server_close(e->srv);
    test_rmdir(e->dir);
    free(e->c);
}

TEST(sim_snapshot_database_option) {
    snapenv e;
    env_open(&e, false);
    coll *c = e.c;
    CHECK_EQ_STR(rows_of(e.a, c, "SELECT name, snapshot_isolation_state, snapshot_isolation_state_desc,"
                                 " is_read_committed_snapshot_on FROM sys.databases ORDER BY name"),
                 "master|1|ON|0;snap|0|OFF|0");
    /* a read under SNAPSHOT fails with SQL Server's error; sys views do not */
    run(e.b, c, "SELECT COUNT(*) FROM dbo.t");
    CHECK_EQ_INT(c->err_number, 3952);
    CHECK(strstr(c->err_text, "Snapshot isolation transaction failed accessing database 'snap' because snapshot isolation"
                              " is not allowed in this database. Use ALTER DATABASE to allow snapshot isolation.") != NULL);
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT COUNT(*) FROM sys.tables"), "2");
    run(e.b, c, "UPDATE dbo.t SET v = 'x' WHERE id = 1"); /* writes too */
    CHECK_EQ_INT(c->err_number, 3952);
    /* ALTER DATABASE: in a transaction, of no database, by a non-admin */
    run(e.a, c, "BEGIN TRAN; ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION ON");
    CHECK_EQ_INT(c->err_number, 226);
    run(e.a, c, "ROLLBACK; ALTER DATABASE nosuch SET ALLOW_SNAPSHOT_ISOLATION ON");
    CHECK_EQ_INT(c->err_number, 5011);
    run(e.a, c, "ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION MAYBE");
    CHECK_EQ_INT(c->err_number, 102);
    run(e.a, c, "ALTER DATABASE snap SET READ_COMMITTED_SNAPSHOT ON");
    CHECK_EQ_INT(c->err_number, 50000);
    run(e.a, c, "ALTER DATABASE CURRENT SET ALLOW_SNAPSHOT_ISOLATION ON");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(rows_of(e.a, c, "SELECT snapshot_isolation_state_desc FROM sys.databases WHERE name = 'snap'"), "ON");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT COUNT(*) FROM dbo.t"), "3");
    /* a writer's open transaction holds the switch to ON in transition:
     * the ALTER waits for it (LOCK_TIMEOUT 0: at once error 1222, the state
     * goes back) */
    run(e.a, c, "ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION OFF");
    CHECK_EQ_INT(c->nerrors, 0);
    run(e.w, c, "BEGIN TRAN; UPDATE dbo.t SET v = 'w' WHERE id = 3");
    run(e.a, c, "SET LOCK_TIMEOUT 0; ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION ON");
    CHECK_EQ_INT(c->err_number, 1222);
    CHECK_EQ_STR(rows_of(e.a, c, "SELECT snapshot_isolation_state FROM sys.databases WHERE name = 'snap'"), "0");
    run(e.w, c, "ROLLBACK");
    run(e.a, c, "ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION ON");
    CHECK_EQ_INT(c->nerrors, 0);
    /* a non-admin may not alter it */
    run(e.a, c, "CREATE LOGIN rd WITH PASSWORD = 'Rd_Passw0rd1'; CREATE USER rd FOR LOGIN rd");
    sim_session *r = test_login(e.srv, "rd", "Rd_Passw0rd1", "snap");
    run(r, c, "ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION OFF");
    CHECK_EQ_INT(c->err_number, 5011);
    sim_session_close(r);
    /* the option survives a restart */
    sim_session_close(e.a);
    sim_session_close(e.b);
    sim_session_close(e.w);
    sim_server_close(e.srv);
    e.srv = test_server(e.dir, 0);
    e.a = test_login(e.srv, "sa", "Sa_Passw0rd", "snap");
    e.b = test_login(e.srv, "sa", "Sa_Passw0rd", "snap");
    e.w = test_login(e.srv, "sa", "Sa_Passw0rd", "snap");
    CHECK_EQ_STR(rows_of(e.a, c, "SELECT snapshot_isolation_state_desc FROM sys.databases WHERE name = 'snap'"), "ON");
    env_close(&e);
}

TEST(sim_snapshot_reads_never_wait_nor_see_uncommitted) {
    snapenv e;
    env_open(&e, true);
    coll *c = e.c;
    run(e.a, c, "BEGIN TRAN; UPDATE dbo.t SET v = 'ONE' WHERE id = 1; INSERT INTO dbo.t VALUES (4, 'four');"
                " DELETE FROM dbo.t WHERE id = 2; UPDATE dbo.h SET v = 11 WHERE k = 1; INSERT INTO dbo.h VALUES (NULL, 30)");
    CHECK_EQ_INT(c->nerrors, 0);
    /* READ COMMITTED waits (LOCK_TIMEOUT 0: error 1222); SNAPSHOT does not,
     * whatever its LOCK_TIMEOUT, and sees the committed rows */
    run(e.w, c, "SET LOCK_TIMEOUT 0; SELECT COUNT(*) FROM dbo.t");
    CHECK_EQ_INT(c->err_number, 1222);
    run(e.b, c, "SET LOCK_TIMEOUT 0");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT id, v FROM dbo.t ORDER BY id"), "1|one;2|two;3|three");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT COUNT(*), MAX(id) FROM dbo.t WHERE v LIKE 't%'"), "2|3");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT k, v FROM dbo.h ORDER BY v"), "1|10;NULL|20");
    /* joins, subqueries, UNION ALL, aliases: every reference is the view */
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT x.id, y.v FROM dbo.t AS x JOIN dbo.h y ON y.k = x.id"), "1|10");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT id FROM dbo.t WHERE id IN (SELECT k FROM dbo.h) UNION ALL"
                                 " SELECT COUNT(*) FROM dbo.h"), "1;2");
    run(e.b, c, "DECLARE @n int = (SELECT COUNT(*) FROM dbo.t); IF EXISTS (SELECT 1 FROM dbo.t WHERE id = 4) SELECT -1"
                " ELSE SELECT @n");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(c->rows[0], "3");
    /* READ UNCOMMITTED and NOLOCK see the uncommitted rows, without waiting */
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT COUNT(*) FROM dbo.t WITH (NOLOCK)"), "3");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT v FROM dbo.t WITH (NOLOCK) WHERE id = 1"), "ONE");
    run(e.w, c, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED");
    CHECK_EQ_STR(rows_of(e.w, c, "SELECT id FROM dbo.t ORDER BY id"), "1;3;4");
    CHECK(sim_snap_versions(e.srv) == 5); /* one per changed row */
    run(e.a, c, "COMMIT");
    CHECK(sim_snap_versions(e.srv) == 0); /* no snapshot is older: they go at once */
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT id, v FROM dbo.t ORDER BY id"), "1|ONE;3|three;4|four");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT COUNT(*) FROM dbo.h"), "3");
    /* a rolled-back writer: before and after, the snapshot sees the same */
    run(e.a, c, "BEGIN TRAN; DELETE FROM dbo.t; INSERT INTO dbo.t VALUES (9, 'nine')");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT id FROM dbo.t ORDER BY id"), "1;3;4");
    run(e.a, c, "ROLLBACK");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT id FROM dbo.t ORDER BY id"), "1;3;4");
    CHECK(sim_snap_versions(e.srv) == 0);
    /* a session that closes with its transaction open: the same */
    sim_session *x = test_login(e.srv, "sa", "Sa_Passw0rd", "snap");
    run(x, c, "BEGIN TRAN; UPDATE dbo.t SET v = 'gone' WHERE id = 3");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT v FROM dbo.t WHERE id = 3"), "three");
    sim_session_close(x);
    CHECK(sim_snap_versions(e.srv) == 0);
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT v FROM dbo.t WHERE id = 3"), "three");
    env_close(&e);
}

TEST(sim_snapshot_transaction_sees_its_start) {
    snapenv e;
    env_open(&e, true);
    coll *c = e.c;
    /* BEGIN TRAN fixes nothing: a commit before the first read is seen */
    run(e.b, c, "BEGIN TRAN");
    run(e.a, c, "UPDATE dbo.t SET v = 'uno' WHERE id = 1");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT v FROM dbo.t WHERE id = 1"), "uno");
    /* from its first read on, later commits are not (autocommit writers,
     * a transaction, a delete and an insert) */
    run(e.a, c, "UPDATE dbo.t SET v = 'eins' WHERE id = 1; BEGIN TRAN; DELETE FROM dbo.t WHERE id = 2;"
                " INSERT INTO dbo.t VALUES (5, 'five'); COMMIT; UPDATE dbo.t SET v = 'zwei' WHERE id = 1");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT id, v FROM dbo.t ORDER BY id"), "1|uno;2|two;3|three");
    CHECK(sim_snap_versions(e.srv) > 0); /* kept for the snapshot */
    CHECK_EQ_STR(rows_of(e.w, c, "SELECT id, v FROM dbo.t ORDER BY id"), "1|zwei;3|three;5|five");
    /* its own writes it sees; a row another transaction changed since its
     * start is an update conflict, and the transaction is rolled back */
    run(e.b, c, "UPDATE dbo.t SET v = 'tres' WHERE id = 3; INSERT INTO dbo.t VALUES (6, 'six')");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT id, v FROM dbo.t ORDER BY id"), "1|uno;2|two;3|tres;6|six");
    CHECK_EQ_STR(rows_of(e.w, c, "SELECT id, v FROM dbo.t WITH (NOLOCK) ORDER BY id"), "1|zwei;3|tres;5|five;6|six");
    run(e.b, c, "UPDATE dbo.t SET v = 'x' WHERE id = 1");
    CHECK_EQ_INT(c->err_number, 3960);
    CHECK(strstr(c->err_text, "Snapshot isolation transaction aborted due to update conflict. You cannot use snapshot"
                              " isolation to access table 'dbo.t' directly or indirectly in database 'snap'") != NULL);
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT @@TRANCOUNT"), "0");
    CHECK_EQ_STR(rows_of(e.w, c, "SELECT id, v FROM dbo.t ORDER BY id"), "1|zwei;3|three;5|five");
    CHECK(sim_snap_versions(e.srv) == 0);
    /* COMMIT of a snapshot transaction that wrote: its rows stand */
    run(e.b, c, "BEGIN TRAN; SELECT COUNT(*) FROM dbo.t; UPDATE dbo.t SET v = 'drei' WHERE id = 3; COMMIT");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(rows_of(e.w, c, "SELECT v FROM dbo.t WHERE id = 3"), "drei");
    /* an autocommit UPDATE under SNAPSHOT that waited for a writer who then
     * committed the row: a conflict too */
    run(e.a, c, "BEGIN TRAN; UPDATE dbo.t SET v = 'held' WHERE id = 5");
    run(e.b, c, "SET LOCK_TIMEOUT 0; UPDATE dbo.t SET v = 'mine' WHERE id = 5");
    CHECK_EQ_INT(c->err_number, 1222);
    run(e.a, c, "COMMIT");
    run(e.b, c, "SET LOCK_TIMEOUT -1");
    env_close(&e);
}

TEST(sim_snapshot_errors_of_sql_server) {
    snapenv e;
    env_open(&e, true);
    coll *c = e.c;
    /* 3951: the transaction read under READ COMMITTED first */
    run(e.w, c, "BEGIN TRAN; SELECT COUNT(*) FROM dbo.t; SET TRANSACTION ISOLATION LEVEL SNAPSHOT; SELECT COUNT(*) FROM dbo.t");
    CHECK_EQ_INT(c->err_number, 3951);
    CHECK_EQ_STR(rows_of(e.w, c, "SELECT @@TRANCOUNT"), "0");
    /* switching a snapshot transaction to READ COMMITTED and back is fine */
    run(e.w, c, "BEGIN TRAN; SELECT COUNT(*) FROM dbo.t; SET TRANSACTION ISOLATION LEVEL READ COMMITTED;"
                " SELECT COUNT(*) FROM dbo.t; SET TRANSACTION ISOLATION LEVEL SNAPSHOT; SELECT COUNT(*) FROM dbo.t; COMMIT");
    CHECK_EQ_INT(c->nerrors, 0);
    /* 3964: ALTER TABLE inside a snapshot transaction */
    run(e.b, c, "BEGIN TRAN; SELECT COUNT(*) FROM dbo.t; ALTER TABLE dbo.t ADD x int NULL");
    CHECK_EQ_INT(c->err_number, 3964);
    run(e.b, c, "ROLLBACK");
    /* 3961: another session's DDL since the snapshot started */
    run(e.b, c, "BEGIN TRAN; SELECT COUNT(*) FROM dbo.h");
    run(e.a, c, "ALTER TABLE dbo.t ADD x int NULL");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT COUNT(*) FROM dbo.h"), "2"); /* another table: fine */
    run(e.b, c, "SELECT COUNT(*) FROM dbo.t");
    CHECK_EQ_INT(c->err_number, 3961);
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT @@TRANCOUNT"), "0");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT COUNT(*) FROM dbo.t"), "3"); /* a new snapshot is after it */
    /* a snapshot read waits for another transaction's uncommitted DDL */
    run(e.a, c, "BEGIN TRAN; ALTER TABLE dbo.t DROP COLUMN x");
    run(e.b, c, "SET LOCK_TIMEOUT 0; SELECT COUNT(*) FROM dbo.t");
    CHECK_EQ_INT(c->err_number, 1222);
    run(e.a, c, "COMMIT");
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT COUNT(*) FROM dbo.t"), "3");
    /* 3954 / 3952: the database switched off; a running snapshot
     * transaction holds the switch in transition */
    run(e.b, c, "SET LOCK_TIMEOUT -1; BEGIN TRAN; SELECT COUNT(*) FROM dbo.t");
    run(e.a, c, "SET LOCK_TIMEOUT 0; ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION OFF");
    CHECK_EQ_INT(c->err_number, 1222);
    CHECK_EQ_STR(rows_of(e.b, c, "SELECT COUNT(*) FROM dbo.t"), "3");
    run(e.b, c, "COMMIT");
    run(e.a, c, "ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION OFF");
    CHECK_EQ_INT(c->nerrors, 0);
    run(e.b, c, "SELECT COUNT(*) FROM dbo.t");
    CHECK_EQ_INT(c->err_number, 3952);
    /* the syntax of SET TRANSACTION ISOLATION LEVEL */
    run(e.w, c, "SET TRANSACTION ISOLATION LEVEL SOMETIMES");
    CHECK_EQ_INT(c->err_number, 102);
    run(e.w, c, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;"
                " SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
    CHECK_EQ_INT(c->nerrors, 0);
    env_close(&e);
}

TEST(sim_snapshot_level_ends_with_sp_executesql) {
    snapenv e;
    env_open(&e, true);
    coll *c = e.c;
    /* inside: SNAPSHOT (no wait); after: the caller's READ COMMITTED again */
    run(e.a, c, "BEGIN TRAN; UPDATE dbo.t SET v = 'held' WHERE id = 2");
    run(e.w, c, "SET LOCK_TIMEOUT 0; EXEC sp_executesql N'SET TRANSACTION ISOLATION LEVEL SNAPSHOT;"
                " SELECT v FROM dbo.t WHERE id = 2'");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(c->rows[0], "two");
    run(e.w, c, "SELECT v FROM dbo.t WHERE id = 2");
    CHECK_EQ_INT(c->err_number, 1222);
    run(e.a, c, "ROLLBACK");
    /* a batch's SET stays on the session */
    run(e.w, c, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT");
    run(e.a, c, "BEGIN TRAN; UPDATE dbo.t SET v = 'held' WHERE id = 2");
    CHECK_EQ_STR(rows_of(e.w, c, "SELECT v FROM dbo.t WHERE id = 2"), "two");
    run(e.a, c, "ROLLBACK");
    env_close(&e);
}

/* A table without a primary key or unique constraint (a heap) under CDC:
 * no index for the capture instance, net changes refused (22939), an index
 * it does not have refused (22928); DML on it captured, read back under
 * SNAPSHOT by rowid. */
TEST(sim_heap_under_cdc) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(s, c, "CREATE DATABASE lab; USE lab; EXEC sys.sp_cdc_enable_db;"
              " CREATE TABLE dbo.h (kind varchar(10) NOT NULL, n int NULL); INSERT INTO dbo.h VALUES ('a', 1), ('a', 1)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'h', @role_name = NULL, @supports_net_changes = 1");
    CHECK_EQ_INT(c->err_number, 22939);
    run(s, c, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'h', @role_name = NULL, @index_name = N'IX_h'");
    CHECK_EQ_INT(c->err_number, 22928);
    CHECK_EQ_STR(c->err_text, "Index name 'IX_h' is not an index for table 'dbo.h'. Specify a valid index name for the table.");
    run(s, c, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'h', @role_name = NULL, @index_name = NULL");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N'h'");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK(strstr(c->colnames, "supports_net_changes|has_drop_pending|role_name|index_name|filegroup_name|create_date|index_column_list|captured_column_list") != NULL);
    /* supports_net_changes 0, index_name NULL, index_column_list NULL */
    const char *r = c->rows[0];
    int bars = 0;
    const char *f[16] = {r};
    for (const char *p = r; *p && bars < 15; p++)
        if (*p == '|') f[++bars] = p + 1;
    CHECK_EQ_INT(bars, 14);
    CHECK(strncmp(f[7], "0|", 2) == 0);
    CHECK(strncmp(f[10], "NULL|", 5) == 0);
    CHECK(strncmp(f[13], "NULL|", 5) == 0);
    CHECK_EQ_STR(f[14], "[kind], [n]");
    /* two equal rows: an update of both, captured as two pairs */
    run(s, c, "UPDATE dbo.h SET n = 2 WHERE kind = 'a'; EXEC sim.run_capture @ignore_latency = 1");
    CHECK_EQ_STR(rows_of(s, c, "SELECT __$operation, n FROM cdc.dbo_h_CT ORDER BY __$start_lsn, __$seqval, __$operation"),
                 "3|1;4|2;3|1;4|2");
    /* under SNAPSHOT, the rows a writer changed keep their place */
    run(s, c, "ALTER DATABASE lab SET ALLOW_SNAPSHOT_ISOLATION ON");
    sim_session *w = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    run(w, c, "BEGIN TRAN; UPDATE dbo.h SET n = 9 WHERE kind = 'a'; INSERT INTO dbo.h VALUES ('z', 0)");
    run(s, c, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT");
    CHECK_EQ_STR(rows_of(s, c, "SELECT kind, n FROM dbo.h"), "a|2;a|2");
    run(w, c, "COMMIT");
    CHECK_EQ_STR(rows_of(s, c, "SELECT kind, n FROM dbo.h"), "a|9;a|9;z|0");
    sim_session_close(w);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

/* Writers move money between accounts in transactions (the total never
 * changes when committed), inserting and deleting rows on the way, while
 * snapshot readers sum: every snapshot sees the total, and a snapshot
 * transaction reads the same rows twice. */
typedef struct xfer_arg {
    sim_server *srv;
    int id, rounds;
    _Atomic int *stop;
} xfer_arg;

static void *xfer_writer(void *p) {
    xfer_arg *a = p;
    coll *c = calloc(1, sizeof *c);
    sim_session *s = test_login(a->srv, "sa", "Sa_Passw0rd", "snap");
    char q[512];
    for (int r = 0; r < a->rounds; r++) {
        int from = (r * 7 + a->id) % 20 + 1, to = (r * 13 + a->id * 3) % 20 + 1;
        if (from == to) to = to % 20 + 1;
        int tmp = 1000 + a->id * 1000 + r;
        /* a temporary row carries the amount: inserted, then deleted */
        snprintf(q, sizeof q,
                 "BEGIN TRAN; UPDATE dbo.acct SET bal = bal - 3 WHERE id = %d; INSERT INTO dbo.acct VALUES (%d, 3);"
                 " UPDATE dbo.acct SET bal = bal + 3 WHERE id = %d; DELETE FROM dbo.acct WHERE id = %d;"
                 " UPDATE dbo.acct SET bal = bal - 0 WHERE id = %d; %s",
                 from, tmp, to, tmp, to, r % 5 == 4 ? "ROLLBACK" : "COMMIT");
        run(s, c, q);
        if (r % 3 == 0) run(s, c, "UPDATE dbo.acct SET bal = bal + 0 WHERE id = 1"); /* autocommit */
    }
    sim_session_close(s);
    free(c);
    return NULL;
}

TEST(sim_snapshot_under_concurrent_writers) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(s, c, "CREATE DATABASE snap; ALTER DATABASE snap SET ALLOW_SNAPSHOT_ISOLATION ON; USE snap;"
              " CREATE TABLE dbo.acct (id int NOT NULL PRIMARY KEY, bal int NOT NULL)");
    for (int k = 1; k <= 20; k++) {
        char q[128];
        snprintf(q, sizeof q, "INSERT INTO dbo.acct VALUES (%d, 100)", k);
        run(s, c, q);
    }
    run(s, c, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT");
    _Atomic int stop = 0;
    xfer_arg args[2] = {{srv, 1, 60, &stop}, {srv, 2, 60, &stop}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, xfer_writer, &args[k]);
    int bad = 0, reads = 0, changed = 0;
    for (int r = 0; r < 80; r++) {
        if (strcmp(rows_of(s, c, "SELECT SUM(bal), COUNT(*) FROM dbo.acct"), "2000|20") != 0) bad++;
        reads++;
        if (r % 8 == 0) { /* a snapshot transaction: the same rows twice */
            run(s, c, "BEGIN TRAN");
            char first[COLL_ROWS * 32];
            snprintf(first, sizeof first, "%s", rows_of(s, c, "SELECT id, bal FROM dbo.acct ORDER BY id"));
            mcdc_sleep_ms(3);
            const char *second = rows_of(s, c, "SELECT id, bal FROM dbo.acct ORDER BY id");
            if (strcmp(first, second) != 0) bad++;
            if (strcmp(rows_of(s, c, "SELECT SUM(bal) FROM dbo.acct"), "2000") != 0) bad++;
            run(s, c, "COMMIT");
            if (strcmp(first, "1|100;2|100;3|100;4|100;5|100;6|100;7|100;8|100;9|100;10|100;11|100;12|100;13|100;14|100;"
                              "15|100;16|100;17|100;18|100;19|100;20|100") != 0) changed++;
        }
    }
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    CHECK_EQ_INT(bad, 0);
    CHECK(reads == 80);
    CHECK(changed > 0); /* the writers did move money while we read */
    CHECK_EQ_STR(rows_of(s, c, "SELECT SUM(bal), COUNT(*) FROM dbo.acct"), "2000|20");
    CHECK(sim_snap_versions(srv) == 0);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
