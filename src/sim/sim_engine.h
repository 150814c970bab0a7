/*
 * sim_engine.h - the seam between the simulator's TDS server (tds_server.c)
 * and its SQL Server model (the engine: T-SQL, storage, CDC, capture, clock,
 * faults).
 *
 * The TDS layer owns sockets, packets and token encoding. The engine owns
 * everything a statement means. They meet here: the TDS layer hands the
 * engine a decoded request (SQL batch text or an RPC with typed parameters)
 * and a result sink; the engine calls the sink for each result set, row,
 * message and statement end, in the order SQL Server would send them.
 *
 * Threading: the TDS layer runs one thread per connection and may call into
 * the engine from several threads at once; the engine serialises what must
 * be serialised. Sink callbacks run on the calling thread.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_util.h"

/* SQL Server data types the simulator stores and serves. */
typedef enum sim_type_id {
    SIM_T_BIT = 1,
    SIM_T_TINYINT,
    SIM_T_SMALLINT,
    SIM_T_INT,
    SIM_T_BIGINT,
    SIM_T_REAL,
    SIM_T_FLOAT,
    SIM_T_DECIMAL,      /* also numeric */
    SIM_T_MONEY,
    SIM_T_SMALLMONEY,
    SIM_T_DATE,
    SIM_T_TIME,         /* scale 0-7 */
    SIM_T_DATETIME,
    SIM_T_SMALLDATETIME,
    SIM_T_DATETIME2,    /* scale 0-7 */
    SIM_T_DATETIMEOFFSET, /* scale 0-7 */
    SIM_T_CHAR,
    SIM_T_VARCHAR,
    SIM_T_NCHAR,
    SIM_T_NVARCHAR,
    SIM_T_BINARY,
    SIM_T_VARBINARY,
    SIM_T_UNIQUEIDENTIFIER,
    SIM_T_SQL_VARIANT,  /* a base type and its value (sim_udt.h) */
    SIM_T_XML,          /* text, as SQL Server serializes it */
    SIM_T_HIERARCHYID,  /* CLR UDT: SQL Server's compact binary */
    SIM_T_GEOGRAPHY,    /* CLR UDT: SRID + SQL Server's spatial serialization */
    SIM_T_GEOMETRY      /* the same layout, planar */
} sim_type_id;

/* A hierarchyid value takes at most this many bytes (sys.types'
 * max_length of hierarchyid; its TDS TYPE_INFO max length). */
#define SIM_HID_BYTES_MAX 892

typedef struct sim_type {
    sim_type_id id;
    uint8_t precision; /* decimal/numeric: 1-38 */
    uint8_t scale;     /* decimal scale; time/datetime2/datetimeoffset: 0-7 */
    int32_t length;    /* (n)char/(n)varchar: characters; (var)binary: bytes;
                          -1 = (max). 0 for types without a length. */
} sim_type;

/* A value as the engine hands it out. The representation depends on the
 * column's sim_type (the TDS layer converts to the wire format):
 *   bit, tinyint..bigint          SIM_V_INT  (i)
 *   real, float                   SIM_V_REAL (f)
 *   decimal, money, smallmoney    SIM_V_TEXT canonical decimal "-123.4500"
 *   date                          SIM_V_TEXT "YYYY-MM-DD"
 *   time                          SIM_V_TEXT "HH:MM:SS[.fffffff]"
 *   datetime, smalldatetime,
 *   datetime2                     SIM_V_TEXT "YYYY-MM-DD HH:MM:SS[.fffffff]"
 *   datetimeoffset                SIM_V_TEXT "YYYY-MM-DD HH:MM:SS[.fffffff] +hh:mm"
 *   char/varchar/nchar/nvarchar   SIM_V_TEXT UTF-8
 *   uniqueidentifier              SIM_V_TEXT "6F9619FF-8B86-D011-B42D-00C04FC964FF"
 *   binary, varbinary             SIM_V_BLOB
 *   hierarchyid, geography,
 *   geometry                      SIM_V_BLOB: the bytes SQL Server serializes
 *                                 (what CAST(x AS varbinary(max)) gives)
 *   xml                           SIM_V_TEXT UTF-8, as SQL Server serializes it
 *   sql_variant                   SIM_V_TEXT in the variant form of sim_udt.h
 *                                 (base type and value); a plain SIM_V_INT,
 *                                 _REAL, _TEXT, _BLOB is an int, float,
 *                                 nvarchar, varbinary value
 * The TDS layer must also accept SIM_V_INT/SIM_V_REAL for decimal columns and
 * SIM_V_TEXT holding a number for integer columns (SQLite's dynamic typing),
 * converting as SQL Server's implicit conversion would.
 * Pointers are borrowed: valid until the callback returns. */
