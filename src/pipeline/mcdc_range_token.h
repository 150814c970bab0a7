/*
 * mcdc_range_token.h - the text form of one planned change range (the
 * tokens of mcdc_range_plan_token, include/mssqlcdc.h):
 *
 *   {"mssqlcdc_range":1,"capture_instance":"dbo_orders",
 *    "from_lsn":"0x0000002A000001F00003","to_lsn":"0x0000002A000002100001",
 *    "rows_estimate":51234,"index":0,"count":2,
 *    "schema":"<16 hex>","check":"<16 hex>"}
 *
 * "schema" fingerprints the reader's output schema at planning time (names,
 * Arrow formats, nullability), so that a reader whose columns differ fails
 * instead of returning batches of another shape. "check" is FNV-1a 64 of the
 * other fields in a fixed order: it catches edits and truncation, not an
 * attacker (there is no secret to sign with). No field comes from the
 * connection string. The machinery is mcdc_token.h's.
 */
#ifndef MCDC_RANGE_TOKEN_H
#define MCDC_RANGE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_lsn.h"
#include "mcdc_token.h"

#define MCDC_RANGE_TOKEN_VERSION 1
/* A range of a batch planned across the table's capture instances
 * (mcdc_source_plan_batch): read in the union of their columns. The same
 * fields; the version alone tells it, so a library that knows only
 * version 1 refuses it instead of reading another shape. */
#define MCDC_RANGE_TOKEN_VERSION_FOLLOW 2
/* 16 hex digits and the NUL. */
#define MCDC_RANGE_HASH_TEXT_SIZE MCDC_TOKEN_HASH_TEXT_SIZE

typedef struct mcdc_range_token {
    char capture_instance[MCDC_CAPTURE_INSTANCE_TEXT_SIZE];
    mcdc_lsn from, to;     /* closed interval, from <= to */
    int64_t rows_estimate; /* >= 0 */
    int32_t index, count;  /* 0 <= index < count <= MCDC_PARTITIONS_MAX */
    char schema_id[MCDC_RANGE_HASH_TEXT_SIZE];
    bool follow;           /* version 2: read following the table's instances */
} mcdc_range_token;

/* The fingerprint of an output schema: 16 lowercase hex digits
 * (mcdc_token_schema_id). */
void mcdc_range_schema_id(char out[MCDC_RANGE_HASH_TEXT_SIZE], const mcdc_schema *s);

/* t as token text; *out owned by the caller (mcdc_free). Asserts t is a
 * valid token (the planner builds it). */
int mcdc_range_token_encode(char **out, const mcdc_range_token *t, mcdc_error *err);
/* Parses text[0..n) (need not be NUL-terminated). Every field is required
 * and checked; anything else is MCDC_E_INVALID saying which field is wrong. */
int mcdc_range_token_decode(mcdc_range_token *out, const char *text, size_t n, mcdc_error *err);

#endif /* MCDC_RANGE_TOKEN_H */
