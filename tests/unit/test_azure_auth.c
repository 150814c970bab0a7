/*
 * test_azure_auth.c - Azure Shared Key signing (a vector checked by hand
 * and by an independent HMAC), each canonical part moving the signature,
 * base64, error bodies, redaction, and the configuration a location
 * and the storage options give (locations, connection strings, the
 * emulator, SAS tokens, and errors that never carry a secret).
 */
#include <string.h>

#include "mcdc_azure_auth.h"
#include "mcdc_test.h"

static const char k_emu_key[] =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/* ---- signing --------------------------------------------------------------------------- */

static const mcdc_az_header k_put_headers[] = {
    {"x-ms-version", MCDC_AZ_API_VERSION},
    {"Content-Length", "3"},
    {"If-None-Match", "*"},
    {"X-MS-Date", "Sun, 06 Dec 2026 20:41:01 GMT"},
    {"x-ms-blob-type", "BlockBlob"},
    {"Accept", "*/*"}, /* neither standard nor x-ms-: not signed */
};
enum { PUT_HEADERS = sizeof k_put_headers / sizeof k_put_headers[0] };

/* The signature of a request (emulator key) or "" when signing failed. */
static const char *sign(const char *method, const char *path, const mcdc_az_param *params,
                        size_t np, const mcdc_az_header *h, size_t nh) {
    static char sig[MCDC_AZ_SIGNATURE_CHARS];
    uint8_t key[64];
    size_t key_len;
    mcdc_buf sts = {0};
    sig[0] = 0;
    if (mcdc_az_base64_decode(key, sizeof key, &key_len, k_emu_key, strlen(k_emu_key)) == 0 &&
        mcdc_az_string_to_sign(&sts, method, "devstoreaccount1", path, params, np, h, nh,
                               NULL) == MCDC_OK)
        mcdc_az_sign(sig, key, key_len, (const char *)sts.data, sts.len, NULL);
    mcdc_buf_free(&sts);
    return sig;
}

TEST(azure_shared_key_string_to_sign_and_signature) {
    mcdc_buf sts = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    /* Put Blob, put-if-absent, on Azurite's path-style URL: the twelve
     * standard lines (Content-Length and If-None-Match filled), the x-ms-*
     * headers lower-cased and sorted, the account then the URL's path */
    CHECK_EQ_INT(mcdc_az_string_to_sign(&sts, "PUT", "devstoreaccount1",
                                        "/devstoreaccount1/lake/d/a", NULL, 0, k_put_headers,
                                        PUT_HEADERS, &e),
                 MCDC_OK);
    CHECK_EQ_STR((const char *)sts.data,
                 "PUT\n\n\n3\n\n\n\n\n\n*\n\n\n"
                 "x-ms-blob-type:BlockBlob\n"
                 "x-ms-date:Sun, 06 Dec 2026 20:41:01 GMT\n"
                 "x-ms-version:2025-01-05\n"
                 "/devstoreaccount1/devstoreaccount1/lake/d/a");
    /* Base64(HMAC-SHA256(key, sts)), the value Python's hmac module gives */
    CHECK_EQ_STR(sign("PUT", "/devstoreaccount1/lake/d/a", NULL, 0, k_put_headers, PUT_HEADERS),
                 "ma2ArTlF6LnY7xQeQ/3GE/NoZsXHOcMklHGjTHmxWMw=");
    /* List Blobs: an empty body's Content-Length is an empty line; the
     * parameters are sorted, one a line, decoded */
    mcdc_buf_reset(&sts);
    const mcdc_az_param params[] = {
        {"restype", "container"}, {"prefix", "a b/"}, {"comp", "list"}, {"delimiter", "/"}};
    const mcdc_az_header get_headers[] = {{"Content-Length", "0"}, {"x-ms-version", "v"}};
    CHECK_EQ_INT(mcdc_az_string_to_sign(&sts, "GET", "acct", "/lake", params, 4, get_headers, 2,
                                        &e),
                 MCDC_OK);
    CHECK_EQ_STR((const char *)sts.data, "GET\n\n\n\n\n\n\n\n\n\n\n\n"
                                         "x-ms-version:v\n"
                                         "/acct/lake\ncomp:list\ndelimiter:/\nprefix:a b/\n"
                                         "restype:container");
    mcdc_buf_free(&sts);
}

