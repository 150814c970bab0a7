/* test_delta_table.c - create, append, replay, txn, concurrency, evolution, bad logs. */
#include <jansson.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "mcdc_delta_internal.h"
#include "mcdc_test.h"
#include "test_delta_util.h"

/* Reads a whole file (test helper, malloc'd). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void commit_path(char *out, size_t n, const char *dir, int64_t v) {
    snprintf(out, n, "%s/_delta_log/%020lld.json", dir, (long long)v);
}

TEST(delta_create_writes_protocol_and_metadata) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_delta_table_open(&t, dir, NULL, &e), MCDC_OK);
    mcdc_schema *s = td_schema_simple();
    const char *ck[] = {"mssql_cdc.schema_version"}, *cv[] = {"3"};
    const char *comments[] = {"the key", NULL, NULL};
    mcdc_delta_create_opts o = MCDC_DELTA_CREATE_OPTS_INIT;
    o.schema = s;
    o.config_keys = ck;
    o.config_values = cv;
    o.n_config = 1;
    o.field_comments = comments;
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(mcdc_delta_create(&r, t, &o, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 0);
    CHECK(!r.skipped);
    char p[256];
    commit_path(p, sizeof p, dir, 0);
    const char *c0 = slurp(p);
    CHECK(c0 && strncmp(c0, "{\"commitInfo\":", 14) == 0);
    CHECK(c0 && strstr(c0, "{\"protocol\":{\"minReaderVersion\":1,\"minWriterVersion\":2}}\n"));
    CHECK(c0 && strstr(c0, "\"format\":{\"provider\":\"parquet\",\"options\":{}}"));
    CHECK(c0 && strstr(c0, "\"partitionColumns\":[]"));
    CHECK(c0 && strstr(c0, "\"engineInfo\":\"mssql-cdc/"));
    /* CREATE TABLE's parameters as Spark records them: the properties given */
    CHECK(c0 && strstr(c0, "\"operationParameters\":{\"partitionBy\":\"[]\",\"clusterBy\":\"[]\","
                           "\"isManaged\":\"false\",\"properties\":"
                           "\"{\\\"mssql_cdc.schema_version\\\":\\\"3\\\"}\"}"));
    CHECK(c0 && strstr(c0, "\"operationMetrics\":{}"));

    mcdc_delta_snapshot *snap = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, t, -1, &e), MCDC_OK);
    if (snap) {
        CHECK_EQ_INT(mcdc_delta_snapshot_version(snap), 0);
        CHECK_EQ_STR(mcdc_delta_snapshot_config(snap, "mssql_cdc.schema_version"), "3");
        CHECK_EQ_INT(strlen(mcdc_delta_snapshot_table_id(snap)), 36);
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(snap), 0);
        mcdc_schema *back = NULL;
        mcdc_delta_field_meta *m = NULL;
        CHECK_EQ_INT(mcdc_delta_snapshot_schema(&back, &m, snap, &e), MCDC_OK);
        CHECK(back && back->n_fields == 3 && back->fields[2].type == MCDC_TYPE_TIMESTAMP_UTC);
        CHECK(m && m[0].comment && strcmp(m[0].comment, "the key") == 0);
        if (back) mcdc_delta_field_meta_free(m, back->n_fields);
        mcdc_schema_unref(back);
    }
    mcdc_delta_snapshot_free(snap);

    /* creating again: compatible -> skipped, nothing written */
    CHECK_EQ_INT(mcdc_delta_create(&r, t, &o, &e), MCDC_OK);
    CHECK(r.skipped);
    int64_t latest;
    CHECK_EQ_INT(mcdc_delta_table_latest_version(&latest, t, &e), MCDC_OK);
    CHECK_EQ_INT(latest, 0);
    /* incompatible -> SCHEMA */
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    CHECK_EQ_INT(mcdc_delta_create(&r, t, &o, &e), MCDC_E_SCHEMA);
    CHECK(strstr(e.message, "'id'") != NULL);
    mcdc_schema_unref(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_create_ntz_uses_table_features) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_table_open(&t, dir, NULL, &e);
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 1, NULL);
    mcdc_schema_set(s, 0, "local", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_delta_create_opts o = MCDC_DELTA_CREATE_OPTS_INIT;
    o.schema = s;
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(mcdc_delta_create(&r, t, &o, &e), MCDC_OK);
    char p[256];
    commit_path(p, sizeof p, dir, 0);
    const char *c0 = slurp(p);
    CHECK(c0 && strstr(c0, "{\"protocol\":{\"minReaderVersion\":3,\"minWriterVersion\":7,"
                           "\"readerFeatures\":[\"timestampNtz\"],\"writerFeatures\":["
                           "\"appendOnly\",\"invariants\",\"timestampNtz\"]}}"));
    mcdc_delta_snapshot *snap = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, t, -1, &e), MCDC_OK);
    CHECK(snap && mcdc_delta_snapshot_has_feature(snap, "timestampNtz"));
    mcdc_delta_snapshot_free(snap);
    /* appending works on a (3,7) table */
    CHECK_EQ_INT(td_append(t, "f1.parquet", NULL, 0, &r, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 1);
    mcdc_schema_unref(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_append_replay_txn_skip_and_commit_info) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = td_create(dir);
    CHECK(t != NULL);
    if (t == NULL) return;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    mcdc_delta_file f = {0};
    f.path = "part-00000-a b.parquet";
    f.size_bytes = 1234;
    f.modification_time_ms = 1700000000123;
    f.data_change = true;
    f.stats_json = "{\"numRecords\":7,\"minValues\":{\"id\":1},\"maxValues\":{\"id\":7},"
                   "\"nullCount\":{\"id\":0}}";
    mcdc_delta_append_opts o = MCDC_DELTA_APPEND_OPTS_INIT;
    o.adds = &f;
    o.n_adds = 1;
    o.app_id = "stream-1";
    o.txn_version = 1;
    o.user_metadata = "{\"batch\":1}";
    o.commit_info_json = "{\"cdc\":{\"toLsn\":\"0x01\"}}";
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 1);
    CHECK(!r.skipped);
    CHECK_EQ_INT(r.attempts, 1);
    char p[256];
    commit_path(p, sizeof p, dir, 1);
    const char *c1 = slurp(p);
    CHECK(c1 && strstr(c1, "\"path\":\"part-00000-a%20b.parquet\""));
    CHECK(c1 && strstr(c1, "\"operationParameters\":{\"mode\":\"Append\",\"partitionBy\":\"[]\"}"));
    CHECK(c1 && strstr(c1, "\"isBlindAppend\":true"));
    /* what the commit wrote, as Delta's WRITE reports it */
    CHECK(c1 && strstr(c1, "\"operationMetrics\":{\"numFiles\":\"1\",\"numOutputRows\":\"7\","
                           "\"numOutputBytes\":\"1234\"}"));
    CHECK(c1 && strstr(c1, "{\"txn\":{\"appId\":\"stream-1\",\"version\":1,"));
    /* the same batch again: skipped, not an error, nothing written */
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    CHECK(r.skipped);
    CHECK_EQ_INT(r.version, 1);
    o.txn_version = 0;
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    CHECK(r.skipped);
    /* next batch */
    f.path = "part-00001.parquet";
    f.size_bytes = 100;
    f.stats_json = "{\"numRecords\":5}";
    o.txn_version = 2;
    o.user_metadata = NULL;
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 2);

    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    if (s) {
        CHECK_EQ_INT(mcdc_delta_snapshot_version(s), 2);
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s), 2);
        CHECK_EQ_STR(mcdc_delta_snapshot_file(s, 0)->path, "part-00000-a b.parquet");
        CHECK_EQ_INT(mcdc_delta_snapshot_file(s, 0)->size_bytes, 1234);
        CHECK_EQ_INT(mcdc_delta_snapshot_file(s, 0)->modification_time_ms, 1700000000123);
        CHECK_EQ_INT(mcdc_delta_snapshot_total_records(s), 12);
        CHECK_EQ_INT(mcdc_delta_snapshot_total_bytes(s), 1334);
        CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(s, "stream-1"), 2);
        CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(s, "other"), -1);
    }
    mcdc_delta_snapshot_free(s);
    /* as of version 1 */
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, 1, &e), MCDC_OK);
    if (s) {
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s), 1);
        CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(s, "stream-1"), 1);
    }
    mcdc_delta_snapshot_free(s);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, 3, &e), MCDC_E_NOTFOUND);
    /* commit info */
    mcdc_delta_commit_info *ci = NULL;
    CHECK_EQ_INT(mcdc_delta_commit_info_read(&ci, t, 1, "stream-1", &e), MCDC_OK);
    if (ci) {
        CHECK_EQ_STR(ci->user_metadata, "{\"batch\":1}");
        CHECK_EQ_STR(ci->operation, "WRITE");
        CHECK_EQ_INT(ci->txn_version, 1);
        CHECK(ci->timestamp_ms > 1700000000000LL);
        CHECK(strstr(ci->json, "\"toLsn\":\"0x01\"") != NULL);
    }
    mcdc_delta_commit_info_free(ci);
    CHECK_EQ_INT(mcdc_delta_commit_info_read(&ci, t, 0, NULL, &e), MCDC_OK);
    CHECK(ci && ci->operation && strcmp(ci->operation, "CREATE TABLE") == 0);
    CHECK(ci && ci->user_metadata == NULL);
    mcdc_delta_commit_info_free(ci);
    CHECK_EQ_INT(mcdc_delta_commit_info_read(&ci, t, 9, NULL, &e), MCDC_E_NOTFOUND);
    /* a missing data file shows up when verifying */
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_delta_snapshot_verify_files(s, t, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "part-00000-a b.parquet") != NULL);
    mcdc_storage *st = mcdc_delta_table_storage(t);
    char blob[1334];
    memset(blob, 'x', sizeof blob);
    mcdc_storage_put(st, "part-00000-a b.parquet", blob, 1234, &e);
    mcdc_storage_put(st, "part-00001.parquet", blob, 99, &e);
    CHECK_EQ_INT(mcdc_delta_snapshot_verify_files(s, t, &e), MCDC_E_CORRUPT);
    mcdc_storage_put(st, "part-00001.parquet", blob, 100, &e);
    CHECK_EQ_INT(mcdc_delta_snapshot_verify_files(s, t, &e), MCDC_OK);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_append_remove_and_tombstones) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = td_create(dir);
    if (t == NULL) {
        CHECK(t != NULL);
        return;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    td_append(t, "a.parquet", NULL, 0, &r, &e);
    td_append(t, "b.parquet", NULL, 0, &r, &e);
    mcdc_delta_file add = {0}, rem = {0};
    add.path = "c.parquet";
    add.size_bytes = 200;
    add.modification_time_ms = 1;
    add.data_change = false;
    rem.path = "a.parquet";
    rem.size_bytes = 100;
    rem.data_change = false;
    mcdc_delta_append_opts o = MCDC_DELTA_APPEND_OPTS_INIT;
    o.adds = &add;
    o.n_adds = 1;
    o.removes = &rem;
    o.n_removes = 1;
    o.operation = "OPTIMIZE";
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 3);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    if (s) {
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s), 2);
        CHECK_EQ_STR(mcdc_delta_snapshot_file(s, 0)->path, "b.parquet");
        CHECK_EQ_STR(mcdc_delta_snapshot_file(s, 1)->path, "c.parquet");
        CHECK_EQ_INT(mcdc_delta_snapshot_tombstone_count(s), 1);
        CHECK_EQ_STR(mcdc_delta_snapshot_tombstone(s, 0)->path, "a.parquet");
        CHECK(mcdc_delta_snapshot_tombstone(s, 0)->deletion_timestamp_ms > 0);
    }
    mcdc_delta_snapshot_free(s);
    char p[256];
    commit_path(p, sizeof p, dir, 3);
    const char *c3 = slurp(p);
    CHECK(c3 && strstr(c3, "\"isBlindAppend\":false"));
    CHECK(c3 && strstr(c3, "\"numFiles\":\"1\""));
    CHECK(c3 && strstr(c3, "\"numRemovedFiles\":\"1\""));
    CHECK(c3 && strstr(c3, "{\"remove\":{\"path\":\"a.parquet\""));
    /* re-adding a removed path makes it live again */
    td_append(t, "a.parquet", NULL, 0, &r, &e);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    CHECK(s && mcdc_delta_snapshot_file_count(s) == 3 && mcdc_delta_snapshot_tombstone_count(s) == 0);
    mcdc_delta_snapshot_free(s);
    /* bad paths are refused */
    add.path = "../x.parquet";
    o.n_removes = 0;
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_E_INVALID);
    add.path = "_delta_log/x.parquet";
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_E_INVALID);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

