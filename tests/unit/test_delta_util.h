/* test_delta_util.h - temp directories and small builders for the delta tests. */
#ifndef TEST_DELTA_UTIL_H
#define TEST_DELTA_UTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcdc_delta.h"

static int td_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* A fresh directory under /tmp; out must hold 64 bytes. */
static inline void td_mkdtemp(char out[64]) {
    snprintf(out, 64, "/tmp/mcdc-delta-XXXXXX");
    if (mkdtemp(out) == NULL) out[0] = 0;
}

static inline void td_rmrf(const char *dir) {
    if (dir[0]) nftw(dir, td_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void td_write_file(const char *path, const char *content) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(content, 1, strlen(content), f);
        fclose(f);
    }
}

static inline mcdc_schema *td_schema_simple(void) {
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, 3, NULL);
    mcdc_schema_set(s, 0, "id", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, 1, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, 2, "ts", MCDC_TYPE_TIMESTAMP_UTC, 0, 0, 0, true, NULL);
    return s;
}

/* Creates a table with td_schema_simple on the open handle t; returns t, or
 * NULL (t freed) when that fails. */
static inline mcdc_delta_table *td_create_on(mcdc_delta_table *t) {
    if (t == NULL) return NULL;
    mcdc_schema *s = td_schema_simple();
    mcdc_delta_create_opts o = MCDC_DELTA_CREATE_OPTS_INIT;
    o.schema = s;
    mcdc_delta_commit_result r;
    int rc = mcdc_delta_create(&r, t, &o, NULL);
    mcdc_schema_unref(s);
    if (rc != MCDC_OK) {
        mcdc_delta_table_free(t);
        return NULL;
    }
    return t;
}

/* Creates a table with td_schema_simple at dir; returns the open handle. */
static inline mcdc_delta_table *td_create(const char *dir) {
    mcdc_delta_table *t = NULL;
    if (mcdc_delta_table_open(&t, dir, NULL, NULL) != MCDC_OK) return NULL;
    return td_create_on(t);
}

/* A new memory store called name (*m, one reference) and a storage on its
 * prefix (NULL when that fails). */
static inline mcdc_storage *td_mem_storage(mcdc_storage_mem **m, const char *name,
                                           const char *prefix) {
    mcdc_storage *s = NULL;
    if (mcdc_storage_mem_create(m, name, NULL) != MCDC_OK) return NULL;
    if (mcdc_storage_mem_open(&s, *m, prefix, NULL) != MCDC_OK) return NULL;
    return s;
}

/* A table handle on prefix of the memory store m (NULL when that fails). */
static inline mcdc_delta_table *td_open_mem(mcdc_storage_mem *m, const char *prefix) {
    mcdc_storage *st = NULL;
    mcdc_delta_table *t = NULL;
    if (mcdc_storage_mem_open(&st, m, prefix, NULL) != MCDC_OK) return NULL;
    if (mcdc_delta_table_open_storage(&t, &st, NULL) != MCDC_OK) return NULL;
    return t;
}

/* Appends one add of `path` with txn (app_id may be NULL). */
static inline int td_append(mcdc_delta_table *t, const char *path, const char *app_id,
                            int64_t txn_version, mcdc_delta_commit_result *r, mcdc_error *e) {
    mcdc_delta_file f = {0};
    f.path = path;
    f.size_bytes = 100;
    f.modification_time_ms = 1700000000000;
    f.data_change = true;
    f.stats_json = "{\"numRecords\":3}";
    mcdc_delta_append_opts o = MCDC_DELTA_APPEND_OPTS_INIT;
    o.adds = &f;
    o.n_adds = 1;
    o.app_id = app_id;
    o.txn_version = txn_version;
    return mcdc_delta_append(r, t, &o, e);
}

#endif
