/*
 * mcdc_parquet_write.c - the streaming Parquet writer (formats.md B9).
 *
 * Flow: write(batch) cuts the batch into row ranges that fit the current
 * row group; each column encodes its range (in parallel on the pool when
 * threads > 1): values are converted once to their PLAIN physical form
 * (non-null only), statistics are taken on that form, then either
 * dictionary-indexed or kept as PLAIN (pages then PLAIN or
 * DELTA_BINARY_PACKED). Which one is chosen per column once per file
 * (choose_encoding) and remembered across row groups. A page is closed (levels + values,
 * compressed, header) when it reaches page_bytes of PLAIN data. A row group
 * is flushed when it reaches row_group_bytes: every column chunk
 * (dictionary page first) is written to the file, and its metadata kept for
 * the footer. Memory: one row group of encoded chunks plus one page per
 * column plus the dictionaries; with options.spare, the next writer of the
 * job starts with those buffers (their capacity) instead of growing its
 * own.
 */
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "mcdc_parquet_int.h"
#include "mcdc_thrift.h"

/* Chunk statistics longer than this are left out of the footer (readers
 * then simply cannot prune on them); the file-level stats keep them. */
#define PQ_STATS_VALUE_BYTES_MAX 4096
#define PQ_THREADS_MAX 16
#define PQ_THREADS_AUTO_MAX 4
/* Rows a slice covers at most (bounds the scratch selection vector). */
#define PQ_SLICE_ROWS_MAX 65536
/* Values up to this many bytes are copied into a PLAIN page in 16-byte
 * pieces (to_phys), which may write this far past the last value. */
#define PQ_COPY_SLACK 64
/* Default page size (PLAIN bytes). 256 KiB rather than Arrow's 1 MiB: on the
 * bench-lake CDC rows zstd runs ~5% faster on pages that stay in cache and
 * our reader ~10% faster, for ~3% more bytes (0.917 -> 0.945 of pyarrow's
 * file size). mcdc_limits.h's MCDC_PARQUET_PAGE_BYTES_DEFAULT (1 MiB) is
 * no longer used by the writer. */
#define PQ_PAGE_BYTES_DEFAULT (256 * 1024)
/* Bytes per call to the storage writer at most (write_all). On this
 * machine's ext4, 1 GB written into the page cache by dd took 0.27-0.31
 * CPU-seconds of the kernel in writes of 256 KiB or 1 MiB and 0.37-8.2 in
 * writes of 2-16 MiB (three runs each, load 1-7): bench-parquet's
 * uncompressed file spent 70% of its CPU there, in one write per column
 * chunk. */
#define PQ_WRITE_PIECE_BYTES ((size_t)1024 * 1024)
/* Room kept before a page's values for its v1 levels at most (wcol.head). */
#define PQ_PAGE_HEAD_MAX (64 * 1024)
/* Encoding choice (once per column per file, remembered for its later row
 * groups): made on the first slice with at least PQ_CHOOSE_VALUES_MIN
 * non-null values, by trial-compressing at most PQ_CHOOSE_SAMPLE values in
 * each candidate encoding (dictionary, PLAIN, DELTA_BINARY_PACKED for
 * INT32/INT64). A column whose dictionary overflows dict_bytes_max gives it
 * up for the rest of the file too. */
#define PQ_CHOOSE_VALUES_MIN 1024
#define PQ_CHOOSE_SAMPLE 16384
#define PQ_CHOOSE_DICT_MARGIN 1.1
/* A sample with at most 1/PQ_CHOOSE_FEW distinct values keeps its dictionary
 * without a trial: small hash table, small pages to compress, fast reads. */
#define PQ_CHOOSE_FEW 8
/* A column whose sample, compressed in its best encoding, keeps more than
 * this fraction of its smallest uncompressed encoding is written
 * uncompressed (in that encoding) for the rest of the file: a gain under an
 * eighth is what zstd's level 1 finds in random integers and decimals
 * (their sign bytes), for as much CPU a byte as on text (the stream's
 * DECIMAL(18,4): 11% smaller than DELTA_BINARY_PACKED, 0.025 CPU-seconds
 * per million rows, more than zstd spends on its GUID texts, which it
 * halves). */
#define PQ_CHOOSE_COMPRESS_MIN 0.875

/* ---- a small pool: run fn(ctx, task, worker) for task in [0, n) -------------
 * worker: 0 for the caller, 1..n_threads for the pool's threads (what a task
 * may keep per thread, such as a compression context, is indexed by it). */
typedef struct pq_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    void (*fn)(void *ctx, int task, int worker);
    void *ctx;
    int n_tasks, next, done;
    int started;           /* threads that took their worker number */
    bool stop;
} pq_pool;

static void *pool_main(void *arg) {
    pq_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    int worker = ++p->started;
    for (;;) {
        while (!p->stop && p->next >= p->n_tasks) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        int task = p->next++;
        pthread_mutex_unlock(&p->mu);
        p->fn(p->ctx, task, worker);
        pthread_mutex_lock(&p->mu);
        if (++p->done == p->n_tasks) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int pool_start(pq_pool *p, int n_threads, mcdc_error *err) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads <= 1) return MCDC_OK;
    p->threads = mcdc_calloc((size_t)n_threads, sizeof *p->threads);
    if (p->threads == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (threads)");
    for (int i = 0; i < n_threads - 1; i++) {
        if (mcdc_thread_start(&p->threads[i], pool_main, p) != 0)
            return mcdc_error_set(err, MCDC_E_NOMEM, "cannot start Parquet encoder thread");
        p->n_threads++;
    }
    return MCDC_OK;
}

static void pool_run(pq_pool *p, void (*fn)(void *, int, int), void *ctx, int n_tasks) {
    if (p->n_threads == 0 || n_tasks <= 1) {
        for (int i = 0; i < n_tasks; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->done = 0;
    p->next = 0;
    p->n_tasks = n_tasks;
    pthread_cond_broadcast(&p->cv_work);
    while (p->next < p->n_tasks) { /* the caller works too */
        int task = p->next++;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, task, 0);
        pthread_mutex_lock(&p->mu);
        p->done++;
    }
    while (p->done < p->n_tasks) pthread_cond_wait(&p->cv_done, &p->mu);
    p->n_tasks = 0;
    p->next = 0;
    pthread_mutex_unlock(&p->mu);
}

static void pool_stop(pq_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    mcdc_free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
}

/* ---- per-column state --------------------------------------------------------- */

typedef struct chunk_rec {
    int64_t dict_offset;   /* 0 = none */
    int64_t data_offset;
    int64_t comp_bytes;
    int64_t uncomp_bytes;
    int64_t num_values;
    int64_t null_count;
    int64_t nan_count;
    uint32_t encodings;    /* bit per Encoding */
    int codec;             /* of this chunk's pages */
    bool has_min_max;
    uint8_t *min, *max;    /* owned */
    uint32_t min_len, max_len;
} chunk_rec;

typedef struct rg_rec {
    int64_t rows;
    int64_t uncomp_bytes;
    int64_t comp_bytes;
    int64_t file_offset;
    chunk_rec *cols;       /* owned, n columns */
} rg_rec;

typedef struct wcol {
    const mcdc_field *f;
    int32_t index;
    int phys;
    int32_t type_len;      /* FLBA width */
    int32_t width;         /* PLAIN bytes per value for fixed types, 0 for BA/bool */
    bool optional;
    bool is_float;
    bool dict_enabled;     /* option and type allow it */
    bool dict_on;          /* current mode */
    bool chosen;           /* encoding chosen for this file */
    bool dict_keep;        /* dictionary chosen (or not yet decided) */
    bool delta;            /* non-dictionary pages are DELTA_BINARY_PACKED (ints) or
                            * DELTA_LENGTH_BYTE_ARRAY (strings) */
    bool delta_prefix;     /* strings: DELTA_BYTE_ARRAY (prefixes shared) instead */
    int codec;             /* of the current chunk: the file's, or none when */
    int codec_next;        /* compressing does not pay (from the next chunk on) */
    bool page_is_dict;

    /* dictionary of the current chunk */
    mcdc_buf dict_plain;
    uint32_t *dict_offs;   /* BA: offset of each entry's length prefix */
    uint32_t dict_n, dict_offs_cap;
    uint32_t *htab;        /* entry+1, 0 = empty */
    uint32_t hmask;

    /* current page */
    mcdc_buf page_vals;    /* head free bytes, then the PLAIN values; bool: one byte per value */
    size_t head;           /* v1 pages of a nullable column: room for the levels
                            * before the values, so the body is compressed in
                            * place instead of copied after its levels */
    uint32_t *idx;
    int64_t idx_n, idx_cap;
    uint8_t *pvalid;
    int64_t pvalid_cap;    /* bytes */
    int64_t page_rows, page_nulls, page_bytes;

    /* current chunk */
    mcdc_buf chunk;
    mcdc_buf dictpage;
    int64_t chunk_uncomp, chunk_values, chunk_nulls, chunk_nans;
    uint32_t chunk_encodings;
    bool st_has;
    mcdc_buf st_min, st_max;

    /* whole file */
    bool fs_has;
    mcdc_buf fs_min, fs_max;
    int64_t fs_nulls;

    /* scratch */
    mcdc_buf pbuf;         /* PLAIN physical values of the slice (dictionary pages) */
    const uint8_t *pv;     /* the slice's PLAIN values (in pbuf or page_vals) */
    size_t pv_len;
    int64_t *sel;
    mcdc_buf enc, comp, hdr;
    pq_strs strs;          /* the page's strings once DELTA_*BYTE_ARRAY is chosen: built
                            * straight from the batches (encode_slice_strs) */
    pq_strs trial;         /* scratch of choose_encoding */
    int worker;            /* of the task running on this column (pq_pool) */

    /* task in/out */
    const mcdc_column *in;
    int64_t r0, r1;
    int rc;
    mcdc_error err;
    bool has_field_id;
    int32_t field_id;
    int64_t *prof;         /* MCDC_PARQUET_STAGES ns, or NULL: profile off */
    int64_t prof_t;        /* the thread's CPU clock at the last lap */
} wcol;

struct mcdc_parquet_writer {
    char *path;               /* "<storage root>/<key>", for messages */
    mcdc_storage_writer *out; /* the object being written; NULL once committed/aborted */
    mcdc_storage *own_st;     /* the local storage of writer_open_path, else NULL */
    bool closed;
    mcdc_schema *schema;
    mcdc_parquet_write_options opts;
    int32_t n;
    wcol *cols;
    pq_pool pool;
    bool pool_started;
    /* one compression context per thread, not per column: a zstd context
     * holds about a megabyte of tables */
    mcdc_pq_codec_ctx cctx[PQ_THREADS_MAX];
    int64_t offset;        /* bytes written */
    int64_t rows_total;
    int64_t rg_rows;
    int64_t rg_bytes;      /* uncompressed estimate of the open row group */
    rg_rec *rgs;
    int32_t n_rgs, rgs_cap;
    mcdc_parquet_file_info info;
    mcdc_parquet_column_stats *stats;
    int64_t *prof;         /* n * MCDC_PARQUET_STAGES ns (the columns' profiles) */
    mcdc_parquet_spare *spare; /* borrowed (options.spare): the buffers go back to it */
};

/* ---- buffers kept from one writer to the next (options.spare) -------------------
 * A writer grows its column chunks, pages and scratch from nothing; the
 * next data file of the same job grows the same buffers to the same sizes
 * again (each growth a copy of what is there, into fresh pages of memory).
 * A spare keeps their capacity between the two: the writer takes them at
 * open and gives them back at free. */
struct mcdc_parquet_spare {
    size_t bytes_max;      /* capacity kept at most */
    size_t bytes;          /* capacity kept now */
    int32_t n, cap;        /* columns held, room in cols */
    wcol *cols;            /* only their buffers are set */
    mcdc_pq_codec_ctx cctx[PQ_THREADS_MAX];
    bool taken;            /* a writer holds its buffers now */
};

/* A column's byte buffers a spare keeps, the column chunk first (the
 * largest growth), where a bound cuts the list. */
static const size_t pq_spare_bufs[] = {
    offsetof(wcol, chunk),       offsetof(wcol, page_vals),   offsetof(wcol, enc),
    offsetof(wcol, pbuf),        offsetof(wcol, strs.bytes),  offsetof(wcol, strs.len),
    offsetof(wcol, strs.pre),    offsetof(wcol, dictpage),    offsetof(wcol, dict_plain),
    offsetof(wcol, comp),        offsetof(wcol, trial.bytes), offsetof(wcol, trial.len),
    offsetof(wcol, trial.pre),   offsetof(wcol, trial.last),  offsetof(wcol, strs.last),
    offsetof(wcol, hdr),         offsetof(wcol, st_min),      offsetof(wcol, st_max),
    offsetof(wcol, fs_min),      offsetof(wcol, fs_max),
};

/* Whether `bytes` more fit in *budget (NULL: no bound); takes them. */
static bool spare_fits(size_t bytes, size_t *budget) {
    if (budget == NULL) return true;
    if (bytes > *budget) return false;
    *budget -= bytes;
    return true;
}

/* Moves the buffers of `from` that fit the budget (NULL: all) to `to`,
 * which holds none, emptied; what does not fit stays in `from`. Their
 * contents are not kept: each user starts them empty (chunk_reset,
 * dict_clear, the page's and the strings' own resets). */
static void wcol_move_bufs(wcol *to, wcol *from, size_t *budget) {
    for (size_t i = 0; i < sizeof pq_spare_bufs / sizeof pq_spare_bufs[0]; i++) {
        mcdc_buf *t = (mcdc_buf *)(void *)((char *)to + pq_spare_bufs[i]);
        mcdc_buf *f = (mcdc_buf *)(void *)((char *)from + pq_spare_bufs[i]);
        MCDC_ASSERT(t->data == NULL);
        if (f->data == NULL || !spare_fits(f->cap, budget)) continue;
        t->data = f->data;
        t->cap = f->cap;
        t->len = 0;
        *f = (mcdc_buf){0};
    }
    MCDC_ASSERT(to->idx == NULL && to->sel == NULL && to->pvalid == NULL);
    MCDC_ASSERT(to->htab == NULL && to->dict_offs == NULL);
    if (from->idx && spare_fits((size_t)from->idx_cap * sizeof *from->idx, budget)) {
        to->idx = from->idx;
        to->idx_cap = from->idx_cap;
        from->idx = NULL;
        from->idx_cap = 0;
    }
    if (from->sel && spare_fits(PQ_SLICE_ROWS_MAX * sizeof *from->sel, budget)) {
        to->sel = from->sel;
        from->sel = NULL;
    }
    if (from->pvalid && spare_fits((size_t)from->pvalid_cap, budget)) {
        to->pvalid = from->pvalid;
        to->pvalid_cap = from->pvalid_cap;
        from->pvalid = NULL;
        from->pvalid_cap = 0;
    }
    if (from->dict_offs && spare_fits((size_t)from->dict_offs_cap * sizeof *from->dict_offs,
                                      budget)) {
        to->dict_offs = from->dict_offs;
        to->dict_offs_cap = from->dict_offs_cap;
        from->dict_offs = NULL;
        from->dict_offs_cap = 0;
    }
    /* the hash table is cleared by the chunk_reset that starts every chunk */
    if (from->htab && spare_fits(((size_t)from->hmask + 1) * sizeof *from->htab, budget)) {
        to->htab = from->htab;
        to->hmask = from->hmask;
        from->htab = NULL;
        from->hmask = 0;
    }
}

static void wcol_free(wcol *c);

int mcdc_parquet_spare_create(mcdc_parquet_spare **out, size_t bytes_max, mcdc_error *err) {
    *out = mcdc_calloc(1, sizeof **out);
    if (*out == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (Parquet spare)");
    (*out)->bytes_max = bytes_max ? bytes_max : MCDC_PARQUET_SPARE_BYTES_MAX;
    return MCDC_OK;
}

/* Frees what s keeps (it stays usable, empty). */
static void spare_clear(mcdc_parquet_spare *s) {
    for (int32_t i = 0; i < s->n; i++) {
        wcol_free(&s->cols[i]);
        memset(&s->cols[i], 0, sizeof s->cols[i]);
    }
    for (int i = 0; i < PQ_THREADS_MAX; i++) mcdc_pq_codec_ctx_free(&s->cctx[i]);
    s->n = 0;
    s->bytes = 0;
}

void mcdc_parquet_spare_free(mcdc_parquet_spare *s) {
    if (s == NULL) return;
    MCDC_ASSERT(!s->taken); /* its writer was freed first */
    spare_clear(s);
    mcdc_free(s->cols);
    mcdc_free(s);
}

size_t mcdc_parquet_spare_bytes(const mcdc_parquet_spare *s) { return s ? s->bytes : 0; }

/* w's columns (before their own allocations) and compression contexts
 * start with what the spare keeps; the rest of it is freed. */
static void spare_take(mcdc_parquet_writer *w, mcdc_parquet_spare *s) {
    MCDC_ASSERT(!s->taken); /* one writer at a time */
    s->taken = true;
    w->spare = s;
    for (int32_t i = 0; i < w->n && i < s->n; i++) wcol_move_bufs(&w->cols[i], &s->cols[i], NULL);
    memcpy(w->cctx, s->cctx, sizeof w->cctx);
    memset(s->cctx, 0, sizeof s->cctx);
    spare_clear(s);
}

/* Gives w's buffers back to its spare, at most bytes_max of them (those
 * left are freed with w). Allocates nothing but the spare's column array,
 * and keeps nothing when that fails. */
static void spare_give(mcdc_parquet_writer *w) {
    mcdc_parquet_spare *s = w->spare;
    if (s == NULL) return;
    w->spare = NULL;
    s->taken = false;
    if (w->cols == NULL) return;
    if (s->cap < w->n) {
        wcol *p = mcdc_realloc(s->cols, (size_t)w->n * sizeof *p);
        if (p == NULL) return;
        memset(p + s->cap, 0, (size_t)(w->n - s->cap) * sizeof *p);
        s->cols = p;
        s->cap = w->n;
    }
    size_t budget = s->bytes_max;
    for (int32_t i = 0; i < w->n; i++) wcol_move_bufs(&s->cols[i], &w->cols[i], &budget);
    s->n = w->n;
    s->bytes = s->bytes_max - budget;
    memcpy(s->cctx, w->cctx, sizeof s->cctx);
    memset(w->cctx, 0, sizeof w->cctx);
}

/* ---- profile (mcdc_parquet_writer_profile_enable) ------------------------------- */

static int64_t prof_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
/* Starts timing c's work on this thread. */
static inline void prof_begin(wcol *c) {
    if (c->prof) c->prof_t = prof_clock();
}
/* Charges the CPU time since the last lap to stage s of c. */
static inline void prof_lap(wcol *c, mcdc_parquet_stage s) {
    if (c->prof == NULL) return;
    int64_t now = prof_clock();
    c->prof[s] += now - c->prof_t;
    c->prof_t = now;
}

/* ---- type mapping --------------------------------------------------------------- */

static int map_field(wcol *c, const mcdc_field *f, mcdc_error *err) {
    c->f = f;
    c->optional = f->nullable;
    switch (f->type) {
    case MCDC_TYPE_BOOL: c->phys = PQ_BOOLEAN; c->width = 0; break;
    case MCDC_TYPE_INT8:
    case MCDC_TYPE_INT16:
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: c->phys = PQ_INT32; c->width = 4; break;
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: c->phys = PQ_INT64; c->width = 8; break;
    case MCDC_TYPE_FLOAT: c->phys = PQ_FLOAT; c->width = 4; c->is_float = true; break;
    case MCDC_TYPE_DOUBLE: c->phys = PQ_DOUBLE; c->width = 8; c->is_float = true; break;
    case MCDC_TYPE_DECIMAL:
        if (f->precision < 1 || f->precision > 38 || f->scale < 0 || f->scale > f->precision)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "column '%s': decimal(%d,%d) is out of range (precision 1-38)",
                                  f->name, f->precision, f->scale);
        if (f->precision <= 9) {
            c->phys = PQ_INT32;
            c->width = 4;
        } else if (f->precision <= 18) {
            c->phys = PQ_INT64;
            c->width = 8;
        } else {
            c->phys = PQ_FLBA;
            c->type_len = c->width = mcdc_pq_decimal_bytes(f->precision);
        }
        break;
    case MCDC_TYPE_UTF8:
    case MCDC_TYPE_BINARY: c->phys = PQ_BYTE_ARRAY; c->width = 0; break;
    case MCDC_TYPE_FIXED_BINARY:
        if (f->byte_width <= 0)
            return mcdc_error_set(err, MCDC_E_INVALID, "column '%s': fixed binary width %d",
                                  f->name, f->byte_width);
        c->phys = PQ_FLBA;
        c->type_len = c->width = f->byte_width;
        break;
    default:
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED, "column '%s': type %d cannot be written "
                              "to Parquet", f->name, (int)f->type);
    }
    return MCDC_OK;
}

/* ---- statistics on PLAIN physical values ---------------------------------------- */

/* Compares two physical values (BA/FLBA: raw bytes, no length prefix). */
static int phys_cmp(const wcol *c, const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    switch (c->phys) {
    case PQ_BOOLEAN: return (int)a[0] - (int)b[0];
    case PQ_INT32: {
        int32_t x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        return (x > y) - (x < y);
    }
    case PQ_INT64: {
        int64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return (x > y) - (x < y);
    }
    case PQ_FLOAT: {
        float x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        return (x > y) - (x < y);
    }
    case PQ_DOUBLE: {
        double x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return (x > y) - (x < y);
    }
    default: {
        if (c->f->type == MCDC_TYPE_DECIMAL) { /* signed big-endian */
            int sa = a[0] & 0x80, sb = b[0] & 0x80;
            if (sa != sb) return sa ? -1 : 1;
        }
        size_t m = an < bn ? an : bn;
        int r = m ? memcmp(a, b, m) : 0;
        if (r) return r;
        return (an > bn) - (an < bn);
    }
    }
}

static int stat_merge(const wcol *c, bool *has, mcdc_buf *mn, mcdc_buf *mx, const uint8_t *lo,
                      size_t lo_n, const uint8_t *hi, size_t hi_n, mcdc_error *err) {
    int rc = MCDC_OK;
    if (!*has || phys_cmp(c, lo, lo_n, mn->data, mn->len) < 0) {
        mn->len = 0;
        rc = mcdc_buf_append(mn, lo, lo_n, err);
    }
    if (!rc && (!*has || phys_cmp(c, hi, hi_n, mx->data, mx->len) > 0)) {
        mx->len = 0;
        rc = mcdc_buf_append(mx, hi, hi_n, err);
    }
    if (!rc) *has = true;
    return rc;
}

/* The first 8 bytes of s (n bytes) as a big-endian number, zero-padded:
 * two values whose prefixes differ compare as their prefixes do. */
static inline uint64_t ba_prefix(const uint8_t *s, size_t n) {
    if (n >= 8) return __builtin_bswap64(pq_le64(s));
    if (n >= 4) /* the first 4 bytes and the last 4 (overlapping: the same bytes) */
        return (uint64_t)__builtin_bswap32(pq_le32(s)) << 32 |
               (uint64_t)__builtin_bswap32(pq_le32(s + n - 4)) << (8 * (8 - n));
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)s[i] << (56 - 8 * i);
    return v;
}

