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

/* A label's value: a database or capture instance name (128 characters at
 * most in SQL Server) or serve's db.ci. */
#define CLI_METRICS_LABEL_MAX 272

/* serve's schedules, as the schedule label says them */
#define CLI_METRICS_SCHEDULES 3
static const char *const SCHEDULE_NAMES[CLI_METRICS_SCHEDULES] = {"apply", "reconcile",
                                                                  "backfill"};

/* What the page and the JSON call a table's state. */
typedef enum {
    ST_PENDING = 0, /* its thread has not started */
    ST_STARTING,    /* started: bootstrap or resume, no batch yet */
    ST_SNAPSHOT,    /* taking a snapshot (bootstrap, re-snapshot, switch) */
    ST_RUNNING,     /* streaming: resumed (or bootstrapped), or committed a batch */
    ST_DONE,
    ST_STOPPED,
    ST_FAILED,
    ST_COUNT
} tstate;
static const char *const STATE_NAMES[ST_COUNT] = {"pending", "starting", "snapshotting",
                                                  "running", "done",    "stopped", "failed"};

typedef struct tstat {
    char ci[CLI_METRICS_LABEL_MAX];
    char database[CLI_METRICS_LABEL_MAX];
    bool removed; /* a reload removed it: not served */
    size_t db;    /* its database's row in db[] (the probe's), or (size_t)-1: none */
    tstate state;
    int64_t rows, batches;
    int64_t rows_before, batches_before; /* its runs' before this one (cli_metrics_restart) */
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
    int64_t snap_done, snap_total; /* rows; total -1: unknown */
    int64_t snap_parts_done, snap_parts_total; /* ranges or chunks; total -1: unknown */
    bool has_backfill; /* a backfill run's status was read (cli_metrics_backfill) */
    mcdc_backfill_status backfill;
    bool backfill_idle; /* its schedule waits for something new to read */
    int64_t sched_runs[CLI_METRICS_SCHEDULES], sched_errors[CLI_METRICS_SCHEDULES];
    mcdc_job_probe probe; /* how its stream polls (its registry entry's, version 2) */
    mcdc_stream *stream; /* while it runs (borrowed: started to ended), else NULL */
    char caught_up_lsn[24]; /* a copy's: mcdc_stream_caught_up's answer ("": none) */
} tstat;

/* What the capture probe read of one database. */
typedef struct dbstat {
    char label[CLI_METRICS_LABEL_MAX];
    bool removed;       /* a reload removed it: not polled, not served (its row stays:
                           the probe's thread and the tables keep its index) */
    mcdc_opts *added;   /* added after start (cli_metrics_add_database): its options
                           (owned, freed at stop); NULL: cfg's */
    mcdc_opts *update;  /* a reload's new options (cli_metrics_update_database), owned
                           until the probe's thread makes them its added ones */
    bool polled, probe_up, has_health;
    mcdc_capture_health health;
    int64_t probe_errors;
    int probe_shared; /* a copy's (take): 1 its tables' streams poll through one shared probe,
                         0 one of them was refused it, -1 none polls through one */
} dbstat;

struct cli_metrics {
    cli_metrics_cfg cfg;
    struct MHD_Daemon *daemon;
    char *page; /* CLI_STATUS_PAGE joined */
    size_t page_len;
    pthread_mutex_t mu;
    tstat *t;
    size_t n, cap; /* rows of t, and room for */
    /* the probe's, a row per database (under mu); rows are only appended */
    dbstat *db;
    size_t n_db;
    /* the change tables' row counts, a row per row of db[] (under mu;
     * change_rows_poll, render_change_rows) */
    struct dbrows *rows;
    size_t n_rows;
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

static void label_copy(char out[CLI_METRICS_LABEL_MAX], const char *v) {
    snprintf(out, CLI_METRICS_LABEL_MAX, "%s", v ? v : "");
}

/* The row of the database labelled label (not removed), or (size_t)-1. */
static size_t db_index(const cli_metrics *m, const char *label) {
    for (size_t k = 0; label && k < m->n_db; k++)
        if (!m->db[k].removed && strcmp(m->db[k].label, label) == 0) return k;
    return (size_t)-1;
}

bool cli_metrics_add_database(cli_metrics *m, const char *label, mcdc_opts *opts) {
    if (m == NULL) {
        mcdc_opts_free(opts);
        return false;
    }
    bool added = false;
    pthread_mutex_lock(&m->mu);
    dbstat *db = db_index(m, label) == (size_t)-1 && opts
                     ? realloc(m->db, (m->n_db + 1) * sizeof *m->db)
                     : NULL;
    if (db) {
        m->db = db;
        dbstat *d = &m->db[m->n_db++];
        memset(d, 0, sizeof *d);
        label_copy(d->label, label);
        d->added = opts;
        opts = NULL;
        added = true;
    }
    pthread_mutex_unlock(&m->mu);
    mcdc_opts_free(opts); /* known already, or out of memory */
    return added;
}

void cli_metrics_remove_database(cli_metrics *m, const char *label) {
    if (m == NULL) return;
    pthread_mutex_lock(&m->mu);
    size_t k = db_index(m, label);
    if (k != (size_t)-1) m->db[k].removed = true; /* the probe's thread closes its probe */
    pthread_mutex_unlock(&m->mu);
}

bool cli_metrics_update_database(cli_metrics *m, const char *label, mcdc_opts *opts) {
    if (m == NULL || opts == NULL) {
        mcdc_opts_free(opts);
        return false;
    }
    pthread_mutex_lock(&m->mu);
    size_t k = db_index(m, label);
    mcdc_opts *old = NULL;
    if (k != (size_t)-1) {
        old = m->db[k].update; /* two reloads before a poll: the newer wins */
        m->db[k].update = opts;
        opts = NULL;
    }
    pthread_mutex_unlock(&m->mu);
    mcdc_opts_free(old);
    mcdc_opts_free(opts);
    return k != (size_t)-1;
}

size_t cli_metrics_add(cli_metrics *m, const char *database, const char *name) {
    if (m == NULL) return (size_t)-1;
    size_t i = (size_t)-1;
    pthread_mutex_lock(&m->mu);
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        tstat *t = realloc(m->t, cap * sizeof *t);
        if (t) {
            m->t = t;
            m->cap = cap;
        }
    }
    if (m->n < m->cap) {
        i = m->n++;
        memset(&m->t[i], 0, sizeof m->t[i]);
        label_copy(m->t[i].database, database);
        label_copy(m->t[i].ci, name);
        m->t[i].db = db_index(m, database);
    }
    pthread_mutex_unlock(&m->mu);
    return i;
}

