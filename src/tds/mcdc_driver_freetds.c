/*
 * mcdc_driver_freetds.c - the driver seam on FreeTDS db-lib.
 *
 * Fast path (spec formats.md C1): dbcmd + dbsqlexec, dbresults, then
 * dbnextrow with dbdata/dbdatlen read straight into the batch's column
 * buffers. No dbbind, no per-cell allocation: each column gets a decode
 * function once per result set, and buffers are reserved for the whole
 * fetch before the row loop.
 *
 * db-lib's handlers are process-global; they find the connection through
 * dbgetuserdata (or, during dbopen, a thread-local pointer) and record the
 * error there. The error handler always answers INT_CANCEL: in this
 * Sybase-flavoured build INT_CONTINUE/INT_TIMEOUT on other errors would
 * exit the process, and on a timeout (SYBETIME) cancelling is what a
 * query timeout means.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sybfront.h>
#include <sybdb.h>

#include "mcdc_driver.h"
#include "mcdc_lsn.h" /* mcdc_u128 */
#include "mcdc_sql_types.h"

/* A type code db-lib reports that sybdb.h does not name (the others it
 * may report are in the type table, mcdc_sql_types.c). */
#define T_SYBUNIQUE 36

/* ---- the connection ---------------------------------------------------------- */
typedef struct fdb_conn {
    DBPROCESS *db;
    int spid;
    bool dead;
    bool encrypt_required;
    /* First server error (severity > 10) of the current operation. */
    bool srv_error;
    int srv_number, srv_state, srv_class, srv_line;
    char srv_text[512];
    /* First db-lib error of the current operation. */
    bool lib_error;
    int lib_number, lib_os;
    char lib_text[256];
    char lib_os_text[128];
    char where[300]; /* "host:port" for messages */
} fdb_conn;

static _Thread_local fdb_conn *tl_connecting;

/* ---- what db-lib keeps per process ---------------------------------------------
 * db-lib 1.3 holds three things process-wide that no login record can carry:
 * its initialisation and handlers (dbinit, dberrhandle, dbmsghandle), the
 * login timeout (dbsetlogintime), and the file it reads a server's
 * settings from first (dbsetifile: encryption cannot be set on a LOGINREC,
 * DBSETLENCRYPT answers FAIL in 1.3). They are confined here, in
 * one record initialised once (pthread_once) and guarded by one lock:
 *   - the handlers find their connection per DBPROCESS (dbgetuserdata), so
 *     they are the same for every caller;
 *   - every dbopen holds the lock shared, with the login timeout it wants
 *     already set; a login that needs another timeout, or the first one
 *     that needs the configuration file, takes it exclusively, so no dbopen
 *     of the library runs while either changes;
 *   - the configuration file is an anonymous memory file (memfd) named by
 *     /proc/self/fd/N: nothing is written under TMPDIR, nothing is left
 *     behind at exit, no other user can read it. db-lib is pointed at it
 *     once (dbsetifile), exclusively, the first time an encrypted
 *     connection is opened; it reads it before FREETDSCONF and the user's
 *     files, and only for our own sections' names, so the process's
 *     environment is never touched and a FREETDSCONF of the host program's
 *     own still serves its other servers.
 * This is the one mutable process-wide state of the library, and exists
 * only because FreeTDS offers no per-connection way to these settings. */
typedef struct {
    pthread_once_t once;
    int init_rc;
    pthread_rwlock_t lock;
    int login_timeout_s;   /* what dbsetlogintime holds; 0: not set yet */
    int conf_fd;           /* the memory file; -1 until the first encrypted connection */
    int conf_sections;
} fdb_process;

static fdb_process g_fdb = {PTHREAD_ONCE_INIT, MCDC_OK, PTHREAD_RWLOCK_INITIALIZER, 0, -1, 0};

static fdb_conn *route(DBPROCESS *db) {
    fdb_conn *c = db ? (fdb_conn *)dbgetuserdata(db) : NULL;
    return c ? c : tl_connecting;
}

static int on_error(DBPROCESS *db, int severity, int dberr, int oserr, char *dberrstr,
                    char *oserrstr) {
    (void)severity;
    fdb_conn *c = route(db);
    if (c != NULL) {
        if (!c->lib_error && dberr != SYBESMSG) {
            c->lib_error = true;
            c->lib_number = dberr;
            c->lib_os = oserr;
            snprintf(c->lib_text, sizeof c->lib_text, "%s", dberrstr ? dberrstr : "");
            snprintf(c->lib_os_text, sizeof c->lib_os_text, "%s",
                     (oserr != DBNOERR && oserr != 0 && oserrstr) ? oserrstr : "");
        }
        if (mcdc_driver_classify_dblib(dberr) == MCDC_E_TRANSIENT) c->dead = true;
        if (db != NULL && DBDEAD(db)) c->dead = true;
    }
    return INT_CANCEL;
}

static int on_message(DBPROCESS *db, DBINT msgno, int msgstate, int severity, char *msgtext,
                      char *srvname, char *procname, int line) {
    (void)srvname;
    (void)procname;
    fdb_conn *c = route(db);
    if (severity <= 10) {
        /* 5701/5703 (database/language changed) and PRINT: informational. */
        if (msgno != 5701 && msgno != 5703)
            mcdc_log(MCDC_LOG_DEBUG, "server message %d: %s", (int)msgno,
                     msgtext ? msgtext : "");
        return 0;
    }
    if (c != NULL && !c->srv_error) {
        c->srv_error = true;
        c->srv_number = (int)msgno;
        c->srv_state = msgstate;
        c->srv_class = severity;
        c->srv_line = line;
        snprintf(c->srv_text, sizeof c->srv_text, "%s", msgtext ? msgtext : "");
        size_t n = strlen(c->srv_text);
        while (n && (c->srv_text[n - 1] == '\n' || c->srv_text[n - 1] == ' '))
            c->srv_text[--n] = 0;
    }
    return 0;
}

