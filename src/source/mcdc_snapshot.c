/*
 * mcdc_snapshot.c - the tracked table's current rows, for snapshots (see
 * mcdc_changes.h): the snapshot's LSN, the key it is cut on, a whole
 * snapshot's parallel ranges and the read of one range. Reads run on
 * connections of their own, as change reads do; the control connection
 * answers the positions and plans. Chunk plans: mcdc_snapshot_plan.c.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_changes_int.h"

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

static int snapshot_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err) {
    int rc = mcdc_cdc_max_lsn(out, NULL, c->client, err);
    /* Capture has not reached the instance yet: nothing it captures is
     * older than its first LSN, so the snapshot stands just before it. */
    MCDC_ASSERT(!mcdc_lsn_is_zero(&c->instance_start));
    if (rc == MCDC_OK && mcdc_lsn_cmp(out, &c->instance_start) < 0)
        rc = mcdc_cdc_decrement_lsn(out, c->client, &c->instance_start, err);
    return rc;
}

/* How often a wait for capture says so. */
#define CAPTURE_WAIT_NOTE_MS 5000
#define CAPTURE_WAIT_POLL_MS 250

int mcdc_changes_wait_started(mcdc_changes *c, mcdc_error *err) {
    if (!mcdc_lsn_is_zero(&c->instance_start)) return MCDC_OK;
    int64_t limit_ms = (int64_t)mcdc_opt_capture_wait_s(c->opts) * 1000;
    int64_t t0 = mcdc_monotonic_us(), note_ms = 0;
    char want[MCDC_IDENT_BYTES_MAX + 1];
    snprintf(want, sizeof want, "%s", c->ci);
    for (;;) {
        int rc;
        CONTROL_CALL(rc, c, err, mcdc_changes__resolve_instance(c, want, err));
        if (rc) return rc;
        int64_t waited_ms = (mcdc_monotonic_us() - t0) / 1000;
        if (!mcdc_lsn_is_zero(&c->instance_start)) {
            if (note_ms > 0)
                mcdc_log(MCDC_LOG_WARN, "capture instance %s: capture recorded its start LSN "
                                        "after %.1f s; going on",
                         c->ci, (double)waited_ms / 1000);
            return MCDC_OK;
        }
        if (waited_ms >= limit_ms)
            return mcdc_error_set(err, MCDC_E_NOT_READY,
                                  "capture instance %s: capture has not processed its enable "
                                  "within %lld s (cdc.change_tables.start_lsn is still NULL, "
                                  "sys.fn_cdc_get_min_lsn 0x00...), so no snapshot can be "
                                  "stamped where the instance begins; nothing was written. Check "
                                  "that the database's CDC capture job runs (SQL Server Agent, "
                                  "EXEC sys.sp_cdc_help_jobs), then run again, or wait longer "
                                  "with captureWaitSeconds",
                                  c->ci, (long long)(limit_ms / 1000));
        if (waited_ms >= note_ms) {
            mcdc_log(MCDC_LOG_WARN, "capture instance %s: waiting for the CDC capture job to "
                                    "process its enable (cdc.change_tables.start_lsn is NULL "
                                    "until then): %lld s so far, at most %lld "
                                    "(captureWaitSeconds)",
                     c->ci, (long long)(waited_ms / 1000), (long long)(limit_ms / 1000));
            note_ms = waited_ms + CAPTURE_WAIT_NOTE_MS;
        }
        int64_t left_ms = limit_ms - waited_ms;
        mcdc_sleep_ms(left_ms < CAPTURE_WAIT_POLL_MS ? left_ms : CAPTURE_WAIT_POLL_MS);
    }
}

int mcdc_changes_check_start(mcdc_changes *c, const mcdc_lsn *l, const char *what,
                             bool loss_ok, mcdc_error *err) {
    mcdc_lsn max, min, next;
    char t[MCDC_LSN_TEXT_LEN + 1], given[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(l, given);
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_max_lsn(&max, NULL, c->client, err));
    if (rc == MCDC_OK && mcdc_lsn_cmp(l, &max) > 0) {
        mcdc_lsn_format(&max, t);
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s %s is beyond the server's max_lsn %s: no change of this "
                              "database was captured there yet (an LSN of another server or "
                              "database?), and every change up to it would be taken as read. "
                              "Nothing was written. Give an LSN this server has reached, or "
                              "leave %s out",
                              what, given, t, what);
    }
    if (rc == MCDC_OK) rc = mcdc_changes_min_lsn(c, &min, err);
    if (rc || loss_ok || mcdc_lsn_is_zero(&min) || mcdc_lsn_increment(&next, l, NULL) ||
        mcdc_lsn_cmp(&next, &min) >= 0)
        return rc;
    mcdc_lsn_format(&min, t);
    return mcdc_error_set(err, MCDC_E_DATALOSS,
                          "%s %s is before the changes capture instance %s still holds (its "
                          "min_lsn is %s): the changes in between are not there to read, and no "
                          "stream can continue from it. Nothing was written. Give %s at or after "
                          "%s, or leave it out",
                          what, given, c->ci, t, what, t);
}

