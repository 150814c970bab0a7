/* cli_progress.c - a long command's progress on stderr: a line redrawn in
 * place on a terminal, a JSON line every few seconds elsewhere (see cli.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"

/* Elsewhere than on a terminal (a log, a scheduler's capture), a line every
 * this many milliseconds, besides the phases and the end. */
#define CLI_PROGRESS_JSON_EVERY_MS 5000
/* The rate is smoothed over the reports so that a stall shows without one
 * slow read making the estimate jump. */
#define CLI_PROGRESS_RATE_WEIGHT 0.3

int cli_parse_progress(const char *v, cli_progress_mode *out) {
    static const struct {
        const char *name;
        cli_progress_mode mode;
    } modes[] = {{"auto", CLI_PROGRESS_AUTO},
                 {"line", CLI_PROGRESS_LINE},
                 {"json", CLI_PROGRESS_JSON},
                 {"none", CLI_PROGRESS_NONE}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcasecmp(v, modes[i].name) == 0) {
            *out = modes[i].mode;
            return 0;
        }
    return -1;
}

int cli_progress_option(int argc, char **argv, int *i, cli_progress_mode *mode, int *rc) {
    if (strcmp(argv[*i], "--progress") != 0) return 0;
    const char *v = cli_value(argc, argv, i);
    if (v == NULL) *rc = cli_usage_error("%s needs a value", "--progress");
    else if (cli_parse_progress(v, mode) != 0)
        *rc = cli_usage_error("--progress: expected auto, line, json or none, not '%s'", v);
    return 1;
}

int cli_progress_init(cli_progress *p, cli_progress_mode mode) {
    memset(p, 0, sizeof *p);
    if (mode == CLI_PROGRESS_AUTO) mode = isatty(STDERR_FILENO) ? CLI_PROGRESS_LINE : CLI_PROGRESS_JSON;
    p->mode = mode;
    p->last_json_ms = -1;
    p->json_every_ms = CLI_PROGRESS_JSON_EVERY_MS;
    /* test hook: the tests see a JSON line every few hundred milliseconds */
    const char *every = getenv("MCDC_PROGRESS_JSON_MS");
    int rc = every ? cli_parse_int("MCDC_PROGRESS_JSON_MS", every, 1, 60000, &p->json_every_ms)
                   : EXIT_OK;
    if (rc == EXIT_OK) pthread_mutex_init(&p->mu, NULL); /* cli_progress_end destroys it */
    return rc;
}

int cli_progress_start(cli_progress *p, cli_progress_mode mode, mcdc_progress_fn *fn,
                       void **user, mcdc_log_fn *log_fn, void **log_user) {
    int rc = cli_progress_init(p, mode);
    *fn = rc == EXIT_OK ? cli_progress_callback(p) : NULL;
    *user = p;
    if (rc == EXIT_OK && p->mode == CLI_PROGRESS_LINE) {
        *log_fn = cli_progress_log;
        *log_user = p;
    }
    return rc;
}

/* Under p->mu. */
static void clear_line(cli_progress *p) {
    if (p->mode == CLI_PROGRESS_LINE && p->line_open) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->line_open = false;
    }
}

void cli_progress_log(void *user, mcdc_log_level level, const char *message) {
    static const char *const names[] = {"error", "warning", "info", "debug"};
    cli_progress *p = user;
    pthread_mutex_lock(&p->mu);
    clear_line(p); /* drawn again by the next report */
    fprintf(stderr, "mssql-cdc: %s: %s\n", (int)level >= 0 && (int)level < 4 ? names[level] : "",
            message);
    fflush(stderr);
    pthread_mutex_unlock(&p->mu);
}

mcdc_progress_fn cli_progress_callback(const cli_progress *p) {
    return p->mode == CLI_PROGRESS_NONE ? NULL : cli_progress_report;
}

/* "1.23M", "45.6k", "789" */
static void human(char *out, size_t cap, double v) {
    if (v >= 1e9) snprintf(out, cap, "%.2fG", v / 1e9);
    else if (v >= 1e6) snprintf(out, cap, "%.2fM", v / 1e6);
    else if (v >= 1e4) snprintf(out, cap, "%.1fk", v / 1e3);
    else snprintf(out, cap, "%.0f", v);
}

