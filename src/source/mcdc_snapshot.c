/*
 * mcdc_snapshot.c - the tracked table's current rows, for snapshots (see
 * mcdc_changes.h). Reads run on connections of their own, as change reads
 * do; the control connection answers the positions and the key extent.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_changes_int.h"

/* Key arithmetic: hi - lo + 1 of two int64 keys needs 65 bits. */
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

const char *mcdc_changes_source_schema(const mcdc_changes *c) { return c->source_schema; }
const char *mcdc_changes_source_table(const mcdc_changes *c) { return c->source_table; }

static int is_instance(mcdc_changes *c, const char *name, bool prefix, bool *yes, mcdc_error *err) {
    mcdc_capture_instance *v = NULL;
    int n = 0;
    *yes = false;
    int rc = mcdc_cdc_capture_instances(&v, &n, c->client, c->source_schema, c->source_table, err);
    size_t len = strlen(name);
    for (int i = 0; rc == MCDC_OK && i < n && !*yes; i++)
        *yes = prefix ? mcdc_str_nieq(v[i].name, name, len) : mcdc_str_ieq(v[i].name, name);
    mcdc_capture_instances_free(v, n);
    return rc;
}

int mcdc_changes_is_table_instance(mcdc_changes *c, const char *name, bool prefix, bool *yes,
                                   mcdc_error *err) {
    int rc;
    if (!prefix && mcdc_str_ieq(name, c->ci)) {
        *yes = true;
        return MCDC_OK;
    }
    CONTROL_CALL(rc, c, err, is_instance(c, name, prefix, yes, err));
    return rc;
}

static int64_t lock_timeout(const mcdc_changes *c) {
    return mcdc_opt_lock_timeout_ms(c->opts);
}

static int snapshot_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err) {
    const char *given = mcdc_opt_snapshot_lsn(c->opts);
    if (given) return mcdc_lsn_parse_cstr(out, given, err);
    int rc = mcdc_cdc_max_lsn(out, NULL, c->client, err);
    /* Capture has not reached the instance yet: nothing it captures is
     * older than its first LSN, so the snapshot stands just before it. */
    if (rc == MCDC_OK && !mcdc_lsn_is_zero(&c->instance_start) &&
        mcdc_lsn_cmp(out, &c->instance_start) < 0)
        rc = mcdc_cdc_decrement_lsn(out, c->client, &c->instance_start, err);
    return rc;
}

/* How long a snapshot waits for capture to process a fresh enable. */
#define SNAPSHOT_WAIT_FOR_CAPTURE_MS 60000

int mcdc_changes_snapshot_lsn(mcdc_changes *c, mcdc_lsn *out, int64_t *commit_us, bool *has_ts,
                              mcdc_error *err) {
    int rc;
    *has_ts = false;
    *commit_us = 0;
    CONTROL_CALL(rc, c, err, snapshot_lsn(c, out, err));
    /* Nothing captured yet and the instance's start not established: a
     * snapshot stamped zero would look purged to the stream after it, so
     * wait for capture to process the enable, as a stream's earliest does. */
    int64_t deadline = mcdc_monotonic_us() + SNAPSHOT_WAIT_FOR_CAPTURE_MS * 1000;
    while (rc == MCDC_OK && mcdc_lsn_is_zero(out) && mcdc_lsn_is_zero(&c->instance_start)) {
        if (mcdc_monotonic_us() > deadline)
            return mcdc_error_set(err, MCDC_E_TRANSIENT,
                                  "capture instance %s: capture has not processed its enable in "
                                  "%d s (no start_lsn yet), so no snapshot LSN can be recorded: "
                                  "is the CDC capture job running?",
                                  c->ci, SNAPSHOT_WAIT_FOR_CAPTURE_MS / 1000);
        mcdc_sleep_ms(100);
        char want[MCDC_IDENT_BYTES_MAX + 1];
        snprintf(want, sizeof want, "%s", c->ci);
        CONTROL_CALL(rc, c, err, mcdc_changes__resolve_instance(c, want, err));
        if (rc == MCDC_OK) CONTROL_CALL(rc, c, err, snapshot_lsn(c, out, err));
    }
    if (rc == MCDC_OK && !mcdc_lsn_is_zero(out))
        rc = mcdc_changes_commit_time(c, out, commit_us, has_ts, err);
    return rc;
}

/* out = name when it is a captured column of an integer type (ranges of it
 * can be cut by arithmetic). */
