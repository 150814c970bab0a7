/* What start-many does once before its streams (include/mssqlcdc.h, "Many
 * tables"): the facts table created once, with its kind, and many writers
 * appending to it at the same time, each under its own txn app id, none
 * lost or doubled. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcdc_facts.h"
#include "mcdc_lake.h"
#include "mcdc_test.h"
#include "test_delta_util.h"
#include "mssqlcdc.h"

static int count_line(void *ctx, const char *line) {
    (void)line;
    (*(int *)ctx)++;
    return 0;
}

TEST(many_facts_table_created_once_with_its_kind) {
    char d[64];
    td_mkdtemp(d);
    char facts[600], control[600];
    snprintf(facts, sizeof facts, "%s/facts", d);
    snprintf(control, sizeof control, "%s/control", d);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_facts_table_create(NULL, facts, NULL, &e), MCDC_OK);
    int rows = 0;
    CHECK_EQ_INT(mcdc_table_rows_json(facts, NULL, count_line, &rows, &e), MCDC_OK);
    CHECK_EQ_INT(rows, 0); /* a table, without rows */
    CHECK_EQ_INT(mcdc_facts_table_create(NULL, facts, NULL, &e), MCDC_OK); /* again: as it is */
    /* a table of another kind at the place is not taken for one */
    mcdc_verdict v;
    CHECK_EQ_INT(mcdc_verdict_advance(&v, control, NULL, "bronze.orders", "0x01", 1000000,
                                      MCDC_GRANULARITY_HOUR, &e),
                 MCDC_OK);
    CHECK_EQ_INT(mcdc_facts_table_create(NULL, control, NULL, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, control) != NULL);
    CHECK_EQ_INT(mcdc_facts_table_create(NULL, NULL, NULL, &e), MCDC_E_INVALID);
    td_rmrf(d);
}

#define MANY_WRITERS 4
#define MANY_EVENTS 6

typedef struct {
    const char *facts;
    char app_id[32];
    int rc;
} facts_writer;

static void *write_events(void *arg) {
    facts_writer *w = arg;
    mcdc_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    char txn[48];
    snprintf(txn, sizeof txn, "%s#facts", w->app_id);
    w->rc = mcdc_table_open(&t, w->facts, NULL, &e);
    for (int64_t i = 0; w->rc == MCDC_OK && i < MANY_EVENTS; i++) {
        mcdc_facts_event ev = {.app_id = w->app_id, .target = "./bronze", .event = "bootstrap",
                               .rows = i};
        bool skipped = false;
        w->rc = mcdc_facts_write_event(t, &ev, txn, i, &skipped, &e);
        if (w->rc == MCDC_OK && skipped) w->rc = MCDC_E_CONFLICT; /* nothing was there before */
    }
    if (w->rc) fprintf(stderr, "%s: %s\n", w->app_id, e.message);
    mcdc_table_close(t);
    return NULL;
}

TEST(many_writers_append_to_one_facts_table_at_once) {
    char d[64];
    td_mkdtemp(d);
    char facts[600];
    snprintf(facts, sizeof facts, "%s/facts", d);
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_facts_table_create(NULL, facts, NULL, &e), MCDC_OK);
    facts_writer w[MANY_WRITERS];
    pthread_t th[MANY_WRITERS];
    for (int i = 0; i < MANY_WRITERS; i++) {
        w[i].facts = facts;
        w[i].rc = -1;
        snprintf(w[i].app_id, sizeof w[i].app_id, "t%d-v1", i);
        CHECK_EQ_INT(pthread_create(&th[i], NULL, write_events, &w[i]), 0);
    }
    for (int i = 0; i < MANY_WRITERS; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(w[i].rc, MCDC_OK);
    }
    int rows = 0;
    CHECK_EQ_INT(mcdc_table_rows_json(facts, NULL, count_line, &rows, &e), MCDC_OK);
    CHECK_EQ_INT(rows, MANY_WRITERS * MANY_EVENTS);
    /* each writer's last txn version is there: a rerun of any event is skipped */
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open(&t, facts, NULL, &e), MCDC_OK);
    for (int i = 0; i < MANY_WRITERS && t; i++) {
        char txn[48];
        snprintf(txn, sizeof txn, "%s#facts", w[i].app_id);
        int64_t version = -1;
        CHECK_EQ_INT(mcdc_table_txn_version(t, txn, &version, &e), MCDC_OK);
        CHECK_EQ_INT(version, MANY_EVENTS - 1);
    }
    mcdc_table_close(t);
    td_rmrf(d);
}
