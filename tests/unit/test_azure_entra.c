/*
 * test_azure_entra.c - Entra ID on the Azure backend, against scripted
 * servers on loopback (test_http_server.h) standing for Entra ID's token
 * endpoint, a managed identity's endpoint and the blob service: what each
 * token request carries (grant, client, secret or assertion, scope or
 * resource, the identity's headers), the bearer token on the blob
 * requests with x-ms-version, its renewal near expiry (and the old token
 * kept while a renewal fails), the refusals of the token endpoint and of
 * wrong options, and no secret in any message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_azure_auth.h"
#include "mcdc_azure_entra.h"
#include "mcdc_storage.h"
#include "mcdc_test.h"
#include "test_http_server.h"

#define SECRET "s3cr3t-Entra-client-secret"
#define HDR_SECRET "identity-header-secret-42"

/* "NAME=value" pairs; nothing from the process's environment. */
static const char *entra_opt(void *octx, const char *name) {
    size_t n = strlen(name);
    for (const char *const *o = octx; o && *o; o++)
        if (strncmp(*o, name, n) == 0 && (*o)[n] == '=') return (*o)[n + 1] ? *o + n + 1 : NULL;
    return NULL;
}

static int open_with(mcdc_storage **s, const char *const *opts, mcdc_error *e) {
    mcdc_storage_env env = {.option = entra_opt, .octx = (void *)opts};
    *s = NULL;
    return mcdc_storage_open_env(s, &env, "az://lake/t", e);
}

/* An answer (Connection: close: one connection per step); owned. */
static char *answer(const char *status, const char *body) {
    return mcdc_asprintf("HTTP/1.1 %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                         "Content-Length: %zu\r\n\r\n%s",
                         status, strlen(body), body);
}

static const char k_not_found[] =
    "HTTP/1.1 404 The specified blob does not exist.\r\nx-ms-error-code: BlobNotFound\r\n"
    "Connection: close\r\nContent-Length: 0\r\n\r\n";

TEST(azure_entra_token_answers_parse) {
    mcdc_error e = MCDC_ERROR_INIT;
    char *tok = NULL;
    int64_t exp = 0;
    const char *a = "{\"token_type\":\"Bearer\",\"expires_in\":3599,\"access_token\":\"eyJ0.x.y\"}";
    CHECK_EQ_INT(mcdc_az_token_parse(&tok, &exp, a, strlen(a), 1000, "t", &e), MCDC_OK);
    CHECK_EQ_STR(tok, "eyJ0.x.y");
    CHECK(exp == 1000 + 3599 * 1000);
    mcdc_free(tok);
    /* IMDS: strings, and expires_on wins over expires_in */
    const char *b = "{\"access_token\":\"abc\",\"expires_in\":\"10\",\"expires_on\":\"1900000000\","
                    "\"resource\":\"https://storage.azure.com/\",\"token_type\":\"Bearer\"}";
    CHECK_EQ_INT(mcdc_az_token_parse(&tok, &exp, b, strlen(b), 5, "t", &e), MCDC_OK);
    CHECK(exp == 1900000000LL * 1000);
    mcdc_free(tok);
    static const char *const bad[] = {
        "", "[]", "not json", "{\"expires_in\":5}", "{\"access_token\":\"\",\"expires_in\":5}",
        "{\"access_token\":\"a\"}", "{\"access_token\":\"a\",\"expires_in\":\"5s\"}",
        "{\"access_token\":\"a\",\"expires_in\":-5}",
        "{\"access_token\":\"a b\",\"expires_in\":5}",
        "{\"access_token\":\"a\",\"expires_in\":5,\"token_type\":\"pop\"}",
        "{\"access_token\":\"a\",\"access_token\":\"b\",\"expires_in\":5}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(mcdc_az_token_parse(&tok, &exp, bad[i], strlen(bad[i]), 5, "the endpoint",
                                         &e),
                     MCDC_E_PROTOCOL);
        CHECK(tok == NULL);
        CHECK(strstr(e.message, "the endpoint") != NULL);
    }
    char why[128];
    const char *err1 = "{\"error\":\"invalid_client\",\"error_description\":\"AADSTS7000215: "
                       "Invalid client secret provided.\\r\\nTrace ID: 1\"}";
    mcdc_az_token_error(why, sizeof why, err1, strlen(err1));
    CHECK_EQ_STR(why, "invalid_client: AADSTS7000215: Invalid client secret provided.");
    const char *err2 = "{\"error\":{\"code\":\"IdentityNotFound\",\"message\":\"none\"}}";
    mcdc_az_token_error(why, sizeof why, err2, strlen(err2));
    CHECK_EQ_STR(why, "IdentityNotFound: none");
    mcdc_az_token_error(why, sizeof why, "<html>", 6);
    CHECK_EQ_STR(why, "");
}

