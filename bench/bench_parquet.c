/*
 * bench_parquet - our Parquet writer on bronze-shaped CDC rows.
 *
 *   bench_parquet OUT_DIR [rows] [threads] [codecs]
 *
 * codecs: the codecs to write, e.g. "zstd,uncompressed" (default all three).
 * BENCH_ZSTD_LEVEL: the zstd level to write (default: the writer's).
 * Builds 16 distinct batches of 65536 rows once (not timed), then writes
 * `rows` rows (default 10M) per codec (uncompressed, snappy, zstd) and
 * reads the zstd file back. Prints `name: value` lines; input_mb is the
 * PLAIN size of the values (what "uncompressed column data" means here).
 * Leaves OUT_DIR/bench_zstd.parquet for the pyarrow comparison. Each write
 * ends with the writer's profile: CPU seconds per stage (summed over the
 * columns) and per column (with its stages), from the writer's own
 * per-thread CPU clock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "mcdc_parquet.h"

enum { BATCH_ROWS = 65536, N_BATCHES = 16, NF = 14 };

static mcdc_schema *cdc_schema(void) {
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, NF, NULL);
    int i = 0;
    mcdc_schema_set(s, i++, "_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "_seqval", MCDC_TYPE_UTF8, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "_operation", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "_batch_id", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "id", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "big", MCDC_TYPE_INT64, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "amount", MCDC_TYPE_DECIMAL, 18, 4, 0, true, NULL);
    mcdc_schema_set(s, i++, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "at", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "flag", MCDC_TYPE_BOOL, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "raw", MCDC_TYPE_BINARY, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "guid", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "note", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    return s;
}

static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill(mcdc_batch *b, int64_t first) {
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)first;
    char t[128];
    for (int64_t k = 0; k < BATCH_ROWS; k++) {
        int64_t r = first + k;
        uint64_t x = rng(&seed);
        mcdc_column *c = b->columns;
        mcdc_col_append_int(&c[0], 1700000000000000LL + (r / 50) * 1000, NULL);
        int n = snprintf(t, sizeof t, "0x%020llX", (unsigned long long)(0x1000000 + r / 3));
        mcdc_col_append_bytes(&c[1], t, n, NULL);
        n = snprintf(t, sizeof t, "0x%020llX", (unsigned long long)(0x5000000 + r));
        mcdc_col_append_bytes(&c[2], t, n, NULL);
        mcdc_col_append_int(&c[3], (int64_t)(x % 4) + 1, NULL);
        mcdc_col_append_int(&c[4], 7, NULL);
        mcdc_col_append_int(&c[5], (int32_t)(r % 2000000000), NULL);
        if (x % 10 == 0) mcdc_col_append_null(&c[6], NULL);
        else mcdc_col_append_int(&c[6], (int64_t)(x >> 8), NULL);
        if (x % 13 == 0) mcdc_col_append_null(&c[7], NULL);
        else mcdc_col_append_decimal(&c[7], (x >> 20) % 100000000000ull, 0, NULL);
        n = snprintf(t, sizeof t, "customer-%llu", (unsigned long long)(x % 50000));
        mcdc_col_append_bytes(&c[8], t, n, NULL);
        mcdc_col_append_int(&c[9], 1600000000000000LL + (int64_t)(x % 100000000000ull), NULL);
        mcdc_col_append_bool(&c[10], x & 1, NULL);
        for (int j = 0; j < 16; j++) t[j] = (char)(rng(&seed) & 0xFF);
        mcdc_col_append_bytes(&c[11], t, 16, NULL);
        uint64_t g = rng(&seed);
        n = snprintf(t, sizeof t, "%08llx-%04llx-%04llx-%04llx-%012llx",
                     (unsigned long long)(g & 0xFFFFFFFF), (unsigned long long)((g >> 32) & 0xFFFF),
                     (unsigned long long)(g >> 48), (unsigned long long)(x & 0xFFFF),
                     (unsigned long long)(x >> 16 & 0xFFFFFFFFFFFFull));
        mcdc_col_append_bytes(&c[12], t, n, NULL);
        if (x % 3 == 0) mcdc_col_append_null(&c[13], NULL);
        else {
            n = snprintf(t, sizeof t, "note %llu: order shipped to warehouse %llu",
                         (unsigned long long)(x % 977), (unsigned long long)(x % 31));
            mcdc_col_append_bytes(&c[13], t, n, NULL);
        }
    }
    mcdc_batch_seal(b, NULL);
}

static int64_t plain_bytes(const mcdc_batch *b) {
    int64_t total = 0;
    for (int32_t i = 0; i < b->schema->n_fields; i++) {
        const mcdc_column *c = &b->columns[i];
        const mcdc_field *f = c->field;
        int64_t nn = c->length - c->null_count;
        switch (f->type) {
        case MCDC_TYPE_UTF8:
        case MCDC_TYPE_BINARY: total += c->data_len + 4 * nn; break;
        case MCDC_TYPE_BOOL: total += (nn + 7) / 8; break;
        case MCDC_TYPE_DECIMAL: total += 8 * nn; break; /* INT64 for p <= 18 */
        default: total += (int64_t)mcdc_type_width(f) * nn; break;
        }
    }
    return total;
}

