/*
 * test_s3_backend.c - the S3 backend against a scripted server on loopback
 * (what moto cannot be made to do): a commit whose first attempt was reset
 * after it went out, then refused as existing, reads the key back and
 * tells its own object from another writer's; 409 ConditionalRequestConflict
 * is retried; the region S3 names, a clock skew and throttling are said;
 * and the little XML reader the errors and listings go through.
 */
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_storage.h"
#include "mcdc_test.h"
#include "mcdc_xml.h"
#include "test_http_server.h"

static const char *opt_of(void *octx, const char *name) {
    for (const char *const *p = octx; *p; p += 2)
        if (strcmp(p[0], name) == 0) return p[1];
    return NULL;
}

/* Starts the scripted server; s->url is "http://<host>:<port>". */
static void start_at(server *s, const step *steps, int n, const char *host) {
    server_start(s, steps, n);
    snprintf(s->url, sizeof s->url, "http://%s:%d", host, s->port);
}

/* A storage on s3://bkt/t at the scripted server (path style). */
static mcdc_storage *s3_at(server *s, const step *steps, int n) {
    start_at(s, steps, n, "127.0.0.1");
    static const char *opts[] = {"AWS_ACCESS_KEY_ID", "AKIDLOCAL", "AWS_SECRET_ACCESS_KEY",
                                 "local-secret-5", "AWS_ENDPOINT_URL", NULL,
                                 "AWS_ALLOW_HTTP", "true", "AWS_REGION", "us-east-1", NULL};
    opts[5] = s->url;
    mcdc_storage_env env = {.option = opt_of, .octx = opts};
    mcdc_storage *st = NULL;
    CHECK_EQ_INT(mcdc_storage_open_env(&st, &env, "s3://bkt/t", NULL), MCDC_OK);
    return st;
}

#define ANSWER_EMPTY(status) "HTTP/1.1 " status "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
#define ANSWER_XML(status, xml)                                                          \
    "HTTP/1.1 " status "\r\nContent-Type: application/xml\r\nx-amz-request-id: RID7\r\n" \
    "Connection: close\r\n\r\n" xml

TEST(s3_commit_after_an_ambiguous_failure_reads_the_key_back) {
    /* ours landed: the reset PUT went through, the retry finds the key */
    static const step ours[] = {
        {RESET, NULL},
        {ANSWER, ANSWER_XML("412 Precondition Failed",
                            "<Error><Code>PreconditionFailed</Code></Error>")},
        {ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\ncommit"},
    };
    server s;
    mcdc_storage *st = s3_at(&s, ours, 3);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_put_if_absent(st, "_delta_log/1.json", "commit", 6, &e), MCDC_OK);
    server_stop(&s);
    CHECK_EQ_STR(s.seen_line[0], "PUT /bkt/t/_delta_log/1.json HTTP/1.1");
    CHECK(strstr(s.seen_req[1], "If-None-Match: *") != NULL);
    CHECK(strstr(s.seen_req[1], "if-none-match;") != NULL); /* signed */
    CHECK_EQ_STR(s.seen_line[2], "GET /bkt/t/_delta_log/1.json HTTP/1.1");
    mcdc_storage_free(st);
    /* another writer's: the key holds other bytes, a lost race */
    static const step theirs[] = {
        {RESET, NULL},
        {ANSWER, ANSWER_XML("412 Precondition Failed",
                            "<Error><Code>PreconditionFailed</Code></Error>")},
        {ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nrivals"},
    };
    st = s3_at(&s, theirs, 3);
    CHECK_EQ_INT(mcdc_storage_put_if_absent(st, "_delta_log/1.json", "commit", 6, &e),
                 MCDC_E_CONFLICT);
    CHECK(strstr(e.message, "s3://bkt/t/_delta_log/1.json already exists") != NULL);
    server_stop(&s);
    mcdc_storage_free(st);
    /* a 412 with no ambiguity before it is a lost race at once, no read */
    static const step plain[] = {
        {ANSWER, ANSWER_XML("412 Precondition Failed",
                            "<Error><Code>PreconditionFailed</Code></Error>")},
    };
    st = s3_at(&s, plain, 1);
    CHECK_EQ_INT(mcdc_storage_put_if_absent(st, "k", "v", 1, &e), MCDC_E_CONFLICT);
    server_stop(&s);
    CHECK_EQ_INT(s.served, 1);
    mcdc_storage_free(st);
}

TEST(s3_conditional_request_conflict_is_retried) {
    static const step steps[] = {
        {ANSWER, ANSWER_XML("409 Conflict", "<Error><Code>ConditionalRequestConflict</Code>"
                                            "</Error>")},
        {ANSWER, "HTTP/1.1 200 OK\r\nETag: \"e\"\r\nContent-Length: 0\r\nConnection: close"
                 "\r\n\r\n"},
    };
    server s;
    mcdc_storage *st = s3_at(&s, steps, 2);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_put_if_absent(st, "k", "v", 1, &e), MCDC_OK);
    server_stop(&s);
    CHECK_EQ_INT(s.served, 2);
    CHECK(strstr(s.seen_req[1], "x-amz-content-sha256: 4c94485e0c21ae6c41ce1dfe7b6bface"
                                "ea5ab68e40a2476f50208e526f506080") != NULL); /* sha256("v") */
    mcdc_storage_free(st);
}

