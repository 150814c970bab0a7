/*
 * mcdc_reconcile.h - `mssql-cdc reconcile` (the reference's reconcile,
 * §2.8): proves silver equals its SQL Server table.
 *
 * The pieces, bottom up (mcdc_reconcile_core.c, pure and unit-tested):
 *   hash     one canonical row hash of the captured columns, the same C
 *            function over the rows of either side: each value's canonical
 *            form, binary and equal exactly when its canonical text
 *            (mcdc_value_text.h) is (so an int32 and an int64 of one value,
 *            or a Delta and a TDS decimal, hash alike), NULL apart from
 *            every value, columns in order
 *   buckets  a key's ordinal grid: fine buckets floor(ordinal / width)
 *            (width so that the key's range is about REC_FINE of them), the
 *            two sides' counts merged in order into buckets of bucket_rows
 *            rows of the larger side
 *   verdict  a bucket's status and a key's failure type
 *   keyset   a hash set of encoded keys (silver_key_append's bytes)
 * The job (mcdc_reconcile.c): the reads in the order the reference fixes,
 * Tier 1, IN_FLIGHT, the chunk checks, settling; Tier 2, the row-by-row
 * comparison of buckets (mcdc_reconcile_tier2.c); the report
 * (mcdc_reconcile_report.c).
 */
#ifndef MCDC_RECONCILE_H
#define MCDC_RECONCILE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "mcdc_batch.h"
#include "mcdc_changes.h"
#include "mcdc_context.h"
#include "mcdc_lake.h"
#include "mcdc_options.h"
#include "mcdc_silver.h"
#include "mcdc_util.h"
#include "mssqlcdc.h"

/* About this many fine buckets cover the key's range (both sides' counts
 * come back at this grain and are merged into buckets of bucket_rows): a
 * bucket is never finer than 1/REC_FINE of the range. */
#define REC_FINE 100000
/* Buckets a count may return: the grid over the source's range, and a few
 * beyond it for silver's strays. */
#define REC_BUCKETS_MAX (4 * REC_FINE)
#define REC_BUCKET_ROWS_DEFAULT 1000000
#define REC_SAMPLE_DEFAULT 0.01
/* Ranges a sample of another key is cut into, at most. */
#define REC_RANGES_MAX MCDC_PARTITIONS_MAX
/* Keys the source held twice that a run keeps to decide on (whether they
 * changed in flight): enough to name one that did not. */
#define REC_TWICE_MAX 16
/* settle_seconds: at most a day; the pause between re-checks grows from the
 * first to the last (a re-check reads its buckets' rows again). */
#define REC_SETTLE_SECONDS_MAX 86400
#define REC_SETTLE_PAUSE_FIRST_MS 250
#define REC_SETTLE_PAUSE_MAX_MS 2000

/* Makes room for `need` elements of `elem` bytes in the array *pp holds
 * *cap of (doubling, from 16). */
int rec_grow(void *pp, int64_t *cap, int64_t need, size_t elem, mcdc_error *err);

/* ---- hash ------------------------------------------------------------------- */
typedef struct rec_hash {
    uint64_t a, b;
} rec_hash;
static inline bool rec_hash_eq(rec_hash x, rec_hash y) { return x.a == y.a && x.b == y.b; }
/* 128 bits of n bytes (seeded: a column's hash differs from its text's). */
rec_hash rec_hash_bytes(const void *p, size_t n, uint64_t seed);
/* The row hashes of rows [from, from + n) over the columns cols[0..n_cols)
 * (a NULL column: the side lacks it, every value NULL) into out[0..n). */
int rec_hash_rows(rec_hash *out, const mcdc_column *const *cols, int32_t n_cols, int64_t from,
                  int64_t n, mcdc_error *err);
/* The hash of each cell of row `row` on its own, column k framed as k
 * (so two sides' out[k] are equal exactly when their cells are). */
int rec_hash_cells(rec_hash *out, const mcdc_column *const *cols, int32_t n_cols, int64_t row,
                   mcdc_error *err);
/* Are two present-or-NULL cells equal by their canonical form? */
int rec_cell_eq(bool *eq, const mcdc_column *a, int64_t ra, const mcdc_column *b, int64_t rb,
                mcdc_error *err);

/* ---- buckets ------------------------------------------------------------------ */
static inline int64_t rec_floor_div(int64_t v, int64_t w) {
    int64_t q = v / w;
    return (v % w != 0 && (v < 0) != (w < 0)) ? q - 1 : q;
}
/* The fine width for ordinals [lo, hi]: ceil((hi - lo + 1) / REC_FINE), >= 1. */
int64_t rec_fine_width(int64_t lo, int64_t hi);

