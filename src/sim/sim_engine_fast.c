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
 */
#include "sim_engine_int.h"

#include <string.h>

static const tsql_tok TOK_SELECT = {TK_IDENT, "SELECT", 6, 0};
static const tsql_tok TOK_FROM = {TK_IDENT, "FROM", 4, 0};
static const tsql_tok TOK_C = {TK_IDENT, "c", 1, 0};
static const tsql_tok TOK_DOT = {TK_OP, ".", 1, 0};
static const tsql_tok TOK_COMMA = {TK_OP, ",", 1, 0};
static const tsql_tok TOK_START_LSN = {TK_IDENT, "__$start_lsn", 12, 0};
static const tsql_tok TOK_EOF = {TK_EOF, "", 0, 0};

/* An identifier (bare or quoted) whose decoded text is name. */
static bool name_is(const tsql_tok *t, const char *name) {
    if (t->t != TK_IDENT && t->t != TK_QIDENT) return false;
    char buf[MCDC_IDENT_BYTES_MAX];
    tsql_tok_text(t, buf, sizeof buf);
    return mcdc_str_ieq(buf, name);
}

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

static bool push(sim_fast_plan *p, tsql_tok **arr, int *n, int *cap, const tsql_tok *tok) {
    (void)p;
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
    memset(p, 0, sizeof *p);
}

bool sim_fast_match(sim_fast_plan *p, const tsql_tok *t, int a, int b) {
    memset(p, 0, sizeof *p);
    if (b - a < 30 || !tsql_tok_is(&t[a], "SELECT")) return false;
    /* the FROM at depth 0 */
    int from = -1, d = 0;
    for (int k = a + 1; k < b; k++) {
        if (tsql_tok_op(&t[k], "(")) d++;
        else if (tsql_tok_op(&t[k], ")")) d--;
        else if (d == 0 && tsql_tok_is(&t[k], "FROM")) { from = k; break; }
    }
    if (from < 0) return false;
    /* FROM cdc.[<ci>_CT] AS c INNER JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = c.__$start_lsn */
    int k = from + 1;
    char ct[MCDC_IDENT_BYTES_MAX], col[MCDC_IDENT_BYTES_MAX];
    if (k + 20 > b || !name_is(&t[k], "cdc") || !tsql_tok_op(&t[k + 1], ".")) return false;
    if (t[k + 2].t != TK_IDENT && t[k + 2].t != TK_QIDENT) return false;
    tsql_tok_text(&t[k + 2], ct, sizeof ct);
    size_t ctl = strlen(ct);
    if (ctl < 4 || !mcdc_str_ieq(ct + ctl - 3, "_CT")) return false;
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
    /* the select list */
    int nitems = 1;
    d = 0;
    for (int q = a + 1; q < from; q++) {
        if (tsql_tok_op(&t[q], "(")) d++;
        else if (tsql_tok_op(&t[q], ")")) d--;
        else if (d == 0 && tsql_tok_op(&t[q], ",")) nitems++;
    }
    if (nitems > MCDC_COLUMNS_MAX) return false;
    p->items = mcdc_calloc((size_t)nitems, sizeof *p->items);
    if (!p->items) return false;
    int rcap = 0, ccap = 0;
    bool ok = push(p, &p->reduced, &p->nreduced, &rcap, &TOK_SELECT) &&
              push(p, &p->reduced, &p->nreduced, &rcap, &TOK_C) && push(p, &p->reduced, &p->nreduced, &rcap, &TOK_DOT) &&
              push(p, &p->reduced, &p->nreduced, &rcap, &TOK_START_LSN);
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
            it->src = nsrc++;
            ok = push(p, &p->reduced, &p->nreduced, &rcap, &TOK_COMMA) &&
                 push(p, &p->reduced, &p->nreduced, &rcap, &t[s]) && push(p, &p->reduced, &p->nreduced, &rcap, &t[s + 1]) &&
                 push(p, &p->reduced, &p->nreduced, &rcap, &t[s + 2]);
        } else if (e - s == 13 && tsql_tok_is(&t[s], "CONVERT") && tsql_tok_op(&t[s + 1], "(") &&
                   name_is(&t[s + 2], "varchar") && tsql_tok_op(&t[s + 3], "(") && t[s + 4].t == TK_NUM &&
                   t[s + 4].n == 2 && memcmp(t[s + 4].s, "22", 2) == 0 && tsql_tok_op(&t[s + 5], ")") &&
                   tsql_tok_op(&t[s + 6], ",") && qualified(t, s + 7, e, "c", col, sizeof col) &&
                   (mcdc_str_ieq(col, "__$start_lsn") || mcdc_str_ieq(col, "__$seqval")) &&
                   tsql_tok_op(&t[s + 10], ",") && t[s + 11].t == TK_NUM && t[s + 11].n == 1 && t[s + 11].s[0] == '1' &&
                   tsql_tok_op(&t[s + 12], ")")) {
            it->kind = SIM_FAST_LSN_HEX;
            it->src = nsrc++;
            ok = push(p, &p->reduced, &p->nreduced, &rcap, &TOK_COMMA) &&
                 push(p, &p->reduced, &p->nreduced, &rcap, &t[s + 7]) &&
                 push(p, &p->reduced, &p->nreduced, &rcap, &t[s + 8]) &&
                 push(p, &p->reduced, &p->nreduced, &rcap, &t[s + 9]);
        } else if (e - s >= 6 && tsql_tok_is(&t[s], "CAST") && tsql_tok_op(&t[s + 1], "(") && tsql_tok_is(&t[s + 2], "NULL") &&
                   tsql_tok_is(&t[s + 3], "AS") && tsql_tok_op(&t[e - 1], ")") && aliased) {
            it->kind = SIM_FAST_NULL;
        } else if (aliased && mcdc_str_ieq(alias, "_commit_ts") && ncommit == 0 && !mentions(t, s, e, "c")) {
            it->kind = SIM_FAST_COMMIT;
            ncommit++;
            ok = push(p, &p->commit, &p->ncommit, &ccap, &TOK_SELECT);
            for (int z = s; z < e && ok; z++) ok = push(p, &p->commit, &p->ncommit, &ccap, &t[z]);
            if (ok) ok = push(p, &p->commit, &p->ncommit, &ccap, &TOK_FROM);
            for (int z = map_tok; z < map_end && ok; z++) ok = push(p, &p->commit, &p->ncommit, &ccap, &t[z]);
        } else {
            ok = false;
        }
        if (!ok) break;
        p->nitems++;
        s = q + 1;
    }
    /* FROM cdc.[<ci>_CT] AS c, then WHERE/ORDER BY as written */
    if (ok) ok = push(p, &p->reduced, &p->nreduced, &rcap, &TOK_FROM);
    for (int z = ct_tok; z < ct_end && ok; z++) ok = push(p, &p->reduced, &p->nreduced, &rcap, &t[z]);
    for (int z = rest; z < b && ok; z++) ok = push(p, &p->reduced, &p->nreduced, &rcap, &t[z]);
    if (!ok || ncommit != 1 || p->nitems != nitems) {
        sim_fast_plan_free(p);
        return false;
    }
    p->nsrc = nsrc;
    return true;
}

