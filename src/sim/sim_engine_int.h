/*
 * sim_engine_int.h - shared internals of the simulator engine (sim_engine.c
 * and its rooms, sim_cdc.c, sim_work.c, sim_engine_fast.c). Not for the TDS
 * layer.
 *
 * Storage: one SQLite file per T-SQL database (<data_dir>/<name>.db); the
 * master database file also holds the server state (logins, clock offset,
 * zone). All writes go through one writer connection per database, under
 * the server mutex, one statement at a time. SELECTs run on the session's
 * own read connection (WAL) without the mutex. The change store
 * (sim_store.h) keeps change tables' rows in memory for the reader's
 * queries; writers of change tables tell it (or its authorizer on the
 * writer connection sees them).
 */
#ifndef SIM_ENGINE_INT_H
#define SIM_ENGINE_INT_H

#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

#include "sim_engine.h"
#include "sim_store.h"
#include "sim_tz.h"
#include "sim_val.h"
#include "tsql_lex.h"
#include "tsql_xlate.h"

#define SIM_NAME_MAX MCDC_IDENT_BYTES_MAX
#define SIM_VARS_MAX 256
#define SIM_FAULTS_MAX 32
#define SIM_IDLE_ENTRY_S 305 /* measured idle mapping interval, reference §3.8 */
#define SIM_LSN_FIRST 0x002A000001000000ULL /* VLF 0x2A, block 0x100, slot 0 */

typedef struct sim_db {
    char name[SIM_NAME_MAX];
    char path[1024];
    sqlite3 *w; /* writer connection, under srv->mu */
    uint64_t lsn;      /* last allocated LSN (low 64 bits of the 80) */
    uint64_t tran_seq; /* transaction ids */
    bool cdc_enabled;
    int64_t retention_min; /* 0 = no automatic cleanup */
    sim_store_auth_ctx auth; /* w's authorizer: writes drop the stores of what they write */
    /* ALLOW_SNAPSHOT_ISOLATION (sim_snapshot.c, under srv->mu): SIM_SNAP_*,
     * loaded from __sim_state on first use; serial tells this database from
     * a later one of the same name */
    int snap_state;
    bool snap_loaded;
    uint64_t snap_serial;
    /* EXEC sys.sp_cdc_stop_job (under srv->mu; not kept across restarts,
     * as SQL Server Agent starts the capture job when it starts) */
    bool capture_stopped, cleanup_stopped;
    struct sim_db *next;
} sim_db;

typedef struct sim_var {
    char name[SIM_NAME_MAX]; /* with '@' */
    sim_type type;
    int kind; /* SQLITE_NULL/INTEGER/FLOAT/TEXT/BLOB */
    int64_t i;
    double f;
    uint8_t *p; /* owned */
    size_t n;
} sim_var;

typedef enum {
    FAULT_DROP_AFTER_ROWS = 1,
    FAULT_DROP_AT_QUERY,
    FAULT_DELAY,
    FAULT_STALL,
    FAULT_REFUSE_LOGIN,
    FAULT_CAPTURE_ERROR
} fault_kind;

typedef struct sim_fault {
    fault_kind kind;
    int count, ms, times;
    uint64_t setter_serial; /* session serial (unique for the server's life), not the reused SPID */
    int64_t seen; /* queries seen since set (drop_at_query) */
} sim_fault;

/* A row an open transaction changed: writers of the same row wait. */
typedef struct sim_tran_row {
    int table;     /* index in sim_session.tran_tables */
    int64_t rowid;
} sim_tran_row;
#define SIM_TRAN_ROWS_MAX 65536

typedef struct sim_undo {
    char *sql; /* owned; run in reverse order on ROLLBACK */
    char *commit_sql; /* owned or NULL; run on COMMIT (drops a DDL's saved copy) */
    struct sim_undo *prev;
} sim_undo;

struct sim_session {
    sim_server *srv;
    int spid;
    uint64_t serial; /* unique per login, never reused (SPIDs are) */
    char login[SIM_NAME_MAX];
    bool admin;
    sim_db *db;
    sqlite3 *rd; /* read connection to db */
    sqlite3_stmt *conv; /* SELECT sim_convert(?1, ?2, NULL) on rd */
    sim_clock_src clk;
    sim_var vars[SIM_VARS_MAX];
    int nvars;
    bool nocount;
    bool implicit_tx; /* SET IMPLICIT_TRANSACTIONS ON */
    int packet_size;
    int64_t rowcount;
    /* transaction */
    int trancount;
    bool tran_logged;      /* a DML ran: begin LSN/time/tran id assigned */
    sim_db *tran_db;
    uint64_t tran_id, tran_begin_lsn;
    int64_t tran_begin_utc_us;
    int cmd_id;
    bool tran_cdc;         /* pending change rows exist */
    char tran_cis[8][SIM_NAME_MAX];
    int tran_ncis;
    sim_undo *undo;
    uint64_t descriptor;
    /* READ COMMITTED (sim_locks.c): tables this session's
     * open transaction changed ("dbo.t"), under mu; all = more than fit */
    char tran_tables[16][SIM_NAME_MAX];
    int tran_ntables;
    bool tran_tables_all;
    struct sim_tran_row *tran_rows;  /* owned, under mu: rows the open transaction changed */
    int tran_nrows, tran_rows_cap;
    bool tran_rows_all;              /* more than SIM_TRAN_ROWS_MAX: every row of tran_tables */
    struct sim_session *waiting_for; /* under mu: the session a statement waits for */
    int64_t lock_timeout_ms;         /* SET LOCK_TIMEOUT; -1 = wait forever */
    int iso;                         /* SET TRANSACTION ISOLATION LEVEL: sim_iso */
    /* SNAPSHOT (sim_snapshot.c), under mu: the open transaction's isolation
     * as of its first data access (-1: none yet), the registered snapshot
     * (a snapshot transaction's, or one statement's in autocommit) and its
     * stamp, the open transaction's row versions, the tables its DDL
     * changed (snapshot readers wait for those, as for Sch-M) */
    int tran_iso;
    bool snap_tran, snap_stmt;
    uint64_t snap_cseq;
    sim_db *snap_db;
    struct sim_vunit *vunit;
    char tran_ddl[8][SIM_NAME_MAX];
    int tran_nddl;
    /* faults / stats */
    int64_t req_rows;      /* rows of the current request: only the session's thread */
    int64_t net_wait_ms, net_waits, net_wait_max_ms; /* sim_session_add_network_wait */
    _Atomic int64_t requests;
    struct sim_fast_cache *fast; /* the last fast-path query, prepared (sim_fast_cache.c) */
};

