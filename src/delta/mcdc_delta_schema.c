/* mcdc_delta_schema.c - Delta schemaString JSON <-> mcdc_schema (formats.md A3). */
#include "mcdc_delta_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_name(const mcdc_field *f, char buf[32]) {
    switch (f->type) {
    case MCDC_TYPE_BOOL: return "boolean";
    case MCDC_TYPE_INT8: return "byte";
    case MCDC_TYPE_INT16: return "short";
    case MCDC_TYPE_INT32: return "integer";
    case MCDC_TYPE_INT64: return "long";
    case MCDC_TYPE_FLOAT: return "float";
    case MCDC_TYPE_DOUBLE: return "double";
    case MCDC_TYPE_DECIMAL:
        snprintf(buf, 32, "decimal(%d,%d)", (int)f->precision, (int)f->scale);
        return buf;
    case MCDC_TYPE_UTF8: return "string";
    case MCDC_TYPE_BINARY:
    case MCDC_TYPE_FIXED_BINARY: return "binary"; /* Delta has no fixed binary */
    case MCDC_TYPE_DATE32: return "date";
    case MCDC_TYPE_TIMESTAMP_NTZ: return "timestamp_ntz";
    case MCDC_TYPE_TIMESTAMP_UTC: return "timestamp";
    }
    return NULL;
}

bool mcdc_delta_schema_needs_ntz(const mcdc_schema *s) {
    for (int32_t i = 0; i < s->n_fields; i++)
        if (s->fields[i].type == MCDC_TYPE_TIMESTAMP_NTZ) return true;
    return false;
}

