#include <stdlib.h>

#include "mcdc_cdc_client.h"
#include "mcdc_changes.h" /* mcdc_probe_item */
#include "mcdc_test.h"
#include "mcdc_options.h"
#include "test_driver_fake.h"

#define L1 "0x0000002A000001F00003"
#define L2 "0x0000002A000002000001"

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

TEST(cdc_lsn_queries_send_the_reference_tsql) {
    fx x = fx_open();
    fake_reply(x.f, "get_max_lsn", "v:utf8", L2);
    fake_reply(x.f, "get_max_lsn", "v:utf8", "\\N");
    fake_reply(x.f, "get_min_lsn", "v:utf8", L1);
    fake_reply(x.f, "increment", "v:utf8", "0x0000002A000001F00004");
    fake_reply(x.f, "decrement", "v:utf8", "0x0000002A000001F00002");
    fake_reply(x.f, "TOP (5)", "v:utf8", L2);
    mcdc_lsn l, in;
    bool was_null = true;
    char t[MCDC_LSN_TEXT_LEN + 1];
    CHECK_EQ_INT(mcdc_cdc_max_lsn(&l, &was_null, x.c, NULL), MCDC_OK);
    mcdc_lsn_format(&l, t);
    CHECK_EQ_STR(t, L2);
    CHECK(!was_null);
    CHECK_EQ_INT(mcdc_cdc_max_lsn(&l, &was_null, x.c, NULL), MCDC_OK);
    CHECK(was_null && mcdc_lsn_is_zero(&l));
    CHECK_EQ_INT(mcdc_cdc_min_lsn(&l, x.c, "dbo_orders", NULL), MCDC_OK);
    mcdc_lsn_parse_cstr(&in, L1, NULL);
    CHECK_EQ_INT(mcdc_cdc_increment_lsn(&l, x.c, &in, NULL), MCDC_OK);
    mcdc_lsn_format(&l, t);
    CHECK_EQ_STR(t, "0x0000002A000001F00004");
    CHECK_EQ_INT(mcdc_cdc_decrement_lsn(&l, x.c, &in, NULL), MCDC_OK);
    bool found = false;
    CHECK_EQ_INT(mcdc_cdc_nth_commit_after(&l, &found, x.c, &in, 5, NULL), MCDC_OK);
    CHECK(found);
    CHECK_EQ_STR(fake_sql(x.f, 0), "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)");
    CHECK_EQ_STR(fake_sql(x.f, 2),
                 "SELECT CONVERT(varchar(22), sys.fn_cdc_get_min_lsn(N'dbo_orders'), 1)");
    CHECK_EQ_STR(fake_sql(x.f, 3), "SELECT CONVERT(varchar(22), "
                                   "sys.fn_cdc_increment_lsn(CONVERT(binary(10), "
                                   "N'" L1 "', 1)), 1)");
    CHECK_EQ_STR(fake_sql(x.f, 4), "SELECT CONVERT(varchar(22), "
                                   "sys.fn_cdc_decrement_lsn(CONVERT(binary(10), "
                                   "N'" L1 "', 1)), 1)");
    CHECK_EQ_STR(fake_sql(x.f, 5),
                 "SELECT CONVERT(varchar(22), MAX(t.start_lsn), 1) FROM (SELECT TOP (5) "
                 "m.start_lsn FROM cdc.lsn_time_mapping AS m WHERE m.start_lsn > "
                 "CONVERT(binary(10), N'" L1 "', 1) ORDER BY m.start_lsn) AS t");
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_cdc_nth_commit_after(&l, &found, x.c, &in, 0, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(fake_unused_replies(x.f), 0);
    fx_close(&x);
}

TEST(cdc_lsn_to_time_converts_to_utc_per_clock) {
    fx x = fx_open();
    fake_reply(x.f, NULL, "t:utf8", "2025-03-01T10:00:00"); /* style 126 drops .000 */
    fake_reply(x.f, NULL, "t:utf8", "\\N");
    fake_reply(x.f, NULL, "t:utf8", "2025-03-01T10:00:00.123");
    mcdc_lsn l;
    mcdc_lsn_parse_cstr(&l, L1, NULL);
    int64_t us = 0;
    bool found = false;
    CHECK_EQ_INT(mcdc_cdc_lsn_to_time(&us, &found, x.c, &l, false, NULL), MCDC_OK);
    CHECK(found);
    char out[32];
    mcdc_format_ts_us(us, 3, out);
    CHECK_EQ_STR(out, "2025-03-01T10:00:00.000");
    CHECK_EQ_STR(fake_sql(x.f, 0),
                 "SELECT TOP (1) CONVERT(varchar(23), CAST(m.tran_end_time AS datetime2(3)), "
                 "126) FROM cdc.lsn_time_mapping AS m WHERE m.start_lsn = CONVERT(binary(10), "
                 "N'" L1 "', 1)");
    mcdc_clock clk;
    CHECK_EQ_INT(mcdc_clock_from_name(&clk, "E. South America Standard Time", NULL), MCDC_OK);
    mcdc_cdc_set_clock(x.c, &clk);
    CHECK_EQ_INT(mcdc_cdc_lsn_to_time(&us, &found, x.c, &l, true, NULL), MCDC_OK);
    CHECK(!found);
    /* a named zone: the commit's LSN orders it in a fall-back's repeated
     * hour, as bronze's _commit_ts (one conversion for both) */
    const char *zoned = fake_sql(x.f, 1);
    static const char head[] = "SELECT TOP (1) CONVERT(varchar(23), CAST(CASE WHEN (EXISTS "
                               "(SELECT 1 FROM (SELECT CASE WHEN DATEPART(TZOFFSET, DATEADD(hour, "
                               "3, m.tran_end_time) AT TIME ZONE N'E. South America Standard "
                               "Time') < ";
    CHECK(strncmp(zoned, head, sizeof head - 1) == 0);
    CHECK(strstr(zoned, "LAG(x.tran_end_time) OVER (ORDER BY x.start_lsn) AS prev FROM "
                        "cdc.lsn_time_mapping AS x WHERE x.start_lsn > w.lo AND x.start_lsn <= "
                        "m.start_lsn) AS d WHERE d.dt < DATEADD(minute, -1, d.prev)") != NULL);
    CHECK(strstr(zoned, " THEN CAST(DATEADD(minute, -DATEPART(TZOFFSET, DATEADD(hour, 3, "
                        "m.tran_end_time) AT TIME ZONE N'E. South America Standard Time'), "
                        "m.tran_end_time) AS datetime2(3)) ELSE CAST(m.tran_end_time AT TIME ZONE "
                        "N'E. South America Standard Time' AT TIME ZONE 'UTC' AS datetime2(3)) "
                        "END AS datetime2(3)), 126) FROM cdc.lsn_time_mapping AS m WHERE "
                        "m.start_lsn <= CONVERT(binary(10), N'" L1 "', 1) ORDER BY m.start_lsn "
                        "DESC") != NULL);
    clk.kind = MCDC_CLOCK_FIXED;
    clk.offset_minutes = -180;
    mcdc_cdc_set_clock(x.c, &clk);
    CHECK_EQ_INT(mcdc_cdc_lsn_to_time(&us, &found, x.c, &l, false, NULL), MCDC_OK);
    CHECK(strstr(fake_sql(x.f, 2), "CAST(DATEADD(minute, 180, m.tran_end_time) AS datetime2(3))") !=
          NULL);
    char d[MCDC_ZONE_NAME_MAX + 16];
    mcdc_clock_describe(d, &clk);
    CHECK_EQ_STR(d, "UTC-03:00");
    fx_close(&x);
}

/* The client checks every name it puts in T-SQL with the options module's
 * one check (mcdc_validate_capture_instance). */
TEST(cdc_capture_instance_names_are_validated) {
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_validate_capture_instance("dbo_orders", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_validate_capture_instance("dbo_Überstunden_ü", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_validate_capture_instance("a]b", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "']'") != NULL);
    CHECK_EQ_INT(mcdc_validate_capture_instance("a\nb", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_validate_capture_instance("", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_validate_capture_instance(NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "empty") != NULL);
    char longname[202];
    memset(longname, 'x', 101);
    longname[101] = 0;
    CHECK_EQ_INT(mcdc_validate_capture_instance(longname, &e), MCDC_E_INVALID);
    longname[100] = 0;
    CHECK_EQ_INT(mcdc_validate_capture_instance(longname, &e), MCDC_OK);
    /* 100 two-byte characters are 100 characters */
    char wide[202];
    for (int i = 0; i < 100; i++) {
        wide[2 * i] = (char)0xC3;
        wide[2 * i + 1] = (char)0xBC;
    }
    wide[200] = 0;
    CHECK_EQ_INT(mcdc_validate_capture_instance(wide, &e), MCDC_OK);
    /* never inlined when invalid */
    fx x = fx_open();
    mcdc_split_point *sp = NULL;
    int n = 0;
    mcdc_lsn z = mcdc_lsn_zero();
    CHECK_EQ_INT(mcdc_cdc_split_points(&sp, &n, x.c, "x]; DROP TABLE t; --", &z, &z, 2, &e),
                 MCDC_E_INVALID);
    CHECK_EQ_INT(fake_exec_count(x.f), 0);
    fx_close(&x);
}

TEST(cdc_split_points_sql_and_commit_folding) {
    fx x = fx_open();
    fake_reply(x.f, "NTILE(3)", "bound:utf8,next_start:utf8,row_count:i64",
               "0x00000000000000000010|0x00000000000000000011|100\n"
               "0x00000000000000000010|0x00000000000000000011|40\n"
               "0x00000000000000000030|0x00000000000000000031|60");
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x1", NULL);
    mcdc_lsn_parse_cstr(&to, "0x30", NULL);
    mcdc_split_point *sp = NULL;
    int n = 0;
    CHECK_EQ_INT(mcdc_cdc_split_points(&sp, &n, x.c, "dbo_orders", &from, &to, 3, NULL), MCDC_OK);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_EQ_INT(sp[0].rows, 140);
        CHECK_EQ_INT(sp[1].rows, 60);
        char t[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&sp[1].next_start, t);
        CHECK_EQ_STR(t, "0x00000000000000000031");
    }
    mcdc_free(sp);
    CHECK_EQ_STR(fake_sql(x.f, 0),
                 "SELECT CONVERT(varchar(22), MAX(t.lsn), 1) AS bound, CONVERT(varchar(22), "
                 "sys.fn_cdc_increment_lsn(MAX(t.lsn)), 1) AS next_start, COUNT_BIG(*) AS "
                 "row_count FROM (SELECT c.__$start_lsn AS lsn, NTILE(3) OVER (ORDER BY "
                 "c.__$start_lsn) AS tile FROM cdc.[dbo_orders_CT] AS c WHERE c.__$start_lsn "
                 "BETWEEN CONVERT(binary(10), N'0x00000000000000000001', 1) AND "
                 "CONVERT(binary(10), N'0x00000000000000000030', 1)) AS t GROUP BY t.tile ORDER "
                 "BY t.tile");
    fx_close(&x);
}

static mcdc_captured_column col(const char *name, const char *type, int p, int s) {
    mcdc_captured_column c;
    memset(&c, 0, sizeof c);
    c.name = (char *)name;
    c.data_type = (char *)type;
    c.precision = p;
    c.scale = s;
    return c;
}

TEST(cdc_type_mapping_follows_the_reference) {
    static const struct {
        const char *sql;
        int p, s;
        mcdc_type_id want;
        int wp, ws;
    } cases[] = {
        {"bit", 0, 0, MCDC_TYPE_BOOL, 0, 0},
        {"tinyint", 0, 0, MCDC_TYPE_INT16, 0, 0},
        {"smallint", 0, 0, MCDC_TYPE_INT16, 0, 0},
        {"int", 0, 0, MCDC_TYPE_INT32, 0, 0},
        {"bigint", 0, 0, MCDC_TYPE_INT64, 0, 0},
        {"real", 0, 0, MCDC_TYPE_FLOAT, 0, 0},
        {"float", 0, 0, MCDC_TYPE_DOUBLE, 0, 0},
        {"decimal", 18, 4, MCDC_TYPE_DECIMAL, 18, 4},
        {"numeric", 38, 0, MCDC_TYPE_DECIMAL, 38, 0},
        {"money", 19, 4, MCDC_TYPE_DECIMAL, 19, 4},
        {"smallmoney", 10, 4, MCDC_TYPE_DECIMAL, 10, 4},
        {"date", 0, 0, MCDC_TYPE_DATE32, 0, 0},
        {"datetime", 0, 0, MCDC_TYPE_TIMESTAMP_NTZ, 0, 0},
        {"datetime2", 0, 0, MCDC_TYPE_TIMESTAMP_NTZ, 0, 0},
        {"smalldatetime", 0, 0, MCDC_TYPE_TIMESTAMP_NTZ, 0, 0},
        {"datetimeoffset", 0, 0, MCDC_TYPE_TIMESTAMP_UTC, 0, 0},
        {"time", 0, 0, MCDC_TYPE_UTF8, 0, 0},
        {"nvarchar", 0, 0, MCDC_TYPE_UTF8, 0, 0},
        {"CHAR", 0, 0, MCDC_TYPE_UTF8, 0, 0},
        {"uniqueidentifier", 0, 0, MCDC_TYPE_UTF8, 0, 0},
        {"xml", 0, 0, MCDC_TYPE_UTF8, 0, 0},
        {"text", 0, 0, MCDC_TYPE_UTF8, 0, 0},
        {"varbinary", 0, 0, MCDC_TYPE_BINARY, 0, 0},
        {"image", 0, 0, MCDC_TYPE_BINARY, 0, 0},
        {"timestamp", 0, 0, MCDC_TYPE_BINARY, 0, 0},
        /* the types the reference refuses, read through their expressions */
        {"hierarchyid", 0, 0, MCDC_TYPE_UTF8, 0, 0},
        {"sql_variant", 0, 0, MCDC_TYPE_UTF8, 0, 0},
        {"geography", 0, 0, MCDC_TYPE_BINARY, 0, 0},
        {"GEOMETRY", 0, 0, MCDC_TYPE_BINARY, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcdc_captured_column c = col("c", cases[i].sql, cases[i].p, cases[i].s);
        mcdc_type_id t = 0;
        int32_t p = -1, s = -1;
        CHECK_EQ_INT(mcdc_cdc_map_type(&t, &p, &s, &c, NULL), MCDC_OK);
        if (t != cases[i].want || p != cases[i].wp || s != cases[i].ws) {
            fprintf(stderr, "  %s -> %d(%d,%d)\n", cases[i].sql, (int)t, p, s);
            CHECK(0);
        }
    }
    /* a CLR type of the user's: no default */
    mcdc_captured_column c = col("shape", "MyClrType", 0, 0);
    mcdc_type_id t;
    int32_t p, s;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_cdc_map_type(&t, &p, &s, &c, &e), MCDC_E_UNSUPPORTED);
    CHECK(strstr(e.message, "no default type") != NULL);
    CHECK(strstr(e.message, "pass columns") != NULL);
    CHECK(strstr(e.message, "'shape'") != NULL);
    /* how each is selected, and the type that read gives */
    static const struct {
        const char *sql;
        mcdc_sql_read read;
        mcdc_type_id type;
    } reads[] = {
        {"int", MCDC_READ_VALUE, 0},
        {"xml", MCDC_READ_VALUE, 0},
        {"hierarchyid", MCDC_READ_HIERARCHYID, MCDC_TYPE_UTF8},
        {"sql_variant", MCDC_READ_VARIANT, MCDC_TYPE_UTF8},
        {"geography", MCDC_READ_SPATIAL, MCDC_TYPE_BINARY},
        {"geometry", MCDC_READ_SPATIAL, MCDC_TYPE_BINARY},
    };
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        const mcdc_sql_type *st = mcdc_sql_type_named(reads[i].sql);
        CHECK(st != NULL && st->has_default && st->read == reads[i].read);
        CHECK_EQ_INT((int)mcdc_cdc_read_type((uint8_t)reads[i].read), (int)reads[i].type);
        if (st && st->read != MCDC_READ_VALUE) CHECK(st->type == reads[i].type);
    }
    CHECK(!mcdc_sql_type_named("clr type")->has_default);
}

TEST(cdc_column_reads_are_pinned) {
    /* the expression of each read, for a name that needs quoting */
    static const struct {
        mcdc_sql_read read;
        const char *want;
    } cases[] = {
        {MCDC_READ_VALUE, "c.[a]]b]"},
        {MCDC_READ_HIERARCHYID, "CAST(c.[a]]b] AS nvarchar(4000))"},
        {MCDC_READ_SPATIAL,
         "CASE WHEN c.[a]]b] IS NULL THEN NULL ELSE CONVERT(varbinary(max), CONVERT(varchar(max), "
         "CAST(c.[a]]b].STSrid AS binary(4)), 2) + CONVERT(varchar(max), c.[a]]b].AsBinaryZM(), "
         "2), 2) END"},
        {MCDC_READ_VARIANT,
         "CASE WHEN c.[a]]b] IS NULL THEN NULL ELSE CAST(SQL_VARIANT_PROPERTY(c.[a]]b], "
         "'BaseType') AS nvarchar(128)) + N':' + CASE "
         "CAST(SQL_VARIANT_PROPERTY(c.[a]]b], 'BaseType') AS nvarchar(128)) WHEN N'float' THEN "
         "CONVERT(nvarchar(max), CAST(c.[a]]b] AS float), 3) WHEN N'real' THEN "
         "CONVERT(nvarchar(max), CAST(c.[a]]b] AS real), 3) WHEN N'money' THEN "
         "CONVERT(nvarchar(max), CAST(c.[a]]b] AS money), 2) WHEN N'smallmoney' THEN "
         "CONVERT(nvarchar(max), CAST(c.[a]]b] AS smallmoney), 2) WHEN N'datetime' THEN "
         "CONVERT(nvarchar(max), CAST(c.[a]]b] AS datetime), 121) WHEN N'smalldatetime' THEN "
         "CONVERT(nvarchar(max), CAST(c.[a]]b] AS smalldatetime), 120) WHEN N'binary' THEN "
         "CONVERT(nvarchar(max), CAST(c.[a]]b] AS varbinary(8000)), 1) WHEN N'varbinary' THEN "
         "CONVERT(nvarchar(max), CAST(c.[a]]b] AS varbinary(8000)), 1) ELSE CAST(c.[a]]b] AS "
         "nvarchar(max)) END END"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcdc_buf b = {0};
        CHECK_EQ_INT(mcdc_cdc_column_sql(&b, "c", "a]b", (uint8_t)cases[i].read, NULL), MCDC_OK);
        CHECK_EQ_INT(mcdc_buf_cstr(&b, NULL), MCDC_OK);
        CHECK_EQ_STR((const char *)b.data, cases[i].want);
        mcdc_buf_free(&b);
    }
    /* in the change-row read: AS the column's name; a typed NULL for one
     * the instance lacks, whatever its read */
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 4, NULL);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "node", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 2, "shape", MCDC_TYPE_BINARY, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 3, "old", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    bool present[4] = {true, true, true, false};
    uint8_t reads[4] = {MCDC_READ_VALUE, MCDC_READ_HIERARCHYID, MCDC_READ_SPATIAL,
                        MCDC_READ_VARIANT};
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_cdc_changes_sql(&b, "dbo_t", s->fields, present, reads, 4, false, "m.t",
                                      NULL, NULL),
                 MCDC_OK);
    CHECK(strstr((char *)b.data,
                 "m.t AS [_commit_ts], c.[id], CAST(c.[node] AS nvarchar(4000)) AS [node], "
                 "CASE WHEN c.[shape] IS NULL THEN NULL ELSE CONVERT(varbinary(max), "
                 "CONVERT(varchar(max), CAST(c.[shape].STSrid AS binary(4)), 2) + "
                 "CONVERT(varchar(max), c.[shape].AsBinaryZM(), 2), 2) END AS [shape], "
                 "CAST(NULL AS nvarchar(1)) AS [old] FROM ") != NULL);
    mcdc_buf_free(&b);
    mcdc_schema_unref(s);
}

TEST(cdc_captured_columns_and_capture_instances) {
    fx x = fx_open();
    fake_reply(x.f, "sp_cdc_get_captured_columns",
               "source_schema:utf8,source_table:utf8,capture_instance:utf8,column_name:utf8,"
               "column_id:i32,column_ordinal:i32,data_type:utf8,character_maximum_length:i32,"
               "numeric_precision:i16,numeric_precision_radix:i16,numeric_scale:i32,"
               "datetime_precision:i16",
               "dbo|orders|dbo_orders|amount|3|3|decimal|\\N|18|10|2|\\N\n"
               "dbo|orders|dbo_orders|id|1|1|int|\\N|10|10|0|\\N\n"
               "dbo|orders|dbo_orders|name|2|2|NVARCHAR|50|\\N|\\N|\\N|\\N");
    fake_reply(x.f, "sp_cdc_help_change_data_capture",
               "source_schema:utf8,source_table:utf8,capture_instance:utf8,start_lsn:bin,"
               "create_date:ts,index_column_list:utf8",
               "dbo|orders|dbo_orders_v2|0x00000000000000000200|2025-01-02 00:00:00|[id], [a]]b]\n"
               "dbo|orders|dbo_orders|0x00000000000000000100|2025-01-01 00:00:00|[id]");
    mcdc_captured_column *cols = NULL;
    int n = 0;
    CHECK_EQ_INT(mcdc_cdc_captured_columns(&cols, &n, x.c, "dbo_orders", NULL), MCDC_OK);
    CHECK_EQ_INT(n, 3);
    if (n == 3) {
        CHECK_EQ_STR(cols[0].name, "id");
        CHECK_EQ_STR(cols[1].data_type, "nvarchar");
        CHECK_EQ_INT(cols[1].max_length, 50);
        CHECK_EQ_STR(cols[2].name, "amount");
        CHECK_EQ_INT(cols[2].precision, 18);
        CHECK_EQ_INT(cols[2].scale, 2);
    }
    mcdc_captured_columns_free(cols, n);
    CHECK_EQ_STR(fake_sql(x.f, 0),
                 "EXEC sys.sp_cdc_get_captured_columns @capture_instance = N'dbo_orders'");
    mcdc_capture_instance *cis = NULL;
    CHECK_EQ_INT(mcdc_cdc_capture_instances(&cis, &n, x.c, "dbo", "orders", NULL), MCDC_OK);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_EQ_STR(cis[0].name, "dbo_orders"); /* oldest first */
        CHECK_EQ_STR(cis[1].name, "dbo_orders_v2");
        char t[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&cis[1].start_lsn, t);
        CHECK_EQ_STR(t, "0x00000000000000000200");
        CHECK_EQ_INT(cis[1].n_keys, 2);
        if (cis[1].n_keys == 2) CHECK_EQ_STR(cis[1].keys[1], "a]b");
    }
    mcdc_capture_instances_free(cis, n);
    CHECK_EQ_STR(fake_sql(x.f, 1), "EXEC sys.sp_cdc_help_change_data_capture @source_schema = "
                                   "N'dbo', @source_name = N'orders'");
    fx_close(&x);
}

