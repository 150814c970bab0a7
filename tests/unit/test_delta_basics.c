/* test_delta_basics.c - storage, names, schema JSON, stats JSON. */
#include <jansson.h>
#include <math.h>

#include "mcdc_delta_internal.h"
#include "mcdc_test.h"
#include "test_delta_util.h"

TEST(delta_storage_put_if_absent_never_overwrites) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_storage *st;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_local_create(&st, dir, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put_if_absent(st, "_delta_log/a.json", "one", 3, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put_if_absent(st, "_delta_log/a.json", "two!", 4, &e),
                 MCDC_E_CONFLICT);
    CHECK(strstr(e.message, "a.json") != NULL);
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_storage_get(st, "_delta_log/a.json", 100, &b, &e), MCDC_OK);
    CHECK(b.len == 3 && memcmp(b.data, "one", 3) == 0);
    mcdc_buf_reset(&b);
    CHECK_EQ_INT(mcdc_storage_get(st, "_delta_log/a.json", 2, &b, &e), MCDC_E_LIMIT);
    CHECK_EQ_INT(mcdc_storage_get(st, "_delta_log/missing", 100, &b, &e), MCDC_E_NOTFOUND);
    /* put replaces */
    CHECK_EQ_INT(mcdc_storage_put(st, "_delta_log/_last_checkpoint", "x", 1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(st, "_delta_log/_last_checkpoint", "yy", 2, &e), MCDC_OK);
    int64_t sz;
    CHECK_EQ_INT(mcdc_storage_size(st, "_delta_log/_last_checkpoint", &sz, &e), MCDC_OK);
    CHECK_EQ_INT(sz, 2);
    CHECK_EQ_INT(mcdc_storage_put_if_absent(st, "_delta_log/0.json", "z", 1, &e), MCDC_OK);
    /* listing: sorted, files only, no temp files left behind */
    mcdc_storage_listing l = {0};
    CHECK_EQ_INT(mcdc_storage_list(st, "_delta_log/", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 3);
    if (l.count == 3) {
        CHECK_EQ_STR(l.entries[0].name, "0.json");
        CHECK_EQ_STR(l.entries[1].name, "_last_checkpoint");
        CHECK_EQ_STR(l.entries[2].name, "a.json");
        CHECK_EQ_INT(l.entries[2].size, 3);
    }
    mcdc_storage_listing_free(&l);
    CHECK_EQ_INT(mcdc_storage_list(st, "_delta_log/a", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 1);
    mcdc_storage_listing_free(&l);
    CHECK_EQ_INT(mcdc_storage_list(st, "nothere/", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 0);
    CHECK_EQ_INT(mcdc_storage_delete(st, "_delta_log/0.json", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_delete(st, "_delta_log/0.json", &e), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_storage_put(st, "../escape", "x", 1, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_storage_put(st, "/abs", "x", 1, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_storage_put(st, "a//b", "x", 1, &e), MCDC_E_INVALID);
    mcdc_buf_free(&b);
    mcdc_storage_free(st);
    td_rmrf(dir);
}

TEST(delta_resolve_names_and_paths) {
    char *p = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "bronze.orders", "/lake", &e), MCDC_OK);
    CHECK_EQ_STR(p, "/lake/bronze.db/orders");
    mcdc_free(p);
    /* a bare name says neither ./orders nor a table under the warehouse */
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "orders", "/lake", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "./orders") != NULL && strstr(e.message, "schema.table") != NULL);
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "./t/x", NULL, &e), MCDC_OK);
    CHECK_EQ_STR(p, "./t/x");
    mcdc_free(p);
    /* Locations pass through as given: the storage's scheme table judges them. */
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "file:///data/t", NULL, &e), MCDC_OK);
    CHECK_EQ_STR(p, "file:///data/t");
    mcdc_free(p);
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "s.orders", "mem://w", &e), MCDC_OK);
    CHECK_EQ_STR(p, "mem://w/s.db/orders");
    mcdc_free(p);
    p = NULL;
    mcdc_delta_table *t = NULL;
    CHECK_EQ_INT(mcdc_delta_table_open(&t, "file:///data/t", NULL, &e), MCDC_OK);
    CHECK_EQ_STR(t ? mcdc_delta_table_location(t) : NULL, "/data/t");
    mcdc_delta_table_free(t);
    /* an object store is refused as the name is resolved, as a usage error */
    CHECK_EQ_INT(mcdc_delta_table_open(&t, "gs://bucket/t", NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "not built yet") != NULL);
    CHECK(t == NULL);
    /* Azure Blob is built: its locations resolve as they are */
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "az://lake/t", NULL, &e), MCDC_OK);
    CHECK_EQ_STR(p, "az://lake/t");
    mcdc_free(p);
    p = NULL;
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "s.t", "gs://b/wh", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "Google Cloud Storage") != NULL);
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "bronze.orders", NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "warehouse") != NULL);
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "a.b.c", "/lake", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, ".hidden", "/lake", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_delta_resolve_path(&p, "a.", "/lake", &e), MCDC_E_INVALID);
    CHECK(p == NULL);
}

