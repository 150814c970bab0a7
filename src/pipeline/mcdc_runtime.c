/* mcdc_runtime.c - the runtime the jobs of one host share (mcdc_runtime.h):
 * its allocator accounting, its budget and its default log sink. */
#include "mcdc_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "mcdc_cfg.h"
#include "mcdc_options.h"
#include "mssqlcdc_testing.h"

/* A member's place to sleep while its table is idle (mcdc_runtime_probe_wait):
 * made at its join, so that its address holds while the arrays grow. */
typedef struct probe_member {
    pthread_cond_t wake;   /* on the monotonic clock; signalled when its answer may change */
    bool waiting;          /* in mcdc_runtime_probe_wait */
    int64_t advance_us;    /* while waiting: behind max from then on wakes it */
    const mcdc_ctx *ctx;   /* while waiting: its stop requests (the driver looks) */
    /* Up to where the rounds proved its change table empty past its item's
     * from, CDC cleanup having removed nothing there when they looked
     * (prove): a max_lsn a round read (has_proven false: none since from
     * last changed). */
    mcdc_lsn proven_to;
    bool has_proven;
    bool told_refused;     /* its registry entry says the probe was refused */
} probe_member;

/* A database's probe: its members (one item each) and its last round. */
struct mcdc_db_probe {
    struct mcdc_db_probe *next;
    char *key;                  /* the connection string (owned; never logged) */
    const mcdc_probe_seam *seam; /* its rounds and its clock */
    pthread_mutex_t mu;         /* members, items and the round's answer */
    const void **owners;        /* n members, cap slots (owned) */
    mcdc_probe_item *items;     /* one per member: its ci, the position asked, its answer */
    probe_member **mem;         /* one per member (each owned) */
    int n, cap;
    int64_t round_us;           /* monotonic time of the last round; 0: none */
    mcdc_lsn max;
    bool unusable;              /* a round was refused: members poll on their own */
    int64_t retry_us;           /* while unusable: when a poll tries a round again */
    int64_t retry_ms;           /* the back-off after the next refusal */
    bool running;               /* a member runs a round (outside mu) */
    pthread_cond_t round_done;  /* signalled when running turns false */
    /* Its copy of the items, in the order of their instances' names (the
     * round matches the server's rows to them by name), their owners and
     * their places among the members (owned). */
    mcdc_probe_item *round;
    const void **round_owners;
    int *round_at;
    int round_cap;
    /* The copy holds the members as they are (none joined or left since
     * it was made): a round refreshes only their positions in it. */
    bool round_same;
    /* The waiting member that wakes at the next slot for its poll to run
     * the round (NULL: none; a member takes it when the one holding it is
     * late by two slots); due: when it wakes. */
    const void *driver;
    int64_t driver_due_us;
    /* The waiting member, other than the driver, that wakes each look to
     * see the sleepers' stop requests and whether the driver is late (NULL:
     * none); the others sleep until signalled. stops_us: when the driver
     * looks for stop requests next. */
    const void *deputy;
    int64_t stops_us;
};

/* Storage options given for one scheme family: immutable once published, and
 * kept until the runtime goes (an open in flight may read a replaced one). */
typedef struct rt_storage_set {
    mcdc_opts *opts;             /* first: the set family_set gives out (owned) */
    struct rt_storage_set *next; /* older sets */
    const char *family;          /* static: mcdc_storage_family's */
    mcdc_cred_share share;       /* the credentials its stores found once */
} rt_storage_set;

/* Credentials shared by the jobs whose own storage options are one same set
 * (serve gives each table the config's [storage]): keyed by the set's text,
 * kept until the runtime goes, the key wiped when it is freed. */
typedef struct rt_own_share {
    struct rt_own_share *next;
    char *key;                   /* "NAME=value\n"... in mcdc_opts_storage_names' order */
    mcdc_cred_share share;
} rt_own_share;

/* A job's entry in the registry: a node of the runtime's list. */
struct mcdc_job_entry {
    struct mcdc_job_entry *prev, *next;
    mcdc_runtime *rt;
    mcdc_job_metrics m;         /* under rt->metrics_mu */
};

struct mcdc_runtime {
    mcdc_alloc_acct acct;       /* what its jobs hold; the handle itself is outside it */
    pthread_mutex_t metrics_mu; /* the registry: jobs (oldest first), their figures */
    mcdc_job_entry *jobs_head, *jobs_tail;
    int64_t jobs_made;
    pthread_mutex_t storage_mu; /* storage: newest first */
    rt_storage_set *storage;
    rt_own_share *own_shares;   /* under storage_mu */
    mcdc_runtime_cfg cfg;
    mcdc_budget *budget;        /* owned; NULL: no limit */
    pthread_mutex_t probes_mu;  /* the list of probes */
    mcdc_db_probe *probes;
    _Atomic int64_t probe_rounds, probe_queries;
};