/* A MERGE's commitInfo: the caller's row counts, the files, bytes and
 * deletion vectors of its own actions (a file removed and added back with
 * a deletion vector is neither added nor removed). */
TEST(delta_merge_commit_info_counts_files_and_deletion_vectors) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = td_create(dir);
    if (t == NULL) {
        CHECK(t != NULL);
        return;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    mcdc_delta_file live[2] = {{.path = "a.parquet", .size_bytes = 100, .data_change = true,
                                .modification_time_ms = 1, .stats_json = "{\"numRecords\":10}"},
                               {.path = "b.parquet", .size_bytes = 50, .data_change = true,
                                .modification_time_ms = 1, .stats_json = "{\"numRecords\":4}"}};
    mcdc_delta_append_opts o = MCDC_DELTA_APPEND_OPTS_INIT;
    o.adds = live;
    o.n_adds = 2;
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    /* a.parquet rewritten into c.parquet; b.parquet given a deletion vector */
    mcdc_delta_file adds[2] = {{.path = "c.parquet", .size_bytes = 70, .data_change = true,
                                .modification_time_ms = 2, .stats_json = "{\"numRecords\":9}"},
                               live[1]};
    adds[1].dv = (mcdc_delta_dv){.storage_type = 'u', .path_or_inline = "00000000000000000001",
                                 .offset = 1, .size_bytes = 34, .cardinality = 1,
                                 .max_row_index = -1};
    adds[1].stats_json = "{\"numRecords\":4,\"tightBounds\":false}";
    mcdc_delta_merge_info mi = {.predicate = "[\"(t.id = s.id)\"]", .source_rows = 3,
                                .rows_inserted = 1, .rows_updated = 1, .rows_deleted = 2,
                                .rows_copied = 7, .execution_ms = 12};
    mcdc_delta_append_opts m = MCDC_DELTA_APPEND_OPTS_INIT;
    m.adds = adds;
    m.n_adds = 2;
    m.removes = live;
    m.n_removes = 2;
    m.read_version = 1;
    m.operation = "MERGE";
    m.merge = &mi;
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &m, &e), MCDC_OK);
    char p[256];
    commit_path(p, sizeof p, dir, 2);
    const char *c2 = slurp(p);
    CHECK(c2 && strstr(c2, "\"operation\":\"MERGE\""));
    CHECK(c2 && strstr(c2, "\"isBlindAppend\":false"));
    CHECK(c2 && strstr(c2, "\"predicate\":\"[\\\"(t.id = s.id)\\\"]\""));
    CHECK(c2 && strstr(c2, "\"notMatchedBySourcePredicates\":\"[]\""));
    const char *want[] = {"\"numSourceRows\":\"3\"", "\"numTargetRowsInserted\":\"1\"",
                          "\"numTargetRowsUpdated\":\"1\"", "\"numTargetRowsDeleted\":\"2\"",
                          "\"numTargetRowsCopied\":\"7\"", "\"numOutputRows\":\"9\"",
                          "\"numTargetFilesAdded\":\"1\"", "\"numTargetFilesRemoved\":\"1\"",
                          "\"numTargetBytesAdded\":\"70\"", "\"numTargetBytesRemoved\":\"100\"",
                          "\"numTargetDeletionVectorsAdded\":\"1\"",
                          "\"numTargetDeletionVectorsUpdated\":\"0\"",
                          "\"executionTimeMs\":\"12\""};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(c2 && strstr(c2, want[i]) != NULL);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_append_schema_evolution) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = td_create(dir);
    if (t == NULL) {
        CHECK(t != NULL);
        return;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 4, NULL);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 1, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 2, "ts", MCDC_TYPE_TIMESTAMP_UTC, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 3, "extra", MCDC_TYPE_DECIMAL, 10, 2, 0, false, NULL);
    mcdc_delta_file f = {0};
    f.path = "e.parquet";
    f.size_bytes = 1;
    f.modification_time_ms = 1;
    f.data_change = true;
    mcdc_delta_append_opts o = MCDC_DELTA_APPEND_OPTS_INIT;
    o.adds = &f;
    o.n_adds = 1;
    o.schema = s;
    /* a new NOT NULL column is refused */
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_E_SCHEMA);
    CHECK(strstr(e.message, "nullable") != NULL);
    mcdc_schema_set(s, 3, "extra", MCDC_TYPE_DECIMAL, 10, 2, 0, true, NULL);
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 1);
    mcdc_delta_snapshot *snap = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, t, -1, &e), MCDC_OK);
    mcdc_schema *now = NULL;
    if (snap) CHECK_EQ_INT(mcdc_delta_snapshot_schema(&now, NULL, snap, &e), MCDC_OK);
    CHECK(now && now->n_fields == 4 && now->fields[3].precision == 10);
    const char *id0 = snap ? mcdc_delta_snapshot_table_id(snap) : NULL;
    mcdc_delta_snapshot *v0 = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&v0, t, 0, &e), MCDC_OK);
    CHECK(v0 && id0 && strcmp(mcdc_delta_snapshot_table_id(v0), id0) == 0); /* same table id */
    mcdc_delta_snapshot_free(v0);
    mcdc_schema_unref(now);
    mcdc_delta_snapshot_free(snap);
    char p[256];
    commit_path(p, sizeof p, dir, 1);
    const char *c1 = slurp(p);
    CHECK(c1 && strstr(c1, "\"canMergeSchema\":true"));
    /* dropping a column is refused */
    mcdc_schema *fewer = NULL;
    mcdc_schema_create(&fewer, 1, NULL);
    mcdc_schema_set(fewer, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    o.schema = fewer;
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_E_SCHEMA);
    /* adding a timestamp_ntz column upgrades the protocol to (3,7) */
    mcdc_schema *ntz = NULL;
    mcdc_schema_create(&ntz, 5, NULL);
    for (int i = 0; i < 4; i++)
        mcdc_schema_set(ntz, i, s->fields[i].name, s->fields[i].type, s->fields[i].precision,
                        s->fields[i].scale, 0, s->fields[i].nullable, NULL);
    mcdc_schema_set(ntz, 4, "local", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    o.schema = ntz;
    CHECK_EQ_INT(mcdc_delta_append(&r, t, &o, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, t, -1, &e), MCDC_OK);
    int32_t rv = 0, wv = 0;
    if (snap) mcdc_delta_snapshot_protocol(snap, &rv, &wv);
    CHECK_EQ_INT(rv, 3);
    CHECK_EQ_INT(wv, 7);
    CHECK(snap && mcdc_delta_snapshot_has_feature(snap, "appendOnly"));
    CHECK(snap && mcdc_delta_snapshot_has_feature(snap, "timestampNtz"));
    mcdc_delta_snapshot_free(snap);
    mcdc_schema_unref(ntz);
    mcdc_schema_unref(fewer);
    mcdc_schema_unref(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

/* Another writer commits version v behind our handle's back. */
static void foreign_commit(const char *dir, int64_t v, const char *body) {
    char p[256];
    commit_path(p, sizeof p, dir, v);
    td_write_file(p, body);
}

TEST(delta_append_lost_race_retries_at_next_version) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = td_create(dir);
    if (t == NULL) {
        CHECK(t != NULL);
        return;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(td_append(t, "mine-1.parquet", "app", 1, &r, &e), MCDC_OK);
    /* two foreign blind appends land while our cache is at version 1 */
    const char *theirs2 =
        "{\"commitInfo\":{\"operation\":\"WRITE\"}}\n"
        "{\"add\":{\"path\":\"theirs-2.parquet\",\"partitionValues\":{},\"size\":5,"
        "\"modificationTime\":1,\"dataChange\":true,\"unknownField\":42}}\n";
    const char *theirs3 =
        "{\"add\":{\"path\":\"theirs-3.parquet\",\"partitionValues\":{},\"size\":5,"
        "\"modificationTime\":1,\"dataChange\":true}}\n{\"futureAction\":{\"x\":1}}\n";
    foreign_commit(dir, 2, theirs2);
    foreign_commit(dir, 3, theirs3);
    /* make the cache stale on purpose: the handle only learns by losing */
    CHECK_EQ_INT(td_append(t, "mine-2.parquet", "app", 2, &r, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 4);
    CHECK(!r.skipped);
    /* whether the cache saw 2 and 3 at refresh or by losing, nothing was
     * overwritten: */
    char p[256];
    commit_path(p, sizeof p, dir, 2);
    const char *c2 = slurp(p);
    CHECK(c2 && strcmp(c2, theirs2) == 0);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    CHECK(s && mcdc_delta_snapshot_file_count(s) == 4);
    CHECK(s && mcdc_delta_snapshot_txn_version(s, "app") == 2);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

/* A put-if-absent commit that first lets a "racing writer" publish the same
 * key: exercises the lost-race path deterministically. */
typedef struct racing {
    mcdc_storage *inner;
    const char *const *bodies; /* published in turn, one per commit */
    int n_bodies;
    int next;
} racing;

typedef struct racing_writer {
    racing *rc;
    mcdc_storage_writer *inner;
    char *key;
} racing_writer;

static int racing_write(void *ws, const void *d, size_t n, mcdc_error *err) {
    racing_writer *rw = ws;
    return mcdc_storage_writer_write(rw->inner, d, n, err);
}
static int racing_commit(void *ws, mcdc_storage_commit_mode mode, mcdc_error *err) {
    racing_writer *rw = ws;
    racing *rc = rw->rc;
    if (mode == MCDC_STORAGE_PUT_IF_ABSENT && rc->next < rc->n_bodies) {
        const char *b = rc->bodies[rc->next++];
        mcdc_storage_put_if_absent(rc->inner, rw->key, b, strlen(b), NULL);
    }
    int r = mcdc_storage_writer_commit(rw->inner, mode, err);
    rw->inner = NULL;
    return r;
}
static void racing_discard(void *ws) {
    racing_writer *rw = ws;
    mcdc_storage_writer_abort(rw->inner);
    mcdc_free(rw->key);
    mcdc_free(rw);
}
static const mcdc_storage_writer_ops racing_writer_ops = {racing_write, racing_commit,
                                                          racing_discard};

static int racing_open_writer(void *self, const char *key, mcdc_storage_writer *w,
                              mcdc_error *err) {
    racing *rc = self;
    racing_writer *rw = mcdc_calloc(1, sizeof *rw);
    rw->rc = rc;
    rw->key = mcdc_strdup(key);
    int r = mcdc_storage_writer_open(&rw->inner, rc->inner, key, err);
    if (r) {
        racing_discard(rw);
        return r;
    }
    w->ops = &racing_writer_ops;
    w->self = rw;
    return MCDC_OK;
}
static int racing_get(void *self, const char *k, size_t m, mcdc_buf *o, mcdc_error *err) {
    racing *rc = self;
    return mcdc_storage_get(rc->inner, k, m, o, err);
}
static int racing_get_range(void *self, const char *k, int64_t off, size_t len, void *dst,
                            size_t *got, int64_t *size, mcdc_error *err) {
    racing *rc = self;
    return mcdc_storage_get_range(rc->inner, k, off, len, dst, got, size, err);
}
static int racing_list(void *self, const char *p, const char *after, mcdc_storage_listing *o,
                       mcdc_error *err) {
    racing *rc = self;
    return mcdc_storage_list_after(rc->inner, p, after, o, err);
}
static int racing_del(void *self, const char *k, mcdc_error *err) {
    racing *rc = self;
    return mcdc_storage_delete(rc->inner, k, err);
}
static void racing_destroy(void *self) {
    racing *rc = self;
    mcdc_storage_free(rc->inner);
    mcdc_free(rc);
}
static const mcdc_storage_ops racing_ops = {racing_open_writer, racing_get, racing_get_range,
                                            racing_list,        racing_del, racing_destroy,
                                            NULL,               NULL,       false};

static mcdc_delta_table *racing_table(const char *dir, const char *const *bodies, int n) {
    mcdc_storage *inner = NULL, *st = mcdc_calloc(1, sizeof *st);
    racing *rc = mcdc_calloc(1, sizeof *rc);
    mcdc_storage_local_create(&inner, dir, NULL);
    rc->inner = inner;
    rc->bodies = bodies;
    rc->n_bodies = n;
    st->ops = &racing_ops;
    st->self = rc;
    st->root = mcdc_strdup(dir);
    mcdc_delta_table *t = NULL;
    mcdc_delta_table_open_storage(&t, &st, NULL);
    return t;
}

TEST(delta_append_race_with_foreign_add_retries) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table_free(td_create(dir));
    static const char *const bodies[] = {
        "{\"add\":{\"path\":\"x.parquet\",\"partitionValues\":{},\"size\":1,"
        "\"modificationTime\":1,\"dataChange\":true}}\n",
        "{\"add\":{\"path\":\"y.parquet\",\"partitionValues\":{},\"size\":1,"
        "\"modificationTime\":1,\"dataChange\":true}}\n"};
    mcdc_delta_table *t = racing_table(dir, bodies, 2);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(td_append(t, "mine.parquet", "app", 7, &r, &e), MCDC_OK);
    CHECK_EQ_INT(r.attempts, 3);
    CHECK_EQ_INT(r.version, 3);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    CHECK(s && mcdc_delta_snapshot_file_count(s) == 3);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_append_race_with_same_app_id_skips) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table_free(td_create(dir));
    static const char *const bodies[] = {
        "{\"add\":{\"path\":\"dup.parquet\",\"partitionValues\":{},\"size\":1,"
        "\"modificationTime\":1,\"dataChange\":true}}\n"
        "{\"txn\":{\"appId\":\"app\",\"version\":5}}\n"};
    mcdc_delta_table *t = racing_table(dir, bodies, 1);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(td_append(t, "mine.parquet", "app", 5, &r, &e), MCDC_OK);
    CHECK(r.skipped);
    CHECK_EQ_INT(r.version, 1);
    int64_t latest;
    mcdc_delta_table_latest_version(&latest, t, &e);
    CHECK_EQ_INT(latest, 1); /* our commit was not written */
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_append_race_with_incompatible_metadata_conflicts) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table_free(td_create(dir));
    static const char *const bodies[] = {
        "{\"metaData\":{\"id\":\"x\",\"format\":{\"provider\":\"parquet\",\"options\":{}},"
        "\"schemaString\":\"{\\\"type\\\":\\\"struct\\\",\\\"fields\\\":[{\\\"name\\\":\\\"id\\\","
        "\\\"type\\\":\\\"string\\\",\\\"nullable\\\":true,\\\"metadata\\\":{}}]}\","
        "\"partitionColumns\":[],\"configuration\":{}}}\n"};
    mcdc_delta_table *t = racing_table(dir, bodies, 1);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(td_append(t, "mine.parquet", "app", 1, &r, &e), MCDC_E_CONFLICT);
    CHECK(strstr(e.message, "version 1") != NULL);
    int64_t latest;
    mcdc_delta_table_latest_version(&latest, t, &e);
    CHECK_EQ_INT(latest, 1);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_two_processes_append_concurrently) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table_free(td_create(dir));
    enum { N = 50 };
    pid_t pids[2];
    for (int k = 0; k < 2; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            mcdc_delta_table *t = NULL;
            int bad = mcdc_delta_table_open(&t, dir, NULL, NULL) != MCDC_OK;
            char app[32], path[64];
            snprintf(app, sizeof app, "proc-%d", k);
            for (int i = 1; i <= N && !bad; i++) {
                snprintf(path, sizeof path, "p%d-%03d.parquet", k, i);
                mcdc_delta_commit_result r;
                mcdc_error e = MCDC_ERROR_INIT;
                if (td_append(t, path, app, i, &r, &e) != MCDC_OK || r.skipped) {
                    fprintf(stderr, "child %d batch %d: %s\n", k, i, e.message);
                    bad = 1;
                }
            }
            mcdc_delta_table_free(t);
            _exit(bad);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        waitpid(pids[k], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_table_open(&t, dir, NULL, &e);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    if (s) {
        CHECK_EQ_INT(mcdc_delta_snapshot_version(s), 2 * N);
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s), 2 * N); /* nothing lost or doubled */
        CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(s, "proc-0"), N);
        CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(s, "proc-1"), N);
        size_t n = mcdc_delta_snapshot_file_count(s);
        for (size_t i = 0; i < n; i++) {
            char want[64];
            snprintf(want, sizeof want, "p%d-%03d.parquet", (int)(i / N), (int)(i % N) + 1);
            if (strcmp(mcdc_delta_snapshot_file(s, i)->path, want) != 0) {
                CHECK_EQ_STR(mcdc_delta_snapshot_file(s, i)->path, want);
                break;
            }
        }
    }
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_two_processes_same_app_id_commit_each_batch_once) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table_free(td_create(dir));
    enum { N = 30 };
    pid_t pids[2];
    for (int k = 0; k < 2; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            mcdc_delta_table *t = NULL;
            int bad = mcdc_delta_table_open(&t, dir, NULL, NULL) != MCDC_OK;
            char path[64];
            for (int i = 1; i <= N && !bad; i++) {
                snprintf(path, sizeof path, "b%03d-w%d.parquet", i, k);
                mcdc_delta_commit_result r;
                mcdc_error e = MCDC_ERROR_INIT;
                if (td_append(t, path, "stream", i, &r, &e) != MCDC_OK) bad = 1;
            }
            mcdc_delta_table_free(t);
            _exit(bad);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        waitpid(pids[k], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_table_open(&t, dir, NULL, &e);
    int64_t latest = 0;
    mcdc_delta_table_latest_version(&latest, t, &e);
    /* every commit carries one batch, batches strictly increase, last is N */
    int64_t prev = 0;
    bool increasing = true;
    for (int64_t v = 1; v <= latest; v++) {
        mcdc_delta_commit_info *ci = NULL;
        mcdc_delta_commit_info_read(&ci, t, v, "stream", &e);
        if (ci == NULL || ci->txn_version <= prev) increasing = false;
        else prev = ci->txn_version;
        mcdc_delta_commit_info_free(ci);
    }
    CHECK(increasing);
    CHECK_EQ_INT(prev, N);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    CHECK(s && (int64_t)mcdc_delta_snapshot_file_count(s) == latest);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

/* ---- bad logs ------------------------------------------------------------ */

TEST(delta_corrupt_and_truncated_commits_are_named) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = td_create(dir);
    if (t == NULL) {
        CHECK(t != NULL);
        return;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    td_append(t, "a.parquet", NULL, 0, &r, &e);
    foreign_commit(dir, 2, "{\"add\":{\"path\":\"b.parquet\",\"partitionValues\":{},\"si");
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "00000000000000000002.json") != NULL);
    CHECK(strstr(e.message, "line 1") != NULL);
    /* as of an earlier version still works */
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, 1, &e), MCDC_OK);
    mcdc_delta_snapshot_free(s);
    /* an append refuses to write past a corrupt commit and overwrites nothing */
    CHECK(td_append(t, "c.parquet", NULL, 0, &r, &e) == MCDC_E_CORRUPT);
    char p[256];
    commit_path(p, sizeof p, dir, 2);
    const char *c2 = slurp(p);
    CHECK(c2 && strstr(c2, "\"si") != NULL && strstr(c2, "c.parquet") == NULL);
    /* wrong types */
    foreign_commit(dir, 2, "{\"add\":{\"path\":\"b\",\"size\":\"12\",\"modificationTime\":1,"
                           "\"dataChange\":true}}\n");
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "\"size\" is not an integer") != NULL);
    foreign_commit(dir, 2, "\n\n");
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_CORRUPT);
    foreign_commit(dir, 2, "[1,2]\n");
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_CORRUPT);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_version_gap_and_missing_start_are_errors) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = td_create(dir);
    if (t == NULL) {
        CHECK(t != NULL);
        return;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    td_append(t, "a.parquet", NULL, 0, &r, &e);
    td_append(t, "b.parquet", NULL, 0, &r, &e);
    char p[256];
    commit_path(p, sizeof p, dir, 1);
    remove(p);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "version 1 is missing") != NULL);
    CHECK(strstr(e.message, "00000000000000000001.json") != NULL);
    commit_path(p, sizeof p, dir, 0);
    remove(p);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "version 0") != NULL);
    /* a checkpoint replacing the cleaned-up commits, but not a Parquet file */
    char cp[256];
    snprintf(cp, sizeof cp, "%s/_delta_log/%020d.checkpoint.parquet", dir, 1);
    td_write_file(cp, "PAR1");
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "00000000000000000001.checkpoint.parquet") != NULL);
    /* an incomplete multi-part set is ignored (part 2 of 2 missing) */
    remove(cp);
    snprintf(cp, sizeof cp, "%s/_delta_log/%020d.checkpoint.%010d.%010d.parquet", dir, 1, 1, 2);
    td_write_file(cp, "PAR1");
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "version 0") != NULL);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
    /* no table at all */
    td_mkdtemp(dir);
    mcdc_delta_table_open(&t, dir, NULL, &e);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "no Delta table") != NULL);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_stale_last_checkpoint_is_survived) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = td_create(dir);
    if (t == NULL) {
        CHECK(t != NULL);
        return;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_commit_result r;
    td_append(t, "a.parquet", NULL, 0, &r, &e);
    char p[256];
    snprintf(p, sizeof p, "%s/_delta_log/_last_checkpoint", dir);
    td_write_file(p, "{\"version\":1,\"size\":3}");
    const mcdc_log_sink *lvl = mcdc_log_use(&mcdc_test_quiet); /* the warning is expected */
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    CHECK(s && mcdc_delta_snapshot_file_count(s) == 1);
    mcdc_delta_snapshot_free(s);
    td_write_file(p, "garbage");
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    mcdc_delta_snapshot_free(s);
    mcdc_log_use(lvl);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_unsupported_features_are_refused) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_table_open(&t, dir, NULL, &e);
    char logdir[128];
    snprintf(logdir, sizeof logdir, "%s/_delta_log", dir);
    mkdir(logdir, 0777);
    const char *md = "{\"metaData\":{\"id\":\"x\",\"format\":{\"provider\":\"parquet\","
                     "\"options\":{}},\"schemaString\":\"{\\\"type\\\":\\\"struct\\\","
                     "\\\"fields\\\":[{\\\"name\\\":\\\"a\\\",\\\"type\\\":\\\"long\\\","
                     "\\\"nullable\\\":true,\\\"metadata\\\":{}}]}\",\"partitionColumns\":[],"
                     "\"configuration\":{}}}\n";
    char body[2048];
    snprintf(body, sizeof body,
             "{\"protocol\":{\"minReaderVersion\":3,\"minWriterVersion\":7,"
             "\"readerFeatures\":[\"futureThing\"],\"writerFeatures\":[\"futureThing\"]}}\n%s",
             md);
    foreign_commit(dir, 0, body);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_UNSUPPORTED);
    CHECK(strstr(e.message, "futureThing") != NULL);
    /* deletion vectors: read, the descriptor carried */
    snprintf(body, sizeof body,
             "{\"protocol\":{\"minReaderVersion\":3,\"minWriterVersion\":7,"
             "\"readerFeatures\":[\"deletionVectors\"],\"writerFeatures\":[\"deletionVectors\"]}}"
             "\n%s{\"add\":{\"path\":\"f.parquet\",\"partitionValues\":{},\"size\":1,"
             "\"modificationTime\":1,\"dataChange\":true,\"deletionVector\":{\"storageType\":"
             "\"u\",\"pathOrInlineDv\":\"ab^-aqEH.-t@S}K{vb[*k^\",\"offset\":4,\"sizeInBytes\":40,"
             "\"cardinality\":6}}}\n",
             md);
    foreign_commit(dir, 0, body);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    CHECK(s && mcdc_delta_snapshot_file(s, 0)->dv.storage_type == 'u' &&
          mcdc_delta_snapshot_file(s, 0)->dv.cardinality == 6);
    mcdc_delta_snapshot_free(s);
    s = NULL;
    /* a descriptor that is not one is damage, named with its line */
    char *x = strstr(body, "\"storageType\":\"u\"");
    if (x) x[15] = 'x';
    foreign_commit(dir, 0, body);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_CORRUPT);
    CHECK(strstr(e.message, "line 3") && strstr(e.message, "f.parquet") &&
          strstr(e.message, "storageType"));
    /* a newer reader version */
    snprintf(body, sizeof body, "{\"protocol\":{\"minReaderVersion\":4,\"minWriterVersion\":7}}\n%s",
             md);
    foreign_commit(dir, 0, body);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_E_UNSUPPORTED);
    /* readable, but not writable: writer version 6 (identity columns) */
    snprintf(body, sizeof body,
             "{\"protocol\":{\"minReaderVersion\":2,\"minWriterVersion\":6}}\n"
             "{\"metaData\":{\"id\":\"x\",\"format\":{\"provider\":\"parquet\",\"options\":{}},"
             "\"schemaString\":\"{\\\"type\\\":\\\"struct\\\",\\\"fields\\\":[]}\","
             "\"partitionColumns\":[],\"configuration\":{\"delta.columnMapping.mode\":\"name\"}}}\n");
    foreign_commit(dir, 0, body);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(td_append(t, "x.parquet", NULL, 0, &r, &e), MCDC_E_UNSUPPORTED);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

