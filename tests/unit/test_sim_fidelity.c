/* test_sim_fidelity.c - fidelity fixes reported by the reader's author:
 * faults and reused SPIDs, exact numeric literals, nested AT TIME ZONE,
 * string functions, large multi-row INSERTs with date and GUID literals;
 * exact decimals, ROLLBACK of DDL, READ COMMITTED between sessions. */
#include "sim_engine_int.h"
#include "test_sim_helpers.h"

static sim_server *fid_open(char *dir, size_t cap, sim_session **s, coll *c) {
    test_tmpdir(dir, cap);
    sim_server *srv = test_server(dir, 0);
    *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(*s, c, "CREATE DATABASE lab; USE lab");
    return srv;
}

static void lab_close(sim_server *srv, const char *dir, sim_session **ss, int ns, coll **cs, int nc) {
    for (int k = 0; k < ns; k++) sim_session_close(ss[k]);
    sim_server_close(srv);
    test_rmdir(dir);
    for (int k = 0; k < nc; k++) free(cs[k]);
}

TEST(sim_fault_spares_only_the_setting_session) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    sim_session *setter = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    int spid = sim_session_spid(setter);
    run(setter, c, "EXEC sim.fault @kind = 'drop_at_query', @count = 1");
    CHECK_EQ_INT(c->nerrors, 0);
    sim_session_close(setter);
    /* the next login reuses the SPID: it must not be spared */
    sim_session *next = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    CHECK_EQ_INT(sim_session_spid(next), spid);
    sim_fault_action a;
    sim_fault_check(srv, next, SIM_FAULT_QUERY, &a);
    CHECK(a.drop_connection);
    /* a fault set by a live session still spares it */
    run(next, c, "EXEC sim.fault @kind = 'drop_at_query', @count = 1");
    sim_fault_check(srv, next, SIM_FAULT_QUERY, &a);
    CHECK(!a.drop_connection);
    sim_fault_check(srv, s, SIM_FAULT_QUERY, &a);
    CHECK(a.drop_connection);
    sim_session_close(next);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_exact_numeric_literals) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.n (id int NOT NULL PRIMARY KEY, d decimal(38,4) NULL, b bigint NULL, m money NULL)");
    run(s, c, "INSERT INTO dbo.n VALUES (1, 12345678901234567890.1234, 9223372036854775807, 922337203685477.5807),"
              " (2, -99999999999999999999999999999999.9999, -9223372036854775808, -922337203685477.5808),"
              " (3, 0.0001, 1234567890123456789, 1.5)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "SELECT d, b, m FROM dbo.n ORDER BY id");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "12345678901234567890.1234|9223372036854775807|922337203685477.5807");
    CHECK_EQ_STR(c->rows[1], "-99999999999999999999999999999999.9999|-9223372036854775808|-922337203685477.5808");
    CHECK_EQ_STR(c->rows[2], "0.0001|1234567890123456789|1.5000");
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST(12345678901234567890.1234 AS decimal(38,4))"), "12345678901234567890.1234");
    CHECK_EQ_STR(scalar(s, c, "SELECT d FROM dbo.n WHERE d = 12345678901234567890.1234"), "12345678901234567890.1234");
    CHECK_EQ_STR(scalar(s, c, "SELECT 1.5 + 1"), "2.5");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_nested_at_time_zone) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.z (id int NOT NULL PRIMARY KEY, t datetime NULL);"
              " INSERT INTO dbo.z VALUES (1, '2024-01-15 10:30:00.000'), (2, '2024-07-15 10:30:00.000')");
    run(s, c, "SELECT CAST((t AT TIME ZONE N'E. South America Standard Time') AT TIME ZONE 'UTC' AS datetime2(3)) FROM dbo.z ORDER BY id");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[0], "2024-01-15 13:30:00.000");
    CHECK_EQ_STR(c->rows[1], "2024-07-15 13:30:00.000");
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_DATETIME2);
    run(s, c, "SELECT (t AT TIME ZONE 'Pacific Standard Time') AT TIME ZONE 'UTC' FROM dbo.z WHERE id = 2");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(c->rows[0], "2024-07-15 17:30:00.000 +00:00");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_string_functions) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    CHECK_EQ_STR(scalar(s, c, "SELECT REPLICATE('ab', 3)"), "ababab");
    CHECK_EQ_STR(scalar(s, c, "SELECT REPLICATE(N'x', 0)"), "");
    CHECK_EQ_STR(scalar(s, c, "SELECT REPLICATE('x', -1)"), "NULL");
    CHECK_EQ_STR(scalar(s, c, "SELECT LEN(REPLICATE('0123456789', 1000))"), "10000");
    CHECK_EQ_STR(scalar(s, c, "SELECT LEFT('abcdef', 2)"), "ab");
    CHECK_EQ_STR(scalar(s, c, "SELECT RIGHT('abcdef', 2)"), "ef");
    CHECK_EQ_STR(scalar(s, c, "SELECT SUBSTRING('abcdef', 2, 3)"), "bcd");
    CHECK_EQ_STR(scalar(s, c, "SELECT LEN('ab  ')"), "2");
    CHECK_EQ_STR(scalar(s, c, "SELECT DATALENGTH('ab  ')"), "4");
    CHECK_EQ_STR(scalar(s, c, "SELECT DATALENGTH(N'ab')"), "4");
    CHECK_EQ_STR(scalar(s, c, "SELECT UPPER('aB') + LOWER('Cd')"), "ABcd");
    CHECK_EQ_STR(scalar(s, c, "SELECT '[' + LTRIM('  a ') + ']' + RTRIM(' b  ') + ']'"), "[a ] b]");
    CHECK_EQ_STR(scalar(s, c, "SELECT CHARINDEX('c', 'abcabc')"), "3");
    CHECK_EQ_STR(scalar(s, c, "SELECT CHARINDEX('c', 'abcabc', 4)"), "6");
    CHECK_EQ_STR(scalar(s, c, "SELECT REPLACE('aXbX', 'X', 'yy')"), "ayybyy");
    CHECK_EQ_STR(scalar(s, c, "SELECT CONCAT('a', NULL, 1, 'b')"), "a1b");
    run(s, c, "CREATE TABLE dbo.s (id int NOT NULL PRIMARY KEY, v varchar(max) NULL);"
              " INSERT INTO dbo.s VALUES (1, REPLICATE('z', 9000))");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT LEN(v) FROM dbo.s"), "9000");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