void cli_metrics_remove(cli_metrics *m, size_t i) {
    if (m == NULL || i == (size_t)-1) return;
    pthread_mutex_lock(&m->mu);
    m->t[i].removed = true;
    pthread_mutex_unlock(&m->mu);
}

void cli_metrics_restart(cli_metrics *m, size_t i) {
    if (m == NULL || i == (size_t)-1) return;
    pthread_mutex_lock(&m->mu);
    tstat *t = &m->t[i];
    t->stream = NULL;
    t->state = ST_PENDING;
    t->rows_before = t->rows;
    t->batches_before = t->batches;
    t->probe = MCDC_JOB_PROBE_NONE;
    pthread_mutex_unlock(&m->mu);
}

void cli_metrics_started(cli_metrics *m, size_t i, mcdc_stream *stream) {
    if (m == NULL || i == (size_t)-1) return;
    pthread_mutex_lock(&m->mu);
    m->t[i].stream = stream;
    if (m->t[i].state == ST_PENDING) m->t[i].state = ST_STARTING;
    pthread_mutex_unlock(&m->mu);
}

/* The batches table t's stream committed, as its runtime's registry holds
 * them (under m->mu; the stream is good until ended). */
static void pull_batches(const cli_metrics *m, tstat *t) {
    mcdc_job_metrics j;
    if (t->stream == NULL || !mcdc_runtime_job_metrics(m->cfg.runtime, t->stream, &j, sizeof j))
        return;
    if (j.version >= 2 && j.probe != MCDC_JOB_PROBE_NONE) t->probe = j.probe;
    if (t->batches_before + j.batches == t->batches) return;
    t->state = ST_RUNNING;
    t->rows = t->rows_before + j.rows;
    t->batches = t->batches_before + j.batches;
    t->has_batch = j.has_batch;
    t->last_duration_s = j.last_batch_seconds;
    snprintf(t->end_lsn, sizeof t->end_lsn, "%s", j.end_lsn);
    t->has_end_commit = j.has_end_commit;
    t->end_commit_us = j.end_commit_us;
    t->report_lag_s = j.ingestion_lag_seconds;
    t->has_headroom = j.has_retention_headroom;
    t->headroom_h = j.retention_headroom_hours;
    t->has_verdict = j.has_verdict;
    t->verdict_us = j.finalized_until_us;
    /* when it moved, on the monotonic clock the scrape measures with */
    t->verdict_moved_mono_us = mono_us() - (utc_us() - j.verdict_moved_us);
    t->snap_active = false;
}

void cli_metrics_progress(cli_metrics *m, size_t i, const mcdc_progress *p) {
    if (m == NULL || i == (size_t)-1 || p->job == NULL) return;
    if (strcmp(p->job, "stream") == 0) {
        /* resumed and streaming: ready, though an idle table commits no batch */
        pthread_mutex_lock(&m->mu);
        if (m->t[i].state < ST_RUNNING) m->t[i].state = ST_RUNNING;
        m->t[i].snap_active = false;
        pthread_mutex_unlock(&m->mu);
        return;
    }
    if (strcmp(p->job, "snapshot") != 0) return;
    pthread_mutex_lock(&m->mu);
    tstat *t = &m->t[i];
    t->snap_active = !p->done;
    t->snap_done = p->rows_done;
    t->snap_total = p->rows_total;
    /* a chunked snapshot's chunks across its waves, else the phase's parts */
    t->snap_parts_done = p->job_parts_name ? p->job_parts_done : p->parts_done;
    t->snap_parts_total = p->job_parts_name ? p->job_parts_total : p->parts_total;
    if (t->state == ST_STARTING && !p->done) t->state = ST_SNAPSHOT;
    pthread_mutex_unlock(&m->mu);
}

