/* test_sim_cdc.c - CDC in the simulator: change tables, mapping, capture,
 * the reader's query shapes (reference §3.1) and lab checks t1-t4. */
#include "test_sim_helpers.h"

typedef struct fx {
    char dir[64];
    sim_server *srv;
    sim_session *s;
    coll *c;
} fx;

static void fx_open(fx *f, const char *zone) {
    test_tmpdir(f->dir, sizeof f->dir);
    sim_config cfg = {f->dir, "Sa_Passw0rd", zone, 16, 0, 0, 500};
    mcdc_error err = MCDC_ERROR_INIT;
    f->srv = NULL;
    if (sim_server_open(&f->srv, &cfg, &err) != MCDC_OK) fprintf(stderr, "open: %s\n", err.message);
    f->s = test_login(f->srv, "sa", "Sa_Passw0rd", NULL);
    f->c = calloc(1, sizeof *f->c);
    run(f->s, f->c, "CREATE DATABASE lab; USE lab;"
                    "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v nvarchar(50) NULL, amount decimal(18,4) NULL);"
                    "EXEC sys.sp_cdc_enable_db;"
                    "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL,"
                    " @supports_net_changes = 0;"
                    "EXEC sim.run_capture");
    if (f->c->nerrors) fprintf(stderr, "fixture: %d %s\n", f->c->err_number, f->c->err_text);
}

static void fx_close(fx *f) {
    sim_session_close(f->s);
    sim_server_close(f->srv);
    test_rmdir(f->dir);
    free(f->c);
}

/* Closes the server and opens it again on the same directory (its stored
 * state wins over the configuration's UTC zone). */
static void fx_restart(fx *f) {
    sim_session_close(f->s);
    sim_server_close(f->srv);
    sim_config cfg = {f->dir, "Sa_Passw0rd", "UTC", 16, 0, 0, 500};
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_server_open(&f->srv, &cfg, &err), MCDC_OK);
    f->s = test_login(f->srv, "sa", "Sa_Passw0rd", "lab");
}

static void copy_scalar(fx *f, const char *sql, char *out, size_t cap) {
    snprintf(out, cap, "%.63s", scalar(f->s, f->c, sql));
}

