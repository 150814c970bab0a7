/*
 * mcdc_changes.c - the stream's change feed (mcdc_changes.h) on
 * the CDC client and the change reader: one control connection for the
 * positions and the planning, a fresh connection per range read.
 *
 * Thread safety: mcdc_changes_read runs on several threads at once; it
 * only reads the immutable parts of the handle (options, schema, clock).
 * The control connection is serialised by a mutex.
 */
#include "mcdc_changes_int.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_cdc_client.h"
#include "mcdc_connstr.h"
#include "mcdc_reader.h"

/* ---- the control connection and its retries (ADR 0029) -------------------------
 * Positions and planning run on one connection kept by the handle. A
 * transient error (connection lost, timeout, deadlock) is retried on a new
 * connection: MCDC_RETRIES_MAX times, backoff 1-2 s, 2-4 s, 4-8 s, a
 * warning each time. Other errors fail at once. */
int mcdc_changes__control_connect(mcdc_changes *c, mcdc_error *err) {
    mcdc_cdc_client_free(c->client);
    c->client = NULL;
    mcdc_conn_close(c->control);
    c->control = NULL;
    int rc = mcdc_conn_open(&c->control, c->connstr, &c->connector.options, err);
    if (rc == MCDC_OK) rc = mcdc_cdc_client_create(&c->client, c->control, err);
    if (rc == MCDC_OK) {
        mcdc_cdc_set_clock(c->client, &c->clock);
    } else {
        mcdc_conn_close(c->control);
        c->control = NULL;
    }
    return rc;
}

static uint64_t backoff_jitter(uint64_t below) {
    static _Thread_local uint64_t s;
    if (s == 0) s = (uint64_t)mcdc_monotonic_us() * 0x9E3779B97F4A7C15ull | 1;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return below ? s % below : 0;
}

/* After a control call returned rc: true when it should run again (the
 * connection is dropped; the next round opens a new one). */
bool mcdc_changes__control_again(mcdc_changes *c, int rc, int *attempt, mcdc_error *err) {
    if (rc != MCDC_E_TRANSIENT) return false;
    if (*attempt >= c->retries_max) {
        mcdc_error_wrap(err, "the source stayed unreachable through %d retries (check Server= in "
                             "the connection string, and that SQL Server runs and this host "
                             "reaches it; then run again)",
                        c->retries_max);
        return false;
    }
    int64_t base = (int64_t)c->backoff_ms_first << *attempt;
    int64_t wait = base + (int64_t)backoff_jitter((uint64_t)base);
    (*attempt)++;
    mcdc_log(MCDC_LOG_WARN,
             "capture instance %s: %s; retrying on a new connection in %lld ms (retry %d of %d)",
             c->ci[0] ? c->ci : "(resolving)", err ? err->message : "transient error",
             (long long)wait, *attempt, c->retries_max);
    mcdc_cdc_client_free(c->client);
    c->client = NULL;
    mcdc_conn_close(c->control);
    c->control = NULL;
    if (wait > 0) mcdc_sleep_ms(wait);
    return true;
}

/* ---- the columns option: a small subset of Spark DDL ---------------------------- */
static int ddl_type(const char *t, mcdc_type_id *type, int32_t *p, int32_t *s) {
    *p = *s = 0;
    static const struct {
        const char *name;
        mcdc_type_id type;
    } T[] = {{"BOOLEAN", MCDC_TYPE_BOOL},     {"SMALLINT", MCDC_TYPE_INT16},
             {"SHORT", MCDC_TYPE_INT16},      {"INT", MCDC_TYPE_INT32},
             {"INTEGER", MCDC_TYPE_INT32},    {"BIGINT", MCDC_TYPE_INT64},
             {"LONG", MCDC_TYPE_INT64},       {"FLOAT", MCDC_TYPE_FLOAT},
             {"REAL", MCDC_TYPE_FLOAT},       {"DOUBLE", MCDC_TYPE_DOUBLE},
             {"STRING", MCDC_TYPE_UTF8},      {"BINARY", MCDC_TYPE_BINARY},
             {"DATE", MCDC_TYPE_DATE32},      {"TIMESTAMP", MCDC_TYPE_TIMESTAMP_UTC},
             {"TIMESTAMP_NTZ", MCDC_TYPE_TIMESTAMP_NTZ}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (mcdc_str_ieq(t, T[i].name)) {
            *type = T[i].type;
            return MCDC_OK;
        }
    if (mcdc_str_nieq(t, "DECIMAL", 7)) {
        int pp = 10, ss = 0;
        if (t[7] == 0 || sscanf(t + 7, " ( %d , %d )", &pp, &ss) == 2 ||
            sscanf(t + 7, " ( %d )", &pp) == 1) {
            *type = MCDC_TYPE_DECIMAL;
            *p = pp;
            *s = ss;
            return MCDC_OK;
        }
    }
    return MCDC_E_INVALID;
}

/* "a INT, `b c` DECIMAL(18,2), d STRING" -> schema (validated against the
 * captured columns: each must exist). */
/* Is name one of the "name (type), ..." entries of list? */
static bool listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        if (mcdc_str_nieq(p, name, n) && p[n] == ' ' && p[n + 1] == '(') return true;
        p = strstr(p, "), ");
        if (p) p += 3;
    }
    return false;
}

