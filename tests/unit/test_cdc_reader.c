#include "mcdc_reader.h"
#include "mcdc_test.h"
#include "test_driver_fake.h"

#define ROWCOLS                                                                              \
    "_start_lsn:utf8,_seqval:utf8,_operation:i32,_command_id:i32,_commit_ts:ts,id:i32,"     \
    "name:utf8"

typedef struct {
    fake_db *f;
    int connects;
    int refuse; /* refuse this many connects first */
} conn_ctx;

static int fake_connector(void *ctx, mcdc_conn **out, mcdc_error *err) {
    conn_ctx *k = ctx;
    k->connects++;
    if (k->refuse > 0) {
        k->refuse--;
        return mcdc_error_set(err, MCDC_E_TRANSIENT, "connecting: FreeTDS error 20009");
    }
    *out = fake_connect(k->f);
    return MCDC_OK;
}

typedef struct {
    mcdc_buf rows; /* "lsn|seq|op|cmd|ts|id|name\n" per row */
    int batches;
    int fail_at; /* fail on this batch (1-based), 0 = never */
} collect;

static int collect_sink(void *ctx, mcdc_batch *b, mcdc_error *err) {
    collect *c = ctx;
    c->batches++;
    int rc = mcdc_batch_validate(b, err);
    if (rc == MCDC_OK && c->fail_at == c->batches)
        rc = mcdc_error_set(err, MCDC_E_IO, "sink: disk full");
    for (int64_t r = 0; rc == MCDC_OK && r < b->rows; r++) {
        for (int32_t i = 0; i < b->schema->n_fields; i++) {
            const mcdc_column *col = &b->columns[i];
            if (i) mcdc_buf_append_byte(&c->rows, '|', NULL);
            if (!mcdc_col_is_valid(col, r)) {
                mcdc_buf_append_str(&c->rows, "NULL", NULL);
                continue;
            }
            switch (col->field->type) {
            case MCDC_TYPE_UTF8:
                mcdc_buf_append(&c->rows, col->data + col->offsets[r],
                                (size_t)(col->offsets[r + 1] - col->offsets[r]), NULL);
                break;
            case MCDC_TYPE_INT32: {
                int32_t v;
                memcpy(&v, col->values + r * 4, 4);
                mcdc_buf_printf(&c->rows, NULL, "%d", v);
                break;
            }
            case MCDC_TYPE_TIMESTAMP_NTZ: {
                int64_t v;
                char t[32];
                memcpy(&v, col->values + r * 8, 8);
                mcdc_format_ts_us(v, 3, t);
                mcdc_buf_append_str(&c->rows, t, NULL);
                break;
            }
            default: mcdc_buf_append_str(&c->rows, "?", NULL);
            }
        }
        mcdc_buf_append_byte(&c->rows, '\n', NULL);
    }
    mcdc_batch_free(b);
    mcdc_buf_cstr(&c->rows, NULL);
    return rc;
}

static mcdc_schema *two_columns(void) {
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 2, NULL);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    return s;
}

static void script_prelude(fake_db *f) {
    fake_reply(f, "SELECT 1", "v:i32", "1");
    fake_reply(f, "ASYNC_NETWORK_IO", "w:i64", "100");
}
static void script_after(fake_db *f, const char *min_lsn, const char *wait_after) {
    fake_reply(f, "get_min_lsn", "v:utf8", min_lsn);
    fake_reply(f, "ASYNC_NETWORK_IO", "w:i64", wait_after);
}

/* An update (3,4), an insert of a second row, then a delete: order as read. */
static const char *SIX_ROWS =
    "0x00000000000000000010|0x00000000000000000011|2|1|2025-01-01 00:00:00.003|1|a\n"
    "0x00000000000000000020|0x00000000000000000021|3|1|2025-01-01 00:00:01|1|a\n"
    "0x00000000000000000020|0x00000000000000000021|4|1|2025-01-01 00:00:01|1|b\n"
    "0x00000000000000000030|0x00000000000000000031|3|1|2025-01-01 00:00:02|1|b\n"
    "0x00000000000000000030|0x00000000000000000031|4|1|2025-01-01 00:00:02|1|c\n"
    "0x00000000000000000040|0x00000000000000000041|1|1|2025-01-01 00:00:03|1|c";

