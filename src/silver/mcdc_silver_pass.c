/*
 * mcdc_silver_pass.c - running a planned pass (mcdc_silver_apply.h):
 * silver's SCD type checked, its columns after the pass (its own, then
 * bronze's captured ones it lacks; a new history's own), a history's
 * columns, then the merge (copy-on-write, mcdc_silver_merge.c, or merged
 * on read, mcdc_silver_mor.c), the key index of the version it makes, and
 * the commit through the job frame with txn(mssql-cdc.apply, pass).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_delta.h"
#include "mcdc_silver_apply.h"

/* ---- the SCD type ---------------------------------------------------------------------------- */

int apply_check_scd_type(const mcdc_apply *a, const mcdc_table_view *sv, mcdc_error *err) {
    if (sv == NULL) return MCDC_OK;
    /* a table no kind property marks (the reference's silver) lacking a key
     * column is no silver of this source */
    for (int32_t k = 0; mcdc_table_view_config(sv, MCDC_TABLE_PROP_KIND) == NULL && k < a->n_keys; k++)
        if (mcdc_schema_find(mcdc_table_view_schema(sv), a->keys[k]) < 0)
            return mcdc_error_set(err, MCDC_E_MISMATCH,
                                  "target %s is a Delta table without the key column '%s' (and "
                                  "no %s property): not a silver table of this source. Nothing "
                                  "was applied. Give apply a table of its own (a new path "
                                  "creates one)",
                                  a->cfg.target, a->keys[k], MCDC_TABLE_PROP_KIND);
    const char *p = mcdc_table_view_config(sv, SILVER_PROP_SCD_TYPE);
    int have = p == NULL ? 1 : strcmp(p, "1") == 0 ? 1 : strcmp(p, "2") == 0 ? 2 : 0;
    if (have == 0)
        return mcdc_error_set(err, MCDC_E_MISMATCH,
                              "silver %s has table property %s = '%.32s', neither 1 nor 2: nothing "
                              "was applied. Give apply another --target",
                              a->cfg.target, SILVER_PROP_SCD_TYPE, p);
    const mcdc_schema *ss = mcdc_table_view_schema(sv);
    const char *cols[3] = {SILVER_COL_START_AT, SILVER_COL_END_AT, SILVER_COL_END_LSN};
    int32_t ts = mcdc_schema_find(ss, "_commit_ts");
    for (int i = 0; i < 3; i++) {
        int32_t j = mcdc_schema_find(ss, cols[i]);
        mcdc_type_id want = i < 2 && ts >= 0 ? ss->fields[ts].type : MCDC_TYPE_UTF8;
        if (have == 2 && (j < 0 || ss->fields[j].type != want))
            return mcdc_error_set(err, MCDC_E_MISMATCH,
                                  "silver %s says it is a history (%s = 2) but its column %s is %s, "
                                  "not %s: nothing was applied. Give apply another --target",
                                  a->cfg.target, SILVER_PROP_SCD_TYPE, cols[i],
                                  j < 0 ? "missing" : mcdc_type_name(ss->fields[j].type),
                                  mcdc_type_name(want));
    }
    if (have != a->cfg.scd_type)
        return mcdc_error_set(err, MCDC_E_MISMATCH,
                              "silver %s is of SCD type %d (%s), and this apply keeps type %d: "
                              "nothing was applied. A silver table keeps its type: pass "
                              "--scd-type %d, or give type %d another --target",
                              a->cfg.target, have, have == 2 ? "a history" : "the current state",
                              (int)a->cfg.scd_type, have, (int)a->cfg.scd_type);
    return MCDC_OK;
}

/* The history's columns in silver's columns after the pass (os; c_of: each
 * one's place in the change rows): the version's, the image's, and those
 * whose change opens a version. */
