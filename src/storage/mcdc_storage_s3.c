/*
 * mcdc_storage_s3.c - the storage seam on Amazon S3 (and S3-compatible
 * stores: moto, MinIO...), over the HTTP layer (mcdc_http.h), signed with
 * SigV4 (mcdc_sigv4.h) by the credentials of mcdc_aws_creds.h.
 *
 * Writes. A writer keeps one part in memory (MCDC_S3_PART_BYTES, 8 MiB by
 * default). An object that fits is published by one PutObject at commit:
 * put as a plain PUT, put-if-absent with If-None-Match: * (412: the key
 * exists, MCDC_E_CONFLICT, nothing written; 409 ConditionalRequestConflict,
 * a concurrent write of the key, is retried). A larger object becomes a
 * multipart upload, started when the first part is full, its parts sent as
 * they fill (memory stays about one part), published by
 * CompleteMultipartUpload, which carries If-None-Match: * for
 * put-if-absent; until then nothing is visible. A writer dropped before its
 * commit, or whose commit failed, aborts its upload; a killed process
 * leaves the parts to the bucket's lifecycle rule for incomplete uploads,
 * and never a visible object. Scratch commits are plain puts.
 *
 * A commit whose request may have reached S3 without its answer reaching
 * us (a reset, a timeout, a 5xx) is sent again. A put-if-absent that finds
 * the key taken (412) or the upload gone (404 NoSuchUpload) reads the key
 * back, whether or not we saw an earlier attempt fail (libcurl resends on
 * a reused connection that died, unseen): the same bytes (PutObject), or the same size and multipart ETag
 * (CompleteMultipartUpload), mean the first attempt published it and the
 * commit succeeded; anything else is a lost race.
 *
 * Reads: GetObject, whole or by Range (the size from Content-Range; a range
 * at or past the end answers 416, then a HEAD gives the size). Listing:
 * ListObjectsV2 with prefix = the listed directory plus the name part (S3
 * starts at the first key with that prefix, so a log listed from
 * "_delta_log/0000000000000000012" never walks the versions before),
 * delimiter '/', continuation tokens; sorted again bytewise. Delete: S3
 * answers 204 for a missing key, so a delete reads one byte first to keep
 * the seam's MCDC_E_NOTFOUND.
 *
 * Holding a key (lock/unlock) is not offered: MCDC_E_UNSUPPORTED (the
 * lease of mcdc_storage.h comes later).
 */
#include "mcdc_storage_s3.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "mcdc_aws_creds.h"
#include "mcdc_http.h"
#include "mcdc_sigv4.h"
#include "mcdc_xml.h"

typedef struct s3 {
    mcdc_http *http;
    mcdc_aws_creds *creds;
    char *bucket;   /* owned */
    char *prefix;   /* owned: "" or "dir/" */
    char *base;     /* owned: "https://b.s3.eu-west-1.amazonaws.com" or "http://h:p/b" */
    bool path_style;
    char *region;   /* owned */
    char *endpoint; /* owned: where requests go, for messages (no secret) */
    const char *root; /* the storage's root, for messages */
    size_t part_bytes;
} s3;

/* ---- requests ---------------------------------------------------------------------------- */

typedef struct s3_call {
    mcdc_http_method method;
    const char *key;   /* below the root; NULL: the bucket */
    const char *query; /* encoded; NULL: none */
    mcdc_http_headers hdrs;
    const void *body;
    size_t body_len;
    mcdc_buf *body_out;
    void *dst;
    size_t dst_cap;
    bool retry_ambiguous;
    int retry_status;
} s3_call;

typedef struct sign_ctx {
    s3 *s;
    char payload_hash[65];
} sign_ctx;

static int s3_sign(void *ctx, const mcdc_http_request *req, mcdc_http_headers *hdrs,
                   mcdc_error *err) {
    sign_ctx *c = ctx;
    return mcdc_aws_creds_sign(c->s->creds, hdrs, req->method, req->url, c->payload_hash,
                               c->s->region, err);
}

