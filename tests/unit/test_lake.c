#include <dirent.h>
#include <jansson.h>
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
    CHECK_EQ_INT(mcdc_table_replace(t, b, -1, NULL, NULL, &v, &e), MCDC_OK);
    int64_t v2;
    /* a second writer that read before the first replace loses */
    CHECK_EQ_INT(mcdc_table_replace(t, b, -1, NULL, NULL, &v2, &e), MCDC_E_CONFLICT);
    mcdc_batch *b3 = facts_rows(2, 2);
    CHECK_EQ_INT(mcdc_table_replace(t, b3, v, NULL, NULL, &v2, &e), MCDC_OK);
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
    CHECK_EQ_INT(mcdc_table_replace(t, b, -1, NULL, NULL, &v, &e), MCDC_OK);
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
    CHECK_EQ_INT(mcdc_table_replace(t, mine, read_v, NULL, NULL, &v2, &e), MCDC_E_CONFLICT);
    /* both rows that were there are still there, and a fresh read-replace wins */
    mcdc_batch *all = NULL;
    int64_t now_v;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &now_v, &e), MCDC_OK);
    CHECK(all && all->rows == 2);
    CHECK_EQ_INT(mcdc_table_replace(t, mine, now_v, NULL, NULL, &v2, &e), MCDC_OK);
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

/* A view of the latest version is the handle's cached snapshot, copied: it
 * keeps its version and files while the handle commits, a later view sees
 * that commit and another writer's, and the copy owns its strings. */