static void init_once(void) {
    if (dbinit() == FAIL) {
        g_fdb.init_rc = MCDC_E_IO;
        return;
    }
    dberrhandle(on_error);
    dbmsghandle(on_message);
}

static void clear_errors(fdb_conn *c) {
    c->srv_error = c->lib_error = false;
    c->srv_number = c->srv_state = c->srv_class = c->srv_line = 0;
    c->lib_number = c->lib_os = 0;
    c->srv_text[0] = c->lib_text[0] = c->lib_os_text[0] = 0;
}

/* Turns what the handlers recorded into err. `what` names the operation. */
static int report(fdb_conn *c, mcdc_error *err, const char *what) {
    int code;
    if (c->srv_error) {
        code = mcdc_driver_classify(c->srv_number, c->srv_class);
        mcdc_error_set(err, code, "%s: SQL Server error %d (severity %d, state %d, line %d): %s",
                       what, c->srv_number, c->srv_class, c->srv_state, c->srv_line,
                       c->srv_text);
        if (err) {
            err->server_number = c->srv_number;
            err->server_state = c->srv_state;
            err->server_class = c->srv_class;
            err->server_line = c->srv_line;
        }
        if (c->srv_class >= 20) c->dead = true;
    } else if (c->lib_error) {
        code = mcdc_driver_classify_dblib(c->lib_number);
        mcdc_error_set(err, code, "%s: FreeTDS error %d talking to %s: %s%s%s%s", what,
                       c->lib_number, c->where, c->lib_text, c->lib_os_text[0] ? " (" : "",
                       c->lib_os_text, c->lib_os_text[0] ? ")" : "");
    } else {
        code = c->dead ? MCDC_E_TRANSIENT : MCDC_E_IO;
        mcdc_error_set(err, code, "%s: FreeTDS failed talking to %s without a message", what,
                       c->where);
    }
    if (c->db != NULL && DBDEAD(c->db)) c->dead = true;
    if (c->dead && code != MCDC_E_PERMISSION && code != MCDC_E_LOGIN && code != MCDC_E_NOTFOUND &&
        code != MCDC_E_INVALID) {
        code = MCDC_E_TRANSIENT;
        if (err) err->code = code;
    }
    return code;
}

/* ---- encryption through a generated freetds.conf ------------------------------- */
/* A connection that must be encrypted gets a section of our configuration
 * (see "what db-lib keeps per process"). Called with g_fdb.lock held
 * exclusively. Returns the section name. */
static int encryption_section(const mcdc_connstr *cs, char *out, size_t outn,
                              mcdc_error *err) {
    if (g_fdb.conf_fd < 0) {
        int fd = memfd_create("mssql-cdc-freetds.conf", MFD_CLOEXEC);
        if (fd < 0)
            return mcdc_error_set(err, MCDC_E_IO,
                                  "cannot create the FreeTDS configuration for Encrypt=yes "
                                  "(memfd_create: %s)", strerror(errno));
        dprintf(fd, "# generated by mssql-cdc for encrypted connections\n[global]\n"
                    "\ttds version = 7.4\n");
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        dbsetifile(path); /* db-lib keeps a copy */
        g_fdb.conf_fd = fd;
    }
    snprintf(out, outn, "mcdc%d", ++g_fdb.conf_sections);
    int fd = g_fdb.conf_fd;
    int n = dprintf(fd, "[%s]\n\thost = %s\n\tport = %d\n", out, cs->host, cs->port ? cs->port : 1433);
    if (n > 0 && cs->instance && !cs->port) n = dprintf(fd, "\tinstance = %s\n", cs->instance);
    if (n > 0) n = dprintf(fd, "\ttds version = 7.4\n\tencryption = require\n");
    if (n > 0 && cs->trust_server_certificate != 1) n = dprintf(fd, "\tca file = system\n");
    if (n <= 0)
        return mcdc_error_set(err, MCDC_E_IO, "cannot append to the FreeTDS configuration");
    return MCDC_OK;
}

/* Takes g_fdb.lock shared, with login_s as db-lib's login timeout and, when
 * encrypting, a section of its own in *section, so that dbopen runs with
 * them; what has to change first changes under the lock held exclusively
 * (a section once written stays valid, a timeout another login changed in
 * between is set again). */
static int login_lock(int login_s, const mcdc_connstr *cs, bool encrypt, char *section,
                      size_t section_n, mcdc_error *err) {
    for (;;) {
        pthread_rwlock_rdlock(&g_fdb.lock);
        if (g_fdb.login_timeout_s == login_s && (!encrypt || section[0])) return MCDC_OK;
        pthread_rwlock_unlock(&g_fdb.lock);
        pthread_rwlock_wrlock(&g_fdb.lock);
        if (g_fdb.login_timeout_s != login_s) {
            dbsetlogintime(login_s);
            g_fdb.login_timeout_s = login_s;
        }
        int rc = encrypt && !section[0] ? encryption_section(cs, section, section_n, err) : MCDC_OK;
        pthread_rwlock_unlock(&g_fdb.lock);
        if (rc) return rc;
    }
}

