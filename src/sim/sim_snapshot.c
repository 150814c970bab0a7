/*
 * sim_snapshot.c - SNAPSHOT isolation (see the known deviations in
 * sim_engine.c): ALLOW_SNAPSHOT_ISOLATION per database, the row versions
 * (before-images) writers leave, the versioned view of a snapshot read,
 * update conflicts (3960) and the errors SQL Server gives around them.
 * Owns sim_server.vers and the session's snap_* / tran_iso / vunit /
 * tran_ddl fields.
 *
 * Every statement is committed to SQLite at once, so a table always holds
 * its newest rows, committed or not. A snapshot is a stamp: the number of
 * versioned commits when it started (server-wide, as SQL Server's
 * transaction sequence numbers are). A write of a table in a database that
 * versions keeps the row's state before it (once per transaction and row;
 * an insert keeps "no row"), stamped when its transaction commits. A
 * snapshot with stamp C sees a row as the table holds it, unless one of the
 * row's versions is invisible to it (not committed, or committed after C,
 * and not its own transaction's): then it sees the before-image of the
 * earliest such version. Writers wait for each other per row, so a row's
 * versions come in commit order and that before-image is the row as it was
 * at C.
 *
 * A read pins its SQLite state (a read transaction on the session's own
 * connection, begun under the server mutex: no write is half done then),
 * works out per table the rows whose view differs from the table, and
 * writes them into a temp table on that connection; the statement is then
 * translated again with such a table standing for "(its rows not in the
 * temp table) UNION ALL (the temp table's rows)". A table with no such row
 * is read as it is (the table store may serve it: sim_fast_table.c).
 * Versions live in memory: they go when their transaction rolls back, or
 * once committed when no active snapshot is older than their commit.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

/* ---- the version store --------------------------------------------------- */
typedef struct vtab vtab;
typedef struct vent vent;

struct vent {
    vent *row_next;       /* the same row's next (newer) version */
    vent *unit_next;      /* the same unit's next version */
    vtab *tab;
    struct sim_vunit *u;  /* the writer's unit */
    int64_t rowid;
    sqlite3_value **vals; /* owned, ncols; NULL: no row before the write */
    int ncols;
};

typedef struct vrow {
    int64_t rowid;
    vent *first, *last;
    struct vrow *hnext;
} vrow;

struct vtab {
    uint64_t db_serial;
    char name[SIM_NAME_MAX * 2];
    vrow **hash;
    size_t cap, nrows;
    int64_t nents;
    bool dead; /* DDL replaced it: its versions go with their units */
    vtab *next;
};

/* A writer's unit: one transaction, or one autocommit statement. */
typedef struct sim_vunit {
    uint64_t cseq; /* commit stamp; 0 while open */
    vent *ents;
    struct sim_vunit *next; /* committed units, in stamp order */
} sim_vunit;

typedef struct vddl {
    uint64_t db_serial, cseq;
    char name[SIM_NAME_MAX * 2];
    struct vddl *next;
} vddl;

struct sim_vstore {
    uint64_t cseq;    /* the last commit stamp handed out */
    uint64_t serials; /* database serials */
    vtab *tabs;
    sim_vunit *done, *done_tail; /* committed units some snapshot may need */
    vddl *ddls;                  /* the last DDL's stamp per table */
    int64_t nents;
};

int sim_vstore_create(sim_vstore **out, mcdc_error *err) {
    *out = mcdc_calloc(1, sizeof **out);
    return *out ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for the row version store");
}

static void vals_free(sqlite3_value **v, int n) {
    if (!v) return;
    for (int k = 0; k < n; k++) sqlite3_value_free(v[k]);
    mcdc_free(v);
}

static void tab_free(vtab *t) {
    for (size_t b = 0; b < t->cap; b++)
        for (vrow *r = t->hash[b], *n; r; r = n) {
            n = r->hnext;
            for (vent *e = r->first, *en; e; e = en) {
                en = e->row_next;
                vals_free(e->vals, e->ncols);
                mcdc_free(e);
            }
            mcdc_free(r);
        }
    mcdc_free(t->hash);
    mcdc_free(t);
}

void sim_vstore_free(sim_vstore *v) {
    if (!v) return;
    /* every version hangs off a table's rows; units are only lists */
    for (vtab *t = v->tabs, *n; t; t = n) {
        n = t->next;
        tab_free(t);
    }
    for (sim_vunit *u = v->done, *n; u; u = n) {
        n = u->next;
        mcdc_free(u);
    }
    for (vddl *d = v->ddls, *n; d; d = n) {
        n = d->next;
        mcdc_free(d);
    }
    mcdc_free(v);
}