static int scd2_columns(const mcdc_apply *a, const mcdc_schema *os, const int32_t *c_of,
                        silver_scd2 *h, int32_t **image, int32_t **tracked, mcdc_error *err) {
    const apply_plan *pl = &a->plan;
    memset(h, 0, sizeof *h);
    h->start_at = mcdc_schema_find(os, SILVER_COL_START_AT);
    h->end_at = mcdc_schema_find(os, SILVER_COL_END_AT);
    h->end_lsn = mcdc_schema_find(os, SILVER_COL_END_LSN);
    h->commit_ts = mcdc_schema_find(os, "_commit_ts");
    MCDC_ASSERT(h->start_at >= 0 && h->end_at >= 0 && h->end_lsn >= 0 && h->commit_ts >= 0);
    h->change_ts_col = pl->n_cap + 1;
    h->close = pl->rebuild ? pl->close : NULL;
    h->stamps = pl->stamps;
    *image = mcdc_calloc((size_t)os->n_fields, sizeof **image);
    *tracked = mcdc_calloc((size_t)os->n_fields, sizeof **tracked);
    if (*image == NULL || *tracked == NULL) return apply_nomem(err);
    for (int32_t j = 0; j < os->n_fields; j++)
        if (c_of[j] >= 0 && c_of[j] < pl->n_cap) (*image)[h->n_image++] = j;
    h->image = *image;
    h->tracked = *tracked;
    if (a->n_track == 0) {
        memcpy(*tracked, *image, (size_t)h->n_image * sizeof **image);
        h->n_tracked = h->n_image;
        return MCDC_OK;
    }
    for (int32_t i = 0; i < a->n_track; i++) {
        int32_t j = mcdc_schema_find(os, a->track[i]);
        if (j < 0 || c_of[j] < 0 || c_of[j] >= pl->n_cap)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "--track-history-columns: '%s' is not a captured column of %s: "
                                  "nothing was applied",
                                  a->track[i], a->cfg.bronze);
        (*tracked)[h->n_tracked++] = j;
    }
    return MCDC_OK;
}

/* ---- the merge of a pass ------------------------------------------------------------------ */

/* Silver's columns after the pass: its own, then bronze's captured ones it
 * lacks (added: older rows read NULL); a new silver has the captured ones,
 * _start_lsn and _commit_ts. *c_of, *e_of: each column's place in the
 * change rows and in silver (-1). */
