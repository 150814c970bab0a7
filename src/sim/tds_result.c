/*
 * tds_result.c - the result sink: engine callbacks -> TDS tokens. See
 * tds_result.h. The row path does no allocation and one switch per cell.
 */
#include "tds_result.h"

#include "sim_variant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    ENC_INT = 1,  /* nbytes 1/2/4/8; tinyint unsigned */
    ENC_BIT,
    ENC_FLT,      /* nbytes 4/8 */
    ENC_MONEY,    /* nbytes 4/8 */
    ENC_DECIMAL,  /* nbytes 5/9/13/17 */
    ENC_DATE,
    ENC_TIME,     /* nbytes = time part 3/4/5 */
    ENC_DT2,
    ENC_DTO,
    ENC_DATETIME, /* nbytes 4 (smalldatetime) / 8 */
    ENC_GUID,
    ENC_VARCHAR,  /* CP1252, USHORT length */
    ENC_NVARCHAR, /* UTF-16LE, USHORT length */
    ENC_VARBINARY,
    ENC_PLP_VARCHAR,
    ENC_PLP_NVARCHAR,
    ENC_PLP_VARBINARY,
    ENC_VARIANT,  /* SSVARIANT: LONG length, base type, properties, data */
    ENC_XML,      /* XMLTYPE: PLP UTF-16LE */
    ENC_UDT       /* CLR UDT: PLP bytes */
};

/* sql_variant's TYPE_INFO length: the most a value takes, base type
 * header included (its documentation: 8016 bytes). */
#define VARIANT_MAX_BYTES 8016


int sim_tds_result_init(sim_tds_result *r, sim_tds_out *out, mcdc_error *err) {
    (void)err;
    memset(r, 0, sizeof *r);
    r->out = out;
    return MCDC_OK;
}

void sim_tds_result_free(sim_tds_result *r) {
    if (!r) return;
    mcdc_free(r->cols);
    r->cols = NULL;
    r->ncols = r->cols_cap = 0;
}

/* ---- DONE bookkeeping -------------------------------------------------------- */
static int flush_pending(sim_tds_result *r, bool more) {
    if (!r->pending) return 0;
    r->pending = false;
    uint16_t st = (uint16_t)(r->pend_status | (more ? TDS_DONE_MORE : 0));
    return sim_tds_tok_done(r->out, r->pend_tok, st, TDS_CURCMD_SELECT, r->pend_rows);
}

void sim_tds_result_begin(sim_tds_result *r, bool in_rpc, bool begin_message) {
    if (begin_message) sim_tds_out_begin(r->out, TDS_PKT_REPLY);
    r->in_rpc = in_rpc;
    r->pending = false;
    r->any_error = false;
    r->got_status = false;
    r->has_handle = false;
    r->handle_sent = false;
    r->rv_ordinal_shift = 0;
    r->fatal = false;
    r->attention = false;
    r->stopped = false;
    r->ncols = 0;
}

int sim_tds_result_end_batch(sim_tds_result *r) {
    if (r->pending && r->pend_tok == TDS_TOK_DONE) {
        if (flush_pending(r, false)) return -1;
    } else {
        if (flush_pending(r, true)) return -1;
        uint16_t st = (uint16_t)((r->any_error ? TDS_DONE_ERROR : 0) |
                                 (r->in_xact ? TDS_DONE_INXACT : 0));
        if (sim_tds_tok_done(r->out, TDS_TOK_DONE, st, 0, 0)) return -1;
    }
    return sim_tds_out_end(r->out);
}

static int send_handle(sim_tds_result *r);

int sim_tds_result_end_rpc(sim_tds_result *r, bool last) {
    if (flush_pending(r, true)) return -1;
    if (!r->got_status && sim_tds_tok_returnstatus(r->out, 0)) return -1;
    if (send_handle(r)) return -1;
    uint16_t st = (uint16_t)((last ? 0 : TDS_DONE_MORE) | (r->any_error ? TDS_DONE_ERROR : 0) |
                             (r->in_xact ? TDS_DONE_INXACT : 0));
    if (sim_tds_tok_done(r->out, TDS_TOK_DONEPROC, st, 0, 0)) return -1;
    return last ? sim_tds_out_end(r->out) : 0;
}

int sim_tds_result_attention_ack(sim_tds_result *r) {
    r->pending = false;
    if (sim_tds_tok_done(r->out, TDS_TOK_DONE, TDS_DONE_ATTN, 0, 0)) return -1;
    return sim_tds_out_end(r->out);
}

/* ---- COLMETADATA -------------------------------------------------------------- */
static uint8_t decimal_bytes(int precision) {
    return precision <= 9 ? 5 : precision <= 19 ? 9 : precision <= 28 ? 13 : 17;
}
static uint8_t time_bytes(int scale) { return scale <= 2 ? 3 : scale <= 4 ? 4 : 5; }

