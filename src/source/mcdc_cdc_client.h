/*
 * mcdc_cdc_client.h - the SQL Server CDC queries of the reference (spec
 * reference.md §3.1), sent as text over the driver seam.
 *
 * LSNs cross as hex text: parameters as CONVERT(binary(10), ?, 1), results
 * as CONVERT(varchar(22), x, 1). Only documented objects are read:
 * sys.fn_cdc_*, cdc.lsn_time_mapping, the change tables cdc.[<ci>_CT],
 * sys.sp_cdc_help_change_data_capture, sys.sp_cdc_get_captured_columns,
 * sys.sp_cdc_get_ddl_history, SERVERPROPERTY and the session's own wait
 * statistics. Capture instance names are validated before being inlined.
 *
 * Commit times: cdc.lsn_time_mapping.tran_end_time is on the server's local
 * clock; every time returned here is UTC, converted in T-SQL according to a
 * mcdc_clock (§3.3).
 */
#ifndef MCDC_CDC_CLIENT_H
#define MCDC_CDC_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_driver.h"
#include "mcdc_keyrange.h"
#include "mcdc_lsn.h"
#include "mcdc_sql_types.h"
#include "mcdc_util.h"

/* ---- the server clock (§3.3) ---------------------------------------------- */
typedef enum mcdc_clock_kind {
    MCDC_CLOCK_UTC = 0, /* server clock is UTC: no conversion */
    MCDC_CLOCK_ZONE,    /* a Windows zone name: AT TIME ZONE, range offsets */
    MCDC_CLOCK_FIXED    /* pre-2022 fallback: a fixed offset read from the server */
} mcdc_clock_kind;

#define MCDC_ZONE_NAME_MAX 128
typedef struct mcdc_clock {
    mcdc_clock_kind kind;
    char zone[MCDC_ZONE_NAME_MAX]; /* MCDC_CLOCK_ZONE */
    int offset_minutes;            /* MCDC_CLOCK_FIXED: local = UTC + offset */
} mcdc_clock;

/* "UTC", the zone name, or "UTC+HH:MM" / "UTC-HH:MM" for a fixed offset. */
void mcdc_clock_describe(char out[MCDC_ZONE_NAME_MAX + 16], const mcdc_clock *c);
/* From the sourceTimeZone option: "UTC" (any case) or a zone name. "auto" is
 * resolved by mcdc_cdc_detect_clock instead. Zone names are checked for
 * length and characters (they are inlined as N'' literals). */
int mcdc_clock_from_name(mcdc_clock *out, const char *name, mcdc_error *err);
/* T-SQL converting the local datetime expression `t` to UTC datetime2(3)
 * under clock c, with a known offset (offset_known) or row by row; row by
 * row, a named zone's repeated hour reads as its first pass. A commit's
 * time goes through the client's LSN-ordered rule instead
 * (mcdc_cdc_commit_time_sql, mcdc_cdc_lsn_to_time), which builds on this. */
int mcdc_clock_sql_utc(mcdc_buf *out, const mcdc_clock *c, const char *t, bool offset_known,
                       int offset_minutes, mcdc_error *err);

/* ---- the client ------------------------------------------------------------ */
typedef struct mcdc_cdc_client mcdc_cdc_client;

/* Wraps conn (borrowed: the caller closes it after freeing the client). */
int mcdc_cdc_client_create(mcdc_cdc_client **out, mcdc_conn *conn, mcdc_error *err);
void mcdc_cdc_client_free(mcdc_cdc_client *c);
mcdc_conn *mcdc_cdc_client_conn(mcdc_cdc_client *c);
/* The clock used for commit times (default UTC). */
void mcdc_cdc_set_clock(mcdc_cdc_client *c, const mcdc_clock *clock);
const mcdc_clock *mcdc_cdc_clock(const mcdc_cdc_client *c);

/* §3.1 row 1. A NULL max_lsn (capture never wrote) is the zero LSN with
 * *out_was_null set (out_was_null may be NULL). */
int mcdc_cdc_max_lsn(mcdc_lsn *out, bool *out_was_null, mcdc_cdc_client *c, mcdc_error *err);
/* Row 2. NULL or zero: the zero LSN (instance missing, no permission, or
 * capture has not processed the enable yet). */
