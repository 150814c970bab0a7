/*
 * test_sigv4.c - AWS Signature Version 4 against the examples AWS publishes
 * for S3 (the "Signature Calculations for the Authorization Header"
 * examples: GET object with a range, PUT object, GET a bucket's lifecycle,
 * list objects; key AKIAIOSFODNN7EXAMPLE at 2013-05-24T00:00:00Z in
 * us-east-1), and the canonical forms curl 7.88 gets wrong.
 */
#include <string.h>

#include "mcdc_sigv4.h"
#include "mcdc_test.h"

static const mcdc_sigv4_key k_example = {"AKIAIOSFODNN7EXAMPLE",
                                         "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", NULL};
static const int64_t k_2013_05_24 = 1369353600000LL;
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Signs and returns the Authorization header (static storage). */
static const char *authorization(mcdc_http_headers *h, mcdc_http_method m, const char *url,
                                 const char *payload_hash) {
    static char out[512];
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_sigv4_sign(h, m, url, payload_hash, &k_example, "us-east-1", "s3",
                                 k_2013_05_24, &e),
                 MCDC_OK);
    const char *a = mcdc_http_headers_get(h, "Authorization");
    snprintf(out, sizeof out, "%s", a ? a : "(none)");
    mcdc_http_headers_free(h);
    return out;
}

TEST(sigv4_get_object_example) {
    mcdc_http_headers h = {0};
    CHECK_EQ_INT(mcdc_http_headers_set(&h, "Range", "bytes=0-9", NULL), MCDC_OK);
    CHECK_EQ_STR(authorization(&h, MCDC_HTTP_GET, "https://examplebucket.s3.amazonaws.com/test.txt",
                               EMPTY_SHA256),
                 "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                 "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                 "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    /* the canonical request AWS shows for it */
    CHECK_EQ_INT(mcdc_http_headers_set(&h, "Range", "bytes=0-9", NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_http_headers_set(&h, "Host", "examplebucket.s3.amazonaws.com", NULL), 0);
    CHECK_EQ_INT(mcdc_http_headers_set(&h, "x-amz-content-sha256", EMPTY_SHA256, NULL), 0);
    CHECK_EQ_INT(mcdc_http_headers_set(&h, "x-amz-date", "20130524T000000Z", NULL), 0);
    mcdc_buf c = {0};
    CHECK_EQ_INT(mcdc_sigv4_canonical_request(&c, MCDC_HTTP_GET,
                                              "https://examplebucket.s3.amazonaws.com/test.txt",
                                              &h, EMPTY_SHA256, NULL),
                 MCDC_OK);
    CHECK_EQ_INT(mcdc_buf_cstr(&c, NULL), MCDC_OK);
    CHECK_EQ_STR((const char *)c.data,
                 "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
                 "x-amz-content-sha256:" EMPTY_SHA256 "\nx-amz-date:20130524T000000Z\n\n"
                 "host;range;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA256);
    mcdc_buf_free(&c);
    mcdc_http_headers_free(&h);
}

TEST(sigv4_put_object_example) {
    char hash[65];
    mcdc_sigv4_sha256_hex("Welcome to Amazon S3.", 21, hash);
    CHECK_EQ_STR(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
    mcdc_http_headers h = {0};
    CHECK_EQ_INT(mcdc_http_headers_set(&h, "Date", "Fri, 24 May 2013 00:00:00 GMT", NULL), 0);
    CHECK_EQ_INT(mcdc_http_headers_set(&h, "x-amz-storage-class", "REDUCED_REDUNDANCY", NULL), 0);
    /* the key "test$file.text", encoded once as S3 wants */
    CHECK_EQ_STR(authorization(&h, MCDC_HTTP_PUT,
                               "https://examplebucket.s3.amazonaws.com/test%24file.text", hash),
                 "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                 "aws4_request,SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;"
                 "x-amz-storage-class,"
                 "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(sigv4_valueless_and_sorted_query_examples) {
    mcdc_http_headers h = {0};
    /* "?lifecycle" is canonical as "lifecycle=" */
    CHECK_EQ_STR(authorization(&h, MCDC_HTTP_GET,
                               "https://examplebucket.s3.amazonaws.com/?lifecycle", EMPTY_SHA256),
                 "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                 "aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
                 "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
    /* the list example, its parameters given out of order */
    CHECK_EQ_STR(authorization(&h, MCDC_HTTP_GET,
                               "https://examplebucket.s3.amazonaws.com/?prefix=J&max-keys=2",
                               EMPTY_SHA256),
                 "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                 "aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
                 "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(sigv4_canonical_forms) {
    mcdc_http_headers h = {0};
    CHECK_EQ_INT(mcdc_http_headers_set(&h, "If-None-Match", "*", NULL), 0);
    CHECK_EQ_INT(mcdc_http_headers_set(&h, "X-Odd", "  a   b\t c  ", NULL), 0);
    mcdc_buf c = {0};
    /* a name that is a prefix of another sorts first, whatever '=' says;
     * valueless "uploads" gets its '='; the path goes as given */
    CHECK_EQ_INT(mcdc_sigv4_canonical_request(&c, MCDC_HTTP_POST,
                                              "http://127.0.0.1:5000/b/a%3Db%20c/k?uploads&a-b=2"
                                              "&a=1",
                                              &h, MCDC_SIGV4_UNSIGNED_PAYLOAD, NULL),
                 MCDC_OK);
    CHECK_EQ_INT(mcdc_buf_cstr(&c, NULL), MCDC_OK);
    CHECK_EQ_STR((const char *)c.data, "POST\n/b/a%3Db%20c/k\na=1&a-b=2&uploads=\n"
                                       "if-none-match:*\nx-odd:a b c\n\n"
                                       "if-none-match;x-odd\nUNSIGNED-PAYLOAD");
    mcdc_buf_free(&c);
    /* a session token is sent and signed; the host keeps its port */
    mcdc_sigv4_key k = k_example;
    k.session_token = "TOKEN";
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_sigv4_sign(&h, MCDC_HTTP_GET, "http://127.0.0.1:5000/b", EMPTY_SHA256, &k,
                                 "eu-west-1", "s3", k_2013_05_24, &e),
                 MCDC_OK);
    CHECK_EQ_STR(mcdc_http_headers_get(&h, "x-amz-security-token"), "TOKEN");
    CHECK_EQ_STR(mcdc_http_headers_get(&h, "host"), "127.0.0.1:5000");
    const char *auth = mcdc_http_headers_get(&h, "Authorization");
    CHECK(auth != NULL && strstr(auth, "x-amz-security-token") != NULL);
    CHECK(auth != NULL && strstr(auth, "/eu-west-1/s3/") != NULL);
    CHECK(auth != NULL && strstr(auth, "TOKEN") == NULL);
    CHECK(auth != NULL && strstr(auth, "EXAMPLEKEY") == NULL);
    mcdc_http_headers_free(&h);
    CHECK_EQ_INT(mcdc_sigv4_sign(&h, MCDC_HTTP_GET, "nourl", EMPTY_SHA256, &k, "r", "s3", 0, &e),
                 MCDC_E_INVALID);
    mcdc_http_headers_free(&h);
}
