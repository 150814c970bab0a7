/*
 * test_runtime_probe.c - a database's shared probe (src/pipeline/mcdc_runtime.c)
 * without a server: its members sleep in mcdc_runtime_probe_wait, each on a
 * thread that behaves as an idle stream does (poll, then wait), and the
 * probe's seam gives them a fake database and a clock the test moves.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "mcdc_test.h"
#include "mcdc_runtime.h"
#include "mssqlcdc.h"

/* ---- the fake database ------------------------------------------------------ */

typedef struct fake_db {
    pthread_mutex_t mu;
    uint64_t max;              /* its max_lsn (low bits) */
    char rows_for[32];         /* the capture instance with rows up to max ("" none) */
    bool refuse;               /* rounds are refused (MCDC_E_PERMISSION) */
    bool gate;                 /* rounds block until it is lowered */
    pthread_cond_t lowered;
    int64_t rounds;
    int64_t round_clock_us;    /* the seam's clock at the last round's start */
    bool asked_rows_for;       /* the last round asked about rows_for's table... */
    uint64_t asked_from;       /* ...from this position */
    /* CDC cleanup: the start_lsn of these instances (0: never cleaned) */
    uint64_t start_of[2];
    char start_ci[2][32];
    bool every;                /* the last round was asked to read every start_lsn */
    int64_t every_rounds;      /* rounds so asked */
} fake_db;

static _Atomic int64_t clock_skip_us; /* the test's clock runs this far ahead */

static int64_t fake_now(void) {
    return mcdc_monotonic_us() + atomic_load(&clock_skip_us);
}

static mcdc_lsn lsn_of(uint64_t v) {
    mcdc_lsn l;
    mcdc_lsn_from_pair(&l, 0, v, NULL);
    return l;
}

static uint64_t low_of(const mcdc_lsn *l) {
    uint64_t hi, lo;
    mcdc_lsn_to_pair(&hi, &lo, l);
    return lo;
}

static int fake_round(void *source, mcdc_probe_item *items, int n, bool every, mcdc_lsn *max,
                      bool *max_null, int *queries, mcdc_error *err) {
    fake_db *db = source;
    pthread_mutex_lock(&db->mu);
    while (db->gate) pthread_cond_wait(&db->lowered, &db->mu);
    db->rounds++;
    db->every = every;
    db->every_rounds += every;
    db->round_clock_us = fake_now();
    *queries = 2;
    *max_null = false;
    int rc = MCDC_OK;
    if (db->refuse) {
        rc = mcdc_error_set(err, MCDC_E_PERMISSION, "SELECT on cdc.change_tables denied");
    } else {
        *max = lsn_of(db->max);
        db->asked_rows_for = false;
        for (int i = 0; i < n; i++) {
            bool mine = strcmp(items[i].ci, db->rows_for) == 0;
            items[i].moved = mine && items[i].ask && low_of(&items[i].from) < db->max;
            if (mine && items[i].ask) {
                db->asked_rows_for = true;
                db->asked_from = low_of(&items[i].from);
            }
            for (int c = 0; c < 2; c++)
                if (db->start_of[c] && strcmp(items[i].ci, db->start_ci[c]) == 0) {
                    items[i].has_min = true;
                    items[i].min_lsn = lsn_of(db->start_of[c]);
                }
        }
    }
    pthread_mutex_unlock(&db->mu);
    return rc;
}

static const mcdc_probe_seam fake_seam = {fake_round, fake_now, 60000};
static const mcdc_probe_seam fake_seam_look = {fake_round, fake_now, MCDC_PROBE_WAIT_LOOK_MS};

static void fake_init(fake_db *db, uint64_t max) {
    memset(db, 0, sizeof *db);
    pthread_mutex_init(&db->mu, NULL);
    pthread_cond_init(&db->lowered, NULL);
    db->max = max;
}

static void fake_set(fake_db *db, uint64_t max, const char *rows_for) {
    pthread_mutex_lock(&db->mu);
    db->max = max;
    snprintf(db->rows_for, sizeof db->rows_for, "%s", rows_for);
    pthread_mutex_unlock(&db->mu);
}