static int parse_columns(mcdc_schema **out, const char *ddl, const mcdc_schema *captured,
                         const char *unreadable, mcdc_error *err) {
    /* on the heap: 2 MB, more than a thread's stack should hold */
    char(*names)[MCDC_IDENT_BYTES_MAX + 1] = mcdc_malloc(MCDC_COLUMNS_MAX * sizeof *names);
    char(*types)[40] = mcdc_malloc(MCDC_COLUMNS_MAX * sizeof *types);
    mcdc_schema *s = NULL;
    int rc = names && types ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int n = 0;
    const char *p = ddl;
    while (isspace((unsigned char)*p)) p++;
    while (rc == MCDC_OK && *p) {
        /* one comma between two pairs: an empty one is a mistake to say */
        if (n > 0 && *p == ',') p++;
        while (isspace((unsigned char)*p)) p++;
        if (*p == 0 || *p == ',') {
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "columns: an empty entry (two commas in a row, or one at an "
                                "end) in '%s': give 'name TYPE' pairs separated by commas, "
                                "e.g. 'id INT, amount DECIMAL(18,2), note STRING'",
                                ddl);
            break;
        }
        if (n >= MCDC_COLUMNS_MAX) {
            rc = mcdc_error_set(err, MCDC_E_LIMIT, "columns: more than %d columns",
                                MCDC_COLUMNS_MAX);
            break;
        }
        size_t k = 0;
        if (*p == '`') {
            p++;
            while (*p && !(*p == '`' && p[1] != '`')) {
                if (*p == '`') p++;
                if (k < MCDC_IDENT_BYTES_MAX) names[n][k++] = *p;
                p++;
            }
            if (*p == '`') p++;
        } else {
            while (*p && !isspace((unsigned char)*p) && *p != ',')
                if (k < MCDC_IDENT_BYTES_MAX) names[n][k++] = *p++;
                else p++;
        }
        names[n][k] = 0;
        while (isspace((unsigned char)*p)) p++;
        k = 0;
        int depth = 0;
        while (*p && (depth > 0 || *p != ',')) {
            if (*p == '(') depth++;
            if (*p == ')') depth--;
            if (k + 1 < sizeof types[n]) types[n][k++] = *p;
            p++;
        }
        while (k && isspace((unsigned char)types[n][k - 1])) k--;
        types[n][k] = 0;
        if (names[n][0] == 0 || types[n][0] == 0) {
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "columns: expected 'name TYPE' pairs separated by commas, "
                                "e.g. 'id INT, amount DECIMAL(18,2), note STRING'");
            break;
        }
        n++;
    }
    if (rc == MCDC_OK && n == 0) rc = mcdc_error_set(err, MCDC_E_INVALID, "columns: empty");
    if (rc == MCDC_OK) rc = mcdc_schema_create(&s, n, err);
    for (int i = 0; i < n && rc == MCDC_OK; i++) {
        mcdc_type_id t;
        int32_t pp, ss;
        if (ddl_type(types[i], &t, &pp, &ss) != MCDC_OK) {
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "columns: '%s' has type '%s'; use BOOLEAN, SMALLINT, INT, "
                                "BIGINT, FLOAT, DOUBLE, DECIMAL(p,s), STRING, BINARY, DATE, "
                                "TIMESTAMP or TIMESTAMP_NTZ",
                                names[i], types[i]);
            break;
        }
        if (mcdc_schema_find(captured, names[i]) < 0 && !listed(unreadable, names[i])) {
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "columns: '%s' is not a captured column of the capture "
                                "instance: list only columns it captures (sys.sp_cdc_get_"
                                "captured_columns names them), or leave the option out",
                                names[i]);
            break;
        }
        rc = mcdc_schema_set(s, i, names[i], t, pp, ss, 0, true, err);
    }
    mcdc_free(names);
    mcdc_free(types);
    if (rc != MCDC_OK) {
        mcdc_schema_unref(s);
        return rc;
    }
    *out = s;
    return MCDC_OK;
}

