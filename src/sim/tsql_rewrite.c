/*
 * tsql_rewrite.c - T-SQL to T-SQL before translation, for what SQLite lacks
 * (see tsql_xlate.h).
 *
 * Column alias lists. "(VALUES (1, 2), (3, 4)) v(a, b)" becomes "(SELECT
 * column1 AS a, column2 AS b FROM (VALUES ...) AS __v) AS v" (SQLite names
 * the columns of a VALUES list column1..n); "(SELECT e1, e2 ...) x(a, b)"
 * names the items of its first SELECT ("e1 AS a, e2 AS b"), which also names
 * a compound's columns; a first SELECT with a * in its list becomes "(SELECT
 * NULL AS a, NULL AS b WHERE 1 = 0 UNION ALL SELECT * FROM (...) AS __b) AS x"
 * (a compound takes its column names from its first SELECT). A list of
 * another length than the items is SQL Server's error 8158 or 8159.
 *
 * APPLY. SQLite has no LATERAL join: an item of a FROM clause cannot read
 * the columns of the items before it, though a subquery may read those of
 * the queries around it. Two shapes are rewritten exactly, the last APPLY
 * of the statement first (so an APPLY nested in an applied query is gone
 * before the one around it):
 *
 *  1. The left operand is one derived table b of at most one row, alone in
 *     its FROM list: a SELECT without FROM, or an aggregate without GROUP BY.
 *     Each reference b.c inside the applied query becomes c's expression:
 *     "(expr)" for a SELECT without FROM, "(SELECT expr FROM ... [HAVING
 *     ...])" for an aggregate (the same value, and b's own FROM still drops
 *     every row when HAVING filters its one row out). The applied query then
 *     reads only queries around it; CROSS APPLY becomes CROSS JOIN, OUTER
 *     APPLY "LEFT JOIN ... ON 1 = 1". The reference's fall-back queries have
 *     this shape: "(SELECT <lsn> AS lo) b CROSS APPLY (SELECT ..., LAG(...)
 *     OVER (...) ... WHERE start_lsn > b.lo ...) d" and "(SELECT
 *     MIN(tran_end_time) AS t0 ... HAVING ...) r CROSS APPLY (... r.t0 ...) x".
 *     An expression of a SELECT without FROM moves into the applied query,
 *     where an unqualified column would bind to the applied query's tables:
 *     such an expression must qualify its columns, or it is refused.
 *
 *  2. The applied query returns at most one row (TOP (1), an aggregate
 *     without GROUP BY, or a SELECT without FROM), after any left operand.
 *     Each reference d.c in the enclosing SELECT becomes the scalar subquery
 *     "(SELECT [TOP (1)] expr FROM ...)" (NULL when there is no row, as
 *     OUTER APPLY gives), the APPLY leaves the FROM clause, and CROSS APPLY
 *     adds "EXISTS (<the applied query>)" to the WHERE clause. Its columns
 *     must be named as d.c ("SELECT *" and unqualified names are refused: an
 *     unqualified name could bind to another table once d is gone). Each
 *     column is its own subquery: with TOP (1) and an ORDER BY that ties,
 *     two columns could come from two of the tied rows.
 *
 * Everything else is refused with error 50000 naming these shapes, rather
 * than translated into a query that returns other rows.
 *
 * MIN/MAX as seeks. SQLite answers one MIN or MAX of an indexed column with
 * a seek, but several aggregates, or one inside an expression, with a scan
 * of the table. "SELECT CAST(MIN(t.k) AS bigint) AS lo, CAST(MAX(t.k) AS
 * bigint) AS hi FROM x AS t [WHERE w]" (a snapshot's key extent), where
 * every item is a MIN or MAX of a column inside CAST(... AS type) or
 * CONVERT(type, ...), becomes "SELECT CAST((SELECT MIN(t.k) FROM x AS t
 * [WHERE w]) AS bigint) AS lo, ...": one aggregate per scalar subquery, the
 * same row, and the same types (the CAST gives them).
 */
#include "tsql_xlate.h"

#include <stdio.h>
#include <string.h>

/* A growing token array. */
typedef struct tv {
    tsql_tok *t;
    int n, cap;
} tv;

typedef struct rw {
    tv v;                /* the statement being rewritten */
    tsql_rewritten *out; /* keeps the text of made-up tokens */
    mcdc_error *err;
    int line;            /* of the construct being rewritten, for made-up tokens */
} rw;

static int rw_fail(rw *r, int number, const char *fmt, const char *a, const char *b) {
    mcdc_error_set(r->err, MCDC_E_SERVER, fmt, a, b);
    if (r->err) {
        r->err->server_number = number;
        r->err->server_class = number == 102 ? 15 : 16;
        r->err->server_state = 1;
    }
    return MCDC_E_SERVER;
}

static int tv_reserve(rw *r, tv *v, int more) {
    if (v->n + more + 1 <= v->cap) return MCDC_OK;
    if ((int64_t)v->n + more + 1 > MCDC_TSQL_REWRITE_TOKENS_MAX)
        return mcdc_error_set(r->err, MCDC_E_LIMIT,
                              "the statement grows past %d tokens when its APPLY or column alias lists are rewritten;"
                              " split it into smaller queries",
                              MCDC_TSQL_REWRITE_TOKENS_MAX);
    int cap = v->cap ? v->cap : 64;
    while (cap < v->n + more + 1) cap *= 2;
    tsql_tok *nt = mcdc_realloc(v->t, (size_t)cap * sizeof *nt);
    if (!nt) return mcdc_error_set(r->err, MCDC_E_NOMEM, "out of memory");
    v->t = nt;
    v->cap = cap;
    return MCDC_OK;
}

static int tv_tok(rw *r, tv *v, tsql_tk type, const char *s) {
    int rc = tv_reserve(r, v, 1);
    if (rc == MCDC_OK) v->t[v->n++] = (tsql_tok){type, s, (int)strlen(s), r->line};
    return rc;
}