void cli_metrics_ended(cli_metrics *m, size_t i, const char *state, int status,
                       const char *message) {
    if (m == NULL || i == (size_t)-1) return;
    pthread_mutex_lock(&m->mu);
    tstat *t = &m->t[i];
    pull_batches(m, t); /* its last figures, kept once the stream is freed */
    t->stream = NULL; /* its run returned: it may be freed from now on */
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

void cli_metrics_backfill(cli_metrics *m, size_t i, const mcdc_backfill_status *st, bool idle) {
    if (m == NULL || i == (size_t)-1) return;
    pthread_mutex_lock(&m->mu);
    m->t[i].backfill = *st;
    m->t[i].has_backfill = true;
    m->t[i].backfill_idle = idle;
    pthread_mutex_unlock(&m->mu);
}

void cli_metrics_schedule_ran(cli_metrics *m, size_t i, const char *schedule, bool ok) {
    if (m == NULL || i == (size_t)-1) return;
    for (int k = 0; k < CLI_METRICS_SCHEDULES; k++) {
        if (strcmp(schedule, SCHEDULE_NAMES[k]) != 0) continue;
        pthread_mutex_lock(&m->mu);
        m->t[i].sched_runs[k]++;
        if (!ok) m->t[i].sched_errors[k]++;
        pthread_mutex_unlock(&m->mu);
    }
}

/* ---- the capture probe's thread ------------------------------------------------------ */

/* The database of the probe's options i. */
static size_t opts_db(const cli_metrics *m, size_t i) {
    return m->cfg.opts_database ? m->cfg.opts_database[i] : 0;
}

/* The probe's thread's own state of one database (its row of m->db). */
typedef struct dbprobe {
    mcdc_capture_probe *probe;
    size_t next; /* the cfg options it opens with next (n_opts: none of cfg's) */
    bool was_up;
} dbprobe;

/* Grows *p to n rows (databases added since), each new one set to its
 * database's first cfg options; false: out of memory (*p as it was). */
static bool probes_grow(const cli_metrics *m, dbprobe **p, size_t *have, size_t n) {
    if (n <= *have) return true;
    dbprobe *q = realloc(*p, n * sizeof *q);
    if (q == NULL) return false;
    for (size_t k = *have; k < n; k++) {
        q[k].probe = NULL;
        q[k].was_up = true;
        q[k].next = 0;
        while (q[k].next < m->cfg.n_opts && opts_db(m, q[k].next) != k) q[k].next++;
    }
    *p = q;
    *have = n;
    return true;
}

/* ---- the change tables' row counts ------------------------------------------------------ */

/* What the probe read of one database's change tables. */
typedef struct dbrows {
    bool polled;  /* the last read answered */
    bool visible; /* the login may read sys.dm_db_partition_stats */
    mcdc_change_table_rows *v;
    size_t n;
    bool was_ok; /* the probe's thread's: the read before answered (a failure is told once) */
} dbrows;

/* Reads database k's change tables' row counts on its probe (one query)
 * and keeps them in m->rows[k]; a failure leaves none served (the capture
 * health goes on). */
static void change_rows_poll(cli_metrics *m, size_t k, mcdc_capture_probe *probe,
                             const char *label) {
    mcdc_change_table_rows *v = NULL;
    size_t n = 0;
    bool visible = false;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_capture_probe_change_rows(probe, &v, &n, &visible, &e);
    pthread_mutex_lock(&m->mu);
    if (k >= m->n_rows) { /* the databases added since: their rows, zeroed */
        dbrows *r = realloc(m->rows, (k + 1) * sizeof *r);
        if (r) {
            memset(r + m->n_rows, 0, (k + 1 - m->n_rows) * sizeof *r);
            for (size_t j = m->n_rows; j <= k; j++) r[j].was_ok = true;
            m->rows = r;
            m->n_rows = k + 1;
        }
    }
    bool told = false, was_ok = true;
    if (k < m->n_rows) {
        dbrows *r = &m->rows[k];
        mcdc_change_table_rows_free(r->v);
        r->v = rc == MCDC_OK ? v : NULL;
        r->n = rc == MCDC_OK ? n : 0;
        r->visible = visible;
        r->polled = rc == MCDC_OK;
        was_ok = r->was_ok;
        r->was_ok = rc == MCDC_OK;
        v = rc == MCDC_OK ? NULL : v;
        told = true;
    }
    pthread_mutex_unlock(&m->mu);
    mcdc_change_table_rows_free(v); /* not kept: out of memory, or the read failed */
    if (told && rc && was_ok)
        fprintf(stderr, "mssql-cdc: metrics: reading the change tables' row counts failed (%s, "
                        "database '%s'): %s; mssql_cdc_change_table_rows is absent until it "
                        "answers\n",
                mcdc_status_kind(rc), label, e.message);
}

static void *poll_run(void *arg) {
    cli_metrics *m = arg;
    /* a probe per database, opened with the options it was added with, or
     * the first of cfg's options of its database whose instance this login
     * may resolve (else the next at the next poll) */
    dbprobe *p = NULL;
    size_t have = 0;
    bool told_oom = false;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        size_t n_db = m->n_db; /* rows are only appended: 0..n_db stay */
        pthread_mutex_unlock(&m->mu);
        if (!probes_grow(m, &p, &have, n_db)) {
            if (!told_oom)
                fprintf(stderr, "mssql-cdc: metrics: out of memory: the databases added last "
                                "are not probed\n");
            told_oom = true;
            n_db = have;
        }
        for (size_t k = 0; k < n_db; k++) {
            char label[CLI_METRICS_LABEL_MAX];
            pthread_mutex_lock(&m->mu);
            bool removed = m->db[k].removed;
            /* a reload's options replace the ones it probes with (only this
             * thread reads added: the old ones go after the unlock) */
            mcdc_opts *retired = NULL;
            bool reopen = m->db[k].update != NULL;
            if (reopen) {
                retired = m->db[k].added;
                m->db[k].added = m->db[k].update;
                m->db[k].update = NULL;
            }
            const mcdc_opts *added = m->db[k].added; /* freed only after this thread */
            memcpy(label, m->db[k].label, sizeof label);
            pthread_mutex_unlock(&m->mu);
            mcdc_opts_free(retired);
            if (reopen) { /* opened with the options before: again with the new ones */
                mcdc_capture_probe_free(p[k].probe);
                p[k].probe = NULL;
                p[k].was_up = true;
            }
            if (removed) { /* a reload removed it: no more polls */
                mcdc_capture_probe_free(p[k].probe);
                p[k].probe = NULL;
                continue;
            }
            const mcdc_opts *o = added                       ? added
                                 : p[k].next < m->cfg.n_opts ? m->cfg.opts[p[k].next]
                                                             : NULL;
            if (o == NULL) continue; /* no options of that database */
            mcdc_error e = MCDC_ERROR_INIT;
            mcdc_capture_health h;
            memset(&h, 0, sizeof h);
            int rc = MCDC_OK;
            if (p[k].probe == NULL && (rc = mcdc_capture_probe_open(&p[k].probe, o, &e)) &&
                added == NULL) {
                do p[k].next = (p[k].next + 1) % m->cfg.n_opts;
                while (opts_db(m, p[k].next) != k);
            }
            if (rc == MCDC_OK) rc = mcdc_capture_probe_read(p[k].probe, &h, &e);
            if (rc == MCDC_OK) change_rows_poll(m, k, p[k].probe, label);
            if (rc && p[k].was_up)
                fprintf(stderr, "mssql-cdc: metrics: the capture probe failed (%s, database "
                                "'%s'): %s; the streams go on, mssql_cdc_capture_probe_up is 0 "
                                "until it answers\n",
                        mcdc_status_kind(rc), label, e.message);
            p[k].was_up = rc == MCDC_OK;
            pthread_mutex_lock(&m->mu);
            dbstat *d = &m->db[k];
            d->polled = true;
            d->probe_up = rc == MCDC_OK;
            if (rc == MCDC_OK) {
                d->health = h;
                d->has_health = true;
            } else {
                d->probe_errors++;
            }
            pthread_mutex_unlock(&m->mu);
        }
        pthread_mutex_lock(&m->mu);
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
    for (size_t k = 0; k < have; k++) mcdc_capture_probe_free(p[k].probe);
    free(p);
    return NULL;
}

/* ---- a consistent copy, and the lag ---------------------------------------------------- */

typedef struct snap {
    tstat *t;
    size_t n;
    dbstat *db;
    size_t n_db;
    int64_t now_us, now_mono_us;
} snap;

static bool take(cli_metrics *m, snap *s) {
    pthread_mutex_lock(&m->mu);
    s->t = malloc(sizeof *s->t * (m->n ? m->n : 1));
    s->db = malloc(sizeof *s->db * (m->n_db ? m->n_db : 1));
    size_t *db_at = malloc(sizeof *db_at * (m->n_db ? m->n_db : 1)); /* m's row -> s's */
    if (s->t == NULL || s->db == NULL || db_at == NULL) {
        pthread_mutex_unlock(&m->mu);
        free(s->t);
        free(s->db);
        free(db_at);
        return false;
    }
    /* the databases a reload removed are not served */
    s->n_db = 0;
    for (size_t k = 0; k < m->n_db; k++) {
        db_at[k] = m->db[k].removed ? (size_t)-1 : s->n_db;
        if (!m->db[k].removed) s->db[s->n_db++] = m->db[k];
    }
    /* the rows a reload removed are not served */
    s->n = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!m->t[i].removed) {
            pull_batches(m, &m->t[i]);
            tstat *c = &s->t[s->n++];
            *c = m->t[i];
            c->db = c->db < m->n_db ? db_at[c->db] : (size_t)-1;
            /* a table whose change table has nothing new is caught up
             * although its last batch ended behind max_lsn (a short lock of
             * the stream's; its pointer is good until ended, under m->mu) */
            if (c->stream == NULL || !mcdc_stream_caught_up(c->stream, c->caught_up_lsn))
                c->caught_up_lsn[0] = 0;
            c->stream = NULL;
        }
    pthread_mutex_unlock(&m->mu);
    free(db_at);
    /* a database's shared probe: refused when one of its streams was */
    for (size_t k = 0; k < s->n_db; k++) s->db[k].probe_shared = -1;
    for (size_t i = 0; i < s->n; i++) {
        const tstat *t = &s->t[i];
        if (t->db >= s->n_db || t->probe == MCDC_JOB_PROBE_NONE) continue;
        int *shared = &s->db[t->db].probe_shared;
        if (t->probe == MCDC_JOB_PROBE_REFUSED) *shared = 0;
        else if (*shared < 0) *shared = 1;
    }
    s->now_us = utc_us();
    s->now_mono_us = mono_us();
    return true;
}