/* How each column of the columns option is selected: as the inferred column
 * of its name is (all, all_reads), so a sql_variant, hierarchyid or
 * spatial column reads through its expression, which gives one type only. */
static int listed_reads(uint8_t **out, const mcdc_schema *listed, const mcdc_schema *all,
                        const uint8_t *all_reads, mcdc_error *err) {
    *out = NULL;
    for (int32_t i = 0; all_reads && i < listed->n_fields; i++) {
        int32_t at = mcdc_schema_find(all, listed->fields[i].name);
        uint8_t read = at >= 0 ? all_reads[at] : (uint8_t)MCDC_READ_VALUE;
        if (read == MCDC_READ_VALUE) continue;
        if (listed->fields[i].type != mcdc_cdc_read_type(read)) {
            mcdc_free(*out);
            *out = NULL;
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "columns: '%s' is a %s column, which reads as %s (see "
                                  "docs/tables.md); give it that type, or leave it out",
                                  listed->fields[i].name,
                                  read == MCDC_READ_SPATIAL     ? "geography or geometry"
                                  : read == MCDC_READ_VARIANT ? "sql_variant"
                                                              : "hierarchyid",
                                  read == MCDC_READ_SPATIAL ? "BINARY (EWKB)" : "STRING");
        }
        if (*out == NULL && (*out = mcdc_calloc((size_t)listed->n_fields, 1)) == NULL)
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        (*out)[i] = read;
    }
    return MCDC_OK;
}

/* ---- open ----------------------------------------------------------------------------- */
static void free_keys(mcdc_changes *c) {
    for (int i = 0; i < c->n_keys; i++) mcdc_free(c->keys[i]);
    mcdc_free(c->keys);
    c->keys = NULL;
    c->n_keys = 0;
}

static int set_keys(mcdc_changes *c, const char *const *keys, int n, mcdc_error *err) {
    free_keys(c);
    if (n == 0) return MCDC_OK;
    c->keys = mcdc_calloc((size_t)n, sizeof *c->keys);
    if (c->keys == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        c->keys[i] = mcdc_strdup(keys[i]);
        if (c->keys[i] == NULL) {
            c->n_keys = i;
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        }
    }
    c->n_keys = n;
    return MCDC_OK;
}

/* The instance as named, else the only case-insensitive match (§2.1.1). */
int mcdc_changes__resolve_instance(mcdc_changes *c, const char *want, mcdc_error *err) {
    mcdc_capture_instance *v = NULL;
    int n = 0;
    int rc = mcdc_cdc_capture_instances(&v, &n, c->client, NULL, NULL, err);
    if (rc != MCDC_OK) return rc;
    int exact = -1, ci_matches = 0, ci_at = -1;
    for (int i = 0; i < n; i++) {
        if (strcmp(v[i].name, want) == 0) exact = i;
        if (mcdc_str_ieq(v[i].name, want)) {
            ci_matches++;
            ci_at = i;
        }
    }
    int at = exact >= 0 ? exact : ci_matches == 1 ? ci_at : -1;
    if (at < 0) {
        char names[512] = "";
        for (int i = 0; i < n; i++) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", v[i].name);
        }
        /* The list holds only the instances this login may read: one it
         * may not read is a grant to ask for, not a name to correct. */
        int may = -1;
        char *user = NULL;
        mcdc_error probe = MCDC_ERROR_INIT;
        if (ci_matches == 0 && mcdc_cdc_may_read(&may, c->client, want, &probe) == MCDC_OK &&
            may == 0)
            (void)mcdc_cdc_user_name(&user, c->client, &probe);
        rc = may == 0
                 ? mcdc_error_set(err, MCDC_E_PERMISSION,
                                  "captureInstance '%s': this login may not read its change "
                                  "table cdc.[%s_CT], so the server lists it among none of its "
                                  "capture instances; a DBA must run: GRANT SELECT ON "
                                  "cdc.[%s_CT] TO [%s]; (snapshots and reconcile also read the "
                                  "table itself: GRANT SELECT on it too)",
                                  want, want, want, user ? user : "<user>")
             : ci_matches > 1
                 ? mcdc_error_set(err, MCDC_E_INVALID,
                                  "captureInstance '%s' matches %d capture instances that "
                                  "differ only in case; write the exact name",
                                  want, ci_matches)
                 : mcdc_error_set(err, MCDC_E_NOTFOUND,
                                  "captureInstance '%s' not found in this database (its "
                                  "capture instances: %s)",
                                  want, n ? names : "none; is CDC enabled here?");
        mcdc_free(user);
    } else {
        snprintf(c->ci, sizeof c->ci, "%s", v[at].name);
        c->instance_start = v[at].start_lsn;
        /* Kept for snapshots: the tracked table and its unique index. */
        mcdc_free(c->source_schema);
        mcdc_free(c->source_table);
        c->source_schema = v[at].source_schema;
        c->source_table = v[at].source_table;
        v[at].source_schema = v[at].source_table = NULL;
        rc = set_keys(c, (const char *const *)v[at].keys, v[at].n_keys, err);
    }
    mcdc_capture_instances_free(v, n);
    return rc;
}

