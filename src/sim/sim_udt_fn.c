/*
 * sim_udt_fn.c - the SQLite functions the translator calls for hierarchyid,
 * geography/geometry, xml and sql_variant (their methods, static methods,
 * conversions to text and SQL_VARIANT_PROPERTY), and the sim_variant
 * collation. An error is reported as "#<number> <text>", which
 * sim_sqlite_err turns into SQL Server's number.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_udt.h"
#include "sim_val.h"

static void udt_error(sqlite3_context *ctx, int number, const char *msg) {
    char m[SIM_UDT_MSG + 16];
    snprintf(m, sizeof m, "#%d %s", number, msg);
    sqlite3_result_error(ctx, m, -1);
}

static void result_buf_blob(sqlite3_context *ctx, const mcdc_buf *b) {
    sqlite3_result_blob(ctx, b->data ? (const void *)b->data : "", (int)b->len, SQLITE_TRANSIENT);
}
static void result_buf_text(sqlite3_context *ctx, const mcdc_buf *b) {
    sqlite3_result_text(ctx, b->data ? (const char *)b->data : "", (int)b->len, SQLITE_TRANSIENT);
}

static bool arg_geog(sqlite3_value *v) {
    const unsigned char *k = sqlite3_value_text(v);
    return k && (k[0] == 'g' || k[0] == 'G') && (k[3] == 'g' || k[3] == 'G'); /* "geography" */
}

/* ---- conversions into a value or a text --------------------------------------- */
/* One conversion: its arguments (the first `nonnull` of which make NULL
 * when NULL), into out; 0 or SQL Server's error number (text in msg). */
typedef int (*conv_fn)(sqlite3_value **argv, mcdc_buf *out, char msg[SIM_UDT_MSG]);
typedef struct conv { conv_fn fn; int nonnull; bool text; } conv;

static void fn_conv(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const conv *c = sqlite3_user_data(ctx);
    for (int k = 0; k < c->nonnull; k++)
        if (sqlite3_value_type(argv[k]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    mcdc_buf b = {0};
    char msg[SIM_UDT_MSG];
    int rc = c->fn(argv, &b, msg);
    if (rc) udt_error(ctx, rc, msg);
    else if (c->text) result_buf_text(ctx, &b);
    else result_buf_blob(ctx, &b);
    mcdc_buf_free(&b);
}

static const char *arg_s(sqlite3_value *v) { return (const char *)sqlite3_value_text(v); }
static const uint8_t *arg_b(sqlite3_value *v) { return sqlite3_value_blob(v); }
static size_t arg_n(sqlite3_value *v) { return (size_t)sqlite3_value_bytes(v); }

/* hierarchyid::Parse(text), .ToString() */
static int c_hid_parse(sqlite3_value **a, mcdc_buf *o, char m[SIM_UDT_MSG]) {
    const char *s = arg_s(a[0]);
    return sim_hid_from_text(s, arg_n(a[0]), o, m);
}
static int c_hid_tostring(sqlite3_value **a, mcdc_buf *o, char m[SIM_UDT_MSG]) {
    const uint8_t *p = arg_b(a[0]);
    return sim_hid_to_text(p, arg_n(a[0]), o, m);
}
/* (wkt, srid, kind): STGeomFromText, Parse...; (wkb, srid, kind): STGeomFromWKB */
static int c_geo_text(sqlite3_value **a, mcdc_buf *o, char m[SIM_UDT_MSG]) {
    const char *s = arg_s(a[0]);
    return sim_geo_from_wkt(s, arg_n(a[0]), sqlite3_value_int64(a[1]), arg_geog(a[2]), o, m);
}
static int c_geo_wkb(sqlite3_value **a, mcdc_buf *o, char m[SIM_UDT_MSG]) {
    const uint8_t *p = arg_b(a[0]);
    return sim_geo_from_wkb(p, arg_n(a[0]), sqlite3_value_int64(a[1]), arg_geog(a[2]), o, m);
}
/* (lat, long, srid, kind): geography::Point; (x, y, srid, kind): geometry::Point */
static int c_geo_point(sqlite3_value **a, mcdc_buf *o, char m[SIM_UDT_MSG]) {
    return sim_geo_point(sqlite3_value_double(a[0]), sqlite3_value_double(a[1]), sqlite3_value_int64(a[2]), arg_geog(a[3]), o, m);
}
/* (v, kind): STAsText / ToString, STAsBinary */
static int c_geo_astext(sqlite3_value **a, mcdc_buf *o, char m[SIM_UDT_MSG]) {
    const uint8_t *p = arg_b(a[0]);
    return sim_geo_to_wkt(p, arg_n(a[0]), arg_geog(a[1]), o, m);
}
static int c_geo_asbinary(sqlite3_value **a, mcdc_buf *o, char m[SIM_UDT_MSG]) {
    const uint8_t *p = arg_b(a[0]);
    return sim_geo_to_wkb(p, arg_n(a[0]), arg_geog(a[1]), o, m);
}

static const conv C_HID_PARSE = {c_hid_parse, 1, false}, C_HID_TOSTRING = {c_hid_tostring, 1, true},
                  C_GEO_TEXT = {c_geo_text, 2, false}, C_GEO_WKB = {c_geo_wkb, 2, false},
                  C_GEO_POINT = {c_geo_point, 3, false}, C_GEO_ASTEXT = {c_geo_astext, 1, true},
                  C_GEO_ASBINARY = {c_geo_asbinary, 1, false};

/* ---- hierarchyid ------------------------------------------------------------ */
static void fn_hid_level(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    int lv = sim_hid_level(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]));
    if (lv < 0) {
        udt_error(ctx, 6522, "24000: SqlHierarchyId operation failed because HierarchyId object was constructed from an invalid binary string.");
        return;
    }
    sqlite3_result_int(ctx, lv);
}