/* The blob server's URL as AZURE_STORAGE_ENDPOINT, the token server's as
 * AZURE_AUTHORITY_HOST. */
typedef struct two {
    server tok, blob;
    char ep[128], auth[128];
} two;

static void two_start(two *t, const step *tok, int ntok, const step *blob, int nblob) {
    server_start(&t->tok, tok, ntok);
    server_start(&t->blob, blob, nblob);
    snprintf(t->ep, sizeof t->ep, "AZURE_STORAGE_ENDPOINT=http://127.0.0.1:%d", t->blob.port);
    snprintf(t->auth, sizeof t->auth, "AZURE_AUTHORITY_HOST=http://127.0.0.1:%d", t->tok.port);
}

static void two_stop(two *t) {
    server_stop(&t->tok);
    server_stop(&t->blob);
}

TEST(azure_entra_client_secret_bearer_on_blob_requests_renewed_near_expiry) {
    /* tokens for 60 s: inside the renewal margin, so each request renews */
    char *a1 = answer("200 OK", "{\"token_type\":\"Bearer\",\"expires_in\":60,\"access_token\":\"tok-1\"}");
    char *a2 = answer("200 OK", "{\"token_type\":\"Bearer\",\"expires_in\":60,\"access_token\":\"tok-2\"}");
    char *a3 = answer("400 Bad Request", "{\"error\":\"temporarily_unavailable\"}");
    step tok[] = {{ANSWER, a1}, {ANSWER, a2}, {ANSWER, a3}};
    step blob[] = {{ANSWER, k_not_found}, {ANSWER, k_not_found}};
    two t;
    two_start(&t, tok, 3, blob, 2);
    const char *opts[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct1", "AZURE_ALLOW_HTTP=true",
                          "AZURE_CLIENT_ID=cid-1", "AZURE_CLIENT_SECRET=" SECRET,
                          "AZURE_TENANT_ID=tenant-1.example", t.ep, t.auth, NULL};
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage *s = NULL;
    CHECK_EQ_INT(open_with(&s, opts, &e), MCDC_OK);
    /* the first token at open: the client credentials grant */
    CHECK_EQ_STR(t.tok.seen_line[0], "POST /tenant-1.example/oauth2/v2.0/token HTTP/1.1");
    const char *body = strstr(t.tok.seen_req[0], "\r\n\r\n");
    CHECK(body && strstr(body, "grant_type=client_credentials") != NULL);
    CHECK(body && strstr(body, "client_id=cid-1") != NULL);
    CHECK(body && strstr(body, "client_secret=" SECRET) != NULL);
    CHECK(body && strstr(body, "scope=https%3A%2F%2Fstorage.azure.com%2F.default") != NULL);
    CHECK(strstr(t.tok.seen_req[0], "application/x-www-form-urlencoded") != NULL);
    mcdc_buf got = {0};
    /* renewed (tok-2) before the first blob request */
    CHECK_EQ_INT(mcdc_storage_get(s, "k", 100, &got, &e), MCDC_E_NOTFOUND);
    char v[128];
    header_value(t.blob.seen_req[0], "Authorization:", v, sizeof v);
    CHECK_EQ_STR(v, "Bearer tok-2");
    header_value(t.blob.seen_req[0], "x-ms-version:", v, sizeof v);
    CHECK_EQ_STR(v, MCDC_AZ_API_VERSION);
    header_value(t.blob.seen_req[0], "x-ms-date:", v, sizeof v);
    CHECK(strstr(v, "GMT") != NULL);
    CHECK(strncmp(t.blob.seen_line[0], "GET /lake/t/k ", 14) == 0);
    /* a failed renewal keeps the token while it lasts */
    CHECK_EQ_INT(mcdc_storage_get(s, "k", 100, &got, &e), MCDC_E_NOTFOUND);
    header_value(t.blob.seen_req[1], "Authorization:", v, sizeof v);
    CHECK_EQ_STR(v, "Bearer tok-2");
    CHECK_EQ_INT(t.tok.served, 3);
    CHECK(strstr(e.message, SECRET) == NULL && strstr(e.message, "tok-") == NULL);
    mcdc_buf_free(&got);
    mcdc_storage_free(s);
    two_stop(&t);
    mcdc_free(a1);
    mcdc_free(a2);
    mcdc_free(a3);
}

