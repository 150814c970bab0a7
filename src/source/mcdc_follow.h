/*
 * mcdc_follow.h - the rules a stream follows across schema changes and
 * capture instance switches (reference §2.2 "fits", §2.5), as functions of
 * what they decide on, with no server in sight: the change feed
 * (mcdc_follow.c, mcdc_changes.h) feeds them what it lists and reads, and
 * the unit tests feed them what they like.
 *
 *   fits       may a column typed A be read as type B without loss?
 *   union      the columns of every instance of a table, oldest first
 *   cut        a batch's LSN range cut at each newer instance's start S
 *   ddl        DDL inside a batch: go on (each one an event) or stop
 *   switch     a newer instance the stream has not read yet: in place, or
 *              stop at S (its schema would not hold what it captures)
 */
#ifndef MCDC_FOLLOW_H
#define MCDC_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_cdc_client.h"
#include "mcdc_lsn.h"

/* Whether every value of a column of type `from` reads unchanged as `to`:
 * the same type (a decimal's precision and scale too; fixed and variable
 * binary are one type), or a widening the reference accepts: integers
 * smallint < int < bigint, smallint and int to double, float to double,
 * date to timestamp_ntz, an integer to a decimal with at least 5, 10 or 20
 * integer digits, a decimal to one whose scale and integer digits do not
 * shrink. Only name-less properties are compared. */
bool mcdc_type_fits(const mcdc_field *from, const mcdc_field *to);
/* The type as the messages (and Spark) spell it: "int", "decimal(18,2)",
 * "string"... */
void mcdc_type_text(const mcdc_field *f, char out[48]);
/* A captured column's SQL Server type as its DDL spells it: "bigint",
 * "nvarchar(40)", "decimal(18,2)", "varchar(max)". */
void mcdc_sql_type_text(const mcdc_captured_column *c, char out[64]);

/* The union of the columns the capture instances of one table capture,
 * given oldest first (each a schema of default types, as inferred): by
 * name ignoring case, in the order they first appear; a column two
 * instances type differently takes the newer's type when it holds the
 * older's values, else MCDC_E_SCHEMA naming both (a stream could read
 * neither instance as one schema). *out owned by the caller. */
int mcdc_follow_union(mcdc_schema **out, const mcdc_schema *const *per_instance,
                      const char *const *names, int n, mcdc_error *err);

/* [from, to] cut at each newer instance's start: the older instance up to
 * S - 1, the newer one from S. starts[i] is instance i's start LSN, oldest
 * first; a zero start (capture has not processed the enable) leaves a newer
 * instance out. lowest (0 <= lowest < n): the first instance that may be
 * read, the newest one the stream's position records (0: none recorded);
 * older ones get no piece, and it is read whatever its start
 * (cleanup of it moves its start past the position: the retention guard
 * then tells the loss, rather than the older instance filling the range
 * without its columns). Never an empty piece. Returns the number of pieces
 * written to out (at most n - lowest; n is at most cap and
 * MCDC_TABLE_INSTANCES_MAX). */
typedef struct mcdc_follow_piece {
    int instance; /* index into starts */
    mcdc_lsn from, to;
} mcdc_follow_piece;
int mcdc_follow_cut(mcdc_follow_piece *out, int cap, const mcdc_lsn *starts, int n, int lowest,
                    const mcdc_lsn *from, const mcdc_lsn *to);

/* A capture instance as the checks see it: its name and its captured
 * columns as listed now (types follow ALTER COLUMN). */
typedef struct mcdc_follow_view {
    const char *name;
    const mcdc_captured_column *cols;
    int n_cols;
} mcdc_follow_view;

/* One DDL statement a batch holds, and the instance whose history told. */
typedef struct mcdc_follow_ddl {
    const char *ci;
    mcdc_lsn lsn;
    const char *command;
} mcdc_follow_ddl;

/* The reactions of reference §2.5 to the DDL recorded after a batch's start
 * (ddl in LSN order; none: MCDC_OK): those inside the batch, and later ones
 * capture has applied already (an ALTER COLUMN changes the change table's
 * column for every row, the batch's too). fail_on_any
 * (schemaChangePolicy=fail, given the DDL inside the batch): any DDL is
 * MCDC_E_SCHEMA. Else the captured columns of the instances the batch reads
 * (used) are compared, by name, with `expected`, the types the stream reads
 * its columns as: a column whose captured type no longer fits its expected
 * type (or has no default type any more) is MCDC_E_SCHEMA, naming it, both
 * types and the DDL; columns without an expectation (not read) are not
 * compared. ADD and DROP COLUMN, an ALTER to a type that fits, and any
 * other DDL: MCDC_OK (the caller records each as a schema_change event).
 * explicit_columns only changes the advice of the message. */
int mcdc_follow_classify_ddl(const mcdc_follow_ddl *ddl, int n_ddl, bool fail_on_any,
                             bool explicit_columns, const mcdc_schema *expected,
                             const mcdc_follow_view *used, int n_used, mcdc_error *err);

/* Before the first read of a newer capture instance (its start S): does the
 * stream's schema of captured columns (query) hold what it captures? With
 * inferred columns (explicit_columns false) a captured column the schema
 * lacks, or one whose type does not fit the schema's, is MCDC_E_SCHEMA: the
 * stream stops at S (before reading past it) and a restart infers the new
 * schema. With the columns option the list decides: columns it does not
 * name are not read, and *warning (owned: mcdc_free; NULL when none) says so. */
int mcdc_follow_check_switch(const mcdc_schema *query, bool explicit_columns,
                             const mcdc_follow_view *newer, const mcdc_lsn *start,
                             char **warning, mcdc_error *err);

/* The detail of a capture_instance_switched facts row (the reference's
 * CaptureInstanceSwitchedDetail): {"start_lsn": S, "not_captured": [the
 * query's columns the newer instance does not capture, NULL from S on],
 * "text": "old -> new[; no longer captured, read as NULL: a, b]"}. Owned
 * (free()), NULL when out of memory. */
char *mcdc_follow_switch_detail(const char *older, const mcdc_follow_view *newer,
                                const mcdc_schema *query, const mcdc_lsn *start);

#endif /* MCDC_FOLLOW_H */
