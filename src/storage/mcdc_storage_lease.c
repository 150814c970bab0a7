/*
 * mcdc_storage_lease.c - holding a key on a store without locks (S3, Azure
 * Blob): a lease made of the seam's own calls, nothing else. No rename, no
 * conditional replace: only put-if-absent, get, list and delete.
 *
 * A lease is a chain of small objects next to the key, "<key>.lease.<seq>"
 * (seq in 20 digits, so that names sort as numbers). The newest link is the
 * lease in force. Each link holds a header line {"state":"held"|"released",
 * "ttl_ms":N} and then the holder's note (pid, host, since, app id). Every
 * change is the creation of the next link with put-if-absent, so of two
 * processes racing for the same change exactly one wins:
 *
 *   take      no link, or the newest released, or expired (its store-side
 *             modification time plus its ttl plus a grace is past): create
 *             link newest + 1. Held and not expired: MCDC_E_CONFLICT with the
 *             holder's note.
 *   renew     every ttl / 3 the holder creates link seq + 1 and deletes its
 *             previous one. Finding it taken means another process took the
 *             lease over (we were late past the expiry): the hold is lost, and
 *             mcdc_storage_lock_check says so before the holder's next commit.
 *             Failing to renew for a whole ttl loses it too (it may have
 *             expired meanwhile).
 *   release   create link seq + 1 "released" and delete seq: the next taker
 *             goes on at seq + 2, so a holder stopped in time (a frozen VM
 *             woken up) never renews into a successor's chain.
 *
 * A killed holder (kill -9) stops renewing: its link expires and the next
 * process takes over. Expiry is judged on the store's clock (the listing's
 * modification time of the link) against this machine's clock: clocks must
 * agree within the grace (MCDC_LEASE_GRACE_MS, or the ttl when shorter), as
 * S3's signatures already require them to within minutes.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "mcdc_limits.h"
#include "mcdc_storage.h"

typedef struct lease {
    mcdc_storage *s;  /* borrowed: outlives the hold */
    char *key;        /* owned */
    char *note;       /* owned: header line + the holder's note */
    size_t note_len;
    int64_t ttl_ms;
    int64_t seq;      /* the link this holder owns now */
    int64_t renewed_us; /* monotonic time of the last link written */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool lost;
    char why[512];    /* why the hold was lost */
} lease;

static void link_key(char *out, size_t cap, const char *key, int64_t seq) {
    snprintf(out, cap, "%s.lease.%020lld", key, (long long)seq);
}

/* The link body: {"state":...,"ttl_ms":...}\n<note>. */
static int link_body(mcdc_buf *b, const char *state, int64_t ttl_ms, const char *note,
                     size_t n, mcdc_error *err) {
    char head[96];
    snprintf(head, sizeof head, "{\"state\":\"%s\",\"ttl_ms\":%lld}\n", state, (long long)ttl_ms);
    int rc = mcdc_buf_append_str(b, head, err);
    if (rc == MCDC_OK && n) rc = mcdc_buf_append(b, note, n, err);
    return rc;
}

/* Creates link seq with state; MCDC_E_CONFLICT when it exists. */
static int put_link(lease *l, int64_t seq, const char *state, mcdc_error *err) {
    char k[MCDC_STORAGE_LEASE_KEY_MAX];
    link_key(k, sizeof k, l->key, seq);
    mcdc_buf b = {0};
    int rc = link_body(&b, state, l->ttl_ms, l->note, l->note_len, err);
    if (rc == MCDC_OK) rc = mcdc_storage_put_if_absent(l->s, k, b.data, b.len, err);
    mcdc_buf_free(&b);
    return rc;
}

static void drop_link(lease *l, int64_t seq) {
    char k[MCDC_STORAGE_LEASE_KEY_MAX];
    link_key(k, sizeof k, l->key, seq);
    mcdc_error e = MCDC_ERROR_INIT;
    int rc = mcdc_storage_delete(l->s, k, &e);
    if (rc && rc != MCDC_E_NOTFOUND)
        mcdc_log(MCDC_LOG_DEBUG, "lease %s/%s: an old link stays (%s)", l->s->root, k, e.message);
}

/* The newest link listed: its seq (-1: none), modification time and body. */
typedef struct newest_link {
    int64_t seq;
    int64_t mtime_ms;
    bool released;
    int64_t ttl_ms;
    mcdc_buf note; /* the holder's */
    int64_t older[MCDC_STORAGE_LEASE_LINKS_MAX]; /* older links seen, to delete */
    size_t n_older;
} newest_link;