/* The writer's profile (mcdc_parquet_writer_profile) as `name: value` lines:
 * per stage over all columns, then per column with its stages. */
static void print_profile(const mcdc_parquet_writer *w, const mcdc_schema *s, const char *codec) {
    double stage[MCDC_PARQUET_STAGES] = {0}, total = 0;
    for (int32_t i = 0; i < s->n_fields; i++) {
        const int64_t *p = mcdc_parquet_writer_profile(w, i);
        if (p == NULL) return;
        for (int k = 0; k < MCDC_PARQUET_STAGES; k++) stage[k] += (double)p[k] / 1e9;
    }
    for (int k = 0; k < MCDC_PARQUET_STAGES; k++) total += stage[k];
    for (int k = 0; k < MCDC_PARQUET_STAGES; k++)
        printf("profile_%s_%s_cpu_s: %.3f (%.0f%%)\n", codec,
               mcdc_parquet_stage_name((mcdc_parquet_stage)k), stage[k],
               total > 0 ? 100 * stage[k] / total : 0.0);
    for (int32_t i = 0; i < s->n_fields; i++) {
        const int64_t *p = mcdc_parquet_writer_profile(w, i);
        double t = 0;
        for (int k = 0; k < MCDC_PARQUET_STAGES; k++) t += (double)p[k] / 1e9;
        printf("profile_%s_col_%s_cpu_s: %.3f (", codec, s->fields[i].name, t);
        for (int k = 0, first = 1; k < MCDC_PARQUET_STAGES; k++) {
            if (p[k] < 1000000) continue; /* under a millisecond */
            printf("%s%s %.3f", first ? "" : ", ", mcdc_parquet_stage_name((mcdc_parquet_stage)k),
                   (double)p[k] / 1e9);
            first = 0;
        }
        printf(")\n");
    }
}

/* User + system CPU seconds of the process so far: on a shared machine a
 * steadier figure than the wall clock. */
