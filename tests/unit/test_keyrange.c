/* Snapshot key columns and their range predicate (mcdc_keyrange.h): declared
 * types from a whitelist, bounds checked against them, the UNION ALL pieces
 * of [lo, hi) for one, two and three columns (shared leading values, open
 * ends, NULL bounds), the parameters in order, bounds read back from rows;
 * and the CDC client's key queries (mcdc_cdc_key_*) sent as SQL Server
 * reads them. */
#include <stdlib.h>
#include <string.h>

#include "mcdc_cdc_client.h"
#include "mcdc_keyrange.h"
#include "mcdc_test.h"
#include "test_driver_fake.h"

static mcdc_captured_column cap(const char *type, int len, int prec, int scale, int dtp) {
    mcdc_captured_column c;
    memset(&c, 0, sizeof c);
    c.name = (char *)"x";
    c.data_type = (char *)type;
    c.max_length = len;
    c.precision = prec;
    c.scale = scale;
    c.datetime_precision = dtp;
    return c;
}

/* A key column; CHECKs that it is accepted. */
static mcdc_key_col key(const char *name, const char *type, int len, int prec, int scale, int dtp,
                        const char *collation, bool last) {
    mcdc_key_col k;
    mcdc_captured_column c = cap(type, len, prec, scale, dtp);
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_key_col_init(&k, name, &c, collation, last, &e);
    if (rc) fprintf(stderr, "  %s\n", e.message);
    CHECK_EQ_INT(rc, MCDC_OK);
    return k;
}

/* The predicate over keys of [lo, hi) (JSON texts, NULL: open) as text,
 * with its parameters joined by '|' into params (NULL: not kept). */
static char *select_sql(const mcdc_key_col *keys, int n, const char *lo, const char *hi,
                        char *params, size_t cap_, int *rc_out) {
    json_error_t je;
    json_t *l = lo ? json_loads(lo, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je) : NULL;
    json_t *h = hi ? json_loads(hi, JSON_DECODE_ANY, &je) : NULL;
    mcdc_buf b = {0};
    mcdc_sql_params p = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_key_select(&b, &p, "SELECT * FROM t", NULL, NULL, keys, n, l, h, &e);
    if (rc_out) *rc_out = rc;
    if (rc == MCDC_OK) mcdc_buf_cstr(&b, NULL);
    char *out = rc == MCDC_OK ? mcdc_strdup((const char *)b.data) : mcdc_strdup(e.message);
    if (params) {
        params[0] = 0;
        for (int i = 0; i < p.n; i++) {
            size_t at = strlen(params);
            snprintf(params + at, cap_ - at, "%s%s", i ? "|" : "", p.v[i]);
        }
    }
    mcdc_sql_params_free(&p);
    mcdc_buf_free(&b);
    json_decref(l);
    json_decref(h);
    return out;
}

static void check_sql(const mcdc_key_col *keys, int n, const char *lo, const char *hi,
                      const char *want_sql, const char *want_params) {
    char params[1024];
    int rc = 0;
    char *s = select_sql(keys, n, lo, hi, params, sizeof params, &rc);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_STR(s, want_sql);
    CHECK_EQ_STR(params, want_params);
    mcdc_free(s);
}

TEST(keyrange_one_integer_column) {
    mcdc_key_col id = key("id", "int", 0, 10, 0, 0, NULL, true);
    CHECK_EQ_STR(id.type, "int");
    CHECK(id.kind == MCDC_KEY_INT);
    check_sql(&id, 1, "5", "10",
              "SELECT * FROM t WHERE [id] >= 5 AND ([id] < 10 OR [id] IS NULL)", "");
    check_sql(&id, 1, NULL, "10", "SELECT * FROM t WHERE ([id] < 10 OR [id] IS NULL)", "");
    check_sql(&id, 1, "-9223372036854775808", "null",
              "SELECT * FROM t WHERE [id] >= -9223372036854775808", "");
    check_sql(&id, 1, NULL, NULL, "SELECT * FROM t", "");
    check_sql(NULL, 0, "null", NULL, "SELECT * FROM t", "");
}