/* CDC cleanup raises ci's start_lsn to start (slot c of two). */
static void fake_cleanup(fake_db *db, int c, const char *ci, uint64_t start) {
    pthread_mutex_lock(&db->mu);
    snprintf(db->start_ci[c], sizeof db->start_ci[c], "%.31s", ci);
    db->start_of[c] = start;
    pthread_mutex_unlock(&db->mu);
}

static int64_t fake_rounds(fake_db *db) {
    pthread_mutex_lock(&db->mu);
    int64_t n = db->rounds;
    pthread_mutex_unlock(&db->mu);
    return n;
}

static void fake_refuse(fake_db *db, bool refuse) {
    pthread_mutex_lock(&db->mu);
    db->refuse = refuse;
    pthread_mutex_unlock(&db->mu);
}

static void fake_gate(fake_db *db, bool gate) {
    pthread_mutex_lock(&db->mu);
    db->gate = gate;
    if (!gate) pthread_cond_broadcast(&db->lowered);
    pthread_mutex_unlock(&db->mu);
}

/* ---- a member: an idle stream's loop ------------------------------------------ */

typedef struct member {
    mcdc_runtime *rt;
    mcdc_db_probe *p;
    fake_db *db;
    char ci[24];
    mcdc_ctx ctx;
    uint64_t from;             /* its position (its thread's) */
    _Atomic int wakes;         /* its wait returned true (poll now) */
    _Atomic int refused;       /* polls answered: not usable */
    _Atomic int moved;         /* polls answered: its table has rows */
    _Atomic uint64_t moved_from, moved_max; /* the last such answer: asked from, max */
    _Atomic bool hold;         /* after its table moved: busy until released */
    _Atomic bool busy;         /* holding */
    _Atomic bool done;
    pthread_t th;
} member;

static void *member_run(void *arg) {
    member *m = arg;
    const mcdc_log_sink *was = mcdc_log_use(&mcdc_test_quiet); /* the refusal's warning */
    while (!mcdc_ctx_stopping(&m->ctx)) {
        mcdc_lsn from = lsn_of(m->from), max;
        bool moved = false, usable = false;
        mcdc_error e = {0};
        if (mcdc_runtime_probe_poll(m->rt, m->p, m, m->db, &from, &max, &moved, &usable, &e))
            break;
        if (!usable) { /* it polls on its own, as a refused stream does */
            atomic_fetch_add(&m->refused, 1);
            mcdc_ctx_sleep_until(&m->ctx, mcdc_monotonic_us() + 2000);
            continue;
        }
        if (moved) { /* a batch: the drive goes to a member still idle */
            atomic_store(&m->moved_from, m->from);
            atomic_store(&m->moved_max, low_of(&max));
            atomic_fetch_add(&m->moved, 1);
            mcdc_runtime_probe_busy(m->p, m);
            atomic_store(&m->busy, true);
            while (atomic_load(&m->hold) && !mcdc_ctx_stopping(&m->ctx))
                mcdc_ctx_sleep_until(&m->ctx, mcdc_monotonic_us() + 1000);
            atomic_store(&m->busy, false);
            m->from = low_of(&max);
            continue;
        }
        /* idle: it sleeps in the probe (never due to keep up by itself) */
        if (!mcdc_runtime_probe_wait(m->rt, m->p, m, INT64_MAX, &m->ctx)) break;
        atomic_fetch_add(&m->wakes, 1);
    }
    mcdc_runtime_probe_leave(m->rt, m->p, m);
    mcdc_log_use(was);
    atomic_store(&m->done, true);
    return NULL;
}

enum { MEMBERS = 4 };

typedef struct probe_fixture {
    mcdc_runtime *rt;
    fake_db db;
    member m[MEMBERS];
    mcdc_db_probe *p;
} probe_fixture;

/* MEMBERS members at position `at` of a database at max, on seam; their
 * threads started. */
static void fixture_start(probe_fixture *f, const mcdc_probe_seam *seam, uint64_t at,
                          uint64_t max) {
    memset(f, 0, sizeof *f);
    atomic_store(&clock_skip_us, 0);
    mcdc_error e = {0};
    CHECK_EQ_INT(mcdc_runtime_create(&f->rt, NULL, &e), MCDC_OK);
    fake_init(&f->db, max);
    for (int i = 0; i < MEMBERS; i++) {
        member *m = &f->m[i];
        m->rt = f->rt;
        m->db = &f->db;
        m->from = at;
        snprintf(m->ci, sizeof m->ci, "dbo_t%d", i);
        CHECK_EQ_INT(mcdc_runtime_probe_join(f->rt, "Server=fake;Database=shop", m, m->ci, seam,
                                             &m->p, &e),
                     MCDC_OK);
        f->p = m->p;
    }
    for (int i = 0; i < MEMBERS; i++)
        CHECK_EQ_INT(pthread_create(&f->m[i].th, NULL, member_run, &f->m[i]), 0);
}

