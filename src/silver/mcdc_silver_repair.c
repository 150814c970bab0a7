/*
 * mcdc_silver_repair.c - the repairs a facts table records for a bronze
 * table (event 'repair', docs/repair.md), as apply reads them: which ones
 * arrived since its last pass, and the LSN each was stamped with.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_silver.h"

void silver_repairs_free(silver_repairs *r) {
    if (r == NULL) return;
    for (int32_t i = 0; i < r->n; i++) mcdc_free(r->run_ids[i]);
    mcdc_free(r->run_ids);
    mcdc_free(r->stamps);
    memset(r, 0, sizeof *r);
}

typedef struct {
    silver_repairs *out;
    const char *bronze;
    int32_t cap;
} load_acc;

static bool text_is(const mcdc_column *c, int64_t r, const char *s) {
    if (!mcdc_col_is_valid(c, r)) return false;
    size_t n = (size_t)(c->offsets[r + 1] - c->offsets[r]);
    return n == strlen(s) && memcmp(c->data + c->offsets[r], s, n) == 0;
}

static int load_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    load_acc *a = ctx;
    int rc = MCDC_OK;
    const mcdc_column *ev = &b->columns[0], *tg = &b->columns[1], *lsn = &b->columns[2],
                      *det = &b->columns[3];
    for (int64_t r = 0; r < b->rows && rc == MCDC_OK; r++) {
        if (!text_is(ev, r, SILVER_REPAIR_EVENT) || !text_is(tg, r, a->bronze)) continue;
        if (!mcdc_col_is_valid(lsn, r) || lsn->offsets[r + 1] - lsn->offsets[r] != 22) continue;
        if (!mcdc_col_is_valid(det, r)) continue;
        json_error_t je;
        json_t *d = json_loadb((const char *)det->data + det->offsets[r],
                               (size_t)(det->offsets[r + 1] - det->offsets[r]), 0, &je);
        const char *run = json_string_value(json_object_get(d, "run_id"));
        if (run == NULL) {
            json_decref(d);
            continue; /* not one of ours */
        }
        if (a->out->n == a->cap) {
            int32_t cap = a->cap ? a->cap * 2 : 8;
            char **v = mcdc_realloc(a->out->run_ids, (size_t)cap * sizeof *v);
            if (v) a->out->run_ids = v;
            char(*s)[23] = v ? mcdc_realloc(a->out->stamps, (size_t)cap * sizeof *s) : NULL;
            if (s) a->out->stamps = s;
            if (v == NULL || s == NULL) {
                json_decref(d);
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                break;
            }
            a->cap = cap;
        }
        int32_t i = a->out->n;
        a->out->run_ids[i] = mcdc_strdup(run);
        json_decref(d);
        if (a->out->run_ids[i] == NULL) {
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            break;
        }
        memcpy(a->out->stamps[i], lsn->data + lsn->offsets[r], 22);
        a->out->stamps[i][22] = 0;
        a->out->n++;
    }
    mcdc_batch_free(b);
    return rc;
}

int silver_repairs_load(silver_repairs *out, mcdc_table *facts, const char *bronze,
                        int64_t version, int64_t *version_read, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    *version_read = -1;
    if (facts == NULL) return MCDC_OK;
    static const char *const cols[4] = {"event", "target", "max_lsn", "detail"};
    load_acc a = {.out = out, .bronze = bronze};
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.version = version;
    sc.columns = cols;
    sc.n_columns = 4;
    int rc = mcdc_table_scan_run(facts, &sc, load_rows, &a, version_read, NULL, err);
    if (rc) {
        silver_repairs_free(out);
        mcdc_error_wrap(err, "reading the repairs of %s in %s", bronze, mcdc_table_name(facts));
    }
    return rc;
}

bool silver_repairs_has(const silver_repairs *r, const char *run_id) {
    for (int32_t i = 0; i < r->n; i++)
        if (strcmp(r->run_ids[i], run_id) == 0) return true;
    return false;
}
