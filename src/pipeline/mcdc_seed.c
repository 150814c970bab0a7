/*
 * mcdc_seed.c - a copy of the tracked table the user already has, appended
 * to bronze as its snapshot (the reference's seed(), ADR 0025): for a table
 * too big to snapshot within CDC's retention. The copy's rows become
 * operation 0 rows stamped with L, the LSN of as_of (every commit at or
 * before it is in the copy; later ones may be too, the stream replays them).
 *
 * Checks, before anything is written: as_of maps to a commit (else CDC
 * cleanup has passed it: DataLossError), L is not beyond max_lsn
 * (ValueError), the changes after L are still there (DataLossError); the
 * copy has every captured column, matched by name ignoring case (ValueError,
 * or NULL with allow_missing_columns), of a type the stream's can hold; the
 * target holds no other snapshot (a rerun with the same L returns the seed
 * already written; --reseed takes a newer one); no snapshot of the stream
 * is open in the facts.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_cfg.h"
#include "mcdc_facts.h"
#include "mcdc_frame.h"
#include "mcdc_keycheck.h"
#include "mcdc_options.h"
#include "mcdc_parquet.h"
#include "mcdc_runtime.h"
#include "mcdc_seed_copy.h"
#include "mcdc_snapfacts.h"
#include "mcdc_snapshot_job.h"
#include "mcdc_tables.h"
#include "mcdc_txn.h"

/* Where a seed spills the hashes of its copy's keys, under bronze (readers
 * and VACUUM leave '_' directories alone). */
#define SEED_SPILL_DIR "_mssql_cdc_spill/seed-"

typedef struct {
    mcdc_changes *changes;
    mcdc_schema *out_schema;  /* the reader's output schema (borrowed) */
    mcdc_schema *bronze;      /* bronze's */
    const mcdc_seed_cfg *cfg;
    const mcdc_opts *opts;
    const char *lsn_text;
    bool has_ts;
    int64_t commit_us;
    int32_t first_captured;   /* index of the first captured column in out_schema */
    mcdc_appender *app;
    int64_t rows;             /* rows read so far (the pass that writes) */
    /* The key's check: its columns as the stream reads them, a pass of its
     * own before anything is written. */
    mcdc_keycheck *keys;      /* NULL: no unique key to check */
    mcdc_schema *key_schema;  /* owned */
    const char *key_names[MCDC_SNAPSHOT_KEYS_MAX];
    int32_t n_keys;
    char key_source[512];     /* what the key is, for messages */
    int64_t key_rows;         /* rows read so far (the key's pass) */
    char dup_key[256];        /* a key the copy holds twice; "" while none */
    mcdc_progress_tracker *progress; /* NULL: nobody listens */
    const mcdc_ctx *ctx;             /* its stop request */
} seed_job;

/* Integer types convert to each other when the value fits; the rest must
 * match (a copy written by Spark or pyarrow has the stream's types). */
static bool integer_type(mcdc_type_id t) {
    return t == MCDC_TYPE_INT8 || t == MCDC_TYPE_INT16 || t == MCDC_TYPE_INT32 || t == MCDC_TYPE_INT64;
}