TEST(azure_entra_workload_identity_sends_the_token_file_as_assertion) {
    char path[] = "/tmp/mcdc-entra-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "fed.jwt.value\n", 14) == 14);
    close(fd);
    char *a1 = answer("200 OK", "{\"token_type\":\"Bearer\",\"expires_in\":3600,\"access_token\":\"wl-1\"}");
    step tok[] = {{ANSWER, a1}};
    step blob[] = {{ANSWER, k_not_found}};
    two t;
    two_start(&t, tok, 1, blob, 1);
    char file[96];
    snprintf(file, sizeof file, "AZURE_FEDERATED_TOKEN_FILE=%s", path);
    const char *opts[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct1", "AZURE_ALLOW_HTTP=true",
                          "AZURE_CLIENT_ID=cid-2", "AZURE_TENANT_ID=72f988bf-86f1-41af-91ab-2d7cd011db47",
                          file, t.ep, t.auth, NULL};
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage *s = NULL;
    CHECK_EQ_INT(open_with(&s, opts, &e), MCDC_OK);
    const char *body = strstr(t.tok.seen_req[0], "\r\n\r\n");
    CHECK(body && strstr(body, "fed.jwt.value%0A") == NULL); /* its newline dropped */
    CHECK(body && strstr(body, "client_assertion=fed.jwt.value") != NULL);
    CHECK(body && strstr(body, "client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-"
                               "assertion-type%3Ajwt-bearer") != NULL);
    CHECK(body && strstr(body, "client_secret") == NULL);
    mcdc_buf got = {0};
    CHECK_EQ_INT(mcdc_storage_get(s, "k", 100, &got, &e), MCDC_E_NOTFOUND);
    char v[64];
    header_value(t.blob.seen_req[0], "Authorization:", v, sizeof v);
    CHECK_EQ_STR(v, "Bearer wl-1"); /* an hour left: not renewed */
    CHECK_EQ_INT(t.tok.served, 1);
    mcdc_buf_free(&got);
    mcdc_storage_free(s);
    two_stop(&t);
    mcdc_free(a1);
    /* the file gone: said, at open */
    unlink(path);
    step tok2[] = {{ANSWER, "HTTP/1.1 500 x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"}};
    two_start(&t, tok2, 1, blob, 0);
    opts[5] = t.ep;
    opts[6] = t.auth;
    CHECK_EQ_INT(open_with(&s, opts, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, path) != NULL && strstr(e.message, "AZURE_FEDERATED_TOKEN_FILE"));
    CHECK_EQ_INT(t.tok.served, 0);
    two_stop(&t);
}

