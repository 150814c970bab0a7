/* mcdc_driver.c - the backend-independent half of the driver seam:
 * parameter inlining, scalar queries, error classification. */
#include "mcdc_driver.h"
#include "mcdc_value_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mcdc_conn {
    const mcdc_conn_ops *ops;
    void *impl;
    bool result_open; /* one result at a time */
};

struct mcdc_result {
    const mcdc_result_ops *ops;
    void *impl;
    mcdc_conn *conn;
};

int mcdc_conn_wrap(mcdc_conn **out, const mcdc_conn_ops *ops, void *impl, mcdc_error *err) {
    MCDC_ASSERT(out != NULL && ops != NULL && ops->exec && ops->close);
    *out = NULL;
    mcdc_conn *c = mcdc_calloc(1, sizeof *c);
    if (c == NULL) {
        ops->close(impl);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory opening a connection");
    }
    c->ops = ops;
    c->impl = impl;
    *out = c;
    return MCDC_OK;
}

void mcdc_conn_close(mcdc_conn *c) {
    if (c == NULL) return;
    MCDC_ASSERT(!c->result_open);
    c->ops->close(c->impl);
    mcdc_free(c);
}

int mcdc_conn_spid(const mcdc_conn *c) { return c->ops->spid ? c->ops->spid(c->impl) : 0; }

bool mcdc_conn_is_dead(const mcdc_conn *c) {
    return c->ops->is_dead ? c->ops->is_dead(c->impl) : false;
}

/* ---- parameters ------------------------------------------------------------ */
static int append_literal(mcdc_buf *out, const char *p, mcdc_error *err) {
    if (p == NULL) return mcdc_buf_append_str(out, "NULL", err);
    int rc = mcdc_buf_append(out, "N'", 2, err);
    for (const char *q = p; rc == MCDC_OK && *q; q++) {
        if (*q == '\'') rc = mcdc_buf_append_byte(out, '\'', err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, (uint8_t)*q, err);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, '\'', err);
    return rc;
}

int mcdc_sql_inline_params(mcdc_buf *out, const char *sql, const char *const *params,
                           int n_params, mcdc_error *err) {
    MCDC_ASSERT(sql != NULL && n_params >= 0 && (n_params == 0 || params != NULL));
    int used = 0, rc = MCDC_OK;
    const char *run = sql; /* start of text not yet copied */
    const char *q = sql;
    while (*q) {
        char ch = *q;
        if (ch == '\'' || ch == '[' || ch == '"') {
            char close = ch == '[' ? ']' : ch;
            q++;
            while (*q) {
                if (*q == close) {
                    if (q[1] == close) { /* doubled: escaped */
                        q += 2;
                        continue;
                    }
                    break;
                }
                q++;
            }
            if (*q) q++;
            continue;
        }
        if (ch == '-' && q[1] == '-') {
            while (*q && *q != '\n') q++;
            continue;
        }
        if (ch == '/' && q[1] == '*') {
            q += 2;
            while (*q && !(q[0] == '*' && q[1] == '/')) q++;
            if (*q) q += 2;
            continue;
        }
        if (ch == '?') {
            if (used >= n_params)
                return mcdc_error_set(err, MCDC_E_INVALID,
                                      "query has more '?' placeholders than the %d parameters "
                                      "given",
                                      n_params);
            rc = mcdc_buf_append(out, run, (size_t)(q - run), err);
            if (rc == MCDC_OK) rc = append_literal(out, params[used], err);
            if (rc != MCDC_OK) return rc;
            used++;
            q++;
            run = q;
            continue;
        }
        q++;
    }
    if (used != n_params)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "query has %d '?' placeholders but %d parameters were given",
                              used, n_params);
    rc = mcdc_buf_append(out, run, (size_t)(q - run), err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(out, err);
    return rc;
}

