/*
 * sim_store.h - the change store: each change table's rows in memory, in
 * clustered order (__$start_lsn, __$command_id, __$seqval, __$operation),
 * every column kept as the bytes a ROW token holds for it, so the reader's
 * change query is a range search plus copies (sim_engine_fast.c). The table
 * store (at the end) keeps base tables' rows the same way, for the snapshot
 * reader's reads (sim_fast_table.c).
 *
 * SQLite stays the truth; the store is a cache of it, per (database,
 * capture instance):
 *   - built lazily by the first read (a scan of the change table), then
 *     caught up by each read with the rows past its last key (capture
 *     appends at the end of the clustered order);
 *   - sim.bulk_load hands it the rows it wrote, after its COMMIT;
 *   - retention cleanup trims it (the low water mark moves first);
 *   - capture that inserts below the last key, any other write or DDL on
 *     the change table (seen by the writer connection's authorizer), DROP
 *     and disable drop it: the next read rebuilds it (after a restart too);
 *   - a table that would pass the memory limit is served from SQLite until
 *     it is trimmed or dropped.
 * Readers take a reference and the published row count under the entry's
 * lock, then send without it: published rows never change, and memory goes
 * when the last reference does.
 */
#ifndef SIM_STORE_H
#define SIM_STORE_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sim_engine.h"
#include "tds_result.h"

typedef struct sim_stores sim_stores; /* every store of a server */
typedef struct sim_store sim_store;   /* one change table's rows */

/* limit_bytes <= 0: no store (every read goes to SQLite); the table store
 * has a limit of its own (sim_stores_set_table_limit, default
 * SIM_TABLE_CACHE_MB_DEFAULT). */
int sim_stores_create(sim_stores **out, int64_t limit_bytes, mcdc_error *err);
void sim_stores_free(sim_stores *ss);
/* Before serving (not thread-safe). */
void sim_stores_set_limit(sim_stores *ss, int64_t limit_bytes);
void sim_stores_set_table_limit(sim_stores *ss, int64_t limit_bytes);
/* Bytes held by all change stores / table stores now (tests). */
int64_t sim_stores_bytes(sim_stores *ss);
int64_t sim_stores_table_bytes(sim_stores *ss);

/* A SQLite value as the engine hands it out (borrowed pointers); inline:
 * every cell of every SQLite-served read goes through it. */
static inline void sim_store_value_of(sim_value *v, sqlite3_value *cv) {
    switch (sqlite3_value_type(cv)) {
    case SQLITE_INTEGER: v->kind = SIM_V_INT; v->i = sqlite3_value_int64(cv); break;
    case SQLITE_FLOAT: v->kind = SIM_V_REAL; v->f = sqlite3_value_double(cv); break;
    case SQLITE_TEXT:
        v->kind = SIM_V_TEXT;
        v->p = sqlite3_value_text(cv);
        v->n = (size_t)sqlite3_value_bytes(cv);
        break;
    case SQLITE_BLOB:
        v->kind = SIM_V_BLOB;
        v->p = sqlite3_value_blob(cv);
        v->n = (size_t)sqlite3_value_bytes(cv);
        break;
    default: v->kind = SIM_V_NULL; break;
    }
}

/* ---- writers (under the server mutex) ---------------------------------- */
/* Drops the store of (db, ci); ci NULL: every store of db, table stores too. */
void sim_store_invalidate(sim_stores *ss, const char *db, const char *ci);
/* Rows below low are gone (retention, sp_cdc_cleanup_change_table). */
void sim_store_trim(sim_stores *ss, const char *db, const char *ci, const uint8_t low[10]);
/* Capture inserted rows whose start LSNs are >= lo: dropped unless they
 * all come after the last row held. */
void sim_store_inserted(sim_stores *ss, const char *db, const char *ci, const uint8_t lo[10]);
/* The writer connection's authorizer: a write or DDL on a cdc.*_CT table
 * drops its store; on another table it moves the table's write count (and
 * drops its table store). Install with sqlite3_set_authorizer(w,
 * sim_store_auth, auth) where auth lives as long as w.
 * It also keeps the writer's rule: every statement on w is prepared under
 * the server's lock (mu). One prepared while mu is free is refused
 * (SQLITE_DENY, logged): run unlocked, it would share w with a statement of
 * another thread, and a DDL there fails with SQLITE_LOCKED. */
