/*
 * mcdc_http.c - the object stores' HTTP layer on libcurl (see mcdc_http.h).
 *
 * A pool is a stack of idle easy handles under a mutex plus one curl share
 * (DNS cache, TLS sessions, connections) with a lock per kind of shared
 * data. A request takes a handle (or makes one), runs its attempts on it
 * and gives it back; the handle is reset before each attempt, which keeps
 * nothing of the previous request's options while the share keeps its
 * connections.
 */
#include "mcdc_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- libcurl's global state -----------------------------------------------------
 * curl_global_init must run once before the first handle (it initialises
 * GnuTLS under curl) and is not safe to run twice at once; the library has
 * no init call of its own, so the first pool runs it through pthread_once.
 * It is never undone: curl_global_cleanup at exit would race other users of
 * libcurl in the host process, and the OS frees it anyway. */
static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc = CURLE_FAILED_INIT;

static void curl_once(void) { g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- headers ------------------------------------------------------------------------ */

int mcdc_http_headers_set(mcdc_http_headers *h, const char *name, const char *value,
                          mcdc_error *err) {
    MCDC_ASSERT(h != NULL && name != NULL && value != NULL);
    char *v = mcdc_strdup(value);
    if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (HTTP header)");
    for (size_t i = 0; i < h->count; i++) {
        if (strcasecmp(h->items[i].name, name) != 0) continue;
        mcdc_free(h->items[i].value);
        h->items[i].value = v;
        return MCDC_OK;
    }
    if (h->count == MCDC_HTTP_HEADERS_MAX) {
        mcdc_free(v);
        return mcdc_error_set(err, MCDC_E_LIMIT, "more than %d HTTP request headers",
                              MCDC_HTTP_HEADERS_MAX);
    }
    char *n = mcdc_strdup(name);
    if (n == NULL) {
        mcdc_free(v);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (HTTP header)");
    }
    h->items[h->count].name = n;
    h->items[h->count].value = v;
    h->count++;
    return MCDC_OK;
}

const char *mcdc_http_headers_get(const mcdc_http_headers *h, const char *name) {
    for (size_t i = 0; h && i < h->count; i++)
        if (strcasecmp(h->items[i].name, name) == 0) return h->items[i].value;
    return NULL;
}

int mcdc_http_headers_copy(mcdc_http_headers *dst, const mcdc_http_headers *src,
                           mcdc_error *err) {
    dst->count = 0;
    for (size_t i = 0; src && i < src->count; i++) {
        int rc = mcdc_http_headers_set(dst, src->items[i].name, src->items[i].value, err);
        if (rc) {
            mcdc_http_headers_free(dst);
            return rc;
        }
    }
    return MCDC_OK;
}

void mcdc_http_headers_free(mcdc_http_headers *h) {
    if (h == NULL) return;
    for (size_t i = 0; i < h->count; i++) {
        mcdc_free(h->items[i].name);
        mcdc_free(h->items[i].value);
    }
    h->count = 0;
}

/* ---- the pool ------------------------------------------------------------------------- */

struct mcdc_http {
    mcdc_http_config cfg; /* its strings point at the copies below */
    char *ca_file, *proxy_url, *no_proxy; /* owned, or NULL */
    pthread_mutex_t mu; /* the idle handles */
    CURL *idle[MCDC_HTTP_POOL_HANDLES_MAX];
    size_t n_idle;
    CURLSH *share;
    pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
};

static void share_lock(CURL *c, curl_lock_data data, curl_lock_access access, void *user) {
    (void)c;
    (void)access;
    mcdc_http *h = user;
    pthread_mutex_lock(&h->share_mu[data]);
}

static void share_unlock(CURL *c, curl_lock_data data, void *user) {
    (void)c;
    mcdc_http *h = user;
    pthread_mutex_unlock(&h->share_mu[data]);
}

static int64_t or_default(int64_t v, int64_t dflt) { return v > 0 ? v : dflt; }

int mcdc_http_create(mcdc_http **out, const mcdc_http_config *cfg, mcdc_error *err) {
    MCDC_ASSERT(out != NULL);
    *out = NULL;
    pthread_once(&g_curl_once, curl_once);
    if (g_curl_init_rc != CURLE_OK)
        return mcdc_error_set(err, MCDC_E_IO, "libcurl cannot start: %s",
                              curl_easy_strerror(g_curl_init_rc));
    mcdc_http *h = mcdc_calloc(1, sizeof *h);
    if (h == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (HTTP pool)");
    mcdc_http_config c = cfg ? *cfg : (mcdc_http_config){0};
    h->cfg.connect_timeout_ms = or_default(c.connect_timeout_ms,
                                           MCDC_HTTP_CONNECT_TIMEOUT_MS_DEFAULT);
    h->cfg.stall_timeout_ms = or_default(c.stall_timeout_ms, MCDC_HTTP_STALL_TIMEOUT_MS_DEFAULT);
    h->cfg.deadline_ms = or_default(c.deadline_ms, MCDC_HTTP_DEADLINE_MS_DEFAULT);
    h->cfg.attempts_max = c.attempts_max > 0 ? c.attempts_max : MCDC_HTTP_ATTEMPTS_DEFAULT;
    h->cfg.backoff_base_ms = or_default(c.backoff_base_ms, MCDC_HTTP_BACKOFF_BASE_MS_DEFAULT);
    h->cfg.backoff_max_ms = or_default(c.backoff_max_ms, MCDC_HTTP_BACKOFF_MAX_MS_DEFAULT);
    pthread_mutex_init(&h->mu, NULL);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_init(&h->share_mu[i], NULL);
    if ((c.ca_file && (h->ca_file = mcdc_strdup(c.ca_file)) == NULL) ||
        (c.proxy_url && (h->proxy_url = mcdc_strdup(c.proxy_url)) == NULL) ||
        (c.no_proxy && (h->no_proxy = mcdc_strdup(c.no_proxy)) == NULL)) {
        mcdc_http_free(h);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (HTTP pool)");
    }
    h->cfg.ca_file = h->ca_file;
    h->cfg.proxy_url = h->proxy_url;
    h->cfg.no_proxy = h->no_proxy;
    h->share = curl_share_init();
    if (h->share == NULL) {
        mcdc_http_free(h);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (HTTP connection cache)");
    }
    curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    *out = h;
    return MCDC_OK;
}

void mcdc_http_free(mcdc_http *h) {
    if (h == NULL) return;
    for (size_t i = 0; i < h->n_idle; i++) curl_easy_cleanup(h->idle[i]);
    if (h->share) curl_share_cleanup(h->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_destroy(&h->share_mu[i]);
    pthread_mutex_destroy(&h->mu);
    mcdc_free(h->ca_file);
    mcdc_free(h->proxy_url);
    mcdc_free(h->no_proxy);
    mcdc_free(h);
}

static CURL *take_handle(mcdc_http *h) {
    pthread_mutex_lock(&h->mu);
    CURL *c = h->n_idle ? h->idle[--h->n_idle] : NULL;
    pthread_mutex_unlock(&h->mu);
    return c ? c : curl_easy_init();
}

static void give_handle(mcdc_http *h, CURL *c) {
    if (c == NULL) return;
    pthread_mutex_lock(&h->mu);
    if (h->n_idle < MCDC_HTTP_POOL_HANDLES_MAX) {
        h->idle[h->n_idle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&h->mu);
    if (c) curl_easy_cleanup(c);
}

/* ---- one attempt ------------------------------------------------------------------------ */

typedef struct attempt {
    const mcdc_http_request *req;
    mcdc_http_response *resp;
    size_t sent;          /* body bytes handed to curl */
    size_t out_start;     /* body_out->len before the request */
    int fail;             /* a callback's own failure (MCDC_E_LIMIT...) */
    mcdc_error *err;      /* where that failure's message goes */
    int64_t retry_after_ms; /* -1: not given */
} attempt;

static bool status_ok(long s) { return s >= 200 && s < 300; }

/* Copies a header value (cut to room) without its trailing blanks. */
static void keep_value(char *dst, size_t room, const char *v, size_t n) {
    if (n >= room) n = room - 1;
    memcpy(dst, v, n);
    dst[n] = 0;
}

static int64_t parse_i64_n(const char *s, size_t n) {
    int64_t v = 0;
    if (n == 0) return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* "bytes first-last/total" (either side may be '*'). */
static void parse_content_range(mcdc_http_response *r, const char *v, size_t n) {
    r->range_first = r->range_last = r->range_total = -1;
    if (n < 6 || strncasecmp(v, "bytes ", 6) != 0) return;
    const char *p = v + 6, *end = v + n;
    const char *slash = memchr(p, '/', (size_t)(end - p));
    if (slash == NULL) return;
    const char *dash = memchr(p, '-', (size_t)(slash - p));
    if (dash) {
        r->range_first = parse_i64_n(p, (size_t)(dash - p));
        r->range_last = parse_i64_n(dash + 1, (size_t)(slash - dash - 1));
    }
    r->range_total = parse_i64_n(slash + 1, (size_t)(end - slash - 1));
}

static void response_clear_headers(mcdc_http_response *r) {
    r->status = 0;
    r->content_length = r->range_first = r->range_last = r->range_total = -1;
    r->last_modified_ms = -1;
    r->etag[0] = r->request_id[0] = r->region[0] = r->error_code[0] = 0;
    for (int i = 0; i < MCDC_HTTP_CAPTURE_MAX; i++) {
        mcdc_free(r->captured[i]);
        r->captured[i] = NULL;
    }
}

static size_t on_header(char *line, size_t size, size_t nitems, void *user) {
    attempt *a = user;
    size_t n = size * nitems, len = n;
    mcdc_http_response *r = a->resp;
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n')) len--;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) { /* a status line: a new answer */
        response_clear_headers(r);
        a->retry_after_ms = -1;
        const char *sp = memchr(line, ' ', len);
        if (sp && (size_t)(line + len - sp) >= 4) r->status = (long)parse_i64_n(sp + 1, 3);
        return n;
    }
    const char *colon = memchr(line, ':', len);
    if (colon == NULL) return n;
    size_t name_len = (size_t)(colon - line);
    const char *v = colon + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
    size_t vn = (size_t)(end - v);
#define IS(h) (name_len == sizeof(h) - 1 && strncasecmp(line, h, name_len) == 0)
    if (IS("ETag")) keep_value(r->etag, sizeof r->etag, v, vn);
    else if (IS("x-amz-request-id") || IS("x-ms-request-id"))
        keep_value(r->request_id, sizeof r->request_id, v, vn);
    else if (IS("x-amz-bucket-region")) keep_value(r->region, sizeof r->region, v, vn);
    else if (IS("x-ms-error-code")) keep_value(r->error_code, sizeof r->error_code, v, vn);
    else if (IS("Content-Length")) r->content_length = parse_i64_n(v, vn);
    else if (IS("Content-Range")) parse_content_range(r, v, vn);
    else if (IS("Retry-After")) {
        int64_t s = parse_i64_n(v, vn);
        if (s >= 0) a->retry_after_ms = s * 1000;
    } else if (IS("Last-Modified")) {
        char tmp[64];
        keep_value(tmp, sizeof tmp, v, vn);
        r->last_modified_ms = mcdc_http_parse_date_ms(tmp);
    }
#undef IS
    for (int i = 0; a->req->capture && i < MCDC_HTTP_CAPTURE_MAX && a->req->capture[i]; i++) {
        const char *want = a->req->capture[i];
        if (strlen(want) != name_len || strncasecmp(line, want, name_len) != 0) continue;
        mcdc_free(r->captured[i]);
        r->captured[i] = mcdc_strndup(v, vn);
    }
    return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
    attempt *a = user;
    size_t n = size * nmemb;
    mcdc_http_response *r = a->resp;
    const mcdc_http_request *q = a->req;
    if (!status_ok(r->status)) { /* an error document: keep its head */
        size_t room = MCDC_HTTP_ERROR_BODY_MAX - r->error_body.len, k = n < room ? n : room;
        if (k && mcdc_buf_append(&r->error_body, data, k, NULL) != MCDC_OK) return 0;
        return n;
    }
    if (q->body_out) {
        int rc = mcdc_buf_append(q->body_out, data, n, a->err);
        if (rc) {
            a->fail = rc;
            return 0;
        }
    } else if (q->dst) {
        if ((uint64_t)r->body_bytes + n > q->dst_cap) {
            a->fail = mcdc_error_set(a->err, MCDC_E_PROTOCOL,
                                     "%s: the server sent more than the %zu bytes asked for",
                                     q->what, q->dst_cap);
            return 0;
        }
        memcpy((char *)q->dst + r->body_bytes, data, n);
    }
    r->body_bytes += (int64_t)n;
    return n;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *user) {
    attempt *a = user;
    size_t room = size * nitems, left = a->req->body_len - a->sent, k = left < room ? left : room;
    if (k) memcpy(buf, (const char *)a->req->body + a->sent, k);
    a->sent += k;
    return k;
}

/* curl may rewind an upload (a reused connection found dead). */
static int on_seek(void *user, curl_off_t offset, int origin) {
    attempt *a = user;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > a->req->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    a->sent = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

/* The curl header list of one attempt: the signed headers, and blanks that
 * stop curl adding its own (Expect: 100-continue, a form Content-Type, the
 * Accept a signature does not cover). */
static int build_slist(struct curl_slist **out, const mcdc_http_headers *hdrs, mcdc_error *err) {
    struct curl_slist *l = NULL;
    bool has_type = mcdc_http_headers_get(hdrs, "Content-Type") != NULL;
    static const char *const blanks[] = {"Expect:", "Accept:", "Content-Type:"};
    for (size_t i = 0; i < sizeof blanks / sizeof blanks[0]; i++) {
        if (i == 2 && has_type) continue;
        struct curl_slist *nl = curl_slist_append(l, blanks[i]);
        if (nl == NULL) goto oom;
        l = nl;
    }
    for (size_t i = 0; i < hdrs->count; i++) {
        char *line = mcdc_asprintf("%s: %s", hdrs->items[i].name, hdrs->items[i].value);
        struct curl_slist *nl = line ? curl_slist_append(l, line) : NULL;
        mcdc_free(line);
        if (nl == NULL) goto oom;
        l = nl;
    }
    *out = l;
    return MCDC_OK;
oom:
    curl_slist_free_all(l);
    return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (HTTP headers)");
}

static void set_options(CURL *c, mcdc_http *h, attempt *a, struct curl_slist *hl,
                        int64_t remaining_ms, char *errbuf) {
    const mcdc_http_request *q = a->req;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_SHARE, h->share);
    curl_easy_setopt(c, CURLOPT_URL, q->url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 1L);
    /* No proxy from the process's environment (the library reads none):
     * the pool's own, or none at all. */
    curl_easy_setopt(c, CURLOPT_PROXY, h->cfg.proxy_url ? h->cfg.proxy_url : "");
    if (h->cfg.no_proxy) curl_easy_setopt(c, CURLOPT_NOPROXY, h->cfg.no_proxy);
    if (h->cfg.ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, h->cfg.ca_file);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)h->cfg.connect_timeout_ms);
    long stall_s = (long)((h->cfg.stall_timeout_ms + 999) / 1000);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_s > 0 ? stall_s : 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(remaining_ms > 0 ? remaining_ms : 1));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    switch (q->method) {
    case MCDC_HTTP_GET: curl_easy_setopt(c, CURLOPT_HTTPGET, 1L); break;
    case MCDC_HTTP_HEAD: curl_easy_setopt(c, CURLOPT_NOBODY, 1L); break;
    case MCDC_HTTP_DELETE: curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE"); break;
    case MCDC_HTTP_POST:
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body ? (const char *)q->body : "");
        break;
    case MCDC_HTTP_PUT:
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, a);
        curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(c, CURLOPT_SEEKDATA, a);
        break;
    }
}