/* ---- results ------------------------------------------------------------------- */
struct fdb_col;
typedef int (*decode_fn)(mcdc_column *c, const BYTE *p, DBINT len, const struct fdb_col *fc,
                         mcdc_error *err);

typedef struct fdb_col {
    int type;      /* dbcoltype */
    int precision; /* decimal */
    int scale;     /* decimal; time family: fractional digits */
    decode_fn decode;
    int32_t target_scale; /* decimal target */
    DBPROCESS *db;
    const char *name; /* borrowed from the natural schema */
} fdb_col;

typedef struct fdb_result {
    fdb_conn *conn;
    mcdc_schema *schema;
    int ncols;
    fdb_col *cols;
    bool done;
    const mcdc_schema *bound; /* decoders chosen for this target */
    int32_t bound_first;
} fdb_result;

/* The type policy's row of a db-lib column type (mcdc_sql_types.h); db-lib
 * reports TDS type ids, the nullable ones normalised to their width. */
static const mcdc_sql_type *sql_type(int t) {
    return t >= 0 && t <= 0xFF ? mcdc_sql_type_of_tds((uint8_t)t, 0) : NULL;
}
static bool is_char_type(int t) {
    const mcdc_sql_type *st = sql_type(t);
    return st && st->chars;
}
static bool is_binary_type(int t) {
    const mcdc_sql_type *st = sql_type(t);
    return st && st->type == MCDC_TYPE_BINARY;
}

/* Natural batch type of a result column: the policy's, text for a type it
 * does not know (read through dbconvert). */
static void natural_type(const fdb_col *fc, mcdc_type_id *type, int32_t *p, int32_t *s) {
    const mcdc_sql_type *st = sql_type(fc->type);
    if (st == NULL) {
        *type = MCDC_TYPE_UTF8;
        *p = *s = 0;
        return;
    }
    mcdc_sql_type_batch(st, fc->precision, fc->scale, type, p, s);
}

/* -- value helpers -- */
static inline void put_fixed(mcdc_column *c, const void *v, size_t w) {
    memcpy(c->values + (size_t)c->length * w, v, w);
    c->length++;
}

static inline int put_var(mcdc_column *c, const void *p, int64_t n, mcdc_error *err) {
    if (c->data_len + n > c->data_cap) {
        if (n > (int64_t)MCDC_VALUE_BYTES_MAX)
            return mcdc_error_set(err, MCDC_E_LIMIT,
                                  "column '%s': a value of %lld bytes exceeds the limit of %u",
                                  c->field->name, (long long)n, MCDC_VALUE_BYTES_MAX);
        int rc = mcdc_col_reserve(c, 0, n, err);
        if (rc != MCDC_OK) return rc;
    }
    if (n) memcpy(c->data + c->data_len, p, (size_t)n);
    c->data_len += n;
    c->offsets[c->length + 1] = (int32_t)c->data_len;
    c->length++;
    return MCDC_OK;
}

/* Days from 1900-01-01 to 1970-01-01. */
#define DAYS_1900_TO_1970 25567
#define US_PER_DAY 86400000000LL

static int64_t int_of(const BYTE *p, int type) {
    switch (type) {
    case SYBINT1: return *p;
    case SYBINT2: { int16_t v; memcpy(&v, p, 2); return v; }
    case SYBINT4: { int32_t v; memcpy(&v, p, 4); return v; }
    case SYBBIT: case SYBBITN: return *p ? 1 : 0;
    default: { int64_t v; memcpy(&v, p, 8); return v; }
    }
}

/* Magnitude of a DBNUMERIC (array[0] = sign, 1 = negative; then big-endian
 * bytes, as many as the precision needs). */
static const uint8_t NUMERIC_BYTES[39] = {0,  1,  1,  2,  2,  3,  3,  3,  4,  4,  5,  5,  5,
                                          6,  6,  7,  7,  8,  8,  8,  9,  9,  10, 10, 10, 11,
                                          11, 12, 12, 13, 13, 13, 14, 14, 15, 15, 15, 16, 16};

static const mcdc_u128 POW10_U128[39] = {
    (mcdc_u128)1ull,
    (mcdc_u128)10ull,
    (mcdc_u128)100ull,
    (mcdc_u128)1000ull,
    (mcdc_u128)10000ull,
    (mcdc_u128)100000ull,
    (mcdc_u128)1000000ull,
    (mcdc_u128)10000000ull,
    (mcdc_u128)100000000ull,
    (mcdc_u128)1000000000ull,
    (mcdc_u128)10000000000ull,
    (mcdc_u128)100000000000ull,
    (mcdc_u128)1000000000000ull,
    (mcdc_u128)10000000000000ull,
    (mcdc_u128)100000000000000ull,
    (mcdc_u128)1000000000000000ull,
    (mcdc_u128)10000000000000000ull,
    (mcdc_u128)100000000000000000ull,
    (mcdc_u128)1000000000000000000ull,
    (mcdc_u128)10000000000000000000ull,
};
static mcdc_u128 pow10_u128(int k) {
    if (k < 20) return POW10_U128[k];
    mcdc_u128 v = POW10_U128[19];
    for (int i = 19; i < k; i++) v *= 10;
    return v;
}

