/*
 * test_cfg_abi.c - the public configurations across versions: a caller built
 * against an older header passes a struct that ends where its version ends.
 * Each job must read that prefix and nothing past it. The struct is placed
 * so that its last byte is the last byte before a page that cannot be read;
 * a read past it kills the child process that runs the call, and the test
 * fails with the signal.
 */
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcdc_cfg.h"
#include "mcdc_context.h"
#include "mcdc_options.h"
#include "mcdc_test.h"
#include "mssqlcdc.h"
#include "mssqlcdc_testing.h"

/* size bytes that end right before an unreadable page. */
typedef struct {
    char *map;
    size_t map_size;
    void *at;
} guarded;

static bool guard(guarded *g, const void *cfg, size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    g->map_size = 2 * page;
    g->map = mmap(NULL, g->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->map == MAP_FAILED) return false;
    if (mprotect(g->map + page, page, PROT_NONE) != 0) return false;
    g->at = g->map + page - size;
    memcpy(g->at, cfg, size);
    return true;
}

static void unguard(guarded *g) {
    munmap(g->map, g->map_size);
}

typedef int (*cfg_call)(const void *cfg, void *user);

/* Runs call(cfg of size bytes, guarded) in a child: true when the child
 * returned the expected status (it exits 0), false when it read past the
 * struct (a signal) or returned another status. */
static bool run_guarded(const char *what, const void *cfg, size_t size, cfg_call call, void *user,
                        int want) {
    guarded g;
    if (!guard(&g, cfg, size)) return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = call(g.at, user);
        if (rc != want) printf("  %s: status %d, expected %d\n", what, rc, want);
        fflush(stdout);
        _exit(rc == want ? 0 : 1);
    }
    int status = 0;
    bool ok = pid > 0 && waitpid(pid, &status, 0) == pid;
    unguard(&g);
    if (ok && WIFSIGNALED(status))
        printf("  %s: the call read past the caller's %zu-byte struct (signal %d)\n", what, size,
               WTERMSIG(status));
    return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The places a job's config names; the source options are made in the
 * child that runs the call (nothing of the parent's heap is left live there
 * when it exits, so valgrind has no leak to report of it). */
typedef struct {
    char dir[64];
    char target[128], checkpoint[128], facts[128], control[128];
} cfg_env;

static void env_init(cfg_env *v) {
    memset(v, 0, sizeof *v);
    snprintf(v->dir, sizeof v->dir, "/tmp/mcdc_cfg_XXXXXX");
    if (mkdtemp(v->dir) == NULL) v->dir[0] = 0;
    snprintf(v->target, sizeof v->target, "%s/bronze", v->dir);
    snprintf(v->checkpoint, sizeof v->checkpoint, "%s/ckpt", v->dir);
    snprintf(v->facts, sizeof v->facts, "%s/facts", v->dir);
    snprintf(v->control, sizeof v->control, "%s/control", v->dir);
}

static void env_free(cfg_env *v) {
    if (v->dir[0]) rmdir(v->dir);
}

/* Source options a job takes (no server is reached: every call returns
 * before it connects). */
static mcdc_opts *source_opts(void) {
    mcdc_opts *o = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts_create(&o, &e);
    mcdc_opts_set(o, "connectionString", "Server=127.0.0.1,1;UID=sa;PWD=x;Encrypt=no", NULL, &e);
    mcdc_opts_set(o, "captureInstance", "dbo_t", NULL, &e);
    return o;
}

static int stream_call(const void *cfg, void *user) {
    (void)user;
    mcdc_opts *o = source_opts();
    mcdc_stream *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_stream_create(&s, o, cfg, &e);
    mcdc_stream_free(s);
    mcdc_opts_free(o);
    return rc;
}

static int backfill_call(const void *cfg, void *user) {
    (void)user;
    mcdc_opts *o = source_opts();
    mcdc_backfill *b = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_backfill_create(&b, o, cfg, &e);
    mcdc_backfill_free(b);
    mcdc_opts_free(o);
    return rc;
}

static int apply_call(const void *cfg, void *user) {
    (void)user;
    mcdc_opts *o = source_opts();
    mcdc_apply *a = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_apply_create(&a, o, cfg, &e);
    mcdc_apply_free(a);
    mcdc_opts_free(o);
    return rc;
}

static int reconcile_call(const void *cfg, void *user) {
    (void)user;
    mcdc_opts *o = source_opts();
    mcdc_reconcile *r = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_reconcile_create(&r, o, cfg, &e);
    mcdc_reconcile_free(r);
    mcdc_opts_free(o);
    return rc;
}

