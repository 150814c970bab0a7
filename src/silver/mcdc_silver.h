/*
 * mcdc_silver.h - silver: the current state of a source table, kept from
 * bronze by `mssql-cdc apply` (the reference's apply_changes, §2.7), and
 * the copy-on-write merge engine it writes with.
 *
 * The pieces, bottom up:
 *   keys    a key tuple as memcmp-ordered bytes (NULL first; NULLs equal:
 *           the reference's null-safe <=>), its 64-bit hash, a bloom filter
 *   rank    a change row's place in commit order, (_start_lsn, _command_id,
 *           _seqval, _operation), as bytes, and the rules that turn the
 *           latest row of a key into a delete, an upsert or nothing
 *   sorter  rows sorted by key (spilled to runs when they pass a memory
 *           budget), the best-ranked row of each key or every row
 *   index   per data file of silver: its rows, exact first and last key,
 *           whether its rows are in key order, and for files another writer
 *           added a bloom filter of its keys; kept next to the table
 *           (_mssql_cdc_index/), keyed by file path: data files never
 *           change, so an entry stays true while its file is live,
 *           whatever else is committed (a file it does not know is read)
 *   merge   the rows of a change set merged into silver: only the files
 *           whose key range a change falls in (or that may hold one, for
 *           files in no order) are read and rewritten, in key order, as
 *           files of about one target size; one commit adds and removes
 *   apply   the job: what bronze holds beyond silver's position, ranked,
 *           merged, then the position and the verdict (mcdc_silver_apply.c)
 */
#ifndef MCDC_SILVER_H
#define MCDC_SILVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "mcdc_batch.h"
#include "mcdc_changes.h"
#include "mcdc_context.h"
#include "mcdc_lake.h"
#include "mcdc_storage.h"
#include "mcdc_util.h"

/* ---- limits ------------------------------------------------------------------
 * A silver file holds about this many rows (and at most this many bytes of
 * batches) before the merge starts the next: large enough that a table of
 * tens of millions of rows is a few dozen files, small enough that one
 * change rewrites a bounded amount. Files under a quarter of it are small:
 * the merge folds them into a neighbour it rewrites. */
#define SILVER_FILE_ROWS_DEFAULT (1024 * 1024)
#define SILVER_FILE_BYTES_MAX (96LL * 1024 * 1024)
/* The sorter's in-memory run before it spills (rows, their keys and sort
 * entries, as allocated). The rest of the budget of a merge: one batch of
 * each input, the output window and the Parquet writer's row group.
 * Measured on bench-silver's rows: once changes spill, a larger budget is
 * no faster (1M changes: 0.97 s in 64 MB, 1.0 s in 128 MB), only one that
 * holds them all is (0.80 s in 256 MB, RSS 375 MB against 217 MB); 64 MB
 * keeps 6M changes near 300 MB of RSS. */
#define SILVER_SORT_BYTES_DEFAULT (64LL * 1024 * 1024)
#define SILVER_SORT_BYTES_MIN (1LL * 1024 * 1024)
/* Spilled runs read at once (each holds one batch while read): when the
 * runs reach it, the newest are merged into one, so spilling goes on to any
 * number of rows. */
#define SILVER_RUNS_MAX 64
/* Rows a batch of the sorter's output, the merge's window. */
#define SILVER_BATCH_ROWS 65536
/* A key of more than this many bytes (its columns encoded) is refused: a
 * SQL Server index key is at most 1700 bytes, snapshotKeys a few columns. */
#define SILVER_KEY_BYTES_MAX (64 * 1024)
/* Key columns (SQL Server allows 32 in an index). */
#define SILVER_KEYS_MAX 32
/* The index: its entries (files) and its size. */
#define SILVER_INDEX_FILES_MAX (1 << 22)
#define SILVER_INDEX_BYTES_MAX (1LL << 31)
/* Bloom filters: 10 bits a key, 7 probes: about 1% false positives. */
#define SILVER_BLOOM_BITS_PER_KEY 10
#define SILVER_BLOOM_PROBES 7
/* Capture instances one bronze table's rows may name: a stream follows its
 * table's (SQL Server keeps two at a time), switch after switch. */
#define SILVER_INSTANCES_MAX 64

/* ---- keys ---------------------------------------------------------------------- */

