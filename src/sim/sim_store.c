/*
 * sim_store.c - the change store (see sim_store.h).
 *
 * A store is an arena of rows plus a directory of row pointers in chunks
 * that never move, so a reader holding a reference can walk the rows it
 * saw published while a writer appends. A row:
 *   start_lsn[10] seqval[10] operation(i32) command_id(i32)
 *   null bitmap (padded to 4) | offsets u32[ncols + 2] | cell bytes
 * Cells are encoded for the change table column's own type and nullability
 * (sim_tds_cellenc_put), the bytes the general path writes for "c.[col]",
 * plus one more: the seqval as CONVERT(varchar(22), .., 1) sends it. They
 * lie in the order of the reader's query (__$ columns, that text,
 * __$operation, __$command_id, then the captured columns), so most of a
 * row goes out in a few copies; offsets are by that position (lpos).
 *
 * A table store (kind TS_TABLE) shares the arena, directory, encoding and
 * limits: its rows have no key head and no extra text (null bitmap, offsets
 * u32[ncols + 1], cells in the table's column order), come in rowid order
 * and are tagged with the table's write count.
 */
#include "sim_store.h"

#include "sim_engine_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define CHUNK_BITS SIM_STORE_CHUNK_BITS
#define CHUNK_ROWS (1u << CHUNK_BITS)
#define DIR_CHUNKS 16384u /* 268M rows */
#define BLOCK_BYTES (4u << 20)
#define ROW_HEAD SIM_STORE_ROW_HEAD

typedef struct blk {
    struct blk *next;
    size_t used, cap;
    uint8_t data[];
} blk;

enum { TS_CHANGES = 0, TS_TABLE = 1 };

struct sim_store {
    _Atomic int refs;
    sim_stores *ss;
    int kind;                 /* TS_CHANGES / TS_TABLE */
    char ci[SIM_NAME_MAX * 2]; /* the capture instance, or the table ("dbo.t") */
    int ncols;
    int npos;                 /* cell positions: ncols (+ 1, the seqval text, in a change store) */
    size_t head_bytes;        /* key bytes before the null bitmap: ROW_HEAD, or 0 */
    sim_column *cols;
    char (*names)[SIM_NAME_MAX];
    sim_tds_col_enc *enc;
    int c_start, c_seq, c_op, c_cmd;
    int *phys;                /* ncols + 1 positions: column (ncols = the seqval text) */
    int *lpos;                /* column (or ncols) -> position */
    blk *blocks;              /* newest first */
    const uint8_t **dir[DIR_CHUNKS];
    size_t count;             /* published rows (under the entry's lock) */
    size_t head;              /* rows below are trimmed */
    bool order3;
    int64_t bytes;
    /* table stores: the write count the rows are, and per column whether
     * rowid order is that column's order (NULLs first, then ascending) */
    uint64_t tag;
    uint8_t *mono, *mseen, *mstrict; /* mstrict: no NULL and no value twice as well */
    int64_t *mlast;
};

typedef struct entry {
    int kind;
    char db[SIM_NAME_MAX], ci[SIM_NAME_MAX * 2];
    pthread_mutex_t mu;
    sim_store *st;     /* NULL: rebuilt by the next read */
    bool too_big;      /* served from SQLite until trimmed or dropped (tables: until written) */
    uint64_t gen;      /* bumped by every drop */
    uint64_t wseq;     /* tables: writes seen */
    bool building;     /* tables: a read builds the store (outside the lock) */
    struct entry *next;
} entry;

struct sim_stores {
    pthread_mutex_t mu; /* the entry list */
    entry *list;
    _Atomic int64_t bytes[2]; /* by kind */
    int64_t limit[2];
};

/* ---- stores -------------------------------------------------------------- */
int sim_stores_create(sim_stores **out, int64_t limit_bytes, mcdc_error *err) {
    sim_stores *ss = mcdc_calloc(1, sizeof *ss);
    if (!ss) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for the change store");
    pthread_mutex_init(&ss->mu, NULL);
    ss->limit[TS_CHANGES] = limit_bytes;
    ss->limit[TS_TABLE] = (int64_t)SIM_TABLE_CACHE_MB_DEFAULT << 20;
    *out = ss;
    return MCDC_OK;
}

static void store_unref(sim_store *st) {
    if (!st || atomic_fetch_sub(&st->refs, 1) != 1) return;
    for (blk *b = st->blocks, *n; b; b = n) {
        n = b->next;
        mcdc_free(b);
    }
    for (size_t k = 0; k < DIR_CHUNKS && st->dir[k]; k++) mcdc_free(st->dir[k]);
    atomic_fetch_sub(&st->ss->bytes[st->kind], st->bytes);
    mcdc_free(st->mono);
    mcdc_free(st->mseen);
    mcdc_free(st->mstrict);
    mcdc_free(st->mlast);
    mcdc_free(st->cols);
    mcdc_free(st->names);
    mcdc_free(st->enc);
    mcdc_free(st->phys);
    mcdc_free(st->lpos);
    mcdc_free(st);
}

void sim_stores_free(sim_stores *ss) {
    if (!ss) return;
    for (entry *e = ss->list, *n; e; e = n) {
        n = e->next;
        store_unref(e->st);
        pthread_mutex_destroy(&e->mu);
        mcdc_free(e);
    }
    pthread_mutex_destroy(&ss->mu);
    mcdc_free(ss);
}

