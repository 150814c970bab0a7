/* Unit tests: the progress tracker (src/pipeline/mcdc_progress.c). */
#include <pthread.h>
#include <stdatomic.h>

#include "mcdc_progress.h"
#include "mcdc_test.h"

typedef struct {
    int calls;
    atomic_int inside;   /* reports running now: never more than one */
    atomic_int overlaps;
    mcdc_progress last;
    char phase[32];
    int done_calls;
} seen;

static void on_progress(void *user, const mcdc_progress *p) {
    seen *s = user;
    if (atomic_fetch_add(&s->inside, 1) != 0) atomic_fetch_add(&s->overlaps, 1);
    s->calls++;
    s->last = *p;
    snprintf(s->phase, sizeof s->phase, "%s", p->phase);
    s->done_calls += p->done;
    atomic_fetch_sub(&s->inside, 1);
}

TEST(progress_without_a_listener_is_no_tracker) {
    mcdc_progress_tracker *t = (mcdc_progress_tracker *)1;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_progress_create(&t, "snapshot", NULL, NULL, 100, &e), MCDC_OK);
    CHECK(t == NULL);
    /* every call takes NULL */
    mcdc_progress_phase(NULL, "reading", "ranges", 4, 100, true);
    mcdc_progress_add(NULL, 10, 10);
    mcdc_progress_part_done(NULL);
    mcdc_progress_finish(NULL);
    CHECK_EQ_INT(mcdc_progress_rows(NULL), 0);
    mcdc_progress_free(NULL);
}

TEST(progress_tells_phases_at_once_counts_at_most_once_an_interval_and_ends_once) {
    seen s;
    memset(&s, 0, sizeof s);
    mcdc_progress_tracker *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_progress_create(&t, "snapshot", on_progress, &s, 60000, &e), MCDC_OK);
    mcdc_progress_phase(t, "reading", "ranges", 4, 1000, true);
    CHECK_EQ_INT(s.calls, 1);
    CHECK_EQ_STR(s.phase, "reading");
    CHECK(s.last.rows_estimated && s.last.rows_total == 1000 && s.last.parts_total == 4);
    CHECK_EQ_STR(s.last.job, "snapshot");
    CHECK_EQ_STR(s.last.parts_name, "ranges");
    /* within the interval: counted, not told */
    mcdc_progress_add(t, 300, 3000);
    mcdc_progress_part_done(t);
    CHECK_EQ_INT(s.calls, 1);
    CHECK_EQ_INT(mcdc_progress_rows(t), 300);
    /* a count replacing the estimate */
    mcdc_progress_set_total(t, 900);
    /* a new phase restarts the counts and is told at once */
    mcdc_progress_phase(t, "committing", NULL, -1, -1, false);
    CHECK_EQ_INT(s.calls, 2);
    CHECK(s.last.rows_done == 0 && s.last.rows_total == -1 && !s.last.rows_estimated);
    mcdc_progress_add(t, 5, 0);
    mcdc_progress_finish(t);
    CHECK_EQ_INT(s.calls, 3);
    CHECK(s.last.done && s.last.rows_done == 5 && s.last.version == MCDC_PROGRESS_VERSION);
    /* nothing after the end */
    mcdc_progress_finish(t);
    mcdc_progress_phase(t, "reading", NULL, -1, -1, false);
    CHECK_EQ_INT(s.calls, 3);
    CHECK_EQ_INT(s.done_calls, 1);
    mcdc_progress_free(t);
}

TEST(progress_reports_when_the_interval_passed) {
    seen s;
    memset(&s, 0, sizeof s);
    mcdc_progress_tracker *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_progress_create(&t, "apply", on_progress, &s, 5, &e), MCDC_OK);
    mcdc_progress_phase(t, "sorting", NULL, -1, 100, false);
    mcdc_sleep_ms(20);
    mcdc_progress_add(t, 7, 70);
    CHECK_EQ_INT(s.calls, 2);
    CHECK(s.last.rows_done == 7 && s.last.bytes_done == 70 && s.last.phase_ms >= 5);
    CHECK(s.last.elapsed_ms >= s.last.phase_ms);
    mcdc_progress_finish(t);
    mcdc_progress_free(t);
}

typedef struct {
    mcdc_progress_tracker *t;
    int batches;
} adder;

static void *add_batches(void *arg) {
    adder *a = arg;
    for (int i = 0; i < a->batches; i++) {
        mcdc_progress_add(a->t, 3, 30);
        if (i % 100 == 0) mcdc_progress_part_done(a->t);
    }
    return NULL;
}

/* Threads add at once: every row is counted, and reports never overlap. */
TEST(progress_from_many_threads_counts_all_and_tells_one_at_a_time) {
    seen s;
    memset(&s, 0, sizeof s);
    mcdc_progress_tracker *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_progress_create(&t, "backfill", on_progress, &s, 1, &e), MCDC_OK);
    mcdc_progress_phase(t, "reading", "chunks", 40, -1, false);
    enum { THREADS = 4, BATCHES = 20000 };
    pthread_t th[THREADS];
    adder a = {t, BATCHES};
    for (int i = 0; i < THREADS; i++) CHECK_EQ_INT(pthread_create(&th[i], NULL, add_batches, &a), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    mcdc_progress_finish(t);
    CHECK_EQ_INT(s.last.rows_done, (int64_t)THREADS * BATCHES * 3);
    CHECK_EQ_INT(s.last.bytes_done, (int64_t)THREADS * BATCHES * 30);
    CHECK_EQ_INT(s.last.parts_done, THREADS * (BATCHES / 100));
    CHECK_EQ_INT(atomic_load(&s.overlaps), 0);
    CHECK(s.done_calls == 1 && s.last.done);
    mcdc_progress_free(t);
}

/* A job's own parts outlive its phases: a backfill's chunks of the whole
 * snapshot, counted from those done before, while each wave is a phase. */
TEST(progress_job_parts_carry_across_phases) {
    seen s;
    memset(&s, 0, sizeof s);
    mcdc_progress_tracker *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_progress_create(&t, "backfill", on_progress, &s, 60000, &e), MCDC_OK);
    mcdc_progress_job_parts(t, "chunks", 3, 10);
    mcdc_progress_phase(t, "reading", "chunks", 4, -1, false);
    CHECK(s.last.job_parts_name && s.last.job_parts_done == 3 && s.last.job_parts_total == 10);
    CHECK(s.last.parts_done == 0 && s.last.phase_number == 1);
    mcdc_progress_part_done(t);
    mcdc_progress_job_parts_add(t, 1);
    mcdc_progress_parts_add(t, 2);
    mcdc_progress_phase(t, "reading", "chunks", 2, -1, false);
    /* the same name again is another phase: a wave after a wave */
    CHECK(s.last.parts_done == 0 && s.last.job_parts_done == 4 && s.last.phase_number == 2);
    mcdc_progress_finish(t);
    CHECK(s.last.done && s.last.job_parts_done == 4 && s.last.job_parts_total == 10);
    mcdc_progress_free(t);
    /* none set: no job parts */
    memset(&s, 0, sizeof s);
    CHECK_EQ_INT(mcdc_progress_create(&t, "snapshot", on_progress, &s, 60000, &e), MCDC_OK);
    mcdc_progress_job_parts(NULL, "chunks", 0, 1);
    mcdc_progress_job_parts_add(NULL, 1);
    mcdc_progress_parts_add(NULL, 5);
    mcdc_progress_finish(t);
    CHECK(s.last.job_parts_name == NULL && s.last.job_parts_total == -1);
    mcdc_progress_free(t);
}
