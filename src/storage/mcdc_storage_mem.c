/*
 * mcdc_storage_mem.c - the storage seam in memory, with fault injection.
 *
 * A store is a sorted array of objects (key -> immutable, reference-counted
 * blob) behind one mutex, so storages on it may be used from several threads
 * (the stream writes bronze and facts at once). Semantics are the local
 * backend's: a writer buffers its parts and publishes them in one step under
 * the lock (atomic visibility; put-if-absent checks and inserts under the
 * same lock: exclusion), listings are sorted and show the objects directly
 * under a "directory" (keys are flat; directories are implicit).
 *
 * Fault injection, per store: one armed fault fails the nth matching call
 * from now (calls are counted under the lock, so "nth" is exact across
 * threads). Losing writes after the fact: every commit journals what its key
 * held before (the last MCDC_STORAGE_MEM_JOURNAL_MAX commits), and
 * mcdc_storage_mem_lose_last puts that back, newest first.
 */
#include <pthread.h>
#include <string.h>

#include "mcdc_limits.h"
#include "mcdc_storage.h"

typedef struct mem_blob {
    int64_t refs; /* objects and journal entries holding it; under the store lock */
    size_t len;
    uint8_t *data; /* owned */
} mem_blob;

typedef struct mem_obj {
    char *key; /* owned, full key in the store */
    mem_blob *blob;
    int64_t mtime_ms;
} mem_obj;

/* What a commit replaced: key held prev (NULL: nothing) before. */
typedef struct mem_undo {
    char *key; /* owned */
    mem_blob *prev;
    int64_t prev_mtime_ms;
} mem_undo;

/* A held key (mcdc_storage_lock_key): the store's table of them, under its
 * lock. */
typedef struct mem_hold {
    mcdc_storage_mem *m; /* one reference: a hold may outlive its storage */
    char *key;           /* owned, full key */
    mcdc_buf note;
    struct mem_hold *next;
} mem_hold;

struct mcdc_storage_mem {
    pthread_mutex_t mu;
    mem_hold *holds; /* keys held now */
    int64_t refs;
    char *name; /* owned */
    mem_obj *objs; /* owned, sorted by key (strcmp) */
    size_t n, cap;
    mem_undo journal[MCDC_STORAGE_MEM_JOURNAL_MAX]; /* ring: oldest at j_first */
    size_t j_first, j_count;
    /* the armed fault */
    mcdc_storage_op fault_op;
    int64_t fault_left; /* matching calls until it fires; 0 = none armed */
    int fault_code;
    bool fault_fired;
    int64_t calls[MCDC_STORAGE_OP_COUNT_];
};

typedef struct mem_storage {
    mcdc_storage_mem *m; /* one reference */
    char *prefix;        /* owned: "" or "dir/" */
} mem_storage;

typedef struct mem_writer {
    mcdc_storage_mem *m; /* one reference: a writer may outlive its storage */
    char *key;           /* owned, full key */
    mcdc_buf buf;
} mem_writer;

static const char *const op_names[MCDC_STORAGE_OP_COUNT_] = {
    "any operation", "writer open", "write", "commit (put)", "commit (put-if-absent)",
    "get",           "ranged read", "list",  "delete",
};

/* ---- store internals (lock held) ------------------------------------------------ */

static void blob_unref(mem_blob *b) {
    if (b == NULL || --b->refs > 0) return;
    mcdc_free(b->data);
    mcdc_free(b);
}

/* Index of key, or of where it would go (*found false). */
static size_t find(const mcdc_storage_mem *m, const char *key, bool *found) {
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->objs[mid].key, key);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = false;
    return lo;
}

/* Counts the call and fires the armed fault when it is due. */
static int hit(mcdc_storage_mem *m, mcdc_storage_op op, const char *what, mcdc_error *err) {
    MCDC_ASSERT(op > MCDC_STORAGE_OP_ANY && op < MCDC_STORAGE_OP_COUNT_);
    m->calls[MCDC_STORAGE_OP_ANY]++;
    m->calls[op]++;
    if (m->fault_left <= 0 || (m->fault_op != MCDC_STORAGE_OP_ANY && m->fault_op != op))
        return MCDC_OK;
    if (--m->fault_left > 0) return MCDC_OK;
    m->fault_fired = true;
    return mcdc_error_set(err, m->fault_code, "mem://%s: injected fault: %s of %s failed",
                          m->name, op_names[op], what);
}

