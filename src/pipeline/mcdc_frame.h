/*
 * mcdc_frame.h - the job frame: the one protocol every job runs on.
 *
 * A job (the stream, a chunked snapshot's backfill waves, apply's passes; a
 * repair and a reconcile report, jobs of one unit) produces units, numbered
 * 0, 1, 2... The frame runs them one after the other, recording each in
 * the job's ledger (mcdc_ledger.h: a checkpoint directory, or the lake
 * itself):
 *
 *   check   the checkpoint, the target's txn for the job's app id and the
 *           facts' txn agree (at start, and again before every unit: one
 *           read of each table's newest commits)
 *   plan    the job plans unit n from the last committed position;
 *           offsets/n is written before any work (write-ahead)   after_plan
 *   run     the job reads and writes its data: one commit to the target
 *           with txn(app_id, n) whose userMetadata names the planned
 *           positions and this checkpoint                       after_bronze
 *   facts   the unit's facts rows: one commit with txn(facts_app_id, n)
 *           and the same binding                                 after_facts
 *   commit  commits/n                                            after_commit
 *   verdict finalized_until moves to the unit's end            during_verdict
 *           (data first, verdict after; a failure is logged and retried
 *           after the next unit, it never stops the job)
 *
 * Overlap (mcdc_frame_cfg.overlap, a job whose run comes in two halves,
 * read and publish): unit n+1 is planned and read on a thread of the
 * frame's while unit n publishes (its data commit, facts, commit marker,
 * verdict). n+1's plan is written only after n's commit marker, so the
 * order of the records above holds unit by unit; a failed or killed publish
 * of n, a stop or a lost lease discard n+1's read, of which nothing was
 * committed or recorded.
 *
 * Replay: a unit planned but not committed runs again with the same
 * positions. A commit the target or the facts already hold for it is
 * skipped only when its userMetadata names exactly the positions this
 * checkpoint planned and this checkpoint's id; anything else stops the job
 * with an error naming both.
 *
 * Positions are typed (mcdc_position.h: one shape per kind of job); the
 * ledger stores them as their JSON, and the frame compares them field by
 * field.
 *
 * Integrity (what stops a job before it writes anything wrong):
 *   MCDC_E_MISMATCH        checkpoint bound to other arguments, a table of
 *                          another kind, one table in two roles
 *                          (mcdc_frame_check_roles: at start, and by every
 *                          job before it asks its source anything)
 *   MCDC_E_TARGET_BEHIND   the target lacks a unit the checkpoint committed
 *   MCDC_E_FACTS_BEHIND    the facts lack a committed unit's row
 *   MCDC_E_REWOUND         a table holds units of this app id that the
 *                          checkpoint has not committed
 *   MCDC_E_FOREIGN_WRITER  a table holds a unit of this app id committed by
 *                          another checkpoint (or another program); or
 *                          another process runs on this checkpoint: it
 *                          planned the unit first, or committed a unit
 *                          this run had not seen (the tables are ahead of
 *                          the ledger, which has moved since it was read),
 *                          or committed the unit this run was writing
 *
 * One process per checkpoint: the stream holds its checkpoint's lock
 * (mcdc_checkpoint_lock) for the whole run, so the last three are caught
 * here only where the storage has no locks.
 *
 * Ledgers (mcdc_ledger.h): a checkpoint directory (the stream's), the lake
 * (backfill's waves, apply's passes), or a job of one unit whose records
 * are its own commits (mcdc_once.h: a repair, a reconcile report).
 */
#ifndef MCDC_FRAME_H
#define MCDC_FRAME_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcdc_checkpoint.h"
#include "mcdc_ledger.h"
#include "mcdc_context.h"
#include "mcdc_lake.h"
#include "mcdc_position.h"

typedef struct mcdc_frame mcdc_frame;
/* What a unit read ahead waits on: the publish of the unit before it
 * (mcdc_job_ops.read). */
typedef struct mcdc_frame_gate mcdc_frame_gate;