TEST(lake_views_copy_the_handles_snapshot) {
    char *d = tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/t", d);
    mcdc_table *t = NULL, *other = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_open(&other, path, NULL, &e), MCDC_OK);
    append_k(t, 0, 10, false);
    int64_t v2 = append_k(t, 10, 10, false);
    mcdc_table_view *a = NULL, *b = NULL, *c = NULL, *x = NULL;
    CHECK_EQ_INT(mcdc_table_view_open(&a, t, -1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_view_open(&b, t, -1, &e), MCDC_OK);
    CHECK(a && b && a != b);
    CHECK_EQ_INT(mcdc_table_view_version(a), v2);
    CHECK_EQ_INT((int64_t)mcdc_table_view_file_count(a), 2);
    int64_t v3 = append_k(t, 20, 10, false);
    CHECK_EQ_INT(v3, v2 + 1);
    CHECK_EQ_INT(mcdc_table_view_version(a), v2); /* the copy did not move */
    CHECK_EQ_INT((int64_t)mcdc_table_view_file_count(a), 2);
    for (size_t i = 0; i < 2; i++) {
        mcdc_table_file fa = mcdc_table_view_file(a, i), fb = mcdc_table_view_file(b, i);
        CHECK_EQ_STR(fa.path, fb.path);
        CHECK(fa.path != fb.path); /* each its own */
        CHECK_EQ_INT(fa.bytes, fb.bytes);
    }
    CHECK_EQ_INT(mcdc_table_view_open(&c, t, -1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_view_version(c), v3);
    CHECK_EQ_INT((int64_t)mcdc_table_view_file_count(c), 3);
    int64_t v4 = append_k(other, 30, 10, false); /* another writer */
    CHECK_EQ_INT(v4, v3 + 1);
    CHECK_EQ_INT(mcdc_table_view_open(&x, t, -1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_table_view_version(x), v4);
    CHECK_EQ_INT((int64_t)mcdc_table_view_file_count(x), 4);
    CHECK_EQ_STR(e.message, "");
    mcdc_table_view_free(a);
    mcdc_table_view_free(b);
    CHECK_EQ_INT(mcdc_table_view_version(c), v3); /* the others' frees leave it whole */
    mcdc_table_view_free(c);
    mcdc_table_view_free(x);
    mcdc_table_close(t);
    mcdc_table_close(other);
    rmrf(d);
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

/* The first k of each batch, in the order a scan gives them. */
typedef struct {
    int64_t first[8];
    int n;
} first_keys;

static int first_of_batches(void *ctx, mcdc_batch *b, mcdc_error *err) {
    (void)err;
    first_keys *f = ctx;
    if (b->rows > 0 && f->n < 8) f->first[f->n++] = mcdc_row_get(b, 0, 0).i;
    mcdc_batch_free(b);
    return MCDC_OK;
}

/* order_column: the files in the order of their smallest k (statistics),
 * whatever the view's order (6 files appended from the highest k down);
 * pruning still applies; a column the table lacks is an error. */
TEST(lake_scan_orders_files_by_a_columns_smallest_value) {
    char *d = tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/t", d);
    mcdc_table *t;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    for (int i = 5; i >= 0; i--) append_k(t, 1000 * i, 10, false);
    const char *konly[] = {"k"};
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.columns = konly;
    sc.n_columns = 1;
    sc.order_column = "k";
    first_keys f = {0};
    int64_t ver, files;
    CHECK_EQ_INT(mcdc_table_scan_run(t, &sc, first_of_batches, &f, &ver, &files, &e), MCDC_OK);
    CHECK_EQ_INT(f.n, 6);
    for (int i = 0; i < f.n; i++) CHECK_EQ_INT(f.first[i], 1000 * i);
    sc.prune_column = "k";
    sc.lo = (mcdc_scan_bound){true, NULL, 1000};
    memset(&f, 0, sizeof f);
    CHECK_EQ_INT(mcdc_table_scan_run(t, &sc, first_of_batches, &f, &ver, &files, &e), MCDC_OK);
    CHECK_EQ_INT(f.n, 5);
    for (int i = 0; i < f.n; i++) CHECK_EQ_INT(f.first[i], 1000 * (i + 1));
    sc.order_column = "nope";
    CHECK_EQ_INT(mcdc_table_scan_run(t, &sc, first_of_batches, &f, &ver, &files, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "nope") != NULL);
    mcdc_table_close(t);
    rmrf(d);
}

/* ---- the scan's read-ahead: a decoder thread feeding fn ------------------------- */

#define AHEAD_FILES 8
#define AHEAD_ROWS 50

/* Appends rows k = first..first+n-1 as one file, each with pad_bytes of
 * text that does not compress (a file of the size a scan reads ahead on). */
static void append_padded(mcdc_table *t, int64_t first, int n, int pad_bytes) {
    mcdc_schema *s;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema_create(&s, 2, &e);
    mcdc_schema_set(s, 0, "k", MCDC_TYPE_INT64, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 1, "pad", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_batch *b;
    mcdc_batch_create(&b, s, n, &e);
    char *pad = malloc((size_t)pad_bytes + 1);
    uint64_t x = (uint64_t)first * 2654435761u + 1;
    for (int i = 0; pad && i < n; i++) {
        for (int j = 0; j < pad_bytes; j++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            pad[j] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[x >> 58];
        }
        pad[pad_bytes] = '\0';
        mcdc_cell c[2] = {mcdc_cell_int(first + i), mcdc_cell_text(pad)};
        mcdc_row_append(b, c, &e);
    }
    free(pad);
    mcdc_batch_seal(b, &e);
    mcdc_appender *a;
    bool skipped;
    int64_t v = -1;
    mcdc_appender_open(&a, t, s, NULL, &e);
    mcdc_appender_write(a, b, &e);
    CHECK_EQ_INT(mcdc_appender_commit(a, NULL, 0, NULL, &skipped, &v, &e), MCDC_OK);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    mcdc_schema_unref(s);
}

/* A memory table of AHEAD_FILES files (one batch each): file i holds k =
 * 1000 i .. 1000 i + AHEAD_ROWS - 1, each row pad_bytes of padding (big:
 * the files are more than MCDC_SCAN_AHEAD_BYTES_MIN in all, and the scan
 * reads ahead; 0: they are small, and it does not). The files' names are
 * random, so the scan's order (the view's, by path) is not k's: *order gets
 * the rows' k as a reader on one thread gives them, file by file in the
 * view's order. */
static mcdc_table *ahead_table(mcdc_storage_mem **mem, int64_t *order, bool big) {
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_mem_create(mem, "ahead", &e), MCDC_OK);
    mcdc_storage_env env = mcdc_storage_mem_env(*mem);
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open_env(&t, &env, "mem://ahead/t", NULL, &e), MCDC_OK);
    int pad = big ? 4 * MCDC_SCAN_AHEAD_BYTES_MIN / (3 * AHEAD_FILES * AHEAD_ROWS) + 64 : 0;
    for (int i = 0; t && i < AHEAD_FILES; i++) append_padded(t, 1000 * i, AHEAD_ROWS, pad);
    mcdc_table_view *v = NULL;
    CHECK_EQ_INT(t ? mcdc_table_view_open(&v, t, -1, &e) : MCDC_E_INVALID, MCDC_OK);
    CHECK_EQ_INT(v ? (int64_t)mcdc_table_view_file_count(v) : 0, AHEAD_FILES);
    const char *konly[] = {"k"};
    int64_t n = 0, bytes = 0;
    for (size_t f = 0; v && f < mcdc_table_view_file_count(v); f++) {
        mcdc_table_reader *r = NULL;
        bytes += mcdc_table_view_file(v, f).bytes;
        CHECK_EQ_INT(mcdc_table_reader_open(&r, v, mcdc_table_view_file(v, f).path, konly, 1,
                                            NULL, &e),
                     MCDC_OK);
        mcdc_batch *b = NULL;
        while (r && mcdc_table_reader_next(&b, r, &e) == MCDC_OK && b) {
            for (int64_t i = 0; i < b->rows && n < AHEAD_FILES * AHEAD_ROWS; i++)
                order[n++] = mcdc_row_get(b, i, 0).i;
            mcdc_batch_free(b);
        }
        mcdc_table_reader_free(r);
    }
    CHECK_EQ_INT(n, AHEAD_FILES * AHEAD_ROWS);
    CHECK(big ? bytes >= MCDC_SCAN_AHEAD_BYTES_MIN : bytes < MCDC_SCAN_AHEAD_BYTES_MIN / 8);
    mcdc_table_view_free(v);
    return t;
}

typedef struct {
    const int64_t *order;       /* the rows' k, in the order of a scan on one thread */
    int64_t batches, rows;
    bool in_order;
    int64_t fail_at;            /* > 0: fn fails on this batch with fail_rc */
    int fail_rc;
    mcdc_storage_mem *wait_mem; /* set: the first batch waits for the decoder to read ahead */
    int64_t wait_calls;         /* the storage's reads to wait for (its count) */
    int64_t calls_on_entry, calls_seen; /* its reads when fn got the first batch, when it let go */
    int pre[64], npre;          /* the process's threads before the scan */
    int new_threads;            /* threads started since, seen while fn held the first batch */
    bool decoder_masked;        /* each of them takes no SIGINT or SIGTERM */
} ahead_acc;

/* The process's thread ids (Linux: /proc/<pid>/task), up to cap. */
static int thread_ids(int *out, int cap) {
    char path[64];
    int n = 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)getpid());
    DIR *d = opendir(path);
    for (struct dirent *de; d && (de = readdir(d)) != NULL && n < cap;)
        if (de->d_name[0] != '.') out[n++] = atoi(de->d_name);
    if (d) closedir(d);
    return n;
}

