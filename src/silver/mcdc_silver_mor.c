/*
 * mcdc_silver_mor.c - merge-on-read of a change set into a type 1 silver
 * (see mcdc_silver.h, docs/silver.md).
 *
 * Every live file has an index entry in key order (else the merge goes
 * copy-on-write, which writes them). Sorted by first key, a file joins the
 * pass when a change key reaches its first key and leaves it past its last:
 * the files open at once are the one clustered file of that key range and
 * the few merge-on-read wrote since. Each is read lazily, its key columns
 * (and _start_lsn when its statistics cannot prove every change newer),
 * deleted rows already skipped by the reader, which also tells each row's
 * position in the file. A change key is looked up in the open files (a
 * binary search in the current batch, batches in order); where it is live,
 * silver_decide says: a delete or an update marks the row's position in the
 * file's new deletion vector, an update or an insert writes the change's
 * image to the new files, in key order. Nothing else of silver is read or
 * written. One DV file holds every touched file's new DV (old rows and new,
 * so a file is (path, one DV)); the commit removes each touched file with
 * its old DV and adds it back with the new.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "mcdc_delta_dv.h"
#include "mcdc_silver.h"

static int nomem(mcdc_error *err) { return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }

bool silver_mor_wanted(const silver_merge_in *in) {
    if (in->view == NULL || in->scd2 || in->rebuild || in->n_ranges > 0) return false;
    const char *p = mcdc_table_view_config(in->view, SILVER_PROP_DELETION_VECTORS);
    if (p == NULL || strcasecmp(p, "true") != 0 ||
        !mcdc_table_view_has_feature(in->view, "deletionVectors"))
        return false;
    for (int32_t j = 0; j < in->out_schema->n_fields; j++)
        if (in->change_of_out[j] < 0) return false; /* the image is not whole */
    return true;
}

typedef struct {
    const char *path;       /* borrowed from the view */
    silver_entry *e;        /* in the old index */
    int64_t dv_rows;
    bool need_lsn;          /* read _start_lsn; else every change is newer than max_lsn */
    uint8_t max_lsn[10];
    mcdc_table_reader *r;
    mcdc_batch *b;
    mcdc_buf keys;
    size_t *koff;
    int64_t cap_koff, at, first;
    const int32_t *keep;
    bool open, done;
    mcdc_dv_bitmap *del;    /* its new DV (NULL: untouched) */
} mfile;

typedef struct {
    const silver_merge_in *in;
    silver_merge_out *out;
    int32_t view_keys[SILVER_KEYS_MAX];
    const char *cols[SILVER_KEYS_MAX + 1];
    uint8_t min_change_lsn[10];
    /* the output file being written */
    int64_t file_rows, cur_rows;
    mcdc_buf first_key, last_key;
    int32_t *sel;
    silver_writer wq;       /* encodes the images while the pass goes on */
} mor;

/* Can f's statistics prove every change newer than each of its rows (no
 * NULL _start_lsn, the largest below the changes')? Then max_lsn stands in
 * for each row's and the column is not read. */
static void plan_lsn(mor *m, mfile *f, const mcdc_table_file *tf) {
    f->need_lsn = true;
    const char *name = mcdc_table_view_stats_name(m->in->view, "_start_lsn");
    json_error_t je;
    json_t *j = tf->stats_json && name ? json_loads(tf->stats_json, 0, &je) : NULL;
    const char *mx = json_string_value(json_object_get(json_object_get(j, "maxValues"), name));
    json_t *nulls = json_object_get(json_object_get(j, "nullCount"), name);
    if (mx && json_is_integer(nulls) && json_integer_value(nulls) == 0 &&
        silver_lsn_parse(f->max_lsn, mx, strlen(mx)) && memcmp(f->max_lsn, m->min_change_lsn, 10) < 0)
        f->need_lsn = false;
    json_decref(j);
}

