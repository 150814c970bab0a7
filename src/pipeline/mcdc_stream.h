/*
 * mcdc_stream.h - the micro-batch stream: CDC changes of one capture
 * instance into a bronze Delta table, exactly once, with a facts row per
 * batch and the finalization verdict advanced after each committed batch.
 *
 * One batch, end to end:
 *   plan   end = min(max_lsn, n-th commit after start); write offsets/<id>
 *   read   [increment(start), end] in commit-aligned ranges (in parallel)
 *   write  bronze: one Delta commit with txn(app_id, id)        (if rows)
 *   facts  facts: one commit with txn(<app_id>#facts, id)       (always)
 *   commit commits/<id> in the checkpoint
 *   verdict finalized_until = truncate(end commit time)         (if control)
 * A crash anywhere replays the same range; Delta's txn skips what was
 * already appended.
 */
#ifndef MCDC_STREAM_H
#define MCDC_STREAM_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcdc_finalization.h"
#include "mcdc_options.h"

typedef enum {
    MCDC_TRIGGER_DEFAULT = 0,       /* back to back; idle polls every 10 ms */
    MCDC_TRIGGER_AVAILABLE_NOW = 1, /* up to max_lsn seen at start, in batches; then stop */
    MCDC_TRIGGER_PROCESSING_TIME = 2, /* a batch at most every interval */
    MCDC_TRIGGER_ONCE = 3           /* one batch up to max_lsn; then stop */
} mcdc_trigger;

typedef struct mcdc_stream_cfg {
    const char *target;        /* bronze: path or schema.table */
    const char *app_id;        /* txnAppId; stable for the life of the checkpoint */
    const char *checkpoint;    /* directory */
    const char *facts_table;   /* NULL: no facts */
    const char *control_table; /* NULL: no verdict */
    const char *warehouse;     /* resolves schema.table names; NULL = ./warehouse */
    const char *query_name;    /* NULL = app_id */
    mcdc_trigger trigger;
    int64_t processing_time_ms;
    mcdc_granularity granularity;
    int64_t max_batches;       /* stop after this many batches; 0 = no limit */
} mcdc_stream_cfg;

typedef struct mcdc_batch_report {
    int64_t batch_id;
    bool replayed;            /* re-ran a planned batch after a crash */
    bool bronze_skipped;      /* the append was already in bronze */
    int64_t rows, deletes, inserts, updates;
    char start_lsn[24], end_lsn[24];
    int64_t end_commit_us;
    bool has_end_commit;
    double duration_ms;
    double rows_per_s;
    double ingestion_lag_seconds; /* < 0 unknown */
    bool has_verdict;
    int64_t finalized_until_us;
} mcdc_batch_report;

typedef void (*mcdc_report_fn)(void *ctx, const mcdc_batch_report *r);

/* Runs the stream until the trigger says stop, max_batches is reached, a
 * stop is requested, or an error. Returns MCDC_OK or the error
 * (MCDC_E_DATALOSS, MCDC_E_SCHEMA, MCDC_E_PERMISSION...). */
int mcdc_stream_run(const mcdc_opts *opts, const mcdc_stream_cfg *cfg, mcdc_report_fn fn,
                    void *ctx, mcdc_error *err);
/* Async-signal-safe: the stream finishes its current batch and returns. */
void mcdc_stream_request_stop(void);
bool mcdc_stream_stop_requested(void);

/* Test hook: MCDC_CRASH_AT=<point>[:<batch_id>] in the environment kills the
 * process with SIGKILL at that point (after_plan, after_bronze,
 * after_facts, after_commit, during_verdict). Used by the crash tests. */
void mcdc_crash_point(const char *point, int64_t batch_id);

#endif /* MCDC_STREAM_H */