/* Whether every thread not in pre blocks SIGINT and SIGTERM (its SigBlk);
 * *n_new: how many there are. Threads of a sanitizer's runtime that were
 * there before the scan do not count. */
static bool new_threads_block_sigint_sigterm(const int *pre, int npre, int *n_new) {
    int ids[64], n = thread_ids(ids, 64);
    bool all = true;
    *n_new = 0;
    for (int k = 0; k < n; k++) {
        bool old = false;
        for (int j = 0; j < npre; j++) old = old || pre[j] == ids[k];
        if (old) continue;
        (*n_new)++;
        char st[96], line[256];
        bool masked = false;
        snprintf(st, sizeof st, "/proc/%d/task/%d/status", (int)getpid(), ids[k]);
        FILE *f = fopen(st, "r");
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "SigBlk:", 7) == 0) {
                unsigned long long m = strtoull(line + 7, NULL, 16);
                masked = (m & 0x4002ULL) == 0x4002ULL; /* SIGINT (2), SIGTERM (15) */
            }
        if (f) fclose(f);
        all = all && masked;
    }
    return all;
}

static int ahead_collect(void *ctx, mcdc_batch *b, mcdc_error *err) {
    ahead_acc *a = ctx;
    a->batches++;
    if (a->wait_mem && a->batches == 1) {
        /* fn holds the first batch: the decoder goes on reading until the
         * queue is full, and then stops */
        /* until the decoder has read as far as the queue lets it (it may
         * have before fn was called: no read need fall while fn waits), up
         * to 10 s (valgrind is slow), then quiet for 0.1 s */
        a->calls_on_entry = mcdc_storage_mem_calls(a->wait_mem, MCDC_STORAGE_OP_GET_RANGE);
        int64_t last = a->calls_on_entry, still = 0;
        for (int i = 0; i < 2000 && (last < a->wait_calls || still < 20); i++) {
            mcdc_sleep_ms(5);
            int64_t now = mcdc_storage_mem_calls(a->wait_mem, MCDC_STORAGE_OP_GET_RANGE);
            still = now == last ? still + 1 : 0;
            last = now;
        }
        a->calls_seen = last;
        a->decoder_masked = new_threads_block_sigint_sigterm(a->pre, a->npre, &a->new_threads);
    }
    for (int64_t r = 0; r < b->rows; r++, a->rows++)
        if (a->rows >= AHEAD_FILES * AHEAD_ROWS || mcdc_row_get(b, r, 0).i != a->order[a->rows])
            a->in_order = false;
    mcdc_batch_free(b);
    if (a->batches == a->fail_at)
        return a->fail_rc == MCDC_E_CANCELLED
                   ? MCDC_E_CANCELLED
                   : mcdc_error_set(err, a->fail_rc, "fn refused batch %lld", (long long)a->batches);
    return MCDC_OK;
}

static int ahead_scan(mcdc_table *t, ahead_acc *a, int64_t *files, mcdc_error *e) {
    const char *konly[] = {"k"};
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.columns = konly;
    sc.n_columns = 1;
    int64_t ver;
    a->in_order = true;
    mcdc_error_clear(e);
    return mcdc_table_scan_run(t, &sc, ahead_collect, a, &ver, files, e);
}

TEST(lake_scan_reads_ahead_in_order_and_stops_with_fn) {
    mcdc_storage_mem *mem = NULL;
    int64_t order[AHEAD_FILES * AHEAD_ROWS];
    mcdc_table *t = ahead_table(&mem, order, true);
    mcdc_error e = MCDC_ERROR_INIT;
    int64_t files = -1;
    /* the reads of a view, and of each file (all alike) */
    int64_t before = mcdc_storage_mem_calls(mem, MCDC_STORAGE_OP_GET_RANGE);
    mcdc_table_view *v = NULL;
    CHECK_EQ_INT(mcdc_table_view_open(&v, t, -1, &e), MCDC_OK);
    mcdc_table_view_free(v);
    int64_t view_calls = mcdc_storage_mem_calls(mem, MCDC_STORAGE_OP_GET_RANGE) - before;
    /* every row once, in the view's order; every file counted */
    before = mcdc_storage_mem_calls(mem, MCDC_STORAGE_OP_GET_RANGE);
    ahead_acc a = {.order = order};
    CHECK_EQ_INT(ahead_scan(t, &a, &files, &e), MCDC_OK);
    int64_t file_calls = mcdc_storage_mem_calls(mem, MCDC_STORAGE_OP_GET_RANGE) - before - view_calls;
    int64_t per_file = file_calls / AHEAD_FILES;
    CHECK_EQ_INT(file_calls % AHEAD_FILES, 0);
    CHECK(a.in_order);
    CHECK_EQ_INT(a.rows, AHEAD_FILES * AHEAD_ROWS);
    CHECK_EQ_INT(a.batches, AHEAD_FILES);
    CHECK_EQ_INT(files, AHEAD_FILES);
    CHECK(per_file > 0);
    /* while fn holds the first batch the decoder reads ahead, but no
     * further than the queue: the next batch and one more queued, one
     * decoded in hand, so at most four files of eight opened, whatever
     * the timing; then fn cancels, and the decoder stops */
    before = mcdc_storage_mem_calls(mem, MCDC_STORAGE_OP_GET_RANGE);
    ahead_acc w = {.order = order, .fail_at = 1, .fail_rc = MCDC_E_CANCELLED, .wait_mem = mem,
                   .wait_calls = before + view_calls + (1 + 2 + 1) * per_file};
    w.npre = thread_ids(w.pre, 64);
    CHECK(w.npre > 0 && w.npre < 64);
    CHECK_EQ_INT(ahead_scan(t, &w, &files, &e), MCDC_E_CANCELLED);
    int64_t after = mcdc_storage_mem_calls(mem, MCDC_STORAGE_OP_GET_RANGE);
    CHECK_EQ_INT(w.new_threads, 1);                               /* the decoder, and it */
    CHECK(w.decoder_masked);                                      /* takes no signal: they stay the host's */
    CHECK(after - before <= view_calls + (1 + 2 + 1) * per_file); /* the bound */
    /* past the first two (read on the calling thread before the decoder
     * starts): the decoder read ahead while fn held the first batch */
    CHECK(after - before > view_calls + 2 * per_file);
    CHECK_EQ_INT(w.batches, 1);
    CHECK_EQ_INT(files, 1); /* as a scan on one thread counts: up to the batch fn stopped at */
    CHECK_EQ_STR(e.message, "");                            /* a cancel is not wrapped */
    /* fn fails on a batch the decoder decoded: its error, wrapped once */
    for (int64_t at = 1; at <= AHEAD_FILES; at++) {
        ahead_acc f = {.order = order, .fail_at = at, .fail_rc = MCDC_E_IO};
        CHECK_EQ_INT(ahead_scan(t, &f, &files, &e), MCDC_E_IO);
        char want[128];
        snprintf(want, sizeof want, "reading mem://ahead/t version %d: fn refused batch %lld",
                 AHEAD_FILES, (long long)at);
        CHECK_EQ_STR(e.message, want);
        CHECK_EQ_INT(f.batches, at);
        CHECK_EQ_INT(files, at);
        CHECK(f.in_order);
    }
    mcdc_table_close(t);
    mcdc_storage_mem_release(mem);
}

