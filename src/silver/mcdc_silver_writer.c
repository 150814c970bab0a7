/*
 * mcdc_silver_writer.c - a merge's output files encoded on a thread of their
 * own (see mcdc_silver.h).
 */
#include <pthread.h>
#include <string.h>

#include "mcdc_silver.h"

static void *writer_main(void *arg) {
    silver_writer *w = arg;
    mcdc_log_use(w->sink);
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->n == 0 && !w->done) pthread_cond_wait(&w->cv, &w->mu);
        if (w->n == 0) break;
        mcdc_batch *b = w->q[w->head];
        w->head = (w->head + 1) % SILVER_WRITER_QUEUE;
        w->n--;
        pthread_cond_broadcast(&w->cv);
        bool failed = w->failed;
        pthread_mutex_unlock(&w->mu);
        int rc = MCDC_OK;
        mcdc_error e = MCDC_ERROR_INIT;
        int64_t t0 = mcdc_monotonic_us();
        if (!failed && b) {
            rc = mcdc_appender_write(w->a, b, &e);
        } else if (!failed) {
            const char *path = NULL;
            rc = mcdc_appender_roll(w->a, &path, &e);
            if (rc == MCDC_OK && path) {
                if (w->n_paths == w->cap_paths) {
                    int64_t cap = w->cap_paths ? w->cap_paths * 2 : 16;
                    char **v = mcdc_realloc(w->paths, (size_t)cap * sizeof *v);
                    if (v == NULL) rc = mcdc_error_set(&e, MCDC_E_NOMEM, "out of memory");
                    else w->paths = v, w->cap_paths = cap;
                }
                if (rc == MCDC_OK && (w->paths[w->n_paths] = mcdc_strdup(path)) == NULL)
                    rc = mcdc_error_set(&e, MCDC_E_NOMEM, "out of memory");
                if (rc == MCDC_OK) w->n_paths++;
            }
        }
        int64_t busy = mcdc_monotonic_us() - t0;
        mcdc_batch_free(b);
        pthread_mutex_lock(&w->mu);
        w->busy_us += busy;
        if (rc && !w->failed) {
            w->failed = true;
            w->rc = rc;
            w->err = e;
        }
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int silver_writer_start(silver_writer *w, mcdc_appender *a, mcdc_error *err) {
    memset(w, 0, sizeof *w);
    w->a = a;
    w->sink = mcdc_log_current();
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (mcdc_thread_start(&w->th, writer_main, w) != 0)
        return mcdc_error_set(err, MCDC_E_NOMEM, "cannot start the merge's writing thread");
    w->started = true;
    return MCDC_OK;
}

int silver_writer_put(silver_writer *w, mcdc_batch *b, mcdc_error *err) {
    pthread_mutex_lock(&w->mu);
    while (w->n == SILVER_WRITER_QUEUE && !w->failed) pthread_cond_wait(&w->cv, &w->mu);
    int rc = MCDC_OK;
    if (w->failed) {
        rc = w->rc;
        if (err) *err = w->err;
        mcdc_batch_free(b);
    } else {
        w->q[(w->head + w->n) % SILVER_WRITER_QUEUE] = b;
        w->n++;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int silver_writer_finish(silver_writer *w, mcdc_error *err) {
    if (!w->started) return MCDC_OK;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    w->started = false;
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    if (w->failed && err) *err = w->err;
    return w->failed ? w->rc : MCDC_OK;
}

void silver_writer_free(silver_writer *w) {
    for (int64_t i = 0; i < w->n_paths; i++) mcdc_free(w->paths[i]);
    mcdc_free(w->paths);
    w->paths = NULL;
    w->n_paths = 0;
}
