/*
 * mcdc_facts.h - the rows a unit writes to the facts table (reference
 * §2.3.3, §2.3.4): the micro-batch row and the event rows next to it. The
 * frame commits them (mcdc_frame.h); jobs build them here.
 */
#ifndef MCDC_FACTS_H
#define MCDC_FACTS_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_lake.h"
#include "mcdc_lsn.h"
#include "mcdc_reader.h"

/* What a unit's change rows hold, counted as they pass. */
typedef struct mcdc_unit_stats {
    int64_t rows, deletes, inserts, updates;
    char min_lsn[24], max_lsn[24]; /* "" before the first row */
    int64_t min_ts, max_ts;        /* UTC µs; valid when rows > 0 */
} mcdc_unit_stats;

/* Adds a batch of the reader's output schema (_start_lsn, _operation,
 * _commit_ts columns). */
void mcdc_unit_stats_add(mcdc_unit_stats *s, const mcdc_batch *b);

/* The read metrics of a unit's ranges, folded (decision record 0014). */
typedef struct mcdc_unit_metrics {
    bool any;
    double rtt_ms, read_seconds, read_mb;
    bool has_rtt, network_known;
    int64_t network_wait_ms;
    mcdc_reader_metrics last; /* the range that measured the position */
    bool has_last;
} mcdc_unit_metrics;

void mcdc_unit_metrics_fold(mcdc_unit_metrics *f, const mcdc_reader_metrics *m, int n);

/* One micro-batch row (event NULL). Strings borrowed. */
typedef struct mcdc_facts_batch {
    const char *app_id, *target;
    int64_t batch_id;
    const mcdc_unit_stats *stats;
    const mcdc_unit_metrics *metrics;
    int64_t started_us, duration_ms, written_us;
    const char *end_lsn;   /* the unit's planned end */
    bool has_end_ts;
    int64_t end_commit_us;
    const char *detail;    /* JSON {"warnings": [...]}, or NULL */
} mcdc_facts_batch;

int mcdc_facts_append_batch(mcdc_batch *rows, const mcdc_facts_batch *fb, mcdc_error *err);

/* One data_skipped event row: detail {from, to, certain, [reason]},
 * min_lsn..max_lsn the skipped range, lost_from_ts/lost_to_ts when known
 * (lost_to_ts only when certain). */
typedef struct mcdc_facts_skip {
    const char *app_id, *target;
    int64_t batch_id;
    mcdc_lsn from, to;
    bool certain;
    const char *reason;    /* NULL: none */
    bool has_lost_from, has_lost_to;
    int64_t lost_from_us, lost_to_us;
    int64_t written_us;
} mcdc_facts_skip;

int mcdc_facts_append_skip(mcdc_batch *rows, const mcdc_facts_skip *sk, mcdc_error *err);

/* An event row (reference §2.3.4): outside a micro-batch (bootstrap,
 * resnapshot, snapshot_open, snapshot_plan) batch_id NULL; inside one
 * (schema_change, capture_instance_switched) the batch's id, in the batch's
 * facts commit. min_lsn = max_lsn = end_lsn = lsn, min/max/end_commit_ts
 * its commit time, no deletes, inserts or updates; a known loss's end is
 * the retention watermark, and the headroom the hours from it to the
 * commit time. */
typedef struct mcdc_facts_event {
    const char *app_id, *target;
    const char *event;
    bool in_batch;        /* batch_id set */
    int64_t batch_id;
    int64_t rows;         /* < 0: NULL (a recovery that reused a snapshot) */
    const char *lsn;      /* NULL: none */
    bool has_commit_ts;
    int64_t commit_us;
    const char *detail;   /* JSON, or NULL */
    bool has_lost_from, has_lost_to;
    int64_t lost_from_us, lost_to_us;
    bool has_timing;      /* started_at and duration_ms */
    int64_t started_us, duration_ms;
} mcdc_facts_event;

/* The same as one row of a batch of the facts schema (to commit with
 * others, or through the frame). */
int mcdc_facts_append_event(mcdc_batch *rows, const mcdc_facts_event *ev, mcdc_error *err);

/* One 'snapshot_chunk' row: a chunk of a chunked snapshot read in a wave
 * stamped lsn (min_lsn; its commit time min_commit_ts), max_lsn how far
 * capture had got after the read, the wave's timing and the chunk's read
 * metrics. */
typedef struct mcdc_facts_chunk {
    const char *app_id, *target;
    int64_t rows;
    const char *lsn, *high_lsn;   /* high_lsn NULL: unknown */
    bool has_lsn_ts, has_high_ts;
    int64_t lsn_ts_us, high_ts_us;
    int64_t started_us, duration_ms;
    bool has_read;                /* read_seconds, read_mb */
    double read_seconds, read_mb;
    const char *detail;           /* the row's payload (JSON) */
} mcdc_facts_chunk;
int mcdc_facts_append_chunk(mcdc_batch *rows, const mcdc_facts_chunk *c, mcdc_error *err);

/* Appends ev in one commit of its own to facts (created as a facts table
 * when missing), with txn(txn_app_id, txn_version) when txn_app_id is set:
 * *skipped when that txn was already there (written before: nothing new). */
int mcdc_facts_write_event(mcdc_table *facts, const mcdc_facts_event *ev, const char *txn_app_id,
                           int64_t txn_version, bool *skipped, mcdc_error *err);


#endif /* MCDC_FACTS_H */