typedef struct sim_store_auth_ctx {
    sim_stores *ss;
    const char *db;    /* the database's name */
    bool trusted;      /* the engine's own bulk writes: they tell the stores themselves */
    pthread_mutex_t *mu; /* the server's lock (NULL: not checked) */
} sim_store_auth_ctx;
int sim_store_auth(void *ctx, int action, const char *a1, const char *a2, const char *a3, const char *a4);

/* Rows of a bulk load, appended to the store after the load commits. */
typedef struct sim_store_batch sim_store_batch;
/* Columns of cdc.[ci_CT] as the store keeps them (w: the writer). NULL
 * when there is no store (*out NULL is not an error). */
int sim_store_batch_begin(sim_store_batch **out, sim_stores *ss, sqlite3 *w, const char *db, const char *ci,
                          mcdc_error *err);
/* The store's column index of a change table column, or -1. */
int sim_store_batch_col(const sim_store_batch *b, const char *name);
/* One row: vals[ncols] in the change table's column order (as the batch
 * columns, including the __$ ones), exactly the values written to SQLite. */
int sim_store_batch_row(sim_store_batch *b, const sim_value *vals, mcdc_error *err);
/* After COMMIT: the rows join the store (or start it when the table had no
 * row before the load: table_was_empty). Frees b. */
void sim_store_batch_publish(sim_store_batch *b, bool table_was_empty);
void sim_store_batch_free(sim_store_batch *b);

/* ---- readers ------------------------------------------------------------ */
typedef struct sim_store_snap {
    sim_store *st;      /* referenced */
    size_t head, count; /* rows [head, count) */
    const uint8_t **const *dir; /* row pointers in chunks of SIM_STORE_CHUNK_ROWS */
    int ncols;
    int npos;           /* cell positions: ncols + 1 (the seqval text) in a change store */
} sim_store_snap;
#define SIM_STORE_CHUNK_BITS 14
#define SIM_STORE_ROW_HEAD 28 /* start_lsn[10] seqval[10] operation command_id */

/* The store of (d's name, ci) caught up with what rd sees; false when the
 * table is served from SQLite (no store, over the limit, a writer busy).
 * srv_mu / w: the server mutex and the database's writer, for a rebuild. */
bool sim_store_acquire(sim_stores *ss, pthread_mutex_t *srv_mu, sqlite3 *w, const char *db, sqlite3 *rd,
                       const char *ci, sim_store_snap *out);
void sim_store_release(sim_store_snap *snap);

/* Column index by name (case-insensitive), or -1; its metadata. */
int sim_store_col(const sim_store *st, const char *name);
const sim_column *sim_store_col_meta(const sim_store *st, int k);
int sim_store_ncols(const sim_store *st);
/* Where column k's cell lies in a row (sim_store_row.off index); k =
 * sim_store_ncols: the seqval as CONVERT(varchar(22), __$seqval, 1) sends
 * it ([22, 0] + "0x" + 20 hex digits; never NULL). */
int sim_store_col_pos(const sim_store *st, int k);
/* Rows are also in (start_lsn, seqval, operation) order. */
bool sim_store_order3(const sim_store *st);

/* One row: keys and cells. */
typedef struct sim_store_row {
    const uint8_t *start_lsn, *seqval; /* 10 bytes each */
    int32_t operation, command_id;
    const uint8_t *data;  /* cell bytes */
    const uint32_t *off;  /* ncols + 2 offsets into data, by position */
    const uint8_t *nulls; /* bitmap */
} sim_store_row;
void sim_store_row_get(const sim_store *st, size_t i, sim_store_row *out);
/* The same through a snapshot, inline (the read loop). */
static inline void sim_store_snap_row(const sim_store_snap *sn, size_t i, sim_store_row *out) {
    const uint8_t *r = sn->dir[i >> SIM_STORE_CHUNK_BITS][i & ((1u << SIM_STORE_CHUNK_BITS) - 1)];
    out->start_lsn = r;
    out->seqval = r + 10;
    memcpy(&out->operation, r + 20, 4);
    memcpy(&out->command_id, r + 24, 4);
    out->nulls = r + SIM_STORE_ROW_HEAD;
    out->off = (const uint32_t *)(const void *)(r + SIM_STORE_ROW_HEAD + ((((size_t)sn->ncols + 7) / 8 + 3) & ~(size_t)3));
    out->data = (const uint8_t *)(out->off + sn->npos + 1);
}
const uint8_t *sim_store_row_start(const sim_store *st, size_t i);
/* Asks the CPU for the first bytes of row i (a read loop, some rows ahead:
 * rows are read once, from memory). */