int64_t sim_stores_bytes(sim_stores *ss) { return ss ? atomic_load(&ss->bytes[TS_CHANGES]) : 0; }
int64_t sim_stores_table_bytes(sim_stores *ss) { return ss ? atomic_load(&ss->bytes[TS_TABLE]) : 0; }

static entry *find_entry(sim_stores *ss, int kind, const char *db, const char *ci, bool create) {
    pthread_mutex_lock(&ss->mu);
    entry *e = ss->list;
    while (e && !(e->kind == kind && mcdc_str_ieq(e->db, db) && mcdc_str_ieq(e->ci, ci))) e = e->next;
    if (!e && create && (e = mcdc_calloc(1, sizeof *e)) != NULL) {
        e->kind = kind;
        snprintf(e->db, sizeof e->db, "%s", db);
        snprintf(e->ci, sizeof e->ci, "%s", ci);
        pthread_mutex_init(&e->mu, NULL);
        e->next = ss->list;
        ss->list = e;
    }
    pthread_mutex_unlock(&ss->mu);
    return e;
}

/* Under e->mu. */
static void drop_locked(entry *e) {
    store_unref(e->st);
    e->st = NULL;
    e->too_big = false;
    e->gen++;
}

/* The store's columns: cdc.[ci_CT] (or the table ci) in column order, from
 * the catalog. */
static sim_store *store_new(sim_stores *ss, sqlite3 *c, int kind, const char *ci) {
    char ct[SIM_NAME_MAX * 2 + 8];
    if (kind == TS_CHANGES) snprintf(ct, sizeof ct, "cdc.%s_CT", ci);
    else snprintf(ct, sizeof ct, "%s", ci);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(c, "SELECT name, type, nullable FROM __sim_columns WHERE tbl = ? ORDER BY column_id", -1, &st,
                           NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(st, 1, ct, -1, SQLITE_STATIC);
    sim_store *s = mcdc_calloc(1, sizeof *s);
    int cap = 16;
    bool ok = s != NULL;
    if (ok) {
        s->cols = mcdc_calloc((size_t)cap, sizeof *s->cols);
        s->names = mcdc_calloc((size_t)cap, SIM_NAME_MAX);
        ok = s->cols && s->names;
        s->ss = ss;
        s->kind = kind;
        s->refs = 1;
        s->order3 = true;
        s->c_start = s->c_seq = s->c_op = s->c_cmd = -1;
        snprintf(s->ci, sizeof s->ci, "%s", ci);
    }
    while (ok && sqlite3_step(st) == SQLITE_ROW) {
        if (s->ncols == cap) {
            if (cap >= MCDC_COLUMNS_MAX) { ok = false; break; }
            int nc = cap * 2;
            sim_column *c2 = mcdc_calloc((size_t)nc, sizeof *c2);
            char (*n2)[SIM_NAME_MAX] = mcdc_calloc((size_t)nc, SIM_NAME_MAX);
            ok = c2 && n2;
            if (ok) {
                memcpy(c2, s->cols, (size_t)cap * sizeof *c2);
                memcpy(n2, s->names, (size_t)cap * SIM_NAME_MAX);
            }
            mcdc_free(s->cols);
            mcdc_free(s->names);
            s->cols = c2;
            s->names = n2;
            cap = nc;
            if (!ok) break;
        }
        const char *nm = (const char *)sqlite3_column_text(st, 0), *ty = (const char *)sqlite3_column_text(st, 1);
        int k = s->ncols;
        if (!nm || !ty || !sim_type_parse(&s->cols[k].type, ty, strlen(ty))) { ok = false; break; }
        snprintf(s->names[k], SIM_NAME_MAX, "%s", nm);
        s->cols[k].nullable = sqlite3_column_int(st, 2) != 0;
        if (mcdc_str_ieq(nm, "__$start_lsn")) s->c_start = k;
        else if (mcdc_str_ieq(nm, "__$seqval")) s->c_seq = k;
        else if (mcdc_str_ieq(nm, "__$operation")) s->c_op = k;
        else if (mcdc_str_ieq(nm, "__$command_id")) s->c_cmd = k;
        s->ncols++;
    }
    sqlite3_finalize(st);
    ok = ok && s->ncols > 0 && (kind == TS_TABLE || (s->c_start >= 0 && s->c_seq >= 0 && s->c_op >= 0 && s->c_cmd >= 0));
    if (ok) {
        s->enc = mcdc_calloc((size_t)s->ncols, sizeof *s->enc);
        s->phys = mcdc_calloc((size_t)s->ncols + 1, sizeof *s->phys);
        s->lpos = mcdc_calloc((size_t)s->ncols + 1, sizeof *s->lpos);
        ok = s->enc && s->phys && s->lpos;
        for (int k = 0; ok && k < s->ncols; k++) {
            s->cols[k].name = s->names[k];
            sim_tds_col_plan(&s->enc[k], &s->cols[k]);
        }
    }
    if (ok && kind == TS_TABLE) { /* positions: the table's column order */
        s->npos = s->ncols;
        s->mono = mcdc_calloc((size_t)s->ncols, 1);
        s->mseen = mcdc_calloc((size_t)s->ncols, 1);
        s->mstrict = mcdc_calloc((size_t)s->ncols, 1);
        s->mlast = mcdc_calloc((size_t)s->ncols, sizeof *s->mlast);
        ok = s->mono && s->mseen && s->mstrict && s->mlast;
        for (int q = 0; ok && q < s->ncols; q++) {
            s->phys[q] = s->lpos[q] = q;
            sim_type_id id = s->cols[q].type.id;
            s->mono[q] = s->mstrict[q] = id == SIM_T_TINYINT || id == SIM_T_SMALLINT || id == SIM_T_INT || id == SIM_T_BIGINT;
        }
    } else if (ok) { /* positions: other __$ columns, seqval text, operation, command id, captured */
        s->npos = s->ncols + 1;
        s->head_bytes = ROW_HEAD;
        int p = 0;
        for (int k = 0; k < s->ncols; k++)
            if (s->names[k][0] == '_' && s->names[k][1] == '_' && s->names[k][2] == '$' && k != s->c_op && k != s->c_cmd)
                s->phys[p++] = k;
        s->phys[p++] = s->ncols;
        s->phys[p++] = s->c_op;
        s->phys[p++] = s->c_cmd;
        for (int k = 0; k < s->ncols; k++)
            if (!(s->names[k][0] == '_' && s->names[k][1] == '_' && s->names[k][2] == '$')) s->phys[p++] = k;
        ok = p == s->ncols + 1;
        for (int q = 0; ok && q < p; q++) s->lpos[s->phys[q]] = q;
    }
    if (!ok && s) {
        mcdc_free(s->cols);
        mcdc_free(s->names);
        mcdc_free(s->enc);
        mcdc_free(s->phys);
        mcdc_free(s->lpos);
        mcdc_free(s->mono);
        mcdc_free(s->mseen);
        mcdc_free(s->mstrict);
        mcdc_free(s->mlast);
        mcdc_free(s);
        return NULL;
    }
    return s;
}

/* ---- rows ------------------------------------------------------------------ */
static inline const uint8_t *row_at(const sim_store *st, size_t i) { return st->dir[i >> CHUNK_BITS][i & (CHUNK_ROWS - 1)]; }

static inline int32_t rd_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline size_t nulls_bytes(int ncols) { return ((size_t)(ncols + 7) / 8 + 3) & ~(size_t)3; }

void sim_store_row_get(const sim_store *st, size_t i, sim_store_row *out) {
    const uint8_t *r = row_at(st, i);
    out->start_lsn = r;
    out->seqval = r + 10;
    out->operation = rd_i32(r + 20);
    out->command_id = rd_i32(r + 24);
    out->nulls = r + ROW_HEAD;
    out->off = (const uint32_t *)(const void *)(r + ROW_HEAD + nulls_bytes(st->ncols));
    out->data = (const uint8_t *)(out->off + st->npos + 1);
}

const uint8_t *sim_store_row_start(const sim_store *st, size_t i) { return row_at(st, i); }

int sim_store_col(const sim_store *st, const char *name) {
    for (int k = 0; k < st->ncols; k++)
        if (mcdc_str_ieq(st->names[k], name)) return k;
    return -1;
}
const sim_column *sim_store_col_meta(const sim_store *st, int k) { return &st->cols[k]; }
int sim_store_ncols(const sim_store *st) { return st->ncols; }
int sim_store_col_pos(const sim_store *st, int k) { return st->lpos[k]; }
bool sim_store_order3(const sim_store *st) { return st->order3; }

/* SQLite's blob order: bytes, then length. */
static int blob_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c) return c;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