struct sim_server {
    pthread_mutex_t mu;
    char *data_dir;
    int product_major;
    sim_db *dbs;
    _Atomic int64_t clock_off_us;   /* read by every clock function, lock-free */
    /* Latest server time handed out: the server clock never runs backwards
     * when the host's wall clock steps back (sim.set_clock may move it). */
    _Atomic int64_t clock_last_us;
    /* EXEC sim.set_clock @frozen = 1: the clock stands at this instant
     * (advance_clock moves it) until a set_clock without it; INT64_MIN:
     * it runs. Tests place commits at chosen instants with it. */
    _Atomic int64_t clock_frozen_us;
    const sim_tz *_Atomic tz;
    int capture_poll_ms, capture_latency_ms, capture_maxtrans;
    pthread_t cap_thread;
    bool cap_started, stop;
    pthread_cond_t cap_cv;
    sim_session *sessions[MCDC_SIM_SESSIONS_MAX];
    sim_fault faults[SIM_FAULTS_MAX];
    uint64_t next_serial; /* under mu */
    bool fast_off; /* EXEC sim.set_fast_path @on = 0: every query on the general path */
    _Atomic int64_t fast_queries; /* queries served by the fast path */
    _Atomic int64_t fast_cache_hits; /* of which from a session's prepared statements */
    _Atomic int64_t store_queries; /* of which from the change store (sim_store.h) */
    _Atomic int64_t table_queries; /* base-table reads served from the table store (sim_fast_table.c) */
    _Atomic int64_t requests; /* client requests (SQL batches and RPCs) received */
    struct sim_vstore *vers; /* row versions for SNAPSHOT isolation (sim_snapshot.c), under mu */
    _Atomic int nfaults; /* changed under mu; read lock-free on the per-row path */
    sim_clock_src clk;
    struct sim_worker *workers;
    sim_stores *stores; /* the change store (sim_store.h) */
    struct sim_ckpt *ckpts; /* background WAL checkpoints after bulk loads (sim_work.c) */
};

/* ---- sim_cdc.c --------------------------------------------------------- */
typedef struct sim_proc_args {
    int n;
    char names[32][SIM_NAME_MAX];
    sqlite3_value *vals[32]; /* owned dups (sqlite3_value_free) */
} sim_proc_args;
sqlite3_value *sim_arg(const sim_proc_args *a, const char *name, int pos);
/* Text of an argument (borrowed) or NULL. */
const char *sim_arg_text(const sim_proc_args *a, const char *name, int pos);

/* Runs a CDC/sim procedure; returns 1 if the name was one of them. */
int sim_cdc_proc(sim_session *s, const char *proc, const sim_proc_args *a, const sim_sink *sink, int *status,
                 mcdc_error *err, bool *handled);
/* Writes pending change rows for one row change of table tbl (under mu). */
typedef struct sim_rowimg {
    int64_t rowid;
    sqlite3_value **v; /* ncols */
} sim_rowimg;
int sim_cdc_capture_row(sim_session *s, const char *tbl, char cols[][SIM_NAME_MAX], int ncols, int op,
                        const sim_rowimg *img, const bool *set_cols, uint64_t seqval, int cmd_id,
                        mcdc_error *err);
bool sim_cdc_table_captured(sim_db *d, const char *tbl);
/* Commit: give the session's pending rows the commit LSN, queue the tx. */
int sim_cdc_commit(sim_session *s, uint64_t commit_lsn, mcdc_error *err);
void sim_cdc_rollback(sim_session *s);
/* One capture scan over every database (under mu). */
void sim_cdc_scan(sim_server *srv, bool ignore_latency);
void *sim_cdc_thread(void *arg);
/* Error 22901 unless the session's database is enabled for CDC. */
int sim_cdc_need_db(sim_session *s, mcdc_error *err);
/* Something for capture to do (a job started): the thread scans soon. */
void sim_cdc_wake(sim_server *srv);
int sim_cdc_init_db(sim_db *d, mcdc_error *err);
/* A column DDL (ADD/DROP/ALTER COLUMN) on table tbl, in the session's
 * transaction: one cdc.ddl_history row per capture instance of the table
 * once capture reads the commit; alter_col/new_type for ALTER COLUMN (the
 * change tables capturing it change type then). No-op without instances. */
int sim_cdc_ddl(sim_session *s, const char *tbl, const char *ddl_text, const char *alter_col, const sim_type *new_type,
                mcdc_error *err);
int sim_cdc_drop_table(sim_session *s, const char *tbl, mcdc_error *err);

