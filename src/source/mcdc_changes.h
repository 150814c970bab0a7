/*
 * mcdc_changes.h - the change feed of one capture instance as the stream
 * sees it: positions (max/min LSN, n-th commit, commit times), planning of
 * commit-aligned ranges, and reading a range into batches with its metrics.
 * Implemented on the CDC client and the reader (mcdc_reader.h).
 */
#ifndef MCDC_CHANGES_H
#define MCDC_CHANGES_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_lsn.h"
#include "mcdc_options.h"
#include "mcdc_reader.h"

typedef struct mcdc_changes mcdc_changes;

/* What the host sets beside the options (tests: fast retries). */
typedef struct mcdc_changes_settings {
    int64_t retry_backoff_ms; /* before the first retry (doubling); 0: MCDC_RETRY_BACKOFF_MS_FIRST */
} mcdc_changes_settings;

/* Connects, resolves the capture instance, infers the output schema.
 * settings may be NULL (the defaults). */
int mcdc_changes_open(mcdc_changes **out, const mcdc_opts *opts,
                      const mcdc_changes_settings *settings, mcdc_error *err);
void mcdc_changes_close(mcdc_changes *c);
/* The reader's output schema (reference §2.2); borrowed. */
mcdc_schema *mcdc_changes_schema(mcdc_changes *c);
const char *mcdc_changes_capture_instance(const mcdc_changes *c);

/* sys.fn_cdc_get_max_lsn(); NULL reads as the zero LSN. */
int mcdc_changes_max_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err);
/* sys.fn_cdc_get_min_lsn(ci). */
int mcdc_changes_min_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err);
/* The n-th entry of cdc.lsn_time_mapping after start; *found false when
 * fewer than n exist (then out is the last one, if any). */
int mcdc_changes_nth_commit_after(mcdc_changes *c, const mcdc_lsn *start, int64_t n,
                                  mcdc_lsn *out, bool *found, mcdc_error *err);
/* UTC commit time of an LSN (the mapping entry at or before it), microseconds. */
int mcdc_changes_commit_time(mcdc_changes *c, const mcdc_lsn *lsn, int64_t *utc_us, bool *found,
                             mcdc_error *err);
/* startingLsn resolved: earliest = decrement(min_lsn), latest = max_lsn, or
 * the LSN given (already processed). */
int mcdc_changes_initial(mcdc_changes *c, const char *starting_lsn, mcdc_lsn *out,
                         mcdc_error *err);

/* Commit-aligned ranges of [from, to] balanced by change rows (reference
 * §3.6): at most n_max ranges, each >= ~50,000 rows. *out is owned by the
 * caller (mcdc_free). */
int mcdc_changes_plan(mcdc_changes *c, const mcdc_lsn *from, const mcdc_lsn *to, int n_max,
                      mcdc_lsn_range **out, int *n_out, mcdc_error *err);

/* What reading one range measured (decision record 0014) is the reader's
 * mcdc_reader_metrics (src/source/mcdc_reader.h). */

/* Reads one range on its own connection (so ranges can run in parallel),
 * with the retention guard after the read; transient errors retried. */
int mcdc_changes_read(mcdc_changes *c, const mcdc_lsn_range *r, mcdc_batch_fn fn, void *ctx,
                      mcdc_reader_metrics *m, mcdc_error *err);

#endif /* MCDC_CHANGES_H */
