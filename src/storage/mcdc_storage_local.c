/* mcdc_storage_local.c - the storage seam on a POSIX filesystem. */
#include "mcdc_storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct local_storage {
    char *root; /* owned, no trailing '/' (except "/") */
} local_storage;

void mcdc_storage_listing_free(mcdc_storage_listing *l) {
    if (l == NULL) return;
    for (size_t i = 0; i < l->count; i++) mcdc_free(l->entries[i].name);
    mcdc_free(l->entries);
    l->entries = NULL;
    l->count = 0;
}

/* Keys are relative, '/'-separated, without empty, "." or ".." segments:
 * a key can never leave the root. */
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

static char *join(const local_storage *ls, const char *key) {
    return mcdc_asprintf("%s/%s", ls->root, key);
}

/* mkdir -p of the directory part of path. */
static int make_parents(const char *path, mcdc_error *err) {
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
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
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

/* The directory holding path ("." when none); owned, NULL when out of memory. */
static char *parent_dir(const char *path) {
    const char *last = strrchr(path, '/');
    if (last == NULL) return mcdc_strdup(".");
    return mcdc_strndup(path, last == path ? 1 : (size_t)(last - path));
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

static int fsync_parent(const char *path, mcdc_error *err) {
    char *p = parent_dir(path);
    if (p == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = fsync_dir(p, err);
    mcdc_free(p);
    return rc;
}

/* Writes data to a new hidden temp file next to final (name starts with '.',
 * so Delta readers ignore it) and fsyncs it. *out_tmp is owned by the caller. */
static int write_temp(const char *final, const void *data, size_t n, char **out_tmp,
                      mcdc_error *err) {
    *out_tmp = NULL;
    int rc = make_parents(final, err);
    if (rc) return rc;
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r = (uint64_t)mcdc_monotonic_us();
    const char *slash = strrchr(final, '/');
    int dir_len = slash ? (int)(slash - final) : 0;
    const char *base = slash ? slash + 1 : final;
    char *tmp = mcdc_asprintf("%.*s/.%s.%ld.%016llx.tmp", dir_len, final, base, (long)getpid(),
                              (unsigned long long)r);
    if (tmp == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        rc = mcdc_error_set(err, MCDC_E_IO, "cannot create %s: %s", tmp, strerror(errno));
        mcdc_free(tmp);
        return rc;
    }
    const uint8_t *p = data;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            rc = mcdc_error_set(err, MCDC_E_IO, "cannot write %s: %s", tmp, strerror(errno));
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (rc == MCDC_OK && fsync(fd) != 0)
        rc = mcdc_error_set(err, MCDC_E_IO, "cannot fsync %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == MCDC_OK)
        rc = mcdc_error_set(err, MCDC_E_IO, "cannot close %s: %s", tmp, strerror(errno));
    if (rc) {
        unlink(tmp);
        mcdc_free(tmp);
        return rc;
    }
    *out_tmp = tmp;
    return MCDC_OK;
}

static int local_put_if_absent(void *self, const char *key, const void *data, size_t n,
                               mcdc_error *err) {
    local_storage *ls = self;
    int rc = check_key(key, false, err);
    if (rc) return rc;
    char *final = join(ls, key);
    char *dir = final ? parent_dir(final) : NULL;
    if (dir == NULL) {
        mcdc_free(final);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    char *tmp = NULL;
    rc = write_temp(final, data, n, &tmp, err);
    if (rc == MCDC_OK) {
        /* link(2) publishes the complete file under its final name, and fails
         * if that name exists: atomic visibility plus mutual exclusion. A plain
         * rename would silently replace a winner's commit. */
        if (link(tmp, final) != 0) {
            if (errno == EEXIST)
                rc = mcdc_error_set(err, MCDC_E_CONFLICT, "%s already exists", final);
            else
                rc = mcdc_error_set(err, MCDC_E_IO, "cannot publish %s: %s", final,
                                    strerror(errno));
        }
        unlink(tmp);
        /* Published: readers see it, so it must not be reported as not
         * written (a Delta writer would then delete the data files the
         * commit names). A failed directory fsync is only logged. */
        mcdc_error fe = MCDC_ERROR_INIT;
        if (rc == MCDC_OK && fsync_dir(dir, &fe) != MCDC_OK)
            mcdc_log(MCDC_LOG_WARN, "%s is published but %s", final, fe.message);
    }
    mcdc_free(tmp);
    mcdc_free(dir);
    mcdc_free(final);
    return rc;
}

static int local_put(void *self, const char *key, const void *data, size_t n, mcdc_error *err) {
    local_storage *ls = self;
    int rc = check_key(key, false, err);
    if (rc) return rc;
    char *final = join(ls, key);
    if (final == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    char *tmp = NULL;
    rc = write_temp(final, data, n, &tmp, err);
    if (rc == MCDC_OK) {
        /* Replacing is the point here (readers see old or new, never half). */
        if (rename(tmp, final) != 0) {
            rc = mcdc_error_set(err, MCDC_E_IO, "cannot rename %s to %s: %s", tmp, final,
                                strerror(errno));
            unlink(tmp);
        }
        if (rc == MCDC_OK) rc = fsync_parent(final, err);
    }
    mcdc_free(tmp);
    mcdc_free(final);
    return rc;
}

static int local_get(void *self, const char *key, size_t max_bytes, mcdc_buf *out,
                     mcdc_error *err) {
    local_storage *ls = self;
    int rc = check_key(key, false, err);
    if (rc) return rc;
    char *path = join(ls, key);
    if (path == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = mcdc_error_set(err, errno == ENOENT ? MCDC_E_NOTFOUND : MCDC_E_IO,
                            "cannot open %s: %s", path, strerror(errno));
        mcdc_free(path);
        return rc;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = mcdc_error_set(err, MCDC_E_IO, "cannot stat %s: %s", path, strerror(errno));
    } else if ((uint64_t)st.st_size > max_bytes) {
        rc = mcdc_error_set(err, MCDC_E_LIMIT, "%s is %lld bytes, more than the %zu allowed",
                            path, (long long)st.st_size, max_bytes);
    } else {
        size_t want = (size_t)st.st_size;
        rc = mcdc_buf_reserve(out, want, err);
        size_t got = 0;
        while (rc == MCDC_OK && got < want) {
            ssize_t r = read(fd, out->data + out->len + got, want - got);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0)
                rc = mcdc_error_set(err, MCDC_E_IO, "cannot read %s: %s", path, strerror(errno));
            else if (r == 0)
                break; /* shrank under us: return what is there */
            else
                got += (size_t)r;
        }
        if (rc == MCDC_OK) out->len += got;
    }
    close(fd);
    mcdc_free(path);
    return rc;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const mcdc_storage_entry *)a)->name, ((const mcdc_storage_entry *)b)->name);
}

static int local_list(void *self, const char *prefix, mcdc_storage_listing *out, mcdc_error *err) {
    local_storage *ls = self;
    out->entries = NULL;
    out->count = 0;
    const char *slash = strrchr(prefix, '/');
    const char *name_prefix = slash ? slash + 1 : prefix;
    char *dir = slash ? mcdc_asprintf("%s/%.*s", ls->root, (int)(slash - prefix), prefix)
                      : mcdc_strdup(ls->root);
    if (dir == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (slash) {
        char *k = mcdc_strndup(prefix, (size_t)(slash - prefix) + 1);
        int rc = k ? check_key(k, true, err) : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        mcdc_free(k);
        if (rc) {
            mcdc_free(dir);
            return rc;
        }
    }
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
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0) {
            if (errno == ENOENT) continue; /* deleted while listing */
            rc = mcdc_error_set(err, MCDC_E_IO, "cannot stat %s/%s: %s", dir, e->d_name,
                                strerror(errno));
            break;
        }
        if (!S_ISREG(st.st_mode)) continue;
        if (out->count == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            mcdc_storage_entry *ne = mcdc_realloc(out->entries, ncap * sizeof *ne);
            if (ne == NULL) {
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory listing %s", dir);
                break;
            }
            out->entries = ne;
            cap = ncap;
        }
        mcdc_storage_entry *en = &out->entries[out->count];
        en->name = mcdc_strdup(e->d_name);
        if (en->name == NULL) {
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory listing %s", dir);
            break;
        }
        en->size = (int64_t)st.st_size;
        en->mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
        out->count++;
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
    int rc = check_key(key, false, err);
    if (rc) return rc;
    char *path = join(ls, key);
    if (path == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (unlink(path) != 0)
        rc = mcdc_error_set(err, errno == ENOENT ? MCDC_E_NOTFOUND : MCDC_E_IO,
                            "cannot delete %s: %s", path, strerror(errno));
    mcdc_free(path);
    return rc;
}

static int local_size(void *self, const char *key, int64_t *out_bytes, mcdc_error *err) {
    local_storage *ls = self;
    *out_bytes = -1;
    int rc = check_key(key, false, err);
    if (rc) return rc;
    char *path = join(ls, key);
    if (path == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    struct stat st;
    if (stat(path, &st) != 0)
        rc = mcdc_error_set(err, errno == ENOENT ? MCDC_E_NOTFOUND : MCDC_E_IO,
                            "cannot stat %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = mcdc_error_set(err, MCDC_E_NOTFOUND, "%s is not a regular file", path);
    else
        *out_bytes = (int64_t)st.st_size;
    mcdc_free(path);
    return rc;
}

static void local_destroy(void *self) {
    local_storage *ls = self;
    if (ls == NULL) return;
    mcdc_free(ls->root);
    mcdc_free(ls);
}

static const mcdc_storage_ops local_ops = {
    local_put_if_absent, local_put, local_get, local_list, local_del, local_size, local_destroy,
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

void mcdc_storage_free(mcdc_storage *s) {
    if (s == NULL) return;
    if (s->ops && s->ops->destroy) s->ops->destroy(s->self);
    mcdc_free(s->root);
    mcdc_free(s);
}

int mcdc_storage_put_if_absent(mcdc_storage *s, const char *key, const void *data, size_t n,
                               mcdc_error *err) {
    return s->ops->put_if_absent(s->self, key, data, n, err);
}
int mcdc_storage_put(mcdc_storage *s, const char *key, const void *data, size_t n,
                     mcdc_error *err) {
    return s->ops->put(s->self, key, data, n, err);
}
int mcdc_storage_get(mcdc_storage *s, const char *key, size_t max_bytes, mcdc_buf *out,
                     mcdc_error *err) {
    return s->ops->get(s->self, key, max_bytes, out, err);
}
int mcdc_storage_list(mcdc_storage *s, const char *prefix, mcdc_storage_listing *out,
                      mcdc_error *err) {
    return s->ops->list(s->self, prefix, out, err);
}
int mcdc_storage_delete(mcdc_storage *s, const char *key, mcdc_error *err) {
    return s->ops->del(s->self, key, err);
}
int mcdc_storage_size(mcdc_storage *s, const char *key, int64_t *out_bytes, mcdc_error *err) {
    return s->ops->size(s->self, key, out_bytes, err);
}
