/* test_delta_checkpoint.c - replay from a checkpoint written by delta-rs. */
#include <sys/stat.h>

#include "mcdc_delta_internal.h"
#include "mcdc_test.h"
#include "test_delta_checkpoint_fixture.h"
#include "test_delta_util.h"

static void put_checkpoint(const char *dir, int64_t version, const void *data, size_t n) {
    mcdc_storage *st = NULL;
    mcdc_storage_local_create(&st, dir, NULL);
    char key[128];
    snprintf(key, sizeof key, "_delta_log/%020lld.checkpoint.parquet", (long long)version);
    mcdc_storage_put(st, key, data, n, NULL);
    mcdc_storage_free(st);
}

TEST(delta_checkpoint_from_delta_rs_replaces_cleaned_commits) {
    char dir[64];
    td_mkdtemp(dir);
    /* only the checkpoint of version 2: the commits before it were cleaned up */
    put_checkpoint(dir, 2, cpfix_checkpoint, sizeof cpfix_checkpoint);
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_delta_table_open(&t, dir, NULL, &e), MCDC_OK);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    if (s) {
        CHECK_EQ_INT(mcdc_delta_snapshot_version(s), 2);
        CHECK_EQ_STR(mcdc_delta_snapshot_table_id(s), CPFIX_TABLE_ID);
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s), 1);
        if (mcdc_delta_snapshot_file_count(s) == 1) {
            CHECK_EQ_STR(mcdc_delta_snapshot_file(s, 0)->path, CPFIX_LIVE_PATH);
            CHECK_EQ_INT(mcdc_delta_snapshot_file(s, 0)->size_bytes, 754);
        }
        CHECK_EQ_INT(mcdc_delta_snapshot_tombstone_count(s), 2);
        CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(s, "app-1"), 7);
        CHECK_EQ_INT(mcdc_delta_snapshot_total_records(s), 3);
        CHECK_EQ_STR(mcdc_delta_snapshot_config(s, "delta.appendOnly"), "false");
        int32_t r = 0, w = 0;
        mcdc_delta_snapshot_protocol(s, &r, &w);
        CHECK_EQ_INT(r, 1);
        CHECK_EQ_INT(w, 2);
        mcdc_schema *sc = NULL;
        CHECK_EQ_INT(mcdc_delta_snapshot_schema(&sc, NULL, s, &e), MCDC_OK);
        CHECK(sc && sc->n_fields == 2 && sc->fields[1].type == MCDC_TYPE_UTF8);
        mcdc_schema_unref(sc);
    }
    mcdc_delta_snapshot_free(s);
    /* our append continues after the checkpoint; the txn rule sees app-1 */
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(td_append(t, "ours.parquet", "app-1", 7, &r, &e), MCDC_OK);
    CHECK(r.skipped);
    CHECK_EQ_INT(td_append(t, "ours.parquet", "app-1", 8, &r, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 3);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    CHECK(s && mcdc_delta_snapshot_file_count(s) == 2);
    mcdc_delta_snapshot_free(s);
    /* as of version 1: its commit is gone */
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, 1, &e), MCDC_E_CORRUPT);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_checkpoint_truncated_is_named_and_json_fallback_works) {
    char dir[64];
    td_mkdtemp(dir);
    put_checkpoint(dir, 2, cpfix_checkpoint, sizeof cpfix_checkpoint / 2);
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_table_open(&t, dir, NULL, &e);
    mcdc_delta_snapshot *s = NULL;
    int rc = mcdc_delta_snapshot_load(&s, t, -1, &e);
    CHECK(rc == MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "00000000000000000002.checkpoint.parquet") != NULL);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
    /* a table with all its commits and a bad checkpoint: replayed from JSON */
    td_mkdtemp(dir);
    t = td_create(dir);
    mcdc_delta_commit_result r;
    td_append(t, "a.parquet", NULL, 0, &r, &e);
    td_append(t, "b.parquet", NULL, 0, &r, &e);
    put_checkpoint(dir, 1, "PAR1garbagePAR1", 15);
    const mcdc_log_sink *lvl = mcdc_log_use(&mcdc_test_quiet);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    mcdc_log_use(lvl);
    CHECK(s && mcdc_delta_snapshot_file_count(s) == 2);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