TEST(reader_reads_a_range_into_the_output_schema) {
    fake_db *f = fake_new();
    script_prelude(f);
    fake_reply(f, "cdc.[dbo_orders_CT]", ROWCOLS, SIX_ROWS);
    script_after(f, "0x00000000000000000001", "130");
    conn_ctx k = {f, 0, 0};
    collect col = {{0}, 0, 0};
    mcdc_schema *cols = two_columns();
    mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
    opt.capture_instance = "dbo_orders";
    opt.columns = cols;
    opt.batch_rows = 4;
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x10", NULL);
    mcdc_lsn_parse_cstr(&to, "0x40", NULL);
    mcdc_reader_metrics m;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_reader_read_range(&m, &opt, fake_connector, &k, &from, &to, false, collect_sink,
                                    &col, &e);
    CHECK_EQ_INT(rc, MCDC_OK);
    if (rc) fprintf(stderr, "  %s\n", e.message);
    CHECK_EQ_STR((char *)col.rows.data,
                 "dbo_orders|0x00000000000000000010|0x00000000000000000011|2|1|2025-01-01T00:00:00.003|1|a\n"
                 "dbo_orders|0x00000000000000000020|0x00000000000000000021|3|1|2025-01-01T00:00:01.000|1|a\n"
                 "dbo_orders|0x00000000000000000020|0x00000000000000000021|4|1|2025-01-01T00:00:01.000|1|b\n"
                 "dbo_orders|0x00000000000000000030|0x00000000000000000031|3|1|2025-01-01T00:00:02.000|1|b\n"
                 "dbo_orders|0x00000000000000000030|0x00000000000000000031|4|1|2025-01-01T00:00:02.000|1|c\n"
                 "dbo_orders|0x00000000000000000040|0x00000000000000000041|1|1|2025-01-01T00:00:03.000|1|c\n");
    CHECK_EQ_INT(col.batches, 2);
    CHECK_EQ_INT(m.rows, 6);
    CHECK(m.bytes > 0);
    CHECK_EQ_INT(m.attempts, 1);
    CHECK(m.rtt_known);
    CHECK(m.network_wait_known);
    CHECK_EQ_INT(m.network_wait_ms, 30);
    CHECK(!m.measured_position);
    /* five queries: ping, wait, read, guard, wait */
    CHECK_EQ_INT(fake_exec_count(f), 5);
    CHECK(strstr(fake_sql(f, 2), "BETWEEN CONVERT(binary(10), N'0x00000000000000000010', 1) AND "
                                 "CONVERT(binary(10), N'0x00000000000000000040', 1) ORDER BY") !=
          NULL);
    CHECK_EQ_INT(fake_unused_replies(f), 0);
    mcdc_buf_free(&col.rows);
    mcdc_schema_unref(cols);
    fake_free(f);
}

