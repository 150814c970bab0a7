/* test_main.c - runs the registered unit tests. */
#include <stdlib.h>

#include "mcdc_test.h"
#include "mcdc_util.h"

typedef struct {
    const char *name;
    mcdc_test_fn fn;
} entry;

static entry g_tests[1024];
static int g_count;
static int g_failures_in_test;
int mcdc_test_checks;
int mcdc_test_fault_step = 1;

void mcdc_test_register(const char *name, mcdc_test_fn fn) {
    if (g_count < (int)(sizeof g_tests / sizeof g_tests[0]))
        g_tests[g_count++] = (entry){name, fn};
}

void mcdc_test_fail(const char *file, int line, const char *what) {
    g_failures_in_test++;
    fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, what);
}

/* Does name hold one of the filter's '|'-separated parts? */
static bool matches(const char *name, const char *filter) {
    for (const char *p = filter;;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        char part[128];
        if (n > 0 && n < sizeof part) {
            memcpy(part, p, n);
            part[n] = '\0';
            if (strstr(name, part)) return true;
        }
        if (!bar) return false;
        p = bar + 1;
    }
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

/* MCDC_TEST_SHARD=k/n: this run takes the tests whose place in name order
 * is k modulo n (so n runs at once share the tests out, each exactly once). */
static bool shard_of(const char *v, int *k, int *n) {
    char *end;
    long a = strtol(v, &end, 10);
    if (end == v || *end != '/') return false;
    const char *q = end + 1;
    long b = strtol(q, &end, 10);
    if (end == q || *end != '\0' || b < 1 || b > 64 || a < 0 || a >= b) return false;
    *k = (int)a;
    *n = (int)b;
    return true;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0, shard = 0, shards = 1;
    const char *sv = getenv("MCDC_TEST_SHARD");
    if (sv && !shard_of(sv, &shard, &shards)) {
        fprintf(stderr, "MCDC_TEST_SHARD must be k/n with 0 <= k < n <= 64, not '%s'\n", sv);
        return 2;
    }
    const char *fs = getenv("MCDC_TEST_FAULT_STEP");
    if (fs) {
        char *end;
        long v = strtol(fs, &end, 10);
        if (end == fs || *end != '\0' || v < 1 || v > 64) {
            fprintf(stderr, "MCDC_TEST_FAULT_STEP must be a whole number from 1 to 64, not '%s'\n", fs);
            return 2;
        }
        mcdc_test_fault_step = (int)v;
    }
    /* The tests' allocations (and those of the jobs they run, which bind
     * the caller's accounting when they have no runtime) are counted here:
     * leaks and fault injection (mcdc_alloc_fail_at) go through it. */
    mcdc_alloc_acct acct;
    mcdc_alloc_acct_init(&acct, 0);
    mcdc_alloc_bind(&acct);
    qsort(g_tests, (size_t)g_count, sizeof g_tests[0], by_name);
    for (int i = 0; i < g_count; i++) {
        if (i % shards != shard) continue;
        if (filter && !matches(g_tests[i].name, filter)) continue;
        g_failures_in_test = 0;
        mcdc_test_checks = 0;
        mcdc_alloc_stats before, after;
        mcdc_alloc_get_stats(&before);
        int64_t t0 = mcdc_monotonic_us();
        g_tests[i].fn();
        double secs = (double)(mcdc_monotonic_us() - t0) / 1e6;
        mcdc_alloc_get_stats(&after);
        if (mcdc_test_checks == 0) mcdc_test_fail(__FILE__, __LINE__, "test made no checks");
        if (after.live_bytes != before.live_bytes) {
            char m[128];
            snprintf(m, sizeof m, "leaked %lld bytes through mcdc_malloc",
                     (long long)(after.live_bytes - before.live_bytes));
            mcdc_test_fail(__FILE__, __LINE__, m);
        }
        /* a test's seconds when they are worth knowing (CI's time is kept
         * well within its limit: the slow ones are where to look) */
        char took[32] = "";
        if (secs >= 0.5) snprintf(took, sizeof took, " (%.1f s)", secs);
        if (g_failures_in_test) {
            failed++;
            printf("FAIL %s%s\n", g_tests[i].name, took);
        } else {
            passed++;
            printf("ok   %s%s\n", g_tests[i].name, took);
        }
    }
    printf("unit: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
