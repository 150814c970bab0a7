/*
 * cli_metrics.c - start-many's HTTP listener (cli_metrics.h): one
 * libmicrohttpd daemon (its own polling thread) serving what the streams
 * reported and what the capture probe polled, and the probe's thread.
 *
 * Every table's numbers live in one array under one mutex: a stream's
 * report writes a few fields, a scrape copies them out and renders without
 * the lock. The lag is computed at the scrape from the probe's newest
 * commit (polled, so never stale when a table is idle) and the table's
 * processed position (its last batch's end): 0 when the table has reached
 * the source's max_lsn.
 */
#include "cli_metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"

extern const char *const CLI_STATUS_PAGE[]; /* cli_status_page.c: its lines */

/* What the page and the JSON call a table's state. */
typedef enum {
    ST_PENDING = 0, /* its thread has not started */
    ST_STARTING,    /* started: bootstrap or resume, no batch yet */
    ST_SNAPSHOT,    /* taking a snapshot (bootstrap, re-snapshot, switch) */
    ST_RUNNING,     /* committed a batch in this run */
    ST_DONE,
    ST_STOPPED,
    ST_FAILED,
    ST_COUNT
} tstate;
static const char *const STATE_NAMES[ST_COUNT] = {"pending", "starting", "snapshotting",
                                                  "running", "done",    "stopped", "failed"};

typedef struct tstat {
    const char *ci;
    tstate state;
    int64_t rows, batches;
    double last_duration_s;
    bool has_batch;
    char end_lsn[24];
    bool has_end_commit;
    int64_t end_commit_us;
    double report_lag_s; /* the batch's own; < 0 unknown */
    bool has_headroom;
    double headroom_h;
    bool has_verdict;
    int64_t verdict_us, verdict_moved_mono_us;
    int status; /* the error that stopped it */
    char kind[40];
    char message[512];
    bool snap_active;
    int64_t snap_done, snap_total;
    char caught_up_lsn[24]; /* a copy's: cfg.caught_up's answer ("": none) */
} tstat;

struct cli_metrics {
    cli_metrics_cfg cfg;
    struct MHD_Daemon *daemon;
    char *page; /* CLI_STATUS_PAGE joined */
    size_t page_len;
    pthread_mutex_t mu;
    tstat *t;
    /* the probe's (under mu) */
    bool polled, probe_up, has_health;
    mcdc_capture_health health;
    int64_t probe_errors;
    /* the probe's thread */
    pthread_t poller;
    bool poller_started;
    pthread_cond_t wake;
    bool stopping;
};

static int64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t utc_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- inputs ------------------------------------------------------------------------ */

static bool parse_listen(const char *listen, struct sockaddr_in *out) {
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    if (colon == NULL || colon == listen || colon - listen > 15 || colon[1] == 0) return false;
    char host[16];
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = 0;
    char *end = NULL;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || *end || port < 0 || port > 65535) return false;
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &out->sin_addr) == 1;
}

int cli_metrics_check_listen(const char *listen) {
    struct sockaddr_in a;
    if (parse_listen(listen, &a)) return EXIT_OK;
    return cli_usage_error("--metrics-listen '%s' is not IPv4-ADDRESS:PORT (e.g. "
                           "127.0.0.1:9464; port 0 picks a free one)",
                           listen ? listen : "");
}

