/* mcdc_storage.c - the seam's front: key checks and writer bookkeeping shared
 * by every backend, and the whole-object calls built on the writer. */
#include "mcdc_storage.h"

#include "mcdc_limits.h"

#include <string.h>

void mcdc_storage_listing_free(mcdc_storage_listing *l) {
    if (l == NULL) return;
    for (size_t i = 0; i < l->count; i++) mcdc_free(l->entries[i].name);
    mcdc_free(l->entries);
    l->entries = NULL;
    l->count = 0;
}

void mcdc_storage_listing_drop_upto(mcdc_storage_listing *l, const char *after) {
    if (after == NULL) return;
    size_t n = 0;
    while (n < l->count && strcmp(l->entries[n].name, after) <= 0) mcdc_free(l->entries[n++].name);
    if (n == 0) return;
    memmove(l->entries, l->entries + n, (l->count - n) * sizeof *l->entries);
    l->count -= n;
}

/* ---- parts sent in the background ---------------------------------------------- */

void mcdc_part_sender_init(mcdc_part_sender *ps, mcdc_part_send_fn send, mcdc_part_sent_fn sent,
                           void *ctx, size_t part_bytes) {
    memset(ps, 0, sizeof *ps);
    ps->send = send;
    ps->sent = sent;
    ps->ctx = ctx;
    size_t n = part_bytes ? MCDC_PARTS_IN_FLIGHT_BYTES / part_bytes : 1;
    ps->in_flight = n < 1 ? 1 : n > MCDC_PARTS_IN_FLIGHT_MAX ? MCDC_PARTS_IN_FLIGHT_MAX : (int)n;
    for (int i = 0; i < MCDC_PARTS_IN_FLIGHT_MAX; i++) ps->slots[i].ps = ps;
}

static void *part_slot_main(void *arg) {
    mcdc_part_slot *sl = arg;
    mcdc_error_clear(&sl->err);
    sl->note[0] = 0;
    sl->rc = sl->ps->send(sl->ps->ctx, sl->index, &sl->part, sl->note, &sl->err);
    mcdc_buf_reset(&sl->part);
    return NULL;
}

/* Waits for the oldest part out; its sent callback, in order. */
static void part_sender_reap(mcdc_part_sender *ps) {
    mcdc_part_slot *sl = &ps->slots[ps->done % ps->in_flight];
    if (sl->running) {
        pthread_join(sl->thread, NULL);
        sl->running = false;
    }
    ps->done++;
    if (ps->rc) return; /* the first failure is the one kept */
    if (sl->rc) {
        ps->rc = sl->rc;
        ps->err = sl->err;
    } else if (ps->sent) {
        mcdc_error_clear(&ps->err);
        ps->rc = ps->sent(ps->ctx, sl->index, sl->note, &ps->err);
    }
}

int mcdc_part_sender_wait(mcdc_part_sender *ps, mcdc_error *err) {
    while (ps->done < ps->handed) part_sender_reap(ps);
    if (ps->rc && err) *err = ps->err;
    return ps->rc;
}

int mcdc_part_sender_send(mcdc_part_sender *ps, mcdc_buf *full, mcdc_error *err) {
    if (ps->handed - ps->done == ps->in_flight) part_sender_reap(ps);
    if (ps->rc) {
        if (err) *err = ps->err;
        return ps->rc;
    }
    mcdc_part_slot *sl = &ps->slots[ps->handed % ps->in_flight];
    mcdc_buf spare = sl->part; /* emptied by its last send, its room kept */
    sl->part = *full;
    *full = spare;
    full->limit = sl->part.limit;
    sl->index = ps->handed++;
    if (mcdc_thread_start(&sl->thread, part_slot_main, sl) == 0) {
        sl->running = true;
        return MCDC_OK;
    }
    part_slot_main(sl); /* no thread to be had: sent here */
    return MCDC_OK;     /* its result comes with the wait for it */
}