/* A scan of small files decodes on the calling thread: nothing is read
 * while fn holds a batch. */
TEST(lake_scan_small_files_on_the_calling_thread) {
    mcdc_storage_mem *mem = NULL;
    int64_t order[AHEAD_FILES * AHEAD_ROWS];
    mcdc_table *t = ahead_table(&mem, order, false);
    mcdc_error e = MCDC_ERROR_INIT;
    int64_t files = -1;
    ahead_acc w = {.order = order, .wait_mem = mem};
    CHECK_EQ_INT(ahead_scan(t, &w, &files, &e), MCDC_OK);
    CHECK_EQ_INT(w.calls_seen, w.calls_on_entry);
    CHECK(w.in_order);
    CHECK_EQ_INT(w.batches, AHEAD_FILES);
    CHECK_EQ_INT(files, AHEAD_FILES);
    mcdc_table_close(t);
    mcdc_storage_mem_release(mem);
}

/* ---- appends closing full files behind ------------------------------------ */
#define ROLL_FILES 5

/* Data files (part-*.parquet) in the mem store's table t. */
static int64_t roll_objects(mcdc_table *t) {
    mcdc_storage_listing l = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_list(mcdc_table_storage(t), "", &l, &e), MCDC_OK);
    int64_t n = 0;
    for (size_t i = 0; i < l.count; i++)
        n += strstr(l.entries[i].name, ".parquet") != NULL &&
             strstr(l.entries[i].name, "_delta_log") == NULL;
    mcdc_storage_listing_free(&l);
    return n;
}

/* One attempt: ROLL_FILES batches of 3 facts rows (batch_id i), each
 * filling a file (file_bytes 1), committed as txn(app, 0). */
static int roll_attempt(mcdc_table *t, bool *skipped, mcdc_error *e) {
    mcdc_table_props props = {.file_bytes = 1};
    mcdc_appender *a = NULL;
    mcdc_batch *first = facts_rows(0, 3);
    int rc = mcdc_appender_open(&a, t, first->schema, &props, e);
    mcdc_batch_free(first);
    for (int i = 0; rc == MCDC_OK && i < ROLL_FILES; i++) {
        mcdc_batch *b = facts_rows(i, 3);
        rc = mcdc_appender_write(a, b, e);
        mcdc_batch_free(b);
    }
    int64_t v = -1;
    if (rc == MCDC_OK) rc = mcdc_appender_commit(a, "app", 0, NULL, skipped, &v, e);
    mcdc_appender_free(a);
    return rc;
}

/* The appender's fault sweep: for a data file's write, the log's commit
 * put and a writer's opening in turn, attempt runs on a fresh table
 * (NAME/tN) with that call's nth failing, nth 0 (none: the calls are
 * counted) and then about spread of them up to the count. A failed attempt
 * must have hit the fault, say so and leave no data file; its rerun must
 * commit; then check looks at the table. Returns how many attempts failed;
 * *min_calls: the fewest calls counted of any kind. */