TEST(azure_shared_key_every_canonical_part_moves_the_signature) {
    const char *base = sign("PUT", "/devstoreaccount1/lake/d/a", NULL, 0, k_put_headers,
                            PUT_HEADERS);
    char first[MCDC_AZ_SIGNATURE_CHARS];
    memcpy(first, base, sizeof first);
    CHECK(strlen(first) == 44);
    /* the verb, the resource path, a parameter */
    CHECK(strcmp(sign("GET", "/devstoreaccount1/lake/d/a", NULL, 0, k_put_headers, PUT_HEADERS),
                 first) != 0);
    CHECK(strcmp(sign("PUT", "/devstoreaccount1/lake/d/b", NULL, 0, k_put_headers, PUT_HEADERS),
                 first) != 0);
    const mcdc_az_param p = {"comp", "block"};
    CHECK(strcmp(sign("PUT", "/devstoreaccount1/lake/d/a", &p, 1, k_put_headers, PUT_HEADERS),
                 first) != 0);
    /* each of the twelve standard headers, and each x-ms-* header */
    static const char *const standard[] = {
        "Content-Encoding", "Content-Language", "Content-Length",    "Content-MD5",
        "Content-Type",     "Date",             "If-Modified-Since", "If-Match",
        "If-None-Match",    "If-Unmodified-Since", "Range", "x-ms-blob-type", "x-ms-meta-a"};
    for (size_t i = 0; i < sizeof standard / sizeof standard[0]; i++) {
        mcdc_az_header h[PUT_HEADERS + 1];
        size_t n = 0;
        for (size_t j = 0; j < PUT_HEADERS; j++)
            if (strcasecmp(k_put_headers[j].name, standard[i]) != 0) h[n++] = k_put_headers[j];
        h[n++] = (mcdc_az_header){standard[i], "7"};
        const char *s = sign("PUT", "/devstoreaccount1/lake/d/a", NULL, 0, h, n);
        if (strcmp(s, first) == 0) fprintf(stderr, "  %s is not signed\n", standard[i]);
        CHECK(strcmp(s, first) != 0);
    }
    /* a header that is not signed changes nothing; order changes nothing */
    mcdc_az_header h[PUT_HEADERS];
    for (size_t j = 0; j < PUT_HEADERS; j++) h[j] = k_put_headers[PUT_HEADERS - 1 - j];
    h[0].value = "text/html";
    CHECK_EQ_STR(sign("PUT", "/devstoreaccount1/lake/d/a", NULL, 0, h, PUT_HEADERS), first);
}

/* ---- bytes, dates, bodies ---------------------------------------------------------------- */

TEST(azure_base64) {
    static const struct {
        const char *raw, *b64;
    } v[] = {{"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="},
             {"\xff\xfe", "//4="}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        mcdc_buf b = {0};
        CHECK_EQ_INT(mcdc_az_base64_encode(&b, v[i].raw, strlen(v[i].raw), NULL), MCDC_OK);
        CHECK_EQ_STR(b.data ? (const char *)b.data : "", v[i].b64);
        uint8_t out[8];
        size_t got;
        CHECK_EQ_INT(mcdc_az_base64_decode(out, sizeof out, &got, v[i].b64, strlen(v[i].b64)), 0);
        CHECK(got == strlen(v[i].raw) && memcmp(out, v[i].raw, got) == 0);
        mcdc_buf_free(&b);
    }
    static const char *const bad[] = {"Zg=", "Z===", "Zg==Zg==", "Zm9v!A==", "=Zg=", "Zm=v"};
    uint8_t out[8];
    size_t got;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_INT(mcdc_az_base64_decode(out, sizeof out, &got, bad[i], strlen(bad[i])), -1);
    CHECK_EQ_INT(mcdc_az_base64_decode(out, 2, &got, "Zm9v", 4), -1); /* no room */
}