typedef enum sim_value_kind { SIM_V_NULL = 0, SIM_V_INT, SIM_V_REAL, SIM_V_TEXT, SIM_V_BLOB }
    sim_value_kind;

typedef struct sim_value {
    sim_value_kind kind;
    int64_t i;
    double f;
    const uint8_t *p; /* TEXT (UTF-8, not NUL-terminated) or BLOB bytes */
    size_t n;
} sim_value;

/* Values already encoded as a ROW token holds them (length prefixes
 * included), from the change store: one result column, or ncols consecutive
 * ones whose bytes lie together (column j is p[off[j] - off[0], off[j + 1] -
 * off[0])). A NULL holds the NULL form, which NBCROW leaves out. */
typedef struct sim_cell {
    const uint8_t *p;
    uint32_t n;           /* bytes of all its columns */
    uint32_t ncols;       /* >= 1 */
    const uint32_t *off;  /* ncols + 1 offsets when ncols > 1 */
} sim_cell;

typedef struct sim_column {
    const char *name; /* UTF-8; may be "" for an unnamed expression */
    sim_type type;
    bool nullable;
} sim_column;

/* What the engine produces while it runs a request. Every callback returns 0
 * to go on, or non-zero to stop the request at once (the client sent an
 * ATTENTION or the connection is gone); the engine then returns
 * SIM_EXEC_ABORTED after rolling back nothing that was already committed. */
typedef struct sim_sink {
    void *ctx;
    /* A result set starts. cols valid during the call. */
    int (*columns)(void *ctx, const sim_column *cols, int ncols);
    /* One row of the current result set; vals[ncols]. */
    int (*row)(void *ctx, const sim_value *vals, int ncols);
    /* A statement ended. has_count: rowcount is meaningful (DONE_COUNT).
     * in_proc: inside an RPC/procedure (DONEINPROC rather than DONE).
     * error: the statement failed (DONE_ERROR). */
    int (*done)(void *ctx, int64_t rowcount, bool has_count, bool in_proc, bool error);
    /* An ERROR (is_error) or INFO token. number/state/class as SQL Server. */
    int (*message)(void *ctx, bool is_error, int number, int state, int cls,
                   const char *text, const char *proc, int line);
    /* The session's database changed (USE): ENVCHANGE type 1. */
    int (*database_changed)(void *ctx, const char *new_db, const char *old_db);
    /* Transaction state changed: ENVCHANGE 8 (begin) / 9 (commit) /
     * 10 (rollback) with the 8-byte descriptor. May be NULL. */
    int (*transaction)(void *ctx, int envchange_type, uint64_t descriptor);
    /* RETURNSTATUS token at the end of a procedure / RPC. */
    int (*return_status)(void *ctx, int32_t status);
    /* RETURNVALUE of an OUTPUT parameter of an RPC, after return_status:
     * ordinal = the parameter's 0-based position among the params handed to
     * sim_exec_rpc, name as declared ("@o"), value in the representation
     * above for type. May be NULL (the values are dropped). */
    int (*return_value)(void *ctx, int ordinal, const char *name, const sim_type *type, const sim_value *v);
    /* Called every few milliseconds while a statement waits (a read blocked
     * by another session's open transaction): non-zero stops the request as
     * the other callbacks do (an ATTENTION arrived). May be NULL. */
    int (*poll)(void *ctx);
    /* Optional: one row of pre-encoded cells[ncells] covering the ncols
     * columns in order (the change store's read path; encoded with
     * sim_tds_cellenc_put for the columns the result set announced); nulls:
     * bit i (byte i / 8, low bit first) set when column i is NULL. NULL:
     * the engine sends values through row. */
    int (*row_cells)(void *ctx, const sim_cell *cells, int ncells, const uint8_t *nulls, int ncols);
} sim_sink;

#define SIM_EXEC_OK 0
#define SIM_EXEC_ABORTED 1

/* Passwords: SQL Server's are at most 128 characters (UTF-8 bytes here);
 * the program also reads the one of 'sa' from this environment variable. */
#define SIM_PASSWORD_BYTES_MAX 512
#define SIM_PASSWORD_ENV "MSSQL_CDC_SIM_PASSWORD"

typedef struct sim_config {
    const char *data_dir;     /* state lives here; created if missing */
    const char *sa_password;  /* password of login 'sa' (stored as a salted hash) */
    /* Initial server clock zone, a Windows zone name ("UTC", "E. South
     * America Standard Time"...). Stored state wins on restart. */
    const char *time_zone;
    int product_major_version; /* SERVERPROPERTY('ProductMajorVersion'); 16 */
    /* Capture process: a scan every poll_ms of real time, harvesting at most
     * maxtrans transactions committed at least latency_ms ago (server
     * clock). 0 poll_ms = scans only on EXEC sim.run_capture. */
    int capture_poll_ms;
    int capture_latency_ms;
    int capture_maxtrans;
} sim_config;

