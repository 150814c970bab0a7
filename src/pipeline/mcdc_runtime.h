/*
 * mcdc_runtime.h - what the jobs of one host share (include/mssqlcdc.h,
 * "The runtime"): the allocator's accounting, the log sink, the budget and
 * the probe of each database. The jobs reach it through these calls; a job
 * given no runtime takes the defaults each call states.
 */
#ifndef MCDC_RUNTIME_H
#define MCDC_RUNTIME_H

#include "mcdc_context.h"
#include "mcdc_util.h"

/* The accounting a job charges: the runtime's, or without one the creating
 * thread's (whatever its host bound; NULL: uncounted). */
mcdc_alloc_acct *mcdc_runtime_acct_or_bound(mcdc_runtime *rt);
/* The budget a job uses: its own config's when set, else the runtime's
 * (NULL: no limit). */
mcdc_budget *mcdc_runtime_budget_or(mcdc_runtime *rt, mcdc_budget *own);
/* The runtime's log function when a job has none of its own (NULL: none;
 * then the job logs to stderr). */
mcdc_log_fn mcdc_runtime_log_fn(const mcdc_runtime *rt, void **user);

#endif
