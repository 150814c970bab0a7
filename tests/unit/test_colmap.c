/* test_colmap.c - Delta column mapping (mode "name") written by the delta
 * and lake modules: create, append, evolve, replay, read back. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_delta.h"
#include "mcdc_lake.h"
#include "mcdc_parquet.h"
#include "mcdc_tables.h"
#include "mcdc_test.h"

static char *cm_tmpdir(void) {
    char tmpl[] = "/tmp/mcdc_colmap_XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static void cm_rmrf(char *d) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", d);
    free(d);
}

/* id long NOT NULL, "Qty (kg)" double, "a,b" string, ts timestamp_ntz */
static mcdc_schema *cm_schema(bool with_extra) {
    mcdc_schema *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_schema_create(&s, with_extra ? 5 : 4, &e)) return NULL;
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, false, &e);
    mcdc_schema_set(s, 1, "Qty (kg)", MCDC_TYPE_DOUBLE, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 2, "a,b", MCDC_TYPE_UTF8, 0, 0, 0, true, &e);
    mcdc_schema_set(s, 3, "ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, &e);
    if (with_extra) mcdc_schema_set(s, 4, "x y", MCDC_TYPE_INT32, 0, 0, 0, true, &e);
    return s;
}

static mcdc_schema *plain_schema(void) {
    mcdc_schema *s = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_schema_create(&s, 2, &e)) return NULL;
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, false, &e);
    mcdc_schema_set(s, 1, "qty", MCDC_TYPE_DOUBLE, 0, 0, 0, true, &e);
    return s;
}

/* rows id0..id0+n-1; Qty = id * 1.5; a,b = "v<id>"; ts = id s; x y = id * 10 */
static mcdc_batch *cm_rows(mcdc_schema *s, int64_t id0, int n) {
    mcdc_batch *b = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_batch_create(&b, s, n, &e)) return NULL;
    for (int i = 0; i < n; i++) {
        int64_t id = id0 + i;
        char txt[32];
        snprintf(txt, sizeof txt, "v%lld", (long long)id);
        mcdc_cell c[5] = {mcdc_cell_int(id), mcdc_cell_double((double)id * 1.5),
                          mcdc_cell_text(txt), mcdc_cell_int(id * 1000000), mcdc_cell_int(id * 10)};
        if (s->n_fields == 2) c[1] = mcdc_cell_double((double)id * 1.5);
        mcdc_row_append(b, c, &e);
    }
    mcdc_batch_seal(b, &e);
    return b;
}

static int append_batch(mcdc_table *t, const mcdc_batch *b, const mcdc_table_props *props,
                        mcdc_error *e) {
    mcdc_appender *a = NULL;
    int rc = mcdc_appender_open(&a, t, b->schema, props, e);
    if (rc == MCDC_OK) rc = mcdc_appender_write(a, b, e);
    bool skipped = false;
    int64_t v = -1;
    if (rc == MCDC_OK) rc = mcdc_appender_commit(a, NULL, 0, NULL, &skipped, &v, e);
    mcdc_appender_free(a);
    return rc;
}

static int append_rows(mcdc_table *t, mcdc_schema *s, int64_t id0, int n,
                       const mcdc_table_props *props, mcdc_error *e) {
    mcdc_batch *b = cm_rows(s, id0, n);
    if (b == NULL) return mcdc_error_set(e, MCDC_E_NOMEM, "test rows");
    int rc = append_batch(t, b, props, e);
    mcdc_batch_free(b);
    return rc;
}

static bool list_has(const char *json_list_holder, const char *key, const char *name) {
    const char *p = strstr(json_list_holder, key);
    if (p == NULL) return false;
    const char *end = strchr(p, ']');
    const char *q = strstr(p, name);
    return q != NULL && end != NULL && q < end;
}

/* The first data file of the table (a *.parquet in its root), as a path. */
static bool first_parquet(const char *dir, char *out, size_t n) {
    DIR *d = opendir(dir);
    if (d == NULL) return false;
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l > 8 && strcmp(de->d_name + l - 8, ".parquet") == 0) {
            snprintf(out, n, "%s/%s", dir, de->d_name);
            found = true;
        }
    }
    closedir(d);
    return found;
}

