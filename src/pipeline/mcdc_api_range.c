/*
 * mcdc_api_range.c - change ranges as Arrow streams (include/mssqlcdc.h,
 * "Change ranges as Arrow streams"): the planner and the reader of the
 * stream's change feed (mcdc_changes.h) behind tokens, so that ranges are
 * planned in one process and read in others.
 *
 * Reading runs mcdc_changes_read, which pushes batches, on the thread of an
 * Arrow stream (mcdc_batch_stream.h), which the consumer pulls.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mcdc_batch_stream.h"
#include "mcdc_changes.h"
#include "mcdc_options.h"
#include "mcdc_range_plan.h"
#include "mcdc_range_token.h"

struct mcdc_range_plan {
    char **tokens; /* n, owned */
    size_t n;
    mcdc_schema *schema; /* the output schema, one reference */
    char *events;        /* JSON array of the batch's events, owned; NULL: none */
};

void mcdc_range_plan_free(mcdc_range_plan *p) {
    if (p == NULL) return;
    for (size_t i = 0; i < p->n; i++) mcdc_free(p->tokens[i]);
    mcdc_free(p->tokens);
    mcdc_schema_unref(p->schema);
    mcdc_free(p->events);
    mcdc_free(p);
}

size_t mcdc_range_plan_count(const mcdc_range_plan *p) { return p ? p->n : 0; }

const char *mcdc_range_plan_token(const mcdc_range_plan *p, size_t i) {
    return p && i < p->n ? p->tokens[i] : NULL;
}

const char *mcdc_range_plan_events_json(const mcdc_range_plan *p) {
    if (p == NULL) return NULL;
    return p->events ? p->events : "[]";
}

int mcdc_range_plan_schema(struct ArrowSchema *out, const mcdc_range_plan *p, mcdc_error *err) {
    if (out == NULL || p == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_range_plan_schema: %s is NULL",
                              out == NULL ? "out" : "the plan");
    return mcdc_schema_export(p->schema, out, err);
}

/* ranges_max as the caller gave it, or numPartitions. */
static int ranges_wanted(int *out, const mcdc_opts *opts, int ranges_max, mcdc_error *err) {
    if (ranges_max < 0 || ranges_max > MCDC_PARTITIONS_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_range_plan_create: ranges_max is %d; use 1 to %d, or 0 for "
                              "the numPartitions option",
                              ranges_max, MCDC_PARTITIONS_MAX);
    *out = ranges_max ? ranges_max : mcdc_opt_num_partitions(opts);
    return MCDC_OK;
}