/* Running min/max of byte arrays: unsigned byte-wise order, shorter prefix
 * first. Every value between lo and hi starts with the bytes they share
 * (`at` of them): the 8 bytes after those, as a big-endian number
 * (zero-padded), decide without a byte-wise comparison when they differ from
 * lo's and hi's, also for values with a common head longer than 8 bytes
 * (names, paths, URLs). stale: lo or hi changed since at and the numbers
 * were taken (ba_minmax_add takes them again). */
typedef struct ba_minmax {
    const uint8_t *lo, *hi;
    size_t lo_n, hi_n, at;
    uint64_t lo_p, hi_p;
    bool stale;
} ba_minmax;

static inline void ba_minmax_first(ba_minmax *m, const uint8_t *s, size_t len) {
    m->lo = m->hi = s;
    m->lo_n = m->hi_n = len;
    m->at = 0;
    m->lo_p = m->hi_p = ba_prefix(s, len);
    m->stale = false;
}

static void ba_minmax_refresh(ba_minmax *m) {
    m->at = pq_common_prefix(m->lo, m->lo_n, m->hi, m->hi_n);
    m->lo_p = ba_prefix(m->lo + m->at, m->lo_n - m->at);
    m->hi_p = ba_prefix(m->hi + m->at, m->hi_n - m->at);
    m->stale = false;
}

/* Byte-wise order of a and b (shorter first when one is the other's
 * prefix), for values whose first 8 bytes are equal (LSN texts, keys with
 * a common head): the bytes after the shared prefix decide, found 8 bytes
 * a step, without a call to memcmp. */
static inline int ba_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    size_t m = an < bn ? an : bn, i = pq_common_prefix(a, an, b, bn);
    if (i < m) return a[i] < b[i] ? -1 : 1;
    return (an > bn) - (an < bn);
}

/* Returns 1 when s is the new min, 2 when the new max, else 0. Always
 * inlined (once per value; see mcdc_pq_strs_add). */
__attribute__((always_inline)) static inline int ba_minmax_add(ba_minmax *m, const uint8_t *s,
                                                              size_t len) {
    if (m->stale) ba_minmax_refresh(m);
    if (len >= m->at && pq_same_bytes(s, m->lo, m->at)) {
        uint64_t sp = ba_prefix(s + m->at, len - m->at);
        if (sp > m->lo_p && sp < m->hi_p) return 0;
        if (sp < m->lo_p) { /* below lo, so not above hi */
            m->lo = s, m->lo_n = len, m->stale = true;
            return 1;
        }
        if (sp > m->hi_p) {
            m->hi = s, m->hi_n = len, m->stale = true;
            return 2;
        }
    }
    if (ba_cmp(s, len, m->lo, m->lo_n) < 0) {
        m->lo = s, m->lo_n = len, m->stale = true;
        return 1;
    }
    if (ba_cmp(s, len, m->hi, m->hi_n) > 0) {
        m->hi = s, m->hi_n = len, m->stale = true;
        return 2;
    }
    return 0;
}

/* ba_minmax_add of a value s that follows pv (pn bytes, the value added
 * just before it, sharing its first pl bytes), *at_lo / *at_hi telling
 * whether pv is the min / max (and updated for s): a value at or past the
 * max that came just before it (LSNs, keys written in order) is the new
 * max without a comparison, likewise at or below the min. The order of s
 * and pv is the first byte after their shared prefix, which
 * DELTA_BYTE_ARRAY finds anyway; it is looked at only when pv is the min
 * or the max, so values in no order (where that is rare) take no
 * unpredictable branch for it. */
__attribute__((always_inline)) static inline void
ba_minmax_add_next(ba_minmax *m, const uint8_t *s, size_t len, const uint8_t *pv, size_t pn,
                   size_t pl, bool *at_lo, bool *at_hi) {
    if (*at_lo || *at_hi) {
        int ord = pl < len && pl < pn ? (int)s[pl] - (int)pv[pl] : (len > pn) - (len < pn);
        if (*at_hi && ord >= 0) {
            m->hi = s, m->hi_n = len, m->stale = true;
            *at_lo = *at_lo && ord == 0;
            return;
        }
        if (*at_lo && ord <= 0) { /* and s is not the max: s < pv, or pv is not the max */
            m->lo = s, m->lo_n = len, m->stale = true;
            *at_hi = false;
            return;
        }
    }
    int r = ba_minmax_add(m, s, len);
    *at_lo = r == 1;
    *at_hi = r == 2;
}

