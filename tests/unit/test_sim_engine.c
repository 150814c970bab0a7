/* test_sim_engine.c - the simulator engine: login, DDL, DML, SELECT shapes,
 * transactions, errors, persistence. */
#include <unistd.h>

#include "test_sim_helpers.h"

TEST(sim_login_and_select1) {
    char dir[64];
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    CHECK(srv != NULL);
    sim_session *bad = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_login(srv, &bad, "sa", "wrong", NULL, "t", &err), MCDC_E_PERMISSION);
    CHECK_EQ_INT(err.server_number, 18456);
    CHECK_EQ_STR(err.message, "Login failed for user 'sa'.");
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    CHECK(s != NULL);
    CHECK(sim_session_spid(s) >= 51);
    CHECK_EQ_STR(sim_session_database(s), "master");
    coll *c = calloc(1, sizeof *c);
    CHECK_EQ_STR(scalar(s, c, "SELECT 1"), "1");
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_INT);
    CHECK_EQ_STR(c->colnames, "");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_create_insert_select) {
    char dir[64];
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    coll *c = calloc(1, sizeof *c);
    run(s, c, "CREATE DATABASE shop");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "USE shop");
    CHECK_EQ_STR(c->db, "shop");
    CHECK_EQ_INT(c->info_number, 5701);
    run(s, c, "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount decimal(18,4), note nvarchar(50) NULL,"
              " at datetime2(3), flag bit, raw varbinary(16), g uniqueidentifier, d date, m money, f float)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "INSERT INTO dbo.orders (id, amount, note, at, flag, raw, g, d, m, f) VALUES"
              " (1, 12.5, N'café', '2024-01-02 03:04:05.123456', 1, 0x0102, '6f9619ff-8b86-d011-b42d-00c04fc964ff', '2024-02-29', 3, 1.5),"
              " (2, -0.00005, NULL, '2024-01-02', 0, NULL, NULL, NULL, NULL, NULL)");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->last_count, 2);
    run(s, c, "SELECT id, amount, note, at, flag, raw, g, d, m, f FROM orders WHERE id = 1");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_STR(c->rows[0], "1|12.5000|café|2024-01-02 03:04:05.123|1|0x0102|6F9619FF-8B86-D011-B42D-00C04FC964FF|2024-02-29|3.0000|1.5");
    CHECK_EQ_INT(c->cols[1].type.id, SIM_T_DECIMAL);
    CHECK_EQ_INT(c->cols[1].type.precision, 18);
    CHECK_EQ_INT(c->cols[3].type.id, SIM_T_DATETIME2);
    CHECK_EQ_INT(c->cols[3].type.scale, 3);
    CHECK_EQ_STR(c->colnames, "id|amount|note|at|flag|raw|g|d|m|f");
    run(s, c, "SELECT TOP (1) [id], amount FROM [dbo].[orders] ORDER BY id DESC");
    CHECK_EQ_STR(c->rows[0], "2|-0.0001");
    run(s, c, "SELECT id FROM dbo.orders ORDER BY id OFFSET 1 ROWS FETCH NEXT 1 ROWS ONLY");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_STR(c->rows[0], "2");
    run(s, c, "SELECT COUNT_BIG(*) FROM dbo.orders");
    CHECK_EQ_STR(c->rows[0], "2");
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_BIGINT);
    run(s, c, "INSERT INTO dbo.orders (id) VALUES (1)");
    CHECK_EQ_INT(c->err_number, 2627);
    run(s, c, "SELECT nope FROM dbo.orders");
    CHECK_EQ_INT(c->err_number, 207);
    run(s, c, "SELECT * FROM dbo.missing");
    CHECK_EQ_INT(c->err_number, 208);
    CHECK_EQ_STR(c->err_text, "Invalid object name 'dbo.missing'.");
    run(s, c, "SELEC 1");
    CHECK_EQ_INT(c->err_number, 102);
    run(s, c, "UPDATE dbo.orders SET note = N'x' WHERE id = 2; SELECT note FROM dbo.orders WHERE id = 2");
    CHECK_EQ_STR(c->rows[0], "x");
    run(s, c, "DELETE FROM dbo.orders WHERE id = 2; SELECT COUNT(*) FROM dbo.orders");
    CHECK_EQ_STR(c->rows[0], "1");
    run(s, c, "DROP DATABASE shop");
    CHECK_EQ_INT(c->err_number, 3702); /* this session uses it */
    run(s, c, "USE master; DROP DATABASE shop; DROP DATABASE IF EXISTS shop");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "USE shop");
    CHECK_EQ_INT(c->err_number, 911);
    run(s, c, "CREATE DATABASE shop; USE shop; SELECT COUNT(*) FROM sys.tables");
    CHECK_EQ_STR(c->rows[0], "0");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}

