/* tsql_xlate.c - T-SQL to SQLite translation (see tsql_xlate.h). */
#include "tsql_xlate.h"

#include <stdio.h>
#include <string.h>

#include "sim_val.h"

typedef struct xl {
    const xl_env *env;
    const tsql_tok *t;
    int to;
    mcdc_buf *out;
    xl_result *res;
    mcdc_error *err;
    int depth;
    size_t last_prim;   /* output offset where the last primary started */
    bool last_stringy;  /* the last primary is a string */
    int sel_items_level; /* depth whose select list is tracked (0 = outermost) */
    char ctes[16][MCDC_IDENT_BYTES_MAX]; /* WITH names: tables of this statement */
    int nctes;
    bool tracking;
    int item_start;
    /* the statement's tables, found before translation: a method's receiver
     * (a column of a CLR type) is typed before FROM is read */
    xl_table pre[XL_TABLES_MAX];
    int npre;
} xl;

/* Words emitted as they are (SQLite understands them). */
static const char *KEYWORDS[] = {
    "SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "NULL", "IS", "IN", "BETWEEN", "LIKE", "ESCAPE",
    "CASE", "WHEN", "THEN", "ELSE", "END", "AS", "ASC", "DESC", "OVER", "PARTITION", "BY", "ORDER",
    "GROUP", "HAVING", "DISTINCT", "ALL", "EXISTS", "INNER", "LEFT", "RIGHT", "OUTER", "FULL", "CROSS",
    "JOIN", "ON", "UNION", "EXCEPT", "INTERSECT", "ROWS", "RANGE", "PRECEDING", "FOLLOWING",
    "UNBOUNDED", "CURRENT", "ROW", "VALUES", "SET", "INTO", "DEFAULT", "WITH", NULL};

bool xl_is_keyword(const tsql_tok *t) {
    if (t->t != TK_IDENT) return false;
    for (int k = 0; KEYWORDS[k]; k++) if (tsql_tok_is(t, KEYWORDS[k])) return true;
    return false;
}

/* Words that end a table reference (cannot be an alias). */
bool xl_ends_table(const tsql_tok *t) {
    static const char *W[] = {"WHERE", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "ON", "ORDER",
                              "GROUP", "HAVING", "UNION", "EXCEPT", "INTERSECT", "OPTION", "WITH",
                              "OFFSET", "FOR", "SET", "VALUES", "OUTPUT", "SELECT", "INSERT", "UPDATE",
                              "DELETE", "EXEC", "EXECUTE", "DECLARE", "BEGIN", "COMMIT", "ROLLBACK",
                              "CREATE", "ALTER", "DROP", "USE", "GRANT", "TABLESAMPLE", NULL};
    if (t->t != TK_IDENT) return true;
    for (int k = 0; W[k]; k++) if (tsql_tok_is(t, W[k])) return true;
    return false;
}

int xl_append_literal(mcdc_buf *out, const char *s, size_t n) {
    int rc = mcdc_buf_append_byte(out, '\'', NULL);
    for (size_t k = 0; k < n && rc == MCDC_OK; k++) {
        if (s[k] == '\'') rc = mcdc_buf_append_byte(out, '\'', NULL);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, (uint8_t)s[k], NULL);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, '\'', NULL);
    return rc;
}

int xl_append_ident(mcdc_buf *out, const char *s) {
    int rc = mcdc_buf_append_byte(out, '"', NULL);
    for (const char *p = s; *p && rc == MCDC_OK; p++) {
        if (*p == '"') rc = mcdc_buf_append_byte(out, '"', NULL);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, (uint8_t)*p, NULL);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, '"', NULL);
    return rc;
}

int xl_name_parts(const tsql_tok *toks, int *i, int to, char parts[4][MCDC_IDENT_BYTES_MAX]) {
    int n = 0, k = *i;
    while (k < to && n < 4) {
        if (toks[k].t == TK_IDENT || toks[k].t == TK_QIDENT) {
            tsql_tok_text(&toks[k], parts[n], MCDC_IDENT_BYTES_MAX);
            n++;
            k++;
        } else if (tsql_tok_op(&toks[k], ".") && n == 0) {
            parts[n++][0] = 0; /* ..name: empty part */
            continue;
        } else break;
        if (k < to && tsql_tok_op(&toks[k], ".")) {
            k++;
            while (k < to && tsql_tok_op(&toks[k], ".") && n < 4) { parts[n++][0] = 0; k++; }
            continue;
        }
        break;
    }
    *i = k;
    return n;
}

void xl_table_name(char parts[4][MCDC_IDENT_BYTES_MAX], int nparts, char *out, size_t cap) {
    const char *schema = nparts >= 2 && parts[nparts - 2][0] ? parts[nparts - 2] : "dbo";
    snprintf(out, cap, "%s.%s", schema, parts[nparts - 1]);
}

static int fail(xl *x, int number, const char *fmt, const char *arg) {
    mcdc_error_set(x->err, MCDC_E_SERVER, fmt, arg);
    if (x->err) { x->err->server_number = number; x->err->server_class = 16; x->err->server_state = 1; }
    return MCDC_E_SERVER;
}

static int syntax_near(xl *x, int i) {
    char tok[128];
    if (i >= x->to || x->t[i].t == TK_EOF) snprintf(tok, sizeof tok, "%s", "end of file");
    else snprintf(tok, sizeof tok, "%.*s", x->t[i].n > 100 ? 100 : x->t[i].n, x->t[i].s);
    if (i >= x->to || x->t[i].t == TK_EOF) return fail(x, 102, "Incorrect syntax near '%s'.", tok);
    return fail(x, 102, "Incorrect syntax near '%s'.", tok);
}

static int emit(xl *x, const char *s) { return mcdc_buf_append_str(x->out, s, x->err); }

static int xl_seq(xl *x, int *i, int end, bool until_paren);

/* Translates [from, to) into a new string (owned by caller). */
static char *sub(xl *x, int from, int to) {
    mcdc_buf b = {0}, *save = x->out;
    bool tr = x->tracking;
    x->out = &b;
    x->tracking = false;
    x->depth++;
    int i = from;
    int rc = xl_seq(x, &i, to, false);
    x->depth--;
    x->out = save;
    x->tracking = tr;
    if (rc != MCDC_OK || mcdc_buf_cstr(&b, x->err) != MCDC_OK) { mcdc_buf_free(&b); return NULL; }
    if (!b.data) return mcdc_strdup("");
    return (char *)b.data;
}

/* Matching close paren of the '(' at i; -1 if none. */
static int match_paren(const xl *x, int i, int end) {
    int d = 0;
    for (int k = i; k < end; k++) {
        if (tsql_tok_op(&x->t[k], "(")) d++;
        else if (tsql_tok_op(&x->t[k], ")")) { if (--d == 0) return k; }
    }
    return -1;
}

/* Splits args between '(' at open and ')' at close: starts[k], ends[k]. */
static int split_args(const xl *x, int open, int close, int *st, int *en, int max) {
    int n = 0, d = 0, s = open + 1;
    if (close == open + 1) return 0;
    for (int k = open + 1; k < close; k++) {
        if (tsql_tok_op(&x->t[k], "(")) d++;
        else if (tsql_tok_op(&x->t[k], ")")) d--;
        else if (d == 0 && tsql_tok_op(&x->t[k], ",")) {
            if (n < max) { st[n] = s; en[n] = k; }
            n++;
            s = k + 1;
        }
    }
    if (n < max) { st[n] = s; en[n] = close; }
    return n + 1;
}

static void tok_str(const tsql_tok *t, char *buf, size_t cap) {
    size_t n = (size_t)t->n < cap - 1 ? (size_t)t->n : cap - 1;
    memcpy(buf, t->s, n);
    buf[n] = 0;
}

/* The type text of tokens [a, b) ("decimal(18, 4)"). */
static void type_text(const xl *x, int a, int b, char *buf, size_t cap) {
    size_t o = 0;
    for (int k = a; k < b; k++) {
        char w[MCDC_IDENT_BYTES_MAX];
        if (x->t[k].t == TK_QIDENT) tsql_tok_text(&x->t[k], w, sizeof w);
        else tok_str(&x->t[k], w, sizeof w);
        size_t n = strlen(w);
        if (o + n + 1 >= cap) break;
        memcpy(buf + o, w, n);
        o += n;
    }
    buf[o] = 0;
}

static bool infer(const xl *x, int a, int b, sim_type *ty, bool *nul);

static int fn_call(xl *x, int name_from, const char *fname, int open, int end, int *next);

/* Table reference at *i (table position). */
static int table_ref(xl *x, int *i, int end) {
    char parts[4][MCDC_IDENT_BYTES_MAX];
    int k = *i;
    int np = xl_name_parts(x->t, &k, end, parts);
    if (np == 0) return syntax_near(x, *i);
    char name[MCDC_IDENT_BYTES_MAX * 2];
    const char *last = parts[np - 1];
    int rc = MCDC_OK;
    if (np == 1)
        for (int c = 0; c < x->nctes; c++)
            if (mcdc_str_ieq(x->ctes[c], last)) {
                rc = xl_append_ident(x->out, last);
                goto alias;
            }
    /* table-valued CDC function */
    if (k < end && tsql_tok_op(&x->t[k], "(") && np >= 2 && mcdc_str_ieq(parts[np - 2], "cdc") &&
        mcdc_str_nieq(last, "fn_cdc_get_all_changes_", 23)) {
        int close = match_paren(x, k, end);
        if (close < 0) return syntax_near(x, k);
        int st[4], en[4];
        int na = split_args(x, k, close, st, en, 4);
        if (na != 3) return fail(x, 313, "An insufficient number of arguments were supplied for the procedure or function %s.", last);
        char cols[8192];
        const char *ci = last + 23;
        if (!x->env->ci_columns || !x->env->ci_columns(x->env->ctx, ci, cols, sizeof cols))
            return fail(x, 208, "Invalid object name 'cdc.%s'.", last);
        char *a = sub(x, st[0], en[0]), *b = sub(x, st[1], en[1]), *c = sub(x, st[2], en[2]);
        if (!a || !b || !c) { mcdc_free(a); mcdc_free(b); mcdc_free(c); return MCDC_E_SERVER; }
        char ctn[MCDC_IDENT_BYTES_MAX];
        snprintf(ctn, sizeof ctn, "cdc.%s_CT", ci);
        rc = emit(x, "(SELECT \"__$start_lsn\", \"__$seqval\", \"__$operation\", \"__$update_mask\"");
        if (rc == MCDC_OK && cols[0]) rc = mcdc_buf_printf(x->out, x->err, ", %s", cols);
        if (rc == MCDC_OK) rc = emit(x, " FROM ");
        if (rc == MCDC_OK) rc = xl_append_ident(x->out, ctn);
        if (rc == MCDC_OK)
            rc = mcdc_buf_printf(x->out, x->err,
                                 " WHERE \"__$start_lsn\" BETWEEN (%s) AND (%s) AND (\"__$operation\" <> 3 OR lower(%s) = 'all update old')"
                                 " ORDER BY \"__$start_lsn\", \"__$command_id\", \"__$seqval\", \"__$operation\")",
                                 a, b, c);
        mcdc_free(a); mcdc_free(b); mcdc_free(c);
        if (x->res->ntables < XL_TABLES_MAX) {
            xl_table *tb = &x->res->tables[x->res->ntables++];
            snprintf(tb->name, sizeof tb->name, "%s", ctn);
            snprintf(tb->alias, sizeof tb->alias, "%s", last);
        }
        k = close + 1;
        goto alias;
    }
    int dyn = 0;
    if (np >= 2 && mcdc_str_ieq(parts[np - 2], "sys") && x->env->dyn_view) {
        snprintf(name, sizeof name, "sys.%s", last);
        size_t mark = x->out->len;
        rc = emit(x, "(");
        dyn = rc == MCDC_OK ? x->env->dyn_view(x->env->ctx, name, x->out) : -1;
        if (dyn == 1) rc = emit(x, ")");
        else if (dyn == 0) x->out->len = mark;
        else rc = MCDC_E_NOMEM;
    }
    if (rc != MCDC_OK) return rc;
    if (dyn == 1) {
        /* done: a dynamic view */
    } else {
        xl_table_name(parts, np, name, sizeof name);
        if (!x->env->table_exists(x->env->ctx, name)) {
            char shown[MCDC_IDENT_BYTES_MAX * 2];
            if (np >= 2) snprintf(shown, sizeof shown, "%s.%s", parts[np - 2], last);
            else snprintf(shown, sizeof shown, "%s", last);
            return fail(x, 208, "Invalid object name '%s'.", shown);
        }
        int ts = x->env->table_source ? x->env->table_source(x->env->ctx, name, x->out) : 0;
        if (ts < 0) return fail(x, 50000, "out of memory translating table '%s'", name);
        if (ts == 0) rc = xl_append_ident(x->out, name);
    }
    if (x->res->ntables < XL_TABLES_MAX) {
        xl_table *tb = &x->res->tables[x->res->ntables++];
        snprintf(tb->name, sizeof tb->name, "%.*s", (int)sizeof tb->name - 1, name);
        snprintf(tb->alias, sizeof tb->alias, "%s", last);
    }
alias:
    if (rc != MCDC_OK) return rc;
    /* alias */
    if (k < end && tsql_tok_is(&x->t[k], "AS")) {
        k++;
        if (k >= end || (x->t[k].t != TK_IDENT && x->t[k].t != TK_QIDENT)) return syntax_near(x, k);
    }
    if (k < end && (x->t[k].t == TK_QIDENT || (x->t[k].t == TK_IDENT && !xl_ends_table(&x->t[k])))) {
        char al[MCDC_IDENT_BYTES_MAX];
        tsql_tok_text(&x->t[k], al, sizeof al);
        rc = emit(x, " AS ");
        if (rc == MCDC_OK) rc = xl_append_ident(x->out, al);
        if (x->res->ntables > 0) snprintf(x->res->tables[x->res->ntables - 1].alias, MCDC_IDENT_BYTES_MAX, "%s", al);
        k++;
    } else {
        rc = emit(x, " AS ");
        if (rc == MCDC_OK) rc = xl_append_ident(x->out, last);
    }
    /* table hints: WITH (NOLOCK) */
    if (rc == MCDC_OK && k + 1 < end && tsql_tok_is(&x->t[k], "WITH") && tsql_tok_op(&x->t[k + 1], "(")) {
        int close = match_paren(x, k + 1, end);
        if (close < 0) return syntax_near(x, k);
        k = close + 1;
    }
    *i = k;
    return rc;
}