TEST(colmap_lake_creates_mapped_table_and_reads_back_logical_names) {
    char *d = cm_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/bronze", d);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    mcdc_schema *s = cm_schema(false);
    CHECK_EQ_INT(append_rows(t, s, 1, 3, NULL, &e), MCDC_OK);

    mcdc_delta_table *dt = NULL;
    CHECK_EQ_INT(mcdc_delta_table_open(&dt, path, NULL, &e), MCDC_OK);
    mcdc_delta_snapshot *snap = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, dt, -1, &e), MCDC_OK);
    int32_t r = 0, w = 0;
    mcdc_delta_snapshot_protocol(snap, &r, &w);
    CHECK_EQ_INT(r, 3);
    CHECK_EQ_INT(w, 7);
    CHECK(mcdc_delta_snapshot_has_feature(snap, "columnMapping"));
    CHECK(mcdc_delta_snapshot_has_feature(snap, "timestampNtz"));
    CHECK(mcdc_delta_snapshot_column_mapping(snap));
    CHECK_EQ_STR(mcdc_delta_snapshot_config(snap, "delta.columnMapping.maxColumnId"), "4");
    mcdc_schema *got = NULL;
    mcdc_delta_field_meta *meta = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_schema(&got, &meta, snap, &e), MCDC_OK);
    CHECK_EQ_INT(got->n_fields, 4);
    for (int32_t i = 0; i < 4; i++) {
        CHECK_EQ_STR(got->fields[i].name, s->fields[i].name);
        CHECK_EQ_INT(meta[i].column_id, i + 1);
        CHECK(meta[i].physical_name != NULL && strncmp(meta[i].physical_name, "col-", 4) == 0);
        CHECK_EQ_INT(strlen(meta[i].physical_name), 40);
    }
    CHECK(strcmp(meta[0].physical_name, meta[1].physical_name) != 0);
    /* stats name the physical columns */
    CHECK_EQ_INT(mcdc_delta_snapshot_file_count(snap), 1);
    const mcdc_delta_file *f = mcdc_delta_snapshot_file(snap, 0);
    CHECK(f->stats_json != NULL && strstr(f->stats_json, meta[1].physical_name) != NULL);
    CHECK(strstr(f->stats_json, "Qty") == NULL);
    CHECK_EQ_INT(mcdc_delta_snapshot_total_records(snap), 3);
    /* the Parquet file names its columns physically */
    char pq[1200];
    CHECK(first_parquet(path, pq, sizeof pq));
    mcdc_parquet_reader *pr = NULL;
    CHECK_EQ_INT(mcdc_parquet_reader_open_path(&pr, pq, NULL, &e), MCDC_OK);
    const mcdc_schema *fs = NULL;
    CHECK_EQ_INT(mcdc_parquet_reader_schema(&fs, pr, &e), MCDC_OK);
    for (int32_t i = 0; fs && i < 4; i++) CHECK_EQ_STR(fs->fields[i].name, meta[i].physical_name);
    mcdc_parquet_reader_free(pr);
    mcdc_delta_field_meta_free(meta, got->n_fields);
    mcdc_schema_unref(got);
    mcdc_delta_snapshot_free(snap);
    mcdc_delta_table_free(dt);

    /* read back under the logical names */
    mcdc_batch *all = NULL;
    int64_t v = -1;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &v, &e), MCDC_OK);
    CHECK(all != NULL);
    if (all) {
        CHECK_EQ_INT(all->rows, 3);
        CHECK_EQ_STR(all->schema->fields[1].name, "Qty (kg)");
        CHECK_EQ_INT(all->columns[1].null_count, 0);
        mcdc_cell q = mcdc_row_get(all, 2, 1);
        CHECK(q.kind == MCDC_CELL_DOUBLE && q.d == 4.5);
        mcdc_cell ab = mcdc_row_get(all, 0, 2);
        CHECK(ab.kind == MCDC_CELL_TEXT && ab.i == 2 && memcmp(ab.s, "v1", 2) == 0);
    }
    mcdc_batch_free(all);
    mcdc_schema_unref(s);
    mcdc_table_close(t);
    cm_rmrf(d);
}