TEST(reader_last_range_measures_the_stream_position) {
    fake_db *f = fake_new();
    script_prelude(f);
    fake_reply(f, "cdc.[dbo_orders_CT]", ROWCOLS, "");
    script_after(f, "0x00000000000000000005", "100");
    fake_reply(f, "get_max_lsn", "v:utf8", "0x00000000000000000099");
    fake_reply(f, "N'0x00000000000000000040'", "t:utf8", "2025-01-01T00:00:03.000");
    fake_reply(f, "N'0x00000000000000000005'", "t:utf8", "2024-12-29T00:00:00");
    fake_reply(f, "N'0x00000000000000000099'", "t:utf8", "2025-01-01T00:10:00");
    conn_ctx k = {f, 0, 0};
    collect col = {{0}, 0, 0};
    mcdc_schema *cols = two_columns();
    mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
    opt.capture_instance = "dbo_orders";
    opt.columns = cols;
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x10", NULL);
    mcdc_lsn_parse_cstr(&to, "0x40", NULL);
    mcdc_reader_metrics m;
    CHECK_EQ_INT(mcdc_reader_read_range(&m, &opt, fake_connector, &k, &from, &to, true,
                                        collect_sink, &col, NULL),
                 MCDC_OK);
    CHECK_EQ_INT(m.rows, 0);
    CHECK_EQ_INT(col.batches, 0);
    CHECK(m.measured_position);
    char t[32];
    mcdc_format_ts_us(m.to_commit_ts_us, 3, t);
    CHECK_EQ_STR(t, "2025-01-01T00:00:03.000");
    mcdc_format_ts_us(m.retention_watermark_ts_us, 3, t);
    CHECK_EQ_STR(t, "2024-12-29T00:00:00.000");
    mcdc_format_ts_us(m.source_max_commit_ts_us, 3, t);
    CHECK_EQ_STR(t, "2025-01-01T00:10:00.000");
    CHECK(m.capture_lag_seconds > 0);
    CHECK_EQ_INT(fake_exec_count(f), 9); /* + max_lsn and three commit times */
    CHECK_EQ_INT(fake_unused_replies(f), 0);
    mcdc_buf_free(&col.rows);
    mcdc_schema_unref(cols);
    fake_free(f);
}

TEST(reader_purged_range_is_data_loss_never_empty_success) {
    fake_db *f = fake_new();
    script_prelude(f);
    fake_reply(f, "cdc.[dbo_orders_CT]", ROWCOLS, ""); /* the table returns what is left */
    script_after(f, "0x00000000000000000080", "100");
    conn_ctx k = {f, 0, 0};
    collect col = {{0}, 0, 0};
    mcdc_schema *cols = two_columns();
    mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
    opt.capture_instance = "dbo_orders";
    opt.columns = cols;
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x10", NULL);
    mcdc_lsn_parse_cstr(&to, "0x40", NULL);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_reader_read_range(NULL, &opt, fake_connector, &k, &from, &to, false,
                                        collect_sink, &col, &e),
                 MCDC_E_DATALOSS);
    CHECK(strstr(e.message, "'dbo_orders'") != NULL);
    CHECK(strstr(e.message, "0x00000000000000000010") != NULL);
    CHECK(strstr(e.message, "0x00000000000000000080") != NULL);
    CHECK(strstr(e.message, "failOnDataLoss=false") != NULL);
    CHECK(strstr(e.message, "snapshot") != NULL);
    CHECK_EQ_STR(mcdc_status_kind(e.code), "DataLossError");
    CHECK_EQ_INT(k.connects, 1); /* not retried */
    mcdc_buf_free(&col.rows);
    mcdc_schema_unref(cols);
    fake_free(f);
}

