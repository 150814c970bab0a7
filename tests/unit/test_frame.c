/*
 * test_frame.c - the job frame's protocol on the in-memory storage: a
 * synthetic job (unit n writes keys 10n..10n+9 to its target) killed at
 * every crash point of every unit, storage calls failing one at a time,
 * writes lost after the fact and a foreign writer: after each, a clean rerun
 * leaves every key in the target exactly once and one facts row per unit, or
 * the run stops with the documented error before writing anything wrong.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_facts.h"
#include "mcdc_frame.h"
#include "mcdc_once.h"
#include "mcdc_tables.h"
#include "mcdc_test.h"

#define UNITS 4
#define KEYS_PER_UNIT 10
#define TOY_EVENTS_MAX 256

/* A unit read and not yet published (the toy in halves). */
typedef struct {
    mcdc_appender *a; /* its rows, written, not committed */
    int64_t rows;
} toy_slot;

typedef struct {
    mcdc_schema *schema; /* one column k INT64 */
    /* The toy in halves (read, publish, discard), overlapped or not. */
    bool split, overlap;
    mcdc_table *target;  /* the run's (borrowed) */
    mcdc_ctx *ctx;       /* the run's */
    toy_slot slots[2];
    int64_t read_fails_unit; /* its read fails (a source error), -1 none */
    const char *stop_point;  /* a stop is requested here, of stop_unit */
    int64_t stop_unit;
    /* what happened, in order: "<what> <unit>" (under mu) */
    pthread_mutex_t mu;
    char events[TOY_EVENTS_MAX][32];
    int n_events;
    int reads_ahead, discards;
    /* publish waits until the next unit's read ahead started (overlap
     * certain, whatever the threads' timing) */
    bool await_ahead;
    int plans, idle_waits; /* its plan calls; its idle_wait's (it stops the run) */
    int64_t crash_unit;  /* the unit whose crash_point kills the job, -1 none */
    const char *crash_point;
    int units_run;
    /* At this point of this unit, another process on the same checkpoint
     * runs (a second frame, called from the hook), once. */
    const char *meanwhile_point;
    int64_t meanwhile_unit;
    void (*meanwhile)(void *arg);
    void *meanwhile_arg;
} toy_job;

/* The toy's position: an offset at LSN n (its last byte). */
static void toy_pos(mcdc_pos *p, int64_t n) {
    mcdc_pos_free(p);
    p->kind = MCDC_POS_OFFSET;
    p->offset.lsn = mcdc_lsn_zero();
    p->offset.lsn.b[MCDC_LSN_BYTES - 1] = (uint8_t)n;
}

static int64_t toy_n(const mcdc_pos *p) { return p ? p->offset.lsn.b[MCDC_LSN_BYTES - 1] : 0; }

static int toy_plan(void *job, const mcdc_pos *last, mcdc_pos *start, mcdc_pos *end, bool *idle,
                    mcdc_error *err) {
    toy_job *t = job;
    (void)err;
    t->plans++;
    int64_t n = toy_n(last);
    *idle = n >= UNITS;
    if (*idle) return MCDC_OK;
    toy_pos(start, n);
    toy_pos(end, n + 1);
    return MCDC_OK;
}

static int toy_run(void *job, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                   mcdc_error *err) {
    toy_job *t = job;
    t->units_run++;
    int64_t n = toy_n(u->start);
    res->rows = KEYS_PER_UNIT;
    if (u->data_done) return MCDC_OK;
    mcdc_batch *b = NULL;
    int rc = mcdc_batch_create(&b, t->schema, KEYS_PER_UNIT, err);
    for (int i = 0; rc == MCDC_OK && i < KEYS_PER_UNIT; i++)
        rc = mcdc_col_append_int(&b->columns[0], n * KEYS_PER_UNIT + i, err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    mcdc_appender *a = NULL;
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, mcdc_frame_target(f), t->schema, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, err);
    if (rc == MCDC_OK) rc = mcdc_frame_commit_data(f, u, a, json_pack("{s:I}", "rows", (json_int_t)KEYS_PER_UNIT), NULL, err);
    res->data_committed = rc == MCDC_OK;
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    return rc;
}

static int toy_facts(void *job, const mcdc_unit *u, const mcdc_unit_result *res, mcdc_batch *rows,
                     mcdc_error *err) {
    (void)job;
    mcdc_cell c[MCDC_F_COUNT];
    for (int i = 0; i < MCDC_F_COUNT; i++) c[i] = mcdc_cell_null();
    c[MCDC_F_APP_ID] = mcdc_cell_text("toy");
    c[MCDC_F_BATCH_ID] = mcdc_cell_int(u->id);
    c[MCDC_F_ROWS] = mcdc_cell_int(res->rows);
    return mcdc_row_append(rows, c, err);
}

static void toy_event(toy_job *t, const char *what, int64_t unit) {
    pthread_mutex_lock(&t->mu);
    if (t->n_events < TOY_EVENTS_MAX)
        snprintf(t->events[t->n_events++], sizeof t->events[0], "%s %lld", what, (long long)unit);
    pthread_mutex_unlock(&t->mu);
}

/* The index of event "<what> <unit>", -1 when it did not happen. */
static int toy_when(toy_job *t, const char *what, int64_t unit) {
    char ev[32];
    snprintf(ev, sizeof ev, "%s %lld", what, (long long)unit);
    int at = -1;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < t->n_events && at < 0; i++)
        if (strcmp(t->events[i], ev) == 0) at = i;
    pthread_mutex_unlock(&t->mu);
    return at;
}

/* The toy in halves: read makes the unit's rows and (once the unit before
 * is published, when read ahead: it writes through the target's handle)
 * writes them, uncommitted; publish commits them. */