/* Words and punctuation, space-separated: "SELECT NULL AS" -> 3 tokens
 * (static text only). */
static int tv_words(rw *r, tv *v, const char *const *w, int n) {
    int rc = MCDC_OK;
    for (int k = 0; k < n && rc == MCDC_OK; k++) {
        const char *s = w[k];
        tsql_tk ty = (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_' ? TK_IDENT : s[0] >= '0' && s[0] <= '9' ? TK_NUM : TK_OP;
        rc = tv_tok(r, v, ty, s);
    }
    return rc;
}
#define TV_WORDS(r, v, ...) tv_words((r), (v), (const char *const[]){__VA_ARGS__}, \
                                     (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

static int tv_range(rw *r, tv *v, const tsql_tok *src, int a, int b) {
    if (b <= a) return MCDC_OK;
    int rc = tv_reserve(r, v, b - a);
    if (rc == MCDC_OK) {
        memcpy(v->t + v->n, src + a, (size_t)(b - a) * sizeof *src);
        v->n += b - a;
    }
    return rc;
}

/* Replaces r->v's tokens [a, b) with ins (consumed). */
static int tv_splice(rw *r, int a, int b, tv *ins) {
    tv *v = &r->v;
    int grow = ins->n - (b - a);
    int rc = grow > 0 ? tv_reserve(r, v, grow) : MCDC_OK;
    if (rc == MCDC_OK) {
        memmove(v->t + b + grow, v->t + b, (size_t)(v->n - b) * sizeof *v->t);
        if (ins->n) memcpy(v->t + a, ins->t, (size_t)ins->n * sizeof *v->t);
        v->n += grow;
    }
    mcdc_free(ins->t);
    memset(ins, 0, sizeof *ins);
    return rc;
}

/* Text that lives as long as the rewrite's tokens. */
static const char *keep_text(rw *r, const char *s) {
    tsql_rewritten *o = r->out;
    char **nt = mcdc_realloc(o->texts, ((size_t)o->ntexts + 1) * sizeof *nt);
    if (!nt) return NULL;
    o->texts = nt;
    char *c = mcdc_strdup(s);
    if (c) o->texts[o->ntexts++] = c;
    return c;
}

static bool is_name(const tsql_tok *t) { return t->t == TK_IDENT || t->t == TK_QIDENT; }

static bool name_is(const tsql_tok *t, const char *name) {
    char buf[MCDC_IDENT_BYTES_MAX];
    if (!is_name(t)) return false;
    tsql_tok_text(t, buf, sizeof buf);
    return mcdc_str_ieq(buf, name);
}

static int match_fwd(const tsql_tok *t, int n, int i) {
    int d = 0;
    for (int k = i; k < n; k++) {
        if (tsql_tok_op(&t[k], "(")) d++;
        else if (tsql_tok_op(&t[k], ")") && --d == 0) return k;
    }
    return -1;
}

static int match_back(const tsql_tok *t, int i) {
    int d = 0;
    for (int k = i; k >= 0; k--) {
        if (tsql_tok_op(&t[k], ")")) d++;
        else if (tsql_tok_op(&t[k], "(") && --d == 0) return k;
    }
    return -1;
}

static bool is_any(const tsql_tok *t, const char *const *words) {
    for (int k = 0; words[k]; k++)
        if (tsql_tok_is(t, words[k])) return true;
    return false;
}

static const char *const AGGREGATES[] = {"MIN", "MAX", "SUM", "AVG", "COUNT", "COUNT_BIG", "STDEV", "STDEVP", "VAR",
                                         "VARP", "STRING_AGG", "CHECKSUM_AGG", NULL};
/* Words after a select list that end it. */
static const char *const LIST_ENDS[] = {"FROM", "WHERE", "GROUP", "HAVING", "ORDER", "UNION", "EXCEPT", "INTERSECT",
                                        "INTO", "OPTION", "FOR", "WINDOW", NULL};

/* One SELECT of tokens [a, b) (t[a] is SELECT), at its own depth. */
typedef struct sel_shape {
    int items_a, items_b; /* the select list */
    int top_a, top_b;     /* "TOP (1)" as written, or -1 */
    bool top_one;         /* TOP 1 / TOP (1) without PERCENT or WITH TIES */
    bool distinct, top, star, agg;
    int from, where, group, having, order, compound; /* clause tokens at depth 0, -1 if none */
    int nitems;
    int item_s[XL_ITEMS_MAX], item_e[XL_ITEMS_MAX]; /* expressions, aliases excluded */
    char names[XL_ITEMS_MAX][MCDC_IDENT_BYTES_MAX];
} sel_shape;

static void parse_select(const tsql_tok *t, int a, int b, sel_shape *sh) {
    memset(sh, 0, sizeof *sh);
    sh->top_a = sh->top_b = -1;
    sh->from = sh->where = sh->group = sh->having = sh->order = sh->compound = -1;
    int i = a + 1;
    if (i < b && (tsql_tok_is(&t[i], "DISTINCT") || tsql_tok_is(&t[i], "ALL"))) {
        sh->distinct = tsql_tok_is(&t[i], "DISTINCT");
        i++;
    }
    if (i < b && tsql_tok_is(&t[i], "TOP")) {
        sh->top = true;
        sh->top_a = i++;
        bool one = false;
        if (i < b && tsql_tok_op(&t[i], "(")) {
            int c = match_fwd(t, b, i);
            one = c == i + 2 && t[i + 1].t == TK_NUM && t[i + 1].n == 1 && t[i + 1].s[0] == '1';
            i = c < 0 ? b : c + 1;
        } else if (i < b) {
            one = t[i].t == TK_NUM && t[i].n == 1 && t[i].s[0] == '1';
            i++;
        }
        if (i < b && tsql_tok_is(&t[i], "PERCENT")) { one = false; i++; }
        if (i + 1 < b && tsql_tok_is(&t[i], "WITH") && tsql_tok_is(&t[i + 1], "TIES")) { one = false; i += 2; }
        sh->top_b = i;
        sh->top_one = one;
    }
    sh->items_a = i;
    int d = 0;
    for (; i < b; i++) {
        if (tsql_tok_op(&t[i], "(")) d++;
        else if (tsql_tok_op(&t[i], ")")) d--;
        else if (d == 0 && is_any(&t[i], LIST_ENDS)) break;
    }
    sh->items_b = i;
    /* the items */
    int s = sh->items_a;
    d = 0;
    for (int k = sh->items_a; k <= sh->items_b && sh->nitems < XL_ITEMS_MAX; k++) {
        bool split = k == sh->items_b;
        if (!split) {
            if (tsql_tok_op(&t[k], "(")) d++;
            else if (tsql_tok_op(&t[k], ")")) d--;
            else if (d == 0 && tsql_tok_op(&t[k], ",")) split = true;
        }
        if (!split) continue;
        int n = sh->nitems++;
        sh->item_s[n] = s;
        sh->item_e[n] = xl_item_alias(t, s, k, sh->names[n], sizeof sh->names[n]);
        if ((k - s == 1 && tsql_tok_op(&t[s], "*")) || (k - s >= 2 && tsql_tok_op(&t[k - 1], "*") && tsql_tok_op(&t[k - 2], ".")))
            sh->star = true;
        s = k + 1;
    }
    /* aggregates at this level (not in a subquery, not windowed) */
    for (int k = sh->items_a; k < sh->items_b; k++) {
        if (tsql_tok_op(&t[k], "(") && k + 1 < b && tsql_tok_is(&t[k + 1], "SELECT")) {
            int c = match_fwd(t, b, k);
            if (c < 0) break;
            k = c;
            continue;
        }
        if (t[k].t == TK_IDENT && is_any(&t[k], AGGREGATES) && k + 1 < b && tsql_tok_op(&t[k + 1], "(")) {
            int c = match_fwd(t, b, k + 1);
            if (c < 0) break;
            if (!(c + 1 < b && tsql_tok_is(&t[c + 1], "OVER"))) sh->agg = true;
        }
    }
    /* the clauses */
    d = 0;
    for (i = sh->items_b; i < b; i++) {
        if (tsql_tok_op(&t[i], "(")) { d++; continue; }
        if (tsql_tok_op(&t[i], ")")) { d--; continue; }
        if (d != 0) continue;
        if (tsql_tok_is(&t[i], "FROM") && sh->from < 0) sh->from = i;
        else if (tsql_tok_is(&t[i], "WHERE") && sh->where < 0) sh->where = i;
        else if (tsql_tok_is(&t[i], "GROUP") && sh->group < 0) sh->group = i;
        else if (tsql_tok_is(&t[i], "HAVING") && sh->having < 0) sh->having = i;
        else if (tsql_tok_is(&t[i], "ORDER") && sh->order < 0) sh->order = i;
        else if ((tsql_tok_is(&t[i], "UNION") || tsql_tok_is(&t[i], "EXCEPT") || tsql_tok_is(&t[i], "INTERSECT")) &&
                 sh->compound < 0)
            sh->compound = i;
    }
}

static int item_named(const sel_shape *sh, const char *name) {
    for (int k = 0; k < sh->nitems; k++)
        if (mcdc_str_ieq(sh->names[k], name)) return k;
    return -1;
}

/* ---- column alias lists -------------------------------------------------- */
/* "( body ) [AS] alias ( c1, ... )" with '(' at i: the list's ')' index, or
 * -1 when i starts none. */
static int alias_list_at(const tsql_tok *t, int n, int i, int *alias, int *lopen) {
    if (!(tsql_tok_op(&t[i], "(") && i + 1 < n && (tsql_tok_is(&t[i + 1], "SELECT") || tsql_tok_is(&t[i + 1], "VALUES"))))
        return -1;
    int c = match_fwd(t, n, i);
    if (c < 0) return -1;
    int j = c + 1;
    if (j < n && tsql_tok_is(&t[j], "AS")) j++;
    if (!(j + 1 < n && is_name(&t[j]) && !(t[j].t == TK_IDENT && xl_ends_table(&t[j])) && tsql_tok_op(&t[j + 1], "(")))
        return -1;
    int k = j + 2;
    for (;;) {
        if (k >= n || !is_name(&t[k])) return -1;
        k++;
        if (k < n && tsql_tok_op(&t[k], ")")) break;
        if (k >= n || !tsql_tok_op(&t[k], ",")) return -1;
        k++;
    }
    *alias = j;
    *lopen = j + 1;
    return k;
}

static int alias_list_rewrite(rw *r, int i, int alias, int lopen, int lclose) {
    const tsql_tok *t = r->v.t;
    int c = match_fwd(t, r->v.n, i);
    int ncols = (lclose - lopen) / 2;
    char an[MCDC_IDENT_BYTES_MAX];
    tsql_tok_text(&t[alias], an, sizeof an);
    r->line = t[i].line;
    tv ins = {0};
    int rc = MCDC_OK;
    if (tsql_tok_is(&t[i + 1], "VALUES")) {
        /* the first row's arity */
        int row = i + 2, rclose = tsql_tok_op(&t[row], "(") ? match_fwd(t, c, row) : -1;
        int nv = 0;
        if (rclose > row + 1) {
            nv = 1;
            int d = 0;
            for (int k = row + 1; k < rclose; k++) {
                if (tsql_tok_op(&t[k], "(")) d++;
                else if (tsql_tok_op(&t[k], ")")) d--;
                else if (d == 0 && tsql_tok_op(&t[k], ",")) nv++;
            }
        }
        if (nv > ncols) return rw_fail(r, 8158, "'%s' has more columns than were specified in the column list.%s", an, "");
        if (nv < ncols) return rw_fail(r, 8159, "'%s' has fewer columns than were specified in the column list.%s", an, "");
        rc = TV_WORDS(r, &ins, "(", "SELECT");
        for (int k = 0; k < ncols && rc == MCDC_OK; k++) {
            char col[32];
            snprintf(col, sizeof col, "column%d", k + 1);
            const char *kept = keep_text(r, col);
            if (!kept) rc = mcdc_error_set(r->err, MCDC_E_NOMEM, "out of memory");
            if (rc == MCDC_OK && k) rc = TV_WORDS(r, &ins, ",");
            if (rc == MCDC_OK) rc = tv_tok(r, &ins, TK_IDENT, kept);
            if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, "AS");
            if (rc == MCDC_OK) rc = tv_range(r, &ins, t, lopen + 1 + 2 * k, lopen + 2 + 2 * k);
        }
        if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, "FROM", "(");
        if (rc == MCDC_OK) rc = tv_range(r, &ins, t, i + 1, c);
        if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, ")", "AS", "__v", ")", "AS");
    } else {
        sel_shape *sh = mcdc_malloc(sizeof *sh);
        if (!sh) return mcdc_error_set(r->err, MCDC_E_NOMEM, "out of memory");
        parse_select(t, i + 1, c, sh);
        if (sh->star) {
            /* names from a first SELECT of NULLs that returns no row */
            rc = TV_WORDS(r, &ins, "(", "SELECT");
            for (int k = 0; k < ncols && rc == MCDC_OK; k++) {
                if (k) rc = TV_WORDS(r, &ins, ",");
                if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, "NULL", "AS");
                if (rc == MCDC_OK) rc = tv_range(r, &ins, t, lopen + 1 + 2 * k, lopen + 2 + 2 * k);
            }
            if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, "WHERE", "1", "=", "0", "UNION", "ALL", "SELECT", "*", "FROM", "(");
            if (rc == MCDC_OK) rc = tv_range(r, &ins, t, i + 1, c);
            if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, ")", "AS", "__b", ")", "AS");
        } else if (sh->nitems > ncols) {
            rc = rw_fail(r, 8158, "'%s' has more columns than were specified in the column list.%s", an, "");
        } else if (sh->nitems < ncols) {
            rc = rw_fail(r, 8159, "'%s' has fewer columns than were specified in the column list.%s", an, "");
        } else {
            rc = tv_range(r, &ins, t, i, sh->items_a);
            for (int k = 0; k < ncols && rc == MCDC_OK; k++) {
                if (k) rc = TV_WORDS(r, &ins, ",");
                if (rc == MCDC_OK) rc = tv_range(r, &ins, t, sh->item_s[k], sh->item_e[k]);
                if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, "AS");
                if (rc == MCDC_OK) rc = tv_range(r, &ins, t, lopen + 1 + 2 * k, lopen + 2 + 2 * k);
            }
            if (rc == MCDC_OK) rc = tv_range(r, &ins, t, sh->items_b, c + 1);
            if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, "AS");
        }
        mcdc_free(sh);
    }
    if (rc == MCDC_OK) rc = tv_range(r, &ins, t, alias, alias + 1);
    if (rc == MCDC_OK) return tv_splice(r, i, lclose + 1, &ins);
    mcdc_free(ins.t);
    return rc;
}