TEST(colmap_evolution_assigns_next_id_and_keeps_physical_names) {
    char *d = cm_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/bronze", d);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    /* a checkpoint every 2 versions: the replay goes through one */
    const char *conf[] = {"delta.checkpointInterval=2", NULL};
    mcdc_table_props props = {.configuration = conf};
    mcdc_schema *s4 = cm_schema(false), *s5 = cm_schema(true);
    CHECK_EQ_INT(append_rows(t, s4, 1, 2, &props, &e), MCDC_OK);
    mcdc_delta_table *dt = NULL;
    CHECK_EQ_INT(mcdc_delta_table_open(&dt, path, NULL, &e), MCDC_OK);
    mcdc_delta_snapshot *snap = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, dt, -1, &e), MCDC_OK);
    mcdc_schema *before = NULL;
    mcdc_delta_field_meta *m0 = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_schema(&before, &m0, snap, &e), MCDC_OK);
    mcdc_delta_snapshot_free(snap);

    CHECK_EQ_INT(append_rows(t, s5, 10, 2, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(append_rows(t, s4, 20, 1, NULL, &e), MCDC_OK); /* old writer: x y NULL */
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, dt, -1, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_delta_snapshot_version(snap), 3); /* create + 3 appends */
    CHECK_EQ_STR(mcdc_delta_snapshot_config(snap, "delta.columnMapping.maxColumnId"), "5");
    mcdc_schema *after = NULL;
    mcdc_delta_field_meta *m1 = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_schema(&after, &m1, snap, &e), MCDC_OK);
    CHECK_EQ_INT(after->n_fields, 5);
    for (int32_t i = 0; i < 4; i++) {
        CHECK_EQ_STR(m1[i].physical_name, m0[i].physical_name);
        CHECK_EQ_INT(m1[i].column_id, m0[i].column_id);
    }
    CHECK_EQ_STR(after->fields[4].name, "x y");
    CHECK_EQ_INT(m1[4].column_id, 5);
    CHECK(m1[4].physical_name && strncmp(m1[4].physical_name, "col-", 4) == 0);
    CHECK(after->fields[4].nullable);
    mcdc_delta_snapshot_free(snap);

    /* a fresh replay (through the checkpoint of version 2) maps names back */
    mcdc_batch *all = NULL;
    int64_t v = -1;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &v, &e), MCDC_OK);
    CHECK_EQ_INT(v, 3);
    CHECK(all != NULL);
    if (all) {
        CHECK_EQ_INT(all->rows, 5);
        int64_t sum_x = 0, nulls_x = 0;
        double sum_q = 0;
        for (int64_t r = 0; r < all->rows; r++) {
            mcdc_cell x = mcdc_row_get(all, r, 4);
            if (x.kind == MCDC_CELL_NULL) nulls_x++;
            else sum_x += x.i;
            sum_q += mcdc_row_get(all, r, 1).d;
        }
        CHECK_EQ_INT(nulls_x, 3);
        CHECK_EQ_INT(sum_x, 100 + 110);
        CHECK(sum_q == 1.5 * (1 + 2 + 10 + 11 + 20));
    }
    mcdc_batch_free(all);
    mcdc_delta_field_meta_free(m0, before->n_fields);
    mcdc_delta_field_meta_free(m1, after->n_fields);
    mcdc_schema_unref(before);
    mcdc_schema_unref(after);
    mcdc_delta_table_free(dt);
    mcdc_schema_unref(s4);
    mcdc_schema_unref(s5);
    mcdc_table_close(t);
    cm_rmrf(d);
}

