/*
 * tsql_xlate.h - translates T-SQL expressions and queries to SQLite SQL.
 *
 * Rewrites: [x] -> "x"; N'..' -> '..'; 0xAB -> X'AB'; schema.table in table
 * positions -> the SQLite table "schema.table" (default schema dbo) aliased
 * by its last part; TOP (n) / OFFSET..FETCH -> LIMIT/OFFSET; CONVERT/CAST ->
 * sim_convert; x AT TIME ZONE z -> sim_at_time_zone; sys.fn_cdc_* -> sub-
 * queries over cdc.lsn_time_mapping / cdc.change_tables or functions;
 * DATEADD/DATEDIFF/DATEPART -> sim_* with the part as text; COUNT_BIG ->
 * count; @@SPID/@@VERSION -> literals; '+' next to a string -> '||'.
 * Variables stay as SQLite named parameters (@name) bound by the caller.
 *
 * Before translation, tsql_rewrite (tsql_rewrite.c) turns what SQLite lacks
 * into T-SQL it has: CROSS/OUTER APPLY and derived tables with a column
 * alias list ("(VALUES (1, 2)) v(a, b)", "(SELECT ...) x(c)").
 */
#ifndef TSQL_XLATE_H
#define TSQL_XLATE_H

#include "mcdc_util.h"
#include "sim_engine.h"
#include "tsql_lex.h"

#define XL_TABLES_MAX 32
#define XL_ITEMS_MAX 512

typedef struct xl_env {
    void *ctx;
    /* Does the SQLite table "schema.table" exist in the current database? */
    bool (*table_exists)(void *ctx, const char *sqlite_name);
    /* Type of column col of SQLite table tbl; false if unknown. */
    bool (*col_type)(void *ctx, const char *tbl, const char *col, sim_type *out, bool *nullable);
    /* Type of a variable; false if undeclared. */
    bool (*var_type)(void *ctx, const char *name, sim_type *out);
    /* Captured columns of a capture instance's change table, "\"a\", \"b\"" (for
     * cdc.fn_cdc_get_all_changes_<ci>); false if no such instance. */
    bool (*ci_columns)(void *ctx, const char *ci, char *buf, size_t cap);
    int spid;
    int trancount;
    int64_t rowcount;
    const char *db_name;
    const char *user_name;
    bool is_admin;
    int product_major;
    /* Appends the subquery text standing for a dynamic system view
     * ("sys.dm_exec_session_wait_stats", "sys.databases"); returns 1 if it
     * knows the view, 0 if not, negative on error. Called only when a query
     * names the view. */
    int (*dyn_view)(void *ctx, const char *name, mcdc_buf *out);
    /* Appends what stands for table sqlite_name (a snapshot's versioned
     * view: a subquery with the table's columns) and returns 1, 0 to read
     * the table itself, negative on error. May be NULL. */
    int (*table_source)(void *ctx, const char *sqlite_name, mcdc_buf *out);
} xl_env;

typedef struct xl_table {
    char name[MCDC_IDENT_BYTES_MAX]; /* SQLite table ("dbo.t", "cdc.ci_CT") */
    char alias[MCDC_IDENT_BYTES_MAX];
} xl_table;

typedef struct xl_item {
    bool known;
    sim_type type;
    bool nullable;
    char name[MCDC_IDENT_BYTES_MAX]; /* alias or column name, "" if none */
} xl_item;

typedef struct xl_result {
    xl_table tables[XL_TABLES_MAX];
    int ntables;
    xl_item items[XL_ITEMS_MAX]; /* outermost select list */
    int nitems;
    /* an outer join (LEFT/RIGHT/FULL, OUTER APPLY) anywhere: a column of a
     * NOT NULL table column may still be NULL */
    bool outer_join;
} xl_result;

/* Translates tokens [from, to) into out (appended). Errors use SQL Server
 * numbers in err->server_number (102 syntax, 208 object, 195 function). */
int tsql_xlate(const xl_env *env, const tsql_tok *toks, int from, int to, mcdc_buf *out, xl_result *res,
               mcdc_error *err);

/* Appends s as an SQLite string literal / quoted identifier. */
int xl_append_literal(mcdc_buf *out, const char *s, size_t n);
int xl_append_ident(mcdc_buf *out, const char *s);

/* Splits a multi-part name at toks[*i] into parts (decoded); returns count
 * (0 if not a name). Advances *i past it. */
int xl_name_parts(const tsql_tok *toks, int *i, int to, char parts[4][MCDC_IDENT_BYTES_MAX]);
/* SQLite table name for parts: "schema.table" (default dbo). */
void xl_table_name(char parts[4][MCDC_IDENT_BYTES_MAX], int nparts, char *out, size_t cap);

/* A word the translator passes through (SELECT, FROM, CASE, AND...). */
bool xl_is_keyword(const tsql_tok *t);
/* A word that ends a table reference (cannot be its alias). */
bool xl_ends_table(const tsql_tok *t);
/* The name of select item [s, e) (its alias, or a column's last part; ""
 * if none) into name; returns the end of its expression (before the alias). */
int xl_item_alias(const tsql_tok *t, int s, int e, char *name, size_t cap);

/* ---- tsql_rewrite.c ------------------------------------------------------ */
/* Tokens of a rewrite: the array and the text of the tokens it made up. */
typedef struct tsql_rewritten {
    tsql_tok *toks; /* owned; ntoks tokens, then a TK_EOF */
    int ntoks;
    char **texts;   /* owned */
    int ntexts;
} tsql_rewritten;
/* Rewrites tokens [from, to) when they hold an APPLY or a column alias
 * list: out->toks is set (free with tsql_rewritten_free), else left NULL
 * and nothing changes. Shapes the simulator cannot translate exactly are
 * refused (err: SQL Server's number where it has one, 50000 otherwise). */
int tsql_rewrite(const tsql_tok *t, int from, int to, tsql_rewritten *out, mcdc_error *err);
void tsql_rewritten_free(tsql_rewritten *r);

#endif
