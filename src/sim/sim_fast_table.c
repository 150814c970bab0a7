/*
 * sim_fast_table.c - base-table reads served from the table store
 * (sim_store.h): the snapshot reader's query (mcdc_cdc_snapshot_sql) and
 * any read of that shape,
 *
 *   SELECT <t.col | col | CAST(<literal> AS <type>)> [AS alias], ...
 *   FROM [s].[t] [AS] t [WHERE <one integer column against integer literals>]
 *
 * where the WHERE is built of "k IS [NOT] NULL" and "k <op> <integer>"
 * (op = < <= = >= >) joined by AND / OR into "NULLs and/or one range of
 * k". The rows are the store's, in rowid order: the order SQLite's plan
 * for the statement gives whenever no index could order them otherwise
 * (checked against the table's indexes: an index led by k needs k to grow
 * with the rowid, a covering index led by another column rules the store
 * out). Each row goes to the sink as a few pre-encoded cells: the table's
 * columns lying together in the store, and the constants (the _start_lsn
 * text, the commit time...) evaluated and encoded once. Column metadata come
 * from the general path's translation of the statement, and a column is
 * served only when its type and nullability match the store's, so the bytes
 * on the wire are the general path's (tests/unit/test_sim_fast_table.c
 * compares them). Under SNAPSHOT the table must have no row the statement's
 * view changes, and the store must be the state the view pinned.
 *
 * A chunk planner's counts per slice of an integer key (the query of
 * mcdc_cdc_key_slices: floor(k / w) per row in a derived table, grouped)
 * come from the store as well when the key grows with the rowid: each
 * non-empty slice is one binary search where SQLite sorts every row for its
 * GROUP BY; in ascending order with the NULL keys' group first, as SQLite's
 * sorter gives them.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

static const tsql_tok TOK_SELECT = {TK_IDENT, "SELECT", 6, 0};
static const tsql_tok TOK_COMMA = {TK_OP, ",", 1, 0};

void sim_fast_table_free(sim_fast_table *p) {
    if (!p) return;
    mcdc_free(p->items);
    mcdc_free(p->consts);
    memset(p, 0, sizeof *p);
}

static bool is_name(const tsql_tok *t) { return t->t == TK_IDENT || t->t == TK_QIDENT; }
#define name_is sim_tok_name_is

/* A column reference at t[*k]: "alias.col" or "col"; its name into col. */
static bool col_ref(const tsql_tok *t, int *k, int end, const char *alias, char *col, size_t cap) {
    int i = *k;
    if (i + 2 < end && name_is(&t[i], alias) && tsql_tok_op(&t[i + 1], ".") && is_name(&t[i + 2])) {
        tsql_tok_text(&t[i + 2], col, cap);
        *k = i + 3;
        return true;
    }
    if (i < end && is_name(&t[i]) && !xl_is_keyword(&t[i]) && !(i + 1 < end && tsql_tok_op(&t[i + 1], "."))) {
        tsql_tok_text(&t[i], col, cap);
        *k = i + 1;
        return true;
    }
    return false;
}

/* An integer literal at t[*k] ("12", "-12"), exactly an int64. */
static bool int_lit(const tsql_tok *t, int *k, int end, int64_t *out) {
    int i = *k;
    bool neg = false;
    if (i < end && tsql_tok_op(&t[i], "-")) { neg = true; i++; }
    if (i >= end || t[i].t != TK_NUM || t[i].n > 19) return false;
    uint64_t v = 0;
    for (int c = 0; c < t[i].n; c++) {
        if (t[i].s[c] < '0' || t[i].s[c] > '9') return false;
        v = v * 10 + (uint64_t)(t[i].s[c] - '0');
    }
    if (t[i].n == 19 && t[i].s[0] > '9') return false;
    if ((!neg && v > (uint64_t)INT64_MAX) || (neg && v > (uint64_t)INT64_MAX + 1)) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    *k = i + 1;
    return true;
}

/* The rows a predicate keeps: NULL keys (nulls) and the keys in [lo, hi]
 * (none when !range). */
typedef struct kset {
    bool nulls, range;
    int64_t lo, hi;
} kset;

static const kset KS_NONE = {false, false, 0, 0};

typedef struct kparse {
    const tsql_tok *t;
    int end;
    const char *alias;
    char key[SIM_NAME_MAX];
    bool ok;
} kparse;

static kset ks_and(kset a, kset b) {
    kset r = {a.nulls && b.nulls, a.range && b.range, a.lo > b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi};
    if (r.range && r.lo > r.hi) r.range = false;
    return r;
}