/* Row key vs the previous row: > 0 when strictly after. */
static int key_cmp(const uint8_t *a, const uint8_t *b, bool order3) {
    int c = memcmp(a, b, 10);
    if (c) return c;
    if (!order3) {
        int32_t ca = rd_i32(a + 24), cb = rd_i32(b + 24);
        if (ca != cb) return ca < cb ? -1 : 1;
    }
    c = memcmp(a + 10, b + 10, 10);
    if (c) return c;
    int32_t oa = rd_i32(a + 20), ob = rd_i32(b + 20);
    return oa < ob ? -1 : oa > ob;
}

/* Scratch for encoding one row. */
typedef struct row_enc {
    sim_tds_cellenc ce;
    mcdc_buf cells;
    uint32_t *off;
    uint8_t *nulls;
    int ncols;
} row_enc;

static int row_enc_init(row_enc *re, int ncols, mcdc_error *err) {
    memset(re, 0, sizeof *re);
    re->ncols = ncols;
    re->cells.limit = (size_t)MCDC_VALUE_BYTES_MAX * 4 + (size_t)ncols * 16;
    re->off = mcdc_calloc((size_t)ncols + 2, sizeof *re->off); /* npos + 1 <= ncols + 2 */
    re->nulls = mcdc_calloc(nulls_bytes(ncols), 1);
    if (!re->off || !re->nulls) {
        mcdc_free(re->off);
        mcdc_free(re->nulls);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    int rc = sim_tds_cellenc_init(&re->ce, err);
    if (rc != MCDC_OK) {
        mcdc_free(re->off);
        mcdc_free(re->nulls);
    }
    return rc;
}

static void row_enc_free(row_enc *re) {
    sim_tds_cellenc_free(&re->ce);
    mcdc_buf_free(&re->cells);
    mcdc_free(re->off);
    mcdc_free(re->nulls);
}

/* A table store's column order after one more row (v[ncols]). */
static void mono_step(sim_store *st, const sim_value *v) {
    for (int k = 0; k < st->ncols; k++) {
        if (!st->mono[k]) continue;
        if (v[k].kind == SIM_V_NULL) {
            st->mstrict[k] = 0;
            if (st->mseen[k]) st->mono[k] = 0; /* a NULL after a value */
        } else if (v[k].kind != SIM_V_INT || (st->mseen[k] && v[k].i < st->mlast[k])) {
            st->mono[k] = st->mstrict[k] = 0;
        } else {
            if (st->mseen[k] && v[k].i == st->mlast[k]) st->mstrict[k] = 0;
            st->mseen[k] = 1;
            st->mlast[k] = v[k].i;
        }
    }
}

/* Appends one row (vals[ncols]) after the last; not published yet. false:
 * the row cannot be kept (change rows: keys not as capture writes them, out
 * of order; the memory limit). */
static bool row_append(sim_store *st, row_enc *re, const sim_value *v, size_t *n) {
    bool chg = st->kind == TS_CHANGES;
    const sim_value *s = chg ? &v[st->c_start] : NULL, *q = chg ? &v[st->c_seq] : NULL;
    const sim_value *o = chg ? &v[st->c_op] : NULL, *c = chg ? &v[st->c_cmd] : NULL;
    if (chg && (s->kind != SIM_V_BLOB || s->n != 10 || q->kind != SIM_V_BLOB || q->n != 10 || o->kind != SIM_V_INT ||
                c->kind != SIM_V_INT || o->i < INT32_MIN || o->i > INT32_MAX || c->i < INT32_MIN || c->i > INT32_MAX))
        return false;
    mcdc_buf_reset(&re->cells);
    size_t nb = nulls_bytes(st->ncols), noff = (size_t)st->npos + 1;
    memset(re->nulls, 0, nb);
    for (int p = 0; p < st->npos; p++) {
        int k = st->phys[p];
        re->off[p] = (uint32_t)re->cells.len;
        if (k == st->ncols) { /* the seqval as varchar(22) text */
            static const char HX[] = "0123456789ABCDEF";
            uint8_t t[24] = {22, 0, '0', 'x'};
            for (int b = 0; b < 10; b++) {
                t[4 + 2 * b] = (uint8_t)HX[q->p[b] >> 4];
                t[5 + 2 * b] = (uint8_t)HX[q->p[b] & 15];
            }
            if (mcdc_buf_append(&re->cells, t, sizeof t, NULL) != MCDC_OK) return false;
            continue;
        }
        if (v[k].kind == SIM_V_NULL) re->nulls[k / 8] = (uint8_t)(re->nulls[k / 8] | (1u << (k % 8)));
        if (sim_tds_cellenc_put(&re->ce, &st->enc[k], &v[k], &re->cells, NULL) != MCDC_OK) return false;
        if (re->cells.len > UINT32_MAX / 2) return false;
    }
    re->off[st->npos] = (uint32_t)re->cells.len;
    size_t need = st->head_bytes + nb + noff * 4 + re->cells.len;
    need = (need + 3) & ~(size_t)3;
    size_t i = *n;
    if ((i >> CHUNK_BITS) >= DIR_CHUNKS) return false;
    _Atomic int64_t *used = &st->ss->bytes[st->kind];
    int64_t limit = st->ss->limit[st->kind];
    blk *b = st->blocks;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > BLOCK_BYTES ? need : BLOCK_BYTES;
        if (atomic_load(used) + (int64_t)cap > limit) return false;
        b = mcdc_malloc(sizeof *b + cap);
        if (!b) return false;
        b->cap = cap;
        b->used = 0;
        b->next = st->blocks;
        st->blocks = b;
        st->bytes += (int64_t)cap;
        atomic_fetch_add(used, (int64_t)cap);
    }
    const uint8_t ***chunk = &st->dir[i >> CHUNK_BITS];
    if (!*chunk) {
        if (atomic_load(used) + (int64_t)(CHUNK_ROWS * sizeof **chunk) > limit) return false;
        *chunk = mcdc_calloc(CHUNK_ROWS, sizeof **chunk);
        if (!*chunk) return false;
        st->bytes += (int64_t)(CHUNK_ROWS * sizeof **chunk);
        atomic_fetch_add(used, (int64_t)(CHUNK_ROWS * sizeof **chunk));
    }
    uint8_t *r = b->data + b->used;
    if (chg) {
        memcpy(r, s->p, 10);
        memcpy(r + 10, q->p, 10);
        int32_t op = (int32_t)o->i, cmd = (int32_t)c->i;
        memcpy(r + 20, &op, 4);
        memcpy(r + 24, &cmd, 4);
    }
    uint8_t *body = r + st->head_bytes;
    memcpy(body, re->nulls, nb);
    memcpy(body + nb, re->off, noff * 4);
    if (re->cells.len) memcpy(body + nb + noff * 4, re->cells.data, re->cells.len);
    if (chg && i > 0) {
        const uint8_t *p = row_at(st, i - 1);
        if (key_cmp(r, p, false) <= 0) return false; /* not after the last: not ours to order */
        if (st->order3 && key_cmp(r, p, true) <= 0) st->order3 = false;
    }
    if (!chg) mono_step(st, v);
    b->used += need;
    (*chunk)[i & (CHUNK_ROWS - 1)] = r;
    *n = i + 1;
    return true;
}

