/* mcdc_keyrange.c - key columns, JSON bounds and range predicates (mcdc_keyrange.h). */
#include "mcdc_keyrange.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_cdc_client.h"
#include "mcdc_value_text.h"

/* ---- key columns ------------------------------------------------------------ */
typedef enum { F_PLAIN, F_DECIMAL, F_FRACTION, F_LEN8000, F_LEN4000, F_ROWVERSION } type_form;

typedef struct key_type {
    const char *name;
    type_form form;
    mcdc_key_kind kind;
    bool millis;
    const char *chars; /* what a bound's text may hold; NULL: anything */
} key_type;

#define NUMBER_CHARS "0123456789.+-eE"
#define TIME_CHARS "0123456789-:T. Z+"
static const key_type KEY_TYPES[] = {
    {"tinyint", F_PLAIN, MCDC_KEY_INT, false, NULL},
    {"smallint", F_PLAIN, MCDC_KEY_INT, false, NULL},
    {"int", F_PLAIN, MCDC_KEY_INT, false, NULL},
    {"bigint", F_PLAIN, MCDC_KEY_INT, false, NULL},
    {"decimal", F_DECIMAL, MCDC_KEY_CAST, false, NUMBER_CHARS},
    {"numeric", F_DECIMAL, MCDC_KEY_CAST, false, NUMBER_CHARS},
    {"money", F_PLAIN, MCDC_KEY_CAST, false, NUMBER_CHARS},
    {"smallmoney", F_PLAIN, MCDC_KEY_CAST, false, NUMBER_CHARS},
    {"float", F_PLAIN, MCDC_KEY_CAST, false, NUMBER_CHARS},
    {"real", F_PLAIN, MCDC_KEY_CAST, false, NUMBER_CHARS},
    {"date", F_PLAIN, MCDC_KEY_CAST, false, TIME_CHARS},
    {"datetime", F_PLAIN, MCDC_KEY_CAST, true, TIME_CHARS},
    {"smalldatetime", F_PLAIN, MCDC_KEY_CAST, true, TIME_CHARS},
    {"datetime2", F_FRACTION, MCDC_KEY_CAST, false, TIME_CHARS},
    {"datetimeoffset", F_FRACTION, MCDC_KEY_CAST, false, TIME_CHARS},
    {"char", F_LEN8000, MCDC_KEY_CAST, false, NULL},
    {"varchar", F_LEN8000, MCDC_KEY_CAST, false, NULL},
    {"nchar", F_LEN4000, MCDC_KEY_CAST, false, NULL},
    {"nvarchar", F_LEN4000, MCDC_KEY_CAST, false, NULL},
    {"sysname", F_PLAIN, MCDC_KEY_CAST, false, NULL},
    {"uniqueidentifier", F_PLAIN, MCDC_KEY_CAST, false, "0123456789abcdefABCDEF-"},
    {"binary", F_LEN8000, MCDC_KEY_HEX, false, NULL},
    {"varbinary", F_LEN8000, MCDC_KEY_HEX, false, NULL},
    {"timestamp", F_ROWVERSION, MCDC_KEY_HEX, false, NULL},
    {"rowversion", F_ROWVERSION, MCDC_KEY_HEX, false, NULL},
};
/* SQL Server sorts none of these (bit has no MIN or MAX). */
static const char *const UNSORTABLE[] = {"bit", "text", "ntext", "image", "xml"};

static const key_type *key_type_named(const char *name) {
    for (size_t i = 0; i < sizeof KEY_TYPES / sizeof KEY_TYPES[0]; i++)
        if (mcdc_str_ieq(KEY_TYPES[i].name, name)) return &KEY_TYPES[i];
    return NULL;
}

static bool collation_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > MCDC_SYSNAME_CHARS_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_') return false;
    return true;
}