/* ---- APPLY ---------------------------------------------------------------- */
static int refuse_apply(rw *r, const char *kind, const char *why) {
    return rw_fail(r, 50000,
                   "%s APPLY: %s. The simulator translates an APPLY whose left side is one derived table of at most"
                   " one row (a SELECT without FROM, or an aggregate without GROUP BY), or whose right side returns"
                   " at most one row (TOP (1), an aggregate without GROUP BY); rewrite other shapes as joins",
                   kind, why);
}

/* The first unqualified column reference of expression [a, b), or -1:
 * names that are no function, no part of a qualified name, no keyword,
 * no date part (DATEADD's first argument...), no type (CONVERT's first
 * argument, CAST's AS) and not in a subquery. */
static int unqualified_ref(const tsql_tok *t, int a, int b) {
    static const char *const DATEPART_FNS[] = {"DATEADD", "DATEDIFF", "DATEDIFF_BIG", "DATEPART", "DATENAME",
                                               "DATETRUNC", "CONVERT", "TRY_CONVERT", NULL};
    for (int k = a; k < b; k++) {
        if (tsql_tok_op(&t[k], "(") && k + 1 < b && tsql_tok_is(&t[k + 1], "SELECT")) {
            int c = match_fwd(t, b, k);
            if (c < 0) return -1;
            k = c;
            continue;
        }
        if (!is_name(&t[k])) continue;
        if (k + 1 < b && tsql_tok_op(&t[k + 1], "(")) {
            if (is_any(&t[k], DATEPART_FNS)) { /* skip the first argument */
                int d = 0, q = k + 1;
                for (; q < b; q++) {
                    if (tsql_tok_op(&t[q], "(")) d++;
                    else if (tsql_tok_op(&t[q], ")") && --d == 0) break;
                    else if (d == 1 && tsql_tok_op(&t[q], ",")) break;
                }
                k = q;
            } else if (tsql_tok_is(&t[k], "CAST") || tsql_tok_is(&t[k], "TRY_CAST")) {
                int c = match_fwd(t, b, k + 1), d = 0;
                for (int q = k + 2; c > 0 && q < c; q++) {
                    if (tsql_tok_op(&t[q], "(")) d++;
                    else if (tsql_tok_op(&t[q], ")")) d--;
                    else if (d == 0 && tsql_tok_is(&t[q], "AS")) {
                        int inner = unqualified_ref(t, k + 2, q);
                        if (inner >= 0) return inner;
                        k = c;
                        break;
                    }
                }
            }
            continue;
        }
        if ((k + 1 < b && tsql_tok_op(&t[k + 1], ".")) || (k > a && tsql_tok_op(&t[k - 1], "."))) continue;
        if (t[k].t == TK_IDENT && xl_is_keyword(&t[k])) continue;
        if (tsql_tok_is(&t[k], "AT") && k + 2 < b && tsql_tok_is(&t[k + 1], "TIME") && tsql_tok_is(&t[k + 2], "ZONE")) {
            k += 2;
            continue;
        }
        return k;
    }
    return -1;
}