static void fn_hid_ancestor(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return;
    }
    mcdc_buf b = {0};
    char msg[SIM_UDT_MSG];
    bool null;
    int rc = sim_hid_ancestor(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]),
                              sqlite3_value_int64(argv[1]), &b, &null, msg);
    if (rc) udt_error(ctx, rc, msg);
    else if (null) sqlite3_result_null(ctx);
    else result_buf_blob(ctx, &b);
    mcdc_buf_free(&b);
}

static void fn_hid_isdescendant(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return;
    }
    int r = sim_hid_is_descendant(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]),
                                  sqlite3_value_blob(argv[1]), (size_t)sqlite3_value_bytes(argv[1]));
    if (r < 0) {
        udt_error(ctx, 6522, "24000: SqlHierarchyId operation failed because HierarchyId object was constructed from an invalid binary string.");
        return;
    }
    sqlite3_result_int(ctx, r);
}

/* ---- geography / geometry --------------------------------------------------- */
static void fn_geo_srid(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    int32_t srid;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL ||
        !sim_geo_srid(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]), &srid)) {
        sqlite3_result_null(ctx);
        return;
    }
    sqlite3_result_int(ctx, srid);
}

/* sim_geo_coord(v, kind, which): 0 Lat / STY, 1 Long / STX. */
static void fn_geo_coord(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    double d = 0;
    bool null = true;
    char msg[SIM_UDT_MSG];
    int rc = sim_geo_coord(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]), arg_geog(argv[1]),
                           sqlite3_value_int(argv[2]), &d, &null, msg);
    if (rc) udt_error(ctx, rc, msg);
    else if (null) sqlite3_result_null(ctx);
    else sqlite3_result_double(ctx, d);
}

static void fn_geo_type(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    char name[32], msg[SIM_UDT_MSG];
    int rc = sim_geo_type_name(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]), arg_geog(argv[1]), name,
                               sizeof name, msg);
    if (rc) udt_error(ctx, rc, msg);
    else sqlite3_result_text(ctx, name, -1, SQLITE_TRANSIENT);
}

static void fn_geo_numpoints(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    int64_t n = 0;
    char msg[SIM_UDT_MSG];
    int rc = sim_geo_num_points(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]), arg_geog(argv[1]), &n, msg);
    if (rc) udt_error(ctx, rc, msg);
    else sqlite3_result_int64(ctx, n);
}

/* sim_udt_text(v, 'type'): the text a conversion of a hierarchyid,
 * geography or geometry to a string gives (ToString); other values pass. */
static void fn_udt_text(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const unsigned char *k = sqlite3_value_text(argv[1]);
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB || !k) { sqlite3_result_value(ctx, argv[0]); return; }
    mcdc_buf b = {0};
    char msg[SIM_UDT_MSG];
    const uint8_t *p = sqlite3_value_blob(argv[0]);
    size_t n = (size_t)sqlite3_value_bytes(argv[0]);
    int rc;
    if (mcdc_str_ieq((const char *)k, "hierarchyid")) rc = sim_hid_to_text(p, n, &b, msg);
    else rc = sim_geo_to_wkt(p, n, arg_geog(argv[1]), &b, msg);
    if (rc) udt_error(ctx, rc, msg);
    else result_buf_text(ctx, &b);
    mcdc_buf_free(&b);
}