void sim_tds_col_plan(sim_tds_col_enc *e, const sim_column *c) {
    memset(e, 0, sizeof *e);
    const sim_type *t = &c->type;
    e->nullable = c->nullable;
    e->type_id = (uint16_t)t->id;
    bool fx = !c->nullable;
    switch (t->id) {
    case SIM_T_BIT: e->kind = ENC_BIT; e->nbytes = 1; e->fixed = fx; break;
    case SIM_T_TINYINT: e->kind = ENC_INT; e->nbytes = 1; e->fixed = fx; break;
    case SIM_T_SMALLINT: e->kind = ENC_INT; e->nbytes = 2; e->fixed = fx; break;
    case SIM_T_INT: e->kind = ENC_INT; e->nbytes = 4; e->fixed = fx; break;
    case SIM_T_BIGINT: e->kind = ENC_INT; e->nbytes = 8; e->fixed = fx; break;
    case SIM_T_REAL: e->kind = ENC_FLT; e->nbytes = 4; e->fixed = fx; break;
    case SIM_T_FLOAT: e->kind = ENC_FLT; e->nbytes = 8; e->fixed = fx; break;
    case SIM_T_MONEY: e->kind = ENC_MONEY; e->nbytes = 8; e->fixed = fx; e->scale = 4; break;
    case SIM_T_SMALLMONEY: e->kind = ENC_MONEY; e->nbytes = 4; e->fixed = fx; e->scale = 4; break;
    case SIM_T_DECIMAL: {
        int p = t->precision >= 1 && t->precision <= 38 ? t->precision : 18;
        int s = t->scale <= p ? t->scale : 0;
        e->kind = ENC_DECIMAL;
        e->precision = (uint8_t)p;
        e->scale = (uint8_t)s;
        e->nbytes = decimal_bytes(p);
        break;
    }
    case SIM_T_DATE: e->kind = ENC_DATE; e->nbytes = 3; break;
    case SIM_T_TIME:
    case SIM_T_DATETIME2:
    case SIM_T_DATETIMEOFFSET:
        e->kind = t->id == SIM_T_TIME ? ENC_TIME : t->id == SIM_T_DATETIME2 ? ENC_DT2 : ENC_DTO;
        e->scale = t->scale <= 7 ? t->scale : 7;
        e->nbytes = time_bytes(e->scale);
        break;
    case SIM_T_DATETIME: e->kind = ENC_DATETIME; e->nbytes = 8; e->fixed = fx; break;
    case SIM_T_SMALLDATETIME: e->kind = ENC_DATETIME; e->nbytes = 4; e->fixed = fx; break;
    case SIM_T_UNIQUEIDENTIFIER: e->kind = ENC_GUID; e->nbytes = 16; break;
    case SIM_T_CHAR:
    case SIM_T_VARCHAR:
    case SIM_T_BINARY:
    case SIM_T_VARBINARY: {
        bool bin = t->id == SIM_T_BINARY || t->id == SIM_T_VARBINARY;
        bool fixlen = t->id == SIM_T_CHAR || t->id == SIM_T_BINARY;
        int32_t n = t->length;
        if (n == -1 || n > 8000) {
            e->kind = bin ? ENC_PLP_VARBINARY : ENC_PLP_VARCHAR;
            e->max_bytes = -1;
        } else {
            if (n <= 0) n = fixlen ? 1 : 8000;
            e->kind = bin ? ENC_VARBINARY : ENC_VARCHAR;
            e->max_bytes = n;
            e->pad_bytes = fixlen ? n : 0;
        }
        break;
    }
    case SIM_T_SQL_VARIANT: e->kind = ENC_VARIANT; e->max_bytes = VARIANT_MAX_BYTES; break;
    case SIM_T_NCHAR:
    case SIM_T_NVARCHAR: {
        int32_t n = t->length;
        if (n == -1 || n > 4000) {
            e->kind = ENC_PLP_NVARCHAR;
            e->max_bytes = -1;
        } else {
            if (n <= 0) n = t->id == SIM_T_NCHAR ? 1 : 4000;
            e->kind = ENC_NVARCHAR;
            e->max_bytes = 2 * n;
            e->pad_bytes = t->id == SIM_T_NCHAR ? 2 * n : 0;
        }
        break;
    }
    case SIM_T_XML: e->kind = ENC_XML; e->max_bytes = -1; break;
    case SIM_T_HIERARCHYID: e->kind = ENC_UDT; e->max_bytes = SIM_HID_BYTES_MAX; break;
    case SIM_T_GEOGRAPHY: case SIM_T_GEOMETRY: e->kind = ENC_UDT; e->max_bytes = -1; break;
    default: /* unknown: serve as nvarchar(4000) text */
        e->kind = ENC_NVARCHAR;
        e->max_bytes = 8000;
        break;
    }
    switch (e->kind) {
    case ENC_VARCHAR: case ENC_NVARCHAR: case ENC_VARBINARY: e->null_bytes = 2; break;
    case ENC_PLP_VARCHAR: case ENC_PLP_NVARCHAR: case ENC_PLP_VARBINARY: case ENC_XML: case ENC_UDT:
        e->null_bytes = 8;
        break;
    case ENC_VARIANT: e->null_bytes = 4; break;
    default: e->null_bytes = e->fixed ? 0 : 1; break;
    }
}

/* B_VARCHAR (bvar) or US_VARCHAR of UTF-8 text s, as UTF-16LE. */
static int out_name(sim_tds_out *o, const char *s, bool bvar) {
    size_t n = strlen(s), units = sim_tds_utf8_utf16_units((const uint8_t *)s, n);
    if (bvar && units > 255) units = 255;
    int rc = bvar ? sim_tds_out_u8(o, (uint8_t)units) : sim_tds_out_u16(o, (uint16_t)units);
    return rc ? rc : sim_tds_out_utf16(o, (const uint8_t *)s, n, units);
}

/* UDT_INFO of SQL Server's CLR types (MS-TDS 2.2.5.5.5.2): max bytes, the
 * database, schema "sys", the type and its assembly-qualified name
 * (Microsoft.SqlServer.Types 11.0, what SQL Server 2012 and later name). */
static int write_udt_info(sim_tds_out *o, const sim_tds_col_enc *e, const char *db) {
    const char *type = e->type_id == SIM_T_HIERARCHYID ? "hierarchyid" : e->type_id == SIM_T_GEOGRAPHY ? "geography" : "geometry";
    const char *cls = e->type_id == SIM_T_HIERARCHYID ? "SqlHierarchyId" : e->type_id == SIM_T_GEOGRAPHY ? "SqlGeography" : "SqlGeometry";
    char aqn[192];
    snprintf(aqn, sizeof aqn,
             "Microsoft.SqlServer.Types.%s, Microsoft.SqlServer.Types, Version=11.0.0.0, Culture=neutral, PublicKeyToken=89845dcd8080cc91",
             cls);
    uint16_t max = e->max_bytes < 0 ? 0xFFFF : (uint16_t)e->max_bytes;
    if (sim_tds_out_u8(o, TDS_UDT) || sim_tds_out_u16(o, max) || out_name(o, db && db[0] ? db : "master", true) ||
        out_name(o, "sys", true) || out_name(o, type, true))
        return -1;
    return out_name(o, aqn, false);
}

static int write_type_info(sim_tds_out *o, const sim_tds_col_enc *e, const char *db) {
    uint8_t b[16];
    size_t n = 0;
    switch (e->kind) {
    case ENC_VARIANT:
        b[n++] = TDS_SSVARIANT;
        b[n++] = (uint8_t)VARIANT_MAX_BYTES;
        b[n++] = (uint8_t)(VARIANT_MAX_BYTES >> 8);
        b[n++] = 0;
        b[n++] = 0;
        break;
    case ENC_XML: /* no schema collection */
        b[n++] = TDS_XML;
        b[n++] = 0;
        break;
    case ENC_UDT: return write_udt_info(o, e, db);
    case ENC_INT:
        if (e->fixed)
            b[n++] = e->nbytes == 1 ? TDS_INT1 : e->nbytes == 2 ? TDS_INT2 : e->nbytes == 4 ? TDS_INT4 : TDS_INT8;
        else {
            b[n++] = TDS_INTN;
            b[n++] = e->nbytes;
        }
        break;
    case ENC_BIT:
        if (e->fixed) b[n++] = TDS_BIT;
        else { b[n++] = TDS_BITN; b[n++] = 1; }
        break;
    case ENC_FLT:
        if (e->fixed) b[n++] = e->nbytes == 4 ? TDS_FLT4 : TDS_FLT8;
        else { b[n++] = TDS_FLTN; b[n++] = e->nbytes; }
        break;
    case ENC_MONEY:
        if (e->fixed) b[n++] = e->nbytes == 4 ? TDS_MONEY4 : TDS_MONEY;
        else { b[n++] = TDS_MONEYN; b[n++] = e->nbytes; }
        break;
    case ENC_DATETIME:
        if (e->fixed) b[n++] = e->nbytes == 4 ? TDS_DATETIM4 : TDS_DATETIME;
        else { b[n++] = TDS_DATETIMN; b[n++] = e->nbytes; }
        break;
    case ENC_DECIMAL:
        b[n++] = TDS_DECIMALN;
        b[n++] = e->nbytes;
        b[n++] = e->precision;
        b[n++] = e->scale;
        break;
    case ENC_DATE: b[n++] = TDS_DATEN; break;
    case ENC_TIME: b[n++] = TDS_TIMEN; b[n++] = e->scale; break;
    case ENC_DT2: b[n++] = TDS_DATETIME2N; b[n++] = e->scale; break;
    case ENC_DTO: b[n++] = TDS_DATETIMEOFFSETN; b[n++] = e->scale; break;
    case ENC_GUID: b[n++] = TDS_GUID; b[n++] = 16; break;
    default: {
        bool chars = e->kind == ENC_VARCHAR || e->kind == ENC_PLP_VARCHAR ||
                     e->kind == ENC_NVARCHAR || e->kind == ENC_PLP_NVARCHAR;
        bool fixlen = e->pad_bytes > 0;
        switch (e->kind) {
        case ENC_VARCHAR: case ENC_PLP_VARCHAR: b[n++] = fixlen ? TDS_BIGCHAR : TDS_BIGVARCHAR; break;
        case ENC_NVARCHAR: case ENC_PLP_NVARCHAR: b[n++] = fixlen ? TDS_NCHAR : TDS_NVARCHAR; break;
        default: b[n++] = fixlen ? TDS_BIGBINARY : TDS_BIGVARBINARY; break;
        }
        uint16_t max = e->max_bytes < 0 ? 0xFFFF : (uint16_t)e->max_bytes;
        b[n++] = (uint8_t)max;
        b[n++] = (uint8_t)(max >> 8);
        if (chars) {
            memcpy(b + n, sim_tds_collation_default, 5);
            n += 5;
        }
    }
    }
    return sim_tds_out_bytes(o, b, n);
}