/* Snapshot facts compared between two replays. */
static void check_same(const mcdc_delta_snapshot *a, const mcdc_delta_snapshot *b) {
    CHECK_EQ_INT(mcdc_delta_snapshot_version(a), mcdc_delta_snapshot_version(b));
    CHECK_EQ_STR(mcdc_delta_snapshot_table_id(a), mcdc_delta_snapshot_table_id(b));
    CHECK_EQ_STR(mcdc_delta_snapshot_schema_string(a), mcdc_delta_snapshot_schema_string(b));
    CHECK_EQ_INT(mcdc_delta_snapshot_file_count(a), mcdc_delta_snapshot_file_count(b));
    size_t n = mcdc_delta_snapshot_file_count(a);
    for (size_t i = 0; i < n && i < mcdc_delta_snapshot_file_count(b); i++) {
        const mcdc_delta_file *x = mcdc_delta_snapshot_file(a, i), *y = mcdc_delta_snapshot_file(b, i);
        if (strcmp(x->path, y->path) != 0 || x->size_bytes != y->size_bytes ||
            x->modification_time_ms != y->modification_time_ms ||
            (x->stats_json == NULL) != (y->stats_json == NULL) ||
            (x->stats_json && strcmp(x->stats_json, y->stats_json) != 0)) {
            CHECK_EQ_STR(x->path, y->path);
            CHECK_EQ_INT(x->size_bytes, y->size_bytes);
            CHECK_EQ_INT(x->modification_time_ms, y->modification_time_ms);
            break;
        }
    }
    CHECK_EQ_INT(mcdc_delta_snapshot_tombstone_count(a), mcdc_delta_snapshot_tombstone_count(b));
    CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(a, "app"), mcdc_delta_snapshot_txn_version(b, "app"));
    CHECK_EQ_STR(mcdc_delta_snapshot_config(a, "delta.checkpointInterval"),
                 mcdc_delta_snapshot_config(b, "delta.checkpointInterval"));
    int32_t r1, w1, r2, w2;
    mcdc_delta_snapshot_protocol(a, &r1, &w1);
    mcdc_delta_snapshot_protocol(b, &r2, &w2);
    CHECK_EQ_INT(r1, r2);
    CHECK_EQ_INT(w1, w2);
    CHECK(mcdc_delta_snapshot_has_feature(a, "timestampNtz") ==
          mcdc_delta_snapshot_has_feature(b, "timestampNtz"));
}

