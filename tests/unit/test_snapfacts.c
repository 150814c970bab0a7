/* test_snapfacts.c - which snapshot on switch a stream generation still owes
 * (mcdc_snapfacts_switch_owed), and the open chunked snapshot a newer one
 * supersedes (mcdc_snapfacts_open_chunked), from facts rows built here. */
#include <jansson.h>

#include "mcdc_snapfacts.h"
#include "mcdc_test.h"

/* Appends one row; detail is JSON text or NULL; batch < 0: no batch_id. */
static void add(mcdc_snapfacts *sf, mcdc_snap_event ev, const char *app, const char *lsn,
                int64_t batch, const char *detail) {
    mcdc_snap_row *v = mcdc_realloc(sf->rows, (size_t)(sf->n + 1) * sizeof *v);
    MCDC_ASSERT(v);
    sf->rows = v;
    mcdc_snap_row *r = &v[sf->n++];
    memset(r, 0, sizeof *r);
    r->event = ev;
    r->app_id = mcdc_strdup(app);
    snprintf(r->min_lsn, sizeof r->min_lsn, "%s", lsn);
    snprintf(r->max_lsn, sizeof r->max_lsn, "%s", lsn);
    r->has_batch_id = batch >= 0;
    r->batch_id = batch;
    json_error_t je;
    r->detail = detail ? json_loads(detail, 0, &je) : NULL;
}

#define L1 "0x00000010000000100001"
#define L2 "0x00000020000000200001"
#define L3 "0x00000030000000300001"
#define L4 "0x00000040000000400001"

static const char *owed_lsn(const mcdc_snapfacts *sf, const char *sink, const char **full) {
    const mcdc_snap_row *f = NULL;
    const mcdc_snap_row *r = mcdc_snapfacts_switch_owed(sf, sink, &f);
    *full = f ? f->min_lsn : NULL;
    return r ? r->min_lsn : NULL;
}

TEST(snapfacts_switch_owed_until_its_snapshot_is_opened_chunked_or_completed) {
    mcdc_snapfacts sf = {0};
    const char *full = NULL;
    CHECK(owed_lsn(&sf, "app", &full) == NULL && full == NULL); /* no switch: nothing owed */
    add(&sf, MCDC_SNAP_SWITCHED, "app", L1, 5, NULL);
    const char *o = owed_lsn(&sf, "app", &full);
    CHECK(o && strcmp(o, L1) == 0 && full == NULL);
    /* another generation's open of batch 5 answers nothing of this one */
    add(&sf, MCDC_SNAP_OPEN, "app.g1", L2, -1,
        "{\"mode\":\"chunked\",\"kind\":\"bootstrap\",\"generation\":1,\"switch_batch_id\":5}");
    CHECK(owed_lsn(&sf, "app", &full) != NULL);
    /* a full open of batch 5, not completed: still owed, and named */
    add(&sf, MCDC_SNAP_OPEN, "app", L2, -1,
        "{\"mode\":\"full\",\"kind\":\"bootstrap\",\"generation\":0,\"switch_batch_id\":5}");
    o = owed_lsn(&sf, "app", &full);
    CHECK(o && full && strcmp(full, L2) == 0);
    /* a second attempt's open: the newest is named */
    add(&sf, MCDC_SNAP_OPEN, "app", L3, -1,
        "{\"mode\":\"full\",\"kind\":\"bootstrap\",\"generation\":0,\"switch_batch_id\":5}");
    o = owed_lsn(&sf, "app", &full);
    CHECK(o && full && strcmp(full, L3) == 0);
    /* a completion below it does not close it; one at it does */
    add(&sf, MCDC_SNAP_BOOTSTRAP, "app", L1, -1, NULL);
    CHECK(owed_lsn(&sf, "app", &full) != NULL);
    add(&sf, MCDC_SNAP_BOOTSTRAP, "app", L3, -1, NULL);
    CHECK(owed_lsn(&sf, "app", &full) == NULL && full == NULL);
    /* a newer switch is owed again; its chunked open answers it at once */
    add(&sf, MCDC_SNAP_SWITCHED, "app", L4, 9, NULL);
    o = owed_lsn(&sf, "app", &full);
    CHECK(o && strcmp(o, L4) == 0 && full == NULL);
    add(&sf, MCDC_SNAP_OPEN, "app", L4, -1,
        "{\"mode\":\"chunked\",\"kind\":\"bootstrap\",\"generation\":0,\"switch_batch_id\":9}");
    CHECK(owed_lsn(&sf, "app", &full) == NULL);
    /* a switch row of another generation is that generation's */
    add(&sf, MCDC_SNAP_SWITCHED, "app.g1", L4, 2, NULL);
    CHECK(owed_lsn(&sf, "app", &full) == NULL);
    o = owed_lsn(&sf, "app.g1", &full);
    CHECK(o && strcmp(o, L4) == 0);
    mcdc_snapfacts_free(&sf);
}

