/*
 * mcdc_api_many.c - what a host running many streams in one process does
 * once before it starts them (include/mssqlcdc.h, "Many tables"): ask the
 * source which of the capture instances it was given exist, and create the
 * facts table they share; and what it polls while they run: the capture
 * job's health (mcdc_capture_probe).
 */
#include <stdio.h>

#include "mcdc_changes.h"
#include "mcdc_lake.h"
#include "mcdc_options.h"
#include "mcdc_tables.h"

int mcdc_capture_instances_find(const mcdc_opts *opts, const char *const *names, size_t n,
                                int *found, mcdc_error *err) {
    if (opts == NULL || (n > 0 && (names == NULL || found == NULL)))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_capture_instances_find: opts, names and found are required");
    for (size_t i = 0; i < n; i++)
        if (names[i] == NULL)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "mcdc_capture_instances_find: names[%zu] is NULL", i);
    return mcdc_changes_find_instances(opts, names, n, found, err);
}

int mcdc_facts_table_create(const mcdc_opts *opts, const char *facts_table,
                            const char *warehouse, mcdc_error *err) {
    if (facts_table == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_facts_table_create: facts_table is NULL");
    mcdc_storage_env env = mcdc_opts_storage_env(opts, NULL);
    mcdc_table *t = NULL;
    mcdc_schema *fs = NULL;
    mcdc_appender *a = NULL;
    mcdc_table_props props = {.kind = MCDC_KIND_FACTS};
    int rc = mcdc_table_open_env(&t, &env, facts_table, warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_facts_schema(&fs, err);
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, t, fs, &props, err);
    if (rc == MCDC_OK) rc = mcdc_appender_ensure(a, err);
    if (rc) mcdc_error_wrap(err, "creating the facts table %s", facts_table);
    mcdc_appender_free(a);
    mcdc_schema_unref(fs);
    mcdc_table_close(t);
    return rc;
}

/* ---- the capture probe ---------------------------------------------------------- */

struct mcdc_capture_probe {
    mcdc_changes *changes;
};

int mcdc_capture_probe_open(mcdc_capture_probe **out, const mcdc_opts *opts, mcdc_error *err) {
    if (out == NULL || opts == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_capture_probe_open: out and opts are required");
    *out = NULL;
    mcdc_capture_probe *p = mcdc_calloc(1, sizeof *p);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = mcdc_changes_open(&p->changes, opts, NULL, err);
    if (rc) {
        mcdc_capture_probe_free(p);
        return mcdc_error_wrap(err, "opening the capture probe");
    }
    *out = p;
    return MCDC_OK;
}

int mcdc_capture_probe_read(mcdc_capture_probe *p, mcdc_capture_health *out, mcdc_error *err) {
    if (p == NULL || out == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_capture_probe_read: p and out are required");
    return mcdc_changes_capture_health(p->changes, out, err);
}

int mcdc_capture_probe_change_rows(mcdc_capture_probe *p, mcdc_change_table_rows **out,
                                   size_t *n, bool *visible, mcdc_error *err) {
    if (p == NULL || out == NULL || n == NULL || visible == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_capture_probe_change_rows: p, out, n and visible are required");
    return mcdc_changes_change_table_rows(p->changes, out, n, visible, err);
}

void mcdc_change_table_rows_free(mcdc_change_table_rows *rows) { mcdc_free(rows); }

void mcdc_capture_probe_free(mcdc_capture_probe *p) {
    if (p == NULL) return;
    mcdc_changes_close(p->changes);
    mcdc_free(p);
}