/* 1000-row INSERT ... VALUES with datetime2 and uniqueidentifier literals. */
TEST(sim_large_multirow_insert_with_literals) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.w (id int NOT NULL PRIMARY KEY, t datetime2(7) NULL, d date NULL, g uniqueidentifier NULL,"
              " o datetimeoffset(3) NULL, v nvarchar(40) NULL);"
              " EXEC sys.sp_cdc_enable_db;"
              " EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'w', @role_name = NULL");
    CHECK_EQ_INT(c->nerrors, 0);
    mcdc_buf q = {0};
    for (int batch = 0; batch < 2; batch++) {
        q.len = 0;
        mcdc_buf_append_str(&q, "INSERT INTO dbo.w (id, t, d, g, o, v) VALUES ", NULL);
        for (int k = 0; k < 1000; k++) {
            int id = batch * 1000 + k;
            mcdc_buf_printf(&q, NULL, "%s(%d, '2024-%02d-%02d %02d:%02d:%02d.%07d', '2023-%02d-%02d',"
                                      " '%08X-1234-5678-9ABC-%012X', '2024-03-01 10:00:00.123 +05:30', N'row %d')",
                            k ? ", " : "", id, 1 + k % 12, 1 + k % 28, k % 24, k % 60, (k * 7) % 60, k * 13 % 10000000,
                            1 + k % 12, 1 + (k * 3) % 28, (unsigned)id, (unsigned)id * 2654435761u, id);
        }
        mcdc_buf_cstr(&q, NULL);
        run(s, c, (const char *)q.data);
        CHECK_EQ_INT(c->nerrors, 0);
        if (c->nerrors) fprintf(stderr, "  batch %d: %d %s\n", batch, c->err_number, c->err_text);
        CHECK_EQ_INT((int)c->last_count, 1000);
    }
    mcdc_buf_free(&q);
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.w"), "2000");
    for (int id = 0; id < 2000; id += 999) {
        int k = id % 1000;
        char want[160], sql[200];
        snprintf(want, sizeof want, "2024-%02d-%02d %02d:%02d:%02d.%07d|2023-%02d-%02d|%08X-1234-5678-9ABC-%012X|row %d",
                 1 + k % 12, 1 + k % 28, k % 24, k % 60, (k * 7) % 60, k * 13 % 10000000, 1 + k % 12, 1 + (k * 3) % 28,
                 (unsigned)id, (unsigned)id * 2654435761u, id);
        snprintf(sql, sizeof sql, "SELECT t, d, g, v FROM dbo.w WHERE id = %d", id);
        CHECK_EQ_STR(scalar(s, c, sql), want);
    }
    run(s, c, "EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_w_CT"), "2000");
    /* the reader's change query with the reference's parenthesised zone form */
    run(s, c, "SELECT CONVERT(varchar(22), c.__$start_lsn, 1) AS [_start_lsn], c.__$operation AS [_operation],"
              " CAST((m.tran_end_time AT TIME ZONE N'E. South America Standard Time') AT TIME ZONE 'UTC' AS datetime2(3)) AS [_commit_ts],"
              " c.[id], c.[g] FROM cdc.[dbo_w_CT] AS c INNER JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn"
              " WHERE c.__$start_lsn BETWEEN CONVERT(binary(10), '0x00000000000000000000', 1) AND CONVERT(binary(10), '0xFFFFFFFFFFFFFFFFFFFF', 1)"
              " ORDER BY c.__$start_lsn, c.__$command_id, c.__$seqval, c.__$operation");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 2000);
    CHECK_EQ_INT(c->cols[2].type.id, SIM_T_DATETIME2);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

/* The host clock stepping back between a commit and the capture scan (the
 * cause of the flaky sim_cdc_t3_read_semantics: the scan's "now" fell
 * before the commit's time and the latency check left the commit out). */