TEST(cdc_detects_the_server_clock) {
    fx x = fx_open();
    fake_reply(x.f, "SERVERPROPERTY", "major_version:i32,engine_edition:i32", "16|3");
    fake_reply(x.f, "CURRENT_TIMEZONE_ID", "z:utf8", "Pacific Standard Time");
    fake_reply(x.f, "SERVERPROPERTY", "major_version:i32,engine_edition:i32", "13|3");
    fake_reply(x.f, "TZOFFSET", "o:i32", "-300");
    fake_reply(x.f, "SERVERPROPERTY", "major_version:i32,engine_edition:i32", "12|5");
    fake_reply(x.f, "CURRENT_TIMEZONE_ID", "z:utf8", "UTC");
    mcdc_clock clk;
    CHECK_EQ_INT(mcdc_cdc_detect_clock(&clk, x.c, NULL), MCDC_OK);
    CHECK_EQ_INT(clk.kind, MCDC_CLOCK_ZONE);
    CHECK_EQ_STR(clk.zone, "Pacific Standard Time");
    const mcdc_log_sink *lv = mcdc_log_use(&mcdc_test_quiet);
    CHECK_EQ_INT(mcdc_cdc_detect_clock(&clk, x.c, NULL), MCDC_OK);
    mcdc_log_use(lv);
    CHECK_EQ_INT(clk.kind, MCDC_CLOCK_FIXED);
    CHECK_EQ_INT(clk.offset_minutes, -300);
    CHECK_EQ_INT(mcdc_cdc_detect_clock(&clk, x.c, NULL), MCDC_OK); /* Azure SQL Database */
    CHECK_EQ_INT(clk.kind, MCDC_CLOCK_UTC);
    CHECK_EQ_STR(fake_sql(x.f, 3), "SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET())");
    CHECK_EQ_INT(fake_unused_replies(x.f), 0);
    fx_close(&x);
}

