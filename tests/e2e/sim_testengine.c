/*
 * sim_testengine.c - a stand-in engine implementing sim_engine.h, for testing
 * the TDS layer with real clients before (and independently of) the real
 * engine. Not part of any library: tests/e2e/sim_clients.sh links it with
 * sim_main.c and tds_*.c into a test program.
 *
 * It understands a few fixed commands (case-insensitive):
 *   SELECT 1 | SELECT TYPED | SELECT ROWS n | SELECT NOTHING | SELECT NETWAIT | USE db |
 *   SET ... | BEGIN TRAN | COMMIT | ROLLBACK | RAISE | FAULT LOGIN|DROPROW n|DROPQUERY|DELAY ms
 * and RPC sp_executesql, whose statement is run as above; when it is
 * "SELECT PARAMS" the parameters (after the first two) come back as one row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>

#include "sim_engine.h"

struct sim_server {
    char password[256];
    pthread_mutex_t mu;
    int next_spid;
    bool refuse_login;
    int drop_row_at; /* > 0: drop when this many rows were checked */
    bool drop_query;
    int delay_ms;
};

struct sim_session {
    sim_server *srv;
    int spid;
    char db[260];
    int packet_size;
    uint64_t tran;
    int64_t net_wait_ms;
};

int sim_server_open(sim_server **out, const sim_config *cfg, mcdc_error *err) {
    (void)err;
    sim_server *s = mcdc_calloc(1, sizeof *s);
    snprintf(s->password, sizeof s->password, "%s", cfg->sa_password);
    pthread_mutex_init(&s->mu, NULL);
    s->next_spid = 51;
    *out = s;
    return MCDC_OK;
}

void sim_server_set_change_cache_mb(sim_server *s, int mb) { (void)s; (void)mb; } /* no change store here */
void sim_server_set_table_cache_mb(sim_server *s, int mb) { (void)s; (void)mb; }  /* nor table store */

void sim_server_close(sim_server *s) {
    if (!s) return;
    pthread_mutex_destroy(&s->mu);
    mcdc_free(s);
}

int sim_login(sim_server *srv, sim_session **out, const char *user, const char *password,
              const char *database, const char *app, mcdc_error *err) {
    (void)app;
    *out = NULL;
    if (strcmp(user, "sa") != 0 || strcmp(password, srv->password) != 0) {
        int rc = mcdc_error_set(err, MCDC_E_PERMISSION, "Login failed for user '%s'.", user);
        err->server_number = 18456;
        err->server_class = 14;
        err->server_state = 1;
        return rc;
    }
    sim_session *s = mcdc_calloc(1, sizeof *s);
    s->srv = srv;
    pthread_mutex_lock(&srv->mu);
    s->spid = srv->next_spid++;
    pthread_mutex_unlock(&srv->mu);
    snprintf(s->db, sizeof s->db, "%s", database && *database ? database : "master");
    *out = s;
    return MCDC_OK;
}

void sim_session_close(sim_session *s) { mcdc_free(s); }
int sim_session_spid(const sim_session *s) { return s->spid; }
void sim_session_count_request(sim_session *s) { (void)s; } /* sim.request_stats is the engine's */
const char *sim_session_database(const sim_session *s) { return s->db; }
void sim_session_set_packet_size(sim_session *s, int bytes) { s->packet_size = bytes; }
void sim_session_add_network_wait(sim_session *s, int64_t ms) { s->net_wait_ms += ms; }

void sim_fault_check(sim_server *srv, sim_session *s, sim_fault_point point,
                     sim_fault_action *out) {
    (void)s;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&srv->mu);
    switch (point) {
    case SIM_FAULT_LOGIN:
        out->refuse_login = srv->refuse_login;
        srv->refuse_login = false;
        break;
    case SIM_FAULT_QUERY:
        out->drop_connection = srv->drop_query;
        srv->drop_query = false;
        out->delay_ms = srv->delay_ms;
        srv->delay_ms = 0;
        break;
    case SIM_FAULT_ROW:
        if (srv->drop_row_at > 0 && --srv->drop_row_at == 0) out->drop_connection = true;
        break;
    }
    pthread_mutex_unlock(&srv->mu);
}

static sim_value txt(const char *s) {
    return (sim_value){.kind = SIM_V_TEXT, .p = (const uint8_t *)s, .n = strlen(s)};
}
static sim_value num(int64_t i) { return (sim_value){.kind = SIM_V_INT, .i = i}; }

