/* test_tsql_xlate.c - the T-SQL lexer and the translator to SQLite SQL. */
#include <stdio.h>
#include <string.h>

#include "mcdc_test.h"
#include "tsql_lex.h"
#include "tsql_xlate.h"

static bool t_exists(void *c, const char *n) { (void)c; return strcmp(n, "dbo.missing") != 0; }
static bool t_col(void *c, const char *t, const char *col, sim_type *o, bool *nul) {
    (void)c; (void)t;
    memset(o, 0, sizeof *o);
    o->id = strcmp(col, "v") == 0 ? SIM_T_NVARCHAR : SIM_T_INT;
    o->length = 50;
    if (strcmp(col, "dec") == 0) *o = (sim_type){SIM_T_DECIMAL, 10, 2, 0};
    if (strcmp(col, "mon") == 0) *o = (sim_type){SIM_T_MONEY, 0, 0, 0};
    *nul = true;
    return true;
}

static int xl(const char *sql, char *out, size_t cap, xl_result *res, mcdc_error *err) {
    tsql_tok *t = NULL;
    int n = 0;
    int rc = tsql_lex(&t, &n, sql, strlen(sql), err);
    if (rc != MCDC_OK) return rc;
    xl_env env;
    memset(&env, 0, sizeof env);
    env.table_exists = t_exists;
    env.col_type = t_col;
    env.db_name = "lab";
    env.user_name = "u";
    env.spid = 53;
    env.product_major = 16;
    mcdc_buf b = {0};
    rc = tsql_xlate(&env, t, 0, n, &b, res, err);
    snprintf(out, cap, "%s", rc == MCDC_OK && b.data ? (const char *)b.data : "");
    mcdc_buf_free(&b);
    mcdc_free(t);
    return rc;
}

TEST(tsql_lex_tokens) {
    tsql_tok *t = NULL;
    int n = 0;
    const char *sql = "SELECT [a]]b], N'it''s', 0x0A, @v, @@SPID /* c */ -- x\n FROM \"q\"";
    CHECK_EQ_INT(tsql_lex(&t, &n, sql, strlen(sql), NULL), MCDC_OK);
    CHECK_EQ_INT(n, 12);
    char buf[64];
    tsql_tok_text(&t[1], buf, sizeof buf);
    CHECK_EQ_STR(buf, "a]b");
    CHECK_EQ_INT(t[3].t, TK_NSTR);
    tsql_tok_text(&t[3], buf, sizeof buf);
    CHECK_EQ_STR(buf, "it's");
    CHECK_EQ_INT(t[5].t, TK_HEX);
    CHECK_EQ_INT(t[7].t, TK_VAR);
    CHECK_EQ_INT(t[9].t, TK_SYSVAR);
    CHECK_EQ_INT(t[11].t, TK_QIDENT);
    CHECK_EQ_INT(t[11].line, 2);
    mcdc_free(t);
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK(tsql_lex(&t, &n, "SELECT 'open", 12, &err) != MCDC_OK);
    CHECK(strstr(err.message, "Unclosed quotation mark") != NULL);
}

