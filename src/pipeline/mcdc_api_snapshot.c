/*
 * mcdc_api_snapshot.c - snapshots as Arrow streams (include/mssqlcdc.h,
 * "Snapshots as Arrow streams"): the snapshot planner and reader of the
 * change feed handle (mcdc_changes.h) behind tokens (mcdc_snapshot_token.h),
 * as mcdc_api_range.c puts change ranges behind theirs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_batch_stream.h"
#include "mcdc_changes.h"
#include "mcdc_options.h"
#include "mcdc_snapshot_token.h"

struct mcdc_snapshot_plan {
    char **tokens; /* n, owned */
    size_t n;
    char lsn[MCDC_LSN_TEXT_LEN + 1];
    mcdc_schema *schema; /* the output schema, one reference */
    char *extent;        /* the extent its chunks were cut on, JSON text; NULL: none */
};

void mcdc_snapshot_plan_free(mcdc_snapshot_plan *p) {
    if (p == NULL) return;
    for (size_t i = 0; i < p->n; i++) mcdc_free(p->tokens[i]);
    mcdc_free(p->tokens);
    mcdc_schema_unref(p->schema);
    mcdc_free(p->extent);
    mcdc_free(p);
}

size_t mcdc_snapshot_plan_count(const mcdc_snapshot_plan *p) { return p ? p->n : 0; }

const char *mcdc_snapshot_plan_token(const mcdc_snapshot_plan *p, size_t i) {
    return p && i < p->n ? p->tokens[i] : NULL;
}

const char *mcdc_snapshot_plan_lsn(const mcdc_snapshot_plan *p) { return p ? p->lsn : NULL; }

const char *mcdc_snapshot_plan_extent(const mcdc_snapshot_plan *p) { return p ? p->extent : NULL; }

int mcdc_snapshot_plan_schema(struct ArrowSchema *out, const mcdc_snapshot_plan *p,
                              mcdc_error *err) {
    if (out == NULL || p == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_snapshot_plan_schema: %s is NULL",
                              out == NULL ? "out" : "the plan");
    return mcdc_schema_export(p->schema, out, err);
}

/* How a plan's chunks come: cut now (chunk_rows), on an extent (read now
 * or recorded: mcdc_snapshot_plan_from_extent), or recorded before
 * (mcdc_snapshot_plan_chunks: their keys, the chunks, a keyset MAX). */
typedef struct plan_how {
    int64_t chunk_rows;
    bool on_extent;       /* mcdc_snapshot_plan_from_extent's */
    const json_t *given;  /* the recorded keys; NULL: the snapshot's own, not checked */
    const json_t *extent; /* the recorded extent; NULL: read now */
    json_t *chunks;       /* recorded chunks, whose last end may be sought again */
    const json_t *max;
} plan_how;

/* The chunks (or ranges) of a plan cut now, as JSON [[lo, hi], ...], and
 * the extent they were cut on (NULL for ranges): chunk_rows 0 without an
 * extent cuts numPartitions ranges, with one no chunk (the whole table). */