TEST(azure_error_bodies_redaction_and_sas_permissions) {
    static const char body[] =
        "\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>AuthenticationFailed"
        "</Code><Message>Server failed to authenticate the request &amp; more.\n"
        "RequestId:1\nTime:2026</Message><AuthenticationErrorDetail>The MAC signature found in "
        "the HTTP request 'SECRETSIG' is not the same</AuthenticationErrorDetail></Error>";
    char code[64], msg[256];
    mcdc_az_error_parse(body, sizeof body - 1, code, sizeof code, msg, sizeof msg);
    CHECK_EQ_STR(code, "AuthenticationFailed");
    CHECK_EQ_STR(msg, "Server failed to authenticate the request & more.");
    mcdc_az_error_parse("", 0, code, sizeof code, msg, sizeof msg);
    CHECK_EQ_STR(code, "");
    mcdc_az_error_parse("<Error><Code>Cut", 16, code, sizeof code, msg, 4);
    CHECK_EQ_STR(code, ""); /* cut short: nothing trusted */
    mcdc_az_error_parse("<Code>C</Code><Message>four or more</Message>", 45, code, sizeof code,
                        msg, 5);
    CHECK_EQ_STR(code, "C");
    CHECK_EQ_STR(msg, "four");
    /* list entries: names as XML carries them, percent-encoded where it cannot */
    static const char *const blobs[][2] = {
        {"<Name>a&amp;b</Name><Properties/>", "a&b"},
        {"<Name Encoded=\"true\">x%01y%zz%4</Name>", "x\001y%zz%4"},
        {"<Properties><Content-Length>1</Content-Length></Properties>", NULL},
    };
    for (size_t i = 0; i < 3; i++) {
        mcdc_buf b = {0};
        bool found = true;
        CHECK_EQ_INT(mcdc_az_blob_name(blobs[i][0], blobs[i][0] + strlen(blobs[i][0]), &b,
                                       &found, NULL),
                     MCDC_OK);
        CHECK(found == (blobs[i][1] != NULL));
        if (blobs[i][1]) CHECK_EQ_STR((const char *)b.data, blobs[i][1]);
        mcdc_buf_free(&b);
    }
    char s[160] = "GET http://h/c/k?sv=2025&sig=abc%2Bdef%3D&sp=r failed; "
                  "\"sig=zzz\" and design=keep";
    mcdc_az_redact(s, sizeof s);
    CHECK_EQ_STR(s, "GET http://h/c/k?sv=2025&sig=REDACTED&sp=r failed; \"sig=REDACTED\" and "
                    "design=keep");
    char tight[16] = "?sig=a";
    mcdc_az_redact(tight, 8); /* no room to write REDACTED: cut */
    CHECK_EQ_STR(tight, "?sig=");
    mcdc_az_sas_permissions("sv=2025&ss=b&sp=rl&sig=x", code, sizeof code);
    CHECK_EQ_STR(code, "rl");
    mcdc_az_sas_permissions("sv=2025&sig=x", code, sizeof code);
    CHECK_EQ_STR(code, "");
}

/* ---- configuration ------------------------------------------------------------------------ */

/* Options as NAME=value strings, NULL-terminated. */
static const char *opt_lookup(void *octx, const char *name) {
    size_t n = strlen(name);
    for (const char *const *o = octx; *o; o++)
        if (strncmp(*o, name, n) == 0 && (*o)[n] == '=') return *o + n + 1;
    return NULL;
}

