/*
 * test_runtime.c - the runtime jobs share (mcdc_runtime.h): two runtimes in
 * one process keep separate allocator accounting and fault injection, on
 * the threads their jobs start too; a stream given a runtime charges it.
 * Named runtime_* so that tests/run_all.sh runs them under TSan as well.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_context.h"
#include "mcdc_runtime.h"
#include "mcdc_test.h"
#include "test_http_server.h"
#include "mcdc_util.h"
#include "mssqlcdc.h"
#include "mssqlcdc_testing.h"

#define WORKER_BLOCKS 64

typedef struct {
    mcdc_runtime *rt;
    int64_t block_bytes;
    int failures;      /* allocations that came back NULL */
    void *kept[WORKER_BLOCKS];
} worker;

/* A job's thread: bound to its runtime as a job frame binds it, it
 * allocates WORKER_BLOCKS blocks, and a thread it starts allocates one
 * more (inherited binding). */
static void *grandchild(void *arg) {
    worker *w = arg;
    w->kept[WORKER_BLOCKS - 1] = mcdc_malloc((size_t)w->block_bytes);
    if (w->kept[WORKER_BLOCKS - 1] == NULL) w->failures++;
    return NULL;
}

static void *work(void *arg) {
    worker *w = arg;
    mcdc_alloc_acct *host = mcdc_alloc_bind(mcdc_runtime_acct_or_bound(w->rt));
    for (int i = 0; i < WORKER_BLOCKS - 1; i++) {
        w->kept[i] = mcdc_malloc((size_t)w->block_bytes);
        if (w->kept[i] == NULL) w->failures++;
    }
    pthread_t th;
    if (mcdc_thread_start(&th, grandchild, w) == 0) pthread_join(th, NULL);
    mcdc_alloc_bind(host);
    return NULL;
}

static void free_kept(worker *w) {
    for (int i = 0; i < WORKER_BLOCKS; i++) mcdc_free(w->kept[i]);
    memset(w->kept, 0, sizeof w->kept);
}

TEST(runtime_two_runtimes_count_and_fail_apart) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *a = NULL, *b = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&a, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_runtime_create(&b, NULL, &e), MCDC_OK);
    mcdc_alloc_stats host_before, host_after;
    mcdc_alloc_get_stats(&host_before);

    /* Both at once on their own threads: a fails its 10th allocation. */
    mcdc_runtime_fail_alloc_at(a, 10);
    worker wa = {.rt = a, .block_bytes = 100}, wb = {.rt = b, .block_bytes = 1000};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, work, &wa) == 0);
    CHECK(pthread_create(&tb, NULL, work, &wb) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ_INT(wa.failures, 1);
    CHECK_EQ_INT(wb.failures, 0);
    CHECK(wa.kept[9] == NULL && wa.kept[8] != NULL && wa.kept[10] != NULL);

    mcdc_runtime_stats sa, sb;
    mcdc_runtime_get_stats(a, &sa);
    mcdc_runtime_get_stats(b, &sb);
    /* each runtime holds exactly its own blocks (the grandchild's too);
     * a's failed one is not counted */
    CHECK_EQ_INT(sa.live_bytes, 100 * (WORKER_BLOCKS - 1));
    CHECK_EQ_INT(sb.live_bytes, 1000 * WORKER_BLOCKS);
    CHECK(sa.alloc_calls >= WORKER_BLOCKS - 1 && sb.alloc_calls >= WORKER_BLOCKS);
    /* the test's own accounting saw none of it */
    mcdc_alloc_get_stats(&host_after);
    CHECK_EQ_INT(host_after.live_bytes, host_before.live_bytes);

    /* freed from this (differently bound) thread: each block goes back to
     * the runtime that took it */
    free_kept(&wa);
    mcdc_runtime_get_stats(a, &sa);
    mcdc_runtime_get_stats(b, &sb);
    CHECK_EQ_INT(sa.live_bytes, 0);
    CHECK_EQ_INT(sa.peak_bytes, 100 * (WORKER_BLOCKS - 1));
    CHECK_EQ_INT(sb.live_bytes, 1000 * WORKER_BLOCKS);
    free_kept(&wb);
    mcdc_runtime_get_stats(b, &sb);
    CHECK_EQ_INT(sb.live_bytes, 0);
    CHECK_EQ_INT(sb.peak_bytes, 1000 * WORKER_BLOCKS);

    /* the fault was used up in a: a second round fails nothing */
    worker wa2 = {.rt = a, .block_bytes = 10};
    work(&wa2);
    CHECK_EQ_INT(wa2.failures, 0);
    free_kept(&wa2);
    mcdc_runtime_destroy(a);
    mcdc_runtime_destroy(b);
}

TEST(runtime_memory_ceiling_refuses_growth_past_it) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime_cfg cfg = MCDC_RUNTIME_CFG_INIT;
    cfg.memory_bytes_max = 4096;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, &cfg, &e), MCDC_OK);
    mcdc_alloc_acct *host = mcdc_alloc_bind(mcdc_runtime_acct_or_bound(rt));
    void *p = mcdc_malloc(3000);
    void *q = mcdc_malloc(2000); /* 5000 > 4096 */
    void *r = mcdc_realloc(p, 5000);
    void *s = mcdc_malloc(1000);
    mcdc_alloc_bind(host);
    CHECK(p != NULL);
    CHECK(q == NULL);
    CHECK(r == NULL); /* p stays valid */
    CHECK(s != NULL);
    mcdc_runtime_stats st;
    mcdc_runtime_get_stats(rt, &st);
    CHECK_EQ_INT(st.live_bytes, 4000);
    mcdc_free(p);
    mcdc_free(s);
    mcdc_runtime_destroy(rt);
    /* and nonsense is refused */
    cfg.memory_bytes_max = -1;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, &cfg, &e), MCDC_E_INVALID);
    CHECK(rt == NULL);
    cfg.memory_bytes_max = 0;
    cfg.connections_max = 1;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, &cfg, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "at least 2 connections") != NULL);
}