static void fixture_stop(probe_fixture *f) {
    for (int i = 0; i < MEMBERS; i++) atomic_store(&f->m[i].ctx.stop, 1);
    for (int i = 0; i < MEMBERS; i++) pthread_join(f->m[i].th, NULL);
    mcdc_runtime_destroy(f->rt);
    pthread_mutex_destroy(&f->db.mu);
    pthread_cond_destroy(&f->db.lowered);
}

static mcdc_probe_state state_of(probe_fixture *f) {
    mcdc_probe_state s;
    mcdc_runtime_probe_state(f->p, &s);
    return s;
}

/* Waits (up to 20 s: the machine may be loaded) until cond holds. */
#define WAIT_UNTIL(cond)                                                        \
    do {                                                                        \
        int64_t until_ = mcdc_monotonic_us() + 20 * 1000000;                    \
        while (!(cond) && mcdc_monotonic_us() < until_) {                       \
            struct timespec ts_ = {0, 1000000};                                 \
            nanosleep(&ts_, NULL);                                              \
        }                                                                       \
    } while (0)

static int index_of(probe_fixture *f, const void *owner) {
    for (int i = 0; i < MEMBERS; i++)
        if (owner == &f->m[i]) return i;
    return -1;
}

/* The members asleep, one of them driving, and rounds running. */
static void settle(probe_fixture *f) {
    int64_t r0 = fake_rounds(&f->db);
    WAIT_UNTIL(state_of(f).waiting >= MEMBERS - 1 && state_of(f).driver != NULL &&
               fake_rounds(&f->db) >= r0 + 3);
    mcdc_probe_state s = state_of(f);
    CHECK(s.waiting >= MEMBERS - 1);
    CHECK(index_of(f, s.driver) >= 0);
    CHECK(fake_rounds(&f->db) >= r0 + 3);
}

TEST(runtime_probe_rows_for_one_member_wake_only_it) {
    probe_fixture f;
    fixture_start(&f, &fake_seam, 10, 10);
    settle(&f);
    /* a member that is not the driver: its table gets rows up to 20 */
    int k = (index_of(&f, state_of(&f).driver) + 1) % MEMBERS;
    atomic_store(&f.m[k].hold, true);
    int before[MEMBERS];
    for (int i = 0; i < MEMBERS; i++) before[i] = atomic_load(&f.m[i].wakes);
    fake_set(&f.db, 20, f.m[k].ci);
    WAIT_UNTIL(atomic_load(&f.m[k].busy));
    /* it woke, with the answer about its own position: rows in (10, 20] */
    CHECK_EQ_INT(atomic_load(&f.m[k].moved), 1);
    CHECK_EQ_INT(atomic_load(&f.m[k].wakes), before[k] + 1);
    CHECK_EQ_INT(atomic_load(&f.m[k].moved_from), 10);
    CHECK_EQ_INT(atomic_load(&f.m[k].moved_max), 20);
    pthread_mutex_lock(&f.db.mu);
    CHECK(f.db.asked_rows_for);
    CHECK_EQ_INT(f.db.asked_from, 10);
    pthread_mutex_unlock(&f.db.mu);
    /* the others (behind 20 now, but not due) saw no rows, and of them only
     * the driver woke: to run the rounds */
    int woke = 0;
    for (int i = 0; i < MEMBERS; i++) {
        if (i == k) continue;
        CHECK_EQ_INT(atomic_load(&f.m[i].moved), 0);
        woke += atomic_load(&f.m[i].wakes) > before[i];
    }
    CHECK(woke <= 1);
    /* what the rounds proved (a host's lag): the others have nothing up to
     * 20; it, nothing up to 10 (the round before its rows) */
    for (int i = 0; i < MEMBERS; i++) {
        mcdc_lsn from = lsn_of(10), to = lsn_of(0);
        CHECK(mcdc_runtime_probe_proven(f.p, &f.m[i], &from, &to));
        CHECK_EQ_INT(low_of(&to), i == k ? 10 : 20);
    }
    /* its batch done at 20, it sleeps again; rows for nobody now */
    fake_set(&f.db, 20, "");
    atomic_store(&f.m[k].hold, false);
    WAIT_UNTIL(!atomic_load(&f.m[k].busy) && state_of(&f).waiting >= MEMBERS - 1);
    CHECK(state_of(&f).waiting >= MEMBERS - 1);
    CHECK_EQ_INT(atomic_load(&f.m[k].moved), 1);
    fixture_stop(&f);
}