static int typed(const sim_sink *k) {
    static const uint8_t blob[] = {0x00, 0x01, 0xFE, 0xFF, 0x10};
    sim_column c[] = {
        {"i", {SIM_T_INT, 0, 0, 0}, true},
        {"bi", {SIM_T_BIGINT, 0, 0, 0}, false},
        {"ti", {SIM_T_TINYINT, 0, 0, 0}, true},
        {"b", {SIM_T_BIT, 0, 0, 0}, true},
        {"d", {SIM_T_DECIMAL, 38, 10, 0}, true},
        {"m", {SIM_T_MONEY, 0, 0, 0}, true},
        {"f", {SIM_T_FLOAT, 0, 0, 0}, true},
        {"nv", {SIM_T_NVARCHAR, 0, 0, 50}, true},
        {"v", {SIM_T_VARCHAR, 0, 0, 50}, true},
        {"dt2", {SIM_T_DATETIME2, 0, 7, 0}, true},
        {"dto", {SIM_T_DATETIMEOFFSET, 0, 7, 0}, true},
        {"dt", {SIM_T_DATETIME, 0, 0, 0}, true},
        {"dd", {SIM_T_DATE, 0, 0, 0}, true},
        {"t", {SIM_T_TIME, 0, 3, 0}, true},
        {"g", {SIM_T_UNIQUEIDENTIFIER, 0, 0, 0}, true},
        {"vb", {SIM_T_VARBINARY, 0, 0, 20}, true},
        {"bn", {SIM_T_BINARY, 0, 0, 10}, true},
        {"nmax", {SIM_T_NVARCHAR, 0, 0, -1}, true},
        {"vbmax", {SIM_T_VARBINARY, 0, 0, -1}, true},
        {"sdt", {SIM_T_SMALLDATETIME, 0, 0, 0}, true},
        {"dsmall", {SIM_T_DECIMAL, 5, 2, 0}, true},
    };
    int n = (int)(sizeof c / sizeof c[0]);
    if (k->columns(k->ctx, c, n)) return 1;
    sim_value v[] = {
        num(-2147483647 - 1),
        num(9223372036854775807LL),
        num(255),
        num(1),
        txt("-1234567890123456789012345678.0123456789"),
        txt("-922337203685477.5808"),
        (sim_value){.kind = SIM_V_REAL, .f = 3.5},
        txt("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"),
        txt("caf\xC3\xA9 \xE2\x82\xAC"),
        txt("2024-02-29 23:59:59.1234567"),
        txt("2024-01-01 01:30:00.5000000 -03:00"),
        txt("2023-12-31 23:59:59.997"),
        txt("0001-01-01"),
        txt("12:34:56.789"),
        txt("6F9619FF-8B86-D011-B42D-00C04FC964FF"),
        (sim_value){.kind = SIM_V_BLOB, .p = blob, .n = sizeof blob},
        (sim_value){.kind = SIM_V_BLOB, .p = blob, .n = 3},
        txt("max \xC3\xA9"),
        (sim_value){.kind = SIM_V_BLOB, .p = blob, .n = sizeof blob},
        txt("2024-05-06 07:08:00"),
        num(42),
    };
    if (k->row(k->ctx, v, n)) return 1;
    sim_value nulls[32];
    memset(nulls, 0, sizeof nulls);
    nulls[1] = num(0); /* bi is NOT NULL */
    if (k->row(k->ctx, nulls, n)) return 1;
    return k->done(k->ctx, 2, true, false, false);
}

static int rows(const sim_sink *k, long n, bool in_proc) {
    sim_column c[] = {{"n", {SIM_T_INT, 0, 0, 0}, false},
                      {"s", {SIM_T_NVARCHAR, 0, 0, 40}, true}};
    if (k->columns(k->ctx, c, 2)) return 1;
    char buf[40];
    for (long i = 0; i < n; i++) {
        snprintf(buf, sizeof buf, "row %ld", i);
        sim_value v[2] = {num(i), txt(buf)};
        if (k->row(k->ctx, v, 2)) return 1;
    }
    return k->done(k->ctx, n, true, in_proc, false);
}

