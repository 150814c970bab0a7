/*
 * mcdc_finalization.h - finalized_until: which periods of a table are
 * complete (reference §2.9). Data first, verdict after, never backwards.
 */
#ifndef MCDC_FINALIZATION_H
#define MCDC_FINALIZATION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mcdc_util.h"

/* The granularity, the verdict and their functions are public: see
 * include/mssqlcdc.h. */

#include "mcdc_lake.h"

/* mcdc_verdict_advance on an open control table (a job keeps its own, on
 * its storage env). */
int mcdc_verdict_advance_table(mcdc_verdict *out, mcdc_table *control, const char *table_name,
                               const char *end_lsn, int64_t end_commit_us, mcdc_granularity g,
                               mcdc_error *err);

#endif /* MCDC_FINALIZATION_H */