/* The one-shot jobs: a config that names no target is refused before
 * anything is opened, after the config was read. */
static int snapshot_call(const void *cfg, void *user) {
    (void)user;
    mcdc_opts *o = source_opts();
    mcdc_offset off;
    int64_t rows;
    bool taken;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_snapshot_take(&off, &rows, &taken, o, cfg, &e);
    mcdc_opts_free(o);
    return rc;
}

static int seed_call(const void *cfg, void *user) {
    (void)user;
    mcdc_opts *o = source_opts();
    mcdc_offset off;
    int64_t rows;
    bool written;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_seed(&off, &rows, &written, o, cfg, &e);
    mcdc_opts_free(o);
    return rc;
}

static int repair_call(const void *cfg, void *user) {
    (void)user;
    mcdc_opts *o = source_opts();
    mcdc_repair_result res = {.size = sizeof res};
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_repair_run(o, cfg, &res, &e);
    mcdc_opts_free(o);
    return rc;
}

static size_t header_bytes(mcdc_cfg_kind kind, int version);

/* The versions of the job configs given, each as a caller built against
 * that header allocates it (the fields up to the first one a later version
 * added), guarded: the job reads that prefix and nothing past it. */
typedef struct {
    int stream, backfill, apply, reconcile, snapshot, seed, repair;
} cfg_versions;

static void check_guarded_jobs(const cfg_versions *ver) {
    cfg_env v;
    env_init(&v);
    CHECK(v.dir[0] != 0);

    mcdc_stream_cfg sc = MCDC_STREAM_CFG_INIT;
    sc.version = ver->stream;
    sc.target = v.target;
    sc.app_id = "cfg-test";
    sc.checkpoint = v.checkpoint;
    CHECK(run_guarded("stream", &sc, header_bytes(MCDC_CFG_STREAM, ver->stream), stream_call, &v,
                      MCDC_OK));

    mcdc_backfill_cfg bc = MCDC_BACKFILL_CFG_INIT;
    bc.version = ver->backfill;
    bc.target = v.target;
    bc.app_id = "cfg-test";
    bc.facts_table = v.facts;
    CHECK(run_guarded("backfill", &bc, header_bytes(MCDC_CFG_BACKFILL, ver->backfill),
                      backfill_call, &v, MCDC_OK));

    static const char *const keys[] = {"id"};
    mcdc_apply_cfg ac = MCDC_APPLY_CFG_INIT;
    ac.version = ver->apply;
    ac.bronze = v.target;
    ac.target = v.control; /* any other table */
    ac.control_table = v.facts;
    ac.keys = keys;
    ac.n_keys = 1;
    CHECK(run_guarded("apply", &ac, header_bytes(MCDC_CFG_APPLY, ver->apply), apply_call, &v,
                      MCDC_OK));

    mcdc_reconcile_cfg rc = MCDC_RECONCILE_CFG_INIT;
    rc.version = ver->reconcile;
    rc.silver = v.control;
    rc.bronze = v.target;
    rc.control_table = v.facts;
    CHECK(run_guarded("reconcile", &rc, header_bytes(MCDC_CFG_RECONCILE, ver->reconcile),
                      reconcile_call, &v, MCDC_OK));

    mcdc_snapshot_cfg nc = MCDC_SNAPSHOT_CFG_INIT;
    nc.version = ver->snapshot;
    CHECK(run_guarded("snapshot", &nc, header_bytes(MCDC_CFG_SNAPSHOT, ver->snapshot),
                      snapshot_call, &v, MCDC_E_INVALID));

    mcdc_seed_cfg dc = MCDC_SEED_CFG_INIT;
    dc.version = ver->seed;
    CHECK(run_guarded("seed", &dc, header_bytes(MCDC_CFG_SEED, ver->seed), seed_call, &v,
                      MCDC_E_INVALID));

    mcdc_repair_cfg pc = MCDC_REPAIR_CFG_INIT;
    pc.version = ver->repair;
    CHECK(run_guarded("repair", &pc, header_bytes(MCDC_CFG_REPAIR, ver->repair), repair_call, &v,
                      MCDC_E_INVALID));
    env_free(&v);
}

TEST(cfg_version_1_structs_are_read_to_their_end_and_no_further) {
    check_guarded_jobs(&(cfg_versions){1, 1, 1, 1, 1, 1, 1});
}

