#include <stdio.h>
#include <string.h>

#include "mcdc_facts.h"
#include "mcdc_finalization.h"
#include "mcdc_tables.h"
#include "mcdc_test.h"

TEST(tables_facts_and_control_schemas_have_reference_columns) {
    mcdc_schema *f, *c;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_facts_schema(&f, &e), MCDC_OK);
    CHECK_EQ_INT(f->n_fields, 29);
    CHECK_EQ_STR(f->fields[MCDC_F_RETENTION_HEADROOM_HOURS].name, "retention_headroom_hours");
    CHECK_EQ_INT(f->fields[MCDC_F_BATCH_ID].type, MCDC_TYPE_INT64);
    CHECK_EQ_INT(f->fields[MCDC_F_STARTED_AT].type, MCDC_TYPE_TIMESTAMP_NTZ);
    CHECK_EQ_STR(f->fields[MCDC_F_WRITTEN_AT].name, "written_at");
    CHECK_EQ_INT(mcdc_control_schema(&c, &e), MCDC_OK);
    CHECK_EQ_STR(c->fields[MCDC_C_FINALIZED_UNTIL].name, "finalized_until");
    CHECK_EQ_INT(c->fields[MCDC_C_SNAPSHOT_WAVE].type, MCDC_TYPE_INT32);
    mcdc_schema_unref(f);
    mcdc_schema_unref(c);
}

