/*
 * tds_server.c - listener, connection threads and the request loop. See
 * tds_server.h. Bad input from a client is logged in one line and ends that
 * connection only.
 */
#include "tds_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tds_prep.h"
#include "tds_result.h"
#include "tds_tls.h"
#include "tds_wire.h"

/* Request buffers above this size are released after the request. */
#define TDS_KEEP_BUFFER_BYTES (1u << 20)

/* Rows between two attention polls when nothing went out meanwhile. */
#define TDS_ATTENTION_POLL_ROWS 1024

/* Reply packets go out in writes of up to this many bytes: one send() for
 * eight 32 KiB packets (or 64 of 4 KiB) rather than one per packet. */
#define TDS_SEND_BYTES (256u * 1024u)
_Static_assert(TDS_SEND_BYTES <= TDS_OUT_HOLD_BYTES_MAX, "send region within the hold limit");

/* Finished packets wait at most about this long for the next ones when rows
 * come slowly (checked at each attention poll). */
#define TDS_HOLD_US 2000

typedef struct slot {
    pthread_t tid;
    int fd;        /* -1 once the connection closed it */
    int state;     /* 0 free, 1 running, 2 finished (join me) */
    bool authed;   /* LOGIN7 succeeded: no login deadline */
    bool expired;  /* shut down by the login deadline */
    int64_t accepted_us; /* monotonic */
} slot;

struct sim_tds_server {
    sim_server *engine;
    int listen_fd;
    int wake[2];
    int port;
    int version_major;
    sim_tls_mode tls_mode;
    sim_tls_ctx *tls;      /* NULL when tls_mode is SIM_TLS_OFF */
    int login_timeout_ms;  /* < 0: none */
    int max_pending;
    atomic_int stopping;
    pthread_mutex_t mu;
    slot slots[MCDC_SIM_SESSIONS_MAX];
};

typedef struct conn {
    sim_tds_server *srv;
    int idx;
    int fd;
    sim_session *sess;
    sim_tds_out out;
    sim_tds_result res;
    sim_tds_msg msg;
    sim_tds_rpc rpc;
    sim_tds_prep prep;
    mcdc_buf text;
    uint64_t packets_sent; /* writes of one or more packets */
    int64_t last_send_us;  /* monotonic time of the last write */
    int64_t net_wait_us;   /* blocked sending, not yet handed to the engine */
    char login_db[TDS_LOGIN_STR_BYTES]; /* database after login: RESETCONNECTION returns */
    uint64_t packets_polled;
    int rows_since_poll;
    bool dropped;          /* closed by a fault or found closed */
    sim_tls_conn *tls;     /* the session once a handshake ran */
    bool tls_on;           /* bytes go through tls (else plaintext) */
    bool tls_login_only;   /* TLS ends after the LOGIN7 message */
    char peer[64];
} conn;

