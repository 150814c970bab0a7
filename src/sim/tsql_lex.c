/* tsql_lex.c - T-SQL lexer (see tsql_lex.h). */
#include "tsql_lex.h"

#include <ctype.h>
#include <string.h>

/* Bound on tokens per batch: a batch is a few statements, not a dump. */
#define TSQL_TOKENS_MAX (4 * 1024 * 1024)

static bool ident_start(unsigned char c) { return isalpha(c) || c == '_' || c == '#' || c >= 0x80; }
static bool ident_char(unsigned char c) {
    return isalnum(c) || c == '_' || c == '$' || c == '#' || c == '@' || c >= 0x80;
}

int tsql_lex(tsql_tok **out, int *ntok, const char *sql, size_t len, mcdc_error *err) {
    size_t cap = 64, n = 0, i = 0;
    int line = 1;
    tsql_tok *v = mcdc_malloc(cap * sizeof *v);
    if (!v) return mcdc_error_set(err, MCDC_E_NOMEM, "tsql_lex: out of memory");
    while (1) {
        while (i < len) {
            unsigned char c = (unsigned char)sql[i];
            if (c == '\n') { line++; i++; }
            else if (isspace(c)) i++;
            else if (c == '-' && i + 1 < len && sql[i + 1] == '-') {
                while (i < len && sql[i] != '\n') i++;
            } else if (c == '/' && i + 1 < len && sql[i + 1] == '*') {
                int depth = 1;
                i += 2;
                while (i < len && depth > 0) {
                    if (sql[i] == '\n') line++;
                    if (sql[i] == '*' && i + 1 < len && sql[i + 1] == '/') { depth--; i += 2; }
                    else if (sql[i] == '/' && i + 1 < len && sql[i + 1] == '*') { depth++; i += 2; }
                    else i++;
                }
                if (depth > 0) {
                    mcdc_free(v);
                    return mcdc_error_set(err, MCDC_E_INVALID, "Missing end comment mark '*/'.");
                }
            } else break;
        }
        if (n + 1 >= cap) {
            if (cap >= TSQL_TOKENS_MAX) {
                mcdc_free(v);
                return mcdc_error_set(err, MCDC_E_LIMIT, "batch has more than %d tokens",
                                      TSQL_TOKENS_MAX);
            }
            tsql_tok *nv = mcdc_realloc(v, cap * 2 * sizeof *v);
            if (!nv) { mcdc_free(v); return mcdc_error_set(err, MCDC_E_NOMEM, "tsql_lex: out of memory"); }
            v = nv;
            cap *= 2;
        }
        tsql_tok *t = &v[n];
        t->t = TK_EOF; /* the slot is uninitialised memory: the N'' test below reads it */
        t->s = sql + i;
        t->line = line;
        if (i >= len) { t->t = TK_EOF; t->n = 0; break; }
        unsigned char c = (unsigned char)sql[i];
        size_t st = i;
        if ((c == 'N' || c == 'n') && i + 1 < len && sql[i + 1] == '\'') {
            t->t = TK_NSTR;
            i++;
            c = '\'';
        }
        if (c == '\'') {
            if (t->t != TK_NSTR) t->t = TK_STR;
            i++;
            while (1) {
                if (i >= len) {
                    mcdc_free(v);
                    return mcdc_error_set(err, MCDC_E_INVALID,
                                          "Unclosed quotation mark after the character string '%.*s'.",
                                          (int)(len - st < 40 ? len - st : 40), sql + st);
                }
                if (sql[i] == '\n') line++;
                if (sql[i] == '\'') {
                    if (i + 1 < len && sql[i + 1] == '\'') { i += 2; continue; }
                    i++;
                    break;
                }
                i++;
            }
        } else if (c == '[' || c == '"') {
            char close = c == '[' ? ']' : '"';
            t->t = TK_QIDENT;
            i++;
            while (1) {
                if (i >= len) {
                    mcdc_free(v);
                    return mcdc_error_set(err, MCDC_E_INVALID,
                                          "Unclosed quotation mark after the character string '%.*s'.",
                                          (int)(len - st < 40 ? len - st : 40), sql + st);
                }
                if (sql[i] == close) {
                    if (i + 1 < len && sql[i + 1] == close) { i += 2; continue; }
                    i++;
                    break;
                }
                i++;
            }
        } else if (c == '0' && i + 1 < len && (sql[i + 1] == 'x' || sql[i + 1] == 'X')) {
            t->t = TK_HEX;
            i += 2;
            while (i < len && isxdigit((unsigned char)sql[i])) i++;
        } else if (isdigit(c) || (c == '.' && i + 1 < len && isdigit((unsigned char)sql[i + 1]))) {
            t->t = TK_NUM;
            while (i < len && isdigit((unsigned char)sql[i])) i++;
            if (i < len && sql[i] == '.') { i++; while (i < len && isdigit((unsigned char)sql[i])) i++; }
            if (i < len && (sql[i] == 'e' || sql[i] == 'E')) {
                size_t j = i + 1;
                if (j < len && (sql[j] == '+' || sql[j] == '-')) j++;
                if (j < len && isdigit((unsigned char)sql[j])) {
                    i = j;
                    while (i < len && isdigit((unsigned char)sql[i])) i++;
                }
            }
        } else if (c == '@') {
            t->t = TK_VAR;
            i++;
            if (i < len && sql[i] == '@') { t->t = TK_SYSVAR; i++; }
            while (i < len && ident_char((unsigned char)sql[i])) i++;
        } else if (ident_start(c)) {
            t->t = TK_IDENT;
            while (i < len && ident_char((unsigned char)sql[i])) i++;
        } else {
            t->t = TK_OP;
            static const char *two[] = {"<=", ">=", "<>", "!=", "!<", "!>", "+=", "-=", "*=", "/=", "::", NULL};
            i++;
            for (int k = 0; two[k]; k++)
                if (i < len && c == (unsigned char)two[k][0] && sql[i] == two[k][1]) { i++; break; }
        }
        t->n = (int)(i - st);
        n++;
    }
    *out = v;
    *ntok = (int)n;
    return MCDC_OK;
}

size_t tsql_tok_text(const tsql_tok *t, char *buf, size_t cap) {
    size_t o = 0;
    const char *s = t->s;
    size_t n = (size_t)t->n;
    char q = 0;
    if (cap == 0) return 0;
    if (t->t == TK_NSTR) { s++; n--; }
    if (t->t == TK_STR || t->t == TK_NSTR) q = '\'';
    else if (t->t == TK_QIDENT) q = s[0] == '[' ? ']' : '"';
    if (q) {
        s++;
        n = n >= 2 ? n - 2 : 0;
        for (size_t k = 0; k < n; k++) {
            if (s[k] == q && k + 1 < n && s[k + 1] == q) k++;
            if (o + 1 < cap) buf[o] = s[k];
            o++;
        }
    } else {
        for (size_t k = 0; k < n; k++) {
            if (o + 1 < cap) buf[o] = s[k];
            o++;
        }
    }
    buf[o < cap ? o : cap - 1] = 0;
    return o;
}

bool tsql_tok_is(const tsql_tok *t, const char *kw) {
    return t->t == TK_IDENT && strlen(kw) == (size_t)t->n && mcdc_str_nieq(t->s, kw, (size_t)t->n);
}

bool tsql_tok_op(const tsql_tok *t, const char *op) {
    return t->t == TK_OP && strlen(op) == (size_t)t->n && memcmp(t->s, op, (size_t)t->n) == 0;
}
