/*
 * sim_engine_fast.c - the change-table read fast path.
 *
 * The reader's change query (reference §3.1 row 8, mcdc_cdc_changes_sql):
 *
 *   SELECT CONVERT(varchar(22), c.__$start_lsn, 1) AS [_start_lsn],
 *          CONVERT(varchar(22), c.__$seqval, 1) AS [_seqval],
 *          c.__$operation AS [_operation], [c.__$command_id AS [_command_id],]
 *          <commit time over m.*> AS [_commit_ts], c.[col] | CAST(NULL AS t) AS [col], ...
 *   FROM cdc.[<ci>_CT] AS c INNER JOIN cdc.lsn_time_mapping AS m
 *     ON m.start_lsn = c.__$start_lsn
 *   WHERE <conditions on c only> ORDER BY <c only>
 *
 * Through the general path every row pays a B-tree seek into the mapping
 * and three SQL function calls (two LSN conversions and the commit-time
 * expression). Here the query runs as a plain range scan of the change
 * table (clustered on the reader's order) without the join; the commit time
 * is evaluated once per transaction (its start LSN) by the same translated
 * expression, rows whose LSN has no mapping entry are dropped (the inner
 * join), and the LSNs are formatted as style-1 hex in C. Column metadata
 * come from the general path's translation of the original statement, so
 * both paths answer the same columns, rows and values (test_sim_fast.c
 * compares them).
 *
 * sim_fast_match recognises the shape on tokens; anything else (another
 * item, a join condition, a reference to m outside the commit time) leaves
 * the statement to the general path.
 *
 * When the WHERE clause is the reader's ("c.__$start_lsn BETWEEN x AND y",
 * optionally AND its resume key) and the ORDER BY the clustered key, the
 * rows come from the change store instead (sim_store.h, sim_fast_store_emit):
 * x, y and the key literals are evaluated by SQLite once, the range is two
 * binary searches, and each row goes to the sink as pre-encoded cells
 * (sink->row_cells) with the LSN texts and the commit time (once per
 * transaction, through the same translated expression) put in. The store
 * serves only columns whose type and nullability match the result column's,
 * so the bytes are the general path's; otherwise SQLite answers as above.
 * The split-point query counts and picks its tile bounds from the store the
 * same way.
 */
#include "sim_engine_int.h"

#include <stdio.h>
#include <string.h>

static const tsql_tok TOK_SELECT = {TK_IDENT, "SELECT", 6, 0};
static const tsql_tok TOK_FROM = {TK_IDENT, "FROM", 4, 0};
static const tsql_tok TOK_C = {TK_IDENT, "c", 1, 0};
static const tsql_tok TOK_DOT = {TK_OP, ".", 1, 0};
static const tsql_tok TOK_COMMA = {TK_OP, ",", 1, 0};
static const tsql_tok TOK_START_LSN = {TK_IDENT, "__$start_lsn", 12, 0};
static const tsql_tok TOK_EOF = {TK_EOF, "", 0, 0};

bool sim_tok_name_is(const tsql_tok *t, const char *name) {
    if (t->t != TK_IDENT && t->t != TK_QIDENT) return false;
    char buf[MCDC_IDENT_BYTES_MAX];
    tsql_tok_text(t, buf, sizeof buf);
    return mcdc_str_ieq(buf, name);
}
#define name_is sim_tok_name_is

/* "<alias> . <col>" at t[k]: the column's decoded name into col. */
static bool qualified(const tsql_tok *t, int k, int end, const char *alias, char *col, size_t cap) {
    if (k + 2 >= end) return false;
    if (!name_is(&t[k], alias) || !tsql_tok_op(&t[k + 1], ".")) return false;
    if (t[k + 2].t != TK_IDENT && t[k + 2].t != TK_QIDENT) return false;
    tsql_tok_text(&t[k + 2], col, cap);
    return true;
}

/* Does [a, b) mention "<alias> ." anywhere? */
static bool mentions(const tsql_tok *t, int a, int b, const char *alias) {
    for (int k = a; k + 1 < b; k++)
        if (name_is(&t[k], alias) && tsql_tok_op(&t[k + 1], ".")) return true;
    return false;
}

int sim_null_map_init(sim_null_map *m, const int *src, int n, int store_cols) {
    memset(m, 0, sizeof *m);
    m->n = n;
    m->src = src;
    m->nb = ((size_t)n + 7) / 8;
    m->snb = ((size_t)store_cols + 7) / 8;
    m->words = n <= 64 && store_cols <= 64;
    m->fixed = mcdc_calloc(m->nb + 1, 1);
    m->seg = mcdc_calloc(3 * (size_t)n + 3, sizeof *m->seg);
    if (!m->fixed || !m->seg) {
        sim_null_map_free(m);
        return MCDC_E_NOMEM;
    }
    for (int k = 0; m->words && k < n; k++) {
        if (src[k] < 0) continue;
        int *last = m->nseg ? &m->seg[3 * (m->nseg - 1)] : NULL;
        if (last && last[0] + last[2] == k && last[1] + last[2] == src[k]) {
            last[2]++;
            continue;
        }
        m->seg[3 * m->nseg] = k;
        m->seg[3 * m->nseg + 1] = src[k];
        m->seg[3 * m->nseg + 2] = 1;
        m->nseg++;
    }
    return MCDC_OK;
}

void sim_null_map_free(sim_null_map *m) {
    mcdc_free(m->fixed);
    mcdc_free(m->seg);
    m->fixed = NULL;
    m->seg = NULL;
}

int sim_toks_word_at_depth0(const tsql_tok *t, int a, int b, const char *word) {
    for (int k = a, d = 0; k < b; k++) {
        if (tsql_tok_op(&t[k], "(")) d++;
        else if (tsql_tok_op(&t[k], ")")) d--;
        else if (d == 0 && tsql_tok_is(&t[k], word)) return k;
    }
    return -1;
}

int sim_toks_list_items(const tsql_tok *t, int a, int b) {
    int n = 1;
    for (int q = a, d = 0; q < b; q++) {
        if (tsql_tok_op(&t[q], "(")) d++;
        else if (tsql_tok_op(&t[q], ")")) d--;
        else if (d == 0 && tsql_tok_op(&t[q], ",")) n++;
    }
    return n;
}

