/*
 * cli.h - what the commands of mssql-cdc share: exit codes, error and usage
 * messages, timestamps, option values. The CLI sees the library through
 * include/mssqlcdc.h only.
 */
#ifndef MCDC_CLI_H
#define MCDC_CLI_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mssqlcdc.h"

/* Exit codes (documented in --help and the README). */
enum {
    EXIT_OK = 0,
    EXIT_ERROR = 1,
    EXIT_USAGE = 2,
    EXIT_DATALOSS = 3,
    EXIT_SCHEMA = 4,
    EXIT_PERMISSION = 5,
    EXIT_TRANSIENT = 6,
    EXIT_MISMATCH = 7,
    EXIT_TARGET_BEHIND = 8,
    EXIT_REWOUND = 9,
    EXIT_NOT_FINAL = 10,
    EXIT_FACTS_BEHIND = 11,
    EXIT_FOREIGN_WRITER = 12,
    EXIT_LOGIN = 13,
    /* backfill's states other than done (its BackfillStatus on stdout) */
    EXIT_BACKFILL_RUNNING = 14,
    EXIT_BACKFILL_WAITING_HEADROOM = 15,
    EXIT_BACKFILL_WAITING_METRICS = 16,
    EXIT_BACKFILL_NO_SNAPSHOT = 17,
    EXIT_SNAPSHOT_OPEN = 18,
    /* reconcile: something differs (a MISMATCH bucket, or a failure other
     * than IN_FLIGHT; the ReconcileResult on stdout) */
    EXIT_DIFFERS = 19,
    /* reconcile: nothing could be verified (every bucket and key in flight) */
    EXIT_UNVERIFIED = 20,
    EXIT_NOT_UNIQUE = 21,
    EXIT_NOT_READY = 22
};

/* --progress: how a long command shows how far it is, on stderr. auto: a
 * line redrawn in place when stderr is a terminal, else JSON; line; json:
 * {"progress": {...}} every 5 seconds, at each phase and at the end; none. */
typedef enum {
    CLI_PROGRESS_AUTO = 0,
    CLI_PROGRESS_LINE,
    CLI_PROGRESS_JSON,
    CLI_PROGRESS_NONE
} cli_progress_mode;
typedef struct cli_progress {
    cli_progress_mode mode; /* never AUTO once initialised */
    pthread_mutex_t mu;     /* line: a report and a message at a time (any job thread) */
    char phase[32];         /* the phase the rate is of */
    double rate;            /* rows/s, smoothed */
    int64_t last_rows, last_ms;
    int64_t phase_number;   /* the phase the rate is of (the report's phase_number) */
    int64_t last_json_ms;
    int64_t json_every_ms;  /* a JSON line at least this often (MCDC_PROGRESS_JSON_MS) */
    bool line_open;         /* a line is drawn and not ended */
    bool job_seen;          /* the job's parts at their first report, for the time left */
    int64_t job_parts0, job_ms0;
    const char *name;       /* NULL, or the table it is of (start-many: its line and JSON
                               name it; borrowed) */
} cli_progress;
/* 0, or -1 when v is no mode. */
int cli_parse_progress(const char *v, cli_progress_mode *out);
/* Returns an exit code: the test hook MCDC_PROGRESS_JSON_MS (milliseconds
 * between JSON lines, 1 to 60000; default 5000) that is no such number is
 * a usage error. */
int cli_progress_init(cli_progress *p, cli_progress_mode mode);
/* cli_progress_init, then the job config's progress_fn and progress_user
 * set to report to p (none for CLI_PROGRESS_NONE) and, in the line mode,
 * its log_fn and log_user: a message clears the line drawn before it is
 * written ("mssql-cdc: <level>: <message>", as the library writes one), and
 * the next report draws the line again. Returns an exit code; after
 * EXIT_OK, call cli_progress_end. */
int cli_progress_start(cli_progress *p, cli_progress_mode mode, mcdc_progress_fn *fn,
                       void **user, mcdc_log_fn *log_fn, void **log_user);
/* The function to give the job with p as its user (NULL for none). */
mcdc_progress_fn cli_progress_callback(const cli_progress *p);
void cli_progress_report(void *user, const mcdc_progress *r);
/* Clears a line left drawn (a job that failed before its last report). */
void cli_progress_end(cli_progress *p);
void cli_progress_log(void *user, mcdc_log_level level, const char *message);
/* Clears a line drawn (before a command prints on stdout while its job
 * runs: on a terminal both show on one screen); the next report draws it
 * again. */
