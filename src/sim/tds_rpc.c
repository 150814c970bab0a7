/*
 * tds_rpc.c - RPC request decoding: procedure name or ProcID, option flags and
 * parameters (TYPE_INFO + value) into sim_param, with the value forms
 * sim_engine.h defines (numbers as SIM_V_INT/REAL, decimals and dates as
 * canonical text, strings as UTF-8, binaries as blobs).
 */
#include <stdio.h>
#include <string.h>

#include "tds_wire.h"

static const char *const g_proc_names[16] = {
    NULL,           "sp_cursor",        "sp_cursoropen",    "sp_cursorprepare",
    "sp_cursorexecute", "sp_cursorprepexec", "sp_cursorunprepare", "sp_cursorfetch",
    "sp_cursoroption",  "sp_cursorclose",    "sp_executesql",    "sp_prepare",
    "sp_execute",       "sp_prepexec",       "sp_prepexecrpc",   "sp_unprepare"};

const char *sim_tds_proc_id_name(uint16_t id) { return id < 16 ? g_proc_names[id] : NULL; }

typedef struct cur {
    const uint8_t *p;
    size_t n, i;
    mcdc_error *err;
} cur;

static int need(cur *c, size_t k, const char *what) {
    if (c->n - c->i < k)
        return mcdc_error_set(c->err, MCDC_E_PROTOCOL,
                              "RPC request ends inside %s (byte %zu of %zu)", what, c->i, c->n);
    return MCDC_OK;
}
static uint8_t g8(cur *c) { return c->p[c->i++]; }
static uint16_t g16(cur *c) {
    uint16_t v = (uint16_t)(c->p[c->i] | (c->p[c->i + 1] << 8));
    c->i += 2;
    return v;
}
static uint32_t g32(cur *c) {
    uint32_t v = (uint32_t)c->p[c->i] | ((uint32_t)c->p[c->i + 1] << 8) |
                 ((uint32_t)c->p[c->i + 2] << 16) | ((uint32_t)c->p[c->i + 3] << 24);
    c->i += 4;
    return v;
}
static uint64_t gle(const uint8_t *p, size_t k) {
    uint64_t v = 0;
    for (size_t j = 0; j < k; j++) v |= (uint64_t)p[j] << (8 * j);
    return v;
}

void sim_tds_rpc_free(sim_tds_rpc *rpc) {
    if (!rpc) return;
    mcdc_free(rpc->params);
    mcdc_free(rpc->name_off);
    mcdc_free(rpc->val_off);
    mcdc_buf_free(&rpc->arena);
    mcdc_buf_free(&rpc->scratch);
    memset(rpc, 0, sizeof *rpc);
}

static int grow(sim_tds_rpc *rpc, mcdc_error *err) {
    if (rpc->nparams < rpc->params_cap) return MCDC_OK;
    if (rpc->nparams >= TDS_RPC_PARAMS_MAX) { /* SQL Server's error 8003, word for word */
        mcdc_error_set(err, MCDC_E_LIMIT,
                       "The incoming request has too many parameters. The server supports a "
                       "maximum of %d parameters. Reduce the number of parameters and resend the "
                       "request.",
                       TDS_RPC_PARAMS_MAX);
        if (err) err->server_number = TDS_ERR_TOO_MANY_PARAMS;
        return MCDC_E_LIMIT;
    }
    int cap = rpc->params_cap ? rpc->params_cap * 2 : 8;
    if (cap > TDS_RPC_PARAMS_MAX) cap = TDS_RPC_PARAMS_MAX;
    sim_param *np = mcdc_realloc(rpc->params, (size_t)cap * sizeof *np);
    if (np) rpc->params = np;
    size_t *no = mcdc_realloc(rpc->name_off, (size_t)cap * sizeof *no);
    if (no) rpc->name_off = no;
    size_t *vo = mcdc_realloc(rpc->val_off, (size_t)cap * sizeof *vo);
    if (vo) rpc->val_off = vo;
    if (!np || !no || !vo)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for RPC parameters");
    rpc->params_cap = cap;
    return MCDC_OK;
}

