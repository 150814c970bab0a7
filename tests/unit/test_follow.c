/*
 * test_follow.c - the rules a stream follows across schema changes and
 * capture instance switches (mcdc_follow.h): which types hold which, the
 * union of two instances' columns, a batch cut at a newer instance's start,
 * the classification of DDL, the check before a newer instance is read and
 * the switch's payload; and the checkpoint binding that accepts the newer
 * instance's name.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_checkpoint.h"
#include "mcdc_follow.h"
#include "mcdc_test.h"

static mcdc_field F(mcdc_type_id t, int32_t p, int32_t s) {
    return (mcdc_field){.name = "c", .type = t, .precision = p, .scale = s, .nullable = true};
}

TEST(follow_fits_is_the_references_widening) {
    static const struct {
        mcdc_field from, to;
        bool fits;
    } cases[] = {
        {{.type = MCDC_TYPE_INT32}, {.type = MCDC_TYPE_INT32}, true},
        {{.type = MCDC_TYPE_INT16}, {.type = MCDC_TYPE_INT32}, true},
        {{.type = MCDC_TYPE_INT16}, {.type = MCDC_TYPE_INT64}, true},
        {{.type = MCDC_TYPE_INT32}, {.type = MCDC_TYPE_INT64}, true},
        {{.type = MCDC_TYPE_INT64}, {.type = MCDC_TYPE_INT32}, false}, /* int -> bigint at the source */
        {{.type = MCDC_TYPE_INT32}, {.type = MCDC_TYPE_INT16}, false},
        {{.type = MCDC_TYPE_INT32}, {.type = MCDC_TYPE_DOUBLE}, true},
        {{.type = MCDC_TYPE_INT16}, {.type = MCDC_TYPE_DOUBLE}, true},
        {{.type = MCDC_TYPE_INT64}, {.type = MCDC_TYPE_DOUBLE}, false}, /* 2^53 */
        {{.type = MCDC_TYPE_FLOAT}, {.type = MCDC_TYPE_DOUBLE}, true},
        {{.type = MCDC_TYPE_DOUBLE}, {.type = MCDC_TYPE_FLOAT}, false},
        {{.type = MCDC_TYPE_DATE32}, {.type = MCDC_TYPE_TIMESTAMP_NTZ}, true},
        {{.type = MCDC_TYPE_TIMESTAMP_NTZ}, {.type = MCDC_TYPE_DATE32}, false},
        {{.type = MCDC_TYPE_TIMESTAMP_NTZ}, {.type = MCDC_TYPE_TIMESTAMP_UTC}, false},
        {{.type = MCDC_TYPE_INT16}, {.type = MCDC_TYPE_DECIMAL, .precision = 5, .scale = 0}, true},
        {{.type = MCDC_TYPE_INT16}, {.type = MCDC_TYPE_DECIMAL, .precision = 6, .scale = 2}, false},
        {{.type = MCDC_TYPE_INT32}, {.type = MCDC_TYPE_DECIMAL, .precision = 12, .scale = 2}, true},
        {{.type = MCDC_TYPE_INT32}, {.type = MCDC_TYPE_DECIMAL, .precision = 11, .scale = 2}, false},
        {{.type = MCDC_TYPE_INT64}, {.type = MCDC_TYPE_DECIMAL, .precision = 20, .scale = 0}, true},
        {{.type = MCDC_TYPE_INT64}, {.type = MCDC_TYPE_DECIMAL, .precision = 38, .scale = 19}, false},
        {{.type = MCDC_TYPE_DECIMAL, .precision = 10, .scale = 2},
         {.type = MCDC_TYPE_DECIMAL, .precision = 10, .scale = 2}, true},
        {{.type = MCDC_TYPE_DECIMAL, .precision = 10, .scale = 2},
         {.type = MCDC_TYPE_DECIMAL, .precision = 12, .scale = 4}, true},
        {{.type = MCDC_TYPE_DECIMAL, .precision = 10, .scale = 2},
         {.type = MCDC_TYPE_DECIMAL, .precision = 12, .scale = 1}, false}, /* scale shrinks */
        {{.type = MCDC_TYPE_DECIMAL, .precision = 12, .scale = 2},
         {.type = MCDC_TYPE_DECIMAL, .precision = 11, .scale = 2}, false}, /* digits shrink */
        {{.type = MCDC_TYPE_DECIMAL, .precision = 5, .scale = 0}, {.type = MCDC_TYPE_INT32}, false},
        {{.type = MCDC_TYPE_FIXED_BINARY, .byte_width = 8}, {.type = MCDC_TYPE_BINARY}, true},
        {{.type = MCDC_TYPE_BINARY}, {.type = MCDC_TYPE_FIXED_BINARY, .byte_width = 8}, true},
        {{.type = MCDC_TYPE_UTF8}, {.type = MCDC_TYPE_UTF8}, true},
        {{.type = MCDC_TYPE_UTF8}, {.type = MCDC_TYPE_BINARY}, false},
        {{.type = MCDC_TYPE_BOOL}, {.type = MCDC_TYPE_INT32}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool got = mcdc_type_fits(&cases[i].from, &cases[i].to);
        if (got != cases[i].fits) {
            char a[48], b[48], m[160];
            mcdc_type_text(&cases[i].from, a);
            mcdc_type_text(&cases[i].to, b);
            snprintf(m, sizeof m, "case %zu: %s fits %s is %s", i, a, b, got ? "true" : "false");
            mcdc_test_fail(__FILE__, __LINE__, m);
        }
        mcdc_test_checks++;
    }
    char t[48];
    mcdc_field d = F(MCDC_TYPE_DECIMAL, 18, 2);
    mcdc_type_text(&d, t);
    CHECK_EQ_STR(t, "decimal(18,2)");
    d = F(MCDC_TYPE_INT64, 0, 0);
    mcdc_type_text(&d, t);
    CHECK_EQ_STR(t, "bigint");
}

