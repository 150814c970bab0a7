/* sim_val.c - SQL Server value conversions and SQLite functions (see sim_val.h). */
#include "sim_val.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_tz.h"
#include "sim_udt.h"

#define TICKS_PER_S 10000000LL
#define TICKS_PER_DAY (86400LL * TICKS_PER_S)

/* ---- types ------------------------------------------------------------- */
static const struct { const char *name; sim_type_id id; } TYPE_NAMES[] = {
    {"bit", SIM_T_BIT}, {"tinyint", SIM_T_TINYINT}, {"smallint", SIM_T_SMALLINT},
    {"int", SIM_T_INT}, {"integer", SIM_T_INT}, {"bigint", SIM_T_BIGINT}, {"real", SIM_T_REAL},
    {"float", SIM_T_FLOAT}, {"decimal", SIM_T_DECIMAL}, {"numeric", SIM_T_DECIMAL},
    {"money", SIM_T_MONEY}, {"smallmoney", SIM_T_SMALLMONEY}, {"date", SIM_T_DATE},
    {"time", SIM_T_TIME}, {"datetime", SIM_T_DATETIME}, {"smalldatetime", SIM_T_SMALLDATETIME},
    {"datetime2", SIM_T_DATETIME2}, {"datetimeoffset", SIM_T_DATETIMEOFFSET}, {"char", SIM_T_CHAR},
    {"varchar", SIM_T_VARCHAR}, {"nchar", SIM_T_NCHAR}, {"nvarchar", SIM_T_NVARCHAR},
    {"sysname", SIM_T_NVARCHAR}, {"binary", SIM_T_BINARY}, {"varbinary", SIM_T_VARBINARY},
    {"uniqueidentifier", SIM_T_UNIQUEIDENTIFIER}, {"sql_variant", SIM_T_SQL_VARIANT},
    {"text", SIM_T_VARCHAR}, {"ntext", SIM_T_NVARCHAR}, {"xml", SIM_T_XML}, {"hierarchyid", SIM_T_HIERARCHYID},
    {"geography", SIM_T_GEOGRAPHY}, {"geometry", SIM_T_GEOMETRY},
};

bool sim_type_parse(sim_type *out, const char *s, size_t n) {
    char w[40];
    size_t i = 0, k = 0;
    memset(out, 0, sizeof *out);
    while (i < n && isspace((unsigned char)s[i])) i++;
    if (i < n && s[i] == '[') i++;
    while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '_') && k < sizeof w - 1)
        w[k++] = (char)tolower((unsigned char)s[i++]);
    w[k] = 0;
    if (i < n && s[i] == ']') i++;
    bool found = false;
    for (size_t t = 0; t < sizeof TYPE_NAMES / sizeof TYPE_NAMES[0]; t++)
        if (strcmp(TYPE_NAMES[t].name, w) == 0) { out->id = TYPE_NAMES[t].id; found = true; break; }
    if (!found) return false;
    long a = -2, b = -2;
    while (i < n && isspace((unsigned char)s[i])) i++;
    if (i < n && s[i] == '(') {
        i++;
        while (i < n && isspace((unsigned char)s[i])) i++;
        if (i + 3 <= n && mcdc_str_nieq(s + i, "max", 3)) { a = -1; i += 3; }
        else { a = strtol(s + i, NULL, 10); while (i < n && isdigit((unsigned char)s[i])) i++; }
        while (i < n && isspace((unsigned char)s[i])) i++;
        if (i < n && s[i] == ',') {
            i++;
            while (i < n && isspace((unsigned char)s[i])) i++;
            b = strtol(s + i, NULL, 10);
            while (i < n && isdigit((unsigned char)s[i])) i++;
        }
        while (i < n && isspace((unsigned char)s[i])) i++;
        if (i >= n || s[i] != ')') return false;
        i++;
    }
    if (mcdc_str_ieq(w, "sysname")) a = 128;
    if (mcdc_str_ieq(w, "text") || mcdc_str_ieq(w, "ntext")) a = -1;
    switch (out->id) {
    case SIM_T_DECIMAL:
        out->precision = (uint8_t)(a == -2 ? 18 : a);
        out->scale = (uint8_t)(b < 0 ? 0 : b);
        if (a == -1 || out->precision < 1 || out->precision > 38 || out->scale > out->precision) return false;
        break;
    case SIM_T_MONEY: out->precision = 19; out->scale = 4; break;
    case SIM_T_SMALLMONEY: out->precision = 10; out->scale = 4; break;
    case SIM_T_FLOAT:
        if (a > 0 && a <= 24) out->id = SIM_T_REAL;
        break;
    case SIM_T_TIME: case SIM_T_DATETIME2: case SIM_T_DATETIMEOFFSET:
        out->scale = (uint8_t)(a == -2 ? 7 : a);
        if (a == -1 || out->scale > 7) return false;
        break;
    case SIM_T_DATETIME: out->scale = 3; break;
    case SIM_T_CHAR: case SIM_T_VARCHAR: case SIM_T_NCHAR: case SIM_T_NVARCHAR:
    case SIM_T_BINARY: case SIM_T_VARBINARY:
        out->length = (int32_t)(a == -2 ? (out->id == SIM_T_VARCHAR || out->id == SIM_T_NVARCHAR ||
                                           out->id == SIM_T_VARBINARY) ? 30 : 1 : a);
        if (out->length == 0 || out->length < -1 || out->length > 8000) return false;
        if (out->length == -1 && (out->id == SIM_T_CHAR || out->id == SIM_T_NCHAR || out->id == SIM_T_BINARY))
            return false;
        if ((out->id == SIM_T_NCHAR || out->id == SIM_T_NVARCHAR) && out->length > 4000) return false;
        break;
    default: break;
    }
    return true;
}

void sim_type_format(const sim_type *t, char *buf, size_t cap) {
    const char *name = "int";
    for (size_t k = 0; k < sizeof TYPE_NAMES / sizeof TYPE_NAMES[0]; k++)
        if (TYPE_NAMES[k].id == t->id) { name = TYPE_NAMES[k].name; break; }
    switch (t->id) {
    case SIM_T_DECIMAL: snprintf(buf, cap, "decimal(%d,%d)", t->precision, t->scale); break;
    case SIM_T_TIME: case SIM_T_DATETIME2: case SIM_T_DATETIMEOFFSET:
        snprintf(buf, cap, "%s(%d)", name, t->scale);
        break;
    case SIM_T_CHAR: case SIM_T_VARCHAR: case SIM_T_NCHAR: case SIM_T_NVARCHAR:
    case SIM_T_BINARY: case SIM_T_VARBINARY:
        if (t->length < 0) snprintf(buf, cap, "%s(max)", name);
        else snprintf(buf, cap, "%s(%d)", name, (int)t->length);
        break;
    default: snprintf(buf, cap, "%s", name); break;
    }
}

const char *sim_type_decl(const sim_type *t) {
    /* SQL Server's default collation is case-insensitive: NOCASE is its
     * ASCII approximation (accents still compare as different, as in _AS) */
    if (t->id == SIM_T_CHAR || t->id == SIM_T_VARCHAR || t->id == SIM_T_NCHAR || t->id == SIM_T_NVARCHAR)
        return "TEXT COLLATE " SIM_STRING_COLLATION;
    /* exact decimal text that compares (and indexes) by numeric value; the
     * TEXT affinity turns a number on the other side of a comparison into
     * text, so the collation applies to literals and parameters as well */
    if (t->id == SIM_T_DECIMAL || t->id == SIM_T_MONEY || t->id == SIM_T_SMALLMONEY)
        return "TEXT COLLATE " SIM_DECIMAL_COLLATION;
    /* the same instant at different offsets is the same value */
    if (t->id == SIM_T_DATETIMEOFFSET) return "TEXT COLLATE " SIM_DTO_COLLATION;
    if (t->id == SIM_T_UNIQUEIDENTIFIER) return "TEXT COLLATE " SIM_GUID_COLLATION;
    /* a base type and its value: compared as sql_variant compares */
    if (t->id == SIM_T_SQL_VARIANT) return "TEXT COLLATE " SIM_VARIANT_COLLATION;
    return sim_type_affinity(t);
}

const char *sim_type_affinity(const sim_type *t) {
    switch (t->id) {
    case SIM_T_BIT: case SIM_T_TINYINT: case SIM_T_SMALLINT: case SIM_T_INT: case SIM_T_BIGINT:
        return "INT";
    case SIM_T_REAL: case SIM_T_FLOAT: return "REAL";
    case SIM_T_CHAR: case SIM_T_VARCHAR: case SIM_T_NCHAR: case SIM_T_NVARCHAR:
    case SIM_T_UNIQUEIDENTIFIER:
        return "TEXT";
    case SIM_T_BINARY: case SIM_T_VARBINARY: case SIM_T_HIERARCHYID: case SIM_T_GEOGRAPHY: case SIM_T_GEOMETRY:
        return "BLOB";
    case SIM_T_XML: case SIM_T_SQL_VARIANT: return "TEXT";
    default: return ""; /* no affinity: values stay as stored */
    }
}

/* ---- date/time --------------------------------------------------------- */
typedef struct dtv {
    int64_t days;  /* since 1970-01-01 */
    int64_t ticks; /* 100 ns of the day */
    int off_min;
    bool has_date, has_time, has_off;
    int frac_digits; /* as written */
} dtv;

static bool digits(const char *s, size_t n, size_t *i, int cnt, int *out) {
    int v = 0;
    for (int k = 0; k < cnt; k++) {
        if (*i >= n || !isdigit((unsigned char)s[*i])) return false;
        v = v * 10 + (s[(*i)++] - '0');
    }
    *out = v;
    return true;
}

static bool dt_parse(const char *s, size_t n, dtv *d) {
    memset(d, 0, sizeof *d);
    size_t i = 0;
    while (i < n && isspace((unsigned char)s[i])) i++;
    while (n > i && isspace((unsigned char)s[n - 1])) n--;
    int y, mo, da, h = 0, mi = 0, se = 0;
    size_t save = i;
    if (digits(s, n, &i, 4, &y)) {
        if (i < n && (s[i] == '-' || s[i] == '/')) {
            i++;
            if (!digits(s, n, &i, 2, &mo) || i >= n || (s[i] != '-' && s[i] != '/')) return false;
            i++;
            if (!digits(s, n, &i, 2, &da)) return false;
        } else if (digits(s, n, &i, 2, &mo) && digits(s, n, &i, 2, &da)) {
        } else return false;
        if (mo < 1 || mo > 12 || da < 1 || da > 31) return false;
        d->days = mcdc_days_from_civil(y, (unsigned)mo, (unsigned)da);
        d->has_date = true;
        if (i < n && (s[i] == 'T' || s[i] == ' ')) {
            i++;
            while (i < n && s[i] == ' ') i++;
        }
    } else i = save;
    if (i < n && isdigit((unsigned char)s[i])) {
        size_t j = i;
        if (!digits(s, n, &j, 2, &h)) {
            if (!digits(s, n, &j, 1, &h)) return false;
        }
        if (j < n && s[j] == ':') {
            i = j + 1;
            if (!digits(s, n, &i, 2, &mi)) return false;
            if (i < n && s[i] == ':') {
                i++;
                if (!digits(s, n, &i, 2, &se)) return false;
                if (i < n && s[i] == '.') {
                    i++;
                    int64_t f = 0;
                    int nd = 0;
                    while (i < n && isdigit((unsigned char)s[i])) {
                        if (nd < 7) { f = f * 10 + (s[i] - '0'); nd++; }
                        i++;
                    }
                    d->frac_digits = nd;
                    for (int k = nd; k < 7; k++) f *= 10;
                    d->ticks = f;
                }
            }
            if (h > 23 || mi > 59 || se > 59) return false;
            d->ticks += ((int64_t)h * 3600 + mi * 60 + se) * TICKS_PER_S;
            d->has_time = true;
        } else if (!d->has_date) return false;
    }
    while (i < n && s[i] == ' ') i++;
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) { d->has_off = true; i++; }
    else if (i < n && (s[i] == '+' || s[i] == '-')) {
        int sign = s[i] == '-' ? -1 : 1, oh, om = 0;
        i++;
        if (!digits(s, n, &i, 2, &oh)) return false;
        if (i < n && s[i] == ':') i++;
        if (i < n && !digits(s, n, &i, 2, &om)) return false;
        d->off_min = sign * (oh * 60 + om);
        d->has_off = true;
    }
    return i == n && (d->has_date || d->has_time);
}