TEST(colmap_plain_names_stay_unmapped) {
    char *d = cm_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/plain", d);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    mcdc_schema *s = plain_schema();
    CHECK_EQ_INT(append_rows(t, s, 1, 2, NULL, &e), MCDC_OK);
    mcdc_delta_table *dt = NULL;
    CHECK_EQ_INT(mcdc_delta_table_open(&dt, path, NULL, &e), MCDC_OK);
    mcdc_delta_snapshot *snap = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, dt, -1, &e), MCDC_OK);
    int32_t r = 0, w = 0;
    mcdc_delta_snapshot_protocol(snap, &r, &w);
    CHECK_EQ_INT(r, 1);
    CHECK_EQ_INT(w, 2);
    CHECK(!mcdc_delta_snapshot_column_mapping(snap));
    CHECK(strstr(mcdc_delta_snapshot_schema_string(snap), "columnMapping") == NULL);
    mcdc_delta_snapshot_free(snap);
    mcdc_delta_table_free(dt);
    mcdc_schema_unref(s);
    mcdc_table_close(t);
    cm_rmrf(d);
}

TEST(colmap_unmapped_table_receiving_such_a_column_is_a_schema_error) {
    char *d = cm_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/plain", d);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    mcdc_schema *s = plain_schema();
    CHECK_EQ_INT(append_rows(t, s, 1, 2, NULL, &e), MCDC_OK);
    mcdc_schema *s3 = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s3, 3, &e), MCDC_OK);
    mcdc_schema_set(s3, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, false, &e);
    mcdc_schema_set(s3, 1, "qty", MCDC_TYPE_DOUBLE, 0, 0, 0, true, &e);
    mcdc_schema_set(s3, 2, "Qty (kg)", MCDC_TYPE_DOUBLE, 0, 0, 0, true, &e);
    CHECK_EQ_INT(append_rows(t, s3, 5, 1, NULL, &e), MCDC_E_SCHEMA);
    char want[900];
    snprintf(want, sizeof want,
             "ALTER TABLE delta.`%s` SET TBLPROPERTIES ('delta.columnMapping.mode'='name', "
             "'delta.minReaderVersion'='2', 'delta.minWriterVersion'='5')",
             path);
    CHECK(strstr(e.message, want) != NULL);
    CHECK(strstr(e.message, "'Qty (kg)'") != NULL);
    /* nothing was committed, the table still holds 2 rows */
    mcdc_batch *all = NULL;
    int64_t v = -1;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &v, &e), MCDC_OK);
    CHECK_EQ_INT(v, 1);
    CHECK(all && all->rows == 2 && all->schema->n_fields == 2);
    mcdc_batch_free(all);
    mcdc_table_close(t);
    /* a table given by name is named as given */
    CHECK_EQ_INT(mcdc_table_open(&t, "bronze.orders", d, &e), MCDC_OK);
    CHECK_EQ_INT(append_rows(t, s, 1, 1, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(append_rows(t, s3, 5, 1, NULL, &e), MCDC_E_SCHEMA);
    CHECK(strstr(e.message, "ALTER TABLE bronze.orders SET TBLPROPERTIES ('delta.columnMapping."
                            "mode'='name', 'delta.minReaderVersion'='2', "
                            "'delta.minWriterVersion'='5')") != NULL);
    mcdc_table_close(t);
    mcdc_schema_unref(s);
    mcdc_schema_unref(s3);
    cm_rmrf(d);
}

TEST(colmap_delta_create_without_ntz_is_2_5_and_upgrades_to_3_7) {
    char *d = cm_tmpdir();
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_table *dt = NULL;
    CHECK_EQ_INT(mcdc_delta_table_open(&dt, d, NULL, &e), MCDC_OK);
    mcdc_schema *s = plain_schema();
    const char *keys[] = {"delta.columnMapping.mode"}, *vals[] = {"name"};
    const char *phys[] = {"p_id", NULL};
    mcdc_delta_create_opts co = MCDC_DELTA_CREATE_OPTS_INIT;
    co.schema = s;
    co.config_keys = keys;
    co.config_values = vals;
    co.n_config = 1;
    co.physical_names = phys;
    mcdc_delta_commit_result res;
    CHECK_EQ_INT(mcdc_delta_create(&res, dt, &co, &e), MCDC_OK);
    mcdc_delta_snapshot *snap = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, dt, -1, &e), MCDC_OK);
    int32_t r = 0, w = 0;
    mcdc_delta_snapshot_protocol(snap, &r, &w);
    CHECK_EQ_INT(r, 2);
    CHECK_EQ_INT(w, 5);
    CHECK_EQ_STR(mcdc_delta_snapshot_config(snap, "delta.columnMapping.maxColumnId"), "2");
    mcdc_schema *got = NULL;
    mcdc_delta_field_meta *meta = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_schema(&got, &meta, snap, &e), MCDC_OK);
    CHECK_EQ_STR(meta[0].physical_name, "p_id");
    CHECK(meta[1].physical_name && strncmp(meta[1].physical_name, "col-", 4) == 0);
    mcdc_delta_field_meta_free(meta, got->n_fields);
    mcdc_schema_unref(got);
    mcdc_delta_snapshot_free(snap);

    /* adding a timestamp_ntz column moves to (3,7) keeping columnMapping */
    mcdc_schema *s3 = NULL;
    CHECK_EQ_INT(mcdc_schema_create(&s3, 3, &e), MCDC_OK);
    mcdc_schema_set(s3, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, false, &e);
    mcdc_schema_set(s3, 1, "qty", MCDC_TYPE_DOUBLE, 0, 0, 0, true, &e);
    mcdc_schema_set(s3, 2, "at (utc)", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, &e);
    const char *phys3[] = {"ignored", "ignored", "p_at"};
    mcdc_delta_append_opts ao = MCDC_DELTA_APPEND_OPTS_INIT;
    ao.schema = s3;
    ao.physical_names = phys3;
    CHECK_EQ_INT(mcdc_delta_append(&res, dt, &ao, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, dt, -1, &e), MCDC_OK);
    mcdc_delta_snapshot_protocol(snap, &r, &w);
    CHECK_EQ_INT(r, 3);
    CHECK_EQ_INT(w, 7);
    CHECK(mcdc_delta_snapshot_has_feature(snap, "columnMapping"));
    CHECK(mcdc_delta_snapshot_has_feature(snap, "timestampNtz"));
    CHECK_EQ_STR(mcdc_delta_snapshot_config(snap, "delta.columnMapping.maxColumnId"), "3");
    CHECK_EQ_INT(mcdc_delta_snapshot_schema(&got, &meta, snap, &e), MCDC_OK);
    CHECK_EQ_STR(meta[0].physical_name, "p_id");
    CHECK_EQ_STR(meta[2].physical_name, "p_at");
    CHECK_EQ_INT(meta[2].column_id, 3);
    mcdc_delta_field_meta_free(meta, got->n_fields);
    mcdc_schema_unref(got);
    mcdc_delta_snapshot_free(snap);
    /* the commit's protocol action lists the legacy writer features too */
    char p1[700];
    snprintf(p1, sizeof p1, "%s/_delta_log/00000000000000000001.json", d);
    FILE *fp = fopen(p1, "r");
    static char buf[1 << 14];
    size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
    if (fp) fclose(fp);
    buf[n] = 0;
    CHECK(list_has(buf, "\"readerFeatures\"", "\"columnMapping\""));
    CHECK(list_has(buf, "\"writerFeatures\"", "\"columnMapping\""));
    CHECK(list_has(buf, "\"writerFeatures\"", "\"invariants\""));
    /* mode "id" cannot be created */
    mcdc_delta_table *dt2 = NULL;
    char d2[700];
    snprintf(d2, sizeof d2, "%s/other", d);
    CHECK_EQ_INT(mcdc_delta_table_open(&dt2, d2, NULL, &e), MCDC_OK);
    vals[0] = "id";
    CHECK_EQ_INT(mcdc_delta_create(&res, dt2, &co, &e), MCDC_E_UNSUPPORTED);
    mcdc_delta_table_free(dt2);
    mcdc_schema_unref(s);
    mcdc_schema_unref(s3);
    mcdc_delta_table_free(dt);
    cm_rmrf(d);
}