TEST(sim_cdc_enable_and_min_lsn) {
    fx f;
    fx_open(&f, "UTC");
    coll *c = f.c;
    CHECK_EQ_INT(c->nerrors, 0);
    char min[64], max[64];
    copy_scalar(&f, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_t'), 1)", min, sizeof min);
    CHECK_EQ_INT(strlen(min), 22);
    CHECK(strcmp(min, "0x00000000000000000000") != 0);
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_VARCHAR);
    CHECK_EQ_INT(c->cols[0].type.length, 22);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'nope'), 1)"), "0x00000000000000000000");
    /* no commit captured yet: max_lsn NULL */
    copy_scalar(&f, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)", max, sizeof max);
    CHECK_EQ_STR(max, "NULL");
    run(f.s, c, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL, @capture_instance = N'dbo_t'");
    CHECK_EQ_INT(c->err_number, 22926);
    run(f.s, c, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL, @capture_instance = N'v2', @captured_column_list = N'id, v'");
    CHECK_EQ_INT(c->nerrors, 0);
    run(f.s, c, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL, @capture_instance = N'v3'");
    CHECK_EQ_INT(c->err_number, 22962);
    CHECK(strstr(c->err_text, "Two capture instances already exist for source table 'dbo.t'") == c->err_text);
    run(f.s, c, "EXEC sys.sp_cdc_help_change_data_capture");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK(strstr(c->colnames, "source_schema|source_table|capture_instance|object_id|source_object_id|start_lsn") == c->colnames);
    CHECK(strstr(c->rows[0], "dbo|t|dbo_t|") == c->rows[0]);
    CHECK(strstr(c->rows[0], "|[id]|[id], [v], [amount]") != NULL);
    run(f.s, c, "EXEC sys.sp_cdc_get_captured_columns @capture_instance = N'v2'");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[1], "dbo|t|v2|v|2|2|nvarchar|50|NULL|NULL|NULL|NULL");
    run(f.s, c, "EXEC sys.sp_cdc_get_captured_columns @capture_instance = N'dbo_t'");
    CHECK_EQ_STR(c->rows[2], "dbo|t|dbo_t|amount|3|3|decimal|NULL|18|10|4|NULL");
    run(f.s, c, "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N't', @capture_instance = N'v2'");
    CHECK_EQ_INT(c->nerrors, 0);
    run(f.s, c, "EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N't'");
    CHECK_EQ_INT(c->nrows, 1);
    fx_close(&f);
}

/* Lab t3: operations of one transaction ordered 2,3,4,3,4,1; PK update as 1,2;
 * empty interval; cleanup. */
TEST(sim_cdc_t3_read_semantics) {
    fx f;
    fx_open(&f, "UTC");
    coll *c = f.c;
    run(f.s, c, "INSERT INTO dbo.t (id, v) VALUES (1, N'one')");
    run(f.s, c, "BEGIN TRAN; INSERT INTO dbo.t (id, v) VALUES (2, N'two'); UPDATE dbo.t SET v = N'2a' WHERE id = 2;"
                " UPDATE dbo.t SET v = N'2b' WHERE id = 2; DELETE FROM dbo.t WHERE id = 1; COMMIT");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->ntran, 2);
    run(f.s, c, "UPDATE dbo.t SET id = 3 WHERE id = 2");
    run(f.s, c, "EXEC sim.run_capture");
    run(f.s, c, "SELECT c.[__$operation], c.[__$command_id], c.[id], c.[v] FROM cdc.[dbo_t_CT] AS c"
                " ORDER BY c.[__$start_lsn], c.[__$command_id], c.[__$seqval], c.[__$operation]");
    CHECK_EQ_INT(c->nrows, 9);
    CHECK_EQ_STR(c->rows[0], "2|1|1|one");
    CHECK_EQ_STR(c->rows[1], "2|1|2|two");
    CHECK_EQ_STR(c->rows[2], "3|2|2|two");
    CHECK_EQ_STR(c->rows[3], "4|2|2|2a");
    CHECK_EQ_STR(c->rows[4], "3|3|2|2a");
    CHECK_EQ_STR(c->rows[5], "4|3|2|2b");
    CHECK_EQ_STR(c->rows[6], "1|4|1|one");
    CHECK_EQ_STR(c->rows[7], "1|1|2|2b");
    CHECK_EQ_STR(c->rows[8], "2|2|3|2b");
    /* update mask: v is captured column 2 of 3 -> 0x02; inserts all ones 0x07 */
    run(f.s, c, "SELECT CONVERT(varchar(10), [__$update_mask], 1) FROM cdc.dbo_t_CT WHERE [__$operation] IN (3, 4) ORDER BY [__$seqval]");
    CHECK_EQ_STR(c->rows[0], "0x02");
    run(f.s, c, "SELECT CONVERT(varchar(10), [__$update_mask], 1) FROM cdc.dbo_t_CT WHERE [__$operation] = 2 ORDER BY [__$seqval]");
    CHECK_EQ_STR(c->rows[0], "0x07");
    /* iter_changes joined to the mapping, ordered, range bound as hex */
    char lo[64], hi[64];
    copy_scalar(&f, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_t'), 1)", lo, sizeof lo);
    copy_scalar(&f, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)", hi, sizeof hi);
    char q[2048];
    snprintf(q, sizeof q,
             "SELECT CONVERT(varchar(22), c.[__$start_lsn], 1) AS [_start_lsn], CONVERT(varchar(22), c.[__$seqval], 1) AS [_seqval],"
             " c.[__$operation], c.[__$command_id], CAST(m.tran_end_time AS datetime2(3)) AS [_commit_ts], c.[id], c.[v]"
             " FROM cdc.[dbo_t_CT] AS c INNER JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.[__$start_lsn]"
             " WHERE c.[__$start_lsn] BETWEEN CONVERT(binary(10), '%s', 1) AND CONVERT(binary(10), '%s', 1)"
             " ORDER BY c.[__$start_lsn], c.[__$command_id], c.[__$seqval], c.[__$operation]",
             lo, hi);
    run(f.s, c, q);
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 9);
    CHECK_EQ_STR(c->colnames, "_start_lsn|_seqval|__$operation|__$command_id|_commit_ts|id|v");
    CHECK_EQ_INT(c->cols[2].type.id, SIM_T_INT);
    CHECK_EQ_INT(c->cols[4].type.id, SIM_T_DATETIME2);
    CHECK_EQ_INT(c->cols[6].type.id, SIM_T_NVARCHAR);
    CHECK_EQ_INT(c->cols[6].type.length, 50);
    /* empty interval: from > to */
    snprintf(q, sizeof q, "SELECT * FROM cdc.[dbo_t_CT] WHERE [__$start_lsn] BETWEEN CONVERT(binary(10), '%s', 1) AND CONVERT(binary(10), '%s', 1)", hi, lo);
    run(f.s, c, q);
    CHECK_EQ_INT(c->nrows, 0);
    CHECK_EQ_INT(c->nerrors, 0);
    /* cleanup to max_lsn: purged range reads empty, min_lsn moves */
    snprintf(q, sizeof q, "DECLARE @lw binary(10) = CONVERT(binary(10), '%s', 1);"
                          " EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_t', @low_water_mark = @lw, @threshold = 5000", hi);
    run(f.s, c, q);
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_t'), 1)"), hi);
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM cdc.[dbo_t_CT] WHERE [__$start_lsn] < CONVERT(binary(10), '%s', 1)", hi);
    CHECK_EQ_STR(scalar(f.s, c, q), "0");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.[dbo_t_CT]"), "2");
    fx_close(&f);
}