int sim_tds_result_columns(sim_tds_result *r, const sim_column *cols, int ncols) {
    if (ncols < 1 || ncols > MCDC_COLUMNS_MAX) {
        mcdc_log(MCDC_LOG_ERROR, "tds: result set with %d columns (1..%d allowed)", ncols,
                 MCDC_COLUMNS_MAX);
        return 1;
    }
    if (ncols > r->cols_cap) {
        sim_tds_col_enc *nc = mcdc_realloc(r->cols, (size_t)ncols * sizeof *nc);
        if (!nc) return 1;
        r->cols = nc;
        r->cols_cap = ncols;
    }
    if (flush_pending(r, true)) return 1;
    r->ncols = ncols;
    r->null_sum_ready = false;
    sim_tds_out *o = r->out;
    if (sim_tds_out_u8(o, TDS_TOK_COLMETADATA) || sim_tds_out_u16(o, (uint16_t)ncols)) return 1;
    for (int i = 0; i < ncols; i++) {
        sim_tds_col_enc *e = &r->cols[i];
        sim_tds_col_plan(e, &cols[i]);
        if (sim_tds_out_u32(o, 0) || sim_tds_out_u16(o, e->nullable ? 0x0009 : 0x0008)) return 1;
        if (write_type_info(o, e, r->sess ? sim_session_database(r->sess) : NULL)) return 1;
        const char *name = cols[i].name ? cols[i].name : "";
        size_t nn = strlen(name);
        size_t units = sim_tds_utf8_utf16_units((const uint8_t *)name, nn);
        if (units > 128) units = 128;
        if (sim_tds_out_u8(o, (uint8_t)units) || sim_tds_out_utf16(o, (const uint8_t *)name, nn, units))
            return 1;
    }
    return 0;
}

/* ---- value conversion ------------------------------------------------------------- */
static bool text_i64(const uint8_t *p, size_t n, int64_t *out) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    if (mcdc_parse_i64(buf, out) == MCDC_OK) return true;
    char *end;
    double d = strtod(buf, &end);
    if (*end != 0 || !(d >= -9.2233720368547758e18 && d < 9.2233720368547758e18)) return false;
    *out = (int64_t)d;
    return true;
}

static bool val_i64(const sim_value *v, int64_t *out) {
    switch (v->kind) {
    case SIM_V_INT: *out = v->i; return true;
    case SIM_V_REAL:
        if (!(v->f >= -9.2233720368547758e18 && v->f < 9.2233720368547758e18)) return false;
        *out = (int64_t)v->f;
        return true;
    case SIM_V_TEXT: return text_i64(v->p, v->n, out);
    default: return false;
    }
}

static bool val_f64(const sim_value *v, double *out) {
    switch (v->kind) {
    case SIM_V_INT: *out = (double)v->i; return true;
    case SIM_V_REAL: *out = v->f; return true;
    case SIM_V_TEXT: {
        char buf[64];
        if (v->n == 0 || v->n >= sizeof buf) return false;
        memcpy(buf, v->p, v->n);
        buf[v->n] = 0;
        char *end;
        *out = strtod(buf, &end);
        return *end == 0;
    }
    default: return false;
    }
}

/* Scaled decimal from any value kind. */
static bool val_decimal(const sim_value *v, int precision, int scale, bool *neg,
                        uint32_t mag[4]) {
    char buf[80];
    switch (v->kind) {
    case SIM_V_TEXT: return sim_tds_decimal_parse(v->p, v->n, precision, scale, neg, mag);
    case SIM_V_INT: {
        int n = snprintf(buf, sizeof buf, "%lld", (long long)v->i);
        return sim_tds_decimal_parse((const uint8_t *)buf, (size_t)n, precision, scale, neg, mag);
    }
    case SIM_V_REAL: {
        if (!isfinite(v->f) || fabs(v->f) >= 1e38) return false;
        int n = snprintf(buf, sizeof buf, "%.*f", scale + 1 > 17 ? 17 : scale + 1, v->f);
        if (n <= 0 || (size_t)n >= sizeof buf) return false;
        return sim_tds_decimal_parse((const uint8_t *)buf, (size_t)n, precision, scale, neg, mag);
    }
    default: return false;
    }
}

static bool val_dt(const sim_value *v, sim_tds_dt *dt) {
    if (v->kind != SIM_V_TEXT) return false;
    return sim_tds_dt_parse(dt, v->p, v->n);
}

/* Rounds a 100-ns time to `scale` digits; carries into the day. */
static void round_time(sim_tds_dt *dt, int scale, uint64_t *units) {
    static const int64_t div[8] = {10000000, 1000000, 100000, 10000, 1000, 100, 10, 1};
    int64_t d = div[scale];
    int64_t u = (dt->time_100ns + d / 2) / d;
    int64_t per_day = TDS_100NS_PER_DAY / d;
    if (u >= per_day) {
        u -= per_day;
        dt->days++;
    }
    *units = (uint64_t)u;
}

static void put_le(uint8_t *b, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
}

/* Text form for character columns of a non-text value; tmp holds 64 bytes. */
static bool val_text(const sim_value *v, char *tmp, const uint8_t **p, size_t *n) {
    switch (v->kind) {
    case SIM_V_TEXT:
    case SIM_V_BLOB: *p = v->p; *n = v->n; return true;
    case SIM_V_INT: *n = (size_t)snprintf(tmp, 64, "%lld", (long long)v->i); *p = (const uint8_t *)tmp; return true;
    case SIM_V_REAL: *n = (size_t)snprintf(tmp, 64, "%.17g", v->f); *p = (const uint8_t *)tmp; return true;
    default: return false;
    }
}