TEST(colmap_name_rule_matches_the_reference) {
    const char *yes[] = {"Qty (kg)", "a,b", "a;b", "{x}", "a=b", "tab\there", "nl\nx", "a b"};
    const char *no[] = {"qty", "Qty_kg", "a.b", "a-b", "ÄÖ", "x#1"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        CHECK(mcdc_delta_name_needs_column_mapping(yes[i]));
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CHECK(!mcdc_delta_name_needs_column_mapping(no[i]));
    char a[MCDC_DELTA_PHYSICAL_NAME_LEN], b[MCDC_DELTA_PHYSICAL_NAME_LEN];
    mcdc_delta_physical_name_new(a);
    mcdc_delta_physical_name_new(b);
    CHECK_EQ_INT(strlen(a), 40);
    CHECK(strncmp(a, "col-", 4) == 0 && strcmp(a, b) != 0);
}

TEST(colmap_concurrent_evolution_under_our_files_is_a_conflict) {
    char *d = cm_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/bronze", d);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    mcdc_schema *s4 = cm_schema(false), *s5 = cm_schema(true);
    CHECK_EQ_INT(append_rows(t, s4, 1, 1, NULL, &e), MCDC_OK);
    /* we write files naming "x y" physically, then another writer adds it */
    mcdc_batch *b = cm_rows(s5, 50, 2);
    mcdc_appender *a = NULL;
    CHECK_EQ_INT(mcdc_appender_open(&a, t, s5, NULL, &e), MCDC_OK);
    CHECK_EQ_INT(mcdc_appender_write(a, b, &e), MCDC_OK);
    CHECK_EQ_INT(append_rows(t, s5, 60, 1, NULL, &e), MCDC_OK);
    bool skipped = false;
    int64_t v = -1;
    CHECK_EQ_INT(mcdc_appender_commit(a, NULL, 0, NULL, &skipped, &v, &e), MCDC_E_CONFLICT);
    CHECK(strstr(e.message, "retry") != NULL);
    mcdc_appender_free(a);
    mcdc_batch_free(b);
    /* the table holds the other writer's rows only, all readable */
    mcdc_batch *all = NULL;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &v, &e), MCDC_OK);
    CHECK(all != NULL && all->rows == 2);
    if (all) CHECK(mcdc_row_get(all, 1, 4).i == 600 || mcdc_row_get(all, 0, 4).i == 600);
    mcdc_batch_free(all);
    mcdc_schema_unref(s4);
    mcdc_schema_unref(s5);
    mcdc_table_close(t);
    cm_rmrf(d);
}