int mcdc_changes_snapshot_lsn(mcdc_changes *c, mcdc_lsn *out, int64_t *commit_us, bool *has_ts,
                              mcdc_error *err) {
    int rc = MCDC_OK;
    *has_ts = false;
    *commit_us = 0;
    const char *given = mcdc_opt_snapshot_lsn(c->opts);
    if (given) {
        rc = mcdc_lsn_parse_cstr(out, given, err);
        if (rc == MCDC_OK) rc = mcdc_changes_check_start(c, out, "snapshotLsn", false, err);
    } else {
        rc = mcdc_changes_wait_started(c, err);
        if (rc == MCDC_OK) CONTROL_CALL(rc, c, err, snapshot_lsn(c, out, err));
    }
    if (rc == MCDC_OK && !mcdc_lsn_is_zero(out))
        rc = mcdc_changes_commit_time(c, out, commit_us, has_ts, err);
    return rc;
}


/* ---- the key columns ---------------------------------------------------------------- */
mcdc_source_read mcdc_changes__source_read(const mcdc_changes *c, mcdc_isolation iso) {
    bool snap = iso == MCDC_ISO_OPTION ? mcdc_opt_snapshot_isolation(c->opts) : iso == MCDC_ISO_SNAPSHOT;
    return (mcdc_source_read){snap, mcdc_opt_lock_timeout_ms(c->opts)};
}

void mcdc_changes__control_read_committed(mcdc_changes *c, const mcdc_source_read *rd) {
    if (!rd->snapshot_isolation) return;
    pthread_mutex_lock(&c->mu);
    /* A failure leaves a dead connection, which the next call replaces. */
    if (c->control)
        (void)mcdc_conn_run(c->control, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", NULL, 0,
                            NULL);
    pthread_mutex_unlock(&c->mu);
}

void mcdc_changes__snap_keys_free(mcdc_snap_keys *k) {
    mcdc_free(k->cols);
    memset(k, 0, sizeof *k);
}

void mcdc_changes__names_free(mcdc_changes *c, char **names) {
    for (int32_t i = 0; names && i < c->captured->n_fields; i++) mcdc_free(names[i]);
    mcdc_free(names);
}

/* The captured column `name` of the instance (v), else, for a stream
 * following its table, of another instance of it: a column only a newer
 * instance captures is still matched by its column_id. */
static const mcdc_captured_column *captured_named(const mcdc_changes *c,
                                                  const mcdc_captured_column *v, int n,
                                                  const char *name) {
    for (int i = 0; i < n; i++)
        if (mcdc_str_ieq(v[i].name, name)) return &v[i];
    return c->follow ? mcdc_changes__follow_captured(c, name) : NULL;
}

static const mcdc_table_column *table_column(const mcdc_table_column *v, int n, int id) {
    for (int i = 0; i < n; i++)
        if (v[i].column_id == id) return &v[i];
    return NULL;
}

/* Do names hold the columns of the capture instance's unique index (in any
 * order: a set of columns is unique or not)? */
static bool is_index(const mcdc_changes *c, const char *const *names, int n) {
    if (n == 0 || n != c->n_keys) return false;
    for (int i = 0; i < n; i++) {
        bool found = false;
        for (int k = 0; k < n && !found; k++) found = mcdc_str_ieq(names[i], c->keys[k]);
        if (!found) return false;
    }
    return true;
}

