/*
 * mcdc_context.h - what one job carries instead of process-wide state: its
 * stop request, its test hooks, and the budget of connections and encoder
 * threads it shares with the other jobs of the process.
 *
 * A job's context is owned by its handle (mcdc_stream...). The budget is
 * owned by whoever created it and outlives the jobs that share it.
 */
#ifndef MCDC_CONTEXT_H
#define MCDC_CONTEXT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcdc_progress.h"
#include "mcdc_storage.h"
#include "mcdc_util.h"

/* ---- the budget ------------------------------------------------------------
 * Counting permits shared by jobs. Connections: every connection a job opens
 * to SQL Server holds one (its control connection for its whole life, each
 * range reader while it reads). Encoder threads: Parquet encoding threads of
 * a unit's writer. The facts turn: one permit, held while a job commits its
 * unit's row to a facts table. The jobs of one process share their facts
 * table; racing each other's optimistic commits, 60 of them starved some
 * past the commit's retries, taking turns nobody fails. */
typedef enum {
    MCDC_PERMIT_CONNECTION = 0,
    MCDC_PERMIT_ENCODER = 1,
    MCDC_PERMIT_FACTS = 2,
    MCDC_PERMIT_KINDS
} mcdc_permit;

/* Takes between min and want permits of kind, waiting (while *stop stays 0)
 * until at least min are free, and leaving `reserve` free for others when
 * it can only take min (a job's long-lived control connection takes 1 with
 * reserve 1, so that some reader can always run). *got: how many.
 * MCDC_E_CANCELLED when stopped while waiting. A budget of NULL grants want.
 * Fair: jobs are served in the order they asked (one needing many is not
 * passed by later ones needing few), and while others wait a job takes no
 * more than an equal share of the free permits (at least min). */
int mcdc_budget_acquire(mcdc_budget *b, mcdc_permit kind, int min, int want, int reserve,
                        const atomic_int *stop, int *got, mcdc_error *err);
void mcdc_budget_release(mcdc_budget *b, mcdc_permit kind, int n);
/* Jobs waiting for permits of kind now (tests). */
int mcdc_budget_waiting(const mcdc_budget *b, mcdc_permit kind);
/* The most permits of kind held at once since creation (tests). */
int mcdc_budget_peak(const mcdc_budget *b, mcdc_permit kind);

/* ---- the job context ------------------------------------------------------- */

/* In-process crash hook (tests): return true to "kill" the job at point; the
 * frame then returns MCDC_E_CANCELLED at once, writing nothing more, which is
 * what a kill -9 leaves on disk. */
typedef bool (*mcdc_crash_fn)(void *user, const char *point, int64_t unit);

typedef struct mcdc_ctx {
    atomic_int stop;          /* request_stop: finish the unit, then return */
    const mcdc_stop *host_stop; /* the host's stop request (a config's stop); NULL: none */
    mcdc_budget *budget;      /* borrowed; NULL: no limit */
    /* What every table, checkpoint and file of the job is opened through:
     * storage_own (mcdc_ctx_take_storage), whose options are the job's
     * storage options and whose memory stores are those of an env a test
     * set here before; NULL: no options, no memory stores. */
    const mcdc_storage_env *storage_env;
    mcdc_storage_env storage_own;
    /* Test hooks (mssqlcdc_testing.h: the CLI sets them on the source
     * options from MCDC_* environment variables; the library never reads the
     * environment). */
    char crash_at[64];        /* "<point>[:<unit>]": SIGKILL there; "" none */
    mcdc_crash_fn crash_fn;
    void *crash_user;
    /* Progress: the tracker the job's long work counts into (owned by
     * whoever created it; NULL: nobody listens), and the caller's function,
     * from which a part of a job that has no tracker (a stream's snapshot)
     * makes one of its own. */
    mcdc_progress_tracker *progress;
    mcdc_progress_fn progress_fn;
    void *progress_user;
    /* The job's entry in its runtime's metrics registry (mcdc_runtime.h;
     * NULL: none): its trackers report there too. */
    struct mcdc_job_entry *metrics;
} mcdc_ctx;

/* How often a job's tracker tells its caller, at most. */
#define MCDC_PROGRESS_INTERVAL_MS 200
/* A tracker for a job of ctx, reporting to its progress function and its
 * metrics entry (neither: *out NULL). ctx outlives the tracker. */
int mcdc_ctx_progress_create(mcdc_progress_tracker **out, const mcdc_ctx *ctx, const char *job,
                             mcdc_error *err);

/* Points ctx->storage_env at ctx->storage_own, which answers the storage
 * options of opts (borrowed: a job's opts outlive it; NULL: none) and the
 * memory stores of the env ctx->storage_env pointed at before (a test's; NULL:
 * none). opts holding no storage option: the options rt was given for each
 * location's scheme (rt NULL: none). Each job's create calls it: every
 * opener of the job then takes ctx->storage_env. The ctx must not be copied
 * after (the pointer is into it). */
void mcdc_ctx_take_storage(mcdc_ctx *ctx, const mcdc_opts *opts, mcdc_runtime *rt);
/* Takes the test hooks the host set on opts (mssqlcdc_testing.h; opts may
 * be NULL: none). Each job's create calls it. */
void mcdc_ctx_take_test_hooks(mcdc_ctx *ctx, const mcdc_opts *opts);
/* Test hook at a named point of unit: SIGKILL (crash_at), or true when the
 * in-process hook says the job dies here. */
bool mcdc_ctx_crash(const mcdc_ctx *ctx, const char *point, int64_t unit);
static inline bool mcdc_ctx_stopping(const mcdc_ctx *ctx) {
    return atomic_load(&ctx->stop) != 0 || mcdc_stop_requested(ctx->host_stop);
}
/* MCDC_E_CANCELLED when a stop is requested (what: the job's work that is
 * then not committed, for the message), else MCDC_OK. Checked between
 * batches by the jobs that stop before their commit. */
int mcdc_ctx_check_stop(const mcdc_ctx *ctx, const char *what, mcdc_error *err);
/* Sleeps until deadline (monotonic µs) or a stop request. */
void mcdc_ctx_sleep_until(const mcdc_ctx *ctx, int64_t deadline_us);

#endif /* MCDC_CONTEXT_H */