static int read_newest(newest_link *nl, lease *l, mcdc_error *err) {
    nl->seq = -1;
    nl->n_older = 0;
    mcdc_buf_reset(&nl->note);
    char prefix[MCDC_STORAGE_LEASE_KEY_MAX];
    snprintf(prefix, sizeof prefix, "%s.lease.", l->key);
    const char *slash = strrchr(prefix, '/');
    size_t base_len = strlen(slash ? slash + 1 : prefix); /* names are the last segment */
    mcdc_storage_listing ls = {0};
    int rc = mcdc_storage_list(l->s, prefix, &ls, err);
    if (rc) return rc;
    for (size_t i = 0; i < ls.count; i++) {
        const char *digits = ls.entries[i].name + base_len;
        int64_t seq;
        if (strlen(digits) != 20 || strspn(digits, "0123456789") != 20 ||
            mcdc_parse_i64(digits, &seq) != MCDC_OK)
            continue;
        if (nl->seq >= 0 && nl->n_older < MCDC_STORAGE_LEASE_LINKS_MAX)
            nl->older[nl->n_older++] = nl->seq;
        nl->seq = seq;
        nl->mtime_ms = ls.entries[i].mtime_ms;
    }
    mcdc_storage_listing_free(&ls);
    if (nl->seq < 0) return MCDC_OK;
    char k[MCDC_STORAGE_LEASE_KEY_MAX];
    link_key(k, sizeof k, l->key, nl->seq);
    mcdc_buf b = {0};
    rc = mcdc_storage_get(l->s, k, MCDC_STORAGE_LEASE_BYTES_MAX, &b, err);
    if (rc == MCDC_E_NOTFOUND) { /* superseded meanwhile: the caller looks again */
        mcdc_buf_free(&b);
        return mcdc_error_set(err, MCDC_E_CONFLICT, "lease %s/%s moved on while read",
                              l->s->root, k);
    }
    const char *d = b.data ? (const char *)b.data : "";
    const char *nlc = rc == MCDC_OK ? memchr(d, '\n', b.len) : NULL;
    json_t *h = nlc ? json_loadb(d, (size_t)(nlc - d), 0, NULL) : NULL;
    const char *state = json_string_value(json_object_get(h, "state"));
    json_t *ttl = json_object_get(h, "ttl_ms");
    if (rc == MCDC_OK && (state == NULL || !json_is_integer(ttl) || json_integer_value(ttl) < 1))
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "lease %s/%s is not one of ours (no state and ttl_ms in its first "
                            "line): delete it if no process of ours runs there",
                            l->s->root, k);
    if (rc == MCDC_OK) {
        nl->released = strcmp(state, "released") == 0;
        nl->ttl_ms = (int64_t)json_integer_value(ttl);
        size_t off = (size_t)(nlc - d) + 1;
        rc = mcdc_buf_append(&nl->note, d + off, b.len - off, err);
    }
    json_decref(h);
    mcdc_buf_free(&b);
    return rc;
}

static void *renew_loop(void *arg) {
    lease *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop && !l->lost) {
        int64_t wait_ms = l->ttl_ms / 3;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = (int64_t)ts.tv_nsec + (wait_ms % 1000) * 1000000;
        ts.tv_sec += (time_t)(wait_ms / 1000 + ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &ts) == 0) {
        }
        if (l->stop) break;
        int64_t seq = l->seq;
        pthread_mutex_unlock(&l->mu);
        mcdc_error e = MCDC_ERROR_INIT;
        int rc = put_link(l, seq + 1, "held", &e);
        if (rc == MCDC_OK) drop_link(l, seq);
        pthread_mutex_lock(&l->mu);
        int64_t now = mcdc_monotonic_us();
        if (rc == MCDC_OK) {
            l->seq = seq + 1;
            l->renewed_us = now;
        } else if (rc == MCDC_E_CONFLICT) {
            l->lost = true;
            snprintf(l->why, sizeof l->why,
                     "another process took the lease %s/%s over (this one renewed too late)",
                     l->s->root, l->key);
        } else if (now - l->renewed_us >= l->ttl_ms * 1000) {
            l->lost = true;
            snprintf(l->why, sizeof l->why,
                     "the lease %s/%s could not be renewed for %lld ms (%.300s): it may have "
                     "expired",
                     l->s->root, l->key, (long long)l->ttl_ms, e.message);
        } else {
            mcdc_log(MCDC_LOG_WARN, "lease %s/%s: renewal failed, retried: %s", l->s->root,
                     l->key, e.message);
        }
        if (l->lost) mcdc_log(MCDC_LOG_ERROR, "%s", l->why);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void lease_free(lease *l) {
    if (l == NULL) return;
    mcdc_free(l->key);
    mcdc_free(l->note);
    mcdc_free(l);
}