TEST(cdc_commit_time_expression_per_range) {
    fx x = fx_open();
    mcdc_lsn f, t;
    mcdc_lsn_parse_cstr(&f, L1, NULL);
    mcdc_lsn_parse_cstr(&t, L2, NULL);
    mcdc_buf b = {0};
    /* UTC: no query, a plain cast */
    CHECK_EQ_INT(mcdc_cdc_commit_time_sql(&b, x.c, &f, &t, "m.tran_end_time", "c.__$start_lsn",
                                          NULL),
                 MCDC_OK);
    mcdc_buf_cstr(&b, NULL);
    CHECK_EQ_STR((char *)b.data, "CAST(m.tran_end_time AS datetime2(3))");
    CHECK_EQ_INT(fake_exec_count(x.f), 0);
    /* a named zone with one offset over the range */
    mcdc_clock clk;
    mcdc_clock_from_name(&clk, "Central European Standard Time", NULL);
    mcdc_cdc_set_clock(x.c, &clk);
    fake_reply(x.f, "DATEDIFF(day", "o:i32", "60");
    mcdc_buf_reset(&b);
    CHECK_EQ_INT(mcdc_cdc_commit_time_sql(&b, x.c, &f, &t, "m.tran_end_time", "c.__$start_lsn",
                                          NULL),
                 MCDC_OK);
    mcdc_buf_cstr(&b, NULL);
    CHECK_EQ_STR((char *)b.data, "CAST(DATEADD(minute, -60, m.tran_end_time) AS datetime2(3))");
    CHECK_EQ_STR(fake_sql(x.f, 0),
                 "SELECT CASE WHEN DATEDIFF(day, MIN(m.tran_end_time), MAX(m.tran_end_time)) < 7 "
                 "AND DATEPART(TZOFFSET, DATEADD(hour, -3, MIN(m.tran_end_time)) AT TIME ZONE "
                 "N'Central European Standard Time') = DATEPART(TZOFFSET, DATEADD(hour, 3, "
                 "MAX(m.tran_end_time)) AT TIME ZONE N'Central European Standard Time') THEN "
                 "DATEPART(TZOFFSET, DATEADD(hour, 3, MAX(m.tran_end_time)) AT TIME ZONE "
                 "N'Central European Standard Time') END FROM cdc.lsn_time_mapping AS m WHERE "
                 "m.start_lsn BETWEEN CONVERT(binary(10), N'" L1 "', 1) AND "
                 "CONVERT(binary(10), N'" L2 "', 1)");
    /* across a change, no drop: row by row */
    fake_reply(x.f, "DATEDIFF(day", "o:i32", "\\N");
    fake_reply(x.f, "LAG(", "start_lsn:utf8,local_time:utf8", "");
    mcdc_buf_reset(&b);
    CHECK_EQ_INT(mcdc_cdc_commit_time_sql(&b, x.c, &f, &t, "m.tran_end_time", "c.__$start_lsn",
                                          NULL),
                 MCDC_OK);
    mcdc_buf_cstr(&b, NULL);
    CHECK_EQ_STR((char *)b.data, "CAST(m.tran_end_time AT TIME ZONE N'Central European "
                                 "Standard Time' AT TIME ZONE 'UTC' AS datetime2(3))");
    /* a fall-back drop: second-pass commits take the offset 3 h later */
    fake_reply(x.f, "DATEDIFF(day", "o:i32", "\\N");
    fake_reply(x.f, "LAG(", "start_lsn:utf8,local_time:utf8",
               "0x0000002A000001F80001|2025-10-26T02:00:10.003");
    mcdc_buf_reset(&b);
    CHECK_EQ_INT(mcdc_cdc_commit_time_sql(&b, x.c, &f, &t, "m.tran_end_time", "c.__$start_lsn",
                                          NULL),
                 MCDC_OK);
    mcdc_buf_cstr(&b, NULL);
    const char *s = (const char *)b.data;
    CHECK(strncmp(s, "CAST(CASE WHEN ((c.__$start_lsn >= CONVERT(binary(10), "
                     "N'0x0000002A000001F80001', 1) AND CONVERT(datetime, "
                     "N'2025-10-26T02:00:10.003', 126) BETWEEN DATEADD(hour, -3, m.tran_end_time) "
                     "AND m.tran_end_time))",
                  155) == 0);
    CHECK(strstr(s, " END AS datetime2(3))") != NULL);
    CHECK(strstr(s, "THEN CAST(DATEADD(minute, -DATEPART(TZOFFSET, DATEADD(hour, 3, "
                    "m.tran_end_time) AT TIME ZONE N'Central European Standard Time'), "
                    "m.tran_end_time) AS datetime2(3)) ELSE CAST(m.tran_end_time AT TIME ZONE") !=
          NULL);
    CHECK(strstr(fake_sql(x.f, 4), "LAG(m.tran_end_time) OVER (ORDER BY m.start_lsn)") != NULL);
    CHECK_EQ_INT(fake_unused_replies(x.f), 0);
    mcdc_buf_free(&b);
    fx_close(&x);
}