void mcdc_part_sender_free(mcdc_part_sender *ps) {
    if (ps == NULL) return;
    while (ps->done < ps->handed) part_sender_reap(ps);
    for (int i = 0; i < MCDC_PARTS_IN_FLIGHT_MAX; i++) mcdc_buf_free(&ps->slots[i].part);
}

int mcdc_storage_listing_add(mcdc_storage_listing *l, size_t *cap, const char *name,
                             int64_t size, int64_t mtime_ms, mcdc_error *err) {
    if (l->count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        mcdc_storage_entry *ne = mcdc_realloc(l->entries, ncap * sizeof *ne);
        if (ne == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory listing");
        l->entries = ne;
        *cap = ncap;
    }
    mcdc_storage_entry *en = &l->entries[l->count];
    if ((en->name = mcdc_strdup(name)) == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory listing");
    en->size = size;
    en->mtime_ms = mtime_ms;
    l->count++;
    return MCDC_OK;
}

/* Keys are relative, '/'-separated, without empty, "." or ".." segments:
 * a key can never leave the root. A list prefix may end in '/'. */
static int check_key(const char *key, bool allow_trailing_slash, mcdc_error *err) {
    size_t n = strlen(key);
    if (n == 0 || key[0] == '/')
        return mcdc_error_set(err, MCDC_E_INVALID, "storage key \"%s\" must be a relative path",
                              key);
    const char *seg = key;
    for (;;) {
        const char *slash = strchr(seg, '/');
        size_t len = slash ? (size_t)(slash - seg) : strlen(seg);
        bool last = slash == NULL;
        if ((len == 0 && !(last && allow_trailing_slash && seg != key)) ||
            (len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "storage key \"%s\" has an empty, \".\" or \"..\" segment", key);
        if (last) break;
        seg = slash + 1;
    }
    return MCDC_OK;
}

int mcdc_storage_check_key(const char *key, mcdc_error *err) {
    MCDC_ASSERT(key != NULL);
    return check_key(key, false, err);
}

void mcdc_storage_free(mcdc_storage *s) {
    if (s == NULL) return;
    if (s->ops && s->ops->destroy) s->ops->destroy(s->self);
    mcdc_free(s->root);
    mcdc_free(s);
}

/* ---- writers ------------------------------------------------------------------ */

int mcdc_storage_writer_open(mcdc_storage_writer **out, mcdc_storage *s, const char *key,
                             mcdc_error *err) {
    MCDC_ASSERT(out != NULL && s != NULL && key != NULL);
    *out = NULL;
    int rc = check_key(key, false, err);
    if (rc) return rc;
    mcdc_storage_writer *w = mcdc_calloc(1, sizeof *w);
    if (w == NULL || (w->name = mcdc_asprintf("%s/%s", s->root, key)) == NULL) {
        mcdc_free(w);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory opening a writer on %s/%s",
                              s->root, key);
    }
    rc = s->ops->open_writer(s->self, key, w, err);
    if (rc) {
        mcdc_free(w->name);
        mcdc_free(w);
        return rc;
    }
    MCDC_ASSERT(w->ops != NULL && w->ops->write && w->ops->commit && w->ops->discard);
    *out = w;
    return MCDC_OK;
}

int mcdc_storage_writer_write(mcdc_storage_writer *w, const void *data, size_t n,
                              mcdc_error *err) {
    MCDC_ASSERT(w != NULL && (data != NULL || n == 0));
    if (w->failed)
        return mcdc_error_set(err, w->failed, "%s: an earlier write failed; abort the writer",
                              w->name);
    if (n == 0) return MCDC_OK;
    int rc = w->ops->write(w->self, data, n, err);
    if (rc) {
        w->failed = rc;
        return rc;
    }
    w->bytes += (int64_t)n;
    return MCDC_OK;
}

static void writer_free(mcdc_storage_writer *w) {
    w->ops->discard(w->self);
    mcdc_free(w->name);
    mcdc_free(w);
}

int mcdc_storage_writer_commit(mcdc_storage_writer *w, mcdc_storage_commit_mode mode,
                               mcdc_error *err) {
    MCDC_ASSERT(w != NULL);
    MCDC_ASSERT(mode == MCDC_STORAGE_PUT || mode == MCDC_STORAGE_PUT_IF_ABSENT ||
                mode == MCDC_STORAGE_PUT_SCRATCH);
    int rc = w->failed ? mcdc_error_set(err, MCDC_E_INVALID,
                                        "%s cannot be published: an earlier write failed",
                                        w->name)
                       : w->ops->commit(w->self, mode, err);
    writer_free(w);
    return rc;
}

void mcdc_storage_writer_abort(mcdc_storage_writer *w) {
    if (w != NULL) writer_free(w);
}

int64_t mcdc_storage_writer_bytes(const mcdc_storage_writer *w) { return w->bytes; }

static int put_whole(mcdc_storage *s, const char *key, const void *data, size_t n,
                     mcdc_storage_commit_mode mode, mcdc_error *err) {
    mcdc_storage_writer *w;
    int rc = mcdc_storage_writer_open(&w, s, key, err);
    if (rc) return rc;
    rc = mcdc_storage_writer_write(w, data, n, err);
    if (rc) {
        mcdc_storage_writer_abort(w);
        return rc;
    }
    return mcdc_storage_writer_commit(w, mode, err);
}

int mcdc_storage_put_if_absent(mcdc_storage *s, const char *key, const void *data, size_t n,
                               mcdc_error *err) {
    return put_whole(s, key, data, n, MCDC_STORAGE_PUT_IF_ABSENT, err);
}

int mcdc_storage_put(mcdc_storage *s, const char *key, const void *data, size_t n,
                     mcdc_error *err) {
    return put_whole(s, key, data, n, MCDC_STORAGE_PUT, err);
}

/* ---- reads, listing, deletes ------------------------------------------------------ */

int mcdc_storage_get(mcdc_storage *s, const char *key, size_t max_bytes, mcdc_buf *out,
                     mcdc_error *err) {
    int rc = check_key(key, false, err);
    return rc ? rc : s->ops->get(s->self, key, max_bytes, out, err);
}

int mcdc_storage_get_range(mcdc_storage *s, const char *key, int64_t offset, size_t len,
                           void *dst, size_t *got, int64_t *size, mcdc_error *err) {
    MCDC_ASSERT(dst != NULL || len == 0);
    size_t g = 0;
    int64_t sz = -1;
    int rc = check_key(key, false, err);
    if (rc == MCDC_OK && offset < 0)
        rc = mcdc_error_set(err, MCDC_E_INVALID, "%s/%s: negative read offset %lld", s->root,
                            key, (long long)offset);
    if (rc == MCDC_OK) rc = s->ops->get_range(s->self, key, offset, len, dst, &g, &sz, err);
    MCDC_ASSERT(rc != MCDC_OK || (g <= len && sz >= offset + (int64_t)g));
    if (got) *got = rc ? 0 : g;
    if (size) *size = rc ? -1 : sz;
    return rc;
}

int mcdc_storage_size(mcdc_storage *s, const char *key, int64_t *out_bytes, mcdc_error *err) {
    return mcdc_storage_get_range(s, key, 0, 0, NULL, NULL, out_bytes, err);
}

int mcdc_storage_list(mcdc_storage *s, const char *prefix, mcdc_storage_listing *out,
                      mcdc_error *err) {
    return mcdc_storage_list_after(s, prefix, NULL, out, err);
}

int mcdc_storage_list_after(mcdc_storage *s, const char *prefix, const char *after,
                            mcdc_storage_listing *out, mcdc_error *err) {
    out->entries = NULL;
    out->count = 0;
    if (after && (after[0] == 0 || strchr(after, '/') != NULL))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s: listing %s after \"%s\": the name to list after must be a "
                              "non-empty name without '/'",
                              s->root, prefix, after);
    const char *slash = strrchr(prefix, '/');
    if (slash) { /* the directory part must be a valid key (with its '/') */
        char *k = mcdc_strndup(prefix, (size_t)(slash - prefix) + 1);
        int rc = k ? check_key(k, true, err) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        mcdc_free(k);
        if (rc) return rc;
    }
    int rc = s->ops->list(s->self, prefix, after, out, err);
    for (size_t i = 1; rc == MCDC_OK && i < out->count; i++)
        MCDC_ASSERT(strcmp(out->entries[i - 1].name, out->entries[i].name) < 0);
    MCDC_ASSERT(rc != MCDC_OK || after == NULL || out->count == 0 ||
                strcmp(out->entries[0].name, after) > 0);
    return rc;
}

int mcdc_storage_delete(mcdc_storage *s, const char *key, mcdc_error *err) {
    int rc = check_key(key, false, err);
    return rc ? rc : s->ops->del(s->self, key, err);
}

/* ---- holding a key ---------------------------------------------------------------- */

struct mcdc_storage_lock {
    void (*unlock)(void *hold);
    int (*check)(void *hold, mcdc_error *err); /* NULL: a lock, always held */
    void *hold; /* the backend's, or the lease's */
};

static int hold_key(mcdc_storage_lock **out, mcdc_storage *s, const char *key, const void *note,
                    size_t n, int64_t ttl_ms, mcdc_buf *holder, mcdc_error *err) {
    MCDC_ASSERT(out != NULL && (note != NULL || n == 0));
    *out = NULL;
    int rc = check_key(key, false, err);
    if (rc) return rc;
    bool lease = ttl_ms > 0 || (s->ops->lock == NULL && s->ops->lease);
    if (!lease && (s->ops->lock == NULL || s->ops->unlock == NULL))
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED, "%s cannot hold %s: its storage has no "
                                                       "locks", s->root, key);
    mcdc_storage_lock *l = mcdc_calloc(1, sizeof *l);
    if (l == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    mcdc_buf scratch = {0};
    if (lease) {
        int64_t ttl = ttl_ms > 0 ? ttl_ms : s->lease_ttl_ms > 0 ? s->lease_ttl_ms
                                                               : MCDC_LEASE_TTL_MS_DEFAULT;
        rc = mcdc_storage__lease_take(&l->hold, s, key, note, n, ttl, holder ? holder : &scratch,
                                      err);
        l->unlock = mcdc_storage__lease_release;
        l->check = mcdc_storage__lease_check;
    } else {
        rc = s->ops->lock(s->self, key, note, n, &l->hold, holder ? holder : &scratch, err);
        l->unlock = s->ops->unlock;
    }
    mcdc_buf_free(&scratch);
    MCDC_ASSERT(rc != MCDC_OK || l->hold != NULL);
    if (rc) {
        mcdc_free(l);
        return rc;
    }
    *out = l;
    return MCDC_OK;
}

int mcdc_storage_lock_key(mcdc_storage_lock **out, mcdc_storage *s, const char *key,
                          const void *note, size_t n, mcdc_buf *holder, mcdc_error *err) {
    return hold_key(out, s, key, note, n, 0, holder, err);
}

int mcdc_storage_lease_key(mcdc_storage_lock **out, mcdc_storage *s, const char *key,
                           const void *note, size_t n, int64_t ttl_ms, mcdc_buf *holder,
                           mcdc_error *err) {
    MCDC_ASSERT(ttl_ms > 0);
    return hold_key(out, s, key, note, n, ttl_ms, holder, err);
}

int mcdc_storage_lock_check(mcdc_storage_lock *l, mcdc_error *err) {
    return l && l->check ? l->check(l->hold, err) : MCDC_OK;
}

void mcdc_storage_unlock(mcdc_storage_lock *l) {
    if (l == NULL) return;
    l->unlock(l->hold);
    mcdc_free(l);
}
