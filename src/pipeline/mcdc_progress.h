/*
 * mcdc_progress.h - how far a long job is, told to its caller while it runs.
 *
 * A job that reads or writes many rows (a snapshot, a seed, a backfill
 * wave, apply's rebuild, reconcile) owns one tracker. Its threads add the
 * rows and bytes they finish (a batch at a time, never a row at a time);
 * the tracker calls the caller's mcdc_progress_fn at most once per
 * interval, from whichever thread is adding when the interval has passed,
 * never from two threads at once. A phase change and the end are told at
 * once.
 *
 * Every function takes NULL (no tracker: nothing is counted or told), so a
 * job calls them without asking whether anyone listens.
 */
#ifndef MCDC_PROGRESS_H
#define MCDC_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_util.h"

typedef struct mcdc_progress_tracker mcdc_progress_tracker;

/* job: a static name ("snapshot", "apply"...). fn NULL: *out is NULL (no
 * tracker). interval_ms: the least time between two reports (>= 1). */
int mcdc_progress_create(mcdc_progress_tracker **out, const char *job, mcdc_progress_fn fn,
                         void *user, int64_t interval_ms, mcdc_error *err);
/* NULL-safe. Does not report: call mcdc_progress_finish first. */
void mcdc_progress_free(mcdc_progress_tracker *t);
/* mcdc_progress_finish, then mcdc_progress_free: a job's every exit. */
void mcdc_progress_end(mcdc_progress_tracker *t);

/* A new phase (a static string: "reading", "sorting", "merging"...): its
 * parts (a static noun such as "ranges", or NULL), how many (-1: unknown),
 * and the rows it will handle (-1: unknown; estimated: the server's
 * estimate, not a count). Counts restart at zero; told at once. Call from
 * the job's own thread, while no other thread adds. */
void mcdc_progress_phase(mcdc_progress_tracker *t, const char *phase, const char *parts_name,
                         int64_t parts_total, int64_t rows_total, bool estimated);
/* Rows and bytes finished (any thread); told when the interval passed. */
void mcdc_progress_add(mcdc_progress_tracker *t, int64_t rows, int64_t bytes);
/* One part finished (any thread); told when the interval passed. */
void mcdc_progress_part_done(mcdc_progress_tracker *t);
/* n parts finished at once (parts passed over without work). */
void mcdc_progress_parts_add(mcdc_progress_tracker *t, int64_t n);
/* The job's own parts across its phases (a static noun; done: those
 * finished before, by earlier runs too; total -1: unknown), told from the
 * next report on; phases do not reset them. Call from the job's thread. */
void mcdc_progress_job_parts(mcdc_progress_tracker *t, const char *name, int64_t done,
                             int64_t total);
/* n of the job's parts finished (any thread). */
void mcdc_progress_job_parts_add(mcdc_progress_tracker *t, int64_t n);
/* The rows of the phase are known now (a count replacing an estimate). */
void mcdc_progress_set_total(mcdc_progress_tracker *t, int64_t rows_total);
/* The job's last report (done true), told at once; later calls tell
 * nothing. */
void mcdc_progress_finish(mcdc_progress_tracker *t);

/* What was counted so far in this phase (tests, summaries). */
int64_t mcdc_progress_rows(const mcdc_progress_tracker *t);

#endif /* MCDC_PROGRESS_H */