/* ---- sim_engine_fast.c: the change-table read fast path ----------------- */
typedef enum sim_fast_kind { SIM_FAST_COL = 1, SIM_FAST_LSN_HEX, SIM_FAST_NULL, SIM_FAST_COMMIT } sim_fast_kind;
typedef struct sim_fast_item {
    sim_fast_kind kind;
    int src; /* column of the reduced statement (COL, LSN_HEX) */
    char col[SIM_NAME_MAX]; /* the change table column (COL, LSN_HEX) */
} sim_fast_item;
/* The WHERE/ORDER BY shapes the change store answers (sim_fast_store_emit):
 * c.__$start_lsn BETWEEN x AND y [AND <after the reader's resume key>]
 * ORDER BY the clustered key (with or without __$command_id). */
typedef enum sim_fast_range {
    SIM_FAST_RANGE_NONE = 0, /* another shape: SQLite answers */
    SIM_FAST_RANGE_BETWEEN,  /* bounds: x, y */
    SIM_FAST_RANGE_AFTER,    /* x, y, l, l, cmd, cmd, s, s, op */
    SIM_FAST_RANGE_AFTER3    /* x, y, l, l, s, s, op (no command id) */
} sim_fast_range;
typedef struct sim_fast_plan {
    sim_fast_item *items; /* owned; one per select item */
    int nitems;
    int nsrc;             /* columns of the reduced statement */
    tsql_tok *reduced;    /* owned; "SELECT c.__$start_lsn, <columns> FROM cdc.[ci_CT] AS c <WHERE/ORDER BY>" */
    int nreduced;
    tsql_tok *commit;     /* owned; "SELECT <commit expr> FROM cdc.lsn_time_mapping AS m" */
    int ncommit;
    char ci[SIM_NAME_MAX]; /* the capture instance */
    sim_fast_range range;
    bool order3;          /* ORDER BY without __$command_id */
    tsql_tok *bounds;     /* owned; "SELECT x, y, ..." (range != NONE) */
    int nbounds;
} sim_fast_plan;
/* An identifier (bare or quoted) whose decoded text is name. */
bool sim_tok_name_is(const tsql_tok *t, const char *name);
/* The same token: names by their decoded text, ignoring case. */
bool sim_tok_same(const tsql_tok *x, const tsql_tok *y);
/* The first token of [a, b) that is word outside parentheses, or -1. */
int sim_toks_word_at_depth0(const tsql_tok *t, int a, int b, const char *word);
/* Items of the list [a, b): commas outside parentheses, plus one. */
int sim_toks_list_items(const tsql_tok *t, int a, int b);
/* Appends tok to a growing token array (kept TK_EOF-terminated). */
bool sim_toks_push(tsql_tok **arr, int *n, int *cap, const tsql_tok *tok);
/* The same type, precision, scale, length and nullability (a pre-encoded
 * cell of one is the bytes of the other). */
bool sim_col_same_type(const sim_column *a, const sim_column *b);
/* The NULL bitmap of a row of pre-encoded cells: result column k comes
 * from store column src[k], or is fixed (-1: its bit set with
 * sim_null_map_fix). Up to 64 columns each side, the store row's bits move
 * in runs (result columns k.. from store columns c..) as 64-bit words. */
typedef struct sim_null_map {
    int n;               /* result columns */
    const int *src;      /* borrowed: n store columns or -1 */
    bool words;
    int nseg, *seg;      /* owned: (k, c, len) triples */
    uint64_t w0;         /* the fixed bits as a word */
    uint8_t *fixed;      /* owned: the fixed bits, nb bytes */
    size_t nb, snb;      /* bytes of the result's and of a store row's bitmap */
} sim_null_map;
int sim_null_map_init(sim_null_map *m, const int *src, int n, int store_cols);
void sim_null_map_free(sim_null_map *m);
static inline void sim_null_map_fix(sim_null_map *m, int k, bool null) {
    uint8_t bit = (uint8_t)(1u << (k % 8));
    m->fixed[k / 8] = (uint8_t)(null ? m->fixed[k / 8] | bit : m->fixed[k / 8] & ~bit);
    if (m->words) m->w0 = null ? m->w0 | 1ull << k : m->w0 & ~(1ull << k);
}
/* The bitmap (nb bytes) of a row whose store bitmap is row_nulls. */
static inline void sim_null_map_row(const sim_null_map *m, const uint8_t *row_nulls, uint8_t *bm) {
    if (m->words) {
        uint64_t sn = 0, w = m->w0;
        for (size_t b = 0; b < m->snb; b++) sn |= (uint64_t)row_nulls[b] << (8 * b); /* (bits past the columns are 0) */
        for (int z = 0; z < m->nseg; z++) {
            int k = m->seg[3 * z], c = m->seg[3 * z + 1], len = m->seg[3 * z + 2];
            uint64_t mask = len == 64 ? ~0ull : (1ull << len) - 1;
            w |= ((sn >> c) & mask) << k;
        }
        for (size_t b = 0; b < m->nb; b++) bm[b] = (uint8_t)(w >> (8 * b));
        return;
    }
    memcpy(bm, m->fixed, m->nb);
    for (int k = 0; k < m->n; k++) {
        int c = m->src[k];
        if (c >= 0 && (row_nulls[c / 8] >> (c % 8) & 1)) bm[k / 8] = (uint8_t)(bm[k / 8] | (1u << (k % 8)));
    }
}
/* Recognises the reader's change query in tokens [a, b); fills p (free with
 * sim_fast_plan_free) or returns false (p left empty). Tokens in the plan
 * borrow the statement's text. */