TEST(delta_concurrent_create_loser_proceeds) {
    char dir[64];
    td_mkdtemp(dir);
    /* the winner creates behind our back between our listing and our write:
     * simulated with the racing storage publishing a compatible version 0 */
    mcdc_delta_table *w = td_create(dir);
    char p[256];
    commit_path(p, sizeof p, dir, 0);
    static char body[1 << 16];
    const char *c0 = slurp(p);
    memcpy(body, c0 ? c0 : "", c0 ? strlen(c0) + 1 : 1);
    mcdc_delta_table_free(w);
    td_rmrf(dir);
    td_mkdtemp(dir);
    const char *bodies[] = {body};
    mcdc_delta_table *t = racing_table(dir, bodies, 1);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s = td_schema_simple();
    mcdc_delta_create_opts o = MCDC_DELTA_CREATE_OPTS_INIT;
    o.schema = s;
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(mcdc_delta_create(&r, t, &o, &e), MCDC_OK);
    CHECK(r.skipped);
    CHECK_EQ_INT(r.version, 0);
    commit_path(p, sizeof p, dir, 0);
    const char *now = slurp(p);
    CHECK(now && strcmp(now, body) == 0); /* the winner's commit is intact */
    CHECK_EQ_INT(td_append(t, "a.parquet", NULL, 0, &r, &e), MCDC_OK);
    mcdc_schema_unref(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

/* Fails the Nth allocation for every N through append, replay and checkpoint:
 * every failure is a clean error (no crash, no leak: the runner checks), and
 * retrying the same txn afterwards leaves exactly one commit per batch. */
TEST(delta_allocation_failures_are_clean_and_retry_is_exactly_once) {
    char dir[64];
    td_mkdtemp(dir);
    mcdc_delta_table_free(td_create(dir));
    int64_t batch = 0;
    int failures = 0;
    /* Allocations of one full round, to spread ~150 failure points over it. */
    int64_t calls_round;
    {
        mcdc_alloc_stats a, b;
        mcdc_alloc_get_stats(&a);
        mcdc_delta_table *t = NULL;
        mcdc_delta_commit_result r;
        mcdc_delta_snapshot *s = NULL;
        batch++;
        mcdc_delta_table_open(&t, dir, NULL, NULL);
        td_append(t, "b000.parquet", "app", batch, &r, NULL);
        mcdc_delta_snapshot_load(&s, t, -1, NULL);
        mcdc_delta_checkpoint(t, batch, NULL);
        mcdc_delta_snapshot_free(s);
        mcdc_delta_table_free(t);
        mcdc_alloc_get_stats(&b);
        calls_round = b.calls - a.calls;
    }
    int64_t step = calls_round / 150 > 0 ? calls_round / 150 : 1;
    for (int64_t nth = 1; nth <= calls_round; nth += step) {
        batch++;
        char path[64];
        snprintf(path, sizeof path, "b%03lld.parquet", (long long)batch);
        mcdc_delta_table *t = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_delta_commit_result r;
        mcdc_alloc_fail_at(nth);
        int rc = mcdc_delta_table_open(&t, dir, NULL, &e);
        if (rc == MCDC_OK) rc = td_append(t, path, "app", batch, &r, &e);
        mcdc_delta_snapshot *s = NULL;
        if (rc == MCDC_OK) rc = mcdc_delta_snapshot_load(&s, t, -1, &e);
        if (rc == MCDC_OK) rc = mcdc_delta_checkpoint(t, mcdc_delta_snapshot_version(s), &e);
        mcdc_alloc_fail_at(0);
        mcdc_delta_snapshot_free(s);
        mcdc_delta_table_free(t);
        if (rc != MCDC_OK) {
            failures++;
            if (rc != MCDC_E_NOMEM) CHECK_EQ_INT(rc, MCDC_E_NOMEM);
            CHECK(e.message[0] != 0);
        }
        /* the restart: same batch again, no injection */
        t = NULL;
        CHECK_EQ_INT(mcdc_delta_table_open(&t, dir, NULL, &e), MCDC_OK);
        CHECK_EQ_INT(td_append(t, path, "app", batch, &r, &e), MCDC_OK);
        mcdc_delta_table_free(t);
    }
    CHECK(failures > 100);
    mcdc_delta_table *t = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_table_open(&t, dir, NULL, &e);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    if (s) {
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s), batch);
        CHECK_EQ_INT(mcdc_delta_snapshot_version(s), batch);
        CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(s, "app"), batch);
    }
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    td_rmrf(dir);
}