TEST(azure_entra_managed_identity_asks_its_endpoint) {
    char *a1 = answer("200 OK", "{\"access_token\":\"mi-1\",\"expires_on\":\"4000000000\","
                                "\"expires_in\":\"3599\",\"token_type\":\"Bearer\"}");
    step tok[] = {{ANSWER, a1}};
    step blob[] = {{ANSWER, k_not_found}};
    two t;
    two_start(&t, tok, 1, blob, 1);
    char msi[128];
    snprintf(msi, sizeof msi, "IDENTITY_ENDPOINT=http://127.0.0.1:%d/msi/token", t.tok.port);
    const char *opts[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct1", "AZURE_ALLOW_HTTP=true",
                          "AZURE_CLIENT_ID=mi client", msi, "IDENTITY_HEADER=" HDR_SECRET, t.ep,
                          NULL};
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage *s = NULL;
    /* a client id with a space cannot go into the URL as it is */
    CHECK_EQ_INT(open_with(&s, opts, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "AZURE_CLIENT_ID") != NULL);
    opts[2] = "AZURE_CLIENT_ID=mi-client";
    CHECK_EQ_INT(open_with(&s, opts, &e), MCDC_OK);
    CHECK_EQ_STR(t.tok.seen_line[0],
                 "GET /msi/token?api-version=" MCDC_AZ_MSI_API_VERSION
                 "&resource=https%3A%2F%2Fstorage.azure.com%2F&client_id=mi-client HTTP/1.1");
    char v[64];
    header_value(t.tok.seen_req[0], "Metadata:", v, sizeof v);
    CHECK_EQ_STR(v, "true");
    header_value(t.tok.seen_req[0], "X-IDENTITY-HEADER:", v, sizeof v);
    CHECK_EQ_STR(v, HDR_SECRET);
    mcdc_buf got = {0};
    CHECK_EQ_INT(mcdc_storage_get(s, "k", 100, &got, &e), MCDC_E_NOTFOUND);
    header_value(t.blob.seen_req[0], "Authorization:", v, sizeof v);
    CHECK_EQ_STR(v, "Bearer mi-1");
    mcdc_buf_free(&got);
    mcdc_storage_free(s);
    two_stop(&t);
    mcdc_free(a1);
}