static int encode_plan(mcdc_range_plan *p, bool follow, const char *const *cis,
                       const mcdc_lsn_range *r, int n, mcdc_error *err) {
    MCDC_ASSERT(n >= 0 && n <= MCDC_PARTITIONS_MAX);
    p->tokens = n ? mcdc_calloc((size_t)n, sizeof *p->tokens) : NULL;
    if (n && p->tokens == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
    mcdc_range_token t;
    memset(&t, 0, sizeof t);
    mcdc_range_schema_id(t.schema_id, p->schema);
    t.count = n;
    t.follow = follow;
    for (int i = 0; i < n; i++) {
        snprintf(t.capture_instance, sizeof t.capture_instance, "%s", cis[i]);
        t.from = r[i].from;
        t.to = r[i].to;
        t.rows_estimate = r[i].rows_estimate > 0 ? r[i].rows_estimate : 0;
        t.index = i;
        int rc = mcdc_range_token_encode(&p->tokens[i], &t, err);
        if (rc) return rc;
        p->n = (size_t)i + 1;
    }
    return MCDC_OK;
}

int mcdc_range_plan_build(mcdc_range_plan **out, mcdc_schema *schema, bool follow,
                          const char *const *cis, const mcdc_lsn_range *r, int n, char *events,
                          mcdc_error *err) {
    MCDC_ASSERT(out != NULL && schema != NULL && (n == 0 || (cis != NULL && r != NULL)));
    *out = NULL;
    mcdc_range_plan *p = mcdc_calloc(1, sizeof *p);
    if (p == NULL) {
        mcdc_free(events);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
    }
    p->schema = mcdc_schema_ref(schema);
    p->events = events;
    int rc = encode_plan(p, follow, cis, r, n, err);
    if (rc) {
        mcdc_range_plan_free(p);
        return rc;
    }
    *out = p;
    return MCDC_OK;
}

int mcdc_range_plan_create(mcdc_range_plan **out, const mcdc_opts *opts,
                           const mcdc_lsn_value *from, const mcdc_lsn_value *to, int ranges_max,
                           mcdc_error *err) {
    if (out == NULL || opts == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_range_plan_create: %s is NULL",
                              out == NULL ? "out" : "opts");
    *out = NULL;
    int n_max = 0;
    int rc = ranges_wanted(&n_max, opts, ranges_max, err);
    if (rc == MCDC_OK) rc = mcdc_opts_check_required(opts, err);
    if (rc) return rc;
    mcdc_changes *c = NULL;
    rc = mcdc_changes_open(&c, opts, NULL, err);
    if (rc) return rc;
    mcdc_lsn lo, hi;
    if (from) lo = mcdc_lsn_from_bytes(from->bytes);
    else rc = mcdc_changes_min_lsn(c, &lo, err);
    if (rc == MCDC_OK && to) hi = mcdc_lsn_from_bytes(to->bytes);
    else if (rc == MCDC_OK) rc = mcdc_changes_max_lsn(c, &hi, err);
    mcdc_lsn_range *r = NULL;
    int n = 0;
    if (rc == MCDC_OK) rc = mcdc_changes_plan(c, &lo, &hi, n_max, &r, &n, err);
    const char *ci = mcdc_changes_capture_instance(c);
    const char **cis = n ? mcdc_calloc((size_t)n, sizeof *cis) : NULL;
    if (rc == MCDC_OK && n && cis == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning");
    for (int i = 0; rc == MCDC_OK && i < n; i++) cis[i] = ci;
    if (rc == MCDC_OK) {
        MCDC_ASSERT(n >= 0 && n <= n_max);
        rc = mcdc_range_plan_build(out, mcdc_changes_schema(c), false, cis, r, n, NULL, err);
    }
    mcdc_free(cis);
    mcdc_free(r);
    mcdc_changes_close(c);
    return rc;
}

int mcdc_range_token_parse(mcdc_range_info *out, const char *token, mcdc_error *err) {
    if (out == NULL || token == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_range_token_parse: %s is NULL",
                              out == NULL ? "out" : "token");
    if (out->version != MCDC_RANGE_INFO_VERSION)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_range_token_parse: out->version is %d; initialise the "
                              "struct with MCDC_RANGE_INFO_INIT (version %d)",
                              out->version, MCDC_RANGE_INFO_VERSION);
    mcdc_range_token t;
    int rc = mcdc_range_token_decode(&t, token, strlen(token), err);
    if (rc) return rc;
    _Static_assert(sizeof out->capture_instance == sizeof t.capture_instance, "same size");
    memcpy(out->capture_instance, t.capture_instance, sizeof t.capture_instance);
    memcpy(out->from_lsn.bytes, t.from.b, MCDC_LSN_BYTES);
    memcpy(out->to_lsn.bytes, t.to.b, MCDC_LSN_BYTES);
    out->rows_estimate = t.rows_estimate;
    out->index = t.index;
    out->count = t.count;
    return MCDC_OK;
}

/* ---- reading ------------------------------------------------------------------- */
typedef struct range_read {
    mcdc_changes *changes;
    mcdc_opts *opts; /* the changes handle borrows some of its strings (backend) */
    mcdc_lsn_range range;
} range_read;

static int produce(void *ctx, mcdc_batch_stream_sink_fn sink, void *sink_ctx, mcdc_error *err) {
    range_read *r = ctx;
    return mcdc_changes_read(r->changes, &r->range, sink, sink_ctx, NULL, err);
}

static void range_read_free(void *ctx) {
    range_read *r = ctx;
    mcdc_changes_close(r->changes);
    mcdc_opts_free(r->opts);
    mcdc_free(r);
}

static bool planned_schema(mcdc_changes *c, const mcdc_range_token *t) {
    char id[MCDC_RANGE_HASH_TEXT_SIZE];
    mcdc_range_schema_id(id, mcdc_changes_schema(c));
    return strcmp(id, t->schema_id) == 0;
}

/* The change feed that reads the token's range in the schema it was
 * planned with. A batch's range across the table's instances reads in the
 * union of their columns (its own instance's taken, the others' NULL); when
 * the planner's handle was opened before a newer instance appeared, that
 * union was its instance's columns alone, which it reads as one. */
static int open_for_token(mcdc_changes **out, const mcdc_opts *o, const mcdc_range_token *t,
                          mcdc_error *err) {
    mcdc_changes_settings follow = {.follow = true};
    int rc = mcdc_changes_open(out, o, t->follow ? &follow : NULL, err);
    if (rc || planned_schema(*out, t)) return rc;
    mcdc_changes_close(*out);
    *out = NULL;
    if (t->follow) {
        rc = mcdc_changes_open(out, o, NULL, err);
        if (rc || planned_schema(*out, t)) return rc;
        mcdc_changes_close(*out);
        *out = NULL;
    }
    return mcdc_error_set(err, MCDC_E_SCHEMA,
                          "mcdc_range_read: the output schema of capture instance '%s' is not "
                          "the one the range was planned with (its captured columns changed, or "
                          "the options columns/includeCommandId differ from the planner's): "
                          "plan again",
                          t->capture_instance);
}

int mcdc_range_read(struct ArrowArrayStream *out, const mcdc_opts *opts, const char *token,
                    mcdc_error *err) {
    if (out == NULL || opts == NULL || token == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_range_read: %s is NULL",
                              out == NULL ? "out" : opts == NULL ? "opts" : "token");
    memset(out, 0, sizeof *out);
    mcdc_range_token t;
    int rc = mcdc_range_token_decode(&t, token, strlen(token), err);
    mcdc_opts *o = NULL;
    /* A batch's range may read another instance of the table than the
     * options name (the stream's configured one): checked once connected. */
    const char *given = mcdc_opt_capture_instance(opts);
    bool other = rc == MCDC_OK && t.follow && given && !mcdc_str_ieq(given, t.capture_instance);
    if (rc == MCDC_OK)
        rc = mcdc_token_options(&o, opts, other ? given : t.capture_instance, "mcdc_range_read", err);
    if (rc == MCDC_OK && other) rc = mcdc_opts_set(o, "captureInstance", t.capture_instance, NULL, err);
    if (rc == MCDC_OK && mcdc_opt_connection_string(o) == NULL)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "mcdc_range_read: the options have no connectionString");
    mcdc_changes *c = NULL;
    if (rc == MCDC_OK) rc = open_for_token(&c, o, &t, err);
    if (rc == MCDC_OK && other && !mcdc_changes_is_table_name(c, given)) {
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "mcdc_range_read: the token reads capture instance '%s' but the "
                            "options name '%s', no capture instance of its table; leave "
                            "captureInstance out or name one of the table's",
                            t.capture_instance, given);
        mcdc_changes_close(c);
    }
    if (rc) {
        mcdc_opts_free(o);
        return rc;
    }
    range_read *r = mcdc_calloc(1, sizeof *r);
    if (r == NULL) {
        mcdc_changes_close(c);
        mcdc_opts_free(o);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory opening a range");
    }
    r->changes = c;
    r->opts = o;
    /* last = false: measuring the stream's position is the stream's job,
     * not a range reader's (it costs four more queries). */
    r->range = (mcdc_lsn_range){t.from, t.to, t.rows_estimate, false, 0};
    mcdc_batch_stream_cfg cfg = {mcdc_changes_schema(c), produce, r, range_read_free,
                                 MCDC_ARROW_STREAM_QUEUE_BATCHES};
    return mcdc_batch_stream_start(out, &cfg, err);
}