typedef int append_attempt_fn(mcdc_table *t, bool *skipped, mcdc_error *e);
static int append_fault_sweep(mcdc_storage_mem *mem, const char *name, int64_t spread,
                              append_attempt_fn *attempt, void (*check)(mcdc_table *t),
                              int64_t *min_calls) {
    mcdc_storage_env env = mcdc_storage_mem_env(mem);
    mcdc_error e = MCDC_ERROR_INIT;
    const mcdc_storage_op ops[] = {MCDC_STORAGE_OP_WRITE, MCDC_STORAGE_OP_COMMIT_PUT,
                                   MCDC_STORAGE_OP_WRITER_OPEN};
    int tables = 0, failed = 0;
    *min_calls = INT64_MAX;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        int64_t calls = 0, step = 1;
        for (int64_t nth = 0; nth <= calls; nth += nth ? step : 1) {
            char where[64];
            snprintf(where, sizeof where, "mem://%s/t%d", name, tables++);
            mcdc_table *t = NULL;
            CHECK_EQ_INT(mcdc_table_open_env(&t, &env, where, NULL, &e), MCDC_OK);
            if (t == NULL) break;
            int64_t c0 = mcdc_storage_mem_calls(mem, ops[k]);
            if (nth > 0) mcdc_storage_mem_fail_nth(mem, ops[k], nth, MCDC_E_IO);
            bool skipped = false;
            int rc = attempt(t, &skipped, &e);
            if (nth == 0) {
                calls = mcdc_storage_mem_calls(mem, ops[k]) - c0;
                step = calls / spread > 1 ? calls / spread : 1;
            }
            bool fired = nth > 0 && mcdc_storage_mem_fault_fired(mem);
            mcdc_storage_mem_fail_nth(mem, ops[k], 0, MCDC_OK);
            CHECK(nth == 0 || fired);
            CHECK(nth == 0 || rc != MCDC_OK); /* a data file's write or publication */
            if (rc != MCDC_OK) {
                failed++;
                CHECK(strstr(e.message, "injected fault") != NULL);
                CHECK_EQ_INT(roll_objects(t), 0);
                rc = attempt(t, &skipped, &e); /* the rerun */
            }
            CHECK_EQ_INT(rc, MCDC_OK);
            CHECK(!skipped);
            check(t);
            mcdc_table_close(t);
        }
        if (calls < *min_calls) *min_calls = calls;
    }
    return failed;
}

static void roll_check(mcdc_table *t) {
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(roll_objects(t), ROLL_FILES);
    mcdc_batch *all = NULL;
    int64_t version;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &version, &e), MCDC_OK);
    CHECK_EQ_INT(all ? all->rows : 0, ROLL_FILES * 3);
    for (int64_t r = 0; all && r < all->rows; r++)
        CHECK_EQ_INT(mcdc_row_get(all, r, MCDC_F_BATCH_ID).i, r / 3);
    mcdc_batch_free(all);
}

/* Every full file is published (fsync, then visible) on the appender's
 * thread while the next one is written: the commit names all of them, in
 * the order written. A write (about 16 of them, spread over the files) and
 * the opening of a file failing in turn (on the writing thread, while the
 * file before may be publishing), and each publication (on the publishing
 * thread, but for the last file's), fails the attempt with its error (at
 * the write after a failed publication, or at the commit); a failed attempt
 * leaves no data file behind (free waits for the publication and deletes
 * what it published), and the rerun commits every row once. */
TEST(lake_append_closes_full_files_behind) {
    mcdc_storage_mem *mem = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_mem_create(&mem, "roll", &e), MCDC_OK);
    /* writes: a Parquet file makes dozens; about 16 of them, spread */
    int64_t calls = 0;
    int failed = append_fault_sweep(mem, "roll", 16, roll_attempt, roll_check, &calls);
    CHECK(calls >= ROLL_FILES);
    CHECK(failed >= 16 + ROLL_FILES);
    mcdc_storage_mem_release(mem);
}

/* ---- lanes: one open data file per lane ------------------------------------ */
#define LANES 3
#define LANE_BATCHES 7 /* each lane's; a file fills at 2.5 batches: 3 files a lane */

/* One attempt: LANES lanes' batches of 3 facts rows interleaved (lane l's
 * k-th batch is batch_id l * 100 + k), each lane's file full after its
 * third batch, committed as txn(app, 0); *free_early: freed uncommitted
 * after the writes instead. */
static int lanes_attempt(mcdc_table *t, bool free_early, bool *skipped, mcdc_error *e) {
    mcdc_batch *first = facts_rows(0, 3);
    mcdc_table_props props = {.file_bytes = mcdc_batch_bytes(first) * 5 / 2, .lanes = LANES};
    mcdc_appender *a = NULL;
    int rc = mcdc_appender_open(&a, t, first->schema, &props, e);
    mcdc_batch_free(first);
    for (int k = 0; rc == MCDC_OK && k < LANE_BATCHES; k++)
        for (int l = LANES - 1; rc == MCDC_OK && l >= 0; l--) {
            mcdc_batch *b = facts_rows(l * 100 + k, 3);
            rc = mcdc_appender_write_lane(a, l, b, e);
            mcdc_batch_free(b);
        }
    int64_t v = -1;
    if (rc == MCDC_OK && !free_early) rc = mcdc_appender_commit(a, "app", 0, NULL, skipped, &v, e);
    mcdc_appender_free(a);
    return rc;
}

typedef struct {
    int files, per_lane[LANES];
    int64_t rows;
    bool apart; /* every file's batch_ids of one lane */
} lanes_acc;

static int lanes_file(void *ctx, const char *stats, mcdc_error *err) {
    (void)err;
    lanes_acc *x = ctx;
    json_error_t je;
    json_t *j = stats ? json_loads(stats, 0, &je) : NULL;
    json_t *mins = json_object_get(j, "minValues"), *maxs = json_object_get(j, "maxValues");
    json_int_t lo = json_integer_value(json_object_get(mins, "batch_id"));
    json_int_t hi = json_integer_value(json_object_get(maxs, "batch_id"));
    x->rows += json_integer_value(json_object_get(j, "numRecords"));
    x->files++;
    if (j == NULL || lo / 100 != hi / 100 || lo < 0 || lo / 100 >= LANES) x->apart = false;
    else x->per_lane[lo / 100]++;
    json_decref(j);
    return MCDC_OK;
}