static int file_load(mor *m, mfile *f, mcdc_error *err) {
    const silver_merge_in *in = m->in;
    mcdc_batch_free(f->b);
    f->b = NULL;
    f->at = 0;
    int rc = mcdc_table_reader_next(&f->b, f->r, err);
    if (rc || f->b == NULL) {
        f->done = true;
        return rc;
    }
    mcdc_table_reader_positions(f->r, &f->first, &f->keep);
    if (f->b->rows + 1 > f->cap_koff) {
        size_t *k = mcdc_realloc(f->koff, (size_t)(f->b->rows + 1) * sizeof *k);
        if (k == NULL) return nomem(err);
        f->koff = k;
        f->cap_koff = f->b->rows + 1;
    }
    const mcdc_column *kc[SILVER_KEYS_MAX];
    for (int32_t k = 0; k < in->n_keys; k++) kc[k] = &f->b->columns[k];
    mcdc_buf_reset(&f->keys);
    return silver_keys_append(&f->keys, f->koff, kc, in->n_keys, 0, f->b->rows, err);
}

static int file_open(mor *m, mfile *f, mcdc_error *err) {
    int32_t nc = m->in->n_keys + (f->need_lsn ? 1 : 0);
    f->open = true;
    int rc = mcdc_table_reader_open(&f->r, m->in->view, f->path, m->cols, nc, NULL, err);
    if (rc == MCDC_OK) rc = file_load(m, f, err);
    m->out->files_read++;
    return rc;
}

static inline int key_at(const mfile *f, int64_t i, const uint8_t *k, size_t kn) {
    return silver_key_cmp_fast(f->keys.data + f->koff[i], f->koff[i + 1] - f->koff[i], k, kn);
}

/* Moves f to the first live row whose key is >= k; *hit when it is k. */
static int file_seek(mor *m, mfile *f, const uint8_t *k, size_t kn, bool *hit, mcdc_error *err) {
    *hit = false;
    int rc = MCDC_OK;
    if (!f->open) rc = file_open(m, f, err);
    while (rc == MCDC_OK && !f->done) {
        int64_t n = f->b->rows;
        if (f->at >= n || key_at(f, n - 1, k, kn) < 0) { /* all of this batch is below k */
            rc = file_load(m, f, err);
            continue;
        }
        /* the changes come in key order too: gallop forward from at (the
         * next live key is mostly a few rows on), then a binary search in
         * the last step. Rows below lo are below k; row hi is >= k. */
        int64_t lo = f->at, hi = n - 1;
        for (int64_t step = 1; lo + step < hi; step *= 2) {
            if (key_at(f, lo + step, k, kn) >= 0) {
                hi = lo + step;
                break;
            }
            lo += step + 1;
        }
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (key_at(f, mid, k, kn) < 0) lo = mid + 1;
            else hi = mid;
        }
        f->at = lo;
        *hit = key_at(f, lo, k, kn) == 0;
        break;
    }
    return rc;
}

/* Closes f's reader; a touched file's new DV gets the rows its old one had. */
static int file_close(mfile *f, mcdc_error *err) {
    int rc = MCDC_OK;
    if (f->del && f->r && mcdc_table_reader_dv(f->r))
        rc = mcdc_dv_bitmap_add_all(f->del, mcdc_table_reader_dv(f->r), err);
    mcdc_table_reader_free(f->r);
    f->r = NULL;
    mcdc_batch_free(f->b);
    f->b = NULL;
    mcdc_buf_free(&f->keys);
    mcdc_free(f->koff);
    f->koff = NULL;
    f->done = true;
    return rc;
}

/* Marks row `at` of f's current batch deleted. */
static int file_delete(mfile *f, mcdc_error *err) {
    if (f->del == NULL) {
        int rc = mcdc_dv_bitmap_create(&f->del, err);
        if (rc) return rc;
    }
    int64_t pos = f->first + (f->keep ? f->keep[f->at] : f->at);
    return mcdc_dv_bitmap_add(f->del, (uint64_t)pos, err);
}

/* ---- the new files: the images in key order ------------------------------------------ */