static int cut_chunks(json_t **chunks, json_t **extent, mcdc_changes *c, const json_t *keys,
                      const plan_how *h, const mcdc_opts *opts, mcdc_error *err) {
    if (h->chunk_rows == 0 && !h->on_extent)
        return mcdc_changes_snapshot_ranges(c, mcdc_opt_num_partitions(opts), chunks, err);
    int rc = MCDC_OK;
    if (h->extent) *extent = json_deep_copy(h->extent);
    else rc = mcdc_changes_snapshot_extent(c, keys, MCDC_ISO_OPTION, extent, err);
    if (rc == MCDC_OK && *extent == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
    if (rc == MCDC_OK && h->chunk_rows > 0)
        rc = mcdc_changes_plan_chunks(c, keys, *extent, h->chunk_rows, MCDC_ISO_OPTION, chunks, err);
    else if (rc == MCDC_OK && (*chunks = json_pack("[[nn]]")) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
    return rc;
}

/* The extent's text kept in the plan (mcdc_snapshot_plan_extent). */
static int keep_extent(mcdc_snapshot_plan *p, const json_t *extent, mcdc_error *err) {
    if (extent == NULL) return MCDC_OK;
    char *text = json_dumps(extent, JSON_COMPACT);
    p->extent = text ? mcdc_strdup(text) : NULL;
    free(text); /* jansson's allocation */
    return p->extent ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
}

static int encode_plan(mcdc_snapshot_plan *p, mcdc_changes *c, const json_t *keys,
                       const json_t *chunks, mcdc_error *err) {
    size_t n = json_array_size(chunks);
    MCDC_ASSERT(n >= 1 && n <= MCDC_SNAPSHOT_CHUNKS_MAX);
    p->tokens = mcdc_calloc(n, sizeof *p->tokens);
    if (p->tokens == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
    mcdc_snapshot_token t;
    memset(&t, 0, sizeof t);
    snprintf(t.capture_instance, sizeof t.capture_instance, "%s",
             mcdc_changes_capture_instance(c));
    mcdc_token_schema_id(t.schema_id, p->schema);
    t.keys = (json_t *)keys;
    t.count = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(chunks, i);
        t.lo = json_array_get(r, 0);
        t.hi = json_array_get(r, 1);
        t.index = (int32_t)i;
        int rc = mcdc_snapshot_token_encode(&p->tokens[i], &t, err);
        if (rc) return rc;
        p->n = i + 1;
    }
    return MCDC_OK;
}

/* The recorded plan's keys against the snapshot's own (names ignoring case). */
static int same_keys(const json_t *ours, const json_t *given, bool planned, mcdc_error *err) {
    bool same = json_array_size(given) == json_array_size(ours);
    for (size_t i = 0; same && i < json_array_size(ours); i++)
        same = mcdc_str_ieq(json_string_value(json_array_get(given, i)),
                            json_string_value(json_array_get(ours, i)));
    if (same) return MCDC_OK;
    char *a = json_dumps(given, JSON_COMPACT), *b = json_dumps(ours, JSON_COMPACT);
    int rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "%s: the %s is cut on %.300s, but a snapshot of these options is "
                            "cut on %.300s (snapshotKeys, else the capture instance's unique "
                            "index): set snapshotKeys as when it was %s",
                            planned ? "mcdc_snapshot_plan_chunks" : "mcdc_snapshot_plan_from_extent",
                            planned ? "plan" : "extent", a ? a : "?", b ? b : "?",
                            planned ? "planned" : "opened");
    free(a); /* jansson's allocations */
    free(b);
    return rc;
}

/* The last chunk's end sought again past max (mcdc_changes_last_bound),
 * when it is open above. */
static int seek_last(mcdc_changes *c, const json_t *keys, json_t *chunks, const json_t *max,
                     mcdc_error *err) {
    json_t *last = json_array_get(chunks, json_array_size(chunks) - 1);
    if (max == NULL || json_is_null(max) || !json_is_null(json_array_get(last, 1)))
        return MCDC_OK;
    json_t *end = NULL;
    int rc = mcdc_changes_last_bound(c, keys, max, MCDC_ISO_OPTION, &end, err);
    if (rc == MCDC_OK && end && json_array_set_new(last, 1, end) != 0)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
    return rc;
}

/* Both planners on one connection: the LSN first (every commit at or
 * before it is in the rows read after it, reference §2.4.1), the key, the
 * chunks, their tokens. */
static int plan_make(mcdc_snapshot_plan **out, const mcdc_opts *opts, const plan_how *h,
                     mcdc_error *err) {
    int rc = mcdc_opts_check_required(opts, err);
    if (rc) return rc;
    mcdc_changes *c = NULL;
    rc = mcdc_changes_open(&c, opts, NULL, err);
    if (rc) return rc;
    mcdc_snapshot_plan *p = mcdc_calloc(1, sizeof *p);
    if (p == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
    mcdc_lsn lsn;
    int64_t commit_us = 0;
    bool has_ts = false;
    if (rc == MCDC_OK) rc = mcdc_changes_snapshot_lsn(c, &lsn, &commit_us, &has_ts, err);
    if (rc == MCDC_OK) mcdc_lsn_format(&lsn, p->lsn);
    json_t *keys = NULL, *cut = NULL, *extent = NULL;
    if (rc == MCDC_OK) rc = mcdc_changes_snapshot_keys(c, &keys, err);
    if (rc == MCDC_OK && h->given) rc = same_keys(keys, h->given, h->chunks != NULL, err);
    if (rc == MCDC_OK && h->chunks) rc = seek_last(c, keys, h->chunks, h->max, err);
    else if (rc == MCDC_OK) rc = cut_chunks(&cut, &extent, c, keys, h, opts, err);
    if (rc == MCDC_OK) rc = keep_extent(p, extent, err);
    if (rc == MCDC_OK) {
        p->schema = mcdc_schema_ref(mcdc_changes_schema(c));
        rc = encode_plan(p, c, keys, h->chunks ? h->chunks : cut, err);
    }
    json_decref(cut);
    json_decref(extent);
    json_decref(keys);
    mcdc_changes_close(c);
    if (rc) {
        mcdc_snapshot_plan_free(p);
        return rc;
    }
    *out = p;
    return MCDC_OK;
}

int mcdc_snapshot_plan_create(mcdc_snapshot_plan **out, const mcdc_opts *opts,
                              int64_t chunk_rows, mcdc_error *err) {
    if (out == NULL || opts == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_snapshot_plan_create: %s is NULL",
                              out == NULL ? "out" : "opts");
    *out = NULL;
    if (chunk_rows < 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_snapshot_plan_create: chunk_rows is %lld; use rows per "
                              "chunk (> 0), or 0 for numPartitions whole-snapshot ranges",
                              (long long)chunk_rows);
    plan_how h = {.chunk_rows = chunk_rows};
    return plan_make(out, opts, &h, err);
}

int mcdc_snapshot_plan_chunks(mcdc_snapshot_plan **out, const mcdc_opts *opts,
                              const char *keys_json, const char *chunks_json,
                              const char *max_json, mcdc_error *err) {
    if (out == NULL || opts == NULL || keys_json == NULL || chunks_json == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_snapshot_plan_chunks: %s is NULL",
                              out == NULL    ? "out"
                              : opts == NULL ? "opts"
                              : keys_json == NULL ? "keys_json"
                                                  : "chunks_json");
    *out = NULL;
    /* The text first: nothing connects for a plan that is no plan. */
    json_t *given = NULL, *chunks = NULL, *max = NULL;
    int rc = mcdc_snapshot_plan_text_parse(&given, &chunks, &max, keys_json, chunks_json,
                                           max_json, err);
    if (rc) return rc;
    plan_how h = {.given = given, .chunks = chunks, .max = max};
    rc = plan_make(out, opts, &h, err);
    json_decref(given);
    json_decref(chunks);
    json_decref(max);
    return rc;
}

int mcdc_snapshot_plan_from_extent(mcdc_snapshot_plan **out, const mcdc_opts *opts,
                                   const char *keys_json, const char *extent_json,
                                   int64_t chunk_rows, mcdc_error *err) {
    if (out == NULL || opts == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_snapshot_plan_from_extent: %s is NULL",
                              out == NULL ? "out" : "opts");
    *out = NULL;
    if ((keys_json == NULL) != (extent_json == NULL))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_snapshot_plan_from_extent: keys_json and extent_json are "
                              "given together (an extent recorded with its key columns) or not "
                              "at all (read now)");
    if (chunk_rows < 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_snapshot_plan_from_extent: chunk_rows is %lld; use rows per "
                              "chunk (> 0), or 0 for no chunks (the extent only)",
                              (long long)chunk_rows);
    /* The text first: nothing connects for an extent that is no extent. */
    json_t *given = NULL, *extent = NULL;
    int rc = keys_json ? mcdc_snapshot_extent_text_parse(&given, &extent, keys_json, extent_json, err)
                       : MCDC_OK;
    if (rc) return rc;
    plan_how h = {.chunk_rows = chunk_rows, .on_extent = true, .given = given, .extent = extent};
    rc = plan_make(out, opts, &h, err);
    json_decref(given);
    json_decref(extent);
    return rc;
}

int mcdc_snapshot_token_parse(mcdc_snapshot_info *out, const char *token, mcdc_error *err) {
    if (out == NULL || token == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_snapshot_token_parse: %s is NULL",
                              out == NULL ? "out" : "token");
    if (out->version != MCDC_SNAPSHOT_INFO_VERSION)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_snapshot_token_parse: out->version is %d; initialise the "
                              "struct with MCDC_SNAPSHOT_INFO_INIT (version %d)",
                              out->version, MCDC_SNAPSHOT_INFO_VERSION);
    mcdc_snapshot_token t;
    int rc = mcdc_snapshot_token_decode(&t, token, strlen(token), err);
    if (rc) return rc;
    _Static_assert(sizeof out->capture_instance == sizeof t.capture_instance, "same size");
    memcpy(out->capture_instance, t.capture_instance, sizeof t.capture_instance);
    out->index = t.index;
    out->count = t.count;
    out->n_keys = (int32_t)json_array_size(t.keys);
    mcdc_snapshot_token_clear(&t);
    return MCDC_OK;
}