int mcdc_runtime_create(mcdc_runtime **out, const mcdc_runtime_cfg *cfg, mcdc_error *err) {
    if (out == NULL) return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_runtime_create: out is NULL");
    *out = NULL;
    mcdc_runtime_cfg given = MCDC_RUNTIME_CFG_INIT;
    int rc = cfg ? mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_RUNTIME, cfg, err) : MCDC_OK;
    if (rc) return rc;
    if (given.connections_max < 0 || given.encoder_threads_max < 0 ||
        given.memory_bytes_max < 0 || given.probe_interval_ms < 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "a runtime's connections (%d), encoder threads (%d), memory "
                              "(%lld bytes) and probe interval (%lld ms) cannot be negative: "
                              "0 means no limit (the default interval)",
                              given.connections_max, given.encoder_threads_max,
                              (long long)given.memory_bytes_max,
                              (long long)given.probe_interval_ms);
    /* The handle is the host's, not its jobs': charged to no runtime. */
    mcdc_alloc_acct *host = mcdc_alloc_bind(NULL);
    mcdc_runtime *rt = mcdc_calloc(1, sizeof *rt);
    mcdc_alloc_bind(host);
    if (rt == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_alloc_acct_init(&rt->acct, given.memory_bytes_max);
    pthread_mutex_init(&rt->probes_mu, NULL);
    pthread_mutex_init(&rt->storage_mu, NULL);
    pthread_mutex_init(&rt->metrics_mu, NULL);
    rt->cfg = given;
    if (rt->cfg.probe_interval_ms == 0) rt->cfg.probe_interval_ms = 10;
    if (given.connections_max > 0 || given.encoder_threads_max > 0) {
        /* A limit on one kind only: the other as good as unlimited. */
        int conns = given.connections_max > 0 ? given.connections_max : 1 << 20;
        int enc = given.encoder_threads_max > 0 ? given.encoder_threads_max : 1 << 20;
        host = mcdc_alloc_bind(NULL);
        rc = mcdc_budget_create(&rt->budget, conns, enc, err);
        mcdc_alloc_bind(host);
        if (rc) {
            mcdc_runtime_destroy(rt);
            return mcdc_error_wrap(err, "creating the runtime's budget");
        }
    }
    *out = rt;
    return MCDC_OK;
}

void mcdc_runtime_destroy(mcdc_runtime *rt) {
    if (rt == NULL) return;
    mcdc_alloc_acct *host = mcdc_alloc_bind(&rt->acct);
    for (mcdc_db_probe *p = rt->probes, *next; p; p = next) {
        next = p->next;
        MCDC_ASSERT(p->n == 0); /* every stream left before the runtime goes */
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->round_done);
        mcdc_free(p->key);
        mcdc_free(p->owners);
        mcdc_free(p->items);
        mcdc_free(p->mem);
        mcdc_free(p->round);
        mcdc_free(p->round_owners);
        mcdc_free(p->round_at);
        mcdc_free(p);
    }
    mcdc_alloc_bind(host);
    host = mcdc_alloc_bind(NULL); /* the sets are the host's, as the handle is */
    for (rt_storage_set *st = rt->storage, *next; st; st = next) {
        next = st->next;
        mcdc_cred_share_free(&st->share);
        mcdc_opts_free(st->opts);
        mcdc_free(st);
    }
    for (rt_own_share *o = rt->own_shares, *next; o; o = next) {
        next = o->next;
        mcdc_cred_share_free(&o->share); /* its mutex too */
        explicit_bzero(o->key, strlen(o->key));
        mcdc_free(o->key);
        mcdc_free(o);
    }
    mcdc_alloc_bind(host);
    MCDC_ASSERT(rt->jobs_head == NULL); /* every job left before the runtime goes */
    pthread_mutex_destroy(&rt->metrics_mu);
    pthread_mutex_destroy(&rt->storage_mu);
    pthread_mutex_destroy(&rt->probes_mu);
    mcdc_budget_free(rt->budget);
    mcdc_free(rt);
}

void mcdc_runtime_get_stats(const mcdc_runtime *rt, mcdc_runtime_stats *out) {
    MCDC_ASSERT(rt != NULL && out != NULL);
    mcdc_alloc_stats a;
    mcdc_alloc_acct_stats(&rt->acct, &a);
    mcdc_runtime *m = (mcdc_runtime *)rt; /* atomic loads take non-const */
    *out = (mcdc_runtime_stats){a.calls, a.live_bytes, a.peak_bytes, atomic_load(&m->probe_rounds),
                                atomic_load(&m->probe_queries)};
}

void mcdc_runtime_fail_alloc_at(mcdc_runtime *rt, int64_t nth) {
    MCDC_ASSERT(rt != NULL);
    mcdc_alloc_acct_fail_at(&rt->acct, nth);
}

mcdc_alloc_acct *mcdc_runtime_acct_or_bound(mcdc_runtime *rt) {
    return rt ? &rt->acct : mcdc_alloc_bound();
}

mcdc_runtime *mcdc_runtime_of_cfg(int kind, const void *cfg, size_t runtime_at) {
    mcdc_runtime *rt = NULL;
    int version = 0;
    if (cfg) memcpy(&version, cfg, sizeof version);
    size_t n = cfg ? mcdc_cfg_version_bytes((mcdc_cfg_kind)kind, version) : 0;
    if (n >= runtime_at + sizeof rt) memcpy(&rt, (const char *)cfg + runtime_at, sizeof rt);
    return rt;
}

mcdc_job_scope mcdc_runtime_enter_cfg(int kind, const void *cfg, size_t runtime_at) {
    mcdc_runtime *rt = mcdc_runtime_of_cfg(kind, cfg, runtime_at);
    return mcdc_job_enter(mcdc_runtime_acct_or_bound(rt), mcdc_log_current());
}

mcdc_budget *mcdc_runtime_budget_or(mcdc_runtime *rt, mcdc_budget *own) {
    return own ? own : rt ? rt->budget : NULL;
}

mcdc_log_fn mcdc_runtime_log_fn(const mcdc_runtime *rt, void **user) {
    *user = rt ? rt->cfg.log_user : NULL;
    return rt ? rt->cfg.log_fn : NULL;
}

/* ---- storage options per scheme ---------------------------------------------------- */

