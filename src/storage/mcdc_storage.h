/*
 * mcdc_storage.h - the storage seam: every byte of table data (Delta log,
 * checkpoints, _last_checkpoint, Parquet data files) is written, read,
 * listed and deleted through it. Nothing else in the library opens, stats,
 * creates, renames or unlinks table files (scripts/check_storage_io.py
 * checks that in `make test`).
 *
 * Opening. mcdc_storage_open takes a location: a plain path or a file: URI
 * is the local filesystem (mcdc_storage_local.c); mem://<name>[/<prefix>]
 * is an in-memory store the caller created and handed in through an
 * mcdc_storage_env (mcdc_storage_mem.c); s3:// and s3a:// are Amazon S3
 * (mcdc_storage_s3.c), abfss://, abfs://, az://, wasbs:// and wasb://
 * Azure Blob Storage (mcdc_storage_azure.c), each with its settings and
 * credentials from the env's options; gs:// and the other object stores
 * are refused (MCDC_E_INVALID: a usage error, said as "not built yet")
 * until their backends land, each as one file plugged into the scheme
 * table of mcdc_storage_uri.c (the only place that knows schemes).
 *
 * Keys are relative '/'-separated paths below the storage's root
 * ("_delta_log/00000000000000000003.json"), without empty, "." or ".."
 * segments (MCDC_E_INVALID): a key never leaves its root. Directories are
 * the backend's business: there are none to create (the local backend makes
 * parents on write) and listings never show them.
 *
 * The Delta protocol needs three things from a storage (formats.md A7):
 * atomic visibility of a written object, mutual exclusion on creating a log
 * file (put-if-absent), and consistent, sorted listing. Every backend gives:
 *
 *   Writes are streamed: open a writer on a key, write parts, then commit it
 *   as put (create or replace) or put-if-absent, or abort it. Until a commit
 *   returns, nothing of the object is visible; once it is visible, all of it
 *   is (a reader sees the old object or the new one, never a mix). A commit
 *   that fails has published nothing and left nothing behind (temp data
 *   removed); once the object is visible the commit returns MCDC_OK, and a
 *   durability step after that which fails is only logged, because a Delta
 *   writer told "failed" deletes the data files its commit names. Local:
 *   temp file + fsync + link(2) (put-if-absent) or rename(2) (put) +
 *   directory fsync; a scratch put is the rename without the fsyncs (its
 *   object is as visible, not as durable). S3 multipart upload with
 *   If-None-Match, Azure block
 *   blobs with If-None-Match map onto the same three calls.
 *
 *   Ranged reads: len bytes at an offset of an object, and the object's
 *   size, so that Parquet reads its footer and column chunks by range.
 *   Data files are immutable (unique names), so ranges of one file never mix
 *   versions; mutable keys (_last_checkpoint) are read whole with get.
 *
 *   Listing: the objects directly under a "directory" prefix, sorted by name
 *   (bytewise), with size and modification time.
 *
 * Status codes: MCDC_E_CONFLICT from a put-if-absent commit means "the key
 * already exists" (a lost race, nothing was written); MCDC_E_NOTFOUND from
 * get, get_range, size and delete means the key does not exist;
 * MCDC_E_INVALID is a bad key, a range starting past the object's end, or a
 * location whose backend is not built; MCDC_E_UNSUPPORTED a file: URI of a
 * remote host. Every other
 * failure is MCDC_E_IO (or MCDC_E_LIMIT / MCDC_E_NOMEM) with the location
 * and key in the message.
 *
 * Threads: a storage may be used from several threads at once (the stream
 * writes bronze and facts from different threads); one writer handle is used
 * by one thread at a time.
 */
#ifndef MCDC_STORAGE_H
#define MCDC_STORAGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcdc_limits.h"
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
/* For backends: drops the entries of a sorted listing whose name sorts at
 * or before after (NULL: none), for a store that returned them anyway. */
void mcdc_storage_listing_drop_upto(mcdc_storage_listing *l, const char *after);
/* For backends: appends an entry (name copied); *cap is the entries' room. */
int mcdc_storage_listing_add(mcdc_storage_listing *l, size_t *cap, const char *name,
                             int64_t size, int64_t mtime_ms, mcdc_error *err);