TEST(s3_refusals_say_what_to_do) {
    static const step steps[] = {
        {ANSWER, ANSWER_XML("400 Bad Request",
                            "<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region "
                            "'us-east-1' is wrong; expecting 'eu-west-1'</Message><Region>"
                            "eu-west-1</Region></Error>")},
        {ANSWER, ANSWER_XML("403 Forbidden", "<Error><Code>RequestTimeTooSkewed</Code></Error>")},
        {ANSWER, ANSWER_XML("403 Forbidden", "<Error><Code>AccessDenied</Code><Message>Access "
                                             "Denied</Message></Error>")},
        {ANSWER, ANSWER_XML("403 Forbidden", "<Error><Code>InvalidAccessKeyId</Code></Error>")},
        {ANSWER, "HTTP/1.1 301 Moved Permanently\r\nx-amz-bucket-region: ap-south-1\r\n"
                 "Content-Length: 0\r\nConnection: close\r\n\r\n"},
    };
    server s;
    mcdc_storage *st = s3_at(&s, steps, 5);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_storage_get(st, "k", 10, &b, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "set AWS_REGION=eu-west-1") != NULL);
    CHECK(strstr(e.message, "RID7") != NULL);
    CHECK_EQ_INT(mcdc_storage_get(st, "k", 10, &b, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "clock skew") != NULL);
    CHECK_EQ_INT(mcdc_storage_put(st, "k", "v", 1, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "s3:PutObject") != NULL);
    CHECK(strstr(e.message, "AKIDLOCAL") != NULL);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(st, "_delta_log/", &l, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "AKIDLOCAL") != NULL && strstr(e.message, "not known") != NULL);
    int64_t size;
    CHECK_EQ_INT(mcdc_storage_size(st, "k", &size, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "ap-south-1") != NULL);
    CHECK(strstr(e.message, "local-secret-5") == NULL);
    server_stop(&s);
    /* the secret went nowhere on the wire either */
    for (int i = 0; i < 5; i++) CHECK(strstr(s.seen_req[i], "local-secret-5") == NULL);
    mcdc_buf_free(&b);
    mcdc_storage_free(st);
}