/* What the rounds prove for the retention guard (a batch may accept a
 * cleanup up to there: nothing was lost) holds only while cleanup had
 * removed nothing past a member's position when its change table was found
 * empty: a start_lsn past it leaves the proof where the rounds before had
 * it unless that covers the new start_lsn, and the member is told to plan
 * a batch (whose guard then judges the gap) rather than that it is idle. */
TEST(runtime_probe_a_cleanup_past_a_position_is_proven_or_planned) {
    probe_fixture f;
    fixture_start(&f, &fake_seam, 10, 10);
    settle(&f);
    /* only the first round read every start_lsn (no position behind since) */
    pthread_mutex_lock(&f.db.mu);
    CHECK_EQ_INT(f.db.every_rounds, 1);
    CHECK(!f.db.every);
    pthread_mutex_unlock(&f.db.mu);
    /* the database moves to 20, no member's table: all proven empty to 20 */
    fake_set(&f.db, 20, "");
    for (int i = 0; i < MEMBERS; i++) {
        mcdc_lsn from = lsn_of(10), to = lsn_of(0);
        WAIT_UNTIL(mcdc_runtime_probe_proven(f.p, &f.m[i], &from, &to) && low_of(&to) == 20);
        CHECK(mcdc_runtime_probe_proven(f.p, &f.m[i], &from, &to));
        CHECK_EQ_INT(low_of(&to), 20);
    }
    /* a cleanup to 25 for member a (rows in (20, 25) may have been purged
     * before any round saw them), to 20 for member b (the rounds had seen
     * nothing there); then the database moves to 30, nothing found */
    int a = 1, b = 2;
    atomic_store(&f.m[a].hold, true);
    atomic_store(&f.m[b].hold, true);
    int moved_b = atomic_load(&f.m[b].moved);
    fake_cleanup(&f.db, 0, f.m[a].ci, 25);
    fake_cleanup(&f.db, 1, f.m[b].ci, 20);
    fake_set(&f.db, 30, "");
    WAIT_UNTIL(atomic_load(&f.m[a].busy));
    /* a plans a batch from 10 (its guard sees the gap); its proof stays */
    CHECK(atomic_load(&f.m[a].busy));
    CHECK_EQ_INT(atomic_load(&f.m[a].moved), 1);
    CHECK_EQ_INT(atomic_load(&f.m[a].moved_from), 10);
    CHECK_EQ_INT(atomic_load(&f.m[a].moved_max), 30);
    mcdc_lsn from = lsn_of(10), to = lsn_of(0);
    CHECK(mcdc_runtime_probe_proven(f.p, &f.m[a], &from, &to));
    CHECK_EQ_INT(low_of(&to), 20);
    /* b and the others: proven to 30, and idle */
    for (int i = 0; i < MEMBERS; i++) {
        if (i == a) continue;
        WAIT_UNTIL(mcdc_runtime_probe_proven(f.p, &f.m[i], &from, &to) && low_of(&to) == 30);
        CHECK(mcdc_runtime_probe_proven(f.p, &f.m[i], &from, &to));
        CHECK_EQ_INT(low_of(&to), 30);
    }
    CHECK_EQ_INT(atomic_load(&f.m[b].moved), moved_b);
    CHECK(!atomic_load(&f.m[b].busy));
    atomic_store(&f.m[a].hold, false);
    atomic_store(&f.m[b].hold, false);
    fixture_stop(&f);
}