/* "SELECT <cols> FROM cdc.[ci_CT] [WHERE key > last] ORDER BY key" on rd;
 * a table store's: "SELECT <cols> FROM <table> ORDER BY rowid". */
static sqlite3_stmt *scan_stmt(const sim_store *st, sqlite3 *rd, bool after) {
    mcdc_buf q = {0};
    mcdc_buf_append_str(&q, "SELECT ", NULL);
    for (int k = 0; k < st->ncols; k++) {
        char *id = sqlite3_mprintf("%s\"%w\"", k ? ", " : "", st->names[k]);
        if (id) mcdc_buf_append_str(&q, id, NULL);
        sqlite3_free(id);
    }
    char *from = st->kind == TS_TABLE
                     ? sqlite3_mprintf(" FROM \"%w\" ORDER BY rowid", st->ci)
                     : sqlite3_mprintf(" FROM \"cdc.%w_CT\"%s ORDER BY \"__$start_lsn\", \"__$command_id\", \"__$seqval\", \"__$operation\"",
                                       st->ci,
                                       after ? " WHERE (\"__$start_lsn\", \"__$command_id\", \"__$seqval\", \"__$operation\") > (?1, ?2, ?3, ?4)" : "");
    if (from) mcdc_buf_append_str(&q, from, NULL);
    sqlite3_free(from);
    sqlite3_stmt *s = NULL;
    if (!from || mcdc_buf_cstr(&q, NULL) != MCDC_OK || sqlite3_prepare_v2(rd, (const char *)q.data, -1, &s, NULL) != SQLITE_OK ||
        sqlite3_column_count(s) != st->ncols) {
        sqlite3_finalize(s);
        s = NULL;
    }
    mcdc_buf_free(&q);
    return s;
}

