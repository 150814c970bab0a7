/*
 * mcdc_driver_native.c - the driver seam on our own TDS 7.4 client.
 *
 * TCP (IPv4/IPv6, non-blocking connect bounded by the login timeout,
 * TCP_NODELAY), PRELOGIN and TLS (mcdc_tds_tls.c), LOGIN7, SQL batches; replies decoded
 * by mcdc_tds_decode.c straight into the caller's batch columns. A result
 * freed before its end sends ATTENTION and drains to the DONE_ATTN. Waits
 * are poll()-bounded by query_timeout_s; a timeout or a lost connection is
 * MCDC_E_TRANSIENT and the connection is dead afterwards.
 *
 * Not yet: named instances
 * (SQL Browser), integrated security, MARS.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include "mcdc_driver.h"
#include "mcdc_limits.h"
#include "mcdc_tds_proto.h"
#include "mcdc_tds_tls.h"

typedef struct nat_conn {
    mcdc_tds_stream s;
    mcdc_tds_events ev;
    int spid;
} nat_conn;

typedef struct nat_result {
    nat_conn *c;
    mcdc_tds_meta meta;
    mcdc_schema *schema;
    bool done;          /* the whole reply has been read */
    const mcdc_schema *bound;
    int32_t bound_first;
} nat_result;

static void clear_events(mcdc_tds_events *ev) {
    ev->error = false;
    ev->number = ev->state = ev->klass = ev->line = 0;
    ev->text[0] = 0;
    ev->done_status = 0;
    ev->done_rows = 0;
}

static int report_server(nat_conn *c, mcdc_error *err, const char *what) {
    mcdc_tds_events *ev = &c->ev;
    int code = mcdc_driver_classify(ev->number, ev->klass);
    size_t n = strlen(ev->text);
    while (n && (ev->text[n - 1] == '\n' || ev->text[n - 1] == ' ')) ev->text[--n] = 0;
    mcdc_error_set(err, code, "%s: SQL Server error %d (severity %d, state %d, line %d): %s",
                   what, ev->number, ev->klass, ev->state, ev->line, ev->text);
    if (err) {
        err->server_number = ev->number;
        err->server_state = ev->state;
        err->server_class = ev->klass;
        err->server_line = ev->line;
    }
    if (ev->klass >= 20) c->s.dead = true;
    return code;
}

/* Reads the next token byte of the reply; *end when the reply is over. */
static int next_token(mcdc_tds_stream *s, uint8_t *tok, bool *end, mcdc_error *err) {
    int rc = mcdc_tds_at_end(s, end, err);
    if (rc != MCDC_OK || *end) return rc;
    rc = mcdc_tds_need(s, 1, err);
    if (rc != MCDC_OK) return rc;
    *tok = s->buf[s->pos++];
    return MCDC_OK;
}

/* Reads the rest of the reply, skipping rows; then reports a recorded error. */
static int drain(nat_result *r, mcdc_error *err) {
    nat_conn *c = r->c;
    mcdc_tds_meta tmp = {0, NULL};
    const mcdc_tds_meta *m = &r->meta;
    int rc = MCDC_OK;
    for (;;) {
        uint8_t tok = 0;
        bool end;
        rc = next_token(&c->s, &tok, &end, err);
        if (rc != MCDC_OK || end) break;
        if (tok == TDS_TOK_COLMETADATA) {
            rc = mcdc_tds_read_colmetadata(&c->s, &tmp, err);
            m = &tmp;
        } else if (tok == TDS_TOK_ROW || tok == TDS_TOK_NBCROW) {
            rc = mcdc_tds_skip_row(&c->s, tok, m, err);
        } else {
            rc = mcdc_tds_read_token(&c->s, tok, m, &c->ev, err);
        }
        if (rc != MCDC_OK) break;
    }
    mcdc_tds_meta_clear(&tmp);
    r->done = true;
    if (rc != MCDC_OK) {
        c->s.dead = true;
        return rc;
    }
    if (c->ev.error) return report_server(c, err, "reading results");
    return MCDC_OK;
}