/* For backends: the parts of a streamed upload (S3's multipart parts,
 * Azure's blocks) sent on threads of their own while the writer fills the
 * next, so the upload overlaps the Parquet writer's work. Up to in_flight
 * parts go at once; a writer holds those and the one it fills. Each part
 * handed over gets the next index (0, 1...); send runs on a sender thread
 * and may read the writer's fixed upload state (its key, upload id) but
 * writes only note, the part's result (S3: its ETag); sent then runs on
 * the caller's thread, in index order, when the caller next waits for the
 * part (the oldest, when all slots are taken, or every one in
 * mcdc_part_sender_wait). Zero-initialised and unused it is idle. */
typedef int (*mcdc_part_send_fn)(void *ctx, int64_t index, const mcdc_buf *part,
                                 char note[MCDC_HTTP_HEADER_VALUE_MAX], mcdc_error *err);
typedef int (*mcdc_part_sent_fn)(void *ctx, int64_t index, const char *note, mcdc_error *err);

typedef struct mcdc_part_sender mcdc_part_sender;

typedef struct mcdc_part_slot {
    mcdc_part_sender *ps;
    mcdc_buf part; /* the part in flight (emptied once sent) */
    int64_t index;
    pthread_t thread;
    bool running; /* thread started and not yet joined */
    int rc;
    mcdc_error err;
    char note[MCDC_HTTP_HEADER_VALUE_MAX];
} mcdc_part_slot;

struct mcdc_part_sender {
    mcdc_part_send_fn send;
    mcdc_part_sent_fn sent; /* may be NULL */
    void *ctx;
    int in_flight; /* 1..MCDC_PARTS_IN_FLIGHT_MAX */
    mcdc_part_slot slots[MCDC_PARTS_IN_FLIGHT_MAX];
    int64_t handed, done; /* parts handed over; parts waited for */
    int rc;               /* the first failure, kept: every later call returns it */
    mcdc_error err;
};

/* in_flight for parts of part_bytes: MCDC_PARTS_IN_FLIGHT_BYTES of them,
 * at least 1, at most MCDC_PARTS_IN_FLIGHT_MAX. */
void mcdc_part_sender_init(mcdc_part_sender *ps, mcdc_part_send_fn send, mcdc_part_sent_fn sent,
                           void *ctx, size_t part_bytes);
/* Sends *full's bytes as the next part on a sender thread (waiting for
 * the oldest part first when in_flight are out); *full comes back empty,
 * with its limit. A failure of an earlier part is returned here. */
int mcdc_part_sender_send(mcdc_part_sender *ps, mcdc_buf *full, mcdc_error *err);
/* Waits for every part handed over: MCDC_OK when all were sent (and their
 * sent callbacks passed), else the first failure. */
int mcdc_part_sender_wait(mcdc_part_sender *ps, mcdc_error *err);
/* Waits, then frees the buffers. NULL-safe. */
void mcdc_part_sender_free(mcdc_part_sender *ps);

/* How a writer publishes its object. */
typedef enum mcdc_storage_commit_mode {
    MCDC_STORAGE_PUT = 0,           /* create or replace */
    MCDC_STORAGE_PUT_IF_ABSENT = 1, /* create, or MCDC_E_CONFLICT when the key exists */
    /* create or replace scratch data, visible at once as PUT is, but not
     * made durable (local: no fsync): what only this process reads back
     * and a crash leaves as garbage anyway (a sorter's spilled run) */
    MCDC_STORAGE_PUT_SCRATCH = 2
} mcdc_storage_commit_mode;

/* ---- the backend vtables ------------------------------------------------------
 * Backends implement these; callers use the functions further down, which
 * check keys (so backends receive valid ones only) and keep the writer's
 * bookkeeping. */

typedef struct mcdc_storage_writer mcdc_storage_writer;

typedef struct mcdc_storage_writer_ops {
    /* Appends n bytes (n > 0) to the object being written. */
    int (*write)(void *wself, const void *data, size_t n, mcdc_error *err);
    /* Publishes what was written, by mode (see the contract above). Called
     * at most once; discard follows it either way. */
    int (*commit)(void *wself, mcdc_storage_commit_mode mode, mcdc_error *err);
    /* Removes whatever was not published (temp data) and frees wself. Cannot
     * fail: a temp file it cannot remove is logged. */
    void (*discard)(void *wself);
} mcdc_storage_writer_ops;

