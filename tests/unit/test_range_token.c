/* Range tokens (mcdc_range_token.h, mcdc_range_token_parse): they round
 * trip; malformed, altered, cut or foreign text is MCDC_E_INVALID saying
 * what is wrong, for every single-byte change and every truncation. */
#include <stdlib.h>
#include <string.h>

#include "mcdc_range_token.h"
#include "mcdc_test.h"

static mcdc_range_token sample(void) {
    mcdc_range_token t;
    memset(&t, 0, sizeof t);
    snprintf(t.capture_instance, sizeof t.capture_instance, "dbo_orders");
    mcdc_lsn_parse_cstr(&t.from, "0x0000002A000001F00003", NULL);
    mcdc_lsn_parse_cstr(&t.to, "0x0000002A000002100001", NULL);
    t.rows_estimate = 51234;
    t.index = 1;
    t.count = 3;
    snprintf(t.schema_id, sizeof t.schema_id, "0123456789abcdef");
    return t;
}

static bool same(const mcdc_range_token *a, const mcdc_range_token *b) {
    return strcmp(a->capture_instance, b->capture_instance) == 0 &&
           mcdc_lsn_cmp(&a->from, &b->from) == 0 && mcdc_lsn_cmp(&a->to, &b->to) == 0 &&
           a->rows_estimate == b->rows_estimate && a->index == b->index &&
           a->count == b->count && strcmp(a->schema_id, b->schema_id) == 0;
}

static int decode(const char *s, mcdc_error *e) {
    mcdc_range_token t;
    return mcdc_range_token_decode(&t, s, strlen(s), e);
}