static uint64_t db_serial(sim_vstore *vs, sim_db *d) {
    if (!d->snap_serial) d->snap_serial = ++vs->serials;
    return d->snap_serial;
}

static vtab *tab_find(sim_vstore *vs, sim_db *d, const char *name, bool create) {
    uint64_t ser = db_serial(vs, d);
    for (vtab *t = vs->tabs; t; t = t->next)
        if (!t->dead && t->db_serial == ser && mcdc_str_ieq(t->name, name)) return t;
    if (!create) return NULL;
    vtab *t = mcdc_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->db_serial = ser;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->next = vs->tabs;
    vs->tabs = t;
    return t;
}

static size_t row_bucket(int64_t rowid, size_t cap) {
    uint64_t h = (uint64_t)rowid * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 17) & (cap - 1);
}

static vrow *row_find(vtab *t, int64_t rowid) {
    if (!t->cap) return NULL;
    for (vrow *r = t->hash[row_bucket(rowid, t->cap)]; r; r = r->hnext)
        if (r->rowid == rowid) return r;
    return NULL;
}

static vrow *row_add(vtab *t, int64_t rowid) {
    if (t->nrows >= t->cap) { /* grow: load factor 1 */
        size_t cap = t->cap ? t->cap * 2 : 64;
        vrow **h = mcdc_calloc(cap, sizeof *h);
        if (!h) return NULL;
        for (size_t b = 0; b < t->cap; b++)
            for (vrow *r = t->hash[b], *n; r; r = n) {
                n = r->hnext;
                size_t nb = row_bucket(r->rowid, cap);
                r->hnext = h[nb];
                h[nb] = r;
            }
        mcdc_free(t->hash);
        t->hash = h;
        t->cap = cap;
    }
    vrow *r = mcdc_calloc(1, sizeof *r);
    if (!r) return NULL;
    r->rowid = rowid;
    size_t b = row_bucket(rowid, t->cap);
    r->hnext = t->hash[b];
    t->hash[b] = r;
    t->nrows++;
    return r;
}

static void tab_unlink(sim_vstore *vs, vtab *t) {
    for (vtab **pp = &vs->tabs; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    tab_free(t);
}

/* A row without versions leaves its table. */
static void row_drop_empty(vtab *t, vrow *r) {
    if (r->first) return;
    vrow **pp = &t->hash[row_bucket(r->rowid, t->cap)];
    while (*pp && *pp != r) pp = &(*pp)->hnext;
    if (*pp) *pp = r->hnext;
    mcdc_free(r);
    t->nrows--;
}

/* Unlinks e from its row (and the row from its table when it was the last)
 * and frees it; a dead table goes with its last version. */
static void ent_free(sim_vstore *vs, vent *e) {
    vtab *t = e->tab;
    vrow *r = row_find(t, e->rowid);
    if (r) {
        vent *prev = NULL;
        for (vent *q = r->first; q; prev = q, q = q->row_next)
            if (q == e) {
                if (prev) prev->row_next = e->row_next;
                else r->first = e->row_next;
                if (r->last == e) r->last = prev;
                break;
            }
        row_drop_empty(t, r);
    }
    vals_free(e->vals, e->ncols);
    mcdc_free(e);
    t->nents--;
    vs->nents--;
    if (t->dead && t->nents == 0) tab_unlink(vs, t);
}

static void unit_drop(sim_vstore *vs, sim_vunit *u) {
    for (vent *e = u->ents, *n; e; e = n) {
        n = e->unit_next;
        ent_free(vs, e);
    }
    mcdc_free(u);
}

/* Under mu: committed versions no active snapshot is older than go. */
static void gc(sim_server *srv) {
    sim_vstore *vs = srv->vers;
    bool any = false;
    uint64_t horizon = UINT64_MAX;
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) {
        sim_session *o = srv->sessions[k];
        if (o && (o->snap_tran || o->snap_stmt)) {
            any = true;
            if (o->snap_cseq < horizon) horizon = o->snap_cseq;
        }
    }
    while (vs->done && (!any || vs->done->cseq <= horizon)) {
        sim_vunit *u = vs->done;
        vs->done = u->next;
        if (!vs->done) vs->done_tail = NULL;
        unit_drop(vs, u);
    }
}

static bool any_snapshot(sim_server *srv) {
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) {
        sim_session *o = srv->sessions[k];
        if (o && (o->snap_tran || o->snap_stmt)) return true;
    }
    return false;
}

