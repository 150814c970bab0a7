/*
 * mcdc_reader.h - reads one LSN range of one capture instance's change table
 * into columnar batches in the reference's output schema (spec §2.2):
 *
 *   _capture_instance utf8, _start_lsn utf8 (0x + 20 hex), _seqval utf8,
 *   _operation int32, _command_id int32 (unless include_command_id is
 *   false), _commit_ts timestamp_ntz (UTC), then the captured columns.
 *
 * Rows come ordered by (__$start_lsn, __$command_id, __$seqval,
 * __$operation), joined to cdc.lsn_time_mapping for the commit time, which
 * is converted to UTC per the clock (one offset per range where possible).
 *
 * Each attempt runs on a fresh connection: ping, wait counter, read, the
 * retention guard (min_lsn re-read; from < min_lsn is MCDC_E_DATALOSS, never
 * an empty success), wait counter again; the batch's last range also reads
 * max_lsn and three commit times (to_lsn, min_lsn, max_lsn). A transient
 * error (connection lost, timeout, deadlock) retries on a new connection
 * with bounded exponential backoff and resumes after the last row handed to
 * the sink: no row is lost or delivered twice.
 */
#ifndef MCDC_READER_H
#define MCDC_READER_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_cdc_client.h"
#include "mcdc_connstr.h"
#include "mcdc_driver.h"
#include "mcdc_lsn.h"

typedef struct mcdc_reader_options {
    int version;                  /* 1 */
    const char *capture_instance; /* required */
    bool include_command_id;      /* includeCommandId, default true */
    /* Captured columns to read, with the types to read them as (a cast on
     * read). NULL = every captured column with its default type (§2.2).
     * Borrowed. */
    const mcdc_schema *columns;
    /* Optional, one per column: false selects a typed NULL (a column the
     * instance lacks). NULL = all present. Borrowed. */
    const bool *present;
    /* Optional, one per column: its mcdc_sql_read (how it is selected, from
     * its SQL Server type). NULL = all as they are. Borrowed. */
    const uint8_t *reads;
    mcdc_clock clock;             /* server clock; default UTC */
    int64_t batch_rows;           /* arrowBatchSize; default 10000 */
    int64_t batch_bytes_max;      /* default 64 MiB */
    int retries_max;              /* transient retries; default MCDC_RETRIES_MAX */
    int backoff_ms_first;         /* first backoff; doubles, plus jitter up to itself */
    bool fail_on_data_loss;       /* default true; false: report in metrics instead */
} mcdc_reader_options;

#define MCDC_READER_OPTIONS_INIT                                                        \
    {1, NULL, true, NULL, NULL, NULL, {MCDC_CLOCK_UTC, {0}, 0}, 10000, 64 * 1024 * 1024, \
     MCDC_RETRIES_MAX, MCDC_RETRY_BACKOFF_MS_FIRST, true}

/* Opens a new connection (each attempt calls it once). */
typedef int (*mcdc_connect_fn)(void *ctx, mcdc_conn **out, mcdc_error *err);

/* The built-in connector: FreeTDS over a parsed connection string. */
typedef struct mcdc_connstr_connector {
    const mcdc_connstr *connstr; /* borrowed */
    mcdc_conn_options options;
} mcdc_connstr_connector;
int mcdc_connect_connstr(void *ctx, mcdc_conn **out, mcdc_error *err);

/* Facts of one range read (ADR 0014). Durations in their units. */
typedef struct mcdc_reader_metrics {
    mcdc_lsn from_lsn, to_lsn;
    int64_t rows;
    int64_t bytes;           /* mcdc_batch_bytes of the delivered batches */
    double seconds;          /* wall time of the whole read, retries included */
    int attempts;            /* 1 + retries */
    double rtt_ms;           /* one SELECT 1 before the read */
    bool rtt_known;
    int64_t network_wait_ms; /* ASYNC_NETWORK_IO delta of the reading session */
    bool network_wait_known;
    /* Data loss seen with fail_on_data_loss = false. */
    bool data_lost;
    mcdc_lsn min_lsn_after;  /* min_lsn read by the guard */
    /* Last range only (measured_position): where the stream stands. */
    bool measured_position;
    int64_t to_commit_ts_us;           /* commit time of to_lsn (UTC) */
    bool to_commit_ts_known;
    int64_t retention_watermark_ts_us; /* commit time of min_lsn (UTC) */
    bool retention_watermark_known;
    mcdc_lsn max_lsn;
    int64_t source_max_commit_ts_us;   /* commit time of max_lsn (UTC) */
    bool source_max_commit_ts_known;
    double capture_lag_seconds;        /* now (UTC) - source_max_commit_ts */
} mcdc_reader_metrics;

