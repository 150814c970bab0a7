/*
 * sim_locks.c - READ COMMITTED between sessions (see the known
 * deviations in sim_engine.c): the tables and rows an open transaction
 * changed (owns sim_session.tran_tables, tran_rows, waiting_for), waits of
 * readers and writers, lock timeout, attention and deadlock victims.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* ---- READ COMMITTED ------------------------------------------------------ */
#define SIM_LOCK_POLL_MS 5

/* Under mu: another session whose open transaction changed a table res reads. */
static sim_session *read_blocker(sim_session *s, const xl_result *res) {
    sim_server *srv = s->srv;
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) {
        sim_session *o = srv->sessions[k];
        if (!o || o == s || o->trancount == 0 || o->tran_db != s->db) continue;
        if (o->tran_tables_all && o->tran_ntables > 0) return o;
        for (int t = 0; t < res->ntables; t++)
            for (int c = 0; c < o->tran_ntables; c++)
                if (mcdc_str_ieq(o->tran_tables[c], res->tables[t].name)) return o;
    }
    return NULL;
}

/* Under mu, which it gives up while it sleeps: waits while blocker(s, arg)
 * names another session, until SET LOCK_TIMEOUT (error 1222), an ATTENTION
 * (the sink's poll), or a wait cycle (error 1205, this session's transaction
 * rolled back as the deadlock victim: *victim). Returns holding mu. */
static int wait_held(sim_stmt *x, sim_session *(*blocker)(sim_session *s, const void *arg), const void *arg,
                     bool *victim, mcdc_error *err) {
    sim_session *s = x->s;
    sim_server *srv = s->srv;
    int64_t waited_ms = 0;
    *victim = false;
    for (;;) {
        sim_session *b = blocker(s, arg);
        if (!b) return MCDC_OK;
        for (sim_session *w = b; w && !*victim; w = w->waiting_for) *victim = w == s;
        if (*victim) {
            sim_tran_rollback(s);
            int rc = sim_err(err, 1205,
                             "Transaction (Process ID %d) was deadlocked on lock resources with another process and has"
                             " been chosen as the deadlock victim. Rerun the transaction.",
                             s->spid);
            if (err) err->server_class = 13;
            return rc;
        }
        if (s->lock_timeout_ms >= 0 && waited_ms >= s->lock_timeout_ms)
            return sim_err(err, 1222, "Lock request time out period exceeded.");
        s->waiting_for = b;
        pthread_mutex_unlock(&srv->mu);
        mcdc_sleep_ms(SIM_LOCK_POLL_MS);
        waited_ms += SIM_LOCK_POLL_MS;
        bool stop = x->sink->poll && x->sink->poll(x->sink->ctx);
        pthread_mutex_lock(&srv->mu);
        s->waiting_for = NULL;
        if (stop) {
            x->aborted = true;
            return sim_err(err, 3617, "The query was cancelled while it waited for a lock.");
        }
    }
}

/* After a failed wait, without mu: a deadlock victim's client learns that
 * its transaction ended (ENVCHANGE). */
static void wait_failed(sim_stmt *x, bool victim) {
    if (victim && x->sink->transaction && x->sink->transaction(x->sink->ctx, 10, x->s->descriptor)) x->aborted = true;
}

int sim_wait_while(sim_stmt *x, sim_session *(*blocker)(sim_session *s, const void *arg), const void *arg,
                   mcdc_error *err) {
    bool victim;
    pthread_mutex_lock(&x->s->srv->mu);
    int rc = wait_held(x, blocker, arg, &victim, err);
    pthread_mutex_unlock(&x->s->srv->mu);
    wait_failed(x, victim);
    return rc;
}

static sim_session *table_blocker(sim_session *s, const void *tbl) { return sim_write_blocker(s, tbl, -1); }

/* ALTER and DROP TABLE take the table's schema lock (Sch-M): they wait,
 * as reads and writes do, for every other open transaction that changed
 * the table (its rows or, by DDL, its shape). */
int sim_lock_table_for_ddl(sim_stmt *x, const char *tbl, mcdc_error *err) {
    bool victim;
    pthread_mutex_lock(&x->s->srv->mu);
    int rc = wait_held(x, table_blocker, tbl, &victim, err);
    if (rc == MCDC_OK) return MCDC_OK;
    pthread_mutex_unlock(&x->s->srv->mu);
    wait_failed(x, victim);
    return rc;
}