/* The version before progress_fn of each config that has one: the job
 * reads no byte of the progress fields it lacks. */
TEST(cfg_structs_before_progress_are_read_to_their_end_and_no_further) {
    check_guarded_jobs(&(cfg_versions){.stream = 4, .backfill = 1, .apply = 3, .reconcile = 3,
                                       .snapshot = 2, .seed = 2, .repair = 1});
}

TEST(cfg_structs_before_the_stop_request_are_read_to_their_end_and_no_further) {
    check_guarded_jobs(&(cfg_versions){.stream = 5, .backfill = 2, .apply = 5, .reconcile = 4,
                                       .snapshot = 3, .seed = 3, .repair = 1});
}

/* The version before the runtime of each config that has one: the job
 * reads no byte of the runtime field it lacks. */
TEST(cfg_structs_before_the_runtime_are_read_to_their_end_and_no_further) {
    check_guarded_jobs(&(cfg_versions){.stream = 5, .backfill = 2, .apply = 5, .reconcile = 4,
                                       .snapshot = 4, .seed = 4, .repair = 2});
}

/* ---- the versions' sizes, the copy and the init functions ------------------------- */

/* What the header says each version holds: the fields up to the first one a
 * later version added. */
static size_t header_bytes(mcdc_cfg_kind kind, int version) {
    switch (kind) {
    case MCDC_CFG_STREAM: {
        const size_t b[] = {offsetof(mcdc_stream_cfg, budget), offsetof(mcdc_stream_cfg, on_data_loss),
                            offsetof(mcdc_stream_cfg, snapshot_on_switch),
                            offsetof(mcdc_stream_cfg, progress_fn),
                            offsetof(mcdc_stream_cfg, runtime), sizeof(mcdc_stream_cfg)};
        return b[version - 1];
    }
    case MCDC_CFG_SNAPSHOT: {
        const size_t b[] = {offsetof(mcdc_snapshot_cfg, app_id),
                            offsetof(mcdc_snapshot_cfg, progress_fn),
                            offsetof(mcdc_snapshot_cfg, stop),
                            offsetof(mcdc_snapshot_cfg, runtime), sizeof(mcdc_snapshot_cfg)};
        return b[version - 1];
    }
    case MCDC_CFG_APPLY: {
        const size_t b[] = {offsetof(mcdc_apply_cfg, scd_type),
                            offsetof(mcdc_apply_cfg, deletion_vectors),
                            offsetof(mcdc_apply_cfg, progress_fn),
                            offsetof(mcdc_apply_cfg, scratch_dir),
                            offsetof(mcdc_apply_cfg, runtime), sizeof(mcdc_apply_cfg)};
        return b[version - 1];
    }
    case MCDC_CFG_RECONCILE: {
        const size_t b[] = {offsetof(mcdc_reconcile_cfg, repair),
                            offsetof(mcdc_reconcile_cfg, settle_seconds),
                            offsetof(mcdc_reconcile_cfg, progress_fn),
                            offsetof(mcdc_reconcile_cfg, runtime), sizeof(mcdc_reconcile_cfg)};
        return b[version - 1];
    }
    case MCDC_CFG_SEED: {
        const size_t b[] = {offsetof(mcdc_seed_cfg, allow_empty),
                            offsetof(mcdc_seed_cfg, progress_fn), offsetof(mcdc_seed_cfg, stop),
                            offsetof(mcdc_seed_cfg, runtime), sizeof(mcdc_seed_cfg)};
        return b[version - 1];
    }
    case MCDC_CFG_BACKFILL: {
        const size_t b[] = {offsetof(mcdc_backfill_cfg, progress_fn),
                            offsetof(mcdc_backfill_cfg, runtime), sizeof(mcdc_backfill_cfg)};
        return b[version - 1];
    }
    case MCDC_CFG_REPAIR: {
        const size_t b[] = {offsetof(mcdc_repair_cfg, stop), offsetof(mcdc_repair_cfg, runtime),
                            sizeof(mcdc_repair_cfg)};
        return b[version - 1];
    }
    case MCDC_CFG_RUNTIME: return sizeof(mcdc_runtime_cfg);
    case MCDC_CFG_KINDS: break;
    }
    return 0;
}

typedef struct {
    mcdc_cfg_kind kind;
    int newest;
    size_t size;
    const void *defaults;
} kind_case;