TEST(s3_xml_reader) {
    const char *doc = "<?xml version=\"1.0\"?><ListBucketResult><KeyCount>2</KeyCount>"
                      "<Contents><Key>a&amp;b&lt;&#233;&#x41;</Key><Size>3</Size></Contents>"
                      "<Contents ><Key>c</Key><Empty/></Contents></ListBucketResult>";
    const char *pos = doc, *end = doc + strlen(doc), *c;
    size_t n;
    mcdc_buf b = {0};
    CHECK(mcdc_xml_next(&pos, end, "Contents", &c, &n));
    CHECK_EQ_INT(mcdc_xml_text(&b, c, n, "Key", NULL), MCDC_OK);
    CHECK_EQ_STR((const char *)b.data, "a&b<\xc3\xa9" "A");
    CHECK(mcdc_xml_next(&pos, end, "Contents", &c, &n));
    char key[8];
    CHECK(mcdc_xml_text_fixed(key, sizeof key, c, n, "Key"));
    CHECK_EQ_STR(key, "c");
    CHECK(mcdc_xml_text_fixed(key, sizeof key, c, n, "Empty") && key[0] == 0);
    CHECK(!mcdc_xml_next(&pos, end, "Contents", &c, &n));
    /* <Key> is not <KeyCount> */
    CHECK(mcdc_xml_text_fixed(key, sizeof key, doc, strlen(doc), "KeyCount"));
    CHECK_EQ_STR(key, "2");
    mcdc_buf_reset(&b);
    CHECK_EQ_INT(mcdc_xml_text(&b, "<K>&bogus;</K>", 14, "K", NULL), MCDC_E_PROTOCOL);
    CHECK_EQ_INT(mcdc_xml_text(&b, "<K>unclosed", 11, "K", NULL), MCDC_E_NOTFOUND);
    mcdc_buf_reset(&b);
    CHECK_EQ_INT(mcdc_xml_escape(&b, "\"e\"&<>'", 7, NULL), MCDC_OK);
    CHECK_EQ_INT(mcdc_buf_cstr(&b, NULL), MCDC_OK);
    CHECK_EQ_STR((const char *)b.data, "&quot;e&quot;&amp;&lt;&gt;&apos;");
    mcdc_buf_free(&b);
}

/* ---- credentials from services ---------------------------------------------------------- */

/* A storage on s3://bkt/t at the scripted server, which also plays the
 * credentials service; opts are the credentials options (NULL-ended
 * pairs, at most 8). */
static int s3_with(mcdc_storage **st, server *s, const step *steps, int n, const char **opts,
                   mcdc_error *e) {
    start_at(s, steps, n, "127.0.0.1");
    const char *all[24] = {"AWS_ENDPOINT_URL", s->url, "AWS_ALLOW_HTTP", "true",
                           "AWS_EC2_METADATA_SERVICE_ENDPOINT", s->url, "AWS_ENDPOINT_URL_STS",
                           s->url};
    size_t k = 8;
    for (size_t i = 0; opts[i] && k < 22; i++) all[k++] = opts[i];
    mcdc_storage_env env = {.option = opt_of, .octx = all};
    return mcdc_storage_open_env(st, &env, "s3://bkt/t", e);
}

/* An IMDS/container JSON answer with a key expiring in_s seconds from now. */
static void creds_json(char *out, size_t room, const char *key_id, const char *token, int in_s) {
    char ts[32], body[512];
    mcdc_format_ts_us(mcdc_now_utc_us() + (int64_t)in_s * 1000000, 0, ts);
    int n = snprintf(body, sizeof body,
                     "{\"Code\":\"Success\",\"AccessKeyId\":\"%s\",\"SecretAccessKey\":\"sec-%s\","
                     "\"Token\":\"%s\",\"Expiration\":\"%sZ\"}",
                     key_id, key_id, token, ts);
    snprintf(out, room, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", n,
             body);
}

#define OK_TEXT(len, text) \
    "HTTP/1.1 200 OK\r\nContent-Length: " #len "\r\nConnection: close\r\n\r\n" text