/* Appends text to the arena NUL-terminated; sets value to SIM_V_TEXT. */
static int put_text(sim_tds_rpc *rpc, int k, const char *s, size_t n, mcdc_error *err) {
    rpc->val_off[k] = rpc->arena.len;
    int rc = mcdc_buf_append(&rpc->arena, s, n, err);
    if (!rc) rc = mcdc_buf_append_byte(&rpc->arena, 0, err);
    rpc->params[k].value.kind = SIM_V_TEXT;
    rpc->params[k].value.n = n;
    return rc;
}

static int put_dt(sim_tds_rpc *rpc, int k, const sim_tds_dt *dt, int frac, mcdc_error *err) {
    char buf[48];
    size_t n = sim_tds_dt_format(buf, dt, frac);
    return put_text(rpc, k, buf, n, err);
}

/* Converted character data (raw bytes in src) into the arena. */
static int put_chars(sim_tds_rpc *rpc, int k, const uint8_t *src, size_t n, int kind,
                     const uint8_t coll[5], mcdc_error *err) {
    rpc->val_off[k] = rpc->arena.len;
    int rc;
    if (kind == 'N')
        rc = sim_tds_utf16_to_utf8(&rpc->arena, src, n, err);
    else if (coll[3] & 0x04) /* UTF-8 collation */
        rc = mcdc_buf_append(&rpc->arena, src, n, err);
    else
        rc = sim_tds_cp1252_to_utf8(&rpc->arena, src, n, err);
    if (rc) return rc;
    rpc->params[k].value.kind = SIM_V_TEXT;
    rpc->params[k].value.n = rpc->arena.len - rpc->val_off[k];
    return mcdc_buf_append_byte(&rpc->arena, 0, err);
}

static int put_blob(sim_tds_rpc *rpc, int k, const uint8_t *src, size_t n, mcdc_error *err) {
    rpc->val_off[k] = rpc->arena.len;
    rpc->params[k].value.kind = SIM_V_BLOB;
    rpc->params[k].value.n = n;
    return mcdc_buf_append(&rpc->arena, src, n, err);
}

/* Reads a PLP value into rpc->scratch; *is_null for the NULL marker. */
static int read_plp(sim_tds_rpc *rpc, cur *c, bool *is_null) {
    mcdc_buf_reset(&rpc->scratch);
    rpc->scratch.limit = (size_t)MCDC_VALUE_BYTES_MAX + 1;
    int rc = need(c, 8, "a PLP length");
    if (rc) return rc;
    uint64_t total = gle(c->p + c->i, 8);
    c->i += 8;
    *is_null = total == TDS_PLP_NULL;
    if (*is_null) return MCDC_OK;
    if (total != TDS_PLP_UNKNOWN && total > MCDC_VALUE_BYTES_MAX)
        return mcdc_error_set(c->err, MCDC_E_LIMIT, "RPC parameter of %llu bytes exceeds %u",
                              (unsigned long long)total, MCDC_VALUE_BYTES_MAX);
    for (;;) {
        if ((rc = need(c, 4, "a PLP chunk length"))) return rc;
        uint32_t len = g32(c);
        if (len == 0) break;
        if ((rc = need(c, len, "a PLP chunk"))) return rc;
        if (rpc->scratch.len + len > MCDC_VALUE_BYTES_MAX)
            return mcdc_error_set(c->err, MCDC_E_LIMIT, "RPC parameter exceeds %u bytes",
                                  MCDC_VALUE_BYTES_MAX);
        if ((rc = mcdc_buf_append(&rpc->scratch, c->p + c->i, len, c->err))) return rc;
        c->i += len;
    }
    if (total != TDS_PLP_UNKNOWN && total != rpc->scratch.len)
        return mcdc_error_set(c->err, MCDC_E_PROTOCOL,
                              "PLP value announces %llu bytes but its chunks hold %zu",
                              (unsigned long long)total, rpc->scratch.len);
    return MCDC_OK;
}