/* Lab t4: a long transaction begun first and committed last gets the higher LSN. */
TEST(sim_cdc_t4_commit_order) {
    fx f;
    fx_open(&f, "UTC");
    coll *c = f.c;
    sim_session *b = test_login(f.srv, "sa", "Sa_Passw0rd", "lab");
    coll *cb = calloc(1, sizeof *cb);
    run(f.s, c, "BEGIN TRAN; INSERT INTO dbo.t (id, v) VALUES (100, N'long')");
    run(b, cb, "INSERT INTO dbo.t (id, v) VALUES (1, N'short1')");
    run(b, cb, "INSERT INTO dbo.t (id, v) VALUES (2, N'short2')");
    run(b, cb, "EXEC sim.run_capture");
    char m1[64], q[512];
    snprintf(m1, sizeof m1, "%.63s", scalar(b, cb, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)"));
    snprintf(q, sizeof q, "SELECT COUNT(*) FROM cdc.dbo_t_CT WHERE [__$start_lsn] <= CONVERT(binary(10), '%s', 1)", m1);
    CHECK_EQ_STR(scalar(b, cb, q), "2");
    run(f.s, c, "COMMIT");
    run(b, cb, "EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(b, cb, q), "2"); /* nothing appeared below an observed max_lsn */
    run(b, cb, "SELECT id, CONVERT(varchar(22), [__$start_lsn], 1), CONVERT(varchar(22), [__$seqval], 1) FROM cdc.dbo_t_CT ORDER BY [__$start_lsn]");
    CHECK_EQ_INT(cb->nrows, 3);
    CHECK(strncmp(cb->rows[2], "100|", 4) == 0); /* long tx last by LSN */
    /* its seqval is lower than the short transactions' commit LSNs */
    CHECK(strcmp(cb->rows[2] + 4 + 23, cb->rows[0] + 2) < 0);
    /* 0 commits with higher LSN but earlier time */
    CHECK_EQ_STR(scalar(b, cb, "SELECT COUNT(*) FROM (SELECT tran_end_time, LAG(tran_end_time) OVER (ORDER BY start_lsn) AS prev"
                               " FROM cdc.lsn_time_mapping) AS x WHERE tran_end_time < prev"), "0");
    sim_session_close(b);
    free(cb);
    fx_close(&f);
}

/* Lab t1: idle mapping entries about every 305 s while the database is quiet. */
TEST(sim_cdc_t1_idle_entries) {
    fx f;
    fx_open(&f, "UTC");
    coll *c = f.c;
    run(f.s, c, "INSERT INTO dbo.t (id, v) VALUES (1, N'x'); EXEC sim.run_capture");
    char m1[64];
    snprintf(m1, sizeof m1, "%.63s", scalar(f.s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)"));
    run(f.s, c, "EXEC sim.advance_clock @seconds = 660; EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    run(f.s, c, "SELECT DATEDIFF(second, LAG(tran_end_time) OVER (ORDER BY start_lsn), tran_end_time) FROM cdc.lsn_time_mapping m"
                " WHERE NOT EXISTS (SELECT 1 FROM cdc.dbo_t_CT c WHERE c.[__$start_lsn] = m.start_lsn) ORDER BY start_lsn");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[1], "305");
    char m2[64];
    snprintf(m2, sizeof m2, "%.63s", scalar(f.s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)"));
    CHECK(strcmp(m2, m1) > 0);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.lsn_time_mapping WHERE tran_id = 0x00000000000000000000"), "2");
    fx_close(&f);
}

/* Lab t2: tran_end_time is on the server's local clock. */
TEST(sim_cdc_t2_local_clock) {
    fx f;
    fx_open(&f, "E. South America Standard Time");
    coll *c = f.c;
    run(f.s, c, "EXEC sim.set_clock @utc = '2024-06-01 12:00:00'; INSERT INTO dbo.t (id) VALUES (1); EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT DATEDIFF(minute, MAX(tran_end_time), SYSDATETIME()) FROM cdc.lsn_time_mapping"), "0");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT DATEDIFF(minute, MAX(tran_end_time), SYSUTCDATETIME()) FROM cdc.lsn_time_mapping"), "180");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CURRENT_TIMEZONE_ID()"), "E. South America Standard Time");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET())"), "-180");
    /* the clock runs on from the set time: compare to the minute */
    CHECK_EQ_STR(scalar(f.s, c, "SELECT TOP (1) CONVERT(varchar(16), CAST((tran_end_time AT TIME ZONE N'E. South America Standard Time')"
                                " AT TIME ZONE 'UTC' AS datetime2(3)), 126) FROM cdc.lsn_time_mapping ORDER BY start_lsn DESC"),
                 "2024-06-01T12:00");
    fx_close(&f);
}

