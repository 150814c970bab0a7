/* The public functions added for bindings (values, is_final, ranges) and
 * every public function's answer to a bad argument: MCDC_E_INVALID with a
 * message, never an abort of the host. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcdc_test.h"
#include "mssqlcdc.h"

static char *api_tmpdir(void) {
    char tmpl[] = "/tmp/mcdc_api_XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static void api_rmrf(char *d) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", d);
    free(d);
}

/* rc is MCDC_E_INVALID and the message names what. */
#define CHECK_INVALID(call, what)                                                       \
    do {                                                                                \
        mcdc_error e_ = MCDC_ERROR_INIT;                                                \
        int rc_ = (call);                                                               \
        (void)e_;                                                                       \
        CHECK_EQ_INT(rc_, MCDC_E_INVALID);                                              \
        CHECK(e_.code == MCDC_E_INVALID && strstr(e_.message, what) != NULL);           \
    } while (0)

TEST(api_lsn_value_text_round_trip) {
    mcdc_lsn_value v;
    char t[MCDC_LSN_TEXT_SIZE];
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_lsn_value_parse(&v, "0x0000002a000001f00003", &e), MCDC_OK);
    CHECK_EQ_INT(v.bytes[3], 0x2A);
    CHECK_EQ_INT(v.bytes[9], 0x03);
    CHECK_EQ_INT(mcdc_lsn_value_format(t, sizeof t, &v, &e), MCDC_OK);
    CHECK_EQ_STR(t, "0x0000002A000001F00003");
    CHECK_EQ_INT(mcdc_lsn_value_parse(&v, "1", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_lsn_value_format(t, sizeof t, &v, &e), MCDC_OK);
    CHECK_EQ_STR(t, "0x00000000000000000001");
    mcdc_lsn_value a, b;
    mcdc_lsn_value_parse(&a, "0x0000002A000001F00003", &e);
    mcdc_lsn_value_parse(&b, "0x0000002B000000000000", &e);
    CHECK(memcmp(a.bytes, b.bytes, MCDC_LSN_VALUE_BYTES) < 0); /* the documented order */
    CHECK_INVALID(mcdc_lsn_value_parse(&v, "0xZZ", &e_), "0xZZ");
    CHECK_INVALID(mcdc_lsn_value_parse(&v, " 0x01", &e_), "invalid LSN");
    CHECK_INVALID(mcdc_lsn_value_parse(&v, "0x000000000000000000001", &e_), "more than 20");
    CHECK_INVALID(mcdc_lsn_value_parse(&v, NULL, &e_), "text is NULL");
    CHECK_INVALID(mcdc_lsn_value_parse(NULL, "0x01", &e_), "out is NULL");
    CHECK_INVALID(mcdc_lsn_value_format(t, 22, &v, &e_), "MCDC_LSN_TEXT_SIZE");
    CHECK_INVALID(mcdc_lsn_value_format(NULL, 23, &v, &e_), "out is NULL");
    CHECK_INVALID(mcdc_lsn_value_format(t, 23, NULL, &e_), "lsn is NULL");
}