static int out_columns(const mcdc_apply *a, const mcdc_table_view *sv, mcdc_schema **out,
                       int32_t **c_of, int32_t **e_of, mcdc_error *err) {
    const apply_plan *pl = &a->plan;
    if (sv && mcdc_table_view_partition_columns(sv) > 0)
        return mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                              "silver %s is partitioned: apply writes silver in key order, "
                              "unpartitioned. Nothing was applied; give apply a new target, or "
                              "rewrite this one without partitions",
                              a->cfg.target);
    const mcdc_schema *cs = pl->change_schema, *ss = sv ? mcdc_table_view_schema(sv) : NULL;
    int32_t n = ss ? ss->n_fields : 0;
    for (int32_t i = 0; i < pl->n_cap + 2; i++)
        if (!ss || mcdc_schema_find(ss, cs->fields[i].name) < 0) n++;
    n += a->cfg.scd_type == 2 && !ss ? 3 : 0; /* check_scd_type: an existing history has them */
    *c_of = mcdc_calloc((size_t)n, sizeof **c_of);
    *e_of = mcdc_calloc((size_t)n, sizeof **e_of);
    if (*c_of == NULL || *e_of == NULL) return apply_nomem(err);
    int rc = mcdc_schema_create(out, n, err);
    int32_t k = 0;
    for (int32_t i = 0; rc == MCDC_OK && ss && i < ss->n_fields; i++) {
        const mcdc_field *f = &ss->fields[i];
        int32_t c = mcdc_schema_find(cs, f->name);
        if (c >= pl->n_cap + 2) c = -1; /* the rank's columns are no silver columns */
        if (c >= 0) {
            const mcdc_field *g = &cs->fields[c];
            bool same = f->type == g->type && f->precision == g->precision && f->scale == g->scale;
            if (!same)
                rc = mcdc_error_set(err, MCDC_E_SCHEMA,
                                    "silver %s column '%s' is %s, bronze's is %s: apply never "
                                    "changes a silver column's type (widen it by hand, as bronze "
                                    "was). Nothing was applied",
                                    a->cfg.target, f->name, mcdc_type_name(f->type), mcdc_type_name(g->type));
        }
        (*c_of)[k] = c;
        (*e_of)[k] = i;
        if (rc == MCDC_OK) rc = mcdc_schema_set(*out, k++, f->name, f->type, f->precision, f->scale,
                                                f->byte_width, f->nullable, err);
    }
    for (int32_t i = 0; rc == MCDC_OK && i < pl->n_cap + 2; i++) {
        const mcdc_field *g = &cs->fields[i];
        if (ss && mcdc_schema_find(ss, g->name) >= 0) continue;
        (*c_of)[k] = i;
        (*e_of)[k] = -1;
        rc = mcdc_schema_set(*out, k++, g->name, g->type, g->precision, g->scale, g->byte_width, true, err);
    }
    /* a new history's own: __START_AT and __END_AT typed as _commit_ts */
    for (int i = 0; rc == MCDC_OK && i < 3 && a->cfg.scd_type == 2; i++) {
        const char *name = i == 0 ? SILVER_COL_START_AT : i == 1 ? SILVER_COL_END_AT : SILVER_COL_END_LSN;
        if (ss && mcdc_schema_find(ss, name) >= 0) continue;
        (*c_of)[k] = (*e_of)[k] = -1;
        rc = mcdc_schema_set(*out, k++, name, i < 2 ? cs->fields[pl->n_cap + 1].type : MCDC_TYPE_UTF8,
                             0, 0, 0, true, err);
    }
    return rc;
}

void apply_empty_spill(mcdc_apply *a) {
    if (a->spill == NULL) return;
    mcdc_storage_listing l = {0};
    /* the listing's names are the keys' last segments: the directory part
     * of the prefix goes in front again */
    const char *slash = strrchr(a->spill_prefix, '/');
    int dir = slash ? (int)(slash - a->spill_prefix) + 1 : 0;
    if (mcdc_storage_list(a->spill, a->spill_prefix, &l, NULL) == MCDC_OK)
        for (size_t i = 0; i < l.count; i++) {
            char key[512];
            snprintf(key, sizeof key, "%.*s%s", dir, a->spill_prefix, l.entries[i].name);
            mcdc_storage_delete(a->spill, key, NULL);
        }
    mcdc_storage_listing_free(&l);
}

/* The MERGE's join on the key (null-safe, as apply matches keys), as the
 * text of Delta's operationParameters.predicate: ["(t.k <=> s.k) AND ..."].
 * NULL when out of memory. Owned. */
static char *merge_predicate(const mcdc_apply *a) {
    mcdc_buf b = {0};
    int rc = mcdc_buf_append_str(&b, "(", NULL);
    for (int32_t i = 0; rc == MCDC_OK && i < a->n_keys; i++) {
        char *one = mcdc_asprintf("%starget.`%s` <=> source.`%s`", i ? " AND " : "", a->keys[i],
                                  a->keys[i]);
        rc = one ? mcdc_buf_append_str(&b, one, NULL) : MCDC_E_NOMEM;
        mcdc_free(one);
    }
    if (rc == MCDC_OK) rc = mcdc_buf_append_str(&b, ")", NULL);
    if (rc == MCDC_OK) rc = mcdc_buf_cstr(&b, NULL);
    json_t *arr = rc == MCDC_OK ? json_pack("[s]", (const char *)b.data) : NULL;
    mcdc_buf_free(&b);
    char *text = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    char *out = text ? mcdc_strdup(text) : NULL;
    free(text);
    return out;
}