static int convert_column(mcdc_column *dst, mcdc_column *src, int64_t rows, mcdc_error *err) {
    const mcdc_field *d = dst->field, *s = src->field;
    bool same = d->type == s->type && d->precision == s->precision && d->scale == s->scale;
    bool fixed_bin = d->type == MCDC_TYPE_BINARY && s->type == MCDC_TYPE_FIXED_BINARY;
    if (same) return mcdc_col_move(dst, src, err);
    int rc = MCDC_OK;
    bool ints = integer_type(d->type) && integer_type(s->type);
    bool floats = (d->type == MCDC_TYPE_DOUBLE || d->type == MCDC_TYPE_FLOAT) &&
                  (s->type == MCDC_TYPE_DOUBLE || s->type == MCDC_TYPE_FLOAT);
    bool stamps = (d->type == MCDC_TYPE_TIMESTAMP_NTZ || d->type == MCDC_TYPE_TIMESTAMP_UTC) &&
                  (s->type == MCDC_TYPE_TIMESTAMP_NTZ || s->type == MCDC_TYPE_TIMESTAMP_UTC);
    if (!ints && !floats && !stamps && !fixed_bin)
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "the copy's column '%s' is %s, and the stream reads it as %s: cast "
                              "it in the copy (the types of `columns` or of the capture instance)",
                              s->name, mcdc_type_name(s->type), mcdc_type_name(d->type));
    int64_t lo = d->type == MCDC_TYPE_INT8 ? INT8_MIN : d->type == MCDC_TYPE_INT16 ? INT16_MIN
               : d->type == MCDC_TYPE_INT32 ? INT32_MIN : INT64_MIN;
    int64_t hi = d->type == MCDC_TYPE_INT8 ? INT8_MAX : d->type == MCDC_TYPE_INT16 ? INT16_MAX
               : d->type == MCDC_TYPE_INT32 ? INT32_MAX : INT64_MAX;
    mcdc_batch view = {.schema = NULL, .columns = src, .rows = rows};
    for (int64_t r = 0; r < rows && rc == MCDC_OK; r++) {
        if (!mcdc_col_is_valid(src, r)) {
            rc = mcdc_col_append_null(dst, err);
            continue;
        }
        if (fixed_bin) {
            int32_t w = s->byte_width;
            rc = mcdc_col_append_bytes(dst, src->values + r * w, w, err);
        } else if (floats) {
            double v;
            if (s->type == MCDC_TYPE_DOUBLE) memcpy(&v, src->values + r * 8, 8);
            else {
                float f;
                memcpy(&f, src->values + r * 4, 4);
                v = f;
            }
            rc = mcdc_col_append_double(dst, v, err);
        } else {
            mcdc_cell c = mcdc_row_get(&view, r, 0);
            if (ints && (c.i < lo || c.i > hi))
                rc = mcdc_error_set(err, MCDC_E_INVALID,
                                    "the copy's column '%s' holds %lld, which the stream's %s "
                                    "cannot hold",
                                    s->name, (long long)c.i, mcdc_type_name(d->type));
            else
                rc = mcdc_col_append_int(dst, c.i, err);
        }
    }
    return rc;
}

/* One batch of the copy (freed) to schema o, whose fields from
 * first_captured on are captured columns (the output schema, or the key's
 * columns alone): the metadata columns, then each captured column found (by
 * name, ignoring case) or NULL. */
static int seed_convert(seed_job *j, mcdc_batch *in, mcdc_schema *o, int32_t first_captured,
                        mcdc_batch **out, mcdc_error *err) {
    mcdc_batch *b = NULL;
    int64_t n = in->rows;
    int rc = mcdc_batch_create(&b, o, n ? n : 1, err);
    for (int32_t i = 0; rc == MCDC_OK && i < o->n_fields; i++) {
        mcdc_column *c = &b->columns[i];
        const char *name = o->fields[i].name;
        if (i >= first_captured) {
            int32_t k = -1;
            for (int32_t m = 0; m < in->schema->n_fields && k < 0; m++)
                if (mcdc_str_ieq(in->schema->fields[m].name, name)) k = m;
            if (k < 0 && !j->cfg->allow_missing_columns)
                rc = mcdc_error_set(err, MCDC_E_INVALID,
                                    "the copy %s has no column '%s' (matched ignoring case), "
                                    "which the stream reads: add it to the copy, or pass "
                                    "--allow-missing-columns to read it as NULL",
                                    j->cfg->from, name);
            else
                rc = k >= 0 ? convert_column(c, &in->columns[k], n, err)
                            : mcdc_col_append_nulls(c, n, err);
        } else if (strcmp(name, "_capture_instance") == 0) {
            rc = mcdc_col_fill_text(c, mcdc_changes_capture_instance(j->changes), n, err);
        } else if (strcmp(name, "_start_lsn") == 0) {
            rc = mcdc_col_fill_text(c, j->lsn_text, n, err);
        } else if (strcmp(name, "_operation") == 0) {
            rc = mcdc_col_fill_int(c, 0, n, err);
        } else if (strcmp(name, "_commit_ts") == 0 && j->has_ts) {
            rc = mcdc_col_fill_int(c, j->commit_us, n, err);
        } else {
            rc = mcdc_col_append_nulls(c, n, err); /* _seqval, _command_id */
        }
    }
    mcdc_batch_free(in);
    if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
    if (rc) {
        mcdc_batch_free(b);
        return rc;
    }
    *out = b;
    return MCDC_OK;
}

