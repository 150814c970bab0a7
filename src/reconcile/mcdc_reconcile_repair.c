/*
 * mcdc_reconcile_repair.c - reconcile --repair: after the run's report,
 * the keys that differ and are not in flight repaired under the run's id
 * (mcdc_repair_keys), so that the next apply fixes silver.
 *
 * A run killed inside its repair (between the bronze commit and the facts
 * row) leaves rows in bronze that apply does not take until the facts row
 * is written. Its rerun is a new reconcile run with a new id that sees the
 * same differences (apply has not run): repairing them again would append
 * them twice. So, with a report table, the rerun first looks at the runs
 * the report holds: each whose repair bronze holds and the facts table
 * does not is completed (its facts row only), and nothing new is appended;
 * apply then takes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_lake.h"
#include "mcdc_reconcile.h"
#include "mcdc_repair.h"
#include "mcdc_silver.h"
#include "mcdc_tables.h"

/* The distinct run ids of the report (other than self), owned. */
typedef struct {
    const char *self;
    char **v;
    size_t n, cap;
} runs_acc;

static void runs_free(runs_acc *a) {
    for (size_t i = 0; i < a->n; i++) mcdc_free(a->v[i]);
    mcdc_free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

static int runs_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    runs_acc *a = ctx;
    const mcdc_column *id = &b->columns[0];
    int rc = MCDC_OK;
    for (int64_t r = 0; r < b->rows && rc == MCDC_OK; r++) {
        if (!mcdc_col_is_valid(id, r)) continue;
        size_t n = (size_t)(id->offsets[r + 1] - id->offsets[r]);
        const char *s = (const char *)id->data + id->offsets[r];
        if (n > MCDC_REPAIR_RUN_ID_MAX || (n == strlen(a->self) && memcmp(s, a->self, n) == 0)) continue;
        /* a run's rows are written together: most repeats are the last one */
        if (a->n > 0 && strlen(a->v[a->n - 1]) == n && memcmp(a->v[a->n - 1], s, n) == 0) continue;
        if (a->n == a->cap) {
            size_t cap = a->cap ? a->cap * 2 : 16;
            char **v = mcdc_realloc(a->v, cap * sizeof *v);
            if (v == NULL) {
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                break;
            }
            a->v = v;
            a->cap = cap;
        }
        if ((a->v[a->n] = mcdc_strndup(s, n)) == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        else a->n++;
    }
    mcdc_batch_free(b);
    return rc;
}

static int by_text(const void *x, const void *y) {
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The report's runs other than self, distinct and sorted. */
static int report_runs(const mcdc_ctx *ctx, const mcdc_reconcile_cfg *cfg, runs_acc *a,
                       mcdc_error *err) {
    mcdc_table *t = NULL;
    int rc = mcdc_table_open_env(&t, ctx->storage_env, cfg->report_table, cfg->warehouse, err);
    mcdc_schema *s = NULL;
    if (rc == MCDC_OK) rc = mcdc_table_schema(t, &s, err);
    int32_t i = s ? mcdc_schema_find(s, "run_id") : -1;
    bool ok = i >= 0 && s->fields[i].type == MCDC_TYPE_UTF8;
    mcdc_schema_unref(s);
    if (rc == MCDC_OK && ok) {
        static const char *const cols[1] = {"run_id"};
        mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
        sc.columns = cols;
        sc.n_columns = 1;
        int64_t v;
        rc = mcdc_table_scan_run(t, &sc, runs_rows, a, &v, NULL, err);
    }
    mcdc_table_close(t);
    if (rc == MCDC_OK && a->n > 1) {
        qsort(a->v, a->n, sizeof *a->v, by_text);
        size_t k = 1;
        for (size_t j = 1; j < a->n; j++) {
            if (strcmp(a->v[j], a->v[k - 1]) == 0) mcdc_free(a->v[j]);
            else a->v[k++] = a->v[j];
        }
        a->n = k;
    }
    if (rc) mcdc_error_wrap(err, "reading the runs of report table %s", cfg->report_table);
    return rc;
}

/* Keeps in a only the runs whose repair is in bronze and not in the facts
 * table (killed between the two). */
static int keep_unrecorded(const mcdc_ctx *ctx, const mcdc_reconcile_cfg *cfg, runs_acc *a,
                           mcdc_error *err) {
    mcdc_table *bronze = NULL, *facts = NULL;
    silver_repairs rp = {0};
    int64_t v;
    int rc = mcdc_table_open_env(&bronze, ctx->storage_env, cfg->bronze, cfg->warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&facts, ctx->storage_env, cfg->facts_table, cfg->warehouse, err);
    if (rc == MCDC_OK) rc = silver_repairs_load(&rp, facts, cfg->bronze, -1, &v, err);
    size_t k = 0;
    for (size_t j = 0; j < a->n; j++) {
        char app[sizeof MCDC_REPAIR_APP_PREFIX + MCDC_REPAIR_RUN_ID_MAX + 1];
        snprintf(app, sizeof app, "%s%s", MCDC_REPAIR_APP_PREFIX, a->v[j]);
        int64_t have = -1;
        if (rc == MCDC_OK && mcdc_repair_run_id_check(a->v[j], NULL) == MCDC_OK)
            rc = mcdc_table_txn_version(bronze, app, &have, err);
        if (rc == MCDC_OK && have >= 0 && !silver_repairs_has(&rp, a->v[j])) a->v[k++] = a->v[j];
        else mcdc_free(a->v[j]);
    }
    a->n = k;
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
    *repaired = false;
    res->bronze_version = -1;
    snprintf(res->run_id, sizeof res->run_id, "%s", run_id);
    int rc = MCDC_OK;
    if (cfg->report_table) {
        runs_acc runs = {.self = run_id};
        rc = report_runs(ctx, cfg, &runs, err);
        if (rc == MCDC_OK) rc = keep_unrecorded(ctx, cfg, &runs, err);
        for (size_t j = 0; rc == MCDC_OK && j < runs.n; j++) {
            /* an earlier run was killed inside its repair: finish that one
             * (its keys are the ones it read; nothing is appended now) */
            mcdc_log(MCDC_LOG_WARN,
                     "run %s was stopped inside its repair: completing it (its facts row) instead "
                     "of repairing again; run apply, then reconcile again", runs.v[j]);
            rc = mcdc_repair_keys(ctx, opts, cfg->bronze, cfg->facts_table, cfg->warehouse,
                                  runs.v[j], NULL, 0, res, err);
            *repaired = rc == MCDC_OK;
        }
        bool completed = runs.n > 0;
        runs_free(&runs);
        if (rc || completed) return rc;
    }
    if (n == 0) return MCDC_OK; /* nothing differs, or all of it in flight: nothing repaired */
    const char **keys = mcdc_calloc((size_t)n, sizeof *keys);
    if (keys == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) keys[i] = diffs[i].key_json;
    rc = mcdc_repair_keys(ctx, opts, cfg->bronze, cfg->facts_table, cfg->warehouse, run_id, keys,
                          (size_t)n, res, err);
    mcdc_free(keys);
    *repaired = rc == MCDC_OK;
    return rc;
}