static void remove_at(mcdc_storage_mem *m, size_t i) {
    mcdc_free(m->objs[i].key);
    blob_unref(m->objs[i].blob);
    memmove(&m->objs[i], &m->objs[i + 1], (m->n - i - 1) * sizeof *m->objs);
    m->n--;
}

/* Makes room for one more object. */
static int reserve_one(mcdc_storage_mem *m, mcdc_error *err) {
    if (m->n < m->cap) return MCDC_OK;
    size_t cap = m->cap ? m->cap * 2 : 64;
    mem_obj *o = mcdc_realloc(m->objs, cap * sizeof *o);
    if (o == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory (mem://%s)", m->name);
    m->objs = o;
    m->cap = cap;
    return MCDC_OK;
}

/* Sets key to blob (a reference is taken), at index i found by find(). key_owned
 * is used for a new object (else freed). Room was reserved. */
static void set_at(mcdc_storage_mem *m, size_t i, bool found, char *key_owned, mem_blob *blob,
                   int64_t mtime_ms) {
    blob->refs++;
    if (found) {
        blob_unref(m->objs[i].blob);
        mcdc_free(key_owned);
    } else {
        MCDC_ASSERT(m->n < m->cap);
        memmove(&m->objs[i + 1], &m->objs[i], (m->n - i) * sizeof *m->objs);
        m->objs[i].key = key_owned;
        m->n++;
    }
    m->objs[i].blob = blob;
    m->objs[i].mtime_ms = mtime_ms;
}

static void journal_push(mcdc_storage_mem *m, char *key_owned, mem_blob *prev, int64_t prev_mtime) {
    if (m->j_count == MCDC_STORAGE_MEM_JOURNAL_MAX) { /* forget the oldest */
        mem_undo *u = &m->journal[m->j_first];
        mcdc_free(u->key);
        blob_unref(u->prev);
        m->j_first = (m->j_first + 1) % MCDC_STORAGE_MEM_JOURNAL_MAX;
        m->j_count--;
    }
    mem_undo *u = &m->journal[(m->j_first + m->j_count) % MCDC_STORAGE_MEM_JOURNAL_MAX];
    u->key = key_owned;
    u->prev = prev;
    if (prev) prev->refs++;
    u->prev_mtime_ms = prev_mtime;
    m->j_count++;
}

static void store_unref(mcdc_storage_mem *m) {
    pthread_mutex_lock(&m->mu);
    bool last = --m->refs == 0;
    pthread_mutex_unlock(&m->mu);
    if (!last) return;
    for (size_t i = 0; i < m->n; i++) {
        mcdc_free(m->objs[i].key);
        blob_unref(m->objs[i].blob);
    }
    for (size_t k = 0; k < m->j_count; k++) {
        mem_undo *u = &m->journal[(m->j_first + k) % MCDC_STORAGE_MEM_JOURNAL_MAX];
        mcdc_free(u->key);
        blob_unref(u->prev);
    }
    mcdc_free(m->objs);
    mcdc_free(m->name);
    pthread_mutex_destroy(&m->mu);
    mcdc_free(m);
}

static void store_ref(mcdc_storage_mem *m) {
    pthread_mutex_lock(&m->mu);
    m->refs++;
    pthread_mutex_unlock(&m->mu);
}

/* ---- writers ----------------------------------------------------------------------- */

static void mem_writer_discard(void *wself) {
    mem_writer *mw = wself;
    if (mw == NULL) return;
    mcdc_buf_free(&mw->buf);
    mcdc_free(mw->key);
    store_unref(mw->m);
    mcdc_free(mw);
}

static int mem_writer_write(void *wself, const void *data, size_t n, mcdc_error *err) {
    mem_writer *mw = wself;
    pthread_mutex_lock(&mw->m->mu);
    int rc = hit(mw->m, MCDC_STORAGE_OP_WRITE, mw->key, err);
    pthread_mutex_unlock(&mw->m->mu);
    if (rc == MCDC_OK) rc = mcdc_buf_append(&mw->buf, data, n, err);
    if (rc == MCDC_E_LIMIT)
        mcdc_error_wrap(err, "mem://%s/%s: objects in memory hold at most %u bytes", mw->m->name,
                        mw->key, MCDC_STORAGE_MEM_OBJECT_BYTES_MAX);
    return rc;
}

static int mem_writer_commit(void *wself, mcdc_storage_commit_mode mode, mcdc_error *err) {
    mem_writer *mw = wself;
    mcdc_storage_mem *m = mw->m;
    /* Everything that can fail for want of memory is done before the object
     * is published. */
    mem_blob *b = mcdc_calloc(1, sizeof *b);
    char *obj_key = mcdc_strdup(mw->key), *undo_key = mcdc_strdup(mw->key);
    if (b == NULL || obj_key == NULL || undo_key == NULL) {
        mcdc_free(b);
        mcdc_free(obj_key);
        mcdc_free(undo_key);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory publishing mem://%s/%s", m->name,
                              mw->key);
    }
    b->len = mw->buf.len;
    b->data = mw->buf.data; /* taken from the writer */
    mw->buf.data = NULL;
    mw->buf.len = mw->buf.cap = 0;
    pthread_mutex_lock(&m->mu);
    int rc = hit(m, mode != MCDC_STORAGE_PUT_IF_ABSENT ? MCDC_STORAGE_OP_COMMIT_PUT
                                                       : MCDC_STORAGE_OP_COMMIT_PUT_IF_ABSENT,
                 mw->key, err);
    bool found = false;
    size_t i = rc ? 0 : find(m, mw->key, &found);
    if (rc == MCDC_OK && found && mode == MCDC_STORAGE_PUT_IF_ABSENT)
        rc = mcdc_error_set(err, MCDC_E_CONFLICT, "mem://%s/%s already exists", m->name, mw->key);
    if (rc == MCDC_OK && !found) rc = reserve_one(m, err);
    if (rc == MCDC_OK) {
        journal_push(m, undo_key, found ? m->objs[i].blob : NULL, found ? m->objs[i].mtime_ms : 0);
        undo_key = NULL;
        set_at(m, i, found, obj_key, b, mcdc_now_utc_us() / 1000);
        obj_key = NULL;
    }
    if (rc) b->refs = 1; /* unpublished: freed below */
    pthread_mutex_unlock(&m->mu);
    if (rc) blob_unref(b);
    mcdc_free(obj_key);
    mcdc_free(undo_key);
    return rc;
}

static const mcdc_storage_writer_ops mem_writer_ops = {
    mem_writer_write, mem_writer_commit, mem_writer_discard,
};

/* ---- the storage ops ------------------------------------------------------------- */

static char *full_key(const mem_storage *ms, const char *key) {
    return mcdc_asprintf("%s%s", ms->prefix, key);
}

static int mem_open_writer(void *self, const char *key, mcdc_storage_writer *w,
                           mcdc_error *err) {
    mem_storage *ms = self;
    mem_writer *mw = mcdc_calloc(1, sizeof *mw);
    if (mw == NULL || (mw->key = full_key(ms, key)) == NULL) {
        mcdc_free(mw);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    pthread_mutex_lock(&ms->m->mu);
    int rc = hit(ms->m, MCDC_STORAGE_OP_WRITER_OPEN, mw->key, err);
    if (rc == MCDC_OK) ms->m->refs++;
    pthread_mutex_unlock(&ms->m->mu);
    if (rc) {
        mcdc_free(mw->key);
        mcdc_free(mw);
        return rc;
    }
    mw->m = ms->m;
    mw->buf.limit = MCDC_STORAGE_MEM_OBJECT_BYTES_MAX;
    w->ops = &mem_writer_ops;
    w->self = mw;
    return MCDC_OK;
}

/* Finds key under the lock after counting the call; *obj is valid until
 * the unlock. */
static int lookup(mem_storage *ms, mcdc_storage_op op, const char *key, char **fk,
                  const mem_obj **obj, mcdc_error *err) {
    *obj = NULL;
    *fk = full_key(ms, key);
    if (*fk == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    pthread_mutex_lock(&ms->m->mu);
    int rc = hit(ms->m, op, *fk, err);
    bool found = false;
    size_t i = rc ? 0 : find(ms->m, *fk, &found);
    if (rc == MCDC_OK && !found)
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "mem://%s/%s does not exist", ms->m->name, *fk);
    if (rc == MCDC_OK) *obj = &ms->m->objs[i];
    return rc;
}

static int mem_get(void *self, const char *key, size_t max_bytes, mcdc_buf *out,
                   mcdc_error *err) {
    mem_storage *ms = self;
    char *fk;
    const mem_obj *o;
    int rc = lookup(ms, MCDC_STORAGE_OP_GET, key, &fk, &o, err);
    if (rc == MCDC_OK && o->blob->len > max_bytes)
        rc = mcdc_error_set(err, MCDC_E_LIMIT, "mem://%s/%s is %zu bytes, more than the %zu allowed",
                            ms->m->name, fk, o->blob->len, max_bytes);
    if (rc == MCDC_OK) rc = mcdc_buf_append(out, o->blob->data, o->blob->len, err);
    if (fk) pthread_mutex_unlock(&ms->m->mu);
    mcdc_free(fk);
    return rc;
}

static int mem_get_range(void *self, const char *key, int64_t offset, size_t len, void *dst,
                         size_t *got, int64_t *size, mcdc_error *err) {
    mem_storage *ms = self;
    char *fk;
    const mem_obj *o;
    int rc = lookup(ms, MCDC_STORAGE_OP_GET_RANGE, key, &fk, &o, err);
    if (rc == MCDC_OK && (uint64_t)offset > o->blob->len)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "cannot read mem://%s/%s at %lld: the object has %zu bytes",
                            ms->m->name, fk, (long long)offset, o->blob->len);
    if (rc == MCDC_OK) {
        size_t left = o->blob->len - (size_t)offset;
        *got = left < len ? left : len;
        *size = (int64_t)o->blob->len;
        if (*got) memcpy(dst, o->blob->data + offset, *got);
    }
    if (fk) pthread_mutex_unlock(&ms->m->mu);
    mcdc_free(fk);
    return rc;
}

static int mem_list(void *self, const char *prefix, const char *after, mcdc_storage_listing *out,
                    mcdc_error *err) {
    mem_storage *ms = self;
    char *fp = full_key(ms, prefix);
    if (fp == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    const char *slash = strrchr(fp, '/');
    size_t dir_len = slash ? (size_t)(slash - fp) + 1 : 0, fp_len = strlen(fp);
    mcdc_storage_mem *m = ms->m;
    pthread_mutex_lock(&m->mu);
    int rc = hit(m, MCDC_STORAGE_OP_LIST, fp, err);
    bool found;
    size_t cap = 0;
    for (size_t i = rc ? m->n : find(m, fp, &found); rc == MCDC_OK && i < m->n; i++) {
        const mem_obj *o = &m->objs[i];
        if (strncmp(o->key, fp, fp_len) != 0) break; /* sorted: past the prefix */
        if (strchr(o->key + dir_len, '/')) continue;  /* in a "subdirectory" */
        if (after && strcmp(o->key + dir_len, after) <= 0) continue;
        rc = mcdc_storage_listing_add(out, &cap, o->key + dir_len, (int64_t)o->blob->len,
                                      o->mtime_ms, err);
        if (rc) mcdc_error_wrap(err, "mem://%s", m->name);
    }
    pthread_mutex_unlock(&m->mu);
    mcdc_free(fp);
    if (rc) mcdc_storage_listing_free(out);
    return rc;
}

static int mem_del(void *self, const char *key, mcdc_error *err) {
    mem_storage *ms = self;
    char *fk;
    const mem_obj *o;
    int rc = lookup(ms, MCDC_STORAGE_OP_DELETE, key, &fk, &o, err);
    if (rc == MCDC_OK) remove_at(ms->m, (size_t)(o - ms->m->objs));
    if (fk) pthread_mutex_unlock(&ms->m->mu);
    mcdc_free(fk);
    return rc;
}

static void mem_destroy(void *self) {
    mem_storage *ms = self;
    if (ms == NULL) return;
    store_unref(ms->m);
    mcdc_free(ms->prefix);
    mcdc_free(ms);
}

static int mem_lock(void *self, const char *key, const void *note, size_t n, void **out,
                    mcdc_buf *holder, mcdc_error *err) {
    mem_storage *ms = self;
    *out = NULL;
    mem_hold *h = mcdc_calloc(1, sizeof *h);
    if (h == NULL || (h->key = full_key(ms, key)) == NULL ||
        mcdc_buf_append(&h->note, note, n, NULL) != MCDC_OK) {
        if (h) mcdc_free(h->key);
        mcdc_free(h);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    mcdc_storage_mem *m = ms->m;
    pthread_mutex_lock(&m->mu);
    const mem_hold *other = m->holds;
    while (other && strcmp(other->key, h->key) != 0) other = other->next;
    int rc = MCDC_OK;
    if (other) {
        rc = mcdc_error_set(err, MCDC_E_CONFLICT, "mem://%s/%s is held by another", m->name,
                            h->key);
        if (other->note.len) (void)mcdc_buf_append(holder, other->note.data, other->note.len, NULL);
    } else {
        h->m = m;
        m->refs++;
        h->next = m->holds;
        m->holds = h;
        *out = h;
    }
    pthread_mutex_unlock(&m->mu);
    if (rc) {
        mcdc_buf_free(&h->note);
        mcdc_free(h->key);
        mcdc_free(h);
    }
    return rc;
}

static void mem_unlock(void *hold) {
    mem_hold *h = hold;
    if (h == NULL) return;
    mcdc_storage_mem *m = h->m;
    pthread_mutex_lock(&m->mu);
    mem_hold **p = &m->holds;
    while (*p && *p != h) p = &(*p)->next;
    MCDC_ASSERT(*p == h);
    *p = h->next;
    pthread_mutex_unlock(&m->mu);
    mcdc_buf_free(&h->note);
    mcdc_free(h->key);
    mcdc_free(h);
    store_unref(m);
}

static const mcdc_storage_ops mem_ops = {
    mem_open_writer, mem_get, mem_get_range, mem_list, mem_del, mem_destroy, mem_lock, mem_unlock,
    false,
};

/* ---- the store's API -------------------------------------------------------------- */

int mcdc_storage_mem_create(mcdc_storage_mem **out, const char *name, mcdc_error *err) {
    *out = NULL;
    if (name == NULL || name[0] == 0 || strchr(name, '/'))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "a memory store needs a name without '/' (mem://<name>/...)");
    mcdc_storage_mem *m = mcdc_calloc(1, sizeof *m);
    if (m == NULL || (m->name = mcdc_strdup(name)) == NULL) {
        mcdc_free(m);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        mcdc_free(m->name);
        mcdc_free(m);
        return mcdc_error_set(err, MCDC_E_NOMEM, "cannot create a mutex for mem://%s", name);
    }
    m->refs = 1;
    *out = m;
    return MCDC_OK;
}

void mcdc_storage_mem_release(mcdc_storage_mem *m) {
    if (m) store_unref(m);
}

const char *mcdc_storage_mem_name(const mcdc_storage_mem *m) { return m->name; }

int mcdc_storage_mem_open(mcdc_storage **out, mcdc_storage_mem *m, const char *prefix,
                          mcdc_error *err) {
    MCDC_ASSERT(m != NULL);
    *out = NULL;
    size_t n = prefix ? strlen(prefix) : 0;
    while (n > 0 && prefix[n - 1] == '/') n--;
    char *p = mcdc_strndup(prefix ? prefix : "", n);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = n ? mcdc_storage_check_key(p, err) : MCDC_OK;
    if (rc) {
        mcdc_error_wrap(err, "mem://%s: bad prefix", m->name);
        mcdc_free(p);
        return rc;
    }
    mcdc_storage *s = mcdc_calloc(1, sizeof *s);
    mem_storage *ms = mcdc_calloc(1, sizeof *ms);
    if (s == NULL || ms == NULL || (ms->prefix = mcdc_asprintf("%s%s", p, n ? "/" : "")) == NULL ||
        (s->root = mcdc_asprintf("mem://%s%s%s", m->name, n ? "/" : "", p)) == NULL) {
        if (ms) mcdc_free(ms->prefix);
        mcdc_free(ms);
        mcdc_free(s);
        mcdc_free(p);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    mcdc_free(p);
    store_ref(m);
    ms->m = m;
    s->ops = &mem_ops;
    s->self = ms;
    *out = s;
    return MCDC_OK;
}

static mcdc_storage_mem *env_lookup(void *ctx, const char *name, size_t name_len) {
    mcdc_storage_mem *m = ctx;
    return strlen(m->name) == name_len && memcmp(m->name, name, name_len) == 0 ? m : NULL;
}

mcdc_storage_env mcdc_storage_mem_env(mcdc_storage_mem *m) {
    return (mcdc_storage_env){.mem_store = env_lookup, .ctx = m};
}

void mcdc_storage_mem_fail_nth(mcdc_storage_mem *m, mcdc_storage_op op, int64_t nth, int code) {
    MCDC_ASSERT(op >= MCDC_STORAGE_OP_ANY && op < MCDC_STORAGE_OP_COUNT_);
    MCDC_ASSERT(nth <= 0 || code != MCDC_OK);
    pthread_mutex_lock(&m->mu);
    m->fault_op = op;
    m->fault_left = nth > 0 ? nth : 0;
    m->fault_code = code;
    m->fault_fired = false;
    pthread_mutex_unlock(&m->mu);
}

bool mcdc_storage_mem_fault_fired(const mcdc_storage_mem *m) {
    mcdc_storage_mem *mm = (mcdc_storage_mem *)m; /* the lock is not the state */
    pthread_mutex_lock(&mm->mu);
    bool fired = mm->fault_fired;
    pthread_mutex_unlock(&mm->mu);
    return fired;
}

int64_t mcdc_storage_mem_calls(const mcdc_storage_mem *m, mcdc_storage_op op) {
    MCDC_ASSERT(op >= MCDC_STORAGE_OP_ANY && op < MCDC_STORAGE_OP_COUNT_);
    mcdc_storage_mem *mm = (mcdc_storage_mem *)m;
    pthread_mutex_lock(&mm->mu);
    int64_t n = mm->calls[op];
    pthread_mutex_unlock(&mm->mu);
    return n;
}

size_t mcdc_storage_mem_count(const mcdc_storage_mem *m) {
    mcdc_storage_mem *mm = (mcdc_storage_mem *)m;
    pthread_mutex_lock(&mm->mu);
    size_t n = mm->n;
    pthread_mutex_unlock(&mm->mu);
    return n;
}

int mcdc_storage_mem_lose_last(mcdc_storage_mem *m, int n, mcdc_error *err) {
    pthread_mutex_lock(&m->mu);
    int rc = MCDC_OK;
    if (n < 0 || (size_t)n > m->j_count)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "mem://%s: cannot lose the last %d writes, %zu are remembered",
                            m->name, n, m->j_count);
    for (int k = 0; rc == MCDC_OK && k < n; k++) {
        mem_undo *u = &m->journal[(m->j_first + m->j_count - 1) % MCDC_STORAGE_MEM_JOURNAL_MAX];
        bool found;
        size_t i = find(m, u->key, &found);
        if (u->prev == NULL) {
            if (found) remove_at(m, i);
        } else {
            if (!found && (rc = reserve_one(m, err)) != MCDC_OK) break;
            set_at(m, i, found, found ? NULL : u->key, u->prev, u->prev_mtime_ms);
            if (!found) u->key = NULL; /* moved into the object */
        }
        mcdc_free(u->key);
        blob_unref(u->prev);
        m->j_count--;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int mcdc_storage_mem_drop(mcdc_storage_mem *m, const char *key, mcdc_error *err) {
    pthread_mutex_lock(&m->mu);
    bool found;
    size_t i = find(m, key, &found);
    if (found) remove_at(m, i);
    pthread_mutex_unlock(&m->mu);
    return found ? MCDC_OK
                 : mcdc_error_set(err, MCDC_E_NOTFOUND, "mem://%s/%s does not exist", m->name, key);
}