/* Source options for a job's create (nothing connects before its run). */
static mcdc_opts *source_opts(void) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *o = NULL;
    if (mcdc_opts_create(&o, &e) ||
        mcdc_opts_set(o, "connectionString", "Server=127.0.0.1,1;UID=sa;PWD=x", NULL, &e) ||
        mcdc_opts_set(o, "captureInstance", "dbo_t", NULL, &e)) {
        mcdc_opts_free(o);
        return NULL;
    }
    return o;
}

/* A stream given a runtime charges its handle to it, not to the thread
 * that creates it; a stream given none charges the creating thread's. */
TEST(runtime_stream_with_a_runtime_charges_it) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, NULL, &e), MCDC_OK);
    mcdc_opts *o = source_opts();
    CHECK(o != NULL);
    mcdc_stream_cfg cfg = MCDC_STREAM_CFG_INIT;
    cfg.target = "/tmp/mcdc-runtime-test/bronze";
    cfg.app_id = "rt";
    cfg.checkpoint = "/tmp/mcdc-runtime-test/ckpt";
    cfg.runtime = rt;
    mcdc_alloc_stats host0, host1;
    mcdc_alloc_get_stats(&host0);
    mcdc_stream *s = NULL;
    CHECK_EQ_INT(mcdc_stream_create(&s, o, &cfg, &e), MCDC_OK);
    mcdc_runtime_stats st;
    mcdc_runtime_get_stats(rt, &st);
    mcdc_alloc_get_stats(&host1);
    CHECK(st.live_bytes > 0);
    CHECK_EQ_INT(host1.live_bytes, host0.live_bytes);
    /* a fault in the runtime reaches the stream's create */
    mcdc_runtime_fail_alloc_at(rt, 1);
    mcdc_stream *s2 = NULL;
    CHECK_EQ_INT(mcdc_stream_create(&s2, o, &cfg, &e), MCDC_E_NOMEM);
    mcdc_stream_free(s);
    mcdc_runtime_get_stats(rt, &st);
    CHECK_EQ_INT(st.live_bytes, 0);
    /* without one: the caller's accounting */
    cfg.runtime = NULL;
    CHECK_EQ_INT(mcdc_stream_create(&s, o, &cfg, &e), MCDC_OK);
    mcdc_alloc_get_stats(&host1);
    CHECK(host1.live_bytes > host0.live_bytes);
    mcdc_stream_free(s);
    mcdc_opts_free(o);
    mcdc_runtime_destroy(rt);
}

/* ---- the budget's fairness ------------------------------------------------------- */
typedef struct {
    mcdc_budget *b;
    int min, want;
    int got;
    _Atomic int order; /* when it was served: 1 first */
    _Atomic int *served;
} taker;

static void *take(void *arg) {
    taker *t = arg;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_budget_acquire(t->b, MCDC_PERMIT_ENCODER, t->min, t->want, 0, NULL, &t->got, &e) ==
        MCDC_OK)
        atomic_store(&t->order, atomic_fetch_add(t->served, 1) + 1);
    return NULL;
}

static void wait_waiting(mcdc_budget *b, int n) {
    for (int i = 0; i < 2000 && mcdc_budget_waiting(b, MCDC_PERMIT_ENCODER) != n; i++)
        mcdc_sleep_ms(1);
}

/* first asks, then second: both queued in that order */
static bool queue_two(mcdc_budget *b, taker *first, taker *second, pthread_t th[2]) {
    if (pthread_create(&th[0], NULL, take, first) != 0) return false;
    wait_waiting(b, 1);
    if (pthread_create(&th[1], NULL, take, second) != 0) return false;
    wait_waiting(b, 2);
    return mcdc_budget_waiting(b, MCDC_PERMIT_ENCODER) == 2;
}

/* A job that needs many permits is served before one that asked later for
 * few, even when the few are free first (no starvation behind small
 * ones); while others wait, a job wanting many takes an equal share. */
TEST(runtime_budget_serves_in_order_and_shares) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_budget *b = NULL;
    CHECK_EQ_INT(mcdc_budget_create(&b, 2, 4, &e), MCDC_OK);
    int held = 0;
    CHECK_EQ_INT(mcdc_budget_acquire(b, MCDC_PERMIT_ENCODER, 4, 4, 0, NULL, &held, &e), MCDC_OK);
    CHECK_EQ_INT(held, 4);
    _Atomic int served = 0;
    taker big = {b, 2, 2, 0, 0, &served}, small = {b, 1, 1, 0, 0, &served};
    pthread_t th[2];
    CHECK(queue_two(b, &big, &small, th));
    /* one free: enough for small, not for big, which asked first */
    mcdc_budget_release(b, MCDC_PERMIT_ENCODER, 1);
    mcdc_sleep_ms(100);
    CHECK_EQ_INT(atomic_load(&small.order), 0);
    CHECK_EQ_INT(atomic_load(&big.order), 0);
    /* two free: big first, then small once one more is free */
    mcdc_budget_release(b, MCDC_PERMIT_ENCODER, 1);
    pthread_join(th[0], NULL);
    CHECK_EQ_INT(atomic_load(&big.order), 1);
    CHECK_EQ_INT(big.got, 2);
    mcdc_budget_release(b, MCDC_PERMIT_ENCODER, 1);
    pthread_join(th[1], NULL);
    CHECK_EQ_INT(atomic_load(&small.order), 2);
    mcdc_budget_release(b, MCDC_PERMIT_ENCODER, 1 + big.got + small.got);

    /* 4 free, a job wanting 4 with another queued behind it: 2 each */
    CHECK_EQ_INT(mcdc_budget_acquire(b, MCDC_PERMIT_ENCODER, 4, 4, 0, NULL, &held, &e), MCDC_OK);
    taker greedy = {b, 1, 4, 0, 0, &served}, other = {b, 1, 4, 0, 0, &served};
    CHECK(queue_two(b, &greedy, &other, th));
    mcdc_budget_release(b, MCDC_PERMIT_ENCODER, 4);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    CHECK_EQ_INT(greedy.got, 2);
    CHECK_EQ_INT(other.got, 2);
    mcdc_budget_release(b, MCDC_PERMIT_ENCODER, 4);
    mcdc_budget_free(b);
}