int mcdc_cdc_min_lsn(mcdc_lsn *out, mcdc_cdc_client *c, const char *ci, mcdc_error *err);
/* Row 3, on the server. */
int mcdc_cdc_increment_lsn(mcdc_lsn *out, mcdc_cdc_client *c, const mcdc_lsn *lsn, mcdc_error *err);
int mcdc_cdc_decrement_lsn(mcdc_lsn *out, mcdc_cdc_client *c, const mcdc_lsn *lsn, mcdc_error *err);
/* Row 4: UTC commit time (microseconds since 1970, millisecond precision)
 * of the mapping entry at lsn, or with at_or_before of the latest entry at
 * or before it. *out_found = false when there is none. */
int mcdc_cdc_lsn_to_time(int64_t *out_us, bool *out_found, mcdc_cdc_client *c, const mcdc_lsn *lsn,
                         bool at_or_before, mcdc_error *err);
/* Row 5: the largest commit LSN at or before a UTC time (whole seconds),
 * the time converted to the server clock first. *out_found = false when
 * there is none (the function returns the zero LSN). */
int mcdc_cdc_time_to_lsn(mcdc_lsn *out, bool *out_found, mcdc_cdc_client *c, int64_t utc_us,
                         mcdc_error *err);
/* Row 6: the n-th commit (mapping entry) after lsn, or the last one when
 * fewer exist; *out_found = false when none. n >= 1. */
int mcdc_cdc_nth_commit_after(mcdc_lsn *out, bool *out_found, mcdc_cdc_client *c,
                              const mcdc_lsn *lsn, int64_t n, mcdc_error *err);

/* Row 7: NTILE(n) over the change rows of [from, to]. Tiles come back in
 * order with strictly increasing bounds (a commit split across tiles is
 * kept whole in the first; its rows counted there). */
typedef struct mcdc_split_point {
    mcdc_lsn bound;      /* largest commit LSN of the tile */
    mcdc_lsn next_start; /* sys.fn_cdc_increment_lsn(bound) */
    int64_t rows;
} mcdc_split_point;
/* *out owned by the caller (mcdc_free), *out_n entries. */
int mcdc_cdc_split_points(mcdc_split_point **out, int *out_n, mcdc_cdc_client *c, const char *ci,
                          const mcdc_lsn *from, const mcdc_lsn *to, int n, mcdc_error *err);

/* Row 14: captured columns, sorted by column_ordinal. */
typedef struct mcdc_captured_column {
    char *name;        /* owned */
    char *data_type;   /* owned, lowercase SQL Server type name */
    int column_id;
    int ordinal;
    int precision;     /* numeric_precision */
    int scale;         /* numeric_scale */
    int max_length;    /* character_maximum_length (-1 = max) */
    int datetime_precision;
} mcdc_captured_column;
int mcdc_cdc_captured_columns(mcdc_captured_column **out, int *out_n, mcdc_cdc_client *c,
                              const char *ci, mcdc_error *err);
void mcdc_captured_columns_free(mcdc_captured_column *cols, int n);
/* §2.2 type mapping of one captured column, by the type table the TDS
 * backends use (mcdc_sql_types.h), with the types the reference refuses
 * (sql_variant, geography, geometry, hierarchyid) read through their
 * expressions. A CLR type of the user's (an unknown name):
 * MCDC_E_UNSUPPORTED "no default type ... pass columns"; a decimal with a
 * bad precision MCDC_E_PROTOCOL. */
int mcdc_cdc_map_type(mcdc_type_id *out_type, int32_t *out_precision, int32_t *out_scale,
                      const mcdc_captured_column *col, mcdc_error *err);

/* Row 15: capture instances (of one table, or all when schema/table are
 * NULL), oldest first (create_date, then start_lsn). */
typedef struct mcdc_capture_instance {
    char *name;           /* owned */
    char *source_schema;  /* owned */
    char *source_table;   /* owned */
    mcdc_lsn start_lsn;
    int64_t create_date_us; /* server clock, as stored */
    int n_keys;
    char **keys;          /* owned: index_column_list "[a], [b]" unquoted */
} mcdc_capture_instance;
int mcdc_cdc_capture_instances(mcdc_capture_instance **out, int *out_n, mcdc_cdc_client *c,
                               const char *source_schema, const char *source_table,
                               mcdc_error *err);
void mcdc_capture_instances_free(mcdc_capture_instance *v, int n);

/* Row 17: DDL history of an instance with ddl_lsn in (from, to]. */
typedef struct mcdc_ddl_event {
    mcdc_lsn ddl_lsn;
    char *command; /* owned */
} mcdc_ddl_event;
int mcdc_cdc_ddl_history(mcdc_ddl_event **out, int *out_n, mcdc_cdc_client *c, const char *ci,
                         const mcdc_lsn *from, const mcdc_lsn *to, mcdc_error *err);
void mcdc_ddl_events_free(mcdc_ddl_event *v, int n);