TEST(reader_dropped_connection_resumes_without_gap_or_duplicate) {
    fake_db *f = fake_new();
    script_prelude(f);
    /* rows 0,1 go out as the first batch; the connection dies at row 3 */
    fake_drop_after(f, "cdc.[dbo_orders_CT]", ROWCOLS, SIX_ROWS, 3);
    script_prelude(f);
    /* the server's answer to the resumed query: rows after row 1 */
    fake_reply(f, "cdc.[dbo_orders_CT]", ROWCOLS,
               "0x00000000000000000020|0x00000000000000000021|4|1|2025-01-01 00:00:01|1|b\n"
               "0x00000000000000000030|0x00000000000000000031|3|1|2025-01-01 00:00:02|1|b\n"
               "0x00000000000000000030|0x00000000000000000031|4|1|2025-01-01 00:00:02|1|c\n"
               "0x00000000000000000040|0x00000000000000000041|1|1|2025-01-01 00:00:03|1|c");
    script_after(f, "0x00000000000000000001", "100");
    conn_ctx k = {f, 0, 0};
    collect col = {{0}, 0, 0};
    mcdc_schema *cols = two_columns();
    mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
    opt.capture_instance = "dbo_orders";
    opt.columns = cols;
    opt.batch_rows = 2;
    opt.backoff_ms_first = 1;
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x10", NULL);
    mcdc_lsn_parse_cstr(&to, "0x40", NULL);
    mcdc_reader_metrics m;
    mcdc_error e = MCDC_ERROR_INIT;
    const mcdc_log_sink *lv = mcdc_log_use(&mcdc_test_quiet);
    int rc = mcdc_reader_read_range(&m, &opt, fake_connector, &k, &from, &to, false,
                                    collect_sink, &col, &e);
    mcdc_log_use(lv);
    CHECK_EQ_INT(rc, MCDC_OK);
    if (rc) fprintf(stderr, "  %s\n", e.message);
    CHECK_EQ_INT(m.attempts, 2);
    CHECK_EQ_INT(m.rows, 6);
    CHECK_EQ_INT(k.connects, 2);
    /* The same six rows, in order, once each. */
    CHECK_EQ_STR((char *)col.rows.data,
                 "dbo_orders|0x00000000000000000010|0x00000000000000000011|2|1|2025-01-01T00:00:00.003|1|a\n"
                 "dbo_orders|0x00000000000000000020|0x00000000000000000021|3|1|2025-01-01T00:00:01.000|1|a\n"
                 "dbo_orders|0x00000000000000000020|0x00000000000000000021|4|1|2025-01-01T00:00:01.000|1|b\n"
                 "dbo_orders|0x00000000000000000030|0x00000000000000000031|3|1|2025-01-01T00:00:02.000|1|b\n"
                 "dbo_orders|0x00000000000000000030|0x00000000000000000031|4|1|2025-01-01T00:00:02.000|1|c\n"
                 "dbo_orders|0x00000000000000000040|0x00000000000000000041|1|1|2025-01-01T00:00:03.000|1|c\n");
    /* The retry resumed after (0x20, 1, 0x21, 3). */
    const char *retry = fake_sql(f, 5);
    CHECK(retry != NULL && strstr(retry, "AND (c.__$start_lsn > 0x00000000000000000020 OR "
                                         "(c.__$start_lsn = 0x00000000000000000020 AND "
                                         "(c.__$command_id > 1 OR (c.__$command_id = 1 AND "
                                         "(c.__$seqval > 0x00000000000000000021 OR (c.__$seqval "
                                         "= 0x00000000000000000021 AND c.__$operation > 3))))))") !=
                               NULL);
    CHECK_EQ_INT(fake_unused_replies(f), 0);
    mcdc_buf_free(&col.rows);
    mcdc_schema_unref(cols);
    fake_free(f);
}

