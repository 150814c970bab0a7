/* mcdc_storage_local.c - the storage seam on a POSIX filesystem: the only
 * file of the library that opens, creates, renames, links, stats or unlinks
 * table files (scripts/check_storage_io.py). */
#include "mcdc_storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static const mcdc_storage_writer_ops local_writer_ops;

typedef struct local_storage {
    char *root; /* owned, no trailing '/' (except "/") */
} local_storage;

static char *join(const local_storage *ls, const char *key) {
    return mcdc_asprintf("%s/%s", ls->root, key);
}

/* mkdir -p of the directory part of path; *made (may be NULL), when this
 * created one, the length of the topmost directory created (a prefix of
 * path), else left as it is. */
static int make_parents(const char *path, size_t *made, mcdc_error *err) {
    char *p = mcdc_strdup(path);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = MCDC_OK;
    char *last = strrchr(p, '/');
    if (last == NULL || last == p) goto done;
    *last = 0;
    for (char *s = p + 1;; s++) {
        bool end = *s == 0;
        if (*s == '/' || end) {
            *s = 0;
            if (mkdir(p, 0777) == 0) {
                if (made && (*made == 0 || strlen(p) < *made)) *made = strlen(p);
            } else if (errno != EEXIST) {
                rc = mcdc_error_set(err, MCDC_E_IO, "cannot create directory %s: %s", p,
                                    strerror(errno));
                goto done;
            }
            if (end) break;
            *s = '/';
        }
    }
done:
    mcdc_free(p);
    return rc;
}

/* Allocates nothing: it runs after a commit is published. */
static int fsync_dir(const char *dir, mcdc_error *err) {
    int rc = MCDC_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0)
        rc = mcdc_error_set(err, MCDC_E_IO, "cannot fsync directory %s: %s", dir,
                            strerror(errno));
    if (fd >= 0) close(fd);
    return rc;
}

/* ---- writers: a hidden temp file next to the key, published at commit ------- */

typedef struct local_writer {
    char *final; /* owned: the key's path */
    char *dir;   /* owned: its directory (fsynced after publishing) */
    char *tmp;   /* owned: the temp file, NULL once it is gone */
    int fd;      /* open on tmp until commit, else -1 */
} local_writer;

static void local_writer_discard(void *wself) {
    local_writer *lw = wself;
    if (lw == NULL) return;
    if (lw->fd >= 0) close(lw->fd);
    if (lw->tmp && unlink(lw->tmp) != 0 && errno != ENOENT)
        mcdc_log(MCDC_LOG_WARN, "cannot remove temp file %s: %s", lw->tmp, strerror(errno));
    mcdc_free(lw->tmp);
    mcdc_free(lw->dir);
    mcdc_free(lw->final);
    mcdc_free(lw);
}

/* Creates the temp file next to the key (its name starts with '.', so Delta
 * readers ignore it); the key's directories are made when missing. */
