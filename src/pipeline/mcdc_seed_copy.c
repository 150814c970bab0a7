/* mcdc_seed_copy.c - the copy a seed reads (see mcdc_seed_copy.h). */
#include "mcdc_seed_copy.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_parquet.h"

#define COPY_FORMS                                                                        \
    "give the copy's Delta table directory, one .parquet file, a directory of .parquet " \
    "files, or a glob of them (dir/part-*.parquet)"

static bool has_glob(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] == '*' || s[i] == '?' || s[i] == '[') return true;
    return false;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int copy_add(mcdc_seed_copy *c, const char *name, mcdc_error *err) {
    char **v = mcdc_realloc(c->files, (c->n_files + 1) * sizeof *v);
    if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    c->files = v;
    if ((v[c->n_files] = mcdc_strdup(name)) == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    c->n_files++;
    return MCDC_OK;
}

void mcdc_seed_copy_close(mcdc_seed_copy *c) {
    for (size_t i = 0; i < c->n_files; i++) mcdc_free(c->files[i]);
    mcdc_free(c->files);
    mcdc_storage_free(c->st);
    mcdc_free(c->dir);
    memset(c, 0, sizeof *c);
}

/* The files of a directory, or those a pattern matches. */
static int copy_list(mcdc_seed_copy *c, const char *pattern, mcdc_error *err) {
    mcdc_storage_listing l = {0};
    int rc = mcdc_storage_list(c->st, "", &l, err);
    for (size_t i = 0; rc == MCDC_OK && i < l.count; i++) {
        const char *n = l.entries[i].name;
        bool take = pattern ? fnmatch(pattern, n, FNM_PERIOD) == 0
                            : n[0] != '_' && n[0] != '.' && ends_with(n, ".parquet");
        if (take) rc = copy_add(c, n, err);
    }
    mcdc_storage_listing_free(&l);
    return rc;
}

int mcdc_seed_copy_find(mcdc_seed_copy *c, const mcdc_storage_env *env, const char *from,
                        mcdc_error *err) {
    memset(c, 0, sizeof *c);
    c->from = from;
    c->env = env;
    c->version = -1;
    size_t len = strlen(from);
    while (len > 1 && from[len - 1] == '/') len--; /* dir/ is dir */
    const char *slash = memrchr(from, '/', len);
    const char *base = slash ? slash + 1 : from;
    size_t base_len = len - (size_t)(base - from);
    c->dir = slash ? mcdc_strndup(from, slash == from ? 1 : (size_t)(slash - from))
                   : mcdc_strdup(".");
    char *name = mcdc_strndup(base, base_len);
    int rc = c->dir && name ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK && has_glob(c->dir, strlen(c->dir)))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "--from %s: a wildcard may only be in the file name (the last "
                            "part of the path): " COPY_FORMS,
                            from);
    if (rc == MCDC_OK) rc = mcdc_storage_open_env(&c->st, c->env, c->dir, err);
    if (rc == MCDC_OK && has_glob(name, base_len)) {
        rc = copy_list(c, name, err);
        if (rc == MCDC_OK && c->n_files == 0)
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "--from %s: no file in %s matches %s: " COPY_FORMS, from, c->dir,
                                name);
        mcdc_free(name);
        return rc;
    }
    /* One file, else a directory: a Delta table, or Parquet files. */
    int64_t bytes;
    int found = rc ? rc : mcdc_storage_size(c->st, name, &bytes, err);
    if (found == MCDC_OK) {
        rc = copy_add(c, name, err);
        mcdc_free(name);
        return rc;
    }
    mcdc_free(name);
    /* not a file ("." and ".." are no keys of their parent): a directory */
    if (found != MCDC_E_NOTFOUND && found != MCDC_E_INVALID) return found;
    mcdc_error_clear(err);
    mcdc_storage_free(c->st);
    c->st = NULL;
    mcdc_free(c->dir);
    /* a path, never a schema.table name under the warehouse */
    bool plain = memchr(from, '/', len) == NULL && memchr(from, ':', len) == NULL;
    c->dir = plain ? mcdc_asprintf("./%.*s", (int)len, from) : mcdc_strndup(from, len);
    rc = c->dir ? mcdc_storage_open_env(&c->st, c->env, c->dir, err)
                : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_storage_listing logs = {0};
    if (rc == MCDC_OK) rc = mcdc_storage_list(c->st, "_delta_log/", &logs, err);
    for (size_t i = 0; rc == MCDC_OK && i < logs.count && !c->delta; i++)
        c->delta = ends_with(logs.entries[i].name, ".json") ||
                   ends_with(logs.entries[i].name, ".checkpoint.parquet");
    mcdc_storage_listing_free(&logs);
    if (rc == MCDC_OK && !c->delta) rc = copy_list(c, NULL, err);
    if (rc == MCDC_OK && !c->delta && c->n_files == 0)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "--from %s: no Delta table (no _delta_log/) and no .parquet file "
                            "there: the path does not exist, or is an empty directory, or one "
                            "without Parquet files (subdirectories are not read): " COPY_FORMS,
                            from);
    return rc;
}

/* The copy's own names of the columns wanted (matched ignoring case; a
 * column the copy lacks is left out), into names[*n]. */
static void project(const mcdc_schema *theirs, const char *const *want, int32_t n_want,
                    const char **names, int32_t *n) {
    *n = 0;
    for (int32_t i = 0; i < n_want; i++)
        for (int32_t f = 0; f < theirs->n_fields; f++)
            if (mcdc_str_ieq(theirs->fields[f].name, want[i])) {
                names[(*n)++] = theirs->fields[f].name;
                break;
            }
}