void cli_progress_clear(cli_progress *p);
/* --progress MODE at argv[*i]: 1 when it was (its value consumed; *rc set
 * to EXIT_USAGE for a bad one), else 0. */
int cli_progress_option(int argc, char **argv, int *i, cli_progress_mode *mode, int *rc);
/* The --progress lines of every long command's --help. */
#define CLI_PROGRESS_HELP                                                                      \
    "  --progress MODE      how far it is, on stderr: auto (default; line on a terminal,\n"    \
    "                       else json), line (one line redrawn: rows, of ~total, parts,\n"   \
    "                       rows/s, time left), json ({\"progress\": {...}} every 5 s, at\n" \
    "                       each phase and at the end), none\n"

/* The exit code of a status code (the README's table). */
int cli_exit_code(int status);
/* Prints "mssql-cdc: error (Kind): message" on stderr; returns the exit code
 * for e->code. */
int cli_fail(const mcdc_error *e);
/* The exit code 'mssql-cdc backfill' gives a state (0, 14 to 17). */
int cli_backfill_exit(mcdc_backfill_state s);
/* SIGINT and SIGTERM, from cli_stop_signals_begin to cli_stop_signals_end,
 * ask the command's one job to stop. The job is named with
 * cli_stop_signals_job once it exists: stop(job) must be safe in a signal
 * handler (the library's request_stop calls and mcdc_stop_request are one
 * atomic store). A signal that came before the job was named is not lost:
 * naming the job then asks it at once. */
typedef void (*cli_stop_fn)(void *job);
void cli_stop_signals_begin(void);
void cli_stop_signals_job(cli_stop_fn stop, void *job);
void cli_stop_signals_end(void);
/* The stop functions of the library's jobs, as cli_stop_fn. */
void cli_stop_request(void *stop);        /* mcdc_stop */
void cli_stop_stream(void *stream);       /* mcdc_stream */
void cli_stop_apply(void *apply);         /* mcdc_apply */
void cli_stop_backfill(void *backfill);   /* mcdc_backfill */
void cli_stop_reconcile(void *reconcile); /* mcdc_reconcile */
/* Prints "mssql-cdc: <fmt with arg>" and the --help hint; returns EXIT_USAGE. */
int cli_usage_error(const char *fmt, const char *arg);

/* "YYYY-MM-DDTHH:MM:SS.mmm" (UTC) of us. */
void cli_format_ts(int64_t us, char out[MCDC_TS_TEXT_SIZE]);
/* The reference's Offset as JSON on stdout: {"lsn": ..., "commit_ts": ... | null}. */
void cli_print_offset(const mcdc_offset *off);
/* A timestamp argument (UTC unless it carries an offset): 0, or -1 when s
 * is not one. */
int cli_parse_ts(const char *s, int64_t *out);

/* A --trigger value: default, availableNow, once or processingTime=<n>[ms|s|m]
 * (1 ms to a week). 0, or -1 when v is none of them. */
int cli_parse_trigger(const char *v, mcdc_trigger *trigger, int64_t *processing_time_ms);

/* The value after argv[*i], stepping *i over it; NULL when there is none. */
const char *cli_value(int argc, char **argv, int *i);
/* In a command's argument loop, with argc, argv, i, the option a, its
 * value v, rc and a label out in scope: v = the option's value, or a usage
 * error ("--x needs a value") and out. */
#define NEEDV()                                                          \
    do {                                                                 \
        if ((v = cli_value(argc, argv, &i)) == NULL) {                   \
            rc = cli_usage_error("%s needs a value", a);                 \
            goto out;                                                    \
        }                                                                \
    } while (0)

/* A source option at argv[*i]: --options-file FILE, -o name=value,
 * --<option name> VALUE (the reference's names, any case) or a storage
 * option (cli_storage_option). Returns 1 when it was one (its value
 * consumed; *rc set to an exit code on a bad one), else 0. */
int cli_source_option(mcdc_opts *opts, int argc, char **argv, int *i, int *rc);
/* An option every source job takes at argv[*i]: --verbose (*level becomes
 * MCDC_LOG_INFO), a progress option (cli_progress_option) or a source
 * option (cli_source_option). Returns as cli_source_option. */
int cli_job_option(mcdc_opts *opts, int argc, char **argv, int *i, cli_progress_mode *mode,
                   mcdc_log_level *level, int *rc);
/* A storage option at argv[*i]: --storage-option NAME=VALUE (NAME one of
 * mcdc_opts_storage_names, any case) or --options-file FILE (its [storage]
 * section; the commands that read no source ignore its source options).
 * A value is never echoed: it may be a secret. Returns as
 * cli_source_option. */