static kset ks_or(kparse *p, kset a, kset b) {
    kset r = {a.nulls || b.nulls, a.range || b.range, 0, 0};
    if (a.range && b.range) {
        /* one range only: the two must touch */
        bool touch = !(a.hi < b.lo && (a.hi == INT64_MAX || a.hi + 1 < b.lo)) && !(b.hi < a.lo && (b.hi == INT64_MAX || b.hi + 1 < a.lo));
        if (!touch) p->ok = false;
        r.lo = a.lo < b.lo ? a.lo : b.lo;
        r.hi = a.hi > b.hi ? a.hi : b.hi;
    } else if (a.range) {
        r.lo = a.lo;
        r.hi = a.hi;
    } else if (b.range) {
        r.lo = b.lo;
        r.hi = b.hi;
    }
    return r;
}

static kset parse_or(kparse *p, int *k);

/* One key column, the same in every comparison. */
static bool key_ref(kparse *p, int *k) {
    char col[SIM_NAME_MAX];
    if (!col_ref(p->t, k, p->end, p->alias, col, sizeof col)) return false;
    if (!p->key[0]) snprintf(p->key, sizeof p->key, "%s", col);
    return mcdc_str_ieq(p->key, col);
}

static kset parse_prim(kparse *p, int *k) {
    const tsql_tok *t = p->t;
    if (*k < p->end && tsql_tok_op(&t[*k], "(")) {
        (*k)++;
        kset r = parse_or(p, k);
        if (*k >= p->end || !tsql_tok_op(&t[*k], ")")) p->ok = false;
        else (*k)++;
        return r;
    }
    if (!key_ref(p, k)) {
        p->ok = false;
        return KS_NONE;
    }
    int i = *k;
    if (i + 1 < p->end && tsql_tok_is(&t[i], "IS") && tsql_tok_is(&t[i + 1], "NULL")) {
        *k = i + 2;
        return (kset){true, false, 0, 0};
    }
    if (i + 2 < p->end && tsql_tok_is(&t[i], "IS") && tsql_tok_is(&t[i + 1], "NOT") && tsql_tok_is(&t[i + 2], "NULL")) {
        *k = i + 3;
        return (kset){false, true, INT64_MIN, INT64_MAX};
    }
    /* <, <=, =, >=, > (the lexer may give "<=" as one operator or two) */
    char op[3] = "";
    if (i < p->end && t[i].t == TK_OP && t[i].n <= 2) {
        memcpy(op, t[i].s, (size_t)t[i].n);
        op[t[i].n] = 0;
        i++;
        if (op[1] == 0 && (op[0] == '<' || op[0] == '>') && i < p->end && tsql_tok_op(&t[i], "=")) {
            op[1] = '=';
            i++;
        }
    }
    int64_t v;
    if (!op[0] || !int_lit(t, &i, p->end, &v)) {
        p->ok = false;
        return KS_NONE;
    }
    *k = i;
    if (!strcmp(op, "=")) return (kset){false, true, v, v};
    if (!strcmp(op, ">=")) return (kset){false, true, v, INT64_MAX};
    if (!strcmp(op, "<=")) return (kset){false, true, INT64_MIN, v};
    if (!strcmp(op, ">")) return v == INT64_MAX ? KS_NONE : (kset){false, true, v + 1, INT64_MAX};
    if (!strcmp(op, "<")) return v == INT64_MIN ? KS_NONE : (kset){false, true, INT64_MIN, v - 1};
    p->ok = false;
    return KS_NONE;
}

static kset parse_and(kparse *p, int *k) {
    kset r = parse_prim(p, k);
    while (p->ok && *k < p->end && tsql_tok_is(&p->t[*k], "AND")) {
        (*k)++;
        r = ks_and(r, parse_prim(p, k));
    }
    return r;
}

static kset parse_or(kparse *p, int *k) {
    kset r = parse_and(p, k);
    while (p->ok && *k < p->end && tsql_tok_is(&p->t[*k], "OR")) {
        (*k)++;
        r = ks_or(p, r, parse_and(p, k));
    }
    return r;
}

