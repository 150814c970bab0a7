/*
 * bench_rewrite - our Parquet writer on the rows of an existing file.
 *
 *   bench_rewrite IN.parquet OUT_DIR [threads] [reps] [codec...]
 *
 * Reads IN (say a bronze file of `make bench-snapshot`) into memory once,
 * not timed, in batches of 65536 rows, then writes all of it `reps` times
 * (default 3) per codec (default: zstd snappy lz4_raw uncompressed) and
 * reads each file back once. Per codec it prints the best of the reps'
 * CPU seconds (user + system, getrusage: on a shared machine steadier than
 * the wall clock) per million rows, the wall seconds of that rep, the file
 * size in bytes per row, and the read-back CPU per million rows. The write
 * includes the file's write(2) into the page cache, a cost that grows with
 * the file. Prints `name: value` lines; OUT_DIR keeps the last file of
 * each codec. BENCH_REWRITE_COLUMN=name writes only that column;
 * BENCH_REWRITE_LEVEL sets the codec level.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "mcdc_parquet.h"

enum { BATCH_ROWS = 65536, BATCHES_MAX = 4096 };

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int fail(const mcdc_error *e) {
    fprintf(stderr, "bench_rewrite: %s\n", e->message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_rewrite IN.parquet OUT_DIR [threads] [reps] [codec...]\n");
        return 2;
    }
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    int reps = argc > 4 ? atoi(argv[4]) : 3;
    static const char *default_codecs[] = {"zstd", "snappy", "lz4_raw", "uncompressed"};
    const char *const *codecs = argc > 5 ? (const char *const *)argv + 5 : default_codecs;
    int n_codecs = argc > 5 ? argc - 5 : 4;

    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_parquet_read_options ro = MCDC_PARQUET_READ_OPTIONS_INIT;
    ro.batch_rows = BATCH_ROWS;
    mcdc_parquet_reader *r = NULL;
    if (mcdc_parquet_reader_open_path(&r, argv[1], &ro, &e)) return fail(&e);
    const char *only = getenv("BENCH_REWRITE_COLUMN");
    if (only && mcdc_parquet_reader_select(r, &only, 1, &e)) return fail(&e);
    static mcdc_batch *batches[BATCHES_MAX];
    int nb = 0;
    int64_t rows = 0;
    mcdc_batch *b;
    while (nb < BATCHES_MAX && mcdc_parquet_reader_next(&b, r, &e) == MCDC_OK && b) {
        batches[nb++] = b;
        rows += b->rows;
    }
    if (e.code) return fail(&e);
    if (nb == 0) {
        fprintf(stderr, "bench_rewrite: %s holds no rows\n", argv[1]);
        return 1;
    }
    mcdc_schema *schema = mcdc_schema_ref(batches[0]->schema);
    printf("rows: %lld\n", (long long)rows);
    printf("threads: %d\n", threads);
    char path[1024];
    for (int k = 0; k < n_codecs; k++) {
        mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
        if (mcdc_parquet_codec_parse(&o.codec, codecs[k], &e)) return fail(&e);
        o.threads = threads;
        if (getenv("BENCH_REWRITE_LEVEL")) o.level = atoi(getenv("BENCH_REWRITE_LEVEL"));
        snprintf(path, sizeof path, "%s/rewrite_%s.parquet", argv[2], codecs[k]);
        double best = 1e30, best_wall = 0;
        int64_t bytes = 0;
        for (int rep = 0; rep < reps; rep++) {
            mcdc_parquet_writer *w = NULL;
            double c0 = cpu_seconds();
            int64_t t0 = mcdc_monotonic_us();
            int rc = mcdc_parquet_writer_open_path(&w, path, schema, &o, &e);
            for (int i = 0; !rc && i < nb; i++) rc = mcdc_parquet_writer_write(w, batches[i], &e);
            if (!rc) rc = mcdc_parquet_writer_close(w, &e);
            if (rc) return fail(&e);
            double cpu = cpu_seconds() - c0;
            if (cpu < best) {
                best = cpu;
                best_wall = (double)(mcdc_monotonic_us() - t0) / 1e6;
            }
            bytes = mcdc_parquet_writer_info(w)->file_bytes;
            mcdc_parquet_writer_free(w);
        }
        double c0 = cpu_seconds();
        int64_t n = 0;
        mcdc_parquet_reader *rr = NULL;
        int rc = mcdc_parquet_reader_open_path(&rr, path, &ro, &e);
        while (!rc && (rc = mcdc_parquet_reader_next(&b, rr, &e)) == MCDC_OK && b) {
            n += b->rows;
            mcdc_parquet_reader_recycle(rr, b);
        }
        mcdc_parquet_reader_free(rr);
        if (rc) return fail(&e);
        if (n != rows) {
            fprintf(stderr, "bench_rewrite: read %lld rows back, wrote %lld\n", (long long)n,
                    (long long)rows);
            return 1;
        }
        double mrows = (double)rows / 1e6;
        printf("write_%s_cpu_s_per_mrow: %.4f\n", codecs[k], best / mrows);
        printf("write_%s_wall_s_per_mrow: %.4f\n", codecs[k], best_wall / mrows);
        printf("write_%s_bytes_per_row: %.2f\n", codecs[k], (double)bytes / (double)rows);
        printf("read_%s_cpu_s_per_mrow: %.4f\n", codecs[k], (cpu_seconds() - c0) / mrows);
    }
    for (int i = 0; i < nb; i++) mcdc_batch_free(batches[i]);
    mcdc_schema_unref(schema);
    mcdc_parquet_reader_free(r);
    return 0;
}
