/*
 * mcdc_changes.h - the change feed of one capture instance as the stream
 * sees it: positions (max/min LSN, n-th commit, commit times), planning of
 * commit-aligned ranges, and reading a range into batches with its metrics.
 * Implemented on the CDC client and the reader (mcdc_reader.h).
 */
#ifndef MCDC_CHANGES_H
#define MCDC_CHANGES_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "mcdc_batch.h"
#include "mcdc_lsn.h"
#include "mcdc_options.h"
#include "mcdc_reader.h"

typedef struct mcdc_changes mcdc_changes;

/* What the host sets beside the options (tests: fast retries). */
typedef struct mcdc_changes_settings {
    int64_t retry_backoff_ms; /* before the first retry (doubling); 0: MCDC_RETRY_BACKOFF_MS_FIRST */
    /* The stream: follow every capture instance of the table (reference
     * §2.5; see "following" below). The schema is then the union of their
     * columns. */
    bool follow;
    /* The names of instances read before, to try in order when
     * captureInstance is gone (the stream: the instance its checkpoint read
     * last, the one it was bound to; apply, reconcile, repair: the ones
     * bronze's rows name, newest first); borrowed, NULL entries skipped.
     * One that is still listed, or is the default name <schema>_<table> of
     * a table with instances, gives the table; the handle then reads its
     * instance that covers max_lsn (the newest whose start capture has
     * processed). None giving a table while one was named: MCDC_E_SCHEMA,
     * the table has no capture instance any more. */
    const char *const *also_names;
    int n_also_names;
} mcdc_changes_settings;

/* Connects, resolves the capture instance, infers the output schema.
 * settings may be NULL (the defaults). */
int mcdc_changes_open(mcdc_changes **out, const mcdc_opts *opts,
                      const mcdc_changes_settings *settings, mcdc_error *err);
void mcdc_changes_close(mcdc_changes *c);
/* Which of names[0..n) are capture instances of the source (one
 * connection, retried as a control call): found[i] is a
 * mcdc_instance_found (include/mssqlcdc.h). */
int mcdc_changes_find_instances(const mcdc_opts *opts, const char *const *names, size_t n,
                                int *found, mcdc_error *err);

/* The reader's output schema (reference §2.2); borrowed. */
mcdc_schema *mcdc_changes_schema(mcdc_changes *c);
const char *mcdc_changes_capture_instance(const mcdc_changes *c);

/* sys.fn_cdc_get_max_lsn(); NULL reads as the zero LSN. */
int mcdc_changes_max_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err);
/* sys.fn_cdc_get_min_lsn(ci). */
int mcdc_changes_min_lsn(mcdc_changes *c, mcdc_lsn *out, mcdc_error *err);
/* The min_lsn of the capture instance a stream reads `at` from: when
 * following, the newest listed instance whose start LSN is at or below
 * it (the oldest when none is), else the one it reads. A position's loss
 * is decided there: an older instance's cleanup does not touch a stream
 * past the newer one's start, and a stream before it needs the older.
 * read_ci (NULL or "": none): the instance the position records; none
 * older than it is picked (its cleanup moves its start LSN past `at`, and
 * the older instance does not stand in for it: mcdc_changes_batch_plan). */
int mcdc_changes_min_lsn_at(mcdc_changes *c, const mcdc_lsn *at, const char *read_ci,
                            mcdc_lsn *out, mcdc_error *err);
/* The n-th entry of cdc.lsn_time_mapping after start; *found false when
 * fewer than n exist (then out is the last one, if any). */
int mcdc_changes_nth_commit_after(mcdc_changes *c, const mcdc_lsn *start, int64_t n,
                                  mcdc_lsn *out, bool *found, mcdc_error *err);
/* UTC commit time of an LSN (the mapping entry at or before it), microseconds. */
int mcdc_changes_commit_time(mcdc_changes *c, const mcdc_lsn *lsn, int64_t *utc_us, bool *found,
                             mcdc_error *err);
