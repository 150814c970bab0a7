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

bool mcdc_stream_stop_requested(void);

/* Test hook: MCDC_CRASH_AT=<point>[:<batch_id>] in the environment kills the
 * process with SIGKILL at that point (after_plan, after_bronze,
 * after_facts, after_commit, during_verdict). Used by the crash tests. */
void mcdc_crash_point(const char *point, int64_t batch_id);

#endif /* MCDC_STREAM_H */