/* One batch of the copy: converted, written (not yet committed). */
static int seed_batch(void *ctx, mcdc_batch *in, mcdc_error *err) {
    seed_job *j = ctx;
    mcdc_batch *b = NULL;
    int rc = seed_convert(j, in, j->out_schema, j->first_captured, &b, err);
    if (rc == MCDC_OK) rc = mcdc_bronze_widen(b, j->bronze, -1, j->lsn_text, -1, err);
    if (rc == MCDC_OK) rc = mcdc_appender_write(j->app, b, err);
    if (rc == MCDC_OK) j->rows += b->rows;
    if (rc == MCDC_OK && j->progress) mcdc_progress_add(j->progress, b->rows, mcdc_batch_bytes(b));
    mcdc_batch_free(b);
    if (rc == MCDC_OK) rc = mcdc_ctx_check_stop(j->ctx, "the seed", err);
    return rc;
}

/* ---- the key: no two rows of one ----------------------------------------------------
 * Checked in a pass of its own that reads the key's columns only, before
 * anything is written (the first data file written creates bronze). */

static int key_batch(void *ctx, mcdc_batch *in, mcdc_error *err) {
    seed_job *j = ctx;
    mcdc_batch *b = NULL;
    int rc = seed_convert(j, in, j->key_schema, 0, &b, err);
    if (rc == MCDC_OK) rc = mcdc_keycheck_add(j->keys, b, err);
    if (rc == MCDC_OK) j->key_rows += b->rows;
    if (rc == MCDC_OK && j->progress) mcdc_progress_add(j->progress, b->rows, mcdc_batch_bytes(b));
    mcdc_batch_free(b);
    if (rc == MCDC_OK) rc = mcdc_ctx_check_stop(j->ctx, "the seed", err);
    return rc;
}

/* The second read, when two rows may share a key: the first row whose key
 * came before is kept in j->dup_key, and the read stops there. */
static int key_confirm(void *ctx, mcdc_batch *in, mcdc_error *err) {
    seed_job *j = ctx;
    mcdc_batch *b = NULL;
    int64_t row = -1;
    int rc = seed_convert(j, in, j->key_schema, 0, &b, err);
    if (rc == MCDC_OK) rc = mcdc_keycheck_confirm(j->keys, b, &row, err);
    if (rc == MCDC_OK && j->progress) mcdc_progress_add(j->progress, b->rows, mcdc_batch_bytes(b));
    if (rc == MCDC_OK && row >= 0) {
        mcdc_keycheck_describe(j->keys, b, row, j->dup_key, sizeof j->dup_key);
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "a duplicate key found");
    }
    mcdc_batch_free(b);
    return rc;
}

/* The table's key: the capture instance's unique index (when the stream
 * reads all of it). snapshotKeys only cut ranges and need not be unique, so
 * they prove nothing here. None: nothing to check, which is said. */