/* Min/max of the n physical values in c->phys; merged into chunk stats. */
static int slice_stats(wcol *c, int64_t n) {
    if (n == 0) return MCDC_OK;
    const uint8_t *p = c->pv;
    const uint8_t *lo = NULL, *hi = NULL;
    size_t lo_n = 0, hi_n = 0;
    uint8_t lob[8], hib[8];
    switch (c->phys) {
    case PQ_BOOLEAN: {
        uint8_t mn = 1, mx = 0;
        for (int64_t i = 0; i < n; i++) {
            mn &= p[i];
            mx |= p[i];
        }
        lob[0] = mn;
        hib[0] = mx;
        lo = lob, hi = hib, lo_n = hi_n = 1;
        break;
    }
    case PQ_INT32: {
        const int32_t *v = (const int32_t *)(const void *)p;
        int32_t mn = v[0], mx = v[0];
        for (int64_t i = 1; i < n; i++) {
            mn = v[i] < mn ? v[i] : mn;
            mx = v[i] > mx ? v[i] : mx;
        }
        memcpy(lob, &mn, 4);
        memcpy(hib, &mx, 4);
        lo = lob, hi = hib, lo_n = hi_n = 4;
        break;
    }
    case PQ_INT64: {
        const int64_t *v = (const int64_t *)(const void *)p;
        int64_t mn = v[0], mx = v[0];
        for (int64_t i = 1; i < n; i++) {
            mn = v[i] < mn ? v[i] : mn;
            mx = v[i] > mx ? v[i] : mx;
        }
        memcpy(lob, &mn, 8);
        memcpy(hib, &mx, 8);
        lo = lob, hi = hib, lo_n = hi_n = 8;
        break;
    }
    case PQ_FLOAT:
    case PQ_DOUBLE: {
        double mn = INFINITY, mx = -INFINITY;
        bool any = false;
        int64_t nans = 0;
        if (c->phys == PQ_FLOAT) {
            const float *v = (const float *)(const void *)p;
            for (int64_t i = 0; i < n; i++) {
                if (isnan(v[i])) {
                    nans++;
                    continue;
                }
                any = true;
                mn = v[i] < mn ? v[i] : mn;
                mx = v[i] > mx ? v[i] : mx;
            }
        } else {
            const double *v = (const double *)(const void *)p;
            for (int64_t i = 0; i < n; i++) {
                if (isnan(v[i])) {
                    nans++;
                    continue;
                }
                any = true;
                mn = v[i] < mn ? v[i] : mn;
                mx = v[i] > mx ? v[i] : mx;
            }
        }
        c->chunk_nans += nans;
        if (!any) return MCDC_OK;
        if (mn == 0) mn = -0.0; /* formats.md B7: -0.0 min, +0.0 max */
        if (mx == 0) mx = 0.0;
        if (c->phys == PQ_FLOAT) {
            float a = (float)mn, b = (float)mx;
            memcpy(lob, &a, 4);
            memcpy(hib, &b, 4);
            lo_n = hi_n = 4;
        } else {
            memcpy(lob, &mn, 8);
            memcpy(hib, &mx, 8);
            lo_n = hi_n = 8;
        }
        lo = lob, hi = hib;
        break;
    }
    case PQ_BYTE_ARRAY: {
        const uint8_t *q = p;
        ba_minmax m;
        ba_minmax_first(&m, q + 4, pq_le32(q));
        for (int64_t i = 0; i < n; i++) {
            size_t len = pq_le32(q);
            ba_minmax_add(&m, q + 4, len);
            q += 4 + len;
        }
        lo = m.lo, lo_n = m.lo_n, hi = m.hi, hi_n = m.hi_n;
        break;
    }
    case PQ_FLBA: {
        size_t w = (size_t)c->width;
        lo = hi = p;
        lo_n = hi_n = w;
        for (int64_t i = 1; i < n; i++) {
            const uint8_t *s = p + (size_t)i * w;
            if (phys_cmp(c, s, w, lo, w) < 0) lo = s;
            if (phys_cmp(c, s, w, hi, w) > 0) hi = s;
        }
        break;
    }
    default: MCDC_UNREACHABLE();
    }
    return stat_merge(c, &c->st_has, &c->st_min, &c->st_max, lo, lo_n, hi, hi_n, &c->err);
}

/* ---- slice -> PLAIN physical values ---------------------------------------------- */

static bool bit_at(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

/* Converts the non-null values of rows [r0, r1) to PLAIN form, appended to
 * o (c->pbuf, or straight into the page for PLAIN/DELTA pages: one copy
 * less). sel lists the non-null rows when the slice has nulls (n = their
 * count). */
static int to_phys(wcol *c, mcdc_buf *o, const mcdc_column *in, int64_t r0, const int64_t *sel,
                   int64_t n) {
    size_t base = o->len;
    int rc;
#define ROW(k) (sel ? sel[k] : r0 + (k))
    switch (c->f->type) {
    case MCDC_TYPE_BOOL: {
        rc = mcdc_buf_reserve(o, (size_t)n, &c->err);
        if (rc) return rc;
        for (int64_t k = 0; k < n; k++) (o->data + base)[k] = bit_at(in->values, ROW(k));
        o->len = base + (size_t)n;
        return MCDC_OK;
    }
    case MCDC_TYPE_INT8:
    case MCDC_TYPE_INT16: {
        rc = mcdc_buf_reserve(o, (size_t)n * 4, &c->err);
        if (rc) return rc;
        int32_t *d = (int32_t *)(void *)(o->data + base);
        if (c->f->type == MCDC_TYPE_INT8) {
            const int8_t *s = (const int8_t *)in->values;
            for (int64_t k = 0; k < n; k++) d[k] = s[ROW(k)];
        } else {
            const int16_t *s = (const int16_t *)(const void *)in->values;
            for (int64_t k = 0; k < n; k++) d[k] = s[ROW(k)];
        }
        o->len = base + (size_t)n * 4;
        return MCDC_OK;
    }
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32:
    case MCDC_TYPE_FLOAT:
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC:
    case MCDC_TYPE_DOUBLE:
    case MCDC_TYPE_FIXED_BINARY: {
        size_t w = (size_t)c->width;
        rc = mcdc_buf_reserve(o, (size_t)n * w, &c->err);
        if (rc) return rc;
        if (sel == NULL) {
            memcpy((o->data + base), in->values + (size_t)r0 * w, (size_t)n * w);
        } else if (w == 4) {
            uint32_t *d = (uint32_t *)(void *)(o->data + base);
            const uint32_t *s = (const uint32_t *)(const void *)in->values;
            for (int64_t k = 0; k < n; k++) d[k] = s[sel[k]];
        } else if (w == 8) {
            uint64_t *d = (uint64_t *)(void *)(o->data + base);
            const uint64_t *s = (const uint64_t *)(const void *)in->values;
            for (int64_t k = 0; k < n; k++) d[k] = s[sel[k]];
        } else {
            for (int64_t k = 0; k < n; k++)
                memcpy((o->data + base) + (size_t)k * w, in->values + (size_t)sel[k] * w, w);
        }
        o->len = base + (size_t)n * w;
        return MCDC_OK;
    }
    case MCDC_TYPE_DECIMAL: {
        size_t w = (size_t)c->width;
        rc = mcdc_buf_reserve(o, (size_t)n * w, &c->err);
        if (rc) return rc;
        const uint8_t *s = in->values;
        uint8_t *d = (o->data + base);
        if (c->phys == PQ_INT32) {
            for (int64_t k = 0; k < n; k++) memcpy(d + k * 4, s + ROW(k) * 16, 4);
        } else if (c->phys == PQ_INT64) {
            for (int64_t k = 0; k < n; k++) memcpy(d + k * 8, s + ROW(k) * 16, 8);
        } else {
            for (int64_t k = 0; k < n; k++) {
                const uint8_t *v = s + ROW(k) * 16;
                uint8_t *t = d + (size_t)k * w;
                for (size_t j = 0; j < w; j++) t[j] = v[w - 1 - j];
            }
        }
        o->len = base + (size_t)n * w;
        return MCDC_OK;
    }
    case MCDC_TYPE_UTF8:
    case MCDC_TYPE_BINARY: {
        const int32_t *off = in->offsets;
        /* With nulls, the bytes of the rows from the first to the last
         * listed: at least those of the listed rows, no pass over them. */
        size_t bytes = n == 0 ? 0
                       : sel == NULL ? (size_t)(off[r0 + n] - off[r0])
                                     : (size_t)(off[sel[n - 1] + 1] - off[sel[0]]);
        /* A short value (most are) is copied in 16-byte pieces, inline,
         * rather than by a call to memcpy: the pieces may read past its end
         * within the column's data buffer and write past it into room kept
         * after the values (PQ_COPY_SLACK, bytes the next value overwrites
         * or past o->len). */
        rc = mcdc_buf_reserve(o, bytes + (size_t)n * 4 + PQ_COPY_SLACK, &c->err);
        if (rc) return rc;
        uint8_t *d = (o->data + base);
        const int64_t cap = in->data_cap;
        for (int64_t k = 0; k < n; k++) {
            int64_t r = ROW(k);
            uint32_t len = (uint32_t)(off[r + 1] - off[r]);
            const uint8_t *v = in->data + off[r];
            pq_put_le32(d, len);
            if (len <= PQ_COPY_SLACK && off[r] + PQ_COPY_SLACK <= cap) {
                for (uint32_t j = 0; j < len; j += 16) memcpy(d + 4 + j, v + j, 16);
            } else if (len) {
                memcpy(d + 4, v, len);
            }
            d += 4 + len;
        }
        o->len = base + (size_t)(d - (o->data + base));
        return MCDC_OK;
    }
    default: MCDC_UNREACHABLE();
    }
#undef ROW
}

/* ---- dictionary ---------------------------------------------------------------- */

static uint64_t hash_mix(uint64_t h) { return mcdc_mix64(h); }

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    while (n >= 8) {
        h = (h ^ pq_le64(p)) * 0x100000001b3ULL;
        h = (h << 23) | (h >> 41);
        p += 8;
        n -= 8;
    }
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) t |= (uint64_t)p[i] << (8 * i);
    return hash_mix(h ^ t);
}

/* Value bytes of dictionary entry k. */
static const uint8_t *dict_entry(const wcol *c, uint32_t k, size_t *n) {
    if (c->phys == PQ_BYTE_ARRAY) {
        const uint8_t *p = c->dict_plain.data + c->dict_offs[k];
        *n = pq_le32(p);
        return p + 4;
    }
    *n = (size_t)c->width;
    return c->dict_plain.data + (size_t)k * (size_t)c->width;
}

static uint64_t key_hash(const wcol *c, const uint8_t *p, size_t n) {
    if (n == 4) return hash_mix(pq_le32(p));
    if (n == 8) return hash_mix(pq_le64(p));
    (void)c;
    return hash_bytes(p, n);
}

static int dict_grow(wcol *c) {
    uint32_t cap = c->htab ? (c->hmask + 1) * 2 : 1024;
    uint32_t *t = mcdc_calloc(cap, sizeof *t);
    if (t == NULL) return mcdc_error_set(&c->err, MCDC_E_NOMEM, "out of memory (dictionary)");
    uint32_t mask = cap - 1;
    for (uint32_t k = 0; k < c->dict_n; k++) {
        size_t n;
        const uint8_t *p = dict_entry(c, k, &n);
        uint32_t h = (uint32_t)key_hash(c, p, n) & mask;
        while (t[h]) h = (h + 1) & mask;
        t[h] = k + 1;
    }
    mcdc_free(c->htab);
    c->htab = t;
    c->hmask = mask;
    return MCDC_OK;
}

/* The dictionary index of key (kn bytes; BA and FLBA values of any width),
 * added when new. */
static int dict_insert(wcol *c, const uint8_t *key, size_t kn, uint32_t *out) {
    int rc;
    uint32_t h = (uint32_t)key_hash(c, key, kn) & c->hmask;
    uint32_t e;
    while ((e = c->htab[h]) != 0) {
        size_t en;
        const uint8_t *ep = dict_entry(c, e - 1, &en);
        if (en == kn && pq_same_bytes(ep, key, kn)) break;
        h = (h + 1) & c->hmask;
    }
    if (e == 0) {
        if (c->phys == PQ_BYTE_ARRAY) {
            if (c->dict_n == c->dict_offs_cap) {
                uint32_t cap = c->dict_offs_cap ? c->dict_offs_cap * 2 : 1024;
                uint32_t *p = mcdc_realloc(c->dict_offs, (size_t)cap * sizeof *p);
                if (p == NULL)
                    return mcdc_error_set(&c->err, MCDC_E_NOMEM, "out of memory (dictionary)");
                c->dict_offs = p;
                c->dict_offs_cap = cap;
            }
            c->dict_offs[c->dict_n] = (uint32_t)c->dict_plain.len;
            uint8_t len[4];
            pq_put_le32(len, (uint32_t)kn);
            rc = mcdc_buf_append(&c->dict_plain, len, 4, &c->err);
            if (!rc) rc = mcdc_buf_append(&c->dict_plain, key, kn, &c->err);
        } else {
            rc = mcdc_buf_append(&c->dict_plain, key, kn, &c->err);
        }
        if (rc) return rc;
        e = ++c->dict_n;
        c->htab[h] = e;
        if ((uint64_t)c->dict_n * 2 > (uint64_t)c->hmask + 1 && (rc = dict_grow(c))) return rc;
    }
    *out = e - 1;
    return MCDC_OK;
}

/* The index of one string value: the one before's again when the value
 * repeats it (a run: no probe), else dict_insert's. *prev, *prev_n: the
 * value before. */
static inline int dict_put(wcol *c, const uint8_t *key, size_t kn, const uint8_t **prev,
                           size_t *prev_n) {
    if (*prev && *prev_n == kn && pq_same_bytes(*prev, key, kn)) {
        c->idx[c->idx_n] = c->idx[c->idx_n - 1];
        c->idx_n++;
        return MCDC_OK;
    }
    *prev = key;
    *prev_n = kn;
    uint32_t e = 0;
    int rc = dict_insert(c, key, kn, &e);
    if (rc == MCDC_OK) c->idx[c->idx_n++] = e;
    return rc;
}

/* Whether rows [r0, r0+n) (n >= 2, none null) of a string/binary column all
 * hold the same value: every length is the first's, and the bytes repeat
 * with that period (one memcmp of the rows' bytes against themselves
 * shifted by a value). Checks the second and the last value first, so a
 * column of varied values costs two compares. */
static bool ba_rows_one_value(const mcdc_column *in, int64_t r0, int64_t n) {
    const int32_t *off = in->offsets + r0;
    int32_t len = off[1] - off[0];
    const uint8_t *p = in->data + off[0];
    if (off[2] - off[1] != len || off[n] - off[n - 1] != len ||
        (int64_t)(off[n] - off[0]) != (int64_t)len * n)
        return false;
    if (!pq_same_bytes(p, p + len, (size_t)len) ||
        !pq_same_bytes(p, in->data + off[n - 1], (size_t)len))
        return false;
    int32_t diff = 0;
    for (int64_t k = 2; k < n; k++) diff |= (off[k + 1] - off[k]) ^ len;
    return diff == 0 && (len == 0 || memcmp(p + len, p, (size_t)len * (size_t)(n - 1)) == 0);
}