__extension__ typedef __int128 rec_i128;
/* One fine bucket's count on one side. */
typedef struct rec_fine {
    int64_t id;
    int64_t rows;
    rec_i128 sum;
} rec_fine;
/* A merged bucket: ordinals [lo, hi) (has_lo false: open below; has_hi
 * false: open above), fine ids [fine_lo, fine_hi). */
typedef struct rec_bucket {
    int64_t fine_lo, fine_hi;
    bool has_lo, has_hi;
    int64_t lo, hi;
    /* The report's bounds, as the reference writes them: every bucket's are
     * its grid bounds fine_lo * width and fine_hi * width, the first's lo
     * and the last's hi too (false: past int64, open). */
    bool rep_has_lo, rep_has_hi;
    int64_t rep_lo, rep_hi;
    int64_t src_rows, sil_rows;
    rec_i128 src_sum, sil_sum;
    bool moved;       /* a key changed in flight falls in it */
    int status;       /* REC_MATCH, ... */
    bool hashed;
    int32_t round;    /* the check its counts and status are of (0: the first) */
} rec_bucket;
enum { REC_MATCH = 0, REC_IN_FLIGHT = 1, REC_MISMATCH = 2 };
/* "MATCH", "IN_FLIGHT", "MISMATCH". */
const char *rec_status_name(int status);
/* Both sides' fine buckets (each sorted by id, ids unique) merged in id
 * order into buckets of at least bucket_rows rows of the larger side (the
 * last may hold fewer); ordinal bounds id * width. The first bucket is read
 * open below and the last open above, so that every key of either side
 * falls in one (rep_*: the bounds the report names). *out owned
 * (mcdc_free); none when both sides are empty. */
int rec_merge_buckets(rec_bucket **out, int64_t *n_out, const rec_fine *src, int64_t n_src,
                      const rec_fine *sil, int64_t n_sil, int64_t width, int64_t bucket_rows,
                      mcdc_error *err);
/* The bucket holding fine id f (buckets sorted), or -1. */
int64_t rec_bucket_of(const rec_bucket *b, int64_t n, int64_t fine);
/* MATCH when both counts and sums are equal, else IN_FLIGHT when moved,
 * else MISMATCH. */
int rec_bucket_status(const rec_bucket *b);
/* A differing key's failure type: in flight wins; else by which side has it. */
mcdc_reconcile_failure rec_key_failure(bool in_source, bool in_silver, bool in_flight);

/* ---- tier 2's entries -------------------------------------------------------------
 * What Tier 2 keeps of a source row: its key's ordinal and its hash, never
 * the row (a bucket's memory is its rows times this, whatever their width). */
typedef struct rec_entry {
    int64_t ord;     /* the key's ordinal; a NULL or other key: its index in a key set */
    int64_t seq;     /* the row's place in the bucket's read */
    rec_hash h;
    int32_t pend;    /* a RECORD_DIFF awaiting its columns: its index, else -1 */
    bool seen;       /* a silver row matched it (or a row before it had its key) */
    bool null_key;   /* an ordinal key that is NULL: not among the ordered ones */
    bool named;      /* the second read has named it */
} rec_entry;
/* Orders e[0..n) by ordinal, then place in the read (NULL keys last, in read
 * order; no sort when they come in order, as a range's read does), marks
 * every row of a key after its first seen (*repeats: how many), and
 * returns how many have an ordinal (they come first). */
int64_t rec_entries_order(rec_entry *e, int64_t n, int64_t *repeats);
/* The first of ordered entries e[0..n_ord) with ordinal v, or -1; *finger
 * (start 0) is where the lookup before ended: lookups in ascending order (a
 * merge of two key-ordered sides) take a step or a few, others bisect. */
int64_t rec_entries_find(const rec_entry *e, int64_t n_ord, int64_t *finger, int64_t v);

/* The sample: ceil(fraction * n) distinct indices of [0, n), sorted, drawn
 * by a generator seeded with seed. *out owned; *k their count. */
int rec_sample(int64_t **out, int64_t *k, int64_t n, double fraction, uint64_t seed,
               mcdc_error *err);