/* TOP n / TOP (expr) after SELECT at *i; returns the limit text. */
static char *parse_top(xl *x, int *i, int end) {
    int k = *i;
    if (k < end && tsql_tok_op(&x->t[k], "(")) {
        int close = match_paren(x, k, end);
        if (close < 0) { syntax_near(x, k); return NULL; }
        char *s = sub(x, k + 1, close);
        *i = close + 1;
        return s;
    }
    if (k < end && (x->t[k].t == TK_NUM || x->t[k].t == TK_VAR)) {
        char *s = sub(x, k, k + 1);
        *i = k + 1;
        return s;
    }
    syntax_near(x, k);
    return NULL;
}

static bool stringy_at(const xl *x, int k, int end) {
    if (k >= end) return false;
    const tsql_tok *t = &x->t[k];
    if (t->t == TK_STR || t->t == TK_NSTR) return true;
    if (t->t == TK_IDENT && k + 1 < end && tsql_tok_op(&x->t[k + 1], "(")) {
        static const char *F[] = {"QUOTENAME", "CONCAT", "UPPER", "LOWER", "LTRIM", "RTRIM", "SUBSTRING",
                                  "REPLACE", "LEFT", "RIGHT", "REPLICATE", "DB_NAME", "SCHEMA_NAME", "OBJECT_NAME", NULL};
        for (int f = 0; F[f]; f++) if (tsql_tok_is(t, F[f])) return true;
        if (tsql_tok_is(t, "CONVERT") || tsql_tok_is(t, "CAST")) {
            /* CONVERT(n?varchar..., CAST(.. AS n?varchar) */
            int close = match_paren(x, k + 1, end);
            for (int q = k + 2; q < close; q++)
                if (x->t[q].t == TK_IDENT && (tsql_tok_is(&x->t[q], "varchar") || tsql_tok_is(&x->t[q], "nvarchar") ||
                                              tsql_tok_is(&x->t[q], "char") || tsql_tok_is(&x->t[q], "nchar") ||
                                              tsql_tok_is(&x->t[q], "sysname")))
                    return true;
        }
    }
    return false;
}

/* A numeric literal SQLite cannot hold exactly: digits (no exponent) with a
 * '.' and more than 15 significant digits, or an integer past 2^63-1. Sets
 * the decimal precision and scale SQL Server gives it. */
static bool long_numeric(const tsql_tok *t, int *prec, int *scale) {
    int digits = 0, frac = 0, lead = 0;
    bool dot = false, nonzero = false;
    for (int k = 0; k < t->n; k++) {
        char ch = t->s[k];
        if (ch == '.') { if (dot) return false; dot = true; continue; }
        if (ch < '0' || ch > '9') return false; /* exponent, hex: left to SQLite */
        if (!nonzero && ch == '0' && !dot) { lead++; continue; }
        nonzero = true;
        digits++;
        if (dot) frac++;
    }
    (void)lead;
    if (digits > 38) return false;
    bool is_long = dot ? digits > 15 : (digits > 19 || (digits == 19 && memcmp(t->s + (t->n - 19), "9223372036854775807", 19) > 0));
    if (!is_long) return false;
    *prec = digits < frac ? frac : digits;
    if (*prec < 1) *prec = 1;
    *scale = frac;
    return true;
}

static bool is_decimal_type(const sim_type *t) {
    return t->id == SIM_T_DECIMAL || t->id == SIM_T_MONEY || t->id == SIM_T_SMALLMONEY;
}

/* A decimal value (CAST, long literal, variable) compares as a decimal
 * column does: TEXT affinity (a number on the other side becomes text) and
 * the exact numeric collation. open: the part before the expression. */
static int emit_decimal_open(xl *x) { return emit(x, "(CAST("); }
static int emit_decimal_close(xl *x) { return emit(x, " AS TEXT) COLLATE " SIM_DECIMAL_COLLATION ")"); }

/* ---- the CLR types' methods and static methods ------------------------------ */
typedef enum { UK_NONE = 0, UK_HID, UK_GEOG, UK_GEOM } udt_kind;

static udt_kind kind_of(const sim_type *t) {
    return t->id == SIM_T_HIERARCHYID ? UK_HID : t->id == SIM_T_GEOGRAPHY ? UK_GEOG : t->id == SIM_T_GEOMETRY ? UK_GEOM : UK_NONE;
}

/* A method (call: with parentheses) or property of kind k and its result
 * type; NULL when k has none of that name. The SQLite function comes back
 * in *fn, with a code for its arguments in *shape: 0 (v), 1 (v, kind),
 * 2 (v, kind, which), 3 (v, arg). */
typedef struct udt_member {
    udt_kind kind;
    bool call;
    const char *name, *type, *fn;
    int shape, which, nargs;
} udt_member;

static const udt_member MEMBERS[] = {
    {UK_HID, true, "ToString", "nvarchar(4000)", "sim_hid_tostring", 0, 0, 0},
    {UK_HID, true, "GetLevel", "smallint", "sim_hid_level", 0, 0, 0},
    {UK_HID, true, "GetAncestor", "hierarchyid", "sim_hid_ancestor", 3, 0, 1},
    {UK_HID, true, "IsDescendantOf", "bit", "sim_hid_isdescendant", 3, 0, 1},
    {UK_GEOG, true, "ToString", "nvarchar(max)", "sim_geo_astext", 1, 0, 0},
    {UK_GEOG, true, "STAsText", "nvarchar(max)", "sim_geo_astext", 1, 0, 0},
    {UK_GEOG, true, "AsTextZM", "nvarchar(max)", "sim_geo_astext", 1, 0, 0},
    {UK_GEOG, true, "STAsBinary", "varbinary(max)", "sim_geo_asbinary", 1, 0, 0},
    /* the values here are 2D: their WKB with Z and M is STAsBinary's */
    {UK_GEOG, true, "AsBinaryZM", "varbinary(max)", "sim_geo_asbinary", 1, 0, 0},
    {UK_GEOG, true, "STGeometryType", "nvarchar(4000)", "sim_geo_type", 1, 0, 0},
    {UK_GEOG, true, "STNumPoints", "int", "sim_geo_numpoints", 1, 0, 0},
    {UK_GEOG, false, "STSrid", "int", "sim_geo_srid", 0, 0, 0},
    {UK_GEOG, false, "Lat", "float", "sim_geo_coord", 2, 0, 0},
    {UK_GEOG, false, "Long", "float", "sim_geo_coord", 2, 1, 0},
    {UK_GEOM, true, "ToString", "nvarchar(max)", "sim_geo_astext", 1, 0, 0},
    {UK_GEOM, true, "STAsText", "nvarchar(max)", "sim_geo_astext", 1, 0, 0},
    {UK_GEOM, true, "AsTextZM", "nvarchar(max)", "sim_geo_astext", 1, 0, 0},
    {UK_GEOM, true, "STAsBinary", "varbinary(max)", "sim_geo_asbinary", 1, 0, 0},
    /* the values here are 2D: their WKB with Z and M is STAsBinary's */
    {UK_GEOM, true, "AsBinaryZM", "varbinary(max)", "sim_geo_asbinary", 1, 0, 0},
    {UK_GEOM, true, "STGeometryType", "nvarchar(4000)", "sim_geo_type", 1, 0, 0},
    {UK_GEOM, true, "STNumPoints", "int", "sim_geo_numpoints", 1, 0, 0},
    {UK_GEOM, false, "STSrid", "int", "sim_geo_srid", 0, 0, 0},
    {UK_GEOM, false, "STX", "float", "sim_geo_coord", 2, 1, 0},
    {UK_GEOM, false, "STY", "float", "sim_geo_coord", 2, 0, 0},
};

static const udt_member *member_of(udt_kind k, const char *name, bool call) {
    for (size_t m = 0; m < sizeof MEMBERS / sizeof MEMBERS[0]; m++)
        if (MEMBERS[m].kind == k && MEMBERS[m].call == call && mcdc_str_ieq(MEMBERS[m].name, name)) return &MEMBERS[m];
    return NULL;
}

/* Is name a member of any of the CLR types? */
static bool any_member(const char *name, bool call) {
    for (size_t m = 0; m < sizeof MEMBERS / sizeof MEMBERS[0]; m++)
        if (MEMBERS[m].call == call && mcdc_str_ieq(MEMBERS[m].name, name)) return true;
    return false;
}

/* type::Method(...): the static methods the simulator has. */
typedef struct udt_static {
    udt_kind kind;
    const char *name, *fn;
    int nargs; /* -1: 1 or 2 (the SRID may be left out... not by SQL Server: see below) */
    int srid;  /* the SRID a Parse gives */
} udt_static;