TEST(cdc_changes_sql_is_pinned) {
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 3, NULL);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "we]ird", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 2, "gone", MCDC_TYPE_DECIMAL, 10, 2, 0, true, NULL);
    bool present[3] = {true, true, false};
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_cdc_changes_sql(&b, "dbo_orders", s->fields, present, NULL, 3, true,
                                      "CAST(m.tran_end_time AS datetime2(3))", NULL, NULL),
                 MCDC_OK);
    CHECK_EQ_STR((char *)b.data,
                 "SELECT CONVERT(varchar(22), c.__$start_lsn, 1) AS [_start_lsn], "
                 "CONVERT(varchar(22), c.__$seqval, 1) AS [_seqval], c.__$operation AS "
                 "[_operation], c.__$command_id AS [_command_id], CAST(m.tran_end_time AS "
                 "datetime2(3)) AS [_commit_ts], c.[id], c.[we]]ird], CAST(NULL AS "
                 "decimal(10,2)) AS [gone] FROM cdc.[dbo_orders_CT] AS c INNER JOIN "
                 "cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn WHERE "
                 "c.__$start_lsn BETWEEN CONVERT(binary(10), ?, 1) AND CONVERT(binary(10), ?, "
                 "1) ORDER BY c.__$start_lsn, c.__$command_id, c.__$seqval, c.__$operation");
    mcdc_buf_reset(&b);
    mcdc_row_key k;
    mcdc_lsn_parse_cstr(&k.start_lsn, "0x10", NULL);
    mcdc_lsn_parse_cstr(&k.seqval, "0x11", NULL);
    k.command_id = 2;
    k.operation = 3;
    CHECK_EQ_INT(mcdc_cdc_changes_sql(&b, "dbo_orders", s->fields, NULL, NULL, 1, false,
                                      "CAST(m.tran_end_time AS datetime2(3))", &k, NULL),
                 MCDC_OK);
    CHECK(strstr((char *)b.data, "__$command_id") == NULL);
    CHECK(strstr((char *)b.data,
                 " AND (c.__$start_lsn > 0x00000000000000000010 OR (c.__$start_lsn = "
                 "0x00000000000000000010 AND (c.__$seqval > 0x00000000000000000011 OR "
                 "(c.__$seqval = 0x00000000000000000011 AND c.__$operation > 3)))) ORDER BY "
                 "c.__$start_lsn, c.__$seqval, c.__$operation") != NULL);
    mcdc_buf_free(&b);
    mcdc_schema_unref(s);
}

