/*
 * test_storage_azure.c - the Azure backend beyond the contract suite:
 * every location form opens without sending a byte; and, against the
 * Azurite that tests/interop/test_azure.py starts (MCDC_TEST_AZURE_URI, the
 * options as MCDC_TEST_AZURE_OPT_<NAME>, as tests/unit/test_storage.c
 * takes them), block-list objects,
 * keys that need encoding, the errors of a wrong key, a missing container
 * and a SAS token lacking a permission, and a Delta table for deltalake to
 * read (MCDC_TEST_AZURE_DELTA_LOCATION). Without Azurite the remote tests
 * check what they can offline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_lake.h"
#include "mcdc_tables.h"
#include "mcdc_storage.h"
#include "mcdc_test.h"

/* "NAME=value" pairs first ("NAME=" hides the test's option), then the
 * test's MCDC_TEST_AZURE_OPT_<NAME>. */
static const char *opt_lookup(void *octx, const char *name) {
    size_t n = strlen(name);
    for (const char *const *o = octx; o && *o; o++)
        if (strncmp(*o, name, n) == 0 && (*o)[n] == '=') return (*o)[n + 1] ? *o + n + 1 : NULL;
    char var[160];
    snprintf(var, sizeof var, "MCDC_TEST_AZURE_OPT_%s", name);
    return getenv(var);
}

/* The Azurite location of the interop run, or NULL. */
static const char *azurite(void) { return getenv("MCDC_TEST_AZURE_URI"); }

/* A storage on location/<sub>-<uuid> with the overrides (NULL on failure,
 * the message in e). */
static mcdc_storage *open_at(const char *location, const char *sub, const char *const *over,
                             mcdc_error *e) {
    char uuid[37], full[512];
    mcdc_uuid4(uuid);
    snprintf(full, sizeof full, "%s/%s-%s", location, sub, uuid);
    mcdc_storage_env env = {.option = opt_lookup, .octx = (void *)over};
    mcdc_storage *s = NULL;
    return mcdc_storage_open_env(&s, &env, full, e) == MCDC_OK ? s : NULL;
}

TEST(azure_every_location_form_opens_without_sending) {
    static const char *const emu[] = {"AZURE_STORAGE_USE_EMULATOR=true",
                                      "AZURE_STORAGE_ENDPOINT=http://127.0.0.1:1",
                                      "AZURE_STORAGE_ACCOUNT_NAME=",
                                      "AZURE_STORAGE_ACCOUNT_KEY=",
                                      "AZURE_STORAGE_SAS_TOKEN=",
                                      "AZURE_STORAGE_CONNECTION_STRING=",
                                      NULL};
    static const char *const forms[] = {
        "abfss://lake@devstoreaccount1.dfs.core.windows.net/bronze.db/t",
        "ABFS://lake@devstoreaccount1.dfs.core.windows.net/t",
        "wasbs://lake@devstoreaccount1.blob.core.windows.net/t",
        "wasb://lake@devstoreaccount1.blob.core.windows.net/t",
        "az://lake/t",
    };
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_env env = {.option = opt_lookup, .octx = (void *)emu};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        mcdc_storage *s = NULL;
        char loc[160];
        snprintf(loc, sizeof loc, "%s/", forms[i]); /* a trailing '/' is not part of the root */
        CHECK_EQ_INT(mcdc_storage_check_location(loc, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, loc, &e), MCDC_OK);
        CHECK_EQ_STR(s ? s->root : NULL, forms[i]);
        mcdc_storage_free(s);
    }
    /* without options: what is missing is said */
    mcdc_storage *s = NULL;
    static const char *const none[] = {"AZURE_STORAGE_USE_EMULATOR=", "AZURE_STORAGE_ACCOUNT_NAME=",
                                       "AZURE_STORAGE_CONNECTION_STRING=", NULL};
    mcdc_storage_env bare = {.option = opt_lookup, .octx = (void *)none};
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &bare, "az://lake/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "names no storage account") != NULL);
    CHECK(s == NULL);
}

