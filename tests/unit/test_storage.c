/*
 * test_storage.c - the storage seam's contract, run against every backend
 * by one table-driven test; opening by scheme; the memory backend's fault
 * injection, lost writes and thread safety.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "mcdc_storage.h"
#include "mcdc_test.h"
#include "test_delta_util.h"

/* ---- the backends under test ------------------------------------------------------ */

typedef struct backend {
    const char *name;
    mcdc_storage *(*make)(struct backend *b);
    void (*cleanup)(struct backend *b);
    char dir[64];
    mcdc_storage_mem *mem;
    const char *env; /* a remote backend: the test environment's variables */
} backend;

static mcdc_storage *make_local(backend *b) {
    td_mkdtemp(b->dir);
    char root[96];
    snprintf(root, sizeof root, "%s/root", b->dir); /* created by the first write */
    mcdc_storage *s = NULL;
    return mcdc_storage_local_create(&s, root, NULL) == MCDC_OK ? s : NULL;
}
static void cleanup_local(backend *b) { td_rmrf(b->dir); }

static mcdc_storage *make_mem(backend *b) { return td_mem_storage(&b->mem, "contract", "root"); }
static void cleanup_mem(backend *b) { mcdc_storage_mem_release(b->mem); }

/* Remote backends run when the test's environment names one (the library
 * reads no environment; a test may): <env>_URI is a location, under which
 * each run takes a fresh prefix, and <env>_OPT_<NAME> gives the storage
 * option NAME (tests/interop/test_s3.py sets them against moto). Their
 * objects stay: the test server goes with them. */
static const char *remote_option(void *octx, const char *name) {
    char var[192];
    snprintf(var, sizeof var, "%s_OPT_%s", (const char *)octx, name);
    return getenv(var);
}

static bool remote_configured(const backend *b) {
    char var[96];
    snprintf(var, sizeof var, "%s_URI", b->env);
    return getenv(var) != NULL;
}

static mcdc_storage *make_remote(backend *b) {
    char var[96], loc[1024], uuid[37];
    snprintf(var, sizeof var, "%s_URI", b->env);
    mcdc_uuid4(uuid);
    snprintf(loc, sizeof loc, "%s/run-%s", getenv(var), uuid);
    mcdc_storage_env env = {.option = remote_option, .octx = (void *)b->env};
    mcdc_storage *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_storage_open_env(&s, &env, loc, &e) != MCDC_OK)
        fprintf(stderr, "  cannot open %s: %s\n", b->name, e.message);
    return s;
}
static void cleanup_remote(backend *b) { (void)b; }

/* The whole content of key as a string ("<missing>" when absent). */
static const char *content(mcdc_storage *s, const char *key) {
    static char out[256];
    mcdc_buf b = {0};
    if (mcdc_storage_get(s, key, sizeof out - 1, &b, NULL) != MCDC_OK) {
        mcdc_buf_free(&b);
        return "<missing>";
    }
    memcpy(out, b.data ? (const char *)b.data : "", b.len);
    out[b.len] = 0;
    mcdc_buf_free(&b);
    return out;
}

/* The names listed under prefix, joined by ',' (sizes checked against the
 * content's length). */
static const char *names(mcdc_storage *s, const char *prefix) {
    static char out[512];
    out[0] = 0;
    mcdc_storage_listing l;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_storage_list(s, prefix, &l, &e) != MCDC_OK) {
        snprintf(out, sizeof out, "<error: %.400s>", e.message);
        return out;
    }
    for (size_t i = 0; i < l.count; i++) {
        if (i) strcat(out, ",");
        strncat(out, l.entries[i].name, sizeof out - strlen(out) - 2);
        CHECK(l.entries[i].mtime_ms > 1600000000000LL);
    }
    mcdc_storage_listing_free(&l);
    return out;
}

static void contract(mcdc_storage *s, const char *backend_name) {
    fprintf(stderr, "  contract on %s (%s)\n", backend_name, s->root);
    mcdc_error e = MCDC_ERROR_INIT;
    /* put creates and replaces; put_if_absent creates once */
    CHECK_EQ_INT(mcdc_storage_put(s, "d/a", "one", 3, &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "d/a"), "one");
    CHECK_EQ_INT(mcdc_storage_put(s, "d/a", "three", 5, &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "d/a"), "three");
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, "d/b", "bee", 3, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, "d/b", "other", 5, &e), MCDC_E_CONFLICT);
    CHECK(strstr(e.message, "d/b") != NULL);
    CHECK_EQ_STR(content(s, "d/b"), "bee");
    /* streamed writes: nothing visible before the commit */
    mcdc_storage_writer *w = NULL;
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "d/c10", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "ab", 2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "", 0, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "cdef", 4, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_bytes(w), 6);
    CHECK_EQ_STR(content(s, "d/c10"), "<missing>");
    CHECK_EQ_STR(names(s, "d/"), "a,b"); /* a writer's temp data is not listed */
    CHECK_EQ_INT(mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_IF_ABSENT, &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "d/c10"), "abcdef");
    /* a put-if-absent commit on an existing key publishes nothing */
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "d/c10", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "zz", 2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_IF_ABSENT, &e), MCDC_E_CONFLICT);
    CHECK_EQ_STR(content(s, "d/c10"), "abcdef");
    /* a put commit replaces */
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "d/c2", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "x", 1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT, &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "d/c2"), "x");
    /* a scratch commit publishes as put does (creates, replaces) */
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "d/c3", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "s1", 2, &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "d/c3"), "<missing>");
    CHECK_EQ_INT(mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_SCRATCH, &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "d/c3"), "s1");
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "d/c3", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "s22", 3, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_SCRATCH, &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "d/c3"), "s22");
    CHECK_EQ_INT(mcdc_storage_delete(s, "d/c3", &e), MCDC_OK);
    /* abort: nothing published, nothing left */
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "d/gone", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "lost", 4, &e), MCDC_OK);
    mcdc_storage_writer_abort(w);
    mcdc_storage_writer_abort(NULL);
    CHECK_EQ_STR(content(s, "d/gone"), "<missing>");
    /* listing: sorted bytewise, only directly under the prefix's directory */
    CHECK_EQ_INT(mcdc_storage_put(s, "d/sub/deep", "q", 1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(s, "d/B", "", 0, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(s, "top", "t", 1, &e), MCDC_OK);
    CHECK_EQ_STR(names(s, "d/"), "B,a,b,c10,c2");
    CHECK_EQ_STR(names(s, "d/c"), "c10,c2");
    CHECK_EQ_STR(names(s, "d/sub/"), "deep");
    CHECK_EQ_STR(names(s, "nothere/"), "");
    CHECK_EQ_STR(names(s, "t"), "top");
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(s, "d/a", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 1);
    CHECK_EQ_INT(l.count ? l.entries[0].size : -1, 5);
    mcdc_storage_listing_free(&l);
    /* ranged reads and their edges */
    char buf[16];
    size_t got = 99;
    int64_t size = -7;
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/c10", 1, 3, buf, &got, &size, &e), MCDC_OK);
    CHECK_EQ_INT(got, 3);
    CHECK_EQ_INT(size, 6);
    CHECK(memcmp(buf, "bcd", 3) == 0);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/c10", 4, 10, buf, &got, &size, &e), MCDC_OK);
    CHECK_EQ_INT(got, 2); /* short at the end */
    CHECK(memcmp(buf, "ef", 2) == 0);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/c10", 6, 10, buf, &got, &size, &e), MCDC_OK);
    CHECK_EQ_INT(got, 0); /* offset at the end */
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/c10", 0, 0, NULL, &got, &size, &e), MCDC_OK);
    CHECK_EQ_INT(got, 0); /* len 0: size only */
    CHECK_EQ_INT(size, 6);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/c10", 7, 1, buf, &got, &size, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "d/c10") != NULL);
    CHECK_EQ_INT(got, 0);
    CHECK_EQ_INT(size, -1);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/c10", -1, 1, buf, &got, &size, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/B", 0, 4, buf, &got, &size, &e), MCDC_OK);
    CHECK_EQ_INT(got, 0); /* an empty object */
    CHECK_EQ_INT(size, 0);
    CHECK_EQ_INT(mcdc_storage_size(s, "d/a", &size, &e), MCDC_OK);
    CHECK_EQ_INT(size, 5);
    /* missing keys */
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_storage_get(s, "d/none", 100, &b, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "d/none") != NULL);
    CHECK_EQ_INT(mcdc_storage_get_range(s, "d/none", 0, 1, buf, &got, &size, &e),
                 MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_storage_size(s, "d/none", &size, &e), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_storage_size(s, "d/sub", &size, &e), MCDC_E_NOTFOUND); /* a "directory" */
    CHECK_EQ_INT(mcdc_storage_delete(s, "d/none", &e), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_storage_get(s, "d/a", 4, &b, &e), MCDC_E_LIMIT);
    mcdc_buf_free(&b);
    /* delete */
    CHECK_EQ_INT(mcdc_storage_delete(s, "d/b", &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "d/b"), "<missing>");
    CHECK_EQ_STR(names(s, "d/"), "B,a,c10,c2");
    /* keys never leave the root */
    static const char *const bad[] = {"../x", "/abs", "a//b", "a/./b", "a/..", "", "d/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(mcdc_storage_put(s, bad[i], "x", 1, &e), MCDC_E_INVALID);
        CHECK_EQ_INT(mcdc_storage_get(s, bad[i], 10, &b, &e), MCDC_E_INVALID);
        CHECK_EQ_INT(mcdc_storage_get_range(s, bad[i], 0, 1, buf, &got, &size, &e),
                     MCDC_E_INVALID);
        CHECK_EQ_INT(mcdc_storage_delete(s, bad[i], &e), MCDC_E_INVALID);
    }
    CHECK_EQ_INT(mcdc_storage_list(s, "../", &l, &e), MCDC_E_INVALID);
    mcdc_buf_free(&b);
}