/* The URL of key (NULL: the bucket) with query. */
static char *url_of(const s3 *s, const char *key, const char *query) {
    mcdc_buf b = {0};
    int rc = mcdc_buf_append_str(&b, s->base, NULL);
    if (rc == MCDC_OK && (key || !s->path_style)) rc = mcdc_buf_append_byte(&b, '/', NULL);
    if (rc == MCDC_OK && key)
        rc = mcdc_http_append_encoded(&b, s->prefix, strlen(s->prefix), true, NULL);
    if (rc == MCDC_OK && key) rc = mcdc_http_append_encoded(&b, key, strlen(key), true, NULL);
    if (rc == MCDC_OK && query) rc = mcdc_buf_printf(&b, NULL, "?%s", query);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&b, NULL);
    if (rc) {
        mcdc_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

/* Runs c; resp is filled (free it with mcdc_http_response_free). The
 * payload is signed by its SHA-256 (bodies are in memory here). */
static int s3_do(s3 *s, s3_call *c, mcdc_http_response *resp, mcdc_error *err) {
    sign_ctx sc = {.s = s};
    mcdc_sigv4_sha256_hex(c->body, c->body_len, sc.payload_hash);
    char *url = url_of(s, c->key, c->query);
    char *what = mcdc_asprintf("%s %s%s%s", mcdc_http_method_name(c->method), s->root,
                               c->key ? "/" : "", c->key ? c->key : "");
    int rc = MCDC_OK;
    if (url == NULL || what == NULL) {
        memset(resp, 0, sizeof *resp);
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (S3 request)");
    } else {
        mcdc_http_request req = {.method = c->method, .url = url, .headers = &c->hdrs,
                                 .body = c->body, .body_len = c->body_len,
                                 .body_out = c->body_out, .dst = c->dst, .dst_cap = c->dst_cap,
                                 .sign = s3_sign, .sign_ctx = &sc,
                                 .retry_ambiguous = c->retry_ambiguous,
                                 .retry_status = c->retry_status, .what = what};
        rc = mcdc_http_do(s->http, &req, resp, err);
    }
    mcdc_http_headers_free(&c->hdrs);
    mcdc_free(url);
    mcdc_free(what);
    return rc;
}

/* ---- errors ----------------------------------------------------------------------------------- */

typedef struct s3_err {
    char code[64], message[256], region[MCDC_HTTP_HEADER_VALUE_MAX];
} s3_err;

static void parse_error(s3_err *e, const mcdc_buf *body) {
    const char *d = body->data ? (const char *)body->data : "";
    mcdc_xml_text_fixed(e->code, sizeof e->code, d, body->len, "Code");
    mcdc_xml_text_fixed(e->message, sizeof e->message, d, body->len, "Message");
    mcdc_xml_text_fixed(e->region, sizeof e->region, d, body->len, "Region");
}

static bool is(const char *code, const char *name) { return strcmp(code, name) == 0; }

/* Maps S3's refusal of an operation on key (NULL: the bucket) to a status
 * and a message saying what to do. perm is the IAM action it needs. */
static int s3_fail(s3 *s, const char *perm, const char *key, long status, const s3_err *e,
                   const char *request_id, mcdc_error *err) {
    char name[1024], rid[192] = "";
    snprintf(name, sizeof name, "%s%s%s", s->root, key ? "/" : "", key ? key : "");
    if (request_id && request_id[0])
        snprintf(rid, sizeof rid, " (S3 request id %s)", request_id);
    char kid[128];
    mcdc_aws_creds_key_id(s->creds, kid, sizeof kid);
    const char *src = mcdc_aws_creds_source(s->creds);
    const char *code = e->code;
    if (is(code, "NoSuchBucket") || (status == 404 && key == NULL && !code[0]))
        return mcdc_error_set(err, MCDC_E_NOTFOUND,
                              "the bucket \"%s\" does not exist at %s: create it, or fix the "
                              "location %s (or AWS_ENDPOINT_URL)%s",
                              s->bucket, s->endpoint, s->root, rid);
    if (status == 404 && (is(code, "NoSuchKey") || !code[0]))
        return mcdc_error_set(err, MCDC_E_NOTFOUND, "%s does not exist", name);
    if (status == 301 || is(code, "PermanentRedirect") ||
        is(code, "AuthorizationHeaderMalformed") || is(code, "IllegalLocationConstraintException")) {
        if (e->region[0])
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "the bucket \"%s\" is in region %s, not %s: set AWS_REGION=%s "
                                  "(%s)%s",
                                  s->bucket, e->region, s->region, e->region, name, rid);
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "the bucket \"%s\" is not in region %s (S3 answered %ld %s without "
                              "naming it): set AWS_REGION to the bucket's region (%s)%s",
                              s->bucket, s->region, status, code, name, rid);
    }
    if (is(code, "SignatureDoesNotMatch"))
        return mcdc_error_set(err, MCDC_E_PERMISSION,
                              "S3 refused the signature of access key id %s (from %s) on %s: its "
                              "secret access key is wrong (check AWS_SECRET_ACCESS_KEY), or "
                              "something between us and the store changed the request%s",
                              kid, src, name, rid);
    if (is(code, "InvalidAccessKeyId"))
        return mcdc_error_set(err, MCDC_E_PERMISSION,
                              "the access key id %s (from %s) is not known at %s: check "
                              "AWS_ACCESS_KEY_ID, the profile and AWS_ENDPOINT_URL (%s)%s",
                              kid, src, s->endpoint, name, rid);
    if (is(code, "RequestTimeTooSkewed"))
        return mcdc_error_set(err, MCDC_E_PERMISSION,
                              "clock skew: S3 refused %s because this machine's clock is more "
                              "than 15 minutes off the store's; set the clock right (NTP)%s",
                              name, rid);
    if (is(code, "ExpiredToken") || is(code, "TokenRefreshRequired") ||
        is(code, "InvalidToken"))
        return mcdc_error_set(err, MCDC_E_PERMISSION,
                              "the session token of access key id %s (from %s) is %s: give fresh "
                              "temporary credentials (AWS_SESSION_TOKEN)%s",
                              kid, src, is(code, "InvalidToken") ? "not valid" : "expired", rid);
    if (status == 403)
        return mcdc_error_set(err, MCDC_E_PERMISSION,
                              "access denied (%s) to %s for access key id %s (from %s): its "
                              "policy must allow %s on the bucket \"%s\"%s%s",
                              code[0] ? code : "HTTP 403", name, kid, src, perm, s->bucket,
                              e->message[0] ? "; S3 says: " : "", e->message);
    if (status >= 500 || status == 429 || is(code, "SlowDown"))
        return mcdc_error_set(err, MCDC_E_TRANSIENT,
                              "S3 failed %s with HTTP %ld %s: try again later%s", name, status,
                              code, rid);
    return mcdc_error_set(err, MCDC_E_IO, "S3 refused %s (needs %s): HTTP %ld %s%s%s%s", name,
                          perm, status, code, e->message[0] ? ": " : "", e->message, rid);
}

static int fail_resp(s3 *s, const char *perm, const char *key, const mcdc_http_response *r,
                     mcdc_error *err) {
    s3_err e = {{0}, {0}, {0}};
    parse_error(&e, &r->error_body);
    if (!e.region[0] && r->region[0]) snprintf(e.region, sizeof e.region, "%s", r->region);
    return s3_fail(s, perm, key, r->status, &e, r->request_id, err);
}

