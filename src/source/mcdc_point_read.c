/*
 * mcdc_point_read.c - the current rows of given keys of the tracked table
 * (repair's keyed point reads, docs/repair.md), in the snapshot reader's
 * output schema and stamping.
 *
 * One query per MCDC_POINT_READ_KEYS keys: a single key column as
 * `k IN (v, ...)`, several as `(a = v AND b = w) OR ...` (a NULL value as
 * IS NULL: a unique index admits one NULL key). Both are seeks on an index
 * led by the key. Text values are parameters (at most 2,000 a query, under
 * SQL Server's 2,100), integers inlined as digits. A datetime2(7) or
 * datetimeoffset(7) key value (the lake holds microseconds) selects the
 * microsecond [v, v + 1 us) rather than = v. READ COMMITTED, never NOLOCK.
 */
#include <string.h>

#include "mcdc_changes_int.h"
#include "mcdc_keyrange.h"

/* A value of key k: digits, or a CAST/CONVERT of a parameter (as the range
 * predicate binds its bounds). */
static int point_value(mcdc_buf *o, mcdc_sql_params *pa, const mcdc_key_col *k, const json_t *v,
                       mcdc_error *err) {
    if (k->kind == MCDC_KEY_INT) return mcdc_buf_printf(o, err, "%lld", (long long)json_integer_value(v));
    const char *t = json_string_value(v);
    size_t tn = json_string_length(v);
    const char *dot = k->millis ? memchr(t, '.', tn) : NULL;
    if (dot && (size_t)(t + tn - dot) > 4) tn = (size_t)(dot - t) + 4; /* CAST to datetime takes 3 digits */
    int rc = mcdc_sql_params_add(pa, t, tn, err);
    if (rc) return rc;
    if (k->kind == MCDC_KEY_HEX) return mcdc_buf_printf(o, err, "CONVERT(%s, ?, 1)", k->type);
    if (k->collation[0]) return mcdc_buf_printf(o, err, "CAST(? COLLATE %s AS %s)", k->collation, k->type);
    return mcdc_buf_printf(o, err, "CAST(? AS %s)", k->type);
}

/* A key value of a column the lake holds cut to microseconds (datetime2(7),
 * datetimeoffset(7)): the source rows that read back as it are those in
 * [v, v + 1 us), as a chunk's bounds take them (reference 3.7's
 * microsecond rule); `= v` would miss a row with digits below the
 * microsecond, and repair would then delete a row the source has. */