static int read_delta(mcdc_seed_copy *c, const char *warehouse, const char *const *want,
                      int32_t n_want, mcdc_batch_fn fn, void *ctx, mcdc_error *err) {
    mcdc_table *t = NULL;
    mcdc_schema *theirs = NULL;
    const char *names[MCDC_SNAPSHOT_KEYS_MAX];
    int64_t v;
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.version = c->version; /* every read of one seed reads one version */
    int rc = mcdc_table_open_env(&t, c->env, c->dir, warehouse, err);
    if (rc == MCDC_OK && want) rc = mcdc_table_schema(t, &theirs, err);
    if (rc == MCDC_OK && want && theirs) {
        project(theirs, want, n_want, names, &sc.n_columns);
        sc.columns = names;
    }
    /* none of the columns wanted: every one (the rows are counted all the same) */
    if (sc.n_columns == 0) sc.columns = NULL;
    if (rc == MCDC_OK) rc = mcdc_table_scan_run(t, &sc, fn, ctx, &v, NULL, err);
    if (rc == MCDC_OK) c->version = v;
    mcdc_schema_unref(theirs);
    mcdc_table_close(t);
    if (rc) mcdc_error_wrap(err, "reading the copy %s", c->from);
    return rc;
}

int mcdc_seed_copy_each_schema(mcdc_seed_copy *c, const char *warehouse,
                               mcdc_seed_copy_schema_fn fn, void *ctx, mcdc_error *err) {
    if (c->delta) {
        mcdc_table *t = NULL;
        mcdc_schema *s = NULL;
        int rc = mcdc_table_open_env(&t, c->env, c->dir, warehouse, err);
        if (rc == MCDC_OK) rc = mcdc_table_schema(t, &s, err);
        if (rc == MCDC_OK && s) rc = fn(ctx, NULL, s, err);
        mcdc_schema_unref(s);
        mcdc_table_close(t);
        return rc;
    }
    int rc = MCDC_OK;
    for (size_t i = 0; rc == MCDC_OK && i < c->n_files; i++) {
        mcdc_parquet_reader *r = NULL;
        const mcdc_schema *s = NULL;
        rc = mcdc_parquet_reader_open(&r, c->st, c->files[i], NULL, err);
        if (rc == MCDC_OK) rc = mcdc_parquet_reader_schema(&s, r, err);
        if (rc == MCDC_E_CORRUPT || rc == MCDC_E_UNSUPPORTED || rc == MCDC_E_PROTOCOL) {
            char why[sizeof err->message];
            snprintf(why, sizeof why, "%s", err ? err->message : "");
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "--from %s: %s/%s is not a Parquet file this can read (%s): "
                                "nothing was written; " COPY_FORMS,
                                c->from, c->dir, c->files[i], why);
        }
        if (rc == MCDC_OK) rc = fn(ctx, c->files[i], s, err);
        mcdc_parquet_reader_free(r);
    }
    return rc;
}

int mcdc_seed_copy_rows(mcdc_seed_copy *c, const char *warehouse, int64_t *rows,
                        mcdc_error *err) {
    *rows = 0;
    int rc = MCDC_OK;
    if (c->delta) {
        mcdc_table *t = NULL;
        mcdc_table_view *v = NULL;
        rc = mcdc_table_open_env(&t, c->env, c->dir, warehouse, err);
        if (rc == MCDC_OK) rc = mcdc_table_view_open(&v, t, c->version, err);
        if (rc == MCDC_OK && v) c->version = mcdc_table_view_version(v);
        if (rc == MCDC_OK && v) *rows = mcdc_table_view_rows(v);
        mcdc_table_view_free(v);
        mcdc_table_close(t);
    }
    for (size_t i = 0; rc == MCDC_OK && !c->delta && i < c->n_files; i++) {
        mcdc_parquet_reader *r = NULL;
        rc = mcdc_parquet_reader_open(&r, c->st, c->files[i], NULL, err);
        if (rc == MCDC_OK) *rows += mcdc_parquet_reader_rows(r);
        mcdc_parquet_reader_free(r);
    }
    if (rc) mcdc_error_wrap(err, "counting the rows of the copy %s", c->from);
    return rc;
}

int mcdc_seed_copy_read(mcdc_seed_copy *c, const char *warehouse, const char *const *want,
                        int32_t n_want, mcdc_batch_fn fn, void *ctx, mcdc_error *err) {
    MCDC_ASSERT(n_want <= MCDC_SNAPSHOT_KEYS_MAX);
    if (c->delta) return read_delta(c, warehouse, want, n_want, fn, ctx, err);
    int rc = MCDC_OK;
    for (size_t i = 0; rc == MCDC_OK && i < c->n_files; i++) {
        mcdc_parquet_reader *r = NULL;
        const mcdc_schema *theirs = NULL;
        const char *names[MCDC_SNAPSHOT_KEYS_MAX];
        int32_t n = 0;
        rc = mcdc_parquet_reader_open(&r, c->st, c->files[i], NULL, err);
        if (rc == MCDC_OK && want) rc = mcdc_parquet_reader_schema(&theirs, r, err);
        if (rc == MCDC_OK && want) project(theirs, want, n_want, names, &n);
        if (rc == MCDC_OK && n > 0) rc = mcdc_parquet_reader_select(r, names, n, err);
        mcdc_batch *b = NULL;
        while (rc == MCDC_OK && (rc = mcdc_parquet_reader_next(&b, r, err)) == MCDC_OK && b) {
            rc = fn(ctx, b, err);
            b = NULL;
        }
        mcdc_parquet_reader_free(r);
        if (rc) mcdc_error_wrap(err, "reading the copy %s/%s", c->dir, c->files[i]);
    }
    return rc;
}
