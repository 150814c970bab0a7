/*
 * mcdc_delta_internal.h - shared by the files of the delta module (and its
 * tests and fuzzer); not part of the module's interface.
 */
#ifndef MCDC_DELTA_INTERNAL_H
#define MCDC_DELTA_INTERNAL_H

#include <jansson.h>

#include "mcdc_delta.h"

#define MCDC_DELTA_LOG_DIR "_delta_log"

typedef struct delta_txn {
    char *app_id; /* owned */
    int64_t version;
    int64_t last_updated_ms; /* -1 when absent */
} delta_txn;

typedef struct delta_domain {
    char *domain;        /* owned */
    char *configuration; /* owned */
    bool removed;
} delta_domain;

/* The actions of one commit file, in file order per kind. */
typedef struct mcdc_delta_actions {
    json_t *protocol;    /* owned reference, NULL when absent */
    json_t *metadata;    /* owned reference, NULL when absent */
    json_t *commit_info; /* owned reference, NULL when absent */
    mcdc_delta_file *adds;
    size_t n_adds;
    mcdc_delta_file *removes;
    size_t n_removes;
    delta_txn *txns;
    size_t n_txns;
    delta_domain *domains;
    size_t n_domains;
    size_t n_unknown;    /* unknown actions, ignored per the spec */
    char **sidecars;     /* V2 checkpoint sidecar paths (owned) */
    size_t n_sidecars;
} mcdc_delta_actions;

/* A complete checkpoint found by listing _delta_log. */
typedef struct delta_checkpoint_ref {
    int64_t version;
    int32_t n_parts;  /* 1, or the part count of a multi-part checkpoint */
    char uuid[64];    /* V2 UUID-named checkpoint, "" for classic */
    bool is_json;     /* V2 JSON checkpoint */
    int64_t bytes;    /* the listed size of a single-file checkpoint; -1 unknown */
} delta_checkpoint_ref;

/* _delta_log/_last_checkpoint: a hint naming the newest checkpoint, written
 * after it (formats.md A8). Only ever a hint: a reader lists the log from its
 * version and uses it only when the listing shows that checkpoint. */
typedef struct delta_last_checkpoint {
    int64_t version;     /* >= 0 */
    int64_t size;        /* actions in the checkpoint; -1 when not given */
    int64_t size_bytes;  /* sizeInBytes; -1 when not given */
    int32_t parts;       /* a multi-part checkpoint's part count; 0 when not given */
} delta_last_checkpoint;

/* Parses and proves the hint's content (fuzzed): a JSON object whose
 * "version" is an integer >= 0 and whose "size", "sizeInBytes",
 * "numOfAddFiles" (at most size) and "parts" (>= 1), when given, are
 * integers in range. Anything else is MCDC_E_CORRUPT saying what. */
int mcdc_delta__last_checkpoint_parse(delta_last_checkpoint *out, const void *data, size_t len,
                                      mcdc_error *err);
/* Reads and parses the table's hint: MCDC_E_NOTFOUND when there is none,
 * MCDC_E_CORRUPT when it is unusable, or the storage's error. */
int mcdc_delta__last_checkpoint_read(delta_last_checkpoint *out, mcdc_storage *st,
                                     mcdc_error *err);

/* Reads a checkpoint into the action lists a commit would give (MCDC_E_CORRUPT
 * / MCDC_E_UNSUPPORTED for sidecars, naming the file). */
/* Appends the actions of one checkpoint Parquet file held in memory (fuzzed). */
int mcdc_delta__checkpoint_parse(mcdc_delta_actions *out, const void *data, size_t len,
                                 const char *label, mcdc_error *err);
int mcdc_delta__read_checkpoint(mcdc_delta_actions *out, mcdc_storage *st,
                                const delta_checkpoint_ref *cp, mcdc_error *err);

/* Parses a newline-delimited commit file. label names it in messages
 * ("_delta_log/00000000000000000007.json"). Errors: MCDC_E_CORRUPT with
 * the line number. */
int mcdc_delta_actions_parse(mcdc_delta_actions *out, const char *data, size_t n,
                             const char *label, mcdc_error *err);
