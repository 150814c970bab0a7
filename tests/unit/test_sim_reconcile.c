/* test_sim_reconcile.c - the reconcile's source queries (reference §3.1
 * rows 19 and 20, §2.8 tier 1 and 2) answer exactly: integer-key buckets
 * (floor for negative keys, NULL keys in none) with COUNT_BIG(*) and
 * SUM(CAST(k AS decimal(38,0))), date-key buckets, NTILE tiles, keyed reads
 * of many keys by IN (...) and by a join with a VALUES list. The same
 * queries on a million rows, timed: tests/e2e/sim_reconcile.py. */
#include "test_sim_helpers.h"

#define NKEYS 3000
#define KEY0 (-1234)

TEST(sim_reconcile_queries_are_exact) {
    char dir[64];
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    coll *c = calloc(1, sizeof *c);
    run(s, c, "CREATE DATABASE rec; USE rec; CREATE TABLE dbo.t (k bigint NULL, d date NULL, v int NULL)");
    /* keys KEY0 .. KEY0 + NKEYS - 1, and two NULL keys */
    run(s, c, "INSERT INTO dbo.t (k, d, v) SELECT n - 1234, DATEADD(day, n, CAST('19691201' AS date)), n FROM (SELECT a.x + 10 * b.x"
              " + 100 * e.x + 1000 * f.x AS n FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) a(x) CROSS JOIN (VALUES (0),(1),"
              "(2),(3),(4),(5),(6),(7),(8),(9)) b(x) CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) e(x) CROSS JOIN"
              " (VALUES (0),(1),(2)) f(x)) s; INSERT INTO dbo.t (k, v) VALUES (NULL, 1), (NULL, 2)");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT_BIG(*) FROM dbo.t"), "3002");
    const int W = 500;
    run(s, c, "SELECT [__$b] AS b, COUNT_BIG(*) AS n, SUM(CAST([__$o] AS decimal(38,0))) AS s FROM (SELECT CAST([k] AS bigint)"
              " AS [__$o], CASE WHEN CAST([k] AS bigint) >= 0 THEN CAST([k] AS bigint) / CAST(500 AS bigint) ELSE"
              " (CAST([k] AS bigint) + 1) / CAST(500 AS bigint) - 1 END AS [__$b] FROM [dbo].[t] WHERE [k] IS NOT NULL) x"
              " GROUP BY [__$b] ORDER BY b");
    CHECK_EQ_INT(c->nerrors, 0);
    CHECK_EQ_INT(c->cols[1].type.id, SIM_T_BIGINT);
    CHECK_EQ_INT(c->cols[2].type.id, SIM_T_DECIMAL);
    CHECK_EQ_INT(c->cols[2].type.precision, 38);
    CHECK_EQ_INT(c->cols[2].type.scale, 0);
    /* the expected buckets: floor(k / W) */
    int r = 0;
    for (long b = -3; b <= 4; b++) {
        long lo = b * W, hi = (b + 1) * W;
        if (lo < KEY0) lo = KEY0;
        if (hi > KEY0 + NKEYS) hi = KEY0 + NKEYS;
        if (lo >= hi) continue;
        char want[96];
        snprintf(want, sizeof want, "%ld|%ld|%ld", b, hi - lo, (lo + hi - 1) * (hi - lo) / 2);
        CHECK(r < c->nrows);
        if (r < c->nrows) CHECK_EQ_STR(c->rows[r], want);
        r++;
    }
    CHECK_EQ_INT(c->nrows, r);
    /* a sum past 2^63 stays exact in decimal(38,0) */
    CHECK_EQ_STR(scalar(s, c, "SELECT SUM(CAST(9223372036854775807 AS decimal(38,0))) FROM dbo.t WHERE k BETWEEN 1 AND 3"),
                 "27670116110564327421");
    /* an integer cast to a decimal: its digits and the scale's zeros, or
     * SQL Server's overflow error when they do not fit */
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST(0 AS decimal(38,0))"), "0");
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST(CAST(0 AS bigint) AS decimal(5,3))"), "0.000");
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST(CAST(-5 AS int) AS decimal(10,2))"), "-5.00");
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST(CAST(99 AS int) AS decimal(4,2))"), "99.00");
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST(CAST(-9223372036854775807 AS bigint) - 1 AS decimal(19,0))"),
                 "-9223372036854775808");
    CHECK_EQ_STR(scalar(s, c, "SELECT SUM(CAST(k AS decimal(38,2))) FROM dbo.t WHERE k BETWEEN -3 AND 2"), "-3.00");
    run(s, c, "SELECT CAST(CAST(100 AS int) AS decimal(4,2))");
    CHECK_EQ_INT(c->nerrors, 1);
    CHECK(strstr(c->err_text, "Arithmetic overflow") != NULL);
    /* date keys: days since 1970-01-01 */
    run(s, c, "SELECT [__$b], COUNT_BIG(*), SUM(CAST([__$o] AS decimal(38,0))) FROM (SELECT CAST(DATEDIFF(day,"
              " CAST('19700101' AS date), [d]) AS bigint) AS [__$o], CASE WHEN CAST(DATEDIFF(day, CAST('19700101' AS date), [d])"
              " AS bigint) >= 0 THEN CAST(DATEDIFF(day, CAST('19700101' AS date), [d]) AS bigint) / CAST(1000 AS bigint) ELSE"
              " (CAST(DATEDIFF(day, CAST('19700101' AS date), [d]) AS bigint) + 1) / CAST(1000 AS bigint) - 1 END AS [__$b]"
              " FROM [dbo].[t] WHERE [d] IS NOT NULL) x GROUP BY [__$b] ORDER BY 1");
    CHECK_EQ_INT(c->nrows, 4);
    CHECK_EQ_STR(c->rows[0], "-1|31|-496"); /* 1969-12-01 .. 1969-12-31: -31 .. -1 */
    CHECK_EQ_STR(c->rows[1], "0|1000|499500");
    /* NTILE tiles: the first key of tiles 2..4 */
    run(s, c, "SELECT [k] FROM (SELECT [k], [__$tile], LAG([__$tile]) OVER (ORDER BY [k]) AS [__$prev] FROM (SELECT [k],"
              " NTILE(4) OVER (ORDER BY [k]) AS [__$tile] FROM [dbo].[t] WHERE [k] IS NOT NULL) a) b"
              " WHERE [__$tile] <> [__$prev] ORDER BY [__$tile]");
    CHECK_EQ_INT(c->nrows, 3);
    CHECK_EQ_STR(c->rows[0], "-484");
    CHECK_EQ_STR(c->rows[1], "266");
    CHECK_EQ_STR(c->rows[2], "1016");
    /* keyed reads of many keys: IN and a join with VALUES, the same rows */
    mcdc_buf in = {0}, vals = {0};
    long sum = 0;
    int nk = 0;
    for (int k = KEY0; k < KEY0 + NKEYS; k += 3, nk++) {
        mcdc_buf_printf(&in, NULL, "%s%d", nk ? ", " : "", k);
        mcdc_buf_printf(&vals, NULL, "%s(%d)", nk ? ", " : "", k);
        sum += k;
    }
    mcdc_buf_cstr(&in, NULL);
    mcdc_buf_cstr(&vals, NULL);
    mcdc_buf q = {0};
    char want[64];
    snprintf(want, sizeof want, "%d|%ld", nk, sum);
    mcdc_buf_printf(&q, NULL, "SELECT COUNT_BIG(*), SUM(CAST(k AS decimal(38,0))) FROM dbo.t WHERE k IN (%s)", (const char *)in.data);
    mcdc_buf_cstr(&q, NULL);
    CHECK_EQ_STR(scalar(s, c, (const char *)q.data), want);
    mcdc_buf_reset(&q);
    mcdc_buf_printf(&q, NULL, "SELECT COUNT_BIG(*), SUM(CAST(t.k AS decimal(38,0))) FROM dbo.t t JOIN (VALUES %s) v(k) ON t.k = v.k",
                    (const char *)vals.data);
    mcdc_buf_cstr(&q, NULL);
    CHECK_EQ_STR(scalar(s, c, (const char *)q.data), want);
    /* the extent reconcile sets its grid by: MIN and MAX of the column as
     * ordinals (a seek each), an integer's and a date's */
    CHECK_EQ_STR(scalar(s, c, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; SELECT CAST((SELECT MIN([k]) FROM"
                              " [dbo].[t]) AS bigint) AS lo, CAST((SELECT MAX([k]) FROM [dbo].[t]) AS bigint) AS hi"),
                 "-1234|1765");
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST(DATEDIFF(day, CAST('19700101' AS date), (SELECT MIN([d]) FROM [dbo].[t]))"
                              " AS bigint) AS lo, CAST(DATEDIFF(day, CAST('19700101' AS date), (SELECT MAX([d]) FROM"
                              " [dbo].[t])) AS bigint) AS hi"),
                 "-31|2968");
    /* an empty table: both NULL */
    run(s, c, "CREATE TABLE dbo.e (k int NULL)");
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST((SELECT MIN([k]) FROM [dbo].[e]) AS bigint) AS lo, CAST((SELECT MAX([k])"
                              " FROM [dbo].[e]) AS bigint) AS hi"),
                 "NULL|NULL");
    CHECK_EQ_STR(scalar(s, c, "SELECT COUNT_BIG(*) AS n FROM [dbo].[e]"), "0");
    mcdc_buf_free(&in);
    mcdc_buf_free(&vals);
    mcdc_buf_free(&q);
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
