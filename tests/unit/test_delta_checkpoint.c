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
    mcdc_log_level lvl = mcdc_log_get_level();
    mcdc_log_set_level(MCDC_LOG_ERROR);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    mcdc_log_set_level(lvl);
    CHECK(s && mcdc_delta_snapshot_file_count(s) == 2);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}