static int put_decimal(mcdc_column *c, bool neg, mcdc_u128 mag, int src_scale,
                       mcdc_error *err) {
    int k = c->field->scale - src_scale;
    if (k < 0)
        return mcdc_error_set(err, MCDC_E_SCHEMA,
                              "column '%s': a value with scale %d does not fit decimal(%d,%d)",
                              c->field->name, src_scale, c->field->precision, c->field->scale);
    if (k > 0) mag *= pow10_u128(k);
    if (mag >= pow10_u128(c->field->precision))
        return mcdc_error_set(err, MCDC_E_SCHEMA,
                              "column '%s': a value does not fit decimal(%d,%d)",
                              c->field->name, c->field->precision, c->field->scale);
    mcdc_u128 v = neg ? (mcdc_u128)0 - mag : mag;
    uint64_t lo = (uint64_t)v, hi = (uint64_t)(v >> 64);
    memcpy(c->values + (size_t)c->length * 16, &lo, 8);
    memcpy(c->values + (size_t)c->length * 16 + 8, &hi, 8);
    c->length++;
    return MCDC_OK;
}

/* -- decoders: natural pairs -- */
static int d_u8_i16(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc, mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    int16_t v = *p;
    put_fixed(c, &v, 2);
    return MCDC_OK;
}
static int d_copy2(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc, mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    put_fixed(c, p, 2);
    return MCDC_OK;
}
static int d_copy4(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc, mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    put_fixed(c, p, 4);
    return MCDC_OK;
}
static int d_copy8(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc, mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    put_fixed(c, p, 8);
    return MCDC_OK;
}
static int d_bit(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc, mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    int64_t i = c->length;
    if (*p)
        c->values[i >> 3] |= (uint8_t)(1u << (i & 7));
    else
        c->values[i >> 3] &= (uint8_t) ~(1u << (i & 7));
    c->length++;
    return MCDC_OK;
}
/* Any integer (or bit) to any integer, float, double or decimal. */
static int d_int_any(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                     mcdc_error *err) {
    (void)len;
    int64_t v = int_of(p, fc->type);
    switch (c->field->type) {
    case MCDC_TYPE_INT16: { int16_t x = (int16_t)v; put_fixed(c, &x, 2); return MCDC_OK; }
    case MCDC_TYPE_INT32: { int32_t x = (int32_t)v; put_fixed(c, &x, 4); return MCDC_OK; }
    case MCDC_TYPE_INT64: put_fixed(c, &v, 8); return MCDC_OK;
    case MCDC_TYPE_FLOAT: { float x = (float)v; put_fixed(c, &x, 4); return MCDC_OK; }
    case MCDC_TYPE_DOUBLE: { double x = (double)v; put_fixed(c, &x, 8); return MCDC_OK; }
    case MCDC_TYPE_DECIMAL:
        return put_decimal(c, v < 0, v < 0 ? (mcdc_u128)((uint64_t)0 - (uint64_t)v)
                                           : (mcdc_u128)(uint64_t)v,
                           0, err);
    default: MCDC_UNREACHABLE();
    }
}
static int d_real_double(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                         mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    float f;
    memcpy(&f, p, 4);
    double d = (double)f;
    put_fixed(c, &d, 8);
    return MCDC_OK;
}
static int d_numeric(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                     mcdc_error *err) {
    (void)len; (void)fc;
    const DBNUMERIC *n = (const DBNUMERIC *)(const void *)p;
    int prec = n->precision;
    if (prec < 1 || prec > 38)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "column '%s': numeric precision %d",
                              c->field->name, prec);
    mcdc_u128 mag = 0;
    for (int i = 0; i < NUMERIC_BYTES[prec]; i++) mag = (mag << 8) | n->array[1 + i];
    return put_decimal(c, n->array[0] == 1, mag, n->scale, err);
}
static int d_money(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                   mcdc_error *err) {
    (void)len; (void)fc;
    DBMONEY m;
    memcpy(&m, p, sizeof m);
    int64_t v = (int64_t)(((uint64_t)(uint32_t)m.mnyhigh << 32) | m.mnylow);
    return put_decimal(c, v < 0, v < 0 ? (mcdc_u128)((uint64_t)0 - (uint64_t)v)
                                       : (mcdc_u128)(uint64_t)v,
                       4, err);
}
static int d_money4(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                    mcdc_error *err) {
    (void)len; (void)fc;
    int32_t m;
    memcpy(&m, p, 4);
    int64_t v = m;
    return put_decimal(c, v < 0, v < 0 ? (mcdc_u128)(uint64_t)(-v) : (mcdc_u128)(uint64_t)v, 4,
                       err);
}
/* Casts to double (a declared DOUBLE column): the nearest double. */
static int d_numeric_double(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                            mcdc_error *err) {
    (void)len; (void)fc;
    const DBNUMERIC *n = (const DBNUMERIC *)(const void *)p;
    int prec = n->precision;
    if (prec < 1 || prec > 38)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "column '%s': numeric precision %d",
                              c->field->name, prec);
    mcdc_u128 mag = 0;
    for (int i = 0; i < NUMERIC_BYTES[prec]; i++) mag = (mag << 8) | n->array[1 + i];
    long double v = (long double)mag;
    for (int k = 0; k < n->scale; k++) v /= 10.0L;
    double d = (double)(n->array[0] == 1 ? -v : v);
    put_fixed(c, &d, 8);
    return MCDC_OK;
}
static int d_money_double(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                          mcdc_error *err) {
    (void)len; (void)err;
    int64_t v;
    if (fc->type == SYBMONEY4) {
        int32_t m;
        memcpy(&m, p, 4);
        v = m;
    } else {
        DBMONEY m;
        memcpy(&m, p, sizeof m);
        v = (int64_t)(((uint64_t)(uint32_t)m.mnyhigh << 32) | m.mnylow);
    }
    double d = (double)((long double)v / 10000.0L);
    put_fixed(c, &d, 8);
    return MCDC_OK;
}