int mcdc_key_col_init(mcdc_key_col *out, const char *name, const mcdc_captured_column *col,
                      const char *collation, bool last, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    if (strlen(name) > MCDC_IDENT_BYTES_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID, "key column name '%.64s...' is too long", name);
    snprintf(out->name, sizeof out->name, "%s", name);
    const char *t = col->data_type ? col->data_type : "";
    for (size_t i = 0; i < sizeof UNSORTABLE / sizeof UNSORTABLE[0]; i++)
        if (mcdc_str_ieq(t, UNSORTABLE[i]))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "column '%s' is of type %s, which SQL Server cannot sort "
                                  "(bit has no MIN or MAX): no snapshot can be cut on it",
                                  name, t);
    const key_type *k = key_type_named(t);
    if (k == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "column '%s' is of type %s, which no key bound can be bound as "
                              "(time, sql_variant and CLR types are not): no snapshot can be "
                              "cut on it",
                              name, t[0] ? t : "(unknown)");
    out->kind = k->kind;
    out->millis = k->millis;
    int len = col->max_length, n = 0;
    bool var = k->name[0] == 'v' || k->name[1] == 'v'; /* varchar, nvarchar, varbinary */
    switch (k->form) {
    case F_PLAIN:
        n = snprintf(out->type, sizeof out->type, "%s",
                     mcdc_str_ieq(k->name, "sysname") ? "nvarchar(128)" : k->name);
        break;
    case F_DECIMAL:
        if (col->precision < 1 || col->precision > 38 || col->scale < 0 ||
            col->scale > col->precision)
            return mcdc_error_set(err, MCDC_E_INVALID, "column '%s': %s(%d,%d) is not a valid type",
                                  name, k->name, col->precision, col->scale);
        n = snprintf(out->type, sizeof out->type, "%s(%d,%d)", k->name, col->precision,
                     col->scale);
        break;
    case F_FRACTION:
        if (col->datetime_precision < 0 || col->datetime_precision > 7)
            return mcdc_error_set(err, MCDC_E_INVALID, "column '%s': %s(%d) is not a valid type",
                                  name, k->name, col->datetime_precision);
        if (col->datetime_precision == 7 && !last)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "column '%s' is of type %s(7), whose values read back cut to "
                                  "microseconds: ahead of another key column two bounds could "
                                  "swap, so only the last key column may be of it",
                                  name, k->name);
        n = snprintf(out->type, sizeof out->type, "%s(%d)", k->name, col->datetime_precision);
        out->truncated = col->datetime_precision == 7;
        break;
    case F_LEN8000:
    case F_LEN4000: {
        int most = k->form == F_LEN8000 ? 8000 : 4000;
        if (len == -1 && var) {
            n = snprintf(out->type, sizeof out->type, "%s(max)", k->name);
        } else if (len >= 1 && len <= most) {
            n = snprintf(out->type, sizeof out->type, "%s(%d)", k->name, len);
        } else {
            return mcdc_error_set(err, MCDC_E_INVALID, "column '%s': %s(%d) is not a valid type",
                                  name, k->name, len);
        }
        break;
    }
    case F_ROWVERSION: n = snprintf(out->type, sizeof out->type, "binary(8)"); break;
    }
    MCDC_ASSERT(n > 0 && (size_t)n < sizeof out->type);
    if (mcdc_str_ieq(k->name, "char") || mcdc_str_ieq(k->name, "varchar")) {
        /* A parameter is nvarchar; CAST to varchar converts it in the code
         * page of the database's default collation, which can lose the
         * characters of a column in another one. In its own collation the
         * bound keeps them, and their order. */
        if (collation == NULL || !collation_ok(collation))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "column '%s' (%s): its collation is %s, so no bound can be "
                                  "bound as it",
                                  name, out->type,
                                  collation ? "not a collation name" : "unknown (sys.columns)");
        snprintf(out->collation, sizeof out->collation, "%s", collation);
    }
    return MCDC_OK;
}

