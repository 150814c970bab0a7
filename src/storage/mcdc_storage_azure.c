/*
 * mcdc_storage_azure.c - the storage seam on Azure Blob Storage (flat and
 * hierarchical-namespace accounts alike, through the Blob endpoint), on the
 * HTTP layer of mcdc_http.h.
 *
 * Writes. A writer keeps at most one block in memory. An object that fits
 * in one block is published by one Put Blob; a larger one is staged block
 * by block as it is written (Put Block, ids of a fixed width: the writer's
 * UUID and a counter, so two writers of one key never stage over each
 * other's blocks) and published by Put Block List. Put-if-absent puts
 * If-None-Match: * on the request that publishes (Put Blob, or the list:
 * a list without it silently replaces); the service answers 409
 * BlobAlreadyExists or 412 when the key exists: MCDC_E_CONFLICT, nothing
 * published. Until the publishing request succeeds nothing is visible, and
 * staged blocks that are never listed are dropped by the service after a
 * week, so discarding a writer sends nothing. Each object carries the MD5
 * of its bytes (Content-MD5, x-ms-blob-content-md5): when a publishing
 * request may have been carried out before its connection failed (the
 * layer says "ambiguous") and the answer is then "exists", the blob is
 * read back (Get Blob Properties) and is ours when size and MD5 match.
 *
 * Reads: Get Blob (whole, at most max_bytes) and with x-ms-range; the
 * size from Content-Range, or from Get Blob Properties for a zero-length
 * read or a range at the end. Listing: List Blobs with the prefix, the
 * delimiter '/' and the marker, page after page, sorted here bytewise.
 * Deleting: Delete Blob. No holds yet (a lease will be one): lock is NULL.
 *
 * Errors name the location and key, what was being done, the service's
 * code and the first line of its message; 403s say which account and which
 * credential (and, for a SAS token, the permission it lacks), never a key
 * or a signature.
 */
#include "mcdc_storage_azure.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_azure_auth.h"
#include "mcdc_azure_entra.h"
#include "mcdc_http.h"
#include "mcdc_xml.h"

typedef struct az_storage {
    mcdc_az_config c;
    mcdc_http *http;
    mcdc_az_entra *entra; /* owned: the bearer tokens of an Entra ID credential, or NULL */
    char *root; /* owned: the location, for messages */
} az_storage;

/* ---- one request ------------------------------------------------------------------ */

enum { AZ_PARAMS_MAX = 8, AZ_PARAM_NAME_MAX = 32 };

/* A request's resource and what its signature needs; the sign callback's
 * context. */
typedef struct az_call {
    const az_storage *s;
    const char *key; /* NULL: the container */
    mcdc_buf path;   /* the URL's path as sent (encoded) */
    mcdc_az_param params[AZ_PARAMS_MAX];
    size_t nparams;
    mcdc_http_headers headers;
    const char *doing; /* "reading", "writing"...: for messages */
    char perm;         /* the SAS permission it needs: r, w, l, d */
} az_call;

static int call_init(az_call *call, const az_storage *s, const char *key, const char *doing,
                     char perm, mcdc_error *err) {
    memset(call, 0, sizeof *call);
    call->s = s;
    call->key = key;
    call->doing = doing;
    call->perm = perm;
    int rc = mcdc_buf_printf(&call->path, err, "%s/%s", s->c.endpoint_path, s->c.container);
    if (rc == MCDC_OK && key) {
        rc = mcdc_buf_append_byte(&call->path, '/', err);
        if (rc == MCDC_OK)
            rc = mcdc_http_append_encoded(&call->path, s->c.prefix, strlen(s->c.prefix), true, err);
        if (rc == MCDC_OK) rc = mcdc_http_append_encoded(&call->path, key, strlen(key), true, err);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&call->path, err);
    if (rc == MCDC_OK)
        rc = mcdc_http_headers_set(&call->headers, "x-ms-version", MCDC_AZ_API_VERSION, err);
    return rc;
}

static void call_free(az_call *call) {
    mcdc_buf_free(&call->path);
    mcdc_http_headers_free(&call->headers);
}

static void call_param(az_call *call, const char *name, const char *value) {
    MCDC_ASSERT(call->nparams < AZ_PARAMS_MAX);
    call->params[call->nparams++] = (mcdc_az_param){name, value};
}

/* Shared Key: x-ms-date and Authorization on every attempt (the date moves
 * with each). Entra ID: x-ms-date and the bearer token (renewed near its
 * expiry). A SAS token signs nothing: it rides in the URL. */