/* A job waiting for the facts turn (facts_taker): served once it is free. */
static void *take_facts_turn(void *arg) {
    taker *t = arg;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_budget_acquire(t->b, MCDC_PERMIT_FACTS, 1, 1, 0, NULL, &t->got, &e) == MCDC_OK)
        atomic_store(&t->order, atomic_fetch_add(t->served, 1) + 1);
    return NULL;
}

/* The facts turn is one permit whatever the budget's size: while one job
 * commits its facts row, another waits for it (they would race each
 * other's optimistic commits on the one facts table otherwise). */
TEST(runtime_budget_gives_one_facts_turn_at_a_time) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_budget *b = NULL;
    CHECK_EQ_INT(mcdc_budget_create(&b, 64, 8, &e), MCDC_OK);
    int held = 0;
    CHECK_EQ_INT(mcdc_budget_acquire(b, MCDC_PERMIT_FACTS, 1, 1, 0, NULL, &held, &e), MCDC_OK);
    CHECK_EQ_INT(held, 1);
    _Atomic int served = 0;
    taker next = {b, 1, 1, 0, 0, &served};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, take_facts_turn, &next) == 0);
    for (int i = 0; i < 2000 && mcdc_budget_waiting(b, MCDC_PERMIT_FACTS) != 1; i++)
        mcdc_sleep_ms(1);
    CHECK_EQ_INT(mcdc_budget_waiting(b, MCDC_PERMIT_FACTS), 1);
    mcdc_sleep_ms(50);
    CHECK_EQ_INT(atomic_load(&next.order), 0);
    mcdc_budget_release(b, MCDC_PERMIT_FACTS, held);
    pthread_join(th, NULL);
    CHECK_EQ_INT(atomic_load(&next.order), 1);
    CHECK_EQ_INT(next.got, 1);
    mcdc_budget_release(b, MCDC_PERMIT_FACTS, next.got);
    CHECK_EQ_INT(mcdc_budget_peak(b, MCDC_PERMIT_FACTS), 1);
    /* two at once is more than there is */
    CHECK_EQ_INT(mcdc_budget_acquire(b, MCDC_PERMIT_FACTS, 2, 2, 0, NULL, &held, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "1 facts turns, fewer than the 2") != NULL);
    mcdc_budget_free(b);
}

/* rt holds more than *live bytes; *live becomes what it holds. */
static bool charged_more(const mcdc_runtime *rt, int64_t *live) {
    mcdc_runtime_stats st;
    mcdc_runtime_get_stats(rt, &st);
    bool more = st.live_bytes > *live;
    *live = st.live_bytes;
    return more;
}

/* Backfill, apply and reconcile given a runtime charge it too, not their
 * creator. */
TEST(runtime_backfill_apply_and_reconcile_charge_their_runtime) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, NULL, &e), MCDC_OK);
    mcdc_opts *o = source_opts();
    CHECK(o != NULL);
    mcdc_alloc_stats host0, host1;
    mcdc_runtime_stats st;
    mcdc_alloc_get_stats(&host0);

    mcdc_backfill_cfg bc = MCDC_BACKFILL_CFG_INIT;
    bc.target = "/tmp/mcdc-runtime-test/bronze";
    bc.app_id = "rt";
    bc.facts_table = "/tmp/mcdc-runtime-test/facts";
    bc.runtime = rt;
    mcdc_backfill *b = NULL;
    int64_t live = 0;
    CHECK_EQ_INT(mcdc_backfill_create(&b, o, &bc, &e), MCDC_OK);
    CHECK(charged_more(rt, &live));

    mcdc_apply_cfg ac = MCDC_APPLY_CFG_INIT;
    ac.bronze = "/tmp/mcdc-runtime-test/bronze";
    ac.target = "/tmp/mcdc-runtime-test/silver";
    ac.control_table = "/tmp/mcdc-runtime-test/control";
    ac.runtime = rt;
    mcdc_apply *a = NULL;
    CHECK_EQ_INT(mcdc_apply_create(&a, o, &ac, &e), MCDC_OK);
    CHECK(charged_more(rt, &live));

    mcdc_reconcile_cfg rc = MCDC_RECONCILE_CFG_INIT;
    rc.silver = "/tmp/mcdc-runtime-test/silver";
    rc.bronze = "/tmp/mcdc-runtime-test/bronze";
    rc.control_table = "/tmp/mcdc-runtime-test/control";
    rc.runtime = rt;
    mcdc_reconcile *r = NULL;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &rc, &e), MCDC_OK);
    CHECK(charged_more(rt, &live));
    mcdc_alloc_get_stats(&host1);
    CHECK_EQ_INT(host1.live_bytes, host0.live_bytes);

    /* an older caller's struct (before the runtime field) charges the creator */
    bc.version = 2;
    mcdc_backfill *b2 = NULL;
    CHECK_EQ_INT(mcdc_backfill_create(&b2, o, &bc, &e), MCDC_OK);
    mcdc_alloc_get_stats(&host1);
    CHECK(host1.live_bytes > host0.live_bytes);
    mcdc_backfill_free(b2);

    mcdc_backfill_free(b);
    mcdc_apply_free(a);
    mcdc_reconcile_free(r);
    mcdc_runtime_get_stats(rt, &st);
    CHECK_EQ_INT(st.live_bytes, 0);
    mcdc_opts_free(o);
    mcdc_runtime_destroy(rt);
}

