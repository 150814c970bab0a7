/* test_sim_more.c - RPCs, variables, subqueries, faults, capture latency and
 * maxtrans, the capture thread, retention, workload and bulk load. */
#include <unistd.h>

#include "test_sim_helpers.h"

static sim_server *open_lab(char *dir, size_t cap, sim_session **s, coll *c, int poll_ms) {
    test_tmpdir(dir, cap);
    sim_server *srv = test_server(dir, poll_ms);
    *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(*s, c, "CREATE DATABASE lab; USE lab; CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v nvarchar(50) NULL);"
               " EXEC sys.sp_cdc_enable_db; EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL;"
               " EXEC sim.run_capture");
    return srv;
}

TEST(sim_rpc_executesql_and_variables) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = open_lab(dir, sizeof dir, &s, c, 0);
    run(s, c, "INSERT INTO dbo.t VALUES (1, N'a'), (2, N'b'), (3, N'c')");
    sim_param p[4];
    memset(p, 0, sizeof p);
    const char *stmt = "SELECT v FROM dbo.t WHERE id >= @P1 AND v <> @P2 ORDER BY id";
    const char *decl = "@P1 int, @P2 nvarchar(10)";
    p[0].name = "@stmt";
    p[0].type.id = SIM_T_NVARCHAR; p[0].type.length = -1;
    p[0].value.kind = SIM_V_TEXT; p[0].value.p = (const uint8_t *)stmt; p[0].value.n = strlen(stmt);
    p[1].name = "@params";
    p[1].type = p[0].type;
    p[1].value.kind = SIM_V_TEXT; p[1].value.p = (const uint8_t *)decl; p[1].value.n = strlen(decl);
    p[2].name = "@P1"; p[2].type.id = SIM_T_INT; p[2].value.kind = SIM_V_INT; p[2].value.i = 2;
    p[3].name = "@P2"; p[3].type.id = SIM_T_NVARCHAR; p[3].type.length = 10;
    p[3].value.kind = SIM_V_TEXT; p[3].value.p = (const uint8_t *)"c"; p[3].value.n = 1;
    memset(c, 0, sizeof *c);
    sim_sink k = {c, coll_columns, coll_row, coll_done, coll_msg, coll_db, coll_tran, coll_status, coll_retval, NULL, NULL};
    CHECK_EQ_INT(sim_exec_rpc(s, "sp_executesql", p, 4, &k), SIM_EXEC_OK);
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_STR(c->rows[0], "b");
    /* a CDC procedure as an RPC */
    sim_param q[1];
    memset(q, 0, sizeof q);
    q[0].name = "@capture_instance"; q[0].type.id = SIM_T_NVARCHAR; q[0].type.length = 128;
    q[0].value.kind = SIM_V_TEXT; q[0].value.p = (const uint8_t *)"dbo_t"; q[0].value.n = 5;
    memset(c, 0, sizeof *c);
    CHECK_EQ_INT(sim_exec_rpc(s, "sys.sp_cdc_get_captured_columns", q, 1, &k), SIM_EXEC_OK);
    CHECK_EQ_INT(c->nrows, 2);
    /* variables within a batch */
    run(s, c, "DECLARE @n int = 2, @s nvarchar(20); SET @s = N'x' + N'y'; SELECT @n = COUNT(*) FROM dbo.t WHERE id > 1;"
              " SELECT @n, @s");
    CHECK_EQ_STR(c->rows[0], "2|xy");
    /* subqueries, UNION ALL, key_bound shape */
    run(s, c, "SELECT (SELECT MIN(id) FROM dbo.t) AS lo, (SELECT MAX(id) FROM dbo.t WHERE id < 3) AS hi");
    CHECK_EQ_STR(c->rows[0], "1|2");
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_INT);
    run(s, c, "SELECT id FROM (SELECT TOP (2) id FROM dbo.t WHERE id >= 1 ORDER BY id) AS p1 UNION ALL"
              " SELECT id FROM (SELECT TOP (2) id FROM dbo.t WHERE id > 2 ORDER BY id) AS p2 ORDER BY id OFFSET 2 ROWS FETCH NEXT 1 ROWS ONLY");
    CHECK_EQ_STR(c->rows[0], "3");
    run(s, c, "SELECT id, NTILE(2) OVER (ORDER BY id) AS [__$tile], LAG(id) OVER (ORDER BY id) AS [__$prev] FROM dbo.t ORDER BY id");
    CHECK_EQ_STR(c->rows[2], "3|2|2");
    run(s, c, "SELECT @@VERSION, @@SPID");
    CHECK(strstr(c->rows[0], "Microsoft SQL Server 2022") == c->rows[0]);
    run(s, c, "SELECT @undeclared");
    CHECK_EQ_INT(c->err_number, 137);
    /* fn_cdc_get_all_changes_<ci> */
    run(s, c, "EXEC sim.run_capture; UPDATE dbo.t SET v = N'bb' WHERE id = 2; EXEC sim.run_capture;"
              " DECLARE @f binary(10) = sys.fn_cdc_get_min_lsn(N'dbo_t'), @t binary(10) = sys.fn_cdc_get_max_lsn();"
              " SELECT [__$operation], id, v FROM cdc.fn_cdc_get_all_changes_dbo_t(@f, @t, N'all') ORDER BY [__$start_lsn], [__$seqval], [__$operation]");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 4);
    CHECK_EQ_STR(c->rows[3], "4|2|bb");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_faults) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = open_lab(dir, sizeof dir, &s, c, 0);
    sim_session *o = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    sim_fault_action a;
    run(s, c, "EXEC sim.fault @kind = 'drop_at_query', @count = 2");
    CHECK_EQ_INT(c->nerrors, 0);
    sim_fault_check(srv, s, SIM_FAULT_QUERY, &a);
    CHECK(!a.drop_connection); /* the setter is not hit */
    sim_fault_check(srv, o, SIM_FAULT_QUERY, &a);
    CHECK(!a.drop_connection);
    sim_fault_check(srv, o, SIM_FAULT_QUERY, &a);
    CHECK(a.drop_connection);
    sim_fault_check(srv, o, SIM_FAULT_QUERY, &a);
    CHECK(!a.drop_connection); /* consumed */
    run(s, c, "EXEC sim.fault @kind = 'drop_after_rows', @count = 3");
    sim_fault_check(srv, o, SIM_FAULT_QUERY, &a);
    int dropped_at = -1;
    for (int k = 0; k < 10 && dropped_at < 0; k++) {
        sim_fault_check(srv, o, SIM_FAULT_ROW, &a);
        if (a.drop_connection) dropped_at = k;
    }
    CHECK_EQ_INT(dropped_at, 3);
    run(s, c, "EXEC sim.fault @kind = 'delay', @ms = 250, @times = 2; EXEC sim.fault @kind = 'refuse_login'");
    sim_fault_check(srv, o, SIM_FAULT_QUERY, &a);
    CHECK_EQ_INT(a.delay_ms, 250);
    sim_fault_check(srv, NULL, SIM_FAULT_LOGIN, &a);
    CHECK(a.refuse_login);
    sim_fault_check(srv, NULL, SIM_FAULT_LOGIN, &a);
    CHECK(!a.refuse_login);
    run(s, c, "EXEC sim.clear_faults");
    sim_fault_check(srv, o, SIM_FAULT_QUERY, &a);
    CHECK_EQ_INT(a.delay_ms, 0);
    run(s, c, "EXEC sim.fault @kind = 'explode'");
    CHECK_EQ_INT(c->err_number, 50000);
    sim_session_close(o);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_capture_latency_maxtrans_retention) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = open_lab(dir, sizeof dir, &s, c, 0);
    run(s, c, "EXEC sim.set_capture_latency @ms = 60000; EXEC sim.set_capture_maxtrans @n = 2");
    for (int k = 1; k <= 5; k++) {
        char q[96];
        snprintf(q, sizeof q, "INSERT INTO dbo.t VALUES (%d, N'x')", k);
        run(s, c, q);
    }
    run(s, c, "EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "0"); /* not old enough */
    run(s, c, "EXEC sim.advance_clock @seconds = 61; EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "2"); /* maxtrans per scan */
    run(s, c, "EXEC sim.run_capture; EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "5");
    run(s, c, "INSERT INTO dbo.t VALUES (6, N'y'); EXEC sim.run_capture @ignore_latency = 1");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "6");
    /* retention: entries older than 60 minutes go, min_lsn moves first */
    run(s, c, "EXEC sys.sp_cdc_change_job @job_type = N'cleanup', @retention = 60; EXEC sim.advance_clock @seconds = 7200;"
              " INSERT INTO dbo.t VALUES (7, N'z'); EXEC sim.run_capture @ignore_latency = 1");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT WHERE [__$start_lsn] < sys.fn_cdc_get_min_lsn(N'dbo_t')"), "0");
    CHECK_EQ_STR(scalar(s, c, "SELECT CASE WHEN COUNT(*) < 7 THEN 1 ELSE 0 END FROM cdc.dbo_t_CT"), "1");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_capture_thread_polls) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = open_lab(dir, sizeof dir, &s, c, 20);
    run(s, c, "INSERT INTO dbo.t VALUES (1, N'x')");
    int got = 0;
    for (int k = 0; k < 100 && !got; k++) {
        mcdc_sleep_ms(10);
        got = strcmp(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "1") == 0;
    }
    CHECK(got);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_workload_and_bulk_load) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = open_lab(dir, sizeof dir, &s, c, 0);
    run(s, c, "EXEC sim.workload @table = N'dbo.t', @tps = 2000, @seconds = 0.05, @mix = 'insert=0.6,update=0.3,delete=0.1',"
              " @max_statements = 4, @seed = 42, @wait = 1");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "EXEC sim.run_capture @ignore_latency = 1; EXEC sim.run_capture @ignore_latency = 1");
    char rows1[64];
    snprintf(rows1, sizeof rows1, "%.63s", scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"));
    CHECK(atoi(rows1) >= 100);
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT c WHERE NOT EXISTS (SELECT 1 FROM cdc.lsn_time_mapping m WHERE m.start_lsn = c.[__$start_lsn])"), "0");
    /* same seed on a fresh server: same change stream */
    char dir2[64];
    coll *c2 = calloc(1, sizeof *c2);
    sim_session *s2;
    sim_server *srv2 = open_lab(dir2, sizeof dir2, &s2, c2, 0);
    run(s2, c2, "EXEC sim.workload @table = N'dbo.t', @tps = 2000, @seconds = 0.05, @mix = 'insert=0.6,update=0.3,delete=0.1',"
                " @max_statements = 4, @seed = 42, @wait = 1; EXEC sim.run_capture @ignore_latency = 1; EXEC sim.run_capture @ignore_latency = 1");
    CHECK_EQ_STR(scalar(s2, c2, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), rows1);
    char sum1[64];
    snprintf(sum1, sizeof sum1, "%.63s", scalar(s, c, "SELECT SUM([__$operation] * id) FROM cdc.dbo_t_CT"));
    CHECK_EQ_STR(scalar(s2, c2, "SELECT SUM([__$operation] * id) FROM cdc.dbo_t_CT"), sum1);
    sim_session_close(s2);
    sim_server_close(srv2);
    test_rmdir(dir2);
    free(c2);
    /* bulk load */
    run(s, c, "EXEC sim.bulk_load @capture_instance = N'dbo_t', @transactions = 50, @rows_per_tx = 20, @seed = 1");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->last_count, 0); /* final done of the EXEC */
    char q[128];
    snprintf(q, sizeof q, "SELECT COUNT(*) - %d FROM cdc.dbo_t_CT", atoi(rows1));
    CHECK_EQ_STR(scalar(s, c, q), "1000");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM (SELECT tran_end_time, LAG(tran_end_time) OVER (ORDER BY start_lsn) AS p FROM cdc.lsn_time_mapping) x WHERE tran_end_time < p"), "0");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM (SELECT [__$start_lsn] AS l, [__$seqval] AS q FROM cdc.dbo_t_CT) x WHERE q >= l"), "0");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_cte_if_collation) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = open_lab(dir, sizeof dir, &s, c, 0);
    run(s, c, "INSERT INTO dbo.t VALUES (1, N'Alpha'), (2, N'beta'), (3, N'Gamma')");
    run(s, c, "WITH x AS (SELECT id, v FROM dbo.t WHERE id > 1), y (n) AS (SELECT COUNT(*) FROM x) SELECT x.v, y.n FROM x, y ORDER BY x.id");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[1], "Gamma|2");
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_NVARCHAR);
    /* case-insensitive comparisons and order, as SQL Server's default collation */
    CHECK_EQ_STR(scalar(s, c, "SELECT id FROM dbo.t WHERE v = N'ALPHA'"), "1");
    run(s, c, "SELECT v FROM dbo.t ORDER BY v");
    CHECK_EQ_STR(c->rows[1], "beta");
    CHECK_EQ_STR(scalar(s, c, "SELECT is_cdc_enabled FROM sys.databases WHERE name = DB_NAME()"), "1");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM sys.databases"), "2");
    CHECK_EQ_STR(scalar(s, c, "SELECT type FROM sys.objects WHERE object_id = OBJECT_ID('dbo.t')"), "U");
    /* implicit transactions: a DML opens one, ROLLBACK undoes it */
    run(s, c, "SET IMPLICIT_TRANSACTIONS ON; INSERT INTO dbo.t VALUES (50, N'imp'); SELECT @@TRANCOUNT");
    CHECK_EQ_STR(c->rows[0], "1");
    CHECK_EQ_INT(c->ntran, 1);
    run(s, c, "ROLLBACK; SET IMPLICIT_TRANSACTIONS OFF; SELECT COUNT(*) FROM dbo.t WHERE id = 50");
    CHECK_EQ_STR(c->rows[0], "0");
    /* IF / ELSE / BEGIN ... END */
    run(s, c, "IF OBJECT_ID(N'dbo.t') IS NOT NULL SELECT 'yes' ELSE SELECT 'no'");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_STR(c->rows[0], "yes");
    run(s, c, "IF NOT EXISTS (SELECT 1 FROM dbo.t WHERE id = 9) BEGIN INSERT INTO dbo.t VALUES (9, N'nine'); SELECT CASE WHEN 1 = 1 THEN 'in' END END; SELECT COUNT(*) FROM dbo.t");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(c->rows[0], "4");
    run(s, c, "IF 1 = 0 SELECT 'a' ELSE BEGIN SELECT 'b' END");
    CHECK_EQ_STR(c->rows[0], "b");
    /* wait stats: own row readable by a least-privilege login */
    run(s, c, "CREATE LOGIN r WITH PASSWORD = 'x'; CREATE USER r FOR LOGIN r");
    sim_session *r = test_login(srv, "r", "x", "lab");
    coll *cr = calloc(1, sizeof *cr);
    sim_session_add_network_wait(r, 42);
    run(r, cr, "SELECT session_id, wait_time_ms FROM sys.dm_exec_session_wait_stats WHERE wait_type = N'ASYNC_NETWORK_IO'");
    CHECK_EQ_INT(cr->nrows, 1);
    char want[32];
    snprintf(want, sizeof want, "%d|42", sim_session_spid(r));
    CHECK_EQ_STR(cr->rows[0], want);
    sim_session_close(r);
    free(cr);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