typedef struct sim_server sim_server;
typedef struct sim_session sim_session;

/* Opens (or creates) the state in cfg->data_dir and starts the capture
 * thread. Caller owns the result; sim_server_close frees it. */
int sim_server_open(sim_server **out, const sim_config *cfg, mcdc_error *err);
void sim_server_close(sim_server *srv);
/* Memory for the change store (pre-encoded change rows the reader's change
 * query is served from), in MiB over all change tables, default
 * SIM_CHANGE_CACHE_MB_DEFAULT; a table that would pass it is served from
 * SQLite; 0 = no store. Call before serving. */
#define SIM_CHANGE_CACHE_MB_DEFAULT 2048
void sim_server_set_change_cache_mb(sim_server *srv, int mb);
/* Memory for the table store (base tables' rows pre-encoded, that the
 * snapshot reader's reads are served from), in MiB over all tables, default
 * SIM_TABLE_CACHE_MB_DEFAULT; 0 = none. Call before serving. */
#define SIM_TABLE_CACHE_MB_DEFAULT 4096
void sim_server_set_table_cache_mb(sim_server *srv, int mb);

/* Login. On a wrong login or password returns MCDC_E_PERMISSION and fills
 * err with server_number 18456, class 14, state 1 and the message SQL Server
 * sends ("Login failed for user 'x'."). database may be NULL or "" (the
 * login's default, master). The session id (SPID) is >= 51. */
int sim_login(sim_server *srv, sim_session **out, const char *user, const char *password,
              const char *database, const char *app_name, mcdc_error *err);
/* Ends the session; an open transaction is rolled back. NULL-safe. */
void sim_session_close(sim_session *s);
int sim_session_spid(const sim_session *s);
/* Current database name, borrowed. */
const char *sim_session_database(const sim_session *s);
/* Packet size the session negotiated; set by the TDS layer after login. */
void sim_session_set_packet_size(sim_session *s, int bytes);

/* Added by the engine: time the TDS layer spent blocked sending to this
 * session's client (socket writes that would block), in milliseconds. It
 * feeds the session's ASYNC_NETWORK_IO row of sys.dm_exec_session_wait_stats
 * (wait_time_ms); until the TDS layer calls it the counter stays 0.
 * Thread-safe. */
void sim_session_add_network_wait(sim_session *s, int64_t ms);

/* Runs a SQL batch (UTF-8 text). Results and errors go to the sink; an error
 * in one statement behaves as SQL Server's (most errors end the statement,
 * the batch goes on; see the engine's docs). Returns SIM_EXEC_OK or
 * SIM_EXEC_ABORTED. */
/* Counts one client request (a SQL batch or an RPC) of s, as the TDS
 * front end receives it: sim.request_stats reports them (tests count what
 * an idle client sends per poll). */
void sim_session_count_request(sim_session *s);
int sim_exec_batch(sim_session *s, const char *sql, size_t len, const sim_sink *sink);

/* One RPC parameter as decoded by the TDS layer. */
typedef struct sim_param {
    const char *name;  /* "@P1", may be "" (positional) */
    sim_type type;
    sim_value value;   /* converted to the representation above */
    bool output;
} sim_param;

/* Runs an RPC: proc_name is the name sent ("sp_executesql", "sp_prepexec",
 * "sys.sp_cdc_enable_table"...) or the well-known name of a ProcID
 * ("sp_executesql" for 10, ...). */
int sim_exec_rpc(sim_session *s, const char *proc_name, const sim_param *params, int nparams,
                 const sim_sink *sink);

/* Faults injected with EXEC sim.fault, applied by the TDS layer. The engine
 * keeps them; the TDS layer asks at each point. Each call consumes what it
 * fires (a one-shot fault fires once). */
typedef enum sim_fault_point {
    SIM_FAULT_LOGIN = 1, /* before accepting a login: refuse it? */
    SIM_FAULT_QUERY,     /* a request starts: drop / delay / stall? */
    SIM_FAULT_ROW        /* before sending a row: drop now? */
} sim_fault_point;

typedef struct sim_fault_action {
    bool refuse_login;    /* answer the login with error 18456 */
    bool drop_connection; /* close the socket now, mid-reply if need be */
    int delay_ms;         /* sleep this long before replying */
    int stall_ms;         /* send nothing for this long (a hung server) */
} sim_fault_action;

void sim_fault_check(sim_server *srv, sim_session *s, sim_fault_point point,
                     sim_fault_action *out);

/* The simulator's log sink (its level comes from --log-level): every thread
 * it starts installs it (mcdc_log_use), as the library logs per thread.
 * Defined in tds_server.c. */
extern mcdc_log_sink g_sim_log_sink;

#endif /* SIM_ENGINE_H */