/* Appends the rows sc yields (first step result in step); publishes them.
 * false: the store cannot hold them. */
static bool scan_append(sim_store *st, sqlite3_stmt *sc, int step) {
    row_enc re;
    sim_value *vals = mcdc_calloc((size_t)st->ncols, sizeof *vals);
    if (!vals || row_enc_init(&re, st->ncols, NULL) != MCDC_OK) {
        mcdc_free(vals);
        return false;
    }
    size_t n = st->count;
    bool ok = true;
    while (ok && step == SQLITE_ROW) {
        for (int k = 0; k < st->ncols; k++) sim_store_value_of(&vals[k], sqlite3_column_value(sc, k));
        ok = row_append(st, &re, vals, &n);
        step = sqlite3_step(sc);
    }
    ok = ok && step == SQLITE_DONE;
    if (ok) st->count = n;
    row_enc_free(&re);
    mcdc_free(vals);
    return ok;
}

/* Under e->mu with e->st set: the rows past the last one. */
static bool catch_up(sim_store *st, sqlite3 *rd) {
    sqlite3_stmt *sc = scan_stmt(st, rd, st->count > 0);
    if (!sc) return false;
    if (st->count > 0) {
        sim_store_row r;
        sim_store_row_get(st, st->count - 1, &r);
        sqlite3_bind_blob(sc, 1, r.start_lsn, 10, SQLITE_STATIC);
        sqlite3_bind_int(sc, 2, r.command_id);
        sqlite3_bind_blob(sc, 3, r.seqval, 10, SQLITE_STATIC);
        sqlite3_bind_int(sc, 4, r.operation);
    }
    bool ok = scan_append(st, sc, sqlite3_step(sc));
    sqlite3_finalize(sc);
    return ok;
}

/* A reference to st as out (the rows published now). */
static void snap_take(sim_store *st, sim_store_snap *out) {
    out->st = st;
    out->dir = (const uint8_t **const *)st->dir;
    out->ncols = st->ncols;
    out->npos = st->npos;
    atomic_fetch_add(&st->refs, 1);
    out->head = st->head;
    out->count = st->count;
}