TEST(cdc_metrics_and_permission_probe) {
    fx x = fx_open();
    fake_reply(x.f, "SELECT 1", "v:i32", "1");
    fake_reply(x.f, "ASYNC_NETWORK_IO", "w:i64", "1234");
    fake_error(x.f, "ASYNC_NETWORK_IO", MCDC_E_PERMISSION, 300, "VIEW SERVER STATE denied");
    fake_reply(x.f, "HAS_PERMS_BY_NAME", "p:i32", "0");
    fake_reply(x.f, "HAS_PERMS_BY_NAME", "p:i32", "\\N");
    double ms = -1;
    CHECK_EQ_INT(mcdc_cdc_ping(&ms, x.c, NULL), MCDC_OK);
    CHECK(ms >= 0);
    int64_t w = 0;
    bool known = false;
    mcdc_cdc_network_wait_ms(&w, &known, x.c);
    CHECK(known && w == 1234);
    mcdc_cdc_network_wait_ms(&w, &known, x.c);
    CHECK(!known);
    int has = 7;
    CHECK_EQ_INT(mcdc_cdc_has_select(&has, x.c, "dbo_orders", NULL), MCDC_OK);
    CHECK_EQ_INT(has, 0);
    CHECK_EQ_STR(fake_sql(x.f, 3),
                 "SELECT CASE WHEN sys.fn_cdc_get_min_lsn(N'dbo_orders') > "
                 "0x00000000000000000000 THEN HAS_PERMS_BY_NAME(N'cdc.[dbo_orders_CT]', "
                 "'OBJECT', 'SELECT') END");
    CHECK_EQ_INT(mcdc_cdc_has_select(&has, x.c, "dbo_orders", NULL), MCDC_OK);
    CHECK_EQ_INT(has, -1);
    fx_close(&x);
}