TEST(delta_checkpoint_written_every_interval_and_read_back) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_table_open(&t, dir, NULL, &e);
    mcdc_schema *sc = NULL;
    mcdc_schema_create(&sc, 2, NULL);
    mcdc_schema_set(sc, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    mcdc_schema_set(sc, 1, "local", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    const char *ck[] = {"delta.checkpointInterval"}, *cv[] = {"3"};
    mcdc_delta_create_opts co = MCDC_DELTA_CREATE_OPTS_INIT;
    co.schema = sc;
    co.config_keys = ck;
    co.config_values = cv;
    co.n_config = 1;
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(mcdc_delta_create(&r, t, &co, &e), MCDC_OK);
    char path[64];
    for (int i = 1; i <= 7; i++) {
        snprintf(path, sizeof path, "dir %d/f%d.parquet", i % 2, i); /* needs escaping */
        CHECK_EQ_INT(td_append(t, path, "app", i, &r, &e), MCDC_OK);
    }
    /* a rewrite leaves a tombstone */
    mcdc_delta_file rem = {0};
    rem.path = "dir 1/f1.parquet";
    rem.size_bytes = 100;
    rem.data_change = true;
    mcdc_delta_append_opts o = MCDC_DELTA_APPEND_OPTS_INIT;
    o.removes = &rem;
    o.n_removes = 1;
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 8);
    td_append(t, "last.parquet", "app", 9, &r, &e); /* version 9: checkpoint */
    CHECK_EQ_INT(r.version, 9);
    char p[256];
    snprintf(p, sizeof p, "%s/_delta_log/%020d.checkpoint.parquet", dir, 9);
    struct stat st;
    CHECK(stat(p, &st) == 0);
    snprintf(p, sizeof p, "%s/_delta_log/%020d.checkpoint.parquet", dir, 3);
    CHECK(stat(p, &st) == 0);
    mcdc_storage *stg = mcdc_delta_table_storage(t);
    mcdc_buf last = {0};
    CHECK_EQ_INT(mcdc_storage_get(stg, "_delta_log/_last_checkpoint", 4096, &last, &e), MCDC_OK);
    mcdc_buf_cstr(&last, &e);
    CHECK(last.data && strstr((char *)last.data, "\"version\":9,") != NULL);
    CHECK(last.data && strstr((char *)last.data, "\"numOfAddFiles\":7") != NULL);
    mcdc_buf_free(&last);
    /* replay all JSON (checkpoints removed from view) vs. replay from checkpoint 9 */
    mcdc_delta_snapshot *from_cp = NULL, *from_json = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&from_cp, t, -1, &e), MCDC_OK);
    char moved[256];
    snprintf(p, sizeof p, "%s/_delta_log/%020d.checkpoint.parquet", dir, 9);
    snprintf(moved, sizeof moved, "%s/cp9.bak", dir);
    rename(p, moved);
    snprintf(p, sizeof p, "%s/_delta_log/%020d.checkpoint.parquet", dir, 3);
    remove(p);
    const mcdc_log_sink *lvl = mcdc_log_use(&mcdc_test_quiet); /* _last_checkpoint now points past the files */
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&from_json, t, -1, &e), MCDC_OK);
    mcdc_log_use(lvl);
    if (from_cp && from_json) check_same(from_cp, from_json);
    CHECK(from_cp && mcdc_delta_snapshot_tombstone_count(from_cp) == 1);
    mcdc_delta_snapshot_free(from_json);
    /* with the commits before it cleaned up, the checkpoint alone carries the table */
    snprintf(p, sizeof p, "%s/_delta_log/%020d.checkpoint.parquet", dir, 9);
    rename(moved, p);
    for (int v = 0; v < 9; v++) {
        snprintf(p, sizeof p, "%s/_delta_log/%020d.json", dir, v);
        remove(p);
    }
    mcdc_delta_table *t2 = NULL;
    mcdc_delta_table_open(&t2, dir, NULL, &e);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&from_json, t2, -1, &e), MCDC_OK);
    if (from_cp && from_json) check_same(from_cp, from_json);
    mcdc_delta_snapshot_free(from_json);
    mcdc_delta_snapshot_free(from_cp);
    /* a second checkpoint of the same version is not rewritten */
    CHECK_EQ_INT(mcdc_delta_checkpoint(t2, 9, &e), MCDC_OK);
    mcdc_delta_table_free(t2);
    mcdc_schema_unref(sc);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

/* ---- _last_checkpoint: the log listed from the checkpoint it names ---------------- */

/* The memory storage with its listing watched: how often the log was listed
 * and from which name on ("" for the whole log). */
static int (*lc_inner_list)(void *, const char *, const char *, mcdc_storage_listing *,
                            mcdc_error *);
static char lc_after[4][64];
static int lc_lists;

static int lc_list(void *self, const char *prefix, const char *after, mcdc_storage_listing *out,
                   mcdc_error *err) {
    if (lc_lists < 4) snprintf(lc_after[lc_lists], sizeof lc_after[0], "%s", after ? after : "");
    lc_lists++;
    return lc_inner_list(self, prefix, after, out, err);
}

static mcdc_storage_ops lc_ops;

