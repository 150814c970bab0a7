/*
 * cli_many.c - what 'start-many' and 'serve' share (cli_many.h): a table's
 * stream job on its own thread, its places, its lines and the summary.
 */
#include "cli_many.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

void cli_table_init(cli_table *t, const char *name, const char *ci) {
    memset(t, 0, sizeof *t);
    atomic_init(&t->finished, false);
    atomic_init(&t->stop_asked, false);
    t->name = name;
    t->ci = ci;
}

char *cli_many_fill(const char *tpl, const char *const *names, const char *const *values,
                    size_t n) {
    /* two passes: the length, then the text */
    char *out = NULL;
    for (int pass = 0; pass < 2; pass++) {
        size_t o = 0;
        for (const char *p = tpl; *p;) {
            size_t k = 0;
            for (; k < n; k++)
                if (values[k] && strncmp(p, names[k], strlen(names[k])) == 0) break;
            if (k < n) {
                size_t lv = strlen(values[k]);
                if (out) memcpy(out + o, values[k], lv);
                o += lv;
                p += strlen(names[k]);
            } else {
                if (out) out[o] = *p;
                o++;
                p++;
            }
        }
        if (out) {
            out[o] = 0;
            break;
        }
        if ((out = malloc(o + 1)) == NULL) return NULL;
    }
    return out;
}

char *cli_many_expand(const char *tpl, const char *ci, const char *db) {
    static const char *const NAMES[] = {"{ci}", "{db}"};
    const char *values[] = {ci, db};
    return cli_many_fill(tpl, NAMES, values, 2);
}

/* ---- the job's callbacks ------------------------------------------------------------- */

static const char *level_name(mcdc_log_level level) {
    static const char *const NAMES[] = {"error", "warning", "info", "debug"};
    return (int)level >= 0 && (int)level < 4 ? NAMES[level] : "";
}

/* A JSON string's body of v (quotes and control characters escaped). */
static void json_text(FILE *f, const char *v) {
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
}