__extension__ typedef unsigned __int128 rec_u128;
static inline rec_i128 rec_i128_of(uint64_t lo, int64_t hi) {
    return (rec_i128)(((rec_u128)(uint64_t)hi << 64) | lo);
}
/* A decimal(38,0) of v as the batch stores it. */
static inline void rec_i128_parts(rec_i128 v, uint64_t *lo, int64_t *hi) {
    *lo = (uint64_t)v;
    *hi = (int64_t)(v >> 64);
}

/* ---- keyset ---------------------------------------------------------------------- */
/* A set of byte strings (encoded keys) with a value per key. */
typedef struct rec_keyset {
    mcdc_buf bytes;      /* the keys, back to back */
    int64_t *off;        /* key i: bytes [off[i], off[i + 1]) */
    int64_t *val;        /* per key */
    int64_t n, cap;
    int64_t *slots;      /* open addressing: key index + 1, 0 empty */
    int64_t n_slots;     /* a power of two */
} rec_keyset;
/* Adds key (if new) and returns its index in *idx; *added: it was new. */
int rec_keyset_add(rec_keyset *s, const uint8_t *key, size_t n, int64_t *idx, bool *added,
                   mcdc_error *err);
/* The key's index, or -1. */
int64_t rec_keyset_find(const rec_keyset *s, const uint8_t *key, size_t n);
void rec_keyset_clear(rec_keyset *s);


/* ---- what is in flight (mcdc_reconcile_flight.c) ------------------------------------- */
/* A changed key's ordinal when it has none (a NULL key, or not an ordinal
 * key: in no bucket). */
#define REC_NO_ORDINAL INT64_MIN

/* The change tables past bronze's position, read as the stream reads them:
 * every capture instance of the table it could still read (a follow handle
 * opened on the first read, kept for the run). */
typedef struct rec_flight {
    mcdc_opts *opts;        /* the stream's, owned: the follow handle's */
    mcdc_changes *follow;   /* NULL until the first read, or when unusable */
    bool unusable;          /* it cannot be opened: the configured instance alone */
    silver_instances names; /* bronze's, owned: the table when the configured one is gone */
} rec_flight;
/* The change rows of (after, upper] to fn: the pieces the stream's cut
 * gives after `after` (the older instance up to the newer one's start S - 1,
 * the newer one from S; none older than read_ci, the instance bronze's
 * position records, NULL: none), each from its instance's min_lsn at the
 * lowest. An instance dropped meanwhile is left out; a type the stream
 * cannot hold, or no follow handle: configured's instance alone. */
int rec_flight_read(rec_flight *f, const mcdc_opts *opts, mcdc_changes *configured,
                    const mcdc_lsn *after, const mcdc_lsn *upper, const char *read_ci,
                    mcdc_batch_fn fn, void *ctx, mcdc_error *err);
void rec_flight_close(rec_flight *f);

/* Bronze's rows of columns cols[0..n) whose _start_lsn may be at or past
 * lo (files pruned by it; rows below it may come too) to fn. */
int rec_bronze_from(mcdc_table *bronze, const char *const *cols, int32_t n, const char *lo,
                    mcdc_batch_fn fn, void *ctx, mcdc_error *err);

/* The keys of the repairs apply has not taken: a 'repair' facts row of
 * bronze that the facts version silver's last apply pass (at or below the
 * version compared) read did not hold (docs/repair.md). */
typedef struct rec_pending {
    rec_keyset keys;        /* encoded keys; val: the ordinal (REC_NO_ORDINAL: none) */
    int32_t *run;           /* per key: its repair's index in run_ids */
    char **run_ids;         /* the pending repairs' run ids, owned */
    char (*stamps)[23];     /* and their stamps L */
    int32_t n_runs;
} rec_pending;
/* Loads p (cleared first) from the facts (their target bronze_name, as
 * given), silver's apply commits and bronze's repair rows; keys: the key
 * columns, ordinal: one integer or date key (its ordinals kept). */
int rec_pending_load(rec_pending *p, mcdc_table *silver, int64_t version, mcdc_table *facts,
                     mcdc_table *bronze, const char *bronze_name, const char *const *keys,
                     int32_t n_keys, bool ordinal, mcdc_error *err);
/* The run id of the pending repair of an encoded key, or NULL. */
const char *rec_pending_find(const rec_pending *p, const uint8_t *key, size_t n);
void rec_pending_clear(rec_pending *p);

/* ---- for repair (mcdc_repair.c) ----------------------------------------------------
 * After mcdc_reconcile_run: the key columns the run compared on (the
 * configured ones, else the capture instance's unique index), in the order
 * the diffs' key JSON objects name them; borrowed until the handle is
 * freed. The keys that differ are the result's diffs. */