TEST(tables_bronze_schema_appends_sink_columns) {
    mcdc_schema *out, *br;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&out, 2, &e);
    mcdc_schema_set(out, 0, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, false, &e);
    mcdc_schema_set(out, 1, "amount", MCDC_TYPE_DECIMAL, 18, 4, 0, true, &e);
    CHECK_EQ_INT(mcdc_bronze_schema(&br, out, &e), MCDC_OK);
    CHECK_EQ_INT(br->n_fields, 5);
    CHECK_EQ_STR(br->fields[2].name, "_batch_id");
    CHECK_EQ_STR(br->fields[3].name, "_snapshot");
    CHECK_EQ_STR(br->fields[4].name, "_chunk");
    CHECK_EQ_INT(br->fields[1].precision, 18);
    /* widen a batch of the output schema into bronze, then fill the sink columns */
    mcdc_batch *b;
    mcdc_batch_create(&b, out, 1, &e);
    for (int i = 0; i < 3; i++) {
        mcdc_col_append_bytes(&b->columns[0], "0x00000000000000000001", 22, &e);
        mcdc_col_append_decimal(&b->columns[1], (uint64_t)i, 0, &e);
    }
    mcdc_batch_seal(b, &e);
    CHECK_EQ_INT(mcdc_batch_widen(b, br, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_col_fill_int(&b->columns[2], 7, 3, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_col_append_nulls(&b->columns[3], 3, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_col_append_nulls(&b->columns[4], 3, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_seal(b, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_batch_validate(b, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_row_get(b, 2, 2).i, 7);
    CHECK_EQ_INT(mcdc_row_get(b, 1, 3).kind, MCDC_CELL_NULL);
    /* a schema that does not extend the batch is refused */
    CHECK_EQ_INT(mcdc_batch_widen(b, out, &e), MCDC_E_INVALID);
    mcdc_batch_free(b);
    mcdc_schema_unref(br);
    mcdc_schema_unref(out);
}

TEST(tables_row_append_checks_kinds) {
    mcdc_schema *c;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_control_schema(&c, &e);
    mcdc_batch *b;
    mcdc_batch_create(&b, c, 1, &e);
    mcdc_cell cells[MCDC_C_COUNT];
    for (int i = 0; i < MCDC_C_COUNT; i++) cells[i] = mcdc_cell_null();
    cells[MCDC_C_TABLE_NAME] = mcdc_cell_text("bronze.orders");
    cells[MCDC_C_FINALIZED_UNTIL] = mcdc_cell_int(3600000000LL);
    CHECK_EQ_INT(mcdc_row_append(b, cells, &e), MCDC_OK);
    mcdc_batch_seal(b, &e);
    mcdc_cell t = mcdc_row_get(b, 0, MCDC_C_TABLE_NAME);
    CHECK_EQ_INT(t.i, 13);
    CHECK(memcmp(t.s, "bronze.orders", 13) == 0);
    CHECK_EQ_INT(mcdc_row_get(b, 0, MCDC_C_FINALIZED_UNTIL).i, 3600000000LL);
    cells[MCDC_C_FINALIZED_UNTIL] = mcdc_cell_text("not a time");
    CHECK_EQ_INT(mcdc_row_append(b, cells, &e), MCDC_E_INVALID);
    mcdc_batch_free(b);
    mcdc_schema_unref(c);
}

TEST(finalization_truncate_by_granularity) {
    int64_t us;
    mcdc_parse_ts_us("2025-11-02T13:47:12.345", 23, &us, NULL);
    char out[32];
    mcdc_format_ts_us(mcdc_truncate_us(us, MCDC_GRANULARITY_HOUR), 3, out);
    CHECK_EQ_STR(out, "2025-11-02T13:00:00.000");
    mcdc_format_ts_us(mcdc_truncate_us(us, MCDC_GRANULARITY_MINUTE), 3, out);
    CHECK_EQ_STR(out, "2025-11-02T13:47:00.000");
    mcdc_format_ts_us(mcdc_truncate_us(us, MCDC_GRANULARITY_DAY), 3, out);
    CHECK_EQ_STR(out, "2025-11-02T00:00:00.000");
    mcdc_parse_ts_us("1969-12-31T23:30:00", 19, &us, NULL);
    mcdc_format_ts_us(mcdc_truncate_us(us, MCDC_GRANULARITY_HOUR), 0, out);
    CHECK_EQ_STR(out, "1969-12-31T23:00:00");
    mcdc_granularity g;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_granularity_parse("Minute", &g, &e), MCDC_OK);
    CHECK_EQ_INT(g, MCDC_GRANULARITY_MINUTE);
    CHECK_EQ_INT(mcdc_granularity_parse("week", &g, &e), MCDC_E_INVALID);
}

TEST(facts_unit_stats_counts_and_bounds) {
    /* LSNs in no order, differing in their first, middle and last hex
     * digits, with nulls and a text of another width: the unit's min/max
     * are memcmp's over the LSN-wide texts, whatever batch they come in. */
    mcdc_schema *s = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s, 3, NULL), MCDC_OK);
    mcdc_schema_set(s, 0, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 1, "_operation", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 2, "_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, false, NULL);
    mcdc_unit_stats st;
    memset(&st, 0, sizeof st);
    char want_min[24] = "", want_max[24] = "";
    int64_t want_del = 0, want_ins = 0, want_upd = 0, want_lo = 0, want_hi = 0;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int batch = 0; batch < 3; batch++) {
        mcdc_batch *b = NULL;
        CHECK_EQ_INT(mcdc_batch_create(&b, s, 500, NULL), MCDC_OK);
        for (int r = 0; r < 500; r++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            char t[40];
            int n = snprintf(t, sizeof t, "0x%02X%06X%04X%08X", (unsigned)(x >> 56) & 0x3u,
                             (unsigned)(x >> 40) & 0x3u, (unsigned)(x >> 20) & 0x3u,
                             (unsigned)x & 0x1Fu);
            if (r % 17 == 3) mcdc_col_append_null(&b->columns[0], NULL);
            else if (r % 29 == 4) mcdc_col_append_bytes(&b->columns[0], "0x00", 4, NULL);
            else {
                CHECK_EQ_INT(n, MCDC_LSN_TEXT_LEN);
                mcdc_col_append_bytes(&b->columns[0], t, n, NULL);
                if (want_min[0] == 0 || memcmp(t, want_min, (size_t)n) < 0) memcpy(want_min, t, (size_t)n);
                if (want_max[0] == 0 || memcmp(t, want_max, (size_t)n) > 0) memcpy(want_max, t, (size_t)n);
            }
            int32_t op = (int32_t)(1 + (x >> 30) % 4);
            int64_t ts = (int64_t)((x >> 8) % 1000000);
            want_del += op == 1, want_ins += op == 2, want_upd += op == 4;
            if ((batch == 0 && r == 0) || ts < want_lo) want_lo = ts;
            if ((batch == 0 && r == 0) || ts > want_hi) want_hi = ts;
            mcdc_col_append_int(&b->columns[1], op, NULL);
            mcdc_col_append_int(&b->columns[2], ts, NULL);
        }
        CHECK_EQ_INT(mcdc_batch_seal(b, NULL), MCDC_OK);
        mcdc_unit_stats_add(&st, b);
        mcdc_batch_free(b);
    }
    CHECK_EQ_INT(st.rows, 1500);
    CHECK_EQ_INT(st.deletes, want_del);
    CHECK_EQ_INT(st.inserts, want_ins);
    CHECK_EQ_INT(st.updates, want_upd);
    CHECK_EQ_INT(st.min_ts, want_lo);
    CHECK_EQ_INT(st.max_ts, want_hi);
    CHECK_EQ_STR(st.min_lsn, want_min);
    CHECK_EQ_STR(st.max_lsn, want_max);
    mcdc_schema_unref(s);
}