/* The whole object at key as it was written, or not. */
static bool holds(mcdc_storage *s, const char *key, const uint8_t *want, size_t n) {
    mcdc_buf b = {0};
    bool same = mcdc_storage_get(s, key, n + 1, &b, NULL) == MCDC_OK && b.len == n &&
                (n == 0 || memcmp(b.data, want, n) == 0);
    mcdc_buf_free(&b);
    return same;
}

/* Writes n bytes of data to key in parts of part bytes, committed by mode. */
static int write_parts(mcdc_storage *s, const char *key, const uint8_t *data, size_t n,
                       size_t part, mcdc_storage_commit_mode mode, mcdc_error *e) {
    mcdc_storage_writer *w = NULL;
    int rc = mcdc_storage_writer_open(&w, s, key, e);
    for (size_t at = 0; rc == MCDC_OK && at < n; at += part)
        rc = mcdc_storage_writer_write(w, data + at, n - at < part ? n - at : part, e);
    if (rc) {
        mcdc_storage_writer_abort(w);
        return rc;
    }
    return mcdc_storage_writer_commit(w, mode, e);
}

/* Offline: opening with the emulator and option (NAME=value) fails,
 * naming the option and not saying absent (a secret; may be NULL). */
static void refused_offline(const char *option, const char *absent) {
    mcdc_error e = MCDC_ERROR_INIT;
    const char *over[] = {"AZURE_STORAGE_USE_EMULATOR=true", option, NULL};
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(option, "="), option);
    CHECK(open_at("az://lake", "t", over, &e) == NULL);
    CHECK(strstr(e.message, name) != NULL);
    CHECK(absent == NULL || strstr(e.message, absent) == NULL);
}

