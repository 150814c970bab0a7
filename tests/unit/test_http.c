/*
 * test_http.c - the object stores' HTTP layer against a scripted server on
 * loopback: retries of throttling and server errors, a fresh signature per
 * attempt, ambiguous failures (a reset after the request went out), the
 * give-up message, a stall, ranged reads into the caller's buffer, error
 * bodies; and the helpers (percent-encoding, HTTP dates).
 */
#include <stdio.h>
#include <string.h>

#include "mcdc_http.h"
#include "mcdc_test.h"
#include "test_http_server.h"

/* ---- the client side ------------------------------------------------------------------ */

static int sign_count(void *ctx, const mcdc_http_request *req, mcdc_http_headers *hdrs,
                      mcdc_error *err) {
    (void)req;
    int *n = ctx;
    char v[16];
    snprintf(v, sizeof v, "%d", ++*n);
    return mcdc_http_headers_set(hdrs, "X-Sig", v, err);
}

/* Starts a server running steps and a pool for it; s->url is its path. */
static mcdc_http *start(server *s, const step *steps, int n, const char *path, int attempts,
                        int64_t stall_ms) {
    server_start(s, steps, n);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d%s", s->port, path);
    mcdc_http_config cfg = {.attempts_max = attempts, .backoff_base_ms = 1,
                            .backoff_max_ms = 5, .stall_timeout_ms = stall_ms};
    mcdc_http *h = NULL;
    CHECK_EQ_INT(mcdc_http_create(&h, &cfg, NULL), MCDC_OK);
    return h;
}

#define OK_HELLO                                                                      \
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"abc\"\r\nx-amz-request-id: R2\r\n" \
    "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: close\r\n\r\nhello"

TEST(http_retries_throttling_and_signs_every_attempt) {
    static const step steps[] = {
        {ANSWER, "HTTP/1.1 503 Slow Down\r\nContent-Length: 9\r\nx-amz-request-id: R0\r\n"
                 "Connection: close\r\n\r\n<Error/>\n"},
        {ANSWER, "HTTP/1.1 500 Internal\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"},
        {ANSWER, OK_HELLO},
    };
    server s;
    mcdc_http *h = start(&s, steps, 3, "/b/k%20x?list-type=2", 5, 0);
    mcdc_buf body = {0};
    int signs = 0;
    mcdc_http_request req = {.method = MCDC_HTTP_GET, .url = s.url, .body_out = &body,
                             .sign = sign_count, .sign_ctx = &signs, .what = "GET test"};
    mcdc_http_response resp;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_http_do(h, &req, &resp, &e), MCDC_OK);
    CHECK_EQ_INT(resp.status, 200);
    CHECK_EQ_INT(resp.attempts, 3);
    CHECK(!resp.ambiguous); /* a GET is never ambiguous */
    CHECK_EQ_INT(body.len, 5); /* the error documents did not leak into the body */
    CHECK(body.len == 5 && memcmp(body.data, "hello", 5) == 0);
    CHECK_EQ_STR(resp.etag, "\"abc\"");
    CHECK_EQ_STR(resp.request_id, "R2");
    CHECK_EQ_INT(resp.last_modified_ms, 784111777000LL);
    CHECK_EQ_INT(resp.content_length, 5);
    server_stop(&s);
    /* signed anew on every attempt, and the URL went out as given */
    CHECK_EQ_INT(signs, 3);
    CHECK_EQ_STR(s.seen_sig[0], "1");
    CHECK_EQ_STR(s.seen_sig[2], "3");
    CHECK_EQ_STR(s.seen_line[2], "GET /b/k%20x?list-type=2 HTTP/1.1");
    mcdc_http_response_free(&resp);
    mcdc_buf_free(&body);
    mcdc_http_free(h);
}