static mcdc_schema *S(int n, const char *const *names, const mcdc_type_id *types) {
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, n, NULL);
    for (int i = 0; i < n; i++) mcdc_schema_set(s, i, names[i], types[i], 18, 2, 0, true, NULL);
    return s;
}

TEST(follow_union_takes_the_newer_type_when_it_holds_the_older) {
    const char *a_names[] = {"id", "qty", "note"}, *b_names[] = {"ID", "qty", "region"};
    mcdc_type_id a_types[] = {MCDC_TYPE_INT32, MCDC_TYPE_INT32, MCDC_TYPE_UTF8};
    mcdc_type_id b_types[] = {MCDC_TYPE_INT32, MCDC_TYPE_INT64, MCDC_TYPE_UTF8};
    mcdc_schema *a = S(3, a_names, a_types), *b = S(3, b_names, b_types);
    const mcdc_schema *both[] = {a, b};
    const char *names[] = {"dbo_t", "dbo_t_v2"};
    mcdc_schema *u = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_follow_union(&u, both, names, 2, &e), MCDC_OK);
    /* by name ignoring case, older first: id, qty (now bigint), note, region */
    CHECK_EQ_INT(u ? u->n_fields : -1, 4);
    if (u && u->n_fields == 4) {
        CHECK_EQ_STR(u->fields[0].name, "ID");
        CHECK_EQ_STR(u->fields[1].name, "qty");
        CHECK_EQ_INT(u->fields[1].type, MCDC_TYPE_INT64);
        CHECK_EQ_STR(u->fields[2].name, "note");
        CHECK_EQ_STR(u->fields[3].name, "region");
    }
    mcdc_schema_unref(u);
    /* the reverse (bigint then int) holds no schema */
    const mcdc_schema *rev[] = {b, a};
    CHECK_EQ_INT(mcdc_follow_union(&u, rev, names, 2, &e), MCDC_E_SCHEMA);
    CHECK(u == NULL);
    CHECK(strstr(e.message, "qty") && strstr(e.message, "bigint") && strstr(e.message, "dbo_t_v2"));
    mcdc_schema_unref(a);
    mcdc_schema_unref(b);
}