/* ---- socket I/O ------------------------------------------------------------- */
static int sock_read(void *ctx, uint8_t *p, size_t n) {
    conn *c = ctx;
    if (c->tls_on) return sim_tls_read(c->tls, p, n);
    while (n) {
        ssize_t k = recv(c->fd, p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Writes bytes to the socket. Time spent blocked because the client does not
 * read fast enough is what SQL Server reports as ASYNC_NETWORK_IO: it goes to
 * the engine's wait statistics. */
static int raw_write(void *ctx, const uint8_t *p, size_t n) {
    conn *c = ctx;
    if (c->dropped) return -1;
    while (n) {
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int64_t t0 = mcdc_monotonic_us();
            struct pollfd pf = {c->fd, POLLOUT, 0};
            int r = poll(&pf, 1, -1); /* a server stop shuts the socket down: wakes */
            c->net_wait_us += mcdc_monotonic_us() - t0;
            if (r < 0 && errno != EINTR) return -1;
            continue;
        }
        return -1;
    }
    if (c->net_wait_us >= 1000 && c->sess) {
        int64_t ms = c->net_wait_us / 1000;
        sim_session_add_network_wait(c->sess, ms);
        c->net_wait_us -= ms * 1000;
    }
    return 0;
}

/* Writes a packet, through TLS when the session is encrypted. */
static int sock_write(void *ctx, const uint8_t *p, size_t n) {
    conn *c = ctx;
    if (c->dropped) return -1;
    int rc = c->tls_on ? sim_tls_write(c->tls, p, n) : raw_write(c, p, n);
    if (rc == 0) {
        c->packets_sent++;
        c->last_send_us = mcdc_monotonic_us();
    }
    return rc;
}

/* Ends the connection at once, mid-packet: the client sees the finished
 * packets, a truncated packet and then a reset. */
static void drop_now(conn *c) {
    if (c->dropped) return;
    sim_tds_out *o = &c->out;
    (void)sim_tds_out_push(o);
    if (o->pos > TDS_HEADER_BYTES && !o->failed) {
        uint8_t *h = o->buf;
        h[0] = o->type;
        h[1] = 0;
        h[2] = (uint8_t)(o->size >> 8);
        h[3] = (uint8_t)o->size;
        h[4] = (uint8_t)(o->spid >> 8);
        h[5] = (uint8_t)o->spid;
        h[6] = o->packet_id;
        h[7] = 0;
        if (c->tls_on) (void)sim_tls_write(c->tls, o->buf, o->pos);
        else (void)!send(c->fd, o->buf, o->pos, MSG_NOSIGNAL);
    }
    struct linger lg = {1, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    shutdown(c->fd, SHUT_RDWR);
    c->dropped = true;
    o->failed = 1;
}

/* Non-blocking look for an ATTENTION. Returns 1 when one was consumed, -1
 * when the peer is gone, 0 otherwise. */
static int poll_attention(conn *c) {
    uint8_t h[TDS_HEADER_BYTES];
    if (c->tls_on) {
        int k = sim_tls_peek(c->tls, h, sizeof h);
        if (k <= 0) return k;
        if (h[0] != TDS_PKT_ATTENTION || k < (int)sizeof h) return 0;
    } else {
        struct pollfd pf = {c->fd, POLLIN, 0};
        if (poll(&pf, 1, 0) <= 0) return 0;
        if (pf.revents & (POLLERR | POLLNVAL)) return -1;
        ssize_t k = recv(c->fd, h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
        if (k == 0) return -1;
        if (k < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
        if (h[0] != TDS_PKT_ATTENTION) return 0; /* a pipelined request: leave it */
        if (k < (ssize_t)sizeof h) return 0;      /* the rest comes soon; next poll */
    }
    if (sock_read(c, h, sizeof h)) return -1;
    size_t len = (size_t)((h[2] << 8) | h[3]);
    uint8_t junk[64];
    for (size_t rest = len > TDS_HEADER_BYTES ? len - TDS_HEADER_BYTES : 0; rest;) {
        size_t m = rest < sizeof junk ? rest : sizeof junk;
        if (sock_read(c, junk, m)) return -1;
        rest -= m;
    }
    return 1;
}

/* The sink's check hook: row faults and attention. */
static int conn_check(void *ctx, sim_tds_result *r, int what) {
    conn *c = ctx;
    if (c->dropped || c->out.failed) return 1;
    if (what == 0) {
        sim_fault_action act = {0};
        sim_fault_check(c->srv->engine, c->sess, SIM_FAULT_ROW, &act);
        if (act.drop_connection) {
            mcdc_log(MCDC_LOG_INFO, "sim: fault: dropping connection %s mid-result", c->peer);
            drop_now(c);
            return 1;
        }
        if (act.delay_ms > 0) {
            /* the client sees the rows before the pause, as it would from a packet per write */
            if (sim_tds_out_push(&c->out)) return 1;
            mcdc_sleep_ms(act.delay_ms);
        }
        if (++c->rows_since_poll < TDS_ATTENTION_POLL_ROWS &&
            c->packets_sent == c->packets_polled)
            return 0;
        if (c->out.held && mcdc_monotonic_us() - c->last_send_us >= TDS_HOLD_US &&
            sim_tds_out_push(&c->out))
            return 1;
    } else if (sim_tds_out_push(&c->out)) { /* a new result, its end or a wait */
        return 1;
    }
    c->rows_since_poll = 0;
    c->packets_polled = c->packets_sent;
    int a = poll_attention(c);
    if (a > 0) {
        r->attention = true;
        return 1;
    }
    if (a < 0) {
        c->dropped = true;
        return 1;
    }
    return 0;
}

/* ---- requests ---------------------------------------------------------------- */
/* Fault point at the start of a request. Returns -1 when the connection must
 * end. */
static int query_faults(conn *c) {
    sim_fault_action act = {0};
    sim_fault_check(c->srv->engine, c->sess, SIM_FAULT_QUERY, &act);
    if (act.drop_connection) {
        mcdc_log(MCDC_LOG_INFO, "sim: fault: dropping connection %s at a request", c->peer);
        drop_now(c);
        return -1;
    }
    if (act.delay_ms > 0) mcdc_sleep_ms(act.delay_ms);
    if (act.stall_ms > 0) mcdc_sleep_ms(act.stall_ms);
    return 0;
}

static int discard_columns(void *ctx, const sim_column *cols, int ncols) {
    (void)ctx, (void)cols, (void)ncols;
    return 0;
}
static int discard_row(void *ctx, const sim_value *vals, int ncols) {
    (void)ctx, (void)vals, (void)ncols;
    return 0;
}
static int discard_done(void *ctx, int64_t rows, bool has_count, bool in_proc, bool error) {
    (void)ctx, (void)rows, (void)has_count, (void)in_proc, (void)error;
    return 0;
}
static int discard_message(void *ctx, bool is_error, int number, int state, int cls,
                           const char *text, const char *proc, int line) {
    (void)ctx, (void)is_error, (void)number, (void)state, (void)cls, (void)text, (void)proc;
    (void)line;
    return 0;
}
static int discard_db(void *ctx, const char *new_db, const char *old_db) {
    (void)ctx, (void)new_db, (void)old_db;
    return 0;
}

/* RESETCONNECTION(SKIPTRAN) on a request: the session goes back to its state
 * after login (an open transaction rolled back unless SKIPTRAN, the login's
 * database), silently, and the reply starts with ENVCHANGE 18. Connection
 * pools (ODBC, mssql-python) send it when they reuse a connection. */
static int reset_ack(conn *c) {
    if (!(c->msg.status & (TDS_STATUS_RESETCONNECTION | TDS_STATUS_RESETCONNECTIONSKIPTRAN)))
        return 0;
    char sql[2 * TDS_LOGIN_STR_BYTES + 80];
    size_t n = (size_t)snprintf(sql, sizeof sql, "%sUSE [",
                                (c->msg.status & TDS_STATUS_RESETCONNECTION)
                                    ? "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION; "
                                    : "");
    for (const char *d = c->login_db; *d && n + 4 < sizeof sql; d++) {
        if (*d == ']') sql[n++] = ']';
        sql[n++] = *d;
    }
    sql[n++] = ']';
    sql[n] = 0;
    sim_sink quiet = {NULL, discard_columns, discard_row, discard_done, discard_message,
                      discard_db, NULL, NULL, NULL, NULL, NULL};
    (void)sim_exec_batch(c->sess, sql, n, &quiet);
    uint8_t tok[] = {TDS_TOK_ENVCHANGE, 3, 0, TDS_ENV_RESETACK, 0, 0};
    return sim_tds_out_bytes(&c->out, tok, sizeof tok);
}

static int handle_batch(conn *c) {
    mcdc_error err = MCDC_ERROR_INIT;
    if (sim_tds_batch_decode(&c->text, c->msg.payload.data, c->msg.payload.len, &err)) {
        mcdc_log(MCDC_LOG_WARN, "sim: %s: bad SQL batch: %s", c->peer, err.message);
        return -1;
    }
    if (query_faults(c)) return -1;
    sim_session_count_request(c->sess);
    sim_tds_result_begin(&c->res, false, true);
    if (reset_ack(c)) return -1;
    sim_sink sink;
    sim_tds_result_sink(&c->res, &sink);
    (void)sim_exec_batch(c->sess, (const char *)c->text.data, c->text.len, &sink);
    if (c->dropped) return -1;
    if (c->res.attention) return sim_tds_result_attention_ack(&c->res);
    return sim_tds_result_end_batch(&c->res);
}

static int handle_rpc(conn *c) {
    mcdc_error err = MCDC_ERROR_INIT;
    sim_session_count_request(c->sess);
    const uint8_t *p = c->msg.payload.data;
    size_t n = c->msg.payload.len, pos;
    if (sim_tds_skip_all_headers(p, n, &pos, &err)) {
        mcdc_log(MCDC_LOG_WARN, "sim: %s: bad RPC request: %s", c->peer, err.message);
        return -1;
    }
    if (query_faults(c)) return -1;
    sim_tds_result_begin(&c->res, true, true);
    if (reset_ack(c)) return -1;
    sim_sink sink;
    sim_tds_result_sink(&c->res, &sink);
    for (bool more = true; more;) {
        int rc = sim_tds_rpc_decode(&c->rpc, p, n, &pos, &more, &err);
        if (rc == MCDC_E_UNSUPPORTED || rc == MCDC_E_LIMIT) {
            /* valid TDS we do not serve: answer with an error, keep the session */
            sim_tds_result_begin(&c->res, true, false);
            int number = err.server_number == TDS_ERR_TOO_MANY_PARAMS ? TDS_ERR_TOO_MANY_PARAMS : 8016;
            if (sim_tds_tok_message(&c->out, true, number, 1, 16, err.message, c->rpc.proc_name, 1))
                return -1;
            c->res.any_error = true;
            return sim_tds_result_end_rpc(&c->res, true);
        }
        if (rc) {
            mcdc_log(MCDC_LOG_WARN, "sim: %s: bad RPC request: %s", c->peer, err.message);
            return -1;
        }
        sim_tds_result_begin(&c->res, true, false);
        sim_tds_prep_action act;
        const sim_param *ps;
        int np;
        int32_t handle;
        rc = sim_tds_prep_rewrite(&c->prep, &c->rpc, &act, &ps, &np, &handle, &err);
        if (rc) {
            if (sim_tds_tok_message(&c->out, true, rc == MCDC_E_NOTFOUND ? 8179 : 8144, 1, 16,
                                err.message, c->rpc.proc_name, 1))
                return -1;
            c->res.any_error = true;
            if (sim_tds_result_end_rpc(&c->res, !more)) return -1;
            continue;
        }
        /* output parameters of the rewritten sp_executesql: ordinals of the RPC as sent */
        if (act == TDS_PREP_EXEC) c->res.rv_ordinal_shift = c->rpc.nparams - np;
        if (handle >= 0) {
            c->res.has_handle = true;
            c->res.handle = handle;
            c->res.handle_ordinal = 0;
            snprintf(c->res.handle_name, sizeof c->res.handle_name, "%s",
                     c->rpc.nparams ? c->rpc.params[0].name : "");
        }
        if (act == TDS_PREP_PASS)
            (void)sim_exec_rpc(c->sess, c->rpc.proc_name, c->rpc.params, c->rpc.nparams, &sink);
        else if (act == TDS_PREP_EXEC)
            (void)sim_exec_rpc(c->sess, "sp_executesql", ps, np, &sink);
        if (c->dropped) return -1;
        if (c->res.attention) return sim_tds_result_attention_ack(&c->res);
        if (sim_tds_result_end_rpc(&c->res, !more)) return -1;
    }
    return c->out.failed ? -1 : 0;
}

/* Transaction manager requests (ODBC, python-tds with autocommit off) run as
 * the equivalent T-SQL. */
static int handle_tm(conn *c) {
    mcdc_error err = MCDC_ERROR_INIT;
    char sql[400];
    int rc = sim_tds_tm_decode(sql, sizeof sql, c->msg.payload.data, c->msg.payload.len, &err);
    if (rc && rc != MCDC_E_UNSUPPORTED) {
        mcdc_log(MCDC_LOG_WARN, "sim: %s: bad transaction manager request: %s", c->peer,
                 err.message);
        return -1;
    }
    if (query_faults(c)) return -1;
    sim_tds_result_begin(&c->res, false, true);
    if (reset_ack(c)) return -1;
    if (rc) {
        if (sim_tds_tok_message(&c->out, true, 8009, 1, 16, err.message, "", 1)) return -1;
        c->res.any_error = true;
        return sim_tds_result_end_batch(&c->res);
    }
    sim_sink sink;
    sim_tds_result_sink(&c->res, &sink);
    (void)sim_exec_batch(c->sess, sql, strlen(sql), &sink);
    if (c->dropped) return -1;
    if (c->res.attention) return sim_tds_result_attention_ack(&c->res);
    return sim_tds_result_end_batch(&c->res);
}

static int handle_login(conn *c) {
    mcdc_error err = MCDC_ERROR_INIT;
    sim_tds_login7 *lg = mcdc_malloc(sizeof *lg);
    if (!lg) return -1;
    int rc = sim_tds_login7_parse(lg, c->msg.payload.data, c->msg.payload.len, &err);
    if (rc) {
        mcdc_log(MCDC_LOG_WARN, "sim: %s: bad LOGIN7: %s", c->peer, err.message);
        mcdc_free(lg);
        return -1;
    }
    char fail[MCDC_ERROR_MESSAGE_MAX + 64] = "";
    int num = 18456, state = 1, cls = 14;
    sim_fault_action act = {0};
    sim_fault_check(c->srv->engine, NULL, SIM_FAULT_LOGIN, &act);
    if (act.refuse_login || lg->integrated_security) {
        snprintf(fail, sizeof fail, "Login failed for user '%s'.", lg->user);
    } else if (sim_login(c->srv->engine, &c->sess, lg->user, lg->password, lg->database,
                         lg->app, &err) != MCDC_OK) {
        c->sess = NULL;
        if (err.server_number) {
            num = err.server_number;
            state = err.server_state;
            cls = err.server_class ? err.server_class : 14;
            snprintf(fail, sizeof fail, "%s", err.message);
        } else {
            snprintf(fail, sizeof fail, "Login failed for user '%s'.", lg->user);
        }
    }
    sim_tds_login7_wipe(lg);
    if (fail[0]) {
        mcdc_log(MCDC_LOG_INFO, "sim: %s: login of '%s' refused", c->peer, lg->user);
        mcdc_free(lg);
        (void)sim_tds_login_fail_reply(&c->out, num, state, cls, fail);
        return -1;
    }
    /* logged in: no deadline, not pending (before the reply, which the
     * client may answer with its next connection) */
    pthread_mutex_lock(&c->srv->mu);
    c->srv->slots[c->idx].authed = true;
    pthread_mutex_unlock(&c->srv->mu);
    c->res.nbcrow = lg->tds_version >= 0x730B0003u; /* 7.3B and 7.4 read NBCROW */
    c->res.sess = c->sess; /* its database names the CLR types' COLMETADATA */
    int ps = sim_tds_packet_size_negotiate(lg->packet_size);
    int asked = lg->packet_size ? (int)lg->packet_size : MCDC_TDS_PACKET_BYTES_DEFAULT;
    bool fe = lg->feature_ext;
    mcdc_free(lg);
    c->out.spid = (uint16_t)sim_session_spid(c->sess);
    mcdc_log(MCDC_LOG_INFO, "sim: %s: logged in, spid %d, packet size %d%s", c->peer,
             c->out.spid, ps, fe ? ", FeatureExt declined" : "");
    const char *db = sim_session_database(c->sess);
    snprintf(c->login_db, sizeof c->login_db, "%s", db ? db : "master");
    if (sim_tds_login_reply(&c->out, db ? db : "master", asked, ps, fe, c->srv->version_major))
        return -1;
    c->out.size = (size_t)ps;
    sim_session_set_packet_size(c->sess, ps);
    return 0;
}

static bool login_expired(conn *c);

/* Runs the TLS handshake: inside PRELOGIN packets (TDS 7.x) or first thing
 * on the socket (TDS 8.0 strict). */
static int start_tls(conn *c, bool wrapped) {
    mcdc_error err = MCDC_ERROR_INIT;
    if (sim_tls_conn_create(&c->tls, c->srv->tls, c->fd, raw_write, c, &err) != MCDC_OK ||
        sim_tls_handshake(c->tls, wrapped, &err) != MCDC_OK) {
        if (login_expired(c))
            mcdc_log(MCDC_LOG_WARN, "sim: %s: no login within %d ms (in the TLS handshake); closed",
                     c->peer, c->srv->login_timeout_ms);
        else
            mcdc_log(MCDC_LOG_WARN, "sim: %s: %s", c->peer, err.message);
        return -1;
    }
    c->tls_on = true;
    char how[96];
    sim_tls_describe(c->tls, how, sizeof how);
    mcdc_log(MCDC_LOG_INFO, "sim: %s: TLS established (%s%s)", c->peer, how,
             wrapped ? "" : ", TDS 8.0 strict");
    return 0;
}

/* PRELOGIN: answers the encryption question and starts TLS when agreed. */
static int handle_prelogin(conn *c, bool strict) {
    mcdc_error err = MCDC_ERROR_INIT;
    sim_tds_prelogin pl;
    if (sim_tds_prelogin_parse(&pl, c->msg.payload.data, c->msg.payload.len, &err)) {
        mcdc_log(MCDC_LOG_WARN, "sim: %s: bad PRELOGIN: %s", c->peer, err.message);
        return -1;
    }
    int enc = sim_tls_negotiate(c->srv->tls_mode, pl.encryption);
    if (sim_tds_prelogin_reply(&c->out, c->srv->version_major, enc)) return -1;
    if (strict) return 0; /* already inside TLS */
    switch (sim_tls_after_prelogin(pl.encryption, enc)) {
    case SIM_TLS_AFTER_PLAIN:
        if (pl.encryption == TDS_ENCRYPT_ON || pl.encryption == TDS_ENCRYPT_REQ)
            mcdc_log(MCDC_LOG_INFO, "sim: %s: client requires encryption, which this "
                                    "server does not offer (--tls off)", c->peer);
        return 0;
    case SIM_TLS_AFTER_REFUSE:
        mcdc_log(MCDC_LOG_WARN,
                 "sim: %s: the client does not support encryption, which this server "
                 "requires (--tls required); closing",
                 c->peer);
        return -1;
    case SIM_TLS_AFTER_LOGIN_ONLY: c->tls_login_only = true; break;
    case SIM_TLS_AFTER_FULL: break;
    }
    return start_tls(c, true);
}

/* True when the client's first byte is a TLS handshake record (TDS 8.0). */
static bool starts_with_tls(conn *c) {
    uint8_t b = 0;
    ssize_t k;
    do k = recv(c->fd, &b, 1, MSG_PEEK);
    while (k < 0 && errno == EINTR);
    return k == 1 && b == 0x16;
}

/* The listener shut the connection down at its login deadline. */
static bool login_expired(conn *c) {
    pthread_mutex_lock(&c->srv->mu);
    bool e = c->srv->slots[c->idx].expired;
    pthread_mutex_unlock(&c->srv->mu);
    return e;
}

static void conn_loop(conn *c) {
    mcdc_error err = MCDC_ERROR_INIT;
    bool strict = false;
    if (starts_with_tls(c)) {
        if (!c->srv->tls) {
            mcdc_log(MCDC_LOG_WARN,
                     "sim: %s: the client starts with TLS (TDS 8.0 strict encryption), which "
                     "this server does not offer (--tls off); connect with Encrypt=no",
                     c->peer);
            return;
        }
        if (start_tls(c, false)) return;
        strict = true;
    }
    /* login phase: small messages of two types only (sim_tds_msg_read) */
    c->msg.login_phase = true;
    for (;;) {
        if (sim_tds_msg_read(&c->msg, sock_read, c, &err)) {
            if (login_expired(c))
                mcdc_log(MCDC_LOG_WARN, "sim: %s: no login within %d ms; closed", c->peer,
                         c->srv->login_timeout_ms);
            else if (err.code != MCDC_E_IO)
                mcdc_log(MCDC_LOG_WARN, "sim: %s: %s; closing", c->peer, err.message);
            return;
        }
        if (c->msg.type == TDS_PKT_PRELOGIN && !c->tls) {
            if (handle_prelogin(c, false)) return;
            continue;
        }
        if (c->msg.type == TDS_PKT_PRELOGIN && strict) {
            if (handle_prelogin(c, true)) return;
            continue;
        }
        if (c->msg.type == TDS_PKT_LOGIN7) {
            /* LOGIN7 went through TLS; with encryption OFF the rest is plaintext */
            if (c->tls_login_only) c->tls_on = false;
            int rc = handle_login(c);
            /* the obfuscated password is in the payload: do not keep it */
            if (c->msg.payload.data) memset(c->msg.payload.data, 0, c->msg.payload.cap);
            if (rc) return;
            c->msg.login_phase = false;
            break;
        }
        mcdc_log(MCDC_LOG_WARN, "sim: %s: packet type 0x%02x before login; closing", c->peer,
                 c->msg.type);
        return;
    }
    /* requests */
    for (;;) {
        if (sim_tds_msg_read(&c->msg, sock_read, c, &err)) {
            if (err.code != MCDC_E_IO && !atomic_load(&c->srv->stopping))
                mcdc_log(MCDC_LOG_WARN, "sim: %s: %s", c->peer, err.message);
            return;
        }
        int rc;
        switch (c->msg.type) {
        case TDS_PKT_SQL_BATCH: rc = handle_batch(c); break;
        case TDS_PKT_RPC: rc = handle_rpc(c); break;
        case TDS_PKT_ATTENTION:
            sim_tds_result_begin(&c->res, false, true);
            rc = sim_tds_result_attention_ack(&c->res);
            break;
        case TDS_PKT_TRANSACTION: rc = handle_tm(c); break;
        default:
            mcdc_log(MCDC_LOG_WARN, "sim: %s: unexpected packet type 0x%02x; closing", c->peer,
                     c->msg.type);
            rc = -1;
        }
        if (rc || c->dropped || c->out.failed) return;
        if (c->res.fatal) {
            mcdc_log(MCDC_LOG_INFO, "sim: %s: fatal error (class >= 20): closing", c->peer);
            return;
        }
        /* a one-off huge request (a bulk INSERT script) does not pin its memory */
        if (c->msg.payload.cap > TDS_KEEP_BUFFER_BYTES) sim_tds_msg_free(&c->msg);
        if (c->text.cap > TDS_KEEP_BUFFER_BYTES) mcdc_buf_free(&c->text);
        if (c->rpc.arena.cap > TDS_KEEP_BUFFER_BYTES || c->rpc.scratch.cap > TDS_KEEP_BUFFER_BYTES)
            sim_tds_rpc_free(&c->rpc);
    }
}

mcdc_log_sink g_sim_log_sink = {NULL, NULL, MCDC_LOG_WARN};

static void *conn_main(void *arg) {
    mcdc_log_use(&g_sim_log_sink);
    conn *c = arg;
    sim_tds_server *s = c->srv;
    mcdc_error err = MCDC_ERROR_INIT;
    if (sim_tds_out_init(&c->out, sock_write, c, &err) == MCDC_OK &&
        sim_tds_out_hold(&c->out, TDS_SEND_BYTES, &err) == MCDC_OK) {
        sim_tds_result_init(&c->res, &c->out, &err);
        c->res.check = conn_check;
        c->res.check_ctx = c;
        conn_loop(c);
    }
    sim_session_close(c->sess);
    sim_tds_result_free(&c->res);
    sim_tds_out_free(&c->out);
    sim_tds_msg_free(&c->msg);
    sim_tds_rpc_free(&c->rpc);
    sim_tds_prep_free(&c->prep);
    mcdc_buf_free(&c->text);
    sim_tls_conn_free(c->tls);
    if (!c->dropped) { /* bytes left unread would turn the close into a reset */
        uint8_t junk[4096];
        for (int i = 0; i < 16 && recv(c->fd, junk, sizeof junk, MSG_DONTWAIT) > 0; i++) {}
    }
    pthread_mutex_lock(&s->mu);
    close(c->fd);
    s->slots[c->idx].fd = -1;
    s->slots[c->idx].state = 2;
    pthread_mutex_unlock(&s->mu);
    mcdc_log(MCDC_LOG_INFO, "sim: %s: disconnected", c->peer);
    mcdc_free(c);
    return NULL;
}

/* ---- listener ------------------------------------------------------------------- */
int sim_tds_server_create(sim_tds_server **out, sim_server *engine, const sim_tds_server_config *cfg,
                      mcdc_error *err) {
    *out = NULL;
    sim_tds_server *s = mcdc_calloc(1, sizeof *s);
    if (!s) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for the TDS server");
    s->engine = engine;
    s->version_major = cfg->version_major > 0 ? cfg->version_major : 16;
    s->tls_mode = cfg->tls_mode;
    s->login_timeout_ms = cfg->login_timeout_ms == 0 ? SIM_TDS_LOGIN_TIMEOUT_MS_DEFAULT : cfg->login_timeout_ms;
    s->max_pending = cfg->max_pending_logins > 0 ? cfg->max_pending_logins : SIM_TDS_PENDING_LOGINS_DEFAULT;
    s->listen_fd = -1;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    for (int i = 0; i < MCDC_SIM_SESSIONS_MAX; i++) s->slots[i].fd = -1;
    const char *host = cfg->host ? cfg->host : "127.0.0.1";
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)cfg->port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        sim_tds_server_free(s);
        return mcdc_error_set(err, MCDC_E_INVALID, "listen address '%s' is not an IPv4 address",
                              host);
    }
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        sim_tds_server_free(s);
        return mcdc_error_set(err, MCDC_E_IO, "pipe: %s", strerror(errno));
    }
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (s->listen_fd < 0 ||
        setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(s->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->listen_fd, 128)) {
        int e = errno;
        sim_tds_server_free(s);
        return mcdc_error_set(err, MCDC_E_IO,
                              "cannot listen on %s:%d: %s (is another server using the port?)",
                              host, cfg->port, strerror(e));
    }
    if (s->tls_mode != SIM_TLS_OFF) {
        int rc = sim_tls_ctx_create(&s->tls, cfg->tls_cert_file, cfg->tls_key_file,
                                    cfg->tls_dir, err);
        if (rc != MCDC_OK) {
            sim_tds_server_free(s);
            return rc;
        }
    }
    socklen_t al = sizeof a;
    getsockname(s->listen_fd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    *out = s;
    return MCDC_OK;
}

int sim_tds_server_port(const sim_tds_server *s) { return s->port; }

void sim_tds_server_stop(sim_tds_server *s) {
    atomic_store(&s->stopping, 1);
    if (s->wake[1] >= 0) (void)!write(s->wake[1], "x", 1);
}

static void reap(sim_tds_server *s, bool all) {
    for (int i = 0; i < MCDC_SIM_SESSIONS_MAX; i++) {
        pthread_mutex_lock(&s->mu);
        int st = s->slots[i].state;
        if (all && st == 1 && s->slots[i].fd >= 0) shutdown(s->slots[i].fd, SHUT_RDWR);
        pthread_mutex_unlock(&s->mu);
        if (st == 2 || (all && st == 1)) {
            pthread_join(s->slots[i].tid, NULL);
            pthread_mutex_lock(&s->mu);
            s->slots[i].state = 0;
            pthread_mutex_unlock(&s->mu);
        }
    }
}

/* Shuts down the connections past their login deadline (their threads see
 * the socket closed and end); returns the ms until the next deadline (at
 * most 1000), and the count of connections not logged in yet. */
static int login_deadlines(sim_tds_server *s, int *pending) {
    int64_t now = mcdc_monotonic_us(), next_ms = 1000;
    *pending = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < MCDC_SIM_SESSIONS_MAX; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != 1 || sl->authed || sl->fd < 0 || sl->expired) continue;
        (*pending)++;
        if (s->login_timeout_ms < 0) continue;
        int64_t left_ms = (sl->accepted_us + (int64_t)s->login_timeout_ms * 1000 - now + 999) / 1000;
        if (left_ms <= 0) {
            sl->expired = true;
            shutdown(sl->fd, SHUT_RDWR);
            (*pending)--;
        } else if (left_ms < next_ms) {
            next_ms = left_ms;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return (int)next_ms;
}

int sim_tds_server_run(sim_tds_server *s, mcdc_error *err) {
    (void)err;
    while (!atomic_load(&s->stopping)) {
        int pending;
        int wait_ms = login_deadlines(s, &pending);
        struct pollfd pf[2] = {{s->listen_fd, POLLIN, 0}, {s->wake[0], POLLIN, 0}};
        int k = poll(pf, 2, wait_ms);
        if (k < 0 && errno != EINTR) {
            mcdc_log(MCDC_LOG_ERROR, "sim: poll: %s", strerror(errno));
            break;
        }
        reap(s, false);
        if (k <= 0 || !(pf[0].revents & POLLIN)) continue;
        struct sockaddr_in peer;
        socklen_t pl = sizeof peer;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
        if (fd < 0) continue;
        (void)login_deadlines(s, &pending);
        if (pending >= s->max_pending) {
            mcdc_log(MCDC_LOG_WARN, "sim: refusing a connection: %d connections have not logged in yet"
                                    " (--max-pending-logins)", pending);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int idx = -1;
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < MCDC_SIM_SESSIONS_MAX && idx < 0; i++)
            if (s->slots[i].state == 0) idx = i;
        pthread_mutex_unlock(&s->mu);
        conn *c = idx >= 0 ? mcdc_calloc(1, sizeof *c) : NULL;
        if (!c) {
            mcdc_log(MCDC_LOG_WARN, "sim: refusing a connection: %d sessions are open (the limit)",
                     MCDC_SIM_SESSIONS_MAX);
            close(fd);
            continue;
        }
        c->srv = s;
        c->idx = idx;
        c->fd = fd;
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "%s:%d", ip, ntohs(peer.sin_port));
        pthread_mutex_lock(&s->mu);
        s->slots[idx].fd = fd;
        s->slots[idx].state = 1;
        s->slots[idx].authed = s->slots[idx].expired = false;
        s->slots[idx].accepted_us = mcdc_monotonic_us();
        int rc = pthread_create(&s->slots[idx].tid, NULL, conn_main, c);
        if (rc) {
            s->slots[idx].state = 0;
            s->slots[idx].fd = -1;
        }
        pthread_mutex_unlock(&s->mu);
        if (rc) {
            mcdc_log(MCDC_LOG_WARN, "sim: cannot start a connection thread: %s", strerror(rc));
            close(fd);
            mcdc_free(c);
        }
    }
    if (s->listen_fd >= 0) close(s->listen_fd);
    s->listen_fd = -1;
    reap(s, true);
    return MCDC_OK;
}

void sim_tds_server_free(sim_tds_server *s) {
    if (!s) return;
    if (s->listen_fd >= 0) close(s->listen_fd);
    reap(s, true);
    if (s->wake[0] >= 0) close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    sim_tls_ctx_free(s->tls);
    pthread_mutex_destroy(&s->mu);
    mcdc_free(s);
}