/* Runs fn on a fresh storage of every backend. */
static void on_every_backend(void (*fn)(mcdc_storage *s, const char *backend_name)) {
    backend backends[] = {
        {"local", make_local, cleanup_local, {0}, NULL, NULL},
        {"mem", make_mem, cleanup_mem, {0}, NULL, NULL},
        {"s3", make_remote, cleanup_remote, {0}, NULL, "MCDC_TEST_S3"},
        {"azure", make_remote, cleanup_remote, {0}, NULL, "MCDC_TEST_AZURE"},
    };
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        backend *b = &backends[i];
        if (b->env && !remote_configured(b)) continue;
        mcdc_storage *s = b->make(b);
        CHECK(s != NULL);
        if (s) fn(s, b->name);
        mcdc_storage_free(s);
        b->cleanup(b);
    }
}

TEST(storage_contract_on_every_backend) { on_every_backend(contract); }

/* ---- opening by scheme ------------------------------------------------------------- */

TEST(storage_open_by_scheme) {
    mcdc_storage *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    static const struct {
        const char *location, *root;
    } local[] = {
        {"/tmp/x/", "/tmp/x"},
        {"rel/dir", "rel/dir"},
        {"file:///tmp/x", "/tmp/x"},
        {"FILE:/tmp/x", "/tmp/x"},
        {"file://localhost/tmp/x", "/tmp/x"},
        {"file:rel", "rel"},
    };
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++) {
        CHECK_EQ_INT(mcdc_storage_open(&s, local[i].location, &e), MCDC_OK);
        CHECK_EQ_STR(s ? s->root : NULL, local[i].root);
        mcdc_storage_free(s);
    }
    /* object stores and unknown schemes: a usage error, checked without opening */
    static const char *const later[] = {"gs://bucket/t"};
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++) {
        CHECK_EQ_INT(mcdc_storage_open(&s, later[i], &e), MCDC_E_INVALID);
        CHECK(strstr(e.message, "object stores are not built yet") != NULL);
        CHECK(strstr(e.message, later[i]) != NULL);
        CHECK(s == NULL);
        CHECK_EQ_INT(mcdc_storage_check_location(later[i], &e), MCDC_E_INVALID);
    }
    CHECK_EQ_INT(mcdc_storage_open(&s, "ftp://host/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "unknown scheme") != NULL);
    CHECK_EQ_INT(mcdc_storage_check_location("./t", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_check_location("mem://lake/t", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_open(&s, "file://otherhost/t", &e), MCDC_E_UNSUPPORTED);
    CHECK_EQ_INT(mcdc_storage_open(&s, "file:", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_storage_open(&s, "", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_storage_open(&s, NULL, &e), MCDC_E_INVALID);
    /* mem:// needs the store handed in */
    CHECK_EQ_INT(mcdc_storage_open(&s, "mem://lake/t", &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "lake") != NULL);
    mcdc_storage_mem *m = NULL;
    CHECK_EQ_INT(mcdc_storage_mem_create(&m, "lake", &e), MCDC_OK);
    CHECK_EQ_STR(mcdc_storage_mem_name(m), "lake");
    mcdc_storage_env env = mcdc_storage_mem_env(m);
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "mem://lake/bronze.db/t/", &e), MCDC_OK);
    CHECK_EQ_STR(s ? s->root : NULL, "mem://lake/bronze.db/t");
    CHECK_EQ_INT(mcdc_storage_put(s, "k", "v", 1, &e), MCDC_OK);
    mcdc_storage_free(s);
    /* the same store seen whole */
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "mem://lake", &e), MCDC_OK);
    CHECK_EQ_STR(s ? s->root : NULL, "mem://lake");
    CHECK_EQ_STR(content(s, "bronze.db/t/k"), "v");
    mcdc_storage_free(s);
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "mem://other/t", &e), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "mem:///t", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "mem://lake/../t", &e), MCDC_E_INVALID);
    mcdc_storage_mem *bad = NULL;
    CHECK_EQ_INT(mcdc_storage_mem_create(&bad, "a/b", &e), MCDC_E_INVALID);
    CHECK(bad == NULL);
    mcdc_storage_mem_release(m);
    mcdc_storage_mem_release(NULL);
}

/* S3 opens from its options alone (nothing is sent until an operation):
 * what is wrong with them is said at once. */
static const char *opt_table(void *octx, const char *name) {
    for (const char *const *p = octx; *p; p += 2)
        if (strcmp(p[0], name) == 0) return p[1];
    return NULL;
}