static int load(mcdc_az_config *c, const char *location, const char *const *opts,
                mcdc_error *e) {
    mcdc_storage_env env = {.option = opt_lookup, .octx = (void *)opts};
    return mcdc_az_config_load(c, &env, location, e);
}

TEST(azure_locations_give_account_container_prefix_endpoint) {
    mcdc_az_config c;
    mcdc_error e = MCDC_ERROR_INIT;
    const char *key_only[] = {"AZURE_STORAGE_ACCOUNT_KEY=Zm9vYmFy", NULL};
    static const struct {
        const char *location, *account, *container, *prefix, *endpoint;
    } ok[] = {
        {"abfss://lake@acct1.dfs.core.windows.net/bronze.db/orders/", "acct1", "lake",
         "bronze.db/orders/", "https://acct1.blob.core.windows.net"},
        {"abfs://lake@acct1.dfs.core.windows.net", "acct1", "lake", "",
         "https://acct1.blob.core.windows.net"},
        {"wasbs://lake@acct1.blob.core.chinacloudapi.cn/t", "acct1", "lake", "t/",
         "https://acct1.blob.core.chinacloudapi.cn"},
        {"wasb://lake@acct1.blob.core.windows.net//t//", "acct1", "lake", "t/",
         "https://acct1.blob.core.windows.net"}, /* TLS whatever the scheme */
        {"abfss://lake@acct1/t", "acct1", "lake", "t/", "https://acct1.blob.core.windows.net"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        CHECK_EQ_INT(load(&c, ok[i].location, key_only, &e), MCDC_OK);
        CHECK_EQ_STR(c.account, ok[i].account);
        CHECK_EQ_STR(c.container, ok[i].container);
        CHECK_EQ_STR(c.prefix, ok[i].prefix);
        CHECK_EQ_STR(c.endpoint, ok[i].endpoint);
        CHECK_EQ_STR(c.endpoint_path, "");
        CHECK_EQ_INT(c.cred, MCDC_AZ_CRED_SHARED_KEY);
        CHECK(c.key_len == 6 && memcmp(c.key, "foobar", 6) == 0);
        CHECK_EQ_INT(c.block_bytes, MCDC_AZ_BLOCK_BYTES);
        mcdc_az_config_free(&c);
    }
    /* az:// takes the account from the options */
    const char *named[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct2", "AZURE_STORAGE_ACCOUNT_KEY=Zm9v",
                           "MCDC_AZURE_BLOCK_BYTES=4096", NULL};
    CHECK_EQ_INT(load(&c, "az://lake/silver", named, &e), MCDC_OK);
    CHECK_EQ_STR(c.account, "acct2");
    CHECK_EQ_STR(c.prefix, "silver/");
    CHECK_EQ_STR(c.endpoint, "https://acct2.blob.core.windows.net");
    CHECK_EQ_INT(c.block_bytes, 4096);
    mcdc_az_config_free(&c);
    /* what is wrong is said, with where it came from */
    static const struct {
        const char *location, *needle;
    } bad[] = {
        {"az://lake/t", "names no storage account"},
        {"az://Lake/t", "is not a container name"},
        {"az://a--b/t", "is not a container name"},
        {"abfss://lake@Acct.dfs.core.windows.net/t", "is not a storage account name"},
        {"abfss://lake@acct.file.core.windows.net/t", "the host must be"},
        {"abfss://lake@acct.dfs.core.windows.net/a/../b", "segment"},
        {"abfss://@acct.dfs.core.windows.net/t", "is not a container name"},
    };
    mcdc_az_config_free(NULL);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(load(&c, bad[i].location, key_only, &e), MCDC_E_INVALID);
        if (strstr(e.message, bad[i].needle) == NULL) fprintf(stderr, "  %s\n", e.message);
        CHECK(strstr(e.message, bad[i].needle) != NULL);
        mcdc_az_config_free(&c);
    }
    const char *other[] = {"AZURE_STORAGE_ACCOUNT_NAME=other", "AZURE_STORAGE_ACCOUNT_KEY=Zm9v",
                           NULL};
    CHECK_EQ_INT(load(&c, "abfss://lake@acct1.dfs.core.windows.net/t", other, &e),
                 MCDC_E_INVALID);
    CHECK(strstr(e.message, "\"acct1\"") && strstr(e.message, "\"other\"") &&
          strstr(e.message, "make them agree"));
    mcdc_az_config_free(&c);
    const char *small[] = {"AZURE_STORAGE_ACCOUNT_KEY=Zm9v", "MCDC_AZURE_BLOCK_BYTES=12", NULL};
    CHECK_EQ_INT(load(&c, "abfss://lake@acct1/t", small, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "MCDC_AZURE_BLOCK_BYTES") != NULL);
    mcdc_az_config_free(&c);
}