/* The same of the mapping entry at lsn exactly (*found false when lsn is
 * no commit's), as sys.fn_cdc_map_lsn_to_time reads it. */
int mcdc_changes_commit_time_exact(mcdc_changes *c, const mcdc_lsn *lsn, int64_t *utc_us,
                                   bool *found, mcdc_error *err);
/* The largest commit LSN at or before a UTC time, to the second, on the
 * server's clock (sys.fn_cdc_map_time_to_lsn); *found false when no commit
 * is at or before it (any more). */
int mcdc_changes_time_to_lsn(mcdc_changes *c, int64_t utc_us, mcdc_lsn *out, bool *found,
                             mcdc_error *err);
/* The capture job's health and the source's newest commit (one poll of
 * mcdc_capture_probe_read) on the control connection. */
int mcdc_changes_capture_health(mcdc_changes *c, mcdc_capture_health *out, mcdc_error *err);
/* Every change table's row count (mcdc_capture_probe_change_rows). */
int mcdc_changes_change_table_rows(mcdc_changes *c, mcdc_change_table_rows **out, size_t *n,
                                   bool *visible, mcdc_error *err);

/* ---- one probe for a database's many capture instances --------------------
 * What a runtime asks once per poll for every stream of a database
 * (mcdc_runtime.h), on the connection of whichever stream runs the round. */
typedef struct mcdc_probe_item {
    char ci[MCDC_IDENT_BYTES_MAX + 1]; /* the capture instance */
    mcdc_lsn from;     /* its position: rows after it count */
    bool ask;          /* in the round's "which change tables moved" query */
    bool moved;        /* out (when asked): its change table has a row in (from, max] */
    bool has_min;      /* out: cdc.change_tables lists it with a start_lsn the round read */
    mcdc_lsn min_lsn;  /* out: that start_lsn (what cleanup keeps) */
} mcdc_probe_item;
/* One round on c's control connection: *max = sys.fn_cdc_get_max_lsn()
 * (zero, *max_null, when capture never wrote); when some item is asked and
 * from < max, a UNION ALL of a TOP (1) read of each asked change table past
 * its position, one query per MCDC_PROBE_BRANCHES_MAX of them (items not
 * asked or already at max: moved = false), then, in one query after them,
 * the start_lsn of every instance past the lowest of those positions (the
 * others: has_min false; an item asked behind max with no start_lsn read
 * past its position lost no row past it to a cleanup before its read).
 * every: that last query runs whatever the positions, for every instance
 * (the round proves the login may read cdc.change_tables). *queries: the
 * statements sent (1 for a database all caught up, 3 with up to 600 tables
 * behind). Retried as c's control queries are. */
int mcdc_changes_probe_round(mcdc_changes *c, mcdc_probe_item *items, int n, bool every,
                             mcdc_lsn *max, bool *max_null, int *queries, mcdc_error *err);
/* The server's clock now, UTC microseconds. */
int mcdc_changes_server_now(mcdc_changes *c, int64_t *utc_us, mcdc_error *err);
/* startingLsn resolved: earliest = decrement(min_lsn), latest = max_lsn, or
 * the LSN given (already processed). */
int mcdc_changes_initial(mcdc_changes *c, const char *starting_lsn, mcdc_lsn *out,
                         mcdc_error *err);

/* Commit-aligned ranges of [from, to] balanced by change rows (reference
 * §3.6): at most n_max ranges, each >= ~50,000 rows. *out is owned by the
 * caller (mcdc_free). */
int mcdc_changes_plan(mcdc_changes *c, const mcdc_lsn *from, const mcdc_lsn *to, int n_max,
                      mcdc_lsn_range **out, int *n_out, mcdc_error *err);

