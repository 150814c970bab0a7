/*
 * mssqlcdc_testing.h - test hooks of libmssqlcdc. Not for production: a
 * program that sets them kills itself on purpose.
 *
 * The crash tests kill a job at a named point and check what its restart
 * makes of the state it left. The hooks travel on the source options, which
 * every job takes (the stream, snapshot, seed, backfill, apply, reconcile and
 * repair), and which the CLI fills from its environment (MCDC_CRASH_AT,
 * MCDC_RETRY_BACKOFF_MS); the library itself reads no environment. A job
 * takes the hooks of its options when it is created (mcdc_stream_create...;
 * mcdc_repair_run when it starts).
 *
 * They were fields of the public configs up to MCDC_API_VERSION 2 (crash_at,
 * retry_backoff_ms); those slots are reserved now and must be left zero.
 */
#ifndef MSSQLCDC_TESTING_H
#define MSSQLCDC_TESTING_H

#include "mssqlcdc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of a crash point's text, without its NUL. */
#define MCDC_CRASH_AT_BYTES_MAX 63

/* "<point>[:<unit>]": the job sends itself SIGKILL when it reaches point (of
 * unit, its batch, wave or pass number; of any unit without one). The
 * points: every job on the frame (stream, backfill, apply) after_plan,
 * after_bronze, after_facts, after_commit, during_verdict; the stream also
 * switch_planned, switch_read, switch_committed, switch_done,
 * switch_snapshot_opened, switch_snapshot_read, switch_snapshot_done,
 * during_snapshot, before_generation_state; backfill after_snapshot_plan_rows,
 * during_wave, before_completion; apply during_merge; reconcile
 * before_report, before_report_commit, after_report; repair (and
 * reconcile's) after_bronze. NULL or "" clears it; longer than
 * MCDC_CRASH_AT_BYTES_MAX is MCDC_E_INVALID. */
MCDC_API int mcdc_opts_set_crash_at(mcdc_opts *o, const char *point, mcdc_error *err);

/* Fault injection on one runtime: its nth allocation from now on (1 = the
 * next) fails, on whichever of its jobs' threads it falls; 0 disables. The
 * other runtimes of the process are not touched. */
MCDC_API void mcdc_runtime_fail_alloc_at(mcdc_runtime *rt, int64_t nth);

/* The stream's backoff before the first retry of a transient error
 * (doubling after), 1 to 60000 ms; 0: the default, 1 s. Anything else is
 * MCDC_E_INVALID. */
MCDC_API int mcdc_opts_set_retry_backoff_ms(mcdc_opts *o, int64_t ms, mcdc_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MSSQLCDC_TESTING_H */
