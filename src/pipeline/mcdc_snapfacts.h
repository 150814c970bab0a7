/*
 * mcdc_snapfacts.h - the snapshots of one stream as its facts record them
 * (reference §2.4, the seed's payload types): which snapshot each
 * generation opened, in which mode, whether it completed, and a chunked
 * one's plan and chunks.
 *
 * The rows: 'snapshot_open' (written before a snapshot reads anything),
 * 'snapshot_plan' and 'snapshot_chunk' (a chunked one's, written by
 * backfill), 'bootstrap' and 'resnapshot' (a completion: max_lsn >= the
 * open's S closes it), and 'capture_instance_switched' (the batch a
 * snapshot on switch follows). A stream's rows carry its generations' sink app ids:
 * app_id itself and app_id.g<n>.
 *
 * The mode lock (reference §2.4.5): one mode while a snapshot is open. A
 * chunked open counts until a completion at or past its S; a full one only
 * while a run may still be reading it (not once CDC cleanup passed its S,
 * nor next to a chunked open of its generation).
 */
#ifndef MCDC_SNAPFACTS_H
#define MCDC_SNAPFACTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcdc_lake.h"
#include "mcdc_lsn.h"

typedef enum {
    MCDC_SNAP_OPEN = 0,
    MCDC_SNAP_PLAN,
    MCDC_SNAP_CHUNK,
    MCDC_SNAP_BOOTSTRAP,
    MCDC_SNAP_RESNAPSHOT,
    MCDC_SNAP_SWITCHED, /* capture_instance_switched: what a snapshot on switch answers */
} mcdc_snap_event;

/* One facts row of a snapshot event. */
typedef struct mcdc_snap_row {
    mcdc_snap_event event;
    char *app_id;                       /* owned: the sink app id */
    bool has_rows;
    int64_t rows;
    char min_lsn[MCDC_LSN_TEXT_LEN + 1]; /* "" when NULL */
    char max_lsn[MCDC_LSN_TEXT_LEN + 1];
    bool has_min_ts, has_max_ts, has_lost_from, has_lost_to, has_written, has_duration;
    int64_t min_ts_us, max_ts_us, lost_from_us, lost_to_us, written_us, duration_ms;
    bool has_read_seconds;
    double read_seconds;
    bool has_batch_id;                  /* the batch's (a switch row's) */
    int64_t batch_id;
    json_t *detail;                     /* owned; NULL: none, or not JSON */
} mcdc_snap_row;

typedef struct mcdc_snapfacts {
    mcdc_snap_row *rows;
    int n;
} mcdc_snapfacts;

/* The snapshot rows of app_id's stream (every generation; NULL: every
 * stream's, as silver reads them) for target in facts (none when facts does
 * not exist). target matches as given or by
 * the location it resolves to under warehouse. */
int mcdc_snapfacts_load(mcdc_snapfacts *out, mcdc_table *facts, const char *target,
                        const char *warehouse, const char *app_id, mcdc_error *err);
void mcdc_snapfacts_free(mcdc_snapfacts *sf);

/* A 'snapshot_open' row's detail: {mode, kind, generation, lost_from_ts,
 * lost_to_ts} (the losses' commit times in ISO 8601 to the millisecond, as
 * the reference writes them; null when has_lost_* is false). */
json_t *mcdc_snap_open_detail(const char *mode, const char *kind, int64_t generation,
                              bool has_lost_from, int64_t lost_from_us, bool has_lost_to,
                              int64_t lost_to_us);
/* The same after a capture instance switch: kind bootstrap, no loss, and
 * switch_batch_id, the batch of its 'capture_instance_switched' row. */
json_t *mcdc_snap_switch_detail(const char *mode, int64_t generation, int64_t switch_batch_id);

/* "full" or "chunked": an open row's mode (a missing or unknown one is
 * chunked, as the reference reads it). */
const char *mcdc_snap_mode(const mcdc_snap_row *open);
/* The newest completion's LSN (bootstrap or resnapshot max_lsn) among the
 * rows of sink_id (NULL: every sink of the stream); NULL when none. */
const char *mcdc_snapfacts_done_max(const mcdc_snapfacts *sf, const char *sink_id);

/* The snapshot opened for one generation (sink_id): its chunked open, else
 * its newest full one; NULL when none. *done: completed (a completion of
 * sink_id at or past its S). */
const mcdc_snap_row *mcdc_snapfacts_opened(const mcdc_snapfacts *sf, const char *sink_id,
                                           bool *done);
/* The newest chunked open of the stream (any generation); NULL when none. */
const mcdc_snap_row *mcdc_snapfacts_newest_chunked(const mcdc_snapfacts *sf);
/* The 'snapshot_plan' row of the snapshot at s; NULL when not planned. */
const mcdc_snap_row *mcdc_snapfacts_plan(const mcdc_snapfacts *sf, const char *s);

/* The snapshot on switch a generation (sink_id) still owes: its newest
 * 'capture_instance_switched' row (by batch_id) unless a 'snapshot_open'
 * of sink_id names that batch in switch_batch_id and is chunked (backfill
 * reads it from there) or completed (a completion of sink_id at or past
 * its LSN). NULL when nothing is owed. *full_open: the newest full open of
 * that batch that did not complete (its rows may be in bronze already);
 * NULL when none. */
const mcdc_snap_row *mcdc_snapfacts_switch_owed(const mcdc_snapfacts *sf, const char *sink_id,
                                                const mcdc_snap_row **full_open);
/* The newest chunked open of the stream still open (no completion of the
 * stream at or past its S); NULL when none. */
const mcdc_snap_row *mcdc_snapfacts_open_chunked(const mcdc_snapfacts *sf);

/* Has CDC cleanup passed lsn (a full snapshot opened there can never
 * complete)? */
typedef int (*mcdc_purged_fn)(void *ctx, const char *lsn, bool *purged, mcdc_error *err);

/* The mode lock: MCDC_E_SNAPSHOT_OPEN when the stream has a snapshot open
 * in target in another mode than `mode` ("full", "chunked"; NULL: any
 * mode, a seed's), saying how to finish it. `what` says what is refused
 * ("no chunked snapshot is taken until it does"). */
int mcdc_snapfacts_lock(const mcdc_snapfacts *sf, const char *target, const char *mode,
                        mcdc_purged_fn purged, void *purged_ctx, mcdc_error *err);

#endif /* MCDC_SNAPFACTS_H */