TEST(sim_clock_never_runs_backwards) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v int NULL); EXEC sys.sp_cdc_enable_db;"
              " EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL;"
              " EXEC sim.run_capture; INSERT INTO dbo.t VALUES (1, 1)");
    CHECK_EQ_INT(c->nerrors, 0);
    int64_t before = sim_srv_utc_us(srv);
    srv->clock_off_us -= 5 * 1000000; /* what a wall-clock step back does */
    CHECK(sim_srv_utc_us(srv) >= before);
    run(s, c, "EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "1");
    run(s, c, "INSERT INTO dbo.t VALUES (2, 2); EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "2");
    /* commit times follow LSN order */
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.lsn_time_mapping a JOIN cdc.lsn_time_mapping b"
                              " ON b.start_lsn > a.start_lsn AND b.tran_end_time < a.tran_end_time"), "0");
    /* sim.set_clock still moves the clock back on purpose */
    run(s, c, "EXEC sim.set_clock @utc = '2001-02-03 04:05:06'");
    CHECK_EQ_STR(scalar(s, c, "SELECT CONVERT(varchar(10), SYSUTCDATETIME(), 120)"), "2001-02-03");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_decimal_compare_exact) {
    /* the collation's order: by value, any scale or form; text after numbers */
    CHECK(sim_decimal_cmp("10.5", 4, "9.25", 4) > 0);
    CHECK(sim_decimal_cmp("-10.5", 5, "-9.25", 5) < 0);
    CHECK(sim_decimal_cmp("10.50", 5, "10.5", 4) == 0);
    CHECK(sim_decimal_cmp("-0.00", 5, "0", 1) == 0);
    CHECK(sim_decimal_cmp("0.001", 5, "0.01", 4) < 0);
    CHECK(sim_decimal_cmp("1e2", 3, "99.99", 5) > 0);
    CHECK(sim_decimal_cmp("12345678901234567890.1235", 25, "12345678901234567890.1234", 25) > 0);
    CHECK(sim_decimal_cmp("abc", 3, "1", 1) > 0);
    CHECK(sim_decimal_cmp("abc", 3, "abd", 3) < 0);

    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.d (id int NOT NULL PRIMARY KEY, v decimal(10,2) NULL, m money NULL)");
    run(s, c, "INSERT INTO dbo.d VALUES (1, 10.5, 3), (2, 9.25, 100), (3, -1, 20.5), (4, NULL, NULL)");
    CHECK_EQ_INT(c->nerrors, 0);
    /* literals of every form, other columns, variables, CAST results */
    run(s, c, "SELECT id FROM dbo.d WHERE v < 9.5 ORDER BY id");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[0], "2");
    CHECK_EQ_STR(c->rows[1], "3");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.d WHERE v < 10"), "2");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.d WHERE 10 > v"), "2");
    CHECK_EQ_STR(scalar(s, c, "SELECT id FROM dbo.d WHERE v = 10.5"), "1");
    CHECK_EQ_STR(scalar(s, c, "SELECT id FROM dbo.d WHERE v > m"), "1");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.d WHERE v BETWEEN 9 AND 10"), "1");
    CHECK_EQ_STR(scalar(s, c, "SELECT id FROM dbo.d WHERE v IN (10.50, 7)"), "1");
    CHECK_EQ_STR(scalar(s, c, "DECLARE @p decimal(10,2) = 9.5; SELECT COUNT(*) FROM dbo.d WHERE v < @p"), "2");
    CHECK_EQ_STR(scalar(s, c, "DECLARE @p decimal(10,2) = 9.5; SELECT CASE WHEN @p < 10 THEN 1 ELSE 0 END"), "1");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.d WHERE v < CAST('9.5' AS decimal(10,2))"), "2");
    CHECK_EQ_STR(scalar(s, c, "SELECT CASE WHEN CAST(10.5 AS decimal(5,1)) > 9 THEN 1 ELSE 0 END"), "1");
    CHECK_EQ_STR(scalar(s, c, "SELECT CASE WHEN CONVERT(decimal(5,1), '10.5') > CONVERT(decimal(5,2), '9.25') THEN 1 ELSE 0 END"), "1");
    CHECK_EQ_STR(scalar(s, c, "SELECT CASE WHEN 12345678901234567890.5 > 9 THEN 1 ELSE 0 END"), "1");
    /* ORDER BY, MIN/MAX, GROUP BY */
    run(s, c, "SELECT v FROM dbo.d WHERE v IS NOT NULL ORDER BY v DESC");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "10.50");
    CHECK_EQ_STR(c->rows[1], "9.25");
    CHECK_EQ_STR(c->rows[2], "-1.00");
    CHECK_EQ_STR(scalar(s, c, "SELECT CONCAT(MIN(v), '/', MAX(v), '/', MIN(m), '/', MAX(m)) FROM dbo.d"),
                 "-1.00/10.50/3.0000/100.0000");
    /* a decimal key: 10.5 and 10.50 are the same key */
    run(s, c, "CREATE TABLE dbo.k (k decimal(10,2) NOT NULL PRIMARY KEY, u money NULL UNIQUE)");
    run(s, c, "INSERT INTO dbo.k VALUES (10.5, 1), (9.5, 2)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "INSERT INTO dbo.k VALUES (10.50, 3)");
    CHECK_EQ_INT(c->err_number, 2627);
    run(s, c, "INSERT INTO dbo.k VALUES (11, 1.0000)");
    CHECK_EQ_INT(c->err_number, 2627);
    run(s, c, "SELECT k FROM dbo.k WHERE k > 9.75");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_STR(c->rows[0], "10.50");
    /* ALTER TABLE ADD: the new column compares the same way */
    run(s, c, "ALTER TABLE dbo.k ADD w decimal(6,1) NULL");
    run(s, c, "UPDATE dbo.k SET w = k * 10");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT k FROM dbo.k WHERE w > 100"), "10.50");
    lab_close(srv, dir, &s, 1, &c, 1);
}

TEST(sim_decimal_sum_avg_exact) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.a (id int NOT NULL PRIMARY KEY, d decimal(38,4) NULL, m money NULL, s smallmoney NULL)");
    /* through double these lose digits: 0.1 + 0.2, and 20-digit values */
    run(s, c, "INSERT INTO dbo.a VALUES (1, 12345678901234567890.1234, 0.1, 1.5), (2, 0.0001, 0.2, 2.25),"
              " (3, -0.0002, 922337203685477.5807, NULL), (4, NULL, -922337203685477.5807, 1)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "SELECT SUM(d), AVG(d), SUM(m), SUM(s), AVG(id), SUM(id) FROM dbo.a");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_STR(c->rows[0], "12345678901234567890.1233|4115226300411522630.041100|0.3000|4.7500|2|10");
    /* SQL Server's result types */
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_DECIMAL);
    CHECK_EQ_INT(c->cols[0].type.precision, 38);
    CHECK_EQ_INT(c->cols[0].type.scale, 4);
    CHECK_EQ_INT(c->cols[1].type.scale, 6);
    CHECK_EQ_INT(c->cols[2].type.id, SIM_T_MONEY);
    CHECK_EQ_INT(c->cols[3].type.id, SIM_T_MONEY);
    CHECK_EQ_INT(c->cols[4].type.id, SIM_T_INT);
    /* empty input: NULL; DISTINCT; GROUP BY; a window */
    CHECK_EQ_STR(scalar(s, c, "SELECT SUM(d) FROM dbo.a WHERE id > 9"), "NULL");
    CHECK_EQ_STR(scalar(s, c, "SELECT SUM(DISTINCT m) FROM dbo.a WHERE id < 3"), "0.3000");
    run(s, c, "SELECT id, SUM(d) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM dbo.a ORDER BY id");
    CHECK_EQ_INT(c->nrows, 4);
    CHECK_EQ_STR(c->rows[1], "2|12345678901234567890.1235");
    CHECK_EQ_STR(c->rows[2], "3|-0.0001");
    CHECK_EQ_STR(c->rows[3], "4|-0.0002");
    CHECK_EQ_INT(c->cols[1].type.id, SIM_T_DECIMAL);
    /* past decimal(38): error 8115 */
    run(s, c, "CREATE TABLE dbo.big (v decimal(38,0) NULL)");
    run(s, c, "INSERT INTO dbo.big VALUES (99999999999999999999999999999999999999), (1)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "SELECT SUM(v) FROM dbo.big");
    CHECK_EQ_INT(c->err_number, 8115);
    /* % and / as T-SQL's: exact decimal remainder, sign of the dividend, 8134 on zero */
    run(s, c, "SELECT 7 % 2, CAST(10.5 AS decimal(5,2)) % 3, CAST(-10.5 AS decimal(5,2)) % 3, 7 / 2, 7 * 3 % 4");
    CHECK_EQ_STR(c->rows[0], "1|1.50|-1.50|3|1");
    run(s, c, "SELECT 1; SELECT id / 0 FROM dbo.a; SELECT 2");
    CHECK_EQ_INT(c->err_number, 8134);
    CHECK_EQ_STR(c->rows[0], "2");
    run(s, c, "SELECT 5 % 0");
    CHECK_EQ_INT(c->err_number, 8134);
    /* float input stays float */
    CHECK_EQ_STR(scalar(s, c, "SELECT SUM(CAST(id AS float) / 2) FROM dbo.a"), "5");
    lab_close(srv, dir, &s, 1, &c, 1);
}