static int64_t time_units(const uint8_t *p, size_t len, int scale) {
    static const int64_t mul[8] = {10000000, 1000000, 100000, 10000, 1000, 100, 10, 1};
    return (int64_t)gle(p, len) * mul[scale];
}

static size_t time_len(int scale) { return scale <= 2 ? 3 : scale <= 4 ? 4 : 5; }

static int decode_param(sim_tds_rpc *rpc, cur *c, int k) {
    mcdc_error *err = c->err;
    sim_param *pa = &rpc->params[k];
    memset(pa, 0, sizeof *pa);
    int rc;
    /* name */
    if ((rc = need(c, 1, "a parameter name"))) return rc;
    size_t nl = g8(c);
    if ((rc = need(c, nl * 2 + 2, "a parameter name"))) return rc;
    rpc->name_off[k] = rpc->arena.len;
    if ((rc = sim_tds_utf16_to_utf8(&rpc->arena, c->p + c->i, nl * 2, err))) return rc;
    if ((rc = mcdc_buf_append_byte(&rpc->arena, 0, err))) return rc;
    c->i += nl * 2;
    uint8_t status = g8(c);
    if (status & TDS_RPC_PARAM_ENCRYPTED)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "RPC parameter %d is encrypted (Always Encrypted is not supported)",
                              k + 1);
    pa->output = (status & TDS_RPC_PARAM_OUTPUT) != 0;
    pa->type.length = 0;
    uint8_t t = g8(c);
    sim_type *ty = &pa->type;
    uint8_t fixed_len = 0;
    switch (t) {
    case TDS_NULLTYPE: ty->id = SIM_T_INT; pa->value.kind = SIM_V_NULL; return MCDC_OK;
    case TDS_INT1: ty->id = SIM_T_TINYINT; fixed_len = 1; break;
    case TDS_BIT: ty->id = SIM_T_BIT; fixed_len = 1; break;
    case TDS_INT2: ty->id = SIM_T_SMALLINT; fixed_len = 2; break;
    case TDS_INT4: ty->id = SIM_T_INT; fixed_len = 4; break;
    case TDS_INT8: ty->id = SIM_T_BIGINT; fixed_len = 8; break;
    case TDS_FLT4: ty->id = SIM_T_REAL; fixed_len = 4; break;
    case TDS_FLT8: ty->id = SIM_T_FLOAT; fixed_len = 8; break;
    case TDS_MONEY: ty->id = SIM_T_MONEY; fixed_len = 8; break;
    case TDS_MONEY4: ty->id = SIM_T_SMALLMONEY; fixed_len = 4; break;
    case TDS_DATETIME: ty->id = SIM_T_DATETIME; fixed_len = 8; break;
    case TDS_DATETIM4: ty->id = SIM_T_SMALLDATETIME; fixed_len = 4; break;
    default: break;
    }
    size_t vlen = 0;
    const uint8_t *v = NULL;
    if (fixed_len) {
        if ((rc = need(c, fixed_len, "a parameter value"))) return rc;
        vlen = fixed_len;
        v = c->p + c->i;
        c->i += vlen;
    } else {
        switch (t) {
        case TDS_INTN: case TDS_BITN: case TDS_FLTN: case TDS_MONEYN: case TDS_DATETIMN: case TDS_GUID: {
            if ((rc = need(c, 2, "a parameter TYPE_INFO"))) return rc;
            uint8_t max = g8(c);
            bool ok = false;
            switch (t) {
            case TDS_INTN:
                ok = max == 1 || max == 2 || max == 4 || max == 8;
                ty->id = max == 1 ? SIM_T_TINYINT : max == 2 ? SIM_T_SMALLINT
                         : max == 4 ? SIM_T_INT : SIM_T_BIGINT;
                break;
            case TDS_BITN: ok = max == 1; ty->id = SIM_T_BIT; break;
            case TDS_FLTN: ok = max == 4 || max == 8; ty->id = max == 4 ? SIM_T_REAL : SIM_T_FLOAT; break;
            case TDS_MONEYN: ok = max == 4 || max == 8; ty->id = max == 4 ? SIM_T_SMALLMONEY : SIM_T_MONEY; break;
            case TDS_DATETIMN: ok = max == 4 || max == 8; ty->id = max == 4 ? SIM_T_SMALLDATETIME : SIM_T_DATETIME; break;
            default: ok = max == 16; ty->id = SIM_T_UNIQUEIDENTIFIER; break;
            }
            if (!ok)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "RPC parameter %d: type 0x%02x with length %u", k + 1, t, max);
            vlen = g8(c);
            if (vlen == 0) { pa->value.kind = SIM_V_NULL; return MCDC_OK; }
            bool vok = t == TDS_INTN ? (vlen == 1 || vlen == 2 || vlen == 4 || vlen == 8) : vlen == max;
            if (t == TDS_FLTN || t == TDS_MONEYN || t == TDS_DATETIMN) vok = vlen == 4 || vlen == 8;
            if (!vok)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "RPC parameter %d: value length %zu for type 0x%02x",
                                      k + 1, vlen, t);
            if ((rc = need(c, vlen, "a parameter value"))) return rc;
            v = c->p + c->i;
            c->i += vlen;
            if (t == TDS_INTN && ty->id != SIM_T_BIGINT && vlen == 8) ty->id = SIM_T_BIGINT;
            break;
        }
        case TDS_DECIMALN: case TDS_NUMERICN: case TDS_DECIMAL: case TDS_NUMERIC: {
            if ((rc = need(c, 4, "a decimal TYPE_INFO"))) return rc;
            (void)g8(c);
            ty->id = SIM_T_DECIMAL;
            ty->precision = g8(c);
            ty->scale = g8(c);
            if (ty->precision < 1 || ty->precision > 38 || ty->scale > ty->precision)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "RPC parameter %d: decimal(%u,%u) is invalid", k + 1,
                                      ty->precision, ty->scale);
            vlen = g8(c);
            if (vlen == 0) { pa->value.kind = SIM_V_NULL; return MCDC_OK; }
            if (vlen < 2 || vlen > 17)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "RPC parameter %d: decimal value of %zu bytes", k + 1, vlen);
            if ((rc = need(c, vlen, "a decimal value"))) return rc;
            uint8_t b[16] = {0};
            memcpy(b, c->p + c->i + 1, vlen - 1);
            uint32_t mag[4];
            for (int j = 0; j < 4; j++) mag[j] = (uint32_t)gle(b + 4 * j, 4);
            char txt[64];
            size_t tn = sim_tds_decimal_format(txt, sizeof txt, c->p[c->i] == 0, mag, ty->scale);
            c->i += vlen;
            return put_text(rpc, k, txt, tn, err);
        }
        case TDS_DATEN: case TDS_TIMEN: case TDS_DATETIME2N: case TDS_DATETIMEOFFSETN: {
            int scale = 0;
            if (t != TDS_DATEN) {
                if ((rc = need(c, 1, "a time scale"))) return rc;
                scale = g8(c);
                if (scale > 7)
                    return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                          "RPC parameter %d: time scale %d", k + 1, scale);
            }
            ty->id = t == TDS_DATEN ? SIM_T_DATE : t == TDS_TIMEN ? SIM_T_TIME
                     : t == TDS_DATETIME2N ? SIM_T_DATETIME2 : SIM_T_DATETIMEOFFSET;
            ty->scale = (uint8_t)scale;
            if ((rc = need(c, 1, "a value length"))) return rc;
            vlen = g8(c);
            if (vlen == 0) { pa->value.kind = SIM_V_NULL; return MCDC_OK; }
            size_t tl = t == TDS_DATEN ? 0 : time_len(scale);
            size_t want = t == TDS_DATEN ? 3 : t == TDS_TIMEN ? tl : t == TDS_DATETIME2N ? tl + 3 : tl + 5;
            if (vlen != want)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "RPC parameter %d: %zu-byte value, expected %zu", k + 1,
                                      vlen, want);
            if ((rc = need(c, vlen, "a date/time value"))) return rc;
            v = c->p + c->i;
            c->i += vlen;
            sim_tds_dt dt = {0};
            if (t != TDS_DATEN) {
                dt.has_time = true;
                dt.time_100ns = time_units(v, tl, scale);
                if (dt.time_100ns >= 864000000000LL)
                    return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                          "RPC parameter %d: time of day out of range", k + 1);
            }
            if (t != TDS_TIMEN) {
                dt.has_date = true;
                dt.days = (int64_t)gle(v + tl, 3);
                if (dt.days > 3652058)
                    return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                          "RPC parameter %d: date out of range", k + 1);
            }
            if (t == TDS_DATETIMEOFFSETN) {
                int16_t off = (int16_t)gle(v + tl + 3, 2);
                if (off < -840 || off > 840)
                    return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                          "RPC parameter %d: offset %d out of range", k + 1, off);
                dt.has_offset = true;
                dt.offset_min = off;
                int64_t t100 = dt.time_100ns + (int64_t)off * 600000000LL;
                int64_t day = 864000000000LL;
                while (t100 < 0) { t100 += day; dt.days--; }
                while (t100 >= day) { t100 -= day; dt.days++; }
                dt.time_100ns = t100;
            }
            return put_dt(rpc, k, &dt, scale, err);
        }
        case TDS_BIGVARBINARY: case TDS_BIGBINARY: case TDS_BIGVARCHAR: case TDS_BIGCHAR: case TDS_NVARCHAR: case TDS_NCHAR: {
            bool chars = t == TDS_BIGVARCHAR || t == TDS_BIGCHAR || t == TDS_NVARCHAR || t == TDS_NCHAR;
            if ((rc = need(c, 2 + (chars ? 5 : 0), "a parameter TYPE_INFO"))) return rc;
            uint16_t max = g16(c);
            uint8_t coll[5] = {0};
            if (chars) {
                memcpy(coll, c->p + c->i, 5);
                c->i += 5;
            }
            int kind = (t == TDS_NVARCHAR || t == TDS_NCHAR) ? 'N' : chars ? 'C' : 'B';
            ty->id = t == TDS_BIGVARBINARY ? SIM_T_VARBINARY : t == TDS_BIGBINARY ? SIM_T_BINARY
                     : t == TDS_BIGVARCHAR ? SIM_T_VARCHAR : t == TDS_BIGCHAR ? SIM_T_CHAR
                     : t == TDS_NVARCHAR ? SIM_T_NVARCHAR : SIM_T_NCHAR;
            if (max == 0xFFFF) {
                if (t == TDS_BIGBINARY || t == TDS_BIGCHAR || t == TDS_NCHAR)
                    return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                          "RPC parameter %d: fixed-length type with (max)", k + 1);
                ty->length = -1;
                bool is_null;
                if ((rc = read_plp(rpc, c, &is_null))) return rc;
                if (is_null) { pa->value.kind = SIM_V_NULL; return MCDC_OK; }
                if (kind == 'B')
                    return put_blob(rpc, k, rpc->scratch.data, rpc->scratch.len, err);
                return put_chars(rpc, k, rpc->scratch.data, rpc->scratch.len, kind, coll, err);
            }
            if (max > 8000)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "RPC parameter %d: maximum length %u > 8000", k + 1, max);
            ty->length = kind == 'N' ? max / 2 : max;
            if ((rc = need(c, 2, "a value length"))) return rc;
            vlen = g16(c);
            if (vlen == 0xFFFF) { pa->value.kind = SIM_V_NULL; return MCDC_OK; }
            if (vlen > max)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "RPC parameter %d: value of %zu bytes exceeds its type's %u",
                                      k + 1, vlen, max);
            if ((rc = need(c, vlen, "a parameter value"))) return rc;
            v = c->p + c->i;
            c->i += vlen;
            if (kind == 'B') return put_blob(rpc, k, v, vlen, err);
            return put_chars(rpc, k, v, vlen, kind, coll, err);
        }
        case TDS_TEXT: case TDS_NTEXT: case TDS_IMAGE: {
            bool chars = t != TDS_IMAGE;
            if ((rc = need(c, 4 + (chars ? 5 : 0), "a parameter TYPE_INFO"))) return rc;
            (void)g32(c);
            uint8_t coll[5] = {0};
            if (chars) {
                memcpy(coll, c->p + c->i, 5);
                c->i += 5;
            }
            ty->id = t == TDS_IMAGE ? SIM_T_VARBINARY : t == TDS_NTEXT ? SIM_T_NVARCHAR : SIM_T_VARCHAR;
            ty->length = -1;
            if ((rc = need(c, 4, "a value length"))) return rc;
            uint32_t l = g32(c);
            if (l == 0xFFFFFFFFu) { pa->value.kind = SIM_V_NULL; return MCDC_OK; }
            if (l > MCDC_VALUE_BYTES_MAX)
                return mcdc_error_set(err, MCDC_E_LIMIT, "RPC parameter %d exceeds %u bytes",
                                      k + 1, MCDC_VALUE_BYTES_MAX);
            if ((rc = need(c, l, "a parameter value"))) return rc;
            v = c->p + c->i;
            c->i += l;
            if (t == TDS_IMAGE) return put_blob(rpc, k, v, l, err);
            return put_chars(rpc, k, v, l, t == TDS_NTEXT ? 'N' : 'C', coll, err);
        }
        default:
            return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                  "RPC parameter %d has TDS type 0x%02x, which this server does "
                                  "not decode",
                                  k + 1, t);
        }
    }
    /* fixed-size numbers, money, datetime, guid */
    switch (ty->id) {
    case SIM_T_BIT: pa->value.kind = SIM_V_INT; pa->value.i = v[0] ? 1 : 0; return MCDC_OK;
    case SIM_T_TINYINT: case SIM_T_SMALLINT: case SIM_T_INT: case SIM_T_BIGINT: {
        uint64_t u = gle(v, vlen);
        int64_t i = vlen == 1 ? (int64_t)u
                    : vlen == 2 ? (int64_t)(int16_t)u
                    : vlen == 4 ? (int64_t)(int32_t)u : (int64_t)u;
        pa->value.kind = SIM_V_INT;
        pa->value.i = i;
        return MCDC_OK;
    }
    case SIM_T_REAL: case SIM_T_FLOAT: {
        pa->value.kind = SIM_V_REAL;
        if (vlen == 4) {
            uint32_t u = (uint32_t)gle(v, 4);
            float f;
            memcpy(&f, &u, 4);
            pa->value.f = f;
        } else {
            uint64_t u = gle(v, 8);
            memcpy(&pa->value.f, &u, 8);
        }
        return MCDC_OK;
    }
    case SIM_T_MONEY: case SIM_T_SMALLMONEY: {
        int64_t m;
        if (vlen == 8)
            m = (int64_t)(((uint64_t)(uint32_t)gle(v, 4) << 32) | (uint32_t)gle(v + 4, 4));
        else
            m = (int32_t)(uint32_t)gle(v, 4);
        uint64_t mag = m < 0 ? (uint64_t)0 - (uint64_t)m : (uint64_t)m;
        uint32_t limbs[4] = {(uint32_t)mag, (uint32_t)(mag >> 32), 0, 0};
        char txt[64];
        size_t tn = sim_tds_decimal_format(txt, sizeof txt, m < 0, limbs, 4);
        return put_text(rpc, k, txt, tn, err);
    }
    case SIM_T_DATETIME: case SIM_T_SMALLDATETIME: {
        sim_tds_dt dt = {.has_date = true, .has_time = true};
        int64_t base = sim_tds_days_from_civil0001(1900, 1, 1);
        if (vlen == 8) {
            int32_t days = (int32_t)(uint32_t)gle(v, 4);
            uint32_t ticks = (uint32_t)gle(v + 4, 4);
            if (ticks >= 300u * 86400u || days < -53690 || days > 2958463)
                return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                      "RPC parameter %d: datetime out of range", k + 1);
            int64_t ms = ((int64_t)ticks * 10 + 1) / 3;
            dt.days = base + days;
            dt.time_100ns = ms * 10000;
            return put_dt(rpc, k, &dt, 3, err);
        }
        uint16_t days = (uint16_t)gle(v, 2), mins = (uint16_t)gle(v + 2, 2);
        if (mins >= 1440)
            return mcdc_error_set(err, MCDC_E_PROTOCOL,
                                  "RPC parameter %d: smalldatetime out of range", k + 1);
        dt.days = base + days;
        dt.time_100ns = (int64_t)mins * 600000000LL;
        return put_dt(rpc, k, &dt, 0, err);
    }
    case SIM_T_UNIQUEIDENTIFIER: {
        char g[37];
        sim_tds_guid_format(g, v);
        return put_text(rpc, k, g, 36, err);
    }
    default: break;
    }
    MCDC_UNREACHABLE();
}

