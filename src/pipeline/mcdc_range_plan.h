/*
 * mcdc_range_plan.h - building a range plan (include/mssqlcdc.h,
 * mcdc_range_plan) from planned ranges, for the two planners that hand one
 * out: mcdc_range_plan_create (one capture instance) and
 * mcdc_source_plan_batch (a stream batch across the table's instances).
 */
#ifndef MCDC_RANGE_PLAN_H
#define MCDC_RANGE_PLAN_H

#include <stdbool.h>

#include "mcdc_batch.h"
#include "mcdc_reader.h"
#include "mssqlcdc.h"

/* A plan of the n ranges r (in reading order), range i of capture instance
 * cis[i], in the output schema (a reference is taken). follow: tokens of
 * version 2 (read following the table's instances). events: JSON text of
 * the batch's events, taken over (mcdc_malloc'ed; NULL: "[]"). On failure
 * events is freed too. */
int mcdc_range_plan_build(mcdc_range_plan **out, mcdc_schema *schema, bool follow,
                          const char *const *cis, const mcdc_lsn_range *r, int n, char *events,
                          mcdc_error *err);

#endif /* MCDC_RANGE_PLAN_H */
