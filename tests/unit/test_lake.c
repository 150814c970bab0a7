#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcdc_lake.h"
#include "mcdc_tables.h"
#include "mcdc_test.h"

static char *tmpdir(void) {
    char tmpl[] = "/tmp/mcdc_lake_XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static void rmrf(char *d) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", d);
    free(d);
}

static mcdc_batch *facts_rows(int64_t batch_id, int n) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_facts_schema(&s, &e);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, 1, &e);
    mcdc_schema_unref(s);
    for (int i = 0; i < n; i++) {
        mcdc_cell c[MCDC_F_COUNT];
        for (int k = 0; k < MCDC_F_COUNT; k++) c[k] = mcdc_cell_null();
        c[MCDC_F_APP_ID] = mcdc_cell_text("app");
        c[MCDC_F_BATCH_ID] = mcdc_cell_int(batch_id);
        c[MCDC_F_ROWS] = mcdc_cell_int(10 + i);
        c[MCDC_F_READ_MB] = mcdc_cell_double(0.5);
        c[MCDC_F_MIN_LSN] = mcdc_cell_text("0x0000002A000000010001");
        mcdc_row_append(b, c, &e);
    }
    mcdc_batch_seal(b, &e);
    return b;
}

TEST(lake_append_with_txn_is_exactly_once) {
    char *d = tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/facts", d);
    mcdc_table *t;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    bool exists = true;
    CHECK_EQ_INT(mcdc_table_exists(t, &exists, &e), MCDC_OK);
    CHECK(!exists);
    for (int attempt = 0; attempt < 2; attempt++) {
        mcdc_batch *b = facts_rows(0, 3);
        mcdc_appender *a;
        CHECK_EQ_INT(mcdc_appender_open(&a, t, b->schema, NULL, &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_appender_write(a, b, &e), MCDC_OK);
        bool skipped = false;
        int64_t v = -1;
        CHECK_EQ_INT(mcdc_appender_commit(a, "app#facts", 0, "{\"rows\":3}", &skipped, &v, &e),
                     MCDC_OK);
        CHECK(skipped == (attempt == 1)); /* the replay is skipped */
        mcdc_appender_free(a);
        mcdc_batch_free(b);
    }
    int64_t txn;
    CHECK_EQ_INT(mcdc_table_txn_version(t, "app#facts", &txn, &e), MCDC_OK);
    CHECK_EQ_INT(txn, 0);
    mcdc_batch *all;
    int64_t version;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &version, &e), MCDC_OK);
    CHECK_EQ_INT(all->rows, 3); /* not 6 */
    CHECK_EQ_INT(mcdc_row_get(all, 2, MCDC_F_ROWS).i, 12);
    mcdc_batch_free(all);
    /* the skipped attempt left no data file behind */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "test $(ls '%s'/*.parquet | wc -l) -eq 1", path);
    CHECK(system(cmd) == 0);
    mcdc_table_close(t);
    rmrf(d);
}

TEST(lake_replace_detects_a_moved_table) {
    char *d = tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/control", d);
    mcdc_table *t;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table_open(&t, path, NULL, &e);
    mcdc_batch *b = facts_rows(1, 1);
    int64_t v;
    CHECK_EQ_INT(mcdc_table_replace(t, b, -1, NULL, &v, &e), MCDC_OK);
    int64_t v2;
    /* a second writer that read before the first replace loses */
    CHECK_EQ_INT(mcdc_table_replace(t, b, -1, NULL, &v2, &e), MCDC_E_CONFLICT);
    mcdc_batch *b3 = facts_rows(2, 2);
    CHECK_EQ_INT(mcdc_table_replace(t, b3, v, NULL, &v2, &e), MCDC_OK);
    mcdc_batch *all;
    int64_t version;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &version, &e), MCDC_OK);
    CHECK_EQ_INT(version, v2);
    CHECK_EQ_INT(all->rows, 2);
    CHECK_EQ_INT(mcdc_row_get(all, 0, MCDC_F_BATCH_ID).i, 2);
    mcdc_batch_free(all);
    mcdc_batch_free(b);
    mcdc_batch_free(b3);
    mcdc_table_close(t);
    rmrf(d);
}

/* Another engine (a Spark MERGE, a user's append) commits between our read
 * and our replace: the replace must lose, not absorb it, or its rows would
 * stay next to our rewrite of the ones we read. */