/* The table's ingestion lag in seconds; false: unknown (no batch yet). */
static bool lag_of(const snap *s, const tstat *t, double *out) {
    if (!t->has_batch) return false;
    /* its own database's max_lsn: LSNs of two databases do not compare */
    const dbstat *d = t->db < s->n_db ? &s->db[t->db] : NULL;
    if (d && d->has_health && d->health.max_lsn[0]) {
        if (strcasecmp(t->end_lsn, d->health.max_lsn) >= 0 || /* fixed-width hex: text order */
            (t->caught_up_lsn[0] && strcasecmp(t->caught_up_lsn, d->health.max_lsn) >= 0)) {
            *out = 0;
            return true;
        }
        if (d->health.has_max_commit && t->has_end_commit) {
            double dl = (double)(d->health.max_commit_us - t->end_commit_us) / 1e6;
            *out = dl > 0 ? dl : 0;
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

/* name{database="..",capture_instance=".."<extra>}: a table's (t), else
 * the database db's */
static void sample(FILE *f, const char *name, const tstat *t, const dbstat *db) {
    fprintf(f, "%s{database=\"", name);
    label_value(f, t ? t->database : db->label);
    if (t) {
        fputs("\",capture_instance=\"", f);
        label_value(f, t->ci);
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
               G_VERDICT_STILL, G_SNAPSHOT, G_SNAPSHOT_TOTAL, G_SNAPSHOT_PARTS,
               G_SNAPSHOT_PARTS_TOTAL, G_BACKFILL_DONE, G_BACKFILL_TOTAL, G_BACKFILL_FINISHED,
               G_BACKFILL_PAUSED } table_gauge;

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
    {"mssql_cdc_snapshot_rows_total", "gauge",
     "Rows the running snapshot will read (a count or the server's estimate)."},
    {"mssql_cdc_snapshot_parts_done", "gauge",
     "Parts of the running snapshot done: its chunks (chunked, across waves) or ranges."},
    {"mssql_cdc_snapshot_parts_total", "gauge", "Parts the running snapshot has."},
    {"mssql_cdc_backfill_chunks_done", "gauge",
     "Chunks of the table's chunked snapshot read in, as its last backfill run said."},
    {"mssql_cdc_backfill_chunks_total", "gauge",
     "Chunks the chunked snapshot's plan has, as the last backfill run said."},
    {"mssql_cdc_backfill_done", "gauge",
     "1 when the last backfill run said every chunk is in, else 0."},
    {"mssql_cdc_backfill_paused", "gauge",
     "1 when the last backfill run paused (the stream's retention headroom), else 0."},
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
    case G_SNAPSHOT_TOTAL: *v = (double)t->snap_total; return t->snap_active && t->snap_total >= 0;
    case G_SNAPSHOT_PARTS:
        *v = (double)t->snap_parts_done;
        return t->snap_active && t->snap_parts_total > 0;
    case G_SNAPSHOT_PARTS_TOTAL:
        *v = (double)t->snap_parts_total;
        return t->snap_active && t->snap_parts_total > 0;
    case G_BACKFILL_DONE: *v = (double)t->backfill.chunks_done; return t->has_backfill;
    case G_BACKFILL_TOTAL:
        *v = (double)t->backfill.chunks_total;
        return t->has_backfill && t->backfill.chunks_total >= 0;
    case G_BACKFILL_FINISHED: *v = t->backfill.done; return t->has_backfill;
    case G_BACKFILL_PAUSED: *v = t->backfill.paused; return t->has_backfill;
    }
    return false;
}

static void render_tables(FILE *f, const snap *s) {
    for (int g = 0; g <= G_BACKFILL_PAUSED; g++) {
        bool counter = g == G_ROWS || g == G_BATCHES;
        family(f, TABLE_FAMILIES[g].name, TABLE_FAMILIES[g].type, TABLE_FAMILIES[g].help);
        char name[96];
        snprintf(name, sizeof name, "%s%s", TABLE_FAMILIES[g].name, counter ? "_total" : "");
        for (size_t i = 0; i < s->n; i++) {
            double v;
            if (!table_value(s, &s->t[i], (table_gauge)g, &v)) continue;
            sample(f, name, &s->t[i], NULL);
            if (counter) value_i(f, (int64_t)v);
            else value_d(f, v);
        }
    }
    family(f, "mssql_cdc_errors", "counter", "Errors that stopped the table, by kind.");
    for (size_t i = 0; i < s->n; i++) {
        if (s->t[i].state != ST_FAILED) continue;
        sample(f, "mssql_cdc_errors_total", &s->t[i], NULL);
        fputs(",kind=\"", f);
        label_value(f, s->t[i].kind);
        fputc('"', f);
        value_i(f, 1);
    }
    /* serve's schedules: runs, and those that failed (a backfill run's
     * output that is not a status too); a table's schedule once it ran */
    static const char *const SCHEDULE_FAMILIES[2][2] = {
        {"mssql_cdc_schedule_runs",
         "Runs of the table's apply, reconcile or backfill schedule (label schedule)."},
        {"mssql_cdc_schedule_errors",
         "Runs of the schedule that failed, or (backfill) printed no valid status."}};
    for (int e = 0; e < 2; e++) {
        family(f, SCHEDULE_FAMILIES[e][0], "counter", SCHEDULE_FAMILIES[e][1]);
        char name[64];
        snprintf(name, sizeof name, "%s_total", SCHEDULE_FAMILIES[e][0]);
        for (size_t i = 0; i < s->n; i++)
            for (int k = 0; k < CLI_METRICS_SCHEDULES; k++) {
                if (s->t[i].sched_runs[k] == 0) continue;
                sample(f, name, &s->t[i], NULL);
                fprintf(f, ",schedule=\"%s\"", SCHEDULE_NAMES[k]);
                value_i(f, e ? s->t[i].sched_errors[k] : s->t[i].sched_runs[k]);
            }
    }
    /* a gauge per state rather than a stateset: one Prometheus' text
     * format (and promtool check metrics) reads as well */
    family(f, "mssql_cdc_table_state", "gauge",
           "1 for the table's stream state (label state), 0 for the others.");
    for (size_t i = 0; i < s->n; i++)
        for (int k = 0; k < ST_COUNT; k++) {
            sample(f, "mssql_cdc_table_state", &s->t[i], NULL);
            fprintf(f, ",state=\"%s\"", STATE_NAMES[k]);
            value_i(f, s->t[i].state == (tstate)k);
        }
    family(f, "mssql_cdc_ready", "gauge", "1 when every table has started and runs (/readyz).");
    fputs("mssql_cdc_ready", f);
    fprintf(f, " %d\n", ready_all(s) ? 1 : 0);
}

typedef enum { D_PROBE_ERRORS, D_PROBE_UP, D_MAX_COMMIT, D_CAPTURE_LAG, D_VISIBLE, D_LATENCY,
               D_SCAN_END, D_SCAN_AGE, D_SESSION_ERRORS, D_FAILED_SESSIONS, D_TRANSACTIONS,
               D_EMPTY_SCANS, D_ERRORS_LISTED, D_COUNT } db_gauge;

static const struct {
    const char *name, *help;
} DB_FAMILIES[D_COUNT] = {
    {"mssql_cdc_capture_probe_errors", "Capture probe polls that failed (connection, query)."},
    {"mssql_cdc_capture_probe_up", "1 when the last capture probe poll answered."},
    {"mssql_cdc_source_max_commit_timestamp_seconds", "Commit time (UTC) of the source's max_lsn."},
    {"mssql_cdc_capture_lag_seconds",
     "The server's clock minus the commit time of its max_lsn, at the last poll (how far "
     "capture is behind the log; up to minutes on a quiet database)."},
    {"mssql_cdc_capture_health_visible",
     "1 when the login may read the capture DMVs (VIEW DATABASE STATE); 0: the capture health "
     "metrics are absent."},
    {"mssql_cdc_capture_latency_seconds",
     "sys.dm_cdc_log_scan_sessions session 0 latency: the last non-zero one."},
    {"mssql_cdc_capture_last_scan_end_timestamp_seconds",
     "End (UTC) of the capture job's newest log scan session."},
    {"mssql_cdc_capture_last_scan_age_seconds",
     "The server's clock now minus the newest scan session's end (grows while the capture job "
     "is stopped)."},
    {"mssql_cdc_capture_session_errors",
     "Session 0 error_count: errors of every scan since the instance started."},
    {"mssql_cdc_capture_failed_sessions", "Session 0 failed_sessions_count."},
    {"mssql_cdc_capture_transactions",
     "Session 0 tran_count: transactions captured since the instance started."},
    {"mssql_cdc_capture_empty_scans", "The newest session's empty_scan_count: empty scans in a row."},
    {"mssql_cdc_capture_errors_listed", "Rows of sys.dm_cdc_errors (errors of the last 32 sessions)."},
};

/* A database's sample of family g; false: none (unknown, or not visible). */
static bool db_value(const dbstat *d, db_gauge g, double *v) {
    const mcdc_capture_health *h = &d->health;
    bool health = d->has_health, dmv = health && h->visible;
    switch (g) {
    case D_PROBE_ERRORS: *v = (double)d->probe_errors; return true;
    case D_PROBE_UP: *v = d->probe_up; return true;
    case D_MAX_COMMIT: *v = (double)h->max_commit_us / 1e6; return health && h->has_max_commit;
    case D_CAPTURE_LAG:
        *v = (double)(h->server_now_us - h->max_commit_us) / 1e6;
        return health && h->has_max_commit;
    case D_VISIBLE: *v = h->visible; return health;
    case D_LATENCY: *v = h->latency_seconds; return dmv;
    case D_SCAN_END: *v = (double)h->last_scan_end_us / 1e6; return dmv && h->has_last_scan_end;
    case D_SCAN_AGE:
        *v = (double)(h->server_now_us - h->last_scan_end_us) / 1e6;
        return dmv && h->has_last_scan_end;
    case D_SESSION_ERRORS: *v = (double)h->error_count; return dmv;
    case D_FAILED_SESSIONS: *v = (double)h->failed_sessions; return dmv;
    case D_TRANSACTIONS: *v = (double)h->transactions; return dmv;
    case D_EMPTY_SCANS: *v = (double)h->empty_scans; return dmv;
    case D_ERRORS_LISTED: *v = (double)h->errors_listed; return dmv;
    case D_COUNT: break;
    }
    return false;
}

/* Every family with a sample per database that has one (a family is
 * declared only when some database has a sample of it). */
static void render_database(FILE *f, const snap *s) {
    for (int g = 0; g < D_COUNT; g++) {
        bool counter = g == D_PROBE_ERRORS, integer = counter || g == D_PROBE_UP ||
                                                      g == D_VISIBLE || g >= D_SESSION_ERRORS;
        bool declared = false;
        for (size_t k = 0; k < s->n_db; k++) {
            double v;
            if (!db_value(&s->db[k], (db_gauge)g, &v)) continue;
            if (!declared)
                family(f, DB_FAMILIES[g].name, counter ? "counter" : "gauge", DB_FAMILIES[g].help);
            declared = true;
            char name[96];
            snprintf(name, sizeof name, "%s%s", DB_FAMILIES[g].name, counter ? "_total" : "");
            sample(f, name, NULL, &s->db[k]);
            if (integer) value_i(f, (int64_t)v);
            else value_d(f, v);
        }
    }
}

/* Whether each database's streams share one probe: absent for a database
 * none of whose streams polls through one (triggers that end). */
static void render_probe_shared(FILE *f, const snap *s) {
    bool declared = false;
    for (size_t k = 0; k < s->n_db; k++) {
        if (s->db[k].probe_shared < 0) continue;
        if (!declared)
            family(f, "mssql_cdc_probe_shared", "gauge",
                   "1 when the database's streams learn of new changes through one shared probe "
                   "a poll; 0 when the login may not run it (SELECT on cdc.change_tables and "
                   "the change tables) and each stream polls max_lsn on its own.");
        declared = true;
        sample(f, "mssql_cdc_probe_shared", NULL, &s->db[k]);
        value_i(f, s->db[k].probe_shared);
    }
}

/* The rows' families, for the databases served (under m->mu: the rows are
 * the probe's, replaced at each poll). */
static void render_change_rows(FILE *f, cli_metrics *m) {
    pthread_mutex_lock(&m->mu);
    size_t n = m->n_rows < m->n_db ? m->n_rows : m->n_db;
    bool declared = false;
    for (size_t k = 0; k < n; k++) {
        if (m->db[k].removed || !m->rows[k].polled) continue;
        if (!declared)
            family(f, "mssql_cdc_change_table_rows_visible", "gauge",
                   "1 when the login may read sys.dm_db_partition_stats (VIEW DATABASE STATE) "
                   "and cdc.change_tables; 0: mssql_cdc_change_table_rows is absent.");
        declared = true;
        sample(f, "mssql_cdc_change_table_rows_visible", NULL, &m->db[k]);
        value_i(f, m->rows[k].visible);
    }
    declared = false;
    for (size_t k = 0; k < n; k++) {
        if (m->db[k].removed || !m->rows[k].polled) continue;
        for (size_t i = 0; i < m->rows[k].n; i++) {
            if (!declared)
                family(f, "mssql_cdc_change_table_rows", "gauge",
                       "Rows in the capture instance's change table (sys.dm_db_partition_stats "
                       "row_count of its clustered index), every change table of the database.");
            declared = true;
            fputs("mssql_cdc_change_table_rows{database=\"", f);
            label_value(f, m->db[k].label);
            fputs("\",capture_instance=\"", f);
            if (m->cfg.qualified_names) { /* as serve names its tables */
                label_value(f, m->db[k].label);
                fputc('.', f);
            }
            label_value(f, m->rows[k].v[i].capture_instance);
            fputc('"', f);
            value_i(f, m->rows[k].v[i].rows);
        }
    }
    pthread_mutex_unlock(&m->mu);
}

static void change_rows_free(cli_metrics *m) {
    for (size_t k = 0; k < m->n_rows; k++) mcdc_change_table_rows_free(m->rows[k].v);
    free(m->rows);
}

static char *render_metrics(cli_metrics *m, size_t *len) {
    snap s;
    if (!take(m, &s)) return NULL;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (f) {
        render_tables(f, &s);
        render_database(f, &s);
        render_probe_shared(f, &s);
        render_change_rows(f, m);
        fputs("# EOF\n", f);
        fclose(f);
    }
    free(s.t);
    free(s.db);
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

/* {"database", "probe_up", "visible", "latency_seconds", ...} of d. */
static void capture_json(FILE *f, const dbstat *d) {
    const mcdc_capture_health *h = &d->health;
    fputs("{\"database\":", f);
    json_str(f, d->label);
    fprintf(f, ",\"probe_up\":%s,\"visible\":%s", d->probe_up ? "true" : "false",
            d->has_health && h->visible ? "true" : "false");
    json_num(f, "latency_seconds", d->has_health && h->visible, h->latency_seconds);
    json_num(f, "last_scan_age_seconds", d->has_health && h->visible && h->has_last_scan_end,
             (double)(h->server_now_us - h->last_scan_end_us) / 1e6);
    json_num(f, "errors_listed", d->has_health && h->visible, (double)h->errors_listed);
    json_num(f, "capture_lag_seconds", d->has_health && h->has_max_commit,
             (double)(h->server_now_us - h->max_commit_us) / 1e6);
    fprintf(f, ",\"probe_shared\":%s",
            d->probe_shared < 0 ? "null" : d->probe_shared ? "true" : "false");
    fputc('}', f);
}

static char *render_status(cli_metrics *m, size_t *len) {
    snap s;
    if (!take(m, &s)) return NULL;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (f) {
        /* "database": every database's label; "capture": the first's (the
         * page's line), "databases": each one's */
        char names[1024] = "";
        for (size_t k = 0, o = 0; k < s.n_db && o < sizeof names; k++)
            o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", k ? ", " : "",
                                  s.db[k].label);
        fputs("{\"database\":", f);
        json_str(f, names);
        fprintf(f, ",\"now\":%.3f,\"ready\":%s,\"lag_problem_seconds\":%.17g,\"capture\":",
                (double)s.now_us / 1e6, ready_all(&s) ? "true" : "false", m->cfg.lag_problem_s);
        dbstat none;
        memset(&none, 0, sizeof none);
        none.probe_shared = -1;
        capture_json(f, s.n_db ? &s.db[0] : &none);
        fputs(",\"databases\":[", f);
        for (size_t k = 0; k < s.n_db; k++) {
            if (k) fputc(',', f);
            capture_json(f, &s.db[k]);
        }
        fputs("],\"tables\":[", f);
        for (size_t i = 0; i < s.n; i++) {
            const tstat *t = &s.t[i];
            double lag = 0;
            bool has_lag = lag_of(&s, t, &lag);
            fputs(i ? ",{\"capture_instance\":" : "{\"capture_instance\":", f);
            json_str(f, t->ci);
            fputs(",\"database\":", f);
            json_str(f, t->database);
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
                fprintf(f, "{\"rows_done\":%lld,\"rows_total\":%lld,\"parts_done\":%lld,"
                           "\"parts_total\":%lld}",
                        (long long)t->snap_done, (long long)t->snap_total,
                        (long long)t->snap_parts_done, (long long)t->snap_parts_total);
            else
                fputs("null", f);
            fputs(",\"backfill\":", f);
            if (t->has_backfill) {
                const mcdc_backfill_status *b = &t->backfill;
                fputs("{\"snapshot\":", f);
                if (b->snapshot[0]) json_str(f, b->snapshot);
                else fputs("null", f);
                fprintf(f, ",\"chunks_done\":%lld", (long long)b->chunks_done);
                if (b->chunks_total >= 0)
                    fprintf(f, ",\"chunks_total\":%lld", (long long)b->chunks_total);
                else
                    fputs(",\"chunks_total\":null", f);
                fprintf(f, ",\"done\":%s,\"paused\":%s,\"idle\":%s,\"state\":",
                        b->done ? "true" : "false", b->paused ? "true" : "false",
                        t->backfill_idle ? "true" : "false");
                json_str(f, mcdc_backfill_state_name(b->state));
                fputs(",\"reason\":", f);
                if (b->reason[0]) json_str(f, b->reason);
                else fputs("null", f);
                fputc('}', f);
            } else {
                fputs("null", f);
            }
            fputc('}', f);
        }
        fputs("]}\n", f);
        fclose(f);
    }
    free(s.t);
    free(s.db);
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
    free(s.db);
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
    m->n = cfg->n;
    m->cap = cfg->n ? cfg->n : 1;
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
    size_t n_db = cfg->n_databases ? cfg->n_databases : 1;
    m->db = calloc(n_db, sizeof *m->db);
    if (m->db == NULL) {
        free(m->page);
        free(m);
        free(t);
        return cli_usage_error("start-many: %s", "out of memory");
    }
    m->n_db = n_db;
    for (size_t k = 0; k < n_db; k++)
        label_copy(m->db[k].label, cfg->n_databases ? cfg->databases[k] : cfg->database);
    for (size_t i = 0; i < cfg->n; i++) {
        label_copy(t[i].ci, cfg->names[i]);
        label_copy(t[i].database, cfg->database);
        t[i].db = 0;
    }
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
    for (size_t k = 0; k < m->n_db; k++) {
        mcdc_opts_free(m->db[k].added);
        mcdc_opts_free(m->db[k].update);
    }
    change_rows_free(m);
    free(m->t);
    free(m->db);
    free(m->page);
    free(m);
}