/* Appends the page's last index k more times (room reserved). */
static void idx_repeat_last(wcol *c, int64_t k) {
    uint32_t e = c->idx[c->idx_n - 1];
    uint32_t *restrict d = c->idx + c->idx_n;
    for (int64_t i = 0; i < k; i++) d[i] = e;
    c->idx_n += k;
}

/* Room for n more indices in the page's idx, and the hash table. */
static int dict_reserve(wcol *c, int64_t n) {
    if (c->idx_n + n > c->idx_cap) {
        int64_t cap = c->idx_cap ? c->idx_cap : 4096;
        while (cap < c->idx_n + n) cap *= 2;
        uint32_t *p = mcdc_realloc(c->idx, (size_t)cap * sizeof *p);
        if (p == NULL) return mcdc_error_set(&c->err, MCDC_E_NOMEM, "out of memory (indices)");
        c->idx = p;
        c->idx_cap = cap;
    }
    return c->htab == NULL ? dict_grow(c) : MCDC_OK;
}

/* Maps the n physical values of c->phys to dictionary indices (appended to
 * the page's idx). */
static int dict_encode(wcol *c, const uint8_t *q, int64_t n) {
    int rc = dict_reserve(c, n);
    if (rc) return rc;
    bool ba = c->phys == PQ_BYTE_ARRAY;
    size_t w = (size_t)c->width;
    /* 4- and 8-byte values (ints, dates, timestamps, floats, small decimals):
     * compare as integers, no per-value width or type dispatch. */
#define DICT_FIXED(T)                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                  \
        T key;                                                                         \
        memcpy(&key, q + (size_t)i * sizeof(T), sizeof(T));                            \
        if (i > 0 && c->idx_n > 0 && memcmp(q + (size_t)(i - 1) * sizeof(T), &key, sizeof(T)) == 0) { \
            c->idx[c->idx_n] = c->idx[c->idx_n - 1]; /* a run: no probe */           \
            c->idx_n++;                                                                \
            continue;                                                                  \
        }                                                                              \
        uint32_t h = (uint32_t)hash_mix((uint64_t)key) & c->hmask;                     \
        uint32_t e;                                                                    \
        while ((e = c->htab[h]) != 0) {                                                \
            T v;                                                                       \
            memcpy(&v, c->dict_plain.data + (size_t)(e - 1) * sizeof(T), sizeof(T));   \
            if (v == key) break;                                                       \
            h = (h + 1) & c->hmask;                                                    \
        }                                                                              \
        if (e == 0) {                                                                  \
            if ((rc = mcdc_buf_append(&c->dict_plain, &key, sizeof(T), &c->err))) return rc; \
            e = ++c->dict_n;                                                           \
            c->htab[h] = e;                                                            \
            if ((uint64_t)c->dict_n * 2 > (uint64_t)c->hmask + 1 && (rc = dict_grow(c)))   \
                return rc;                                                             \
        }                                                                              \
        c->idx[c->idx_n++] = e - 1;                                                    \
    }
    /* one value in every row (a snapshot's commit time, its batch id): one
     * probe, the rest its index */
    int64_t repeat = 0;
    if (!ba && n > 1 && memcmp(q, q + w, w) == 0 && memcmp(q + w, q, (size_t)(n - 1) * w) == 0) {
        repeat = n - 1;
        n = 1;
    }
    if (!ba && w == 4) {
        DICT_FIXED(uint32_t)
        if (repeat) idx_repeat_last(c, repeat);
        return MCDC_OK;
    }
    if (!ba && w == 8) {
        DICT_FIXED(uint64_t)
        if (repeat) idx_repeat_last(c, repeat);
        return MCDC_OK;
    }
#undef DICT_FIXED
    const uint8_t *prev = NULL;
    size_t prev_n = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *key;
        size_t kn;
        if (ba) {
            kn = pq_le32(q);
            key = q + 4;
            q += 4 + kn;
        } else {
            key = q;
            kn = w;
            q += w;
        }
        if ((rc = dict_put(c, key, kn, &prev, &prev_n))) return rc;
    }
    if (repeat) idx_repeat_last(c, repeat);
    return MCDC_OK;
}

/* Maps the n non-null values of a string/binary column (rows [r0, r0+n) or
 * the rows listed in sel) to dictionary indices straight from the batch: a
 * column that keeps its dictionary needs no PLAIN copy of its values. */
static int dict_encode_input(wcol *c, const mcdc_column *in, int64_t r0, const int64_t *sel,
                             int64_t n) {
    MCDC_ASSERT(c->phys == PQ_BYTE_ARRAY && c->idx_n + n <= c->idx_cap && c->htab != NULL);
    const int32_t *off = in->offsets;
    const uint8_t *prev = NULL;
    size_t prev_n = 0;
    if (sel == NULL && n > 1 && ba_rows_one_value(in, r0, n)) {
        /* one value in every row (a snapshot's LSN, its id): one probe */
        int rc = dict_put(c, in->data + off[r0], (size_t)(off[r0 + 1] - off[r0]), &prev, &prev_n);
        if (rc) return rc;
        idx_repeat_last(c, n - 1);
        return MCDC_OK;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t r = sel ? sel[k] : r0 + k;
        const uint8_t *key = in->data + off[r];
        size_t kn = (size_t)(off[r + 1] - off[r]);
        int rc = dict_put(c, key, kn, &prev, &prev_n);
        if (rc) return rc;
    }
    return MCDC_OK;
}

/* ---- pages ------------------------------------------------------------------- */

/* The compression context of the thread encoding c (one warm workspace
 * per thread, whichever column it encodes). */
static mcdc_pq_codec_ctx *codec_ctx(wcol *c, mcdc_parquet_writer *w) {
    MCDC_ASSERT(c->worker >= 0 && c->worker < PQ_THREADS_MAX);
    return &w->cctx[c->worker];
}

static void set_enc(wcol *c, int e) { c->chunk_encodings |= 1u << e; }

/* The page's header into c->hdr; comp_n: the bytes after it (levels
 * included). */
static int page_header(wcol *c, int type, size_t uncomp_n, size_t comp_n, size_t levels_n,
                       int32_t num_values, int encoding) {
    if (uncomp_n > INT32_MAX || comp_n > INT32_MAX)
        return mcdc_error_set(&c->err, MCDC_E_LIMIT, "page larger than 2 GiB");
    c->hdr.len = 0;
    mcdc_thrift_writer tw;
    mcdc_thrift_writer_init(&tw, &c->hdr, &c->err);
    mcdc_thrift_struct_begin(&tw);
    mcdc_thrift_field_i32(&tw, 1, type);
    mcdc_thrift_field_i32(&tw, 2, (int32_t)uncomp_n);
    mcdc_thrift_field_i32(&tw, 3, (int32_t)comp_n);
    if (type == PQ_DATA_PAGE) {
        mcdc_thrift_field_struct(&tw, 5);
        mcdc_thrift_field_i32(&tw, 1, num_values);
        mcdc_thrift_field_i32(&tw, 2, encoding);
        mcdc_thrift_field_i32(&tw, 3, PQ_RLE);
        mcdc_thrift_field_i32(&tw, 4, PQ_RLE);
        mcdc_thrift_struct_end(&tw);
    } else if (type == PQ_DICTIONARY_PAGE) {
        mcdc_thrift_field_struct(&tw, 7);
        mcdc_thrift_field_i32(&tw, 1, num_values);
        mcdc_thrift_field_i32(&tw, 2, PQ_PLAIN);
        mcdc_thrift_struct_end(&tw);
    } else {
        mcdc_thrift_field_struct(&tw, 8);
        mcdc_thrift_field_i32(&tw, 1, num_values);
        mcdc_thrift_field_i32(&tw, 2, (int32_t)c->page_nulls);
        mcdc_thrift_field_i32(&tw, 3, num_values);
        mcdc_thrift_field_i32(&tw, 4, encoding);
        mcdc_thrift_field_i32(&tw, 5, (int32_t)levels_n);
        mcdc_thrift_field_i32(&tw, 6, 0);
        mcdc_thrift_field_bool(&tw, 7, c->codec != MCDC_PARQUET_UNCOMPRESSED);
        mcdc_thrift_struct_end(&tw);
    }
    mcdc_thrift_struct_end(&tw);
    return tw.rc;
}

/* Appends a page (header, levels, body) to the column chunk, or the
 * dictionary page to its own buffer. A compressed body is compressed
 * straight into that buffer, after room for a header whose sizes are
 * guessed (the compressed size as large as the body), not into scratch and
 * then copied: the header is written once the size is known, and when its
 * varint is not as long as the guess's (a body that compressed below 8 KiB,
 * or one that grew) the page's bytes move to meet it. */
static int emit_page(wcol *c, mcdc_parquet_writer *w, int type, const uint8_t *levels,
                     size_t levels_n, const uint8_t *body, size_t body_n, int32_t num_values,
                     int encoding) {
    const mcdc_parquet_write_options *o = &w->opts;
    /* v1: levels are part of the compressed body. v2: levels stay raw. */
    size_t uncomp_n = body_n + levels_n;
    mcdc_buf *dst = type == PQ_DICTIONARY_PAGE ? &c->dictpage : &c->chunk;
    size_t start = dst->len;
    prof_lap(c, MCDC_PARQUET_STAGE_ENCODE);
    int rc = page_header(c, type, uncomp_n, uncomp_n, levels_n, num_values, encoding);
    if (rc) return rc;
    size_t guess_n = c->hdr.len;
    rc = mcdc_buf_append(dst, c->hdr.data, guess_n, &c->err);
    if (!rc && levels_n) rc = mcdc_buf_append(dst, levels, levels_n, &c->err);
    if (c->codec == MCDC_PARQUET_UNCOMPRESSED) {
        if (!rc) rc = mcdc_buf_append(dst, body, body_n, &c->err);
        if (rc) {
            dst->len = start;
            return rc;
        }
        prof_lap(c, MCDC_PARQUET_STAGE_COPY);
        c->chunk_uncomp += (int64_t)dst->len - (int64_t)start;
        return MCDC_OK;
    }
    prof_lap(c, MCDC_PARQUET_STAGE_COPY);
    if (!rc) rc = mcdc_pq_compress(codec_ctx(c, w), c->codec, o->level, body, body_n, dst, &c->err);
    prof_lap(c, MCDC_PARQUET_STAGE_COMPRESS);
    size_t comp_n = dst->len - start - guess_n; /* levels and the compressed body */
    if (!rc) rc = page_header(c, type, uncomp_n, comp_n, levels_n, num_values, encoding);
    if (rc) {
        dst->len = start;
        return rc;
    }
    size_t hdr_n = c->hdr.len;
    if (hdr_n != guess_n) { /* longer too: a body that did not compress */
        if (hdr_n > guess_n && (rc = mcdc_buf_reserve(dst, hdr_n - guess_n, &c->err))) {
            dst->len = start;
            return rc;
        }
        memmove(dst->data + start + hdr_n, dst->data + start + guess_n, comp_n);
        dst->len = start + hdr_n + comp_n;
    }
    memcpy(dst->data + start, c->hdr.data, hdr_n);
    prof_lap(c, MCDC_PARQUET_STAGE_ENCODE);
    c->chunk_uncomp += (int64_t)(hdr_n + uncomp_n);
    return MCDC_OK;
}

static int flush_page(wcol *c, mcdc_parquet_writer *w) {
    if (c->page_rows == 0) return MCDC_OK;
    int rc;
    bool v2 = w->opts.data_page_v2;
    mcdc_buf *e = &c->enc;
    e->len = 0;
    size_t levels_n = 0, strs_body_n = 0;
    bool direct = false;
    const uint8_t *strs_body = NULL;
    if (c->optional) {
        if (!v2) {
            uint8_t zero[4] = {0};
            if ((rc = mcdc_buf_append(e, zero, 4, &c->err))) return rc;
        }
        if ((rc = mcdc_pq_rle_encode_bitmap(e, c->pvalid, c->page_rows, &c->err))) return rc;
        if (!v2) pq_put_le32(e->data, (uint32_t)(e->len - 4));
        else levels_n = e->len;
        set_enc(c, PQ_RLE);
        prof_lap(c, MCDC_PARQUET_STAGE_LEVELS);
    }
    int encoding;
    if (c->page_is_dict) {
        int width = pq_bit_width(c->dict_n > 1 ? c->dict_n - 1 : 1);
        if ((rc = mcdc_buf_append_byte(e, (uint8_t)width, &c->err))) return rc;
        if ((rc = mcdc_pq_rle_encode(e, c->idx, c->idx_n, width, &c->err))) return rc;
        encoding = PQ_RLE_DICTIONARY;
    } else if (c->phys == PQ_BOOLEAN) {
        int64_t n = (int64_t)(c->page_vals.len - c->head);
        const uint8_t *v = c->page_vals.data + c->head;
        size_t nb = (size_t)(n + 7) / 8;
        if ((rc = mcdc_buf_reserve(e, nb, &c->err))) return rc;
        uint8_t *d = e->data + e->len;
        memset(d, 0, nb);
        for (int64_t i = 0; i < n; i++) d[i >> 3] |= (uint8_t)(v[i] << (i & 7));
        e->len += nb;
        encoding = PQ_PLAIN;
    } else if (c->delta && c->phys == PQ_BYTE_ARRAY) {
        /* the values are in c->strs, or (the page began before the
         * choice) PLAIN in page_vals */
        if (c->strs.n > 0)
            rc = mcdc_pq_strs_emit_body(&c->strs, e, levels_n, &strs_body, &strs_body_n,
                                        &c->err);
        else rc = mcdc_pq_delta_strings_encode(e, c->page_vals.data + c->head,
                                               c->page_vals.len - c->head,
                                               c->page_rows - c->page_nulls, c->delta_prefix,
                                               &c->trial, &c->err);
        if (rc) return rc;
        encoding = c->delta_prefix ? PQ_DELTA_BYTE_ARRAY : PQ_DELTA_LENGTH_BYTE_ARRAY;
    } else if (c->delta) {
        int64_t n = (int64_t)(c->page_vals.len - c->head) / c->width;
        if ((rc = mcdc_pq_delta_encode_plain(e, c->page_vals.data + c->head, n, c->width,
                                             &c->err)))
            return rc;
        encoding = PQ_DELTA_BINARY_PACKED;
    } else if (c->optional && !v2 && e->len <= c->head) {
        /* v1: levels + values, one body: the levels go into the room left
         * before the values */
        direct = true;
        encoding = PQ_PLAIN;
    } else if ((c->optional && !v2) || c->page_vals.len == c->head) {
        if ((rc = mcdc_buf_append(e, c->page_vals.data + c->head, c->page_vals.len - c->head,
                                  &c->err)))
            return rc;
        encoding = PQ_PLAIN;
    } else { /* the PLAIN values are the body as they are */
        direct = true;
        encoding = PQ_PLAIN;
    }
    set_enc(c, encoding);
    if (c->page_rows > INT32_MAX) return mcdc_error_set(&c->err, MCDC_E_LIMIT, "page rows");
    /* direct: the body starts where its v1 levels were copied (none for a
     * required column, or v2, whose levels stay in e) */
    size_t lv = direct && c->optional && !v2 ? e->len : 0;
    if (lv) memcpy(c->page_vals.data + c->head - lv, e->data, lv);
    const uint8_t *body = direct ? c->page_vals.data + c->head - lv : e->data + levels_n;
    size_t body_n = direct ? c->page_vals.len - c->head + lv : e->len - levels_n;
    if (strs_body) { /* levels (v1) and lengths moved before the suffixes in place */
        body = strs_body;
        body_n = strs_body_n;
    }
    rc = emit_page(c, w, v2 ? PQ_DATA_PAGE_V2 : PQ_DATA_PAGE, e->data, levels_n, body, body_n,
                   (int32_t)c->page_rows, encoding);
    if (rc) return rc;
    c->page_rows = c->page_nulls = c->page_bytes = 0;
    c->idx_n = 0;
    c->page_vals.len = c->head;
    c->page_is_dict = c->dict_on;
    return MCDC_OK;
}