/* Under mu: another session whose open transaction changed table tbl by
 * DDL (a write waits for it, as for a schema lock). */
sim_session *sim_ddl_blocker(sim_session *s, const char *tbl) {
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) {
        sim_session *o = s->srv->sessions[k];
        if (!o || o == s || o->trancount == 0 || o->tran_db != s->db) continue;
        for (int c = 0; c < o->tran_nddl; c++)
            if (mcdc_str_ieq(o->tran_ddl[c], tbl)) return o;
    }
    return NULL;
}

static sim_session *read_blocker_cb(sim_session *s, const void *res) { return read_blocker(s, res); }

/* READ COMMITTED at table granularity: waits while another session's open
 * transaction has changed a table the statement reads. nolock: the
 * statement reads WITH (NOLOCK); it, and READ UNCOMMITTED, wait only for
 * another open transaction's DDL on a table it reads (their schema
 * stability lock against the DDL's Sch-M). */
int sim_wait_committed(sim_stmt *x, const xl_result *res, bool nolock, mcdc_error *err) {
    if (res->ntables == 0) return MCDC_OK;
    if (nolock || x->s->iso == SIM_ISO_READ_UNCOMMITTED) return sim_wait_while(x, sim_snap_ddl_blocker, res, err);
    return sim_wait_while(x, read_blocker_cb, res, err);
}

bool sim_has_nolock(const tsql_tok *t, int a, int b) {
    for (int k = a; k < b; k++)
        if (tsql_tok_is(&t[k], "NOLOCK") || tsql_tok_is(&t[k], "READUNCOMMITTED")) return true;
    return false;
}

/* Under mu: the open transaction changed table tbl (other sessions' reads
 * of it wait until it ends). */
int sim_tran_touch(sim_session *s, const char *tbl) {
    if (s->trancount == 0 || s->tran_tables_all) return -1;
    for (int k = 0; k < s->tran_ntables; k++)
        if (mcdc_str_ieq(s->tran_tables[k], tbl)) return k;
    if (s->tran_ntables == (int)(sizeof s->tran_tables / sizeof s->tran_tables[0])) {
        s->tran_tables_all = true;
        return -1;
    }
    snprintf(s->tran_tables[s->tran_ntables], SIM_NAME_MAX, "%s", tbl);
    return s->tran_ntables++;
}

/* Under mu: the open transaction changed row rowid of its table number
 * table (from sim_tran_touch; -1: not tracked). */
void sim_tran_touch_row(sim_session *s, int table, int64_t rowid) {
    if (table < 0 || s->tran_rows_all) return;
    if (s->tran_nrows == s->tran_rows_cap) {
        int cap = s->tran_rows_cap ? s->tran_rows_cap * 2 : 64;
        sim_tran_row *nr = cap <= SIM_TRAN_ROWS_MAX ? mcdc_realloc(s->tran_rows, (size_t)cap * sizeof *nr) : NULL;
        if (!nr) { /* past the limit (or out of memory): every row of its tables */
            s->tran_rows_all = true;
            return;
        }
        s->tran_rows = nr;
        s->tran_rows_cap = cap;
    }
    s->tran_rows[s->tran_nrows++] = (sim_tran_row){table, rowid};
}

/* Under mu: another session whose open transaction changed table tbl
 * (rowid < 0) or row rowid of it. */
sim_session *sim_write_blocker(sim_session *s, const char *tbl, int64_t rowid) {
    sim_server *srv = s->srv;
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) {
        sim_session *o = srv->sessions[k];
        if (!o || o == s || o->trancount == 0 || o->tran_db != s->db) continue;
        if (o->tran_tables_all && o->tran_ntables > 0) return o;
        int ti = -1;
        for (int c = 0; c < o->tran_ntables && ti < 0; c++)
            if (mcdc_str_ieq(o->tran_tables[c], tbl)) ti = c;
        if (ti < 0) continue;
        if (rowid < 0 || o->tran_rows_all) return o;
        for (int r = 0; r < o->tran_nrows; r++)
            if (o->tran_rows[r].table == ti && o->tran_rows[r].rowid == rowid) return o;
    }
    return NULL;
}


sim_session *sim_tran_still_open(sim_session *s, const void *arg) {
    const sim_tran_ref *t = arg;
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++)
        if (s->srv->sessions[k] == t->s)
            return t->s->trancount > 0 && t->s->descriptor == t->descriptor ? t->s : NULL;
    return NULL;
}