int cli_storage_option(mcdc_opts *opts, int argc, char **argv, int *i, int *rc);
/* After the arguments, once: the storage options from the environment
 * variables of their names, where neither the options file nor a flag gave
 * one, then every --storage-option of argv again (so that it wins over an
 * options file given after it). Priority: --storage-option, the options
 * file, the environment. Returns an exit code. */
int cli_storage_env(mcdc_opts *opts, int argc, char **argv);
/* Test hooks (the library reads no environment): MCDC_TDS_BACKEND overrides
 * the backend option; MCDC_CRASH_AT and MCDC_RETRY_BACKOFF_MS go on opts
 * (mssqlcdc_testing.h), where every job takes them; then cli_storage_env.
 * Returns an exit code. */
int cli_source_env(mcdc_opts *opts, int argc, char **argv);
/* Whether a table argument (a path, a URI, or schema.table under
 * warehouse, NULL: ./warehouse) lies on an object store, not on the local
 * filesystem (a path or a file: URI), as the library resolves it. */
bool cli_location_remote(const char *table, const char *warehouse);
/* The --storage-option lines of every --help that opens tables. */
#define CLI_STORAGE_HELP                                                                        \
    "  --storage-option NAME=VALUE  an object store's setting or credential, by a name\n"       \
    "                       delta-rs gives it (AWS_REGION, AWS_ENDPOINT_URL, access_key_id,\n" \
    "                       AZURE_STORAGE_ACCOUNT_NAME, sas_key...; any\n"                   \
    "                       case; repeatable); else the options file's [storage] section,\n" \
    "                       else the environment variable of that name. Secrets are never\n" \
    "                       printed\n"

/* Numeric flag values, parsed strictly: an optional '-', decimal digits and
 * (cli_parse_number) an optional fraction, nothing else (no spaces, '+',
 * exponent, hex, inf or nan), within [min, max]. Anything else (overflow,
 * out of range, trailing junk, empty) is a usage error naming the flag and
 * its range. Return an exit code (EXIT_OK or EXIT_USAGE). Every command's
 * numeric flags go through them. */
int cli_parse_int(const char *flag, const char *v, int64_t min, int64_t max, int64_t *out);
int cli_parse_number(const char *flag, const char *v, double min, double max, double *out);
/* The ceiling of flags that count things (passes, batches, waves, rows):
 * past it a count is a typo, not a plan. */
#define CLI_COUNT_MAX 2147483647LL

/* --keys: a JSON list of names (["region","id"]) or names separated by
 * commas; keys[] (at most 32) point into buf (a copy of v). 0, or -1 when
 * v is neither. */
int cli_parse_keys(const char *v, char *buf, size_t cap, const char **keys, int32_t *n);

/* A flag that configures a stream job, for 'stream' and 'start-many':
 * --facts-table, --control-table, --warehouse, --granularity, --trigger,
 * --max-batches, --bootstrap, --snapshot, --snapshot-on-switch,
 * --on-data-loss, --resnapshot-interval-days, --verbose. Returns 1 when
 * argv[*i] was one (its value consumed; *rc set to an exit code on a bad
 * one), else 0. Strings point into argv. */
int cli_stream_flag(mcdc_stream_cfg *cfg, int argc, char **argv, int *i, int *rc);
/* Where a stream's committed batches are told: a line on stderr each (none
 * when quiet), or (json) a JSON object on stdout each; name leads both. */
typedef struct cli_batch_out {
    int quiet;
    int json;
    const char *name;
} cli_batch_out;
/* An mcdc_report_fn with a cli_batch_out as its ctx; one write per line. */
void cli_batch_report(void *ctx, const mcdc_batch_report *r);

/* The commands: argv holds the arguments after the command's name. */
/* A heap copy of argv (NULL-terminated) for the commands to read, and the
 * secrets in argv itself (what ps and /proc/PID/cmdline show) overwritten
 * with 'x': a --connectionString, -o connectionString=, a secret
 * --storage-option's value. NULL when out of memory. */
char **cli_argv_private(int argc, char **argv);
void cli_argv_free(char **argv);

int cmd_stream(int argc, char **argv);
int cmd_finalization(int argc, char **argv);
int cmd_table_rows(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_seed(int argc, char **argv);
int cmd_backfill(int argc, char **argv);
int cmd_apply(int argc, char **argv);
int cmd_reconcile(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_start_many(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif /* MCDC_CLI_H */