TEST(runtime_probe_driver_leaving_hands_the_drive_on) {
    probe_fixture f;
    fixture_start(&f, &fake_seam, 10, 10);
    settle(&f);
    /* the driver's table gets work, twice: each time another member drives
     * and the rounds go on (the sleepers' own look is a minute here: only
     * the hand-off can keep them going) */
    uint64_t max = 10;
    for (int turn = 0; turn < 2; turn++) {
        int d = index_of(&f, state_of(&f).driver);
        CHECK(d >= 0);
        if (d < 0) break;
        atomic_store(&f.m[d].hold, true);
        max += 10;
        fake_set(&f.db, max, f.m[d].ci);
        WAIT_UNTIL(atomic_load(&f.m[d].busy));
        CHECK(atomic_load(&f.m[d].busy));
        fake_set(&f.db, max, "");
        int64_t r0 = fake_rounds(&f.db);
        WAIT_UNTIL(fake_rounds(&f.db) >= r0 + 5);
        CHECK(fake_rounds(&f.db) >= r0 + 5);
        mcdc_probe_state s = state_of(&f);
        CHECK(s.driver != NULL && s.driver != &f.m[d]);
    }
    /* the driver stops (it leaves the probe): rounds go on with another */
    int d = index_of(&f, state_of(&f).driver);
    CHECK(d >= 0);
    if (d >= 0) {
        atomic_store(&f.m[d].ctx.stop, 1);
        WAIT_UNTIL(atomic_load(&f.m[d].done));
        CHECK(atomic_load(&f.m[d].done));
        int64_t r0 = fake_rounds(&f.db);
        WAIT_UNTIL(fake_rounds(&f.db) >= r0 + 5);
        CHECK(fake_rounds(&f.db) >= r0 + 5);
        mcdc_probe_state s = state_of(&f);
        CHECK(s.driver != NULL && s.driver != &f.m[d]);
        CHECK_EQ_INT(s.members, MEMBERS - 1);
    }
    for (int i = 0; i < MEMBERS; i++) atomic_store(&f.m[i].hold, false);
    fixture_stop(&f);
}

TEST(runtime_probe_stop_wakes_a_sleeper_within_the_look) {
    probe_fixture f;
    fixture_start(&f, &fake_seam_look, 10, 10);
    settle(&f);
    /* the driver awake each slot sees a sleeper's stop at once (well
     * within the look) */
    int k = (index_of(&f, state_of(&f).driver) + 1) % MEMBERS;
    int64_t t0 = mcdc_monotonic_us();
    atomic_store(&f.m[k].ctx.stop, 1);
    WAIT_UNTIL(atomic_load(&f.m[k].done));
    CHECK(atomic_load(&f.m[k].done));
    CHECK(mcdc_monotonic_us() - t0 < MCDC_PROBE_WAIT_LOOK_MS * 1000 / 2);
    /* a round that hangs (its driver in it): a sleeper asked to stop looks
     * for itself, within the look */
    fake_gate(&f.db, true);
    int64_t r0 = fake_rounds(&f.db);
    WAIT_UNTIL(state_of(&f).waiting == MEMBERS - 2); /* the driver in its round */
    CHECK_EQ_INT(state_of(&f).waiting, MEMBERS - 2);
    /* the one that is not the deputy (which looks each look for them all) */
    mcdc_probe_state s = state_of(&f);
    int d = index_of(&f, s.driver), j = -1;
    CHECK(s.deputy != NULL && s.deputy != s.driver);
    for (int i = 0; i < MEMBERS; i++)
        if (i != k && i != d && &f.m[i] != s.deputy) j = i;
    CHECK(j >= 0);
    if (j < 0) j = (k + 1) % MEMBERS == d ? (k + 2) % MEMBERS : (k + 1) % MEMBERS;
    t0 = mcdc_monotonic_us();
    atomic_store(&f.m[j].ctx.stop, 1);
    WAIT_UNTIL(atomic_load(&f.m[j].done));
    int64_t took = mcdc_monotonic_us() - t0;
    CHECK(atomic_load(&f.m[j].done));
    CHECK(took <= (MCDC_PROBE_WAIT_LOOK_MS + 500) * 1000); /* a slack for a loaded machine */
    CHECK_EQ_INT(fake_rounds(&f.db), r0); /* the round still hangs */
    fake_gate(&f.db, false);
    fixture_stop(&f);
}

