/* bench_native - decode cost of the native TDS backend vs FreeTDS.
 *
 *   mcdc-bench-native query  --connection-string CS --sql SQL --backend native|freetds
 *                            [--batch-rows N]
 *       runs SQL and fetches every row into batches that are reset and
 *       reused; prints rows, wall seconds and this process's CPU seconds
 *       (getrusage: the simulator's work is in another process).
 *   mcdc-bench-native reader --connection-string CS --capture-instance CI
 *                            --backend native|freetds [--batch-rows N]
 *       the CDC reader over [min_lsn, max_lsn] through that backend.
 *   mcdc-bench-native replay --file F [--repeat K] [--batch-rows N]
 *       decodes a recorded reply stream (MCDC_TDS_RECORD of a native
 *       `query` run: the session set-up reply, then the query's) from
 *       memory: the pure decode rate, no socket, no server.
 *   mcdc-bench-native replay-all --file F [--repeat K] [--batch-rows N]
 *       decodes every reply of a recording (e.g. MCDC_TDS_RECORD of
 *       mcdc-bench-reader) as the reader does: a fresh batch per fetch,
 *       freed after it (allocation and page faults included);
 *       --checksum 1 prints a hash of every decoded value.
 * Prints `name: value` lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "mcdc_reader.h"
#include "mcdc_tds_proto.h"

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}
static int die(const char *what, const mcdc_error *e) {
    fprintf(stderr, "bench_native: %s: %s\n", what, e->message);
    return 1;
}
static bool g_native;
/* MCDC_TDS_RECORD=path: the native backend records every reply there (the
 * replay modes' input). */
static int open_conn(mcdc_conn **c, const mcdc_connstr *cs, const mcdc_conn_options *o,
                     mcdc_error *e) {
    mcdc_conn_options opt = o ? *o : (mcdc_conn_options)MCDC_CONN_OPTIONS_INIT;
    opt.record_path = getenv("MCDC_TDS_RECORD");
    return g_native ? mcdc_conn_open_native(c, cs, &opt, e) : mcdc_conn_open(c, cs, &opt, e);
}
static int connect_fn(void *ctx, mcdc_conn **out, mcdc_error *err) {
    const mcdc_connstr_connector *k = ctx;
    return open_conn(out, k->connstr, &k->options, err);
}
static int count_sink(void *ctx, mcdc_batch *b, mcdc_error *err) {
    (void)err;
    *(int64_t *)ctx += b->rows;
    mcdc_batch_free(b);
    return MCDC_OK;
}

/* Fetches every row of the last of `execs` requests. */
static int drain_query(mcdc_conn *c, const char *sql, int execs, int64_t batch_rows,
                       int64_t *rows, mcdc_error *e) {
    for (int q = 0; q < execs; q++) {
        mcdc_result *r = NULL;
        int rc = mcdc_conn_exec(&r, c, sql, NULL, 0, e);
        if (rc) return rc;
        mcdc_batch *b = NULL;
        rc = mcdc_batch_create(&b, (mcdc_schema *)mcdc_result_schema(r), batch_rows, e);
        int64_t got = 0;
        while (rc == MCDC_OK) {
            rc = mcdc_result_fetch(r, b, 0, batch_rows, 0, &got, e);
            if (rc || got == 0) break;
            *rows += got;
            mcdc_batch_reset(b);
        }
        mcdc_batch_free(b);
        mcdc_result_free(r);
        if (rc) return rc;
    }
    return MCDC_OK;
}

/* FNV-1a over every row's validity and value (--checksum: the decoded
 * content, to compare builds). */
static uint64_t g_sum = 1469598103934665603ull;
static bool g_checksum;
static void sum_bytes(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) g_sum = (g_sum ^ b[i]) * 1099511628211ull;
}
static void sum_batch(const mcdc_batch *b, int64_t rows) {
    for (int32_t i = 0; i < b->schema->n_fields; i++) {
        const mcdc_column *c = &b->columns[i];
        int32_t w = mcdc_type_width(c->field);
        for (int64_t r = 0; r < rows; r++) {
            uint8_t valid = (uint8_t)mcdc_col_is_valid(c, r);
            sum_bytes(&valid, 1);
            if (!valid) continue;
            if (c->offsets) {
                int32_t n = c->offsets[r + 1] - c->offsets[r];
                sum_bytes(&n, 4);
                sum_bytes(c->data + c->offsets[r], (size_t)n);
            } else if (c->field->type == MCDC_TYPE_BOOL) {
                uint8_t v = (c->values[r >> 3] >> (r & 7)) & 1;
                sum_bytes(&v, 1);
            } else {
                sum_bytes(c->values + r * w, (size_t)w);
            }
        }
    }
}

/* Every reply in the recording, each fetched into fresh batches (as the
 * change reader does); stops at the end of the recording. */