bool sim_toks_push(tsql_tok **arr, int *n, int *cap, const tsql_tok *tok) {
    if (*n + 2 > *cap) {
        int nc = *cap ? *cap * 2 : 64;
        tsql_tok *na = mcdc_malloc((size_t)nc * sizeof *na);
        if (!na) return false;
        if (*arr) memcpy(na, *arr, (size_t)*n * sizeof *na);
        mcdc_free(*arr);
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = *tok;
    (*arr)[*n] = TOK_EOF;
    return true;
}

void sim_fast_plan_free(sim_fast_plan *p) {
    if (!p) return;
    mcdc_free(p->items);
    mcdc_free(p->reduced);
    mcdc_free(p->commit);
    mcdc_free(p->bounds);
    memset(p, 0, sizeof *p);
}

static bool shape_match(const tsql_tok *t, int a, int b, const char *shape, int caps[][2], int ncaps);
static bool range_match(sim_fast_plan *p, const tsql_tok *t, int rest, int b);
static bool bounds_tokens(tsql_tok **out, int *nout, const tsql_tok *t, int caps[][2], int ncaps);

bool sim_fast_match(sim_fast_plan *p, const tsql_tok *t, int a, int b) {
    memset(p, 0, sizeof *p);
    if (b - a < 30 || !tsql_tok_is(&t[a], "SELECT")) return false;
    int from = sim_toks_word_at_depth0(t, a + 1, b, "FROM"), d = 0;
    if (from < 0) return false;
    /* FROM cdc.[<ci>_CT] AS c INNER JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn */
    int k = from + 1;
    char ct[MCDC_IDENT_BYTES_MAX], col[MCDC_IDENT_BYTES_MAX];
    if (k + 20 > b || !name_is(&t[k], "cdc") || !tsql_tok_op(&t[k + 1], ".")) return false;
    if (t[k + 2].t != TK_IDENT && t[k + 2].t != TK_QIDENT) return false;
    tsql_tok_text(&t[k + 2], ct, sizeof ct);
    size_t ctl = strlen(ct);
    if (ctl < 4 || !mcdc_str_ieq(ct + ctl - 3, "_CT")) return false;
    snprintf(p->ci, sizeof p->ci, "%.*s", (int)(ctl - 3), ct);
    int ct_tok = k;
    k += 3;
    if (!tsql_tok_is(&t[k], "AS") || !name_is(&t[k + 1], "c")) return false;
    k += 2;
    int ct_end = k;
    if (!tsql_tok_is(&t[k], "INNER") || !tsql_tok_is(&t[k + 1], "JOIN")) return false;
    k += 2;
    int map_tok = k;
    if (!name_is(&t[k], "cdc") || !tsql_tok_op(&t[k + 1], ".") || !name_is(&t[k + 2], "lsn_time_mapping") ||
        !tsql_tok_is(&t[k + 3], "AS") || !name_is(&t[k + 4], "m") || !tsql_tok_is(&t[k + 5], "ON"))
        return false;
    int map_end = k + 5;
    k += 6;
    if (!qualified(t, k, b, "m", col, sizeof col) || !mcdc_str_ieq(col, "start_lsn") || !tsql_tok_op(&t[k + 3], "=") ||
        !qualified(t, k + 4, b, "c", col, sizeof col) || !mcdc_str_ieq(col, "__$start_lsn"))
        return false;
    k += 7;
    int rest = k; /* WHERE ... ORDER BY ...: on c only */
    if (rest < b && !tsql_tok_is(&t[rest], "WHERE") && !tsql_tok_is(&t[rest], "ORDER")) return false;
    if (mentions(t, rest, b, "m")) return false;
    for (int q = rest; q < b; q++)
        if (tsql_tok_is(&t[q], "JOIN") || tsql_tok_is(&t[q], "UNION") || tsql_tok_is(&t[q], "GROUP") ||
            tsql_tok_is(&t[q], "FOR") || tsql_tok_is(&t[q], "OPTION"))
            return false;
    int nitems = sim_toks_list_items(t, a + 1, from);
    if (nitems > MCDC_COLUMNS_MAX) return false;
    p->items = mcdc_calloc((size_t)nitems, sizeof *p->items);
    if (!p->items) return false;
    int rcap = 0, ccap = 0;
    bool ok = sim_toks_push(&p->reduced, &p->nreduced, &rcap, &TOK_SELECT) &&
              sim_toks_push(&p->reduced, &p->nreduced, &rcap, &TOK_C) && sim_toks_push(&p->reduced, &p->nreduced, &rcap, &TOK_DOT) &&
              sim_toks_push(&p->reduced, &p->nreduced, &rcap, &TOK_START_LSN);
    int nsrc = 1, ncommit = 0;
    int s = a + 1;
    d = 0;
    for (int q = a + 1; q <= from && ok; q++) {
        if (q < from && tsql_tok_op(&t[q], "(")) { d++; continue; }
        if (q < from && tsql_tok_op(&t[q], ")")) { d--; continue; }
        if (q < from && !(d == 0 && tsql_tok_op(&t[q], ","))) continue;
        /* item [s, q): strip "AS alias" */
        int e = q;
        bool aliased = e - s >= 3 && tsql_tok_is(&t[e - 2], "AS") && (t[e - 1].t == TK_IDENT || t[e - 1].t == TK_QIDENT);
        char alias[MCDC_IDENT_BYTES_MAX] = "";
        if (aliased) {
            tsql_tok_text(&t[e - 1], alias, sizeof alias);
            e -= 2;
        }
        sim_fast_item *it = &p->items[p->nitems];
        if (e - s == 3 && qualified(t, s, e, "c", col, sizeof col)) {
            it->kind = SIM_FAST_COL;
            snprintf(it->col, sizeof it->col, "%s", col);
            it->src = nsrc++;
            ok = sim_toks_push(&p->reduced, &p->nreduced, &rcap, &TOK_COMMA) &&
                 sim_toks_push(&p->reduced, &p->nreduced, &rcap, &t[s]) && sim_toks_push(&p->reduced, &p->nreduced, &rcap, &t[s + 1]) &&
                 sim_toks_push(&p->reduced, &p->nreduced, &rcap, &t[s + 2]);
        } else if (e - s == 13 && tsql_tok_is(&t[s], "CONVERT") && tsql_tok_op(&t[s + 1], "(") &&
                   name_is(&t[s + 2], "varchar") && tsql_tok_op(&t[s + 3], "(") && t[s + 4].t == TK_NUM &&
                   t[s + 4].n == 2 && memcmp(t[s + 4].s, "22", 2) == 0 && tsql_tok_op(&t[s + 5], ")") &&
                   tsql_tok_op(&t[s + 6], ",") && qualified(t, s + 7, e, "c", col, sizeof col) &&
                   (mcdc_str_ieq(col, "__$start_lsn") || mcdc_str_ieq(col, "__$seqval")) &&
                   tsql_tok_op(&t[s + 10], ",") && t[s + 11].t == TK_NUM && t[s + 11].n == 1 && t[s + 11].s[0] == '1' &&
                   tsql_tok_op(&t[s + 12], ")")) {
            it->kind = SIM_FAST_LSN_HEX;
            snprintf(it->col, sizeof it->col, "%s", col);
            it->src = nsrc++;
            ok = sim_toks_push(&p->reduced, &p->nreduced, &rcap, &TOK_COMMA) &&
                 sim_toks_push(&p->reduced, &p->nreduced, &rcap, &t[s + 7]) &&
                 sim_toks_push(&p->reduced, &p->nreduced, &rcap, &t[s + 8]) &&
                 sim_toks_push(&p->reduced, &p->nreduced, &rcap, &t[s + 9]);
        } else if (e - s >= 6 && tsql_tok_is(&t[s], "CAST") && tsql_tok_op(&t[s + 1], "(") && tsql_tok_is(&t[s + 2], "NULL") &&
                   tsql_tok_is(&t[s + 3], "AS") && tsql_tok_op(&t[e - 1], ")") && aliased) {
            it->kind = SIM_FAST_NULL;
        } else if (aliased && mcdc_str_ieq(alias, "_commit_ts") && ncommit == 0 && !mentions(t, s, e, "c")) {
            it->kind = SIM_FAST_COMMIT;
            ncommit++;
            ok = sim_toks_push(&p->commit, &p->ncommit, &ccap, &TOK_SELECT);
            for (int z = s; z < e && ok; z++) ok = sim_toks_push(&p->commit, &p->ncommit, &ccap, &t[z]);
            if (ok) ok = sim_toks_push(&p->commit, &p->ncommit, &ccap, &TOK_FROM);
            for (int z = map_tok; z < map_end && ok; z++) ok = sim_toks_push(&p->commit, &p->ncommit, &ccap, &t[z]);
        } else {
            ok = false;
        }
        if (!ok) break;
        p->nitems++;
        s = q + 1;
    }
    /* FROM cdc.[<ci>_CT] AS c, then WHERE/ORDER BY as written */
    if (ok) ok = sim_toks_push(&p->reduced, &p->nreduced, &rcap, &TOK_FROM);
    for (int z = ct_tok; z < ct_end && ok; z++) ok = sim_toks_push(&p->reduced, &p->nreduced, &rcap, &t[z]);
    for (int z = rest; z < b && ok; z++) ok = sim_toks_push(&p->reduced, &p->nreduced, &rcap, &t[z]);
    if (!ok || ncommit != 1 || p->nitems != nitems) {
        sim_fast_plan_free(p);
        return false;
    }
    p->nsrc = nsrc;
    if (!range_match(p, t, rest, b)) p->range = SIM_FAST_RANGE_NONE;
    return true;
}

/* "0x" + 20 hex digits of a 10-byte LSN into out[22] (no NUL). */
static void hex10(const uint8_t *b, uint8_t *out) {
    out[0] = '0';
    out[1] = 'x';
    for (int k = 0; k < 10; k++) memcpy(out + 2 + 2 * k, mcdc_hex_pairs + 2 * b[k], 2);
}

/* CONVERT(varchar(22), blob, 1): "0x" + hex, cut at 22 characters. */
static size_t lsn_hex(const uint8_t *b, size_t n, char out[24]) {
    size_t o = 0;
    out[o++] = '0';
    out[o++] = 'x';
    for (size_t k = 0; k < n && o + 2 <= 22; k++, o += 2) memcpy(out + o, mcdc_hex_pairs + 2 * b[k], 2);
    out[o] = 0;
    return o;
}

int sim_fast_emit(sqlite3 *c, sqlite3_stmt *red, sqlite3_stmt *commit, const sim_fast_plan *p, int commit_param,
                  const sim_sink *sink, int64_t *rows, bool *aborted, mcdc_error *err) {
    int n = p->nitems;
    *rows = 0;
    sim_value *vals = mcdc_calloc((size_t)n + 1, sizeof *vals);
    char (*hex)[24] = mcdc_calloc((size_t)n + 1, sizeof *hex);
    if (!vals || !hex) {
        mcdc_free(vals);
        mcdc_free(hex);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    /* the commit time of the current start LSN (copied: the commit
     * statement is reset before the rows that use it are sent) */
    uint8_t cur[16];
    size_t curn = SIZE_MAX;
    bool have_commit = false;
    sim_value cval = {0};
    mcdc_buf cbuf = {0};
    int rc = MCDC_OK;
    int64_t cnt = 0;
    int step = SQLITE_DONE;
    while (!*aborted && (step = sqlite3_step(red)) == SQLITE_ROW) {
        sqlite3_value *lv = sqlite3_column_value(red, 0);
        const uint8_t *lsn = sqlite3_value_blob(lv);
        size_t ln = (size_t)sqlite3_value_bytes(lv);
        if (!lsn) continue; /* the join never matches a NULL */
        if (ln != curn || ln > sizeof cur || memcmp(cur, lsn, ln) != 0) {
            curn = ln <= sizeof cur ? ln : SIZE_MAX;
            if (curn != SIZE_MAX) memcpy(cur, lsn, ln);
            sqlite3_reset(commit);
            sqlite3_bind_blob(commit, commit_param, lsn, (int)ln, SQLITE_TRANSIENT);
            int cs = sqlite3_step(commit);
            have_commit = cs == SQLITE_ROW;
            if (cs != SQLITE_ROW && cs != SQLITE_DONE) { rc = sim_sqlite_err(c, cs, err); break; }
            if (have_commit) {
                sim_store_value_of(&cval, sqlite3_column_value(commit, 0));
                if (cval.kind == SIM_V_TEXT || cval.kind == SIM_V_BLOB) {
                    mcdc_buf_reset(&cbuf);
                    rc = mcdc_buf_append(&cbuf, cval.p, cval.n, err);
                    if (rc != MCDC_OK) break;
                    cval.p = cbuf.data;
                }
            }
            sqlite3_reset(commit);
        }
        if (!have_commit) continue; /* no mapping entry: the inner join drops the row */
        for (int k = 0; k < n; k++) {
            const sim_fast_item *it = &p->items[k];
            sim_value *v = &vals[k];
            switch (it->kind) {
            case SIM_FAST_COL: sim_store_value_of(v, sqlite3_column_value(red, it->src)); break;
            case SIM_FAST_LSN_HEX: {
                sqlite3_value *bv = sqlite3_column_value(red, it->src);
                if (sqlite3_value_type(bv) == SQLITE_NULL) { v->kind = SIM_V_NULL; break; }
                const uint8_t *bb = sqlite3_value_blob(bv);
                v->kind = SIM_V_TEXT;
                v->n = lsn_hex(bb, (size_t)sqlite3_value_bytes(bv), hex[k]);
                v->p = (const uint8_t *)hex[k];
                break;
            }
            case SIM_FAST_NULL: v->kind = SIM_V_NULL; break;
            case SIM_FAST_COMMIT: *v = cval; break;
            }
        }
        cnt++;
        if (sink->row && sink->row(sink->ctx, vals, n)) { *aborted = true; break; }
    }
    if (rc == MCDC_OK && !*aborted && step != SQLITE_DONE) rc = sim_sqlite_err(c, step, err);
    *rows = cnt;
    mcdc_buf_free(&cbuf);
    mcdc_free(vals);
    mcdc_free(hex);
    return rc;
}

/* ---- the reader's split-point query ------------------------------------ */
/* mcdc_cdc_split_points (parallel reads) asks for NTILE(n) boundaries of a
 * range; SQLite answers it by materialising the window and sorting it for
 * the GROUP BY (about 1 us a row). The tiles only depend on the row count
 * and the ordered LSNs: counted, then read off one scan of the clustered
 * change table. */
static const char SPLIT_SHAPE[] =
    "SELECT CONVERT(varchar(22), MAX(t.lsn), 1) AS bound, CONVERT(varchar(22), sys.fn_cdc_increment_lsn(MAX(t.lsn)), 1)"
    " AS next_start, COUNT_BIG(*) AS row_count FROM (SELECT c.__$start_lsn AS lsn, NTILE(@N) OVER (ORDER BY"
    " c.__$start_lsn) AS tile FROM cdc.@T AS c WHERE @W) AS t GROUP BY t.tile ORDER BY t.tile";
static const char SPLIT_SCAN[] = "SELECT c.__$start_lsn FROM cdc.@T AS c WHERE @W ORDER BY c.__$start_lsn";

bool sim_tok_same(const tsql_tok *x, const tsql_tok *y) {
    bool xn = x->t == TK_IDENT || x->t == TK_QIDENT, yn = y->t == TK_IDENT || y->t == TK_QIDENT;
    if (xn || yn) {
        if (!(xn && yn)) return false;
        char bx[MCDC_IDENT_BYTES_MAX], by[MCDC_IDENT_BYTES_MAX];
        tsql_tok_text(x, bx, sizeof bx);
        tsql_tok_text(y, by, sizeof by);
        return mcdc_str_ieq(bx, by);
    }
    return x->t == y->t && x->n == y->n && mcdc_str_nieq(x->s, y->s, (size_t)x->n);
}

/* Matches t[a, b) against a template: @N and @T stand for one token, @W for
 * a span up to the template's next token at depth 0. caps[k] = {from, to}
 * in template order. */
static bool shape_match(const tsql_tok *t, int a, int b, const char *shape, int caps[][2], int ncaps) {
    tsql_tok *st = NULL;
    int ns = 0, c = 0, k = a;
    if (tsql_lex(&st, &ns, shape, strlen(shape), NULL) != MCDC_OK) return false;
    bool ok = true;
    for (int i = 0; i < ns && ok; i++) {
        if (st[i].t == TK_VAR && st[i].n == 2 && (st[i].s[1] == 'N' || st[i].s[1] == 'T')) {
            ok = k < b && c < ncaps;
            if (ok) { caps[c][0] = k; caps[c][1] = k + 1; c++; k++; }
        } else if (st[i].t == TK_VAR && st[i].n == 2 && st[i].s[1] == 'W') {
            ok = c < ncaps;
            int d = 0, e = k;
            for (; ok && e < b; e++) {
                if (d == 0 && i + 1 < ns && st[i + 1].t != TK_EOF && sim_tok_same(&t[e], &st[i + 1])) break;
                if (tsql_tok_op(&t[e], "(")) d++;
                else if (tsql_tok_op(&t[e], ")")) d--;
                if (d < 0) ok = false;
            }
            ok = ok && (e < b || i + 1 >= ns) && e > k;
            if (ok) { caps[c][0] = k; caps[c][1] = e; c++; k = e; }
        } else {
            ok = k < b && sim_tok_same(&t[k], &st[i]);
            k++;
        }
    }
    mcdc_free(st);
    return ok && k == b && c == ncaps;
}

void sim_fast_split_free(sim_fast_split *p) {
    if (!p) return;
    mcdc_free(p->bounds);
    mcdc_free(p->scan);
    mcdc_free(p->shape);
    memset(p, 0, sizeof *p);
}

bool sim_fast_match_split(sim_fast_split *p, const tsql_tok *t, int a, int b) {
    memset(p, 0, sizeof *p);
    int caps[3][2];
    if (b - a < 60 || !tsql_tok_is(&t[a], "SELECT") || !shape_match(t, a, b, SPLIT_SHAPE, caps, 3)) return false;
    const tsql_tok *nt = &t[caps[0][0]], *ct = &t[caps[1][0]];
    if (nt->t != TK_NUM || nt->n > 9) return false;
    int64_t tiles = 0;
    for (int k = 0; k < nt->n; k++) {
        if (nt->s[k] < '0' || nt->s[k] > '9') return false;
        tiles = tiles * 10 + (nt->s[k] - '0');
    }
    char ctn[MCDC_IDENT_BYTES_MAX];
    tsql_tok_text(ct, ctn, sizeof ctn);
    size_t cl = strlen(ctn);
    if (tiles < 1 || cl < 4 || !mcdc_str_ieq(ctn + cl - 3, "_CT")) return false;
    /* the scan: SPLIT_SCAN with @T and @W put in */
    int nsc = 0;
    if (tsql_lex(&p->shape, &nsc, SPLIT_SCAN, strlen(SPLIT_SCAN), NULL) != MCDC_OK) return false;
    int wn = caps[2][1] - caps[2][0];
    p->scan = mcdc_malloc(((size_t)nsc + (size_t)wn + 1) * sizeof *p->scan);
    if (!p->scan) { sim_fast_split_free(p); return false; }
    for (int i = 0; i < nsc; i++) {
        if (p->shape[i].t == TK_VAR && p->shape[i].n == 2 && p->shape[i].s[1] == 'T') p->scan[p->nscan++] = *ct;
        else if (p->shape[i].t == TK_VAR && p->shape[i].n == 2 && p->shape[i].s[1] == 'W')
            for (int k = caps[2][0]; k < caps[2][1]; k++) p->scan[p->nscan++] = t[k];
        else p->scan[p->nscan++] = p->shape[i];
    }
    p->scan[p->nscan] = TOK_EOF;
    p->tiles = tiles;
    snprintf(p->ci, sizeof p->ci, "%.*s", (int)(cl - 3), ctn);
    int wc[2][2];
    if (shape_match(t, caps[2][0], caps[2][1], "c.__$start_lsn BETWEEN @W AND @W", wc, 2) &&
        !bounds_tokens(&p->bounds, &p->nbounds, t, wc, 2))
        p->bounds = NULL;
    return true;
}

/* fn_cdc_increment_lsn: the value right-aligned in 10 bytes, plus one. */
static void lsn_inc(const uint8_t *b, size_t n, uint8_t out[10]) {
    memset(out, 0, 10);
    if (n > 10) n = 10;
    if (n) memcpy(out + (10 - n), b, n);
    for (int k = 9; k >= 0; k--)
        if (++out[k] != 0) break;
}

/* One tile's row: its last LSN, the LSN after it, its row count. */
static int tile_row(const sim_sink *sink, const uint8_t *lsn, size_t ln, int64_t size) {
    char bound[24], next[24];
    uint8_t inc[10];
    sim_value v[3];
    memset(v, 0, sizeof v);
    lsn_inc(lsn, ln, inc);
    v[0].kind = SIM_V_TEXT;
    v[0].n = lsn_hex(lsn, ln, bound);
    v[0].p = (const uint8_t *)bound;
    v[1].kind = SIM_V_TEXT;
    v[1].n = lsn_hex(inc, 10, next);
    v[1].p = (const uint8_t *)next;
    v[2].kind = SIM_V_INT;
    v[2].i = size;
    return sink->row ? sink->row(sink->ctx, v, 3) : 0;
}

int sim_fast_split_emit(sqlite3 *c, sqlite3_stmt *scan, int64_t tiles, const sim_sink *sink, int64_t *rows,
                        bool *aborted, mcdc_error *err) {
    *rows = 0;
    int64_t total = 0;
    int step;
    while ((step = sqlite3_step(scan)) == SQLITE_ROW) total++;
    if (step != SQLITE_DONE) return sim_sqlite_err(c, step, err);
    sqlite3_reset(scan);
    if (total == 0) return MCDC_OK;
    int64_t base = total / tiles, extra = total % tiles;
    int64_t tile = 1, in_tile = 0, size = base + (extra > 0 ? 1 : 0), cnt = 0;
    while (!*aborted && (step = sqlite3_step(scan)) == SQLITE_ROW) {
        if (++in_tile < size) continue;
        sqlite3_value *lv = sqlite3_column_value(scan, 0);
        cnt++;
        if (tile_row(sink, sqlite3_value_blob(lv), (size_t)sqlite3_value_bytes(lv), size)) { *aborted = true; break; }
        tile++;
        in_tile = 0;
        size = base + (tile <= extra ? 1 : 0);
        if (size == 0) break; /* fewer rows than tiles: the rest are empty */
    }
    *rows = cnt;
    if (!*aborted && step != SQLITE_DONE && step != SQLITE_ROW) return sim_sqlite_err(c, step, err);
    return MCDC_OK;
}

/* ---- the change store read path ------------------------------------------ */
static const char RANGE_BETWEEN[] = "WHERE c.__$start_lsn BETWEEN @W AND @W ORDER BY @W";
static const char RANGE_AFTER[] =
    "WHERE c.__$start_lsn BETWEEN @W AND @W AND (c.__$start_lsn > @W OR (c.__$start_lsn = @W AND"
    " (c.__$command_id > @W OR (c.__$command_id = @W AND (c.__$seqval > @W OR (c.__$seqval = @W AND"
    " c.__$operation > @W)))))) ORDER BY @W";
static const char RANGE_AFTER3[] =
    "WHERE c.__$start_lsn BETWEEN @W AND @W AND (c.__$start_lsn > @W OR (c.__$start_lsn = @W AND"
    " (c.__$seqval > @W OR (c.__$seqval = @W AND c.__$operation > @W)))) ORDER BY @W";
static const char ORDER4[] = "c.__$start_lsn, c.__$command_id, c.__$seqval, c.__$operation";
static const char ORDER3[] = "c.__$start_lsn, c.__$seqval, c.__$operation";

/* "SELECT e1, e2, ..." from captured spans into *out. */
static bool bounds_tokens(tsql_tok **out, int *nout, const tsql_tok *t, int caps[][2], int ncaps) {
    int n = 1;
    for (int k = 0; k < ncaps; k++) n += caps[k][1] - caps[k][0] + 1;
    tsql_tok *o = mcdc_malloc(((size_t)n + 1) * sizeof *o);
    if (!o) return false;
    int m = 0;
    o[m++] = TOK_SELECT;
    for (int k = 0; k < ncaps; k++) {
        if (k) o[m++] = TOK_COMMA;
        for (int z = caps[k][0]; z < caps[k][1]; z++) o[m++] = t[z];
    }
    o[m] = TOK_EOF;
    *out = o;
    *nout = m;
    return true;
}

static bool range_match(sim_fast_plan *p, const tsql_tok *t, int rest, int b) {
    int caps[10][2];
    struct { const char *shape; int ncaps; sim_fast_range r; } shapes[] = {
        {RANGE_AFTER, 10, SIM_FAST_RANGE_AFTER}, {RANGE_AFTER3, 8, SIM_FAST_RANGE_AFTER3},
        {RANGE_BETWEEN, 3, SIM_FAST_RANGE_BETWEEN}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        if (!shape_match(t, rest, b, shapes[k].shape, caps, shapes[k].ncaps)) continue;
        /* a bound is one expression: nothing at depth 0 joins another */
        bool one = true;
        for (int w = 0; w < 2 && one; w++)
            for (int z = caps[w][0], d = 0; z < caps[w][1] && one; z++) {
                if (tsql_tok_op(&t[z], "(")) d++;
                else if (tsql_tok_op(&t[z], ")")) d--;
                else if (d == 0 && (tsql_tok_is(&t[z], "AND") || tsql_tok_is(&t[z], "OR"))) one = false;
            }
        if (!one) continue;
        int oc[1][2];
        int oa = caps[shapes[k].ncaps - 1][0], ob = caps[shapes[k].ncaps - 1][1];
        bool o4 = shape_match(t, oa, ob, ORDER4, oc, 0), o3 = !o4 && shape_match(t, oa, ob, ORDER3, oc, 0);
        if (!o4 && !o3) return false;
        if (o3 && shapes[k].r == SIM_FAST_RANGE_AFTER) return false; /* resume key with command id, order without */
        if (o4 && shapes[k].r == SIM_FAST_RANGE_AFTER3) return false;
        if (!bounds_tokens(&p->bounds, &p->nbounds, t, caps, shapes[k].ncaps - 1)) return false;
        p->range = shapes[k].r;
        p->order3 = o3;
        return true;
    }
    return false;
}

bool sim_col_same_type(const sim_column *a, const sim_column *b) {
    return a->type.id == b->type.id && a->type.precision == b->type.precision && a->type.scale == b->type.scale &&
           a->type.length == b->type.length && a->nullable == b->nullable;
}

/* The bounds statement's values: the range [*first, *end) of snap. false:
 * values of another kind than the store can compare (SQLite answers). */
static bool store_range(sqlite3_stmt *bnd, sim_fast_range r, bool order3, const sim_store_snap *snap, size_t *first,
                        size_t *end) {
    int n = r == SIM_FAST_RANGE_BETWEEN ? 2 : r == SIM_FAST_RANGE_AFTER ? 9 : 7;
    if (sqlite3_step(bnd) != SQLITE_ROW || sqlite3_column_count(bnd) != n) return false;
    *first = *end = snap->head;
    int tx = sqlite3_column_type(bnd, 0), ty = sqlite3_column_type(bnd, 1);
    if (tx == SQLITE_NULL || ty == SQLITE_NULL) return true; /* BETWEEN NULL: no row */
    if (tx != SQLITE_BLOB || ty != SQLITE_BLOB) return false;
    sim_store_key lo = {sqlite3_column_blob(bnd, 0), (size_t)sqlite3_column_bytes(bnd, 0), false, 0, NULL, 0, 0};
    sim_store_key hi = {sqlite3_column_blob(bnd, 1), (size_t)sqlite3_column_bytes(bnd, 1), false, 0, NULL, 0, 0};
    if (!lo.lsn) lo.lsn = (const uint8_t *)"";
    if (!hi.lsn) hi.lsn = (const uint8_t *)"";
    size_t f = sim_store_lower(snap, &lo, true, order3);
    size_t e = sim_store_lower(snap, &hi, false, order3);
    if (r != SIM_FAST_RANGE_BETWEEN) {
        /* l, l, [cmd, cmd,] s, s, op: each pair one value */
        int ls = 2, cs = r == SIM_FAST_RANGE_AFTER ? 4 : -1, ss = r == SIM_FAST_RANGE_AFTER ? 6 : 4, os = n - 1;
        for (int k = 2; k < n; k++)
            if (sqlite3_column_type(bnd, k) == SQLITE_NULL) return false;
        if (sqlite3_column_type(bnd, ls) != SQLITE_BLOB || sqlite3_column_type(bnd, ls + 1) != SQLITE_BLOB ||
            sqlite3_column_type(bnd, ss) != SQLITE_BLOB || sqlite3_column_type(bnd, ss + 1) != SQLITE_BLOB ||
            sqlite3_column_type(bnd, os) != SQLITE_INTEGER)
            return false;
        for (int k = ls; k <= ss; k += 2) {
            if (k == cs) continue;
            int an = sqlite3_column_bytes(bnd, k), bn = sqlite3_column_bytes(bnd, k + 1);
            if (an != bn || (an && memcmp(sqlite3_column_blob(bnd, k), sqlite3_column_blob(bnd, k + 1), (size_t)an)))
                return false;
        }
        sim_store_key ak = {sqlite3_column_blob(bnd, ls), (size_t)sqlite3_column_bytes(bnd, ls), true, 0,
                            sqlite3_column_blob(bnd, ss), (size_t)sqlite3_column_bytes(bnd, ss), sqlite3_column_int64(bnd, os)};
        if (cs >= 0) {
            if (sqlite3_column_type(bnd, cs) != SQLITE_INTEGER || sqlite3_column_type(bnd, cs + 1) != SQLITE_INTEGER ||
                sqlite3_column_int64(bnd, cs) != sqlite3_column_int64(bnd, cs + 1))
                return false;
            ak.command_id = sqlite3_column_int64(bnd, cs);
        }
        if (!ak.lsn) ak.lsn = (const uint8_t *)"";
        if (!ak.seqval) ak.seqval = (const uint8_t *)"";
        size_t a = sim_store_lower(snap, &ak, true, order3);
        if (a > f) f = a;
    }
    *first = f;
    *end = e > f ? e : f;
    return true;
}

/* Rows ahead of the one sent whose bytes are asked for (memory latency
 * hidden behind the encoding of the rows between). */
#define STORE_PREFETCH_ROWS 8

/* The commit-time lookup (one transaction's start LSN, "... WHERE m.start_lsn
 * = $__lsn") as a forward scan from an LSN on, with the LSN as a second
 * column: the store's rows come in LSN order, so one pass over the mapping
 * answers every transaction (no seek per transaction). NULL when the lookup
 * has another shape or other parameters: then a lookup per transaction. */
static sqlite3_stmt *commit_scan(sqlite3 *db, sqlite3_stmt *point) {
    static const char SUF[] = " FROM \"cdc.lsn_time_mapping\" AS \"m\" WHERE \"m\".\"start_lsn\" = $__lsn";
    const char *sql = sqlite3_sql(point);
    size_t n = sql ? strlen(sql) : 0, sn = sizeof SUF - 1;
    if (n <= sn || n > INT32_MAX || strcmp(sql + n - sn, SUF) != 0 || sqlite3_bind_parameter_count(point) != 1) return NULL;
    char *q = sqlite3_mprintf("%.*s, \"m\".\"start_lsn\" FROM \"cdc.lsn_time_mapping\" AS \"m\""
                              " WHERE \"m\".\"start_lsn\" >= $__lsn ORDER BY \"m\".\"start_lsn\"", (int)(n - sn), sql);
    sqlite3_stmt *st = NULL;
    if (!q || sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK || sqlite3_column_count(st) != 2 ||
        sqlite3_bind_parameter_count(st) != 1) {
        sqlite3_finalize(st);
        st = NULL;
    }
    sqlite3_free(q);
    return st;
}

/* SQLite's blob order of a mapping LSN against a store row's 10 bytes. */
static int lsn_cmp(const void *a, int an, const uint8_t *b) {
    int c = an > 0 ? memcmp(a, b, an < 10 ? (size_t)an : 10) : 0;
    return c ? c : an - 10;
}

/* Appends the encoding of v for column col to out (a cell's bytes). */
static int enc_value(sim_tds_cellenc *ce, const sim_column *col, const sim_value *v, mcdc_buf *out) {
    sim_tds_col_enc e;
    sim_tds_col_plan(&e, col);
    return sim_tds_cellenc_put(ce, &e, v, out, NULL);
}

int sim_fast_store_emit(sim_session *s, const sim_fast_store_q *q, const sim_sink *sink, int64_t *rows, bool *aborted,
                        bool *served, mcdc_error *err) {
    const sim_fast_plan *p = q->p;
    int n = p->nitems;
    *rows = 0;
    *served = false;
    if (p->range == SIM_FAST_RANGE_NONE || !sink->row_cells || !q->bnd) return MCDC_OK;
    sim_store_snap snap;
    if (!sim_store_acquire(s->srv->stores, &s->srv->mu, s->db->w, s->db->name, s->rd, p->ci, &snap)) return MCDC_OK;
    const sim_store *st = snap.st;
    size_t first = 0, end = 0;
    int *src = mcdc_calloc((size_t)n, sizeof *src), *colk = mcdc_calloc((size_t)n + 1, sizeof *colk);
    /* groups of items: a run of store cells lying together, or one item */
    int *gk = mcdc_calloc((size_t)n + 1, sizeof *gk), *gn = mcdc_calloc((size_t)n + 1, sizeof *gn);
    int *gp = mcdc_calloc((size_t)n + 1, sizeof *gp);
    sim_cell *cells = mcdc_calloc((size_t)n, sizeof *cells), *gc = mcdc_calloc((size_t)n, sizeof *gc);
    size_t *fixed_off = mcdc_calloc((size_t)n, sizeof *fixed_off);
    size_t nb = ((size_t)n + 7) / 8;
    uint8_t *bm0 = mcdc_calloc(nb, 1), *bm = mcdc_calloc(nb, 1); /* NULL columns: fixed, this row */
    mcdc_buf fixed = {0}, cbuf = {0};
    sim_tds_cellenc ce;
    bool ce_ok = sim_tds_cellenc_init(&ce, NULL) == MCDC_OK;
    bool ok = src && colk && gk && gn && gp && cells && gc && fixed_off && bm0 && bm && ce_ok;
    if (ok && p->order3 && !sim_store_order3(st)) ok = false;
    /* every item: a store column of the same type, or computed; the LSN
     * texts must encode as varchar(22) does: [22, 0] + ASCII */
    for (int i = 0; ok && i < n; i++) {
        const sim_fast_item *it = &p->items[i];
        src[i] = -1;
        if (it->kind == SIM_FAST_COL) {
            src[i] = sim_store_col(st, it->col);
            ok = src[i] >= 0 && sim_col_same_type(sim_store_col_meta(st, src[i]), &q->cols[i]);
        } else if (it->kind == SIM_FAST_LSN_HEX) {
            src[i] = mcdc_str_ieq(it->col, "__$start_lsn") ? 0 : 1;
            static const char sample[] = "0x0123456789ABCDEF0123";
            sim_value v = {.kind = SIM_V_TEXT, .p = (const uint8_t *)sample, .n = 22};
            mcdc_buf b = {0};
            ok = enc_value(&ce, &q->cols[i], &v, &b) == MCDC_OK && b.len == 24 && b.data[0] == 22 && b.data[1] == 0 &&
                 memcmp(b.data + 2, sample, 22) == 0;
            mcdc_buf_free(&b);
        } else if (it->kind == SIM_FAST_NULL) {
            sim_value v = {.kind = SIM_V_NULL};
            fixed_off[i] = fixed.len;
            ok = enc_value(&ce, &q->cols[i], &v, &fixed) == MCDC_OK;
            cells[i].n = (uint32_t)(fixed.len - fixed_off[i]);
            bm0[i / 8] = (uint8_t)(bm0[i / 8] | (1u << (i % 8)));
        }
        colk[i] = it->kind == SIM_FAST_COL ? src[i] : -1; /* the store column, for the NULL bits */
    }
    sim_null_map nm;
    memset(&nm, 0, sizeof nm);
    ok = ok && sim_null_map_init(&nm, colk, n, snap.ncols) == MCDC_OK;
    for (int k = 0; ok && k < n; k++)
        if (bm0[k / 8] >> (k % 8) & 1) sim_null_map_fix(&nm, k, true);
    /* one read transaction for the bounds and every commit-time lookup: one
     * snapshot, not a WAL read lock taken and dropped per transaction (the
     * store serves only sessions in autocommit) */
    bool txn = ok && sqlite3_exec(s->rd, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    if (ok) ok = store_range(q->bnd, p->range, p->order3, &snap, &first, &end);
    int rc = MCDC_OK;
    if (ok) {
        *served = true;
        s->srv->store_queries++;
        for (int i = 0; i < n; i++)
            if (p->items[i].kind == SIM_FAST_NULL) cells[i].p = fixed.data + fixed_off[i];
        if (sink->columns && sink->columns(sink->ctx, q->cols, n)) *aborted = true;
        const uint8_t *cur = NULL; /* start LSN of the commit time held */
        bool have_commit = false, commit_null = false;
        uint8_t hexs[24]; /* the start LSN text as a cell (the seqval's is in the row) */
        hexs[0] = 22;
        hexs[1] = 0;
        int ng = 0;
        int seqp = sim_store_col_pos(st, sim_store_ncols(st));
        for (int k = 0; k < n; k++) {
            if (p->items[k].kind == SIM_FAST_LSN_HEX && src[k] == 0) {
                cells[k].p = hexs;
                cells[k].n = 24;
            }
            int pos = p->items[k].kind == SIM_FAST_COL ? sim_store_col_pos(st, src[k])
                      : p->items[k].kind == SIM_FAST_LSN_HEX && src[k] == 1 ? seqp : -1;
            if (pos >= 0 && ng > 0 && gp[ng - 1] >= 0 && gp[ng - 1] + gn[ng - 1] == pos) {
                gn[ng - 1]++;
                continue;
            }
            gk[ng] = k;
            gn[ng] = 1;
            gp[ng] = pos;
            ng++;
        }
        int64_t cnt = 0;
        sqlite3_stmt *scan = end > first ? commit_scan(s->rd, q->commit) : NULL;
        int scan_rc = SQLITE_DONE; /* the scan's last step: SQLITE_ROW while it has a row */
        uint8_t scan_from[10];
        for (size_t i = first; i < end && !*aborted; i++) {
            sim_store_row r;
            if (i + STORE_PREFETCH_ROWS < end) sim_store_snap_prefetch(&snap, i + STORE_PREFETCH_ROWS);
            sim_store_snap_row(&snap, i, &r);
            if (!cur || memcmp(cur, r.start_lsn, 10) != 0) {
                /* a new transaction: its commit time, once */
                sqlite3_stmt *cq = q->commit;
                int cs;
                if (scan) {
                    if (!cur) { /* from the first transaction's LSN on */
                        memcpy(scan_from, r.start_lsn, 10);
                        sqlite3_bind_blob(scan, 1, scan_from, 10, SQLITE_STATIC);
                        scan_rc = sqlite3_step(scan);
                    }
                    while (scan_rc == SQLITE_ROW &&
                           lsn_cmp(sqlite3_column_blob(scan, 1), sqlite3_column_bytes(scan, 1), r.start_lsn) < 0)
                        scan_rc = sqlite3_step(scan);
                    cs = scan_rc;
                    if (cs == SQLITE_ROW && lsn_cmp(sqlite3_column_blob(scan, 1), sqlite3_column_bytes(scan, 1), r.start_lsn) != 0)
                        cs = SQLITE_DONE; /* no entry for this one */
                    cq = scan;
                } else {
                    sqlite3_reset(cq);
                    sqlite3_bind_blob(cq, q->commit_param, r.start_lsn, 10, SQLITE_STATIC);
                    cs = sqlite3_step(cq);
                }
                cur = r.start_lsn;
                have_commit = cs == SQLITE_ROW;
                if (cs != SQLITE_ROW && cs != SQLITE_DONE) { rc = sim_sqlite_err(s->rd, cs, err); break; }
                mcdc_buf_reset(&cbuf);
                if (have_commit) {
                    sim_value cv;
                    sim_store_value_of(&cv, sqlite3_column_value(cq, 0));
                    commit_null = cv.kind == SIM_V_NULL;
                    for (int k = 0; k < n && rc == MCDC_OK; k++)
                        if (p->items[k].kind == SIM_FAST_COMMIT) rc = enc_value(&ce, &q->cols[k], &cv, &cbuf);
                }
                sqlite3_reset(q->commit);
                if (rc != MCDC_OK) {
                    rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory encoding a commit time");
                    break;
                }
                hex10(r.start_lsn, hexs + 2);
                for (int k = 0; k < n; k++)
                    if (p->items[k].kind == SIM_FAST_COMMIT) {
                        cells[k].p = cbuf.data;
                        cells[k].n = (uint32_t)cbuf.len;
                        sim_null_map_fix(&nm, k, commit_null);
                    }
            }
            if (!have_commit) continue; /* no mapping entry: the inner join drops the row */
            for (int g = 0; g < ng; g++) {
                int a = gp[g];
                if (a >= 0) gc[g] = (sim_cell){r.data + r.off[a], r.off[a + gn[g]] - r.off[a], (uint32_t)gn[g], &r.off[a]};
                else gc[g] = (sim_cell){cells[gk[g]].p, cells[gk[g]].n, 1, NULL};
            }
            sim_null_map_row(&nm, r.nulls, bm);
            cnt++;
            if (sink->row_cells(sink->ctx, gc, ng, bm, n)) { *aborted = true; break; }
        }
        *rows = cnt;
        sqlite3_finalize(scan);
    }
    sim_null_map_free(&nm);
    sqlite3_reset(q->bnd);
    sqlite3_reset(q->commit);
    if (txn) (void)sqlite3_exec(s->rd, "COMMIT", NULL, NULL, NULL);
    if (ce_ok) sim_tds_cellenc_free(&ce);
    mcdc_buf_free(&fixed);
    mcdc_buf_free(&cbuf);
    mcdc_free(src);
    mcdc_free(colk);
    mcdc_free(gk);
    mcdc_free(gn);
    mcdc_free(gp);
    mcdc_free(cells);
    mcdc_free(gc);
    mcdc_free(fixed_off);
    mcdc_free(bm0);
    mcdc_free(bm);
    sim_store_release(&snap);
    return rc;
}

int sim_fast_split_store(sim_session *s, const sim_fast_split *p, sqlite3_stmt *bnd, const sim_column *cols,
                         const sim_sink *sink, int64_t *rows, bool *aborted, bool *served, mcdc_error *err) {
    (void)err;
    *rows = 0;
    *served = false;
    if (!bnd) return MCDC_OK;
    sim_store_snap snap;
    if (!sim_store_acquire(s->srv->stores, &s->srv->mu, s->db->w, s->db->name, s->rd, p->ci, &snap)) return MCDC_OK;
    size_t first = 0, end = 0;
    bool ok = store_range(bnd, SIM_FAST_RANGE_BETWEEN, false, &snap, &first, &end);
    sqlite3_reset(bnd);
    if (ok) {
        *served = true;
        s->srv->store_queries++;
        if (sink->columns && sink->columns(sink->ctx, cols, 3)) *aborted = true;
        int64_t total = (int64_t)(end - first), tiles = p->tiles;
        int64_t base = total / tiles, extra = total % tiles, at = (int64_t)first, cnt = 0;
        for (int64_t tile = 1; tile <= tiles && !*aborted; tile++) {
            int64_t size = base + (tile <= extra ? 1 : 0);
            if (size == 0) break; /* fewer rows than tiles: the rest are empty */
            at += size;
            cnt++;
            if (tile_row(sink, sim_store_row_start(snap.st, (size_t)at - 1), 10, size)) { *aborted = true; break; }
        }
        *rows = cnt;
    }
    sim_store_release(&snap);
    return MCDC_OK;
}