int mcdc_runtime_set_storage_options(mcdc_runtime *rt, const char *scheme,
                                     const char *const *names, const char *const *values,
                                     size_t n, mcdc_error *err) {
    if (rt == NULL || scheme == NULL || (n > 0 && (names == NULL || values == NULL)))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_runtime_set_storage_options: a NULL argument");
    const char *family = mcdc_storage_family(scheme);
    if (family == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "storage options for scheme \"%.64s\": no store of that scheme "
                              "(s3, s3a, abfss, abfs, az, wasbs, wasb, azure, file, mem, gs)",
                              scheme);
    mcdc_alloc_acct *host = mcdc_alloc_bind(NULL);
    mcdc_opts *o = NULL;
    int rc = mcdc_opts_create(&o, err);
    for (size_t i = 0; rc == MCDC_OK && i < n; i++) {
        if (names[i] == NULL || values[i] == NULL)
            rc = mcdc_error_set(err, MCDC_E_INVALID, "storage option %zu: a NULL name or value", i);
        else if (!mcdc_opt_is_storage(names[i]))
            rc = mcdc_error_set(err, MCDC_E_INVALID,
                                "\"%.64s\" is not a storage option (mcdc_opts_storage_names "
                                "lists them)",
                                names[i]);
        else
            rc = mcdc_opts_set(o, names[i], values[i], NULL, err); /* never quotes a secret */
    }
    rt_storage_set *st = rc == MCDC_OK ? mcdc_calloc(1, sizeof *st) : NULL;
    if (rc == MCDC_OK && st == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_alloc_bind(host);
    if (rc) {
        mcdc_opts_free(o);
        return rc;
    }
    st->family = family;
    st->opts = o;
    pthread_mutex_init(&st->share.mu, NULL);
    pthread_mutex_lock(&rt->storage_mu);
    st->next = rt->storage;
    rt->storage = st;
    pthread_mutex_unlock(&rt->storage_mu);
    return MCDC_OK;
}

/* The newest set of family; a set given with no options is none. */
static const void *family_set(void *fctx, const char *family) {
    mcdc_runtime *rt = fctx;
    pthread_mutex_lock(&rt->storage_mu);
    const rt_storage_set *st = rt->storage;
    while (st && strcmp(st->family, family) != 0) st = st->next;
    pthread_mutex_unlock(&rt->storage_mu);
    return st && mcdc_opts_has_storage(st->opts) ? st : NULL;
}

static const char *set_option(const void *set, const char *name) {
    return mcdc_opt_storage(((const rt_storage_set *)set)->opts, name);
}

/* The share lives in the set, which is never freed before the runtime. */
static mcdc_cred_share *set_share(const void *set) {
    return &((rt_storage_set *)set)->share;
}

/* The text that keys a set of own storage options (NULL: out of memory). */
static char *own_key(const mcdc_opts *opts) {
    mcdc_buf b = {0};
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = MCDC_OK;
    for (const char *const *name = mcdc_opts_storage_names(); *name && rc == MCDC_OK; name++) {
        const char *v = mcdc_opt_storage(opts, *name);
        if (v) rc = mcdc_buf_printf(&b, &e, "%s=%s\n", *name, v);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&b, &e);
    if (rc) {
        if (b.data) explicit_bzero(b.data, b.cap);
        mcdc_buf_free(&b);
        return NULL;
    }
    return (char *)b.data; /* the buffer's block, handed over */
}

mcdc_cred_share *mcdc_runtime_own_share(mcdc_runtime *rt, const mcdc_opts *opts) {
    if (rt == NULL || !mcdc_opts_has_storage(opts)) return NULL;
    mcdc_alloc_acct *host = mcdc_alloc_bind(NULL); /* the host's, as the sets are */
    char *key = own_key(opts);
    mcdc_cred_share *out = NULL;
    if (key) {
        pthread_mutex_lock(&rt->storage_mu);
        for (rt_own_share *o = rt->own_shares; o && out == NULL; o = o->next)
            if (strcmp(o->key, key) == 0) out = &o->share;
        rt_own_share *o = out ? NULL : mcdc_calloc(1, sizeof *o);
        if (o) {
            pthread_mutex_init(&o->share.mu, NULL);
            o->key = key;
            key = NULL;
            o->next = rt->own_shares;
            rt->own_shares = o;
            out = &o->share;
        }
        pthread_mutex_unlock(&rt->storage_mu);
    }
    if (key) {
        explicit_bzero(key, strlen(key));
        mcdc_free(key);
    }
    mcdc_alloc_bind(host);
    return out; /* NULL (out of memory): each store finds its own, as without a runtime */
}

void mcdc_runtime_storage_fallback(mcdc_runtime *rt, mcdc_storage_env *env) {
    if (rt == NULL) return;
    env->family_set = family_set;
    env->set_option = set_option;
    env->set_share = set_share;
    env->fctx = rt;
}

/* ---- the metrics registry ------------------------------------------------------- */

const char *mcdc_job_state_name(mcdc_job_state st) {
    static const char *const NAMES[] = {"starting", "snapshotting", "running",
                                        "done",     "stopped",      "failed"};
    return (unsigned)st < sizeof NAMES / sizeof NAMES[0] ? NAMES[st] : "unknown";
}

mcdc_job_entry *mcdc_runtime_job_join(mcdc_runtime *rt, const char *job, const char *name,
                                      const void *handle) {
    if (rt == NULL) return NULL;
    mcdc_alloc_acct *host = mcdc_alloc_bind(NULL); /* the registry's, as the handle is */
    mcdc_job_entry *e = mcdc_calloc(1, sizeof *e);
    mcdc_alloc_bind(host);
    if (e == NULL) return NULL;
    e->rt = rt;
    e->m.version = MCDC_JOB_METRICS_VERSION;
    e->m.handle = handle;
    e->m.job = job;
    snprintf(e->m.name, sizeof e->m.name, "%s", name ? name : "");
    e->m.ingestion_lag_seconds = -1;
    pthread_mutex_lock(&rt->metrics_mu);
    e->m.id = ++rt->jobs_made;
    e->prev = rt->jobs_tail;
    if (rt->jobs_tail) rt->jobs_tail->next = e;
    else rt->jobs_head = e;
    rt->jobs_tail = e;
    pthread_mutex_unlock(&rt->metrics_mu);
    return e;
}

mcdc_job_entry *mcdc_runtime_job_join_cfg(int kind, const void *cfg, size_t runtime_at,
                                          const char *job, size_t name_at) {
    mcdc_runtime *rt = mcdc_runtime_of_cfg(kind, cfg, runtime_at);
    const char *name = NULL;
    if (rt) memcpy(&name, (const char *)cfg + name_at, sizeof name); /* in every version */
    mcdc_job_entry *e = mcdc_runtime_job_join(rt, job, name, NULL);
    mcdc_runtime_job_started(e);
    return e;
}

mcdc_call_scope mcdc_runtime_call_enter(int kind, const void *cfg, size_t runtime_at,
                                        const char *job, size_t name_at) {
    mcdc_call_scope scope;
    scope.host = mcdc_runtime_enter_cfg(kind, cfg, runtime_at);
    scope.metrics = mcdc_runtime_job_join_cfg(kind, cfg, runtime_at, job, name_at);
    return scope;
}

void mcdc_runtime_call_leave(mcdc_call_scope scope) {
    mcdc_runtime_job_leave(scope.metrics);
    mcdc_job_leave(scope.host);
}

void mcdc_runtime_job_leave(mcdc_job_entry *e) {
    if (e == NULL) return;
    mcdc_runtime *rt = e->rt;
    pthread_mutex_lock(&rt->metrics_mu);
    if (e->prev) e->prev->next = e->next;
    else rt->jobs_head = e->next;
    if (e->next) e->next->prev = e->prev;
    else rt->jobs_tail = e->prev;
    pthread_mutex_unlock(&rt->metrics_mu);
    mcdc_free(e);
}

void mcdc_runtime_job_started(mcdc_job_entry *e) {
    if (e == NULL) return;
    pthread_mutex_lock(&e->rt->metrics_mu);
    e->m.runs++;
    e->m.state = MCDC_JOB_STARTING;
    e->m.progress_active = false;
    pthread_mutex_unlock(&e->rt->metrics_mu);
}

void mcdc_runtime_job_state(mcdc_job_entry *e, mcdc_job_state state) {
    if (e == NULL) return;
    pthread_mutex_lock(&e->rt->metrics_mu);
    e->m.state = state;
    if (state == MCDC_JOB_RUNNING) e->m.progress_active = false;
    pthread_mutex_unlock(&e->rt->metrics_mu);
}

void mcdc_runtime_job_batch(mcdc_job_entry *e, const mcdc_batch_report *r) {
    if (e == NULL) return;
    pthread_mutex_lock(&e->rt->metrics_mu);
    mcdc_job_metrics *m = &e->m;
    m->state = MCDC_JOB_RUNNING;
    m->rows += r->rows;
    m->batches++;
    m->has_batch = true;
    m->last_batch_seconds = r->duration_ms / 1000.0;
    snprintf(m->end_lsn, sizeof m->end_lsn, "%s", r->end_lsn);
    m->has_end_commit = r->has_end_commit;
    m->end_commit_us = r->end_commit_us;
    m->ingestion_lag_seconds = r->ingestion_lag_seconds;
    m->has_retention_headroom = r->has_retention_headroom;
    m->retention_headroom_hours = r->retention_headroom_hours;
    if (r->has_verdict && (!m->has_verdict || r->finalized_until_us != m->finalized_until_us))
        m->verdict_moved_us = mcdc_now_utc_us();
    m->has_verdict = r->has_verdict;
    m->finalized_until_us = r->finalized_until_us;
    m->progress_active = false;
    pthread_mutex_unlock(&e->rt->metrics_mu);
}

void mcdc_runtime_job_progress(mcdc_job_entry *e, const mcdc_progress *p) {
    if (e == NULL || p == NULL) return;
    pthread_mutex_lock(&e->rt->metrics_mu);
    mcdc_job_metrics *m = &e->m;
    m->progress_active = !p->done;
    m->progress_job = p->job;
    m->progress_phase = p->phase;
    m->progress_rows_done = p->rows_done;
    m->progress_rows_total = p->rows_total;
    bool whole = p->version >= 2 && p->job_parts_name != NULL;
    m->progress_parts_done = whole ? p->job_parts_done : p->parts_done;
    m->progress_parts_total = whole ? p->job_parts_total : p->parts_total;
    /* a stream's snapshot (its bootstrap, a re-snapshot, on a switch) */
    if (m->state == MCDC_JOB_STARTING && !p->done && strcmp(m->job, "stream") == 0 &&
        p->job && strcmp(p->job, "snapshot") == 0)
        m->state = MCDC_JOB_SNAPSHOTTING;
    pthread_mutex_unlock(&e->rt->metrics_mu);
}

void mcdc_runtime_job_ended(mcdc_job_entry *e, int status, const mcdc_error *err) {
    if (e == NULL) return;
    pthread_mutex_lock(&e->rt->metrics_mu);
    mcdc_job_metrics *m = &e->m;
    m->state = status == MCDC_OK              ? MCDC_JOB_DONE
               : status == MCDC_E_CANCELLED ? MCDC_JOB_STOPPED
                                              : MCDC_JOB_FAILED;
    m->last_status = status;
    m->last_error[0] = 0;
    if (status < 0 && -status < MCDC_JOB_ERROR_SLOTS) m->errors[-status]++;
    if (status != MCDC_OK)
        snprintf(m->last_error, sizeof m->last_error, "%.*s", (int)sizeof m->last_error - 1,
                 err && err->message[0] ? err->message : mcdc_status_name(status));
    m->progress_active = false;
    pthread_mutex_unlock(&e->rt->metrics_mu);
}

int mcdc_runtime_metrics(mcdc_runtime *rt, mcdc_job_metrics_fn fn, void *user) {
    if (rt == NULL || fn == NULL) return MCDC_E_INVALID;
    mcdc_alloc_acct *host = mcdc_alloc_bind(NULL);
    pthread_mutex_lock(&rt->metrics_mu);
    size_t n = 0;
    for (const mcdc_job_entry *e = rt->jobs_head; e; e = e->next) n++;
    mcdc_job_metrics *copy = mcdc_malloc((n ? n : 1) * sizeof *copy);
    size_t k = 0;
    for (const mcdc_job_entry *e = rt->jobs_head; copy && e; e = e->next) copy[k++] = e->m;
    pthread_mutex_unlock(&rt->metrics_mu);
    mcdc_alloc_bind(host);
    if (copy == NULL) return MCDC_E_NOMEM;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) rc = fn(user, &copy[i]);
    host = mcdc_alloc_bind(NULL);
    mcdc_free(copy);
    mcdc_alloc_bind(host);
    if (rc) return rc;
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* Version 1's struct: every field before version 2's first (no padding
 * between: its last field is 8-byte aligned and 8 bytes long). */
#define JOB_METRICS_V1_BYTES offsetof(mcdc_job_metrics, probe)
_Static_assert(JOB_METRICS_V1_BYTES == offsetof(mcdc_job_metrics, progress_parts_total) +
                                           sizeof(int64_t),
               "version 1 of mcdc_job_metrics ends where version 2 starts");

bool mcdc_runtime_job_metrics(mcdc_runtime *rt, const void *handle, mcdc_job_metrics *out,
                             size_t out_size) {
    if (rt == NULL || handle == NULL || out == NULL || out_size < JOB_METRICS_V1_BYTES)
        return false;
    /* what both know: a newer caller's tail stays, an older one's struct ends sooner */
    size_t n = out_size < sizeof(mcdc_job_metrics) ? out_size : sizeof(mcdc_job_metrics);
    pthread_mutex_lock(&rt->metrics_mu);
    const mcdc_job_entry *e = rt->jobs_head;
    while (e && e->m.handle != handle) e = e->next;
    if (e) memcpy(out, &e->m, n);
    pthread_mutex_unlock(&rt->metrics_mu);
    return e != NULL;
}

/* The entry of the job whose handle is owner (the newest first: a stream
 * joins its probe soon after its create), its probe mode set. */
static void entry_probe(mcdc_runtime *rt, const void *owner, mcdc_job_probe mode) {
    pthread_mutex_lock(&rt->metrics_mu);
    mcdc_job_entry *e = rt->jobs_tail;
    while (e && e->m.handle != owner) e = e->prev;
    if (e) e->m.probe = mode;
    pthread_mutex_unlock(&rt->metrics_mu);
}

void mcdc_runtime_job_chunked_opened(mcdc_job_entry *e, const char *lsn) {
    if (e == NULL || lsn == NULL) return;
    pthread_mutex_lock(&e->rt->metrics_mu);
    snprintf(e->m.chunked_snapshot, sizeof e->m.chunked_snapshot, "%s", lsn);
    pthread_mutex_unlock(&e->rt->metrics_mu);
}

/* ---- one probe per database ------------------------------------------------------ */

/* The probe of key, made when missing; NULL when out of memory. The
 * probes live as long as the runtime (a database's, once made, stays). */
static int db_round(void *source, mcdc_probe_item *items, int n, bool every, mcdc_lsn *max,
                    bool *max_null, int *queries, mcdc_error *err) {
    return mcdc_changes_probe_round(source, items, n, every, max, max_null, queries, err);
}

const mcdc_probe_seam mcdc_probe_seam_db = {db_round, mcdc_monotonic_us,
                                            MCDC_PROBE_WAIT_LOOK_MS};

static mcdc_db_probe *probe_of(mcdc_runtime *rt, const char *key, const mcdc_probe_seam *seam) {
    pthread_mutex_lock(&rt->probes_mu);
    mcdc_db_probe *p = rt->probes;
    while (p && strcmp(p->key, key) != 0) p = p->next;
    if (p == NULL && (p = mcdc_calloc(1, sizeof *p)) != NULL) {
        if ((p->key = mcdc_strdup(key)) == NULL) {
            mcdc_free(p);
            p = NULL;
        } else {
            pthread_mutex_init(&p->mu, NULL);
            pthread_cond_init(&p->round_done, NULL);
            p->seam = seam;
            p->next = rt->probes;
            rt->probes = p;
        }
    }
    pthread_mutex_unlock(&rt->probes_mu);
    return p;
}

int mcdc_runtime_probe_join(mcdc_runtime *rt, const char *db_key, const void *owner,
                            const char *ci, const mcdc_probe_seam *seam, mcdc_db_probe **out,
                            mcdc_error *err) {
    MCDC_ASSERT(rt && db_key && owner && ci && seam && out);
    *out = NULL;
    if (strlen(ci) > MCDC_IDENT_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "capture instance name longer than %d bytes",
                              MCDC_IDENT_BYTES_MAX);
    mcdc_db_probe *p = probe_of(rt, db_key, seam);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = MCDC_OK;
    probe_member *m = mcdc_calloc(1, sizeof *m);
    if (m == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&p->mu);
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 16;
        const void **o = mcdc_realloc(p->owners, (size_t)cap * sizeof *o);
        if (o) p->owners = o;
        mcdc_probe_item *it = o ? mcdc_realloc(p->items, (size_t)cap * sizeof *it) : NULL;
        if (it) p->items = it;
        probe_member **ms = it ? mcdc_realloc(p->mem, (size_t)cap * sizeof *ms) : NULL;
        if (ms) {
            p->mem = ms;
            p->cap = cap;
        } else {
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        }
    }
    bool refused = p->unusable;
    if (rc == MCDC_OK) {
        m->told_refused = refused;
        p->owners[p->n] = owner;
        p->mem[p->n] = m;
        memset(&p->items[p->n], 0, sizeof p->items[p->n]);
        snprintf(p->items[p->n].ci, sizeof p->items[p->n].ci, "%s", ci);
        p->n++;
        p->round_same = false;
        *out = p;
    }
    pthread_mutex_unlock(&p->mu);
    if (rc) {
        pthread_cond_destroy(&m->wake);
        mcdc_free(m);
    }
    /* a probe refused before: its first poll says so, and it leaves */
    if (rc == MCDC_OK)
        entry_probe(rt, owner, refused ? MCDC_JOB_PROBE_REFUSED : MCDC_JOB_PROBE_SHARED);
    return rc;
}