/* A count read on the writer connection, under the server's lock as the
 * engine reads it. */
static int catalog_count(sim_session *s, const char *sql) {
    sqlite3_stmt *st;
    int n = -1;
    pthread_mutex_lock(&s->srv->mu);
    if (sqlite3_prepare_v2(s->db->w, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->srv->mu);
    return n;
}

static int undo_copies(sim_session *s) {
    return catalog_count(s, "SELECT count(*) FROM sqlite_schema WHERE name LIKE '\\_\\_sim\\_undo.%' ESCAPE '\\'");
}

TEST(sim_rollback_undoes_ddl) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.a (id int NOT NULL PRIMARY KEY, v varchar(10) NULL, w decimal(5,1) NULL);"
              "INSERT INTO dbo.a VALUES (1, 'x', 1.5), (2, 'y', NULL)");
    CHECK_EQ_INT(c->nerrors, 0);
    /* DML before and after DDL, CREATE, ALTER ADD/DROP COLUMN, DROP TABLE */
    run(s, c, "BEGIN TRAN; UPDATE dbo.a SET v = 'x2' WHERE id = 1; CREATE TABLE dbo.b (id int NULL);"
              " INSERT INTO dbo.b VALUES (1); ALTER TABLE dbo.a ADD z int NULL; UPDATE dbo.a SET z = id * 10;"
              " INSERT INTO dbo.a (id, v) VALUES (3, 'z'); ALTER TABLE dbo.a DROP COLUMN v;"
              " SELECT id, w, z FROM dbo.a ORDER BY id");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[1], "2|NULL|20");
    CHECK_EQ_STR(c->rows[2], "3|NULL|NULL");
    run(s, c, "DROP TABLE dbo.a; SELECT COUNT(*) FROM sys.tables WHERE name IN ('a', 'b')");
    CHECK_EQ_STR(c->rows[0], "1");
    CHECK(undo_copies(s) >= 3);
    run(s, c, "ROLLBACK");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(undo_copies(s), 0);
    run(s, c, "SELECT * FROM dbo.a ORDER BY id");
    CHECK_EQ_STR(c->colnames, "id|v|w");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[0], "1|x|1.5");
    CHECK_EQ_STR(c->rows[1], "2|y|NULL");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM sys.tables WHERE name = 'b'"), "0");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID('dbo.a')"), "3");
    run(s, c, "SELECT * FROM dbo.b");
    CHECK_EQ_INT(c->err_number, 208);
    /* the key and the decimal collation came back with the table */
    run(s, c, "INSERT INTO dbo.a VALUES (1, 'dup', 1)");
    CHECK_EQ_INT(c->err_number, 2627);
    CHECK_EQ_STR(scalar(s, c, "SELECT id FROM dbo.a WHERE w > 1.25"), "1");
    /* COMMIT keeps the DDL and drops the saved copies */
    run(s, c, "BEGIN TRAN; ALTER TABLE dbo.a ADD q int NULL; ALTER TABLE dbo.a DROP COLUMN w; COMMIT");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(undo_copies(s), 0);
    run(s, c, "SELECT * FROM dbo.a ORDER BY id");
    CHECK_EQ_STR(c->colnames, "id|v|q");
    /* a captured table: the ALTER's ddl_history row goes with the ROLLBACK */
    run(s, c, "EXEC sys.sp_cdc_enable_db; EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'a',"
              " @role_name = NULL, @capture_instance = N'dbo_a'");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "ALTER TABLE dbo.a ADD kept int NULL");
    run(s, c, "BEGIN TRAN; ALTER TABLE dbo.a ADD gone int NULL; INSERT INTO dbo.a (id) VALUES (7); ROLLBACK");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM cdc.ddl_history"), "1");
    run(s, c, "EXEC sim.run_capture; SELECT COUNT(*) FROM cdc.dbo_a_CT");
    CHECK_EQ_STR(c->rows[0], "0");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID('dbo.a')"), "4");
    /* CREATE USER and GRANT/REVOKE inside a transaction */
    run(s, c, "CREATE USER kept FOR LOGIN kept; GRANT SELECT ON dbo.a TO kept");
    run(s, c, "BEGIN TRAN; CREATE USER gone FOR LOGIN gone; GRANT SELECT ON dbo.a TO gone; REVOKE SELECT ON dbo.a FROM kept;"
              " ROLLBACK");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(catalog_count(s, "SELECT count(*) FROM __sim_users WHERE name IN ('kept', 'gone')"), 1);
    CHECK_EQ_INT(catalog_count(s, "SELECT count(*) FROM __sim_grants WHERE principal = 'kept'"), 1);
    CHECK_EQ_INT(catalog_count(s, "SELECT count(*) FROM __sim_grants WHERE principal = 'gone'"), 0);
    lab_close(srv, dir, &s, 1, &c, 1);
}

