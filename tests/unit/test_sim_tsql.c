/* test_sim_tsql.c - T-SQL shapes SQLite lacks, run on data: CROSS/OUTER
 * APPLY and derived tables with column alias lists (tsql_rewrite.c). */
#include "test_sim_helpers.h"

TEST(sim_apply_and_alias_lists_on_data) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(s, c, "CREATE DATABASE lab; USE lab; CREATE TABLE dbo.e (id int NOT NULL PRIMARY KEY, v int NULL);"
              " INSERT INTO dbo.e VALUES (1, 10), (2, 30), (3, 20), (4, 50), (5, 40)");
    CHECK_EQ_INT(c->nerrors, 0);
    /* a window function over the applied rows only: the first one after b.lo has no LAG */
    run(s, c, "SELECT d.id, d.prev FROM (SELECT 2 AS lo) b CROSS APPLY (SELECT id, LAG(v) OVER (ORDER BY id) AS prev"
              " FROM dbo.e WHERE id > b.lo) d ORDER BY d.id");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "3|NULL");
    CHECK_EQ_STR(c->rows[1], "4|20");
    CHECK_EQ_STR(c->rows[2], "5|50");
    CHECK_EQ_STR(c->colnames, "id|prev");
    /* an aggregate left side whose HAVING drops its row: no rows, CROSS or OUTER */
    run(s, c, "SELECT x.id FROM (SELECT MAX(id) AS hi FROM dbo.e WHERE id > 100 HAVING MAX(id) IS NOT NULL) r"
              " CROSS APPLY (SELECT id FROM dbo.e WHERE id < r.hi) x");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 0);
    run(s, c, "SELECT x.id FROM (SELECT MAX(id) AS hi FROM dbo.e HAVING MAX(id) > 3) r CROSS APPLY (SELECT id FROM dbo.e"
              " WHERE id >= r.hi - 1) x ORDER BY x.id");
    CHECK_EQ_INT(c->nrows, 2);
    CHECK_EQ_STR(c->rows[0], "4");
    /* OUTER APPLY of one left row and no right rows: one row of NULLs */
    run(s, c, "SELECT b.lo, d.id FROM (SELECT 9 AS lo) b OUTER APPLY (SELECT id FROM dbo.e WHERE id > b.lo) d");
    CHECK_EQ_INT(c->nrows, 1);
    CHECK_EQ_STR(c->rows[0], "9|NULL");
    /* TOP (1) on the right, per left row; CROSS drops the row without a match */
    run(s, c, "SELECT e.id, d.v FROM dbo.e OUTER APPLY (SELECT TOP (1) f.v FROM dbo.e AS f WHERE f.id > e.id"
              " ORDER BY f.id) d ORDER BY e.id");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->nrows, 5);
    CHECK_EQ_STR(c->rows[0], "1|30");
    CHECK_EQ_STR(c->rows[4], "5|NULL");
    CHECK_EQ_STR(c->colnames, "id|v");
    run(s, c, "SELECT e.id, d.v, d.v - e.v AS diff FROM dbo.e CROSS APPLY (SELECT TOP (1) f.v FROM dbo.e AS f"
              " WHERE f.id > e.id ORDER BY f.id) d WHERE e.id >= 2 ORDER BY e.id");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "2|20|-10");
    CHECK_EQ_STR(c->rows[2], "4|40|-10");
    /* an aggregate on the right: one row per left row, even over no rows */
    run(s, c, "SELECT e.id, d.n FROM dbo.e CROSS APPLY (SELECT COUNT(*) AS n FROM dbo.e AS f WHERE f.v > e.v) d"
              " ORDER BY e.id");
    CHECK_EQ_INT(c->nrows, 5);
    CHECK_EQ_STR(c->rows[0], "1|4");
    CHECK_EQ_STR(c->rows[3], "4|0");
    /* column alias lists */
    CHECK_EQ_STR(scalar(s, c, "SELECT SUM(v.a * v.b) FROM (VALUES (1, 2), (3, 4)) v(a, b)"), "14");
    CHECK_EQ_STR(scalar(s, c, "SELECT CONVERT(varchar(23), MIN(x.t), 126) FROM (VALUES"
                              " (CONVERT(datetime, '2024-11-03T01:30:00', 126)), (CONVERT(datetime, '2024-11-03T01:10:00', 126))) x(t)"),
                 "2024-11-03T01:10:00");
    CHECK_EQ_STR(scalar(s, c, "SELECT MAX(x.w) FROM (SELECT id, v FROM dbo.e) AS x(k, w) WHERE x.k < 3"), "30");
    run(s, c, "SELECT v.a FROM (VALUES (1, 2)) v(a)");
    CHECK_EQ_INT(c->err_number, 8158);
    /* a shape it cannot translate exactly is refused, not answered wrong */
    run(s, c, "SELECT d.v FROM dbo.e CROSS APPLY (SELECT f.v FROM dbo.e AS f WHERE f.id = e.id) d");
    CHECK_EQ_INT(c->err_number, 50000);
    CHECK(strstr(c->err_text, "CROSS APPLY") != NULL);
    CHECK_EQ_INT(c->nrows, 0);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