static int end_file(mor *m, mcdc_error *err) {
    if (m->cur_rows == 0) return MCDC_OK;
    int rc = silver_writer_put(&m->wq, NULL, err);
    silver_entry e = {0};
    e.rows = m->cur_rows;
    e.sorted = true;
    e.path = mcdc_strdup("?"); /* the writer's path, set once it has ended the file */
    e.min_key = mcdc_malloc(m->first_key.len ? m->first_key.len : 1);
    e.max_key = mcdc_malloc(m->last_key.len ? m->last_key.len : 1);
    if (rc == MCDC_OK && (!e.path || !e.min_key || !e.max_key)) rc = nomem(err);
    if (rc == MCDC_OK) {
        memcpy(e.min_key, m->first_key.data, m->first_key.len);
        memcpy(e.max_key, m->last_key.data, m->last_key.len);
        e.min_len = (uint32_t)m->first_key.len;
        e.max_len = (uint32_t)m->last_key.len;
        rc = silver_index_add(&m->out->index, &e, err);
    }
    silver_entry_clear(&e);
    m->out->files_written++;
    m->cur_rows = 0;
    return rc;
}

/* Writes the images of ch's rows sel[0..n), in order, cutting files at
 * file_rows. */
static int write_images(mor *m, const silver_chunk *ch, int32_t n, mcdc_error *err) {
    const silver_merge_in *in = m->in;
    int rc = MCDC_OK;
    for (int32_t done = 0; rc == MCDC_OK && done < n;) {
        int64_t room = m->file_rows - m->cur_rows;
        int32_t k = (int32_t)(n - done < room ? n - done : room);
        mcdc_batch *b = NULL;
        rc = mcdc_batch_create(&b, in->out_schema, k, err);
        if (rc == MCDC_OK) rc = silver_sorter_take(in->changes, b, in->change_of_out, m->sel + done, k, err);
        if (rc == MCDC_OK) rc = mcdc_batch_seal(b, err);
        if (rc == MCDC_OK) rc = silver_writer_put(&m->wq, b, err); /* takes b */
        else mcdc_batch_free(b);
        if (rc) break;
        int32_t a = m->sel[done], z = m->sel[done + k - 1];
        if (m->cur_rows == 0) {
            mcdc_buf_reset(&m->first_key);
            rc = mcdc_buf_append(&m->first_key, ch->key[a], ch->key_len[a], err);
        }
        mcdc_buf_reset(&m->last_key);
        if (rc == MCDC_OK) rc = mcdc_buf_append(&m->last_key, ch->key[z], ch->key_len[z], err);
        m->cur_rows += k;
        done += k;
        if (rc == MCDC_OK && m->cur_rows >= m->file_rows) rc = end_file(m, err);
    }
    return rc;
}

/* ---- the pass ---------------------------------------------------------------------- */

static int by_min(const void *a, const void *b) {
    const mfile *x = *(const mfile *const *)a, *y = *(const mfile *const *)b;
    return silver_key_cmp(x->e->min_key, x->e->min_len, y->e->min_key, y->e->min_len);
}

/* One change key: where it is live, the decision, the image. */
static int one_change(mor *m, mfile **act, int64_t nact, const silver_chunk *ch, int64_t i,
                      int32_t *nsel, mcdc_error *err) {
    const silver_rank *w = &ch->rank[i];
    const uint8_t *k = ch->key[i];
    size_t kn = ch->key_len[i];
    uint64_t h = 0;
    bool hashed = false;
    int rc = MCDC_OK;
    for (int64_t a = 0; a < nact && rc == MCDC_OK; a++) {
        mfile *f = act[a];
        if (f->done) continue;
        if (f->e->bloom.nbits) {
            if (!hashed) h = silver_hash(k, kn), hashed = true;
            if (!silver_bloom_may(&f->e->bloom, h)) continue;
        }
        bool hit = false;
        rc = file_seek(m, f, k, kn, &hit, err);
        if (rc || !hit) continue;
        uint8_t lsn[10];
        bool has = true;
        if (f->need_lsn) {
            const mcdc_column *c = &f->b->columns[m->in->n_keys];
            has = mcdc_col_is_valid(c, f->at) &&
                  silver_lsn_parse(lsn, (const char *)c->data + c->offsets[f->at],
                                   (size_t)(c->offsets[f->at + 1] - c->offsets[f->at]));
        } else {
            memcpy(lsn, f->max_lsn, 10);
        }
        silver_action d = silver_decide(w, has, lsn, false);
        if (d != SILVER_KEEP) rc = file_delete(f, err);
        if (rc == MCDC_OK && d == SILVER_DELETE) m->out->deleted++;
        if (rc == MCDC_OK && d == SILVER_UPDATE) {
            m->out->updated++;
            m->sel[(*nsel)++] = (int32_t)i;
        }
        if (d == SILVER_KEEP) m->out->kept++;
        return rc; /* a key is live in one file */
    }
    if (rc == MCDC_OK && silver_inserts(w)) {
        m->out->inserted++;
        m->sel[(*nsel)++] = (int32_t)i;
    }
    return rc;
}