/* Lists the rows of [r0, r1) whose validity bit is set in sel; returns
 * their count. Branch-free (nulls fall at random, so a branch per row
 * mispredicts), a byte of 8 valid rows at a time. */
static int64_t select_valid(int64_t *restrict sel, const uint8_t *restrict bits, int64_t r0,
                            int64_t r1) {
    int64_t nv = 0, r = r0;
    for (; r < r1 && (r & 7); r++) {
        sel[nv] = r;
        nv += bit_at(bits, r);
    }
    for (; r + 8 <= r1; r += 8) {
        unsigned b = bits[r >> 3];
        if (b == 0xFF) {
            for (int k = 0; k < 8; k++) sel[nv + k] = r + k;
            nv += 8;
            continue;
        }
        for (int k = 0; k < 8; k++) {
            sel[nv] = r + k;
            nv += (b >> k) & 1;
        }
    }
    for (; r < r1; r++) {
        sel[nv] = r;
        nv += bit_at(bits, r);
    }
    return nv;
}

/* Copies n bits from src (starting at bit s) to dst (starting at bit d),
 * whose bits from d on are zero: 8 bits a step. */
static void bits_or_copy(uint8_t *restrict dst, int64_t d, const uint8_t *restrict src, int64_t s,
                         int64_t n) {
    int64_t i = 0;
    for (; i < n && ((d + i) & 7); i++)
        dst[(d + i) >> 3] |= (uint8_t)(bit_at(src, s + i) << ((d + i) & 7));
    /* d + i is byte-aligned now: each output byte takes 8 source bits,
     * which straddle two source bytes unless s + i is aligned too. */
    uint8_t *o = dst + ((d + i) >> 3);
    int64_t sb = s + i;
    int sh = (int)(sb & 7);
    const uint8_t *p = src + (sb >> 3);
    int64_t full = (n - i) / 8;
    if (sh == 0) {
        memcpy(o, p, (size_t)full);
    } else {
        for (int64_t k = 0; k < full; k++)
            o[k] = (uint8_t)((p[k] >> sh) | (p[k + 1] << (8 - sh)));
    }
    i += full * 8;
    for (; i < n; i++) dst[(d + i) >> 3] |= (uint8_t)(bit_at(src, s + i) << ((d + i) & 7));
}

/* Appends the validity of rows [r0, r1) to the page's bitmap. */
static int page_valid_append(wcol *c, const mcdc_column *in, int64_t r0, int64_t r1) {
    int64_t n = r1 - r0;
    int64_t need = (c->page_rows + n + 7) / 8 + 8;
    if (need > c->pvalid_cap) {
        int64_t cap = c->pvalid_cap ? c->pvalid_cap : 1024;
        while (cap < need) cap *= 2;
        uint8_t *p = mcdc_realloc(c->pvalid, (size_t)cap);
        if (p == NULL) return mcdc_error_set(&c->err, MCDC_E_NOMEM, "out of memory (levels)");
        c->pvalid = p;
        c->pvalid_cap = cap;
    }
    int64_t at = c->page_rows;
    if (at % 8 == 0) memset(c->pvalid + at / 8, 0, (size_t)(need - at / 8));
    else memset(c->pvalid + at / 8 + 1, 0, (size_t)(need - at / 8 - 1));
    if (in->validity == NULL) {
        int64_t i = 0;
        for (; i < n && ((at + i) & 7); i++) c->pvalid[(at + i) >> 3] |= (uint8_t)(1u << ((at + i) & 7));
        int64_t full = (n - i) / 8;
        memset(c->pvalid + ((at + i) >> 3), 0xFF, (size_t)full);
        i += full * 8;
        for (; i < n; i++) c->pvalid[(at + i) >> 3] |= (uint8_t)(1u << ((at + i) & 7));
        return MCDC_OK;
    }
    if (at % 8 == 0 && r0 % 8 == 0) {
        memcpy(c->pvalid + at / 8, in->validity + r0 / 8, (size_t)(n + 7) / 8);
        if (n % 8) c->pvalid[(at + n) / 8] &= (uint8_t)((1u << (n % 8)) - 1);
        return MCDC_OK;
    }
    bits_or_copy(c->pvalid, at, in->validity, r0, n);
    return MCDC_OK;
}

/* PLAIN bytes of rows [r0, r1) (upper estimate for var types counts nulls' 0). */
static int64_t plain_bytes(const wcol *c, const mcdc_column *in, int64_t r0, int64_t r1) {
    if (c->phys == PQ_BYTE_ARRAY) return (int64_t)(in->offsets[r1] - in->offsets[r0]) + 4 * (r1 - r0);
    if (c->phys == PQ_BOOLEAN) return (r1 - r0 + 7) / 8;
    return (r1 - r0) * c->width;
}

/* Rows from r0 that fit in `room` PLAIN bytes (at least 1). */
static int64_t rows_fitting(const wcol *c, const mcdc_column *in, int64_t r0, int64_t r1,
                            int64_t room) {
    int64_t max = r1 - r0;
    if (max > PQ_SLICE_ROWS_MAX) max = PQ_SLICE_ROWS_MAX;
    if (room <= 0) return 1;
    if (c->phys == PQ_BYTE_ARRAY) {
        int64_t lo = 1, hi = max;
        if (plain_bytes(c, in, r0, r0 + max) <= room) return max;
        while (lo < hi) { /* largest k with bytes(k) <= room */
            int64_t mid = lo + (hi - lo + 1) / 2;
            if (plain_bytes(c, in, r0, r0 + mid) <= room) lo = mid;
            else hi = mid - 1;
        }
        return lo;
    }
    int64_t per = c->phys == PQ_BOOLEAN ? 1 : c->width;
    int64_t k = c->phys == PQ_BOOLEAN ? room * 8 : room / per;
    if (k < 1) k = 1;
    return k < max ? k : max;
}

static void dict_clear(wcol *c) {
    c->dict_plain.len = 0;
    c->dict_n = 0;
    if (c->htab) memset(c->htab, 0, ((size_t)c->hmask + 1) * sizeof *c->htab);
}

/* Compressed size of n bytes (or n itself when the file is uncompressed). */
static int trial_size(wcol *c, mcdc_parquet_writer *w, const uint8_t *p, size_t n, size_t *out) {
    if (c->codec_next == MCDC_PARQUET_UNCOMPRESSED || n == 0) {
        *out = n;
        return MCDC_OK;
    }
    c->comp.len = 0;
    int rc = mcdc_pq_compress(codec_ctx(c, w), c->codec_next, w->opts.level, p, n, &c->comp,
                              &c->err);
    *out = c->comp.len;
    return rc;
}

/* Chooses the column's encoding for the rest of the file from the nv PLAIN
 * values of c->pbuf (and, when the page is dictionary-encoded, their indices,
 * the last nv of c->idx): the smallest compressed sample wins; the
 * dictionary must also beat the others by PQ_CHOOSE_DICT_MARGIN since it
 * costs a hash probe per value. */
static int choose_encoding(wcol *c, mcdc_parquet_writer *w, int64_t nv) {
    int rc;
    c->chosen = true;
    int64_t k = nv < PQ_CHOOSE_SAMPLE ? nv : PQ_CHOOSE_SAMPLE;
    bool ints = c->phys == PQ_INT32 || c->phys == PQ_INT64;
    bool strs = c->phys == PQ_BYTE_ARRAY;
    bool dict = c->page_is_dict && c->dict_keep;
    if (!ints && !strs && !dict) return MCDC_OK;
    const uint32_t *ix = dict ? c->idx + (c->idx_n - nv) : NULL;
    uint32_t mx = 0;
    if (dict) {
        for (int64_t i = 0; i < k; i++) mx = ix[i] > mx ? ix[i] : mx;
        if ((int64_t)(mx + 1) * PQ_CHOOSE_FEW <= k) return MCDC_OK; /* few distinct values */
    }
    size_t sample_n = c->phys == PQ_BYTE_ARRAY ? 0 : (size_t)(k * c->width);
    if (c->phys == PQ_BYTE_ARRAY) {
        const uint8_t *q = c->pv;
        for (int64_t i = 0; i < k; i++) q += 4 + pq_le32(q);
        sample_n = (size_t)(q - c->pv);
    }
    size_t plain_c = 0, delta_c = SIZE_MAX, dict_c = SIZE_MAX;
    /* the smallest uncompressed delta encoding, and whether it shares prefixes */
    size_t small_raw = SIZE_MAX;
    bool small_prefix = false;
    if ((rc = trial_size(c, w, c->pv, sample_n, &plain_c))) return rc;
    mcdc_buf *e = &c->enc;
    if (ints) {
        e->len = 0;
        if ((rc = mcdc_pq_delta_encode_plain(e, c->pv, k, c->width, &c->err))) return rc;
        small_raw = e->len;
        if ((rc = trial_size(c, w, e->data, e->len, &delta_c))) return rc;
    }
    /* strings: their lengths apart (DELTA_LENGTH_BYTE_ARRAY), and each
     * without the prefix it shares with the one before (DELTA_BYTE_ARRAY:
     * LSNs, keys, sorted codes) */
    for (int prefix = 0; strs && prefix < 2; prefix++) {
        size_t raw_n, comp_n;
        e->len = 0;
        if ((rc = mcdc_pq_delta_strings_encode(e, c->pv, sample_n, k, prefix, &c->trial,
                                               &c->err)))
            return rc;
        raw_n = e->len;
        if ((rc = trial_size(c, w, e->data, e->len, &comp_n))) return rc;
        if (comp_n < delta_c) {
            delta_c = comp_n;
            c->delta_prefix = prefix;
        }
        if (raw_n < small_raw) {
            small_raw = raw_n;
            small_prefix = prefix;
        }
    }
    if (dict) {
        int width = pq_bit_width(mx > 0 ? mx : 1);
        e->len = 0;
        if ((rc = mcdc_buf_append_byte(e, (uint8_t)width, &c->err))) return rc;
        if ((rc = mcdc_pq_rle_encode(e, ix, k, width, &c->err))) return rc;
        size_t idx_c = 0, ent_c = 0;
        if ((rc = trial_size(c, w, e->data, e->len, &idx_c))) return rc;
        /* entries are numbered in order of first appearance */
        size_t ent_n = c->phys == PQ_BYTE_ARRAY
                           ? (mx + 1 < c->dict_n ? c->dict_offs[mx + 1] : c->dict_plain.len)
                           : (size_t)(mx + 1) * (size_t)c->width;
        if ((rc = trial_size(c, w, c->dict_plain.data, ent_n, &ent_c))) return rc;
        dict_c = idx_c + ent_c;
    }
    size_t best = plain_c < delta_c ? plain_c : delta_c;
    c->delta = (ints || strs) && delta_c < plain_c;
    c->dict_keep = dict && (double)dict_c * PQ_CHOOSE_DICT_MARGIN <= (double)best;
    /* Values that compress little (random ids, hashes, decimals, DELTA-packed
     * noise) are stored uncompressed, in their smallest encoding: the codec
     * is per column chunk, so readers just skip decompressing them. */
    size_t raw = small_raw < sample_n ? small_raw : sample_n;
    if (!c->dict_keep && c->codec_next != MCDC_PARQUET_UNCOMPRESSED &&
        (double)best >= (double)raw * PQ_CHOOSE_COMPRESS_MIN) {
        c->codec_next = MCDC_PARQUET_UNCOMPRESSED;
        if (c->chunk.len == 0 && c->dictpage.len == 0) c->codec = c->codec_next;
        c->delta = (ints || strs) && small_raw < sample_n;
        if (strs && c->delta) c->delta_prefix = small_prefix;
    }
    return MCDC_OK;
}

/* The rest of encode_slice for a string/binary column that chose its
 * dictionary: indices straight from the batch, statistics from the
 * dictionary at the chunk's end (task_finish); PLAIN values only when the
 * dictionary overflows on a page that holds nothing else. */
static int encode_slice_dict_input(wcol *c, mcdc_parquet_writer *w, const mcdc_column *in,
                                   int64_t r0, const int64_t *sel, int64_t nv) {
    int rc = dict_reserve(c, nv);
    if (!rc) rc = dict_encode_input(c, in, r0, sel, nv);
    if (rc) return rc;
    prof_lap(c, MCDC_PARQUET_STAGE_DICT);
    if (c->dict_plain.len > (size_t)w->opts.dict_bytes_max) {
        c->dict_keep = false; /* too many distinct values: not again in this file */
        c->dict_on = false;
        if (c->idx_n == nv && !(c->chunk_encodings & (1u << PQ_RLE_DICTIONARY))) {
            /* The page holds only this slice: redo it as PLAIN. */
            c->page_is_dict = false;
            c->idx_n = 0;
            dict_clear(c);
            size_t o0 = c->page_vals.len;
            if ((rc = to_phys(c, &c->page_vals, in, r0, sel, nv))) return rc;
            c->pv = c->page_vals.data + o0;
            c->pv_len = c->page_vals.len - o0;
            if ((rc = slice_stats(c, nv))) return rc;
        } else {
            if ((rc = flush_page(c, w))) return rc;
            c->page_is_dict = false;
        }
    }
    if (c->page_bytes >= w->opts.page_bytes && (rc = flush_page(c, w))) return rc;
    return MCDC_OK;
}

