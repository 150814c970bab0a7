/*
 * mcdc_storage.h - the object store seam under the Delta log.
 *
 * A storage is rooted at one directory (or bucket prefix); keys are relative
 * '/'-separated paths below it ("_delta_log/00000000000000000003.json").
 * The Delta protocol needs three things from it (formats.md A7): atomic
 * visibility of a written object, mutual exclusion on creating a log file
 * (put_if_absent), and consistent, sorted listing. The local filesystem
 * implementation gives them with temp file + fsync + link(2) + directory
 * fsync; object stores (S3 If-None-Match, ADLS If-None-Match) plug in later
 * behind the same vtable.
 *
 * Status codes: MCDC_E_CONFLICT from put_if_absent means "the key already
 * exists" (a lost race, nothing was written); MCDC_E_NOTFOUND from get/size/
 * delete means the key does not exist. Every other failure is MCDC_E_IO
 * (or MCDC_E_LIMIT / MCDC_E_NOMEM) with the path in the message. A failing
 * put_if_absent has published nothing: once the object is visible the call
 * returns MCDC_OK (a later durability step that fails is logged), because a
 * Delta writer told "failed" deletes the data files the commit names.
 */
#ifndef MCDC_STORAGE_H
#define MCDC_STORAGE_H

#include <stdint.h>

#include "mcdc_util.h"

typedef struct mcdc_storage_entry {
    char *name;       /* owned: the key's last path segment ("0000...1.json") */
    int64_t size;     /* bytes */
    int64_t mtime_ms; /* last modification, ms since 1970 */
} mcdc_storage_entry;

typedef struct mcdc_storage_listing {
    mcdc_storage_entry *entries; /* owned, sorted by name (bytewise) */
    size_t count;
} mcdc_storage_listing;

/* Frees the entries and zeroes the list. NULL-safe. */
void mcdc_storage_listing_free(mcdc_storage_listing *l);

typedef struct mcdc_storage_ops {
    /* Creates key with data atomically, or MCDC_E_CONFLICT if it exists. */
    int (*put_if_absent)(void *self, const char *key, const void *data, size_t n,
                         mcdc_error *err);
    /* Creates or replaces key atomically (data files, _last_checkpoint). */
    int (*put)(void *self, const char *key, const void *data, size_t n, mcdc_error *err);
    /* Reads the whole object into out (appended; out->limit respected).
     * Objects larger than max_bytes are MCDC_E_LIMIT. */
    int (*get)(void *self, const char *key, size_t max_bytes, mcdc_buf *out, mcdc_error *err);
    /* Lists the objects directly under the directory part of prefix whose name
     * starts with the rest of it ("_delta_log/" lists the log; "_delta_log/000"
     * the commits). A missing directory is an empty list, not an error.
     * Directories are not listed. */
    int (*list)(void *self, const char *prefix, mcdc_storage_listing *out, mcdc_error *err);
    int (*del)(void *self, const char *key, mcdc_error *err);
    int (*size)(void *self, const char *key, int64_t *out_bytes, mcdc_error *err);
    void (*destroy)(void *self);
} mcdc_storage_ops;

typedef struct mcdc_storage {
    const mcdc_storage_ops *ops;
    void *self;
    char *root; /* owned: for messages ("/lake/bronze.db/orders") */
} mcdc_storage;

/* A storage over the local directory root (created, with parents, on the
 * first write). */
int mcdc_storage_local_create(mcdc_storage **out, const char *root, mcdc_error *err);
void mcdc_storage_free(mcdc_storage *s);

/* Thin wrappers over the vtable. */
int mcdc_storage_put_if_absent(mcdc_storage *s, const char *key, const void *data, size_t n,
                               mcdc_error *err);
int mcdc_storage_put(mcdc_storage *s, const char *key, const void *data, size_t n,
                     mcdc_error *err);
int mcdc_storage_get(mcdc_storage *s, const char *key, size_t max_bytes, mcdc_buf *out,
                     mcdc_error *err);
int mcdc_storage_list(mcdc_storage *s, const char *prefix, mcdc_storage_listing *out,
                      mcdc_error *err);
int mcdc_storage_delete(mcdc_storage *s, const char *key, mcdc_error *err);
int mcdc_storage_size(mcdc_storage *s, const char *key, int64_t *out_bytes, mcdc_error *err);

#endif /* MCDC_STORAGE_H */
