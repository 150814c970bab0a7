/* mcdc_util.c - errors, allocator, buffers, logging, time. */
#include "mcdc_util.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- status names ------------------------------------------------------ */
const char *mcdc_status_name(int code) {
    switch (code) {
    case MCDC_OK: return "ok";
    case MCDC_E_INVALID: return "invalid";
    case MCDC_E_NOMEM: return "out of memory";
    case MCDC_E_IO: return "i/o";
    case MCDC_E_PROTOCOL: return "protocol";
    case MCDC_E_SERVER: return "server";
    case MCDC_E_LIMIT: return "limit";
    case MCDC_E_CONFLICT: return "conflict";
    case MCDC_E_CANCELLED: return "cancelled";
    case MCDC_E_DATALOSS: return "data loss";
    case MCDC_E_SCHEMA: return "schema changed";
    case MCDC_E_PERMISSION: return "permission";
    case MCDC_E_TRANSIENT: return "transient";
    case MCDC_E_NOTFOUND: return "not found";
    case MCDC_E_CORRUPT: return "corrupt";
    case MCDC_E_UNSUPPORTED: return "unsupported";
    case MCDC_E_MISMATCH: return "state mismatch";
    case MCDC_E_TARGET_BEHIND: return "target behind checkpoint";
    case MCDC_E_REWOUND: return "checkpoint rewound";
    case MCDC_E_FACTS_BEHIND: return "facts behind checkpoint";
    case MCDC_E_FOREIGN_WRITER: return "foreign writer";
    case MCDC_E_LOGIN: return "login failed";
    case MCDC_E_SNAPSHOT_OPEN: return "snapshot open";
    case MCDC_E_NOT_UNIQUE: return "key not unique";
    case MCDC_E_NOT_READY: return "source not ready";
    default: return "unknown";
    }
}

const char *mcdc_status_kind(int code) {
    switch (code) {
    case MCDC_OK: return "";
    case MCDC_E_DATALOSS: return "DataLossError";
    case MCDC_E_SCHEMA: return "SchemaChangedError";
    case MCDC_E_PERMISSION: return "PermissionError";
    case MCDC_E_INVALID:
    case MCDC_E_MISMATCH:
    case MCDC_E_SNAPSHOT_OPEN:
    case MCDC_E_NOT_UNIQUE:
    case MCDC_E_NOTFOUND: return "ValueError";
    default: return "RuntimeError";
    }
}

const char *mcdc_version(void) { return MCDC_VERSION_STRING; }

void mcdc__assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "mssql-cdc: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

/* ---- errors ------------------------------------------------------------ */
int mcdc_error_vset(mcdc_error *err, int code, const char *fmt, va_list ap) {
    if (err == NULL) return code;
    err->code = code;
    err->server_number = err->server_state = err->server_class = 0;
    err->server_line = 0;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    return code;
}

