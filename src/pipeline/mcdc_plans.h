/*
 * mcdc_plans.h - a bronze table's plans table, <target>_snapshot_plans
 * (reference ADR 0028 amendment 4): the key values of its chunked
 * snapshots. Facts rows of 'snapshot_open', 'snapshot_plan' and
 * 'snapshot_chunk' leave those values out (keys and plan; chunks; lo and
 * hi); a row here holds the payload whole, and is written first.
 *
 * Rows are appended with a Delta txn (the facts rows' own), so a rerun's
 * append is skipped and the first record stands.
 */
#ifndef MCDC_PLANS_H
#define MCDC_PLANS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcdc_lake.h"

/* The plans table of bronze `target` (a name or a location, as given):
 * the same with "_snapshot_plans" appended (a trailing '/' dropped first).
 * *out owned (mcdc_free). */
int mcdc_plans_name(char **out, const char *target, mcdc_error *err);

/* Appends one row per detail (event = the facts row's event) for snapshot
 * s in one commit, with txn(txn_app_id, version); *skipped when that txn is
 * there already. Creates the table (kind plans) when missing. */
int mcdc_plans_write(mcdc_table *plans, const char *s, const char *event,
                     json_t *const *details, int n, const char *txn_app_id, int64_t version,
                     bool *skipped, mcdc_error *err);

/* The rows of snapshot s, by event (and on a chunk, its chunk and wave). */
typedef struct mcdc_plan_rows {
    int n;
    struct mcdc_plan_row {
        char event[16];
        int64_t chunk, wave; /* -1 when the detail has none */
        json_t *detail;      /* owned */
    } *rows;
} mcdc_plan_rows;

/* None when the table does not exist. */
int mcdc_plans_load(mcdc_plan_rows *out, mcdc_table *plans, const char *s, mcdc_error *err);
void mcdc_plan_rows_free(mcdc_plan_rows *p);
/* The detail of (event, chunk, wave) (-1: none), or NULL. Borrowed. */
const json_t *mcdc_plan_rows_find(const mcdc_plan_rows *p, const char *event, int64_t chunk,
                                  int64_t wave);

/* A facts row's detail whole: as it is when it holds its key values
 * (written before 0.7.0), else its plans row's. NULL (and an error naming
 * the plans table) when neither has them. Borrowed from detail or p. */
const json_t *mcdc_plans_whole(const mcdc_plan_rows *p, const char *plans_name,
                               const char *event, const json_t *detail, mcdc_error *err);

/* detail without the keys the plans table keeps for event: the facts
 * row's payload (a new reference). */
json_t *mcdc_plans_public(const char *event, const json_t *detail);

#endif /* MCDC_PLANS_H */