static const udt_static STATICS[] = {
    {UK_HID, "Parse", "sim_hid_parse", 1, 0},
    {UK_HID, "GetRoot", NULL, 0, 0},
    {UK_GEOG, "Point", "sim_geo_point", 3, 0},
    {UK_GEOM, "Point", "sim_geo_point", 3, 0},
    {UK_GEOG, "Parse", "sim_geo_text", 1, 4326},
    {UK_GEOM, "Parse", "sim_geo_text", 1, 0},
    {UK_GEOG, "STGeomFromText", "sim_geo_text", 2, 0},
    {UK_GEOM, "STGeomFromText", "sim_geo_text", 2, 0},
    {UK_GEOG, "STPointFromText", "sim_geo_text", 2, 0},
    {UK_GEOM, "STPointFromText", "sim_geo_text", 2, 0},
    {UK_GEOG, "STLineFromText", "sim_geo_text", 2, 0},
    {UK_GEOM, "STLineFromText", "sim_geo_text", 2, 0},
    {UK_GEOG, "STPolyFromText", "sim_geo_text", 2, 0},
    {UK_GEOM, "STPolyFromText", "sim_geo_text", 2, 0},
    {UK_GEOG, "STGeomFromWKB", "sim_geo_wkb", 2, 0},
    {UK_GEOM, "STGeomFromWKB", "sim_geo_wkb", 2, 0},
};

static udt_kind kind_named(const char *type) {
    return mcdc_str_ieq(type, "hierarchyid") ? UK_HID : mcdc_str_ieq(type, "geography") ? UK_GEOG
           : mcdc_str_ieq(type, "geometry") ? UK_GEOM : UK_NONE;
}

static const udt_static *static_of(const char *type, const char *name) {
    udt_kind k = kind_named(type);
    for (size_t m = 0; k && m < sizeof STATICS / sizeof STATICS[0]; m++)
        if (STATICS[m].kind == k && mcdc_str_ieq(STATICS[m].name, name)) return &STATICS[m];
    return NULL;
}

static const char *kind_text(udt_kind k) { return k == UK_GEOG ? "'geography'" : "'geometry'"; }

/* Emits the member call on receiver text recv. */
static int emit_member(xl *x, const udt_member *m, const char *recv, char **args, int na) {
    if (na != m->nargs) return fail(x, 174, "The %s method requires the right number of arguments.", m->name);
    switch (m->shape) {
    case 0: return mcdc_buf_printf(x->out, x->err, "%s(%s)", m->fn, recv);
    case 1: return mcdc_buf_printf(x->out, x->err, "%s(%s, %s)", m->fn, recv, kind_text(m->kind));
    case 2: return mcdc_buf_printf(x->out, x->err, "%s(%s, %s, %d)", m->fn, recv, kind_text(m->kind), m->which);
    default: return mcdc_buf_printf(x->out, x->err, "%s(%s, %s)", m->fn, recv, args[0]);
    }
}

/* type::Method(args) with its '(' at open: translated into x->out. */
static int static_call(xl *x, const char *type, const char *name, int open, int end, int *next) {
    const udt_static *st = static_of(type, name);
    if (!st) {
        char what[MCDC_IDENT_BYTES_MAX * 2 + 4];
        snprintf(what, sizeof what, "%s::%s", type, name);
        return fail(x, 258, "Cannot call methods on %s (the simulator has no such static method).", what);
    }
    int close = match_paren(x, open, end);
    if (close < 0) return syntax_near(x, end);
    *next = close + 1;
    int sa[4], ea[4];
    int na = split_args(x, open, close, sa, ea, 4);
    if (na != st->nargs)
        return fail(x, 6506, "Could not find method '%s' for type with the number of arguments given.", name);
    char *args[4] = {0};
    int rc = MCDC_OK;
    for (int a = 0; a < na && rc == MCDC_OK; a++)
        if (!(args[a] = sub(x, sa[a], ea[a]))) rc = MCDC_E_SERVER;
    if (rc == MCDC_OK) {
        if (st->kind == UK_HID && !st->fn) rc = emit(x, "X''");
        else if (st->kind == UK_HID) rc = mcdc_buf_printf(x->out, x->err, "%s(%s)", st->fn, args[0]);
        else if (na == 3) rc = mcdc_buf_printf(x->out, x->err, "%s(%s, %s, %s, %s)", st->fn, args[0], args[1], args[2], kind_text(st->kind));
        else if (na == 2) rc = mcdc_buf_printf(x->out, x->err, "%s(%s, %s, %s)", st->fn, args[0], args[1], kind_text(st->kind));
        else rc = mcdc_buf_printf(x->out, x->err, "%s(%s, %d, %s)", st->fn, args[0], st->srid, kind_text(st->kind));
    }
    for (int a = 0; a < na; a++) mcdc_free(args[a]);
    return rc;
}

/* A member after a receiver whose tokens are [ra, rb) and whose text is
 * recv: the name at *i (after the '.'), its arguments if called. */
static int member_call(xl *x, int ra, int rb, const char *recv, int *ip, int end) {
    int i = *ip;
    char name[MCDC_IDENT_BYTES_MAX];
    tsql_tok_text(&x->t[i], name, sizeof name);
    bool call = i + 1 < end && tsql_tok_op(&x->t[i + 1], "(");
    sim_type rt;
    bool rn;
    udt_kind k = infer(x, ra, rb, &rt, &rn) ? kind_of(&rt) : UK_NONE;
    const udt_member *m = k ? member_of(k, name, call) : NULL;
    if (!m) {
        char shown[MCDC_IDENT_BYTES_MAX + 8];
        snprintf(shown, sizeof shown, "%s%s", name, call ? "()" : "");
        if (!k) return fail(x, 258, "Cannot call methods on this expression: the simulator types %s's receiver from a column of a table in FROM, a variable or a CAST (write CAST(x AS geography) or name the column).", shown);
        return fail(x, 6506, "Could not find method '%s' for type 'Microsoft.SqlServer.Types' in assembly 'Microsoft.SqlServer.Types'.", name);
    }
    char *args[2] = {0};
    int na = 0, rc = MCDC_OK, next = i + 1;
    if (call) {
        int close = match_paren(x, i + 1, end);
        if (close < 0) return syntax_near(x, end);
        int sa[2], ea[2];
        na = split_args(x, i + 1, close, sa, ea, 2);
        if (na > 2) na = 3;
        for (int a = 0; a < na && a < 2 && rc == MCDC_OK; a++)
            if (!(args[a] = sub(x, sa[a], ea[a]))) rc = MCDC_E_SERVER;
        next = close + 1;
    }
    if (rc == MCDC_OK) rc = emit_member(x, m, recv, args, na);
    for (int a = 0; a < 2; a++) mcdc_free(args[a]);
    *ip = next;
    return rc;
}

/* Is [a, b) "<receiver> . member [(...)]" with a member of a CLR type at
 * depth 0? *dot: the '.'. */
static bool member_suffix(const xl *x, int a, int b, int *dot) {
    int d = 0;
    for (int k = b - 1; k > a; k--) {
        const tsql_tok *t = &x->t[k];
        if (tsql_tok_op(t, ")")) { d++; continue; }
        if (tsql_tok_op(t, "(")) { d--; continue; }
        if (d != 0) continue;
        if (!tsql_tok_op(t, ".") || k + 1 >= b || x->t[k + 1].t != TK_IDENT) continue;
        char name[MCDC_IDENT_BYTES_MAX];
        tsql_tok_text(&x->t[k + 1], name, sizeof name);
        bool call = k + 2 < b && tsql_tok_op(&x->t[k + 2], "(");
        if (!any_member(name, call)) return false;
        if (call ? match_paren(x, k + 2, b) != b - 1 : k + 2 != b) return false;
        *dot = k;
        return true;
    }
    return false;
}

static int check_at_time_zone(xl *x, int *i, int end) {
    while (*i + 2 < end && tsql_tok_is(&x->t[*i], "AT") && tsql_tok_is(&x->t[*i + 1], "TIME") &&
           tsql_tok_is(&x->t[*i + 2], "ZONE")) {
        int k = *i + 3;
        int zs = k;
        if (k < end && tsql_tok_op(&x->t[k], "(")) {
            int close = match_paren(x, k, end);
            if (close < 0) return syntax_near(x, k);
            k = close + 1;
        } else if (k < end) k++;
        else return syntax_near(x, k);
        size_t at = x->last_prim;
        char *z = sub(x, zs, k);
        x->last_prim = at;
        if (!z) return MCDC_E_SERVER;
        const char *pre = "sim_at_time_zone(";
        size_t pl = strlen(pre);
        int rc = mcdc_buf_reserve(x->out, pl, x->err);
        if (rc == MCDC_OK) {
            memmove(x->out->data + x->last_prim + pl, x->out->data + x->last_prim, x->out->len - x->last_prim);
            memcpy(x->out->data + x->last_prim, pre, pl);
            x->out->len += pl;
            rc = mcdc_buf_printf(x->out, x->err, ", %s)", z);
        }
        mcdc_free(z);
        if (rc != MCDC_OK) return rc;
        *i = k;
        x->last_stringy = false;
    }
    return MCDC_OK;
}