static mcdc_lsn L(unsigned v) {
    mcdc_lsn l;
    mcdc_lsn_from_pair(&l, 0, v, NULL);
    return l;
}

static unsigned U(const mcdc_lsn *l) {
    uint64_t hi, lo;
    mcdc_lsn_to_pair(&hi, &lo, l);
    return (unsigned)lo;
}

/* The pieces of [from, to] as "i:from-to i:from-to". */
static void cut_floor_text(char *out, size_t cap, const mcdc_lsn *starts, int n, int lowest,
                           unsigned from, unsigned to) {
    mcdc_follow_piece p[4];
    mcdc_lsn f = L(from), t = L(to);
    int k = mcdc_follow_cut(p, 4, starts, n, lowest, &f, &t);
    out[0] = 0;
    for (int i = 0; i < k; i++) {
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s%d:%u-%u", i ? " " : "", p[i].instance, U(&p[i].from),
                 U(&p[i].to));
    }
}

static void cut_text(char *out, size_t cap, const mcdc_lsn *starts, int n, unsigned from,
                     unsigned to) {
    cut_floor_text(out, cap, starts, n, 0, from, to);
}

TEST(follow_cut_reads_the_older_instance_before_s_and_the_newer_from_s) {
    char got[128];
    mcdc_lsn one[] = {L(10)};
    cut_text(got, sizeof got, one, 1, 20, 40);
    CHECK_EQ_STR(got, "0:20-40");
    mcdc_lsn two[] = {L(10), L(30)};
    cut_text(got, sizeof got, two, 2, 20, 40); /* spans S: both in one batch */
    CHECK_EQ_STR(got, "0:20-29 1:30-40");
    cut_text(got, sizeof got, two, 2, 30, 40); /* starts at S */
    CHECK_EQ_STR(got, "1:30-40");
    cut_text(got, sizeof got, two, 2, 35, 40); /* past S */
    CHECK_EQ_STR(got, "1:35-40");
    cut_text(got, sizeof got, two, 2, 20, 29); /* ends just before S */
    CHECK_EQ_STR(got, "0:20-29");
    cut_text(got, sizeof got, two, 2, 20, 30); /* S alone */
    CHECK_EQ_STR(got, "0:20-29 1:30-30");
    /* capture has not taken up the newer one: the older reads on */
    mcdc_lsn pending[] = {L(10), L(0)};
    cut_text(got, sizeof got, pending, 2, 20, 40);
    CHECK_EQ_STR(got, "0:20-40");
    /* the oldest is read whatever its start; an inverted range: nothing */
    cut_text(got, sizeof got, two, 2, 5, 12);
    CHECK_EQ_STR(got, "0:5-12");
    cut_text(got, sizeof got, two, 2, 41, 40);
    CHECK_EQ_STR(got, "");
    mcdc_lsn three[] = {L(10), L(30), L(35)};
    cut_text(got, sizeof got, three, 3, 20, 40);
    CHECK_EQ_STR(got, "0:20-29 1:30-34 2:35-40");
}

