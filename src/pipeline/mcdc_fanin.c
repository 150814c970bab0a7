/* mcdc_fanin.c - producer threads to one consumer (see mcdc_fanin.h). */
#include "mcdc_fanin.h"

#include <pthread.h>
#include <string.h>

typedef struct producer {
    struct mcdc_fanin *f;
    mcdc_fanin_producer fn;
    void *arg;
    pthread_t thread;
    int rc;
    mcdc_error err;
} producer;

struct mcdc_fanin {
    pthread_mutex_t mu;
    pthread_cond_t can_put, can_get;
    mcdc_batch *items[MCDC_QUEUE_DEPTH_MAX];
    int from[MCDC_QUEUE_DEPTH_MAX]; /* the producer of each */
    int depth, head, count, running;
    bool failed;
    int n_started;
    producer *p;
    const mcdc_log_sink *sink; /* the starting thread's: producers log there */
};

static int put(void *ctx, mcdc_batch *b, mcdc_error *err) {
    producer *p = ctx;
    struct mcdc_fanin *f = p->f;
    pthread_mutex_lock(&f->mu);
    while (f->count == f->depth && !f->failed) pthread_cond_wait(&f->can_put, &f->mu);
    if (f->failed) {
        pthread_mutex_unlock(&f->mu);
        mcdc_batch_free(b);
        return mcdc_error_set(err, MCDC_E_CANCELLED, "the unit was abandoned");
    }
    f->items[(f->head + f->count) % f->depth] = b;
    f->from[(f->head + f->count) % f->depth] = (int)(p - f->p);
    f->count++;
    pthread_cond_signal(&f->can_get);
    pthread_mutex_unlock(&f->mu);
    return MCDC_OK;
}

static void *run(void *arg) {
    producer *p = arg;
    mcdc_log_use(p->f->sink);
    p->rc = p->fn(p->arg, put, p, &p->err);
    pthread_mutex_lock(&p->f->mu);
    if (p->rc) p->f->failed = true;
    p->f->running--;
    pthread_cond_broadcast(&p->f->can_get);
    pthread_cond_broadcast(&p->f->can_put);
    pthread_mutex_unlock(&p->f->mu);
    return NULL;
}

int mcdc_fanin_start(mcdc_fanin **out, int n, int depth, mcdc_fanin_producer fn,
                     void *const *args, mcdc_error *err) {
    MCDC_ASSERT(n >= 0 && fn && depth >= 1 && depth <= MCDC_QUEUE_DEPTH_MAX);
    *out = NULL;
    struct mcdc_fanin *f = mcdc_calloc(1, sizeof *f);
    producer *p = mcdc_calloc((size_t)(n ? n : 1), sizeof *p);
    if (f == NULL || p == NULL) {
        mcdc_free(f);
        mcdc_free(p);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory starting readers");
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->can_put, NULL);
    pthread_cond_init(&f->can_get, NULL);
    f->p = p;
    f->depth = depth;
    f->running = n;
    f->sink = mcdc_log_current();
    int rc = MCDC_OK;
    for (int i = 0; i < n; i++) {
        p[i] = (producer){.f = f, .fn = fn, .arg = args[i]};
        if (mcdc_thread_start(&p[i].thread, run, &p[i]) != 0) {
            pthread_mutex_lock(&f->mu);
            f->running -= n - i;
            f->failed = true;
            pthread_mutex_unlock(&f->mu);
            rc = mcdc_error_set(err, MCDC_E_IO, "cannot start a reader thread");
            break;
        }
        f->n_started++;
    }
    *out = f;
    return rc;
}

mcdc_batch *mcdc_fanin_next(mcdc_fanin *f) { return mcdc_fanin_next_from(f, NULL); }

mcdc_batch *mcdc_fanin_next_from(mcdc_fanin *f, int *from) {
    pthread_mutex_lock(&f->mu);
    while (f->count == 0 && f->running > 0) pthread_cond_wait(&f->can_get, &f->mu);
    mcdc_batch *b = NULL;
    if (f->count) {
        b = f->items[f->head];
        if (from) *from = f->from[f->head];
        f->head = (f->head + 1) % f->depth;
        f->count--;
        pthread_cond_signal(&f->can_put);
    }
    pthread_mutex_unlock(&f->mu);
    return b;
}

void mcdc_fanin_fail(mcdc_fanin *f) {
    pthread_mutex_lock(&f->mu);
    f->failed = true;
    pthread_cond_broadcast(&f->can_put);
    pthread_mutex_unlock(&f->mu);
}

int mcdc_fanin_finish(mcdc_fanin *f, int *producer_rc, mcdc_error *err) {
    if (f == NULL) return MCDC_OK;
    mcdc_fanin_fail(f); /* nobody takes batches any more */
    for (int i = 0; i < f->n_started; i++) pthread_join(f->p[i].thread, NULL);
    mcdc_batch *b;
    while ((b = mcdc_fanin_next(f)) != NULL) mcdc_batch_free(b);
    int rc = MCDC_OK;
    for (int pass = 0; pass < 2 && rc == MCDC_OK; pass++)
        for (int i = 0; i < f->n_started && rc == MCDC_OK; i++)
            if (f->p[i].rc && (pass == 1 || f->p[i].rc != MCDC_E_CANCELLED)) {
                rc = f->p[i].rc;
                if (err) *err = f->p[i].err;
            }
    for (int i = 0; producer_rc && i < f->n_started; i++) producer_rc[i] = f->p[i].rc;
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->can_put);
    pthread_cond_destroy(&f->can_get);
    mcdc_free(f->p);
    mcdc_free(f);
    return rc;
}
