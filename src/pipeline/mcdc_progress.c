/* mcdc_progress.c - progress of a long job (see mcdc_progress.h). */
#include "mcdc_progress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

struct mcdc_progress_tracker {
    mcdc_progress_fn fn;
    void *user;
    const char *job;
    int64_t interval_us;
    int64_t job_start_us;
    /* Counted by any thread. */
    atomic_llong rows, bytes, parts, job_parts;
    atomic_llong next_due_us; /* no report before this (monotonic) */
    /* Set by the job's thread between phases; read under lock. */
    pthread_mutex_t lock; /* one report at a time */
    const char *phase, *parts_name, *job_parts_name;
    int64_t parts_total, rows_total, job_parts_total;
    bool estimated;
    int64_t phase_start_us;
    int64_t phase_number; /* phases told so far */
    bool finished;
};

int mcdc_progress_create(mcdc_progress_tracker **out, const char *job, mcdc_progress_fn fn,
                         void *user, int64_t interval_ms, mcdc_error *err) {
    MCDC_ASSERT(out && job && interval_ms >= 1);
    *out = NULL;
    if (fn == NULL) return MCDC_OK;
    mcdc_progress_tracker *t = mcdc_calloc(1, sizeof *t);
    if (t == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        mcdc_free(t);
        return mcdc_error_set(err, MCDC_E_NOMEM, "cannot create the progress lock");
    }
    t->fn = fn;
    t->user = user;
    t->job = job;
    t->interval_us = interval_ms * 1000;
    t->job_start_us = t->phase_start_us = mcdc_monotonic_us();
    t->phase = "starting";
    t->parts_total = t->rows_total = t->job_parts_total = -1;
    atomic_init(&t->rows, 0);
    atomic_init(&t->bytes, 0);
    atomic_init(&t->parts, 0);
    atomic_init(&t->job_parts, 0);
    atomic_init(&t->next_due_us, t->job_start_us + t->interval_us);
    *out = t;
    return MCDC_OK;
}

void mcdc_progress_free(mcdc_progress_tracker *t) {
    if (t == NULL) return;
    pthread_mutex_destroy(&t->lock);
    mcdc_free(t);
}

void mcdc_progress_end(mcdc_progress_tracker *t) {
    mcdc_progress_finish(t);
    mcdc_progress_free(t);
}

/* Under t->lock. */
static void tell(mcdc_progress_tracker *t, int64_t now_us, bool done) {
    mcdc_progress p = {
        .version = MCDC_PROGRESS_VERSION,
        .job = t->job,
        .phase = t->phase,
        .rows_done = atomic_load(&t->rows),
        .rows_total = t->rows_total,
        .rows_estimated = t->estimated,
        .parts_name = t->parts_name,
        .parts_done = atomic_load(&t->parts),
        .parts_total = t->parts_total,
        .bytes_done = atomic_load(&t->bytes),
        .phase_ms = (now_us - t->phase_start_us) / 1000,
        .elapsed_ms = (now_us - t->job_start_us) / 1000,
        .done = done,
        .phase_number = t->phase_number,
        .job_parts_name = t->job_parts_name,
        .job_parts_done = atomic_load(&t->job_parts),
        .job_parts_total = t->job_parts_total,
    };
    atomic_store(&t->next_due_us, now_us + t->interval_us);
    t->fn(t->user, &p);
}

/* Tells the counts when the interval has passed and no other thread is
 * telling them now (that thread's report carries these rows too). */
static void tell_if_due(mcdc_progress_tracker *t) {
    int64_t now = mcdc_monotonic_us();
    if (now < atomic_load(&t->next_due_us)) return;
    if (pthread_mutex_trylock(&t->lock) != 0) return;
    if (!t->finished && now >= atomic_load(&t->next_due_us)) tell(t, now, false);
    pthread_mutex_unlock(&t->lock);
}

void mcdc_progress_phase(mcdc_progress_tracker *t, const char *phase, const char *parts_name,
                         int64_t parts_total, int64_t rows_total, bool estimated) {
    if (t == NULL) return;
    MCDC_ASSERT(phase != NULL);
    pthread_mutex_lock(&t->lock);
    if (!t->finished) {
        t->phase = phase;
        t->parts_name = parts_name;
        t->parts_total = parts_total;
        t->rows_total = rows_total;
        t->estimated = estimated && rows_total >= 0;
        atomic_store(&t->rows, 0);
        atomic_store(&t->bytes, 0);
        atomic_store(&t->parts, 0);
        t->phase_start_us = mcdc_monotonic_us();
        t->phase_number++;
        tell(t, t->phase_start_us, false);
    }
    pthread_mutex_unlock(&t->lock);
}

void mcdc_progress_add(mcdc_progress_tracker *t, int64_t rows, int64_t bytes) {
    if (t == NULL) return;
    MCDC_ASSERT(rows >= 0 && bytes >= 0);
    atomic_fetch_add(&t->rows, rows);
    atomic_fetch_add(&t->bytes, bytes);
    tell_if_due(t);
}

void mcdc_progress_part_done(mcdc_progress_tracker *t) {
    mcdc_progress_parts_add(t, 1);
}

void mcdc_progress_parts_add(mcdc_progress_tracker *t, int64_t n) {
    if (t == NULL) return;
    MCDC_ASSERT(n >= 0);
    atomic_fetch_add(&t->parts, n);
    tell_if_due(t);
}

void mcdc_progress_job_parts(mcdc_progress_tracker *t, const char *name, int64_t done,
                             int64_t total) {
    if (t == NULL) return;
    MCDC_ASSERT(name != NULL && done >= 0);
    pthread_mutex_lock(&t->lock);
    t->job_parts_name = name;
    t->job_parts_total = total;
    atomic_store(&t->job_parts, done);
    pthread_mutex_unlock(&t->lock);
}

void mcdc_progress_job_parts_add(mcdc_progress_tracker *t, int64_t n) {
    if (t == NULL) return;
    MCDC_ASSERT(n >= 0);
    atomic_fetch_add(&t->job_parts, n);
    tell_if_due(t);
}

void mcdc_progress_set_total(mcdc_progress_tracker *t, int64_t rows_total) {
    if (t == NULL) return;
    pthread_mutex_lock(&t->lock);
    t->rows_total = rows_total;
    t->estimated = false;
    pthread_mutex_unlock(&t->lock);
}

void mcdc_progress_finish(mcdc_progress_tracker *t) {
    if (t == NULL) return;
    pthread_mutex_lock(&t->lock);
    if (!t->finished) {
        t->finished = true;
        tell(t, mcdc_monotonic_us(), true);
    }
    pthread_mutex_unlock(&t->lock);
}

int64_t mcdc_progress_rows(const mcdc_progress_tracker *t) {
    return t ? atomic_load(&((mcdc_progress_tracker *)t)->rows) : 0;
}