/* More tables behind than one query's chunk holds: the probe splits them
 * over queries of at most MCDC_PROBE_BRANCHES_MAX branches (3 parameters
 * each, under SQL Server's 2,100), asks every behind table exactly once and
 * maps each query's answer back to its own items. */
TEST(cdc_probe_moved_chunks_many_tables) {
    enum { N = 2000 };
    fx x = fx_open();
    mcdc_probe_item *it = calloc(N, sizeof *it);
    mcdc_lsn max, behind;
    mcdc_lsn_parse_cstr(&max, L2, NULL);
    mcdc_lsn_parse_cstr(&behind, L1, NULL);
    int asked = 0;
    for (int i = 0; i < N; i++) {
        snprintf(it[i].ci, sizeof it[i].ci, "dbo_t%d", i);
        it[i].ask = i % 7 != 0;
        it[i].from = i % 11 == 0 ? max : behind;
        it[i].moved = true; /* cleared for every item the probe does not find moved */
        asked += it[i].ask && i % 11 != 0;
    }
    CHECK(asked > MCDC_PROBE_BRANCHES_MAX * 2 && asked <= MCDC_PROBE_BRANCHES_MAX * 3);
    fake_reply(x.f, "TOP (1) CONVERT(nvarchar", "ci:utf8", "dbo_t1\ndbo_t600");
    fake_reply(x.f, "TOP (1) CONVERT(nvarchar", "ci:utf8", "dbo_t1000");
    fake_reply(x.f, "TOP (1) CONVERT(nvarchar", "ci:utf8", "dbo_t1999");
    int queries = 0;
    CHECK_EQ_INT(mcdc_cdc_probe_moved(x.c, it, N, &max, &queries, NULL), MCDC_OK);
    CHECK_EQ_INT(queries, 3);
    CHECK_EQ_INT(fake_exec_count(x.f), 3);
    CHECK_EQ_INT(fake_unused_replies(x.f), 0);
    /* every behind table in exactly one query, no query over the chunk */
    static int seen[N];
    int total = 0;
    for (int q = 0; q < 3; q++) {
        const char *sql = fake_sql(x.f, q);
        int branches = 0;
        for (const char *s = sql; (s = strstr(s, "TOP (1)")) != NULL; s++) branches++;
        CHECK(branches > 0 && branches <= MCDC_PROBE_BRANCHES_MAX);
        total += branches;
        for (const char *s = sql; (s = strstr(s, "FROM cdc.[dbo_t")) != NULL; s++) {
            int i = atoi(s + strlen("FROM cdc.[dbo_t"));
            CHECK(i >= 0 && i < N);
            if (i >= 0 && i < N) seen[i]++;
        }
    }
    CHECK_EQ_INT(total, asked);
    for (int i = 0; i < N; i++) {
        CHECK_EQ_INT(seen[i], it[i].ask && i % 11 != 0 ? 1 : 0);
        CHECK_EQ_INT(it[i].moved, i == 1 || i == 600 || i == 1000 || i == 1999);
    }
    free(it);
    fx_close(&x);
}

