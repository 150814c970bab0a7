/*
 * cmd_serve.c - mssql-cdc serve: the tables of a configuration file
 * (cli_serve_config.h) as one long-running service: a stream per table on
 * one budget, as start-many runs them (cli_many.h), kept in step with the
 * file: SIGHUP rereads it (tables added start, removed ones stop after
 * their batch, changed ones restart, the others run on undisturbed; a file
 * that is refused leaves the running set as it was), SIGINT/SIGTERM stop
 * every table after its batch.
 *
 * The main thread takes the signals (sigtimedwait): every other thread,
 * the streams' and the listener's, is started with them blocked.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"
#include "cli_many.h"
#include "cli_metrics.h"
#include "cli_serve_config.h"
#include "cli_serve_schedule.h"

static const char SERVE_HELP[] =
    "usage: mssql-cdc serve --config FILE [--metrics-listen ADDR:PORT] [--ready-file FILE]\n"
    "         [--log-format text|json] [--json]\n"
    "\n"
    "Runs the tables of a configuration file as one service: a stream per table (as\n"
    "'mssql-cdc stream' runs it), all in this process on one budget of connections\n"
    "and encoder threads, over one or more databases. It runs until SIGINT/SIGTERM\n"
    "(every table finishes its batch and stops) or, when every table's trigger ends\n"
    "(availableNow, once), until they all have. A restart resumes every table from\n"
    "its checkpoint, exactly once.\n"
    "\n"
    "  --config FILE        the INI file (docs/service.md): [service] (budget, templates,\n"
    "                       stream flags, metrics, log format), [storage] (object store\n"
    "                       options), [database NAME] (connectionString, or\n"
    "                       connectionString_env / connectionString_file, and source\n"
    "                       options), [table NAME.CAPTURE_INSTANCE] (its own places,\n"
    "                       flags, source options, and apply / reconcile schedules:\n"
    "                       apply = FLAGS with apply_every = SECONDS runs 'mssql-cdc\n"
    "                       apply FLAGS' on a timer, and so does reconcile;\n"
    "                       backfill = SECONDS [FLAGS] runs 'mssql-cdc backfill' of the\n"
    "                       table's chunked snapshot with its places and options, its\n"
    "                       status served as the mssql_cdc_backfill_* metrics; once it\n"
    "                       says done, no more runs until the stream opens another\n"
    "                       chunked snapshot or a SIGHUP)\n"
    "  --metrics-listen ADDR:PORT\n"
    "                       serve /metrics, /status.json, /healthz, /readyz and the status\n"
    "                       page at / (wins over [service] metrics_listen; port 0: a free\n"
    "                       one, printed on stderr)\n"
    "  --ready-file FILE    once listening, the port is written to FILE\n"
    "  --log-format F       text (default) or json: every log line a JSON object with ts,\n"
    "                       level, table and message, and every batch a JSON object on\n"
    "                       stdout (wins over [service] log_format)\n"
    "  --json               at the end, every table's result on stdout (await_all's)\n"
    "\n"
    "Signals: SIGHUP rereads FILE: tables added start, tables removed stop after their\n"
    "batch, tables whose settings changed restart (their metrics afresh), tables that\n"
    "had ended start again (their metrics go on), the others are not disturbed. A file\n"
    "that is refused is logged with its reasons and changes nothing. max_connections,\n"
    "encoder_threads, the metrics settings and facts_table need a restart.\n"
    "SIGINT/SIGTERM: every table finishes its batch and the service exits.\n"
    "\n"
    "Refused before anything starts (exit 2), each naming the file and line: a key a\n"
    "section does not know, a key given twice, a table without a target, app_id or\n"
    "checkpoint (or a [service] template without {ci}), a table whose database has no\n"
    "section, two tables writing to one place, a bad value, a connection string in a\n"
    "file others may read, a capture instance the source does not have.\n"
    "\n"
    "Exit codes: 0 when every table ended well; else the exit code 'mssql-cdc stream'\n"
    "gives the error of the first table (in the file's order) that failed; 2 bad usage\n"
    "or a refused file.\n";

typedef struct serve {
    serve_config *cfg;
    mcdc_budget *budget;
    mcdc_runtime *runtime; /* every table's (their shared probe per database) */
    int64_t connections;
    cli_metrics *metrics;
    mcdc_opts **probe_opts; /* the capture probe's, a database each (outlive every reload) */
    const char **probe_dbs; /* their labels (the first config's database names: borrowed
                               until the listener copied them) */
    size_t *probe_of;       /* probe_opts[k] is of database k */
    size_t n_probe;
    bool log_json;
    int log_json_flag; /* --log-format: 1 json, 0 text, -1 not given (the file says) */
} serve;