/* A literal CAST(<literal> AS <type>) at [s, e): a constant of the row. */
static bool const_item(const tsql_tok *t, int s, int e) {
    if (e - s < 6 || !tsql_tok_is(&t[s], "CAST") || !tsql_tok_op(&t[s + 1], "(") || !tsql_tok_op(&t[e - 1], ")")) return false;
    int k = s + 2;
    if (tsql_tok_op(&t[k], "-")) k++;
    bool lit = t[k].t == TK_STR || t[k].t == TK_NSTR || t[k].t == TK_NUM || tsql_tok_is(&t[k], "NULL");
    if (!lit || !tsql_tok_is(&t[k + 1], "AS")) return false;
    for (int q = k + 2; q < e - 1; q++) /* the type: names, numbers, parentheses, commas */
        if (!(is_name(&t[q]) || t[q].t == TK_NUM || tsql_tok_op(&t[q], "(") || tsql_tok_op(&t[q], ")") ||
              tsql_tok_op(&t[q], ",")))
            return false;
    return true;
}

/* "FROM [s].[t] [AS] alias" at t[from]: table and alias into p; the index
 * after it, or -1 (not one user table). */
static int from_table(sim_fast_table *p, const tsql_tok *t, int from, int b) {
    int k = from + 1;
    char parts[4][MCDC_IDENT_BYTES_MAX];
    int np = xl_name_parts(t, &k, b, parts);
    if (np == 0 || np > 2) return -1;
    xl_table_name(parts, np, p->table, sizeof p->table);
    if (sim_ci_prefix(p->table, "sys.") || sim_ci_prefix(p->table, "cdc.") || sim_ci_prefix(p->table, "__sim")) return -1;
    snprintf(p->alias, sizeof p->alias, "%s", parts[np - 1]);
    if (k < b && tsql_tok_is(&t[k], "AS")) k++;
    if (k < b && is_name(&t[k]) && !xl_ends_table(&t[k])) {
        tsql_tok_text(&t[k], p->alias, sizeof p->alias);
        k++;
    }
    return k;
}

/* The key predicate [w, e) into p; false when it has another shape. */
static bool where_keys(sim_fast_table *p, const tsql_tok *t, int w, int e) {
    kparse kp = {t, e, p->alias, "", true};
    if (p->key[0]) snprintf(kp.key, sizeof kp.key, "%s", p->key);
    kset ks = parse_or(&kp, &w);
    if (!kp.ok || w != e || !kp.key[0]) return false;
    p->has_where = true;
    snprintf(p->key, sizeof p->key, "%s", kp.key);
    p->nulls = ks.nulls;
    p->range = ks.range;
    p->lo = ks.lo;
    p->hi = ks.hi;
    return true;
}

bool sim_fast_match_table(sim_fast_table *p, const tsql_tok *t, int a, int b) {
    memset(p, 0, sizeof *p);
    if (b - a < 4 || !tsql_tok_is(&t[a], "SELECT")) return false;
    if (tsql_tok_is(&t[a + 1], "TOP") || tsql_tok_is(&t[a + 1], "DISTINCT") || tsql_tok_is(&t[a + 1], "ALL")) return false;
    int from = sim_toks_word_at_depth0(t, a + 1, b, "FROM"), d = 0;
    if (from < 0 || from == a + 1) return false;
    int where = from_table(p, t, from, b);
    if (where < 0 || (where < b && !tsql_tok_is(&t[where], "WHERE"))) return false;
    int nitems = sim_toks_list_items(t, a + 1, from);
    if (nitems > MCDC_COLUMNS_MAX) return false;
    p->items = mcdc_calloc((size_t)nitems, sizeof *p->items);
    if (!p->items) return false;
    int ccap = 0;
    bool ok = sim_toks_push(&p->consts, &p->nconsts_tok, &ccap, &TOK_SELECT);
    int s = a + 1;
    d = 0;
    for (int q = a + 1; q <= from && ok; q++) {
        if (q < from && tsql_tok_op(&t[q], "(")) { d++; continue; }
        if (q < from && tsql_tok_op(&t[q], ")")) { d--; continue; }
        if (q < from && !(d == 0 && tsql_tok_op(&t[q], ","))) continue;
        int e = q;
        if (e - s >= 3 && tsql_tok_is(&t[e - 2], "AS") && is_name(&t[e - 1])) e -= 2;
        sim_ft_item *it = &p->items[p->nitems];
        int c = s;
        if (col_ref(t, &c, e, p->alias, it->col, sizeof it->col) && c == e) {
            it->kind = SIM_FT_COL;
        } else if (const_item(t, s, e)) {
            it->kind = SIM_FT_CONST;
            it->cidx = p->nconst++;
            if (it->cidx > 0) ok = sim_toks_push(&p->consts, &p->nconsts_tok, &ccap, &TOK_COMMA);
            for (int z = s; z < e && ok; z++) ok = sim_toks_push(&p->consts, &p->nconsts_tok, &ccap, &t[z]);
        } else {
            ok = false;
        }
        p->nitems++;
        s = q + 1;
    }
    if (ok && where < b) ok = where_keys(p, t, where + 1, b);
    if (!ok || p->nitems != nitems) {
        sim_fast_table_free(p);
        return false;
    }
    return true;
}

