/* mcdc_context.c - a job's context and the shared budget (mcdc_context.h). */
#include "mcdc_context.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_options.h"
#include "mcdc_runtime.h"
#include "mssqlcdc_testing.h"

/* A job waiting for permits: a node of its kind's queue, on its stack. */
typedef struct budget_waiter {
    struct budget_waiter *next;
} budget_waiter;

/* Jobs take permits in the order they asked (a queue per kind): a job
 * that needs many is not passed forever by jobs that need few, and one
 * that wants many takes no more than an equal share while others wait. */
struct mcdc_budget {
    pthread_mutex_t mu;
    pthread_cond_t freed;
    int max[MCDC_PERMIT_KINDS];
    int used[MCDC_PERMIT_KINDS];
    int peak[MCDC_PERMIT_KINDS];
    budget_waiter *head[MCDC_PERMIT_KINDS], *tail[MCDC_PERMIT_KINDS];
    int waiting[MCDC_PERMIT_KINDS];
};

static const char *const PERMIT_NAMES[MCDC_PERMIT_KINDS] = {"connections", "encoder threads",
                                                               "facts turns"};

int mcdc_budget_create(mcdc_budget **out, int connections_max, int encoder_threads_max,
                       mcdc_error *err) {
    if (out == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_budget_create: out is NULL");
    *out = NULL;
    if (connections_max < 2 || encoder_threads_max < 1)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "a budget needs at least 2 connections (a job's control "
                              "connection and one reader) and 1 encoder thread, not %d and %d",
                              connections_max, encoder_threads_max);
    mcdc_budget *b = mcdc_calloc(1, sizeof *b);
    if (b == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->freed, NULL);
    b->max[MCDC_PERMIT_CONNECTION] = connections_max;
    b->max[MCDC_PERMIT_ENCODER] = encoder_threads_max;
    b->max[MCDC_PERMIT_FACTS] = 1;
    *out = b;
    return MCDC_OK;
}

void mcdc_budget_free(mcdc_budget *b) {
    if (b == NULL) return;
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->freed);
    mcdc_free(b);
}

int mcdc_budget_acquire(mcdc_budget *b, mcdc_permit kind, int min, int want, int reserve,
                        const atomic_int *stop, int *got, mcdc_error *err) {
    MCDC_ASSERT(min >= 1 && want >= min && reserve >= 0 && kind < MCDC_PERMIT_KINDS);
    *got = 0;
    if (b == NULL) {
        *got = want;
        return MCDC_OK;
    }
    if (min + reserve > b->max[kind])
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "the budget has %d %s, fewer than the %d this job needs",
                              b->max[kind], PERMIT_NAMES[kind], min + reserve);
    budget_waiter me = {NULL};
    pthread_mutex_lock(&b->mu);
    if (b->tail[kind]) b->tail[kind]->next = &me;
    else b->head[kind] = &me;
    b->tail[kind] = &me;
    b->waiting[kind]++;
    for (;;) {
        int free_now = b->max[kind] - b->used[kind];
        if (b->head[kind] == &me && free_now >= min + reserve) {
            int take = free_now - reserve < want ? free_now - reserve : want;
            /* others queued behind: an equal share of what is free */
            int share = (free_now - reserve) / b->waiting[kind];
            if (b->waiting[kind] > 1 && take > share) take = share;
            if (take < min) take = min;
            b->used[kind] += take;
            if (b->used[kind] > b->peak[kind]) b->peak[kind] = b->used[kind];
            *got = take;
            break;
        }
        if (stop && atomic_load(stop)) break;
        /* A stop request cannot signal the condition (it may come from a
         * signal handler): wake up now and then to look. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&b->freed, &b->mu, &ts);
    }
    /* out of the queue (served or stopped): the next one may go */
    budget_waiter **at = &b->head[kind], *prev = NULL;
    while (*at != &me) {
        prev = *at;
        at = &(*at)->next;
    }
    *at = me.next;
    if (b->tail[kind] == &me) b->tail[kind] = prev;
    b->waiting[kind]--;
    pthread_cond_broadcast(&b->freed);
    pthread_mutex_unlock(&b->mu);
    if (*got == 0) return mcdc_error_set(err, MCDC_E_CANCELLED, "stopped while waiting for the budget");
    return MCDC_OK;
}

void mcdc_budget_release(mcdc_budget *b, mcdc_permit kind, int n) {
    if (b == NULL || n == 0) return;
    pthread_mutex_lock(&b->mu);
    MCDC_ASSERT(b->used[kind] >= n);
    b->used[kind] -= n;
    pthread_cond_broadcast(&b->freed);
    pthread_mutex_unlock(&b->mu);
}

