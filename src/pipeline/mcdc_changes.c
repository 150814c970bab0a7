/*
 * mcdc_changes.c - the change feed of one capture instance for the stream,
 * on the CDC client (planning, on one connection) and the reader (each
 * range on its own connection, so ranges read in parallel).
 */
#include "mcdc_changes.h"

#include <stdlib.h>
#include <string.h>

#include "mcdc_cdc_client.h"
#include "mcdc_connstr.h"
#include "mcdc_driver.h"
#include "mcdc_tables.h"

/* Ranges are merged until each holds this many change rows (reference §3.6,
 * MIN_ROWS_PER_PARTITION): below it a connection costs more than it saves. */
#define CHANGES_MIN_ROWS_PER_RANGE 50000

struct mcdc_changes {
    mcdc_connstr *connstr;
    mcdc_connstr_connector connector; /* each range read opens its own connection */
    mcdc_conn *conn;                  /* planning connection */
    mcdc_cdc_client *client;
    char *ci;
    mcdc_lsn ci_start_lsn;
    mcdc_schema *captured;
    mcdc_schema *output;
    mcdc_reader_options ropt;
};

/* ---- the planning connection, re-opened after a transient error -------- */
static void disconnect(mcdc_changes *c) {
    mcdc_cdc_client_free(c->client);
    c->client = NULL;
    mcdc_conn_close(c->conn);
    c->conn = NULL;
}

static int connect_planner(mcdc_changes *c, mcdc_error *err) {
    if (c->client) return MCDC_OK;
    int rc = mcdc_connect_connstr(&c->connector, &c->conn, err);
    if (rc == MCDC_OK) rc = mcdc_cdc_client_create(&c->client, c->conn, err);
    if (rc == MCDC_OK) mcdc_cdc_set_clock(c->client, &c->ropt.clock);
    if (rc) disconnect(c);
    return rc;
}

/* Driver-side calls retry transient errors on a fresh connection, as the
 * reference does (3 retries, backoff 1-2 s, 2-4 s, 4-8 s). */
#define WITH_RETRY(c, err, call)                                                          \
    do {                                                                                  \
        int64_t backoff_ms_ = (c)->ropt.backoff_ms_first;                                 \
        for (int attempt_ = 0;; attempt_++) {                                             \
            rc = connect_planner((c), (err));                                             \
            if (rc == MCDC_OK) rc = (call);                                               \
            if (rc != MCDC_E_TRANSIENT || attempt_ >= (c)->ropt.retries_max) break;       \
            mcdc_log(MCDC_LOG_WARN, "transient source error, retrying on a new connection " \
                                    "in %lld ms: %s",                                     \
                     (long long)backoff_ms_, (err) ? (err)->message : "");                \
            disconnect(c);                                                                \
            mcdc_sleep_ms(backoff_ms_);                                                   \
            backoff_ms_ *= 2;                                                             \
        }                                                                                 \
    } while (0)

/* Resolves the capture instance name: exact first, else ignoring case. */
static int resolve_instance(mcdc_changes *c, const char *wanted, mcdc_error *err) {
    mcdc_capture_instance *all = NULL;
    int n = 0, rc;
    WITH_RETRY(c, err, mcdc_cdc_capture_instances(c->client, NULL, NULL, &all, &n, err));
    if (rc) return rc;
    int exact = -1, folded = -1, folded_count = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(all[i].name, wanted) == 0) exact = i;
        else if (mcdc_str_ieq(all[i].name, wanted)) {
            folded = i;
            folded_count++;
        }
    }
    int pick = exact >= 0 ? exact : folded_count == 1 ? folded : -1;
    if (pick >= 0) {
        c->ci = mcdc_strdup(all[pick].name);
        c->ci_start_lsn = all[pick].start_lsn;
        if (c->ci == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    } else if (folded_count > 1) {
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "captureInstance '%s' matches %d capture instances that differ only "
                            "in case: give the exact name",
                            wanted, folded_count);
    } else {
        mcdc_buf names = {0};
        for (int i = 0; i < n && i < 20; i++)
            mcdc_buf_printf(&names, NULL, "%s%s", i ? ", " : "", all[i].name);
        mcdc_buf_cstr(&names, NULL);
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND,
                            "capture instance '%s' not found in the database%s%s%s. Enable CDC "
                            "on the table (EXEC sys.sp_cdc_enable_table ...) or fix "
                            "captureInstance; a least-privilege login also needs SELECT on the "
                            "table",
                            wanted, n ? " (capture instances: " : " (it has none",
                            n ? (const char *)names.data : "", ")");
        mcdc_buf_free(&names);
    }
    mcdc_capture_instances_free(all, n);
    return rc;
}