static int run(mor *m, mfile **byk, int64_t n, mcdc_error *err) {
    const silver_merge_in *in = m->in;
    mfile **act = mcdc_calloc((size_t)(n ? n : 1), sizeof *act);
    m->sel = mcdc_calloc(SILVER_BATCH_ROWS, sizeof *m->sel);
    int rc = act && m->sel ? MCDC_OK : nomem(err);
    int64_t next = 0, nact = 0;
    if (rc == MCDC_OK) rc = silver_sorter_rewind(in->changes, false, err);
    /* only the images are copied, once, into the new files' batches */
    silver_sorter_defer_rows(in->changes, true);
    const silver_chunk *ch = NULL;
    mcdc_progress_tracker *t = in->ctx ? in->ctx->progress : NULL;
    int64_t closed = 0; /* files passed: a part each */
    while (rc == MCDC_OK && (rc = silver_sorter_next(in->changes, &ch, err)) == MCDC_OK && ch) {
        MCDC_ASSERT(ch->n <= SILVER_BATCH_ROWS);
        mcdc_progress_add(t, ch->n, 0);
        int32_t nsel = 0;
        for (int64_t i = 0; rc == MCDC_OK && i < ch->n; i++) {
            const uint8_t *k = ch->key[i];
            size_t kn = ch->key_len[i];
            /* files whose range starts at or below k join; those ending below leave */
            while (next < n && silver_key_cmp_fast(byk[next]->e->min_key, byk[next]->e->min_len, k, kn) <= 0)
                act[nact++] = byk[next++];
            int64_t w = 0;
            for (int64_t a = 0; a < nact && rc == MCDC_OK; a++) {
                if (silver_key_cmp_fast(act[a]->e->max_key, act[a]->e->max_len, k, kn) < 0) {
                    rc = file_close(act[a], err);
                    mcdc_progress_part_done(t);
                    closed++;
                } else
                    act[w++] = act[a];
            }
            nact = w;
            if (rc == MCDC_OK) rc = one_change(m, act, nact, ch, i, &nsel, err);
        }
        if (rc == MCDC_OK && nsel > 0) rc = write_images(m, ch, nsel, err);
    }
    for (int64_t a = 0; a < nact && rc == MCDC_OK; a++) rc = file_close(act[a], err);
    if (rc == MCDC_OK) rc = end_file(m, err);
    if (rc == MCDC_OK) mcdc_progress_parts_add(t, n - closed); /* the rest: passed at the end */
    mcdc_free(act);
    mcdc_free(m->sel);
    m->sel = NULL;
    return rc;
}

/* Should this pass fold the silver back copy-on-write (docs/silver.md)? */
static bool decayed(mfile *const *byk, int64_t n, const char **why) {
    int64_t loose = 0;
    const mfile *last = NULL; /* the last clustered file */
    for (int64_t i = 0; i < n; i++) {
        const mfile *f = byk[i];
        if (f->dv_rows * SILVER_MOR_FOLD_DV_SHARE > f->e->rows) {
            *why = "a file's deletion vector deletes more than a third of its rows";
            return true;
        }
        if (last && silver_key_cmp(f->e->min_key, f->e->min_len, last->e->max_key,
                                   last->e->max_len) <= 0)
            loose++;
        else
            last = f;
    }
    int64_t cap = n / 4 > SILVER_MOR_FOLD_FILES ? n / 4 : SILVER_MOR_FOLD_FILES;
    if (loose > cap) {
        *why = "more files merge-on-read wrote than the policy keeps";
        return true;
    }
    return false;
}