/* "1:02:03" or "2:03" */
static void clock_text(char *out, size_t cap, double seconds) {
    long long s = (long long)(seconds + 0.5);
    if (s >= 3600) snprintf(out, cap, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(out, cap, "%lld:%02lld", s / 60, s % 60);
}

/* Does r start a phase? Another one by its number (the same name again
 * too: a backfill's next wave). */
static bool starts_phase(const cli_progress *p, const mcdc_progress *r) {
    if (r->version >= 2) return r->phase_number != p->phase_number;
    return strcmp(p->phase, r->phase) != 0 || r->rows_done < p->last_rows;
}

/* The phase's rate in rows/s (0 before anything was counted). */
static double update_rate(cli_progress *p, const mcdc_progress *r, bool new_phase) {
    if (new_phase) {
        snprintf(p->phase, sizeof p->phase, "%s", r->phase);
        p->rate = 0;
        p->last_rows = 0;
        p->last_ms = 0;
    }
    p->phase_number = r->version >= 2 ? r->phase_number : 0;
    int64_t dt = r->phase_ms - p->last_ms;
    if (dt >= 200 && r->rows_done > p->last_rows) {
        double now = (double)(r->rows_done - p->last_rows) * 1000.0 / (double)dt;
        p->rate = p->rate > 0 ? CLI_PROGRESS_RATE_WEIGHT * now + (1 - CLI_PROGRESS_RATE_WEIGHT) * p->rate
                              : now;
        p->last_rows = r->rows_done;
        p->last_ms = r->phase_ms;
    } else if (r->done && r->phase_ms > 0 && p->rate == 0) {
        p->rate = (double)r->rows_done * 1000.0 / (double)r->phase_ms;
    }
    return p->rate;
}

static void print_line(cli_progress *p, const mcdc_progress *r, double rate, double eta) {
    char text[256], done[16], total[16], speed[16], left[48];
    size_t n = 0;
    human(done, sizeof done, (double)r->rows_done);
    n += (size_t)snprintf(text + n, sizeof text - n, "%s%s%s, %s: %s", p->name ? p->name : "",
                          p->name ? ": " : "", r->job, r->phase, done);
    if (r->rows_total >= 0) {
        human(total, sizeof total, (double)r->rows_total);
        n += (size_t)snprintf(text + n, sizeof text - n, " of %s%s rows", r->rows_estimated ? "~" : "",
                              total);
        if (r->rows_total > 0 && n < sizeof text)
            n += (size_t)snprintf(text + n, sizeof text - n, " (%.0f%%)",
                                  fmin(100.0, 100.0 * (double)r->rows_done / (double)r->rows_total));
    } else if (n < sizeof text) {
        n += (size_t)snprintf(text + n, sizeof text - n, " rows");
    }
    if (r->parts_name && n < sizeof text) {
        if (r->parts_total >= 0)
            n += (size_t)snprintf(text + n, sizeof text - n, ", %lld of %lld %s",
                                  (long long)r->parts_done, (long long)r->parts_total, r->parts_name);
        else
            n += (size_t)snprintf(text + n, sizeof text - n, ", %lld %s", (long long)r->parts_done,
                                  r->parts_name);
    }
    if (r->version >= 2 && r->job_parts_name && n < sizeof text) {
        if (r->job_parts_total >= 0)
            n += (size_t)snprintf(text + n, sizeof text - n, " (%lld of %lld %s in all)",
                                  (long long)r->job_parts_done, (long long)r->job_parts_total,
                                  r->job_parts_name);
        else
            n += (size_t)snprintf(text + n, sizeof text - n, " (%lld %s in all)",
                                  (long long)r->job_parts_done, r->job_parts_name);
    }
    if (rate > 0 && n < sizeof text) {
        human(speed, sizeof speed, rate);
        n += (size_t)snprintf(text + n, sizeof text - n, ", %s rows/s", speed);
    }
    if (eta >= 0 && n < sizeof text) {
        clock_text(left, sizeof left, eta);
        n += (size_t)snprintf(text + n, sizeof text - n, ", %s left", left);
    }
    (void)n;
    /* redrawn in place; the last one stays, ended by a newline */
    fprintf(stderr, "\r\033[K%s%s", text, r->done ? "\n" : "");
    fflush(stderr);
    p->line_open = !r->done;
}

static void print_json(cli_progress *p, const mcdc_progress *r, double rate, double eta) {
    char total[24] = "null", parts_total[24] = "null", parts_name[48] = "null", left[32] = "null";
    char job_name[48] = "null", job_done[24] = "null", job_total[24] = "null";
    if (r->rows_total >= 0) snprintf(total, sizeof total, "%lld", (long long)r->rows_total);
    if (r->parts_total >= 0) snprintf(parts_total, sizeof parts_total, "%lld", (long long)r->parts_total);
    if (r->parts_name) snprintf(parts_name, sizeof parts_name, "\"%s\"", r->parts_name);
    if (eta >= 0) snprintf(left, sizeof left, "%.1f", eta);
    if (r->version >= 2 && r->job_parts_name) {
        snprintf(job_name, sizeof job_name, "\"%s\"", r->job_parts_name);
        snprintf(job_done, sizeof job_done, "%lld", (long long)r->job_parts_done);
        if (r->job_parts_total >= 0)
            snprintf(job_total, sizeof job_total, "%lld", (long long)r->job_parts_total);
    }
    /* one line, whole, though many tables' threads report (start-many, serve) */
    flockfile(stderr);
    if (p->name) fprintf(stderr, "{\"table\":\"%s\",", p->name); /* an identifier */
    fprintf(stderr,
            "%s\"progress\":{\"job\":\"%s\",\"phase\":\"%s\",\"phase_number\":%lld,"
            "\"rows\":%lld,\"rows_total\":%s,"
            "\"rows_estimated\":%s,\"parts_name\":%s,\"parts\":%lld,\"parts_total\":%s,"
            "\"job_parts_name\":%s,\"job_parts\":%s,\"job_parts_total\":%s,"
            "\"bytes\":%lld,\"rows_per_s\":%.1f,\"phase_s\":%.3f,\"elapsed_s\":%.3f,"
            "\"eta_s\":%s,\"done\":%s}}\n",
            p->name ? "" : "{", r->job, r->phase, (long long)(r->version >= 2 ? r->phase_number : 0),
            (long long)r->rows_done, total, r->rows_estimated ? "true" : "false",
            parts_name, (long long)r->parts_done, parts_total, job_name, job_done, job_total,
            (long long)r->bytes_done, rate, (double)r->phase_ms / 1000.0,
            (double)r->elapsed_ms / 1000.0, left, r->done ? "true" : "false");
    fflush(stderr);
    funlockfile(stderr);
    p->last_json_ms = r->elapsed_ms;
}

/* Seconds left: the phase's rows at its rate; without a total, the job's
 * parts (a backfill's chunks) at their pace since the first report; else
 * the phase's parts at theirs. -1: not known. */
static double time_left(cli_progress *p, const mcdc_progress *r, double rate) {
    bool job = r->version >= 2 && r->job_parts_name && r->job_parts_total >= 0;
    if (job && !p->job_seen) {
        p->job_seen = true;
        p->job_parts0 = r->job_parts_done;
        p->job_ms0 = r->elapsed_ms;
    }
    if (r->done) return -1;
    if (rate > 0 && r->rows_total >= r->rows_done)
        return (double)(r->rows_total - r->rows_done) / rate;
    if (job && r->job_parts_done > p->job_parts0 && r->job_parts_total >= r->job_parts_done)
        return (double)(r->elapsed_ms - p->job_ms0) / 1000.0 /
               (double)(r->job_parts_done - p->job_parts0) *
               (double)(r->job_parts_total - r->job_parts_done);
    if (r->parts_done > 0 && r->parts_total >= r->parts_done)
        return (double)r->phase_ms / 1000.0 / (double)r->parts_done *
               (double)(r->parts_total - r->parts_done);
    return -1;
}

void cli_progress_report(void *user, const mcdc_progress *r) {
    cli_progress *p = user;
    /* a stream's "streaming" report says it resumed (readiness), not how
     * far a long job is */
    if (r->job && strcmp(r->job, "stream") == 0) return;
    pthread_mutex_lock(&p->mu);
    bool new_phase = starts_phase(p, r);
    double rate = update_rate(p, r, new_phase);
    double eta = time_left(p, r, rate);
    if (p->mode == CLI_PROGRESS_LINE) {
        print_line(p, r, rate, eta);
    } else if (p->mode == CLI_PROGRESS_JSON) {
        if (new_phase || r->done || p->last_json_ms < 0 ||
            r->elapsed_ms - p->last_json_ms >= p->json_every_ms)
            print_json(p, r, rate, eta);
    }
    if (r->done) { /* a job's end: another may follow (a stream's next snapshot) */
        p->phase[0] = 0;
        p->phase_number = 0;
        p->rate = 0;
        p->last_rows = p->last_ms = 0;
        p->last_json_ms = -1;
        p->job_seen = false;
    }
    pthread_mutex_unlock(&p->mu);
}

void cli_progress_clear(cli_progress *p) {
    pthread_mutex_lock(&p->mu);
    clear_line(p);
    pthread_mutex_unlock(&p->mu);
}

void cli_progress_end(cli_progress *p) {
    cli_progress_clear(p);
    pthread_mutex_destroy(&p->mu);
}