TEST(http_ambiguous_failures_are_retried_only_when_allowed) {
    static const step steps[] = {
        {RESET, NULL},
        {RESET, NULL},
        {ANSWER, "HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\nConnection: "
                 "close\r\n\r\n"},
    };
    server s;
    mcdc_http *h = start(&s, steps, 3, "/b/k", 5, 0);
    mcdc_http_request req = {.method = MCDC_HTTP_PUT, .url = s.url, .body = "data",
                             .body_len = 4, .what = "PUT s3://b/k"};
    mcdc_http_response resp;
    mcdc_error e = MCDC_ERROR_INIT;
    /* not allowed: the first reset ends the request, flagged ambiguous */
    CHECK_EQ_INT(mcdc_http_do(h, &req, &resp, &e), MCDC_E_TRANSIENT);
    CHECK_EQ_INT(resp.attempts, 1);
    CHECK(resp.ambiguous);
    CHECK(strstr(e.message, "PUT s3://b/k") != NULL);
    CHECK(strstr(e.message, "may have been carried out") != NULL);
    mcdc_http_response_free(&resp);
    /* allowed: sent again, and the 412 comes back to the caller as ambiguous */
    req.retry_ambiguous = true;
    CHECK_EQ_INT(mcdc_http_do(h, &req, &resp, &e), MCDC_OK);
    CHECK_EQ_INT(resp.status, 412);
    CHECK_EQ_INT(resp.attempts, 2);
    CHECK(resp.ambiguous);
    mcdc_http_response_free(&resp);
    server_stop(&s);
    CHECK_EQ_STR(s.seen_body[0], "data");
    CHECK_EQ_STR(s.seen_body[2], "data"); /* the body was sent whole again */
    CHECK_EQ_STR(s.seen_line[2], "PUT /b/k HTTP/1.1");
    mcdc_http_free(h);
}

TEST(http_gives_up_after_its_attempts_with_a_clear_message) {
    static const step steps[] = {
        {ANSWER, "HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"},
        {ANSWER, "HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"},
    };
    server s;
    mcdc_http *h = start(&s, steps, 2, "/k", 2, 0);
    mcdc_http_request req = {.method = MCDC_HTTP_DELETE, .url = s.url, .what = "DELETE s3://b/k"};
    mcdc_http_response resp;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_http_do(h, &req, &resp, &e), MCDC_E_TRANSIENT);
    CHECK_EQ_INT(resp.attempts, 2);
    CHECK_EQ_INT(resp.status, 503);
    CHECK(strstr(e.message, "DELETE s3://b/k failed after 2 attempts") != NULL);
    CHECK(strstr(e.message, "HTTP 503") != NULL);
    CHECK(strstr(e.message, "127.0.0.1") == NULL); /* the URL is never printed */
    mcdc_http_response_free(&resp);
    server_stop(&s);
    mcdc_http_free(h);
}

TEST(http_a_stalled_answer_times_out) {
    static const step steps[] = {{STALL, NULL}};
    server s;
    mcdc_http *h = start(&s, steps, 1, "/k", 1, 1000);
    mcdc_http_request req = {.method = MCDC_HTTP_GET, .url = s.url, .what = "GET stall"};
    mcdc_http_response resp;
    mcdc_error e = MCDC_ERROR_INIT;
    int64_t t0 = mcdc_monotonic_us();
    CHECK_EQ_INT(mcdc_http_do(h, &req, &resp, &e), MCDC_E_TRANSIENT);
    int64_t ms = (mcdc_monotonic_us() - t0) / 1000;
    CHECK(ms >= 900 && ms < 5000);
    CHECK(strstr(e.message, "GET stall failed after 1 attempt") != NULL);
    mcdc_http_response_free(&resp);
    server_stop(&s);
    mcdc_http_free(h);
}

TEST(http_ranged_reads_into_the_callers_buffer) {
    static const step steps[] = {
        {ANSWER, "HTTP/1.1 206 Partial\r\nContent-Length: 3\r\nContent-Range: bytes 2-4/10\r\n"
                 "Connection: close\r\n\r\ncde"},
        {ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabcde"},
        {ANSWER, "HTTP/1.1 404 Not Found\r\nContent-Length: 29\r\nx-ms-error-code: BlobNotFound"
                 "\r\nConnection: close\r\n\r\n<Error><Code>NoSuchKey</Code>"},
    };
    server s;
    mcdc_http *h = start(&s, steps, 3, "/k", 3, 0);
    char dst[3];
    mcdc_http_request req = {.method = MCDC_HTTP_GET, .url = s.url, .dst = dst,
                             .dst_cap = sizeof dst, .what = "GET range"};
    mcdc_http_response resp;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_http_do(h, &req, &resp, &e), MCDC_OK);
    CHECK_EQ_INT(resp.status, 206);
    CHECK_EQ_INT(resp.body_bytes, 3);
    CHECK(memcmp(dst, "cde", 3) == 0);
    CHECK_EQ_INT(resp.range_first, 2);
    CHECK_EQ_INT(resp.range_last, 4);
    CHECK_EQ_INT(resp.range_total, 10);
    mcdc_http_response_free(&resp);
    /* more than the room asked for is the server's fault, not retried */
    CHECK_EQ_INT(mcdc_http_do(h, &req, &resp, &e), MCDC_E_PROTOCOL);
    CHECK_EQ_INT(resp.attempts, 1);
    mcdc_http_response_free(&resp);
    /* an error answer's body goes to error_body, not into dst */
    memset(dst, 'z', sizeof dst);
    CHECK_EQ_INT(mcdc_http_do(h, &req, &resp, &e), MCDC_OK);
    CHECK_EQ_INT(resp.status, 404);
    CHECK_EQ_INT(resp.body_bytes, 0);
    CHECK(dst[0] == 'z');
    CHECK_EQ_INT(resp.error_body.len, 29);
    CHECK_EQ_STR(resp.error_code, "BlobNotFound");
    mcdc_http_response_free(&resp);
    server_stop(&s);
    mcdc_http_free(h);
}