TEST(colmap_mode_none_in_props_refuses_such_names_before_writing) {
    char *d = cm_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/bronze", d);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_table *t = NULL;
    CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
    const char *conf[] = {"delta.columnMapping.mode=none", NULL};
    mcdc_table_props props = {.configuration = conf};
    mcdc_schema *s4 = cm_schema(false);
    CHECK_EQ_INT(append_rows(t, s4, 1, 1, &props, &e), MCDC_E_INVALID);
    CHECK(strstr(e.message, "Qty (kg)") != NULL);
    bool exists = true;
    CHECK_EQ_INT(mcdc_table_exists(t, &exists, &e), MCDC_OK);
    CHECK(!exists);
    /* plain names with an explicit mode=name are mapped too */
    const char *conf2[] = {"delta.columnMapping.mode=name", NULL};
    props.configuration = conf2;
    mcdc_schema *p = plain_schema();
    CHECK_EQ_INT(append_rows(t, p, 1, 2, &props, &e), MCDC_OK);
    mcdc_delta_table *dt = NULL;
    CHECK_EQ_INT(mcdc_delta_table_open(&dt, path, NULL, &e), MCDC_OK);
    mcdc_delta_snapshot *snap = NULL;
    CHECK_EQ_INT(mcdc_delta_snapshot_load(&snap, dt, -1, &e), MCDC_OK);
    CHECK(mcdc_delta_snapshot_column_mapping(snap));
    int32_t r = 0, w = 0;
    mcdc_delta_snapshot_protocol(snap, &r, &w);
    CHECK(r == 2 && w == 5);
    mcdc_delta_snapshot_free(snap);
    mcdc_delta_table_free(dt);
    mcdc_batch *all = NULL;
    int64_t v = -1;
    CHECK_EQ_INT(mcdc_table_read_all(t, &all, &v, &e), MCDC_OK);
    CHECK(all && all->rows == 2 && mcdc_row_get(all, 1, 1).d == 3.0);
    mcdc_batch_free(all);
    mcdc_schema_unref(p);
    mcdc_schema_unref(s4);
    mcdc_table_close(t);
    cm_rmrf(d);
}