/* ---- queries ------------------------------------------------------------------ */
int mcdc_conn_exec(mcdc_result **out, mcdc_conn *c, const char *sql, const char *const *params,
                   int n_params, mcdc_error *err) {
    MCDC_ASSERT(out != NULL && c != NULL);
    *out = NULL;
    MCDC_ASSERT(!c->result_open);
    mcdc_buf text = {0};
    int rc = mcdc_sql_inline_params(&text, sql, params, n_params, err);
    if (rc != MCDC_OK) {
        mcdc_buf_free(&text);
        return rc;
    }
    mcdc_result *r = mcdc_calloc(1, sizeof *r);
    if (r == NULL) {
        mcdc_buf_free(&text);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory starting a query");
    }
    rc = c->ops->exec(c->impl, (const char *)text.data, &r->ops, &r->impl, err);
    mcdc_buf_free(&text);
    if (rc != MCDC_OK) {
        mcdc_free(r);
        return rc;
    }
    r->conn = c;
    c->result_open = true;
    *out = r;
    return MCDC_OK;
}

const mcdc_schema *mcdc_result_schema(const mcdc_result *r) { return r->ops->schema(r->impl); }

int mcdc_result_fetch(mcdc_result *r, mcdc_batch *into, int32_t first_col, int64_t rows_max,
                      int64_t bytes_max, int64_t *out_rows, mcdc_error *err) {
    MCDC_ASSERT(r != NULL && into != NULL && out_rows != NULL && rows_max > 0);
    const mcdc_schema *s = mcdc_result_schema(r);
    MCDC_ASSERT(first_col >= 0 && first_col + s->n_fields <= into->schema->n_fields);
    if (bytes_max <= 0) bytes_max = (int64_t)(MCDC_BATCH_BYTES_MAX / 4);
    return r->ops->fetch(r->impl, into, first_col, rows_max, bytes_max, out_rows, err);
}

int mcdc_result_next_batch(mcdc_batch **out, mcdc_result *r, int64_t rows_max, mcdc_error *err) {
    MCDC_ASSERT(out != NULL);
    *out = NULL;
    mcdc_batch *b = NULL;
    /* The schema is shared by reference; the cast is safe: batches take a
     * reference and never modify it. */
    int rc = mcdc_batch_create(&b, (mcdc_schema *)mcdc_result_schema(r),
                               rows_max < 1024 ? rows_max : 1024, err);
    if (rc != MCDC_OK) return rc;
    int64_t n = 0;
    rc = mcdc_result_fetch(r, b, 0, rows_max, 0, &n, err);
    if (rc == MCDC_OK && n > 0) rc = mcdc_batch_seal(b, err);
    if (rc != MCDC_OK || n == 0) {
        mcdc_batch_free(b);
        return rc;
    }
    *out = b;
    return MCDC_OK;
}

void mcdc_result_free(mcdc_result *r) {
    if (r == NULL) return;
    r->ops->free(r->impl);
    r->conn->result_open = false;
    mcdc_free(r);
}

int mcdc_conn_run(mcdc_conn *c, const char *sql, const char *const *params, int n_params,
                  mcdc_error *err) {
    mcdc_result *r = NULL;
    int rc = mcdc_conn_exec(&r, c, sql, params, n_params, err);
    if (rc != MCDC_OK) return rc;
    mcdc_batch *b = NULL;
    do {
        mcdc_batch_free(b);
        b = NULL;
        rc = mcdc_result_next_batch(&b, r, 1024, err);
    } while (rc == MCDC_OK && b != NULL);
    mcdc_result_free(r);
    return rc;
}

/* Text of one cell (the scalar contract): the canonical text
 * (mcdc_value_text.h), but a bit is "1" or "0" as SQL Server prints it.
 * NULL: out of memory. */
