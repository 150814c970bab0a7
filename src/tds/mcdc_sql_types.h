/*
 * mcdc_sql_types.h - the SQL Server to batch type policy, in one table.
 *
 * Which batch type a SQL Server value reads as (reference §2.2): bit ->
 * bool; tinyint and smallint -> int16 (0-255 does not fit a signed byte);
 * int -> int32; bigint -> int64; real -> float; float -> double;
 * decimal/numeric(p,s) -> decimal(p,s); money -> decimal(19,4); smallmoney
 * -> decimal(10,4); date -> date32; datetime, datetime2, smalldatetime ->
 * timestamp_ntz; datetimeoffset -> timestamp UTC (its instant); time,
 * character types, xml and uniqueidentifier -> utf8; binary types and
 * timestamp/rowversion -> binary. The types the reference refuses read too,
 * each through an expression of its own in the SELECT (mcdc_sql_read):
 * hierarchyid -> utf8, its string form ('/1/2/'); geography and geometry ->
 * binary, EWKB (the WKB with Z and M, and the value's SRID in the header);
 * sql_variant -> utf8, "<base type>:<value>". Another CLR type has no
 * default: the columns option must leave it out or give its type; a result
 * column of one still reads (as bytes).
 *
 * Both TDS backends take a result column's type from it by TDS type id
 * (mcdc_sql_type_of_tds), the CDC client a captured column's by the name
 * sp_cdc_get_captured_columns gives (mcdc_sql_type_named), so they cannot
 * disagree. mcdc_sql_type_cast_name goes the other way, for typed NULLs.
 */
#ifndef MCDC_SQL_TYPES_H
#define MCDC_SQL_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"

/* How a captured column of a type is selected: as it is, or through an
 * expression whose value is the batch type's (the change-row and snapshot
 * SELECTs, mcdc_cdc_client.c). */
typedef enum mcdc_sql_read {
    MCDC_READ_VALUE = 0,   /* the column itself */
    MCDC_READ_HIERARCHYID, /* CAST(x AS nvarchar(4000)): ToString() */
    MCDC_READ_SPATIAL,     /* its SRID (binary(4)) then x.AsBinaryZM(), made EWKB after the
                              fetch (mcdc_ewkb.h) */
    MCDC_READ_VARIANT      /* SQL_VARIANT_PROPERTY(x, 'BaseType') + ':' + the value's text,
                              in a form that reads back exactly */
} mcdc_sql_read;

typedef struct mcdc_sql_type {
    const char *name;       /* SQL Server's name, lower case ("tinyint") */
    mcdc_type_id type;      /* the batch type its values read as */
    int8_t precision;       /* decimal: fixed (money: 19, 4), or -1: the column's own */
    int8_t scale;
    bool has_default;       /* false: a captured column needs a type from the columns option */
    bool chars;             /* character data: text as it is, not a value printed as text */
    uint8_t read;           /* mcdc_sql_read: how a captured column of it is selected */
} mcdc_sql_type;

/* The type named `name` (any case; sysname is nvarchar's alias), or NULL
 * for a name the table does not know. */
const mcdc_sql_type *mcdc_sql_type_named(const char *name);
/* The type of a result column by its TDS type id (the N forms and
 * FreeTDS's normalised ids alike). len is the TYPE_INFO length, which tells
 * the widths of one id apart (INTN 1/2/4/8: tinyint to bigint; FLTN,
 * MONEYN, DATETIMN 4/8); 0 when the id alone says. NULL for an unknown id. */
const mcdc_sql_type *mcdc_sql_type_of_tds(uint8_t tds_type, uint32_t len);
/* The batch type, precision and scale of a column of type t declared with
 * (decl_precision, decl_scale) (used by decimal and numeric only). */
void mcdc_sql_type_batch(const mcdc_sql_type *t, int32_t decl_precision, int32_t decl_scale,
                         mcdc_type_id *type, int32_t *precision, int32_t *scale);
/* The SQL Server type whose values read as f's type: what CAST(NULL AS ...)
 * names for a column an instance lacks. */
void mcdc_sql_type_cast_name(const mcdc_field *f, char out[32]);
/* Every row of the table (tests): *n rows. */
const mcdc_sql_type *mcdc_sql_types_all(int *n);

#endif /* MCDC_SQL_TYPES_H */