/* Normalises days/ticks after arithmetic. */
static void dt_norm(dtv *d) {
    int64_t q = d->ticks / TICKS_PER_DAY, r = d->ticks % TICKS_PER_DAY;
    if (r < 0) { r += TICKS_PER_DAY; q--; }
    d->days += q;
    d->ticks = r;
}

/* Rounds ticks to a scale (0-7) or to datetime's 1/300 s (scale 100). */
static void dt_round(dtv *d, int scale) {
    if (scale == 100) {
        int64_t secs = d->ticks / TICKS_PER_S, frac = d->ticks % TICKS_PER_S;
        int64_t u = (frac * 300 + TICKS_PER_S / 2) / TICKS_PER_S; /* 1/300 units */
        int64_t ms = (u * 10 + 1) / 3;
        d->ticks = secs * TICKS_PER_S + ms * 10000;
    } else if (scale == 200) { /* smalldatetime: minutes */
        int64_t m = (d->ticks + 30 * TICKS_PER_S) / (60 * TICKS_PER_S);
        d->ticks = m * 60 * TICKS_PER_S;
    } else {
        int64_t unit = 1;
        for (int k = scale; k < 7; k++) unit *= 10;
        d->ticks = (d->ticks + unit / 2) / unit * unit;
    }
    dt_norm(d);
}

static int dt_format(const dtv *d0, int what, int scale, char *out, size_t cap) {
    /* what: 1 date, 2 time, 3 datetime, 4 datetimeoffset; scale 100 = datetime */
    dtv d = *d0;
    dt_round(&d, scale);
    int64_t y;
    unsigned mo, da;
    mcdc_civil_from_days(d.days, &y, &mo, &da);
    int64_t secs = d.ticks / TICKS_PER_S, frac = d.ticks % TICKS_PER_S;
    char fs[16] = "";
    int digs = scale == 100 ? 3 : scale == 200 ? 0 : scale;
    if (digs > 7) digs = 7;
    if (digs > 0) {
        int64_t f = frac;
        for (int k = digs; k < 7; k++) f /= 10;
        fs[0] = '.';
        for (int k = digs; k >= 1; k--) { fs[k] = (char)('0' + f % 10); f /= 10; }
        fs[digs + 1] = 0;
    }
    if (scale == 200) strcpy(fs, "");
    int h = (int)(secs / 3600), mi = (int)(secs / 60 % 60), se = (int)(secs % 60);
    if (what == 3 && y >= 0 && y <= 9999 && cap >= 32) {
        /* hot path (CAST(tran_end_time AS datetime2(3)) per row): no printf */
        char *o = out;
        int yy = (int)y;
        *o++ = (char)('0' + yy / 1000); *o++ = (char)('0' + yy / 100 % 10); *o++ = (char)('0' + yy / 10 % 10); *o++ = (char)('0' + yy % 10);
        *o++ = '-'; *o++ = (char)('0' + mo / 10); *o++ = (char)('0' + mo % 10);
        *o++ = '-'; *o++ = (char)('0' + da / 10); *o++ = (char)('0' + da % 10);
        *o++ = ' '; *o++ = (char)('0' + h / 10); *o++ = (char)('0' + h % 10);
        *o++ = ':'; *o++ = (char)('0' + mi / 10); *o++ = (char)('0' + mi % 10);
        *o++ = ':';
        int ss = scale == 200 ? 0 : se;
        *o++ = (char)('0' + ss / 10); *o++ = (char)('0' + ss % 10);
        for (const char *f = fs; *f; f++) *o++ = *f;
        *o = 0;
        return (int)(o - out);
    }
    switch (what) {
    case 1: return snprintf(out, cap, "%04lld-%02u-%02u", (long long)y, mo, da);
    case 2: return snprintf(out, cap, "%02d:%02d:%02d%s", h, mi, se, fs);
    case 3:
        return snprintf(out, cap, "%04lld-%02u-%02u %02d:%02d:%02d%s", (long long)y, mo, da, h, mi,
                        scale == 200 ? 0 : se, fs);
    default: {
        int o = d.off_min < 0 ? -d.off_min : d.off_min;
        return snprintf(out, cap, "%04lld-%02u-%02u %02d:%02d:%02d%s %c%02d:%02d", (long long)y, mo, da,
                        h, mi, se, fs, d.off_min < 0 ? '-' : '+', o / 60, o % 60);
    }
    }
}

void sim_format_datetime(int64_t us, const sim_type *t, char out[48]) {
    dtv d;
    memset(&d, 0, sizeof d);
    d.ticks = us * 10;
    d.has_date = d.has_time = true;
    dt_norm(&d);
    dt_format(&d, 3, t->id == SIM_T_DATETIME ? 100 : t->id == SIM_T_SMALLDATETIME ? 200 : t->scale,
              out, 48);
}

static int64_t dt_utc_ticks(const dtv *d) {
    return d->days * TICKS_PER_DAY + d->ticks - (int64_t)d->off_min * 60 * TICKS_PER_S;
}

/* ---- decimals ---------------------------------------------------------- */
/* Canonical decimal text with `scale` digits, half away from zero. */
static bool dec_format(const char *s, size_t n, int scale, char *out, size_t cap) {
    size_t i = 0;
    bool neg = false;
    char ip[80], fp[80];
    size_t ni = 0, nf = 0;
    while (i < n && isspace((unsigned char)s[i])) i++;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    while (i < n && isdigit((unsigned char)s[i]) && ni < 78) ip[ni++] = s[i++];
    if (i < n && s[i] == '.') { i++; while (i < n && isdigit((unsigned char)s[i]) && nf < 78) fp[nf++] = s[i++]; }
    while (i < n && isspace((unsigned char)s[i])) i++;
    if (i != n || (ni == 0 && nf == 0)) {
        /* scientific notation: go through double */
        char tmp[64];
        if (n >= sizeof tmp) return false;
        memcpy(tmp, s, n);
        tmp[n] = 0;
        char *e;
        double d = strtod(tmp, &e);
        if (*e || !isfinite(d)) return false;
        char t2[400];
        snprintf(t2, sizeof t2, "%.*f", scale, d);
        return dec_format(t2, strlen(t2), scale, out, cap);
    }
    /* round */
    char digs[160];
    size_t nd = 0;
    for (size_t k = 0; k < ni; k++) digs[nd++] = ip[k];
    for (int k = 0; k < scale; k++) digs[nd++] = (size_t)k < nf ? fp[k] : '0';
    bool up = (size_t)scale < nf && fp[scale] >= '5';
    if (up) {
        size_t k = nd;
        while (k > 0) {
            if (digs[k - 1] == '9') { digs[k - 1] = '0'; k--; }
            else { digs[k - 1]++; break; }
        }
        if (k == 0) { memmove(digs + 1, digs, nd); digs[0] = '1'; nd++; ni++; }
    }
    size_t intd = nd - (size_t)scale, st = 0;
    while (st + 1 < intd && digs[st] == '0') st++;
    bool zero = true;
    for (size_t k = st; k < nd; k++) if (digs[k] != '0') zero = false;
    size_t o = 0;
    if (neg && !zero && o + 1 < cap) out[o++] = '-';
    if (intd == 0 && o + 1 < cap) out[o++] = '0';
    for (size_t k = st; k < intd && o + 1 < cap; k++) out[o++] = digs[k];
    if (scale > 0 && o + 1 < cap) out[o++] = '.';
    for (size_t k = intd; k < nd && o + 1 < cap; k++) out[o++] = digs[k];
    out[o] = 0;
    return true;
}

/* ---- hex / guid -------------------------------------------------------- */
static const char HEX[] = "0123456789ABCDEF";
static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* ---- the conversion ---------------------------------------------------- */
/* The value a conversion reads: a SQLite value, or the base value of a
 * sql_variant (orig NULL). */
typedef struct sv {
    sqlite3_value *orig;
    int type;               /* SQLITE_INTEGER ... */
    int64_t i;
    double f;
    const unsigned char *p; /* TEXT / BLOB bytes */
    int n;
    char num[48];           /* the text of a number */
    bool have_num;
} sv;

static void sv_of(sv *x, sqlite3_value *v) {
    memset(x, 0, sizeof *x);
    x->orig = v;
    x->type = sqlite3_value_type(v);
    if (x->type == SQLITE_INTEGER) x->i = sqlite3_value_int64(v);
    else if (x->type == SQLITE_FLOAT) x->f = sqlite3_value_double(v);
    else if (x->type == SQLITE_TEXT) { x->p = sqlite3_value_text(v); x->n = sqlite3_value_bytes(v); }
    else if (x->type == SQLITE_BLOB) { x->p = sqlite3_value_blob(v); x->n = sqlite3_value_bytes(v); }
}

/* Text as SQLite gives it for the value (numbers as sqlite3_value_text). */
static const unsigned char *sv_text(sv *x) {
    if (x->type == SQLITE_INTEGER || x->type == SQLITE_FLOAT) {
        if (!x->have_num) {
            if (x->type == SQLITE_INTEGER) snprintf(x->num, sizeof x->num, "%lld", (long long)x->i);
            else sqlite3_snprintf((int)sizeof x->num, x->num, "%!.15g", x->f);
            x->have_num = true;
        }
        return (const unsigned char *)x->num;
    }
    return x->p ? x->p : (const unsigned char *)"";
}
static int sv_bytes(sv *x) {
    if (x->type == SQLITE_INTEGER || x->type == SQLITE_FLOAT) return (int)strlen((const char *)sv_text(x));
    return x->n;
}
static const void *sv_blob(sv *x) { return x->p; }
static double sv_double(sv *x) {
    if (x->type == SQLITE_FLOAT) return x->f;
    if (x->type == SQLITE_INTEGER) return (double)x->i;
    return x->p ? strtod((const char *)sv_text(x), NULL) : 0;
}
static void sv_text_of(sv *x, char *buf, size_t cap) { snprintf(buf, cap, "%.*s", sv_bytes(x), (const char *)sv_text(x)); }
static void sv_result(sqlite3_context *ctx, sv *x) {
    if (x->orig) { sqlite3_result_value(ctx, x->orig); return; }
    switch (x->type) {
    case SQLITE_INTEGER: sqlite3_result_int64(ctx, x->i); break;
    case SQLITE_FLOAT: sqlite3_result_double(ctx, x->f); break;
    case SQLITE_BLOB: sqlite3_result_blob(ctx, x->p, x->n, SQLITE_TRANSIENT); break;
    case SQLITE_TEXT: sqlite3_result_text(ctx, (const char *)x->p, x->n, SQLITE_TRANSIENT); break;
    default: sqlite3_result_null(ctx); break;
    }
}