/* Every storage call in turn fails once (the memory store's fault
 * injection); the log is never corrupted and the retry is exactly once. */
TEST(delta_io_failures_never_corrupt_the_log) {
    mcdc_storage_mem *mem = NULL;
    CHECK_EQ_INT(mcdc_storage_mem_create(&mem, "io", NULL), MCDC_OK);
    mcdc_delta_table_free(td_create_on(td_open_mem(mem, "t")));
    int64_t batch = 0;
    int failures = 0;
    const mcdc_log_sink *lvl = mcdc_log_use(&mcdc_test_quiet); /* failed checkpoints warn, as they should */
    for (int64_t nth = 1; nth <= 40; nth++) {
        batch++;
        char path[64];
        snprintf(path, sizeof path, "b%03lld.parquet", (long long)batch);
        mcdc_delta_table *t = td_open_mem(mem, "t");
        mcdc_storage_mem_fail_nth(mem, MCDC_STORAGE_OP_ANY, nth, MCDC_E_IO);
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_delta_commit_result r;
        int rc = td_append(t, path, "app", batch, &r, &e);
        mcdc_delta_snapshot *s = NULL;
        if (rc == MCDC_OK) rc = mcdc_delta_snapshot_load(&s, t, -1, &e);
        if (rc == MCDC_OK && batch % 3 == 0)
            rc = mcdc_delta_checkpoint(t, mcdc_delta_snapshot_version(s), &e);
        mcdc_delta_snapshot_free(s);
        if (rc != MCDC_OK) {
            failures++;
            CHECK(rc == MCDC_E_IO || rc == MCDC_E_CORRUPT);
            CHECK(strstr(e.message, "injected") != NULL || strstr(e.message, "_delta_log") != NULL);
        }
        mcdc_storage_mem_fail_nth(mem, MCDC_STORAGE_OP_ANY, 0, MCDC_OK);
        /* the restart on the same handle: same batch, exactly once */
        CHECK_EQ_INT(td_append(t, path, "app", batch, &r, &e), MCDC_OK);
        mcdc_delta_table_free(t);
    }
    mcdc_log_use(lvl);
    CHECK(failures > 5);
    mcdc_delta_table *t = td_open_mem(mem, "t");
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    if (s) {
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s), batch);
        CHECK_EQ_INT(mcdc_delta_snapshot_version(s), batch);
    }
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    mcdc_storage_mem_release(mem);
}