static void conv_warn(sim_tds_result *r, const sim_tds_col_enc *e, int col) {
    if (r->conversion_warnings++ == 0)
        mcdc_log(MCDC_LOG_WARN,
                 "tds: result column %d (type %d) got a value it cannot represent; sent as NULL",
                 col + 1, e->type_id);
}

/* Writes the NULL (or, for NOT NULL fixed types, zero) form of a column. */
static int put_null(sim_tds_out *o, const sim_tds_col_enc *e) {
    static const uint8_t zeros[8] = {0};
    switch (e->kind) {
    case ENC_VARCHAR: case ENC_NVARCHAR: case ENC_VARBINARY: return sim_tds_out_u16(o, 0xFFFF);
    case ENC_PLP_VARCHAR: case ENC_PLP_NVARCHAR: case ENC_PLP_VARBINARY: case ENC_XML: case ENC_UDT:
        return sim_tds_out_u64(o, TDS_PLP_NULL);
    case ENC_VARIANT: return sim_tds_out_u32(o, 0);
    default:
        if (e->fixed) return sim_tds_out_bytes(o, zeros, e->nbytes);
        return sim_tds_out_u8(o, 0);
    }
}

/* The value bytes of a fixed-size kind (no length prefix) into b (32
 * bytes); false when v cannot be represented. */
