/*
 * cli_metrics.h - start-many's HTTP listener (--metrics-listen): what every
 * table's stream reported and what the capture probe polled, as OpenMetrics
 * text (/metrics), a JSON status (/status.json), a status page (/), and
 * /healthz and /readyz. The streams' threads write into it; libmicrohttpd's
 * thread and the probe's thread read it.
 */
#ifndef CLI_METRICS_H
#define CLI_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "mssqlcdc.h"

typedef struct cli_metrics cli_metrics;

typedef struct cli_metrics_cfg {
    const char *listen;      /* HOST:PORT (an IPv4 address; port 0: a free one) */
    const char *ready_file;  /* NULL, or where the bound port is written once listening */
    double poll_seconds;     /* the capture probe's interval */
    double lag_problem_s;    /* the status page's lag threshold */
    const mcdc_opts *const *opts; /* source options, n_opts of them (borrowed; outlive
                                     the listener): the probe opens on the first whose
                                     instance it can resolve */
    size_t n_opts;
    const size_t *opts_database; /* the database (of databases[]) each options are of;
                                    NULL: all of the one database */
    const char *const *databases; /* the probe's databases' labels, n_databases of them
                                     (copied); 0: one, labelled database */
    size_t n_databases;
    const char *database;    /* the label of the tables named here (and, without
                                databases, of the probe) */
    const char *const *names; /* the capture instances, n of them (copied); more may
                                 come with cli_metrics_add */
    size_t n;
    bool qualified_names;    /* serve's: tables are named DATABASE.CAPTURE_INSTANCE, and
                                so are the change tables' row counts */
    mcdc_runtime *runtime;   /* the streams' (borrowed; outlives the listener): each
                                table's batch figures are read from its registry */
} cli_metrics_cfg;

/* Checks cfg->listen: EXIT_OK or a usage error printed. */
int cli_metrics_check_listen(const char *listen);
/* Binds and starts serving and polling; an exit code (a usage error or
 * EXIT_IO when the address cannot be bound), the port on stderr. */
int cli_metrics_start(cli_metrics **out, const cli_metrics_cfg *cfg);
/* A table more (serve's tables come and go): its row's index, or
 * (size_t)-1 when out of memory (its events then go nowhere). database and
 * name are its labels (copied). */
size_t cli_metrics_add(cli_metrics *m, const char *database, const char *name);
/* Table i is gone (a reload removed it): its row is no longer served. */
void cli_metrics_remove(cli_metrics *m, size_t i);
/* Table i, which had ended, starts again as it was (a reload): its row
 * goes on, its counters (rows, batches, schedule runs) count on from where
 * they were, its last figures stay until its new run replaces them. */
void cli_metrics_restart(cli_metrics *m, size_t i);
/* A database more (a reload added its section): the probe polls it from its
 * next round with opts (owned by m from this call on, also when it returns
 * false), and tables added with its label from now on get its lag. false:
 * a database of that label is polled already, or out of memory (NULL m:
 * false). */
bool cli_metrics_add_database(cli_metrics *m, const char *label, mcdc_opts *opts);
/* The database labelled label is gone (a reload removed it): no more polls,
 * its rows are no longer served. A later add of that label starts afresh. */
void cli_metrics_remove_database(cli_metrics *m, const char *label);
/* The database labelled label is kept but its options changed (a reload):
 * its probe closes and opens again with opts (owned by m from this call on,
 * also when it returns false) at its next poll. false: no such database
 * (NULL m: false). */
bool cli_metrics_update_database(cli_metrics *m, const char *label, mcdc_opts *opts);
/* The streams' events for table i. */
/* Table i's run started on stream, which the listener asks whether it is
 * caught up (mcdc_stream_caught_up) until cli_metrics_ended: a table whose
 * change table has nothing new has lag 0 though its last batch ended behind
 * max_lsn. */
void cli_metrics_started(cli_metrics *m, size_t i, mcdc_stream *stream);
void cli_metrics_progress(cli_metrics *m, size_t i, const mcdc_progress *p);
/* state: "done", "stopped" or "failed" (then status and message say why). */
void cli_metrics_ended(cli_metrics *m, size_t i, const char *state, int status,
                       const char *message);
/* Table i's last backfill run's status (serve's backfill schedule): its
 * chunks, done and paused are served from now on; idle: the schedule runs
 * no more until there is something new to read. */
void cli_metrics_backfill(cli_metrics *m, size_t i, const mcdc_backfill_status *st, bool idle);
/* One run of table i's schedule ("apply", "reconcile" or "backfill"; others
 * are not counted) ended, well or not. */
void cli_metrics_schedule_ran(cli_metrics *m, size_t i, const char *schedule, bool ok);
/* Stops serving and polling, frees m (NULL: nothing). */
void cli_metrics_stop(cli_metrics *m);

/* The connection string's database (Database=, Initial Catalog= or
 * databaseName=), into out; "" when it names none. */
void cli_metrics_database(const char *connection_string, char *out, size_t cap);

#endif
