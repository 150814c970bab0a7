/*
 * delta_tool.c - drives the delta module from tests (tests/interop/test_delta_*.py).
 *
 *   delta_tool create   <table> '<request json>'  {"schema": <Delta schema JSON object>,
 *                                                   "configuration": {..}, "user_metadata": s}
 *   delta_tool append   <table> '<request json>'  {"adds": [{"path","size","modificationTime",
 *                                                   "stats","dataChange"}], "removes": [..],
 *                                                   "app_id", "txn", "user_metadata",
 *                                                   "schema": <evolved schema>, "operation"}
 *   delta_tool snapshot <table> [version] [app_id]
 *   delta_tool commitinfo <table> <version> [app_id]
 *   delta_tool stats    '<request json>'          {"schema": .., "num_records": n,
 *                                                   "cols": [{"min","max","nulls"} | null]}
 *
 * Prints one JSON object on stdout; on failure prints
 * {"error": "<status name>", "code": n, "message": "..."} and exits 1.
 * Build: cc -std=c17 -Iinclude -Isrc/util -Isrc/batch -Isrc/delta tests/tools/delta_tool.c
 *        build/libmssqlcdc.a -ljansson -lzstd -lsnappy -llz4 -lz -lpthread -lm -o build/delta_tool
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_delta.h"

static int fail(int rc, const mcdc_error *e) {
    json_t *o = json_pack("{s:s,s:i,s:s}", "error", mcdc_status_name(rc), "code", rc, "message",
                          e->message);
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s ? s : "{}");
    free(s);
    json_decref(o);
    return 1;
}

static void print_json(json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s ? s : "{}");
    free(s);
    json_decref(o);
}

static int load_schema(mcdc_schema **out, mcdc_delta_field_meta **meta, json_t *schema,
                       mcdc_error *e) {
    char *s = json_dumps(schema, JSON_COMPACT);
    int rc = mcdc_delta_schema_from_json(out, meta, s ? s : "", e);
    free(s);
    return rc;
}

static int cmd_create(mcdc_delta_table *t, json_t *req, mcdc_error *e) {
    mcdc_schema *s = NULL;
    mcdc_delta_field_meta *meta = NULL;
    int rc = load_schema(&s, &meta, json_object_get(req, "schema"), e);
    if (rc) return fail(rc, e);
    const char *comments[4096] = {0};
    for (int32_t i = 0; i < s->n_fields; i++) comments[i] = meta[i].comment;
    json_t *conf = json_object_get(req, "configuration");
    const char *keys[64], *vals[64];
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(conf, k, v) {
        if (n < 64) {
            keys[n] = k;
            vals[n++] = json_string_value(v);
        }
    }
    mcdc_delta_create_opts o = MCDC_DELTA_CREATE_OPTS_INIT;
    o.schema = s;
    o.field_comments = comments;
    o.config_keys = keys;
    o.config_values = vals;
    o.n_config = n;
    o.user_metadata = json_string_value(json_object_get(req, "user_metadata"));
    mcdc_delta_commit_result r;
    rc = mcdc_delta_create(&r, t, &o, e);
    mcdc_delta_field_meta_free(meta, s->n_fields);
    mcdc_schema_unref(s);
    if (rc) return fail(rc, e);
    print_json(json_pack("{s:I,s:b}", "version", (json_int_t)r.version, "skipped", r.skipped));
    return 0;
}

static size_t files_of(json_t *arr, mcdc_delta_file *out, size_t max) {
    size_t i, n = 0;
    json_t *a;
    json_array_foreach(arr, i, a) {
        if (n == max) break;
        mcdc_delta_file *f = &out[n++];
        memset(f, 0, sizeof *f);
        f->path = json_string_value(json_object_get(a, "path"));
        json_t *sz = json_object_get(a, "size");
        f->size_bytes = sz ? (int64_t)json_integer_value(sz) : -1;
        f->modification_time_ms = (int64_t)json_integer_value(json_object_get(a, "modificationTime"));
        json_t *dc = json_object_get(a, "dataChange");
        f->data_change = dc == NULL || json_is_true(dc);
        f->stats_json = json_string_value(json_object_get(a, "stats"));
    }
    return n;
}

static int cmd_append(mcdc_delta_table *t, json_t *req, mcdc_error *e) {
    static mcdc_delta_file adds[1024], removes[1024];
    mcdc_delta_append_opts o = MCDC_DELTA_APPEND_OPTS_INIT;
    o.adds = adds;
    o.n_adds = files_of(json_object_get(req, "adds"), adds, 1024);
    o.removes = removes;
    o.n_removes = files_of(json_object_get(req, "removes"), removes, 1024);
    o.app_id = json_string_value(json_object_get(req, "app_id"));
    o.txn_version = (int64_t)json_integer_value(json_object_get(req, "txn"));
    o.user_metadata = json_string_value(json_object_get(req, "user_metadata"));
    o.operation = json_string_value(json_object_get(req, "operation"));
    mcdc_schema *s = NULL;
    mcdc_delta_field_meta *meta = NULL;
    const char *comments[4096] = {0};
    if (json_object_get(req, "schema")) {
        int rc = load_schema(&s, &meta, json_object_get(req, "schema"), e);
        if (rc) return fail(rc, e);
        for (int32_t i = 0; i < s->n_fields; i++) comments[i] = meta[i].comment;
        o.schema = s;
        o.field_comments = comments;
    }
    mcdc_delta_commit_result r;
    int rc = mcdc_delta_append(&r, t, &o, e);
    if (s) mcdc_delta_field_meta_free(meta, s->n_fields);
    mcdc_schema_unref(s);
    if (rc) return fail(rc, e);
    print_json(json_pack("{s:I,s:b,s:i}", "version", (json_int_t)r.version, "skipped", r.skipped,
                         "attempts", r.attempts));
    return 0;
}

static int cmd_snapshot(mcdc_delta_table *t, int64_t version, const char *app, mcdc_error *e) {
    mcdc_delta_snapshot *s = NULL;
    int rc = mcdc_delta_snapshot_load(&s, t, version, e);
    if (rc) return fail(rc, e);
    json_t *files = json_array();
    for (size_t i = 0; i < mcdc_delta_snapshot_file_count(s); i++) {
        const mcdc_delta_file *f = mcdc_delta_snapshot_file(s, i);
        json_array_append_new(files, json_pack("{s:s,s:I,s:I}", "path", f->path, "size",
                                               (json_int_t)f->size_bytes, "modificationTime",
                                               (json_int_t)f->modification_time_ms));
    }
    int32_t r = 0, w = 0;
    mcdc_delta_snapshot_protocol(s, &r, &w);
    json_t *o = json_pack("{s:I,s:o,s:s,s:s,s:i,s:i,s:I,s:I}", "version",
                          (json_int_t)mcdc_delta_snapshot_version(s), "files", files, "schema",
                          mcdc_delta_snapshot_schema_string(s), "id",
                          mcdc_delta_snapshot_table_id(s), "min_reader", r, "min_writer", w,
                          "records", (json_int_t)mcdc_delta_snapshot_total_records(s),
                          "tombstones", (json_int_t)mcdc_delta_snapshot_tombstone_count(s));
    if (app)
        json_object_set_new(o, "txn", json_integer(mcdc_delta_snapshot_txn_version(s, app)));
    mcdc_schema *sc = NULL;
    mcdc_error e2 = MCDC_ERROR_INIT;
    json_object_set_new(o, "schema_ok",
                        json_boolean(mcdc_delta_snapshot_schema(&sc, NULL, s, &e2) == MCDC_OK));
    mcdc_schema_unref(sc);
    rc = mcdc_delta_snapshot_verify_files(s, t, e);
    json_object_set_new(o, "verify", json_string(rc ? e->message : "ok"));
    mcdc_delta_snapshot_free(s);
    print_json(o);
    return 0;
}

static int cmd_commitinfo(mcdc_delta_table *t, int64_t version, const char *app, mcdc_error *e) {
    mcdc_delta_commit_info *ci = NULL;
    int rc = mcdc_delta_commit_info_read(&ci, t, version, app, e);
    if (rc) return fail(rc, e);
    json_t *o = json_pack("{s:I,s:I,s:I}", "version", (json_int_t)ci->version, "timestamp",
                          (json_int_t)ci->timestamp_ms, "txn", (json_int_t)ci->txn_version);
    if (ci->operation) json_object_set_new(o, "operation", json_string(ci->operation));
    if (ci->user_metadata) json_object_set_new(o, "userMetadata", json_string(ci->user_metadata));
    mcdc_delta_commit_info_free(ci);
    print_json(o);
    return 0;
}

static void value_of(json_t *j, const mcdc_field *f, mcdc_delta_value *v) {
    memset(v, 0, sizeof *v);
    if (json_is_string(j)) {
        if (f->type == MCDC_TYPE_DECIMAL) { /* unscaled integer as text */
            long long x = strtoll(json_string_value(j), NULL, 10);
            v->dec_lo = (uint64_t)x;
            v->dec_hi = x < 0 ? -1 : 0;
        } else {
            v->bytes = (const uint8_t *)json_string_value(j);
            v->len = json_string_length(j);
        }
    } else if (json_is_integer(j)) {
        v->i = (int64_t)json_integer_value(j);
        v->f = (double)v->i;
        v->dec_lo = (uint64_t)v->i;
        v->dec_hi = v->i < 0 ? -1 : 0;
    } else if (json_is_real(j)) {
        v->f = json_real_value(j);
    }
}