int mcdc_storage__lease_take(void **out, mcdc_storage *s, const char *key, const void *note,
                             size_t n, int64_t ttl_ms, mcdc_buf *holder, mcdc_error *err) {
    *out = NULL;
    MCDC_ASSERT(ttl_ms >= 1);
    if (strlen(key) + 32 > MCDC_STORAGE_LEASE_KEY_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "%s: key %s is too long for a lease", s->root,
                              key);
    lease *l = mcdc_calloc(1, sizeof *l);
    if (l == NULL || (l->key = mcdc_strdup(key)) == NULL ||
        (n && (l->note = mcdc_malloc(n)) == NULL)) {
        lease_free(l);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (n) memcpy(l->note, note, n);
    l->note_len = n;
    l->s = s;
    l->ttl_ms = ttl_ms;
    newest_link nl = {0};
    int rc = MCDC_E_CONFLICT;
    for (int attempt = 0; attempt < MCDC_STORAGE_LEASE_TAKE_ROUNDS && rc == MCDC_E_CONFLICT;
         attempt++) {
        rc = read_newest(&nl, l, err);
        if (rc == MCDC_E_CONFLICT) continue; /* moved on while read */
        if (rc) break;
        int64_t now_ms = mcdc_now_utc_us() / 1000;
        int64_t grace = nl.ttl_ms < MCDC_LEASE_GRACE_MS ? nl.ttl_ms : MCDC_LEASE_GRACE_MS;
        bool free_now = nl.seq < 0 || nl.released || nl.mtime_ms + nl.ttl_ms + grace < now_ms;
        if (!free_now) {
            rc = mcdc_error_set(err, MCDC_E_CONFLICT,
                                "%s/%s is held by another process (its lease runs until it "
                                "stops renewing it)",
                                s->root, key);
            if (holder) (void)mcdc_buf_append(holder, nl.note.data, nl.note.len, NULL);
            break;
        }
        if (nl.seq >= 0 && !nl.released)
            mcdc_log(MCDC_LOG_WARN, "%s/%s: the lease of a process that stopped renewing it "
                     "%lld ms ago is taken over: %.*s", s->root, key,
                     (long long)(now_ms - nl.mtime_ms), (int)nl.note.len,
                     nl.note.data ? (const char *)nl.note.data : "");
        rc = put_link(l, nl.seq + 1, "held", err); /* CONFLICT: another won; look again */
    }
    if (rc == MCDC_OK) {
        l->seq = nl.seq + 1;
        l->renewed_us = mcdc_monotonic_us();
        for (size_t i = 0; i < nl.n_older; i++) drop_link(l, nl.older[i]);
        if (nl.seq >= 0) drop_link(l, nl.seq);
        pthread_mutex_init(&l->mu, NULL);
        pthread_cond_init(&l->cv, NULL);
        if (pthread_create(&l->thread, NULL, renew_loop, l) != 0) {
            pthread_mutex_destroy(&l->mu);
            pthread_cond_destroy(&l->cv);
            drop_link(l, l->seq);
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "cannot start the renewal of lease %s/%s",
                                s->root, key);
        }
    }
    mcdc_buf_free(&nl.note);
    if (rc) {
        lease_free(l);
        return rc;
    }
    *out = l;
    return MCDC_OK;
}

int mcdc_storage__lease_check(void *hold, mcdc_error *err) {
    lease *l = hold;
    pthread_mutex_lock(&l->mu);
    int rc = l->lost ? mcdc_error_set(err, MCDC_E_FOREIGN_WRITER, "%s", l->why) : MCDC_OK;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void mcdc_storage__lease_release(void *hold) {
    lease *l = hold;
    if (l == NULL) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    if (!l->lost) {
        mcdc_error e = MCDC_ERROR_INIT;
        if (put_link(l, l->seq + 1, "released", &e) == MCDC_OK) drop_link(l, l->seq);
        else
            mcdc_log(MCDC_LOG_WARN, "lease %s/%s was not given back (%s): it expires in %lld ms",
                     l->s->root, l->key, e.message, (long long)l->ttl_ms);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    lease_free(l);
}