TEST(lake_replace_loses_to_any_commit_since_its_read) {
    char *d = tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/control", d);
    mcdc_table *t, *other;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table_open(&t, path, NULL, &e);
    mcdc_table_open(&other, path, NULL, &e);
    mcdc_batch *b = facts_rows(1, 1), *theirs = facts_rows(7, 1), *mine = facts_rows(2, 1);
    int64_t v, v2;
    CHECK_EQ_INT(mcdc_table_replace(t, b, -1, NULL, &v, &e), MCDC_OK);
    mcdc_batch *read = NULL;
    int64_t read_v;
    CHECK_EQ_INT(mcdc_table_read_all(t, &read, &read_v, &e), MCDC_OK);
    CHECK_EQ_INT(read_v, v);
    /* the other writer's plain append lands first */
    mcdc_appender *a = NULL;
    CHECK_EQ_INT(mcdc_appender_open(&a, other, theirs->schema, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_write(a, theirs, &e), MCDC_OK);
    bool skipped;
    int64_t av;
    CHECK_EQ_INT(mcdc_appender_commit(a, NULL, 0, NULL, &skipped, &av, &e), MCDC_OK);
    mcdc_appender_free(a);
    CHECK_EQ_INT(mcdc_table_replace(t, mine, read_v, NULL, &v2, &e), MCDC_E_CONFLICT);
    /* both rows that were there are still there, and a fresh read-replace wins */
    mcdc_batch *all = NULL;
    int64_t now_v;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &now_v, &e), MCDC_OK);
    CHECK(all && all->rows == 2);
    CHECK_EQ_INT(mcdc_table_replace(t, mine, now_v, NULL, &v2, &e), MCDC_OK);
    mcdc_batch_free(all);
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &now_v, &e), MCDC_OK);
    CHECK(all && all->rows == 1 && mcdc_row_get(all, 0, MCDC_F_BATCH_ID).i == 2);
    mcdc_batch_free(all);
    mcdc_batch_free(read);
    mcdc_batch_free(b);
    mcdc_batch_free(theirs);
    mcdc_batch_free(mine);
    mcdc_table_close(t);
    mcdc_table_close(other);
    rmrf(d);
}

TEST(finalization_verdict_moves_forward_only_and_survives_racers) {
    char *d = tmpdir();
    char control[600];
    snprintf(control, sizeof control, "%s/control", d);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_verdict v;
    CHECK_EQ_INT(mcdc_verdict_read(&v, control, NULL, "bronze.orders", &e), MCDC_OK);
    CHECK(!v.found);
    int64_t t1 = 1735689600LL * 1000000 + 47LL * 60 * 1000000; /* 2025-01-01 00:47 */
    CHECK_EQ_INT(mcdc_verdict_advance(&v, control, NULL, "bronze.orders", "0x01", t1,
                                      MCDC_GRANULARITY_HOUR, &e), MCDC_OK);
    CHECK(v.moved);
    CHECK_EQ_INT(v.finalized_until_us, 1735689600LL * 1000000);
    /* an older end offset never moves it back */
    CHECK_EQ_INT(mcdc_verdict_advance(&v, control, NULL, "bronze.orders", "0x00",
                                      t1 - 3600LL * 1000000, MCDC_GRANULARITY_HOUR, &e), MCDC_OK);
    CHECK(!v.moved);
    CHECK_EQ_INT(v.finalized_until_us, 1735689600LL * 1000000);
    /* four processes advancing two tables at once: every verdict lands */
    pid_t kids[4];
    for (int k = 0; k < 4; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            mcdc_verdict kv;
            mcdc_error ke = MCDC_ERROR_INIT;
            const char *name = k % 2 ? "bronze.orders" : "bronze.customers";
            int rc = MCDC_OK;
            for (int h = 1; h <= 5 && rc == MCDC_OK; h++)
                rc = mcdc_verdict_advance(&kv, control, NULL, name, "0x02",
                                          t1 + (int64_t)(h * 2 + k % 2) * 3600LL * 1000000,
                                          MCDC_GRANULARITY_HOUR, &ke);
            _exit(rc == MCDC_OK ? 0 : 1);
        }
    }
    for (int k = 0; k < 4; k++) {
        int st = 0;
        waitpid(kids[k], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    CHECK_EQ_INT(mcdc_verdict_read(&v, control, NULL, "bronze.orders", &e), MCDC_OK);
    CHECK_EQ_INT(v.finalized_until_us, 1735689600LL * 1000000 + 11LL * 3600 * 1000000);
    CHECK_EQ_INT(mcdc_verdict_read(&v, control, NULL, "bronze.customers", &e), MCDC_OK);
    CHECK_EQ_INT(v.finalized_until_us, 1735689600LL * 1000000 + 10LL * 3600 * 1000000);
    rmrf(d);
}

typedef struct {
    int64_t rows, batches, null_rows_in_0;
    int64_t sum;
    char first_name[64];
} scan_acc;

static int scan_collect(void *ctx, mcdc_batch *b, mcdc_error *err) {
    (void)err;
    scan_acc *a = ctx;
    if (a->batches++ == 0) snprintf(a->first_name, sizeof a->first_name, "%s", b->schema->fields[0].name);
    for (int64_t r = 0; r < b->rows; r++) {
        mcdc_cell c = mcdc_row_get(b, r, 0);
        if (c.kind == MCDC_CELL_NULL) a->null_rows_in_0++;
        else a->sum += c.i;
    }
    a->rows += b->rows;
    mcdc_batch_free(b);
    return MCDC_OK;
}

/* Appends rows k = first..first+n-1 (INT64 k, TEXT name) as one file; with
 * `extra`, a third column added by schema evolution. */
static int64_t append_k(mcdc_table *t, int64_t first, int n, bool extra) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, extra ? 3 : 2, &e);
    mcdc_schema_set(s, 0, "k", MCDC_TYPE_INT64, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    if (extra) mcdc_schema_set(s, 2, "later", MCDC_TYPE_INT64, 0, 0, 0, true, &e);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, n, &e);
    for (int i = 0; i < n; i++) {
        mcdc_cell c[3] = {mcdc_cell_int(first + i), mcdc_cell_text("n"), mcdc_cell_int(7)};
        mcdc_row_append(b, c, &e);
    }
    mcdc_batch_seal(b, &e);
    mcdc_appender *a;
    bool skipped;
    int64_t v = -1;
    mcdc_appender_open(&a, t, s, NULL, &e);
    mcdc_appender_write(a, b, &e);
    mcdc_appender_commit(a, NULL, 0, NULL, &skipped, &v, &e);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
    return v;
}