/* Can a column of type t be (part of) a silver key? Every flat type can. */
bool silver_key_type_ok(mcdc_type_id t);
/* Appends the key of row `row` of the columns cols[0..n) to out: per column
 * 0x00 for NULL, else 0x01 and an order-preserving encoding (integers,
 * dates, times and decimals big-endian with the sign bit flipped; floats
 * by their bits, -0 as 0, one NaN; text and binary with 0x00 escaped as
 * 0x00 0xFF and ended by 0x00 0x00). memcmp of two encodings orders the
 * tuples (NULL first), and they are equal exactly when the tuples are
 * equal null-safely. MCDC_E_LIMIT past SILVER_KEY_BYTES_MAX. */
int silver_key_append(mcdc_buf *out, const mcdc_column *const *cols, int32_t n, int64_t row,
                      mcdc_error *err);
/* The keys of rows [from, from + rows) at once (off[i]: where row from + i's
 * key starts in out, off[rows] the end); the same bytes as
 * silver_key_append, faster for one integer column. */
int silver_keys_append(mcdc_buf *out, size_t *off, const mcdc_column *const *cols, int32_t n,
                       int64_t from, int64_t rows, mcdc_error *err);
uint64_t silver_hash(const void *p, size_t n);
/* Appends row `row` of the columns cols[0..n) as people read a key in a
 * message: each value's canonical text (NULL as NULL), ", " between them,
 * a value cut at 64 bytes. */
void silver_key_text(mcdc_buf *out, const mcdc_column *const *cols, int32_t n, int64_t row);
/* Are two cells equal (NULL equals NULL; floats by their bits)? Columns
 * of one type. */
bool silver_value_eq(const mcdc_column *a, int64_t ra, const mcdc_column *b, int64_t rb);
/* a <=> b of two encodings: memcmp, then the shorter first. */
int silver_key_cmp(const uint8_t *a, size_t na, const uint8_t *b, size_t nb);
/* The first 8 bytes at p as a big-endian word: words compare as memcmp
 * compares their bytes. */
static inline uint64_t silver_be64_at(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return __builtin_bswap64(w);
}
/* The order of silver_key_cmp (its sign), for the hot loops: keys are short
 * (one integer column: 9 bytes, 19 with a rank), so a word at a time and a
 * short tail beat a call to memcmp. */
static inline int silver_key_cmp_fast(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    size_t n = na < nb ? na : nb, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x = silver_be64_at(a + i), y = silver_be64_at(b + i);
        if (x != y) return x < y ? -1 : 1;
    }
    for (; i < n; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return na < nb ? -1 : na > nb;
}

/* The sign of memcmp(a, b, 10) of two LSNs (10 big-endian bytes) and of
 * memcmp(a, b, 22) of two LSN texts ("0x" and 20 hex digits), for the
 * per-row loops: a row's LSN is compared a few times, and a call to memcmp
 * for each cost more than the rest of its pick. The text's third word
 * overlaps the second (bytes 14-21): they are equal where they overlap. */
static inline int silver_lsn10_cmp(const uint8_t *a, const uint8_t *b) {
    uint64_t x = silver_be64_at(a), y = silver_be64_at(b);
    if (x != y) return x < y ? -1 : 1;
    unsigned xl = (unsigned)a[8] << 8 | a[9], yl = (unsigned)b[8] << 8 | b[9];
    return (xl > yl) - (xl < yl);
}
static inline int silver_lsn_text_cmp(const void *a, const void *b) {
    const uint8_t *x = a, *y = b;
    static const int at[3] = {0, 8, 14};
    for (int i = 0; i < 3; i++) {
        uint64_t u = silver_be64_at(x + at[i]), v = silver_be64_at(y + at[i]);
        if (u != v) return u < v ? -1 : 1;
    }
    return 0;
}
static inline bool silver_lsn_text_eq(const void *a, const void *b) {
    uint64_t x[3], y[3];
    memcpy(&x[0], a, 8), memcpy(&x[1], (const uint8_t *)a + 8, 8), memcpy(&x[2], (const uint8_t *)a + 14, 8);
    memcpy(&y[0], b, 8), memcpy(&y[1], (const uint8_t *)b + 8, 8), memcpy(&y[2], (const uint8_t *)b + 14, 8);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2])) == 0;
}