/* The service's own lines (not a table's): text or a JSON object. */
static void serve_log(const serve *s, const char *level, const char *table, const char *fmt,
                      ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!s->log_json) {
        fprintf(stderr, "mssql-cdc: serve: %s%s%s\n", table ? table : "", table ? ": " : "",
                msg);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char when[MCDC_TS_TEXT_SIZE];
    cli_format_ts((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, when);
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    if (f == NULL) return;
    fprintf(f, "{\"ts\":\"%sZ\",\"level\":\"%s\",\"table\":", when, level);
    if (table) {
        fputc('"', f);
        for (const char *p = table; *p; p++)
            if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
            else fputc(*p, f);
        fputc('"', f);
    } else {
        fputs("null", f);
    }
    fputs(",\"message\":\"", f);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    fputs("\"}\n", f);
    if (fclose(f) == 0) fwrite(line, 1, len, stderr);
    free(line);
}

/* A table's schedules stop (a run in progress finishes its pass). */
static void schedules_stop(serve_table *t) {
    for (int k = 0; k < SERVE_SCHEDULES; k++) {
        serve_schedule_stop(t->running[k]);
        t->running[k] = NULL;
    }
}

/* A schedule's run of table user ended: counted on its row. */
static void schedule_ran(void *user, const char *what, bool ok) {
    const cli_table *j = &((serve_table *)user)->job;
    cli_metrics_schedule_ran(j->metrics, j->index, what, ok);
}

/* A backfill run's stdout: a valid status is logged and becomes the
 * table's figures; anything else leaves them as they were, with a warning
 * naming the table (its log's). */
static bool backfill_ran(void *user, int code, const char *out, size_t len) {
    serve_table *t = user;
    const cli_table *j = &t->job;
    mcdc_backfill_status st;
    char why[200], line[MCDC_BACKFILL_STATUS_JSON_SIZE + 16];
    mcdc_error e = MCDC_ERROR_INIT;
    if (!serve_backfill_result(code, out, len, &st, why, sizeof why)) {
        snprintf(line, sizeof line, "backfill: %s; its figures are kept as they were", why);
        j->cfg.log_fn(j->cfg.log_user, MCDC_LOG_WARN, line);
        return false;
    }
    /* done: no more runs until there is something new to read */
    bool newly_done = st.done && strcmp(t->backfill_done_at, st.snapshot) != 0;
    snprintf(t->backfill_done_at, sizeof t->backfill_done_at, "%s", st.done ? st.snapshot : "");
    cli_metrics_backfill(j->metrics, j->index, &st, st.done);
    char json[MCDC_BACKFILL_STATUS_JSON_SIZE];
    if (mcdc_backfill_status_json(json, sizeof json, &st, &e) == MCDC_OK) {
        snprintf(line, sizeof line, "backfill: %s", json);
        j->cfg.log_fn(j->cfg.log_user, MCDC_LOG_INFO, line);
    } else {
        snprintf(line, sizeof line, "backfill: its status (read, published) could not be "
                                    "logged: %.200s", e.message);
        j->cfg.log_fn(j->cfg.log_user, MCDC_LOG_WARN, line);
    }
    if (newly_done) {
        snprintf(line, sizeof line, "backfill: the snapshot at %s is in; no run more until the "
                                    "stream opens another chunked snapshot or a reload",
                 st.snapshot);
        j->cfg.log_fn(j->cfg.log_user, MCDC_LOG_INFO, line);
    }
    return true;
}

/* A backfill run is due unless the last status said done and neither has
 * the stream opened another chunked snapshot since (its registry entry
 * says which it opened last) nor has a reload asked for a run. On the
 * schedule's thread, as backfill_ran. */
static bool backfill_due(void *user) {
    serve_table *t = user;
    if (atomic_exchange(&t->backfill_rearm, false) || t->backfill_done_at[0] == 0) return true;
    mcdc_job_metrics m;
    if (!mcdc_runtime_job_metrics(t->job.cfg.runtime, t->job.stream, &m, sizeof m) ||
        m.version < 2 || m.chunked_snapshot[0] == 0 ||
        strcmp(m.chunked_snapshot, t->backfill_done_at) == 0)
        return false;
    char line[160];
    snprintf(line, sizeof line, "backfill: the stream opened a chunked snapshot at %s: reading it",
             m.chunked_snapshot);
    t->job.cfg.log_fn(t->job.cfg.log_user, MCDC_LOG_INFO, line);
    return true;
}

/* A copy of a NULL-terminated list of words (NULL when out of memory). */
static char **words_dup(char *const *w) {
    size_t n = 0;
    while (w[n]) n++;
    char **c = calloc(n + 1, sizeof *c);
    for (size_t i = 0; c && i < n; i++)
        if ((c[i] = strdup(w[i])) == NULL) {
            cli_words_free(c);
            return NULL;
        }
    return c;
}

/* Starts t: on a row of its own in the metrics, or on row (not (size_t)-1:
 * the row of the same table before it ended, whose figures go on). */
static void table_start(serve *s, serve_table *t, size_t row) {
    cli_table *j = &t->job;
    j->metrics = s->metrics;
    if (row != (size_t)-1) cli_metrics_restart(s->metrics, row);
    j->index = row != (size_t)-1 ? row : cli_metrics_add(s->metrics, t->db, t->name);
    j->out.json = s->log_json;
    if (!cli_table_start(j)) return;
    for (int k = 0; k < SERVE_SCHEDULES; k++) {
        serve_schedule_cfg sc = {SERVE_SCHEDULE_NAMES[k], NULL, t->every_s[k], j->cfg.log_fn,
                                 j->cfg.log_user, NULL, NULL, schedule_ran, NULL, t};
        if (k == SERVE_SCHEDULE_BACKFILL) {
            if (t->backfill == NULL) continue;
            sc.words = words_dup(t->backfill);
            sc.options_text = strdup(t->backfill_options);
            sc.result = backfill_ran;
            sc.due = backfill_due;
            t->backfill_done_at[0] = 0;
            atomic_store(&t->backfill_rearm, false);
            if (sc.words && sc.options_text && serve_schedule_start(&t->running[k], &sc) == 0)
                continue;
            if (sc.words && sc.options_text) sc.words = NULL, sc.options_text = NULL; /* freed */
            cli_words_free(sc.words);
            if (sc.options_text) explicit_bzero(sc.options_text, strlen(sc.options_text));
            free(sc.options_text);
        } else {
            if (t->schedule[k] == NULL) continue;
            char **flags = NULL;
            int n = 0;
            /* the command's name, then its flags (proved when the file was read) */
            if (cli_words_split(t->schedule[k], &flags, &n) == 0 &&
                (sc.words = calloc((size_t)n + 2, sizeof *sc.words)) != NULL &&
                (sc.words[0] = strdup(SERVE_SCHEDULE_NAMES[k])) != NULL) {
                memcpy(sc.words + 1, flags, (size_t)n * sizeof *flags);
                free(flags); /* its words now sc.words' */
                flags = NULL;
                if (serve_schedule_start(&t->running[k], &sc) == 0) continue;
                sc.words = NULL; /* freed by serve_schedule_start */
            }
            cli_words_free(flags);
            cli_words_free(sc.words);
        }
        serve_log(s, "error", t->name, "its %s schedule could not start (out of memory)",
                  SERVE_SCHEDULE_NAMES[k]);
    }
}

/* Asks t to stop after its batch, waits for it, takes its row off the
 * metrics unless its row goes on (the same table starting again). */
static void table_stop(serve *s, serve_table *t, const char *why, bool row_goes_on) {
    schedules_stop(t);
    cli_table_request_stop(&t->job);
    if (t->job.running) {
        pthread_join(t->job.thread, NULL);
        t->job.running = false;
        serve_log(s, "info", t->name, "stopped (%s) after %lld batches, %lld rows", why,
                  (long long)t->job.batches, (long long)t->job.rows);
    }
    if (!row_goes_on) cli_metrics_remove(s->metrics, t->job.index);
}

/* --log-format wins over the file's log_format, for every table. */
static void use_log_flag(serve_config *c, bool json) {
    c->log_json = json;
    for (size_t i = 0; i < c->n_t; i++) c->t[i]->job.json_log = json;
}

/* The listener's databases follow an accepted file n: one new to it is
 * probed from now on (with its first table's options), one gone from it no
 * more, one kept with other options (its connection string, its source
 * keys, its first table) is probed with the new ones from its next poll. */
static void metrics_databases(serve *s, const serve_config *n) {
    if (s->metrics == NULL) return;
    for (size_t k = 0; k < s->cfg->n_db; k++) {
        bool kept = false;
        for (size_t j = 0; j < n->n_db && !kept; j++)
            kept = strcmp(n->db[j].name, s->cfg->db[k].name) == 0;
        if (!kept) {
            cli_metrics_remove_database(s->metrics, s->cfg->db[k].name);
            serve_log(s, "info", NULL, "database %s: removed from the file, no longer probed",
                      s->cfg->db[k].name);
        }
    }
    for (size_t j = 0; j < n->n_db; j++)
        for (size_t k = 0; k < s->cfg->n_db; k++)
            if (strcmp(n->db[j].name, s->cfg->db[k].name) == 0 &&
                !serve_config_probe_same(s->cfg, k, n, j) &&
                cli_metrics_update_database(s->metrics, n->db[j].name,
                                            serve_config_probe_opts(n, j)))
                serve_log(s, "info", NULL, "database %s: its options changed, its capture probe "
                          "opens again with them", n->db[j].name);
    for (size_t j = 0; j < n->n_db; j++)
        if (cli_metrics_add_database(s->metrics, n->db[j].name, serve_config_probe_opts(n, j)))
            serve_log(s, "info", NULL, "database %s: added, its capture probe starts",
                      n->db[j].name);
}

/* SIGHUP: the file again. Nothing changes unless all of it is accepted. */
static void reload(serve *s) {
    serve_log(s, "info", NULL, "SIGHUP: rereading %s", s->cfg->path);
    serve_config *n = NULL;
    if (serve_config_load(&n, s->cfg->path, &s->budget, &s->connections, s->runtime) !=
        EXIT_OK) {
        serve_log(s, "error", NULL, "%s is refused (the reasons above); the %zu tables "
                                    "running are kept as they were",
                  s->cfg->path, s->cfg->n_t);
        return;
    }
    if (s->log_json_flag >= 0) use_log_flag(n, s->log_json_flag == 1);
    bool *fresh = NULL, *keep = NULL;
    size_t *row = NULL; /* a fresh table's metrics row when it is the same one starting again */
    const char *fixed = serve_config_fixed_differs(s->cfg, n);
    if (fixed) {
        serve_log(s, "error", NULL, "%s is refused: [service] %s changed, which needs a "
                                    "restart of the service; nothing was changed",
                  s->cfg->path, fixed);
        goto refused;
    }
    fresh = calloc(n->n_t ? n->n_t : 1, sizeof *fresh);
    keep = calloc(s->cfg->n_t ? s->cfg->n_t : 1, sizeof *keep);
    row = malloc((n->n_t ? n->n_t : 1) * sizeof *row);
    if (fresh == NULL || keep == NULL || row == NULL) {
        serve_log(s, "error", NULL, "out of memory rereading %s; nothing was changed",
                  s->cfg->path);
        goto refused;
    }
    for (size_t i = 0; i < n->n_t; i++) {
        long k = serve_config_find(s->cfg, n->t[i]->name);
        const serve_table *old = k >= 0 ? s->cfg->t[k] : NULL;
        bool same = old && strcmp(old->fingerprint, n->t[i]->fingerprint) == 0;
        fresh[i] = !same || atomic_load(&old->job.finished);
        if (!fresh[i]) keep[k] = true;
        /* one that had ended starts again as it was: its figures go on */
        row[i] = same && fresh[i] ? old->job.index : (size_t)-1;
    }
    if (serve_config_check_instances(n, fresh) != EXIT_OK) {
        serve_log(s, "error", NULL, "%s is refused (the reasons above); nothing was changed",
                  s->cfg->path);
        goto refused;
    }
    /* the file is accepted: stop what goes or changes, then start what is new */
    s->log_json = n->log_json;
    size_t stopped = 0, started = 0, kept = 0;
    for (size_t k = 0; k < s->cfg->n_t; k++) {
        serve_table *old = s->cfg->t[k];
        if (keep[k]) continue;
        long i = serve_config_find(n, old->name);
        table_stop(s, old, i >= 0 ? "its settings changed, or it had ended" : "removed from "
                                                                             "the file",
                   i >= 0 && row[i] != (size_t)-1);
        stopped++;
    }
    for (size_t i = 0; i < n->n_t; i++) {
        if (fresh[i]) continue;
        long k = serve_config_find(s->cfg, n->t[i]->name);
        serve_table_free(n->t[i]);
        n->t[i] = serve_config_take(s->cfg, (size_t)k);
        /* a backfill that said done runs once more: the file was reloaded */
        if (n->t[i]->running[SERVE_SCHEDULE_BACKFILL]) {
            atomic_store(&n->t[i]->backfill_rearm, true);
            serve_schedule_kick(n->t[i]->running[SERVE_SCHEDULE_BACKFILL]);
        }
        kept++;
    }
    metrics_databases(s, n); /* before the tables start: they find their database's row */
    for (size_t i = 0; i < n->n_t; i++)
        if (fresh[i]) {
            table_start(s, n->t[i], row[i]);
            serve_log(s, "info", n->t[i]->name, "started");
            started++;
        }
    serve_config_free(s->cfg);
    s->cfg = n;
    serve_log(s, "info", NULL, "%s applied: %zu tables started, %zu stopped, %zu running on",
              n->path, started, stopped, kept);
    free(fresh);
    free(keep);
    free(row);
    return;
refused:
    free(fresh);
    free(keep);
    free(row);
    serve_config_free(n);
}

/* Whether the service is done: every table ended and none runs on a
 * trigger that never ends (a continuous table that failed waits for a
 * fixed file and SIGHUP). */
static bool all_ended(const serve *s) {
    for (size_t i = 0; i < s->cfg->n_t; i++) {
        const cli_table *j = &s->cfg->t[i]->job;
        if (!atomic_load(&j->finished)) return false;
        if (j->cfg.trigger == MCDC_TRIGGER_DEFAULT ||
            j->cfg.trigger == MCDC_TRIGGER_PROCESSING_TIME)
            return false;
    }
    return true;
}

static int start_metrics(serve *s, const char *listen, const char *ready_file) {
    s->n_probe = s->cfg->n_db;
    s->probe_opts = calloc(s->n_probe, sizeof *s->probe_opts);
    s->probe_dbs = calloc(s->n_probe, sizeof *s->probe_dbs);
    s->probe_of = calloc(s->n_probe, sizeof *s->probe_of);
    if (s->probe_opts == NULL || s->probe_dbs == NULL || s->probe_of == NULL)
        return cli_usage_error("serve: %s", "out of memory");
    /* a probe per database, with its first table's options (a copy: they
     * outlive every reload) */
    for (size_t k = 0; k < s->n_probe; k++) {
        if ((s->probe_opts[k] = serve_config_probe_opts(s->cfg, k)) == NULL)
            return cli_usage_error("serve: %s", "out of memory");
        s->probe_dbs[k] = s->cfg->db[k].name;
        s->probe_of[k] = k;
    }
    cli_metrics_cfg mc = {listen,
                          ready_file,
                          s->cfg->metrics_poll_seconds,
                          s->cfg->lag_problem_seconds,
                          (const mcdc_opts *const *)s->probe_opts,
                          s->n_probe,
                          s->probe_of,
                          s->probe_dbs,
                          s->n_probe,
                          "",
                          NULL,
                          0,
                          true,
                          s->runtime};
    return cli_metrics_start(&s->metrics, &mc);
}

int cmd_serve(int argc, char **argv) {
    serve s;
    memset(&s, 0, sizeof s);
    const char *config = NULL, *listen = NULL, *ready_file = NULL, *log_format = NULL;
    int json = 0, rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(SERVE_HELP, stdout);
            return EXIT_OK;
        } else if (strcmp(a, "--config") == 0) { NEEDV(); config = v; }
        else if (strcmp(a, "--metrics-listen") == 0) {
            NEEDV();
            listen = v;
            rc = cli_metrics_check_listen(v);
        } else if (strcmp(a, "--ready-file") == 0) { NEEDV(); ready_file = v; }
        else if (strcmp(a, "--log-format") == 0) {
            NEEDV();
            log_format = v;
            if (strcasecmp(v, "json") != 0 && strcasecmp(v, "text") != 0)
                rc = cli_usage_error("--log-format: text or json, not '%s'", v);
        } else if (strcmp(a, "--json") == 0) json = 1;
        else rc = cli_usage_error("serve: unknown argument '%s'", a);
    }
    if (rc) return rc;
    if (config == NULL) return cli_usage_error("serve needs %s", "--config FILE");
    /* every thread from here on (streams', listener's) leaves these to the
     * main thread's sigtimedwait */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    mcdc_error re = MCDC_ERROR_INIT;
    if (mcdc_runtime_create(&s.runtime, NULL, &re)) {
        rc = cli_fail(&re);
        goto out;
    }
    rc = serve_config_load(&s.cfg, config, &s.budget, &s.connections, s.runtime);
    if (rc) goto out;
    s.log_json_flag = log_format ? strcasecmp(log_format, "json") == 0 : -1;
    if (s.log_json_flag >= 0) use_log_flag(s.cfg, s.log_json_flag == 1);
    s.log_json = s.cfg->log_json;
    rc = serve_config_check_instances(s.cfg, NULL);
    if (rc) goto out;
    if (listen == NULL) listen = s.cfg->metrics_listen;
    /* the listener is bound before the first side effect */
    if (listen && (rc = start_metrics(&s, listen, ready_file)) != EXIT_OK) goto out;
    mcdc_error e = MCDC_ERROR_INIT;
    if (s.cfg->facts_table &&
        mcdc_facts_table_create(s.cfg->t[0]->job.opts, s.cfg->facts_table, s.cfg->warehouse,
                                &e)) {
        rc = cli_fail(&e);
        goto out;
    }
    for (size_t i = 0; i < s.cfg->n_t; i++) table_start(&s, s.cfg->t[i], (size_t)-1);
    serve_log(&s, "info", NULL, "serving %zu tables of %zu databases from %s", s.cfg->n_t,
              s.cfg->n_db, config);
    for (;;) {
        struct timespec wait = {0, 200 * 1000 * 1000};
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &wait);
        if (sig == SIGHUP) {
            reload(&s);
            continue;
        }
        if (sig == SIGINT || sig == SIGTERM) {
            serve_log(&s, "info", NULL, "%s: every table finishes its batch and stops",
                      strsignal(sig));
            for (size_t i = 0; i < s.cfg->n_t; i++) cli_table_request_stop(&s.cfg->t[i]->job);
            for (size_t i = 0; i < s.cfg->n_t; i++) schedules_stop(s.cfg->t[i]);
            break;
        }
        if (sig < 0 && errno != EAGAIN && errno != EINTR) break;
        if (all_ended(&s)) break;
    }
    cli_table **jobs = calloc(s.cfg->n_t ? s.cfg->n_t : 1, sizeof *jobs);
    for (size_t i = 0; i < s.cfg->n_t; i++) {
        cli_table *j = &s.cfg->t[i]->job;
        if (j->running) pthread_join(j->thread, NULL);
        j->running = false;
        if (jobs) jobs[i] = j;
    }
    if (jobs) {
        cli_many_summary("serve", jobs, s.cfg->n_t, json);
        rc = cli_many_exit_code(jobs, s.cfg->n_t);
    }
    free(jobs);
out:
    cli_metrics_stop(s.metrics);
    serve_config_free(s.cfg);
    for (size_t k = 0; k < s.n_probe && s.probe_opts; k++) mcdc_opts_free(s.probe_opts[k]);
    free(s.probe_opts);
    free(s.probe_dbs);
    free(s.probe_of);
    mcdc_budget_free(s.budget);
    mcdc_runtime_destroy(s.runtime);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