static int sign_attempt(void *ctx, const mcdc_http_request *req, mcdc_http_headers *hdrs,
                        mcdc_error *err) {
    const az_call *call = ctx;
    const az_storage *s = call->s;
    if (s->c.cred == MCDC_AZ_CRED_SAS) return MCDC_OK;
    char date[32];
    mcdc_http_format_date(mcdc_now_utc_us() / 1000, date);
    int rc = mcdc_http_headers_set(hdrs, "x-ms-date", date, err);
    if (rc) return rc;
    if (s->entra) return mcdc_az_entra_authorize(s->entra, hdrs, err);
    mcdc_az_header h[MCDC_HTTP_HEADERS_MAX + 1];
    size_t n = 0;
    for (size_t i = 0; i < hdrs->count; i++)
        h[n++] = (mcdc_az_header){hdrs->items[i].name, hdrs->items[i].value};
    char len[24];
    if (req->body_len > 0) { /* curl sends it: it is signed */
        snprintf(len, sizeof len, "%zu", req->body_len);
        h[n++] = (mcdc_az_header){"Content-Length", len};
    }
    /* The canonical resource names the query's parameters in lower case
     * (List Blobs' startFrom is signed as startfrom). */
    mcdc_az_param ps[AZ_PARAMS_MAX];
    char lower[AZ_PARAMS_MAX][AZ_PARAM_NAME_MAX];
    for (size_t i = 0; i < call->nparams; i++) {
        const char *nm = call->params[i].name;
        size_t k = 0;
        MCDC_ASSERT(strlen(nm) < AZ_PARAM_NAME_MAX);
        for (; nm[k]; k++) lower[i][k] = (char)(nm[k] >= 'A' && nm[k] <= 'Z' ? nm[k] + 32 : nm[k]);
        lower[i][k] = 0;
        ps[i] = (mcdc_az_param){lower[i], call->params[i].value};
    }
    mcdc_buf sts = {0};
    char sig[MCDC_AZ_SIGNATURE_CHARS];
    rc = mcdc_az_string_to_sign(&sts, mcdc_http_method_name(req->method), s->c.account,
                                (const char *)call->path.data, ps, call->nparams, h, n, err);
    if (rc == MCDC_OK)
        rc = mcdc_az_sign(sig, s->c.key, s->c.key_len, (const char *)sts.data, sts.len, err);
    mcdc_buf_free(&sts);
    if (rc) return rc;
    char *auth = mcdc_asprintf("SharedKey %s:%s", s->c.account, sig);
    rc = auth ? mcdc_http_headers_set(hdrs, "Authorization", auth, err)
              : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (auth) gnutls_memset(auth, 0, strlen(auth));
    mcdc_free(auth);
    gnutls_memset(sig, 0, sizeof sig);
    return rc;
}

/* "<location>/<key>" or the location, for messages. */
static void where(const az_call *call, char *out, size_t cap) {
    if (call->key) snprintf(out, cap, "%s/%s", call->s->root, call->key);
    else snprintf(out, cap, "%s", call->s->root);
}

/* Runs the request (req's url, headers, sign and what are filled here). A
 * failure of the transport keeps the layer's status; its message, which
 * names the request, is scrubbed of any sig= value. */
static int call_run(az_call *call, mcdc_http_request *req, mcdc_http_response *resp,
                    mcdc_error *err) {
    const az_storage *s = call->s;
    memset(resp, 0, sizeof *resp);
    mcdc_buf url = {0};
    const char *ep = s->c.endpoint;
    int rc = mcdc_buf_printf(&url, err, "%.*s%s", (int)(s->c.endpoint_path - ep), ep,
                             (const char *)call->path.data);
    for (size_t i = 0; rc == MCDC_OK && i < call->nparams; i++) {
        rc = mcdc_buf_printf(&url, err, "%c%s=", i ? '&' : '?', call->params[i].name);
        if (rc == MCDC_OK)
            rc = mcdc_http_append_encoded(&url, call->params[i].value,
                                          strlen(call->params[i].value), false, err);
    }
    if (rc == MCDC_OK && s->c.sas)
        rc = mcdc_buf_printf(&url, err, "%c%s", call->nparams ? '&' : '?', s->c.sas);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&url, err);
    char what[600];
    where(call, what, sizeof what);
    char full[640];
    snprintf(full, sizeof full, "%s %s", mcdc_http_method_name(req->method), what);
    if (rc == MCDC_OK) {
        req->url = (const char *)url.data;
        req->headers = &call->headers;
        req->sign = sign_attempt;
        req->sign_ctx = call;
        req->what = full;
        rc = mcdc_http_do(s->http, req, resp, err);
        if (rc && err) mcdc_az_redact(err->message, sizeof err->message);
    }
    if (url.data) gnutls_memset(url.data, 0, url.len); /* it may hold a SAS token */
    mcdc_buf_free(&url);
    return rc;
}

