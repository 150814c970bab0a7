/*
 * cli_metrics.h - start-many's HTTP listener (--metrics-listen): what every
 * table's stream reported and what the capture probe polled, as OpenMetrics
 * text (/metrics), a JSON status (/status.json), a status page (/), and
 * /healthz and /readyz. The streams' threads write into it; libmicrohttpd's
 * thread and the probe's thread read it.
 */
#ifndef CLI_METRICS_H
#define CLI_METRICS_H

#include <stddef.h>

#include "mssqlcdc.h"

typedef struct cli_metrics cli_metrics;

typedef struct cli_metrics_cfg {
    const char *listen;      /* HOST:PORT (an IPv4 address; port 0: a free one) */
    const char *ready_file;  /* NULL, or where the bound port is written once listening */
    double poll_seconds;     /* the capture probe's interval */
    double lag_problem_s;    /* the status page's lag threshold */
    const mcdc_opts *const *opts; /* every table's source options, n of them (borrowed;
                                     outlive the listener): the probe opens on the first
                                     whose instance it can resolve */
    const char *database;    /* the label */
    const char *const *names; /* the capture instances, n of them (borrowed) */
    size_t n;
    /* NULL, or table i's mcdc_stream_caught_up (read at each scrape: a table
     * whose change table has nothing new is caught up although its last
     * batch's end is behind max_lsn) */
    bool (*caught_up)(void *user, size_t i, char lsn[24]);
    void *caught_up_user;
} cli_metrics_cfg;

/* Checks cfg->listen: EXIT_OK or a usage error printed. */
int cli_metrics_check_listen(const char *listen);
/* Binds and starts serving and polling; an exit code (a usage error or
 * EXIT_IO when the address cannot be bound), the port on stderr. */
int cli_metrics_start(cli_metrics **out, const cli_metrics_cfg *cfg);
/* The streams' events for table i. */
void cli_metrics_started(cli_metrics *m, size_t i);
void cli_metrics_batch(cli_metrics *m, size_t i, const mcdc_batch_report *r);
void cli_metrics_progress(cli_metrics *m, size_t i, const mcdc_progress *p);
/* state: "done", "stopped" or "failed" (then status and message say why). */
void cli_metrics_ended(cli_metrics *m, size_t i, const char *state, int status,
                       const char *message);
/* Stops serving and polling, frees m (NULL: nothing). */
void cli_metrics_stop(cli_metrics *m);

/* The connection string's database (Database=, Initial Catalog= or
 * databaseName=), into out; "" when it names none. */
void cli_metrics_database(const char *connection_string, char *out, size_t cap);

#endif