static mcdc_delta_table *lc_open(mcdc_storage_mem *m) {
    mcdc_storage *st = NULL;
    mcdc_delta_table *t = NULL;
    if (mcdc_storage_mem_open(&st, m, "t", NULL) != MCDC_OK) return NULL;
    lc_ops = *st->ops;
    lc_inner_list = st->ops->list;
    lc_ops.list = lc_list;
    st->ops = &lc_ops;
    if (mcdc_delta_table_open_storage(&t, &st, NULL) != MCDC_OK) return NULL;
    lc_lists = 0;
    return t;
}

/* A table of 25 commits after its creation: checkpoints 10 and 20, the
 * hint naming 20. */
static mcdc_storage_mem *lc_table(void) {
    mcdc_storage_mem *m = NULL;
    if (mcdc_storage_mem_create(&m, "lc", NULL) != MCDC_OK) return NULL;
    mcdc_delta_table *t = td_create_on(lc_open(m));
    mcdc_delta_commit_result r;
    char path[32];
    for (int i = 1; t && i <= 25; i++) {
        snprintf(path, sizeof path, "f%02d.parquet", i);
        td_append(t, path, "app", i, &r, NULL);
    }
    mcdc_delta_table_free(t);
    return m;
}

/* Loads the latest snapshot on a fresh handle: its version and file count
 * (-1 and the error's code in *rc when it fails). */
static int64_t lc_load(mcdc_storage_mem *m, size_t *files, int *rc) {
    mcdc_delta_table *t = lc_open(m);
    mcdc_delta_snapshot *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    *rc = mcdc_delta_snapshot_load(&s, t, -1, &e);
    int64_t v = s ? mcdc_delta_snapshot_version(s) : -1;
    *files = s ? mcdc_delta_snapshot_file_count(s) : 0;
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    return v;
}

static void lc_put(mcdc_storage_mem *m, const char *key, const char *content) {
    mcdc_storage *st = NULL;
    mcdc_storage_mem_open(&st, m, "t", NULL);
    mcdc_storage_put(st, key, content, strlen(content), NULL);
    mcdc_storage_free(st);
}

#define LC_CP20 "_delta_log/00000000000000000020.checkpoint.parquet"

TEST(delta_last_checkpoint_parse_proves_its_fields) {
    delta_last_checkpoint h;
    mcdc_error e = MCDC_ERROR_INIT;
    const char *ok = "{\"version\":20,\"size\":23,\"sizeInBytes\":4096,\"numOfAddFiles\":20}";
    CHECK_EQ_INT(mcdc_delta__last_checkpoint_parse(&h, ok, strlen(ok), &e), MCDC_OK);
    CHECK_EQ_INT(h.version, 20);
    CHECK_EQ_INT(h.size, 23);
    CHECK_EQ_INT(h.size_bytes, 4096);
    CHECK_EQ_INT(h.parts, 0);
    const char *parts = "{\"version\":0,\"parts\":3}";
    CHECK_EQ_INT(mcdc_delta__last_checkpoint_parse(&h, parts, strlen(parts), &e), MCDC_OK);
    CHECK_EQ_INT(h.version, 0);
    CHECK_EQ_INT(h.parts, 3);
    CHECK_EQ_INT(h.size, -1);
    static const char *const bad[] = {
        "",
        "garbage",
        "[20]",
        "{}",
        "{\"version\":-1}",
        "{\"version\":\"20\"}",
        "{\"version\":20.0}",
        "{\"version\":20,\"parts\":0}",
        "{\"version\":20,\"parts\":4294967296}",
        "{\"version\":20,\"size\":-3}",
        "{\"version\":20,\"sizeInBytes\":\"big\"}",
        "{\"version\":20,\"size\":2,\"numOfAddFiles\":5}",
        "{\"version\":20,\"version\":21}",
        "{\"version\":20}{",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mcdc_error_clear(&e);
        CHECK_EQ_INT(mcdc_delta__last_checkpoint_parse(&h, bad[i], strlen(bad[i]), &e),
                     MCDC_E_CORRUPT);
        CHECK(e.message[0] != 0);
        CHECK_EQ_INT(h.version, -1);
    }
}

