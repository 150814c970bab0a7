/*
 * sim_variant.h - a sql_variant value as the engine hands it to the TDS
 * layer (sim_engine.h) and keeps it in SQLite: text
 *
 *     "\x01" <type id> "." <precision> "." <scale> "." <length> "\x01" <value>
 *
 * the base type as the fields of sim_type (decimal numbers; length -1 for
 * none), then the value in that type's storage form as text (integers,
 * floats that read back exactly, decimal text, ISO dates and times,
 * strings, binary as hex digits). Self-contained, so that both sides read
 * it: the TDS layer is built without the engine (tests/e2e/sim_clients.sh).
 */
#ifndef SIM_VARIANT_H
#define SIM_VARIANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "sim_engine.h"

#define SIM_VARIANT_MARK 0x01
/* the longest header: mark, four fields, dots, mark */
#define SIM_VARIANT_HEADER_MAX 32

/* Reads a decimal field ending at one of the ends; false if none. */
static inline bool sim_variant_field(const char *s, size_t n, size_t *i, long lo, long hi, char end, long *out) {
    bool neg = *i < n && s[*i] == '-';
    if (neg) (*i)++;
    long v = 0;
    size_t start = *i;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9' && *i - start < 6) v = v * 10 + (s[(*i)++] - '0');
    if (*i == start || *i >= n || s[*i] != end) return false;
    (*i)++;
    if (neg) v = -v;
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* Splits a variant value into its base type and value text (borrowed);
 * false when s is no variant (then it is a plain value). */
static inline bool sim_variant_split(const char *s, size_t n, sim_type *base, const char **val, size_t *vn) {
    if (n < 9 || (unsigned char)s[0] != SIM_VARIANT_MARK) return false;
    size_t i = 1;
    long id, p, sc, len;
    if (!sim_variant_field(s, n, &i, SIM_T_BIT, SIM_T_UNIQUEIDENTIFIER, '.', &id) ||
        !sim_variant_field(s, n, &i, 0, 38, '.', &p) || !sim_variant_field(s, n, &i, 0, 38, '.', &sc) ||
        !sim_variant_field(s, n, &i, -1, 8000, SIM_VARIANT_MARK, &len))
        return false;
    memset(base, 0, sizeof *base);
    base->id = (sim_type_id)id;
    base->precision = (uint8_t)p;
    base->scale = (uint8_t)sc;
    base->length = (int32_t)len;
    *val = s + i;
    *vn = n - i;
    return true;
}

/* The header of a variant of base type t into buf (cap >=
 * SIM_VARIANT_HEADER_MAX); returns its length. */
static inline size_t sim_variant_header(char *buf, size_t cap, const sim_type *t) {
    int k = snprintf(buf, cap, "%c%d.%d.%d.%d%c", SIM_VARIANT_MARK, (int)t->id, (int)t->precision, (int)t->scale,
                     (int)t->length, SIM_VARIANT_MARK);
    return k > 0 && (size_t)k < cap ? (size_t)k : 0;
}

#endif