static const char *perm_name(char perm) {
    switch (perm) {
    case 'r': return "read (r)";
    case 'w': return "write (w)";
    case 'l': return "list (l)";
    case 'd': return "delete (d)";
    default: return "?";
    }
}

/* A non-2xx answer as a status and a message: where, what was being done,
 * the service's code and message, and what to do. */
static int answer_error(const az_call *call, const mcdc_http_response *r, mcdc_error *err) {
    const az_storage *s = call->s;
    char code[MCDC_HTTP_HEADER_VALUE_MAX], msg[256], at[600];
    mcdc_az_error_parse((const char *)r->error_body.data, r->error_body.len, code, sizeof code,
                        msg, sizeof msg);
    if (code[0] == 0) snprintf(code, sizeof code, "%s", r->error_code);
    where(call, at, sizeof at);
    bool sas = s->c.cred == MCDC_AZ_CRED_SAS;
    if (r->status == 404 && strcmp(code, "ContainerNotFound") == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s: %s: container \"%s\" does not exist in storage account "
                              "\"%s\" (ContainerNotFound); create it or fix the location",
                              at, call->doing, s->c.container, s->c.account);
    if (r->status == 404)
        return mcdc_error_set(err, MCDC_E_NOTFOUND, "%s: no such object (%s)", at,
                              code[0] ? code : "404");
    /* A credential Azure did not accept: AuthenticationFailed (Azurite says
     * AuthorizationFailure, as Azure does for a network rule) */
    bool authn = strcmp(code, "AuthenticationFailed") == 0 ||
                 strcmp(code, "AuthorizationFailure") == 0;
    if (r->status == 403 && (authn || !sas))
        return mcdc_error_set(err, MCDC_E_PERMISSION,
                              "%s: %s: storage account \"%s\" refused the %s (%s: %s); check "
                              "%s%s%s",
                              at, call->doing, s->c.account, mcdc_az_cred_name(s->c.cred),
                              code[0] ? code : "403", msg, s->c.cred_source,
                              sas ? " (its signature, its start and expiry times, and that it "
                                    "was made for this account)"
                              : s->entra ? " (the identity needs a Storage Blob Data role on the "
                                           "account or container: Reader to read, Contributor "
                                           "to write)"
                                         : " (this account's key, and this machine's clock)",
                              strcmp(code, "AuthorizationFailure") == 0
                                  ? ", and the account's network rules"
                                  : "");
    if (r->status == 403) {
        char sp[32];
        mcdc_az_sas_permissions(s->c.sas, sp, sizeof sp);
        return mcdc_error_set(err, MCDC_E_PERMISSION,
                              "%s: %s: the SAS token of %s (permissions sp=%s) does not allow "
                              "it (%s: %s): it needs the %s permission on container \"%s\"",
                              at, call->doing, s->c.cred_source, sp[0] ? sp : "none",
                              code[0] ? code : "403", msg, perm_name(call->perm), s->c.container);
    }
    return mcdc_error_set(err, MCDC_E_IO, "%s: %s: Azure answered HTTP %ld (%s: %s)", at,
                          call->doing, r->status, code[0] ? code : "no code", msg);
}

/* ---- reading ------------------------------------------------------------------------- */

/* Get Blob Properties: *exists, and its size and Content-MD5 (base64, into
 * md5 of 32 bytes) when it does. */
static int head_blob(const az_storage *s, const char *key, const char *doing, bool *exists,
                     int64_t *size, char md5[32], mcdc_error *err) {
    az_call call;
    mcdc_http_request req = {0};
    mcdc_http_response resp;
    static const char *const capture[] = {"Content-MD5", NULL};
    *exists = false;
    int rc = call_init(&call, s, key, doing, 'r', err);
    if (rc == MCDC_OK) {
        req.method = MCDC_HTTP_HEAD;
        req.retry_ambiguous = true;
        req.capture = capture;
        rc = call_run(&call, &req, &resp, err);
        if (rc == MCDC_OK && resp.status == 200) {
            *exists = true;
            *size = resp.content_length;
            if (md5) snprintf(md5, 32, "%s", resp.captured[0] ? resp.captured[0] : "");
            if (resp.content_length < 0)
                rc = mcdc_error_set(err, MCDC_E_PROTOCOL,
                                    "%s/%s: %s: Azure gave no Content-Length", s->root, key,
                                    doing);
        } else if (rc == MCDC_OK && resp.status != 404) {
            rc = answer_error(&call, &resp, err);
        } else if (rc == MCDC_OK && strcmp(resp.error_code, "ContainerNotFound") == 0) {
            rc = answer_error(&call, &resp, err);
        }
        mcdc_http_response_free(&resp);
    }
    call_free(&call);
    return rc;
}

