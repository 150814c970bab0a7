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

int mcdc_facts_schema(mcdc_schema **out, mcdc_error *err) {
    return build(out, FACTS, MCDC_F_COUNT, err);
}

int mcdc_control_schema(mcdc_schema **out, mcdc_error *err) {
    return build(out, CONTROL, MCDC_C_COUNT, err);
}

static const char *const RESERVED[] = {"_capture_instance", "_start_lsn", "_seqval",
                                       "_operation",        "_command_id", "_commit_ts",
                                       "_batch_id",         "_snapshot",   "_chunk"};

bool mcdc_is_reserved_column(const char *name) {
    for (size_t i = 0; i < sizeof RESERVED / sizeof RESERVED[0]; i++)
        if (mcdc_str_ieq(name, RESERVED[i])) return true;
    return false;
}

int mcdc_bronze_schema(mcdc_schema **out, const mcdc_schema *output, mcdc_error *err) {
    int32_t n = output->n_fields;
    int rc = mcdc_schema_create(out, n + 3, err);
    if (rc) return rc;
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++) {
        const mcdc_field *f = &output->fields[i];
        rc = mcdc_schema_set(*out, i, f->name, f->type, f->precision, f->scale, f->byte_width,
                             f->nullable, err);
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