TEST(range_token_round_trips) {
    mcdc_range_token t = sample(), back;
    char *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_range_token_encode(&s, &t, &e), MCDC_OK);
    CHECK(s != NULL && strncmp(s, "{\"mssqlcdc_range\":1,\"capture_instance\":\"dbo_orders\","
                                  "\"from_lsn\":\"0x0000002A000001F00003\"", 70) == 0);
    CHECK_EQ_INT(mcdc_range_token_decode(&back, s, strlen(s), &e), MCDC_OK);
    CHECK(same(&t, &back));
    mcdc_free(s);
    /* Unicode names, the extremes of every field. */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int bad = 0;
    for (int k = 0; k < 200; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t = sample();
        snprintf(t.capture_instance, sizeof t.capture_instance, "%s_%d",
                 k % 3 == 0 ? "\xc3\xa9t\xc3\xa9" : k % 3 == 1 ? "\xe6\x9d\xb1\xe4\xba\xac" : "a\"b\\c",
                 k);
        for (int i = 0; i < MCDC_LSN_BYTES; i++) t.from.b[i] = (uint8_t)(x >> (i * 5));
        t.to = t.from;
        if (k % 2) mcdc_lsn_increment(&t.to, &t.from, NULL);
        t.rows_estimate = k == 7 ? INT64_MAX : (int64_t)(x >> 20);
        t.count = 1 + (int32_t)(x % MCDC_PARTITIONS_MAX);
        t.index = (int32_t)((x >> 8) % (uint64_t)t.count);
        s = NULL;
        if (mcdc_range_token_encode(&s, &t, &e) != MCDC_OK ||
            mcdc_range_token_decode(&back, s, strlen(s), &e) != MCDC_OK || !same(&t, &back))
            bad++;
        mcdc_free(s);
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(range_token_of_a_followed_batch_is_version_2_and_checked) {
    mcdc_range_token t = sample(), back;
    t.follow = true;
    char *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_range_token_encode(&s, &t, &e), MCDC_OK);
    CHECK(strncmp(s, "{\"mssqlcdc_range\":2,", 20) == 0);
    CHECK_EQ_INT(mcdc_range_token_decode(&back, s, strlen(s), &e), MCDC_OK);
    CHECK(same(&t, &back) && back.follow);
    /* the version is under the check: 2 made 1 (or 1 made 2) is an edit */
    s[18] = '1';
    CHECK_EQ_INT(mcdc_range_token_decode(&back, s, strlen(s), &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "check does not match") != NULL);
    s[18] = '3';
    CHECK_EQ_INT(mcdc_range_token_decode(&back, s, strlen(s), &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "version 3") != NULL);
    mcdc_free(s);
    t.follow = false;
    CHECK_EQ_INT(mcdc_range_token_encode(&s, &t, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_range_token_decode(&back, s, strlen(s), &e), MCDC_OK);
    CHECK(!back.follow);
    mcdc_free(s);
}

TEST(range_token_every_byte_change_and_cut_is_invalid) {
    mcdc_range_token t = sample();
    char *s = NULL;
    CHECK_EQ_INT(mcdc_range_token_encode(&s, &t, NULL), MCDC_OK);
    size_t n = strlen(s);
    int wrong = 0, checked = 0;
    const char repl[] = {'0', 'A', 'z', '"', ' ', '}', '9'};
    char *m = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        for (size_t r = 0; r < sizeof repl; r++) {
            if (s[i] == repl[r]) continue;
            memcpy(m, s, n + 1);
            m[i] = repl[r];
            mcdc_error e = MCDC_ERROR_INIT;
            mcdc_range_token back;
            int rc = mcdc_range_token_decode(&back, m, n, &e);
            checked++;
            /* A space between tokens is still the same JSON: it may pass,
             * and then must say exactly what the original said. */
            if (rc == MCDC_OK && !(repl[r] == ' ' && same(&back, &t))) wrong++;
            if (rc != MCDC_OK && (rc != MCDC_E_INVALID || strstr(e.message, "range token") == NULL))
                wrong++;
        }
    }
    for (size_t cut = 0; cut < n; cut++) {
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_range_token back;
        checked++;
        if (mcdc_range_token_decode(&back, s, cut, &e) != MCDC_E_INVALID) wrong++;
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK(checked > 1000);
    free(m);
    mcdc_free(s);
}

TEST(range_token_malformed_says_what_is_wrong) {
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"", "empty"},
        {"not json", "not JSON"},
        {"[1,2]", "not a JSON object"},
        {"{\"mssqlcdc_range\":1}", "'capture_instance' is missing"},
        {"{\"mssqlcdc_range\":3,\"capture_instance\":\"x\"}", "version 3"},
        {"{\"mssqlcdc_range\":\"1\"}", "'mssqlcdc_range' is not an integer"},
        {"{\"mssqlcdc_range\":1,\"mssqlcdc_range\":1}", "not JSON"}, /* duplicate key */
        {"{\"mssqlcdc_range\":1,\"extra\":0}", "unknown field 'extra'"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"a]b\"}", "not a capture instance"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"a\\u0000b\"}", "not JSON"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"ci\",\"from_lsn\":\"0x1\"}",
         "'from_lsn' is not an LSN"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"ci\",\"from_lsn\":\"0x0000002a000001f00003\"}",
         "'from_lsn' is not an LSN"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"ci\",\"from_lsn\":\"0x00000000000000000002\","
         "\"to_lsn\":\"0x00000000000000000003\",\"rows_estimate\":-1}",
         "'rows_estimate' is out of range"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"ci\",\"from_lsn\":\"0x00000000000000000002\","
         "\"to_lsn\":\"0x00000000000000000003\",\"rows_estimate\":1,\"index\":3,\"count\":3}",
         "'index' is out of range"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"ci\",\"from_lsn\":\"0x00000000000000000002\","
         "\"to_lsn\":\"0x00000000000000000003\",\"rows_estimate\":1,\"index\":0,\"count\":65}",
         "'count' is out of range"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"ci\",\"from_lsn\":\"0x00000000000000000002\","
         "\"to_lsn\":\"0x00000000000000000003\",\"rows_estimate\":1,\"index\":0,\"count\":1,"
         "\"schema\":\"0123\"}",
         "'schema' is not 16 lowercase hex"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"ci\",\"from_lsn\":\"0x00000000000000000004\","
         "\"to_lsn\":\"0x00000000000000000003\",\"rows_estimate\":1,\"index\":0,\"count\":1,"
         "\"schema\":\"0123456789abcdef\",\"check\":\"0123456789abcdef\"}",
         "from_lsn is after to_lsn"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"ci\",\"from_lsn\":\"0x00000000000000000002\","
         "\"to_lsn\":\"0x00000000000000000003\",\"rows_estimate\":1,\"index\":0,\"count\":1,"
         "\"schema\":\"0123456789abcdef\",\"check\":\"0123456789abcdef\"}",
         "changed or cut after planning"},
        {"{\"mssqlcdc_range\":1,\"capture_instance\":\"ci\",\"from_lsn\":\"0x00000000000000000002\","
         "\"to_lsn\":\"0x00000000000000000003\",\"rows_estimate\":99999999999999999999}",
         "not JSON"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcdc_error e = MCDC_ERROR_INIT;
        int rc = decode(cases[i].text, &e);
        if (rc != MCDC_E_INVALID || strstr(e.message, cases[i].says) == NULL) {
            fprintf(stderr, "  case %zu: rc %d, message: %s\n", i, rc, e.message);
            bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    /* Embedded NUL, and more than the limit. */
    mcdc_range_token t;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_range_token_decode(&t, "{\"a\"\0:1}", 8, &e), MCDC_E_INVALID);
    char *big = malloc(MCDC_RANGE_TOKEN_BYTES_MAX + 2);
    memset(big, ' ', MCDC_RANGE_TOKEN_BYTES_MAX + 1);
    big[MCDC_RANGE_TOKEN_BYTES_MAX + 1] = 0;
    CHECK_EQ_INT(decode(big, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "at most 4096") != NULL);
    free(big);
}

TEST(range_token_public_parse) {
    mcdc_range_token t = sample();
    char *s = NULL;
    CHECK_EQ_INT(mcdc_range_token_encode(&s, &t, NULL), MCDC_OK);
    mcdc_range_info info = MCDC_RANGE_INFO_INIT;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_range_token_parse(&info, s, &e), MCDC_OK);
    CHECK_EQ_STR(info.capture_instance, "dbo_orders");
    CHECK_EQ_INT(info.rows_estimate, 51234);
    CHECK_EQ_INT(info.index, 1);
    CHECK_EQ_INT(info.count, 3);
    char lsn[MCDC_LSN_TEXT_SIZE];
    CHECK_EQ_INT(mcdc_lsn_value_format(lsn, sizeof lsn, &info.from_lsn, &e), MCDC_OK);
    CHECK_EQ_STR(lsn, "0x0000002A000001F00003");
    CHECK_EQ_INT(mcdc_lsn_value_format(lsn, sizeof lsn, &info.to_lsn, &e), MCDC_OK);
    CHECK_EQ_STR(lsn, "0x0000002A000002100001");
    /* A struct without its version, a NULL token, junk. */
    mcdc_range_info raw;
    memset(&raw, 0, sizeof raw);
    CHECK_EQ_INT(mcdc_range_token_parse(&raw, s, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "MCDC_RANGE_INFO_INIT") != NULL);
    CHECK_EQ_INT(mcdc_range_token_parse(&info, NULL, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_range_token_parse(NULL, s, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_range_token_parse(&info, "{}", &e), MCDC_E_INVALID);
    mcdc_free(s);
}

TEST(range_schema_id_tells_schemas_apart) {
    mcdc_schema *a = NULL, *b = NULL, *c = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&a, 2, &e);
    mcdc_schema_set(a, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, false, &e);
    mcdc_schema_set(a, 1, "amount", MCDC_TYPE_DECIMAL, 18, 2, 0, true, &e);
    mcdc_schema_create(&b, 2, &e);
    mcdc_schema_set(b, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, false, &e);
    mcdc_schema_set(b, 1, "amount", MCDC_TYPE_DECIMAL, 18, 3, 0, true, &e);
    mcdc_schema_create(&c, 2, &e);
    mcdc_schema_set(c, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, false, &e);
    mcdc_schema_set(c, 1, "amount", MCDC_TYPE_DECIMAL, 18, 2, 0, true, &e);
    char ia[MCDC_RANGE_HASH_TEXT_SIZE], ib[MCDC_RANGE_HASH_TEXT_SIZE], ic[MCDC_RANGE_HASH_TEXT_SIZE];
    mcdc_range_schema_id(ia, a);
    mcdc_range_schema_id(ib, b);
    mcdc_range_schema_id(ic, c);
    CHECK_EQ_INT(strlen(ia), 16);
    CHECK(strcmp(ia, ib) != 0);
    CHECK_EQ_STR(ia, ic);
    mcdc_schema_unref(a);
    mcdc_schema_unref(b);
    mcdc_schema_unref(c);
}

TEST(range_read_checks_the_options_against_the_token) {
    mcdc_range_token t = sample();
    char *s = NULL;
    CHECK_EQ_INT(mcdc_range_token_encode(&s, &t, NULL), MCDC_OK);
    mcdc_opts *o = NULL;
    mcdc_opts_create(&o, NULL);
    struct ArrowArrayStream st;
    mcdc_error e = MCDC_ERROR_INIT;
    /* No server is needed to refuse these. */
    CHECK_EQ_INT(mcdc_range_read(&st, o, s, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "no connectionString") != NULL);
    mcdc_opts_set(o, "captureInstance", "dbo_customers", NULL, NULL);
    CHECK_EQ_INT(mcdc_range_read(&st, o, s, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "the token reads capture instance 'dbo_orders' but the options "
                            "name 'dbo_customers'") != NULL);
    CHECK(st.release == NULL);
    mcdc_opts_free(o);
    mcdc_free(s);
}