static int64_t us_of_datetime(const BYTE *p) {
    DBDATETIME d;
    memcpy(&d, p, sizeof d);
    /* 1/300 s ticks, rounded to milliseconds as SQL Server shows them
     * (.000, .003, .007). */
    int64_t ms = ((int64_t)(uint32_t)d.dttime * 10 + 1) / 3;
    return ((int64_t)d.dtdays - DAYS_1900_TO_1970) * US_PER_DAY + ms * 1000;
}
static int64_t us_of_datetime4(const BYTE *p) {
    DBDATETIME4 d;
    memcpy(&d, p, sizeof d);
    return ((int64_t)d.days - DAYS_1900_TO_1970) * US_PER_DAY + (int64_t)d.minutes * 60000000LL;
}
static int64_t us_of_dtall(const BYTE *p) {
    DBDATETIMEALL d;
    memcpy(&d, p, sizeof d);
    return ((int64_t)d.date - DAYS_1900_TO_1970) * US_PER_DAY + (int64_t)(d.time / 10);
}
static int d_datetime(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                      mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    int64_t us = us_of_datetime(p);
    put_fixed(c, &us, 8);
    return MCDC_OK;
}
static int d_datetime4(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                       mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    int64_t us = us_of_datetime4(p);
    put_fixed(c, &us, 8);
    return MCDC_OK;
}
/* datetime2 and datetimeoffset (whose date/time FreeTDS gives in UTC). */
static int d_dtall_ts(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                      mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    int64_t us = us_of_dtall(p);
    put_fixed(c, &us, 8);
    return MCDC_OK;
}
static int d_date32(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                    mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    DBDATETIMEALL d;
    memcpy(&d, p, sizeof d);
    int32_t days = d.date - DAYS_1900_TO_1970;
    put_fixed(c, &days, 4);
    return MCDC_OK;
}
static int d_time_text(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                       mcdc_error *err) {
    (void)len;
    DBDATETIMEALL d;
    memcpy(&d, p, sizeof d);
    char buf[32];
    int n = mcdc_driver_time_text(buf, sizeof buf, d.time, fc->scale);
    return put_var(c, buf, n, err);
}
static int d_bytes(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                   mcdc_error *err) {
    (void)fc;
    return put_var(c, p, len, err);
}
static int d_guid(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                  mcdc_error *err) {
    (void)fc;
    if (len != 16)
        return mcdc_error_set(err, MCDC_E_PROTOCOL, "column '%s': uniqueidentifier of %d bytes",
                              c->field->name, (int)len);
    char buf[36];
    mcdc_driver_guid_text(buf, p);
    return put_var(c, buf, 36, err);
}
/* Date and time types as text (a declared STRING column), ISO 8601 the way
 * SQL Server's CONVERT style 121 writes them, not db-lib's "Jan  2 2025". */
static int put_dt_text(mcdc_column *c, int64_t days1900, uint64_t ticks100ns, int scale,
                       bool with_time, bool with_offset, int offset_min, mcdc_error *err) {
    char buf[64];
    int n = mcdc_driver_datetime_text(buf, sizeof buf, days1900, ticks100ns, scale, with_time,
                                      with_offset, offset_min);
    return put_var(c, buf, n, err);
}

static int d_dt_text(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                     mcdc_error *err) {
    (void)len;
    switch (fc->type) {
    case SYBDATETIME: {
        DBDATETIME d;
        memcpy(&d, p, sizeof d);
        uint64_t ms = ((uint64_t)(uint32_t)d.dttime * 10 + 1) / 3;
        return put_dt_text(c, d.dtdays, ms * 10000u, 3, true, false, 0, err);
    }
    case SYBDATETIME4: {
        DBDATETIME4 d;
        memcpy(&d, p, sizeof d);
        return put_dt_text(c, d.days, (uint64_t)d.minutes * 600000000u, 0, true, false, 0, err);
    }
    default: {
        DBDATETIMEALL d;
        memcpy(&d, p, sizeof d);
        int scale = fc->scale > 0 && fc->scale <= 7 ? fc->scale : (int)d.time_prec;
        return put_dt_text(c, d.date, d.time, scale, fc->type != SYBMSDATE,
                           fc->type == SYBMSDATETIMEOFFSET, d.offset, err);
    }
    }
}

/* Anything db-lib can convert to text (sql_variant, casts to utf8). */
static int d_convert_text(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                          mcdc_error *err) {
    char buf[8192];
    DBINT n = dbconvert(fc->db, fc->type, p, len, SYBCHAR, (BYTE *)buf, (DBINT)sizeof buf - 1);
    if (n < 0)
        return mcdc_error_set(err, MCDC_E_SCHEMA,
                              "column '%s': FreeTDS cannot convert SQL type %d to text",
                              c->field->name, fc->type);
    while (n > 0 && buf[n - 1] == ' ' && !is_char_type(fc->type)) n--;
    return put_var(c, buf, n, err);
}
static int d_date_ts(mcdc_column *c, const BYTE *p, DBINT len, const fdb_col *fc,
                     mcdc_error *err) {
    (void)len; (void)fc; (void)err;
    DBDATETIMEALL d;
    memcpy(&d, p, sizeof d);
    int64_t us = ((int64_t)d.date - DAYS_1900_TO_1970) * US_PER_DAY;
    put_fixed(c, &us, 8);
    return MCDC_OK;
}

static bool is_int_type(int t) {
    return t == SYBINT1 || t == SYBINT2 || t == SYBINT4 || t == SYBINT8 || t == SYBBIT ||
           t == SYBBITN;
}