TEST(delta_schema_json_round_trip_all_types) {
    mcdc_schema *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_schema_create(&s, 14, &e), MCDC_OK);
    static const struct {
        const char *n;
        mcdc_type_id t;
    } cols[] = {{"b", MCDC_TYPE_BOOL},   {"i8", MCDC_TYPE_INT8},   {"i16", MCDC_TYPE_INT16},
                {"i32", MCDC_TYPE_INT32}, {"i64", MCDC_TYPE_INT64}, {"f", MCDC_TYPE_FLOAT},
                {"d", MCDC_TYPE_DOUBLE}, {"dec", MCDC_TYPE_DECIMAL}, {"s", MCDC_TYPE_UTF8},
                {"bin", MCDC_TYPE_BINARY}, {"fb", MCDC_TYPE_FIXED_BINARY},
                {"dt", MCDC_TYPE_DATE32}, {"ts", MCDC_TYPE_TIMESTAMP_UTC},
                {"ntz", MCDC_TYPE_TIMESTAMP_NTZ}};
    for (int i = 0; i < 14; i++)
        CHECK_EQ_INT(mcdc_schema_set(s, i, cols[i].n, cols[i].t, 19, 4, 10, i % 2 == 0, &e),
                     MCDC_OK);
    const char *comments[14] = {0};
    comments[8] = "a \"quoted\" comment";
    char *json = NULL;
    CHECK_EQ_INT(mcdc_delta_schema_to_json(&json, s, comments, &e), MCDC_OK);
    CHECK(json && strstr(json, "\"type\":\"decimal(19,4)\"") != NULL);
    CHECK(json && strstr(json, "{\"name\":\"fb\",\"type\":\"binary\"") != NULL);
    CHECK(json && strstr(json, "\"type\":\"timestamp_ntz\"") != NULL);
    CHECK(json && strstr(json, "\"metadata\":{}") != NULL);
    CHECK(mcdc_delta_schema_needs_ntz(s));
    mcdc_schema *back = NULL;
    mcdc_delta_field_meta *meta = NULL;
    CHECK_EQ_INT(mcdc_delta_schema_from_json(&back, &meta, json, &e), MCDC_OK);
    if (back) {
        CHECK_EQ_INT(back->n_fields, 14);
        for (int i = 0; i < 14 && i < back->n_fields; i++) {
            mcdc_type_id want = cols[i].t == MCDC_TYPE_FIXED_BINARY ? MCDC_TYPE_BINARY : cols[i].t;
            CHECK_EQ_STR(back->fields[i].name, cols[i].n);
            CHECK_EQ_INT(back->fields[i].type, want);
            CHECK_EQ_INT(back->fields[i].nullable, i % 2 == 0);
        }
        CHECK_EQ_INT(back->fields[7].precision, 19);
        CHECK_EQ_INT(back->fields[7].scale, 4);
        CHECK_EQ_STR(meta[8].comment, "a \"quoted\" comment");
        CHECK(meta[0].comment == NULL);
        char why[128];
        CHECK(mcdc_delta__schema_contains(back, s, why, sizeof why));
        mcdc_delta_field_meta_free(meta, back->n_fields);
    }
    mcdc_schema_unref(back);
    mcdc_free(json);
    /* duplicate names differing in case are refused */
    mcdc_schema_set(s, 1, "B", MCDC_TYPE_INT8, 0, 0, 0, true, &e);
    CHECK_EQ_INT(mcdc_delta_schema_to_json(&json, s, NULL, &e), MCDC_E_INVALID);
    mcdc_schema_unref(s);
}