static const char HEX[] = "0123456789ABCDEF";

/* CONVERT(varchar(22), blob, 1): "0x" + hex, cut at 22 characters. */
static size_t lsn_hex(const uint8_t *b, size_t n, char out[24]) {
    size_t o = 0;
    out[o++] = '0';
    out[o++] = 'x';
    for (size_t k = 0; k < n && o + 2 <= 22; k++) {
        out[o++] = HEX[b[k] >> 4];
        out[o++] = HEX[b[k] & 15];
    }
    out[o] = 0;
    return o;
}

static void cell(sim_value *v, sqlite3_value *cv) {
    switch (sqlite3_value_type(cv)) {
    case SQLITE_INTEGER: v->kind = SIM_V_INT; v->i = sqlite3_value_int64(cv); break;
    case SQLITE_FLOAT: v->kind = SIM_V_REAL; v->f = sqlite3_value_double(cv); break;
    case SQLITE_TEXT:
        v->kind = SIM_V_TEXT;
        v->p = sqlite3_value_text(cv);
        v->n = (size_t)sqlite3_value_bytes(cv);
        break;
    case SQLITE_BLOB:
        v->kind = SIM_V_BLOB;
        v->p = sqlite3_value_blob(cv);
        v->n = (size_t)sqlite3_value_bytes(cv);
        break;
    default: v->kind = SIM_V_NULL; break;
    }
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
                cell(&cval, sqlite3_column_value(commit, 0));
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
            case SIM_FAST_COL: cell(v, sqlite3_column_value(red, it->src)); break;
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

static bool tok_same(const tsql_tok *x, const tsql_tok *y) {
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
            ok = i + 1 < ns && c < ncaps;
            int d = 0, e = k;
            for (; ok && e < b; e++) {
                if (d == 0 && tok_same(&t[e], &st[i + 1])) break;
                if (tsql_tok_op(&t[e], "(")) d++;
                else if (tsql_tok_op(&t[e], ")")) d--;
                if (d < 0) ok = false;
            }
            ok = ok && e < b && e > k;
            if (ok) { caps[c][0] = k; caps[c][1] = e; c++; k = e; }
        } else {
            ok = k < b && tok_same(&t[k], &st[i]);
            k++;
        }
    }
    mcdc_free(st);
    return ok && k == b && c == ncaps;
}

void sim_fast_split_free(sim_fast_split *p) {
    if (!p) return;
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
    char bound[24], next[24];
    sim_value v[3];
    memset(v, 0, sizeof v);
    while (!*aborted && (step = sqlite3_step(scan)) == SQLITE_ROW) {
        if (++in_tile < size) continue;
        sqlite3_value *lv = sqlite3_column_value(scan, 0);
        const uint8_t *lsn = sqlite3_value_blob(lv);
        size_t ln = (size_t)sqlite3_value_bytes(lv);
        uint8_t inc[10];
        lsn_inc(lsn, ln, inc);
        v[0].kind = SIM_V_TEXT;
        v[0].n = lsn_hex(lsn, ln, bound);
        v[0].p = (const uint8_t *)bound;
        v[1].kind = SIM_V_TEXT;
        v[1].n = lsn_hex(inc, 10, next);
        v[1].p = (const uint8_t *)next;
        v[2].kind = SIM_V_INT;
        v[2].i = size;
        cnt++;
        if (sink->row && sink->row(sink->ctx, v, 3)) { *aborted = true; break; }
        tile++;
        in_tile = 0;
        size = base + (tile <= extra ? 1 : 0);
        if (size == 0) break; /* fewer rows than tiles: the rest are empty */
    }
    *rows = cnt;
    if (!*aborted && step != SQLITE_DONE && step != SQLITE_ROW) return sim_sqlite_err(c, step, err);
    return MCDC_OK;
}
