/*
 * mcdc_tables.h - the tables mssql-cdc writes, with the reference's column
 * names and types: bronze (the change log), facts (one row per micro-batch
 * and per event) and control (the finalization verdict).
 *
 * Small tables (facts, control) are written a row at a time through
 * mcdc_row; bronze batches come from the reader.
 */
#ifndef MCDC_TABLES_H
#define MCDC_TABLES_H

#include <string.h>

#include "mcdc_batch.h"
#include "mcdc_lake.h"

/* Bronze = the reader's output schema + _batch_id INT, _snapshot STRING,
 * _chunk INT (reference §2.3.2). */
int mcdc_bronze_schema(mcdc_schema **out, const mcdc_schema *output, mcdc_error *err);
/* Widens a batch of the reader's output schema to bronze's (the reader's
 * columns are its first): _batch_id = batch_id (< 0: NULL), _snapshot =
 * snapshot (NULL: NULL), _chunk = chunk (< 0: NULL). */
int mcdc_bronze_widen(mcdc_batch *b, mcdc_schema *bronze, int64_t batch_id, const char *snapshot,
                      int64_t chunk, mcdc_error *err);
/* Facts (reference §2.3.3), columns in the reference's order. */
int mcdc_facts_schema(mcdc_schema **out, mcdc_error *err);
/* A bronze table's plans table (reference ADR 0028 amendment 4): snapshot,
 * event, detail. */
int mcdc_plans_schema(mcdc_schema **out, mcdc_error *err);
/* Control (reference §2.9). */
int mcdc_control_schema(mcdc_schema **out, mcdc_error *err);

/* A kind's table description and a column's comment (NULL when none:
 * captured columns, kinds without texts). Static strings. */
const char *mcdc_table_description(mcdc_table_kind k);
const char *mcdc_table_column_comment(mcdc_table_kind k, const char *column);

/* A loosely typed cell for building rows of small tables. */
typedef enum { MCDC_CELL_NULL = 0, MCDC_CELL_INT, MCDC_CELL_DOUBLE, MCDC_CELL_TEXT } mcdc_cell_kind;
typedef struct mcdc_cell {
    mcdc_cell_kind kind;
    int64_t i;      /* ints, timestamps (microseconds) */
    double d;
    const char *s;  /* borrowed; length in i */
} mcdc_cell;

static inline mcdc_cell mcdc_cell_int(int64_t v) { return (mcdc_cell){MCDC_CELL_INT, v, 0, NULL}; }
static inline mcdc_cell mcdc_cell_double(double v) { return (mcdc_cell){MCDC_CELL_DOUBLE, 0, v, NULL}; }
/* TEXT cells carry their length in .i (text need not be NUL-terminated). */
static inline mcdc_cell mcdc_cell_text(const char *v) {
    return v ? (mcdc_cell){MCDC_CELL_TEXT, (int64_t)strlen(v), 0, v}
             : (mcdc_cell){MCDC_CELL_NULL, 0, 0, NULL};
}
static inline mcdc_cell mcdc_cell_null(void) { return (mcdc_cell){MCDC_CELL_NULL, 0, 0, NULL}; }

/* Appends one row (cells[schema->n_fields]) to b, converting each cell to
 * its column's type. A kind that does not fit the column is MCDC_E_INVALID. */
int mcdc_row_append(mcdc_batch *b, const mcdc_cell *cells, mcdc_error *err);
/* Reads cell (row, col) of b. A TEXT cell points into the batch (not
 * NUL-terminated; length in .i), valid while b lives. */
mcdc_cell mcdc_row_get(const mcdc_batch *b, int64_t row, int32_t col);

/* Facts column indexes (positions in mcdc_facts_schema). */
enum {
    MCDC_F_APP_ID = 0, MCDC_F_BATCH_ID, MCDC_F_ROWS, MCDC_F_MIN_LSN, MCDC_F_MAX_LSN,
    MCDC_F_MIN_COMMIT_TS, MCDC_F_MAX_COMMIT_TS, MCDC_F_DELETES, MCDC_F_INSERTS, MCDC_F_UPDATES,
    MCDC_F_STARTED_AT, MCDC_F_DURATION_MS, MCDC_F_SOURCE_RTT_MS, MCDC_F_READ_SECONDS,
    MCDC_F_READ_MB, MCDC_F_NETWORK_WAIT_MS, MCDC_F_RETENTION_WATERMARK_TS,
    MCDC_F_RETENTION_HEADROOM_HOURS, MCDC_F_EVENT, MCDC_F_LOST_FROM_TS, MCDC_F_LOST_TO_TS,
    MCDC_F_SOURCE_MAX_COMMIT_TS, MCDC_F_CAPTURE_LAG_SECONDS, MCDC_F_INGESTION_LAG_SECONDS,
    MCDC_F_END_LSN, MCDC_F_END_COMMIT_TS, MCDC_F_DETAIL, MCDC_F_TARGET, MCDC_F_WRITTEN_AT,
    MCDC_F_COUNT
};

/* Control column indexes. */
enum {
    MCDC_C_TABLE_NAME = 0, MCDC_C_FINALIZED_UNTIL, MCDC_C_END_LSN, MCDC_C_END_COMMIT_TS,
    MCDC_C_UPDATED_AT, MCDC_C_APPLIED_LSN, MCDC_C_SNAPSHOT_LSN, MCDC_C_OPEN_SNAPSHOT_LSN,
    MCDC_C_SNAPSHOT_WAVE, MCDC_C_COUNT
};

/* ---- one row of a control table, compare-and-set (mcdc_control.c) ------------- */

/* The row of table_name in b (-1 when absent or b is NULL). */
int64_t mcdc_control_find(const mcdc_batch *b, const char *table_name);
/* Decides the row's new cells (MCDC_C_COUNT of them, the current ones on
 * entry; exists false: a new row, all NULL but table_name). *write false
 * leaves the table as it is. Text cells must stay valid until it returns to
 * mcdc_control_update (point at the caller's own strings). */
typedef int (*mcdc_control_fn)(void *ctx, bool exists, mcdc_cell *cells, bool *write,
                               mcdc_error *err);
/* Applies decide to table_name's row of control as one strict
 * read-modify-write; a lost race (any other commit) reads again and decides
 * again, for up to a minute. *changed: a new version was written. */
int mcdc_control_update(mcdc_table *control, const char *table_name, mcdc_control_fn decide,
                        void *ctx, bool *changed, mcdc_error *err);

#endif /* MCDC_TABLES_H */