TEST(delta_schema_from_foreign_json) {
    mcdc_schema *s = NULL;
    mcdc_delta_field_meta *m = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    const char *nested =
        "{\"type\":\"struct\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"struct\","
        "\"fields\":[]},\"nullable\":true,\"metadata\":{}}]}";
    CHECK_EQ_INT(mcdc_delta_schema_from_json(&s, &m, nested, &e), MCDC_E_UNSUPPORTED);
    CHECK(strstr(e.message, "nested") != NULL);
    CHECK_EQ_INT(mcdc_delta_schema_from_json(&s, &m, "{\"type\":\"struct\"", &e), MCDC_E_CORRUPT);
    CHECK_EQ_INT(mcdc_delta_schema_from_json(
                     &s, &m,
                     "{\"type\":\"struct\",\"fields\":[{\"name\":\"x\",\"type\":\"decimal(40,2)\","
                     "\"nullable\":true,\"metadata\":{}}]}",
                     &e),
                 MCDC_E_CORRUPT);
    const char *mapped =
        "{\"type\":\"struct\",\"fields\":[{\"name\":\"x\",\"type\":\"decimal( 5 , 2 )\","
        "\"nullable\":false,\"metadata\":{\"delta.columnMapping.physicalName\":\"col-1\","
        "\"delta.columnMapping.id\":1}}]}";
    CHECK_EQ_INT(mcdc_delta_schema_from_json(&s, &m, mapped, &e), MCDC_OK);
    if (s) {
        CHECK_EQ_INT(s->fields[0].precision, 5);
        CHECK_EQ_INT(s->fields[0].nullable, 0);
        CHECK_EQ_STR(m[0].physical_name, "col-1");
        mcdc_delta_field_meta_free(m, s->n_fields);
    }
    mcdc_schema_unref(s);
}

static mcdc_schema *stats_schema(void) {
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 8, NULL);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 1, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 2, "ts", MCDC_TYPE_TIMESTAMP_UTC, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 3, "amount", MCDC_TYPE_DECIMAL, 19, 4, 0, true, NULL);
    mcdc_schema_set(s, 4, "day", MCDC_TYPE_DATE32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 5, "flag", MCDC_TYPE_BOOL, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 6, "x", MCDC_TYPE_DOUBLE, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 7, "local", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    return s;
}

TEST(delta_stats_json_values_and_rounding) {
    mcdc_schema *s = stats_schema();
    mcdc_delta_col_stats c[8];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 8; i++) c[i].has_min_max = true;
    c[0].min.i = -5;
    c[0].max.i = 9000000000LL;
    c[1].min.bytes = (const uint8_t *)"a\"b";
    c[1].min.len = 3;
    c[1].max.bytes = (const uint8_t *)"zz\n";
    c[1].max.len = 3;
    c[1].null_count = 2;
    c[2].min.i = 1704164645678901LL; /* 2024-01-02T03:04:05.678901Z */
    c[2].max.i = 1704164645678001LL;
    c[3].min.dec_lo = (uint64_t)-12345; /* -1.2345 */
    c[3].min.dec_hi = -1;
    c[3].max.dec_lo = 5;                /* 0.0005 */
    c[4].min.i = 0;
    c[4].max.i = 19723; /* 2024-01-01 */
    c[6].min.f = NAN;
    c[6].max.f = 2.5;
    c[7].min.i = -1; /* 1969-12-31T23:59:59.999999 -> floor .999 */
    c[7].max.i = 1000;
    char *j = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_delta_stats_json(&j, s, 10, c, -1, &e), MCDC_OK);
    json_t *root = j ? json_loads(j, 0, NULL) : NULL;
    CHECK(root != NULL);
    json_t *mn = json_object_get(root, "minValues"), *mx = json_object_get(root, "maxValues");
    CHECK_EQ_INT(json_integer_value(json_object_get(root, "numRecords")), 10);
    CHECK_EQ_INT(json_integer_value(json_object_get(mn, "id")), -5);
    CHECK_EQ_INT(json_integer_value(json_object_get(mx, "id")), 9000000000LL);
    CHECK_EQ_STR(json_string_value(json_object_get(mn, "name")), "a\"b");
    CHECK_EQ_STR(json_string_value(json_object_get(mx, "name")), "zz\n");
    CHECK_EQ_STR(json_string_value(json_object_get(mn, "ts")), "2024-01-02T03:04:05.678Z");
    CHECK_EQ_STR(json_string_value(json_object_get(mx, "ts")), "2024-01-02T03:04:05.679Z");
    CHECK(j && strstr(j, "\"amount\":-1.2345") != NULL);
    CHECK(j && strstr(j, "\"amount\":0.0005") != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(mn, "day")), "1970-01-01");
    CHECK_EQ_STR(json_string_value(json_object_get(mx, "day")), "2024-01-01");
    CHECK(json_object_get(mn, "flag") == NULL); /* booleans: null count only */
    CHECK(json_object_get(mn, "x") == NULL);    /* NaN omitted */
    CHECK(json_real_value(json_object_get(mx, "x")) == 2.5);
    CHECK_EQ_STR(json_string_value(json_object_get(mn, "local")), "1969-12-31T23:59:59.999");
    CHECK_EQ_STR(json_string_value(json_object_get(mx, "local")), "1970-01-01T00:00:00.001");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(root, "nullCount"), "name")), 2);
    CHECK_EQ_INT(json_object_size(json_object_get(root, "nullCount")), 8);
    json_decref(root);
    mcdc_free(j);
    /* only the first 2 columns indexed */
    CHECK_EQ_INT(mcdc_delta_stats_json(&j, s, 10, c, 2, &e), MCDC_OK);
    root = j ? json_loads(j, 0, NULL) : NULL;
    CHECK_EQ_INT(json_object_size(json_object_get(root, "nullCount")), 2);
    CHECK(json_object_get(json_object_get(root, "minValues"), "ts") == NULL);
    json_decref(root);
    mcdc_free(j);
    mcdc_schema_unref(s);
}