TEST(keyrange_two_columns_of_a_case_insensitive_collation) {
    mcdc_key_col k[2] = {key("region", "nvarchar", 20, 0, 0, 0, NULL, false),
                         key("id", "int", 0, 10, 0, 0, NULL, true)};
    CHECK_EQ_STR(k[0].type, "nvarchar(20)");
    /* (x, y) .. (u, v): a = x AND b >= y (and below hi, row by row), a > x
     * AND a < u, a = u AND b < v (and a > x). */
    check_sql(k, 2, "[\"n\", 5]", "[\"N\", 7]",
              "SELECT * FROM t WHERE [region] = CAST(? AS nvarchar(20)) AND [id] >= 5 AND "
              "(([region] < CAST(? AS nvarchar(20)) OR [region] IS NULL) OR ([region] = "
              "CAST(? AS nvarchar(20)) AND ([id] < 7 OR [id] IS NULL))) UNION ALL "
              "SELECT * FROM t WHERE [region] > CAST(? AS nvarchar(20)) AND ([region] < "
              "CAST(? AS nvarchar(20)) OR [region] IS NULL) UNION ALL "
              "SELECT * FROM t WHERE [region] = CAST(? AS nvarchar(20)) AND ([id] < 7 OR [id] IS "
              "NULL) AND [region] > CAST(? AS nvarchar(20))",
              "n|N|N|n|N|N|n");
    /* Open below: the hi pieces only; open above: the lo pieces only. */
    check_sql(k, 2, NULL, "[\"west\", 7]",
              "SELECT * FROM t WHERE ([region] < CAST(? AS nvarchar(20)) OR [region] IS NULL) "
              "UNION ALL SELECT * FROM t WHERE [region] = CAST(? AS nvarchar(20)) AND ([id] < 7 "
              "OR [id] IS NULL)",
              "west|west");
    check_sql(k, 2, "[\"east\", 5]", NULL,
              "SELECT * FROM t WHERE [region] = CAST(? AS nvarchar(20)) AND [id] >= 5 UNION ALL "
              "SELECT * FROM t WHERE [region] > CAST(? AS nvarchar(20))",
              "east|east");
    /* A shared leading value: one seek inside it. */
    check_sql(k, 2, "[\"east\", 5]", "[\"east\", 9]",
              "SELECT * FROM t WHERE [region] = CAST(? AS nvarchar(20)) AND [id] >= 5 AND ([id] "
              "< 9 OR [id] IS NULL)",
              "east");
}