/* Every change table's row count in one query; without VIEW DATABASE
 * STATE (or SELECT on cdc.change_tables) not visible and no error; a count
 * that is not one is a protocol error, nothing returned. */
TEST(cdc_change_table_rows_one_query_and_degrades) {
    fx x = fx_open();
    fake_reply(x.f, "dm_db_partition_stats", "capture_instance:utf8,row_count:i64",
               "dbo_a|12\ndbo_b|0");
    fake_error(x.f, "dm_db_partition_stats", MCDC_E_PERMISSION, 297,
               "The user does not have permission to perform this action.");
    fake_reply(x.f, "dm_db_partition_stats", "capture_instance:utf8,row_count:i64", "dbo_a|-1");
    mcdc_change_table_rows *v = NULL;
    size_t n = 9;
    bool visible = false;
    CHECK_EQ_INT(mcdc_cdc_change_table_rows(&v, &n, &visible, x.c, NULL), MCDC_OK);
    CHECK(visible);
    CHECK_EQ_INT((int)n, 2);
    if (v && n == 2) {
        CHECK_EQ_STR(v[0].capture_instance, "dbo_a");
        CHECK(v[0].rows == 12);
        CHECK_EQ_STR(v[1].capture_instance, "dbo_b");
        CHECK(v[1].rows == 0);
    }
    CHECK(strstr(fake_sql(x.f, 0), "JOIN sys.dm_db_partition_stats AS ps ON ps.object_id = "
                                   "ct.object_id AND ps.index_id IN (0, 1)") != NULL);
    mcdc_change_table_rows_free(v);
    CHECK_EQ_INT(mcdc_cdc_change_table_rows(&v, &n, &visible, x.c, NULL), MCDC_OK);
    CHECK(!visible && v == NULL && n == 0);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_cdc_change_table_rows(&v, &n, &visible, x.c, &e), MCDC_E_PROTOCOL);
    CHECK(!visible && v == NULL && n == 0);
    CHECK(strstr(e.message, "row count") != NULL);
    CHECK_EQ_INT(fake_exec_count(x.f), 3);
    fx_close(&x);
}