static json_t *pass_meta(const mcdc_apply *a, const silver_merge_out *o) {
    return json_pack("{s:{s:s, s:I, s:b, s:I, s:I, s:I}}", "apply", "bronze", a->cfg.bronze,
                     "bronze_version", (json_int_t)a->plan.bronze_version, "rebuilt",
                     a->plan.rebuild && a->plan.merged, "inserted", (json_int_t)o->inserted,
                     "updated", (json_int_t)o->updated, "deleted", (json_int_t)o->deleted);
}

int apply_merge_pass(mcdc_apply *a, mcdc_frame *f, const mcdc_unit *u, mcdc_unit_result *res,
                      mcdc_error *err) {
    apply_plan *pl = &a->plan;
    int rc = MCDC_OK;
    for (int attempt = 0;; attempt++) {
        mcdc_table_view *sv = NULL;
        mcdc_schema *os = NULL;
        int32_t *c_of = NULL, *e_of = NULL;
        silver_merge_out out = {0};
        silver_scd2 hist = {0};
        int32_t *image = NULL, *tracked = NULL;
        rc = mcdc_table_view_open(&sv, a->silver, -1, err);
        if (rc == MCDC_OK) rc = apply_check_scd_type(a, sv, err);
        if (rc == MCDC_OK) rc = out_columns(a, sv, &os, &c_of, &e_of, err);
        if (rc == MCDC_OK && a->cfg.scd_type == 2) rc = scd2_columns(a, os, c_of, &hist, &image, &tracked, err);
        static const char *const HISTORY_CONF[] = {SILVER_PROP_SCD_TYPE "=2", NULL};
        static const char *const MOR_CONF[] = {SILVER_PROP_DELETION_VECTORS "=true", NULL};
        mcdc_table_props props = {.kind = MCDC_KIND_SILVER, .parquet_threads = 0,
                                  .configuration = a->cfg.scd_type == 2    ? HISTORY_CONF
                                                   : a->cfg.deletion_vectors ? MOR_CONF
                                                                             : NULL};
        silver_merge_in in = {.target = a->silver, .view = sv, .out_schema = os, .change_of_out = c_of,
                              .exist_of_out = e_of, .keys = (const char *const *)a->keys,
                              .n_keys = a->n_keys, .changes = pl->changes,
                              .change_lsn_col = pl->n_cap, .rebuild = pl->rebuild,
                              .scd2 = a->cfg.scd_type == 2 ? &hist : NULL,
                              .ranges = pl->ranges, .n_ranges = pl->n_ranges,
                              .file_rows = a->cfg.file_rows, .has_position = pl->start.applied.set,
                              .memory_bytes = a->cfg.memory_mb * 1024 * 1024,
                              .spill = a->spill, .spill_prefix = a->spill_prefix,
                              .props = &props, .ctx = &a->ctx, .unit = u->id};
        memcpy(in.position, pl->start.applied.v.b, sizeof in.position);
        if (rc == MCDC_OK && !pl->merged) {
            /* no rows to merge: the pass's commit records its position alone */
            rc = mcdc_appender_open(&out.appender, a->silver, os, &props, err);
        }
        int64_t t0 = mcdc_monotonic_us();
        if (rc == MCDC_OK && pl->merged)
            mcdc_progress_phase(a->ctx.progress, pl->rebuild ? "rebuilding" : "merging", "files",
                                sv ? (int64_t)mcdc_table_view_file_count(sv) : 0,
                                silver_sorter_rows(pl->changes), false);
        if (rc == MCDC_OK && pl->merged) {
            rc = silver_mor_wanted(&in) ? silver_mor_run(&out, &in, err)
                                        : silver_merge_run(&out, &in, err);
            if (rc == MCDC_OK)
                mcdc_log(MCDC_LOG_INFO, "%s: merged%s in %.3f s (%.3f s reading files, %.3f s "
                                        "writing): %lld files read, %lld written, %lld rows kept, "
                                        "%lld inserted, %lld updated, %lld deleted, %lld rows of "
                                        "keys held twice dropped",
                         a->cfg.target, out.mor ? " on read" : "",
                         (double)(mcdc_monotonic_us() - t0) / 1e6,
                         (double)out.read_us / 1e6, (double)out.write_us / 1e6,
                         (long long)out.files_read, (long long)out.files_written, (long long)out.kept,
                         (long long)out.inserted, (long long)out.updated, (long long)out.deleted,
                         (long long)out.duplicates);
        }
        int64_t read_version = sv ? mcdc_table_view_version(sv) : -1;
        char index_key[64] = "";
        if (rc == MCDC_OK && out.changed) {
            rc = silver_index_store(mcdc_table_storage(a->silver), &out.index, read_version + 1, err);
            snprintf(index_key, sizeof index_key, "%s%020lld.idx", SILVER_INDEX_DIR,
                     (long long)(read_version + 1));
        }
        bool skipped = false;
        if (rc == MCDC_OK) {
            /* What DESCRIBE HISTORY shows of the pass: Delta's MERGE parameters and
             * counters (the files, bytes and deletion vectors from the commit) */
            char *predicate = merge_predicate(a);
            mcdc_delta_merge_info mi = {
                .predicate = predicate,
                .matched_predicates = "[{\"predicate\":\"(source._operation = 1)\","
                                      "\"actionType\":\"delete\"},{\"actionType\":\"update\"}]",
                .not_matched_predicates = "[{\"predicate\":\"(source._operation <> 1)\","
                                          "\"actionType\":\"insert\"}]",
                .source_rows = pl->merged ? silver_sorter_rows(pl->changes) : 0,
                .rows_inserted = out.inserted,
                .rows_updated = out.updated,
                .rows_deleted = out.deleted,
                .rows_copied = out.mor ? 0 : out.kept, /* merged on read: none rewritten */
                .execution_ms = (mcdc_monotonic_us() - t0) / 1000,
                .scan_ms = out.read_us / 1000,
                .rewrite_ms = out.write_us / 1000};
            mcdc_table_commit c = {.operation = "MERGE", .remove_paths = (const char *const *)out.removes,
                                   .n_removes = out.n_removes, .read_version = read_version,
                                   .readd_dvs = out.readd_dvs, .merge = &mi};
            rc = predicate ? mcdc_frame_commit_data_with(f, u, out.appender, pass_meta(a, &out), &c,
                                                         &skipped, err)
                           : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            mcdc_free(predicate);
        }
        if ((rc || skipped) && index_key[0]) mcdc_storage_delete(mcdc_table_storage(a->silver), index_key, NULL);
        if ((rc || skipped) && out.dv_key) /* merge-on-read: its DV file, never committed */
            mcdc_storage_delete(mcdc_table_storage(a->silver), out.dv_key, NULL);
        if (rc == MCDC_OK) {
            res->rows = out.inserted + out.updated + out.deleted;
            a->res.inserted += out.inserted;
            a->res.updated += out.updated;
            a->res.deleted += out.deleted;
            a->res.files_read += out.files_read;
            a->res.files_written += out.files_written;
        }
        silver_merge_out_free(&out);
        mcdc_schema_unref(os);
        mcdc_free(c_of);
        mcdc_free(e_of);
        mcdc_free(image);
        mcdc_free(tracked);
        mcdc_table_view_free(sv);
        if (rc != MCDC_E_CONFLICT || attempt >= APPLY_CONFLICT_RETRIES) break;
        mcdc_log(MCDC_LOG_INFO, "%s: another writer committed during the merge (%s); merging again "
                                "on the new version",
                 a->cfg.target, err ? err->message : "");
        mcdc_error_clear(err);
    }
    return rc;
}