struct mcdc_storage_writer {
    const mcdc_storage_writer_ops *ops;
    void *self;    /* the backend's writer state */
    char *name;    /* owned: "<root>/<key>", for messages */
    int64_t bytes; /* written so far */
    int failed;    /* status of a failed write: the writer can only be aborted */
};

typedef struct mcdc_storage_ops {
    /* Starts writing key: fills w->ops and w->self. Nothing is visible yet. */
    int (*open_writer)(void *self, const char *key, mcdc_storage_writer *w, mcdc_error *err);
    /* Reads the whole object into out (appended; out->limit respected).
     * Objects larger than max_bytes are MCDC_E_LIMIT. */
    int (*get)(void *self, const char *key, size_t max_bytes, mcdc_buf *out, mcdc_error *err);
    /* Reads min(len, size - offset) bytes at offset into dst (*got) and the
     * object's size (*size). offset == size reads 0 bytes; offset > size is
     * MCDC_E_INVALID. len may be 0 (a size and existence check). */
    int (*get_range)(void *self, const char *key, int64_t offset, size_t len, void *dst,
                     size_t *got, int64_t *size, mcdc_error *err);
    /* Lists the objects directly under the directory part of prefix whose name
     * starts with the rest of it ("_delta_log/" lists the log; "_delta_log/000"
     * the commits) and, when after is not NULL, sorts after it (bytewise:
     * "list from this name on"; after is a name, no '/'). A missing directory
     * is an empty list, not an error. */
    int (*list)(void *self, const char *prefix, const char *after, mcdc_storage_listing *out,
                mcdc_error *err);
    int (*del)(void *self, const char *key, mcdc_error *err);
    void (*destroy)(void *self);
    /* Optional (NULL: MCDC_E_UNSUPPORTED): takes the exclusive hold of key
     * (see mcdc_storage_lock below) and fills *hold; held by another:
     * MCDC_E_CONFLICT with the holder's note appended to holder. */
    int (*lock)(void *self, const char *key, const void *note, size_t n, void **hold,
                mcdc_buf *holder, mcdc_error *err);
    /* Gives a hold back (cannot fail; NULL-safe). */
    void (*unlock)(void *hold);
    /* true (with lock NULL): holds are leases made of this storage's own
     * calls (mcdc_storage_lease.c), for stores without locks that die with
     * a process (S3, Azure Blob). */
    bool lease;
} mcdc_storage_ops;

typedef struct mcdc_storage {
    const mcdc_storage_ops *ops;
    void *self;
    char *root; /* owned: the location, for messages ("/lake/bronze.db/orders",
                   "mem://lake/bronze") */
    int64_t lease_ttl_ms; /* a lease's life unless renewed (0: the default);
                             the storage option MCDC_LEASE_TTL_MS */
} mcdc_storage;

/* ---- opening -------------------------------------------------------------------- */

typedef struct mcdc_storage_mem mcdc_storage_mem;

/* Credentials the stores opened with one set of options share (a runtime's
 * set: mcdc_runtime_set_storage_options), found once: S3's (its region from
 * a profile too) and Azure's Entra ID token source (one token fetched and
 * renewed for every store of the set). Zeroed, its mutex initialised, by
 * its owner, who frees it with mcdc_cred_share_free (which drops the
 * share's references: a store still open keeps what it uses). */
struct mcdc_aws_creds;
struct mcdc_az_entra;
typedef struct mcdc_cred_share {
    pthread_mutex_t mu;
    struct mcdc_aws_creds *aws;
    char *aws_region;
    struct mcdc_az_entra *azure;
} mcdc_cred_share;
void mcdc_cred_share_free(mcdc_cred_share *sh);

/* What a location may refer to besides the filesystem: the in-memory stores
 * of a test or of a job. The library keeps no registry of its own; whoever
 * opens tables (a test now, a job context later) carries one of these and
 * hands it to the openers. */