typedef struct mcdc_unit {
    int64_t id;
    bool replay;           /* planned by an earlier run that did not commit it */
    const mcdc_pos *start; /* the position after the previous unit (borrowed) */
    const mcdc_pos *end;   /* the position this unit reaches (borrowed) */
    bool data_done;      /* the target already holds this unit's commit (verified) */
    bool facts_done;     /* the facts already hold its row (verified): a replay's
                            facts commit is skipped by the txn rule */
} mcdc_unit;

typedef struct mcdc_unit_result {
    int64_t rows;          /* rows the unit holds (counted even when data_done) */
    bool data_committed;   /* the target holds a commit of this unit now */
    bool has_end_time;     /* the verdict moves to end_commit_us */
    int64_t end_commit_us;
    char end_lsn[32];
} mcdc_unit_result;

typedef struct mcdc_job_ops {
    const char *kind;       /* recorded in the checkpoint: "stream" */
    mcdc_pos_kind pos_kind; /* the shape of its positions */
    /* The unit after last_end (NULL: nothing committed yet; *start is then
     * the job's first position, else a copy of last_end). *idle: nothing to
     * do now. *start and *end (NONE on entry) are owned by the caller. */
    int (*plan)(void *job, const mcdc_pos *last_end, mcdc_pos *start, mcdc_pos *end, bool *idle,
                mcdc_error *err);
    /* Optional: the unit a ledger's first runs as when plan finds nothing
     * new (*start and *end, owned by the caller, equal: it reads nothing),
     * from last_end as plan has it; *start left NONE: the job knows no
     * position yet, and stays idle. The reference's batch 0 of a new
     * checkpoint: Spark runs it whatever its source says, and every batch
     * writes its facts row, so batch ids, txn versions and facts rows
     * agree with it from the first batch on. Later idle plans run nothing. */
    int (*empty_first)(void *job, const mcdc_pos *last_end, mcdc_pos *start, mcdc_pos *end,
                       mcdc_error *err);
    /* Optional: runs at start when the checkpoint holds no unit and no
     * start position yet, after the tables were checked (a stream's
     * bootstrap snapshot). *start (owned by the caller; may stay NONE) is
     * the position before unit 0: the checkpoint is bound with it, and
     * later runs start from it. */
    int (*before_first)(void *job, mcdc_pos *start, mcdc_error *err);
    /* Optional: a fresh checkpoint's first unit, before anything is written:
     * refuse state the job cannot continue from (MCDC_E_MISMATCH). */
    int (*check_fresh)(void *job, const mcdc_pos *start, mcdc_error *err);
    /* Reads and writes the unit's data (mcdc_frame_commit_data), unless
     * u->data_done, and fills res. NULL: the job gives read, publish and
     * discard instead. */
    int (*run)(void *job, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
               mcdc_error *err);
    /* run in two halves, so that a unit can be read while the one before
     * it is published (mcdc_frame_cfg.overlap). A job gives all three or
     * none.
     *   read     reads unit u's data into the job's slot (0 or 1), encoded
     *            into files that nothing commits yet: no record, no commit.
     *            With overlap it runs on a thread of the frame's while the
     *            unit before publishes (gate not NULL), after u was planned
     *            and before its plan is recorded; it uses the job's source
     *            and the slot, nothing that publish, facts or done use.
     *            Before it holds more than one unpublished file it waits
     *            for that publish (mcdc_frame_gate_wait): memory stays
     *            bounded.
     *   publish  on the frame's thread, once u's plan is recorded: commits
     *            the slot's data (mcdc_frame_commit_data, unless
     *            u->data_done) and fills res; the facts and done calls that
     *            follow are about the slot's unit. Frees the slot.
     *   discard  frees a slot read and never published (the publish before
     *            it failed or was killed, a stop): nothing of it is
     *            committed. NULL-safe on an empty slot. */
    int (*read)(void *job, int slot, const mcdc_unit *u, mcdc_frame_gate *gate, mcdc_error *err);
    int (*publish)(void *job, int slot, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                   mcdc_error *err);
    void (*discard)(void *job, int slot);
    /* Optional, with overlap: whether the unit after u (read into slot)
     * may be planned while u publishes (NULL: always). No, when u's
     * publish changes what the next plan finds (a stream's switch batch
     * owes a snapshot first). */
    bool (*ahead)(void *job, int slot, const mcdc_unit *u);
    /* Optional: after a plan found nothing new (idle), on the frame's
     * thread: blocks until the job's next plan may find something (a
     * stream sleeps until its database's probe finds rows for it) or a stop
     * request; then the frame sleeps out idle_poll_ms from that plan's
     * start as without it. */
    void (*idle_wait)(void *job);
    /* Optional, with overlap: on the frame's thread, once unit next was
     * planned, before its read starts on a thread of the frame's: sets up
     * the slot for it (what read would otherwise do on the frame's thread,
     * such as deciding the target's file layout while no commit runs).
     * *go false: next is read after the unit before is published, on the
     * frame's thread, as without overlap. What it leaves in the slot, read
     * uses or discard frees. */
    int (*prepare)(void *job, int slot, const mcdc_unit *next, bool *go, mcdc_error *err);
    /* Appends the unit's facts rows to rows (the facts schema). */
    int (*facts)(void *job, const mcdc_unit *u, const mcdc_unit_result *res, mcdc_batch *rows,
                 mcdc_error *err);
    /* The commit time and LSN a committed position reaches (verdict
     * catch-up at start); false when it has none. */
    bool (*position_time)(void *job, const mcdc_pos *pos, int64_t *commit_us, char lsn[32]);
    /* After the unit committed and the verdict moved (v NULL: no control
     * table, or the advance failed). */
    void (*done)(void *job, const mcdc_unit *u, const mcdc_unit_result *res,
                 const mcdc_verdict *v);
} mcdc_job_ops;