static int toy_read(void *job, int slot, const mcdc_unit *u, mcdc_frame_gate *gate,
                    mcdc_error *err) {
    toy_job *t = job;
    toy_slot *sl = &t->slots[slot];
    if (sl->a != NULL) /* published or discarded before */
        return mcdc_error_set(err, MCDC_E_INVALID, "toy: slot %d still holds a unit", slot);
    toy_event(t, gate ? "ahead" : "read", u->id);
    if (gate) {
        pthread_mutex_lock(&t->mu);
        t->reads_ahead++;
        pthread_mutex_unlock(&t->mu);
    }
    if (u->id == t->read_fails_unit)
        return mcdc_error_set(err, MCDC_E_IO, "toy: the source failed reading unit %lld",
                              (long long)u->id);
    int64_t n = toy_n(u->start);
    sl->rows = KEYS_PER_UNIT;
    if (u->data_done) return MCDC_OK;
    int rc = mcdc_frame_gate_wait(gate, err);
    if (rc) return rc;
    if (gate) toy_event(t, "gate", u->id);
    mcdc_batch *b = NULL;
    rc = mcdc_batch_create(&b, t->schema, KEYS_PER_UNIT, err);
    for (int i = 0; rc == MCDC_OK && i < KEYS_PER_UNIT; i++)
        rc = mcdc_col_append_int(&b->columns[0], n * KEYS_PER_UNIT + i, err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    if (rc == MCDC_OK) rc = mcdc_appender_open(&sl->a, t->target, t->schema, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(sl->a, b, err);
    mcdc_batch_free(b);
    return rc;
}

static int toy_publish(void *job, int slot, mcdc_frame *f, const mcdc_unit *u,
                       mcdc_unit_result *res, mcdc_error *err) {
    toy_job *t = job;
    toy_slot *sl = &t->slots[slot];
    for (int i = 0; t->await_ahead && u->id + 1 < UNITS && i < 5000 &&
                    toy_when(t, "ahead", u->id + 1) < 0;
         i++)
        mcdc_sleep_ms(1);
    toy_event(t, "publish", u->id);
    t->units_run++;
    res->rows = sl->rows;
    int rc = MCDC_OK;
    if (!u->data_done) {
        rc = mcdc_frame_commit_data(f, u, sl->a, json_pack("{s:I}", "rows", (json_int_t)sl->rows),
                                    NULL, err);
        res->data_committed = rc == MCDC_OK;
    }
    mcdc_appender_free(sl->a);
    sl->a = NULL;
    return rc;
}

static void toy_discard(void *job, int slot) {
    toy_job *t = job;
    toy_slot *sl = &t->slots[slot];
    pthread_mutex_lock(&t->mu);
    t->discards++;
    pthread_mutex_unlock(&t->mu);
    mcdc_appender_free(sl->a); /* deletes its files: nothing committed them */
    sl->a = NULL;
}

static bool toy_crash(void *user, const char *point, int64_t unit) {
    toy_job *t = user;
    toy_event(t, point, unit);
    if (t->stop_point && unit == t->stop_unit && strcmp(point, t->stop_point) == 0)
        atomic_store(&t->ctx->stop, 1);
    if (t->meanwhile && unit == t->meanwhile_unit && strcmp(point, t->meanwhile_point) == 0) {
        void (*fn)(void *) = t->meanwhile;
        t->meanwhile = NULL;
        fn(t->meanwhile_arg);
    }
    return t->crash_point && unit == t->crash_unit && strcmp(point, t->crash_point) == 0;
}

static const mcdc_job_ops TOY_OPS = {.kind = "toy", .pos_kind = MCDC_POS_OFFSET,
                                     .plan = toy_plan, .run = toy_run, .facts = toy_facts};
static const mcdc_job_ops TOY_SPLIT_OPS = {.kind = "toy", .pos_kind = MCDC_POS_OFFSET,
                                           .plan = toy_plan, .read = toy_read,
                                           .publish = toy_publish, .discard = toy_discard,
                                           .facts = toy_facts};

/* A continuous toy's idle wait: counted, and the run stops. */
static void toy_idle_wait(void *job) {
    toy_job *t = job;
    t->idle_waits++;
    atomic_store(&t->ctx->stop, 1);
}
static const mcdc_job_ops TOY_SPLIT_IDLE_OPS = {.kind = "toy", .pos_kind = MCDC_POS_OFFSET,
                                                .plan = toy_plan, .read = toy_read,
                                                .publish = toy_publish, .discard = toy_discard,
                                                .idle_wait = toy_idle_wait, .facts = toy_facts};

typedef struct {
    mcdc_storage_mem *mem;
    mcdc_storage_env env;
    toy_job job;
    int64_t max_units;    /* 0: every unit */
    int64_t second_units; /* the second process's max_units */
    bool continuous;      /* not stop_when_idle: idle waits (toy_idle_wait stops it) */
    mcdc_budget *budget;  /* shared with other jobs; NULL: none */
} toy_world;

static void world_init(toy_world *w) {
    memset(w, 0, sizeof *w);
    mcdc_storage_mem_create(&w->mem, "lake", NULL);
    w->env = mcdc_storage_mem_env(w->mem);
    mcdc_schema_create(&w->job.schema, 1, NULL);
    mcdc_schema_set(w->job.schema, 0, "k", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    w->job.crash_unit = -1;
    w->job.read_fails_unit = -1;
    pthread_mutex_init(&w->job.mu, NULL);
}

/* The toy in halves, its next unit read while one publishes. */
static void world_overlap(toy_world *w) {
    w->job.split = w->job.overlap = true;
}

static void world_free(toy_world *w) {
    pthread_mutex_destroy(&w->job.mu);
    mcdc_schema_unref(w->job.schema);
    mcdc_storage_mem_release(w->mem);
}

/* One run of the frame over mem://lake/{target,facts,ckpt}. */
static int run_frame(toy_world *w, const char *app_id, mcdc_error *err) {
    mcdc_ctx ctx = {.storage_env = &w->env, .budget = w->budget, .crash_fn = toy_crash,
                    .crash_user = &w->job};
    mcdc_table *target = NULL, *facts = NULL;
    int rc = mcdc_table_open_env(&target, &w->env, "mem://lake/target", NULL, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&facts, &w->env, "mem://lake/facts", NULL, err);
    char facts_app[64];
    snprintf(facts_app, sizeof facts_app, "%s#facts", app_id);
    mcdc_frame_cfg cfg = {.ctx = &ctx,
                          .checkpoint = "mem://lake/ckpt",
                          .binding = {.job = "toy", .app_id = app_id, .target = "mem://lake/target",
                                      .facts_table = "mem://lake/facts"},
                          .target = target,
                          .app_id = app_id,
                          .facts = facts,
                          .facts_app_id = facts_app,
                          .stop_when_idle = !w->continuous,
                          .idle_poll_ms = 1,
                          .max_units = w->max_units,
                          .overlap = w->job.overlap};
    w->job.target = target;
    w->job.ctx = &ctx;
    w->job.n_events = 0;
    if (rc == MCDC_OK)
        rc = mcdc_frame_run(&cfg,
                            w->continuous ? &TOY_SPLIT_IDLE_OPS
                            : w->job.split ? &TOY_SPLIT_OPS
                                           : &TOY_OPS,
                            &w->job, err);
    /* every slot published or discarded */
    CHECK(w->job.slots[0].a == NULL && w->job.slots[1].a == NULL);
    w->job.target = NULL;
    w->job.ctx = NULL;
    mcdc_table_close(target);
    mcdc_table_close(facts);
    return rc;
}

/* Every key once in the target, one facts row per unit. */
static void check_exactly_once(toy_world *w, int units) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t = NULL;
    mcdc_batch *all = NULL;
    int64_t v;
    CHECK_EQ_INT(mcdc_table_open_env(&t, &w->env, "mem://lake/target", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &v, &e), MCDC_OK);
    int seen[UNITS * KEYS_PER_UNIT] = {0};
    bool in_range = true;
    for (int64_t r = 0; all && r < all->rows; r++) {
        int64_t k = mcdc_row_get(all, r, 0).i;
        if (k < 0 || k >= UNITS * KEYS_PER_UNIT) in_range = false;
        else seen[k]++;
    }
    CHECK(in_range);
    int once = 0;
    for (int k = 0; k < units * KEYS_PER_UNIT; k++) once += seen[k] == 1;
    CHECK_EQ_INT(once, units * KEYS_PER_UNIT);
    CHECK_EQ_INT(all ? all->rows : 0, units * KEYS_PER_UNIT);
    mcdc_batch_free(all);
    mcdc_table_close(t);
    CHECK_EQ_INT(mcdc_table_open_env(&t, &w->env, "mem://lake/facts", NULL, &e), MCDC_OK);
    all = NULL;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &v, &e), MCDC_OK);
    CHECK_EQ_INT(all ? all->rows : 0, units);
    int per_unit[UNITS] = {0};
    for (int64_t r = 0; all && r < all->rows; r++) {
        int64_t id = mcdc_row_get(all, r, MCDC_F_BATCH_ID).i;
        if (id >= 0 && id < UNITS) per_unit[id]++;
    }
    for (int u = 0; u < units; u++) CHECK_EQ_INT(per_unit[u], 1);
    mcdc_batch_free(all);
    mcdc_table_close(t);
}