int silver_mor_run(silver_merge_out *out, const silver_merge_in *in, mcdc_error *err) {
    MCDC_ASSERT(silver_mor_wanted(in));
    memset(out, 0, sizeof *out);
    mor m = {.in = in, .out = out};
    m.file_rows = in->file_rows > 0 ? in->file_rows : SILVER_FILE_ROWS_DEFAULT;
    const mcdc_schema *vs = mcdc_table_view_schema(in->view);
    mcdc_schema *ks = NULL;
    int rc = mcdc_schema_create(&ks, in->n_keys, err);
    for (int32_t k = 0; rc == MCDC_OK && k < in->n_keys; k++) {
        int32_t j = mcdc_schema_find(in->out_schema, in->keys[k]);
        m.view_keys[k] = mcdc_schema_find(vs, in->keys[k]);
        MCDC_ASSERT(j >= 0);
        if (m.view_keys[k] < 0)
            rc = mcdc_error_set(err, MCDC_E_SCHEMA, "silver table %s has no key column '%s'",
                                mcdc_table_name(in->target), in->keys[k]);
        const mcdc_field *f = &in->out_schema->fields[j];
        if (rc == MCDC_OK)
            rc = mcdc_schema_set(ks, k, f->name, f->type, f->precision, f->scale, f->byte_width,
                                 true, err);
        m.cols[k] = vs->fields[m.view_keys[k] < 0 ? 0 : m.view_keys[k]].name;
    }
    m.cols[in->n_keys] = "_start_lsn";
    silver_index old = {0};
    if (rc == MCDC_OK) rc = silver_index_load(&old, mcdc_table_storage(in->target), ks, err);
    mcdc_schema_unref(ks);
    size_t nf = mcdc_table_view_file_count(in->view);
    mfile *files = rc ? NULL : mcdc_calloc(nf ? nf : 1, sizeof *files);
    mfile **byk = rc ? NULL : mcdc_calloc(nf ? nf : 1, sizeof *byk);
    if (rc == MCDC_OK && (!files || !byk)) rc = nomem(err);
    /* a lower bound of the changes' LSNs (repairs' L included): at worst a
     * file reads its _start_lsn that need not */
    if (rc == MCDC_OK) silver_sorter_min_lsn(in->changes, m.min_change_lsn);
    /* every live file known and in key order, else copy-on-write writes them */
    const char *why = NULL;
    int64_t n = 0;
    for (size_t i = 0; rc == MCDC_OK && i < nf && !why; i++) {
        mcdc_table_file tf = mcdc_table_view_file(in->view, i);
        files[i].path = tf.path;
        files[i].dv_rows = tf.dv_rows;
        files[i].e = (silver_entry *)silver_index_find(&old, tf.path);
        if (files[i].e == NULL || !files[i].e->sorted) why = "a file the index does not know in key order";
        else if (files[i].e->rows > 0) byk[n++] = &files[i];
        if (!why) plan_lsn(&m, &files[i], &tf);
    }
    if (rc == MCDC_OK && n > 1) qsort(byk, (size_t)n, sizeof *byk, by_min);
    if (rc == MCDC_OK && !why) decayed(byk, n, &why);
    if (rc == MCDC_OK && why) {
        mcdc_log(MCDC_LOG_INFO, "%s: merging copy-on-write: %s", mcdc_table_name(in->target), why);
        mcdc_free(files);
        mcdc_free(byk);
        silver_index_clear(&old);
        return silver_merge_run(out, in, err);
    }
    out->mor = true;
    int64_t t0 = mcdc_monotonic_us();
    if (rc == MCDC_OK) rc = mcdc_appender_open(&out->appender, in->target, in->out_schema, in->props, err);
    /* the new index: the old one's keys, the live files' entries, then the new files' */
    if (rc == MCDC_OK) {
        out->index.n_keys = old.n_keys;
        out->index.key_names = old.key_names;
        out->index.key_types = old.key_types;
        old.key_names = NULL;
        old.key_types = NULL;
        out->index.built_at = mcdc_table_view_version(in->view) + 1;
        rc = silver_writer_start(&m.wq, out->appender, err);
        if (rc == MCDC_OK) rc = run(&m, byk, n, err);
        if (rc == MCDC_OK && in->ctx) /* files without rows: nothing to pass */
            mcdc_progress_parts_add(in->ctx->progress, (int64_t)nf - n);
        int wrc = silver_writer_finish(&m.wq, rc ? NULL : err);
        if (rc == MCDC_OK) rc = wrc;
        /* the files ended, in order: the entries run made (the only ones yet) */
        if (rc == MCDC_OK && m.wq.n_paths != out->index.n)
            rc = mcdc_error_set(err, MCDC_E_CORRUPT, "merge-on-read ended %lld files but wrote %lld "
                                "entries for them", (long long)m.wq.n_paths, (long long)out->index.n);
        for (int64_t i = 0; rc == MCDC_OK && i < out->index.n; i++) {
            mcdc_free(out->index.entries[i].path);
            out->index.entries[i].path = m.wq.paths[i];
            m.wq.paths[i] = NULL;
        }
        silver_writer_free(&m.wq);
    }
    out->read_us = mcdc_monotonic_us() - t0;
    /* the touched files: removed with their old DV, back with the new one */
    if (rc == MCDC_OK && (out->removes = mcdc_calloc(nf ? nf : 1, sizeof *out->removes)) == NULL)
        rc = nomem(err);
    if (rc == MCDC_OK && (out->readd_dvs = mcdc_calloc(nf ? nf : 1, sizeof *out->readd_dvs)) == NULL)
        rc = nomem(err);
    for (size_t i = 0; rc == MCDC_OK && i < nf; i++) {
        mfile *f = &files[i];
        if (f->del == NULL) continue;
        if (out->dvw == NULL) rc = mcdc_dv_writer_create(&out->dvw, err);
        if (rc == MCDC_OK) rc = mcdc_dv_writer_add(out->dvw, f->del, &out->readd_dvs[out->n_removes], err);
        if (rc == MCDC_OK && (out->removes[out->n_removes] = mcdc_strdup(f->path)) == NULL)
            rc = nomem(err);
        if (rc == MCDC_OK) out->n_removes++;
    }
    if (rc == MCDC_OK && out->dvw)
        rc = mcdc_dv_writer_finish(out->dvw, mcdc_table_storage(in->target), &out->dv_key, err);
    /* entries stay bounds of files whose DV grew (rows: an upper bound) */
    for (size_t i = 0; rc == MCDC_OK && i < nf; i++) rc = silver_index_add(&out->index, files[i].e, err);
    if (rc == MCDC_OK) silver_index_sort(&out->index);
    out->write_us = mcdc_monotonic_us() - t0 - out->read_us;
    out->changed = rc == MCDC_OK && (out->n_removes > 0 || out->files_written > 0);
    if (rc == MCDC_OK && out->changed && in->ctx && mcdc_ctx_crash(in->ctx, "during_merge", in->unit))
        rc = mcdc_error_set(err, MCDC_E_CANCELLED, "killed at crash point during_merge of unit %lld "
                            "(test hook)", (long long)in->unit);
    for (size_t i = 0; files && i < nf; i++) {
        if (files[i].r || files[i].b) file_close(&files[i], NULL);
        mcdc_dv_bitmap_free(files[i].del);
    }
    mcdc_free(files);
    mcdc_free(byk);
    mcdc_buf_free(&m.first_key);
    mcdc_buf_free(&m.last_key);
    silver_index_clear(&old);
    if (rc) {
        if (out->dv_key) mcdc_storage_delete(mcdc_table_storage(in->target), out->dv_key, NULL);
        silver_merge_out_free(out);
        mcdc_error_wrap(err, "merging on read into %s", mcdc_table_name(in->target));
    }
    return rc;
}