TEST(sim_all_types_round_trip) {
    char dir[64];
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    coll *c = calloc(1, sizeof *c);
    run(s, c, "CREATE DATABASE ty; USE ty; CREATE TABLE dbo.ty (k int NOT NULL PRIMARY KEY, a bit, b tinyint, c smallint, d bigint,"
              " e decimal(38,10), f numeric(5,0), g money, h smallmoney, i float, j real, l date, m time(3), n datetime,"
              " o smalldatetime, p datetime2(7), q datetimeoffset(2), r char(5), s varchar(max), t nchar(3), u nvarchar(max),"
              " v binary(4), w varbinary(max), x uniqueidentifier, y varchar(10) NULL UNIQUE)");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "INSERT INTO dbo.ty VALUES (1, 1, 255, -32768, 9223372036854775807, 12345678901234567890.0123456789, 99999, 922337203685477.5807,"
              " -214748.3648, 1.5e300, 3.25, '0001-01-01', '23:59:59.1234', '2024-02-29 23:59:59.998', '2024-01-01 10:20:29',"
              " '9999-12-31 23:59:59.9999999', '2024-06-01 12:00:00.125 -03:00', 'ab', NOT_A_COLUMN, N'ü', N'日本語',"
              " 0x0102, 0x, NEWID(), NULL)");
    CHECK_EQ_INT(c->err_number, 207);
    run(s, c, "INSERT INTO dbo.ty VALUES (1, 1, 255, -32768, 9223372036854775807, 12345678901234567890.0123456789, 99999, 922337203685477.5807,"
              " -214748.3648, 1.5e300, 3.25, '0001-01-01', '23:59:59.1234', '2024-02-29 23:59:59.998', '2024-01-01 10:20:29',"
              " '9999-12-31 23:59:59.9999999', '2024-06-01 12:00:00.125 -03:00', 'ab', 'long', N'ü', N'日本語',"
              " 0x0102, 0x, '00000000-0000-0000-0000-000000000001', 'u1')");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "SELECT * FROM dbo.ty");
    const char *want = "1|1|255|-32768|9223372036854775807|12345678901234567890.0123456789|99999|922337203685477.5807|"
                             "-214748.3648|1.5e+300|3.25|0001-01-01|23:59:59.123|2024-02-29 23:59:59.997|2024-01-01 10:20:00|"
                             "9999-12-31 23:59:59.9999999|2024-06-01 12:00:00.13 -03:00|ab   |long|ü  |日本語|0x01020000|0x|"
                             "00000000-0000-0000-0000-000000000001|u1";
    bool same = strcmp(c->rows[0], want) == 0;
    if (!same) fprintf(stderr, "got  %s (rows %d, err %d %s)\nwant %s\n", c->rows[0], c->nrows, c->err_number, c->err_text, want);
    CHECK(same);
    CHECK_EQ_INT(c->ncols, 25);
    CHECK_EQ_INT(c->cols[12].type.id, SIM_T_TIME);
    CHECK_EQ_INT(c->cols[12].type.scale, 3);
    CHECK_EQ_INT(c->cols[16].type.id, SIM_T_DATETIMEOFFSET);
    CHECK_EQ_INT(c->cols[18].type.length, -1);
    CHECK_EQ_INT(c->cols[21].type.id, SIM_T_BINARY);
    CHECK(c->cols[24].nullable);
    CHECK(!c->cols[0].nullable);
    run(s, c, "INSERT INTO dbo.ty (k, y) VALUES (2, 'u1')");
    CHECK_EQ_INT(c->err_number, 2627);
    run(s, c, "INSERT INTO dbo.ty (k, b) VALUES (3, 256)");
    CHECK_EQ_INT(c->err_number, 8115);
    run(s, c, "INSERT INTO dbo.ty (k, l) VALUES (4, 'not a date')");
    CHECK_EQ_INT(c->err_number, 245);
    run(s, c, "INSERT INTO dbo.ty (k, f) VALUES (5, 123456)");
    CHECK_EQ_INT(c->err_number, 8115);
    run(s, c, "INSERT INTO dbo.ty (y) VALUES ('no key')");
    CHECK_EQ_INT(c->err_number, 515);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