/* The drive is free (its member found work, or left): a waiting member
 * takes it (mcdc_runtime_probe_wait), so that rounds go on. Under p->mu. */
static void drive_free(mcdc_db_probe *p) {
    p->driver = NULL;
    for (int i = 0; i < p->n; i++)
        if (p->mem[i]->waiting && !mcdc_ctx_stopping(p->mem[i]->ctx)) {
            pthread_cond_signal(&p->mem[i]->wake);
            return;
        }
}

/* The deputy left (it waits no more, or it drives): another waiting
 * member takes its place (mcdc_runtime_probe_wait). Under p->mu. */
static void deputy_free(mcdc_db_probe *p) {
    p->deputy = NULL;
    for (int i = 0; i < p->n; i++)
        if (p->mem[i]->waiting && p->owners[i] != p->driver && !mcdc_ctx_stopping(p->mem[i]->ctx)) {
            pthread_cond_signal(&p->mem[i]->wake);
            return;
        }
}

/* Wakes the waiting members asked to stop (a stop request cannot signal:
 * it may come from a signal handler). Under p->mu. */
static void wake_stopping(mcdc_db_probe *p) {
    for (int i = 0; i < p->n; i++)
        if (p->mem[i]->waiting && mcdc_ctx_stopping(p->mem[i]->ctx))
            pthread_cond_signal(&p->mem[i]->wake);
}

