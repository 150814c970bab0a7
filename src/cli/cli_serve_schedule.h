/*
 * cli_serve_schedule.h - serve's schedules: a table's 'mssql-cdc apply' or
 * 'mssql-cdc reconcile' run on a timer (silver kept current and proven),
 * each run a child process of this program with the arguments the config
 * gives, its output logged line by line under the table's name.
 */
#ifndef CLI_SERVE_SCHEDULE_H
#define CLI_SERVE_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mssqlcdc.h"

/* A command line's words (a config value): split at spaces and tabs,
 * '...' and "..." quoting (no escapes, no expansion). 0 with *out (a NULL-
 * terminated array, free with cli_words_free) and *n; -1 with an unclosed
 * quote or no word (*out NULL). */
int cli_words_split(const char *line, char ***out, int *n);
void cli_words_free(char **words);

typedef struct serve_schedule serve_schedule;
/* Starts a thread that runs this program's command words[0] with words[1..]
 * every every_s seconds (the first run at once); each run's output lines go
 * to log (level info; the exit line warning when not 0) as "<what>: line".
 * words is taken (freed at stop). Returns 0, or -1 when no thread could be
 * started (words freed). */
int serve_schedule_start(serve_schedule **out, const char *what, char **words, double every_s,
                         mcdc_log_fn log, void *log_user);
/* Asks a run in progress to stop (SIGTERM: it finishes its pass), waits
 * for it and for the thread; frees s (NULL: nothing). */
void serve_schedule_stop(serve_schedule *s);
/* Runs finished, and those that exited other than 0 (for tests and logs). */
void serve_schedule_counts(serve_schedule *s, int64_t *runs, int64_t *failed);

#endif
