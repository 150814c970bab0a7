/* mcdc_sql_types.c - the SQL Server to batch type table (mcdc_sql_types.h). */
#include "mcdc_sql_types.h"

#include <stdio.h>

#include "mcdc_tds_proto.h"

enum {
    T_BIT, T_TINYINT, T_SMALLINT, T_INT, T_BIGINT, T_REAL, T_FLOAT, T_DECIMAL, T_NUMERIC,
    T_MONEY, T_SMALLMONEY, T_DATE, T_DATETIME, T_SMALLDATETIME, T_DATETIME2, T_DATETIMEOFFSET,
    T_TIME, T_CHAR, T_VARCHAR, T_NCHAR, T_NVARCHAR, T_TEXT, T_NTEXT, T_XML, T_SYSNAME,
    T_UNIQUEIDENTIFIER, T_BINARY, T_VARBINARY, T_IMAGE, T_TIMESTAMP, T_ROWVERSION,
    T_SQL_VARIANT, T_GEOGRAPHY, T_GEOMETRY, T_HIERARCHYID, T_CLR, T_COUNT
};

#define ROW(n, t) {n, MCDC_TYPE_##t, 0, 0, true, false, MCDC_READ_VALUE}
#define TEXT(n) {n, MCDC_TYPE_UTF8, 0, 0, true, true, MCDC_READ_VALUE}
#define READ(n, t, r) {n, MCDC_TYPE_##t, 0, 0, true, false, MCDC_READ_##r}
#define NODEFAULT(n, t) {n, MCDC_TYPE_##t, 0, 0, false, false, MCDC_READ_VALUE}
static const mcdc_sql_type TYPES[T_COUNT] = {
    [T_BIT] = ROW("bit", BOOL),
    [T_TINYINT] = ROW("tinyint", INT16), /* 0-255 does not fit a signed byte */
    [T_SMALLINT] = ROW("smallint", INT16),
    [T_INT] = ROW("int", INT32),
    [T_BIGINT] = ROW("bigint", INT64),
    [T_REAL] = ROW("real", FLOAT),
    [T_FLOAT] = ROW("float", DOUBLE),
    [T_DECIMAL] = {"decimal", MCDC_TYPE_DECIMAL, -1, -1, true, false, MCDC_READ_VALUE},
    [T_NUMERIC] = {"numeric", MCDC_TYPE_DECIMAL, -1, -1, true, false, MCDC_READ_VALUE},
    [T_MONEY] = {"money", MCDC_TYPE_DECIMAL, 19, 4, true, false, MCDC_READ_VALUE},
    [T_SMALLMONEY] = {"smallmoney", MCDC_TYPE_DECIMAL, 10, 4, true, false, MCDC_READ_VALUE},
    [T_DATE] = ROW("date", DATE32),
    [T_DATETIME] = ROW("datetime", TIMESTAMP_NTZ),
    [T_SMALLDATETIME] = ROW("smalldatetime", TIMESTAMP_NTZ),
    [T_DATETIME2] = ROW("datetime2", TIMESTAMP_NTZ),
    [T_DATETIMEOFFSET] = ROW("datetimeoffset", TIMESTAMP_UTC), /* its UTC instant */
    [T_TIME] = ROW("time", UTF8),                              /* as SQL Server prints it */
    [T_CHAR] = TEXT("char"),
    [T_VARCHAR] = TEXT("varchar"),
    [T_NCHAR] = TEXT("nchar"),
    [T_NVARCHAR] = TEXT("nvarchar"),
    [T_TEXT] = TEXT("text"),
    [T_NTEXT] = TEXT("ntext"),
    [T_XML] = TEXT("xml"),
    [T_SYSNAME] = TEXT("sysname"), /* alias of nvarchar(128) */
    [T_UNIQUEIDENTIFIER] = ROW("uniqueidentifier", UTF8),
    [T_BINARY] = ROW("binary", BINARY),
    [T_VARBINARY] = ROW("varbinary", BINARY),
    [T_IMAGE] = ROW("image", BINARY),
    [T_TIMESTAMP] = ROW("timestamp", BINARY), /* rowversion: binary(8) on the wire */
    [T_ROWVERSION] = ROW("rowversion", BINARY),
    /* The reference refuses these (§2.2); a captured column of them reads
     * through its expression, a bare result column as the decoders read it:
     * sql_variant as its value's text, a CLR type's as its bytes (T_CLR). */
    [T_SQL_VARIANT] = READ("sql_variant", UTF8, VARIANT),
    [T_GEOGRAPHY] = READ("geography", BINARY, SPATIAL),
    [T_GEOMETRY] = READ("geometry", BINARY, SPATIAL),
    [T_HIERARCHYID] = READ("hierarchyid", UTF8, HIERARCHYID),
    /* A UDT result column (TDS does not name its type here), or a captured
     * column of a CLR type of the user's: no default. */
    [T_CLR] = NODEFAULT("clr type", BINARY),
};
#undef ROW
#undef TEXT
#undef READ
#undef NODEFAULT

