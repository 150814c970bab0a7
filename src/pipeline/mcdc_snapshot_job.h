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
 *
 * Why a whole snapshot (and a seed, and the re-snapshot of a generation) is
 * no unit of the job frame, though its snapshot_open row reads like a plan
 * and its bootstrap or resnapshot row like a commit: the frame's replay
 * runs a planned unit again with the same positions and tells it done by a
 * txn of its own on the target, and neither holds here. Its bronze commit
 * carries no txn (the reference's carries none, and both find a whole
 * snapshot by its rows: mcdc_snapshot_find), its full open row none either
 * (the reference writes one per run, at that run's own LSN), and a killed
 * run's open is not replayed: the next run takes a new LSN, as the
 * reference's does (a re-snapshot keeps the open row a killed run wrote,
 * mcdc_generation.c). Their completion rows share one app id
 * (<app_id>#events, mcdc_txn.h) across the stream's generations, the
 * bootstrap and a seed. So they call the frame's shared checks instead:
 * the tables' roles (mcdc_frame_check_roles) before the source is asked,
 * and the re-snapshot the check of a record written once
 * (mcdc_frame_check_once) before its state moves.
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

/* The newest whole snapshot (or seed) of the tracked table (any of its
 * capture instances) the target holds, by the statistics of its files (rows
 * of operation 0 only; _snapshot, or _start_lsn for rows of older
 * snapshots) and, for one without rows (an empty table's, an empty copy
 * seeded with allow_empty), by its commit's userMetadata (the log is read
 * back to the newest such commit); without one, the S of the newest chunked
 * snapshot with a wave in (reference snapshot(): a rerun never returns an
 * LSN newer than its rows). The snapshot command, seed, the bootstrap and
 * the re-snapshot all find snapshots here, so they agree on what counts. */
int mcdc_snapshot_find(mcdc_offset *out, bool *found, const mcdc_snap_env *e, mcdc_error *err);
/* The rows target already holds are of changes' table: MCDC_E_MISMATCH when
 * none of the capture instances they name (by the files' statistics) is
 * one of its instances or its default name; name is the target as given. */
int mcdc_snapshot_check_table(mcdc_table *target, const char *name, mcdc_changes *changes,
                              mcdc_error *err);
/* Whole snapshots only (a chunked one is complete only by its facts). */
int mcdc_snapshot_find_whole(mcdc_offset *out, bool *found, const mcdc_snap_env *e,
                             mcdc_error *err);
/* Either, as chunks says, and whether a whole one is at exactly `exact` (an
 * LSN text). */
int mcdc_snapshot_find_at(mcdc_offset *out, bool *found, bool chunks, const char *exact,
                          bool *exact_found, const mcdc_snap_env *e, mcdc_error *err);

/* Reads the table and appends it in one commit; transient read errors
 * start the read again (the files of a failed attempt are deleted).
 * DataLossError when CDC cleanup passed the snapshot's LSN while it was
 * read: no stream could continue from it. */
typedef int (*mcdc_snapshot_stamped_fn)(void *ctx, const mcdc_offset *stamp, mcdc_error *err);
/* on_stamped (may be NULL) runs once the LSN is recorded, before any row is
 * read (a bootstrap writes its snapshot_open row there). */
int mcdc_snapshot_append(mcdc_offset *out, int64_t *rows, const mcdc_snap_env *e,
                         mcdc_snapshot_stamped_fn on_stamped, void *ctx, mcdc_error *err);

/* Opens a chunked snapshot for a stream generation (reference §2.4.2):
 * records S (max_lsn, before anything else), reads the key's extent, writes
 * the whole open detail {mode, kind, generation, lost_from_ts, lost_to_ts,
 * keys, plan} to the target's plans table (txn <app_id>#snapopen.<S>), then
 * the 'snapshot_open' facts row without keys and plan (txn
 * <app_id>#snapshots, version generation: once per generation). Nothing of
 * the table is read: backfill does that. *s: the open that stands (a rerun
 * finds the first one's). */
typedef struct mcdc_chunked_open {
    mcdc_changes *changes;
    mcdc_table *facts;
    const char *target, *warehouse; /* bronze as given */
    const mcdc_storage_env *env;
    const char *app_id;             /* the stream's (generation 0's) */
    const char *sink;               /* the generation's sink app id */
    int64_t generation;
    const char *kind;               /* "bootstrap" or "resnapshot" */
    const mcdc_offset *lost_from;   /* NULL: no loss */
    bool has_lost_to;
    int64_t lost_to_us;
    /* After a capture instance switch (snapshot on switch): S is `at`, the
     * newer instance's start LSN, which the stream has read past, and the
     * detail names switch_batch_id. Both rows then carry txn
     * <app_id>#snapopen.<S> version 0 (once per S: the generation's own
     * key may be taken). at NULL: an open of its own. */
    const mcdc_offset *at;
    int64_t switch_batch_id;
    const mcdc_ctx *ctx; /* crash points (tests): switch_snapshot_opened, between the plans
                            row and the facts row of a switch's; its registry entry hears
                            the open's S; may be NULL */
} mcdc_chunked_open;
int mcdc_snapshot_open_chunked(mcdc_offset *s, const mcdc_chunked_open *o, mcdc_error *err);

/* Has CDC cleanup passed lsn (changes_ctx: the mcdc_changes)? Its next
 * LSN is below the capture instance's min_lsn (mcdc_purged_fn). */
int mcdc_snapshot_purged(void *changes_ctx, const char *lsn, bool *purged, mcdc_error *err);
/* The same for a stream's position that records the instance it read
 * (read_ci; mcdc_changes_min_lsn_at). */
int mcdc_snapshot_purged_after(mcdc_changes *c, const char *lsn, const char *read_ci, bool *purged,
                               mcdc_error *err);


#endif /* MCDC_SNAPSHOT_JOB_H */