static int xl_seq(xl *x, int *ip, int end, bool until_paren) {
    int i = *ip, rc = MCDC_OK;
    bool in_from = false, table_pos = false;
    char *top = NULL;
    bool after_select = false;
    /* a % b -> sim_mod(a, b) (SQLite's % truncates decimals to integers),
     * a / b -> sim_div(a, b) (SQLite's / by zero is NULL, not error 8134):
     * the last primary of this level (its first token, the token after it) */
    int lp_tok = -1, lp_end = -1, mod_left_tok = -1;
    bool mod_pending = false;
    const char *mod_fn = "";
    size_t mod_left = 0;
    if (x->depth > MCDC_TSQL_DEPTH_MAX) return fail(x, 191, "Some part of your SQL statement is nested too deeply. Rewrite the query or break it up into smaller queries.%s", "");
    while (i < end && rc == MCDC_OK) {
        const tsql_tok *t = &x->t[i];
        if (t->t == TK_EOF) break;
        if (tsql_tok_op(t, ")")) {
            if (until_paren) break;
            rc = syntax_near(x, i);
            break;
        }
        if (x->out->len > 0 && x->out->data[x->out->len - 1] != '(' && x->out->data[x->out->len - 1] != ' ' &&
            !tsql_tok_op(t, ","))
            rc = emit(x, " ");
        if (rc != MCDC_OK) break;
        if (table_pos && !tsql_tok_op(t, "(")) {
            rc = table_ref(x, &i, end);
            table_pos = false;
            if (rc == MCDC_OK && i < end && tsql_tok_op(&x->t[i], ",") && in_from) {
                rc = emit(x, ",");
                i++;
                table_pos = true;
            }
            continue;
        }
        table_pos = false;
        size_t prim_start = x->out->len;
        int tok_start = i;
        bool primary = false;
        x->last_stringy = false;
        switch (t->t) {
        case TK_IDENT: {
            if (tsql_tok_is(t, "SELECT")) {
                rc = emit(x, "SELECT");
                i++;
                if (i < end && (tsql_tok_is(&x->t[i], "DISTINCT") || tsql_tok_is(&x->t[i], "ALL"))) {
                    rc = mcdc_buf_printf(x->out, x->err, " %.*s", x->t[i].n, x->t[i].s);
                    i++;
                }
                if (i < end && tsql_tok_is(&x->t[i], "TOP")) {
                    i++;
                    mcdc_free(top);
                    top = parse_top(x, &i, end);
                    if (!top) { rc = MCDC_E_SERVER; break; }
                }
                after_select = true;
                if (x->tracking && x->depth == 0 && x->res->nitems == 0) x->item_start = i;
                in_from = false;
                continue;
            }
            if (tsql_tok_is(t, "FROM") || tsql_tok_is(t, "JOIN") || tsql_tok_is(t, "INTO")) {
                if (tsql_tok_is(t, "FROM") && x->tracking && x->depth == 0 && after_select) {
                    /* end of the outermost select list */
                    x->tracking = false;
                }
                rc = mcdc_buf_printf(x->out, x->err, "%.*s", t->n, t->s);
                i++;
                in_from = true;
                table_pos = true;
                continue;
            }
            if (tsql_tok_is(t, "WHERE") || tsql_tok_is(t, "GROUP") || tsql_tok_is(t, "ORDER") ||
                tsql_tok_is(t, "HAVING") || tsql_tok_is(t, "ON"))
                in_from = false;
            if (tsql_tok_is(t, "UNION") || tsql_tok_is(t, "EXCEPT") || tsql_tok_is(t, "INTERSECT")) {
                in_from = false;
                x->tracking = false;
            }
            if (tsql_tok_is(t, "OFFSET")) {
                /* OFFSET n ROWS [FETCH NEXT|FIRST m ROWS ONLY] */
                int k = i + 1, ns = k;
                while (k < end && !tsql_tok_is(&x->t[k], "ROWS") && !tsql_tok_is(&x->t[k], "ROW")) k++;
                if (k >= end) { rc = syntax_near(x, i); break; }
                char *off = sub(x, ns, k);
                if (!off) { rc = MCDC_E_SERVER; break; }
                k++;
                char *lim = NULL;
                if (k < end && tsql_tok_is(&x->t[k], "FETCH")) {
                    k += 2; /* FETCH NEXT|FIRST */
                    int ms = k;
                    while (k < end && !tsql_tok_is(&x->t[k], "ROWS") && !tsql_tok_is(&x->t[k], "ROW")) k++;
                    if (k + 1 >= end || !tsql_tok_is(&x->t[k + 1], "ONLY")) { mcdc_free(off); rc = syntax_near(x, k); break; }
                    lim = sub(x, ms, k);
                    if (!lim) { mcdc_free(off); rc = MCDC_E_SERVER; break; }
                    k += 2;
                }
                rc = mcdc_buf_printf(x->out, x->err, "LIMIT %s OFFSET %s", lim ? lim : "-1", off);
                mcdc_free(off);
                mcdc_free(lim);
                mcdc_free(top);
                top = NULL;
                i = k;
                continue;
            }
            if (tsql_tok_is(t, "COLLATE")) { i += 2; continue; }
            if (tsql_tok_is(t, "CURRENT_TIMESTAMP")) {
                rc = emit(x, "sim_getdate()");
                i++;
                primary = true;
                break;
            }
            if (tsql_tok_is(t, "TRUE") || tsql_tok_is(t, "FALSE")) { rc = syntax_near(x, i); break; }
            if (xl_is_keyword(t) && !(i + 1 < end && tsql_tok_op(&x->t[i + 1], "(") && (tsql_tok_is(t, "LEFT") || tsql_tok_is(t, "RIGHT")))) {
                rc = mcdc_buf_printf(x->out, x->err, "%.*s", t->n, t->s);
                i++;
                continue;
            }
        }
            /* fall through: a name */
            __attribute__((fallthrough));
        case TK_QIDENT: {
            char parts[4][MCDC_IDENT_BYTES_MAX];
            int k = i;
            int np = xl_name_parts(x->t, &k, end, parts);
            if (np == 0) { rc = syntax_near(x, i); break; }
            bool cte = false;
            for (int c = 0; np == 1 && c < x->nctes; c++) if (mcdc_str_ieq(x->ctes[c], parts[0])) cte = true;
            /* hierarchyid::Parse(...), geography::Point(...) */
            if (np == 1 && k + 2 < end && tsql_tok_op(&x->t[k], "::") && x->t[k + 1].t == TK_IDENT &&
                tsql_tok_op(&x->t[k + 2], "(")) {
                char mn[MCDC_IDENT_BYTES_MAX];
                tsql_tok_text(&x->t[k + 1], mn, sizeof mn);
                int nx = k + 3;
                rc = static_call(x, parts[0], mn, k + 2, end, &nx);
                i = nx;
                primary = true;
                break;
            }
            /* col.ToString(), g.STSrid: a member of a column of a CLR type */
            bool mcall = k < end && tsql_tok_op(&x->t[k], "(");
            if (np >= 2 && k >= i + 3 && x->t[k - 1].t == TK_IDENT && tsql_tok_op(&x->t[k - 2], ".") &&
                any_member(parts[np - 1], mcall)) {
                sim_type rt;
                bool rn;
                udt_kind uk = infer(x, i, k - 2, &rt, &rn) ? kind_of(&rt) : UK_NONE;
                if ((uk && member_of(uk, parts[np - 1], mcall)) || mcall) {
                    char *recv = sub(x, i, k - 2);
                    if (!recv) { rc = MCDC_E_SERVER; break; }
                    int mi = k - 1;
                    rc = member_call(x, i, k - 2, recv, &mi, end);
                    mcdc_free(recv);
                    i = mi;
                    primary = true;
                    break;
                }
            }
            if (k < end && tsql_tok_op(&x->t[k], "(") && t->t == TK_IDENT && !cte) {
                int nx = i + 1;
                rc = fn_call(x, i, parts[np - 1], k, end, &nx);
                i = nx;
                primary = true;
                break;
            }
            /* column reference: last two parts */
            int first = np >= 2 ? np - 2 : 0;
            for (int p = first; p < np && rc == MCDC_OK; p++) {
                if (p > first) rc = emit(x, ".");
                if (rc == MCDC_OK) rc = xl_append_ident(x->out, parts[p]);
            }
            i = k;
            primary = true;
            break;
        }
        case TK_VAR: {
            char vn[MCDC_IDENT_BYTES_MAX];
            sim_type vt;
            tok_str(t, vn, sizeof vn);
            bool dec = x->env->var_type && x->env->var_type(x->env->ctx, vn, &vt) && is_decimal_type(&vt);
            if (dec) rc = emit_decimal_open(x);
            if (rc == MCDC_OK) rc = mcdc_buf_printf(x->out, x->err, "%.*s", t->n, t->s);
            if (rc == MCDC_OK && dec) rc = emit_decimal_close(x);
            i++;
            primary = true;
            break;
        }
        case TK_SYSVAR: {
            char w[64];
            tok_str(t, w, sizeof w);
            if (mcdc_str_ieq(w, "@@SPID")) rc = mcdc_buf_printf(x->out, x->err, "%d", x->env->spid);
            else if (mcdc_str_ieq(w, "@@TRANCOUNT")) rc = mcdc_buf_printf(x->out, x->err, "%d", x->env->trancount);
            else if (mcdc_str_ieq(w, "@@ROWCOUNT")) rc = mcdc_buf_printf(x->out, x->err, "%lld", (long long)x->env->rowcount);
            else if (mcdc_str_ieq(w, "@@VERSION"))
                rc = mcdc_buf_printf(x->out, x->err,
                                     "'Microsoft SQL Server %d (mssql-cdc-sim) - %d.0.4135.4 (X64) \n\tDeveloper Edition (64-bit) on Linux'",
                                     x->env->product_major == 16 ? 2022 : x->env->product_major == 15 ? 2019 : 2017,
                                     x->env->product_major);
            else if (mcdc_str_ieq(w, "@@SERVERNAME")) rc = emit(x, "'mssql-cdc-sim'");
            else if (mcdc_str_ieq(w, "@@ERROR")) rc = emit(x, "0");
            else { rc = fail(x, 137, "Must declare the scalar variable \"%s\".", w); break; }
            i++;
            primary = true;
            break;
        }
        case TK_NUM: {
            /* A literal SQLite would read as a double (a decimal past 15
             * significant digits, an integer past 2^63-1) goes over as an
             * exact decimal text, as SQL Server types it numeric(p,s). */
            int p = 0, sc = 0;
            bool min64 = i > 0 && tsql_tok_op(&x->t[i - 1], "-") && t->n == 19 && memcmp(t->s, "9223372036854775808", 19) == 0;
            if (!min64 && long_numeric(t, &p, &sc)) {
                rc = emit_decimal_open(x);
                if (rc == MCDC_OK)
                    rc = mcdc_buf_printf(x->out, x->err, "sim_convert('%.*s', 'decimal(%d,%d)', NULL)", t->n, t->s, p, sc);
                if (rc == MCDC_OK) rc = emit_decimal_close(x);
            }
            else
                rc = mcdc_buf_printf(x->out, x->err, "%.*s", t->n, t->s);
            i++;
            primary = true;
            break;
        }
        case TK_STR: case TK_NSTR: {
            size_t cap = (size_t)t->n + 1;
            char *s = mcdc_malloc(cap);
            if (!s) { rc = MCDC_E_NOMEM; break; }
            size_t n = tsql_tok_text(t, s, cap);
            rc = xl_append_literal(x->out, s, n);
            mcdc_free(s);
            i++;
            primary = true;
            x->last_stringy = true;
            break;
        }
        case TK_HEX:
            rc = emit(x, "X'");
            if (rc == MCDC_OK && (t->n - 2) % 2) rc = emit(x, "0");
            if (rc == MCDC_OK) rc = mcdc_buf_append(x->out, t->s + 2, (size_t)t->n - 2, x->err);
            if (rc == MCDC_OK) rc = emit(x, "'");
            i++;
            primary = true;
            break;
        case TK_OP:
            if (tsql_tok_op(t, "(")) {
                int close = match_paren(x, i, end);
                if (close < 0) { rc = syntax_near(x, end); break; }
                rc = emit(x, "(");
                i++;
                x->depth++;
                bool tr = x->tracking;
                x->tracking = false;
                if (rc == MCDC_OK) rc = xl_seq(x, &i, close, true);
                x->tracking = tr;
                x->depth--;
                if (rc == MCDC_OK) rc = emit(x, ")");
                i = close + 1;
                primary = true;
                break;
            }
            if (tsql_tok_op(t, ";")) { i++; continue; }
            if (tsql_tok_op(t, "+")) {
                bool str = x->last_stringy || stringy_at(x, i + 1, end);
                rc = emit(x, str ? "||" : "+");
                i++;
                continue;
            }
            if (tsql_tok_op(t, "!<")) { rc = emit(x, ">="); i++; continue; }
            if (tsql_tok_op(t, "!>")) { rc = emit(x, "<="); i++; continue; }
            if ((tsql_tok_op(t, "%") || tsql_tok_op(t, "/")) && lp_end == i && !mod_pending &&
                !(lp_tok > 0 && (tsql_tok_op(&x->t[lp_tok - 1], "*") || tsql_tok_op(&x->t[lp_tok - 1], "/") ||
                                 tsql_tok_op(&x->t[lp_tok - 1], "%")))) {
                /* (a * b % c is (a * b) % c: left as SQLite's operator) */
                mod_pending = true;
                mod_fn = tsql_tok_op(t, "%") ? "sim_mod(" : "sim_div(";
                mod_left = x->last_prim;
                mod_left_tok = lp_tok;
                rc = emit(x, ",");
                i++;
                continue;
            }
            if (tsql_tok_op(t, ",") && x->tracking && x->depth == 0) {
                if (x->res->nitems < XL_ITEMS_MAX) x->res->nitems++;
            }
            rc = mcdc_buf_printf(x->out, x->err, "%.*s", t->n, t->s);
            i++;
            continue;
        default:
            rc = syntax_near(x, i);
            break;
        }
        if (rc != MCDC_OK) break;
        /* (expr).member, CAST(x AS hierarchyid).ToString(), @g.STSrid */
        while (primary && rc == MCDC_OK && i + 1 < end && tsql_tok_op(&x->t[i], ".") && x->t[i + 1].t == TK_IDENT) {
            char mn[MCDC_IDENT_BYTES_MAX];
            tsql_tok_text(&x->t[i + 1], mn, sizeof mn);
            if (!any_member(mn, i + 2 < end && tsql_tok_op(&x->t[i + 2], "("))) break;
            char *recv = mcdc_strndup((const char *)x->out->data + prim_start, x->out->len - prim_start);
            if (!recv) { rc = MCDC_E_NOMEM; break; }
            x->out->len = prim_start;
            int mi = i + 1;
            rc = member_call(x, tok_start, i, recv, &mi, end);
            mcdc_free(recv);
            i = mi;
        }
        if (rc != MCDC_OK) break;
        if (primary) {
            bool was_str = x->last_stringy;
            x->last_prim = prim_start;
            rc = check_at_time_zone(x, &i, end);
            if (rc == MCDC_OK && !x->last_stringy) x->last_stringy = was_str;
            lp_tok = tok_start;
            lp_end = i;
            if (rc == MCDC_OK && mod_pending) {
                size_t pl = strlen(mod_fn);
                rc = mcdc_buf_reserve(x->out, pl, x->err);
                if (rc == MCDC_OK) {
                    memmove(x->out->data + mod_left + pl, x->out->data + mod_left, x->out->len - mod_left);
                    memcpy(x->out->data + mod_left, mod_fn, pl);
                    x->out->len += pl;
                    rc = emit(x, ")");
                }
                x->last_prim = mod_left;
                lp_tok = mod_left_tok;
                mod_pending = false;
            }
            /* a string primary followed by '+' */
            if (rc == MCDC_OK && i < end && tsql_tok_op(&x->t[i], "+") && (was_str)) {
                rc = emit(x, " ||");
                i++;
            }
        }
    }
    if (rc == MCDC_OK && top) rc = mcdc_buf_printf(x->out, x->err, " LIMIT %s", top);
    mcdc_free(top);
    *ip = i;
    return rc;
}