bool sim_fast_match(sim_fast_plan *p, const tsql_tok *t, int a, int b);
void sim_fast_plan_free(sim_fast_plan *p);
/* Sends the rows of the reduced statement red (bound, not stepped), the
 * commit time from commit (its LSN parameter at commit_param). */
int sim_fast_emit(sqlite3 *c, sqlite3_stmt *red, sqlite3_stmt *commit, const sim_fast_plan *p, int commit_param,
                  const sim_sink *sink, int64_t *rows, bool *aborted, mcdc_error *err);
/* The same answer from the change store: bnd is the bounds statement
 * (bound, not stepped), cols the result columns. *served false: nothing was
 * sent (no store, another shape of values), the caller uses sim_fast_emit. */
typedef struct sim_fast_store_q {
    const sim_fast_plan *p;
    sqlite3_stmt *bnd, *commit;
    int commit_param;
    const sim_column *cols;
} sim_fast_store_q;
int sim_fast_store_emit(sim_session *s, const sim_fast_store_q *q, const sim_sink *sink, int64_t *rows, bool *aborted,
                        bool *served, mcdc_error *err);
/* The reader's split-point query (NTILE boundaries of a range). */
typedef struct sim_fast_split {
    int64_t tiles;
    char ci[SIM_NAME_MAX];
    tsql_tok *bounds; /* owned; "SELECT x, y" when the range is BETWEEN x AND y, else NULL */
    int nbounds;
    tsql_tok *scan;  /* owned; "SELECT c.__$start_lsn FROM cdc.[ci_CT] AS c WHERE ... ORDER BY c.__$start_lsn" */
    int nscan;
    tsql_tok *shape; /* owned; the lexed scan template the tokens of scan borrow */
} sim_fast_split;
bool sim_fast_match_split(sim_fast_split *p, const tsql_tok *t, int a, int b);
void sim_fast_split_free(sim_fast_split *p);
/* Counts the scan's rows, then sends one row per non-empty tile. */
int sim_fast_split_emit(sqlite3 *c, sqlite3_stmt *scan, int64_t tiles, const sim_sink *sink, int64_t *rows,
                        bool *aborted, mcdc_error *err);
/* The same from the change store (bnd: the bounds statement, bound; cols:
 * the 3 result columns, sent here); *served as sim_fast_store_emit. */
int sim_fast_split_store(sim_session *s, const sim_fast_split *p, sqlite3_stmt *bnd, const sim_column *cols,
                         const sim_sink *sink, int64_t *rows, bool *aborted, bool *served, mcdc_error *err);
/* Result metadata as the general path computes it (cols[n], names[n]);
 * false when a type would come from the first row's value. */
bool sim_result_columns(sqlite3 *c, sqlite3_stmt *st, const xl_result *items, sim_column *cols,
                        char (*names)[SIM_NAME_MAX], int n);
/* The same when the first row sent holds first[n] (NULL: no row): the
 * types the general path takes from it. */
void sim_result_columns_as(sqlite3 *c, sqlite3_stmt *st, const xl_result *items, const sim_value *first,
                           sim_column *cols, char (*names)[SIM_NAME_MAX], int n);

/* ---- sim_work.c -------------------------------------------------------- */
int sim_work_start(sim_session *s, const sim_proc_args *a, mcdc_error *err);
/* sim.create_tables (sim_create_tables.c). */
int sim_work_create_tables(sim_session *s, const sim_proc_args *a, mcdc_error *err);
int sim_work_bulk_load(sim_session *s, const sim_proc_args *a, int64_t *rows, mcdc_error *err);
/* sim.bulk_load_table: rows appended to a base table (no change rows). */
int sim_work_bulk_load_table(sim_session *s, const sim_proc_args *a, int64_t *rows, mcdc_error *err);
void sim_work_stop_all(sim_server *srv);

/* ---- sim_engine.c: server, errors, clock, LSNs --------------------------- */
int64_t sim_srv_utc_us(sim_server *srv);
/* sim.set_clock / sim.advance_clock: the next reading may be earlier. */
void sim_srv_clock_reset(sim_server *srv);
int64_t sim_srv_local_us(sim_server *srv, int64_t utc_us);
void sim_lsn_bytes(uint64_t v, uint8_t out[10]);
uint64_t sim_lsn_value(const uint8_t *b, int n);
uint64_t sim_lsn_next(sim_db *d);
int sim_db_state_put(sim_db *d, const char *k, int64_t v);
/* A value of a database's __sim_state, dflt when absent. */
int64_t sim_state_get(sqlite3 *c, const char *k, int64_t dflt);
/* c's schema version: it moves with every DDL (-1 when it cannot be read). */
int64_t sim_schema_version(sqlite3 *c);
/* A row of master's __sim_server (text, or v when text is NULL). */
int sim_server_state_put(sim_server *srv, const char *k, const char *text, int64_t v);
/* Runs SQL on a connection; error text into err (number 50000 unless set). */
int sim_sql(sqlite3 *c, mcdc_error *err, const char *fmt, ...); /* sqlite3_mprintf formats (%Q, %w) */
/* Maps a SQLite error to SQL Server's number and text. */
int sim_sqlite_err(sqlite3 *c, int rc, mcdc_error *err);
int sim_err(mcdc_error *err, int number, const char *fmt, ...) MCDC_PRINTF(3, 4);
static inline bool sim_ci_prefix(const char *s, const char *p) { return mcdc_str_nieq(s, p, strlen(p)); }