static int cmd_stats(json_t *req, mcdc_error *e) {
    mcdc_schema *s = NULL;
    int rc = load_schema(&s, NULL, json_object_get(req, "schema"), e);
    if (rc) return fail(rc, e);
    mcdc_delta_col_stats cols[256];
    memset(cols, 0, sizeof cols);
    json_t *jc = json_object_get(req, "cols");
    for (int32_t i = 0; i < s->n_fields && i < 256; i++) {
        json_t *c = json_array_get(jc, (size_t)i);
        if (c == NULL || json_is_null(c)) continue;
        json_t *mn = json_object_get(c, "min"), *mx = json_object_get(c, "max");
        cols[i].has_min_max = mn && !json_is_null(mn) && mx && !json_is_null(mx);
        if (cols[i].has_min_max) {
            value_of(mn, &s->fields[i], &cols[i].min);
            value_of(mx, &s->fields[i], &cols[i].max);
        }
        cols[i].null_count = (int64_t)json_integer_value(json_object_get(c, "nulls"));
    }
    char *out = NULL;
    rc = mcdc_delta_stats_json(&out, s,
                               (int64_t)json_integer_value(json_object_get(req, "num_records")),
                               cols, -1, e);
    mcdc_schema_unref(s);
    if (rc) return fail(rc, e);
    printf("%s\n", out);
    mcdc_free(out);
    return 0;
}

