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
/* The largest commit LSN at or before a UTC time, to the second, on the
 * server's clock (sys.fn_cdc_map_time_to_lsn); *found false when no commit
 * is at or before it (any more). */
int mcdc_changes_time_to_lsn(mcdc_changes *c, int64_t utc_us, mcdc_lsn *out, bool *found,
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

/* ---- the tracked table's rows: snapshots (reference §2.4.1, §3.7) ----------
 * The source table of the capture instance read in the output schema:
 * _operation 0, _start_lsn the snapshot's LSN, _commit_ts its commit time,
 * _seqval and _command_id NULL; a captured column the table has dropped
 * (matched by column_id) reads NULL. READ COMMITTED, or SNAPSHOT with
 * isolationLevel=snapshot; lockTimeoutMs sets LOCK_TIMEOUT; never NOLOCK. */

/* A range of the key the reads are cut on: [lo, hi) of a single integer
 * key (an open end without has_*), the first range also taking NULL keys;
 * no key: the whole table. */
typedef struct mcdc_snapshot_range {
    bool keyed;
    bool has_lo, has_hi, with_nulls;
    int64_t lo, hi;
} mcdc_snapshot_range;

/* The snapshot's LSN, recorded before anything is read: snapshotLsn when
 * set, else max_lsn, or the capture instance's first LSN minus one while
 * capture has not reached it; and its commit time (*has_ts false when no
 * commit maps to it). */
int mcdc_changes_snapshot_lsn(mcdc_changes *c, mcdc_lsn *out, int64_t *commit_us, bool *has_ts,
                              mcdc_error *err);
/* Up to n_max ranges to read in parallel: uniform ranges of [MIN, MAX] of a
 * single integer key (the unique index's, or snapshotKeys), else one. *out
 * owned (mcdc_free). */
int mcdc_changes_snapshot_plan(mcdc_changes *c, int n_max, mcdc_snapshot_range **out, int *n_out,
                               mcdc_error *err);
/* Reads one range on its own connection; batches (output schema) to fn. */
int mcdc_changes_snapshot_read(mcdc_changes *c, const mcdc_snapshot_range *r, const mcdc_lsn *lsn,
                               bool has_ts, int64_t commit_us, mcdc_batch_fn fn, void *ctx,
                               mcdc_reader_metrics *m, mcdc_error *err);
/* Is name one of the capture instances of the tracked table (ignoring
 * case)? A prefix: name may be a statistic cut at some characters. */
int mcdc_changes_is_table_instance(mcdc_changes *c, const char *name, bool prefix, bool *yes,
                                   mcdc_error *err);
/* The tracked table, "schema.table" (borrowed strings). */
const char *mcdc_changes_source_schema(const mcdc_changes *c);
const char *mcdc_changes_source_table(const mcdc_changes *c);

#endif /* MCDC_CHANGES_H */
