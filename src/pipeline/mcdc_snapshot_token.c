/* mcdc_snapshot_token.c - snapshot chunk tokens to and from text (mcdc_snapshot_token.h). */
#include "mcdc_snapshot_token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const FIELDS[] = {"mssqlcdc_snapshot", "capture_instance", "keys", "lo", "hi",
                                     "index", "count", "schema", "check"};
static const mcdc_token_kind KIND = {"snapshot", "mcdc_snapshot_plan_token", FIELDS,
                                     sizeof FIELDS / sizeof FIELDS[0],
                                     MCDC_SNAPSHOT_TOKEN_BYTES_MAX};

void mcdc_snapshot_token_clear(mcdc_snapshot_token *t) {
    json_decref(t->keys);
    json_decref(t->lo);
    json_decref(t->hi);
    t->keys = t->lo = t->hi = NULL;
}

/* A JSON value's compact text into the hash, NUL-terminated. */
static uint64_t hash_json(uint64_t h, const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    h = s ? mcdc_token_fnv1a(h, s, strlen(s) + 1) : mcdc_token_fnv1a(h, "?", 2);
    free(s); /* jansson's allocation */
    return h;
}

/* The check over every other field, in a fixed order and form. */
static void token_check(char out[MCDC_TOKEN_HASH_TEXT_SIZE], const mcdc_snapshot_token *t) {
    char nums[64];
    snprintf(nums, sizeof nums, "%d\n%d\n%d\n", MCDC_SNAPSHOT_TOKEN_VERSION, (int)t->index,
             (int)t->count);
    uint64_t h = mcdc_token_fnv1a(MCDC_TOKEN_FNV_OFFSET, nums, strlen(nums));
    h = mcdc_token_fnv1a(h, t->capture_instance, strlen(t->capture_instance) + 1);
    h = hash_json(h, t->keys);
    h = hash_json(h, t->lo);
    h = hash_json(h, t->hi);
    h = mcdc_token_fnv1a(h, t->schema_id, strlen(t->schema_id) + 1);
    mcdc_token_hash_text(out, h);
}

/* A string without NUL of 1..max bytes. */
static bool text_ok(const json_t *v, size_t min, size_t max) {
    if (!json_is_string(v)) return false;
    size_t n = json_string_length(v);
    return n >= min && n <= max && strlen(json_string_value(v)) == n;
}

static bool keys_ok(const json_t *keys) {
    if (!json_is_array(keys) || json_array_size(keys) > MCDC_SNAPSHOT_KEYS_MAX) return false;
    for (size_t i = 0; i < json_array_size(keys); i++)
        if (!text_ok(json_array_get(keys, i), 1, MCDC_IDENT_BYTES_MAX)) return false;
    return true;
}

static bool part_ok(const json_t *v) {
    return json_is_null(v) || json_is_integer(v) || text_ok(v, 0, MCDC_KEY_BOUND_BYTES_MAX);
}

bool mcdc_snapshot_bound_ok(const json_t *b, size_t n) {
    if (json_is_null(b)) return true;
    if (n == 1) return part_ok(b);
    if (n == 0 || !json_is_array(b) || json_array_size(b) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!part_ok(json_array_get(b, i))) return false;
    return true;
}