/* ---- planning (§3.6) ---------------------------------------------------------
 * Commit-aligned ranges of [from, to] from split_points tiles: adjacent tiles
 * merge until a range holds >= min_rows change rows; a short tail (with the
 * idle stretch up to `to`) joins the previous range; the final range ends at
 * `to` and is marked last. No tiles: one range [from, to]. to < from: none.
 * *out owned by the caller (mcdc_free). */
#define MCDC_MIN_ROWS_PER_RANGE 50000
typedef struct mcdc_lsn_range {
    mcdc_lsn from, to;     /* closed interval, commit-aligned */
    int64_t rows_estimate;
    bool last;             /* ends at the batch end: measures the stream position */
    int32_t instance;      /* the change feed's (mcdc_changes.h): 0 its own capture instance,
                              else the piece's it was planned for */
} mcdc_lsn_range;
int mcdc_reader_plan_ranges(mcdc_lsn_range **out, int *n_out, const mcdc_split_point *tiles,
                            int n_tiles, const mcdc_lsn *from, const mcdc_lsn *to,
                            int64_t min_rows, mcdc_error *err);

/* The output schema for `captured` columns (§2.2). Caller unrefs. A
 * captured column with a reserved name is refused (MCDC_E_INVALID). */
int mcdc_reader_output_schema(mcdc_schema **out, const mcdc_schema *captured,
                              bool include_command_id, mcdc_error *err);
/* The column names mssql-cdc reserves: the output schema's metadata
 * columns and the ones bronze adds (_batch_id, _snapshot, _chunk), in any
 * case (reference §2.1: a source column named like one is refused at load). */
bool mcdc_is_reserved_column(const char *name);
/* The one check of captured column names: fields [first, n_fields) of s
 * must not have a reserved name, else MCDC_E_INVALID naming the column. */
int mcdc_check_reserved_columns(const mcdc_schema *s, int32_t first, mcdc_error *err);
/* Every captured column of ci with its default type, in column order, and
 * in *reads (may be NULL) how each is selected: an mcdc_sql_read per field of
 * *out (owned), or NULL when every one reads as it is. A column whose SQL
 * Server type has no default (a CLR type of the user's) is left out of *out
 * and named in *unreadable ("name (type), ...", owned, NULL when none): a
 * stream whose columns option leaves it out reads the rest, one that lists
 * it gives its type there. Computed columns of the table
 * (sys.columns.is_computed), NULL in every change row, are named in
 * *computed (owned, NULL when none; may be NULL) and left out unless
 * keep_computed (the columns option may list them: they read NULL). */
int mcdc_reader_infer_columns(mcdc_schema **out, uint8_t **reads, char **unreadable,
                              char **computed, bool keep_computed, mcdc_cdc_client *c,
                              const char *ci, mcdc_error *err);
/* After a fetch into b, whose captured columns start at column first: the
 * values the read expressions leave to finish (reads NULL: none), the
 * spatial ones made EWKB (mcdc_ewkb.h). */
int mcdc_reader_finish_reads(mcdc_batch *b, int32_t first, const uint8_t *reads, int32_t n,
                             mcdc_error *err);

/* Reads [from, to] (closed) into batches handed to sink. `last` marks the
 * batch's last range (measures the stream position). metrics may be NULL. */
int mcdc_reader_read_range(mcdc_reader_metrics *metrics, const mcdc_reader_options *opt,
                           mcdc_connect_fn connect, void *connect_ctx, const mcdc_lsn *from,
                           const mcdc_lsn *to, bool last, mcdc_batch_fn sink,
                           void *sink_ctx, mcdc_error *err);

/* An error (rc, err) of a query naming ci's change table: a missing SELECT
 * grant there (HAS_PERMS_BY_NAME, language-independent) becomes
 * MCDC_E_PERMISSION with the GRANT to run; a missing table says the
 * instance is gone. Returns the code err holds. */
int mcdc_reader_diagnose_error(mcdc_cdc_client *c, const char *ci, int rc, mcdc_error *err);

/* The batch's _capture_instance column (its first) filled with ci for its
 * `rows` rows (decoders fill the other columns and leave this one). */
int mcdc_reader_fill_capture_instance(mcdc_batch *b, const char *ci, int64_t rows,
                                      mcdc_error *err);
/* A snapshot read's batch (its captured columns fetched from column
 * first_captured on): the columns between _capture_instance and them, the
 * same in every row of the snapshot, filled for `rows` rows: _start_lsn
 * lsn_text, _operation 0, _commit_ts commit_us (NULL unless has_ts),
 * _seqval and _command_id NULL. */
int mcdc_reader_fill_snapshot_stamp(mcdc_batch *b, int32_t first_captured, const char *lsn_text,
                                    bool has_ts, int64_t commit_us, int64_t rows,
                                    mcdc_error *err);

#endif /* MCDC_READER_H */