TEST(storage_s3_opens_from_its_options) {
    const char *good[] = {"AWS_ACCESS_KEY_ID", "AKIDTEST", "AWS_SECRET_ACCESS_KEY", "s3cr3t",
                          "AWS_REGION", "eu-west-1", NULL};
    mcdc_storage_env env = {.option = opt_table, .octx = good};
    mcdc_storage *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://my-bucket/lake/bronze/", &e), MCDC_OK);
    CHECK_EQ_STR(s ? s->root : NULL, "s3://my-bucket/lake/bronze");
    mcdc_storage_free(s);
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "S3A://my-bucket", &e), MCDC_OK);
    CHECK_EQ_STR(s ? s->root : NULL, "S3A://my-bucket");
    mcdc_storage_free(s);
    CHECK_EQ_INT(mcdc_storage_check_location("s3://my-bucket/t", &e), MCDC_OK);
    /* bad names and paths */
    static const char *const bad[] = {"s3://", "s3://Bad_Bucket/t", "s3://ab/t",
                                      "s3://b-/t", "s3://bucket/a//b", "s3://bucket/../x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, bad[i], &e), MCDC_E_INVALID);
        CHECK(strstr(e.message, bad[i]) != NULL);
    }
    /* no credentials at all (and no instance metadata to ask): says where
     * it looked, and what to give */
    const char *none[] = {"AWS_EC2_METADATA_DISABLED", "true", NULL};
    env.octx = none;
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://my-bucket/t", &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "AWS_EC2_METADATA_DISABLED") != NULL);
    CHECK(strstr(e.message, "AWS_ACCESS_KEY_ID") != NULL);
    CHECK(strstr(e.message, "s3://my-bucket/t") != NULL);
    const char *half[] = {"AWS_ACCESS_KEY_ID", "AKIDTEST", NULL};
    env.octx = half;
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://my-bucket/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "AWS_SECRET_ACCESS_KEY") != NULL);
    /* an http endpoint needs AWS_ALLOW_HTTP; settings that are not what they say */
    const char *http[] = {"AWS_ACCESS_KEY_ID", "AKIDTEST", "AWS_SECRET_ACCESS_KEY", "s3cr3t",
                          "AWS_ENDPOINT_URL", "http://127.0.0.1:9", NULL, NULL, NULL, NULL, NULL};
    env.octx = http;
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://my-bucket/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "AWS_ALLOW_HTTP") != NULL);
    http[6] = "AWS_ALLOW_HTTP";
    http[7] = "yes";
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://my-bucket/t", &e), MCDC_OK);
    mcdc_storage_free(s);
    http[7] = "maybe";
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://my-bucket/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "AWS_ALLOW_HTTP") != NULL);
    http[7] = "true";
    http[8] = "MCDC_S3_PART_BYTES";
    http[9] = "1024";
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://my-bucket/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "MCDC_S3_PART_BYTES") != NULL);
    http[8] = "AWS_REGION";
    http[9] = "eu west";
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://my-bucket/t", &e), MCDC_E_INVALID);
    /* the secret never shows */
    CHECK(strstr(e.message, "s3cr3t") == NULL);
}

/* A profile from the shared files: named by AWS_PROFILE or "default", its
 * region from the config file; a named profile that is missing, or one
 * that needs what this build cannot do, is said. */
TEST(storage_s3_reads_profiles) {
    char dir[64], cred[128], conf[128];
    td_mkdtemp(dir);
    snprintf(cred, sizeof cred, "%s/credentials", dir);
    snprintf(conf, sizeof conf, "%s/config", dir);
    FILE *f = fopen(cred, "w");
    fputs("# keys\n[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = sd\n"
          "\n[dev]\r\n aws_access_key_id=AKIDDEV \r\naws_secret_access_key= sv\r\n"
          "aws_session_token = tok\r\n",
          f);
    fclose(f);
    f = fopen(conf, "w");
    fputs("[default]\nregion = us-west-2\n[profile dev]\nregion = eu-central-1\n"
          "[profile sso]\nsso_start_url = https://x\n",
          f);
    fclose(f);
    const char *opts[] = {"AWS_SHARED_CREDENTIALS_FILE", cred, "AWS_CONFIG_FILE", conf,
                          "AWS_PROFILE", "dev", NULL};
    mcdc_storage_env env = {.option = opt_table, .octx = opts};
    mcdc_storage *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://bkt/t", &e), MCDC_OK);
    mcdc_storage_free(s);
    opts[5] = "nope";
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://bkt/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "\"nope\"") != NULL);
    opts[5] = "sso";
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://bkt/t", &e), MCDC_E_UNSUPPORTED);
    CHECK(strstr(e.message, "sso_start_url") != NULL);
    /* HOME alone finds ~/.aws/credentials (none here: no credentials) */
    const char *home[] = {"HOME", dir, "AWS_EC2_METADATA_DISABLED", "1", NULL};
    env.octx = home;
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, "s3://bkt/t", &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, ".aws/credentials") != NULL);
    td_rmrf(dir);
}

/* ---- parts sent in the background (the S3 and Azure writers' sender) --------------- */

typedef struct sent_parts {
    char got[64];     /* each part's first byte, in the order the sent callbacks ran */
    size_t n;         /* sent callbacks run */
    int64_t fail_at;  /* the index of the part that fails; -1: none */
    pthread_t caller;
    atomic_int sends, off_caller; /* sends run; of them on another thread than the caller's */
    bool sent_off_caller;         /* a sent callback ran off the caller's thread */
} sent_parts;

static int send_recorded(void *ctx, int64_t index, const mcdc_buf *part,
                         char note[MCDC_HTTP_HEADER_VALUE_MAX], mcdc_error *err) {
    sent_parts *sp = ctx;
    atomic_fetch_add(&sp->sends, 1);
    if (!pthread_equal(pthread_self(), sp->caller)) atomic_fetch_add(&sp->off_caller, 1);
    if (index == sp->fail_at) return mcdc_error_set(err, MCDC_E_IO, "part %lld refused", (long long)index);
    /* a later part may finish first: the order seen is the callbacks' */
    if (index == 0) mcdc_sleep_ms(20);
    note[0] = part->len ? (char)part->data[0] : '?';
    note[1] = 0;
    return MCDC_OK;
}

static int sent_recorded(void *ctx, int64_t index, const char *note, mcdc_error *err) {
    sent_parts *sp = ctx;
    if (!pthread_equal(pthread_self(), sp->caller)) sp->sent_off_caller = true;
    if ((size_t)index != sp->n) return mcdc_error_set(err, MCDC_E_PROTOCOL, "out of order");
    sp->got[sp->n++] = note[0];
    return MCDC_OK;
}

