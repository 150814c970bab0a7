/*
 * mcdc_reconcile_repair.c - reconcile --repair: after the run's report,
 * the keys that differ and are not in flight repaired under the run's id
 * (mcdc_repair_keys), so that the next apply fixes silver.
 *
 * A run killed inside its repair (between the bronze commit and the facts
 * row) leaves rows in bronze that apply does not take until the facts row
 * is written. Its rerun is a new reconcile run with a new id that sees the
 * same differences (apply has not run): repairing them again would append
 * them twice. So, with a report table, the rerun first looks at the run
 * before it (the report's newest other run_id): when bronze holds that
 * run's repair and the facts table does not, it completes that repair (its
 * facts row only) and appends nothing new; apply then takes it.
 */
#include <stdio.h>
#include <string.h>

#include "mcdc_lake.h"
#include "mcdc_reconcile.h"
#include "mcdc_repair.h"
#include "mcdc_silver.h"
#include "mcdc_tables.h"

typedef struct {
    const char *self;
    char newest[MCDC_REPAIR_RUN_ID_MAX + 1];
    int64_t at;
    bool found;
} prev_acc;

static int prev_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    (void)err;
    prev_acc *a = ctx;
    const mcdc_column *id = &b->columns[0], *at = &b->columns[1];
    for (int64_t r = 0; r < b->rows; r++) {
        if (!mcdc_col_is_valid(id, r) || !mcdc_col_is_valid(at, r)) continue;
        size_t n = (size_t)(id->offsets[r + 1] - id->offsets[r]);
        const char *s = (const char *)id->data + id->offsets[r];
        if (n > MCDC_REPAIR_RUN_ID_MAX || (n == strlen(a->self) && memcmp(s, a->self, n) == 0)) continue;
        int64_t t;
        memcpy(&t, at->values + r * 8, 8);
        if (a->found && t <= a->at) continue;
        memcpy(a->newest, s, n);
        a->newest[n] = 0;
        a->at = t;
        a->found = true;
    }
    mcdc_batch_free(b);
    return MCDC_OK;
}

/* The report's newest run other than self (*found false: none). */
static int previous_run(const mcdc_ctx *ctx, const mcdc_reconcile_cfg *cfg, const char *self,
                        prev_acc *a, mcdc_error *err) {
    memset(a, 0, sizeof *a);
    a->self = self;
    mcdc_table *t = NULL;
    int rc = mcdc_table_open_env(&t, ctx->storage_env, cfg->report_table, cfg->warehouse, err);
    mcdc_schema *s = NULL;
    if (rc == MCDC_OK) rc = mcdc_table_schema(t, &s, err);
    int32_t i = s ? mcdc_schema_find(s, "run_id") : -1, j = s ? mcdc_schema_find(s, "run_at") : -1;
    bool ok = i >= 0 && j >= 0 && s->fields[i].type == MCDC_TYPE_UTF8 &&
              s->fields[j].type == MCDC_TYPE_TIMESTAMP_NTZ;
    mcdc_schema_unref(s);
    if (rc == MCDC_OK && ok) {
        static const char *const cols[2] = {"run_id", "run_at"};
        mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
        sc.columns = cols;
        sc.n_columns = 2;
        int64_t v;
        rc = mcdc_table_scan_run(t, &sc, prev_rows, a, &v, NULL, err);
    }
    mcdc_table_close(t);
    if (rc) mcdc_error_wrap(err, "reading the runs of report table %s", cfg->report_table);
    return rc;
}

/* Is run's repair in bronze and not in the facts table? */
static int repair_unrecorded(const mcdc_ctx *ctx, const mcdc_reconcile_cfg *cfg, const char *run,
                             bool *yes, mcdc_error *err) {
    *yes = false;
    char app[sizeof MCDC_REPAIR_APP_PREFIX + MCDC_REPAIR_RUN_ID_MAX + 1];
    snprintf(app, sizeof app, "%s%s", MCDC_REPAIR_APP_PREFIX, run);
    mcdc_table *bronze = NULL, *facts = NULL;
    int64_t have = -1, v;
    int rc = mcdc_table_open_env(&bronze, ctx->storage_env, cfg->bronze, cfg->warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_table_txn_version(bronze, app, &have, err);
    if (rc == MCDC_OK && have >= 0)
        rc = mcdc_table_open_env(&facts, ctx->storage_env, cfg->facts_table, cfg->warehouse, err);
    silver_repairs rp = {0};
    if (rc == MCDC_OK && have >= 0) rc = silver_repairs_load(&rp, facts, cfg->bronze, -1, &v, err);
    if (rc == MCDC_OK && have >= 0) *yes = !silver_repairs_has(&rp, run);
    silver_repairs_free(&rp);
    mcdc_table_close(facts);
    mcdc_table_close(bronze);
    return rc;
}

int rec_repair_diffs(const mcdc_ctx *ctx, const mcdc_opts *opts, const mcdc_reconcile_cfg *cfg,
                     const char *run_id, const mcdc_reconcile_diff *diffs, int64_t n,
                     bool *repaired, mcdc_repair_result *res, mcdc_error *err) {
    MCDC_ASSERT(ctx && cfg && run_id && repaired && res && (n == 0 || diffs));
    MCDC_ASSERT(cfg->facts_table != NULL); /* create refuses repair without one */
    memset(res, 0, sizeof *res);
    res->bronze_version = -1;
    snprintf(res->run_id, sizeof res->run_id, "%s", run_id);
    int rc = MCDC_OK;
    if (cfg->report_table) {
        prev_acc prev;
        bool pending = false;
        rc = previous_run(ctx, cfg, run_id, &prev, err);
        if (rc == MCDC_OK && prev.found && mcdc_repair_run_id_check(prev.newest, NULL) == MCDC_OK)
            rc = repair_unrecorded(ctx, cfg, prev.newest, &pending, err);
        if (rc) return rc;
        if (pending) {
            /* the previous run was killed inside its repair: finish that
             * one (its keys are the ones it read; nothing appended now) */
            mcdc_log(MCDC_LOG_WARN,
                     "run %s was stopped inside its repair: completing it (its facts row) instead "
                     "of repairing again; run apply, then reconcile again", prev.newest);
            rc = mcdc_repair_keys(ctx, opts, cfg->bronze, cfg->facts_table, cfg->warehouse,
                                  prev.newest, NULL, 0, res, err);
            *repaired = rc == MCDC_OK;
            return rc;
        }
    }
    if (n > 0) {
        const char **keys = mcdc_calloc((size_t)n, sizeof *keys);
        if (keys == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        for (int64_t i = 0; i < n; i++) keys[i] = diffs[i].key_json;
        rc = mcdc_repair_keys(ctx, opts, cfg->bronze, cfg->facts_table, cfg->warehouse, run_id,
                              keys, (size_t)n, res, err);
        mcdc_free(keys);
    }
    *repaired = rc == MCDC_OK;
    return rc;
}