/* The one-call jobs (snapshot, seed, repair) given a runtime run with its
 * accounting bound: its fault injection fails their first allocation
 * (before anything connects), which a job on the host's accounting would
 * not see; they leave nothing charged to it. */
/* The one-call jobs as the runtime tests run them in rt: each fails before
 * it reads anything (no copy to seed from, nothing to connect to). */
static int seed_in(mcdc_runtime *rt, const mcdc_opts *o, mcdc_error *e) {
    mcdc_seed_cfg dc = MCDC_SEED_CFG_INIT;
    dc.target = "/tmp/mcdc-runtime-test/bronze";
    dc.from = "/tmp/mcdc-runtime-test/no-such-copy";
    dc.as_of = "2026-12-01T10:00:00Z";
    dc.runtime = rt;
    mcdc_offset off;
    int64_t rows = 0;
    bool done = false;
    return mcdc_seed(&off, &rows, &done, o, &dc, e);
}

static int snapshot_in(mcdc_runtime *rt, const mcdc_opts *o, mcdc_error *e) {
    mcdc_snapshot_cfg nc = MCDC_SNAPSHOT_CFG_INIT;
    nc.target = "/tmp/mcdc-runtime-test/bronze";
    nc.runtime = rt;
    mcdc_offset off;
    int64_t rows = 0;
    bool done = false;
    return mcdc_snapshot_take(&off, &rows, &done, o, &nc, e);
}

static int repair_in(mcdc_runtime *rt, const mcdc_opts *o, mcdc_error *e) {
    static const char *const keys[] = {"{\"id\": 1}"};
    mcdc_repair_cfg pc = MCDC_REPAIR_CFG_INIT;
    pc.bronze = "/tmp/mcdc-runtime-test/bronze";
    pc.facts_table = "/tmp/mcdc-runtime-test/facts";
    pc.keys_json = keys;
    pc.n_keys = 1;
    pc.runtime = rt;
    mcdc_repair_result res = {.size = sizeof res};
    return mcdc_repair_run(o, &pc, &res, e);
}

TEST(runtime_snapshot_seed_and_repair_run_in_their_runtime) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, NULL, &e), MCDC_OK);
    mcdc_opts *o = source_opts();
    CHECK(o != NULL);
    mcdc_runtime_stats st;
    mcdc_runtime_fail_alloc_at(rt, 1);
    CHECK_EQ_INT(snapshot_in(rt, o, &e), MCDC_E_NOMEM);
    mcdc_runtime_fail_alloc_at(rt, 1);
    CHECK_EQ_INT(seed_in(rt, o, &e), MCDC_E_NOMEM);
    mcdc_runtime_fail_alloc_at(rt, 1);
    CHECK_EQ_INT(repair_in(rt, o, &e), MCDC_E_NOMEM);

    /* without the fault: the seed finds no copy at from (nothing connects), and
     * what it took from its runtime it gave back */
    mcdc_runtime_fail_alloc_at(rt, 0);
    mcdc_runtime_get_stats(rt, &st);
    int64_t calls = st.alloc_calls;
    CHECK_EQ_INT(seed_in(rt, o, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "no-such-copy") != NULL);
    mcdc_runtime_get_stats(rt, &st);
    CHECK(st.alloc_calls > calls);
    CHECK_EQ_INT(st.live_bytes, 0);
    mcdc_opts_free(o);
    mcdc_runtime_destroy(rt);
}

/* A job's stores of one scheme take its runtime's options for that scheme
 * unless the job's own opts hold storage options; a later set replaces
 * the scheme's; names are checked, values never quoted. */
TEST(runtime_storage_options_per_scheme_reach_jobs_without_their_own) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, NULL, &e), MCDC_OK);
    static const char *const names[] = {"AWS_ACCESS_KEY_ID", "aws_secret_access_key",
                                        "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_REGION",
                                        "MCDC_LEASE_TTL_MS"};
    const char *values[] = {"AKIDRUNTIME", "runtime-secret-9", "http://127.0.0.1:1", "true",
                            "us-east-1", "4321"};
    CHECK_EQ_INT(mcdc_runtime_set_storage_options(rt, "s3", names, values, 6, &e), MCDC_OK);
    static const char *const az[] = {"MCDC_LEASE_TTL_MS"};
    static const char *const az_v[] = {"9999"};
    CHECK_EQ_INT(mcdc_runtime_set_storage_options(rt, "abfss", az, az_v, 1, &e), MCDC_OK);

    /* a job without storage options: s3:// and s3a:// take the runtime's */
    mcdc_opts *bare = source_opts();
    mcdc_ctx ctx = {0};
    mcdc_ctx_take_storage(&ctx, bare, rt);
    mcdc_storage *st = NULL;
    CHECK_EQ_INT(mcdc_storage_open_env(&st, ctx.storage_env, "s3a://bkt/t", &e), MCDC_OK);
    CHECK(st != NULL && st->lease_ttl_ms == 4321);
    mcdc_storage_free(st);
    /* without the runtime: no credentials at all */
    mcdc_ctx none = {0};
    mcdc_ctx_take_storage(&none, bare, NULL);
    static const char *const off[] = {"AWS_EC2_METADATA_DISABLED"};
    static const char *const off_v[] = {"true"};
    mcdc_runtime *empty = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&empty, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_runtime_set_storage_options(empty, "S3", off, off_v, 1, &e), MCDC_OK);
    mcdc_ctx_take_storage(&none, bare, empty);
    CHECK_EQ_INT(mcdc_storage_open_env(&st, none.storage_env, "s3://bkt/t", &e),
                 MCDC_E_PERMISSION);
    mcdc_runtime_destroy(empty);

    /* a job with a storage option of its own uses its own alone */
    mcdc_opts *own = source_opts();
    CHECK_EQ_INT(mcdc_opts_set(own, "AWS_EC2_METADATA_DISABLED", "true", NULL, &e), MCDC_OK);
    mcdc_ctx mine = {0};
    mcdc_ctx_take_storage(&mine, own, rt);
    CHECK_EQ_INT(mcdc_storage_open_env(&st, mine.storage_env, "s3://bkt/t", &e),
                 MCDC_E_PERMISSION);
    CHECK(strstr(e.message, "AKIDRUNTIME") == NULL);

    /* a later set replaces the scheme's for the opens after it */
    values[5] = "5";
    CHECK_EQ_INT(mcdc_runtime_set_storage_options(rt, "s3", names, values, 6, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_open_env(&st, ctx.storage_env, "s3://bkt/t", &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "MCDC_LEASE_TTL_MS") != NULL);

    /* refused: an unknown scheme, a name that is no storage option (its
     * value not quoted), an empty value */
    CHECK_EQ_INT(mcdc_runtime_set_storage_options(rt, "ftp", az, az_v, 1, &e), MCDC_E_INVALID);
    static const char *const src[] = {"connectionString"};
    static const char *const src_v[] = {"Server=x;PWD=hunter2"};
    CHECK_EQ_INT(mcdc_runtime_set_storage_options(rt, "s3", src, src_v, 1, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "hunter2") == NULL);
    static const char *const key[] = {"AWS_SECRET_ACCESS_KEY"};
    static const char *const key_v[] = {""};
    CHECK_EQ_INT(mcdc_runtime_set_storage_options(rt, "s3", key, key_v, 1, &e), MCDC_E_INVALID);
    /* the refused sets changed nothing: still the "5" */
    CHECK_EQ_INT(mcdc_storage_open_env(&st, ctx.storage_env, "s3://bkt/t", &e), MCDC_E_INVALID);
    mcdc_opts_free(own);
    mcdc_opts_free(bare);
    mcdc_runtime_destroy(rt);
}

