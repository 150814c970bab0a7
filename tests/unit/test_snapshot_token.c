/* Snapshot chunk tokens (mcdc_snapshot_token.h, mcdc_snapshot_token_parse):
 * they round trip; malformed, altered, cut or foreign text is
 * MCDC_E_INVALID saying what is wrong, for every single-byte change and
 * every truncation; the bounds' shape follows the keys. */
#include <stdlib.h>
#include <string.h>

#include "mcdc_snapshot_token.h"
#include "mcdc_test.h"

static json_t *js(const char *text) {
    json_error_t je;
    return json_loads(text, JSON_DECODE_ANY, &je);
}

static mcdc_snapshot_token sample(void) {
    mcdc_snapshot_token t;
    memset(&t, 0, sizeof t);
    snprintf(t.capture_instance, sizeof t.capture_instance, "dbo_orders");
    t.keys = js("[\"region\",\"id\"]");
    t.lo = js("[\"Nord \\u00e9\",120]");
    t.hi = js("[\"west\",null]");
    t.index = 1;
    t.count = 4;
    snprintf(t.schema_id, sizeof t.schema_id, "0123456789abcdef");
    return t;
}

static bool same(const mcdc_snapshot_token *a, const mcdc_snapshot_token *b) {
    return strcmp(a->capture_instance, b->capture_instance) == 0 && json_equal(a->keys, b->keys) &&
           json_equal(a->lo, b->lo) && json_equal(a->hi, b->hi) && a->index == b->index &&
           a->count == b->count && strcmp(a->schema_id, b->schema_id) == 0;
}

static int decode(const char *s, mcdc_error *e) {
    mcdc_snapshot_token t;
    int rc = mcdc_snapshot_token_decode(&t, s, strlen(s), e);
    mcdc_snapshot_token_clear(&t);
    return rc;
}