TEST(s3_instance_metadata_keys_are_renewed_before_they_expire) {
    static char first[1024], second[1024];
    creds_json(first, sizeof first, "ASIA1", "SESSION1", 60); /* inside the 5 minutes */
    creds_json(second, sizeof second, "ASIA2", "SESSION2", 6 * 3600);
    const step steps[] = {
        {ANSWER, OK_TEXT(6, "TOKEN1")},       {ANSWER, OK_TEXT(10, "lake-role\n")},
        {ANSWER, first},                      {ANSWER, OK_TEXT(6, "TOKEN2")},
        {ANSWER, OK_TEXT(10, "lake-role\n")}, {ANSWER, second},
        {ANSWER, ANSWER_EMPTY("200 OK")},
    };
    server s;
    mcdc_storage *st = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    const char *none[] = {NULL};
    CHECK_EQ_INT(s3_with(&st, &s, steps, 7, none, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(st, "k", "v", 1, &e), MCDC_OK);
    server_stop(&s);
    CHECK_EQ_STR(s.seen_line[0], "PUT /latest/api/token HTTP/1.1");
    CHECK(strstr(s.seen_req[0], "X-aws-ec2-metadata-token-ttl-seconds: 21600") != NULL);
    CHECK_EQ_STR(s.seen_line[2], "GET /latest/meta-data/iam/security-credentials/lake-role "
                                 "HTTP/1.1");
    CHECK(strstr(s.seen_req[2], "X-aws-ec2-metadata-token: TOKEN1") != NULL);
    CHECK(strstr(s.seen_req[4], "X-aws-ec2-metadata-token: TOKEN2") != NULL);
    /* the object went with the renewed key */
    CHECK_EQ_STR(s.seen_line[6], "PUT /bkt/t/k HTTP/1.1");
    CHECK(strstr(s.seen_req[6], "Credential=ASIA2/") != NULL);
    CHECK(strstr(s.seen_req[6], "x-amz-security-token: SESSION2") != NULL);
    CHECK(strstr(s.seen_req[6], "sec-ASIA2") == NULL);
    mcdc_storage_free(st);
}

TEST(s3_expired_keys_that_cannot_be_renewed_are_an_error) {
    static char gone[1024];
    creds_json(gone, sizeof gone, "ASIA1", "SESSION1", -5);
    const step steps[] = {
        {ANSWER, OK_TEXT(6, "TOKEN1")},
        {ANSWER, OK_TEXT(10, "lake-role\n")},
        {ANSWER, gone},
        {ANSWER, ANSWER_EMPTY("404 Not Found")},
    };
    server s;
    mcdc_storage *st = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    const char *none[] = {NULL};
    CHECK_EQ_INT(s3_with(&st, &s, steps, 4, none, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(st, "k", "v", 1, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "expired and could not be renewed") != NULL);
    CHECK(strstr(e.message, "instance metadata") != NULL);
    server_stop(&s);
    CHECK_EQ_INT(s.served, 4); /* nothing went out with the expired key */
    mcdc_storage_free(st);
}

TEST(s3_web_identity_assumes_the_role) {
    char dir[] = "/tmp/mcdc-wi-XXXXXX", file[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(file, sizeof file, "%s/token", dir);
    FILE *f = fopen(file, "w");
    fputs("eyJ.web.token\n", f);
    fclose(f);
    static char sts[2048];
    char ts[32];
    mcdc_format_ts_us(mcdc_now_utc_us() + 3600000000LL, 0, ts);
    char body[1024];
    int n = snprintf(body, sizeof body,
                     "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>"
                     "<Credentials><AccessKeyId>ASIAWEB</AccessKeyId><SecretAccessKey>wsec"
                     "</SecretAccessKey><SessionToken>WEBSESSION</SessionToken><Expiration>%sZ"
                     "</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
                     "</AssumeRoleWithWebIdentityResponse>",
                     ts);
    snprintf(sts, sizeof sts, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
             n, body);
    const step steps[] = {{ANSWER, sts}, {ANSWER, OK_TEXT(1, "v")}};
    const char *opts[] = {"AWS_WEB_IDENTITY_TOKEN_FILE", file, "AWS_ROLE_ARN",
                          "arn:aws:iam::123456789012:role/lake", NULL};
    server s;
    mcdc_storage *st = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(s3_with(&st, &s, steps, 2, opts, &e), MCDC_OK);
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_storage_get(st, "k", 10, &b, &e), MCDC_OK);
    server_stop(&s);
    CHECK_EQ_STR(s.seen_line[0], "POST / HTTP/1.1");
    CHECK(strstr(s.seen_req[0], "Action=AssumeRoleWithWebIdentity") != NULL);
    CHECK(strstr(s.seen_req[0], "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Flake") !=
          NULL);
    CHECK(strstr(s.seen_req[0], "WebIdentityToken=eyJ.web.token&") != NULL ||
          strstr(s.seen_req[0], "WebIdentityToken=eyJ.web.token") != NULL);
    CHECK(strstr(s.seen_req[0], "Authorization") == NULL); /* STS takes the token unsigned */
    CHECK(strstr(s.seen_req[1], "Credential=ASIAWEB/") != NULL);
    CHECK(strstr(s.seen_req[1], "x-amz-security-token: WEBSESSION") != NULL);
    mcdc_storage_free(st);
    /* STS refuses: said at open, with the role */
    static const step refused[] = {
        {ANSWER, ANSWER_XML("403 Forbidden", "<ErrorResponse><Error><Code>AccessDenied</Code>"
                                             "<Message>Not authorized</Message></Error>"
                                             "</ErrorResponse>")},
    };
    CHECK_EQ_INT(s3_with(&st, &s, refused, 1, opts, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "AssumeRoleWithWebIdentity of role arn:aws:iam::123456789012:role/"
                            "lake") != NULL);
    CHECK(strstr(e.message, "AccessDenied") != NULL);
    CHECK(strstr(e.message, "eyJ") == NULL);
    server_stop(&s);
    mcdc_buf_free(&b);
    remove(file);
    rmdir(dir);
}

TEST(s3_container_endpoint_gives_keys) {
    static char answer[1024];
    creds_json(answer, sizeof answer, "ASIACT", "CTSESSION", 3600);
    const step steps[] = {{ANSWER, answer}, {ANSWER, ANSWER_EMPTY("204 No Content")}};
    server s;
    start_at(&s, steps, 2, "127.0.0.1");
    char full[128];
    snprintf(full, sizeof full, "%s/v2/creds", s.url);
    const char *opts[] = {"AWS_ENDPOINT_URL", s.url, "AWS_ALLOW_HTTP", "true",
                          "AWS_CONTAINER_CREDENTIALS_FULL_URI", full,
                          "AWS_CONTAINER_AUTHORIZATION_TOKEN", "ct-auth-9", NULL};
    mcdc_storage_env env = {.option = opt_of, .octx = opts};
    mcdc_storage *st = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_open_env(&st, &env, "s3://bkt/t", &e), MCDC_OK);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(st, "x/", &l, &e), MCDC_E_IO); /* 204 is no listing */
    server_stop(&s);
    CHECK_EQ_STR(s.seen_line[0], "GET /v2/creds HTTP/1.1");
    CHECK(strstr(s.seen_req[0], "Authorization: ct-auth-9") != NULL);
    CHECK(strstr(s.seen_req[1], "Credential=ASIACT/") != NULL);
    CHECK(strstr(e.message, "ct-auth-9") == NULL);
    mcdc_storage_free(st);
    /* plain http elsewhere than this machine is refused */
    opts[5] = "http://10.1.2.3/creds";
    CHECK_EQ_INT(mcdc_storage_open_env(&st, &env, "s3://bkt/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "AWS_CONTAINER_CREDENTIALS_FULL_URI") != NULL);
}

/* ---- multipart commits on the scripted server ------------------------------------------- */

/* The scripted server answers in arrival order, and the two parts travel at
 * once (mcdc_part_sender), so either may come first: both get one ETag. That
 * a part's ETag is listed under its own number is the part sender's test. */
#define PART_A "0123456789abcdef0123456789abcdef"
#define PART_B PART_A
#define MP_BYTES (5 * 1024 * 1024 + 10) /* two parts at the smallest part size */

/* Writes MP_BYTES to "big" and commits it put-if-absent. */
static int write_big(mcdc_storage *st, mcdc_error *e) {
    static uint8_t chunk[1 << 20];
    mcdc_storage_writer *w = NULL;
    int rc = mcdc_storage_writer_open(&w, st, "big", e);
    for (int i = 0; rc == MCDC_OK && i < 5; i++) rc = mcdc_storage_writer_write(w, chunk, sizeof chunk, e);
    if (rc == MCDC_OK) rc = mcdc_storage_writer_write(w, chunk, 10, e);
    if (rc) {
        mcdc_storage_writer_abort(w);
        return rc;
    }
    return mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_IF_ABSENT, e);
}

/* The multipart ETag S3 gives the object of parts PART_A and PART_B. */
static void composite_etag(char out[48]) {
    uint8_t md5s[32], d[16];
    for (int i = 0; i < 16; i++) {
        unsigned a, b;
        sscanf(&PART_A[2 * i], "%2x", &a);
        sscanf(&PART_B[2 * i], "%2x", &b);
        md5s[i] = (uint8_t)a;
        md5s[16 + i] = (uint8_t)b;
    }
    gnutls_hash_fast(GNUTLS_DIG_MD5, md5s, sizeof md5s, d);
    int k = snprintf(out, 48, "\"");
    for (int i = 0; i < 16; i++) k += snprintf(out + k, (size_t)(48 - k), "%02x", d[i]);
    snprintf(out + k, (size_t)(48 - k), "-2\"");
}

static mcdc_storage *s3_parts_at(server *s, const step *steps, int n) {
    start_at(s, steps, n, "127.0.0.1");
    static const char *opts[] = {"AWS_ACCESS_KEY_ID", "AKIDLOCAL", "AWS_SECRET_ACCESS_KEY",
                                 "local-secret-5", "AWS_ENDPOINT_URL", NULL, "AWS_ALLOW_HTTP",
                                 "true", "MCDC_S3_PART_BYTES", "5242880", NULL};
    opts[5] = s->url;
    mcdc_storage_env env = {.option = opt_of, .octx = opts};
    mcdc_storage *st = NULL;
    CHECK_EQ_INT(mcdc_storage_open_env(&st, &env, "s3://bkt/t", NULL), MCDC_OK);
    return st;
}

#define MP_START                                                                              \
    {ANSWER, ANSWER_XML("200 OK", "<InitiateMultipartUploadResult><UploadId>UP/1+x</UploadId>" \
                                  "</InitiateMultipartUploadResult>")},                       \
    {ANSWER, "HTTP/1.1 200 OK\r\nETag: \"" PART_A "\"\r\nContent-Length: 0\r\n"               \
             "Connection: close\r\n\r\n"},                                                    \
    {ANSWER, "HTTP/1.1 200 OK\r\nETag: \"" PART_B "\"\r\nContent-Length: 0\r\n"               \
             "Connection: close\r\n\r\n"}

TEST(s3_multipart_commit_after_an_ambiguous_failure_reads_the_object_back) {
    static char head_ours[256], head_theirs[256];
    char etag[48];
    composite_etag(etag);
    snprintf(head_ours, sizeof head_ours, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: %s\r\n"
             "Connection: close\r\n\r\n", MP_BYTES, etag);
    snprintf(head_theirs, sizeof head_theirs, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: "
             "\"00000000000000000000000000000000-2\"\r\nConnection: close\r\n\r\n", MP_BYTES);
    /* the completion was reset, its retry finds the upload gone: the
     * object there is ours (size and multipart ETag) */
    const step ours[] = {
        MP_START,
        {RESET, NULL},
        {ANSWER, ANSWER_XML("404 Not Found", "<Error><Code>NoSuchUpload</Code></Error>")},
        {ANSWER, head_ours},
    };
    server s;
    mcdc_storage *st = s3_parts_at(&s, ours, 6);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(write_big(st, &e), MCDC_OK);
    server_stop(&s);
    CHECK_EQ_STR(s.seen_line[0], "POST /bkt/t/big?uploads= HTTP/1.1");
    int first = strcmp(s.seen_line[1], "PUT /bkt/t/big?partNumber=1&uploadId=UP%2F1%2Bx HTTP/1.1")
                    ? 2 : 1; /* the request that sent part 1 */
    CHECK_EQ_STR(s.seen_line[first], "PUT /bkt/t/big?partNumber=1&uploadId=UP%2F1%2Bx HTTP/1.1");
    CHECK_EQ_STR(s.seen_line[3 - first],
                 "PUT /bkt/t/big?partNumber=2&uploadId=UP%2F1%2Bx HTTP/1.1");
    CHECK(s.seen_bytes[first] > 5 * 1024 * 1024); /* a whole part */
    CHECK(s.seen_bytes[3 - first] < 4096);        /* the 10 bytes left */
    CHECK_EQ_STR(s.seen_line[3], "POST /bkt/t/big?uploadId=UP%2F1%2Bx HTTP/1.1");
    CHECK(strstr(s.seen_req[3], "If-None-Match: *") != NULL);
    CHECK(strstr(s.seen_req[3], "<Part><ETag>&quot;" PART_B "&quot;</ETag><PartNumber>2"
                                "</PartNumber></Part>") != NULL);
    CHECK_EQ_STR(s.seen_line[5], "HEAD /bkt/t/big HTTP/1.1");
    mcdc_storage_free(st);
    /* the object there is another writer's: a lost race, our upload aborted */
    const step theirs[] = {
        MP_START,
        {RESET, NULL},
        {ANSWER, ANSWER_XML("412 Precondition Failed", "<Error><Code>PreconditionFailed</Code>"
                                                       "</Error>")},
        {ANSWER, head_theirs},
        {ANSWER, ANSWER_EMPTY("204 No Content")},
    };
    st = s3_parts_at(&s, theirs, 7);
    CHECK_EQ_INT(write_big(st, &e), MCDC_E_CONFLICT);
    server_stop(&s);
    CHECK_EQ_STR(s.seen_line[6], "DELETE /bkt/t/big?uploadId=UP%2F1%2Bx HTTP/1.1");
    mcdc_storage_free(st);
}

TEST(s3_multipart_completion_with_an_error_in_its_200_is_retried) {
    const step steps[] = {
        MP_START,
        {ANSWER, ANSWER_XML("200 OK", "<Error><Code>InternalError</Code><Message>We encountered "
                                      "an internal error</Message></Error>")},
        {ANSWER, ANSWER_XML("200 OK", "<CompleteMultipartUploadResult><Key>t/big</Key>"
                                      "</CompleteMultipartUploadResult>")},
    };
    server s;
    mcdc_storage *st = s3_parts_at(&s, steps, 5);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(write_big(st, &e), MCDC_OK);
    server_stop(&s);
    CHECK_EQ_INT(s.served, 5); /* completed the second time; nothing to abort */
    CHECK_EQ_STR(s.seen_line[4], "POST /bkt/t/big?uploadId=UP%2F1%2Bx HTTP/1.1");
    mcdc_storage_free(st);
}

/* Virtual-hosted addressing puts the bucket in the host name (curl
 * resolves *.localhost to this machine), path style in the path. */
TEST(s3_addressing_styles) {
    static const step steps[] = {
        {ANSWER, ANSWER_EMPTY("200 OK")},
        {ANSWER, ANSWER_XML("200 OK", "<ListBucketResult><IsTruncated>false</IsTruncated>"
                                      "</ListBucketResult>")},
        {ANSWER, ANSWER_EMPTY("200 OK")},
    };
    server s;
    start_at(&s, steps, 3, "localhost"); /* the endpoint */
    const char *opts[] = {"AWS_ACCESS_KEY_ID", "AKIDLOCAL", "AWS_SECRET_ACCESS_KEY", "x",
                          "AWS_ENDPOINT_URL", s.url, "AWS_ALLOW_HTTP", "true",
                          "AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "true", NULL};
    mcdc_storage_env env = {.option = opt_of, .octx = opts};
    mcdc_storage *st = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_open_env(&st, &env, "s3://bkt/t", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(st, "d/k 1", "v", 1, &e), MCDC_OK);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(st, "d/", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 0);
    mcdc_storage_listing_free(&l);
    mcdc_storage_free(st);
    opts[8] = "AWS_S3_ADDRESSING_STYLE";
    opts[9] = "path";
    CHECK_EQ_INT(mcdc_storage_open_env(&st, &env, "s3://bkt/t", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(st, "d/k", "v", 1, &e), MCDC_OK);
    mcdc_storage_free(st);
    server_stop(&s);
    char host[64];
    snprintf(host, sizeof host, "Host: bkt.localhost:%d\r\n", s.port);
    CHECK_EQ_STR(s.seen_line[0], "PUT /t/d/k%201 HTTP/1.1");
    CHECK(strstr(s.seen_req[0], host) != NULL);
    CHECK_EQ_STR(s.seen_line[1], "GET /?delimiter=%2F&list-type=2&prefix=t%2Fd%2F HTTP/1.1");
    CHECK_EQ_STR(s.seen_line[2], "PUT /bkt/t/d/k HTTP/1.1");
    snprintf(host, sizeof host, "Host: localhost:%d\r\n", s.port);
    CHECK(strstr(s.seen_req[2], host) != NULL);
}

/* A proxy named by the options carries the requests (the environment's
 * is never used); NO_PROXY bypasses it; a CA bundle that cannot be read is
 * said at open. */
TEST(s3_proxy_and_ca_bundle_options) {
    static const step steps[] = {
        {ANSWER, ANSWER_EMPTY("200 OK")},
        {ANSWER, ANSWER_EMPTY("200 OK")},
    };
    server s;
    start_at(&s, steps, 2, "127.0.0.1"); /* the proxy */
    const char *proxy = s.url;
    const char *opts[] = {"AWS_ACCESS_KEY_ID", "AKIDLOCAL", "AWS_SECRET_ACCESS_KEY", "x",
                          "AWS_ENDPOINT_URL", "http://s3.example.invalid:9000",
                          "AWS_ALLOW_HTTP", "true", "HTTP_PROXY", proxy, NULL, NULL, NULL};
    mcdc_storage_env env = {.option = opt_of, .octx = opts};
    mcdc_storage *st = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_open_env(&st, &env, "s3://bkt/t", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(st, "k", "v", 1, &e), MCDC_OK);
    mcdc_storage_free(st);
    /* the endpoint itself, with the proxy bypassed for it */
    opts[5] = proxy;
    opts[9] = "http://127.0.0.1:1";
    opts[10] = "NO_PROXY";
    opts[11] = "127.0.0.1";
    CHECK_EQ_INT(mcdc_storage_open_env(&st, &env, "s3://bkt/t", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(st, "k2", "v", 1, &e), MCDC_OK);
    mcdc_storage_free(st);
    server_stop(&s);
    CHECK_EQ_STR(s.seen_line[0], "PUT http://s3.example.invalid:9000/bkt/t/k HTTP/1.1");
    CHECK_EQ_STR(s.seen_line[1], "PUT /bkt/t/k2 HTTP/1.1");
    opts[10] = "AWS_CA_BUNDLE";
    opts[11] = "/nonexistent/ca.pem";
    CHECK_EQ_INT(mcdc_storage_open_env(&st, &env, "s3://bkt/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "AWS_CA_BUNDLE /nonexistent/ca.pem") != NULL);
}