static void integer_key(const mcdc_changes *c, const char *name, char *out, size_t cap) {
    int32_t at = mcdc_schema_find(c->captured, name);
    if (at < 0) return;
    mcdc_type_id t = c->captured->fields[at].type;
    if (t == MCDC_TYPE_INT16 || t == MCDC_TYPE_INT32 || t == MCDC_TYPE_INT64)
        snprintf(out, cap, "%s", c->captured->fields[at].name);
}

/* The key snapshots are cut on: snapshotKeys (a JSON list of the stream's
 * column names), else the capture instance's unique index. Only a single
 * integer key can be cut into ranges yet; anything else reads as one range
 * (*out ""). */
static int cut_key(const mcdc_changes *c, char *out, size_t cap, mcdc_error *err) {
    out[0] = 0;
    const char *given = mcdc_opt_snapshot_keys(c->opts);
    if (given == NULL) {
        if (c->n_keys == 1) integer_key(c, c->keys[0], out, cap);
        return MCDC_OK;
    }
    json_error_t je;
    json_t *j = json_loads(given, 0, &je);
    int rc = MCDC_OK;
    if (!json_is_array(j) || json_array_size(j) == 0)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "snapshotKeys must be a JSON list of column names, such as "
                            "[\"order_id\"], not %s",
                            given);
    for (size_t i = 0; rc == MCDC_OK && i < json_array_size(j); i++) {
        const char *name = json_string_value(json_array_get(j, i));
        if (name == NULL || mcdc_schema_find(c->captured, name) < 0)
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "snapshotKeys: entry %zu (%s) is not a column the stream reads",
                                i, name ? name : "not a string");
    }
    if (rc == MCDC_OK && json_array_size(j) == 1)
        integer_key(c, json_string_value(json_array_get(j, 0)), out, cap);
    json_decref(j);
    return rc;
}

int mcdc_changes_snapshot_plan(mcdc_changes *c, int n_max, mcdc_snapshot_range **out, int *n_out,
                               mcdc_error *err) {
    MCDC_ASSERT(n_max >= 1);
    *out = NULL;
    *n_out = 0;
    char key[MCDC_IDENT_BYTES_MAX + 1];
    int rc = cut_key(c, key, sizeof key, err);
    int64_t lo = 0, hi = 0;
    bool empty = true;
    if (rc == MCDC_OK && key[0] && n_max > 1)
        CONTROL_CALL(rc, c, err, mcdc_cdc_key_extent(&lo, &hi, &empty, c->client, c->source_schema,
                                                     c->source_table, key, lock_timeout(c), err));
    if (rc) return rc;
    /* n = min(n_max, hi - lo + 1) uniform ranges; bound i = lo + span*i/n. */
    u128 span = empty ? 1 : (u128)((i128)hi - lo + 1);
    int n = key[0] && !empty && n_max > 1 ? (span < (unsigned)n_max ? (int)span : n_max) : 1;
    mcdc_snapshot_range *v = mcdc_calloc((size_t)n, sizeof *v);
    if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        v[i].keyed = n > 1;
        if (n == 1) continue;
        v[i].with_nulls = i == 0;
        v[i].has_lo = i > 0;
        v[i].has_hi = i < n - 1;
        v[i].lo = (int64_t)((i128)lo + (i128)(span * (unsigned)i / (unsigned)n));
        v[i].hi = (int64_t)((i128)lo + (i128)(span * (unsigned)(i + 1) / (unsigned)n));
    }
    *out = v;
    *n_out = n;
    return MCDC_OK;
}

/* Each captured column's name in the table now, by column_id (a dropped one
 * reads NULL, a renamed one under its captured name). */
static int source_names(char ***names, mcdc_cdc_client *cl, const mcdc_changes *c,
                        mcdc_error *err) {
    mcdc_captured_column *cols = NULL;
    int n = 0;
    int rc = mcdc_cdc_captured_columns(&cols, &n, cl, c->ci, err);
    int32_t want = c->captured->n_fields;
    int *ids = rc ? NULL : mcdc_calloc((size_t)(want ? want : 1), sizeof *ids);
    if (rc == MCDC_OK && ids == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int32_t i = 0; rc == MCDC_OK && i < want; i++) {
        ids[i] = -1;
        for (int k = 0; k < n; k++)
            if (mcdc_str_ieq(cols[k].name, c->captured->fields[i].name)) ids[i] = cols[k].column_id;
    }
    if (rc == MCDC_OK)
        rc = mcdc_cdc_column_names_by_id(names, cl, c->source_schema, c->source_table, ids, want,
                                         err);
    mcdc_free(ids);
    mcdc_captured_columns_free(cols, n);
    return rc;
}