void mcdc_runtime_probe_leave(mcdc_runtime *rt, mcdc_db_probe *p, const void *owner) {
    (void)rt;
    if (p == NULL) return;
    probe_member *gone = NULL;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n; i++) {
        if (p->owners[i] != owner) continue;
        gone = p->mem[i];
        p->n--;
        p->owners[i] = p->owners[p->n];
        p->items[i] = p->items[p->n];
        p->mem[i] = p->mem[p->n];
        p->round_same = false;
        break;
    }
    if (p->driver == owner) drive_free(p);
    if (p->deputy == owner) deputy_free(p);
    wake_stopping(p); /* a driver leaving on a stop: the others asked with it */
    pthread_mutex_unlock(&p->mu);
    if (gone) {
        pthread_cond_destroy(&gone->wake);
        mcdc_free(gone);
    }
}

/* owner's place among p's members; a stream polls only a probe it joined */
static int member(const mcdc_db_probe *p, const void *owner) {
    int i = 0;
    while (i < p->n && p->owners[i] != owner) i++;
    MCDC_ASSERT(i < p->n);
    return i;
}

/* Room for a round's copy of the items: cap of them. */
static bool round_room(mcdc_db_probe *p, int n) {
    if (n <= p->round_cap) return true;
    mcdc_probe_item *r = mcdc_realloc(p->round, (size_t)n * sizeof *r);
    const void **o = r ? mcdc_realloc(p->round_owners, (size_t)n * sizeof *o) : NULL;
    int *at = o ? mcdc_realloc(p->round_at, (size_t)n * sizeof *at) : NULL;
    if (r) p->round = r;
    if (o) p->round_owners = o;
    if (at == NULL) return false;
    p->round_at = at;
    p->round_cap = n;
    return true;
}

