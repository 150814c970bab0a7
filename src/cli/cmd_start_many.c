/*
 * cmd_start_many.c - mssql-cdc start-many: a stream per capture instance,
 * all in this process on one budget of connections and encoder threads
 * (the reference's start_many, await_all and stop_all in one command).
 *
 * Everything is proved before the first side effect: the templates, the
 * list or file of instances, every stream's configuration (created, not
 * run), the places they write, and (one question to the source) that each
 * instance exists. Then the facts table is created once, every stream runs
 * on its own thread, and the command waits for all of them: one table's
 * error stops that table only. SIGINT/SIGTERM are taken by a thread of
 * their own (sigwait), which asks every stream to finish its batch.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "cli_many.h"
#include "cli_metrics.h"

static const char MANY_HELP[] =
    "usage: mssql-cdc start-many [source options] (--capture-instances A,B,C |\n"
    "         --capture-instances-file FILE) --target T --app-id A --checkpoint DIR\n"
    "         [stream flags]\n"
    "\n"
    "Streams many capture instances of one database in this one process: a stream\n"
    "per instance, as 'mssql-cdc stream' runs it, each on its own thread, all on one\n"
    "budget of connections and encoder threads (the reference's start_many, await_all\n"
    "and stop_all). A rerun with the same templates resumes every table from its\n"
    "checkpoint.\n"
    "\n"
    "Tables:\n"
    "  --capture-instances A,B,C   the capture instances, in the order they start\n"
    "  --capture-instances-file FILE\n"
    "                       a JSON object: capture instance -> its own source options,\n"
    "                       which replace the shared ones for it, e.g.\n"
    "                       {\"dbo_orders\": {\"numPartitions\": 4}, \"dbo_items\": {}}\n"
    "                       (strings, numbers or booleans; not connectionString or\n"
    "                       captureInstance: one source for all)\n"
    "  --target T, --app-id A, --checkpoint DIR\n"
    "                       templates in which {ci} is the capture instance, e.g.\n"
    "                       ./lake/bronze_{ci}, {ci}-v1, ./ckpt/{ci}; each must hold {ci}\n"
    "  --facts-table F      one facts table for all (created before the first starts;\n"
    "                       each row carries its stream's app id)\n"
    "  --max-connections N  connections to SQL Server all streams hold together (default:\n"
    "                       one per table and 4 to read with; at least tables + 1)\n"
    "  --encoder-threads N  Parquet encoder threads all streams share (default: the cores)\n"
    "  --json               the result on stdout at the end: every table with its\n"
    "                       batches, rows, state and error, and the errors by capture\n"
    "                       instance (await_all's result)\n"
    "  --quiet              errors and the summary only\n"
    CLI_PROGRESS_HELP
    "                       (each table's own, its name leading the line or as \"table\"\n"
    "                       in the JSON: the snapshots its bootstrap or re-snapshot takes)\n";

static const char MANY_HELP_METRICS[] =
    "\n"
    "Metrics (docs/metrics.md):\n"
    "  --metrics-listen ADDR:PORT\n"
    "                       serve /metrics (OpenMetrics), /status.json, /healthz,\n"
    "                       /readyz and a status page at / on this IPv4 address (e.g.\n"
    "                       127.0.0.1:9464; port 0: a free one, printed on stderr)\n"
    "  --metrics-poll-seconds S\n"
    "                       how often the capture job's health and the source's newest\n"
    "                       commit are read, on a connection of their own (default 15)\n"
    "  --lag-problem-seconds S\n"
    "                       the status page shows a table lagging more as a problem\n"
    "                       (default 300)\n"
    "  --ready-file FILE    once listening, the port is written to FILE\n";

static const char MANY_HELP_REST[] =
    "Every flag of 'mssql-cdc stream' applies to all the streams: --control-table,\n"
    "--granularity, --warehouse, --trigger, --max-batches, --bootstrap, --snapshot,\n"
    "--snapshot-on-switch, --on-data-loss, --resnapshot-interval-days, --verbose (see\n"
    "'mssql-cdc stream --help'); the source options are stream's, captureInstance\n"
    "aside. Object stores: --storage-option, as stream takes it.\n"
    "\n"
    "Refused before anything starts (exit 2): a template without {ci}, neither or both\n"
    "of --capture-instances and --capture-instances-file, an empty or repeated name (in\n"
    "any case), a malformed file (named with its line or instance), a capture instance\n"
    "the source does not have, two tables writing to one place; a configuration a\n"
    "stream refuses exits as stream would.\n"
    "\n"
    "Running: the streams start in the order given, at once, each on its own thread;\n"
    "each takes its own bootstrap or re-snapshot before its first batch, and the\n"
    "budget decides how many read at a time. Every log line and batch line names its\n"
    "table. One table's error (data loss, a schema change, a missing grant...) stops\n"
    "that table only; the others go on. With --trigger availableNow each stream ends\n"
    "once it has caught up; SIGINT/SIGTERM ask every stream to finish its batch and\n"
    "stop.\n"
    "\n"
    "At the end, a line per table on stderr: capture instance, batches, rows, state\n"
    "(done, stopped by a signal, failed) and the error's kind and message.\n"
    "\n"
    "Exit codes: 0 when every table ended well; else the exit code 'mssql-cdc stream'\n"
    "gives the error of the first table, in the order given, that failed (3 data\n"
    "loss, 4 schema changed, 5 permission, 6 source unreachable, 7-13 state that\n"
    "cannot be trusted; see 'mssql-cdc stream --help'); 2 bad usage, as above.\n";

/* Connections beyond one per table, by default: readers the tables share. */
#define MANY_READ_CONNECTIONS 4