/* Row 9: the server clock for sourceTimeZone=auto. SQL Server 2022+ (major
 * version >= 16) or Azure (engine edition 5, 8): CURRENT_TIMEZONE_ID();
 * older: a fixed offset with a warning logged. */
int mcdc_cdc_detect_clock(mcdc_clock *out, mcdc_cdc_client *c, mcdc_error *err);
/* The server's clock now, UTC (SYSUTCDATETIME()), microseconds. */
int mcdc_cdc_utc_now(int64_t *out_us, mcdc_cdc_client *c, mcdc_error *err);
/* Row 10: the one offset valid for all commits of [from, to] under a zone
 * clock (range < 7 days, same offset 3 h either side), or *out_known =
 * false. */
/* A zone named by sourceTimeZone that the server does not know:
 * MCDC_E_INVALID naming it and what to give (other clocks: MCDC_OK). */
int mcdc_cdc_check_zone(mcdc_cdc_client *c, const mcdc_clock *clock, mcdc_error *err);
int mcdc_cdc_range_offset(int *out_minutes, bool *out_known, mcdc_cdc_client *c,
                          const mcdc_lsn *from, const mcdc_lsn *to, mcdc_error *err);
/* Row 11: DST fall-back drops (clock going back) relevant to [from, to]. */
typedef struct mcdc_clock_drop {
    mcdc_lsn lsn;
    char local_time[32]; /* the entry's tran_end_time, ISO 8601 (style 126) */
} mcdc_clock_drop;
#define MCDC_CLOCK_DROPS_MAX 16
int mcdc_cdc_clock_drops(mcdc_clock_drop *out, int *out_n, mcdc_cdc_client *c, const mcdc_lsn *from,
                         const mcdc_lsn *to, mcdc_error *err);
/* The UTC commit-time expression for a read of [from, to]: one offset when
 * the range allows it (row 10), else row by row with fall-back drops (row
 * 11). `t` is the local datetime expression, `lsn` the LSN expression. */
int mcdc_cdc_commit_time_sql(mcdc_buf *out, mcdc_cdc_client *c, const mcdc_lsn *from,
                             const mcdc_lsn *to, const char *t, const char *lsn, mcdc_error *err);

/* Row 12: round trip of SELECT 1 in milliseconds. */
int mcdc_cdc_ping(double *out_ms, mcdc_cdc_client *c, mcdc_error *err);
/* Row 13: this session's ASYNC_NETWORK_IO wait_time_ms (missing row = 0).
 * Never fails: *out_known = false when the query errs. */
void mcdc_cdc_network_wait_ms(int64_t *out_ms, bool *out_known, mcdc_cdc_client *c);
/* Row 25: 1 when the login may SELECT cdc.[<ci>_CT], 0 when not, -1 when
 * unknown (the instance is gone: min_lsn is zero). */
int mcdc_cdc_has_select(int *out, mcdc_cdc_client *c, const char *ci, mcdc_error *err);
/* The same without the reference's gate: 1 when the login may SELECT
 * cdc.[<ci>_CT], 0 when that table exists and it may not (fn_cdc_get_min_lsn
 * is zero then, and sp_cdc_help_change_data_capture leaves the instance
 * out), -1 when there is no such table. */
int mcdc_cdc_may_read(int *out, mcdc_cdc_client *c, const char *ci, mcdc_error *err);
/* SUSER_SNAME()/USER_NAME() for GRANT messages; *out owned (mcdc_free). */
/* The capture DMVs' numbers into out's visible...errors_listed (one
 * query); a permission error (no VIEW DATABASE STATE) is visible = false
 * and MCDC_OK. */
int mcdc_cdc_capture_health(mcdc_capture_health *out, mcdc_cdc_client *c, mcdc_error *err);
int mcdc_cdc_user_name(char **out, mcdc_cdc_client *c, mcdc_error *err);
/* Every change table's row count (sys.dm_db_partition_stats, one query);
 * a permission error (no VIEW DATABASE STATE) is *visible false and
 * MCDC_OK. *out owned (mcdc_free), NULL when none. */
int mcdc_cdc_change_table_rows(mcdc_change_table_rows **out, size_t *n, bool *visible,
                               mcdc_cdc_client *c, mcdc_error *err);

/* A captured column as the SELECTs read it (without AS): alias.[name] as it
 * is, or through the expression of its type's mcdc_sql_read
 * (mcdc_sql_types.h). */
int mcdc_cdc_column_sql(mcdc_buf *out, const char *alias, const char *name, uint8_t read,
                        mcdc_error *err);
