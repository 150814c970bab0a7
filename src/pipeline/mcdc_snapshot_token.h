/*
 * mcdc_snapshot_token.h - the text form of one planned snapshot chunk (the
 * tokens of mcdc_snapshot_plan_token, include/mssqlcdc.h):
 *
 *   {"mssqlcdc_snapshot":1,"capture_instance":"dbo_orders",
 *    "keys":["region","id"],"lo":["east",120],"hi":["west",7],
 *    "index":1,"count":4,"schema":"<16 hex>","check":"<16 hex>"}
 *
 * keys are the columns the chunk is cut on ([]: the whole table), lo and hi
 * its bounds (mcdc_keyrange.h: a scalar for one key column, an array for
 * several, null an open end). "schema" fingerprints the reader's output
 * schema, "check" the other fields (mcdc_token.h). No field comes from the
 * connection string. The snapshot's LSN is not in it: a chunked snapshot's
 * waves stamp the chunks they read with LSNs of their own.
 */
#ifndef MCDC_SNAPSHOT_TOKEN_H
#define MCDC_SNAPSHOT_TOKEN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_token.h"

#define MCDC_SNAPSHOT_TOKEN_VERSION 1

typedef struct mcdc_snapshot_token {
    char capture_instance[MCDC_CAPTURE_INSTANCE_TEXT_SIZE];
    json_t *keys;          /* array of column names, owned */
    json_t *lo, *hi;       /* bounds, owned; JSON null: open */
    int32_t index, count;  /* 0 <= index < count <= MCDC_SNAPSHOT_CHUNKS_MAX */
    char schema_id[MCDC_TOKEN_HASH_TEXT_SIZE];
} mcdc_snapshot_token;

/* Whether b is a bound of n key columns in a token's shape: null, a scalar
 * part for one key, an array of n parts for several (a part: null, an
 * integer or text of at most MCDC_KEY_BOUND_BYTES_MAX bytes). */
bool mcdc_snapshot_bound_ok(const json_t *b, size_t n);
/* A plan recorded before, as mcdc_snapshot_plan_chunks takes it
 * (include/mssqlcdc.h), parsed and checked before anything connects:
 * keys_json a JSON array of up to MCDC_SNAPSHOT_KEYS_MAX column names;
 * chunks_json 1..MCDC_SNAPSHOT_CHUNKS_MAX [lo, hi] pairs of bounds of that
 * many keys; max_json (NULL: none) one such bound. *keys, *chunks and *max
 * (NULL when max_json is) are owned JSON; anything else is MCDC_E_INVALID
 * saying which text is wrong, with nothing to release. */
int mcdc_snapshot_plan_text_parse(json_t **keys, json_t **chunks, json_t **max,
                                  const char *keys_json, const char *chunks_json,
                                  const char *max_json, mcdc_error *err);
/* An extent a chunked snapshot's open recorded, as
 * mcdc_snapshot_plan_from_extent takes it, parsed and checked before
 * anything connects: keys_json as above; extent_json an object
 * {"kind":"int","lo":MIN,"hi":MAX,"rows":n} (one key column; integers,
 * MIN <= MAX, n >= 0) or {"kind":"keyset","max":MAX} (MAX null or a bound
 * of that many keys); other fields are let be. *keys and *extent are owned
 * JSON; anything else is MCDC_E_INVALID saying which text is wrong, with
 * nothing to release. */
int mcdc_snapshot_extent_text_parse(json_t **keys, json_t **extent, const char *keys_json,
                                    const char *extent_json, mcdc_error *err);
/* Releases the JSON of t (t itself is the caller's). */
void mcdc_snapshot_token_clear(mcdc_snapshot_token *t);
/* t as token text; *out owned (mcdc_free). Asserts t's shape (the planner
 * builds it); text past MCDC_SNAPSHOT_TOKEN_BYTES_MAX is MCDC_E_LIMIT. */
int mcdc_snapshot_token_encode(char **out, const mcdc_snapshot_token *t, mcdc_error *err);
/* Parses text[0..n) (need not be NUL-terminated). Every field is required
 * and checked (the bounds' shape against the keys; their values against the
 * columns' types when read); anything else is MCDC_E_INVALID saying which
 * field is wrong. On success *out holds JSON to clear. */
int mcdc_snapshot_token_decode(mcdc_snapshot_token *out, const char *text, size_t n,
                               mcdc_error *err);

#endif /* MCDC_SNAPSHOT_TOKEN_H */
