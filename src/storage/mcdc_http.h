/*
 * mcdc_http.h - the HTTP layer under the object-store backends (S3, Azure
 * Blob): one request at a time per call, on libcurl, with retries.
 *
 * A pool (mcdc_http) belongs to one storage and is shared by its threads: it
 * keeps a few curl easy handles under a mutex and one curl share (DNS cache,
 * TLS sessions, connections), so requests reuse connections across threads
 * without any process-wide state of ours.
 *
 * A request is a method, a URL (already encoded by the caller: the layer
 * never re-encodes it), headers, a body from memory, and where its answer
 * goes: into an mcdc_buf (its limit respected) or into the caller's buffer
 * (ranged reads). Before every attempt the layer copies the request's
 * headers and calls the signing callback on the copy: signatures carry the
 * time, so a retry is signed again.
 *
 * Retries, within the request's deadline and attempt budget, with
 * exponential backoff and full jitter (Retry-After honoured): connection
 * failures before anything was sent; 500, 502, 503 (SlowDown), 504, 429 and
 * the caller's extra status (S3's 409 ConditionalRequestConflict); and
 * failures after the request went out (reset, timeout, a stall) only when
 * the request says it may be retried after an ambiguous failure. Either
 * way resp->ambiguous tells the caller that an earlier attempt may have
 * been carried out by the server (a conditional PUT that then answers 412
 * may have been our own: the caller reads the key back).
 *
 * Secrets: the layer never logs or prints a header or the URL (a SAS token
 * lives in an Azure URL's query); messages name req->what only, which must
 * not hold a secret either.
 */
#ifndef MCDC_HTTP_H
#define MCDC_HTTP_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_storage.h"
#include "mcdc_util.h"

/* ---- headers ------------------------------------------------------------------ */

typedef struct mcdc_http_header {
    char *name;  /* owned */
    char *value; /* owned */
} mcdc_http_header;

/* A small list of request headers (at most MCDC_HTTP_HEADERS_MAX). Zero
 * it to start ({0}); free with mcdc_http_headers_free. */
typedef struct mcdc_http_headers {
    mcdc_http_header items[MCDC_HTTP_HEADERS_MAX];
    size_t count;
} mcdc_http_headers;

/* Sets name to value (copied), replacing a header of the same name (case
 * insensitive). MCDC_E_LIMIT when the list is full. */
int mcdc_http_headers_set(mcdc_http_headers *h, const char *name, const char *value,
                          mcdc_error *err);
/* The value of name (case insensitive), or NULL; borrowed. */
const char *mcdc_http_headers_get(const mcdc_http_headers *h, const char *name);
/* dst (zeroed or freed) becomes a copy of src (which may be NULL: empty). */
int mcdc_http_headers_copy(mcdc_http_headers *dst, const mcdc_http_headers *src,
                           mcdc_error *err);
/* Frees the strings and empties the list. NULL-safe. */
void mcdc_http_headers_free(mcdc_http_headers *h);

/* ---- the pool ------------------------------------------------------------------- */

typedef struct mcdc_http_config {
    int64_t connect_timeout_ms; /* TCP + TLS handshake of one attempt; 0: the default */
    int64_t stall_timeout_ms;   /* an attempt moving no byte this long fails (whole
                                   seconds on the wire, at least 1); 0: the default */
    int64_t deadline_ms;        /* one request, all attempts and waits; 0: the default */
    int attempts_max;           /* attempts of one request; 0: the default */
    int64_t backoff_base_ms;    /* first wait before a retry; 0: the default */
    int64_t backoff_max_ms;     /* longest wait; 0: the default */
    /* Copied into the pool; NULL: none. The process's environment is never
     * read (no http_proxy from it): the host passes these as options. */
    const char *ca_file;   /* PEM bundle to trust instead of the system's */
    const char *proxy_url; /* "http://proxy:3128" for every request */
    const char *no_proxy;  /* hosts that bypass the proxy ("localhost,.internal") */
} mcdc_http_config;