/* A frozen clock: commits land at the instants a test chooses, to the
 * millisecond, and a restart keeps it frozen. */
TEST(sim_cdc_frozen_clock) {
    fx f;
    fx_open(&f, "AUS Eastern Standard Time");
    coll *c = f.c;
    run(f.s, c, "EXEC sim.set_clock @utc = '2027-04-03 15:50:30.250', @frozen = 1; "
                "INSERT INTO dbo.t (id) VALUES (1); EXEC sim.run_capture @ignore_latency = 1");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(varchar(23), SYSUTCDATETIME(), 126)"), "2027-04-03T15:50:30.250");
    /* 02:50:30 AEDT; then the clock falls back: 16:20:17 UTC reads 02:20:17 AEST */
    run(f.s, c, "EXEC sim.set_clock '2027-04-03 16:20:17', 1; INSERT INTO dbo.t (id) VALUES (2); "
                "EXEC sim.run_capture @ignore_latency = 1");
    run(f.s, c, "SELECT CONVERT(varchar(23), tran_end_time, 126) FROM cdc.lsn_time_mapping ORDER BY start_lsn");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[0], "2027-04-04T02:50:30.250");
    CHECK_EQ_STR(c->rows[1], "2027-04-04T02:20:17");
    run(f.s, c, "EXEC sim.advance_clock @seconds = 90");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(varchar(23), SYSUTCDATETIME(), 126)"), "2027-04-03T16:21:47");
    fx_restart(&f);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(varchar(23), SYSUTCDATETIME(), 126)"), "2027-04-03T16:21:47");
    /* set without @frozen: it runs again from there */
    run(f.s, c, "EXEC sim.set_clock @utc = '2030-01-01 00:00:00'");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(varchar(10), SYSUTCDATETIME(), 126)"), "2030-01-01");
    fx_close(&f);
}