TEST(azure_remote_block_lists_publish_once) {
    const char *loc = azurite();
    mcdc_error e = MCDC_ERROR_INIT;
    if (loc == NULL) {
        refused_offline("MCDC_AZURE_BLOCK_BYTES=10", NULL);
        return;
    }
    static const char *const small[] = {"MCDC_AZURE_BLOCK_BYTES=1024", NULL};
    mcdc_storage *s = open_at(loc, "blocks", small, &e);
    CHECK(s != NULL);
    if (s == NULL) return;
    enum { N = 5000 };
    static uint8_t data[N], other[N];
    for (size_t i = 0; i < N; i++) {
        data[i] = (uint8_t)(i * 7 + i / 251);
        other[i] = (uint8_t)~data[i];
    }
    /* five blocks (four full), put-if-absent on the list: once */
    CHECK_EQ_INT(write_parts(s, "d/big", data, N, 333, MCDC_STORAGE_PUT_IF_ABSENT, &e), MCDC_OK);
    CHECK(holds(s, "d/big", data, N));
    CHECK_EQ_INT(write_parts(s, "d/big", other, 3000, 1000, MCDC_STORAGE_PUT_IF_ABSENT, &e),
                 MCDC_E_CONFLICT);
    CHECK(strstr(e.message, "d/big") && strstr(e.message, "exists"));
    CHECK(holds(s, "d/big", data, N));
    /* a one-block object goes as one Put Blob; one byte more as a list */
    CHECK_EQ_INT(write_parts(s, "d/one", data, 1024, 1024, MCDC_STORAGE_PUT_IF_ABSENT, &e),
                 MCDC_OK);
    CHECK_EQ_INT(write_parts(s, "d/two", data, 1025, 1025, MCDC_STORAGE_PUT_IF_ABSENT, &e),
                 MCDC_OK);
    CHECK(holds(s, "d/one", data, 1024) && holds(s, "d/two", data, 1025));
    CHECK_EQ_INT(write_parts(s, "d/two", other, 1024, 7, MCDC_STORAGE_PUT_IF_ABSENT, &e),
                 MCDC_E_CONFLICT);
    /* put replaces, by a list too */
    CHECK_EQ_INT(write_parts(s, "d/two", other, 4000, 4000, MCDC_STORAGE_PUT, &e), MCDC_OK);
    CHECK(holds(s, "d/two", other, 4000));
    /* ranges across blocks, at and past the end */
    uint8_t buf[200];
    size_t got = 99;
    int64_t size = -1;
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/big", 1000, 100, buf, &got, &size, &e), MCDC_OK);
    CHECK(got == 100 && size == N && memcmp(buf, data + 1000, 100) == 0);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/big", N - 10, 100, buf, &got, &size, &e), MCDC_OK);
    CHECK(got == 10 && size == N && memcmp(buf, data + N - 10, 10) == 0);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/big", N, 100, buf, &got, &size, &e), MCDC_OK);
    CHECK(got == 0 && size == N);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/big", N + 1, 1, buf, &got, &size, &e),
                 MCDC_E_INVALID);
    CHECK(strstr(e.message, "past the object's end") != NULL);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/none", 0, 1, buf, &got, &size, &e),
                 MCDC_E_NOTFOUND);
    /* a whole read larger than allowed */
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_storage_get(s, "d/big", 100, &b, &e), MCDC_E_LIMIT);
    CHECK(b.len == 0 && strstr(e.message, "larger than 100 bytes") != NULL);
    mcdc_buf_free(&b);
    /* an aborted writer that staged blocks leaves nothing visible */
    mcdc_storage_writer *w = NULL;
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "d/aborted", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, data, 3000, &e), MCDC_OK);
    mcdc_storage_writer_abort(w);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(s, "d/", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 3);
    for (size_t i = 0; i < l.count; i++)
        CHECK(strcmp(l.entries[i].name, "big") == 0 ? l.entries[i].size == N
                                                    : l.entries[i].size <= 4000);
    mcdc_storage_listing_free(&l);
    /* keys that need encoding in a URL and in a signature */
    static const char *const keys[] = {"p=1/a b+c%.json", "p=1/\xc3\xa9t\xc3\xa9&x?y#z"};
    for (size_t i = 0; i < 2; i++) {
        CHECK_EQ_INT(mcdc_storage_put_if_absent(s, keys[i], "v", 1, &e), MCDC_OK);
        CHECK(holds(s, keys[i], (const uint8_t *)"v", 1));
    }
    CHECK_EQ_INT(mcdc_storage_list(s, "p=1/", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 2);
    if (l.count == 2) {
        CHECK_EQ_STR(l.entries[0].name, "a b+c%.json");
        CHECK_EQ_STR(l.entries[1].name, "\xc3\xa9t\xc3\xa9&x?y#z");
    }
    mcdc_storage_listing_free(&l);
    CHECK_EQ_INT(mcdc_storage_delete(s, keys[0], &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_delete(s, keys[0], &e), MCDC_E_NOTFOUND);
    mcdc_storage_free(s);
}

TEST(azure_remote_errors_say_what_is_wrong_and_keep_secrets) {
    const char *loc = azurite();
    mcdc_error e = MCDC_ERROR_INIT;
    if (loc == NULL) {
        refused_offline("AZURE_STORAGE_ACCOUNT_KEY=not*a*key", "not*a*key");
        return;
    }
    mcdc_buf b = {0};
    /* a wrong key: which account, which credential, never the key */
    static const char wrong[] =
        "d3JvbmctYnV0LXdlbGwtZm9ybWVkLWtleS13cm9uZy1idXQtd2VsbC1mb3JtZWQtaw==";
    char kv[128];
    snprintf(kv, sizeof kv, "AZURE_STORAGE_ACCOUNT_KEY=%s", wrong);
    const char *over[] = {kv, "AZURE_STORAGE_SAS_TOKEN=", NULL};
    mcdc_storage *s = open_at(loc, "wrongkey", over, &e);
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ_INT(mcdc_storage_get(s, "k", 10, &b, &e), MCDC_E_PERMISSION);
        fprintf(stderr, "  wrong key: %s\n", e.message);
        CHECK(strstr(e.message, "\"devstoreaccount1\"") && strstr(e.message, "shared key") &&
              (strstr(e.message, "AuthenticationFailed") || /* Azure */
               strstr(e.message, "AuthorizationFailure")) && /* Azurite */
              strstr(e.message, "AZURE_STORAGE_ACCOUNT_KEY") && strstr(e.message, "/k"));
        CHECK(strstr(e.message, wrong) == NULL && strstr(e.message, "d3Jvbmc") == NULL);
        CHECK_EQ_INT(mcdc_storage_put(s, "k", "v", 1, &e), MCDC_E_PERMISSION);
        mcdc_storage_free(s);
    }
    /* a missing container, named */
    char missing[128];
    const char *path = strchr(loc + 5, '/');
    snprintf(missing, sizeof missing, "az://nosuchcontainer%s", path ? path : "");
    s = open_at(missing, "t", NULL, &e);
    CHECK(s != NULL);
    if (s) {
        mcdc_storage_listing l;
        CHECK_EQ_INT(mcdc_storage_put(s, "k", "v", 1, &e), MCDC_E_INVALID);
        fprintf(stderr, "  missing container: %s\n", e.message);
        CHECK(strstr(e.message, "container \"nosuchcontainer\" does not exist") &&
              strstr(e.message, "create it"));
        CHECK_EQ_INT(mcdc_storage_list(s, "", &l, &e), MCDC_E_INVALID);
        CHECK_EQ_INT(mcdc_storage_get(s, "k", 10, &b, &e), MCDC_E_INVALID);
        int64_t size;
        CHECK_EQ_INT(mcdc_storage_size(s, "k", &size, &e), MCDC_E_INVALID);
        CHECK(strstr(e.message, "nosuchcontainer") != NULL);
        mcdc_storage_free(s);
    }
    /* a SAS token that may read and list but not write: the permission named */
    const char *rl = getenv("MCDC_TEST_AZURE_SAS_READ_LIST");
    CHECK(rl != NULL); /* test_azure.py makes one */
    if (rl) {
        char sas[1024];
        snprintf(sas, sizeof sas, "AZURE_STORAGE_SAS_TOKEN=%s", rl);
        const char *ro[] = {sas, "AZURE_STORAGE_ACCOUNT_KEY=", NULL};
        s = open_at(loc, "readonly", ro, &e);
        CHECK(s != NULL);
        if (s) {
            CHECK_EQ_INT(mcdc_storage_put(s, "k", "v", 1, &e), MCDC_E_PERMISSION);
            fprintf(stderr, "  read-only SAS: %s\n", e.message);
            CHECK(strstr(e.message, "write (w)") && strstr(e.message, "sp=rl") &&
                  strstr(e.message, "AZURE_STORAGE_SAS_TOKEN"));
            const char *sig = strstr(rl, "sig=");
            CHECK(sig && strstr(e.message, sig) == NULL && strstr(e.message, "sig=") == NULL);
            CHECK_EQ_INT(mcdc_storage_get(s, "k", 10, &b, &e), MCDC_E_NOTFOUND); /* may read */
            mcdc_storage_free(s);
        }
    }
    mcdc_buf_free(&b);
}