/* FreeTDS ids that are not TDS 7.4 wire ids: db-lib reports (max) and
 * some long values as its own long binary, and old-style ids for the rest
 * (a TDS 7 server never sends these, FreeTDS's dbcoltype does). */
#define FREETDS_LONGBINARY 0xE1
#define TDS_CHAR_LEGACY 0x2F
#define TDS_VARCHAR_LEGACY 0x27
#define TDS_NVARCHAR_LEGACY 0x67
#define TDS_BINARY_LEGACY 0x2D
#define TDS_VARBINARY_LEGACY 0x25

/* TDS type id (and for the shared N ids, the length) -> type. */
static const struct {
    uint8_t tds;
    uint8_t len; /* 0: any */
    uint8_t type;
} WIRE[] = {
    {TDS_BIT, 0, T_BIT},
    {TDS_BITN, 0, T_BIT},
    {TDS_INT1, 0, T_TINYINT},
    {TDS_INT2, 0, T_SMALLINT},
    {TDS_INT4, 0, T_INT},
    {TDS_INT8, 0, T_BIGINT},
    {TDS_INTN, 1, T_TINYINT},
    {TDS_INTN, 2, T_SMALLINT},
    {TDS_INTN, 4, T_INT},
    {TDS_INTN, 8, T_BIGINT},
    {TDS_FLT4, 0, T_REAL},
    {TDS_FLT8, 0, T_FLOAT},
    {TDS_FLTN, 4, T_REAL},
    {TDS_FLTN, 8, T_FLOAT},
    {TDS_DECIMALN, 0, T_DECIMAL},
    {TDS_DECIMAL, 0, T_DECIMAL},
    {TDS_NUMERICN, 0, T_NUMERIC},
    {TDS_NUMERIC, 0, T_NUMERIC},
    {TDS_MONEY, 0, T_MONEY},
    {TDS_MONEY4, 0, T_SMALLMONEY},
    {TDS_MONEYN, 8, T_MONEY},
    {TDS_MONEYN, 4, T_SMALLMONEY},
    {TDS_DATEN, 0, T_DATE},
    {TDS_DATETIME, 0, T_DATETIME},
    {TDS_DATETIM4, 0, T_SMALLDATETIME},
    {TDS_DATETIMN, 8, T_DATETIME},
    {TDS_DATETIMN, 4, T_SMALLDATETIME},
    {TDS_DATETIME2N, 0, T_DATETIME2},
    {TDS_DATETIMEOFFSETN, 0, T_DATETIMEOFFSET},
    {TDS_TIMEN, 0, T_TIME},
    {TDS_BIGCHAR, 0, T_CHAR},
    {TDS_CHAR_LEGACY, 0, T_CHAR},
    {TDS_BIGVARCHAR, 0, T_VARCHAR},
    {TDS_VARCHAR_LEGACY, 0, T_VARCHAR},
    {TDS_NCHAR, 0, T_NCHAR},
    {TDS_NVARCHAR, 0, T_NVARCHAR},
    {TDS_NVARCHAR_LEGACY, 0, T_NVARCHAR},
    {TDS_TEXT, 0, T_TEXT},
    {TDS_NTEXT, 0, T_NTEXT},
    {TDS_XML, 0, T_XML},
    {TDS_GUID, 0, T_UNIQUEIDENTIFIER},
    {TDS_BIGBINARY, 0, T_BINARY},
    {TDS_BINARY_LEGACY, 0, T_BINARY},
    {TDS_BIGVARBINARY, 0, T_VARBINARY},
    {TDS_VARBINARY_LEGACY, 0, T_VARBINARY},
    {FREETDS_LONGBINARY, 0, T_VARBINARY},
    {TDS_IMAGE, 0, T_IMAGE},
    {TDS_SSVARIANT, 0, T_SQL_VARIANT},
    {TDS_UDT, 0, T_CLR},
};