static const mcdc_stream_cfg D_STREAM = MCDC_STREAM_CFG_INIT;
static const mcdc_snapshot_cfg D_SNAPSHOT = MCDC_SNAPSHOT_CFG_INIT;
static const mcdc_seed_cfg D_SEED = MCDC_SEED_CFG_INIT;
static const mcdc_backfill_cfg D_BACKFILL = MCDC_BACKFILL_CFG_INIT;
static const mcdc_apply_cfg D_APPLY = MCDC_APPLY_CFG_INIT;
static const mcdc_reconcile_cfg D_RECONCILE = MCDC_RECONCILE_CFG_INIT;
static const mcdc_repair_cfg D_REPAIR = MCDC_REPAIR_CFG_INIT;
static const mcdc_runtime_cfg D_RUNTIME = MCDC_RUNTIME_CFG_INIT;

static const kind_case KINDS[MCDC_CFG_KINDS] = {
    {MCDC_CFG_STREAM, MCDC_STREAM_CFG_VERSION, sizeof D_STREAM, &D_STREAM},
    {MCDC_CFG_SNAPSHOT, MCDC_SNAPSHOT_CFG_VERSION, sizeof D_SNAPSHOT, &D_SNAPSHOT},
    {MCDC_CFG_SEED, MCDC_SEED_CFG_VERSION, sizeof D_SEED, &D_SEED},
    {MCDC_CFG_BACKFILL, MCDC_BACKFILL_CFG_VERSION, sizeof D_BACKFILL, &D_BACKFILL},
    {MCDC_CFG_APPLY, MCDC_APPLY_CFG_VERSION, sizeof D_APPLY, &D_APPLY},
    {MCDC_CFG_RECONCILE, MCDC_RECONCILE_CFG_VERSION, sizeof D_RECONCILE, &D_RECONCILE},
    {MCDC_CFG_REPAIR, MCDC_REPAIR_CFG_VERSION, sizeof D_REPAIR, &D_REPAIR},
    {MCDC_CFG_RUNTIME, MCDC_RUNTIME_CFG_VERSION, sizeof D_RUNTIME, &D_RUNTIME},
};

#define CFG_BYTES_MAX 1024

typedef struct {
    const kind_case *k;
    unsigned char out[CFG_BYTES_MAX];
} copy_job;

static int copy_call(const void *cfg, void *user) {
    copy_job *j = user;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_cfg_copy(j->out, j->k->size, j->k->kind, cfg, &e);
    /* the fields past the caller's version are the defaults */
    int version;
    memcpy(&version, cfg, sizeof version);
    size_t n = header_bytes(j->k->kind, version);
    if (rc == MCDC_OK && memcmp(j->out + n, (const unsigned char *)j->k->defaults + n, j->k->size - n))
        return -100;
    if (rc == MCDC_OK && memcmp(j->out, cfg, n)) return -101;
    return rc;
}

TEST(cfg_every_version_of_every_config_is_copied_to_its_end_and_defaulted_after) {
    for (int k = 0; k < MCDC_CFG_KINDS; k++) {
        const kind_case *c = &KINDS[k];
        CHECK(c->size <= CFG_BYTES_MAX);
        for (int v = 1; v <= c->newest; v++) {
            CHECK_EQ_INT(mcdc_cfg_version_bytes(c->kind, v), header_bytes(c->kind, v));
            /* a caller's struct of version v: every byte set, so a default
             * left unset or a field read from the wrong place shows */
            unsigned char given[CFG_BYTES_MAX];
            memset(given, 0x5A, sizeof given);
            memcpy(given, &v, sizeof v);
            /* the reserved slots stay zero (checked below) */
            if (c->kind == MCDC_CFG_STREAM && v >= 2) {
                memset(given + offsetof(mcdc_stream_cfg, reserved1), 0, sizeof(void *));
                memset(given + offsetof(mcdc_stream_cfg, reserved2), 0, sizeof(int64_t));
            }
            size_t r = c->kind == MCDC_CFG_BACKFILL    ? offsetof(mcdc_backfill_cfg, reserved1)
                       : c->kind == MCDC_CFG_APPLY     ? offsetof(mcdc_apply_cfg, reserved1)
                       : c->kind == MCDC_CFG_RECONCILE ? offsetof(mcdc_reconcile_cfg, reserved1)
                       : c->kind == MCDC_CFG_REPAIR    ? offsetof(mcdc_repair_cfg, reserved1)
                                                       : 0;
            if (r) memset(given + r, 0, sizeof(void *));
            copy_job j = {.k = c};
            char what[64];
            snprintf(what, sizeof what, "config %d version %d", k, v);
            CHECK(run_guarded(what, given, header_bytes(c->kind, v), copy_call, &j, MCDC_OK));
        }
        CHECK_EQ_INT(mcdc_cfg_version_bytes(c->kind, 0), 0);
        CHECK_EQ_INT(mcdc_cfg_version_bytes(c->kind, c->newest + 1), 0);
        /* an unknown version is refused, naming the macro to use */
        unsigned char out[CFG_BYTES_MAX];
        int bad = c->newest + 1;
        mcdc_error e = MCDC_ERROR_INIT;
        CHECK_EQ_INT(mcdc_cfg_copy(out, c->size, c->kind, &bad, &e), MCDC_E_INVALID);
        CHECK(strstr(e.message, "_CFG_VERSION") != NULL);
    }
}