typedef struct table_job {
    cli_table job;        /* its name and capture instance: argv's or the file's key */
    json_t *own;          /* the file's options for it (borrowed), or NULL */
    cli_progress progress; /* --progress: its own (named), started when job.progress is set */
} table_job;

typedef struct many {
    table_job *t;
    cli_table **jobs;      /* &t[i].job, for what cli_many.h takes */
    size_t n, cap;
    json_t *file;          /* --capture-instances-file, parsed */
    char *list;            /* --capture-instances, split in place */
    atomic_int stopping;   /* a signal asked every stream to stop */
    const char **names;    /* the listener's labels (capture instances) */
    const mcdc_opts **opts; /* and the tables' options, for its probe */
    char database[256];    /* the connection string's, for the listener's label */
} many;

/* ---- inputs ------------------------------------------------------------------- */

static int add_table(many *m, const char *ci, json_t *own) {
    assert(m->n < m->cap); /* cap: the entries of the list or file */
    if (m->n >= CLI_MANY_TABLES_MAX) {
        char max[24];
        snprintf(max, sizeof max, "%d", CLI_MANY_TABLES_MAX);
        return cli_usage_error("start-many: at most %s capture instances in one process", max);
    }
    size_t len = strlen(ci);
    if (len == 0 || len > CLI_MANY_NAME_MAX)
        return cli_usage_error("start-many: capture instance '%s' is empty or longer than 128 "
                               "characters",
                               ci);
    for (size_t k = 0; k < m->n; k++)
        if (strcasecmp(m->t[k].job.ci, ci) == 0)
            return cli_usage_error("start-many: capture instance '%s' is listed twice (names "
                                   "match ignoring case): each table once",
                                   ci);
    table_job *t = &m->t[m->n++];
    cli_table_init(&t->job, ci, ci);
    t->own = own;
    return EXIT_OK;
}

