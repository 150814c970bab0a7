/* test_sim_schema.c - schema changes on captured tables as SQL Server
 * records them: cdc.ddl_history / sp_cdc_get_ddl_history, captured column
 * lists frozen at enable, two capture instances and the switch between
 * them, computed columns. */
#include "test_sim_helpers.h"

typedef struct sfx {
    char dir[64];
    sim_server *srv;
    sim_session *s;
    coll *c;
} sfx;

static void sfx_open(sfx *f, const char *create) {
    test_tmpdir(f->dir, sizeof f->dir);
    f->srv = test_server(f->dir, 0);
    f->s = test_login(f->srv, "sa", "Sa_Passw0rd", NULL);
    f->c = calloc(1, sizeof *f->c);
    run(f->s, f->c, "CREATE DATABASE sc; USE sc; EXEC sys.sp_cdc_enable_db");
    run(f->s, f->c, create);
    if (f->c->nerrors) fprintf(stderr, "fixture: %d %s\n", f->c->err_number, f->c->err_text);
    run(f->s, f->c, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL;"
                    " EXEC sim.run_capture");
    if (f->c->nerrors) fprintf(stderr, "fixture: %d %s\n", f->c->err_number, f->c->err_text);
}

static void sfx_close(sfx *f) {
    sim_session_close(f->s);
    sim_server_close(f->srv);
    test_rmdir(f->dir);
    free(f->c);
}

/* ADD, ALTER and DROP COLUMN: one ddl_history row per DDL when capture reads
 * its commit, ddl_lsn inside the DDL's transaction (after the DML before
 * it, before the DML after it), no lsn_time_mapping row for a DDL alone,
 * required_column_update for the ALTER; ROLLBACK leaves no row. */