const char *mcdc_changes_computed(const mcdc_changes *c) { return c->computed; }

const char *const *mcdc_changes_index_keys(const mcdc_changes *c, int *n) {
    *n = c->n_keys;
    return (const char *const *)c->keys;
}

void mcdc_changes_close(mcdc_changes *c) {
    if (c == NULL) return;
    mcdc_changes__follow_free(c);
    free_keys(c);
    mcdc_free(c->source_schema);
    mcdc_free(c->source_table);
    mcdc_free(c->computed);
    mcdc_cdc_client_free(c->client);
    mcdc_conn_close(c->control);
    mcdc_connstr_free(c->connstr);
    mcdc_schema_unref(c->captured);
    mcdc_free(c->reads);
    mcdc_schema_unref(c->schema);
    pthread_mutex_destroy(&c->mu);
    mcdc_free(c);
}

/* A handle that has its connector and retry settings and nothing read
 * yet (its control connection opens on the first CONTROL_CALL); *out is set
 * even on failure when allocated (close it). */
static int changes_new(mcdc_changes **out, const mcdc_opts *opts,
                       const mcdc_changes_settings *settings, mcdc_error *err) {
    const char *cs = mcdc_opt_connection_string(opts);
    mcdc_changes *c = mcdc_calloc(1, sizeof *c);
    *out = c;
    if (c == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    c->opts = opts;
    int rc = mcdc_connstr_parse(&c->connstr, cs, err);
    if (rc == MCDC_OK) {
        c->connector.connstr = c->connstr;
        c->connector.options = (mcdc_conn_options)MCDC_CONN_OPTIONS_INIT;
        int t = mcdc_opt_connect_timeout_s(opts);
        if (t > 0 && !(c->connstr->connect_timeout_s > 0))
            c->connector.options.login_timeout_s = t;
        int q = mcdc_opt_query_timeout_s(opts);
        if (q > 0) c->connector.options.query_timeout_s = q;
        const char *be = NULL;
        switch (mcdc_opt_backend(opts, &be)) {
        case MCDC_BACKEND_AUTO: break;
        case MCDC_BACKEND_NATIVE: c->connector.options.backend = "native"; break;
        case MCDC_BACKEND_FREETDS: c->connector.options.backend = "freetds"; break;
        case MCDC_BACKEND_REFERENCE:
            mcdc_log(MCDC_LOG_WARN, "backend '%s' is one of the reference's Python drivers; "
                                    "this build reads with its own: backend=auto", be);
            break;
        }
    }
    c->retries_max = MCDC_RETRIES_MAX;
    c->backoff_ms_first = MCDC_RETRY_BACKOFF_MS_FIRST;
    /* the caller's, else the options' (mssqlcdc_testing.h: every job takes it) */
    int64_t backoff = settings && settings->retry_backoff_ms > 0 ? settings->retry_backoff_ms
                                                                 : mcdc_opt_retry_backoff_ms(opts);
    if (backoff > 0 && backoff <= 60000) c->backoff_ms_first = (int)backoff;
    return rc;
}

int mcdc_changes_open(mcdc_changes **out, const mcdc_opts *opts,
                      const mcdc_changes_settings *settings, mcdc_error *err) {
    MCDC_ASSERT(out != NULL && opts != NULL);
    *out = NULL;
    const char *ci = mcdc_opt_capture_instance(opts);
    if (ci == NULL || mcdc_opt_connection_string(opts) == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "captureInstance and connectionString are required");
    int rc = mcdc_validate_capture_instance(ci, err);
    if (rc != MCDC_OK) return rc;
    mcdc_changes *c = NULL;
    rc = changes_new(&c, opts, settings, err);
    if (rc != MCDC_OK) {
        mcdc_changes_close(c);
        return rc;
    }
    bool follow = settings && settings->follow;
    /* An instance disabled after a newer one took over still names its
     * table, by its default name (reference §2.1.1) or through the names
     * the caller recorded (bronze's rows name them): snapshots, backfill,
     * apply, reconcile and repair read the instance of it that reads now. */
    if (rc == MCDC_OK && !follow)
        CONTROL_CALL(rc, c, err, mcdc_changes__resolve_followed(c, ci, settings, err));
    if (rc == MCDC_OK) {
        const char *tz = mcdc_opt_source_time_zone(opts);
        if (tz == NULL) /* auto */
            CONTROL_CALL(rc, c, err, mcdc_cdc_detect_clock(&c->clock, c->client, err));
        else
            rc = mcdc_clock_from_name(&c->clock, tz, err);
        if (rc == MCDC_OK && tz)
            CONTROL_CALL(rc, c, err, mcdc_cdc_check_zone(c->client, &c->clock, err));
        if (rc == MCDC_OK) {
            pthread_mutex_lock(&c->mu);
            if (c->client) mcdc_cdc_set_clock(c->client, &c->clock);
            pthread_mutex_unlock(&c->mu);
        }
    }
    mcdc_schema *all = NULL;
    uint8_t *all_reads = NULL;
    char *unreadable = NULL, *computed = NULL;
    const char *given = mcdc_opt_columns(opts);
    bool listed_columns = given && *given;
    c->explicit_columns = listed_columns;
    /* Following: every instance of the table, the union of their columns. */
    if (rc == MCDC_OK && follow)
        CONTROL_CALL(rc, c, err,
                     mcdc_changes__follow_open(c, ci, settings, listed_columns, &all, &all_reads,
                                               &unreadable, &computed, err));
    else if (rc == MCDC_OK)
        CONTROL_CALL(rc, c, err,
                     mcdc_reader_infer_columns(&all, &all_reads, &unreadable, &computed,
                                               listed_columns, c->client, c->ci, err));
    if (rc == MCDC_OK && computed && !listed_columns)
        mcdc_log(MCDC_LOG_WARN,
                 "%s captures computed column(s) %s, which CDC stores as NULL in every change "
                 "row: left out of the schema (list them in the columns option to keep them, "
                 "NULL in every row)",
                 c->ci, computed);
    c->computed = computed; /* kept: reconcile compares the columns but them */
    if (rc == MCDC_OK) {
        const char *ddl = mcdc_opt_columns(opts);
        if (ddl && *ddl) {
            rc = parse_columns(&c->captured, ddl, all, unreadable, err);
            if (rc == MCDC_OK) rc = listed_reads(&c->reads, c->captured, all, all_reads, err);
            mcdc_schema_unref(all);
        } else if (unreadable) {
            /* Only a stream that would read them stops (reference §2.2). */
            mcdc_schema_unref(all);
            rc = mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                "capture instance %s captures %s, whose SQL Server type has no "
                                "default type: pass the option columns listing the columns to "
                                "read (with a type for these, or without them)",
                                c->ci, unreadable);
        } else {
            c->captured = all;
            c->reads = all_reads;
            all_reads = NULL;
        }
    }
    mcdc_free(all_reads);
    mcdc_free(unreadable);
    bool with_cmd = mcdc_opt_include_command_id(opts);
    if (rc == MCDC_OK) rc = mcdc_reader_output_schema(&c->schema, c->captured, with_cmd, err);
    if (rc != MCDC_OK) {
        mcdc_changes_close(c);
        return rc;
    }
    mcdc_reader_options ro = MCDC_READER_OPTIONS_INIT;
    ro.capture_instance = c->ci;
    ro.include_command_id = with_cmd;
    ro.columns = c->captured;
    ro.reads = c->reads;
    ro.clock = c->clock;
    ro.batch_rows = mcdc_opt_arrow_batch_size(opts);
    ro.fail_on_data_loss = mcdc_opt_fail_on_data_loss(opts);
    ro.retries_max = c->retries_max;
    ro.backoff_ms_first = c->backoff_ms_first;
    c->ropt = ro;
    if (follow && (rc = mcdc_changes__follow_ready(c, err)) != MCDC_OK) {
        mcdc_changes_close(c);
        return rc;
    }
    *out = c;
    return MCDC_OK;
}

