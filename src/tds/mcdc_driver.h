/*
 * mcdc_driver.h - the driver seam: one SQL Server connection, text queries
 * with text parameters, results decoded into columnar batches.
 *
 * Every parameter crosses as text and the T-SQL converts it on the server
 * (LSNs as CONVERT(binary(10), ?, 1)), so no backend binds binary or dates.
 * `?` placeholders are replaced by N'...' literals with quotes doubled (NULL
 * for a NULL parameter); a `?` inside a string literal, a [bracketed] name or
 * a comment is left alone.
 *
 * The built-in backend is FreeTDS db-lib (mcdc_driver_freetds.c). Other
 * backends, and the fakes of the unit tests, plug in through
 * mcdc_conn_wrap() with their own ops.
 *
 * Threads: a connection and its results belong to one thread at a time.
 * Errors: server errors fill mcdc_error.server_* and the status says how to
 * react (mcdc_driver_classify): MCDC_E_TRANSIENT (retry on a fresh
 * connection), MCDC_E_PERMISSION, MCDC_E_NOTFOUND, MCDC_E_SERVER.
 */
#ifndef MCDC_DRIVER_H
#define MCDC_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_connstr.h"
#include "mcdc_util.h"

typedef struct mcdc_conn mcdc_conn;
typedef struct mcdc_result mcdc_result;

/* ---- connecting ---------------------------------------------------------- */
typedef struct mcdc_conn_options {
    int version;             /* 1 */
    int login_timeout_s;     /* 0 = the connection string's, else 30 */
    int query_timeout_s;     /* 0 = wait forever */
    const char *app_name;    /* NULL = the connection string's App, else "mssql-cdc" */
    int packet_bytes;        /* 0 = MCDC_TDS_PACKET_BYTES_MAX (32767) */
    /* "native" (our own TDS client, TLS included), "freetds" (db-lib), or
     * NULL / "auto": native, except a named instance without a port (SQL
     * Browser lookup): FreeTDS. */
    const char *backend;
    /* Test fixtures: the native backend appends every reply after the login
     * (raw packets, server to client only) to this file. NULL: none. */
    const char *record_path;
} mcdc_conn_options;
#define MCDC_CONN_OPTIONS_INIT {1, 0, 0, NULL, 0, NULL, NULL}

/* Opens a connection on the backend options->backend selects. A wrong
 * login is MCDC_E_LOGIN with server_number 18456; an unreachable
 * server MCDC_E_TRANSIENT. Free with mcdc_conn_close. */
int mcdc_conn_open(mcdc_conn **out, const mcdc_connstr *cs, const mcdc_conn_options *opt,
                   mcdc_error *err);
/* The FreeTDS db-lib backend (TDS 7.4, UTF-8, SET TEXTSIZE 2147483647,
 * TLS through GnuTLS when the connection string asks for it). */
int mcdc_conn_open_freetds(mcdc_conn **out, const mcdc_connstr *cs, const mcdc_conn_options *opt,
                           mcdc_error *err);
/* The same over our own TDS 7.4 client (mcdc_driver_native.c): no TLS
 * (Encrypt=yes/strict is MCDC_E_UNSUPPORTED), no named instances. */
int mcdc_conn_open_native(mcdc_conn **out, const mcdc_connstr *cs, const mcdc_conn_options *opt,
                          mcdc_error *err);
void mcdc_conn_close(mcdc_conn *c);
/* Server session id (@@SPID), or 0 when unknown. */
int mcdc_conn_spid(const mcdc_conn *c);
/* True once the connection is known to be unusable (lost, timed out). */
bool mcdc_conn_is_dead(const mcdc_conn *c);

/* ---- queries --------------------------------------------------------------
 * exec sends sql with params inlined and positions the result on the first
 * result set that has columns (statements before it, like SET, are run).
 * Only one result may be open per connection: free it before the next
 * exec. A result set with no rows is not an error. */
int mcdc_conn_exec(mcdc_result **out, mcdc_conn *c, const char *sql, const char *const *params,
                   int n_params, mcdc_error *err);
/* Runs sql and discards any rows (SET ..., EXEC ...). */
int mcdc_conn_run(mcdc_conn *c, const char *sql, const char *const *params, int n_params,
                  mcdc_error *err);
/* First column of the first row as text (*out_text owned by the caller,
 * mcdc_free), or *out_text = NULL for SQL NULL or no row. The value's
 * canonical text (mcdc_value_text.h: integers in decimal, decimals exact,
 * binary as 0x + uppercase hex, datetimes ISO 8601), but a bit is 1 or 0. */
int mcdc_conn_scalar(char **out_text, mcdc_conn *c, const char *sql, const char *const *params,
                     int n_params, mcdc_error *err);

/* The result set's columns mapped to batch types (reference §2.2 mapping:
 * tinyint -> int16, money -> decimal(19,4), datetimeoffset -> UTC, time and
 * uniqueidentifier -> utf8 ...). Borrowed; valid until mcdc_result_free. */
