/*
 * mcdc_generation.h - stream generations (reference §2.4.4, §4.5, ADR
 * 0018): how a stream recovers from CDC data loss by a re-snapshot.
 *
 *   <checkpoint>/_mssql_cdc_generation.json   {"generation": n,
 *       "snapshot_lsn", "commit_ts", "at"} (+ "recovering": the offset the
 *       lost generation had reached, "failed_at", during a recovery)
 *   <checkpoint>/_generations/<n>/            generation n's checkpoint
 *
 * No state file is generation 0: the checkpoint and app id as given.
 * Generation n streams into the same target with checkpoint
 * _generations/<n> and sink app id <app_id>.g<n>, from snapshot_lsn (it
 * ignores startingLsn). The file is read on every run, whatever
 * --on-data-loss says, and replaced atomically (the storage seam's put):
 * writing generation n+1 is the recovery's commit point.
 *
 * A recovery (on_data_loss = resnapshot), before the stream starts:
 *   1. the generation's position (its last committed offset; "recovering"
 *      when a recovery was cut short); nothing to do when CDC still holds
 *      the changes after it;
 *   2. a second loss within resnapshot_interval_days of the last one (or of
 *      a failed attempt) is MCDC_E_DATALOSS: the stream does not keep up
 *      with the retention, and snapshotting again would loop;
 *   3. the state file gets "recovering";
 *   4. full: snapshot_open (kind resnapshot), the snapshot, its resnapshot
 *      row (txn <app_id>#events, version n+1); a snapshot already taken by
 *      a cut-short recovery, newer than the position and not purged, is
 *      reused, and so is the open row of one killed while reading (not
 *      purged): the generation has one open row, which its resnapshot row
 *      closes. Chunked: only a snapshot_open; backfill reads it and writes
 *      the resnapshot row;              crash point before_generation_state
 *   5. the state file names generation n+1.
 */
#ifndef MCDC_GENERATION_H
#define MCDC_GENERATION_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_changes.h"
#include "mcdc_checkpoint.h"
#include "mcdc_context.h"
#include "mcdc_lake.h"

#define MCDC_GENERATION_STATE_FILE "_mssql_cdc_generation.json"

typedef struct mcdc_generation {
    int64_t n;                  /* 0: no state file */
    mcdc_offset snapshot;       /* where generation n starts (n > 0) */
    bool has_at;
    int64_t at_us;              /* when generation n began */
    bool recovering;            /* a recovery was cut short: from this offset */
    mcdc_offset recovering_from;
    bool has_failed_at;
    int64_t failed_at_us;
} mcdc_generation;

/* Reads the state file of the checkpoint (none: generation 0). A file that
 * is not the state's JSON is MCDC_E_CORRUPT. */
int mcdc_generation_read(mcdc_generation *g, const mcdc_storage_env *env, const char *checkpoint,
                         mcdc_error *err);
int mcdc_generation_write(const mcdc_generation *g, const mcdc_storage_env *env,
                          const char *checkpoint, mcdc_error *err);

/* Generation n's checkpoint directory and sink app id (n = 0: as given).
 * Both owned (mcdc_free). */
int mcdc_generation_names(char **checkpoint, char **app_id, const char *base_checkpoint,
                          const char *base_app_id, int64_t n, mcdc_error *err);

/* What a recovery works with; every pointer borrowed. */
typedef struct mcdc_recovery {
    const mcdc_ctx *ctx;
    mcdc_changes *changes;
    mcdc_table *bronze;
    mcdc_schema *bronze_schema;
    int num_partitions;
    mcdc_table *facts;            /* required */
    const char *target;           /* as given: the facts rows' target */
    const char *checkpoint, *app_id; /* as given (generation 0's) */
    mcdc_ckpt_binding binding;    /* generation 0's; app_id replaced per generation */
    bool bootstrap;
    bool chunked;                 /* snapshot mode */
    double interval_days;
    const char *starting_lsn;     /* the option, NULL: none */
    /* Chunked: opens the snapshot of generation n (sink app id sink, lost
     * from/to the commit times given). Set by the caller that can open one. */
    int (*open_chunked)(void *ctx, const char *sink, int64_t n, const mcdc_offset *lost_from,
                        bool has_lost_to, int64_t lost_to_us, mcdc_offset *s, mcdc_error *err);
    void *open_ctx;
} mcdc_recovery;

/* Recovers when CDC lost changes the current generation (*g, read before)
 * has not read; *g then names the new generation. *recovered tells. */
int mcdc_generation_recover(mcdc_generation *g, const mcdc_recovery *r, bool *recovered,
                            mcdc_error *err);

#endif /* MCDC_GENERATION_H */