typedef struct {
    int n;
    mcdc_job_metrics seen[4];
} metrics_seen;

static int collect(void *user, const mcdc_job_metrics *m) {
    metrics_seen *s = user;
    if (s->n < 4) s->seen[s->n] = *m;
    s->n++;
    return 0;
}

static int stop_at_first(void *user, const mcdc_job_metrics *m) {
    (void)user;
    (void)m;
    return 7;
}

/* The registry: a job of the runtime is listed from its create to its
 * free, with what it published (batches, progress, how its run ended);
 * a job without a runtime is not. */
TEST(runtime_metrics_registry_lists_jobs_and_what_they_published) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, NULL, &e), MCDC_OK);
    mcdc_opts *o = source_opts();
    metrics_seen seen = {0};
    CHECK_EQ_INT(mcdc_runtime_metrics(rt, collect, &seen), 0);

    /* a target that is a file: the run fails before it connects */
    FILE *f = fopen("/tmp/mcdc-runtime-test-file", "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    mcdc_stream_cfg sc = MCDC_STREAM_CFG_INIT;
    sc.target = "/tmp/mcdc-runtime-test-file";
    sc.app_id = "orders-app";
    sc.checkpoint = "/tmp/mcdc-runtime-test/ckpt";
    sc.runtime = rt;
    mcdc_stream *s = NULL;
    CHECK_EQ_INT(mcdc_stream_create(&s, o, &sc, &e), MCDC_OK);
    sc.runtime = NULL;
    mcdc_stream *alone = NULL;
    CHECK_EQ_INT(mcdc_stream_create(&alone, o, &sc, &e), MCDC_OK);
    mcdc_apply_cfg ac = MCDC_APPLY_CFG_INIT;
    ac.bronze = "/tmp/mcdc-runtime-test/bronze";
    ac.target = "/tmp/mcdc-runtime-test/silver";
    ac.control_table = "/tmp/mcdc-runtime-test/control";
    ac.runtime = rt;
    mcdc_apply *a = NULL;
    CHECK_EQ_INT(mcdc_apply_create(&a, o, &ac, &e), MCDC_OK);

    CHECK_EQ_INT(mcdc_runtime_metrics(rt, collect, &seen), 2);
    CHECK_EQ_STR(seen.seen[0].job, "stream");
    CHECK_EQ_STR(seen.seen[0].name, "orders-app");
    CHECK(seen.seen[0].handle == s);
    CHECK_EQ_INT(seen.seen[0].state, MCDC_JOB_STARTING);
    CHECK_EQ_STR(seen.seen[1].job, "apply");
    CHECK_EQ_STR(seen.seen[1].name, "/tmp/mcdc-runtime-test/silver");
    CHECK(seen.seen[1].id > seen.seen[0].id);
    CHECK_EQ_INT(mcdc_runtime_metrics(rt, stop_at_first, NULL), 7);

    mcdc_error run_e = MCDC_ERROR_INIT;
    int rc = mcdc_stream_run(s, NULL, NULL, &run_e);
    CHECK(rc != MCDC_OK && rc != MCDC_E_CANCELLED);
    mcdc_job_metrics m;
    /* below any version's: version 1 ends before version 2's probe */
    CHECK(!mcdc_runtime_job_metrics(rt, s, &m, offsetof(mcdc_job_metrics, probe) - 1));
    struct { mcdc_job_metrics m; char tail[16]; } newer; /* a later header's, larger */
    memset(newer.tail, 0x5a, sizeof newer.tail);
    CHECK(mcdc_runtime_job_metrics(rt, s, &newer.m, sizeof newer));
    CHECK(newer.tail[0] == 0x5a && newer.tail[15] == 0x5a); /* its tail left alone */
    CHECK(mcdc_runtime_job_metrics(rt, s, &m, sizeof m));
    CHECK_EQ_INT(m.state, MCDC_JOB_FAILED);
    CHECK_EQ_STR(mcdc_job_state_name(m.state), "failed");
    CHECK_EQ_INT(m.runs, 1);
    CHECK_EQ_INT(m.last_status, rc);
    CHECK_EQ_INT(m.errors[-rc], 1);
    CHECK(m.last_error[0] != 0 && strncmp(m.last_error, run_e.message, 100) == 0);
    CHECK(!mcdc_runtime_job_metrics(rt, alone, &m, sizeof m));

    /* what a stream publishes after each batch and while it snapshots
     * (through the entry a job holds, as the stream does) */
    mcdc_job_entry *je = mcdc_runtime_job_join(rt, "stream", "direct", &seen);
    mcdc_runtime_job_started(je);
    mcdc_progress p = {.version = MCDC_PROGRESS_VERSION, .job = "snapshot", .phase = "reading",
                       .rows_done = 40, .rows_total = 100, .parts_done = 1, .parts_total = 4,
                       .job_parts_name = "chunks", .job_parts_done = 3, .job_parts_total = 9};
    mcdc_runtime_job_progress(je, &p);
    CHECK(mcdc_runtime_job_metrics(rt, &seen, &m, sizeof m));
    CHECK_EQ_INT(m.state, MCDC_JOB_SNAPSHOTTING);
    CHECK(m.progress_active);
    CHECK_EQ_INT(m.progress_rows_done, 40);
    CHECK_EQ_INT(m.progress_parts_done, 3);
    CHECK_EQ_INT(m.progress_parts_total, 9);
    mcdc_batch_report r = {.rows = 5, .duration_ms = 250, .has_verdict = true,
                           .finalized_until_us = 3600000000, .ingestion_lag_seconds = 2.5};
    snprintf(r.end_lsn, sizeof r.end_lsn, "0x0000002A000000100001");
    mcdc_runtime_job_batch(je, &r);
    r.rows = 7;
    mcdc_runtime_job_batch(je, &r);
    CHECK(mcdc_runtime_job_metrics(rt, &seen, &m, sizeof m));
    CHECK_EQ_INT(m.state, MCDC_JOB_RUNNING);
    CHECK(!m.progress_active);
    CHECK_EQ_INT(m.rows, 12);
    CHECK_EQ_INT(m.batches, 2);
    CHECK(m.last_batch_seconds == 0.25);
    CHECK_EQ_STR(m.end_lsn, "0x0000002A000000100001");
    CHECK(m.has_verdict && m.finalized_until_us == 3600000000 && m.verdict_moved_us > 0);
    /* version 2: how it polls (its database's probe joined: shared) and
     * the chunked snapshot it opened */
    CHECK_EQ_INT(m.version, 2);
    CHECK_EQ_INT(m.probe, MCDC_JOB_PROBE_NONE);
    CHECK_EQ_STR(m.chunked_snapshot, "");
    mcdc_db_probe *dp = NULL;
    CHECK_EQ_INT(mcdc_runtime_probe_join(rt, "Server=h;Database=shop", &seen, "dbo_t1",
                                         &mcdc_probe_seam_db, &dp, &e),
                 MCDC_OK);
    mcdc_runtime_job_chunked_opened(je, "0x0000002A000000200001");
    CHECK(mcdc_runtime_job_metrics(rt, &seen, &m, sizeof m));
    CHECK_EQ_INT(m.probe, MCDC_JOB_PROBE_SHARED);
    CHECK_EQ_STR(m.chunked_snapshot, "0x0000002A000000200001");
    /* a caller of version 1 gets version 1's fields, nothing past them */
    mcdc_job_metrics older;
    memset(&older, 0x5a, sizeof older);
    CHECK(mcdc_runtime_job_metrics(rt, &seen, &older, offsetof(mcdc_job_metrics, probe)));
    CHECK_EQ_INT(older.rows, 12);
    const unsigned char *past = (const unsigned char *)&older + offsetof(mcdc_job_metrics, probe);
    CHECK(past[0] == 0x5a && past[sizeof older - offsetof(mcdc_job_metrics, probe) - 1] == 0x5a);
    mcdc_runtime_probe_leave(rt, dp, &seen);
    mcdc_runtime_job_ended(je, MCDC_E_CANCELLED, NULL);
    CHECK(mcdc_runtime_job_metrics(rt, &seen, &m, sizeof m));
    CHECK_EQ_INT(m.state, MCDC_JOB_STOPPED);
    CHECK_EQ_INT(m.errors[-MCDC_E_CANCELLED], 1);
    mcdc_runtime_job_leave(je);

    mcdc_stream_free(s);
    mcdc_stream_free(alone);
    CHECK(!mcdc_runtime_job_metrics(rt, s, &m, sizeof m));
    seen.n = 0;
    CHECK_EQ_INT(mcdc_runtime_metrics(rt, collect, &seen), 1);
    mcdc_apply_free(a);
    CHECK_EQ_INT(mcdc_runtime_metrics(rt, collect, &seen), 0);
    CHECK_EQ_INT(mcdc_runtime_metrics(NULL, collect, &seen), MCDC_E_INVALID);
    remove("/tmp/mcdc-runtime-test-file");
    mcdc_opts_free(o);
    mcdc_runtime_destroy(rt);
}

