/*
 * mcdc_ledger.h - where a job's units are planned and committed: the
 * frame's write-ahead log (mcdc_frame.h), behind one seam.
 *
 * The ledgers:
 *   - a checkpoint directory (mcdc_checkpoint.h): a stream's offsets/ and
 *     commits/, bound to its arguments;
 *   - the lake itself (mcdc_backfill.c): a chunked snapshot's waves, planned
 *     by their rows in the plans table and committed by their facts rows,
 *     as the reference keeps them (no directory of its own);
 *   - the lake for apply (mcdc_silver_position.c): silver's txn plans a
 *     pass, the control row commits it;
 *   - the lake for a job of one unit (mcdc_once.h): its own commits, the
 *     target's and then its facts row (a repair, a reconcile report).
 *
 * Contract, whatever the ledger:
 *   - last() never reports committed > planned;
 *   - read_plan(n) returns, for a unit n that write_plan(n) recorded, the
 *     same positions (mcdc_pos_eq): the frame compares them with the
 *     "planned" a commit carries;
 *   - write_plan(n) is put-if-absent: a second writer of n fails
 *     (MCDC_E_CONFLICT) or, when the ledger's record is a Delta txn, leaves
 *     the first record, which read_plan then returns;
 *   - id() is stamped on every commit the job makes ("checkpoint_id"): the
 *     frame tells its own commits from another ledger's by it.
 */
#ifndef MCDC_LEDGER_H
#define MCDC_LEDGER_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_position.h"
#include "mcdc_util.h"

/* What a committed unit left: its rows, and the newest unit (<= it) whose
 * data the target holds under the job's app id (-1: none yet). */
typedef struct mcdc_ckpt_commit {
    int64_t rows;
    int64_t data_txn;
} mcdc_ckpt_commit;

struct mcdc_unit;

typedef struct mcdc_ledger_ops {
    const char *(*id)(void *self);   /* stamped on commits; "" while fresh */
    const char *(*name)(void *self); /* for messages: "checkpoint /x" */
    /* Nothing recorded yet (no binding, no unit). */
    bool (*fresh)(void *self);
    /* Optional: records the binding before the first unit is planned
     * (start: the position before unit 0, may be NULL). A bound ledger
     * ignores it; NULL: the ledger binds nothing (the lake's). */
    int (*bind)(void *self, const mcdc_pos *start, mcdc_error *err);
    /* Optional: the position recorded before unit 0, or NULL. Borrowed.
     * NULL: none is ever recorded. */
    const mcdc_pos *(*start)(void *self);
    int (*last)(void *self, int64_t *planned, int64_t *committed, mcdc_error *err);
    /* *start and *end (NONE on entry) are owned by the caller. */
    int (*read_plan)(void *self, int64_t n, mcdc_pos *start, mcdc_pos *end, mcdc_error *err);
    int (*write_plan)(void *self, int64_t n, const mcdc_pos *start, const mcdc_pos *end,
                      mcdc_error *err);
    /* Optional: unit n's commit marker. NULL: the ledger keeps none, and a
     * committed unit committed its data (data_txn n). */
    int (*read_commit)(void *self, int64_t n, mcdc_ckpt_commit *out, mcdc_error *err);
    /* Optional: records that unit n committed. NULL: the job's own record
     * (a facts row, a control row) is the commit. */
    int (*write_commit)(void *self, int64_t n, const mcdc_ckpt_commit *m, mcdc_error *err);
    /* Optional: a commit whose userMetadata (um, its text; may be NULL)
     * lacks this ledger's id but is still unit u's, as the ledger planned
     * it (a wave another program appended first). NULL: only the id and the
     * planned range tell. */
    bool (*owns)(void *self, const char *um, const struct mcdc_unit *u);
} mcdc_ledger_ops;

typedef struct mcdc_ledger {
    const mcdc_ledger_ops *ops;
    void *self;
} mcdc_ledger;

#endif /* MCDC_LEDGER_H */
