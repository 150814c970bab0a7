/* cli_progress.c - a long command's progress on stderr: a line redrawn in
 * place on a terminal, a JSON line every few seconds elsewhere (see cli.h). */
#include <math.h>
#include <stdio.h>
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

void cli_progress_init(cli_progress *p, cli_progress_mode mode) {
    memset(p, 0, sizeof *p);
    if (mode == CLI_PROGRESS_AUTO) mode = isatty(STDERR_FILENO) ? CLI_PROGRESS_LINE : CLI_PROGRESS_JSON;
    p->mode = mode;
    p->last_json_ms = -1;
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

/* The phase's rate in rows/s (0 before anything was counted). */
static double update_rate(cli_progress *p, const mcdc_progress *r) {
    if (strcmp(p->phase, r->phase) != 0 || r->rows_done < p->last_rows) {
        snprintf(p->phase, sizeof p->phase, "%s", r->phase);
        p->rate = 0;
        p->last_rows = 0;
        p->last_ms = 0;
    }
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
    n += (size_t)snprintf(text + n, sizeof text - n, "%s, %s: %s", r->job, r->phase, done);
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
    if (r->rows_total >= 0) snprintf(total, sizeof total, "%lld", (long long)r->rows_total);
    if (r->parts_total >= 0) snprintf(parts_total, sizeof parts_total, "%lld", (long long)r->parts_total);
    if (r->parts_name) snprintf(parts_name, sizeof parts_name, "\"%s\"", r->parts_name);
    if (eta >= 0) snprintf(left, sizeof left, "%.1f", eta);
    fprintf(stderr,
            "{\"progress\":{\"job\":\"%s\",\"phase\":\"%s\",\"rows\":%lld,\"rows_total\":%s,"
            "\"rows_estimated\":%s,\"parts_name\":%s,\"parts\":%lld,\"parts_total\":%s,"
            "\"bytes\":%lld,\"rows_per_s\":%.1f,\"phase_s\":%.1f,\"elapsed_s\":%.1f,"
            "\"eta_s\":%s,\"done\":%s}}\n",
            r->job, r->phase, (long long)r->rows_done, total, r->rows_estimated ? "true" : "false",
            parts_name, (long long)r->parts_done, parts_total, (long long)r->bytes_done, rate,
            (double)r->phase_ms / 1000.0, (double)r->elapsed_ms / 1000.0, left,
            r->done ? "true" : "false");
    fflush(stderr);
    p->last_json_ms = r->elapsed_ms;
}

void cli_progress_report(void *user, const mcdc_progress *r) {
    cli_progress *p = user;
    bool new_phase = strcmp(p->phase, r->phase) != 0;
    double rate = update_rate(p, r);
    double eta = -1;
    if (rate > 0 && r->rows_total >= r->rows_done && !r->done)
        eta = (double)(r->rows_total - r->rows_done) / rate;
    if (p->mode == CLI_PROGRESS_LINE) {
        print_line(p, r, rate, eta);
    } else if (p->mode == CLI_PROGRESS_JSON) {
        if (new_phase || r->done || p->last_json_ms < 0 ||
            r->elapsed_ms - p->last_json_ms >= CLI_PROGRESS_JSON_EVERY_MS)
            print_json(p, r, rate, eta);
    }
}

void cli_progress_end(cli_progress *p) {
    if (p->mode == CLI_PROGRESS_LINE && p->line_open) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->line_open = false;
    }
}