/* ---- following the table's capture instances (the stream; reference §2.5) ---------
 * A handle opened with settings->follow reads every capture instance of its
 * table, oldest first: a batch's range is cut at each newer instance's
 * start LSN S, the older instance read up to S - 1 and the newer one from
 * S, both in one batch when it spans S. Each planning lists the instances
 * again, and the DDL their histories hold in the batch's range is
 * classified before anything is read (mcdc_follow.h). A configured
 * instance that is gone is followed through the newest instance listed.
 * Names and pieces handed out stay valid until the next planning. */

/* read_ci (here and in mcdc_changes_batch_plan): the instance start's
 * position records ("capture_instance"; NULL or "": none). A batch after
 * it reads no instance older than that one: a cleanup of it that passed
 * the position is its loss (the retention guard of its piece), not a range
 * for the older instance to fill. One no longer listed counts as none. */

/* Where a batch after start should end at most, given the end the
 * positions allow (*end, lowered in place): just before the start S of a
 * newer instance whose columns the stream's schema does not hold, so that
 * the batch before S commits and the stream stops at S (*cut). ci: the
 * instance the batch reads last (the position records it). */
int mcdc_changes_follow_end(mcdc_changes *c, const mcdc_lsn *start, const char *read_ci,
                            mcdc_lsn *end, bool *cut, char ci[MCDC_IDENT_BYTES_MAX + 1],
                            mcdc_error *err);

/* A batch's part read from one instance. */
typedef struct mcdc_changes_piece {
    int32_t instance;  /* the ranges planned for it carry it (mcdc_lsn_range.instance) */
    const char *ci;    /* its name (borrowed) */
    mcdc_lsn from, to; /* closed; a caller may raise from (cleanup passed it) */
    bool oldest;       /* the table's oldest instance: a gap before it may be a dropped one's */
} mcdc_changes_piece;

/* What a batch records beside its rows (reference §2.3.4). */
typedef struct mcdc_changes_event {
    const char *event; /* "schema_change" or "capture_instance_switched" (static) */
    mcdc_lsn lsn;      /* the DDL's LSN; the newer instance's start S */
    bool has_commit_ts;
    int64_t commit_us; /* of the commit at or before lsn, UTC */
    char *detail;      /* owned: the DDL (at most 500 bytes), or the switch's JSON
                          (mcdc_follow_switch_detail) */
} mcdc_changes_event;

typedef struct mcdc_changes_batch {
    mcdc_changes_piece *pieces; /* owned, in LSN order */
    int n_pieces;
    mcdc_changes_event *events; /* owned: the DDL in LSN order, then the switches */
    int n_events;
    bool switches;              /* a piece starts at a newer instance's start S */
    mcdc_lsn switch_lsn;        /* switches: that S (the newest one the batch reaches) */
} mcdc_changes_batch;

/* The pieces of the batch (start, end] (start: the last LSN processed) and
 * its events. MCDC_E_SCHEMA before anything is read: DDL whose type change
 * the stream cannot hold, or any DDL under schemaChangePolicy=fail. *out
 * is the caller's (mcdc_changes_batch_free). */
int mcdc_changes_batch_plan(mcdc_changes *c, const mcdc_lsn *start, const char *read_ci,
                            const mcdc_lsn *end, mcdc_changes_batch *out, mcdc_error *err);
void mcdc_changes_batch_free(mcdc_changes_batch *b);
/* sys.fn_cdc_get_min_lsn of the piece's instance. */
int mcdc_changes_piece_min_lsn(mcdc_changes *c, const mcdc_changes_piece *p, mcdc_lsn *out,
                               mcdc_error *err);
/* The retention guard's finding for a piece (invariant 4, per instance):
 * lost when cleanup moved its instance's min_lsn past p->from; then the
 * two LSNs as text, and (p the table's oldest) the instances seen that the
 * table no longer lists, whose changes the gap may have held. */
typedef struct mcdc_piece_loss {
    bool lost;
    mcdc_lsn min_lsn;
    char from[MCDC_LSN_TEXT_LEN + 1], min[MCDC_LSN_TEXT_LEN + 1];
    char gone[512]; /* mcdc_changes_gone's; "" when none */
} mcdc_piece_loss;
int mcdc_changes_piece_loss(mcdc_changes *c, const mcdc_changes_piece *p, mcdc_piece_loss *out,
                            mcdc_error *err);
