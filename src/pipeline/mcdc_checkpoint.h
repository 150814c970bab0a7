/*
 * mcdc_checkpoint.h - the checkpoint directory of one job: where it is, and
 * what it is bound to.
 *
 *   metadata      {"format": 1, "id", "job", "app_id", "target",
 *                  "capture_instance", "facts_table", "created", ["start"]}
 *   offsets/<n>   {"batch_id": n, "start": position, "end": position}
 *                 written before unit n runs (write-ahead)
 *   commits/<n>   {"batch_id": n, "rows": r, "data_txn": k}
 *                 written after unit n committed; k is the newest unit
 *                 (<= n) whose data the target holds under the job's app id
 *                 (-1: none yet), so the target's txn can be checked against
 *                 it before every unit without reading older markers
 *
 * The layout is Spark's (offsets/, commits/, metadata), as the reference's
 * checkpoints are. A position is the job's, typed (mcdc_position.h: the
 * stream's is the offset {"lsn", "commit_ts"}) and kept as its JSON. Every file is created put-if-absent
 * on the storage seam, so two runs on one checkpoint cannot both plan a unit.
 *
 * The binding: the first unit planned writes metadata naming the app id,
 * the target (resolved path), the capture instance and the facts table; a
 * later run given anything else is refused (MCDC_E_MISMATCH) before it
 * writes. `id` is a UUID the job stamps on every commit it makes, so that a
 * commit in a table can be told to be this checkpoint's or another's.
 */
#ifndef MCDC_CHECKPOINT_H
#define MCDC_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_ledger.h"
#include "mcdc_position.h"
#include "mcdc_storage.h"
#include "mcdc_util.h"

typedef struct mcdc_checkpoint mcdc_checkpoint;

/* What a checkpoint is bound to. Strings are borrowed; facts_table and
 * capture_instance may be NULL (none). target and facts_table are resolved
 * locations (see mcdc_lake's mcdc_table_path). */
typedef struct mcdc_ckpt_binding {
    const char *job;              /* "stream", ... */
    const char *app_id;
    const char *target;
    const char *capture_instance; /* compared ignoring case, as SQL Server does */
    const char *facts_table;
    /* Another name the checkpoint's capture instance may have: a stream that
     * follows its table from one capture instance to a newer one (reference
     * §2.5) is the same stream under either name. NULL: none. */
    const char *capture_instance_alias;
} mcdc_ckpt_binding;

/* Opens the directory (nothing is written). A metadata file already there
 * (a path, or mem:// through env, which may be NULL) is read and compared with b: any difference is MCDC_E_MISMATCH naming the
 * field, both values and what to do. *fresh tells that there is none yet.
 * Its positions are of kind `kind` (the job's). */
int mcdc_checkpoint_open(mcdc_checkpoint **out, const mcdc_storage_env *env, const char *dir,
                         const mcdc_ckpt_binding *b, mcdc_pos_kind kind, bool *fresh,
                         mcdc_error *err);
void mcdc_checkpoint_free(mcdc_checkpoint *c);
const char *mcdc_checkpoint_dir(const mcdc_checkpoint *c);
/* The checkpoint's UUID ("" while fresh). Borrowed. */
const char *mcdc_checkpoint_id(const mcdc_checkpoint *c);

/* What a checkpoint directory says about its capture instance, read
 * without binding anything: the one metadata binds it to (*bound) and the
 * one the end position of its last planned unit records it read
 * (*last_read: the stream's positions carry "capture_instance"). Either
 * NULL when not there (a fresh checkpoint, older positions). Owned
 * (mcdc_free). */
int mcdc_checkpoint_peek_instances(const mcdc_storage_env *env, const char *dir, char **bound,
                                   char **last_read, mcdc_error *err);