TEST(delta_last_checkpoint_lists_the_log_from_its_version) {
    mcdc_storage_mem *m = lc_table();
    CHECK(m != NULL);
    size_t files = 0;
    int rc;
    CHECK_EQ_INT(lc_load(m, &files, &rc), 25);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_INT(files, 25);
    /* one listing, of the names from version 20 on */
    CHECK_EQ_INT(lc_lists, 1);
    CHECK_EQ_STR(lc_after[0], "00000000000000000019~");
    /* a version before the hint's (time travel) lists the whole log */
    mcdc_delta_table *t = lc_open(m);
    mcdc_delta_snapshot *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, 15, &e), MCDC_OK);
    CHECK(s && mcdc_delta_snapshot_version(s) == 15 && mcdc_delta_snapshot_file_count(s) == 15);
    CHECK_EQ_INT(lc_lists, 1);
    CHECK_EQ_STR(lc_after[0], "");
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    mcdc_storage_mem_release(m);
}

/* A hint that lies (a version past the log, a checkpoint it names that is
 * missing or corrupt, content that is not a hint) is never trusted: the
 * whole log is listed and the table read as it is. */
TEST(delta_last_checkpoint_lying_missing_or_corrupt_falls_back_to_the_listing) {
    const mcdc_log_sink *lvl = mcdc_log_use(&mcdc_test_quiet); /* the damage is warned of */
    size_t files = 0;
    int rc;
    /* past the log's end */
    mcdc_storage_mem *m = lc_table();
    lc_put(m, "_delta_log/_last_checkpoint", "{\"version\":40,\"size\":3}");
    CHECK_EQ_INT(lc_load(m, &files, &rc), 25);
    CHECK_EQ_INT(files, 25);
    CHECK_EQ_INT(lc_lists, 2);
    CHECK_EQ_STR(lc_after[0], "00000000000000000039~");
    CHECK_EQ_STR(lc_after[1], "");
    /* unparsable: the whole log at once */
    lc_put(m, "_delta_log/_last_checkpoint", "{\"version\":20,\"parts\":0}");
    CHECK_EQ_INT(lc_load(m, &files, &rc), 25);
    CHECK_EQ_INT(files, 25);
    CHECK_EQ_INT(lc_lists, 1);
    CHECK_EQ_STR(lc_after[0], "");
    /* the checkpoint it names is missing: read from checkpoint 10 */
    lc_put(m, "_delta_log/_last_checkpoint", "{\"version\":20}");
    CHECK_EQ_INT(mcdc_storage_mem_drop(m, "t/" LC_CP20, NULL), MCDC_OK);
    CHECK_EQ_INT(lc_load(m, &files, &rc), 25);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_INT(files, 25);
    CHECK_EQ_INT(lc_lists, 2);
    CHECK_EQ_STR(lc_after[0], "00000000000000000019~");
    CHECK_EQ_STR(lc_after[1], "");
    mcdc_storage_mem_release(m);
    /* the checkpoint it names is corrupt: the JSON commits replace it */
    m = lc_table();
    lc_put(m, LC_CP20, "PAR1 not a checkpoint PAR1");
    CHECK_EQ_INT(lc_load(m, &files, &rc), 25);
    CHECK_EQ_INT(rc, MCDC_OK);
    CHECK_EQ_INT(files, 25);
    CHECK_EQ_INT(lc_lists, 2);
    CHECK_EQ_STR(lc_after[1], "");
    /* ... and with those commits gone too, the table is corrupt, not
     * silently read from the hint */
    char key[64];
    for (int v = 0; v < 20; v++) {
        snprintf(key, sizeof key, "t/_delta_log/%020d.json", v);
        mcdc_storage_mem_drop(m, key, NULL);
    }
    mcdc_storage_mem_drop(m, "t/_delta_log/00000000000000000010.checkpoint.parquet", NULL);
    CHECK_EQ_INT(lc_load(m, &files, &rc), -1);
    CHECK_EQ_INT(rc, MCDC_E_CORRUPT);
    mcdc_storage_mem_release(m);
    mcdc_log_use(lvl);
}