static int local_open_writer(void *self, const char *key, mcdc_storage_writer *w,
                             mcdc_error *err) {
    local_storage *ls = self;
    local_writer *lw = mcdc_calloc(1, sizeof *lw);
    if (lw == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    lw->fd = -1;
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r = (uint64_t)mcdc_monotonic_us();
    const char *slash = strrchr(key, '/');
    int dir_len = slash ? (int)(slash - key) : 0;
    lw->final = join(ls, key);
    lw->dir = slash ? mcdc_asprintf("%s/%.*s", ls->root, dir_len, key)
                    : mcdc_strdup(ls->root[0] ? ls->root : "/");
    lw->tmp = mcdc_asprintf("%s/.%s.%ld.%016llx.tmp", lw->dir ? lw->dir : "",
                            slash ? slash + 1 : key, (long)getpid(), (unsigned long long)r);
    if (lw->final == NULL || lw->dir == NULL || lw->tmp == NULL) {
        local_writer_discard(lw);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    int rc = MCDC_OK;
    /* Directories usually exist: try first, make them only when missing. */
    lw->fd = open(lw->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (lw->fd < 0 && errno == ENOENT && (rc = make_parents(lw->tmp, NULL, err)) == MCDC_OK)
        lw->fd = open(lw->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (rc == MCDC_OK && lw->fd < 0)
        rc = mcdc_error_set(err, MCDC_E_IO, "cannot create %s: %s", lw->tmp, strerror(errno));
    if (rc) {
        mcdc_free(lw->tmp); /* never created */
        lw->tmp = NULL;
        local_writer_discard(lw);
        return rc;
    }
    w->ops = &local_writer_ops;
    w->self = lw;
    return MCDC_OK;
}

static int local_writer_write(void *wself, const void *data, size_t n, mcdc_error *err) {
    local_writer *lw = wself;
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t k = write(lw->fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return mcdc_error_set(err, MCDC_E_IO, "cannot write %s: %s", lw->tmp,
                                  k < 0 ? strerror(errno) : "no progress");
        p += k;
        n -= (size_t)k;
    }
    return MCDC_OK;
}

static int local_writer_commit(void *wself, mcdc_storage_commit_mode mode, mcdc_error *err) {
    local_writer *lw = wself;
    int rc = MCDC_OK;
    bool scratch = mode == MCDC_STORAGE_PUT_SCRATCH;
    if (!scratch && fsync(lw->fd) != 0)
        rc = mcdc_error_set(err, MCDC_E_IO, "cannot fsync %s: %s", lw->tmp, strerror(errno));
    if (close(lw->fd) != 0 && rc == MCDC_OK)
        rc = mcdc_error_set(err, MCDC_E_IO, "cannot close %s: %s", lw->tmp, strerror(errno));
    lw->fd = -1;
    if (rc) return rc;
    if (mode == MCDC_STORAGE_PUT_IF_ABSENT) {
        /* link(2) publishes the complete file under its final name, and fails
         * if that name exists: atomic visibility plus mutual exclusion. A plain
         * rename would silently replace a winner's commit. discard unlinks
         * the temp name. */
        if (link(lw->tmp, lw->final) != 0) {
            if (errno == EEXIST)
                return mcdc_error_set(err, MCDC_E_CONFLICT, "%s already exists", lw->final);
            return mcdc_error_set(err, MCDC_E_IO, "cannot publish %s: %s", lw->final,
                                  strerror(errno));
        }
    } else {
        /* Replacing is the point here (readers see old or new, never half). */
        if (rename(lw->tmp, lw->final) != 0)
            return mcdc_error_set(err, MCDC_E_IO, "cannot rename %s to %s: %s", lw->tmp,
                                  lw->final, strerror(errno));
        mcdc_free(lw->tmp);
        lw->tmp = NULL;
    }
    /* Published: readers see it, so it must not be reported as not written
     * (a Delta writer would then delete the data files the commit names). A
     * failed directory fsync is only logged. */
    mcdc_error fe = MCDC_ERROR_INIT;
    if (!scratch && fsync_dir(lw->dir, &fe) != MCDC_OK)
        mcdc_log(MCDC_LOG_WARN, "%s is published but %s", lw->final, fe.message);
    return MCDC_OK;
}

/* Opens path for reading and stats it: a missing key or a directory is
 * MCDC_E_NOTFOUND. */
static int open_object(const char *path, int *fd, struct stat *st, mcdc_error *err) {
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = MCDC_OK;
    if (*fd < 0)
        return mcdc_error_set(err, errno == ENOENT ? MCDC_E_NOTFOUND : MCDC_E_IO,
                              "cannot open %s: %s", path, strerror(errno));
    if (fstat(*fd, st) != 0)
        rc = mcdc_error_set(err, MCDC_E_IO, "cannot stat %s: %s", path, strerror(errno));
    else if (!S_ISREG(st->st_mode))
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "%s is not a regular file", path);
    if (rc) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

/* Reads up to want bytes at off into dst; *have gets what was there (less
 * when the file shrank under us). */
static int pread_all(int fd, const char *path, uint8_t *dst, size_t want, int64_t off,
                     size_t *have, mcdc_error *err) {
    *have = 0;
    while (*have < want) {
        ssize_t k = pread(fd, dst + *have, want - *have, (off_t)(off + (int64_t)*have));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0)
            return mcdc_error_set(err, MCDC_E_IO, "cannot read %s at %lld: %s", path,
                                  (long long)(off + (int64_t)*have), strerror(errno));
        if (k == 0) break;
        *have += (size_t)k;
    }
    return MCDC_OK;
}

static int local_get(void *self, const char *key, size_t max_bytes, mcdc_buf *out,
                     mcdc_error *err) {
    char *path = join(self, key);
    if (path == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int fd;
    struct stat st;
    int rc = open_object(path, &fd, &st, err);
    if (rc == MCDC_OK && (uint64_t)st.st_size > max_bytes)
        rc = mcdc_error_set(err, MCDC_E_LIMIT, "%s is %lld bytes, more than the %zu allowed",
                            path, (long long)st.st_size, max_bytes);
    if (rc == MCDC_OK) rc = mcdc_buf_reserve(out, (size_t)st.st_size, err);
    size_t have = 0;
    if (rc == MCDC_OK)
        rc = pread_all(fd, path, out->data + out->len, (size_t)st.st_size, 0, &have, err);
    if (rc == MCDC_OK) out->len += have;
    if (fd >= 0) close(fd);
    mcdc_free(path);
    return rc;
}

/* Reads [offset, offset + len) of the object, short at its end. */
static int local_get_range(void *self, const char *key, int64_t offset, size_t len, void *dst,
                           size_t *got, int64_t *size, mcdc_error *err) {
    char *path = join(self, key);
    if (path == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int fd;
    struct stat st;
    int rc = open_object(path, &fd, &st, err);
    if (rc == MCDC_OK && offset > (int64_t)st.st_size)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "cannot read %s at %lld: the object has %lld bytes", path,
                            (long long)offset, (long long)st.st_size);
    if (rc == MCDC_OK) {
        *size = (int64_t)st.st_size;
        size_t left = (size_t)(st.st_size - offset);
        rc = pread_all(fd, path, dst, left < len ? left : len, offset, got, err);
    }
    if (fd >= 0) close(fd);
    mcdc_free(path);
    return rc;
}

/* Our writers' temp files: ".<name>.<pid>.<random>.tmp". */
static bool is_temp_name(const char *name) {
    size_t n = strlen(name);
    return name[0] == '.' && n > 5 && strcmp(name + n - 4, ".tmp") == 0;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const mcdc_storage_entry *)a)->name, ((const mcdc_storage_entry *)b)->name);
}

static int local_list(void *self, const char *prefix, const char *after,
                      mcdc_storage_listing *out, mcdc_error *err) {
    local_storage *ls = self;
    out->entries = NULL;
    out->count = 0;
    const char *slash = strrchr(prefix, '/');
    const char *name_prefix = slash ? slash + 1 : prefix;
    char *dir = slash ? mcdc_asprintf("%s/%.*s", ls->root, (int)(slash - prefix), prefix)
                      : mcdc_strdup(ls->root);
    if (dir == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    DIR *d = opendir(dir);
    if (d == NULL) {
        int rc = errno == ENOENT ? MCDC_OK
                                 : mcdc_error_set(err, MCDC_E_IO, "cannot list %s: %s", dir,
                                                  strerror(errno));
        mcdc_free(dir);
        return rc;
    }
    size_t cap = 0, npre = strlen(name_prefix);
    int rc = MCDC_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, name_prefix, npre) != 0) continue;
        if (after && strcmp(e->d_name, after) <= 0) continue;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (is_temp_name(e->d_name)) continue; /* a writer's, not an object */
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0) {
            if (errno == ENOENT) continue; /* deleted while listing */
            rc = mcdc_error_set(err, MCDC_E_IO, "cannot stat %s/%s: %s", dir, e->d_name,
                                strerror(errno));
            break;
        }
        if (!S_ISREG(st.st_mode)) continue;
        rc = mcdc_storage_listing_add(
            out, &cap, e->d_name, (int64_t)st.st_size,
            (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000, err);
        if (rc) {
            mcdc_error_wrap(err, "%s", dir);
            break;
        }
    }
    closedir(d);
    mcdc_free(dir);
    if (rc) {
        mcdc_storage_listing_free(out);
        return rc;
    }
    if (out->count > 1) qsort(out->entries, out->count, sizeof *out->entries, cmp_entry);
    return MCDC_OK;
}