/* The tokens of a template at t[*k]: words separated by spaces, each a
 * keyword or name (any case), an operator (">=" also as two tokens), a
 * number, or a placeholder: $K the key column (unqualified; its name into
 * key, the same at every $K), $W the slice width (an integer literal, the
 * same at every $W), $A a name (the same at every $A). */
typedef struct tmatch {
    char key[SIM_NAME_MAX], name[SIM_NAME_MAX];
    int64_t width;
    bool has_width;
} tmatch;

static bool tmatch_run(tmatch *m, const tsql_tok *t, int *k, int end, const char *tpl) {
    int i = *k;
    for (const char *w = tpl; *w;) {
        size_t n = strcspn(w, " ");
        char word[16];
        if (n == 0 || n >= sizeof word) return false;
        memcpy(word, w, n);
        word[n] = 0;
        w += n + (w[n] == ' ');
        if (!strcmp(word, "$K")) {
            char col[SIM_NAME_MAX];
            if (!col_ref(t, &i, end, "", col, sizeof col)) return false;
            if (!m->key[0]) snprintf(m->key, sizeof m->key, "%s", col);
            else if (!mcdc_str_ieq(m->key, col)) return false;
        } else if (!strcmp(word, "$W")) {
            int64_t v;
            if (!int_lit(t, &i, end, &v) || (m->has_width && v != m->width)) return false;
            m->width = v;
            m->has_width = true;
        } else if (!strcmp(word, "$A")) {
            char nm[SIM_NAME_MAX];
            if (i >= end || !is_name(&t[i])) return false;
            tsql_tok_text(&t[i++], nm, sizeof nm);
            if (!m->name[0]) snprintf(m->name, sizeof m->name, "%s", nm);
            else if (!mcdc_str_ieq(m->name, nm)) return false;
        } else if (word[0] >= '0' && word[0] <= '9') {
            if (i >= end || t[i].t != TK_NUM || t[i].n != (int)n || memcmp(t[i].s, word, n) != 0) return false;
            i++;
        } else if ((word[0] >= 'A' && word[0] <= 'Z') || word[0] == '_') {
            if (i >= end || !tsql_tok_is(&t[i], word)) return false;
            i++;
        } else if (i < end && tsql_tok_op(&t[i], word)) {
            i++;
        } else if (n == 2 && i + 1 < end && t[i].t == TK_OP && t[i].n == 1 && t[i].s[0] == word[0] &&
                   tsql_tok_op(&t[i + 1], word + 1)) {
            i += 2;
        } else {
            return false;
        }
    }
    *k = i;
    return true;
}

/* Optional "AS <name>" or "<name>" (not a keyword) at t[*k]. */
static void opt_alias(const tsql_tok *t, int *k, int end) {
    int i = *k;
    if (i < end && tsql_tok_is(&t[i], "AS")) i++;
    if (i < end && is_name(&t[i]) && !xl_is_keyword(&t[i])) *k = i + 1;
}

/* The planner's slice of the key, floor(k / w) (T-SQL's division truncates
 * toward zero: the ELSE floors a negative key). */
#define SLICE_CASE                                                                                  \
    "CASE WHEN CAST ( $K AS BIGINT ) >= 0 THEN CAST ( $K AS BIGINT ) / CAST ( $W AS BIGINT ) ELSE ( " \
    "CAST ( $K AS BIGINT ) + 1 ) / CAST ( $W AS BIGINT ) - 1 END AS $A"

bool sim_fast_match_slices(sim_fast_table *p, const tsql_tok *t, int a, int b) {
    memset(p, 0, sizeof *p);
    tmatch m;
    memset(&m, 0, sizeof m);
    int i = a;
    if (b - a < 40 || !tmatch_run(&m, t, &i, b, "SELECT $A")) return false;
    opt_alias(t, &i, b);
    if (!tmatch_run(&m, t, &i, b, ", COUNT_BIG ( * )")) return false;
    opt_alias(t, &i, b);
    if (!tmatch_run(&m, t, &i, b, "FROM ( SELECT " SLICE_CASE " FROM")) return false;
    if (!m.has_width || m.width < 1) return false; /* 0: SQL Server's error 8134, the general path's */
    /* the table, its WHERE up to the derived table's ")" */
    int k = from_table(p, t, i - 1, b);
    if (k < 0) return false;
    int close = -1, d = 0;
    for (int q = k; q < b && close < 0; q++) {
        if (tsql_tok_op(&t[q], "(")) d++;
        else if (tsql_tok_op(&t[q], ")") && d-- == 0) close = q;
    }
    if (close < 0) return false;
    snprintf(p->key, sizeof p->key, "%s", m.key);
    if (k < close && !(tsql_tok_is(&t[k], "WHERE") && where_keys(p, t, k + 1, close))) return false;
    if (k > close) return false;
    i = close + 1;
    opt_alias(t, &i, b);
    if (!tmatch_run(&m, t, &i, b, "GROUP BY $A") || i != b) return false;
    p->slices = true;
    p->width = m.width;
    p->nitems = 2;
    return true;
}