TEST(storage_part_sender_keeps_order_and_reports_a_failure) {
    sent_parts sp = {.caller = pthread_self(), .fail_at = -1};
    mcdc_part_sender ps;
    mcdc_part_sender_init(&ps, send_recorded, sent_recorded, &sp, 1024);
    CHECK_EQ_INT(ps.in_flight, MCDC_PARTS_IN_FLIGHT_MAX);
    mcdc_buf part = {0};
    part.limit = 4;
    mcdc_error e = MCDC_ERROR_INIT;
    for (char c = 'a'; c <= 'j'; c++) {
        CHECK_EQ_INT(mcdc_buf_append(&part, &c, 1, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_part_sender_send(&ps, &part, &e), MCDC_OK);
        CHECK_EQ_INT((int)part.len, 0); /* handed over: the caller fills a fresh part */
        CHECK_EQ_INT((int)part.limit, 4);
        CHECK(ps.handed - ps.done <= MCDC_PARTS_IN_FLIGHT_MAX);
    }
    CHECK_EQ_INT(mcdc_part_sender_wait(&ps, &e), MCDC_OK);
    CHECK_EQ_STR(sp.got, "abcdefghij");
    CHECK_EQ_INT(atomic_load(&sp.off_caller), 10); /* every part on a sender thread */
    CHECK(!sp.sent_off_caller);
    mcdc_part_sender_free(&ps);
    /* parts of 16 MiB: two in flight at most */
    mcdc_part_sender_init(&ps, send_recorded, sent_recorded, &sp, 16u * 1024u * 1024u);
    CHECK_EQ_INT(ps.in_flight, 2);
    mcdc_part_sender_free(&ps);
    mcdc_part_sender_init(&ps, send_recorded, sent_recorded, &sp, 512u * 1024u * 1024u);
    CHECK_EQ_INT(ps.in_flight, 1);
    mcdc_part_sender_free(&ps);
    /* the third part fails on its thread: a later hand-over says so (once
     * the sender waits for it), nothing after it is reported sent, and
     * every later call returns the failure */
    sent_parts bad = {.caller = pthread_self(), .fail_at = 2};
    mcdc_part_sender_init(&ps, send_recorded, sent_recorded, &bad, 1024);
    int rc = MCDC_OK, handed = 0;
    for (char c = 'a'; c <= 'j' && rc == MCDC_OK; c++, handed++) {
        CHECK_EQ_INT(mcdc_buf_append(&part, &c, 1, &e), MCDC_OK);
        rc = mcdc_part_sender_send(&ps, &part, &e);
    }
    CHECK_EQ_INT(rc, MCDC_E_IO);
    CHECK(strstr(e.message, "part 2 refused") != NULL);
    CHECK_EQ_INT(handed, MCDC_PARTS_IN_FLIGHT_MAX + 3); /* noticed when part 2 was the oldest */
    CHECK_EQ_STR(bad.got, "ab");
    mcdc_error_clear(&e);
    CHECK_EQ_INT(mcdc_part_sender_wait(&ps, &e), MCDC_E_IO);
    CHECK(strstr(e.message, "part 2 refused") != NULL);
    CHECK_EQ_STR(bad.got, "ab");
    mcdc_part_sender_free(&ps);
    mcdc_buf_free(&part);
}

/* ---- the memory backend: faults and lost writes ------------------------------------ */

TEST(storage_mem_fails_the_nth_call) {
    mcdc_storage_mem *m = NULL;
    mcdc_storage *s = td_mem_storage(&m, "f", NULL);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK(s != NULL);
    mcdc_storage_mem_release(m); /* the storage keeps the store alive */
    CHECK_EQ_INT(mcdc_storage_put(s, "a", "1", 1, &e), MCDC_OK);
    int64_t gets = mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET);
    /* only gets, the second from now */
    mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_GET, 2, MCDC_E_IO);
    CHECK_EQ_STR(content(s, "a"), "1");
    CHECK(!mcdc_storage_mem_fault_fired(m));
    CHECK_EQ_INT(mcdc_storage_put(s, "b", "2", 1, &e), MCDC_OK); /* not a get: not counted */
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_storage_get(s, "a", 10, &b, &e), MCDC_E_IO);
    CHECK(strstr(e.message, "injected") != NULL && strstr(e.message, "get") != NULL);
    CHECK(mcdc_storage_mem_fault_fired(m));
    CHECK_EQ_STR(content(s, "a"), "1"); /* one shot */
    CHECK_EQ_INT(mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET), gets + 3);
    /* a put-if-absent commit fails: nothing published */
    mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_COMMIT_PUT_IF_ABSENT, 1, MCDC_E_IO);
    CHECK_EQ_INT(mcdc_storage_put(s, "c", "3", 1, &e), MCDC_OK); /* a put commit: not it */
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, "d", "4", 1, &e), MCDC_E_IO);
    CHECK_EQ_STR(content(s, "d"), "<missing>");
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, "d", "4", 1, &e), MCDC_OK);
    /* a failed part: the writer can only be aborted */
    mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_WRITE, 2, MCDC_E_IO);
    mcdc_storage_writer *w = NULL;
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "e", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "x", 1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "y", 1, &e), MCDC_E_IO);
    CHECK_EQ_INT(mcdc_storage_writer_write(w, "z", 1, &e), MCDC_E_IO);
    CHECK_EQ_INT(mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT, &e), MCDC_E_INVALID);
    CHECK_EQ_STR(content(s, "e"), "<missing>");
    /* any operation; other codes */
    mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, 1, MCDC_E_NOMEM);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(s, "", &l, &e), MCDC_E_NOMEM);
    CHECK_EQ_STR(names(s, ""), "a,b,c,d");
    mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, 1, MCDC_E_IO);
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "f", &e), MCDC_E_IO);
    mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_DELETE, 1, MCDC_E_IO);
    CHECK_EQ_INT(mcdc_storage_delete(s, "a", &e), MCDC_E_IO);
    CHECK_EQ_STR(content(s, "a"), "1");
    mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_GET_RANGE, 1, MCDC_E_IO);
    int64_t size;
    CHECK_EQ_INT(mcdc_storage_size(s, "a", &size, &e), MCDC_E_IO);
    mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, 0, MCDC_OK); /* disarmed */
    CHECK_EQ_INT(mcdc_storage_size(s, "a", &size, &e), MCDC_OK);
    CHECK(mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_ANY) > 20);
    mcdc_buf_free(&b);
    mcdc_storage_free(s);
}