TEST(delta_stats_json_truncates_long_strings) {
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 1, NULL);
    mcdc_schema_set(s, 0, "s", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_delta_col_stats c;
    memset(&c, 0, sizeof c);
    c.has_min_max = true;
    /* 40 chars; the 32-char prefix ends with 'a' -> max prefix ends with 'b' */
    const char *lo = "0123456789012345678901234567890aXXXXXXXX";
    const char *hi = "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzaYYYYYYYY";
    c.min.bytes = (const uint8_t *)lo;
    c.min.len = strlen(lo);
    c.max.bytes = (const uint8_t *)hi;
    c.max.len = strlen(hi);
    char *j = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_delta_stats_json(&j, s, 1, &c, -1, &e), MCDC_OK);
    json_t *root = j ? json_loads(j, 0, NULL) : NULL;
    const char *mn = json_string_value(json_object_get(json_object_get(root, "minValues"), "s"));
    const char *mx = json_string_value(json_object_get(json_object_get(root, "maxValues"), "s"));
    CHECK_EQ_STR(mn, "0123456789012345678901234567890a");
    CHECK_EQ_STR(mx, "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzb");
    CHECK(mx && strcmp(mx, hi) > 0); /* still an upper bound */
    json_decref(root);
    mcdc_free(j);
    /* multi-byte: 33 x U+00E9 -> min is 32 of them (64 bytes), max ends in U+00EA */
    char big[80];
    for (int i = 0; i < 33; i++) {
        big[2 * i] = (char)0xC3;
        big[2 * i + 1] = (char)0xA9;
    }
    c.min.bytes = c.max.bytes = (const uint8_t *)big;
    c.min.len = c.max.len = 66;
    CHECK_EQ_INT(mcdc_delta_stats_json(&j, s, 1, &c, -1, &e), MCDC_OK);
    root = j ? json_loads(j, 0, NULL) : NULL;
    mn = json_string_value(json_object_get(json_object_get(root, "minValues"), "s"));
    mx = json_string_value(json_object_get(json_object_get(root, "maxValues"), "s"));
    CHECK(mn && strlen(mn) == 64);
    CHECK(mx && strlen(mx) == 64 && (unsigned char)mx[63] == 0xAA);
    json_decref(root);
    mcdc_free(j);
    /* invalid UTF-8: no bound rather than a wrong one */
    c.min.bytes = c.max.bytes = (const uint8_t *)"\xff\xfe";
    c.min.len = c.max.len = 2;
    CHECK_EQ_INT(mcdc_delta_stats_json(&j, s, 1, &c, -1, &e), MCDC_OK);
    CHECK(j && strstr(j, "\"minValues\":{}") != NULL);
    mcdc_free(j);
    mcdc_schema_unref(s);
}

TEST(delta_path_escaping_round_trip) {
    char *e = mcdc_delta__path_escape("a b/x%y=1/part-0.parquet");
    CHECK_EQ_STR(e, "a%20b/x%25y=1/part-0.parquet");
    char *d = e ? mcdc_delta__path_unescape(e) : NULL;
    CHECK_EQ_STR(d, "a b/x%y=1/part-0.parquet");
    mcdc_free(e);
    mcdc_free(d);
    char u1[37], u2[37];
    mcdc_delta__uuid(u1);
    mcdc_delta__uuid(u2);
    CHECK(strlen(u1) == 36 && u1[14] == '4' && strcmp(u1, u2) != 0);
}