/* The batch type a read gives (its expression's; MCDC_READ_VALUE: 0, any). */
mcdc_type_id mcdc_cdc_read_type(uint8_t read);

/* Row 8 text: the change-table read (for the reader and for pinning). cols
 * are the captured columns to read with their batch types; present[i] false
 * selects a typed NULL; reads[i] (reads NULL: all MCDC_READ_VALUE) how a
 * present one is selected. after_* (may be NULL) resumes after a row key. */
typedef struct mcdc_row_key {
    mcdc_lsn start_lsn;
    int32_t command_id;
    mcdc_lsn seqval;
    int32_t operation;
} mcdc_row_key;
int mcdc_cdc_changes_sql(mcdc_buf *out, const char *ci, const mcdc_field *cols,
                         const bool *present, const uint8_t *reads, int n_cols,
                         bool include_command_id,
                         const char *commit_time_sql, const mcdc_row_key *after,
                         mcdc_error *err);

/* ---- the tracked table (snapshots, reference §2.4.1, §3.7) ----------------
 * Key columns, bounds and range predicates: mcdc_keyrange.h. */

/* How a query reads the source table: every one names its isolation level
 * (never READ UNCOMMITTED) and sets LOCK_TIMEOUT. */
typedef struct mcdc_source_read {
    bool snapshot_isolation; /* SNAPSHOT, else READ COMMITTED */
    int64_t lock_timeout_ms; /* < 0: wait forever */
} mcdc_source_read;

/* After a failed read of the source table: when err is SQL Server's 3952
 * (SNAPSHOT not allowed in the database), says what to do. */
void mcdc_source_read_hint(mcdc_error *err);

/* The text of one snapshot read: the captured columns of the source
 * table's rows, [lo, hi) of keys (the pieces of mcdc_key_select, their
 * parameters appended to params). The stream's other columns are the same
 * in every row of a snapshot (_operation 0, _start_lsn its LSN, _commit_ts
 * its commit time, _seqval and _command_id NULL): the reader fills them a
 * batch at a time (mcdc_reader_fill_snapshot_stamp) rather than the server
 * sending them in every row (about 30 of a row's bytes on the wire, and a
 * cell each to decode). */
typedef struct mcdc_snapshot_query {
    const char *source_schema, *source_table;
    const mcdc_field *cols;          /* the captured columns read, n_cols >= 1 */
    int n_cols;
    const char *const *source_names; /* per column: its name in the table now (matched by
                                        column_id), NULL when dropped: a typed NULL */
    const uint8_t *reads;            /* per column: its mcdc_sql_read; NULL: all values */
    const mcdc_key_col *keys;        /* the key columns of the range; n_keys 0: the table */
    int n_keys;
    const json_t *lo, *hi;           /* bounds (mcdc_keyrange.h); NULL: open */
    mcdc_source_read read;
} mcdc_snapshot_query;
int mcdc_cdc_snapshot_sql(mcdc_buf *out, mcdc_sql_params *params, const mcdc_snapshot_query *q,
                          mcdc_error *err);

/* MIN and MAX of key column k, two seeks; an integer key's within
 * [*from, *to) when given (NULL: open). *lo and *hi are bounds (JSON, owned),
 * both NULL when no row has a key there. */
int mcdc_cdc_key_min_max(json_t **lo, json_t **hi, mcdc_cdc_client *c, const char *source_schema,
                         const char *source_table, const mcdc_key_col *k, const int64_t *from,
                         const int64_t *to, const mcdc_source_read *rd, mcdc_error *err);

/* The rows of an integer key's slice [index * width, (index + 1) * width)
 * (a grid aligned at 0), non-NULL keys within [*from, *to) (NULL: open),
 * counted in one GROUP BY. Slices holding rows only, in order; *out owned
 * (mcdc_free). At most MCDC_KEY_SLICES_MAX + 1. */
typedef struct mcdc_key_slice {
    int64_t index;
    int64_t rows;
} mcdc_key_slice;
int mcdc_cdc_key_slices(mcdc_key_slice **out, int *out_n, mcdc_cdc_client *c,
                        const char *source_schema, const char *source_table, const mcdc_key_col *k,
                        int64_t width, const int64_t *from, const int64_t *to,
                        const mcdc_source_read *rd, mcdc_error *err);

/* Reconcile's Tier 1 (reference §3.1 row 20). A key's ordinal is the
 * integer as bigint or a date's day number from 1970-01-01; other keys are
 * MCDC_E_INVALID. A 128-bit two's complement value: */