/* Before the first read of a piece's instance this run: the stream's
 * schema must hold what it captures (MCDC_E_SCHEMA: the stream stops at
 * its start), and the login must be allowed to read its change table
 * (MCDC_E_PERMISSION with the GRANT). */
int mcdc_changes_piece_check(mcdc_changes *c, const mcdc_changes_piece *p, mcdc_error *err);
/* mcdc_changes_plan for the piece's [from, to] of its instance. */
int mcdc_changes_plan_piece(mcdc_changes *c, const mcdc_changes_piece *p, int n_max,
                            mcdc_lsn_range **out, int *n_out, mcdc_error *err);
/* Instance names seen (configured, followed, listed) that the table no
 * longer lists, as "'a', 'b'" ("" when none). */
void mcdc_changes_gone(const mcdc_changes *c, char *out, size_t cap);
/* Is name a capture instance of the table now, or the table's default
 * instance name (<schema>_<table>), ignoring case? */
bool mcdc_changes_is_table_name(const mcdc_changes *c, const char *name);
/* An LSN the user gave for where a stream starts (what: the option's name,
 * "startingLsn", "snapshotLsn"): MCDC_E_INVALID when it is beyond max_lsn
 * (every change up to it would be taken as read), MCDC_E_DATALOSS when the
 * change after it is before the capture instance's min_lsn (unless
 * loss_ok: a loss is recovered or skipped). */
int mcdc_changes_check_start(mcdc_changes *c, const mcdc_lsn *l, const char *what, bool loss_ok,
                             mcdc_error *err);

/* What reading one range measured (decision record 0014) is the reader's
 * mcdc_reader_metrics (src/source/mcdc_reader.h). */

/* Reads one range on its own connection (so ranges can run in parallel),
 * with the retention guard after the read; transient errors retried. */
int mcdc_changes_read(mcdc_changes *c, const mcdc_lsn_range *r, mcdc_batch_fn fn, void *ctx,
                      mcdc_reader_metrics *m, mcdc_error *err);

/* ---- the tracked table's rows: snapshots (reference §2.4.1, §3.7) ----------
 * The source table of the capture instance read in the output schema:
 * _operation 0, _start_lsn the snapshot's LSN, _commit_ts its commit time,
 * _seqval and _command_id NULL; a captured column the table has dropped
 * (matched by column_id) reads NULL. READ COMMITTED, or SNAPSHOT with
 * isolationLevel=snapshot; lockTimeoutMs sets LOCK_TIMEOUT; never NOLOCK. */

/* Waits until capture has recorded the capture instance's start LSN (SQL
 * Server leaves cdc.change_tables.start_lsn NULL, and fn_cdc_get_min_lsn at
 * 0x00..., until its capture job has processed the enable), for at most
 * captureWaitSeconds, saying what it waits for every few seconds; then
 * MCDC_E_NOT_READY. At once when it is recorded already. */
int mcdc_changes_wait_started(mcdc_changes *c, mcdc_error *err);

/* The snapshot's LSN, recorded before anything is read: snapshotLsn when
 * set, else (once the instance's start LSN is recorded: waited for as
 * mcdc_changes_wait_started does) max_lsn, or the instance's start LSN
 * minus one while max_lsn is below it; and its commit time (*has_ts false
 * when no commit maps to it). Never below the instance's start: a stream
 * from there would read the changes it never captured as purged. */
int mcdc_changes_snapshot_lsn(mcdc_changes *c, mcdc_lsn *out, int64_t *commit_us, bool *has_ts,
                              mcdc_error *err);