static bool fixed_bytes(const sim_tds_col_enc *e, const sim_value *v, uint8_t *b, size_t *np) {
    size_t n = 0;
    switch (e->kind) {
    case ENC_INT:
    case ENC_BIT: {
        int64_t i;
        if (e->kind == ENC_BIT && v->kind == SIM_V_TEXT &&
            (v->n == 4 || v->n == 5) && (mcdc_str_nieq((const char *)v->p, "true", v->n) ||
                                        mcdc_str_nieq((const char *)v->p, "false", v->n)))
            i = v->n == 4; /* SQL Server converts 'TRUE'/'FALSE' to bit */
        else if (!val_i64(v, &i))
            return false;
        if (e->kind == ENC_BIT) i = i != 0;
        put_le(b + n, (uint64_t)i, e->nbytes);
        n += e->nbytes;
        break;
    }
    case ENC_FLT: {
        double d;
        if (!val_f64(v, &d)) return false;
        if (e->nbytes == 4) {
            float f = (float)d;
            uint32_t u;
            memcpy(&u, &f, 4);
            put_le(b + n, u, 4);
        } else {
            uint64_t u;
            memcpy(&u, &d, 8);
            put_le(b + n, u, 8);
        }
        n += e->nbytes;
        break;
    }
    case ENC_MONEY: {
        bool neg;
        uint32_t mag[4];
        if (!val_decimal(v, 19, 4, &neg, mag) || mag[2] || mag[3]) return false;
        uint64_t m = (uint64_t)mag[0] | ((uint64_t)mag[1] << 32);
        if (m > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return false;
        int64_t s = neg ? (int64_t)(0 - m) : (int64_t)m;
        if (e->nbytes == 8) {
            put_le(b + n, (uint64_t)s >> 32, 4);
            put_le(b + n + 4, (uint64_t)s & 0xFFFFFFFFu, 4);
        } else {
            if (s < INT32_MIN || s > INT32_MAX) return false;
            put_le(b + n, (uint64_t)s, 4);
        }
        n += e->nbytes;
        break;
    }
    case ENC_DECIMAL: {
        bool neg;
        uint32_t mag[4];
        if (!val_decimal(v, e->precision, e->scale, &neg, mag)) return false;
        b[n++] = neg ? 0 : 1;
        for (int k = 0; k < (e->nbytes - 1) / 4; k++) {
            put_le(b + n, mag[k], 4);
            n += 4;
        }
        break;
    }
    case ENC_DATE: {
        sim_tds_dt dt;
        if (!val_dt(v, &dt) || !dt.has_date) return false;
        put_le(b + n, (uint64_t)dt.days, 3);
        n += 3;
        break;
    }
    case ENC_TIME:
    case ENC_DT2:
    case ENC_DTO: {
        sim_tds_dt dt;
        if (!val_dt(v, &dt)) return false;
        if (e->kind == ENC_TIME && !dt.has_time) return false;
        if (e->kind != ENC_TIME && !dt.has_date) /* a time alone is on 1900-01-01 */
            dt.days = sim_tds_days_from_civil0001(1900, 1, 1);
        /* a date alone is at midnight: tds_dt_parse left time_100ns 0 */
        if (e->kind == ENC_DTO) { /* the wire holds UTC */
            dt.time_100ns -= (int64_t)dt.offset_min * 600000000LL;
            while (dt.time_100ns < 0) { dt.time_100ns += TDS_100NS_PER_DAY; dt.days--; }
            while (dt.time_100ns >= TDS_100NS_PER_DAY) { dt.time_100ns -= TDS_100NS_PER_DAY; dt.days++; }
        }
        uint64_t units;
        round_time(&dt, e->scale, &units);
        if (dt.days < 0 || dt.days > 3652058) return false;
        put_le(b + n, units, e->nbytes);
        n += e->nbytes;
        if (e->kind != ENC_TIME) {
            put_le(b + n, (uint64_t)dt.days, 3);
            n += 3;
        }
        if (e->kind == ENC_DTO) {
            put_le(b + n, (uint64_t)(int64_t)dt.offset_min, 2);
            n += 2;
        }
        break;
    }
    case ENC_DATETIME: {
        sim_tds_dt dt;
        if (!val_dt(v, &dt)) return false;
        if (!dt.has_date) dt.days = sim_tds_days_from_civil0001(1900, 1, 1);
        int64_t days = dt.days - sim_tds_days_from_civil0001(1900, 1, 1);
        if (e->nbytes == 8) {
            int64_t ticks = (dt.time_100ns * 3 + 50000) / 100000;
            if (ticks >= 300LL * 86400) { ticks = 0; days++; }
            if (days < -53690 || days > 2958463) return false;
            put_le(b + n, (uint64_t)days, 4);
            put_le(b + n + 4, (uint64_t)ticks, 4);
        } else {
            int64_t mins = dt.time_100ns / 600000000LL;
            if (dt.time_100ns % 600000000LL >= 300000000LL) mins++;
            if (mins >= 1440) { mins = 0; days++; }
            if (days < 0 || days > 65535) return false;
            put_le(b + n, (uint64_t)days, 2);
            put_le(b + n + 2, (uint64_t)mins, 2);
        }
        n += e->nbytes;
        break;
    }
    case ENC_GUID: {
        if (v->kind == SIM_V_BLOB && v->n == 16) memcpy(b, v->p, 16);
        else if (v->kind != SIM_V_TEXT || !sim_tds_guid_parse(b, v->p, v->n)) return false;
        n = 16;
        break;
    }
    default: return false;
    }
    *np = n;
    return true;
}

static int encode_variant(sim_tds_result *r, const sim_tds_col_enc *e, const sim_value *v, int col);

static int encode_value(sim_tds_result *r, const sim_tds_col_enc *e, const sim_value *v, int col) {
    sim_tds_out *o = r->out;
    uint8_t b[40];
    size_t n = 0;
    if (v->kind == SIM_V_NULL) return put_null(o, e);
    switch (e->kind) {
    case ENC_INT: case ENC_BIT: case ENC_FLT: case ENC_MONEY: case ENC_DECIMAL: case ENC_DATE: case ENC_TIME:
    case ENC_DT2: case ENC_DTO: case ENC_DATETIME: case ENC_GUID: {
        size_t vn;
        bool lenbyte = !e->fixed || e->kind == ENC_DECIMAL || e->kind == ENC_DATE || e->kind == ENC_TIME ||
                       e->kind == ENC_DT2 || e->kind == ENC_DTO || e->kind == ENC_GUID;
        if (!fixed_bytes(e, v, b + 1, &vn)) goto bad;
        b[0] = (uint8_t)vn;
        n = vn + (lenbyte ? 1 : 0);
        return sim_tds_out_bytes(o, lenbyte ? b : b + 1, n);
    }
    case ENC_VARIANT: return encode_variant(r, e, v, col);
    case ENC_VARCHAR:
    case ENC_PLP_VARCHAR: {
        char tmp[64];
        const uint8_t *p;
        size_t len;
        if (!val_text(v, tmp, &p, &len)) goto bad;
        size_t cl = sim_tds_utf8_cp1252_len(p, len);
        if (e->kind == ENC_VARCHAR) {
            if (cl > (size_t)e->max_bytes) cl = (size_t)e->max_bytes;
            size_t total = e->pad_bytes ? (size_t)e->pad_bytes : cl;
            if (sim_tds_out_u16(o, (uint16_t)total) || sim_tds_out_cp1252(o, p, len, cl)) return -1;
            for (size_t k = cl; k < total; k++)
                if (sim_tds_out_u8(o, ' ')) return -1;
            return 0;
        }
        if (cl > MCDC_VALUE_BYTES_MAX) cl = MCDC_VALUE_BYTES_MAX;
        if (sim_tds_out_u64(o, cl)) return -1;
        if (cl && (sim_tds_out_u32(o, (uint32_t)cl) || sim_tds_out_cp1252(o, p, len, cl))) return -1;
        return sim_tds_out_u32(o, 0);
    }
    case ENC_NVARCHAR:
    case ENC_PLP_NVARCHAR:
    case ENC_XML: { /* xml: UTF-16LE text in PLP chunks, as nvarchar(max) */
        char tmp[64];
        const uint8_t *p;
        size_t len;
        if (!val_text(v, tmp, &p, &len)) goto bad;
        uint8_t hi = 0;
        for (size_t k = 0; k < len; k++) hi |= p[k];
        bool ascii = hi < 0x80;
        size_t units = ascii ? len : sim_tds_utf8_utf16_units(p, len);
        if (e->kind == ENC_NVARCHAR) {
            size_t maxu = (size_t)e->max_bytes / 2;
            if (units > maxu) units = maxu;
            size_t total = e->pad_bytes ? (size_t)e->pad_bytes : 2 * units;
            if (ascii && o->size - o->pos >= 2 + 2 * units) {
                /* the common case: ASCII that fits, widened in place */
                uint8_t *d = o->buf + o->pos;
                d[0] = (uint8_t)total;
                d[1] = (uint8_t)(total >> 8);
                for (size_t k = 0; k < units; k++) {
                    d[2 + 2 * k] = p[k];
                    d[3 + 2 * k] = 0;
                }
                o->pos += 2 + 2 * units;
            } else if (sim_tds_out_u16(o, (uint16_t)total) || sim_tds_out_utf16(o, p, len, units)) {
                return -1;
            }
            for (size_t k = 2 * units; k < total; k += 2)
                if (sim_tds_out_u16(o, ' ')) return -1;
            return 0;
        }
        if (units > MCDC_VALUE_BYTES_MAX / 2) units = MCDC_VALUE_BYTES_MAX / 2;
        if (sim_tds_out_u64(o, 2 * (uint64_t)units)) return -1;
        if (units && (sim_tds_out_u32(o, (uint32_t)(2 * units)) || sim_tds_out_utf16(o, p, len, units)))
            return -1;
        return sim_tds_out_u32(o, 0);
    }
    case ENC_VARBINARY:
    case ENC_PLP_VARBINARY:
    case ENC_UDT: { /* a CLR type's serialization in PLP chunks, as varbinary(max) */
        char tmp[64];
        const uint8_t *p;
        size_t len;
        if (v->kind == SIM_V_BLOB || v->kind == SIM_V_TEXT) {
            p = v->p;
            len = v->n;
        } else if (v->kind == SIM_V_INT) {
            uint8_t *t = (uint8_t *)tmp;
            for (int k = 0; k < 8; k++) t[k] = (uint8_t)((uint64_t)v->i >> (56 - 8 * k));
            p = t;
            len = 8;
        } else {
            goto bad;
        }
        if (e->kind == ENC_VARBINARY) {
            if (len > (size_t)e->max_bytes) len = (size_t)e->max_bytes;
            size_t total = e->pad_bytes ? (size_t)e->pad_bytes : len;
            if (sim_tds_out_u16(o, (uint16_t)total) || sim_tds_out_bytes(o, p, len)) return -1;
            for (size_t k = len; k < total; k++)
                if (sim_tds_out_u8(o, 0)) return -1;
            return 0;
        }
        if (len > MCDC_VALUE_BYTES_MAX) len = MCDC_VALUE_BYTES_MAX;
        if (sim_tds_out_u64(o, len)) return -1;
        if (len && (sim_tds_out_u32(o, (uint32_t)len) || sim_tds_out_bytes(o, p, len))) return -1;
        return sim_tds_out_u32(o, 0);
    }
    default: MCDC_UNREACHABLE();
    }
bad:
    conv_warn(r, e, col);
    return put_null(o, e);
}

/* A sql_variant value (MS-TDS 2.2.5.5.4): LONG length, the base type's
 * byte, the count of property bytes, its properties (scale; precision and
 * scale; max length; collation and max length), then the value as the base
 * type's fixed form or bytes. The base type comes from the variant form
 * (sim_variant.h); a plain value is an int/bigint, float, nvarchar or
 * varbinary. */
static int encode_variant(sim_tds_result *r, const sim_tds_col_enc *e, const sim_value *v, int col) {
    sim_tds_out *o = r->out;
    sim_type bt;
    sim_value bv = *v;
    uint8_t *bin = NULL;
    int rc = 0;
    memset(&bt, 0, sizeof bt);
    const char *val;
    size_t vn;
    if (v->kind == SIM_V_TEXT && sim_variant_split((const char *)v->p, v->n, &bt, &val, &vn)) {
        bv.kind = SIM_V_TEXT;
        bv.p = (const uint8_t *)val;
        bv.n = vn;
        if (bt.id == SIM_T_BINARY || bt.id == SIM_T_VARBINARY) { /* hex text: the bytes */
            bin = mcdc_malloc(vn / 2 + 1);
            if (!bin) goto bad;
            for (size_t k = 0; 2 * k + 1 < vn; k++) {
                int hi = val[2 * k] <= '9' ? val[2 * k] - '0' : (val[2 * k] | 0x20) - 'a' + 10;
                int lo = val[2 * k + 1] <= '9' ? val[2 * k + 1] - '0' : (val[2 * k + 1] | 0x20) - 'a' + 10;
                bin[k] = (uint8_t)(hi * 16 + lo);
            }
            bv.kind = SIM_V_BLOB;
            bv.p = bin;
            bv.n = vn / 2;
        }
    } else if (v->kind == SIM_V_INT) {
        bt.id = v->i >= INT32_MIN && v->i <= INT32_MAX ? SIM_T_INT : SIM_T_BIGINT;
    } else if (v->kind == SIM_V_REAL) {
        bt.id = SIM_T_FLOAT;
    } else if (v->kind == SIM_V_BLOB) {
        bt.id = SIM_T_VARBINARY;
        bt.length = v->n ? (int32_t)(v->n > 8000 ? 8000 : v->n) : 1;
    } else {
        bt.id = SIM_T_NVARCHAR;
        bt.length = 4000;
    }
    sim_column bc = {"", bt, true};
    sim_tds_col_enc be;
    sim_tds_col_plan(&be, &bc);
    uint8_t head[16], data[40];
    size_t np = 0, dn = 0;
    const uint8_t *sp = NULL;
    size_t sn = 0, slen = 0; /* streamed data: source bytes, wire length */
    int stream = 0;          /* 1 cp1252, 2 UTF-16LE, 3 bytes */
    switch (be.kind) {
    case ENC_INT:
        head[0] = be.nbytes == 1 ? TDS_INT1 : be.nbytes == 2 ? TDS_INT2 : be.nbytes == 4 ? TDS_INT4 : TDS_INT8;
        break;
    case ENC_BIT: head[0] = TDS_BIT; break;
    case ENC_FLT: head[0] = be.nbytes == 4 ? TDS_FLT4 : TDS_FLT8; break;
    case ENC_MONEY: head[0] = be.nbytes == 4 ? TDS_MONEY4 : TDS_MONEY; break;
    case ENC_DATETIME: head[0] = be.nbytes == 4 ? TDS_DATETIM4 : TDS_DATETIME; break;
    case ENC_GUID: head[0] = TDS_GUID; break;
    case ENC_DATE: head[0] = TDS_DATEN; break;
    case ENC_TIME: case ENC_DT2: case ENC_DTO:
        head[0] = be.kind == ENC_TIME ? TDS_TIMEN : be.kind == ENC_DT2 ? TDS_DATETIME2N : TDS_DATETIMEOFFSETN;
        head[2 + np++] = be.scale;
        break;
    case ENC_DECIMAL:
        head[0] = TDS_DECIMALN;
        head[2 + np++] = be.precision;
        head[2 + np++] = be.scale;
        break;
    case ENC_VARBINARY:
        head[0] = be.pad_bytes ? TDS_BIGBINARY : TDS_BIGVARBINARY;
        if (bv.kind != SIM_V_BLOB && bv.kind != SIM_V_TEXT) goto bad;
        sp = bv.p;
        sn = slen = bv.n > (size_t)be.max_bytes ? (size_t)be.max_bytes : bv.n;
        stream = 3;
        break;
    case ENC_VARCHAR: case ENC_NVARCHAR: {
        bool wide = be.kind == ENC_NVARCHAR;
        head[0] = wide ? (be.pad_bytes ? TDS_NCHAR : TDS_NVARCHAR) : (be.pad_bytes ? TDS_BIGCHAR : TDS_BIGVARCHAR);
        memcpy(head + 2, sim_tds_collation_default, 5);
        np = 5;
        char tmp[64];
        if (!val_text(&bv, tmp, &sp, &sn)) goto bad;
        if (wide) {
            size_t units = sim_tds_utf8_utf16_units(sp, sn);
            if (units > (size_t)be.max_bytes / 2) units = (size_t)be.max_bytes / 2;
            slen = 2 * units;
            stream = 2;
        } else {
            slen = sim_tds_utf8_cp1252_len(sp, sn);
            if (slen > (size_t)be.max_bytes) slen = (size_t)be.max_bytes;
            stream = 1;
        }
        if (sp == (const uint8_t *)tmp) goto bad; /* a number as a string base: not kept as text */
        break;
    }
    default: goto bad; /* (max) types and the CLR types cannot be a base type */
    }
    if (stream == 3) { /* binary: max length */
        head[2 + np++] = (uint8_t)be.max_bytes;
        head[2 + np++] = (uint8_t)(be.max_bytes >> 8);
    } else if (stream) {
        head[2 + np++] = (uint8_t)be.max_bytes;
        head[2 + np++] = (uint8_t)(be.max_bytes >> 8);
    } else if (!fixed_bytes(&be, &bv, data, &dn))
        goto bad;
    head[1] = (uint8_t)np;
    size_t total = 2 + np + (stream ? slen : dn);
    if (total > VARIANT_MAX_BYTES) goto bad;
    if (sim_tds_out_u32(o, (uint32_t)total) || sim_tds_out_bytes(o, head, 2 + np)) rc = -1;
    else if (stream == 1) rc = sim_tds_out_cp1252(o, sp, sn, slen);
    else if (stream == 2) rc = sim_tds_out_utf16(o, sp, sn, slen / 2);
    else if (stream == 3) rc = sim_tds_out_bytes(o, sp, slen);
    else rc = sim_tds_out_bytes(o, data, dn);
    mcdc_free(bin);
    return rc;
bad:
    mcdc_free(bin);
    conv_warn(r, e, col);
    return put_null(o, e);
}

/* ROW, or NBCROW + bm when the NULL bitmap costs less than the NULLs it
 * replaces (saved: their bytes in a ROW). */
static int row_token(sim_tds_result *r, const uint8_t *bm, size_t saved, int ncols, bool *nbc) {
    size_t nb = (size_t)(ncols + 7) / 8;
    *nbc = r->nbcrow && saved > nb;
    if (!*nbc) return sim_tds_out_u8(r->out, TDS_TOK_ROW);
    sim_tds_out *o = r->out;
    if (o->size - o->pos > nb) { /* a few bytes: no library call */
        uint8_t *d = o->buf + o->pos;
        d[0] = TDS_TOK_NBCROW;
        for (size_t k = 0; k < nb; k++) d[1 + k] = bm[k];
        o->pos += 1 + nb;
        return 0;
    }
    return sim_tds_out_u8(o, TDS_TOK_NBCROW) || sim_tds_out_bytes(o, bm, nb);
}

int sim_tds_result_row(sim_tds_result *r, const sim_value *vals, int ncols) {
    if (ncols != r->ncols) {
        mcdc_log(MCDC_LOG_ERROR, "tds: row of %d values in a result set of %d columns", ncols,
                 r->ncols);
        return 1;
    }
    sim_tds_out *o = r->out;
    const sim_tds_col_enc *e = r->cols;
    uint8_t bm[MCDC_COLUMNS_MAX / 8];
    size_t saved = 0;
    memset(bm, 0, (size_t)(ncols + 7) / 8);
    if (r->nbcrow) {
        for (int i = 0; i < ncols; i++)
            if (vals[i].kind == SIM_V_NULL) { saved += e[i].null_bytes; bm[i / 8] = (uint8_t)(bm[i / 8] | (1u << (i % 8))); }
    }
    bool nbc;
    if (row_token(r, bm, saved, ncols, &nbc)) return 1;
    for (int i = 0; i < ncols; i++) {
        const sim_value *v = &vals[i];
        if (nbc && v->kind == SIM_V_NULL) continue;
        /* fast path: integers, the bulk of CDC rows */
        if (e[i].kind == ENC_INT && v->kind == SIM_V_INT && o->size - o->pos >= 9) {
            uint8_t *d = o->buf + o->pos;
            size_t nb = e[i].nbytes;
            if (!e[i].fixed) *d++ = (uint8_t)nb;
            uint64_t u = (uint64_t)v->i;
            for (size_t k = 0; k < nb; k++) d[k] = (uint8_t)(u >> (8 * k));
            o->pos += nb + (e[i].fixed ? 0 : 1);
            continue;
        }
        if (encode_value(r, &e[i], v, i)) return 1;
    }
    r->rows_total++;
    return o->failed ? 1 : 0;
}

/* Appends n bytes: short runs without a library call (constant-size copies
 * that may overlap), the rest by memcpy. */
static inline int put_run(sim_tds_out *o, const uint8_t *p, size_t n) {
    if (o->size - o->pos < n) return sim_tds_out_bytes_slow(o, p, n);
    uint8_t *d = o->buf + o->pos;
    if (n >= 16 && n <= 32) {
        memcpy(d, p, 16);
        memcpy(d + n - 16, p + n - 16, 16);
    } else if (n >= 8 && n < 16) {
        memcpy(d, p, 8);
        memcpy(d + n - 8, p + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(d, p, 4);
        memcpy(d + n - 4, p + n - 4, 4);
    } else if (n < 4) {
        for (size_t k = 0; k < n; k++) d[k] = p[k];
    } else {
        memcpy(d, p, n);
    }
    o->pos += n;
    return 0;
}

/* Adds p[0, n) to the pending run, or sends the run and starts another. */
static inline int run_add(sim_tds_out *o, const uint8_t **run, size_t *rn, const uint8_t *p, size_t n) {
    if (*run && *run + *rn == p) {
        *rn += n;
        return 0;
    }
    if (*rn && put_run(o, *run, *rn)) return 1;
    *run = p;
    *rn = n;
    return 0;
}

int sim_tds_result_row_cells(sim_tds_result *r, const sim_cell *cells, int ncells, const uint8_t *nulls, int ncols) {
    if (ncols != r->ncols) {
        mcdc_log(MCDC_LOG_ERROR, "tds: row of %d cells in a result set of %d columns", ncols, r->ncols);
        return 1;
    }
    sim_tds_out *o = r->out;
    const sim_tds_col_enc *e = r->cols;
    size_t saved = 0, nb = (size_t)(ncols + 7) / 8;
    if (r->nbcrow && ncols <= 64) {
        if (!r->null_sum_ready) { /* each byte value's sum from the value less its lowest bit */
            for (size_t b = 0; b < nb; b++) {
                r->null_sum[b][0] = 0;
                for (unsigned v = 1; v < 256; v++) {
                    size_t i = b * 8 + (size_t)__builtin_ctz(v);
                    r->null_sum[b][v] = (uint16_t)(r->null_sum[b][v & (v - 1)] + (i < (size_t)ncols ? e[i].null_bytes : 0));
                }
            }
            r->null_sum_ready = true;
        }
        for (size_t b = 0; b < nb; b++) saved += r->null_sum[b][nulls[b]];
    } else if (r->nbcrow) {
        for (size_t b = 0; b < nb; b++)
            for (unsigned x = nulls[b]; x; x &= x - 1) saved += e[b * 8 + (size_t)__builtin_ctz(x)].null_bytes;
    }
    bool nbc;
    if (row_token(r, nulls, saved, ncols, &nbc)) return 1;
    uint64_t nullw = 0; /* the NULL bits as a word (up to 64 columns) */
    if (nbc && ncols <= 64)
        for (size_t b = 0; b < nb; b++) nullw |= (uint64_t)nulls[b] << (8 * b);
    /* pieces adjacent in memory (a change row's columns) go in one copy;
     * NBCROW leaves the NULL columns out */
    const uint8_t *run = NULL;
    size_t rn = 0;
    int col = 0;
    for (int c = 0; c < ncells; c++) {
        const sim_cell *x = &cells[c];
        if (!nbc || x->ncols == 1) {
            bool skip = nbc && (nulls[col / 8] >> (col % 8) & 1);
            if (!skip && run_add(o, &run, &rn, x->p, x->n)) return 1;
        } else if (ncols <= 64) {
            /* the runs between this cell's NULL columns (one step per NULL) */
            uint32_t nc = x->ncols, j = 0;
            uint64_t m = (nullw >> col) & (nc >= 64 ? ~0ull : (1ull << nc) - 1);
            for (; m; m &= m - 1) {
                uint32_t z = (uint32_t)__builtin_ctzll(m);
                if (z > j && run_add(o, &run, &rn, x->p + (x->off[j] - x->off[0]), x->off[z] - x->off[j])) return 1;
                j = z + 1;
            }
            if (j < nc && run_add(o, &run, &rn, x->p + (x->off[j] - x->off[0]), x->off[nc] - x->off[j])) return 1;
        } else {
            for (uint32_t j = 0; j < x->ncols; j++) {
                int i = col + (int)j;
                if (nulls[i / 8] >> (i % 8) & 1) continue;
                if (run_add(o, &run, &rn, x->p + (x->off[j] - x->off[0]), x->off[j + 1] - x->off[j])) return 1;
            }
        }
        col += (int)x->ncols;
    }
    MCDC_ASSERT(col == ncols);
    if (rn && put_run(o, run, rn)) return 1;
    r->rows_total++;
    return o->failed ? 1 : 0;
}

/* The scratch packet's "socket": a full packet's payload goes to spill. */
static int cellenc_spill(void *ctx, const uint8_t *p, size_t n) {
    sim_tds_cellenc *c = ctx;
    MCDC_ASSERT(n >= TDS_HEADER_BYTES);
    return mcdc_buf_append(c->spill, p + TDS_HEADER_BYTES, n - TDS_HEADER_BYTES, NULL) == MCDC_OK ? 0 : 1;
}

int sim_tds_cellenc_init(sim_tds_cellenc *c, mcdc_error *err) {
    memset(c, 0, sizeof *c);
    int rc = sim_tds_out_init(&c->out, cellenc_spill, c, err);
    if (rc != MCDC_OK) return rc;
    c->out.size = MCDC_TDS_PACKET_BYTES_MAX;
    return sim_tds_result_init(&c->res, &c->out, err);
}

void sim_tds_cellenc_free(sim_tds_cellenc *c) {
    if (!c) return;
    sim_tds_result_free(&c->res);
    sim_tds_out_free(&c->out);
}

int sim_tds_cellenc_put(sim_tds_cellenc *c, const sim_tds_col_enc *e, const sim_value *v, mcdc_buf *out,
                        mcdc_error *err) {
    sim_tds_out *o = &c->out;
    o->pos = TDS_HEADER_BYTES;
    o->failed = 0;
    c->spill = out;
    if (encode_value(&c->res, e, v, 0) || o->failed)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory encoding a change row value");
    return mcdc_buf_append(out, o->buf + TDS_HEADER_BYTES, o->pos - TDS_HEADER_BYTES, err);
}

int sim_tds_result_return_value(sim_tds_result *r, uint16_t ordinal, const char *name,
                                const sim_type *t, const sim_value *v) {
    sim_tds_col_enc e;
    sim_column c = {name, *t, true};
    sim_tds_col_plan(&e, &c);
    sim_tds_out *o = r->out;
    /* token, ordinal, name, status (output parameter), user type, flags */
    if (flush_pending(r, true) || sim_tds_out_u8(o, TDS_TOK_RETURNVALUE) ||
        sim_tds_out_u16(o, ordinal))
        return -1;
    const char *nm = name ? name : "";
    size_t nn = strlen(nm);
    size_t units = sim_tds_utf8_utf16_units((const uint8_t *)nm, nn);
    if (units > 128) units = 128;
    if (sim_tds_out_u8(o, (uint8_t)units) || sim_tds_out_utf16(o, (const uint8_t *)nm, nn, units) ||
        sim_tds_out_u8(o, 0x01) || sim_tds_out_u32(o, 0) || sim_tds_out_u16(o, 0x0001) ||
        write_type_info(o, &e, r->sess ? sim_session_database(r->sess) : NULL))
        return -1;
    return encode_value(r, &e, v, 0);
}

/* ---- sink callbacks ------------------------------------------------------------------ */
static int cb_columns(void *ctx, const sim_column *cols, int ncols) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1; /* the engine went on after a stop */
    if (r->check && r->check(r->check_ctx, r, 1)) return r->stopped = true, 1;
    if (sim_tds_result_columns(r, cols, ncols)) return r->stopped = true, 1;
    return 0;
}

static int cb_row(void *ctx, const sim_value *vals, int ncols) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1; /* the engine went on after a stop */
    if (r->check && r->check(r->check_ctx, r, 0)) return r->stopped = true, 1;
    if (sim_tds_result_row(r, vals, ncols)) return r->stopped = true, 1;
    return 0;
}