TEST(sim_cdc_reader_queries) {
    fx f;
    fx_open(&f, "UTC");
    coll *c = f.c;
    for (int k = 1; k <= 6; k++) {
        char q[128];
        snprintf(q, sizeof q, "INSERT INTO dbo.t (id, v) VALUES (%d, N'r%d'), (%d, N's%d')", k, k, k + 100, k);
        run(f.s, c, q);
    }
    run(f.s, c, "EXEC sim.run_capture");
    char lo[64], hi[64], q[2048];
    copy_scalar(&f, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_t'), 1)", lo, sizeof lo);
    copy_scalar(&f, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)", hi, sizeof hi);
    /* increment / decrement */
    snprintf(q, sizeof q, "SELECT CONVERT(varchar(22), sys.fn_cdc_increment_lsn(CONVERT(binary(10), '%s', 1)), 1),"
                          " CONVERT(varchar(22), sys.fn_cdc_decrement_lsn(CONVERT(binary(10), '0x00000000000000000100', 1)), 1)", hi);
    run(f.s, c, q);
    CHECK(strcmp(c->rows[0], hi) > 0);
    CHECK(strstr(c->rows[0], "|0x000000000000000000FF") != NULL);
    /* lsn_to_time exact and <= */
    snprintf(q, sizeof q, "SELECT TOP (1) CONVERT(varchar(23), CAST(tran_end_time AS datetime2(3)), 126) FROM cdc.lsn_time_mapping"
                          " WHERE start_lsn = CONVERT(binary(10), '%s', 1)", hi);
    run(f.s, c, q);
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_VARCHAR);
    snprintf(q, sizeof q, "SELECT TOP (1) CONVERT(varchar(22), start_lsn, 1) FROM cdc.lsn_time_mapping"
                          " WHERE start_lsn <= sys.fn_cdc_increment_lsn(CONVERT(binary(10), '%s', 1)) ORDER BY start_lsn DESC", hi);
    CHECK_EQ_STR(scalar(f.s, c, q), hi);
    snprintf(q, sizeof q, "SELECT sys.fn_cdc_map_lsn_to_time(sys.fn_cdc_increment_lsn(CONVERT(binary(10), '%s', 1)))", hi);
    CHECK_EQ_STR(scalar(f.s, c, q), "NULL");
    /* map_time_to_lsn */
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_map_time_to_lsn(N'largest less than or equal', SYSDATETIME()), 1)"), hi);
    /* nth_commit_after */
    snprintf(q, sizeof q, "SELECT CONVERT(varchar(22), MAX(start_lsn), 1) FROM (SELECT TOP (3) start_lsn FROM cdc.lsn_time_mapping"
                          " WHERE start_lsn > CONVERT(binary(10), '%s', 1) ORDER BY start_lsn) AS t", lo);
    char third[64];
    copy_scalar(&f, q, third, sizeof third);
    run(f.s, c, "SELECT CONVERT(varchar(22), start_lsn, 1) FROM cdc.lsn_time_mapping ORDER BY start_lsn");
    CHECK_EQ_INT(c->nrows, 6);
    CHECK_EQ_STR(c->rows[2], third);
    /* split_points */
    snprintf(q, sizeof q,
             "SELECT CONVERT(varchar(22), MAX(x.lsn), 1), CONVERT(varchar(22), sys.fn_cdc_increment_lsn(MAX(x.lsn)), 1), COUNT_BIG(*)"
             " FROM (SELECT [__$start_lsn] AS lsn, NTILE(3) OVER (ORDER BY [__$start_lsn]) AS tile FROM cdc.[dbo_t_CT]"
             " WHERE [__$start_lsn] BETWEEN CONVERT(binary(10), '%s', 1) AND CONVERT(binary(10), '%s', 1)) AS x"
             " GROUP BY x.tile ORDER BY x.tile", lo, hi);
    run(f.s, c, q);
    CHECK_EQ_INT(c->nrows, 3);
    CHECK(strstr(c->rows[0], "|4") != NULL);
    CHECK_EQ_INT(c->cols[2].type.id, SIM_T_BIGINT);
    /* version probe, zone */
    run(f.s, c, "SELECT SERVERPROPERTY('ProductMajorVersion'), SERVERPROPERTY('EngineEdition')");
    CHECK_EQ_STR(c->rows[0], "16|3");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CURRENT_TIMEZONE_ID()"), "UTC");
    /* range offset */
    snprintf(q, sizeof q,
             "SELECT CASE WHEN DATEDIFF(day, MIN(tran_end_time), MAX(tran_end_time)) < 7 AND"
             " DATEPART(TZOFFSET, DATEADD(hour, -3, MIN(tran_end_time)) AT TIME ZONE N'Eastern Standard Time') ="
             " DATEPART(TZOFFSET, DATEADD(hour, 3, MAX(tran_end_time)) AT TIME ZONE N'Eastern Standard Time')"
             " THEN DATEPART(TZOFFSET, MIN(tran_end_time) AT TIME ZONE N'Eastern Standard Time') END"
             " FROM cdc.lsn_time_mapping WHERE start_lsn BETWEEN CONVERT(binary(10), '%s', 1) AND CONVERT(binary(10), '%s', 1)", lo, hi);
    const char *off = scalar(f.s, c, q);
    CHECK(strcmp(off, "-240") == 0 || strcmp(off, "-300") == 0 || strcmp(off, "NULL") == 0);
    /* LAG drops */
    run(f.s, c, "SELECT CONVERT(varchar(22), start_lsn, 1) FROM (SELECT start_lsn, tran_end_time, LAG(tran_end_time) OVER (ORDER BY start_lsn) AS prev"
                " FROM cdc.lsn_time_mapping) AS d WHERE prev IS NOT NULL AND tran_end_time < DATEADD(minute, -1, prev)");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 0);
    /* wait stats */
    run(f.s, c, "SELECT wait_time_ms FROM sys.dm_exec_session_wait_stats WHERE session_id = @@SPID AND wait_type = N'ASYNC_NETWORK_IO'");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_INT(c->nerrors, 0);
    /* sys.columns by OBJECT_ID(QUOTENAME + QUOTENAME) */
    run(f.s, c, "SELECT name, column_id, is_computed, collation_name FROM sys.columns"
                " WHERE object_id = OBJECT_ID(QUOTENAME(N'dbo') + N'.' + QUOTENAME(N't')) ORDER BY column_id");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[1], "v|2|0|SQL_Latin1_General_CP1_CI_AS");
    /* ddl history */
    run(f.s, c, "ALTER TABLE dbo.t ADD note varchar(200) NULL");
    CHECK_EQ_INT(c->nerrors, 0);
    /* the capture process posts it */
    run(f.s, c, "EXEC sys.sp_cdc_get_ddl_history @capture_instance = N'dbo_t'");
    CHECK_EQ_INT(c->nrows, 0);
    run(f.s, c, "EXEC sim.run_capture; EXEC sys.sp_cdc_get_ddl_history @capture_instance = N'dbo_t'");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK(strstr(c->rows[0], "ALTER TABLE dbo.t ADD note varchar(200) NULL") != NULL);
    /* sp_spaceused */
    run(f.s, c, "EXEC sys.sp_spaceused @objname = N'[dbo].[t]'");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK(strncmp(c->rows[0], "t|12 ", 5) == 0);
    /* permission probe */
    run(f.s, c, "SELECT CASE WHEN sys.fn_cdc_get_min_lsn(N'dbo_t') > 0x00000000000000000000"
                " THEN HAS_PERMS_BY_NAME(N'cdc.[dbo_t_CT]', 'OBJECT', 'SELECT') END");
    CHECK_EQ_STR(c->rows[0], "1");
    /* session settings */
    run(f.s, c, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT; SET LOCK_TIMEOUT 5000; SET NOCOUNT ON; SET TEXTSIZE 2147483647; SELECT 1");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(c->rows[0], "1");
    fx_close(&f);
}