bool sim_store_acquire(sim_stores *ss, pthread_mutex_t *srv_mu, sqlite3 *w, const char *db, sqlite3 *rd,
                       const char *ci, sim_store_snap *out) {
    memset(out, 0, sizeof *out);
    if (!ss || ss->limit[TS_CHANGES] <= 0 || !sqlite3_get_autocommit(rd)) return false;
    entry *e = find_entry(ss, TS_CHANGES, db, ci, true);
    if (!e) return false;
    pthread_mutex_lock(&e->mu);
    if (e->too_big) { pthread_mutex_unlock(&e->mu); return false; }
    if (!e->st) {
        /* a rebuild: its snapshot must be taken while no writer has a
         * transaction open (lock order: server mutex, then the entry) */
        pthread_mutex_unlock(&e->mu);
        pthread_mutex_lock(srv_mu);
        if (!sqlite3_get_autocommit(w)) { pthread_mutex_unlock(srv_mu); return false; }
        pthread_mutex_lock(&e->mu);
        if (!e->st && !e->too_big) {
            sim_store *st = store_new(ss, rd, TS_CHANGES, ci);
            sqlite3_stmt *sc = st ? scan_stmt(st, rd, false) : NULL;
            int step = sc ? sqlite3_step(sc) : SQLITE_ERROR; /* the snapshot starts here */
            pthread_mutex_unlock(srv_mu);
            bool ok = sc && scan_append(st, sc, step);
            sqlite3_finalize(sc);
            if (ok) e->st = st;
            else {
                store_unref(st);
                e->too_big = sc != NULL; /* could not hold it: SQLite serves it */
            }
        } else {
            pthread_mutex_unlock(srv_mu);
        }
        if (!e->st) { pthread_mutex_unlock(&e->mu); return false; }
    } else if (!catch_up(e->st, rd)) {
        drop_locked(e);
        e->too_big = true;
        pthread_mutex_unlock(&e->mu);
        return false;
    }
    snap_take(e->st, out);
    pthread_mutex_unlock(&e->mu);
    return true;
}

void sim_store_release(sim_store_snap *snap) {
    if (!snap) return;
    store_unref(snap->st);
    snap->st = NULL;
}