void cli_metrics_database(const char *cs, char *out, size_t cap) {
    static const char *const KEYS[] = {"database", "initial catalog", "databasename"};
    out[0] = 0;
    for (const char *p = cs; p && *p;) {
        const char *semi = strchr(p, ';'), *end = semi ? semi : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        while (eq && p < eq && (*p == ' ' || *p == '\t')) p++;
        for (size_t k = 0; eq && k < sizeof KEYS / sizeof KEYS[0]; k++) {
            size_t n = strlen(KEYS[k]);
            const char *ke = eq;
            while (ke > p && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
            if ((size_t)(ke - p) == n && strncasecmp(p, KEYS[k], n) == 0) {
                const char *v = eq + 1;
                while (v < end && *v == ' ') v++;
                size_t len = (size_t)(end - v);
                if (len >= cap) len = cap - 1;
                memcpy(out, v, len);
                out[len] = 0;
            }
        }
        p = semi ? semi + 1 : end;
    }
}

/* ---- the streams' events ------------------------------------------------------------ */

void cli_metrics_started(cli_metrics *m, size_t i) {
    if (m == NULL) return;
    pthread_mutex_lock(&m->mu);
    if (m->t[i].state == ST_PENDING) m->t[i].state = ST_STARTING;
    pthread_mutex_unlock(&m->mu);
}

void cli_metrics_batch(cli_metrics *m, size_t i, const mcdc_batch_report *r) {
    if (m == NULL) return;
    pthread_mutex_lock(&m->mu);
    tstat *t = &m->t[i];
    t->state = ST_RUNNING;
    t->rows += r->rows;
    t->batches++;
    t->has_batch = true;
    t->last_duration_s = r->duration_ms / 1000.0;
    snprintf(t->end_lsn, sizeof t->end_lsn, "%s", r->end_lsn);
    t->has_end_commit = r->has_end_commit;
    t->end_commit_us = r->end_commit_us;
    t->report_lag_s = r->ingestion_lag_seconds;
    t->has_headroom = r->has_retention_headroom;
    t->headroom_h = r->retention_headroom_hours;
    if (r->has_verdict && (!t->has_verdict || r->finalized_until_us != t->verdict_us)) {
        t->verdict_us = r->finalized_until_us;
        t->verdict_moved_mono_us = mono_us();
    }
    t->has_verdict = r->has_verdict;
    t->snap_active = false;
    pthread_mutex_unlock(&m->mu);
}

void cli_metrics_progress(cli_metrics *m, size_t i, const mcdc_progress *p) {
    if (m == NULL || p->job == NULL || strcmp(p->job, "snapshot") != 0) return;
    pthread_mutex_lock(&m->mu);
    tstat *t = &m->t[i];
    t->snap_active = !p->done;
    t->snap_done = p->rows_done;
    t->snap_total = p->rows_total;
    if (t->state == ST_STARTING && !p->done) t->state = ST_SNAPSHOT;
    pthread_mutex_unlock(&m->mu);
}

void cli_metrics_ended(cli_metrics *m, size_t i, const char *state, int status,
                       const char *message) {
    if (m == NULL) return;
    pthread_mutex_lock(&m->mu);
    tstat *t = &m->t[i];
    t->state = strcmp(state, "failed") == 0 ? ST_FAILED
               : strcmp(state, "stopped") == 0 ? ST_STOPPED
                                               : ST_DONE;
    t->status = status;
    if (t->state == ST_FAILED) {
        snprintf(t->kind, sizeof t->kind, "%s", mcdc_status_kind(status));
        snprintf(t->message, sizeof t->message, "%s", message ? message : "");
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- the capture probe's thread ------------------------------------------------------ */

static void *poll_run(void *arg) {
    cli_metrics *m = arg;
    mcdc_capture_probe *probe = NULL;
    size_t next = 0; /* the table whose options the probe opens with next */
    bool was_up = true;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        pthread_mutex_unlock(&m->mu);
        mcdc_error e = MCDC_ERROR_INIT;
        mcdc_capture_health h;
        memset(&h, 0, sizeof h);
        int rc = MCDC_OK;
        /* a table's instance this login may not resolve is not the probe's
         * end: the next poll opens it with the next table's */
        if (probe == NULL && (rc = mcdc_capture_probe_open(&probe, m->cfg.opts[next], &e)))
            next = (next + 1) % m->cfg.n;
        if (rc == MCDC_OK) rc = mcdc_capture_probe_read(probe, &h, &e);
        if (rc && was_up)
            fprintf(stderr, "mssql-cdc: metrics: the capture probe failed (%s): %s; the "
                            "streams go on, mssql_cdc_capture_probe_up is 0 until it answers\n",
                    mcdc_status_kind(rc), e.message);
        was_up = rc == MCDC_OK;
        pthread_mutex_lock(&m->mu);
        m->polled = true;
        m->probe_up = rc == MCDC_OK;
        if (rc == MCDC_OK) {
            m->health = h;
            m->has_health = true;
        } else {
            m->probe_errors++;
        }
        if (m->stopping) break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = (int64_t)(m->cfg.poll_seconds * 1e9) + until.tv_nsec;
        until.tv_sec += (time_t)(ns / 1000000000);
        until.tv_nsec = (long)(ns % 1000000000);
        while (!m->stopping && pthread_cond_timedwait(&m->wake, &m->mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&m->mu);
    mcdc_capture_probe_free(probe);
    return NULL;
}

/* ---- a consistent copy, and the lag ---------------------------------------------------- */

typedef struct snap {
    tstat *t;
    size_t n;
    bool polled, probe_up, has_health;
    mcdc_capture_health h;
    int64_t probe_errors;
    int64_t now_us, now_mono_us;
} snap;

static bool take(cli_metrics *m, snap *s) {
    s->t = malloc(sizeof *s->t * (m->cfg.n ? m->cfg.n : 1));
    if (s->t == NULL) return false;
    pthread_mutex_lock(&m->mu);
    memcpy(s->t, m->t, sizeof *s->t * m->cfg.n);
    s->n = m->cfg.n;
    s->polled = m->polled;
    s->probe_up = m->probe_up;
    s->has_health = m->has_health;
    s->h = m->health;
    s->probe_errors = m->probe_errors;
    pthread_mutex_unlock(&m->mu);
    s->now_us = utc_us();
    s->now_mono_us = mono_us();
    for (size_t i = 0; i < s->n; i++)
        if (!m->cfg.caught_up || !m->cfg.caught_up(m->cfg.caught_up_user, i, s->t[i].caught_up_lsn))
            s->t[i].caught_up_lsn[0] = 0;
    return true;
}

/* The table's ingestion lag in seconds; false: unknown (no batch yet). */
static bool lag_of(const snap *s, const tstat *t, double *out) {
    if (!t->has_batch) return false;
    if (s->has_health && s->h.max_lsn[0]) {
        if (strcasecmp(t->end_lsn, s->h.max_lsn) >= 0 || /* fixed-width hex: text order */
            (t->caught_up_lsn[0] && strcasecmp(t->caught_up_lsn, s->h.max_lsn) >= 0)) {
            *out = 0;
            return true;
        }
        if (s->h.has_max_commit && t->has_end_commit) {
            double d = (double)(s->h.max_commit_us - t->end_commit_us) / 1e6;
            *out = d > 0 ? d : 0;
            return true;
        }
    }
    if (t->report_lag_s < 0) return false;
    *out = t->report_lag_s;
    return true;
}

static bool ready_all(const snap *s) {
    for (size_t i = 0; i < s->n; i++)
        if (s->t[i].state != ST_RUNNING && s->t[i].state != ST_DONE) return false;
    return true;
}

/* ---- OpenMetrics --------------------------------------------------------------------- */

static void label_value(FILE *f, const char *v) {
    for (; *v; v++) {
        if (*v == '\\') fputs("\\\\", f);
        else if (*v == '"') fputs("\\\"", f);
        else if (*v == '\n') fputs("\\n", f);
        else fputc(*v, f);
    }
}

static void family(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# TYPE %s %s\n# HELP %s %s\n", name, type, name, help);
}

/* name{database="..",capture_instance=".."<extra>} */
static void sample(FILE *f, const cli_metrics *m, const char *name, const char *ci) {
    fprintf(f, "%s{database=\"", name);
    label_value(f, m->cfg.database);
    if (ci) {
        fputs("\",capture_instance=\"", f);
        label_value(f, ci);
    }
    fputc('"', f);
}

static void value_d(FILE *f, double v) {
    fprintf(f, "} %.17g\n", v);
}

static void value_i(FILE *f, int64_t v) {
    fprintf(f, "} %lld\n", (long long)v);
}

typedef enum { G_ROWS, G_BATCHES, G_DURATION, G_LAG, G_HEADROOM, G_PROCESSED, G_VERDICT_AGE,
               G_VERDICT_STILL, G_SNAPSHOT } table_gauge;

static const struct {
    const char *name, *type, *help;
} TABLE_FAMILIES[] = {
    {"mssql_cdc_rows", "counter", "Change rows written to the table's bronze in this run."},
    {"mssql_cdc_batches", "counter", "Micro-batches committed in this run."},
    {"mssql_cdc_last_batch_duration_seconds", "gauge", "Wall time of the last batch."},
    {"mssql_cdc_ingestion_lag_seconds", "gauge",
     "The source's newest commit time minus the table's processed commit time (0 when caught "
     "up)."},
    {"mssql_cdc_retention_headroom_hours", "gauge",
     "Hours between the table's processed commit and the oldest change CDC cleanup keeps."},
    {"mssql_cdc_processed_commit_timestamp_seconds", "gauge",
     "Commit time (UTC) of the table's last processed LSN."},
    {"mssql_cdc_verdict_age_seconds", "gauge",
     "Now minus the verdict's finalized_until (tables with a control table)."},
    {"mssql_cdc_verdict_unmoved_seconds", "gauge",
     "Seconds since the verdict last moved in this run."},
    {"mssql_cdc_snapshot_rows_done", "gauge", "Rows of the running snapshot read so far."},
};

/* One table's sample of family g; false: none (unknown). */
static bool table_value(const snap *s, const tstat *t, table_gauge g, double *v) {
    switch (g) {
    case G_ROWS: *v = (double)t->rows; return true;
    case G_BATCHES: *v = (double)t->batches; return true;
    case G_DURATION: *v = t->last_duration_s; return t->has_batch;
    case G_LAG: return lag_of(s, t, v);
    case G_HEADROOM: *v = t->headroom_h; return t->has_batch && t->has_headroom;
    case G_PROCESSED: *v = (double)t->end_commit_us / 1e6; return t->has_batch && t->has_end_commit;
    case G_VERDICT_AGE: *v = (double)(s->now_us - t->verdict_us) / 1e6; return t->has_verdict;
    case G_VERDICT_STILL:
        *v = (double)(s->now_mono_us - t->verdict_moved_mono_us) / 1e6;
        return t->has_verdict;
    case G_SNAPSHOT: *v = (double)t->snap_done; return t->snap_active;
    }
    return false;
}

static void render_tables(FILE *f, const cli_metrics *m, const snap *s) {
    for (int g = 0; g <= G_SNAPSHOT; g++) {
        bool counter = g == G_ROWS || g == G_BATCHES;
        family(f, TABLE_FAMILIES[g].name, TABLE_FAMILIES[g].type, TABLE_FAMILIES[g].help);
        char name[96];
        snprintf(name, sizeof name, "%s%s", TABLE_FAMILIES[g].name, counter ? "_total" : "");
        for (size_t i = 0; i < s->n; i++) {
            double v;
            if (!table_value(s, &s->t[i], (table_gauge)g, &v)) continue;
            sample(f, m, name, s->t[i].ci);
            if (counter) value_i(f, (int64_t)v);
            else value_d(f, v);
        }
    }
    family(f, "mssql_cdc_errors", "counter", "Errors that stopped the table, by kind.");
    for (size_t i = 0; i < s->n; i++) {
        if (s->t[i].state != ST_FAILED) continue;
        sample(f, m, "mssql_cdc_errors_total", s->t[i].ci);
        fputs(",kind=\"", f);
        label_value(f, s->t[i].kind);
        fputc('"', f);
        value_i(f, 1);
    }
    /* a gauge per state rather than a stateset: one Prometheus' text
     * format (and promtool check metrics) reads as well */
    family(f, "mssql_cdc_table_state", "gauge",
           "1 for the table's stream state (label state), 0 for the others.");
    for (size_t i = 0; i < s->n; i++)
        for (int k = 0; k < ST_COUNT; k++) {
            sample(f, m, "mssql_cdc_table_state", s->t[i].ci);
            fprintf(f, ",state=\"%s\"", STATE_NAMES[k]);
            value_i(f, s->t[i].state == (tstate)k);
        }
    family(f, "mssql_cdc_ready", "gauge", "1 when every table has started and runs (/readyz).");
    sample(f, m, "mssql_cdc_ready", NULL);
    value_i(f, ready_all(s));
}

static void db_gauge(FILE *f, const cli_metrics *m, const char *name, const char *help, double v,
                     bool integer) {
    family(f, name, "gauge", help);
    sample(f, m, name, NULL);
    if (integer) value_i(f, (int64_t)v);
    else value_d(f, v);
}

static void render_database(FILE *f, const cli_metrics *m, const snap *s) {
    family(f, "mssql_cdc_capture_probe_errors", "counter",
           "Capture probe polls that failed (connection, query).");
    sample(f, m, "mssql_cdc_capture_probe_errors_total", NULL);
    value_i(f, s->probe_errors);
    db_gauge(f, m, "mssql_cdc_capture_probe_up", "1 when the last capture probe poll answered.",
             s->probe_up, true);
    if (!s->has_health) return;
    const mcdc_capture_health *h = &s->h;
    if (h->has_max_commit)
        db_gauge(f, m, "mssql_cdc_source_max_commit_timestamp_seconds",
                 "Commit time (UTC) of the source's max_lsn.", (double)h->max_commit_us / 1e6,
                 false);
    db_gauge(f, m, "mssql_cdc_capture_health_visible",
             "1 when the login may read the capture DMVs (VIEW DATABASE STATE); 0: the "
             "capture health metrics are absent.",
             h->visible, true);
    if (!h->visible) return;
    db_gauge(f, m, "mssql_cdc_capture_latency_seconds",
             "sys.dm_cdc_log_scan_sessions session 0 latency: the last non-zero one.",
             h->latency_seconds, false);
    if (h->has_last_scan_end) {
        db_gauge(f, m, "mssql_cdc_capture_last_scan_end_timestamp_seconds",
                 "End (UTC) of the capture job's newest log scan session.",
                 (double)h->last_scan_end_us / 1e6, false);
        db_gauge(f, m, "mssql_cdc_capture_last_scan_age_seconds",
                 "The server's clock now minus the newest scan session's end (grows while the "
                 "capture job is stopped).",
                 (double)(h->server_now_us - h->last_scan_end_us) / 1e6, false);
    }
    db_gauge(f, m, "mssql_cdc_capture_session_errors",
             "Session 0 error_count: errors of every scan since the instance started.",
             (double)h->error_count, true);
    db_gauge(f, m, "mssql_cdc_capture_failed_sessions",
             "Session 0 failed_sessions_count.", (double)h->failed_sessions, true);
    db_gauge(f, m, "mssql_cdc_capture_transactions",
             "Session 0 tran_count: transactions captured since the instance started.",
             (double)h->transactions, true);
    db_gauge(f, m, "mssql_cdc_capture_empty_scans",
             "The newest session's empty_scan_count: empty scans in a row.",
             (double)h->empty_scans, true);
    db_gauge(f, m, "mssql_cdc_capture_errors_listed",
             "Rows of sys.dm_cdc_errors (errors of the last 32 sessions).",
             (double)h->errors_listed, true);
}

static char *render_metrics(cli_metrics *m, size_t *len) {
    snap s;
    if (!take(m, &s)) return NULL;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (f) {
        render_tables(f, m, &s);
        render_database(f, m, &s);
        fputs("# EOF\n", f);
        fclose(f);
    }
    free(s.t);
    return buf;
}

/* ---- status.json ---------------------------------------------------------------------- */

static void json_str(FILE *f, const char *v) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, const char *key, bool known, double v) {
    fprintf(f, ",\"%s\":", key);
    if (known && isfinite(v)) fprintf(f, "%.17g", v);
    else fputs("null", f);
}

static char *render_status(cli_metrics *m, size_t *len) {
    snap s;
    if (!take(m, &s)) return NULL;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (f) {
        fputs("{\"database\":", f);
        json_str(f, m->cfg.database);
        fprintf(f, ",\"now\":%.3f,\"ready\":%s,\"lag_problem_seconds\":%.17g,\"capture\":{",
                (double)s.now_us / 1e6, ready_all(&s) ? "true" : "false", m->cfg.lag_problem_s);
        fprintf(f, "\"probe_up\":%s,\"visible\":%s", s.probe_up ? "true" : "false",
                s.has_health && s.h.visible ? "true" : "false");
        json_num(f, "latency_seconds", s.has_health && s.h.visible, s.h.latency_seconds);
        json_num(f, "last_scan_age_seconds", s.has_health && s.h.has_last_scan_end,
                 (double)(s.h.server_now_us - s.h.last_scan_end_us) / 1e6);
        json_num(f, "errors_listed", s.has_health && s.h.visible, (double)s.h.errors_listed);
        fputs("},\"tables\":[", f);
        for (size_t i = 0; i < s.n; i++) {
            const tstat *t = &s.t[i];
            double lag = 0;
            bool has_lag = lag_of(&s, t, &lag);
            fputs(i ? ",{\"capture_instance\":" : "{\"capture_instance\":", f);
            json_str(f, t->ci);
            fputs(",\"state\":", f);
            json_str(f, STATE_NAMES[t->state]);
            fprintf(f, ",\"rows\":%lld,\"batches\":%lld", (long long)t->rows,
                    (long long)t->batches);
            json_num(f, "lag_seconds", has_lag, lag);
            json_num(f, "headroom_hours", t->has_batch && t->has_headroom, t->headroom_h);
            json_num(f, "last_batch_seconds", t->has_batch, t->last_duration_s);
            json_num(f, "verdict_age_seconds", t->has_verdict,
                     (double)(s.now_us - t->verdict_us) / 1e6);
            fputs(",\"error\":", f);
            if (t->state == ST_FAILED) {
                fputs("{\"kind\":", f);
                json_str(f, t->kind);
                fputs(",\"message\":", f);
                json_str(f, t->message);
                fputc('}', f);
            } else {
                fputs("null", f);
            }
            fputs(",\"snapshot\":", f);
            if (t->snap_active)
                fprintf(f, "{\"rows_done\":%lld,\"rows_total\":%lld}", (long long)t->snap_done,
                        (long long)t->snap_total);
            else
                fputs("null", f);
            fputc('}', f);
        }
        fputs("]}\n", f);
        fclose(f);
    }
    free(s.t);
    return buf;
}

/* ---- HTTP ------------------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int code, const char *type,
                             char *body, size_t len, bool owned) {
    struct MHD_Response *r =
        owned ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
              : MHD_create_response_from_buffer(len, body, MHD_RESPMEM_PERSISTENT);
    if (r == NULL) {
        if (owned) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned int code, const char *msg) {
    return reply(c, code, "text/plain; charset=utf-8", (char *)msg, strlen(msg), false);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req) {
    (void)version;
    (void)upload;
    (void)req;
    cli_metrics *m = cls;
    if (*upload_size) return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
    size_t len = 0;
    char *body = NULL;
    if (strcmp(url, "/metrics") == 0) {
        body = render_metrics(m, &len);
        return body ? reply(c, MHD_HTTP_OK,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8", body,
                            len, true)
                    : text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    if (strcmp(url, "/status.json") == 0) {
        body = render_status(m, &len);
        return body ? reply(c, MHD_HTTP_OK, "application/json", body, len, true)
                    : text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    if (strcmp(url, "/healthz") == 0) return text(c, MHD_HTTP_OK, "ok: alive\n");
    if (strcmp(url, "/readyz") == 0) {
        snap s;
        if (!take(m, &s)) return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        size_t waiting = 0, failed = 0;
        for (size_t i = 0; i < s.n; i++) {
            waiting += s.t[i].state < ST_RUNNING;
            failed += s.t[i].state > ST_DONE;
        }
        free(s.t);
        if (waiting == 0 && failed == 0) return text(c, MHD_HTTP_OK, "ready: every table runs\n");
        char msg[160];
        snprintf(msg, sizeof msg, "not ready: %zu tables not started yet, %zu stopped or failed\n",
                 waiting, failed);
        body = strdup(msg);
        return body ? reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", body,
                            strlen(body), true)
                    : MHD_NO;
    }
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0)
        return reply(c, MHD_HTTP_OK, "text/html; charset=utf-8", m->page, m->page_len, false);
    return text(c, MHD_HTTP_NOT_FOUND,
                "not found: /metrics, /status.json, /healthz, /readyz and / are served\n");
}

/* ---- life ------------------------------------------------------------------------------ */

int cli_metrics_start(cli_metrics **out, const cli_metrics_cfg *cfg) {
    *out = NULL;
    struct sockaddr_in addr;
    if (!parse_listen(cfg->listen, &addr)) return cli_metrics_check_listen(cfg->listen);
    cli_metrics *m = calloc(1, sizeof *m);
    tstat *t = calloc(cfg->n ? cfg->n : 1, sizeof *t);
    if (m == NULL || t == NULL) {
        free(m);
        free(t);
        return cli_usage_error("start-many: %s", "out of memory");
    }
    m->cfg = *cfg;
    m->t = t;
    for (size_t k = 0; CLI_STATUS_PAGE[k]; k++) m->page_len += strlen(CLI_STATUS_PAGE[k]);
    m->page = malloc(m->page_len + 1);
    if (m->page == NULL) {
        free(m);
        free(t);
        return cli_usage_error("start-many: %s", "out of memory");
    }
    for (size_t k = 0, at = 0; CLI_STATUS_PAGE[k]; k++) {
        size_t l = strlen(CLI_STATUS_PAGE[k]);
        memcpy(m->page + at, CLI_STATUS_PAGE[k], l);
        at += l;
    }
    m->page[m->page_len] = 0;
    for (size_t i = 0; i < cfg->n; i++) t[i].ci = cfg->names[i];
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->wake, NULL);
    /* the listener's threads leave SIGINT/SIGTERM/SIGUSR1 to start-many's
     * signal thread (sigwait): a thread that took one would end the process */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    m->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handle, m,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30,
                                 MHD_OPTION_END);
    if (m->daemon) m->poller_started = pthread_create(&m->poller, NULL, poll_run, m) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (m->daemon == NULL) {
        char msg[400];
        snprintf(msg, sizeof msg, "start-many: cannot listen on %.200s (in use, or not an "
                                  "address of this host): choose another --metrics-listen",
                 cfg->listen);
        cli_metrics_stop(m);
        return cli_usage_error("%s", msg);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = info ? info->port : ntohs(addr.sin_port);
    char host[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &addr.sin_addr, host, sizeof host);
    fprintf(stderr, "mssql-cdc: metrics: listening on http://%s:%u/ (/metrics, /status.json, "
                    "/healthz, /readyz)\n",
            host, port);
    if (cfg->ready_file) {
        FILE *f = fopen(cfg->ready_file, "w");
        if (f == NULL || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0) {
            cli_metrics_stop(m);
            return cli_usage_error("start-many: cannot write --ready-file %s", cfg->ready_file);
        }
    }
    *out = m;
    return EXIT_OK;
}

void cli_metrics_stop(cli_metrics *m) {
    if (m == NULL) return;
    pthread_mutex_lock(&m->mu);
    m->stopping = true;
    pthread_cond_broadcast(&m->wake);
    pthread_mutex_unlock(&m->mu);
    if (m->poller_started) pthread_join(m->poller, NULL);
    if (m->daemon) MHD_stop_daemon(m->daemon);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->mu);
    free(m->t);
    free(m->page);
    free(m);
}