static int seed_keys(seed_job *j, mcdc_table *target, mcdc_error *err) {
    const mcdc_schema *o = j->out_schema;
    int32_t cols[MCDC_SNAPSHOT_KEYS_MAX];
    int32_t n = 0;
    int rc = MCDC_OK;
    int n_index = 0;
    size_t cap = sizeof j->key_source;
    const char *const *index = mcdc_changes_index_keys(j->changes, &n_index);
    for (int i = 0; i < n_index && n < MCDC_SNAPSHOT_KEYS_MAX; i++)
        cols[n++] = mcdc_schema_find(o, index[i]);
    snprintf(j->key_source, cap, "the unique index of capture instance %s",
             mcdc_changes_capture_instance(j->changes));
    bool readable = n > 0;
    for (int32_t i = 0; i < n; i++) readable = readable && cols[i] >= 0;
    if (!readable) {
        mcdc_log(MCDC_LOG_INFO, "seed of %s.%s: %s, so nothing tells two rows of one key in the "
                                "copy apart: its keys are not checked",
                 mcdc_changes_source_schema(j->changes), mcdc_changes_source_table(j->changes),
                 n ? "the stream does not read every column of its unique index"
                   : "the table has no unique key (no primary key, no unique index named to "
                     "CDC)");
        return MCDC_OK;
    }
    rc = mcdc_schema_create(&j->key_schema, n, err);
    for (int32_t i = 0; rc == MCDC_OK && i < n; i++) {
        const mcdc_field *f = &o->fields[cols[i]];
        rc = mcdc_schema_set(j->key_schema, i, f->name, f->type, f->precision, f->scale,
                             f->byte_width, true, err);
        j->key_names[i] = f->name;
        size_t len = strlen(j->key_source);
        snprintf(j->key_source + len, cap - len, "%s%s", i ? ", " : " (", f->name);
    }
    size_t len = strlen(j->key_source);
    snprintf(j->key_source + len, cap - len, ")");
    j->n_keys = n;
    int32_t all[MCDC_SNAPSHOT_KEYS_MAX];
    for (int32_t i = 0; i < n; i++) all[i] = i;
    mcdc_keycheck_cfg kc = {.cols = all, .n_cols = n, .spill = mcdc_table_storage(target),
                            .spill_prefix = SEED_SPILL_DIR};
    if (rc == MCDC_OK) rc = mcdc_keycheck_create(&j->keys, &kc, err);
    return rc;
}

/* Are the copy's keys unique? Its key columns read once, and again only
 * when two rows may share a key (or two keys a hash). */
static int seed_check_keys(seed_job *j, mcdc_seed_copy *copy, int64_t copy_rows,
                           mcdc_error *err) {
    int64_t suspects = 0;
    mcdc_progress_phase(j->progress, "checking keys", NULL, -1, copy_rows, false);
    int rc = mcdc_seed_copy_read(copy, j->cfg->warehouse, j->key_names, j->n_keys, key_batch, j,
                                 err);
    if (rc == MCDC_OK) rc = mcdc_keycheck_finish(j->keys, &suspects, err);
    if (rc == MCDC_OK)
        mcdc_log(MCDC_LOG_INFO, "seed: the keys of %lld rows of %s checked (%lld runs spilled)",
                 (long long)mcdc_keycheck_rows(j->keys), j->cfg->from,
                 (long long)mcdc_keycheck_runs(j->keys));
    if (rc || suspects == 0) return rc;
    mcdc_progress_phase(j->progress, "checking keys again", NULL, -1, copy_rows, false);
    rc = mcdc_seed_copy_read(copy, j->cfg->warehouse, j->key_names, j->n_keys, key_confirm, j,
                             err);
    if (j->dup_key[0])
        return mcdc_error_set(err, MCDC_E_NOT_UNIQUE,
                              "the copy %s holds two rows of one key (%s; the key is %s): "
                              "nothing was written. Remove the duplicate rows from the copy",
                              j->cfg->from, j->dup_key, j->key_source);
    if (rc == MCDC_OK && suspects > MCDC_KEYCHECK_SUSPECTS_MAX)
        rc = mcdc_error_set(err, MCDC_E_LIMIT,
                            "the copy %s: %lld key hashes came twice, and the %d compared were "
                            "different keys: the keys cannot be told unique; nothing was written",
                            j->cfg->from, (long long)suspects, MCDC_KEYCHECK_SUSPECTS_MAX);
    return rc;
}

