/* mcdc_range_token.c - range tokens to and from text (mcdc_range_token.h). */
#include "mcdc_range_token.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_options.h"

void mcdc_range_schema_id(char out[MCDC_RANGE_HASH_TEXT_SIZE], const mcdc_schema *s) {
    mcdc_token_schema_id(out, s);
}

static int token_version(const mcdc_range_token *t) {
    return t->follow ? MCDC_RANGE_TOKEN_VERSION_FOLLOW : MCDC_RANGE_TOKEN_VERSION;
}

/* The check over every other field, in a fixed order and form. */
static void token_check(char out[MCDC_RANGE_HASH_TEXT_SIZE], const mcdc_range_token *t) {
    char f[MCDC_LSN_TEXT_LEN + 1], to[MCDC_LSN_TEXT_LEN + 1], nums[96];
    mcdc_lsn_format(&t->from, f);
    mcdc_lsn_format(&t->to, to);
    snprintf(nums, sizeof nums, "%d\n%lld\n%d\n%d\n", token_version(t),
             (long long)t->rows_estimate, (int)t->index, (int)t->count);
    uint64_t h = mcdc_token_fnv1a(MCDC_TOKEN_FNV_OFFSET, nums, strlen(nums));
    h = mcdc_token_fnv1a(h, t->capture_instance, strlen(t->capture_instance) + 1);
    h = mcdc_token_fnv1a(h, f, sizeof f);
    h = mcdc_token_fnv1a(h, to, sizeof to);
    h = mcdc_token_fnv1a(h, t->schema_id, strlen(t->schema_id) + 1);
    mcdc_token_hash_text(out, h);
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
                          token_version(t), "capture_instance", t->capture_instance,
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
static const mcdc_token_kind KIND = {"range", "mcdc_range_plan_token", FIELDS,
                                     sizeof FIELDS / sizeof FIELDS[0], MCDC_RANGE_TOKEN_BYTES_MAX};

static int get_lsn(const json_t *j, const char *key, mcdc_lsn *out, mcdc_error *err) {
    const char *s;
    int rc = mcdc_token_text(&KIND, j, key, &s, err);
    if (rc) return rc;
    /* Only the canonical text the planner writes: any other spelling of
     * the same LSN is an edit. */
    char canon[MCDC_LSN_TEXT_LEN + 1] = "";
    bool parsed = mcdc_lsn_parse_cstr(out, s, NULL) == MCDC_OK;
    if (parsed) mcdc_lsn_format(out, canon);
    if (!parsed || strcmp(canon, s) != 0)
        return mcdc_token_bad(&KIND, err, "field '%s' is not an LSN as 0x and 20 uppercase hex digits", key);
    return MCDC_OK;
}

static int decode_fields(mcdc_range_token *t, const json_t *j, mcdc_error *err) {
    int64_t rows, index, count;
    /* version 1, or 2 for a range of a batch planned following the
     * table's instances (the same fields) */
    int rc = mcdc_token_version(&KIND, j, "mssqlcdc_range", MCDC_RANGE_TOKEN_VERSION, NULL);
    if (rc) {
        rc = mcdc_token_version(&KIND, j, "mssqlcdc_range", MCDC_RANGE_TOKEN_VERSION_FOLLOW, err);
        if (rc) return rc;
        t->follow = true;
    }
    if ((rc = mcdc_token_capture_instance(&KIND, j, t->capture_instance, err))) return rc;
    if ((rc = get_lsn(j, "from_lsn", &t->from, err))) return rc;
    if ((rc = get_lsn(j, "to_lsn", &t->to, err))) return rc;
    if ((rc = mcdc_token_int(&KIND, j, "rows_estimate", 0, INT64_MAX, &rows, err))) return rc;
    if ((rc = mcdc_token_int(&KIND, j, "count", 1, MCDC_PARTITIONS_MAX, &count, err))) return rc;
    if ((rc = mcdc_token_int(&KIND, j, "index", 0, count - 1, &index, err))) return rc;
    if ((rc = mcdc_token_hash(&KIND, j, "schema", t->schema_id, err))) return rc;
    char check[MCDC_RANGE_HASH_TEXT_SIZE], want[MCDC_RANGE_HASH_TEXT_SIZE];
    if ((rc = mcdc_token_hash(&KIND, j, "check", check, err))) return rc;
    t->rows_estimate = rows;
    t->index = (int32_t)index;
    t->count = (int32_t)count;
    if (mcdc_lsn_cmp(&t->from, &t->to) > 0)
        return mcdc_token_bad(&KIND, err, "from_lsn is after to_lsn");
    token_check(want, t);
    if (strcmp(want, check) != 0)
        return mcdc_token_bad(&KIND, err, "its check does not match its fields: it was changed or "
                                          "cut after planning");
    return MCDC_OK;
}

int mcdc_range_token_decode(mcdc_range_token *out, const char *text, size_t n, mcdc_error *err) {
    MCDC_ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    json_t *j = NULL;
    int rc = mcdc_token_load(&j, &KIND, text, n, err);
    if (rc == MCDC_OK) rc = decode_fields(out, j, err);
    json_decref(j);
    if (rc != MCDC_OK) memset(out, 0, sizeof *out);
    return rc;
}