/* ---- rank ----------------------------------------------------------------------
 * A row's rank as bytes, memcmp-ordered as the reference orders rows of one
 * key: _start_lsn, then _command_id (NULL lowest), _seqval (NULL lowest),
 * _operation. The latest row is the greatest. */
#define SILVER_RANK_BYTES 27
typedef struct silver_rank {
    uint8_t b[SILVER_RANK_BYTES];
} silver_rank;
/* lsn: "0x" + 20 hex digits (as bronze stores it; other text is
 * MCDC_E_CORRUPT naming it); seqval NULL when absent (seq_len ignored). */
int silver_rank_make(silver_rank *out, const char *lsn, size_t lsn_len, bool has_cmd,
                     int32_t cmd, const char *seqval, size_t seq_len, int32_t op,
                     mcdc_error *err);
/* The synthetic delete a chunk range makes: at stamp, no command id or
 * seqval, operation 1. */
void silver_rank_delete_at(silver_rank *out, const uint8_t stamp[10]);
static inline int silver_rank_op(const silver_rank *r) { return r->b[SILVER_RANK_BYTES - 1]; }
/* Operations 1 (delete) and 3 (the row before an update, latest only when
 * the update moved the row to another key) remove the key; 0, 2, 4 set it. */
static inline bool silver_op_deletes(int op) { return op == 1 || op == 3; }
/* Parses "0x" + 20 hex digits into 10 bytes; false for anything else. */
bool silver_lsn_parse(uint8_t out[10], const char *text, size_t len);
void silver_lsn_format(char out[23], const uint8_t lsn[10]);

/* What the merge does to an existing silver row given the winning change
 * of its key (NULL: none): the reference's whenMatched clauses, a change
 * newer than the row's own _start_lsn (NULL: never newer) deleting or
 * updating it; no change keeps it, unless the merge rebuilds (then a row
 * no change names is deleted: whenNotMatchedBySourceDelete). A repair
 * winner (silver_rank_is_repair) also replaces a row of its own LSN or of
 * none: it was read from the source after L, so it is what the row must
 * be unless a later change says otherwise. */
typedef enum { SILVER_KEEP = 0, SILVER_DELETE, SILVER_UPDATE } silver_action;
silver_action silver_decide(const silver_rank *winner, bool has_row_lsn,
                            const uint8_t row_lsn[10], bool rebuild);
/* A change of a key silver does not hold is inserted unless it deletes. */
static inline bool silver_inserts(const silver_rank *winner) {
    return !silver_op_deletes(silver_rank_op(winner));
}

/* Tags of a change row: which part of the selection it comes from. A key
 * whose rows carry neither BASE nor WAVE is not applied (its LATER rows
 * only rank against a chunk's rows). */
#define SILVER_TAG_BASE 1u  /* a change (or rebuild row) past the position */
#define SILVER_TAG_WAVE 2u  /* a row of a chunk the open snapshot announced since */
#define SILVER_TAG_LATER 4u /* a later change, applied or not, of a chunk's or a repair's key */
#define SILVER_TAG_REPAIR 8u /* a row of a repair recorded since the last pass (docs/repair.md) */

/* ---- repairs (docs/repair.md) ----------------------------------------------------
 * `mssql-cdc repair` appends to bronze the current source row of each key
 * that differs (operation 4) or a delete (1) for a key the source lacks,
 * all stamped with one LSN L taken before the read, _seqval, _command_id
 * and _batch_id NULL (no change row has a NULL _seqval: that marks them),
 * and records a facts row of event 'repair'. Apply ranks a repair row
 * above every change at or below L (as if it were L's last command) and
 * lets it replace a silver row whose image is not newer than L. */
#define SILVER_REPAIR_EVENT "repair"
/* The rank columns apply gives a repair row: the largest command id and
 * seqval, so that it outranks every change of its LSN. */
#define SILVER_REPAIR_COMMAND_ID 2147483647
#define SILVER_REPAIR_SEQVAL "0xFFFFFFFFFFFFFFFFFFFF"
/* Is this rank a repair row's (the command id and seqval above)? */
bool silver_rank_is_repair(const silver_rank *r);

/* A chunk range [lo, hi) of a single integer, date or timestamp key (as
 * int64: the integer, days, microseconds), read at stamp: silver rows of a
 * key in it that the chunk lacks, older than the stamp, are deleted. */