static int local_del(void *self, const char *key, mcdc_error *err) {
    local_storage *ls = self;
    char *path = join(ls, key);
    if (path == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = MCDC_OK;
    if (unlink(path) != 0)
        rc = mcdc_error_set(err, errno == ENOENT ? MCDC_E_NOTFOUND : MCDC_E_IO,
                            "cannot delete %s: %s", path, strerror(errno));
    mcdc_free(path);
    return rc;
}

static void local_destroy(void *self) {
    local_storage *ls = self;
    if (ls == NULL) return;
    mcdc_free(ls->root);
    mcdc_free(ls);
}

/* ---- holds: flock(2) on the key's file (mcdc_storage.h) -------------------------- */

/* A holder's note is a line of JSON; more is damage. */
#define LOCAL_NOTE_BYTES_MAX 4096

typedef struct local_hold {
    int fd;      /* open on path, flock'ed */
    char *path;  /* owned */
    size_t made; /* the directories the hold created: path's prefixes this long and longer */
} local_hold;

/* The note another holder left in fd's file (bounded). */
static void read_note(int fd, mcdc_buf *holder) {
    char note[LOCAL_NOTE_BYTES_MAX];
    ssize_t got = pread(fd, note, sizeof note, 0);
    if (got > 0) (void)mcdc_buf_append(holder, note, (size_t)got, NULL);
}

/* fd (flock'ed) is still the file at path: a holder giving its hold back
 * removes the file, so a lock won on a removed file holds nothing. */
static bool still_linked(int fd, const char *path) {
    struct stat a, b;
    return fstat(fd, &a) == 0 && a.st_nlink > 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static int local_lock(void *self, const char *key, const void *note, size_t n, void **out,
                      mcdc_buf *holder, mcdc_error *err) {
    local_storage *ls = self;
    *out = NULL;
    local_hold *h = mcdc_calloc(1, sizeof *h);
    if (h == NULL || (h->path = join(ls, key)) == NULL) {
        mcdc_free(h);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    h->fd = -1;
    int rc = MCDC_OK;
    /* A removed file found under the lock: open the new one (bounded; each
     * round means another process gave the hold back just then). */
    for (int round = 0; rc == MCDC_OK && round < 100; round++) {
        h->fd = open(h->path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (h->fd < 0 && errno == ENOENT && (rc = make_parents(h->path, &h->made, err)) == MCDC_OK) {
            h->fd = open(h->path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
            if (h->fd < 0 && errno == ENOENT) continue; /* a holder removed them meanwhile */
        }
        if (rc) break;
        if (h->fd < 0) {
            rc = mcdc_error_set(err, MCDC_E_IO, "cannot open %s: %s", h->path, strerror(errno));
            break;
        }
        if (flock(h->fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            if (e == EWOULDBLOCK) {
                read_note(h->fd, holder);
                rc = mcdc_error_set(err, MCDC_E_CONFLICT, "%s is held by another process",
                                    h->path);
            } else if (e == ENOLCK || e == EINVAL || e == EOPNOTSUPP) {
                rc = mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                    "cannot lock %s: its filesystem has no working locks (%s)",
                                    h->path, strerror(e));
            } else {
                rc = mcdc_error_set(err, MCDC_E_IO, "cannot lock %s: %s", h->path, strerror(e));
            }
            break;
        }
        if (still_linked(h->fd, h->path)) {
            /* Ours: the note replaces whatever a killed holder left. */
            if (ftruncate(h->fd, 0) != 0 || (n > 0 && pwrite(h->fd, note, n, 0) != (ssize_t)n))
                mcdc_log(MCDC_LOG_WARN, "cannot write who holds %s (%s): others finding it "
                                        "held will not see it", h->path, strerror(errno));
            *out = h;
            return MCDC_OK;
        }
        close(h->fd);
        h->fd = -1;
    }
    if (rc == MCDC_OK)
        rc = mcdc_error_set(err, MCDC_E_CONFLICT, "%s keeps being replaced under its lock",
                            h->path);
    if (h->fd >= 0) close(h->fd);
    mcdc_free(h->path);
    mcdc_free(h);
    return rc;
}

/* Removes the file while still holding it, then lets go: a process that
 * opened it meanwhile and wins the lock finds it removed and starts over.
 * The directories the hold created go too while nothing else is in them (a
 * run that stops before it writes leaves no trace); a process creating its
 * hold there meanwhile creates them again. */
static void local_unlock(void *hold) {
    local_hold *h = hold;
    if (h == NULL) return;
    if (unlink(h->path) != 0 && errno != ENOENT)
        mcdc_log(MCDC_LOG_WARN, "cannot remove %s: %s", h->path, strerror(errno));
    for (char *cut = strrchr(h->path, '/');
         h->made > 0 && cut && (size_t)(cut - h->path) >= h->made; cut = strrchr(h->path, '/')) {
        *cut = 0;
        if (rmdir(h->path) != 0) break;
    }
    close(h->fd);
    mcdc_free(h->path);
    mcdc_free(h);
}

static const mcdc_storage_writer_ops local_writer_ops = {
    local_writer_write, local_writer_commit, local_writer_discard,
};

static const mcdc_storage_ops local_ops = {
    local_open_writer, local_get, local_get_range, local_list, local_del, local_destroy,
    local_lock,        local_unlock,      false,
};

int mcdc_storage_local_create(mcdc_storage **out, const char *root, mcdc_error *err) {
    *out = NULL;
    size_t n = root ? strlen(root) : 0;
    if (n == 0) return mcdc_error_set(err, MCDC_E_INVALID, "a local storage needs a directory");
    while (n > 1 && root[n - 1] == '/') n--;
    mcdc_storage *s = mcdc_calloc(1, sizeof *s);
    local_storage *ls = mcdc_calloc(1, sizeof *ls);
    if (s == NULL || ls == NULL || (ls->root = mcdc_strndup(root, n)) == NULL ||
        (s->root = mcdc_strndup(root, n)) == NULL) {
        if (ls) mcdc_free(ls->root);
        mcdc_free(ls);
        mcdc_free(s);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    if (n == 1 && ls->root[0] == '/') ls->root[0] = 0; /* "/" + "/" + key */
    s->ops = &local_ops;
    s->self = ls;
    *out = s;
    return MCDC_OK;
}