/* ---- on the memory storage --------------------------------------------------------- */

/* Appends batch n (txn "app", n) with its data file written first, as the lake
 * appender does: a failed commit deletes the file again. */
static int mem_append(mcdc_delta_table *t, int64_t n, mcdc_delta_commit_result *r,
                      mcdc_error *e) {
    char path[64], blob[100];
    snprintf(path, sizeof path, "part-%05lld.parquet", (long long)n);
    memset(blob, 'p', sizeof blob);
    mcdc_storage *st = mcdc_delta_table_storage(t);
    int rc = mcdc_storage_put(st, path, blob, sizeof blob, e); /* td_append says 100 bytes */
    if (rc) return rc;
    rc = td_append(t, path, "app", n, r, e);
    if (rc) mcdc_storage_delete(st, path, NULL);
    return rc;
}

/* The latest snapshot of a fresh handle on the store is whole: version v,
 * v files all present (no orphan referenced), txn v. Returns v. */
static int64_t mem_check_consistent(mcdc_storage_mem *m) {
    mcdc_delta_table *t = td_open_mem(m, "t");
    mcdc_delta_snapshot *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_delta_snapshot_load(&s, t, -1, &e);
    if (rc) fprintf(stderr, "replay: %s\n", e.message);
    CHECK_EQ_INT(rc, MCDC_OK);
    int64_t v = s ? mcdc_delta_snapshot_version(s) : -1;
    if (s) {
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s), v);
        CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(s, "app"), v);
        rc = mcdc_delta_snapshot_verify_files(s, t, &e);
        if (rc) fprintf(stderr, "verify: %s\n", e.message);
        CHECK_EQ_INT(rc, MCDC_OK);
    }
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    return v;
}