static void result_utf8_trunc(sqlite3_context *ctx, const char *s, size_t n, int32_t chars) {
    if (chars > 0) {
        size_t i = 0;
        int32_t c = 0;
        while (i < n && c < chars) {
            i++;
            while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
            c++;
        }
        n = i;
    }
    sqlite3_result_text(ctx, s, (int)n, SQLITE_TRANSIENT);
}

static void conv_err(sqlite3_context *ctx, const char *what, const char *type) {
    char m[256];
    snprintf(m, sizeof m, "Conversion failed when converting %s to data type %s.", what, type);
    sqlite3_result_error(ctx, m, -1);
}

static void float_text(double d, char *buf, size_t cap) {
    if (d == floor(d) && fabs(d) < 1e15) snprintf(buf, cap, "%.0f", d);
    else snprintf(buf, cap, "%.17g", d);
    /* shortest representation that round-trips */
    for (int p = 1; p <= 17; p++) {
        char t[64];
        snprintf(t, sizeof t, "%.*g", p, d);
        if (strtod(t, NULL) == d) { snprintf(buf, cap, "%s", t); break; }
    }
}

/* Is s[0..n) already "YYYY-MM-DD HH:MM:SS[.f{digits}]" with exactly `digits`
 * fraction digits (the storage form of datetime2(digits))? */
static bool is_canonical_dt(const unsigned char *s, int n, int digits) {
    int want = 19 + (digits > 0 ? digits + 1 : 0);
    if (n != want) return false;
    static const char PAT[] = "dddd-dd-dd dd:dd:dd";
    for (int k = 0; k < 19; k++) {
        if (PAT[k] == 'd' ? (s[k] < '0' || s[k] > '9') : s[k] != (unsigned char)PAT[k]) return false;
    }
    if (digits > 0) {
        if (s[19] != '.') return false;
        for (int k = 20; k < n; k++) if (s[k] < '0' || s[k] > '9') return false;
    }
    return true;
}