/* Simple one-to-one renames. */
static const struct { const char *tsql, *sqlite; } RENAMES[] = {
    {"COUNT_BIG", "count"}, {"ISNULL", "ifnull"}, {"LEN", "sim_len"}, {"REPLICATE", "sim_replicate"}, {"SUBSTRING", "substr"},
    {"NEWID", "sim_newid"}, {"CONCAT", "sim_concat"}, {"QUOTENAME", "sim_quotename"},
    {"FLOOR", "sim_floor"}, {"CEILING", "sim_ceiling"}, {"SYSDATETIME", "sim_sysdatetime"},
    {"SYSUTCDATETIME", "sim_sysutcdatetime"}, {"GETDATE", "sim_getdate"}, {"GETUTCDATE", "sim_getutcdate"},
    {"SYSDATETIMEOFFSET", "sim_sysdatetimeoffset"}, {"CURRENT_TIMEZONE_ID", "sim_current_timezone_id"},
    {"SERVERPROPERTY", "sim_serverproperty"}, {"IIF", "iif"}, {"ABS", "abs"}, {"ROUND", "round"},
    {"UPPER", "upper"}, {"LOWER", "lower"}, {"LTRIM", "ltrim"}, {"RTRIM", "rtrim"}, {"REPLACE", "replace"},
    {"COALESCE", "coalesce"}, {"NULLIF", "nullif"}, {"MIN", "min"}, {"MAX", "max"}, {"SUM", "sim_sum"},
    {"AVG", "sim_avg"}, {"COUNT", "count"}, {"NTILE", "ntile"}, {"LAG", "lag"}, {"LEAD", "lead"},
    {"ROW_NUMBER", "row_number"}, {"RANK", "rank"}, {"DENSE_RANK", "dense_rank"},
    {"FIRST_VALUE", "first_value"}, {"LAST_VALUE", "last_value"}, {"OBJECT_ID", "sim_object_id"},
    {"CHARINDEX", "sim_charindex"}, {"SQL_VARIANT_PROPERTY", "sim_variant_property"},
};

/* The source of a CAST/CONVERT to tt whose tokens are [a, b) and whose
 * translation is e (a new string, caller frees): a sql_variant keeps its
 * source's type as its base type, a hierarchyid/geography/geometry becomes
 * its text (ToString) when converted to a string. */
static char *convert_source(xl *x, int a, int b, const sim_type *tt, const char *e) {
    sim_type src;
    bool sn;
    bool known = infer(x, a, b, &src, &sn);
    mcdc_buf o = {0};
    if (tt->id == SIM_T_SQL_VARIANT) {
        char tn[64];
        if (known && src.id != SIM_T_SQL_VARIANT) {
            sim_type_format(&src, tn, sizeof tn);
            mcdc_buf_printf(&o, NULL, "sim_to_variant(sim_convert(%s, '%s', NULL), '%s')", e, tn, tn);
        } else mcdc_buf_printf(&o, NULL, "sim_to_variant(%s)", e);
    } else if (known && kind_of(&src) && tt->id >= SIM_T_CHAR && tt->id <= SIM_T_NVARCHAR) {
        mcdc_buf_printf(&o, NULL, "sim_udt_text(%s, '%s')", e,
                        src.id == SIM_T_HIERARCHYID ? "hierarchyid" : src.id == SIM_T_GEOGRAPHY ? "geography" : "geometry");
    } else mcdc_buf_append_str(&o, e, NULL);
    if (mcdc_buf_cstr(&o, NULL) != MCDC_OK) { mcdc_buf_free(&o); return NULL; }
    return (char *)o.data;
}

static int fn_call(xl *x, int name_from, const char *fname, int open, int end, int *next) {
    (void)name_from;
    int close = match_paren(x, open, end);
    if (close < 0) return syntax_near(x, end);
    *next = close + 1;
    int st[16], en[16], rc = MCDC_OK;
    int na = split_args(x, open, close, st, en, 16);
    if (na > 16) return fail(x, 174, "The function %s has too many arguments.", fname);
    if (mcdc_str_ieq(fname, "CONVERT") || mcdc_str_ieq(fname, "TRY_CONVERT")) {
        if (na < 2 || na > 3) return fail(x, 174, "The %s function requires 2 to 3 arguments.", "convert");
        char ty[128];
        type_text(x, st[0], en[0], ty, sizeof ty);
        sim_type tt;
        if (!sim_type_parse(&tt, ty, strlen(ty))) return fail(x, 243, "Type %s is not a defined system type.", ty);
        char *e = sub(x, st[1], en[1]), *s = na == 3 ? sub(x, st[2], en[2]) : NULL;
        if (!e || (na == 3 && !s)) { mcdc_free(e); mcdc_free(s); return MCDC_E_SERVER; }
        bool dec = is_decimal_type(&tt);
        char *e2 = convert_source(x, st[1], en[1], &tt, e);
        mcdc_free(e);
        e = e2;
        if (!e) { mcdc_free(s); return MCDC_E_NOMEM; }
        if (tt.id == SIM_T_SQL_VARIANT) {
            rc = emit(x, e);
            mcdc_free(e);
            mcdc_free(s);
            return rc;
        }
        rc = dec ? emit_decimal_open(x) : MCDC_OK;
        if (rc == MCDC_OK) rc = emit(x, "sim_convert(");
        if (rc == MCDC_OK) rc = mcdc_buf_printf(x->out, x->err, "%s, ", e);
        if (rc == MCDC_OK) rc = xl_append_literal(x->out, ty, strlen(ty));
        if (rc == MCDC_OK) rc = mcdc_buf_printf(x->out, x->err, ", %s)", s ? s : "NULL");
        if (rc == MCDC_OK && dec) rc = emit_decimal_close(x);
        mcdc_free(e);
        mcdc_free(s);
        x->last_stringy = tt.id >= SIM_T_CHAR && tt.id <= SIM_T_NVARCHAR;
        return rc;
    }
    if (mcdc_str_ieq(fname, "CAST") || mcdc_str_ieq(fname, "TRY_CAST")) {
        int as = -1, d = 0;
        for (int k = open + 1; k < close; k++) {
            if (tsql_tok_op(&x->t[k], "(")) d++;
            else if (tsql_tok_op(&x->t[k], ")")) d--;
            else if (d == 0 && tsql_tok_is(&x->t[k], "AS")) as = k;
        }
        if (as < 0) return syntax_near(x, close);
        char ty[128];
        type_text(x, as + 1, close, ty, sizeof ty);
        sim_type tt;
        if (!sim_type_parse(&tt, ty, strlen(ty))) return fail(x, 243, "Type %s is not a defined system type.", ty);
        char *e = sub(x, open + 1, as);
        if (!e) return MCDC_E_SERVER;
        bool dec = is_decimal_type(&tt);
        char *e2 = convert_source(x, open + 1, as, &tt, e);
        mcdc_free(e);
        e = e2;
        if (!e) return MCDC_E_NOMEM;
        if (tt.id == SIM_T_SQL_VARIANT) {
            rc = emit(x, e);
            mcdc_free(e);
            return rc;
        }
        rc = dec ? emit_decimal_open(x) : MCDC_OK;
        if (rc == MCDC_OK) rc = mcdc_buf_printf(x->out, x->err, "sim_convert(%s, ", e);
        if (rc == MCDC_OK) rc = xl_append_literal(x->out, ty, strlen(ty));
        if (rc == MCDC_OK) rc = emit(x, ", NULL)");
        if (rc == MCDC_OK && dec) rc = emit_decimal_close(x);
        mcdc_free(e);
        return rc;
    }
    if (mcdc_str_ieq(fname, "DATALENGTH")) {
        if (na != 1) return fail(x, 174, "The %s function requires 1 argument(s).", "datalength");
        sim_type at;
        bool an;
        bool wide = infer(x, st[0], en[0], &at, &an) && (at.id == SIM_T_NCHAR || at.id == SIM_T_NVARCHAR);
        char *e = sub(x, st[0], en[0]);
        if (!e) return MCDC_E_SERVER;
        rc = mcdc_buf_printf(x->out, x->err, "sim_datalength(%s, %d)", e, wide ? 2 : 1);
        mcdc_free(e);
        return rc;
    }
    if (mcdc_str_ieq(fname, "DATEADD") || mcdc_str_ieq(fname, "DATEDIFF") || mcdc_str_ieq(fname, "DATEPART") ||
        mcdc_str_ieq(fname, "DATEDIFF_BIG")) {
        int want = mcdc_str_ieq(fname, "DATEPART") ? 2 : 3;
        if (na != want) return fail(x, 174, "The %s function requires the right number of arguments.", fname);
        char part[64];
        if (x->t[st[0]].t == TK_STR || x->t[st[0]].t == TK_NSTR || x->t[st[0]].t == TK_IDENT)
            tsql_tok_text(&x->t[st[0]], part, sizeof part);
        else return syntax_near(x, st[0]);
        const char *fn = mcdc_str_ieq(fname, "DATEADD") ? "sim_dateadd" : mcdc_str_ieq(fname, "DATEPART") ? "sim_datepart" : "sim_datediff";
        rc = mcdc_buf_printf(x->out, x->err, "%s('%s'", fn, part);
        for (int a = 1; a < na && rc == MCDC_OK; a++) {
            char *e = sub(x, st[a], en[a]);
            if (!e) return MCDC_E_SERVER;
            rc = mcdc_buf_printf(x->out, x->err, ", %s", e);
            mcdc_free(e);
        }
        if (rc == MCDC_OK) rc = emit(x, ")");
        return rc;
    }
    /* all arguments translated */
    char *args[16] = {0};
    for (int a = 0; a < na; a++) {
        args[a] = sub(x, st[a], en[a]);
        if (!args[a]) { for (int b = 0; b < a; b++) mcdc_free(args[b]); return MCDC_E_SERVER; }
    }
    const char *A0 = na > 0 ? args[0] : "NULL", *A1 = na > 1 ? args[1] : "NULL";
    if (mcdc_str_ieq(fname, "fn_cdc_get_max_lsn")) {
        rc = emit(x, "(SELECT max(\"start_lsn\") FROM \"cdc.lsn_time_mapping\")");
    } else if (mcdc_str_ieq(fname, "fn_cdc_get_min_lsn")) {
        rc = mcdc_buf_printf(x->out, x->err,
                             "coalesce((SELECT \"start_lsn\" FROM \"cdc.change_tables\" WHERE \"capture_instance\" = (%s)), zeroblob(10))", A0);
    } else if (mcdc_str_ieq(fname, "fn_cdc_increment_lsn")) {
        rc = mcdc_buf_printf(x->out, x->err, "sim_lsn_add(%s, 1)", A0);
    } else if (mcdc_str_ieq(fname, "fn_cdc_decrement_lsn")) {
        rc = mcdc_buf_printf(x->out, x->err, "sim_lsn_add(%s, -1)", A0);
    } else if (mcdc_str_ieq(fname, "fn_cdc_map_lsn_to_time")) {
        rc = mcdc_buf_printf(x->out, x->err,
                             "(SELECT \"tran_end_time\" FROM \"cdc.lsn_time_mapping\" WHERE \"start_lsn\" = (%s))", A0);
    } else if (mcdc_str_ieq(fname, "fn_cdc_map_time_to_lsn")) {
        char rel[64] = "";
        if (na == 2 && (x->t[st[0]].t == TK_STR || x->t[st[0]].t == TK_NSTR)) tsql_tok_text(&x->t[st[0]], rel, sizeof rel);
        const char *agg = NULL, *op = NULL;
        if (mcdc_str_ieq(rel, "largest less than or equal")) { agg = "max"; op = "<="; }
        else if (mcdc_str_ieq(rel, "largest less than")) { agg = "max"; op = "<"; }
        else if (mcdc_str_ieq(rel, "smallest greater than or equal")) { agg = "min"; op = ">="; }
        else if (mcdc_str_ieq(rel, "smallest greater than")) { agg = "min"; op = ">"; }
        if (!agg) rc = fail(x, 22907, "The relational operator %s is not valid for sys.fn_cdc_map_time_to_lsn.", rel);
        else
            rc = mcdc_buf_printf(x->out, x->err,
                                 "(SELECT %s(\"start_lsn\") FROM \"cdc.lsn_time_mapping\" WHERE \"tran_end_time\" %s sim_convert(%s, 'datetime', NULL) AND \"tran_id\" <> zeroblob(10))",
                                 agg, op, A1);
    } else if (mcdc_str_ieq(fname, "HAS_PERMS_BY_NAME")) {
        rc = mcdc_buf_printf(x->out, x->err, "sim_has_perms(%s, %s, %s, ", A0, A1, na > 2 ? args[2] : "NULL");
        if (rc == MCDC_OK) rc = xl_append_literal(x->out, x->env->user_name, strlen(x->env->user_name));
        if (rc == MCDC_OK) rc = mcdc_buf_printf(x->out, x->err, ", %d)", x->env->is_admin ? 1 : 0);
    } else if (mcdc_str_ieq(fname, "DB_NAME") && na == 0) {
        rc = xl_append_literal(x->out, x->env->db_name, strlen(x->env->db_name));
        x->last_stringy = true;
    } else if ((mcdc_str_ieq(fname, "USER_NAME") || mcdc_str_ieq(fname, "SUSER_NAME") ||
                mcdc_str_ieq(fname, "SUSER_SNAME") || mcdc_str_ieq(fname, "CURRENT_USER")) && na == 0) {
        const char *u = x->env->is_admin && mcdc_str_ieq(fname, "USER_NAME") ? "dbo" : x->env->user_name;
        rc = xl_append_literal(x->out, u, strlen(u));
        x->last_stringy = true;
    } else if ((mcdc_str_ieq(fname, "LEFT") || mcdc_str_ieq(fname, "RIGHT")) && na == 2) {
        if (mcdc_str_ieq(fname, "LEFT"))
            rc = mcdc_buf_printf(x->out, x->err, "substr(%s, 1, max((%s), 0))", A0, A1);
        else
            rc = mcdc_buf_printf(x->out, x->err, "(CASE WHEN (%s) > 0 THEN substr(%s, -(%s)) ELSE substr(%s, 1, 0) END)", A1, A0, A1, A0);
        x->last_stringy = true;
    } else if (mcdc_str_ieq(fname, "SCHEMA_NAME") && na == 0) {
        rc = emit(x, "'dbo'");
    } else {
        const char *to = NULL;
        for (size_t k = 0; k < sizeof RENAMES / sizeof RENAMES[0]; k++)
            if (mcdc_str_ieq(RENAMES[k].tsql, fname)) { to = RENAMES[k].sqlite; break; }
        if (!to) {
            rc = fail(x, 195, "'%s' is not a recognized built-in function name.", fname);
        } else {
            bool star = na == 1 && strcmp(args[0], "*") == 0;
            rc = mcdc_buf_printf(x->out, x->err, "%s(", to);
            for (int a = 0; a < na && rc == MCDC_OK; a++)
                rc = mcdc_buf_printf(x->out, x->err, "%s%s", a ? ", " : "", args[a]);
            (void)star;
            if (rc == MCDC_OK) rc = emit(x, ")");
            if (mcdc_str_ieq(fname, "QUOTENAME") || mcdc_str_ieq(fname, "CONCAT")) x->last_stringy = true;
        }
    }
    for (int a = 0; a < na; a++) mcdc_free(args[a]);
    return rc;
}