const char *const *mcdc_reconcile_keys(const mcdc_reconcile *r, int32_t *n);

/* reconcile --repair (mcdc_reconcile_repair.c): the keys diffs[0..n)
 * repaired under run_id after the run's report. *repaired: res holds the
 * repair's result (false, res untouched, when n is 0). */
int rec_repair_diffs(const mcdc_ctx *ctx, const mcdc_opts *opts, const mcdc_reconcile_cfg *cfg,
                     const char *run_id, const mcdc_reconcile_diff *diffs, int64_t n,
                     bool *repaired, mcdc_repair_result *res, mcdc_error *err);
/* Before a --repair run reads anything (needs the report and facts
 * tables): the repairs of earlier runs of the report that did not finish
 * (a run killed after its report commit, before its repair's bronze
 * commit or its facts row) completed under their run ids, with the keys
 * their reports name, so that they are pending apply when the run compares.
 * *completed: res holds the last one's result. */
int rec_repair_unfinished(const mcdc_ctx *ctx, const mcdc_opts *opts,
                          const mcdc_reconcile_cfg *cfg, const char *run_id, bool *completed,
                          mcdc_repair_result *res, mcdc_error *err);

/* ---- chunk checks ------------------------------------------------------------------ */
/* A 'snapshot_chunk' facts row of the snapshot checked, its bounds whole. */
typedef struct rec_chunk {
    int64_t chunk;
    char *lo, *hi;       /* JSON, borrowed; NULL: open */
    bool last;           /* the plan's final chunk */
    int64_t rows;        /* the facts row's count */
    char lsn[24];        /* the facts row's min_lsn (its stamp); "" when NULL */
} rec_chunk;
/* What bronze holds of one chunk of the snapshot. */
typedef struct rec_held {
    int64_t chunk;
    int64_t rows;
    char low[24];        /* the lowest _start_lsn; "" when none */
} rec_held;
/* One chunk failure: type, chunk, its bounds (borrowed from the rec_chunk,
 * NULL when there is none) and detail JSON (owned). */
typedef struct rec_chunk_failure {
    mcdc_reconcile_failure type;
    int64_t chunk;
    const char *lo, *hi;
    char *detail;
} rec_chunk_failure;
/* The failures of the chunks `found` (any order, duplicates kept) of the
 * snapshot at s against `held` (sorted by chunk): CHUNK_TILING for a chunk
 * index missing or twice, a first chunk not open below, one not starting
 * where the one before ended (or following the plan's final one), the last
 * of a complete snapshot not the plan's final; CHUNK_ROWS for a facts
 * count other than bronze's (and, once complete, bronze rows of a chunk no
 * facts row names); CHUNK_STAMP for a stamp below s. *out owned
 * (rec_chunk_failures_free). */
int rec_tiling_failures(rec_chunk_failure **out, int64_t *n_out, const char *s, bool complete,
                        const rec_chunk *found, int64_t n_found, const rec_held *held,
                        int64_t n_held, mcdc_error *err);
void rec_chunk_failures_free(rec_chunk_failure *v, int64_t n);

/* ---- the job (mcdc_reconcile.c, mcdc_reconcile_tier2.c, mcdc_reconcile_report.c) --------- */
/* A key that differs in Tier 2 (or a chunk failure). */
typedef struct rec_diff {
    mcdc_reconcile_failure failure; /* before IN_FLIGHT is decided */
    int64_t bucket;                 /* its bucket's (or range's) index */
    char *key_json;                 /* owned */
    int64_t key_off, key_len;       /* its encoded key in r->diff_keys */
    char *detail;                   /* owned JSON */
    bool chunk;                     /* a chunk row: bounds in lo/hi */
    char *lo, *hi;                  /* chunk rows: owned JSON, NULL: open */
    int32_t round;                  /* the check that found it */
} rec_diff;

/* What one check read: the first (Tier 1's counts, Tier 2's rows) and each
 * re-check of what was in flight (settle_seconds). A report row names the
 * reads of the check it is of. */
typedef struct rec_round {
    int64_t version;                /* silver's, pinned */
    bool has_e;
    char silver_lsn[24];            /* E */
    char bucket_lsn[24];            /* bucket rows' source_lsn: M (the first), M' (a re-check) */
    char read_lsn[24];              /* key rows': M', before the rows */
} rec_round;