static void convert(sqlite3_context *ctx, sv *v, const sim_type *t, int style) {
    int vt = v->type;
    /* hot paths of the change-table read: LSN -> hex text, datetime text
     * already in the target's form (CAST(tran_end_time AS datetime2(3))) */
    if (vt == SQLITE_BLOB && style == 1 && (t->id == SIM_T_VARCHAR || t->id == SIM_T_NVARCHAR) &&
        sv_bytes(v) <= 64) {
        static const char HX[] = "0123456789ABCDEF";
        const uint8_t *p = sv_blob(v);
        int n = sv_bytes(v), o = 0;
        char h[132];
        h[o++] = '0';
        h[o++] = 'x';
        for (int k = 0; k < n; k++) { h[o++] = HX[p[k] >> 4]; h[o++] = HX[p[k] & 15]; }
        if (t->length > 0 && o > t->length) o = t->length;
        sqlite3_result_text(ctx, h, o, SQLITE_TRANSIENT);
        return;
    }
    if (vt == SQLITE_TEXT && t->id == SIM_T_DATETIME2 &&
        is_canonical_dt(sv_text(v), sv_bytes(v), t->scale)) {
        sv_result(ctx, v);
        return;
    }
    char buf[512], tn[48] = "";
    if (vt == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    /* the type name only for messages (TN(), formatted when one is raised):
     * formatting it per row costs a printf, and a CAST per row is common
     * (reconcile's bucket count casts each key four times) */
#define TN() (tn[0] ? tn : (sim_type_format(t, tn, sizeof tn), tn))
    switch (t->id) {
    case SIM_T_BIT: case SIM_T_TINYINT: case SIM_T_SMALLINT: case SIM_T_INT: case SIM_T_BIGINT: {
        int64_t i;
        if (vt == SQLITE_INTEGER) i = v->i;
        else if (vt == SQLITE_FLOAT) {
            double d = sv_double(v);
            if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) {
                char m[128];
                snprintf(m, sizeof m, "Arithmetic overflow error converting float to data type %s.", TN());
                sqlite3_result_error(ctx, m, -1);
                return;
            }
            i = (int64_t)d;
        } else if (vt == SQLITE_BLOB) {
            const uint8_t *p = sv_blob(v);
            int n = sv_bytes(v);
            uint64_t u = 0;
            for (int k = n > 8 ? n - 8 : 0; k < n; k++) u = (u << 8) | p[k];
            i = (int64_t)u;
        } else {
            sv_text_of(v, buf, sizeof buf);
            char *e;
            const char *s = buf;
            while (isspace((unsigned char)*s)) s++;
            if (t->id == SIM_T_BIT && mcdc_str_ieq(s, "true")) i = 1;
            else if (t->id == SIM_T_BIT && mcdc_str_ieq(s, "false")) i = 0;
            else {
                long long ll = strtoll(s, &e, 10);
                while (isspace((unsigned char)*e)) e++;
                if (*e == '.' && t->id != SIM_T_BIT) {
                    conv_err(ctx, "the varchar value", TN());
                    return;
                }
                if (*e || e == s) {
                    char m[600];
                    snprintf(m, sizeof m, "Conversion failed when converting the varchar value '%.200s' to data type %s.",
                             buf, TN());
                    sqlite3_result_error(ctx, m, -1);
                    return;
                }
                i = ll;
            }
        }
        if (t->id == SIM_T_BIT) i = i != 0;
        int64_t lo = t->id == SIM_T_TINYINT ? 0 : t->id == SIM_T_SMALLINT ? -32768 : t->id == SIM_T_INT ? INT32_MIN : INT64_MIN;
        int64_t hi = t->id == SIM_T_TINYINT ? 255 : t->id == SIM_T_SMALLINT ? 32767 : t->id == SIM_T_INT ? INT32_MAX : INT64_MAX;
        if (i < lo || i > hi) {
            char m[128];
            snprintf(m, sizeof m, "Arithmetic overflow error converting expression to data type %s.", TN());
            sqlite3_result_error(ctx, m, -1);
            return;
        }
        sqlite3_result_int64(ctx, i);
        return;
    }
    case SIM_T_REAL: case SIM_T_FLOAT: {
        double d;
        if (vt == SQLITE_TEXT) {
            sv_text_of(v, buf, sizeof buf);
            char *e;
            d = strtod(buf, &e);
            while (isspace((unsigned char)*e)) e++;
            if (*e) { conv_err(ctx, "the varchar value", TN()); return; }
        } else d = sv_double(v);
        if (t->id == SIM_T_REAL) d = (double)(float)d;
        sqlite3_result_double(ctx, d);
        return;
    }
    case SIM_T_DECIMAL: case SIM_T_MONEY: case SIM_T_SMALLMONEY: {
        char out[96];
        if (vt == SQLITE_INTEGER && t->scale <= 38) {
            /* an integer's canonical text is its digits and `scale` zeros
             * (dec_format's of its "%lld"), written without a printf */
            uint64_t u = v->i < 0 ? 0 - (uint64_t)v->i : (uint64_t)v->i;
            char d[20];
            int nd = 0, o = 0;
            do { d[nd++] = (char)('0' + u % 10); u /= 10; } while (u);
            if (v->i != 0 && nd > t->precision - t->scale) {
                sqlite3_result_error(ctx, "Arithmetic overflow error converting varchar to data type numeric.", -1);
                return;
            }
            if (v->i < 0) out[o++] = '-';
            while (nd > 0) out[o++] = d[--nd];
            if (t->scale > 0) out[o++] = '.';
            for (int k = 0; k < t->scale; k++) out[o++] = '0';
            sqlite3_result_text(ctx, out, o, SQLITE_TRANSIENT);
            return;
        }
        if (vt == SQLITE_INTEGER) snprintf(buf, sizeof buf, "%lld", (long long)v->i);
        else if (vt == SQLITE_FLOAT) snprintf(buf, sizeof buf, "%.*f", t->scale + 1 > 17 ? 17 : t->scale + 1, sv_double(v));
        else sv_text_of(v, buf, sizeof buf);
        if (vt == SQLITE_FLOAT) {
            /* round via double with enough digits */
            snprintf(buf, sizeof buf, "%.*f", t->scale, sv_double(v));
        }
        if (!dec_format(buf, strlen(buf), t->scale, out, sizeof out)) {
            conv_err(ctx, "the varchar value", TN());
            return;
        }
        size_t intd = 0;
        for (const char *p = out; *p && *p != '.'; p++) if (isdigit((unsigned char)*p)) intd++;
        if (strcmp(out, "0") != 0 && !(out[0] == '0' && out[1] == '.') && !(out[0] == '-' && out[1] == '0') &&
            (int)intd > t->precision - t->scale) {
            sqlite3_result_error(ctx, "Arithmetic overflow error converting varchar to data type numeric.", -1);
            return;
        }
        sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
        return;
    }
    case SIM_T_DATE: case SIM_T_TIME: case SIM_T_DATETIME: case SIM_T_SMALLDATETIME:
    case SIM_T_DATETIME2: case SIM_T_DATETIMEOFFSET: {
        dtv d;
        sv_text_of(v, buf, sizeof buf);
        if (vt == SQLITE_INTEGER && (t->id == SIM_T_DATETIME || t->id == SIM_T_SMALLDATETIME)) {
            memset(&d, 0, sizeof d);
            d.days = mcdc_days_from_civil(1900, 1, 1) + v->i;
            d.has_date = d.has_time = true;
        } else if (vt != SQLITE_TEXT || !dt_parse(buf, strlen(buf), &d)) {
            char m[600];
            snprintf(m, sizeof m, "Conversion failed when converting date and/or time from character string.");
            sqlite3_result_error(ctx, m, -1);
            return;
        }
        char out[64];
        if (t->id == SIM_T_DATE) dt_format(&d, 1, 7, out, sizeof out);
        else if (t->id == SIM_T_TIME) dt_format(&d, 2, t->scale, out, sizeof out);
        else if (t->id == SIM_T_DATETIMEOFFSET) dt_format(&d, 4, t->scale, out, sizeof out);
        else {
            if (!d.has_date) d.days = mcdc_days_from_civil(1900, 1, 1);
            dt_format(&d, 3, t->id == SIM_T_DATETIME ? 100 : t->id == SIM_T_SMALLDATETIME ? 200 : t->scale,
                      out, sizeof out);
        }
        sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
        return;
    }
    case SIM_T_CHAR: case SIM_T_VARCHAR: case SIM_T_NCHAR: case SIM_T_NVARCHAR: {
        if (vt == SQLITE_BLOB) {
            const uint8_t *p = sv_blob(v);
            int n = sv_bytes(v);
            if (style == 1 || style == 2) {
                size_t cap = (size_t)n * 2 + 3, o = 0;
                char stack[96];
                char *h = cap <= sizeof stack ? stack : mcdc_malloc(cap);
                if (!h) { sqlite3_result_error_nomem(ctx); return; }
                if (style == 1) { h[o++] = '0'; h[o++] = 'x'; }
                for (int k = 0; k < n; k++) { h[o++] = HEX[p[k] >> 4]; h[o++] = HEX[p[k] & 15]; }
                result_utf8_trunc(ctx, h, o, t->length);
                if (h != stack) mcdc_free(h);
            } else result_utf8_trunc(ctx, (const char *)p, (size_t)n, t->length);
            return;
        }
        if (vt == SQLITE_FLOAT) {
            float_text(sv_double(v), buf, sizeof buf);
            result_utf8_trunc(ctx, buf, strlen(buf), t->length);
            return;
        }
        const char *s = (const char *)sv_text(v);
        size_t n = (size_t)sv_bytes(v);
        dtv d;
        if ((style == 126 || style == 127) && n < 64 && dt_parse(s, n, &d) && d.has_date) {
            char out[64];
            int digs = d.frac_digits;
            dt_format(&d, d.has_time ? 3 : 1, digs > 7 ? 7 : digs, out, sizeof out);
            if (d.has_time) out[10] = 'T';
            /* style 126 leaves out an all-zero fraction */
            char *dot = strchr(out, '.');
            if (dot) {
                bool zero = true;
                for (char *q = dot + 1; *q && isdigit((unsigned char)*q); q++) if (*q != '0') zero = false;
                if (zero) {
                    char *q = dot + 1;
                    while (*q && isdigit((unsigned char)*q)) q++;
                    memmove(dot, q, strlen(q) + 1);
                }
            }
            if (d.has_off) {
                char *sp = strchr(out + 11, ' ');
                if (sp) memmove(sp, sp + 1, strlen(sp));
            }
            result_utf8_trunc(ctx, out, strlen(out), t->length);
            return;
        }
        if (t->id == SIM_T_CHAR || t->id == SIM_T_NCHAR) {
            /* pad to length */
            size_t chars = 0;
            for (size_t k = 0; k < n; k++) if (((unsigned char)s[k] & 0xC0) != 0x80) chars++;
            if ((int32_t)chars < t->length) {
                size_t pad = (size_t)t->length - chars;
                char *p2 = mcdc_malloc(n + pad + 1);
                if (!p2) { sqlite3_result_error_nomem(ctx); return; }
                memcpy(p2, s, n);
                memset(p2 + n, ' ', pad);
                sqlite3_result_text(ctx, p2, (int)(n + pad), SQLITE_TRANSIENT);
                mcdc_free(p2);
                return;
            }
        }
        result_utf8_trunc(ctx, s ? s : "", s ? n : 0, t->length);
        return;
    }
    case SIM_T_BINARY: case SIM_T_VARBINARY: {
        uint8_t small[256];
        uint8_t *out = small;
        size_t on = 0;
        if (vt == SQLITE_BLOB) {
            const uint8_t *p = sv_blob(v);
            on = (size_t)sv_bytes(v);
            if (on > sizeof small) { out = mcdc_malloc(on); if (!out) { sqlite3_result_error_nomem(ctx); return; } }
            if (on) memcpy(out, p, on);
        } else if (vt == SQLITE_INTEGER) {
            int64_t i = v->i;
            int w = t->length > 0 && t->length < 8 ? t->length : (i >= INT32_MIN && i <= INT32_MAX ? 4 : 8);
            for (int k = 0; k < w; k++) small[k] = (uint8_t)((uint64_t)i >> (8 * (w - 1 - k)));
            on = (size_t)w;
        } else {
            const char *s = (const char *)sv_text(v);
            size_t n = (size_t)sv_bytes(v);
            if (style == 1 || style == 2) {
                size_t i = 0;
                if (style == 1) {
                    if (n < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) {
                        sqlite3_result_error(ctx, "Error converting data type varchar to varbinary.", -1);
                        return;
                    }
                    i = 2;
                }
                size_t hn = n - i;
                on = (hn + 1) / 2;
                if (on > sizeof small) { out = mcdc_malloc(on); if (!out) { sqlite3_result_error_nomem(ctx); return; } }
                size_t o = 0;
                if (hn % 2) {
                    int a = hexval(s[i]);
                    if (a < 0) goto badhex;
                    out[o++] = (uint8_t)a;
                    i++;
                }
                for (; i + 1 < n + 1 && i < n; i += 2) {
                    int a = hexval(s[i]), b = hexval(s[i + 1]);
                    if (a < 0 || b < 0) goto badhex;
                    out[o++] = (uint8_t)(a * 16 + b);
                }
            } else {
                on = n;
                if (on > sizeof small) { out = mcdc_malloc(on); if (!out) { sqlite3_result_error_nomem(ctx); return; } }
                if (n) memcpy(out, s, n);
            }
        }
        if (t->length > 0 && on > (size_t)t->length) on = (size_t)t->length;
        if (t->id == SIM_T_BINARY && t->length > 0 && on < (size_t)t->length) {
            /* binary(n) pads on the right with zeros */
            uint8_t *p2 = mcdc_calloc(1, (size_t)t->length);
            if (!p2) { if (out != small) mcdc_free(out); sqlite3_result_error_nomem(ctx); return; }
            if (on) memcpy(p2, out, on);
            sqlite3_result_blob(ctx, p2, t->length, SQLITE_TRANSIENT);
            mcdc_free(p2);
        } else sqlite3_result_blob(ctx, out, (int)on, SQLITE_TRANSIENT);
        if (out != small) mcdc_free(out);
        return;
    badhex:
        if (out != small) mcdc_free(out);
        sqlite3_result_error(ctx, "Error converting data type varchar to varbinary.", -1);
        return;
    }
    case SIM_T_UNIQUEIDENTIFIER: {
        char out[40];
        if (vt == SQLITE_BLOB && sv_bytes(v) == 16) {
            const uint8_t *p = sv_blob(v);
            static const int ord[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
            size_t o = 0;
            for (int k = 0; k < 16; k++) {
                if (k == 4 || k == 6 || k == 8 || k == 10) out[o++] = '-';
                out[o++] = HEX[p[ord[k]] >> 4];
                out[o++] = HEX[p[ord[k]] & 15];
            }
            out[o] = 0;
        } else {
            sv_text_of(v, buf, sizeof buf);
            const char *s = buf;
            if (*s == '{') s++;
            size_t o = 0;
            for (int k = 0; k < 36; k++) {
                bool dash = k == 8 || k == 13 || k == 18 || k == 23;
                if (dash ? s[k] != '-' : hexval(s[k]) < 0) {
                    sqlite3_result_error(ctx, "Conversion failed when converting from a character string to uniqueidentifier.", -1);
                    return;
                }
                out[o++] = (char)toupper((unsigned char)s[k]);
            }
            out[o] = 0;
        }
        sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
        return;
    }
    default: break; /* sql_variant, xml, the CLR types: sim_val_convert */
    }
    sv_result(ctx, v);
}
#undef TN

/* The conversions of hierarchyid, geography, geometry and xml (targets). */
static void convert_udt(sqlite3_context *ctx, sv *v, const sim_type *t) {
    char msg[SIM_UDT_MSG], err[SIM_UDT_MSG + 16];
    mcdc_buf b = {0};
    int rc = 0;
    bool blob = v->type == SQLITE_BLOB;
    const char *s = (const char *)sv_text(v);
    size_t n = (size_t)sv_bytes(v);
    if (t->id == SIM_T_XML) {
        rc = sim_xml_normalize(s, n, &b, msg);
        if (!rc) sqlite3_result_text(ctx, b.data ? (const char *)b.data : "", (int)b.len, SQLITE_TRANSIENT);
    } else if (t->id == SIM_T_HIERARCHYID) {
        if (blob) { /* binary: must decode */
            rc = sim_hid_to_text(v->p, n, &b, msg);
            if (!rc) sv_result(ctx, v);
        } else {
            rc = sim_hid_from_text(s, n, &b, msg);
            if (!rc) sqlite3_result_blob(ctx, b.data ? (const void *)b.data : "", (int)b.len, SQLITE_TRANSIENT);
        }
    } else { /* geography, geometry: the serialization, or WKT with the default SRID */
        bool geog = t->id == SIM_T_GEOGRAPHY;
        if (blob) {
            rc = sim_geo_check(v->p, n, geog, msg);
            if (!rc) sv_result(ctx, v);
        } else {
            rc = sim_geo_from_wkt(s, n, geog ? 4326 : 0, geog, &b, msg);
            if (!rc) sqlite3_result_blob(ctx, b.data ? (const void *)b.data : "", (int)b.len, SQLITE_TRANSIENT);
        }
    }
    if (rc) {
        snprintf(err, sizeof err, "#%d %s", rc, msg);
        sqlite3_result_error(ctx, err, -1);
    }
    mcdc_buf_free(&b);
}

void sim_val_convert(sqlite3_context *ctx, sqlite3_value *v, const sim_type *t, int style) {
    sv x;
    sv_of(&x, v);
    if (x.type == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    if (t->id == SIM_T_SQL_VARIANT) { sim_variant_result(ctx, v, NULL); return; }
    sim_type base;
    const char *val;
    size_t vn;
    uint8_t *bin = NULL;
    if (x.type == SQLITE_TEXT && x.n > 0 && x.p[0] == SIM_VARIANT_MARK &&
        sim_variant_split((const char *)x.p, (size_t)x.n, &base, &val, &vn)) {
        /* a sql_variant converts from its base value */
        x.orig = NULL;
        x.have_num = false;
        char num[64];
        switch (base.id) {
        case SIM_T_BIT: case SIM_T_TINYINT: case SIM_T_SMALLINT: case SIM_T_INT: case SIM_T_BIGINT:
            snprintf(num, sizeof num, "%.*s", (int)(vn < 63 ? vn : 63), val);
            x.type = SQLITE_INTEGER;
            x.i = strtoll(num, NULL, 10);
            break;
        case SIM_T_REAL: case SIM_T_FLOAT:
            snprintf(num, sizeof num, "%.*s", (int)(vn < 63 ? vn : 63), val);
            x.type = SQLITE_FLOAT;
            x.f = strtod(num, NULL);
            break;
        case SIM_T_BINARY: case SIM_T_VARBINARY:
            bin = mcdc_malloc(vn / 2 + 1);
            if (!bin) { sqlite3_result_error_nomem(ctx); return; }
            for (size_t k = 0; 2 * k + 1 < vn; k++) bin[k] = (uint8_t)(hexval(val[2 * k]) * 16 + hexval(val[2 * k + 1]));
            x.type = SQLITE_BLOB;
            x.p = bin;
            x.n = (int)(vn / 2);
            break;
        default:
            x.p = (const unsigned char *)val;
            x.n = (int)vn;
            break;
        }
    }
    if (t->id == SIM_T_XML || t->id == SIM_T_HIERARCHYID || t->id == SIM_T_GEOGRAPHY || t->id == SIM_T_GEOMETRY)
        convert_udt(ctx, &x, t);
    else convert(ctx, &x, t, style);
    mcdc_free(bin);
}

/* ---- SQLite functions -------------------------------------------------- */
static void aux_free(void *p) { mcdc_free(p); }

static const sim_type *type_arg(sqlite3_context *ctx, sqlite3_value *v, int argi) {
    sim_type *t = sqlite3_get_auxdata(ctx, argi);
    if (t) return t;
    t = mcdc_malloc(sizeof *t);
    if (!t) return NULL;
    const unsigned char *s = sqlite3_value_text(v);
    if (!s || !sim_type_parse(t, (const char *)s, strlen((const char *)s))) {
        mcdc_free(t);
        return NULL;
    }
    sqlite3_set_auxdata(ctx, argi, t, aux_free);
    return sqlite3_get_auxdata(ctx, argi) ? sqlite3_get_auxdata(ctx, argi) : NULL;
}

static void fn_convert(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    sim_type tt;
    const sim_type *t = sqlite3_get_auxdata(ctx, 1);
    if (!t) {
        const unsigned char *s = sqlite3_value_text(argv[1]);
        if (!s || !sim_type_parse(&tt, (const char *)s, strlen((const char *)s))) {
            sqlite3_result_error(ctx, "Type is not a defined system type.", -1);
            return;
        }
        t = type_arg(ctx, argv[1], 1);
        if (!t) t = &tt;
    }
    int style = argc > 2 && sqlite3_value_type(argv[2]) != SQLITE_NULL ? sqlite3_value_int(argv[2]) : -1;
    sim_val_convert(ctx, argv[0], t, style);
}

static void fn_lsn_add(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    uint8_t b[10] = {0};
    int n = sqlite3_value_bytes(argv[0]);
    const uint8_t *p = sqlite3_value_blob(argv[0]);
    if (n > 10) n = 10;
    if (n > 0) memcpy(b + (10 - n), p, (size_t)n);
    int64_t delta = sqlite3_value_int64(argv[1]);
    int carry = (int)delta;
    for (int k = 9; k >= 0 && carry != 0; k--) {
        int v = b[k] + carry;
        carry = 0;
        if (v > 255) { v -= 256; carry = 1; }
        else if (v < 0) { v += 256; carry = -1; }
        b[k] = (uint8_t)v;
    }
    sqlite3_result_blob(ctx, b, 10, SQLITE_TRANSIENT);
}

static void fn_quotename(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    const char *s = (const char *)sqlite3_value_text(argv[0]);
    size_t n = (size_t)sqlite3_value_bytes(argv[0]);
    char open = '[', close = ']';
    if (argc > 1) {
        const char *q = (const char *)sqlite3_value_text(argv[1]);
        if (q && (*q == '"' || *q == '\'')) open = close = *q;
        else if (q && (*q == '(' || *q == ')')) { open = '('; close = ')'; }
    }
    if (n > 128) { sqlite3_result_null(ctx); return; }
    char out[300];
    size_t o = 0;
    out[o++] = open;
    for (size_t k = 0; k < n; k++) {
        out[o++] = s[k];
        if (s[k] == close) out[o++] = close;
    }
    out[o++] = close;
    sqlite3_result_text(ctx, out, (int)o, SQLITE_TRANSIENT);
}

static const sim_clock_src *clk_of(sqlite3_context *ctx) { return sqlite3_user_data(ctx); }

static dtv dt_from_us(int64_t us) {
    dtv d;
    memset(&d, 0, sizeof d);
    d.ticks = us * 10;
    d.has_date = d.has_time = true;
    dt_norm(&d);
    return d;
}

static void fn_now(sqlite3_context *ctx, int kind) {
    const sim_clock_src *c = clk_of(ctx);
    int64_t utc = c->utc_us(c->ctx);
    int64_t fl = utc >= 0 ? utc / 1000000 : (utc - 999999) / 1000000;
    int off = kind == 1 || kind == 3 ? 0 : c->offset_s(c->ctx, fl);
    dtv d = dt_from_us(utc + (int64_t)off * 1000000);
    d.off_min = off / 60;
    char out[64];
    if (kind == 0 || kind == 1) dt_format(&d, 3, 7, out, sizeof out);      /* sysdatetime / utc */
    else if (kind == 2 || kind == 3) dt_format(&d, 3, 100, out, sizeof out); /* getdate / utc */
    else dt_format(&d, 4, 7, out, sizeof out);                               /* sysdatetimeoffset */
    sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
}
static void fn_sysdatetime(sqlite3_context *c, int a, sqlite3_value **v) { (void)a; (void)v; fn_now(c, 0); }
static void fn_sysutcdatetime(sqlite3_context *c, int a, sqlite3_value **v) { (void)a; (void)v; fn_now(c, 1); }
static void fn_getdate(sqlite3_context *c, int a, sqlite3_value **v) { (void)a; (void)v; fn_now(c, 2); }
static void fn_getutcdate(sqlite3_context *c, int a, sqlite3_value **v) { (void)a; (void)v; fn_now(c, 3); }
static void fn_sysdatetimeoffset(sqlite3_context *c, int a, sqlite3_value **v) { (void)a; (void)v; fn_now(c, 4); }

static void fn_zone(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc; (void)argv;
    const sim_clock_src *c = clk_of(ctx);
    char buf[128];
    sqlite3_result_text(ctx, c->zone_name(c->ctx, buf, sizeof buf), -1, SQLITE_TRANSIENT);
}

static void fn_spid(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc; (void)argv;
    const sim_clock_src *c = clk_of(ctx);
    sqlite3_result_int(ctx, c->spid ? c->spid(c->ctx) : 0);
}

static void fn_serverproperty(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const sim_clock_src *c = clk_of(ctx);
    const char *p = (const char *)sqlite3_value_text(argv[0]);
    char buf[64];
    if (!p) { sqlite3_result_null(ctx); return; }
    if (mcdc_str_ieq(p, "ProductMajorVersion")) {
        snprintf(buf, sizeof buf, "%d", c->product_major);
        sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
    } else if (mcdc_str_ieq(p, "ProductVersion")) {
        snprintf(buf, sizeof buf, "%d.0.4135.4", c->product_major);
        sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
    } else if (mcdc_str_ieq(p, "EngineEdition")) sqlite3_result_int(ctx, 3);
    else if (mcdc_str_ieq(p, "Edition")) sqlite3_result_text(ctx, "Developer Edition (64-bit)", -1, SQLITE_STATIC);
    else if (mcdc_str_ieq(p, "ServerName") || mcdc_str_ieq(p, "MachineName"))
        sqlite3_result_text(ctx, "mssql-cdc-sim", -1, SQLITE_STATIC);
    else if (mcdc_str_ieq(p, "ProductLevel")) sqlite3_result_text(ctx, "RTM", -1, SQLITE_STATIC);
    else sqlite3_result_null(ctx);
}

static void fn_newid(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc; (void)argv;
    uint8_t r[16];
    sqlite3_randomness(16, r);
    char out[40];
    size_t o = 0;
    for (int k = 0; k < 16; k++) {
        if (k == 4 || k == 6 || k == 8 || k == 10) out[o++] = '-';
        out[o++] = HEX[r[k] >> 4];
        out[o++] = HEX[r[k] & 15];
    }
    sqlite3_result_text(ctx, out, (int)o, SQLITE_TRANSIENT);
}

static void fn_concat(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    mcdc_buf b = {0};
    for (int k = 0; k < argc; k++) {
        const unsigned char *s = sqlite3_value_text(argv[k]);
        if (s && mcdc_buf_append(&b, s, (size_t)sqlite3_value_bytes(argv[k]), NULL) != MCDC_OK) {
            mcdc_buf_free(&b);
            sqlite3_result_error_nomem(ctx);
            return;
        }
    }
    sqlite3_result_text(ctx, b.data ? (const char *)b.data : "", (int)b.len, SQLITE_TRANSIENT);
    mcdc_buf_free(&b);
}

static void fn_floor(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_numeric_type(argv[0]) == SQLITE_INTEGER) sqlite3_result_int64(ctx, sqlite3_value_int64(argv[0]));
    else if (sqlite3_value_type(argv[0]) == SQLITE_NULL) sqlite3_result_null(ctx);
    else sqlite3_result_double(ctx, floor(sqlite3_value_double(argv[0])));
}
static void fn_ceiling(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_numeric_type(argv[0]) == SQLITE_INTEGER) sqlite3_result_int64(ctx, sqlite3_value_int64(argv[0]));
    else if (sqlite3_value_type(argv[0]) == SQLITE_NULL) sqlite3_result_null(ctx);
    else sqlite3_result_double(ctx, ceil(sqlite3_value_double(argv[0])));
}

