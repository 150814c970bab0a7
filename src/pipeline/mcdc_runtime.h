/*
 * mcdc_runtime.h - what the jobs of one host share (include/mssqlcdc.h,
 * "The runtime"): the allocator's accounting, the log sink, the budget and
 * the probe of each database. The jobs reach it through these calls; a job
 * given no runtime takes the defaults each call states.
 */
#ifndef MCDC_RUNTIME_H
#define MCDC_RUNTIME_H

#include "mcdc_changes.h"
#include "mcdc_context.h"
#include "mcdc_lsn.h"
#include "mcdc_util.h"

/* The accounting a job charges: the runtime's, or without one the creating
 * thread's (whatever its host bound; NULL: uncounted). */
mcdc_alloc_acct *mcdc_runtime_acct_or_bound(mcdc_runtime *rt);
/* Enters a job's create (mcdc_job_enter) with the accounting of the
 * runtime its config (of kind, the caller's version) names at byte
 * runtime_at: NULL when that version does not hold it. */
mcdc_job_scope mcdc_runtime_enter_cfg(int kind, const void *cfg, size_t runtime_at);
/* The runtime that config names, as mcdc_runtime_enter_cfg reads it. */
mcdc_runtime *mcdc_runtime_of_cfg(int kind, const void *cfg, size_t runtime_at);
/* The budget a job uses: its own config's when set, else the runtime's
 * (NULL: no limit). */
mcdc_budget *mcdc_runtime_budget_or(mcdc_runtime *rt, mcdc_budget *own);
/* The runtime's log function when a job has none of its own (NULL: none;
 * then the job logs to stderr). */
mcdc_log_fn mcdc_runtime_log_fn(const mcdc_runtime *rt, void **user);

/* Makes env answer, for a location of each scheme family, the storage
 * options rt was given for it (mcdc_runtime_set_storage_options); rt NULL:
 * nothing changes. */
void mcdc_runtime_storage_fallback(mcdc_runtime *rt, mcdc_storage_env *env);
/* The credentials share of the runtime's jobs whose own storage options are
 * the same as opts' (every name and value): credentials fetched once for
 * all of them. NULL: rt NULL, opts without storage options, or out of
 * memory (then each store finds its own). Lives as long as rt. */
mcdc_cred_share *mcdc_runtime_own_share(mcdc_runtime *rt, const mcdc_opts *opts);

/* ---- the metrics registry ----------------------------------------------------------
 * A job of a runtime publishes into its entry (include/mssqlcdc.h,
 * mcdc_job_metrics). Every call takes NULL (a job without a runtime, or
 * whose entry could not be made) and then does nothing. */
typedef struct mcdc_job_entry mcdc_job_entry;
/* The entry of a job (job: static; name copied, truncated; handle: the
 * job's, NULL for a one-call job); NULL when rt is NULL or out of memory
 * (the job runs unpublished). */
mcdc_job_entry *mcdc_runtime_job_join(mcdc_runtime *rt, const char *job, const char *name,
                                      const void *handle);
/* The entry of a one-call job (snapshot, seed, repair) from its caller's
 * config (of kind, its runtime at byte runtime_at, its name's string at
 * name_at, read as mcdc_runtime_of_cfg reads: the struct may be unaligned),
 * its run started. */
mcdc_job_entry *mcdc_runtime_job_join_cfg(int kind, const void *cfg, size_t runtime_at,
                                          const char *job, size_t name_at);
void mcdc_runtime_job_leave(mcdc_job_entry *e);
/* A one-call job's time in its runtime: its accounting bound
 * (mcdc_runtime_enter_cfg) and its registry entry
 * (mcdc_runtime_job_join_cfg), entered before the job and left after it. */
typedef struct mcdc_call_scope {
    mcdc_job_scope host;
    mcdc_job_entry *metrics;
} mcdc_call_scope;
mcdc_call_scope mcdc_runtime_call_enter(int kind, const void *cfg, size_t runtime_at,
                                        const char *job, size_t name_at);
void mcdc_runtime_call_leave(mcdc_call_scope scope);
/* A run starts: runs + 1, state starting, its progress cleared. */
void mcdc_runtime_job_started(mcdc_job_entry *e);
void mcdc_runtime_job_state(mcdc_job_entry *e, mcdc_job_state state);
/* A committed batch: counted, its report kept; state running. */
void mcdc_runtime_job_batch(mcdc_job_entry *e, const mcdc_batch_report *r);
void mcdc_runtime_job_progress(mcdc_job_entry *e, const mcdc_progress *p);
/* The run returned status (err's message when it failed). */
void mcdc_runtime_job_ended(mcdc_job_entry *e, int status, const mcdc_error *err);
/* The job (a stream) opened a chunked snapshot at lsn (its S, as text):
 * the host's backfill schedule has something new to read. */
void mcdc_runtime_job_chunked_opened(mcdc_job_entry *e, const char *lsn);

/* ---- one probe per database ----------------------------------------------
 * The streams of a runtime that read one database (one connection string)
 * share its probe: a poll within the runtime's probe interval of the last
 * round is answered from it; else the polling stream runs a round on its
 * own control connection for all of them (max_lsn; when some stream is
 * behind it, which change tables have rows past their positions, then the
 * start_lsn of the instances some position is behind: one query for a
 * database all caught up, at most 3 with up to 600 tables behind, however
 * many streams). Polls of one database wait for each other while a round
 * runs, then read it. */