/* Credentials a runtime's S3 options lead to are found once per runtime:
 * two jobs' stores (two opens) fetch the container endpoint's keys once
 * and sign with them both; the token never shows in a message. */
TEST(runtime_s3_credentials_are_fetched_once_for_its_jobs) {
    char ts[32], body[512], answer[1024];
    mcdc_format_ts_us(mcdc_now_utc_us() + 3600 * (int64_t)1000000, 0, ts);
    int n = snprintf(body, sizeof body,
                     "{\"Code\":\"Success\",\"AccessKeyId\":\"ASIART\",\"SecretAccessKey\":"
                     "\"sec-rt\",\"Token\":\"RTSESSION\",\"Expiration\":\"%sZ\"}",
                     ts);
    snprintf(answer, sizeof answer,
             "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", n, body);
    const step steps[] = {{ANSWER, answer}};
    server s;
    server_start(&s, steps, 1);
    char base[64], full[96];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", s.port);
    snprintf(full, sizeof full, "%s/v2/creds", base);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, NULL, &e), MCDC_OK);
    const char *names[] = {"AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_REGION",
                           "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                           "AWS_CONTAINER_AUTHORIZATION_TOKEN"};
    const char *values[] = {base, "true", "us-east-1", full, "rt-auth-7"};
    CHECK_EQ_INT(mcdc_runtime_set_storage_options(rt, "s3", names, values, 5, &e), MCDC_OK);
    mcdc_opts *bare = source_opts();
    mcdc_ctx one = {0}, two = {0};
    mcdc_ctx_take_storage(&one, bare, rt);
    mcdc_ctx_take_storage(&two, bare, rt);
    mcdc_storage *a = NULL, *b = NULL;
    CHECK_EQ_INT(mcdc_storage_open_env(&a, one.storage_env, "s3://bkt/orders", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_open_env(&b, two.storage_env, "s3://bkt/customers", &e), MCDC_OK);
    server_stop(&s);
    CHECK_EQ_INT(s.served, 1);
    CHECK_EQ_STR(s.seen_line[0], "GET /v2/creds HTTP/1.1");
    /* the first store freed, the second still signs with the shared keys */
    mcdc_storage_free(a);
    mcdc_storage_free(b);
    mcdc_opts_free(bare);
    mcdc_runtime_destroy(rt);
}

/* A scripted managed-identity endpoint answering two tokens, tok1 lasting
 * expires1 seconds and tok2 an hour, and a blob endpoint answering three
 * 404s; f->ep and f->msi are their URLs. */
typedef struct entra_fixture {
    char a1[256], a2[256], ep[64], msi[96];
    step tok_steps[2], blob_steps[3];
    server tok, blob;
} entra_fixture;

static void entra_start(entra_fixture *f, const char *tok1, int expires1, const char *tok2) {
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 "Connection: close\r\nContent-Length: %d\r\n\r\n%s";
    static const char not_found[] =
        "HTTP/1.1 404 The specified blob does not exist.\r\nx-ms-error-code: BlobNotFound\r\n"
        "Connection: close\r\nContent-Length: 0\r\n\r\n";
    char b[160];
    int n = snprintf(b, sizeof b, "{\"token_type\":\"Bearer\",\"expires_in\":%d,"
                                  "\"access_token\":\"%s\"}", expires1, tok1);
    snprintf(f->a1, sizeof f->a1, answer, n, b);
    n = snprintf(b, sizeof b, "{\"token_type\":\"Bearer\",\"expires_in\":3600,"
                              "\"access_token\":\"%s\"}", tok2);
    snprintf(f->a2, sizeof f->a2, answer, n, b);
    f->tok_steps[0] = (step){ANSWER, f->a1};
    f->tok_steps[1] = (step){ANSWER, f->a2};
    for (int i = 0; i < 3; i++) f->blob_steps[i] = (step){ANSWER, not_found};
    server_start(&f->tok, f->tok_steps, 2);
    server_start(&f->blob, f->blob_steps, 3);
    snprintf(f->ep, sizeof f->ep, "http://127.0.0.1:%d", f->blob.port);
    snprintf(f->msi, sizeof f->msi, "http://127.0.0.1:%d/msi/token", f->tok.port);
}

/* Azure's Entra ID token a runtime's options lead to is shared the same
 * way: two jobs' stores (two opens) fetch one token from the managed
 * identity's endpoint; a renewal near its expiry, made through one store,
 * serves the other too (no fetch of its own); the share's reference ends
 * with the runtime while a store still open keeps the token it uses. */
TEST(runtime_azure_entra_token_is_fetched_once_for_its_jobs) {
    entra_fixture f;
    entra_start(&f, "rt-tok-1", 60, "rt-tok-2");
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, NULL, &e), MCDC_OK);
    const char *names[] = {"AZURE_STORAGE_ACCOUNT_NAME", "AZURE_ALLOW_HTTP",
                           "AZURE_STORAGE_ENDPOINT", "IDENTITY_ENDPOINT", "IDENTITY_HEADER"};
    const char *values[] = {"acct1", "true", f.ep, f.msi, "rt-identity-header"};
    CHECK_EQ_INT(mcdc_runtime_set_storage_options(rt, "azure", names, values, 5, &e), MCDC_OK);
    mcdc_opts *bare = source_opts();
    mcdc_ctx one = {0}, two = {0};
    mcdc_ctx_take_storage(&one, bare, rt);
    mcdc_ctx_take_storage(&two, bare, rt);
    mcdc_storage *a = NULL, *b = NULL;
    CHECK_EQ_INT(mcdc_storage_open_env(&a, one.storage_env, "az://lake/orders", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_open_env(&b, two.storage_env, "az://lake/customers", &e), MCDC_OK);
    CHECK_EQ_INT(f.tok.served, 1); /* the second open fetched nothing */
    mcdc_buf got = {0};
    /* rt-tok-1 lasts 60 s, inside the renewal margin: a's request renews it */
    CHECK_EQ_INT(mcdc_storage_get(a, "k", 100, &got, &e), MCDC_E_NOTFOUND);
    CHECK_EQ_INT(f.tok.served, 2);
    /* b uses the renewed token, fetching none (the server has no answer left) */
    CHECK_EQ_INT(mcdc_storage_get(b, "k", 100, &got, &e), MCDC_E_NOTFOUND);
    /* the runtime (and its share) gone first: b keeps its token */
    mcdc_storage_free(a);
    mcdc_runtime_destroy(rt);
    CHECK_EQ_INT(mcdc_storage_get(b, "k", 100, &got, &e), MCDC_E_NOTFOUND);
    server_stop(&f.tok);
    server_stop(&f.blob);
    CHECK_EQ_INT(f.tok.served, 2);
    CHECK_EQ_INT(f.blob.served, 3);
    char v[96];
    for (int i = 0; i < 3; i++) {
        header_value(f.blob.seen_req[i], "Authorization:", v, sizeof v);
        CHECK_EQ_STR(v, "Bearer rt-tok-2");
    }
    CHECK(strstr(e.message, "rt-tok") == NULL && strstr(e.message, "rt-identity") == NULL);
    mcdc_buf_free(&got);
    mcdc_storage_free(b);
    mcdc_opts_free(bare);
}

