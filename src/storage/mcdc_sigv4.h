/*
 * mcdc_sigv4.h - AWS Signature Version 4 for S3 requests, written here
 * rather than taken from libcurl (CURLOPT_AWS_SIGV4 in the curl 7.88 we
 * build on mis-canonicalises "?uploads", unsorted queries and some keys).
 *
 * What is signed: the method; the URL's path exactly as it goes on the
 * wire (the caller encodes keys once, S3's way: every byte but the
 * unreserved ones and '/'; nothing is encoded again); the query's
 * parameters sorted, a valueless one as "name="; every header of the
 * request (names lower-cased and sorted, values trimmed with inner runs of
 * blanks made one), which the signer completes with host, x-amz-date,
 * x-amz-content-sha256 and, with a session token, x-amz-security-token.
 * The payload hash is the body's SHA-256 (hex) when the body is in memory,
 * or "UNSIGNED-PAYLOAD".
 *
 * Secrets: the secret key and session token are read here and go nowhere
 * else; the Authorization header holds the access key id and a signature.
 */
#ifndef MCDC_SIGV4_H
#define MCDC_SIGV4_H

#include "mcdc_http.h"

typedef struct mcdc_sigv4_key {
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token; /* NULL or "": none */
} mcdc_sigv4_key;

#define MCDC_SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

/* The SHA-256 of n bytes at p as 64 lower-case hex digits. */
void mcdc_sigv4_sha256_hex(const void *p, size_t n, char out[65]);

/* Signs a request of method to url at now_ms for region and service ("s3"):
 * adds host, x-amz-date, x-amz-content-sha256 (payload_hash: 64 hex digits
 * or MCDC_SIGV4_UNSIGNED_PAYLOAD), x-amz-security-token when the key has
 * one, and Authorization to hdrs, whose other headers are signed as they
 * are. MCDC_E_INVALID for a URL without scheme or host. */
int mcdc_sigv4_sign(mcdc_http_headers *hdrs, mcdc_http_method method, const char *url,
                    const char *payload_hash, const mcdc_sigv4_key *key, const char *region,
                    const char *service, int64_t now_ms, mcdc_error *err);

/* The canonical request the signature covers (for tests and for
 * explaining a SignatureDoesNotMatch); appended to out. */
int mcdc_sigv4_canonical_request(mcdc_buf *out, mcdc_http_method method, const char *url,
                                 const mcdc_http_headers *hdrs, const char *payload_hash,
                                 mcdc_error *err);

#endif /* MCDC_SIGV4_H */