/* The same whether the job runs a unit whole, in halves, or in halves
 * overlapped (mode 0, 1, 2). */
TEST(frame_killed_at_every_crash_point_of_every_unit_replays_exactly_once) {
    static const char *const points[] = {"after_plan", "after_bronze", "after_facts",
                                         "after_commit"};
    for (int mode = 0; mode < 3; mode++)
    for (size_t p = 0; p < sizeof points / sizeof points[0]; p++)
        for (int u = 0; u < UNITS; u++) {
            toy_world w;
            world_init(&w);
            w.job.split = mode >= 1;
            w.job.overlap = mode == 2;
            mcdc_error e = MCDC_ERROR_INIT;
            w.job.crash_point = points[p];
            w.job.crash_unit = u;
            CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_E_CANCELLED);
            w.job.crash_point = NULL;
            int rc = run_frame(&w, "toy", &e);
            CHECK_EQ_INT(rc, MCDC_OK);
            if (rc) printf("  %s:%d: %s\n", points[p], u, e.message);
            check_exactly_once(&w, UNITS);
            world_free(&w);
        }
}

/* Overlap: unit n+1 is read while unit n publishes; its plan is recorded
 * only after n's commit marker, and it publishes after: the same rows,
 * commits in order. */
TEST(frame_overlap_reads_the_next_unit_while_one_publishes_and_records_it_after) {
    toy_world w;
    world_init(&w);
    world_overlap(&w);
    w.job.await_ahead = true;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = run_frame(&w, "toy", &e);
    CHECK_EQ_INT(rc, MCDC_OK);
    if (rc) printf("  %s\n", e.message);
    check_exactly_once(&w, UNITS);
    toy_job *t = &w.job;
    CHECK_EQ_INT(t->reads_ahead, UNITS - 1);
    CHECK_EQ_INT(t->discards, 0);
    CHECK(toy_when(t, "read", 0) >= 0);
    for (int64_t n = 1; n < UNITS; n++) {
        int ahead = toy_when(t, "ahead", n), gate = toy_when(t, "gate", n);
        int published = toy_when(t, "publish", n - 1);
        int committed = toy_when(t, "after_commit", n - 1);
        int planned = toy_when(t, "after_plan", n), pub = toy_when(t, "publish", n);
        CHECK(ahead >= 0 && gate >= 0 && published >= 0 && committed >= 0 && planned >= 0);
        CHECK(ahead < published);   /* read while the unit before published */
        CHECK(committed < gate);    /* it waited for that publish to write */
        CHECK(committed < planned); /* its plan written after the commit marker */
        CHECK(planned < pub);
        CHECK(toy_when(t, "publish", n - 1) < pub); /* in order */
        CHECK(toy_when(t, "read", n) < 0);          /* read once */
    }
    world_free(&w);
}

/* Overlap: the plan made while the last unit published found nothing new;
 * the run does not plan again at once (a caught-up stream's second max_lsn
 * query a batch): it stops (stop_when_idle), or waits a poll first. One
 * plan a unit and one idle, as without overlap. */
TEST(frame_overlap_an_idle_plan_ahead_is_not_planned_again_at_once) {
    for (int mode = 0; mode < 3; mode++) {
        toy_world w;
        world_init(&w);
        w.job.split = mode != 0;
        w.job.overlap = mode != 0;
        w.continuous = mode == 2;
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
        check_exactly_once(&w, UNITS);
        CHECK_EQ_INT(w.job.plans, UNITS + 1);
        CHECK_EQ_INT(w.job.reads_ahead, mode != 0 ? UNITS - 1 : 0);
        CHECK_EQ_INT(w.job.idle_waits, mode == 2 ? 1 : 0);
        world_free(&w);
    }
}

/* A kill during unit u's publish (or its plan's record) while u+1 is read
 * ahead: the read is discarded, nothing of u+1 planned; the rerun replays u
 * from its plan and every row is there once. */
