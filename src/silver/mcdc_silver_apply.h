/*
 * mcdc_silver_apply.h - what the files of `mssql-cdc apply` share (the job
 * that keeps silver from bronze); the silver module's own interface is
 * mcdc_silver.h, and the public one mssqlcdc.h's mcdc_apply_*.
 *
 *   mcdc_silver_apply.c      the job: the public API, the run, the frame's
 *                            job ops (plan, run, done)
 *   mcdc_silver_plan.c       planning a pass: what it reads, in which order,
 *                            and the state it plans
 *   mcdc_silver_snapshots.c  the rebuild decision; a chunked snapshot's
 *                            chunks, waves, stamps and key ranges
 *   mcdc_silver_bronze.c     reading bronze: its columns, its capture
 *                            instances, its snapshots (pass 1), the rows to
 *                            rank (pass 2)
 *   mcdc_silver_position.c   silver's cells of the control table, and the
 *                            ledger: silver's txn plans a pass, the control
 *                            row commits it
 *   mcdc_silver_pass.c       running a pass: silver's columns after it, the
 *                            merge and its commit
 */
#ifndef MCDC_SILVER_APPLY_H
#define MCDC_SILVER_APPLY_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "mcdc_frame.h"
#include "mcdc_ledger.h"
#include "mcdc_lsn.h"
#include "mcdc_position.h"
#include "mcdc_silver.h"
#include "mcdc_snapfacts.h"
#include "mcdc_txn.h"

/* Silver's txn app id (mcdc_txn.h), and the ledger id stamped on its
 * commits: one job per silver table, whatever runs it. */
#define APPLY_APP_ID mcdc_txn_fixed(MCDC_TXN_APPLY)
#define APPLY_LEDGER_ID "mssql-cdc apply"
/* Where the sorters spill, in silver's directory (emptied at every run). */
#define APPLY_SPILL_DIR "_mssql_cdc_spill/"
/* Or, with a scratch directory (cfg.scratch_dir, needed by a silver on an
 * object store), under it: "mssql-cdc-spill/<run's uuid>-" (a shared temp
 * directory holds the runs of several applies; each empties only its own). */
#define APPLY_SCRATCH_SPILL_DIR "mssql-cdc-spill/"
/* A merge that loses to another writer's commit is done again on the new
 * version this many times. */
#define APPLY_CONFLICT_RETRIES 10

static inline int apply_nomem(mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
}

/* ---- LSNs that may be absent ---------------------------------------------------------
 * A position, a snapshot, a bound: the project's LSN, or none yet (a
 * position never recorded). None is lower than every LSN. */
typedef mcdc_lsn_opt apply_lsn;

/* text (n bytes) as bronze and the control table hold an LSN: "0x" and 20
 * hex digits. Anything else is none. */
static inline apply_lsn apply_lsn_of(const char *text, size_t n) {
    apply_lsn o = {0};
    o.set = n == MCDC_LSN_TEXT_LEN && mcdc_lsn_parse(&o.v, text, n, NULL) == MCDC_OK;
    return o;
}
static inline int apply_lsn_cmp(const apply_lsn *a, const apply_lsn *b) {
    if (!a->set || !b->set) return (int)a->set - (int)b->set;
    return mcdc_lsn_cmp(&a->v, &b->v);
}
static inline void apply_lsn_max(apply_lsn *into, const apply_lsn *x) {
    if (apply_lsn_cmp(x, into) > 0) *into = *x;
}
/* The LSN right after o: an exclusive lower bound as the scans' inclusive
 * one. Unchanged at the largest LSN (nothing is above it) and when none. */
static inline apply_lsn apply_lsn_next(const apply_lsn *o) {
    apply_lsn n = *o;
    if (n.set && mcdc_lsn_increment(&n.v, &o->v, NULL) != MCDC_OK) n = *o;
    return n;
}
/* Its text ("" when none). */
static inline void apply_lsn_text(const apply_lsn *o, char out[MCDC_LSN_TEXT_LEN + 1]) {
    if (o->set) mcdc_lsn_format(&o->v, out);
    else out[0] = 0;
}

/* ---- silver's cells of its control row (mcdc_silver_position.c) ------------------------
 * Apply's position (mcdc_position.h's APPLY) holds them, as its pass plans
 * them. */
typedef mcdc_apply_cells apply_state;

static inline bool apply_state_eq(const apply_state *a, const apply_state *b) {
    return mcdc_apply_cells_eq(a, b);
}

/* What the control table says, read before the facts and bronze: bronze's
 * verdict (the control row named as --bronze) and silver's row. */
typedef struct control_view {
    bool has_verdict;
    char verdict_lsn[32];
    int64_t verdict_us;
    apply_state silver;
    bool has_fin;
    int64_t fin_us;
} control_view;

/* ---- a chunk of an open chunked snapshot (mcdc_silver_snapshots.c) --------------------- */
/* A chunk an announced 'snapshot_chunk' row of the open snapshot names. */
typedef struct achunk {
    int64_t chunk, wave;
    char stamp[MCDC_LSN_TEXT_LEN + 1];
    bool has_ts;     /* the commit time the stamp maps to (the facts row's min_commit_ts) */
    int64_t ts_us;
    json_t *lo, *hi; /* owned; NULL: open */
} achunk;