TEST(azure_credentials_from_options_connection_strings_and_the_emulator) {
    mcdc_az_config c;
    mcdc_error e = MCDC_ERROR_INIT;
    /* the emulator: its account, key and endpoint; the endpoint's port may move */
    const char *emu[] = {"AZURE_STORAGE_USE_EMULATOR=true", NULL};
    CHECK_EQ_INT(load(&c, "az://lake/t", emu, &e), MCDC_OK);
    CHECK_EQ_STR(c.account, "devstoreaccount1");
    CHECK_EQ_STR(c.endpoint, "http://127.0.0.1:10000/devstoreaccount1");
    CHECK_EQ_STR(c.endpoint_path, "/devstoreaccount1");
    CHECK(c.cred == MCDC_AZ_CRED_SHARED_KEY && c.key_len == 64);
    mcdc_az_config_free(&c);
    const char *emu_port[] = {"AZURE_STORAGE_USE_EMULATOR=1",
                              "AZURE_STORAGE_ENDPOINT=http://127.0.0.1:41234/", NULL};
    CHECK_EQ_INT(load(&c, "az://lake/t", emu_port, &e), MCDC_OK);
    CHECK_EQ_STR(c.endpoint, "http://127.0.0.1:41234/devstoreaccount1");
    mcdc_az_config_free(&c);
    /* a connection string, Azurite's own form */
    const char *cs[] = {"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=http;"
                        "AccountName=devstoreaccount1;AccountKey=Zm9vYmFy;"
                        "BlobEndpoint=http://127.0.0.1:41234/devstoreaccount1;"
                        "QueueEndpoint=http://127.0.0.1:41235/devstoreaccount1;",
                        NULL};
    CHECK_EQ_INT(load(&c, "az://lake/t", cs, &e), MCDC_OK);
    CHECK_EQ_STR(c.account, "devstoreaccount1");
    CHECK_EQ_STR(c.endpoint, "http://127.0.0.1:41234/devstoreaccount1");
    CHECK(c.key_len == 6 && memcmp(c.key, "foobar", 6) == 0);
    CHECK_EQ_STR(c.cred_source, "the connection string's AccountKey");
    mcdc_az_config_free(&c);
    const char *cs_cloud[] = {"AZURE_STORAGE_CONNECTION_STRING=AccountName=acct3;"
                              "SharedAccessSignature=?sv=2025-01-05&sp=rwl&sig=abc%3D;"
                              "EndpointSuffix=core.usgovcloudapi.net",
                              NULL};
    CHECK_EQ_INT(load(&c, "az://lake/t", cs_cloud, &e), MCDC_OK);
    CHECK_EQ_STR(c.endpoint, "https://acct3.blob.core.usgovcloudapi.net");
    CHECK_EQ_INT(c.cred, MCDC_AZ_CRED_SAS);
    CHECK_EQ_STR(c.sas, "sv=2025-01-05&sp=rwl&sig=abc%3D");
    mcdc_az_config_free(&c);
    const char *dev[] = {"AZURE_STORAGE_CONNECTION_STRING=UseDevelopmentStorage=true", NULL};
    CHECK_EQ_INT(load(&c, "az://lake/t", dev, &e), MCDC_OK);
    CHECK_EQ_STR(c.endpoint, "http://127.0.0.1:10000/devstoreaccount1");
    mcdc_az_config_free(&c);
    /* a SAS token, its '?' tolerated; a key wins over it */
    const char *sas[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct4",
                         "AZURE_STORAGE_SAS_TOKEN=?sv=2025-01-05&sp=r&sig=SECRETSIG", NULL};
    CHECK_EQ_INT(load(&c, "az://lake/t", sas, &e), MCDC_OK);
    CHECK_EQ_INT(c.cred, MCDC_AZ_CRED_SAS);
    CHECK_EQ_STR(c.sas, "sv=2025-01-05&sp=r&sig=SECRETSIG");
    CHECK_EQ_STR(mcdc_az_cred_name(c.cred), "SAS token");
    mcdc_az_config_free(&c);
    /* mistakes: named, never quoted when secret */
    static const struct {
        const char *opts[4];
        const char *needle;
    } bad[] = {
        {{"AZURE_STORAGE_ACCOUNT_NAME=acct4", "AZURE_STORAGE_ACCOUNT_KEY=SECRET!KEY", NULL},
         "AZURE_STORAGE_ACCOUNT_KEY is not an account key"},
        {{"AZURE_STORAGE_ACCOUNT_NAME=acct4", "AZURE_STORAGE_SAS_TOKEN=sv=1&SECRETSIG", NULL},
         "AZURE_STORAGE_SAS_TOKEN is not a SAS token"},
        {{"AZURE_STORAGE_CONNECTION_STRING=AccountName=acct4;AcountKey=SECRETKEY", NULL},
         "unknown field \"AcountKey\""},
        {{"AZURE_STORAGE_CONNECTION_STRING=AccountName=acct4;SECRETKEY", NULL},
         "field 2 is not Key=Value"},
        {{"AZURE_STORAGE_ACCOUNT_NAME=acct4", "AZURE_STORAGE_ACCOUNT_KEY=Zm9v",
          "AZURE_STORAGE_ENDPOINT=http://10.0.0.1:1/acct4", NULL},
         "set AZURE_ALLOW_HTTP=true"},
        {{"AZURE_STORAGE_ACCOUNT_NAME=acct4", "AZURE_STORAGE_ACCOUNT_KEY=Zm9v",
          "AZURE_STORAGE_ENDPOINT=ftp://h", NULL},
         "is not an endpoint URL"},
        {{"AZURE_STORAGE_USE_EMULATOR=maybe", NULL}, "give true or false"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(load(&c, "az://lake/t", bad[i].opts, &e), MCDC_E_INVALID);
        if (strstr(e.message, bad[i].needle) == NULL) fprintf(stderr, "  %s\n", e.message);
        CHECK(strstr(e.message, bad[i].needle) != NULL);
        CHECK(strstr(e.message, "SECRET") == NULL);
        mcdc_az_config_free(&c);
    }
    /* no credential at all: refused as S3 refuses "no AWS credentials" */
    const char *none[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct4", NULL};
    CHECK_EQ_INT(load(&c, "az://lake/t", none, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "no credential for account \"acct4\"") != NULL);
    mcdc_az_config_free(&c);
    /* plain http allowed when asked for */
    const char *http[] = {"AZURE_STORAGE_ACCOUNT_NAME=acct4", "AZURE_STORAGE_ACCOUNT_KEY=Zm9v",
                          "AZURE_STORAGE_ENDPOINT=http://10.0.0.1:1/acct4",
                          "AZURE_ALLOW_HTTP=true", NULL};
    CHECK_EQ_INT(load(&c, "az://lake/t", http, &e), MCDC_OK);
    CHECK_EQ_STR(c.endpoint_path, "/acct4");
    mcdc_az_config_free(&c);
}