/* --capture-instances a,b,c (spaces around names ignored). */
static int parse_list(many *m, const char *v) {
    size_t commas = 0;
    for (const char *c = v; *c; c++) commas += *c == ',';
    m->list = strdup(v);
    m->cap = commas + 1;
    m->t = calloc(m->cap, sizeof *m->t);
    if (m->list == NULL || m->t == NULL) return cli_usage_error("start-many: %s", "out of memory");
    char *save = NULL, *p = m->list;
    int rc = EXIT_OK;
    size_t seen = 0;
    for (char *tok = strtok_r(p, ",", &save); tok && rc == EXIT_OK;
         tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok)) tok++;
        char *e = tok + strlen(tok);
        while (e > tok && isspace((unsigned char)e[-1])) *--e = 0;
        rc = add_table(m, tok, NULL);
        seen++;
    }
    if (rc == EXIT_OK && seen != commas + 1)
        rc = cli_usage_error("--capture-instances '%s' has an empty name (two commas, or one "
                             "at an end)",
                             v);
    return rc;
}

/* A file option's value as text (strings, integers, reals, booleans). */
static int option_text(const json_t *v, char *out, size_t cap) {
    if (json_is_string(v)) return snprintf(out, cap, "%s", json_string_value(v)) < (int)cap ? 0 : -1;
    if (json_is_integer(v)) return snprintf(out, cap, "%lld", (long long)json_integer_value(v)), 0;
    if (json_is_real(v)) return snprintf(out, cap, "%.17g", json_real_value(v)), 0;
    if (json_is_boolean(v)) return snprintf(out, cap, "%s", json_is_true(v) ? "true" : "false"), 0;
    return -1;
}

static int file_error(const char *path, const char *what, const char *ci, const char *key) {
    fprintf(stderr, "mssql-cdc: --capture-instances-file %s: ", path);
    fprintf(stderr, what, ci, key);
    fprintf(stderr, "\n(see 'mssql-cdc start-many --help')\n");
    return EXIT_USAGE;
}

/* --capture-instances-file FILE: {"ci": {"option": value, ...}, ...}. */
static int parse_file(many *m, const char *path) {
    json_error_t je;
    m->file = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (m->file == NULL) {
        fprintf(stderr, "mssql-cdc: --capture-instances-file %s: line %d, column %d: %s (a JSON "
                        "object of capture instance -> options)\n",
                path, je.line, je.column, je.text);
        return EXIT_USAGE;
    }
    if (!json_is_object(m->file))
        return file_error(path, "is not a JSON object of capture instance -> options%s%s", "", "");
    if (json_object_size(m->file) == 0)
        return file_error(path, "names no capture instance%s%s", "", "");
    m->cap = json_object_size(m->file);
    m->t = calloc(m->cap, sizeof *m->t);
    if (m->t == NULL) return cli_usage_error("start-many: %s", "out of memory");
    const char *ci;
    json_t *own;
    json_object_foreach(m->file, ci, own) {
        if (!json_is_object(own))
            return file_error(path, "'%s': its options must be a JSON object (or {})%s", ci, "");
        const char *key;
        json_t *v;
        json_object_foreach(own, key, v) {
            char text[8];
            if (strcasecmp(key, "captureInstance") == 0 || strcasecmp(key, "connectionString") == 0)
                return file_error(path, "'%s': option '%s' cannot differ by table (the key names "
                                        "the instance; one source for all)",
                                  ci, key);
            if (!json_is_string(v) && option_text(v, text, sizeof text) != 0)
                return file_error(path, "'%s': option '%s' must be a string, number or boolean",
                                  ci, key);
        }
        int rc = add_table(m, ci, own);
        if (rc) return rc;
    }
    return EXIT_OK;
}

/* ---- running -------------------------------------------------------------------- */

/* The signal thread: SIGINT/SIGTERM stop every stream; SIGUSR1 (sent by
 * the command once all are joined) ends it. */
static void *signal_run(void *arg) {
    many *m = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0 || sig == SIGUSR1) return NULL;
        if (atomic_exchange(&m->stopping, 1) == 0)
            fprintf(stderr, "mssql-cdc: %s: every stream finishes its batch and stops\n",
                    strsignal(sig));
        for (size_t i = 0; i < m->n; i++) cli_table_request_stop(&m->t[i].job);
    }
}

/* ---- the command ------------------------------------------------------------------ */

/* The source options of argv (their positions in *src) onto a table's opts,
 * then its own from the file, then captureInstance. */