TEST(frame_overlap_killed_while_the_next_unit_is_read_replays_exactly_once) {
    static const char *const points[] = {"after_plan", "after_bronze", "after_facts",
                                         "after_commit"};
    for (size_t p = 0; p < sizeof points / sizeof points[0]; p++)
        for (int u = 0; u < UNITS; u++) {
            toy_world w;
            world_init(&w);
            world_overlap(&w);
            w.job.await_ahead = true;
            mcdc_error e = MCDC_ERROR_INIT;
            w.job.crash_point = points[p];
            w.job.crash_unit = u;
            CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_E_CANCELLED);
            bool at_plan = strcmp(points[p], "after_plan") == 0;
            if (!at_plan && u + 1 < UNITS) {
                CHECK(toy_when(&w.job, "ahead", u + 1) >= 0);
                CHECK(toy_when(&w.job, "after_plan", u + 1) < 0);
                CHECK_EQ_INT(w.job.discards, 1);
            }
            if (at_plan) CHECK_EQ_INT(w.job.discards, u > 0 ? 1 : 0);
            w.job.crash_point = NULL;
            w.job.discards = 0;
            int rc = run_frame(&w, "toy", &e);
            CHECK_EQ_INT(rc, MCDC_OK);
            if (rc) printf("  %s:%d: %s\n", points[p], u, e.message);
            check_exactly_once(&w, UNITS);
            CHECK_EQ_INT(w.job.discards, 0);
            world_free(&w);
        }
}

/* A stop request during a publish: that unit finishes, the one read ahead
 * is given up (not planned, nothing of it committed); a rerun goes on. */
TEST(frame_overlap_stop_gives_up_the_unit_read_ahead) {
    toy_world w;
    world_init(&w);
    world_overlap(&w);
    w.job.await_ahead = true;
    w.job.stop_point = "after_facts";
    w.job.stop_unit = 1;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
    CHECK(toy_when(&w.job, "ahead", 2) >= 0);
    CHECK(toy_when(&w.job, "gate", 2) < 0);
    CHECK(toy_when(&w.job, "after_plan", 2) < 0);
    CHECK_EQ_INT(w.job.discards, 1);
    check_exactly_once(&w, 2);
    w.job.stop_point = NULL;
    w.job.await_ahead = false;
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
    check_exactly_once(&w, UNITS);
    world_free(&w);
}

/* The source fails reading unit 2 ahead: unit 1, publishing meanwhile, is
 * committed whole, then the run stops with the read's error, unit 2 not
 * planned; a rerun reads it again. */
TEST(frame_overlap_a_failed_read_ahead_fails_after_the_unit_before_committed) {
    toy_world w;
    world_init(&w);
    world_overlap(&w);
    w.job.read_fails_unit = 2;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_E_IO);
    CHECK(strstr(e.message, "reading unit 2") != NULL);
    CHECK(toy_when(&w.job, "after_commit", 1) >= 0);
    CHECK(toy_when(&w.job, "after_plan", 2) < 0);
    CHECK_EQ_INT(w.job.discards, 1);
    check_exactly_once(&w, 2);
    w.job.read_fails_unit = -1;
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
    check_exactly_once(&w, UNITS);
    world_free(&w);
}

typedef struct {
    toy_world *w;
    int rc;
    mcdc_error e;
} frame_thread;

static void *run_frame_thread(void *arg) {
    frame_thread *t = arg;
    t->rc = run_frame(t->w, "toy", &t->e);
    return NULL;
}

/* A job sharing a budget commits its facts rows in the budget's facts
 * turn: while another job holds it, the frame waits (its facts row is not
 * written), and goes on once it is free. */
TEST(frame_commits_its_facts_in_the_budgets_facts_turn) {
    toy_world w;
    world_init(&w);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_budget_create(&w.budget, 4, 2, &e), MCDC_OK);
    int held = 0;
    CHECK_EQ_INT(mcdc_budget_acquire(w.budget, MCDC_PERMIT_FACTS, 1, 1, 0, NULL, &held, &e),
                 MCDC_OK);
    frame_thread t = {&w, -1, MCDC_ERROR_INIT};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, run_frame_thread, &t) == 0);
    for (int i = 0; i < 5000 && mcdc_budget_waiting(w.budget, MCDC_PERMIT_FACTS) != 1; i++)
        mcdc_sleep_ms(1);
    CHECK_EQ_INT(mcdc_budget_waiting(w.budget, MCDC_PERMIT_FACTS), 1);
    mcdc_budget_release(w.budget, MCDC_PERMIT_FACTS, held);
    pthread_join(th, NULL);
    CHECK_EQ_INT(t.rc, MCDC_OK);
    check_exactly_once(&w, UNITS);
    /* one at a time, and each turn given back */
    CHECK_EQ_INT(mcdc_budget_peak(w.budget, MCDC_PERMIT_FACTS), 1);
    CHECK_EQ_INT(mcdc_budget_acquire(w.budget, MCDC_PERMIT_FACTS, 1, 1, 0, NULL, &held, &e),
                 MCDC_OK);
    mcdc_budget_release(w.budget, MCDC_PERMIT_FACTS, held);
    mcdc_budget_free(w.budget);
    world_free(&w);
}

/* Fail the nth storage call of a run, for every n until a run passes
 * untouched: each failure is a clean error (or a fault the protocol rides
 * over), and a clean rerun then leaves everything exactly once. */
/* every: fail every how many calls (the overlapped run's calls are the
 * same ones, in the same order: its read ahead writes after the gate) */
static void survive_every_single_storage_failure(bool overlap, int every) {
    int failures = 0, clean = 0;
    /* a commit that is published and then cannot be read back only warns */
    const mcdc_log_sink *prev = mcdc_log_use(&mcdc_test_quiet);
    for (int64_t n = 1; n < 2000; n += every * mcdc_test_fault_step) {
        toy_world w;
        world_init(&w);
        if (overlap) world_overlap(&w);
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_storage_mem_fail_nth(w.mem, MCDC_STORAGE_OP_ANY, n, MCDC_E_IO);
        int rc = run_frame(&w, "toy", &e);
        bool fired = mcdc_storage_mem_fault_fired(w.mem);
        mcdc_storage_mem_fail_nth(w.mem, MCDC_STORAGE_OP_ANY, 0, MCDC_E_IO);
        if (!fired) {
            CHECK_EQ_INT(rc, MCDC_OK);
            check_exactly_once(&w, UNITS);
            world_free(&w);
            clean++;
            break;
        }
        failures += rc != MCDC_OK;
        CHECK(rc == MCDC_OK || rc == MCDC_E_IO);
        rc = run_frame(&w, "toy", &e);
        CHECK_EQ_INT(rc, MCDC_OK);
        if (rc) printf("  failing call %lld, rerun: %s\n", (long long)n, e.message);
        check_exactly_once(&w, UNITS);
        world_free(&w);
    }
    mcdc_log_use(prev);
    CHECK_EQ_INT(clean, 1);
    CHECK(failures * every * mcdc_test_fault_step > 20); /* the loop did reach the commits */
}

