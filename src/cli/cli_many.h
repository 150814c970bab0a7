/*
 * cli_many.h - what 'start-many' and 'serve' share: a table's stream job
 * run on a thread of its own (its places, its log and batch lines naming
 * it, its state at the end), the templates that name its places, the check
 * that no two tables write to one place, and the summary at the end.
 */
#ifndef CLI_MANY_H
#define CLI_MANY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "cli_metrics.h"

/* More tables than this in one process is a typo. */
#define CLI_MANY_TABLES_MAX 4096
/* A capture instance is a SQL Server identifier: at most 128 characters. */
#define CLI_MANY_NAME_MAX 128

typedef enum { CLI_TABLE_DONE = 0, CLI_TABLE_STOPPED, CLI_TABLE_FAILED } cli_table_state;

typedef struct cli_table {
    const char *name;     /* the label its lines carry (borrowed: outlives the job) */
    const char *ci;       /* its capture instance (borrowed) */
    mcdc_opts *opts;      /* owned */
    char *target, *app_id, *checkpoint; /* owned (cli_many_expand) */
    mcdc_stream_cfg cfg;
    mcdc_stream *stream;  /* owned */
    cli_batch_out out;
    bool json_log;        /* log lines as JSON objects (serve --log-format json) */
    pthread_t thread;
    bool running;         /* the thread was started (and not joined yet) */
    atomic_bool finished; /* its run returned */
    atomic_bool stop_asked; /* a signal or a reload asked it to stop while it ran */
    cli_metrics *metrics; /* NULL: no --metrics-listen */
    cli_progress *progress; /* NULL: none (start-many --progress: its own, named) */
    size_t index;         /* its row in metrics */
    /* written by the job's thread, read after it is joined */
    int64_t batches, rows;
    int status;
    mcdc_error err;
} cli_table;

/* Resets t for a job labelled name on capture instance ci (both borrowed). */
void cli_table_init(cli_table *t, const char *name, const char *ci);
/* The template with every {ci} (and, when db is not NULL, {db}) replaced;
 * NULL when out of memory. Owned by the caller. */
char *cli_many_expand(const char *tpl, const char *ci, const char *db);
/* The template with every names[k] (such as "{ci}") replaced by values[k]
 * (NULL: left as written); NULL when out of memory. Owned by the caller. */
char *cli_many_fill(const char *tpl, const char *const *names, const char *const *values,
                    size_t n);
/* The job's callbacks on its cfg: its log lines and batch lines name it,
 * its metrics (when any, set before its run) hear its batches and
 * progress. */
void cli_table_wire(cli_table *t, bool quiet);
/* Starts its thread: false (its status set to MCDC_E_NOMEM) when none
 * could be. */
bool cli_table_start(cli_table *t);
/* Asks it to stop after its batch (a signal or a reload). */
void cli_table_request_stop(cli_table *t);
/* Joins its thread (when started) and frees its stream, opts and places. */
void cli_table_release(cli_table *t);
cli_table_state cli_table_state_of(const cli_table *t);
const char *cli_table_state_name(cli_table_state s);

/* No two tables write to one place: targets and checkpoints distinct and
 * none of them the facts or control table of shared (NULL: none). tables
 * are n pointers. Returns EXIT_OK or a usage error naming both (cmd leads
 * the message). */
int cli_many_check_places(const char *cmd, cli_table *const *tables, size_t n,
                          const mcdc_stream_cfg *shared);
/* Asks the source of opts once whether every table's instance exists;
 * EXIT_OK, or a usage error naming the unknown ones (cmd leads it), or the
 * source's error (where, when not NULL, says which source). */
int cli_many_check_instances(const char *cmd, const char *where, const mcdc_opts *opts,
                             cli_table *const *tables, size_t n);
/* The end: a line per table on stderr and (json) await_all's result on
 * stdout. */
void cli_many_summary(const char *cmd, cli_table *const *tables, size_t n, bool json);
/* The exit code of the first table, in order, that failed; EXIT_OK when
 * none did. */
int cli_many_exit_code(cli_table *const *tables, size_t n);

#endif
