/*
 * sim_work.c - the workload generator (EXEC sim.workload) and the bulk
 * loader (EXEC sim.bulk_load).
 *
 * sim.workload @table, @tps, @seconds, @mix = 'insert=0.5,update=0.35,delete=0.15',
 *   @max_statements = 4, @seed = 42 [, @wait = 1]
 *   Transactions of 1..max_statements inserts/updates/deletes on a table
 *   with a single integer primary key, at about @tps transactions per
 *   second of real time, for @seconds, through the ordinary T-SQL paths (a
 *   background session per workload; @wait = 1 runs it in the caller).
 *   The statement sequence is a pure function of @seed and the table's
 *   starting key range; only the timing is not.
 * sim.bulk_load @capture_instance, @transactions, @rows_per_tx, @seed
 *   Writes change rows and mapping entries straight into cdc.[<ci>_CT] and
 *   cdc.lsn_time_mapping in one SQLite transaction (the source table is not
 *   touched): fast setup for benchmarks. Operations: ~60% inserts, ~30%
 *   updates (3/4 pairs), ~10% deletes; commit times 10 ms apart ending near
 *   the server clock, after any existing entry.
 * sim.bulk_load_table @table, @rows, @seed [, @first_key]
 *   Appends @rows rows to a base table in one SQLite transaction: the key
 *   (the first column of the primary key, an integer) ascending from
 *   @first_key (default: one past the largest, or 1), every other column a
 *   value of its type that is a pure function of @seed and the row (NULL in
 *   about one of five rows of a nullable column; dates around 2026-01-01).
 *   No change rows, no LSN: the rows are as if they had been there before
 *   CDC was enabled, and only a snapshot brings them into the lake. The
 *   table store gets the same rows from a second generator thread. Refused
 *   inside a transaction and while another session has one open in the
 *   database or any snapshot is active (the load keeps no row versions).
 */
#include "sim_engine_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORK_STATEMENTS_MAX 64
#define WORK_TABLES_MAX 1024 /* tables of one workload */
#define BULK_ROWS_MAX MCDC_SIM_BULK_ROWS_MAX