typedef struct mcdc_frame_cfg {
    const mcdc_ctx *ctx;
    /* Where units are planned and committed: the job's own ledger, or (NULL)
     * the checkpoint directory below, opened with the binding. */
    const mcdc_ledger *ledger;
    const char *checkpoint;   /* directory */
    mcdc_ckpt_binding binding;
    mcdc_table *target;       /* borrowed; the job's data goes here */
    mcdc_table_kind target_kind; /* what the target must be (NONE: any) */
    const char *target_role;  /* for messages: "target" (NULL), "bronze", "report table" */
    const char *app_id;       /* txn app id of the target's commits */
    mcdc_table *facts;        /* borrowed; NULL: no facts */
    const char *facts_app_id; /* txn app id of the facts commits */
    const char *control_table; /* NULL: no verdict */
    const char *warehouse;
    const char *verdict_name; /* the control table's row */
    mcdc_granularity granularity;
    bool stop_when_idle;      /* availableNow, once */
    bool one_unit;            /* once */
    int64_t idle_poll_ms;     /* how often an idle job plans again */
    int64_t min_interval_ms;  /* processingTime: a unit at most this often; 0 none */
    int64_t max_units;        /* 0: no limit */
    /* Overlap (a job with read/publish): unit n+1 is planned and read on a
     * thread of the frame's while unit n publishes, when the next unit
     * would start at once (no min_interval_ms, not one_unit, max_units
     * not reached). The ledger still holds one planned unit: n+1's plan is
     * recorded only after n's commit marker, so a failed or killed publish
     * of n discards n+1's read unseen and a restart replays n from its
     * plan; commits stay in order, as only the frame's thread publishes. */
    bool overlap;
    /* The number of the job's first unit: 0, but for a job of one unit
     * numbered by what it is (mcdc_once.h: the txn version its commits
     * carry, a reconcile report's mark). */
    int64_t first_unit;
    /* Test hooks: the crash points are named "<crash_prefix>after_plan"...
     * (NULL: as they are), for a job that runs on the frame next to another
     * one in the same process (a reconcile report, then its repair). */
    const char *crash_prefix;
} mcdc_frame_cfg;