TEST(cfg_a_reserved_slot_that_is_set_is_refused) {
    mcdc_stream_cfg sc = MCDC_STREAM_CFG_INIT;
    mcdc_stream_cfg out;
    mcdc_error e = MCDC_ERROR_INIT;
    sc.reserved1 = "after_plan"; /* a caller that still sets the old crash_at */
    CHECK_EQ_INT(mcdc_cfg_copy(&out, sizeof out, MCDC_CFG_STREAM, &sc, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "reserved") != NULL && strstr(e.message, "mssqlcdc_testing.h") != NULL);
    sc.reserved1 = NULL;
    sc.reserved2 = 5;
    CHECK_EQ_INT(mcdc_cfg_copy(&out, sizeof out, MCDC_CFG_STREAM, &sc, &e), MCDC_E_INVALID);
    sc.reserved2 = 0;
    CHECK_EQ_INT(mcdc_cfg_copy(&out, sizeof out, MCDC_CFG_STREAM, &sc, &e), MCDC_OK);
    mcdc_apply_cfg ac = MCDC_APPLY_CFG_INIT;
    mcdc_apply_cfg aout;
    ac.reserved1 = "during_merge";
    CHECK_EQ_INT(mcdc_cfg_copy(&aout, sizeof aout, MCDC_CFG_APPLY, &ac, &e), MCDC_E_INVALID);
}

/* mcdc_X_cfg_init(&c, v) gives what MCDC_X_CFG_INIT gives, version v's bytes
 * only, with version v. */
