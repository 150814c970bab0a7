/*
 * test_storage.c - the storage seam's contract, run against every backend
 * by one table-driven test; opening by scheme; the memory backend's fault
 * injection, lost writes and thread safety.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* An object store the interop tests start (tests/interop/test_azure.py):
 * MCDC_TEST_STORAGE_LOCATION names it, its options come from the process's
 * environment (the tests set them), and each use works below a fresh
 * prefix. Unset: the suite runs on the local backends only. */
static const char *remote_location(void) { return getenv("MCDC_TEST_STORAGE_LOCATION"); }
static const char *env_option(void *octx, const char *name) {
    (void)octx;
    return getenv(name);
}
static mcdc_storage *make_remote(backend *b) {
    (void)b;
    char uuid[37], location[512];
    mcdc_uuid4(uuid);
    snprintf(location, sizeof location, "%s/%s", remote_location(), uuid);
    mcdc_storage_env env = {NULL, NULL, env_option, NULL};
    mcdc_storage *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_storage_open_env(&s, &env, location, &e) != MCDC_OK)
        fprintf(stderr, "  %s: %s\n", location, e.message);
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
        {"local", make_local, cleanup_local, {0}, NULL},
        {"mem", make_mem, cleanup_mem, {0}, NULL},
        {"remote", make_remote, cleanup_remote, {0}, NULL},
    };
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        backend *b = &backends[i];
        if (b->make == make_remote && remote_location() == NULL) continue;
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
    static const char *const later[] = {"s3://bucket/t", "S3A://bucket/t", "gs://bucket/t"};
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

/* ---- holding a key ------------------------------------------------------------------ */

/* One holder at a time, others read its note; given back, the key is free
 * again, and nothing of the hold is left in the storage. */
static void holds(mcdc_storage *s, const char *backend_name) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_lock *a = NULL, *b = NULL;
    mcdc_buf who = {0};
    if (strcmp(backend_name, "remote") == 0) { /* object stores: no holds yet (a lease later) */
        CHECK_EQ_INT(mcdc_storage_lock_key(&a, s, "ckpt/_lock", "x", 1, &who, &e),
                     MCDC_E_UNSUPPORTED);
        return;
    }
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
    mcdc_storage_unlock(b);
    mcdc_storage_listing l;
    CHECK_EQ_INT(mcdc_storage_list(s, "ckpt/", &l, NULL), MCDC_OK);
    CHECK_EQ_INT(l.count, 0);
    mcdc_storage_listing_free(&l);
    CHECK_EQ_INT(mcdc_storage_lock_key(&a, s, "../x", "", 0, NULL, &e), MCDC_E_INVALID);
    mcdc_buf_free(&who);
}

TEST(storage_holds_a_key_for_one_holder_at_a_time) { on_every_backend(holds); }

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
