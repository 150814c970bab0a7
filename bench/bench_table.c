/* bench_table - a snapshot's reads of a base table alone: its key extent
 * (the reader's MIN/MAX query), cut into one range per connection, each
 * range read on its own thread with the snapshot reader's query
 * (mcdc_cdc_snapshot_sql) into batches that are counted and dropped.
 *
 *   mcdc-bench-table --connection-string CS --table T --key K --columns C1,C2,...
 *                    [--connections N] [--isolation snapshot|readCommitted]
 *
 * Prints `name: value` lines (rows, seconds, rows/s). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_cdc_client.h"
#include "mcdc_driver.h"
#include "mcdc_keyrange.h"

typedef struct {
    const mcdc_connstr *cs;
    mcdc_snapshot_query q;
    json_t *lo, *hi; /* the range's bounds, owned */
    int64_t rows;
    int rc;
    mcdc_error err;
} job;

static void *run(void *arg) {
    job *j = arg;
    mcdc_conn *c = NULL;
    mcdc_buf sql = {0};
    mcdc_sql_params params = {0};
    mcdc_result *r = NULL;
    j->rc = mcdc_conn_open(&c, j->cs, NULL, &j->err);
    if (j->rc == MCDC_OK) j->rc = mcdc_cdc_snapshot_sql(&sql, &params, &j->q, &j->err);
    if (j->rc == MCDC_OK)
        j->rc = mcdc_conn_exec(&r, c, (const char *)sql.data, (const char *const *)params.v, params.n,
                               &j->err);
    while (j->rc == MCDC_OK) {
        mcdc_batch *b = NULL;
        j->rc = mcdc_result_next_batch(&b, r, 10000, &j->err);
        if (!b) break;
        j->rows += b->rows;
        mcdc_batch_free(b);
    }
    mcdc_result_free(r);
    mcdc_sql_params_free(&params);
    mcdc_buf_free(&sql);
    mcdc_conn_close(c);
    return NULL;
}

/* The k-th of n cuts of the keys [lo, hi]: lo + span * k / n, without
 * overflow (the span taken unsigned, n at most 64). */
static int64_t cut(int64_t lo, int64_t hi, int k, int n) {
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1, uk = (uint64_t)k, un = (uint64_t)n;
    return (int64_t)((uint64_t)lo + span / un * uk + span % un * uk / un);
}

int main(int argc, char **argv) {
    const char *cs_text = NULL, *table = NULL, *key = NULL, *columns = NULL, *iso = "readCommitted";
    int n = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--connection-string")) cs_text = argv[i + 1];
        else if (!strcmp(argv[i], "--table")) table = argv[i + 1];
        else if (!strcmp(argv[i], "--key")) key = argv[i + 1];
        else if (!strcmp(argv[i], "--columns")) columns = argv[i + 1];
        else if (!strcmp(argv[i], "--connections")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--isolation")) iso = argv[i + 1];
    }
    if (!cs_text || !table || !key || !columns || n < 1 || n > 64) {
        fprintf(stderr, "usage: %s --connection-string CS --table T --key K --columns C1,C2,... [--connections N]"
                        " [--isolation snapshot|readCommitted]\n", argv[0]);
        return 64;
    }
    { static const mcdc_log_sink quiet = {NULL, NULL, MCDC_LOG_ERROR}; mcdc_log_use(&quiet); }
    mcdc_error err = MCDC_ERROR_INIT;
    mcdc_connstr *cs = NULL;
    mcdc_conn *c = NULL;
    mcdc_cdc_client *cl = NULL;
    if (mcdc_connstr_parse(&cs, cs_text, &err) || mcdc_conn_open(&c, cs, NULL, &err) ||
        mcdc_cdc_client_create(&cl, c, &err)) {
        fprintf(stderr, "bench_table: %s\n", err.message);
        return 1;
    }
    /* the columns, as the reader names them */
    char *names = strdup(columns);
    const char *src[64];
    mcdc_field f[64];
    memset(f, 0, sizeof f);
    int nc = 0;
    for (char *p = strtok(names, ","); p && nc < 64; p = strtok(NULL, ",")) {
        src[nc] = p;
        f[nc].name = p;
        f[nc].type = MCDC_TYPE_UTF8;
        f[nc].nullable = true;
        nc++;
    }
    /* the key, an integer column, as the reader's planner sees it */
    mcdc_key_col kc;
    memset(&kc, 0, sizeof kc);
    snprintf(kc.name, sizeof kc.name, "%s", key);
    snprintf(kc.type, sizeof kc.type, "bigint");
    kc.kind = MCDC_KEY_INT;
    mcdc_source_read rd = {!strcmp(iso, "snapshot"), -1};
    int64_t t0 = mcdc_monotonic_us(), lo = 0, hi = 0;
    json_t *jlo = NULL, *jhi = NULL;
    if (mcdc_cdc_key_min_max(&jlo, &jhi, cl, "dbo", table, &kc, NULL, NULL, &rd, &err)) {
        fprintf(stderr, "bench_table: %s\n", err.message);
        return 1;
    }
    if (json_is_integer(jlo) && json_is_integer(jhi)) {
        lo = (int64_t)json_integer_value(jlo);
        hi = (int64_t)json_integer_value(jhi);
    }
    json_decref(jlo);
    json_decref(jhi);
    job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    for (int k = 0; k < n; k++) {
        job *j = &jobs[k];
        j->cs = cs;
        j->err = (mcdc_error)MCDC_ERROR_INIT;
        /* uniform ranges [lo, hi) of the keys: the first open below (it
         * takes the NULL keys), the last open above */
        j->lo = k > 0 ? json_integer((json_int_t)cut(lo, hi, k, n)) : NULL;
        j->hi = k < n - 1 ? json_integer((json_int_t)cut(lo, hi, k + 1, n)) : NULL;
        j->q = (mcdc_snapshot_query){.source_schema = "dbo", .source_table = table, .cols = f, .n_cols = nc,
                                     .source_names = src, .keys = &kc, .n_keys = 1,
                                     .lo = j->lo, .hi = j->hi, .read = rd};
        pthread_create(&th[k], NULL, run, j);
    }
    int64_t rows = 0;
    int rc = 0;
    for (int k = 0; k < n; k++) {
        pthread_join(th[k], NULL);
        rows += jobs[k].rows;
        json_decref(jobs[k].lo);
        json_decref(jobs[k].hi);
        if (jobs[k].rc) {
            fprintf(stderr, "bench_table: range %d: %s\n", k, jobs[k].err.message);
            rc = 1;
        }
    }
    double s = (double)(mcdc_monotonic_us() - t0) / 1e6;
    printf("table_rows: %lld\n", (long long)rows);
    printf("table_seconds: %.3f\n", s);
    printf("table_rows_per_s: %.0f\n", (double)rows / (s > 0 ? s : 1e-9));
    free(jobs);
    free(th);
    free(names);
    mcdc_cdc_client_free(cl);
    mcdc_conn_close(c);
    mcdc_connstr_free(cs);
    return rc;
}