/* Where a reference "alias.col" starts at k of [a, b) (not part of a
 * longer name): col's token index, else -1. */
static int qualified_at(const tsql_tok *t, int k, int a, int b, const char *alias) {
    if (!(k + 2 < b && name_is(&t[k], alias) && tsql_tok_op(&t[k + 1], "."))) return -1;
    if (k > a && tsql_tok_op(&t[k - 1], ".")) return -1;
    if (k + 3 < b && tsql_tok_op(&t[k + 3], ".")) return -1;
    if (!is_name(&t[k + 2]) && !tsql_tok_op(&t[k + 2], "*")) return -1;
    return k + 2;
}

/* Shape 1: the left derived table [lopen, lclose] (alias lalias) has at
 * most one row; the APPLY's keywords at k, the applied query's parentheses
 * rp..rc, its alias token ra. */
static int apply_left_row(rw *r, int k, int lopen, int lclose, const char *lalias, const sel_shape *L, int rp, int rc_,
                          int ra, bool outer) {
    const tsql_tok *t = r->v.t;
    const char *kind = outer ? "OUTER" : "CROSS";
    tv ins = {0};
    r->line = t[k].line;
    int rc = TV_WORDS(r, &ins, outer ? "LEFT" : "CROSS", "JOIN", "(");
    for (int q = rp + 1; q < rc_ && rc == MCDC_OK; q++) {
        int col = qualified_at(t, q, rp + 1, rc_, lalias);
        if (col < 0) {
            rc = tv_range(r, &ins, t, q, q + 1);
            continue;
        }
        char cn[MCDC_IDENT_BYTES_MAX];
        if (tsql_tok_op(&t[col], "*")) { rc = refuse_apply(r, kind, "the applied query reads the left side's *"); break; }
        tsql_tok_text(&t[col], cn, sizeof cn);
        int it = item_named(L, cn);
        if (it < 0) { rc = rw_fail(r, 207, "Invalid column name '%s'.%s", cn, ""); break; }
        if (L->from < 0) {
            int u = unqualified_ref(t, L->item_s[it], L->item_e[it]);
            if (u >= 0) {
                char why[3 * MCDC_IDENT_BYTES_MAX + 256], un[MCDC_IDENT_BYTES_MAX];
                tsql_tok_text(&t[u], un, sizeof un);
                snprintf(why, sizeof why,
                         "column '%s' of '%s' moves into the applied query, where its unqualified column '%s' would"
                         " bind to other tables; qualify it with its table's alias", cn, lalias, un);
                rc = refuse_apply(r, kind, why);
                break;
            }
            rc = TV_WORDS(r, &ins, "(");
            if (rc == MCDC_OK) rc = tv_range(r, &ins, t, L->item_s[it], L->item_e[it]);
            if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, ")");
        } else {
            rc = TV_WORDS(r, &ins, "(", "SELECT");
            if (rc == MCDC_OK) rc = tv_range(r, &ins, t, L->item_s[it], L->item_e[it]);
            if (rc == MCDC_OK) rc = tv_range(r, &ins, t, L->from, lclose);
            if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, ")");
        }
        q = col;
    }
    if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, ")", "AS");
    if (rc == MCDC_OK) rc = tv_range(r, &ins, t, ra, ra + 1);
    if (rc == MCDC_OK && outer) rc = TV_WORDS(r, &ins, "ON", "1", "=", "1");
    (void)lopen;
    if (rc == MCDC_OK) return tv_splice(r, k, ra + 1, &ins);
    mcdc_free(ins.t);
    return rc;
}