static int table_opts(table_job *t, const int *src, size_t n_src, int argc, char **argv,
                      const char *file) {
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_opts_create(&t->job.opts, &e)) return cli_fail(&e);
    int rc = EXIT_OK;
    for (size_t k = 0; k < n_src && rc == EXIT_OK; k++) {
        int i = src[k];
        cli_source_option(t->job.opts, argc, argv, &i, &rc);
    }
    const char *key;
    json_t *v;
    json_object_foreach(t->own, key, v) {
        if (rc) break;
        char text[4096];
        bool unknown = false;
        if (option_text(v, text, sizeof text) != 0)
            rc = file_error(file, "'%s': option '%s' is longer than 4095 characters", t->job.ci, key);
        else if (mcdc_opts_set(t->job.opts, key, text, &unknown, &e))
            rc = cli_fail(&e);
        else if (unknown)
            rc = file_error(file, "'%s': '%s' is no source option (see 'mssql-cdc stream --help')",
                            t->job.ci, key);
    }
    if (rc == EXIT_OK && mcdc_opts_set(t->job.opts, "captureInstance", t->job.ci, NULL, &e))
        rc = cli_fail(&e);
    if (rc == EXIT_OK && mcdc_opts_check_required(t->job.opts, &e)) rc = cli_fail(&e);
    if (rc == EXIT_OK) rc = cli_source_env(t->job.opts, argc, argv);
    return rc;
}

/* A number of seconds within [lo, hi]. */
static int parse_seconds(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= lo && d <= hi)) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s '%.40s' is not a number of seconds from %g to %g", flag, v,
                 lo, hi);
        return cli_usage_error("start-many: %s", msg);
    }
    *out = d;
    return EXIT_OK;
}

/* The listener (serving the tables as pending until they start). */
static int start_metrics(many *m, cli_metrics **out, const char *listen, const char *ready_file,
                         double poll_s, double lag_problem_s, mcdc_runtime *runtime) {
    m->names = calloc(m->n, sizeof *m->names);
    m->opts = calloc(m->n, sizeof *m->opts);
    if (m->names == NULL || m->opts == NULL)
        return cli_usage_error("start-many: %s", "out of memory");
    for (size_t i = 0; i < m->n; i++) {
        m->names[i] = m->t[i].job.ci;
        m->opts[i] = m->t[i].job.opts;
    }
    cli_metrics_database(mcdc_opts_get(m->t[0].job.opts, "connectionString"), m->database,
                         sizeof m->database);
    cli_metrics_cfg cfg = {listen,  ready_file, poll_s,      lag_problem_s, m->opts, m->n,
                           NULL,    NULL,       0,           m->database,   m->names, m->n,
                           false,
                           runtime};
    int rc = cli_metrics_start(out, &cfg);
    for (size_t i = 0; rc == EXIT_OK && i < m->n; i++) {
        m->t[i].job.metrics = *out;
        m->t[i].job.index = i;
    }
    return rc;
}

/* Starts every stream, waits for all; the exit code of the first that
 * failed, in the order given. */
static int run_all(many *m, int json) {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    /* every thread started from here on (streams' too) leaves them to sigwait */
    pthread_sigmask(SIG_BLOCK, &set, &old);
    pthread_t sig_thread;
    bool sig_ok = pthread_create(&sig_thread, NULL, signal_run, m) == 0;
    for (size_t i = 0; i < m->n; i++) {
        cli_table *t = &m->t[i].job;
        if (atomic_load(&m->stopping))
            t->status = MCDC_E_CANCELLED; /* stopped before it started */
        else
            cli_table_start(t);
    }
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].job.running) {
            pthread_join(m->t[i].job.thread, NULL);
            m->t[i].job.running = false;
        }
    if (sig_ok) {
        pthread_kill(sig_thread, SIGUSR1);
        pthread_join(sig_thread, NULL);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    cli_many_summary("start-many", m->jobs, m->n, json);
    return cli_many_exit_code(m->jobs, m->n);
}