size_t sim_store_lower(const sim_store_snap *snap, const sim_store_key *k, bool inclusive, bool order3) {
    const sim_store *st = snap->st;
    size_t lo = snap->head, hi = snap->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const uint8_t *r = row_at(st, mid);
        int c = blob_cmp(r, 10, k->lsn, k->lsn_n);
        if (c == 0 && k->full) {
            if (!order3) {
                int64_t cmd = rd_i32(r + 24);
                c = cmd < k->command_id ? -1 : cmd > k->command_id;
            }
            if (c == 0) c = blob_cmp(r + 10, 10, k->seqval, k->seq_n);
            if (c == 0) {
                int64_t op = rd_i32(r + 20);
                c = op < k->operation ? -1 : op > k->operation;
            }
            if (c == 0) c = -1; /* equal is not after */
        } else if (c == 0 && !inclusive) {
            c = -1;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* ---- writers --------------------------------------------------------------- */
void sim_store_invalidate(sim_stores *ss, const char *db, const char *ci) {
    if (!ss) return;
    pthread_mutex_lock(&ss->mu);
    entry *list = ss->list;
    pthread_mutex_unlock(&ss->mu);
    /* entries are never removed before sim_stores_free: walking is safe */
    for (entry *e = list; e; e = e->next) {
        if (!mcdc_str_ieq(e->db, db) || (ci && !(e->kind == TS_CHANGES && mcdc_str_ieq(e->ci, ci)))) continue;
        pthread_mutex_lock(&e->mu);
        if (e->kind == TS_TABLE) e->wseq++; /* a dropped database: its tables are not what the stores hold */
        drop_locked(e);
        pthread_mutex_unlock(&e->mu);
    }
}

void sim_store_trim(sim_stores *ss, const char *db, const char *ci, const uint8_t low[10]) {
    entry *e = ss ? find_entry(ss, TS_CHANGES, db, ci, false) : NULL;
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    sim_store *st = e->st;
    if (e->too_big) {
        e->too_big = false; /* smaller now: the next read tries again */
    } else if (st) {
        sim_store_snap sn = {st, st->head, st->count, (const uint8_t **const *)st->dir, st->ncols, st->npos};
        sim_store_key k = {low, 10, false, 0, NULL, 0, 0};
        st->head = sim_store_lower(&sn, &k, true, false);
        /* most of it trimmed: let the next read rebuild a compact one */
        if (st->head > 4096 && st->head > st->count / 2) drop_locked(e);
    }
    pthread_mutex_unlock(&e->mu);
}

void sim_store_inserted(sim_stores *ss, const char *db, const char *ci, const uint8_t lo[10]) {
    entry *e = ss ? find_entry(ss, TS_CHANGES, db, ci, false) : NULL;
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    if (e->st && e->st->count > 0 && memcmp(row_at(e->st, e->st->count - 1), lo, 10) >= 0) drop_locked(e);
    pthread_mutex_unlock(&e->mu);
}

int sim_store_auth(void *ctx, int action, const char *a1, const char *a2, const char *a3, const char *a4) {
    (void)a3;
    (void)a4;
    sim_store_auth_ctx *ac = ctx;
    /* mu free: no one holds it, so neither does this thread (a hold by
     * another thread at this moment escapes the check) */
    if (ac->mu && pthread_mutex_trylock(ac->mu) == 0) {
        pthread_mutex_unlock(ac->mu);
        mcdc_log(MCDC_LOG_ERROR, "sim: a statement on database %s's writer connection without the server lock (action %d, %s): refused",
                 ac->db, action, a1 ? a1 : "-");
        return SQLITE_DENY;
    }
    const char *tbl = NULL;
    switch (action) {
    case SQLITE_INSERT: case SQLITE_UPDATE: case SQLITE_DELETE: case SQLITE_DROP_TABLE: case SQLITE_CREATE_TABLE: tbl = a1; break;
    case SQLITE_ALTER_TABLE: tbl = a2; break;
    default: return SQLITE_OK;
    }
    if (ac->trusted || !tbl) return SQLITE_OK;
    size_t n = strlen(tbl);
    if (n >= 8 && mcdc_str_nieq(tbl, "cdc.", 4) && mcdc_str_ieq(tbl + n - 3, "_CT")) {
        char ci[SIM_NAME_MAX];
        snprintf(ci, sizeof ci, "%.*s", (int)(n - 7), tbl + 4);
        sim_store_invalidate(ac->ss, ac->db, ci);
    } else if (!sim_ci_prefix(tbl, "sqlite_") && !sim_ci_prefix(tbl, "__sim")) {
        sim_tstore_wrote(ac->ss, ac->db, tbl);
    }
    return SQLITE_OK;
}

/* ---- bulk load ----------------------------------------------------------------- */
struct sim_store_batch {
    sim_stores *ss;
    char db[SIM_NAME_MAX];
    sim_store *st; /* private until published */
    row_enc re;
    size_t n;
    bool failed;
};

static int batch_begin(sim_store_batch **out, sim_stores *ss, sqlite3 *w, int kind, const char *db, const char *name,
                       mcdc_error *err) {
    *out = NULL;
    if (!ss || ss->limit[kind] <= 0) return MCDC_OK;
    sim_store_batch *b = mcdc_calloc(1, sizeof *b);
    if (!b) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    b->ss = ss;
    snprintf(b->db, sizeof b->db, "%s", db);
    b->st = store_new(ss, w, kind, name);
    if (!b->st || row_enc_init(&b->re, b->st->ncols, NULL) != MCDC_OK) {
        store_unref(b->st);
        mcdc_free(b);
        return MCDC_OK; /* no store: reads rebuild it from SQLite */
    }
    *out = b;
    return MCDC_OK;
}

int sim_store_batch_begin(sim_store_batch **out, sim_stores *ss, sqlite3 *w, const char *db, const char *ci,
                          mcdc_error *err) {
    return batch_begin(out, ss, w, TS_CHANGES, db, ci, err);
}

int sim_store_batch_col(const sim_store_batch *b, const char *name) { return sim_store_col(b->st, name); }

int sim_store_batch_row(sim_store_batch *b, const sim_value *vals, mcdc_error *err) {
    (void)err;
    if (b->failed) return MCDC_OK;
    if (!row_append(b->st, &b->re, vals, &b->n)) b->failed = true;
    else b->st->count = b->n;
    return MCDC_OK;
}

void sim_store_batch_free(sim_store_batch *b) {
    if (!b) return;
    row_enc_free(&b->re);
    store_unref(b->st);
    mcdc_free(b);
}

/* A table's batch: the whole table when it was empty before the load. */
static void batch_publish_table(sim_store_batch *b, bool table_was_empty) {
    entry *e = b->failed || !table_was_empty ? NULL : find_entry(b->ss, TS_TABLE, b->db, b->st->ci, true);
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    drop_locked(e);
    b->st->tag = e->wseq;
    e->st = b->st;
    b->st = NULL;
    pthread_mutex_unlock(&e->mu);
}

void sim_store_batch_publish(sim_store_batch *b, bool table_was_empty) {
    if (!b) return;
    if (b->st->kind == TS_TABLE) {
        batch_publish_table(b, table_was_empty);
        sim_store_batch_free(b);
        return;
    }
    entry *e = b->failed || b->n == 0 ? NULL : find_entry(b->ss, TS_CHANGES, b->db, b->st->ci, true);
    if (e) {
        pthread_mutex_lock(&e->mu);
        if ((!e->st || e->st->count == 0) && table_was_empty && !e->too_big) {
            drop_locked(e);
            e->st = b->st; /* the batch is the whole table */
            b->st = NULL;
        } else if (e->st && e->st->count > 0 && !e->too_big) {
            /* a read may have caught up with the committed rows already */
            sim_store *st = e->st;
            const uint8_t *last = row_at(st, st->count - 1);
            if (key_cmp(row_at(b->st, 0), last, false) > 0) {
                bool ok = true;
                size_t n = st->count;
                for (size_t i = 0; i < b->n && ok; i++) {
                    /* rows move by pointer: the batch's blocks join the store */
                    const uint8_t ***chunk = &st->dir[n >> CHUNK_BITS];
                    if ((n >> CHUNK_BITS) >= DIR_CHUNKS) { ok = false; break; }
                    if (!*chunk) {
                        *chunk = mcdc_calloc(CHUNK_ROWS, sizeof **chunk);
                        if (!*chunk) { ok = false; break; }
                        st->bytes += (int64_t)(CHUNK_ROWS * sizeof **chunk);
                        atomic_fetch_add(&st->ss->bytes[TS_CHANGES], (int64_t)(CHUNK_ROWS * sizeof **chunk));
                    }
                    const uint8_t *r = row_at(b->st, i);
                    if (i == 0 && st->order3 && key_cmp(r, last, true) <= 0) st->order3 = false;
                    (*chunk)[n & (CHUNK_ROWS - 1)] = r;
                    n++;
                }
                if (ok) {
                    if (!b->st->order3) st->order3 = false;
                    blk *tail = b->st->blocks;
                    while (tail && tail->next) tail = tail->next;
                    if (tail) {
                        tail->next = st->blocks;
                        st->blocks = b->st->blocks;
                        b->st->blocks = NULL;
                        st->bytes += b->st->bytes;
                        b->st->bytes = 0;
                        /* the chunks' bytes stay with the batch store */
                    }
                    st->count = n;
                } else {
                    drop_locked(e);
                }
            }
        } else if (e->st && e->st->count == 0 && !e->too_big) {
            drop_locked(e); /* empty store: the next read rebuilds */
        }
        pthread_mutex_unlock(&e->mu);
    }
    sim_store_batch_free(b);
}

void sim_stores_set_limit(sim_stores *ss, int64_t limit_bytes) {
    if (ss) ss->limit[TS_CHANGES] = limit_bytes;
}

void sim_stores_set_table_limit(sim_stores *ss, int64_t limit_bytes) {
    if (ss) ss->limit[TS_TABLE] = limit_bytes;
}

/* ---- the table store --------------------------------------------------------- */
void sim_tstore_wrote(sim_stores *ss, const char *db, const char *tbl) {
    entry *e = ss ? find_entry(ss, TS_TABLE, db, tbl, true) : NULL;
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->wseq++;
    drop_locked(e);
    pthread_mutex_unlock(&e->mu);
}

uint64_t sim_tstore_wseq(sim_stores *ss, const char *db, const char *tbl) {
    entry *e = ss ? find_entry(ss, TS_TABLE, db, tbl, true) : NULL;
    if (!e) return UINT64_MAX; /* matches no store */
    pthread_mutex_lock(&e->mu);
    uint64_t v = e->wseq;
    pthread_mutex_unlock(&e->mu);
    return v;
}

bool sim_tstore_mono(const sim_store *st, int col) { return st->kind == TS_TABLE && col >= 0 && col < st->ncols && st->mono[col]; }
bool sim_tstore_strict(const sim_store *st, int col) {
    return st->kind == TS_TABLE && col >= 0 && col < st->ncols && st->mono[col] && st->mstrict[col];
}

/* Builds the store of e's table from rd (its first step already taken:
 * step) outside every lock; publishes it if the table did not change
 * meanwhile and takes a reference for out. */
static bool table_build(entry *e, sim_store *st, sqlite3_stmt *sc, int step, sim_store_snap *out) {
    bool ok = sc && scan_append(st, sc, step);
    sqlite3_finalize(sc);
    pthread_mutex_lock(&e->mu);
    e->building = false;
    bool used = false;
    if (ok && e->wseq == st->tag) {
        drop_locked(e);
        e->st = st;
        snap_take(st, out);
        used = true;
    } else if (!ok && sc && e->wseq == st->tag) {
        e->too_big = true; /* could not hold it: SQLite serves it until the table changes */
    }
    pthread_mutex_unlock(&e->mu);
    if (!used) store_unref(st);
    return used;
}

bool sim_tstore_acquire(sim_stores *ss, pthread_mutex_t *srv_mu, const char *db, sqlite3 *rd, const char *tbl,
                        bool pinned, uint64_t pin_wseq, bool whole, sim_store_snap *out) {
    memset(out, 0, sizeof *out);
    if (!ss || ss->limit[TS_TABLE] <= 0 || (!pinned && !sqlite3_get_autocommit(rd))) return false;
    entry *e = find_entry(ss, TS_TABLE, db, tbl, true);
    if (!e) return false;
    pthread_mutex_lock(&e->mu);
    uint64_t want = pinned ? pin_wseq : e->wseq;
    if (e->st && e->st->tag == want) {
        snap_take(e->st, out);
        pthread_mutex_unlock(&e->mu);
        return true;
    }
    /* a build: of the table as it is now (a pinned reader's state only when
     * nothing wrote since), one at a time; too big until the next write */
    if (want != e->wseq || e->building || e->too_big || !whole) {
        pthread_mutex_unlock(&e->mu);
        return false;
    }
    e->building = true;
    pthread_mutex_unlock(&e->mu);
    sim_store *st = store_new(ss, rd, TS_TABLE, tbl);
    sqlite3_stmt *sc = NULL;
    int step = SQLITE_ERROR;
    if (st && pinned) { /* rd reads the state of pin_wseq, which is the table's now */
        st->tag = pin_wseq;
        sc = scan_stmt(st, rd, false);
        step = sc ? sqlite3_step(sc) : SQLITE_ERROR;
    } else if (st) { /* the scan's snapshot starts under the server mutex: no write half done */
        pthread_mutex_lock(srv_mu);
        pthread_mutex_lock(&e->mu);
        st->tag = e->wseq;
        pthread_mutex_unlock(&e->mu);
        sc = scan_stmt(st, rd, false);
        step = sc ? sqlite3_step(sc) : SQLITE_ERROR;
        pthread_mutex_unlock(srv_mu);
    }
    if (!st) {
        pthread_mutex_lock(&e->mu);
        e->building = false;
        pthread_mutex_unlock(&e->mu);
        return false;
    }
    return table_build(e, st, sc, step, out);
}

int sim_tstore_batch_begin(sim_store_batch **out, sim_stores *ss, sqlite3 *w, const char *db, const char *tbl,
                           mcdc_error *err) {
    return batch_begin(out, ss, w, TS_TABLE, db, tbl, err);
}