int mcdc_changes_snapshot_read(mcdc_changes *c, const mcdc_snapshot_range *r, const mcdc_lsn *lsn,
                               bool has_ts, int64_t commit_us, mcdc_batch_fn fn, void *ctx,
                               mcdc_reader_metrics *m, mcdc_error *err) {
    mcdc_reader_metrics scratch;
    if (m == NULL) m = &scratch;
    memset(m, 0, sizeof *m);
    int64_t t0 = mcdc_monotonic_us();
    m->attempts = 1;
    mcdc_connstr_connector conn = c->connector;
    mcdc_conn *db = NULL;
    mcdc_cdc_client *cl = NULL;
    int rc = mcdc_connect_connstr(&conn, &db, err);
    if (rc == MCDC_OK) rc = mcdc_cdc_client_create(&cl, db, err);
    char **names = NULL;
    if (rc == MCDC_OK) rc = source_names(&names, cl, c, err);
    char lsn_text[MCDC_LSN_TEXT_LEN + 1], ts[40] = "", key[MCDC_IDENT_BYTES_MAX + 1] = "";
    mcdc_lsn_format(lsn, lsn_text);
    if (has_ts) mcdc_format_ts_us(commit_us, 6, ts);
    if (rc == MCDC_OK && r->keyed) rc = cut_key(c, key, sizeof key, err);
    mcdc_snapshot_query q = {
        .source_schema = c->source_schema,
        .source_table = c->source_table,
        .cols = c->captured->fields,
        .n_cols = c->captured->n_fields,
        .source_names = (const char *const *)names,
        .include_command_id = c->ropt.include_command_id,
        .lsn = lsn_text,
        .commit_ts = has_ts ? ts : NULL,
        .key = r->keyed && key[0] ? key : NULL,
        .has_lo = r->has_lo,
        .has_hi = r->has_hi,
        .lo = r->lo,
        .hi = r->hi,
        .with_nulls = r->with_nulls,
        .snapshot_isolation = mcdc_opt_snapshot_isolation(c->opts),
        .lock_timeout_ms = lock_timeout(c),
    };
    mcdc_buf sql = {0};
    if (rc == MCDC_OK) rc = mcdc_cdc_snapshot_sql(&sql, &q, err);
    mcdc_result *res = NULL;
    if (rc == MCDC_OK) rc = mcdc_conn_exec(&res, db, (const char *)sql.data, NULL, 0, err);
    if (rc && err && err->server_number == 3952)
        mcdc_error_wrap(err, "isolationLevel=snapshot needs ALTER DATABASE ... SET "
                             "ALLOW_SNAPSHOT_ISOLATION ON on the source database (or "
                             "isolationLevel=readCommitted)");
    int64_t rows_max = c->ropt.batch_rows > 0 ? c->ropt.batch_rows : 10000;
    while (rc == MCDC_OK) {
        mcdc_batch *b = NULL;
        int64_t n = 0;
        rc = mcdc_batch_create(&b, c->schema, rows_max, err);
        if (rc == MCDC_OK) rc = mcdc_result_fetch(res, b, 1, rows_max, c->ropt.batch_bytes_max, &n, err);
        if (rc == MCDC_OK && n > 0) rc = mcdc_reader_fill_capture_instance(b, c->ci, n, err);
        if (rc == MCDC_OK && n > 0) rc = mcdc_batch_seal(b, err);
        if (rc != MCDC_OK || n == 0) {
            mcdc_batch_free(b);
            break;
        }
        m->rows += n;
        m->bytes += mcdc_batch_bytes(b);
        rc = fn(ctx, b, err); /* fn owns b */
    }
    mcdc_result_free(res);
    mcdc_buf_free(&sql);
    for (int32_t i = 0; names && i < c->captured->n_fields; i++) mcdc_free(names[i]);
    mcdc_free(names);
    mcdc_cdc_client_free(cl);
    mcdc_conn_close(db);
    m->seconds = (double)(mcdc_monotonic_us() - t0) / 1e6;
    if (rc && rc != MCDC_E_CANCELLED)
        mcdc_error_wrap(err, "reading the rows of %s.%s for a snapshot", c->source_schema,
                        c->source_table);
    return rc;
}