/* A store holding table "t" at version 9 (appends 1..9): the next append
 * is due for a checkpoint (delta.checkpointInterval 10). */
static mcdc_storage_mem *mem_table_at_9(void) {
    mcdc_storage_mem *m = NULL;
    mcdc_storage_mem_create(&m, "lake", NULL);
    mcdc_delta_table *t = td_create_on(td_open_mem(m, "t"));
    mcdc_delta_commit_result r;
    for (int64_t n = 1; n <= 9; n++) CHECK_EQ_INT(mem_append(t, n, &r, NULL), MCDC_OK);
    mcdc_delta_table_free(t);
    return m;
}

TEST(delta_on_memory_storage_create_append_replay_checkpoint) {
    mcdc_storage_mem *m = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_mem_create(&m, "lake", &e), MCDC_OK);
    mcdc_storage_env env = mcdc_storage_mem_env(m);
    mcdc_delta_table *t = NULL;
    /* by name under a memory warehouse, through the env */
    CHECK_EQ_INT(mcdc_delta_table_open_env(&t, &env, "bronze.orders", "mem://lake/wh", &e),
                 MCDC_OK);
    CHECK_EQ_STR(t ? mcdc_delta_table_location(t) : NULL, "mem://lake/wh/bronze.db/orders");
    mcdc_delta_table *no_env = NULL;
    CHECK_EQ_INT(mcdc_delta_table_open(&no_env, "mem://lake/x", NULL, &e), MCDC_E_NOTFOUND);
    CHECK(no_env == NULL);
    t = td_create_on(t);
    CHECK(t != NULL);
    mcdc_delta_commit_result r;
    for (int64_t n = 1; n <= 12; n++) CHECK_EQ_INT(mem_append(t, n, &r, &e), MCDC_OK);
    CHECK_EQ_INT(r.version, 12);
    mcdc_storage *st = mcdc_delta_table_storage(t);
    int64_t size = 0;
    CHECK_EQ_INT(mcdc_storage_size(st, "_delta_log/00000000000000000010.checkpoint.parquet",
                                   &size, &e),
                 MCDC_OK);
    mcdc_buf last = {0};
    CHECK_EQ_INT(mcdc_storage_get(st, "_delta_log/_last_checkpoint", 4096, &last, &e), MCDC_OK);
    CHECK(last.len > 12 && memcmp(last.data, "{\"version\":10,", 14) == 0);
    mcdc_buf_free(&last);
    mcdc_delta_table_free(t);
    /* a fresh handle replays from the checkpoint: JSON 0..9 may be gone */
    char key[64];
    for (int v = 0; v <= 9; v++) {
        snprintf(key, sizeof key, "wh/bronze.db/orders/_delta_log/%020d.json", v);
        CHECK_EQ_INT(mcdc_storage_mem_drop(m, key, &e), MCDC_OK);
    }
    int64_t gets = mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET);
    int64_t ranges = mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET_RANGE);
    int64_t lists = mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_LIST);
    CHECK_EQ_INT(mcdc_delta_table_open_env(&t, &env, "mem://lake/wh/bronze.db/orders", NULL, &e),
                 MCDC_OK);
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    /* a small checkpoint is one whole get, not one ranged read per column
     * chunk: _last_checkpoint, the checkpoint and 2 commits, the log listed
     * once (each is a round trip on an object store) */
    CHECK_EQ_INT(mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET) - gets, 4);
    CHECK_EQ_INT(mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_GET_RANGE) - ranges, 0);
    CHECK_EQ_INT(mcdc_storage_mem_calls(m, MCDC_STORAGE_OP_LIST) - lists, 1);
    if (s) {
        CHECK_EQ_INT(mcdc_delta_snapshot_version(s), 12);
        CHECK_EQ_INT(mcdc_delta_snapshot_file_count(s), 12);
        CHECK_EQ_INT(mcdc_delta_snapshot_txn_version(s, "app"), 12);
        CHECK_EQ_INT(mcdc_delta_snapshot_verify_files(s, t, &e), MCDC_OK);
    }
    mcdc_delta_snapshot_free(s);
    /* the txn rule skips a retried append */
    CHECK_EQ_INT(td_append(t, "part-00012.parquet", "app", 12, &r, &e), MCDC_OK);
    CHECK(r.skipped);
    mcdc_delta_table_free(t);
    mcdc_storage_mem_release(m);
}