static int cb_row_cells(void *ctx, const sim_cell *cells, int ncells, const uint8_t *nulls, int ncols) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1; /* the engine went on after a stop */
    if (r->check && r->check(r->check_ctx, r, 0)) return r->stopped = true, 1;
    if (sim_tds_result_row_cells(r, cells, ncells, nulls, ncols)) return r->stopped = true, 1;
    return 0;
}

static int cb_done(void *ctx, int64_t rowcount, bool has_count, bool in_proc, bool error) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1; /* the engine went on after a stop */
    if (r->check && r->check(r->check_ctx, r, 1)) return r->stopped = true, 1;
    if (flush_pending(r, true)) return r->stopped = true, 1;
    r->pending = true;
    r->pend_tok = (in_proc || r->in_rpc) ? TDS_TOK_DONEINPROC : TDS_TOK_DONE;
    r->pend_status = (uint16_t)((has_count ? TDS_DONE_COUNT : 0) | (error ? TDS_DONE_ERROR : 0) |
                                (r->in_xact ? TDS_DONE_INXACT : 0));
    r->pend_rows = rowcount > 0 ? (uint64_t)rowcount : 0;
    r->ncols = 0;
    return 0;
}

static int cb_message(void *ctx, bool is_error, int number, int state, int cls, const char *text,
                      const char *proc, int line) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1; /* the engine went on after a stop */
    if (flush_pending(r, true)) return r->stopped = true, 1;
    if (is_error && cls > 10) r->any_error = true;
    if (is_error && cls >= 20) r->fatal = true; /* SQL Server closes the connection */
    if (sim_tds_tok_message(r->out, is_error, number, (uint8_t)state, (uint8_t)cls, text,
                        proc ? proc : "", line))
        return r->stopped = true, 1;
    return 0;
}