bool mcdc_delta__utf8_ok(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (p && *p) {
        unsigned c = *p++;
        int more;
        unsigned min, cp;
        if (c < 0x80) continue;
        if ((c & 0xE0) == 0xC0) more = 1, min = 0x80, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) more = 2, min = 0x800, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) more = 3, min = 0x10000, cp = c & 0x07;
        else return false;
        for (; more > 0; more--, p++) {
            if ((*p & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (*p & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    }
    return true;
}

int mcdc_delta__json_fail(mcdc_error *err, bool utf8_ok, const char *what) {
    if (utf8_ok) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory building %s", what);
    return mcdc_error_set(err, MCDC_E_INVALID, "%s: a string is not valid UTF-8", what);
}

bool mcdc_delta_name_needs_column_mapping(const char *name) {
    return strpbrk(name, " ,;{}()\n\t=") != NULL;
}

void mcdc_delta_physical_name_new(char out[MCDC_DELTA_PHYSICAL_NAME_LEN]) {
    char uuid[37];
    mcdc_delta__uuid(uuid);
    snprintf(out, MCDC_DELTA_PHYSICAL_NAME_LEN, "col-%s", uuid);
}

int mcdc_delta_schema_to_json(char **out_json, const mcdc_schema *s,
                              const char *const *comments, mcdc_error *err) {
    return mcdc_delta_schema_to_json_mapped(out_json, s, comments, NULL, NULL, err);
}

int mcdc_delta_schema_to_json_mapped(char **out_json, const mcdc_schema *s,
                                     const char *const *comments, const int64_t *ids,
                                     const char *const *physical, mcdc_error *err) {
    *out_json = NULL;
    json_t *root = json_object();
    json_t *fields = json_array();
    int rc = MCDC_OK;
    if (root == NULL || fields == NULL || json_object_set_new(root, "type", json_string("struct")) ||
        json_object_set(root, "fields", fields)) {
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory building a schema");
        goto done;
    }
    for (int32_t i = 0; i < s->n_fields; i++) {
        const mcdc_field *f = &s->fields[i];
        char buf[32];
        const char *tn = type_name(f, buf);
        if (tn == NULL) {
            rc = mcdc_error_set(err, MCDC_E_INVALID, "column '%s' has an unknown type %d",
                                f->name, (int)f->type);
            goto done;
        }
        for (int32_t j = 0; j < i; j++)
            if (mcdc_str_ieq(s->fields[j].name, f->name)) {
                rc = mcdc_error_set(err, MCDC_E_INVALID,
                                    "columns '%s' and '%s' differ only in case; Delta column "
                                    "names must be unique case-insensitively",
                                    s->fields[j].name, f->name);
                goto done;
            }
        json_t *meta = json_object();
        json_t *fo = json_object();
        json_t *name = json_string(f->name);
        bool bad = meta == NULL || fo == NULL || name == NULL;
        if (!bad && comments && comments[i]) {
            json_t *c = json_string(comments[i]);
            bad = c == NULL || json_object_set_new(meta, "comment", c);
        }
        if (!bad && ids && ids[i] > 0)
            bad = json_object_set_new(meta, "delta.columnMapping.id", json_integer(ids[i]));
        if (!bad && physical && physical[i]) {
            json_t *pn = json_string(physical[i]);
            bad = pn == NULL || json_object_set_new(meta, "delta.columnMapping.physicalName", pn);
        }
        if (!bad)
            bad = json_object_set_new(fo, "name", name) ||
                  json_object_set_new(fo, "type", json_string(tn)) ||
                  json_object_set_new(fo, "nullable", json_boolean(f->nullable)) ||
                  json_object_set(fo, "metadata", meta) || json_array_append(fields, fo);
        else
            json_decref(name);
        json_decref(meta);
        json_decref(fo);
        if (bad) {
            char what[64];
            snprintf(what, sizeof what, "the schema (column %d's name or comment)", (int)i);
            rc = mcdc_delta__json_fail(err,
                                       mcdc_delta__utf8_ok(f->name) &&
                                           mcdc_delta__utf8_ok(comments ? comments[i] : NULL) &&
                                           (physical == NULL || mcdc_delta__utf8_ok(physical[i])),
                                       what);
            goto done;
        }
    }
    {
        char *s_json = json_dumps(root, JSON_COMPACT);
        if (s_json == NULL) {
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory serializing a schema");
            goto done;
        }
        *out_json = mcdc_strdup(s_json);
        free(s_json);
        if (*out_json == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
done:
    json_decref(fields);
    json_decref(root);
    return rc;
}

/* "decimal(p,s)" with optional spaces. */
static bool parse_decimal(const char *t, int32_t *p, int32_t *s) {
    int pp = -1, ss = -1, used = 0;
    if (sscanf(t, "decimal ( %d , %d )%n", &pp, &ss, &used) != 2 || t[used] != 0) return false;
    *p = pp;
    *s = ss;
    return true;
}

static int field_type(const json_t *type, const char *name, mcdc_type_id *id, int32_t *p,
                      int32_t *s, mcdc_error *err) {
    if (!json_is_string(type))
        return mcdc_error_set(err, json_is_object(type) ? MCDC_E_UNSUPPORTED : MCDC_E_CORRUPT,
                              "column '%s': %s", name,
                              json_is_object(type)
                                  ? "nested types (struct, array, map) are not supported"
                                  : "the type is neither a string nor an object");
    const char *t = json_string_value(type);
    static const struct {
        const char *name;
        mcdc_type_id id;
    } map[] = {
        {"boolean", MCDC_TYPE_BOOL},      {"byte", MCDC_TYPE_INT8},
        {"short", MCDC_TYPE_INT16},       {"integer", MCDC_TYPE_INT32},
        {"long", MCDC_TYPE_INT64},        {"float", MCDC_TYPE_FLOAT},
        {"double", MCDC_TYPE_DOUBLE},     {"string", MCDC_TYPE_UTF8},
        {"binary", MCDC_TYPE_BINARY},     {"date", MCDC_TYPE_DATE32},
        {"timestamp", MCDC_TYPE_TIMESTAMP_UTC}, {"timestamp_ntz", MCDC_TYPE_TIMESTAMP_NTZ},
    };
    *p = *s = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(t, map[i].name) == 0) {
            *id = map[i].id;
            return MCDC_OK;
        }
    if (strcmp(t, "decimal") == 0) { /* Spark's default decimal(10,0) */
        *id = MCDC_TYPE_DECIMAL;
        *p = 10;
        return MCDC_OK;
    }
    if (strncmp(t, "decimal", 7) == 0) {
        if (!parse_decimal(t, p, s) || *p < 1 || *p > 38 || *s < 0 || *s > *p)
            return mcdc_error_set(err, MCDC_E_CORRUPT, "column '%s': bad decimal type \"%s\"",
                                  name, t);
        *id = MCDC_TYPE_DECIMAL;
        return MCDC_OK;
    }
    return mcdc_error_set(err, MCDC_E_UNSUPPORTED, "column '%s': type \"%s\" is not supported",
                          name, t);
}

void mcdc_delta_field_meta_free(mcdc_delta_field_meta *m, int32_t n_fields) {
    if (m == NULL) return;
    for (int32_t i = 0; i < n_fields; i++) {
        mcdc_free(m[i].comment);
        mcdc_free(m[i].physical_name);
    }
    mcdc_free(m);
}

int mcdc_delta_schema_from_json(mcdc_schema **out, mcdc_delta_field_meta **out_meta,
                                const char *json, mcdc_error *err) {
    *out = NULL;
    if (out_meta) *out_meta = NULL;
    if (json == NULL) return mcdc_error_set(err, MCDC_E_CORRUPT, "no schemaString");
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    if (root == NULL)
        return mcdc_error_set(err, MCDC_E_CORRUPT, "schemaString is not JSON (%s at column %d)",
                              je.text, je.column);
    int rc = MCDC_OK;
    mcdc_schema *s = NULL;
    mcdc_delta_field_meta *meta = NULL;
    json_t *fields = json_object_get(root, "fields");
    const char *ty = json_string_value(json_object_get(root, "type"));
    if (ty == NULL || strcmp(ty, "struct") != 0 || !json_is_array(fields)) {
        rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                            "schemaString is not a struct with a \"fields\" array");
        goto done;
    }
    size_t n = json_array_size(fields);
    if (n == 0 || n > MCDC_COLUMNS_MAX) {
        rc = mcdc_error_set(err, n ? MCDC_E_LIMIT : MCDC_E_CORRUPT,
                            "schemaString has %zu fields (1..%d supported)", n, MCDC_COLUMNS_MAX);
        goto done;
    }
    rc = mcdc_schema_create(&s, (int32_t)n, err);
    if (rc) goto done;
    if (out_meta && (meta = mcdc_calloc(n, sizeof *meta)) == NULL) {
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(fields, i);
        const char *name = json_string_value(json_object_get(f, "name"));
        json_t *nullable = json_object_get(f, "nullable");
        if (name == NULL || (nullable && !json_is_boolean(nullable))) {
            rc = mcdc_error_set(err, MCDC_E_CORRUPT,
                                "schemaString field %zu has no name or a bad \"nullable\"", i);
            goto done;
        }
        mcdc_type_id id = MCDC_TYPE_BOOL;
        int32_t p = 0, sc = 0;
        rc = field_type(json_object_get(f, "type"), name, &id, &p, &sc, err);
        if (rc) goto done;
        rc = mcdc_schema_set(s, (int32_t)i, name, id, p, sc, 0,
                             nullable == NULL || json_is_true(nullable), err);
        if (rc) goto done;
        json_t *md = json_object_get(f, "metadata");
        if (meta && json_is_object(md)) {
            const char *c = json_string_value(json_object_get(md, "comment"));
            const char *pn =
                json_string_value(json_object_get(md, "delta.columnMapping.physicalName"));
            json_t *cid = json_object_get(md, "delta.columnMapping.id");
            if (json_is_integer(cid)) meta[i].column_id = (int64_t)json_integer_value(cid);
            if ((c && (meta[i].comment = mcdc_strdup(c)) == NULL) ||
                (pn && (meta[i].physical_name = mcdc_strdup(pn)) == NULL)) {
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                goto done;
            }
        }
    }
done:
    json_decref(root);
    if (rc) {
        mcdc_delta_field_meta_free(meta, s ? s->n_fields : 0);
        mcdc_schema_unref(s);
        return rc;
    }
    *out = s;
    if (out_meta) *out_meta = meta;
    return MCDC_OK;
}

static bool same_type(const mcdc_field *a, const mcdc_field *b) {
    bool abin = a->type == MCDC_TYPE_BINARY || a->type == MCDC_TYPE_FIXED_BINARY;
    bool bbin = b->type == MCDC_TYPE_BINARY || b->type == MCDC_TYPE_FIXED_BINARY;
    if (abin || bbin) return abin && bbin;
    if (a->type != b->type) return false;
    return a->type != MCDC_TYPE_DECIMAL || (a->precision == b->precision && a->scale == b->scale);
}

bool mcdc_delta__schema_contains(const mcdc_schema *have, const mcdc_schema *want, char *why,
                                 size_t why_len) {
    for (int32_t i = 0; i < want->n_fields; i++) {
        const mcdc_field *w = &want->fields[i];
        int32_t j = mcdc_schema_find(have, w->name);
        if (j < 0) {
            snprintf(why, why_len, "column '%s' is missing", w->name);
            return false;
        }
        const mcdc_field *h = &have->fields[j];
        char b1[32], b2[32];
        if (!same_type(h, w)) {
            snprintf(why, why_len, "column '%s' is %s, expected %s", w->name, type_name(h, b1),
                     type_name(w, b2));
            return false;
        }
        if (h->nullable != w->nullable) {
            snprintf(why, why_len, "column '%s' is %snullable, expected %snullable", w->name,
                     h->nullable ? "" : "not ", w->nullable ? "" : "not ");
            return false;
        }
    }
    return true;
}
