/*
 * two_streams - two streams of two tables in one process, on one budget,
 * through the public API only (plus /proc to count our own sockets).
 *
 *   two_streams CONNSTR DIR PORT CONNECTIONS   (0: no budget)
 *
 * Stream "a" reads dbo_a into DIR/bronze_a, stream "b" dbo_b into
 * DIR/bronze_b; both write to the one facts table DIR/facts. Each runs on
 * its own thread with a processingTime trigger. Once both have committed
 * three batches, a is asked to stop; the program checks that a returns
 * while b goes on committing, then stops b. A sampler counts this
 * process's TCP connections to PORT every millisecond.
 *
 * Prints: a_rc, b_rc, a_batches, b_batches, b_batches_after_a_stopped,
 * peak_connections, a_log_lines, b_log_lines (lines each stream's log
 * function received, to show they are kept apart).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mssqlcdc.h"

typedef struct {
    const char *name;
    mcdc_stream *stream;
    atomic_int batches;
    atomic_int log_lines;
    atomic_int foreign_lines; /* lines naming the other stream's table */
    int rc;
    mcdc_error err;
    pthread_t th;
    atomic_int done;
} job;

static void on_report(void *ctx, const mcdc_batch_report *r) {
    (void)r;
    job *j = ctx;
    atomic_fetch_add(&j->batches, 1);
}

static void on_log(void *user, mcdc_log_level level, const char *msg) {
    job *j = user;
    atomic_fetch_add(&j->log_lines, 1);
    const char *other = strcmp(j->name, "a") == 0 ? "dbo_b" : "dbo_a";
    if (strstr(msg, other)) atomic_fetch_add(&j->foreign_lines, 1);
    fprintf(stderr, "[%s] %d %s\n", j->name, (int)level, msg);
}

static void *run(void *arg) {
    job *j = arg;
    j->rc = mcdc_stream_run(j->stream, on_report, j, &j->err);
    atomic_store(&j->done, 1);
    return NULL;
}

/* ---- our sockets to the simulator, from /proc ------------------------------ */
static unsigned g_port;
static atomic_int g_peak, g_sampling;

static int count_sockets(void) {
    unsigned long inodes[512];
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 512) {
        char path[300], link[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k <= 0) continue;
        link[k] = 0;
        unsigned long ino;
        if (sscanf(link, "socket:[%lu]", &ino) == 1) inodes[n++] = ino;
    }
    closedir(d);
    int count = 0;
    const char *tables[] = {"/proc/self/net/tcp", "/proc/self/net/tcp6"};
    for (int t = 0; t < 2; t++) {
        FILE *f = fopen(tables[t], "r");
        if (f == NULL) continue;
        char line[512];
        if (fgets(line, sizeof line, f) == NULL) { fclose(f); continue; }
        while (fgets(line, sizeof line, f)) {
            char local[64], remote[64];
            unsigned st;
            unsigned long ino;
            if (sscanf(line, "%*d: %63s %63s %x %*s %*s %*s %*s %*s %lu", local, remote, &st, &ino) != 4)
                continue;
            const char *colon = strrchr(remote, ':');
            if (colon == NULL || (unsigned)strtoul(colon + 1, NULL, 16) != g_port) continue;
            for (int i = 0; i < n; i++)
                if (inodes[i] == ino) count++;
        }
        fclose(f);
    }
    return count;
}