/* ---- reads -------------------------------------------------------------------------------------- */

static int s3_get(void *self, const char *key, size_t max_bytes, mcdc_buf *out, mcdc_error *err) {
    s3 *s = self;
    size_t start = out->len, saved = out->limit;
    size_t limit = saved ? saved : MCDC_BATCH_BYTES_MAX;
    bool ours = limit - start > max_bytes; /* max_bytes is the tighter bound */
    if (ours) out->limit = start + max_bytes;
    s3_call c = {.method = MCDC_HTTP_GET, .key = key, .body_out = out, .retry_ambiguous = true};
    mcdc_http_response r;
    int rc = s3_do(s, &c, &r, err);
    out->limit = saved;
    if (rc == MCDC_E_LIMIT && ours)
        rc = mcdc_error_set(err, MCDC_E_LIMIT, "%s/%s is larger than the %zu bytes allowed",
                            s->root, key, max_bytes);
    else if (rc == MCDC_E_LIMIT)
        mcdc_error_wrap(err, "reading %s/%s", s->root, key);
    if (rc == MCDC_OK && r.status != 200) rc = fail_resp(s, "s3:GetObject", key, &r, err);
    if (rc) out->len = start;
    mcdc_http_response_free(&r);
    return rc;
}

/* The object's size by HEAD. */
static int s3_head(s3 *s, const char *key, mcdc_http_response *r, mcdc_error *err) {
    s3_call c = {.method = MCDC_HTTP_HEAD, .key = key, .retry_ambiguous = true};
    int rc = s3_do(s, &c, r, err);
    if (rc == MCDC_OK && r->status != 200) rc = fail_resp(s, "s3:GetObject", key, r, err);
    if (rc == MCDC_OK && r->content_length < 0)
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "S3 gave no size for %s/%s", s->root, key);
    return rc;
}

static int s3_get_range(void *self, const char *key, int64_t offset, size_t len, void *dst,
                        size_t *got, int64_t *size, mcdc_error *err) {
    s3 *s = self;
    char one;
    size_t cap = len ? len : 1; /* len 0: one byte asked for, none kept */
    s3_call c = {.method = MCDC_HTTP_GET, .key = key, .dst = len ? dst : &one, .dst_cap = cap,
                 .retry_ambiguous = true};
    char range[64];
    snprintf(range, sizeof range, "bytes=%lld-%lld", (long long)offset,
             (long long)(offset + (int64_t)cap - 1));
    mcdc_http_response r;
    int rc = mcdc_http_headers_set(&c.hdrs, "Range", range, err);
    if (rc == MCDC_OK) rc = s3_do(s, &c, &r, err);
    else memset(&r, 0, sizeof r);
    if (rc == MCDC_OK && (r.status == 206 || (r.status == 200 && offset == 0))) {
        *size = r.status == 206 ? r.range_total : r.body_bytes;
        *got = len ? (size_t)r.body_bytes : 0;
        if (*size < offset + (int64_t)*got)
            rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "S3 answered a read of %s/%s with a bad "
                                "Content-Range", s->root, key);
    } else if (rc == MCDC_OK && r.status == 416) { /* at or past the end: how far is it? */
        mcdc_http_response h;
        rc = s3_head(s, key, &h, err);
        if (rc == MCDC_OK && offset > h.content_length)
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "cannot read %s/%s at %lld: the object has %lld bytes", s->root,
                                key, (long long)offset, (long long)h.content_length);
        if (rc == MCDC_OK) {
            *size = h.content_length;
            *got = 0;
        }
        mcdc_http_response_free(&h);
    } else if (rc == MCDC_OK) {
        rc = fail_resp(s, "s3:GetObject", key, &r, err);
    }
    mcdc_http_response_free(&r);
    return rc;
}

/* ---- listing ------------------------------------------------------------------------------------- */

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const mcdc_storage_entry *)a)->name, ((const mcdc_storage_entry *)b)->name);
}

/* Takes the <Contents> of one page; *token gets NextContinuationToken
 * (empty when the listing is complete). */
static int take_page(s3 *s, const mcdc_buf *page, size_t dir_len, const char *full,
                     mcdc_storage_listing *out, size_t *cap, mcdc_buf *token, mcdc_error *err) {
    const char *d = page->data ? (const char *)page->data : "", *end = d + page->len, *pos = d;
    const char *c;
    size_t n;
    int rc = MCDC_OK;
    mcdc_buf key = {0};
    size_t full_len = strlen(full);
    while (rc == MCDC_OK && mcdc_xml_next(&pos, end, "Contents", &c, &n)) {
        char size_s[32], mod[64];
        mcdc_buf_reset(&key);
        rc = mcdc_xml_text(&key, c, n, "Key", err);
        bool have = mcdc_xml_text_fixed(size_s, sizeof size_s, c, n, "Size") &&
                    mcdc_xml_text_fixed(mod, sizeof mod, c, n, "LastModified");
        int64_t size = -1, us = 0;
        if (rc == MCDC_OK &&
            (!have || mcdc_parse_i64(size_s, &size) != MCDC_OK || size < 0 ||
             mcdc_parse_ts_us(mod, strlen(mod), &us, NULL) != MCDC_OK ||
             key.len < full_len || memcmp(key.data, full, full_len) != 0))
            rc = mcdc_error_set(err, MCDC_E_PROTOCOL,
                                "S3 listed %s/%s with an entry that is not well formed", s->root,
                                full + strlen(s->prefix));
        if (rc) break;
        const char *name = (const char *)key.data + dir_len;
        if (name[0] == 0 || strchr(name, '/')) continue; /* a "folder" marker */
        rc = mcdc_storage_listing_add(out, cap, name, size, us / 1000, err);
    }
    mcdc_buf_free(&key);
    char trunc[8];
    mcdc_buf_reset(token);
    if (rc == MCDC_OK && mcdc_xml_text_fixed(trunc, sizeof trunc, d, page->len, "IsTruncated") &&
        strcmp(trunc, "true") == 0) {
        rc = mcdc_xml_text(token, d, page->len, "NextContinuationToken", err);
        if (rc == MCDC_OK && token->len == 0) rc = MCDC_E_NOTFOUND;
        if (rc == MCDC_E_NOTFOUND)
            rc = mcdc_error_set(err, MCDC_E_PROTOCOL,
                                "S3 cut a listing of %s short without saying where to go on",
                                s->root);
    }
    return rc;
}