/* Key bounds are JSON: a scalar for one key column, an array for several;
 * integers as JSON integers, strings as strings, other values (dates,
 * datetimes, decimals, uniqueidentifiers) as the text CAST reads back
 * (ISO 8601; 3 fractional digits for datetime/smalldatetime, 6 otherwise;
 * decimals in fixed notation), binary as "0x"+hex; JSON null (or a NULL
 * json_t*) is an open end. A range is the JSON array [lo, hi]: lo inclusive,
 * hi exclusive, in SQL Server's order of the key columns (NULL first).
 * (mcdc_keyrange.h builds and reads them.) Every json_t handed out is owned
 * by the caller (json_decref); those passed in are borrowed. */
typedef enum { MCDC_ISO_OPTION = -1, MCDC_ISO_READ_COMMITTED = 0, MCDC_ISO_SNAPSHOT = 1 } mcdc_isolation;
/* The columns snapshots are cut on, as captured: snapshotKeys, else the
 * capture instance's unique index; [] when none (the table is one range).
 * snapshotKeys naming a column the stream does not read, or of a type no
 * bound can be bound as or SQL Server cannot sort (bit, text, ntext, image,
 * xml, time; datetime2(7)/datetimeoffset(7) except as the last column):
 * MCDC_E_INVALID naming it and why. An index whose columns the stream does
 * not all read, or of such a type: []. */
int mcdc_changes_snapshot_keys(mcdc_changes *c, json_t **keys, mcdc_error *err);
/* What a chunked snapshot's chunks tile, read just after its LSN S:
 * {"kind":"int","lo":MIN,"hi":MAX,"rows":estimate} for one integer key
 * (sys.sp_spaceused's rows), else {"kind":"keyset","max":MAX or null} (null:
 * empty table, no key, or a key no bound can be bound as: one chunk). keys
 * is a JSON array of column names (mcdc_changes_snapshot_keys'); a name the
 * stream does not read is MCDC_E_INVALID. */
int mcdc_changes_snapshot_extent(mcdc_changes *c, const json_t *keys, mcdc_isolation iso,
                                 json_t **extent, mcdc_error *err);
/* Every chunk of a chunked snapshot, planned once: JSON array of [lo, hi],
 * at most about chunk_rows rows each, tiling the key space up to just above
 * MAX (first open below; each starts where the one before ends; the last
 * ends at MAX+1 for an int plan, at the first key after MAX for a keyset one,
 * null when there is none or it reads back as MAX). int: rows counted per
 * slice of a fixed grid in one GROUP BY (about 16 slices per chunk_rows, at
 * most 100,000 slices a query), slices over chunk_rows recounted on a finer
 * grid over their own MIN..MAX (down to one value), consecutive slices packed
 * into chunks <= chunk_rows; keyset: bounds chunk_rows keys apart by seeks
 * (TOP n+1 per seekable piece, UNION ALL, ORDER BY ... OFFSET n ROWS FETCH
 * NEXT 1 ROWS ONLY); on keys that are not unique a value never splits (the
 * seek doubles n until [lo, bound) holds a row). Counts and seeks under iso.
 * An int plan of a bigint key whose MAX is 9223372036854775807 ends open
 * (null): no key is above it. More than MCDC_SNAPSHOT_CHUNKS_MAX chunks:
 * MCDC_E_LIMIT. */
int mcdc_changes_plan_chunks(mcdc_changes *c, const json_t *keys, const json_t *extent,
                             int64_t chunk_rows, mcdc_isolation iso, json_t **chunks,
                             mcdc_error *err);
/* The first key after max now (the end of a keyset plan's last chunk,
 * sought again before each wave while it is open); *end NULL when none (or
 * when it reads back as max). */
int mcdc_changes_last_bound(mcdc_changes *c, const json_t *keys, const json_t *max,
                            mcdc_isolation iso, json_t **end, mcdc_error *err);
/* Up to n_max ranges for a whole snapshot read in parallel: one integer
 * key: uniform ranges of [MIN, MAX] (two seeks; first open below, last open
 * above); other keys: keyset bounds rows/n apart from the sp_spaceused
 * estimate, each a seek from the one before; no key, one row or an empty
 * table: [[null, null]]. JSON array of [lo, hi], cut on
 * mcdc_changes_snapshot_keys' columns. */
