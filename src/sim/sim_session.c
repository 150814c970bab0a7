/*
 * sim_session.c - sessions: login (password check, default database),
 * the session's clock, its read connection (USE), close; owns sim_session's
 * identity, database and network-wait counters.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* ---- sessions ----------------------------------------------------------- */
static int sess_clk_spid(void *ctx) { return ((sim_session *)ctx)->spid; }
static int64_t sess_clk_utc(void *ctx) { return sim_srv_utc_us(((sim_session *)ctx)->srv); }
static int sess_clk_off(void *ctx, int64_t utc_s) { return sim_tz_offset_at(((sim_session *)ctx)->srv->tz, utc_s); }
static const char *sess_clk_zone(void *ctx, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", sim_tz_name(((sim_session *)ctx)->srv->tz));
    return buf;
}

int sim_sess_use(sim_session *s, sim_db *d, mcdc_error *err) {
    sqlite3 *rd = NULL;
    if (sqlite3_open_v2(d->path, &rd, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        mcdc_error_set(err, MCDC_E_IO, "cannot open %s for reading: %s", d->path, rd ? sqlite3_errmsg(rd) : "?");
        sqlite3_close(rd);
        return MCDC_E_IO;
    }
    sim_conn_setup(rd, &s->clk);
    sqlite3_exec(rd, "PRAGMA cache_size = -16384; PRAGMA mmap_size = 268435456", NULL, NULL, NULL);
    sqlite3_stmt *conv = NULL;
    if (sqlite3_prepare_v3(rd, "SELECT sim_convert(?1, ?2, NULL)", -1, SQLITE_PREPARE_PERSISTENT, &conv, NULL) != SQLITE_OK) {
        sqlite3_close(rd);
        return mcdc_error_set(err, MCDC_E_IO, "cannot prepare on %s", d->path);
    }
    sim_fast_cache_drop(s);
    if (s->conv) sqlite3_finalize(s->conv);
    if (s->rd) sqlite3_close(s->rd);
    s->rd = rd;
    s->conv = conv;
    s->db = d;
    return MCDC_OK;
}

bool sim_db_has_user(sim_db *d, const char *login) {
    sqlite3_stmt *st;
    bool ok = false;
    if (sqlite3_prepare_v2(d->w, "SELECT 1 FROM __sim_users WHERE login = ? COLLATE NOCASE", -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, login, -1, SQLITE_STATIC);
    ok = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return ok;
}

const char *sim_db_user_name(sim_session *s, char *buf, size_t cap) {
    if (s->admin) { snprintf(buf, cap, "dbo"); return buf; }
    sqlite3_stmt *st;
    snprintf(buf, cap, "%s", s->login);
    if (sqlite3_prepare_v2(s->rd, "SELECT name FROM __sim_users WHERE login = ? COLLATE NOCASE", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, s->login, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) snprintf(buf, cap, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    return buf;
}

/* Under mu: a session of login user (checked) in database (NULL: master). */
static int session_open(sim_server *srv, sim_session **out, const char *user, bool admin, const char *database,
                        mcdc_error *err) {
    sim_db *m = sim_master_db(srv);
    sim_db *d = database && database[0] ? sim_find_db(srv, database) : m;
    if (!d || (!admin && d != m && !sim_db_has_user(d, user))) {
        sim_err(err, 4060, "Cannot open database \"%s\" requested by the login. The login failed.", database);
        if (err) { err->code = MCDC_E_PERMISSION; err->server_class = 11; }
        return MCDC_E_PERMISSION;
    }
    int slot = -1;
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) if (!srv->sessions[k]) { slot = k; break; }
    if (slot < 0)
        return mcdc_error_set(err, MCDC_E_LIMIT, "more than %d sessions (MCDC_SIM_SESSIONS_MAX)", MCDC_SIM_SESSIONS_MAX);
    sim_session *s = mcdc_calloc(1, sizeof *s);
    if (!s) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    s->srv = srv;
    s->spid = 51 + slot;
    s->serial = ++srv->next_serial;
    snprintf(s->login, sizeof s->login, "%s", user);
    s->admin = admin;
    s->packet_size = 4096;
    s->lock_timeout_ms = -1;
    s->clk = srv->clk;
    s->clk.ctx = s;
    s->clk.spid = sess_clk_spid;
    s->clk.utc_us = sess_clk_utc;
    s->clk.offset_s = sess_clk_off;
    s->clk.zone_name = sess_clk_zone;
    int rc = sim_sess_use(s, d, err);
    if (rc != MCDC_OK) { mcdc_free(s); return rc; }
    srv->sessions[slot] = s;
    *out = s;
    return MCDC_OK;
}

/* SQL Server's answer to a login that ALTER LOGIN ... DISABLE turned off. */
static int login_disabled(const char *user, mcdc_error *err) {
    int rc = sim_err(err, 18470, "Login failed for user '%s'. Reason: The account is disabled.", user);
    if (err) err->server_class = 14;
    return rc;
}

int sim_login(sim_server *srv, sim_session **out, const char *user, const char *password, const char *database,
              const char *app_name, mcdc_error *err) {
    (void)app_name;
    *out = NULL;
    pthread_mutex_lock(&srv->mu);
    bool admin = false, disabled = false;
    int rc;
    if (!sim_logins_check(sim_master_db(srv), user, password, &admin, &disabled)) {
        sim_err(err, 18456, "Login failed for user '%s'.", user ? user : "");
        if (err) { err->code = MCDC_E_PERMISSION; err->server_class = 14; }
        rc = MCDC_E_PERMISSION;
    } else if (disabled) {
        rc = login_disabled(user, err);
    } else {
        rc = session_open(srv, out, user, admin, database, err);
    }
    pthread_mutex_unlock(&srv->mu);
    return rc;
}

int sim_login_trusted(sim_server *srv, sim_session **out, const char *user, const char *database, mcdc_error *err) {
    *out = NULL;
    pthread_mutex_lock(&srv->mu);
    bool admin = false, disabled = false;
    int rc = !sim_logins_find(sim_master_db(srv), user, &admin, &disabled)
                 ? sim_err(err, 18456, "Login failed for user '%s'.", user)
             : disabled ? login_disabled(user, err)
                        : session_open(srv, out, user, admin, database, err);
    pthread_mutex_unlock(&srv->mu);
    return rc;
}

void sim_session_close(sim_session *s) {
    if (!s) return;
    sim_server *srv = s->srv;
    pthread_mutex_lock(&srv->mu);
    if (s->trancount > 0) sim_tran_rollback(s);
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) if (srv->sessions[k] == s) srv->sessions[k] = NULL;
    pthread_mutex_unlock(&srv->mu);
    mcdc_free(s->tran_rows);
    sim_vars_clear(s);
    sim_fast_cache_drop(s);
    if (s->conv) sqlite3_finalize(s->conv);
    if (s->rd) sqlite3_close(s->rd);
    mcdc_free(s);
}

int sim_session_spid(const sim_session *s) { return s->spid; }
void sim_session_count_request(sim_session *s) { atomic_fetch_add(&s->srv->requests, 1); }
const char *sim_session_database(const sim_session *s) { return s->db->name; }
void sim_session_set_packet_size(sim_session *s, int bytes) { s->packet_size = bytes; }

void sim_session_add_network_wait(sim_session *s, int64_t ms) {
    if (ms <= 0) return;
    pthread_mutex_lock(&s->srv->mu);
    s->net_wait_ms += ms;
    s->net_waits++;
    if (ms > s->net_wait_max_ms) s->net_wait_max_ms = ms;
    pthread_mutex_unlock(&s->srv->mu);
}

int sim_do_use(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    char name[SIM_NAME_MAX];
    if (i + 1 >= end || sim_tok_ident(&t[i + 1], name, sizeof name) != 0) return sim_syntax_err(err, t, i + 1, end);
    pthread_mutex_lock(&s->srv->mu);
    sim_db *d = sim_find_db(s->srv, name);
    bool ok = d && (s->admin || mcdc_str_ieq(d->name, "master") || sim_db_has_user(d, s->login));
    pthread_mutex_unlock(&s->srv->mu);
    if (!d) return sim_err(err, 911, "Database '%s' does not exist. Make sure that the name is entered correctly.", name);
    if (!ok)
        return sim_err(err, 916, "The server principal \"%s\" is not able to access the database \"%s\" under the current security context.",
                       s->login, d->name);
    char old[SIM_NAME_MAX];
    snprintf(old, sizeof old, "%s", s->db->name);
    int rc = sim_sess_use(s, d, err);
    if (rc != MCDC_OK) return rc;
    if (x->sink->database_changed && x->sink->database_changed(x->sink->ctx, d->name, old)) x->aborted = true;
    char msg[SIM_NAME_MAX + 64];
    snprintf(msg, sizeof msg, "Changed database context to '%s'.", d->name);
    sim_send_info(x, 5701, msg);
    sim_send_done(x, 0, false, false);
    return MCDC_OK;
}