TEST(snapshot_token_round_trips) {
    mcdc_snapshot_token t = sample(), back;
    char *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_snapshot_token_encode(&s, &t, &e), MCDC_OK);
    CHECK(s != NULL && strncmp(s, "{\"mssqlcdc_snapshot\":1,\"capture_instance\":\"dbo_orders\","
                                  "\"keys\":[\"region\",\"id\"],\"lo\":[\"Nord \xc3\xa9\",120],"
                                  "\"hi\":[\"west\",null],\"index\":1,\"count\":4,",
                          120) == 0);
    CHECK_EQ_INT(mcdc_snapshot_token_decode(&back, s, strlen(s), &e), MCDC_OK);
    CHECK(same(&t, &back));
    mcdc_snapshot_token_clear(&back);
    mcdc_free(s);
    mcdc_snapshot_token_clear(&t);
    /* One key: scalars; no key: nulls; the extremes of the fields. */
    static const char *const shapes[][3] = {
        {"[\"id\"]", "null", "-9223372036854775808"},
        {"[\"id\"]", "9223372036854775807", "null"},
        {"[\"at\"]", "\"2025-01-01T10:00:00.123456\"", "\"0x00FF\""},
        {"[]", "null", "null"},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        t = sample();
        mcdc_snapshot_token_clear(&t);
        t.keys = js(shapes[k][0]);
        t.lo = js(shapes[k][1]);
        t.hi = js(shapes[k][2]);
        t.count = k == 1 ? MCDC_SNAPSHOT_CHUNKS_MAX : 1;
        t.index = t.count - 1;
        s = NULL;
        if (mcdc_snapshot_token_encode(&s, &t, &e) != MCDC_OK ||
            mcdc_snapshot_token_decode(&back, s, strlen(s), &e) != MCDC_OK || !same(&t, &back))
            bad++;
        mcdc_snapshot_token_clear(&back);
        mcdc_snapshot_token_clear(&t);
        mcdc_free(s);
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(snapshot_token_every_byte_change_and_cut_is_invalid) {
    mcdc_snapshot_token t = sample();
    char *s = NULL;
    CHECK_EQ_INT(mcdc_snapshot_token_encode(&s, &t, NULL), MCDC_OK);
    size_t n = strlen(s);
    int wrong = 0, checked = 0;
    const char repl[] = {'0', 'A', 'z', '"', ' ', '}', '9', ',', '['};
    char *m = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        for (size_t r = 0; r < sizeof repl; r++) {
            if (s[i] == repl[r]) continue;
            memcpy(m, s, n + 1);
            m[i] = repl[r];
            mcdc_error e = MCDC_ERROR_INIT;
            mcdc_snapshot_token back;
            int rc = mcdc_snapshot_token_decode(&back, m, n, &e);
            checked++;
            /* A space between tokens is still the same JSON. */
            if (rc == MCDC_OK && !(repl[r] == ' ' && same(&back, &t))) wrong++;
            if (rc != MCDC_OK &&
                (rc != MCDC_E_INVALID || strstr(e.message, "snapshot token") == NULL))
                wrong++;
            mcdc_snapshot_token_clear(&back);
        }
    }
    for (size_t cut = 0; cut < n; cut++) {
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_snapshot_token back;
        checked++;
        if (mcdc_snapshot_token_decode(&back, s, cut, &e) != MCDC_E_INVALID) wrong++;
        mcdc_snapshot_token_clear(&back);
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK(checked > 1000);
    free(m);
    mcdc_free(s);
    mcdc_snapshot_token_clear(&t);
}

TEST(snapshot_token_malformed_says_what_is_wrong) {
#define HEAD "{\"mssqlcdc_snapshot\":1,\"capture_instance\":\"ci\","
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"", "empty"},
        {"[]", "not a JSON object"},
        {"{\"mssqlcdc_snapshot\":2}", "version 2"},
        {"{\"mssqlcdc_range\":1}", "unknown field 'mssqlcdc_range'"},
        {HEAD "\"lo\":null}", "'keys' is missing"},
        {HEAD "\"keys\":\"id\"}", "'keys' is not an array"},
        {HEAD "\"keys\":[\"\"]}", "'keys' is not an array"},
        {HEAD "\"keys\":[1]}", "'keys' is not an array"},
        {HEAD "\"keys\":[\"id\"]}", "'lo' is missing"},
        {HEAD "\"keys\":[\"id\"],\"lo\":[1],\"hi\":null}", "'lo' is not a bound of 1"},
        {HEAD "\"keys\":[\"id\"],\"lo\":1.5,\"hi\":null}", "'lo' is not a bound of 1"},
        {HEAD "\"keys\":[\"id\"],\"lo\":true,\"hi\":null}", "'lo' is not a bound of 1"},
        {HEAD "\"keys\":[\"a\",\"b\"],\"lo\":null,\"hi\":[1]}", "'hi' is not a bound of 2"},
        {HEAD "\"keys\":[\"a\",\"b\"],\"lo\":null,\"hi\":[1,{}]}", "'hi' is not a bound of 2"},
        {HEAD "\"keys\":[],\"lo\":5,\"hi\":null}", "'lo' is not a bound of 0"},
        {HEAD "\"keys\":[],\"lo\":null,\"hi\":null,\"count\":0}", "'count' is out of range"},
        {HEAD "\"keys\":[],\"lo\":null,\"hi\":null,\"count\":2,\"index\":2}",
         "'index' is out of range"},
        {HEAD "\"keys\":[],\"lo\":null,\"hi\":null,\"count\":1,\"index\":0,\"schema\":\"x\"}",
         "'schema' is not 16"},
        {HEAD "\"keys\":[],\"lo\":null,\"hi\":null,\"count\":1,\"index\":0,"
              "\"schema\":\"0123456789abcdef\",\"check\":\"0123456789abcdef\"}",
         "changed or cut after planning"},
    };