typedef struct mcdc_http mcdc_http;

/* A pool with cfg (NULL: defaults, from mcdc_limits.h). *out is owned. */
int mcdc_http_create(mcdc_http **out, const mcdc_http_config *cfg, mcdc_error *err);
/* Closes the pool's connections. No request may be running. NULL-safe. */
void mcdc_http_free(mcdc_http *h);

/* ---- requests -------------------------------------------------------------------- */

typedef enum mcdc_http_method {
    MCDC_HTTP_GET = 0,
    MCDC_HTTP_PUT,
    MCDC_HTTP_POST,
    MCDC_HTTP_DELETE,
    MCDC_HTTP_HEAD
} mcdc_http_method;

/* "GET", "PUT"... */
const char *mcdc_http_method_name(mcdc_http_method m);

typedef struct mcdc_http_request mcdc_http_request;

/* Signs one attempt: adds its headers (a date, Authorization...) to hdrs, a
 * fresh copy of req->headers. Called before every attempt. A failure stops
 * the request with that status. */
typedef int (*mcdc_http_sign_fn)(void *ctx, const mcdc_http_request *req,
                                 mcdc_http_headers *hdrs, mcdc_error *err);

struct mcdc_http_request {
    mcdc_http_method method;
    const char *url;                  /* "https://host[:port]/path?query", encoded */
    const mcdc_http_headers *headers; /* may be NULL */
    const void *body;                 /* PUT/POST body (body_len bytes); NULL: none */
    size_t body_len;
    /* A 2xx answer's body: into body_out (appended; its limit respected:
     * more is MCDC_E_LIMIT), or into dst (at most dst_cap bytes: more is
     * MCDC_E_PROTOCOL), or dropped when both are NULL. Other answers' bodies
     * go to the response's error_body. */
    mcdc_buf *body_out;
    void *dst;
    size_t dst_cap;
    mcdc_http_sign_fn sign; /* may be NULL */
    void *sign_ctx;
    /* May be sent again after a failure once the request went out (the
     * server may have carried it out): true for reads and for writes whose
     * caller checks what happened (resp->ambiguous). */
    bool retry_ambiguous;
    int retry_status; /* one more status to retry (409 for S3's
                         ConditionalRequestConflict); 0: none */
    /* Up to MCDC_HTTP_CAPTURE_MAX more response headers to keep, by name
     * (into resp->captured[i]); NULL-terminated list or NULL. */
    const char *const *capture;
    const char *what; /* for messages: "PUT s3://bucket/key" (no secret) */
};

typedef struct mcdc_http_response {
    long status;            /* the final attempt's; 0 when none answered */
    int attempts;           /* made */
    bool ambiguous;         /* an earlier attempt may have been carried out */
    int64_t content_length; /* -1: not given */
    /* Content-Range: bytes first-last/total (-1 each when absent or '*') */
    int64_t range_first, range_last, range_total;
    int64_t last_modified_ms; /* -1: not given */
    int64_t body_bytes;       /* 2xx body bytes received (into body_out or dst) */
    char etag[MCDC_HTTP_HEADER_VALUE_MAX];       /* quotes kept, as sent */
    char request_id[MCDC_HTTP_HEADER_VALUE_MAX]; /* x-amz-request-id / x-ms-request-id */
    char region[MCDC_HTTP_HEADER_VALUE_MAX];     /* x-amz-bucket-region */
    char error_code[MCDC_HTTP_HEADER_VALUE_MAX]; /* x-ms-error-code */
    char *captured[MCDC_HTTP_CAPTURE_MAX];       /* owned, per req->capture; NULL: absent */
    mcdc_buf error_body; /* a non-2xx answer's body (at most MCDC_HTTP_ERROR_BODY_MAX) */
} mcdc_http_response;

