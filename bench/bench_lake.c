/*
 * bench_lake - our Delta writer and reader on the representative CDC schema
 * (driven by bench/bench_lake.py, make bench-lake).
 *
 *   bench_lake write TABLE ROWS
 *       generates ROWS rows in 65536-row batches in memory (one batch alive
 *       at a time; generating is timed apart and left out of the write time)
 *       and appends them to TABLE through the lake appender (our Parquet
 *       writer, zstd, Delta commit with txn) as ONE commit.
 *   bench_lake read TABLE
 *       replays TABLE's log and reads every live file with our Parquet reader
 *       (each batch is handed back with mcdc_parquet_reader_recycle, as a
 *       scanning consumer would, so batch buffers are refilled, not
 *       reallocated).
 *
 * Prints `name: value` lines; peak_rss_mb is the process's peak RSS
 * (getrusage), cpu_seconds user+sys of the timed part, bytes are the
 * Arrow-layout bytes of the values.
 *
 * BENCH_LAKE_MALLOPT=1 keeps freed memory in the process (glibc mallopt:
 * trim threshold 256 MB, mmap threshold 32 MB): with glibc's defaults every
 * 64K-row batch and column chunk the reader allocates is handed back to the
 * kernel when freed and faulted in (zeroed) again, ~45% of the read's CPU.
 */
#include <malloc.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "mcdc_delta.h"
#include "mcdc_lake.h"
#include "mcdc_parquet.h"

enum { BATCH_ROWS = 65536, NF = 16 };

static mcdc_schema *cdc_schema(void) {
    mcdc_schema *s = NULL;
    mcdc_schema_create(&s, NF, NULL);
    int i = 0;
    mcdc_schema_set(s, i++, "_capture_instance", MCDC_TYPE_UTF8, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "_start_lsn", MCDC_TYPE_UTF8, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "_seqval", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "_operation", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "_command_id", MCDC_TYPE_INT32, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "_commit_ts", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "id", MCDC_TYPE_INT32, 0, 0, 0, false, NULL);
    mcdc_schema_set(s, i++, "big", MCDC_TYPE_INT64, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "amount", MCDC_TYPE_DECIMAL, 18, 4, 0, true, NULL);
    mcdc_schema_set(s, i++, "name", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "updated_at", MCDC_TYPE_TIMESTAMP_NTZ, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "active", MCDC_TYPE_BOOL, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "raw", MCDC_TYPE_BINARY, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "guid", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "note", MCDC_TYPE_UTF8, 0, 0, 0, true, NULL);
    mcdc_schema_set(s, i++, "_batch_id", MCDC_TYPE_INT64, 0, 0, 0, false, NULL);
    return s;
}

static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static const char *const FIRST[] = {"Zoë", "José", "Łukasz", "Søren", "Ægir", "Renée", "Jürgen",
                                    "Çağla", "Мария", "Δημήτρης", "美咲", "太郎", "Anna", "Olga",
                                    "Иван", "Ngọc"};
static const char *const LAST[] = {"Müller", "García", "Nowak", "Østergård", "Dvořák", "Şahin",
                                   "Иванова", "Παπαδόπουλος", "山田", "佐藤", "Smith", "Nguyễn",
                                   "O'Brien", "Lefèvre", "Kovač", "Björk"};
static const char *const WORDS[] = {"order", "shipped", "to", "warehouse", "customer", "requested",
                                    "delivery", "before", "noon", "payment", "received", "via",
                                    "card", "refund", "pending", "review", "address", "changed",
                                    "priority", "express"};