TEST(storage_mem_loses_writes_after_the_fact) {
    mcdc_storage_mem *m = NULL;
    mcdc_storage *s = td_mem_storage(&m, "backup", "p");
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK(s != NULL);
    CHECK_EQ_INT(mcdc_storage_put(s, "a", "v1", 2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(s, "a", "v2", 2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, "b", "b1", 2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_mem_count(m), 2);
    CHECK_EQ_INT(mcdc_storage_mem_lose_last(m, 1, &e), MCDC_OK); /* b never happened */
    CHECK_EQ_STR(content(s, "b"), "<missing>");
    CHECK_EQ_INT(mcdc_storage_mem_lose_last(m, 1, &e), MCDC_OK); /* a is back to v1 */
    CHECK_EQ_STR(content(s, "a"), "v1");
    CHECK_EQ_INT(mcdc_storage_mem_lose_last(m, 2, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "1 are remembered") != NULL);
    CHECK_EQ_STR(content(s, "a"), "v1");
    /* deletes are not journaled: losing the last write of c, deleted since,
     * gives back what c held before that write */
    CHECK_EQ_INT(mcdc_storage_put(s, "c", "c1", 2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(s, "c", "c2", 2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_delete(s, "c", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_mem_lose_last(m, 1, &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "c"), "c1"); /* the backup had c1 */
    CHECK_EQ_INT(mcdc_storage_mem_drop(m, "p/c", &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "c"), "<missing>");
    CHECK_EQ_INT(mcdc_storage_mem_drop(m, "p/c", &e), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(mcdc_storage_mem_lose_last(m, 2, &e), MCDC_OK); /* c1, a v1: all gone */
    CHECK_EQ_INT(mcdc_storage_mem_count(m), 0);
    /* the journal remembers the last MCDC_STORAGE_MEM_JOURNAL_MAX commits */
    for (int i = 0; i < MCDC_STORAGE_MEM_JOURNAL_MAX + 5; i++)
        mcdc_storage_put(s, "n", &"0123456789"[i % 10], 1, NULL);
    CHECK_EQ_INT(mcdc_storage_mem_lose_last(m, MCDC_STORAGE_MEM_JOURNAL_MAX + 1, &e),
                 MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_storage_mem_lose_last(m, MCDC_STORAGE_MEM_JOURNAL_MAX, &e), MCDC_OK);
    CHECK_EQ_STR(content(s, "n"), "4"); /* the value of write 5 of 1029 */
    mcdc_storage_free(s);
    mcdc_storage_mem_release(m);
}

/* ---- threads ------------------------------------------------------------------------ */

enum { RACE_THREADS = 4, RACE_KEYS = 64 };

typedef struct racer {
    mcdc_storage *s;
    int wins;
    int conflicts;
    int other;
} racer;

/* Every thread tries to create every key once; exactly one wins each. */
static void *race_main(void *arg) {
    racer *r = arg;
    for (int k = 0; k < RACE_KEYS; k++) {
        char key[48], body[32];
        snprintf(key, sizeof key, "_delta_log/%020d.json", k);
        int n = snprintf(body, sizeof body, "%p", (void *)r);
        mcdc_storage_writer *w = NULL;
        int rc = mcdc_storage_writer_open(&w, r->s, key, NULL);
        for (int part = 0; rc == MCDC_OK && part < n; part++)
            rc = mcdc_storage_writer_write(w, body + part, 1, NULL);
        if (rc == MCDC_OK) rc = mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_IF_ABSENT, NULL);
        else mcdc_storage_writer_abort(w);
        if (rc == MCDC_OK) r->wins++;
        else if (rc == MCDC_E_CONFLICT) r->conflicts++;
        else r->other++;
        mcdc_storage_listing l;
        if (mcdc_storage_list(r->s, "_delta_log/", &l, NULL) == MCDC_OK) {
            if (l.count == 0) r->other++; /* our own key at least is there */
            mcdc_storage_listing_free(&l);
        }
    }
    return NULL;
}

static void race(mcdc_storage *s, const char *backend_name) {
    racer r[RACE_THREADS];
    pthread_t th[RACE_THREADS];
    memset(r, 0, sizeof r);
    for (int t = 0; t < RACE_THREADS; t++) {
        r[t].s = s;
        pthread_create(&th[t], NULL, race_main, &r[t]);
    }
    int wins = 0, conflicts = 0, other = 0;
    for (int t = 0; t < RACE_THREADS; t++) {
        pthread_join(th[t], NULL);
        wins += r[t].wins;
        conflicts += r[t].conflicts;
        other += r[t].other;
    }
    if (wins != RACE_KEYS) fprintf(stderr, "  race on %s: %d winners\n", backend_name, wins);
    CHECK_EQ_INT(wins, RACE_KEYS);
    CHECK_EQ_INT(conflicts, RACE_KEYS * (RACE_THREADS - 1));
    CHECK_EQ_INT(other, 0);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(s, "_delta_log/", &l, NULL), MCDC_OK);
    CHECK_EQ_INT(l.count, RACE_KEYS); /* no temp data left behind */
    mcdc_storage_listing_free(&l);
}

TEST(storage_put_if_absent_excludes_across_threads) { on_every_backend(race); }

/* ---- listing from a name ------------------------------------------------------------ */

/* The names listed under prefix after `after`, joined by ','. */
static const char *names_after(mcdc_storage *s, const char *prefix, const char *after) {
    static char out[512];
    out[0] = 0;
    mcdc_storage_listing l;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_storage_list_after(s, prefix, after, &l, &e) != MCDC_OK) {
        snprintf(out, sizeof out, "<error: %.400s>", e.message);
        return out;
    }
    for (size_t i = 0; i < l.count; i++) {
        if (i) strcat(out, ",");
        strncat(out, l.entries[i].name, sizeof out - strlen(out) - 2);
    }
    mcdc_storage_listing_free(&l);
    return out;
}

/* A log of commits 0..12 (put-if-absent) and a checkpoint at 10. */
static void put_log_0_to_12(mcdc_storage *s) {
    mcdc_error e = MCDC_ERROR_INIT;
    for (int v = 0; v <= 12; v++) {
        char key[64];
        snprintf(key, sizeof key, "_delta_log/%020d.json", v);
        CHECK_EQ_INT(mcdc_storage_put_if_absent(s, key, "{}", 2, &e), MCDC_OK);
    }
    CHECK_EQ_INT(mcdc_storage_put(s, "_delta_log/00000000000000000010.checkpoint.parquet", "c", 1,
                                  &e),
                 MCDC_OK);
}

/* Only the names after the one given, in order, on every backend (the
 * object stores skip the rest on their side: S3's start-after, Azure's
 * startFrom); a Delta log listed from version 11 on. */
static void lists_after(mcdc_storage *s, const char *backend_name) {
    fprintf(stderr, "  lists after on %s (%s)\n", backend_name, s->root);
    mcdc_error e = MCDC_ERROR_INIT;
    const char *keys[] = {"d/a", "d/b", "d/c10", "d/c2", "d/sub/deep", "e/x"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK_EQ_INT(mcdc_storage_put(s, keys[i], "v", 1, &e), MCDC_OK);
    CHECK_EQ_STR(names_after(s, "d/", NULL), "a,b,c10,c2");
    CHECK_EQ_STR(names_after(s, "d/", "b"), "c10,c2");
    CHECK_EQ_STR(names_after(s, "d/", "a0"), "b,c10,c2"); /* a name that is not there */
    CHECK_EQ_STR(names_after(s, "d/", "0"), "a,b,c10,c2");
    CHECK_EQ_STR(names_after(s, "d/", "c2"), "");
    CHECK_EQ_STR(names_after(s, "d/", "zz"), "");
    CHECK_EQ_STR(names_after(s, "d/c", "c10"), "c2");   /* with a name prefix */
    CHECK_EQ_STR(names_after(s, "d/sub/", "a"), "deep");
    CHECK_EQ_STR(names_after(s, "nothere/", "a"), "");
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list_after(s, "d/", "sub/deep", &l, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_storage_list_after(s, "d/", "", &l, &e), MCDC_E_INVALID);
    put_log_0_to_12(s);
    CHECK_EQ_INT(mcdc_storage_put(s, "_delta_log/_last_checkpoint", "{}", 2, &e), MCDC_OK);
    /* after "<v - 1>~": every name of version v on */
    CHECK_EQ_STR(names_after(s, "_delta_log/", "00000000000000000009~"),
                 "00000000000000000010.checkpoint.parquet,00000000000000000010.json,"
                 "00000000000000000011.json,00000000000000000012.json,_last_checkpoint");
    CHECK_EQ_STR(names_after(s, "_delta_log/0", "00000000000000000010.json"),
                 "00000000000000000011.json,00000000000000000012.json");
}

TEST(storage_lists_after_a_name_on_every_backend) { on_every_backend(lists_after); }

/* ---- holding a key ------------------------------------------------------------------ */

/* One holder at a time, others read its note; given back, the key is free
 * again, and nothing of the hold is left in the storage. */
static void holds(mcdc_storage *s, const char *backend_name) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_lock *a = NULL, *b = NULL;
    mcdc_buf who = {0};
    (void)backend_name;
    CHECK_EQ_INT(mcdc_storage_lock_key(&a, s, "ckpt/_lock", "{\"pid\":1}", 9, &who, &e), MCDC_OK);
    CHECK(a != NULL && who.len == 0);
    CHECK_EQ_INT(mcdc_storage_lock_key(&b, s, "ckpt/_lock", "{\"pid\":2}", 9, &who, &e),
                 MCDC_E_CONFLICT);
    CHECK(b == NULL && who.len == 9 && memcmp(who.data, "{\"pid\":1}", 9) == 0);
    /* another key is another hold */
    CHECK_EQ_INT(mcdc_storage_lock_key(&b, s, "other/_lock", "x", 1, NULL, &e), MCDC_OK);
    mcdc_storage_unlock(b);
    b = NULL;
    mcdc_storage_unlock(a);
    CHECK_EQ_INT(mcdc_storage_lock_key(&b, s, "ckpt/_lock", "{\"pid\":2}", 9, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_lock_check(b, &e), MCDC_OK);
    mcdc_storage_unlock(b);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(s, "ckpt/", &l, NULL), MCDC_OK);
    if (s->ops->lease) { /* a lease given back leaves its "released" link */
        CHECK_EQ_INT(l.count, 1);
        CHECK(l.count == 1 && strncmp(l.entries[0].name, "_lock.lease.", 12) == 0);
    } else {
        CHECK_EQ_INT(l.count, 0);
    }
    mcdc_storage_listing_free(&l);
    CHECK_EQ_INT(mcdc_storage_lock_key(&a, s, "../x", "", 0, NULL, &e), MCDC_E_INVALID);
    mcdc_buf_free(&who);
}

TEST(storage_holds_a_key_for_one_holder_at_a_time) { on_every_backend(holds); }

/* ---- leases ------------------------------------------------------------------------- */

/* The newest lease link of key "ck/_l" and its state line. */
static const char *lease_links(mcdc_storage *s) { return names(s, "ck/_l.lease."); }

/* A lease on a store without locks (here a memory store, short ttls): held
 * against others while renewed, taken over once a killed holder's link has
 * expired, lost by a holder whose chain another process moved on, and
 * given back with a "released" link the next holder goes past. */
TEST(storage_lease_is_held_renewed_taken_over_and_lost) {
    mcdc_storage_mem *m = NULL;
    mcdc_storage *s = td_mem_storage(&m, "lease", "root");
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_lock *a = NULL, *b = NULL;
    mcdc_buf who = {0};
    CHECK_EQ_INT(mcdc_storage_lease_key(&a, s, "ck/_l", "A", 1, 600, &who, &e), MCDC_OK);
    CHECK_EQ_STR(lease_links(s), "_l.lease.00000000000000000000");
    /* renewed every 200 ms: after 3 ttls another still finds it held */
    mcdc_sleep_ms(1800);
    CHECK_EQ_INT(mcdc_storage_lease_key(&b, s, "ck/_l", "B", 1, 600, &who, &e), MCDC_E_CONFLICT);
    CHECK(b == NULL && who.len == 1 && who.data[0] == 'A');
    CHECK(strstr(e.message, "held by another process") != NULL);
    CHECK_EQ_INT(mcdc_storage_lock_check(a, &e), MCDC_OK);
    const char *links = lease_links(s);
    CHECK(strlen(links) == 29 && strcmp(links, "_l.lease.00000000000000000004") >= 0);
    /* given back: a "released" link; the next holder takes the one after */
    mcdc_storage_unlock(a);
    char rel[64];
    snprintf(rel, sizeof rel, "%s", lease_links(s));
    CHECK_EQ_STR(content(s, "ck/_l.lease.00000000000000000000"), "<missing>");
    mcdc_buf_reset(&who);
    CHECK_EQ_INT(mcdc_storage_lease_key(&b, s, "ck/_l", "B", 1, 3000, &who, &e), MCDC_OK);
    CHECK(strcmp(lease_links(s), rel) > 0); /* past the released link, which is gone */
    /* lost: another process moved the chain on (took it over while B was
     * late): B's next renewal (1 s on) finds its link taken and says so */
    long long seq = strtoll(lease_links(s) + 9, NULL, 10);
    char next[64];
    snprintf(next, sizeof next, "ck/_l.lease.%020lld", seq + 1);
    const char *other = "{\"state\":\"held\",\"ttl_ms\":600}\nC";
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, next, other, strlen(other), &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_lock_check(b, &e), MCDC_OK);
    mcdc_sleep_ms(1500);
    CHECK_EQ_INT(mcdc_storage_lock_check(b, &e), MCDC_E_FOREIGN_WRITER);
    CHECK(strstr(e.message, "took the lease") != NULL);
    mcdc_storage_unlock(b); /* lost: gives nothing back */
    /* a holder killed (its link never renewed): refused until the link is
     * past its ttl and the grace, then taken over at the next seq */
    const char *killed = "{\"state\":\"held\",\"ttl_ms\":300}\nK";
    CHECK_EQ_INT(mcdc_storage_put(s, "ck/_k.lease.00000000000000000007", killed, strlen(killed),
                                  &e),
                 MCDC_OK);
    mcdc_buf_reset(&who);
    CHECK_EQ_INT(mcdc_storage_lease_key(&a, s, "ck/_k", "D", 1, 300, &who, &e), MCDC_E_CONFLICT);
    CHECK(who.len == 1 && who.data[0] == 'K');
    mcdc_sleep_ms(700);
    CHECK_EQ_INT(mcdc_storage_lease_key(&a, s, "ck/_k", "D", 1, 300, &who, &e), MCDC_OK);
    CHECK_EQ_STR(names(s, "ck/_k.lease."), "_k.lease.00000000000000000008");
    mcdc_storage_unlock(a);
    /* not ours: refused as such, never taken over */
    CHECK_EQ_INT(mcdc_storage_put(s, "ck/_j.lease.00000000000000000001", "junk\n", 5, &e),
                 MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_lease_key(&a, s, "ck/_j", "D", 1, 300, NULL, &e), MCDC_E_CORRUPT);
    mcdc_buf_free(&who);
    mcdc_storage_free(s);
    mcdc_storage_mem_release(m);
}

/* A local hold's directories: those it created go when it is given back and
 * nothing else is in them (a run that stops before it writes leaves no
 * trace); one holding more, or there before, stays. */
TEST(storage_local_hold_leaves_no_directory_it_made) {
    char dir[64], p[160];
    td_mkdtemp(dir);
    mcdc_storage *s = NULL;
    mcdc_storage_lock *h = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    struct stat st;
    CHECK_EQ_INT(mcdc_storage_local_create(&s, dir, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_lock_key(&h, s, "new/deep/_lock", "x", 1, NULL, &e), MCDC_OK);
    snprintf(p, sizeof p, "%s/new/deep", dir);
    CHECK(stat(p, &st) == 0);
    mcdc_storage_unlock(h);
    snprintf(p, sizeof p, "%s/new", dir);
    CHECK(stat(p, &st) != 0);
    CHECK(stat(dir, &st) == 0);
    /* written in while held: stays */
    CHECK_EQ_INT(mcdc_storage_lock_key(&h, s, "used/_lock", "x", 1, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(s, "used/metadata", "m", 1, &e), MCDC_OK);
    mcdc_storage_unlock(h);
    CHECK_EQ_STR(content(s, "used/metadata"), "m");
    /* there before: stays, even emptied */
    CHECK_EQ_INT(mcdc_storage_lock_key(&h, s, "used/_lock", "x", 1, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_delete(s, "used/metadata", &e), MCDC_OK);
    mcdc_storage_unlock(h);
    snprintf(p, sizeof p, "%s/used", dir);
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
    mcdc_storage_free(s);
    td_rmrf(dir);
}

/* ---- S3 on a test server (tests/interop/test_s3.py runs these) ---------------------- */

/* The options of MCDC_TEST_S3_OPT_*, some replaced (pairs, NULL-ended). */
typedef struct over_env {
    const char *const *over;
} over_env;

static const char *over_option(void *octx, const char *name) {
    const over_env *o = octx;
    for (const char *const *p = o->over; p && *p; p += 2)
        if (strcmp(p[0], name) == 0) return p[1];
    return remote_option((void *)"MCDC_TEST_S3", name);
}

/* A storage on a fresh prefix of MCDC_TEST_S3_URI's bucket (or of bucket
 * when given), or NULL when the environment names no S3 server. */
static mcdc_storage *s3_under_test(const char *bucket, const char *const *over, mcdc_error *e) {
    const char *uri = getenv("MCDC_TEST_S3_URI");
    if (uri == NULL) {
        fprintf(stderr, "  MCDC_TEST_S3_URI not set: no S3 to test on\n");
        CHECK(1);
        return NULL;
    }
    static over_env o;
    o.over = over;
    char loc[1024], uuid[37];
    mcdc_uuid4(uuid);
    if (bucket) snprintf(loc, sizeof loc, "s3://%s/run-%s", bucket, uuid);
    else snprintf(loc, sizeof loc, "%s/run-%s", uri, uuid);
    mcdc_storage_env env = {.option = over_option, .octx = &o};
    mcdc_storage *s = NULL;
    CHECK_EQ_INT(mcdc_storage_open_env(&s, &env, loc, e), MCDC_OK);
    if (s) fprintf(stderr, "  on s3: %s\n", s->root);
    return s;
}

/* Above the part size a writer streams a multipart upload: read back
 * equal; a second put-if-absent of the key, multipart too, is refused and
 * changes nothing (tests/interop/test_s3.py checks that no upload is left
 * behind and that the object's ETag is a multipart one). */
TEST(storage_s3_multipart_upload) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage *s = s3_under_test(NULL, NULL, &e);
    if (s == NULL) return;
    enum { CHUNK = 1 << 20, CHUNKS = 11 }; /* 11 MiB: 3 parts of at most 5 MiB */
    uint8_t *chunk = malloc(CHUNK);
    for (int pass = 0; pass < 2; pass++) {
        mcdc_storage_writer *w = NULL;
        CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "big/part-0.parquet", &e), MCDC_OK);
        for (int c = 0; w && c < CHUNKS; c++) {
            for (int i = 0; i < CHUNK; i++) chunk[i] = (uint8_t)(i * 7 + c + pass * 13);
            CHECK_EQ_INT(mcdc_storage_writer_write(w, chunk, CHUNK, &e), MCDC_OK);
        }
        if (pass == 0) CHECK_EQ_STR(content(s, "big/part-0.parquet"), "<missing>");
        int rc = mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT_IF_ABSENT, &e);
        CHECK_EQ_INT(rc, pass == 0 ? MCDC_OK : MCDC_E_CONFLICT);
        if (pass) CHECK(strstr(e.message, "big/part-0.parquet") != NULL);
    }
    /* what the first pass wrote, by ranges across the part boundaries */
    int64_t size = 0;
    CHECK_EQ_INT(mcdc_storage_size(s, "big/part-0.parquet", &size, &e), MCDC_OK);
    CHECK_EQ_INT(size, (int64_t)CHUNK * CHUNKS);
    bool same = true;
    for (int c = 0; c < CHUNKS; c++) {
        size_t got = 0;
        CHECK_EQ_INT(mcdc_storage_get_range(s, "big/part-0.parquet", (int64_t)c * CHUNK, CHUNK,
                                            chunk, &got, &size, &e),
                     MCDC_OK);
        same = same && got == CHUNK;
        for (int i = 0; same && i < CHUNK; i++) same = chunk[i] == (uint8_t)(i * 7 + c);
    }
    CHECK(same);
    /* a writer dropped mid-upload publishes nothing */
    mcdc_storage_writer *w = NULL;
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "big/dropped.parquet", &e), MCDC_OK);
    for (int c = 0; w && c < 6; c++) CHECK_EQ_INT(mcdc_storage_writer_write(w, chunk, CHUNK, &e), 0);
    mcdc_storage_writer_abort(w);
    CHECK_EQ_STR(names(s, "big/"), "part-0.parquet");
    free(chunk);
    mcdc_storage_free(s);
}