static int az_get(void *self, const char *key, size_t max_bytes, mcdc_buf *out,
                  mcdc_error *err) {
    az_storage *s = self;
    az_call call;
    mcdc_http_request req = {0};
    mcdc_http_response resp;
    size_t len0 = out->len, limit0 = out->limit;
    size_t ceiling = limit0 ? limit0 : MCDC_BATCH_BYTES_MAX;
    if (max_bytes < ceiling - len0) out->limit = len0 + max_bytes;
    int rc = call_init(&call, s, key, "reading", 'r', err);
    if (rc == MCDC_OK) {
        req.method = MCDC_HTTP_GET;
        req.body_out = out;
        req.retry_ambiguous = true;
        rc = call_run(&call, &req, &resp, err);
        if (rc == MCDC_E_LIMIT)
            rc = mcdc_error_set(err, MCDC_E_LIMIT, "%s/%s is larger than %zu bytes, the most "
                                                   "this read takes",
                                s->root, key, max_bytes);
        else if (rc == MCDC_OK && resp.status != 200) rc = answer_error(&call, &resp, err);
        mcdc_http_response_free(&resp);
    }
    call_free(&call);
    out->limit = limit0;
    if (rc) out->len = len0;
    return rc;
}

static int az_get_range(void *self, const char *key, int64_t offset, size_t len, void *dst,
                        size_t *got, int64_t *size, mcdc_error *err) {
    az_storage *s = self;
    *got = 0;
    bool at_end = len == 0;
    if (len > 0) {
        az_call call;
        mcdc_http_request req = {0};
        mcdc_http_response resp;
        char range[64];
        snprintf(range, sizeof range, "bytes=%lld-%lld", (long long)offset,
                 (long long)offset + (long long)len - 1);
        int rc = call_init(&call, s, key, "reading a range", 'r', err);
        if (rc == MCDC_OK) rc = mcdc_http_headers_set(&call.headers, "x-ms-range", range, err);
        if (rc == MCDC_OK) {
            req.method = MCDC_HTTP_GET;
            req.dst = dst;
            req.dst_cap = len;
            req.retry_ambiguous = true;
            rc = call_run(&call, &req, &resp, err);
            if (rc == MCDC_OK && resp.status == 206) {
                *got = (size_t)resp.body_bytes;
                *size = resp.range_total;
                if (resp.range_total < offset + resp.body_bytes || resp.range_first != offset)
                    rc = mcdc_error_set(err, MCDC_E_PROTOCOL,
                                        "%s/%s: reading bytes %s: Azure answered a range that "
                                        "does not match (Content-Range first %lld, total %lld)",
                                        s->root, key, range, (long long)resp.range_first,
                                        (long long)resp.range_total);
            } else if (rc == MCDC_OK && resp.status == 416) {
                at_end = true; /* at or past the end (or an empty blob): the size says */
            } else if (rc == MCDC_OK) {
                rc = answer_error(&call, &resp, err);
            }
            mcdc_http_response_free(&resp);
        }
        call_free(&call);
        if (rc || !at_end) return rc;
    }
    bool exists;
    int rc = head_blob(s, key, "reading its size", &exists, size, NULL, err);
    if (rc == MCDC_OK && !exists)
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "%s/%s: no such object", s->root, key);
    if (rc == MCDC_OK && offset > *size)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "%s/%s: reading at offset %lld, past the object's end (%lld bytes)",
                            s->root, key, (long long)offset, (long long)*size);
    return rc;
}

/* ---- listing ----------------------------------------------------------------------------- */

static int cmp_entries(const void *a, const void *b) {
    return strcmp(((const mcdc_storage_entry *)a)->name, ((const mcdc_storage_entry *)b)->name);
}

/* One page's <Blob> elements into out; marker gets NextMarker (empty at
 * the end). skip: the bytes of every name before the entry's own (the
 * storage's prefix and the listed directory). */