/* A writer whose cached snapshot is behind loses the race for version 10 to
 * another handle that committed the same txn: its append is skipped, and its
 * cache then holds the winner's file (the caller reads the winner's rows
 * next: the backfill's plan). A winner of another txn is absorbed the same
 * way before the loser's own commit goes in after it. */
TEST(delta_a_writer_that_lost_the_race_sees_the_winners_files) {
    mcdc_storage_mem *m = mem_table_at_9();
    mcdc_delta_table *winner = td_open_mem(m, "t"), *loser = td_open_mem(m, "t");
    mcdc_delta_table_keep_snapshot(loser); /* trusts its cache: no read before the put */
    mcdc_error e = MCDC_ERROR_INIT;
    const mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_table_latest(&s, loser, &e), MCDC_OK);
    CHECK(s != NULL && mcdc_delta_snapshot_version(s) == 9);
    CHECK_EQ_INT(s ? mcdc_delta_snapshot_file_count(s) : 0, 9);
    mcdc_delta_commit_result r;
    CHECK_EQ_INT(mem_append(winner, 10, &r, &e), MCDC_OK);
    CHECK(!r.skipped && r.version == 10);
    CHECK_EQ_INT(td_append(loser, "part-00010-lost.parquet", "app", 10, &r, &e), MCDC_OK);
    CHECK(r.skipped && r.version == 10 && r.attempts == 1);
    CHECK_EQ_INT(mcdc_delta_table_latest(&s, loser, &e), MCDC_OK);
    CHECK(s != NULL && mcdc_delta_snapshot_version(s) == 10);
    CHECK_EQ_INT(s ? mcdc_delta_snapshot_file_count(s) : 0, 10);
    bool found = false;
    for (size_t i = 0; s && i < mcdc_delta_snapshot_file_count(s); i++)
        found = found || strcmp(mcdc_delta_snapshot_file(s, i)->path, "part-00010.parquet") == 0;
    CHECK(found);
    /* another txn wins 11; the loser's 12 goes in after it, both files live */
    CHECK_EQ_INT(td_append(winner, "part-00011.parquet", "other", 0, &r, &e), MCDC_OK);
    CHECK(!r.skipped && r.version == 11);
    CHECK_EQ_INT(td_append(loser, "part-00012.parquet", "app", 12, &r, &e), MCDC_OK);
    CHECK(!r.skipped && r.version == 12 && r.attempts == 2);
    CHECK_EQ_INT(mcdc_delta_table_latest(&s, loser, &e), MCDC_OK);
    CHECK_EQ_INT(s ? mcdc_delta_snapshot_file_count(s) : 0, 12);
    mcdc_delta_table_free(winner);
    mcdc_delta_table_free(loser);
    mcdc_storage_mem_release(m);
}