static char *cell_text(const mcdc_column *c, int64_t i) {
    if (c->field->type == MCDC_TYPE_BOOL)
        return mcdc_strdup(((c->values[i >> 3] >> (i & 7)) & 1) ? "1" : "0");
    mcdc_buf b = {0};
    if (mcdc_text_cell(&b, c, i, NULL) != MCDC_OK || mcdc_buf_cstr(&b, NULL) != MCDC_OK) {
        mcdc_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

int mcdc_conn_scalar(char **out_text, mcdc_conn *c, const char *sql, const char *const *params,
                     int n_params, mcdc_error *err) {
    MCDC_ASSERT(out_text != NULL);
    *out_text = NULL;
    mcdc_result *r = NULL;
    int rc = mcdc_conn_exec(&r, c, sql, params, n_params, err);
    if (rc != MCDC_OK) return rc;
    mcdc_batch *b = NULL;
    rc = mcdc_result_next_batch(&b, r, 1, err);
    if (rc == MCDC_OK && b != NULL && b->rows > 0 && b->schema->n_fields > 0) {
        if (mcdc_col_is_valid(&b->columns[0], 0)) {
            *out_text = cell_text(&b->columns[0], 0);
            if (*out_text == NULL)
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory reading a scalar");
        }
    }
    mcdc_batch_free(b);
    /* Drain: a later error in the batch must not pass unseen. */
    while (rc == MCDC_OK) {
        b = NULL;
        rc = mcdc_result_next_batch(&b, r, 1024, err);
        if (b == NULL) break;
        mcdc_batch_free(b);
    }
    mcdc_result_free(r);
    if (rc != MCDC_OK) {
        mcdc_free(*out_text);
        *out_text = NULL;
    }
    return rc;
}

/* ---- classification ---------------------------------------------------------- */
int mcdc_driver_classify(int msgno, int severity) {
    switch (msgno) {
    case 1205:  /* deadlock victim */
    case 1222:  /* lock request timeout */
    case -2:    /* client-side timeout as drivers report it */
    case 233:   /* no process on the other end of the pipe */
    case 10053: /* transport-level error: connection aborted */
    case 10054: /* connection reset by peer */
    case 10060: /* connection timed out */
    case 40197: /* Azure: service error processing the request */
    case 40501: /* Azure: service busy */
    case 40613: /* Azure: database not currently available */
    case 49918: /* Azure: not enough resources */
    case 49919:
    case 49920:
    case 10928: /* Azure: resource limit reached */
    case 10929:
    case 4221:  /* login to read-secondary failed (redo catching up) */
    case 3960:  /* snapshot isolation update conflict */
    case 701:   /* insufficient system memory */
        return MCDC_E_TRANSIENT;
    case 18456: /* login failed */
    case 18452: /* untrusted domain login */
    case 18470: /* the login is disabled */
    case 18486: /* the login is locked out */
    case 18487: /* its password expired */
    case 18488: /* its password must be changed */
        return MCDC_E_LOGIN;
    case 229:   /* permission denied on object */
    case 230:   /* permission denied on column */
    case 262:   /* permission denied in database */
    case 300:   /* VIEW ... permission denied */
    case 916:   /* server principal cannot access the database */
        return MCDC_E_PERMISSION;
    case 208:   /* invalid object name */
    case 207:   /* invalid column name */
    case 2812:  /* could not find stored procedure */
    case 4060:  /* cannot open database requested by the login */
    case 911:   /* database does not exist */
    case 22964: /* capture instance does not exist in the database */
        return MCDC_E_NOTFOUND;
    default: break;
    }
    /* Severity 20 and above: the server ends the connection. */
    if (severity >= 20) return MCDC_E_TRANSIENT;
    return MCDC_E_SERVER;
}

void mcdc_driver_wrap_login(mcdc_error *err, int rc, const char *server, const mcdc_connstr *cs) {
    const char *user = cs->user ? cs->user : "", *db = cs->database ? cs->database : "master";
    int number = err ? err->server_number : 0;
    if (rc == MCDC_E_LOGIN && number == 18470)
        mcdc_error_wrap(err,
                        "connecting to %s as '%s' (the login is disabled on the server: an "
                        "administrator enables it with ALTER LOGIN [%s] ENABLE)",
                        server, user, user);
    else if (rc == MCDC_E_LOGIN && number == 18486)
        mcdc_error_wrap(err,
                        "connecting to %s as '%s' (the login is locked out after failed "
                        "attempts: an administrator unlocks it with ALTER LOGIN [%s] WITH "
                        "PASSWORD = '...' UNLOCK)",
                        server, user, user);
    else if (rc == MCDC_E_LOGIN && (number == 18487 || number == 18488))
        mcdc_error_wrap(err,
                        "connecting to %s as '%s' (the login's password expired or must be "
                        "changed: change it, then put the new one in PWD)",
                        server, user);
    else if (rc == MCDC_E_LOGIN)
        mcdc_error_wrap(err,
                        "connecting to %s as '%s' (check UID and PWD in the connection string, "
                        "and that the login may open database '%s')",
                        server, user, db);
    else if (err && err->server_number == 4060)
        mcdc_error_wrap(err,
                        "connecting to %s as '%s' (database '%s' is not on this server, or the "
                        "login has no user in it: check Database= in the connection string)",
                        server, user, db);
    else
        mcdc_error_wrap(err, "connecting to %s as '%s'", server, user);
}

int mcdc_driver_classify_dblib(int dberr) {
    switch (dberr) {
    case 20001: /* SYBESYNC: out of sync with the server */
    case 20002: /* SYBEFCON: server connection failed */
    case 20003: /* SYBETIME: timeout */
    case 20004: /* SYBEREAD: read from the server failed */
    case 20006: /* SYBEWRIT: write to the server failed */
    case 20008: /* SYBESOCK: unable to open socket */
    case 20009: /* SYBECONN: unable to connect */
    case 20017: /* SYBESEOF: unexpected EOF from the server */
    case 20047: /* SYBEDDNE: DBPROCESS is dead or not enabled */
        return MCDC_E_TRANSIENT;
    case 20012: /* SYBEINTF: server name not found */
    case 20013: /* SYBEUHST: unknown host */
        return MCDC_E_INVALID;
    case 20014: /* SYBEPWD: incorrect password */
        return MCDC_E_LOGIN;
    case 20010: /* SYBEMEM */
        return MCDC_E_NOMEM;
    case 20020: /* SYBEBTOK: bad token from the server */
        return MCDC_E_PROTOCOL;
    default: return MCDC_E_IO;
    }
}

/* ---- backend choice --------------------------------------------------------- */
int mcdc_conn_open(mcdc_conn **out, const mcdc_connstr *cs, const mcdc_conn_options *opt,
                   mcdc_error *err) {
    const char *be = opt ? opt->backend : NULL;
    /* auto: our own client (plaintext or TLS), except for a named instance
     * without a port, which needs the SQL Browser lookup only FreeTDS does */
    if (be == NULL || mcdc_str_ieq(be, "auto"))
        be = cs->instance && !cs->port ? "freetds" : "native";
    if (mcdc_str_ieq(be, "native")) return mcdc_conn_open_native(out, cs, opt, err);
    if (mcdc_str_ieq(be, "freetds")) return mcdc_conn_open_freetds(out, cs, opt, err);
    *out = NULL;
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "unknown TDS backend '%s': use native, freetds or auto", be);
}

/* ---- shared value formatting ------------------------------------------------ */
#define DRIVER_DAYS_1900_TO_1970 25567

int mcdc_driver_time_text(char *buf, size_t cap, uint64_t ticks100ns, int scale) {
    uint64_t secs = ticks100ns / 10000000u, frac = ticks100ns % 10000000u;
    int n = snprintf(buf, cap, "%02u:%02u:%02u", (unsigned)(secs / 3600 % 100),
                     (unsigned)(secs / 60 % 60), (unsigned)(secs % 60));
    if (scale > 0 && scale <= 7) {
        char f7[16];
        snprintf(f7, sizeof f7, "%07u", (unsigned)frac);
        n += snprintf(buf + n, cap - (size_t)n, ".%.*s", scale, f7);
    }
    return n;
}

int mcdc_driver_datetime_text(char *buf, size_t cap, int64_t days1900, uint64_t ticks100ns,
                              int scale, bool with_time, bool with_offset, int offset_min) {
    if (with_offset) { /* datetimeoffset arrives in UTC: show the local time */
        int64_t t = (int64_t)ticks100ns + (int64_t)offset_min * 600000000LL;
        int64_t day = 864000000000LL;
        int64_t shift = t >= 0 ? t / day : -((-t + day - 1) / day);
        days1900 += shift;
        ticks100ns = (uint64_t)(t - shift * day);
    }
    int64_t y;
    unsigned mo, d;
    mcdc_civil_from_days(days1900 - DRIVER_DAYS_1900_TO_1970, &y, &mo, &d);
    int n = snprintf(buf, cap, "%04lld-%02u-%02u", (long long)y, mo, d);
    if (with_time) {
        buf[n++] = ' ';
        n += mcdc_driver_time_text(buf + n, cap - (size_t)n, ticks100ns, scale);
    }
    if (with_offset) {
        int a = offset_min < 0 ? -offset_min : offset_min;
        n += snprintf(buf + n, cap - (size_t)n, " %c%02d:%02d", offset_min < 0 ? '-' : '+',
                      a / 60 % 100, a % 60);
    }
    return n;
}