TEST(sim_cdc_grants_least_privilege) {
    fx f;
    fx_open(&f, "UTC");
    coll *c = f.c;
    run(f.s, c, "CREATE LOGIN reader WITH PASSWORD = 'R3ader!pw'; CREATE USER reader FOR LOGIN reader;"
                " GRANT SELECT ON dbo.t TO reader; INSERT INTO dbo.t (id) VALUES (1); EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    sim_session *r = test_login(f.srv, "reader", "R3ader!pw", "lab");
    CHECK(r != NULL);
    coll *cr = calloc(1, sizeof *cr);
    run(r, cr, "SELECT COUNT(*) FROM cdc.[dbo_t_CT]");
    CHECK_EQ_INT(cr->err_number, 229);
    CHECK_EQ_STR(cr->err_text, "The SELECT permission was denied on the object 'dbo_t_CT', database 'lab', schema 'cdc'.");
    CHECK_EQ_STR(scalar(r, cr, "SELECT HAS_PERMS_BY_NAME(N'cdc.[dbo_t_CT]', 'OBJECT', 'SELECT')"), "0");
    CHECK_EQ_STR(scalar(r, cr, "SELECT COUNT(*) FROM cdc.lsn_time_mapping"), "1");
    run(r, cr, "INSERT INTO dbo.t (id) VALUES (5)");
    CHECK_EQ_INT(cr->err_number, 229);
    run(r, cr, "EXEC sim.run_capture");
    CHECK_EQ_INT(cr->err_number, 229);
    run(f.s, c, "GRANT SELECT ON cdc.[dbo_t_CT] TO reader");
    CHECK_EQ_STR(scalar(r, cr, "SELECT COUNT(*) FROM cdc.[dbo_t_CT]"), "1");
    CHECK_EQ_STR(scalar(r, cr, "SELECT HAS_PERMS_BY_NAME(N'cdc.[dbo_t_CT]', 'OBJECT', 'SELECT')"), "1");
    run(r, cr, "EXEC sys.sp_cdc_help_change_data_capture");
    CHECK_EQ_INT(cr->nrows, 1);
    sim_session *bad = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_login(f.srv, &bad, "reader", "nope", "lab", "t", &err), MCDC_E_PERMISSION);
    CHECK_EQ_INT(err.server_number, 18456);
    sim_session_close(r);
    free(cr);
    fx_close(&f);
}