mcdc_schema *mcdc_changes_schema(mcdc_changes *c) { return c->schema; }
const char *mcdc_changes_capture_instance(const mcdc_changes *c) { return c->ci; }

/* ---- positions (control connection) ------------------------------------------------- */
int mcdc_changes_max_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_max_lsn(out, NULL, c->client, err));
    return rc;
}

/* The instance a stream starts on: the table's oldest when following (a
 * batch reads it below the newer one's start), else the one it reads. */
static const char *first_instance(const mcdc_changes *c, mcdc_lsn *start) {
    if (c->follow && c->n_inst > 0) {
        if (start) *start = c->inst[0].start_lsn;
        return c->inst[0].name;
    }
    if (start) *start = c->instance_start;
    return c->ci;
}

int mcdc_changes_min_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_min_lsn(out, c->client, first_instance(c, NULL), err));
    return rc;
}

/* The instance a stream reads `at` from (see mcdc_changes_min_lsn_at). */
static const char *instance_at(const mcdc_changes *c, const mcdc_lsn *at, const char *read_ci) {
    if (!c->follow || c->n_inst == 0) return c->ci;
    int pick = mcdc_changes__follow_floor(c, read_ci);
    for (int i = pick + 1; i < c->n_inst; i++)
        if (!mcdc_lsn_is_zero(&c->inst[i].start_lsn) && mcdc_lsn_cmp(&c->inst[i].start_lsn, at) <= 0)
            pick = i;
    return c->inst[pick].name;
}