int64_t sim_snap_versions(sim_server *srv) {
    pthread_mutex_lock(&srv->mu);
    int64_t n = srv->vers->nents;
    pthread_mutex_unlock(&srv->mu);
    return n;
}

static uint64_t ddl_stamp(sim_vstore *vs, sim_db *d, const char *tbl) {
    uint64_t ser = db_serial(vs, d);
    for (vddl *x = vs->ddls; x; x = x->next)
        if (x->db_serial == ser && mcdc_str_ieq(x->name, tbl)) return x->cseq;
    return 0;
}

/* ---- database state --------------------------------------------------------- */
int sim_snap_state(sim_db *d) {
    if (!d->snap_loaded) {
        /* master allows snapshot isolation in SQL Server, user databases not */
        int64_t dflt = mcdc_str_ieq(d->name, "master") ? 1 : 0;
        d->snap_state = sim_state_get(d->w, "allow_snapshot", dflt) ? SIM_SNAP_ON : SIM_SNAP_OFF;
        d->snap_loaded = true;
    }
    return d->snap_state;
}

const char *sim_snap_state_desc(int state) {
    switch (state) {
    case SIM_SNAP_ON: return "ON";
    case SIM_SNAP_TO_OFF: return "IN_TRANSITION_TO_OFF";
    case SIM_SNAP_TO_ON: return "IN_TRANSITION_TO_ON";
    default: return "OFF";
    }
}

/* Versions are kept in all but OFF (SQL Server versions while in transition). */
static bool db_versions(sim_db *d) { return sim_snap_state(d) != SIM_SNAP_OFF; }

/* ---- snapshots ---------------------------------------------------------------- */
static bool user_table(const char *name) { return !sim_ci_prefix(name, "sys."); }

/* Under mu: the transaction's isolation is fixed by its first data access. */
static void note_access(sim_session *s) {
    if (s->trancount > 0 && s->tran_iso == 0) s->tran_iso = s->iso + 1;
}

/* Under mu: the snapshot of the statement about to access d's tables: the
 * open snapshot transaction's, a new one (its stamp taken now), or the
 * statement's own in autocommit (*own_stmt). *rolled_back: the error ended
 * the transaction. */
static int snapshot_start(sim_session *s, sim_db *d, bool *own_stmt, bool *rolled_back, mcdc_error *err) {
    *own_stmt = *rolled_back = false;
    if (s->trancount > 0 && s->snap_tran) return MCDC_OK; /* it goes on, even in transition to OFF */
    if (s->trancount > 0 && s->tran_iso != 0 && s->tran_iso != SIM_ISO_SNAPSHOT + 1) {
        sim_tran_rollback(s);
        *rolled_back = true;
        return sim_err(err, 3951,
                       "Transaction failed in database '%s' because the statement was run under snapshot isolation but the"
                       " transaction did not start in snapshot isolation. You cannot change the isolation level of the"
                       " transaction to snapshot after the transaction has started unless the transaction was originally"
                       " started under snapshot isolation level.",
                       d->name);
    }
    int st = sim_snap_state(d);
    if (st == SIM_SNAP_OFF)
        return sim_err(err, 3952,
                       "Snapshot isolation transaction failed accessing database '%s' because snapshot isolation is not"
                       " allowed in this database. Use ALTER DATABASE to allow snapshot isolation.",
                       d->name);
    if (st == SIM_SNAP_TO_ON)
        return sim_err(err, 3956,
                       "Snapshot isolation transaction failed to start in database '%s' because the ALTER DATABASE command"
                       " which enables snapshot isolation for this database has not finished yet. The database is in"
                       " transition to pending ON state. You must wait until the ALTER DATABASE Command completes"
                       " successfully.",
                       d->name);
    if (st == SIM_SNAP_TO_OFF)
        return sim_err(err, 3954,
                       "Snapshot isolation transaction failed to start in database '%s' because the ALTER DATABASE command"
                       " that disallows snapshot isolation had started before this transaction began. The database is in"
                       " transition to OFF state. You will either need to change the isolation level of the transaction"
                       " or re-enable the snapshot isolation in the database.",
                       d->name);
    s->snap_cseq = s->srv->vers->cseq;
    s->snap_db = d;
    if (s->trancount > 0) {
        s->snap_tran = true;
        s->tran_iso = SIM_ISO_SNAPSHOT + 1;
    } else {
        s->snap_stmt = true;
        *own_stmt = true;
    }
    return MCDC_OK;
}

