/*
 * cli_serve_schedule.c - serve's schedules (cli_serve_schedule.h).
 *
 * A run is a child process (posix_spawn of /proc/self/exe): apply and
 * reconcile are whole commands with their own signal handling and output,
 * and a child keeps their state out of the service's. Its stdout and
 * stderr come back through one pipe and are logged a line at a time. The
 * child starts with no signal blocked (the service's threads block the
 * ones its main thread waits for). A schedule with a result callback
 * (backfill's) keeps the run's stdout apart in a memory file and hands it
 * over after the run; one with an options text gives each run a memory file
 * of it at fd 3 (a connection string never on a command line).
 */
#include "cli_serve_schedule.h"

#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

/* A config value's words: more is a typo. */
#define SCHEDULE_WORDS_MAX 256

int cli_words_split(const char *line, char ***out, int *n) {
    *out = NULL;
    *n = 0;
    char **w = calloc(SCHEDULE_WORDS_MAX + 1, sizeof *w);
    size_t len = strlen(line);
    char *buf = malloc(len + 1);
    if (w == NULL || buf == NULL) {
        free(w);
        free(buf);
        return -1;
    }
    int k = 0, bad = 0;
    const char *p = line;
    while (!bad) {
        while (*p == ' ' || *p == '\t') p++;
        if (*p == 0) break;
        size_t o = 0;
        while (*p && *p != ' ' && *p != '\t') {
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                const char *end = strchr(p, q);
                if (end == NULL) {
                    bad = 1;
                    break;
                }
                memcpy(buf + o, p, (size_t)(end - p));
                o += (size_t)(end - p);
                p = end + 1;
            } else {
                buf[o++] = *p++;
            }
        }
        if (bad || k == SCHEDULE_WORDS_MAX || (w[k] = strndup(buf, o)) == NULL) {
            bad = 1;
            break;
        }
        k++;
    }
    free(buf);
    if (bad || k == 0) {
        cli_words_free(w);
        return -1;
    }
    *out = w;
    *n = k;
    return 0;
}

void cli_words_free(char **words) {
    for (size_t i = 0; words && words[i]; i++) free(words[i]);
    free(words);
}

struct serve_schedule {
    char what[32];
    char **words;
    double every_s;
    mcdc_log_fn log;
    void *log_user;
    char *options_text;
    bool (*result)(void *user, int code, const char *out, size_t len);
    void (*ran)(void *user, const char *what, bool ok);
    bool (*due)(void *user);
    void *result_user;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stopping;
    bool kicked; /* serve_schedule_kick: the wait ends now */
    pid_t child; /* 0: none running */
    int64_t runs, failed;
};

static void say(serve_schedule *s, mcdc_log_level level, const char *fmt, ...) {
    char body[1100], msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s: %s", s->what, body);
    s->log(s->log_user, level, msg);
}

/* A memory file (close-on-exec, mode 600, at fd 10 or above so that its
 * dup2 to a low fd in the child always clears that flag) holding text (NULL:
 * empty); -1 with errno. */
static int memory_file(const char *name, const char *text) {
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return -1;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    int err = errno;
    close(fd);
    if (high < 0) {
        errno = err;
        return -1;
    }
    size_t len = text ? strlen(text) : 0, off = 0;
    if (fchmod(high, 0600) != 0) goto fail;
    while (off < len) {
        ssize_t w = write(high, text + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) goto fail;
        off += (size_t)w;
    }
    return high;
fail:
    err = errno ? errno : EIO;
    close(high);
    errno = err;
    return -1;
}

/* The run's stdout (fd, a memory file): at most SERVE_SCHEDULE_OUTPUT_MAX
 * bytes into out (room for one more: a 0); its length. */