/* Writes metadata for the binding given to open (a fresh checkpoint only;
 * an existing one is left as it is). Call just before the first unit is
 * planned: a run that fails its checks leaves the directory untouched.
 * start (may be NULL) is the position before unit 0 (a bootstrap
 * snapshot's), kept in metadata as "start". */
int mcdc_checkpoint_bind(mcdc_checkpoint *c, const mcdc_pos *start, mcdc_error *err);
/* The position metadata records before unit 0 (NULL: none). Borrowed. */
const mcdc_pos *mcdc_checkpoint_start(const mcdc_checkpoint *c);

/* The highest unit planned and committed (-1 when none). */
int mcdc_checkpoint_last(mcdc_checkpoint *c, int64_t *planned, int64_t *committed,
                         mcdc_error *err);
/* Unit n's planned positions (*start and *end, NONE on entry, owned by the
 * caller: mcdc_pos_free). */
int mcdc_checkpoint_read_plan(mcdc_checkpoint *c, int64_t n, mcdc_pos *start, mcdc_pos *end,
                              mcdc_error *err);
/* Writes offsets/n. MCDC_E_CONFLICT: another run planned it first. */
int mcdc_checkpoint_write_plan(mcdc_checkpoint *c, int64_t n, const mcdc_pos *start,
                               const mcdc_pos *end, mcdc_error *err);

/* Unit n's commit marker (mcdc_ckpt_commit: mcdc_ledger.h). Markers of older builds lack data_txn: it is
 * derived from their row counts (a unit with rows committed data). */
int mcdc_checkpoint_read_commit(mcdc_checkpoint *c, int64_t n, mcdc_ckpt_commit *out,
                                mcdc_error *err);
/* Writes commits/n (a marker already there, by a replay, is fine). */
int mcdc_checkpoint_write_commit(mcdc_checkpoint *c, int64_t n, const mcdc_ckpt_commit *m,
                                 mcdc_error *err);

/* ---- one process per checkpoint ---------------------------------------------
 *
 * A run holds its checkpoint for its whole life: <dir>/_mssql_cdc_lock,
 * a lock on the storage seam (mcdc_storage.h). Locally that is flock(2),
 * which the kernel drops with the process, so a run killed with SIGKILL
 * never blocks the next one; on object stores it will be a lease with a
 * heartbeat (see mcdc_storage.h), the callers unchanged. The holder's note
 * says who it is ({"pid", "host", "since", "job", "app_id"}). Where the
 * storage has no locks the run goes on without one (a warning says so):
 * a second process on the checkpoint is then caught only when its plan or
 * commit meets the first's (mcdc_frame.c). */
#define MCDC_CHECKPOINT_LOCK_FILE "_mssql_cdc_lock"

typedef struct mcdc_ckpt_lock mcdc_ckpt_lock;

/* Takes dir's hold for job and app_id (env as for open). Held by another
 * process: MCDC_E_FOREIGN_WRITER naming it (pid, host, since when) and what
 * to do. *out is owned (mcdc_checkpoint_unlock); NULL when the storage
 * cannot hold it. */
int mcdc_checkpoint_lock(mcdc_ckpt_lock **out, const mcdc_storage_env *env, const char *dir,
                         const char *job, const char *app_id, mcdc_error *err);
/* Gives the hold back (NULL-safe). */
void mcdc_checkpoint_unlock(mcdc_ckpt_lock *l);
/* MCDC_OK while the hold is still this process's (NULL: no hold, OK); on
 * an object store, whose hold is a lease, MCDC_E_FOREIGN_WRITER once
 * another process took it over or it could not be renewed: the run stops
 * before its next commit. */
int mcdc_checkpoint_lock_check(mcdc_ckpt_lock *l, mcdc_error *err);

/* The checkpoint as the frame's ledger (mcdc_ledger.h); c stays owned by
 * the caller and must outlive it. */
mcdc_ledger mcdc_checkpoint_ledger(mcdc_checkpoint *c);

#endif /* MCDC_CHECKPOINT_H */