int mcdc_changes_min_lsn_at(mcdc_changes *c, const mcdc_lsn *at, const char *read_ci,
                            mcdc_lsn *out, mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_min_lsn(out, c->client, instance_at(c, at, read_ci), err));
    return rc;
}

/* The client returns the last of up to n entries; found means n existed. */
static int nth_commit(mcdc_changes *c, const mcdc_lsn *start, int64_t n, mcdc_lsn *out,
                      bool *found, mcdc_error *err) {
    int rc = mcdc_cdc_nth_commit_after(out, found, c->client, start, n, err);
    if (rc == MCDC_OK && *found && n > 1) {
        char hex[MCDC_LSN_TEXT_LEN + 1], sql[300], *t = NULL;
        mcdc_lsn_format(start, hex);
        const char *p[] = {hex};
        snprintf(sql, sizeof sql,
                 "SELECT COUNT_BIG(*) FROM (SELECT TOP (%lld) m.start_lsn FROM "
                 "cdc.lsn_time_mapping AS m WHERE m.start_lsn > CONVERT(binary(10), ?, 1) "
                 "ORDER BY m.start_lsn) AS t",
                 (long long)n);
        rc = mcdc_conn_scalar(&t, c->control, sql, p, 1, err);
        int64_t have = 0;
        if (rc == MCDC_OK && t && mcdc_parse_i64(t, &have) == MCDC_OK) *found = have >= n;
        mcdc_free(t);
    }
    return rc;
}

int mcdc_changes_nth_commit_after(mcdc_changes *c, const mcdc_lsn *start, int64_t n,
                                  mcdc_lsn *out, bool *found, mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, nth_commit(c, start, n, out, found, err));
    return rc;
}

int mcdc_changes_time_to_lsn(mcdc_changes *c, int64_t utc_us, mcdc_lsn *out, bool *found,
                             mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_time_to_lsn(out, found, c->client, utc_us, err));
    return rc;
}

int mcdc_changes_server_now(mcdc_changes *c, int64_t *utc_us, mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_utc_now(utc_us, c->client, err));
    return rc;
}

static int capture_health(mcdc_changes *c, mcdc_capture_health *out, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    mcdc_lsn max;
    bool was_null = false;
    int rc = mcdc_cdc_max_lsn(&max, &was_null, c->client, err);
    if (rc == MCDC_OK && !was_null) {
        mcdc_lsn_format(&max, out->max_lsn);
        rc = mcdc_cdc_lsn_to_time(&out->max_commit_us, &out->has_max_commit, c->client, &max, true,
                                  err);
    }
    if (rc == MCDC_OK) rc = mcdc_cdc_capture_health(out, c->client, err);
    if (rc == MCDC_OK) rc = mcdc_cdc_utc_now(&out->server_now_us, c->client, err);
    return rc;
}

int mcdc_changes_capture_health(mcdc_changes *c, mcdc_capture_health *out, mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, capture_health(c, out, err));
    return rc;
}

int mcdc_changes_change_table_rows(mcdc_changes *c, mcdc_change_table_rows **out, size_t *n,
                                   bool *visible, mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_change_table_rows(out, n, visible, c->client, err));
    return rc;
}