TEST(api_ts_text_round_trip) {
    int64_t us;
    char t[MCDC_TS_TEXT_SIZE];
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_ts_parse(&us, "2025-01-02T03:04:05.678901", &e), MCDC_OK);
    CHECK_EQ_INT(us, 1735787045678901LL);
    CHECK_EQ_INT(mcdc_ts_format(t, sizeof t, us, 6, &e), MCDC_OK);
    CHECK_EQ_STR(t, "2025-01-02T03:04:05.678901");
    CHECK_EQ_INT(mcdc_ts_format(t, sizeof t, us, 3, &e), MCDC_OK);
    CHECK_EQ_STR(t, "2025-01-02T03:04:05.678");
    CHECK_EQ_INT(mcdc_ts_format(t, sizeof t, us, 0, &e), MCDC_OK);
    CHECK_EQ_STR(t, "2025-01-02T03:04:05");
    CHECK_EQ_INT(mcdc_ts_parse(&us, "2025-01-02 05:04:05+02:00", &e), MCDC_OK);
    CHECK_EQ_INT(us, 1735787045000000LL);
    CHECK_EQ_INT(mcdc_ts_parse(&us, "2025-01-02", &e), MCDC_OK);
    CHECK_EQ_INT(us, 1735776000000000LL);
    CHECK_EQ_INT(mcdc_ts_parse(&us, "1969-12-31T23:59:59.999999Z", &e), MCDC_OK);
    CHECK_EQ_INT(us, -1);
    CHECK_EQ_INT(mcdc_ts_format(t, sizeof t, -1, 3, &e), MCDC_OK);
    CHECK_EQ_STR(t, "1969-12-31T23:59:59.999");
    CHECK_EQ_INT(mcdc_ts_format(t, sizeof t, 253402300799999999LL, 6, &e), MCDC_OK);
    CHECK_EQ_STR(t, "9999-12-31T23:59:59.999999");
    CHECK_EQ_INT(mcdc_ts_format(t, sizeof t, -62135596800000000LL, 0, &e), MCDC_OK);
    CHECK_EQ_STR(t, "0001-01-01T00:00:00");
    CHECK_INVALID(mcdc_ts_parse(&us, "2025-13-01", &e_), "invalid timestamp '2025-13-01'");
    CHECK_INVALID(mcdc_ts_parse(&us, "2025-1-1", &e_), "invalid timestamp");
    /* a day the month does not have is not the next month's */
    CHECK_INVALID(mcdc_ts_parse(&us, "2026-02-29", &e_), "invalid timestamp '2026-02-29'");
    CHECK_INVALID(mcdc_ts_parse(&us, "2025-04-31T00:00:00", &e_), "invalid timestamp");
    CHECK_EQ_INT(mcdc_ts_parse(&us, "2024-02-29", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_ts_parse(&us, "2000-02-29", &e), MCDC_OK);
    CHECK_INVALID(mcdc_ts_parse(&us, "1900-02-29", &e_), "invalid timestamp");
    CHECK_INVALID(mcdc_ts_parse(&us, NULL, &e_), "text is NULL");
    CHECK_INVALID(mcdc_ts_parse(NULL, "2025-01-01", &e_), "out_us is NULL");
    CHECK_INVALID(mcdc_ts_format(t, sizeof t, 0, 2, &e_), "frac_digits is 2");
    CHECK_INVALID(mcdc_ts_format(t, 31, 0, 3, &e_), "MCDC_TS_TEXT_SIZE");
    CHECK_INVALID(mcdc_ts_format(t, sizeof t, INT64_MIN, 3, &e_), "outside years 0001-9999");
    CHECK_INVALID(mcdc_ts_format(t, sizeof t, INT64_MAX, 3, &e_), "outside years 0001-9999");
    CHECK_INVALID(mcdc_ts_format(NULL, 32, 0, 3, &e_), "out is NULL");
}

TEST(api_verdict_is_final) {
    char *d = api_tmpdir();
    char control[600];
    snprintf(control, sizeof control, "%s/control", d);
    mcdc_error e = MCDC_ERROR_INIT;
    bool final = true;
    int64_t ten = 1735725600LL * 1000000; /* 2025-01-01T10:00:00 */
    CHECK_EQ_INT(mcdc_verdict_is_final(&final, control, NULL, "bronze.orders", ten, &e), MCDC_OK);
    CHECK(!final); /* no verdict yet */
    mcdc_verdict v;
    CHECK_EQ_INT(mcdc_verdict_advance(&v, control, NULL, "bronze.orders", "0x01",
                                      ten + 35LL * 60 * 1000000, MCDC_GRANULARITY_HOUR, &e),
                 MCDC_OK);
    CHECK_EQ_INT(mcdc_verdict_is_final(&final, control, NULL, "bronze.orders", ten, &e), MCDC_OK);
    CHECK(final); /* the period ending at 10:00 is complete */
    CHECK_EQ_INT(mcdc_verdict_is_final(&final, control, NULL, "bronze.orders", ten - 1, &e),
                 MCDC_OK);
    CHECK(final);
    CHECK_EQ_INT(mcdc_verdict_is_final(&final, control, NULL, "bronze.orders", ten + 1, &e),
                 MCDC_OK);
    CHECK(!final);
    CHECK_EQ_INT(mcdc_verdict_is_final(&final, control, NULL, "bronze.other", ten, &e), MCDC_OK);
    CHECK(!final); /* another table's verdict is not this one's */
    CHECK_INVALID(mcdc_verdict_is_final(NULL, control, NULL, "t", ten, &e_), "out is NULL");
    CHECK_INVALID(mcdc_verdict_is_final(&final, NULL, NULL, "t", ten, &e_), "control_table is NULL");
    CHECK_INVALID(mcdc_verdict_is_final(&final, control, NULL, NULL, ten, &e_), "table_name is NULL");
    CHECK_INVALID(mcdc_verdict_is_final(&final, control, NULL, "", ten, &e_), "table_name is empty");
    api_rmrf(d);
}