/* ---- result type inference for the outermost select list -------------- */
static bool lookup_col(const xl *x, const char *qual, const char *col, sim_type *ty, bool *nul) {
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < x->res->ntables + x->npre; k++) {
            const xl_table *tb = k < x->res->ntables ? &x->res->tables[k] : &x->pre[k - x->res->ntables];
            if (qual && pass == 0 && !mcdc_str_ieq(tb->alias, qual)) continue;
            if (x->env->col_type(x->env->ctx, tb->name, col, ty, nul)) return true;
        }
    return false;
}

/* The tables a statement names after FROM, JOIN, UPDATE and INTO, with
 * their aliases (before translation, which reads the select list first). */
static void prescan_tables(xl *x, int from, int to) {
    for (int k = from; k < to && x->npre < XL_TABLES_MAX; k++) {
        const tsql_tok *t = &x->t[k];
        if (!(tsql_tok_is(t, "FROM") || tsql_tok_is(t, "JOIN") || tsql_tok_is(t, "UPDATE") || tsql_tok_is(t, "INTO")))
            continue;
        int i = k + 1;
        char parts[4][MCDC_IDENT_BYTES_MAX];
        int np = xl_name_parts(x->t, &i, to, parts);
        if (np == 0) continue;
        xl_table *tb = &x->pre[x->npre++];
        xl_table_name(parts, np, tb->name, sizeof tb->name);
        snprintf(tb->alias, sizeof tb->alias, "%s", parts[np - 1]);
        if (i < to && tsql_tok_is(&x->t[i], "AS")) i++;
        if (i < to && (x->t[i].t == TK_QIDENT || (x->t[i].t == TK_IDENT && !xl_ends_table(&x->t[i]) && !xl_is_keyword(&x->t[i]))))
            tsql_tok_text(&x->t[i], tb->alias, sizeof tb->alias);
    }
}

static bool infer(const xl *x, int a, int b, sim_type *ty, bool *nul);

static bool infer_fn(const xl *x, const char *f, int open, int close, sim_type *ty, bool *nul) {
    int st[16], en[16];
    int na = split_args(x, open, close, st, en, 16);
    char tx[128];
    *nul = true;
    memset(ty, 0, sizeof *ty);
    if (mcdc_str_ieq(f, "CONVERT") || mcdc_str_ieq(f, "TRY_CONVERT")) {
        if (na < 2) return false;
        type_text(x, st[0], en[0], tx, sizeof tx);
        return sim_type_parse(ty, tx, strlen(tx));
    }
    if (mcdc_str_ieq(f, "CAST") || mcdc_str_ieq(f, "TRY_CAST")) {
        int as = -1, d = 0;
        for (int k = open + 1; k < close; k++) {
            if (tsql_tok_op(&x->t[k], "(")) d++;
            else if (tsql_tok_op(&x->t[k], ")")) d--;
            else if (d == 0 && tsql_tok_is(&x->t[k], "AS")) as = k;
        }
        if (as < 0) return false;
        type_text(x, as + 1, close, tx, sizeof tx);
        return sim_type_parse(ty, tx, strlen(tx));
    }
    static const struct { const char *f; const char *t; } R[] = {
        {"COUNT_BIG", "bigint"}, {"COUNT", "int"}, {"fn_cdc_get_max_lsn", "binary(10)"},
        {"fn_cdc_get_min_lsn", "binary(10)"}, {"fn_cdc_increment_lsn", "binary(10)"},
        {"fn_cdc_decrement_lsn", "binary(10)"}, {"fn_cdc_map_time_to_lsn", "binary(10)"},
        {"fn_cdc_map_lsn_to_time", "datetime"}, {"SYSDATETIME", "datetime2(7)"},
        {"SYSUTCDATETIME", "datetime2(7)"}, {"GETDATE", "datetime"}, {"GETUTCDATE", "datetime"},
        {"SYSDATETIMEOFFSET", "datetimeoffset(7)"}, {"CURRENT_TIMEZONE_ID", "nvarchar(256)"},
        {"SERVERPROPERTY", "sql_variant"}, {"DATEPART", "int"}, {"DATEDIFF", "int"}, {"DATEDIFF_BIG", "bigint"},
        {"HAS_PERMS_BY_NAME", "int"}, {"OBJECT_ID", "int"}, {"QUOTENAME", "nvarchar(258)"},
        {"NTILE", "bigint"}, {"ROW_NUMBER", "bigint"}, {"RANK", "bigint"}, {"DENSE_RANK", "bigint"},
        {"NEWID", "uniqueidentifier"}, {"DB_NAME", "nvarchar(128)"}, {"USER_NAME", "nvarchar(128)"},
        {"SUSER_NAME", "nvarchar(128)"}, {"SUSER_SNAME", "nvarchar(128)"}, {"LEN", "int"}, {"DATALENGTH", "int"}, {"CHARINDEX", "int"},
        {"SQL_VARIANT_PROPERTY", "sql_variant"},
    };
    for (size_t k = 0; k < sizeof R / sizeof R[0]; k++)
        if (mcdc_str_ieq(R[k].f, f)) {
            sim_type_parse(ty, R[k].t, strlen(R[k].t));
            *nul = !mcdc_str_ieq(f, "COUNT_BIG") && !mcdc_str_ieq(f, "COUNT");
            return true;
        }
    if ((mcdc_str_ieq(f, "MIN") || mcdc_str_ieq(f, "MAX") || mcdc_str_ieq(f, "LAG") || mcdc_str_ieq(f, "LEAD") ||
         mcdc_str_ieq(f, "ISNULL") || mcdc_str_ieq(f, "COALESCE") || mcdc_str_ieq(f, "FIRST_VALUE") ||
         mcdc_str_ieq(f, "LAST_VALUE") || mcdc_str_ieq(f, "DATEADD")) && na >= 1) {
        int ai = mcdc_str_ieq(f, "DATEADD") ? 2 : 0;
        if (ai >= na) return false;
        bool r = infer(x, st[ai], en[ai], ty, nul);
        *nul = true;
        return r;
    }
    if (mcdc_str_ieq(f, "REPLICATE") && na == 2) {
        /* the string type of the first argument, (max) long */
        if (!infer(x, st[0], en[0], ty, nul)) return false;
        if (ty->id != SIM_T_VARCHAR && ty->id != SIM_T_NVARCHAR && ty->id != SIM_T_CHAR && ty->id != SIM_T_NCHAR) return false;
        ty->id = ty->id == SIM_T_NCHAR || ty->id == SIM_T_NVARCHAR ? SIM_T_NVARCHAR : SIM_T_VARCHAR;
        ty->length = -1;
        *nul = true;
        return true;
    }
    if ((mcdc_str_ieq(f, "SUM") || mcdc_str_ieq(f, "AVG")) && na == 1) {
        /* SQL Server's result types: int family -> int, bigint, float,
         * money, decimal(p,s) -> decimal(38,s) (AVG: decimal(38,max(s,6))) */
        int a0 = st[0];
        if (a0 < en[0] && (tsql_tok_is(&x->t[a0], "DISTINCT") || tsql_tok_is(&x->t[a0], "ALL"))) a0++;
        bool r = infer(x, a0, en[0], ty, nul);
        if (!r) return false;
        if (ty->id == SIM_T_BIT) return false; /* SQL Server refuses bit */
        if (ty->id == SIM_T_INT || ty->id == SIM_T_SMALLINT || ty->id == SIM_T_TINYINT) ty->id = SIM_T_INT;
        else if (ty->id == SIM_T_REAL) ty->id = SIM_T_FLOAT;
        else if (ty->id == SIM_T_SMALLMONEY) ty->id = SIM_T_MONEY;
        else if (ty->id == SIM_T_DECIMAL) {
            ty->precision = 38;
            if (mcdc_str_ieq(f, "AVG") && ty->scale < 6) ty->scale = 6;
        }
        *nul = true;
        return true;
    }
    return false;
}

