/*
 * mcdc_silver_source.c - the source of a bronze table for the commands
 * that read it after the stream (apply, reconcile, repair): the capture
 * instances bronze's rows name, and the change feed opened on the
 * configured instance, or, once that one is gone, on its table's
 * instance that reads now (mcdc_changes_settings.also_names). A stream
 * that switched to a newer instance and had the older one disabled
 * (docs/schema-changes.md) wrote rows of both: the newer name still
 * names the table when the configured older one does not.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "mcdc_changes.h"
#include "mcdc_silver.h"

void silver_instances_free(silver_instances *x) {
    if (x == NULL) return;
    for (int32_t i = 0; i < x->n; i++) mcdc_free(x->names[i]);
    mcdc_free(x->names);
    mcdc_free(x->newest);
    memset(x, 0, sizeof *x);
}

/* name (len bytes) seen at lsn: added, or its newest LSN raised. */
static int seen(silver_instances *x, const char *name, size_t len, const uint8_t lsn[10],
                mcdc_error *err) {
    if (len == 0 || len > MCDC_IDENT_BYTES_MAX) return MCDC_OK; /* no instance's name */
    for (int32_t i = 0; i < x->n; i++)
        if (strlen(x->names[i]) == len && memcmp(x->names[i], name, len) == 0) {
            if (memcmp(lsn, x->newest[i], 10) > 0) memcpy(x->newest[i], lsn, 10);
            return MCDC_OK;
        }
    if (x->n >= SILVER_INSTANCES_MAX)
        return mcdc_error_set(err, MCDC_E_LIMIT,
                              "bronze holds rows of more than %d capture instances: is it one "
                              "table's stream?",
                              SILVER_INSTANCES_MAX);
    char **v = mcdc_realloc(x->names, (size_t)(x->n + 1) * sizeof *v);
    if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    x->names = v;
    uint8_t(*w)[10] = mcdc_realloc(x->newest, (size_t)(x->n + 1) * sizeof *w);
    if (w == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    x->newest = w;
    if ((x->names[x->n] = mcdc_strndup(name, len)) == NULL)
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    memcpy(x->newest[x->n], lsn, 10);
    x->n++;
    return MCDC_OK;
}

typedef struct {
    silver_instances *out;
    int rc;
    mcdc_error *err;
} names_ctx;

static const char *stat_text(json_t *stats, const char *group, const mcdc_table_view *v,
                             const char *column) {
    const char *name = mcdc_table_view_stats_name(v, column);
    const char *s = name ? json_string_value(json_object_get(json_object_get(stats, group), name))
                         : NULL;
    return s && strlen(s) < 32 ? s : NULL; /* Delta cuts a longer one: not exact */
}

/* A file of one instance's rows is known by its statistics (exact, the
 * same smallest and largest name): not read. */
static bool names_file(void *ctx, const mcdc_table_view *v, const mcdc_table_file *f) {
    names_ctx *c = ctx;
    if (f->stats_json == NULL || c->rc) return true;
    json_error_t je;
    json_t *j = json_loads(f->stats_json, 0, &je);
    const char *lo = stat_text(j, "minValues", v, "_capture_instance");
    const char *hi = stat_text(j, "maxValues", v, "_capture_instance");
    const char *at = stat_text(j, "maxValues", v, "_start_lsn");
    uint8_t lsn[10];
    bool known = lo && hi && strcmp(lo, hi) == 0 && at && silver_lsn_parse(lsn, at, strlen(at));
    if (known) c->rc = seen(c->out, lo, strlen(lo), lsn, c->err);
    json_decref(j);
    return !known;
}

static int names_rows(void *ctx, mcdc_batch *b, mcdc_error *err) {
    names_ctx *c = ctx;
    int32_t ci = mcdc_schema_find(b->schema, "_capture_instance");
    int32_t ls = mcdc_schema_find(b->schema, "_start_lsn");
    int rc = ci < 0 || ls < 0 ? mcdc_error_set(err, MCDC_E_CORRUPT,
                                               "bronze rows without _capture_instance or _start_lsn")
                              : MCDC_OK;
    for (int64_t r = 0; rc == MCDC_OK && r < b->rows; r++) {
        const mcdc_column *n = &b->columns[ci], *l = &b->columns[ls];
        if (!mcdc_col_is_valid(n, r) || !mcdc_col_is_valid(l, r)) continue;
        uint8_t lsn[10];
        const char *lt = (const char *)l->data + l->offsets[r];
        if (!silver_lsn_parse(lsn, lt, (size_t)(l->offsets[r + 1] - l->offsets[r]))) continue;
        rc = seen(c->out, (const char *)n->data + n->offsets[r],
                  (size_t)(n->offsets[r + 1] - n->offsets[r]), lsn, err);
    }
    mcdc_batch_free(b);
    return rc;
}

int silver_bronze_instances(silver_instances *out, mcdc_table *bronze, const char *bronze_name,
                            mcdc_error *err) {
    MCDC_ASSERT(out && bronze);
    memset(out, 0, sizeof *out);
    mcdc_schema *bs = NULL;
    int rc = mcdc_table_schema(bronze, &bs, err);
    bool has = rc == MCDC_OK && bs && mcdc_schema_find(bs, "_capture_instance") >= 0 &&
               mcdc_schema_find(bs, "_start_lsn") >= 0;
    mcdc_schema_unref(bs);
    if (rc || !has) return rc; /* no bronze (yet): no names */
    static const char *const cols[] = {"_capture_instance", "_start_lsn"};
    names_ctx c = {.out = out, .err = err};
    mcdc_table_scan sc = MCDC_TABLE_SCAN_INIT;
    sc.columns = cols;
    sc.n_columns = 2;
    sc.file_fn = names_file;
    sc.file_ctx = &c;
    int64_t v;
    rc = mcdc_table_scan_run(bronze, &sc, names_rows, &c, &v, NULL, err);
    if (rc == MCDC_OK) rc = c.rc;
    /* newest first: the instance the stream read last leads */
    for (int32_t i = 1; rc == MCDC_OK && i < out->n; i++)
        for (int32_t k = i; k > 0 && memcmp(out->newest[k], out->newest[k - 1], 10) > 0; k--) {
            char *t = out->names[k];
            out->names[k] = out->names[k - 1];
            out->names[k - 1] = t;
            uint8_t l[10];
            memcpy(l, out->newest[k], 10);
            memcpy(out->newest[k], out->newest[k - 1], 10);
            memcpy(out->newest[k - 1], l, 10);
        }
    if (rc) {
        silver_instances_free(out);
        mcdc_error_wrap(err, "reading the capture instances bronze %s names",
                        bronze_name ? bronze_name : "");
    }
    return rc;
}

int silver_source_open(mcdc_changes **out, const mcdc_opts *opts, const silver_instances *names,
                       bool follow, mcdc_error *err) {
    mcdc_changes_settings cs = {.follow = follow};
    if (names) {
        cs.also_names = (const char *const *)names->names;
        cs.n_also_names = names->n;
    }
    return mcdc_changes_open(out, opts, &cs, err);
}

int silver_source_open_bronze(mcdc_changes **out, const mcdc_opts *opts, mcdc_table *bronze,
                              const char *bronze_name, const char *job,
                              silver_instances *names, mcdc_error *err) {
    MCDC_ASSERT(out && opts && bronze && bronze_name && job && names);
    *out = NULL;
    /* the configured instance, else (gone) its table through bronze's names */
    int rc = silver_bronze_instances(names, bronze, bronze_name, err);
    if (rc == MCDC_OK) rc = silver_source_open(out, opts, names, false, err);
    if (rc) return rc;
    /* Apply's test of a bronze row's instance (mcdc_changes_is_table_instance),
     * on the names bronze's rows hold: one of them is enough (an older
     * instance dropped after a switch is listed no more), none is another
     * table. A name the table's default one is its own, as the source's
     * resolution of a gone instance takes it. */
    bool ours = names->n == 0;
    for (int32_t i = 0; rc == MCDC_OK && !ours && i < names->n; i++) {
        rc = mcdc_changes_is_table_instance(*out, names->names[i], false, &ours, err);
        if (rc == MCDC_OK && !ours) ours = mcdc_changes_is_table_name(*out, names->names[i]);
    }
    if (rc == MCDC_OK && !ours)
        rc = mcdc_error_set(err, MCDC_E_MISMATCH,
                            "bronze %s holds the rows of capture instance '%s'%s, which is "
                            "not '%s' (of table %s.%s) nor another capture instance of that table: "
                            "bronze, and the silver applied from it, were built from another table "
                            "than the source options name. Nothing was read or written. Give the "
                            "options of the stream that wrote bronze (captureInstance '%s'), or "
                            "%s the tables built from '%s'",
                            bronze_name, names->names[0],
                            names->n > 1 ? " (the newest it names)" : "",
                            mcdc_changes_capture_instance(*out), mcdc_changes_source_schema(*out),
                            mcdc_changes_source_table(*out), names->names[0], job,
                            mcdc_changes_capture_instance(*out));
    if (rc) {
        mcdc_changes_close(*out);
        *out = NULL;
    }
    return rc;
}