TEST(api_bad_arguments_are_invalid_not_aborts) {
    mcdc_opts *o = NULL;
    bool unknown;
    CHECK_INVALID(mcdc_opts_create(NULL, &e_), "out is NULL");
    CHECK_EQ_INT(mcdc_opts_create(&o, NULL), MCDC_OK);
    CHECK_INVALID(mcdc_opts_set(NULL, "captureInstance", "x", &unknown, &e_), "options handle is NULL");
    CHECK_INVALID(mcdc_opts_set(o, NULL, "x", &unknown, &e_), "name is NULL");
    CHECK_INVALID(mcdc_opts_set(o, "captureInstance", NULL, &unknown, &e_), "value is NULL");
    CHECK_INVALID(mcdc_opts_load_file(NULL, "/x", &e_), "options handle is NULL");
    CHECK_INVALID(mcdc_opts_load_file(o, NULL, &e_), "path is NULL");
    CHECK_INVALID(mcdc_opts_check_required(NULL, &e_), "options handle is NULL");
    CHECK(mcdc_opts_get(NULL, "backend") == NULL);
    CHECK(mcdc_opts_get(o, NULL) == NULL);
    mcdc_opts_free(NULL);
    mcdc_granularity g;
    CHECK_INVALID(mcdc_granularity_parse(NULL, &g, &e_), "s is NULL");
    CHECK_INVALID(mcdc_granularity_parse("hour", NULL, &e_), "out is NULL");
    CHECK_INVALID(mcdc_granularity_parse("week", &g, &e_), "not 'week'");
    CHECK_EQ_INT(mcdc_truncate_us(123, (mcdc_granularity)7), INT64_MIN);
    CHECK_EQ_INT(mcdc_truncate_us(INT64_MIN, MCDC_GRANULARITY_MINUTE), INT64_MIN);
    CHECK_EQ_INT(mcdc_truncate_us(3600000001LL, MCDC_GRANULARITY_HOUR), 3600000000LL);
    mcdc_verdict v;
    CHECK_INVALID(mcdc_verdict_read(NULL, "c", NULL, "t", &e_), "out is NULL");
    CHECK_INVALID(mcdc_verdict_read(&v, NULL, NULL, "t", &e_), "control_table is NULL");
    CHECK_INVALID(mcdc_verdict_read(&v, "c", NULL, NULL, &e_), "table_name is NULL");
    CHECK_INVALID(mcdc_verdict_advance(&v, "c", NULL, "t", NULL, 0, MCDC_GRANULARITY_HOUR, &e_),
                  "end_lsn is NULL");
    CHECK_INVALID(mcdc_verdict_advance(&v, "c", NULL, "t", "0x01", 0, (mcdc_granularity)9, &e_),
                  "granularity 9");
    CHECK_INVALID(mcdc_verdict_advance(NULL, "c", NULL, "t", "0x01", 0, MCDC_GRANULARITY_HOUR, &e_),
                  "out is NULL");
    CHECK_INVALID(mcdc_table_rows_json(NULL, NULL, NULL, NULL, &e_), "table and fn are required");
    CHECK_INVALID(mcdc_table_rows_json("t", NULL, NULL, NULL, &e_), "table and fn are required");
    /* Ranges. */
    mcdc_range_plan *p = NULL;
    CHECK_INVALID(mcdc_range_plan_create(NULL, o, NULL, NULL, 1, &e_), "out is NULL");
    CHECK_INVALID(mcdc_range_plan_create(&p, NULL, NULL, NULL, 1, &e_), "opts is NULL");
    CHECK_INVALID(mcdc_range_plan_create(&p, o, NULL, NULL, -1, &e_), "ranges_max is -1");
    CHECK_INVALID(mcdc_range_plan_create(&p, o, NULL, NULL, 65, &e_), "ranges_max is 65");
    CHECK_INVALID(mcdc_range_plan_create(&p, o, NULL, NULL, 2, &e_), "missing required options");
    CHECK(p == NULL);
    mcdc_range_plan_free(NULL);
    CHECK_EQ_INT(mcdc_range_plan_count(NULL), 0);
    CHECK(mcdc_range_plan_token(NULL, 0) == NULL);
    struct ArrowSchema sc;
    CHECK_INVALID(mcdc_range_plan_schema(&sc, NULL, &e_), "the plan is NULL");
    CHECK_INVALID(mcdc_range_plan_schema(NULL, NULL, &e_), "out is NULL");
    struct ArrowArrayStream st;
    CHECK_INVALID(mcdc_range_read(NULL, o, "{}", &e_), "out is NULL");
    CHECK_INVALID(mcdc_range_read(&st, NULL, "{}", &e_), "opts is NULL");
    CHECK_INVALID(mcdc_range_read(&st, o, NULL, &e_), "token is NULL");
    CHECK_INVALID(mcdc_range_read(&st, o, "{\"mssqlcdc_range\":1", &e_), "invalid range token");
    CHECK(st.release == NULL);
    /* A source's positions. */
    mcdc_source *src = NULL;
    mcdc_lsn_value lsn = {{0}}, nth;
    bool found = true;
    int64_t us = 1;
    CHECK_INVALID(mcdc_source_open(NULL, o, &e_), "out is NULL");
    CHECK_INVALID(mcdc_source_open(&src, NULL, &e_), "opts is NULL");
    CHECK_INVALID(mcdc_source_open(&src, o, &e_), "missing required options");
    CHECK(src == NULL);
    mcdc_source_free(NULL);
    CHECK_INVALID(mcdc_source_initial_lsn(NULL, "earliest", &lsn, &e_), "the source is NULL");
    CHECK_INVALID(mcdc_source_max_lsn(NULL, &lsn, &e_), "the source is NULL");
    CHECK_INVALID(mcdc_source_nth_commit_after(NULL, &lsn, 1, &nth, &found, &e_),
                  "the source is NULL");
    CHECK_INVALID(mcdc_source_commit_time(NULL, &lsn, &us, &found, &e_), "the source is NULL");
    CHECK_INVALID(mcdc_source_commit_at(NULL, us, &lsn, &found, &e_), "the source is NULL");
    /* A batch with the stream's guards. */
    bool cut = true;
    CHECK_INVALID(mcdc_source_schema(&sc, NULL, &e_), "the source is NULL");
    CHECK_INVALID(mcdc_source_batch_end(NULL, &lsn, &nth, &cut, &e_), "the source is NULL");
    CHECK_INVALID(mcdc_source_plan_batch(&p, NULL, &lsn, &nth, 0, &e_), "the source is NULL");
    CHECK(mcdc_range_plan_events_json(NULL) == NULL);
    mcdc_opts_free(o);
}

