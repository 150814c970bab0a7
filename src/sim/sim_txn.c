/*
 * sim_txn.c - transactions: BEGIN/COMMIT/ROLLBACK, implicit
 * transactions, the undo log ROLLBACK replays (owns sim_session.undo) and
 * the transaction's LSN bookkeeping.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

char *sim_value_literal(sqlite3_value *v) {
    switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER: return sqlite3_mprintf("%lld", (long long)sqlite3_value_int64(v));
    case SQLITE_FLOAT: return sqlite3_mprintf("%!.17g", sqlite3_value_double(v));
    case SQLITE_TEXT: return sqlite3_mprintf("%Q", (const char *)sqlite3_value_text(v));
    case SQLITE_BLOB: {
        int n = sqlite3_value_bytes(v);
        const uint8_t *p = sqlite3_value_blob(v);
        char *h = sqlite3_malloc(2 * n + 4);
        if (!h) return NULL;
        int o = 0;
        h[o++] = 'X';
        h[o++] = '\'';
        for (int k = 0; k < n; k++) {
            static const char HX[] = "0123456789ABCDEF";
            h[o++] = HX[p[k] >> 4];
            h[o++] = HX[p[k] & 15];
        }
        h[o++] = '\'';
        h[o] = 0;
        return h;
    }
    default: return sqlite3_mprintf("NULL");
    }
}

/* ---- transactions ------------------------------------------------------- */
/* Takes sql (sqlite3_malloc'd) and commit_sql (same, may be NULL). */
void sim_undo_push2(sim_session *s, char *sql, char *commit_sql) {
    sim_undo *u = sql ? mcdc_calloc(1, sizeof *u) : NULL;
    if (u) {
        u->sql = mcdc_strdup(sql);
        u->commit_sql = commit_sql ? mcdc_strdup(commit_sql) : NULL;
        u->prev = s->undo;
        s->undo = u;
    }
    sqlite3_free(sql);
    sqlite3_free(commit_sql);
}

void sim_undo_push(sim_session *s, char *sql) { sim_undo_push2(s, sql, NULL); }

static void undo_free_all(sim_session *s) {
    while (s->undo) {
        sim_undo *u = s->undo;
        s->undo = u->prev;
        mcdc_free(u->sql);
        mcdc_free(u->commit_sql);
        mcdc_free(u);
    }
}

void sim_tran_reset(sim_session *s) {
    sim_snap_tran_reset(s); /* uncommitted versions go, the snapshot transaction ends */
    undo_free_all(s);
    s->trancount = 0;
    s->tran_ntables = 0;
    s->tran_tables_all = false;
    mcdc_free(s->tran_rows);
    s->tran_rows = NULL;
    s->tran_nrows = s->tran_rows_cap = 0;
    s->tran_rows_all = false;
    s->tran_logged = false;
    s->tran_cdc = false;
    s->tran_ncis = 0;
    s->tran_db = NULL;
    s->cmd_id = 0;
}

/* Under mu. */
void sim_tran_rollback(sim_session *s) {
    if (s->tran_db) {
        sqlite3 *w = s->tran_db->w;
        sqlite3_exec(w, "BEGIN", NULL, NULL, NULL);
        for (sim_undo *u = s->undo; u; u = u->prev) sqlite3_exec(w, u->sql, NULL, NULL, NULL);
        sim_cdc_rollback(s);
        sqlite3_exec(w, "COMMIT", NULL, NULL, NULL);
    }
    sim_tran_reset(s);
}

/* Under mu, inside a SQLite transaction on the db. */
int sim_tran_commit(sim_session *s, mcdc_error *err) {
    int rc = MCDC_OK;
    if (s->tran_logged && s->tran_db) {
        uint64_t commit = sim_lsn_next(s->tran_db);
        if (s->tran_cdc) rc = sim_cdc_commit(s, commit, err);
        if (rc == MCDC_OK) rc = sim_db_state_put(s->tran_db, "lsn", (int64_t)s->tran_db->lsn);
    }
    for (sim_undo *u = s->undo; u && rc == MCDC_OK; u = u->prev)
        if (u->commit_sql) rc = sim_sql(s->tran_db->w, err, "%s", u->commit_sql);
    if (rc == MCDC_OK) undo_free_all(s);
    return rc;
}