/* ATTENTION, then skip everything up to the DONE with DONE_ATTN. */
static void cancel(nat_result *r) {
    nat_conn *c = r->c;
    r->done = true;
    if (c->s.dead) return;
    mcdc_error e = MCDC_ERROR_INIT;
    if (mcdc_tds_send(&c->s, TDS_PKT_ATTENTION, NULL, 0, &e) != MCDC_OK) return;
    int saved = c->s.timeout_ms;
    if (c->s.timeout_ms <= 0 || c->s.timeout_ms > 30000) c->s.timeout_ms = 30000;
    mcdc_tds_meta tmp = {0, NULL};
    const mcdc_tds_meta *m = &r->meta;
    for (;;) {
        uint8_t tok = 0;
        bool end;
        if (next_token(&c->s, &tok, &end, &e) != MCDC_OK) break;
        if (end) { /* the reply ended before the attention: the ack follows */
            mcdc_tds_begin_reply(&c->s);
            continue;
        }
        int rc;
        if (tok == TDS_TOK_COLMETADATA) {
            rc = mcdc_tds_read_colmetadata(&c->s, &tmp, &e);
            m = &tmp;
        } else if (tok == TDS_TOK_ROW || tok == TDS_TOK_NBCROW) {
            rc = mcdc_tds_skip_row(&c->s, tok, m, &e);
        } else {
            rc = mcdc_tds_read_token(&c->s, tok, m, &c->ev, &e);
            if (rc == MCDC_OK && (tok == TDS_TOK_DONE || tok == TDS_TOK_DONEPROC ||
                                  tok == TDS_TOK_DONEINPROC) &&
                (c->ev.done_status & TDS_DONE_ATTN)) {
                bool fin = false;
                /* The rest of this message, if any, belongs to nothing. */
                while (mcdc_tds_at_end(&c->s, &fin, &e) == MCDC_OK && !fin) c->s.pos = c->s.len;
                break;
            }
        }
        if (rc != MCDC_OK) break;
    }
    if (e.code != MCDC_OK) c->s.dead = true;
    mcdc_tds_meta_clear(&tmp);
    c->s.timeout_ms = saved;
}

static const mcdc_schema *nat_schema(void *impl) { return ((nat_result *)impl)->schema; }

static int nat_fetch(void *impl, mcdc_batch *into, int32_t first, int64_t rows_max,
                     int64_t bytes_max, int64_t *out_rows, mcdc_error *err) {
    nat_result *r = impl;
    nat_conn *c = r->c;
    mcdc_tds_stream *s = &c->s;
    *out_rows = 0;
    if (r->done) return MCDC_OK;
    int rc = MCDC_OK;
    if (r->bound != into->schema || r->bound_first != first) {
        rc = mcdc_tds_bind(&r->meta, into->schema->fields + first, err);
        if (rc != MCDC_OK) return rc;
        r->bound = into->schema;
        r->bound_first = first;
    }
    for (int i = 0; i < r->meta.ncols; i++) {
        rc = mcdc_col_reserve(&into->columns[first + i], rows_max, 0, err);
        if (rc != MCDC_OK) return rc;
    }
    mcdc_column *cols = into->columns + first;
    int64_t rows = 0;
    while (rows < rows_max) {
        rc = mcdc_tds_need(s, 1, err);
        if (rc != MCDC_OK) {
            bool end = false;
            if (s->msg_done && s->len == s->pos) { /* reply ended without a DONE */
                end = true;
                rc = MCDC_OK;
            }
            if (end) {
                r->done = true;
                if (c->ev.error) rc = report_server(c, err, "reading results");
            }
            break;
        }
        uint8_t tok = s->buf[s->pos++];
        if (__builtin_expect(tok == TDS_TOK_ROW || tok == TDS_TOK_NBCROW, 1)) {
            rc = mcdc_tds_decode_row(s, tok, &r->meta, cols, err);
            if (rc != MCDC_OK) break;
            rows++;
            if ((rows & 15) == 0 && mcdc_batch_bytes(into) >= bytes_max) break;
            continue;
        }
        if (tok == TDS_TOK_COLMETADATA) { /* a second result set: not ours */
            s->pos--;
            rc = drain(r, err);
            break;
        }
        rc = mcdc_tds_read_token(s, tok, &r->meta, &c->ev, err);
        if (rc != MCDC_OK) break;
        if (tok == TDS_TOK_DONE || tok == TDS_TOK_DONEPROC || tok == TDS_TOK_DONEINPROC) {
            rc = drain(r, err);
            break;
        }
    }
    if (rc != MCDC_OK) {
        if (!r->done) cancel(r);
        r->done = true;
        *out_rows = 0;
        if (s->dead && rc != MCDC_E_PROTOCOL && rc != MCDC_E_SERVER && rc != MCDC_E_PERMISSION &&
            rc != MCDC_E_LOGIN &&
            rc != MCDC_E_NOTFOUND && rc != MCDC_E_SCHEMA && rc != MCDC_E_LIMIT)
            rc = MCDC_E_TRANSIENT;
        if (err && err->code != rc && err->code == MCDC_E_IO) err->code = rc;
        return rc;
    }
    *out_rows = rows;
    return MCDC_OK;
}