TEST(frame_survives_every_single_storage_failure) {
    survive_every_single_storage_failure(false, 1);
}

/* Overlapped: a failed publish of unit n discards n+1's read ahead (every
 * third call: the calls are those above). */
TEST(frame_overlap_survives_every_third_storage_failure) {
    survive_every_single_storage_failure(true, 3);
}

TEST(frame_lost_writes_are_target_or_facts_behind_never_a_gap) {
    /* the target loses its last commit (a restored older backup) */
    toy_world w;
    world_init(&w);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
    mcdc_storage *st = NULL;
    CHECK_EQ_INT(mcdc_storage_mem_open(&st, w.mem, "target", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_delete(st, "_delta_log/00000000000000000004.json", &e), MCDC_OK);
    mcdc_storage_free(st);
    /* the frame must refuse before the next unit */
    int rc = run_frame(&w, "toy", &e);
    CHECK_EQ_INT(rc, MCDC_E_TARGET_BEHIND);
    CHECK(strstr(e.message, "Restore the target's missing commits") != NULL);
    world_free(&w);

    /* the facts lose a committed unit's row */
    world_init(&w);
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_mem_open(&st, w.mem, "facts", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_delete(st, "_delta_log/00000000000000000004.json", &e), MCDC_OK);
    mcdc_storage_free(st);
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_E_FACTS_BEHIND);
    world_free(&w);

    /* the checkpoint loses its last commit marker: a replay the tables
     * already hold, skipped because they name this checkpoint and range */
    world_init(&w);
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_mem_open(&st, w.mem, "ckpt", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_delete(st, "commits/3", &e), MCDC_OK);
    mcdc_storage_free(st);
    w.job.units_run = 0;
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
    CHECK_EQ_INT(w.job.units_run, 1);
    check_exactly_once(&w, UNITS);
    world_free(&w);
}

/* Another program commits one row under txn(app, v) to the target. */
static void foreign_commit(toy_world *w, const char *app, int64_t v) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t = NULL;
    mcdc_appender *a = NULL;
    mcdc_batch *b = NULL;
    CHECK_EQ_INT(mcdc_table_open_env(&t, &w->env, "mem://lake/target", NULL, &e), MCDC_OK);
    mcdc_batch_create(&b, w->job.schema, 1, &e);
    mcdc_col_append_int(&b->columns[0], 999, &e);
    mcdc_batch_seal(b, &e);
    CHECK_EQ_INT(mcdc_appender_open(&a, t, w->job.schema, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_write(a, b, &e), MCDC_OK);
    bool skipped;
    int64_t version;
    CHECK_EQ_INT(mcdc_appender_commit(a, app, v, NULL, &skipped, &version, &e), MCDC_OK);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_table_close(t);
}

TEST(frame_refuses_a_foreign_writer_and_a_rewound_checkpoint) {
    toy_world w;
    world_init(&w);
    mcdc_error e = MCDC_ERROR_INIT;
    w.job.crash_point = "after_plan";
    w.job.crash_unit = 2;
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_E_CANCELLED);
    w.job.crash_point = NULL;
    /* another program commits unit 5 of the same app id */
    foreign_commit(&w, "toy", 5);
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_E_FOREIGN_WRITER);
    world_free(&w);

    /* the checkpoint deleted: the tables hold the app id's units */
    world_init(&w);
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
    mcdc_storage *st = NULL;
    CHECK_EQ_INT(mcdc_storage_mem_open(&st, w.mem, "ckpt", &e), MCDC_OK);
    mcdc_storage_listing l = {0};
    for (const char *dir = "offsets/"; dir; dir = strcmp(dir, "offsets/") == 0 ? "commits/" : NULL) {
        mcdc_storage_list(st, dir, &l, &e);
        for (size_t i = 0; i < l.count; i++) {
            char key[64];
            snprintf(key, sizeof key, "%s%s", dir, l.entries[i].name);
            mcdc_storage_delete(st, key, &e);
        }
        mcdc_storage_listing_free(&l);
    }
    mcdc_storage_delete(st, "metadata", &e);
    mcdc_storage_free(st);
    CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_E_REWOUND);
    CHECK(strstr(e.message, "a new app id AND a new (or rebuilt) target") != NULL);
    world_free(&w);
}

/* A second process on the checkpoint, where its storage has no locks: it
 * runs one unit (or every unit left) while the first is at a crash point. */
static void second_process(void *arg) {
    toy_world *w = arg;
    mcdc_error e = MCDC_ERROR_INIT;
    w->max_units = w->second_units;
    CHECK_EQ_INT(run_frame(w, "toy", &e), MCDC_OK);
    w->max_units = 0;
}

TEST(frame_reads_a_second_process_on_its_checkpoint_as_one) {
    /* the other commits units this run has not seen (it used to read as a
     * rewound checkpoint, exit 9), the unit this run is writing (taken for
     * this run's own replay), or runs ahead of it */
    static const struct {
        const char *point;
        int64_t unit, units;
        const char *says;
    } cases[] = {{"after_commit", 0, 0, "while this run, at unit 0, was not looking"},
                 {"after_plan", 1, 1, "to target mem://lake/target while this run was writing"},
                 {"after_bronze", 1, 1, "to facts table mem://lake/facts while this run was"},
                 {"after_plan", 1, 0, "past unit 1 this run was writing"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        toy_world w;
        world_init(&w);
        mcdc_error e = MCDC_ERROR_INIT;
        w.job.meanwhile_point = cases[i].point;
        w.job.meanwhile_unit = cases[i].unit;
        w.job.meanwhile = second_process;
        w.job.meanwhile_arg = &w;
        w.second_units = cases[i].units;
        CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_E_FOREIGN_WRITER);
        CHECK(strstr(e.message, "another process is running on checkpoint mem://lake/ckpt") != NULL);
        CHECK(strstr(e.message, cases[i].says) != NULL);
        CHECK(strstr(e.message, "rewound") == NULL);
        /* the first stopped; a rerun finishes the job, every key once */
        e = (mcdc_error)MCDC_ERROR_INIT;
        CHECK_EQ_INT(run_frame(&w, "toy", &e), MCDC_OK);
        check_exactly_once(&w, UNITS);
        world_free(&w);
    }
}