/* A key the source held twice in one read: refused (not unique) unless it
 * changed in flight, which a read under READ COMMITTED may see twice. */
typedef struct rec_twice {
    bool ordinal;                   /* ord holds it; else its encoded key */
    int64_t ord;
    int64_t key_off, key_len;       /* in the holder's twice_keys */
    char *json;                     /* owned: the key object */
} rec_twice;

/* The job's handle (mssqlcdc.h's mcdc_reconcile): its config, and what one
 * run reads, finds and reports. */
struct mcdc_reconcile {
    mcdc_reconcile_cfg cfg;
    char **strings;
    int n_strings;
    char **keys;
    int32_t n_keys;
    const mcdc_opts *opts;
    mcdc_ctx ctx;
    mcdc_log_sink sink;
    /* the run */
    mcdc_table *silver, *bronze, *control, *facts, *report;
    mcdc_changes *changes;
    rec_flight flight;           /* the change tables past bronze's position */
    rec_pending pending;         /* the repairs apply has not taken */
    mcdc_table_view *sview;
    int64_t version;
    mcdc_schema *out_schema;     /* the source's output schema (borrowed from changes) */
    int32_t first_captured;      /* its first captured column */
    int32_t n_cols;              /* captured columns compared */
    const char **col_names;      /* owned array, borrowed names */
    int32_t key_in_cols[SILVER_KEYS_MAX]; /* each key's index among the compared columns */
    bool ordinal;                /* one integer or date key */
    bool date_key;
    bool has_e;
    uint8_t e_lsn[10];
    char silver_lsn[24], source_lsn[24], read_lsn[24];
    /* tier 1 */
    rec_bucket *buckets;
    int64_t n_buckets;
    int64_t width;
    json_t *ranges;              /* other keys: the ranges Tier 2 samples */
    json_t *range_keys;          /* and the columns their bounds are of (the snapshot's keys) */
    int64_t *chosen;
    int64_t n_chosen;
    /* tier 2 */
    rec_diff *diffs;
    int64_t n_diffs, cap_diffs;
    mcdc_buf diff_keys;
    int64_t keys_equal;          /* keys Tier 2 found equal, every check */
    rec_twice twice[REC_TWICE_MAX]; /* keys the source held twice */
    int32_t n_twice;
    mcdc_buf twice_keys;
    /* the checks: the first, then the re-checks of what was in flight */
    rec_round *rounds;
    int64_t n_rounds, cap_rounds;
    int32_t round;               /* the check under way */
    /* the result's list */
    mcdc_reconcile_diff *out_diffs;
    int64_t n_out_diffs;
    mcdc_reconcile_result res;
    int64_t run_at_us;
};

/* The older of LSN text a (NULL or unparsable: zero) and b (NULL: a's), into out. */
void rec_lsn_min(uint8_t out[10], const char *a, const uint8_t *b);
/* The field of s named name (exactly, else ignoring case), or -1. */
int rec_col_index(const mcdc_schema *s, const char *name);
/* An ordinal bound as JSON text into *out (owned; NULL: open, or !has). */
int rec_bound_json(char **out, const mcdc_reconcile *r, bool has, int64_t v, mcdc_error *err);
/* Appends *d to r's diffs, which own its strings once it returns MCDC_OK. */
int rec_add_diff(mcdc_reconcile *r, rec_diff *d, mcdc_error *err);
/* The keys changed after lower (bronze's, then the change tables') into set. */
int rec_moved_keys(mcdc_reconcile *r, const uint8_t lower[10], rec_keyset *set, mcdc_error *err);

/* Tier 2 over the buckets (other keys: ranges) list[0..n), the keys in flight left in *moved. */
int rec_compare_buckets(mcdc_reconcile *r, const int64_t *list, int64_t n, bool counts,
                        bool need_moved, rec_keyset *moved, mcdc_error *err);
/* Tier 2 of the run's first check: the buckets Tier 1 chose. */
int rec_tier2(mcdc_reconcile *r, rec_keyset *moved, mcdc_error *err);
/* Frees the keys the source held twice that the run kept. */
void rec_twice_clear(mcdc_reconcile *r);

/* The report's rows, every bucket then every diff, into *out (owned). */
int rec_build_report(mcdc_reconcile *r, mcdc_batch **out, mcdc_error *err);
/* Commits rows b to the report table once (a job of one unit on the frame). */
int rec_write_report(mcdc_reconcile *r, const mcdc_batch *b, mcdc_error *err);

#endif /* MCDC_RECONCILE_H */
