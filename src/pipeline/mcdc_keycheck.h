/*
 * mcdc_keycheck.h - does a stream of batches hold two rows of one key? A
 * seed checks its copy with it as the copy is read, in bounded memory.
 *
 * Each row's key (its key columns; NULL equals NULL, values equal by their
 * bytes, as silver matches keys) is hashed to 64 bits. The hashes are held
 * up to the memory budget, then sorted and spilled as a run (frames of one
 * int64 column, mcdc_batch_frame.h) to scratch storage; runs are merged
 * when they reach MCDC_KEYCHECK_RUNS_MAX, so any number of rows fits. At
 * the end the runs and what is held are merged, and a hash seen twice is a
 * suspect. Only then, and only when there are suspects, the rows are read
 * again (mcdc_keycheck_confirm) and the suspects' keys compared byte for
 * byte: two equal keys are a duplicate; equal hashes of different keys
 * (about one pair in 2^64) are not.
 */
#ifndef MCDC_KEYCHECK_H
#define MCDC_KEYCHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_storage.h"

typedef struct mcdc_keycheck mcdc_keycheck;

typedef struct mcdc_keycheck_cfg {
    const int32_t *cols;      /* the key's columns in the batches added (copied) */
    int32_t n_cols;
    int64_t memory_bytes;     /* the hashes held and their sort; <= 0: the default */
    mcdc_storage *spill;      /* where runs go (borrowed) */
    const char *spill_prefix; /* their keys start with it (copied): "_mssql_cdc_spill/" */
} mcdc_keycheck_cfg;

int mcdc_keycheck_create(mcdc_keycheck **out, const mcdc_keycheck_cfg *cfg, mcdc_error *err);
/* The keys of every row of b (the schema the columns index). */
int mcdc_keycheck_add(mcdc_keycheck *k, const mcdc_batch *b, mcdc_error *err);
/* No more rows: *suspects is the number of hashes seen twice or more (0:
 * every key is unique). */
int mcdc_keycheck_finish(mcdc_keycheck *k, int64_t *suspects, mcdc_error *err);
/* After finish, the same rows again, batch by batch: *dup_row is the first
 * row of b whose key an earlier row had, -1 when none yet. MCDC_E_LIMIT
 * when more suspects came than are kept and none is a duplicate (then
 * nothing can be told; practically never). */
int mcdc_keycheck_confirm(mcdc_keycheck *k, const mcdc_batch *b, int64_t *dup_row,
                          mcdc_error *err);
/* "order_id=4, status=paid": the key of row `row` of b, for a message (at
 * most cap - 1 bytes, cut with "..."). */
void mcdc_keycheck_describe(const mcdc_keycheck *k, const mcdc_batch *b, int64_t row, char *out,
                            size_t cap);
int64_t mcdc_keycheck_rows(const mcdc_keycheck *k); /* rows added */
int64_t mcdc_keycheck_runs(const mcdc_keycheck *k); /* runs spilled */
/* Deletes the runs. NULL-safe. */
void mcdc_keycheck_free(mcdc_keycheck *k);

#endif /* MCDC_KEYCHECK_H */