void sim_tran_log_start(sim_session *s) {
    if (s->tran_logged) return;
    s->tran_logged = true;
    s->tran_db = s->db;
    s->tran_begin_lsn = sim_lsn_next(s->db);
    s->tran_id = ++s->db->tran_seq;
    s->tran_begin_utc_us = sim_srv_utc_us(s->srv);
    s->cmd_id = 0;
    sim_db_state_put(s->db, "tran_seq", (int64_t)s->db->tran_seq);
}

int sim_do_tran(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    (void)end;
    int rc = MCDC_OK;
    if (tsql_tok_is(&t[i], "BEGIN")) {
        pthread_mutex_lock(&s->srv->mu);
        s->trancount++;
        if (s->trancount == 1) s->descriptor = ((uint64_t)s->spid << 32) | (s->descriptor + 1);
        pthread_mutex_unlock(&s->srv->mu);
        if (s->trancount == 1 && x->sink->transaction && x->sink->transaction(x->sink->ctx, 8, s->descriptor))
            x->aborted = true;
    } else if (tsql_tok_is(&t[i], "COMMIT")) {
        if (s->trancount == 0)
            return sim_err(err, 3902, "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.");
        pthread_mutex_lock(&s->srv->mu);
        if (--s->trancount == 0) {
            if (s->tran_db) {
                rc = sim_sql(s->tran_db->w, err, "BEGIN IMMEDIATE");
                if (rc == MCDC_OK) rc = sim_tran_commit(s, err);
                sim_sql(s->tran_db->w, NULL, rc == MCDC_OK ? "COMMIT" : "ROLLBACK");
            }
            if (rc == MCDC_OK) sim_snap_tran_commit(s); /* its row versions get their stamp */
            sim_tran_reset(s);
        }
        pthread_mutex_unlock(&s->srv->mu);
        if (s->trancount == 0 && x->sink->transaction && x->sink->transaction(x->sink->ctx, 9, s->descriptor))
            x->aborted = true;
    } else { /* ROLLBACK */
        if (s->trancount == 0)
            return sim_err(err, 3903, "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION.");
        pthread_mutex_lock(&s->srv->mu);
        sim_tran_rollback(s);
        pthread_mutex_unlock(&s->srv->mu);
        if (x->sink->transaction && x->sink->transaction(x->sink->ctx, 10, s->descriptor)) x->aborted = true;
    }
    if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
    return rc;
}

/* SET IMPLICIT_TRANSACTIONS ON: these statements open a transaction when
 * none is open (SELECT only when it reads a table). */
void sim_implicit_begin(sim_stmt *x, const tsql_tok *t, int i, int end) {
    sim_session *s = x->s;
    if (!s->implicit_tx || s->trancount > 0) return;
    static const char *W[] = {"INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "TRUNCATE", "GRANT", "REVOKE", NULL};
    bool opens = false;
    for (int w = 0; W[w]; w++) if (tsql_tok_is(&t[i], W[w])) opens = true;
    if (tsql_tok_is(&t[i], "SELECT") || tsql_tok_is(&t[i], "WITH"))
        for (int k = i; k < end; k++) if (tsql_tok_is(&t[k], "FROM")) { opens = true; break; }
    if (tsql_tok_is(&t[i], "CREATE") && i + 1 < end && tsql_tok_is(&t[i + 1], "DATABASE")) opens = false;
    if (!opens) return;
    pthread_mutex_lock(&s->srv->mu);
    s->trancount = 1;
    s->descriptor = ((uint64_t)s->spid << 32) | ((s->descriptor + 1) & 0xFFFFFFFFu);
    pthread_mutex_unlock(&s->srv->mu);
    if (x->sink->transaction && x->sink->transaction(x->sink->ctx, 8, s->descriptor)) x->aborted = true;
}