TEST(sim_schema_ddl_history) {
    sfx f;
    sfx_open(&f, "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, a int NULL, b varchar(10) NULL)");
    coll *c = f.c;
    run(f.s, c, "INSERT INTO dbo.t (id, a, b) VALUES (1, 10, 'x');"
                "ALTER TABLE dbo.t ADD c int NULL;"
                "INSERT INTO dbo.t (id, a, b, c) VALUES (2, 20, 'y', 200);"
                "ALTER TABLE dbo.t ALTER COLUMN b varchar(50) NULL;"
                "UPDATE dbo.t SET b = 'a value longer than ten' WHERE id = 2;"
                "ALTER TABLE dbo.t DROP COLUMN a;"
                "INSERT INTO dbo.t (id, b) VALUES (3, 'z')");
    CHECK_EQ_INT(c->nerrors, 0);
    /* nothing until capture reads the log */
    run(f.s, c, "EXEC sys.sp_cdc_get_ddl_history @capture_instance = N'dbo_t'");
    CHECK_EQ_INT(c->nrows, 0);
    CHECK_EQ_STR(c->colnames, "source_schema|source_table|capture_instance|required_column_update|ddl_command|ddl_lsn|ddl_time");
    run(f.s, c, "EXEC sim.run_capture; EXEC sys.sp_cdc_get_ddl_history @capture_instance = N'dbo_t'");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK(strstr(c->rows[0], "dbo|t|dbo_t|0|ALTER TABLE dbo.t ADD c int NULL|0x") == c->rows[0]);
    CHECK(strstr(c->rows[1], "dbo|t|dbo_t|1|ALTER TABLE dbo.t ALTER COLUMN b varchar(50) NULL|0x") == c->rows[1]);
    CHECK(strstr(c->rows[2], "dbo|t|dbo_t|0|ALTER TABLE dbo.t DROP COLUMN a|0x") == c->rows[2]);
    CHECK_EQ_INT(c->cols[3].type.id, SIM_T_BIT);
    CHECK_EQ_INT(c->cols[5].type.id, SIM_T_BINARY);
    CHECK_EQ_INT(c->cols[6].type.id, SIM_T_DATETIME);
    /* in commit order with the DML: change rows before each DDL */
    run(f.s, c, "SELECT (SELECT COUNT(*) FROM cdc.dbo_t_CT ct WHERE ct.__$start_lsn < h.ddl_lsn) FROM cdc.ddl_history h ORDER BY h.ddl_lsn");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "1");
    CHECK_EQ_STR(c->rows[1], "2");
    CHECK_EQ_STR(c->rows[2], "4");
    /* a DDL's LSN is no commit's (sys.fn_cdc_map_lsn_to_time gives NULL, as
     * the reference measured on SQL Server 2022); the mapping holds the four
     * DML transactions, none of the three DDL-only ones */
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.ddl_history h WHERE sys.fn_cdc_map_lsn_to_time(h.ddl_lsn) IS NULL"), "3");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00000000000000000000"), "4");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.ddl_history h WHERE h.ddl_lsn <= sys.fn_cdc_get_max_lsn()"), "3");
    /* the instance keeps its columns: no c; a dropped column stays and reads
     * NULL after the drop; b follows the ALTER (its type, not its place) */
    run(f.s, c, "EXEC sys.sp_cdc_get_captured_columns @capture_instance = N'dbo_t'");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "dbo|t|dbo_t|id|1|1|int|NULL|10|10|0|NULL");
    CHECK_EQ_STR(c->rows[1], "dbo|t|dbo_t|a|2|2|int|NULL|10|10|0|NULL");
    CHECK_EQ_STR(c->rows[2], "dbo|t|dbo_t|b|3|3|varchar|50|NULL|NULL|NULL|NULL");
    run(f.s, c, "SELECT * FROM cdc.dbo_t_CT WHERE 1 = 0");
    CHECK(strstr(c->colnames, "|id|a|b|") != NULL && strstr(c->colnames, "|c|") == NULL);
    run(f.s, c, "SELECT __$operation, id, a, b FROM cdc.dbo_t_CT ORDER BY __$start_lsn, __$seqval, __$operation");
    CHECK_EQ_INT(c->nrows, 5);
    CHECK_EQ_STR(c->rows[0], "2|1|10|x");
    CHECK_EQ_STR(c->rows[1], "2|2|20|y");
    CHECK_EQ_STR(c->rows[2], "3|2|20|y");
    CHECK_EQ_STR(c->rows[3], "4|2|20|a value longer than ten");
    CHECK_EQ_STR(c->rows[4], "2|3|NULL|z");
    run(f.s, c, "SELECT b FROM cdc.dbo_t_CT WHERE 1 = 0");
    CHECK_EQ_INT(c->cols[0].type.length, 50);
    /* a rolled-back DDL leaves no row and no column */
    run(f.s, c, "BEGIN TRAN; ALTER TABLE dbo.t ADD d int NULL; ROLLBACK; EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.ddl_history"), "3");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID('dbo.t') AND name = 'd'"), "0");
    /* DML and DDL in one transaction: the DDL's LSN lies before its commit */
    run(f.s, c, "BEGIN TRAN; INSERT INTO dbo.t (id, b) VALUES (4, 'w'); ALTER TABLE dbo.t ADD e int NULL; COMMIT;"
                " EXEC sim.run_capture");
    CHECK_EQ_INT(c->nerrors, 0);
    run(f.s, c, "SELECT COUNT(*) FROM cdc.ddl_history h WHERE h.ddl_command LIKE '%ADD e%' AND h.ddl_lsn <"
                " (SELECT MAX(__$start_lsn) FROM cdc.dbo_t_CT) AND h.ddl_lsn > (SELECT MAX(start_lsn) FROM cdc.lsn_time_mapping"
                " WHERE start_lsn < (SELECT MAX(__$start_lsn) FROM cdc.dbo_t_CT))");
    CHECK_EQ_STR(c->rows[0], "1");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00000000000000000000"), "5");
    /* ALTER COLUMN errors as SQL Server's */
    run(f.s, c, "ALTER TABLE dbo.t ALTER COLUMN b varchar(3) NULL");
    CHECK_EQ_INT(c->err_number, 2628);
    run(f.s, c, "ALTER TABLE dbo.t ALTER COLUMN id bigint NOT NULL");
    CHECK_EQ_INT(c->err_number, 4922);
    run(f.s, c, "ALTER TABLE dbo.t ALTER COLUMN nope int NULL");
    CHECK_EQ_INT(c->err_number, 4924);
    run(f.s, c, "ALTER TABLE dbo.t ALTER COLUMN b int NULL");
    CHECK_EQ_INT(c->err_number, 245);
    run(f.s, c, "EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.ddl_history"), "4");
    sfx_close(&f);
}