typedef struct mcdc_storage_env {
    /* The memory store called name (length name_len, not terminated), or
     * NULL when there is none; borrowed (the storage opened on it takes its
     * own reference). NULL: no memory stores. */
    mcdc_storage_mem *(*mem_store)(void *ctx, const char *name, size_t name_len);
    void *ctx;
    /* Storage options: endpoints, regions and credentials under the names
     * delta-rs gives them ("AWS_REGION", "AZURE_STORAGE_ACCOUNT_KEY"...).
     * Returns the value of name (upper case, as in that list), or NULL when
     * it was not given; borrowed, valid while the env is. NULL: no options.
     * The library never reads the process's environment: whoever builds the
     * env decides what the object-store backends see (the CLI: environment
     * variables, then the options file, then --storage-option). */
    const char *(*option)(void *octx, const char *name);
    void *octx;
    /* Options by scheme (a runtime's: mcdc_runtime_set_storage_options),
     * for an env whose option is NULL (a job given no storage options of
     * its own): the set given for the family of the location being opened
     * (mcdc_storage_family: "file", "mem", "s3", "azure"), or NULL; asked
     * once per open, so one open reads one set. set_option answers name
     * from a set (borrowed, valid while the runtime is). NULL: none. */
    const void *(*family_set)(void *fctx, const char *family);
    const char *(*set_option)(const void *set, const char *name);
    mcdc_cred_share *(*set_share)(const void *set);
    void *fctx;
    /* The credentials share of the options option answers (set for an
     * open from family_set's set); NULL: each store finds its own. */
    mcdc_cred_share *share;
} mcdc_storage_env;

/* Opens the storage at location (see the header comment): a path or file:
 * URI, mem://<name>[/<prefix>] resolved through env (which may be NULL:
 * then mem:// is MCDC_E_NOTFOUND), or an object store built (s3://,
 * abfss://, az://... with their options from env). An object store not
 * built yet (gs://...) or an unknown scheme is MCDC_E_INVALID. The local
 * directory need not exist. */
int mcdc_storage_open_env(mcdc_storage **out, const mcdc_storage_env *env,
                          const char *location, mcdc_error *err);
/* The same without memory stores. */
int mcdc_storage_open(mcdc_storage **out, const char *location, mcdc_error *err);
/* The family of a scheme's stores, as runtimes key their storage options:
 * "file" (a path, file:), "mem", "s3" (s3, s3a), "azure" (abfss, abfs, az,
 * wasbs, wasb; "azure" itself), "gs"; a family's own name maps to itself.
 * scheme is a name without "://" (any case). NULL: no scheme we know. */
const char *mcdc_storage_family(const char *scheme);
/* What open says of location's scheme, without opening anything: MCDC_OK
 * for a path, file:, mem:// or a built object store, MCDC_E_INVALID for an
 * object store that is not built yet or an unknown scheme. */
int mcdc_storage_check_location(const char *location, mcdc_error *err);
/* A storage over the local directory root (created, with parents, on the
 * first write). */
int mcdc_storage_local_create(mcdc_storage **out, const char *root, mcdc_error *err);
/* Frees the storage (not the memory store under it). NULL-safe. */
void mcdc_storage_free(mcdc_storage *s);
/* Checks a key as every operation does (relative, no empty/"."/".." part). */
int mcdc_storage_check_key(const char *key, mcdc_error *err);

/* ---- writing -------------------------------------------------------------------- */

/* Starts writing key. *out is owned: commit or abort it exactly once. */
int mcdc_storage_writer_open(mcdc_storage_writer **out, mcdc_storage *s, const char *key,
                             mcdc_error *err);
/* Appends n bytes. A failure leaves the writer failed: only abort is left. */
int mcdc_storage_writer_write(mcdc_storage_writer *w, const void *data, size_t n,
                              mcdc_error *err);
/* Publishes the object by mode and frees w (whatever the result). A failed
 * commit has published nothing and removed its temp data. */
int mcdc_storage_writer_commit(mcdc_storage_writer *w, mcdc_storage_commit_mode mode,
                               mcdc_error *err);
/* Drops the object (nothing published, temp data removed) and frees w.
 * NULL-safe. */
void mcdc_storage_writer_abort(mcdc_storage_writer *w);
/* Bytes written so far. */
int64_t mcdc_storage_writer_bytes(const mcdc_storage_writer *w);