int sim_tds_rpc_decode(sim_tds_rpc *rpc, const uint8_t *p, size_t n, size_t *pos, bool *more,
                   mcdc_error *err) {
    cur c = {p, n, *pos, err};
    rpc->nparams = 0;
    rpc->proc_id = 0;
    rpc->proc_name[0] = 0;
    mcdc_buf_reset(&rpc->arena);
    rpc->arena.limit = (size_t)MCDC_TDS_MESSAGE_BYTES_MAX * 2;
    *more = false;
    int rc = need(&c, 2, "the procedure name");
    if (rc) return rc;
    uint16_t nl = g16(&c);
    if (nl == 0xFFFF) {
        if ((rc = need(&c, 2, "the procedure id"))) return rc;
        rpc->proc_id = g16(&c);
        const char *name = sim_tds_proc_id_name(rpc->proc_id);
        if (!name)
            return mcdc_error_set(err, MCDC_E_PROTOCOL, "RPC with unknown ProcID %u",
                                  rpc->proc_id);
        snprintf(rpc->proc_name, sizeof rpc->proc_name, "%s", name);
    } else {
        if (nl == 0 || nl > 4 * MCDC_SYSNAME_CHARS_MAX + 3)
            return mcdc_error_set(err, MCDC_E_PROTOCOL, "RPC procedure name of %u characters",
                                  nl);
        if ((rc = need(&c, (size_t)nl * 2, "the procedure name"))) return rc;
        mcdc_buf b = {0};
        rc = sim_tds_utf16_to_utf8(&b, p + c.i, (size_t)nl * 2, err);
        if (!rc && b.len >= sizeof rpc->proc_name)
            rc = mcdc_error_set(err, MCDC_E_LIMIT, "RPC procedure name is too long");
        if (!rc) {
            memcpy(rpc->proc_name, b.data, b.len);
            rpc->proc_name[b.len] = 0;
        }
        mcdc_buf_free(&b);
        if (rc) return rc;
        c.i += (size_t)nl * 2;
    }
    if ((rc = need(&c, 2, "the RPC option flags"))) return rc;
    rpc->option_flags = g16(&c);
    while (c.i < n && p[c.i] != 0xFF && p[c.i] != 0xFE) {
        if ((rc = grow(rpc, err))) return rc;
        if ((rc = decode_param(rpc, &c, rpc->nparams))) return rc;
        rpc->nparams++;
    }
    if (c.i < n) { /* batch separator */
        c.i++;
        *more = c.i < n;
    }
    *pos = c.i;
    /* the arena no longer moves: point names and values into it */
    for (int k = 0; k < rpc->nparams; k++) {
        rpc->params[k].name = (const char *)rpc->arena.data + rpc->name_off[k];
        sim_value *v = &rpc->params[k].value;
        v->p = (v->kind == SIM_V_TEXT || v->kind == SIM_V_BLOB)
                   ? rpc->arena.data + rpc->val_off[k]
                   : NULL;
    }
    return MCDC_OK;
}