int mcdc_changes_open(mcdc_changes **out, const mcdc_opts *opts, mcdc_error *err) {
    *out = NULL;
    mcdc_changes *c = mcdc_calloc(1, sizeof *c);
    if (c == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_reader_options ro = MCDC_READER_OPTIONS_INIT;
    c->ropt = ro;
    int rc = MCDC_OK;
    const char *backend = mcdc_opts_get(opts, "backend");
    if (backend && !mcdc_str_ieq(backend, "freetds"))
        mcdc_log(MCDC_LOG_WARN, "backend '%s' is the reference's Python driver; this build reads "
                                "with its FreeTDS backend", backend);
    if (mcdc_opts_is_set(opts, "columns"))
        rc = mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                            "option columns is not supported yet: every captured column is read "
                            "with its default type; remove the option");
    if (rc == MCDC_OK)
        rc = mcdc_connstr_parse(&c->connstr, mcdc_opts_get(opts, "connectionString"), err);
    if (rc) goto fail;
    mcdc_conn_options co = MCDC_CONN_OPTIONS_INIT;
    co.login_timeout_s = (int)mcdc_opts_get_int(opts, "connectTimeout");
    c->connector.connstr = c->connstr;
    c->connector.options = co;
    c->ropt.include_command_id = mcdc_opts_get_bool(opts, "includeCommandId");
    c->ropt.batch_rows = mcdc_opts_get_int(opts, "arrowBatchSize");
    c->ropt.fail_on_data_loss = mcdc_opts_get_bool(opts, "failOnDataLoss");
    const char *backoff = getenv("MCDC_RETRY_BACKOFF_MS");
    int64_t b;
    if (backoff && mcdc_parse_i64(backoff, &b) == MCDC_OK && b >= 0) c->ropt.backoff_ms_first = (int)b;

    rc = resolve_instance(c, mcdc_opts_get(opts, "captureInstance"), err);
    if (rc) goto fail;
    c->ropt.capture_instance = c->ci;
    const char *zone = mcdc_opts_get(opts, "sourceTimeZone");
    if (zone == NULL || mcdc_str_ieq(zone, "auto"))
        WITH_RETRY(c, err, mcdc_cdc_detect_clock(c->client, &c->ropt.clock, err));
    else
        rc = mcdc_clock_from_name(&c->ropt.clock, zone, err);
    if (rc) goto fail;
    mcdc_cdc_set_clock(c->client, &c->ropt.clock);
    WITH_RETRY(c, err, mcdc_reader_infer_columns(&c->captured, c->client, c->ci, err));
    if (rc) goto fail;
    for (int32_t i = 0; i < c->captured->n_fields; i++)
        if (mcdc_is_reserved_column(c->captured->fields[i].name)) {
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "capture instance %s captures a column named '%s', which is "
                                "reserved for mssql-cdc's own columns: leave it out of "
                                "@captured_column_list or rename it",
                                c->ci, c->captured->fields[i].name);
            goto fail;
        }
    c->ropt.columns = c->captured;
    rc = mcdc_reader_output_schema(&c->output, c->captured, c->ropt.include_command_id, err);
    if (rc) goto fail;
    *out = c;
    return MCDC_OK;
fail:
    mcdc_changes_close(c);
    return rc;
}

void mcdc_changes_close(mcdc_changes *c) {
    if (c == NULL) return;
    disconnect(c);
    mcdc_schema_unref(c->captured);
    mcdc_schema_unref(c->output);
    mcdc_connstr_free(c->connstr);
    mcdc_free(c->ci);
    mcdc_free(c);
}

mcdc_schema *mcdc_changes_schema(mcdc_changes *c) { return c->output; }
const char *mcdc_changes_capture_instance(const mcdc_changes *c) { return c->ci; }

int mcdc_changes_max_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err) {
    int rc;
    WITH_RETRY(c, err, mcdc_cdc_max_lsn(c->client, out, NULL, err));
    return rc;
}

int mcdc_changes_min_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err) {
    int rc;
    WITH_RETRY(c, err, mcdc_cdc_min_lsn(c->client, c->ci, out, err));
    return rc;
}

int mcdc_changes_nth_commit_after(mcdc_changes *c, const mcdc_lsn *start, int64_t n,
                                  mcdc_lsn *out, bool *found, mcdc_error *err) {
    int rc;
    WITH_RETRY(c, err, mcdc_cdc_nth_commit_after(c->client, start, n, out, found, err));
    return rc;
}

int mcdc_changes_commit_time(mcdc_changes *c, const mcdc_lsn *lsn, int64_t *utc_us, bool *found,
                             mcdc_error *err) {
    int rc;
    WITH_RETRY(c, err, mcdc_cdc_lsn_to_time(c->client, lsn, true, utc_us, found, err));
    return rc;
}