TEST(reader_retries_are_bounded_and_permanent_errors_fail_at_once) {
    fake_db *f = fake_new();
    conn_ctx k = {f, 0, 100};
    collect col = {{0}, 0, 0};
    mcdc_schema *cols = two_columns();
    mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
    opt.capture_instance = "dbo_orders";
    opt.columns = cols;
    opt.backoff_ms_first = 1;
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x10", NULL);
    mcdc_lsn_parse_cstr(&to, "0x40", NULL);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_reader_metrics m;
    const mcdc_log_sink *lv = mcdc_log_use(&mcdc_test_quiet);
    CHECK_EQ_INT(mcdc_reader_read_range(&m, &opt, fake_connector, &k, &from, &to, false,
                                        collect_sink, &col, &e),
                 MCDC_E_TRANSIENT);
    mcdc_log_use(lv);
    CHECK_EQ_INT(k.connects, MCDC_RETRIES_MAX + 1);
    CHECK(strstr(e.message, "after 4 attempts") != NULL);
    /* an invalid object: once, naming the object and the fix */
    k.refuse = 0;
    k.connects = 0;
    script_prelude(f);
    fake_error(f, "cdc.[dbo_orders_CT]", MCDC_E_NOTFOUND, 208,
               "Invalid object name 'cdc.dbo_orders_CT'.");
    fake_reply(f, "HAS_PERMS_BY_NAME", "p:i32", "\\N"); /* instance gone: unknown */
    CHECK_EQ_INT(mcdc_reader_read_range(&m, &opt, fake_connector, &k, &from, &to, false,
                                        collect_sink, &col, &e),
                 MCDC_E_NOTFOUND);
    CHECK_EQ_INT(k.connects, 1);
    CHECK(strstr(e.message, "change table cdc.[dbo_orders_CT] is missing") != NULL);
    CHECK_EQ_INT(e.server_number, 208);
    /* a sink failure is the sink's error, not retried */
    k.connects = 0;
    script_prelude(f);
    fake_reply(f, "cdc.[dbo_orders_CT]", ROWCOLS, SIX_ROWS);
    col.fail_at = 1;
    CHECK_EQ_INT(mcdc_reader_read_range(&m, &opt, fake_connector, &k, &from, &to, false,
                                        collect_sink, &col, &e),
                 MCDC_E_IO);
    CHECK(strstr(e.message, "disk full") != NULL);
    CHECK_EQ_INT(k.connects, 1);
    mcdc_buf_free(&col.rows);
    mcdc_schema_unref(cols);
    fake_free(f);
}

TEST(reader_missing_grant_gives_the_exact_grant) {
    fake_db *f = fake_new();
    script_prelude(f);
    fake_error(f, "cdc.[dbo_orders_CT]", MCDC_E_PERMISSION, 229,
               "The SELECT permission was denied on the object 'dbo_orders_CT', database "
               "'shop', schema 'cdc'.");
    fake_reply(f, "HAS_PERMS_BY_NAME", "p:i32", "0");
    fake_reply(f, "USER_NAME", "u:utf8", "etl_reader");
    conn_ctx k = {f, 0, 0};
    collect col = {{0}, 0, 0};
    mcdc_schema *cols = two_columns();
    mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
    opt.capture_instance = "dbo_orders";
    opt.columns = cols;
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x10", NULL);
    mcdc_lsn_parse_cstr(&to, "0x40", NULL);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_reader_read_range(NULL, &opt, fake_connector, &k, &from, &to, false,
                                        collect_sink, &col, &e),
                 MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "GRANT SELECT ON cdc.[dbo_orders_CT] TO [etl_reader];") != NULL);
    CHECK_EQ_STR(mcdc_status_kind(e.code), "PermissionError");
    CHECK_EQ_INT(e.server_number, 229);
    CHECK_EQ_INT(k.connects, 1);
    mcdc_buf_free(&col.rows);
    mcdc_schema_unref(cols);
    fake_free(f);
}

