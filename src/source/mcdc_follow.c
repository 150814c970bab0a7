/* mcdc_follow.c - the rules of schema changes and instance switches (see
 * mcdc_follow.h). Pure: the change feed asks the server, these decide. */
#include "mcdc_follow.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fits -------------------------------------------------------------------------- */

/* The integer types by width (0: not an integer). smallint and tinyint are
 * one type here (Spark's SMALLINT): tinyint's 0-255 does not fit a signed
 * byte. */
static int int_rank(mcdc_type_id t) {
    switch (t) {
    case MCDC_TYPE_INT8: return 1;
    case MCDC_TYPE_INT16: return 2;
    case MCDC_TYPE_INT32: return 3;
    case MCDC_TYPE_INT64: return 4;
    default: return 0;
    }
}

/* Decimal digits an integer type needs to the left of the point. */
static int int_digits(int rank) {
    static const int digits[] = {0, 3, 5, 10, 20};
    return digits[rank];
}

static bool is_binary(mcdc_type_id t) {
    return t == MCDC_TYPE_BINARY || t == MCDC_TYPE_FIXED_BINARY;
}

bool mcdc_type_fits(const mcdc_field *from, const mcdc_field *to) {
    mcdc_type_id a = from->type, b = to->type;
    if (a == b) /* a decimal: neither its scale nor its integer digits may shrink */
        return a != MCDC_TYPE_DECIMAL ||
               (to->scale >= from->scale &&
                to->precision - to->scale >= from->precision - from->scale);
    if (is_binary(a) && is_binary(b)) return true;
    int ra = int_rank(a), rb = int_rank(b);
    if (ra && rb) return ra <= rb;
    if (ra && b == MCDC_TYPE_DOUBLE) return ra < 4; /* a bigint loses digits in a double */
    if (ra && b == MCDC_TYPE_DECIMAL) return to->precision - to->scale >= int_digits(ra);
    if (a == MCDC_TYPE_FLOAT && b == MCDC_TYPE_DOUBLE) return true;
    if (a == MCDC_TYPE_DATE32 && b == MCDC_TYPE_TIMESTAMP_NTZ) return true;
    return false;
}

void mcdc_type_text(const mcdc_field *f, char out[48]) {
    if (f->type == MCDC_TYPE_DECIMAL)
        snprintf(out, 48, "decimal(%d,%d)", (int)f->precision, (int)f->scale);
    else if (f->type == MCDC_TYPE_FIXED_BINARY)
        snprintf(out, 48, "binary");
    else
        snprintf(out, 48, "%s", f->type ? mcdc_type_name(f->type) : "(no default type)");
}

void mcdc_sql_type_text(const mcdc_captured_column *c, char out[64]) {
    const char *t = c->data_type ? c->data_type : "?";
    bool chars = strstr(t, "char") != NULL || strstr(t, "binary") != NULL;
    bool dec = strcmp(t, "decimal") == 0 || strcmp(t, "numeric") == 0;
    if (chars && c->max_length == -1)
        snprintf(out, 64, "%s(max)", t);
    else if (chars && c->max_length > 0)
        snprintf(out, 64, "%s(%d)", t, c->max_length);
    else if (dec)
        snprintf(out, 64, "%s(%d,%d)", t, c->precision, c->scale);
    else
        snprintf(out, 64, "%s", t);
}

/* The captured column's default type as a field (type 0: it has none). */
static mcdc_field as_field(const mcdc_captured_column *c) {
    mcdc_field f = {.name = c->name, .nullable = true};
    mcdc_type_id t = 0;
    int32_t p = 0, s = 0;
    if (mcdc_cdc_map_type(&t, &p, &s, c, NULL) == MCDC_OK) {
        f.type = t;
        f.precision = p;
        f.scale = s;
    }
    return f;
}

static int32_t find_ci(const mcdc_schema *s, const char *name) {
    for (int32_t i = 0; s && i < s->n_fields; i++)
        if (mcdc_str_ieq(s->fields[i].name, name)) return i;
    return -1;
}

/* ---- union ------------------------------------------------------------------------- */