/* ---- sim_catalog.c: database files and their catalog --------------------- */
int sim_db_open(sim_server *srv, const char *name, bool create, sim_db **out, mcdc_error *err);
/* Takes group and other permissions off path (mode 0600/0700), if present. */
void sim_owner_only(const char *path);
sim_db *sim_find_db(sim_server *srv, const char *name);
static inline sim_db *sim_master_db(sim_server *srv) { return sim_find_db(srv, "master"); }
bool sim_col_type(sqlite3 *c, const char *tbl, const char *col, sim_type *out, bool *nullable);
bool sim_table_exists(sqlite3 *c, const char *name);
/* user was granted SELECT on obj ("dbo.t"). */
bool sim_has_grant(sqlite3 *c, const char *user, const char *obj);
/* A grant without an object (perm "VIEW DATABASE STATE", "VIEW SERVER STATE") to who. */
bool sim_has_scope_grant(sqlite3 *c, const char *who, const char *perm);

/* ---- sim_auth.c: logins, passwords as salted SHA-512 hashes ------------- */
#define SIM_PW_HASH_BYTES 70 /* 0x0200, 4-byte salt, SHA-512: SQL Server's layout */
int sim_pw_hash(const char *pw, uint8_t out[SIM_PW_HASH_BYTES], mcdc_error *err);
bool sim_pw_matches(const char *pw, const void *stored, size_t n);
/* master's __sim_logins: created, an older build's text passwords hashed
 * (the file then rewritten), 'sa' given sa_password. */
int sim_logins_open(sim_db *m, const char *sa_password, mcdc_error *err);
/* The login's password matches; *admin whether it is an administrator,
 * *disabled whether ALTER LOGIN ... DISABLE turned it off (the password is
 * still checked first, as SQL Server does: a wrong one says nothing more). */
bool sim_logins_check(sim_db *m, const char *user, const char *password, bool *admin, bool *disabled);
/* Whether a login of that name exists (*disabled: turned off). */
bool sim_logins_find(sim_db *m, const char *user, bool *admin, bool *disabled);
/* CREATE LOGIN (error 15025 when it exists). */
int sim_logins_create(sim_db *m, const char *name, const char *password, mcdc_error *err);
/* ALTER LOGIN: disable (1), enable (0) or keep (-1); a new password or NULL.
 * Error 15151 when there is no such login. */
int sim_logins_alter(sim_db *m, const char *name, int disable, const char *password, mcdc_error *err);

/* ---- sim_sqlfn.c --------------------------------------------------------- */
/* Busy timeout, identifier quoting and every function the engine uses. */
int sim_conn_setup(sqlite3 *c, const sim_clock_src *clk);

/* ---- the statement being run (sim_dispatch.c and the rooms) -------------- */
typedef struct sim_stmt {
    sim_session *s;
    const sim_sink *sink;
    bool in_proc;
    bool aborted;
    const char *batch; /* whole batch text */
    /* the RPC's parameters (borrowed) while its procedure runs, for the
     * OUTPUT flags; NULL in a batch and in statements the procedure runs */
    const sim_param *rpc_params;
    int rpc_nparams, rpc_first; /* rpc_params[rpc_first] is argument 0 */
    bool batch_ended; /* an error that ends the batch (deadlock victim) */
    int loops;            /* WHILE loops running */
    bool loop_break, loop_continue; /* BREAK / CONTINUE seen: the loop body stops */
} sim_stmt;

/* ---- sim_session.c ------------------------------------------------------- */
/* Opens the session's read connection on d and makes it current. */
int sim_sess_use(sim_session *s, sim_db *d, mcdc_error *err);
bool sim_db_has_user(sim_db *d, const char *login);
/* The session's user name in its database ("dbo" for an admin). */
const char *sim_db_user_name(sim_session *s, char *buf, size_t cap);
int sim_do_use(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);
/* A session of login user without its password: the server's own workers. */
int sim_login_trusted(sim_server *srv, sim_session **out, const char *user, const char *database, mcdc_error *err);

/* ---- sim_vars.c ---------------------------------------------------------- */
sim_var *sim_var_find(sim_session *s, const char *name);
int sim_var_declare(sim_session *s, const char *name, const sim_type *t, mcdc_error *err);
/* Assigns a value converted to the variable's type. */
int sim_var_assign(sim_session *s, sim_var *v, sqlite3_value *val, mcdc_error *err);
/* Binds the session's variables to st's @names (error 137 for an undeclared one). */
int sim_bind_vars(sim_session *s, sqlite3_stmt *st, mcdc_error *err);
void sim_vars_clear(sim_session *s);
/* A variable's value as the sink hands values out (borrowed from v). */
sim_value sim_var_value(const sim_var *v);
int sim_do_declare(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);
int sim_do_set(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);

/* ---- sim_dispatch.c ------------------------------------------------------ */
/* Runs all statements of a token array. Returns SIM_EXEC_OK / ABORTED. */
int sim_run_tokens(sim_stmt *x, const tsql_tok *t, int n);
/* Token text of an identifier into buf; -1 if t is none. */
int sim_tok_ident(const tsql_tok *t, char *buf, size_t cap);
/* Error 102 near token i. */
int sim_syntax_err(mcdc_error *err, const tsql_tok *t, int i, int end);
/* Parses a type at toks[*i] ("decimal(18,4)", "varchar(max)"); text gets its spelling. */
bool sim_parse_type_at(const tsql_tok *t, int *i, int end, sim_type *out, char *text, size_t cap);