TEST(follow_cut_never_reads_an_instance_older_than_the_one_the_position_records) {
    char got[128];
    /* The stream read B (start 30) up to 40; cleanup of B moved its start to
     * 50 while A still holds rows: without the floor A fills 41-49 (rows
     * without B's columns), with it B alone is read from 41, and the
     * retention guard of B sees 41-49 gone. */
    mcdc_lsn cleaned[] = {L(10), L(50)};
    cut_text(got, sizeof got, cleaned, 2, 41, 60);
    CHECK_EQ_STR(got, "0:41-49 1:50-60");
    cut_floor_text(got, sizeof got, cleaned, 2, 1, 41, 60);
    CHECK_EQ_STR(got, "1:41-60");
    cut_floor_text(got, sizeof got, cleaned, 2, 1, 41, 45); /* the range ends before B's start */
    CHECK_EQ_STR(got, "1:41-45");
    /* Not cleaned: the floor changes nothing past its start. */
    mcdc_lsn two[] = {L(10), L(30)};
    cut_floor_text(got, sizeof got, two, 2, 1, 41, 60);
    CHECK_EQ_STR(got, "1:41-60");
    cut_floor_text(got, sizeof got, two, 2, 0, 41, 60);
    CHECK_EQ_STR(got, "1:41-60");
    /* A floor in the middle: newer instances are still cut in at their start,
     * a pending one (start zero) still left out; inverted: nothing. */
    mcdc_lsn three[] = {L(10), L(50), L(55)};
    cut_floor_text(got, sizeof got, three, 3, 1, 41, 60);
    CHECK_EQ_STR(got, "1:41-54 2:55-60");
    mcdc_lsn pending[] = {L(10), L(50), L(0)};
    cut_floor_text(got, sizeof got, pending, 3, 1, 41, 60);
    CHECK_EQ_STR(got, "1:41-60");
    cut_floor_text(got, sizeof got, three, 3, 2, 41, 60); /* the newest read: it alone */
    CHECK_EQ_STR(got, "2:41-60");
    cut_floor_text(got, sizeof got, three, 3, 1, 61, 60);
    CHECK_EQ_STR(got, "");
}

static mcdc_captured_column C(const char *name, int id, const char *type, int len, int p,
                              int s) {
    return (mcdc_captured_column){.name = (char *)name, .data_type = (char *)type,
                                  .column_id = id, .ordinal = id, .precision = p, .scale = s,
                                  .max_length = len};
}

/* The query's columns: id int, qty int, note string, amount decimal(18,2). */
static mcdc_schema *query(void) {
    const char *names[] = {"id", "qty", "note", "amount"};
    mcdc_type_id types[] = {MCDC_TYPE_INT32, MCDC_TYPE_INT32, MCDC_TYPE_UTF8, MCDC_TYPE_DECIMAL};
    return S(4, names, types);
}

