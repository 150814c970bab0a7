/*
 * mcdc_reconcile_report.c - reconcile's report table (--report-table): its
 * schema, its rows (one a bucket, each naming the reads of the check it is
 * of; one a key that differs, or a chunk failure) and their one commit, a
 * job of one unit on the job frame (mcdc_reconcile.c builds and writes it
 * once the run's checks are done).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_context.h"
#include "mcdc_frame.h"
#include "mcdc_lake.h"
#include "mcdc_once.h"
#include "mcdc_reconcile.h"
#include "mcdc_txn.h"

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

/* ---- its rows ------------------------------------------------------------------------ */
enum {
    R_RUN_ID, R_RUN_AT, R_SILVER, R_SILVER_VERSION, R_SILVER_LSN, R_SOURCE_LSN, R_BUCKET_LO,
    R_BUCKET_HI, R_SOURCE_ROWS, R_SOURCE_KEY_SUM, R_SILVER_ROWS, R_SILVER_KEY_SUM, R_STATUS,
    R_HASHED, R_KEY, R_FAILURE_TYPE, R_DETAIL, R_COUNT
};

int mcdc_reconcile_report_schema(mcdc_schema **out, mcdc_error *err);
int mcdc_reconcile_report_schema(mcdc_schema **out, mcdc_error *err) {
    static const struct {
        const char *name;
        mcdc_type_id t;
    } cols[R_COUNT] = {
        {"run_id", MCDC_TYPE_UTF8},        {"run_at", MCDC_TYPE_TIMESTAMP_NTZ},
        {"silver", MCDC_TYPE_UTF8},        {"silver_version", MCDC_TYPE_INT64},
        {"silver_lsn", MCDC_TYPE_UTF8},    {"source_lsn", MCDC_TYPE_UTF8},
        {"bucket_lo", MCDC_TYPE_UTF8},     {"bucket_hi", MCDC_TYPE_UTF8},
        {"source_rows", MCDC_TYPE_INT64},  {"source_key_sum", MCDC_TYPE_DECIMAL},
        {"silver_rows", MCDC_TYPE_INT64},  {"silver_key_sum", MCDC_TYPE_DECIMAL},
        {"status", MCDC_TYPE_UTF8},        {"hashed", MCDC_TYPE_BOOL},
        {"key", MCDC_TYPE_UTF8},           {"failure_type", MCDC_TYPE_UTF8},
        {"detail", MCDC_TYPE_UTF8},
    };
    mcdc_schema *s;
    int rc = mcdc_schema_create(&s, R_COUNT, err);
    for (int i = 0; rc == MCDC_OK && i < R_COUNT; i++)
        rc = mcdc_schema_set(s, i, cols[i].name, cols[i].t, cols[i].t == MCDC_TYPE_DECIMAL ? 38 : 0, 0,
                             0, true, err);
    if (rc) {
        mcdc_schema_unref(s);
        return rc;
    }
    *out = s;
    return MCDC_OK;
}

static int put_text(mcdc_column *c, const char *s, mcdc_error *err) {
    return s ? mcdc_col_append_bytes(c, s, (int64_t)strlen(s), err) : mcdc_col_append_null(c, err);
}

/* The columns every row has: run_id .. silver_lsn, of the check `round`. */
static int put_common(mcdc_reconcile *r, mcdc_batch *b, const rec_round *round, mcdc_error *err) {
    int rc = put_text(&b->columns[R_RUN_ID], r->res.run_id, err);
    if (rc == MCDC_OK) rc = mcdc_col_append_int(&b->columns[R_RUN_AT], r->run_at_us, err);
    if (rc == MCDC_OK) rc = put_text(&b->columns[R_SILVER], r->cfg.silver, err);
    if (rc == MCDC_OK) rc = mcdc_col_append_int(&b->columns[R_SILVER_VERSION], round->version, err);
    if (rc == MCDC_OK)
        rc = put_text(&b->columns[R_SILVER_LSN], round->has_e ? round->silver_lsn : NULL, err);
    return rc;
}

static int put_sum(mcdc_column *c, bool has, rec_i128 v, mcdc_error *err) {
    if (!has) return mcdc_col_append_null(c, err);
    uint64_t lo;
    int64_t hi;
    rec_i128_parts(v, &lo, &hi);
    return mcdc_col_append_decimal(c, lo, hi, err);
}