/* ---- arithmetic result types (SQL Server's rules for + - * / %) -------- */
/* Numeric types as decimal(p,s) for the decimal rules; false if t is none. */
static bool as_decimal(const sim_type *t, int *p, int *s) {
    *s = 0;
    switch (t->id) {
    case SIM_T_BIT: case SIM_T_TINYINT: *p = 3; return true;
    case SIM_T_SMALLINT: *p = 5; return true;
    case SIM_T_INT: *p = 10; return true;
    case SIM_T_BIGINT: *p = 19; return true;
    case SIM_T_MONEY: *p = 19; *s = 4; return true;
    case SIM_T_SMALLMONEY: *p = 10; *s = 4; return true;
    case SIM_T_DECIMAL: *p = t->precision; *s = t->scale; return true;
    default: return false;
    }
}

static int type_rank(sim_type_id id) { /* SQL Server's data type precedence, numeric part */
    switch (id) {
    case SIM_T_FLOAT: return 9;
    case SIM_T_REAL: return 8;
    case SIM_T_DECIMAL: return 7;
    case SIM_T_MONEY: return 6;
    case SIM_T_SMALLMONEY: return 5;
    case SIM_T_BIGINT: return 4;
    case SIM_T_INT: return 3;
    case SIM_T_SMALLINT: return 2;
    case SIM_T_TINYINT: return 1;
    case SIM_T_BIT: return 0;
    default: return -1;
    }
}

static bool is_string_type(sim_type_id id) { return id >= SIM_T_CHAR && id <= SIM_T_NVARCHAR; }

/* The type of l op r; false when either is not numeric (or, for '+', both
 * strings: concatenation, n-type if either is, lengths added up to 8000
 * bytes, (max) if either is). */
static bool arith_type(const sim_type *l, const sim_type *r, char op, sim_type *out) {
    if (op == '+' && is_string_type(l->id) && is_string_type(r->id)) {
        bool wide = l->id == SIM_T_NCHAR || l->id == SIM_T_NVARCHAR || r->id == SIM_T_NCHAR || r->id == SIM_T_NVARCHAR;
        memset(out, 0, sizeof *out);
        out->id = wide ? SIM_T_NVARCHAR : SIM_T_VARCHAR;
        int64_t n = (int64_t)l->length + r->length, cap = wide ? 4000 : 8000;
        out->length = l->length < 0 || r->length < 0 ? -1 : (int32_t)(n > cap ? cap : n);
        return true;
    }
    int rl = type_rank(l->id), rr = type_rank(r->id);
    if (rl < 0 || rr < 0) return false;
    memset(out, 0, sizeof *out);
    sim_type_id hi = rl >= rr ? l->id : r->id;
    if (hi == SIM_T_FLOAT || hi == SIM_T_REAL) { out->id = hi; return true; }
    if (hi != SIM_T_DECIMAL && hi != SIM_T_MONEY && hi != SIM_T_SMALLMONEY) {
        out->id = hi == SIM_T_BIT || hi == SIM_T_TINYINT || hi == SIM_T_SMALLINT ? SIM_T_INT : hi;
        return true;
    }
    if (hi != SIM_T_DECIMAL) { out->id = SIM_T_MONEY; return true; }
    int p1, s1, p2, s2, p, s;
    as_decimal(l, &p1, &s1);
    as_decimal(r, &p2, &s2);
    switch (op) {
    case '+': case '-':
        s = s1 > s2 ? s1 : s2;
        p = (p1 - s1 > p2 - s2 ? p1 - s1 : p2 - s2) + s + 1;
        break;
    case '*': p = p1 + p2 + 1; s = s1 + s2; break;
    case '/':
        s = s1 + p2 + 1 > 6 ? s1 + p2 + 1 : 6;
        p = p1 - s1 + s2 + s;
        break;
    default: /* % */
        s = s1 > s2 ? s1 : s2;
        p = (p1 - s1 < p2 - s2 ? p1 - s1 : p2 - s2) + s;
        break;
    }
    if (p > 38) { /* the integral part is kept, the scale gives way down to 6 */
        int intd = p - s, keep = s < 6 ? s : 6;
        s = 38 - intd > keep ? 38 - intd : keep;
        p = 38;
    }
    out->id = SIM_T_DECIMAL;
    out->precision = (uint8_t)(p < 1 ? 1 : p);
    out->scale = (uint8_t)(s < 0 ? 0 : s > out->precision ? out->precision : s);
    return true;
}

static bool infer(const xl *x, int a, int b, sim_type *ty, bool *nul);

/* An arithmetic expression at depth 0 of [a, b): + and - split first (the
 * loosest), then * / %. false if there is none or an operand is unknown. */
static bool infer_arith(const xl *x, int a, int b, sim_type *ty, bool *nul) {
    static const char *const LEVELS[2] = {"+-", "*/%"};
    for (int lv = 0; lv < 2; lv++) {
        int d = 0, start = a, nops = 0;
        char op = 0;
        sim_type acc;
        bool any_null = false;
        for (int k = a; k <= b; k++) {
            bool split = k == b;
            if (!split) {
                const tsql_tok *t = &x->t[k];
                if (tsql_tok_op(t, "(")) { d++; continue; }
                if (tsql_tok_op(t, ")")) { d--; continue; }
                if (d != 0 || t->t != TK_OP || t->n != 1 || !strchr(LEVELS[lv], t->s[0])) continue;
                /* binary only: an operand before it */
                if (k == a || (x->t[k - 1].t == TK_OP && !tsql_tok_op(&x->t[k - 1], ")"))) continue;
                split = true;
            }
            if (k == b && nops == 0) break;
            sim_type t;
            bool n;
            if (!infer(x, start, k, &t, &n)) return false;
            any_null = any_null || n;
            sim_type res;
            if (nops == 0) acc = t;
            else if (!arith_type(&acc, &t, op, &res)) return false;
            else acc = res;
            if (k < b) op = x->t[k].s[0];
            nops++;
            start = k + 1;
        }
        if (nops > 1) {
            *ty = acc;
            *nul = any_null;
            return true;
        }
    }
    /* unary minus/plus */
    if (b - a >= 2 && (tsql_tok_op(&x->t[a], "-") || tsql_tok_op(&x->t[a], "+"))) return infer(x, a + 1, b, ty, nul);
    return false;
}

/* CASE ... END at [a, b): the type of its result branches (THEN, ELSE),
 * the highest in precedence among numeric ones, else the first known (SQL
 * Server's rule for branches of one type family); false if none is known or
 * the END at b - 1 is not this CASE's. */
static bool infer_case(const xl *x, int a, int b, sim_type *ty, bool *nul) {
    int d = 0, cases = 0, s = -1;
    bool found = false;
    for (int k = a + 1; k < b; k++) {
        const tsql_tok *t = &x->t[k];
        if (tsql_tok_op(t, "(")) { d++; continue; }
        if (tsql_tok_op(t, ")")) { d--; continue; }
        if (d != 0 || t->t != TK_IDENT) continue;
        if (tsql_tok_is(t, "CASE")) { cases++; continue; }
        if (tsql_tok_is(t, "END") && cases > 0) { cases--; continue; }
        if (cases > 0) continue;
        bool end = tsql_tok_is(t, "END");
        if (end && k != b - 1) return false;
        if ((end || tsql_tok_is(t, "WHEN") || tsql_tok_is(t, "ELSE")) && s >= 0) {
            sim_type bt;
            bool bn;
            if (infer(x, s, k, &bt, &bn)) {
                if (!found || (type_rank(bt.id) >= 0 && type_rank(ty->id) >= 0 && type_rank(bt.id) > type_rank(ty->id)))
                    *ty = bt;
                found = true;
            }
            s = -1;
        }
        if (tsql_tok_is(t, "THEN") || tsql_tok_is(t, "ELSE")) s = k + 1;
    }
    *nul = true;
    return found;
}