/* ---- the read ------------------------------------------------------------------ */
/* An integer cell's value (the encodings sim_tds_col_plan gives integer
 * columns: fixed little-endian bytes, or a length byte first). */
static int64_t cell_int(const sim_tds_col_enc *e, const uint8_t *p) {
    int n = e->nbytes;
    if (!e->fixed) p++; /* INTN: its length byte, n when not NULL */
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--) v = (v << 8) | p[k];
    if (e->type_id == SIM_T_TINYINT) return (int64_t)v; /* unsigned */
    if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~0ull << (8 * n); /* sign */
    return (int64_t)v;
}

typedef struct key_at {
    const sim_store_snap *sn;
    const sim_tds_col_enc *enc;
    int col;
} key_at;

static bool row_null(const key_at *ka, size_t i, int64_t *v) {
    sim_trow r;
    sim_tstore_snap_row(ka->sn, i, &r);
    if (r.nulls[ka->col / 8] >> (ka->col % 8) & 1) return true;
    *v = cell_int(ka->enc, r.data + r.off[ka->col]);
    return false;
}

/* First row in [lo, hi) of a column that grows with the rowid (NULLs
 * first) whose key is >= v (with_nulls: whose key is not NULL, v unused). */
static size_t key_lower(const key_at *ka, size_t lo, size_t hi, bool non_null, int64_t v) {
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t x = 0;
        bool nul = row_null(ka, mid, &x);
        bool before = nul || (!non_null && x < v);
        if (before) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Would SQLite's plan for the statement come in rowid order? Its indexes
 * (pragma_index_list; CREATE INDEX makes none in the simulator): one led by
 * the key orders by it, a covering one by its own columns. */
static bool rowid_order(sqlite3 *rd, const sim_fast_table *p, const sim_store *st, int keycol) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(rd, "SELECT l.name, i.seqno, i.name FROM pragma_index_list(?1) l, pragma_index_info(l.name) i"
                               " ORDER BY l.seq, i.seqno", -1, &q, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(q, 1, p->table, -1, SQLITE_STATIC);
    bool ok = true;
    char cur[SIM_NAME_MAX * 2] = "", lead[SIM_NAME_MAX] = "";
    int ncol = 0, covered = 0;
    int nref = 0; /* referenced columns: the items' and the key */
    bool *ref = mcdc_calloc((size_t)sim_store_ncols(st) + 1, sizeof *ref);
    if (!ref) ok = false;
    for (int k = 0; ok && k < p->nitems; k++)
        if (p->items[k].kind == SIM_FT_COL) {
            int c = sim_store_col(st, p->items[k].col);
            if (c >= 0 && !ref[c]) { ref[c] = true; nref++; }
        }
    if (ok && keycol >= 0 && !ref[keycol]) { ref[keycol] = true; nref++; }
    /* one index at a time: rows come grouped by index, columns in order */
    for (int step = ok ? sqlite3_step(q) : SQLITE_DONE;; step = sqlite3_step(q)) {
        const char *ix = step == SQLITE_ROW ? (const char *)sqlite3_column_text(q, 0) : NULL;
        if (!ix || strcmp(ix, cur) != 0) {
            if (cur[0]) { /* judge the index just read */
                bool covers = covered == nref;
                int lc = sim_store_col(st, lead);
                if (p->has_where && lc == keycol)
                    ok = ok && (ncol == 1 ? sim_tstore_mono(st, keycol) : sim_tstore_strict(st, keycol));
                else if (covers)
                    ok = ok && ncol == 1 && lc >= 0 && sim_tstore_mono(st, lc);
            }
            if (!ix || !ok) break;
            snprintf(cur, sizeof cur, "%s", ix);
            ncol = covered = 0;
        }
        const char *cn = (const char *)sqlite3_column_text(q, 2);
        int c = cn ? sim_store_col(st, cn) : -1;
        if (ncol == 0) snprintf(lead, sizeof lead, "%s", cn ? cn : "");
        ncol++;
        if (c >= 0 && ref[c]) covered++;
    }
    sqlite3_finalize(q);
    mcdc_free(ref);
    return ok;
}

/* A group of result columns that goes to the sink as one cell: a run of
 * store columns lying together, or a run of constants. */
typedef struct fgroup {
    int k, n;  /* result columns [k, k + n) */
    int pos;   /* the store position of the first, or -1: constants */
} fgroup;

/* The slice of key v, floor(v / w), and the first key of the next one
 * (false: past INT64_MAX, no key there). */
static int64_t slice_of(int64_t v, int64_t w) { return v >= 0 ? v / w : (v + 1) / w - 1; }
static bool slice_next(int64_t sl, int64_t w, int64_t *first) {
    if (sl >= 0 && sl + 1 > INT64_MAX / w) return false;
    *first = (sl + 1) * w; /* sl < 0: in (v, 0] */
    return true;
}

/* Counts per slice from the store (the planner's GROUP BY): the key's
 * NULLs, then each non-empty slice in order, each a binary search. */
static int run_slices(sim_stmt *x, const sim_fast_table *p, sqlite3_stmt *orig, const xl_result *res, bool pinned,
                      uint64_t wseq, bool *done) {
    sim_session *s = x->s;
    const sim_sink *sink = x->sink;
    if (sqlite3_column_count(orig) != 2 || p->width < 1) return MCDC_OK;
    int64_t w = p->width;
    sim_store_snap snap;
    memset(&snap, 0, sizeof snap);
    bool ok = sim_tstore_acquire(s->srv->stores, &s->srv->mu, s->db->name, s->rd, p->table, pinned, wseq, false, &snap);
    int keycol = ok ? sim_store_col(snap.st, p->key) : -1;
    sim_type_id id = keycol >= 0 ? sim_store_col_meta(snap.st, keycol)->type.id : SIM_T_BIT;
    ok = ok && (id == SIM_T_TINYINT || id == SIM_T_SMALLINT || id == SIM_T_INT || id == SIM_T_BIGINT) &&
         sim_tstore_mono(snap.st, keycol);
    if (!ok) {
        if (snap.st) sim_store_release(&snap);
        return MCDC_OK;
    }
    sim_tds_col_enc kenc;
    sim_tds_col_plan(&kenc, sim_store_col_meta(snap.st, keycol));
    key_at ka = {&snap, &kenc, keycol};
    size_t nn = key_lower(&ka, snap.head, snap.count, true, 0); /* NULL keys: [head, nn) */
    size_t f = nn, e = snap.count;
    if (p->has_where) {
        if (!p->range) f = e;
        else {
            if (p->lo > INT64_MIN) f = key_lower(&ka, nn, snap.count, false, p->lo);
            if (p->hi < INT64_MAX) e = key_lower(&ka, f, snap.count, false, p->hi + 1);
        }
    }
    /* a NULL key's CASE is NULL: its group first, as SQLite sorts */
    bool null_group = nn > snap.head && (!p->has_where || p->nulls);
    /* the slice column's type is the general path's: its first value's */
    sim_value v[2];
    memset(v, 0, sizeof v);
    v[1].kind = SIM_V_INT;
    if (null_group) {
        v[0].kind = SIM_V_NULL;
        v[1].i = (int64_t)(nn - snap.head);
    } else if (e > f) {
        int64_t key = 0;
        row_null(&ka, f, &key);
        v[0].kind = SIM_V_INT;
        v[0].i = slice_of(key, w);
    }
    sim_column cols[2];
    char names[2][SIM_NAME_MAX];
    memset(cols, 0, sizeof cols);
    sim_result_columns_as(s->rd, orig, res, null_group || e > f ? v : NULL, cols, names, 2);
    *done = true;
    s->srv->table_queries++;
    if (sink->columns && sink->columns(sink->ctx, cols, 2)) x->aborted = true;
    int64_t groups = 0;
    if (!x->aborted && null_group) {
        groups++;
        if (sink->row && sink->row(sink->ctx, v, 2)) x->aborted = true;
    }
    v[0].kind = SIM_V_INT;
    for (size_t i = f; i < e && !x->aborted;) {
        int64_t key = 0, next = 0;
        row_null(&ka, i, &key);
        int64_t sl = slice_of(key, w);
        size_t j = slice_next(sl, w, &next) ? key_lower(&ka, i, e, false, next) : e;
        v[0].i = sl;
        v[1].i = (int64_t)(j - i);
        groups++;
        if (sink->row && sink->row(sink->ctx, v, 2)) x->aborted = true;
        i = j;
    }
    if (!x->aborted) {
        s->rowcount = groups;
        sim_send_done(x, groups, true, false);
    }
    sim_store_release(&snap);
    return MCDC_OK;
}

int sim_run_table_fast(sim_stmt *x, const xl_env *env, const sim_fast_table *p, sqlite3_stmt *orig,
                       const xl_result *res, const sim_snap_view *view, bool *done, mcdc_error *err) {
    sim_session *s = x->s;
    const sim_sink *sink = x->sink;
    *done = false;
    (void)err; /* nothing here fails the statement: the general path answers instead */
    /* the state the statement reads: the view's pin, or now */
    bool pinned = false;
    uint64_t wseq = 0;
    if (view) {
        const sim_snap_table *vt = sim_snap_view_table(view, p->table);
        if (!vt || vt->overlay || !view->pinned) return MCDC_OK;
        pinned = true;
        wseq = vt->wseq;
    }
    if (p->slices) return run_slices(x, p, orig, res, pinned, wseq, done);
    int n = sqlite3_column_count(orig);
    if (n != p->nitems || n > MCDC_COLUMNS_MAX || !sink->row_cells) return MCDC_OK;
    sim_column *cols = mcdc_calloc((size_t)n + 1, sizeof *cols);
    char (*names)[SIM_NAME_MAX] = mcdc_calloc((size_t)n + 1, SIM_NAME_MAX);
    int *src = mcdc_calloc((size_t)n + 1, sizeof *src);
    fgroup *g = mcdc_calloc((size_t)n + 1, sizeof *g);
    sim_cell *cells = mcdc_calloc((size_t)n + 1, sizeof *cells);
    uint32_t *coff = mcdc_calloc((size_t)n + 2, sizeof *coff); /* constants' offsets in fixed */
    uint8_t *bm = mcdc_calloc(((size_t)n + 7) / 8 + 1, 1); /* a row's NULL bits */
    mcdc_buf fixed = {0}, cq = {0};
    xl_result *r2 = mcdc_malloc(sizeof *r2);
    sim_tds_cellenc ce;
    bool ce_ok = sim_tds_cellenc_init(&ce, NULL) == MCDC_OK;
    sqlite3_stmt *cst = NULL;
    sim_store_snap snap;
    memset(&snap, 0, sizeof snap);
    bool ok = cols && names && src && g && cells && coff && bm && r2 && ce_ok &&
              sim_result_columns(s->rd, orig, res, cols, names, n);
    ok = ok && sim_tstore_acquire(s->srv->stores, &s->srv->mu, s->db->name, s->rd, p->table, pinned, wseq, !p->has_where,
                                  &snap);
    const sim_store *st = snap.st;
    int keycol = -1;
    if (ok && p->has_where) {
        keycol = sim_store_col(st, p->key);
        sim_type_id id = keycol >= 0 ? sim_store_col_meta(st, keycol)->type.id : SIM_T_BIT;
        ok = id == SIM_T_TINYINT || id == SIM_T_SMALLINT || id == SIM_T_INT || id == SIM_T_BIGINT;
    }
    /* every column the store's, of the result column's type */
    for (int i = 0; ok && i < n; i++) {
        src[i] = -1;
        if (p->items[i].kind != SIM_FT_COL) continue;
        src[i] = sim_store_col(st, p->items[i].col);
        ok = src[i] >= 0 && sim_col_same_type(sim_store_col_meta(st, src[i]), &cols[i]);
    }
    sim_null_map nm;
    memset(&nm, 0, sizeof nm);
    ok = ok && sim_null_map_init(&nm, src, n, snap.ncols) == MCDC_OK;
    ok = ok && rowid_order(s->rd, p, st, keycol);
    /* the constants: evaluated once by SQLite, encoded for their columns */
    if (ok && p->nconst > 0) {
        mcdc_error e2 = MCDC_ERROR_INIT;
        ok = tsql_xlate(env, p->consts, 0, p->nconsts_tok, &cq, r2, &e2) == MCDC_OK && mcdc_buf_cstr(&cq, NULL) == MCDC_OK &&
             sqlite3_prepare_v2(s->rd, (const char *)cq.data, -1, &cst, NULL) == SQLITE_OK &&
             sqlite3_column_count(cst) == p->nconst && sim_bind_vars(s, cst, &e2) == MCDC_OK && sqlite3_step(cst) == SQLITE_ROW;
        for (int i = 0; ok && i < n; i++) {
            if (p->items[i].kind != SIM_FT_CONST) continue;
            sim_value v;
            sim_store_value_of(&v, sqlite3_column_value(cst, p->items[i].cidx));
            sim_tds_col_enc e;
            sim_tds_col_plan(&e, &cols[i]);
            coff[i] = (uint32_t)fixed.len;
            ok = sim_tds_cellenc_put(&ce, &e, &v, &fixed, NULL) == MCDC_OK;
            coff[i + 1] = (uint32_t)fixed.len;
            if (v.kind == SIM_V_NULL) sim_null_map_fix(&nm, i, true);
        }
    }
    int rc = MCDC_OK;
    if (ok) {
        *done = true;
        s->srv->table_queries++;
        /* groups: runs of adjacent store columns, runs of constants */
        int ng = 0;
        for (int i = 0; i < n; i++) {
            bool col = p->items[i].kind == SIM_FT_COL;
            int pos = col ? sim_store_col_pos(st, src[i]) : -1;
            if (ng > 0 && ((col && g[ng - 1].pos >= 0 && g[ng - 1].pos + g[ng - 1].n == pos) || (!col && g[ng - 1].pos < 0))) {
                g[ng - 1].n++;
                continue;
            }
            g[ng++] = (fgroup){i, 1, pos};
        }
        for (int q = 0; q < ng; q++)
            if (g[q].pos < 0) {
                const fgroup *f = &g[q];
                cells[q] = (sim_cell){fixed.data + coff[f->k], coff[f->k + f->n] - coff[f->k], (uint32_t)f->n, &coff[f->k]};
            }
        /* the rows: all, or those of the key's NULLs and range (two
         * stretches of rowid order when the key grows with it) */
        sim_tds_col_enc kenc;
        memset(&kenc, 0, sizeof kenc);
        if (keycol >= 0) sim_tds_col_plan(&kenc, sim_store_col_meta(st, keycol));
        key_at ka = {&snap, &kenc, keycol};
        size_t spans[2][2] = {{snap.head, snap.count}, {0, 0}};
        int nspans = 1;
        bool filter = false;
        if (p->has_where && sim_tstore_mono(st, keycol)) {
            size_t nn = key_lower(&ka, snap.head, snap.count, true, 0);
            nspans = 0;
            if (p->nulls && nn > snap.head) { spans[nspans][0] = snap.head; spans[nspans][1] = nn; nspans++; }
            if (p->range) {
                size_t f = key_lower(&ka, nn, snap.count, false, p->lo);
                size_t e = p->hi == INT64_MAX ? snap.count : key_lower(&ka, f, snap.count, false, p->hi + 1);
                if (e > f) { spans[nspans][0] = f; spans[nspans][1] = e; nspans++; }
            }
        } else if (p->has_where) {
            filter = true;
        }
        if (sink->columns && sink->columns(sink->ctx, cols, n)) x->aborted = true;
        int64_t cnt = 0;
        for (int sp = 0; sp < nspans && !x->aborted; sp++)
            for (size_t i = spans[sp][0]; i < spans[sp][1]; i++) {
                if (filter) {
                    int64_t kv = 0;
                    bool nul = row_null(&ka, i, &kv);
                    if (nul ? !p->nulls : !(p->range && kv >= p->lo && kv <= p->hi)) continue;
                }
                sim_trow r;
                sim_tstore_snap_row(&snap, i, &r);
                for (int q = 0; q < ng; q++) {
                    int a = g[q].pos;
                    if (a >= 0) cells[q] = (sim_cell){r.data + r.off[a], r.off[a + g[q].n] - r.off[a], (uint32_t)g[q].n, &r.off[a]};
                }
                sim_null_map_row(&nm, r.nulls, bm);
                cnt++;
                if (sink->row_cells(sink->ctx, cells, ng, bm, n)) { x->aborted = true; break; }
            }
        if (!x->aborted) {
            s->rowcount = cnt;
            sim_send_done(x, cnt, true, false);
        }
    }
    if (snap.st) sim_store_release(&snap);
    sqlite3_finalize(cst);
    if (ce_ok) sim_tds_cellenc_free(&ce);
    mcdc_buf_free(&fixed);
    mcdc_buf_free(&cq);
    mcdc_free(r2);
    mcdc_free(cols);
    mcdc_free(names);
    mcdc_free(src);
    mcdc_free(g);
    mcdc_free(cells);
    mcdc_free(coff);
    mcdc_free(bm);
    sim_null_map_free(&nm);
    return rc;
}