/* Every captured column is in each file of the copy (or read as NULL), and
 * each file is Parquet: told before the keys are read. */
static int copy_columns(void *ctx, const char *file, const mcdc_schema *s, mcdc_error *err) {
    seed_job *j = ctx;
    if (j->cfg->allow_missing_columns) return MCDC_OK;
    const mcdc_schema *o = j->out_schema;
    for (int32_t i = j->first_captured; i < o->n_fields; i++) {
        bool has = false;
        for (int32_t m = 0; m < s->n_fields && !has; m++)
            has = mcdc_str_ieq(s->fields[m].name, o->fields[i].name);
        if (!has)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "the copy %s%s%s has no column '%s' (matched ignoring case), "
                                  "which the stream reads: nothing was written. Add it to the "
                                  "copy, or pass --allow-missing-columns to read it as NULL",
                                  j->cfg->from, file ? ": its file " : "", file ? file : "",
                                  o->fields[i].name);
    }
    return MCDC_OK;
}

static int empty_copy(const mcdc_seed_cfg *cfg, mcdc_error *err) {
    return mcdc_error_set(err, MCDC_E_INVALID,
                          "the copy %s holds no row: an empty copy of a table that has rows is "
                          "the usual mistake (a wrong path, a filter, a copy not written yet); "
                          "nothing was written. If the table was empty when the copy was read, "
                          "pass --allow-empty",
                          cfg->from);
}

static int check_as_of(mcdc_lsn *lsn, seed_job *j, mcdc_changes *c, const char *as_of,
                       mcdc_error *err) {
    int rc;
    if (as_of[0] == '0' && (as_of[1] == 'x' || as_of[1] == 'X')) {
        rc = mcdc_lsn_parse_cstr(lsn, as_of, err);
        if (rc) return mcdc_error_wrap(err, "--as-of"), MCDC_E_INVALID;
    } else {
        int64_t us;
        if (mcdc_parse_ts_us(as_of, strlen(as_of), &us, NULL) != MCDC_OK)
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "--as-of '%s' is neither an LSN (0x + 20 hex digits) nor a UTC "
                                  "time (YYYY-MM-DDTHH:MM:SS[Z|+hh:mm])",
                                  as_of);
        /* A copy cannot have started being read after now: such a time
         * would map to the last commit, and the commits between the copy
         * and it would be in neither the copy nor the stream. */
        int64_t now;
        rc = mcdc_changes_server_now(c, &now, err);
        if (rc) return rc;
        if (us > now) {
            char t[32];
            mcdc_format_ts_us(now, 3, t);
            return mcdc_error_set(err, MCDC_E_INVALID,
                                  "--as-of %s is later than the server's clock (%s UTC): a copy "
                                  "cannot have started being read in the future. --as-of is UTC "
                                  "unless it gives an offset: check the time zone",
                                  as_of, t);
        }
        bool found = false;
        rc = mcdc_changes_time_to_lsn(c, us, lsn, &found, err);
        if (rc) return rc;
        if (!found)
            return mcdc_error_set(err, MCDC_E_DATALOSS,
                                  "--as-of %s: no commit of the database at or before it is in "
                                  "cdc.lsn_time_mapping (CDC cleanup passed it, or CDC was "
                                  "enabled later): the changes since the copy are gone; take a "
                                  "snapshot instead",
                                  as_of);
    }
    mcdc_lsn max, min, next;
    rc = mcdc_changes_max_lsn(c, &max, err);
    if (rc == MCDC_OK && mcdc_lsn_cmp(lsn, &max) > 0) {
        char m[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&max, m);
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--as-of %s is beyond the server's max_lsn %s: a copy cannot be "
                              "newer than the changes captured so far",
                              as_of, m);
    }
    /* min_lsn is 0x00... until capture has processed the enable: wait for
     * it, or an as-of before the instance began would pass unchecked. */
    if (rc == MCDC_OK) rc = mcdc_changes_wait_started(c, err);
    if (rc == MCDC_OK) rc = mcdc_changes_min_lsn(c, &min, err);
    if (rc == MCDC_OK) rc = mcdc_lsn_increment(&next, lsn, err);
    if (rc == MCDC_OK && !mcdc_lsn_is_zero(&min) && mcdc_lsn_cmp(&next, &min) < 0) {
        char m[MCDC_LSN_TEXT_LEN + 1];
        mcdc_lsn_format(&min, m);
        return mcdc_error_set(err, MCDC_E_DATALOSS,
                              "--as-of %s: min_lsn is %s, past the copy's time, so CDC does not "
                              "hold the changes since the copy (cleanup purged them, or CDC was "
                              "enabled on the table after the copy was read): seed from a newer "
                              "copy, or take a snapshot",
                              as_of, m);
    }
    (void)j;
    return rc;
}