/* The rest of encode_slice for a string column that chose DELTA_BYTE_ARRAY
 * or DELTA_LENGTH_BYTE_ARRAY: one pass over the batch's values adds each
 * to the page's streams and to the statistics; no PLAIN copy. */
static int encode_slice_strs(wcol *c, const mcdc_column *in, int64_t r0, const int64_t *sel,
                             int64_t nv) {
    if (nv == 0) return MCDC_OK;
    const int32_t *off = in->offsets;
    int64_t first = sel ? sel[0] : r0, last = sel ? sel[nv - 1] : r0 + nv - 1;
    pq_strs *s = &c->strs;
    s->prefix = c->delta_prefix;
    int rc = mcdc_pq_strs_reserve(s, nv, (size_t)(off[last + 1] - off[first]), &c->err);
    if (rc) return rc;
    const int64_t safe_end = in->data_cap - 32; /* 16-byte pieces read up to 32 past */
    ba_minmax m;
    ba_minmax_first(&m, in->data + off[first], (size_t)(off[first + 1] - off[first]));
    pq_strs_cur cur = pq_strs_open(s);
    if (s->prefix) {
        /* the value before each one (but the first) is this slice's */
        bool at_lo = true, at_hi = true;
        mcdc_pq_strs_add(&cur, m.lo, m.lo_n, off[first + 1] <= safe_end);
        for (int64_t k = 1; k < nv; k++) {
            int64_t r = sel ? sel[k] : r0 + k;
            const uint8_t *v = in->data + off[r], *pv = cur.prev;
            size_t len = (size_t)(off[r + 1] - off[r]), pn = cur.prev_n;
            size_t pl = mcdc_pq_strs_add(&cur, v, len, off[r + 1] <= safe_end);
            ba_minmax_add_next(&m, v, len, pv, pn, pl, &at_lo, &at_hi);
        }
    } else {
        for (int64_t k = 0; k < nv; k++) {
            int64_t r = sel ? sel[k] : r0 + k;
            const uint8_t *v = in->data + off[r];
            size_t len = (size_t)(off[r + 1] - off[r]);
            ba_minmax_add(&m, v, len);
            mcdc_pq_strs_add(&cur, v, len, off[r + 1] <= safe_end);
        }
    }
    pq_strs_close(s, &cur);
    prof_lap(c, MCDC_PARQUET_STAGE_ENCODE);
    if ((rc = mcdc_pq_strs_keep_last(s, &c->err))) return rc;
    return stat_merge(c, &c->st_has, &c->st_min, &c->st_max, m.lo, m.lo_n, m.hi, m.hi_n,
                      &c->err);
}

static int encode_slice(wcol *c, mcdc_parquet_writer *w, const mcdc_column *in, int64_t r0,
                        int64_t r1) {
    int rc;
    int64_t n = r1 - r0;
    const int64_t *sel = NULL;
    int64_t nv = n;
    if (in->validity != NULL && in->null_count > 0) {
        nv = select_valid(c->sel, in->validity, r0, r1);
        if (nv < n) sel = c->sel;
    }
    if (c->optional && (rc = page_valid_append(c, in, r0, r1))) return rc;
    prof_lap(c, MCDC_PARQUET_STAGE_LEVELS);
    c->page_rows += n;
    c->page_nulls += n - nv;
    c->chunk_nulls += n - nv;
    c->chunk_values += n;
    c->page_bytes += plain_bytes(c, in, r0, r1);
    if (c->page_is_dict && c->chosen && c->dict_keep && c->phys == PQ_BYTE_ARRAY)
        return encode_slice_dict_input(c, w, in, r0, sel, nv);
    if (!c->page_is_dict && c->chosen && c->delta && c->phys == PQ_BYTE_ARRAY &&
        c->page_vals.len == c->head) {
        if ((rc = encode_slice_strs(c, in, r0, sel, nv))) return rc;
        if (c->page_bytes >= w->opts.page_bytes && (rc = flush_page(c, w))) return rc;
        return MCDC_OK;
    }
    mcdc_buf *o = c->page_is_dict ? &c->pbuf : &c->page_vals;
    if (c->page_is_dict) c->pbuf.len = 0;
    size_t o0 = o->len;
    if ((rc = to_phys(c, o, in, r0, sel, nv))) return rc;
    c->pv = o->data + o0;
    c->pv_len = o->len - o0;
    prof_lap(c, MCDC_PARQUET_STAGE_CONVERT);
    /* Dictionary-encoded values get their statistics from the dictionary
     * when the chunk ends (each distinct value once: task_finish); floats
     * count NaNs per value, so they are taken here. */
    bool stats_later = c->page_is_dict && !c->is_float;
    if (!stats_later && (rc = slice_stats(c, nv))) return rc;
    prof_lap(c, MCDC_PARQUET_STAGE_STATS);
    if (c->page_is_dict) {
        /* Choosing: only the sample is hashed before the choice, so a column
         * that gives its dictionary up never hashes the rest. */
        bool choosing = !c->chosen && nv >= PQ_CHOOSE_VALUES_MIN;
        int64_t first = choosing && nv > PQ_CHOOSE_SAMPLE ? PQ_CHOOSE_SAMPLE : nv;
        if ((rc = dict_encode(c, c->pv, first))) return rc;
        /* the page holds no dictionary index from before this slice */
        bool alone = c->idx_n == first && !(c->chunk_encodings & (1u << PQ_RLE_DICTIONARY));
        if (choosing && (rc = choose_encoding(c, w, first))) return rc;
        if (first < nv && (c->dict_keep || !alone)) {
            const uint8_t *q = c->pv;
            if (c->phys == PQ_BYTE_ARRAY)
                for (int64_t i = 0; i < first; i++) q += 4 + pq_le32(q);
            else
                q += (size_t)first * (size_t)c->width;
            if ((rc = dict_encode(c, q, nv - first))) return rc;
        }
        if (c->dict_keep && c->dict_plain.len > (size_t)w->opts.dict_bytes_max)
            c->dict_keep = false; /* too many distinct values: not again in this file */
        prof_lap(c, MCDC_PARQUET_STAGE_DICT);
        if (!c->dict_keep && alone) {
            /* The page holds only this slice: redo it as PLAIN, no dictionary. */
            c->dict_on = c->page_is_dict = false;
            c->idx_n = 0;
            dict_clear(c);
            if (stats_later && (rc = slice_stats(c, nv))) return rc;
            if ((rc = mcdc_buf_append(&c->page_vals, c->pv, c->pv_len, &c->err))) return rc;
        } else if (!c->dict_keep) {
            /* Fall back to PLAIN for the rest of the chunk. */
            c->dict_on = false;
            if ((rc = flush_page(c, w))) return rc;
            c->page_is_dict = false;
        }
    } else {
        if (!c->chosen && nv >= PQ_CHOOSE_VALUES_MIN && (rc = choose_encoding(c, w, nv)))
            return rc;
        prof_lap(c, MCDC_PARQUET_STAGE_DICT);
    }
    if (c->page_bytes >= w->opts.page_bytes && (rc = flush_page(c, w))) return rc;
    return MCDC_OK;
}

/* Task: encode rows [r0, r1) of one column. */
static void task_encode(void *ctx, int i, int worker) {
    mcdc_parquet_writer *w = ctx;
    wcol *c = &w->cols[i];
    c->worker = worker;
    prof_begin(c);
    const mcdc_column *in = c->in;
    int64_t r = c->r0;
    while (r < c->r1 && !c->rc) {
        int64_t k = rows_fitting(c, in, r, c->r1, w->opts.page_bytes - c->page_bytes);
        c->rc = encode_slice(c, w, in, r, r + k);
        r += k;
    }
}

/* Task: finish one column chunk (last page, dictionary page). */
static void task_finish(void *ctx, int i, int worker) {
    mcdc_parquet_writer *w = ctx;
    wcol *c = &w->cols[i];
    c->worker = worker;
    prof_begin(c);
    c->rc = flush_page(c, w);
    if (c->rc) return;
    c->dictpage.len = 0;
    if (c->chunk_encodings & (1u << PQ_RLE_DICTIONARY)) {
        /* the statistics of the dictionary-encoded values (encode_slice):
         * the entries are PLAIN values, one per distinct value */
        if (!c->is_float) {
            c->pv = c->dict_plain.data;
            c->pv_len = c->dict_plain.len;
            if ((c->rc = slice_stats(c, c->dict_n))) return;
            prof_lap(c, MCDC_PARQUET_STAGE_STATS);
        }
        c->rc = emit_page(c, w, PQ_DICTIONARY_PAGE, NULL, 0, c->dict_plain.data,
                          c->dict_plain.len, (int32_t)c->dict_n, PQ_PLAIN);
        set_enc(c, PQ_PLAIN);
    }
}

static void chunk_reset(wcol *c) {
    c->chunk.len = 0;
    c->dictpage.len = 0;
    c->chunk_uncomp = c->chunk_values = c->chunk_nulls = c->chunk_nans = 0;
    c->chunk_encodings = 0;
    c->st_has = false;
    dict_clear(c);
    c->dict_on = c->dict_enabled && c->dict_keep;
    c->codec = c->codec_next;
    c->page_is_dict = c->dict_on;
}

static void wcol_free(wcol *c) {
    mcdc_buf_free(&c->dict_plain);
    mcdc_free(c->dict_offs);
    mcdc_free(c->htab);
    mcdc_buf_free(&c->page_vals);
    mcdc_free(c->idx);
    mcdc_free(c->pvalid);
    mcdc_buf_free(&c->chunk);
    mcdc_buf_free(&c->dictpage);
    mcdc_buf_free(&c->st_min);
    mcdc_buf_free(&c->st_max);
    mcdc_buf_free(&c->fs_min);
    mcdc_buf_free(&c->fs_max);
    mcdc_buf_free(&c->pbuf);
    mcdc_free(c->sel);
    mcdc_buf_free(&c->enc);
    mcdc_buf_free(&c->comp);
    mcdc_buf_free(&c->hdr);
    mcdc_pq_strs_free(&c->strs);
    mcdc_pq_strs_free(&c->trial);
}

/* ---- file I/O ------------------------------------------------------------------- */

/* Hands n bytes to the storage in pieces of at most PQ_WRITE_PIECE_BYTES:
 * a column chunk is up to tens of MiB, and one write() that large into
 * the page cache costs the kernel many times the CPU of the same bytes in
 * pieces (see the define). */
static int write_all(mcdc_parquet_writer *w, const void *p, size_t n, mcdc_error *err) {
    const uint8_t *q = p;
    do {
        size_t k = n < PQ_WRITE_PIECE_BYTES ? n : PQ_WRITE_PIECE_BYTES;
        int rc = mcdc_storage_writer_write(w->out, q, k, err);
        if (rc) {
            mcdc_error_wrap(err, "writing Parquet file %s", w->path);
            return rc;
        }
        w->offset += (int64_t)k;
        q += k;
        n -= k;
    } while (n > 0);
    MCDC_ASSERT(w->offset == mcdc_storage_writer_bytes(w->out));
    return MCDC_OK;
}

static int col_error(mcdc_parquet_writer *w, mcdc_error *err) {
    for (int32_t i = 0; i < w->n; i++) {
        wcol *c = &w->cols[i];
        if (c->rc) {
            int rc = c->rc;
            mcdc_error_set(err, rc, "writing Parquet file %s, column '%s': %s", w->path,
                           c->f->name, c->err.message);
            for (int32_t j = 0; j < w->n; j++) w->cols[j].rc = 0;
            return rc;
        }
    }
    return MCDC_OK;
}