void mcdc_delta_actions_clear(mcdc_delta_actions *a);
/* Frees the strings of a file action produced by the parser. */
void mcdc_delta__file_free_strings(mcdc_delta_file *f);

/* "_delta_log/%020lld.json" into out (64 bytes). */
void mcdc_delta__commit_key(int64_t version, char out[64]);
/* Reads commit `version`: MCDC_E_NOTFOUND when it does not exist. */
int mcdc_delta__read_commit(mcdc_delta_actions *out, mcdc_storage *st, int64_t version,
                            mcdc_error *err);

/* Protocol checks. write: also the writer side. */
int mcdc_delta__check_protocol(const json_t *protocol, const json_t *metadata, bool write,
                               const char *where, mcdc_error *err);

/* URI escaping of add/remove paths (RFC 2396, '/' kept). Owned results. */
char *mcdc_delta__path_escape(const char *path);
char *mcdc_delta__path_unescape(const char *s);

/* True when s (NULL counts as valid) is well-formed UTF-8 as jansson wants
 * it: a failed json_string of a valid string means out of memory. */
bool mcdc_delta__utf8_ok(const char *s);
/* MCDC_E_INVALID naming `what` when a string is not UTF-8, else NOMEM. */
int mcdc_delta__json_fail(mcdc_error *err, bool utf8_ok, const char *what);

/* Random version 4 UUID, 36 chars + NUL. */
void mcdc_delta__uuid(char out[37]);

/* Snapshot internals used by commit.c. */
int mcdc_delta__snapshot_new(mcdc_delta_snapshot **out, mcdc_error *err);
int mcdc_delta__snapshot_apply(mcdc_delta_snapshot *s, const mcdc_delta_actions *a,
                               int64_t version, mcdc_error *err);
/* Rebuilds s's live-file order after mcdc_delta__snapshot_apply (which
 * leaves it stale) and checks the protocol; a no-op when nothing was applied.
 * Every reader of a snapshot's files needs it settled (asserted). */
int mcdc_delta__snapshot_settle(mcdc_delta_snapshot *s, const char *root, mcdc_error *err);
/* Brings s up to the latest version (reading only newer commits). */
int mcdc_delta__snapshot_refresh(mcdc_delta_snapshot *s, mcdc_storage *st, mcdc_error *err);
/* Applies the commit whose bytes (data, n) were just published as version
 * s->version + 1 by this process, without reading it from the store. */
int mcdc_delta__snapshot_apply_own(mcdc_delta_snapshot *s, const char *data, size_t n,
                                   const char *root, mcdc_error *err);
const json_t *mcdc_delta__snapshot_protocol_json(const mcdc_delta_snapshot *s);
const json_t *mcdc_delta__snapshot_metadata_json(const mcdc_delta_snapshot *s);
size_t mcdc_delta__snapshot_txn_count(const mcdc_delta_snapshot *s);
void mcdc_delta__snapshot_txn(const mcdc_delta_snapshot *s, size_t i, const char **app_id,
                              int64_t *version, int64_t *last_updated_ms);
size_t mcdc_delta__snapshot_domain_count(const mcdc_delta_snapshot *s);
void mcdc_delta__snapshot_domain_at(const mcdc_delta_snapshot *s, size_t i, const char **domain,
                                    const char **configuration, bool *removed);

/* Field-by-field schema comparison: every field of `want` present in `have`
 * with the same type (fixed binary == binary) and nullability. */
bool mcdc_delta__schema_contains(const mcdc_schema *have, const mcdc_schema *want,
                                 char *why, size_t why_len);

struct mcdc_delta_table {
    mcdc_storage *storage;        /* owned */
    mcdc_delta_snapshot *latest;  /* cached, refreshed incrementally; NULL */
    /* mcdc_delta_table_keep_snapshot: once loaded, latest is brought
     * forward only by this handle's own commits and by the winners a lost
     * commit race reads, never re-checked against the log before a read or
     * a commit. */
    bool keep_snapshot;
    /* For a keeper: the log was found empty (no table yet); until its own
     * create, reads say so without listing the log again */
    bool known_absent;
    /* For a keeper: the version of the _last_checkpoint it wrote last */
    bool last_checkpoint_known;
    int64_t last_checkpoint;
};

#endif /* MCDC_DELTA_INTERNAL_H */