/* What plan found, for run. */
typedef struct apply_plan {
    int64_t bronze_version;
    apply_state start, end;
    bool rebuild, merged, is_open;
    bool has_verdict; /* bronze's, to pass on after the pass */
    char verdict_lsn[32];
    int64_t verdict_us;
    silver_sorter *changes;
    mcdc_schema *change_schema; /* captured columns, _start_lsn, _commit_ts, then the rank's */
    int32_t n_cap;
    silver_range *ranges;
    int32_t n_ranges;
    int64_t facts_version; /* the facts read (-1: none): repairs after it are new next pass */
    mcdc_batch *close;          /* SCD2 rebuild: the snapshot's LSN and commit time (one row) */
    mcdc_batch *stamps;         /* SCD2 waves: each new chunk's stamp and its commit time */
    struct bronze_replay *replay; /* pass 2 read again for changes (mcdc_silver_bronze.c) */
} apply_plan;

struct mcdc_apply {
    mcdc_apply_cfg cfg;
    char **strings; /* owned copies of cfg's strings */
    int n_strings;
    char **keys;    /* owned */
    int32_t n_keys;
    char **track;   /* owned: track_history_columns */
    int32_t n_track;
    const mcdc_opts *opts;
    mcdc_ctx ctx;
    mcdc_log_sink sink;
    /* one run */
    mcdc_table *bronze, *silver, *control, *facts, *plans;
    /* where the sorters spill: silver's storage (borrowed) or the scratch
     * directory's (scratch, owned), under spill_prefix */
    mcdc_storage *spill, *scratch;
    char spill_prefix[64];
    char *plans_name;
    mcdc_changes *changes;          /* with a connection string */
    char **ours, **others;          /* capture instance names seen, lower-cased */
    int32_t n_ours, n_others;
    bool has_fin;                   /* silver's verdict, as last read */
    int64_t fin_us;
    apply_plan plan;
    bool planned;
    int64_t mem_unit;               /* the unit this run planned (the ledger's memory) */
    mcdc_pos mem_start, mem_end;
    apply_state commit_end;         /* what write_commit writes */
    mcdc_apply_result res;
    mcdc_apply_fn fn;
    void *fn_ctx;
    bool warned_no_facts, warned_no_bronze;
    int64_t fresh_passes;           /* passes this run planned (not replays) */
};

/* ---- mcdc_silver_plan.c ---------------------------------------------------------------- */
/* Plans the next pass into a->plan: *idle when there is nothing to merge
 * (only the verdict may have moved, which it then moves). last_end: the
 * last unit's planned end (its facts version; NULL: none). */
int apply_plan_pass(mcdc_apply *a, const mcdc_pos *last_end, bool *idle, mcdc_error *err);
void apply_plan_clear(apply_plan *pl);
/* The result's position fields from a state. */
void apply_result_state(mcdc_apply *a, const apply_state *s);

/* ---- mcdc_silver_position.c ------------------------------------------------------------- */
int apply_read_control(mcdc_apply *a, control_view *cv, mcdc_error *err);
extern const mcdc_ledger_ops apply_ledger;

/* ---- mcdc_silver_bronze.c ---------------------------------------------------------------- */
/* Adds a copy of p (len bytes) to the list *v of *n names. */
int apply_list_add(char ***v, int32_t *n, const char *p, size_t len, mcdc_error *err);
/* Bronze's own columns have the types mssql-cdc writes them with. */
int apply_check_bronze_types(const mcdc_apply *a, const mcdc_schema *bs, mcdc_error *err);
/* The change rows' schema: bronze's captured columns, _start_lsn and
 * _commit_ts (as bronze types them), then the rank's (_operation,
 * _command_id, _seqval); *n_cap the captured ones. */
int apply_change_schema(mcdc_schema **out, const mcdc_schema *bs, int32_t *n_cap, mcdc_error *err);

/* Pass 1: the newest whole snapshot bronze (at bronze_version) holds after
 * the one silver was rebuilt from (after), and whether it holds rows of a
 * chunked one. skip_chunk_files: the facts name an open chunked snapshot
 * (a file of chunk rows alone is then none of a whole one's). */
typedef struct bronze_snapshots {
    apply_lsn whole;  /* max coalesce(_snapshot, _start_lsn) of whole snapshots' rows */
    bool chunk_rows;  /* rows of a chunked snapshot after `after` */
} bronze_snapshots;
int apply_bronze_snapshots(mcdc_apply *a, const apply_plan *pl, const mcdc_schema *bs,
                           const apply_lsn *after, bool skip_chunk_files, bronze_snapshots *out,
                           mcdc_error *err);

/* Pass 2: which of bronze's rows a pass ranks (mcdc_silver_bronze.c reads
 * them into pl->changes, a sorter it creates). */
