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

typedef enum {
    MCDC_GRANULARITY_HOUR = 0,
    MCDC_GRANULARITY_MINUTE = 1,
    MCDC_GRANULARITY_DAY = 2
} mcdc_granularity;

/* Start of the period (UTC) holding us: the verdict a commit at us implies.
 * The period holding the end commit itself is not final (commits sharing
 * its tran_end_time may still arrive). */
int64_t mcdc_truncate_us(int64_t us, mcdc_granularity g);
int mcdc_granularity_parse(const char *s, mcdc_granularity *out, mcdc_error *err);

typedef struct mcdc_verdict {
    bool found;                 /* a verdict exists */
    bool moved;                 /* this advance moved it */
    int64_t finalized_until_us; /* UTC */
    int64_t updated_at_us;      /* when it last moved (UTC) */
    char end_lsn[32];           /* batch end LSN that last moved it */
} mcdc_verdict;

/* Reads table_name's verdict; out->found false before the first. */
int mcdc_verdict_read(mcdc_verdict *out, const char *control_table, const char *warehouse,
                      const char *table_name, mcdc_error *err);
/* Moves table_name's verdict to truncate(end_commit_us) if later. Call only
 * after the batch ending at end_lsn is committed. */
int mcdc_verdict_advance(mcdc_verdict *out, const char *control_table, const char *warehouse,
                         const char *table_name, const char *end_lsn, int64_t end_commit_us,
                         mcdc_granularity g, mcdc_error *err);

#endif /* MCDC_FINALIZATION_H */