TEST(azure_entra_refusals_say_what_without_secrets) {
    char *a1 = answer("401 Unauthorized",
                      "{\"error\":\"invalid_client\",\"error_description\":\"AADSTS7000215: "
                      "Invalid client secret provided.\\r\\nTrace ID: abc\"}");
    step tok[] = {{ANSWER, a1}};
    two t;
    two_start(&t, tok, 1, NULL, 0);
    const char *opts[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct1", "AZURE_ALLOW_HTTP=true",
                          "AZURE_CLIENT_ID=cid-1", "AZURE_CLIENT_SECRET=" SECRET,
                          "AZURE_TENANT_ID=tenant-1", t.ep, t.auth, NULL};
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage *s = NULL;
    CHECK_EQ_INT(open_with(&s, opts, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "invalid_client: AADSTS7000215") != NULL);
    CHECK(strstr(e.message, "AZURE_CLIENT_SECRET") != NULL);
    CHECK(strstr(e.message, "az://lake/t") != NULL);
    CHECK(strstr(e.message, SECRET) == NULL && strstr(e.message, "Trace ID") == NULL);
    two_stop(&t);
    mcdc_free(a1);
    /* options that cannot work: refused before any request */
    static const struct {
        const char *opts[6];
        const char *needle;
    } bad[] = {
        {{"AZURE_CLIENT_SECRET=" SECRET, "AZURE_TENANT_ID=t1", NULL}, "without AZURE_CLIENT_ID"},
        {{"AZURE_CLIENT_SECRET=" SECRET, "AZURE_CLIENT_ID=c", NULL}, "without AZURE_TENANT_ID"},
        {{"AZURE_FEDERATED_TOKEN_FILE=/x", "AZURE_CLIENT_ID=c", NULL}, "without AZURE_TENANT_ID"},
        {{"AZURE_CLIENT_SECRET=" SECRET, "AZURE_CLIENT_ID=c", "AZURE_TENANT_ID=../x", NULL},
         "is not a tenant id"},
        {{"AZURE_CLIENT_SECRET=" SECRET, "AZURE_CLIENT_ID=c", "AZURE_TENANT_ID=t",
          "AZURE_AUTHORITY_HOST=http://login.example", NULL},
         "plain http"},
        {{"AZURE_MSI_ENDPOINT=http://10.1.2.3/token", NULL}, "plain http"},
        {{"AZURE_MSI_ENDPOINT=https://h/t?x=1", NULL}, "not an endpoint URL"},
        {{"AZURE_CLIENT_ID=c", "AZURE_OBJECT_ID=o", NULL}, "at most one of"},
        {{"AZURE_STORAGE_TOKEN=two words", NULL}, "not a bearer token"},
        {{"MCDC_AZURE_MANAGED_IDENTITY=perhaps", NULL}, "MCDC_AZURE_MANAGED_IDENTITY"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *o[8] = {"AZURE_STORAGE_ACCOUNT_NAME=acct1"};
        for (size_t k = 0; bad[i].opts[k]; k++) o[k + 1] = bad[i].opts[k];
        CHECK_EQ_INT(open_with(&s, o, &e), MCDC_E_INVALID);
        if (strstr(e.message, bad[i].needle) == NULL) fprintf(stderr, "  %s\n", e.message);
        CHECK(strstr(e.message, bad[i].needle) != NULL);
        CHECK(strstr(e.message, SECRET) == NULL);
    }
}

TEST(azure_entra_a_given_token_is_sent_as_it_is_and_keys_win) {
    step blob[] = {{ANSWER, k_not_found}};
    two t;
    two_start(&t, NULL, 0, blob, 1);
    const char *opts[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct1", "AZURE_ALLOW_HTTP=true",
                          "AZURE_STORAGE_TOKEN=Bearer given.tok", t.ep, NULL};
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage *s = NULL;
    CHECK_EQ_INT(open_with(&s, opts, &e), MCDC_OK);
    mcdc_buf got = {0};
    CHECK_EQ_INT(mcdc_storage_get(s, "k", 100, &got, &e), MCDC_E_NOTFOUND);
    char v[64];
    header_value(t.blob.seen_req[0], "Authorization:", v, sizeof v);
    CHECK_EQ_STR(v, "Bearer given.tok");
    mcdc_buf_free(&got);
    mcdc_storage_free(s);
    two_stop(&t);
    /* an account key given too wins: Entra ID's options are then unused */
    mcdc_az_config c;
    const char *both[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct1", "AZURE_STORAGE_ACCOUNT_KEY=Zm9v",
                          "AZURE_CLIENT_ID=c", "AZURE_CLIENT_SECRET=" SECRET, NULL};
    mcdc_storage_env env = {.option = entra_opt, .octx = (void *)both};
    CHECK_EQ_INT(mcdc_az_config_load(&c, &env, "az://lake/t", &e), MCDC_OK);
    CHECK_EQ_INT(c.cred, MCDC_AZ_CRED_SHARED_KEY);
    mcdc_az_config_free(&c);
    /* the machine's own identity when asked for: IMDS by default */
    const char *mi[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct1", "MCDC_AZURE_MANAGED_IDENTITY=true",
                        NULL};
    env.octx = (void *)mi;
    CHECK_EQ_INT(mcdc_az_config_load(&c, &env, "az://lake/t", &e), MCDC_OK);
    CHECK_EQ_INT(c.cred, MCDC_AZ_CRED_MANAGED);
    CHECK_EQ_STR(c.entra.msi_url, MCDC_AZ_IMDS_DEFAULT);
    CHECK(c.entra.msi_id_param == NULL);
    mcdc_az_config_free(&c);
}