static int run(sim_session *s, const char *sql, size_t len, const sim_sink *k, bool in_proc,
               const sim_param *ps, int np) {
    char q[256];
    size_t n = len < sizeof q - 1 ? len : sizeof q - 1;
    memcpy(q, sql, n);
    q[n] = 0;
    while (n && (q[n - 1] == ' ' || q[n - 1] == ';' || q[n - 1] == '\n')) q[--n] = 0;
    sim_server *srv = s->srv;
    if (strcasecmp(q, "SELECT 1") == 0) {
        sim_column c = {"", {SIM_T_INT, 0, 0, 0}, false};
        sim_value v = num(1);
        if (k->columns(k->ctx, &c, 1) || k->row(k->ctx, &v, 1)) return 1;
        return k->done(k->ctx, 1, true, in_proc, false);
    }
    if (strcasecmp(q, "SELECT TYPED") == 0) return typed(k);
    if (strcasecmp(q, "SELECT NETWAIT") == 0) {
        sim_column c = {"ms", {SIM_T_BIGINT, 0, 0, 0}, false};
        sim_value v = num(s->net_wait_ms);
        if (k->columns(k->ctx, &c, 1) || k->row(k->ctx, &v, 1)) return 1;
        return k->done(k->ctx, 1, true, in_proc, false);
    }
    if (strncasecmp(q, "SELECT ROWS ", 12) == 0) return rows(k, atol(q + 12), in_proc);
    if (strncasecmp(q, "SELECT PARAMS", 13) == 0) {
        sim_column c[64];
        sim_value v[64];
        int m = 0;
        for (int i = 2; i < np && m < 64; i++, m++) {
            c[m] = (sim_column){ps[i].name, ps[i].type, true};
            v[m] = ps[i].value;
        }
        if (m == 0) return k->done(k->ctx, 0, false, in_proc, false);
        if (k->columns(k->ctx, c, m) || k->row(k->ctx, v, m)) return 1;
        return k->done(k->ctx, 1, true, in_proc, false);
    }
    if (strncasecmp(q, "USE ", 4) == 0) {
        char old[260];
        snprintf(old, sizeof old, "%s", s->db);
        snprintf(s->db, sizeof s->db, "%s", q + 4);
        if (k->database_changed(k->ctx, s->db, old)) return 1;
        char msg[300];
        snprintf(msg, sizeof msg, "Changed database context to '%s'.", s->db);
        if (k->message(k->ctx, false, 5701, 1, 0, msg, "", 1)) return 1;
        return k->done(k->ctx, 0, false, in_proc, false);
    }
    if (strncasecmp(q, "SET ", 4) == 0) return k->done(k->ctx, 0, false, in_proc, false);
    char *semi = strchr(q, ';');
    if (semi && !in_proc) { /* two statements (transaction manager requests) */
        *semi = 0;
        if (run(s, q, strlen(q), k, in_proc, ps, np)) return 1;
        const char *rest = semi + 1;
        while (*rest == ' ') rest++;
        return run(s, rest, strlen(rest), k, in_proc, ps, np);
    }
    if (strncasecmp(q, "BEGIN TRAN", 10) == 0) {
        s->tran = 0x1122334455667788ULL;
        if (k->transaction && k->transaction(k->ctx, 8, s->tran)) return 1;
        return k->done(k->ctx, 0, false, in_proc, false);
    }
    if (strncasecmp(q, "COMMIT", 6) == 0 || strncasecmp(q, "ROLLBACK", 8) == 0) {
        if (k->transaction && k->transaction(k->ctx, q[0] == 'C' || q[0] == 'c' ? 9 : 10, s->tran))
            return 1;
        return k->done(k->ctx, 0, false, in_proc, false);
    }
    if (strcasecmp(q, "RAISE") == 0) {
        if (k->message(k->ctx, true, 50000, 1, 16, "test error", "", 1)) return 1;
        return k->done(k->ctx, 0, false, in_proc, true);
    }
    if (strncasecmp(q, "FAULT ", 6) == 0) {
        pthread_mutex_lock(&srv->mu);
        if (strcasecmp(q + 6, "LOGIN") == 0) srv->refuse_login = true;
        if (strncasecmp(q + 6, "DROPROW ", 8) == 0) srv->drop_row_at = atoi(q + 14);
        if (strcasecmp(q + 6, "DROPQUERY") == 0) srv->drop_query = true;
        if (strncasecmp(q + 6, "DELAY ", 6) == 0) srv->delay_ms = atoi(q + 12);
        pthread_mutex_unlock(&srv->mu);
        return k->done(k->ctx, 0, false, in_proc, false);
    }
    if (strcasecmp(q, "SELECT NOTHING") == 0) return 0;
    char msg[400];
    snprintf(msg, sizeof msg, "Incorrect syntax near '%s'.", q);
    if (k->message(k->ctx, true, 102, 1, 15, msg, "", 1)) return 1;
    return k->done(k->ctx, 0, false, in_proc, true);
}

int sim_exec_batch(sim_session *s, const char *sql, size_t len, const sim_sink *sink) {
    return run(s, sql, len, sink, false, NULL, 0) ? SIM_EXEC_ABORTED : SIM_EXEC_OK;
}

int sim_exec_rpc(sim_session *s, const char *proc, const sim_param *params, int n,
                 const sim_sink *sink) {
    if (strcasecmp(proc, "sp_executesql") == 0 && n >= 1 && params[0].value.kind == SIM_V_TEXT)
        return run(s, (const char *)params[0].value.p, params[0].value.n, sink, true, params, n)
                   ? SIM_EXEC_ABORTED
                   : SIM_EXEC_OK;
    char msg[300];
    snprintf(msg, sizeof msg, "Could not find stored procedure '%s'.", proc);
    if (sink->message(sink->ctx, true, 2812, 62, 16, msg, "", 1)) return SIM_EXEC_ABORTED;
    return sink->done(sink->ctx, 0, false, true, true) ? SIM_EXEC_ABORTED : SIM_EXEC_OK;
}