/* Whole objects in one call (writer open + write + commit). */
int mcdc_storage_put_if_absent(mcdc_storage *s, const char *key, const void *data, size_t n,
                               mcdc_error *err);
int mcdc_storage_put(mcdc_storage *s, const char *key, const void *data, size_t n,
                     mcdc_error *err);

/* ---- reading, listing, deleting ------------------------------------------------- */

int mcdc_storage_get(mcdc_storage *s, const char *key, size_t max_bytes, mcdc_buf *out,
                     mcdc_error *err);
/* See get_range above; got and size may be NULL. */
int mcdc_storage_get_range(mcdc_storage *s, const char *key, int64_t offset, size_t len,
                           void *dst, size_t *got, int64_t *size, mcdc_error *err);
/* The object's size (a ranged read of 0 bytes). */
int mcdc_storage_size(mcdc_storage *s, const char *key, int64_t *out_bytes, mcdc_error *err);
int mcdc_storage_list(mcdc_storage *s, const char *prefix, mcdc_storage_listing *out,
                      mcdc_error *err);
/* The same, only the names that sort after `after` (a name below the
 * listed directory, without '/'; NULL: all): a Delta log listed from a
 * version on, not from zero. The stores skip what comes before it on their
 * side (S3: ListObjectsV2's start-after; Azure: List Blobs' startFrom, the
 * rest filtered here where a service ignores it), so a long log costs no
 * more pages than its tail. */
int mcdc_storage_list_after(mcdc_storage *s, const char *prefix, const char *after,
                            mcdc_storage_listing *out, mcdc_error *err);
int mcdc_storage_delete(mcdc_storage *s, const char *key, mcdc_error *err);

/* ---- holding a key: one process at a time ---------------------------------------
 *
 * A lock says "one process works here" (a job on its checkpoint): taking it
 * proves no other holds it now, and a process that dies holds nothing, so
 * no lock is ever left stale. Local: flock(2) on the key's file, which the
 * kernel drops with the process (kill -9 too); the file is created when
 * missing, holds the holder's note while held and is removed when given
 * back. A lock taken on a file that its holder removed meanwhile is taken
 * again on the new one, so two processes never hold one key. On a network
 * filesystem whose locks do not work the local backend answers
 * MCDC_E_UNSUPPORTED. Memory: a table of held keys in the store (processes
 * are threads there: two storages on one store exclude each other).
 *
 * Object stores have no locks that die with a process; there the same hold
 * is a lease (mcdc_storage_lease.c): a chain of small objects next to the
 * key, each link created put-if-absent with the note, a ttl and a state;
 * renewed by its holder every third of the ttl (the next link), taken over
 * by another process only once the newest link has expired and only by
 * creating the next link put-if-absent (so two successors cannot both win),
 * given back by a "released" link. A killed holder's lease expires instead
 * of vanishing with it (the next process waits out the ttl). A holder that
 * finds its lease taken over, or cannot renew it for a whole ttl, has lost
 * it: mcdc_storage_lock_check says so, and the holder stops before its next
 * commit. A backend with neither locks nor leases answers
 * MCDC_E_UNSUPPORTED, which callers treat as "no hold here" (the
 * commit-time checks still catch a second writer).
 *
 * note (n bytes, who holds it: pid, host, since) is kept with the hold for
 * whoever finds it held. */
typedef struct mcdc_storage_lock mcdc_storage_lock;

/* Takes the hold of key. MCDC_E_CONFLICT: another process (or storage)
 * holds it, and holder (may be NULL) gets the note it left (possibly empty:
 * it is just starting); MCDC_E_UNSUPPORTED: the backend cannot hold keys.
 * *out is owned: give it back with mcdc_storage_unlock. The storage must
 * outlive it. */
int mcdc_storage_lock_key(mcdc_storage_lock **out, mcdc_storage *s, const char *key,
                          const void *note, size_t n, mcdc_buf *holder, mcdc_error *err);
/* Gives the hold back (NULL-safe). */
void mcdc_storage_unlock(mcdc_storage_lock *l);
/* MCDC_OK while the hold is ours; a lease taken over by another process
 * or not renewed for its whole ttl is MCDC_E_FOREIGN_WRITER saying so (a
 * lock always answers MCDC_OK). Call it before each commit. */