/* ---- reading ------------------------------------------------------------------- */
typedef struct chunk_read {
    mcdc_changes *changes;
    mcdc_opts *opts; /* the changes handle borrows some of its strings */
    mcdc_snapshot_token token;
    mcdc_lsn lsn;
    bool has_ts;
    int64_t commit_us;
} chunk_read;

static int produce(void *ctx, mcdc_batch_stream_sink_fn sink, void *sink_ctx, mcdc_error *err) {
    chunk_read *r = ctx;
    json_t *range = json_pack("[OO]", r->token.lo, r->token.hi);
    if (range == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory reading a chunk");
    int rc = mcdc_changes_snapshot_read(r->changes, r->token.keys, range, MCDC_ISO_OPTION, &r->lsn,
                                        r->has_ts, r->commit_us, sink, sink_ctx, NULL, err);
    json_decref(range);
    return rc;
}

static void chunk_read_free(void *ctx) {
    chunk_read *r = ctx;
    if (r == NULL) return;
    mcdc_changes_close(r->changes);
    mcdc_opts_free(r->opts);
    mcdc_snapshot_token_clear(&r->token);
    mcdc_free(r);
}

/* Opens what reading needs, before any row: the changes handle (the capture
 * instance and its columns), the schema check, the LSN's commit time. */
static int open_read(chunk_read *r, const mcdc_opts *opts, const char *token, const char *lsn,
                     mcdc_error *err) {
    int rc = mcdc_snapshot_token_decode(&r->token, token, strlen(token), err);
    if (rc) return rc;
    if (mcdc_lsn_parse_cstr(&r->lsn, lsn, err) != MCDC_OK) {
        mcdc_error_wrap(err, "mcdc_snapshot_read: lsn (pass mcdc_snapshot_plan_lsn's)");
        return MCDC_E_INVALID;
    }
    rc = mcdc_token_options(&r->opts, opts, r->token.capture_instance, "mcdc_snapshot_read", err);
    if (rc == MCDC_OK && mcdc_opt_connection_string(r->opts) == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "mcdc_snapshot_read: the options have no connectionString");
    if (rc == MCDC_OK) rc = mcdc_changes_open(&r->changes, r->opts, NULL, err);
    if (rc) return rc;
    char id[MCDC_TOKEN_HASH_TEXT_SIZE];
    mcdc_token_schema_id(id, mcdc_changes_schema(r->changes));
    if (strcmp(id, r->token.schema_id) != 0)
        return mcdc_error_set(err, MCDC_E_SCHEMA,
                              "mcdc_snapshot_read: the output schema of capture instance '%s' "
                              "is not the one the snapshot was planned with (its captured "
                              "columns changed, or the options columns/includeCommandId differ "
                              "from the planner's): plan again",
                              r->token.capture_instance);
    if (!mcdc_lsn_is_zero(&r->lsn))
        rc = mcdc_changes_commit_time(r->changes, &r->lsn, &r->commit_us, &r->has_ts, err);
    return rc;
}

int mcdc_snapshot_read(struct ArrowArrayStream *out, const mcdc_opts *opts, const char *token,
                       const char *lsn, mcdc_error *err) {
    if (out == NULL || opts == NULL || token == NULL || lsn == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_snapshot_read: %s is NULL",
                              out == NULL    ? "out"
                              : opts == NULL ? "opts"
                              : token == NULL ? "token"
                                              : "lsn (pass mcdc_snapshot_plan_lsn's)");
    memset(out, 0, sizeof *out);
    chunk_read *r = mcdc_calloc(1, sizeof *r);
    if (r == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory opening a chunk");
    int rc = open_read(r, opts, token, lsn, err);
    if (rc) {
        chunk_read_free(r);
        return rc;
    }
    mcdc_batch_stream_cfg cfg = {mcdc_changes_schema(r->changes), produce, r, chunk_read_free,
                                 MCDC_ARROW_STREAM_QUEUE_BATCHES};
    return mcdc_batch_stream_start(out, &cfg, err);
}
