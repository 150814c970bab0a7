/* mcdc_lake_json.c - a table's rows as JSON lines (inspection and tests), each
 * value in the JSON form of its canonical text (mcdc_value_text.h). */
#include <stdio.h>
#include <string.h>

#include "mcdc_lake.h"
#include "mcdc_value_text.h"

int mcdc_table_rows_json(const char *table, const char *warehouse, mcdc_line_fn fn, void *ctx,
                         mcdc_error *err) {
    if (table == NULL || fn == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_table_rows_json: table and fn are required");
    mcdc_table *t;
    int rc = mcdc_table_open(&t, table, warehouse, err);
    if (rc) return rc;
    mcdc_batch *b = NULL;
    int64_t version;
    rc = mcdc_table_read_all(t, &b, &version, err);
    if (rc == MCDC_OK && version < 0)
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "no Delta table at %s", mcdc_table_path(t));
    mcdc_buf line = {0};
    for (int64_t r = 0; rc == MCDC_OK && b && r < b->rows; r++) {
        mcdc_buf_reset(&line);
        rc = mcdc_buf_append_byte(&line, '{', err);
        for (int32_t i = 0; rc == MCDC_OK && i < b->schema->n_fields; i++) {
            if (i) rc = mcdc_buf_append_byte(&line, ',', err);
            const char *name = b->schema->fields[i].name;
            if (rc == MCDC_OK)
                rc = mcdc_text_json_string(&line, (const uint8_t *)name, strlen(name), err);
            if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&line, ':', err);
            if (rc == MCDC_OK) rc = mcdc_text_cell_json(&line, &b->columns[i], r, err);
        }
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&line, '}', err);
        if (rc == MCDC_OK) rc = mcdc_buf_cstr(&line, err);
        if (rc == MCDC_OK && fn(ctx, (const char *)line.data) != 0)
            rc = mcdc_error_set(err, MCDC_E_IO, "the output was closed");
    }
    mcdc_buf_free(&line);
    mcdc_batch_free(b);
    mcdc_table_close(t);
    return rc;
}