TEST(keyrange_three_columns_and_shared_prefixes) {
    mcdc_key_col k[3] = {key("a", "int", 0, 10, 0, 0, NULL, false),
                         key("b", "varchar", 10, 0, 0, 0, "Latin1_General_CI_AS", false),
                         key("c", "bigint", 0, 19, 0, 0, NULL, true)};
    CHECK_EQ_STR(k[1].collation, "Latin1_General_CI_AS");
    check_sql(k, 3, "[1, \"p\", 3]", "[4, \"q\", 6]",
              "SELECT * FROM t WHERE [a] = 1 AND [b] = CAST(? COLLATE Latin1_General_CI_AS AS "
              "varchar(10)) AND [c] >= 3 AND (([a] < 4 OR [a] IS NULL) OR ([a] = 4 AND ([b] < "
              "CAST(? COLLATE Latin1_General_CI_AS AS varchar(10)) OR [b] IS NULL)) OR ([a] = 4 "
              "AND [b] = CAST(? COLLATE Latin1_General_CI_AS AS varchar(10)) AND ([c] < 6 OR "
              "[c] IS NULL))) UNION ALL "
              "SELECT * FROM t WHERE [a] = 1 AND [b] > CAST(? COLLATE Latin1_General_CI_AS AS "
              "varchar(10)) AND (([a] < 4 OR [a] IS NULL) OR ([a] = 4 AND ([b] < CAST(? COLLATE "
              "Latin1_General_CI_AS AS varchar(10)) OR [b] IS NULL)) OR ([a] = 4 AND [b] = "
              "CAST(? COLLATE Latin1_General_CI_AS AS varchar(10)) AND ([c] < 6 OR [c] IS "
              "NULL))) UNION ALL "
              "SELECT * FROM t WHERE [a] > 1 AND ([a] < 4 OR [a] IS NULL) UNION ALL "
              "SELECT * FROM t WHERE [a] = 4 AND ([b] < CAST(? COLLATE Latin1_General_CI_AS AS "
              "varchar(10)) OR [b] IS NULL) AND [a] > 1 UNION ALL "
              "SELECT * FROM t WHERE [a] = 4 AND [b] = CAST(? COLLATE Latin1_General_CI_AS AS "
              "varchar(10)) AND ([c] < 6 OR [c] IS NULL) AND [a] > 1",
              "p|q|q|p|q|q|q|q");
    /* The first two shared: equalities, then one range of the last. */
    check_sql(k, 3, "[1, \"p\", 3]", "[1, \"p\", 9]",
              "SELECT * FROM t WHERE [a] = 1 AND [b] = CAST(? COLLATE Latin1_General_CI_AS AS "
              "varchar(10)) AND [c] >= 3 AND ([c] < 9 OR [c] IS NULL)",
              "p");
    /* The first shared: two pieces inside a = 1 and the middle one. */
    char params[256];
    char *s = select_sql(k, 3, "[1, \"p\", 3]", "[1, \"q\", 9]", params, sizeof params, NULL);
    CHECK(strncmp(s, "SELECT * FROM t WHERE [a] = 1 AND [b] = CAST(", 45) == 0);
    int unions = 0;
    for (const char *q = s; (q = strstr(q, "UNION ALL")); q++) unions++;
    CHECK_EQ_INT(unions, 2);
    CHECK(strstr(s, "[a] = 1 AND [b] > CAST(? COLLATE Latin1_General_CI_AS AS varchar(10)) AND "
                    "([b] < CAST(? COLLATE Latin1_General_CI_AS AS varchar(10)) OR [b] IS "
                    "NULL)") != NULL);
    mcdc_free(s);
}

TEST(keyrange_null_bounds_sort_first) {
    mcdc_key_col k[2] = {key("a", "int", 0, 10, 0, 0, NULL, false),
                         key("b", "int", 0, 10, 0, 0, NULL, true)};
    /* NULL: nothing is below it (< is 1 = 0), everything at or above it
     * (>= is 1 = 1), > is IS NOT NULL, = IS NULL. */
    check_sql(k, 2, "[null, 3]", "[2, null]",
              "SELECT * FROM t WHERE [a] IS NULL AND [b] >= 3 AND (([a] < 2 OR [a] IS NULL) OR "
              "([a] = 2 AND 1 = 0)) UNION ALL "
              "SELECT * FROM t WHERE [a] IS NOT NULL AND ([a] < 2 OR [a] IS NULL) UNION ALL "
              "SELECT * FROM t WHERE [a] = 2 AND 1 = 0 AND [a] IS NOT NULL",
              "");
    check_sql(k, 2, "[null, null]", "[null, 5]",
              "SELECT * FROM t WHERE [a] IS NULL AND 1 = 1 AND ([b] < 5 OR [b] IS NULL)", "");
}