static bool own_ddl(const sim_session *s, const char *tbl) {
    for (int k = 0; k < s->tran_nddl; k++)
        if (mcdc_str_ieq(s->tran_ddl[k], tbl)) return true;
    return false;
}

/* Under mu: 3961 when tbl changed by DDL after the snapshot transaction
 * started (the transaction is rolled back, as SQL Server ends it). */
static int ddl_check(sim_session *s, const char *tbl, bool *rolled_back, mcdc_error *err) {
    if (!s->snap_tran || own_ddl(s, tbl) || ddl_stamp(s->srv->vers, s->db, tbl) <= s->snap_cseq) return MCDC_OK;
    char db[SIM_NAME_MAX];
    snprintf(db, sizeof db, "%s", s->db->name);
    sim_tran_rollback(s);
    *rolled_back = true;
    return sim_err(err, 3961,
                   "Snapshot isolation transaction failed in database '%s' because the object accessed by the statement has"
                   " been modified by a DDL statement in another concurrent transaction since the start of this"
                   " transaction. It is disallowed because the metadata is not versioned. A concurrent update to"
                   " metadata can lead to inconsistency if mixed with snapshot isolation.",
                   db);
}

void sim_snap_note_access(sim_session *s, const xl_result *res) {
    for (int k = 0; k < res->ntables; k++)
        if (user_table(res->tables[k].name)) {
            note_access(s);
            return;
        }
}

bool sim_snap_applies(const sim_session *s, const xl_result *res, bool nolock) {
    if (s->iso != SIM_ISO_SNAPSHOT || nolock) return false;
    for (int k = 0; k < res->ntables; k++)
        if (user_table(res->tables[k].name)) return true;
    return false;
}

sim_session *sim_snap_ddl_blocker(sim_session *s, const void *arg) {
    const xl_result *res = arg;
    sim_session *o = NULL;
    for (int t = 0; t < res->ntables && !o; t++) o = sim_ddl_blocker(s, res->tables[t].name);
    return o;
}

/* The first version of row r a snapshot (stamp cseq, unit own) cannot see:
 * its before-image is the row as the snapshot sees it. NULL: the row as it
 * is now (all visible, or the snapshot's own transaction wrote it). */
static const vent *first_invisible(const vrow *r, const sim_vunit *own, uint64_t cseq) {
    for (const vent *e = r->first; e; e = e->row_next)
        if (own && e->u == own) return NULL;
    for (const vent *e = r->first; e; e = e->row_next)
        if (e->u->cseq == 0 || e->u->cseq > cseq) return e;
    return NULL;
}

/* Under mu, rd pinned: the rows of tbl whose view differs into temp table
 * st->temp; st->overlay their count (0: none, no temp table). */
