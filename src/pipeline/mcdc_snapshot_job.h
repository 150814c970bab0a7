/*
 * mcdc_snapshot_job.h - whole snapshots into bronze (reference §2.4.1): the
 * tracked table's rows as operation 0, stamped with an LSN recorded before
 * the read, in one commit whose userMetadata is the reference's
 * {"snapshot": <capture instance>, "lsn", "commit_ts"}. A stream that
 * starts at that LSN replays every change the read may have missed; the
 * latest image per key absorbs the overlap.
 *
 * Used by mcdc_snapshot_take (the snapshot command) and by the stream's
 * bootstrap.
 */
#ifndef MCDC_SNAPSHOT_JOB_H
#define MCDC_SNAPSHOT_JOB_H

#include "mcdc_changes.h"
#include "mcdc_context.h"
#include "mcdc_lake.h"
#include "mcdc_offset.h"

typedef struct mcdc_snap_env {
    const mcdc_ctx *ctx;     /* budget, stop request */
    mcdc_changes *changes;   /* open, borrowed */
    mcdc_table *target;      /* bronze, borrowed */
    mcdc_schema *bronze;     /* bronze's schema for the changes' output */
    int num_partitions;      /* ranges read at once, at most */
} mcdc_snap_env;

/* The newest snapshot of the tracked table (any of its capture instances)
 * the target holds, by the statistics of its files (rows of operation 0
 * only; _snapshot, or _start_lsn for rows of older snapshots). */
int mcdc_snapshot_find(mcdc_offset *out, bool *found, const mcdc_snap_env *e, mcdc_error *err);
/* The same, and whether one of them is at exactly `exact` (an LSN text). */
int mcdc_snapshot_find_at(mcdc_offset *out, bool *found, const char *exact, bool *exact_found,
                          const mcdc_snap_env *e, mcdc_error *err);

/* Reads the table and appends it in one commit; transient read errors
 * start the read again (the files of a failed attempt are deleted).
 * DataLossError when CDC cleanup passed the snapshot's LSN while it was
 * read: no stream could continue from it. */
typedef int (*mcdc_snapshot_stamped_fn)(void *ctx, const mcdc_offset *stamp, mcdc_error *err);
/* on_stamped (may be NULL) runs once the LSN is recorded, before any row is
 * read (a bootstrap writes its snapshot_open row there). */
int mcdc_snapshot_append(mcdc_offset *out, int64_t *rows, const mcdc_snap_env *e,
                         mcdc_snapshot_stamped_fn on_stamped, void *ctx, mcdc_error *err);

/* Has CDC cleanup passed lsn (changes_ctx: the mcdc_changes)? Its next
 * LSN is below the capture instance's min_lsn (mcdc_purged_fn). */
int mcdc_snapshot_purged(void *changes_ctx, const char *lsn, bool *purged, mcdc_error *err);


#endif /* MCDC_SNAPSHOT_JOB_H */