static bool infer(const xl *x, int a, int b, sim_type *ty, bool *nul) {
    if (a >= b) return false;
    *nul = true;
    if (b - a >= 2 && infer_arith(x, a, b, ty, nul)) return true;
    /* AT TIME ZONE anywhere at depth 0 */
    int d = 0;
    for (int k = a; k + 2 < b; k++) {
        if (tsql_tok_op(&x->t[k], "(")) d++;
        else if (tsql_tok_op(&x->t[k], ")")) d--;
        else if (d == 0 && tsql_tok_is(&x->t[k], "AT") && tsql_tok_is(&x->t[k + 1], "TIME") && tsql_tok_is(&x->t[k + 2], "ZONE")) {
            memset(ty, 0, sizeof *ty);
            ty->id = SIM_T_DATETIMEOFFSET;
            ty->scale = 7;
            sim_type in;
            bool n2;
            if (infer(x, a, k, &in, &n2) && (in.id == SIM_T_DATETIME2 || in.id == SIM_T_DATETIMEOFFSET)) ty->scale = in.scale;
            else if (infer(x, a, k, &in, &n2) && in.id == SIM_T_DATETIME) ty->scale = 3;
            return true;
        }
    }
    const tsql_tok *t = &x->t[a];
    if (b == a + 1 && tsql_tok_is(t, "NULL")) return false; /* no type of its own (never a column) */
    int mdot;
    if (b - a >= 3 && member_suffix(x, a, b, &mdot)) { /* receiver.member */
        sim_type rt;
        bool rn;
        char name[MCDC_IDENT_BYTES_MAX];
        tsql_tok_text(&x->t[mdot + 1], name, sizeof name);
        const udt_member *m = infer(x, a, mdot, &rt, &rn) ? member_of(kind_of(&rt), name, mdot + 2 < b) : NULL;
        if (m) {
            *nul = true;
            return sim_type_parse(ty, m->type, strlen(m->type));
        }
    }
    if (b - a >= 4 && (t->t == TK_IDENT || t->t == TK_QIDENT) && tsql_tok_op(&x->t[a + 1], "::") &&
        tsql_tok_op(&x->t[a + 3], "(") && match_paren(x, a + 3, b) == b - 1) { /* type::Method(...) */
        char tn[MCDC_IDENT_BYTES_MAX];
        tsql_tok_text(t, tn, sizeof tn);
        *nul = true;
        return kind_named(tn) && sim_type_parse(ty, tn, strlen(tn));
    }
    if (tsql_tok_is(t, "CASE") && b - a >= 4 && tsql_tok_is(&x->t[b - 1], "END")) return infer_case(x, a, b, ty, nul);
    if (tsql_tok_op(t, "(") && match_paren(x, a, b) == b - 1) {
        if (a + 1 < b && tsql_tok_is(&x->t[a + 1], "SELECT")) {
            int k = a + 2;
            if (k < b && tsql_tok_is(&x->t[k], "TOP")) {
                k++;
                if (tsql_tok_op(&x->t[k], "(")) k = match_paren(x, k, b) + 1; else k++;
            }
            int e = k, dd = 0;
            while (e < b - 1) {
                if (tsql_tok_op(&x->t[e], "(")) dd++;
                else if (tsql_tok_op(&x->t[e], ")")) dd--;
                else if (dd == 0 && (tsql_tok_op(&x->t[e], ",") || tsql_tok_is(&x->t[e], "FROM"))) break;
                e++;
            }
            return infer(x, k, e, ty, nul);
        }
        return infer(x, a + 1, b - 1, ty, nul);
    }
    if (t->t == TK_IDENT || t->t == TK_QIDENT) {
        char parts[4][MCDC_IDENT_BYTES_MAX];
        int k = a;
        int np = xl_name_parts(x->t, &k, b, parts);
        if (np > 0 && k < b && tsql_tok_op(&x->t[k], "(")) {
            int close = match_paren(x, k, b);
            if (close == b - 1) return infer_fn(x, parts[np - 1], k, close, ty, nul);
            /* a window function: f(...) OVER (...) */
            if (close > 0 && close + 2 < b && tsql_tok_is(&x->t[close + 1], "OVER") &&
                tsql_tok_op(&x->t[close + 2], "(") && match_paren(x, close + 2, b) == b - 1)
                return infer_fn(x, parts[np - 1], k, close, ty, nul);
            return false;
        }
        if (np > 0 && k == b) return lookup_col(x, np >= 2 ? parts[np - 2] : NULL, parts[np - 1], ty, nul);
        return false;
    }
    if (b == a + 1) {
        memset(ty, 0, sizeof *ty);
        *nul = false;
        if (t->t == TK_STR || t->t == TK_NSTR) {
            ty->id = t->t == TK_NSTR ? SIM_T_NVARCHAR : SIM_T_VARCHAR;
            ty->length = t->n > 3 ? t->n - 2 : 1;
            return true;
        }
        if (t->t == TK_NUM) {
            int p = 0, sc = 0;
            if (long_numeric(t, &p, &sc)) {
                ty->id = SIM_T_DECIMAL;
                ty->precision = (uint8_t)p;
                ty->scale = (uint8_t)sc;
                return true;
            }
            if (memchr(t->s, 'e', (size_t)t->n) || memchr(t->s, 'E', (size_t)t->n)) { ty->id = SIM_T_FLOAT; return true; }
            bool dot = memchr(t->s, '.', (size_t)t->n) != NULL;
            if (!dot) { ty->id = t->n > 9 ? SIM_T_BIGINT : SIM_T_INT; return true; }
            /* 2.50 is numeric(3,2): every digit counts, leading zeros of the integral part do not */
            int digits = 0, frac = 0;
            bool after = false, lead = true;
            for (int k = 0; k < t->n; k++) {
                if (t->s[k] == '.') { after = true; lead = false; continue; }
                if (lead && t->s[k] == '0') continue;
                lead = false;
                digits++;
                if (after) frac++;
            }
            ty->id = SIM_T_DECIMAL;
            ty->precision = (uint8_t)(digits < 1 ? 1 : digits);
            ty->scale = (uint8_t)frac;
            return true;
        }
        if (t->t == TK_VAR && x->env->var_type) {
            char nm[MCDC_IDENT_BYTES_MAX];
            tok_str(t, nm, sizeof nm);
            *nul = true;
            return x->env->var_type(x->env->ctx, nm, ty);
        }
        if (t->t == TK_SYSVAR) {
            if (mcdc_str_nieq(t->s, "@@SPID", 6)) { ty->id = SIM_T_SMALLINT; return true; }
            if (mcdc_str_nieq(t->s, "@@VERSION", 9)) { ty->id = SIM_T_NVARCHAR; ty->length = 300; return true; }
            ty->id = SIM_T_INT;
            return true;
        }
    }
    return false;
}

int xl_item_alias(const tsql_tok *t, int s, int e, char *name, size_t cap) {
    name[0] = 0;
    /* alias: "expr AS name" / "expr name" */
    if (e - s >= 2 && (t[e - 1].t == TK_IDENT || t[e - 1].t == TK_QIDENT || t[e - 1].t == TK_STR)) {
        bool as = tsql_tok_is(&t[e - 2], "AS");
        bool bare = !as && (tsql_tok_op(&t[e - 2], ")") || t[e - 2].t == TK_QIDENT ||
                            (t[e - 2].t == TK_IDENT && !xl_is_keyword(&t[e - 2])) || t[e - 2].t == TK_NUM ||
                            t[e - 2].t == TK_STR || t[e - 2].t == TK_NSTR || t[e - 2].t == TK_VAR ||
                            t[e - 2].t == TK_SYSVAR) &&
                    !tsql_tok_op(&t[e - 2], ".") && !xl_is_keyword(&t[e - 1]);
        if (as || bare) {
            tsql_tok_text(&t[e - 1], name, cap);
            return e - (as ? 2 : 1);
        }
    }
    if (e - s >= 1 && (t[e - 1].t == TK_IDENT || t[e - 1].t == TK_QIDENT) && (e - s == 1 || tsql_tok_op(&t[e - 2], ".")))
        tsql_tok_text(&t[e - 1], name, cap);
    return e;
}

/* Fills res->items from the outermost select list [a, b). */
static void infer_items(xl *x, int a, int b) {
    int n = 0, d = 0, s = a;
    for (int k = a; k <= b && n < XL_ITEMS_MAX; k++) {
        bool split = k == b;
        if (!split) {
            if (tsql_tok_op(&x->t[k], "(")) d++;
            else if (tsql_tok_op(&x->t[k], ")")) d--;
            else if (d == 0 && tsql_tok_op(&x->t[k], ",")) split = true;
        }
        if (!split) continue;
        xl_item *it = &x->res->items[n++];
        memset(it, 0, sizeof *it);
        int e = xl_item_alias(x->t, s, k, it->name, sizeof it->name);
        it->known = infer(x, s, e, &it->type, &it->nullable);
        s = k + 1;
    }
    x->res->nitems = n;
}

static int xlate_tokens(const xl_env *env, const tsql_tok *toks, int from, int to, mcdc_buf *out, xl_result *res,
                        mcdc_error *err);

int tsql_xlate(const xl_env *env, const tsql_tok *toks, int from, int to, mcdc_buf *out, xl_result *res,
               mcdc_error *err) {
    /* APPLY and column alias lists first (tsql_rewrite.c) */
    tsql_rewritten rw;
    res->ntables = 0;
    res->nitems = 0;
    res->outer_join = false;
    int rc = tsql_rewrite(toks, from, to, &rw, err);
    if (rc != MCDC_OK) return rc;
    if (rw.toks) {
        toks = rw.toks;
        from = 0;
        to = rw.ntoks;
    }
    rc = xlate_tokens(env, toks, from, to, out, res, err);
    tsql_rewritten_free(&rw);
    return rc;
}

static int xlate_tokens(const xl_env *env, const tsql_tok *toks, int from, int to, mcdc_buf *out, xl_result *res,
                        mcdc_error *err) {
    xl x;
    memset(&x, 0, sizeof x);
    x.env = env;
    x.t = toks;
    x.to = to;
    x.out = out;
    x.res = res;
    x.err = err;
    res->ntables = 0;
    res->nitems = 0;
    x.tracking = true;
    x.item_start = -1;
    prescan_tables(&x, from, to);
    /* common table expressions: "WITH a AS (", ", b AS (", "WITH a (c1) AS (" */
    if (from < to && tsql_tok_is(&toks[from], "WITH"))
        for (int k = from + 1; k + 2 < to && x.nctes < 16; k++) {
            if ((toks[k].t != TK_IDENT && toks[k].t != TK_QIDENT) ||
                !(tsql_tok_is(&toks[k - 1], "WITH") || tsql_tok_op(&toks[k - 1], ",")))
                continue;
            int a = k + 1;
            if (tsql_tok_op(&toks[a], "(")) {
                int cl = match_paren(&x, a, to);
                if (cl < 0) break;
                a = cl + 1;
            }
            if (a + 1 < to && tsql_tok_is(&toks[a], "AS") && tsql_tok_op(&toks[a + 1], "("))
                tsql_tok_text(&toks[k], x.ctes[x.nctes++], MCDC_IDENT_BYTES_MAX);
        }
    int i = from;
    int rc = xl_seq(&x, &i, to, false);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(out, err);
    int sel = from;
    if (from < to && tsql_tok_is(&toks[from], "WITH")) {
        /* the main query's SELECT: first one at depth 0 */
        int d = 0;
        for (sel = from; sel < to; sel++) {
            if (tsql_tok_op(&toks[sel], "(")) d++;
            else if (tsql_tok_op(&toks[sel], ")")) d--;
            else if (d == 0 && tsql_tok_is(&toks[sel], "SELECT")) break;
        }
    }
    if (rc == MCDC_OK && sel < to && tsql_tok_is(&toks[sel], "SELECT")) {
        /* outermost select list: from after SELECT [DISTINCT] [TOP ..] to FROM/end */
        from = sel;
        int a = from + 1;
        if (a < to && (tsql_tok_is(&toks[a], "DISTINCT") || tsql_tok_is(&toks[a], "ALL"))) a++;
        if (a < to && tsql_tok_is(&toks[a], "TOP")) {
            a++;
            if (a < to && tsql_tok_op(&toks[a], "(")) a = match_paren(&x, a, to) + 1; else a++;
        }
        int b = a, d = 0;
        while (b < to) {
            if (tsql_tok_op(&toks[b], "(")) d++;
            else if (tsql_tok_op(&toks[b], ")")) d--;
            else if (d == 0 && (tsql_tok_is(&toks[b], "FROM") || tsql_tok_is(&toks[b], "UNION") ||
                                tsql_tok_is(&toks[b], "ORDER") || tsql_tok_is(&toks[b], "WHERE") ||
                                tsql_tok_is(&toks[b], "EXCEPT") || tsql_tok_is(&toks[b], "INTERSECT") ||
                                tsql_tok_is(&toks[b], "GROUP") || tsql_tok_op(&toks[b], ";")))
                break;
            b++;
        }
        if (a > from && a <= b) infer_items(&x, a, b);
    }
    for (int k = from; k + 1 < to && !res->outer_join; k++)
        res->outer_join = (tsql_tok_is(&toks[k], "LEFT") || tsql_tok_is(&toks[k], "RIGHT") || tsql_tok_is(&toks[k], "FULL")) &&
                          (tsql_tok_is(&toks[k + 1], "JOIN") || tsql_tok_is(&toks[k + 1], "OUTER"));
    for (int k = 0; k < res->nitems && res->outer_join; k++) res->items[k].nullable = true;
    return rc;
}