/* ---- bounds ------------------------------------------------------------------ */
const json_t *mcdc_key_bound_part(const json_t *bound, int n, int i) {
    if (bound == NULL || json_is_null(bound)) return NULL;
    const json_t *v = n == 1 ? bound : json_array_get(bound, (size_t)i);
    return v && !json_is_null(v) ? v : NULL;
}

static bool is_hex_text(const char *s, size_t n) {
    if (n < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || n % 2) return false;
    for (size_t i = 2; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return false;
    return true;
}

static int check_part(const json_t *v, const mcdc_key_col *k, const char *what, int i,
                      mcdc_error *err) {
    if (v == NULL || json_is_null(v)) return MCDC_OK;
    if (k->kind == MCDC_KEY_INT) {
        if (!json_is_integer(v))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "key bound %s: part %d (column '%s', %s) is not a JSON integer",
                                  what, i, k->name, k->type);
        return MCDC_OK;
    }
    if (!json_is_string(v))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "key bound %s: part %d (column '%s', %s) is not a JSON string",
                              what, i, k->name, k->type);
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n > MCDC_KEY_BOUND_BYTES_MAX || strlen(s) != n)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "key bound %s: part %d (column '%s') is %s", what, i, k->name,
                              n > MCDC_KEY_BOUND_BYTES_MAX ? "too long" : "text with a NUL");
    if (k->kind == MCDC_KEY_HEX && !is_hex_text(s, n))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "key bound %s: part %d (column '%s', %s) is not 0x and hex digits",
                              what, i, k->name, k->type);
    char base[MCDC_KEY_TYPE_TEXT_SIZE];
    snprintf(base, sizeof base, "%s", k->type);
    base[strcspn(base, "(")] = 0;
    const key_type *t = key_type_named(base);
    if (t && t->chars && (n == 0 || strspn(s, t->chars) != n))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "key bound %s: part %d (column '%s', %s) is '%.64s', which is not "
                              "a value of its type",
                              what, i, k->name, k->type, s);
    return MCDC_OK;
}

int mcdc_key_bound_check(const json_t *bound, const mcdc_key_col *keys, int n, const char *what,
                         mcdc_error *err) {
    if (bound == NULL || json_is_null(bound)) return MCDC_OK;
    if (n == 0)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "key bound %s: the range has no key columns, so both ends must "
                              "be open (null)",
                              what);
    if (n == 1) {
        if (json_is_array(bound) || json_is_object(bound))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "key bound %s: one key column takes a scalar, not %s", what,
                                  json_is_array(bound) ? "an array" : "an object");
        return check_part(bound, &keys[0], what, 0, err);
    }
    if (!json_is_array(bound) || json_array_size(bound) != (size_t)n)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "key bound %s: %d key columns take an array of %d values", what, n,
                              n);
    for (int i = 0; i < n; i++) {
        int rc = check_part(json_array_get(bound, (size_t)i), &keys[i], what, i, err);
        if (rc) return rc;
    }
    return MCDC_OK;
}

int mcdc_sql_params_add(mcdc_sql_params *p, const char *text, size_t len, mcdc_error *err) {
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 8;
        char **v = mcdc_realloc(p->v, sizeof *v * (size_t)cap);
        if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n] = mcdc_strndup(text, len);
    if (p->v[p->n] == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    p->n++;
    return MCDC_OK;
}

void mcdc_sql_params_free(mcdc_sql_params *p) {
    for (int i = 0; p->v && i < p->n; i++) mcdc_free(p->v[i]);
    mcdc_free(p->v);
    memset(p, 0, sizeof *p);
}