typedef struct bg_query {
    sim_session *s;
    coll *c;
    const char *sql;
    _Atomic int done;
    int polls_until_stop; /* > 0: the sink's poll stops the request after this many calls */
    int exec_rc;
} bg_query;

static int bg_poll(void *ctx) {
    (void)ctx;
    return 0;
}

static bg_query *g_bg_poll_q; /* the query whose poll counts down (one at a time) */
static int bg_poll_countdown(void *ctx) {
    (void)ctx;
    return g_bg_poll_q && --g_bg_poll_q->polls_until_stop <= 0;
}

static void *bg_run(void *arg) {
    bg_query *q = arg;
    memset(q->c, 0, sizeof *q->c);
    sim_sink k = {q->c, coll_columns, coll_row, coll_done, coll_msg, coll_db, coll_tran, coll_status, coll_retval,
                  q->polls_until_stop > 0 ? bg_poll_countdown : bg_poll, NULL};
    q->exec_rc = sim_exec_batch(q->s, q->sql, strlen(q->sql), &k);
    q->done = 1;
    return NULL;
}

static void bg_start(pthread_t *th, bg_query *q, sim_session *s, coll *c, const char *sql) {
    q->s = s;
    q->c = c;
    q->sql = sql;
    q->done = 0;
    pthread_create(th, NULL, bg_run, q);
}

/* a runs hold (opens a transaction); waiter runs on b in the background and
 * must still be waiting after ms; then a runs end and waiter finishes.
 * Returns whether it waited; b's results are in cb. */
static bool waits_for(sim_session *a, coll *c, const char *hold, sim_session *b, coll *cb, const char *waiter,
                      int ms, const char *end) {
    pthread_t th;
    bg_query q = {0};
    run(a, c, hold);
    bg_start(&th, &q, b, cb, waiter);
    mcdc_sleep_ms(ms);
    bool waited = !q.done;
    run(a, c, end);
    pthread_join(th, NULL);
    return waited;
}

