/* test_repair.c - repair's key objects (src/reconcile/mcdc_repair_key.c) and
 * how silver ranks and decides a repair row (src/silver). */
#include <stdlib.h>
#include <string.h>

#include "mcdc_repair.h"
#include "mcdc_test.h"

/* bronze's columns: the meta ones and captured ones of each key type */
static mcdc_schema *bronze_schema(void) {
    static const struct {
        const char *name;
        mcdc_type_id t;
        int32_t p, s, w;
    } F[] = {{"_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0}, {"id", MCDC_TYPE_INT32, 0, 0, 0},
             {"Region", MCDC_TYPE_UTF8, 0, 0, 0},     {"amount", MCDC_TYPE_DECIMAL, 9, 2, 0},
             {"day", MCDC_TYPE_DATE32, 0, 0, 0},      {"at", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0},
             {"b", MCDC_TYPE_BINARY, 0, 0, 0},        {"small", MCDC_TYPE_INT8, 0, 0, 0},
             {"f", MCDC_TYPE_DOUBLE, 0, 0, 0}};
    mcdc_schema *s;
    mcdc_schema_create(&s, 9, NULL);
    for (int i = 0; i < 9; i++) mcdc_schema_set(s, i, F[i].name, F[i].t, F[i].p, F[i].s, F[i].w, true, NULL);
    return s;
}

static mcdc_schema *keys_of(const mcdc_schema *bs, const char *const *names, int n) {
    mcdc_schema *s;
    mcdc_schema_create(&s, n, NULL);
    for (int i = 0; i < n; i++) {
        const mcdc_field *f = &bs->fields[mcdc_schema_find(bs, names[i])];
        mcdc_schema_set(s, i, f->name, f->type, f->precision, f->scale, f->byte_width, true, NULL);
    }
    return s;
}

/* Parses text against names; returns rc, the bound as compact JSON in out
 * (or the error message), and the rows the key batch got. */
static int parse(const char *const *names, int n, const char *text, char *out, size_t cap,
                 int64_t *rows) {
    mcdc_schema *bs = bronze_schema(), *ks = keys_of(bs, names, n);
    mcdc_batch *b = NULL;
    mcdc_batch_create(&b, ks, 1, NULL);
    json_t *bound = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_repair_key_parse(text, strlen(text), 2, bs, names, n, b, &bound, &e);
    mcdc_batch_seal(b, NULL);
    *rows = b->rows;
    if (rc == MCDC_OK) {
        char *j = json_dumps(bound, JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(out, cap, "%s", j ? j : "?");
        free(j);
    } else {
        snprintf(out, cap, "%s", e.message);
    }
    json_decref(bound);
    mcdc_batch_free(b);
    mcdc_schema_unref(ks);
    mcdc_schema_unref(bs);
    return rc;
}

TEST(repair_key_values_are_typed_as_bronze_types_them) {
    static const struct {
        const char *names[3];
        int n;
        const char *in, *bound;
    } OK[] = {
        {{"id"}, 1, "{\"id\": 42}", "42"},
        {{"id"}, 1, "{\"ID\": -7}", "-7"}, /* column names ignore case, as SQL Server's do */
        {{"id"}, 1, "{\"id\": null}", "null"},
        {{"Region", "id"}, 2, "{\"id\": 7, \"region\": \"EU\"}", "[\"EU\",7]"},
        {{"amount"}, 1, "{\"amount\": \"-12.5\"}", "\"-12.50\""},
        {{"amount"}, 1, "{\"amount\": 3}", "\"3.00\""},
        {{"amount"}, 1, "{\"amount\": 0.25}", "\"0.25\""},
        {{"day"}, 1, "{\"day\": \"1969-12-31\"}", "\"1969-12-31\""},
        {{"at"}, 1, "{\"at\": \"2026-12-01T15:00:00.5\"}", "\"2026-12-01T15:00:00.500000\""},
        {{"at"}, 1, "{\"at\": \"2026-12-01 15:00:00\"}", "\"2026-12-01T15:00:00.000000\""},
        {{"b"}, 1, "{\"b\": \"0x0aFF\"}", "\"0x0AFF\""},
        {{"b"}, 1, "{\"b\": \"0x\"}", "\"0x\""},
        {{"small"}, 1, "{\"small\": -128}", "-128"},
    };
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++) {
        char out[1100];
        int64_t rows = -1;
        int rc = parse(OK[i].names, OK[i].n, OK[i].in, out, sizeof out, &rows);
        CHECK_EQ_INT(rc, MCDC_OK);
        CHECK_EQ_STR(out, OK[i].bound);
        CHECK_EQ_INT(rows, 1);
    }
}

TEST(repair_bad_keys_are_refused_saying_which_and_why) {
    static const struct {
        const char *names[2];
        int n;
        const char *in, *says;
    } BAD[] = {
        {{"id"}, 1, "{\"id\": 1, \"name\": \"x\"}", "'name' is not a key column"},
        {{"Region", "id"}, 2, "{\"id\": 1}", "a key column is missing (column 'Region')"},
        {{"id"}, 1, "{\"id\": \"1\"}", "needs a JSON integer (column 'id')"},
        {{"id"}, 1, "{\"id\": 2147483648}", "out of the column's range"},
        {{"small"}, 1, "{\"small\": 128}", "out of the column's range"},
        {{"id"}, 1, "{\"id\": 1.5}", "needs a JSON integer"},
        {{"id"}, 1, "[1]", "not a JSON object"},
        {{"id"}, 1, "{\"id\": 1", "not JSON"},
        {{"id"}, 1, "{\"id\": 1, \"id\": 2}", "not JSON"},
        {{"id"}, 1, "{\"id\": 1, \"ID\": 2}", "given twice"},
        {{"Region"}, 1, "{\"Region\": 5}", "needs a JSON string"},
        {{"amount"}, 1, "{\"amount\": \"1.234\"}", "precision and scale"},
        {{"amount"}, 1, "{\"amount\": \"12345678.1\"}", "precision and scale"},
        {{"amount"}, 1, "{\"amount\": \"1e3\"}", "precision and scale"},
        {{"day"}, 1, "{\"day\": \"2026-12-01T00:00:00\"}", "YYYY-MM-DD"},
        {{"at"}, 1, "{\"at\": \"yesterday\"}", "ISO 8601"},
        {{"b"}, 1, "{\"b\": \"0x0\"}", "hex digits"},
        {{"b"}, 1, "{\"b\": \"0xZZ\"}", "hex digits"},
        {{"f"}, 1, "{\"f\": 1.5}", "does not take keys of this column's type"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char out[1100];
        int64_t rows = -1;
        int rc = parse(BAD[i].names, BAD[i].n, BAD[i].in, out, sizeof out, &rows);
        CHECK_EQ_INT(rc, MCDC_E_INVALID);
        CHECK(strstr(out, BAD[i].says) != NULL);
        CHECK(strstr(out, "key 3") != NULL); /* the third of the list */
        CHECK(strstr(out, "nothing was written") != NULL);
        CHECK_EQ_INT(rows, 0);
        if (strstr(out, BAD[i].says) == NULL) fprintf(stderr, "  %s -> %s\n", BAD[i].in, out);
    }
}

TEST(repair_run_ids) {
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_repair_run_id_check("11111111-2222-3333-4444-555555555555", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_repair_run_id_check("r1.a_b:c", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_repair_run_id_check("", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_repair_run_id_check(NULL, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_repair_run_id_check("a b", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "run id 'a b'") != NULL);
    char longer[MCDC_REPAIR_RUN_ID_MAX + 2];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    CHECK_EQ_INT(mcdc_repair_run_id_check(longer, &e), MCDC_E_INVALID);
    longer[MCDC_REPAIR_RUN_ID_MAX] = 0;
    CHECK_EQ_INT(mcdc_repair_run_id_check(longer, &e), MCDC_OK);
}

/* ---- how silver takes a repair row ------------------------------------------------- */

static silver_rank rank(const char *lsn, bool has_cmd, int32_t cmd, const char *seq, int op) {
    silver_rank r;
    mcdc_error e = MCDC_ERROR_INIT;
    silver_rank_make(&r, lsn, 22, has_cmd, cmd, seq, seq ? 22 : 0, op, &e);
    return r;
}

TEST(repair_rank_outranks_its_lsn_and_loses_to_later_ones) {
    const char *L = "0x0000002A000001000010", *before = "0x0000002A00000100000F",
               *after = "0x0000002A000001000011";
    silver_rank rep = rank(L, true, SILVER_REPAIR_COMMAND_ID, SILVER_REPAIR_SEQVAL, 4);
    silver_rank del = rank(L, true, SILVER_REPAIR_COMMAND_ID, SILVER_REPAIR_SEQVAL, 1);
    silver_rank same = rank(L, true, 5, "0x0000002A000001000010", 4);
    silver_rank later = rank(after, true, 0, "0x0000002A000001000011", 2);
    CHECK(silver_rank_is_repair(&rep) && silver_rank_is_repair(&del));
    CHECK(!silver_rank_is_repair(&same) && !silver_rank_is_repair(&later));
    CHECK(memcmp(rep.b, same.b, SILVER_RANK_BYTES) > 0);  /* a change of L: the repair wins */
    CHECK(memcmp(rep.b, later.b, SILVER_RANK_BYTES) < 0); /* a later change wins */
    CHECK(memcmp(rep.b, del.b, SILVER_RANK_BYTES) > 0);
    uint8_t row_l[10], row_before[10], row_after[10];
    CHECK(silver_lsn_parse(row_l, L, 22) && silver_lsn_parse(row_before, before, 22) &&
          silver_lsn_parse(row_after, after, 22));
    /* a change replaces only an older image; a repair one of its own LSN or none too */
    CHECK_EQ_INT(silver_decide(&same, true, row_l, false), SILVER_KEEP);
    CHECK_EQ_INT(silver_decide(&rep, true, row_l, false), SILVER_UPDATE);
    CHECK_EQ_INT(silver_decide(&rep, true, row_before, false), SILVER_UPDATE);
    CHECK_EQ_INT(silver_decide(&rep, false, row_l, false), SILVER_UPDATE);
    CHECK_EQ_INT(silver_decide(&rep, true, row_after, false), SILVER_KEEP);
    CHECK_EQ_INT(silver_decide(&del, false, row_l, false), SILVER_DELETE);
    CHECK_EQ_INT(silver_decide(&del, true, row_l, false), SILVER_DELETE);
    CHECK_EQ_INT(silver_decide(&del, true, row_after, false), SILVER_KEEP);
    CHECK(silver_inserts(&rep) && !silver_inserts(&del));
}
