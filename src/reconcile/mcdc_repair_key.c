/*
 * mcdc_repair_key.c - a repair's key objects checked against bronze's key
 * columns and typed (mcdc_repair.h). Pure: no I/O (fuzz/fuzz_repair_key.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_repair.h"
#include "mcdc_value_text.h"

__extension__ typedef unsigned __int128 u128;

/* The error of key i: where it is and what to do. */
static int bad(mcdc_error *err, size_t i, const char *what, const char *col) {
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "key %zu: %s%s%s%s. A key is a JSON object of the key columns, as the "
                          "reconcile report's key column holds it; nothing was written",
                          i + 1, what, col ? " (column '" : "", col ? col : "", col ? "')" : "");
}

static bool int_range(mcdc_type_id t, int64_t v) {
    switch (t) {
    case MCDC_TYPE_INT8: return v >= INT8_MIN && v <= INT8_MAX;
    case MCDC_TYPE_INT16: return v >= INT16_MIN && v <= INT16_MAX;
    case MCDC_TYPE_INT32: return v >= INT32_MIN && v <= INT32_MAX;
    default: return true;
    }
}

/* "-12.50" as decimal(p,s): at most p - s integer digits and s fraction
 * digits. */
static bool decimal_parse(const char *s, size_t n, int32_t p, int32_t sc, uint64_t *lo, int64_t *hi) {
    size_t i = 0;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    u128 v = 0;
    int32_t idig = 0, fdig = 0;
    bool dot = false, any = false;
    for (; i < n; i++) {
        char c = s[i];
        if (c == '.' && !dot) {
            dot = true;
            continue;
        }
        if (c < '0' || c > '9') return false;
        any = true;
        if (dot) {
            if (++fdig > sc) return false;
        } else if (idig > 0 || c != '0') {
            if (++idig > p - sc) return false;
        }
        v = v * (u128)10u + (u128)(unsigned)(c - 48);
    }
    if (!any) return false;
    for (; fdig < sc; fdig++) v *= (u128)10u;
    if (neg) v = (u128)0 - v;
    *lo = (uint64_t)v;
    *hi = (int64_t)(uint64_t)(v >> 64);
    return true;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One value v of column f: appended to c, its bound part to *part. */
static int one_value(const json_t *v, const mcdc_field *f, mcdc_column *c, json_t **part, size_t i,
                     mcdc_error *err) {
    *part = NULL;
    if (json_is_null(v)) {
        *part = json_null();
        return mcdc_col_append_null(c, err);
    }
    const char *s = json_string_value(v);
    size_t sn = s ? json_string_length(v) : 0;
    char text[MCDC_TEXT_FIXED_MAX + 1];
    int rc;
    switch (f->type) {
    case MCDC_TYPE_INT8:
    case MCDC_TYPE_INT16:
    case MCDC_TYPE_INT32:
    case MCDC_TYPE_INT64: {
        if (!json_is_integer(v)) return bad(err, i, "an integer column needs a JSON integer", f->name);
        int64_t x = (int64_t)json_integer_value(v);
        if (!int_range(f->type, x)) return bad(err, i, "the integer is out of the column's range", f->name);
        rc = mcdc_col_append_int(c, x, err);
        if (rc == MCDC_OK) *part = json_integer((json_int_t)x);
        break;
    }
    case MCDC_TYPE_DECIMAL: {
        char num[64];
        if (json_is_integer(v)) {
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
            s = num, sn = strlen(num);
        } else if (json_is_real(v)) {
            double d = json_real_value(v);
            if (!isfinite(d) || fabs(d) >= 1e15)
                return bad(err, i, "a decimal past 15 digits must be a string of its digits", f->name);
            snprintf(num, sizeof num, "%.*f", (int)(f->scale > 15 ? 15 : f->scale), d);
            s = num, sn = strlen(num);
        }
        uint64_t lo;
        int64_t hi;
        if (s == NULL || !decimal_parse(s, sn, f->precision, f->scale, &lo, &hi))
            return bad(err, i, "a decimal column needs a number or a string of its digits that "
                               "fits its precision and scale", f->name);
        rc = mcdc_col_append_decimal(c, lo, hi, err);
        size_t tn = mcdc_text_decimal(text, lo, hi, f->scale);
        if (rc == MCDC_OK) *part = json_stringn(text, tn);
        break;
    }
    case MCDC_TYPE_UTF8:
        if (s == NULL) return bad(err, i, "a text column needs a JSON string", f->name);
        if (sn > MCDC_REPAIR_KEY_JSON_MAX || memchr(s, 0, sn)) return bad(err, i, "the text holds a NUL or is too long", f->name);
        rc = mcdc_col_append_bytes(c, s, (int64_t)sn, err);
        if (rc == MCDC_OK) *part = json_stringn(s, sn);
        break;
    case MCDC_TYPE_BINARY:
    case MCDC_TYPE_FIXED_BINARY: {
        if (s == NULL || sn < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || sn % 2 != 0)
            return bad(err, i, "a binary column needs \"0x\" and hex digits", f->name);
        size_t bn = (sn - 2) / 2;
        if (f->type == MCDC_TYPE_FIXED_BINARY && (int64_t)bn != f->byte_width)
            return bad(err, i, "the binary value is not the column's width", f->name);
        uint8_t *bytes = mcdc_malloc(bn + 1);
        if (bytes == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        for (size_t k = 0; k < bn; k++) {
            int h = hexval(s[2 + 2 * k]), l = hexval(s[3 + 2 * k]);
            if (h < 0 || l < 0) {
                mcdc_free(bytes);
                return bad(err, i, "a binary column needs \"0x\" and hex digits", f->name);
            }
            bytes[k] = (uint8_t)(h * 16 + l);
        }
        rc = mcdc_col_append_bytes(c, bytes, (int64_t)bn, err);
        if (rc == MCDC_OK) {
            char *hex = mcdc_malloc(2 * bn + 3);
            size_t hn = hex ? mcdc_text_hex(hex, bytes, bn) : 0;
            *part = hex ? json_stringn(hex, hn) : NULL;
            mcdc_free(hex);
        }
        mcdc_free(bytes);
        break;
    }
    case MCDC_TYPE_DATE32:
    case MCDC_TYPE_TIMESTAMP_NTZ:
    case MCDC_TYPE_TIMESTAMP_UTC: {
        int64_t us;
        bool date = f->type == MCDC_TYPE_DATE32;
        if (s == NULL || sn > 40 || mcdc_parse_ts_us(s, sn, &us, NULL) != MCDC_OK ||
            (date && sn != 10))
            return bad(err, i, date ? "a date column needs \"YYYY-MM-DD\""
                                    : "a date and time column needs ISO 8601 text "
                                      "(\"2026-12-01T15:00:00.123456\")", f->name);
        if (date) {
            int64_t days = us >= 0 ? us / 86400000000LL : -((-us + 86400000000LL - 1) / 86400000000LL);
            rc = mcdc_col_append_int(c, days, err);
            size_t tn = mcdc_text_date(text, days);
            if (rc == MCDC_OK) *part = json_stringn(text, tn);
        } else {
            rc = mcdc_col_append_int(c, us, err);
            size_t tn = mcdc_text_timestamp(text, us, false);
            if (rc == MCDC_OK) *part = json_stringn(text, tn);
        }
        break;
    }
    default:
        return bad(err, i, "repair does not take keys of this column's type (bool, float, "
                           "double)", f->name);
    }
    if (rc == MCDC_OK && *part == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return rc;
}

int mcdc_repair_key_parse(const char *text, size_t len, size_t i, const mcdc_schema *bs,
                          const char *const *names, int32_t n, mcdc_batch *keys, json_t **bound,
                          mcdc_error *err) {
    MCDC_ASSERT(bs && names && n > 0 && n <= SILVER_KEYS_MAX && keys && bound);
    MCDC_ASSERT(keys->schema->n_fields == n);
    *bound = NULL;
    if (len > MCDC_REPAIR_KEY_JSON_MAX) return bad(err, i, "the key's JSON is too long", NULL);
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (o == NULL) {
        char what[220];
        snprintf(what, sizeof what, "not JSON (%.160s, at character %d)", je.text, je.position);
        return bad(err, i, what, NULL);
    }
    int rc = MCDC_OK;
    if (!json_is_object(o)) rc = bad(err, i, "not a JSON object", NULL);
    /* every member a key column; every key column there */
    const char *name;
    json_t *v;
    json_t *by_col[SILVER_KEYS_MAX] = {0};
    json_object_foreach(o, name, v) {
        if (rc) break;
        int32_t k = 0;
        while (k < n && !mcdc_str_ieq(names[k], name)) k++;
        if (k == n) {
            char what[MCDC_IDENT_BYTES_MAX + 64];
            snprintf(what, sizeof what, "'%.128s' is not a key column", name);
            rc = bad(err, i, what, NULL);
        } else if (by_col[k]) {
            rc = bad(err, i, "the column is given twice", names[k]);
        } else {
            by_col[k] = v;
        }
    }
    for (int32_t k = 0; rc == MCDC_OK && k < n; k++)
        if (by_col[k] == NULL) rc = bad(err, i, "a key column is missing", names[k]);
    const mcdc_field *fs[SILVER_KEYS_MAX];
    for (int32_t k = 0; rc == MCDC_OK && k < n; k++) {
        int32_t j = mcdc_schema_find(bs, names[k]);
        if (j < 0) rc = bad(err, i, "bronze has no such column", names[k]);
        else fs[k] = &bs->fields[j];
    }
    /* values: into a scratch row first, so that a bad one appends nothing */
    json_t *parts = rc == MCDC_OK ? json_array() : NULL;
    mcdc_batch *row = NULL;
    if (rc == MCDC_OK && parts == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    if (rc == MCDC_OK) rc = mcdc_batch_create(&row, keys->schema, 1, err);
    for (int32_t k = 0; rc == MCDC_OK && k < n; k++) {
        json_t *p = NULL;
        rc = one_value(by_col[k], fs[k], &row->columns[k], &p, i, err);
        if (rc == MCDC_OK) rc = json_array_append_new(parts, p) ? mcdc_error_set(err, MCDC_E_NOMEM, "out of memory") : MCDC_OK;
        else json_decref(p);
    }
    if (rc == MCDC_OK) rc = mcdc_batch_seal(row, err);
    for (int32_t k = 0; rc == MCDC_OK && k < n; k++)
        rc = mcdc_col_copy_value(&keys->columns[k], &row->columns[k], 0, err);
    if (rc == MCDC_OK) {
        *bound = n == 1 ? json_incref(json_array_get(parts, 0)) : json_incref(parts);
    }
    mcdc_batch_free(row);
    json_decref(parts);
    json_decref(o);
    return rc;
}

int mcdc_repair_run_id_check(const char *run_id, mcdc_error *err) {
    size_t n = run_id ? strlen(run_id) : 0;
    bool ok = n > 0 && n <= MCDC_REPAIR_RUN_ID_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        char c = run_id[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == ':' || c == '-';
    }
    if (ok) return MCDC_OK;
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "run id '%.40s%s': 1 to %d characters of letters, digits and ._:- "
                          "(reconcile's run_id, a UUID, fits)",
                          run_id ? run_id : "", n > 40 ? "..." : "", MCDC_REPAIR_RUN_ID_MAX);
}