/* ---- sql_variant --------------------------------------------------------------- */
static void hex_of(const uint8_t *p, size_t n, mcdc_buf *o) {
    static const char HX[] = "0123456789ABCDEF";
    for (size_t k = 0; k < n; k++) {
        mcdc_buf_append_byte(o, (uint8_t)HX[p[k] >> 4], NULL);
        mcdc_buf_append_byte(o, (uint8_t)HX[p[k] & 15], NULL);
    }
}

/* The value text of a base value v (already in base's storage form). */
static void variant_value_text(sqlite3_value *v, const sim_type *base, mcdc_buf *o) {
    switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER: mcdc_buf_printf(o, NULL, "%lld", (long long)sqlite3_value_int64(v)); break;
    case SQLITE_FLOAT: {
        char b[40];
        double d = sqlite3_value_double(v);
        snprintf(b, sizeof b, "%.17g", d);
        for (int p = 1; p <= 17; p++) { /* the shortest text that reads back the same */
            char t[40];
            snprintf(t, sizeof t, "%.*g", p, d);
            if (strtod(t, NULL) == d) { snprintf(b, sizeof b, "%s", t); break; }
        }
        mcdc_buf_append_str(o, b, NULL);
        break;
    }
    case SQLITE_BLOB: hex_of(sqlite3_value_blob(v), (size_t)sqlite3_value_bytes(v), o); break;
    default:
        if (base->id == SIM_T_BINARY || base->id == SIM_T_VARBINARY)
            hex_of(sqlite3_value_text(v), (size_t)sqlite3_value_bytes(v), o);
        else mcdc_buf_append(o, sqlite3_value_text(v), (size_t)sqlite3_value_bytes(v), NULL);
        break;
    }
}

static bool variant_base_ok(const sim_type *t) {
    /* what sql_variant cannot hold (its documentation's restrictions) */
    if ((t->id == SIM_T_VARCHAR || t->id == SIM_T_NVARCHAR || t->id == SIM_T_VARBINARY) && t->length < 0) return false;
    return t->id >= SIM_T_BIT && t->id <= SIM_T_UNIQUEIDENTIFIER;
}