TEST(sim_rollback_and_restart) {
    fx f;
    fx_open(&f, "UTC");
    coll *c = f.c;
    run(f.s, c, "INSERT INTO dbo.t (id, v) VALUES (1, N'keep')");
    run(f.s, c, "BEGIN TRAN; INSERT INTO dbo.t (id, v) VALUES (2, N'gone'); UPDATE dbo.t SET v = N'changed' WHERE id = 1;"
                " DELETE FROM dbo.t WHERE id = 1; ROLLBACK");
    CHECK_EQ_INT(c->nerrors, 0);
    run(f.s, c, "SELECT id, v FROM dbo.t ORDER BY id");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_STR(c->rows[0], "1|keep");
    run(f.s, c, "EXEC sim.run_capture; SELECT COUNT(*) FROM cdc.dbo_t_CT");
    CHECK_EQ_STR(c->rows[0], "1");
    char max1[64];
    snprintf(max1, sizeof max1, "%.63s", scalar(f.s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)"));
    run(f.s, c, "EXEC sim.advance_clock @seconds = 3600; EXEC sim.set_time_zone @zone = N'Central European Standard Time'");
    fx_restart(&f);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)"), max1);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CURRENT_TIMEZONE_ID()"), "Central European Standard Time");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CASE WHEN DATEDIFF(minute, SYSUTCDATETIME(), GETUTCDATE()) BETWEEN -1 AND 1 THEN 1 ELSE 0 END"), "1");
    run(f.s, c, "INSERT INTO dbo.t (id, v) VALUES (7, N'after'); EXEC sim.run_capture");
    run(f.s, c, "SELECT CONVERT(varchar(22), [__$start_lsn], 1) FROM cdc.dbo_t_CT WHERE id = 7");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK(strcmp(c->rows[0], max1) > 0);
    fx_close(&f);
}