/* The decoder for result column fc into a column of type f, or NULL. */
static decode_fn choose(const fdb_col *fc, const mcdc_field *f) {
    mcdc_type_id t = f->type;
    int s = fc->type;
    if (t == MCDC_TYPE_UTF8) {
        if (is_char_type(s)) return d_bytes;
        if (s == T_SYBUNIQUE) return d_guid;
        if (s == SYBMSTIME) return d_time_text;
        if (s == SYBDATETIME || s == SYBDATETIME4 || s == SYBMSDATE || s == SYBMSDATETIME2 ||
            s == SYBMSDATETIMEOFFSET)
            return d_dt_text;
        return d_convert_text;
    }
    if (t == MCDC_TYPE_BINARY) return is_binary_type(s) ? d_bytes : NULL;
    switch (s) {
    case SYBBIT: case SYBBITN:
        if (t == MCDC_TYPE_BOOL) return d_bit;
        return NULL;
    case SYBINT1:
        if (t == MCDC_TYPE_INT16) return d_u8_i16;
        break;
    case SYBINT2:
        if (t == MCDC_TYPE_INT16) return d_copy2;
        break;
    case SYBINT4:
        if (t == MCDC_TYPE_INT32) return d_copy4;
        break;
    case SYBINT8:
        if (t == MCDC_TYPE_INT64) return d_copy8;
        break;
    case SYBREAL:
        if (t == MCDC_TYPE_FLOAT) return d_copy4;
        if (t == MCDC_TYPE_DOUBLE) return d_real_double;
        return NULL;
    case SYBFLT8: return t == MCDC_TYPE_DOUBLE ? d_copy8 : NULL;
    case SYBDECIMAL: case SYBNUMERIC:
        if (t == MCDC_TYPE_DECIMAL) return d_numeric;
        return t == MCDC_TYPE_DOUBLE ? d_numeric_double : NULL;
    case SYBMONEY:
        if (t == MCDC_TYPE_DECIMAL) return d_money;
        return t == MCDC_TYPE_DOUBLE ? d_money_double : NULL;
    case SYBMONEY4:
        if (t == MCDC_TYPE_DECIMAL) return d_money4;
        return t == MCDC_TYPE_DOUBLE ? d_money_double : NULL;
    case SYBDATETIME: return t == MCDC_TYPE_TIMESTAMP_NTZ ? d_datetime : NULL;
    case SYBDATETIME4: return t == MCDC_TYPE_TIMESTAMP_NTZ ? d_datetime4 : NULL;
    case SYBMSDATETIME2: return t == MCDC_TYPE_TIMESTAMP_NTZ ? d_dtall_ts : NULL;
    case SYBMSDATETIMEOFFSET: return t == MCDC_TYPE_TIMESTAMP_UTC ? d_dtall_ts : NULL;
    case SYBMSDATE:
        if (t == MCDC_TYPE_DATE32) return d_date32;
        if (t == MCDC_TYPE_TIMESTAMP_NTZ) return d_date_ts;
        return NULL;
    default: return NULL;
    }
    /* Integer widening (and to float/double/decimal). */
    if (is_int_type(s)) {
        int src_bits = s == SYBINT1 ? 9 : s == SYBINT2 ? 16 : s == SYBINT4 ? 32 : 64;
        if ((t == MCDC_TYPE_INT16 && src_bits <= 16) || (t == MCDC_TYPE_INT32 && src_bits <= 32) ||
            t == MCDC_TYPE_INT64 || (t == MCDC_TYPE_DOUBLE && src_bits <= 32) ||
            (t == MCDC_TYPE_FLOAT && src_bits <= 16) ||
            (t == MCDC_TYPE_DECIMAL &&
             f->precision - f->scale >= (src_bits <= 16 ? 5 : src_bits <= 32 ? 10 : 19)))
            return d_int_any;
    }
    return NULL;
}

static int bind_target(fdb_result *r, const mcdc_batch *into, int32_t first, mcdc_error *err) {
    if (r->bound == into->schema && r->bound_first == first) return MCDC_OK;
    for (int i = 0; i < r->ncols; i++) {
        const mcdc_field *f = &into->schema->fields[first + i];
        decode_fn d = choose(&r->cols[i], f);
        if (d == NULL)
            return mcdc_error_set(err, MCDC_E_SCHEMA,
                                  "column '%s': SQL type %d cannot be read as %s; declare a "
                                  "type the column's values fit",
                                  f->name, r->cols[i].type, mcdc_type_name(f->type));
        r->cols[i].decode = d;
    }
    r->bound = into->schema;
    r->bound_first = first;
    return MCDC_OK;
}

/* Discards the remaining result sets and checks them for errors. */
static int drain(fdb_result *r, mcdc_error *err) {
    fdb_conn *c = r->conn;
    RETCODE rc;
    while ((rc = dbresults(c->db)) != NO_MORE_RESULTS) {
        if (rc == FAIL) break;
        dbcanquery(c->db);
    }
    r->done = true;
    if (c->srv_error || c->lib_error || rc == FAIL) return report(c, err, "reading results");
    return MCDC_OK;
}

