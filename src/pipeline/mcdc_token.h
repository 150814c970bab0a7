/*
 * mcdc_token.h - what the tokens of the public API share (change ranges,
 * mcdc_range_token.h; snapshot chunks, mcdc_snapshot_token.h): a JSON object
 * of known fields, a "check" over them (FNV-1a 64: it catches edits and
 * truncation, not an attacker, as there is no secret to sign with), the
 * output schema's fingerprint, the same errors for every malformed token.
 * No token holds any part of the connection string.
 */
#ifndef MCDC_TOKEN_H
#define MCDC_TOKEN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_options.h"

/* 16 hex digits and the NUL. */
#define MCDC_TOKEN_HASH_TEXT_SIZE 17
#define MCDC_TOKEN_FNV_OFFSET 0xcbf29ce484222325ULL

/* One kind of token: its name in messages ("range"), the call that hands
 * its text out ("mcdc_range_plan_token"), its fields (every one required,
 * no other allowed) and its size limit. */
typedef struct mcdc_token_kind {
    const char *name;
    const char *giver;
    const char *const *fields;
    size_t n_fields;
    size_t bytes_max;
} mcdc_token_kind;

uint64_t mcdc_token_fnv1a(uint64_t h, const void *p, size_t n);
void mcdc_token_hash_text(char out[MCDC_TOKEN_HASH_TEXT_SIZE], uint64_t h);
/* The fingerprint of an output schema (names, Arrow formats,
 * nullability): 16 lowercase hex digits. */
void mcdc_token_schema_id(char out[MCDC_TOKEN_HASH_TEXT_SIZE], const mcdc_schema *s);

/* MCDC_E_INVALID "invalid <kind> token: <what> (pass the text <giver>
 * gave, unchanged)". */
int mcdc_token_bad(const mcdc_token_kind *k, mcdc_error *err, const char *fmt, ...)
    MCDC_PRINTF(3, 4);
/* text[0..n) parsed as a token object of kind k: not empty, within the
 * size limit, JSON without duplicate keys, an object of k's fields only.
 * *out owned (json_decref). */
int mcdc_token_load(json_t **out, const mcdc_token_kind *k, const char *text, size_t n,
                    mcdc_error *err);
/* Field readers: missing, mistyped or out of range is mcdc_token_bad. */
int mcdc_token_text(const mcdc_token_kind *k, const json_t *j, const char *key, const char **out,
                    mcdc_error *err);
int mcdc_token_int(const mcdc_token_kind *k, const json_t *j, const char *key, int64_t min,
                   int64_t max, int64_t *out, mcdc_error *err);
int mcdc_token_hash(const mcdc_token_kind *k, const json_t *j, const char *key,
                    char out[MCDC_TOKEN_HASH_TEXT_SIZE], mcdc_error *err);
/* The version field: an integer equal to want. */
int mcdc_token_version(const mcdc_token_kind *k, const json_t *j, const char *key, int want,
                       mcdc_error *err);
/* The "capture_instance" field: a valid capture instance name. */
int mcdc_token_capture_instance(const mcdc_token_kind *k, const json_t *j,
                                char out[MCDC_CAPTURE_INSTANCE_TEXT_SIZE], mcdc_error *err);

/* opts with captureInstance set to a token's ci (a copy; the caller's stay
 * as they are): the options may leave it out, else must name ci (caller
 * names the call in the error). *out owned (mcdc_opts_free). */
int mcdc_token_options(mcdc_opts **out, const mcdc_opts *opts, const char *ci, const char *caller,
                       mcdc_error *err);

#endif /* MCDC_TOKEN_H */