/* One batch of rows first .. first+n-1. Rows come in transactions of 3. */
static void fill(mcdc_batch *b, int64_t first, int64_t n) {
    mcdc_batch_reset(b);
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)(first + 1) * 0xD1B54A32D192ED03ull;
    char t[256];
    mcdc_column *c = b->columns;
    for (int64_t k = 0; k < n; k++) {
        int64_t r = first + k, tx = r / 3;
        uint64_t x = rng(&seed);
        mcdc_col_append_bytes(&c[0], "dbo_orders", 10, NULL);
        int len = snprintf(t, sizeof t, "0x%08llX%08llX%04llX", (unsigned long long)(0x2A + tx / 4000000),
                           (unsigned long long)(tx % 4000000 * 16), (unsigned long long)(r % 3 + 2));
        mcdc_col_append_bytes(&c[1], t, len, NULL);
        len = snprintf(t, sizeof t, "0x%08llX%08llX%04llX", (unsigned long long)(0x2A + tx / 4000000),
                       (unsigned long long)(tx % 4000000 * 16), (unsigned long long)(r % 3 + 5));
        mcdc_col_append_bytes(&c[2], t, len, NULL);
        int op = (int)(x % 10);
        mcdc_col_append_int(&c[3], op < 5 ? 2 : op < 7 ? 4 : op < 9 ? 3 : 1, NULL);
        mcdc_col_append_int(&c[4], r % 3, NULL);
        mcdc_col_append_int(&c[5], 1735689600000000LL + tx * 1000 + (int64_t)(tx % 7), NULL);
        mcdc_col_append_int(&c[6], (int32_t)((x >> 8) % 2000000), NULL);
        if (x % 10 == 0) mcdc_col_append_null(&c[7], NULL);
        else mcdc_col_append_int(&c[7], (int64_t)(x >> 12) - (int64_t)(1ull << 50), NULL);
        if (x % 13 == 0) mcdc_col_append_null(&c[8], NULL);
        else mcdc_col_append_decimal(&c[8], (x >> 20) % 10000000000ull, 0, NULL);
        if (x % 17 == 0) mcdc_col_append_null(&c[9], NULL);
        else {
            len = snprintf(t, sizeof t, "%s %s-%llu", FIRST[(x >> 4) & 15], LAST[(x >> 8) & 15],
                           (unsigned long long)((x >> 16) % 5000));
            mcdc_col_append_bytes(&c[9], t, len, NULL);
        }
        mcdc_col_append_int(&c[10], 1600000000000000LL + (int64_t)((x >> 3) % 150000000000000ull),
                            NULL);
        if (x % 19 == 0) mcdc_col_append_null(&c[11], NULL);
        else mcdc_col_append_bool(&c[11], (x >> 5) & 1, NULL);
        uint64_t g1 = rng(&seed), g2 = rng(&seed);
        if (x % 11 == 0) mcdc_col_append_null(&c[12], NULL);
        else {
            memcpy(t, &g1, 8);
            memcpy(t + 8, &g2, 8);
            mcdc_col_append_bytes(&c[12], t, 16, NULL);
        }
        len = snprintf(t, sizeof t, "%08llX-%04llX-%04llX-%04llX-%012llX",
                       (unsigned long long)(g2 & 0xFFFFFFFF), (unsigned long long)(g2 >> 32 & 0xFFFF),
                       (unsigned long long)(g2 >> 48), (unsigned long long)(g1 & 0xFFFF),
                       (unsigned long long)(g1 >> 16 & 0xFFFFFFFFFFFFull));
        mcdc_col_append_bytes(&c[13], t, len, NULL);
        if (x % 3 == 0) mcdc_col_append_null(&c[14], NULL);
        else {
            int words = (int)(3 + (x >> 24) % 25), o = 0;
            uint64_t y = x;
            for (int w = 0; w < words && o < 190; w++) {
                if (w % 8 == 7) y = rng(&seed);
                o += snprintf(t + o, sizeof t - (size_t)o, "%s%s", w ? " " : "",
                              WORDS[(y >> (w % 8 * 5)) % 20]);
            }
            if (o > 200) o = 200;
            mcdc_col_append_bytes(&c[14], t, o, NULL);
        }
        mcdc_col_append_int(&c[15], 42, NULL);
    }
    mcdc_batch_seal(b, NULL);
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static int die(const char *what, const mcdc_error *e) {
    fprintf(stderr, "bench_lake: %s: %s\n", what, e->message);
    return 1;
}

