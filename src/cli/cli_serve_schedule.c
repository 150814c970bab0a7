/*
 * cli_serve_schedule.c - serve's schedules (cli_serve_schedule.h).
 *
 * A run is a child process (posix_spawn of /proc/self/exe): apply and
 * reconcile are whole commands with their own signal handling and output,
 * and a child keeps their state out of the service's. Its stdout and
 * stderr come back through one pipe and are logged a line at a time. The
 * child starts with no signal blocked (the service's threads block the
 * ones its main thread waits for).
 */
#include "cli_serve_schedule.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stopping;
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

/* One run: spawned, its lines logged, waited for. */
static void run_once(serve_schedule *s) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) {
        say(s, MCDC_LOG_ERROR, "no pipe for the run (%s)", strerror(errno));
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDERR_FILENO);
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
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        close(fd[0]);
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
    pthread_mutex_lock(&s->mu);
    s->child = 0;
    s->runs++;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0) s->failed++;
    pthread_mutex_unlock(&s->mu);
    if (code != 0)
        say(s, MCDC_LOG_WARN, "exited %d (see 'mssql-cdc --help' for the exit codes)", code);
    else
        say(s, MCDC_LOG_INFO, "%s", "done");
}

static void *schedule_run(void *arg) {
    serve_schedule *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        pthread_mutex_unlock(&s->mu);
        run_once(s);
        pthread_mutex_lock(&s->mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = (int64_t)(s->every_s * 1e9) + until.tv_nsec;
        until.tv_sec += (time_t)(ns / 1000000000);
        until.tv_nsec = (long)(ns % 1000000000);
        while (!s->stopping && pthread_cond_timedwait(&s->wake, &s->mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int serve_schedule_start(serve_schedule **out, const char *what, char **words, double every_s,
                         mcdc_log_fn log, void *log_user) {
    *out = NULL;
    serve_schedule *s = calloc(1, sizeof *s);
    if (s == NULL) {
        cli_words_free(words);
        return -1;
    }
    snprintf(s->what, sizeof s->what, "%s", what);
    s->words = words;
    s->every_s = every_s;
    s->log = log;
    s->log_user = log_user;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (pthread_create(&s->thread, NULL, schedule_run, s) != 0) {
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->mu);
        cli_words_free(words);
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
    free(s);
}

void serve_schedule_counts(serve_schedule *s, int64_t *runs, int64_t *failed) {
    pthread_mutex_lock(&s->mu);
    *runs = s->runs;
    *failed = s->failed;
    pthread_mutex_unlock(&s->mu);
}
