/* test_tsql_xlate.c - the T-SQL lexer and the translator to SQLite SQL. */
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
    CHECK_EQ_INT(xl("SELECT 1 WHERE 12345678901234567890.5 > 9", out, sizeof out, res, &err), MCDC_OK);
    CHECK_EQ_STR(out, "SELECT 1 WHERE (CAST(sim_convert('12345678901234567890.5', 'decimal(21,1)', NULL) AS TEXT)"
                      " COLLATE sim_decimal) > 9");
    mcdc_free(res);
}