typedef struct mcdc_db_probe mcdc_db_probe;
/* Where a probe's answers and its time come from, fixed by the join that
 * makes it: the streams give mcdc_probe_seam_db (a round is
 * mcdc_changes_probe_round on the polling stream's mcdc_changes, the clock
 * the monotonic one); the unit tests a fake source, a clock they move and
 * their own look. round's source is what the poll was given; every: it
 * reads cdc.change_tables whatever the positions (a probe's first round
 * and its retries after a refusal: a login that may not read it is
 * refused at once, not at the first change). A sleep in the probe lasts its
 * span on now_us's clock as long on the real one. */
typedef struct mcdc_probe_seam {
    int (*round)(void *source, mcdc_probe_item *items, int n, bool every, mcdc_lsn *max,
                 bool *max_null, int *queries, mcdc_error *err);
    int64_t (*now_us)(void);
    int64_t look_ms; /* MCDC_PROBE_WAIT_LOOK_MS: how often a sleeper looks for stops itself */
} mcdc_probe_seam;
extern const mcdc_probe_seam mcdc_probe_seam_db;
/* Joins owner (a stream, reading capture instance ci) to the probe of
 * db_key, made on first use with seam (static; the first join's holds);
 * owner leaves before the runtime is destroyed. */
int mcdc_runtime_probe_join(mcdc_runtime *rt, const char *db_key, const void *owner,
                            const char *ci, const mcdc_probe_seam *seam, mcdc_db_probe **out,
                            mcdc_error *err);
void mcdc_runtime_probe_leave(mcdc_runtime *rt, mcdc_db_probe *p, const void *owner);
/* owner's poll from its position from: *max the database's max_lsn and
 * *moved whether its change table may have a row in (from, max]: a round
 * found one, or CDC cleanup passed from and no round proved (the
 * retention guard's input, mcdc_runtime_probe_proven) that nothing was
 * there below its new start_lsn: a batch then looks, and its retention
 * guard decides (a member behind max whose position no round asked about
 * waits for the running round, then runs one: every answer is about
 * from). Not moved and behind max: the rounds proved (from, max] empty. A
 * round
 * the login may not run (cdc.change_tables or a change table refused) makes
 * the probe unusable: *usable false, and the stream polls on its own until
 * a poll after the back-off (MCDC_PROBE_RETRY_FIRST_MS, doubling) runs a
 * round that is granted. The warning is logged once, by the first round
 * refused; the owner's registry entry says which way it polls
 * (mcdc_job_metrics.probe), updated by its polls. source: the seam's
 * (the stream's mcdc_changes). */
int mcdc_runtime_probe_poll(mcdc_runtime *rt, mcdc_db_probe *p, const void *owner,
                            void *source, const mcdc_lsn *from, mcdc_lsn *max,
                            bool *moved, bool *usable, mcdc_error *err);
/* owner, idle after its poll (nothing past its position), sleeps until
 * its next poll may answer otherwise: a round found rows past its
 * position, or it is behind max at advance_us or later (it plans to keep
 * up, mcdc_stream.c), or the probe was refused; true then (poll at once).
 * One waiting member at a time, the driver, wakes a slot after the last
 * round instead, and its poll runs the round for all: an idle database
 * wakes one thread a slot, not one per stream. Another, the deputy, wakes
 * each look (MCDC_PROBE_WAIT_LOOK_MS) to see the sleepers' stop requests
 * and to take the drive from a driver late by two slots; the rest sleep
 * until signalled (a minute at most). False: ctx asked to stop. A member
 * that stops waiting because its table moved gives the drive to another
 * (mcdc_runtime_probe_poll), as one that leaves does. */
bool mcdc_runtime_probe_wait(mcdc_runtime *rt, mcdc_db_probe *p, const void *owner,
                             int64_t advance_us, const mcdc_ctx *ctx);
/* owner plans a batch: it gives the drive (mcdc_runtime_probe_wait) to a
 * member still waiting, if it holds it. */
void mcdc_runtime_probe_busy(mcdc_db_probe *p, const void *owner);
/* What a probe is doing now, for the unit tests: its members, those
 * waiting, the driver and the deputy (NULL: none), whether it is refused, and the
 * back-off: when a poll tries a round again (the seam's clock) and the
 * back-off after the next refusal (0: none refused since a granted round). */
typedef struct mcdc_probe_state {
    int members, waiting;
    const void *driver, *deputy;
    bool unusable;
    int64_t retry_us, retry_ms;
} mcdc_probe_state;
void mcdc_runtime_probe_state(mcdc_db_probe *p, mcdc_probe_state *out);
/* Whether the rounds proved owner's change table empty past from; *max
 * then up to where: it has no row in (from, *max] and had none there when
 * they looked, CDC cleanup having removed none of them (what the stream is
 * caught up to while it sleeps, for a host's lag; what a later cleanup
 * may pass without loss). */
bool mcdc_runtime_probe_proven(mcdc_db_probe *p, const void *owner, const mcdc_lsn *from,
                               mcdc_lsn *max);

#endif
