/* mcdc_plans.c - a bronze table's plans table (see mcdc_plans.h). */
#include "mcdc_plans.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_tables.h"

/* The payload keys each event leaves to the plans table. */
static const struct {
    const char *event;
    const char *keys[3];
} IN_PLANS[] = {
    {"snapshot_open", {"keys", "plan", NULL}},
    {"snapshot_plan", {"chunks", NULL, NULL}},
    {"snapshot_chunk", {"lo", "hi", NULL}},
};

static const char *const *kept_keys(const char *event) {
    for (size_t i = 0; i < sizeof IN_PLANS / sizeof IN_PLANS[0]; i++)
        if (strcmp(IN_PLANS[i].event, event) == 0) return IN_PLANS[i].keys;
    return NULL;
}

int mcdc_plans_name(char **out, const char *target, mcdc_error *err) {
    size_t n = strlen(target);
    while (n > 1 && target[n - 1] == '/') n--;
    static const char SUFFIX[] = "_snapshot_plans";
    *out = mcdc_malloc(n + sizeof SUFFIX);
    if (*out == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    memcpy(*out, target, n);
    memcpy(*out + n, SUFFIX, sizeof SUFFIX);
    return MCDC_OK;
}

int mcdc_plans_write(mcdc_table *plans, const char *s, const char *event,
                     json_t *const *details, int n, const char *txn_app_id, int64_t version,
                     bool *skipped, mcdc_error *err) {
    MCDC_ASSERT(plans && s && event && txn_app_id && n >= 1);
    *skipped = false;
    mcdc_schema *ps = NULL;
    mcdc_batch *b = NULL;
    mcdc_appender *a = NULL;
    int rc = mcdc_plans_schema(&ps, err);
    if (rc == MCDC_OK) rc = mcdc_batch_create(&b, ps, n, err);
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        char *text = json_dumps(details[i], JSON_COMPACT);
        if (text == NULL) {
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            break;
        }
        mcdc_cell c[3] = {mcdc_cell_text(s), mcdc_cell_text(event), mcdc_cell_text(text)};
        rc = mcdc_row_append(b, c, err);
        free(text);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    mcdc_table_props props = {.kind = MCDC_KIND_PLANS};
    if (rc == MCDC_OK) rc = mcdc_appender_open(&a, plans, ps, &props, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, err);
    int64_t v;
    if (rc == MCDC_OK) rc = mcdc_appender_commit(a, txn_app_id, version, NULL, skipped, &v, err);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(ps);
    if (rc) mcdc_error_wrap(err, "writing the %s rows of snapshot %s to %s", event, s,
                            mcdc_table_name(plans));
    return rc;
}

typedef struct {
    mcdc_plan_rows *p;
    const char *s;
    int cap;
} load_acc;

static int64_t int_or_none(const json_t *d, const char *key) {
    json_t *v = json_object_get(d, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

static int load_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    load_acc *a = ctx;
    int rc = MCDC_OK;
    size_t slen = strlen(a->s);
    for (int64_t r = 0; r < b->rows && rc == MCDC_OK; r++) {
        mcdc_cell s = mcdc_row_get(b, r, 0), ev = mcdc_row_get(b, r, 1), d = mcdc_row_get(b, r, 2);
        if (s.kind != MCDC_CELL_TEXT || (size_t)s.i != slen || memcmp(s.s, a->s, slen) != 0 ||
            ev.kind != MCDC_CELL_TEXT || (size_t)ev.i >= sizeof a->p->rows[0].event ||
            d.kind != MCDC_CELL_TEXT)
            continue;
        json_error_t je;
        json_t *detail = json_loadb(d.s, (size_t)d.i, 0, &je);
        if (!json_is_object(detail)) {
            json_decref(detail);
            rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                "a plans row of snapshot %s holds a detail that is not a JSON "
                                "object (%s): the plans table is damaged",
                                a->s, je.text);
            break;
        }
        if (a->p->n == a->cap) {
            int cap = a->cap ? 2 * a->cap : 16;
            struct mcdc_plan_row *v = mcdc_realloc(a->p->rows, (size_t)cap * sizeof *v);
            if (v == NULL) {
                json_decref(detail);
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                break;
            }
            a->p->rows = v;
            a->cap = cap;
        }
        struct mcdc_plan_row *x = &a->p->rows[a->p->n++];
        memcpy(x->event, ev.s, (size_t)ev.i);
        x->event[ev.i] = 0;
        x->chunk = int_or_none(detail, "chunk");
        x->wave = int_or_none(detail, "wave");
        x->detail = detail;
    }
    mcdc_batch_free(b);
    return rc;
}

int mcdc_plans_load(mcdc_plan_rows *out, mcdc_table *plans, const char *s, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    static const char *const cols[] = {"snapshot", "event", "detail"};
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.columns = cols;
    sc.n_columns = 3;
    load_acc a = {.p = out, .s = s};
    int64_t v;
    int rc = mcdc_table_scan_run(plans, &sc, load_rows, &a, &v, NULL, err);
    if (rc) {
        mcdc_plan_rows_free(out);
        mcdc_error_wrap(err, "reading the plans of snapshot %s in %s", s, mcdc_table_name(plans));
    }
    return rc;
}

void mcdc_plan_rows_free(mcdc_plan_rows *p) {
    for (int i = 0; p && i < p->n; i++) json_decref(p->rows[i].detail);
    if (p) {
        mcdc_free(p->rows);
        p->rows = NULL;
        p->n = 0;
    }
}

const json_t *mcdc_plan_rows_find(const mcdc_plan_rows *p, const char *event, int64_t chunk,
                                  int64_t wave) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->rows[i].event, event) == 0 && p->rows[i].chunk == chunk &&
            p->rows[i].wave == wave)
            return p->rows[i].detail;
    return NULL;
}

const json_t *mcdc_plans_whole(const mcdc_plan_rows *p, const char *plans_name,
                               const char *event, const json_t *detail, mcdc_error *err) {
    const char *const *keys = kept_keys(event);
    MCDC_ASSERT(keys != NULL);
    for (int i = 0; keys[i]; i++)
        if (json_object_get(detail, keys[i])) return detail; /* a pre-0.7.0 row: whole */
    int64_t chunk = int_or_none(detail, "chunk"), wave = int_or_none(detail, "wave");
    const json_t *found = mcdc_plan_rows_find(p, event, chunk, wave);
    if (found == NULL) {
        char which[48] = "";
        if (chunk >= 0) snprintf(which, sizeof which, " for chunk %lld", (long long)chunk);
        mcdc_error_set(err, MCDC_E_CORRUPT,
                       "%s has no '%s' row%s of this snapshot, and its facts row leaves the key "
                       "values to it: was the plans table dropped, renamed or restored from an "
                       "older copy? It is found by bronze's name as given (--target) with "
                       "_snapshot_plans appended",
                       plans_name, event, which);
    }
    return found;
}

json_t *mcdc_plans_public(const char *event, const json_t *detail) {
    const char *const *keys = kept_keys(event);
    MCDC_ASSERT(keys != NULL);
    json_t *out = json_deep_copy(detail);
    for (int i = 0; out && keys[i]; i++) json_object_del(out, keys[i]);
    return out;
}