/* ---- sim_query.c --------------------------------------------------------- */
int sim_run_query(sim_stmt *x, const tsql_tok *t, int a, int b, const sim_var **assign, int nassign, mcdc_error *err);
/* SELECT statement with possible "@v = expr" items. */
int sim_do_select(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);
/* Evaluates one expression [a, b) into a variable (SET / DECLARE). */
int sim_eval_into(sim_stmt *x, const tsql_tok *t, int a, int b, sim_var *v, mcdc_error *err);
/* One expression [a, b) as a value (*out owned; NULL for DEFAULT). */
int sim_eval_value(sim_stmt *x, const tsql_tok *t, int a, int b, sqlite3_value **out, mcdc_error *err);
/* Translates the expression [a, b) for connection c, checks the SELECT
 * permission and waits (READ COMMITTED) on the tables it reads. */
int sim_xlate_expr(sim_stmt *x, sqlite3 *c, const tsql_tok *t, int a, int b, mcdc_buf *out, mcdc_error *err);
/* Permission check of a translated statement's tables. */
int sim_check_select_perms(sim_session *s, sqlite3 *c, const xl_result *r, mcdc_error *err);

/* ---- sim_emit.c ---------------------------------------------------------- */
/* Emits a result set from a prepared, stepped-once statement (rc of the
 * first sqlite3_step). items from the translator may be NULL. */
int sim_emit_stmt(sim_session *s, sqlite3 *c, sqlite3_stmt *st, int first_rc, const xl_result *items,
                  const sim_column *forced, int nforced, const sim_sink *sink, bool in_proc, int64_t *rows,
                  mcdc_error *err, bool *aborted);
int sim_send_done(sim_stmt *x, int64_t rows, bool has_count, bool error);
int sim_send_error(sim_stmt *x, const mcdc_error *err, int line);
int sim_send_info(sim_stmt *x, int number, const char *text);

/* ---- sim_proc.c ---------------------------------------------------------- */
int sim_do_exec(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);

/* ---- sim_txn.c ----------------------------------------------------------- */
/* A value as a SQL literal (sqlite3_malloc'd). */
char *sim_value_literal(sqlite3_value *v);
/* Takes sql (sqlite3_malloc'd) and commit_sql (same, may be NULL). */
void sim_undo_push2(sim_session *s, char *sql, char *commit_sql);
void sim_undo_push(sim_session *s, char *sql);
void sim_tran_reset(sim_session *s);
/* Under mu. */
void sim_tran_rollback(sim_session *s);
/* Under mu, inside a SQLite transaction on the db. */
int sim_tran_commit(sim_session *s, mcdc_error *err);
/* The first change of a transaction: its begin LSN, time and id. */
void sim_tran_log_start(sim_session *s);
int sim_do_tran(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);
void sim_implicit_begin(sim_stmt *x, const tsql_tok *t, int i, int end);

/* ---- sim_locks.c --------------------------------------------------------- */
/* The session a write waits for, in the transaction it had then. */
typedef struct sim_tran_ref {
    sim_session *s;
    uint64_t descriptor;
} sim_tran_ref;
/* Waits while blocker(s, arg) (called under mu) names another session:
 * until SET LOCK_TIMEOUT (1222), an ATTENTION (3617) or a wait cycle (1205,
 * this session's transaction rolled back as the deadlock victim). */
int sim_wait_while(sim_stmt *x, sim_session *(*blocker)(sim_session *s, const void *arg), const void *arg,
                   mcdc_error *err);
/* The wait of ALTER and DROP TABLE for tbl; on MCDC_OK returns holding mu. */
int sim_lock_table_for_ddl(sim_stmt *x, const char *tbl, mcdc_error *err);
sim_session *sim_ddl_blocker(sim_session *s, const char *tbl);
/* A blocker for sim_wait_while: arg (a sim_tran_ref) while that transaction is open. */
sim_session *sim_tran_still_open(sim_session *s, const void *arg);
int sim_wait_committed(sim_stmt *x, const xl_result *res, bool nolock, mcdc_error *err);
bool sim_has_nolock(const tsql_tok *t, int a, int b);
int sim_tran_touch(sim_session *s, const char *tbl);
void sim_tran_touch_row(sim_session *s, int table, int64_t rowid);
sim_session *sim_write_blocker(sim_session *s, const char *tbl, int64_t rowid);

/* ---- sim_snapshot.c: SNAPSHOT isolation ---------------------------------- */
/* SET TRANSACTION ISOLATION LEVEL (sim_session.iso). */
typedef enum sim_iso {
    SIM_ISO_READ_COMMITTED = 0,
    SIM_ISO_READ_UNCOMMITTED,
    SIM_ISO_REPEATABLE_READ,
    SIM_ISO_SERIALIZABLE,
    SIM_ISO_SNAPSHOT
} sim_iso;
/* sys.databases.snapshot_isolation_state, as SQL Server numbers them. */
#define SIM_SNAP_OFF 0
#define SIM_SNAP_ON 1
#define SIM_SNAP_TO_OFF 2
#define SIM_SNAP_TO_ON 3
typedef struct sim_vstore sim_vstore;
int sim_vstore_create(sim_vstore **out, mcdc_error *err);
void sim_vstore_free(sim_vstore *v);
/* Under mu: d's ALLOW_SNAPSHOT_ISOLATION state (SIM_SNAP_*) and its name. */
int sim_snap_state(sim_db *d);
const char *sim_snap_state_desc(int state);
/* ALTER DATABASE <db> SET ALLOW_SNAPSHOT_ISOLATION ON | OFF (other options
 * of ALTER DATABASE are accepted, READ_COMMITTED_SNAPSHOT ON refused). */