/* Date parts. */
typedef enum { DP_YEAR, DP_QUARTER, DP_MONTH, DP_DAYOFYEAR, DP_DAY, DP_WEEK, DP_WEEKDAY, DP_HOUR, DP_MINUTE,
               DP_SECOND, DP_MS, DP_US, DP_NS, DP_TZOFFSET, DP_BAD } datepart;
static datepart part_of(sqlite3_value *v) {
    const char *p = (const char *)sqlite3_value_text(v);
    static const struct { const char *n; datepart d; } M[] = {
        {"year", DP_YEAR}, {"yy", DP_YEAR}, {"yyyy", DP_YEAR}, {"quarter", DP_QUARTER}, {"qq", DP_QUARTER},
        {"month", DP_MONTH}, {"mm", DP_MONTH}, {"m", DP_MONTH}, {"dayofyear", DP_DAYOFYEAR}, {"dy", DP_DAYOFYEAR},
        {"day", DP_DAY}, {"dd", DP_DAY}, {"d", DP_DAY}, {"week", DP_WEEK}, {"wk", DP_WEEK},
        {"weekday", DP_WEEKDAY}, {"dw", DP_WEEKDAY}, {"hour", DP_HOUR}, {"hh", DP_HOUR},
        {"minute", DP_MINUTE}, {"mi", DP_MINUTE}, {"n", DP_MINUTE}, {"second", DP_SECOND}, {"ss", DP_SECOND},
        {"s", DP_SECOND}, {"millisecond", DP_MS}, {"ms", DP_MS}, {"microsecond", DP_US}, {"mcs", DP_US},
        {"nanosecond", DP_NS}, {"ns", DP_NS}, {"tzoffset", DP_TZOFFSET}, {"tz", DP_TZOFFSET},
    };
    if (!p) return DP_BAD;
    for (size_t k = 0; k < sizeof M / sizeof M[0]; k++) if (mcdc_str_ieq(M[k].n, p)) return M[k].d;
    return DP_BAD;
}

static bool arg_dt(sqlite3_context *ctx, sqlite3_value *v, dtv *d) {
    const char *s = (const char *)sqlite3_value_text(v);
    if (!s || !dt_parse(s, (size_t)sqlite3_value_bytes(v), d)) {
        sqlite3_result_error(ctx, "Conversion failed when converting date and/or time from character string.", -1);
        return false;
    }
    return true;
}

static void result_dt_like(sqlite3_context *ctx, const dtv *d, const dtv *like) {
    char out[64];
    if (like->has_off) dt_format(d, 4, like->frac_digits, out, sizeof out);
    else if (like->has_date && !like->has_time) dt_format(d, 1, 0, out, sizeof out);
    else if (!like->has_date) dt_format(d, 2, like->frac_digits, out, sizeof out);
    else dt_format(d, 3, like->frac_digits == 3 ? 100 : like->frac_digits, out, sizeof out);
    sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
}