static int overlay_build(sim_session *s, sim_snap_table *st, int seq, mcdc_error *err) {
    vtab *t = tab_find(s->srv->vers, s->db, st->name, false);
    st->overlay = 0;
    if (!t || t->nrows == 0) return MCDC_OK;
    int n = 0;
    for (size_t b = 0; b < t->cap; b++)
        for (vrow *r = t->hash[b]; r; r = r->hnext)
            if (first_invisible(r, s->vunit, s->snap_cseq)) n++;
    if (n == 0) return MCDC_OK;
    sim_col_def *cols = NULL;
    int ncols = 0;
    int rc = sim_load_cols(s->rd, st->name, &cols, &ncols, err);
    if (rc == MCDC_OK && ncols == 0) rc = sim_err(err, 208, "Invalid object name '%s'.", st->name);
    snprintf(st->temp, sizeof st->temp, "__sim_snap.%d", seq);
    mcdc_buf q = {0};
    if (rc == MCDC_OK) {
        st->cols = mcdc_calloc((size_t)ncols, SIM_NAME_MAX);
        if (!st->cols) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        st->ncols = st->cols ? ncols : 0;
    }
    if (rc == MCDC_OK) rc = mcdc_buf_printf(&q, err, "CREATE TEMP TABLE \"%s\"(\"__sim_rid\" INTEGER PRIMARY KEY, \"__sim_p\" INT", st->temp);
    for (int k = 0; k < ncols && rc == MCDC_OK; k++) {
        snprintf(st->cols[k], SIM_NAME_MAX, "%s", cols[k].name);
        rc = mcdc_buf_append_str(&q, ", ", err);
        if (rc == MCDC_OK) rc = xl_append_ident(&q, cols[k].name);
        if (rc == MCDC_OK) rc = mcdc_buf_printf(&q, err, " %s", sim_type_decl(&cols[k].type));
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&q, ")", err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&q, err);
    if (rc == MCDC_OK) rc = sim_sql(s->rd, err, "%s", (const char *)q.data);
    sqlite3_stmt *ins = NULL;
    if (rc == MCDC_OK) {
        mcdc_buf_reset(&q);
        rc = mcdc_buf_printf(&q, err, "INSERT INTO temp.\"%s\" VALUES (?, ?", st->temp);
        for (int k = 0; k < ncols && rc == MCDC_OK; k++) rc = mcdc_buf_append_str(&q, ", ?", err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(&q, ")", err);
        if (rc == MCDC_OK) rc = mcdc_buf_cstr(&q, err);
        if (rc == MCDC_OK && sqlite3_prepare_v2(s->rd, (const char *)q.data, -1, &ins, NULL) != SQLITE_OK)
            rc = sim_sqlite_err(s->rd, SQLITE_ERROR, err);
    }
    for (size_t b = 0; b < t->cap && rc == MCDC_OK; b++)
        for (vrow *r = t->hash[b]; r && rc == MCDC_OK; r = r->hnext) {
            const vent *e = first_invisible(r, s->vunit, s->snap_cseq);
            if (!e) continue;
            if (e->vals && e->ncols != ncols) {
                rc = sim_err(err, 3961, "Snapshot isolation transaction failed in database '%s' because the object accessed"
                             " by the statement has been modified by a DDL statement in another concurrent transaction since"
                             " the start of this transaction.", s->db->name);
                break;
            }
            sqlite3_reset(ins);
            sqlite3_clear_bindings(ins);
            sqlite3_bind_int64(ins, 1, r->rowid);
            sqlite3_bind_int(ins, 2, e->vals != NULL);
            for (int k = 0; e->vals && k < ncols; k++) sqlite3_bind_value(ins, k + 3, e->vals[k]);
            if (sqlite3_step(ins) != SQLITE_DONE) rc = sim_sqlite_err(s->rd, SQLITE_ERROR, err);
        }
    sqlite3_finalize(ins);
    mcdc_buf_free(&q);
    mcdc_free(cols);
    if (rc == MCDC_OK) st->overlay = n;
    return rc;
}

int sim_snap_read_begin(sim_stmt *x, const xl_result *res, sim_snap_view *v, mcdc_error *err) {
    sim_session *s = x->s;
    sim_server *srv = s->srv;
    memset(v, 0, sizeof *v);
    /* a snapshot read takes no lock a writer holds, but the schema lock of
     * another transaction's DDL on the table (Sch-M) it does wait for */
    int rc = sim_wait_while(x, sim_snap_ddl_blocker, res, err);
    if (rc != MCDC_OK) return rc;
    bool rolled = false;
    pthread_mutex_lock(&srv->mu);
    rc = snapshot_start(s, s->db, &v->own_stmt, &rolled, err);
    for (int k = 0; k < res->ntables && rc == MCDC_OK; k++) {
        const char *n = res->tables[k].name;
        if (!user_table(n) || sim_snap_view_table(v, n)) continue;
        rc = ddl_check(s, n, &rolled, err);
        if (rc == MCDC_OK && v->ntables < XL_TABLES_MAX) snprintf(v->t[v->ntables++].name, sizeof v->t[0].name, "%s", n);
    }
    /* the SQLite state the statement reads: begun here, under the mutex */
    if (rc == MCDC_OK) {
        rc = sim_sql(s->rd, err, "BEGIN");
        if (rc == MCDC_OK) {
            v->pinned = true;
            rc = sim_sql(s->rd, err, "SELECT 1 FROM sqlite_schema LIMIT 1");
        }
    }
    for (int k = 0; k < v->ntables && rc == MCDC_OK; k++) {
        v->t[k].wseq = sim_tstore_wseq(srv->stores, s->db->name, v->t[k].name);
        rc = overlay_build(s, &v->t[k], k, err);
        if (v->t[k].overlay) v->noverlay++;
    }
    pthread_mutex_unlock(&srv->mu);
    if (rolled && x->sink->transaction && x->sink->transaction(x->sink->ctx, 10, s->descriptor)) x->aborted = true;
    return rc;
}

void sim_snap_read_end(sim_session *s, sim_snap_view *v) {
    if (v->pinned) (void)sqlite3_exec(s->rd, "ROLLBACK", NULL, NULL, NULL); /* the temp tables go too */
    v->pinned = false;
    for (int k = 0; k < v->ntables; k++) {
        mcdc_free(v->t[k].cols);
        v->t[k].cols = NULL;
    }
    if (v->own_stmt) {
        pthread_mutex_lock(&s->srv->mu);
        s->snap_stmt = false;
        gc(s->srv);
        pthread_mutex_unlock(&s->srv->mu);
        v->own_stmt = false;
    }
}

const sim_snap_table *sim_snap_view_table(const sim_snap_view *v, const char *name) {
    for (int k = 0; k < v->ntables; k++)
        if (mcdc_str_ieq(v->t[k].name, name)) return &v->t[k];
    return NULL;
}

int sim_snap_table_source(void *view, const char *name, mcdc_buf *out) {
    const sim_snap_table *t = view ? sim_snap_view_table(view, name) : NULL;
    if (!t || !t->overlay) return 0;
    mcdc_buf cols = {0};
    int rc = MCDC_OK;
    for (int k = 0; k < t->ncols && rc == MCDC_OK; k++) {
        if (k) rc = mcdc_buf_append_str(&cols, ", ", NULL);
        if (rc == MCDC_OK) rc = xl_append_ident(&cols, t->cols[k]);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&cols, NULL);
    if (rc == MCDC_OK) {
        const char *c = (const char *)cols.data;
        /* in rowid order, as the table reads: a row the view changes keeps
         * its place */
        rc = mcdc_buf_printf(out, NULL, "(SELECT %s FROM (SELECT rowid AS \"__sim_rid\", %s FROM ", c, c);
        if (rc == MCDC_OK) rc = xl_append_ident(out, t->name);
        if (rc == MCDC_OK)
            rc = mcdc_buf_printf(out, NULL,
                                 " WHERE rowid NOT IN (SELECT \"__sim_rid\" FROM temp.\"%s\") UNION ALL SELECT \"__sim_rid\", %s"
                                 " FROM temp.\"%s\" WHERE \"__sim_p\" = 1) ORDER BY \"__sim_rid\")",
                                 t->temp, c, t->temp);
    }
    mcdc_buf_free(&cols);
    return rc == MCDC_OK ? 1 : -1;
}

/* ---- writers ------------------------------------------------------------------ */
int sim_snap_write_begin(sim_stmt *x, const char *tbl, bool *own_stmt, mcdc_error *err) {
    sim_session *s = x->s;
    *own_stmt = false;
    pthread_mutex_lock(&s->srv->mu);
    int rc = MCDC_OK;
    bool rolled = false;
    /* the version store's bound, checked before the write (which cannot
     * fail once it is committed) */
    if (db_versions(s->db) && s->srv->vers->nents >= MCDC_SIM_ROW_VERSIONS_MAX)
        rc = mcdc_error_set(err, MCDC_E_LIMIT,
                            "the simulator keeps at most %d row versions (MCDC_SIM_ROW_VERSIONS_MAX) for snapshot"
                            " isolation: commit or roll back long transactions, end long snapshot transactions",
                            MCDC_SIM_ROW_VERSIONS_MAX);
    else if (s->iso != SIM_ISO_SNAPSHOT) note_access(s);
    else {
        rc = snapshot_start(s, s->db, own_stmt, &rolled, err);
        if (rc == MCDC_OK) rc = ddl_check(s, tbl, &rolled, err);
        if (rc != MCDC_OK && *own_stmt) {
            s->snap_stmt = false;
            *own_stmt = false;
        }
    }
    pthread_mutex_unlock(&s->srv->mu);
    if (rolled && x->sink->transaction && x->sink->transaction(x->sink->ctx, 10, s->descriptor)) x->aborted = true;
    return rc;
}

void sim_snap_write_end(sim_session *s, bool own_stmt) {
    if (!own_stmt) return;
    pthread_mutex_lock(&s->srv->mu);
    s->snap_stmt = false;
    gc(s->srv);
    pthread_mutex_unlock(&s->srv->mu);
}

int sim_snap_conflict(sim_session *s, const char *tbl, int64_t rowid, bool heap, mcdc_error *err) {
    if (s->iso != SIM_ISO_SNAPSHOT || !(s->snap_tran || s->snap_stmt)) return MCDC_OK;
    vtab *t = tab_find(s->srv->vers, s->db, tbl, false);
    const vrow *r = t ? row_find(t, rowid) : NULL;
    for (const vent *e = r ? r->first : NULL; e; e = e->row_next)
        if (e->u != s->vunit && e->u->cseq > s->snap_cseq) {
            int rc = sim_err(err, 3960,
                             "Snapshot isolation transaction aborted due to update conflict. You cannot use snapshot"
                             " isolation to access table '%s' directly or indirectly in database '%s' to update, delete,"
                             " or insert the row that has been modified or deleted by another transaction. Retry the"
                             " transaction or change the isolation level for the update/delete statement.",
                             tbl, s->db->name);
            if (err) err->server_state = heap ? 6 : 2; /* as SQL Server: 2 with a clustered key, 6 for a heap */
            return rc;
        }
    return MCDC_OK;
}

bool sim_snap_versioning(sim_session *s) {
    return db_versions(s->db) && (s->trancount > 0 || any_snapshot(s->srv));
}

int sim_snap_record(sim_session *s, const char *tbl, int64_t rowid, sqlite3_value **vals, int ncols, mcdc_error *err) {
    sim_vstore *vs = s->srv->vers;
    if (!s->vunit && (s->vunit = mcdc_calloc(1, sizeof *s->vunit)) == NULL) {
        vals_free(vals, ncols);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    vtab *t = tab_find(vs, s->db, tbl, true);
    vrow *r = t ? row_find(t, rowid) : NULL;
    if (t && !r) r = row_add(t, rowid);
    if (!r) {
        vals_free(vals, ncols);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    for (vent *e = r->first; e; e = e->row_next)
        if (e->u == s->vunit) { /* the transaction's first write of the row stands */
            vals_free(vals, ncols);
            return MCDC_OK;
        }
    vent *e = mcdc_calloc(1, sizeof *e);
    if (!e) {
        vals_free(vals, ncols);
        row_drop_empty(t, r);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    e->tab = t;
    e->u = s->vunit;
    e->rowid = rowid;
    e->vals = vals;
    e->ncols = ncols;
    if (r->last) r->last->row_next = e;
    else r->first = e;
    r->last = e;
    e->unit_next = s->vunit->ents;
    s->vunit->ents = e;
    t->nents++;
    vs->nents++;
    return MCDC_OK;
}

/* Under mu: the session's unit committed now. */
static void unit_commit(sim_session *s) {
    sim_vstore *vs = s->srv->vers;
    sim_vunit *u = s->vunit;
    s->vunit = NULL;
    if (!u) return;
    u->cseq = ++vs->cseq;
    if (vs->done_tail) vs->done_tail->next = u;
    else vs->done = u;
    vs->done_tail = u;
    gc(s->srv);
}

void sim_snap_stmt_commit(sim_session *s) { unit_commit(s); }
void sim_snap_tran_commit(sim_session *s) { unit_commit(s); }

void sim_snap_tran_reset(sim_session *s) {
    if (s->vunit) { /* rolled back (or a failed commit): the versions go */
        unit_drop(s->srv->vers, s->vunit);
        s->vunit = NULL;
    }
    s->snap_tran = false;
    s->tran_iso = 0;
    s->tran_nddl = 0;
    gc(s->srv);
}

void sim_snap_ddl(sim_session *s, const char *tbl) {
    sim_vstore *vs = s->srv->vers;
    vtab *t = tab_find(vs, s->db, tbl, false);
    if (t) {
        t->dead = true; /* its versions describe rows of the old shape */
        if (t->nents == 0) tab_unlink(vs, t);
    }
    uint64_t ser = db_serial(vs, s->db);
    vddl *d = vs->ddls;
    while (d && !(d->db_serial == ser && mcdc_str_ieq(d->name, tbl))) d = d->next;
    if (!d && (d = mcdc_calloc(1, sizeof *d)) != NULL) {
        d->db_serial = ser;
        snprintf(d->name, sizeof d->name, "%s", tbl);
        d->next = vs->ddls;
        vs->ddls = d;
    }
    if (d) d->cseq = ++vs->cseq;
    if (s->trancount > 0 && !own_ddl(s, tbl) && s->tran_nddl < (int)(sizeof s->tran_ddl / sizeof s->tran_ddl[0]))
        snprintf(s->tran_ddl[s->tran_nddl++], SIM_NAME_MAX, "%s", tbl);
}

/* ---- ALTER DATABASE ------------------------------------------------------------ */
typedef struct alter_wait {
    sim_db *d;
    bool to_on;                    /* wait for the writers open then, else the snapshot transactions */
    sim_tran_ref refs[MCDC_SIM_SESSIONS_MAX];
    int n;
} alter_wait;

/* A blocker for sim_wait_while: the first transaction of the list still open. */
static sim_session *alter_blocker(sim_session *s, const void *arg) {
    const alter_wait *w = arg;
    for (int k = 0; k < w->n; k++) {
        sim_session *o = sim_tran_still_open(s, &w->refs[k]);
        if (o) return o;
    }
    return NULL;
}

static int alter_err(mcdc_error *err, const char *db) {
    return sim_err(err, 5011,
                   "User does not have permission to alter database '%s', the database does not exist, or the database"
                   " is not in a state that allows access checks.",
                   db);
}

int sim_do_alter_database(sim_stmt *x, const tsql_tok *t, int i, int end, mcdc_error *err) {
    sim_session *s = x->s;
    sim_server *srv = s->srv;
    char name[SIM_NAME_MAX] = "";
    int k = i + 2; /* ALTER DATABASE <name> */
    if (k >= end || sim_tok_ident(&t[k], name, sizeof name) != 0) return sim_syntax_err(err, t, k, end);
    k++;
    if (!s->admin) return alter_err(err, name);
    if (s->trancount > 0) return sim_err(err, 226, "ALTER DATABASE statement not allowed within multi-statement transaction.");
    /* SET ALLOW_SNAPSHOT_ISOLATION ON | OFF; other options are accepted */
    bool snap = k + 2 < end && tsql_tok_is(&t[k], "SET") && tsql_tok_is(&t[k + 1], "ALLOW_SNAPSHOT_ISOLATION");
    bool rcsi = k + 2 < end && tsql_tok_is(&t[k], "SET") && tsql_tok_is(&t[k + 1], "READ_COMMITTED_SNAPSHOT");
    if (rcsi && tsql_tok_is(&t[k + 2], "ON"))
        return sim_err(err, 50000, "the simulator does not model READ_COMMITTED_SNAPSHOT ON (its READ COMMITTED reads wait"
                                   " for writers); use SET TRANSACTION ISOLATION LEVEL SNAPSHOT");
    if (snap && !tsql_tok_is(&t[k + 2], "ON") && !tsql_tok_is(&t[k + 2], "OFF")) return sim_syntax_err(err, t, k + 2, end);
    pthread_mutex_lock(&srv->mu);
    sim_db *d = mcdc_str_ieq(name, "CURRENT") ? s->db : sim_find_db(srv, name);
    if (!d) {
        pthread_mutex_unlock(&srv->mu);
        return alter_err(err, name);
    }
    if (!snap) {
        pthread_mutex_unlock(&srv->mu);
        sim_send_done(x, 0, false, false);
        return MCDC_OK;
    }
    bool on = tsql_tok_is(&t[k + 2], "ON");
    int was = sim_snap_state(d);
    int rc = MCDC_OK;
    if ((on && was == SIM_SNAP_ON) || (!on && was == SIM_SNAP_OFF)) {
        pthread_mutex_unlock(&srv->mu);
        sim_send_done(x, 0, false, false);
        return MCDC_OK;
    }
    /* in transition until the transactions open now end: to ON, the writers
     * (their earlier changes have no versions); to OFF, the snapshot
     * transactions (they may still read versions) */
    alter_wait *w = mcdc_calloc(1, sizeof *w);
    if (!w) {
        pthread_mutex_unlock(&srv->mu);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    w->d = d;
    w->to_on = on;
    for (int q = 0; q < MCDC_SIM_SESSIONS_MAX; q++) {
        sim_session *o = srv->sessions[q];
        if (!o || o == s || o->trancount == 0) continue;
        bool wait = on ? o->tran_db == d : o->snap_tran && o->snap_db == d;
        if (wait) w->refs[w->n++] = (sim_tran_ref){o, o->descriptor};
    }
    d->snap_state = on ? SIM_SNAP_TO_ON : SIM_SNAP_TO_OFF;
    pthread_mutex_unlock(&srv->mu);
    rc = sim_wait_while(x, alter_blocker, w, err);
    pthread_mutex_lock(&srv->mu);
    if (rc == MCDC_OK) {
        d->snap_state = on ? SIM_SNAP_ON : SIM_SNAP_OFF;
        rc = sim_db_state_put(d, "allow_snapshot", on ? 1 : 0);
    } else {
        d->snap_state = was; /* the ALTER did not finish */
    }
    pthread_mutex_unlock(&srv->mu);
    mcdc_free(w);
    if (rc == MCDC_OK) sim_send_done(x, 0, false, false);
    return rc;
}