static int lanes_attempt_all(mcdc_table *t, bool *skipped, mcdc_error *e) {
    return lanes_attempt(t, false, skipped, e);
}

static void lanes_check(mcdc_table *t) {
    mcdc_error e = MCDC_ERROR_INIT;
    lanes_acc x = {.apart = true};
    CHECK_EQ_INT(mcdc_table_each_file_stats(t, lanes_file, &x, &e), MCDC_OK);
    CHECK(x.apart);
    CHECK_EQ_INT(x.rows, LANES * LANE_BATCHES * 3);
    CHECK_EQ_INT(x.files, LANES * 3);
    CHECK_EQ_INT(roll_objects(t), LANES * 3);
    for (int l = 0; l < LANES; l++) CHECK_EQ_INT(x.per_lane[l], 3);
}

/* An appender of several lanes keeps a data file open for each: every
 * batch goes into its lane's file at once, each lane's files fill to the
 * full size and hold its rows only (their key ranges apart), and the
 * commit publishes every lane's files, the ones still open too. Freed
 * uncommitted, it leaves no file (the ones published behind nor the open
 * ones); more lanes than MCDC_APPENDER_LANES_MAX are refused. A write, a
 * file's opening and a publication failing in turn (about 12 of each,
 * spread) fail the attempt and leave nothing; the rerun commits every row
 * once. */
TEST(lake_append_lanes_each_into_files_of_their_own) {
    mcdc_storage_mem *mem = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_mem_create(&mem, "lanes", &e), MCDC_OK);
    mcdc_storage_env env = mcdc_storage_mem_env(mem);
    mcdc_table *t = NULL;
    bool skipped = false;
    CHECK_EQ_INT(mcdc_table_open_env(&t, &env, "mem://lanes/early", NULL, &e), MCDC_OK);
    CHECK_EQ_INT(lanes_attempt(t, true, &skipped, &e), MCDC_OK);
    CHECK_EQ_INT(roll_objects(t), 0);
    mcdc_table_close(t);
    mcdc_batch *b = facts_rows(0, 3);
    mcdc_appender *a = NULL;
    mcdc_table_props over = {.lanes = MCDC_APPENDER_LANES_MAX + 1};
    CHECK_EQ_INT(mcdc_appender_open(&a, NULL, b->schema, &over, &e), MCDC_E_LIMIT);
    CHECK(a == NULL);
    mcdc_batch_free(b);
    int64_t calls = 0;
    int failed = append_fault_sweep(mem, "lanes", 12, lanes_attempt_all, lanes_check, &calls);
    CHECK(calls >= LANES * 3);
    CHECK(failed >= 2 * 12 + LANES * 3);
    mcdc_storage_mem_release(mem);
}

/* Each storage call of a scan fails in turn: a failure while the decoder
 * thread reads a later file reaches the caller once, wrapped as on one
 * thread, after fn saw every batch before it; no batch leaks. */
TEST(lake_scan_decoder_fault_every_call) {
    mcdc_storage_mem *mem = NULL;
    int64_t order[AHEAD_FILES * AHEAD_ROWS];
    mcdc_table *t = ahead_table(&mem, order, true);
    mcdc_error e = MCDC_ERROR_INIT;
    int64_t files = -1;
    int64_t c0 = mcdc_storage_mem_calls(mem, MCDC_STORAGE_OP_ANY);
    ahead_acc full = {.order = order};
    CHECK_EQ_INT(ahead_scan(t, &full, &files, &e), MCDC_OK);
    int64_t calls = mcdc_storage_mem_calls(mem, MCDC_STORAGE_OP_ANY) - c0;
    CHECK(calls > AHEAD_FILES);
    bool on_decoder = false;
    for (int64_t nth = 1; nth <= calls; nth++) {
        mcdc_storage_mem_fail_nth(mem, MCDC_STORAGE_OP_ANY, nth, MCDC_E_IO);
        ahead_acc a = {.order = order};
        int rc = ahead_scan(t, &a, &files, &e);
        bool fired = mcdc_storage_mem_fault_fired(mem);
        mcdc_storage_mem_fail_nth(mem, MCDC_STORAGE_OP_ANY, 0, MCDC_OK);
        CHECK(a.in_order);
        CHECK_EQ_INT(a.rows, a.batches * AHEAD_ROWS);
        CHECK(fired);
        if (rc == MCDC_OK) { /* a failure the scan can bear */
            CHECK_EQ_INT(a.batches, AHEAD_FILES);
            continue;
        }
        CHECK(rc == MCDC_E_IO || rc == MCDC_E_NOTFOUND || rc == MCDC_E_DATALOSS);
        CHECK(e.message[0] != '\0');
        if (a.batches >= 2) { /* a file past the first two: the decoder thread's */
            CHECK(strncmp(e.message, "reading mem://ahead/t version 8: ", 33) == 0);
            CHECK(files == a.batches || files == a.batches + 1); /* the failed one if opened */
            on_decoder = true;
        }
    }
    CHECK(on_decoder);
    mcdc_table_close(t);
    mcdc_storage_mem_release(mem);
}

/* Each allocation of a scan fails in turn, on either thread: the scan
 * fails cleanly (the test's leak check and ASan see every batch freed). */