typedef struct silver_range {
    bool has_lo, has_hi; /* false: open */
    int64_t lo, hi;
    uint8_t stamp[10];
} silver_range;
/* The range holding v among ranges sorted by lo (they tile: at most one),
 * or NULL. */
const silver_range *silver_range_find(const silver_range *r, int32_t n, int64_t v);
/* A key column's value as the int64 ranges use; false for NULL or a type
 * ranges do not take. */
bool silver_range_value(const mcdc_column *c, int64_t row, int64_t *v);

/* ---- the source of a bronze table (mcdc_silver_source.c) ---------------------------
 * apply, reconcile and repair open the stream's source options. The
 * configured capture instance may be gone (disabled after a switch to a
 * newer one of its table, docs/schema-changes.md): the instances bronze's
 * rows name still give the table, and its instance that reads now is read. */
typedef struct silver_instances {
    char **names;         /* n, owned: newest first (by their rows' largest _start_lsn) */
    uint8_t (*newest)[10];
    int32_t n;
} silver_instances;
/* The capture instances bronze's rows name (none: no bronze, or no rows).
 * A file of one instance's rows is known by its statistics, not read. */
int silver_bronze_instances(silver_instances *out, mcdc_table *bronze, const char *bronze_name,
                            mcdc_error *err);
void silver_instances_free(silver_instances *x);
/* mcdc_changes_open of opts, names (may be NULL) the ones to resolve the
 * table through when captureInstance is gone; follow: the stream's follow
 * mode (every instance of the table). MCDC_E_SCHEMA: names named some and
 * the table has no capture instance any more. */
int silver_source_open(mcdc_changes **out, const mcdc_opts *opts, const silver_instances *names,
                       bool follow, mcdc_error *err);
/* The source bronze was streamed from, as the options name it: opened
 * through silver_source_open with the capture instances bronze's rows name
 * (*names, filled here: the caller frees it, silver_instances_free, also
 * on an error), so that a configured instance that is gone is followed.
 * Refused with MCDC_E_MISMATCH, before any row is read, when bronze holds
 * rows and none of the instances they name is the one opened, another
 * instance of its table, or its table's default name (<schema>_<table>):
 * bronze (and the silver applied from it) is another table's. `job` names
 * the command for the message ("apply", "reconcile", "repair"). */
int silver_source_open_bronze(mcdc_changes **out, const mcdc_opts *opts, mcdc_table *bronze,
                              const char *bronze_name, const char *job,
                              silver_instances *names, mcdc_error *err);

/* ---- bloom filters ---------------------------------------------------------------- */
typedef struct silver_bloom {
    uint64_t nbits;  /* a multiple of 64 */
    uint64_t *words; /* owned */
} silver_bloom;
/* Sized for n keys, filled from their hashes. */
int silver_bloom_build(silver_bloom *out, const uint64_t *hashes, int64_t n, mcdc_error *err);
bool silver_bloom_may(const silver_bloom *b, uint64_t hash);
void silver_bloom_free(silver_bloom *b);

/* ---- sorter -------------------------------------------------------------------------- */
typedef struct silver_sorter silver_sorter;
typedef struct silver_sorter_cfg {
    mcdc_schema *schema;          /* the rows' (borrowed; a reference is taken) */
    const int32_t *key_cols;      /* the key's columns in schema */
    int32_t n_keys;
    /* Ranked: one row per key, its best by rank (the columns below); else
     * every row, in key order. */
    bool ranked;
    /* Ranked and history: every row of a key, oldest first by rank (SCD
     * type 2: each change makes a version); tags are each row's own. */
    bool history;
    int32_t lsn_col, cmd_col, seq_col, op_col; /* ranked; cmd_col may be -1 */
    /* Ranked: rows are held, spilled and read with their first held_cols
     * columns only (the key's, lsn_col's and op_col's among them); the
     * columns after those only rank, and are dropped once they have.
     * 0: every column. */
    int32_t held_cols;
    /* Ranked: keys whose rows' tags have none of these bits are left out
     * (0: none left out). */
    uint32_t keep_tags;
    /* Ranked: rows that prove the key is not unique are MCDC_E_NOT_UNIQUE
     * (naming the key columns, a value and what to do), found where the
     * sort compares a key's neighbouring rows anyway: two snapshot rows
     * (operation 0, no command id or seqval) of one key at one LSN that no
     * later row of the key outranks (a snapshot reads a row once), and two
     * inserts (operation 2) of one key, in one transaction or two, with
     * nothing of the key between them. Rows a run's cut left out are not
     * compared: two inserts are found among the rows held at once only, and
     * a snapshot tie split over two spilled runs between the rows each run
     * keeps. */
    bool unique_keys;
    /* What the rows held may take: their buffers' capacities, the sort's
     * entries and their scratch, the sort keys. <= 0: SILVER_SORT_BYTES_DEFAULT */
    int64_t memory_bytes;
    int32_t runs_max;             /* runs read at once (merged into one there); <= 0: SILVER_RUNS_MAX */
    mcdc_storage *spill;          /* where runs go (borrowed) */
    const char *spill_prefix;     /* their keys start with it ("_mssql_cdc_spill/<id>-") */
} silver_sorter_cfg;
int silver_sorter_create(silver_sorter **out, const silver_sorter_cfg *cfg, mcdc_error *err);
/* Rows that can be read again: the next batch of the rows added (the
 * sorter's schema, owned by the caller; NULL at their end) and its tags
 * (valid until the next call), the same batches in the same order as they
 * were added; restart: from the first one again. */
