/* mcdc_tables.c - schemas of bronze, facts and control; small-row builder. */
#include "mcdc_tables.h"

#include <string.h>

typedef struct {
    const char *name;
    mcdc_type_id type;
} col;

static int build(mcdc_schema **out, const col *cols, int32_t n, mcdc_error *err) {
    int rc = mcdc_schema_create(out, n, err);
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++)
        rc = mcdc_schema_set(*out, i, cols[i].name, cols[i].type, 0, 0, 0, true, err);
    if (rc) {
        mcdc_schema_unref(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- what the tables say about themselves ------------------------------------
 * Column comments (Delta field metadata "comment") and table descriptions
 * (metaData.description), as every reader shows them: DESCRIBE TABLE in
 * Spark, the schema in delta-rs and DuckDB. */
typedef struct {
    const char *name, *comment;
} comment;

static const comment BRONZE_COMMENTS[] = {
    {"_capture_instance", "The CDC capture instance this change was read from (on snapshot rows, "
                          "the one the snapshot was taken for)."},
    {"_start_lsn", "Commit LSN of the source transaction, 0x and 20 upper-case hex digits; string "
                   "order is commit order. On snapshot rows, the LSN taken before the rows were "
                   "read."},
    {"_seqval", "Log position of the change inside its transaction, same format; NULL on "
                "snapshot rows."},
    {"_operation", "1 delete, 2 insert, 3 update (before image), 4 update (after image), "
                   "0 snapshot row."},
    {"_command_id", "Statement order inside the transaction, within one capture instance; NULL "
                    "on snapshot rows."},
    {"_commit_ts", "Commit time of the source transaction in UTC (cdc.lsn_time_mapping)."},
    {"_batch_id", "The micro-batch that appended the row; with the stream's app id, the key of "
                  "its facts row. NULL on snapshot rows."},
    {"_snapshot", "On snapshot rows, the LSN of the snapshot they belong to; NULL on change rows "
                  "(read coalesce(_snapshot, _start_lsn) for rows of older snapshots)."},
    {"_chunk", "On rows of a chunked snapshot, the chunk that read them; NULL otherwise."},
    {NULL, NULL},
};

static const comment FACTS_COMMENTS[] = {
    {"app_id", "The stream (Delta txn app id) the row is about."},
    {"batch_id", "Its micro-batch; with app_id, the row's key. NULL on snapshot events."},
    {"rows", "Change rows the batch wrote (0 for an empty batch); snapshot rows on snapshot "
             "events."},
    {"min_lsn", "Smallest _start_lsn of the batch's rows; on events, the event's LSN."},
    {"max_lsn", "Largest _start_lsn of the batch's rows; on events, the event's LSN."},
    {"min_commit_ts", "Earliest commit time of the batch's rows, UTC."},
    {"max_commit_ts", "Latest commit time of the batch's rows, UTC."},
    {"deletes", "Rows with operation 1."},
    {"inserts", "Rows with operation 2."},
    {"updates", "Rows with operation 4 (before images are not counted)."},
    {"started_at", "When the batch started, UTC."},
    {"duration_ms", "From the batch's start to its bronze commit, milliseconds."},
    {"source_rtt_ms", "Median round trip of one SELECT 1 per reading connection, milliseconds."},
    {"read_seconds", "Seconds spent reading, summed over the batch's ranges."},
    {"read_mb", "Megabytes of columnar data read, summed over the ranges."},
    {"network_wait_ms", "ASYNC_NETWORK_IO wait of the reading sessions, milliseconds (NULL when "
                        "the server does not tell)."},
    {"retention_watermark_ts", "Commit time of the capture instance's min_lsn after the read: "
                               "changes before it are purged."},
    {"retention_headroom_hours", "Hours between the batch end and the retention watermark: how "
                                 "far the stream is from losing changes."},
    {"event", "NULL for a micro-batch; else the event: bootstrap, resnapshot, snapshot_open, "
              "snapshot_plan, snapshot_chunk, schema_change, capture_instance_switched, "
              "data_skipped."},
    {"lost_from_ts", "On resnapshot and data_skipped rows, the commit time from which changes "
                     "were lost."},
    {"lost_to_ts", "On resnapshot and data_skipped rows, the commit time up to which changes "
                   "were lost, when certain."},
    {"source_max_commit_ts", "Commit time of the server's max_lsn after the read."},
    {"capture_lag_seconds", "Seconds between the reader's clock and source_max_commit_ts: how "
                            "far SQL Server's capture is behind."},
    {"ingestion_lag_seconds", "source_max_commit_ts minus end_commit_ts: how far the stream is "
                              "behind what was captured."},
    {"end_lsn", "The batch's end offset (the LSN it read up to); on events, the event's LSN."},
    {"end_commit_ts", "Commit time of end_lsn, UTC."},
    {"detail", "JSON or text about the row: the batch's warnings {\"warnings\": [...]}, an "
               "event's payload, a DDL statement."},
    {"target", "The bronze table the stream writes."},
    {"written_at", "When the row was written, UTC."},
    {NULL, NULL},
};

static const comment CONTROL_COMMENTS[] = {
    {"table_name", "The table the row is about, as its writers name it."},
    {"finalized_until", "Every period ending at or before this UTC instant is complete in the "
                        "table; it only moves forward."},
    {"end_lsn", "The batch end that last moved finalized_until."},
    {"end_commit_ts", "Commit time of end_lsn, UTC."},
    {"updated_at", "When finalized_until last moved, UTC."},
    {"applied_lsn", "Silver tables: the highest bronze LSN applied."},
    {"snapshot_lsn", "Silver tables: the snapshot the table was last rebuilt from."},
    {"open_snapshot_lsn", "Silver tables: a chunked snapshot still being read and applied wave "
                          "by wave."},
    {"snapshot_wave", "Silver tables: the last wave of open_snapshot_lsn applied."},
    {NULL, NULL},
};

static const comment PLANS_COMMENTS[] = {
    {"snapshot", "LSN S of the chunked snapshot the row belongs to (min_lsn of its snapshot_open "
                 "facts row; _snapshot of its rows in bronze)."},
    {"event", "Which facts row this one completes: snapshot_open, snapshot_plan, or "
              "snapshot_chunk (the detail names its chunk and wave)."},
    {"detail", "JSON, the whole payload of that facts row, with the key values the facts row "
               "leaves out. snapshot_open: {mode, kind, generation, lost_from_ts, lost_to_ts, "
               "keys, plan}, keys the columns chunks are cut on, plan the key's extent read just "
               "after S ({kind: int, lo, hi, rows} for one integer key, else {kind: keyset, "
               "max}). snapshot_plan: {snapshot, kind, keys, chunk_rows, chunk_count, chunks}, "
               "chunks [lo, hi] of every chunk in order, fixed while the snapshot is open. "
               "snapshot_chunk: {snapshot, chunk, wave, lo, hi, last}, the key range the chunk "
               "was read in, lo inclusive, hi exclusive. A bound is null for an open end, a list "
               "for a composite key."},
    {NULL, NULL},
};

static const comment SILVER_COMMENTS[] = {
    {"_start_lsn", "Commit LSN of the source transaction that wrote the row's current image (0x "
                   "and 20 upper-case hex digits); on a row unchanged since a snapshot, the LSN "
                   "that snapshot (or its chunk) was read at."},
    {"_commit_ts", "Commit time of _start_lsn in UTC."},
    {NULL, NULL},
};

static const struct {
    const char *description;
    const comment *comments;
} DESCRIBED[] = {
    [MCDC_KIND_BRONZE] = {"Change log of one SQL Server table, written by mssql-cdc: every CDC "
                          "change row once, appended per micro-batch, plus snapshot rows "
                          "(operation 0). Rebuild the table from the newest snapshot and the "
                          "changes after its LSN.",
                          BRONZE_COMMENTS},
    [MCDC_KIND_FACTS] = {"What mssql-cdc's streams did: one row per micro-batch and per event "
                         "(snapshots, schema changes, skipped changes), with read metrics.",
                         FACTS_COMMENTS},
    [MCDC_KIND_CONTROL] = {"Completeness verdicts (finalized_until) of the tables mssql-cdc "
                           "writes, one row per table: a period is final once it ends at or "
                           "before the verdict.",
                           CONTROL_COMMENTS},
    [MCDC_KIND_PLANS] = {"Key values of the chunked snapshots read into a bronze table, kept "
                         "next to it under its name with _snapshot_plans appended: one row per "
                         "snapshot_open, snapshot_plan and snapshot_chunk facts row, holding "
                         "that row's payload whole. They are values of the source table's key: "
                         "give this table bronze's access rules.",
                         PLANS_COMMENTS},
    [MCDC_KIND_SILVER] = {"The current state of one SQL Server table, one row per key, kept by "
                          "mssql-cdc apply from its bronze change log: deleted rows are "
                          "removed. The control table's applied_lsn says how far it is "
                          "applied, its finalized_until which periods are complete.",
                          SILVER_COMMENTS},
};

const char *mcdc_table_description(mcdc_table_kind k) {
    return k > 0 && (size_t)k < sizeof DESCRIBED / sizeof DESCRIBED[0] ? DESCRIBED[k].description
                                                                       : NULL;
}

const char *mcdc_table_column_comment(mcdc_table_kind k, const char *column) {
    if (k <= 0 || (size_t)k >= sizeof DESCRIBED / sizeof DESCRIBED[0] || !DESCRIBED[k].comments)
        return NULL;
    for (const comment *c = DESCRIBED[k].comments; c->name; c++)
        if (strcmp(c->name, column) == 0) return c->comment;
    return NULL;
}

static const col FACTS[] = {
    {"app_id", MCDC_TYPE_UTF8},
    {"batch_id", MCDC_TYPE_INT64},
    {"rows", MCDC_TYPE_INT64},
    {"min_lsn", MCDC_TYPE_UTF8},
    {"max_lsn", MCDC_TYPE_UTF8},
    {"min_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ},
    {"max_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ},
    {"deletes", MCDC_TYPE_INT64},
    {"inserts", MCDC_TYPE_INT64},
    {"updates", MCDC_TYPE_INT64},
    {"started_at", MCDC_TYPE_TIMESTAMP_NTZ},
    {"duration_ms", MCDC_TYPE_INT64},
    {"source_rtt_ms", MCDC_TYPE_DOUBLE},
    {"read_seconds", MCDC_TYPE_DOUBLE},
    {"read_mb", MCDC_TYPE_DOUBLE},
    {"network_wait_ms", MCDC_TYPE_INT64},
    {"retention_watermark_ts", MCDC_TYPE_TIMESTAMP_NTZ},
    {"retention_headroom_hours", MCDC_TYPE_DOUBLE},
    {"event", MCDC_TYPE_UTF8},
    {"lost_from_ts", MCDC_TYPE_TIMESTAMP_NTZ},
    {"lost_to_ts", MCDC_TYPE_TIMESTAMP_NTZ},
    {"source_max_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ},
    {"capture_lag_seconds", MCDC_TYPE_DOUBLE},
    {"ingestion_lag_seconds", MCDC_TYPE_DOUBLE},
    {"end_lsn", MCDC_TYPE_UTF8},
    {"end_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ},
    {"detail", MCDC_TYPE_UTF8},
    {"target", MCDC_TYPE_UTF8},
    {"written_at", MCDC_TYPE_TIMESTAMP_NTZ},
};
_Static_assert(sizeof FACTS / sizeof FACTS[0] == MCDC_F_COUNT, "facts columns and indexes agree");

static const col CONTROL[] = {
    {"table_name", MCDC_TYPE_UTF8},
    {"finalized_until", MCDC_TYPE_TIMESTAMP_NTZ},
    {"end_lsn", MCDC_TYPE_UTF8},
    {"end_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ},
    {"updated_at", MCDC_TYPE_TIMESTAMP_NTZ},
    {"applied_lsn", MCDC_TYPE_UTF8},
    {"snapshot_lsn", MCDC_TYPE_UTF8},
    {"open_snapshot_lsn", MCDC_TYPE_UTF8},
    {"snapshot_wave", MCDC_TYPE_INT32},
};
_Static_assert(sizeof CONTROL / sizeof CONTROL[0] == MCDC_C_COUNT,
               "control columns and indexes agree");

static const col PLANS[] = {
    {"snapshot", MCDC_TYPE_UTF8},
    {"event", MCDC_TYPE_UTF8},
    {"detail", MCDC_TYPE_UTF8},
};

int mcdc_plans_schema(mcdc_schema **out, mcdc_error *err) {
    return build(out, PLANS, (int32_t)(sizeof PLANS / sizeof PLANS[0]), err);
}

int mcdc_facts_schema(mcdc_schema **out, mcdc_error *err) {
    return build(out, FACTS, MCDC_F_COUNT, err);
}

int mcdc_control_schema(mcdc_schema **out, mcdc_error *err) {
    return build(out, CONTROL, MCDC_C_COUNT, err);
}

int mcdc_bronze_schema(mcdc_schema **out, const mcdc_schema *output, mcdc_error *err) {
    int32_t n = output->n_fields;
    int rc = mcdc_schema_create(out, n + 3, err);
    if (rc) return rc;
    /* Every column nullable, as the reference declares bronze's (its rows
     * come from engines that mark nothing NOT NULL). */
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++) {
        const mcdc_field *f = &output->fields[i];
        rc = mcdc_schema_set(*out, i, f->name, f->type, f->precision, f->scale, f->byte_width,
                             true, err);
    }
    if (rc == MCDC_OK) rc = mcdc_schema_set(*out, n, "_batch_id", MCDC_TYPE_INT32, 0, 0, 0, true, err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(*out, n + 1, "_snapshot", MCDC_TYPE_UTF8, 0, 0, 0, true, err);
    if (rc == MCDC_OK) rc = mcdc_schema_set(*out, n + 2, "_chunk", MCDC_TYPE_INT32, 0, 0, 0, true, err);
    if (rc) {
        mcdc_schema_unref(*out);
        *out = NULL;
    }
    return rc;
}

int mcdc_bronze_widen(mcdc_batch *b, mcdc_schema *bronze, int64_t batch_id, const char *snapshot,
                      int64_t chunk, mcdc_error *err) {
    int32_t n = b->schema->n_fields;
    MCDC_ASSERT(bronze->n_fields == n + 3 && strcmp(bronze->fields[n].name, "_batch_id") == 0);
    int64_t rows = b->rows;
    int rc = mcdc_batch_widen(b, bronze, err);
    mcdc_column *c = &b->columns[n];
    if (rc == MCDC_OK)
        rc = batch_id >= 0 ? mcdc_col_fill_int(c, batch_id, rows, err) : mcdc_col_append_nulls(c, rows, err);
    if (rc == MCDC_OK)
        rc = snapshot ? mcdc_col_fill_text(c + 1, snapshot, rows, err)
                      : mcdc_col_append_nulls(c + 1, rows, err);
    if (rc == MCDC_OK)
        rc = chunk >= 0 ? mcdc_col_fill_int(c + 2, chunk, rows, err) : mcdc_col_append_nulls(c + 2, rows, err);
    return rc;
}

int mcdc_row_append(mcdc_batch *b, const mcdc_cell *cells, mcdc_error *err) {
    for (int32_t i = 0; i < b->schema->n_fields; i++) {
        mcdc_column *c = &b->columns[i];
        const mcdc_cell *v = &cells[i];
        int rc;
        switch (v->kind) {
        case MCDC_CELL_NULL: rc = mcdc_col_append_null(c, err); break;
        case MCDC_CELL_INT:
            if (c->field->type == MCDC_TYPE_DOUBLE)
                rc = mcdc_col_append_double(c, (double)v->i, err);
            else if (c->field->type == MCDC_TYPE_UTF8 || c->field->type == MCDC_TYPE_DOUBLE ||
                     c->field->type == MCDC_TYPE_BOOL)
                rc = mcdc_error_set(err, MCDC_E_INVALID, "column '%s' takes no integer",
                                    c->field->name);
            else
                rc = mcdc_col_append_int(c, v->i, err);
            break;
        case MCDC_CELL_DOUBLE:
            if (c->field->type != MCDC_TYPE_DOUBLE && c->field->type != MCDC_TYPE_FLOAT)
                rc = mcdc_error_set(err, MCDC_E_INVALID, "column '%s' takes no double",
                                    c->field->name);
            else
                rc = mcdc_col_append_double(c, v->d, err);
            break;
        case MCDC_CELL_TEXT:
            if (c->field->type != MCDC_TYPE_UTF8)
                rc = mcdc_error_set(err, MCDC_E_INVALID, "column '%s' takes no text",
                                    c->field->name);
            else
                rc = mcdc_col_append_bytes(c, v->s, v->i, err);
            break;
        default: MCDC_UNREACHABLE();
        }
        if (rc) return rc;
    }
    return MCDC_OK;
}

mcdc_cell mcdc_row_get(const mcdc_batch *b, int64_t row, int32_t col_index) {
    const mcdc_column *c = &b->columns[col_index];
    MCDC_ASSERT(row >= 0 && row < c->length);
    if (!mcdc_col_is_valid(c, row)) return mcdc_cell_null();
    switch (c->field->type) {
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: {
        int32_t v;
        memcpy(&v, c->values + row * 4, 4);
        return mcdc_cell_int(v);
    }
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: {
        int64_t v;
        memcpy(&v, c->values + row * 8, 8);
        return mcdc_cell_int(v);
    }
    case MCDC_TYPE_DOUBLE: {
        double v;
        memcpy(&v, c->values + row * 8, 8);
        return mcdc_cell_double(v);
    }
    case MCDC_TYPE_UTF8: {
        mcdc_cell r = {MCDC_CELL_TEXT, c->offsets[row + 1] - c->offsets[row], 0,
                       (const char *)c->data + c->offsets[row]};
        return r;
    }
    default: MCDC_UNREACHABLE();
    }
}