/* Appends rows k = first..first+n-1 (k INT64, name TEXT) in one commit;
 * the new version, or -1. */
static int64_t append_rows(mcdc_table *t, int64_t first, int n, mcdc_error *e) {
    mcdc_schema *sc = NULL;
    mcdc_batch *b = NULL;
    mcdc_appender *a = NULL;
    bool skipped = false;
    int64_t v = -1;
    int rc = mcdc_schema_create(&sc, 2, e);
    if (rc == MCDC_OK) rc = mcdc_schema_set(sc, 0, "k", MCDC_TYPE_INT64, 0, 0, 0, false, e);
    if (rc == MCDC_OK) rc = mcdc_schema_set(sc, 1, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, e);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&b, sc, n, e);
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        mcdc_cell c[2] = {mcdc_cell_int(first + i), mcdc_cell_text("azure")};
        rc = mcdc_row_append(b, c, e);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, e);
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, t, sc, NULL, e);
    if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, e);
    if (rc == MCDC_OK) rc = mcdc_appender_commit(a, NULL, 0, NULL, &skipped, &v, e);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(sc);
    return rc == MCDC_OK ? v : -1;
}

/* 100 rows in two commits appended to the Delta table at
 * MCDC_TEST_AZURE_DELTA_LOCATION (created by the first, or one deltalake
 * made with MCDC_TEST_AZURE_DELTA_ROWS_BEFORE rows), read back here;
 * test_azure.py then reads it with deltalake. */
