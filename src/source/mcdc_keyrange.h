/*
 * mcdc_keyrange.h - the columns a snapshot is cut on, their bounds as JSON,
 * and the predicate that selects the rows of a range of them (reference
 * §3.7, its _key_select).
 *
 * Bounds are JSON: a scalar for one key column, an array for several; an
 * integer key's values as JSON integers, every other value as the text
 * CAST reads back (mcdc_value_text.h's canonical text; datetime and
 * smalldatetime with 3 fraction digits, as CAST to them accepts no more),
 * binary as "0x" + hex; null, or a NULL json_t*, is an open end. A range
 * [lo, hi) is lo inclusive, hi exclusive, in SQL Server's order of the key
 * columns: column by column, NULL first.
 *
 * T-SQL has no row-value comparison, and a seek takes equalities on leading
 * key columns plus one range on the next; anything else is filtered row by
 * row. So a range is cut into disjoint pieces of that shape, one SELECT
 * each, joined by UNION ALL: the leading values both bounds share become
 * equalities, then from (x, y) to (u, v) the pieces are a = x AND b >= y,
 * a > x AND a < u, a = u AND b < v (generalised per column). Two values can
 * differ as text and be equal to SQL Server ('n' and 'N' under a
 * case-insensitive collation, trailing spaces): the first pieces also check
 * (a, b) < (u, v) and the last a > x, which empties them, so every row still
 * comes once.
 */
#ifndef MCDC_KEYRANGE_H
#define MCDC_KEYRANGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_util.h"

struct mcdc_captured_column;

/* How a bound of a key column crosses into the SQL. */
typedef enum mcdc_key_kind {
    MCDC_KEY_INT = 0, /* tinyint..bigint: JSON integers, inlined as digits */
    MCDC_KEY_CAST,    /* a text parameter, CAST(? [COLLATE c] AS <type>) */
    MCDC_KEY_HEX      /* binary types: "0x" + hex, CONVERT(<type>, ?, 1) */
} mcdc_key_kind;

/* "datetimeoffset(7)", "decimal(38,38)", "nvarchar(max)", "varbinary(8000)". */
#define MCDC_KEY_TYPE_TEXT_SIZE 24

typedef struct mcdc_key_col {
    char name[MCDC_IDENT_BYTES_MAX + 1];      /* the column's name in the table */
    char type[MCDC_KEY_TYPE_TEXT_SIZE];       /* its declared type, from a whitelist */
    char collation[MCDC_IDENT_BYTES_MAX + 1]; /* char/varchar: the column's; else "" */
    mcdc_key_kind kind;
    bool millis;    /* datetime, smalldatetime: bound text with 3 fraction digits */
    bool truncated; /* datetime2(7), datetimeoffset(7): values read back cut to microseconds */
} mcdc_key_col;

/* The key column `name` (the table's current name of the captured column
 * col) with its declared type, from col's metadata and (char, varchar) the
 * column's collation from sys.columns. last: it is the last key column.
 * A type no bound can be bound as (time, sql_variant, CLR types), one SQL
 * Server cannot sort (bit, text, ntext, image, xml), datetime2(7) or
 * datetimeoffset(7) before the last column, or metadata that makes no valid
 * type: MCDC_E_INVALID naming the column and why. */
int mcdc_key_col_init(mcdc_key_col *out, const char *name, const struct mcdc_captured_column *col,
                      const char *collation, bool last, mcdc_error *err);

/* Part i of a bound of n key columns (the scalar itself when n is 1); NULL
 * for an open bound. Borrowed. */
const json_t *mcdc_key_bound_part(const json_t *bound, int n, int i);
/* A bound for keys: NULL or null (open), a scalar for one column or an
 * array of n, each part null or of its column's kind (an integer; a string
 * of at most MCDC_KEY_BOUND_BYTES_MAX bytes without NUL; "0x" + hex for
 * binary). what names it in the error ("lo", "hi"). MCDC_E_INVALID. */
int mcdc_key_bound_check(const json_t *bound, const mcdc_key_col *keys, int n, const char *what,
                         mcdc_error *err);

/* Text parameters of a query, in the order of its `?` marks; owned. */
typedef struct mcdc_sql_params {
    char **v;
    int n, cap;
} mcdc_sql_params;
int mcdc_sql_params_add(mcdc_sql_params *p, const char *text, size_t len, mcdc_error *err);
void mcdc_sql_params_free(mcdc_sql_params *p);

/* Appends to out the rows of `select` (a SELECT without WHERE) with
 * lo <= (keys) < hi: pieces joined by " UNION ALL ", each
 * open + select + " WHERE ..." + close (open, close may be NULL: nothing),
 * no WHERE when the piece has no condition. Bounds are checked
 * (mcdc_key_bound_check); their parameters are appended to params in order.
 * n may be 0 (then lo and hi must be open: the whole table). */
int mcdc_key_select(mcdc_buf *out, mcdc_sql_params *params, const char *select, const char *open,
                    const char *close, const mcdc_key_col *keys, int n, const json_t *lo,
                    const json_t *hi, mcdc_error *err);

/* The bound of row `row` of b, whose columns [first, first + n) hold the
 * key columns as a query returned them: JSON as the top of this file says.
 * *out owned (json_decref). A column whose type is not its key's kind:
 * MCDC_E_PROTOCOL; a value past MCDC_KEY_BOUND_BYTES_MAX: MCDC_E_LIMIT. */
int mcdc_key_bound_of_row(json_t **out, const mcdc_batch *b, int64_t row, int32_t first,
                          const mcdc_key_col *keys, int n, mcdc_error *err);

/* [name] with ']' doubled. */
int mcdc_sql_quote_ident(mcdc_buf *b, const char *name, mcdc_error *err);

#endif /* MCDC_KEYRANGE_H */