int sim_do_alter_database(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);
/* ALTER LOGIN name DISABLE | ENABLE | WITH PASSWORD = '...' (administrators). */
int sim_do_alter_login(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);
/* A read of user tables under SNAPSHOT: the statement's view. */
typedef struct sim_snap_table {
    char name[SIM_NAME_MAX * 2]; /* SQLite table ("dbo.t") */
    uint64_t wseq;               /* its write count when the view was taken (sim_store.h) */
    int overlay;                 /* rows of the view that differ from the table's: 0 = none */
    char temp[32];               /* the temp table holding them */
    char (*cols)[SIM_NAME_MAX];  /* owned: the table's columns (overlay > 0) */
    int ncols;
} sim_snap_table;
typedef struct sim_snap_view {
    bool pinned;     /* rd holds a read transaction: the view's SQLite state */
    bool own_stmt;   /* the statement registered its own snapshot (autocommit) */
    int ntables;
    sim_snap_table t[XL_TABLES_MAX];
    int noverlay;    /* tables with an overlay: the statement is translated again */
} sim_snap_view;
/* A read (not under SNAPSHOT) of res's tables: the open transaction's
 * isolation is fixed by its first data access. */
void sim_snap_note_access(sim_session *s, const xl_result *res);
/* Does the read of res (translated on rd) run under SNAPSHOT? */
bool sim_snap_applies(const sim_session *s, const xl_result *res, bool nolock);
/* Starts the view: the database must allow snapshot isolation (3952, 3954,
 * 3956), a transaction must have started in it (3951), the tables must not
 * have changed by DDL since the snapshot's start (3961); waits only for
 * other transactions' uncommitted DDL on them; then pins rd and writes the
 * rows that differ from the table (before-images) into temp tables. End with
 * sim_snap_read_end whatever happens. */
int sim_snap_read_begin(sim_stmt *x, const xl_result *res, sim_snap_view *v, mcdc_error *err);
void sim_snap_read_end(sim_session *s, sim_snap_view *v);
/* The view's stand-in for table name (xl_env.table_source). */
int sim_snap_table_source(void *view, const char *name, mcdc_buf *out);
const sim_snap_table *sim_snap_view_table(const sim_snap_view *v, const char *name);
/* DML under SNAPSHOT on tbl: the checks of a read, the snapshot started
 * (*own_stmt: the statement's, end it with sim_snap_write_end). */
int sim_snap_write_begin(sim_stmt *x, const char *tbl, bool *own_stmt, mcdc_error *err);
void sim_snap_write_end(sim_session *s, bool own_stmt);
/* Under mu, by the DML about to change row rowid of tbl under SNAPSHOT:
 * error 3960 (update conflict) when another transaction committed a change
 * of the row after the snapshot started. heap: the table has no key. */
int sim_snap_conflict(sim_session *s, const char *tbl, int64_t rowid, bool heap, mcdc_error *err);
/* Under mu, after a DML committed to SQLite: are row versions kept for it? */
bool sim_snap_versioning(sim_session *s);
/* Under mu: the row's state before the DML (vals[ncols], taken; NULL: the
 * row did not exist), once per transaction and row. */
int sim_snap_record(sim_session *s, const char *tbl, int64_t rowid, sqlite3_value **vals, int ncols, mcdc_error *err);
/* Under mu: an autocommit DML's versions are committed. */
void sim_snap_stmt_commit(sim_session *s);
/* Under mu: the open transaction committed (its versions stamped); reset:
 * it ended (uncommitted versions dropped, its snapshot released). */
void sim_snap_tran_commit(sim_session *s);
void sim_snap_tran_reset(sim_session *s);
/* Under mu: DDL on tbl (ALTER, DROP): its versions dropped, older
 * snapshots get 3961 on it, and in a transaction readers wait for it. */
void sim_snap_ddl(sim_session *s, const char *tbl);
/* Under mu: another session's open transaction whose DDL changed a table
 * res reads (a snapshot read waits for it). */
sim_session *sim_snap_ddl_blocker(sim_session *s, const void *res);
/* Statistics (tests): row versions held, snapshots registered. */
int64_t sim_snap_versions(sim_server *srv);

/* ---- sim_txn_ddl.c ------------------------------------------------------- */
int sim_tran_ddl_join(sim_session *s, mcdc_error *err);
int sim_tran_ddl_snapshot(sim_session *s, const char *tbl, char **undo, char **commit, mcdc_error *err);
int sim_tran_ddl_end(sim_session *s, int rc, char *undo, char *commit, mcdc_error *err);
/* Rebuilds table tbl with column col declared as new_def ("\"c\" TEXT
 * COLLATE sim_ci NOT NULL"), its rows copied with conv_expr (SQL over the
 * old column) as the new value; rowids, other columns, generated columns
 * and indexes kept. Under mu, inside a SQLite transaction. */
int sim_table_retype(sqlite3 *w, const char *tbl, const char *col, const char *new_def, const char *conv_expr,
                     mcdc_error *err);

/* ---- sim_ddl.c ----------------------------------------------------------- */
typedef struct sim_col_def {
    char name[SIM_NAME_MAX];
    sim_type type;
    bool nullable;
    int pk_ordinal;
    bool computed;      /* c AS (expr): a generated column, never written */
    bool persisted;     /* ... PERSISTED (a STORED generated column) */
    int expr_a, expr_b; /* the expression's tokens while its DDL runs */
} sim_col_def;
/* A table's columns from the catalog, in order (*out owned); computed
 * columns are marked. */
int sim_load_cols(sqlite3 *c, const char *tbl, sim_col_def **out, int *n, mcdc_error *err);
int sim_do_create(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);
int sim_do_alter_table(sim_stmt *x, const tsql_tok *t, int i, int end, const char *text, mcdc_error *err);
int sim_do_drop(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);
int sim_do_grant(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);