typedef int (*silver_replay_fn)(void *ctx, bool restart, mcdc_batch **out, const uint32_t **tags,
                                mcdc_error *err);
/* Before the first row: the rows can be read again through fn, so the
 * sorter holds none. Each row added is only checked to come after the one
 * before in the sorter's order (keys strictly ascending: never assumed),
 * counted and let go: its columns but the key's and the rank's need not be
 * there. A row out of order is MCDC_E_CANCELLED (silver_sorter_replay_broken
 * then true): the sorter is of no more use, the caller sorts without a
 * replay instead. Reading replays the rows, checked again: the same order,
 * count and keys, else MCDC_E_CORRUPT. */
void silver_sorter_set_replay(silver_sorter *s, silver_replay_fn fn, void *ctx);
bool silver_sorter_replay_broken(const silver_sorter *s);
/* The rows are read by replaying them (after finish). */
bool silver_sorter_replays(const silver_sorter *s);
/* Adds the rows of b (the sorter's columns) whose index is in rows[0..n)
 * (rows NULL: all of b), copying them, with their tags (tags[i] for the
 * i-th row added; NULL: none); b stays the caller's. */
int silver_sorter_add(silver_sorter *s, const mcdc_batch *b, const int32_t *rows, int64_t n,
                      const uint32_t *tags, mcdc_error *err);
/* Adds every row of b, taking b itself (no copy; freed with the sorter, or
 * at once on error). A small b (a stream's commit) is copied and freed, so
 * that the batches held stay few whatever the size of bronze's files. */
int silver_sorter_add_owned(silver_sorter *s, mcdc_batch *b, const uint32_t *tags,
                            mcdc_error *err);
/* No more rows: sorts what is held. Then the rows can be read, as often as
 * wanted (silver_sorter_rewind). */
int silver_sorter_finish(silver_sorter *s, mcdc_error *err);
/* Back to the first row; keys_only: the chunks give keys, ranks and tags
 * but no rows (cheaper when runs were spilled). */
int silver_sorter_rewind(silver_sorter *s, bool keys_only, mcdc_error *err);
/* Rows out of the sorter, in key order: a batch (NULL when keys_only) and,
 * per row, its key (key[i], key_len[i] bytes, into the chunk), its rank
 * (ranked sorters) and its key's tags OR'ed. */
typedef struct silver_chunk {
    int64_t n;
    mcdc_batch *rows;
    const uint8_t **key;
    uint32_t *key_len;
    silver_rank *rank;  /* ranked sorters; else NULL */
    uint32_t *tags;
    mcdc_buf bytes;     /* internal: the keys */
} silver_chunk;
/* The next chunk (owned by the sorter until the next call), or NULL at the
 * end. */
int silver_sorter_next(silver_sorter *s, const silver_chunk **out, mcdc_error *err);
/* Deferred rows (after a rewind that is not keys_only, until the next
 * rewind): the chunks come
 * without rows (rows NULL), and silver_sorter_take gathers the rows a
 * caller keeps straight from where they are held, one copy instead of two
 * (the chunk's, then the caller's). */