static void table_log(void *user, mcdc_log_level level, const char *message) {
    const cli_table *t = user;
    if (!t->json_log) {
        fprintf(stderr, "mssql-cdc: %s: %s: %s\n", t->name, level_name(level), message);
        return;
    }
    /* one write per line: the tables log from their threads */
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    if (f == NULL) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char when[MCDC_TS_TEXT_SIZE];
    cli_format_ts((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, when);
    fprintf(f, "{\"ts\":\"%sZ\",\"level\":\"%s\",\"table\":\"", when, level_name(level));
    json_text(f, t->name);
    fputs("\",\"message\":\"", f);
    json_text(f, message);
    fputs("\"}\n", f);
    if (fclose(f) == 0) fwrite(line, 1, len, stderr);
    free(line);
}

static void table_report(void *ctx, const mcdc_batch_report *r) {
    cli_table *t = ctx;
    t->batches++;
    t->rows += r->rows;
    cli_batch_report(&t->out, r);
}

static void table_progress(void *user, const mcdc_progress *p) {
    const cli_table *t = user;
    cli_metrics_progress(t->metrics, t->index, p);
    if (t->progress && t->progress->mode != CLI_PROGRESS_NONE)
        cli_progress_report(t->progress, p);
}

void cli_table_wire(cli_table *t, bool quiet) {
    t->cfg.target = t->target;
    t->cfg.app_id = t->app_id;
    t->cfg.checkpoint = t->checkpoint;
    t->cfg.query_name = t->name;
    t->cfg.log_fn = table_log;
    t->cfg.log_user = t;
    /* the metrics and progress a host may attach before the run hear it
     * (none: nothing) */
    t->cfg.progress_fn = table_progress;
    t->cfg.progress_user = t;
    /* json logs: the batch lines are JSON objects too, on stderr's stream
     * of lines (stdout stays free for the result) */
    t->out = (cli_batch_out){quiet, 0, t->name};
}

static void *table_run(void *arg) {
    cli_table *t = arg;
    cli_metrics_started(t->metrics, t->index, t->stream);
    t->status = mcdc_stream_run(t->stream, table_report, t, &t->err);
    atomic_store(&t->finished, true);
    cli_metrics_ended(t->metrics, t->index, cli_table_state_name(cli_table_state_of(t)),
                      t->status, t->err.message);
    return NULL;
}

bool cli_table_start(cli_table *t) {
    assert(!t->running && t->stream != NULL);
    if (pthread_create(&t->thread, NULL, table_run, t) == 0) {
        t->running = true;
        return true;
    }
    t->status = t->err.code = MCDC_E_NOMEM;
    snprintf(t->err.message, sizeof t->err.message, "no thread could be started for it");
    return false;
}

void cli_table_request_stop(cli_table *t) {
    if (!atomic_load(&t->finished)) atomic_store(&t->stop_asked, true);
    if (t->stream) mcdc_stream_request_stop(t->stream);
}

void cli_table_release(cli_table *t) {
    if (t->running) pthread_join(t->thread, NULL);
    t->running = false;
    mcdc_stream_free(t->stream);
    mcdc_opts_free(t->opts);
    free(t->target);
    free(t->app_id);
    free(t->checkpoint);
    t->stream = NULL;
    t->opts = NULL;
    t->target = t->app_id = t->checkpoint = NULL;
}

cli_table_state cli_table_state_of(const cli_table *t) {
    if (t->status != MCDC_OK && t->status != MCDC_E_CANCELLED) return CLI_TABLE_FAILED;
    return atomic_load(&t->stop_asked) || t->status == MCDC_E_CANCELLED ? CLI_TABLE_STOPPED
                                                                         : CLI_TABLE_DONE;
}

const char *cli_table_state_name(cli_table_state s) {
    static const char *const NAMES[] = {"done", "stopped", "failed"};
    return NAMES[s];
}

/* ---- places --------------------------------------------------------------------------- */

/* A location as a place: a local path made absolute with its '.', '..' and
 * repeated '/' resolved (as text: links are not followed); a URI or a
 * schema.table name as written. Two tables must not share one. */
static char *place_of(const char *loc) {
    bool path = (strchr(loc, '/') || strchr(loc, ':')) && !strstr(loc, "://") &&
                strncasecmp(loc, "file:", 5) != 0;
    if (!path) return strdup(loc);
    char cwd[PATH_MAX] = "";
    if (loc[0] != '/' && getcwd(cwd, sizeof cwd) == NULL) return strdup(loc);
    size_t cap = strlen(cwd) + strlen(loc) + 3;
    char *in = malloc(cap), *out = malloc(cap);
    if (in == NULL || out == NULL) {
        free(in);
        free(out);
        return NULL;
    }
    snprintf(in, cap, "%s/%s", cwd, loc);
    size_t o = 0;
    char *save = NULL;
    for (char *seg = strtok_r(in, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
        if (strcmp(seg, ".") == 0) continue;
        if (strcmp(seg, "..") == 0) {
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--;
            continue;
        }
        out[o++] = '/';
        size_t l = strlen(seg);
        memcpy(out + o, seg, l);
        o += l;
    }
    if (o == 0) out[o++] = '/';
    out[o] = 0;
    free(in);
    return out;
}

int cli_many_check_places(const char *cmd, cli_table *const *tables, size_t n,
                          const mcdc_stream_cfg *shared) {
    size_t cap = n * 2 + 2, k = 0;
    char **place = calloc(cap, sizeof *place);
    const char **who = calloc(cap, sizeof *who);
    int rc = place && who ? EXIT_OK : cli_usage_error("%s: out of memory", cmd);
    for (size_t i = 0; rc == EXIT_OK && i < n; i++) {
        place[k] = place_of(tables[i]->target);
        who[k++] = tables[i]->name;
        place[k] = place_of(tables[i]->checkpoint);
        who[k++] = tables[i]->name;
    }
    if (rc == EXIT_OK && shared && shared->facts_table) {
        place[k] = place_of(shared->facts_table);
        who[k++] = "the facts table";
    }
    if (rc == EXIT_OK && shared && shared->control_table) {
        place[k] = place_of(shared->control_table);
        who[k++] = "the control table";
    }
    for (size_t i = 0; rc == EXIT_OK && i < k; i++)
        if (place[i] == NULL) rc = cli_usage_error("%s: out of memory", cmd);
    for (size_t i = 0; rc == EXIT_OK && i < k; i++)
        for (size_t j = i + 1; rc == EXIT_OK && j < k; j++) {
            if (strcmp(place[i], place[j]) != 0 || who[i] == who[j]) continue;
            char msg[1024];
            snprintf(msg, sizeof msg,
                     "%s: %s and %s would both write to %s: give each table its own target and "
                     "checkpoint ({ci} in a part of the path that is not undone by '..')",
                     cmd, who[i], who[j], place[i]);
            rc = cli_usage_error("%s", msg);
        }
    for (size_t i = 0; i < k && place; i++) free(place[i]);
    free(place);
    free(who);
    return rc;
}

int cli_many_check_instances(const char *cmd, const char *where, const mcdc_opts *opts,
                             cli_table *const *tables, size_t n) {
    const char **names = calloc(n ? n : 1, sizeof *names);
    int *found = calloc(n ? n : 1, sizeof *found);
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = names && found ? EXIT_OK : cli_usage_error("%s: out of memory", cmd);
    for (size_t i = 0; rc == EXIT_OK && i < n; i++) names[i] = tables[i]->ci;
    if (rc == EXIT_OK && mcdc_capture_instances_find(opts, names, n, found, &e)) {
        rc = cli_fail(&e);
        fprintf(stderr, "mssql-cdc: %s: %s%sthe source could not be asked which capture "
                        "instances it has (above); nothing was started\n",
                cmd, where ? where : "", where ? ": " : "");
    }
    size_t unknown = 0;
    for (size_t i = 0; rc == EXIT_OK && i < n; i++) {
        if (found[i] == MCDC_INSTANCE_UNREADABLE)
            fprintf(stderr, "mssql-cdc: %s: warning: this login may not read its change table; "
                            "its stream will stop with PermissionError naming the GRANT\n",
                    tables[i]->name);
        if (found[i] != MCDC_INSTANCE_UNKNOWN) continue;
        fprintf(stderr, "mssql-cdc: %s: the source has no capture instance '%s' (table %s)\n",
                cmd, names[i], tables[i]->name);
        unknown++;
    }
    if (rc == EXIT_OK && unknown) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s: %s: check the names against "
                                  "sys.sp_cdc_help_change_data_capture; nothing was started",
                 cmd, unknown == 1 ? "a capture instance is unknown"
                                   : "capture instances are unknown");
        rc = cli_usage_error("%s", msg);
    }
    free(names);
    free(found);
    return rc;
}