TEST(reader_infers_columns_and_rejects_reserved_names) {
    fake_db *f = fake_new();
    fake_reply(f, "sp_cdc_get_captured_columns",
               "column_name:utf8,column_id:i32,column_ordinal:i32,data_type:utf8,"
               "numeric_precision:i32,numeric_scale:i32",
               "id|1|1|int|10|0\nname|2|2|nvarchar|\\N|\\N\ntotal|3|3|int|10|0");
    /* total is computed: NULL in every change row, left out of the schema. */
    fake_reply(f, "sp_cdc_help_change_data_capture",
               "source_schema:utf8,source_table:utf8,capture_instance:utf8,start_lsn:bin,"
               "create_date:ts,index_column_list:utf8",
               "dbo|orders|dbo_orders|0x00000000000000000100|2025-01-01 00:00:00|[id]");
    fake_reply(f, "FROM sys.columns",
               "name:utf8,column_id:i32,collation_name:utf8,is_computed:bool",
               "id|1|\\N|0\nname|2|Latin1_General_CI_AS|0\ntotal|3|\\N|1");
    script_prelude(f);
    fake_reply(f, "cdc.[dbo_orders_CT]", ROWCOLS, SIX_ROWS);
    script_after(f, "0x00000000000000000001", "100");
    conn_ctx k = {f, 0, 0};
    collect col = {{0}, 0, 0};
    mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
    opt.capture_instance = "dbo_orders";
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x10", NULL);
    mcdc_lsn_parse_cstr(&to, "0x40", NULL);
    mcdc_reader_metrics m;
    CHECK_EQ_INT(mcdc_reader_read_range(&m, &opt, fake_connector, &k, &from, &to, false,
                                        collect_sink, &col, NULL),
                 MCDC_OK);
    CHECK_EQ_INT(m.rows, 6);
    CHECK(strstr(fake_sql(f, 5), "c.[id], c.[name] FROM") != NULL);
    mcdc_schema *s = NULL, *bad = NULL;
    mcdc_schema_create(&bad, 1, NULL);
    mcdc_schema_set(bad, 0, "_operation", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_reader_output_schema(&s, bad, true, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "_operation") != NULL);
    CHECK(strstr(e.message, "reserves") != NULL);
    /* any case, and bronze's own columns too (the one list) */
    mcdc_schema_set(bad, 0, "_Batch_Id", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    CHECK_EQ_INT(mcdc_reader_output_schema(&s, bad, false, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "'_Batch_Id'") != NULL);
    CHECK(mcdc_is_reserved_column("_START_LSN"));
    CHECK(mcdc_is_reserved_column("_chunk"));
    CHECK(!mcdc_is_reserved_column("order_id"));
    CHECK(!mcdc_is_reserved_column("_start_lsn2"));
    mcdc_schema_set(bad, 0, "_batch", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    CHECK_EQ_INT(mcdc_check_reserved_columns(bad, 0, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_check_reserved_columns(bad, 1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_reader_output_schema(&s, NULL, false, &e), MCDC_OK);
    CHECK_EQ_INT(s->n_fields, 5);
    CHECK_EQ_INT(mcdc_schema_find(s, "_command_id"), -1);
    CHECK_EQ_INT(mcdc_schema_find(s, "_commit_ts"), 4);
    mcdc_schema_unref(s);
    mcdc_schema_unref(bad);
    mcdc_buf_free(&col.rows);
    fake_free(f);
}

/* A sink that keeps the batch (the test reads its columns). */
static int keep_sink(void *ctx, mcdc_batch *b, mcdc_error *err) {
    mcdc_batch **kept = ctx;
    if (*kept) mcdc_batch_free(*kept);
    *kept = b;
    return mcdc_batch_validate(b, err);
}

TEST(reader_reads_the_types_the_reference_refuses) {
    fake_db *f = fake_new();
    fake_reply(f, "sp_cdc_get_captured_columns",
               "column_name:utf8,column_id:i32,column_ordinal:i32,data_type:utf8,"
               "numeric_precision:i32,numeric_scale:i32",
               "id|1|1|int|10|0\nnode|2|2|hierarchyid|\\N|\\N\nshape|3|3|geography|\\N|\\N\n"
               "any|4|4|sql_variant|\\N|\\N\ndoc|5|5|xml|\\N|\\N");
    fake_reply(f, "sp_cdc_help_change_data_capture",
               "source_schema:utf8,source_table:utf8,capture_instance:utf8,start_lsn:bin,"
               "create_date:ts,index_column_list:utf8",
               "dbo|t|dbo_t|0x00000000000000000100|2025-01-01 00:00:00|[id]");
    fake_reply(f, "FROM sys.columns",
               "name:utf8,column_id:i32,collation_name:utf8,is_computed:bool",
               "id|1|\\N|0\nnode|2|\\N|0\nshape|3|\\N|0\nany|4|\\N|0\ndoc|5|\\N|0");
    script_prelude(f);
    /* what the server answers the expressions: text, SRID + WKB, text */
    fake_reply(f, "cdc.[dbo_t_CT]",
               "_start_lsn:utf8,_seqval:utf8,_operation:i32,_command_id:i32,_commit_ts:ts,"
               "id:i32,node:utf8,shape:bin,any:utf8,doc:utf8",
               "0x00000000000000000010|0x00000000000000000011|2|1|2025-01-01 00:00:00|1|/1/2/|"
               "0x000010E60101000000000000000000F03F0000000000000040|int:42|<a />\n"
               "0x00000000000000000010|0x00000000000000000012|2|2|2025-01-01 00:00:00|2|\\N|"
               "\\N|\\N|\\N");
    script_after(f, "0x00000000000000000001", "100");
    conn_ctx k = {f, 0, 0};
    mcdc_batch *b = NULL;
    mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
    opt.capture_instance = "dbo_t";
    mcdc_lsn from, to;
    mcdc_lsn_parse_cstr(&from, "0x10", NULL);
    mcdc_lsn_parse_cstr(&to, "0x40", NULL);
    mcdc_error re = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_reader_read_range(NULL, &opt, fake_connector, &k, &from, &to, false,
                                        keep_sink, &b, &re),
                 MCDC_OK);
    if (re.code) fprintf(stderr, "  %s\n", re.message);
    CHECK(strstr(fake_sql(f, 5), "c.[id], CAST(c.[node] AS nvarchar(4000)) AS [node], CASE "
                                 "WHEN c.[shape] IS NULL THEN NULL ELSE CONVERT(varbinary(max), "
                                 "CONVERT(varchar(max), CAST(c.[shape].STSrid AS binary(4)), 2)") !=
          NULL);
    CHECK(strstr(fake_sql(f, 5), "ELSE CAST(c.[any] AS nvarchar(max)) END END AS [any], c.[doc] "
                                 "FROM") != NULL);
    CHECK(b != NULL && b->rows == 2);
    if (b && b->rows == 2) {
        int32_t at = mcdc_schema_find(b->schema, "shape");
        CHECK(b->schema->fields[at].type == MCDC_TYPE_BINARY);
        CHECK(b->schema->fields[mcdc_schema_find(b->schema, "node")].type == MCDC_TYPE_UTF8);
        CHECK(b->schema->fields[mcdc_schema_find(b->schema, "any")].type == MCDC_TYPE_UTF8);
        const mcdc_column *c = &b->columns[at];
        static const uint8_t ewkb[] = {1, 1, 0, 0, 0x20, 0xE6, 0x10, 0, 0, 0, 0, 0, 0, 0,
                                       0, 0xF0, 0x3F, 0, 0, 0, 0, 0, 0, 0, 0x40};
        CHECK_EQ_INT(c->offsets[1] - c->offsets[0], (int64_t)sizeof ewkb);
        CHECK(memcmp(c->data + c->offsets[0], ewkb, sizeof ewkb) == 0);
        CHECK(!mcdc_col_is_valid(c, 1));
    }
    mcdc_batch_free(b);
    fake_free(f);

    /* A CLR type of the user's: a reader that infers stops, naming it. */
    f = fake_new();
    fake_reply(f, "sp_cdc_get_captured_columns",
               "column_name:utf8,column_id:i32,column_ordinal:i32,data_type:utf8,"
               "numeric_precision:i32,numeric_scale:i32",
               "id|1|1|int|10|0\nmoney_bag|2|2|MyClrType|\\N|\\N");
    fake_reply(f, "sp_cdc_help_change_data_capture",
               "source_schema:utf8,source_table:utf8,capture_instance:utf8,start_lsn:bin,"
               "create_date:ts,index_column_list:utf8",
               "dbo|t|dbo_t|0x00000000000000000100|2025-01-01 00:00:00|[id]");
    fake_reply(f, "FROM sys.columns",
               "name:utf8,column_id:i32,collation_name:utf8,is_computed:bool",
               "id|1|\\N|0\nmoney_bag|2|\\N|0");
    k = (conn_ctx){f, 0, 0};
    b = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_reader_read_range(NULL, &opt, fake_connector, &k, &from, &to, false,
                                        keep_sink, &b, &e),
                 MCDC_E_UNSUPPORTED);
    CHECK(strstr(e.message, "money_bag (myclrtype)") != NULL);
    CHECK(b == NULL);
    fake_free(f);
}

/* A snapshot batch's stamp, filled by the reader (the query selects the
 * captured columns only): _start_lsn, _operation 0, _commit_ts or NULL,
 * _seqval and _command_id NULL, for as many rows as were fetched, after
 * rows already in the batch; the captured columns are left alone. */
TEST(reader_fill_snapshot_stamp_cells) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *cap = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&cap, 1, &e), MCDC_OK);
    mcdc_schema_set(cap, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, false, &e);
    const char *lsn = "0x0000002A000001F00003";
    for (int cmd = 0; cmd < 2; cmd++) {
        for (int ts = 0; ts < 2; ts++) {
            mcdc_schema *s = NULL;
            CHECK_EQ_INT(mcdc_reader_output_schema(&s, cap, cmd == 1, &e), MCDC_OK);
            int32_t first = s->n_fields - 1;
            CHECK_EQ_INT(first, cmd ? 6 : 5);
            mcdc_batch *b = NULL;
            CHECK_EQ_INT(mcdc_batch_create(&b, s, 4, &e), MCDC_OK);
            int64_t us = 1735725600123000LL;
            for (int round = 0; round < 2; round++) { /* 3 rows, then 10 more */
                int64_t n = round ? 10 : 3;
                for (int64_t r = 0; r < n; r++)
                    CHECK_EQ_INT(mcdc_col_append_int(&b->columns[first], r, &e), MCDC_OK);
                CHECK_EQ_INT(mcdc_reader_fill_snapshot_stamp(b, first, lsn, ts == 1, us, n, &e),
                             MCDC_OK);
                CHECK_EQ_INT(mcdc_reader_fill_capture_instance(b, "dbo_t", n, &e), MCDC_OK);
            }
            CHECK_EQ_INT(mcdc_batch_seal(b, &e), MCDC_OK);
            CHECK_EQ_INT(mcdc_batch_validate(b, &e), MCDC_OK);
            CHECK_EQ_INT(b->rows, 13);
            const mcdc_column *c = b->columns;
            int bad = 0;
            for (int64_t r = 0; r < b->rows; r++) {
                const mcdc_column *l = &c[1];
                bad += l->offsets[r + 1] - l->offsets[r] != 22 ||
                       memcmp(l->data + l->offsets[r], lsn, 22) != 0;
                bad += mcdc_col_is_valid(&c[2], r); /* _seqval NULL */
                int32_t op;
                memcpy(&op, c[3].values + r * 4, 4);
                bad += op != 0 || !mcdc_col_is_valid(&c[3], r);
                if (cmd) bad += mcdc_col_is_valid(&c[4], r); /* _command_id NULL */
                const mcdc_column *t = &c[first - 1];
                int64_t v;
                memcpy(&v, t->values + r * 8, 8);
                bad += ts ? (!mcdc_col_is_valid(t, r) || v != us) : mcdc_col_is_valid(t, r);
            }
            CHECK_EQ_INT(bad, 0);
            CHECK_EQ_INT(c[2].null_count, 13);
            CHECK_EQ_INT(c[first - 1].null_count, ts ? 0 : 13);
            mcdc_batch_free(b);
            mcdc_schema_unref(s);
        }
    }
    mcdc_schema_unref(cap);
}