/* The change tables are read before cdc.change_tables: a cleanup raises an
 * instance's start_lsn before it deletes the rows below it, so a start_lsn
 * read afterwards at or below an item's position says that none of its rows
 * past it had gone when its change table was found empty there. */
static int probe_round(mcdc_changes *c, mcdc_probe_item *items, int n, bool every, mcdc_lsn *max,
                       bool *max_null, int *queries, mcdc_error *err) {
    (*queries)++;
    int rc = mcdc_cdc_max_lsn(max, max_null, c->client, err);
    const mcdc_lsn *lowest = NULL; /* the lowest position behind max asked about */
    for (int i = 0; i < n; i++) {
        items[i].moved = items[i].has_min = false;
        if (rc == MCDC_OK && items[i].ask && mcdc_lsn_cmp(&items[i].from, max) < 0 &&
            (lowest == NULL || mcdc_lsn_cmp(&items[i].from, lowest) < 0))
            lowest = &items[i].from;
    }
    if (rc == MCDC_OK && lowest) rc = mcdc_cdc_probe_moved(c->client, items, n, max, queries, err);
    if (rc == MCDC_OK && (lowest || every)) {
        (*queries)++;
        rc = mcdc_cdc_probe_min_lsns(c->client, items, n, lowest, err);
    }
    return rc;
}

int mcdc_changes_probe_round(mcdc_changes *c, mcdc_probe_item *items, int n, bool every,
                             mcdc_lsn *max, bool *max_null, int *queries, mcdc_error *err) {
    MCDC_ASSERT(n >= 0 && (n == 0 || items != NULL));
    int rc;
    *queries = 0; /* a retried round counts every statement it sent */
    CONTROL_CALL(rc, c, err, probe_round(c, items, n, every, max, max_null, queries, err));
    return rc;
}

int mcdc_changes_commit_time(mcdc_changes *c, const mcdc_lsn *lsn, int64_t *utc_us, bool *found,
                             mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_lsn_to_time(utc_us, found, c->client, lsn, true, err));
    return rc;
}

int mcdc_changes_commit_time_exact(mcdc_changes *c, const mcdc_lsn *lsn, int64_t *utc_us,
                                   bool *found, mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, mcdc_cdc_lsn_to_time(utc_us, found, c->client, lsn, false, err));
    return rc;
}

static int initial(mcdc_changes *c, const char *starting_lsn, mcdc_lsn *out, mcdc_error *err) {
    int rc = MCDC_OK;
    mcdc_lsn first_start;
    const char *first = first_instance(c, &first_start);
    if (starting_lsn == NULL || mcdc_str_ieq(starting_lsn, "earliest")) {
        mcdc_lsn min;
        rc = mcdc_cdc_min_lsn(&min, c->client, first, err);
        /* A zero min_lsn: capture has not processed the enable yet; the
         * instance's own start is the first LSN it can hold. */
        if (rc == MCDC_OK && mcdc_lsn_is_zero(&min)) min = first_start;
        if (rc == MCDC_OK && mcdc_lsn_is_zero(&min)) *out = min;
        else if (rc == MCDC_OK) rc = mcdc_cdc_decrement_lsn(out, c->client, &min, err);
    } else if (mcdc_str_ieq(starting_lsn, "latest")) {
        rc = mcdc_cdc_max_lsn(out, NULL, c->client, err);
        /* Capture has not reached a freshly enabled instance: start just
         * before the instance's first LSN. */
        if (rc == MCDC_OK && !mcdc_lsn_is_zero(&first_start) && mcdc_lsn_cmp(out, &first_start) < 0)
            rc = mcdc_cdc_decrement_lsn(out, c->client, &first_start, err);
    } else {
        rc = mcdc_lsn_parse_cstr(out, starting_lsn, err);
        if (rc != MCDC_OK) mcdc_error_wrap(err, "startingLsn");
    }
    return rc;
}

int mcdc_changes_initial(mcdc_changes *c, const char *starting_lsn, mcdc_lsn *out,
                         mcdc_error *err) {
    int rc;
    CONTROL_CALL(rc, c, err, initial(c, starting_lsn, out, err));
    return rc;
}