static inline void sim_store_snap_prefetch(const sim_store_snap *sn, size_t i) {
    const uint8_t *r = sn->dir[i >> SIM_STORE_CHUNK_BITS][i & ((1u << SIM_STORE_CHUNK_BITS) - 1)];
    for (int k = 0; k < 5; k++) __builtin_prefetch(r + 64 * k);
}

/* A key to search: start_lsn bytes (any length, SQLite blob order) and,
 * for the reader's resume point, command id / seqval / operation. */
typedef struct sim_store_key {
    const uint8_t *lsn;
    size_t lsn_n;
    bool full;            /* the rest is set */
    int64_t command_id;   /* ignored with order3 */
    const uint8_t *seqval;
    size_t seq_n;
    int64_t operation;
} sim_store_key;
/* First row in [snap.head, snap.count) with start_lsn >= k.lsn (or, with
 * inclusive false, > k.lsn); with k.full, first row whose whole key (order3:
 * without command id) is greater than k. */
size_t sim_store_lower(const sim_store_snap *snap, const sim_store_key *k, bool inclusive, bool order3);

/* ---- the table store --------------------------------------------------------
 * A base table's rows in rowid order (the order SQLite scans it in), each
 * column encoded as its own type and nullability send it, per (database,
 * table). SQLite stays the truth: every write to the table moves its write
 * count (the writer connection's authorizer, sim_store_auth, under the
 * server mutex) and drops its store; a store is the table as of one write
 * count (its tag), built by a read of the whole table (a scan of the table,
 * started under the server mutex, or from a reader's pinned read
 * transaction when nothing wrote since) or handed over by
 * sim.bulk_load_table. A read is served from a store whose tag is the write
 * count of the state it reads. */
/* Under the server mutex: a write to user table tbl of db moved its count. */
void sim_tstore_wrote(sim_stores *ss, const char *db, const char *tbl);
/* Under the server mutex: tbl's write count now (a snapshot's point). */
uint64_t sim_tstore_wseq(sim_stores *ss, const char *db, const char *tbl);
/* The store of tbl as of write count pin_wseq (pinned: rd holds a read
 * transaction begun at that count) or as of now (!pinned: rd in
 * autocommit). A missing store is built only by a read of the whole table
 * (whole): that costs about what reading it through SQLite does, while a
 * ranged read (a point lookup, one partition of several) would pay for
 * all the rows it does not read; ranged reads use the store a whole read or
 * sim.bulk_load_table left.
 * false: served from SQLite (no store, over the limit, being built, the
 * table changed since the pin or just now). */
bool sim_tstore_acquire(sim_stores *ss, pthread_mutex_t *srv_mu, const char *db, sqlite3 *rd, const char *tbl,
                        bool pinned, uint64_t pin_wseq, bool whole, sim_store_snap *out);
/* Rows in rowid order are in the order of column col (NULLs first, then
 * ascending): an integer column that only grew with the rowid. */
bool sim_tstore_mono(const sim_store *st, int col);
/* ... and without NULLs or a value twice (rowid order is the order of any
 * index led by col). */
bool sim_tstore_strict(const sim_store *st, int col);
/* One row of a table store. */
typedef struct sim_trow {
    const uint8_t *nulls; /* bitmap */
    const uint32_t *off;  /* ncols + 1 offsets into data */
    const uint8_t *data;  /* cell bytes */
} sim_trow;
static inline void sim_tstore_snap_row(const sim_store_snap *sn, size_t i, sim_trow *out) {
    const uint8_t *r = sn->dir[i >> SIM_STORE_CHUNK_BITS][i & ((1u << SIM_STORE_CHUNK_BITS) - 1)];
    out->nulls = r;
    out->off = (const uint32_t *)(const void *)(r + ((((size_t)sn->ncols + 7) / 8 + 3) & ~(size_t)3));
    out->data = (const uint8_t *)(out->off + sn->npos + 1);
}
/* A bulk load of tbl (sim.bulk_load_table): rows as sim_store_batch_row
 * takes them, in the table's column order. After the COMMIT call
 * sim_tstore_wrote, then sim_store_batch_publish (which installs the rows
 * as the table's store when the table was empty before the load). */
int sim_tstore_batch_begin(sim_store_batch **out, sim_stores *ss, sqlite3 *w, const char *db, const char *tbl,
                           mcdc_error *err);

#endif /* SIM_STORE_H */