/* ---- sim_dml.c ----------------------------------------------------------- */
int sim_do_insert(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err);
int sim_do_update_delete(sim_stmt *x, const tsql_tok *t, int i, int end, bool is_update, mcdc_error *err);

/* ---- sim_fast_table.c: base-table reads from the table store ------------- */
typedef enum sim_ft_kind { SIM_FT_COL = 1, SIM_FT_CONST } sim_ft_kind;
typedef struct sim_ft_item {
    sim_ft_kind kind;
    char col[SIM_NAME_MAX]; /* COL: the table's column */
    int cidx;               /* CONST: its column in the constants' statement */
} sim_ft_item;
/* The shape served: SELECT <columns and literal CASTs> FROM <table> [AS t]
 * [WHERE <NULLs and/or one range of one integer column>]. */
typedef struct sim_fast_table {
    bool slices; /* the other shape: counts per slice of the key (sim_fast_match_slices) */
    char table[SIM_NAME_MAX * 2]; /* SQLite name ("dbo.t") */
    char alias[SIM_NAME_MAX];
    sim_ft_item *items; /* owned */
    int nitems, nconst;
    tsql_tok *consts; /* owned; "SELECT <the constants>"; borrows the statement's text */
    int nconsts_tok;
    bool has_where;
    char key[SIM_NAME_MAX];
    bool nulls, range; /* the rows whose key is NULL / in [lo, hi] */
    int64_t lo, hi;
    int64_t width; /* slices: the slice width, >= 1 */
} sim_fast_table;
bool sim_fast_match_table(sim_fast_table *p, const tsql_tok *t, int a, int b);
/* A chunk planner's counts per slice of an integer key, the text of
 * mcdc_cdc_key_slices:
 *   SELECT <b> [AS x], COUNT_BIG(*) [AS n] FROM (SELECT CASE WHEN CAST(k AS bigint) >= 0
 *   THEN CAST(k AS bigint) / CAST(<w> AS bigint) ELSE (CAST(k AS bigint) + 1) /
 *   CAST(<w> AS bigint) - 1 END AS <b> FROM <table> [WHERE <NULLs and/or one range of k>])
 *   [AS] x GROUP BY <b>
 * (w an integer literal >= 1): floor(k / w) per row, counted. */
bool sim_fast_match_slices(sim_fast_table *p, const tsql_tok *t, int a, int b);
void sim_fast_table_free(sim_fast_table *p);
/* Sends the result from the table store (*done), or nothing (the general
 * path answers): orig is the general path's prepared statement (for the
 * columns), view the statement's snapshot view or NULL. */
int sim_run_table_fast(sim_stmt *x, const xl_env *env, const sim_fast_table *p, sqlite3_stmt *orig,
                       const xl_result *res, const sim_snap_view *view, bool *done, mcdc_error *err);

/* ---- sim_fast_cache.c ---------------------------------------------------- */
void sim_fast_cache_drop(sim_session *s);
int sim_fast_cached(sim_stmt *x, const tsql_tok *t, int a, int b, bool *done, mcdc_error *err);
int sim_run_fast(sim_stmt *x, const xl_env *env, const sim_fast_plan *fp, const tsql_tok *t, int a, int b,
                 sqlite3_stmt *orig, const xl_result *res, bool *done, mcdc_error *err);
int sim_run_split(sim_stmt *x, const xl_env *env, const sim_fast_split *sp, sqlite3_stmt *orig, const xl_result *res,
                  bool *done, mcdc_error *err);

/* ---- sim_capture_log.c: the capture job's DMVs and jobs --------------- */
/* What one capture scan of a database did. */
typedef struct sim_scan_stats {
    int64_t start_utc_us;
    int tran_count;            /* transactions moved */
    int64_t commands;          /* change rows moved */
    int schema_changes;        /* DDL posted to cdc.ddl_history */
    uint64_t first_begin_lsn;  /* begin LSN of the first transaction */
    uint64_t last_commit_lsn;  /* commit LSN of the last */
    int64_t last_commit_utc_us; /* its commit time; INT64_MIN: none */
    bool failed;               /* an injected capture error: nothing moved */
    int error_number;
    const char *error_message; /* static */
    uint64_t failed_lsn;       /* the first queued commit LSN when it failed, 0: none */
} sim_scan_stats;
/* The views' tables, emptied (the server starts). */
int sim_caplog_init_db(sim_db *d, mcdc_error *err);
/* Is name (sys.x) one of the DMVs needing VIEW DATABASE STATE (the capture
 * ones, sys.dm_db_partition_stats)? */
bool sim_caplog_view(const char *name);
/* Under mu, in the scan's SQLite transaction: records the session. */
void sim_caplog_session(sim_server *srv, sim_db *d, const sim_scan_stats *x);
/* VIEW DATABASE STATE (or VIEW SERVER STATE) for the DMVs: error 262. */
int sim_caplog_check_perm(sim_session *s, mcdc_error *err);
/* Under mu: sys.sp_cdc_start_job (start) / sys.sp_cdc_stop_job. */
int sim_caplog_job(sim_session *s, const sim_proc_args *a, bool start, mcdc_error *err);
/* Under mu: sys.sp_cdc_help_jobs' query (sqlite3_free it). */
char *sim_caplog_jobs_sql(sim_session *s);

/* ---- sim_faults.c -------------------------------------------------------- */
int sim_fault_add(sim_server *srv, uint64_t setter_serial, const char *kind, int count, int ms, int times,
                  mcdc_error *err);
void sim_fault_clear(sim_server *srv);
/* Under mu: does a capture_error fault fire now? (*number: its error) */
bool sim_fault_capture_error(sim_server *srv, int *number);

#endif