/* The peak RSS of this process, in KiB: VmHWM, this program's own
 * (getrusage's ru_maxrss starts at the peak of the program exec replaced:
 * the test runner's). -1 when it cannot be read. */
static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

/* A large upload holds a few parts, whatever the object's size: 96 MiB
 * written in parts of 5 MiB (MCDC_PARTS_IN_FLIGHT_MAX in flight and the one
 * filling: 25 MiB) grows the peak RSS by far less than the object. */
TEST(storage_s3_large_upload_holds_a_few_parts) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage *s = s3_under_test(NULL, NULL, &e);
    if (s == NULL) return;
    enum { CHUNK = 1 << 20, CHUNKS = 96 };
    uint8_t *chunk = malloc(CHUNK);
    CHECK(chunk != NULL);
    for (int i = 0; i < CHUNK; i++) chunk[i] = (uint8_t)(i * 31);
    long before = peak_rss_kib();
    mcdc_storage_writer *w = NULL;
    CHECK_EQ_INT(mcdc_storage_writer_open(&w, s, "huge/part-0.parquet", &e), MCDC_OK);
    for (int c = 0; w && c < CHUNKS; c++) {
        chunk[0] = (uint8_t)c;
        CHECK_EQ_INT(mcdc_storage_writer_write(w, chunk, CHUNK, &e), MCDC_OK);
    }
    CHECK_EQ_INT(mcdc_storage_writer_commit(w, MCDC_STORAGE_PUT, &e), MCDC_OK); /* frees w */
    long grew_mib = (peak_rss_kib() - before) / 1024;
    fprintf(stderr, "  a %d MiB upload grew the peak RSS by %ld MiB\n", CHUNKS, grew_mib);