static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_parquet OUT_DIR [rows] [threads]\n");
        return 2;
    }
    int64_t rows = argc > 2 ? atoll(argv[2]) : 10000000;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    mcdc_schema *s = cdc_schema();
    mcdc_batch *batches[N_BATCHES];
    int64_t batch_bytes[N_BATCHES];
    for (int i = 0; i < N_BATCHES; i++) {
        mcdc_batch_create(&batches[i], s, BATCH_ROWS, NULL);
        fill(batches[i], (int64_t)i * BATCH_ROWS);
        batch_bytes[i] = plain_bytes(batches[i]);
    }
    static const struct { const char *name; mcdc_parquet_codec c; } codecs[] = {
        {"uncompressed", MCDC_PARQUET_UNCOMPRESSED},
        {"snappy", MCDC_PARQUET_SNAPPY},
        {"zstd", MCDC_PARQUET_ZSTD},
    };
    printf("rows: %lld\n", (long long)rows);
    printf("threads: %d\n", threads);
    char path[1024];
    const char *only = argc > 4 ? argv[4] : NULL;
    for (size_t k = 0; k < sizeof codecs / sizeof codecs[0]; k++) {
        if (only && strstr(only, codecs[k].name) == NULL) continue;
        snprintf(path, sizeof path, "%s/bench_%s.parquet", argv[1], codecs[k].name);
        mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
        o.codec = codecs[k].c;
        o.threads = threads;
        if (getenv("BENCH_ZSTD_LEVEL")) o.level = atoi(getenv("BENCH_ZSTD_LEVEL"));
        mcdc_parquet_writer *w = NULL;
        mcdc_error e = MCDC_ERROR_INIT;
        double c0 = cpu_seconds();
        int64_t t0 = mcdc_monotonic_us(), input = 0, done = 0;
        int rc = mcdc_parquet_writer_open_path(&w, path, s, &o, &e);
        if (!rc) mcdc_parquet_writer_profile_enable(w);
        for (int i = 0; !rc && done < rows; i = (i + 1) % N_BATCHES) {
            rc = mcdc_parquet_writer_write(w, batches[i], &e);
            done += BATCH_ROWS;
            input += batch_bytes[i];
        }
        if (!rc) rc = mcdc_parquet_writer_close(w, &e);
        int64_t us = mcdc_monotonic_us() - t0;
        if (rc) {
            fprintf(stderr, "bench_parquet: %s\n", e.message);
            return 1;
        }
        const mcdc_parquet_file_info *fi = mcdc_parquet_writer_info(w);
        double secs = (double)us / 1e6;
        if (k == 0) printf("input_mb: %.1f\n", (double)input / 1e6);
        double cpu = cpu_seconds() - c0;
        printf("write_%s_seconds: %.3f\n", codecs[k].name, secs);
        printf("write_%s_cpu_seconds: %.3f\n", codecs[k].name, cpu);
        printf("parquet_write_rows_per_cpu_s_%s: %.0f\n", codecs[k].name, (double)done / cpu);
        printf("write_%s_mb_per_s: %.1f\n", codecs[k].name, (double)input / 1e6 / secs);
        printf("write_%s_rows_per_s: %.0f\n", codecs[k].name, (double)done / secs);
        printf("write_%s_file_mb: %.1f\n", codecs[k].name, (double)fi->file_bytes / 1e6);
        print_profile(w, s, codecs[k].name);
        mcdc_parquet_writer_free(w);
        if (codecs[k].c != MCDC_PARQUET_ZSTD) remove(path);
    }
    /* read the zstd file back (when written) */
    int64_t n = 0;
    if (only && strstr(only, "zstd") == NULL) goto done;
    snprintf(path, sizeof path, "%s/bench_zstd.parquet", argv[1]);
    double c0 = cpu_seconds();
    int64_t t0 = mcdc_monotonic_us();
    mcdc_parquet_reader *r = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_parquet_reader_open_path(&r, path, NULL, &e);
    mcdc_batch *b;
    while (!rc && (rc = mcdc_parquet_reader_next(&b, r, &e)) == MCDC_OK && b) {
        n += b->rows;
        mcdc_batch_free(b);
    }
    mcdc_parquet_reader_free(r);
    if (rc) {
        fprintf(stderr, "bench_parquet: %s\n", e.message);
        return 1;
    }
    double secs = (double)(mcdc_monotonic_us() - t0) / 1e6;
    printf("read_zstd_seconds: %.3f\n", secs);
    printf("read_zstd_cpu_seconds: %.3f\n", cpu_seconds() - c0);
    printf("read_zstd_rows_per_s: %.0f\n", (double)n / secs);
done:
    for (int i = 0; i < N_BATCHES; i++) mcdc_batch_free(batches[i]);
    mcdc_schema_unref(s);
    return 0;
}
