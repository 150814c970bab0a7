#include "mcdc_test.h"
#include "mcdc_util.h"

TEST(util_error_set_formats_and_returns_code) {
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_error_set(&e, MCDC_E_IO, "cannot open %s", "x.json");
    CHECK_EQ_INT(rc, MCDC_E_IO);
    CHECK_EQ_STR(e.message, "cannot open x.json");
    mcdc_error_wrap(&e, "reading version %d", 7);
    CHECK_EQ_STR(e.message, "reading version 7: cannot open x.json");
    CHECK_EQ_INT(mcdc_error_set(NULL, MCDC_E_LIMIT, "ignored"), MCDC_E_LIMIT);
    CHECK_EQ_STR(mcdc_status_kind(MCDC_E_DATALOSS), "DataLossError");
}

TEST(util_buf_limit_is_an_error) {
    mcdc_buf b = {0};
    b.limit = 8;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_buf_append(&b, "12345678", 8, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_buf_append(&b, "9", 1, &e), MCDC_E_LIMIT);
    CHECK_EQ_INT(b.len, 8);
    mcdc_buf_free(&b);
}

TEST(util_alloc_fault_injection_fails_nth) {
    mcdc_alloc_fail_at(2);
    void *a = mcdc_malloc(10);
    void *b = mcdc_malloc(10);
    void *c = mcdc_malloc(10);
    mcdc_alloc_fail_at(0);
    CHECK(a != NULL);
    CHECK(b == NULL);
    CHECK(c != NULL);
    mcdc_free(a);
    mcdc_free(c);
}

TEST(util_timestamps_round_trip) {
    int64_t us;
    char out[32];
    CHECK_EQ_INT(mcdc_parse_ts_us("2025-11-02T01:30:00.123", 23, &us, NULL), MCDC_OK);
    mcdc_format_ts_us(us, 3, out);
    CHECK_EQ_STR(out, "2025-11-02T01:30:00.123");
    CHECK_EQ_INT(mcdc_parse_ts_us("1969-12-31 23:59:59.999999", 26, &us, NULL), MCDC_OK);
    CHECK_EQ_INT(us, -1);
    CHECK_EQ_INT(mcdc_parse_ts_us("2024-01-01T00:00:00+02:00", 25, &us, NULL), MCDC_OK);
    mcdc_format_ts_us(us, 0, out);
    CHECK_EQ_STR(out, "2023-12-31T22:00:00");
    CHECK_EQ_INT(mcdc_parse_ts_us("2024-13-01", 10, &us, NULL), MCDC_E_INVALID);
}