typedef struct mcdc_wide {
    uint64_t lo;
    int64_t hi;
} mcdc_wide;
/* MIN and MAX of k's ordinal (two seeks); *found false for no non-NULL key. */
int mcdc_cdc_key_ordinal_extent(bool *found, int64_t *lo, int64_t *hi, mcdc_cdc_client *c,
                                const char *source_schema, const char *source_table,
                                const mcdc_key_col *k, const mcdc_source_read *rd,
                                mcdc_error *err);
/* Per bucket floor(ordinal / width) holding rows (NULL keys in none), in
 * one scan with GROUP BY: COUNT_BIG(*) and SUM of the ordinals as
 * decimal(38,0). In bucket order; *out owned (mcdc_free); more than
 * max_buckets is MCDC_E_PROTOCOL. */
typedef struct mcdc_key_bucket {
    int64_t index;
    int64_t rows;
    mcdc_wide sum;
} mcdc_key_bucket;
int mcdc_cdc_key_buckets(mcdc_key_bucket **out, int *out_n, mcdc_cdc_client *c,
                         const char *source_schema, const char *source_table, const mcdc_key_col *k,
                         int64_t width, int max_buckets, const mcdc_source_read *rd,
                         mcdc_error *err);
/* COUNT_BIG(*) of the table (the whole-table count of other keys). */
int mcdc_cdc_row_count(int64_t *rows, mcdc_cdc_client *c, const char *source_schema,
                       const char *source_table, const mcdc_source_read *rd, mcdc_error *err);

/* sys.sp_spaceused's rows of the table (an estimate: the partitions' row
 * counts). */
int mcdc_cdc_row_estimate(int64_t *rows, mcdc_cdc_client *c, const char *source_schema,
                          const char *source_table, mcdc_error *err);

/* The largest key of the table (TOP (1) ... ORDER BY each DESC), a bound;
 * *out NULL for an empty table. Owned. */
int mcdc_cdc_key_max(json_t **out, mcdc_cdc_client *c, const char *source_schema,
                     const char *source_table, const mcdc_key_col *keys, int n,
                     const mcdc_source_read *rd, mcdc_error *err);

/* The key `skip` rows after lo within [lo, hi) in key order (skip 0: the
 * first key at or after lo), by seeks: each piece of the range takes its
 * first skip + 1 keys (TOP, ORDER BY), their UNION ALL is ordered and the
 * (skip + 1)-th taken (OFFSET skip ROWS FETCH NEXT 1 ROWS ONLY). *out NULL
 * when the range holds no more than skip rows. Owned. */
int mcdc_cdc_key_bound(json_t **out, mcdc_cdc_client *c, const char *source_schema,
                       const char *source_table, const mcdc_key_col *keys, int n, const json_t *lo,
                       const json_t *hi, int64_t skip, const mcdc_source_read *rd,
                       mcdc_error *err);

/* The table's columns now (sys.columns): name, column_id and collation
 * (NULL for columns of no character type). *out owned
 * (mcdc_table_columns_free). */
typedef struct mcdc_table_column {
    char *name;
    int column_id;
    char *collation;
    bool computed;   /* sys.columns.is_computed: CDC stores NULL for it in every change row */
} mcdc_table_column;
int mcdc_cdc_table_columns(mcdc_table_column **out, int *out_n, mcdc_cdc_client *c,
                           const char *source_schema, const char *source_table, mcdc_error *err);
void mcdc_table_columns_free(mcdc_table_column *v, int n);

/* The probe of many capture instances (mcdc_changes_probe_round).
 * mcdc_cdc_probe_min_lsns: the start_lsn of cdc.change_tables of every item
 * listed there past above (NULL: every item listed); has_min false for the
 * others. The matching is by name whatever the order of the items and of
 * the server's rows. mcdc_cdc_probe_moved: which asked items have a
 * change-table row in (from, max]: one query per MCDC_PROBE_BRANCHES_MAX
 * asked items behind max, *queries counting them. Each branch takes 3
 * parameters: 600 keep a query at 1,800, under SQL Server's 2,100 per
 * request should they ever travel as RPC parameters (they are inlined
 * today), and its UNION ALL small enough to compile quickly. */
#define MCDC_PROBE_BRANCHES_MAX 600
struct mcdc_probe_item;
int mcdc_cdc_probe_min_lsns(mcdc_cdc_client *c, struct mcdc_probe_item *items, int n,
                            const mcdc_lsn *above, mcdc_error *err);
int mcdc_cdc_probe_moved(mcdc_cdc_client *c, struct mcdc_probe_item *items, int n,
                         const mcdc_lsn *max, int *queries, mcdc_error *err);

#endif /* MCDC_CDC_CLIENT_H */