/* Copies [a, b) into ins with each ralias.col replaced by its scalar
 * subquery over the applied query R (parentheses rp..rc). A reference that
 * is a whole item of the select list [la, lb) keeps its name ("AS col"). */
static int copy_subst(rw *r, tv *ins, int a, int b, const char *ralias, const sel_shape *R, int rc_, const char *kind,
                      int la, int lb) {
    const tsql_tok *t = r->v.t;
    int rc = MCDC_OK;
    for (int q = a; q < b && rc == MCDC_OK; q++) {
        int col = qualified_at(t, q, a, b, ralias);
        if (col < 0) {
            if (is_name(&t[q]) && !(q > a && (tsql_tok_op(&t[q - 1], ".") || tsql_tok_is(&t[q - 1], "AS"))) &&
                !(q + 1 < b && (tsql_tok_op(&t[q + 1], ".") || tsql_tok_op(&t[q + 1], "("))) &&
                !(t[q].t == TK_IDENT && xl_is_keyword(&t[q]))) {
                char nm[MCDC_IDENT_BYTES_MAX];
                tsql_tok_text(&t[q], nm, sizeof nm);
                if (item_named(R, nm) >= 0) {
                    char why[3 * MCDC_IDENT_BYTES_MAX + 64];
                    snprintf(why, sizeof why, "name its column '%s' as %s.%s", nm, ralias, nm);
                    return refuse_apply(r, kind, why);
                }
            }
            rc = tv_range(r, ins, t, q, q + 1);
            continue;
        }
        if (tsql_tok_op(&t[col], "*")) return refuse_apply(r, kind, "name the applied query's columns instead of *");
        char cn[MCDC_IDENT_BYTES_MAX];
        tsql_tok_text(&t[col], cn, sizeof cn);
        int it = item_named(R, cn);
        if (it < 0) return rw_fail(r, 207, "Invalid column name '%s'.%s", cn, "");
        rc = TV_WORDS(r, ins, "(", "SELECT");
        if (rc == MCDC_OK && R->top) rc = tv_range(r, ins, t, R->top_a, R->top_b);
        if (rc == MCDC_OK) rc = tv_range(r, ins, t, R->item_s[it], R->item_e[it]);
        if (rc == MCDC_OK) rc = tv_range(r, ins, t, R->items_b, rc_);
        if (rc == MCDC_OK) rc = TV_WORDS(r, ins, ")");
        bool whole = q >= la && col < lb && (q == la || tsql_tok_op(&t[q - 1], ",")) &&
                     (col + 1 == lb || tsql_tok_op(&t[col + 1], ","));
        if (rc == MCDC_OK && whole) {
            rc = TV_WORDS(r, ins, "AS");
            if (rc == MCDC_OK) rc = tv_range(r, ins, t, col, col + 1);
        }
        q = col;
    }
    return rc;
}