/* sys.dm_cdc_log_scan_sessions and sys.dm_cdc_errors: a login without VIEW
 * DATABASE STATE gets 262 then 297, as SQL Server; the grant lets it read
 * (HAS_PERMS_BY_NAME tells); both views start empty when the server starts,
 * and a stopped capture job runs again. */
TEST(sim_cdc_capture_health_views) {
    fx f;
    fx_open(&f, "UTC");
    coll *c = f.c;
    run(f.s, c, "CREATE LOGIN mon WITH PASSWORD = 'M0n!pw'; CREATE USER mon FOR LOGIN mon;"
                " INSERT INTO dbo.t (id) VALUES (1); EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM sys.dm_cdc_log_scan_sessions WHERE session_id > 0"), "2");
    sim_session *m = test_login(f.srv, "mon", "M0n!pw", "lab");
    CHECK(m != NULL);
    coll *cm = calloc(1, sizeof *cm);
    run(m, cm, "SELECT * FROM sys.dm_cdc_log_scan_sessions");
    CHECK_EQ_INT(cm->err_number, 262);
    CHECK_EQ_INT(cm->nerrors, 2);
    CHECK_EQ_STR(cm->err_text, "VIEW DATABASE STATE permission denied in database 'lab'.");
    CHECK_EQ_STR(scalar(m, cm, "SELECT HAS_PERMS_BY_NAME(DB_NAME(), 'DATABASE', 'VIEW DATABASE STATE')"), "0");
    /* VIEW SERVER STATE: granted in master only, and it covers every database */
    run(f.s, c, "GRANT VIEW SERVER STATE TO mon");
    CHECK_EQ_INT(c->err_number, 4621);
    run(f.s, c, "USE master; GRANT VIEW SERVER STATE TO mon; USE lab");
    CHECK_EQ_INT(c->nerrors, 0);
    run(m, cm, "SELECT COUNT(*) FROM sys.dm_cdc_errors");
    CHECK_EQ_INT(cm->nerrors, 0);
    run(f.s, c, "USE master; REVOKE VIEW SERVER STATE FROM mon; USE lab");
    run(m, cm, "SELECT COUNT(*) FROM sys.dm_cdc_errors");
    CHECK_EQ_INT(cm->err_number, 262);
    run(f.s, c, "GRANT VIEW DATABASE STATE TO mon");
    CHECK_EQ_STR(scalar(m, cm, "SELECT HAS_PERMS_BY_NAME(DB_NAME(), 'DATABASE', 'VIEW DATABASE STATE')"), "1");
    CHECK_EQ_STR(scalar(m, cm, "SELECT tran_count FROM sys.dm_cdc_log_scan_sessions WHERE session_id = 0"), "1");
    run(m, cm, "SELECT * FROM sys.dm_cdc_errors");
    CHECK_EQ_INT(cm->nerrors, 0);
    CHECK_EQ_INT(cm->nrows, 0);
    sim_session_close(m);
    free(cm);
    run(f.s, c, "EXEC sys.sp_cdc_stop_job");
    CHECK_EQ_INT(c->nerrors, 0);
    fx_restart(&f);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM sys.dm_cdc_log_scan_sessions"), "0");
    run(f.s, c, "INSERT INTO dbo.t (id) VALUES (2); EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "2");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT session_id, tran_count FROM sys.dm_cdc_log_scan_sessions WHERE session_id > 0"), "1|1");
    fx_close(&f);
}