int mcdc_error_set(mcdc_error *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mcdc_error_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int mcdc_error_wrap(mcdc_error *err, const char *fmt, ...) {
    if (err == NULL) return MCDC_E_INVALID;
    char prefix[MCDC_ERROR_MESSAGE_MAX];
    char old[MCDC_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->message, sizeof old);
    old[sizeof old - 1] = 0;
    size_t pl = strlen(prefix);
    if (pl > sizeof err->message - 3) pl = sizeof err->message - 3;
    memcpy(err->message, prefix, pl);
    memcpy(err->message + pl, ": ", 2);
    size_t room = sizeof err->message - pl - 3, ol = strlen(old);
    if (ol > room) ol = room;
    memcpy(err->message + pl + 2, old, ol);
    err->message[pl + 2 + ol] = 0;
    return err->code;
}

void mcdc_error_clear(mcdc_error *err) {
    if (err) memset(err, 0, sizeof *err);
}

/* ---- allocator ----------------------------------------------------------
 * A 16-byte header in front of each block records its size and the
 * accounting it was charged to, so that a free (on any thread) gives the
 * bytes back to the accounting that took them, without the caller passing
 * sizes. Accounting is per runtime, never per process: each thread carries
 * the accounting of the job it runs for (mcdc_alloc_bind); a thread with
 * none charges the blocks to UNACCOUNTED, a constant object nothing writes,
 * so the library keeps no mutable process-wide allocator state. */
#define ACCT_MAGIC ((size_t)0x6d636463u)

typedef struct {
    size_t size;
    const mcdc_alloc_acct *acct; /* NULL once freed: a second free asserts */
} alloc_hdr;
_Static_assert(sizeof(alloc_hdr) == 16, "allocation header keeps 16-byte alignment");

/* Charged when no accounting is bound: never counted, never failed. */
static const mcdc_alloc_acct UNACCOUNTED = {ACCT_MAGIC, 0, 0, 0, 0, 0};

static _Thread_local mcdc_alloc_acct *tl_acct;

void mcdc_alloc_acct_init(mcdc_alloc_acct *a, int64_t live_bytes_max) {
    MCDC_ASSERT(a != NULL && live_bytes_max >= 0);
    a->magic = ACCT_MAGIC;
    atomic_init(&a->calls, 0);
    atomic_init(&a->live, 0);
    atomic_init(&a->peak, 0);
    atomic_init(&a->fail_at, 0);
    a->live_max = live_bytes_max;
}

mcdc_alloc_acct *mcdc_alloc_bind(mcdc_alloc_acct *a) {
    MCDC_ASSERT(a == NULL || a->magic == ACCT_MAGIC);
    mcdc_alloc_acct *old = tl_acct;
    tl_acct = a;
    return old;
}

mcdc_alloc_acct *mcdc_alloc_bound(void) { return tl_acct; }

static bool alloc_should_fail(mcdc_alloc_acct *a) {
    if (a == NULL) return false;
    int64_t at = atomic_load(&a->fail_at);
    if (at <= 0) return false;
    return atomic_fetch_sub(&a->fail_at, 1) == 1;
}

/* Charges delta bytes to a; a growth past its ceiling is refused (the
 * charge undone) and answers false. */
static bool account(const mcdc_alloc_acct *acct, int64_t delta) {
    if (acct == &UNACCOUNTED) return true;
    mcdc_alloc_acct *a = (mcdc_alloc_acct *)acct; /* every other one is mutable */
    int64_t live = atomic_fetch_add(&a->live, delta) + delta;
    if (delta > 0 && a->live_max > 0 && live > a->live_max) {
        atomic_fetch_sub(&a->live, delta);
        return false;
    }
    int64_t peak = atomic_load(&a->peak);
    while (live > peak && !atomic_compare_exchange_weak(&a->peak, &peak, live)) {
    }
    return true;
}

static alloc_hdr *hdr_of(void *p) {
    alloc_hdr *h = (alloc_hdr *)p - 1;
    MCDC_ASSERT(h->acct != NULL && h->acct->magic == ACCT_MAGIC);
    return h;
}

void *mcdc_malloc(size_t n) {
    mcdc_alloc_acct *a = tl_acct;
    if (alloc_should_fail(a)) return NULL;
    if (n > SIZE_MAX - sizeof(alloc_hdr) || n > (size_t)INT64_MAX) return NULL;
    const mcdc_alloc_acct *charged = a ? a : &UNACCOUNTED;
    if (!account(charged, (int64_t)n)) return NULL;
    alloc_hdr *h = malloc(sizeof *h + n);
    if (h == NULL) {
        account(charged, -(int64_t)n);
        return NULL;
    }
    h->size = n;
    h->acct = charged;
    if (a) atomic_fetch_add(&a->calls, 1);
    return h + 1;
}

void *mcdc_calloc(size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    void *p = mcdc_malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

/* A block keeps the accounting that first took it: its growth is charged
 * there too, whichever thread grows it. */
void *mcdc_realloc(void *p, size_t n) {
    if (p == NULL) return mcdc_malloc(n);
    mcdc_alloc_acct *a = tl_acct;
    if (alloc_should_fail(a)) return NULL;
    if (n > SIZE_MAX - sizeof(alloc_hdr) || n > (size_t)INT64_MAX) return NULL;
    alloc_hdr *h = hdr_of(p);
    const mcdc_alloc_acct *charged = h->acct;
    int64_t delta = (int64_t)n - (int64_t)h->size;
    if (delta > 0 && !account(charged, delta)) return NULL;
    alloc_hdr *nh = realloc(h, sizeof *nh + n);
    if (nh == NULL) {
        if (delta > 0) account(charged, -delta);
        return NULL;
    }
    if (delta < 0) account(charged, delta);
    nh->size = n;
    if (a) atomic_fetch_add(&a->calls, 1);
    return nh + 1;
}

void mcdc_free(void *p) {
    if (p == NULL) return;
    alloc_hdr *h = hdr_of(p);
    account(h->acct, -(int64_t)h->size);
    h->acct = NULL;
    free(h);
}

char *mcdc_strndup(const char *s, size_t n) {
    char *r = mcdc_malloc(n + 1);
    if (r == NULL) return NULL;
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

char *mcdc_strdup(const char *s) { return mcdc_strndup(s, strlen(s)); }

char *mcdc_asprintf(const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_end(ap2);
        return NULL;
    }
    char *r = mcdc_malloc((size_t)n + 1);
    if (r) vsnprintf(r, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return r;
}

void mcdc_alloc_acct_stats(const mcdc_alloc_acct *a, mcdc_alloc_stats *out) {
    MCDC_ASSERT(a != NULL && a->magic == ACCT_MAGIC);
    mcdc_alloc_acct *m = (mcdc_alloc_acct *)a; /* atomic loads take non-const */
    out->calls = atomic_load(&m->calls);
    out->live_bytes = atomic_load(&m->live);
    out->peak_bytes = atomic_load(&m->peak);
}

void mcdc_alloc_acct_fail_at(mcdc_alloc_acct *a, int64_t nth) {
    MCDC_ASSERT(a != NULL && a->magic == ACCT_MAGIC);
    atomic_store(&a->fail_at, nth);
}

void mcdc_alloc_get_stats(mcdc_alloc_stats *out) {
    if (tl_acct) mcdc_alloc_acct_stats(tl_acct, out);
    else *out = (mcdc_alloc_stats){0, 0, 0};
}

void mcdc_alloc_fail_at(int64_t nth) {
    if (tl_acct) mcdc_alloc_acct_fail_at(tl_acct, nth);
}

/* ---- buffers ------------------------------------------------------------ */
int mcdc_buf_reserve(mcdc_buf *b, size_t extra, mcdc_error *err) {
    size_t limit = b->limit ? b->limit : MCDC_BATCH_BYTES_MAX;
    if (extra > limit || b->len > limit - extra)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "buffer would exceed its limit of %zu bytes", limit);
    size_t need = b->len + extra + 1; /* room for a NUL terminator */
    if (need <= b->cap) return MCDC_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *p = mcdc_realloc(b->data, cap);
    if (p == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory growing a buffer to %zu bytes",
                              cap);
    b->data = p;
    b->cap = cap;
    return MCDC_OK;
}

int mcdc_buf_append(mcdc_buf *b, const void *p, size_t n, mcdc_error *err) {
    int rc = mcdc_buf_reserve(b, n, err);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    return MCDC_OK;
}

int mcdc_buf_append_str(mcdc_buf *b, const char *s, mcdc_error *err) {
    return mcdc_buf_append(b, s, strlen(s), err);
}

int mcdc_buf_append_byte(mcdc_buf *b, uint8_t v, mcdc_error *err) {
    return mcdc_buf_append(b, &v, 1, err);
}

int mcdc_buf_printf(mcdc_buf *b, mcdc_error *err, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_end(ap2);
        return mcdc_error_set(err, MCDC_E_INVALID, "bad format string");
    }
    int rc = mcdc_buf_reserve(b, (size_t)n, err);
    if (rc == MCDC_OK) {
        vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
    return rc;
}

int mcdc_buf_cstr(mcdc_buf *b, mcdc_error *err) {
    int rc = mcdc_buf_reserve(b, 0, err);
    if (rc) return rc;
    b->data[b->len] = 0;
    return MCDC_OK;
}

void mcdc_buf_reset(mcdc_buf *b) { b->len = 0; }

void mcdc_buf_free(mcdc_buf *b) {
    if (b == NULL) return;
    mcdc_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- logging ------------------------------------------------------------ */
static _Thread_local const mcdc_log_sink *tl_sink;

const mcdc_log_sink *mcdc_log_use(const mcdc_log_sink *sink) {
    const mcdc_log_sink *old = tl_sink;
    tl_sink = sink;
    return old;
}

const mcdc_log_sink *mcdc_log_current(void) { return tl_sink; }

static _Thread_local mcdc_log_sink tl_own;

void mcdc_log_to_thread(mcdc_log_fn fn, void *user, mcdc_log_level level) {
    tl_own = (mcdc_log_sink){fn, user, level};
    tl_sink = fn ? &tl_own : NULL;
}

void mcdc_log(mcdc_log_level level, const char *fmt, ...) {
    const mcdc_log_sink *s = tl_sink;
    if ((int)level > (int)(s ? s->level : MCDC_LOG_WARN)) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s && s->fn) s->fn(s->user, level, msg);
    else mcdc_log_stderr(level, msg);
}

void mcdc_log_stderr(mcdc_log_level level, const char *msg) {
    static const char *const names[] = {"error", "warning", "info", "debug"};
    MCDC_ASSERT((int)level >= 0 && (int)level < 4);
    /* One fprintf per line: stdio locks the stream, lines do not interleave. */
    fprintf(stderr, "mssql-cdc: %s: %s\n", names[level], msg);
}

/* ---- a job's frame --------------------------------------------------------------- */
mcdc_job_scope mcdc_job_enter(mcdc_alloc_acct *acct, const mcdc_log_sink *sink) {
    mcdc_job_scope host = {tl_sink, tl_acct};
    mcdc_alloc_bind(acct);
    tl_sink = sink;
    return host;
}

void mcdc_job_leave(mcdc_job_scope host) {
    mcdc_alloc_bind(host.acct);
    tl_sink = host.sink;
}

/* ---- threads -------------------------------------------------------------- */
typedef struct {
    void *(*fn)(void *);
    void *arg;
    mcdc_alloc_acct *acct;
    const mcdc_log_sink *sink;
} thread_start;

static void *thread_main(void *arg) {
    thread_start st = *(thread_start *)arg;
    mcdc_alloc_bind(st.acct);
    mcdc_free(arg); /* charged to st.acct by the starting thread: given back there */
    mcdc_log_use(st.sink);
    return st.fn(st.arg);
}

int mcdc_thread_start(pthread_t *th, void *(*fn)(void *), void *arg) {
    MCDC_ASSERT(th != NULL && fn != NULL);
    thread_start *st = mcdc_malloc(sizeof *st);
    if (st == NULL) return ENOMEM;
    *st = (thread_start){fn, arg, tl_acct, tl_sink};
    int rc = pthread_create(th, NULL, thread_main, st);
    if (rc != 0) mcdc_free(st);
    return rc;
}

/* ---- time --------------------------------------------------------------- */
int64_t mcdc_now_utc_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t mcdc_monotonic_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void mcdc_sleep_ms(int64_t ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* Howard Hinnant's civil-date algorithms (public domain description). */
int64_t mcdc_days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t mp = (int64_t)m + (m > 2 ? -3 : 9);
    int64_t doy = (153 * mp + 2) / 5 + (int64_t)d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void mcdc_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    *m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    *y = yy + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

void mcdc_format_ts_us(int64_t us, int frac_digits, char out[32]) {
    int64_t days = floor_div(us, 86400000000LL);
    int64_t rem = us - days * 86400000000LL;
    int64_t y;
    unsigned m, d;
    mcdc_civil_from_days(days, &y, &m, &d);
    int64_t secs = rem / 1000000, frac = rem % 1000000;
    int hh = (int)(secs / 3600), mi = (int)(secs / 60 % 60), ss = (int)(secs % 60);
    if (frac_digits == 3)
        snprintf(out, 32, "%04lld-%02u-%02uT%02d:%02d:%02d.%03lld", (long long)y, m, d, hh, mi,
                 ss, (long long)(frac / 1000));
    else if (frac_digits == 0)
        snprintf(out, 32, "%04lld-%02u-%02uT%02d:%02d:%02d", (long long)y, m, d, hh, mi, ss);
    else
        snprintf(out, 32, "%04lld-%02u-%02uT%02d:%02d:%02d.%06lld", (long long)y, m, d, hh, mi,
                 ss, (long long)frac);
}

static bool digits(const char *s, size_t n, size_t at, size_t count, int64_t *v) {
    if (at + count > n) return false;
    int64_t r = 0;
    for (size_t i = 0; i < count; i++) {
        if (!isdigit((unsigned char)s[at + i])) return false;
        r = r * 10 + (s[at + i] - '0');
    }
    *v = r;
    return true;
}

int mcdc_parse_ts_us(const char *s, size_t n, int64_t *out_us, mcdc_error *err) {
    int64_t y, mo, d, hh = 0, mi = 0, ss = 0, frac = 0;
    size_t i = 0;
    bool neg_year = false;
    if (n > 0 && s[0] == '-') {
        neg_year = true;
        i = 1;
    }
    if (!digits(s, n, i, 4, &y) || i + 4 >= n || s[i + 4] != '-' ||
        !digits(s, n, i + 5, 2, &mo) || i + 7 >= n || s[i + 7] != '-' ||
        !digits(s, n, i + 8, 2, &d))
        goto bad;
    if (neg_year) y = -y;
    i += 10;
    if (i < n && (s[i] == 'T' || s[i] == ' ')) {
        if (!digits(s, n, i + 1, 2, &hh) || i + 3 >= n || s[i + 3] != ':' ||
            !digits(s, n, i + 4, 2, &mi))
            goto bad;
        i += 6;
        if (i < n && s[i] == ':') {
            if (!digits(s, n, i + 1, 2, &ss)) goto bad;
            i += 3;
        }
        if (i < n && s[i] == '.') {
            i++;
            int nd = 0;
            while (i < n && isdigit((unsigned char)s[i])) {
                if (nd < 6) frac = frac * 10 + (s[i] - '0');
                nd++;
                i++;
            }
            if (nd == 0) goto bad;
            for (; nd < 6; nd++) frac *= 10;
        }
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || hh > 23 || mi > 59 || ss > 59) goto bad;
    /* a day the month lacks (02-30) is refused, not read as the next month's */
    static const int8_t month_days[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > month_days[mo - 1] || (mo == 2 && d == 29 && !leap)) goto bad;
    int64_t off_min = 0;
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        int64_t oh, om;
        int sign = s[i] == '-' ? -1 : 1;
        if (!digits(s, n, i + 1, 2, &oh) || i + 3 >= n || s[i + 3] != ':' ||
            !digits(s, n, i + 4, 2, &om))
            goto bad;
        off_min = sign * (oh * 60 + om);
        i += 6;
    }
    if (i != n) goto bad;
    int64_t days = mcdc_days_from_civil(y, (unsigned)mo, (unsigned)d);
    *out_us = ((days * 86400 + hh * 3600 + mi * 60 + ss) - off_min * 60) * 1000000 + frac;
    return MCDC_OK;
bad:
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "invalid timestamp '%.*s': expected YYYY-MM-DD[THH:MM:SS[.fff]]",
                          (int)(n > 64 ? 64 : n), s);
}

const char mcdc_hex_pairs[513] =
    "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F"
    "202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F"
    "404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F"
    "606162636465666768696A6B6C6D6E6F707172737475767778797A7B7C7D7E7F"
    "808182838485868788898A8B8C8D8E8F909192939495969798999A9B9C9D9E9F"
    "A0A1A2A3A4A5A6A7A8A9AAABACADAEAFB0B1B2B3B4B5B6B7B8B9BABBBCBDBEBF"
    "C0C1C2C3C4C5C6C7C8C9CACBCCCDCECFD0D1D2D3D4D5D6D7D8D9DADBDCDDDEDF"
    "E0E1E2E3E4E5E6E7E8E9EAEBECEDEEEFF0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF";

uint64_t mcdc_hash_bytes(const void *p, size_t n, uint64_t seed) {
    const uint8_t *s = p;
    uint64_t h = seed ^ 0x9e3779b97f4a7c15ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = mcdc_mix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    return mcdc_mix64(h ^ w ^ ((uint64_t)n << 56) ^ (uint64_t)n);
}

void mcdc_uuid4(char out[37]) {
    uint8_t b[16];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    if (got != sizeof b) {
        /* No /dev/urandom: time and address entropy keep names unique enough
         * for file names; they are never security tokens. */
        uint64_t x = (uint64_t)mcdc_now_utc_us() ^ (uint64_t)(uintptr_t)out ^
                     ((uint64_t)mcdc_monotonic_us() << 17);
        for (size_t i = 0; i < sizeof b; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b[i] = (uint8_t)x;
        }
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* ---- strings ------------------------------------------------------------ */
bool mcdc_str_ieq(const char *a, const char *b) { return strcasecmp(a, b) == 0; }
bool mcdc_str_nieq(const char *a, const char *b, size_t n) {
    return strncasecmp(a, b, n) == 0;
}

int mcdc_parse_i64(const char *s, int64_t *out) {
    if (s == NULL || *s == 0) return MCDC_E_INVALID;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != 0 || isspace((unsigned char)*s)) return MCDC_E_INVALID;
    *out = v;
    return MCDC_OK;
}