int mcdc_snapshot_token_encode(char **out, const mcdc_snapshot_token *t, mcdc_error *err) {
    MCDC_ASSERT(out != NULL && t != NULL && keys_ok(t->keys));
    MCDC_ASSERT(mcdc_snapshot_bound_ok(t->lo, json_array_size(t->keys)) &&
                mcdc_snapshot_bound_ok(t->hi, json_array_size(t->keys)));
    MCDC_ASSERT(t->index >= 0 && t->index < t->count && t->count <= MCDC_SNAPSHOT_CHUNKS_MAX);
    MCDC_ASSERT(strlen(t->schema_id) == MCDC_TOKEN_HASH_TEXT_SIZE - 1);
    *out = NULL;
    char check[MCDC_TOKEN_HASH_TEXT_SIZE];
    token_check(check, t);
    /* Insertion order is the text's order (JSON_PRESERVE_ORDER). */
    json_t *j = json_pack("{s:i, s:s, s:O, s:O, s:O, s:i, s:i, s:s, s:s}", "mssqlcdc_snapshot",
                          MCDC_SNAPSHOT_TOKEN_VERSION, "capture_instance", t->capture_instance,
                          "keys", t->keys, "lo", t->lo, "hi", t->hi, "index", (int)t->index,
                          "count", (int)t->count, "schema", t->schema_id, "check", check);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (s == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory writing a snapshot token");
    int rc = MCDC_OK;
    if (strlen(s) > MCDC_SNAPSHOT_TOKEN_BYTES_MAX)
        rc = mcdc_error_set(err, MCDC_E_LIMIT,
                            "a snapshot token of %zu bytes, more than %d: its key values are too "
                            "long (cut the snapshot on other columns, snapshotKeys)",
                            strlen(s), MCDC_SNAPSHOT_TOKEN_BYTES_MAX);
    if (rc == MCDC_OK && (*out = mcdc_strdup(s)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory writing a snapshot token");
    free(s); /* jansson's allocation */
    return rc;
}

static int decode_fields(mcdc_snapshot_token *t, const json_t *j, mcdc_error *err) {
    int64_t index, count;
    int rc = mcdc_token_version(&KIND, j, "mssqlcdc_snapshot", MCDC_SNAPSHOT_TOKEN_VERSION, err);
    if (rc) return rc;
    if ((rc = mcdc_token_capture_instance(&KIND, j, t->capture_instance, err))) return rc;
    const json_t *keys = json_object_get(j, "keys");
    if (keys == NULL) return mcdc_token_bad(&KIND, err, "field 'keys' is missing");
    if (!keys_ok(keys))
        return mcdc_token_bad(&KIND, err, "field 'keys' is not an array of at most %d column names",
                              MCDC_SNAPSHOT_KEYS_MAX);
    static const char *const ENDS[] = {"lo", "hi"};
    for (int e = 0; e < 2; e++) {
        const json_t *b = json_object_get(j, ENDS[e]);
        if (b == NULL) return mcdc_token_bad(&KIND, err, "field '%s' is missing", ENDS[e]);
        if (!mcdc_snapshot_bound_ok(b, json_array_size(keys)))
            return mcdc_token_bad(&KIND, err,
                                  "field '%s' is not a bound of %zu key columns (null; a scalar "
                                  "for one; an array for several; of integers, strings, nulls)",
                                  ENDS[e], json_array_size(keys));
    }
    if ((rc = mcdc_token_int(&KIND, j, "count", 1, MCDC_SNAPSHOT_CHUNKS_MAX, &count, err))) return rc;
    if ((rc = mcdc_token_int(&KIND, j, "index", 0, count - 1, &index, err))) return rc;
    if ((rc = mcdc_token_hash(&KIND, j, "schema", t->schema_id, err))) return rc;
    char check[MCDC_TOKEN_HASH_TEXT_SIZE], want[MCDC_TOKEN_HASH_TEXT_SIZE];
    if ((rc = mcdc_token_hash(&KIND, j, "check", check, err))) return rc;
    t->index = (int32_t)index;
    t->count = (int32_t)count;
    t->keys = json_incref(json_object_get(j, "keys"));
    t->lo = json_incref(json_object_get(j, "lo"));
    t->hi = json_incref(json_object_get(j, "hi"));
    token_check(want, t);
    if (strcmp(want, check) != 0)
        return mcdc_token_bad(&KIND, err, "its check does not match its fields: it was changed or "
                                          "cut after planning");
    return MCDC_OK;
}

int mcdc_snapshot_token_decode(mcdc_snapshot_token *out, const char *text, size_t n,
                               mcdc_error *err) {
    MCDC_ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    json_t *j = NULL;
    int rc = mcdc_token_load(&j, &KIND, text, n, err);
    if (rc == MCDC_OK) rc = decode_fields(out, j, err);
    json_decref(j);
    if (rc != MCDC_OK) {
        mcdc_snapshot_token_clear(out);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

/* ---- a plan recorded before (mcdc_snapshot_plan_chunks) ------------------------------- */

static int plan_text_check(const json_t *keys, const json_t *chunks, const json_t *max,
                           bool has_max, mcdc_error *err) {
    if (!keys_ok(keys))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_snapshot_plan_chunks: keys_json is not a JSON array of at "
                              "most %d column names",
                              MCDC_SNAPSHOT_KEYS_MAX);
    size_t n = json_array_size(keys), m = json_array_size(chunks);
    if (!json_is_array(chunks) || m < 1 || m > MCDC_SNAPSHOT_CHUNKS_MAX)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "mcdc_snapshot_plan_chunks: chunks_json is not a JSON array of 1 "
                              "to %d [lo, hi] pairs",
                              MCDC_SNAPSHOT_CHUNKS_MAX);
    for (size_t i = 0; i < m; i++) {
        const json_t *c = json_array_get(chunks, i);
        if (!json_is_array(c) || json_array_size(c) != 2 ||
            !mcdc_snapshot_bound_ok(json_array_get(c, 0), n) ||
            !mcdc_snapshot_bound_ok(json_array_get(c, 1), n))
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "mcdc_snapshot_plan_chunks: chunk %zu of chunks_json is not a "
                                  "[lo, hi] pair of bounds of %zu key column%s",
                                  i, n, n == 1 ? "" : "s");
    }
    if (has_max && (max == NULL || !mcdc_snapshot_bound_ok(max, n)))
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_snapshot_plan_chunks: max_json is not "
                                                   "a bound of the plan's key columns");
    return MCDC_OK;
}

int mcdc_snapshot_plan_text_parse(json_t **keys, json_t **chunks, json_t **max,
                                  const char *keys_json, const char *chunks_json,
                                  const char *max_json, mcdc_error *err) {
    MCDC_ASSERT(keys && chunks && max && keys_json && chunks_json);
    json_error_t je;
    *keys = json_loads(keys_json, JSON_REJECT_DUPLICATES, &je);
    *chunks = json_loads(chunks_json, JSON_REJECT_DUPLICATES, &je);
    *max = max_json ? json_loads(max_json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je) : NULL;
    int rc = plan_text_check(*keys, *chunks, *max, max_json != NULL, err);
    if (rc) {
        json_decref(*keys);
        json_decref(*chunks);
        json_decref(*max);
        *keys = *chunks = *max = NULL;
    }
    return rc;
}

/* ---- an extent recorded before (mcdc_snapshot_plan_from_extent) ------------------------- */

static bool extent_ok(const json_t *e, size_t n) {
    const char *kind = json_string_value(json_object_get(e, "kind"));
    if (!json_is_object(e) || kind == NULL) return false;
    if (strcmp(kind, "int") == 0) {
        const json_t *lo = json_object_get(e, "lo"), *hi = json_object_get(e, "hi"),
                     *rows = json_object_get(e, "rows");
        return n == 1 && json_is_integer(lo) && json_is_integer(hi) && json_is_integer(rows) &&
               json_integer_value(lo) <= json_integer_value(hi) && json_integer_value(rows) >= 0;
    }
    const json_t *max = json_object_get(e, "max");
    return strcmp(kind, "keyset") == 0 && max != NULL && mcdc_snapshot_bound_ok(max, n);
}

int mcdc_snapshot_extent_text_parse(json_t **keys, json_t **extent, const char *keys_json,
                                    const char *extent_json, mcdc_error *err) {
    MCDC_ASSERT(keys && extent && keys_json && extent_json);
    json_error_t je;
    *keys = json_loads(keys_json, JSON_REJECT_DUPLICATES, &je);
    *extent = json_loads(extent_json, JSON_REJECT_DUPLICATES, &je);
    int rc = MCDC_OK;
    if (!keys_ok(*keys))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "mcdc_snapshot_plan_from_extent: keys_json is not a JSON array of at "
                            "most %d column names",
                            MCDC_SNAPSHOT_KEYS_MAX);
    else if (!extent_ok(*extent, json_array_size(*keys)))
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "mcdc_snapshot_plan_from_extent: extent_json is neither "
                            "{\"kind\":\"int\",\"lo\":MIN,\"hi\":MAX,\"rows\":n} (one key column, "
                            "integers, MIN <= MAX, n >= 0) nor {\"kind\":\"keyset\",\"max\":MAX} "
                            "(MAX a bound of the %zu key column%s, or null)",
                            json_array_size(*keys), json_array_size(*keys) == 1 ? "" : "s");
    if (rc) {
        json_decref(*keys);
        json_decref(*extent);
        *keys = *extent = NULL;
    }
    return rc;
}