/* Fails the Nth storage call of an append due for a checkpoint, for N = 1,
 * 2, ... until the append goes through untouched. Each failure is a clean
 * injected I/O error; afterwards the table replays whole (the commit is there
 * with its data file, or not at all), and the retried append is written
 * once: skipped by the txn rule when the first one made it. */
TEST(delta_every_storage_failure_of_an_append_with_checkpoint_due_is_clean) {
    /* a failed checkpoint or read-back warns */
    const mcdc_log_sink *lvl = mcdc_log_use(&mcdc_test_quiet);
    int failures = 0, committed_despite = 0;
    bool done = false;
    for (int64_t nth = 1; nth < 1000 && !done; nth++) {
        mcdc_storage_mem *m = mem_table_at_9();
        mcdc_delta_table *t = td_open_mem(m, "t");
        mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, nth, MCDC_E_IO);
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_delta_commit_result r;
        int rc = mem_append(t, 10, &r, &e);
        bool fired = mcdc_storage_mem_fault_fired(m);
        mcdc_storage_mem_fail_nth(m, MCDC_STORAGE_OP_ANY, 0, MCDC_OK);
        mcdc_delta_table_free(t);
        bool clean = rc ? fired && rc == MCDC_E_IO && strstr(e.message, "injected") != NULL
                        : r.version == 10 && !r.skipped;
        if (!clean) fprintf(stderr, "nth %lld: rc %d, %s\n", (long long)nth, rc, e.message);
        CHECK(clean);
        int64_t v = mem_check_consistent(m);
        /* wholly there (OK) or not at all (an error): never reported failed
         * once published, so the caller's cleanup never deletes live files */
        CHECK_EQ_INT(v, rc == MCDC_OK ? 10 : 9);
        if (rc == MCDC_OK && fired) committed_despite++; /* e.g. the checkpoint failed */
        if (rc) {
            failures++;
            int64_t sz;
            CHECK_EQ_INT(mcdc_storage_size(mcdc_delta_table_storage(t = td_open_mem(m, "t")),
                                           "part-00010.parquet", &sz, NULL),
                         MCDC_E_NOTFOUND); /* its data file was removed */
            mcdc_delta_table_free(t);
        }
        /* the restart retries the batch: exactly once */
        t = td_open_mem(m, "t");
        CHECK_EQ_INT(mem_append(t, 10, &r, &e), MCDC_OK);
        CHECK_EQ_INT(r.skipped, rc == MCDC_OK);
        mcdc_delta_table_free(t);
        CHECK_EQ_INT(mem_check_consistent(m), 10);
        done = rc == MCDC_OK && !fired;
        mcdc_storage_mem_release(m);
        if (!clean) break;
    }
    mcdc_log_use(lvl);
    CHECK(done);
    CHECK(failures > 10);
    CHECK(committed_despite > 0);
}

/* Writes that returned OK disappear later (a backup restored from before
 * them), newest first: the table still replays whole at the version left,
 * and the retried append brings it back to 10 exactly once. */
TEST(delta_lost_writes_after_the_fact_replay_consistently) {
    /* the append of 10 wrote: data file, commit 10, checkpoint, _last_checkpoint */
    for (int lost = 1; lost <= 4; lost++) {
        mcdc_storage_mem *m = mem_table_at_9();
        mcdc_delta_table *t = td_open_mem(m, "t");
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_delta_commit_result r;
        CHECK_EQ_INT(mem_append(t, 10, &r, &e), MCDC_OK);
        mcdc_delta_table_free(t);
        CHECK_EQ_INT(mcdc_storage_mem_lose_last(m, lost, &e), MCDC_OK);
        CHECK_EQ_INT(mem_check_consistent(m), lost <= 2 ? 10 : 9);
        t = td_open_mem(m, "t");
        CHECK_EQ_INT(mem_append(t, 10, &r, &e), MCDC_OK);
        CHECK_EQ_INT(r.skipped, lost <= 2);
        mcdc_delta_table_free(t);
        CHECK_EQ_INT(mem_check_consistent(m), 10);
        mcdc_storage_mem_release(m);
    }
    /* a lost data file the log still names is found by verification */
    mcdc_storage_mem *m = mem_table_at_9();
    mcdc_error e = MCDC_ERROR_INIT;
    CHECK_EQ_INT(mcdc_storage_mem_drop(m, "t/part-00004.parquet", &e), MCDC_OK);
    mcdc_delta_table *t = td_open_mem(m, "t");
    mcdc_delta_snapshot *s = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&s, t, -1, &e), MCDC_OK);
    CHECK_EQ_INT(s ? mcdc_delta_snapshot_verify_files(s, t, &e) : -1, MCDC_E_NOTFOUND);
    CHECK(strstr(e.message, "part-00004.parquet") != NULL);
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    mcdc_storage_mem_release(m);
}