const mcdc_schema *mcdc_result_schema(const mcdc_result *r);
/* Decodes up to rows_max rows into columns [first_col, first_col + ncols)
 * of `into` (ncols = the result's column count). Those columns' types may
 * differ from mcdc_result_schema when a cast exists (any integer to a wider
 * integer, float or decimal; real to double; decimal and money to decimal
 * of no smaller scale or to double; date to timestamp; anything to utf8); else
 * MCDC_E_SCHEMA naming the column. Stops early before `into` passes
 * bytes_max (0 = MCDC_BATCH_BYTES_MAX / 4). *out_rows = rows appended; 0
 * means the result set is finished (the remaining results were drained and
 * checked for errors). Does not seal `into`. */
int mcdc_result_fetch(mcdc_result *r, mcdc_batch *into, int32_t first_col, int64_t rows_max,
                      int64_t bytes_max, int64_t *out_rows, mcdc_error *err);
/* Convenience: a new batch of up to rows_max rows in the result's own
 * schema, sealed; *out = NULL at the end. */
int mcdc_result_next_batch(mcdc_batch **out, mcdc_result *r, int64_t rows_max, mcdc_error *err);
/* Cancels what is left of the result (dbcancel) and frees it. NULL-safe. */
void mcdc_result_free(mcdc_result *r);

/* ---- helpers shared by every backend ------------------------------------ */
/* Appends sql to out with each `?` replaced by the next parameter as an
 * N'...' literal (or NULL). The count of `?` must equal n_params. */
int mcdc_sql_inline_params(mcdc_buf *out, const char *sql, const char *const *params,
                           int n_params, mcdc_error *err);
/* Date and time values as text the way SQL Server's CONVERT style 121
 * writes them, for both backends: "YYYY-MM-DD[ HH:MM:SS[.f...]][ +HH:MM]".
 * days1900: days since 1900-01-01; ticks100ns: time of day in 100 ns; a
 * datetimeoffset's date and time are UTC and shown at its offset. Returns
 * the length written (buf of 64 bytes suffices). */
int mcdc_driver_datetime_text(char *buf, size_t cap, int64_t days1900, uint64_t ticks100ns,
                              int scale, bool with_time, bool with_offset, int offset_min);
/* A time of day (100 ns units) the way SQL Server writes time(scale):
 * "HH:MM:SS[.f...]" with `scale` fraction digits (0-7). Returns the length
 * (buf of 32 bytes suffices). */
int mcdc_driver_time_text(char *buf, size_t cap, uint64_t ticks100ns, int scale);
/* A uniqueidentifier's 16 wire bytes as SQL Server prints it: 36
 * upper-case characters "8-4-4-4-12" (no NUL), the first three groups
 * being little-endian on the wire. */
void mcdc_driver_guid_text(char out[36], const uint8_t wire[16]);
/* Status for a SQL Server error number and severity (class):
 * MCDC_E_TRANSIENT for deadlock victim 1205, lock/query timeouts, Azure
 * throttling and unavailable database (40501, 40613, 40197, 49918-49920,
 * 10928, 10929, 4221), connection-level severity >= 20; MCDC_E_PERMISSION
 * for 229/230/262/300 (permission denied); MCDC_E_LOGIN for 18456 (login
 * failed), 18452, 18470 (disabled), 18486 (locked out), 18487 and 18488
 * (password expired, to be changed);
 * MCDC_E_NOTFOUND for 208 (invalid object), 2812 (no procedure), 4060
 * (cannot open database) and 207 (invalid column); else MCDC_E_SERVER. */
int mcdc_driver_classify(int msgno, int severity);
/* Status for a FreeTDS db-lib error code (SYBE*): connection and timeout
 * errors are MCDC_E_TRANSIENT, the rest MCDC_E_IO / MCDC_E_PROTOCOL. */
int mcdc_driver_classify_dblib(int dberr);
/* Wraps a failed login's err (rc its status) with where it went and, for a
 * refused login (MCDC_E_LOGIN) or a database the login cannot open (4060),
 * what to check in the connection string. */
void mcdc_driver_wrap_login(mcdc_error *err, int rc, const char *server, const mcdc_connstr *cs);

/* ---- the seam for other backends ----------------------------------------- */
typedef struct mcdc_result_ops {
    const mcdc_schema *(*schema)(void *impl);
    int (*fetch)(void *impl, mcdc_batch *into, int32_t first_col, int64_t rows_max,
                 int64_t bytes_max, int64_t *out_rows, mcdc_error *err);
    void (*free)(void *impl);
} mcdc_result_ops;

typedef struct mcdc_conn_ops {
    /* sql is final text (parameters inlined). On success fills the result's
     * ops and impl. */
    int (*exec)(void *impl, const char *sql, const mcdc_result_ops **out_ops, void **out_result,
                mcdc_error *err);
    int (*spid)(void *impl);
    bool (*is_dead)(void *impl);
    void (*close)(void *impl);
} mcdc_conn_ops;

/* A connection over custom ops; takes ownership of impl (ops->close frees
 * it, also when this fails). */
int mcdc_conn_wrap(mcdc_conn **out, const mcdc_conn_ops *ops, void *impl, mcdc_error *err);

#endif /* MCDC_DRIVER_H */