#if defined(__SANITIZE_ADDRESS__)
    (void)grew_mib; /* ASan's quarantine keeps freed parts resident: no bound to check */
#else
    CHECK(before > 0 && grew_mib < 48);
#endif
    int64_t size = 0;
    CHECK_EQ_INT(mcdc_storage_size(s, "huge/part-0.parquet", &size, &e), MCDC_OK);
    CHECK_EQ_INT(size, (int64_t)CHUNK * CHUNKS);
    size_t got = 0;
    CHECK_EQ_INT(mcdc_storage_get_range(s, "huge/part-0.parquet", (int64_t)77 * CHUNK, 4, chunk,
                                        &got, &size, &e),
                 MCDC_OK);
    CHECK(got == 4 && chunk[0] == 77 && chunk[1] == 31 && chunk[2] == 62);
    free(chunk);
    mcdc_storage_free(s);
}

/* A log listed by a prefix with a name part starts there: the names that
 * start with it, from S3's own prefix search, sorted. */
TEST(storage_s3_lists_a_log_from_a_version) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage *s = s3_under_test(NULL, NULL, &e);
    if (s == NULL) return;
    put_log_0_to_12(s);
    CHECK_EQ_STR(names(s, "_delta_log/0000000000000000001"),
                 "00000000000000000010.checkpoint.parquet,00000000000000000010.json,"
                 "00000000000000000011.json,00000000000000000012.json");
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(s, "_delta_log/", &l, &e), MCDC_OK);
    CHECK_EQ_INT(l.count, 14);
    mcdc_storage_listing_free(&l);
    mcdc_storage_free(s);
}