TEST(follow_ddl_classification_stops_only_where_the_type_does_not_hold) {
    mcdc_schema *q = query();
    mcdc_follow_ddl add = {"dbo_t", L(50), "ALTER TABLE dbo.t ADD region int NULL"};
    mcdc_captured_column as_enabled[] = {C("id", 1, "int", 0, 10, 0), C("qty", 2, "int", 0, 10, 0),
                                         C("note", 3, "varchar", 10, 0, 0),
                                         C("amount", 4, "decimal", 0, 18, 2)};
    mcdc_follow_view v = {"dbo_t", as_enabled, 4};
    mcdc_error e = MCDC_ERROR_INIT;
    /* no DDL; ADD and DROP change no captured type */
    CHECK_EQ_INT(mcdc_follow_classify_ddl(NULL, 0, false, false, q, &v, 1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_follow_classify_ddl(&add, 1, false, false, q, &v, 1, &e), MCDC_OK);
    /* an ALTER the stream's type holds: varchar(40) and smallint are read as before */
    mcdc_captured_column wider[] = {C("id", 1, "int", 0, 10, 0), C("qty", 2, "smallint", 0, 5, 0),
                                    C("note", 3, "varchar", 40, 0, 0),
                                    C("amount", 4, "decimal", 0, 18, 2)};
    mcdc_follow_view w = {"dbo_t", wider, 4};
    mcdc_follow_ddl alter = {"dbo_t", L(60), "ALTER TABLE dbo.t ALTER COLUMN note varchar(40)"};
    CHECK_EQ_INT(mcdc_follow_classify_ddl(&alter, 1, false, false, q, &w, 1, &e), MCDC_OK);
    /* one it does not hold: bigint read as int, decimal(20,2) as decimal(18,2) */
    mcdc_captured_column narrow[] = {C("id", 1, "int", 0, 10, 0), C("qty", 2, "bigint", 0, 19, 0),
                                     C("note", 3, "varchar", 10, 0, 0),
                                     C("amount", 4, "decimal", 0, 20, 2)};
    mcdc_follow_view n = {"dbo_t", narrow, 4};
    mcdc_follow_ddl two[] = {{"dbo_t", L(60), "ALTER TABLE dbo.t ALTER COLUMN qty bigint"},
                             {"dbo_t", L(70), "ALTER TABLE dbo.t ALTER COLUMN amount decimal(20,2)"}};
    CHECK_EQ_INT(mcdc_follow_classify_ddl(two, 2, false, false, q, &n, 1, &e), MCDC_E_SCHEMA);
    CHECK(strstr(e.message, "qty bigint (read as int)") != NULL);
    CHECK(strstr(e.message, "amount decimal(20,2) (read as decimal(18,2))") != NULL);
    CHECK(strstr(e.message, "ALTER COLUMN qty bigint") && strstr(e.message, "new target"));
    CHECK(strstr(e.message, "0x00000000000000000046") != NULL); /* the second DDL's LSN */
    /* a column the stream does not read is not compared */
    const char *some_names[] = {"id", "note"};
    mcdc_type_id some_types[] = {MCDC_TYPE_INT32, MCDC_TYPE_UTF8};
    mcdc_schema *some = S(2, some_names, some_types);
    CHECK_EQ_INT(mcdc_follow_classify_ddl(two, 2, false, false, some, &n, 1, &e), MCDC_OK);
    /* a spatial type (read as EWKB bytes) no longer reads as the stream's text */
    mcdc_captured_column variant[] = {C("note", 3, "geometry", 0, 0, 0)};
    mcdc_follow_view vv = {"dbo_t", variant, 1};
    CHECK_EQ_INT(mcdc_follow_classify_ddl(&alter, 1, false, true, some, &vv, 1, &e), MCDC_E_SCHEMA);
    CHECK(strstr(e.message, "note geometry") && strstr(e.message, "columns option"));
    /* schemaChangePolicy=fail: any DDL, even one that changes nothing */
    CHECK_EQ_INT(mcdc_follow_classify_ddl(&add, 1, true, false, q, &v, 1, &e), MCDC_E_SCHEMA);
    CHECK(strstr(e.message, "schemaChangePolicy=fail") && strstr(e.message, "ADD region"));
    CHECK(strstr(e.message, "schemaChangePolicy=classify") != NULL);
    mcdc_schema_unref(some);
    mcdc_schema_unref(q);
}

TEST(follow_a_newer_instance_is_read_in_place_only_when_the_schema_holds_it) {
    mcdc_schema *q = query();
    mcdc_lsn s = L(0x30);
    char *warning = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    /* the same columns (some dropped): in place */
    mcdc_captured_column same[] = {C("id", 1, "int", 0, 10, 0), C("note", 3, "nvarchar", 20, 0, 0)};
    mcdc_follow_view v = {"dbo_t_v2", same, 2};
    CHECK_EQ_INT(mcdc_follow_check_switch(q, false, &v, &s, &warning, &e), MCDC_OK);
    CHECK(warning == NULL);
    /* a new column, and a type the schema does not hold: stop at S */
    mcdc_captured_column more[] = {C("id", 1, "int", 0, 10, 0), C("qty", 2, "bigint", 0, 19, 0),
                                   C("region", 5, "nvarchar", 20, 0, 0)};
    v = (mcdc_follow_view){"dbo_t_v2", more, 3};
    CHECK_EQ_INT(mcdc_follow_check_switch(q, false, &v, &s, &warning, &e), MCDC_E_SCHEMA);
    CHECK(warning == NULL);
    CHECK(strstr(e.message, "dbo_t_v2") && strstr(e.message, "new column(s) region"));
    CHECK(strstr(e.message, "qty bigint (read as int)") != NULL);
    CHECK(strstr(e.message, "0x00000000000000000030") && strstr(e.message, "Restart"));
    /* with the columns option the list decides: unlisted columns are not read */
    CHECK_EQ_INT(mcdc_follow_check_switch(q, true, &v, &s, &warning, &e), MCDC_OK);
    CHECK(warning && strstr(warning, "region") && strstr(warning, "not read"));
    mcdc_free(warning);
    mcdc_schema_unref(q);
}

TEST(follow_switch_detail_is_the_references_payload) {
    mcdc_schema *q = query();
    mcdc_lsn s = L(0x30);
    mcdc_captured_column kept[] = {C("ID", 1, "int", 0, 10, 0), C("qty", 2, "int", 0, 10, 0),
                                   C("note", 3, "varchar", 10, 0, 0),
                                   C("amount", 4, "decimal", 0, 18, 2)};
    mcdc_follow_view v = {"dbo_t_v2", kept, 4};
    char *d = mcdc_follow_switch_detail("dbo_t", &v, q, &s);
    CHECK_EQ_STR(d, "{\"start_lsn\":\"0x00000000000000000030\",\"not_captured\":[],"
                    "\"text\":\"dbo_t -> dbo_t_v2\"}");
    free(d);
    v.n_cols = 2; /* note and amount no longer captured */
    d = mcdc_follow_switch_detail("dbo_t", &v, q, &s);
    CHECK_EQ_STR(d, "{\"start_lsn\":\"0x00000000000000000030\",\"not_captured\":[\"note\","
                    "\"amount\"],\"text\":\"dbo_t -> dbo_t_v2; no longer captured, read as NULL: "
                    "note, amount\"}");
    free(d);
    mcdc_schema_unref(q);
}

TEST(follow_a_checkpoint_bound_to_the_older_instance_takes_the_newer_name) {
    mcdc_storage_mem *mem = NULL;
    mcdc_storage_mem_create(&mem, "ck", NULL);
    mcdc_storage_env env = mcdc_storage_mem_env(mem);
    mcdc_ckpt_binding b = {.job = "stream", .app_id = "a", .target = "mem://ck/t",
                           .capture_instance = "dbo_t"};
    mcdc_checkpoint *c = NULL;
    bool fresh = false;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_checkpoint_open(&c, &env, "mem://ck/ckpt", &b, MCDC_POS_OFFSET, &fresh, &e),
                 MCDC_OK);
    CHECK(fresh);
    mcdc_pos start = {.kind = MCDC_POS_OFFSET}, end = {.kind = MCDC_POS_OFFSET};
    start.offset.lsn = L(0x10);
    end.offset.lsn = L(0x20);
    snprintf(end.offset.ci, sizeof end.offset.ci, "dbo_t_v2");
    CHECK_EQ_INT(mcdc_checkpoint_bind(c, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_checkpoint_write_plan(c, 0, &start, &end, &e), MCDC_OK);
    mcdc_checkpoint_free(c);
    char *bound = NULL, *last = NULL;
    CHECK_EQ_INT(mcdc_checkpoint_peek_instances(&env, "mem://ck/ckpt", &bound, &last, &e), MCDC_OK);
    CHECK_EQ_STR(bound, "dbo_t");
    CHECK_EQ_STR(last, "dbo_t_v2");
    mcdc_free(bound);
    mcdc_free(last);
    /* another name is another stream... */
    b.capture_instance = "dbo_t_v2";
    CHECK_EQ_INT(mcdc_checkpoint_open(&c, &env, "mem://ck/ckpt", &b, MCDC_POS_OFFSET, &fresh, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, "capture instance 'dbo_t'") != NULL);
    /* ...unless the job knows both name its table */
    b.capture_instance_alias = "DBO_T";
    CHECK_EQ_INT(mcdc_checkpoint_open(&c, &env, "mem://ck/ckpt", &b, MCDC_POS_OFFSET, &fresh, &e), MCDC_OK);
    CHECK(!fresh);
    mcdc_checkpoint_free(c);
    b.capture_instance = "dbo_other";
    b.capture_instance_alias = "dbo_t_v3";
    CHECK_EQ_INT(mcdc_checkpoint_open(&c, &env, "mem://ck/ckpt", &b, MCDC_POS_OFFSET, &fresh, &e), MCDC_E_MISMATCH);
    /* a fresh directory names nothing */
    CHECK_EQ_INT(mcdc_checkpoint_peek_instances(&env, "mem://ck/none", &bound, &last, &e), MCDC_OK);
    CHECK(bound == NULL && last == NULL);
    mcdc_storage_mem_release(mem);
}
