/*
 * mcdc_util.h - the base every module builds on: errors, the one allocator,
 * growable buffers with a ceiling, assertions, logging, time.
 *
 * Ownership rule: a function returning a pointer named *_take or filling an
 * `out` pointer hands the memory to the caller, who frees it with mcdc_free
 * (or the module's own free for handles). Everything else is borrowed.
 */
#ifndef MCDC_UTIL_H
#define MCDC_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mssqlcdc.h"
#include "mcdc_limits.h"

/* ---- assertions: programmer errors abort with the expression ---------- */
void mcdc__assert_fail(const char *expr, const char *file, int line)
    __attribute__((noreturn));
#define MCDC_ASSERT(e) \
    ((e) ? (void)0 : mcdc__assert_fail(#e, __FILE__, __LINE__))
#define MCDC_UNREACHABLE() mcdc__assert_fail("unreachable", __FILE__, __LINE__)

/* A 64-bit finalizer (MurmurHash3's fmix64): every input bit moves every
 * output bit. For hash tables and filters over our own data (no
 * adversary). */
static inline uint64_t mcdc_mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* A 64-bit hash of n bytes: mcdc_mix64 over each 8-byte word, the length
 * and the tail mixed in last. Same use as mcdc_mix64. */
uint64_t mcdc_hash_bytes(const void *p, size_t n, uint64_t seed);

#define MCDC_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- errors ------------------------------------------------------------ */
/* Fill err (may be NULL) and return code. The message is formatted. */
int mcdc_error_set(mcdc_error *err, int code, const char *fmt, ...)
    MCDC_PRINTF(3, 4);
int mcdc_error_vset(mcdc_error *err, int code, const char *fmt, va_list ap);
/* Prepend context ("reading bronze version 7: ") to an existing message. */
int mcdc_error_wrap(mcdc_error *err, const char *fmt, ...) MCDC_PRINTF(2, 3);
void mcdc_error_clear(mcdc_error *err);

/* ---- the allocator ------------------------------------------------------
 * Every library allocation goes through these. They charge the calling
 * thread's accounting (mcdc_alloc_bind: a runtime's, bound by the job
 * frame on entry and by each thread a job starts), which counts live and
 * peak bytes, can refuse growth past a ceiling and can be told to fail the
 * Nth call (fault injection, tests). A block is given back to the
 * accounting that took it, whichever thread frees it. A thread with no
 * accounting bound allocates uncounted and never fails on purpose. */
void *mcdc_malloc(size_t n);
void *mcdc_calloc(size_t count, size_t size);
void *mcdc_realloc(void *p, size_t n);
void mcdc_free(void *p);
char *mcdc_strdup(const char *s);
char *mcdc_strndup(const char *s, size_t n);
/* printf into a new string; NULL on allocation failure. */
char *mcdc_asprintf(const char *fmt, ...) MCDC_PRINTF(1, 2);

typedef struct mcdc_alloc_stats {
    int64_t calls;       /* successful allocations (malloc/calloc/realloc) */
    int64_t live_bytes;  /* bytes allocated and not yet freed */
    int64_t peak_bytes;  /* high-water mark of live_bytes */
} mcdc_alloc_stats;

/* One accounting (a runtime embeds one). Its fields are the allocator's. */
typedef struct mcdc_alloc_acct {
    size_t magic;
    _Atomic int64_t calls, live, peak;
    _Atomic int64_t fail_at; /* > 0: the fail_at-th allocation from now fails */
    int64_t live_max;        /* 0: no ceiling; else growth past it fails */
} mcdc_alloc_acct;
void mcdc_alloc_acct_init(mcdc_alloc_acct *a, int64_t live_bytes_max);
/* Binds a (NULL: none) to the calling thread; returns the one it replaces,
 * to restore when the job's frame or thread ends. */
mcdc_alloc_acct *mcdc_alloc_bind(mcdc_alloc_acct *a);
mcdc_alloc_acct *mcdc_alloc_bound(void);
void mcdc_alloc_acct_stats(const mcdc_alloc_acct *a, mcdc_alloc_stats *out);
/* Fail a's nth allocation from now on (1 = the next one); 0 disables.
 * Only threads bound to a see it. */
void mcdc_alloc_acct_fail_at(mcdc_alloc_acct *a, int64_t nth);
/* The same on the calling thread's accounting (zeros / nothing when none
 * is bound): what the unit tests, which bind one for the run, use. */
void mcdc_alloc_get_stats(mcdc_alloc_stats *out);
void mcdc_alloc_fail_at(int64_t nth);

/* ---- threads --------------------------------------------------------------
 * Every thread the library starts goes through this: the new thread runs
 * fn(arg) bound to the starting thread's allocator accounting and log sink
 * (a job's threads charge and log where the job does). Returns
 * pthread_create's code (ENOMEM when its small start record cannot be had). */
int mcdc_thread_start(pthread_t *th, void *(*fn)(void *), void *arg);

/* ---- growable byte buffer with a ceiling ------------------------------ */
typedef struct mcdc_buf {
    uint8_t *data;   /* owned; mcdc_buf_free releases it */
    size_t len;
    size_t cap;
    size_t limit;    /* 0 = MCDC_BATCH_BYTES_MAX */
} mcdc_buf;

int mcdc_buf_reserve(mcdc_buf *b, size_t extra, mcdc_error *err);
int mcdc_buf_append(mcdc_buf *b, const void *p, size_t n, mcdc_error *err);
int mcdc_buf_append_str(mcdc_buf *b, const char *s, mcdc_error *err);
int mcdc_buf_append_byte(mcdc_buf *b, uint8_t v, mcdc_error *err);
int mcdc_buf_printf(mcdc_buf *b, mcdc_error *err, const char *fmt, ...)
    MCDC_PRINTF(3, 4);
/* NUL-terminate without counting the NUL in len. */
int mcdc_buf_cstr(mcdc_buf *b, mcdc_error *err);
void mcdc_buf_reset(mcdc_buf *b);
void mcdc_buf_free(mcdc_buf *b);

/* ---- logging -----------------------------------------------------------
 * Messages go to the calling thread's sink: each job installs its own on
 * every thread it runs (mcdc_log_use), so two jobs in one process never see
 * each other's messages. A thread without one writes "mssql-cdc: warning:
 * ..." lines on stderr, warnings and errors only. Never pass a secret.
 * The level enum and mcdc_log_fn are public (mssqlcdc.h). */
typedef struct mcdc_log_sink {
    mcdc_log_fn fn;        /* NULL: stderr */
    void *user;
    mcdc_log_level level;  /* messages less severe are dropped */
} mcdc_log_sink;

/* Installs sink (borrowed; NULL: the stderr default) as the calling
 * thread's; returns the one it replaces, to restore. */
const mcdc_log_sink *mcdc_log_use(const mcdc_log_sink *sink);
/* mcdc_log_to_thread (mssqlcdc.h) sets the calling thread's own sink, a
 * copy kept per thread, which mcdc_log_use replaces while a job runs. */
/* The calling thread's sink (NULL: the default). */
const mcdc_log_sink *mcdc_log_current(void);

/* ---- a job's frame ----------------------------------------------------------
 * What a job binds to the calling thread while it runs (its create, run
 * and free): its allocator accounting and its log sink; leave restores the
 * host's. One mechanism for every job, so that no job forgets either. */
typedef struct mcdc_job_scope {
    const mcdc_log_sink *sink;
    mcdc_alloc_acct *acct;
} mcdc_job_scope;
mcdc_job_scope mcdc_job_enter(mcdc_alloc_acct *acct, const mcdc_log_sink *sink);
void mcdc_job_leave(mcdc_job_scope host);

void mcdc_log(mcdc_log_level level, const char *fmt, ...) MCDC_PRINTF(2, 3);
/* The default sink's line on stderr (for sinks that pass messages on). */
void mcdc_log_stderr(mcdc_log_level level, const char *msg);

/* ---- time --------------------------------------------------------------- */
int64_t mcdc_now_utc_us(void);       /* wall clock, microseconds since 1970 */
int64_t mcdc_monotonic_us(void);     /* for durations */
void mcdc_sleep_ms(int64_t ms);
/* Civil date <-> days since 1970-01-01 (proleptic Gregorian). */
int64_t mcdc_days_from_civil(int64_t y, unsigned m, unsigned d);
void mcdc_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d);
/* Format microseconds since 1970 as "YYYY-MM-DDTHH:MM:SS.mmm" (frac_digits 3)
 * or with 6 fractional digits; out must hold 32 bytes. */
void mcdc_format_ts_us(int64_t us, int frac_digits, char out[32]);
/* Parse "YYYY-MM-DD[ T]HH:MM:SS[.fffffff][Z|+hh:mm]" (date alone allowed).
 * An offset, if present, is applied (result is UTC). */
int mcdc_parse_ts_us(const char *s, size_t n, int64_t *out_us, mcdc_error *err);

/* The absolute form of a local path: relative to the current directory,
 * "." and ".." and doubled '/' removed, symbolic links of the part that
 * exists resolved. Two paths naming one place give one string. *out owned. */
int mcdc_path_canonical(char **out, const char *path, mcdc_error *err);
/* inner is outer or lies below it (both canonical). */
bool mcdc_path_within(const char *outer, const char *inner);
/* Whether location is on the local filesystem: a plain path or a file:
 * URI; not mem://, s3:// or any other "<scheme>://". */
bool mcdc_location_is_local(const char *location);
/* Where location lies, as one location is compared with another (then
 * mcdc_path_within tells nesting): a local path or file: URI as the
 * canonical path; an object store URI with its scheme in lower case and
 * aliases of one store folded (s3a:// is s3://, abfs:// is abfss://,
 * wasb:// is wasbs://) and its bucket or container@account in lower case
 * (both are lower case on the stores); another URI (mem://) as given; in
 * every URI doubled and trailing '/' dropped. *out owned. */
int mcdc_location_place(char **out, const char *location, mcdc_error *err);

/* A random (version 4) UUID, lowercase "8-4-4-4-12", NUL-terminated. */
void mcdc_uuid4(char out[37]);

/* Byte b as two upper-case hex digits: mcdc_hex_pairs[2 * b], [2 * b + 1]
 * (LSN texts, uniqueidentifier texts: no per-nibble work in hot loops). */
extern const char mcdc_hex_pairs[513];

/* ---- small string helpers ---------------------------------------------- */
bool mcdc_str_ieq(const char *a, const char *b);
bool mcdc_str_nieq(const char *a, const char *b, size_t n);
/* Parse a decimal int64 with full validation (no trailing junk). */
int mcdc_parse_i64(const char *s, int64_t *out);

#endif /* MCDC_UTIL_H */