/* A second instance enabled after an ADD captures the new column; the
 * first keeps its columns; a third is refused; both are listed oldest
 * first; disabling the first leaves the second working; a column dropped
 * and added back is a new column (a new column_id) for the instances. */
TEST(sim_schema_two_instances) {
    sfx f;
    sfx_open(&f, "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v nvarchar(20) NULL)");
    coll *c = f.c;
    run(f.s, c, "ALTER TABLE dbo.t ADD w int NULL");
    run(f.s, c, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL,"
                " @capture_instance = N'dbo_t_v2'");
    CHECK_EQ_INT(c->nerrors, 0);
    /* min_lsn is 0x00.. until capture processes the enable */
    CHECK_EQ_STR(scalar(f.s, c, "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_t_v2'), 1)"), "0x00000000000000000000");
    run(f.s, c, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL,"
                " @capture_instance = N'dbo_t_v3'");
    CHECK_EQ_INT(c->err_number, 22962);
    CHECK(strstr(c->err_text, "A table can have at most two capture instances.") != NULL);
    run(f.s, c, "EXEC sim.run_capture; EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N't'");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK(strstr(c->rows[0], "dbo|t|dbo_t|") == c->rows[0]);
    CHECK(strstr(c->rows[1], "dbo|t|dbo_t_v2|") == c->rows[1]);
    CHECK(strstr(c->rows[0], "[id], [v]") != NULL && strstr(c->rows[0], "[w]") == NULL);
    CHECK(strstr(c->rows[1], "[id], [v], [w]") != NULL);
    run(f.s, c, "EXEC sys.sp_cdc_get_captured_columns @capture_instance = N'dbo_t_v2'");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[2], "dbo|t|dbo_t_v2|w|3|3|int|NULL|10|10|0|NULL");
    run(f.s, c, "INSERT INTO dbo.t (id, v, w) VALUES (1, N'one', 100); EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.dbo_t_CT"), "1");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT w FROM cdc.dbo_t_v2_CT"), "100");
    /* the switch: disable the old instance, the new one goes on */
    run(f.s, c, "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N't', @capture_instance = N'dbo_t'");
    CHECK_EQ_INT(c->nerrors, 0);
    run(f.s, c, "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N't', @capture_instance = N'dbo_t'");
    CHECK_EQ_INT(c->err_number, 22960);
    run(f.s, c, "INSERT INTO dbo.t (id, v, w) VALUES (2, N'two', 200); EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COUNT(*) FROM cdc.dbo_t_v2_CT"), "2");
    run(f.s, c, "EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N't'");
    CHECK_EQ_INT(c->nrows, 1);
    /* w dropped and added back: column_id 4, which dbo_t_v2 (column 3) does not capture */
    run(f.s, c, "ALTER TABLE dbo.t DROP COLUMN w; ALTER TABLE dbo.t ADD w int NULL");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT column_id FROM sys.columns WHERE object_id = OBJECT_ID('dbo.t') AND name = 'w'"), "4");
    run(f.s, c, "INSERT INTO dbo.t (id, v, w) VALUES (3, N'three', 300); EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT COALESCE(CAST(w AS varchar(10)), 'NULL') FROM cdc.dbo_t_v2_CT WHERE id = 3"), "NULL");
    run(f.s, c, "EXEC sys.sp_cdc_get_ddl_history @capture_instance = N'dbo_t_v2'");
    CHECK_EQ_INT(c->nrows, 2);
    sfx_close(&f);
}

/* Computed columns: values on SELECT, typed by their expression, refused
 * as targets, is_computed; CDC lists them and stores NULL in every change
 * row (SQL Server's documentation: "Computed columns that are included in a
 * capture instance always have a value of NULL"). */