static int list_page(const az_call *call, const mcdc_buf *page, size_t skip,
                     mcdc_storage_listing *out, size_t *cap, mcdc_buf *marker,
                     mcdc_error *err) {
    const char *p = (const char *)page->data, *end = p + page->len;
    mcdc_buf name = {0}, text = {0};
    int rc = MCDC_OK;
    char at[600];
    where(call, at, sizeof at);
    const char *pos = p, *blob;
    size_t blob_len;
    while (rc == MCDC_OK && mcdc_xml_next(&pos, end, "Blob", &blob, &blob_len)) {
        const char *blob_end = blob + blob_len;
        bool found;
        rc = mcdc_az_blob_name(blob, blob_end, &name, &found, err);
        if (rc == MCDC_OK && !found)
            rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "%s: listing: a blob without a name", at);
        char kind[32], length[32], modified[64];
        mcdc_xml_text_fixed(kind, sizeof kind, blob, blob_len, "ResourceType");
        mcdc_xml_text_fixed(length, sizeof length, blob, blob_len, "Content-Length");
        mcdc_xml_text_fixed(modified, sizeof modified, blob, blob_len, "Last-Modified");
        if (rc || strcmp(kind, "directory") == 0) continue; /* an HNS directory: not listed */
        const char *full = (const char *)name.data;
        if (name.len <= skip || strchr(full + skip, '/')) continue; /* not directly under */
        int64_t bytes = -1, mtime_ms = mcdc_http_parse_date_ms(modified);
        if (mcdc_parse_i64(length, &bytes) != MCDC_OK || bytes < 0 || mtime_ms < 0)
            rc = mcdc_error_set(err, MCDC_E_PROTOCOL,
                                "%s: listing: blob \"%s\" came without a size or a "
                                "Last-Modified time",
                                at, full);
        else rc = mcdc_storage_listing_add(out, cap, full + skip, bytes, mtime_ms, err);
    }
    mcdc_buf_reset(marker);
    if (rc == MCDC_OK) {
        rc = mcdc_xml_text(marker, p, page->len, "NextMarker", err);
        if (rc == MCDC_E_NOTFOUND) rc = MCDC_OK, mcdc_buf_reset(marker);
        if (rc) mcdc_buf_reset(marker);
    }
    mcdc_buf_free(&name);
    mcdc_buf_free(&text);
    return rc;
}