TEST(http_helpers_encode_and_date) {
    mcdc_buf b = {0};
    const char *key = "dir/a b+c=d~\xc3\xa9.json";
    CHECK_EQ_INT(mcdc_http_append_encoded(&b, key, strlen(key), true, NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_buf_cstr(&b, NULL), MCDC_OK);
    CHECK_EQ_STR((char *)b.data, "dir/a%20b%2Bc%3Dd~%C3%A9.json");
    mcdc_buf_reset(&b);
    CHECK_EQ_INT(mcdc_http_append_encoded(&b, "a/b", 3, false, NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_buf_cstr(&b, NULL), MCDC_OK);
    CHECK_EQ_STR((char *)b.data, "a%2Fb");
    mcdc_buf_free(&b);
    CHECK_EQ_INT(mcdc_http_parse_date_ms("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777000LL);
    CHECK_EQ_INT(mcdc_http_parse_date_ms("Sun, 06 Nov 1994 08:49:37 CET"), -1);
    CHECK_EQ_INT(mcdc_http_parse_date_ms("yesterday"), -1);
    char d[30];
    mcdc_http_format_date(784111777000LL, d);
    CHECK_EQ_STR(d, "Sun, 06 Nov 1994 08:49:37 GMT");
    mcdc_http_headers hs = {0};
    CHECK_EQ_INT(mcdc_http_headers_set(&hs, "Range", "bytes=0-1", NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_http_headers_set(&hs, "range", "bytes=2-3", NULL), MCDC_OK);
    CHECK_EQ_INT(hs.count, 1);
    CHECK_EQ_STR(mcdc_http_headers_get(&hs, "RANGE"), "bytes=2-3");
    mcdc_http_headers_free(&hs);
}

/* The options a test gives: "NAME=value" strings, NULL-terminated. */
static const char *opt_of(void *octx, const char *name) {
    for (const char *const *p = octx; *p; p++) {
        size_t n = strlen(name);
        if (strncmp(*p, name, n) == 0 && (*p)[n] == '=') return *p + n + 1;
    }
    return NULL;
}

TEST(http_time_limits_come_from_storage_options) {
    static const char *const given[] = {"MCDC_HTTP_TIMEOUT_MS=1500",
                                        "MCDC_HTTP_CONNECT_TIMEOUT_MS=200",
                                        "MCDC_HTTP_DEADLINE_MS=4000", NULL};
    mcdc_storage_env env = {.option = opt_of, .octx = (void *)given};
    mcdc_http_config cfg = {.stall_timeout_ms = 7};
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_http_config_options(&cfg, &env, &e), MCDC_OK);
    CHECK(cfg.stall_timeout_ms == 1500 && cfg.connect_timeout_ms == 200 &&
          cfg.deadline_ms == 4000);
    /* none given: the config keeps its values */
    static const char *const none[] = {NULL};
    env.octx = (void *)none;
    CHECK_EQ_INT(mcdc_http_config_options(&cfg, &env, &e), MCDC_OK);
    CHECK(cfg.stall_timeout_ms == 1500);
    static const char *const bad[][2] = {{"MCDC_HTTP_TIMEOUT_MS=0", NULL},
                                         {"MCDC_HTTP_DEADLINE_MS=2s", NULL},
                                         {"MCDC_HTTP_CONNECT_TIMEOUT_MS=3600001", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        env.octx = (void *)bad[i];
        mcdc_error_clear(&e);
        CHECK_EQ_INT(mcdc_http_config_options(&cfg, &env, &e), MCDC_E_INVALID);
        size_t n = strcspn(bad[i][0], "=");
        CHECK(strncmp(strstr(e.message, "storage option ") + 15, bad[i][0], n) == 0);
    }
}