/* Shape 2: the applied query (parentheses rp..rc, alias token ra) returns
 * at most one row; the APPLY's keywords at k. */
static int apply_right_row(rw *r, int k, const sel_shape *R, int rp, int rc_, int ra, bool outer) {
    const tsql_tok *t = r->v.t;
    int n = r->v.n;
    const char *kind = outer ? "OUTER" : "CROSS";
    char ralias[MCDC_IDENT_BYTES_MAX];
    tsql_tok_text(&t[ra], ralias, sizeof ralias);
    /* the enclosing SELECT: [sel, end) at k's depth */
    int sel = -1, d = 0;
    for (int q = k - 1; q >= 0; q--) {
        if (tsql_tok_op(&t[q], ")")) d++;
        else if (tsql_tok_op(&t[q], "(")) { if (--d < 0) break; }
        else if (d == 0 && tsql_tok_is(&t[q], "SELECT")) { sel = q; break; }
    }
    if (sel < 0) return refuse_apply(r, kind, "no SELECT encloses it");
    int end = n;
    d = 0;
    for (int q = ra + 1; q < n; q++) {
        if (tsql_tok_op(&t[q], "(")) d++;
        else if (tsql_tok_op(&t[q], ")")) { if (d-- == 0) { end = q; break; } }
        else if (d == 0 && (tsql_tok_is(&t[q], "UNION") || tsql_tok_is(&t[q], "EXCEPT") ||
                            tsql_tok_is(&t[q], "INTERSECT") || tsql_tok_op(&t[q], ";"))) { end = q; break; }
    }
    sel_shape *E = mcdc_malloc(sizeof *E);
    if (!E) return mcdc_error_set(r->err, MCDC_E_NOMEM, "out of memory");
    parse_select(t, sel, k, E);
    bool star = E->star;
    int la = E->items_a, lb = E->items_b;
    mcdc_free(E);
    if (star) return refuse_apply(r, kind, "name the columns of the SELECT instead of *");
    /* its WHERE (or where one goes) after the APPLY */
    int where = -1, where_end = end, ins_at = end;
    d = 0;
    for (int q = ra + 1; q < end; q++) {
        if (tsql_tok_op(&t[q], "(")) { d++; continue; }
        if (tsql_tok_op(&t[q], ")")) { d--; continue; }
        if (d != 0) continue;
        bool after = tsql_tok_is(&t[q], "GROUP") || tsql_tok_is(&t[q], "HAVING") || tsql_tok_is(&t[q], "ORDER") ||
                     tsql_tok_is(&t[q], "OPTION") || tsql_tok_is(&t[q], "WINDOW") || tsql_tok_is(&t[q], "FOR");
        if (tsql_tok_is(&t[q], "WHERE") && where < 0) where = q;
        else if (after) {
            if (where >= 0 && where_end == end) where_end = q;
            if (ins_at == end) ins_at = q;
        }
    }
    r->line = t[k].line;
    tv ins = {0};
    int rc = copy_subst(r, &ins, sel, k, ralias, R, rc_, kind, la, lb);
    int tail = where >= 0 ? where + 1 : ins_at;
    if (rc == MCDC_OK) rc = copy_subst(r, &ins, ra + 1, where >= 0 ? where + 1 : ins_at, ralias, R, rc_, kind, -1, -1);
    if (rc == MCDC_OK && !outer) {
        if (where < 0) rc = TV_WORDS(r, &ins, "WHERE");
        if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, "EXISTS", "(");
        if (rc == MCDC_OK) rc = tv_range(r, &ins, t, rp + 1, rc_);
        if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, ")");
        if (rc == MCDC_OK && where >= 0) {
            rc = TV_WORDS(r, &ins, "AND", "(");
            if (rc == MCDC_OK) rc = copy_subst(r, &ins, where + 1, where_end, ralias, R, rc_, kind, -1, -1);
            if (rc == MCDC_OK) rc = TV_WORDS(r, &ins, ")");
            tail = where_end;
        }
    }
    if (rc == MCDC_OK) rc = copy_subst(r, &ins, tail, end, ralias, R, rc_, kind, -1, -1);
    if (rc == MCDC_OK) return tv_splice(r, sel, end, &ins);
    mcdc_free(ins.t);
    return rc;
}