#undef HEAD
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcdc_error e = MCDC_ERROR_INIT;
        int rc = decode(cases[i].text, &e);
        if (rc != MCDC_E_INVALID || strstr(e.message, cases[i].says) == NULL ||
            strstr(e.message, "mcdc_snapshot_plan_token") == NULL) {
            fprintf(stderr, "  case %zu: rc %d, message: %s\n", i, rc, e.message);
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(snapshot_token_public_parse_and_read_refusals) {
    mcdc_snapshot_token t = sample();
    char *s = NULL;
    CHECK_EQ_INT(mcdc_snapshot_token_encode(&s, &t, NULL), MCDC_OK);
    mcdc_snapshot_info info = MCDC_SNAPSHOT_INFO_INIT;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_snapshot_token_parse(&info, s, &e), MCDC_OK);
    CHECK_EQ_STR(info.capture_instance, "dbo_orders");
    CHECK(info.index == 1 && info.count == 4 && info.n_keys == 2);
    mcdc_snapshot_info raw;
    memset(&raw, 0, sizeof raw);
    CHECK_EQ_INT(mcdc_snapshot_token_parse(&raw, s, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "MCDC_SNAPSHOT_INFO_INIT") != NULL);
    CHECK_EQ_INT(mcdc_snapshot_token_parse(&info, NULL, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_snapshot_token_parse(&info, "{}", &e), MCDC_E_INVALID);
    /* No server is needed to refuse these. */
    mcdc_opts *o = NULL;
    mcdc_opts_create(&o, NULL);
    struct ArrowArrayStream st;
    CHECK_EQ_INT(mcdc_snapshot_read(&st, o, s, NULL, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "lsn") != NULL);
    CHECK_EQ_INT(mcdc_snapshot_read(&st, o, s, "0xZZ", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "mcdc_snapshot_plan_lsn") != NULL);
    CHECK_EQ_INT(mcdc_snapshot_read(&st, o, s, "0x0000002A000001F00003", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "no connectionString") != NULL);
    mcdc_opts_set(o, "captureInstance", "dbo_customers", NULL, NULL);
    CHECK_EQ_INT(mcdc_snapshot_read(&st, o, s, "0x0000002A000001F00003", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "mcdc_snapshot_read: the token reads capture instance 'dbo_orders' "
                            "but the options name 'dbo_customers'") != NULL);
    CHECK_EQ_INT(mcdc_snapshot_read(&st, o, "{}", "0x0000002A000001F00003", &e), MCDC_E_INVALID);
    CHECK(st.release == NULL);
    mcdc_snapshot_plan *p = NULL;
    CHECK_EQ_INT(mcdc_snapshot_plan_create(&p, o, -1, &e), MCDC_E_INVALID);
    CHECK(p == NULL && strstr(e.message, "chunk_rows is -1") != NULL);
    CHECK(mcdc_snapshot_plan_count(NULL) == 0 && mcdc_snapshot_plan_token(NULL, 0) == NULL &&
          mcdc_snapshot_plan_lsn(NULL) == NULL);
    mcdc_snapshot_plan_free(NULL);
    mcdc_opts_free(o);
    mcdc_free(s);
    mcdc_snapshot_token_clear(&t);
}

/* A recorded plan's text (mcdc_snapshot_plan_chunks' arguments): accepted
 * with bounds of the keys' shape, else MCDC_E_INVALID naming the text, with
 * nothing left to release. */
TEST(snapshot_plan_text_parse_checks_keys_chunks_and_max) {
    json_t *keys = NULL, *chunks = NULL, *max = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_snapshot_plan_text_parse(&keys, &chunks, &max, "[\"region\",\"id\"]",
                                               "[[null,[\"east\",5]],[[\"east\",5],null]]",
                                               "[\"west\",9]", &e),
                 MCDC_OK);
    CHECK(json_array_size(keys) == 2 && json_array_size(chunks) == 2 && json_is_array(max));
    json_decref(keys);
    json_decref(chunks);
    json_decref(max);
    CHECK_EQ_INT(mcdc_snapshot_plan_text_parse(&keys, &chunks, &max, "[]", "[[null,null]]", NULL,
                                               &e),
                 MCDC_OK);
    CHECK(max == NULL);
    json_decref(keys);
    json_decref(chunks);
    static const struct {
        const char *keys, *chunks, *max, *says;
    } cases[] = {
        {"\"id\"", "[[null,null]]", NULL, "keys_json"},
        {"[\"id\",\"id\"", "[[null,null]]", NULL, "keys_json"},
        {"[\"id\"]", "[]", NULL, "chunks_json"},
        {"[\"id\"]", "{\"a\":1}", NULL, "chunks_json"},
        {"[\"id\"]", "[[null,1],[1]]", NULL, "chunk 1 of"},
        {"[\"id\"]", "[[null,[1]]]", NULL, "chunk 0 of"},
        {"[\"a\",\"b\"]", "[[null,[1,{}]]]", NULL, "chunk 0 of"},
        {"[\"id\"]", "[[null,1.5]]", NULL, "chunk 0 of"},
        {"[\"id\"]", "[[null,null]]", "[1]", "max_json"},
        {"[\"id\"]", "[[null,null]]", "nonsense", "max_json"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        keys = chunks = max = NULL;
        e = (mcdc_error)MCDC_ERROR_INIT;
        int rc = mcdc_snapshot_plan_text_parse(&keys, &chunks, &max, cases[i].keys,
                                               cases[i].chunks, cases[i].max, &e);
        if (rc != MCDC_E_INVALID || strstr(e.message, cases[i].says) == NULL || keys || chunks ||
            max) {
            fprintf(stderr, "  case %zu: rc %d, message: %s\n", i, rc, e.message);
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
}

/* An extent an open recorded (mcdc_snapshot_plan_from_extent's arguments):
 * int of one key, keyset with MAX of the keys' shape or null; else
 * MCDC_E_INVALID naming the text, nothing left to release. The public call
 * refuses bad text, half of the pair and a negative chunk_rows before it
 * connects (no server here). */
TEST(snapshot_extent_text_parse_and_plan_from_extent_refusals) {
    json_t *keys = NULL, *extent = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    static const struct {
        const char *keys, *extent;
    } good[] = {
        {"[\"id\"]", "{\"kind\":\"int\",\"lo\":-5,\"hi\":9,\"rows\":14}"},
        {"[\"id\"]", "{\"kind\":\"int\",\"lo\":3,\"hi\":3,\"rows\":0,\"later\":true}"},
        {"[\"region\",\"id\"]", "{\"kind\":\"keyset\",\"max\":[\"west\",9]}"},
        {"[\"name\"]", "{\"kind\":\"keyset\",\"max\":\"k029\"}"},
        {"[\"name\"]", "{\"kind\":\"keyset\",\"max\":null}"},
        {"[]", "{\"kind\":\"keyset\",\"max\":null}"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECK_EQ_INT(mcdc_snapshot_extent_text_parse(&keys, &extent, good[i].keys, good[i].extent,
                                                     &e),
                     MCDC_OK);
        CHECK(json_is_array(keys) && json_is_object(extent));
        json_decref(keys);
        json_decref(extent);
    }
    static const struct {
        const char *keys, *extent, *says;
    } cases[] = {
        {"\"id\"", "{\"kind\":\"keyset\",\"max\":null}", "keys_json"},
        {"[\"id\"]", "[]", "extent_json"},
        {"[\"id\"]", "{\"kind\":\"range\",\"max\":1}", "extent_json"},
        {"[\"id\"]", "{\"kind\":\"keyset\"}", "extent_json"},
        {"[\"id\"]", "{\"kind\":\"int\",\"lo\":9,\"hi\":1,\"rows\":3}", "extent_json"},
        {"[\"id\"]", "{\"kind\":\"int\",\"lo\":1,\"hi\":9,\"rows\":-1}", "extent_json"},
        {"[\"id\"]", "{\"kind\":\"int\",\"lo\":\"1\",\"hi\":9,\"rows\":1}", "extent_json"},
        {"[\"a\",\"b\"]", "{\"kind\":\"int\",\"lo\":1,\"hi\":9,\"rows\":1}", "2 key columns"},
        {"[\"a\",\"b\"]", "{\"kind\":\"keyset\",\"max\":[1]}", "2 key columns"},
        {"[]", "{\"kind\":\"keyset\",\"max\":1}", "0 key columns"},
        {"[\"id\"]", "{\"kind\":\"keyset\",\"max\":1.5}", "extent_json"},
        {"[\"id\"]", "nonsense", "extent_json"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        keys = extent = NULL;
        e = (mcdc_error)MCDC_ERROR_INIT;
        int rc = mcdc_snapshot_extent_text_parse(&keys, &extent, cases[i].keys, cases[i].extent,
                                                 &e);
        if (rc != MCDC_E_INVALID || strstr(e.message, cases[i].says) == NULL || keys || extent) {
            fprintf(stderr, "  case %zu: rc %d, message: %s\n", i, rc, e.message);
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    mcdc_opts *o = NULL;
    mcdc_opts_create(&o, NULL);
    mcdc_snapshot_plan *p = NULL;
    CHECK_EQ_INT(mcdc_snapshot_plan_from_extent(&p, o, "[\"id\"]", NULL, 1, &e), MCDC_E_INVALID);
    CHECK(p == NULL && strstr(e.message, "together") != NULL);
    CHECK_EQ_INT(mcdc_snapshot_plan_from_extent(&p, o, NULL, NULL, -1, &e), MCDC_E_INVALID);
    CHECK(p == NULL && strstr(e.message, "chunk_rows is -1") != NULL);
    CHECK_EQ_INT(mcdc_snapshot_plan_from_extent(&p, o, "[\"id\"]", "{\"kind\":\"int\"}", 1, &e),
                 MCDC_E_INVALID);
    CHECK(p == NULL && strstr(e.message, "extent_json") != NULL);
    /* well-formed text reaches the options' check: no connectionString */
    CHECK_EQ_INT(mcdc_snapshot_plan_from_extent(&p, o, "[\"id\"]",
                                                "{\"kind\":\"keyset\",\"max\":7}", 1, &e),
                 MCDC_E_INVALID);
    CHECK(p == NULL && strstr(e.message, "connectionString") != NULL);
    CHECK_EQ_INT(mcdc_snapshot_plan_from_extent(NULL, o, NULL, NULL, 1, &e), MCDC_E_INVALID);
    CHECK(mcdc_snapshot_plan_extent(NULL) == NULL);
    mcdc_opts_free(o);
}