static int drain_all(mcdc_conn *c, int64_t batch_rows, int64_t *rows, mcdc_error *e) {
    for (;;) {
        mcdc_result *r = NULL;
        if (mcdc_conn_exec(&r, c, "-", NULL, 0, e)) return MCDC_OK; /* end of the recording */
        int rc = MCDC_OK;
        for (;;) {
            mcdc_batch *b = NULL;
            rc = mcdc_batch_create(&b, (mcdc_schema *)mcdc_result_schema(r), batch_rows, e);
            int64_t got = 0;
            if (rc == MCDC_OK) rc = mcdc_result_fetch(r, b, 0, batch_rows, 0, &got, e);
            if (rc == MCDC_OK && g_checksum) sum_batch(b, got);
            mcdc_batch_free(b);
            if (rc || got == 0) break;
            *rows += got;
        }
        mcdc_result_free(r);
        if (rc) return rc;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) return 64;
    const char *mode = argv[1], *cs_text = NULL, *sql = NULL, *ci = NULL, *file = NULL;
    int64_t batch_rows = 65536;
    int repeat = 1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--connection-string")) cs_text = argv[i + 1];
        else if (!strcmp(argv[i], "--sql")) sql = argv[i + 1];
        else if (!strcmp(argv[i], "--capture-instance")) ci = argv[i + 1];
        else if (!strcmp(argv[i], "--backend")) g_native = !strcmp(argv[i + 1], "native");
        else if (!strcmp(argv[i], "--batch-rows")) batch_rows = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--file")) file = argv[i + 1];
        else if (!strcmp(argv[i], "--repeat")) repeat = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--checksum")) g_checksum = atoi(argv[i + 1]) != 0;
    }
    { static const mcdc_log_sink quiet = {NULL, NULL, MCDC_LOG_ERROR}; mcdc_log_use(&quiet); }
    mcdc_error e = MCDC_ERROR_INIT;
    int64_t rows = 0;
    double c0 = cpu_s();
    int64_t t0 = mcdc_monotonic_us();
    uint64_t bytes = 0;
    if (!strcmp(mode, "replay") || !strcmp(mode, "replay-all")) {
        if (!file) return 64;
        FILE *f = fopen(file, "rb");
        if (!f) { perror(file); return 1; }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *mem = malloc((size_t)n);
        if (!mem || fread(mem, 1, (size_t)n, f) != (size_t)n) return 1;
        fclose(f);
        c0 = cpu_s();
        t0 = mcdc_monotonic_us();
        for (int k = 0; k < repeat; k++) {
            mcdc_conn *c = NULL;
            if (mcdc_tds_conn_open_memory(&c, mem, (size_t)n, &e)) return die("open", &e);
            if (!strcmp(mode, "replay-all") ? drain_all(c, batch_rows, &rows, &e)
                                            : drain_query(c, "-", 2, batch_rows, &rows, &e))
                return die("replay", &e);
            mcdc_conn_close(c);
        }
        bytes = (uint64_t)n * (uint64_t)repeat;
        free(mem);
    } else {
        if (!cs_text) return 64;
        mcdc_connstr *cs = NULL;
        if (mcdc_connstr_parse(&cs, cs_text, &e)) return die("connection string", &e);
        if (!strcmp(mode, "query")) {
            mcdc_conn *c = NULL;
            if (!sql) return 64;
            if (open_conn(&c, cs, NULL, &e)) return die("open", &e);
            c0 = cpu_s();
            t0 = mcdc_monotonic_us();
            if (drain_query(c, sql, 1, batch_rows, &rows, &e)) return die("query", &e);
            mcdc_conn_close(c);
        } else {
            if (!ci) return 64;
            mcdc_conn *c = NULL;
            mcdc_cdc_client *cl = NULL;
            mcdc_lsn lo, hi;
            if (open_conn(&c, cs, NULL, &e) || mcdc_cdc_client_create(&cl, c, &e) ||
                mcdc_cdc_min_lsn(&lo, cl, ci, &e) || mcdc_cdc_max_lsn(&hi, NULL, cl, &e))
                return die("planning", &e);
            mcdc_cdc_client_free(cl);
            mcdc_conn_close(c);
            mcdc_reader_options opt = MCDC_READER_OPTIONS_INIT;
            opt.capture_instance = ci;
            opt.batch_rows = batch_rows;
            mcdc_connstr_connector k = {cs, MCDC_CONN_OPTIONS_INIT};
            mcdc_reader_metrics m;
            c0 = cpu_s();
            t0 = mcdc_monotonic_us();
            if (mcdc_reader_read_range(&m, &opt, connect_fn, &k, &lo, &hi, false, count_sink,
                                       &rows, &e))
                return die("reader", &e);
            bytes = (uint64_t)m.bytes;
        }
        mcdc_connstr_free(cs);
    }
    double wall = (double)(mcdc_monotonic_us() - t0) / 1e6, cpu = cpu_s() - c0;
    printf("native_mode: %s\n", mode);
    printf("native_backend: %s\n", !strncmp(mode, "replay", 6) ? "native" : g_native ? "native" : "freetds");
    printf("native_rows: %lld\n", (long long)rows);
    printf("native_wall_seconds: %.3f\n", wall);
    printf("native_cpu_seconds: %.3f\n", cpu);
    printf("native_rows_per_s_wall: %.0f\n", wall > 0 ? (double)rows / wall : 0.0);
    printf("native_rows_per_cpu_s: %.0f\n", cpu > 0 ? (double)rows / cpu : 0.0);
    printf("native_cpu_s_per_1m_rows: %.3f\n", rows ? cpu / ((double)rows / 1e6) : 0.0);
    if (bytes) printf("native_mb: %.1f\n", (double)bytes / 1e6);
    if (g_checksum) printf("native_checksum: %016llx\n", (unsigned long long)g_sum);
    return 0;
}
