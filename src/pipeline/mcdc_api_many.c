/*
 * mcdc_api_many.c - what a host running many streams in one process does
 * once before it starts them (include/mssqlcdc.h, "Many tables"): ask the
 * source which of the capture instances it was given exist, and create the
 * facts table they share.
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