static int bucket_row(mcdc_reconcile *r, mcdc_batch *b, int64_t i, mcdc_error *err) {
    const rec_bucket *k = &r->buckets[i];
    const rec_round *round = &r->rounds[k->round];
    char *lo = NULL, *hi = NULL;
    int rc = put_common(r, b, round, err);
    if (rc == MCDC_OK && r->ordinal) rc = rec_bound_json(&lo, r, k->rep_has_lo, k->rep_lo, err);
    if (rc == MCDC_OK && r->ordinal) rc = rec_bound_json(&hi, r, k->rep_has_hi, k->rep_hi, err);
    if (rc == MCDC_OK) rc = put_text(&b->columns[R_SOURCE_LSN], round->bucket_lsn, err);
    if (rc == MCDC_OK) rc = put_text(&b->columns[R_BUCKET_LO], lo, err);
    if (rc == MCDC_OK) rc = put_text(&b->columns[R_BUCKET_HI], hi, err);
    if (rc == MCDC_OK) rc = mcdc_col_append_int(&b->columns[R_SOURCE_ROWS], k->src_rows, err);
    if (rc == MCDC_OK) rc = put_sum(&b->columns[R_SOURCE_KEY_SUM], r->ordinal, k->src_sum, err);
    if (rc == MCDC_OK) rc = mcdc_col_append_int(&b->columns[R_SILVER_ROWS], k->sil_rows, err);
    if (rc == MCDC_OK) rc = put_sum(&b->columns[R_SILVER_KEY_SUM], r->ordinal, k->sil_sum, err);
    if (rc == MCDC_OK) rc = put_text(&b->columns[R_STATUS], rec_status_name(k->status), err);
    if (rc == MCDC_OK) rc = mcdc_col_append_bool(&b->columns[R_HASHED], k->hashed, err);
    for (int c = R_KEY; rc == MCDC_OK && c <= R_DETAIL; c++) rc = mcdc_col_append_null(&b->columns[c], err);
    mcdc_free(lo);
    mcdc_free(hi);
    return rc;
}

static int diff_row(mcdc_reconcile *r, mcdc_batch *b, const rec_diff *d, mcdc_error *err) {
    const rec_round *round = &r->rounds[d->round];
    char *lo = NULL, *hi = NULL;
    int rc = put_common(r, b, round, err);
    if (rc == MCDC_OK && !d->chunk && r->ordinal) {
        const rec_bucket *k = &r->buckets[d->bucket];
        rc = rec_bound_json(&lo, r, k->rep_has_lo, k->rep_lo, err);
        if (rc == MCDC_OK) rc = rec_bound_json(&hi, r, k->rep_has_hi, k->rep_hi, err);
    } else if (rc == MCDC_OK && !d->chunk) {
        const json_t *g = json_array_get(r->ranges, (size_t)d->bucket);
        for (int e = 0; rc == MCDC_OK && e < 2; e++) {
            const json_t *v = json_array_get(g, (size_t)e);
            char *t = v && !json_is_null(v) ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
            if (v && !json_is_null(v) && t == NULL) rc = nomem(err);
            *(e ? &hi : &lo) = t ? mcdc_strdup(t) : NULL;
            free(t);
        }
    }
    if (rc == MCDC_OK)
        rc = put_text(&b->columns[R_SOURCE_LSN], d->chunk ? NULL : round->read_lsn, err);
    if (rc == MCDC_OK) rc = put_text(&b->columns[R_BUCKET_LO], d->chunk ? d->lo : lo, err);
    if (rc == MCDC_OK) rc = put_text(&b->columns[R_BUCKET_HI], d->chunk ? d->hi : hi, err);
    for (int c = R_SOURCE_ROWS; rc == MCDC_OK && c <= R_HASHED; c++)
        rc = mcdc_col_append_null(&b->columns[c], err);
    if (rc == MCDC_OK) rc = put_text(&b->columns[R_KEY], d->key_json, err);
    if (rc == MCDC_OK)
        rc = put_text(&b->columns[R_FAILURE_TYPE], mcdc_reconcile_failure_name((int)d->failure), err);
    if (rc == MCDC_OK) rc = put_text(&b->columns[R_DETAIL], d->detail, err);
    mcdc_free(lo);
    mcdc_free(hi);
    return rc;
}

