/* bench_reader - the change reader alone: [min_lsn, max_lsn] of a capture
 * instance split by split_points into one range per connection, each read
 * on its own thread into batches that are counted and dropped.
 *
 *   mcdc-bench-reader --connection-string CS --capture-instance CI
 *                     [--connections N] [--batch-rows N]
 *
 * Prints `name: value` lines (rows, seconds, rows/s, MB/s, rtt, waits). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_reader.h"

typedef struct {
    mcdc_connstr_connector conn;
    mcdc_reader_options opt;
    mcdc_lsn from, to;
    mcdc_reader_metrics m;
    int64_t rows;
    int rc;
    mcdc_error err;
} job;

static int count_sink(void *ctx, mcdc_batch *b, mcdc_error *err) {
    (void)err;
    ((job *)ctx)->rows += b->rows;
    mcdc_batch_free(b);
    return MCDC_OK;
}

static void *run(void *arg) {
    job *j = arg;
    j->rc = mcdc_reader_read_range(&j->m, &j->opt, mcdc_connect_connstr, &j->conn, &j->from,
                                   &j->to, false, count_sink, j, &j->err);
    return NULL;
}

static int die(const char *what, const mcdc_error *e) {
    fprintf(stderr, "bench_reader: %s: %s\n", what, e->message);
    return 1;
}

int main(int argc, char **argv) {
    const char *cs_text = NULL, *ci = NULL;
    int n = 1;
    int64_t batch_rows = 10000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--connection-string")) cs_text = argv[i + 1];
        else if (!strcmp(argv[i], "--capture-instance")) ci = argv[i + 1];
        else if (!strcmp(argv[i], "--connections")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch-rows")) batch_rows = atoll(argv[i + 1]);
    }
    if (!cs_text || !ci || n < 1 || n > MCDC_PARTITIONS_MAX) {
        fprintf(stderr, "usage: %s --connection-string CS --capture-instance CI "
                        "[--connections N] [--batch-rows N]\n", argv[0]);
        return 64;
    }
    { static const mcdc_log_sink quiet = {NULL, NULL, MCDC_LOG_ERROR}; mcdc_log_use(&quiet); }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_connstr *cs = NULL;
    if (mcdc_connstr_parse(&cs, cs_text, &e)) return die("connection string", &e);
    mcdc_conn *c = NULL;
    mcdc_cdc_client *cl = NULL;
    mcdc_lsn lo, hi;
    if (mcdc_conn_open(&c, cs, NULL, &e) || mcdc_cdc_client_create(&cl, c, &e) ||
        mcdc_cdc_min_lsn(&lo, cl, ci, &e) || mcdc_cdc_max_lsn(&hi, NULL, cl, &e))
        return die("planning", &e);
    mcdc_split_point *sp = NULL;
    int nsp = 0;
    if (n > 1 && mcdc_cdc_split_points(&sp, &nsp, cl, ci, &lo, &hi, n, &e))
        return die("split_points", &e);
    mcdc_cdc_client_free(cl);
    mcdc_conn_close(c);
    int njobs = n > 1 && nsp > 0 ? nsp : 1;
    job *jobs = calloc((size_t)njobs, sizeof *jobs);
    mcdc_lsn start = lo;
    for (int i = 0; i < njobs; i++) {
        mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
        opt.capture_instance = ci;
        opt.batch_rows = batch_rows;
        jobs[i].conn.connstr = cs;
        jobs[i].conn.options = (mcdc_conn_options)MCDC_CONN_OPTIONS_INIT;
        jobs[i].opt = opt;
        jobs[i].from = start;
        jobs[i].to = (i == njobs - 1 || sp == NULL) ? hi : sp[i].bound;
        if (sp && i < nsp) start = sp[i].next_start;
    }
    int64_t t0 = mcdc_monotonic_us();
    pthread_t *th = calloc((size_t)njobs, sizeof *th);
    for (int i = 0; i < njobs; i++) pthread_create(&th[i], NULL, run, &jobs[i]);
    for (int i = 0; i < njobs; i++) pthread_join(th[i], NULL);
    double secs = (double)(mcdc_monotonic_us() - t0) / 1e6;
    int64_t rows = 0, bytes = 0, wait_ms = 0;
    double rtt = 0;
    for (int i = 0; i < njobs; i++) {
        if (jobs[i].rc) return die("reading", &jobs[i].err);
        rows += jobs[i].rows;
        bytes += jobs[i].m.bytes;
        wait_ms += jobs[i].m.network_wait_ms;
        rtt += jobs[i].m.rtt_ms / njobs;
    }
    printf("reader_connections: %d\n", njobs);
    printf("reader_rows: %lld\n", (long long)rows);
    printf("reader_seconds: %.3f\n", secs);
    printf("reader_rows_per_s: %.0f\n", secs > 0 ? (double)rows / secs : 0.0);
    printf("reader_batch_mb_per_s: %.1f\n", secs > 0 ? (double)bytes / secs / 1e6 : 0.0);
    printf("reader_rtt_ms: %.3f\n", rtt);
    printf("reader_network_wait_ms: %lld\n", (long long)wait_ms);
    free(th);
    free(jobs);
    mcdc_free(sp);
    mcdc_connstr_free(cs);
    return 0;
}