int cmd_start_many(int argc, char **argv) {
    many m;
    memset(&m, 0, sizeof m);
    atomic_init(&m.stopping, 0);
    mcdc_stream_cfg shared = MCDC_STREAM_CFG_INIT;
    const char *list = NULL, *file = NULL, *listen = NULL, *ready_file = NULL;
    double poll_s = 15, lag_problem_s = 300;
    cli_metrics *metrics = NULL;
    int json = 0, quiet = 0;
    cli_progress_mode progress_mode = CLI_PROGRESS_AUTO;
    int64_t connections = 0, encoders = 0;
    int *src = calloc((size_t)(argc > 0 ? argc : 1), sizeof *src);
    size_t n_src = 0;
    mcdc_budget *budget = NULL;
    mcdc_runtime *runtime = NULL;
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = src ? EXIT_OK : cli_usage_error("start-many: %s", "out of memory");
    /* a scratch opts that proves each source option once, as stream would */
    mcdc_opts *probe = NULL;
    if (rc == EXIT_OK && mcdc_opts_create(&probe, &e)) rc = cli_fail(&e);
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        int at = i;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(MANY_HELP, stdout);
            fputs(MANY_HELP_METRICS, stdout);
            fputs(MANY_HELP_REST, stdout);
            goto out;
        } else if (strcmp(a, "--capture-instances") == 0) { NEEDV(); list = v; }
        else if (strcmp(a, "--capture-instances-file") == 0) { NEEDV(); file = v; }
        else if (strcmp(a, "--target") == 0) { NEEDV(); shared.target = v; }
        else if (strcmp(a, "--app-id") == 0) { NEEDV(); shared.app_id = v; }
        else if (strcmp(a, "--checkpoint") == 0) { NEEDV(); shared.checkpoint = v; }
        else if (strcmp(a, "--json") == 0) json = 1;
        else if (strcmp(a, "--quiet") == 0) quiet = 1;
        else if (cli_progress_option(argc, argv, &i, &progress_mode, &rc)) continue;
        else if (strcmp(a, "--metrics-listen") == 0) {
            NEEDV();
            listen = v;
            rc = cli_metrics_check_listen(v);
        } else if (strcmp(a, "--ready-file") == 0) { NEEDV(); ready_file = v; }
        else if (strcmp(a, "--metrics-poll-seconds") == 0) {
            NEEDV();
            rc = parse_seconds(a, v, 0.1, 3600, &poll_s);
        } else if (strcmp(a, "--lag-problem-seconds") == 0) {
            NEEDV();
            rc = parse_seconds(a, v, 0, 31536000, &lag_problem_s);
        }
        else if (strcmp(a, "--max-connections") == 0) {
            NEEDV();
            rc = cli_parse_int(a, v, 2, 100000, &connections);
        } else if (strcmp(a, "--encoder-threads") == 0) {
            NEEDV();
            rc = cli_parse_int(a, v, 1, 4096, &encoders);
        } else if (cli_stream_flag(&shared, argc, argv, &i, &rc)) {
            continue; /* rc ends the loop when bad */
        } else if (cli_source_option(probe, argc, argv, &i, &rc)) {
            src[n_src++] = at;
        } else {
            rc = cli_usage_error("start-many: unknown argument '%s'", a);
        }
    }
    if (rc) goto out;
    static const char *const WHAT[] = {"--target", "--app-id", "--checkpoint"};
    const char *tpl[] = {shared.target, shared.app_id, shared.checkpoint};
    for (int k = 0; k < 3 && rc == EXIT_OK; k++) {
        if (tpl[k] == NULL)
            rc = cli_usage_error("start-many needs %s (templates holding {ci})",
                                 "--target, --app-id and --checkpoint");
        else if (strstr(tpl[k], "{ci}") == NULL) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s '%.400s' must contain {ci}: every table needs its own",
                     WHAT[k], tpl[k]);
            rc = cli_usage_error("start-many: %s", msg);
        }
    }
    if (rc) goto out;
    if ((list == NULL) == (file == NULL)) {
        rc = cli_usage_error("start-many needs %s",
                             "one of --capture-instances and --capture-instances-file");
        goto out;
    }
    rc = list ? parse_list(&m, list) : parse_file(&m, file);
    if (rc) goto out;
    if (connections == 0) connections = (int64_t)m.n + MANY_READ_CONNECTIONS;
    if (connections < (int64_t)m.n + 1) {
        char msg[160];
        snprintf(msg, sizeof msg, "--max-connections %lld is too few for %zu tables: each holds "
                                  "one for its life, and one more reads",
                 (long long)connections, m.n);
        rc = cli_usage_error("start-many: %s", msg);
        goto out;
    }
    if (encoders == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        encoders = cores > 0 ? cores : 1;
    }
    if (mcdc_budget_create(&budget, (int)connections, (int)encoders, &e) ||
        mcdc_runtime_create(&runtime, NULL, &e)) {
        rc = cli_fail(&e);
        goto out;
    }
    m.jobs = calloc(m.n, sizeof *m.jobs);
    if (m.jobs == NULL) rc = cli_usage_error("start-many: %s", "out of memory");
    for (size_t i = 0; i < m.n && rc == EXIT_OK; i++) {
        cli_table *t = &m.t[i].job;
        m.jobs[i] = t;
        t->target = cli_many_expand(shared.target, t->ci, NULL);
        t->app_id = cli_many_expand(shared.app_id, t->ci, NULL);
        t->checkpoint = cli_many_expand(shared.checkpoint, t->ci, NULL);
        if (!t->target || !t->app_id || !t->checkpoint)
            rc = cli_usage_error("start-many: %s", "out of memory");
    }
    if (rc == EXIT_OK) rc = cli_many_check_places("start-many", m.jobs, m.n, &shared);
    for (size_t i = 0; i < m.n && rc == EXIT_OK; i++) {
        rc = table_opts(&m.t[i], src, n_src, argc, argv, file);
        cli_table *t = &m.t[i].job;
        t->cfg = shared;
        t->cfg.budget = budget;
        t->cfg.runtime = runtime; /* one probe per database for the idle polls */
        cli_table_wire(t, quiet);
        if (rc == EXIT_OK && progress_mode != CLI_PROGRESS_NONE) {
            rc = cli_progress_init(&m.t[i].progress, progress_mode);
            if (rc == EXIT_OK) {
                m.t[i].progress.name = t->name;
                t->progress = &m.t[i].progress;
            }
        }
        if (!listen && t->progress == NULL) t->cfg.progress_fn = NULL;
        if (rc == EXIT_OK && mcdc_stream_create(&t->stream, t->opts, &t->cfg, &e)) {
            fprintf(stderr, "mssql-cdc: %s: ", t->ci);
            rc = cli_fail(&e);
        }
    }
    if (rc == EXIT_OK) rc = cli_many_check_instances("start-many", NULL, m.t[0].job.opts, m.jobs,
                                                          m.n);
    /* the listener is bound before the first side effect: a port in use is
     * refused with nothing written */
    if (rc == EXIT_OK && listen)
        rc = start_metrics(&m, &metrics, listen, ready_file, poll_s, lag_problem_s, runtime);
    /* the first side effect: the one facts table, before any stream */
    if (rc == EXIT_OK && shared.facts_table &&
        mcdc_facts_table_create(m.t[0].job.opts, shared.facts_table, shared.warehouse, &e))
        rc = cli_fail(&e);
    if (rc == EXIT_OK) rc = run_all(&m, json);
out:
    cli_metrics_stop(metrics);
    for (size_t i = 0; i < m.n; i++) {
        cli_table_release(&m.t[i].job);
        if (m.t[i].job.progress) cli_progress_end(m.t[i].job.progress);
    }
    free(m.jobs);
    mcdc_runtime_destroy(runtime);
    mcdc_budget_free(budget);
    mcdc_opts_free(probe);
    json_decref(m.file);
    free(m.list);
    free(m.names);
    free(m.opts);
    free(m.t);
    free(src);
    return rc;
}