static int s3_list(void *self, const char *prefix, const char *after, mcdc_storage_listing *out,
                   mcdc_error *err) {
    s3 *s = self;
    char *full = mcdc_asprintf("%s%s", s->prefix, prefix);
    if (full == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    const char *slash = strrchr(full, '/');
    size_t dir_len = slash ? (size_t)(slash - full) + 1 : 0, cap = 0;
    /* start-after: the full key of `after` in the listed directory; S3 starts
     * the listing past it (the first page; the token carries on from there) */
    char *start = after ? mcdc_asprintf("%.*s%s", (int)dir_len, full, after) : NULL;
    if (after && start == NULL) {
        mcdc_free(full);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    mcdc_buf q = {0}, page = {0}, token = {0};
    page.limit = MCDC_S3_LIST_PAGE_BYTES_MAX;
    int rc = MCDC_OK;
    do {
        mcdc_buf_reset(&q);
        mcdc_buf_reset(&page);
        if (token.len) {
            rc = mcdc_buf_append_str(&q, "continuation-token=", err);
            if (rc == MCDC_OK) rc = mcdc_http_append_encoded(&q, (const char *)token.data,
                                                              token.len, false, err);
            if (rc == MCDC_OK) rc = mcdc_buf_append_byte(&q, '&', err);
        }
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(&q, "delimiter=%2F&list-type=2&prefix=", err);
        if (rc == MCDC_OK) rc = mcdc_http_append_encoded(&q, full, strlen(full), false, err);
        if (rc == MCDC_OK && start && token.len == 0) { /* sorted: after prefix */
            rc = mcdc_buf_append_str(&q, "&start-after=", err);
            if (rc == MCDC_OK)
                rc = mcdc_http_append_encoded(&q, start, strlen(start), false, err);
        }
        if (rc == MCDC_OK) rc = mcdc_buf_cstr(&q, err);
        if (rc) break;
        s3_call c = {.method = MCDC_HTTP_GET, .query = (const char *)q.data, .body_out = &page,
                     .retry_ambiguous = true};
        mcdc_http_response r;
        rc = s3_do(s, &c, &r, err);
        if (rc == MCDC_OK && r.status != 200) rc = fail_resp(s, "s3:ListBucket", NULL, &r, err);
        mcdc_http_response_free(&r);
        if (rc == MCDC_OK) rc = take_page(s, &page, dir_len, full, out, &cap, &token, err);
    } while (rc == MCDC_OK && token.len);
    if (rc == MCDC_OK && out->count > 1)
        qsort(out->entries, out->count, sizeof *out->entries, cmp_entry);
    if (rc == MCDC_OK) mcdc_storage_listing_drop_upto(out, after); /* a store without it */
    if (rc) mcdc_storage_listing_free(out);
    mcdc_buf_free(&q);
    mcdc_buf_free(&page);
    mcdc_buf_free(&token);
    mcdc_free(start);
    mcdc_free(full);
    return rc;
}

/* ---- deletes ------------------------------------------------------------------------------------- */

static int s3_del(void *self, const char *key, mcdc_error *err) {
    s3 *s = self;
    size_t got;
    int64_t size;
    int rc = s3_get_range(s, key, 0, 0, NULL, &got, &size, err); /* NOTFOUND when missing */
    if (rc) return rc;
    s3_call c = {.method = MCDC_HTTP_DELETE, .key = key, .retry_ambiguous = true};
    mcdc_http_response r;
    rc = s3_do(s, &c, &r, err);
    if (rc == MCDC_OK && r.status != 204 && r.status != 200)
        rc = fail_resp(s, "s3:DeleteObject", key, &r, err);
    mcdc_http_response_free(&r);
    return rc;
}

/* ---- writers -------------------------------------------------------------------------------------- */

typedef struct s3_writer {
    s3 *s;
    char *key;      /* owned, below the root */
    mcdc_buf part;  /* the part being filled */
    mcdc_part_sender sender; /* full parts, sent while the next fills */
    char *upload_id; /* owned: the multipart upload, once started */
    char *upload_q;  /* owned: "uploadId=<encoded>" */
    mcdc_buf parts_xml; /* the <Part> elements of CompleteMultipartUpload */
    mcdc_buf md5s;  /* the parts' MD5s (from their ETags), for the object's ETag */
    bool md5_ok;    /* every part's ETag was an MD5 */
    int n_parts;
    int64_t total;
    bool completed; /* the upload was completed: nothing to abort */
} s3_writer;

static int hex_byte(const char *p) {
    int v = 0;
    for (int i = 0; i < 2; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static int start_upload(s3_writer *w, mcdc_error *err) {
    s3 *s = w->s;
    mcdc_buf body = {0};
    body.limit = MCDC_HTTP_ERROR_BODY_MAX;
    /* a retried start may leave an upload behind: the lifecycle rule's */
    s3_call c = {.method = MCDC_HTTP_POST, .key = w->key, .query = "uploads=",
                 .body_out = &body, .retry_ambiguous = true};
    mcdc_http_response r;
    int rc = s3_do(s, &c, &r, err);
    if (rc == MCDC_OK && r.status != 200) rc = fail_resp(s, "s3:PutObject", w->key, &r, err);
    mcdc_buf id = {0}, q = {0};
    if (rc == MCDC_OK &&
        (mcdc_xml_text(&id, (const char *)body.data, body.len, "UploadId", NULL) != MCDC_OK ||
         id.len == 0))
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "S3 started an upload of %s/%s without an id",
                            s->root, w->key);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&q, "uploadId=", err);
    if (rc == MCDC_OK) rc = mcdc_http_append_encoded(&q, (const char *)id.data, id.len, false, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&q, err);
    if (rc == MCDC_OK) {
        w->upload_id = (char *)id.data;
        w->upload_q = (char *)q.data;
    } else {
        mcdc_buf_free(&id);
        mcdc_buf_free(&q);
    }
    mcdc_http_response_free(&r);
    mcdc_buf_free(&body);
    return rc;
}

/* Sends part as part index + 1 of the started upload, on a sender thread:
 * its ETag into note. */
static int send_part(void *ctx, int64_t index, const mcdc_buf *part,
                     char note[MCDC_HTTP_HEADER_VALUE_MAX], mcdc_error *err) {
    s3_writer *w = ctx;
    s3 *s = w->s;
    char *q = mcdc_asprintf("partNumber=%lld&%s", (long long)index + 1, w->upload_q);
    if (q == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    s3_call c = {.method = MCDC_HTTP_PUT, .key = w->key, .query = q, .body = part->data,
                 .body_len = part->len, .retry_ambiguous = true};
    mcdc_http_response r;
    int rc = s3_do(s, &c, &r, err);
    if (rc == MCDC_OK && r.status != 200) rc = fail_resp(s, "s3:PutObject", w->key, &r, err);
    if (rc == MCDC_OK && r.etag[0] == 0)
        rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "S3 took part %lld of %s/%s without an ETag",
                            (long long)index + 1, s->root, w->key);
    if (rc == MCDC_OK) snprintf(note, MCDC_HTTP_HEADER_VALUE_MAX, "%s", r.etag);
    mcdc_http_response_free(&r);
    mcdc_free(q);
    return rc;
}

/* A part sent (on the caller's thread, in order): its ETag joins the
 * completion's list and the parts' MD5s. */
static int part_sent(void *ctx, int64_t index, const char *etag, mcdc_error *err) {
    s3_writer *w = ctx;
    MCDC_ASSERT(index == w->n_parts);
    const char *e = etag[0] == '"' ? etag + 1 : etag;
    size_t en = strcspn(e, "\"");
    uint8_t md5[16];
    bool hex = en == 32;
    for (int i = 0; hex && i < 16; i++) {
        int v = hex_byte(e + 2 * i);
        hex = v >= 0;
        md5[i] = (uint8_t)(v & 0xFF);
    }
    if (!hex) w->md5_ok = false;
    int rc = mcdc_buf_append(&w->md5s, md5, sizeof md5, err);
    if (rc == MCDC_OK) rc = mcdc_buf_printf(&w->parts_xml, err, "<Part><ETag>");
    if (rc == MCDC_OK) rc = mcdc_xml_escape(&w->parts_xml, etag, strlen(etag), err);
    if (rc == MCDC_OK)
        rc = mcdc_buf_printf(&w->parts_xml, err, "</ETag><PartNumber>%d</PartNumber></Part>",
                             w->n_parts + 1);
    if (rc == MCDC_OK) w->n_parts++;
    return rc;
}

/* Hands the full part to the sender (the upload started first). */
static int hand_part(s3_writer *w, mcdc_error *err) {
    s3 *s = w->s;
    if (w->sender.handed == MCDC_S3_PARTS_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "%s/%s: an S3 object has at most %d parts of %zu bytes; set "
                              "MCDC_S3_PART_BYTES higher",
                              s->root, w->key, MCDC_S3_PARTS_MAX, s->part_bytes);
    int rc = w->upload_id ? MCDC_OK : start_upload(w, err);
    return rc ? rc : mcdc_part_sender_send(&w->sender, &w->part, err);
}

static int s3_writer_write(void *wself, const void *data, size_t n, mcdc_error *err) {
    s3_writer *w = wself;
    const uint8_t *p = data;
    while (n > 0) {
        /* a full part goes once more data comes: an object of exactly one
         * part stays a single PutObject */
        if (w->part.len == w->s->part_bytes) {
            int rc = hand_part(w, err);
            if (rc) return rc;
        }
        size_t room = w->s->part_bytes - w->part.len, k = n < room ? n : room;
        int rc = mcdc_buf_append(&w->part, p, k, err);
        if (rc) return rc;
        p += k;
        n -= k;
        w->total += (int64_t)k;
    }
    return MCDC_OK;
}

/* Whether key now holds exactly the bytes of the buffered (single) part. */
static bool holds_our_bytes(s3_writer *w) {
    mcdc_buf got = {0};
    got.limit = w->part.len + 1;
    s3_call c = {.method = MCDC_HTTP_GET, .key = w->key, .body_out = &got,
                 .retry_ambiguous = true};
    mcdc_http_response r;
    bool same = s3_do(w->s, &c, &r, NULL) == MCDC_OK && r.status == 200 &&
                got.len == w->part.len && (got.len == 0 || memcmp(got.data, w->part.data,
                                                                  got.len) == 0);
    mcdc_http_response_free(&r);
    mcdc_buf_free(&got);
    return same;
}

/* Whether key now holds the object our upload makes: its size and (when
 * the parts' ETags were MD5s) its multipart ETag, MD5(part MD5s)-N. */
static bool holds_our_upload(s3_writer *w) {
    mcdc_http_response r;
    bool same = s3_head(w->s, w->key, &r, NULL) == MCDC_OK && r.content_length == w->total;
    if (same && w->md5_ok) {
        uint8_t d[16];
        char want[48];
        same = gnutls_hash_fast(GNUTLS_DIG_MD5, w->md5s.data, w->md5s.len, d) == 0;
        int k = snprintf(want, sizeof want, "\"");
        for (int i = 0; i < 16; i++) k += snprintf(want + k, sizeof want - (size_t)k, "%02x", d[i]);
        snprintf(want + k, sizeof want - (size_t)k, "-%d\"", w->n_parts);
        same = same && strcmp(r.etag, want) == 0;
    }
    mcdc_http_response_free(&r);
    return same;
}

static int conflict(s3_writer *w, mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_CONFLICT,
                          "%s/%s already exists (another writer created it first); nothing was "
                          "written",
                          w->s->root, w->key);
}

/* The answer to a commit: r after rc; same() reads the key back when an
 * earlier attempt may have published it. A put-if-absent answered 412 (or
 * NoSuchUpload) is always read back, not only when the HTTP layer saw an
 * ambiguous attempt: libcurl sends a request again by itself when a reused
 * connection dies before the answer, so the first, silent attempt may be
 * what now exists (resp->attempts 1, resp->ambiguous false). */
static int judge_commit(s3_writer *w, bool if_absent, int rc, const mcdc_http_response *r,
                        bool (*same)(s3_writer *), mcdc_error *err) {
    if (rc == MCDC_OK && r->status == 200) return MCDC_OK;
    bool lost = rc == MCDC_OK && (r->status == 412 || (r->status == 404 && w->upload_id &&
                                                       strstr((const char *)(r->error_body.data
                                                                  ? r->error_body.data
                                                                  : (const uint8_t *)""),
                                                              "NoSuchUpload")));
    if ((lost && (if_absent || r->ambiguous)) || (rc == MCDC_E_TRANSIENT && r->ambiguous)) {
        if (same(w)) {
            mcdc_log(MCDC_LOG_INFO, "%s/%s: an earlier attempt of the commit published it",
                     w->s->root, w->key);
            mcdc_error_clear(err);
            return MCDC_OK;
        }
        if (rc == MCDC_E_TRANSIENT) return rc;
    }
    if (rc) return rc;
    if (r->status == 412 && if_absent) return conflict(w, err);
    return fail_resp(w->s, "s3:PutObject", w->key, r, err);
}

static int put_single(s3_writer *w, bool if_absent, mcdc_error *err) {
    s3_call c = {.method = MCDC_HTTP_PUT, .key = w->key, .body = w->part.data,
                 .body_len = w->part.len, .retry_ambiguous = true, .retry_status = 409};
    int rc = if_absent ? mcdc_http_headers_set(&c.hdrs, "If-None-Match", "*", err) : MCDC_OK;
    if (rc) return rc;
    mcdc_http_response r;
    rc = s3_do(w->s, &c, &r, err);
    rc = judge_commit(w, if_absent, rc, &r, holds_our_bytes, err);
    mcdc_http_response_free(&r);
    return rc;
}

static int complete_upload(s3_writer *w, bool if_absent, mcdc_error *err) {
    mcdc_buf body = {0};
    int rc = mcdc_buf_printf(&body, err, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws."
                                         "com/doc/2006-03-01/\">%.*s</CompleteMultipartUpload>",
                             (int)w->parts_xml.len,
                             w->parts_xml.data ? (const char *)w->parts_xml.data : "");
    /* S3 may answer 200 with an error in the body: InternalError and its
     * kind are retried here, a few times. */
    for (int round = 0; rc == MCDC_OK && round < 3; round++) {
        mcdc_buf answer = {0};
        answer.limit = MCDC_HTTP_ERROR_BODY_MAX;
        s3_call c = {.method = MCDC_HTTP_POST, .key = w->key, .query = w->upload_q,
                     .body = body.data, .body_len = body.len, .body_out = &answer,
                     .retry_ambiguous = true, .retry_status = 409};
        rc = mcdc_http_headers_set(&c.hdrs, "Content-Type", "application/xml", err);
        if (rc == MCDC_OK && if_absent)
            rc = mcdc_http_headers_set(&c.hdrs, "If-None-Match", "*", err);
        mcdc_http_response r;
        if (rc == MCDC_OK) {
            rc = s3_do(w->s, &c, &r, err);
        } else {
            memset(&r, 0, sizeof r);
            mcdc_http_headers_free(&c.hdrs);
        }
        s3_err e = {{0}, {0}, {0}};
        bool error_in_ok = rc == MCDC_OK && r.status == 200 &&
                           mcdc_xml_text_fixed(e.code, sizeof e.code, (const char *)answer.data,
                                               answer.len, "Code");
        if (error_in_ok && (is(e.code, "InternalError") || is(e.code, "SlowDown") ||
                            is(e.code, "ServiceUnavailable")) && round < 2) {
            mcdc_http_response_free(&r);
            mcdc_buf_free(&answer);
            mcdc_sleep_ms(200 * (round + 1));
            continue;
        }
        if (error_in_ok) {
            parse_error(&e, &answer);
            rc = s3_fail(w->s, "s3:PutObject", w->key, 500, &e, r.request_id, err);
        } else {
            rc = judge_commit(w, if_absent, rc, &r, holds_our_upload, err);
        }
        if (rc == MCDC_OK) w->completed = true;
        mcdc_http_response_free(&r);
        mcdc_buf_free(&answer);
        break;
    }
    mcdc_buf_free(&body);
    return rc;
}

static int s3_writer_commit(void *wself, mcdc_storage_commit_mode mode, mcdc_error *err) {
    s3_writer *w = wself;
    bool if_absent = mode == MCDC_STORAGE_PUT_IF_ABSENT;
    if (w->upload_id == NULL) return put_single(w, if_absent, err);
    int rc = w->part.len ? hand_part(w, err) : MCDC_OK;
    if (rc == MCDC_OK) rc = mcdc_part_sender_wait(&w->sender, err);
    return rc ? rc : complete_upload(w, if_absent, err);
}

static void s3_writer_discard(void *wself) {
    s3_writer *w = wself;
    if (w == NULL) return;
    mcdc_part_sender_free(&w->sender); /* the part in flight ends first */
    if (w->upload_id && !w->completed) {
        s3_call c = {.method = MCDC_HTTP_DELETE, .key = w->key, .query = w->upload_q,
                     .retry_ambiguous = true};
        mcdc_http_response r;
        mcdc_error e = MCDC_ERROR_INIT;
        int rc = s3_do(w->s, &c, &r, &e);
        if (rc == MCDC_OK && r.status != 204 && r.status != 200 && r.status != 404)
            rc = fail_resp(w->s, "s3:AbortMultipartUpload", w->key, &r, &e);
        if (rc)
            mcdc_log(MCDC_LOG_WARN,
                     "the unfinished upload of %s/%s could not be aborted (%s); nothing of it is "
                     "visible, and the bucket's lifecycle rule for incomplete multipart uploads "
                     "removes its parts",
                     w->s->root, w->key, e.message);
        mcdc_http_response_free(&r);
    }
    mcdc_buf_free(&w->part);
    mcdc_buf_free(&w->parts_xml);
    mcdc_buf_free(&w->md5s);
    mcdc_free(w->upload_id);
    mcdc_free(w->upload_q);
    mcdc_free(w->key);
    mcdc_free(w);
}

static const mcdc_storage_writer_ops s3_writer_ops = {
    s3_writer_write, s3_writer_commit, s3_writer_discard,
};

static int s3_open_writer(void *self, const char *key, mcdc_storage_writer *w, mcdc_error *err) {
    s3 *s = self;
    s3_writer *sw = mcdc_calloc(1, sizeof *sw);
    if (sw == NULL || (sw->key = mcdc_strdup(key)) == NULL) {
        mcdc_free(sw);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    sw->s = s;
    sw->md5_ok = true;
    sw->part.limit = s->part_bytes;
    mcdc_part_sender_init(&sw->sender, send_part, part_sent, sw, s->part_bytes);
    w->ops = &s3_writer_ops;
    w->self = sw;
    return MCDC_OK;
}

/* ---- opening -------------------------------------------------------------------------------------- */

static void s3_destroy(void *self) {
    s3 *s = self;
    if (s == NULL) return;
    mcdc_http_free(s->http);
    mcdc_aws_creds_free(s->creds);
    mcdc_free(s->bucket);
    mcdc_free(s->prefix);
    mcdc_free(s->base);
    mcdc_free(s->region);
    mcdc_free(s->endpoint);
    mcdc_free(s);
}

static const mcdc_storage_ops s3_ops = {
    s3_open_writer, s3_get, s3_get_range, s3_list, s3_del, s3_destroy, NULL, NULL, true,
};

/* S3's bucket names: 3 to 63 of a-z 0-9 . -, starting and ending with a
 * letter or digit. */
static bool bucket_ok(const char *b, size_t n) {
    if (n < 3 || n > 63) return false;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && ((c != '.' && c != '-') || i == 0 || i == n - 1)) return false;
    }
    return true;
}