static void fn_dateadd(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[1]) == SQLITE_NULL || sqlite3_value_type(argv[2]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return;
    }
    datepart p = part_of(argv[0]);
    int64_t n = sqlite3_value_int64(argv[1]);
    if (n > INT32_MAX || n < INT32_MIN) {
        sqlite3_result_error(ctx, "Arithmetic overflow error converting expression to data type int.", -1);
        return;
    }
    dtv d;
    if (!arg_dt(ctx, argv[2], &d)) return;
    dtv like = d;
    switch (p) {
    case DP_YEAR: case DP_QUARTER: case DP_MONTH: {
        int64_t y;
        unsigned m, dd;
        mcdc_civil_from_days(d.days, &y, &m, &dd);
        int64_t months = y * 12 + (m - 1) + n * (p == DP_YEAR ? 12 : p == DP_QUARTER ? 3 : 1);
        y = months >= 0 ? months / 12 : (months - 11) / 12;
        m = (unsigned)(months - y * 12 + 1);
        static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        unsigned lim = mdays[m - 1];
        if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) lim = 29;
        if (dd > lim) dd = lim;
        d.days = mcdc_days_from_civil(y, m, dd);
        break;
    }
    case DP_DAY: case DP_DAYOFYEAR: case DP_WEEKDAY: d.days += n; break;
    case DP_WEEK: d.days += 7 * n; break;
    case DP_HOUR: d.days += n / 24; d.ticks += n % 24 * 3600 * TICKS_PER_S; break;
    case DP_MINUTE: d.days += n / 1440; d.ticks += n % 1440 * 60 * TICKS_PER_S; break;
    case DP_SECOND: d.days += n / 86400; d.ticks += n % 86400 * TICKS_PER_S; break;
    case DP_MS: d.ticks += n * 10000; break;
    case DP_US: d.ticks += n * 10; break;
    case DP_NS: d.ticks += n / 100; break;
    default: sqlite3_result_error(ctx, "Invalid parameter 1 specified for dateadd.", -1); return;
    }
    dt_norm(&d);
    if (d.days < mcdc_days_from_civil(1, 1, 1) || d.days > mcdc_days_from_civil(9999, 12, 31)) {
        sqlite3_result_error(ctx, "Adding a value to a 'datetime2' column caused an overflow.", -1);
        return;
    }
    if (!like.has_time && like.has_date && p >= DP_HOUR) like.has_time = true;
    if (like.frac_digits == 0 && like.has_time && (p == DP_MS || p == DP_US || p == DP_NS)) like.frac_digits = 7;
    result_dt_like(ctx, &d, &like);
}

static int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static void fn_datediff(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[1]) == SQLITE_NULL || sqlite3_value_type(argv[2]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return;
    }
    datepart p = part_of(argv[0]);
    dtv a, b;
    if (!arg_dt(ctx, argv[1], &a) || !arg_dt(ctx, argv[2], &b)) return;
    int64_t ta = a.has_off ? dt_utc_ticks(&a) : a.days * TICKS_PER_DAY + a.ticks;
    int64_t tb = b.has_off ? dt_utc_ticks(&b) : b.days * TICKS_PER_DAY + b.ticks;
    int64_t r;
    switch (p) {
    case DP_YEAR: case DP_QUARTER: case DP_MONTH: {
        int64_t ya, yb;
        unsigned ma, mb, da, db;
        mcdc_civil_from_days(floordiv(ta, TICKS_PER_DAY), &ya, &ma, &da);
        mcdc_civil_from_days(floordiv(tb, TICKS_PER_DAY), &yb, &mb, &db);
        if (p == DP_YEAR) r = yb - ya;
        else if (p == DP_QUARTER) r = (yb * 4 + (mb - 1) / 3) - (ya * 4 + (ma - 1) / 3);
        else r = (yb * 12 + mb) - (ya * 12 + ma);
        break;
    }
    case DP_DAY: case DP_DAYOFYEAR: case DP_WEEKDAY: r = floordiv(tb, TICKS_PER_DAY) - floordiv(ta, TICKS_PER_DAY); break;
    case DP_WEEK: r = floordiv(floordiv(tb, TICKS_PER_DAY) + 4, 7) - floordiv(floordiv(ta, TICKS_PER_DAY) + 4, 7); break;
    case DP_HOUR: r = floordiv(tb, 3600 * TICKS_PER_S) - floordiv(ta, 3600 * TICKS_PER_S); break;
    case DP_MINUTE: r = floordiv(tb, 60 * TICKS_PER_S) - floordiv(ta, 60 * TICKS_PER_S); break;
    case DP_SECOND: r = floordiv(tb, TICKS_PER_S) - floordiv(ta, TICKS_PER_S); break;
    case DP_MS: r = floordiv(tb, 10000) - floordiv(ta, 10000); break;
    case DP_US: r = floordiv(tb, 10) - floordiv(ta, 10); break;
    case DP_NS: r = tb - ta > INT32_MAX / 100 || tb - ta < INT32_MIN / 100 ? INT64_MAX : (tb - ta) * 100; break;
    default: sqlite3_result_error(ctx, "Invalid parameter 1 specified for datediff.", -1); return;
    }
    if (r > INT32_MAX || r < INT32_MIN) {
        sqlite3_result_error(ctx, "The datediff function resulted in an overflow. The number of dateparts separating two date/time instances is too large. Try to use datediff with a less precise datepart.", -1);
        return;
    }
    sqlite3_result_int64(ctx, r);
}

static void fn_datepart(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[1]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    datepart p = part_of(argv[0]);
    dtv d;
    if (!arg_dt(ctx, argv[1], &d)) return;
    int64_t y;
    unsigned m, dd;
    mcdc_civil_from_days(d.days, &y, &m, &dd);
    int64_t r;
    switch (p) {
    case DP_YEAR: r = y; break;
    case DP_QUARTER: r = (m - 1) / 3 + 1; break;
    case DP_MONTH: r = m; break;
    case DP_DAY: r = dd; break;
    case DP_DAYOFYEAR: r = d.days - mcdc_days_from_civil(y, 1, 1) + 1; break;
    case DP_WEEKDAY: r = ((d.days + 4) % 7 + 7) % 7 + 1; break; /* Sunday = 1 */
    case DP_WEEK: {
        int64_t jan1 = mcdc_days_from_civil(y, 1, 1), wd = ((jan1 + 4) % 7 + 7) % 7;
        r = (d.days - jan1 + wd) / 7 + 1;
        break;
    }
    case DP_HOUR: r = d.ticks / (3600 * TICKS_PER_S); break;
    case DP_MINUTE: r = d.ticks / (60 * TICKS_PER_S) % 60; break;
    case DP_SECOND: r = d.ticks / TICKS_PER_S % 60; break;
    case DP_MS: r = d.ticks % TICKS_PER_S / 10000; break;
    case DP_US: r = d.ticks % TICKS_PER_S / 10; break;
    case DP_NS: r = d.ticks % TICKS_PER_S * 100; break;
    case DP_TZOFFSET: r = d.off_min; break;
    default: sqlite3_result_error(ctx, "Invalid parameter 1 specified for datepart.", -1); return;
    }
    sqlite3_result_int64(ctx, r);
}

static void fn_at_time_zone(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    const char *zn = (const char *)sqlite3_value_text(argv[1]);
    mcdc_error err = MCDC_ERROR_INIT;
    const sim_tz *z = zn ? sim_tz_get(zn, &err) : NULL;
    if (!z) {
        char m[300];
        snprintf(m, sizeof m, "The time zone parameter '%s' provided to AT TIME ZONE clause is invalid.",
                 zn ? zn : "NULL");
        sqlite3_result_error(ctx, m, -1);
        return;
    }
    dtv d;
    if (!arg_dt(ctx, argv[0], &d)) return;
    int scale = d.frac_digits;
    if (d.has_off) {
        int64_t utc_t = dt_utc_ticks(&d);
        int off = sim_tz_offset_at(z, floordiv(utc_t, TICKS_PER_S));
        d.days = 0;
        d.ticks = utc_t + (int64_t)off * TICKS_PER_S;
        d.off_min = off / 60;
    } else {
        int64_t local_s = d.days * 86400 + d.ticks / TICKS_PER_S;
        int off = sim_tz_offset_for_local(z, local_s);
        int64_t utc_s = local_s - off;
        int real_off = sim_tz_offset_at(z, utc_s);
        /* a skipped local time moves forward by the gap */
        d.ticks += (int64_t)(real_off - off) * TICKS_PER_S;
        d.off_min = real_off / 60;
    }
    d.has_off = true;
    dt_norm(&d);
    char out[64];
    dt_format(&d, 4, scale, out, sizeof out);
    sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
}

/* ---- exact decimals: collation, SUM, AVG -------------------------------- */
#define DEC_DIGITS_MAX 96 /* significant digits a comparison keeps (decimal holds 38) */

/* value = 0.d1d2..dn x 10^exp10, digits without leading/trailing zeros
 * (n == 0: zero). false if s is not a number. */
typedef struct dec_norm {
    char d[DEC_DIGITS_MAX];
    int n;
    int64_t exp10;
    bool neg;
} dec_norm;

static bool dec_normalize(const char *s, size_t n, dec_norm *o) {
    size_t i = 0;
    o->n = 0;
    o->exp10 = 0;
    o->neg = false;
    while (i < n && isspace((unsigned char)s[i])) i++;
    if (i < n && (s[i] == '-' || s[i] == '+')) o->neg = s[i++] == '-';
    bool any = false, dot = false;
    int64_t point = 0; /* digits before the point, counted from the first significant one */
    for (; i < n; i++) {
        char ch = s[i];
        if (ch == '.' && !dot) { dot = true; continue; }
        if (ch < '0' || ch > '9') break;
        any = true;
        if (o->n == 0 && ch == '0') { if (dot) point--; continue; }
        if (o->n >= DEC_DIGITS_MAX) return false;
        o->d[o->n++] = ch;
        if (!dot) point++;
    }
    if (!any) return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < n && (s[i] == '-' || s[i] == '+')) eneg = s[i++] == '-';
        int64_t e = 0;
        size_t st = i;
        while (i < n && s[i] >= '0' && s[i] <= '9' && e < 100000) e = e * 10 + (s[i++] - '0');
        if (i == st) return false;
        point += eneg ? -e : e;
    }
    while (i < n && isspace((unsigned char)s[i])) i++;
    if (i != n) return false;
    while (o->n > 0 && o->d[o->n - 1] == '0') o->n--;
    o->exp10 = point;
    if (o->n == 0) o->neg = false;
    return true;
}

/* Bytewise, a prefix first: the order of text the typed collations cannot read. */
static int bytes_cmp(const char *a, size_t na, const char *b, size_t nb) {
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : na < nb ? -1 : na > nb ? 1 : 0;
}