int mcdc_storage_lock_check(mcdc_storage_lock *l, mcdc_error *err);
/* A lease on key of any storage with the given ttl (what lock_key takes on
 * a lease backend with the storage's ttl): for tests, on memory stores. */
int mcdc_storage_lease_key(mcdc_storage_lock **out, mcdc_storage *s, const char *key,
                           const void *note, size_t n, int64_t ttl_ms, mcdc_buf *holder,
                           mcdc_error *err);
/* For the seam (mcdc_storage_lease.c). */
int mcdc_storage__lease_take(void **out, mcdc_storage *s, const char *key, const void *note,
                             size_t n, int64_t ttl_ms, mcdc_buf *holder, mcdc_error *err);
int mcdc_storage__lease_check(void *hold, mcdc_error *err);
void mcdc_storage__lease_release(void *hold);

/* ---- the in-memory backend (tests: same semantics, plus fault injection) -------- */

/* A store: objects in memory, shared by every storage opened on it, safe to
 * use from several threads. name is what mem://<name> locations resolve
 * (through mcdc_storage_mem_env). *out holds one reference. */
int mcdc_storage_mem_create(mcdc_storage_mem **out, const char *name, mcdc_error *err);
/* Drops the caller's reference; the store lives on while storages opened on
 * it do. NULL-safe. */
void mcdc_storage_mem_release(mcdc_storage_mem *m);
const char *mcdc_storage_mem_name(const mcdc_storage_mem *m);
/* A storage on the store whose keys live under prefix ("" or NULL: the whole
 * store; "bronze" puts key k at "bronze/k"). Its root reads
 * "mem://<name>[/<prefix>]". */
int mcdc_storage_mem_open(mcdc_storage **out, mcdc_storage_mem *m, const char *prefix,
                          mcdc_error *err);
/* An env resolving mem://<name of m> to m (and nothing else). */
mcdc_storage_env mcdc_storage_mem_env(mcdc_storage_mem *m);

/* Operations, for fault injection and call counts. */
typedef enum mcdc_storage_op {
    MCDC_STORAGE_OP_ANY = 0,
    MCDC_STORAGE_OP_WRITER_OPEN,
    MCDC_STORAGE_OP_WRITE,             /* one part of a writer */
    MCDC_STORAGE_OP_COMMIT_PUT,        /* a writer's commit as put */
    MCDC_STORAGE_OP_COMMIT_PUT_IF_ABSENT,
    MCDC_STORAGE_OP_GET,
    MCDC_STORAGE_OP_GET_RANGE,         /* also size */
    MCDC_STORAGE_OP_LIST,
    MCDC_STORAGE_OP_DELETE,
    MCDC_STORAGE_OP_COUNT_
} mcdc_storage_op;

/* Arms one fault: the nth call from now (1 = the next) of op (or of any op)
 * fails with code (MCDC_E_IO, MCDC_E_NOMEM...) and does nothing. A new call
 * replaces the armed fault; nth <= 0 disarms. Aborts never fail. */
void mcdc_storage_mem_fail_nth(mcdc_storage_mem *m, mcdc_storage_op op, int64_t nth, int code);
/* Whether the fault armed last has fired. */
bool mcdc_storage_mem_fault_fired(const mcdc_storage_mem *m);
/* Calls of op (ANY: all) since the store was created, failed ones included. */
int64_t mcdc_storage_mem_calls(const mcdc_storage_mem *m, mcdc_storage_op op);
/* Loses the last n committed writes after the fact, newest first, as a
 * restored backup would: each key goes back to what it held before that
 * write, or disappears. MCDC_E_INVALID when fewer than n writes are
 * remembered (the last MCDC_STORAGE_MEM_JOURNAL_MAX are). */
int mcdc_storage_mem_lose_last(mcdc_storage_mem *m, int n, mcdc_error *err);
/* Drops the object at key (a full key of the store, prefix included):
 * MCDC_E_NOTFOUND when there is none. Neither counted nor faulted. */
int mcdc_storage_mem_drop(mcdc_storage_mem *m, const char *key, mcdc_error *err);
/* Objects in the store. */
size_t mcdc_storage_mem_count(const mcdc_storage_mem *m);

#endif /* MCDC_STORAGE_H */