static int fdb_fetch(void *impl, mcdc_batch *into, int32_t first, int64_t rows_max,
                     int64_t bytes_max, int64_t *out_rows, mcdc_error *err) {
    fdb_result *r = impl;
    fdb_conn *c = r->conn;
    *out_rows = 0;
    if (r->done) return MCDC_OK;
    int rc = bind_target(r, into, first, err);
    if (rc != MCDC_OK) return rc;
    for (int i = 0; i < r->ncols; i++) {
        rc = mcdc_col_reserve(&into->columns[first + i], rows_max, 0, err);
        if (rc != MCDC_OK) return rc;
    }
    mcdc_column *cols = into->columns + first;
    const int ncols = r->ncols;
    int64_t rows = 0;
    while (rows < rows_max) {
        RETCODE st = dbnextrow(c->db);
        if (st == NO_MORE_ROWS) {
            rc = drain(r, err);
            break;
        }
        if (st != REG_ROW) {
            if (st == FAIL || st == BUF_FULL) {
                rc = report(c, err, "reading a row");
                r->done = true;
                break;
            }
            continue; /* a COMPUTE row: never sent by SQL Server 2012+ */
        }
        for (int i = 0; i < ncols; i++) {
            const BYTE *p = dbdata(c->db, i + 1);
            mcdc_column *col = &cols[i];
            if (p == NULL) {
                rc = mcdc_col_append_null(col, err);
            } else {
                rc = r->cols[i].decode(col, p, dbdatlen(c->db, i + 1), &r->cols[i], err);
            }
            if (rc != MCDC_OK) break;
        }
        if (rc != MCDC_OK) {
            /* Leave the row consistent is not possible: the batch is spoiled. */
            dbcancel(c->db);
            r->done = true;
            break;
        }
        rows++;
        /* Every 16 rows: wide (max) values reach the byte cap long before 64k rows. */
        if ((rows & 15) == 0 && mcdc_batch_bytes(into) >= bytes_max) break;
    }
    *out_rows = rows;
    if (rc != MCDC_OK) *out_rows = 0;
    return rc;
}

static const mcdc_schema *fdb_schema(void *impl) { return ((fdb_result *)impl)->schema; }

static void fdb_result_free(void *impl) {
    fdb_result *r = impl;
    if (r == NULL) return;
    if (!r->done && !r->conn->dead) dbcancel(r->conn->db);
    mcdc_schema_unref(r->schema);
    mcdc_free(r->cols);
    mcdc_free(r);
}

static const mcdc_result_ops FDB_RESULT_OPS = {fdb_schema, fdb_fetch, fdb_result_free};

/* Describes the current result set. */
static int describe(fdb_result *r, mcdc_error *err) {
    DBPROCESS *db = r->conn->db;
    int n = dbnumcols(db);
    if (n < 0 || n > MCDC_COLUMNS_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT, "a result with %d columns (limit %d)", n,
                              MCDC_COLUMNS_MAX);
    int rc = mcdc_schema_create(&r->schema, n, err);
    if (rc != MCDC_OK) return rc;
    r->ncols = n;
    r->cols = mcdc_calloc((size_t)(n ? n : 1), sizeof *r->cols);
    if (r->cols == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        fdb_col *fc = &r->cols[i];
        fc->type = dbcoltype(db, i + 1);
        fc->db = db;
        DBTYPEINFO *ti = dbcoltypeinfo(db, i + 1);
        if (ti) {
            fc->precision = ti->precision;
            fc->scale = ti->scale;
        }
        mcdc_type_id t;
        int32_t p, s;
        natural_type(fc, &t, &p, &s);
        if (t == MCDC_TYPE_DECIMAL && (p < 1 || p > 38)) {
            p = 38;
            if (s > 38) s = 38;
        }
        const char *name = dbcolname(db, i + 1);
        rc = mcdc_schema_set(r->schema, i, name ? name : "", t, p, s, 0, true, err);
        if (rc != MCDC_OK) return rc;
        fc->name = r->schema->fields[i].name;
    }
    return MCDC_OK;
}