TEST(tsql_xlate_shapes) {
    char out[512];
    xl_result *res = mcdc_malloc(sizeof *res);
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(xl("SELECT TOP (2) [id] FROM t ORDER BY id", out, sizeof out, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT \"id\" FROM \"dbo.t\" AS \"t\" ORDER BY \"id\" LIMIT 2");
    CHECK_EQ_INT(res->ntables, 1);
    CHECK_EQ_STR(res->tables[0].name, "dbo.t");
    CHECK_EQ_INT(xl("SELECT c.x FROM cdc.[ci_CT] AS c ORDER BY 1 OFFSET 5 ROWS FETCH NEXT 1 ROWS ONLY", out, sizeof out, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT \"c\".\"x\" FROM \"cdc.ci_CT\" AS \"c\" ORDER BY 1 LIMIT 1 OFFSET 5");
    CHECK_EQ_INT(xl("SELECT CONVERT(varchar(22), 0x0A, 1)", out, sizeof out, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT sim_convert(X'0A', 'varchar(22)', 1)");
    CHECK_EQ_INT(res->nitems, 1);
    CHECK(res->items[0].known);
    CHECK_EQ_INT(res->items[0].type.id, SIM_T_VARCHAR);
    CHECK_EQ_INT(res->items[0].type.length, 22);
    CHECK_EQ_INT(xl("SELECT x AT TIME ZONE 'UTC' AS z, N'a' + QUOTENAME(v) FROM t", out, sizeof out, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT sim_at_time_zone(\"x\", 'UTC') AS \"z\", 'a' || sim_quotename(\"v\") FROM \"dbo.t\" AS \"t\"");
    CHECK_EQ_INT(res->items[0].type.id, SIM_T_DATETIMEOFFSET);
    CHECK_EQ_STR(res->items[0].name, "z");
    CHECK_EQ_INT(xl("SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET()), @@SPID, COUNT_BIG(*)", out, sizeof out, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT sim_datepart('TZOFFSET', sim_sysdatetimeoffset()), 53, count(*)");
    CHECK_EQ_INT(res->items[2].type.id, SIM_T_BIGINT);
    CHECK(xl("SELECT * FROM dbo.missing", out, sizeof out, res, &err) != MCDC_OK);
    CHECK_EQ_INT(err.server_number, 208);
    CHECK(xl("SELECT NOSUCHFUNC(1)", out, sizeof out, res, &err) != MCDC_OK);
    CHECK_EQ_INT(err.server_number, 195);
    CHECK(xl("SELECT (1", out, sizeof out, res, &err) != MCDC_OK);
    CHECK_EQ_INT(err.server_number, 102);
    mcdc_free(res);
}

/* decimal(p,s) as "p,s", other types by id */
static void type_str(const xl_item *it, char *buf, size_t cap) {
    if (!it->known) snprintf(buf, cap, "?");
    else if (it->type.id == SIM_T_DECIMAL) snprintf(buf, cap, "%d,%d", it->type.precision, it->type.scale);
    else snprintf(buf, cap, "#%d", (int)it->type.id);
}

TEST(tsql_xlate_decimal_types_and_rewrites) {
    char out[1024], ty[64];
    xl_result *res = mcdc_malloc(sizeof *res);
    mcdc_error err = MCDC_ERROR_INIT;
    /* SQL Server's result types of arithmetic and aggregates */
    int rc = xl("SELECT dec + 1, dec * dec, dec / 3, dec % 3, 1.5 + 1, -dec, 2.50 * 0.1, (dec + 1) * 2,"
                " dec + mon, mon * 2, 1e2, id / 2, SUM(dec), AVG(dec), SUM(mon), AVG(id), SUM(dec) OVER (ORDER BY id)"
                " FROM t", out, sizeof out, res, &err);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_INT(res->nitems, 17);
    static const char *want[] = {"13,2", "21,4", "21,13", "10,2", "12,1", "10,2", "5,3", "24,2", "20,4", "#9",
                                 "#7", "#4", "38,2", "38,6", "#9", "#4", "38,2"};
    for (int k = 0; k < 17 && k < res->nitems; k++) {
        type_str(&res->items[k], ty, sizeof ty);
        CHECK_EQ_STR(ty, want[k]);
    }
    /* past 38 digits the scale gives way, not below 6 */
    rc = xl("SELECT CAST(1 AS decimal(38,10)) * CAST(1 AS decimal(38,10))", out, sizeof out, res, &err);
    CHECK_EQ_INT(rc, MCDC_OK);
    type_str(&res->items[0], ty, sizeof ty);
    CHECK_EQ_STR(ty, "38,6");
    /* strings and dates are no arithmetic */
    CHECK_EQ_INT(xl("SELECT v + N'x' FROM t", out, sizeof out, res, &err), MCDC_OK);
    CHECK(!res->items[0].known || res->items[0].type.id != SIM_T_DECIMAL);
    /* decimal values compare through the collation; SUM/AVG are exact */
    rc = xl("SELECT SUM(dec), AVG(dec) FROM t WHERE dec < CAST('9.5' AS decimal(10,2))", out, sizeof out, res, &err);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_STR(out, "SELECT sim_sum(\"dec\"), sim_avg(\"dec\") FROM \"dbo.t\" AS \"t\" WHERE \"dec\" <"
                      " (CAST(sim_convert('9.5', 'decimal(10,2)', NULL) AS TEXT) COLLATE sim_decimal)");
    /* % and / as T-SQL's (sim_mod, sim_div); after * in one chain SQLite's operator stays */
    rc = xl("SELECT id % 2, dec / -4, id * 3 % 4, id % 4 * 3, id / 2 / 2, (dec + 1) % id FROM t", out, sizeof out, res, &err);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_STR(out, "SELECT sim_mod(\"id\" , 2), sim_div(\"dec\" , - 4), \"id\" * 3 % 4, sim_mod(\"id\" , 4) * 3,"
                      " sim_div(sim_div(\"id\" , 2) , 2), sim_mod((\"dec\" + 1) , \"id\") FROM \"dbo.t\" AS \"t\"");
    /* CASE: the type of its branches (a commit time's CAST, the higher numeric) */
    rc = xl("SELECT CASE WHEN id > 1 THEN CAST(x AS datetime2(3)) ELSE CAST(y AS datetime2(3)) END,"
            " CASE id WHEN 1 THEN 2 ELSE 2.5 END, CASE WHEN id > 0 THEN CASE WHEN id > 1 THEN N'a' END END, CASE WHEN 1 = 1 THEN NULL END"
            " FROM t", out, sizeof out, res, &err);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_INT(res->nitems, 4);
    CHECK(res->items[0].known && res->items[0].nullable);
    CHECK_EQ_INT(res->items[0].type.id, SIM_T_DATETIME2);
    CHECK_EQ_INT(res->items[0].type.scale, 3);
    type_str(&res->items[1], ty, sizeof ty);
    CHECK_EQ_STR(ty, "2,1");
    CHECK_EQ_INT(res->items[2].type.id, SIM_T_NVARCHAR);
    CHECK(!res->items[3].known);
    CHECK_EQ_INT(xl("SELECT 1 WHERE 12345678901234567890.5 > 9", out, sizeof out, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT 1 WHERE (CAST(sim_convert('12345678901234567890.5', 'decimal(21,1)', NULL) AS TEXT)"
                      " COLLATE sim_decimal) > 9");
    mcdc_free(res);
}

/* Column alias lists of derived tables: "(VALUES ...) v(a, b)", "(SELECT ...) x(c)". */
TEST(tsql_xlate_column_alias_lists) {
    size_t cap = 4096;
    char *out = mcdc_malloc(cap); /* on the heap: CHECK_EQ_STR's message buffer is smaller */
    xl_result *res = mcdc_malloc(sizeof *res);
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(xl("SELECT v.a, v.b FROM (VALUES (1, 'x'), (2, 'y')) v(a, b)", out, cap, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT \"v\".\"a\", \"v\".\"b\" FROM (SELECT \"column1\" AS \"a\", \"column2\" AS \"b\" FROM"
                      " (VALUES (1, 'x'), (2, 'y')) AS \"__v\") AS \"v\"");
    CHECK_EQ_INT(res->nitems, 2);
    CHECK_EQ_STR(res->items[1].name, "b");
    /* a SELECT body: its items take the names (an alias they had gives way) */
    CHECK_EQ_INT(xl("SELECT MIN(x.v) FROM (SELECT id AS q, 2 FROM t) AS x([v], w)", out, cap, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT min(\"x\".\"v\") FROM (SELECT \"id\" AS \"v\", 2 AS \"w\" FROM \"dbo.t\" AS \"t\") AS \"x\"");
    /* a * in the body: the names come from a first SELECT that returns nothing */
    CHECK_EQ_INT(xl("SELECT p FROM (SELECT * FROM t) x(p, q)", out, cap, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT \"p\" FROM (SELECT NULL AS \"p\", NULL AS \"q\" WHERE 1 = 0 UNION ALL SELECT * FROM"
                      " (SELECT * FROM \"dbo.t\" AS \"t\") AS \"__b\") AS \"x\"");
    /* nested: the inner list first */
    CHECK_EQ_INT(xl("SELECT o.z FROM (SELECT MIN(i.v) FROM (VALUES (3), (1)) i(v)) o(z)", out, cap, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT \"o\".\"z\" FROM (SELECT min(\"i\".\"v\") AS \"z\" FROM (SELECT \"column1\" AS \"v\" FROM"
                      " (VALUES (3), (1)) AS \"__v\") AS \"i\") AS \"o\"");
    /* the wrong number of names: SQL Server's errors */
    CHECK(xl("SELECT 1 FROM (VALUES (1, 2)) v(a)", out, cap, res, &err) != MCDC_OK);
    CHECK_EQ_INT(err.server_number, 8158);
    CHECK(strstr(err.message, "'v' has more columns") != NULL);
    CHECK(xl("SELECT 1 FROM (SELECT id FROM t) v(a, b)", out, cap, res, &err) != MCDC_OK);
    CHECK_EQ_INT(err.server_number, 8159);
    /* a function call after a subquery in a select list is no alias list */
    CHECK_EQ_INT(xl("SELECT (SELECT 1) AS a, ABS(-1)", out, cap, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT (SELECT 1) AS \"a\", abs(- 1)");
    mcdc_free(res);
    mcdc_free(out);
}

/* CROSS/OUTER APPLY: the two shapes it rewrites, and what it refuses. */
TEST(tsql_xlate_apply) {
    size_t cap = 4096;
    char *out = mcdc_malloc(cap);
    xl_result *res = mcdc_malloc(sizeof *res);
    mcdc_error err = MCDC_ERROR_INIT;
    /* the shapes it rewrites: each translation whole */
    static const struct { const char *why, *sql, *want; } OK[] = {
        {"left side of one row without FROM: its expression moves into the applied query",
         "SELECT d.id, d.prev FROM (SELECT m.k + 1 AS lo) b CROSS APPLY (SELECT id, LAG(id) OVER (ORDER BY id)"
         " AS prev FROM t WHERE id > b.lo) d WHERE d.prev IS NOT NULL",
         "SELECT \"d\".\"id\", \"d\".\"prev\" FROM (SELECT \"m\".\"k\" + 1 AS \"lo\") \"b\" CROSS JOIN"
         " (SELECT \"id\", lag(\"id\") OVER (ORDER BY \"id\") AS \"prev\" FROM \"dbo.t\" AS \"t\" WHERE"
         " \"id\" > (\"m\".\"k\" + 1)) AS \"d\" WHERE \"d\".\"prev\" IS NOT NULL"},
        {"an aggregate without GROUP BY: a scalar subquery of the same value; OUTER: LEFT JOIN ... ON 1 = 1",
         "SELECT d.id FROM (SELECT MAX(id) AS hi FROM t HAVING MAX(id) > 0) r OUTER APPLY (SELECT id FROM t"
         " WHERE id < r.hi) d",
         "SELECT \"d\".\"id\" FROM (SELECT max(\"id\") AS \"hi\" FROM \"dbo.t\" AS \"t\" HAVING max(\"id\") > 0)"
         " \"r\" LEFT JOIN (SELECT \"id\" FROM \"dbo.t\" AS \"t\" WHERE \"id\" < (SELECT max(\"id\") FROM"
         " \"dbo.t\" AS \"t\" HAVING max(\"id\") > 0)) AS \"d\" ON 1 = 1"},
        {"nested APPLY in an applied query: the inner one first",
         "SELECT x.id FROM (SELECT MIN(id) AS t0 FROM t) r CROSS APPLY (SELECT d.id FROM (SELECT r.t0 AS lo) b"
         " CROSS APPLY (SELECT id FROM t WHERE id >= b.lo) d) x",
         "SELECT \"x\".\"id\" FROM (SELECT min(\"id\") AS \"t0\" FROM \"dbo.t\" AS \"t\") \"r\" CROSS JOIN"
         " (SELECT \"d\".\"id\" FROM (SELECT (SELECT min(\"id\") FROM \"dbo.t\" AS \"t\") AS \"lo\") \"b\""
         " CROSS JOIN (SELECT \"id\" FROM \"dbo.t\" AS \"t\" WHERE \"id\" >= ((SELECT min(\"id\") FROM"
         " \"dbo.t\" AS \"t\"))) AS \"d\") AS \"x\""},
        {"right side of at most one row: a scalar subquery per column, EXISTS for CROSS",
         "SELECT t.id, d.v FROM t CROSS APPLY (SELECT TOP (1) u.v FROM u WHERE u.id > t.id ORDER BY u.id) d"
         " WHERE t.id > 1 ORDER BY t.id",
         "SELECT \"t\".\"id\", (SELECT \"u\".\"v\" FROM \"dbo.u\" AS \"u\" WHERE \"u\".\"id\" > \"t\".\"id\""
         " ORDER BY \"u\".\"id\" LIMIT 1) AS \"v\" FROM \"dbo.t\" AS \"t\" WHERE EXISTS (SELECT \"u\".\"v\""
         " FROM \"dbo.u\" AS \"u\" WHERE \"u\".\"id\" > \"t\".\"id\" ORDER BY \"u\".\"id\" LIMIT 1) AND"
         " (\"t\".\"id\" > 1) ORDER BY \"t\".\"id\""},
    };
    int rc = MCDC_OK;
    for (size_t k = 0; k < sizeof OK / sizeof OK[0]; k++) {
        rc = xl(OK[k].sql, out, cap, res, &err);
        CHECK_EQ_INT(rc, MCDC_OK);
        if (strcmp(out, OK[k].want) != 0) fprintf(stderr, "  case: %s\n", OK[k].why);
        CHECK_EQ_STR(out, OK[k].want);
    }
    CHECK_EQ_STR(res->items[1].name, "v");
    rc = xl("SELECT t.id, d.n FROM t OUTER APPLY (SELECT COUNT(*) AS n FROM u WHERE u.id = t.id) AS d", out, cap,
            res, &err);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_STR(out, "SELECT \"t\".\"id\", (SELECT count(*) FROM \"dbo.u\" AS \"u\" WHERE \"u\".\"id\" = \"t\".\"id\")"
                      " AS \"n\" FROM \"dbo.t\" AS \"t\"");
    /* refused: many rows on both sides, table-valued functions, names that could bind elsewhere */
    CHECK(xl("SELECT d.v FROM t CROSS APPLY (SELECT u.v FROM u WHERE u.id = t.id) d", out, cap, res, &err) != MCDC_OK);
    CHECK_EQ_INT(err.server_number, 50000);
    CHECK(strstr(err.message, "CROSS APPLY") != NULL && strstr(err.message, "rewrite other shapes as joins") != NULL);
    CHECK(xl("SELECT 1 FROM t OUTER APPLY cdc.fn_cdc_get_all_changes_x(1, 2, 'all') d", out, cap, res, &err) != MCDC_OK);
    CHECK(strstr(err.message, "OUTER APPLY: its right side must be a derived table") != NULL);
    CHECK(xl("SELECT d.id FROM (SELECT k AS lo) b CROSS APPLY (SELECT id FROM t WHERE id > b.lo) d", out, cap, res,
             &err) != MCDC_OK);
    CHECK(strstr(err.message, "unqualified column 'k'") != NULL);
    CHECK(xl("SELECT v FROM t CROSS APPLY (SELECT TOP 1 u.v FROM u) d", out, cap, res, &err) != MCDC_OK);
    CHECK(strstr(err.message, "name its column 'v' as d.v") != NULL);
    CHECK(xl("SELECT * FROM t CROSS APPLY (SELECT TOP 1 u.v FROM u) d", out, cap, res, &err) != MCDC_OK);
    CHECK(strstr(err.message, "instead of *") != NULL);
    CHECK(xl("SELECT d.nope FROM t CROSS APPLY (SELECT TOP 1 u.v FROM u) d", out, cap, res, &err) != MCDC_OK);
    CHECK_EQ_INT(err.server_number, 207);
    CHECK(xl("SELECT 1 FROM t CROSS APPLY (SELECT TOP 1 u.v FROM u)", out, cap, res, &err) != MCDC_OK);
    CHECK_EQ_INT(err.server_number, 102);
    /* TOP 2 / WITH TIES is more than one row */
    CHECK(xl("SELECT d.v FROM t CROSS APPLY (SELECT TOP (2) u.v FROM u) d", out, cap, res, &err) != MCDC_OK);
    CHECK(xl("SELECT d.v FROM t CROSS APPLY (SELECT TOP (1) WITH TIES u.v FROM u ORDER BY u.v) d", out, cap, res,
             &err) != MCDC_OK);
    mcdc_free(res);
    mcdc_free(out);
}