static size_t read_output(int fd, char *out) {
    size_t n = 0;
    if (lseek(fd, 0, SEEK_SET) != 0) return 0;
    while (n < SERVE_SCHEDULE_OUTPUT_MAX) {
        ssize_t r = read(fd, out + n, SERVE_SCHEDULE_OUTPUT_MAX - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    out[n] = 0;
    return n;
}

/* One run: spawned, its lines logged, waited for. */
static void run_once(serve_schedule *s) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) {
        say(s, MCDC_LOG_ERROR, "no pipe for the run (%s)", strerror(errno));
        return;
    }
    int out_fd = -1, opt_fd = -1;
    if ((s->result && (out_fd = memory_file("mssql-cdc-run-output", NULL)) < 0) ||
        (s->options_text && (opt_fd = memory_file("mssql-cdc-run-options", s->options_text)) < 0)) {
        say(s, MCDC_LOG_ERROR, "no memory file for the run (%s)", strerror(errno));
        if (out_fd >= 0) close(out_fd);
        close(fd[0]);
        close(fd[1]);
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out_fd >= 0 ? out_fd : fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDERR_FILENO);
    if (opt_fd >= 0) posix_spawn_file_actions_adddup2(&fa, opt_fd, 3);
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    char exe[] = "/proc/self/exe";
    char **argv = calloc(SCHEDULE_WORDS_MAX + 2, sizeof *argv);
    pid_t pid = 0;
    int rc = argv ? 0 : ENOMEM;
    if (argv) {
        argv[0] = exe;
        for (size_t i = 0; s->words[i]; i++) argv[i + 1] = s->words[i];
        pthread_mutex_lock(&s->mu);
        if (!s->stopping) rc = posix_spawn(&pid, exe, &fa, &attr, argv, environ);
        else rc = ECANCELED;
        if (rc == 0) s->child = pid;
        pthread_mutex_unlock(&s->mu);
    }
    free(argv);
    close(fd[1]);
    if (opt_fd >= 0) close(opt_fd); /* the child has its own */
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        close(fd[0]);
        if (out_fd >= 0) close(out_fd);
        if (rc != ECANCELED) say(s, MCDC_LOG_ERROR, "could not start: %s", strerror(rc));
        return;
    }
    FILE *f = fdopen(fd[0], "r");
    char line[2048];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        say(s, MCDC_LOG_INFO, "%s", line);
    }
    if (f) fclose(f);
    else close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    bool ok = code == 0;
    if (s->result) {
        char *text = malloc(SERVE_SCHEDULE_OUTPUT_MAX + 1);
        size_t len = text ? read_output(out_fd, text) : 0;
        ok = s->result(s->result_user, code, text ? text : "", len);
        free(text);
    }
    if (out_fd >= 0) close(out_fd);
    pthread_mutex_lock(&s->mu);
    s->child = 0;
    s->runs++;
    if (!ok) s->failed++;
    pthread_mutex_unlock(&s->mu);
    if (s->ran) s->ran(s->result_user, s->what, ok);
    if (!ok)
        say(s, MCDC_LOG_WARN, "exited %d (see 'mssql-cdc --help' for the exit codes)", code);
    else if (code != 0)
        say(s, MCDC_LOG_INFO, "exited %d", code);
    else
        say(s, MCDC_LOG_INFO, "%s", "done");
}

