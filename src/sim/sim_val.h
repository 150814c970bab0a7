/*
 * sim_val.h - SQL Server values in the simulator's SQLite store: type names,
 * conversions (CONVERT/CAST with styles), date/time arithmetic and the SQLite
 * functions the T-SQL translator calls (sim_convert, sim_dateadd, ...).
 *
 * Storage forms (what SQLite holds and compares):
 *   integers, bit            INTEGER
 *   real, float              REAL
 *   decimal, money           TEXT, canonical with the column's scale ("-12.3400"),
 *                            declared TEXT COLLATE sim_decimal: comparisons,
 *                            ORDER BY, MIN/MAX, GROUP BY and indexes order the
 *                            text by exact numeric value (sim_decimal_cmp).
 *   date/time types          TEXT, ISO with the type's fixed fraction width, so
 *                            text order = time order within one column;
 *                            datetimeoffset declared TEXT COLLATE sim_dto
 *                            (ordered by the UTC instant).
 *   strings                  TEXT (UTF-8), declared TEXT COLLATE sim_ci
 *   uniqueidentifier         TEXT (upper case), declared TEXT COLLATE sim_guid
 *   binary, varbinary        BLOB (memcmp order: LSN order for binary(10))
 */
#ifndef SIM_VAL_H
#define SIM_VAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim_engine.h"

/* The collation of decimal/money columns (registered by sim_val_register). */
#define SIM_DECIMAL_COLLATION "sim_decimal"
/* The collation of char/varchar/nchar/nvarchar columns: SQL Server's
 * default SQL_Latin1_General_CP1_CI_AS approximated (sim_string_cmp). */
#define SIM_STRING_COLLATION "sim_ci"

/* The collation of datetimeoffset columns: by the UTC instant (sim_dto_cmp:
 * "2024-01-01 10:00:00 +02:00" = "2024-01-01 08:00:00 +00:00"); text that
 * is no date sorts after every date, bytewise. */
#define SIM_DTO_COLLATION "sim_dto"
int sim_dto_cmp(const char *a, size_t na, const char *b, size_t nb);

/* The collation of uniqueidentifier columns: SQL Server's order (the last
 * byte group first, ... the first group last, the first three groups from
 * their last byte); text that is no GUID sorts after, bytewise. */
#define SIM_GUID_COLLATION "sim_guid"
int sim_guid_cmp(const char *a, size_t na, const char *b, size_t nb);

/* Compares two UTF-8 strings as the column collation does: case-insensitive
 * for Latin (Basic, Latin-1, Extended-A), Greek and Cyrillic letters,
 * accent-sensitive, trailing spaces ignored (the shorter string padded with
 * spaces); otherwise by code point. */
int sim_string_cmp(const char *a, size_t na, const char *b, size_t nb);

/* Compares two decimal texts ("-12.50", "3", "1e2") by exact value: <0, 0,
 * >0. Text that is not a number sorts after every number, bytewise among
 * itself (a total order, as an index needs). */
int sim_decimal_cmp(const char *a, size_t na, const char *b, size_t nb);

/* Parses "decimal(18,4)", "varchar(max)", "datetime2", "int"... (case-
 * insensitive, spaces allowed). false on an unknown type. */
bool sim_type_parse(sim_type *out, const char *s, size_t n);
/* "decimal(18,4)" etc. into buf. */
void sim_type_format(const sim_type *t, char *buf, size_t cap);
/* The SQLite column affinity to declare for a type ("INT", "TEXT", ...). */
const char *sim_type_affinity(const sim_type *t);
/* Column declaration: affinity plus the collation of strings and decimals. */
const char *sim_type_decl(const sim_type *t);

/* Server clock and zone seen by the SQLite functions: set per connection
 * as the user data of the registered functions. */
typedef struct sim_clock_src {
    void *ctx;
    int64_t (*utc_us)(void *ctx);     /* server clock, UTC microseconds */
    int (*offset_s)(void *ctx, int64_t utc_s); /* server zone offset */
    const char *(*zone_name)(void *ctx, char *buf, size_t cap);
    int (*spid)(void *ctx);
    int product_major;
} sim_clock_src;

/* Registers sim_convert, sim_dateadd, sim_datediff, sim_datepart,
 * sim_at_time_zone, sim_lsn_add, sim_quotename, sim_sysdatetime..., the
 * collations sim_decimal and sim_ci, like() as T-SQL's LIKE (%, _, [set],
 * [^set], ranges, ESCAPE; case as sim_ci), the aggregates (and window
 * functions) sim_sum /
 * sim_avg on db. sim_sum/sim_avg are exact over decimal text and integers
 * (SUM of decimal text keeps the largest scale seen; AVG of decimal text has
 * scale max(s, 6), truncated; AVG of integers is an integer, truncated, as
 * SQL Server's), through double once a REAL value is seen. */
int sim_val_register(sqlite3 *db, const sim_clock_src *clk);

/* Converts one SQLite value to a type's storage form into ctx's result
 * (used by sim_convert). style as CONVERT's third argument (-1 = none). */
void sim_val_convert(sqlite3_context *ctx, sqlite3_value *v, const sim_type *t, int style);

/* Formats microseconds since 1970 as a datetime / datetime2(scale) value
 * ("YYYY-MM-DD HH:MM:SS.fff", datetime rounded to 1/300 s). */
void sim_format_datetime(int64_t us, const sim_type *t, char out[48]);

#endif