int mcdc_changes_snapshot_ranges(mcdc_changes *c, int n_max, json_t **ranges, mcdc_error *err);
/* The table's rows by sp_spaceused: the partitions' row counts, a lookup,
 * not a scan (an estimate: rows change while it is read). */
int mcdc_changes_row_estimate(mcdc_changes *c, int64_t *rows, mcdc_error *err);
/* Reads [lo, hi) of keys (keys NULL or []: the whole table; range NULL:
 * [null, null]) on a connection of its own, every row in the output schema
 * stamped with lsn and its commit time, under iso (MCDC_ISO_OPTION: the
 * isolationLevel option), with lockTimeoutMs, never NOLOCK; 3952 says what
 * to do (ALTER DATABASE ... SET ALLOW_SNAPSHOT_ISOLATION ON, or
 * readCommitted). Batches (output schema) go to fn, which owns them. */
int mcdc_changes_snapshot_read(mcdc_changes *c, const json_t *keys, const json_t *range,
                               mcdc_isolation iso, const mcdc_lsn *lsn, bool has_ts,
                               int64_t commit_us, mcdc_batch_fn fn, void *ctx,
                               mcdc_reader_metrics *m, mcdc_error *err);
/* Reconcile's Tier 1 on the control connection, under READ COMMITTED
 * (mcdc_cdc_client.h): the ordinal extent of the one key column `key`, its
 * rows and ordinal sums per bucket of `width` ordinals, and the whole
 * table's rows. A key that is not an integer or a date is MCDC_E_INVALID. */
int mcdc_changes_key_extent(mcdc_changes *c, const char *key, bool *found, int64_t *lo,
                            int64_t *hi, mcdc_error *err);
int mcdc_changes_key_buckets(mcdc_changes *c, const char *key, int64_t width, int max_buckets,
                             mcdc_key_bucket **out, int *n, mcdc_error *err);
int mcdc_changes_row_count(mcdc_changes *c, int64_t *rows, mcdc_error *err);
/* Keys read in one point-read query, and the text parameters it may bind. */
#define MCDC_POINT_READ_KEYS 1000
#define MCDC_POINT_READ_PARAMS 2000
/* The current rows of the keys points[0..n) (bounds of key_names, a JSON
 * array of captured column names, as a range's bounds are: a scalar for one
 * column, an array for several; JSON null a NULL value), in the snapshot
 * reader's output schema and stamping (operation 0, lsn, its commit time),
 * READ COMMITTED on a connection of its own, never NOLOCK. A key the table
 * lacks gives no row. Batches go to fn, which owns them. */
int mcdc_changes_point_read(mcdc_changes *c, const json_t *key_names, const json_t *const *points,
                            size_t n, const mcdc_lsn *lsn, bool has_ts, int64_t commit_us,
                            mcdc_batch_fn fn, void *ctx, mcdc_error *err);
/* Is name one of the capture instances of the tracked table (ignoring
 * case)? A prefix: name may be a statistic cut at some characters. */
int mcdc_changes_is_table_instance(mcdc_changes *c, const char *name, bool prefix, bool *yes,
                                   mcdc_error *err);
/* The capture instance's unique index (index_column_list), its columns in
 * order; borrowed; *n = 0 when it has none. */
const char *const *mcdc_changes_index_keys(const mcdc_changes *c, int *n);
/* The computed columns the capture instance captures ("a, b"; NULL: none):
 * CDC stores NULL for them in every change row, so bronze never holds
 * their values, whether or not the columns option keeps them. Borrowed. */
const char *mcdc_changes_computed(const mcdc_changes *c);
/* The tracked table, "schema.table" (borrowed strings). */
const char *mcdc_changes_source_schema(const mcdc_changes *c);
const char *mcdc_changes_source_table(const mcdc_changes *c);

#endif /* MCDC_CHANGES_H */
