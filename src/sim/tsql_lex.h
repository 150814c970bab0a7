/*
 * tsql_lex.h - T-SQL lexer for the simulator. Tokens point into the source
 * text (borrowed); decode identifiers and strings with tsql_tok_text.
 */
#ifndef TSQL_LEX_H
#define TSQL_LEX_H

#include <stdbool.h>
#include <stddef.h>

#include "mcdc_util.h"

typedef enum tsql_tk {
    TK_EOF = 0,
    TK_IDENT,  /* bare identifier or keyword */
    TK_QIDENT, /* [bracketed] or "quoted" identifier */
    TK_VAR,    /* @name */
    TK_SYSVAR, /* @@name */
    TK_NUM,    /* 12, 1.5, 1e3 */
    TK_STR,    /* 'text' */
    TK_NSTR,   /* N'text' */
    TK_HEX,    /* 0xABCD */
    TK_OP      /* punctuation / operator */
} tsql_tk;

typedef struct tsql_tok {
    tsql_tk t;
    const char *s; /* start in the source (borrowed) */
    int n;         /* bytes */
    int line;      /* 1-based */
} tsql_tok;

/* Tokenises sql[0..len). *out (owned by the caller, mcdc_free) ends with a
 * TK_EOF token; *ntok excludes it. Errors: unterminated string/identifier/
 * comment (SQL Server error 105/102 text in err), too many tokens. */
int tsql_lex(tsql_tok **out, int *ntok, const char *sql, size_t len, mcdc_error *err);

/* Decoded text of an identifier (brackets/quotes removed, doubled closers
 * undone) or string literal (quotes removed, '' undone) into buf (NUL-
 * terminated, truncated to cap-1). Returns the decoded length. */
size_t tsql_tok_text(const tsql_tok *t, char *buf, size_t cap);
/* Case-insensitive keyword test for TK_IDENT tokens. */
bool tsql_tok_is(const tsql_tok *t, const char *kw);
bool tsql_tok_op(const tsql_tok *t, const char *op);

#endif