TEST(sim_read_committed_between_sessions) {
    char dir[64];
    coll *c = calloc(1, sizeof *c), *cb = calloc(1, sizeof *cb);
    sim_session *a;
    sim_server *srv = fid_open(dir, sizeof dir, &a, c);
    sim_session *b = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    run(a, c, "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v int NULL); CREATE TABLE dbo.other (id int NULL);"
              " INSERT INTO dbo.t VALUES (1, 10)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(a, c, "BEGIN TRAN; INSERT INTO dbo.t VALUES (2, 20)");
    /* a reader of dbo.t waits for the open transaction... */
    pthread_t th;
    bg_query q = {0};
    bg_start(&th, &q, b, cb, "SELECT COUNT(*) FROM dbo.t");
    mcdc_sleep_ms(150);
    CHECK(!q.done);
    /* ...while other tables, NOLOCK, READ UNCOMMITTED and writers go on */
    coll *c2 = calloc(1, sizeof *c2);
    sim_session *r = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    CHECK_EQ_STR(scalar(r, c2, "SELECT COUNT(*) FROM dbo.other"), "0");
    CHECK_EQ_STR(scalar(r, c2, "SELECT COUNT(*) FROM dbo.t WITH (NOLOCK)"), "2");
    run(r, c2, "INSERT INTO dbo.t VALUES (3, 30)");
    CHECK_EQ_INT(c2->nerrors, 0);
    run(r, c2, "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED; SELECT COUNT(*) FROM dbo.t");
    CHECK_EQ_STR(c2->rows[0], "3");
    run(r, c2, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
    /* the session itself reads its own changes */
    CHECK_EQ_STR(scalar(a, c, "SELECT COUNT(*) FROM dbo.t"), "3");
    /* SET LOCK_TIMEOUT: error 1222, the batch goes on */
    int64_t t0 = mcdc_monotonic_us();
    run(r, c2, "SET LOCK_TIMEOUT 50; SELECT COUNT(*) FROM dbo.t; SELECT 7");
    int64_t waited_ms = (mcdc_monotonic_us() - t0) / 1000;
    CHECK_EQ_INT(c2->err_number, 1222);
    CHECK_EQ_STR(c2->err_text, "Lock request time out period exceeded.");
    CHECK_EQ_STR(c2->rows[0], "7");
    CHECK(waited_ms >= 50 && waited_ms < 1000);
    run(r, c2, "SET LOCK_TIMEOUT 0; DECLARE @n int; SET @n = (SELECT COUNT(*) FROM dbo.t)");
    CHECK_EQ_INT(c2->err_number, 1222);
    CHECK(!q.done);
    /* COMMIT releases the waiting reader, which sees the committed rows */
    run(a, c, "COMMIT");
    pthread_join(th, NULL);
    CHECK(q.done);
    CHECK_EQ_INT(cb->nerrors, 0);
    CHECK_EQ_STR(cb->rows[0], "3");
    /* ROLLBACK releases it too, without the rolled-back row */
    CHECK(waits_for(a, c, "BEGIN TRAN; DELETE FROM dbo.t WHERE id = 1", b, cb, "SELECT COUNT(*) FROM dbo.t WHERE id = 1",
                    50, "ROLLBACK"));
    CHECK_EQ_STR(cb->rows[0], "1");
    /* an ATTENTION (the sink's poll) ends a waiting request */
    run(a, c, "BEGIN TRAN; UPDATE dbo.t SET v = 0");
    q.polls_until_stop = 3;
    g_bg_poll_q = &q;
    bg_start(&th, &q, b, cb, "SELECT COUNT(*) FROM dbo.t");
    pthread_join(th, NULL);
    g_bg_poll_q = NULL;
    q.polls_until_stop = 0;
    CHECK_EQ_INT(q.exec_rc, SIM_EXEC_ABORTED);
    CHECK_EQ_INT(cb->nrows, 0);
    run(a, c, "COMMIT");
    /* a wait cycle: the second waiter is the deadlock victim (1205), its
     * transaction rolled back; the first then goes on */
    run(a, c, "BEGIN TRAN; UPDATE dbo.t SET v = 1 WHERE id = 1");
    run(b, cb, "BEGIN TRAN; INSERT INTO dbo.other VALUES (5)");
    bg_start(&th, &q, b, cb, "SELECT COUNT(*) FROM dbo.t");
    mcdc_sleep_ms(50);
    run(a, c, "IF 1 = 1 BEGIN SELECT COUNT(*) FROM dbo.other; SELECT 98 END; SELECT 99");
    CHECK_EQ_INT(c->err_number, 1205);
    CHECK_EQ_INT(c->nsets, 0); /* the batch ended */
    pthread_join(th, NULL);
    CHECK_EQ_INT(cb->nerrors, 0);
    CHECK_EQ_STR(cb->rows[0], "3");
    run(a, c, "SELECT @@TRANCOUNT, (SELECT v FROM dbo.t WHERE id = 1)");
    CHECK_EQ_STR(c->rows[0], "0|0");
    run(b, cb, "COMMIT");
    lab_close(srv, dir, (sim_session *[]){r, b, a}, 3, (coll *[]){c, c2, cb}, 3);
}

TEST(sim_writers_wait_for_the_same_rows) {
    char dir[64];
    coll *c = calloc(1, sizeof *c), *cb = calloc(1, sizeof *cb), *c2 = calloc(1, sizeof *c2);
    sim_session *a;
    sim_server *srv = fid_open(dir, sizeof dir, &a, c);
    sim_session *b = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    run(a, c, "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v int NULL); INSERT INTO dbo.t VALUES (1, 10), (2, 20)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(a, c, "BEGIN TRAN; UPDATE dbo.t SET v = 11 WHERE id = 1");
    /* another row: at once */
    run(b, cb, "UPDATE dbo.t SET v = 21 WHERE id = 2");
    CHECK_EQ_INT(cb->nerrors, 0);
    CHECK_EQ_INT((int)cb->last_count, 1);
    /* the same row: waits (LOCK_TIMEOUT -> 1222) */
    run(b, cb, "SET LOCK_TIMEOUT 30; UPDATE dbo.t SET v = 12 WHERE id = 1");
    CHECK_EQ_INT(cb->err_number, 1222);
    run(b, cb, "SET LOCK_TIMEOUT -1");
    CHECK(waits_for(a, c, "SELECT 1", b, cb, "UPDATE dbo.t SET v = v + 100 WHERE id = 1", 100, "COMMIT"));
    CHECK_EQ_INT(cb->nerrors, 0);
    sim_session *r = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    CHECK_EQ_STR(scalar(r, c2, "SELECT v FROM dbo.t WHERE id = 1"), "111"); /* on top of the committed 11 */
    /* INSERT ... SELECT reads as a SELECT does: it waits for the source */
    run(r, c2, "CREATE TABLE dbo.copy (id int NULL)");
    CHECK(waits_for(a, c, "BEGIN TRAN; UPDATE dbo.t SET v = 0 WHERE id = 2", b, cb,
                    "INSERT INTO dbo.copy SELECT id FROM dbo.t", 50, "ROLLBACK"));
    CHECK_EQ_INT(cb->nerrors, 0);
    CHECK_EQ_STR(scalar(r, c2, "SELECT COUNT(*) FROM dbo.copy"), "2");
    /* a key another open transaction inserted: waits; after its ROLLBACK the insert succeeds */
    CHECK(waits_for(a, c, "BEGIN TRAN; INSERT INTO dbo.t VALUES (3, 30)", b, cb, "INSERT INTO dbo.t VALUES (3, 33)", 100,
                    "ROLLBACK"));
    CHECK_EQ_INT(cb->nerrors, 0);
    CHECK_EQ_STR(scalar(r, c2, "SELECT v FROM dbo.t WHERE id = 3"), "33");
    /* ... and after a COMMIT it is a duplicate key */
    CHECK(waits_for(a, c, "BEGIN TRAN; INSERT INTO dbo.t VALUES (4, 40)", b, cb, "INSERT INTO dbo.t VALUES (4, 44)", 50,
                    "COMMIT"));
    CHECK_EQ_INT(cb->err_number, 2627);
    CHECK_EQ_STR(scalar(r, c2, "SELECT v FROM dbo.t WHERE id = 4"), "40");
    lab_close(srv, dir, (sim_session *[]){r, b, a}, 3, (coll *[]){c, c2, cb}, 3);
}

TEST(sim_string_compare_ci_and_padded) {
    CHECK(sim_string_cmp("ab", 2, "AB  ", 4) == 0);
    CHECK(sim_string_cmp("\xc3\x89mile", 6, "\xc3\xa9MILE", 6) == 0);         /* Émile = éMILE */
    CHECK(sim_string_cmp("\xc3\xa9", 2, "e", 1) != 0);                         /* accent-sensitive */
    CHECK(sim_string_cmp("\xd0\x96", 2, "\xd0\xb6", 2) == 0);                  /* Ж = ж */
    CHECK(sim_string_cmp("\xce\xa3", 2, "\xcf\x83", 2) == 0);                  /* Σ = σ */
    CHECK(sim_string_cmp("ab", 2, "ab!", 3) < 0);                              /* ' ' < '!' */
    CHECK(sim_string_cmp("ab\t", 3, "ab", 2) < 0);                             /* a tab is no space */
    CHECK(sim_string_cmp("a\xff", 2, "a\xfe", 2) > 0);                         /* bad UTF-8 by byte */
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.s (id int NOT NULL PRIMARY KEY, c char(4) NULL, v nvarchar(10) NULL);"
              " INSERT INTO dbo.s VALUES (1, 'ab', N'\xc3\x89mile'), (2, 'AB ', N'\xc3\xa9mile'), (3, 'x', N'b ')");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.s WHERE c = 'ab'"), "2"); /* char(4) is stored padded */
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.s WHERE v = N'\xc3\x89MILE'"), "2");
    CHECK_EQ_STR(scalar(s, c, "SELECT id FROM dbo.s WHERE v = N'b'"), "3");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(DISTINCT c) FROM dbo.s"), "2");
    run(s, c, "CREATE TABLE dbo.k (k varchar(10) NOT NULL PRIMARY KEY); INSERT INTO dbo.k VALUES ('a')");
    run(s, c, "INSERT INTO dbo.k VALUES ('A  ')");
    CHECK_EQ_INT(c->err_number, 2627);
    lab_close(srv, dir, &s, 1, &c, 1);
}

/* A data dir of a build before the collations: decimal columns without a
 * type, strings COLLATE NOCASE. Opening it rebuilds such tables. */
TEST(sim_old_data_dir_tables_get_the_collations) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.d (id int NOT NULL PRIMARY KEY, v decimal(10,2) NULL, s char(4) NULL UNIQUE)");
    CHECK_EQ_INT(c->nerrors, 0);
    sim_session_close(s);
    sim_server_close(srv);
    char path[128];
    snprintf(path, sizeof path, "%s/lab.db", dir);
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    const char *old = "DROP TABLE \"dbo.d\"; CREATE TABLE \"dbo.d\"(\"id\" INT NOT NULL, \"v\" , \"s\" TEXT COLLATE NOCASE,"
                      " PRIMARY KEY(\"id\"), UNIQUE(\"s\"));"
                      " INSERT INTO \"dbo.d\"(rowid, id, v, s) VALUES (7, 1, '10.50', 'ab  '), (8, 2, '9.25', 'x   ')";
    int rc = sqlite3_exec(db, old, NULL, NULL, NULL);
    CHECK_EQ_INT(rc, SQLITE_OK);
    sqlite3_close(db);
    srv = test_server(dir, 0);
    s = test_login(srv, "sa", "Sa_Passw0rd", "lab");
    run(s, c, "SELECT id FROM dbo.d ORDER BY v");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[0], "2");
    CHECK_EQ_STR(scalar(s, c, "SELECT id FROM dbo.d WHERE s = 'AB'"), "1");
    run(s, c, "INSERT INTO dbo.d VALUES (3, 1, 'X')"); /* the UNIQUE constraint came along */
    CHECK_EQ_INT(c->err_number, 2627);
    CHECK_EQ_STR(scalar(s, c, "SELECT MAX(v) FROM dbo.d"), "10.50");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID('dbo.d')"), "3");
    sqlite3_stmt *st;
    pthread_mutex_lock(&s->srv->mu);
    rc = sqlite3_prepare_v2(s->db->w, "SELECT sql, (SELECT max(rowid) FROM \"dbo.d\") FROM sqlite_schema WHERE name = 'dbo.d'",
                            -1, &st, NULL);
    CHECK_EQ_INT(rc, SQLITE_OK);
    CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
    CHECK(strstr((const char *)sqlite3_column_text(st, 0), "\"v\" TEXT COLLATE sim_decimal") != NULL);
    CHECK_EQ_INT(sqlite3_column_int(st, 1), 8); /* rowids kept */
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->srv->mu);
    lab_close(srv, dir, &s, 1, &c, 1);
}