TEST(sim_schema_computed_columns) {
    sfx f;
    sfx_open(&f, "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, p decimal(10,2) NULL, q int NULL,"
                 " total AS (p * q) PERSISTED, label AS N'#' + CAST(id AS nvarchar(10)))");
    coll *c = f.c;
    run(f.s, c, "SELECT name, is_computed FROM sys.columns WHERE object_id = OBJECT_ID('dbo.t') ORDER BY column_id");
    CHECK_EQ_INT(c->nrows, 5);
    CHECK_EQ_STR(c->rows[3], "total|1");
    CHECK_EQ_STR(c->rows[4], "label|1");
    CHECK_EQ_STR(c->rows[0], "id|0");
    run(f.s, c, "INSERT INTO dbo.t (id, p, q) VALUES (1, 2.50, 4); INSERT INTO dbo.t VALUES (2, 1.25, 2)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(f.s, c, "SELECT total, label FROM dbo.t ORDER BY id");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[0], "10.00|#1");
    CHECK_EQ_STR(c->rows[1], "2.50|#2");
    /* decimal(10,2) * int: decimal(21,2), SQL Server's rule */
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_DECIMAL);
    CHECK_EQ_INT(c->cols[0].type.precision, 21);
    CHECK_EQ_INT(c->cols[0].type.scale, 2);
    CHECK_EQ_INT(c->cols[1].type.id, SIM_T_NVARCHAR);
    run(f.s, c, "INSERT INTO dbo.t (id, total) VALUES (3, 1)");
    CHECK_EQ_INT(c->err_number, 271);
    run(f.s, c, "UPDATE dbo.t SET total = 1 WHERE id = 1");
    CHECK_EQ_INT(c->err_number, 271);
    run(f.s, c, "UPDATE dbo.t SET q = 5 WHERE id = 1; EXEC sim.run_capture");
    CHECK_EQ_STR(scalar(f.s, c, "SELECT total FROM dbo.t WHERE id = 1"), "12.50");
    /* captured, marked, NULL in every change row */
    run(f.s, c, "SELECT column_name, is_computed FROM cdc.captured_columns ORDER BY column_ordinal");
    CHECK_EQ_INT(c->nrows, 5);
    CHECK_EQ_STR(c->rows[3], "total|1");
    run(f.s, c, "EXEC sys.sp_cdc_get_captured_columns @capture_instance = N'dbo_t'");
    CHECK_EQ_INT(c->nrows, 5);
    CHECK(strstr(c->rows[3], "|total|4|4|decimal|NULL|21|10|2|NULL") != NULL);
    run(f.s, c, "SELECT __$operation, id, q, total, label FROM cdc.dbo_t_CT ORDER BY __$start_lsn, __$seqval, __$operation");
    CHECK_EQ_INT(c->nrows, 4);
    CHECK_EQ_STR(c->rows[0], "2|1|4|NULL|NULL");
    CHECK_EQ_STR(c->rows[3], "4|1|5|NULL|NULL");
    /* ROLLBACK of a DELETE and of DDL brings the values back, computed */
    run(f.s, c, "BEGIN TRAN; DELETE FROM dbo.t WHERE id = 2; ALTER TABLE dbo.t ADD x int NULL; ROLLBACK");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT total FROM dbo.t WHERE id = 2"), "2.50");
    /* ADD a computed column; DROP a column one uses; ALTER a computed one */
    run(f.s, c, "ALTER TABLE dbo.t ADD next_q AS (q + 1)");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(f.s, c, "SELECT next_q FROM dbo.t WHERE id = 1"), "6");
    run(f.s, c, "ALTER TABLE dbo.t DROP COLUMN q");
    CHECK_EQ_INT(c->err_number, 4922);
    run(f.s, c, "ALTER TABLE dbo.t ALTER COLUMN total int NULL");
    CHECK_EQ_INT(c->err_number, 4928);
    run(f.s, c, "CREATE TABLE dbo.u (a int NULL, b AS (a + 1), c2 AS (b * 2))");
    CHECK_EQ_INT(c->err_number, 1759);
    run(f.s, c, "ALTER TABLE dbo.t DROP COLUMN next_q; SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID('dbo.t')");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(c->rows[0], "5");
    sfx_close(&f);
}

/* WHILE with BREAK and CONTINUE (the DBA procedure waits in one). */
TEST(sim_schema_while_loops) {
    char dir[64];
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    coll *c = calloc(1, sizeof *c);
    run(s, c, "DECLARE @i int = 0, @sum int = 0;"
              " WHILE @i < 10 BEGIN SET @i = @i + 1; IF @i = 3 CONTINUE; IF @i > 6 BREAK; SET @sum = @sum + @i END;"
              " SELECT @i, @sum");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(c->rows[0], "7|18");
    run(s, c, "DECLARE @n int = 0; WHILE (SELECT @n) < 3 SET @n = @n + 1; SELECT @n");
    CHECK_EQ_STR(c->rows[0], "3");
    run(s, c, "BREAK");
    CHECK_EQ_INT(c->err_number, 135);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