static void nat_result_free(void *impl) {
    nat_result *r = impl;
    if (r == NULL) return;
    if (!r->done) cancel(r);
    mcdc_tds_meta_clear(&r->meta);
    mcdc_schema_unref(r->schema);
    mcdc_free(r);
}

static const mcdc_result_ops NAT_RESULT_OPS = {nat_schema, nat_fetch, nat_result_free};

static int describe(nat_result *r, mcdc_error *err) {
    int n = r->meta.ncols;
    int rc = mcdc_schema_create(&r->schema, n, err);
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        const mcdc_tds_col *tc = &r->meta.cols[i];
        rc = mcdc_schema_set(r->schema, i, tc->name ? tc->name : "", tc->nat_type,
                             tc->nat_precision, tc->nat_scale, 0, true, err);
    }
    return rc;
}

/* Reads the reply up to the first result set with columns (or its end). */
static int start_reply(nat_conn *c, nat_result *r, mcdc_error *err) {
    mcdc_tds_stream *s = &c->s;
    for (;;) {
        uint8_t tok = 0;
        bool end;
        int rc = next_token(s, &tok, &end, err);
        if (rc != MCDC_OK) return rc;
        if (end) {
            r->done = true;
            if (c->ev.error) return report_server(c, err, "running a query");
            return mcdc_schema_create(&r->schema, 0, err);
        }
        if (tok == TDS_TOK_COLMETADATA) {
            rc = mcdc_tds_read_colmetadata(s, &r->meta, err);
            if (rc != MCDC_OK) return rc;
            if (r->meta.ncols == 0) continue;
            if (c->ev.error) { /* an earlier statement failed */
                rc = drain(r, err);
                return rc != MCDC_OK ? rc : report_server(c, err, "running a query");
            }
            return describe(r, err);
        }
        if (tok == TDS_TOK_ROW || tok == TDS_TOK_NBCROW) {
            s->dead = true;
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "TDS: a row before any COLMETADATA in the reply from %s",
                                  s->where);
        }
        rc = mcdc_tds_read_token(s, tok, NULL, &c->ev, err);
        if (rc != MCDC_OK) return rc;
    }
}