static int fdb_exec(void *impl, const char *sql, const mcdc_result_ops **out_ops,
                    void **out_result, mcdc_error *err) {
    fdb_conn *c = impl;
    if (c->dead)
        return mcdc_error_set(err, MCDC_E_TRANSIENT,
                              "the connection to %s was lost earlier; open a new one", c->where);
    clear_errors(c);
    if (dbcmd(c->db, sql) == FAIL || dbsqlexec(c->db) == FAIL) {
        int rc = report(c, err, "running a query");
        if (!c->dead) dbcancel(c->db);
        return rc;
    }
    fdb_result *r = mcdc_calloc(1, sizeof *r);
    if (r == NULL) {
        dbcancel(c->db);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    r->conn = c;
    RETCODE st;
    for (;;) {
        st = dbresults(c->db);
        if (st == FAIL || c->srv_error) {
            int rc = report(c, err, "running a query");
            if (!c->dead) dbcancel(c->db);
            r->done = true;
            fdb_result_free(r);
            return rc;
        }
        if (st == NO_MORE_RESULTS) {
            r->done = true;
            break;
        }
        if (dbnumcols(c->db) > 0) break;
    }
    int rc = MCDC_OK;
    if (r->done) {
        rc = mcdc_schema_create(&r->schema, 0, err);
    } else {
        rc = describe(r, err);
    }
    if (rc != MCDC_OK) {
        if (!r->done) dbcancel(c->db);
        r->done = true;
        fdb_result_free(r);
        return rc;
    }
    *out_ops = &FDB_RESULT_OPS;
    *out_result = r;
    return MCDC_OK;
}

static int fdb_spid(void *impl) { return ((fdb_conn *)impl)->spid; }
static bool fdb_is_dead(void *impl) {
    fdb_conn *c = impl;
    return c->dead || (c->db && DBDEAD(c->db));
}
static void fdb_close(void *impl) {
    fdb_conn *c = impl;
    if (c == NULL) return;
    if (c->db) dbclose(c->db);
    mcdc_free(c);
}

static const mcdc_conn_ops FDB_CONN_OPS = {fdb_exec, fdb_spid, fdb_is_dead, fdb_close};

int mcdc_conn_open_freetds(mcdc_conn **out, const mcdc_connstr *cs, const mcdc_conn_options *opt,
                           mcdc_error *err) {
    MCDC_ASSERT(out != NULL && cs != NULL && cs->host != NULL);
    *out = NULL;
    mcdc_conn_options dflt = MCDC_CONN_OPTIONS_INIT;
    if (opt == NULL) opt = &dflt;
    pthread_once(&g_fdb.once, init_once);
    if (g_fdb.init_rc != MCDC_OK)
        return mcdc_error_set(err, g_fdb.init_rc, "FreeTDS db-lib failed to initialise (dbinit)");
    fdb_conn *c = mcdc_calloc(1, sizeof *c);
    if (c == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    bool v6 = strchr(cs->host, ':') != NULL;
    char server[300];
    if (cs->port)
        snprintf(server, sizeof server, "%s%s%s:%d", v6 ? "[" : "", cs->host, v6 ? "]" : "",
                 cs->port);
    else if (cs->instance)
        snprintf(server, sizeof server, "%s\\%s", cs->host, cs->instance);
    else
        snprintf(server, sizeof server, "%s%s%s:1433", v6 ? "[" : "", cs->host, v6 ? "]" : "");
    snprintf(c->where, sizeof c->where, "%s", server);
    c->encrypt_required = cs->encrypt == MCDC_ENCRYPT_YES || cs->encrypt == MCDC_ENCRYPT_STRICT;
    if (cs->encrypt == MCDC_ENCRYPT_STRICT)
        mcdc_log(MCDC_LOG_WARN,
                 "Encrypt=strict (TDS 8.0) is not available in FreeTDS 1.3: connecting to %s "
                 "with TDS 7.4 and TLS required instead",
                 server);

    LOGINREC *login = dblogin();
    if (login == NULL) {
        mcdc_free(c);
        return mcdc_error_set(err, MCDC_E_NOMEM, "FreeTDS: dblogin failed");
    }
    const char *app = opt->app_name ? opt->app_name : cs->app ? cs->app : "mssql-cdc";
    int packet = opt->packet_bytes ? opt->packet_bytes : MCDC_TDS_PACKET_BYTES_MAX;
    if (cs->user) DBSETLUSER(login, cs->user);
    if (cs->password) DBSETLPWD(login, cs->password);
    DBSETLAPP(login, app);
    if (cs->database) DBSETLDBNAME(login, cs->database);
    DBSETLCHARSET(login, "UTF-8");
    DBSETLPACKET(login, (short)packet);
    DBSETLVERSION(login, DBVERSION_74);

    int login_s = opt->login_timeout_s > 0      ? opt->login_timeout_s
                  : cs->connect_timeout_s > 0 ? cs->connect_timeout_s
                                              : 30;
    char section[32] = {0};
    int rc = login_lock(login_s, cs, c->encrypt_required, section, sizeof section, err);
    if (rc != MCDC_OK) {
        dbloginfree(login);
        mcdc_free(c);
        return rc;
    }
    tl_connecting = c;
    c->db = dbopen(login, section[0] ? section : server);
    tl_connecting = NULL;
    pthread_rwlock_unlock(&g_fdb.lock);
    dbloginfree(login);
    if (c->db == NULL) {
        rc = report(c, err, "connecting");
        /* The socket connected but the login failed: with TLS required that
         * is the server refusing encryption, not a passing fault. */
        if (c->encrypt_required && !c->srv_error && c->lib_number == SYBEFCON) {
            rc = MCDC_E_UNSUPPORTED;
            if (err) err->code = rc;
        }
        if (c->encrypt_required && rc != MCDC_E_LOGIN)
            mcdc_error_wrap(err,
                            "Encrypt=%s requires TLS, and the login to %s failed (a server "
                            "without TLS, such as mssql-cdc-sim, refuses it: use Encrypt=no or "
                            "Encrypt=optional there)",
                            cs->encrypt == MCDC_ENCRYPT_STRICT ? "strict" : "yes", server);
        else
            mcdc_driver_wrap_login(err, rc, server, cs);
        mcdc_free(c);
        return rc;
    }
    dbsetuserdata(c->db, (BYTE *)c);
    if (opt->query_timeout_s > 0) {
        char t[16];
        snprintf(t, sizeof t, "%d", opt->query_timeout_s);
        dbsetopt(c->db, DBSETTIME, t, 0);
    }
    mcdc_conn *conn = NULL;
    rc = mcdc_conn_wrap(&conn, &FDB_CONN_OPS, c, err);
    if (rc != MCDC_OK) return rc;
    /* Without TEXTSIZE, SQL Server cuts (max) values to 4 KiB for db-lib. */
    char *spid = NULL;
    rc = mcdc_conn_scalar(&spid, conn, "SET TEXTSIZE 2147483647; SELECT @@SPID", NULL, 0, err);
    if (rc != MCDC_OK) {
        mcdc_error_wrap(err, "setting up the session on %s", server);
        mcdc_conn_close(conn);
        return rc;
    }
    int64_t v = 0;
    if (spid && mcdc_parse_i64(spid, &v) == MCDC_OK) c->spid = (int)v;
    mcdc_free(spid);
    *out = conn;
    return MCDC_OK;
}