int main(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    if (argc < 3) {
        fprintf(stderr, "usage: delta_tool create|append|snapshot|commitinfo|stats ...\n");
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "stats") == 0) {
        json_t *req = json_loads(argv[2], 0, NULL);
        int r = cmd_stats(req, &e);
        json_decref(req);
        return r;
    }
    mcdc_delta_table *t = NULL;
    int rc = mcdc_delta_table_open(&t, argv[2], getenv("MCDC_WAREHOUSE"), &e);
    if (rc) return fail(rc, &e);
    int result = 2;
    if (strcmp(cmd, "create") == 0 || strcmp(cmd, "append") == 0) {
        json_t *req = argc > 3 ? json_loads(argv[3], 0, NULL) : NULL;
        if (req == NULL) {
            fprintf(stderr, "delta_tool: request is not JSON\n");
        } else {
            result = cmd[0] == 'c' ? cmd_create(t, req, &e) : cmd_append(t, req, &e);
        }
        json_decref(req);
    } else if (strcmp(cmd, "snapshot") == 0) {
        result = cmd_snapshot(t, argc > 3 ? strtoll(argv[3], NULL, 10) : -1,
                              argc > 4 ? argv[4] : NULL, &e);
    } else if (strcmp(cmd, "commitinfo") == 0 && argc > 3) {
        result = cmd_commitinfo(t, strtoll(argv[3], NULL, 10), argc > 4 ? argv[4] : NULL, &e);
    } else {
        fprintf(stderr, "delta_tool: unknown command %s\n", cmd);
    }
    mcdc_delta_table_free(t);
    return result;
}