static int nat_exec(void *impl, const char *sql, const mcdc_result_ops **out_ops,
                    void **out_result, mcdc_error *err) {
    nat_conn *c = impl;
    if (c->s.dead)
        return mcdc_error_set(err, MCDC_E_TRANSIENT,
                              "the connection to %s was lost earlier; open a new one", c->s.where);
    clear_events(&c->ev);
    mcdc_buf req = {0};
    req.limit = MCDC_TDS_MESSAGE_BYTES_MAX + 64u;
    int rc = mcdc_tds_build_sql_batch(&req, sql, c->ev.txn, err);
    if (rc == MCDC_OK) rc = mcdc_tds_send(&c->s, TDS_PKT_SQL_BATCH, req.data, req.len, err);
    mcdc_buf_free(&req);
    if (rc != MCDC_OK) return rc;
    mcdc_tds_begin_reply(&c->s);
    nat_result *r = mcdc_calloc(1, sizeof *r);
    if (r == NULL) {
        c->s.dead = true; /* the reply is unread: the connection is out of step */
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    r->c = c;
    rc = start_reply(c, r, err);
    if (rc != MCDC_OK) {
        if (!r->done && !c->s.dead) cancel(r);
        r->done = true;
        nat_result_free(r);
        if (c->s.dead && rc == MCDC_E_IO) rc = MCDC_E_TRANSIENT;
        return rc;
    }
    *out_ops = &NAT_RESULT_OPS;
    *out_result = r;
    return MCDC_OK;
}

static int nat_spid(void *impl) { return ((nat_conn *)impl)->spid; }
static bool nat_is_dead(void *impl) { return ((nat_conn *)impl)->s.dead; }
static void nat_close(void *impl) {
    nat_conn *c = impl;
    if (c == NULL) return;
    mcdc_tds_stream_free(&c->s);
    mcdc_free(c);
}

static const mcdc_conn_ops NAT_CONN_OPS = {nat_exec, nat_spid, nat_is_dead, nat_close};

/* ---- connecting ------------------------------------------------------------------- */
static int tcp_connect(int *out_fd, const char *host, int port, int64_t deadline_us,
                       const char *where, mcdc_error *err) {
    *out_fd = -1;
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, ports, &hints, &ai);
    if (g != 0)
        return mcdc_error_set(err, MCDC_E_TRANSIENT, "cannot resolve %s: %s", where,
                              gai_strerror(g));
    int last = 0;
    bool timed_out = false;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        a->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int r = connect(fd, a->ai_addr, a->ai_addrlen);
        if (r < 0 && errno == EINPROGRESS) {
            int64_t left = (deadline_us - mcdc_monotonic_us()) / 1000;
            struct pollfd p = {fd, POLLOUT, 0};
            int n = left > 0 ? poll(&p, 1, (int)left) : 0;
            if (n == 1) {
                int so = 0;
                socklen_t sl = sizeof so;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl);
                r = so == 0 ? 0 : -1;
                errno = so;
            } else {
                r = -1;
                if (n == 0) timed_out = true;
                errno = n == 0 ? ETIMEDOUT : errno;
            }
        }
        if (r == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            freeaddrinfo(ai);
            *out_fd = fd;
            return MCDC_OK;
        }
        last = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    return mcdc_error_set(err, MCDC_E_TRANSIENT, "cannot connect to %s: %s", where,
                          timed_out ? "timed out (login timeout)" : strerror(last));
}

static int login(nat_conn *c, const mcdc_connstr *cs, const mcdc_conn_options *opt,
                 const char *server, mcdc_error *err) {
    mcdc_tds_stream *s = &c->s;
    mcdc_tds_tls_params tp = {
        .require = cs->encrypt == MCDC_ENCRYPT_YES,
        .strict = cs->encrypt == MCDC_ENCRYPT_STRICT,
        .trust_server_certificate = cs->trust_server_certificate == 1,
        .host_name = cs->host_name_in_certificate ? cs->host_name_in_certificate : cs->host,
        .server_name = cs->host,
        .trust_file = cs->server_certificate,
    };
    int rc = mcdc_tds_prelogin_exchange(s, &tp, server, err);
    if (rc != MCDC_OK) return rc;
    mcdc_tds_login_params lp = {
        .host = "localhost",
        .user = cs->user,
        .password = cs->password,
        .app = opt->app_name ? opt->app_name : cs->app ? cs->app : "mssql-cdc",
        .server = cs->host,
        .database = cs->database,
        .library = "mssql-cdc",
        .packet_bytes = opt->packet_bytes ? opt->packet_bytes : MCDC_TDS_PACKET_BYTES_MAX,
    };
    char host[256];
    if (gethostname(host, sizeof host) == 0) {
        host[sizeof host - 1] = 0;
        lp.host = host;
    }
    mcdc_buf l7 = {0};
    rc = mcdc_tds_build_login7(&l7, &lp, err);
    if (rc == MCDC_OK) rc = mcdc_tds_send(s, TDS_PKT_LOGIN7, l7.data, l7.len, err);
    /* No copy of the (obfuscated) password stays in memory. */
    if (l7.data) memset(l7.data, 0, l7.cap);
    if (s->out) memset(s->out, 0, s->out_cap);
    mcdc_buf_free(&l7);
    if (rc != MCDC_OK) return rc;
    mcdc_tds_begin_reply(s);
    clear_events(&c->ev);
    for (;;) {
        uint8_t tok = 0;
        bool end;
        rc = next_token(s, &tok, &end, err);
        if (rc != MCDC_OK) return rc;
        if (end) break;
        rc = mcdc_tds_read_token(s, tok, NULL, &c->ev, err);
        if (rc != MCDC_OK) return rc;
    }
    if (!c->ev.loginack || c->ev.error) {
        if (!c->ev.error)
            return mcdc_error_set(err, MCDC_E_PROTOCOL, "login to %s: no LOGINACK and no error",
                                  server);
        rc = report_server(c, err, "login");
        s->dead = true;
        return rc;
    }
    c->spid = s->spid;
    if (c->ev.packet_bytes) s->packet_bytes = c->ev.packet_bytes;
    else if (lp.packet_bytes >= MCDC_TDS_PACKET_BYTES_MIN) s->packet_bytes = lp.packet_bytes;
    return MCDC_OK;
}