#define CHECK_CFG_INIT(type, fn, kind, newest, defaults)                                          \
    do {                                                                                          \
        for (int v_ = 1; v_ <= (newest); v_++) {                                                  \
            union {                                                                               \
                type c;                                                                           \
                unsigned char b[sizeof(type)];                                                    \
            } got;                                                                                \
            memset(&got, 0xA5, sizeof got);                                                       \
            mcdc_error e_ = MCDC_ERROR_INIT;                                                      \
            CHECK_EQ_INT(fn(&got.c, v_, &e_), MCDC_OK);                                           \
            CHECK_EQ_INT(got.c.version, v_);                                                      \
            size_t n_ = header_bytes(kind, v_);                                                   \
            CHECK(memcmp(got.b + sizeof(int), (const unsigned char *)&(defaults) + sizeof(int),    \
                         n_ - sizeof(int)) == 0);                                                 \
            size_t past_ = 0;                                                                     \
            for (size_t i_ = n_; i_ < sizeof got; i_++) past_ += got.b[i_] != 0xA5;               \
            CHECK_EQ_INT(past_, 0);                                                               \
        }                                                                                         \
        type x_;                                                                                  \
        mcdc_error e_ = MCDC_ERROR_INIT;                                                          \
        CHECK_EQ_INT(fn(&x_, (newest) + 1, &e_), MCDC_E_INVALID);                                 \
        CHECK_EQ_INT(fn(&x_, 0, &e_), MCDC_E_INVALID);                                            \
        CHECK_EQ_INT(fn(NULL, (newest), &e_), MCDC_E_INVALID);                                    \
        CHECK(strstr(e_.message, #type "_init") != NULL);                                         \
    } while (0)

TEST(cfg_init_functions_give_the_init_macros_defaults_version_by_version) {
    CHECK_CFG_INIT(mcdc_stream_cfg, mcdc_stream_cfg_init, MCDC_CFG_STREAM, MCDC_STREAM_CFG_VERSION,
                   D_STREAM);
    CHECK_CFG_INIT(mcdc_snapshot_cfg, mcdc_snapshot_cfg_init, MCDC_CFG_SNAPSHOT,
                   MCDC_SNAPSHOT_CFG_VERSION, D_SNAPSHOT);
    CHECK_CFG_INIT(mcdc_seed_cfg, mcdc_seed_cfg_init, MCDC_CFG_SEED, MCDC_SEED_CFG_VERSION, D_SEED);
    CHECK_CFG_INIT(mcdc_backfill_cfg, mcdc_backfill_cfg_init, MCDC_CFG_BACKFILL,
                   MCDC_BACKFILL_CFG_VERSION, D_BACKFILL);
    CHECK_CFG_INIT(mcdc_apply_cfg, mcdc_apply_cfg_init, MCDC_CFG_APPLY, MCDC_APPLY_CFG_VERSION,
                   D_APPLY);
    CHECK_CFG_INIT(mcdc_reconcile_cfg, mcdc_reconcile_cfg_init, MCDC_CFG_RECONCILE,
                   MCDC_RECONCILE_CFG_VERSION, D_RECONCILE);
    CHECK_CFG_INIT(mcdc_repair_cfg, mcdc_repair_cfg_init, MCDC_CFG_REPAIR, MCDC_REPAIR_CFG_VERSION,
                   D_REPAIR);
    CHECK_CFG_INIT(mcdc_runtime_cfg, mcdc_runtime_cfg_init, MCDC_CFG_RUNTIME,
                   MCDC_RUNTIME_CFG_VERSION, D_RUNTIME);
    /* a few defaults by name, as the header states them */
    mcdc_stream_cfg s;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_stream_cfg_init(&s, MCDC_STREAM_CFG_VERSION, &e), MCDC_OK);
    CHECK(s.resnapshot_interval_days == 7.0 && s.log_level == MCDC_LOG_WARN && s.target == NULL);
    mcdc_backfill_cfg b;
    CHECK_EQ_INT(mcdc_backfill_cfg_init(&b, 1, &e), MCDC_OK);
    CHECK(b.target_wave_seconds == -1 && b.chunk_rows == 0);
    mcdc_reconcile_cfg r;
    CHECK_EQ_INT(mcdc_reconcile_cfg_init(&r, 2, &e), MCDC_OK);
    CHECK(r.sample == -1.0 && !r.repair);
    mcdc_apply_cfg a;
    CHECK_EQ_INT(mcdc_apply_cfg_init(&a, 3, &e), MCDC_OK);
    CHECK(a.trigger == MCDC_TRIGGER_ONCE && a.memory_mb == 0);
}

/* The test hooks travel on the options (their copies too) and are checked. */
TEST(cfg_test_hooks_are_set_on_the_options_and_checked) {
    mcdc_opts *o = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_opts_create(&o, &e), MCDC_OK);
    char longer[MCDC_CRASH_AT_BYTES_MAX + 2];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    CHECK_EQ_INT(mcdc_opts_set_crash_at(o, longer, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "crash point") != NULL);
    CHECK_EQ_INT(mcdc_opts_set_crash_at(NULL, "x", &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_opts_set_retry_backoff_ms(o, -1, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_opts_set_retry_backoff_ms(o, 60001, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(mcdc_opts_set_retry_backoff_ms(o, 5, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_opts_set_crash_at(o, "after_plan:3", &e), MCDC_OK);
    mcdc_opts *c = NULL;
    CHECK_EQ_INT(mcdc_opts_clone(&c, o, &e), MCDC_OK);
    CHECK_EQ_STR(mcdc_opt_crash_at(c), "after_plan:3");
    CHECK_EQ_INT(mcdc_opt_retry_backoff_ms(c), 5);
    mcdc_ctx ctx = {0};
    mcdc_ctx_take_test_hooks(&ctx, c);
    CHECK_EQ_STR(ctx.crash_at, "after_plan:3");
    CHECK_EQ_INT(mcdc_opts_set_crash_at(o, NULL, &e), MCDC_OK);
    CHECK_EQ_STR(mcdc_opt_crash_at(o), "");
    mcdc_ctx_take_test_hooks(&ctx, NULL);
    CHECK_EQ_STR(ctx.crash_at, "");
    mcdc_opts_free(c);
    mcdc_opts_free(o);
}

/* ---- results that carry their size ------------------------------------------------ */

/* The bytes of each result's first sized version (MCDC_API_VERSION 6): up to
 * the end of its last field, trailing padding left out. */
#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define APPLY_FIRST END_OF(mcdc_apply_result, snapshot_wave)
#define BACKFILL_FIRST END_OF(mcdc_backfill_status, reason)
#define RECONCILE_FIRST END_OF(mcdc_reconcile_result, rechecks)
#define REPAIR_FIRST END_OF(mcdc_repair_result, already)

/* A zeroed result of sizeof bytes whose size says n. */
#define SIZED(var, type, n) \
    type var;               \
    memset(&var, 0, sizeof var); \
    var.size = (n)

static int apply_json_call(const void *res, void *user) {
    (void)user;
    char out[MCDC_APPLY_RESULT_JSON_SIZE];
    return mcdc_apply_result_json(out, sizeof out, res, NULL);
}

static int backfill_json_call(const void *res, void *user) {
    (void)user;
    char out[MCDC_BACKFILL_STATUS_JSON_SIZE];
    return mcdc_backfill_status_json(out, sizeof out, res, NULL);
}

static int reconcile_json_call(const void *res, void *user) {
    (void)user;
    char out[MCDC_RECONCILE_RESULT_JSON_SIZE];
    int rc = mcdc_reconcile_result_json(out, sizeof out, res, NULL);
    /* differs reads the same bytes: a mismatch set in them counts */
    return rc == MCDC_OK && !mcdc_reconcile_differs(res) ? -100 : rc;
}

static int repair_json_call(const void *res, void *user) {
    (void)user;
    char out[MCDC_REPAIR_RESULT_JSON_SIZE];
    return mcdc_repair_result_json(out, sizeof out, res, NULL);
}

TEST(results_are_read_to_the_size_their_caller_set_and_no_further) {
    /* each placed so that its first version's last byte is the last readable one */
    SIZED(ap, mcdc_apply_result, APPLY_FIRST);
    CHECK(run_guarded("apply result", &ap, APPLY_FIRST, apply_json_call, NULL, MCDC_OK));
    SIZED(bf, mcdc_backfill_status, BACKFILL_FIRST);
    CHECK(run_guarded("backfill status", &bf, BACKFILL_FIRST, backfill_json_call, NULL, MCDC_OK));
    SIZED(rc, mcdc_reconcile_result, RECONCILE_FIRST);
    rc.mismatch = 1;
    CHECK(run_guarded("reconcile result", &rc, RECONCILE_FIRST, reconcile_json_call, NULL,
                      MCDC_OK));
    SIZED(rp, mcdc_repair_result, REPAIR_FIRST);
    CHECK(run_guarded("repair result", &rp, REPAIR_FIRST, repair_json_call, NULL, MCDC_OK));
    /* a size below the first version's is refused, naming the struct and what to set */
    mcdc_error e = MCDC_ERROR_INIT;
    char out[MCDC_BACKFILL_STATUS_JSON_SIZE];
    ap.size = APPLY_FIRST - 1;
    CHECK_EQ_INT(mcdc_apply_result_json(out, sizeof out, &ap, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "sizeof(mcdc_apply_result)") != NULL);
    bf.size = 0; /* a caller that never set it */
    CHECK_EQ_INT(mcdc_backfill_status_json(out, sizeof out, &bf, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "mcdc_backfill_status's size is 0") != NULL);
    rp.size = sizeof rp - sizeof(int64_t);
    CHECK_EQ_INT(mcdc_repair_result_json(out, sizeof out, &rp, &e), MCDC_E_INVALID);
    rc.size = 8;
    CHECK_EQ_INT(mcdc_reconcile_result_json(out, sizeof out, &rc, &e), MCDC_E_INVALID);
    CHECK(!mcdc_reconcile_differs(&rc)); /* it says nothing it cannot read */
    rc.size = sizeof rc;
    CHECK(mcdc_reconcile_differs(&rc));
}

/* A repair that fails on its config (no bronze) after its size is checked:
 * its result is written, the caller's size kept. */
static int repair_fill_call(const void *res, void *user) {
    (void)user;
    mcdc_opts *o = source_opts();
    mcdc_repair_cfg cfg = MCDC_REPAIR_CFG_INIT;
    const char *keys[] = {"{\"id\": 1}"};
    cfg.keys_json = keys;
    cfg.n_keys = 1;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_repair_run(o, &cfg, (mcdc_repair_result *)res, &e);
    mcdc_opts_free(o);
    /* read by memcpy: a struct ending at a page's end may be unaligned */
    mcdc_repair_result r;
    memcpy(&r, res, REPAIR_FIRST);
    if (rc == MCDC_E_INVALID && (r.size != REPAIR_FIRST || r.bronze_version != -1)) return -100;
    return rc;
}

TEST(results_are_written_to_the_size_their_caller_set_and_no_further) {
    SIZED(rp, mcdc_repair_result, REPAIR_FIRST);
    rp.bronze_version = 5;
    CHECK(run_guarded("repair run", &rp, REPAIR_FIRST, repair_fill_call, NULL, MCDC_E_INVALID));
    /* a caller of a newer header, whose result is longer: the bytes past the
     * library's struct are left as they were, and its size as it set it */
    union {
        mcdc_repair_result r;
        unsigned char b[sizeof(mcdc_repair_result) + 64];
    } big;
    memset(&big, 0xA5, sizeof big);
    big.r.size = sizeof big;
    mcdc_opts *o = source_opts();
    mcdc_repair_cfg cfg = MCDC_REPAIR_CFG_INIT;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_repair_run(o, &cfg, &big.r, &e), MCDC_E_INVALID);
    CHECK_EQ_INT(big.r.size, sizeof big);
    CHECK_EQ_INT(big.r.bronze_version, -1);
    CHECK_EQ_INT(big.r.keys, 0);
    size_t past = 0;
    for (size_t i = sizeof(mcdc_repair_result); i < sizeof big; i++) past += big.b[i] != 0xA5;
    CHECK_EQ_INT(past, 0);
    /* too small: refused before the job, the struct untouched */
    mcdc_repair_result small;
    memset(&small, 0x5A, sizeof small);
    small.size = REPAIR_FIRST - 1;
    CHECK_EQ_INT(mcdc_repair_run(o, &cfg, &small, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "mcdc_repair_run") != NULL &&
          strstr(e.message, "sizeof(mcdc_repair_result)") != NULL);
    CHECK_EQ_INT(small.keys, 0x5A5A5A5A5A5A5A5A);
    mcdc_opts_free(o);
}

TEST(jobs_refuse_a_result_too_small_before_they_read_or_write) {
    cfg_env v;
    env_init(&v);
    CHECK(v.dir[0] != 0);
    mcdc_error e = MCDC_ERROR_INIT;
    /* apply: the control table and silver are not created */
    mcdc_apply_cfg ac = MCDC_APPLY_CFG_INIT;
    char silver[160];
    snprintf(silver, sizeof silver, "%s/silver", v.dir);
    ac.bronze = v.target;
    ac.target = silver;
    ac.control_table = v.control;
    const char *keys[] = {"id"};
    ac.keys = keys;
    ac.n_keys = 1;
    ac.capture_instance = "dbo_t";
    mcdc_apply *a = NULL;
    CHECK_EQ_INT(mcdc_apply_create(&a, NULL, &ac, &e), MCDC_OK);
    mcdc_apply_result ar = {.size = 0};
    CHECK_EQ_INT(mcdc_apply_run(a, NULL, NULL, &ar, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "mcdc_apply_run") != NULL);
    mcdc_apply_free(a);
    /* reconcile: no connection is tried (the options name no reachable server) */
    mcdc_opts *o = source_opts();
    mcdc_reconcile_cfg rc = MCDC_RECONCILE_CFG_INIT;
    rc.silver = silver;
    rc.bronze = v.target;
    rc.control_table = v.control;
    mcdc_reconcile *r = NULL;
    CHECK_EQ_INT(mcdc_reconcile_create(&r, o, &rc, &e), MCDC_OK);
    mcdc_reconcile_result rr = {.size = RECONCILE_FIRST - 1};
    CHECK_EQ_INT(mcdc_reconcile_run(r, &rr, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "mcdc_reconcile_run") != NULL);
    CHECK(rr.run_id[0] == 0);
    mcdc_reconcile_free(r);
    /* backfill */
    mcdc_backfill_cfg bc = MCDC_BACKFILL_CFG_INIT;
    bc.target = v.target;
    bc.app_id = "a";
    bc.facts_table = v.facts;
    mcdc_backfill *b = NULL;
    CHECK_EQ_INT(mcdc_backfill_create(&b, o, &bc, &e), MCDC_OK);
    mcdc_backfill_status bs = {.size = 1};
    CHECK_EQ_INT(mcdc_backfill_run(b, &bs, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "mcdc_backfill_run") != NULL);
    mcdc_backfill_free(b);
    mcdc_opts_free(o);
    /* nothing was written */
    struct stat st;
    CHECK(stat(silver, &st) != 0 && stat(v.control, &st) != 0 && stat(v.target, &st) != 0 &&
          stat(v.facts, &st) != 0);
    env_free(&v);
}