static bool region_ok(const char *r) {
    if (r[0] == 0 || strlen(r) > 40) return false;
    for (; *r; r++)
        if (!((*r >= 'a' && *r <= 'z') || (*r >= '0' && *r <= '9') || *r == '-')) return false;
    return true;
}

/* Region, endpoint and addressing from the options. */
static int configure(s3 *s, const mcdc_storage_env *env, const char *profile_region,
                     const char *location, mcdc_error *err) {
    const char *region = mcdc_storage_option(env, "AWS_REGION");
    if (region == NULL) region = mcdc_storage_option(env, "AWS_DEFAULT_REGION");
    if (region == NULL) region = profile_region;
    if (region == NULL) region = "us-east-1";
    if (!region_ok(region))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "AWS_REGION \"%s\" is not a region name (such as eu-west-1)",
                              region);
    const char *endpoint = mcdc_storage_option(env, "AWS_ENDPOINT_URL_S3");
    if (endpoint == NULL) endpoint = mcdc_storage_option(env, "AWS_ENDPOINT_URL");
    bool allow_http = false, virtual_hosted = endpoint == NULL;
    int rc = mcdc_storage_option_bool(env, "AWS_ALLOW_HTTP", &allow_http, err);
    if (rc == MCDC_OK)
        rc = mcdc_storage_option_bool(env, "AWS_VIRTUAL_HOSTED_STYLE_REQUEST", &virtual_hosted,
                                      err);
    const char *style = mcdc_storage_option(env, "AWS_S3_ADDRESSING_STYLE");
    if (rc == MCDC_OK && style) {
        if (mcdc_str_ieq(style, "path")) virtual_hosted = false;
        else if (mcdc_str_ieq(style, "virtual")) virtual_hosted = true;
        else if (!mcdc_str_ieq(style, "auto"))
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "AWS_S3_ADDRESSING_STYLE is \"%s\"; give path, virtual or auto",
                                style);
    }
    if (rc) return rc;
    char *scheme_host;
    if (endpoint) {
        bool https = strncasecmp(endpoint, "https://", 8) == 0;
        bool http = strncasecmp(endpoint, "http://", 7) == 0;
        if (!https && !http)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "AWS_ENDPOINT_URL \"%s\" is not an http(s):// URL", endpoint);
        if (http && !allow_http)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "AWS_ENDPOINT_URL \"%s\" is plain http, which sends data "
                                  "unencrypted: use https, or set AWS_ALLOW_HTTP=true (a local "
                                  "test server)",
                                  endpoint);
        size_t n = strlen(endpoint);
        while (n > 0 && endpoint[n - 1] == '/') n--;
        scheme_host = mcdc_strndup(endpoint, n);
    } else {
        scheme_host = mcdc_asprintf("https://s3.%s.amazonaws.com", region);
    }
    if (scheme_host == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    /* a dotted bucket on https cannot be a host name under the TLS
     * certificate's wildcard: path style */
    if (strchr(s->bucket, '.') && strncasecmp(scheme_host, "https://", 8) == 0)
        virtual_hosted = false;
    s->path_style = !virtual_hosted;
    if (s->path_style) {
        s->base = mcdc_asprintf("%s/%s", scheme_host, s->bucket);
    } else {
        const char *host = strstr(scheme_host, "://") + 3;
        s->base = mcdc_asprintf("%.*s%s.%s", (int)(host - scheme_host), scheme_host, s->bucket,
                                host);
    }
    s->endpoint = scheme_host;
    s->region = mcdc_strdup(region);
    if (s->base == NULL || s->region == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    s->part_bytes = MCDC_S3_PART_BYTES_DEFAULT;
    const char *pb = mcdc_storage_option(env, "MCDC_S3_PART_BYTES");
    int64_t v;
    if (pb && (mcdc_parse_i64(pb, &v) != MCDC_OK || v < (int64_t)MCDC_S3_PART_BYTES_MIN ||
               v > (int64_t)MCDC_S3_PART_BYTES_MAX))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "MCDC_S3_PART_BYTES \"%s\" must be a number of bytes from %u to %u "
                              "(%s)",
                              pb, MCDC_S3_PART_BYTES_MIN, MCDC_S3_PART_BYTES_MAX, location);
    if (pb) s->part_bytes = (size_t)v;
    return MCDC_OK;
}