TEST(lake_scan_projects_renames_fills_and_prunes) {
    char *d = tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/t", d);
    mcdc_table *t;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    int64_t v1 = append_k(t, 0, 100, false);   /* k 0..99 */
    append_k(t, 1000, 100, false);             /* k 1000..1099 */
    append_k(t, 5000, 10, true);               /* k 5000..5009, and `later` */
    /* projection in another order, a column older files lack reads NULL */
    const char *cols[] = {"later", "k"};
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.columns = cols;
    sc.n_columns = 2;
    scan_acc a = {0};
    int64_t ver, files;
    CHECK_EQ_INT(mcdc_table_scan_run(t, &sc, scan_collect, &a, &ver, &files, &e), MCDC_OK);
    CHECK_EQ_INT(a.rows, 210);
    CHECK_EQ_STR(a.first_name, "later");
    CHECK_EQ_INT(a.null_rows_in_0, 200);
    CHECK_EQ_INT(a.sum, 70);
    CHECK_EQ_INT(files, 3);
    /* pruning on k in [1000, 1100): one file read */
    const char *konly[] = {"k"};
    sc.columns = konly;
    sc.n_columns = 1;
    sc.prune_column = "k";
    sc.lo = (mcdc_scan_bound){true, NULL, 1000};
    sc.hi = (mcdc_scan_bound){true, NULL, 1100};
    memset(&a, 0, sizeof a);
    CHECK_EQ_INT(mcdc_table_scan_run(t, &sc, scan_collect, &a, &ver, &files, &e), MCDC_OK);
    CHECK_EQ_INT(files, 1);
    CHECK_EQ_INT(a.rows, 100);
    CHECK_EQ_INT(a.sum, 1000 * 100 + 99 * 50);
    /* an older version: only the first file */
    sc.prune_column = NULL;
    sc.version = v1;
    memset(&a, 0, sizeof a);
    CHECK_EQ_INT(mcdc_table_scan_run(t, &sc, scan_collect, &a, &ver, &files, &e), MCDC_OK);
    CHECK_EQ_INT(ver, v1);
    CHECK_EQ_INT(a.rows, 100);
    /* a column the table lacks is an error naming it */
    const char *bad[] = {"nope"};
    sc.columns = bad;
    sc.version = -1;
    CHECK_EQ_INT(mcdc_table_scan_run(t, &sc, scan_collect, &a, &ver, &files, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "nope") != NULL);
    mcdc_table_close(t);
    rmrf(d);
}