/* ---- the checks every job shares ------------------------------------------------- */

/* A table and the role a job gives it. */
typedef struct mcdc_frame_role {
    mcdc_table *table;     /* NULL: the job has none in this role */
    mcdc_table_kind kind;  /* what it must be (NONE: any) */
    const char *role;      /* "target", "facts table", "control table"... */
} mcdc_frame_role;

/* MCDC_E_MISMATCH, naming both, when two roles name one table (one
 * location, or one inside the other) or a table is of another kind than
 * its role's. A job calls it before it asks its source anything; the
 * frame again at start for its target and facts. */
int mcdc_frame_check_roles(const mcdc_frame_role *roles, int n, mcdc_error *err);

/* For a record a job writes once, outside a unit, with txn(app_id,
 * version) in t (a re-snapshot's completion row, whose version is the
 * generation the job's state names): MCDC_E_REWOUND when t holds a later
 * version of app_id (that state is older than the table: restored or
 * deleted; `state` names it for the message). *done (may be NULL): t
 * holds this very version already (a rerun cut short after it). */
int mcdc_frame_check_once(mcdc_table *t, const char *role, const char *app_id, int64_t version,
                          const char *state, bool *done, mcdc_error *err);

/* Runs units until the job is idle and stop_when_idle, max_units, a stop
 * request, or an error. */
int mcdc_frame_run(const mcdc_frame_cfg *cfg, const mcdc_job_ops *ops, void *job,
                   mcdc_error *err);

/* For run: commits the appender's files as unit u's data, with
 * txn(app_id, u->id) and meta (the job's userMetadata object, taken over:
 * the frame adds "planned" {start, end} and "checkpoint_id"). A skip by Delta's txn rule
 * is accepted only when the commit already there is this unit's, as the
 * checkpoint planned it; *skipped (may be NULL) then tells that the rows
 * standing are that commit's, not these. */
int mcdc_frame_commit_data(mcdc_frame *f, const mcdc_unit *u, mcdc_appender *a, json_t *meta,
                           bool *skipped, mcdc_error *err);
/* The same as a rewrite: c (may be NULL: an append) gives the operation,
 * the files removed and the version read (a strict read-modify-write: any
 * commit since is MCDC_E_CONFLICT); its txn and userMetadata are the
 * frame's. A merge commits with it. */
int mcdc_frame_commit_data_with(mcdc_frame *f, const mcdc_unit *u, mcdc_appender *a, json_t *meta,
                                const mcdc_table_commit *c, bool *skipped, mcdc_error *err);
const mcdc_ctx *mcdc_frame_ctx(const mcdc_frame *f);
/* The positions a commit's userMetadata (um, its text) says its unit was
 * planned with, as kind k ("planned" {start, end}, which the frame stamps
 * on every commit it makes). MCDC_E_NOTFOUND when it names none;
 * MCDC_E_CORRUPT when they are no positions of kind k. */
int mcdc_frame_planned_of(const char *um, mcdc_pos_kind k, mcdc_pos *start, mcdc_pos *end,
                          mcdc_error *err);
/* The table the job's data goes to (borrowed). */
mcdc_table *mcdc_frame_target(const mcdc_frame *f);

/* For a read ahead (mcdc_job_ops.read; g NULL: not ahead, MCDC_OK at
 * once): waits until the unit before is published. MCDC_E_CANCELLED when
 * it will not be (its publish failed, the job stops): the read gives up,
 * and the frame discards it. */
int mcdc_frame_gate_wait(mcdc_frame_gate *g, mcdc_error *err);
/* Whether the read ahead is given up already (NULL: false): a long read
 * checks it between its batches. */
bool mcdc_frame_gate_abandoned(mcdc_frame_gate *g);

#endif /* MCDC_FRAME_H */