TEST(lake_scan_out_of_memory_on_either_thread) {
    mcdc_storage_mem *mem = NULL;
    int64_t order[AHEAD_FILES * AHEAD_ROWS];
    mcdc_table *t = ahead_table(&mem, order, true);
    mcdc_error e = MCDC_ERROR_INIT;
    int64_t files = -1;
    /* the allocations of one scan (the same count whichever thread makes them) */
    mcdc_alloc_stats s0, s1;
    ahead_acc full = {.order = order};
    mcdc_alloc_get_stats(&s0);
    CHECK_EQ_INT(ahead_scan(t, &full, &files, &e), MCDC_OK);
    mcdc_alloc_get_stats(&s1);
    CHECK_EQ_INT(full.batches, AHEAD_FILES);
    int64_t calls = s1.calls - s0.calls, failed = 0;
    bool on_decoder = false;
    CHECK(calls > AHEAD_FILES);
    for (int64_t nth = 1; nth <= calls; nth++) {
        ahead_acc a = {.order = order};
        mcdc_alloc_fail_at(nth);
        int rc = ahead_scan(t, &a, &files, &e);
        mcdc_alloc_fail_at(0);
        CHECK(a.in_order);
        if (rc == MCDC_OK) {
            CHECK_EQ_INT(a.batches, AHEAD_FILES); /* a failure the scan can bear (a cache) */
            continue;
        }
        failed++;
        CHECK(e.message[0] != '\0');
        CHECK(a.batches < AHEAD_FILES);
        if (a.batches >= 2) on_decoder = true; /* a file past the first two */
    }
    CHECK(failed > calls / 2);
    CHECK(on_decoder);
    mcdc_table_close(t);
    mcdc_storage_mem_release(mem);
}

/* One place, one role: two roles at one location, or one inside another,
 * are refused naming both; a schema.table name is where the warehouse puts
 * it; roles not given are left out. */
TEST(lake_roles_each_their_own_place) {
    char *d = tmpdir();
    char bronze[600], facts[600], inner[600], wh_path[600], ckpt[600];
    snprintf(bronze, sizeof bronze, "%s/bronze", d);
    snprintf(facts, sizeof facts, "%s/facts", d);
    snprintf(inner, sizeof inner, "%s/bronze/./facts", d);
    snprintf(wh_path, sizeof wh_path, "%s/lake.db/orders", d);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", d);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_role r[3] = {{"--target", bronze, true}, {"--facts-table", facts, true},
                      {"--checkpoint", NULL, false}};
    char *canon[3] = {NULL, NULL, NULL};
    CHECK_EQ_INT(mcdc_roles_check(r, 3, NULL, canon, &e), MCDC_OK);
    CHECK(canon[0] && strcmp(canon[0] + strlen(canon[0]) - 7, "/bronze") == 0 && canon[2] == NULL);
    for (int i = 0; i < 3; i++) mcdc_free(canon[i]);
    r[1].given = inner;
    CHECK_EQ_INT(mcdc_roles_check(r, 3, NULL, NULL, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, "--target") && strstr(e.message, "--facts-table") &&
          strstr(e.message, "lie inside one another"));
    r[1].given = facts;
    r[2].given = bronze;
    CHECK_EQ_INT(mcdc_roles_check(r, 3, NULL, NULL, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, "are one location") && strstr(e.message, "--checkpoint"));
    r[2].given = ckpt;
    r[0].given = "lake.orders";
    r[1].given = wh_path;
    CHECK_EQ_INT(mcdc_roles_check(r, 3, d, NULL, &e), MCDC_E_MISMATCH);
    r[0].given = "orders"; /* a bare name: the table's own error, naming the role */
    CHECK_EQ_INT(mcdc_roles_check(r, 3, d, NULL, &e), MCDC_E_INVALID);
    CHECK(strncmp(e.message, "--target orders", 15) == 0);
    rmrf(d);
}

/* Places of URIs: a scheme's aliases and a bucket's case name one store,
 * a prefix below another lies inside it, a sibling with a longer name does
 * not; a file: URI is its path. */
