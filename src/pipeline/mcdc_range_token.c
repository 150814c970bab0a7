/* mcdc_range_token.c - range tokens to and from text (mcdc_range_token.h). */
#include "mcdc_range_token.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_options.h"

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
#define FNV_OFFSET 0xcbf29ce484222325ULL

static void hash_text(char out[MCDC_RANGE_HASH_TEXT_SIZE], uint64_t h) {
    snprintf(out, MCDC_RANGE_HASH_TEXT_SIZE, "%016llx", (unsigned long long)h);
}

void mcdc_range_schema_id(char out[MCDC_RANGE_HASH_TEXT_SIZE], const mcdc_schema *s) {
    uint64_t h = FNV_OFFSET;
    for (int32_t i = 0; i < s->n_fields; i++) {
        char fmt[32];
        mcdc_field_format(&s->fields[i], fmt);
        /* NUL separators: no two different schemas give the same bytes. */
        h = fnv1a(h, s->fields[i].name, strlen(s->fields[i].name) + 1);
        h = fnv1a(h, fmt, strlen(fmt) + 1);
        h = fnv1a(h, s->fields[i].nullable ? "1" : "0", 1);
    }
    hash_text(out, h);
}

/* The check over every other field, in a fixed order and form. */
static void token_check(char out[MCDC_RANGE_HASH_TEXT_SIZE], const mcdc_range_token *t) {
    char f[MCDC_LSN_TEXT_LEN + 1], to[MCDC_LSN_TEXT_LEN + 1], nums[96];
    mcdc_lsn_format(&t->from, f);
    mcdc_lsn_format(&t->to, to);
    snprintf(nums, sizeof nums, "%d\n%lld\n%d\n%d\n", MCDC_RANGE_TOKEN_VERSION,
             (long long)t->rows_estimate, (int)t->index, (int)t->count);
    uint64_t h = fnv1a(FNV_OFFSET, nums, strlen(nums));
    h = fnv1a(h, t->capture_instance, strlen(t->capture_instance) + 1);
    h = fnv1a(h, f, sizeof f);
    h = fnv1a(h, to, sizeof to);
    h = fnv1a(h, t->schema_id, strlen(t->schema_id) + 1);
    hash_text(out, h);
}

int mcdc_range_token_encode(char **out, const mcdc_range_token *t, mcdc_error *err) {
    MCDC_ASSERT(out != NULL && t != NULL);
    MCDC_ASSERT(mcdc_lsn_cmp(&t->from, &t->to) <= 0);
    MCDC_ASSERT(t->index >= 0 && t->index < t->count && t->count <= MCDC_PARTITIONS_MAX);
    MCDC_ASSERT(t->rows_estimate >= 0 && strlen(t->schema_id) == MCDC_RANGE_HASH_TEXT_SIZE - 1);
    *out = NULL;
    char f[MCDC_LSN_TEXT_LEN + 1], to[MCDC_LSN_TEXT_LEN + 1], check[MCDC_RANGE_HASH_TEXT_SIZE];
    mcdc_lsn_format(&t->from, f);
    mcdc_lsn_format(&t->to, to);
    token_check(check, t);
    /* Insertion order is the text's order (JSON_PRESERVE_ORDER). */
    json_t *j = json_pack("{s:i, s:s, s:s, s:s, s:I, s:i, s:i, s:s, s:s}", "mssqlcdc_range",
                          MCDC_RANGE_TOKEN_VERSION, "capture_instance", t->capture_instance,
                          "from_lsn", f, "to_lsn", to, "rows_estimate",
                          (json_int_t)t->rows_estimate, "index", (int)t->index, "count",
                          (int)t->count, "schema", t->schema_id, "check", check);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (s == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM,
                              "out of memory writing a range token (or capture instance '%s' "
                              "is not UTF-8)",
                              t->capture_instance);
    *out = mcdc_strdup(s);
    free(s); /* jansson's allocation */
    if (*out == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory writing a range token");
    MCDC_ASSERT(strlen(*out) <= MCDC_RANGE_TOKEN_BYTES_MAX);
    return MCDC_OK;
}

/* ---- decoding ------------------------------------------------------------------- */
static const char *const FIELDS[] = {"mssqlcdc_range", "capture_instance", "from_lsn", "to_lsn",
                                     "rows_estimate", "index", "count", "schema", "check"};
#define NFIELDS (sizeof FIELDS / sizeof FIELDS[0])

static int bad(mcdc_error *err, const char *fmt, ...) MCDC_PRINTF(2, 3);
static int bad(mcdc_error *err, const char *fmt, ...) {
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "invalid range token: %s (pass the text mcdc_range_plan_token gave, "
                          "unchanged)",
                          what);
}

static int get_text(const json_t *j, const char *key, const char **out, mcdc_error *err) {
    const json_t *v = json_object_get(j, key);
    if (v == NULL) return bad(err, "field '%s' is missing", key);
    if (!json_is_string(v)) return bad(err, "field '%s' is not a string", key);
    *out = json_string_value(v);
    return MCDC_OK;
}