TEST(azure_remote_delta_table_for_readers) {
    const char *loc = getenv("MCDC_TEST_AZURE_DELTA_LOCATION");
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_env env = {.option = opt_lookup, .octx = NULL};
    mcdc_table *t = NULL;
    if (loc == NULL) { /* offline: a table location on Azure resolves as it is */
        char *path = NULL;
        CHECK_EQ_INT(mcdc_table_resolve(&path, "wasbs://lake@acct1.blob.core.windows.net/t", NULL,
                                        &e),
                     MCDC_OK);
        CHECK_EQ_STR(path, "wasbs://lake@acct1.blob.core.windows.net/t");
        mcdc_free(path);
        return;
    }
    CHECK_EQ_INT(mcdc_table_open_env(&t, &env, loc, NULL, &e), MCDC_OK);
    if (t == NULL) return;
    int64_t first = append_rows(t, 0, 60, &e);
    CHECK(first >= 0);
    CHECK_EQ_INT(append_rows(t, 60, 40, &e), first + 1);
    mcdc_batch *all = NULL;
    int64_t version = -1;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &version, &e), MCDC_OK);
    CHECK_EQ_INT(version, first + 1);
    const char *before = getenv("MCDC_TEST_AZURE_DELTA_ROWS_BEFORE");
    CHECK_EQ_INT(all ? all->rows : -1, 100 + (before ? atoi(before) : 0));
    mcdc_batch_free(all);
    mcdc_table_close(t);
}

/* Behind tests/interop/faultproxy.py (MCDC_TEST_AZURE_LOST_ANSWERS set),
 * armed to reset after forwarding: the first answer to each conditional write is lost after the write
 * landed. A commit then reads the blob back: ours (same size and MD5) is
 * success, another's is a lost race. */
TEST(azure_remote_lost_commit_answers_are_read_back) {
    const char *loc = azurite();
    mcdc_error e = MCDC_ERROR_INIT;
    if (loc == NULL || getenv("MCDC_TEST_AZURE_LOST_ANSWERS") == NULL) {
        refused_offline("AZURE_ALLOW_HTTP=perhaps", NULL);
        return;
    }
    static const char *const small[] = {"MCDC_AZURE_BLOCK_BYTES=1024", NULL};
    mcdc_storage *s = open_at(loc, "lost", small, &e);
    CHECK(s != NULL);
    if (s == NULL) return;
    static uint8_t big[3000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 31);
    /* one Put Blob, its answer lost: ours */
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, "d/small", "abc", 3, &e), MCDC_OK);
    CHECK(holds(s, "d/small", (const uint8_t *)"abc", 3));
    /* another writer afterwards: the key exists (its answer is not lost) */
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, "d/small", "xyz", 3, &e), MCDC_E_CONFLICT);
    /* the answer "exists" lost, and what exists is another's: a lost race */
    CHECK_EQ_INT(mcdc_storage_put(s, "d/taken", "other", 5, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, "d/taken", "mine!", 5, &e), MCDC_E_CONFLICT);
    CHECK(holds(s, "d/taken", (const uint8_t *)"other", 5));
    /* a block list, its answer lost: ours (the MD5 it set) */
    CHECK_EQ_INT(write_parts(s, "d/large", big, sizeof big, 700, MCDC_STORAGE_PUT_IF_ABSENT, &e),
                 MCDC_OK);
    CHECK(holds(s, "d/large", big, sizeof big));
    mcdc_storage_free(s);
}