int sim_decimal_cmp(const char *a, size_t na, const char *b, size_t nb) {
    dec_norm x, y;
    bool xa = dec_normalize(a, na, &x), yb = dec_normalize(b, nb, &y);
    if (!xa || !yb) {
        if (xa != yb) return xa ? -1 : 1; /* numbers first */
        return bytes_cmp(a, na, b, nb);
    }
    int sx = x.n == 0 ? 0 : x.neg ? -1 : 1, sy = y.n == 0 ? 0 : y.neg ? -1 : 1;
    if (sx != sy) return sx < sy ? -1 : 1;
    if (sx == 0) return 0;
    int mag;
    if (x.exp10 != y.exp10) mag = x.exp10 < y.exp10 ? -1 : 1;
    else {
        int c = memcmp(x.d, y.d, (size_t)(x.n < y.n ? x.n : y.n));
        mag = c < 0 ? -1 : c > 0 ? 1 : x.n < y.n ? -1 : x.n > y.n ? 1 : 0;
    }
    return sx * mag;
}

static int coll_decimal(void *u, int na, const void *a, int nb, const void *b) {
    (void)u;
    return sim_decimal_cmp(a, (size_t)na, b, (size_t)nb);
}

/* SUM/AVG state: an exact sum at `scale` (|acc| < 10^38, decimal(38)'s
 * range), the REAL values apart in double. */
__extension__ typedef __int128 dec_i128;
#define DEC_SCALE_MAX 38

typedef struct dec_agg {
    dec_i128 acc;
    int scale;
    int64_t n, nreal, ntext;
    double rsum;
    const char *err; /* static message: reported by xValue/xFinal */
} dec_agg;

static dec_i128 dec_pow10(int k) {
    dec_i128 p = 1;
    while (k-- > 0) p *= 10;
    return p;
}

static dec_i128 dec_abs(dec_i128 v) { return v < 0 ? -v : v; }

/* |v| < 10^38 */
static bool dec_fits(dec_i128 v) {
    const dec_i128 lim = (dec_i128)10000000000000000000ULL * (dec_i128)10000000000000000000ULL;
    return dec_abs(v) < lim;
}

/* Plain decimal text (no exponent) to a scaled integer; false if it is
 * something else or has more than 38 digits. */
static bool dec_fixed(const char *s, size_t n, dec_i128 *v, int *scale) {
    size_t i = 0;
    bool neg = false, dot = false, any = false;
    int digits = 0, sc = 0;
    dec_i128 a = 0;
    while (i < n && isspace((unsigned char)s[i])) i++;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    for (; i < n; i++) {
        if (s[i] == '.' && !dot) { dot = true; continue; }
        if (s[i] < '0' || s[i] > '9') break;
        any = true;
        if (a != 0 || s[i] != '0') digits++;
        if (digits > DEC_SCALE_MAX || sc >= DEC_SCALE_MAX) return false;
        a = a * 10 + (s[i] - '0');
        if (dot) sc++;
    }
    while (i < n && isspace((unsigned char)s[i])) i++;
    if (!any || i != n) return false;
    *v = neg ? -a : a;
    *scale = sc;
    return true;
}

static void dec_agg_add(dec_agg *g, sqlite3_value *v, int sign) {
    int vt = sqlite3_value_type(v);
    if (vt == SQLITE_NULL || g->err) return;
    g->n += sign;
    dec_i128 x;
    dec_norm nm;
    int sc = 0;
    if (vt == SQLITE_INTEGER) x = sqlite3_value_int64(v);
    else if (vt == SQLITE_TEXT && dec_fixed((const char *)sqlite3_value_text(v), (size_t)sqlite3_value_bytes(v), &x, &sc))
        g->ntext += sign;
    else if (vt == SQLITE_TEXT && !dec_normalize((const char *)sqlite3_value_text(v), (size_t)sqlite3_value_bytes(v), &nm)) {
        g->err = "Error converting data type varchar to numeric.";
        return;
    } else {
        g->nreal += sign;
        g->rsum += sign * sqlite3_value_double(v);
        return;
    }
    static const char *OVF = "Arithmetic overflow error converting expression to data type numeric.";
    if (sc > g->scale) { /* the sum takes the larger scale */
        if (dec_abs(g->acc) >= dec_pow10(38 - (sc - g->scale))) { g->err = OVF; return; }
        g->acc *= dec_pow10(sc - g->scale);
        g->scale = sc;
    } else if (sc < g->scale) {
        if (dec_abs(x) >= dec_pow10(38 - (g->scale - sc))) { g->err = OVF; return; }
        x *= dec_pow10(g->scale - sc);
    }
    dec_i128 r = sign > 0 ? g->acc + x : g->acc - x;
    if (!dec_fits(r)) { g->err = OVF; return; }
    g->acc = r;
}

/* ---- datetimeoffset: by the UTC instant ---------------------------------- */
int sim_dto_cmp(const char *a, size_t na, const char *b, size_t nb) {
    dtv x, y;
    bool ox = dt_parse(a, na, &x), oy = dt_parse(b, nb, &y);
    if (ox && oy) {
        int64_t ux = dt_utc_ticks(&x), uy = dt_utc_ticks(&y);
        return ux < uy ? -1 : ux > uy ? 1 : 0;
    }
    if (ox != oy) return ox ? -1 : 1; /* values first, other text after */
    return bytes_cmp(a, na, b, nb);
}

static int coll_dto(void *u, int na, const void *a, int nb, const void *b) {
    (void)u;
    return sim_dto_cmp(a, (size_t)na, b, (size_t)nb);
}

/* ---- uniqueidentifier: SQL Server's byte-group order --------------------- */
/* The 16 bytes of "00112233-4455-6677-8899-AABBCCDDEEFF" as written. */
static bool guid_bytes(const char *s, size_t n, uint8_t out[16]) {
    if (n != 36) return false;
    int k = 0;
    for (size_t i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return false;
            continue;
        }
        int h = hexval((unsigned char)s[i]), l = i + 1 < 36 ? hexval((unsigned char)s[i + 1]) : -1;
        if (h < 0 || l < 0) return false;
        out[k++] = (uint8_t)(h << 4 | l);
        i++;
    }
    return k == 16;
}

int sim_guid_cmp(const char *a, size_t na, const char *b, size_t nb) {
    /* most significant first: the last group, the fourth, then the first
     * three from their last byte back (they are little-endian fields) */
    static const int ORDER[16] = {10, 11, 12, 13, 14, 15, 8, 9, 7, 6, 5, 4, 3, 2, 1, 0};
    uint8_t x[16], y[16];
    bool ox = guid_bytes(a, na, x), oy = guid_bytes(b, nb, y);
    if (ox && oy) {
        for (int k = 0; k < 16; k++)
            if (x[ORDER[k]] != y[ORDER[k]]) return x[ORDER[k]] < y[ORDER[k]] ? -1 : 1;
        return 0;
    }
    if (ox != oy) return ox ? -1 : 1;
    return bytes_cmp(a, na, b, nb);
}

static int coll_guid(void *u, int na, const void *a, int nb, const void *b) {
    (void)u;
    return sim_guid_cmp(a, (size_t)na, b, (size_t)nb);
}

/* ---- strings: SQL_Latin1_General_CP1_CI_AS, approximately --------------- */
/* Next code point of UTF-8 s[*i..n) (a byte that is not valid UTF-8 stands
 * for itself). */
static uint32_t utf8_next(const unsigned char *s, size_t n, size_t *i) {
    uint32_t c = s[*i];
    int more = c >= 0xF0 && c < 0xF5 ? 3 : c >= 0xE0 && c < 0xF0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : 0;
    if (more == 0 || n - *i <= (size_t)more) {
        (*i)++;
        return c;
    }
    uint32_t v = c & (0x3Fu >> more);
    for (int k = 1; k <= more; k++) {
        unsigned char b = s[*i + (size_t)k];
        if ((b & 0xC0) != 0x80) {
            (*i)++;
            return c;
        }
        v = (v << 6) | (b & 0x3Fu);
    }
    *i += (size_t)more + 1;
    return v;
}

/* Lower case for Basic Latin, Latin-1, Latin Extended-A, Greek and Cyrillic
 * (other letters compare as they are). */
static uint32_t fold_case(uint32_t c) {
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) && c % 2 == 0) return c + 1;
    if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) && c % 2 == 1) return c + 1;
    if (c == 0x178) return 0xFF;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

int sim_string_cmp(const char *a, size_t na, const char *b, size_t nb) {
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        /* the shorter string is padded with spaces, as SQL Server compares */
        uint32_t cx = i < na ? fold_case(utf8_next(x, na, &i)) : ' ';
        uint32_t cy = j < nb ? fold_case(utf8_next(y, nb, &j)) : ' ';
        if (cx != cy) return cx < cy ? -1 : 1;
    }
    return 0;
}

/* [set] at p[*i] (just after the '['): "^" negates, "a-z" is a range, the
 * rest lists characters; *i moves past the ']'. false if there is no ']'
 * (the '[' is then a plain character). */
static bool like_class(const unsigned char *p, size_t pn, size_t *i, uint32_t c, bool *hit) {
    size_t k = *i;
    bool neg = false, any = false;
    *hit = false;
    if (k < pn && p[k] == '^') { neg = true; k++; }
    uint32_t fc = fold_case(c);
    while (k < pn) {
        uint32_t lo = utf8_next(p, pn, &k);
        if (lo == ']' && any) {
            *i = k;
            if (neg) *hit = !*hit;
            return true;
        }
        any = true;
        uint32_t hi = lo;
        if (k + 1 < pn && p[k] == '-' && p[k + 1] != ']') {
            k++;
            hi = utf8_next(p, pn, &k);
        }
        if (fc >= fold_case(lo) && fc <= fold_case(hi)) *hit = true;
    }
    return false;
}

/* T-SQL LIKE over UTF-8: % _ [set] [^set] [a-z], an escape character,
 * case as the string collation (sim_ci); every other character literal,
 * trailing spaces included. */
static bool like_match(const unsigned char *p, size_t pn, const unsigned char *s, size_t sn, int64_t esc) {
    size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
    while (si < sn) {
        if (pi < pn) {
            size_t pj = pi, sj = si;
            uint32_t pc = utf8_next(p, pn, &pj);
            if (pc == '%' && (int64_t)pc != esc) {
                star_p = pi = pj;
                star_s = si;
                continue;
            }
            uint32_t sc = utf8_next(s, sn, &sj);
            bool ok;
            if ((int64_t)pc == esc && pj < pn) ok = fold_case(utf8_next(p, pn, &pj)) == fold_case(sc);
            else if (pc == '_') ok = true;
            else if (pc == '[') {
                size_t k = pj;
                bool hit;
                if (like_class(p, pn, &k, sc, &hit)) {
                    ok = hit;
                    pj = k;
                } else ok = sc == '[';
            } else ok = fold_case(pc) == fold_case(sc);
            if (ok) {
                pi = pj;
                si = sj;
                continue;
            }
        }
        if (star_p == SIZE_MAX) return false;
        size_t sj = star_s; /* % takes one more character */
        utf8_next(s, sn, &sj);
        si = star_s = sj;
        pi = star_p;
    }
    while (pi < pn) {
        size_t pj = pi;
        if (utf8_next(p, pn, &pj) != '%') return false;
        pi = pj;
    }
    return true;
}