TEST(lake_places_of_object_store_uris) {
    static const char *const same[][3] = {
        {"s3a://Bucket/lake/bronze/", "s3://bucket/lake/bronze", "s3://bucket/lake/bronze"},
        {"S3://b//lake///t", "s3://b/lake/t", "s3://b/lake/t"},
        {"abfs://c@acct.dfs.core.windows.net/t", "abfss://c@acct.dfs.core.windows.net/t/",
         "abfss://c@acct.dfs.core.windows.net/t"},
        {"mem://Store/t/", "mem://Store/t", "mem://Store/t"},
    };
    mcdc_error e = MCDC_ERROR_INIT;
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char *a = NULL, *b = NULL;
        CHECK_EQ_INT(mcdc_location_place(&a, same[i][0], &e), MCDC_OK);
        CHECK_EQ_INT(mcdc_location_place(&b, same[i][1], &e), MCDC_OK);
        CHECK_EQ_STR(a, same[i][2]);
        CHECK_EQ_STR(b, same[i][2]);
        mcdc_free(a);
        mcdc_free(b);
    }
    char *p = NULL, *q = NULL;
    CHECK_EQ_INT(mcdc_location_place(&p, "file:///tmp/./x/", &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_location_place(&q, "/tmp/x", &e), MCDC_OK);
    CHECK_EQ_STR(p, q);
    mcdc_free(p);
    mcdc_free(q);
    CHECK(mcdc_path_within("s3://b/a", "s3://b/a/x"));
    CHECK(!mcdc_path_within("s3://b/a", "s3://b/ab"));
    CHECK(mcdc_location_is_local("./bronze") && mcdc_location_is_local("file:///x") &&
          mcdc_location_is_local("FILE:x"));
    CHECK(!mcdc_location_is_local("s3://b/x") && !mcdc_location_is_local("mem://m/x"));
    CHECK(!mcdc_location_is_file("s3://b/x")); /* no stat of a URI */
    /* the roles check on them: nested, one place by two spellings, apart */
    mcdc_role r[2] = {{"--checkpoint", "s3://b/lake/ckpt", false},
                      {"--from", "s3a://B/lake/ckpt/copy", false}};
    CHECK_EQ_INT(mcdc_roles_check(r, 2, NULL, NULL, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, "lie inside one another") != NULL);
    r[1].given = "s3a://b/lake/ckpt/";
    CHECK_EQ_INT(mcdc_roles_check(r, 2, NULL, NULL, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, "are one location") != NULL);
    r[1].given = "s3://b/lake/ckpt2";
    CHECK_EQ_INT(mcdc_roles_check(r, 2, NULL, NULL, &e), MCDC_OK);
    r[1].given = "gs://b/lake/ckpt/x"; /* another store */
    CHECK_EQ_INT(mcdc_roles_check(r, 2, NULL, NULL, &e), MCDC_OK);
    /* tables named under a warehouse on a store (mem:// here: its backend
     * is built), trailing '/' or not */
    mcdc_role t[2] = {{"--target", "lake.orders", true},
                      {"--facts-table", "mem://m/wh/lake.db/orders/", true}};
    CHECK_EQ_INT(mcdc_roles_check(t, 2, "mem://m/wh/", NULL, &e), MCDC_E_MISMATCH);
    CHECK(strstr(e.message, "are one location") != NULL);
    t[1].given = "mem://m/wh/lake.db/facts";
    char *canon[2] = {NULL, NULL};
    CHECK_EQ_INT(mcdc_roles_check(t, 2, "mem://m/wh/", canon, &e), MCDC_OK);
    CHECK_EQ_STR(canon[0], "mem://m/wh/lake.db/orders");
    mcdc_free(canon[0]);
    mcdc_free(canon[1]);
}

/* A one-column batch k = first.. first+n-1 (INT64), of schema s. */
static mcdc_batch *k_rows(mcdc_schema *s, int64_t first, int n) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_batch *b = NULL;
    mcdc_batch_create(&b, s, n, &e);
    for (int i = 0; i < n; i++) mcdc_col_append_int(&b->columns[0], first + i, &e);
    for (int32_t c = 1; c < s->n_fields; c++)
        for (int i = 0; i < n; i++) mcdc_col_append_null(&b->columns[c], &e);
    mcdc_batch_seal(b, &e);
    return b;
}

/* The layout decided before any write (a unit read ahead, mcdc_frame.h):
 * settled only once the table exists with every column of the appender's;
 * fills says when the next write would finish the open file. */
TEST(lake_prepare_says_when_the_layout_is_settled_and_fills_when_a_file_is) {
    mcdc_storage_mem *mem = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_mem_create(&mem, "prep", &e), MCDC_OK);
    mcdc_storage_env env = mcdc_storage_mem_env(mem);
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open_env(&t, &env, "mem://prep/t", NULL, &e), MCDC_OK);
    mcdc_schema *one = NULL, *two = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&one, 1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_schema_set(one, 0, "k", MCDC_TYPE_INT64, 0, 0, 0, false, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_schema_create(&two, 2, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_schema_set(two, 0, "k", MCDC_TYPE_INT64, 0, 0, 0, false, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_schema_set(two, 1, "v", MCDC_TYPE_INT64, 0, 0, 0, true, &e), MCDC_OK);
    mcdc_batch *b = k_rows(one, 0, 100);
    /* no table yet: not settled (the first write creates it) */
    mcdc_appender *a = NULL;
    bool settled = true, skipped = false;
    int64_t version = -1;
    CHECK_EQ_INT(mcdc_appender_open(&a, t, one, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_prepare(a, &settled, &e), MCDC_OK);
    CHECK(!settled);
    CHECK_EQ_INT(mcdc_appender_write(a, b, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_commit(a, NULL, 0, NULL, &skipped, &version, &e), MCDC_OK);
    mcdc_appender_free(a);
    /* the table has every column: settled; a file of 1.5 batches is
     * filled by the second batch, not by the first */
    mcdc_table_props props = {.file_bytes = mcdc_batch_bytes(b) * 3 / 2};
    CHECK_EQ_INT(mcdc_appender_open(&a, t, one, &props, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_prepare(a, &settled, &e), MCDC_OK);
    CHECK(settled);
    mcdc_appender_set_threads(a, 1);
    CHECK(!mcdc_appender_fills(a, b)); /* no file open */
    CHECK_EQ_INT(mcdc_appender_write(a, b, &e), MCDC_OK);
    CHECK(mcdc_appender_fills(a, b));
    CHECK_EQ_INT(mcdc_appender_commit(a, NULL, 0, NULL, &skipped, &version, &e), MCDC_OK);
    mcdc_appender_free(a);
    /* a column the table lacks: the commit before this one's may add it */
    CHECK_EQ_INT(mcdc_appender_open(&a, t, two, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_prepare(a, &settled, &e), MCDC_OK);
    CHECK(!settled);
    mcdc_appender_free(a);
    mcdc_batch *all = NULL;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &version, &e), MCDC_OK);
    CHECK_EQ_INT(all ? all->rows : 0, 200);
    mcdc_batch_free(all);
    mcdc_batch_free(b);
    mcdc_schema_unref(one);
    mcdc_schema_unref(two);
    mcdc_table_close(t);
    mcdc_storage_mem_release(mem);
}