int mcdc_follow_union(mcdc_schema **out, const mcdc_schema *const *per_instance,
                      const char *const *names, int n, mcdc_error *err) {
    *out = NULL;
    int total = 0;
    for (int i = 0; i < n; i++) total += per_instance[i]->n_fields;
    /* Each column: the field that wins, and the instance it first came from. */
    const mcdc_field **pick = mcdc_calloc((size_t)(total ? total : 1), sizeof *pick);
    int *first = mcdc_calloc((size_t)(total ? total : 1), sizeof *first);
    if (pick == NULL || first == NULL) {
        mcdc_free(pick);
        mcdc_free(first);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    int k = 0, rc = MCDC_OK;
    for (int i = 0; i < n && rc == MCDC_OK; i++) {
        const mcdc_schema *s = per_instance[i];
        for (int32_t j = 0; j < s->n_fields && rc == MCDC_OK; j++) {
            const mcdc_field *f = &s->fields[j];
            int at = -1;
            for (int m = 0; m < k && at < 0; m++)
                if (mcdc_str_ieq(pick[m]->name, f->name)) at = m;
            if (at < 0) {
                first[k] = i;
                pick[k++] = f;
            } else if (mcdc_type_fits(pick[at], f)) {
                pick[at] = f; /* the newer type holds the older's values */
            } else {
                char a[48], b[48];
                mcdc_type_text(pick[at], a);
                mcdc_type_text(f, b);
                rc = mcdc_error_set(err, MCDC_E_SCHEMA,
                                    "capture instances %s and %s of one table capture column "
                                    "%s as %s and as %s, and %s does not hold every %s value: "
                                    "no schema reads both. Pass the columns option with a type "
                                    "that holds both, or disable the older instance once every "
                                    "stream has read past the newer one's start",
                                    names[first[at]], names[i], f->name, a, b, b, a);
            }
        }
    }
    mcdc_schema *s = NULL;
    if (rc == MCDC_OK) rc = mcdc_schema_create(&s, k, err);
    for (int m = 0; m < k && rc == MCDC_OK; m++)
        rc = mcdc_schema_set(s, m, pick[m]->name, pick[m]->type, pick[m]->precision,
                             pick[m]->scale, pick[m]->byte_width, true, err);
    mcdc_free(pick);
    mcdc_free(first);
    if (rc) {
        mcdc_schema_unref(s);
        return rc;
    }
    *out = s;
    return MCDC_OK;
}

/* ---- cut --------------------------------------------------------------------------- */

int mcdc_follow_cut(mcdc_follow_piece *out, int cap, const mcdc_lsn *starts, int n, int lowest,
                    const mcdc_lsn *from, const mcdc_lsn *to) {
    MCDC_ASSERT(n >= 1 && cap >= n && n <= MCDC_TABLE_INSTANCES_MAX);
    MCDC_ASSERT(lowest >= 0 && lowest < n);
    if (mcdc_lsn_cmp(to, from) < 0) return 0;
    /* The lowest (the oldest, or the newest the stream has read), then the
     * newer ones capture has taken up. Its start does not count:
     * cleanup raises it, and the position is past where it began. */
    int usable[MCDC_TABLE_INSTANCES_MAX], nu = 0;
    for (int i = lowest; i < n; i++)
        if (i == lowest || !mcdc_lsn_is_zero(&starts[i])) usable[nu++] = i;
    int k = 0;
    mcdc_lsn lo = *from;
    for (int u = 0; u < nu; u++) {
        const mcdc_lsn *s = u + 1 < nu ? &starts[usable[u + 1]] : NULL;
        if (s == NULL || mcdc_lsn_cmp(s, to) > 0) {
            out[k++] = (mcdc_follow_piece){usable[u], lo, *to};
            break;
        }
        if (mcdc_lsn_cmp(&lo, s) < 0) {
            mcdc_lsn before;
            mcdc_lsn_decrement(&before, s, NULL);
            out[k++] = (mcdc_follow_piece){usable[u], lo, before};
        }
        if (mcdc_lsn_cmp(&lo, s) < 0) lo = *s;
    }
    MCDC_ASSERT(k >= 1 && k <= n - lowest && out[0].instance >= lowest);
    for (int i = 0; i < k; i++) {
        MCDC_ASSERT(mcdc_lsn_cmp(&out[i].from, &out[i].to) <= 0);
        MCDC_ASSERT(i == 0 || mcdc_lsn_cmp(&out[i].from, &out[i - 1].to) > 0);
    }
    return k;
}

/* ---- DDL ----------------------------------------------------------------------------- */

int mcdc_follow_classify_ddl(const mcdc_follow_ddl *ddl, int n_ddl, bool fail_on_any,
                             bool explicit_columns, const mcdc_schema *expected,
                             const mcdc_follow_view *used, int n_used, mcdc_error *err) {
    if (n_ddl == 0) return MCDC_OK;
    char lsn[MCDC_LSN_TEXT_LEN + 1];
    if (fail_on_any) {
        mcdc_lsn_format(&ddl[0].lsn, lsn);
        return mcdc_error_set(err, MCDC_E_SCHEMA,
                              "capture instance %s: DDL at %s inside the batch (%.300s) and "
                              "schemaChangePolicy=fail: the batch was not read. Its replay "
                              "holds the same DDL: to go past it, restart once with "
                              "schemaChangePolicy=classify",
                              ddl[0].ci, lsn, ddl[0].command);
    }
    mcdc_buf changed = {0};
    int rc = MCDC_OK;
    for (int u = 0; u < n_used && rc == MCDC_OK; u++)
        for (int i = 0; i < used[u].n_cols && rc == MCDC_OK; i++) {
            const mcdc_captured_column *c = &used[u].cols[i];
            int32_t at = find_ci(expected, c->name);
            if (at < 0) continue; /* not read */
            mcdc_field now = as_field(c);
            if (now.type != 0 && mcdc_type_fits(&now, &expected->fields[at])) continue;
            char sql[64], as[48];
            mcdc_sql_type_text(c, sql);
            mcdc_type_text(&expected->fields[at], as);
            rc = mcdc_buf_printf(&changed, err, "%s%s %s (read as %s)", changed.len ? ", " : "",
                                 c->name, sql, as);
        }
    if (rc == MCDC_OK && changed.len == 0) return MCDC_OK;
    mcdc_buf cmds = {0};
    for (int i = 0; i < n_ddl && rc == MCDC_OK; i++) {
        mcdc_lsn_format(&ddl[i].lsn, lsn);
        rc = mcdc_buf_printf(&cmds, err, "%s%s: %.200s", i ? "; " : "", lsn, ddl[i].command);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&changed, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&cmds, err);
    if (rc == MCDC_OK)
        rc = mcdc_error_set(
            err, MCDC_E_SCHEMA,
            "capture instance %s: captured column(s) %.300s changed type (%.300s) to one the "
            "stream's type does not hold, and the change table holds the new type for every "
            "row: the batch was not read. %s",
            used[0].name, (const char *)changed.data, (const char *)cmds.data,
            explicit_columns
                ? "Give the columns option a type that holds the new values, then restart"
                : "A restart reads the new type; bronze never changes a column's type, so "
                  "stream into a new target (a new checkpoint and app id, with --bootstrap)");
    mcdc_buf_free(&changed);
    mcdc_buf_free(&cmds);
    return rc;
}

/* ---- switch -------------------------------------------------------------------------- */

int mcdc_follow_check_switch(const mcdc_schema *query, bool explicit_columns,
                             const mcdc_follow_view *newer, const mcdc_lsn *start,
                             char **warning, mcdc_error *err) {
    *warning = NULL;
    mcdc_buf fresh = {0}, other = {0};
    int rc = MCDC_OK;
    for (int i = 0; i < newer->n_cols && rc == MCDC_OK; i++) {
        const mcdc_captured_column *c = &newer->cols[i];
        int32_t at = find_ci(query, c->name);
        if (at < 0) {
            rc = mcdc_buf_printf(&fresh, err, "%s%s", fresh.len ? ", " : "", c->name);
            continue;
        }
        mcdc_field now = as_field(c);
        if (explicit_columns || (now.type != 0 && mcdc_type_fits(&now, &query->fields[at])))
            continue; /* a listed column's type is the user's conversion */
        char sql[64], as[48];
        mcdc_sql_type_text(c, sql);
        mcdc_type_text(&query->fields[at], as);
        rc = mcdc_buf_printf(&other, err, "%s%s %s (read as %s)", other.len ? ", " : "", c->name,
                             sql, as);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&fresh, err);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&other, err);
    char s[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(start, s);
    if (rc == MCDC_OK && explicit_columns && fresh.len) {
        *warning = mcdc_asprintf("capture instance %s (from %s) captures %s, which the columns "
                                 "option does not list: not read",
                                 newer->name, s, (const char *)fresh.data);
        if (*warning == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    } else if (rc == MCDC_OK && (fresh.len || other.len)) {
        rc = mcdc_error_set(
            err, MCDC_E_SCHEMA,
            "the stream reaches capture instance %s of its table at its start LSN %s, which "
            "captures %s%.300s%s%s%.300s that the stream's schema does not hold: it stopped "
            "before reading past %s. Restart the stream: it infers the new schema and goes on "
            "from there (bronze takes new columns; it never changes a column's type)",
            newer->name, s, fresh.len ? "new column(s) " : "",
            fresh.len ? (const char *)fresh.data : "", fresh.len && other.len ? " and " : "",
            other.len ? "other type(s) " : "", other.len ? (const char *)other.data : "", s);
    }
    mcdc_buf_free(&fresh);
    mcdc_buf_free(&other);
    return rc;
}

char *mcdc_follow_switch_detail(const char *older, const mcdc_follow_view *newer,
                                const mcdc_schema *query, const mcdc_lsn *start) {
    char s[MCDC_LSN_TEXT_LEN + 1];
    mcdc_lsn_format(start, s);
    json_t *lost = json_array();
    mcdc_buf text = {0};
    bool ok = lost && mcdc_buf_printf(&text, NULL, "%s -> %s", older, newer->name) == MCDC_OK;
    for (int32_t i = 0; ok && i < query->n_fields; i++) {
        bool kept = false;
        for (int k = 0; k < newer->n_cols && !kept; k++)
            kept = mcdc_str_ieq(newer->cols[k].name, query->fields[i].name);
        if (kept) continue;
        ok = json_array_append_new(lost, json_string(query->fields[i].name)) == 0 &&
             mcdc_buf_printf(&text, NULL, "%s%s",
                             json_array_size(lost) == 1 ? "; no longer captured, read as NULL: "
                                                        : ", ",
                             query->fields[i].name) == MCDC_OK;
    }
    ok = ok && mcdc_buf_cstr(&text, NULL) == MCDC_OK;
    json_t *d = ok ? json_pack("{s:s, s:O, s:s}", "start_lsn", s, "not_captured", lost, "text",
                               (const char *)text.data)
                   : NULL;
    char *out = d ? json_dumps(d, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(d);
    json_decref(lost);
    mcdc_buf_free(&text);
    return out;
}