TEST(runtime_probe_refused_wakes_everyone_and_backs_off_doubling) {
    probe_fixture f;
    fixture_start(&f, &fake_seam, 10, 10);
    settle(&f);
    int before[MEMBERS];
    for (int i = 0; i < MEMBERS; i++) before[i] = atomic_load(&f.m[i].wakes);
    int64_t rounds_before = fake_rounds(&f.db);
    fake_refuse(&f.db, true);
    /* the refused round wakes every sleeper: each polls on its own */
    bool all = false;
    int64_t until = mcdc_monotonic_us() + 20 * 1000000;
    while (!all && mcdc_monotonic_us() < until) {
        all = true;
        for (int i = 0; i < MEMBERS; i++) all &= atomic_load(&f.m[i].refused) > 0;
    }
    CHECK(all);
    for (int i = 0; i < MEMBERS; i++) CHECK(atomic_load(&f.m[i].wakes) > before[i]);
    /* the back-off: 2 s after the first refusal, then 4, 8 (the test's
     * clock jumps rather than the test sleeping). Its clock runs with the
     * real one too: a slow run (valgrind) may see the 2 s pass, and a
     * second refused round, before every member has polled; so the turns
     * start from the retry the rounds so far have reached, one doubling of
     * MCDC_PROBE_RETRY_FIRST_MS per refused round */
    int64_t wait_ms = state_of(&f).retry_ms / 2, doublings = 1;
    int64_t refused_rounds = fake_rounds(&f.db) - rounds_before;
    for (int64_t w = MCDC_PROBE_RETRY_FIRST_MS; w < wait_ms; w *= 2) doublings++;
    CHECK(wait_ms >= MCDC_PROBE_RETRY_FIRST_MS && wait_ms * 2 <= MCDC_PROBE_RETRY_MOST_MS / 8);
    CHECK_EQ_INT(MCDC_PROBE_RETRY_FIRST_MS << (doublings - 1), wait_ms);
    CHECK(doublings <= refused_rounds);
    for (int turn = 0; turn < 3; turn++) {
        int64_t r0 = fake_rounds(&f.db);
        mcdc_probe_state s = state_of(&f);
        CHECK(s.unusable);
        CHECK_EQ_INT(s.retry_ms, wait_ms * 2); /* the one after the next refusal */
        pthread_mutex_lock(&f.db.mu);
        int64_t at = f.db.round_clock_us;
        pthread_mutex_unlock(&f.db.mu);
        /* retry_us is set after the round returns: a moment later than its start */
        CHECK(s.retry_us >= at + wait_ms * 1000 && s.retry_us < at + (wait_ms + 2000) * 1000);
        /* short of it: the members poll (on their own), no round */
        int polls = atomic_load(&f.m[0].refused);
        atomic_store(&clock_skip_us, atomic_load(&clock_skip_us) + (s.retry_us - fake_now()) -
                                         1000 * 1000);
        WAIT_UNTIL(atomic_load(&f.m[0].refused) >= polls + 5);
        CHECK(atomic_load(&f.m[0].refused) >= polls + 5);
        CHECK_EQ_INT(fake_rounds(&f.db), r0);
        /* past it: one round (refused again), however many poll */
        atomic_store(&clock_skip_us, atomic_load(&clock_skip_us) + 1100 * 1000);
        WAIT_UNTIL(fake_rounds(&f.db) > r0);
        CHECK_EQ_INT(fake_rounds(&f.db), r0 + 1);
        pthread_mutex_lock(&f.db.mu);
        CHECK(f.db.every); /* a retry reads cdc.change_tables whatever the positions */
        pthread_mutex_unlock(&f.db.mu);
        polls = atomic_load(&f.m[0].refused);
        WAIT_UNTIL(atomic_load(&f.m[0].refused) >= polls + 5);
        CHECK_EQ_INT(fake_rounds(&f.db), r0 + 1);
        wait_ms *= 2;
    }
    /* granted again: the next retry's round serves them, and they sleep */
    fake_refuse(&f.db, false);
    mcdc_probe_state s = state_of(&f);
    atomic_store(&clock_skip_us, atomic_load(&clock_skip_us) + (s.retry_us - fake_now()) +
                                     100 * 1000);
    WAIT_UNTIL(!state_of(&f).unusable && state_of(&f).waiting >= MEMBERS - 1);
    s = state_of(&f);
    CHECK(!s.unusable);
    CHECK_EQ_INT(s.retry_ms, 0);
    CHECK(s.waiting >= MEMBERS - 1);
    fixture_stop(&f);
}