TEST(sim_like_as_tsql) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.s (id int NOT NULL PRIMARY KEY, v nvarchar(20) NULL);"
              " INSERT INTO dbo.s VALUES (1, N'\xc3\x89mile'), (2, N'apple'), (3, N'Banana'), (4, N'50% off'), (5, N'a_b'),"
              " (6, N'[x]'), (7, NULL)");
    CHECK_EQ_INT(c->nerrors, 0);
    static const struct { const char *where, *ids; } W[] = {
        {"v LIKE N'\xc3\xa9%'", "1"},           /* case-insensitive past ASCII */
        {"v LIKE '[a-b]%'", "2,3,5"},            /* ranges */
        {"v LIKE '[^a-b]%'", "1,4,6"},           /* negated */
        {"v LIKE '[bx]anana'", "3"},             /* a set */
        {"v LIKE '%!%%' ESCAPE '!'", "4"},       /* ESCAPE */
        {"v LIKE '%[_]%'", "5"},                 /* [_] is a literal _ */
        {"v LIKE '[[]%'", "6"},
        {"v LIKE 'a__le'", "2"},
        {"v NOT LIKE '%a%'", "1,4,6"},           /* NULL is neither */
        {"v LIKE 'apple '", ""},                 /* trailing spaces of the pattern count */
    };
    for (size_t k = 0; k < sizeof W / sizeof W[0]; k++) {
        char q[256], got[64] = "";
        snprintf(q, sizeof q, "SELECT id FROM dbo.s WHERE %s ORDER BY id", W[k].where);
        run(s, c, q);
        CHECK_EQ_INT(c->nerrors, 0);
        for (int r = 0; r < c->nrows; r++) {
            size_t l = strlen(got);
            snprintf(got + l, sizeof got - l, "%s%s", r ? "," : "", c->rows[r]);
        }
        CHECK_EQ_STR(got, W[k].ids);
    }
    lab_close(srv, dir, &s, 1, &c, 1);
}

/* Random decimals: the collation agrees with integer arithmetic on the same
 * values scaled, and SUM of a column is the exact integer sum. */