/* ENVCHANGE 1 only: the engine sends the INFO 5701 that goes with it. */
static int cb_database(void *ctx, const char *new_db, const char *old_db) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1; /* the engine went on after a stop */
    if (flush_pending(r, true)) return r->stopped = true, 1;
    if (sim_tds_tok_envchange_str(r->out, TDS_ENV_DATABASE, new_db, old_db))
        return r->stopped = true, 1;
    return 0;
}

static int cb_transaction(void *ctx, int type, uint64_t descriptor) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1; /* the engine went on after a stop */
    if (flush_pending(r, true)) return r->stopped = true, 1;
    uint8_t d[8];
    put_le(d, descriptor, 8);
    int rc;
    if (type == TDS_ENV_BEGINTRAN) {
        r->in_xact = true;
        rc = sim_tds_tok_envchange_bytes(r->out, TDS_ENV_BEGINTRAN, d, 8, NULL, 0);
    } else {
        r->in_xact = false;
        rc = sim_tds_tok_envchange_bytes(r->out, (uint8_t)type, NULL, 0, d, 8);
    }
    return rc ? (r->stopped = true, 1) : 0;
}

static int cb_return_status(void *ctx, int32_t status) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1; /* the engine went on after a stop */
    if (flush_pending(r, true)) return r->stopped = true, 1;
    r->got_status = true;
    return sim_tds_tok_returnstatus(r->out, status) ? (r->stopped = true, 1) : 0;
}

