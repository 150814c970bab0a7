/* mcdc_token.c - what the public API's tokens share (mcdc_token.h). */
#include "mcdc_token.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

uint64_t mcdc_token_fnv1a(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void mcdc_token_hash_text(char out[MCDC_TOKEN_HASH_TEXT_SIZE], uint64_t h) {
    snprintf(out, MCDC_TOKEN_HASH_TEXT_SIZE, "%016llx", (unsigned long long)h);
}

void mcdc_token_schema_id(char out[MCDC_TOKEN_HASH_TEXT_SIZE], const mcdc_schema *s) {
    uint64_t h = MCDC_TOKEN_FNV_OFFSET;
    for (int32_t i = 0; i < s->n_fields; i++) {
        char fmt[32];
        mcdc_field_format(&s->fields[i], fmt);
        /* NUL separators: no two different schemas give the same bytes. */
        h = mcdc_token_fnv1a(h, s->fields[i].name, strlen(s->fields[i].name) + 1);
        h = mcdc_token_fnv1a(h, fmt, strlen(fmt) + 1);
        h = mcdc_token_fnv1a(h, s->fields[i].nullable ? "1" : "0", 1);
    }
    mcdc_token_hash_text(out, h);
}

int mcdc_token_bad(const mcdc_token_kind *k, mcdc_error *err, const char *fmt, ...) {
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "invalid %s token: %s (pass the text %s gave, unchanged)", k->name,
                          what, k->giver);
}

int mcdc_token_load(json_t **out, const mcdc_token_kind *k, const char *text, size_t n,
                    mcdc_error *err) {
    *out = NULL;
    if (text == NULL || n == 0) return mcdc_token_bad(k, err, "it is empty");
    if (n > k->bytes_max) {
        char len[96];
        snprintf(len, sizeof len, "%zu bytes; a token is at most %zu", n, k->bytes_max);
        return mcdc_token_bad(k, err, "it is %s", len);
    }
    json_error_t je;
    json_t *j = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) return mcdc_token_bad(k, err, "it is not JSON (%.160s at character %d)", je.text, je.position);
    if (!json_is_object(j)) {
        json_decref(j);
        return mcdc_token_bad(k, err, "it is not a JSON object");
    }
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        size_t f = 0;
        while (f < k->n_fields && strcmp(k->fields[f], key) != 0) f++;
        if (f == k->n_fields) {
            int rc = mcdc_token_bad(k, err, "unknown field '%.64s'", key);
            json_decref(j);
            return rc;
        }
    }
    *out = j;
    return MCDC_OK;
}

int mcdc_token_text(const mcdc_token_kind *k, const json_t *j, const char *key, const char **out,
                    mcdc_error *err) {
    const json_t *v = json_object_get(j, key);
    if (v == NULL) return mcdc_token_bad(k, err, "field '%s' is missing", key);
    if (!json_is_string(v)) return mcdc_token_bad(k, err, "field '%s' is not a string", key);
    *out = json_string_value(v);
    return MCDC_OK;
}

int mcdc_token_int(const mcdc_token_kind *k, const json_t *j, const char *key, int64_t min,
                   int64_t max, int64_t *out, mcdc_error *err) {
    const json_t *v = json_object_get(j, key);
    if (v == NULL) return mcdc_token_bad(k, err, "field '%s' is missing", key);
    if (!json_is_integer(v)) return mcdc_token_bad(k, err, "field '%s' is not an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < min || x > max) {
        char range[96];
        snprintf(range, sizeof range, " (%lld; expected %lld to %lld)", (long long)x,
                 (long long)min, (long long)max);
        return mcdc_token_bad(k, err, "field '%s' is out of range%s", key, range);
    }
    *out = (int64_t)x;
    return MCDC_OK;
}

int mcdc_token_hash(const mcdc_token_kind *k, const json_t *j, const char *key,
                    char out[MCDC_TOKEN_HASH_TEXT_SIZE], mcdc_error *err) {
    const char *s;
    int rc = mcdc_token_text(k, j, key, &s, err);
    if (rc) return rc;
    size_t n = strlen(s);
    bool ok = n == MCDC_TOKEN_HASH_TEXT_SIZE - 1;
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    if (!ok) return mcdc_token_bad(k, err, "field '%s' is not 16 lowercase hex digits", key);
    memcpy(out, s, MCDC_TOKEN_HASH_TEXT_SIZE);
    return MCDC_OK;
}

int mcdc_token_version(const mcdc_token_kind *k, const json_t *j, const char *key, int want,
                       mcdc_error *err) {
    int64_t version;
    int rc = mcdc_token_int(k, j, key, 0, INT32_MAX, &version, err);
    if (rc == MCDC_OK && version != want) {
        char have[64];
        snprintf(have, sizeof have, "%lld; this library reads version %d", (long long)version,
                 want);
        rc = mcdc_token_bad(k, err, "it is of version %s", have);
    }
    return rc;
}

int mcdc_token_capture_instance(const mcdc_token_kind *k, const json_t *j,
                                char out[MCDC_CAPTURE_INSTANCE_TEXT_SIZE], mcdc_error *err) {
    const char *ci;
    int rc = mcdc_token_text(k, j, "capture_instance", &ci, err);
    if (rc) return rc;
    if (mcdc_validate_capture_instance(ci, NULL) != MCDC_OK ||
        strlen(ci) >= MCDC_CAPTURE_INSTANCE_TEXT_SIZE)
        return mcdc_token_bad(k, err, "field 'capture_instance' is not a capture instance name");
    snprintf(out, MCDC_CAPTURE_INSTANCE_TEXT_SIZE, "%s", ci);
    return MCDC_OK;
}

int mcdc_token_options(mcdc_opts **out, const mcdc_opts *opts, const char *ci, const char *caller,
                       mcdc_error *err) {
    *out = NULL;
    const char *given = mcdc_opt_capture_instance(opts);
    if (given && !mcdc_str_ieq(given, ci))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "%s: the token reads capture instance '%s' but the options name "
                              "'%s'; leave captureInstance out or name the token's",
                              caller, ci, given);
    int rc = mcdc_opts_clone(out, opts, err);
    if (rc == MCDC_OK) rc = mcdc_opts_set(*out, "captureInstance", ci, NULL, err);
    if (rc != MCDC_OK) {
        mcdc_opts_free(*out);
        *out = NULL;
    }
    return rc;
}