/* Rewrites the last APPLY of the statement; *done when there is none. */
static int apply_last(rw *r, bool *done) {
    const tsql_tok *t = r->v.t;
    int n = r->v.n, k = -1;
    for (int q = n - 2; q >= 0 && k < 0; q--)
        if ((tsql_tok_is(&t[q], "CROSS") || tsql_tok_is(&t[q], "OUTER")) && tsql_tok_is(&t[q + 1], "APPLY")) k = q;
    *done = k < 0;
    if (k < 0) return MCDC_OK;
    bool outer = tsql_tok_is(&t[k], "OUTER");
    const char *kind = outer ? "OUTER" : "CROSS";
    r->line = t[k].line;
    /* the right side: ( SELECT ... ) [AS] alias */
    int rp = k + 2;
    if (!(rp + 1 < n && tsql_tok_op(&t[rp], "(") && tsql_tok_is(&t[rp + 1], "SELECT")))
        return refuse_apply(r, kind, "its right side must be a derived table, (SELECT ...) AS alias (the simulator"
                                     " applies no table-valued function)");
    int rc_ = match_fwd(t, n, rp);
    if (rc_ < 0) return rw_fail(r, 102, "Incorrect syntax near '%s'.%s", "APPLY", "");
    int ra = rc_ + 1;
    if (ra < n && tsql_tok_is(&t[ra], "AS")) ra++;
    if (!(ra < n && is_name(&t[ra]) && !(t[ra].t == TK_IDENT && xl_ends_table(&t[ra]))))
        return rw_fail(r, 102, "Incorrect syntax near '%s'.%s", ")", "");
    /* the left side: a derived table alone in its FROM list? */
    int le = k - 1, lopen = -1, lclose = -1;
    char lalias[MCDC_IDENT_BYTES_MAX] = "";
    if (le >= 0 && is_name(&t[le])) {
        tsql_tok_text(&t[le], lalias, sizeof lalias);
        int lp = le - 1;
        if (lp >= 0 && tsql_tok_is(&t[lp], "AS")) lp--;
        if (lp >= 0 && tsql_tok_op(&t[lp], ")")) {
            int o = match_back(t, lp);
            if (o > 0 && tsql_tok_is(&t[o + 1], "SELECT") && (tsql_tok_is(&t[o - 1], "FROM") || tsql_tok_op(&t[o - 1], ","))) {
                lopen = o;
                lclose = lp;
            }
        }
    }
    sel_shape *sh = mcdc_malloc(sizeof *sh);
    if (!sh) return mcdc_error_set(r->err, MCDC_E_NOMEM, "out of memory");
    int rc = MCDC_E_UNSUPPORTED;
    if (lopen >= 0) {
        parse_select(t, lopen + 1, lclose, sh);
        bool no_from = sh->from < 0 && sh->where < 0 && sh->group < 0 && sh->having < 0 && sh->compound < 0 && !sh->top;
        bool agg = sh->from >= 0 && sh->agg && sh->group < 0 && sh->compound < 0 && !sh->top && !sh->star;
        if (no_from || agg) rc = apply_left_row(r, k, lopen, lclose, lalias, sh, rp, rc_, ra, outer);
    }
    if (rc == MCDC_E_UNSUPPORTED) {
        parse_select(t, rp + 1, rc_, sh);
        bool one = sh->group < 0 && sh->compound < 0 && !sh->distinct && !sh->star &&
                   (sh->top ? sh->top_one : sh->agg || (sh->from < 0 && sh->where < 0 && sh->having < 0));
        if (one) rc = apply_right_row(r, k, sh, rp, rc_, ra, outer);
        else rc = refuse_apply(r, kind, "neither side has that shape");
    }
    mcdc_free(sh);
    return rc;
}

/* ---- MIN/MAX as seeks --------------------------------------------------------- */
/* The aggregate of item [s, e) as [*ma, *mb): "MIN ( ref )" inside
 * CAST(... AS type) or CONVERT(type, ...[, style]); false otherwise. */
static bool minmax_item(const tsql_tok *t, int s, int e, int *ma, int *mb) {
    if (e - s >= 2 && tsql_tok_is(&t[e - 2], "AS") && is_name(&t[e - 1])) e -= 2;
    else if (e - s >= 2 && is_name(&t[e - 1]) && tsql_tok_op(&t[e - 2], ")")) e -= 1; /* "CAST(...) lo" */
    if (e - s < 7 || !tsql_tok_op(&t[s + 1], "(") || match_fwd(t, e, s + 1) != e - 1) return false;
    int a;
    if (tsql_tok_is(&t[s], "CAST")) a = s + 2;
    else if (tsql_tok_is(&t[s], "CONVERT")) {
        a = s + 2;
        int d = 0;
        while (a < e - 1 && !(d == 0 && tsql_tok_op(&t[a], ","))) {
            if (tsql_tok_op(&t[a], "(")) d++;
            else if (tsql_tok_op(&t[a], ")")) d--;
            a++;
        }
        a++;
    } else return false;
    if (a + 3 >= e || !(tsql_tok_is(&t[a], "MIN") || tsql_tok_is(&t[a], "MAX")) || !tsql_tok_op(&t[a + 1], "(")) return false;
    int close = match_fwd(t, e, a + 1);
    if (close < 0) return false;
    /* one column: name or qualifier.name */
    int n = close - (a + 2);
    bool col = (n == 1 && is_name(&t[a + 2])) ||
               (n == 3 && is_name(&t[a + 2]) && tsql_tok_op(&t[a + 3], ".") && is_name(&t[a + 4]));
    if (!col) return false;
    /* after it: AS type ) for CAST, ) or , style ) for CONVERT */
    if (tsql_tok_is(&t[s], "CAST") && !tsql_tok_is(&t[close + 1], "AS")) return false;
    *ma = a;
    *mb = close + 1;
    return true;
}