/* One of b's counters, read under its lock. */
static int budget_read(const mcdc_budget *b, const int *counter) {
    mcdc_budget *m = (mcdc_budget *)b; /* the lock is not part of its value */
    pthread_mutex_lock(&m->mu);
    int v = *counter;
    pthread_mutex_unlock(&m->mu);
    return v;
}

int mcdc_budget_waiting(const mcdc_budget *b, mcdc_permit kind) {
    return budget_read(b, &b->waiting[kind]);
}

int mcdc_budget_peak(const mcdc_budget *b, mcdc_permit kind) {
    return budget_read(b, &b->peak[kind]);
}

void mcdc_ctx_take_storage(mcdc_ctx *ctx, const mcdc_opts *opts, mcdc_runtime *rt) {
    bool own = mcdc_opts_has_storage(opts);
    ctx->storage_own = mcdc_opts_storage_env(own ? opts : NULL, ctx->storage_env);
    if (!own) mcdc_runtime_storage_fallback(rt, &ctx->storage_own);
    else if (ctx->storage_own.share == NULL) ctx->storage_own.share = mcdc_runtime_own_share(rt, opts);
    ctx->storage_env = &ctx->storage_own;
}

void mcdc_ctx_take_test_hooks(mcdc_ctx *ctx, const mcdc_opts *opts) {
    _Static_assert(sizeof ctx->crash_at > MCDC_CRASH_AT_BYTES_MAX, "a crash point fits");
    snprintf(ctx->crash_at, sizeof ctx->crash_at, "%s", mcdc_opt_crash_at(opts));
}

bool mcdc_ctx_crash(const mcdc_ctx *ctx, const char *point, int64_t unit) {
    if (ctx->crash_fn && ctx->crash_fn(ctx->crash_user, point, unit)) return true;
    const char *at = ctx->crash_at;
    size_t n = strlen(point);
    if (at[0] == 0 || strncmp(at, point, n) != 0) return false;
    if (at[n] == ':') {
        int64_t want;
        if (mcdc_parse_i64(at + n + 1, &want) || want != unit) return false;
    } else if (at[n] != 0) {
        return false;
    }
    fprintf(stderr, "mssql-cdc: MCDC_CRASH_AT=%s: killing the process at unit %lld\n", at,
            (long long)unit);
    fflush(stderr);
    raise(SIGKILL);
    return true;
}

/* A report to the job's metrics entry, then to its host. */
static void ctx_progress(void *user, const mcdc_progress *p) {
    const mcdc_ctx *ctx = user;
    mcdc_runtime_job_progress(ctx->metrics, p);
    if (ctx->progress_fn) ctx->progress_fn(ctx->progress_user, p);
}

int mcdc_ctx_progress_create(mcdc_progress_tracker **out, const mcdc_ctx *ctx, const char *job,
                             mcdc_error *err) {
    if (ctx->metrics == NULL)
        return mcdc_progress_create(out, job, ctx->progress_fn, ctx->progress_user,
                                    MCDC_PROGRESS_INTERVAL_MS, err);
    /* read only: the tracker's user pointer is not const */
    return mcdc_progress_create(out, job, ctx_progress, (void *)ctx, MCDC_PROGRESS_INTERVAL_MS,
                                err);
}

void mcdc_ctx_sleep_until(const mcdc_ctx *ctx, int64_t deadline_us) {
    while (!mcdc_ctx_stopping(ctx)) {
        int64_t left = deadline_us - mcdc_monotonic_us();
        if (left <= 0) return;
        mcdc_sleep_ms(left > 50000 ? 50 : (left + 999) / 1000);
    }
}

/* ---- the host's stop requests (mcdc_stop, include/mssqlcdc.h) ----------------------- */
struct mcdc_stop {
    atomic_int requested;
};

int mcdc_stop_create(mcdc_stop **out, mcdc_error *err) {
    if (out == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_stop_create: out is NULL");
    *out = mcdc_calloc(1, sizeof **out);
    if (*out == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    atomic_init(&(*out)->requested, 0);
    return MCDC_OK;
}

void mcdc_stop_request(mcdc_stop *s) {
    if (s) atomic_store(&s->requested, 1);
}

bool mcdc_stop_requested(const mcdc_stop *s) {
    return s != NULL && atomic_load(&s->requested) != 0;
}

void mcdc_stop_free(mcdc_stop *s) { mcdc_free(s); }

int mcdc_ctx_check_stop(const mcdc_ctx *ctx, const char *what, mcdc_error *err) {
    if (!mcdc_ctx_stopping(ctx)) return MCDC_OK;
    return mcdc_error_set(err, MCDC_E_CANCELLED,
                          "stopped on request before %s was committed: nothing of it was "
                          "written to the table (run it again to take it)",
                          what);
}