typedef struct named_at {
    const char *ci;
    int at;
} named_at;

static int named_cmp(const void *a, const void *b) {
    return strcmp(((const named_at *)a)->ci, ((const named_at *)b)->ci);
}

/* The round's copy of the n items made anew, by name (the members' order
 * when out of memory: the round still matches its rows, item by item).
 * Under p->mu. */
static void round_copy(mcdc_db_probe *p, int n) {
    named_at *by = mcdc_malloc((size_t)(n ? n : 1) * sizeof *by);
    for (int i = 0; by && i < n; i++) by[i] = (named_at){p->items[i].ci, i};
    if (by) qsort(by, (size_t)n, sizeof *by, named_cmp);
    for (int k = 0; k < n; k++) {
        int i = by ? by[k].at : k;
        p->round[k] = p->items[i];
        p->round_owners[k] = p->owners[i];
        p->round_at[k] = i;
    }
    mcdc_free(by);
}


/* What a round that found no row in r's change table in (from, max] proves
 * to m (true: no batch needed to know it). Read after the change tables,
 * a start_lsn at or below from says that cleanup had removed none of
 * them (it raises start_lsn before it deletes); one past from, that the
 * rows from it on were all there: the proof reaches max when the rounds
 * before had proved the table empty up to it, and else the gap between
 * (rows that may be gone) is for a batch's retention guard to judge. For
 * a position at or past max, (from, max] holds nothing anyway. */
static bool prove(probe_member *m, const mcdc_probe_item *r, const mcdc_lsn *max) {
    bool purged = mcdc_lsn_cmp(&r->from, max) < 0 && r->has_min &&
                  !mcdc_lsn_is_zero(&r->min_lsn) && mcdc_lsn_cmp(&r->from, &r->min_lsn) < 0;
    if (purged && !(m->has_proven && mcdc_lsn_cmp(&r->min_lsn, &m->proven_to) <= 0)) return false;
    if (!m->has_proven || mcdc_lsn_cmp(&m->proven_to, max) < 0) m->proven_to = *max;
    m->has_proven = true;
    return true;
}

/* Runs a round on a copy of the items, outside the lock (held on entry and
 * on return): the other members keep reading the last round meanwhile
 * rather than queue behind the server. Publishes the answers of the
 * members whose positions did not move during it. */