static int point_range(mcdc_buf *o, mcdc_sql_params *pa, const mcdc_key_col *k, const json_t *v,
                       mcdc_error *err) {
    const char *t = json_string_value(v);
    int64_t us = 0;
    int rc = t ? mcdc_parse_ts_us(t, json_string_length(v), &us, err)
               : mcdc_error_set(err, MCDC_E_INVALID, "key column %s: a date and time is text", k->name);
    if (rc) return rc;
    if (us == INT64_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "key column %s: %s is past the last microsecond",
                              k->name, t);
    char next[32];
    mcdc_format_ts_us(us + 1, 6, next);
    json_t *hi = json_string(next);
    if (hi == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    rc = mcdc_buf_append_byte(o, '(', err);
    if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(o, k->name, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(o, " >= ", err);
    if (rc == MCDC_OK) rc = point_value(o, pa, k, v, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(o, " AND ", err);
    if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(o, k->name, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(o, " < ", err);
    if (rc == MCDC_OK) rc = point_value(o, pa, k, hi, err);
    json_decref(hi);
    return rc ? rc : mcdc_buf_append_byte(o, ')', err);
}

/* One key of several columns: (a = v AND b = w ...). */
static int point_and(mcdc_buf *o, mcdc_sql_params *pa, const mcdc_snap_keys *k, const json_t *point,
                     mcdc_error *err) {
    int rc = mcdc_buf_append_byte(o, '(', err);
    for (int c = 0; rc == MCDC_OK && c < k->n; c++) {
        const json_t *v = mcdc_key_bound_part(point, k->n, c);
        bool null = v == NULL || json_is_null(v);
        if (c) rc = mcdc_buf_append_str(o, " AND ", err);
        if (rc == MCDC_OK && !null && k->cols[c].truncated) {
            rc = point_range(o, pa, &k->cols[c], v, err);
            continue;
        }
        if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(o, k->cols[c].name, err);
        if (rc == MCDC_OK && null) {
            rc = mcdc_buf_append_str(o, " IS NULL", err);
        } else if (rc == MCDC_OK) {
            rc = mcdc_buf_append_str(o, " = ", err);
            if (rc == MCDC_OK) rc = point_value(o, pa, &k->cols[c], v, err);
        }
    }
    return rc ? rc : mcdc_buf_append_byte(o, ')', err);
}

/* points[lo..hi) OR'ed as a balanced tree: a chain of a thousand ORs nests
 * a thousand deep, past what a query parser takes (SQLite's 1000, SQL
 * Server's stack); halves nest ten deep. */
static int point_or(mcdc_buf *o, mcdc_sql_params *pa, const mcdc_snap_keys *k,
                    const json_t *const *points, size_t lo, size_t hi, mcdc_error *err) {
    if (hi - lo == 1) return point_and(o, pa, k, points[lo], err);
    size_t mid = lo + (hi - lo) / 2;
    int rc = mcdc_buf_append_byte(o, '(', err);
    if (rc == MCDC_OK) rc = point_or(o, pa, k, points, lo, mid, err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(o, " OR ", err);
    if (rc == MCDC_OK) rc = point_or(o, pa, k, points, mid, hi, err);
    return rc ? rc : mcdc_buf_append_byte(o, ')', err);
}

/* " WHERE ..." selecting the keys points[0..n). */
static int point_where(mcdc_buf *o, mcdc_sql_params *pa, const mcdc_snap_keys *k,
                       const json_t *const *points, size_t n, mcdc_error *err) {
    int rc = mcdc_buf_append_str(o, " WHERE ", err);
    bool in_list = k->n == 1 && !k->cols[0].truncated; /* a range per key instead */
    for (size_t i = 0; rc == MCDC_OK && in_list && i < n; i++)
        in_list = !json_is_null(points[i]);
    if (in_list) {
        rc = mcdc_sql_quote_ident(o, k->cols[0].name, err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(o, " IN (", err);
        for (size_t i = 0; rc == MCDC_OK && i < n; i++) {
            if (i) rc = mcdc_buf_append_str(o, ", ", err);
            if (rc == MCDC_OK) rc = point_value(o, pa, &k->cols[0], points[i], err);
        }
        return rc ? rc : mcdc_buf_append_byte(o, ')', err);
    }
    return point_or(o, pa, k, points, 0, n, err);
}

int mcdc_changes_point_read(mcdc_changes *c, const json_t *key_names, const json_t *const *points,
                            size_t n, const mcdc_lsn *lsn, bool has_ts, int64_t commit_us,
                            mcdc_batch_fn fn, void *ctx, mcdc_error *err) {
    MCDC_ASSERT(c && key_names && (n == 0 || points) && lsn && fn);
    if (!json_is_array(key_names) || json_array_size(key_names) == 0)
        return mcdc_error_set(err, MCDC_E_INVALID, "a point read needs the key columns");
    mcdc_connstr_connector conn = c->connector;
    mcdc_conn *db = NULL;
    mcdc_cdc_client *cl = NULL;
    mcdc_snap_keys k = {0};
    char **names = NULL;
    int rc = mcdc_connect_connstr(&conn, &db, err);
    if (rc == MCDC_OK) rc = mcdc_cdc_client_create(&cl, db, err);
    if (rc == MCDC_OK) rc = mcdc_changes__snap_keys(&k, &names, c, cl, key_names, true, err);
    for (size_t i = 0; rc == MCDC_OK && i < n; i++)
        rc = mcdc_key_bound_check(points[i], k.cols, k.n, "key", err);
    char lsn_text[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(lsn, lsn_text);
    mcdc_snapshot_query q = mcdc_changes__snapshot_query(c, names, MCDC_ISO_READ_COMMITTED);
    int per_query = MCDC_POINT_READ_KEYS;
    int cast_cols = 0;
    for (int i = 0; rc == MCDC_OK && i < k.n; i++)
        cast_cols += k.cols[i].kind != MCDC_KEY_INT ? (k.cols[i].truncated ? 2 : 1) : 0;
    if (cast_cols > 0 && per_query > MCDC_POINT_READ_PARAMS / cast_cols)
        per_query = MCDC_POINT_READ_PARAMS / cast_cols;
    if (per_query < 1) per_query = 1;
    int64_t rows_max = c->ropt.batch_rows > 0 ? c->ropt.batch_rows : 10000;
    for (size_t at = 0; rc == MCDC_OK && at < n; at += (size_t)per_query) {
        size_t m = n - at < (size_t)per_query ? n - at : (size_t)per_query;
        mcdc_buf sql = {0};
        mcdc_sql_params params = {0};
        rc = mcdc_cdc_snapshot_sql(&sql, &params, &q, err); /* no keys: the whole table */
        if (rc == MCDC_OK) rc = point_where(&sql, &params, &k, points + at, m, err);
        if (rc == MCDC_OK) rc = mcdc_buf_cstr(&sql, err);
        mcdc_result *res = NULL;
        if (rc == MCDC_OK)
            rc = mcdc_conn_exec(&res, db, (const char *)sql.data, (const char *const *)params.v,
                                params.n, err);
        if (rc) mcdc_source_read_hint(err);
        while (rc == MCDC_OK) {
            mcdc_batch *b = NULL;
            int64_t got = 0;
            rc = mcdc_changes__snapshot_batch(&b, &got, c, res, rows_max, lsn_text, has_ts,
                                              commit_us, err);
            if (rc != MCDC_OK || b == NULL) break;
            rc = fn(ctx, b, err); /* fn owns b */
        }
        mcdc_result_free(res);
        mcdc_buf_free(&sql);
        mcdc_sql_params_free(&params);
    }
    mcdc_changes__names_free(c, names);
    mcdc_changes__snap_keys_free(&k);
    mcdc_cdc_client_free(cl);
    mcdc_conn_close(db);
    if (rc && rc != MCDC_E_CANCELLED)
        mcdc_error_wrap(err, "reading the rows of %zu keys of %s.%s", n, c->source_schema, c->source_table);
    return rc;
}