static int seed(mcdc_offset *out, int64_t *rows, bool *written, const mcdc_opts *opts,
                const mcdc_seed_cfg *cfg, mcdc_job_entry *metrics, mcdc_error *err) {
    if (out == NULL || rows == NULL || written == NULL || opts == NULL || cfg == NULL)
        return mcdc_error_set(err, MCDC_E_INVALID, "mcdc_seed: a NULL argument");
    /* the caller's version's fields, the defaults after them */
    mcdc_seed_cfg given;
    int rc = mcdc_cfg_copy(&given, sizeof given, MCDC_CFG_SEED, cfg, err);
    if (rc) return rc;
    cfg = &given;
    if (cfg->target == NULL || !*cfg->target || cfg->from == NULL || !*cfg->from ||
        cfg->as_of == NULL || !*cfg->as_of)
        return mcdc_error_set(err, MCDC_E_INVALID, "a seed needs --target, --from and --as-of");
    if ((cfg->app_id == NULL) != (cfg->facts_table == NULL))
        return mcdc_error_set(err, MCDC_E_INVALID,
                              "--app-id and --facts-table go together (the bootstrap row names "
                              "the stream)");
    memset(out, 0, sizeof *out);
    *rows = 0;
    *written = false;
    bool allow_empty = cfg->allow_empty;
    rc = mcdc_opts_check_required(opts, err);
    const mcdc_role roles[3] = {{"--target", cfg->target, true},
                                {"--facts-table", cfg->facts_table, true},
                                {"--from", cfg->from, false}};
    if (rc == MCDC_OK) rc = mcdc_roles_check(roles, 3, cfg->warehouse, NULL, err);
    if (rc) return rc;
    mcdc_ctx ctx = {.progress_fn = cfg->progress_fn, .progress_user = cfg->progress_user,
                    .host_stop = cfg->stop, .metrics = metrics};
    mcdc_ctx_take_storage(&ctx, opts, cfg->runtime);
    /* The copy first: a path that holds none is the cheapest mistake to
     * tell, before the server is asked anything. */
    mcdc_seed_copy copy;
    rc = mcdc_seed_copy_find(&copy, ctx.storage_env, cfg->from, err);
    if (rc) {
        mcdc_seed_copy_close(&copy);
        return rc;
    }
    if (given.log_fn == NULL) given.log_fn = mcdc_runtime_log_fn(cfg->runtime, &given.log_user);
    mcdc_log_sink sink = {cfg->log_fn, cfg->log_user, cfg->log_level};
    const mcdc_log_sink *host = mcdc_log_use(&sink);
    mcdc_table *target = NULL, *facts = NULL;
    mcdc_changes *changes = NULL;
    mcdc_schema *bronze = NULL;
    rc = mcdc_ctx_progress_create(&ctx.progress, &ctx, "seed", err);
    if (rc == MCDC_OK)
        rc = mcdc_table_open_env(&target, ctx.storage_env, cfg->target, cfg->warehouse, err);
    if (rc == MCDC_OK && cfg->facts_table)
        rc = mcdc_table_open_env(&facts, ctx.storage_env, cfg->facts_table, cfg->warehouse, err);
    /* The frame's check of the tables' roles: a seed is no unit of the frame
     * (mcdc_snapshot_job.h says why), but it writes to the same tables */
    const mcdc_frame_role tables[2] = {{target, MCDC_KIND_BRONZE, "target"},
                                      {facts, MCDC_KIND_FACTS, "facts table"}};
    if (rc == MCDC_OK) rc = mcdc_frame_check_roles(tables, 2, err);
    if (rc == MCDC_OK) rc = mcdc_changes_open(&changes, opts, NULL, err);
    if (rc == MCDC_OK) rc = mcdc_snapshot_check_table(target, cfg->target, changes, err);
    if (rc == MCDC_OK) rc = mcdc_bronze_schema(&bronze, mcdc_changes_schema(changes), err);
    seed_job j = {.changes = changes, .bronze = bronze, .cfg = cfg, .opts = opts,
                  .progress = ctx.progress, .ctx = &ctx};
    mcdc_lsn lsn;
    if (rc == MCDC_OK) rc = check_as_of(&lsn, &j, changes, cfg->as_of, err);
    char lsn_text[MCDC_LSN_TEXT_LEN + 1] = "";
    if (rc == MCDC_OK) {
        mcdc_lsn_format(&lsn, lsn_text);
        rc = mcdc_changes_commit_time(changes, &lsn, &j.commit_us, &j.has_ts, err);
    }
    /* Any snapshot of the stream still open, in either mode: a seed would
     * be a second snapshot next to it. */
    mcdc_snapfacts sf = {0};
    if (rc == MCDC_OK && facts)
        rc = mcdc_snapfacts_load(&sf, facts, cfg->target, cfg->warehouse, cfg->app_id, err);
    if (rc == MCDC_OK) rc = mcdc_snapfacts_lock(&sf, cfg->target, NULL, mcdc_snapshot_purged, changes, err);
    mcdc_snapfacts_free(&sf);
    /* What the target holds already. */
    mcdc_snap_env e = {.ctx = &ctx, .changes = changes, .target = target, .bronze = bronze,
                       .num_partitions = 1};
    mcdc_offset newest;
    bool any = false, same = false;
    if (rc == MCDC_OK) rc = mcdc_snapshot_find_at(&newest, &any, true, lsn_text, &same, &e, err);
    if (rc == MCDC_OK && any && !same && !cfg->reseed)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "target %s holds a snapshot of the table already (newest at %s): a "
                            "seed is the first one. To replace it after a DataLossError, pass "
                            "--reseed with a newer --as-of (then stream with a new checkpoint "
                            "and app id)",
                            cfg->target, newest.lsn);
    if (rc == MCDC_OK && any && !same && cfg->reseed && strcmp(lsn_text, newest.lsn) <= 0)
        rc = mcdc_error_set(err, MCDC_E_INVALID,
                            "--reseed needs an --as-of newer than the target's newest snapshot "
                            "%s, and %s is not",
                            newest.lsn, lsn_text);
    if (rc == MCDC_OK) {
        snprintf(out->lsn, sizeof out->lsn, "%s", lsn_text);
        out->has_commit_ts = j.has_ts;
        out->commit_us = j.commit_us;
    }
    if (rc == MCDC_OK && !same) {
        j.out_schema = mcdc_changes_schema(changes);
        j.lsn_text = lsn_text;
        j.first_captured = mcdc_schema_find(j.out_schema, "_commit_ts") + 1;
        mcdc_table_props props = {.kind = MCDC_KIND_BRONZE};
        rc = mcdc_seed_copy_each_schema(&copy, cfg->warehouse, copy_columns, &j, err);
        /* the copy's rows by its metadata, for the progress (exact) */
        int64_t copy_rows = -1;
        if (rc == MCDC_OK && j.progress)
            rc = mcdc_seed_copy_rows(&copy, cfg->warehouse, &copy_rows, err);
        if (rc == MCDC_OK) rc = seed_keys(&j, target, err);
        if (rc == MCDC_OK && j.keys) rc = seed_check_keys(&j, &copy, copy_rows, err);
        if (rc == MCDC_OK && j.keys && j.key_rows == 0 && !allow_empty) rc = empty_copy(cfg, err);
        if (rc == MCDC_OK) rc = mcdc_appender_open(&j.app, target, bronze, &props, err);
        if (rc == MCDC_OK) mcdc_progress_phase(j.progress, "reading", NULL, -1, copy_rows, false);
        if (rc == MCDC_OK)
            rc = mcdc_seed_copy_read(&copy, cfg->warehouse, NULL, 0, seed_batch, &j, err);
        /* no row read, no file written: bronze was not created */
        if (rc == MCDC_OK && j.rows == 0 && !allow_empty) rc = empty_copy(cfg, err);
        char ts[32];
        mcdc_offset_commit_text(out, ts);
        json_t *meta = json_pack("{s:s, s:s, s:s}", "seed", mcdc_changes_capture_instance(changes),
                                 "lsn", lsn_text, "commit_ts", ts);
        char *text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
        json_decref(meta);
        bool skipped;
        int64_t version;
        if (rc == MCDC_OK) rc = mcdc_ctx_check_stop(&ctx, "the seed", err);
        if (rc == MCDC_OK) mcdc_progress_phase(j.progress, "committing", NULL, -1, j.rows, false);
        if (rc == MCDC_OK)
            rc = text ? mcdc_appender_commit(j.app, NULL, 0, text, &skipped, &version, err)
                      : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (rc == MCDC_OK) mcdc_progress_add(j.progress, j.rows, 0);
        free(text);
        mcdc_appender_free(j.app);
        *written = rc == MCDC_OK;
        *rows = j.rows;
    }
    if (rc == MCDC_OK && facts) {
        mcdc_facts_event ev = {.app_id = cfg->app_id, .target = cfg->target, .event = "bootstrap",
                               .rows = same ? -1 : j.rows, .lsn = lsn_text,
                               .has_commit_ts = j.has_ts, .commit_us = j.commit_us};
        char events[MCDC_TXN_APP_ID_MAX];
        bool skipped;
        rc = mcdc_txn_app_id(events, sizeof events, MCDC_TXN_EVENTS, cfg->app_id, 0, NULL, err);
        if (rc == MCDC_OK) rc = mcdc_facts_write_event(facts, &ev, events, 0, &skipped, err);
    }
    mcdc_keycheck_free(j.keys);
    mcdc_schema_unref(j.key_schema);
    mcdc_schema_unref(bronze);
    mcdc_changes_close(changes);
    mcdc_table_close(facts);
    mcdc_table_close(target);
    mcdc_seed_copy_close(&copy);
    mcdc_progress_end(ctx.progress);
    mcdc_log_use(host);
    return rc;
}

/* Seeded with its runtime's accounting bound (mcdc_runtime.h). */
int mcdc_seed(mcdc_offset *out, int64_t *rows, bool *written, const mcdc_opts *opts,
              const mcdc_seed_cfg *cfg, mcdc_error *err) {
    mcdc_call_scope in = mcdc_runtime_call_enter(MCDC_CFG_SEED, cfg, offsetof(mcdc_seed_cfg, runtime),
                                                 "seed", offsetof(mcdc_seed_cfg, target));
    int rc = seed(out, rows, written, opts, cfg, in.metrics, err);
    mcdc_runtime_call_leave(in);
    return rc;
}
