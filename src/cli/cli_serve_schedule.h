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

/* What a schedule runs and how its runs are judged. */
typedef struct serve_schedule_cfg {
    const char *what;     /* its lines' prefix ("apply", "reconcile", "backfill") */
    char **words;         /* the command's name, then its arguments (taken: freed at
                             stop, or by a start that fails) */
    double every_s;       /* seconds from one run's end to the next's start */
    mcdc_log_fn log;      /* its lines, under the table's name */
    void *log_user;
    char *options_text;   /* NULL, or an options file's text (taken; it may hold a
                             connection string: never logged, zeroed when freed) each
                             run reads at /dev/fd/3 (a memory file, mode 600) */
    /* NULL: stdout and stderr are logged line by line, a run whose exit code
     * is not 0 failed. Else stdout is kept apart (not logged; at most
     * SERVE_SCHEDULE_OUTPUT_MAX bytes, more is cut there) and handed here
     * with the exit code (128 + N for a signal) after the run: it returns
     * whether the run went well. */
    bool (*result)(void *user, int code, const char *out, size_t len);
    /* NULL, or told after every run whether it went well */
    void (*ran)(void *user, const char *what, bool ok);
    /* NULL: every run is due. Else asked when a run's time comes (not
     * before the first, which is at once): false skips it, neither started
     * nor counted, and the next time comes every_s later (a backfill that
     * said done waits for a new snapshot) */
    bool (*due)(void *user);
    void *result_user;    /* result's, ran's and due's */
} serve_schedule_cfg;

/* The most of a run's stdout a result callback is given. */
#define SERVE_SCHEDULE_OUTPUT_MAX 65536

/* Starts a thread that runs this program's command cfg->words[0] with
 * words[1..] every every_s seconds (the first run at once); each run's
 * output lines go to log (level info; the exit line warning when the run
 * failed) as "<what>: line". Returns 0, or -1 when no thread could be
 * started (words and options_text freed). */
int serve_schedule_start(serve_schedule **out, const serve_schedule_cfg *cfg);
/* The next run's time is now (a reload): it still asks due (NULL:
 * nothing). */
void serve_schedule_kick(serve_schedule *s);
/* Asks a run in progress to stop (SIGTERM: it finishes its pass), waits
 * for it and for the thread; frees s (NULL: nothing). */
void serve_schedule_stop(serve_schedule *s);
/* Runs finished, and those that failed (for tests and logs). */
void serve_schedule_counts(serve_schedule *s, int64_t *runs, int64_t *failed);

/* A backfill run's result proved: its stdout (out, len) is one JSON object,
 * the BackfillStatus 'mssql-cdc backfill' prints, every field of its type
 * (snapshot null or a short string, chunks_done a count, chunks_total null
 * or a count not below it, done and paused booleans, state one of
 * backfill's and agreeing with done, reason null or a string), and code is
 * the exit code that state has. true with *st; false with why (a sentence,
 * nothing of out's) and *st untouched. */
bool serve_backfill_result(int code, const char *out, size_t len, mcdc_backfill_status *st,
                           char *why, size_t cap);

#endif