/* mcdc_log_to_thread: the calling thread's messages outside jobs go to
 * the host's function at its level; another thread keeps the default; NULL
 * puts the default back. The message is a library call's own: a range
 * plan refused for its ranges_max. */
typedef struct {
    int calls;
    mcdc_log_level level;
    char last[256];
} log_seen;

static void seen_log(void *user, mcdc_log_level level, const char *message) {
    log_seen *s = user;
    s->calls++;
    s->level = level;
    snprintf(s->last, sizeof s->last, "%s", message);
}

static void *log_elsewhere(void *arg) {
    (void)arg;
    mcdc_log(MCDC_LOG_WARN, "from another thread"); /* the default: stderr */
    return NULL;
}

TEST(api_log_to_thread_takes_the_calling_threads_messages) {
    log_seen s = {0};
    mcdc_log_to_thread(seen_log, &s, MCDC_LOG_INFO);
    mcdc_log(MCDC_LOG_INFO, "planned %d", 3);
    mcdc_log(MCDC_LOG_DEBUG, "below the level");
    CHECK_EQ_INT(s.calls, 1);
    CHECK(s.level == MCDC_LOG_INFO && strcmp(s.last, "planned 3") == 0);
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, log_elsewhere, NULL), 0);
    pthread_join(t, NULL);
    CHECK_EQ_INT(s.calls, 1);
    /* a job's sink replaces it while it runs, and gives it back */
    log_seen job = {0};
    mcdc_log_sink sink = {seen_log, &job, MCDC_LOG_WARN};
    const mcdc_log_sink *host = mcdc_log_use(&sink);
    mcdc_log(MCDC_LOG_WARN, "the job's");
    mcdc_log_use(host);
    mcdc_log(MCDC_LOG_WARN, "the host's");
    CHECK(job.calls == 1 && s.calls == 2 && strcmp(s.last, "the host's") == 0);
    mcdc_log_to_thread(NULL, NULL, MCDC_LOG_WARN);
    CHECK(mcdc_log_current() == NULL);
    mcdc_log(MCDC_LOG_INFO, "dropped");
    CHECK_EQ_INT(s.calls, 2);
}