/* Jobs given storage options of their own (serve's tables, each with the
 * config's [storage]) share their credentials when the options are the
 * same, name for name and value for value: two such jobs' stores fetch one
 * token; a third whose identity header differs fetches its own. */
TEST(runtime_jobs_with_the_same_own_storage_options_fetch_one_token) {
    entra_fixture f;
    entra_start(&f, "own-tok-1", 3600, "own-tok-2");
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, NULL, &e), MCDC_OK);
    const char *names[] = {"AZURE_STORAGE_ACCOUNT_NAME", "AZURE_ALLOW_HTTP",
                           "AZURE_STORAGE_ENDPOINT", "IDENTITY_ENDPOINT", "IDENTITY_HEADER"};
    const char *values[] = {"acct1", "true", f.ep, f.msi, "own-identity-header"};
    mcdc_opts *o[3];
    for (int k = 0; k < 3; k++) {
        o[k] = source_opts();
        for (int i = 0; i < 5; i++)
            CHECK_EQ_INT(mcdc_opts_set(o[k], names[i],
                                       k == 2 && i == 4 ? "other-identity-header" : values[i],
                                       NULL, &e), MCDC_OK);
    }
    mcdc_ctx ctx[3] = {{0}};
    mcdc_storage *st[3] = {NULL};
    for (int k = 0; k < 3; k++) {
        mcdc_ctx_take_storage(&ctx[k], o[k], rt);
        CHECK(ctx[k].storage_env->share != NULL);
        CHECK_EQ_INT(mcdc_storage_open_env(&st[k], ctx[k].storage_env, "az://lake/t", &e), MCDC_OK);
        CHECK_EQ_INT(f.tok.served, k < 2 ? 1 : 2); /* the second job fetched nothing */
    }
    CHECK(ctx[0].storage_env->share == ctx[1].storage_env->share);
    CHECK(ctx[0].storage_env->share != ctx[2].storage_env->share);
    mcdc_buf got = {0};
    for (int k = 0; k < 3; k++) CHECK_EQ_INT(mcdc_storage_get(st[k], "k", 100, &got, &e), MCDC_E_NOTFOUND);
    for (int k = 0; k < 3; k++) mcdc_storage_free(st[k]);
    mcdc_runtime_destroy(rt);
    server_stop(&f.tok);
    server_stop(&f.blob);
    CHECK_EQ_INT(f.tok.served, 2);
    char v[96];
    for (int i = 0; i < 3; i++) {
        header_value(f.blob.seen_req[i], "Authorization:", v, sizeof v);
        CHECK_EQ_STR(v, i < 2 ? "Bearer own-tok-1" : "Bearer own-tok-2");
    }
    mcdc_buf_free(&got);
    for (int k = 0; k < 3; k++) mcdc_opts_free(o[k]);
}