void silver_sorter_defer_rows(silver_sorter *s, bool defer);
/* Appends rows sel[0..n) of the current chunk to dst: column col_of[j]
 * (NULL: j) of the sorter's schema into dst's column j, for every column of
 * dst. Valid until the next silver_sorter_next. */
int silver_sorter_take(silver_sorter *s, mcdc_batch *dst, const int32_t *col_of,
                       const int32_t *sel, int32_t n, mcdc_error *err);
int64_t silver_sorter_rows(const silver_sorter *s);   /* rows added */
int64_t silver_sorter_runs(const silver_sorter *s);   /* runs spilled */
/* Merges of spilled runs into one, each when the runs reached runs_max:
 * the newest runs of the lowest level become one run of the next (rows cut
 * to a row per key on a ranked sorter). */
int64_t silver_sorter_merges(const silver_sorter *s);
int64_t silver_sorter_held_max(const silver_sorter *s); /* the most memory_bytes held */
/* A ranked sorter's smallest LSN over every row added (cut rows and rows
 * keep_tags drops included: a lower bound of the ranks it returns), kept as
 * rows come; 0xFF... when none came. */
void silver_sorter_min_lsn(const silver_sorter *s, uint8_t out[10]);
/* Deletes the runs it spilled. NULL-safe. */
void silver_sorter_free(silver_sorter *s);

/* ---- index ------------------------------------------------------------------------- */
typedef struct silver_entry {
    char *path;              /* owned: the data file, relative to the table */
    int64_t rows;
    uint8_t *min_key, *max_key; /* owned; NULL when rows == 0 */
    uint32_t min_len, max_len;
    bool sorted;             /* rows in key order (files the merge writes) */
    bool has_min_lsn;        /* min_lsn: the smallest _start_lsn of its rows */
    uint8_t min_lsn[10];
    silver_bloom bloom;      /* nbits 0: none (files in key order need none) */
} silver_entry;
void silver_entry_clear(silver_entry *e);

typedef struct silver_index {
    int32_t n_keys;
    char **key_names;        /* owned */
    mcdc_type_id *key_types;
    int64_t built_at;        /* the table version it was written for */
    silver_entry *entries;   /* owned, sorted by path */
    int64_t n, cap;
} silver_index;
#define SILVER_INDEX_DIR "_mssql_cdc_index/"
/* Serialized form (checked: a length, a checksum; anything wrong is
 * MCDC_E_CORRUPT naming what). */
int silver_index_encode(mcdc_buf *out, const silver_index *ix, mcdc_error *err);
int silver_index_decode(silver_index *out, const uint8_t *p, size_t n, mcdc_error *err);
void silver_index_clear(silver_index *ix);
/* The newest index file of the table under st that was written for keys
 * (names and types); an empty index (n == 0) when there is none, when it
 * is unreadable (a warning) or for other keys. */
int silver_index_load(silver_index *out, mcdc_storage *st, const mcdc_schema *keys,
                      mcdc_error *err);
/* Writes ix as the index of version (and removes index files older than
 * the one before it). */
int silver_index_store(mcdc_storage *st, const silver_index *ix, int64_t version,
                       mcdc_error *err);
/* The entry of path, or NULL. */
const silver_entry *silver_index_find(const silver_index *ix, const char *path);
/* Takes e (moved: *e is cleared). */
int silver_index_add(silver_index *ix, silver_entry *e, mcdc_error *err);
/* Sorts the entries by path (after adds). */
void silver_index_sort(silver_index *ix);

/* ---- repairs in the facts ----------------------------------------------------------- */
typedef struct silver_repairs {
    char **run_ids;     /* owned */
    char (*stamps)[23]; /* each one's LSN L */
    int32_t n;
} silver_repairs;
/* The 'repair' rows of facts for bronze (its target as given) at version
 * (-1: the latest); *version_read the version read (-1: no facts table). */
int silver_repairs_load(silver_repairs *out, mcdc_table *facts, const char *bronze,
                        int64_t version, int64_t *version_read, mcdc_error *err);
bool silver_repairs_has(const silver_repairs *r, const char *run_id);
void silver_repairs_free(silver_repairs *r);

