/*
 * mcdc_seed_copy.h - the copy a seed reads (`seed --from`): a Delta table
 * (a directory with a _delta_log), one Parquet file, a directory of Parquet
 * files (names starting with '_' or '.' skipped, as Spark's _SUCCESS and
 * .crc files; subdirectories not read), or a glob of them in the last path
 * segment (dir/part-*.parquet). Found before anything is read: a path that
 * holds none of these is MCDC_E_INVALID naming it and the forms it may
 * take.
 */
#ifndef MCDC_SEED_COPY_H
#define MCDC_SEED_COPY_H

#include <stdbool.h>
#include <stddef.h>

#include "mcdc_batch.h"
#include "mcdc_lake.h"
#include "mcdc_storage.h"

typedef struct mcdc_seed_copy {
    const char *from;  /* as given */
    const mcdc_storage_env *env; /* borrowed: what every read opens through */
    bool delta;
    int64_t version;   /* a Delta copy's version read first (-1: none yet): read again the same */
    char *dir;         /* the Parquet files' directory (or the Delta table's path) */
    mcdc_storage *st;  /* over dir, for Parquet files */
    char **files;      /* keys under st; n_files */
    size_t n_files;
} mcdc_seed_copy;

/* Finds what `from` names (borrowed, as env, the job's storage env: both
 * must outlive c). Close c whatever the result. */
int mcdc_seed_copy_find(mcdc_seed_copy *c, const mcdc_storage_env *env, const char *from,
                        mcdc_error *err);
/* Reads the copy batch by batch into fn (which takes each batch): a Delta
 * table through the table scan (its live files only), else its Parquet
 * files in name order; a Delta copy is read at the version its first read
 * read. want (NULL: every column; at most
 * MCDC_SNAPSHOT_KEYS_MAX names) reads only the columns of those names,
 * matched ignoring case, that the copy has. */
int mcdc_seed_copy_read(mcdc_seed_copy *c, const char *warehouse, const char *const *want,
                        int32_t n_want, mcdc_batch_fn fn, void *ctx, mcdc_error *err);
/* Calls fn with the columns of each of the copy's Parquet files (file: its
 * name), or once with the Delta table's (file NULL), reading footers and
 * the log only. A file that is no Parquet file, or a damaged one, is
 * MCDC_E_INVALID naming it. */
typedef int (*mcdc_seed_copy_schema_fn)(void *ctx, const char *file, const mcdc_schema *s,
                                        mcdc_error *err);
int mcdc_seed_copy_each_schema(mcdc_seed_copy *c, const char *warehouse,
                               mcdc_seed_copy_schema_fn fn, void *ctx, mcdc_error *err);

/* The rows the copy holds by its metadata, reading no row: a Delta copy's
 * files' statistics (its version pinned for the reads after, when none
 * was), each Parquet file's footer. -1 when a Delta file has no
 * statistics. */
int mcdc_seed_copy_rows(mcdc_seed_copy *c, const char *warehouse, int64_t *rows,
                        mcdc_error *err);
void mcdc_seed_copy_close(mcdc_seed_copy *c);

#endif /* MCDC_SEED_COPY_H */