/* ---- planning (§3.6) -------------------------------------------------------------------- */
/* [from, to] of instance ci in commit-aligned ranges tagged `instance`. */
static int plan_ranges(mcdc_changes *c, const char *ci, int32_t instance, const mcdc_lsn *from,
                       const mcdc_lsn *to, int n_max, mcdc_lsn_range **out, int *n_out,
                       mcdc_error *err) {
    *out = NULL;
    *n_out = 0;
    if (mcdc_lsn_cmp(to, from) < 0) return MCDC_OK; /* invariant 3: nothing to read */
    mcdc_split_point *sp = NULL;
    int nsp = 0, rc = MCDC_OK;
    if (n_max > 1) {
        /* A newer instance's change table may be one the login cannot read. */
        CONTROL_CALL(rc, c, err,
                     (rc = mcdc_cdc_split_points(&sp, &nsp, c->client, ci, from, to, n_max, err))
                         ? mcdc_reader_diagnose_error(c->client, ci, rc, err)
                         : MCDC_OK);
        if (rc != MCDC_OK) return rc;
    }
    mcdc_lsn_range *lr = NULL;
    int n = 0;
    rc = mcdc_reader_plan_ranges(&lr, &n, sp, nsp, from, to, MCDC_MIN_ROWS_PER_RANGE, err);
    mcdc_free(sp);
    if (rc != MCDC_OK) return rc;
    for (int i = 0; i < n; i++) lr[i].instance = instance;
    *out = lr;
    *n_out = n;
    return MCDC_OK;
}

int mcdc_changes_plan(mcdc_changes *c, const mcdc_lsn *from, const mcdc_lsn *to, int n_max,
                      mcdc_lsn_range **out, int *n_out, mcdc_error *err) {
    return plan_ranges(c, c->ci, 0, from, to, n_max, out, n_out, err);
}

int mcdc_changes_plan_piece(mcdc_changes *c, const mcdc_changes_piece *p, int n_max,
                            mcdc_lsn_range **out, int *n_out, mcdc_error *err) {
    MCDC_ASSERT(c->follow && p->instance >= 0 && p->instance < c->n_inst);
    return plan_ranges(c, p->ci, p->instance + 1, &p->from, &p->to, n_max, out, n_out, err);
}

/* ---- reading ------------------------------------------------------------------------------ */
int mcdc_changes_read(mcdc_changes *c, const mcdc_lsn_range *r, mcdc_batch_fn fn, void *ctx,
                      mcdc_reader_metrics *m, mcdc_error *err) {
    mcdc_reader_metrics scratch;
    mcdc_connstr_connector conn = c->connector;
    mcdc_reader_options o = mcdc_changes__range_options(c, r);
    return mcdc_reader_read_range(m ? m : &scratch, &o, mcdc_connect_connstr, &conn, &r->from,
                                  &r->to, r->last, fn, ctx, err);
}

/* The verdicts of find_instances, on the control connection. */
static int find_on_client(mcdc_changes *c, const char *const *names, size_t n, int *found,
                          mcdc_error *err) {
    mcdc_capture_instance *v = NULL;
    int nv = 0;
    int rc = mcdc_cdc_capture_instances(&v, &nv, c->client, NULL, NULL, err);
    for (size_t i = 0; rc == MCDC_OK && i < n; i++) {
        int exact = 0, folded = 0;
        for (int k = 0; k < nv; k++) {
            exact += strcmp(v[k].name, names[i]) == 0;
            folded += mcdc_str_ieq(v[k].name, names[i]);
        }
        found[i] = exact || folded == 1 ? MCDC_INSTANCE_LISTED : MCDC_INSTANCE_UNKNOWN;
        if (found[i] == MCDC_INSTANCE_LISTED || folded > 1) continue;
        /* the list holds only what this login may read: one it may not read
         * exists (a grant to ask for), one without an object does not */
        int may = -1;
        rc = mcdc_validate_capture_instance(names[i], err);
        if (rc == MCDC_OK) rc = mcdc_cdc_may_read(&may, c->client, names[i], err);
        if (rc == MCDC_OK && may == 0) found[i] = MCDC_INSTANCE_UNREADABLE;
    }
    mcdc_capture_instances_free(v, nv);
    return rc;
}

int mcdc_changes_find_instances(const mcdc_opts *opts, const char *const *names, size_t n,
                                int *found, mcdc_error *err) {
    MCDC_ASSERT(opts != NULL && (names != NULL || n == 0) && (found != NULL || n == 0));
    if (mcdc_opt_connection_string(opts) == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "connectionString is required");
    mcdc_changes *c = NULL;
    int rc = changes_new(&c, opts, NULL, err);
    if (rc == MCDC_OK) CONTROL_CALL(rc, c, err, find_on_client(c, names, n, found, err));
    mcdc_changes_close(c);
    return rc;
}