static int run_round(mcdc_runtime *rt, mcdc_db_probe *p, void *source, int64_t now,
                     mcdc_error *err) {
    int n = p->n;
    if (!round_room(p, n)) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    /* an item is mostly its instance's name: copied when the members change */
    if (!p->round_same) round_copy(p, n);
    for (int k = 0; k < n; k++) {
        p->round[k].from = p->items[p->round_at[k]].from;
        p->round[k].ask = true;
        p->round[k].moved = p->round[k].has_min = false;
    }
    /* the first round and the retries of a refused one read cdc.change_tables
     * whatever the positions: a login refused it is told at once */
    bool every = p->round_us == 0 || p->unusable;
    p->round_same = true;
    p->running = true;
    pthread_mutex_unlock(&p->mu);
    mcdc_lsn max = mcdc_lsn_zero();
    bool was_null = false;
    int queries = 0;
    int rc = p->seam->round(source, p->round, n, every, &max, &was_null, &queries, err);
    atomic_fetch_add(&rt->probe_rounds, 1);
    atomic_fetch_add(&rt->probe_queries, queries);
    pthread_mutex_lock(&p->mu);
    p->running = false;
    pthread_cond_broadcast(&p->round_done);
    if (rc == MCDC_E_PERMISSION || rc == MCDC_E_SERVER) {
        /* once for the database: its retries refused say nothing more */
        if (!p->unusable)
            mcdc_log(MCDC_LOG_WARN,
                     "the shared probe of this database was refused (%s); each stream polls "
                     "max_lsn on its own until it is granted (GRANT SELECT on "
                     "cdc.change_tables and the change tables lets one probe serve them all; "
                     "it is tried again after %d s, then less and less often)",
                     err ? err->message : mcdc_status_name(rc), MCDC_PROBE_RETRY_FIRST_MS / 1000);
        if (!p->unusable || p->retry_ms == 0) p->retry_ms = MCDC_PROBE_RETRY_FIRST_MS;
        p->retry_us = p->seam->now_us() + p->retry_ms * 1000;
        p->retry_ms = p->retry_ms * 2 < MCDC_PROBE_RETRY_MOST_MS ? p->retry_ms * 2
                                                                  : MCDC_PROBE_RETRY_MOST_MS;
        p->unusable = true;
        for (int i = 0; i < p->n; i++) /* they poll on their own from now on */
            if (p->mem[i]->waiting) pthread_cond_signal(&p->mem[i]->wake);
        return MCDC_OK;
    }
    if (rc) return rc;
    if (p->unusable)
        mcdc_log(MCDC_LOG_INFO, "the shared probe of this database was granted: it serves "
                                "every stream of it again");
    p->unusable = false;
    p->retry_ms = 0;
    p->max = max;
    p->round_us = now;
    int64_t done_us = p->seam->now_us();
    for (int k = 0; k < n; k++) {
        /* members keep their places unless one left during the round */
        int i = p->round_at[k];
        if (i >= p->n || p->owners[i] != p->round_owners[k]) i = -1;
        for (int j = 0; i < 0 && j < p->n; j++)
            if (p->owners[j] == p->round_owners[k]) i = j;
        if (i < 0) continue;
        mcdc_probe_item *it = &p->items[i];
        if (mcdc_lsn_cmp(&it->from, &p->round[k].from) == 0) {
            /* rows, or rows past from that may be gone: a batch looks */
            it->moved = p->round[k].moved || !prove(p->mem[i], &p->round[k], &max);
            it->ask = true;
        } else {
            it->ask = false; /* asked about a position it has left */
        }
        /* a waiting member whose table has rows, or that is due to keep up
         * (the member itself looked at only then: one cache line less a
         * member and round) */
        if (((it->ask && it->moved) || mcdc_lsn_cmp(&it->from, &max) < 0) &&
            p->mem[i]->waiting && ((it->ask && it->moved) || done_us >= p->mem[i]->advance_us))
            pthread_cond_signal(&p->mem[i]->wake);
    }
    return MCDC_OK;
}

int mcdc_runtime_probe_poll(mcdc_runtime *rt, mcdc_db_probe *p, const void *owner,
                            void *source, const mcdc_lsn *from, mcdc_lsn *max,
                            bool *moved, bool *usable, mcdc_error *err) {
    MCDC_ASSERT(rt && p && owner && from && max && moved && usable);
    int rc = MCDC_OK;
    pthread_mutex_lock(&p->mu);
    int me = member(p, owner);
    /* A member's answer holds for the position the round asked about. */
    if (mcdc_lsn_cmp(&p->items[me].from, from) != 0) {
        p->items[me].from = *from;
        p->items[me].ask = false;
        p->mem[me]->has_proven = false;
    }
    /* Rounds fall in fixed slots of the interval: one per slot however
     * many members poll in it, and one more for a member whose position
     * moved since (a busy table after its batch, a new one) while it is
     * behind the database; never two at once. A member that needs a round
     * while one runs waits for it to end, then runs its own: the running
     * one asked about its old position, and a guess either way is wrong
     * (moved plans a batch that may read nothing, not moved claims rows
     * nobody looked at). One that merely finds the slot over reads the
     * last round's answer meanwhile rather than queue behind the server. */
    for (;;) {
        int64_t now = p->seam->now_us(), slot_us = rt->cfg.probe_interval_ms * 1000;
        bool fresh = p->round_us != 0 && now / slot_us == p->round_us / slot_us;
        bool need = !p->items[me].ask && mcdc_lsn_cmp(from, &p->max) < 0;
        /* refused: a round again once its back-off is over */
        if (p->unusable && (now < p->retry_us || p->running)) break;
        if (!p->unusable && ((fresh && !need) || (p->running && !need))) break;
        if (p->running) {
            pthread_cond_wait(&p->round_done, &p->mu);
            me = member(p, owner); /* others may have joined or left meanwhile */
            continue;
        }
        rc = run_round(rt, p, source, now, err);
        me = member(p, owner);
        break;
    }
    *usable = !p->unusable;
    probe_member *m = p->mem[me];
    bool tell = rc == MCDC_OK && m->told_refused != !*usable;
    if (tell) m->told_refused = !*usable;
    if (rc == MCDC_OK && *usable) {
        const mcdc_probe_item *it = &p->items[me];
        /* answered about from, or not behind the max it answered with */
        MCDC_ASSERT(it->ask || mcdc_lsn_cmp(from, &p->max) >= 0);
        MCDC_ASSERT(mcdc_lsn_cmp(&it->from, from) == 0);
        *max = p->max;
        *moved = it->ask && it->moved;
        /* its table has work: the rounds are driven by a member still idle */
        if (*moved && p->driver == owner) drive_free(p);
    }
    pthread_mutex_unlock(&p->mu);
    /* the host's figures say which way it polls, when that changed */
    if (tell) entry_probe(rt, owner, *usable ? MCDC_JOB_PROBE_SHARED : MCDC_JOB_PROBE_REFUSED);
    return rc;
}