/* ---- SCD type 2 -----------------------------------------------------------------------
 * A history: one row per version of each key, __START_AT and __END_AT the
 * commit times it began and ended at, _end_lsn the LSN it ended at (NULL
 * while open); _start_lsn and _commit_ts are its image's, as in type 1 (the
 * change that opened it, or the last that updated it in place). The merge
 * keys files by the source key alone, a key's versions in one file, in
 * order; the changes come every row of a key, oldest first (a history
 * sorter). Per key: the versions it has are kept, and its changes after
 * the newest LSN they hold (applying from behind changes nothing), in rank
 * order:
 *   upsert   no open version: one opens. A snapshot row (0) equal to the
 *            open version changes nothing. No tracked column differs: the
 *            open version takes the image in place. Else it is closed at
 *            the change and a version opens
 *   delete   the open version is closed at the change
 * A transaction's changes of a key count as its last (one LSN is one
 * version): a delete and an insert of one image in one transaction leave
 * the version open. */
typedef struct silver_scd2 {
    int32_t start_at, end_at, end_lsn;  /* the version's columns in out_schema */
    int32_t commit_ts;                  /* _commit_ts in out_schema */
    int32_t change_ts_col;              /* _commit_ts in the change rows */
    const int32_t *image;               /* out columns of the captured image */
    int32_t n_image;
    const int32_t *tracked;             /* those whose change opens a version */
    int32_t n_tracked;
    /* A rebuild from a snapshot: a key none of its rows names had no row
     * at the snapshot's LSN, its open version is closed there (close: one
     * row, _start_lsn and _commit_ts, the snapshot's LSN and commit time:
     * snapshot rows carry none, this is the best estimate, or NULL; it
     * stands in for theirs, and a NULL end takes the version's image time). */
    const mcdc_batch *close;            /* NULL: none */
    /* A pass that applies waves of an open chunked snapshot: one row per
     * stamp of its new chunks (_start_lsn and _commit_ts, the commit time
     * the stamp maps to, or NULL), sorted by LSN. A chunk row (0, stamped
     * L, no _commit_ts) opens its version at L and that time; a key of a
     * chunk range (ranges) that the chunk lacks had no row at L: its open
     * version is closed there, unless a version of it is at or past L. */
    const mcdc_batch *stamps;           /* NULL: none */
} silver_scd2;
#define SILVER_COL_START_AT "__START_AT"
#define SILVER_COL_END_AT "__END_AT"
#define SILVER_COL_END_LSN "_end_lsn"
/* The table property that says a silver's type: "1" (or none) the current
 * state, "2" a history. */
#define SILVER_PROP_SCD_TYPE "mssql_cdc.scd_type"
/* The table property that makes a type 1 silver merged on read. */
#define SILVER_PROP_DELETION_VECTORS "delta.enableDeletionVectors"

/* ---- the writer: output files encoded on a thread of their own -------------------------
 * (mcdc_silver_writer.c) while a merge goes on: batches and the ends of
 * files, in order, through a queue of a few batches. The paths of the files
 * it ends are collected in order; a merge's index entries (built on the
 * merge's thread) get them at the end. One writer per merge (copy-on-write
 * and merge-on-read). */
#define SILVER_WRITER_QUEUE 2
typedef struct silver_writer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mcdc_batch *q[SILVER_WRITER_QUEUE]; /* NULL: the end of a file */
    int head, n;
    bool done, failed, started;
    int rc;
    mcdc_error err;
    mcdc_appender *a;
    char **paths;                       /* the files ended, in order */
    int64_t n_paths, cap_paths;
    int64_t busy_us;                    /* time spent writing */
    const mcdc_log_sink *sink;
    pthread_t th;
} silver_writer;
int silver_writer_start(silver_writer *w, mcdc_appender *a, mcdc_error *err);
/* Hands b (NULL: end the file) to the writer; takes b. */
int silver_writer_put(silver_writer *w, mcdc_batch *b, mcdc_error *err);
/* Waits for everything queued, stops the thread: its status. */
int silver_writer_finish(silver_writer *w, mcdc_error *err);
/* Frees the paths (after finish). */
void silver_writer_free(silver_writer *w);