/* What the store refuses is said clearly: a wrong secret names the access
 * key id (never the secret), a missing bucket is named. */
TEST(storage_s3_errors_are_clear) {
    mcdc_error e = MCDC_ERROR_INIT;
    static const char *const wrong[] = {"AWS_SECRET_ACCESS_KEY", "wrong-secret-Xq9", NULL};
    mcdc_storage *s = s3_under_test(NULL, wrong, &e);
    if (s == NULL) return;
    const char *key_id = getenv("MCDC_TEST_S3_OPT_AWS_ACCESS_KEY_ID");
    CHECK_EQ_INT(mcdc_storage_put(s, "k", "v", 1, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "signature") != NULL);
    CHECK(key_id && strstr(e.message, key_id) != NULL);
    CHECK(strstr(e.message, "wrong-secret-Xq9") == NULL);
    mcdc_buf b = {0};
    CHECK_EQ_INT(mcdc_storage_get(s, "k", 10, &b, &e), MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "wrong-secret-Xq9") == NULL);
    mcdc_storage_free(s);
    s = s3_under_test("no-such-bucket-7", NULL, &e);
    CHECK_EQ_INT(mcdc_storage_get(s, "k", 10, &b, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "\"no-such-bucket-7\" does not exist") != NULL);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(s, "_delta_log/", &l, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "no-such-bucket-7") != NULL);
    CHECK_EQ_INT(mcdc_storage_put_if_absent(s, "k", "v", 1, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "no-such-bucket-7") != NULL);
    mcdc_buf_free(&b);
    mcdc_storage_free(s);
}

/* A Delta table on S3 through the library: created, twelve appends with
 * their data files (a checkpoint at 10), replayed by a fresh handle from
 * the checkpoint, read by ranges. MCDC_TEST_S3_DELTA names the location
 * (tests/interop/test_s3.py then reads it with delta-rs). */
TEST(storage_s3_delta_table_round_trip) {
    const char *loc = getenv("MCDC_TEST_S3_DELTA");
    if (loc == NULL) {
        fprintf(stderr, "  MCDC_TEST_S3_DELTA not set: no S3 to test on\n");
        CHECK(1);
        return;
    }
    static over_env o;
    mcdc_storage_env env = {.option = over_option, .octx = &o};
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_delta_table_open_env(&t, &env, loc, NULL, &e), MCDC_OK);
    t = td_create_on(t);
    CHECK(t != NULL);
    if (t == NULL) return;
    fprintf(stderr, "  on s3: %s\n", mcdc_delta_table_location(t));
    mcdc_delta_commit_result r = {0};
    char blob[100];
    memset(blob, 'p', sizeof blob);
    for (int64_t n = 1; n <= 12; n++) {
        char path[64];
        snprintf(path, sizeof path, "part-%05lld.parquet", (long long)n);
        CHECK_EQ_INT(mcdc_storage_put(mcdc_delta_table_storage(t), path, blob, sizeof blob, &e),
                     MCDC_OK);
        CHECK_EQ_INT(td_append(t, path, "app", n, &r, &e), MCDC_OK);
    }
    CHECK_EQ_INT(r.version, 12);
    mcdc_delta_table_free(t);
    CHECK_EQ_INT(mcdc_delta_table_open_env(&t, &env, loc, NULL, &e), MCDC_OK);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    int64_t got[3] = {-1, -1, -1}; /* version, files, the app's txn */
    if (s) {
        got[0] = mcdc_delta_snapshot_version(s);
        got[1] = (int64_t)mcdc_delta_snapshot_file_count(s);
        got[2] = mcdc_delta_snapshot_txn_version(s, "app");
        CHECK_EQ_INT(mcdc_delta_snapshot_verify_files(s, t, &e), MCDC_OK); /* ranged reads */
    }
    CHECK(got[0] == 12 && got[1] == 12 && got[2] == 12);
    mcdc_delta_snapshot_free(s);
    /* a retried append is skipped by its txn */
    CHECK_EQ_INT(td_append(t, "part-00012.parquet", "app", 12, &r, &e), MCDC_OK);
    CHECK(r.skipped);
    int64_t size = 0;
    CHECK_EQ_INT(mcdc_storage_size(mcdc_delta_table_storage(t),
                                   "_delta_log/00000000000000000010.checkpoint.parquet", &size,
                                   &e),
                 MCDC_OK);
    CHECK(size > 0);
    mcdc_delta_table_free(t);
}

/* Two processes append to one Delta table on a remote store at once (the
 * store of <prefix>_URI and <prefix>_OPT_*): every commit is one
 * conditional PUT, the loser of each version rebases, and the table ends
 * with every batch of both exactly once. */
static void two_processes_append(const char *prefix, const char *store) {
    char var[64];
    snprintf(var, sizeof var, "%s_URI", prefix);
    const char *uri = getenv(var);
    if (uri == NULL) {
        fprintf(stderr, "  %s not set: no %s to test on\n", var, store);
        CHECK(1);
        return;
    }
    char loc[1024], uuid[37];
    mcdc_uuid4(uuid);
    snprintf(loc, sizeof loc, "%s/race-%s/orders", uri, uuid);
    mcdc_storage_env env = {.option = remote_option, .octx = (void *)prefix};
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_delta_table_open_env(&t, &env, loc, NULL, &e), MCDC_OK);
    mcdc_delta_table_free(td_create_on(t));
    fprintf(stderr, "  on %s: %s\n", store, loc);
    enum { N = 15 };
    pid_t pids[2];
    for (int k = 0; k < 2; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            mcdc_delta_table *ct = NULL;
            mcdc_error ce = MCDC_ERROR_INIT;
            int bad = mcdc_delta_table_open_env(&ct, &env, loc, NULL, &ce) != MCDC_OK;
            char app[32], path[64];
            snprintf(app, sizeof app, "proc-%d", k);
            for (int i = 1; i <= N && !bad; i++) {
                snprintf(path, sizeof path, "p%d-%03d.parquet", k, i);
                mcdc_delta_commit_result r;
                if (td_append(ct, path, app, i, &r, &ce) != MCDC_OK || r.skipped) {
                    fprintf(stderr, "child %d batch %d: %s\n", k, i, ce.message);
                    bad = 1;
                }
            }
            mcdc_delta_table_free(ct);
            _exit(bad);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        waitpid(pids[k], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK_EQ_INT(mcdc_delta_table_open_env(&t, &env, loc, NULL, &e), MCDC_OK);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    int64_t v = s ? mcdc_delta_snapshot_version(s) : -1;
    size_t files = s ? mcdc_delta_snapshot_file_count(s) : 0;
    CHECK_EQ_INT(v, 2 * N);
    CHECK_EQ_INT(files, 2 * N); /* nothing lost or doubled */
    CHECK_EQ_INT(s ? mcdc_delta_snapshot_txn_version(s, "proc-0") : -1, N);
    CHECK_EQ_INT(s ? mcdc_delta_snapshot_txn_version(s, "proc-1") : -1, N);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
}

TEST(storage_s3_two_processes_append_to_one_table) { two_processes_append("MCDC_TEST_S3", "s3"); }

TEST(storage_azure_two_processes_append_to_one_table) {
    two_processes_append("MCDC_TEST_AZURE", "azure");
}