/* The registry holds the jobs that exist, not the last figures of those
 * gone: a one-call job (snapshot, seed, repair) is in it during its call
 * and out of it when the call returns, whatever it returned (here each
 * fails: no copy, or the runtime's allocation fault), and a job with a
 * handle leaves it at its free (mssqlcdc.h: read the figures before). */
TEST(runtime_one_call_jobs_leave_the_registry_when_they_return) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_runtime *rt = NULL;
    CHECK_EQ_INT(mcdc_runtime_create(&rt, NULL, &e), MCDC_OK);
    mcdc_opts *o = source_opts();
    metrics_seen seen = {0};
    CHECK_EQ_INT(seed_in(rt, o, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_runtime_metrics(rt, collect, &seen), 0);
    mcdc_runtime_fail_alloc_at(rt, 1);
    CHECK_EQ_INT(snapshot_in(rt, o, &e), MCDC_E_NOMEM);
    CHECK_EQ_INT(mcdc_runtime_metrics(rt, collect, &seen), 0);
    mcdc_runtime_fail_alloc_at(rt, 1);
    CHECK_EQ_INT(repair_in(rt, o, &e), MCDC_E_NOMEM);
    mcdc_runtime_fail_alloc_at(rt, 0);
    CHECK_EQ_INT(mcdc_runtime_metrics(rt, collect, &seen), 0);

    /* each of the three was in the registry during its call: the next job
     * is the runtime's fourth */
    mcdc_stream_cfg sc = MCDC_STREAM_CFG_INIT;
    sc.target = "/tmp/mcdc-runtime-test/bronze";
    sc.app_id = "orders-app";
    sc.checkpoint = "/tmp/mcdc-runtime-test/ckpt";
    sc.runtime = rt;
    mcdc_stream *s = NULL;
    CHECK_EQ_INT(mcdc_stream_create(&s, o, &sc, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_runtime_metrics(rt, collect, &seen), 1);
    CHECK_EQ_INT(seen.seen[0].id, 4);
    mcdc_job_metrics m;
    CHECK(mcdc_runtime_job_metrics(rt, s, &m, sizeof m));
    mcdc_stream_free(s);
    CHECK(!mcdc_runtime_job_metrics(rt, s, &m, sizeof m));
    seen.n = 0;
    CHECK_EQ_INT(mcdc_runtime_metrics(rt, collect, &seen), 0);
    mcdc_opts_free(o);
    mcdc_runtime_destroy(rt);
}