const mcdc_sql_type *mcdc_sql_type_named(const char *name) {
    if (name == NULL) return NULL;
    for (int i = 0; i < T_COUNT; i++)
        if (mcdc_str_ieq(name, TYPES[i].name)) return &TYPES[i];
    return NULL;
}

const mcdc_sql_type *mcdc_sql_type_of_tds(uint8_t tds_type, uint32_t len) {
    for (size_t i = 0; i < sizeof WIRE / sizeof WIRE[0]; i++)
        if (WIRE[i].tds == tds_type && (WIRE[i].len == 0 || WIRE[i].len == len))
            return &TYPES[WIRE[i].type];
    return NULL;
}

void mcdc_sql_type_batch(const mcdc_sql_type *t, int32_t decl_precision, int32_t decl_scale,
                         mcdc_type_id *type, int32_t *precision, int32_t *scale) {
    *type = t->type;
    *precision = *scale = 0;
    if (t->type != MCDC_TYPE_DECIMAL) return;
    *precision = t->precision < 0 ? decl_precision : t->precision;
    *scale = t->scale < 0 ? decl_scale : t->scale;
}

void mcdc_sql_type_cast_name(const mcdc_field *f, char out[32]) {
    switch (f->type) {
    case MCDC_TYPE_BOOL: snprintf(out, 32, "bit"); return;
    case MCDC_TYPE_INT8: /* no signed byte in SQL Server: the next that holds it */
    case MCDC_TYPE_INT16: snprintf(out, 32, "smallint"); return;
    case MCDC_TYPE_INT32: snprintf(out, 32, "int"); return;
    case MCDC_TYPE_INT64: snprintf(out, 32, "bigint"); return;
    case MCDC_TYPE_FLOAT: snprintf(out, 32, "real"); return;
    case MCDC_TYPE_DOUBLE: snprintf(out, 32, "float"); return;
    case MCDC_TYPE_DECIMAL: snprintf(out, 32, "decimal(%d,%d)", f->precision, f->scale); return;
    case MCDC_TYPE_UTF8: snprintf(out, 32, "nvarchar(1)"); return;
    case MCDC_TYPE_BINARY:
    case MCDC_TYPE_FIXED_BINARY: snprintf(out, 32, "varbinary(1)"); return;
    case MCDC_TYPE_DATE32: snprintf(out, 32, "date"); return;
    case MCDC_TYPE_TIMESTAMP_NTZ: snprintf(out, 32, "datetime2(6)"); return;
    case MCDC_TYPE_TIMESTAMP_UTC: snprintf(out, 32, "datetimeoffset(6)"); return;
    }
    snprintf(out, 32, "sql_variant");
}

const mcdc_sql_type *mcdc_sql_types_all(int *n) {
    *n = T_COUNT;
    return TYPES;
}