static int az_list(void *self, const char *prefix, const char *after, mcdc_storage_listing *out,
                   mcdc_error *err) {
    az_storage *s = self;
    const char *slash = strrchr(prefix, '/');
    size_t skip = strlen(s->c.prefix) + (slash ? (size_t)(slash - prefix) + 1 : 0);
    char *full = mcdc_asprintf("%s%s", s->c.prefix, prefix);
    /* startFrom (inclusive) at the full name of `after`: the service starts
     * there; one that does not know it (service versions before 2026-02-06)
     * lists from the prefix, and drop_upto below keeps the contract */
    char *start = after && full ? mcdc_asprintf("%.*s%s", (int)skip, full, after) : NULL;
    if (after && start == NULL) {
        mcdc_free(full);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    mcdc_buf page = {0}, marker = {0};
    size_t cap = 0;
    int rc = full ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    page.limit = MCDC_AZ_LIST_PAGE_BYTES_MAX;
    do {
        az_call call;
        mcdc_http_request req = {0};
        mcdc_http_response resp;
        char *m = NULL;
        if (rc == MCDC_OK) rc = call_init(&call, s, NULL, "listing", 'l', err);
        else break;
        if (rc == MCDC_OK) {
            call_param(&call, "restype", "container");
            call_param(&call, "comp", "list");
            call_param(&call, "delimiter", "/");
            call_param(&call, "maxresults", "5000");
            if (full[0]) call_param(&call, "prefix", full);
            if (start) call_param(&call, "startFrom", start);
            if (marker.len) {
                m = mcdc_strndup((const char *)marker.data, marker.len);
                if (m == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                else call_param(&call, "marker", m);
            }
        }
        if (rc == MCDC_OK) {
            mcdc_buf_reset(&page);
            req.method = MCDC_HTTP_GET;
            req.body_out = &page;
            req.retry_ambiguous = true;
            rc = call_run(&call, &req, &resp, err);
            if (rc == MCDC_OK && resp.status != 200) rc = answer_error(&call, &resp, err);
            else if (rc == MCDC_OK) rc = list_page(&call, &page, skip, out, &cap, &marker, err);
            mcdc_http_response_free(&resp);
        }
        mcdc_free(m);
        call_free(&call);
    } while (rc == MCDC_OK && marker.len > 0);
    mcdc_buf_free(&page);
    mcdc_buf_free(&marker);
    mcdc_free(start);
    mcdc_free(full);
    if (rc) {
        mcdc_storage_listing_free(out);
        return rc;
    }
    if (out->count > 1) qsort(out->entries, out->count, sizeof out->entries[0], cmp_entries);
    mcdc_storage_listing_drop_upto(out, after);
    return MCDC_OK;
}

/* ---- deleting ---------------------------------------------------------------------------- */

static int az_del(void *self, const char *key, mcdc_error *err) {
    az_storage *s = self;
    az_call call;
    mcdc_http_request req = {0};
    mcdc_http_response resp;
    int rc = call_init(&call, s, key, "deleting", 'd', err);
    if (rc == MCDC_OK) {
        req.method = MCDC_HTTP_DELETE;
        req.retry_ambiguous = true;
        rc = call_run(&call, &req, &resp, err);
        /* a 404 after an attempt that may have been carried out: ours */
        bool gone_by_us = resp.status == 404 && resp.ambiguous &&
                          strcmp(resp.error_code, "BlobNotFound") == 0;
        if (rc == MCDC_OK && resp.status != 202 && resp.status != 200 && !gone_by_us)
            rc = answer_error(&call, &resp, err);
        mcdc_http_response_free(&resp);
    }
    call_free(&call);
    return rc;
}

/* ---- writing ----------------------------------------------------------------------------- */

typedef struct az_writer {
    az_storage *s;
    char *key;              /* owned */
    mcdc_buf block;         /* bytes not staged yet: at most one block */
    mcdc_part_sender sender; /* full blocks, staged while the next fills */
    gnutls_hash_hd_t md5;   /* of every byte written */
    uint32_t blocks;        /* staged */
    char uuid[37];          /* this writer's part of its block ids */
    int64_t bytes;
} az_writer;

/* Block ids: base64 of "<writer uuid>-<counter, 8 digits>", one width for
 * every writer (the service wants one length per blob). */
static int block_id(const az_writer *w, uint32_t n, mcdc_buf *out, mcdc_error *err) {
    char raw[48];
    int len = snprintf(raw, sizeof raw, "%s-%08u", w->uuid, (unsigned)n);
    MCDC_ASSERT(len == 45);
    mcdc_buf_reset(out);
    return mcdc_az_base64_encode(out, raw, (size_t)len, err);
}

/* Put Block: stages part as block index of the writer, on a sender
 * thread. */
static int stage_block(void *ctx, int64_t index, const mcdc_buf *part,
                       char note[MCDC_HTTP_HEADER_VALUE_MAX], mcdc_error *err) {
    az_writer *w = ctx;
    (void)note;
    az_call call;
    mcdc_http_request req = {0};
    mcdc_http_response resp;
    mcdc_buf id = {0};
    int rc = call_init(&call, w->s, w->key, "writing a block", 'w', err);
    if (rc == MCDC_OK) rc = block_id(w, (uint32_t)index, &id, err);
    if (rc == MCDC_OK) {
        call_param(&call, "comp", "block");
        call_param(&call, "blockid", (const char *)id.data);
        req.method = MCDC_HTTP_PUT;
        req.body = part->data;
        req.body_len = part->len;
        req.retry_ambiguous = true; /* staging again replaces the same block */
        rc = call_run(&call, &req, &resp, err);
        if (rc == MCDC_OK && resp.status != 201) rc = answer_error(&call, &resp, err);
        mcdc_http_response_free(&resp);
    }
    mcdc_buf_free(&id);
    call_free(&call);
    return rc;
}

/* A block staged (on the caller's thread, in order). */
static int block_staged(void *ctx, int64_t index, const char *note, mcdc_error *err) {
    az_writer *w = ctx;
    (void)note;
    (void)err;
    MCDC_ASSERT(index == (int64_t)w->blocks);
    w->blocks++;
    return MCDC_OK;
}

/* Hands the full block to the sender. */
static int hand_block(az_writer *w, mcdc_error *err) {
    if (w->sender.handed >= MCDC_AZ_BLOCKS_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "%s/%s: more than %d blocks of %zu bytes (Azure's limit per blob)",
                              w->s->root, w->key, MCDC_AZ_BLOCKS_MAX, w->s->c.block_bytes);
    return mcdc_part_sender_send(&w->sender, &w->block, err);
}

static int w_write(void *self, const void *data, size_t n, mcdc_error *err) {
    az_writer *w = self;
    const uint8_t *p = data;
    if (gnutls_hash(w->md5, p, n) < 0)
        return mcdc_error_set(err, MCDC_E_IO, "%s/%s: MD5 failed (GnuTLS)", w->s->root, w->key);
    while (n > 0) {
        size_t room = w->s->c.block_bytes - w->block.len;
        size_t take = n < room ? n : room;
        int rc = mcdc_buf_append(&w->block, p, take, err);
        if (rc) return rc;
        p += take;
        n -= take;
        w->bytes += (int64_t)take;
        /* a full block goes out once more follows: the last one may be the
         * whole object (one Put Blob) */
        if (w->block.len == w->s->c.block_bytes && n > 0 &&
            (rc = hand_block(w, err)) != 0)
            return rc;
    }
    return MCDC_OK;
}

/* The request that publishes: Put Blob of the buffered bytes, or Put
 * Block List of the staged ones. */
static int publish(az_writer *w, bool if_absent, const char *md5, mcdc_http_response *resp,
                   az_call *call, mcdc_error *err) {
    mcdc_buf list = {0}, id = {0};
    mcdc_http_request req = {0};
    memset(resp, 0, sizeof *resp);
    int rc = call_init(call, w->s, w->key, "publishing", 'w', err);
    if (rc == MCDC_OK && if_absent) rc = mcdc_http_headers_set(&call->headers, "If-None-Match", "*", err);
    if (rc == MCDC_OK && w->blocks == 0) {
        rc = mcdc_http_headers_set(&call->headers, "x-ms-blob-type", "BlockBlob", err);
        if (rc == MCDC_OK) rc = mcdc_http_headers_set(&call->headers, "Content-MD5", md5, err);
        req.body = w->block.data;
        req.body_len = w->block.len;
    } else if (rc == MCDC_OK) {
        call_param(call, "comp", "blocklist");
        rc = mcdc_http_headers_set(&call->headers, "x-ms-blob-content-md5", md5, err);
        if (rc == MCDC_OK)
            rc = mcdc_buf_append_str(&list, "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>",
                                     err);
        for (uint32_t i = 0; rc == MCDC_OK && i < w->blocks; i++) {
            rc = block_id(w, i, &id, err);
            if (rc == MCDC_OK)
                rc = mcdc_buf_printf(&list, err, "<Latest>%s</Latest>", (const char *)id.data);
        }
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(&list, "</BlockList>", err);
        req.body = list.data;
        req.body_len = list.len;
    }
    if (rc == MCDC_OK) {
        req.method = MCDC_HTTP_PUT;
        req.retry_ambiguous = true; /* an "exists" after an ambiguous attempt is read back */
        rc = call_run(call, &req, resp, err);
    }
    mcdc_buf_free(&list);
    mcdc_buf_free(&id);
    return rc;
}

/* After an attempt that may have been carried out: whether the blob now
 * there is ours (same size, same MD5). */
static int landed(az_writer *w, const char *md5, bool *ours, bool *exists, mcdc_error *err) {
    int64_t size = -1;
    char theirs[32];
    int rc = head_blob(w->s, w->key, "reading back what a commit wrote", exists, &size, theirs,
                       err);
    *ours = rc == MCDC_OK && *exists && size == w->bytes && strcmp(theirs, md5) == 0;
    return rc;
}

static int w_commit(void *self, mcdc_storage_commit_mode mode, mcdc_error *err) {
    az_writer *w = self;
    bool if_absent = mode == MCDC_STORAGE_PUT_IF_ABSENT; /* a scratch put is a put */
    uint8_t digest[16];
    gnutls_hash_output(w->md5, digest);
    mcdc_buf md5 = {0};
    int rc = mcdc_az_base64_encode(&md5, digest, sizeof digest, err);
    if (rc == MCDC_OK && w->sender.handed > 0 && w->block.len > 0) rc = hand_block(w, err);
    if (rc == MCDC_OK) rc = mcdc_part_sender_wait(&w->sender, err);
    if (rc) {
        mcdc_buf_free(&md5);
        return rc;
    }
    az_call call;
    mcdc_http_response resp;
    const char *m = (const char *)md5.data;
    rc = publish(w, if_absent, m, &resp, &call, err);
    bool exists = resp.status == 409 || resp.status == 412;
    bool bad_list = resp.status == 400 && strcmp(resp.error_code, "InvalidBlockList") == 0;
    /* "exists", a list whose blocks are gone (a Put Blob of another
     * writer, or our own list that landed, drops them), or no answer after
     * an attempt that may have been carried out: what is there now
     * decides. "exists" is read back even when no attempt failed that the
     * layer saw: libcurl sends a request again by itself when a reused
     * connection dies before an answer, so our own commit may be what
     * exists. */
    if (if_absent && (exists || bad_list || (rc != MCDC_OK && resp.ambiguous))) {
        bool ours = false, there = false;
        int rc2 = landed(w, m, &ours, &there, NULL);
        if (rc2 == MCDC_OK && ours) {
            mcdc_log(MCDC_LOG_INFO, "%s/%s: a commit's answer was lost; the object there is "
                                    "ours (same size and MD5)",
                     w->s->root, w->key);
            rc = MCDC_OK;
            resp.status = 201;
        } else if (rc2 == MCDC_OK && there) {
            rc = MCDC_OK;
            exists = true;
        }
    }
    if (rc == MCDC_OK && resp.status != 201) {
        if (if_absent && exists)
            rc = mcdc_error_set(err, MCDC_E_CONFLICT,
                                "%s/%s: the key exists (another writer created it first); "
                                "nothing was published",
                                w->s->root, w->key);
        else rc = answer_error(&call, &resp, err);
    }
    mcdc_http_response_free(&resp);
    call_free(&call);
    mcdc_buf_free(&md5);
    return rc;
}

static void w_discard(void *self) {
    az_writer *w = self;
    if (w == NULL) return;
    /* staged blocks never listed are dropped by the service: nothing to send */
    mcdc_part_sender_free(&w->sender);
    gnutls_hash_deinit(w->md5, NULL);
    mcdc_buf_free(&w->block);
    mcdc_free(w->key);
    mcdc_free(w);
}

static const mcdc_storage_writer_ops k_writer_ops = {w_write, w_commit, w_discard};

static int az_open_writer(void *self, const char *key, mcdc_storage_writer *sw,
                          mcdc_error *err) {
    az_storage *s = self;
    az_writer *w = mcdc_calloc(1, sizeof *w);
    if (w == NULL || (w->key = mcdc_strdup(key)) == NULL) {
        mcdc_free(w);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (gnutls_hash_init(&w->md5, GNUTLS_DIG_MD5) < 0) {
        mcdc_free(w->key);
        mcdc_free(w);
        return mcdc_error_set(err, MCDC_E_IO, "%s/%s: MD5 is not available (GnuTLS)", s->root,
                              key);
    }
    w->s = s;
    w->block.limit = s->c.block_bytes;
    mcdc_part_sender_init(&w->sender, stage_block, block_staged, w, s->c.block_bytes);
    mcdc_uuid4(w->uuid);
    sw->ops = &k_writer_ops;
    sw->self = w;
    return MCDC_OK;
}

/* ---- the storage -------------------------------------------------------------------------- */

static void az_destroy(void *self) {
    az_storage *s = self;
    if (s == NULL) return;
    mcdc_az_entra_free(s->entra);
    mcdc_http_free(s->http);
    mcdc_az_config_free(&s->c);
    mcdc_free(s->root);
    mcdc_free(s);
}

static const mcdc_storage_ops k_ops = {
    az_open_writer, az_get, az_get_range, az_list, az_del, az_destroy, NULL, NULL, true,
};

int mcdc_storage_azure_open(mcdc_storage **out, const mcdc_storage_env *env,
                            const char *location, const char *rest, mcdc_error *err) {
    MCDC_ASSERT(out != NULL && rest == strstr(location, "://") + 3);
    *out = NULL;
    az_storage *s = mcdc_calloc(1, sizeof *s);
    if (s == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = mcdc_az_config_load(&s->c, env, location, err);
    size_t n = strlen(location);
    while (n > 0 && location[n - 1] == '/') n--;
    if (rc == MCDC_OK && (s->root = mcdc_strndup(location, n)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_http_config cfg = {0};
    if (rc == MCDC_OK) {
        mcdc_http_config_proxy(&cfg, env, s->c.endpoint);
        rc = mcdc_http_config_options(&cfg, env, err);
    }
    if (rc == MCDC_OK) rc = mcdc_http_create(&s->http, &cfg, err);
    if (rc == MCDC_OK && s->c.cred >= MCDC_AZ_CRED_TOKEN) {
        rc = mcdc_az_entra_shared(&s->entra, &s->c, &cfg, env ? env->share : NULL, err);
        if (rc) mcdc_error_wrap(err, "location \"%s\"", s->root);
    }
    mcdc_storage *st = rc == MCDC_OK ? mcdc_calloc(1, sizeof *st) : NULL;
    if (rc == MCDC_OK && (st == NULL || (st->root = mcdc_strdup(s->root)) == NULL)) {
        mcdc_free(st);
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (rc) {
        az_destroy(s);
        return rc;
    }
    st->ops = &k_ops;
    st->self = s;
    *out = st;
    return MCDC_OK;
}