static int flush_row_group(mcdc_parquet_writer *w, mcdc_error *err) {
    if (w->rg_rows == 0) return MCDC_OK;
    pool_run(&w->pool, task_finish, w, w->n);
    int rc = col_error(w, err);
    if (rc) return rc;
    if (w->n_rgs == w->rgs_cap) {
        int32_t cap = w->rgs_cap ? w->rgs_cap * 2 : 8;
        rg_rec *p = mcdc_realloc(w->rgs, (size_t)cap * sizeof *p);
        if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (row groups)");
        w->rgs = p;
        w->rgs_cap = cap;
    }
    rg_rec *g = &w->rgs[w->n_rgs];
    memset(g, 0, sizeof *g);
    g->cols = mcdc_calloc((size_t)w->n, sizeof *g->cols);
    if (g->cols == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (row groups)");
    w->n_rgs++;
    g->rows = w->rg_rows;
    g->file_offset = w->offset;
    for (int32_t i = 0; i < w->n; i++) {
        wcol *c = &w->cols[i];
        chunk_rec *cr = &g->cols[i];
        int64_t start = w->offset;
        cr->dict_offset = c->dictpage.len ? start : 0;
        cr->data_offset = start + (int64_t)c->dictpage.len;
        prof_begin(c);
        if ((rc = write_all(w, c->dictpage.data, c->dictpage.len, err))) return rc;
        if ((rc = write_all(w, c->chunk.data, c->chunk.len, err))) return rc;
        prof_lap(c, MCDC_PARQUET_STAGE_WRITE);
        cr->comp_bytes = w->offset - start;
        cr->uncomp_bytes = c->chunk_uncomp;
        cr->num_values = c->chunk_values;
        cr->null_count = c->chunk_nulls;
        cr->nan_count = c->chunk_nans;
        cr->encodings = c->chunk_encodings | (1u << PQ_RLE); /* levels are RLE */
        cr->codec = c->codec;
        if (c->st_has) {
            mcdc_buf *mn = &c->st_min, *mx = &c->st_max;
            if ((rc = stat_merge(c, &c->fs_has, &c->fs_min, &c->fs_max, mn->data, mn->len,
                                 mx->data, mx->len, err)))
                return rc;
            if (mn->len <= PQ_STATS_VALUE_BYTES_MAX && mx->len <= PQ_STATS_VALUE_BYTES_MAX) {
                cr->min = mcdc_malloc(mn->len ? mn->len : 1);
                cr->max = mcdc_malloc(mx->len ? mx->len : 1);
                if (cr->min == NULL || cr->max == NULL)
                    return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (statistics)");
                memcpy(cr->min, mn->data, mn->len);
                memcpy(cr->max, mx->data, mx->len);
                cr->min_len = (uint32_t)mn->len;
                cr->max_len = (uint32_t)mx->len;
                cr->has_min_max = true;
            }
        }
        c->fs_nulls += c->chunk_nulls;
        g->uncomp_bytes += cr->uncomp_bytes;
        g->comp_bytes += cr->comp_bytes;
        chunk_reset(c);
    }
    w->rg_rows = 0;
    w->rg_bytes = 0;
    return MCDC_OK;
}

/* ---- encoding choices carried to the next file (options.choices) -------------- */

typedef struct pq_choice {
    int phys;              /* the column's physical type and width: the choice fits only them */
    int32_t width;
    bool chosen, dict_keep, delta, delta_prefix;
    bool uncompressed;     /* compressing did not pay */
} pq_choice;

struct mcdc_parquet_choices {
    int32_t n;
    int codec;             /* the file's codec */
    pq_choice *cols;
};

mcdc_parquet_choices *mcdc_parquet_writer_choices(const mcdc_parquet_writer *w) {
    mcdc_parquet_choices *ch = mcdc_calloc(1, sizeof *ch);
    if (ch == NULL) return NULL;
    ch->cols = mcdc_calloc((size_t)(w->n > 0 ? w->n : 1), sizeof *ch->cols);
    if (ch->cols == NULL) {
        mcdc_free(ch);
        return NULL;
    }
    ch->n = w->n;
    ch->codec = (int)w->opts.codec;
    for (int32_t i = 0; i < w->n; i++) {
        const wcol *c = &w->cols[i];
        ch->cols[i] = (pq_choice){.phys = c->phys, .width = c->width, .chosen = c->chosen,
                                  .dict_keep = c->dict_keep, .delta = c->delta,
                                  .delta_prefix = c->delta_prefix,
                                  .uncompressed = c->codec_next == MCDC_PARQUET_UNCOMPRESSED};
    }
    return ch;
}

void mcdc_parquet_choices_free(mcdc_parquet_choices *ch) {
    if (ch == NULL) return;
    mcdc_free(ch->cols);
    mcdc_free(ch);
}

/* Column c starts with the previous file's choice for it, when that fits. */
static void choice_apply(wcol *c, const mcdc_parquet_choices *ch, int codec) {
    if (ch == NULL || ch->codec != codec || c->index >= ch->n) return;
    const pq_choice *h = &ch->cols[c->index];
    if (!h->chosen || h->phys != c->phys || h->width != c->width) return;
    c->chosen = true;
    c->dict_keep = h->dict_keep;
    c->delta = h->delta;
    c->delta_prefix = h->delta_prefix;
    if (h->uncompressed) c->codec_next = MCDC_PARQUET_UNCOMPRESSED;
}

/* ---- public API ---------------------------------------------------------------- */

/* Takes sw (aborted on failure). */
static int writer_open(mcdc_parquet_writer **out, mcdc_storage_writer *sw, const char *name,
                       mcdc_schema *schema, const mcdc_parquet_write_options *opts,
                       mcdc_error *err) {
    *out = NULL;
    mcdc_parquet_write_options o = MCDC_PARQUET_WRITE_OPTIONS_INIT;
    if (opts) {
        if (opts->version != MCDC_PARQUET_WRITE_OPTIONS_VERSION) {
            mcdc_storage_writer_abort(sw);
            return mcdc_error_set(err, MCDC_E_INVALID, "Parquet write options version %d, "
                                  "expected %d", opts->version, MCDC_PARQUET_WRITE_OPTIONS_VERSION);
        }
        o = *opts;
    }
    if (o.row_group_bytes <= 0) o.row_group_bytes = MCDC_PARQUET_ROW_GROUP_BYTES_DEFAULT;
    if (o.page_bytes <= 0) o.page_bytes = PQ_PAGE_BYTES_DEFAULT;
    if (o.dict_bytes_max <= 0) o.dict_bytes_max = MCDC_PARQUET_DICT_BYTES_MAX;
    if (o.threads < 1) { /* auto: half the online CPUs (see mcdc_parquet.h) */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        o.threads = cpus >= 4 ? (int32_t)(cpus / 2 < PQ_THREADS_AUTO_MAX ? cpus / 2 : PQ_THREADS_AUTO_MAX) : 1;
    }
    int rc = MCDC_OK;
    if (o.threads > PQ_THREADS_MAX || o.row_group_bytes > (int64_t)MCDC_BATCH_BYTES_MAX / 2 ||
        o.page_bytes > (int64_t)64 * 1024 * 1024 || o.dict_bytes_max > (int64_t)64 * 1024 * 1024)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "Parquet writer options out of range (threads <= %d, row group <= "
                            "%u bytes, page and dictionary <= 64 MiB)",
                            PQ_THREADS_MAX, MCDC_BATCH_BYTES_MAX / 2);
    if (!rc && o.codec != MCDC_PARQUET_UNCOMPRESSED && o.codec != MCDC_PARQUET_SNAPPY &&
        o.codec != MCDC_PARQUET_GZIP && o.codec != MCDC_PARQUET_ZSTD &&
        o.codec != MCDC_PARQUET_LZ4_RAW)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "Parquet codec %d cannot be written", o.codec);
    if (!rc && (schema->n_fields < 1 || schema->n_fields > MCDC_COLUMNS_MAX))
        rc = mcdc_error_set(err, MCDC_E_INVALID, "Parquet file %s: %d columns (1-%d allowed)",
                            name, schema->n_fields, MCDC_COLUMNS_MAX);
    mcdc_parquet_writer *w = NULL;
    if (!rc) {
        w = mcdc_calloc(1, sizeof *w);
        if (w == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (writer)");
    }
    if (rc) {
        mcdc_storage_writer_abort(sw);
        return rc;
    }
    w->out = sw;
    w->opts = o;
    w->opts.field_ids = NULL; /* copied into the columns below */
    w->opts.choices = NULL;   /* likewise */
    w->opts.spare = NULL;     /* w->spare, once taken */
    w->schema = mcdc_schema_ref(schema);
    w->n = schema->n_fields;
    w->path = mcdc_strdup(name);
    w->cols = mcdc_calloc((size_t)w->n, sizeof *w->cols);
    w->prof = mcdc_calloc((size_t)w->n * MCDC_PARQUET_STAGES, sizeof *w->prof);
    if (w->path == NULL || w->cols == NULL || w->prof == NULL) {
        mcdc_parquet_writer_free(w);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (writer)");
    }
    if (o.spare) spare_take(w, o.spare);
    for (int32_t i = 0; i < w->n && !rc; i++) {
        wcol *c = &w->cols[i];
        c->index = i;
        rc = map_field(c, &schema->fields[i], err);
        if (rc) break;
        if (o.field_ids) {
            c->has_field_id = true;
            c->field_id = o.field_ids[i];
        }
        c->dict_enabled = o.dictionary && c->phys != PQ_BOOLEAN;
        c->dict_keep = true;
        c->codec_next = (int)o.codec;
        if (o.choices && o.choices->n == w->n) choice_apply(c, o.choices, (int)o.codec);
        if (c->sel == NULL) c->sel = mcdc_malloc(PQ_SLICE_ROWS_MAX * sizeof *c->sel);
        if (c->sel == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (writer)");
        if (!rc && c->optional && c->phys != PQ_BOOLEAN && !o.data_page_v2) {
            /* a page holds at most about page_bytes / 4 rows (nulls count as
             * 4 bytes or the value's width): their RLE bitmap fits; a longer
             * one is copied as before (flush_page) */
            int64_t h = (16 + o.page_bytes / 32 + 15) & ~(int64_t)15; /* values stay aligned */
            c->head = (size_t)(h < PQ_PAGE_HEAD_MAX ? h : PQ_PAGE_HEAD_MAX);
            rc = mcdc_buf_reserve(&c->page_vals, c->head, err);
            if (!rc) c->page_vals.len = c->head;
        }
        if (c->phys == PQ_BYTE_ARRAY) {
            /* room for a DELTA_*BYTE_ARRAY page's levels and length streams
             * before its suffixes (those of names, about 0.8 bytes a value:
             * an eighth of the page is room for values of 2 bytes and
             * more); a page they do not fit is copied instead */
            int64_t h = 16 + o.page_bytes / 32 + o.page_bytes / 8;
            c->strs.head = (size_t)(h < PQ_PAGE_HEAD_MAX ? h : PQ_PAGE_HEAD_MAX);
        }
        chunk_reset(c);
    }
    if (!rc) {
        rc = pool_start(&w->pool, o.threads, err);
        w->pool_started = true;
    }
    if (!rc) rc = write_all(w, "PAR1", 4, err);
    if (rc) {
        mcdc_parquet_writer_free(w);
        return rc;
    }
    *out = w;
    return MCDC_OK;
}

int mcdc_parquet_writer_open(mcdc_parquet_writer **out, mcdc_storage *st, const char *key,
                             mcdc_schema *schema, const mcdc_parquet_write_options *opts,
                             mcdc_error *err) {
    *out = NULL;
    mcdc_storage_writer *sw;
    int rc = mcdc_storage_writer_open(&sw, st, key, err);
    if (rc) {
        mcdc_error_wrap(err, "cannot create Parquet file %s/%s", st->root, key);
        return rc;
    }
    char *name = mcdc_asprintf("%s/%s", st->root, key);
    if (name == NULL) {
        mcdc_storage_writer_abort(sw);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (writer)");
    }
    rc = writer_open(out, sw, name, schema, opts, err);
    mcdc_free(name);
    return rc;
}

/* Splits path into a local storage on its directory and the file's name. */
int mcdc_parquet__local_path(mcdc_storage **st, const char **key, const char *path,
                             mcdc_error *err) {
    *st = NULL;
    const char *slash = path ? strrchr(path, '/') : NULL;
    *key = slash ? slash + 1 : path;
    if (path == NULL || (*key)[0] == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "Parquet file path \"%s\" names no file",
                              path ? path : "");
    char *dir = slash == NULL ? mcdc_strdup(".")
                              : mcdc_strndup(path, slash == path ? 1 : (size_t)(slash - path));
    if (dir == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = mcdc_storage_local_create(st, dir, err);
    mcdc_free(dir);
    return rc;
}

int mcdc_parquet_writer_open_path(mcdc_parquet_writer **out, const char *path,
                                  mcdc_schema *schema, const mcdc_parquet_write_options *opts,
                                  mcdc_error *err) {
    *out = NULL;
    mcdc_storage *st;
    const char *key;
    int rc = mcdc_parquet__local_path(&st, &key, path, err);
    if (rc == MCDC_OK) rc = mcdc_parquet_writer_open(out, st, key, schema, opts, err);
    if (rc) {
        mcdc_storage_free(st);
        return rc;
    }
    (*out)->own_st = st;
    return MCDC_OK;
}

int mcdc_parquet_writer_write(mcdc_parquet_writer *w, const mcdc_batch *b, mcdc_error *err) {
    MCDC_ASSERT(w != NULL && b != NULL);
    if (w->closed) return mcdc_error_set(err, MCDC_E_INVALID, "Parquet file %s is closed", w->path);
    if (b->schema->n_fields != w->n)
        return mcdc_error_set(err, MCDC_E_INVALID, "Parquet file %s: batch has %d columns, the "
                              "file %d", w->path, b->schema->n_fields, w->n);
    int64_t rows = b->rows;
    int64_t row_bytes = 1;
    for (int32_t i = 0; i < w->n; i++) {
        const mcdc_field *bf = &b->schema->fields[i], *wf = w->cols[i].f;
        const mcdc_column *in = &b->columns[i];
        if (bf->type != wf->type || bf->precision != wf->precision || bf->scale != wf->scale ||
            bf->byte_width != wf->byte_width)
            return mcdc_error_set(err, MCDC_E_INVALID, "Parquet file %s: batch column %d ('%s') "
                                  "does not match the file's column '%s'", w->path, i, bf->name,
                                  wf->name);
        MCDC_ASSERT(in->length == rows);
        if (!wf->nullable && in->null_count > 0)
            return mcdc_error_set(err, MCDC_E_INVALID, "Parquet file %s: column '%s' is NOT NULL "
                                  "but the batch has %lld nulls", w->path, wf->name,
                                  (long long)in->null_count);
        if (rows > 0) row_bytes += (plain_bytes(&w->cols[i], in, 0, rows) + rows - 1) / rows;
    }
    int64_t r = 0;
    int rc;
    while (r < rows) {
        int64_t room = (w->opts.row_group_bytes - w->rg_bytes) / row_bytes;
        if (room < 1) room = 1;
        int64_t k = rows - r < room ? rows - r : room;
        for (int32_t i = 0; i < w->n; i++) {
            w->cols[i].in = &b->columns[i];
            w->cols[i].r0 = r;
            w->cols[i].r1 = r + k;
        }
        pool_run(&w->pool, task_encode, w, w->n);
        if ((rc = col_error(w, err))) return rc;
        w->rg_rows += k;
        w->rows_total += k;
        w->rg_bytes += k * row_bytes;
        r += k;
        if (w->rg_bytes >= w->opts.row_group_bytes && (rc = flush_row_group(w, err))) return rc;
    }
    return MCDC_OK;
}

/* ---- footer --------------------------------------------------------------------- */

static void write_schema_elem(mcdc_thrift_writer *t, const wcol *c) {
    const mcdc_field *f = c->f;
    mcdc_thrift_struct_begin(t);
    mcdc_thrift_field_i32(t, 1, c->phys);
    if (c->phys == PQ_FLBA) mcdc_thrift_field_i32(t, 2, c->type_len);
    mcdc_thrift_field_i32(t, 3, c->optional ? PQ_OPTIONAL : PQ_REQUIRED);
    mcdc_thrift_field_string(t, 4, f->name);
    int ct = -1;
    switch (f->type) {
    case MCDC_TYPE_INT8: ct = PQ_CT_INT_8; break;
    case MCDC_TYPE_INT16: ct = PQ_CT_INT_16; break;
    case MCDC_TYPE_DECIMAL: ct = PQ_CT_DECIMAL; break;
    case MCDC_TYPE_UTF8: ct = PQ_CT_UTF8; break;
    case MCDC_TYPE_DATE32: ct = PQ_CT_DATE; break;
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: ct = PQ_CT_TIMESTAMP_MICROS; break;
    default: break;
    }
    if (ct >= 0) mcdc_thrift_field_i32(t, 6, ct);
    if (f->type == MCDC_TYPE_DECIMAL) {
        mcdc_thrift_field_i32(t, 7, f->scale);
        mcdc_thrift_field_i32(t, 8, f->precision);
    }
    if (c->has_field_id) mcdc_thrift_field_i32(t, 9, c->field_id);
    switch (f->type) {
    case MCDC_TYPE_INT8:
    case MCDC_TYPE_INT16:
        mcdc_thrift_field_struct(t, 10);
        mcdc_thrift_field_struct(t, PQ_LT_INTEGER);
        mcdc_thrift_field_i8(t, 1, f->type == MCDC_TYPE_INT8 ? 8 : 16);
        mcdc_thrift_field_bool(t, 2, true);
        mcdc_thrift_struct_end(t);
        mcdc_thrift_struct_end(t);
        break;
    case MCDC_TYPE_DECIMAL:
        mcdc_thrift_field_struct(t, 10);
        mcdc_thrift_field_struct(t, PQ_LT_DECIMAL);
        mcdc_thrift_field_i32(t, 1, f->scale);
        mcdc_thrift_field_i32(t, 2, f->precision);
        mcdc_thrift_struct_end(t);
        mcdc_thrift_struct_end(t);
        break;
    case MCDC_TYPE_UTF8:
    case MCDC_TYPE_DATE32:
        mcdc_thrift_field_struct(t, 10);
        mcdc_thrift_field_struct(t, f->type == MCDC_TYPE_UTF8 ? PQ_LT_STRING : PQ_LT_DATE);
        mcdc_thrift_struct_end(t);
        mcdc_thrift_struct_end(t);
        break;
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC:
        mcdc_thrift_field_struct(t, 10);
        mcdc_thrift_field_struct(t, PQ_LT_TIMESTAMP);
        mcdc_thrift_field_bool(t, 1, f->type == MCDC_TYPE_TIMESTAMP_UTC);
        mcdc_thrift_field_struct(t, 2);
        mcdc_thrift_field_struct(t, PQ_UNIT_MICROS);
        mcdc_thrift_struct_end(t);
        mcdc_thrift_struct_end(t);
        mcdc_thrift_struct_end(t);
        mcdc_thrift_struct_end(t);
        break;
    default: break;
    }
    mcdc_thrift_struct_end(t);
}

static void write_chunk_meta(mcdc_thrift_writer *t, const wcol *c, const chunk_rec *cr,
                             int codec) {
    mcdc_thrift_struct_begin(t); /* ColumnChunk */
    /* file_offset: deprecated; written as Arrow does (end of the chunk). */
    mcdc_thrift_field_i64(t, 2, (cr->dict_offset ? cr->dict_offset : cr->data_offset) +
                                    cr->comp_bytes);
    mcdc_thrift_field_struct(t, 3); /* ColumnMetaData */
    mcdc_thrift_field_i32(t, 1, c->phys);
    int n_enc = __builtin_popcount(cr->encodings);
    mcdc_thrift_field_list(t, 2, MCDC_TT_I32, n_enc);
    for (int e = 0; e < 32; e++)
        if (cr->encodings & (1u << e)) mcdc_thrift_elem_i32(t, e);
    mcdc_thrift_field_list(t, 3, MCDC_TT_BINARY, 1);
    mcdc_thrift_elem_binary(t, c->f->name, strlen(c->f->name));
    mcdc_thrift_field_i32(t, 4, codec);
    mcdc_thrift_field_i64(t, 5, cr->num_values);
    mcdc_thrift_field_i64(t, 6, cr->uncomp_bytes);
    mcdc_thrift_field_i64(t, 7, cr->comp_bytes);
    mcdc_thrift_field_i64(t, 9, cr->data_offset);
    if (cr->dict_offset) mcdc_thrift_field_i64(t, 11, cr->dict_offset);
    mcdc_thrift_field_struct(t, 12); /* Statistics */
    /* Legacy min/max (signed order) only where that order is the type's. */
    bool legacy = cr->has_min_max && (c->phys == PQ_INT32 || c->phys == PQ_INT64 ||
                                      c->phys == PQ_BOOLEAN || c->is_float);
    if (legacy) {
        mcdc_thrift_field_binary(t, 1, cr->max, cr->max_len);
        mcdc_thrift_field_binary(t, 2, cr->min, cr->min_len);
    }
    mcdc_thrift_field_i64(t, 3, cr->null_count);
    if (cr->has_min_max) {
        mcdc_thrift_field_binary(t, 5, cr->max, cr->max_len);
        mcdc_thrift_field_binary(t, 6, cr->min, cr->min_len);
    }
    if (c->is_float) mcdc_thrift_field_i64(t, 9, cr->nan_count);
    mcdc_thrift_struct_end(t);
    mcdc_thrift_struct_end(t); /* ColumnMetaData */
    mcdc_thrift_struct_end(t); /* ColumnChunk */
}

static int write_footer(mcdc_parquet_writer *w, mcdc_error *err) {
    mcdc_buf out = {0};
    out.limit = MCDC_PARQUET_FOOTER_BYTES_MAX;
    mcdc_thrift_writer t;
    mcdc_thrift_writer_init(&t, &out, err);
    mcdc_thrift_struct_begin(&t);
    mcdc_thrift_field_i32(&t, 1, 1);
    mcdc_thrift_field_list(&t, 2, MCDC_TT_STRUCT, w->n + 1);
    mcdc_thrift_struct_begin(&t);
    mcdc_thrift_field_string(&t, 4, "schema");
    mcdc_thrift_field_i32(&t, 5, w->n);
    mcdc_thrift_struct_end(&t);
    for (int32_t i = 0; i < w->n; i++) write_schema_elem(&t, &w->cols[i]);
    mcdc_thrift_field_i64(&t, 3, w->rows_total);
    mcdc_thrift_field_list(&t, 4, MCDC_TT_STRUCT, w->n_rgs);
    for (int32_t g = 0; g < w->n_rgs; g++) {
        const rg_rec *rg = &w->rgs[g];
        mcdc_thrift_struct_begin(&t);
        mcdc_thrift_field_list(&t, 1, MCDC_TT_STRUCT, w->n);
        for (int32_t i = 0; i < w->n; i++) write_chunk_meta(&t, &w->cols[i], &rg->cols[i], rg->cols[i].codec);
        mcdc_thrift_field_i64(&t, 2, rg->uncomp_bytes);
        mcdc_thrift_field_i64(&t, 3, rg->rows);
        mcdc_thrift_field_i64(&t, 5, rg->file_offset);
        mcdc_thrift_field_i64(&t, 6, rg->comp_bytes);
        mcdc_thrift_field_i16(&t, 7, (int16_t)(g < INT16_MAX ? g : INT16_MAX));
        mcdc_thrift_struct_end(&t);
    }
    char created[96];
    snprintf(created, sizeof created, "mssql-cdc version %s", MCDC_VERSION_STRING);
    mcdc_thrift_field_string(&t, 6, w->opts.created_by ? w->opts.created_by : created);
    mcdc_thrift_field_list(&t, 7, MCDC_TT_STRUCT, w->n);
    for (int32_t i = 0; i < w->n; i++) {
        mcdc_thrift_struct_begin(&t);
        mcdc_thrift_field_struct(&t, 1); /* TYPE_ORDER */
        mcdc_thrift_struct_end(&t);
        mcdc_thrift_struct_end(&t);
    }
    mcdc_thrift_struct_end(&t);
    int rc = t.rc;
    if (rc) {
        mcdc_error_wrap(err, "Parquet file %s: footer", w->path);
    } else {
        uint8_t tail[8];
        pq_put_le32(tail, (uint32_t)out.len);
        memcpy(tail + 4, "PAR1", 4);
        rc = write_all(w, out.data, out.len, err);
        if (!rc) rc = write_all(w, tail, 8, err);
    }
    mcdc_buf_free(&out);
    return rc;
}

/* Typed value of a physical statistic. */
static void typed_value(const wcol *c, const mcdc_buf *b, mcdc_parquet_value *v) {
    memset(v, 0, sizeof *v);
    const uint8_t *p = b->data;
    switch (c->f->type) {
    case MCDC_TYPE_BOOL: v->i = p[0]; break;
    case MCDC_TYPE_INT8:
    case MCDC_TYPE_INT16:
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_DATE32: v->i = (int32_t)pq_le32(p); break;
    case MCDC_TYPE_INT64:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: v->i = (int64_t)pq_le64(p); break;
    case MCDC_TYPE_FLOAT: {
        float f;
        memcpy(&f, p, 4);
        v->d = f;
        break;
    }
    case MCDC_TYPE_DOUBLE: memcpy(&v->d, p, 8); break;
    case MCDC_TYPE_DECIMAL:
        if (c->phys == PQ_INT32) {
            int64_t x = (int32_t)pq_le32(p);
            v->dec_lo = (uint64_t)x;
            v->dec_hi = x < 0 ? -1 : 0;
        } else if (c->phys == PQ_INT64) {
            int64_t x = (int64_t)pq_le64(p);
            v->dec_lo = (uint64_t)x;
            v->dec_hi = x < 0 ? -1 : 0;
        } else {
            uint8_t le[16];
            size_t w = b->len;
            memset(le, (p[0] & 0x80) ? 0xFF : 0, 16);
            for (size_t j = 0; j < w; j++) le[j] = p[w - 1 - j];
            memcpy(&v->dec_lo, le, 8);
            memcpy(&v->dec_hi, le + 8, 8);
        }
        break;
    default:
        v->bytes = p;
        v->len = (int64_t)b->len;
        break;
    }
}

/* The file's statistics and sizes, for mcdc_parquet_writer_info. */
static int fill_info(mcdc_parquet_writer *w, mcdc_error *err) {
    w->stats = mcdc_calloc((size_t)w->n, sizeof *w->stats);
    if (w->stats == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (stats)");
    for (int32_t i = 0; i < w->n; i++) {
        wcol *c = &w->cols[i];
        mcdc_parquet_column_stats *s = &w->stats[i];
        s->null_count = c->fs_nulls;
        s->has_min_max = c->fs_has;
        if (c->fs_has) {
            typed_value(c, &c->fs_min, &s->min);
            typed_value(c, &c->fs_max, &s->max);
        }
    }
    w->info.file_bytes = w->offset;
    w->info.rows = w->rows_total;
    w->info.row_groups = w->n_rgs;
    w->info.n_columns = w->n;
    w->info.columns = w->stats;
    return MCDC_OK;
}

int mcdc_parquet_writer_close_unpublished(mcdc_parquet_writer *w, mcdc_storage_writer **out,
                                          mcdc_error *err) {
    MCDC_ASSERT(w != NULL && out != NULL);
    *out = NULL;
    if (w->closed) return mcdc_error_set(err, MCDC_E_INVALID, "Parquet file %s is closed", w->path);
    int rc = flush_row_group(w, err);
    if (!rc) rc = write_footer(w, err);
    if (!rc) rc = fill_info(w, err);
    if (rc) mcdc_storage_writer_abort(w->out);
    else *out = w->out;
    w->out = NULL;
    w->closed = true;
    return rc;
}

int mcdc_parquet_writer_close(mcdc_parquet_writer *w, mcdc_error *err) {
    mcdc_storage_writer *out = NULL;
    int rc = mcdc_parquet_writer_close_unpublished(w, &out, err);
    /* Published whole or not at all: a failed write leaves nothing. */
    if (!rc) {
        rc = mcdc_storage_writer_commit(out, MCDC_STORAGE_PUT, err);
        if (rc) mcdc_error_wrap(err, "publishing Parquet file %s", w->path);
    }
    if (rc) { /* no info for a file not published */
        mcdc_free(w->stats);
        w->stats = NULL;
    }
    return rc;
}

const char *mcdc_parquet_stage_name(mcdc_parquet_stage s) {
    static const char *const names[MCDC_PARQUET_STAGES] = {
        "levels", "convert", "stats", "dict", "encode", "compress", "copy", "write"};
    return (unsigned)s < MCDC_PARQUET_STAGES ? names[s] : "unknown";
}

void mcdc_parquet_writer_profile_enable(mcdc_parquet_writer *w) {
    MCDC_ASSERT(w != NULL && w->rows_total == 0);
    for (int32_t i = 0; i < w->n; i++)
        if (w->cols[i].prof == NULL) w->cols[i].prof = w->prof + (size_t)i * MCDC_PARQUET_STAGES;
}

const int64_t *mcdc_parquet_writer_profile(const mcdc_parquet_writer *w, int32_t column) {
    MCDC_ASSERT(w != NULL && column >= 0 && column < w->n);
    return w->cols[column].prof;
}

const mcdc_parquet_file_info *mcdc_parquet_writer_info(const mcdc_parquet_writer *w) {
    return w->stats ? &w->info : NULL;
}

void mcdc_parquet_writer_free(mcdc_parquet_writer *w) {
    if (w == NULL) return;
    if (w->pool_started) pool_stop(&w->pool);
    spare_give(w); /* what it keeps is not freed below */
    mcdc_storage_writer_abort(w->out); /* unclosed: nothing is published */
    mcdc_storage_free(w->own_st);
    if (w->cols)
        for (int32_t i = 0; i < w->n; i++) wcol_free(&w->cols[i]);
    mcdc_free(w->cols);
    for (int i = 0; i < PQ_THREADS_MAX; i++) mcdc_pq_codec_ctx_free(&w->cctx[i]);
    for (int32_t g = 0; g < w->n_rgs; g++) {
        for (int32_t i = 0; i < w->n; i++) {
            mcdc_free(w->rgs[g].cols[i].min);
            mcdc_free(w->rgs[g].cols[i].max);
        }
        mcdc_free(w->rgs[g].cols);
    }
    mcdc_free(w->rgs);
    mcdc_free(w->stats);
    mcdc_free(w->prof);
    mcdc_free(w->path);
    mcdc_schema_unref(w->schema);
    mcdc_free(w);
}