/* Runs req on the pool (any thread). MCDC_OK when the server answered,
 * whatever the status (the caller maps it; resp->status and error_body say
 * what); MCDC_E_TRANSIENT when no answer came within the attempts and the
 * deadline (a reset, a timeout, a stall), or when the last answer was still
 * a retryable status after them (then resp->status holds it); MCDC_E_IO for
 * a failure retries cannot mend (TLS verification, a bad URL);
 * MCDC_E_LIMIT / MCDC_E_PROTOCOL for a body over its room (see above). The
 * message names req->what. resp is filled either way; free it with
 * mcdc_http_response_free. */
int mcdc_http_do(mcdc_http *h, const mcdc_http_request *req, mcdc_http_response *resp,
                 mcdc_error *err);
void mcdc_http_response_free(mcdc_http_response *resp);

/* ---- helpers for the backends ------------------------------------------------------ */

/* Appends s percent-encoded: every byte but the unreserved ones (A-Z a-z
 * 0-9 - . _ ~) and, when keep_slash, '/'. As S3 (SigV4) and Azure want
 * keys in paths and values in queries. */
int mcdc_http_append_encoded(mcdc_buf *b, const char *s, size_t n, bool keep_slash,
                             mcdc_error *err);
/* An HTTP date ("Sun, 06 Nov 1994 08:49:37 GMT") as ms since 1970; -1 when
 * it is not one. */
int64_t mcdc_http_parse_date_ms(const char *s);
/* ms since 1970 as an HTTP date; out holds 30 bytes. */
void mcdc_http_format_date(int64_t ms, char out[30]);

/* A time option: a whole number of ms from 1 to max into *out (kept when
 * the option is not given), else MCDC_E_INVALID naming it. */
int mcdc_storage_option_ms(const mcdc_storage_env *env, const char *name, int64_t max,
                           int64_t *out, mcdc_error *err);
/* A storage option's value (env->option), NULL when not given or empty. */
const char *mcdc_storage_option(const mcdc_storage_env *env, const char *name);
/* A boolean option ("true"/"false", "1"/"0", "yes"/"no", any case): *out
 * keeps its value when the option is not given; anything else is
 * MCDC_E_INVALID naming the option. */
int mcdc_storage_option_bool(const mcdc_storage_env *env, const char *name, bool *out,
                             mcdc_error *err);
/* The proxy the options name for a store at base_url (HTTPS_PROXY for an
 * https:// one, else HTTP_PROXY) and NO_PROXY, set on cfg (borrowed from
 * env): every store reaches its proxy the same way. */
void mcdc_http_config_proxy(mcdc_http_config *cfg, const mcdc_storage_env *env,
                            const char *base_url);

/* The time limits of the pool from the storage options every store takes
 * (each a whole number of ms, 1 to MCDC_HTTP_TIMEOUT_MS_MAX; not given:
 * cfg keeps its value): MCDC_HTTP_CONNECT_TIMEOUT_MS (connect_timeout_ms),
 * MCDC_HTTP_TIMEOUT_MS (stall_timeout_ms: no byte moving this long fails an
 * attempt; whole seconds on the wire) and MCDC_HTTP_DEADLINE_MS
 * (deadline_ms: one request, every attempt and wait). Anything else is
 * MCDC_E_INVALID naming the option. */
int mcdc_http_config_options(mcdc_http_config *cfg, const mcdc_storage_env *env,
                             mcdc_error *err);

/* A credential that expires at expires_ms (0: never) is renewed by
 * renew(ctx, ...) when now_ms is within ahead_ms of that. A renewal that
 * fails while the credential still holds is a warning naming what, and
 * MCDC_OK (the caller keeps using it); once it has expired the failure is
 * the result: "<what> expired and could not be renewed: ...". Every
 * credential that expires (AWS keys from a service, Entra ID tokens) is
 * renewed this one way. */
int mcdc_creds_renew_if_due(int64_t now_ms, int64_t expires_ms, int64_t ahead_ms,
                            int (*renew)(void *ctx, mcdc_error *err), void *ctx,
                            const char *what, mcdc_error *err);

#endif /* MCDC_HTTP_H */