int mcdc_conn_open_native(mcdc_conn **out, const mcdc_connstr *cs, const mcdc_conn_options *opt,
                          mcdc_error *err) {
    MCDC_ASSERT(out != NULL && cs != NULL && cs->host != NULL);
    *out = NULL;
    mcdc_conn_options dflt = MCDC_CONN_OPTIONS_INIT;
    if (opt == NULL) opt = &dflt;
    bool v6 = strchr(cs->host, ':') != NULL;
    int port = cs->port ? cs->port : 1433;
    char server[300];
    snprintf(server, sizeof server, "%s%s%s:%d", v6 ? "[" : "", cs->host, v6 ? "]" : "", port);
    if (cs->instance && !cs->port)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "connecting to %s\\%s: named instances (SQL Browser) are not "
                              "supported by the native TDS backend; give the port",
                              cs->host, cs->instance);
    int login_s = opt->login_timeout_s > 0      ? opt->login_timeout_s
                  : cs->connect_timeout_s > 0 ? cs->connect_timeout_s
                                              : 30;
    int64_t deadline = mcdc_monotonic_us() + (int64_t)login_s * 1000000;
    int fd = -1;
    int rc = tcp_connect(&fd, cs->host, port, deadline, server, err);
    if (rc != MCDC_OK) return rc;
    nat_conn *c = mcdc_calloc(1, sizeof *c);
    if (c == NULL) {
        close(fd);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    rc = mcdc_tds_stream_init(&c->s, fd, NULL, 0, err);
    if (rc != MCDC_OK) {
        close(fd);
        mcdc_free(c);
        return rc;
    }
    snprintf(c->s.where, sizeof c->s.where, "%s", server);
    c->s.deadline_us = deadline;
    rc = login(c, cs, opt, server, err);
    if (rc != MCDC_OK) {
        mcdc_driver_wrap_login(err, rc, server, cs);
        nat_close(c);
        return rc;
    }
    c->s.deadline_us = 0;
    c->s.timeout_ms = opt->query_timeout_s > 0 ? opt->query_timeout_s * 1000 : 0;
    /* Test fixtures: every reply after the login, appended to a file. */
    const char *rec = opt ? opt->record_path : NULL;
    if (rec && *rec) {
        int rfd = open(rec, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (rfd > 0) c->s.record_fd = rfd;
    }
    mcdc_conn *conn = NULL;
    rc = mcdc_conn_wrap(&conn, &NAT_CONN_OPS, c, err);
    if (rc != MCDC_OK) return rc;
    /* As the FreeTDS backend: (max) values are never cut. */
    rc = mcdc_conn_run(conn, "SET TEXTSIZE 2147483647", NULL, 0, err);
    if (rc != MCDC_OK) {
        mcdc_error_wrap(err, "setting up the session on %s", server);
        mcdc_conn_close(conn);
        return rc;
    }
    *out = conn;
    return MCDC_OK;
}

int mcdc_tds_conn_open_memory(mcdc_conn **out, const uint8_t *replies, size_t n,
                              mcdc_error *err) {
    *out = NULL;
    nat_conn *c = mcdc_calloc(1, sizeof *c);
    if (c == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = mcdc_tds_stream_init(&c->s, -1, replies, n, err);
    if (rc != MCDC_OK) {
        mcdc_free(c);
        return rc;
    }
    return mcdc_conn_wrap(out, &NAT_CONN_OPS, c, err);
}