int rec_build_report(mcdc_reconcile *r, mcdc_batch **out, mcdc_error *err) {
    mcdc_schema *s = NULL;
    mcdc_batch *b = NULL;
    int rc = mcdc_reconcile_report_schema(&s, err);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&b, s, r->n_buckets + r->n_diffs + 1, err);
    mcdc_schema_unref(s);
    for (int64_t i = 0; rc == MCDC_OK && i < r->n_buckets; i++) rc = bucket_row(r, b, i, err);
    for (int64_t i = 0; rc == MCDC_OK && i < r->n_diffs; i++) rc = diff_row(r, b, &r->diffs[i], err);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    if (rc) {
        mcdc_batch_free(b);
        return rc;
    }
    *out = b;
    return MCDC_OK;
}

/* ---- the report: a job of one unit on the job frame (mcdc_once.h) -----------------------
 * Its unit is numbered by what the report is (MCDC_TXN_RECONCILE_REPORT, or
 * _REPAIRS for a run that goes on to repair keys: the mark a later run
 * finds an unfinished repair by), its plan is the source LSN it compared
 * at, and its one commit to the report table, txn(RECONCILE, that
 * number), is its record: there are no facts. The smallest job on the
 * frame: copy it for a new one. */

typedef struct {
    mcdc_reconcile *r;
    const mcdc_batch *rows;
} report_job;

static int report_plan(void *job, const mcdc_pos *last_end, mcdc_pos *start, mcdc_pos *end,
                       bool *idle, mcdc_error *err) {
    report_job *j = job;
    (void)err;
    *idle = last_end != NULL; /* written already */
    if (*idle) return MCDC_OK;
    start->kind = end->kind = MCDC_POS_STAMP;
    end->stamp.has_lsn = mcdc_lsn_parse_cstr(&end->stamp.lsn, j->r->source_lsn, NULL) == MCDC_OK;
    return MCDC_OK;
}

static int report_run(void *job, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                      mcdc_error *err) {
    report_job *j = job;
    res->rows = j->rows->rows;
    if (u->data_done) return MCDC_OK;
    mcdc_table_props props = {.kind = MCDC_KIND_RECONCILE};
    mcdc_appender *ap = NULL;
    int rc = mcdc_appender_open(&ap, j->r->report, j->rows->schema, &props, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(ap, j->rows, err);
    if (rc == MCDC_OK && mcdc_ctx_crash(&j->r->ctx, "before_report_commit", 0)) rc = MCDC_E_CANCELLED;
    json_t *meta = rc == MCDC_OK ? json_object() : NULL;
    if (rc == MCDC_OK) rc = meta ? mcdc_frame_commit_data(f, u, ap, meta, NULL, err) : nomem(err);
    res->data_committed = rc == MCDC_OK;
    mcdc_appender_free(ap);
    return rc;
}

static const mcdc_job_ops REPORT_OPS = {
    .kind = "reconcile report",
    .pos_kind = MCDC_POS_STAMP,
    .plan = report_plan,
    .run = report_run,
};

int rec_write_report(mcdc_reconcile *r, const mcdc_batch *b, mcdc_error *err) {
    char app[MCDC_TXN_APP_ID_MAX], name[MCDC_TXN_APP_ID_MAX + 16];
    int rc = mcdc_txn_app_id(app, sizeof app, MCDC_TXN_RECONCILE, r->res.run_id, 0, NULL, err);
    snprintf(name, sizeof name, "the report of run %s", r->res.run_id);
    report_job j = {.r = r, .rows = b};
    mcdc_once_cfg oc = {.ctx = &r->ctx,
                        .id = app,
                        .name = name,
                        .unit = r->cfg.repair && r->n_out_diffs > 0 ? MCDC_TXN_RECONCILE_REPAIRS
                                                                    : MCDC_TXN_RECONCILE_REPORT,
                        .target = r->report,
                        .target_kind = MCDC_KIND_RECONCILE,
                        .target_role = "report table",
                        .app_id = app,
                        .crash_prefix = "report_"};
    if (rc == MCDC_OK) rc = mcdc_once_run(&oc, &REPORT_OPS, &j, err);
    if (rc) return mcdc_error_wrap(err, "writing the report to %s", r->cfg.report_table), rc;
    r->res.report_written = true;
    return MCDC_OK;
}