/* ---- retries ------------------------------------------------------------------------------ */

const char *mcdc_http_method_name(mcdc_http_method m) {
    static const char *const names[] = {"GET", "PUT", "POST", "DELETE", "HEAD"};
    MCDC_ASSERT((unsigned)m < sizeof names / sizeof names[0]);
    return names[m];
}

/* Throttling and server errors worth another attempt. 500/502/504 may come
 * after the server acted (ambiguous); 503 and 429 are refusals to act. */
static bool status_retryable(long s, const mcdc_http_request *q) {
    return s == 500 || s == 502 || s == 503 || s == 504 || s == 429 ||
           (q->retry_status != 0 && s == q->retry_status);
}

static bool status_ambiguous(long s, mcdc_http_method m) {
    return (s == 500 || s == 502 || s == 504) && m != MCDC_HTTP_GET && m != MCDC_HTTP_HEAD;
}

/* Transport failures: whether another attempt may mend it. */
static bool curl_retryable(CURLcode rc) {
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_READ_ERROR:
        return true;
    default:
        return false;
    }
}

/* A jittered wait (full jitter: uniform in [0, min(max, base * 2^n)]). */
static int64_t backoff_ms(const mcdc_http_config *cfg, int attempt_no, uint64_t *rng) {
    int64_t cap = cfg->backoff_base_ms;
    for (int i = 1; i < attempt_no && cap < cfg->backoff_max_ms; i++) cap *= 2;
    if (cap > cfg->backoff_max_ms) cap = cfg->backoff_max_ms;
    *rng = mcdc_mix64(*rng + 0x9e3779b97f4a7c15ULL);
    return (int64_t)(*rng % (uint64_t)(cap + 1));
}

