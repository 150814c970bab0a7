/*
 * mcdc_txn.h - every Delta txn app id mssql-cdc writes, in one table.
 *
 * A Delta txn (appId, version) makes a commit idempotent: a commit whose
 * txn the table holds already (at that version or a later one) is skipped.
 * Every writer names its txns here, so that one kind of record has one
 * spelling, one table it goes to and one meaning of its version. The texts
 * are on disk in existing lakes, and the reference writes and reads the
 * same ones (its backfill finishes ours, and ours its): they never change.
 *
 *   kind         app id                         table    writer          version
 *   STREAM       <app_id>[.g<n>]                bronze   stream          the batch id
 *   STREAM_FACTS <app_id>[.g<n>]#facts          facts    stream          the batch id
 *   EVENTS       <app_id>#events                facts    bootstrap, seed, the generation: 0 is
 *                                                        re-snapshot, backfill's the bootstrap's,
 *                                                        completion      n a re-snapshot's
 *   SNAPSHOTS    <app_id>#snapshots             facts    chunked open    the generation
 *   SNAPOPEN     <app_id>#snapopen.<S>          plans,   chunked open,   0 (once per S)
 *                                               facts    a switch's open
 *   SNAPPLAN     <app_id>#snapplan.<S>          plans,   backfill        0 (once per S)
 *                                               facts
 *   SNAPCHUNKS   <app_id>#snapchunks.<S>        plans,   backfill        the wave
 *                                               facts
 *   SNAP         <app_id>#snap.<S>              bronze   backfill        the wave
 *   SNAPDONE     <app_id>#snapdone.<S>          facts    a switch's      0 (once per S)
 *                                                        completion
 *   APPLY        mssql-cdc.apply                silver   apply           the pass
 *   REPAIR       mssql-cdc.repair.<run>         bronze   repair          0
 *   REPAIR_FACTS mssql-cdc.repair.<run>#facts   facts    repair          0
 *   RECONCILE    mssql-cdc.reconcile.<run>      report   reconcile       1 a report, 2 one whose
 *                                                                        run goes on to repair
 *
 * <app_id> is the stream's (generation 0's), but for STREAM and
 * STREAM_FACTS, which carry generation n's sink app id (<app_id>.g<n> from
 * generation 1 on; mcdc_generation.h). <S> is an LSN text, <run> a run id
 * (mcdc_repair.h: up to 128 characters of [A-Za-z0-9._:-]).
 *
 * Whole snapshots and seeds (their bronze commit, a full snapshot's
 * snapshot_open row) carry no txn: the reference's carry none either, and
 * both find a whole snapshot by its rows (mcdc_snapshot_job.h).
 */
#ifndef MCDC_TXN_H
#define MCDC_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_util.h"

typedef enum mcdc_txn_kind {
    MCDC_TXN_STREAM = 0,
    MCDC_TXN_STREAM_FACTS,
    MCDC_TXN_EVENTS,
    MCDC_TXN_SNAPSHOTS,
    MCDC_TXN_SNAPOPEN,
    MCDC_TXN_SNAPPLAN,
    MCDC_TXN_SNAPCHUNKS,
    MCDC_TXN_SNAP,
    MCDC_TXN_SNAPDONE,
    MCDC_TXN_APPLY,
    MCDC_TXN_REPAIR,
    MCDC_TXN_REPAIR_FACTS,
    MCDC_TXN_RECONCILE,
    MCDC_TXN_KIND_COUNT
} mcdc_txn_kind;

/* The longest app id formatted here: a base of MCDC_APP_ID_BYTES_MAX
 * bytes, its longest suffix and an LSN (or a generation). */
#define MCDC_TXN_APP_ID_MAX (MCDC_APP_ID_BYTES_MAX + 48)

/* The reconcile report's versions (RECONCILE). */
#define MCDC_TXN_RECONCILE_REPORT 1
#define MCDC_TXN_RECONCILE_REPAIRS 2

/* One row of the table above. */
typedef struct mcdc_txn_entry {
    mcdc_txn_kind kind;
    const char *prefix;   /* before the base ("mssql-cdc.repair.", or "") */
    bool base;            /* takes a base: the stream's app id, or a run id */
    bool generation;      /* takes a generation (".g<n>" from 1 on) */
    const char *suffix;   /* after the base ("#snap."; "" none) */
    bool arg;             /* an LSN S after the suffix */
    const char *table;    /* the table its commits go to */
    const char *writer;   /* the job that writes it */
    const char *version;  /* what its txn version counts */
} mcdc_txn_entry;

/* The row of kind k. */
const mcdc_txn_entry *mcdc_txn_entry_of(mcdc_txn_kind k);

/* The app id of kind k into out[cap]: base (the stream's app id, a run id;
 * NULL for APPLY), generation n (STREAM and STREAM_FACTS; 0 for the
 * others), arg (the LSN S of the SNAP* kinds; NULL for the others).
 * MCDC_E_LIMIT when it does not fit. */
int mcdc_txn_app_id(char *out, size_t cap, mcdc_txn_kind k, const char *base, int64_t generation,
                    const char *arg, mcdc_error *err);

/* The app id of a kind that takes no base, generation or arg (APPLY). */
const char *mcdc_txn_fixed(mcdc_txn_kind k);

/* Whether text[0..len) is an app id of kind k for base (as
 * mcdc_txn_app_id formats it, for some generation and arg): *generation
 * (may be NULL) gets its generation, *arg and *arg_len (may be NULL) where
 * its LSN S (or nothing) lies in text. */
bool mcdc_txn_match(const char *text, size_t len, mcdc_txn_kind k, const char *base,
                    int64_t *generation, const char **arg, size_t *arg_len);

#endif /* MCDC_TXN_H */