/* Waits on m's condition until at most deadline (the seam's clock: as
 * long from now on the real one). Under p->mu. */
static void member_sleep(mcdc_db_probe *p, probe_member *m, int64_t deadline_us) {
    deadline_us += mcdc_monotonic_us() - p->seam->now_us();
    struct timespec ts = {(time_t)(deadline_us / 1000000), (long)(deadline_us % 1000000) * 1000};
    pthread_cond_timedwait(&m->wake, &p->mu, &ts);
}

bool mcdc_runtime_probe_wait(mcdc_runtime *rt, mcdc_db_probe *p, const void *owner,
                             int64_t advance_us, const mcdc_ctx *ctx) {
    MCDC_ASSERT(rt && p && owner && ctx);
    int64_t slot_us = rt->cfg.probe_interval_ms * 1000;
    bool poll = false;
    pthread_mutex_lock(&p->mu);
    probe_member *m = p->mem[member(p, owner)];
    m->waiting = true;
    m->advance_us = advance_us;
    m->ctx = ctx;
    for (;;) {
        const mcdc_probe_item *it = &p->items[member(p, owner)];
        int64_t now = p->seam->now_us();
        if (mcdc_ctx_stopping(ctx)) {
            /* the others asked with it go too; the drive to one staying */
            m->waiting = false;
            wake_stopping(p);
            if (p->driver == owner || p->driver == NULL) drive_free(p);
            if (p->deputy == owner) deputy_free(p);
            break;
        }
        if (p->unusable) { /* it polls on its own at once */
            poll = true;
            break;
        }
        /* the last round found rows past its position, or it is due */
        if ((it->ask && it->moved) ||
            (mcdc_lsn_cmp(&it->from, &p->max) < 0 && now >= advance_us)) {
            poll = true;
            break;
        }
        /* The drive: free, or its member late by two slots (not in a
         * round): this one wakes at the next slot and runs the round. */
        if (p->driver != owner &&
            (p->driver == NULL || (!p->running && now > p->driver_due_us + 2 * slot_us)))
            p->driver = owner;
        if (p->driver == owner && p->deputy == owner) deputy_free(p);
        if (p->driver != owner && p->deputy == NULL) p->deputy = owner;
        /* The driver's round: a slot after the last one's start, when its
         * frame's idle interval from the plan that ran it is over too (one
         * wake a round, not one at the slot and one more for the frame). */
        if (p->driver == owner) p->driver_due_us = p->round_us + slot_us;
        if (p->driver == owner && now >= p->driver_due_us) {
            poll = true;
            break;
        }
        /* A stop request cannot signal (it may come from a signal handler):
         * the driver, awake each slot, looks for the members asked to stop
         * every tenth of a look, and the deputy each look (were the driver
         * held up elsewhere); the rest sleep until signalled (a long
         * fallback: the deputy's hand-over is a signal). */
        int64_t look_us = p->seam->look_ms * 1000, until = now + look_us * 60;
        if (p->driver == owner) {
            until = p->driver_due_us;
            if (now >= p->stops_us) {
                wake_stopping(p);
                if (p->deputy == NULL) deputy_free(p); /* a sleeper takes it */
                p->stops_us = now + look_us / 10;
            }
        } else if (p->deputy == owner) {
            until = now + look_us;
            wake_stopping(p);
        }
        member_sleep(p, m, until);
    }
    m->waiting = false;
    m->ctx = NULL;
    if (p->deputy == owner) deputy_free(p);
    /* The driver keeps the drive while it polls: it finds its own round's
     * answer, and waits again (or frees the drive when its table moved). */
    pthread_mutex_unlock(&p->mu);
    return poll;
}

bool mcdc_runtime_probe_proven(mcdc_db_probe *p, const void *owner, const mcdc_lsn *from,
                               mcdc_lsn *max) {
    if (p == NULL) return false;
    pthread_mutex_lock(&p->mu);
    int i = 0;
    while (i < p->n && p->owners[i] != owner) i++;
    bool proven = i < p->n && !p->unusable && mcdc_lsn_cmp(&p->items[i].from, from) == 0 &&
                  p->mem[i]->has_proven;
    if (proven) *max = p->mem[i]->proven_to;
    pthread_mutex_unlock(&p->mu);
    return proven;
}

void mcdc_runtime_probe_state(mcdc_db_probe *p, mcdc_probe_state *out) {
    MCDC_ASSERT(p && out);
    pthread_mutex_lock(&p->mu);
    *out = (mcdc_probe_state){.members = p->n, .driver = p->driver, .deputy = p->deputy,
                              .unusable = p->unusable,
                              .retry_us = p->retry_us, .retry_ms = p->retry_ms};
    for (int i = 0; i < p->n; i++) out->waiting += p->mem[i]->waiting;
    pthread_mutex_unlock(&p->mu);
}

void mcdc_runtime_probe_busy(mcdc_db_probe *p, const void *owner) {
    if (p == NULL) return;
    pthread_mutex_lock(&p->mu);
    if (p->driver == owner) drive_free(p);
    pthread_mutex_unlock(&p->mu);
}