/* The prepared handle's RETURNVALUE (once, before any output parameter). */
static int send_handle(sim_tds_result *r) {
    if (!r->has_handle || r->handle_sent) return 0;
    r->handle_sent = true;
    sim_type t = {SIM_T_INT, 0, 0, 0};
    sim_value v = {.kind = SIM_V_INT, .i = r->handle};
    return sim_tds_result_return_value(r, r->handle_ordinal, r->handle_name, &t, &v);
}

static int cb_return_value(void *ctx, int ordinal, const char *name, const sim_type *type, const sim_value *v) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1; /* the engine went on after a stop */
    int o = ordinal + r->rv_ordinal_shift;
    if (o < 0 || o > UINT16_MAX) o = 0;
    if (send_handle(r) || sim_tds_result_return_value(r, (uint16_t)o, name, type, v))
        return r->stopped = true, 1;
    return 0;
}

/* The engine waits (a blocked read): look for an ATTENTION meanwhile. */
static int cb_poll(void *ctx) {
    sim_tds_result *r = ctx;
    if (r->stopped) return 1;
    if (r->check && r->check(r->check_ctx, r, 1)) return r->stopped = true, 1;
    return 0;
}

void sim_tds_result_sink(sim_tds_result *r, sim_sink *s) {
    memset(s, 0, sizeof *s);
    s->ctx = r;
    s->columns = cb_columns;
    s->row = cb_row;
    s->row_cells = cb_row_cells;
    s->done = cb_done;
    s->message = cb_message;
    s->database_changed = cb_database;
    s->transaction = cb_transaction;
    s->return_status = cb_return_status;
    s->return_value = cb_return_value;
    s->poll = cb_poll;
}