void sim_variant_result(sqlite3_context *ctx, sqlite3_value *v, const sim_type *base_in) {
    int vt = sqlite3_value_type(v);
    if (vt == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    sim_type base, dummy;
    const char *val;
    size_t vn;
    if (vt == SQLITE_TEXT && sim_variant_split((const char *)sqlite3_value_text(v), (size_t)sqlite3_value_bytes(v), &dummy, &val, &vn)) {
        sqlite3_result_value(ctx, v); /* already a variant */
        return;
    }
    if (base_in) base = *base_in;
    else sim_variant_plain_type(v, &base);
    if (!variant_base_ok(&base)) {
        char tx[64], m[160];
        sim_type_format(&base, tx, sizeof tx);
        snprintf(m, sizeof m, "#206 Operand type clash: %s is incompatible with sql_variant", tx);
        sqlite3_result_error(ctx, m, -1);
        return;
    }
    mcdc_buf t = {0}, out = {0};
    variant_value_text(v, &base, &t);
    if (sim_variant_make(&out, &base, t.data ? (const char *)t.data : "", t.len, NULL) != MCDC_OK) sqlite3_result_error_nomem(ctx);
    else result_buf_text(ctx, &out);
    mcdc_buf_free(&t);
    mcdc_buf_free(&out);
}

/* sim_to_variant(v, 'base type' or NULL): v as a sql_variant of that base
 * type (NULL: the type its storage class gives). */
static void fn_to_variant(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    sim_type base;
    const unsigned char *tn = argc > 1 ? sqlite3_value_text(argv[1]) : NULL;
    bool typed = tn && sim_type_parse(&base, (const char *)tn, strlen((const char *)tn));
    sim_variant_result(ctx, argv[0], typed ? &base : NULL);
}

/* sim_variant_value(v): the base value in its storage form (integers as
 * INTEGER, floats as REAL, binary as BLOB, the rest as TEXT); a plain value
 * passes. */
static void fn_variant_value(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    sqlite3_value *v = argv[0];
    sim_type base;
    const char *val;
    size_t vn;
    if (sqlite3_value_type(v) != SQLITE_TEXT ||
        !sim_variant_split((const char *)sqlite3_value_text(v), (size_t)sqlite3_value_bytes(v), &base, &val, &vn)) {
        sqlite3_result_value(ctx, v);
        return;
    }
    char buf[64];
    switch (base.id) {
    case SIM_T_BIT: case SIM_T_TINYINT: case SIM_T_SMALLINT: case SIM_T_INT: case SIM_T_BIGINT:
        snprintf(buf, sizeof buf, "%.*s", (int)(vn < 63 ? vn : 63), val);
        sqlite3_result_int64(ctx, strtoll(buf, NULL, 10));
        return;
    case SIM_T_REAL: case SIM_T_FLOAT:
        snprintf(buf, sizeof buf, "%.*s", (int)(vn < 63 ? vn : 63), val);
        sqlite3_result_double(ctx, strtod(buf, NULL));
        return;
    case SIM_T_BINARY: case SIM_T_VARBINARY: {
        uint8_t *b = mcdc_malloc(vn / 2 + 1);
        if (!b) { sqlite3_result_error_nomem(ctx); return; }
        for (size_t k = 0; k + 1 < vn + 1 && 2 * k + 1 < vn; k++) {
            char h[3] = {val[2 * k], val[2 * k + 1], 0};
            b[k] = (uint8_t)strtoul(h, NULL, 16);
        }
        sqlite3_result_blob(ctx, b, (int)(vn / 2), SQLITE_TRANSIENT);
        mcdc_free(b);
        return;
    }
    default: sqlite3_result_text(ctx, val, (int)vn, SQLITE_TRANSIENT); return;
    }
}

/* SQL_VARIANT_PROPERTY(v, property), as its documentation defines the
 * properties: BaseType, Precision, Scale, TotalBytes, Collation, MaxLength. */
static void fn_variant_property(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    sqlite3_value *v = argv[0];
    const unsigned char *prop = sqlite3_value_text(argv[1]);
    if (sqlite3_value_type(v) == SQLITE_NULL || !prop) { sqlite3_result_null(ctx); return; }
    sim_type base;
    const char *val;
    size_t vn;
    if (sqlite3_value_type(v) != SQLITE_TEXT ||
        !sim_variant_split((const char *)sqlite3_value_text(v), (size_t)sqlite3_value_bytes(v), &base, &val, &vn)) {
        sim_variant_plain_type(v, &base);
        vn = (size_t)sqlite3_value_bytes(v);
    }
    char tn[64];
    sim_type_format(&base, tn, sizeof tn);
    char *paren = strchr(tn, '(');
    if (paren) *paren = 0;
    bool chars = base.id >= SIM_T_CHAR && base.id <= SIM_T_NVARCHAR;
    bool wide = base.id == SIM_T_NCHAR || base.id == SIM_T_NVARCHAR;
    int64_t prec = 0, scale = 0, maxlen = 0;
    switch (base.id) {
    case SIM_T_BIT: prec = 1; maxlen = 1; break;
    case SIM_T_TINYINT: prec = 3; maxlen = 1; break;
    case SIM_T_SMALLINT: prec = 5; maxlen = 2; break;
    case SIM_T_INT: prec = 10; maxlen = 4; break;
    case SIM_T_BIGINT: prec = 19; maxlen = 8; break;
    case SIM_T_REAL: prec = 24; maxlen = 4; break;
    case SIM_T_FLOAT: prec = 53; maxlen = 8; break;
    case SIM_T_DECIMAL:
        prec = base.precision;
        scale = base.scale;
        maxlen = prec <= 9 ? 5 : prec <= 19 ? 9 : prec <= 28 ? 13 : 17;
        break;
    case SIM_T_MONEY: prec = 19; scale = 4; maxlen = 8; break;
    case SIM_T_SMALLMONEY: prec = 10; scale = 4; maxlen = 4; break;
    case SIM_T_DATETIME: prec = 23; scale = 3; maxlen = 8; break;
    case SIM_T_SMALLDATETIME: prec = 16; maxlen = 4; break;
    case SIM_T_DATE: prec = 10; maxlen = 3; break;
    case SIM_T_TIME: prec = base.scale ? 9 + base.scale : 8; scale = base.scale; maxlen = base.scale <= 2 ? 3 : base.scale <= 4 ? 4 : 5; break;
    case SIM_T_DATETIME2:
        prec = base.scale ? 20 + base.scale : 19;
        scale = base.scale;
        maxlen = 3 + (base.scale <= 2 ? 3 : base.scale <= 4 ? 4 : 5);
        break;
    case SIM_T_DATETIMEOFFSET:
        prec = base.scale ? 27 + base.scale : 26;
        scale = base.scale;
        maxlen = 5 + (base.scale <= 2 ? 3 : base.scale <= 4 ? 4 : 5);
        break;
    case SIM_T_UNIQUEIDENTIFIER: maxlen = 16; break;
    default: maxlen = base.length > 0 ? (wide ? 2 * base.length : base.length) : 8000; break;
    }
    if (mcdc_str_ieq((const char *)prop, "BaseType")) sqlite3_result_text(ctx, tn, -1, SQLITE_TRANSIENT);
    else if (mcdc_str_ieq((const char *)prop, "Precision")) sqlite3_result_int64(ctx, prec);
    else if (mcdc_str_ieq((const char *)prop, "Scale")) sqlite3_result_int64(ctx, scale);
    else if (mcdc_str_ieq((const char *)prop, "MaxLength")) sqlite3_result_int64(ctx, maxlen);
    else if (mcdc_str_ieq((const char *)prop, "Collation")) {
        if (chars) sqlite3_result_text(ctx, "SQL_Latin1_General_CP1_CI_AS", -1, SQLITE_STATIC);
        else sqlite3_result_null(ctx);
    } else if (mcdc_str_ieq((const char *)prop, "TotalBytes")) {
        /* the base type's header (2 bytes and its properties) and the data */
        int64_t props = chars ? 7 : base.id == SIM_T_BINARY || base.id == SIM_T_VARBINARY || base.id == SIM_T_DECIMAL ? 2
                        : base.id == SIM_T_TIME || base.id == SIM_T_DATETIME2 || base.id == SIM_T_DATETIMEOFFSET ? 1 : 0;
        int64_t data = maxlen;
        if (chars) {
            size_t nchars = 0;
            for (size_t k = 0; k < vn; k++) nchars += ((uint8_t)val[k] & 0xC0) != 0x80;
            data = wide ? 2 * (int64_t)nchars : (int64_t)nchars;
        } else if (base.id == SIM_T_BINARY || base.id == SIM_T_VARBINARY) data = (int64_t)vn / 2;
        sqlite3_result_int64(ctx, 2 + props + data);
    } else sqlite3_result_null(ctx);
}

static int coll_variant(void *u, int na, const void *a, int nb, const void *b) {
    (void)u;
    return sim_variant_cmp(a, (size_t)na, b, (size_t)nb);
}

int sim_udt_register(sqlite3 *db) {
    static const struct {
        const char *n;
        int a;
        void (*fn)(sqlite3_context *, int, sqlite3_value **);
    } F[] = {
        {"sim_hid_level", 1, fn_hid_level},         {"sim_hid_ancestor", 2, fn_hid_ancestor},
        {"sim_hid_isdescendant", 2, fn_hid_isdescendant}, {"sim_geo_srid", 1, fn_geo_srid},
        {"sim_geo_coord", 3, fn_geo_coord},         {"sim_geo_type", 2, fn_geo_type},
        {"sim_geo_numpoints", 2, fn_geo_numpoints}, {"sim_udt_text", 2, fn_udt_text},
        {"sim_to_variant", 1, fn_to_variant},       {"sim_to_variant", 2, fn_to_variant},
        {"sim_variant_value", 1, fn_variant_value}, {"sim_variant_property", 2, fn_variant_property},
    };
    static const struct { const char *n; int a; const conv *c; } CF[] = {
        {"sim_hid_parse", 1, &C_HID_PARSE},   {"sim_hid_tostring", 1, &C_HID_TOSTRING}, {"sim_geo_text", 3, &C_GEO_TEXT},
        {"sim_geo_wkb", 3, &C_GEO_WKB},       {"sim_geo_point", 4, &C_GEO_POINT},       {"sim_geo_astext", 2, &C_GEO_ASTEXT},
        {"sim_geo_asbinary", 2, &C_GEO_ASBINARY},
    };
    for (size_t k = 0; k < sizeof F / sizeof F[0]; k++)
        if (sqlite3_create_function(db, F[k].n, F[k].a, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, F[k].fn, NULL, NULL) !=
            SQLITE_OK)
            return MCDC_E_IO;
    for (size_t k = 0; k < sizeof CF / sizeof CF[0]; k++)
        if (sqlite3_create_function(db, CF[k].n, CF[k].a, SQLITE_UTF8 | SQLITE_DETERMINISTIC, (void *)CF[k].c, fn_conv,
                                    NULL, NULL) != SQLITE_OK)
            return MCDC_E_IO;
    if (sqlite3_create_collation(db, SIM_VARIANT_COLLATION, SQLITE_UTF8, NULL, coll_variant) != SQLITE_OK) return MCDC_E_IO;
    return MCDC_OK;
}