static void *schedule_run(void *arg) {
    serve_schedule *s = arg;
    bool first = true;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        pthread_mutex_unlock(&s->mu);
        if (first || s->due == NULL || s->due(s->result_user)) run_once(s);
        first = false;
        pthread_mutex_lock(&s->mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = (int64_t)(s->every_s * 1e9) + until.tv_nsec;
        until.tv_sec += (time_t)(ns / 1000000000);
        until.tv_nsec = (long)(ns % 1000000000);
        while (!s->stopping && !s->kicked &&
               pthread_cond_timedwait(&s->wake, &s->mu, &until) == 0) {
        }
        s->kicked = false;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

void serve_schedule_kick(serve_schedule *s) {
    if (s == NULL) return;
    pthread_mutex_lock(&s->mu);
    s->kicked = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

/* Frees an options text, zeroed first (it may hold a secret). */
static void options_free(char *text) {
    if (text) explicit_bzero(text, strlen(text));
    free(text);
}

int serve_schedule_start(serve_schedule **out, const serve_schedule_cfg *cfg) {
    *out = NULL;
    serve_schedule *s = calloc(1, sizeof *s);
    if (s == NULL) {
        cli_words_free(cfg->words);
        options_free(cfg->options_text);
        return -1;
    }
    snprintf(s->what, sizeof s->what, "%s", cfg->what);
    s->words = cfg->words;
    s->every_s = cfg->every_s;
    s->log = cfg->log;
    s->log_user = cfg->log_user;
    s->options_text = cfg->options_text;
    s->result = cfg->result;
    s->ran = cfg->ran;
    s->due = cfg->due;
    s->result_user = cfg->result_user;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (pthread_create(&s->thread, NULL, schedule_run, s) != 0) {
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->mu);
        cli_words_free(s->words);
        options_free(s->options_text);
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void serve_schedule_stop(serve_schedule *s) {
    if (s == NULL) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    if (s->child > 0) kill(s->child, SIGTERM); /* it finishes its pass and exits */
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    cli_words_free(s->words);
    options_free(s->options_text);
    free(s);
}

void serve_schedule_counts(serve_schedule *s, int64_t *runs, int64_t *failed) {
    pthread_mutex_lock(&s->mu);
    *runs = s->runs;
    *failed = s->failed;
    pthread_mutex_unlock(&s->mu);
}

bool serve_backfill_result(int code, const char *out, size_t len, mcdc_backfill_status *st,
                           char *why, size_t cap) {
    json_error_t jerr;
    json_t *j = len ? json_loadb(out, len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    json_t *snap = json_object_get(j, "snapshot"), *done = json_object_get(j, "chunks_done"),
           *total = json_object_get(j, "chunks_total"), *fin = json_object_get(j, "done"),
           *paused = json_object_get(j, "paused"), *state = json_object_get(j, "state"),
           *reason = json_object_get(j, "reason");
    mcdc_backfill_status s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s; /* what mcdc_backfill_status_json reads it as */
    const char *bad = NULL;
    mcdc_backfill_state k = MCDC_BACKFILL_DONE;
    if (!json_is_object(j))
        bad = len ? "its output is not one JSON object" : "it printed no status";
    else if (!(json_is_null(snap) || (json_is_string(snap) && json_string_length(snap) > 0 &&
                                      json_string_length(snap) < sizeof s.snapshot)))
        bad = "its snapshot is not null or a snapshot id";
    else if (!json_is_integer(done) || json_integer_value(done) < 0)
        bad = "its chunks_done is not a count";
    else if (!(json_is_null(total) ||
               (json_is_integer(total) && json_integer_value(total) >= json_integer_value(done))))
        bad = "its chunks_total is not null or a count of at least chunks_done";
    else if (!json_is_boolean(fin) || !json_is_boolean(paused))
        bad = "its done or paused is not true or false";
    else if (!(json_is_null(reason) || json_is_string(reason)))
        bad = "its reason is not null or a string";
    else if (!json_is_string(state))
        bad = "its state is not a string";
    else {
        bool known = false;
        for (int i = 0; i <= MCDC_BACKFILL_NO_SNAPSHOT && !known; i++) {
            k = (mcdc_backfill_state)i;
            known = strcmp(json_string_value(state), mcdc_backfill_state_name(k)) == 0;
        }
        if (!known) bad = "its state is none of backfill's";
        else if (json_is_true(fin) != (k == MCDC_BACKFILL_DONE))
            bad = "its done does not agree with its state";
        else if (code != cli_backfill_exit(k))
            bad = "its exit code does not agree with its state";
    }
    if (bad) {
        if (code != 0 && code != EXIT_BACKFILL_RUNNING && code != EXIT_BACKFILL_WAITING_HEADROOM &&
            code != EXIT_BACKFILL_WAITING_METRICS && code != EXIT_BACKFILL_NO_SNAPSHOT)
            snprintf(why, cap, "it failed (exit %d): %s", code, bad);
        else
            snprintf(why, cap, "%s", bad);
        json_decref(j);
        return false;
    }
    if (json_is_string(snap)) snprintf(s.snapshot, sizeof s.snapshot, "%s", json_string_value(snap));
    s.chunks_done = json_integer_value(done);
    s.chunks_total = json_is_integer(total) ? json_integer_value(total) : -1;
    s.done = json_is_true(fin);
    s.paused = json_is_true(paused);
    s.state = k;
    if (json_is_string(reason)) snprintf(s.reason, sizeof s.reason, "%s", json_string_value(reason));
    json_decref(j);
    *st = s;
    return true;
}