/* like(pattern, string [, escape]): SQLite's LIKE operator, replaced. */
static void fn_like(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    for (int k = 0; k < argc; k++)
        if (sqlite3_value_type(argv[k]) == SQLITE_NULL) { sqlite3_result_null(ctx); return; }
    const unsigned char *p = sqlite3_value_text(argv[0]), *s = sqlite3_value_text(argv[1]);
    size_t pn = (size_t)sqlite3_value_bytes(argv[0]), sn = (size_t)sqlite3_value_bytes(argv[1]);
    int64_t esc = -1;
    if (argc == 3) {
        const unsigned char *e = sqlite3_value_text(argv[2]);
        size_t en = (size_t)sqlite3_value_bytes(argv[2]), k = 0;
        if (!e || en == 0) { sqlite3_result_error(ctx, "Invalid escape character \"\" was specified in a LIKE predicate.", -1); return; }
        esc = utf8_next(e, en, &k);
    }
    if (!p || !s) { sqlite3_result_null(ctx); return; }
    sqlite3_result_int(ctx, like_match(p, pn, s, sn, esc));
}

static int coll_string(void *u, int na, const void *a, int nb, const void *b) {
    (void)u;
    return sim_string_cmp(a, (size_t)na, b, (size_t)nb);
}

/* SQLite's aggregate context is 8-byte aligned, __int128 wants 16: the
 * state is copied in and out. false: no state (no row, or out of memory). */
static bool dec_agg_load(sqlite3_context *ctx, int bytes, dec_agg *g) {
    void *p = sqlite3_aggregate_context(ctx, bytes);
    if (!p) return false;
    memcpy(g, p, sizeof *g);
    return true;
}

static void dec_agg_step(sqlite3_context *ctx, sqlite3_value *v, int sign) {
    dec_agg g;
    if (!dec_agg_load(ctx, (int)sizeof g, &g)) return;
    dec_agg_add(&g, v, sign);
    memcpy(sqlite3_aggregate_context(ctx, (int)sizeof g), &g, sizeof g);
}

static void fn_dec_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    dec_agg_step(ctx, argv[0], 1);
}

static void fn_dec_inverse(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    dec_agg_step(ctx, argv[0], -1);
}

static void dec_result_text(sqlite3_context *ctx, dec_i128 v, int scale) {
    char dg[48], buf[96];
    int nd = 0, o = 0;
    dec_i128 m = dec_abs(v);
    do {
        dg[nd++] = (char)('0' + (int)(m % 10));
        m /= 10;
    } while (m != 0 && nd < 40);
    while (nd <= scale) dg[nd++] = '0'; /* at least one digit before the point */
    if (v < 0) buf[o++] = '-';
    for (int k = nd - 1; k >= 0; k--) {
        buf[o++] = dg[k];
        if (k == scale && scale > 0) buf[o++] = '.';
    }
    sqlite3_result_text(ctx, buf, o, SQLITE_TRANSIENT);
}

static void dec_finish(sqlite3_context *ctx, bool avg) {
    dec_agg st, *g = &st;
    if (!dec_agg_load(ctx, 0, g) || g->n == 0) { sqlite3_result_null(ctx); return; }
    if (g->err) { sqlite3_result_error(ctx, g->err, -1); return; }
    if (g->nreal > 0) {
        double s = g->rsum + (double)g->acc / (double)dec_pow10(g->scale);
        sqlite3_result_double(ctx, avg ? s / (double)g->n : s);
        return;
    }
    if (g->ntext == 0) { /* integers: bigint */
        dec_i128 v = avg ? g->acc / g->n : g->acc;
        if (v > INT64_MAX || v < INT64_MIN) {
            sqlite3_result_error(ctx, "Arithmetic overflow error converting expression to data type bigint.", -1);
            return;
        }
        sqlite3_result_int64(ctx, (int64_t)v);
        return;
    }
    if (!avg) { dec_result_text(ctx, g->acc, g->scale); return; }
    int rs = g->scale > 6 ? g->scale : 6;
    dec_i128 m = dec_pow10(rs - g->scale), q = g->acc / g->n, r = g->acc % g->n;
    if (!dec_fits(q * m)) {
        sqlite3_result_error(ctx, "Arithmetic overflow error converting expression to data type numeric.", -1);
        return;
    }
    dec_result_text(ctx, q * m + r * m / g->n, rs);
}

/* A divisor as double; false (error 8134 set) when it is zero. */
static bool double_divisor(sqlite3_context *ctx, sqlite3_value *v, double *d) {
    *d = sqlite3_value_double(v);
    if (*d != 0) return true;
    sqlite3_result_error(ctx, "Divide by zero error encountered.", -1);
    return false;
}

/* The operands of / or %: 0 = the result is set (NULL, or error 8134 for
 * an integer 0 divisor), 1 = two integers (*a, *b; b != 0), 2 = other. */
static int divide_args(sqlite3_context *ctx, sqlite3_value **argv, int64_t *a, int64_t *b) {
    int ta = sqlite3_value_type(argv[0]), tb = sqlite3_value_type(argv[1]);
    if (ta == SQLITE_NULL || tb == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return 0;
    }
    if (ta != SQLITE_INTEGER || tb != SQLITE_INTEGER) return 2;
    *a = sqlite3_value_int64(argv[0]);
    *b = sqlite3_value_int64(argv[1]);
    double d;
    return *b != 0 || double_divisor(ctx, argv[1], &d) ? 1 : 0;
}

/* sim_mod(a, b): T-SQL's % - integers as integers, decimal text exactly
 * (the result has the larger scale), the sign of a; 0 divides: 8134. */
static void fn_mod(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    int64_t a, b;
    int kind = divide_args(ctx, argv, &a, &b);
    if (kind == 0) return;
    if (kind == 1) {
        sqlite3_result_int64(ctx, b == -1 ? 0 : a % b);
        return;
    }
    dec_i128 x[2];
    int sc[2];
    bool exact = true;
    for (int k = 0; k < 2 && exact; k++) {
        int t = sqlite3_value_type(argv[k]);
        sc[k] = 0;
        if (t == SQLITE_INTEGER) x[k] = sqlite3_value_int64(argv[k]);
        else exact = t == SQLITE_TEXT && dec_fixed((const char *)sqlite3_value_text(argv[k]),
                                                   (size_t)sqlite3_value_bytes(argv[k]), &x[k], &sc[k]);
    }
    if (exact) {
        int s = sc[0] > sc[1] ? sc[0] : sc[1];
        for (int k = 0; k < 2 && exact; k++) {
            exact = dec_abs(x[k]) < dec_pow10(38 - (s - sc[k]));
            if (exact) x[k] *= dec_pow10(s - sc[k]);
        }
        if (exact) {
            if (x[1] == 0) { sqlite3_result_error(ctx, "Divide by zero error encountered.", -1); return; }
            dec_result_text(ctx, x[0] % x[1], s);
            return;
        }
    }
    double d;
    if (double_divisor(ctx, argv[1], &d)) sqlite3_result_double(ctx, fmod(sqlite3_value_double(argv[0]), d));
}

/* sim_div(a, b): T-SQL's /: integers divide as integers (truncated), the
 * rest through double; a zero divisor is error 8134 (SQLite gives NULL). */
static void fn_div(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    int64_t a, b;
    int kind = divide_args(ctx, argv, &a, &b);
    if (kind == 0) return;
    if (kind == 1) {
        if (a == INT64_MIN && b == -1) {
            sqlite3_result_error(ctx, "Arithmetic overflow error converting expression to data type bigint.", -1);
            return;
        }
        sqlite3_result_int64(ctx, a / b);
        return;
    }
    double d;
    if (double_divisor(ctx, argv[1], &d)) sqlite3_result_double(ctx, sqlite3_value_double(argv[0]) / d);
}

static void fn_sum_value(sqlite3_context *ctx) { dec_finish(ctx, false); }
static void fn_avg_value(sqlite3_context *ctx) { dec_finish(ctx, true); }

int sim_val_register(sqlite3 *db, const sim_clock_src *clk) {
    void *u = (void *)clk;
    const int det = SQLITE_UTF8 | SQLITE_DETERMINISTIC, nd = SQLITE_UTF8;
    struct { const char *n; int a; int f; void (*fn)(sqlite3_context *, int, sqlite3_value **); } F[] = {
        {"sim_convert", 2, det, fn_convert}, {"sim_convert", 3, det, fn_convert},
        {"sim_lsn_add", 2, det, fn_lsn_add}, {"sim_quotename", 1, det, fn_quotename},
        {"sim_quotename", 2, det, fn_quotename}, {"sim_dateadd", 3, det, fn_dateadd},
        {"sim_datediff", 3, det, fn_datediff}, {"sim_datepart", 2, det, fn_datepart},
        {"sim_at_time_zone", 2, det, fn_at_time_zone}, {"sim_sysdatetime", 0, nd, fn_sysdatetime},
        {"sim_sysutcdatetime", 0, nd, fn_sysutcdatetime}, {"sim_getdate", 0, nd, fn_getdate},
        {"sim_getutcdate", 0, nd, fn_getutcdate}, {"sim_sysdatetimeoffset", 0, nd, fn_sysdatetimeoffset},
        {"sim_current_timezone_id", 0, nd, fn_zone}, {"sim_spid", 0, nd, fn_spid},
        {"sim_serverproperty", 1, det, fn_serverproperty}, {"sim_newid", 0, nd, fn_newid},
        {"sim_concat", -1, det, fn_concat}, {"sim_floor", 1, det, fn_floor},
        {"sim_ceiling", 1, det, fn_ceiling},
    };
    for (size_t k = 0; k < sizeof F / sizeof F[0]; k++) {
        int rc = sqlite3_create_function(db, F[k].n, F[k].a, F[k].f, u, F[k].fn, NULL, NULL);
        if (rc != SQLITE_OK) return MCDC_E_IO;
    }
    if (sqlite3_create_collation(db, SIM_DECIMAL_COLLATION, SQLITE_UTF8, NULL, coll_decimal) != SQLITE_OK ||
        sqlite3_create_collation(db, SIM_STRING_COLLATION, SQLITE_UTF8, NULL, coll_string) != SQLITE_OK ||
        sqlite3_create_collation(db, SIM_DTO_COLLATION, SQLITE_UTF8, NULL, coll_dto) != SQLITE_OK ||
        sqlite3_create_collation(db, SIM_GUID_COLLATION, SQLITE_UTF8, NULL, coll_guid) != SQLITE_OK ||
        sqlite3_create_function(db, "like", 2, det, NULL, fn_like, NULL, NULL) != SQLITE_OK ||
        sqlite3_create_function(db, "sim_mod", 2, det, NULL, fn_mod, NULL, NULL) != SQLITE_OK ||
        sqlite3_create_function(db, "sim_div", 2, det, NULL, fn_div, NULL, NULL) != SQLITE_OK ||
        sqlite3_create_function(db, "like", 3, det, NULL, fn_like, NULL, NULL) != SQLITE_OK ||
        sqlite3_create_window_function(db, "sim_sum", 1, det, NULL, fn_dec_step, fn_sum_value, fn_sum_value,
                                       fn_dec_inverse, NULL) != SQLITE_OK ||
        sqlite3_create_window_function(db, "sim_avg", 1, det, NULL, fn_dec_step, fn_avg_value, fn_avg_value,
                                       fn_dec_inverse, NULL) != SQLITE_OK)
        return MCDC_E_IO;
    return sim_udt_register(db);
}