static int cmd_write(const char *table, int64_t rows) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_schema *s = cdc_schema();
    mcdc_table *t = NULL;
    mcdc_appender *a = NULL;
    mcdc_batch *b = NULL;
    /* Every core encodes, as delta-rs's and pyarrow's writers use them all. */
    mcdc_table_props props = {.parquet_threads = (int32_t)sysconf(_SC_NPROCESSORS_ONLN)};
    if (mcdc_table_open(&t, table, NULL, &e) || mcdc_appender_open(&a, t, s, &props, &e) ||
        mcdc_batch_create(&b, s, BATCH_ROWS, &e))
        return die("open", &e);
    int64_t gen_us = 0, write_us = 0, bytes = 0;
    double gen_cpu = 0, cpu0 = cpu_seconds();
    for (int64_t done = 0; done < rows;) {
        int64_t n = rows - done < BATCH_ROWS ? rows - done : BATCH_ROWS;
        int64_t t0 = mcdc_monotonic_us();
        double c0 = cpu_seconds();
        fill(b, done, n);
        gen_cpu += cpu_seconds() - c0;
        int64_t t1 = mcdc_monotonic_us();
        if (mcdc_appender_write(a, b, &e)) return die("write", &e);
        write_us += mcdc_monotonic_us() - t1;
        gen_us += t1 - t0;
        bytes += mcdc_batch_bytes(b);
        done += n;
    }
    bool skipped = false;
    int64_t version = -1, t0 = mcdc_monotonic_us();
    if (mcdc_appender_commit(a, "bench", 1, NULL, &skipped, &version, &e)) return die("commit", &e);
    write_us += mcdc_monotonic_us() - t0;
    double secs = (double)write_us / 1e6;
    printf("ours_write_rows: %lld\n", (long long)rows);
    printf("ours_write_generate_seconds: %.3f\n", (double)gen_us / 1e6);
    printf("ours_write_seconds: %.3f\n", secs);
    printf("ours_write_cpu_seconds: %.3f\n", cpu_seconds() - cpu0 - gen_cpu);
    printf("ours_write_rows_per_s: %.0f\n", (double)rows / secs);
    printf("ours_write_input_mb: %.1f\n", (double)bytes / 1e6);
    printf("ours_write_mb_per_s: %.1f\n", (double)bytes / 1e6 / secs);
    printf("ours_write_version: %lld\n", (long long)version);
    printf("ours_write_peak_rss_mb: %.1f\n", peak_rss_mb());
    mcdc_batch_free(b);
    mcdc_appender_free(a);
    mcdc_table_close(t);
    mcdc_schema_unref(s);
    return 0;
}

static int cmd_read(const char *table) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_delta_table *t = NULL;
    mcdc_delta_snapshot *s = NULL;
    bool tuned = getenv("BENCH_LAKE_MALLOPT") && atoi(getenv("BENCH_LAKE_MALLOPT"));
    if (tuned) {
        mallopt(M_TRIM_THRESHOLD, 256 << 20);
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
    }
    const char *pre = tuned ? "ours_read_mallopt" : "ours_read";
    double cpu0 = cpu_seconds();
    int64_t t0 = mcdc_monotonic_us(), rows = 0, bytes = 0, files_bytes = 0;
    if (mcdc_delta_table_open(&t, table, NULL, &e) || mcdc_delta_snapshot_load(&s, t, -1, &e))
        return die("replay", &e);
    size_t nf = mcdc_delta_snapshot_file_count(s);
    for (size_t i = 0; i < nf; i++) {
        const mcdc_delta_file *f = mcdc_delta_snapshot_file(s, i);
        files_bytes += f->size_bytes;
        mcdc_parquet_reader *r = NULL;
        if (mcdc_parquet_reader_open(&r, mcdc_delta_table_storage(t), f->path, NULL, &e))
            return die("open", &e);
        mcdc_batch *b = NULL;
        int rc;
        while ((rc = mcdc_parquet_reader_next(&b, r, &e)) == MCDC_OK && b) {
            rows += b->rows;
            bytes += mcdc_batch_bytes(b);
            mcdc_parquet_reader_recycle(r, b); /* refilled by the next _next */
        }
        if (rc) return die("read", &e);
        mcdc_parquet_reader_free(r);
    }
    double secs = (double)(mcdc_monotonic_us() - t0) / 1e6;
    if (!tuned) {
        printf("ours_read_rows: %lld\n", (long long)rows);
        printf("ours_read_files: %zu\n", nf);
        printf("ours_output_bytes: %lld\n", (long long)files_bytes);
    }
    printf("%s_seconds: %.3f\n", pre, secs);
    printf("%s_cpu_seconds: %.3f\n", pre, cpu_seconds() - cpu0);
    printf("%s_rows_per_s: %.0f\n", pre, (double)rows / secs);
    printf("%s_mb_per_s: %.1f\n", pre, (double)bytes / 1e6 / secs);
    printf("%s_peak_rss_mb: %.1f\n", pre, peak_rss_mb());
    mcdc_delta_snapshot_free(s);
    mcdc_delta_table_free(t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "write") == 0) return cmd_write(argv[2], atoll(argv[3]));
    if (argc == 3 && strcmp(argv[1], "read") == 0) return cmd_read(argv[2]);
    fprintf(stderr, "usage: bench_lake write TABLE ROWS | read TABLE\n");
    return 2;
}
