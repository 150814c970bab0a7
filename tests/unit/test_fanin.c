/* test_fanin.c - the producers-to-one-consumer queue (mcdc_fanin). */
#include <sched.h>
#include <time.h>

#include "mcdc_fanin.h"
#include "mcdc_test.h"

typedef struct fan_src {
    mcdc_schema *s;
    int batches;
    int fail_at;        /* >= 0: the producer fails after putting that many */
    int puts_returned;  /* atomic: puts that came back */
} fan_src;

static int fan_produce(void *arg, mcdc_batch_fn put, void *put_ctx, mcdc_error *err) {
    fan_src *f = arg;
    for (int i = 0; i < f->batches; i++) {
        if (i == f->fail_at) return mcdc_error_set(err, MCDC_E_IO, "producer broke at %d", i);
        mcdc_batch *b;
        int rc = mcdc_batch_create(&b, f->s, 1, err);
        if (rc == MCDC_OK) rc = mcdc_col_append_int(&b->columns[0], i, err);
        if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
        if (rc) {
            mcdc_batch_free(b);
            return rc;
        }
        if ((rc = put(put_ctx, b, err)) != MCDC_OK) return rc;
        __atomic_add_fetch(&f->puts_returned, 1, __ATOMIC_ACQ_REL);
    }
    return MCDC_OK;
}

static double fan_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A producer runs at most depth batches ahead of the consumer: with the
 * consumer idle, its puts come back depth times (it gets that far), and no
 * more while the consumer watches a while; the batches come in order. */
TEST(fanin_queues_as_many_batches_ahead_as_its_caller_says) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s;
    mcdc_schema_create(&s, 1, &e);
    mcdc_schema_set(s, 0, "i", MCDC_TYPE_INT64, 0, 0, 0, false, &e);
    const int depths[] = {1, 3, MCDC_QUEUE_DEPTH_MAX};
    for (size_t d = 0; d < sizeof depths / sizeof *depths; d++) {
        int depth = depths[d];
        fan_src src = {.s = s, .batches = 10, .fail_at = -1};
        void *arg = &src;
        mcdc_fanin *f = NULL;
        CHECK_EQ_INT(mcdc_fanin_start(&f, 1, depth, fan_produce, &arg, &e), MCDC_OK);
        bool over = false, reached = true;
        for (int taken = 0; taken <= src.batches; taken++) {
            int want = taken + depth < src.batches ? taken + depth : src.batches;
            double until = fan_now() + 0.01, give_up = fan_now() + 30;
            int got;
            /* it gets as far as it may (condition-based), then is watched a
             * while for going further */
            while ((got = __atomic_load_n(&src.puts_returned, __ATOMIC_ACQUIRE)) < want &&
                   fan_now() < give_up)
                sched_yield();
            reached = reached && got >= want;
            while (fan_now() < until && !over)
                over = __atomic_load_n(&src.puts_returned, __ATOMIC_ACQUIRE) > want;
            if (taken == src.batches) break;
            mcdc_batch *b = mcdc_fanin_next(f);
            CHECK(b != NULL);
            if (b == NULL) break;
            CHECK_EQ_INT(((const int64_t *)(const void *)b->columns[0].values)[0], taken);
            mcdc_batch_free(b);
        }
        CHECK(reached);
        CHECK(!over);
        CHECK(mcdc_fanin_next(f) == NULL);
        int prc = -1;
        CHECK_EQ_INT(mcdc_fanin_finish(f, &prc, &e), MCDC_OK);
        CHECK_EQ_INT(prc, MCDC_OK);
    }
    /* a producer's error comes after the batches it put, from finish */
    {
        fan_src src = {.s = s, .batches = 5, .fail_at = 2};
        void *arg = &src;
        mcdc_fanin *f = NULL;
        CHECK_EQ_INT(mcdc_fanin_start(&f, 1, 1, fan_produce, &arg, &e), MCDC_OK);
        int n = 0;
        mcdc_batch *b;
        while ((b = mcdc_fanin_next(f)) != NULL) n++, mcdc_batch_free(b);
        CHECK_EQ_INT(n, 2);
        CHECK_EQ_INT(mcdc_fanin_finish(f, NULL, &e), MCDC_E_IO);
        CHECK(strstr(e.message, "producer broke at 2") != NULL);
    }
    /* the consumer leaves early: a producer blocked on a full queue stops */
    {
        fan_src src = {.s = s, .batches = 50, .fail_at = -1};
        void *arg = &src;
        mcdc_fanin *f = NULL;
        CHECK_EQ_INT(mcdc_fanin_start(&f, 1, 1, fan_produce, &arg, &e), MCDC_OK);
        mcdc_batch *b = mcdc_fanin_next(f);
        CHECK(b != NULL);
        mcdc_batch_free(b);
        int prc = 0;
        mcdc_error e2 = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_fanin_finish(f, &prc, &e2), MCDC_E_CANCELLED);
        CHECK_EQ_INT(prc, MCDC_E_CANCELLED);
        CHECK(__atomic_load_n(&src.puts_returned, __ATOMIC_ACQUIRE) < src.batches);
    }
    /* which producer put each batch */
    {
        fan_src src[3];
        void *args[3];
        for (int i = 0; i < 3; i++) {
            src[i] = (fan_src){.s = s, .batches = 5 + 5 * i, .fail_at = -1};
            args[i] = &src[i];
        }
        mcdc_fanin *f = NULL;
        CHECK_EQ_INT(mcdc_fanin_start(&f, 3, 2, fan_produce, args, &e), MCDC_OK);
        int seen[3] = {0}, next[3] = {0}, from = -1;
        bool in_order = true;
        mcdc_batch *b;
        while ((b = mcdc_fanin_next_from(f, &from)) != NULL) {
            CHECK(from >= 0 && from < 3);
            if (from >= 0 && from < 3) { /* each producer's values 0, 1, ... in turn */
                in_order = in_order && ((const int64_t *)(const void *)b->columns[0].values)[0] == next[from];
                next[from]++, seen[from]++;
            }
            mcdc_batch_free(b);
        }
        CHECK(in_order);
        for (int i = 0; i < 3; i++) CHECK_EQ_INT(seen[i], 5 + 5 * i);
        CHECK_EQ_INT(mcdc_fanin_finish(f, NULL, &e), MCDC_OK);
    }
    mcdc_schema_unref(s);
}