typedef struct rng { uint64_t s; } rng;
static uint64_t rnd(rng *r) {
    /* splitmix64: reproducible and cheap */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double rnd01(rng *r) { return (double)(rnd(r) >> 11) / 9007199254740992.0; }

static const char *WORDS[] = {"alpha", "Zoë", "ação", "straße", "東京", "naïve", "Ωmega", "crème", "øre", "日本語"};

/* A generated value of type t (bulk path), exactly what is bound: the
 * change table's affinity keeps it as is. buf (BULK_CELL_BYTES, the
 * column's own) holds text and bytes until the row is written. */
#define BULK_CELL_BYTES 512
static void gen_value(sim_value *v, const sim_type *t, bool nullable, rng *r, int64_t key, int64_t base_us, char *buf) {
    memset(v, 0, sizeof *v);
    if (nullable && rnd(r) % 5 == 0) return; /* NULL */
    v->kind = SIM_V_INT;
    switch (t->id) {
    case SIM_T_BIT: v->i = (int64_t)(rnd(r) & 1); break;
    case SIM_T_TINYINT: v->i = (int64_t)(rnd(r) % 256); break;
    case SIM_T_SMALLINT: v->i = (int64_t)(rnd(r) % 65536) - 32768; break;
    case SIM_T_INT: v->i = key; break;
    case SIM_T_BIGINT: v->i = (int64_t)(rnd(r) >> 1) - (INT64_MAX / 2); break;
    case SIM_T_REAL: case SIM_T_FLOAT: v->kind = SIM_V_REAL; v->f = rnd01(r) * 1e6; break;
    case SIM_T_DECIMAL: case SIM_T_MONEY: case SIM_T_SMALLMONEY: {
        /* digits by hand: printf per value halves the load rate */
        int ip = t->precision - t->scale;
        if (ip > 12) ip = 12;
        if (ip < 1) ip = 1;
        uint64_t x = rnd(r);
        int o = 0;
        if (x & 1) buf[o++] = '-';
        int nd = 1 + (int)((x >> 1) % (uint64_t)ip);
        uint64_t y = rnd(r);
        buf[o++] = (char)('1' + y % 9);
        for (int k = 1; k < nd; k++) { y /= 10; buf[o++] = (char)('0' + y % 10); }
        if (t->scale > 0) {
            buf[o++] = '.';
            uint64_t z = rnd(r);
            for (int k = 0; k < t->scale && o < 120; k++) { buf[o++] = (char)('0' + z % 10); z /= 10; if (!z) z = rnd(r); }
        }
        v->kind = SIM_V_TEXT;
        v->p = (const uint8_t *)buf;
        v->n = (size_t)o;
        break;
    }
    case SIM_T_DATE: case SIM_T_DATETIME: case SIM_T_SMALLDATETIME: case SIM_T_DATETIME2: case SIM_T_DATETIMEOFFSET: case SIM_T_TIME: {
        int64_t us = base_us - (int64_t)(rnd(r) % (86400ULL * 365 * 1000000));
        sim_type tt = *t;
        if (t->id == SIM_T_DATETIMEOFFSET || t->id == SIM_T_TIME) tt.id = SIM_T_DATETIME2;
        sim_format_datetime(us, &tt, buf);
        if (t->id == SIM_T_DATE) buf[10] = 0;
        if (t->id == SIM_T_DATETIMEOFFSET) strcat(buf, " +00:00");
        v->kind = SIM_V_TEXT;
        v->p = (const uint8_t *)(t->id == SIM_T_TIME ? buf + 11 : buf);
        v->n = strlen((const char *)v->p);
        break;
    }
    case SIM_T_CHAR: case SIM_T_VARCHAR: case SIM_T_NCHAR: case SIM_T_NVARCHAR: {
        bool uni = t->id == SIM_T_NCHAR || t->id == SIM_T_NVARCHAR;
        int lim = t->length < 0 ? 200 : t->length;
        if (lim > 200) lim = 200;
        const char *w0 = uni ? WORDS[rnd(r) % 10] : "row";
        size_t wl = strlen(w0);
        memcpy(buf, w0, wl);
        int n = (int)wl;
        buf[n++] = '-';
        char num[24];
        int nn = 0;
        uint64_t kk = (uint64_t)(key < 0 ? -key : key);
        do { num[nn++] = (char)('0' + kk % 10); kk /= 10; } while (kk);
        while (nn) buf[n++] = num[--nn];
        uint64_t more = rnd(r);
        while (n + 12 < lim && (more & 3)) {
            const char *w1 = uni ? WORDS[(more >> 2) % 10] : "value";
            size_t l1 = strlen(w1);
            buf[n++] = ' ';
            memcpy(buf + n, w1, l1);
            n += (int)l1;
            more >>= 6;
        }
        buf[n] = 0;
        /* cut at a character boundary within the length (no more bytes
         * than the length: no more characters either) */
        int chars = 0, k = n <= lim ? n : 0;
        while (k < n && chars < lim) {
            k++;
            while (buf[k] && ((unsigned char)buf[k] & 0xC0) == 0x80) k++;
            chars++;
        }
        v->kind = SIM_V_TEXT;
        v->p = (const uint8_t *)buf;
        v->n = (size_t)k;
        break;
    }
    case SIM_T_BINARY: case SIM_T_VARBINARY: {
        int n = t->length > 0 && t->length < 64 ? t->length : 16;
        for (int k = 0; k < n; k++) buf[k] = (char)(uint8_t)rnd(r);
        v->kind = SIM_V_BLOB;
        v->p = (const uint8_t *)buf;
        v->n = (size_t)n;
        break;
    }
    case SIM_T_UNIQUEIDENTIFIER: {
        static const char HX[] = "0123456789ABCDEF";
        uint64_t a = rnd(r), b = rnd(r);
        int o = 0;
        for (int k = 0; k < 32; k++) {
            if (k == 8 || k == 12 || k == 16 || k == 20) buf[o++] = '-';
            uint64_t src = k < 16 ? a : b;
            buf[o++] = HX[(src >> (4 * (15 - k % 16))) & 15];
        }
        v->kind = SIM_V_TEXT;
        v->p = (const uint8_t *)buf;
        v->n = (size_t)o;
        break;
    }
    default: v->kind = SIM_V_NULL; break;
    }
}

/* Binds v at index i without a copy (v's bytes live until the step). */
static void bind_value(sqlite3_stmt *st, int i, const sim_value *v) {
    switch (v->kind) {
    case SIM_V_INT: sqlite3_bind_int64(st, i, v->i); break;
    case SIM_V_REAL: sqlite3_bind_double(st, i, v->f); break;
    case SIM_V_TEXT: sqlite3_bind_text(st, i, (const char *)v->p, (int)v->n, SQLITE_STATIC); break;
    case SIM_V_BLOB: sqlite3_bind_blob(st, i, v->p, (int)v->n, SQLITE_STATIC); break;
    default: sqlite3_bind_null(st, i); break;
    }
}

static int64_t arg_i64(const sim_proc_args *a, const char *name, int pos, int64_t dflt) {
    sqlite3_value *v = sim_arg(a, name, pos);
    if (!v || sqlite3_value_type(v) == SQLITE_NULL) return dflt;
    return sqlite3_value_int64(v);
}

/* ---- bulk load ------------------------------------------------------------- */
typedef struct sim_ckpt {
    pthread_t th;
    char path[1024];
    struct sim_ckpt *next;
} sim_ckpt;

static void *ckpt_main(void *arg) {
    mcdc_log_use(&g_sim_log_sink);
    sim_ckpt *k = arg;
    sqlite3 *c = NULL;
    if (sqlite3_open_v2(k->path, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(c, 10000);
        sqlite3_wal_checkpoint_v2(c, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    }
    sqlite3_close(c);
    return NULL;
}

/* Under srv->mu: a passive checkpoint of path on its own thread (joined by
 * sim_work_stop_all); done here and now when no thread can start. */
static void ckpt_start(sim_server *srv, const char *path) {
    sim_ckpt *k = mcdc_calloc(1, sizeof *k);
    if (k) snprintf(k->path, sizeof k->path, "%s", path);
    if (k && pthread_create(&k->th, NULL, ckpt_main, k) == 0) {
        k->next = srv->ckpts;
        srv->ckpts = k;
        return;
    }
    if (k) ckpt_main(k);
    mcdc_free(k);
}

#define BULK_SPACING_US 10000 /* commit times 10 ms apart */

/* What a bulk load writes: a pure function of this (the SQLite writer and
 * the change store's encoder each run the generator, on two threads). */
typedef struct bulk_spec {
    int nc;
    const sim_type *types;
    const bool *nul;
    int key_col;
    int64_t ntx, per, key0, now_local, t0;
    uint64_t seed, lsn0, tran0;
} bulk_spec;

typedef struct bulk_row {
    const uint8_t *cl, *sl, *mask; /* commit LSN, seqval, update mask */
    int mlen, op, cmd;
    const sim_value *gv;           /* the captured columns */
} bulk_row;

typedef struct bulk_tx {
    const uint8_t *cl, *bl, *tid;
    const char *bt, *et;
} bulk_tx;

typedef struct bulk_sink {
    void *ctx;
    int (*row)(void *ctx, const bulk_row *r);
    int (*tx)(void *ctx, const bulk_tx *t); /* may be NULL */
    _Atomic int *stop;                      /* may be NULL */
} bulk_sink;

/* Runs the load through k; the LSN and transaction counters it ends at.
 * cells: nc * BULK_CELL_BYTES, gv: nc values (the generator's own). */
static int bulk_generate(const bulk_spec *sp, const bulk_sink *k, char *cells, sim_value *gv, uint64_t *lsn_out,
                         uint64_t *tran_out, int64_t *rows) {
    rng r = {sp->seed};
    int nc = sp->nc, rc = MCDC_OK;
    int mlen = (nc + 7) / 8;
    uint8_t all[128], one[128];
    memset(all, 0, sizeof all);
    for (int c = 0; c < nc && c < 1024; c++) all[mlen - 1 - c / 8] |= (uint8_t)(1u << (c % 8));
    int64_t key = sp->key0;
    uint64_t lsn = sp->lsn0, tran = sp->tran0;
    sim_type dt = {SIM_T_DATETIME, 0, 3, 0};
    for (int64_t tx = 0; tx < sp->ntx && rc == MCDC_OK; tx++) {
        uint64_t begin = ++lsn;
        uint64_t first_seq = lsn + 1;
        int64_t rows_in = 0;
        int cmd = 0;
        /* seqvals first, commit LSN after them */
        uint64_t commit = first_seq + (uint64_t)sp->per + 1;
        uint8_t cl[10], sl[10];
        sim_lsn_bytes(commit, cl);
        while (rows_in < sp->per && rc == MCDC_OK) {
            if (k->stop && atomic_load(k->stop)) return MCDC_E_CANCELLED;
            uint64_t x = rnd(&r) % 10;
            int op = x < 6 ? 2 : x < 9 ? 3 : 1;
            if (op == 3 && rows_in + 2 > sp->per) op = 2;
            uint64_t seq = ++lsn;
            sim_lsn_bytes(seq, sl);
            cmd++;
            int64_t kv = op == 2 ? key++ : sp->key0 + (int64_t)(rnd(&r) % (uint64_t)(key - sp->key0 + 1));
            int nops = op == 3 ? 2 : 1;
            int upd_col = nc > 1 ? 1 + (int)(rnd(&r) % (uint64_t)(nc - 1)) : 0;
            memset(one, 0, sizeof one);
            one[mlen - 1 - upd_col / 8] |= (uint8_t)(1u << (upd_col % 8));
            for (int o = 0; o < nops && rc == MCDC_OK; o++) {
                for (int c = 0; c < nc; c++) {
                    if (c == sp->key_col) gv[c] = (sim_value){.kind = SIM_V_INT, .i = kv};
                    else gen_value(&gv[c], &sp->types[c], sp->nul[c], &r, kv, sp->now_local, cells + (size_t)c * BULK_CELL_BYTES);
                }
                bulk_row br = {cl, sl, op == 3 ? one : all, mlen, op + o, cmd, gv};
                rc = k->row(k->ctx, &br);
                rows_in++;
                if (rows) (*rows)++;
            }
        }
        lsn = commit > lsn ? commit : lsn;
        char bt[48], et[48];
        uint8_t bl[10], tid[10];
        sim_lsn_bytes(begin, bl);
        sim_lsn_bytes(++tran, tid);
        int64_t end_us = sp->t0 + (tx + 1) * BULK_SPACING_US;
        if (k->tx && rc == MCDC_OK) {
            sim_format_datetime(end_us - 2000, &dt, bt);
            sim_format_datetime(end_us, &dt, et);
            bulk_tx bx = {cl, bl, tid, bt, et};
            rc = k->tx(k->ctx, &bx);
        }
    }
    *lsn_out = lsn;
    *tran_out = tran;
    return rc;
}

/* SQLite: the change row, then the mapping entry per transaction. */
typedef struct bulk_sql {
    sqlite3_stmt *ins, *map;
    sqlite3 *w;
    mcdc_error *err;
    int first_col; /* parameter of the first captured column */
    int nc;
} bulk_sql;

static int bulk_sql_row(void *ctx, const bulk_row *r) {
    bulk_sql *q = ctx;
    sqlite3_stmt *ins = q->ins;
    sqlite3_reset(ins);
    sqlite3_bind_blob(ins, 1, r->cl, 10, SQLITE_STATIC);
    sqlite3_bind_blob(ins, 2, r->sl, 10, SQLITE_STATIC);
    sqlite3_bind_int(ins, 3, r->op);
    sqlite3_bind_blob(ins, 4, r->mask, r->mlen, SQLITE_STATIC);
    sqlite3_bind_int(ins, 5, r->cmd);
    for (int c = 0; c < q->nc; c++) bind_value(ins, q->first_col + c, &r->gv[c]);
    return sqlite3_step(ins) == SQLITE_DONE ? MCDC_OK : sim_sqlite_err(q->w, SQLITE_ERROR, q->err);
}

static int bulk_sql_tx(void *ctx, const bulk_tx *t) {
    bulk_sql *q = ctx;
    sqlite3_stmt *map = q->map;
    sqlite3_reset(map);
    sqlite3_bind_blob(map, 1, t->cl, 10, SQLITE_STATIC);
    sqlite3_bind_text(map, 2, t->bt, -1, SQLITE_STATIC);
    sqlite3_bind_text(map, 3, t->et, -1, SQLITE_STATIC);
    sqlite3_bind_blob(map, 4, t->tid, 10, SQLITE_STATIC);
    sqlite3_bind_blob(map, 5, t->bl, 10, SQLITE_STATIC);
    return sqlite3_step(map) == SQLITE_DONE ? MCDC_OK : sim_sqlite_err(q->w, SQLITE_ERROR, q->err);
}

/* The change store: the same rows in the change table's column order. */
typedef struct bulk_enc {
    pthread_t th;
    const bulk_spec *sp;
    sim_store_batch *batch;
    const int *bcol;
    sim_value *bvals;
    int bstart, bseq, bop, bmask, bcmd;
    _Atomic int stop;
    int rc;
} bulk_enc;

static int bulk_enc_row(void *ctx, const bulk_row *r) {
    bulk_enc *e = ctx;
    sim_value *v = e->bvals;
    v[e->bstart] = (sim_value){.kind = SIM_V_BLOB, .p = r->cl, .n = 10};
    v[e->bseq] = (sim_value){.kind = SIM_V_BLOB, .p = r->sl, .n = 10};
    v[e->bop] = (sim_value){.kind = SIM_V_INT, .i = r->op};
    v[e->bmask] = (sim_value){.kind = SIM_V_BLOB, .p = r->mask, .n = (size_t)r->mlen};
    v[e->bcmd] = (sim_value){.kind = SIM_V_INT, .i = r->cmd};
    for (int c = 0; c < e->sp->nc; c++) v[e->bcol[c]] = r->gv[c];
    return sim_store_batch_row(e->batch, v, NULL);
}

static void *bulk_enc_main(void *arg) {
    mcdc_log_use(&g_sim_log_sink);
    bulk_enc *e = arg;
    char *cells = mcdc_malloc((size_t)e->sp->nc * BULK_CELL_BYTES + 1);
    sim_value *gv = mcdc_calloc((size_t)e->sp->nc + 1, sizeof *gv);
    e->rc = MCDC_E_NOMEM;
    if (cells && gv) {
        bulk_sink k = {e, bulk_enc_row, NULL, &e->stop};
        uint64_t l, t;
        e->rc = bulk_generate(e->sp, &k, cells, gv, &l, &t, NULL);
    }
    mcdc_free(cells);
    mcdc_free(gv);
    return NULL;
}

int sim_work_bulk_load(sim_session *s, const sim_proc_args *a, int64_t *rows, mcdc_error *err) {
    const char *ci = sim_arg_text(a, "@capture_instance", 0);
    int64_t ntx = arg_i64(a, "@transactions", 1, 0), per = arg_i64(a, "@rows_per_tx", 2, 1);
    uint64_t seed = (uint64_t)arg_i64(a, "@seed", 3, 42);
    *rows = 0;
    if (!ci) return sim_err(err, 201, "sim.bulk_load expects @capture_instance");
    if (ntx < 0 || per < 1 || ntx * per > BULK_ROWS_MAX)
        return sim_err(err, 50000, "sim.bulk_load: @transactions * @rows_per_tx must be within 1..%lld", BULK_ROWS_MAX);
    sim_server *srv = s->srv;
    sim_db *d = s->db;
    pthread_mutex_lock(&srv->mu);
    sqlite3 *w = d->w;
    /* captured columns with types */
    char ct[SIM_NAME_MAX];
    snprintf(ct, sizeof ct, "cdc.%s_CT", ci);
    sqlite3_stmt *st;
    int nc = 0;
    char (*names)[SIM_NAME_MAX] = mcdc_calloc(MCDC_COLUMNS_MAX, SIM_NAME_MAX);
    sim_type *types = mcdc_calloc(MCDC_COLUMNS_MAX, sizeof *types);
    bool *nul = mcdc_calloc(MCDC_COLUMNS_MAX, sizeof *nul);
    char *cells = mcdc_malloc((size_t)MCDC_COLUMNS_MAX * BULK_CELL_BYTES);
    int rc = names && types && nul && cells ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int key_col = -1;
    if (rc == MCDC_OK && sqlite3_prepare_v2(w, "SELECT c.name, c.type, s.nullable, s.pk_ordinal FROM __sim_columns c"
                                               " JOIN \"cdc.change_tables\" t ON t.capture_instance = ?2"
                                               " LEFT JOIN __sim_columns s ON s.tbl = t.source_name AND s.name = c.name"
                                               " WHERE c.tbl = ?1 AND c.name NOT LIKE '\\_\\_$%' ESCAPE '\\' ORDER BY c.column_id",
                                            -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, ct, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, ci, -1, SQLITE_STATIC);
        while (sqlite3_step(st) == SQLITE_ROW && nc < MCDC_COLUMNS_MAX) {
            snprintf(names[nc], SIM_NAME_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
            const char *ty = (const char *)sqlite3_column_text(st, 1);
            sim_type_parse(&types[nc], ty, strlen(ty));
            nul[nc] = sqlite3_column_type(st, 2) == SQLITE_NULL || sqlite3_column_int(st, 2) != 0;
            if (sqlite3_column_int(st, 3) == 1) key_col = nc;
            nc++;
        }
        sqlite3_finalize(st);
    }
    if (rc == MCDC_OK && nc == 0) rc = sim_err(err, 22964, "The capture instance '%s' does not exist in the current database.", ci);
    mcdc_buf q = {0};
    sqlite3_stmt *ins = NULL, *map = NULL;
    if (rc == MCDC_OK) {
        mcdc_buf_printf(&q, NULL, "INSERT INTO \"%s\"(\"__$start_lsn\", \"__$seqval\", \"__$operation\", \"__$update_mask\", \"__$command_id\"", ct);
        for (int k = 0; k < nc; k++) mcdc_buf_printf(&q, NULL, ", \"%s\"", names[k]);
        mcdc_buf_append_str(&q, ") VALUES (?, ?, ?, ?, ?", NULL);
        for (int k = 0; k < nc; k++) mcdc_buf_append_str(&q, ", ?", NULL);
        mcdc_buf_append_str(&q, ")", NULL);
        mcdc_buf_cstr(&q, NULL);
        if (sqlite3_prepare_v2(w, (const char *)q.data, -1, &ins, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(w, "INSERT INTO \"cdc.lsn_time_mapping\" VALUES (?, ?, ?, ?, ?)", -1, &map, NULL) != SQLITE_OK)
            rc = sim_sqlite_err(w, SQLITE_ERROR, err);
    }
    mcdc_buf_free(&q);
    int64_t last_us = INT64_MIN, key0 = 1;
    if (rc == MCDC_OK && sqlite3_prepare_v2(w, "SELECT max(tran_end_time) FROM \"cdc.lsn_time_mapping\"", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_TEXT) {
            const char *t = (const char *)sqlite3_column_text(st, 0);
            mcdc_parse_ts_us(t, strlen(t), &last_us, NULL);
        }
        sqlite3_finalize(st);
    }
    if (rc == MCDC_OK && key_col >= 0) {
        char *kq = sqlite3_mprintf("SELECT coalesce(max(\"%w\"), 0) + 1 FROM \"%w\"", names[key_col], ct);
        if (kq && sqlite3_prepare_v2(w, kq, -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW) key0 = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        }
        sqlite3_free(kq);
    }
    /* the change store gets the rows after the COMMIT (sim_store.h) */
    sim_store_batch *batch = NULL;
    bool was_empty = false;
    int *bcol = NULL; /* store column of each generated column */
    int bstart = -1, bseq = -1, bop = -1, bmask = -1, bcmd = -1;
    sim_value *bvals = NULL;
    if (rc == MCDC_OK) {
        char *eq = sqlite3_mprintf("SELECT NOT EXISTS (SELECT 1 FROM \"%w\")", ct);
        if (eq && sqlite3_prepare_v2(w, eq, -1, &st, NULL) == SQLITE_OK) {
            was_empty = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1;
            sqlite3_finalize(st);
        }
        sqlite3_free(eq);
        rc = sim_store_batch_begin(&batch, srv->stores, w, d->name, ci, err);
    }
    if (rc == MCDC_OK && batch) {
        bstart = sim_store_batch_col(batch, "__$start_lsn");
        bseq = sim_store_batch_col(batch, "__$seqval");
        bop = sim_store_batch_col(batch, "__$operation");
        bmask = sim_store_batch_col(batch, "__$update_mask");
        bcmd = sim_store_batch_col(batch, "__$command_id");
        bcol = mcdc_calloc((size_t)nc + 1, sizeof *bcol);
        bvals = mcdc_calloc(MCDC_COLUMNS_MAX, sizeof *bvals);
        for (int c = 0; bcol && c < nc; c++) bcol[c] = sim_store_batch_col(batch, names[c]);
        bool all = bcol && bvals && bstart >= 0 && bseq >= 0 && bop >= 0 && bmask >= 0 && bcmd >= 0;
        for (int c = 0; all && c < nc; c++) all = bcol[c] >= 0;
        if (!all) { sim_store_batch_free(batch); batch = NULL; }
    }
    d->auth.trusted = true; /* the store hears of these rows from the batch */
    sim_value *gv = mcdc_calloc((size_t)nc + 1, sizeof *gv);
    if (rc == MCDC_OK && !gv) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    bulk_spec sp = {nc, types, nul, key_col, ntx, per, key0, 0, 0, seed, d->lsn, d->tran_seq};
    sp.now_local = sim_srv_local_us(srv, sim_srv_utc_us(srv));
    sp.t0 = sp.now_local - ntx * BULK_SPACING_US;
    if (last_us != INT64_MIN && sp.t0 < last_us) sp.t0 = last_us;
    /* the change store's rows are encoded on a second thread from the same
     * generator while this one writes SQLite */
    bulk_enc enc = {.sp = &sp, .batch = batch, .bcol = bcol, .bvals = bvals,
                    .bstart = bstart, .bseq = bseq, .bop = bop, .bmask = bmask, .bcmd = bcmd};
    bool enc_started = false;
    if (rc == MCDC_OK) rc = sim_sql(w, err, "BEGIN IMMEDIATE");
    if (rc == MCDC_OK && batch) enc_started = pthread_create(&enc.th, NULL, bulk_enc_main, &enc) == 0;
    if (rc == MCDC_OK && batch && !enc_started) { sim_store_batch_free(batch); batch = enc.batch = NULL; }
    if (rc == MCDC_OK) {
        bulk_sql sq = {ins, map, w, err, 6, nc};
        bulk_sink k = {&sq, bulk_sql_row, bulk_sql_tx, NULL};
        uint64_t lsn = 0, tran = 0;
        /* the connection's mutex held once for the whole load, not per
         * bind and step (w is ours: the server mutex is held) */
        sqlite3_mutex_enter(sqlite3_db_mutex(w));
        rc = bulk_generate(&sp, &k, cells, gv, &lsn, &tran, rows);
        sqlite3_mutex_leave(sqlite3_db_mutex(w));
        if (rc != MCDC_OK) atomic_store(&enc.stop, 1);
        d->lsn = lsn;
        d->tran_seq = tran;
        if (rc == MCDC_OK) rc = sim_db_state_put(d, "lsn", (int64_t)d->lsn);
        if (rc == MCDC_OK) rc = sim_db_state_put(d, "tran_seq", (int64_t)d->tran_seq);
        if (enc_started) {
            pthread_join(enc.th, NULL);
            enc_started = false;
            if (enc.rc != MCDC_OK) { sim_store_batch_free(batch); batch = NULL; }
        }
        if (rc == MCDC_OK) rc = sim_sql(w, err, "COMMIT");
        else sqlite3_exec(w, "ROLLBACK", NULL, NULL, NULL);
        if (rc == MCDC_OK) {
            sim_store_batch_publish(batch, was_empty);
            batch = NULL;
        }
        /* move the loaded pages from the WAL into the database file, on
         * another connection in the background: readers then find them
         * without a WAL index lookup per page */
        if (rc == MCDC_OK) ckpt_start(srv, d->path);
    }
    if (enc_started) {
        atomic_store(&enc.stop, 1);
        pthread_join(enc.th, NULL);
    }
    d->auth.trusted = false;
    sim_store_batch_free(batch);
    mcdc_free(bcol);
    mcdc_free(bvals);
    mcdc_free(gv);
    sqlite3_finalize(ins);
    sqlite3_finalize(map);
    pthread_mutex_unlock(&srv->mu);
    mcdc_free(names);
    mcdc_free(types);
    mcdc_free(nul);
    mcdc_free(cells);
    return rc;
}

/* ---- bulk load of a base table ------------------------------------------------ */
/* Dates of generated rows: around 2026-01-01 00:00:00, whatever the clock
 * (the rows are a pure function of the seed). */
#define TLOAD_BASE_US (1767225600LL * 1000000)

typedef struct tload_spec {
    int nc;
    const sim_col_def *cols;
    int key_col; /* -1: none */
    int64_t rows, key0;
    uint64_t seed;
} tload_spec;

/* Runs the rows through row(ctx, vals) in order; stops early on a non-zero
 * return or *stop. cells: nc * BULK_CELL_BYTES; v: nc values. */
static int tload_generate(const tload_spec *sp, int (*row)(void *ctx, const sim_value *v), void *ctx, _Atomic int *stop,
                          char *cells, sim_value *v) {
    rng r = {sp->seed};
    int rc = MCDC_OK;
    for (int64_t i = 0; i < sp->rows && rc == MCDC_OK; i++) {
        if (stop && (i & 4095) == 0 && atomic_load(stop)) return MCDC_E_CANCELLED;
        int64_t key = sp->key0 + i;
        for (int c = 0; c < sp->nc; c++) {
            if (c == sp->key_col) v[c] = (sim_value){.kind = SIM_V_INT, .i = key};
            else gen_value(&v[c], &sp->cols[c].type, sp->cols[c].nullable, &r, key, TLOAD_BASE_US,
                           cells + (size_t)c * BULK_CELL_BYTES);
        }
        rc = row(ctx, v);
    }
    return rc;
}

typedef struct tload_sql {
    sqlite3 *w;
    sqlite3_stmt *ins;
    int nc;
    mcdc_error *err;
    int64_t rows;
} tload_sql;

static int tload_sql_row(void *ctx, const sim_value *v) {
    tload_sql *q = ctx;
    sqlite3_reset(q->ins);
    for (int c = 0; c < q->nc; c++) bind_value(q->ins, c + 1, &v[c]);
    if (sqlite3_step(q->ins) != SQLITE_DONE) return sim_sqlite_err(q->w, SQLITE_ERROR, q->err);
    q->rows++;
    return MCDC_OK;
}

typedef struct tload_enc {
    pthread_t th;
    const tload_spec *sp;
    sim_store_batch *batch;
    _Atomic int stop;
    int rc;
} tload_enc;

static int tload_enc_row(void *ctx, const sim_value *v) { return sim_store_batch_row(((tload_enc *)ctx)->batch, v, NULL); }

static void *tload_enc_main(void *arg) {
    mcdc_log_use(&g_sim_log_sink);
    tload_enc *e = arg;
    char *cells = mcdc_malloc((size_t)e->sp->nc * BULK_CELL_BYTES + 1);
    sim_value *v = mcdc_calloc((size_t)e->sp->nc + 1, sizeof *v);
    e->rc = cells && v ? tload_generate(e->sp, tload_enc_row, e, &e->stop, cells, v) : MCDC_E_NOMEM;
    mcdc_free(cells);
    mcdc_free(v);
    return NULL;
}

static bool int_type(sim_type_id id) {
    return id == SIM_T_TINYINT || id == SIM_T_SMALLINT || id == SIM_T_INT || id == SIM_T_BIGINT;
}

static int64_t int_type_max(sim_type_id id) {
    return id == SIM_T_TINYINT ? 255 : id == SIM_T_SMALLINT ? 32767 : id == SIM_T_INT ? INT32_MAX : INT64_MAX;
}

static int64_t int_type_min(sim_type_id id) {
    return id == SIM_T_TINYINT ? 0 : id == SIM_T_SMALLINT ? -32768 : id == SIM_T_INT ? INT32_MIN : INT64_MIN;
}

/* Under mu: why the load cannot run now (another session's open
 * transaction in d, or an active snapshot), or NULL. */
static const char *tload_busy(sim_session *s) {
    for (int k = 0; k < MCDC_SIM_SESSIONS_MAX; k++) {
        sim_session *o = s->srv->sessions[k];
        if (!o || o == s) continue;
        if (o->trancount > 0 && o->tran_db == s->db) return "another session has a transaction open in the database";
        if (o->snap_tran || o->snap_stmt) return "a snapshot transaction is active (the load keeps no row versions)";
    }
    return NULL;
}

int sim_work_bulk_load_table(sim_session *s, const sim_proc_args *a, int64_t *rows, mcdc_error *err) {
    const char *table = sim_arg_text(a, "@table", 0);
    int64_t n = arg_i64(a, "@rows", 1, -1);
    uint64_t seed = (uint64_t)arg_i64(a, "@seed", 2, 42);
    sqlite3_value *fk = sim_arg(a, "@first_key", 3);
    *rows = 0;
    if (!table) return sim_err(err, 201, "Procedure or function 'bulk_load_table' expects parameter '@table', which was not supplied.");
    if (n < 0 || n > BULK_ROWS_MAX)
        return sim_err(err, 50000, "sim.bulk_load_table: @rows must be within 0..%lld (got %lld)", BULK_ROWS_MAX, (long long)n);
    if (s->trancount > 0) return sim_err(err, 50000, "sim.bulk_load_table cannot run inside a transaction");
    char tbl[SIM_NAME_MAX * 2], parts[4][MCDC_IDENT_BYTES_MAX];
    tsql_tok *t = NULL;
    int nt = 0, i = 0;
    if (tsql_lex(&t, &nt, table, strlen(table), err) != MCDC_OK) return MCDC_E_SERVER;
    int np = xl_name_parts(t, &i, nt, parts);
    mcdc_free(t);
    if (np == 0 || np > 2) return sim_err(err, 208, "Invalid object name '%s'.", table);
    xl_table_name(parts, np, tbl, sizeof tbl);
    sim_server *srv = s->srv;
    sim_db *d = s->db;
    pthread_mutex_lock(&srv->mu);
    sqlite3 *w = d->w;
    int rc = MCDC_OK;
    const char *busy = tload_busy(s);
    if (sim_ci_prefix(tbl, "sys.") || sim_ci_prefix(tbl, "cdc.") || !sim_table_exists(w, tbl))
        rc = sim_err(err, 208, "Invalid object name '%s'.", table);
    else if (busy)
        rc = sim_err(err, 50000, "sim.bulk_load_table: %s; run it when no other transaction is open", busy);
    sim_col_def *cols = NULL;
    int nc = 0;
    if (rc == MCDC_OK) rc = sim_load_cols(w, tbl, &cols, &nc, err);
    int key_col = -1;
    for (int c = 0; rc == MCDC_OK && c < nc; c++)
        if (cols[c].pk_ordinal == 1) key_col = c;
    if (rc == MCDC_OK && key_col >= 0 && !int_type(cols[key_col].type.id))
        rc = sim_err(err, 50000, "sim.bulk_load_table: the primary key of %s starts with '%s', not an integer column", tbl,
                     cols[key_col].name);
    int64_t key0 = 1;
    if (rc == MCDC_OK && key_col >= 0) {
        if (fk && sqlite3_value_type(fk) != SQLITE_NULL) key0 = sqlite3_value_int64(fk);
        else {
            char *q = sqlite3_mprintf("SELECT coalesce(max(\"%w\"), 0) + 1 FROM \"%w\"", cols[key_col].name, tbl);
            sqlite3_stmt *st = NULL;
            if (q && sqlite3_prepare_v2(w, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
                key0 = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
            sqlite3_free(q);
        }
        sim_type_id id = cols[key_col].type.id;
        if (key0 < int_type_min(id) || (n > 0 && key0 > int_type_max(id) - (n - 1)))
            rc = sim_err(err, 50000, "sim.bulk_load_table: keys %lld.. of %lld rows do not fit column '%s'", (long long)key0,
                         (long long)n, cols[key_col].name);
    }
    bool was_empty = false;
    sqlite3_stmt *ins = NULL;
    mcdc_buf q = {0};
    if (rc == MCDC_OK) {
        char *eq = sqlite3_mprintf("SELECT NOT EXISTS (SELECT 1 FROM \"%w\")", tbl);
        sqlite3_stmt *st = NULL;
        if (eq && sqlite3_prepare_v2(w, eq, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            was_empty = sqlite3_column_int(st, 0) == 1;
        sqlite3_finalize(st);
        sqlite3_free(eq);
        mcdc_buf_printf(&q, NULL, "INSERT INTO \"%s\"(", tbl);
        for (int c = 0; c < nc; c++) mcdc_buf_printf(&q, NULL, "%s\"%s\"", c ? ", " : "", cols[c].name);
        mcdc_buf_append_str(&q, ") VALUES (", NULL);
        for (int c = 0; c < nc; c++) mcdc_buf_append_str(&q, c ? ", ?" : "?", NULL);
        mcdc_buf_append_str(&q, ")", NULL);
        rc = mcdc_buf_cstr(&q, err);
    }
    d->auth.trusted = true; /* the table store hears of the load below */
    if (rc == MCDC_OK && sqlite3_prepare_v2(w, (const char *)q.data, -1, &ins, NULL) != SQLITE_OK)
        rc = sim_sqlite_err(w, SQLITE_ERROR, err);
    sim_store_batch *batch = NULL;
    if (rc == MCDC_OK && was_empty) rc = sim_tstore_batch_begin(&batch, srv->stores, w, d->name, tbl, err);
    tload_spec sp = {nc, cols, key_col, n, key0, seed};
    tload_enc enc = {.sp = &sp, .batch = batch};
    bool enc_started = false;
    char *cells = mcdc_malloc((size_t)(nc ? nc : 1) * BULK_CELL_BYTES);
    sim_value *v = mcdc_calloc((size_t)nc + 1, sizeof *v);
    if (rc == MCDC_OK && (!cells || !v)) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    /* a larger page cache while the load runs: fewer pages spilled to the
     * WAL before the commit writes them anyway */
    if (rc == MCDC_OK) (void)sqlite3_exec(w, "PRAGMA cache_size = -524288", NULL, NULL, NULL);
    if (rc == MCDC_OK) rc = sim_sql(w, err, "BEGIN IMMEDIATE");
    if (rc == MCDC_OK) {
        /* the table store's rows are encoded on a second thread from the
         * same generator while this one writes SQLite */
        if (batch) enc_started = pthread_create(&enc.th, NULL, tload_enc_main, &enc) == 0;
        if (batch && !enc_started) {
            sim_store_batch_free(batch);
            batch = enc.batch = NULL;
        }
        tload_sql sq = {w, ins, nc, err, 0};
        sqlite3_mutex_enter(sqlite3_db_mutex(w)); /* w is ours: the server mutex is held */
        rc = tload_generate(&sp, tload_sql_row, &sq, NULL, cells, v);
        sqlite3_mutex_leave(sqlite3_db_mutex(w));
        if (rc != MCDC_OK) atomic_store(&enc.stop, 1);
        if (enc_started) {
            pthread_join(enc.th, NULL);
            enc_started = false;
            if (enc.rc != MCDC_OK) {
                sim_store_batch_free(batch);
                batch = NULL;
            }
        }
        if (rc == MCDC_OK) rc = sim_sql(w, err, "COMMIT");
        else sqlite3_exec(w, "ROLLBACK", NULL, NULL, NULL);
        if (rc == MCDC_OK) {
            *rows = sq.rows;
            sim_tstore_wrote(srv->stores, d->name, tbl); /* its write count moves, then the rows are its store */
            sim_store_batch_publish(batch, was_empty);
            batch = NULL;
            ckpt_start(srv, d->path);
        }
    }
    d->auth.trusted = false;
    (void)sqlite3_exec(w, "PRAGMA cache_size = -65536", NULL, NULL, NULL); /* the writer's usual cache */
    sim_store_batch_free(batch);
    sqlite3_finalize(ins);
    pthread_mutex_unlock(&srv->mu);
    mcdc_buf_free(&q);
    mcdc_free(cols);
    mcdc_free(cells);
    mcdc_free(v);
    return rc;
}

/* ---- workload -------------------------------------------------------------- */
/* One table of a workload: its columns and key range. */
typedef struct wtable {
    char table[SIM_NAME_MAX * 2];
    char qtable[SIM_NAME_MAX * 2 + 8]; /* [schema].[name] for the T-SQL text */
    struct wcol { char name[SIM_NAME_MAX]; sim_type t; bool pk; } *cols; /* owned */
    int nc, key;
    int64_t kmin, knext;
} wtable;

typedef struct sim_worker {
    pthread_t th;
    sim_server *srv;
    char db[SIM_NAME_MAX];
    wtable *tables; /* owned; transactions go to them in turn */
    int ntables;
    double tps, seconds, p_ins, p_upd;
    int max_statements;
    uint64_t seed;
    _Atomic int stop;
    _Atomic int done;
    struct sim_worker *next;
} sim_worker;

static int null_columns(void *c, const sim_column *k, int n) { (void)c; (void)k; (void)n; return 0; }
static int null_row(void *c, const sim_value *v, int n) { (void)c; (void)v; (void)n; return 0; }
static int null_done(void *c, int64_t r, bool h, bool p, bool e) { (void)c; (void)r; (void)h; (void)p; (void)e; return 0; }
static int null_msg(void *c, bool e, int n, int s, int k, const char *t, const char *p, int l) {
    (void)c; (void)s; (void)k; (void)p; (void)l;
    if (e && n != 2627) mcdc_log(MCDC_LOG_WARN, "sim.workload: error %d: %s", n, t);
    return 0;
}
static int null_db(void *c, const char *a, const char *b) { (void)c; (void)a; (void)b; return 0; }

/* SQL literal of a generated value for a column type. */
static void gen_literal(mcdc_buf *b, const sim_type *t, rng *r, int64_t key) {
    /* reuse bind_gen through a scratch statement would cost a prepare per value;
     * literals keep the T-SQL path honest (it parses what a client would send) */
    switch (t->id) {
    case SIM_T_BIT: mcdc_buf_printf(b, NULL, "%d", (int)(rnd(r) & 1)); break;
    case SIM_T_TINYINT: mcdc_buf_printf(b, NULL, "%d", (int)(rnd(r) % 256)); break;
    case SIM_T_SMALLINT: mcdc_buf_printf(b, NULL, "%d", (int)(rnd(r) % 32767)); break;
    case SIM_T_INT: mcdc_buf_printf(b, NULL, "%lld", (long long)(rnd(r) % 1000000)); break;
    case SIM_T_BIGINT: mcdc_buf_printf(b, NULL, "%lld", (long long)(rnd(r) >> 2)); break;
    case SIM_T_REAL: case SIM_T_FLOAT: mcdc_buf_printf(b, NULL, "%.6f", rnd01(r) * 1000); break;
    case SIM_T_DECIMAL: case SIM_T_MONEY: case SIM_T_SMALLMONEY: {
        int ip = t->precision - t->scale;
        uint64_t m = 1;
        for (int k = 0; k < ip && k < 12; k++) m *= 10;
        mcdc_buf_printf(b, NULL, "%llu.%02llu", (unsigned long long)(rnd(r) % m), (unsigned long long)(rnd(r) % 100));
        break;
    }
    case SIM_T_DATE: mcdc_buf_printf(b, NULL, "'2024-%02d-%02d'", (int)(rnd(r) % 12) + 1, (int)(rnd(r) % 28) + 1); break;
    case SIM_T_TIME: mcdc_buf_printf(b, NULL, "'%02d:%02d:%02d'", (int)(rnd(r) % 24), (int)(rnd(r) % 60), (int)(rnd(r) % 60)); break;
    case SIM_T_DATETIME: case SIM_T_SMALLDATETIME: case SIM_T_DATETIME2: case SIM_T_DATETIMEOFFSET:
        mcdc_buf_printf(b, NULL, "'2024-%02d-%02d %02d:%02d:%02d.%03d'", (int)(rnd(r) % 12) + 1, (int)(rnd(r) % 28) + 1,
                        (int)(rnd(r) % 24), (int)(rnd(r) % 60), (int)(rnd(r) % 60), (int)(rnd(r) % 1000));
        break;
    case SIM_T_CHAR: case SIM_T_VARCHAR: case SIM_T_NCHAR: case SIM_T_NVARCHAR: {
        bool uni = t->id == SIM_T_NCHAR || t->id == SIM_T_NVARCHAR;
        char s[64];
        int n = snprintf(s, sizeof s, "%s-%lld", uni ? WORDS[rnd(r) % 10] : "v", (long long)key);
        int lim = t->length < 0 ? 60 : t->length;
        int chars = 0, k = 0;
        while (k < n && chars < lim) {
            k++;
            while (k < n && ((unsigned char)s[k] & 0xC0) == 0x80) k++;
            chars++;
        }
        mcdc_buf_printf(b, NULL, "%s'%.*s'", uni ? "N" : "", k, s);
        break;
    }
    case SIM_T_BINARY: case SIM_T_VARBINARY: {
        int n = t->length > 0 && t->length < 16 ? t->length : 16;
        mcdc_buf_append_str(b, "0x", NULL);
        for (int k = 0; k < n; k++) mcdc_buf_printf(b, NULL, "%02X", (unsigned)(rnd(r) & 0xFF));
        break;
    }
    case SIM_T_UNIQUEIDENTIFIER: {
        uint64_t a = rnd(r), c = rnd(r);
        mcdc_buf_printf(b, NULL, "'%08llX-%04llX-%04llX-%04llX-%012llX'", (unsigned long long)(a >> 32),
                        (unsigned long long)((a >> 16) & 0xFFFF), (unsigned long long)(a & 0xFFFF),
                        (unsigned long long)(c >> 48), (unsigned long long)(c & 0xFFFFFFFFFFFFULL));
        break;
    }
    default: mcdc_buf_append_str(b, "NULL", NULL); break;
    }
}

/* Loads table t's columns and key range (under mu); false: no integer key. */
static bool wtable_load(sqlite3 *w, wtable *t) {
    sqlite3_stmt *st;
    t->key = -1;
    t->kmin = t->knext = 1;
    t->cols = mcdc_calloc(MCDC_COLUMNS_MAX, sizeof *t->cols);
    if (!t->cols) return false;
    /* computed columns are never written */
    if (sqlite3_prepare_v2(w, "SELECT name, type, pk_ordinal FROM __sim_columns c WHERE tbl = ?1 AND NOT EXISTS"
                              " (SELECT 1 FROM __sim_computed k WHERE k.tbl = ?1 AND k.name = c.name) ORDER BY column_id",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, t->table, -1, SQLITE_STATIC);
        while (sqlite3_step(st) == SQLITE_ROW && t->nc < MCDC_COLUMNS_MAX) {
            struct wcol *c = &t->cols[t->nc];
            snprintf(c->name, SIM_NAME_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
            const char *ty = (const char *)sqlite3_column_text(st, 1);
            sim_type_parse(&c->t, ty, strlen(ty));
            c->pk = sqlite3_column_int(st, 2) == 1;
            if (c->pk) t->key = t->nc;
            t->nc++;
        }
        sqlite3_finalize(st);
    }
    if (t->key < 0) return false;
    const char *k = t->cols[t->key].name;
    char *q = sqlite3_mprintf("SELECT coalesce(min(\"%w\"), 1), coalesce(max(\"%w\"), 0) + 1 FROM \"%w\"", k, k, t->table);
    if (q && sqlite3_prepare_v2(w, q, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            t->kmin = sqlite3_column_int64(st, 0);
            t->knext = sqlite3_column_int64(st, 1);
        }
        sqlite3_finalize(st);
    }
    sqlite3_free(q);
    return true;
}

/* Appends one transaction's statements on table t to b. */
static void gen_tx(const sim_worker *wk, wtable *t, rng *r, mcdc_buf *b) {
    int nst = 1 + (int)(rnd(r) % (uint64_t)(wk->max_statements > 0 ? wk->max_statements : 1));
    for (int k = 0; k < nst; k++) {
        double x = rnd01(r);
        if (x < wk->p_ins || t->knext <= t->kmin) {
            int64_t id = t->knext++;
            mcdc_buf_printf(b, NULL, " INSERT INTO %s (", t->qtable);
            for (int c = 0; c < t->nc; c++) mcdc_buf_printf(b, NULL, "%s[%s]", c ? ", " : "", t->cols[c].name);
            mcdc_buf_append_str(b, ") VALUES (", NULL);
            for (int c = 0; c < t->nc; c++) {
                if (c) mcdc_buf_append_str(b, ", ", NULL);
                if (c == t->key) mcdc_buf_printf(b, NULL, "%lld", (long long)id);
                else gen_literal(b, &t->cols[c].t, r, id);
            }
            mcdc_buf_append_str(b, ");", NULL);
            continue;
        }
        int64_t id = t->kmin + (int64_t)(rnd(r) % (uint64_t)(t->knext - t->kmin));
        const char *key = t->cols[t->key].name;
        if (x < wk->p_ins + wk->p_upd && t->nc > 1) {
            int c = (int)(rnd(r) % (uint64_t)t->nc);
            if (c == t->key) c = (c + 1) % t->nc;
            mcdc_buf_printf(b, NULL, " UPDATE %s SET [%s] = ", t->qtable, t->cols[c].name);
            gen_literal(b, &t->cols[c].t, r, id);
            mcdc_buf_printf(b, NULL, " WHERE [%s] = %lld;", key, (long long)id);
        } else {
            mcdc_buf_printf(b, NULL, " DELETE FROM %s WHERE [%s] = %lld;", t->qtable, key, (long long)id);
        }
    }
}

static void *worker_main(void *arg) {
    mcdc_log_use(&g_sim_log_sink);
    sim_worker *wk = arg;
    sim_server *srv = wk->srv;
    sim_session *s = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    if (sim_login_trusted(srv, &s, "sa", wk->db, &err) != MCDC_OK) {
        mcdc_log(MCDC_LOG_ERROR, "sim.workload: %s", err.message);
        wk->done = 1;
        return NULL;
    }
    bool ok = true;
    pthread_mutex_lock(&srv->mu);
    for (int k = 0; k < wk->ntables && ok; k++)
        if (!wtable_load(s->db->w, &wk->tables[k])) {
            mcdc_log(MCDC_LOG_ERROR, "sim.workload: table %s needs an integer primary key", wk->tables[k].table);
            ok = false;
        }
    pthread_mutex_unlock(&srv->mu);
    rng r = {wk->seed};
    sim_sink sink = {NULL, null_columns, null_row, null_done, null_msg, null_db, NULL, NULL, NULL, NULL, NULL};
    int64_t start = mcdc_monotonic_us(), ntx = 0;
    int64_t total = ok ? (int64_t)(wk->tps * wk->seconds) : 0;
    mcdc_buf b = {0};
    while (!wk->stop && ntx < total) {
        int64_t due = start + (int64_t)((double)ntx * 1e6 / wk->tps);
        int64_t now = mcdc_monotonic_us();
        if (due > now) mcdc_sleep_ms((due - now) / 1000);
        mcdc_buf_reset(&b);
        mcdc_buf_append_str(&b, "BEGIN TRAN;", NULL);
        gen_tx(wk, &wk->tables[ntx % wk->ntables], &r, &b);
        mcdc_buf_append_str(&b, " COMMIT;", NULL);
        sim_exec_batch(s, (const char *)b.data, b.len, &sink);
        ntx++;
    }
    mcdc_buf_free(&b);
    sim_session_close(s);
    wk->done = 1;
    return NULL;
}

static void worker_free(sim_worker *w) {
    for (int k = 0; k < w->ntables; k++) mcdc_free(w->tables[k].cols);
    mcdc_free(w->tables);
    mcdc_free(w);
}

static void reap(sim_server *srv, bool all) {
    sim_worker **pp = &srv->workers;
    while (*pp) {
        sim_worker *w = *pp;
        if (all) w->stop = 1;
        if (all || w->done) {
            pthread_join(w->th, NULL);
            *pp = w->next;
            worker_free(w);
        } else pp = &w->next;
    }
}

/* Adds table name ("dbo.t", "[dbo].[t]") to w's tables. */
static int add_table(sim_worker *w, const char *name, mcdc_error *err) {
    tsql_tok *t = NULL;
    int n = 0, i = 0;
    char parts[4][MCDC_IDENT_BYTES_MAX];
    if (tsql_lex(&t, &n, name, strlen(name), err) != MCDC_OK) return MCDC_E_SERVER;
    int np = xl_name_parts(t, &i, n, parts);
    mcdc_free(t);
    if (np == 0) return sim_err(err, 208, "Invalid object name '%s'.", name);
    if (w->ntables >= WORK_TABLES_MAX)
        return sim_err(err, 50000, "sim.workload: more than %d tables", WORK_TABLES_MAX);
    wtable *nt = mcdc_realloc(w->tables, (size_t)(w->ntables + 1) * sizeof *nt);
    if (!nt) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    w->tables = nt;
    wtable *tb = &nt[w->ntables++];
    memset(tb, 0, sizeof *tb);
    xl_table_name(parts, np, tb->table, sizeof tb->table);
    snprintf(tb->qtable, sizeof tb->qtable, "[%.*s].[%.*s]", 200, np >= 2 && parts[np - 2][0] ? parts[np - 2] : "dbo", 200,
             parts[np - 1]);
    return MCDC_OK;
}

/* @tables: names separated by commas, or one LIKE pattern ('dbo.t%')
 * matched against the database's tables in name order. */
static int add_tables(sim_session *s, sim_worker *w, const char *list, mcdc_error *err) {
    int rc = MCDC_OK;
    if (strchr(list, '%')) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->rd, "SELECT name FROM __sim_tables WHERE schema_name <> 'cdc' AND name LIKE ?1 ORDER BY name",
                               -1, &st, NULL) != SQLITE_OK)
            return sim_sqlite_err(s->rd, SQLITE_ERROR, err);
        sqlite3_bind_text(st, 1, list, -1, SQLITE_STATIC);
        while (rc == MCDC_OK && sqlite3_step(st) == SQLITE_ROW) rc = add_table(w, (const char *)sqlite3_column_text(st, 0), err);
        sqlite3_finalize(st);
        if (rc == MCDC_OK && w->ntables == 0) rc = sim_err(err, 208, "sim.workload: no table matches '%s'", list);
        return rc;
    }
    const char *p = list;
    while (rc == MCDC_OK && *p) {
        while (*p == ' ' || *p == ',') p++;
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len > 0 && p[len - 1] == ' ') len--;
        if (len > 0) {
            char one[SIM_NAME_MAX * 2 + 8];
            if (len >= sizeof one) return sim_err(err, 208, "Invalid object name '%.*s'.", (int)len, p);
            memcpy(one, p, len);
            one[len] = 0;
            rc = add_table(w, one, err);
        }
        p = e ? e + 1 : p + strlen(p);
    }
    return rc;
}

int sim_work_start(sim_session *s, const sim_proc_args *a, mcdc_error *err) {
    const char *table = sim_arg_text(a, "@table", 0), *tables = sim_arg_text(a, "@tables", -1), *mix = sim_arg_text(a, "@mix", 3);
    if (!table == !tables) return sim_err(err, 201, "sim.workload expects @table or @tables (one of them)");
    sim_worker *w = mcdc_calloc(1, sizeof *w);
    if (!w) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    w->srv = s->srv;
    snprintf(w->db, sizeof w->db, "%s", s->db->name);
    int rc = table ? add_table(w, table, err) : add_tables(s, w, tables, err);
    if (rc != MCDC_OK) {
        worker_free(w);
        return rc;
    }
    sqlite3_value *v = sim_arg(a, "@tps", 1);
    w->tps = v ? sqlite3_value_double(v) : 10;
    v = sim_arg(a, "@seconds", 2);
    w->seconds = v ? sqlite3_value_double(v) : 10;
    w->max_statements = (int)arg_i64(a, "@max_statements", 4, 4);
    if (w->max_statements > WORK_STATEMENTS_MAX) w->max_statements = WORK_STATEMENTS_MAX;
    w->seed = (uint64_t)arg_i64(a, "@seed", 5, 42);
    w->p_ins = 0.5;
    w->p_upd = 0.35;
    if (mix) {
        const char *p;
        if ((p = strstr(mix, "insert="))) w->p_ins = atof(p + 7);
        if ((p = strstr(mix, "update="))) w->p_upd = atof(p + 7);
    }
    if (w->tps <= 0 || w->seconds < 0) { worker_free(w); return sim_err(err, 50000, "sim.workload: @tps must be > 0 and @seconds >= 0"); }
    if (arg_i64(a, "@wait", 6, 0)) {
        worker_main(w);
        worker_free(w);
        return MCDC_OK;
    }
    pthread_mutex_lock(&s->srv->mu);
    reap(s->srv, false);
    pthread_mutex_unlock(&s->srv->mu);
    if (pthread_create(&w->th, NULL, worker_main, w) != 0) { worker_free(w); return sim_err(err, 50000, "sim.workload: cannot start a thread"); }
    pthread_mutex_lock(&s->srv->mu);
    w->next = s->srv->workers;
    s->srv->workers = w;
    pthread_mutex_unlock(&s->srv->mu);
    return MCDC_OK;
}

void sim_work_stop_all(sim_server *srv) {
    pthread_mutex_lock(&srv->mu);
    sim_worker *list = srv->workers;
    srv->workers = NULL;
    sim_ckpt *ck = srv->ckpts;
    srv->ckpts = NULL;
    for (sim_worker *w = list; w; w = w->next) w->stop = 1;
    pthread_mutex_unlock(&srv->mu);
    while (list) {
        sim_worker *w = list;
        list = w->next;
        pthread_join(w->th, NULL);
        worker_free(w);
    }
    while (ck) {
        sim_ckpt *k = ck;
        ck = k->next;
        pthread_join(k->th, NULL);
        mcdc_free(k);
    }
}