/* SELECT <items> FROM <one table> [WHERE ...]: the FROM's index, or -1. */
static int minmax_from(const tsql_tok *t, int from, int to) {
    if (to - from < 4 || !tsql_tok_is(&t[from], "SELECT")) return -1;
    static const char *const STOP[] = {"GROUP", "HAVING", "ORDER", "UNION", "EXCEPT", "INTERSECT", "JOIN", "APPLY",
                                       "OPTION", "FOR", "TOP", "DISTINCT", NULL};
    int f = -1, d = 0;
    for (int k = from + 1; k < to; k++) {
        if (tsql_tok_op(&t[k], "(")) d++;
        else if (tsql_tok_op(&t[k], ")")) d--;
        else if (d == 0 && (is_any(&t[k], STOP) || (f >= 0 && tsql_tok_op(&t[k], ",")))) return -1;
        else if (d == 0 && f < 0 && tsql_tok_is(&t[k], "FROM")) f = k;
    }
    return f > from + 1 && f + 1 < to ? f : -1;
}

static bool minmax_match(const tsql_tok *t, int from, int to) {
    int f = minmax_from(t, from, to);
    if (f < 0) return false;
    int s = from + 1, d = 0, ma, mb;
    for (int k = from + 1; k <= f; k++) {
        if (k < f && tsql_tok_op(&t[k], "(")) { d++; continue; }
        if (k < f && tsql_tok_op(&t[k], ")")) { d--; continue; }
        if (k < f && !(d == 0 && tsql_tok_op(&t[k], ","))) continue;
        if (!minmax_item(t, s, k, &ma, &mb)) return false;
        s = k + 1;
    }
    return true;
}

/* Each item's aggregate becomes its own scalar subquery over the FROM and
 * WHERE, which leave the statement. */
static int minmax_rewrite(rw *r) {
    const tsql_tok *t = r->v.t;
    int n = r->v.n, f = minmax_from(t, 0, n);
    tv out = {0};
    int rc = tv_tok(r, &out, TK_IDENT, "SELECT");
    int s = 1, d = 0, ma = 0, mb = 0;
    for (int k = 1; k <= f && rc == MCDC_OK; k++) {
        if (k < f && tsql_tok_op(&t[k], "(")) { d++; continue; }
        if (k < f && tsql_tok_op(&t[k], ")")) { d--; continue; }
        if (k < f && !(d == 0 && tsql_tok_op(&t[k], ","))) continue;
        if (!minmax_item(t, s, k, &ma, &mb)) { /* cannot be: matched before */
            mcdc_free(out.t);
            return rw_fail(r, 50000, "the MIN/MAX rewrite lost its shape%s%s", "", "");
        }
        rc = tv_range(r, &out, t, s, ma);
        if (rc == MCDC_OK) rc = TV_WORDS(r, &out, "(", "SELECT");
        if (rc == MCDC_OK) rc = tv_range(r, &out, t, ma, mb);
        if (rc == MCDC_OK) rc = tv_range(r, &out, t, f, n); /* FROM ... [WHERE ...] */
        if (rc == MCDC_OK) rc = tv_tok(r, &out, TK_OP, ")");
        if (rc == MCDC_OK) rc = tv_range(r, &out, t, mb, k);
        if (rc == MCDC_OK && k < f) rc = tv_tok(r, &out, TK_OP, ",");
        s = k + 1;
    }
    if (rc == MCDC_OK) return tv_splice(r, 0, n, &out);
    mcdc_free(out.t);
    return rc;
}

/* ---- entry ------------------------------------------------------------------- */
static bool needs_rewrite(const tsql_tok *t, int from, int to) {
    if (minmax_match(t, from, to)) return true;
    for (int k = from; k < to; k++) {
        if (tsql_tok_is(&t[k], "APPLY") && k > from && (tsql_tok_is(&t[k - 1], "CROSS") || tsql_tok_is(&t[k - 1], "OUTER")))
            return true;
        int al, lo;
        if (tsql_tok_op(&t[k], "(") && alias_list_at(t + from, to - from, k - from, &al, &lo) >= 0) return true;
    }
    return false;
}

int tsql_rewrite(const tsql_tok *t, int from, int to, tsql_rewritten *out, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    if (from >= to || !needs_rewrite(t, from, to)) return MCDC_OK;
    rw r = {{0}, out, err, t[from].line};
    int rc = tv_range(&r, &r.v, t, from, to);
    /* column alias lists, innermost (rightmost) first */
    for (int i = r.v.n - 1; i >= 0 && rc == MCDC_OK; i--) {
        int alias, lopen;
        int lclose = alias_list_at(r.v.t, r.v.n, i, &alias, &lopen);
        if (lclose >= 0) rc = alias_list_rewrite(&r, i, alias, lopen, lclose);
    }
    for (int rounds = 0; rc == MCDC_OK; rounds++) {
        if (rounds > MCDC_TSQL_APPLY_MAX) {
            rc = mcdc_error_set(err, MCDC_E_LIMIT, "more than %d APPLY operators in one statement", MCDC_TSQL_APPLY_MAX);
            break;
        }
        bool done = false;
        rc = apply_last(&r, &done);
        if (done) break;
    }
    if (rc == MCDC_OK && minmax_match(r.v.t, 0, r.v.n)) rc = minmax_rewrite(&r);
    if (rc == MCDC_OK) rc = tv_reserve(&r, &r.v, 1);
    if (rc != MCDC_OK) {
        mcdc_free(r.v.t);
        tsql_rewritten_free(out);
        return rc;
    }
    r.v.t[r.v.n] = (tsql_tok){TK_EOF, "", 0, r.v.n ? r.v.t[r.v.n - 1].line : 1};
    out->toks = r.v.t;
    out->ntoks = r.v.n;
    return MCDC_OK;
}

void tsql_rewritten_free(tsql_rewritten *r) {
    if (!r) return;
    mcdc_free(r->toks);
    for (int k = 0; k < r->ntexts; k++) mcdc_free(r->texts[k]);
    mcdc_free(r->texts);
    memset(r, 0, sizeof *r);
}