typedef struct bronze_selection {
    bool rebuild;
    apply_lsn snapshot, applied, s_open, first;
    const int64_t *new_chunks;  /* the open snapshot's chunks this pass applies, sorted */
    int32_t n_new;
    /* repairs recorded since the last pass (not on a rebuild): their rows
     * are applied whatever their stamp, ranked with every later change */
    const char (*rep_stamps)[MCDC_LSN_TEXT_LEN + 1];
    int32_t n_rep;
    apply_lsn rep_min;
    bool history;               /* SCD2: a rebuild's snapshot rows count at its LSN */
    bool keep_stamps;           /* ... but a new chunk's row in its range at its stamp */
    apply_lsn changes_after;    /* a rebuild's changes: after the snapshot (a history: after
                                 * the position, when that is older, to keep their versions) */
} bronze_selection;
/* What pass 2 saw. */
typedef struct bronze_ranked {
    apply_lsn top;              /* newest change applied */
    int64_t repair_rows;
    /* a history's rebuild: commit times that tell the snapshot's (its rows
     * carry none): a snapshot row's, the newest change's at or before it,
     * the oldest change's after it */
    bool has_ts_snap, has_ts_le, has_ts_gt;
    int64_t ts_snap, ts_le, ts_gt;
} bronze_ranked;
int apply_bronze_rank(mcdc_apply *a, apply_plan *pl, const mcdc_schema *bs,
                      const bronze_selection *sel, bronze_ranked *out, mcdc_error *err);
/* Frees what pass 2 kept to read bronze again (after the sorter). NULL-safe. */
void apply_bronze_replay_free(struct bronze_replay *x);

/* ---- mcdc_silver_snapshots.c ------------------------------------------------------------ */
/* What the facts say for a pass: completed snapshots, the chunked one
 * still open and its announced chunks, the repairs since the last pass. */
typedef struct apply_facts {
    mcdc_snapfacts sf;
    apply_lsn newest;                 /* the newest completed snapshot */
    const mcdc_snap_row *opened;      /* the newest chunked snapshot opened (in sf) */
    apply_lsn s_open;                 /* its LSN */
    bool hist_open;                   /* a history applying it wave by wave */
    achunk *chunks;                   /* its announced chunks (read when needed) */
    int32_t n_chunks;
    json_t *cut;                      /* the key its chunks are cut on (owned) */
    char (*rep_stamps)[MCDC_LSN_TEXT_LEN + 1]; /* repairs recorded since the last pass */
    int32_t n_rep;
} apply_facts;
int apply_read_facts(mcdc_apply *a, const control_view *cv, const mcdc_pos *last_end,
                     apply_facts *out, int64_t *facts_version, mcdc_error *err);
void apply_facts_free(apply_facts *f);

/* The rebuild decision, and the waves of an open chunked snapshot a pass
 * applies. */
typedef struct apply_decision {
    apply_lsn snapshot;         /* the snapshot silver is (to be) rebuilt from */
    bool is_open;               /* a chunked snapshot newer than it is open */
    bool rebuild;
    bool hist_done;             /* a history's completion of the one it applied wave by wave */
    int64_t after;              /* the last wave applied (-1: none) */
    int64_t wave_max;           /* the last wave after the pass */
    int64_t *new_chunks;        /* owned, sorted: the chunks of the waves after `after` */
    int32_t n_new;
    apply_lsn first;            /* the oldest stamp of those */
} apply_decision;
int apply_decide(const control_view *cv, const apply_facts *f,
                 const apply_lsn *whole, apply_decision *out, mcdc_error *err);
void apply_decision_free(apply_decision *d);
/* A history's waves: pl->stamps; range deletes: pl->ranges (a single key,
 * the one the chunks are cut on, of a type SQL Server and we order alike). */
int apply_plan_waves(const mcdc_apply *a, apply_plan *pl, const apply_facts *f,
                     const apply_decision *d, mcdc_error *err);
/* SCD2: stamps as rows of _start_lsn (an LSN, 22 characters) and
 * _commit_ts (us; NULL when !has[i]), typed as pl's change rows. */
int apply_stamp_rows(mcdc_batch **out, const apply_plan *pl, int32_t n,
                     const char (*lsn)[MCDC_LSN_TEXT_LEN + 1], const bool *has, const int64_t *us,
                     mcdc_error *err);

/* ---- mcdc_silver_pass.c ------------------------------------------------------------------- */
/* Silver's SCD type (its table property, 1 when absent, checked against its
 * columns) against the one asked for: another is refused. sv NULL: no table
 * yet. */
int apply_check_scd_type(const mcdc_apply *a, const mcdc_table_view *sv, mcdc_error *err);
/* Merges the planned pass into silver and commits it through the frame
 * (merging again, up to APPLY_CONFLICT_RETRIES, when another writer
 * committed in between). */
int apply_merge_pass(mcdc_apply *a, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                     mcdc_error *err);
/* Deletes the runs a killed pass left in silver's spill directory (or,
 * with a scratch directory, this run's own runs). */
void apply_empty_spill(mcdc_apply *a);

#endif /* MCDC_SILVER_APPLY_H */