TEST(snapfacts_switch_owed_ignores_opens_without_switch_batch_id) {
    mcdc_snapfacts sf = {0};
    const char *full = NULL;
    add(&sf, MCDC_SNAP_SWITCHED, "app", L2, 3, NULL);
    /* the bootstrap's chunked open (no switch_batch_id) and a detail that is no JSON */
    add(&sf, MCDC_SNAP_OPEN, "app", L1, -1, "{\"mode\":\"chunked\",\"kind\":\"bootstrap\",\"generation\":0}");
    add(&sf, MCDC_SNAP_OPEN, "app", L3, -1, NULL);
    add(&sf, MCDC_SNAP_OPEN, "app", L3, -1, "{\"switch_batch_id\":\"3\"}");
    CHECK(owed_lsn(&sf, "app", &full) != NULL && full == NULL);
    /* a switch row without a batch_id cannot be answered, so it is not owed */
    mcdc_snapfacts_free(&sf);
    add(&sf, MCDC_SNAP_SWITCHED, "app", L2, -1, NULL);
    CHECK(owed_lsn(&sf, "app", &full) == NULL);
    mcdc_snapfacts_free(&sf);
}

TEST(snapfacts_open_chunked_is_the_newest_not_completed) {
    mcdc_snapfacts sf = {0};
    CHECK(mcdc_snapfacts_open_chunked(&sf) == NULL);
    add(&sf, MCDC_SNAP_OPEN, "app", L1, -1, "{\"mode\":\"chunked\"}");
    add(&sf, MCDC_SNAP_OPEN, "app", L3, -1, "{\"mode\":\"full\"}");
    const mcdc_snap_row *r = mcdc_snapfacts_open_chunked(&sf);
    CHECK(r && strcmp(r->min_lsn, L1) == 0);
    add(&sf, MCDC_SNAP_OPEN, "app.g1", L2, -1, "{}"); /* a missing mode reads as chunked */
    r = mcdc_snapfacts_open_chunked(&sf);
    CHECK(r && strcmp(r->min_lsn, L2) == 0 && strcmp(r->app_id, "app.g1") == 0);
    add(&sf, MCDC_SNAP_RESNAPSHOT, "app.g1", L2, -1, NULL);
    CHECK(mcdc_snapfacts_open_chunked(&sf) == NULL);
    mcdc_snapfacts_free(&sf);
}

TEST(snapfacts_switch_detail_is_the_reference_payload) {
    json_t *d = mcdc_snap_switch_detail("chunked", 2, 41);
    char *t = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    CHECK(t && strcmp(t, "{\"generation\":2,\"kind\":\"bootstrap\",\"lost_from_ts\":null,"
                         "\"lost_to_ts\":null,\"mode\":\"chunked\",\"switch_batch_id\":41}") == 0);
    free(t);
    json_decref(d);
}
