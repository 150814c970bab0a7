/*
 * mcdc_once.h - a job of one unit on a lake ledger: the job frame
 * (mcdc_frame.h) runs it, with the frame's checks, replay and crash points,
 * and its records are its own commits, as backfill's waves are (no
 * checkpoint directory):
 *
 *   plan    the unit's positions (a STAMP: none at its start, the LSN it
 *           is stamped with at its end), kept in memory
 *   run     its commit to the target, txn(app_id, unit), userMetadata
 *           naming the plan and the ledger's id             after_bronze
 *   facts   its facts row, txn(facts_app_id, unit): the record that it
 *           committed                                        after_facts
 *
 * So the ledger reads: planned once the target (or the facts) holds a
 * commit of the unit, committed once the facts do (the target, for a job
 * without facts), and its plan from that commit's "planned". A rerun after
 * a kill between the two replays the unit: the frame verifies the
 * target's commit is this job's and this plan's, and only the facts row is
 * written. A committed unit is done: the job's plan gets its end and says
 * idle. What the frame finds beside that stops the job before it writes:
 * facts that record the unit while the target lacks its commit
 * (MCDC_E_TARGET_BEHIND), a commit of the app id by another program
 * (MCDC_E_FOREIGN_WRITER), the tables in the wrong roles (MCDC_E_MISMATCH).
 *
 * Its jobs: repair (bronze, and its 'repair' facts row), the reconcile
 * report (the report table, no facts). The smallest to copy is the
 * report's (rec_write_report in src/reconcile/mcdc_reconcile_report.c).
 */
#ifndef MCDC_ONCE_H
#define MCDC_ONCE_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_frame.h"

typedef struct mcdc_once_cfg {
    const mcdc_ctx *ctx;
    const char *id;           /* stamped on its commits: the job's own (its app id) */
    const char *name;         /* the ledger in messages: "repair r1" */
    int64_t unit;             /* its number: the txn version of its commits */
    mcdc_table *target;       /* borrowed */
    mcdc_table_kind target_kind;
    const char *target_role;  /* "bronze", "report table" */
    const char *app_id;
    mcdc_table *facts;        /* borrowed; NULL: the target's commit is the record */
    const char *facts_app_id;
    const char *crash_prefix; /* the frame's crash points' (mcdc_frame_cfg); NULL: none */
    /* Optional, on a commit of the unit that names no plan (an earlier
     * build's; um may be NULL): whether it is the job's all the same, and
     * the end it was stamped with (*end STAMP). */
    bool (*owns)(void *job, const char *um);
    bool (*legacy_end)(void *job, const char *um, mcdc_pos *end);
} mcdc_once_cfg;

/* Runs ops (pos_kind STAMP) as a job of one unit: mcdc_frame_run on the
 * lake ledger cfg describes. */
int mcdc_once_run(const mcdc_once_cfg *cfg, const mcdc_job_ops *ops, void *job, mcdc_error *err);

/* What the ledger holds of the unit now, without running anything:
 * *planned (the target or the facts hold a commit of it), *committed (its
 * record is there). */
int mcdc_once_state(const mcdc_once_cfg *cfg, bool *planned, bool *committed, mcdc_error *err);

#endif /* MCDC_ONCE_H */
