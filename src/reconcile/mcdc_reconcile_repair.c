/*
 * mcdc_reconcile_repair.c - reconcile --repair: after the run's report,
 * the keys that differ and are not in flight repaired under the run's id
 * (mcdc_repair_keys), so that the next apply fixes silver.
 *
 * A run killed after its report and before its repair recorded it (its
 * bronze commit, or the facts row after that) leaves report rows no repair
 * answers, or rows in bronze that apply does not take until their facts
 * row is written. So a --repair run with a report table first looks at the
 * runs the report holds: each that marked its report as one that repairs
 * (txn version MCDC_TXN_RECONCILE_REPAIRS) and whose repair bronze lacks, or whose
 * repair bronze holds and the facts table does not, has its repair
 * completed under its own run id, with the keys its report names. Those
 * keys are then pending apply: the run that goes on finds them IN_FLIGHT
 * and repairs them no second time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_lake.h"
#include "mcdc_reconcile.h"
#include "mcdc_repair.h"
#include "mcdc_silver.h"
#include "mcdc_tables.h"
#include "mcdc_txn.h"

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

/* Keeps in a only the runs whose repair did not finish: its report marks
 * it a repairing run (txn version MCDC_TXN_RECONCILE_REPAIRS) and the
 * repair's ledger holds nothing of it (killed after the report), or holds
 * its bronze commit but not its facts row (killed between the two; any
 * run, as reports written before the mark have none). */
static int keep_unfinished(const mcdc_ctx *ctx, const mcdc_reconcile_cfg *cfg, runs_acc *a,
                           mcdc_error *err) {
    mcdc_table *bronze = NULL, *facts = NULL, *report = NULL;
    const mcdc_storage_env *env = ctx->storage_env;
    int rc = mcdc_table_open_env(&bronze, env, cfg->bronze, cfg->warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&facts, env, cfg->facts_table, cfg->warehouse, err);
    if (rc == MCDC_OK) rc = mcdc_table_open_env(&report, env, cfg->report_table, cfg->warehouse, err);
    size_t k = 0;
    for (size_t j = 0; j < a->n; j++) {
        char mark[MCDC_TXN_APP_ID_MAX];
        int64_t marked = -1;
        bool keep = false, written = false, recorded = false;
        if (rc == MCDC_OK && mcdc_repair_run_id_check(a->v[j], NULL) == MCDC_OK) {
            rc = mcdc_repair_state(bronze, facts, a->v[j], &written, &recorded, err);
            if (rc == MCDC_OK && !written)
                rc = mcdc_txn_app_id(mark, sizeof mark, MCDC_TXN_RECONCILE, a->v[j], 0, NULL, err);
            if (rc == MCDC_OK && !written) rc = mcdc_table_txn_version(report, mark, &marked, err);
            keep = rc == MCDC_OK && (written ? !recorded : marked == MCDC_TXN_RECONCILE_REPAIRS);
        }
        if (keep) a->v[k++] = a->v[j];
        else mcdc_free(a->v[j]);
    }
    a->n = k;
    mcdc_table_close(report);
    mcdc_table_close(facts);
    mcdc_table_close(bronze);
    return rc;
}

int rec_repair_unfinished(const mcdc_ctx *ctx, const mcdc_opts *opts,
                          const mcdc_reconcile_cfg *cfg, const char *run_id, bool *completed,
                          mcdc_repair_result *res, mcdc_error *err) {
    MCDC_ASSERT(ctx && cfg && run_id && completed && res);
    MCDC_ASSERT(cfg->facts_table != NULL && cfg->report_table != NULL);
    *completed = false;
    runs_acc runs = {.self = run_id};
    int rc = report_runs(ctx, cfg, &runs, err);
    if (rc == MCDC_OK && runs.n > 0) rc = keep_unfinished(ctx, cfg, &runs, err);
    for (size_t j = 0; rc == MCDC_OK && j < runs.n; j++) {
        /* its keys are the ones its report names; a repair of its id in
         * bronze already (killed before the facts row) is only recorded */
        mcdc_log(MCDC_LOG_WARN,
                 "run %s was stopped before its repair was recorded: completing that repair "
                 "first (its keys, as its report names them), then this run goes on",
                 runs.v[j]);
        char **keys = NULL;
        size_t n = 0;
        rc = mcdc_repair_report_keys(ctx, cfg->report_table, cfg->warehouse, runs.v[j], &keys, &n,
                                     err);
        if (rc == MCDC_OK)
            rc = mcdc_repair_keys(ctx, opts, cfg->bronze, cfg->facts_table, cfg->warehouse,
                                  runs.v[j], (const char *const *)keys, n, res, err);
        mcdc_repair_keys_free(keys, n);
        if (rc && rc != MCDC_E_CANCELLED)
            mcdc_error_wrap(err, "completing the repair of run %s (stopped after its report)",
                            runs.v[j]);
        *completed = rc == MCDC_OK;
    }
    runs_free(&runs);
    return rc;
}

int rec_repair_diffs(const mcdc_ctx *ctx, const mcdc_opts *opts, const mcdc_reconcile_cfg *cfg,
                     const char *run_id, const mcdc_reconcile_diff *diffs, int64_t n,
                     bool *repaired, mcdc_repair_result *res, mcdc_error *err) {
    MCDC_ASSERT(ctx && cfg && run_id && repaired && res && (n == 0 || diffs));
    MCDC_ASSERT(cfg->facts_table != NULL); /* create refuses repair without one */
    *repaired = false;
    if (n == 0) return MCDC_OK; /* nothing differs, or all of it in flight: nothing repaired */
    memset(res, 0, sizeof *res);
    const char **keys = mcdc_calloc((size_t)n, sizeof *keys);
    if (keys == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) keys[i] = diffs[i].key_json;
    int rc = mcdc_repair_keys(ctx, opts, cfg->bronze, cfg->facts_table, cfg->warehouse, run_id,
                              keys, (size_t)n, res, err);
    mcdc_free(keys);
    *repaired = rc == MCDC_OK;
    return rc;
}