/* One round: create a mapped table, evolve it, read it back. */
static int colmap_round(const char *path, const mcdc_batch *b4, const mcdc_batch *b5,
                        int64_t *rows, mcdc_error *e) {
    mcdc_table *t = NULL;
    *rows = -1;
    int rc = mcdc_table_open(&t, path, NULL, e);
    if (rc == MCDC_OK) rc = append_batch(t, b4, NULL, e);
    if (rc == MCDC_OK) rc = append_batch(t, b5, NULL, e);
    mcdc_batch *all = NULL;
    int64_t v = -1;
    if (rc == MCDC_OK) rc = mcdc_table_read_all(t, &all, &v, e);
    if (rc == MCDC_OK && all) *rows = all->rows;
    mcdc_batch_free(all);
    mcdc_table_close(t);
    return rc;
}

TEST(colmap_every_allocation_failure_is_nomem_and_leaves_a_readable_table) {
    mcdc_schema *s4 = cm_schema(false), *s5 = cm_schema(true);
    mcdc_batch *b4 = cm_rows(s4, 1, 2), *b5 = cm_rows(s5, 10, 2);
    mcdc_error e = MCDC_ERROR_INIT;
    char *d = cm_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/t0", d);
    mcdc_alloc_stats a, b;
    int64_t rows = -1;
    mcdc_alloc_get_stats(&a);
    CHECK_EQ_INT(colmap_round(path, b4, b5, &rows, &e), MCDC_OK);
    mcdc_alloc_get_stats(&b);
    CHECK_EQ_INT(rows, 4);
    int64_t calls = b.calls - a.calls, step = calls / 120 > 0 ? calls / 120 : 1;
    int failures = 0;
    for (int64_t nth = 1; nth <= calls; nth += step) {
        snprintf(path, sizeof path, "%s/t%lld", d, (long long)nth);
        mcdc_error fe = MCDC_ERROR_INIT;
        mcdc_alloc_fail_at(nth);
        int rc = colmap_round(path, b4, b5, &rows, &fe);
        mcdc_alloc_fail_at(0);
        if (rc != MCDC_OK) {
            failures++;
            if (rc != MCDC_E_NOMEM) CHECK_EQ_STR(fe.message, "(an MCDC_E_NOMEM message)");
            CHECK(fe.message[0] != 0);
        } else {
            CHECK_EQ_INT(rows, 4);
        }
        /* whatever was committed reads back under the logical names */
        mcdc_table *t = NULL;
        CHECK_EQ_INT(mcdc_table_open(&t, path, NULL, &e), MCDC_OK);
        mcdc_batch *all = NULL;
        int64_t v = -1;
        int rrc = mcdc_table_read_all(t, &all, &v, &e);
        if (rrc != MCDC_OK) CHECK_EQ_STR(e.message, "");
        if (all) { /* 0 rows: created (version 0), the first append failed */
            CHECK(all->rows == 0 || all->rows == 2 || all->rows == 4);
            CHECK_EQ_STR(all->schema->fields[1].name, "Qty (kg)");
            if (all->rows > 0) CHECK(mcdc_row_get(all, 0, 1).kind == MCDC_CELL_DOUBLE);
        }
        mcdc_batch_free(all);
        mcdc_table_close(t);
    }
    CHECK(failures > 50);
    mcdc_batch_free(b4);
    mcdc_batch_free(b5);
    mcdc_schema_unref(s4);
    mcdc_schema_unref(s5);
    cm_rmrf(d);
}