/* ---- the end --------------------------------------------------------------------------- */

void cli_many_summary(const char *cmd, cli_table *const *tables, size_t n, bool json) {
    size_t failed = 0, stopped = 0;
    for (size_t i = 0; i < n; i++) {
        cli_table_state s = cli_table_state_of(tables[i]);
        failed += s == CLI_TABLE_FAILED;
        stopped += s == CLI_TABLE_STOPPED;
    }
    fprintf(stderr, "mssql-cdc: %s: %zu tables: %zu done, %zu stopped, %zu failed\n", cmd, n,
            n - failed - stopped, stopped, failed);
    for (size_t i = 0; i < n; i++) {
        const cli_table *t = tables[i];
        cli_table_state s = cli_table_state_of(t);
        fprintf(stderr, "  %s: %lld batches, %lld rows, %s", t->name, (long long)t->batches,
                (long long)t->rows, cli_table_state_name(s));
        if (s == CLI_TABLE_FAILED)
            fprintf(stderr, " (%s, exit %d): %s", mcdc_status_kind(t->status),
                    cli_exit_code(t->status), t->err.message);
        fputc('\n', stderr);
    }
    if (!json) return;
    json_t *list = json_array(), *errors = json_object();
    for (size_t i = 0; i < n && list && errors; i++) {
        const cli_table *t = tables[i];
        cli_table_state s = cli_table_state_of(t);
        json_t *err = json_null();
        if (s == CLI_TABLE_FAILED) {
            err = json_pack("{s:s, s:s, s:i, s:s}", "kind", mcdc_status_kind(t->status), "status",
                            mcdc_status_name(t->status), "exit_code", cli_exit_code(t->status),
                            "message", t->err.message);
            json_object_set(errors, t->name, err);
        }
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:o}",
                                              "capture_instance", t->ci, "name", t->name,
                                              "target", t->target, "app_id", t->app_id,
                                              "checkpoint", t->checkpoint, "batches",
                                              (json_int_t)t->batches, "rows",
                                              (json_int_t)t->rows, "state",
                                              cli_table_state_name(s), "error", err));
    }
    json_t *out = json_pack("{s:o, s:o}", "errors", errors, "tables", list);
    char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
    if (text) printf("%s\n", text);
    else fprintf(stderr, "mssql-cdc: %s: out of memory writing the result\n", cmd);
    free(text);
    json_decref(out);
}

int cli_many_exit_code(cli_table *const *tables, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (cli_table_state_of(tables[i]) == CLI_TABLE_FAILED) return cli_exit_code(tables[i]->status);
    return EXIT_OK;
}