/* The connection pool, with the CA bundle and proxy the options name. */
static int open_pool(s3 *s, const mcdc_storage_env *env, mcdc_error *err) {
    mcdc_http_config cfg = {0};
    cfg.ca_file = mcdc_storage_option(env, "AWS_CA_BUNDLE");
    mcdc_http_config_proxy(&cfg, env, s->base);
    int rc = mcdc_http_config_options(&cfg, env, err);
    if (rc) return rc;
    if (cfg.ca_file && access(cfg.ca_file, R_OK) != 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "AWS_CA_BUNDLE %s cannot be read: %s; name a PEM file of the "
                              "certificates to trust",
                              cfg.ca_file, strerror(errno));
    return mcdc_http_create(&s->http, &cfg, err);
}

int mcdc_storage_s3_open(mcdc_storage **out, const mcdc_storage_env *env, const char *location,
                         const char *rest, mcdc_error *err) {
    *out = NULL;
    size_t bn = strcspn(rest, "/");
    if (!bucket_ok(rest, bn))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "location \"%s\": \"%.*s\" is not an S3 bucket name (3 to 63 "
                              "lower-case letters, digits, '.' and '-'); write s3://bucket/path",
                              location, (int)bn, rest);
    const char *p = rest[bn] ? rest + bn + 1 : "";
    size_t pn = strlen(p);
    while (pn > 0 && p[pn - 1] == '/') pn--;
    s3 *s = mcdc_calloc(1, sizeof *s);
    mcdc_storage *st = mcdc_calloc(1, sizeof *st);
    char *pfx = mcdc_strndup(p, pn);
    int rc = s && st && pfx ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK && pn) {
        rc = mcdc_storage_check_key(pfx, err);
        if (rc) mcdc_error_wrap(err, "location \"%s\"", location);
    }
    if (rc == MCDC_OK) {
        s->bucket = mcdc_strndup(rest, bn);
        s->prefix = mcdc_asprintf("%s%s", pfx, pn ? "/" : "");
        st->root = mcdc_asprintf("%.*s%s%s%s", (int)(rest - location), location, s->bucket,
                                 pn ? "/" : "", pfx);
        if (s->bucket == NULL || s->prefix == NULL || st->root == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    char *profile_region = NULL;
    if (rc == MCDC_OK) {
        s->root = st->root;
        rc = mcdc_aws_creds_shared(&s->creds, &profile_region, env, err);
        if (rc) mcdc_error_wrap(err, "opening %s", st->root);
    }
    if (rc == MCDC_OK) rc = configure(s, env, profile_region, location, err);
    if (rc == MCDC_OK) rc = open_pool(s, env, err);
    mcdc_free(profile_region);
    mcdc_free(pfx);
    if (rc) {
        s3_destroy(s);
        if (st) mcdc_free(st->root);
        mcdc_free(st);
        return rc;
    }
    st->ops = &s3_ops;
    st->self = s;
    *out = st;
    return MCDC_OK;
}