TEST(sim_decimal_compare_and_sum_random) {
    uint64_t r = 0x9E3779B97F4A7C15ULL;
    char a[48], b[48];
    for (int k = 0; k < 2000; k++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        int64_t x = (int64_t)(r % 2000001) - 1000000; /* hundredths */
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        int64_t y = (int64_t)(r % 2000001) - 1000000;
        int sx = (int)(r >> 40) % 3, sy = (int)(r >> 50) % 3; /* written with 2, 3 or 4 decimals */
        snprintf(a, sizeof a, "%s%lld.%02lld%s", x < 0 ? "-" : "", (long long)(llabs(x) / 100), (long long)(llabs(x) % 100),
                 sx == 0 ? "" : sx == 1 ? "0" : "00");
        snprintf(b, sizeof b, "%s%lld.%02lld%s", y < 0 ? "-" : "", (long long)(llabs(y) / 100), (long long)(llabs(y) % 100),
                 sy == 0 ? "" : sy == 1 ? "0" : "00");
        int want = x < y ? -1 : x > y ? 1 : 0, got = sim_decimal_cmp(a, strlen(a), b, strlen(b));
        if ((got > 0) - (got < 0) != want) {
            CHECK_EQ_STR(a, b); /* shows the pair */
            break;
        }
    }
    CHECK(sim_decimal_cmp("-0.50", 5, "-0.5", 4) == 0);
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.r (id int NOT NULL PRIMARY KEY, v decimal(12,2) NULL)");
    mcdc_buf sql = {0};
    int64_t total = 0;
    for (int k = 0; k < 300; k++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        int64_t x = (int64_t)(r % 2000000001) - 1000000000;
        total += x;
        mcdc_buf_printf(&sql, NULL, "%s(%d, %s%lld.%02lld)", k ? ", " : "INSERT INTO dbo.r VALUES ", k, x < 0 ? "-" : "",
                        (long long)(llabs(x) / 100), (long long)(llabs(x) % 100));
    }
    mcdc_buf_cstr(&sql, NULL);
    run(s, c, (const char *)sql.data);
    CHECK_EQ_INT(c->nerrors, 0);
    char want[48];
    snprintf(want, sizeof want, "%s%lld.%02lld", total < 0 ? "-" : "", (long long)(llabs(total) / 100),
             (long long)(llabs(total) % 100));
    CHECK_EQ_STR(scalar(s, c, "SELECT SUM(v) FROM dbo.r"), want);
    /* ORDER BY agrees with the integer order */
    run(s, c, "SELECT COUNT(*) FROM (SELECT v, LAG(v) OVER (ORDER BY v) AS p FROM dbo.r) q WHERE CAST(v AS float) < CAST(p AS float)");
    CHECK_EQ_STR(c->rows[0], "0");
    mcdc_buf_free(&sql);
    lab_close(srv, dir, &s, 1, &c, 1);
}

TEST(sim_datetimeoffset_compares_instants) {
    CHECK(sim_dto_cmp("2024-01-01 10:00:00 +02:00", 26, "2024-01-01 08:00:00 +00:00", 26) == 0);
    CHECK(sim_dto_cmp("2024-01-01 10:00:00 +02:00", 26, "2024-01-01 09:00:00 +00:00", 26) < 0);
    CHECK(sim_dto_cmp("2024-01-01 00:30:00 -03:00", 26, "2024-01-01 03:00:00 +00:00", 26) > 0); /* 03:30 UTC */
    CHECK(sim_dto_cmp("2024-01-01 00:00:00.0000001 +00:00", 34, "2024-01-01 00:00:00 +00:00", 26) > 0);
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    run(s, c, "CREATE TABLE dbo.o (id int NOT NULL PRIMARY KEY, t datetimeoffset(0) NULL);"
              " INSERT INTO dbo.o VALUES (1, '2024-01-01 10:00:00 +02:00'), (2, '2024-01-01 09:00:00 +00:00'),"
              " (3, '2024-01-01 08:00:00 +00:00')");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "SELECT id FROM dbo.o ORDER BY t DESC, id");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "2");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(*) FROM dbo.o WHERE t = '2024-01-01 08:00:00 +00:00'"), "2");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT(DISTINCT t) FROM dbo.o"), "2");
    lab_close(srv, dir, &s, 1, &c, 1);
}

TEST(sim_uniqueidentifier_sorts_as_sql_server) {
    /* ascending, one byte set at a time: first group from its last byte
     * back... the last group most significant */
    static const char *const ASC[] = {
        "01000000-0000-0000-0000-000000000000", "10000000-0000-0000-0000-000000000000",
        "00010000-0000-0000-0000-000000000000", "00000001-0000-0000-0000-000000000000",
        "00000000-0100-0000-0000-000000000000", "00000000-0001-0000-0000-000000000000",
        "00000000-0000-0100-0000-000000000000", "00000000-0000-0001-0000-000000000000",
        "00000000-0000-0000-0001-000000000000", "00000000-0000-0000-0100-000000000000",
        "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-010000000000",
    };
    int n = (int)(sizeof ASC / sizeof ASC[0]);
    for (int k = 0; k + 1 < n; k++) CHECK(sim_guid_cmp(ASC[k], 36, ASC[k + 1], 36) < 0);
    CHECK(sim_guid_cmp("55666BEE-B3A0-4BF5-81A7-86FF976E763F", 36, "8DD5BCA5-6ABE-4F73-B4B7-393AE6BBB849", 36) > 0);
    CHECK(sim_guid_cmp("6f9619ff-8b86-d011-b42d-00c04fc964ff", 36, "6F9619FF-8B86-D011-B42D-00C04FC964FF", 36) == 0);
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    sim_session *s;
    sim_server *srv = fid_open(dir, sizeof dir, &s, c);
    mcdc_buf sql = {0};
    mcdc_buf_append_str(&sql, "CREATE TABLE dbo.g (g uniqueidentifier NOT NULL PRIMARY KEY); INSERT INTO dbo.g VALUES ", NULL);
    for (int k = n - 1; k >= 0; k--) mcdc_buf_printf(&sql, NULL, "%s('%s')", k < n - 1 ? ", " : "", ASC[k]);
    mcdc_buf_cstr(&sql, NULL);
    run(s, c, (const char *)sql.data);
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "SELECT g FROM dbo.g ORDER BY g");
    CHECK_EQ_INT(c->nrows, n);
    for (int k = 0; k < n && k < c->nrows; k++) CHECK_EQ_STR(c->rows[k], ASC[k]);
    mcdc_buf_free(&sql);
    lab_close(srv, dir, &s, 1, &c, 1);
}