/* ---- merge ---------------------------------------------------------------------------- */
typedef struct silver_merge_in {
    mcdc_table *target;             /* silver */
    mcdc_table_view *view;          /* silver at the version merged into; NULL: no table */
    mcdc_schema *out_schema;        /* silver's columns after the merge (view's + new) */
    const int32_t *change_of_out;   /* per out column: its column in the change rows; -1 */
    const int32_t *exist_of_out;    /* per out column: its column in the view; -1 */
    const char *const *keys;        /* key columns (out_schema names) */
    int32_t n_keys;
    silver_sorter *changes;         /* finished, ranked: the best row per key */
    int32_t change_lsn_col;         /* _start_lsn in the change rows */
    bool rebuild;                   /* rows no change names are deleted */
    const silver_scd2 *scd2;        /* a history (changes: a history sorter); NULL: type 1 */
    const silver_range *ranges;     /* sorted by lo; single key only */
    int32_t n_ranges;
    int64_t file_rows;              /* <= 0: SILVER_FILE_ROWS_DEFAULT */
    /* Silver's position before the merge (has_position false: none yet):
     * a row with a newer _start_lsn was not written from bronze. Of the
     * rows of a key silver holds more than once (another writer's doing)
     * the merge keeps one (silver_merge_run). */
    bool has_position;
    uint8_t position[10];
    int64_t memory_bytes;           /* the sorter of other writers' rows */
    mcdc_storage *spill;
    const char *spill_prefix;
    const mcdc_table_props *props;
    const mcdc_ctx *ctx;            /* crash hook "during_merge" */
    int64_t unit;
} silver_merge_in;

typedef struct silver_merge_out {
    mcdc_appender *appender;        /* the files written (owned: commit or free) */
    char **removes;                 /* owned: the files rewritten */
    size_t n_removes;
    silver_index index;             /* the table's index after the commit */
    int64_t inserted, updated, deleted, kept;
    int64_t duplicates;             /* rows of keys held more than once, dropped (type 1) */
    int64_t files_read, files_written;
    int64_t read_us, write_us;      /* decoding silver's files, encoding the new ones */
    bool changed;                   /* anything to commit */
    /* Merge-on-read: per remove, the deletion vector the file comes back
     * with (mcdc_table_commit.readd_dvs; NULL: a copy-on-write merge), the
     * DV file holding them (written; its key), and whether it merged on read. */
    struct mcdc_delta_dv *readd_dvs;
    struct mcdc_dv_writer *dvw;
    const char *dv_key;
    bool mor;
} silver_merge_out;
int silver_merge_run(silver_merge_out *out, const silver_merge_in *in, mcdc_error *err);
/* Does silver (view, keyed by keys) hold files a merge folds even with no
 * change: files its index does not know (another writer's, not seen yet),
 * or, copy-on-write, files out of key order or overlapping others? A pass
 * with nothing new then merges all the same, so that another writer's rows
 * (a key held twice among them) are folded in without waiting for a change. */
int silver_merge_foreign(mcdc_table *target, mcdc_table_view *view, const char *const *keys,
                         int32_t n_keys, bool *fold, mcdc_error *err);

/* ---- merge-on-read (mcdc_silver_mor.c, docs/silver.md) ------------------------------
 * A type 1 silver with delta.enableDeletionVectors=true (and the feature):
 * the changes are joined, in key order, with the key column (and
 * _start_lsn when the statistics cannot prove every change newer) of each
 * file whose key range holds a change; rows a change deletes or replaces
 * join the file's deletion vector, the images are written as new files in
 * key order; the files come back with their new DVs in the same commit.
 * Rebuilds and chunk ranges, files the index does not know or not in key
 * order, and a silver decayed past the fold policy merge copy-on-write
 * (silver_merge_run), which folds every file a change reaches. The policy:
 * a file whose DV deletes more than 1/SILVER_MOR_FOLD_DV_SHARE of its rows,
 * or more than max(SILVER_MOR_FOLD_FILES, live files / 4) files whose key
 * ranges overlap others (the files merge-on-read wrote). */
#define SILVER_MOR_FOLD_DV_SHARE 3
#define SILVER_MOR_FOLD_FILES 4
/* Does this merge go merge-on-read (the table's property, type 1, no
 * rebuild, no chunk ranges, every column from the changes)? */
bool silver_mor_wanted(const silver_merge_in *in);
/* Merges on read, or copy-on-write when the policy or the files say so
 * (out->mor tells). The commit passes out->readd_dvs. */
int silver_mor_run(silver_merge_out *out, const silver_merge_in *in, mcdc_error *err);
void silver_merge_out_free(silver_merge_out *out);

#endif /* MCDC_SILVER_H */