int mcdc_sql_quote_ident(mcdc_buf *b, const char *name, mcdc_error *err) {
    int rc = mcdc_buf_append_byte(b, '[', err);
    for (const char *q = name; rc == MCDC_OK && *q; q++) {
        if (*q == ']') rc = mcdc_buf_append_byte(b, ']', err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(b, (uint8_t)*q, err);
    }
    return rc == MCDC_OK ? mcdc_buf_append_byte(b, ']', err) : rc;
}

/* ---- the predicate --------------------------------------------------------------- */
typedef struct writer {
    mcdc_buf *out;
    mcdc_sql_params *params;
    const mcdc_key_col *keys;
    int n, p;          /* key columns; leading ones both bounds share */
    const json_t *lo, *hi;
    const char *select, *open, *close;
    int pieces, terms; /* pieces written; conditions in the current one */
    mcdc_error *err;
} writer;

/* Before each condition of a piece: " WHERE " or " AND ". */
static int term(writer *w) {
    return mcdc_buf_append_str(w->out, w->terms++ ? " AND " : " WHERE ", w->err);
}

/* The value of v for key i: digits, or a CAST/CONVERT of a parameter. */
static int value(writer *w, int i, const json_t *v) {
    const mcdc_key_col *k = &w->keys[i];
    if (k->kind == MCDC_KEY_INT)
        return mcdc_buf_printf(w->out, w->err, "%lld", (long long)json_integer_value(v));
    int rc = mcdc_sql_params_add(w->params, json_string_value(v), json_string_length(v), w->err);
    if (rc) return rc;
    if (k->kind == MCDC_KEY_HEX) return mcdc_buf_printf(w->out, w->err, "CONVERT(%s, ?, 1)", k->type);
    if (k->collation[0])
        return mcdc_buf_printf(w->out, w->err, "CAST(? COLLATE %s AS %s)", k->collation, k->type);
    return mcdc_buf_printf(w->out, w->err, "CAST(? AS %s)", k->type);
}

/* Key i against one bound value: op is "=", ">", ">=" or "<". NULL sorts
 * first: nothing is below it, everything at or above it, and "<" a value
 * also admits NULL. */
static int cmp(writer *w, int i, const char *op, const json_t *v) {
    mcdc_buf *o = w->out;
    int rc;
    if (v == NULL) {
        if (op[0] == '>' && op[1] == '=') return mcdc_buf_append_str(o, "1 = 1", w->err);
        if (op[0] == '<') return mcdc_buf_append_str(o, "1 = 0", w->err);
        rc = mcdc_sql_quote_ident(o, w->keys[i].name, w->err);
        return rc ? rc : mcdc_buf_append_str(o, op[0] == '=' ? " IS NULL" : " IS NOT NULL", w->err);
    }
    bool below = op[0] == '<';
    rc = below ? mcdc_buf_append_byte(o, '(', w->err) : MCDC_OK;
    if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(o, w->keys[i].name, w->err);
    if (rc == MCDC_OK) rc = mcdc_buf_printf(o, w->err, " %s ", op);
    if (rc == MCDC_OK) rc = value(w, i, v);
    if (rc == MCDC_OK && below) {
        rc = mcdc_buf_append_str(o, " OR ", w->err);
        if (rc == MCDC_OK) rc = mcdc_sql_quote_ident(o, w->keys[i].name, w->err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_str(o, " IS NULL)", w->err);
    }
    return rc;
}

static const json_t *part(const json_t *b, const writer *w, int i) {
    return mcdc_key_bound_part(b, w->n, i);
}

/* Conditions: keys p..j-1 equal to bound's, key j `op` bound's. With
 * `joined`, written as one conjunction (no WHERE/AND before it), wrapped in
 * parentheses when it has more than one. */
static int chain(writer *w, const json_t *bound, int j, const char *op, bool joined) {
    int rc = joined && j > w->p ? mcdc_buf_append_byte(w->out, '(', w->err) : MCDC_OK;
    for (int i = w->p; rc == MCDC_OK && i <= j; i++) {
        if (joined && i > w->p) rc = mcdc_buf_append_str(w->out, " AND ", w->err);
        else if (!joined) rc = term(w);
        if (rc == MCDC_OK) rc = cmp(w, i, i < j ? "=" : op, part(bound, w, i));
    }
    if (rc == MCDC_OK && joined && j > w->p) rc = mcdc_buf_append_byte(w->out, ')', w->err);
    return rc;
}

/* (keys p..) < bound, row by row: one of the chains below it holds. */
static int below(writer *w, const json_t *bound) {
    int rc = term(w);
    if (rc == MCDC_OK) rc = mcdc_buf_append_byte(w->out, '(', w->err);
    for (int j = w->p; rc == MCDC_OK && j < w->n; j++) {
        if (j > w->p) rc = mcdc_buf_append_str(w->out, " OR ", w->err);
        if (rc == MCDC_OK) rc = chain(w, bound, j, "<", true);
    }
    return rc == MCDC_OK ? mcdc_buf_append_byte(w->out, ')', w->err) : rc;
}

static int piece_begin(writer *w) {
    int rc = w->pieces++ ? mcdc_buf_append_str(w->out, " UNION ALL ", w->err) : MCDC_OK;
    if (rc == MCDC_OK && w->open) rc = mcdc_buf_append_str(w->out, w->open, w->err);
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(w->out, w->select, w->err);
    w->terms = 0;
    /* The leading values both bounds share. */
    for (int i = 0; rc == MCDC_OK && i < w->p; i++) {
        rc = term(w);
        if (rc == MCDC_OK) rc = cmp(w, i, "=", part(w->lo, w, i));
    }
    return rc;
}

static int piece_end(writer *w) {
    return w->close ? mcdc_buf_append_str(w->out, w->close, w->err) : MCDC_OK;
}

int mcdc_key_select(mcdc_buf *out, mcdc_sql_params *params, const char *select, const char *open,
                    const char *close, const mcdc_key_col *keys, int n, const json_t *lo,
                    const json_t *hi, mcdc_error *err) {
    MCDC_ASSERT(n >= 0 && n <= MCDC_SNAPSHOT_KEYS_MAX && (n == 0 || keys != NULL));
    int rc = mcdc_key_bound_check(lo, keys, n, "lo", err);
    if (rc == MCDC_OK) rc = mcdc_key_bound_check(hi, keys, n, "hi", err);
    if (rc) return rc;
    if (lo && json_is_null(lo)) lo = NULL;
    if (hi && json_is_null(hi)) hi = NULL;
    writer w = {out, params, keys, n, 0, lo, hi, select, open, close, 0, 0, err};
    while (lo && hi && w.p < n - 1) {
        const json_t *a = part(lo, &w, w.p), *b = part(hi, &w, w.p);
        if (!(a == NULL ? b == NULL : b != NULL && json_equal(a, b))) break;
        w.p++;
    }
    int p = w.p;
    /* Key p equal to lo's and the later keys above lo's, one piece per
     * column from the last; each also below hi. */
    for (int j = n - 1; lo && rc == MCDC_OK && j > p; j--) {
        rc = piece_begin(&w);
        if (rc == MCDC_OK) rc = chain(&w, lo, j, j < n - 1 ? ">" : ">=", false);
        if (rc == MCDC_OK && hi) rc = below(&w, hi);
        if (rc == MCDC_OK) rc = piece_end(&w);
    }
    /* Key p between lo's and hi's. */
    if (rc == MCDC_OK) rc = piece_begin(&w);
    if (rc == MCDC_OK && lo && n > 0) {
        rc = term(&w);
        if (rc == MCDC_OK) rc = cmp(&w, p, p < n - 1 ? ">" : ">=", part(lo, &w, p));
    }
    if (rc == MCDC_OK && hi && n > 0) {
        rc = term(&w);
        if (rc == MCDC_OK) rc = cmp(&w, p, "<", part(hi, &w, p));
    }
    if (rc == MCDC_OK) rc = piece_end(&w);
    /* Key p equal to hi's and a later key below hi's; key p also above lo's
     * (an equal-to-SQL lo empties these pieces: the first ones hold it). */
    for (int j = p + 1; hi && rc == MCDC_OK && j < n; j++) {
        rc = piece_begin(&w);
        if (rc == MCDC_OK) rc = chain(&w, hi, j, "<", false);
        if (rc == MCDC_OK && lo) {
            rc = term(&w);
            if (rc == MCDC_OK) rc = cmp(&w, p, ">", part(lo, &w, p));
        }
        if (rc == MCDC_OK) rc = piece_end(&w);
    }
    return rc;
}

/* ---- bounds read back ------------------------------------------------------------ */
int mcdc_key_bound_of_row(json_t **out, const mcdc_batch *b, int64_t row, int32_t first,
                          const mcdc_key_col *keys, int n, mcdc_error *err) {
    MCDC_ASSERT(n >= 1 && first >= 0 && first + n <= b->schema->n_fields && row < b->rows);
    *out = NULL;
    json_t *arr = n > 1 ? json_array() : NULL;
    json_t *one = NULL;
    mcdc_buf t = {0};
    int rc = n > 1 && arr == NULL ? mcdc_error_set(err, MCDC_E_NOMEM, "out of memory") : MCDC_OK;
    for (int i = 0; rc == MCDC_OK && i < n; i++) {
        const mcdc_column *c = &b->columns[first + i];
        const mcdc_key_col *k = &keys[i];
        mcdc_type_id ty = c->field->type;
        json_t *v = NULL;
        if (!mcdc_col_is_valid(c, row)) {
            v = json_null();
        } else {
            bool int_col = ty == MCDC_TYPE_INT8 || ty == MCDC_TYPE_INT16 ||
                           ty == MCDC_TYPE_INT32 || ty == MCDC_TYPE_INT64;
            bool hex_col = ty == MCDC_TYPE_BINARY || ty == MCDC_TYPE_FIXED_BINARY;
            if (int_col != (k->kind == MCDC_KEY_INT) || hex_col != (k->kind == MCDC_KEY_HEX) ||
                ty == MCDC_TYPE_BOOL) {
                rc = mcdc_error_set(err, MCDC_E_PROTOCOL,
                                    "key column '%s' (%s) came back as %s", k->name, k->type,
                                    mcdc_type_name(ty));
                break;
            }
            mcdc_buf_reset(&t);
            rc = mcdc_text_cell(&t, c, row, err);
            if (rc == MCDC_OK && k->millis && (ty == MCDC_TYPE_TIMESTAMP_NTZ) && t.len == 26)
                t.len = 23; /* "...SS.ffffff" -> "...SS.fff": CAST to datetime takes 3 */
            if (rc == MCDC_OK && t.len > MCDC_KEY_BOUND_BYTES_MAX)
                rc = mcdc_error_set(err, MCDC_E_LIMIT,
                                    "a value of key column '%s' is %zu bytes as text, more than "
                                    "%d: cut the snapshot on other columns (snapshotKeys)",
                                    k->name, t.len, MCDC_KEY_BOUND_BYTES_MAX);
            if (rc == MCDC_OK) rc = mcdc_buf_cstr(&t, err);
            if (rc) break;
            int64_t x = 0;
            if (k->kind == MCDC_KEY_INT && mcdc_parse_i64((const char *)t.data, &x) != MCDC_OK) {
                rc = mcdc_error_set(err, MCDC_E_PROTOCOL, "key column '%s': '%s' is no integer",
                                    k->name, (const char *)t.data);
                break;
            }
            v = k->kind == MCDC_KEY_INT ? json_integer((json_int_t)x)
                                        : json_stringn((const char *)t.data, t.len);
        }
        if (v == NULL) {
            /* json_stringn refuses text that is not UTF-8. */
            rc = mcdc_error_set(err, MCDC_E_PROTOCOL,
                                "key column '%s': a value that is no UTF-8 text (or out of "
                                "memory)",
                                k->name);
            break;
        }
        if (n == 1) one = v;
        else if (json_array_append_new(arr, v) != 0)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    mcdc_buf_free(&t);
    if (rc) {
        json_decref(arr);
        json_decref(one);
        return rc;
    }
    *out = n == 1 ? one : arr;
    return MCDC_OK;
}