static int get_int(const json_t *j, const char *key, int64_t min, int64_t max, int64_t *out,
                   mcdc_error *err) {
    const json_t *v = json_object_get(j, key);
    if (v == NULL) return bad(err, "field '%s' is missing", key);
    if (!json_is_integer(v)) return bad(err, "field '%s' is not an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < min || x > max) {
        char range[96];
        snprintf(range, sizeof range, " (%lld; expected %lld to %lld)", (long long)x,
                 (long long)min, (long long)max);
        return bad(err, "field '%s' is out of range%s", key, range);
    }
    *out = (int64_t)x;
    return MCDC_OK;
}

static int get_lsn(const json_t *j, const char *key, mcdc_lsn *out, mcdc_error *err) {
    const char *s;
    int rc = get_text(j, key, &s, err);
    if (rc) return rc;
    /* Only the canonical text the planner writes: any other spelling of
     * the same LSN is an edit. */
    char canon[MCDC_LSN_TEXT_LEN + 1] = "";
    bool parsed = mcdc_lsn_parse_cstr(out, s, NULL) == MCDC_OK;
    if (parsed) mcdc_lsn_format(out, canon);
    if (!parsed || strcmp(canon, s) != 0)
        return bad(err, "field '%s' is not an LSN as 0x and 20 uppercase hex digits", key);
    return MCDC_OK;
}

static int get_hash(const json_t *j, const char *key, char out[MCDC_RANGE_HASH_TEXT_SIZE],
                    mcdc_error *err) {
    const char *s;
    int rc = get_text(j, key, &s, err);
    if (rc) return rc;
    size_t n = strlen(s);
    bool ok = n == MCDC_RANGE_HASH_TEXT_SIZE - 1;
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    if (!ok) return bad(err, "field '%s' is not 16 lowercase hex digits", key);
    memcpy(out, s, MCDC_RANGE_HASH_TEXT_SIZE);
    return MCDC_OK;
}

static int decode_fields(mcdc_range_token *t, const json_t *j, mcdc_error *err) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        size_t k = 0;
        while (k < NFIELDS && strcmp(FIELDS[k], key) != 0) k++;
        if (k == NFIELDS) return bad(err, "unknown field '%.64s'", key);
    }
    int64_t version, rows, index, count;
    int rc = get_int(j, "mssqlcdc_range", 0, INT32_MAX, &version, err);
    if (rc) return rc;
    if (version != MCDC_RANGE_TOKEN_VERSION) {
        char have[64];
        snprintf(have, sizeof have, "%lld; this library reads version %d", (long long)version,
                 MCDC_RANGE_TOKEN_VERSION);
        return bad(err, "it is of version %s", have);
    }
    const char *ci;
    if ((rc = get_text(j, "capture_instance", &ci, err))) return rc;
    if (mcdc_validate_capture_instance(ci, NULL) != MCDC_OK ||
        strlen(ci) >= sizeof t->capture_instance)
        return bad(err, "field 'capture_instance' is not a capture instance name");
    snprintf(t->capture_instance, sizeof t->capture_instance, "%s", ci);
    if ((rc = get_lsn(j, "from_lsn", &t->from, err))) return rc;
    if ((rc = get_lsn(j, "to_lsn", &t->to, err))) return rc;
    if ((rc = get_int(j, "rows_estimate", 0, INT64_MAX, &rows, err))) return rc;
    if ((rc = get_int(j, "count", 1, MCDC_PARTITIONS_MAX, &count, err))) return rc;
    if ((rc = get_int(j, "index", 0, count - 1, &index, err))) return rc;
    if ((rc = get_hash(j, "schema", t->schema_id, err))) return rc;
    char check[MCDC_RANGE_HASH_TEXT_SIZE], want[MCDC_RANGE_HASH_TEXT_SIZE];
    if ((rc = get_hash(j, "check", check, err))) return rc;
    t->rows_estimate = rows;
    t->index = (int32_t)index;
    t->count = (int32_t)count;
    if (mcdc_lsn_cmp(&t->from, &t->to) > 0)
        return bad(err, "from_lsn is after to_lsn");
    token_check(want, t);
    if (strcmp(want, check) != 0)
        return bad(err, "its check does not match its fields: it was changed or cut after "
                        "planning");
    return MCDC_OK;
}

int mcdc_range_token_decode(mcdc_range_token *out, const char *text, size_t n, mcdc_error *err) {
    MCDC_ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    if (text == NULL || n == 0) return bad(err, "it is empty");
    if (n > MCDC_RANGE_TOKEN_BYTES_MAX) {
        char len[64];
        snprintf(len, sizeof len, "%zu bytes; a token is at most %d", n,
                 MCDC_RANGE_TOKEN_BYTES_MAX);
        return bad(err, "it is %s", len);
    }
    json_error_t je;
    json_t *j = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) {
        return bad(err, "it is not JSON (%.160s at character %d)", je.text, je.position);
    }
    int rc = json_is_object(j) ? decode_fields(out, j, err)
                               : bad(err, "it is not a JSON object");
    json_decref(j);
    if (rc != MCDC_OK) memset(out, 0, sizeof *out);
    return rc;
}