int mcdc_changes_initial(mcdc_changes *c, const char *starting_lsn, mcdc_lsn *out,
                         mcdc_error *err) {
    int rc;
    if (mcdc_str_ieq(starting_lsn, "earliest")) {
        mcdc_lsn min;
        rc = mcdc_changes_min_lsn(c, &min, err);
        if (rc) return rc;
        if (mcdc_lsn_is_zero(&min)) {
            /* Capture has not processed the enable yet: everything it
             * writes later is after the zero LSN. */
            *out = min;
            return MCDC_OK;
        }
        WITH_RETRY(c, err, mcdc_cdc_decrement_lsn(c->client, &min, out, err));
        return rc;
    }
    if (mcdc_str_ieq(starting_lsn, "latest")) {
        rc = mcdc_changes_max_lsn(c, out, err);
        if (rc) return rc;
        /* Capture has not reached a freshly enabled instance yet: start just
         * before the instance's first LSN. */
        if (!mcdc_lsn_is_zero(&c->ci_start_lsn) && mcdc_lsn_cmp(out, &c->ci_start_lsn) < 0)
            WITH_RETRY(c, err, mcdc_cdc_decrement_lsn(c->client, &c->ci_start_lsn, out, err));
        return rc;
    }
    return mcdc_lsn_parse_cstr(out, starting_lsn, err);
}

static int push_range(mcdc_range **v, int *n, const mcdc_lsn *from, const mcdc_lsn *to,
                      int64_t rows, mcdc_error *err) {
    mcdc_range *r = mcdc_realloc(*v, (size_t)(*n + 1) * sizeof *r);
    if (r == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory planning ranges");
    r[*n] = (mcdc_range){*from, *to, rows, false};
    *v = r;
    (*n)++;
    return MCDC_OK;
}

int mcdc_changes_plan(mcdc_changes *c, const mcdc_lsn *from, const mcdc_lsn *to, int n_max,
                      mcdc_range **out, int *n_out, mcdc_error *err) {
    MCDC_ASSERT(mcdc_lsn_cmp(from, to) <= 0);
    *out = NULL;
    *n_out = 0;
    mcdc_split_point *tiles = NULL;
    int ntiles = 0, rc = MCDC_OK;
    if (n_max > 1)
        WITH_RETRY(c, err, mcdc_cdc_split_points(c->client, c->ci, from, to, n_max, &tiles,
                                                 &ntiles, err));
    if (rc) return rc;
    mcdc_range *v = NULL;
    int n = 0;
    mcdc_lsn cur = *from;
    int64_t acc = 0;
    /* Tiles merged until a range holds CHANGES_MIN_ROWS_PER_RANGE rows; the
     * range after the last cut runs to the batch end (idle tail included). */
    for (int i = 0; i < ntiles && rc == MCDC_OK; i++) {
        acc += tiles[i].rows;
        if (acc >= CHANGES_MIN_ROWS_PER_RANGE && mcdc_lsn_cmp(&tiles[i].bound, to) < 0) {
            rc = push_range(&v, &n, &cur, &tiles[i].bound, acc, err);
            cur = tiles[i].next_start;
            acc = 0;
        }
    }
    if (rc == MCDC_OK) {
        if (n > 0 && acc < CHANGES_MIN_ROWS_PER_RANGE) {
            /* A short tail joins the range before it. */
            v[n - 1].to = *to;
            v[n - 1].rows_estimate += acc;
        } else if (mcdc_lsn_cmp(&cur, to) <= 0) {
            rc = push_range(&v, &n, &cur, to, acc, err);
        } else if (n > 0) {
            v[n - 1].to = *to;
        }
    }
    mcdc_free(tiles);
    if (rc) {
        mcdc_free(v);
        return rc;
    }
    MCDC_ASSERT(n >= 1 && mcdc_lsn_cmp(&v[0].from, from) == 0 &&
                mcdc_lsn_cmp(&v[n - 1].to, to) == 0);
    v[n - 1].last = true;
    *out = v;
    *n_out = n;
    return MCDC_OK;
}

int mcdc_changes_read(mcdc_changes *c, const mcdc_range *r, mcdc_batch_fn fn, void *ctx,
                      mcdc_range_metrics *m, mcdc_error *err) {
    int rc = mcdc_reader_read_range(m, &c->ropt, mcdc_connect_connstr, &c->connector, &r->from,
                                    &r->to, r->last, fn, ctx, err);
    if (rc == MCDC_OK && m && m->data_lost) {
        char f[MCDC_LSN_TEXT_LEN + 1], ml[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&r->from, f);
        mcdc_lsn_format(&m->min_lsn_after, ml);
        mcdc_log(MCDC_LOG_WARN,
                 "capture instance %s: CDC cleanup may have purged changes from %s on while they "
                 "were read (min_lsn is now %s); failOnDataLoss=false goes on",
                 c->ci, f, ml);
    }
    return rc;
}