TEST(keyrange_binary_datetime_and_other_types) {
    mcdc_key_col b = key("k", "varbinary", 8, 0, 0, 0, NULL, true);
    CHECK(b.kind == MCDC_KEY_HEX);
    check_sql(&b, 1, "\"0x0102\"", "\"0xFF\"",
              "SELECT * FROM t WHERE [k] >= CONVERT(varbinary(8), ?, 1) AND ([k] < "
              "CONVERT(varbinary(8), ?, 1) OR [k] IS NULL)",
              "0x0102|0xFF");
    mcdc_key_col rv = key("rv", "timestamp", 8, 0, 0, 0, NULL, true);
    CHECK_EQ_STR(rv.type, "binary(8)");
    mcdc_key_col t7 = key("at", "datetime2", 0, 0, 0, 7, NULL, true);
    CHECK_EQ_STR(t7.type, "datetime2(7)");
    CHECK(t7.truncated && !t7.millis);
    check_sql(&t7, 1, "\"2025-01-01T10:00:00.123456\"", NULL,
              "SELECT * FROM t WHERE [at] >= CAST(? AS datetime2(7))", "2025-01-01T10:00:00.123456");
    struct {
        const char *type;
        int len, prec, scale, dtp;
        const char *want;
    } ok[] = {
        {"decimal", 0, 18, 2, 0, "decimal(18,2)"},   {"numeric", 0, 38, 38, 0, "numeric(38,38)"},
        {"money", 0, 19, 4, 0, "money"},             {"datetimeoffset", 0, 0, 0, 3, "datetimeoffset(3)"},
        {"datetime", 0, 0, 0, 3, "datetime"},        {"nvarchar", -1, 0, 0, 0, "nvarchar(max)"},
        {"nchar", 4000, 0, 0, 0, "nchar(4000)"},     {"binary", 16, 0, 0, 0, "binary(16)"},
        {"uniqueidentifier", 0, 0, 0, 0, "uniqueidentifier"}, {"sysname", 128, 0, 0, 0, "nvarchar(128)"},
        {"DATE", 0, 0, 0, 0, "date"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        mcdc_key_col k = key("k", ok[i].type, ok[i].len, ok[i].prec, ok[i].scale, ok[i].dtp, NULL,
                             true);
        CHECK_EQ_STR(k.type, ok[i].want);
    }
    CHECK(key("k", "smalldatetime", 0, 0, 0, 0, NULL, true).millis);
}

TEST(keyrange_refuses_types_and_metadata_it_cannot_bind) {
    struct {
        const char *type;
        int len, prec, scale, dtp;
        const char *collation;
        bool last;
        const char *why;
    } bad[] = {
        {"bit", 0, 0, 0, 0, NULL, true, "cannot sort"},
        {"text", 16, 0, 0, 0, "Latin1_General_CI_AS", true, "cannot sort"},
        {"ntext", 16, 0, 0, 0, NULL, true, "cannot sort"},
        {"image", 16, 0, 0, 0, NULL, true, "cannot sort"},
        {"xml", -1, 0, 0, 0, NULL, true, "cannot sort"},
        {"time", 0, 0, 0, 7, NULL, true, "no key bound can be bound"},
        {"sql_variant", 0, 0, 0, 0, NULL, true, "no key bound can be bound"},
        {"geography", 0, 0, 0, 0, NULL, true, "no key bound can be bound"},
        {"int; DROP TABLE t", 0, 0, 0, 0, NULL, true, "no key bound can be bound"},
        {"", 0, 0, 0, 0, NULL, true, "no key bound can be bound"},
        {"datetime2", 0, 0, 0, 7, NULL, false, "only the last key column"},
        {"datetimeoffset", 0, 0, 0, 7, NULL, false, "only the last key column"},
        {"datetime2", 0, 0, 0, 8, NULL, true, "not a valid type"},
        {"decimal", 0, 40, 2, 0, NULL, true, "not a valid type"},
        {"decimal", 0, 5, 6, 0, NULL, true, "not a valid type"},
        {"nvarchar", 5000, 0, 0, 0, NULL, true, "not a valid type"},
        {"char", -1, 0, 0, 0, "Latin1_General_CI_AS", true, "not a valid type"},
        {"varbinary", 0, 0, 0, 0, NULL, true, "not a valid type"},
        {"varchar", 10, 0, 0, 0, NULL, true, "unknown (sys.columns)"},
        {"varchar", 10, 0, 0, 0, "Latin1_General_CI_AS AS int) --", true, "not a collation"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mcdc_captured_column c = cap(bad[i].type, bad[i].len, bad[i].prec, bad[i].scale, bad[i].dtp);
        mcdc_key_col k;
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_key_col_init(&k, "col_x", &c, bad[i].collation, bad[i].last, &e),
                     MCDC_E_INVALID);
        CHECK(strstr(e.message, "col_x") != NULL);
        if (strstr(e.message, bad[i].why) == NULL) {
            fprintf(stderr, "  %s: %s\n", bad[i].type, e.message);
            CHECK(false);
        }
    }
}

TEST(keyrange_checks_bounds_against_the_columns) {
    mcdc_key_col k[2] = {key("d", "date", 0, 0, 0, 0, NULL, false),
                         key("b", "varbinary", 4, 0, 0, 0, NULL, true)};
    mcdc_key_col id = key("id", "int", 0, 10, 0, 0, NULL, true);
    struct {
        const mcdc_key_col *keys;
        int n;
        const char *lo;
        const char *why;
    } bad[] = {
        {&id, 1, "\"5\"", "not a JSON integer"},
        {&id, 1, "5.5", "not a JSON integer"},
        {&id, 1, "[5]", "takes a scalar"},
        {&id, 1, "{\"a\": 1}", "takes a scalar"},
        {k, 2, "[\"2025-01-01\"]", "array of 2"},
        {k, 2, "\"2025-01-01\"", "array of 2"},
        {k, 2, "[\"2025-01-01\", \"0x0\"]", "not 0x and hex"},
        {k, 2, "[\"2025-01-01\", \"zz\"]", "not 0x and hex"},
        {k, 2, "[\"2025-01-01'; --\", null]", "not a value of its type"},
        {k, 2, "[\"\", null]", "not a value of its type"},
        {k, 2, "[7, null]", "not a JSON string"},
        {k, 2, "[\"a\\u0000b\", null]", "NUL"},
        {NULL, 0, "1", "no key columns"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = 0;
        char *s = select_sql(bad[i].keys, bad[i].n, bad[i].lo, NULL, NULL, 0, &rc);
        CHECK_EQ_INT(rc, MCDC_E_INVALID);
        if (strstr(s, bad[i].why) == NULL) {
            fprintf(stderr, "  %s: %s\n", bad[i].lo, s);
            CHECK(false);
        }
        mcdc_free(s);
    }
    /* Too long. */
    char *big = mcdc_malloc(MCDC_KEY_BOUND_BYTES_MAX + 16);
    memset(big, 'a', MCDC_KEY_BOUND_BYTES_MAX + 1);
    big[MCDC_KEY_BOUND_BYTES_MAX + 1] = 0;
    mcdc_key_col s = key("s", "nvarchar", -1, 0, 0, 0, NULL, true);
    json_t *j = json_string(big);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_key_bound_check(j, &s, 1, "lo", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "too long") != NULL);
    json_decref(j);
    mcdc_free(big);
}

TEST(keyrange_bounds_read_back_as_json) {
    mcdc_schema *sc = NULL;
    mcdc_schema_create(&sc, 7, NULL);
    mcdc_schema_set(sc, 0, "i", MCDC_TYPE_INT16, 0, 0, 0, true, NULL);
    mcdc_schema_set(sc, 1, "s", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(sc, 2, "dt", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_schema_set(sc, 3, "d2", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_schema_set(sc, 4, "b", MCDC_TYPE_BINARY, 0, 0, 0, true, NULL);
    mcdc_schema_set(sc, 5, "m", MCDC_TYPE_DECIMAL, 18, 3, 0, true, NULL);
    mcdc_schema_set(sc, 6, "day", MCDC_TYPE_DATE32, 0, 0, 0, true, NULL);
    mcdc_batch *b = NULL;
    CHECK_EQ_INT(mcdc_batch_create(&b, sc, 2, NULL), MCDC_OK);
    int64_t us = 1735725600123456; /* 2025-01-01T10:00:00.123456 */
    mcdc_col_append_int(&b->columns[0], -7, NULL);
    mcdc_col_append_bytes(&b->columns[1], "Nord é", 7, NULL);
    mcdc_col_append_int(&b->columns[2], us, NULL);
    mcdc_col_append_int(&b->columns[3], us, NULL);
    mcdc_col_append_bytes(&b->columns[4], "\x00\xff", 2, NULL);
    mcdc_col_append_decimal(&b->columns[5], (uint64_t)-1250, -1, NULL);
    mcdc_col_append_int(&b->columns[6], 20089, NULL);
    for (int c = 0; c < 7; c++) mcdc_col_append_null(&b->columns[c], NULL);
    CHECK_EQ_INT(mcdc_batch_seal(b, NULL), MCDC_OK);
    mcdc_key_col k[7] = {key("i", "smallint", 0, 5, 0, 0, NULL, false),
                         key("s", "nvarchar", 10, 0, 0, 0, NULL, false),
                         key("dt", "datetime", 0, 0, 0, 3, NULL, false),
                         key("d2", "datetime2", 0, 0, 0, 6, NULL, false),
                         key("b", "varbinary", 10, 0, 0, 0, NULL, false),
                         key("m", "decimal", 0, 18, 3, 0, NULL, false),
                         key("day", "date", 0, 0, 0, 0, NULL, true)};
    json_t *v = NULL;
    CHECK_EQ_INT(mcdc_key_bound_of_row(&v, b, 0, 0, k, 7, NULL), MCDC_OK);
    char *t = json_dumps(v, JSON_COMPACT);
    CHECK_EQ_STR(t, "[-7,\"Nord é\",\"2025-01-01T10:00:00.123\",\"2025-01-01T10:00:00.123456\","
                    "\"0x00FF\",\"-1.250\",\"2025-01-01\"]");
    free(t);
    json_decref(v);
    /* Every part NULL: an array of nulls (not an open end); one column
     * alone: a scalar. */
    CHECK_EQ_INT(mcdc_key_bound_of_row(&v, b, 1, 0, k, 7, NULL), MCDC_OK);
    CHECK(json_is_array(v) && json_array_size(v) == 7 && json_is_null(json_array_get(v, 6)));
    json_decref(v);
    CHECK_EQ_INT(mcdc_key_bound_of_row(&v, b, 0, 5, &k[5], 1, NULL), MCDC_OK);
    CHECK(json_is_string(v) && strcmp(json_string_value(v), "-1.250") == 0);
    json_decref(v);
    /* A column of another kind than its key's. */
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_key_bound_of_row(&v, b, 0, 1, &k[0], 1, &e), MCDC_E_PROTOCOL);
    CHECK(v == NULL && strstr(e.message, "came back as") != NULL);
    mcdc_batch_free(b);
    mcdc_schema_unref(sc);
}

/* ---- the client's key queries --------------------------------------------------- */
typedef struct {
    fake_db *f;
    mcdc_conn *conn;
    mcdc_cdc_client *c;
} fx;

static fx fx_open(void) {
    fx x;
    x.f = fake_new();
    x.conn = fake_connect(x.f);
    mcdc_cdc_client_create(&x.c, x.conn, NULL);
    return x;
}

static void fx_close(fx *x) {
    mcdc_cdc_client_free(x->c);
    mcdc_conn_close(x->conn);
    fake_free(x->f);
}

TEST(keyrange_client_seeks_send_top_union_offset) {
    fx x = fx_open();
    mcdc_key_col k[2] = {key("region", "nvarchar", 20, 0, 0, 0, NULL, false),
                         key("id", "int", 0, 10, 0, 0, NULL, true)};
    mcdc_source_read rd = {true, 5000};
    fake_reply(x.f, "OFFSET", "region:utf8,id:i32", "west|7");
    fake_reply(x.f, "OFFSET", "region:utf8,id:i32", "");
    json_t *lo = json_pack("[si]", "east", 5), *v = NULL;
    CHECK_EQ_INT(mcdc_cdc_key_bound(&v, x.c, "dbo", "c]x", k, 2, lo, NULL, 3, &rd, NULL), MCDC_OK);
    char *t = json_dumps(v, JSON_COMPACT);
    CHECK_EQ_STR(t, "[\"west\",7]");
    free(t);
    json_decref(v);
    CHECK_EQ_STR(fake_sql(x.f, 0),
                 "SET TRANSACTION ISOLATION LEVEL SNAPSHOT; SET LOCK_TIMEOUT 5000; SELECT "
                 "[region], [id] FROM (SELECT * FROM (SELECT TOP (4) [region], [id] FROM "
                 "[dbo].[c]]x] WHERE [region] = CAST(N'east' AS nvarchar(20)) AND [id] >= 5 ORDER "
                 "BY [region], [id]) AS p UNION ALL SELECT * FROM (SELECT TOP (4) [region], [id] "
                 "FROM [dbo].[c]]x] WHERE [region] > CAST(N'east' AS nvarchar(20)) ORDER BY "
                 "[region], [id]) AS p) AS u ORDER BY [region], [id] OFFSET 3 ROWS FETCH NEXT 1 "
                 "ROWS ONLY");
    CHECK_EQ_INT(mcdc_cdc_key_bound(&v, x.c, "dbo", "c", k, 2, NULL, lo, 0, &rd, NULL), MCDC_OK);
    CHECK(v == NULL); /* no row: none */
    json_decref(lo);
    CHECK_EQ_INT(fake_unused_replies(x.f), 0);
    fx_close(&x);
}

TEST(keyrange_client_extent_slices_and_estimate) {
    fx x = fx_open();
    mcdc_key_col id = key("id", "bigint", 0, 19, 0, 0, NULL, true);
    mcdc_key_col k2[2] = {key("d", "date", 0, 0, 0, 0, NULL, false),
                          key("id", "bigint", 0, 19, 0, 0, NULL, true)};
    mcdc_source_read rd = {false, -1};
    fake_reply(x.f, "MIN(", "lo:i64,hi:i64", "-9223372036854775808|42");
    fake_reply(x.f, "MIN(", "lo:i64,hi:i64", "\\N|\\N");
    fake_reply(x.f, "GROUP BY", "b:i64,n:i64", "3|10\n-1|4\n0|2");
    fake_reply(x.f, "sp_spaceused", "name:utf8,rows:utf8", "t|1234                ");
    fake_reply(x.f, "TOP (1)", "d:date,id:i64", "2025-01-02|9");
    json_t *lo = NULL, *hi = NULL;
    CHECK_EQ_INT(mcdc_cdc_key_min_max(&lo, &hi, x.c, "dbo", "t", &id, NULL, NULL, &rd, NULL), MCDC_OK);
    CHECK(json_integer_value(lo) == INT64_MIN && json_integer_value(hi) == 42);
    json_decref(lo);
    json_decref(hi);
    int64_t a = 10, b = 20;
    CHECK_EQ_INT(mcdc_cdc_key_min_max(&lo, &hi, x.c, "dbo", "t", &id, &a, &b, &rd, NULL), MCDC_OK);
    CHECK(lo == NULL && hi == NULL);
    mcdc_key_slice *s = NULL;
    int n = 0;
    CHECK_EQ_INT(mcdc_cdc_key_slices(&s, &n, x.c, "dbo", "t", &id, 16, NULL, &b, &rd, NULL), MCDC_OK);
    CHECK_EQ_INT(n, 3);
    CHECK(s[0].index == -1 && s[0].rows == 4 && s[1].index == 0 && s[2].index == 3 &&
          s[2].rows == 10);
    mcdc_free(s);
    int64_t rows = 0;
    CHECK_EQ_INT(mcdc_cdc_row_estimate(&rows, x.c, "dbo", "t", NULL), MCDC_OK);
    CHECK_EQ_INT(rows, 1234);
    json_t *max = NULL;
    CHECK_EQ_INT(mcdc_cdc_key_max(&max, x.c, "dbo", "t", k2, 2, &rd, NULL), MCDC_OK);
    char *t = json_dumps(max, JSON_COMPACT);
    CHECK_EQ_STR(t, "[\"2025-01-02\",9]");
    free(t);
    json_decref(max);
    CHECK_EQ_STR(fake_sql(x.f, 0),
                 "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; SELECT (SELECT MIN([id]) FROM "
                 "[dbo].[t]) AS lo, (SELECT MAX([id]) FROM [dbo].[t]) AS hi");
    CHECK_EQ_STR(fake_sql(x.f, 1),
                 "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; SELECT (SELECT MIN([id]) FROM "
                 "[dbo].[t] WHERE [id] >= 10 AND [id] < 20) AS lo, (SELECT MAX([id]) FROM "
                 "[dbo].[t] WHERE [id] >= 10 AND [id] < 20) AS hi");
    CHECK_EQ_STR(fake_sql(x.f, 2),
                 "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; SELECT [__$b] AS b, "
                 "COUNT_BIG(*) AS n FROM (SELECT CASE WHEN CAST([id] AS bigint) >= 0 THEN "
                 "CAST([id] AS bigint) / CAST(16 AS bigint) ELSE (CAST([id] AS bigint) + 1) / "
                 "CAST(16 AS bigint) - 1 END AS [__$b] FROM [dbo].[t] WHERE [id] IS NOT NULL AND "
                 "[id] < 20) AS x GROUP BY [__$b]");
    CHECK_EQ_STR(fake_sql(x.f, 3), "EXEC sys.sp_spaceused @objname = N'[dbo].[t]'");
    CHECK_EQ_STR(fake_sql(x.f, 4),
                 "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; SELECT TOP (1) [d], [id] FROM "
                 "[dbo].[t] ORDER BY [d] DESC, [id] DESC");
    CHECK_EQ_INT(fake_unused_replies(x.f), 0);
    fx_close(&x);
}

TEST(keyrange_snapshot_read_sql_takes_the_pieces) {
    mcdc_schema *sc = NULL;
    mcdc_schema_create(&sc, 2, NULL);
    mcdc_schema_set(sc, 0, "region", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(sc, 1, "id", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    const char *names[] = {"region", NULL};
    mcdc_key_col k = key("region", "varchar", 20, 0, 0, 0, "SQL_Latin1_General_CP1_CI_AS", true);
    json_t *lo = json_string("n"), *hi = json_string("s");
    mcdc_snapshot_query q = {.source_schema = "dbo", .source_table = "c", .cols = sc->fields,
                             .n_cols = 2, .source_names = names, .keys = &k, .n_keys = 1,
                             .lo = lo, .hi = hi, .read = {false, 100}};
    mcdc_buf b = {0};
    mcdc_sql_params p = {0};
    CHECK_EQ_INT(mcdc_cdc_snapshot_sql(&b, &p, &q, NULL), MCDC_OK);
    CHECK_EQ_STR((const char *)b.data,
                 "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; SET LOCK_TIMEOUT 100; SELECT "
                 "t.[region] AS [region], CAST(NULL AS int) AS [id] FROM [dbo].[c] AS t WHERE "
                 "[region] >= "
                 "CAST(? COLLATE SQL_Latin1_General_CP1_CI_AS AS varchar(20)) AND ([region] < "
                 "CAST(? COLLATE SQL_Latin1_General_CP1_CI_AS AS varchar(20)) OR [region] IS "
                 "NULL)");
    CHECK(p.n == 2 && strcmp(p.v[0], "n") == 0 && strcmp(p.v[1], "s") == 0);
    mcdc_sql_params_free(&p);
    mcdc_buf_free(&b);
    /* No key: the table, whatever the bounds say is refused. */
    q.n_keys = 0;
    q.keys = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_cdc_snapshot_sql(&b, &p, &q, &e), MCDC_E_INVALID);
    mcdc_buf_free(&b);
    mcdc_sql_params_free(&p);
    q.lo = q.hi = NULL;
    CHECK_EQ_INT(mcdc_cdc_snapshot_sql(&b, &p, &q, NULL), MCDC_OK);
    CHECK(strstr((const char *)b.data, " WHERE ") == NULL && p.n == 0);
    mcdc_buf_free(&b);
    mcdc_sql_params_free(&p);
    /* A column read through an expression: by its name in the table now,
     * AS the stream's name. */
    const char *renamed[] = {"Region", "id"};
    const uint8_t reads[] = {MCDC_READ_HIERARCHYID, MCDC_READ_VALUE};
    q.source_names = renamed;
    q.reads = reads;
    CHECK_EQ_INT(mcdc_cdc_snapshot_sql(&b, &p, &q, NULL), MCDC_OK);
    CHECK(strstr((const char *)b.data, "SELECT CAST(t.[Region] AS nvarchar(4000)) AS "
                                       "[region], t.[id] AS [id] FROM [dbo].[c] AS t") != NULL);
    mcdc_buf_free(&b);
    mcdc_sql_params_free(&p);
    /* No captured column: refused (the stamp is filled by the reader, so
     * the query would select nothing). */
    q.n_cols = 0;
    CHECK_EQ_INT(mcdc_cdc_snapshot_sql(&b, &p, &q, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "no captured column") != NULL);
    mcdc_buf_free(&b);
    mcdc_sql_params_free(&p);
    json_decref(lo);
    json_decref(hi);
    mcdc_schema_unref(sc);
}