TEST(cdc_ddl_history_is_filtered_to_the_range) {
    fx x = fx_open();
    fake_reply(x.f, "sp_cdc_get_ddl_history",
               "source_schema:utf8,source_table:utf8,capture_instance:utf8,"
               "required_column_update:bool,ddl_command:utf8,ddl_lsn:bin,ddl_time:ts",
               "dbo|orders|dbo_orders|0|ALTER TABLE dbo.orders ADD a int|0x00000000000000000010|2025-01-01 00:00:00\n"
               "dbo|orders|dbo_orders|1|ALTER TABLE dbo.orders ALTER COLUMN b bigint|0x00000000000000000020|2025-01-02 00:00:00\n"
               "dbo|orders|dbo_orders|0|ALTER TABLE dbo.orders DROP COLUMN c|0x00000000000000000030|2025-01-03 00:00:00");
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x10", NULL); /* exclusive */
    mcdc_lsn_parse_cstr(&to, "0x20", NULL);   /* inclusive */
    mcdc_ddl_event *ev = NULL;
    int n = 0;
    CHECK_EQ_INT(mcdc_cdc_ddl_history(&ev, &n, x.c, "dbo_orders", &from, &to, NULL), MCDC_OK);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK_EQ_STR(ev[0].command, "ALTER TABLE dbo.orders ALTER COLUMN b bigint");
        char t[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&ev[0].ddl_lsn, t);
        CHECK_EQ_STR(t, "0x00000000000000000020");
    }
    mcdc_ddl_events_free(ev, n);
    CHECK_EQ_STR(fake_sql(x.f, 0),
                 "EXEC sys.sp_cdc_get_ddl_history @capture_instance = N'dbo_orders'");
    fx_close(&x);
}

TEST(cdc_time_to_lsn_converts_utc_to_the_server_clock) {
    fx x = fx_open();
    fake_reply(x.f, "map_time_to_lsn", "v:utf8", L1);
    fake_reply(x.f, "map_time_to_lsn", "v:utf8", "0x00000000000000000000");
    fake_reply(x.f, "map_time_to_lsn", "v:utf8", "\\N");
    int64_t us = 0;
    mcdc_parse_ts_us("2025-03-01T10:00:00.750", 23, &us, NULL);
    mcdc_lsn l;
    bool found = false;
    CHECK_EQ_INT(mcdc_cdc_time_to_lsn(&l, &found, x.c, us, NULL), MCDC_OK);
    CHECK(found);
    CHECK_EQ_STR(fake_sql(x.f, 0),
                 "SELECT CONVERT(varchar(22), sys.fn_cdc_map_time_to_lsn(N'largest less than or "
                 "equal', CONVERT(datetime2(0), N'2025-03-01T10:00:00', 126)), 1)");
    mcdc_clock clk;
    mcdc_clock_from_name(&clk, "Tokyo Standard Time", NULL);
    mcdc_cdc_set_clock(x.c, &clk);
    CHECK_EQ_INT(mcdc_cdc_time_to_lsn(&l, &found, x.c, us, NULL), MCDC_OK);
    CHECK(!found); /* the zero LSN: nothing that early */
    /* the earlier of the time's server-clock reading and the next hour's less
     * an hour: no commit of a fall-back's repeated hour after it is mapped */
    CHECK_EQ_STR(fake_sql(x.f, 1),
                 "SELECT CONVERT(varchar(22), sys.fn_cdc_map_time_to_lsn(N'largest less than or "
                 "equal', (SELECT MIN(v) FROM (VALUES (CONVERT(datetime2(0), "
                 "(CONVERT(datetime2(0), N'2025-03-01T10:00:00', 126) AT TIME ZONE 'UTC') AT "
                 "TIME ZONE N'Tokyo Standard Time')), (DATEADD(hour, -1, CONVERT(datetime2(0), "
                 "(DATEADD(hour, 1, CONVERT(datetime2(0), N'2025-03-01T10:00:00', 126)) AT TIME "
                 "ZONE 'UTC') AT TIME ZONE N'Tokyo Standard Time')))) AS x(v))), 1)");
    clk.kind = MCDC_CLOCK_FIXED;
    clk.offset_minutes = 120;
    mcdc_cdc_set_clock(x.c, &clk);
    CHECK_EQ_INT(mcdc_cdc_time_to_lsn(&l, &found, x.c, us, NULL), MCDC_OK);
    CHECK(!found);
    CHECK(strstr(fake_sql(x.f, 2), "DATEADD(minute, 120, CONVERT(datetime2(0), "
                                   "N'2025-03-01T10:00:00', 126))") != NULL);
    fx_close(&x);
}