/* A fresh checkpoint whose job is idle at first: while it waits, another
 * program commits a unit of the same app id to the target. The check before
 * the first unit must stop the job with that finding, before the unit is
 * planned: the job's own check of a fresh start (which passes) must not
 * replace it. */
typedef struct {
    toy_world *w;
    int plans;
} idle_job;

static int idle_then_foreign_plan(void *job, const mcdc_pos *last, mcdc_pos *start,
                                  mcdc_pos *end, bool *idle, mcdc_error *err) {
    idle_job *j = job;
    if (j->plans++ == 0) {
        mcdc_table *t = NULL;
        mcdc_appender *a = NULL;
        mcdc_batch *b = NULL;
        bool skipped;
        int64_t v;
        int rc = mcdc_table_open_env(&t, &j->w->env, "mem://lake/target", NULL, err);
        if (rc == MCDC_OK) rc = mcdc_batch_create(&b, j->w->job.schema, 1, err);
        if (rc == MCDC_OK) rc = mcdc_col_append_int(&b->columns[0], 999, err);
        if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
        if (rc == MCDC_OK) rc = mcdc_appender_open(&a, t, j->w->job.schema, NULL, err);
        if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, err);
        if (rc == MCDC_OK) rc = mcdc_appender_commit(a, "toy", 0, NULL, &skipped, &v, err);
        mcdc_appender_free(a);
        mcdc_batch_free(b);
        mcdc_table_close(t);
        *idle = true;
        return rc;
    }
    return toy_plan(&j->w->job, last, start, end, idle, err);
}

static int fresh_ok(void *job, const mcdc_pos *start, mcdc_error *err) {
    (void)job;
    (void)start;
    (void)err;
    return MCDC_OK;
}

static int idle_run(void *job, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                    mcdc_error *err) {
    idle_job *j = job;
    return toy_run(&j->w->job, f, u, res, err);
}