static int resolve(mcdc_snap_keys *out, char ***source_names, mcdc_changes *c,
                   mcdc_cdc_client *cl, const json_t *names, bool strict, mcdc_error *err) {
    int n = names ? (int)json_array_size(names) : 0;
    if (names && !json_is_array(names))
        return mcdc_error_set(err, MCDC_E_INVALID, "snapshot keys: not a JSON array of names");
    if (n > MCDC_SNAPSHOT_KEYS_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "snapshot keys: %d columns, more than %d", n,
                              MCDC_SNAPSHOT_KEYS_MAX);
    const char *spelled[MCDC_SNAPSHOT_KEYS_MAX];
    for (int i = 0; i < n; i++) {
        const char *name = json_string_value(json_array_get(names, (size_t)i));
        int32_t at = -1;
        for (int32_t k = 0; name && k < c->captured->n_fields && at < 0; k++)
            if (mcdc_str_ieq(c->captured->fields[k].name, name)) at = k;
        if (at < 0)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "snapshot key %d (%s) is not a column the stream reads (the "
                                  "captured columns, or the columns option's)",
                                  i, name ? name : "not a string");
        spelled[i] = c->captured->fields[at].name;
        for (int k = 0; k < i; k++)
            if (mcdc_str_ieq(spelled[k], spelled[i]))
                return mcdc_error_set(err, MCDC_E_INVALID, "snapshot keys name %s twice", name);
    }
    if (n == 0 && source_names == NULL) return MCDC_OK;
    mcdc_captured_column *cap = NULL;
    mcdc_table_column *tab = NULL;
    int n_cap = 0, n_tab = 0;
    int rc = mcdc_cdc_captured_columns(&cap, &n_cap, cl, c->ci, err);
    if (rc == MCDC_OK)
        rc = mcdc_cdc_table_columns(&tab, &n_tab, cl, c->source_schema, c->source_table, err);
    out->n = n;
    out->unique = is_index(c, spelled, n);
    out->bindable = true;
    out->cols = n ? mcdc_calloc((size_t)n, sizeof *out->cols) : NULL;
    if (rc == MCDC_OK && n && out->cols == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; rc == MCDC_OK && i < n && out->bindable; i++) {
        const mcdc_captured_column *m = captured_named(c, cap, n_cap, spelled[i]);
        const mcdc_table_column *t = m ? table_column(tab, n_tab, m->column_id) : NULL;
        if (t == NULL) {
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "snapshot key %s: %s.%s has no such column any more", spelled[i],
                                c->source_schema, c->source_table);
            break;
        }
        mcdc_error why = MCDC_ERROR_INIT;
        int krc = mcdc_key_col_init(&out->cols[i], t->name, m, t->collation, i == n - 1, &why);
        if (krc && strict) {
            rc = mcdc_error_set(err, krc, "%s", why.message);
        } else if (krc) {
            out->bindable = false;
            snprintf(out->why, sizeof out->why, "%.250s", why.message);
        }
    }
    /* A bound cut to the microsecond can read back as the one before it:
     * a seek must then check that its range holds a row, as on keys that
     * are not unique. */
    if (rc == MCDC_OK && out->bindable && n > 0 && out->cols[n - 1].truncated) out->unique = false;
    if (rc == MCDC_OK && !out->bindable) {
        mcdc_free(out->cols);
        out->cols = NULL;
    }
    char **sn = NULL;
    int32_t nf = c->captured->n_fields;
    if (rc == MCDC_OK && source_names) {
        sn = mcdc_calloc((size_t)(nf ? nf : 1), sizeof *sn);
        if (sn == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    for (int32_t i = 0; rc == MCDC_OK && sn && i < nf; i++) {
        const mcdc_captured_column *m = captured_named(c, cap, n_cap, c->captured->fields[i].name);
        const mcdc_table_column *t = m ? table_column(tab, n_tab, m->column_id) : NULL;
        /* A computed column reads NULL, as in every change row of it. */
        if (t && !t->computed && (sn[i] = mcdc_strdup(t->name)) == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    mcdc_captured_columns_free(cap, n_cap);
    mcdc_table_columns_free(tab, n_tab);
    if (rc) {
        mcdc_changes__snap_keys_free(out);
        mcdc_changes__names_free(c, sn);
        return rc;
    }
    if (source_names) *source_names = sn;
    return MCDC_OK;
}

int mcdc_changes__snap_keys(mcdc_snap_keys *out, char ***source_names, mcdc_changes *c,
                            mcdc_cdc_client *cl, const json_t *names, bool strict,
                            mcdc_error *err) {
    memset(out, 0, sizeof *out);
    out->bindable = true;
    if (source_names) *source_names = NULL;
    return resolve(out, source_names, c, cl, names, strict, err);
}

/* The names snapshots are cut on, spelled as the stream's columns. */
static int snapshot_keys(mcdc_changes *c, json_t **out, mcdc_error *err) {
    *out = NULL;
    const char *given = mcdc_opt_snapshot_keys(c->opts);
    json_t *names = NULL;
    bool from_option = given != NULL;
    if (from_option) {
        json_error_t je;
        names = json_loads(given, 0, &je);
        bool ok = json_is_array(names) && json_array_size(names) > 0;
        for (size_t i = 0; ok && i < json_array_size(names); i++) {
            const char *s = json_string_value(json_array_get(names, i));
            ok = s && *s;
        }
        if (!ok) {
            json_decref(names);
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "snapshotKeys must be a JSON list of column names, such as "
                                  "[\"order_id\"], not %s",
                                  given);
        }
    } else {
        names = json_array();
        bool read = true;
        for (int i = 0; names && i < c->n_keys; i++) {
            read = read && mcdc_schema_find(c->captured, c->keys[i]) >= 0;
            if (json_array_append_new(names, json_string(c->keys[i])) != 0) {
                json_decref(names);
                names = NULL;
            }
        }
        if (names == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        /* An index the stream does not read all of: the table is one range. */
        if (!read || c->n_keys == 0) {
            json_array_clear(names);
            *out = names;
            return MCDC_OK;
        }
    }
    mcdc_snap_keys k;
    int rc = mcdc_changes__snap_keys(&k, NULL, c, c->client, names, from_option, err);
    if (rc && from_option) mcdc_error_wrap(err, "snapshotKeys %s", given);
    json_t *spelled = rc ? NULL : json_array();
    if (rc == MCDC_OK && spelled == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MCDC_OK && k.bindable && i < json_array_size(names); i++) {
        int32_t at = -1;
        const char *name = json_string_value(json_array_get(names, i));
        for (int32_t f = 0; f < c->captured->n_fields && at < 0; f++)
            if (mcdc_str_ieq(c->captured->fields[f].name, name)) at = f;
        MCDC_ASSERT(at >= 0); /* resolve checked it */
        if (json_array_append_new(spelled, json_string(c->captured->fields[at].name)) != 0)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (rc == MCDC_OK && !k.bindable)
        mcdc_log(MCDC_LOG_INFO, "capture instance %s: snapshots read %s.%s as one range: %s",
                 c->ci, c->source_schema, c->source_table, k.why);
    mcdc_changes__snap_keys_free(&k);
    json_decref(names);
    if (rc) {
        json_decref(spelled);
        return rc;
    }
    *out = spelled;
    return MCDC_OK;
}

int mcdc_changes_snapshot_keys(mcdc_changes *c, json_t **keys, mcdc_error *err) {
    int rc;
    *keys = NULL;
    CONTROL_CALL(rc, c, err, snapshot_keys(c, keys, err));
    return rc;
}

/* ---- a whole snapshot's ranges ---------------------------------------------------------- */
/* Key arithmetic: hi - lo + 1 of two int64 keys needs 65 bits. */
__extension__ typedef __int128 i128;

/* [[null, b1], [b1, b2], ..., [bk, null]] of bounds (stolen). */
static int ranges_of(json_t **out, json_t **bounds, int n, mcdc_error *err) {
    json_t *v = json_array();
    int rc = v ? MCDC_OK : MCDC_E_NOMEM;
    for (int i = 0; rc == MCDC_OK && i <= n; i++) {
        json_t *lo = i ? json_incref(bounds[i - 1]) : json_null();
        json_t *hi = i < n ? json_incref(bounds[i]) : json_null();
        json_t *r = json_pack("[oo]", lo, hi);
        if (r == NULL || json_array_append_new(v, r) != 0) rc = MCDC_E_NOMEM;
    }
    for (int i = 0; i < n; i++) json_decref(bounds[i]);
    if (rc) {
        json_decref(v);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    *out = v;
    return MCDC_OK;
}

static int snapshot_ranges(mcdc_changes *c, int n_max, json_t **out, mcdc_error *err) {
    *out = NULL;
    json_t *names = NULL, *lo = NULL, *hi = NULL;
    json_t *bounds[MCDC_PARTITIONS_MAX];
    int nb = 0;
    mcdc_snap_keys k = {0};
    mcdc_source_read rd = mcdc_changes__source_read(c, MCDC_ISO_OPTION);
    int rc = snapshot_keys(c, &names, err);
    if (rc == MCDC_OK && n_max > 1 && json_array_size(names) > 0)
        rc = mcdc_changes__snap_keys(&k, NULL, c, c->client, names, true, err);
    const char *s = c->source_schema, *t = c->source_table;
    bool keyset = k.n > 1;
    if (rc == MCDC_OK && k.n == 1) {
        rc = mcdc_cdc_key_min_max(&lo, &hi, c->client, s, t, &k.cols[0], NULL, NULL, &rd, err);
        keyset = rc == MCDC_OK && lo && !json_equal(lo, hi) && k.cols[0].kind != MCDC_KEY_INT;
    }
    if (rc == MCDC_OK && k.n == 1 && lo && k.cols[0].kind == MCDC_KEY_INT) {
        /* Uniform ranges of [MIN, MAX]: bound i = MIN + (MAX - MIN + 1) * i / n. */
        i128 a = json_integer_value(lo), span = (i128)json_integer_value(hi) - a + 1;
        int n = span < n_max ? (int)span : n_max;
        for (int i = 1; i < n; i++) {
            bounds[nb] = json_integer((json_int_t)(a + span * i / n));
            if (bounds[nb] == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            else nb++;
        }
    }
    if (rc == MCDC_OK && keyset) {
        /* Tiles of the rows sp_spaceused counts (the first rows % n one row
         * more), each bound a seek from the one before. */
        int64_t rows = 0;
        rc = mcdc_cdc_row_estimate(&rows, c->client, s, t, err);
        int n = rows < n_max ? (int)rows : n_max;
        for (int i = 0; rc == MCDC_OK && i < n - 1; i++) {
            int64_t step = rows / n + (i < rows % n);
            json_t *b = NULL;
            rc = mcdc_changes__seek(c, &k, nb ? bounds[nb - 1] : NULL, NULL, step, &rd, &b, err);
            if (b == NULL) break; /* fewer rows than the estimate: the last one ends open */
            bounds[nb++] = b;
        }
    }
    json_decref(lo);
    json_decref(hi);
    json_decref(names);
    mcdc_changes__snap_keys_free(&k);
    if (rc) {
        for (int i = 0; i < nb; i++) json_decref(bounds[i]);
        return rc;
    }
    return ranges_of(out, bounds, nb, err);
}

int mcdc_changes_snapshot_ranges(mcdc_changes *c, int n_max, json_t **ranges, mcdc_error *err) {
    MCDC_ASSERT(n_max >= 1 && n_max <= MCDC_PARTITIONS_MAX);
    int rc;
    *ranges = NULL;
    CONTROL_CALL(rc, c, err, snapshot_ranges(c, n_max, ranges, err));
    mcdc_source_read rd = mcdc_changes__source_read(c, MCDC_ISO_OPTION);
    mcdc_changes__control_read_committed(c, &rd);
    return rc;
}

int mcdc_changes_row_estimate(mcdc_changes *c, int64_t *rows, mcdc_error *err) {
    int rc;
    *rows = 0;
    CONTROL_CALL(rc, c, err, mcdc_cdc_row_estimate(rows, c->client, c->source_schema,
                                                   c->source_table, err));
    return rc;
}

/* ---- reading one range -------------------------------------------------------------- */
int mcdc_changes_snapshot_read(mcdc_changes *c, const json_t *keys, const json_t *range,
                               mcdc_isolation iso, const mcdc_lsn *lsn, bool has_ts,
                               int64_t commit_us, mcdc_batch_fn fn, void *ctx,
                               mcdc_reader_metrics *m, mcdc_error *err) {
    mcdc_reader_metrics scratch;
    if (m == NULL) m = &scratch;
    memset(m, 0, sizeof *m);
    int64_t t0 = mcdc_monotonic_us();
    m->attempts = 1;
    const json_t *lo = NULL, *hi = NULL;
    if (range && !json_is_null(range)) {
        if (!json_is_array(range) || json_array_size(range) != 2)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "a snapshot range is the JSON array [lo, hi]");
        lo = json_array_get(range, 0);
        hi = json_array_get(range, 1);
    }
    mcdc_connstr_connector conn = c->connector;
    mcdc_conn *db = NULL;
    mcdc_cdc_client *cl = NULL;
    mcdc_snap_keys k = {0};
    char **names = NULL;
    int rc = mcdc_connect_connstr(&conn, &db, err);
    if (rc == MCDC_OK) rc = mcdc_cdc_client_create(&cl, db, err);
    /* Both ends open: the whole table, whatever the keys (no predicate). */
    bool whole = (lo == NULL || json_is_null(lo)) && (hi == NULL || json_is_null(hi));
    if (rc == MCDC_OK)
        rc = mcdc_changes__snap_keys(&k, &names, c, cl, whole ? NULL : keys, true, err);
    char lsn_text[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(lsn, lsn_text);
    mcdc_snapshot_query q = mcdc_changes__snapshot_query(c, names, iso);
    q.keys = k.cols;
    q.n_keys = k.n;
    q.lo = lo;
    q.hi = hi;
    mcdc_buf sql = {0};
    mcdc_sql_params params = {0};
    if (rc == MCDC_OK) rc = mcdc_cdc_snapshot_sql(&sql, &params, &q, err);
    mcdc_result *res = NULL;
    if (rc == MCDC_OK)
        rc = mcdc_conn_exec(&res, db, (const char *)sql.data, (const char *const *)params.v,
                            params.n, err);
    if (rc) mcdc_source_read_hint(err);
    int64_t rows_max = c->ropt.batch_rows > 0 ? c->ropt.batch_rows : 10000;
    while (rc == MCDC_OK) {
        mcdc_batch *b = NULL;
        int64_t n = 0;
        rc = mcdc_changes__snapshot_batch(&b, &n, c, res, rows_max, lsn_text, has_ts, commit_us,
                                          err);
        if (rc != MCDC_OK || b == NULL) break;
        m->rows += n;
        m->bytes += mcdc_batch_bytes(b);
        rc = fn(ctx, b, err); /* fn owns b */
    }
    mcdc_result_free(res);
    mcdc_buf_free(&sql);
    mcdc_sql_params_free(&params);
    mcdc_changes__names_free(c, names);
    mcdc_changes__snap_keys_free(&k);
    mcdc_cdc_client_free(cl);
    mcdc_conn_close(db);
    m->seconds = (double)(mcdc_monotonic_us() - t0) / 1e6;
    if (rc && rc != MCDC_E_CANCELLED)
        mcdc_error_wrap(err, "reading the rows of %s.%s for a snapshot", c->source_schema,
                        c->source_table);
    return rc;
}

int mcdc_changes__snapshot_batch(mcdc_batch **out, int64_t *rows, const mcdc_changes *c,
                                 mcdc_result *res, int64_t rows_max, const char *lsn_text,
                                 bool has_ts, int64_t commit_us, mcdc_error *err) {
    MCDC_ASSERT(out && rows && c && res && rows_max > 0 && lsn_text);
    *out = NULL;
    *rows = 0;
    int32_t first = c->schema->n_fields - c->captured->n_fields;
    mcdc_batch *b = NULL;
    int64_t n = 0;
    int rc = mcdc_batch_create(&b, c->schema, rows_max, err);
    if (rc == MCDC_OK)
        rc = mcdc_result_fetch(res, b, first, rows_max, c->ropt.batch_bytes_max, &n, err);
    if (rc == MCDC_OK && n > 0)
        rc = mcdc_reader_fill_snapshot_stamp(b, first, lsn_text, has_ts, commit_us, n, err);
    if (rc == MCDC_OK && n > 0)
        rc = mcdc_reader_finish_reads(b, first, c->reads, c->captured->n_fields, err);
    if (rc == MCDC_OK && n > 0) rc = mcdc_reader_fill_capture_instance(b, c->ci, n, err);
    if (rc == MCDC_OK && n > 0) rc = mcdc_batch_seal(b, err);
    if (rc != MCDC_OK || n == 0) {
        mcdc_batch_free(b);
        return rc;
    }
    MCDC_ASSERT(n <= rows_max);
    *out = b;
    *rows = n;
    return MCDC_OK;
}

mcdc_snapshot_query mcdc_changes__snapshot_query(const mcdc_changes *c, char *const *source_names,
                                                 mcdc_isolation iso) {
    return (mcdc_snapshot_query){
        .source_schema = c->source_schema,
        .source_table = c->source_table,
        .cols = c->captured->fields,
        .n_cols = c->captured->n_fields,
        .source_names = (const char *const *)source_names,
        .reads = c->reads,
        .read = mcdc_changes__source_read(c, iso),
    };
}
