/* mcdc_lake_json.c - a table's rows as JSON lines (inspection and tests), each
 * value in the JSON form of its canonical text (mcdc_value_text.h). */
#include <stdio.h>
#include <string.h>

#include "mcdc_lake.h"
#include "mcdc_options.h"
#include "mcdc_storage.h"
#include "mcdc_value_text.h"

/* Why t holds no Delta table, as the error to give: a file where its
 * directory should be, a directory of files without a log, or nothing
 * (found: the log could be read and holds no commit; else reading it
 * failed, and only a file explains that). */
static int no_table(mcdc_table *t, bool found, int rc, mcdc_error *err) {
    const char *where = mcdc_table_path(t);
    if (mcdc_table_is_file(t))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s is a file, not a Delta table (a Delta table is a directory "
                              "holding _delta_log/)",
                              where);
    if (!found) return rc;
    mcdc_storage_listing l = {0};
    int64_t files = mcdc_storage_list(mcdc_table_storage(t), "", &l, NULL) == MCDC_OK
                        ? (int64_t)l.count
                        : 0;
    mcdc_storage_listing_free(&l);
    if (files > 0)
        return mcdc_error_set(err, MCDC_E_NOTFOUND,
                              "%s is not a Delta table: it holds %lld files but no _delta_log/ "
                              "(check the path: table-rows reads Delta tables only)",
                              where, (long long)files);
    return mcdc_error_set(err, MCDC_E_NOTFOUND,
                          "%s is not a Delta table: it has no _delta_log/ (the directory is "
                          "empty or does not exist): check the path",
                          where);
}

int mcdc_table_rows_json(const char *table, const char *warehouse, mcdc_line_fn fn, void *ctx,
                         mcdc_error *err) {
    return mcdc_table_rows_json_opts(NULL, table, warehouse, fn, ctx, err);
}

int mcdc_table_rows_json_opts(const mcdc_opts *opts, const char *table, const char *warehouse,
                              mcdc_line_fn fn, void *ctx, mcdc_error *err) {
    if (table == NULL || fn == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_table_rows_json: table and fn are required");
    mcdc_table *t;
    mcdc_storage_env env = mcdc_opts_storage_env(opts, NULL);
    int rc = mcdc_table_open_env(&t, &env, table, warehouse, err);
    if (rc) return rc;
    mcdc_batch *b = NULL;
    int64_t version;
    rc = mcdc_table_read_all(t, &b, &version, err);
    if ((rc == MCDC_OK && version < 0) || rc == MCDC_E_IO) rc = no_table(t, rc == MCDC_OK, rc, err);
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