void mcdc_http_response_free(mcdc_http_response *resp) {
    if (resp == NULL) return;
    for (int i = 0; i < MCDC_HTTP_CAPTURE_MAX; i++) {
        mcdc_free(resp->captured[i]);
        resp->captured[i] = NULL;
    }
    mcdc_buf_free(&resp->error_body);
}

int mcdc_http_do(mcdc_http *h, const mcdc_http_request *req, mcdc_http_response *resp,
                 mcdc_error *err) {
    MCDC_ASSERT(h != NULL && req != NULL && resp != NULL && req->url != NULL);
    MCDC_ASSERT(req->body != NULL || req->body_len == 0);
    MCDC_ASSERT(req->body_out == NULL || req->dst == NULL);
    const char *what = req->what ? req->what : mcdc_http_method_name(req->method);
    memset(resp, 0, sizeof *resp);
    response_clear_headers(resp);
    resp->error_body.limit = MCDC_HTTP_ERROR_BODY_MAX + 1;
    CURL *c = take_handle(h);
    if (c == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (HTTP handle)");
    attempt a = {.req = req, .resp = resp, .err = err, .retry_after_ms = -1};
    a.out_start = req->body_out ? req->body_out->len : 0;
    int64_t start = mcdc_monotonic_us() / 1000, deadline = start + h->cfg.deadline_ms;
    uint64_t rng = (uint64_t)mcdc_monotonic_us() ^ (uint64_t)(uintptr_t)&a ^
                   (uint64_t)pthread_self();
    char errbuf[CURL_ERROR_SIZE];
    char last[CURL_ERROR_SIZE + 64] = "";
    int rc = MCDC_OK;
    for (;;) {
        resp->attempts++;
        a.sent = 0;
        a.fail = MCDC_OK;
        resp->body_bytes = 0;
        mcdc_buf_reset(&resp->error_body);
        if (req->body_out) req->body_out->len = a.out_start;
        response_clear_headers(resp);
        mcdc_http_headers hdrs = {0};
        rc = mcdc_http_headers_copy(&hdrs, req->headers, err);
        if (rc == MCDC_OK && req->sign) rc = req->sign(req->sign_ctx, req, &hdrs, err);
        struct curl_slist *hl = NULL;
        if (rc == MCDC_OK) rc = build_slist(&hl, &hdrs, err);
        mcdc_http_headers_free(&hdrs);
        if (rc) {
            mcdc_error_wrap(err, "%s", what);
            break;
        }
        errbuf[0] = 0;
        set_options(c, h, &a, hl, deadline - mcdc_monotonic_us() / 1000, errbuf);
        CURLcode cc = curl_easy_perform(c);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
        curl_slist_free_all(hl);
        if (a.fail) { /* a callback's own failure, message set */
            rc = a.fail;
            break;
        }
        bool retry;
        if (cc != CURLE_OK) {
            curl_off_t pre = 0;
            curl_easy_getinfo(c, CURLINFO_PRETRANSFER_TIME_T, &pre);
            bool sent = pre > 0; /* past the connection: the request may be out */
            snprintf(last, sizeof last, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
            if (!curl_retryable(cc)) {
                rc = mcdc_error_set(err, MCDC_E_IO, "%s failed: %s", what, last);
                break;
            }
            if (sent && req->method != MCDC_HTTP_GET && req->method != MCDC_HTTP_HEAD)
                resp->ambiguous = true;
            retry = !sent || req->retry_ambiguous;
            resp->status = 0;
        } else {
            if (!status_retryable(resp->status, req)) {
                rc = MCDC_OK;
                break;
            }
            bool amb = status_ambiguous(resp->status, req->method);
            if (amb) resp->ambiguous = true;
            retry = !amb || req->retry_ambiguous;
            snprintf(last, sizeof last, "HTTP %ld%s%s", resp->status,
                     resp->error_code[0] ? " " : "", resp->error_code);
        }
        int64_t now = mcdc_monotonic_us() / 1000;
        int64_t wait = backoff_ms(&h->cfg, resp->attempts, &rng);
        if (a.retry_after_ms > wait)
            wait = a.retry_after_ms < MCDC_HTTP_RETRY_AFTER_MS_MAX ? a.retry_after_ms
                                                                    : MCDC_HTTP_RETRY_AFTER_MS_MAX;
        if (!retry || resp->attempts >= h->cfg.attempts_max || now + wait >= deadline) {
            if (resp->status != 0 && !retry) {
                rc = MCDC_OK; /* an answer the caller must judge (it may have acted) */
                break;
            }
            rc = mcdc_error_set(err, MCDC_E_TRANSIENT,
                                "%s failed after %d attempt%s in %.1f s: %s%s; the store is "
                                "unreachable, overloaded or slow: try again later, or check "
                                "the endpoint and the network",
                                what, resp->attempts, resp->attempts == 1 ? "" : "s",
                                (double)(now - start) / 1000.0, last,
                                resp->ambiguous ? " (it may have been carried out)" : "");
            break;
        }
        mcdc_log(MCDC_LOG_INFO, "%s: %s; retrying in %lld ms (attempt %d of %d)", what, last,
                 (long long)wait, resp->attempts + 1, h->cfg.attempts_max);
        mcdc_sleep_ms(wait);
    }
    give_handle(h, c);
    return rc;
}

/* ---- helpers ------------------------------------------------------------------------------- */

int mcdc_http_append_encoded(mcdc_buf *b, const char *s, size_t n, bool keep_slash,
                             mcdc_error *err) {
    static const char hex[] = "0123456789ABCDEF";
    int rc = mcdc_buf_reserve(b, n * 3, err);
    for (size_t i = 0; rc == MCDC_OK && i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        bool plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                     (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' ||
                     ch == '~' || (keep_slash && ch == '/');
        if (plain) {
            b->data[b->len++] = ch;
        } else {
            b->data[b->len++] = '%';
            b->data[b->len++] = (uint8_t)hex[ch >> 4];
            b->data[b->len++] = (uint8_t)hex[ch & 15];
        }
    }
    return rc;
}

static const char k_days[7][4] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
static const char k_months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

int64_t mcdc_http_parse_date_ms(const char *s) {
    /* "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 7231's preferred form) */
    char wd[4], mon[4], zone[4];
    int d, y, hh, mm, ss;
    if (s == NULL || sscanf(s, "%3s, %d %3s %d %d:%d:%d %3s", wd, &d, mon, &y, &hh, &mm, &ss,
                            zone) != 8)
        return -1;
    if (strcmp(zone, "GMT") != 0 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60 ||
        hh < 0 || mm < 0 || ss < 0 || y < 1970)
        return -1;
    unsigned m = 0;
    while (m < 12 && strcmp(k_months[m], mon) != 0) m++;
    if (m == 12) return -1;
    int64_t days = mcdc_days_from_civil(y, m + 1, (unsigned)d);
    return ((days * 24 + hh) * 60 + mm) * 60000 + (int64_t)ss * 1000;
}

void mcdc_http_format_date(int64_t ms, char out[30]) {
    int64_t secs = ms / 1000, days = secs / 86400, rem = secs % 86400;
    int64_t y;
    unsigned m, d;
    mcdc_civil_from_days(days, &y, &m, &d);
    snprintf(out, 30, "%s, %02u %s %04lld %02d:%02d:%02d GMT", k_days[days % 7], d,
             k_months[m - 1], (long long)y, (int)(rem / 3600), (int)(rem / 60 % 60),
             (int)(rem % 60));
}

const char *mcdc_storage_option(const mcdc_storage_env *env, const char *name) {
    const char *v = env && env->option ? env->option(env->octx, name) : NULL;
    return v && v[0] ? v : NULL;
}

void mcdc_http_config_proxy(mcdc_http_config *cfg, const mcdc_storage_env *env,
                            const char *base_url) {
    bool https = base_url != NULL && strncasecmp(base_url, "https://", 8) == 0;
    cfg->proxy_url = mcdc_storage_option(env, https ? "HTTPS_PROXY" : "HTTP_PROXY");
    cfg->no_proxy = mcdc_storage_option(env, "NO_PROXY");
}

int mcdc_storage_option_bool(const mcdc_storage_env *env, const char *name, bool *out,
                             mcdc_error *err) {
    const char *v = mcdc_storage_option(env, name);
    if (v == NULL) return MCDC_OK;
    if (mcdc_str_ieq(v, "true") || mcdc_str_ieq(v, "1") || mcdc_str_ieq(v, "yes")) *out = true;
    else if (mcdc_str_ieq(v, "false") || mcdc_str_ieq(v, "0") || mcdc_str_ieq(v, "no"))
        *out = false;
    else
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "storage option %s is \"%s\"; give true or false", name, v);
    return MCDC_OK;
}

int mcdc_storage_option_ms(const mcdc_storage_env *env, const char *name, int64_t max,
                           int64_t *out, mcdc_error *err) {
    const char *v = mcdc_storage_option(env, name);
    if (v == NULL) return MCDC_OK;
    int64_t ms = 0;
    if (mcdc_parse_i64(v, &ms) != MCDC_OK || ms < 1 || ms > max)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "storage option %s is \"%s\"; give a number of milliseconds "
                              "from 1 to %lld",
                              name, v, (long long)max);
    *out = ms;
    return MCDC_OK;
}

int mcdc_http_config_options(mcdc_http_config *cfg, const mcdc_storage_env *env,
                             mcdc_error *err) {
    int rc = mcdc_storage_option_ms(env, "MCDC_HTTP_CONNECT_TIMEOUT_MS",
                                    MCDC_HTTP_TIMEOUT_MS_MAX, &cfg->connect_timeout_ms, err);
    if (rc == MCDC_OK)
        rc = mcdc_storage_option_ms(env, "MCDC_HTTP_TIMEOUT_MS", MCDC_HTTP_TIMEOUT_MS_MAX,
                                    &cfg->stall_timeout_ms, err);
    if (rc == MCDC_OK)
        rc = mcdc_storage_option_ms(env, "MCDC_HTTP_DEADLINE_MS", MCDC_HTTP_TIMEOUT_MS_MAX,
                                    &cfg->deadline_ms, err);
    return rc;
}

int mcdc_creds_renew_if_due(int64_t now_ms, int64_t expires_ms, int64_t ahead_ms,
                            int (*renew)(void *ctx, mcdc_error *err), void *ctx,
                            const char *what, mcdc_error *err) {
    /* renewed ahead of expiry: a request signed now may take a while */
    if (expires_ms == 0 || now_ms < expires_ms - ahead_ms) return MCDC_OK;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = renew(ctx, &e);
    if (rc == MCDC_OK) return MCDC_OK;
    if (now_ms < expires_ms) {
        mcdc_log(MCDC_LOG_WARN, "renewing %s failed (%s); the current one is good for %lld s "
                 "more", what, e.message, (long long)((expires_ms - now_ms) / 1000));
        return MCDC_OK;
    }
    return mcdc_error_set(err, rc, "%s expired and could not be renewed: %s", what, e.message);
}