static void *sampler(void *arg) {
    (void)arg;
    while (atomic_load(&g_sampling)) {
        int c = count_sockets();
        if (c > atomic_load(&g_peak)) atomic_store(&g_peak, c);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void wait_for(atomic_int *v, int at_least, int seconds) {
    for (int i = 0; i < seconds * 100 && atomic_load(v) < at_least; i++) usleep(10000);
}

static int make_job(job *j, const char *name, const char *cs, const char *dir, mcdc_budget *b,
                    mcdc_opts **opts, char paths[4][512]) {
    mcdc_error e = MCDC_ERROR_INIT;
    char ci[32];
    snprintf(ci, sizeof ci, "dbo_%s", name);
    if (mcdc_opts_create(opts, &e) || mcdc_opts_set(*opts, "captureInstance", ci, NULL, &e) ||
        mcdc_opts_set(*opts, "connectionString", cs, NULL, &e) ||
        mcdc_opts_set(*opts, "failOnDataLoss", "false", NULL, &e) ||
        mcdc_opts_set(*opts, "numPartitions", "4", NULL, &e)) {
        fprintf(stderr, "options: %s\n", e.message);
        return 1;
    }
    snprintf(paths[0], 512, "%s/bronze_%s", dir, name);
    snprintf(paths[1], 512, "%s/ckpt_%s", dir, name);
    snprintf(paths[2], 512, "%s/facts", dir);
    snprintf(paths[3], 512, "%s/control", dir);
    mcdc_stream_cfg cfg = MCDC_STREAM_CFG_INIT;
    cfg.target = paths[0];
    cfg.app_id = name;
    cfg.checkpoint = paths[1];
    cfg.facts_table = paths[2];
    cfg.control_table = paths[3];
    cfg.trigger = MCDC_TRIGGER_PROCESSING_TIME;
    cfg.processing_time_ms = 100;
    cfg.budget = b;
    cfg.log_fn = on_log;
    cfg.log_user = j;
    j->name = name;
    if (mcdc_stream_create(&j->stream, *opts, &cfg, &e)) {
        fprintf(stderr, "stream %s: %s\n", name, e.message);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) return 64;
    const char *cs = argv[1], *dir = argv[2];
    g_port = (unsigned)atoi(argv[3]);
    int connections = atoi(argv[4]);
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_budget *budget = NULL;
    if (connections > 0 && mcdc_budget_create(&budget, connections, 1, &e)) {
        fprintf(stderr, "budget: %s\n", e.message);
        return 1;
    }
    static job a, b;
    mcdc_opts *oa = NULL, *ob = NULL;
    char pa[4][512], pb[4][512];
    if (make_job(&a, "a", cs, dir, budget, &oa, pa) || make_job(&b, "b", cs, dir, budget, &ob, pb))
        return 1;
    atomic_store(&g_sampling, 1);
    pthread_t s;
    pthread_create(&s, NULL, sampler, NULL);
    pthread_create(&a.th, NULL, run, &a);
    pthread_create(&b.th, NULL, run, &b);
    wait_for(&a.batches, 3, 60);
    wait_for(&b.batches, 3, 60);
    mcdc_stream_request_stop(a.stream);
    pthread_join(a.th, NULL);
    int b_running_when_a_stopped = !atomic_load(&b.done);
    int b_at_stop = atomic_load(&b.batches);
    wait_for(&b.batches, b_at_stop + 2, 30);
    int b_after = atomic_load(&b.batches) - b_at_stop;
    mcdc_stream_request_stop(b.stream);
    pthread_join(b.th, NULL);
    atomic_store(&g_sampling, 0);
    pthread_join(s, NULL);
    printf("a_rc: %d\nb_rc: %d\n", a.rc, b.rc);
    if (a.rc) printf("a_error: %s\n", a.err.message);
    if (b.rc) printf("b_error: %s\n", b.err.message);
    printf("a_batches: %d\nb_batches: %d\n", atomic_load(&a.batches), atomic_load(&b.batches));
    printf("b_running_when_a_stopped: %d\nb_batches_after_a_stopped: %d\n",
           b_running_when_a_stopped, b_after);
    printf("peak_connections: %d\n", atomic_load(&g_peak));
    printf("a_log_lines: %d\nb_log_lines: %d\n", atomic_load(&a.log_lines), atomic_load(&b.log_lines));
    printf("a_foreign_lines: %d\nb_foreign_lines: %d\n", atomic_load(&a.foreign_lines),
           atomic_load(&b.foreign_lines));
    mcdc_stream_free(a.stream);
    mcdc_stream_free(b.stream);
    mcdc_opts_free(oa);
    mcdc_opts_free(ob);
    mcdc_budget_free(budget);
    return 0;
}