static sim_param text_param(const char *name, const char *text) {
    sim_param p;
    memset(&p, 0, sizeof p);
    p.name = name;
    p.type.id = SIM_T_NVARCHAR;
    p.type.length = -1;
    p.value.kind = SIM_V_TEXT;
    p.value.p = (const uint8_t *)text;
    p.value.n = strlen(text);
    return p;
}

static sim_param int_param(const char *name, int64_t v, bool output) {
    sim_param p;
    memset(&p, 0, sizeof p);
    p.name = name;
    p.type.id = SIM_T_INT;
    p.value.kind = output && v == 0 ? SIM_V_NULL : SIM_V_INT;
    p.value.i = v;
    p.output = output;
    return p;
}

TEST(sim_rpc_output_parameters) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = open_lab(dir, sizeof dir, &s, c, 0);
    run(s, c, "INSERT INTO dbo.t VALUES (1, N'a'), (2, N'b'), (3, N'c')");
    sim_sink k = {c, coll_columns, coll_row, coll_done, coll_msg, coll_db, coll_tran, coll_status, coll_retval, NULL, NULL};
    /* named: a result set, then RETURNVALUEs in RPC order with the declared names */
    sim_param p[6] = {
        text_param("@stmt", "SELECT @n = COUNT(*) FROM dbo.t WHERE id >= @min; SET @d = 2.5; SELECT v FROM dbo.t WHERE id = @min"),
        text_param("@params", "@min int, @n int OUTPUT, @d decimal(5,2) OUT, @unused int OUTPUT"),
        int_param("@min", 2, false), int_param("@n", 0, true), int_param("@d", 0, true), int_param("@unused", 5, false)};
    memset(c, 0, sizeof *c);
    CHECK_EQ_INT(sim_exec_rpc(s, "sp_executesql", p, 6, &k), SIM_EXEC_OK);
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_STR(c->rows[0], "b");
    CHECK_EQ_INT(c->nretvals, 2); /* @unused was not sent as output */
    CHECK_EQ_STR(c->retvals[0], "3|@n|2");
    CHECK_EQ_STR(c->retvals[1], "4|@d|2.50");
    /* positional values, in declaration order */
    p[2] = int_param("", 3, false);
    p[3] = int_param("", 0, true);
    p[4] = int_param("", 0, true);
    memset(c, 0, sizeof *c);
    CHECK_EQ_INT(sim_exec_rpc(s, "sp_executesql", p, 5, &k), SIM_EXEC_OK);
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nretvals, 2);
    CHECK_EQ_STR(c->retvals[0], "3|@n|1");
    /* output requested for a parameter not declared OUTPUT: error 8162 */
    sim_param q[3] = {text_param("@stmt", "SET @x = 1"), text_param("@params", "@x int"), int_param("@x", 0, true)};
    memset(c, 0, sizeof *c);
    CHECK_EQ_INT(sim_exec_rpc(s, "sp_executesql", q, 3, &k), SIM_EXEC_OK);
    CHECK_EQ_INT(c->err_number, 8162);
    CHECK_EQ_INT(c->nretvals, 0);
    /* a batch's EXEC sp_executesql ... OUTPUT sets the caller's variable, no RETURNVALUE */
    run(s, c, "DECLARE @cnt int = 0, @top nvarchar(50);"
              " EXEC sp_executesql N'SELECT @c = COUNT(*), @t = MAX(v) FROM dbo.t', N'@c int OUTPUT, @t nvarchar(50) OUTPUT',"
              " @c = @cnt OUTPUT, @t = @top OUTPUT;"
              " SELECT @cnt, @top");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nretvals, 0);
    CHECK_EQ_STR(c->rows[0], "3|c");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