TEST(frame_integrity_failure_after_an_idle_poll_of_a_fresh_checkpoint_stops_the_job) {
    toy_world w;
    world_init(&w);
    idle_job j = {.w = &w};
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_ctx ctx = {.storage_env = &w.env};
    mcdc_table *target = NULL, *facts = NULL;
    CHECK_EQ_INT(mcdc_table_open_env(&target, &w.env, "mem://lake/target", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_open_env(&facts, &w.env, "mem://lake/facts", NULL, &e), MCDC_OK);
    mcdc_frame_cfg cfg = {.ctx = &ctx,
                          .checkpoint = "mem://lake/ckpt",
                          .binding = {.job = "toy", .app_id = "toy", .target = "mem://lake/target",
                                      .facts_table = "mem://lake/facts"},
                          .target = target,
                          .app_id = "toy",
                          .facts = facts,
                          .facts_app_id = "toy#facts",
                          .idle_poll_ms = 1,
                          .max_units = 1};
    mcdc_job_ops ops = {.kind = "toy", .pos_kind = MCDC_POS_OFFSET,
                        .plan = idle_then_foreign_plan, .check_fresh = fresh_ok,
                        .run = idle_run, .facts = toy_facts};
    int rc = mcdc_frame_run(&cfg, &ops, &j, &e);
    CHECK_EQ_INT(rc, MCDC_E_REWOUND);
    CHECK_EQ_INT(j.plans, 2);
    /* nothing was planned: the checkpoint holds no offsets/0 */
    mcdc_storage *st = NULL;
    int64_t bytes = 0;
    CHECK_EQ_INT(mcdc_storage_mem_open(&st, w.mem, "ckpt", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_size(st, "offsets/0", &bytes, &e), MCDC_E_NOTFOUND);
    mcdc_storage_free(st);
    mcdc_table_close(target);
    mcdc_table_close(facts);
    world_free(&w);
}

/* A checkpoint and the commits of its units as an earlier build wrote them
 * (the JSON texts of mcdc_checkpoint.c and of the frame's userMetadata,
 * with the toy's offsets as positions): unit 0 committed, unit 1 planned
 * and in the target, killed before its facts row. The frame reads both,
 * takes unit 1's commit for its own replay (not another writer's) and
 * finishes the job with every key once. */
static void put_text(mcdc_storage *st, const char *key, const char *text) {
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_put(st, key, text, strlen(text), &e), MCDC_OK);
}

static void put_unit(toy_world *w, const char *table, const char *app, int64_t n,
                     const char *um) {
    mcdc_error e = MCDC_ERROR_INIT;
    char path[64];
    snprintf(path, sizeof path, "mem://lake/%s", table);
    mcdc_table *t = NULL;
    mcdc_appender *a = NULL;
    mcdc_batch *b = NULL;
    bool skipped;
    int64_t v;
    bool facts = strcmp(table, "facts") == 0;
    mcdc_schema *fs = NULL;
    if (facts) mcdc_facts_schema(&fs, &e);
    mcdc_schema *s = facts ? fs : w->job.schema;
    CHECK_EQ_INT(mcdc_table_open_env(&t, &w->env, path, NULL, &e), MCDC_OK);
    mcdc_batch_create(&b, s, KEYS_PER_UNIT, &e);
    if (facts) {
        mcdc_unit u = {.id = n};
        mcdc_unit_result r = {.rows = KEYS_PER_UNIT};
        CHECK_EQ_INT(toy_facts(&w->job, &u, &r, b, &e), MCDC_OK);
    } else {
        for (int i = 0; i < KEYS_PER_UNIT; i++) mcdc_col_append_int(&b->columns[0], n * KEYS_PER_UNIT + i, &e);
    }
    mcdc_batch_seal(b, &e);
    mcdc_table_props props = {.kind = facts ? MCDC_KIND_FACTS : MCDC_KIND_NONE};
    CHECK_EQ_INT(mcdc_appender_open(&a, t, s, &props, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_write(a, b, &e), MCDC_OK);
    mcdc_table_commit c = {.app_id = app, .txn_version = n, .user_metadata = um, .read_version = -1};
    CHECK_EQ_INT(mcdc_appender_commit_with(a, &c, &skipped, &v, &e), MCDC_OK);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(fs);
    mcdc_table_close(t);
}

TEST(frame_continues_a_checkpoint_and_commits_an_earlier_build_wrote) {
    toy_world w;
    world_init(&w);
    mcdc_storage *st = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_mem_open(&st, w.mem, "ckpt", &e), MCDC_OK);
    put_text(st, "metadata",
             "{\"app_id\":\"toy\",\"created\":\"2026-12-01T14:00:00.000\",\"facts_table\":"
             "\"mem://lake/facts\",\"format\":1,\"id\":\"0f6c1e0e-5b8e-4c4e-9d3e-2a1b3c4d5e6f\","
             "\"job\":\"toy\",\"target\":\"mem://lake/target\"}");
    put_text(st, "offsets/0",
             "{\"batch_id\":0,\"end\":{\"commit_ts\":\"\",\"lsn\":\"0x00000000000000000001\"},"
             "\"start\":{\"commit_ts\":\"\",\"lsn\":\"0x00000000000000000000\"}}");
    put_text(st, "commits/0", "{\"batch_id\":0,\"data_txn\":0,\"rows\":10}");
    put_text(st, "offsets/1",
             "{\"batch_id\":1,\"end\":{\"commit_ts\":\"\",\"lsn\":\"0x00000000000000000002\"},"
             "\"start\":{\"commit_ts\":\"\",\"lsn\":\"0x00000000000000000001\"}}");
    mcdc_storage_free(st);
    put_unit(&w, "target", "toy", 0,
             "{\"rows\":10,\"planned\":{\"start\":{\"lsn\":\"0x00000000000000000000\",\"commit_ts\":"
             "\"\"},\"end\":{\"lsn\":\"0x00000000000000000001\",\"commit_ts\":\"\"}},"
             "\"checkpoint_id\":\"0f6c1e0e-5b8e-4c4e-9d3e-2a1b3c4d5e6f\"}");
    put_unit(&w, "facts", "toy#facts", 0,
             "{\"app_id\":\"toy\",\"batch_id\":0,\"planned\":{\"start\":{\"lsn\":"
             "\"0x00000000000000000000\",\"commit_ts\":\"\"},\"end\":{\"lsn\":"
             "\"0x00000000000000000001\",\"commit_ts\":\"\"}},\"checkpoint_id\":"
             "\"0f6c1e0e-5b8e-4c4e-9d3e-2a1b3c4d5e6f\"}");
    put_unit(&w, "target", "toy", 1,
             "{\"rows\":10,\"planned\":{\"start\":{\"lsn\":\"0x00000000000000000001\",\"commit_ts\":"
             "\"\"},\"end\":{\"lsn\":\"0x00000000000000000002\",\"commit_ts\":\"\"}},"
             "\"checkpoint_id\":\"0f6c1e0e-5b8e-4c4e-9d3e-2a1b3c4d5e6f\"}");
    w.job.units_run = 0;
    int rc = run_frame(&w, "toy", &e);
    CHECK_EQ_INT(rc, MCDC_OK);
    if (rc) printf("  %s\n", e.message);
    CHECK_EQ_INT(w.job.units_run, UNITS - 1); /* unit 1 again (its data held), then 2 and 3 */
    check_exactly_once(&w, UNITS);
    world_free(&w);
}

/* ---- a job of one unit on a lake ledger (mcdc_once.h) ------------------------------ */

typedef struct {
    toy_world *w;
    int plans, runs, idle_plans;
} once_job;

static int once_plan(void *job, const mcdc_pos *last, mcdc_pos *start, mcdc_pos *end, bool *idle,
                     mcdc_error *err) {
    once_job *j = job;
    (void)err;
    j->plans++;
    *idle = last != NULL; /* recorded: done */
    j->idle_plans += *idle;
    if (*idle) return MCDC_OK;
    start->kind = end->kind = MCDC_POS_STAMP;
    end->stamp.has_lsn = true;
    end->stamp.lsn.b[MCDC_LSN_BYTES - 1] = 5;
    return MCDC_OK;
}

static int once_run(void *job, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                    mcdc_error *err) {
    once_job *j = job;
    j->runs++;
    /* the toy's keys 0..9, in one commit of the unit */
    res->rows = KEYS_PER_UNIT;
    if (u->data_done) return MCDC_OK;
    mcdc_batch *b = NULL;
    int rc = mcdc_batch_create(&b, j->w->job.schema, KEYS_PER_UNIT, err);
    for (int i = 0; rc == MCDC_OK && i < KEYS_PER_UNIT; i++)
        rc = mcdc_col_append_int(&b->columns[0], i, err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    mcdc_appender *a = NULL;
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, mcdc_frame_target(f), j->w->job.schema, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, err);
    if (rc == MCDC_OK) rc = mcdc_frame_commit_data(f, u, a, json_object(), NULL, err);
    res->data_committed = rc == MCDC_OK;
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    return rc;
}

static int once_facts(void *job, const mcdc_unit *u, const mcdc_unit_result *res,
                      mcdc_batch *rows, mcdc_error *err) {
    once_job *j = job;
    return toy_facts(&j->w->job, u, res, rows, err);
}

static const mcdc_job_ops ONCE_OPS = {.kind = "once", .pos_kind = MCDC_POS_STAMP,
                                      .plan = once_plan, .run = once_run, .facts = once_facts};

static int run_once(toy_world *w, once_job *j, int64_t unit, mcdc_error *err) {
    mcdc_ctx ctx = {.storage_env = &w->env, .crash_fn = toy_crash, .crash_user = &w->job};
    mcdc_table *target = NULL, *facts = NULL;
    int rc = mcdc_table_open_env(&target, &w->env, "mem://lake/target", NULL, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&facts, &w->env, "mem://lake/facts", NULL, err);
    mcdc_once_cfg cfg = {.ctx = &ctx, .id = "once.r1", .name = "once r1", .unit = unit,
                         .target = target, .app_id = "once.r1", .facts = facts,
                         .facts_app_id = "once.r1#facts"};
    if (rc == MCDC_OK) rc = mcdc_once_run(&cfg, &ONCE_OPS, j, err);
    mcdc_table_close(target);
    mcdc_table_close(facts);
    return rc;
}

/* The target's rows and the facts rows now, and their txn versions. */
static void once_state(toy_world *w, int64_t *rows, int64_t *facts_rows, int64_t *txn,
                       int64_t *facts_txn) {
    mcdc_error e = MCDC_ERROR_INIT;
    const char *names[2] = {"mem://lake/target", "mem://lake/facts"};
    const char *apps[2] = {"once.r1", "once.r1#facts"};
    int64_t *counts[2] = {rows, facts_rows}, *txns[2] = {txn, facts_txn};
    for (int i = 0; i < 2; i++) {
        mcdc_table *t = NULL;
        mcdc_batch *all = NULL;
        int64_t v;
        CHECK_EQ_INT(mcdc_table_open_env(&t, &w->env, names[i], NULL, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_table_read_all(t, &all, &v, &e), MCDC_OK);
        *counts[i] = all ? all->rows : 0;
        CHECK_EQ_INT(mcdc_table_txn_version(t, apps[i], txns[i], &e), MCDC_OK);
        mcdc_batch_free(all);
        mcdc_table_close(t);
    }
}

TEST(frame_runs_a_job_of_one_unit_on_its_commits_once_whatever_kills_it) {
    static const char *const points[] = {"after_plan", "after_bronze", "after_facts",
                                         "after_commit"};
    for (size_t p = 0; p < sizeof points / sizeof points[0]; p++) {
        toy_world w;
        world_init(&w);
        once_job j = {.w = &w};
        mcdc_error e = MCDC_ERROR_INIT;
        w.job.crash_point = points[p];
        w.job.crash_unit = 2;
        CHECK_EQ_INT(run_once(&w, &j, 2, &e), MCDC_E_CANCELLED);
        w.job.crash_point = NULL;
        CHECK_EQ_INT(run_once(&w, &j, 2, &e), MCDC_OK);
        /* and once more: recorded, nothing is written */
        once_job again = {.w = &w};
        CHECK_EQ_INT(run_once(&w, &again, 2, &e), MCDC_OK);
        CHECK_EQ_INT(again.runs, 0);
        CHECK_EQ_INT(again.idle_plans, 1);
        int64_t rows, facts_rows, txn, facts_txn;
        once_state(&w, &rows, &facts_rows, &txn, &facts_txn);
        CHECK_EQ_INT(rows, KEYS_PER_UNIT);
        CHECK_EQ_INT(facts_rows, 1);
        CHECK_EQ_INT(txn, 2);       /* the unit's number is its commits' version */
        CHECK_EQ_INT(facts_txn, 2);
        world_free(&w);
    }
}

TEST(frame_refuses_a_job_of_one_unit_whose_target_lost_its_commit_or_holds_another_writers) {
    /* the target restored from an older copy: its last commit, the unit's,
     * gone (after another program's), the facts row stands */
    toy_world w;
    world_init(&w);
    once_job j = {.w = &w};
    mcdc_error e = MCDC_ERROR_INIT;
    put_unit(&w, "target", "another", 0, NULL);
    CHECK_EQ_INT(run_once(&w, &j, 0, &e), MCDC_OK);
    mcdc_storage *st = NULL;
    CHECK_EQ_INT(mcdc_storage_mem_open(&st, w.mem, "target", &e), MCDC_OK);
    mcdc_storage_listing l = {0};
    CHECK_EQ_INT(mcdc_storage_list(st, "_delta_log/", &l, &e), MCDC_OK);
    char last[96] = "";
    for (size_t i = 0; i < l.count; i++)
        if (strcmp(l.entries[i].name, last + 11) > 0)
            snprintf(last, sizeof last, "_delta_log/%s", l.entries[i].name);
    mcdc_storage_listing_free(&l);
    CHECK_EQ_INT(mcdc_storage_delete(st, last, &e), MCDC_OK);
    mcdc_storage_free(st);
    j = (once_job){.w = &w};
    CHECK_EQ_INT(run_once(&w, &j, 0, &e), MCDC_E_TARGET_BEHIND);
    CHECK(strstr(e.message, "once r1") != NULL);
    CHECK_EQ_INT(j.runs, 0);
    world_free(&w);

    /* another program committed under the unit's app id first */
    world_init(&w);
    foreign_commit(&w, "once.r1", 0);
    j = (once_job){.w = &w};
    CHECK_EQ_INT(run_once(&w, &j, 0, &e), MCDC_E_FOREIGN_WRITER);
    CHECK_EQ_INT(j.runs, 0);
    int64_t rows, facts_rows, txn, facts_txn;
    once_state(&w, &rows, &facts_rows, &txn, &facts_txn);
    CHECK_EQ_INT(facts_rows, 0);
    world_free(&w);

    /* the target and the facts one table */
    world_init(&w);
    mcdc_ctx ctx = {.storage_env = &w.env};
    mcdc_table *one = NULL;
    CHECK_EQ_INT(mcdc_table_open_env(&one, &w.env, "mem://lake/target", NULL, &e), MCDC_OK);
    mcdc_once_cfg cfg = {.ctx = &ctx, .id = "once.r1", .name = "once r1", .target = one,
                         .app_id = "once.r1", .facts = one, .facts_app_id = "once.r1#facts"};
    j = (once_job){.w = &w};
    CHECK_EQ_INT(mcdc_once_run(&cfg, &ONCE_OPS, &j, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, "a place of its own") != NULL);
    mcdc_table_close(one);
    world_free(&w);
}

/* A job's context: every opener goes through ctx->storage_env, which answers
 * the job's storage options and keeps the memory stores of the env a test
 * put there; a table opened through it lands in that store. */
TEST(frame_ctx_storage_env_has_the_options_and_the_tests_stores) {
    mcdc_storage_mem *m = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_storage_mem_create(&m, "ctxenv", &e);
    mcdc_storage_env test_env = mcdc_storage_mem_env(m);
    mcdc_opts *o = NULL;
    mcdc_opts_create(&o, &e);
    mcdc_opts_set(o, "AZURE_STORAGE_ACCOUNT_NAME", "devstoreaccount1", NULL, &e);
    mcdc_ctx ctx = {.storage_env = &test_env};
    mcdc_ctx_take_storage(&ctx, o, NULL);
    CHECK(ctx.storage_env == &ctx.storage_own);
    CHECK_EQ_STR(ctx.storage_env->option(ctx.storage_env->octx, "AZURE_STORAGE_ACCOUNT_NAME"),
                 "devstoreaccount1");
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open_env(&t, ctx.storage_env, "mem://ctxenv/t", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_storage_put(mcdc_table_storage(t), "k", "v", 1, &e), MCDC_OK);
    CHECK_EQ_INT((int)mcdc_storage_mem_count(m), 1);
    mcdc_table_close(t);
    /* without a test's env: no memory stores, the options all the same */
    mcdc_ctx plain = {0};
    mcdc_ctx_take_storage(&plain, o, NULL);
    CHECK_EQ_INT(mcdc_table_open_env(&t, plain.storage_env, "mem://ctxenv/t", NULL, &e),
                 MCDC_E_NOTFOUND);
    CHECK(plain.storage_env->option(plain.storage_env->octx, "AWS_REGION") == NULL);
    mcdc_opts_free(o);
    mcdc_storage_mem_release(m);
}
